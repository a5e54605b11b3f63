"""Array-op rows that PyTorch programs reach for beside the core table (``array_ops.py``):
sorting (``sort``, ``topk``), scattering (``scatter``, ``scatter_add``, ``scatter_reduce``,
``index_add``, ``masked_fill``), ``einsum`` and ``cross``.

Rows as in ``array_ops.py``: a NumPy forward and a vector-Jacobian product written in
tapegrad ops (so each differentiates to any order); ``tests/test_api_everyday.py`` checks
each row against PyTorch and central differences.
"""
from __future__ import annotations

import functools
import math
import string

import numpy as np

from ..core.elementwise import FUNCTIONS as ELEMENTWISE
from ..core.grad_mode import is_grad_enabled
from ..core.numba_jit import jit
from ..core.shapes import wrap_dim
from ..core.tensor import Tensor, wrap
from .array_ops import along_index, call, contiguous, defop, like_layout, rule_call

_where = ELEMENTWISE["where"]


def _shape(x):
    return tuple(x.shape) if isinstance(x, Tensor) else np.shape(x)


def _value(x):
    return np.asarray(x._value) if isinstance(x, Tensor) else np.asarray(x)


# -- sorting ---------------------------------------------------------------------------------

def sort_indices(x, dim=-1, descending=False):
    """The int64 indices that sort ``x`` along ``dim`` as PyTorch's stable sort does: NaN
    counts as the largest value, equal values keep their order (also when descending)."""
    x = np.asarray(x)
    if x.ndim == 0:
        return np.zeros((), np.int64)
    dim = wrap_dim(dim, x.ndim)
    if x.dtype == np.bool_:
        x = x.astype(np.int8)
    if not descending:
        return np.argsort(x, axis=dim, kind="stable").astype(np.int64)
    # stable descending: sort the negated values (NaN stays last), then NaNs to the front
    key = -x.astype(np.float64) if x.dtype.kind in "iu" else -x
    idx = np.argsort(key, axis=dim, kind="stable")
    if x.dtype.kind == "f":
        nan_last = ~np.isnan(np.take_along_axis(x, idx, axis=dim))
        idx = np.take_along_axis(idx, np.argsort(nan_last, axis=dim, kind="stable"), axis=dim)
    return idx.astype(np.int64)


def _scatter_back(g, x, dim, idx):
    """``g`` (of the sorted or picked values) sent back to the places of ``x`` they came
    from."""
    if not _shape(x):
        return g
    return call("ungather", g, _shape(x), dim, idx, assign=True)


# (``indices``: the forward's own, which ``call`` records with the call: ``saves_indices``)
@defop("sort", "SortBackward0", method=False, outputs=tuple, saves_indices=True)
def sort(x, dim=-1, descending=False, indices=None):
    idx = sort_indices(x, dim, descending)
    if x.ndim == 0:
        return x.copy(), idx
    return like_layout(np.take_along_axis(x, idx, axis=wrap_dim(dim, x.ndim)), x), \
        like_layout(idx, x)


# the sorted values are x's, permuted: each gradient goes back to where its value came from
sort.defvjp(lambda g, ans, x, dim=-1, descending=False, indices=None:
            (_scatter_back(g, x, dim, sort_indices(_value(x), dim, descending)
                           if indices is None else indices),))


def topk_indices(x, k, dim=-1, largest=True):
    x = np.asarray(x)
    if x.ndim == 0:
        return np.zeros((), np.int64)
    dim = wrap_dim(dim, x.ndim)
    return np.take(sort_indices(x, dim, largest), np.arange(k), axis=dim)


@defop("topk", "TopkBackward0", method=False, outputs=tuple, saves_indices=True)
def topk(x, k, dim=-1, largest=True, sorted=True,  # noqa: A002  (torch's argument name)
         indices=None):
    idx = topk_indices(x, k, dim, largest)
    if x.ndim == 0:
        return x.copy(), idx
    return np.take_along_axis(x, idx, axis=wrap_dim(dim, x.ndim)), idx


topk.defvjp(lambda g, ans, x, k, dim=-1, largest=True, sorted=True, indices=None:
            (_scatter_back(g, x, dim, topk_indices(_value(x), k, dim, largest)
                           if indices is None else indices),))


def kth_indices(x, k, dim, nan_wins=False):
    """Indices (``dim`` kept, of size 1) of the k-th smallest (0-based) along ``dim``; with
    ``nan_wins``, a row's first NaN instead where it has one (PyTorch's median)."""
    idx = np.take(sort_indices(x, dim), [k], axis=dim)
    if nan_wins and x.dtype.kind == "f":
        nans = np.isnan(x)
        idx = np.where(nans.any(axis=dim, keepdims=True),
                       np.argmax(nans, axis=dim, keepdims=True), idx)
    return idx


@defop("kthvalue", lambda x, k, dim, keepdim=False, nan_wins=False:
       "MedianBackward1" if nan_wins else "KthvalueBackward0", method=False, outputs=tuple,
       saves_indices=True)
