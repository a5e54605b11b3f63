"""``tapegrad.nn.functional``: activations and losses (PyTorch's ``torch.nn.functional``).

Every loss and activation is one row of the array-op table (``tapegrad/ops/nn_ops.py``) with
PyTorch's node name (``NllLossBackward0``, ``MseLossBackward0``, ``GeluBackward0``, ...): a
NumPy forward, numerically stable (log-sum-exp, ``log(1 + exp(-x))`` as ``logaddexp``), and
a vjp written in tapegrad ops, so each is differentiable to any order (``create_graph=True``).
``dropout`` is a multiply by a constant mask; ``linear``, ``softmax`` and ``log_softmax`` are
the core's array ops (``tg.linear``, ``Tensor.softmax``).
"""
from __future__ import annotations

import numpy as np

from ..ops import torch_api as _api
from ..ops.array_ops import call
from ..ops.factories import rand
from ..ops.nn_ops import check_reduction
from ..core.tensor import wrap
from .values import value as _val

__all__ = ["relu", "tanh", "sigmoid", "leaky_relu", "softplus", "gelu", "silu", "elu", "softmax",
           "log_softmax", "linear", "dropout", "mse_loss", "l1_loss", "smooth_l1_loss", "nll_loss",
           "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits"]


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


def dropout(input, p=0.5, training=True, inplace=False):
    """Inverted dropout: in training, zero each element with probability ``p`` and scale the
    rest by 1/(1-p) (one ``MulBackward0`` node, as PyTorch on CPU); the identity otherwise
    (returns ``input`` itself).  The mask comes from tapegrad's generator (``tg.rand``), so
    ``tg.manual_seed`` makes it reproducible."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
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


# -- losses ----------------------------------------------------------------------------
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum, or elementwise) squared error (``MseLossBackward0``)."""
    check_reduction(reduction)
    return call("mse_loss", input, target, reduction=reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum, or elementwise) absolute error (one ``L1LossBackward0`` op; PyTorch
    records ``MeanBackward0`` over ``AbsBackward0``)."""
    check_reduction(reduction)
    return call("l1_loss", input, target, reduction=reduction)


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

    One fused op (log-softmax + NLL, node ``NllLossBackward0``; ``NllLoss2DBackward0`` with
    spatial dimensions): the forward uses log-sum-exp, the gradient is
    ``(softmax - onehot) * w / N``.  ``weight`` (C,), ``ignore_index``, ``reduction`` and
    ``label_smoothing`` follow PyTorch (the weighted mean divides by the sum of the targets'
    weights)."""
    check_reduction(reduction)
    return call("cross_entropy", input, target, weight, ignore_index=ignore_index,
                reduction=reduction, label_smoothing=float(label_smoothing))


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
