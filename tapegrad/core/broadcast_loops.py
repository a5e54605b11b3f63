"""Arithmetic of two arrays broadcast against each other, in Numba loops where NumPy's
broadcasting loop is slow: NumPy runs its inner loop over the last dim only, paying its
per-loop cost once per row, which dominates where rows are short.

- ``(n, 1, d) <op> (1, K, d)`` (``x[:, None, :] - means[None, :, :]``: distances,
  mixtures): ``(1000, 1, 2) - (1, 5, 2)`` 47-50 us in NumPy, 11 here; ``(10000, 1, 2) - (1,
  5, 2)`` 480 against 103, ``(100, 1, 2) - (1, 5, 2)`` 5.8 against 1.9.
- Two dims once the dims of size 1 are dropped and neighbouring dims broadcast alike are
  merged: a full operand with a row (``(1000, 5) - (5,)``: 6.2 us in NumPy, 2.8 here) or a
  column (``(1000, 5) - (1000, 1)``: 5.8 against 2.6), or a column with a row (k-means'
  ``a[None, :] + b[:, None]``, ``(10, 1) + (1, 1000)``: 5.6 against 1.7).

The values are NumPy's: one IEEE add, subtract, multiply or divide per element
(``error_model="numpy"``: inf and NaN, never an exception), in C order."""
from __future__ import annotations

import numpy as np

from . import optable
from .numba_jit import jit

# op code (optable) -> the kernel's op: the four correctly rounded operations
_KERNELS_OPS = ("add", "sub", "mul", "div")
_KERNEL_OP = {code: _KERNELS_OPS.index(op.name) for code, op in enumerate(optable.OPS)
              if op.name in _KERNELS_OPS}
_F64 = np.dtype(np.float64)


@jit
def _outer_rows(op, rows_first, a, b, out):
    """``out[i, j] = a[i] <op> b[j]`` (``rows_first``), else ``b[j] <op> a[i]``, for ``a``
    of shape (n, d), ``b`` (K, d) and ``out`` (n, K, d); op 0-3: add, sub, mul, div."""
    n, d = a.shape
    m = b.shape[0]
    for i in range(n):
        for j in range(m):
            if op == 0:
                for k in range(d):
                    out[i, j, k] = a[i, k] + b[j, k]
            elif op == 2:
                for k in range(d):
                    out[i, j, k] = a[i, k] * b[j, k]
            elif op == 1 and rows_first:
                for k in range(d):
                    out[i, j, k] = a[i, k] - b[j, k]
            elif op == 1:
                for k in range(d):
                    out[i, j, k] = b[j, k] - a[i, k]
            elif rows_first:
                for k in range(d):
                    out[i, j, k] = a[i, k] / b[j, k]
            else:
                for k in range(d):
                    out[i, j, k] = b[j, k] / a[i, k]


@jit(inline="always")
def _apply(op, x, y):
    """``x <op> y`` for op 0-5: add, sub, mul, div, then sub and div with ``y`` first."""
    if op == 0:
        return x + y
    if op == 1:
        return x - y
    if op == 2:
        return x * y
    if op == 3:
        return x / y
    if op == 4:
        return y - x
    return y / x


@jit
def _two_dims(op, mode, a, b, out):
    """``out[i, j] = a[i, j] <op> b[0, j]`` (mode 0: ``b`` a row), ``a[i, j] <op> b[i, 0]``
    (mode 1: a column) or ``a[i, 0] <op> b[0, j]`` (mode 2); ``a``, ``b`` and ``out`` 2-d.
    (The op is tested inside the loops, and LLVM takes it out of them: one loop each.)"""
    n, m = out.shape
    if mode == 0:
        for i in range(n):
            for j in range(m):
                out[i, j] = _apply(op, a[i, j], b[0, j])
    elif mode == 1:
        for i in range(n):
            bi = b[i, 0]
            for j in range(m):
                out[i, j] = _apply(op, a[i, j], bi)
    else:
        for i in range(n):
            ai = a[i, 0]
            for j in range(m):
                out[i, j] = _apply(op, ai, b[0, j])


# Below this many result elements NumPy's loop costs about as much as this function's own
# Python and the kernel's call (~2 us: ``(200, 10) - (10,)`` 2.3 us in NumPy, 2.9 here).  A
# division runs faster here only along rows this long: shorter ones do not vectorize, and
# a division one at a time costs more than NumPy's loop (``(1000, 5) / (5,)`` 6.5 us in
# NumPy, 9.3 here; ``(10, 1) / (1, 1000)`` 7.1 against 5.5)
_FEW = 4096
_DIVIDED_ROW = 64
_SWAPPED = (0, 4, 2, 5)   # (the op with its operands the other way round: y <op> x)


# (op, x's shape, y's shape) -> ``_two_dim_plan``'s plan, or None where broadcast_arith
# leaves the pair to NumPy (the analysis cost ~1.5 us a call, half of a 10,000-element op's)
_PLANS = {}
_PLANS_LIMIT = 4096


