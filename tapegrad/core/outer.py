"""Arithmetic of an ``(n, 1, d)`` array with a ``(1, K, d)`` one (``x[:, None, :] -
means[None, :, :]``: distances, mixtures), where NumPy's broadcasting loop is slow.

NumPy runs its inner loop over the last dim only, ``d`` long (2 for GMM's points), with
its per-loop cost paid ``n * K`` times: ``(1000, 1, 2) - (1, 5, 2)`` 47-50 us, against 11
here; ``(10000, 1, 2) - (1, 5, 2)`` 480 against 103, and ``(100, 1, 2) - (1, 5, 2)`` 5.8
against 1.9.  The values are NumPy's: one IEEE add, subtract, multiply or divide per
element (``error_model="numpy"``: inf and NaN, never an exception)."""
from __future__ import annotations

import numpy as np

from . import optable
from .numba_jit import jit

# op code (optable) -> the kernel's op: the four correctly rounded operations
_KERNEL_OP = {optable.OPS.index(op): k for k, op in enumerate(optable.OPS)
              if op.name in ("add", "sub", "mul", "div")}
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


def outer_rows(code, x, y):
    """``x <op> y`` for elementwise op ``code`` (add, sub, mul or div) where ``x`` and ``y``
    are C-contiguous float64 arrays of shapes ``(n, 1, d)`` and ``(1, K, d)`` (either
    first, ``n`` and ``K`` above 1): the result NumPy gives (C-contiguous, as NumPy's), or
    None for anything else (NumPy's loop is fast enough there, or the op not one of these)."""
    op = _KERNEL_OP.get(code)
    if op is None or x.__class__ is not np.ndarray or y.__class__ is not np.ndarray \
            or x.ndim != 3 or y.ndim != 3 or x.dtype is not _F64 or y.dtype is not _F64:
        return None
    xs, ys = x.shape, y.shape
    if xs[2] != ys[2]:
        return None
    if xs[1] == 1 and ys[0] == 1 and xs[0] > 1 and ys[1] > 1:
        rows_first, a, b = True, x, y      # x (n, 1, d), y (1, K, d)
    elif xs[0] == 1 and ys[1] == 1 and ys[0] > 1 and xs[1] > 1:
        rows_first, a, b = False, y, x     # x (1, K, d), y (n, 1, d)
    else:
        return None
    if not (a.flags.c_contiguous and b.flags.c_contiguous):
        return None
    n, m, d = a.shape[0], b.shape[1], a.shape[2]
    out = np.empty((n, m, d))
    _outer_rows(op, rows_first, a.reshape(n, d), b.reshape(m, d), out)
    return out
