"""``tapegrad.nn.functional``: activations and losses (PyTorch's ``torch.nn.functional``).

Every loss and activation is one row of the array-op table (``tapegrad/ops/nn_ops.py``) with
PyTorch's node name (``NllLossBackward0``, ``MseLossBackward0``, ``GeluBackward0``, ...): a
NumPy forward, numerically stable (log-sum-exp, ``log(1 + exp(-x))`` as ``logaddexp``), and
a vjp written in tapegrad ops, so each is differentiable to any order (``create_graph=True``).
``dropout`` is a multiply by a constant mask; ``linear``, ``softmax`` and ``log_softmax`` are
the core's array ops (``tg.linear``, ``Tensor.softmax``).
"""
from __future__ import annotations

import inspect

import numpy as np

from ..core.dtypes import scalar_type_name
from ..core.elementwise import FUNCTIONS as _ELEMENTWISE
from ..ops import torch_api as _api
from ..ops.array_ops import call
from ..ops.nn_array_ops import pool_divisor, pool_padding, window_max
from ..ops.factories import rand
from ..ops.nn_ops import check_reduction
from ..core.tensor import Tensor, wrap
from .values import set_value, value as _val

__all__ = ["relu", "tanh", "sigmoid", "leaky_relu", "softplus", "gelu", "silu", "elu", "softmax",
           "log_softmax", "linear", "dropout", "mse_loss", "l1_loss", "smooth_l1_loss", "nll_loss",
           "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits",
           "huber_loss", "layer_norm", "batch_norm", "embedding", "conv1d", "conv2d",
           "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "pad", "dropout1d",
           "dropout2d", "dropout3d", "hardtanh", "relu6", "selu", "celu", "mish", "softsign",
           "logsigmoid", "softmin", "hardswish", "hardsigmoid", "tanhshrink", "softshrink",
           "hardshrink", "threshold", "glu", "prelu", "normalize", "cosine_similarity",
           "pairwise_distance", "one_hot", "kl_div", "soft_margin_loss", "multi_margin_loss",
           "multilabel_soft_margin_loss", "margin_ranking_loss",
           "poisson_nll_loss", "gaussian_nll_loss", "hinge_embedding_loss",
           "cosine_embedding_loss", "triplet_margin_loss", "conv_transpose1d",
           "conv_transpose2d", "group_norm", "instance_norm", "interpolate", "pixel_shuffle",
           "pixel_unshuffle", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
           "adaptive_max_pool1d", "adaptive_max_pool2d", "scaled_dot_product_attention",
           "unfold", "fold", "rms_norm", "bilinear", "pdist", "alpha_dropout",
           "feature_alpha_dropout", "rrelu", "channel_shuffle", "relu_", "elu_", "leaky_relu_",
           "hardtanh_", "selu_", "celu_", "threshold_", "rrelu_", "gumbel_softmax",
           "triplet_margin_with_distance_loss", "lp_pool1d", "lp_pool2d",
           "local_response_norm", "embedding_bag", "conv3d", "conv_transpose3d"]


# -- activations -----------------------------------------------------------------------
def relu(input, inplace=False):
    """max(x, 0) elementwise (``ReluBackward0``)."""
    return input.relu()


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """x if x > 0 else negative_slope * x (``LeakyReluBackward0``)."""
    return call("leaky_relu", input, negative_slope=negative_slope)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, computed stably; x itself where beta x > threshold
    (``SoftplusBackward0``)."""
    return call("softplus", input, beta=beta, threshold=threshold)


def gelu(input, approximate="none"):
    """x Phi(x) with Phi the standard normal CDF; ``approximate="tanh"`` uses
    0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (``GeluBackward0``)."""
    if approximate not in ("none", "tanh"):
        raise RuntimeError("approximate argument must be either none or tanh.")
    return call("gelu", input, approximate=approximate)


def silu(input, inplace=False):
    """x sigmoid(x) (``SiluBackward0``)."""
    return call("silu", input)


def elu(input, alpha=1.0, inplace=False):
    """x if x > 0 else alpha (exp(x) - 1) (``EluBackward0``)."""
    return call("elu", input, alpha=alpha)


def _softmax_dim(ndim):
    # PyTorch's implicit choice (deprecated there): dim 0 for 0-, 1- and 3-d inputs, else 1.
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x) / sum(exp(x)) along ``dim``, computed stably (``SoftmaxBackward0``; the core's
    ``Tensor.softmax``)."""
    if dim is None:
        dim = _softmax_dim(input.ndim)
    return _api.softmax(_with_dtype(input, dtype), dim)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """x - logsumexp(x) along ``dim``, computed stably (``LogSoftmaxBackward0``; the core's
    ``Tensor.log_softmax``)."""
    if dim is None:
        dim = _softmax_dim(input.ndim)
    return _api.log_softmax(_with_dtype(input, dtype), dim)


def _with_dtype(input, dtype):
    """``input`` cast to ``dtype`` first (PyTorch's ``dtype=`` argument; ``ToCopyBackward0``)."""
    if dtype is None:
        return input
    np_dtype = getattr(dtype, "np", None) or np.dtype(dtype)
    return input if _val(input).dtype == np_dtype else call("to_dtype", input, np_dtype)


