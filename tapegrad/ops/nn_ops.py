"""The array-op rows of ``tapegrad.nn.functional``: activations and losses.

Each row is a NumPy forward (stable: ``logaddexp``, log-sum-exp, logs clamped at -100 as
PyTorch) with PyTorch's node name, and a vjp written in tapegrad ops, so
one rule serves ``backward()`` and ``create_graph=True``: every loss and activation is
differentiable to any order.  Where PyTorch's rule is a fused backward op
(``elu_backward``, ``gelu_backward``, ...), the rule calls that op, a row of the op table
whose partials are PyTorch's double-backward formulas, so second derivatives give PyTorch's
NaNs, infinities and signed zeros too.  Losses take ``reduction`` ("none", "mean", "sum"); a rule gets
``g`` already shaped like the elementwise loss from ``_per_element``.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.dtypes import scalar_type_name
from ..core.elementwise import FUNCTIONS as _ELEMENTWISE
from ..core.forward import erf_array
from ..core.shapes import laid_out
from ..core.tensor import Tensor, wrap
from .array_ops import call, defop

where = _ELEMENTWISE["where"]
leaky_relu_backward = _ELEMENTWISE["leaky_relu_backward"]
elu_backward = _ELEMENTWISE["elu_backward"]
gelu_backward = _ELEMENTWISE["gelu_backward"]
smooth_l1_backward = _ELEMENTWISE["smooth_l1_backward"]
softplus_backward = _ELEMENTWISE["softplus_backward"]
binary_cross_entropy_backward = _ELEMENTWISE["binary_cross_entropy_backward"]
mse_loss_backward = _ELEMENTWISE["mse_loss_backward"]

REDUCTIONS = ("none", "mean", "sum")
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_C = 0.044715


def value(x):
    """The value of a tensor (or array, or number) as a NumPy array."""
    return np.asarray(x._value if isinstance(x, Tensor) else x)


def check_reduction(reduction):
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def reduce(loss, reduction, denom=None, operands=()):
    """The elementwise ``loss`` (NumPy) reduced as ``reduction`` says; a weighted mean
    divides by ``denom``.  Unreduced, laid out as PyTorch's kernel over ``operands`` lays
    out its result (its strides decide what later views and products do)."""
    if reduction == "none":
        return laid_out(loss, operands)
    if reduction == "sum":
        return loss.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return loss.sum() / (loss.size if denom is None else denom)


def _per_element(g, reduction, denom):
    """The gradient of the reduced loss with respect to each elementwise loss, times ``g``
    (a scalar tensor broadcasts; "none" passes ``g`` through)."""
    return g / denom if reduction == "mean" else g


def _size(*xs):
    return float(np.prod(np.broadcast_shapes(*(np.shape(value(x)) for x in xs))))


def _softmax(x, dim):
    """softmax in recorded ops; the shift by the max is a constant (softmax ignores it)."""
    e = (x - wrap(np.max(value(x), axis=dim, keepdims=True))).exp()
    return e / call("sum", e, dim=dim, keepdim=True)


# -- activations ----------------------------------------------------------------------------

@defop("leaky_relu", "LeakyReluBackward0", method=False)
def leaky_relu(x, negative_slope=0.01):
    return np.where(x > 0, x, x * negative_slope)


# d/dx = 1 for x > 0, else negative_slope (leaky_relu_backward reads x, so under
# create_graph the gradient depends on x, with derivative zeros_like)
leaky_relu.defvjp(lambda g, ans, x, negative_slope=0.01:
                  (leaky_relu_backward(g, x, float(negative_slope)),))


@defop("softplus", "SoftplusBackward0", method=False)
def softplus(x, beta=1.0, threshold=20.0):
    bx = x * beta
    return np.where(bx > threshold, x, np.logaddexp(0.0, bx) / beta)


# d/dx log(1 + exp(beta x)) / beta = sigmoid(beta x); 1 above the threshold (linear there)
softplus.defvjp(lambda g, ans, x, beta=1.0, threshold=20.0:
                (softplus_backward(g, x * float(beta), float(threshold)),))


@defop("gelu", "GeluBackward0", method=False)
def gelu(x, approximate="none"):
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x + _GELU_C * x ** 3)))
    return 0.5 * x * (1.0 + erf_array(x / math.sqrt(2.0)))


@gelu.defvjp
def _(g, ans, x, approximate="none"):
    if approximate == "none":   # d/dx x Phi(x) = Phi(x) + x phi(x)
        return (gelu_backward(g, x),)
    if approximate == "tanh":
        # u = k (x + c x^3), d/dx x (1 + tanh u) / 2 = (1 + t) / 2 + x (1 - t^2) k (1 + 3 c x^2) / 2
        t = ((x + x * x * x * _GELU_C) * _SQRT_2_OVER_PI).tanh()
        return (g * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _SQRT_2_OVER_PI
                     * (1.0 + 3.0 * _GELU_C * x * x)),)


@defop("silu", "SiluBackward0", method=False)
def silu(x):
    # PyTorch's kernel, x / (1 + exp(-x)) (x s(x) rounds otherwise: half of all values
    # differed from PyTorch's in the last bit); exp(-x) overflows to inf as there
    with np.errstate(over="ignore", invalid="ignore"):
        return x / (1.0 + np.exp(-x))


@silu.defvjp
def _(g, ans, x):
    # d/dx x s(x) = s (1 + x (1 - s))
    s = x.sigmoid()
    return (g * s * (1.0 + x * (1.0 - s)),)


@defop("elu", "EluBackward0", method=False)
def elu(x, alpha=1.0):
    # (x where x <= 0, not minimum(x, 0): minimum(-0., 0.) is 0., and elu(-0.) is -0.)
    return np.where(x > 0, x, alpha * np.expm1(np.where(x > 0, 0.0, x)))


# d/dx = alpha exp(x) for x <= 0, else 1 (so 1 at NaN, as PyTorch); the second derivative
# (elu_double_backward) multiplies by (x < 0): an infinite gradient at x = 0 gives NaN
elu.defvjp(lambda g, ans, x, alpha=1.0: (elu_backward(g, x, float(alpha)),))


# -- elementwise losses -----------------------------------------------------------------------

@defop("mse_loss", "MseLossBackward0", method=False)
def mse_loss(x, y, reduction="mean"):
    d = x - y
    return reduce(d * d, reduction, operands=(x, y))


@mse_loss.defvjp
def _(g, ans, x, y, reduction="mean"):
    # d/dx (x - y)^2 = 2 (x - y) = -d/dy (PyTorch's rule for y swaps the two)
    gl = _per_element(g, reduction, _size(x, y))
    return (lambda: mse_loss_backward(gl, x, y), lambda: mse_loss_backward(gl, y, x))


@defop("smooth_l1_loss", "SmoothL1LossBackward0", method=False)
def smooth_l1_loss(x, y, reduction="mean", beta=1.0):
    a = np.abs(x - y)
    if beta == 0.0:
        return reduce(a, reduction, operands=(x, y))
    return reduce(np.where(a < beta, 0.5 * a * a / beta, a - 0.5 * beta), reduction,
                  operands=(x, y))


@smooth_l1_loss.defvjp
def _(g, ans, x, y, reduction="mean", beta=1.0):
    # d/dd = d / beta inside |d| < beta, sign(d) outside (d = x - y; for y, PyTorch's rule
    # swaps the two: y - x)
    gl = _per_element(g, reduction, _size(x, y))
    if beta == 0.0:
        gd = gl * (x - y).sign()
        return (gd, lambda: -gd)
    return (lambda: smooth_l1_backward(gl, x - y, float(beta)),
            lambda: smooth_l1_backward(gl, y - x, float(beta)))


@defop("soft_margin_loss", "SoftMarginLossBackward0", method=False)
def soft_margin_loss(x, y, reduction="mean"):
    # (PyTorch's kernel: neg(x), times y, exp, log1p, in the input's layout)
    with np.errstate(over="ignore"):
        return reduce(np.log1p(np.exp(-x * y)), reduction, operands=(x,))


# y takes no gradient (the functional refuses a target that requires grad);
# soft_margin_loss_backward: ops/nn_array_ops.py
soft_margin_loss.defvjp(lambda g, ans, x, y, reduction="mean": (
    lambda: call("soft_margin_loss_backward", g, x, y, reduction=reduction), None))


def _clamped_logs(x):
    with np.errstate(divide="ignore"):
        return np.maximum(np.log(x), -100.0), np.maximum(np.log1p(-x), -100.0)


@defop("binary_cross_entropy", "BinaryCrossEntropyBackward0", method=False)
def binary_cross_entropy(x, y, weight=None, reduction="mean"):
    if x.shape != y.shape:
        raise ValueError(f"Using a target size ({tuple(y.shape)}) that is different to the "
                         f"input size ({tuple(x.shape)}) is deprecated. Please ensure they have "
                         f"the same size.")
    if np.any((x < 0) | (x > 1)):
        raise RuntimeError("all elements of input should be between 0 and 1")
    lx, l1x = _clamped_logs(x)
    loss = -(y * lx + (1.0 - y) * l1x)
    # (PyTorch's result: empty_like(input), then weighted in place)
    return reduce(loss if weight is None else loss * weight, reduction, operands=(x,))


@binary_cross_entropy.defvjp
def _(g, ans, x, y, weight=None, reduction="mean"):
    # loss = -(y log x + (1 - y) log(1 - x)) w ; d/dx = w (x - y) / (x (1 - x)) ;
    # d/dy = w (log(1 - x) - log x) = -w logit(x) ; d/dw = the unweighted loss (logs
    # clamped at -100)
    gl = _per_element(g, reduction, _size(x, y))
    gw = gl if weight is None else gl * weight

    def logs():
        return x.log().clamp(min=-100.0), (-x).log1p().clamp(min=-100.0)

    def dy():   # PyTorch's binary_cross_entropy_target_backward: -logit(x) * grad, weighted
        d = -(x / (1.0 - x)).log() * gl
        return d if weight is None else d * weight

    def dw():
        lx, l1x = logs()
        return -gl * (y * lx + (1.0 - y) * l1x)

    def dx():   # PyTorch's binary_cross_entropy_backward, times the weight
        d = binary_cross_entropy_backward(gl, x, y)
        return d if weight is None else d * weight

    return (dx, dy, None if weight is None else dw)


@defop("binary_cross_entropy_with_logits", "BinaryCrossEntropyWithLogitsBackward0",
       method=False)
def binary_cross_entropy_with_logits(x, y, weight=None, pos_weight=None, reduction="mean"):
    if x.shape != y.shape:
        raise ValueError(f"Target size ({tuple(y.shape)}) must be the same as input size "
                         f"({tuple(x.shape)})")
    sp = np.logaddexp(0.0, -x)   # log(1 + exp(-x)) = -log sigmoid(x)
    lw = 1.0 if pos_weight is None else 1.0 + (pos_weight - 1.0) * y
    loss = (1.0 - y) * x + lw * sp
    return reduce(loss if weight is None else loss * weight, reduction)


@binary_cross_entropy_with_logits.defvjp
def _(g, ans, x, y, weight=None, pos_weight=None, reduction="mean"):
    # loss = ((1 - y) x + (1 + (pw - 1) y) softplus(-x)) w
    # d/dx = ((1 - y) - (1 + (pw - 1) y) sigmoid(-x)) w ; d/dy = (-x + (pw - 1) softplus(-x)) w
    # d/dpw = y softplus(-x) w ; d/dw = the unweighted loss
    gl = _per_element(g, reduction, _size(x, y))
    gw = gl if weight is None else gl * weight
    lw = 1.0 if pos_weight is None else 1.0 + (pos_weight - 1.0) * y

    def sp():
        return call("softplus", -x)

    def dy():
        return gw * -x if pos_weight is None else gw * ((pos_weight - 1.0) * sp() - x)

    def dx():   # PyTorch's binary_cross_entropy_with_logits_backward: (sigmoid(x) - y) grad
        if pos_weight is None:
            d = (x.sigmoid() - y) * gl
        else:
            t = pos_weight * y
            d = ((t + 1.0 - y) * x.sigmoid() - t) * gl
        return d if weight is None else d * weight

    return (dx, dy,
            None if weight is None else (lambda: gl * ((1.0 - y) * x + lw * sp())),
            None if pos_weight is None else (lambda: gw * y * sp()))


# -- class losses: input (N, C, d1, ...) or (C,), class dimension 1 (0 for (C,)) -------------

def _nll_node(x, *args, **params):
    # PyTorch: nll_loss2d for inputs with spatial dimensions (its "none" reduction of a
    # non-4-d input is a ViewBackward0 of it; here it stays one NllLoss2DBackward0 node)
    return "NllLoss2DBackward0" if np.ndim(x) >= 3 else "NllLossBackward0"


def _class_dim(x):
    if np.ndim(x) == 0:
        raise ValueError("Expected input to have at least 1 dimension (got a 0-d tensor)")
    return 0 if np.ndim(x) == 1 else 1


def _along(v, dim, ndim):
    """Class weights ``v`` (C,) shaped to broadcast along dimension ``dim`` of ``ndim``."""
    return np.reshape(v, (-1,) + (1,) * (ndim - dim - 1))


def _hard_targets(x, t, weight, ignore_index):
    """For integer targets ``t``: the one-hot of the targets (shaped like ``x``), the
    per-position weights (0 where ignored) and the valid mask (both shaped like ``t``)."""
    if x.ndim <= 2 and t.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    # PyTorch's nll_loss2d (4-d input) words its shape errors its own way
    if x.ndim == 4 and t.ndim != 3:
        raise RuntimeError("only batches of spatial targets supported (3D tensors) but got "
                           f"targets of dimension: {t.ndim}")
    if x.ndim == 4 and t.shape != x.shape[:1] + x.shape[2:]:
        raise RuntimeError(f"size mismatch (got input: {list(x.shape)} , target: "
                           f"{list(t.shape)}")
    if x.ndim > 2 and t.shape != x.shape[:1] + x.shape[2:]:
        raise RuntimeError(f"Expected target size {list(x.shape[:1] + x.shape[2:])}, got "
                           f"{list(t.shape)}")
    if t.dtype != np.int64 and t.dtype != np.uint8:
        raise RuntimeError("expected target dtype to be Long or Byte, but got "
                           f"{scalar_type_name(t.dtype)}")
    dim, C = _class_dim(x), x.shape[_class_dim(x)]
    t = t.astype(np.int64, copy=False)
    valid = t != ignore_index
    tc = np.where(valid, t, 0)
    bad = (tc < 0) | (tc >= C)
    if bad.any():
        raise IndexError(f"Target {int(t[bad][0])} is out of bounds.")
    onehot = np.expand_dims(tc, dim) == _along(np.arange(C), dim, x.ndim)
    w = valid.astype(np.float64)
    if weight is not None:
        w = w * weight[tc]
    return onehot, w, valid


def _cross_entropy_terms(x, t, weight, ignore_index, label_smoothing):
    """``(B, denom)`` for class targets ``t``: the per-position loss is
    ``-sum_c B_c log_softmax(x)_c`` (``B`` the weighted, smoothed one-hot targets, shaped like
    ``x``); ``denom`` divides the mean.  (Class probabilities are PyTorch's composition of
    ops: ``nn.functional.cross_entropy``.)"""
    dim = _class_dim(x)
    C, eps = x.shape[dim], float(label_smoothing)
    wc = _along(np.ones(C) if weight is None else weight, dim, x.ndim)
    onehot, w, valid = _hard_targets(x, t, weight, ignore_index)
    B = (1.0 - eps) * onehot * np.expand_dims(w, dim)
    if eps:
        B = B + (eps / C) * np.expand_dims(valid, dim) * wc
    return B, float(w.sum())


@defop("cross_entropy", _nll_node, method=False, edges=1)   # (class targets: no edge)
def cross_entropy(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """log-softmax and NLL fused (log-sum-exp forward)."""
    if x.ndim >= 2 and t.ndim >= 1 and x.shape[0] != t.shape[0]:
        raise ValueError(f"Expected input batch_size ({x.shape[0]}) to match target "
                         f"batch_size ({t.shape[0]}).")
    dim = _class_dim(x)
    B, denom = _cross_entropy_terms(x, t, weight, ignore_index, label_smoothing)
    z = x - np.max(x, axis=dim, keepdims=True)
    ls = z - np.log(np.sum(np.exp(z), axis=dim, keepdims=True))
    # class targets pick their class's term (PyTorch's nll): a -inf logit elsewhere is no
    # 0 * -inf = NaN
    with np.errstate(invalid="ignore"):
        terms = np.where(B != 0.0, B * ls, 0.0)
    return reduce(-np.sum(terms, axis=dim), reduction, denom)


@cross_entropy.defvjp
def _(g, ans, x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    # loss = -sum_c B_c log_softmax(x)_c ; d/dx = softmax(x) sum_c B_c - B
    # (= (softmax - onehot) w unsmoothed)
    xv = value(x)
    wv = None if weight is None else value(weight).astype(np.float64)
    dim = _class_dim(xv)
    B, denom = _cross_entropy_terms(xv, value(t), wv, ignore_index, label_smoothing)
    B = wrap(B)
    gl = _per_element(g, reduction, denom)
    if reduction == "none" and xv.ndim > 1:
        gl = call("unsqueeze", gl, dim)
    # as PyTorch composes it: the gradient u of log_softmax (nll's scatter of -g B into
    # zeros), then log_softmax's u - softmax sum(u) (an infinite g meets its own terms there:
    # inf - inf is NaN, as in PyTorch)
    u = -gl * B if label_smoothing else where(B != 0.0, -gl * B, 0.0)
    return (lambda: u - _softmax(x, dim) * call("sum", u, dim=dim, keepdim=True), None, None)


@defop("nll_loss", _nll_node, method=False, edges=1)
def nll_loss(x, t, weight=None, ignore_index=-100, reduction="mean"):
    dim = _class_dim(x)
    onehot, w, _ = _hard_targets(x, t, weight, ignore_index)
    return reduce(-np.sum(np.where(onehot, x, 0.0), axis=dim) * w, reduction, float(w.sum()))


@nll_loss.defvjp
def _(g, ans, x, t, weight=None, ignore_index=-100, reduction="mean"):
    # loss = -w x[target] ; d/dx = -w onehot(target)
    xv = value(x)
    dim = _class_dim(xv)
    onehot, w, _ = _hard_targets(xv, value(t), None if weight is None else value(weight),
                                 ignore_index)
    gl = _per_element(g, reduction, float(w.sum()))
    if reduction == "none" and xv.ndim > 1:
        gl = call("unsqueeze", gl, dim)
    # PyTorch scatters -w g into zeros: exactly 0. off the targets, whatever g is
    return (where(wrap(onehot), gl * wrap(-np.expand_dims(w, dim)), 0.0), None, None)


def margin_terms(x, t, weight, p, margin):
    """The terms of PyTorch's multi-margin kernels over ``x`` as rows (N, C) with target
    class ``t`` (N,): ``z = (margin - x[y]) + x[d]``, and where ``z > 0`` off the target
    class, the term ``z`` (or ``z * z`` for ``p == 2``) times ``weight[y]``.  Returns
    ``(z, active, the target classes, weight per row or None)``, in ``x``'s dtype."""
    n, c = x.shape
    y = t.reshape(n).astype(np.int64, copy=False)
    margin = x.dtype.type(margin)
    z = (margin - x[np.arange(n), y][:, None]) + x
    active = (z > 0) & (np.arange(c) != y[:, None])
    wy = None if weight is None else weight.astype(x.dtype, copy=False)[y][:, None]
    return z, active, y, wy


