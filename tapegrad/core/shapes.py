"""Dims and broadcasting, checked as PyTorch checks them (its exception types and words)."""
from __future__ import annotations

import numpy as np


def wrap_dim(dim, ndim):
    """``dim`` of a tensor with ``ndim`` dimensions as an index ``0 <= dim < ndim``, checked
    as PyTorch checks it (a 0-d tensor takes ``0`` and ``-1``): the one place dims are
    normalised, for every row and function."""
    n = ndim if ndim > 0 else 1
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return int(dim) % n


def wrap_dims(dims, ndim):
    """A dim or a sequence of dims, each ``wrap_dim``-ed, as a tuple without repeats."""
    dims = dims if isinstance(dims, (tuple, list)) else (dims,)
    out = tuple(wrap_dim(d, ndim) for d in dims)
    for k, d in enumerate(out):
        if d in out[:k]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
    return out


def broadcast_error(shapes):
    """PyTorch's error for operand shapes that do not broadcast (None when they do): the
    first clash from the last dim on."""
    n = max(len(s) for s in shapes)
    for k in range(1, n + 1):
        x = None
        for s in shapes:
            y = s[-k] if k <= len(s) else 1
            if x is not None and x != y and x != 1 and y != 1:
                return RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b "
                                    f"({y}) at non-singleton dimension {n - k}")
            x = y if x is None or x == 1 else x
    return None


def laid_out(v, operands):
    """Elementwise result ``v`` laid out as PyTorch's (``torch_layout``) where an operand is
    not C-contiguous (NumPy's layout is PyTorch's otherwise)."""
    for x in operands:
        if x.__class__ is np.ndarray and x.ndim > 1 and not x.flags.c_contiguous:
            return torch_layout(v, operands) if v.__class__ is np.ndarray else v
    return v


def torch_layout(v, operands):
    """Elementwise result ``v`` (a NumPy array) laid out as PyTorch's TensorIterator lays out
    the result of ``operands`` (arrays and numbers, in argument order), a copy where NumPy's
    layout differs.  Called only when an operand is not C-contiguous: PyTorch gives a
    permuted operand's layout priority over a contiguous one's (``maximum(x.permute(..), c)``
    keeps ``x``'s), and a C-ordered result to an expanded one, where NumPy's 'K' order
    does otherwise -- and contiguity decides what later views and reshapes record.  The
    dims are ordered by ``reorder_dimensions``' comparison (the first operand with unequal,
    nonzero strides decides; equal strides put the smaller dim first); dims of size 1,
    which lay out nothing, are left out."""
    shape = v.shape
    if len(shape) < 2 or v.size == 0:
        return v
    if v.flags.c_contiguous and _c_ordered(operands, shape):
        return v
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    strides = []
    for x in operands:
        if x.__class__ is not np.ndarray or not x.ndim:
            continue
        lead = len(shape) - x.ndim
        strides.append([0 if d < lead or (x.shape[d - lead] == 1 and shape[d] != 1)
                        else x.strides[d - lead] // x.itemsize for d in range(len(shape))])

    def should_swap(d0, d1):
        for st in strides:
            s0, s1 = st[d0], st[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return 1 if s0 > s1 else -1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    perm = dims[::-1]   # (the innermost first, as PyTorch starts)
    for i in range(1, len(perm)):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            c = should_swap(perm[d0], perm[d1])
            if c > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif c < 0:
                break
    want, step = {}, 1
    for d in perm:
        want[d] = step
        step *= shape[d]
    if all(v.strides[d] == want[d] * v.itemsize for d in dims):
        return v
    order = [d for d in range(len(shape)) if shape[d] == 1] + perm[::-1]   # slowest first
    out = np.empty([shape[d] for d in order], v.dtype).transpose(np.argsort(order))
    np.copyto(out, v)
    return out


def _c_ordered(operands, shape):
    """Does every array among ``operands`` have the result's ``shape`` with strides that
    fall strictly from dim to dim (dims of size 1 aside): a slice or a block of rows or
    columns, the common non-contiguous operand?  Then every comparison of
    ``torch_layout``'s ordering keeps C order, and its loop is skipped (3 of an
    ``exp(icf[:, :d])``'s 4.4 us)."""
    for x in operands:
        if x.__class__ is not np.ndarray or not x.ndim:
            continue
        if x.shape != shape:
            return False
        last = None
        for n, s in zip(shape, x.strides):
            if n == 1:
                continue
            if s <= 0 or (last is not None and s >= last):
                return False
            last = s
    return True


def broadcast_view(v, shape):
    """``np.broadcast_to(v, shape)`` for an ndarray ``v`` that broadcasts to ``shape``: a
    read-only view.  A C-contiguous ``v`` is viewed directly, at half of broadcast_to's
    cost (2.4 -> 1.3 us: the broadcasts of every op between arrays of two shapes)."""
    if not v.flags.c_contiguous or not v.size or len(shape) < v.ndim:
        return np.broadcast_to(v, shape)
    lead = len(shape) - v.ndim
    strides = [0] * lead
    for n, m, s in zip(v.shape, shape[lead:], v.strides):
        if n != m and n != 1:   # (never a view past v's memory: broadcast_to's error)
            return np.broadcast_to(v, shape)
        strides.append(s if n == m else 0)
    out = np.ndarray(shape, v.dtype, v, 0, strides)
    out.flags.writeable = False
    return out
