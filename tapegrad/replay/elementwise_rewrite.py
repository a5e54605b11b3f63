"""Array code inside ``tg.compile``, recorded as scalar entries (as CasADi's SX does).

While a ``tg.compile``d function records, its input is an :class:`Elements`: a tensor whose
elements are 0-d leaves, held in a NumPy object array.  An elementwise op on it applies the
op-table row to every element (with NumPy broadcasting), and an array op (``sum``,
``matmul``, indexing, reshapes, ``softmax``...) is rewritten into elementwise ops over the
elements (``SCALAR_RULES`` below).  So vectorised code such as
``(100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()`` records the same scalar
tape as the loop, and every replay kernel (batches, forward mode, Hessians) applies to it.

Two hooks lead here: ``tensor._generic_slow`` (elementwise ops) and ``array_ops.call``
(array ops) hand over when an argument is an ``Elements``.  Reading an ``Elements``'s values
into NumPy or Python (``np.asarray(x)``, ``x.numpy()``, ``float(x)``) raises: the replay
could not follow such a value.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ..core import optable
from ..core.elementwise import FUNCTIONS
from ..core.forward import SCALAR_FORWARD
from ..core.pyop import Arg, pyop_at
from ..core.tape import (ARG, CONST, LEAF, LINK, N_ELEMENTWISE, OP_NAMES, PYFUNC, PYOUT, Tape,
                         recording)
from ..core.tensor import Tensor, ieee_value, note_comparison_use, tensor_of_entry, wrap
from ..ops.array_ops import (along_index, is_advanced_index, products_only, view_at,
                             view_through, without_leading_ones)
from ..ops.inplace_views import OVERLAP
from ..ops.torch_api import check_index, index_value

_WHERE = OP_NAMES.index("where")
_ADD = OP_NAMES.index("add")


class Elements(Tensor):
    """A tensor whose elements are scalar tensors (``_elems``, an object array) or Python
    numbers (constants); ``_v`` holds their values, so shape and dtype work as usual."""

    __slots__ = ("_elems",)
    __array_ufunc__ = None      # ``A @ x``, ``2.0 * x`` with NumPy on the left come to us

    def __getitem__(self, idx):
        idx = index_value(_mask_values(idx))
        check_index(self, idx)
        view, last = view_at(self._elems, idx)      # PyTorch's indexing, as tg's getitem
        return _wrap_elems(view[last])

    def __setitem__(self, idx, value):
        idx = index_value(_mask_values(idx))
        _assign(self._elems, idx, value)
        self._value = _values(self._elems)

    def __iter__(self):
        return (self[k] for k in range(len(self)))

    def __len__(self):
        return len(self._elems)

    def _refuse(self, *args, **kwargs):
        raise TypeError(
            "tg.compile: the function read the values of its input into NumPy or Python "
            "(np.asarray(x), x.numpy(), float(x), x.tolist(), ...); a replay cannot follow "
            "such values. Use tapegrad operations on x instead.")

    __array__ = numpy = item = tolist = __float__ = __int__ = __index__ = _refuse

    def __bool__(self):
        if self._elems.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(self._elems.reshape(-1)[0])

    def detach(self):
        return self._refuse()

    detach_ = detach

    @property
    def data(self):
        return self._refuse()

    def clone(self):
        return _wrap_elems(self._elems.copy())

    def _inplace(self, compute, aliased=False):
        """``x += ...``, ``x.mul_(...)``, ``x.copy_(...)``: the elements are replaced in
        place, so the views of ``x`` (NumPy views of its object array, as the view ops'
        rules make them) and its base see the change, as in PyTorch."""
        if not self._elems.flags.writeable:   # an expanded view
            raise RuntimeError(OVERLAP)
        objs = _E(compute(self))
        self._elems[...] = np.broadcast_to(objs, self._elems.shape)
        self._value = _values(self._elems)
        return self


def elements(leaves, shape=None):
    """An ``Elements`` of the given scalar tensors (``shape`` defaults to 1-D)."""
    objs = np.empty(len(leaves), dtype=object)
    for k, t in enumerate(leaves):      # one at a time: NumPy would convert a list
        objs[k] = t
    return _wrap_elems(objs.reshape(shape if shape is not None else (len(leaves),)))


def _mask_values(idx):
    """An index whose parts may be masks of recorded comparisons (``x[x > 0]``) as plain
    values; a replay cannot follow such a mask, so the recording notes it (no replay)."""
    parts = idx if isinstance(idx, tuple) else (idx,)
    out = []
    for part in parts:
        if isinstance(part, Elements):
            T = recording()
            for e in part._elems.reshape(-1):
                g = getattr(e, "_comparison", None)
                if T is not None and g is not None and g[0] is T:
                    note_comparison_use(T, g, "an index computed from recorded values")
                    break
            part = np.array([bool(_value(e)) for e in part._elems.reshape(-1)],
                            dtype=bool).reshape(part._elems.shape) \
                if all(isinstance(_value(e), (bool, np.bool_)) or np.asarray(_value(e)).dtype == bool
                       for e in part._elems.reshape(-1)) else part._value
        out.append(part)
    return tuple(out) if isinstance(idx, tuple) else out[0]


def _value(e):
    return e._value if isinstance(e, Tensor) else e


def _values(objs):
    flat = [_value(e) for e in objs.reshape(-1)]
    dtype = bool if flat and all(isinstance(v, (bool, np.bool_)) for v in flat) else np.float64
    return np.array(flat, dtype=dtype).reshape(objs.shape)


def _wrap_elems(objs):
    """An object array of elements as a tensor: 0-d gives the element itself."""
    if not isinstance(objs, np.ndarray):
        return objs if isinstance(objs, Tensor) else wrap(_const(objs))
    if objs.ndim == 0:
        e = objs[()]
        return e if isinstance(e, Tensor) else wrap(_const(e))
    r = object.__new__(Elements)   # (Tensor() runs tg.Tensor(data)'s __init__)
    r._elems, r._tape, r._value = objs, None, _values(objs)
    return r


def _const(v):
    return bool(v) if isinstance(v, (bool, np.bool_)) else float(v)


def _objects(a):
    """An argument as elements: an object array, or a scalar (tensor or number)."""
    if isinstance(a, Elements):
        return a._elems
    if isinstance(a, Tensor):
        v = a._value
        if v.__class__ is float:
            return a if a._tape is not None else v
        if getattr(a, "_comparison", None) is not None and np.ndim(v) == 0:
            return a     # a recorded comparison: it stays recorded (a guard or where's condition)
        if a._tape is not None:
            raise NotImplementedError(
                "tg.compile: an array tensor that requires grad, other than the input, "
                "entered the function; pass what you differentiate through x")
        return np.asarray(v).astype(object)
    if isinstance(a, np.ndarray):
        return a.astype(object)
    if isinstance(a, (list, tuple)):
        return np.asarray(a, dtype=np.float64).astype(object)
    return a


def _apply(code, fn, elems):
    """One element of an elementwise op: recorded if an operand is, else a constant."""
    if not any(isinstance(e, Tensor) and (e._tape is not None or getattr(e, "_comparison", None))
               for e in elems):
        xs = [float(_value(e)) for e in elems] + [0.0] * (3 - len(elems))
        try:
            v = SCALAR_FORWARD[code](*xs)
        except (ArithmeticError, ValueError):
            v = ieee_value(code, *xs)
        return bool(v) if optable.OPS[code].compare else float(v)
    if code == _WHERE and not isinstance(elems[0], Tensor):
        return elems[1] if elems[0] else elems[2]     # a constant condition selects
    return fn(*elems)


def elementwise(code, args):
    """Op-table row ``code`` over the elements of ``args`` (NumPy broadcasting)."""
    fn = _fn(OP_NAMES[code])
    objs = [_objects(a) for a in args]
    arrays = np.broadcast_arrays(*[np.asarray(o, dtype=object) if isinstance(o, np.ndarray)
                                   else _scalar_array(o) for o in objs])
    shape = arrays[0].shape
    flat = [a.reshape(-1) if a.flags.contiguous else a.ravel() for a in arrays]
    out = np.empty(int(np.prod(shape, dtype=np.int64)), dtype=object)
    for k in range(out.size):
        out[k] = _apply(code, fn, [f[k] for f in flat])
    return _wrap_elems(out.reshape(shape))


def _scalar_array(o):
    a = np.empty((), dtype=object)
    a[()] = o
    return a


# -- array ops as elementwise ops ----------------------------------------------------------

def _E(x):
    """An argument as an object array (0-d for a scalar)."""
    o = _objects(x)
    return o if isinstance(o, np.ndarray) else _scalar_array(o)


def _axes(dim, ndim):
    if dim is None:
        return None
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    return tuple(d % max(ndim, 1) for d in dims)


def _fold(fn, E, dim, keepdim):
    """Reduce with a binary tensor function (pairwise, left to right) along ``dim``."""
    uf = np.frompyfunc(fn, 2, 1)
    axes = _axes(dim, E.ndim)
    if E.size == 0 and fn in _IDENTITY:   # an empty sum is 0., an empty product 1.
        shape = tuple(1 if axes is None or k in axes else n for k, n in enumerate(E.shape)) \
            if keepdim else tuple(n for k, n in enumerate(E.shape)
                                  if axes is not None and k not in axes)
        full = np.empty(shape, dtype=object)
        full.fill(_IDENTITY[fn])
        return full
    if axes is None:
        r = functools.reduce(fn, E.reshape(-1))
        if not keepdim:
            return _scalar_array(r)
        full = np.empty((1,) * E.ndim, dtype=object)
        full.fill(r)
        return full
    for ax in sorted(axes, reverse=True):
        E = uf.reduce(E, axis=ax, keepdims=keepdim)
    return E


def _add(a, b):
    return a + b


def _mul(a, b):
    return a * b


_IDENTITY = {_add: 0.0, _mul: 1.0}


def _fn(name):
    """The op-table function ``tg.<name>`` (imported late: ``_methods`` imports us)."""
    return FUNCTIONS[name]


def _max(a, b):
    return _apply(OP_NAMES.index("maximum"), _fn("maximum"), [a, b])


def _min(a, b):
    return _apply(OP_NAMES.index("minimum"), _fn("minimum"), [a, b])


def _count(E, dim):
    axes = _axes(dim, E.ndim)
    return E.size if axes is None else int(np.prod([E.shape[a] for a in axes]))


def _sum(x, dim=None, keepdim=False):
    # + 0.0: a sum starts from 0.0, as PyTorch's (-0. + -0. is -0., their sum is 0.)
    return _E(_wrap_elems(_fold(_add, _E(x), dim, keepdim)) + 0.0)


def _mean(x, dim=None, keepdim=False):
    E = _E(x)
    return _E(_wrap_elems(_sum(x, dim, keepdim)) / float(_count(E, dim)))


def _var(x, dim=None, unbiased=True, keepdim=False, correction=None):
    E = _E(x)
    n = _count(E, dim)
    c = (1 if unbiased else 0) if correction is None else correction
    d = _wrap_elems(E) - _wrap_elems(_mean(x, dim, keepdim=True))
    v = _wrap_elems(_sum(d * d, dim, keepdim)) / float(max(n - c, 0))
    if n - c > 0 and n > 1 and v.numel() > 1:
        # as the eager op: exactly 0 over equal finite values (PyTorch's Welford update over a
        # dim), where two passes leave rounding that a `where(x.var(1) > 0, ...)` amplifies
        where = FUNCTIONS["where"]
        hi = _wrap_elems(_fold(_max, E, dim, keepdim))
        lo = _wrap_elems(_fold(_min, E, dim, keepdim))
        v = where(hi == lo, where(hi.abs() < math.inf, 0.0, v), v)
    return _E(v)


def _std(x, *args, **kwargs):
    # sqrt(var), but var itself where it is 0 (no spread): the gradient there is 0, as
    # PyTorch's std_backward masks it (sqrt' would be inf, times a zero d var = NaN)
    v = _wrap_elems(_var(x, *args, **kwargs))
    where, positive = FUNCTIONS["where"], v > 0.0
    return _E(where(positive, _fn("sqrt")(where(positive, v, 1.0)), v))


def _lse(x, dim=None, keepdim=False):
    m = _wrap_elems(_fold(_max, _E(x), dim, True))
    m = FUNCTIONS["where"](m.abs() < math.inf, m, 0.0)   # an infinite max shifts by 0
    s = _wrap_elems(_sum(_fn("exp")(_wrap_elems(_E(x)) - m), dim, True))
    r = _E(m + _fn("log")(s))
    return r if keepdim else _squeeze_axes(r, dim)


def _squeeze_axes(E, dim):
    axes = _axes(dim, E.ndim)
    return E.reshape(()) if axes is None else np.squeeze(E, axis=axes)


def _norm(x, p=2, dim=None, keepdim=False):
    X = _wrap_elems(_E(x))
    if p == 2:
        axes = _axes(dim, X.ndim)
        if all(X.shape[a] == 1 for a in (range(X.ndim) if axes is None else axes)):
            return _sum(_fn("abs")(X), dim, keepdim)   # one element: |x|, as the eager forward
        # sqrt masked at 0: the gradient there is 0, as PyTorch's norm backward (sqrt's own
        # would be inf times 0, NaN)
        v = _wrap_elems(_sum(X * X, dim, keepdim))
        where, positive = FUNCTIONS["where"], v > 0.0
        return _E(where(positive, _fn("sqrt")(where(positive, v, 1.0)), v))
    if p == 1:
        return _sum(_fn("abs")(X), dim, keepdim)
    return _E(_wrap_elems(_sum(_fn("abs")(X) ** float(p), dim, keepdim)) ** (1.0 / p))


def _softmax(x, dim):
    X = _wrap_elems(_E(x))
    e = _fn("exp")(X - _wrap_elems(_fold(_max, _E(x), dim, True)))
    return _E(e / _wrap_elems(_sum(e, dim, True)))


def _log_softmax(x, dim):
    # x - m - log(sum(exp(x - m))), as the eager forward: an infinite max gives NaN, as
    # PyTorch's (logsumexp shifts by 0 instead)
    X = _wrap_elems(_E(x))
    d = X - _wrap_elems(_fold(_max, _E(x), dim, True))
    return _E(d - _fn("log")(_wrap_elems(_sum(_fn("exp")(d), dim, True))))


def _softmax_backward_data(g, out, dim):
    G, O = _wrap_elems(_E(g)), _wrap_elems(_E(out))
    return _E((G - _wrap_elems(_sum(G * O, dim, True))) * O)


def _log_softmax_backward_data(g, out, dim):
    G = _wrap_elems(_E(g))
    return _E(G - _fn("exp")(_wrap_elems(_E(out))) * _wrap_elems(_sum(G, dim, True)))


def _expand(x, shape):
    E = _E(x)
    shape = tuple(E.shape[k - (len(shape) - E.ndim)] if n == -1 else n
                  for k, n in enumerate(shape))
    return np.broadcast_to(E, shape)   # a view, as PyTorch's (read-only: in place raises)


def _copy_slices(base, src, steps):
    out = _E(base).copy()
    view_through(out, steps)[...] = _E(src)
    return out


def _squeeze(x, dim=None):
    E = _E(x)
    if dim is not None and E.ndim and E.shape[dim] != 1:
        return E
    return np.squeeze(E, axis=dim)


def _split(x, split_size_or_sections, dim=0):
    E = _E(x)
    n = E.shape[dim]
    if isinstance(split_size_or_sections, int):
        cuts = list(range(split_size_or_sections, n, split_size_or_sections))
    else:
        cuts = list(np.cumsum(split_size_or_sections)[:-1])
    return tuple(np.split(E, cuts, axis=dim))


def _matmul(a, b):
    """Sums of products, each + 0.0: a BLAS accumulator starts at +0. (all products -0.
    give +0., where a sum of the products alone gives -0.; elsewhere + 0.0 changes
    nothing) -- but not where the eager op, as PyTorch's mm, multiplies one column by one
    row (an outer product: each result its one product)."""
    if b.ndim == 2 and products_only(a.shape, b.shape[::-1]):   # (b as linear's weights)
        return np.matmul(a, b)
    return np.matmul(a, b) + 0.0


def _linear(x, w, b=None):
    X, W = _E(x), _E(w)
    r = np.matmul(X, W.T) if products_only(X.shape, W.shape) else _matmul(X, W.T)
    return r if b is None else _E(_wrap_elems(r) + _wrap_elems(_E(b)))


def _to_dtype(x, dtype):
    if np.dtype(dtype) != np.float64:
        raise NotImplementedError("tg.compile: only float64 replays")
    return _E(x)


def _accumulate(fn, x, dim):
    """Cumulative ``fn`` (a binary tensor function) along ``dim``."""
    return np.frompyfunc(fn, 2, 1).accumulate(_E(x), axis=dim)


def _ungather(g, shape, dim, index, assign=False):
    out = np.full(shape, 0.0, dtype=object)
    idx = list(np.indices(np.shape(index), sparse=True))
    idx[dim] = np.asarray(index)
    for at, e in zip(zip(*[a.reshape(-1) for a in np.broadcast_arrays(*idx)]),
                     np.broadcast_to(_E(g), np.shape(index)).reshape(-1)):
        out[at] = e if assign else out[at] + e
    return out


def _unindex(g, shape, idx):
    """Zeros of ``shape`` with ``g`` at ``idx`` (getitem's adjoint, which gradients of
    gradients record): repeated advanced indices add up."""
    out = np.full(shape, 0.0, dtype=object)
    if is_advanced_index(idx):
        np.add.at(out, idx, _E(g))
    else:   # (a 0-d object array would be stored as the element itself)
        out[idx] = _objects(g)
    return out


def _assign(E, idx, value):
    """``E[idx] = value`` with PyTorch's semantics (its indexing order; a value's leading
    size-1 dims dropped before broadcasting)."""
    view, last = view_at(E, idx)
    vals = _objects(value)
    if not isinstance(vals, np.ndarray):
        if not isinstance(view[last], np.ndarray):   # one place: the element itself
            view[last] = vals
            return
        # many places (a slice, an index tensor): a 0-d object array broadcasts the element,
        # where NumPy would read a recorded number's own array
        vals = _scalar_array(vals)
    view[last] = vals.reshape(without_leading_ones(vals.shape))


def _index_put(x, idx, v):
    E = _E(x).copy()
    _assign(E, idx, v)
    return E


def _index_put_add(x, idx, v):
    """``index_put(..., accumulate=True)``: each value added at its place (a repeated place
    gets them all, in order)."""
    E = _E(x).copy()
    view, last = view_at(E, idx)
    vals = _E(v)   # (broadcast to the places first, as index_put_add's)
    np.add.at(view, last, np.broadcast_to(vals.reshape(without_leading_ones(vals.shape)),
                                          view[last].shape))
    return E


# -- activations and losses (the rows of ops/nn_ops.py) as elementwise ops -----------------

def _T(x):
    """An argument as a tensor of elements (operators and methods apply elementwise)."""
    return _wrap_elems(_E(x))


def _reduced(loss, reduction, weights=None):
    """``loss`` (elements) reduced as the losses reduce; a mean divides by the weights' sum."""
    if reduction == "none":
        return _E(loss)
    total = _sum(loss)
    if reduction == "sum":
        return total
    denom = float(np.size(_E(loss))) if weights is None else float(np.sum(weights))
    return _E(_wrap_elems(total) / denom)


