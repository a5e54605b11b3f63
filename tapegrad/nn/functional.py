"""``tapegrad.nn.functional``: activations and losses (PyTorch's ``torch.nn.functional``).

Every loss, ``dropout`` and ``leaky_relu`` is ONE recorded op (a ``pyfunc`` entry made with
``tapegrad.functions.apply``) whose backward is NumPy code, with PyTorch's node names
(``NllLossBackward0``, ``MseLossBackward0``, ...).  Fusing keeps them numerically stable
(log-sum-exp, ``log(1 + exp(-x))`` as ``logaddexp``) and makes each one tape entry instead of a
dozen.  Loss gradients are computed only for the inputs that require grad.  ``linear``,
``softmax`` and ``log_softmax`` are the core's array ops (``tg.linear``, ``Tensor.softmax``).
"""
from __future__ import annotations

import numpy as np

from ..ops import torch_api as _api
from ..ops.factories import rand
from ..core.pyop import unbroadcast
from ..ops.array_ops import apply
from .values import needs_grad, value as _val

__all__ = ["relu", "tanh", "sigmoid", "leaky_relu", "softmax", "log_softmax", "linear",
           "dropout", "mse_loss", "l1_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
           "binary_cross_entropy_with_logits"]

_REDUCTIONS = ("none", "mean", "sum")


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
    x = _val(input)
    pos = x > 0
    out = np.where(pos, x, x * negative_slope)

    def backward(g):
        return [np.where(pos, g, np.asarray(g) * negative_slope)]

    return apply("LeakyReluBackward0", [input], out, backward)


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
    x = _val(input)
    np_dtype = getattr(dtype, "np", None) or np.dtype(dtype)
    if x.dtype == np_dtype:
        return input
    return apply("ToCopyBackward0", [input], x.astype(np_dtype),
                 lambda g: [np.asarray(g).astype(x.dtype)])


def _log_softmax_np(a, d):
    z = a - a.max(axis=d, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=d, keepdims=True))


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
        u = np.asarray(rand(*x.shape)._v)
        scale = (u < 1.0 - p) * (1.0 / (1.0 - p))
    scale = scale.astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)
    out = x * scale

    def backward(g):
        return [np.asarray(g) * scale]

    return apply("MulBackward0", [input], out, backward)   # PyTorch's name on CPU


# -- losses ----------------------------------------------------------------------------
def _check_reduction(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _reduce(loss, reduction, denom=None):
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return loss.sum() / (loss.size if denom is None else denom)


def _dloss(g, reduction, shape, denom=None):
    """d(reduced loss)/d(elementwise loss) times the incoming gradient ``g``."""
    if reduction == "none":
        return np.asarray(g).reshape(shape)
    g = float(g)
    if reduction == "mean":
        n = float(np.prod(shape)) if denom is None else denom
        with np.errstate(invalid="ignore", divide="ignore"):
            g = g / n
    return g


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum, or elementwise) squared error (``MseLossBackward0``)."""
    _check_reduction(reduction)
    x, y = _val(input), _val(target)
    d = x - y
    out = _reduce(d * d, reduction)
    ni, nt = needs_grad(input), needs_grad(target)

    def backward(g):
        gd = 2.0 * d * _dloss(g, reduction, d.shape)
        return [unbroadcast(gd, x.shape) if ni else None,
                unbroadcast(-gd, y.shape) if nt else None]

    return apply("MseLossBackward0", [input, target], out, backward)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Mean (or sum, or elementwise) absolute error (``L1LossBackward0``... PyTorch names the
    node ``MeanBackward0``/``AbsBackward0`` chain; here it is one op)."""
    _check_reduction(reduction)
    x, y = _val(input), _val(target)
    d = x - y
    out = _reduce(np.abs(d), reduction)
    ni, nt = needs_grad(input), needs_grad(target)

    def backward(g):
        gd = np.sign(d) * _dloss(g, reduction, d.shape)
        return [unbroadcast(gd, x.shape) if ni else None,
                unbroadcast(-gd, y.shape) if nt else None]

    return apply("L1LossBackward0", [input, target], out, backward)