def kthvalue(x, k, dim, keepdim=False, nan_wins=False, indices=None):
    """``(values, indices)`` of the k-th smallest (0-based) along ``dim`` (see
    ``kth_indices``); torch_api checks ``k`` and wraps ``dim``."""
    if x.ndim == 0:
        return x.copy(), np.zeros((), np.int64)
    idx = kth_indices(x, k, dim, nan_wins)
    vals = np.take_along_axis(x, idx, axis=dim)
    if not keepdim:
        vals, idx = np.squeeze(vals, dim), np.squeeze(idx, dim)
    return vals, idx.astype(np.int64, copy=False)


# the picked value's gradient goes back to where it came from (PyTorch's scatter into zeros)
kthvalue.defvjp(lambda g, ans, x, k, dim, keepdim=False, nan_wins=False, indices=None: (
    g if not _shape(x) else
    _scatter_back(g if keepdim else call("unsqueeze", g, dim), x, dim,
                  kth_indices(_value(x), k, dim, nan_wins) if indices is None else
                  indices if keepdim else np.expand_dims(indices, dim)),))


# -- scattering ------------------------------------------------------------------------------

def _scattered(shape, dim, index):
    """A bool mask of ``shape``: True where ``scatter(dim, index, ...)`` writes."""
    mask = np.zeros(tuple(shape) or (1,), bool)
    mask[along_index(index, dim)] = True
    return mask.reshape(shape)


def _is_tensor_value(v):
    # a forward's or node's view of an argument: tensors arrive as NumPy values
    return isinstance(v, (np.ndarray, np.generic))


@defop("scatter", lambda x, dim, index, src: "ScatterBackward0" if _is_tensor_value(src)
       else "ScatterBackward1", method=False, saves=False)
def scatter(x, dim, index, src):
    out = np.array(x, copy=True)
    view = out.reshape(out.shape or (1,))
    idx = along_index(index, dim)
    if np.ndim(src):
        src = np.asarray(src)[tuple(slice(0, n) for n in np.shape(index))]
    view[idx] = src
    return out


# x's gradient: g where nothing was written; src's: g at the places it was written to
scatter.defvjp(lambda g, ans, x, dim, index, src:
               (lambda: _where(_scattered(_shape(x), dim, index), 0.0, g),
                None, None,
                lambda: call("gather", g, dim, index) if isinstance(src, Tensor) else None))


@defop("scatter_add", "ScatterAddBackward0", method=False, saves=False)
def scatter_add(x, dim, index, src):
    out = np.array(x, copy=True)
    view = out.reshape(out.shape or (1,))
    idx = along_index(index, dim)
    np.add.at(view, idx, np.asarray(src)[tuple(slice(0, n) for n in np.shape(index) or (1,))]
              .reshape(idx[dim].shape))
    return out


scatter_add.defvjp(lambda g, ans, x, dim, index, src:
                   (g, None, None, lambda: call("gather", g, dim, index)))


# reduction -> (the NumPy ufunc that folds a value in, its identity for a float or an int)
_SCATTER_REDUCTIONS = {
    "sum": (np.add, lambda dt: 0), "mean": (np.add, lambda dt: 0),
    "prod": (np.multiply, lambda dt: 1),
    "amax": (np.maximum, lambda dt: -np.inf if dt.kind == "f" else np.iinfo(dt).min),
    "amin": (np.minimum, lambda dt: np.inf if dt.kind == "f" else np.iinfo(dt).max),
}


def scatter_reduced(x, dim, index, src, reduce, include_self=True):
    """NumPy: ``x`` with the ``src`` values at ``index`` (along ``dim``) folded into each
    place by ``reduce`` (``sum``, ``prod``, ``mean``, ``amax``, ``amin``); without
    ``include_self`` a place written to forgets its own value first."""
    fold, identity = _SCATTER_REDUCTIONS[reduce]
    out = np.array(x, copy=True)
    view = out.reshape(out.shape or (1,))
    idx = along_index(index, dim)
    src = np.broadcast_to(src, np.shape(index)) if not np.ndim(src) else \
        np.asarray(src)[tuple(slice(0, n) for n in np.shape(index) or (1,))]
    src = np.reshape(src, idx[dim].shape).astype(out.dtype, copy=False)
    if not include_self:
        view[idx] = identity(out.dtype)
    fold.at(view, idx, src)
    if reduce == "mean":
        count = np.full(view.shape, 1 if include_self else 0, np.int64)
        np.add.at(count, idx, 1)
        count = np.maximum(count, 1)
        view[...] = view // count if out.dtype.kind in "iub" else view / count
    return out


def _scatter_counts(shape, dim, index):
    """How many index entries land on each place of ``shape``."""
    count = np.zeros(tuple(shape) or (1,))
    np.add.at(count, along_index(index, dim), 1.0)
    return count.reshape(shape)


@defop("scatter_reduce", "ScatterReduceBackward0", method=False)
def scatter_reduce(x, dim, index, src, reduce, include_self=True):
    return scatter_reduced(x, dim, index, src, reduce, include_self)


