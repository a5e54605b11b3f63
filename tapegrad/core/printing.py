"""Tensor values printed as PyTorch prints them."""
from __future__ import annotations

import math
import sys

import numpy as np


# torch.set_printoptions's settings (linewidth None: NumPy's line width, as before)
_DEFAULTS = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": None,
             "sci_mode": None}
OPTIONS = dict(_DEFAULTS)
_PROFILES = {"default": _DEFAULTS, "short": dict(_DEFAULTS, precision=2, edgeitems=2),
             "full": dict(_DEFAULTS, threshold=math.inf)}


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None,
                     profile=None, sci_mode=None):
    """As ``torch.set_printoptions``: digits after the point, how many elements print in
    full (``threshold``; ``edgeitems`` at each end beyond it), the line width, a profile
    (``"default"``, ``"short"``, ``"full"``) and ``sci_mode`` (True, False, or None: chosen
    from the values)."""
    if profile is not None:
        OPTIONS.update(_PROFILES[profile])
    for name, v in (("precision", precision), ("threshold", threshold),
                    ("edgeitems", edgeitems), ("linewidth", linewidth)):
        if v is not None:
            OPTIONS[name] = v
    OPTIONS["sci_mode"] = sci_mode


def get_printoptions():
    """The current print options (a dict)."""
    return dict(OPTIONS)


def _fmt_scalar(x, integral, sci):
    if x != x:
        return "nan"
    if x in (math.inf, -math.inf):
        return "inf" if x > 0 else "-inf"
    p = OPTIONS["precision"]
    if sci:
        return f"{x:.{p}e}"
    if integral:
        return f"{x:.0f}."
    return f"{x:.{p}f}"


def _layout():
    o = OPTIONS
    threshold = o["threshold"]
    kw = {"threshold": sys.maxsize if threshold == math.inf else int(threshold),
          "edgeitems": o["edgeitems"]}
    if o["linewidth"] is not None:
        kw["max_line_width"] = o["linewidth"]
    return kw


def format_value(v):
    """Format a value as PyTorch prints tensors."""
    a = np.asarray(v)
    if a.dtype == np.bool_:
        body = np.array2string(a, separator=", ", formatter={"bool": lambda b: str(b)},
                               prefix="tensor(", **_layout())
        return body
    if a.dtype.kind in "iu":
        return np.array2string(a, separator=", ", prefix="tensor(", **_layout())
    fin = a[np.isfinite(a)] if a.size else a
    integral = bool(fin.size == 0 or np.all(fin == np.round(fin)))
    mx = float(np.max(np.abs(fin))) if fin.size else 0.0
    nz = np.abs(fin[fin != 0]) if fin.size else fin
    sci = bool(fin.size and (mx >= 1e8 or (not integral and nz.size and np.min(nz) < 1e-4)))
    if integral and not sci and mx >= 1e8:
        sci = True
    if OPTIONS["sci_mode"] is not None:
        sci = bool(OPTIONS["sci_mode"])
    flat = a.ravel()
    shown = flat if flat.size <= OPTIONS["threshold"] else np.concatenate([flat[:500], flat[-500:]])
    width = max((len(_fmt_scalar(x, integral, sci)) for x in shown[np.isfinite(shown)].tolist()),
                default=0)
    # pad to one width so that columns line up (``tensor([ 1.5000, -2.0000])``)
    body = np.array2string(a, separator=", ", prefix="tensor(", **_layout(),
                           formatter={"float_kind": lambda x: _fmt_scalar(x, integral, sci).rjust(width)})
    return body.replace(", ..., ", ",  ..., ")   # PyTorch's summarised rows
