"""Helpers shared by ``tapegrad.nn`` and ``tapegrad.optim``: values of tensors as NumPy, and
writing a new value into a tensor in place without recording.
"""
from __future__ import annotations

import numpy as np

from ..core.grad_mode import no_grad
from ..core.tensor import Tensor, wrap


def value(x):
    """The value of a tensor, NumPy array or number as a NumPy array (no copy)."""
    return np.asarray(x._value if isinstance(x, Tensor) else x)


def needs_grad(x):
    """True when ``x`` is a tensor that requires grad."""
    return isinstance(x, Tensor) and x._tape is not None


def set_value(t, new):
    """Overwrite the value of tensor ``t`` with ``new`` (an ndarray or a number of a shape
    broadcastable to ``t``'s) in place and without recording; returns ``t``.

    This is ``with tg.no_grad(): t.copy_(new)``.  It goes through ``Tensor._inplace`` -- the
    code path of ``sub_``/``add_``/``fill_`` under ``no_grad`` -- so that the tape is told:
    the old entry is marked modified (a backward through an op that saved the old value
    raises instead of silently using it) and a leaf is re-registered with its new value on
    next use.  Writing ``t._value`` directly (or ``t.data = ...``) skips both.  Array values are
    written into the existing array, so aliases (e.g. ``t.data``) see the new value, as in
    PyTorch.
    """
    with no_grad():
        return write(t, new)


def write(t, new):
    """``set_value`` for callers already under ``tg.no_grad()`` (an optimizer step enters it
    once: the context manager costs more than the write)."""
    return t._inplace(lambda s: wrap(new))


def mark_written(t):
    """Tell the tape that the array value of ``t`` was just changed in place by the caller
    (e.g. a fused optimizer kernel writing ``t._value``): the bookkeeping of ``write`` without a
    copy (NumPy's ``a[...] = a`` is a no-op).  Call under ``tg.no_grad()``."""
    return t._inplace(lambda s: wrap(s._value))