def _where(c, a, b):
    return FUNCTIONS["where"](c, a, b)


def _log_clamped(x):
    # PyTorch clamps BCE's logs at -100
    return FUNCTIONS["maximum"](x.log(), -100.0)


def _bce(x, y, weight=None, reduction="mean"):
    X, Y = _T(x), _T(y)
    loss = -(Y * _log_clamped(X) + (1.0 - Y) * _log_clamped(1.0 - X))
    return _reduced(loss if weight is None else loss * _T(weight), reduction)


def _bce_logits(x, y, weight=None, pos_weight=None, reduction="mean"):
    X, Y = _T(x), _T(y)
    softplus_neg = (-X.abs()).exp().log1p() + (-X).relu()       # log(1 + exp(-x)), stable
    scale = 1.0 if pos_weight is None else (_T(pos_weight) - 1.0) * Y + 1.0
    loss = (1.0 - Y) * X + scale * softplus_neg
    return _reduced(loss if weight is None else loss * _T(weight), reduction)


def _nll(logp, target, weight=None, ignore_index=-100, reduction="mean"):
    """NLL of log-probabilities ``logp`` (elements; classes along dim 1, or 0 for 1-D)."""
    L = _E(logp)
    t = np.asarray(target._value if isinstance(target, Tensor) else target).astype(np.int64)
    dim = 0 if L.ndim == 1 else 1
    C = L.shape[dim]
    valid = t != ignore_index
    tc = np.where(valid, t, 0)
    if np.any((tc < 0) | (tc >= C)):
        raise IndexError(f"Target {int(t[(tc < 0) | (tc >= C)][0])} is out of bounds.")
    w = np.ones(C) if weight is None else np.asarray(_value(weight), dtype=np.float64)
    wt = np.where(valid, w[tc], 0.0)       # class weights are constants: not differentiated
    picked = np.take_along_axis(L, np.expand_dims(tc, dim), axis=dim).squeeze(dim)
    loss = -_wrap_elems(np.asarray(picked, dtype=object)) * tg_const(wt)
    return _reduced(loss, reduction, wt)