def _scatter_reduce_vjp(g, ans, x, dim, index, src, reduce, include_self=True):
    """PyTorch's ``scatter_reduce_backward``: (x's gradient, src's gradient), in tapegrad
    ops so that they differentiate again."""
    xv, sv, av = _value(x), _value(src), _value(ans)
    if reduce == "sum":
        gx, gs = g, call("gather", g, dim, index)
    elif reduce == "mean":
        n = _scatter_counts(xv.shape, dim, index) + (1.0 if include_self else 0.0)
        n = wrap(np.maximum(n, 1.0))
        gx, gs = g / n, call("gather", g / n, dim, index)
    elif reduce == "prod":
        # d prod / d a = the product of the others: result / a, where a != 0; a zero's
        # gradient is the product of the others, recomputed with the zero taken out
        x_zero = xv == 0
        masked_x = _where(x_zero, 1.0, x)
        gx = g * call("scatter_reduce", masked_x, dim, index, src, "prod", include_self) \
            / masked_x
        src_zero = _src_part(sv, index) == 0
        zeros_there = _gathered(_zero_counts(xv.shape, dim, index, src_zero), dim, index)
        single_zero = src_zero & (zeros_there == 1)
        if np.any(zeros_there > 1) and is_grad_enabled():   # a create_graph walk
            raise RuntimeError("scatter_reduce(): Double backward is unsupported for src when "
                               ">1 zeros in src are scattered to the same position. Please "
                               "file an issue on github if you need this feature.")
        masked_src = _where(single_zero, 1.0, src)
        with_zero_out = call("scatter_reduce", x, dim, index, masked_src, "prod", include_self)
        gs = _where(single_zero, call("gather", g * with_zero_out, dim, index),
                    call("gather", g * ans, dim, index) / _where(src_zero, 1.0, src))
    else:   # amax, amin: shared evenly among the values equal to the result
        x_is = (xv == av).astype(np.float64)
        src_is = (_src_part(sv, index) == _gathered(av, dim, index)).astype(np.float64)
        shares = x_is.reshape(x_is.shape or (1,)).copy()
        idx = along_index(index, dim)
        np.add.at(shares, idx, src_is.reshape(idx[dim].shape))
        g_each = g / wrap(shares.reshape(x_is.shape))
        gx = g_each * wrap(x_is)
        gs = call("gather", g_each, dim, index) * wrap(src_is)
    if not include_self:
        gx = _where(_scattered(xv.shape, dim, index), 0.0, gx)
    return gx, None, None, gs


def _src_part(src, index):
    """The part of ``src`` that is scattered: its first ``index.shape`` elements."""
    return np.asarray(src)[tuple(slice(0, n) for n in np.shape(index))]


def _gathered(v, dim, index):
    """NumPy's ``gather``: ``v`` along ``dim`` at ``index``, shaped as ``index``."""
    return np.atleast_1d(v)[along_index(index, dim)].reshape(np.shape(index))


def _zero_counts(shape, dim, index, src_zero):
    """How many zeros of ``src`` land on each place of ``shape``."""
    count = np.zeros(tuple(shape) or (1,))
    idx = along_index(index, dim)
    np.add.at(count, idx, np.reshape(src_zero, idx[dim].shape).astype(np.float64))
    return count.reshape(shape)


scatter_reduce.defvjp(_scatter_reduce_vjp)


@defop("scatter_folded", "NotImplemented", method=False, saves=False)
def scatter_folded(x, dim, index, src, reduce):
    """``scatter(..., reduce='add' | 'multiply')``: PyTorch has no derivative for it."""
    return scatter_reduced(x, dim, index, src, "sum" if reduce == "add" else "prod")


def _no_scatter_derivative(g, ans, *args, **params):
    raise RuntimeError("derivative for aten::scatter is not implemented")


scatter_folded.defvjp(_no_scatter_derivative)


# -- rounded quotients and roundings: piecewise constant ------------------------------------

def _zeros_of(g):
    return wrap(np.zeros_like(np.asarray(g._value)))


# -- comparisons in place, floor division, heaviside ------------------------------------------
# ``x.eq_(y)`` writes the comparison into ``x`` as 0/1 of its dtype: PyTorch's EqBackward0
# (a number ``y``) or EqBackward1 (a tensor), whose gradients are zeros
COMPARED = {"eq": ("Eq", np.equal), "ne": ("Ne", np.not_equal), "gt": ("Gt", np.greater),
            "lt": ("Lt", np.less), "ge": ("Ge", np.greater_equal), "le": ("Le", np.less_equal)}


@defop("compared", lambda x, other, kind: COMPARED[kind][0] + (
    "Backward1" if isinstance(other, (np.ndarray, np.generic)) else "Backward0"),
    method=False, saves=False)
def compared(x, other, kind):
    return np.asarray(COMPARED[kind][1](x, other)).astype(x.dtype)


compared.defvjp(lambda g, ans, x, other, kind:
                (lambda: _zeros_of(g), lambda: _zeros_of(g) if isinstance(other, Tensor) else None))


