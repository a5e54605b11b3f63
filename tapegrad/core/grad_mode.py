"""Grad mode: ``no_grad``, ``enable_grad``, ``set_grad_enabled`` (per thread)."""
from __future__ import annotations

import functools

from .tape import thread_state


def is_grad_enabled() -> bool:
    """True when operations on tensors that require grad are recorded (this thread)."""
    return thread_state.grad_enabled


def _set(mode):
    st = thread_state
    prev = st.grad_enabled
    st.grad_enabled = bool(mode)
    st.refresh()
    return prev


class _Mode:
    """Context manager and decorator that sets grad mode and restores it on exit."""

    _mode = True

    def __enter__(self):
        self._prev = _set(self._mode)
        return None

    def __exit__(self, *exc):
        _set(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_Mode):
    """Disable recording: results do not require grad.  ``with tg.no_grad():`` or ``@tg.no_grad()``."""

    _mode = False


class enable_grad(_Mode):
    """Enable recording inside a ``no_grad`` region."""

    _mode = True


class set_grad_enabled(_Mode):
    """Set grad mode now; as a context manager or decorator, restore it afterwards."""

    def __init__(self, mode: bool) -> None:
        self._mode = bool(mode)
        self._prev = _set(self._mode)

    def __enter__(self):
        return None

    def __call__(self, fn):
        _set(self._prev)
        mode = self._mode

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapper
