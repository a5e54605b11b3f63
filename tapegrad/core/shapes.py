"""Dims and broadcasting, checked as PyTorch checks them (its exception types and words)."""
from __future__ import annotations


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
