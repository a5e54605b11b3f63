"""``tg.autograd.detect_anomaly`` and ``set_detect_anomaly``, as PyTorch's.

In anomaly mode a backward walks every entry in Python (not in the Numba sweep) and raises
when a node returns NaN gradients, naming it as PyTorch does; entering the mode warns as
PyTorch's does.
"""
from __future__ import annotations

import functools
import threading
import warnings

import numpy as np

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled"]


class _Anomaly(threading.local):
    def __init__(self):
        self.enabled, self.check_nan = False, True


_state = _Anomaly()


def is_anomaly_enabled() -> bool:
    return _state.enabled


def is_anomaly_check_nan_enabled() -> bool:
    return _state.check_nan


def _set(enabled, check_nan):
    prev = (_state.enabled, _state.check_nan)
    _state.enabled, _state.check_nan = bool(enabled), bool(check_nan)
    return prev


class detect_anomaly:
    """Context manager and decorator that turns anomaly mode on."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def __enter__(self):
        self._prev = _set(True, self.check_nan)

    def __exit__(self, *exc):
        _set(*self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self:
                return fn(*args, **kwargs)
        return wrapper


class set_detect_anomaly:
    """Turn anomaly mode on or off: a call, or a context manager restoring it on exit."""

    def __init__(self, mode, check_nan=True):
        self._prev = _set(mode, check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(*self._prev)
        return False


def check_nan(name, grads):
    """Raise PyTorch's error when one of ``grads`` (a node's gradients of its inputs, in
    order) holds NaN and anomaly mode checks for NaN."""
    if not _state.check_nan:
        return
    for k, g in enumerate(grads):
        if g is not None and np.isnan(np.asarray(getattr(g, "_value", g), np.float64)).any():
            raise RuntimeError(f"Function '{name}' returned nan values in its {k}th output.")