def _no_derivative(name):
    def vjp(g, ans, *args, inplace=False, **params):
        raise RuntimeError(f"derivative for aten::{name}{'_' if inplace else ''} is not "
                           "implemented")
    return vjp


# (``inplace``: the call of ``x.floor_divide_(y)``, whose error names aten::floor_divide_)
@defop("floor_divide", "NotImplemented", method=False, saves=False)
def floor_divide(x, y, inplace=False):
    """``x // y`` of floats where a tensor requires grad: PyTorch records it with no
    derivative (a backward that reaches it raises)."""
    with np.errstate(all="ignore"):
        return np.floor_divide(x, y)


floor_divide.defvjp(_no_derivative("floor_divide"))


@defop("heaviside", "NotImplemented", method=False, saves=False)
def heaviside(x, values, inplace=False):
    """``heaviside`` where a tensor requires grad (no derivative, as PyTorch's)."""
    return np.asarray(np.heaviside(x, values)).astype(x.dtype)


heaviside.defvjp(_no_derivative("heaviside"))


@defop("nextafter", "NextafterBackward0", method=False, saves=False)
def nextafter(x, other):
    """The next float after ``x`` towards ``other``."""
    return np.nextafter(x, other)


# PyTorch's NextafterBackward0: the gradient passes to ``x`` as it is where ``x`` moved,
# +0. where it equals ``other`` (an inf or NaN gradient too); zeros to ``other``
nextafter.defvjp(lambda g, ans, x, other:
                 (lambda: ELEMENTWISE["where"](x == other, 0.0, g),
                  lambda: _zeros_of(g) if isinstance(other, Tensor) else None))


@defop("div_rounded", "DivBackward2", method=False, saves=False)
def div_rounded(x, y, rounding_mode):
    """``x / y`` rounded toward zero (``"trunc"``) or down (``"floor"``) (floats).  PyTorch's
    floor is the fmod-based floor division (NumPy's ``floor_divide``: ``(5e15 + 1) // 0.7``
    is 7142857142857143, where ``floor(x / y)`` gives ...145)."""
    with np.errstate(all="ignore"):
        if rounding_mode == "floor":
            return np.floor_divide(x, y)
        return np.trunc(np.true_divide(x, y))


# the rounded quotient is piecewise constant: its derivative is zero wherever it exists (and
# PyTorch's DivBackward2 passes zeros, without saving either input)
div_rounded.defvjp(lambda g, ans, x, y, rounding_mode:
                   (lambda: _zeros_of(g), lambda: _zeros_of(g) if isinstance(y, Tensor) else None))


@defop("round_decimals", "RoundBackward1", method=False, saves=False)
def round_decimals(x, decimals):
    """``x`` rounded half to even at ``decimals`` places, as PyTorch computes it."""
    if decimals > 0:
        scale = 10.0 ** decimals
        return np.round(x * scale) / scale
    scale = 10.0 ** -decimals
    return np.round(x / scale) * scale


# piecewise constant: zero gradient, as PyTorch's RoundBackward1
round_decimals.defvjp(lambda g, ans, x, decimals: (lambda: _zeros_of(g),))


@defop("index_add", "IndexAddBackward0", method=False, saves=False)
def index_add(x, dim, index, source, alpha=1):
    out = np.array(x, copy=True)
    if out.ndim == 0:
        return out + alpha * np.sum(source)
    sl = [slice(None)] * out.ndim
    sl[wrap_dim(dim, out.ndim)] = np.asarray(index)
    np.add.at(out, tuple(sl), alpha * np.asarray(source) if alpha != 1 else np.asarray(source))
    return out


def _index_add_source_grad(g, dim, index, source, alpha):
    if not _shape(g):
        return call("expand", g, _shape(source)) if alpha == 1 else call("expand", g * alpha,
                                                                           _shape(source))
    gs = call("index_select", g, dim, index)
    return gs if alpha == 1 else gs * alpha


index_add.defvjp(lambda g, ans, x, dim, index, source, alpha=1:
                 (g, None, None,
                  lambda: _index_add_source_grad(g, dim, _value(index), source, alpha)))


@defop("index_copy", "IndexCopyBackward0", method=False, saves=False)
def index_copy(x, dim, index, source):
    """``x`` with its slices along ``dim`` at ``index`` replaced by ``source``'s (a place the
    index repeats gets one of them, as PyTorch leaves it unspecified which)."""
    out = np.array(x, copy=True)
    if out.ndim == 0:
        out[()] = np.asarray(source).reshape(())
        return out
    sl = [slice(None)] * out.ndim
    sl[wrap_dim(dim, out.ndim)] = np.asarray(index).reshape(-1)
    out[tuple(sl)] = source
    return out


