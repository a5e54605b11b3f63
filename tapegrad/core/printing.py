"""Tensor values printed as PyTorch prints them."""
from __future__ import annotations

import math

import numpy as np


def _fmt_scalar(x, integral, sci):
    if x != x:
        return "nan"
    if x in (math.inf, -math.inf):
        return "inf" if x > 0 else "-inf"
    if sci:
        return f"{x:.4e}"
    if integral:
        return f"{x:.0f}."
    return f"{x:.4f}"


def format_value(v):
    """Format a value as PyTorch prints tensors."""
    a = np.asarray(v)
    if a.dtype == np.bool_:
        body = np.array2string(a, separator=", ", formatter={"bool": lambda b: str(b)},
                               prefix="tensor(", threshold=1000)
        return body
    if a.dtype.kind in "iu":
        return np.array2string(a, separator=", ", prefix="tensor(", threshold=1000)
    fin = a[np.isfinite(a)] if a.size else a
    integral = bool(fin.size == 0 or np.all(fin == np.round(fin)))
    mx = float(np.max(np.abs(fin))) if fin.size else 0.0
    nz = np.abs(fin[fin != 0]) if fin.size else fin
    sci = bool(fin.size and (mx >= 1e8 or (not integral and nz.size and np.min(nz) < 1e-4)))
    if integral and not sci and mx >= 1e8:
        sci = True
    flat = a.ravel()
    shown = flat if flat.size <= 1000 else np.concatenate([flat[:500], flat[-500:]])
    width = max((len(_fmt_scalar(x, integral, sci)) for x in shown[np.isfinite(shown)].tolist()),
                default=0)
    # pad to one width so that columns line up (``tensor([ 1.5000, -2.0000])``)
    return np.array2string(a, separator=", ", prefix="tensor(", threshold=1000,
                           formatter={"float_kind": lambda x: _fmt_scalar(x, integral, sci).rjust(width)})