def _class_layout(x, t):
    """Move the class dimension of ``x`` (N, C, d1, ...) / (C,) last and flatten:
    returns (x2 (M, C), t2 (M,) or soft (M, C), restore) where restore maps (M, C) back."""
    if x.ndim == 0:
        raise ValueError("Expected input to have at least 1 dimension (got a 0-d tensor)")
    if x.ndim == 1:
        x2 = x.reshape(1, -1)
        soft = t.shape == x.shape and t.dtype.kind == "f"
        t2 = t.reshape(1, -1) if soft else t.reshape(1)
        return x2, t2, (lambda a: a.reshape(x.shape)), ()
    if x.ndim == 2:
        return x, t, (lambda a: a), (x.shape[0],)
    moved = np.moveaxis(x, 1, -1)
    x2 = moved.reshape(-1, x.shape[1])
    soft = t.shape == x.shape and t.dtype.kind == "f"
    t2 = np.moveaxis(t, 1, -1).reshape(-1, x.shape[1]) if soft else t.reshape(-1)
    out_shape = moved.shape[:-1]
    return x2, t2, (lambda a: np.moveaxis(a.reshape(moved.shape), -1, 1)), out_shape


def _nll_parts(t, C, weight, ignore_index):
    """Valid mask, clipped class indices and per-sample weights for integer targets."""
    if t.dtype.kind not in "iub":
        raise RuntimeError(f"expected scalar type Long but found {t.dtype}")
    t = t.astype(np.int64, copy=False)
    valid = t != ignore_index
    tc = np.where(valid, t, 0)
    bad = (tc < 0) | (tc >= C)
    if bad.any():
        raise IndexError(f"Target {int(t[bad][0])} is out of bounds.")
    w = valid.astype(np.float64)
    if weight is not None:
        w = w * _val(weight)[tc]
    return valid, tc, w


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Cross-entropy between logits ``input`` (N, C) [or (C,), or (N, C, d1, ...)] and integer
    class ``target`` (N,) [or class probabilities shaped like ``input``].

    One fused op (log-softmax + NLL, node ``NllLossBackward0``; ``NllLoss2DBackward0`` with
    spatial dimensions): the forward uses log-sum-exp,
    the backward is ``(softmax - onehot) * w / N``.  ``weight`` (C,), ``ignore_index``,
    ``reduction`` and ``label_smoothing`` follow PyTorch (the weighted mean divides by the sum
    of the targets' weights)."""
    _check_reduction(reduction)
    x = _val(input)
    t = _val(target)
    x2, t2, restore, out_shape = _class_layout(x, t)
    M, C = x2.shape
    ls = _log_softmax_np(x2, 1)
    eps = float(label_smoothing)
    soft = t2.ndim == 2
    wc = None if weight is None else _val(weight).astype(np.float64)
    rows = np.arange(M)
    if soft:
        p = t2.astype(np.float64)
        if eps:
            p = p * (1.0 - eps) + eps / C
        wp = p if wc is None else p * wc
        loss = -(wp * ls).sum(axis=1)
        denom = float(M)
    else:
        valid, tc, w = _nll_parts(t2, C, wc, ignore_index)
        loss = -ls[rows, tc] * w
        if eps:
            smooth = -(ls if wc is None else ls * wc).sum(axis=1) * valid
            loss = (1.0 - eps) * loss + (eps / C) * smooth
        denom = float(w.sum())
    out = _reduce(loss.reshape(out_shape), reduction, denom)

    def backward(g):
        gl = np.asarray(_dloss(g, reduction, out_shape, denom)).reshape(-1) * np.ones(M)
        s = np.exp(ls)
        if soft:
            gx = s * wp.sum(axis=1, keepdims=True) - wp
        else:
            gx = s * w[:, None]
            gx[rows, tc] -= w
            if eps:
                gx *= 1.0 - eps
                wrow = np.ones(C) if wc is None else wc
                gx += (eps / C) * valid[:, None] * (s * wrow.sum() - wrow)
        gx *= gl[:, None]
        return [restore(gx), None, None]

    return apply(_nll_name(x), [input, target, weight], out, backward)


def _nll_name(x):
    # PyTorch: nll_loss2d for inputs with spatial dimensions (its "none" reduction of a
    # non-4-d input is a ViewBackward0 of it; here it stays one NllLoss2DBackward0 node)
    return "NllLoss2DBackward0" if x.ndim >= 3 else "NllLossBackward0"


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of log-probabilities ``input`` (N, C) at integer ``target``
    (``NllLossBackward0``)."""
    _check_reduction(reduction)
    x = _val(input)
    t = _val(target)
    x2, t2, restore, out_shape = _class_layout(x, t)
    M, C = x2.shape
    wc = None if weight is None else _val(weight).astype(np.float64)
    valid, tc, w = _nll_parts(t2, C, wc, ignore_index)
    rows = np.arange(M)
    loss = -x2[rows, tc] * w
    denom = float(w.sum())
    out = _reduce(loss.reshape(out_shape), reduction, denom)

    def backward(g):
        gl = np.asarray(_dloss(g, reduction, out_shape, denom)).reshape(-1) * np.ones(M)
        gx = np.zeros((M, C))
        gx[rows, tc] = -w * gl
        return [restore(gx), None, None]

    return apply(_nll_name(x), [input, target, weight], out, backward)


def _softplus(x):
    return np.logaddexp(0.0, x)


def _sigmoid(x):
    return np.exp(-np.logaddexp(0.0, -x))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Binary cross-entropy of logits, fused and stable (``BinaryCrossEntropyWithLogitsBackward0``):
    ``loss = (1 - y) x + (1 + (pw - 1) y) log(1 + exp(-x))`` with ``log(1 + exp(-x))``
    computed as ``logaddexp(0, -x)``.  Gradient: ``sigmoid(x) - y`` (times weights)."""
    _check_reduction(reduction)
    x, y = _val(input), _val(target)
    if x.shape != y.shape:
        raise ValueError(f"Target size ({tuple(y.shape)}) must be the same as input size "
                         f"({tuple(x.shape)})")
    sp = _softplus(-x)
    if pos_weight is None:
        lw = 1.0
        loss = (1.0 - y) * x + sp
    else:
        pw = _val(pos_weight)
        lw = 1.0 + (pw - 1.0) * y
        loss = (1.0 - y) * x + lw * sp
    wv = None if weight is None else _val(weight)
    if wv is not None:
        loss = loss * wv
    out = _reduce(loss, reduction)
    ni, nt = needs_grad(input), needs_grad(target)

    def backward(g):
        gl = _dloss(g, reduction, loss.shape)
        if wv is not None:
            gl = gl * wv
        gx = gy = None
        if ni:
            gx = unbroadcast(((1.0 - y) - lw * _sigmoid(-x)) * gl, x.shape)
        if nt:
            dy = -x if pos_weight is None else -x + (pw - 1.0) * sp
            gy = unbroadcast(dy * gl, y.shape)
        return [gx, gy, None, None]

    return apply("BinaryCrossEntropyWithLogitsBackward0", [input, target, weight, pos_weight],
                 out, backward)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """Binary cross-entropy of probabilities ``input`` (logs clamped at -100, as PyTorch)
    (``BinaryCrossEntropyBackward0``)."""
    _check_reduction(reduction)
    x, y = _val(input), _val(target)
    if x.shape != y.shape:
        raise ValueError(f"Using a target size ({tuple(y.shape)}) that is different to the "
                         f"input size ({tuple(x.shape)}) is deprecated. Please ensure they have "
                         f"the same size.")
    if np.any((x < 0) | (x > 1)):
        raise RuntimeError("all elements of input should be between 0 and 1")
    with np.errstate(divide="ignore"):
        lx = np.maximum(np.log(x), -100.0)
        l1x = np.maximum(np.log1p(-x), -100.0)
    loss = -(y * lx + (1.0 - y) * l1x)
    wv = None if weight is None else _val(weight)
    if wv is not None:
        loss = loss * wv
    out = _reduce(loss, reduction)
    ni, nt = needs_grad(input), needs_grad(target)

    def backward(g):
        gl = _dloss(g, reduction, loss.shape)
        if wv is not None:
            gl = gl * wv
        gx = gy = None
        if ni:
            gx = unbroadcast((x - y) / np.maximum((1.0 - x) * x, 1e-12) * gl, x.shape)
        if nt:
            gy = unbroadcast((l1x - lx) * gl, y.shape)
        return [gx, gy, None]

    return apply("BinaryCrossEntropyBackward0", [input, target, weight], out, backward)