@defop("multi_margin_loss", "MultiMarginLossBackward0", method=False, edges=1)
def multi_margin_loss(x, t, weight=None, p=1, margin=1.0, reduction="mean"):
    """PyTorch's kernel: per sample the sum of the active terms (``margin_terms``) in class
    order, over C; summed over samples in float64 (its accumulator), over N for the mean.
    ``x``: (N, C), or (C,) or a number for one sample."""
    rows = x.reshape(-1, x.shape[-1]) if x.ndim else x.reshape(1, 1)
    z, active, _, wy = margin_terms(rows, t, weight, p, margin)
    h = z if p == 1 else z * z
    if wy is not None:
        h = h * wy
    h = np.where(active, h, 0.0).astype(rows.dtype, copy=False)
    per = (np.cumsum(h, axis=1)[:, -1] if h.shape[1] else np.zeros(len(h), h.dtype)) \
        / rows.dtype.type(rows.shape[1])
    if reduction == "none":   # (PyTorch's shape: the target's, one number for a 0-d one)
        return per if t.ndim else per[0]
    total = np.cumsum(per.astype(np.float64))[-1] if len(per) else 0.0
    if reduction == "mean":
        with np.errstate(invalid="ignore"):
            total = total / len(per)
    return np.asarray(total, x.dtype)


# multi_margin_loss_backward: ops/nn_array_ops.py
multi_margin_loss.defvjp(lambda g, ans, x, t, weight=None, p=1, margin=1.0, reduction="mean": (
    lambda: call("multi_margin_loss_backward", g, x, t, weight, p=p, margin=margin,
                 reduction=reduction), None, None))
