"""``tapegrad.nn.functional``: activations and losses (PyTorch's ``torch.nn.functional``).

Losses, ``softmax``/``log_softmax``, ``linear`` and ``dropout`` are each ONE recorded op (a
``pyfunc`` entry made with ``tapegrad.functions.apply``) whose backward is NumPy code, with
PyTorch's node names (``NllLossBackward0``, ``AddmmBackward0``, ...).  Fusing keeps them
numerically stable (log-sum-exp, ``log1p(exp(-|x|))``) and makes them one tape entry instead of
a dozen.  Gradients are computed only for the inputs that require grad.
"""
from __future__ import annotations

import math

import numpy as np

from ..factories import rand
from ..functions import apply, unbroadcast
from ..tensor import Tensor
from ._utils import needs_grad, value as _val

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


def _lift(x, dim):
    """0-d values are treated as 1-element vectors; returns (array, dim, restore-shape)."""
    if x.ndim == 0:
        return x.reshape(1), 0, ()
    return x, dim, None


def softmax(input, dim=None, dtype=None):
    """exp(x) / sum(exp(x)) along ``dim``, computed stably (``SoftmaxBackward0``)."""
    x = _val(input)
    if dtype is not None:
        x = x.astype(getattr(dtype, "np", dtype))
    if dim is None:
        dim = _softmax_dim(x.ndim)
    a, d, shape0 = _lift(x, dim)
    e = np.exp(a - a.max(axis=d, keepdims=True))
    s = e / e.sum(axis=d, keepdims=True)

    def backward(g):
        g = np.asarray(g).reshape(s.shape)
        gi = s * (g - (g * s).sum(axis=d, keepdims=True))
        return [gi if shape0 is None else gi.reshape(shape0)]

    return apply("SoftmaxBackward0", [input], s if shape0 is None else s.reshape(shape0), backward)


def _log_softmax_np(a, d):
    z = a - a.max(axis=d, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=d, keepdims=True))


def log_softmax(input, dim=None, dtype=None):
    """x - logsumexp(x) along ``dim``, computed stably (``LogSoftmaxBackward0``)."""
    x = _val(input)
    if dtype is not None:
        x = x.astype(getattr(dtype, "np", dtype))
    if dim is None:
        dim = _softmax_dim(x.ndim)
    a, d, shape0 = _lift(x, dim)
    ls = _log_softmax_np(a, d)

    def backward(g):
        g = np.asarray(g).reshape(ls.shape)
        gi = g - np.exp(ls) * g.sum(axis=d, keepdims=True)
        return [gi if shape0 is None else gi.reshape(shape0)]

    return apply("LogSoftmaxBackward0", [input], ls if shape0 is None else ls.reshape(shape0),
                 backward)


# -- layers ----------------------------------------------------------------------------
def linear(input, weight, bias=None):
    """``input @ weight.T + bias`` as one op (``AddmmBackward0``; ``MmBackward0`` without bias).

    ``input`` is (*, in_features), ``weight`` (out_features, in_features), ``bias``
    (out_features,)."""
    x, w = _val(input), _val(weight)
    out = x @ w.T
    if bias is not None:
        out += _val(bias)  # out is a fresh array (or a NumPy scalar for 1-d @ 1-d)
    nx, nw, nb = needs_grad(input), needs_grad(weight), needs_grad(bias)

    def backward(g):
        g = np.asarray(g)
        gx = gw = gb = None
        if nx:
            gx = g @ w if w.ndim == 2 else np.multiply.outer(g, w)
        if nw or nb:
            g2 = g.reshape(-1, w.shape[0]) if w.ndim == 2 else g.reshape(-1)
            if nw:
                x2 = x.reshape(-1, x.shape[-1])
                gw = g2.T @ x2 if w.ndim == 2 else g2 @ x2
            if nb:
                gb = g2.sum(axis=0)
                gb = gb.reshape(np.shape(_val(bias)))
        return [gx, gw, gb]

    return apply("AddmmBackward0" if bias is not None else "MmBackward0",
                 [input, weight, bias], out, backward)


def dropout(input, p=0.5, training=True, inplace=False):
    """Inverted dropout: in training, zero each element with probability ``p`` and scale the
    rest by 1/(1-p); the identity otherwise (returns ``input`` itself).  The mask comes from
    tapegrad's generator (``tg.rand``), so ``tg.manual_seed`` makes it reproducible."""
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

    return apply("NativeDropoutBackward0", [input], out, backward)


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

    One fused op (log-softmax + NLL, node ``NllLossBackward0``): the forward uses log-sum-exp,
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

    return apply("NllLossBackward0", [input, target, weight], out, backward)


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

    return apply("NllLossBackward0", [input, target, weight], out, backward)


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


del math