def _index_copy_input_grad(g, dim, index):
    # PyTorch's: g with the copied slices zeroed (index_fill: +0.)
    if not _shape(g):
        return call("masked_fill", g, np.array(True), 0.0)
    dim = wrap_dim(dim, len(_shape(g)))
    copied = np.zeros(_shape(g)[dim], bool)
    copied[np.asarray(index).reshape(-1)] = True
    along = [-1 if k == dim else 1 for k in range(len(_shape(g)))]
    return call("masked_fill", g, copied.reshape(along), 0.0)


def _index_copy_source_grad(g, dim, index, source):
    # PyTorch's: the slices of g at index, shaped like source
    gs = call("index_select", g, dim, np.asarray(index).reshape(-1)) if _shape(g) else g
    return gs if _shape(gs) == _shape(source) else call("reshape", gs, _shape(source))


index_copy.defvjp(lambda g, ans, x, dim, index, source:
                  (lambda: _index_copy_input_grad(g, dim, _value(index)), None, None,
                   lambda: _index_copy_source_grad(g, dim, _value(index), source)))


@defop("masked_fill", lambda x, mask, value: "MaskedFillBackward1" if _is_tensor_value(value)
       else "MaskedFillBackward0", method=False, saves=False)
def masked_fill(x, mask, value):
    return contiguous(np.where(np.asarray(mask, dtype=bool), np.asarray(value, dtype=x.dtype), x))


# x's gradient: g where the mask is off; a 0-d value's: the sum of g where it is on
masked_fill.defvjp(lambda g, ans, x, mask, value:
                   (lambda: _where(mask, 0.0, g), None,
                    lambda: call("sum", _where(mask, g, 0.0))
                    if isinstance(value, Tensor) else None))


# -- products --------------------------------------------------------------------------------

def parse_einsum(equation, shapes):
    """``equation`` as (operand subscripts, output subscript), each a string of single
    letters: ``...`` spelt out in unused letters, the implicit output made explicit."""
    return _parsed_einsum(equation, tuple(map(tuple, shapes)))


@functools.lru_cache(maxsize=256)   # (an objective's einsum and its gradients, every call)
def _parsed_einsum(equation, shapes):
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(shapes):
        raise RuntimeError("einsum(): more operands were provided than specified in the "
                           "equation" if len(shapes) > len(ins) else
                           "einsum(): fewer operands were provided than specified in the equation")
    used = set(eq) - set(".,->")
    spare = [c for c in string.ascii_letters if c not in used]
    ell_n = max((len(s) - (len(sub) - 3) for sub, s in zip(ins, shapes) if "..." in sub), default=0)
    ell = "".join(spare[:ell_n])
    out_ins = []
    for sub, s in zip(ins, shapes):
        if "..." in sub:
            n = len(s) - (len(sub) - 3)
            sub = sub.replace("...", ell[ell_n - n:] if n else "")
        if len(sub) != len(s):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({len(sub)}) "
                               f"does not match the number of dimensions ({len(s)}) for operand "
                               f"{len(out_ins)}"
                               + ("" if "..." in lhs else " and no ellipsis was given"))
        out_ins.append(sub)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        letters = "".join(out_ins)
        out = ell + "".join(sorted(c for c in set(letters) - set(ell) if letters.count(c) == 1))
    return out_ins, out


def _einsum_equation(ins, out):
    return ",".join(ins) + "->" + out


# operands of at least this many elements in all take NumPy's optimized einsum (BLAS where
# it can, a better loop order where not: 'ijk,mik->mij' of 5x10x10 and 1000x5x10, and its
# two gradients, ran 7-10x faster); below it, planning the contraction costs more than it
# saves, and the plain loops keep small results in their summation order
_EINSUM_PLANNED = 4096


# a small product (under ``_EINSUM_PLANNED``) whose contracted letter has at most this
# many elements runs in ``_short_products``: GMM's 'ijk,mik->mij' and its gradient
# 'mij,ijk->mik' contract d = 2 or 10, where NumPy's einsum loop took 38-40 us for
# 5 x 2 x 2 with 100 x 5 x 2, the kernel 13-14 (larger ones run matmul on the permuted
# operands: faster than the kernel from ~10,000 results, 23 against 31 us)
_SHORT_CONTRACTION = 16


@defop("einsum", "EinsumBackward0", method=False, numpy_rule=True, grad_depends="others")
def einsum(equation, *xs):
    # (arrays' own shape and size: np.shape and np.size cost 0.16 us each, the attributes
    # 0.02)
    shapes = [x.shape if x.__class__ is np.ndarray else np.shape(x) for x in xs]
    ins, out = parse_einsum(equation, shapes)
    planned = len(xs) > 2 or sum(x.size if x.__class__ is np.ndarray else np.size(x)
                                 for x in xs) >= _EINSUM_PLANNED
    if len(xs) == 2:
        product = _einsum_as_matmul(ins, out, *xs, planned)
        if product is not None:
            return product
    return np.einsum(_einsum_equation(ins, out), *xs, optimize=planned)