def tg_const(values):
    """A constant array as elements (plain numbers)."""
    return _wrap_elems(np.asarray(values, dtype=np.float64).astype(object))


def _cross_entropy(x, t, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    if label_smoothing:
        raise NotImplementedError("tg.compile: cross_entropy with label smoothing has no "
                                  "elementwise form yet")
    E = _E(x)
    logp = _E(_T(x) - _wrap_elems(_lse(x, 0 if E.ndim == 1 else 1, True)))
    return _nll(logp, t, weight, ignore_index, reduction)


def _smooth_l1(x, y, reduction="mean", beta=1.0):
    a = (_T(x) - _T(y)).abs()
    if beta == 0.0:
        return _reduced(a, reduction)
    return _reduced(_where(a < beta, a * a * (0.5 / beta), a - 0.5 * beta), reduction)


_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


def _gelu(x, approximate="none"):
    X = _T(x)
    if approximate == "tanh":
        return _E(0.5 * X * (1.0 + (_SQRT_2_OVER_PI * (X + 0.044715 * X * X * X)).tanh()))
    return _E(0.5 * X * (1.0 + (X * float(1.0 / np.sqrt(2.0))).erf()))


def _softplus(x, beta=1.0, threshold=20.0):
    BX = _T(x) * float(beta)
    stable = (BX.relu() + (-BX.abs()).exp().log1p()) / float(beta)
    return _E(_where(BX > threshold, _T(x), stable))


NN_RULES = {
    "leaky_relu": lambda x, negative_slope=0.01: _E(_where(_T(x) > 0.0, _T(x),
                                                           _T(x) * negative_slope)),
    "softplus": _softplus,
    "gelu": _gelu,
    "silu": lambda x: _E(_T(x) / ((-_T(x)).exp() + 1.0)),
    # (expm1 of x where x <= 0, else of 0: no overflow in the branch not taken, and slope
    # alpha at x = 0 as PyTorch's, where minimum(x, 0) would give its tie's half)
    "elu": lambda x, alpha=1.0: _E(_where(_T(x) > 0.0, _T(x),
                                          _where(_T(x) > 0.0, 0.0, _T(x)).expm1() * alpha)),
    "mse_loss": lambda x, y, reduction="mean": _reduced((_T(x) - _T(y)) ** 2.0, reduction),
    "soft_margin_loss": lambda x, y, reduction="mean": _reduced((-_T(x) * _T(y)).exp().log1p(),
                                                                reduction),
    "smooth_l1_loss": _smooth_l1,
    "binary_cross_entropy": _bce,
    "binary_cross_entropy_with_logits": _bce_logits,
    "nll_loss": _nll,
    "cross_entropy": _cross_entropy,
}


def _remainder_of(rounding):
    # (inside tg.compile the composition the tensor engine once used: ``x - trunc(x / y) *
    # y`` rounds ``trunc(x / y) * y``, exact while the quotient stays well below 2**53)
    def rule(x, y):
        X, Y = _T(x), _T(y)
        return _E(X - getattr(X / Y, rounding)() * Y)
    return rule


SCALAR_RULES = {
    "fmod": _remainder_of("trunc"),
    "remainder": _remainder_of("floor"),
    "lerp": lambda x, end, weight: _E(_T(x) + _T(weight) * (_T(end) - _T(x))),
    "sum": _sum,
    "mean": _mean,
    "prod": lambda x, dim=None, keepdim=False: _fold(_mul, _E(x), dim, keepdim),
    "amax": lambda x, dim=None, keepdim=False: _fold(_max, _E(x), dim, keepdim),
    "amin": lambda x, dim=None, keepdim=False: _fold(_min, _E(x), dim, keepdim),
    "max_all": lambda x: _fold(_max, _E(x), None, False),
    "min_all": lambda x: _fold(_min, _E(x), None, False),
    "var": _var,
    "std": _std,
    "norm": _norm,
    "logsumexp": _lse,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
    "softmax_backward_data": _softmax_backward_data,
    "soft_margin_loss_backward": lambda g, x, y, reduction="mean": _E(
        _T(y) * (-_T(y) * _T(x)).exp() * -(1.0 / _E(x).size if reduction == "mean" else 1.0)
        / ((-_T(y) * _T(x)).exp() + 1.0) * _T(g)),
    "log_softmax_backward_data": _log_softmax_backward_data,
    "matmul": lambda a, b: _matmul(_E(a), _E(b)),
    "linear": _linear,
    "outer": lambda a, b: np.outer(_E(a), _E(b)),
    "reshape": lambda x, shape: _E(x).reshape(shape),
    "view_node": lambda x, shape, node: _E(x).reshape(shape),
    "transpose": lambda x, dim0, dim1: np.swapaxes(_E(x), dim0, dim1),
    "t": lambda x: _E(x).T,
    "permute": lambda x, dims: np.transpose(_E(x), dims),
    "squeeze": _squeeze,
    "unsqueeze": lambda x, dim: np.expand_dims(_E(x), dim if dim >= 0 else _E(x).ndim + 1 + dim),
    "expand": _expand,
    "cat": lambda *xs, dim=0: np.concatenate([_E(x) for x in xs], axis=dim),
    "stack": lambda *xs, dim=0: np.stack([_E(x) for x in xs], axis=dim),
    "split": _split,
    "unbind": lambda x, dim=0: tuple(np.moveaxis(_E(x), dim, 0)),
    "getitem": lambda x, idx: _E(x)[idx],
    "reshape_alias": lambda x, shape: _E(x).reshape(shape),
    "diagonal": lambda x, offset=0, dim1=0, dim2=1:
    view_through(_E(x), (("diagonal", (offset, dim1, dim2), {}),)),
    "as_strided": lambda x, steps: view_through(_E(x), steps),
    "written_view": lambda x, steps: view_through(_E(x), steps),
    "copy_slices": _copy_slices,
    "gather": lambda x, dim, index: np.atleast_1d(_E(x))[along_index(np.asarray(index), dim)]
    .reshape(np.shape(index)),
    "index_select": lambda x, dim, index: np.take(_E(x), np.asarray(index), axis=dim),
    "take": lambda x, index: _E(x).reshape(-1)[np.asarray(index)],
    "index_put": _index_put,
    "index_put_add": _index_put_add,
    "cumsum": lambda x, dim: _accumulate(_add, x, dim),
    "cumprod": lambda x, dim: _accumulate(_mul, x, dim),
    "flip": lambda x, dims: np.flip(_E(x), axis=dims),
    "roll": lambda x, shifts, dims=None: np.roll(_E(x), shifts, axis=dims),
    "ungather": _ungather,
    "unindex": _unindex,
    "to_dtype": _to_dtype,
    **NN_RULES,
}


def array_op(name, args, params):
    """Array op ``name`` on arguments of which one is an ``Elements``."""
    rule = SCALAR_RULES.get(name)
    if rule is None:
        raise NotImplementedError(f"tg.compile: {name} has no elementwise form yet "
                                  "(it cannot be recorded for replay)")
    r = rule(*args, **params)
    if isinstance(r, tuple):
        return tuple(_wrap_elems(e) for e in r)
    return _wrap_elems(r)


# -- a recorded tape, run again on elements -------------------------------------------------

def scalarize_tape(T, inputs, outputs):
    """Run tape ``T`` again, entry by entry, on elements: a new tape of scalar entries with
    a fresh 0-d leaf per element of each input.  Returns ``(tape, leaves, outs, out_shape)``
    (``leaves`` and ``outs`` flat, in C order) for ``replay.CompiledTape``.

    Elementwise entries apply their op over the elements, array-op entries their rule
    above (``PyOp.fwd`` holds the op and its arguments), leaves that are not inputs and
    links from other tapes are constants.  Guards on scalar comparisons carry over."""
    end = max([t._entry for t in outputs] + [g[0] for g in T._guards]) + 1
    where = {id(x): k for k, x in enumerate(inputs)}
    S = Tape()
    S.rewrite_array_op = array_op
    leaves, made = [], []
    with S:
        for x in inputs:
            shape = tuple(x.shape)
            ls = [wrap(float(v), requires_grad=True)
                  for v in np.asarray(x._value, dtype=np.float64).reshape(-1)]
            leaves += ls
            made.append(ls[0] if shape == () else elements(ls, shape))
        vals = {}

        def get(r):
            if r < 0:
                return T._c[-r - 1]
            return vals[r]

        for i in range(end):
            code, ra, rb = T._entry(i)
            if code < N_ELEMENTWISE:
                args = [_as_arg(get(r)) for r in T._inputs(i)]
                vals[i] = elementwise(code, [a if code == _WHERE and k == 0 else _as_number(a)
                                             for k, a in enumerate(args)])
            elif code == LEAF:
                t = T._leaves[i]
                k = where.get(id(t))
                vals[i] = made[k] if k is not None else _as_arg(T._value(i))
            elif code in (CONST, LINK):
                vals[i] = _as_arg(T._value(i))
            elif code == PYFUNC:
                py = pyop_at(T, i)
                if py.fwd is None:
                    raise NotImplementedError(
                        f"compile(): tape entry {i} ({py.name}) is a custom Function or an op "
                        "with no forward to run again; it cannot be replayed")
                name, template, params = py.fwd
                args = [_as_arg(get(py.inputs[int(a)])) if isinstance(a, Arg) else a
                        for a in template]
                res = array_op(name, args, params)
                for k, v in enumerate(res if isinstance(res, tuple) else (res,)):
                    vals[i + 1 + k] = v
            elif code not in (ARG, PYOUT):
                raise NotImplementedError(f"compile(): tape entry {i} ({OP_NAMES[code]}) "
                                          "cannot be replayed")
        for i, v, at in T._guards:
            g = vals[i]
            if np.ndim(v):
                raise NotImplementedError("compile(): a branch on an array comparison (its "
                                          f"outcome at {at} depends on every element)")
            rec = getattr(g, "_comparison", None) if isinstance(g, Tensor) else None
            if rec is not None and rec[0] is S:      # a comparison recorded on S
                S._guards.append((rec[1], v, at))
    outs, shape = [], None
    for t in outputs:
        v = vals[t._entry]
        if isinstance(v, Elements):
            if len(outputs) == 1:
                shape = tuple(v.shape)
            outs += list(v._elems.reshape(-1))
        else:
            outs.append(v)
    input_elems = {id(x) for x in leaves}
    for k, e in enumerate(outs):
        if isinstance(e, Tensor) and e._tape is not S and id(e) in input_elems:
            # an input element returned as it is (``x[0, 3]``): its leaf entry is the output
            outs[k] = tensor_of_entry(S, S._ref(e), e._value)
        elif not (isinstance(e, Tensor) and e._tape is S):
            outs[k] = constant_entry(S, e)   # a constant output (x[0] = 1.5): gradient 0
    return S, leaves, outs, shape


def _as_number(v):
    """An operand of an arithmetic entry: a comparison's elements as recorded 0/1 entries
    (``where(cmp, 1, 0)``).  The tape holds a comparison as 0/1, and create_graph rules
    combine recorded comparisons arithmetically (``a and b`` as ``a * b != 0``); on
    elements a comparison is a bool tensor, which an arithmetic op would take as a
    constant."""
    elems = v._elems.reshape(-1) if isinstance(v, Elements) else [v]
    if any(isinstance(e, Tensor) and getattr(e, "_comparison", None) is not None
           for e in elems):
        return _as_arg(elementwise(_WHERE, [v, 1.0, 0.0]))
    return v


def constant_entry(S, value):
    """A scalar entry of tape ``S`` holding the constant ``value`` (an output that does not
    depend on the inputs): ``value + -0.0``, which every replay kernel runs (and which
    keeps every value: ``-0.0 + 0.0`` would be ``0.0``)."""
    v = float(value._value if isinstance(value, Tensor) else value)
    i = S._push(_ADD, S._const(v), S._const(-0.0), v)
    return tensor_of_entry(S, i, v)


def _as_arg(v):
    """A value from the walk as an op argument: object arrays become ``Elements``."""
    if isinstance(v, np.ndarray):
        return _wrap_elems(v.astype(object)) if v.dtype != object else _wrap_elems(v)
    return v


# Elements records its ops through the functions above (the hooks of ``core.tensor``).
Elements.__tapegrad_elementwise__ = staticmethod(elementwise)
Elements.__tapegrad_array_op__ = staticmethod(array_op)