# -- layers ----------------------------------------------------------------------------
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` as one op: the core's fused ``tg.linear``
    (``AddmmBackward0`` for 2-d input, ``MmBackward0`` without bias)."""
    return _api.linear(input, weight, bias)


def _check_probability(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input, p=0.5, training=True, inplace=False):
    """Inverted dropout: in training, zero each element with probability ``p`` and scale the
    rest by 1/(1-p) (one ``MulBackward0`` node, as PyTorch on CPU); the identity otherwise
    (returns ``input`` itself).  The mask comes from tapegrad's generator (``tg.rand``), so
    ``tg.manual_seed`` makes it reproducible."""
    _check_probability(p)
    if not training or p == 0.0:
        return input
    x = _val(input)
    if p == 1.0:
        scale = np.zeros(x.shape)
    else:
        u = np.asarray(rand(*x.shape)._value)
        scale = (u < 1.0 - p) * (1.0 / (1.0 - p))
    scale = scale.astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)
    return input * wrap(scale)   # MulBackward0, PyTorch's node on CPU


def _channel_dropout(input, p, training, inplace, batched_ndim, name):
    _check_probability(p)
    x = _val(input)
    if x.ndim not in (batched_ndim - 1, batched_ndim):
        raise RuntimeError(f"{name}: Expected {batched_ndim - 1}D or {batched_ndim}D input, "
                           f"but received a {x.ndim}D input")
    if not training or p == 0.0:
        return input
    lead = 2 if x.ndim == batched_ndim else 1
    shape = x.shape[:lead] + (1,) * (x.ndim - lead)
    if p == 1.0:
        scale = np.zeros(shape)
    else:
        u = np.asarray(rand(*shape)._value) if shape else np.asarray(rand(1)._value)[0]
        scale = (u < 1.0 - p) * (1.0 / (1.0 - p))
    return input * wrap(np.asarray(scale).astype(x.dtype if x.dtype.kind == "f" else np.float64))


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, L) [or (C, L)] with probability ``p`` (scaled by
    1/(1-p)) in training; the identity otherwise."""
    return _channel_dropout(input, p, training, inplace, 3, "dropout1d")


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, H, W) [or (C, H, W)] with probability ``p``."""
    return _channel_dropout(input, p, training, inplace, 4, "dropout2d")


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of (N, C, D, H, W) [or (C, D, H, W)] with probability ``p``."""
    return _channel_dropout(input, p, training, inplace, 5, "dropout3d")


def pad(input, pad, mode="constant", value=None):
    """Pad the last ``len(pad) // 2`` dims: ``pad = (left, right, top, bottom, ...)``, last dim
    first.  ``constant`` (``value``, default 0; negative amounts crop:
    ``ConstantPadNdBackward0``), ``reflect`` (without the edge), ``replicate``, ``circular``
    (as PyTorch's, which limits these to the last 1-3 dims of a batched or unbatched
    input)."""
    pad = tuple(int(p) for p in pad)
    x = _val(input)
    if len(pad) % 2:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > x.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the "
                           f"input dimension but got padding length {len(pad)} and input of "
                           f"dimension {x.ndim}")
    if mode == "constant":
        return call("constant_pad", input, pad=pad, value=0.0 if value is None else float(value))
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    k = len(pad) // 2
    if x.ndim not in (k + 1, k + 2) or k > 3:
        raise NotImplementedError(f"Padding size {len(pad)} is not supported for {x.ndim}D "
                                  "input tensor.")
    for i in range(k):
        n, lo, hi = x.shape[x.ndim - 1 - i], pad[2 * i], pad[2 * i + 1]
        if (mode == "reflect" and (lo >= n or hi >= n)) or (mode == "circular" and
                                                             (lo > n or hi > n)):
            raise RuntimeError(f"Argument #4: Padding size should be less than the "
                               f"corresponding input dimension, but got: padding ({lo}, {hi}) "
                               f"at dimension {x.ndim - 1 - i} of input {list(x.shape)}")
    return call("index_pad", input, pad=pad, mode=mode)


# -- losses ----------------------------------------------------------------------------
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum, or elementwise) squared error (``MseLossBackward0``)."""
    check_reduction(reduction)
    return call("mse_loss", input, target, reduction=reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum, or elementwise) absolute error: ``(input - target).abs()`` reduced,
    PyTorch's composition op for op (``MeanBackward0`` over ``AbsBackward0`` over
    ``SubBackward0``; ``abs`` saves the difference, so a later in-place change of an operand
    does not reach the gradient)."""
    check_reduction(reduction)
    return _reduced((input - target).abs(), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """Huber-like loss: 0.5 d^2 / beta where |d| < beta, |d| - 0.5 beta elsewhere, with
    d = input - target; the L1 loss for beta = 0 (``SmoothL1LossBackward0``)."""
    check_reduction(reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    return call("smooth_l1_loss", input, target, reduction=reduction, beta=float(beta))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Cross-entropy between logits ``input`` (N, C) [or (C,), or (N, C, d1, ...)] and integer
    class ``target`` (N,) [or class probabilities shaped like ``input``].

    Class targets: one fused op (log-softmax + NLL, node ``NllLossBackward0``;
    ``NllLoss2DBackward0`` with spatial dimensions): the forward uses log-sum-exp, the
    gradient is ``(softmax - onehot) * w / N``.  ``weight`` (C,), ``ignore_index``,
    ``reduction`` and ``label_smoothing`` follow PyTorch (the weighted mean divides by the
    sum of the targets' weights).  Class probabilities: PyTorch's composition of ops
    (``_cross_entropy_probabilities``)."""
    check_reduction(reduction)
    if label_smoothing > 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    if isinstance(target, Tensor) and tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probabilities(input, target, weight, ignore_index, reduction,
                                            label_smoothing)
    return call("cross_entropy", input, target, weight, ignore_index=ignore_index,
                reduction=reduction, label_smoothing=float(label_smoothing))


def _cross_entropy_probabilities(input, target, weight, ignore_index, reduction,
                                 label_smoothing):
    """``cross_entropy`` with class probabilities (a target shaped like the input), PyTorch's
    composition op for op: ``-(log_softmax(input) * target * weight).sum()`` divided by the
    number of positions (``DivBackward1``), or that sum (``reduction="sum"``), or the sum over
    the class dim (``"none"``); a smoothed target is ``target (1 - s) + s / C``."""
    if not target.dtype.is_floating_point:
        raise RuntimeError("Expected floating point type for target with class probabilities, "
                           f"got {scalar_type_name(target.dtype.np)}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    dim = 0 if input.ndim == 1 else 1
    classes = input.shape[dim]
    if label_smoothing > 0.0:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    terms = log_softmax(input, dim) * target
    if weight is not None:
        shape = [1] * input.ndim
        shape[dim] = weight.shape[0]
        terms = terms * (weight.view(shape) if input.ndim > 1 else weight)
    if reduction == "none":
        return -terms.sum(dim)
    total = terms.sum()
    if reduction == "sum":
        return -total
    if input.numel() == 0:
        return -total.fill_(float("nan"))
    return -total / (input.numel() // classes)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of log-probabilities ``input`` (N, C) at integer ``target``
    (``NllLossBackward0``)."""
    check_reduction(reduction)
    return call("nll_loss", input, target, weight, ignore_index=ignore_index,
                reduction=reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Binary cross-entropy of logits, fused and stable (``BinaryCrossEntropyWithLogitsBackward0``):
    ``loss = (1 - y) x + (1 + (pw - 1) y) log(1 + exp(-x))`` with ``log(1 + exp(-x))``
    computed as ``logaddexp(0, -x)``.  Gradient: ``sigmoid(x) - y`` (times weights)."""
    check_reduction(reduction)
    return call("binary_cross_entropy_with_logits", input, target, weight, pos_weight,
                reduction=reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """Binary cross-entropy of probabilities ``input`` (logs clamped at -100, as PyTorch)
    (``BinaryCrossEntropyBackward0``)."""
    check_reduction(reduction)
    return call("binary_cross_entropy", input, target, weight, reduction=reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, delta (|d| - 0.5 delta) elsewhere, with d = input - target
    (``HuberLossBackward0``); ``weight`` multiplies the elementwise loss."""
    check_reduction(reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    if weight is None:
        return call("huber_loss", input, target, reduction=reduction, delta=float(delta))
    loss = call("huber_loss", input, target, reduction="none", delta=float(delta)) * weight
    return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()


# -- normalisation and embedding ------------------------------------------------------------
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last ``len(normalized_shape)`` dimensions (biased variance), then
    ``* weight + bias`` (``NativeLayerNormBackward0``)."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    return call("layer_norm", input, weight, bias, normalized_shape=tuple(normalized_shape),
                eps=float(eps))


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise each channel (dim 1) by the batch's mean and biased variance (``training``;
    the running statistics, when given, move by ``momentum`` towards the batch mean and the
    unbiased variance, in place) or by ``running_mean``/``running_var``
    (``NativeBatchNormBackward0``)."""
    x = _val(input)
    if x.ndim < 2:
        raise ValueError(f"expected 2D or higher input (got {x.ndim}D input)")
    if training:
        count = x.size // x.shape[1]
        if count <= 1:
            raise ValueError("Expected more than 1 value per channel when training, got input "
                             f"size {_api_size(x.shape)}")
        if running_mean is not None or running_var is not None:
            axes = (0,) + tuple(range(2, x.ndim))
            m = float(momentum)
            if running_mean is not None:
                set_value(running_mean, (1.0 - m) * _val(running_mean) + m * x.mean(axes))
            if running_var is not None:
                set_value(running_var, (1.0 - m) * _val(running_var)
                          + m * x.var(axes) * (count / (count - 1)))
        stats = None
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("running_mean and running_var must be defined in evaluation mode")
        stats = (np.array(_val(running_mean), np.float64), np.array(_val(running_var), np.float64))
    return call("batch_norm", input, weight, bias, stats=stats, eps=float(eps))


def _api_size(shape):
    return f"torch.Size({list(shape)})"


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """The rows of ``weight`` (V, D) at the integer indices ``input`` (``EmbeddingBackward0``);
    the row ``padding_idx`` gets no gradient.  ``max_norm``: the rows looked up are first
    rescaled in place to a ``norm_type`` norm of at most ``max_norm``, as PyTorch."""
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse are not supported")
    n = _val(weight).shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx + n if padding_idx < 0 else padding_idx
    if max_norm is not None:
        w = _val(weight)
        rows = np.unique(_val(input).astype(np.int64))
        norms = np.linalg.norm(w[rows], ord=norm_type, axis=1)
        big = norms > max_norm
        if big.any():
            new = w.copy()
            new[rows[big]] *= (max_norm / (norms[big] + 1e-7))[:, None]
            set_value(weight, new)
    idx = input if isinstance(input, Tensor) else wrap(np.asarray(input))
    return call("embedding", weight, idx, padding_idx=padding_idx)


# -- convolution and pooling ----------------------------------------------------------------
def _tuple(v, n, name="argument"):
    if isinstance(v, (tuple, list)):
        if len(v) == 1:
            return tuple(int(v[0]) for _ in range(n))
        if len(v) != n:
            raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} "
                               f"values to match the convolution dimensions, but got "
                               f"{name}={list(v)}")
        return tuple(int(a) for a in v)
    return (int(v),) * n


def _conv_padding(padding, kernel, dilation, stride):
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: '{padding}'")
        if any(s != 1 for s in stride):
            raise RuntimeError("padding='same' is not supported for strided convolutions")
        total = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in total)
    return tuple((p, p) for p in _tuple(padding, n, "padding"))


def _conv(nd, input, weight, bias, stride, padding, dilation, groups):
    w = _val(weight)
    stride, dilation = _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
    if any(s <= 0 for s in stride):
        raise RuntimeError("non-positive stride is not supported")
    pads = _conv_padding(padding, w.shape[2:], dilation, stride)
    unbatched = _val(input).ndim == nd + 1
    if unbatched:
        input = input.unsqueeze(0)
    out = call("conv", input, weight, bias, stride=stride, padding=pads, dilation=dilation,
               groups=int(groups))
    return out.squeeze(0) if unbatched else out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-d cross-correlation of ``input`` (N, C, L) [or (C, L)] with ``weight`` (O, C/groups,
    K) (``ConvolutionBackward0``); ``padding`` an int, a 1-tuple, "valid" or "same"."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-d cross-correlation of ``input`` (N, C, H, W) [or (C, H, W)] with ``weight``
    (O, C/groups, kH, kW) (``ConvolutionBackward0``): im2col and one BLAS matmul per group;
    its gradients are the transposed convolution and the weight correlation, themselves
    rows, so it differentiates to any order."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(nd, input, weight, bias, stride, padding, output_padding, groups, dilation):
    w = _val(weight)
    stride, dilation = _tuple(stride, nd, "stride"), _tuple(dilation, nd, "dilation")
    pad = _tuple(padding, nd, "padding")
    out_pad = _tuple(output_padding, nd, "output_padding")
    for op, s, d in zip(out_pad, stride, dilation):
        if op >= s and op >= d:
            raise RuntimeError("output padding must be smaller than either stride or dilation, "
                               f"but got output_padding: {list(out_pad)}, stride: "
                               f"{list(stride)}, dilation: {list(dilation)}")
    unbatched = _val(input).ndim == nd + 1
    if unbatched:
        input = input.unsqueeze(0)
    x = _val(input)
    if x.ndim != nd + 2 or x.shape[1] != w.shape[0]:
        raise RuntimeError(f"Given transposed=1, weight of size {list(w.shape)}, expected input"
                           f"{list(x.shape)} to have {w.shape[0]} channels, but got "
                           f"{x.shape[1] if x.ndim > 1 else 0} channels instead")
    spatial = tuple((n - 1) * s - 2 * p + d * (k - 1) + op + 1 for n, s, p, d, k, op in
                    zip(x.shape[2:], stride, pad, dilation, w.shape[2:], out_pad))
    shape = (x.shape[0], w.shape[1] * groups) + spatial
    out = call("conv_transpose", input, weight, bias, input_shape=shape, stride=stride,
               padding=tuple((p, p) for p in pad), dilation=dilation, groups=int(groups))
    return out.squeeze(0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """The transposed 1-d convolution (the gradient of ``conv1d`` in its input), weight
    (C_in, C_out/groups, K) (``ConvolutionBackward0``)."""
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-d cross-correlation of ``input`` (N, C, D, H, W) [or (C, D, H, W)] with ``weight``
    (O, C/groups, kD, kH, kW) (``ConvolutionBackward0``): ``conv2d``'s row in 3 dims."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """The transposed 3-d convolution (the gradient of ``conv3d`` in its input)."""
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """The transposed 2-d convolution (the gradient of ``conv2d`` in its input), weight
    (C_in, C_out/groups, kH, kW) (``ConvolutionBackward0``): matmul and col2im."""
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def _pool_args(input, kernel_size, stride, padding, dilation, ceil_mode):
    x = _val(input)
    if x.ndim not in (3, 4):
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor for input, but got: "
                           f"{list(x.shape)}")
    k = _tuple(kernel_size, 2, "kernel_size")
    s = k if stride is None or (isinstance(stride, (list, tuple)) and len(stride) == 0) \
        else _tuple(stride, 2, "stride")
    p, d = _tuple(padding, 2, "padding"), _tuple(dilation, 2, "dilation")
    for pi, ki, di in zip(p, k, d):
        if pi > (di * (ki - 1) + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={pi}, kernel_size={ki} and dilation={di}")
    pads = pool_padding(x.shape[-2:], k, s, p, d, ceil_mode)
    return x, k, s, p, d, pads


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum of each window of ``input`` (N, C, H, W) [or (C, H, W)]; padding counts as
    -inf (``MaxPool2DWithIndicesBackward0``).  ``return_indices``: also the flat position of
    each maximum in its H * W plane."""
    x, k, s, _, d, pads = _pool_args(input, kernel_size, stride, padding, dilation, ceil_mode)
    unbatched = x.ndim == 3
    out = call("max_pool2d", input, kernel_size=k, stride=s, padding=pads, dilation=d)
    if not return_indices:
        return out
    idx = window_max(x[None] if unbatched else x, k, s, pads, d)[1]
    return out, wrap(idx[0] if unbatched else idx)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    """The mean of each window of ``input`` (N, C, H, W) [or (C, H, W)], zero padding counted
    (``count_include_pad``) or not; ``divisor_override`` replaces the window size
    (``AvgPool2DBackward0``)."""
    x, k, s, p, _, pads = _pool_args(input, kernel_size, stride, padding, 1, ceil_mode)
    if divisor_override is not None:
        if divisor_override == 0:
            raise RuntimeError("divisor must be not zero")
        divisor = float(divisor_override)
    else:
        divisor = pool_divisor(x.shape[-2:], k, s, pads, count_include_pad, p)
    return call("avg_pool2d", input, kernel_size=k, stride=s, padding=pads, divisor=divisor)


def _pool1d(pool, input, kernel_size, stride, padding, *args, **kwargs):
    if _val(input).ndim not in (2, 3):
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input, but got: "
                           f"{list(_val(input).shape)}")
    one = lambda v: (1, _tuple(v, 1)[0])   # noqa: E731
    out = pool(input.unsqueeze(-2), one(kernel_size), None if stride is None else one(stride),
               (0, _tuple(padding, 1)[0]), *args, **kwargs)
    if isinstance(out, tuple):
        return out[0].squeeze(-2), out[1].squeeze(-2)
    return out.squeeze(-2)   # SqueezeBackward1, as PyTorch's


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """``max_pool2d`` over (N, C, 1, L) (``SqueezeBackward1``, as PyTorch)."""
    return _pool1d(max_pool2d, input, kernel_size, stride, padding, (1, _tuple(dilation, 1)[0]),
                   ceil_mode, return_indices)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    """``avg_pool2d`` over (N, C, 1, L) (``SqueezeBackward1``, as PyTorch)."""
    return _pool1d(avg_pool2d, input, kernel_size, stride, padding, ceil_mode, count_include_pad)


# -- more activations, composed of recorded ops (PyTorch records one fused node for most) ---
_where = _ELEMENTWISE["where"]


def _const_like(x, v):
    return wrap(np.asarray(v, dtype=_val(x).dtype if _val(x).dtype.kind == "f" else np.float64))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """``clamp(x, min_val, max_val)`` with gradient 0 at and beyond the bounds (PyTorch's)."""
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    # the value is clamp's (-0. stays -0. at min_val 0, NaN stays NaN), the gradient 0 at
    # and beyond the bounds (PyTorch's hardtanh_backward: x <= min or x >= max)
    outside = (input <= min_val) | (input >= max_val)
    return _where(outside, _ELEMENTWISE["clamp"](input.detach(), min_val, max_val), input)


def relu6(input, inplace=False):
    """``min(max(x, 0), 6)``."""
    return hardtanh(input, 0.0, 6.0)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(input, inplace=False):
    """``scale * elu(x, alpha)`` with the self-normalising constants."""
    return elu(input, _SELU_ALPHA) * _SELU_SCALE


def celu(input, alpha=1.0, inplace=False):
    """``max(0, x) + min(0, alpha (exp(x / alpha) - 1))``."""
    if alpha == 0:
        raise RuntimeError("ZeroDivisionError")
    return elu(input / alpha, 1.0) * alpha


def mish(input, inplace=False):
    """``x tanh(softplus(x))``."""
    return input * softplus(input).tanh()


def softsign(input):
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1.0)


def logsigmoid(input):
    """``log(sigmoid(x)) = -softplus(-x)``, computed stably."""
    return -softplus(-input)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    """``softmax(-x)`` along ``dim``."""
    return softmax(-input, dim, dtype=dtype)


def hardsigmoid(input, inplace=False):
    """``relu6(x + 3) / 6``, its gradient 1/6 strictly between -3 and 3 and 0 elsewhere, a
    NaN's too (PyTorch's ``hardsigmoid_backward``; its 1/6 is a float32 constant,
    0.1666666716, tapegrad's the float64 one)."""
    inside = (input > -3.0) & (input < 3.0)
    return _where(inside, (input + 3.0) / 6.0, relu6(input.detach() + 3.0) / 6.0)


def hardswish(input, inplace=False):
    """``x relu6(x + 3) / 6``: 0 (-0. for a negative x) below -3, ``x`` above 3 and for a
    NaN (gradient 1, as PyTorch's ``hardswish_backward``)."""
    inside = (input > -3.0) & (input < 3.0)
    # (the polynomial of x inside only: elsewhere its partials at inf or NaN times the
    # masked zero gradient would be NaN)
    x = _where(inside, input, _const_like(input, 0.0))
    return _where(inside, x * (x + 3.0) / 6.0,
                  _where(input <= -3.0, input.detach() * 0.0, input))


def tanhshrink(input):
    """``x - tanh(x)``."""
    return input - input.tanh()


def softshrink(input, lambd=0.5):
    """``x - lambd`` above ``lambd``, ``x + lambd`` below ``-lambd``, 0 between."""
    zero = _const_like(input, 0.0)   # (a NaN stays NaN with gradient 1, as PyTorch's)
    return _where(input > lambd, input - lambd,
                  _where(input < -lambd, input + lambd, _where(input != input, input, zero)))


def hardshrink(input, lambd=0.5):
    """``x`` where ``|x| > lambd``, else 0."""
    # (PyTorch's test, under which a NaN is kept, with gradient 1)
    return _where((input >= -lambd) & (input <= lambd), _const_like(input, 0.0), input)


def threshold(input, threshold, value, inplace=False):
    """``value`` where ``x <= threshold``, else ``x`` (a NaN kept, as PyTorch's)."""
    return _where(input <= threshold, _const_like(input, value), input)


def glu(input, dim=-1):
    """``a sigmoid(b)`` with ``a, b`` the halves of ``input`` along ``dim``."""
    n = _val(input).shape[dim]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim} is size {n}")
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def prelu(input, weight):
    """``x`` where ``x >= 0``, else ``weight * x``; ``weight`` has one entry or one per channel
    (dim 1)."""
    w = weight
    nd = _val(input).ndim
    if _val(weight).size > 1 and nd > 1:
        w = weight.reshape((1, -1) + (1,) * (nd - 2))
    return _where(input >= 0.0, input, w * input)


# -- distances and encodings ------------------------------------------------------------------
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``x / max(||x||_p, eps)`` along ``dim``."""
    n = _api.norm(input, p, dim, keepdim=True)
    return input / n.clamp(min=eps).expand_as(input)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``<x1, x2> / sqrt(max(|x1|^2 |x2|^2, eps^2))`` along ``dim`` (PyTorch's formula)."""
    w12 = (x1 * x2).sum(dim)
    w1, w2 = (x1 * x1).sum(dim), (x2 * x2).sum(dim)
    return w12 / (w1 * w2).clamp(min=eps * eps).sqrt()


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    """``||x1 - x2 + eps||_p`` along the last dim."""
    return _api.norm(x1 - x2 + eps, p, -1, keepdim=keepdim)


def one_hot(tensor, num_classes=-1):
    """int64 one-hot encodings of the integer ``tensor`` (a new last dim of ``num_classes``,
    or max + 1)."""
    t = _val(tensor)
    if t.dtype.kind not in "iu":
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if t.size and t.min() < 0:
        raise RuntimeError("Class values must be non-negative.")
    n = int(t.max()) + 1 if num_classes == -1 else int(num_classes)
    if t.size and t.max() >= n:
        raise RuntimeError("Class values must be smaller than num_classes.")
    return wrap((t[..., None] == np.arange(n)).astype(np.int64))


# -- more losses, composed of recorded ops --------------------------------------------------
def _reduced(loss, reduction):
    check_reduction(reduction)
    if reduction == "none":
        return loss
    return loss.sum() if reduction == "sum" else loss.mean()


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """``target (log target - input)`` elementwise (0 where ``target`` is 0; with
    ``log_target``, ``exp(target) (target - input)``); ``reduction="batchmean"`` divides the
    sum by the batch size."""
    if log_target:
        loss = target.exp() * (target - input)
    else:
        safe = _where(target > 0, target, _const_like(target, 1.0))
        loss = target * (safe.log() - input)
    if reduction == "batchmean":
        return loss.sum() / (_val(input).shape[0] if _val(input).ndim else 1)
    return _reduced(loss, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """``log(1 + exp(-y x))`` (one ``SoftMarginLossBackward0`` op, PyTorch's kernel: no
    threshold, so ``exp`` overflows to inf as there)."""
    check_reduction(reduction)
    if isinstance(target, Tensor) and target.requires_grad:
        raise RuntimeError("The function 'soft_margin_loss' is not differentiable with respect "
                           "to argument 'target'. This input cannot have requires_grad True.")
    shape = tuple(input.shape)
    both = tuple(np.broadcast_shapes(shape, tuple(np.shape(_val(target)))))
    if both != shape:   # (the result is written into a tensor of the input's shape)
        raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast shape "
                           f"{list(both)}")
    return call("soft_margin_loss", input, target, reduction=reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None,
                      reduce=None, reduction="mean"):
    """The multi-class hinge loss: per sample ``sum_{d != y} max(0, margin - x[y] + x[d])^p``
    (times ``weight[y]``) over the C classes, then reduced (one ``MultiMarginLossBackward0``
    op, PyTorch's kernel; its gradient has no derivative in PyTorch, nor here)."""
    check_reduction(reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.requires_grad:
        raise RuntimeError("The function 'multi_margin_loss' is not differentiable with respect "
                           "to argument 'weight'. This input cannot have requires_grad True.")
    shape = list(input.shape)
    if not (len(shape) == 0 or (len(shape) <= 2 and shape[-1] != 0)):
        raise RuntimeError("Expected non-empty vector or matrix with optional 0-dim batch size, "
                           f"but got: {shape}")
    if target.dtype.np != np.int64:
        raise RuntimeError(f"expected scalar type Long but found {scalar_type_name(target.dtype.np)}")
    samples = shape[0] if len(shape) == 2 else 1
    classes = shape[-1] if shape else 1
    if (len(shape) == 2 and (target.ndim != 1 or target.numel() != samples)) or \
            (len(shape) < 2 and target.numel() != 1):
        raise RuntimeError("multi_margin_loss: target tensor should be 1-D with size equal to the "
                           "number of input samples (batch size). Expected target size "
                           f"[{samples}], but got {list(target.shape)}. Input has shape {shape}.")
    if weight is not None and (weight.ndim != 1 or weight.numel() != classes):
        raise RuntimeError(f"inconsistent weight size, expected {classes} but got "
                           f"{list(weight.shape)}")
    t = _val(target)
    if t.size and (t.min() < 0 or t.max() >= classes):
        raise RuntimeError("target out of range")
    return call("multi_margin_loss", input, target, weight, p=int(p), margin=float(margin),
                reduction=reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None,
                                reduction="mean"):
    """``-(y logsigmoid(x) + (1 - y) logsigmoid(-x))``, weighted, averaged over the classes
    (the last dim), then reduced: PyTorch's composition, op for op."""
    check_reduction(reduction)
    loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum(dim=input.dim() - 1) / input.size(input.dim() - 1)
    return _reduced(loss, reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                        reduction="mean"):
    """``max(0, -y (x1 - x2) + margin)``."""
    return _reduced((-target * (input1 - input2) + margin).relu(), reduction)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None,
                         reduction="mean"):
    """``x`` where ``y == 1``, ``max(0, margin - x)`` where ``y == -1``."""
    zero = _const_like(input, 0.0)
    loss = _where(target == 1, input, zero) + _where(target == -1, (margin - input).relu(), zero)
    return _reduced(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8,
                     reduce=None, reduction="mean"):
    """``exp(x) - y x`` (``log_input``) or ``x - y log(x + eps)``; ``full`` adds Stirling's
    term ``y log y - y + log(2 pi y) / 2`` where ``y > 1``."""
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:   # Stirling's approximation of log(y!), where y > 1 (a function of y)
        big = target > 1
        safe = _where(big, target, _const_like(target, 1.0))
        st = safe * safe.log() - safe + (safe * (2 * np.pi)).log() * 0.5
        loss = loss + _where(big, st, _const_like(st, 0.0))
    return _reduced(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """``(log v + (x - y)^2 / v) / 2`` with ``v = max(var, eps)`` (clamped without a
    gradient, as PyTorch's), plus ``log(2 pi) / 2`` with ``full``."""
    if not isinstance(var, Tensor):
        var = wrap(np.full(_val(input).shape, float(var)))
    vv, xs = _val(var), _val(input).shape
    if vv.shape != xs:
        if xs[:-1] == vv.shape:
            var, vv = var.unsqueeze(-1), vv[..., None]
        elif not (xs[:-1] == vv.shape[:-1] and vv.shape[-1:] == (1,)):
            raise ValueError("var is of incorrect size")
    if np.any(vv < 0):
        raise ValueError("var has negative entry/entries")
    v = var + wrap(np.maximum(vv, eps) - vv)
    d = input - target
    loss = (v.log() + d * d / v) * 0.5
    if full:
        loss = loss + 0.5 * np.log(2 * np.pi)
    return _reduced(loss, reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None,
                          reduction="mean"):
    """``1 - cos(x1, x2)`` where ``y == 1``, ``max(0, cos(x1, x2) - margin)`` where
    ``y == -1`` (cos with 1e-12 added to each squared norm, as PyTorch's)."""
    prod = (input1 * input2).sum(-1)
    m1, m2 = (input1 * input1).sum(-1) + 1e-12, (input2 * input2).sum(-1) + 1e-12
    cos = prod / (m1 * m2).sqrt()
    zero = _const_like(cos, 0.0)
    loss = _where(target == 1, 1.0 - cos, zero) + _where(target == -1, (cos - margin).relu(),
                                                          zero)
    return _reduced(loss, reduction)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with ``d`` the pairwise distance."""
    dp = pairwise_distance(anchor, positive, p, eps)
    dn = pairwise_distance(anchor, negative, p, eps)
    if swap:
        dn = _ELEMENTWISE["minimum"](dn, pairwise_distance(positive, negative, p, eps))
    return _reduced((dp - dn + margin).relu(), reduction)



# -- group and instance normalisation, resampling --------------------------------------------
def _affine_channels(y, weight, bias):
    nd = _val(y).ndim
    shape = (1, -1) + (1,) * (nd - 2)
    if weight is not None:
        y = y * weight.reshape(shape)
    if bias is not None:
        y = y + bias.reshape(shape)
    return y


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """Normalise each group of ``C / num_groups`` channels of each sample (biased variance),
    then ``* weight + bias`` per channel (``layer_norm`` over the groups: PyTorch's node is
    ``NativeGroupNormBackward0``)."""
    shape = tuple(_val(input).shape)
    if len(shape) < 2 or shape[1] % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, "
                           f"but got input of shape {list(shape)} and num_groups={num_groups}")
    g = input.reshape(shape[0], num_groups, -1)
    y = layer_norm(g, (int(np.prod(shape[1:])) // num_groups,), eps=eps).reshape(shape)
    return _affine_channels(y, weight, bias)


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Normalise each channel of each sample over its positions (PyTorch's: ``batch_norm`` of
    the input seen as one sample of N * C channels; running statistics, when given, move by
    the mean over the samples)."""
    shape = tuple(_val(input).shape)
    n, c = shape[0], shape[1]
    flat = input.reshape((1, n * c) + shape[2:])
    rm = None if running_mean is None else wrap(np.tile(_val(running_mean), n))
    rv = None if running_var is None else wrap(np.tile(_val(running_var), n))
    y = batch_norm(flat, rm, rv, None, None, use_input_stats, momentum, eps).reshape(shape)
    if use_input_stats:
        if running_mean is not None:
            set_value(running_mean, _val(rm).reshape(n, c).mean(0))
        if running_var is not None:
            set_value(running_var, _val(rv).reshape(n, c).mean(0))
    return _affine_channels(y, weight, bias)


def _source_positions(n_in, n_out, scale, align_corners, linear):
    """PyTorch's source coordinate of each output position along one dimension."""
    dst = np.arange(n_out, dtype=np.float64)
    if not linear:   # nearest
        step = (1.0 / scale) if scale else n_in / n_out
        return np.minimum(np.floor(dst * step).astype(np.int64), n_in - 1)
    if align_corners:
        step = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        return dst * step
    step = (1.0 / scale) if scale else n_in / n_out
    return np.maximum(step * (dst + 0.5) - 0.5, 0.0)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resample the spatial dims: ``nearest`` (each output takes the input at
    ``floor(i * in / out)``), ``linear``/``bilinear`` (``align_corners`` as PyTorch), of a
    (N, C, L) or (N, C, H, W) input.  Built from ``index_select`` and weighted sums (PyTorch's
    nodes are ``UpsampleNearest2DBackward0``...)."""
    x = _val(input)
    dim = x.ndim - 2
    if mode not in ("nearest", "linear", "bilinear"):
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported")
    linear = mode != "nearest"
    if linear and align_corners is None:
        align_corners = False
    if not linear and align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    if (mode == "linear" and dim != 1) or (mode == "bilinear" and dim != 2):
        raise NotImplementedError(f"Got {x.ndim}D input, but {mode} mode needs "
                                  f"{3 if mode == 'linear' else 4}D input")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    if size is not None:
        out = tuple(size) if isinstance(size, (list, tuple)) else (int(size),) * dim
        scales = (None,) * dim
    else:
        scales = tuple(scale_factor) if isinstance(scale_factor, (list, tuple)) \
            else (float(scale_factor),) * dim
        out = tuple(int(np.floor(n * sc)) for n, sc in zip(x.shape[2:], scales))
        if recompute_scale_factor:
            scales = (None,) * dim
    y = input
    for k in range(dim):
        axis = 2 + k
        n_in, n_out = x.shape[axis], out[k]
        src = _source_positions(n_in, n_out, scales[k], align_corners, linear)
        if not linear:
            y = _api.index_select(y, axis, src)
            continue
        i0 = np.floor(src).astype(np.int64)
        i1 = np.minimum(i0 + 1, n_in - 1)
        w1 = (src - i0).reshape((-1,) + (1,) * (x.ndim - axis - 1))
        lo, hi = _api.index_select(y, axis, i0), _api.index_select(y, axis, i1)
        y = lo * _const_like(input, 1.0 - w1) + hi * _const_like(input, w1)
    return y


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r)."""
    shape = tuple(_val(input).shape)
    r = int(upscale_factor)
    *lead, c, h, w = shape
    if c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be "
                           f"divisible by the square of upscale_factor, but input.size(-3)={c} "
                           f"is not divisible by {r * r}")
    y = input.reshape(tuple(lead) + (c // (r * r), r, r, h, w))
    k = len(lead)
    y = y.permute(tuple(range(k)) + (k, k + 3, k + 1, k + 4, k + 2))
    return y.reshape(tuple(lead) + (c // (r * r), h * r, w * r))


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H r, W r) -> (*, C r^2, H, W)."""
    shape = tuple(_val(input).shape)
    r = int(downscale_factor)
    *lead, c, h, w = shape
    if h % r or w % r:
        raise RuntimeError("pixel_unshuffle expects height and width to be divisible by "
                           "downscale_factor")
    y = input.reshape(tuple(lead) + (c, h // r, r, w // r, r))
    k = len(lead)
    y = y.permute(tuple(range(k)) + (k, k + 2, k + 4, k + 1, k + 3))
    return y.reshape(tuple(lead) + (c * r * r, h // r, w // r))



# -- adaptive pooling -----------------------------------------------------------------------
def _adaptive(input, output_size, nd, reduce_name):
    """PyTorch's adaptive windows, ``[floor(i n / o), ceil((i + 1) n / o))`` per dimension,
    reduced one dimension at a time (means and maxima are separable over a box).  Sizes that
    divide the input use ``avg_pool2d`` / ``max_pool2d`` (``AvgPool2DBackward0``...)."""
    shape = tuple(_val(input).shape)
    if len(shape) not in (nd + 1, nd + 2):
        raise ValueError(f"adaptive_{reduce_name}_pool{nd}d(): Expected {nd + 1}D or {nd + 2}D "
                         f"tensor, but got {list(shape)}")
    spatial = shape[-nd:]
    out = output_size if isinstance(output_size, (tuple, list)) else (output_size,) * nd
    out = tuple(n if o is None else int(o) for o, n in zip(out, spatial))
    if nd == 2 and all(n % o == 0 for n, o in zip(spatial, out)):
        k = tuple(n // o for n, o in zip(spatial, out))
        return (avg_pool2d if reduce_name == "avg" else max_pool2d)(input, k, k)
    y = input
    for k, (n, o) in enumerate(zip(spatial, out)):
        axis = len(shape) - nd + k
        parts = []
        for i in range(o):
            lo, hi = (i * n) // o, -((-(i + 1) * n) // o)
            piece = _api.index_select(y, axis, np.arange(lo, hi))
            parts.append(piece.mean(axis, keepdim=True) if reduce_name == "avg"
                         else piece.amax(axis, keepdim=True))
        y = _api.cat(parts, axis)
    return y


def adaptive_avg_pool1d(input, output_size):
    """The mean of each of ``output_size`` adaptive windows along the last dim."""
    return _adaptive(input, output_size, 1, "avg")


def adaptive_avg_pool2d(input, output_size):
    """The mean of each window of an ``output_size`` grid of adaptive windows."""
    return _adaptive(input, output_size, 2, "avg")


def adaptive_max_pool1d(input, output_size, return_indices=False):
    """The maximum of each of ``output_size`` adaptive windows along the last dim."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool1d: return_indices is not supported")
    return _adaptive(input, output_size, 1, "max")


def adaptive_max_pool2d(input, output_size, return_indices=False):
    """The maximum of each window of an ``output_size`` grid of adaptive windows."""
    if return_indices:
        raise NotImplementedError("adaptive_max_pool2d: return_indices is not supported")
    return _adaptive(input, output_size, 2, "max")



def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """``softmax(q k^T * scale + mask) v`` over the last two dims (``scale`` defaults to
    ``1 / sqrt(d)``); a boolean ``attn_mask`` marks the pairs that take part (True), a float
    one is added; ``is_causal`` keeps the lower triangle."""
    q, k = _val(query), _val(key)
    L, S = q.shape[-2], k.shape[-2]
    sc = 1.0 / np.sqrt(q.shape[-1]) if scale is None else float(scale)
    scores = (query @ key.transpose(-2, -1)) * sc
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be "
                               "set when is_causal=True")
        attn_mask = np.tril(np.ones((L, S), bool))
    if attn_mask is not None:
        m = _val(attn_mask)
        if m.dtype == np.bool_:
            scores = scores + wrap(np.where(m, 0.0, -np.inf).astype(q.dtype))
        else:
            scores = scores + attn_mask
    weights = softmax(scores, -1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return weights @ value



def _block_args(kernel_size, dilation, padding, stride):
    return dict(kernel_size=_tuple(kernel_size, 2, "kernel_size"),
                dilation=_tuple(dilation, 2, "dilation"),
                padding=tuple((p, p) for p in _tuple(padding, 2, "padding")),
                stride=_tuple(stride, 2, "stride"))


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding blocks of (N, C, H, W) [or (C, H, W)] as columns (N, C kH kW, L)
    (``Im2ColBackward0``)."""
    return call("unfold", input, **_block_args(kernel_size, dilation, padding, stride))


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """Blocks (N, C kH kW, L) [or (C kH kW, L)] summed back into (N, C, *output_size): the
    adjoint of ``unfold`` (``Col2ImBackward0``)."""
    return call("fold", input, output_size=_tuple(output_size, 2, "output_size"),
                **_block_args(kernel_size, dilation, padding, stride))


# -- PyTorch's top-level names for these (``torch.conv2d``, ``torch.dropout``...) -----------
# (the package puts them in its namespace; some take their arguments in another order there)
def _torch_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
                      cudnn_enabled=True):
    return batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def _torch_instance_norm(input, weight, bias, running_mean, running_var, use_input_stats,
                         momentum, eps, cudnn_enabled=True):
    return instance_norm(input, running_mean, running_var, weight, bias, use_input_stats,
                         momentum, eps)


def _torch_embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    """``torch.embedding``: ``padding_idx`` -1 is none (``F.embedding`` passes it on so)."""
    return embedding(indices, weight, None if padding_idx < 0 else padding_idx,
                     scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)


def _torch_layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5,
                      cudnn_enable=True):
    return layer_norm(input, normalized_shape, weight, bias, eps)


def _torch_group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return group_norm(input, num_groups, weight, bias, eps)


def _torch_dropout(input, p, train):
    return dropout(input, p, train)


# -- more of PyTorch's functions: RMS norm, bilinear, pdist, alpha dropout, rrelu -------------
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``x / sqrt(mean(x**2 over the last len(normalized_shape) dims) + eps) * weight``
    (``eps`` None: the dtype's machine epsilon), a composition as PyTorch's."""
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    normalized_shape = tuple(int(n) for n in normalized_shape)
    k = len(normalized_shape)
    if tuple(input.shape[input.ndim - k:]) != normalized_shape or k > input.ndim:
        raise RuntimeError(f"Given normalized_shape={list(normalized_shape)}, expected input "
                           f"with shape [*, {', '.join(map(str, normalized_shape))}], but got "
                           f"input of size{list(input.shape)}")
    if eps is None:
        eps = float(np.finfo(_val(input).dtype).eps)
    dims = tuple(range(input.ndim - k, input.ndim))
    out = input * _api.FUNCTIONS["rsqrt"](_api.mean(input * input, dims, keepdim=True) + eps)
    return out if weight is None else out * weight


def bilinear(input1, input2, weight, bias=None):
    """``y_k = x1^T W_k x2 + b_k`` over the last dims (an ``einsum``)."""
    out = _api.einsum("...i,kij,...j->...k", input1, weight, input2)
    return out if bias is None else out + bias


def pdist(input, p=2):
    """The ``p``-norm distances between the rows of a 2-d input, for each pair ``i < j`` in
    order (the upper triangle of ``cdist(input, input)``, flattened)."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    i, j = np.triu_indices(input.shape[0], 1)
    diff = input[wrap(i)] - input[wrap(j)]
    return call("norm", diff, p=p, dim=(1,), keepdim=False)


_ALPHA_DROPOUT = 1.7580993408473766   # (-selu's scale * alpha: the value a dropped unit takes)


def _alpha_dropout(input, p, training, feature):
    _check_probability(p)
    if not training or p == 0.0:
        return input
    x = _val(input)
    if p == 1.0:
        return input * 0.0
    shape = x.shape if not feature else x.shape[:2] + (1,) * (x.ndim - 2)
    keep = (np.asarray(rand(*shape)._value) < 1.0 - p).astype(np.float64)
    a = 1.0 / np.sqrt((_ALPHA_DROPOUT ** 2 * p + 1.0) * (1.0 - p))
    # (PyTorch's: x * (keep a) + (keep - 1) alpha a + alpha a p)
    shift = (keep - 1.0) * (_ALPHA_DROPOUT * a) + _ALPHA_DROPOUT * a * p
    return input * wrap(keep * a) + wrap(shift)


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    """Dropout that keeps a SELU network's mean and variance: a dropped unit takes selu's
    negative saturation value, then an affine map restores the statistics."""
    return _alpha_dropout(input, p, training, False)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    """``alpha_dropout`` of whole channels (dim 1)."""
    return _alpha_dropout(input, p, training, True)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU with a random slope from ``U(lower, upper)`` per negative element in
    training, the mean slope ``(lower + upper) / 2`` otherwise."""
    if not training:
        return leaky_relu(input, (lower + upper) / 2.0)
    x = _val(input)
    u = np.asarray(rand(*x.shape)._value) if x.ndim else float(rand(1)._value[0])
    slope = np.where(x >= 0, 1.0, lower + (upper - lower) * u)
    return input * wrap(np.asarray(slope, x.dtype))


def channel_shuffle(input, groups):
    """The channels (dim 1) of ``groups`` groups interleaved: ``(g, c / g) -> (c / g, g)``."""
    n, c = input.shape[0], input.shape[1]
    if groups <= 0 or c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels "
                           f"and {groups} groups.")
    rest = tuple(input.shape[2:])
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(n, c, *rest)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """``softmax((logits + g) / tau)`` with Gumbel(0, 1) noise ``g`` (from tapegrad's
    generator); ``hard``: the one-hot of its argmax, with the soft sample's gradient
    (straight through)."""
    u = np.asarray(rand(*tuple(logits.shape))._value) if logits.ndim else \
        float(rand(1)._value[0])
    gumbels = -np.log(-np.log1p(-u))   # (-log of an Exponential(1) draw)
    y_soft = softmax((logits + wrap(np.asarray(gumbels, _val(logits).dtype))) / tau, dim)
    if not hard:
        return y_soft
    soft = _val(y_soft)
    d = dim % max(soft.ndim, 1)
    hard_sample = (np.arange(soft.shape[d]).reshape((-1,) + (1,) * (soft.ndim - d - 1)) ==
                   np.expand_dims(np.argmax(soft, d), d)).astype(soft.dtype)
    return wrap(hard_sample) - y_soft.detach() + y_soft


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None,
                                      margin=1.0, swap=False, reduction="mean"):
    """``max(d(a, p) - d(a, n) + margin, 0)`` with any distance ``d`` (``pairwise_distance``
    by default); ``swap``: ``d(a, n)`` is the smaller of it and ``d(p, n)``."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    if margin <= 0:
        raise ValueError(f"margin must be greater than 0, got {margin}")
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {anchor.ndim}D, "
                           f"positive {positive.ndim}D, and negative {negative.ndim}D inputs")
    distance = pairwise_distance if distance_function is None else distance_function
    dist_pos, dist_neg = distance(anchor, positive), distance(anchor, negative)
    if swap:
        dist_neg = _api.FUNCTIONS["minimum"](dist_neg, distance(positive, negative))
    return _reduced((dist_pos - dist_neg + margin).clamp_min(0.0), reduction)


def _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, avg_pool, max_pool, count):
    if norm_type == float("inf"):
        return max_pool(input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -float("inf"):
        return -max_pool(-input.abs(), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool(input ** norm_type, kernel_size, stride, 0, ceil_mode)
    return (out.sign() * relu(out.abs()) * count) ** (1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """The ``norm_type``-norm over each window: ``(sum of x**p) ** (1 / p)``, as PyTorch
    computes it from ``avg_pool1d`` (``inf``: the largest ``|x|``)."""
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, avg_pool1d, max_pool1d,
                    kernel_size)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """``lp_pool1d`` over 2-d windows."""
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
    return _lp_pool(input, norm_type, kernel_size, stride, ceil_mode, avg_pool2d, max_pool2d,
                    kh * kw)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """Each value divided by ``(k + alpha * mean of x**2 over the size channels around
    it) ** beta`` (channels are dim 1; the window is zero-padded at the ends)."""
    if input.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.ndim} "
                         "dimensions)")
    if input.numel() == 0:
        return input
    square = input * input
    pads = [0, 0] * (input.ndim - 2) + [size // 2, (size - 1) // 2]
    padded = pad(square, pads)
    c = input.shape[1]
    total = padded[:, 0:c]
    for j in range(1, size):
        total = total + padded[:, j:j + c]
    return input / ((total / size) * alpha + k) ** beta


def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """The sum, mean or max of the embeddings of each bag: the rows of a 2-d ``input``, or
    the runs of a 1-d ``input`` that ``offsets`` starts (the last offset ends the last bag with
    ``include_last_offset``).  ``per_sample_weights`` scale each embedding (``"sum"`` only);
    indices equal to ``padding_idx`` take no part; an empty bag gives zeros.  A composition of
    ``embedding`` and ``index_add`` (``scatter_reduce`` for ``"max"``)."""
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, but got {mode}")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. "
                                  f"per_sample_weights is only supported for mode='sum' (got "
                                  f"mode='{mode}'). Please open a feature request on GitHub.")
    idx = np.asarray(_val(input), np.int64)
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated "
                             "is a mini-batch of fixed length sequences. However, found offsets "
                             f"of type {type(offsets).__name__}")
        bags, length = idx.shape
        starts = np.arange(bags) * length
        idx = idx.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        starts = np.asarray(_val(offsets), np.int64).reshape(-1)
        if include_last_offset:
            starts = starts[:-1]
        bags = len(starts)
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension "
                         f"{idx.ndim}")
    n = len(idx)
    bag_of = np.searchsorted(starts, np.arange(n), side="right") - 1   # (each index's bag)
    keep = bag_of >= 0
    if padding_idx is not None:
        size = _val(weight).shape[0]
        keep &= idx != (padding_idx + size if padding_idx < 0 else padding_idx)
    rows = embedding(wrap(idx[keep]), weight, None, max_norm, norm_type)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[wrap(np.flatnonzero(keep))].unsqueeze(-1)
    dim = _val(weight).shape[1]
    zeros = wrap(np.zeros((bags, dim), _val(weight).dtype))
    where = wrap(bag_of[keep])
    if mode == "max":
        spread = wrap(np.repeat(bag_of[keep][:, None], dim, 1))
        return _api.scatter_reduce(zeros, 0, spread, rows, "amax", include_self=False)
    total = _api.index_add(zeros, 0, where, rows)
    if mode == "sum":
        return total
    counts = np.bincount(bag_of[keep], minlength=bags).astype(_val(weight).dtype)
    return total / wrap(np.maximum(counts, 1.0)[:, None])


def _inplace_form(fn, name):
    """``fn``'s in-place form: the result written into ``input`` (recorded as a copy into it
    where grad is on, under PyTorch's in-place rules)."""
    def inplace(input, *args, **kw):
        return input.copy_(fn(input, *args, **kw))
    inplace.__name__ = name
    inplace.__doc__ = f"In place ``{fn.__name__}``."
    return inplace


relu_ = _inplace_form(relu, "relu_")
elu_ = _inplace_form(elu, "elu_")
leaky_relu_ = _inplace_form(leaky_relu, "leaky_relu_")
hardtanh_ = _inplace_form(hardtanh, "hardtanh_")
selu_ = _inplace_form(selu, "selu_")
celu_ = _inplace_form(celu, "celu_")
threshold_ = _inplace_form(threshold, "threshold_")
rrelu_ = _inplace_form(rrelu, "rrelu_")


def _reduction_name(reduction):
    """PyTorch's top-level loss functions take the reduction as an int (0 none, 1 mean,
    2 sum)."""
    if isinstance(reduction, str):
        return reduction
    names = {0: "none", 1: "mean", 2: "sum"}
    if reduction not in names:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return names[reduction]


TORCH_NAMES = {
    "conv1d": conv1d, "conv2d": conv2d, "conv3d": conv3d, "conv_transpose1d": conv_transpose1d,
    "conv_transpose3d": conv_transpose3d,
    "conv_transpose2d": conv_transpose2d, "dropout": _torch_dropout,
    "layer_norm": _torch_layer_norm, "group_norm": _torch_group_norm,
    "batch_norm": _torch_batch_norm, "instance_norm": _torch_instance_norm,
    "embedding": _torch_embedding, "max_pool1d": max_pool1d, "max_pool2d": max_pool2d,
    "avg_pool1d": avg_pool1d, "adaptive_avg_pool1d": adaptive_avg_pool1d,
    "selu": selu, "celu": celu,
    "threshold": threshold, "pixel_shuffle": pixel_shuffle, "pixel_unshuffle": pixel_unshuffle,
    "hardshrink": hardshrink, "prelu": prelu, "pairwise_distance": pairwise_distance,
    "rms_norm": rms_norm, "bilinear": bilinear, "pdist": pdist, "channel_shuffle": channel_shuffle,
    "alpha_dropout": lambda input, p, train: alpha_dropout(input, p, train),
    "feature_alpha_dropout": lambda input, p, train: feature_alpha_dropout(input, p, train),
    "feature_dropout": lambda input, p, train: _channel_dropout(input, p, train, False,
                                                                _val(input).ndim,
                                                                "feature_dropout"),
    "rrelu": lambda input, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None:
        rrelu(input, lower, upper, training),
    "constant_pad_nd": lambda input, pad, value=0: globals()["pad"](input, pad, value=value),
    "selu_": selu_, "celu_": celu_, "threshold_": threshold_, "rrelu_": rrelu_,
    "kl_div": lambda input, target, reduction=1, *, log_target=False:
        kl_div(input, target, reduction=_reduction_name(reduction), log_target=log_target),
    "cosine_embedding_loss": lambda input1, input2, target, margin=0.0, reduction=1:
        cosine_embedding_loss(input1, input2, target, margin,
                              reduction=_reduction_name(reduction)),
    "margin_ranking_loss": lambda input1, input2, target, margin=0.0, reduction=1:
        margin_ranking_loss(input1, input2, target, margin, reduction=_reduction_name(reduction)),
    "hinge_embedding_loss": lambda input, target, margin=1.0, reduction=1:
        hinge_embedding_loss(input, target, margin, reduction=_reduction_name(reduction)),
    "triplet_margin_loss": lambda anchor, positive, negative, margin=1.0, p=2.0, eps=1e-6,
    swap=False, reduction=1: triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                                 reduction=_reduction_name(reduction)),
    "poisson_nll_loss": lambda input, target, log_input, full, eps, reduction:
        poisson_nll_loss(input, target, log_input, full, eps=eps,
                         reduction=_reduction_name(reduction)),
    "binary_cross_entropy_with_logits": lambda input, target, weight=None, pos_weight=None,
    reduction=1: binary_cross_entropy_with_logits(input, target, weight,
                                                  reduction=_reduction_name(reduction),
                                                  pos_weight=pos_weight),
}



# -- ``inplace=True``: the result written into the input, as PyTorch's --------------------------
def _writing_input_when_inplace(fn, composed=False):
    """``fn`` whose ``inplace=True`` writes the result into ``input`` and returns ``input``
    (PyTorch's ``relu_``...: what else holds ``input`` sees the new values; a leaf that
    requires grad, or a value an earlier op saved, is refused as by any in-place op).
    ``composed``: ``fn`` is made of elementwise ops that save ``input`` itself, so it reads a
    clone (PyTorch's fused node saves the original there)."""
    position = list(inspect.signature(fn).parameters).index("inplace")

    def function(input, *args, **kw):
        inplace = kw.get("inplace", False) if len(args) < position else args[position - 1]
        out = fn(input.clone() if inplace and composed else input, *args, **kw)
        if not inplace or out is input:
            return out
        return input.copy_(out)
    function.__name__, function.__doc__, function.__wrapped__ = fn.__name__, fn.__doc__, fn
    return function


mish = _writing_input_when_inplace(mish, composed=True)
for _name in ("relu", "leaky_relu", "silu", "elu", "hardtanh", "relu6", "selu", "celu",
              "hardsigmoid", "hardswish", "threshold", "rrelu", "dropout", "dropout1d",
              "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"):
    globals()[_name] = _writing_input_when_inplace(globals()[_name])
del _name