@jit
def _short_products(x, y, out):
    """``out[p, q, r] = sum over k of x[p, q, r, k] * y[p, q, r, k]``, summed in order,
    where a size-1 dim of ``x`` or ``y`` is broadcast (a letter the operand lacks): an
    einsum's two operands viewed in its output's letter order, looping in the output's
    memory order (both operands' rows over k are then read as laid out)."""
    P, Q, R = out.shape
    K = x.shape[3]
    x0, x1, x2 = int(x.shape[0] > 1), int(x.shape[1] > 1), int(x.shape[2] > 1)
    y0, y1, y2 = int(y.shape[0] > 1), int(y.shape[1] > 1), int(y.shape[2] > 1)
    for p in range(P):
        for q in range(Q):
            for r in range(R):
                acc = 0.0
                for k in range(K):
                    acc += x[p * x0, q * x1, r * x2, k] * y[p * y0, q * y1, r * y2, k]
                out[p, q, r] = acc


def _einsum_as_matmul(ins, out, x, y, planned=True):
    """A two-operand einsum that is a batched matrix product (every letter a batch, free or
    contracted one, no diagonal, nothing summed out of one operand alone) as ``matmul``
    on the operands permuted to (batch, free, contracted) (NumPy's planned einsum spent
    30-50 us planning GMM's 'ijk,mik->mij' and its gradients, the product 5-7 us), or in
    ``_short_products`` when not ``planned`` (small) and the contraction is short.
    C-ordered, as einsum's result; None where it is not such a product, or small and
    contracting short letters that the kernel does not take (NumPy's own loop then)."""
    if x.dtype != y.dtype or x.dtype.kind != "f" or not (planned or x.dtype == np.float64):
        return None
    plan = _product_plan(ins[0], ins[1], out, x.shape, y.shape, planned)
    if plan is None:
        return None
    if plan[0] == "short":
        _, (px, sx), (py, sy), shape, slots = plan
        z = np.empty(shape)
        _short_products(x.transpose(px).reshape(sx), y.transpose(py).reshape(sy),
                        z.reshape(slots))
        return z
    _, (px, sx), (py, sy), shape, back, into = plan
    xm, ym = x.transpose(px).reshape(sx), y.transpose(py).reshape(sy)
    if into is not None and x.dtype == y.dtype == np.float64:
        # the product written straight into the C-ordered result, through a view of it in
        # the product's order (GMM's gradient 'mij,ijk->mik': product then a transposing
        # copy 32 us, into the result 8; the same products, the same values)
        out_shape, inverse = into
        res = np.empty(out_shape)
        np.matmul(xm, ym, out=res.transpose(inverse).reshape((sx[0], sx[1], sy[2])))
        return res
    z = np.matmul(xm, ym).reshape(shape)
    if back is None:   # (a number, as einsum's; ascontiguousarray would make it 1-d)
        return z[()]
    return np.ascontiguousarray(z.transpose(back))


@functools.lru_cache(maxsize=256)   # (an objective's einsum and its gradients, every call)
def _product_plan(a, b, out, xshape, yshape, planned):
    """How ``_einsum_as_matmul`` computes ``a,b->out``: ``("short", (x's permutation, its
    view's shape), (y's ...), the result's shape, its 3-d view's shape)``,
    ``("matmul", (x's permutation, shape), (y's ...), the product's shape, the permutation
    back (None for a number), ``_product_into``'s)``, or None."""
    if (len(set(a)) != len(a) or len(set(b)) != len(b) or len(set(out)) != len(out)
            or any(c not in b and c not in out for c in a)
            or any(c not in a and c not in out for c in b)):
        return None
    size = dict(zip(a, xshape))
    for c, n in zip(b, yshape):
        if c in size and size[c] != n:   # (a broadcast letter: einsum's own loop)
            return None
        size[c] = n
    summed = [c for c in a if c in b and c not in out]
    # a small product contracting short letters runs in the kernel (one letter, <= 3 out)
    # or NumPy's loop; larger ones, and small ones contracting longer, in BLAS's matmul
    # on the permuted operands (GMM's gradient 'mij,mik->ijk' with two 100 x 5 x 2:
    # NumPy's einsum loop 13 us, matmul 3.3)
    if not planned and math.prod(size[c] for c in summed) <= _SHORT_CONTRACTION:
        if len(summed) != 1 or not 1 <= len(out) <= 3:
            return None
        slots = out.rjust(3, " ")   # (padded in front: size-1 dims)
        views = []
        for sub, shape in ((a, xshape), (b, yshape)):
            mine = [c for c in slots if c in sub] + summed
            views.append(([sub.index(c) for c in mine],
                          [size[c] if c in sub else 1 for c in slots] + [size[summed[0]]]))
        return ("short", *views, [size[c] for c in out], [size.get(c, 1) for c in slots])
    batch = [c for c in out if c in a and c in b]
    left = [c for c in out if c in a and c not in b]
    right = [c for c in out if c in b and c not in a]
    nb, nl, nr, ns = (math.prod(size[c] for c in cs) for cs in (batch, left, right, summed))
    order = batch + left + right
    back = [order.index(c) for c in out] if out else None
    return ("matmul", ([a.index(c) for c in batch + left + summed], (nb, nl, ns)),
            ([b.index(c) for c in batch + summed + right], (nb, ns, nr)),
            [size[c] for c in order], back,
            _product_into(back, tuple(size[c] for c in out), (nb, nl, nr)))