def broadcast_arith(code, x, y):
    """``x <op> y`` for elementwise op ``code`` (add, sub, mul or div) of C-contiguous
    float64 arrays of two shapes that broadcast in one of the patterns above: the result
    NumPy gives (C-contiguous, as NumPy's), or None for anything else (shapes NumPy runs
    fast enough, or that do not broadcast: NumPy raises; another op or dtype)."""
    op = _KERNEL_OP.get(code)
    if op is None or x.__class__ is not np.ndarray or y.__class__ is not np.ndarray \
            or x.dtype is not _F64 or y.dtype is not _F64 or not x.ndim or not y.ndim:
        return None
    xs, ys = x.shape, y.shape
    if xs == ys:
        return None
    key = (op, xs, ys)
    plan = _PLANS.get(key, False)
    if plan is None or not (x.flags.c_contiguous and y.flags.c_contiguous):
        return None
    if len(xs) == 3 and len(ys) == 3:
        v = _outer_rows_of(op, x, y)
        if v is not None:
            return v
    if plan is False:
        plan = _two_dim_plan(op, xs, ys)
        if len(_PLANS) >= _PLANS_LIMIT:
            _PLANS.clear()
        _PLANS[key] = plan
        if plan is None:
            return None
    kernel_op, mode, x_shape, y_shape, swap, nm, shape = plan
    out = np.empty(nm)
    if swap:
        _two_dims(kernel_op, mode, y.reshape(y_shape), x.reshape(x_shape), out)
    else:
        _two_dims(kernel_op, mode, x.reshape(x_shape), y.reshape(y_shape), out)
    return out.reshape(shape)


def _two_dim_plan(op, xs, ys):
    """How ``broadcast_arith`` runs op ``op`` (its kernel's number) of arrays of shapes ``xs``
    and ``ys`` in ``_two_dims``: ``(kernel op, mode, x's and y's shapes for it, whether they
    go in swapped, the (n, m) result, the result's shape)``; None where NumPy does."""
    # each dim of the result (x's and y's shapes padded with leading 1s) that is not 1, by
    # who is full there (1 x only, 2 y only, 3 both); neighbours alike merge into one dim
    nx, ny = len(xs), len(ys)
    if nx != ny:
        xs, ys = (1,) * (ny - nx) + xs, (1,) * (nx - ny) + ys
    shape, kinds, sizes = [], [], []
    for a, b in zip(xs, ys):
        if a == b:
            shape.append(a)
            if a == 1:
                continue
            kind = 3
        elif a == 1:
            shape.append(b)
            kind = 2
        elif b == 1:
            shape.append(a)
            kind = 1
        else:
            return None   # (NumPy's error)
        if kinds and kinds[-1] == kind:
            sizes[-1] *= shape[-1]
        else:
            kinds.append(kind)
            sizes.append(shape[-1])
    if len(kinds) != 2:
        return None
    n, m = sizes
    if n * m < _FEW or (op == 3 and m < _DIVIDED_ROW):
        return None
    first, second = kinds
    # (the operand full in both dims, or the column, is ``a``; x second: the swapped op)
    if first == 3:      # both full down the rows; one is a column: mode 1
        mode, x_shape, y_shape = 1, (n, m) if second == 1 else (n, 1), \
            (n, 1) if second == 1 else (n, m)
        swap = second != 1
    elif second == 3:   # one is a row repeated down the rows: mode 0
        mode, x_shape, y_shape = 0, (n, m) if first == 1 else (1, m), \
            (1, m) if first == 1 else (n, m)
        swap = first != 1
    else:               # a column by a row: mode 2
        mode, x_shape, y_shape = 2, (n, 1) if first == 1 else (1, m), \
            (1, m) if first == 1 else (n, 1)
        swap = first != 1
    return (_SWAPPED[op] if swap else op, mode, x_shape, y_shape, swap, (n, m), tuple(shape))


def _outer_rows_of(op, x, y):
    """``x <op> y`` for 3-d ``x`` and ``y`` of shapes ``(n, 1, d)`` and ``(1, K, d)`` (either
    first, ``n`` and ``K`` above 1), else None."""
    xs, ys = x.shape, y.shape
    if xs[2] != ys[2]:
        return None
    if xs[1] == 1 and ys[0] == 1 and xs[0] > 1 and ys[1] > 1:
        rows_first, a, b = True, x, y      # x (n, 1, d), y (1, K, d)
    elif xs[0] == 1 and ys[1] == 1 and ys[0] > 1 and xs[1] > 1:
        rows_first, a, b = False, y, x     # x (1, K, d), y (n, 1, d)
    else:
        return None
    n, m, d = a.shape[0], b.shape[1], a.shape[2]
    out = np.empty((n, m, d))
    if d == 2:
        _outer_pairs(op if rows_first else _SWAPPED[op], a.reshape(n, d), b.reshape(m, d), out)
    else:
        _outer_rows(op, rows_first, a.reshape(n, d), b.reshape(m, d), out)
    return out


