"""Grad mode: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode`` (per
thread)."""
from __future__ import annotations

import functools

from . import interrupts
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


def _enter(mode):
    """Set grad mode, returning the previous one; an interrupt as it returns (``_set`` defers
    one to its end) puts the previous mode back, so a ``with`` that never starts its body
    does not leave grad mode changed."""
    prev = thread_state.grad_enabled
    try:
        return _set(mode)
    except BaseException:
        _set(prev)
        raise


# the mode and the recording state it caches change together: a Ctrl-C between the two
# left ops not recording while grad mode said they did (found by the interrupt storm)
interrupts.protect(_set)


class _Mode:
    """Context manager and decorator (``@no_grad()`` or ``@no_grad``) that sets grad mode
    and restores it on exit."""

    _mode = True

    def __new__(cls, orig_func=None):
        self = super().__new__(cls)
        if orig_func is None:
            return self
        if not callable(orig_func):
            raise TypeError(f"{cls.__name__}() takes no arguments (got {orig_func!r})")
        return self(orig_func)   # @no_grad without parentheses

    def __enter__(self):
        self._prev = _enter(self._mode)
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


class inference_mode(_Mode):
    """``torch.inference_mode``: grad mode off (as ``no_grad``; tapegrad has no separate
    inference tensors).  ``with tg.inference_mode():``, ``@tg.inference_mode`` or
    ``@tg.inference_mode()``; ``inference_mode(False)`` leaves grad mode as it is."""

    def __new__(cls, mode=True):
        self = object.__new__(cls)
        if callable(mode) and not isinstance(mode, bool):   # @inference_mode
            self._enabled = True
            return self(mode)
        return self

    def __init__(self, mode=True):
        self._enabled = bool(mode)

    def __enter__(self):
        self._prev = _enter(False) if self._enabled else None
        return None

    def __exit__(self, *exc):
        if self._prev is not None:
            _set(self._prev)
        return False

    def __call__(self, fn):
        enabled = self._enabled

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with inference_mode(enabled):
                return fn(*args, **kwargs)
        return wrapper


def grad_mode(enabled: bool):
    """A context manager that sets grad mode when the ``with`` starts (``set_grad_enabled``
    sets it when called, as PyTorch's, so a Ctrl-C between the call and the ``with`` would
    leave the mode changed): what tapegrad's own code uses."""
    return enable_grad() if enabled else no_grad()


def is_inference_mode_enabled() -> bool:
    """False: tapegrad has no inference tensors (``inference_mode`` is ``no_grad``)."""
    return False


class set_grad_enabled(_Mode):
    """Set grad mode now; as a context manager or decorator, restore it afterwards."""

    def __new__(cls, mode):
        return object.__new__(cls)

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, (bool, int)):
            raise TypeError(f"set_grad_enabled(): argument 'enabled' (position 1) must be bool, "
                            f"not {type(mode).__name__}")
        self._mode = bool(mode)
        self._prev = _enter(self._mode)

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