def _product_into(back, out_shape, product_shape):
    """``(the result's shape, the permutation viewing it in the product's order)`` where the
    ``product_shape`` result ``(nb, nl, nr)`` of ``(nb, nl, ns) @ (nb, ns, nr)`` can be
    written straight into a C-ordered result of ``out_shape`` (its letters reordered by
    ``back``): only where the view in the product's order takes that shape without a
    copy (a copy would take the product, the result none of it: tried here on an empty
    array).  None where not, or where nothing is reordered."""
    if back is None or back == sorted(back) or not all(out_shape):
        return None
    inverse = [0] * len(back)
    for k, b in enumerate(back):
        inverse[b] = k
    view = np.empty(out_shape).transpose(inverse)
    try:
        view.shape = product_shape   # (raises where only a copy has that shape)
    except AttributeError:
        return None
    # rows of the product laid out in the result as in a C-ordered product (each batch's
    # matrix a block of rows with a leading dimension): BLAS computes them as it would
    # there.  A result whose rows run across it (F-ordered blocks) is computed transposed,
    # rounded otherwise: left to the copy.
    if product_shape[2] > 1 and view.strides[2] != view.itemsize:
        return None
    return out_shape, tuple(inverse)


def _einsum_grad(g, equation, xs, k):
    """d einsum / d operand k: the einsum of ``g`` with the other operands onto operand
    k's subscripts.  A letter that operand k repeats (a diagonal) is renamed and tied to
    its first use by an identity matrix; a letter only operand k has (summed out there)
    comes back by expanding."""
    subs, partial, eyes, back = _grad_plan(equation, tuple(x.shape if x.__class__ is np.ndarray
                                                      else tuple(_shape(x)) for x in xs), k)
    eyes = [np.eye(n) if g.__class__ is np.ndarray else wrap(np.eye(n)) for n in eyes]
    operands = [g] + [x for j, x in enumerate(xs) if j != k] + eyes
    r = rule_call("einsum", _einsum_equation(subs, partial), *operands)
    if back is not None:
        shape_in, order, shape = back
        if order is not None:
            r = rule_call("permute", r, order)
        r = rule_call("expand", rule_call("reshape", r, shape_in), shape)
    return r


@functools.lru_cache(maxsize=256)   # (an objective's einsum gradients, every call)
def _grad_plan(equation, shapes, k):
    """``_einsum_grad``'s product for operand ``k``: ``(subscripts, output subscript, sizes
    of the identity matrices, (shape, permutation or None, operand k's shape) to expand
    back to, or None)``."""
    ins, out = parse_einsum(equation, shapes)
    sub, shape = ins[k], shapes[k]
    spare = iter(c for c in string.ascii_letters if c not in "".join(ins) + out)
    target, eyes, seen = "", [], {}
    for c, n in zip(sub, shape):
        if c in seen:
            fresh = next(spare)
            eyes.append((seen[c] + fresh, n))
            target += fresh
        else:
            seen[c] = c
            target += c
    subs = [out] + [s for j, s in enumerate(ins) if j != k] + [s for s, _ in eyes]
    # letters of operand k found nowhere else: computed without, then expanded back
    have = "".join(subs)
    partial = "".join(c for c in target if c in have)
    back = None
    if partial != target:
        shape_in = tuple(n if c in partial else 1 for c, n in zip(target, shape))
        order = [partial.index(c) for c in target if c in partial]
        back = (shape_in, tuple(order) if order != sorted(order) else None, tuple(shape))
    return tuple(subs), partial, tuple(n for _, n in eyes), back


einsum.defvjp(lambda g, ans, equation, *xs:
              (None,) + tuple((lambda k=k: _einsum_grad(g, equation, xs, k))
                              for k in range(len(xs))))


@defop("cross", "LinalgCrossBackward0", method=False, numpy_rule=True, grad_depends="others")
def cross(a, b, dim=-1):
    if a.__class__ is np.ndarray and b.__class__ is np.ndarray and a.shape == b.shape == (3,) \
            and a.dtype == b.dtype == np.float64:
        # two 3-vectors (bundle adjustment's rotations): np.cross's formula and order of
        # operations, without its axis moving, which costs ten times the arithmetic
        a0, a1, a2 = a.tolist()
        b0, b1, b2 = b.tolist()
        wrap_dim(dim, 1)
        return np.array([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0])
    return np.cross(a, b, axis=wrap_dim(dim, max(np.ndim(a), np.ndim(b))))


# d (a x b) = da x b + a x db: a's gradient is b x g, b's is g x a
cross.defvjp(lambda g, ans, a, b, dim=-1: (lambda: rule_call("cross", b, g, dim=dim),
                                           lambda: rule_call("cross", g, a, dim=dim)))


# -- repeating and triangles -------------------------------------------------------------------