@jit
def _outer_pairs(op, a, b, out):
    """``_outer_rows`` for rows of two (GMM's d = 2: ``x[:, None, :] - means[None]``),
    ``out[i, j] = a[i] <op> b[j]`` with ``_apply``'s ops (4 and 5: ``b[j] <op> a[i]``), each
    pair written out: the loop over a row of two does not vectorize (10,000 elements 11.1 ->
    6.6 us); longer rows keep ``_outer_rows``, where the op's test stays out of the loop."""
    n = a.shape[0]
    m = b.shape[0]
    flat = out.reshape(out.size)
    p = 0
    for i in range(n):
        a0 = a[i, 0]
        a1 = a[i, 1]
        for j in range(m):
            flat[p] = _apply(op, a0, b[j, 0])
            flat[p + 1] = _apply(op, a1, b[j, 1])
            p += 2


@jit
def _repeat_3d(src, out):
    """``_copy_3d`` where ``src`` repeats each element along a last dim of 2 or 3 (stride
    0: a sum's gradient over GMM's d = 2 spread back), the repeats written out one by one:
    ``_copy_3d``'s loop does not vectorize there (10,000 elements 7.4 -> 3.9 us); over
    longer rows it runs faster."""
    a, b, c = src.shape
    flat = out.reshape(out.size)
    p = 0
    for i in range(a):
        for j in range(b):
            v = src[i, j, 0]
            flat[p] = v
            flat[p + 1] = v
            if c == 3:
                flat[p + 2] = v
            p += c


def _copy(src, out):
    """``out[...] = src`` for 3-d ``src`` (any strides) and C-contiguous ``out``."""
    if src.strides[2] == 0 and (src.shape[2] == 2 or src.shape[2] == 3):
        _repeat_3d(src, out)
    else:
        _copy_3d(src, out)


@jit
def _copy_3d(src, out):
    """``out[...] = src`` for 3-d arrays of one shape, ``src`` of any strides (a broadcast
    view: 0 where it repeats), ``out`` C-contiguous."""
    a, b, c = src.shape
    for i in range(a):
        for j in range(b):
            for k in range(c):
                out[i, j, k] = src[i, j, k]


def broadcast_copy(g, shape):
    """``g`` (an array or a number) broadcast to ``shape``, as a new C-ordered float64
    array.  A C-contiguous float64 array repeated along a dim inside it, after one it does
    not repeat along, with a short last dim (``(1000, 5)[:, :, None]`` or ``(1000, 1, 2)`` to ``(1000, 5, 2)``:
    GMM's sums over dims), is copied in a Numba loop over its dims merged where they can
    be: NumPy's copy runs its inner loop once per short run there (16-27 us against
    9-11).  NumPy copies the rest (repeated whole blocks, which it copies a block at a
    time; small arrays)."""
    out = np.empty(shape)
    if g.__class__ is np.ndarray and g.dtype is _F64 and out.size >= _COPIED_FROM and \
            shape[-1] < _SHORT_RUN and g.flags.c_contiguous and 0 < g.ndim <= len(shape):
        dims = _merged_dims(g.shape, g.strides, shape)
        if dims is not None:
            sizes, strides = dims
            _copy(np.ndarray(sizes, _F64, g, 0, strides), out.reshape(sizes))
            return out
    elif g.__class__ is np.ndarray and g.dtype is _F64 and g.shape == shape and \
            out.size >= _COPIED_FROM and shape[-1] < _SHORT_RUN and len(shape) <= 3 and \
            _repeats_inside(g.strides):
        # a broadcast view already (a sum's gradient spread back): its own dims
        lead = (1,) * (3 - len(shape))
        _copy(g[(None,) * len(lead)], out.reshape(lead + shape))
        return out
    out[...] = g
    return out


def _repeats_inside(strides):
    """Is a dim repeated (stride 0) after one that is not?"""
    seen = False
    for s in strides:
        if s:
            seen = True
        elif seen:
            return True
    return False


def _merged_dims(gshape, gstrides, shape):
    """The dims of an array (``gshape``, ``gstrides`` in bytes) broadcast to ``shape``,
    merged where neighbours step alike, dims of 1 dropped, padded in front to three:
    ``(sizes, strides)``; None where it does not broadcast, where NumPy's copy is as fast
    (no dim repeated after one that is not: whole blocks repeated; a last dim of
    ``_SHORT_RUN`` or more: NumPy's inner loop) or more than three dims are left."""
    lead = len(shape) - len(gshape)
    sizes, steps = [], []
    for k, n in enumerate(shape):
        if k < lead:
            s = 0
        else:
            m = gshape[k - lead]
            s = gstrides[k - lead] if m == n else 0
            if m != n and m != 1:
                return None
        if n == 1:
            continue
        if sizes and steps[-1] == s * n:   # (the previous dim steps over this one whole)
            sizes[-1] *= n
            steps[-1] = s
        else:
            sizes.append(n)
            steps.append(s)
    if not 2 <= len(sizes) <= 3 or sizes[-1] >= _SHORT_RUN:
        return None
    if not _repeats_inside(steps):
        return None
    pad = 3 - len(sizes)
    return (1,) * pad + tuple(sizes), (0,) * pad + tuple(steps)


_COPIED_FROM = 1024   # (below, the loop's call costs more than NumPy's short copies)
_SHORT_RUN = 16       # (a last dim this long or longer: NumPy's copy keeps up)