@defop("repeat", "RepeatBackward0", method=False, saves=False)
def repeat(x, sizes):
    x = np.asarray(x)
    return contiguous(np.tile(x.reshape((1,) * (len(sizes) - x.ndim) + x.shape), sizes))


def _repeat_back(g, x, sizes):
    # each repeat of x is a block of g: view g as (repeats, size) pairs and sum the repeats
    shape = (1,) * (len(sizes) - len(_shape(x))) + tuple(_shape(x))
    pairs = tuple(n for s, k in zip(shape, sizes) for n in (k, s))
    g = call("sum", call("reshape", g, pairs), dim=tuple(range(0, 2 * len(sizes), 2)))
    return call("reshape", g, _shape(x)) if _shape(g) != _shape(x) else g


repeat.defvjp(lambda g, ans, x, sizes: (_repeat_back(g, x, sizes), None))


@defop("tril", "TrilBackward0", method=False, saves=False)
def tril(x, diagonal=0):
    return contiguous(np.tril(x, diagonal))


tril.defvjp(lambda g, ans, x, diagonal=0: (call("tril", g, diagonal),))


@defop("triu", "TriuBackward0", method=False, saves=False)
def triu(x, diagonal=0):
    return contiguous(np.triu(x, diagonal))


triu.defvjp(lambda g, ans, x, diagonal=0: (call("triu", g, diagonal),))


@defop("diag", lambda x, diagonal=0: "DiagEmbedBackward0" if np.ndim(x) == 1
       else "DiagonalBackward0_copy", method=False, saves=False)
def diag(x, diagonal=0):
    return np.diag(x, diagonal).copy()


def _diag_back(g, x, k):
    # diag of a vector builds a matrix, whose adjoint takes the diagonal back; diag of a
    # matrix takes a diagonal, whose adjoint writes it into zeros of the matrix's shape
    if len(_shape(x)) == 1:
        return call("diag", g, k)
    n = _shape(g)[0]
    rows, cols = np.arange(n) + max(-k, 0), np.arange(n) + max(k, 0)
    return call("unindex", g, _shape(x), (rows, cols))


diag.defvjp(lambda g, ans, x, diagonal=0: (_diag_back(g, x, diagonal),))


@defop("trace", "TraceBackward0", method=False, saves=False)
def trace(x):
    return np.trace(x)


def _trace_back(g, x):
    n, m = _shape(x)
    return call("diag", call("expand", call("reshape", g, (1,)), (min(n, m),)), 0) \
        if n == m else g * wrap(np.eye(n, m))


trace.defvjp(lambda g, ans, x: (_trace_back(g, x),))


# -- linear algebra --------------------------------------------------------------------------

def _mT(x):
    return call("transpose", x, -2, -1)


def _bcast_scalar(v):
    """A batch of scalars (shape ``s``) as shape ``s + (1, 1)``, to scale a batch of matrices."""
    return call("unsqueeze", call("unsqueeze", v, -1), -1)


class LinAlgError(RuntimeError):
    """A linear-algebra function met a matrix it cannot handle (``torch.linalg.LinAlgError``)."""


def _singular(name):
    return LinAlgError(f"linalg.{name}: The input matrix is singular, the {name} could not be "
                       "completed.")


@defop("inv", "LinalgInvExBackward0", method=False)
def inv(a):
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise _singular("inv") from None


# d inv(A) = -inv(A) dA inv(A): A's gradient is -inv(A)^T g inv(A)^T
inv.defvjp(lambda g, ans, a: (-call("matmul", call("matmul", _mT(ans), g), _mT(ans)),))


@defop("det", "LinalgDetBackward0", method=False)
def det(a):
    return np.linalg.det(a)


# d det(A) = det(A) tr(inv(A) dA): A's gradient is g det(A) inv(A)^T
det.defvjp(lambda g, ans, a: (_bcast_scalar(g * ans) * _mT(call("inv", a)),))


@defop("slogdet", "LinalgSlogdetBackward0", method=False, outputs=lambda r: (r[1], r[0]))
def slogdet(a):
    sign, logabsdet = np.linalg.slogdet(a)
    return sign, logabsdet


# d log|det A| = tr(inv(A) dA): A's gradient is g inv(A)^T (the sign is constant)
slogdet.defvjp(lambda g, ans, a: (_bcast_scalar(g) * _mT(call("inv", a)),))


@defop("solve", "LinalgSolveExBackward0", method=False)
def solve(a, b):
    try:
        if np.ndim(b) == 1:
            return np.linalg.solve(a, b[..., None])[..., 0]
        return np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise _singular("solve") from None


def _solve_grads(g, ans, a, b):
    # X = inv(A) B: B's gradient is inv(A)^T g, A's is -(that) X^T
    def gb():
        return call("solve", _mT(a), g)

    def ga():
        db = gb()
        if len(_shape(b)) == 1:
            return -call("outer", db, ans)
        return -call("matmul", db, _mT(ans))
    return ga, gb


solve.defvjp(lambda g, ans, a, b: _solve_grads(g, ans, a, b))
