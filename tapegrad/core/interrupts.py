"""Ctrl-C never leaves a tape half-written.

Recording an entry appends to four lists, and moving the lists into arrays (``_flush``)
writes four arrays and clears four lists: a ``KeyboardInterrupt`` between two of those
steps would leave them with different lengths, and every later op on that tape would fail
or, worse, read misaligned entries.  So tapegrad handles SIGINT itself (while Python's
default handler is installed, in the main thread): when the signal arrives inside one of
the functions that write a tape (``protect``), the ``KeyboardInterrupt`` is raised when
that function returns -- a few microseconds later, with the entry or the flush complete.
Anywhere else, Python's default handler raises it at once.  The recording fast paths pay
nothing: the check runs only when a signal arrives.
"""
from __future__ import annotations

import signal
import sys
import threading

_CRITICAL = set()   # code objects of the functions that write a tape


def protect(*functions):
    """Mark ``functions`` as writing a tape: an interrupt inside one is delivered when it
    returns."""
    for fn in functions:
        _CRITICAL.add(fn.__code__)


def _raise_on_return(frame):
    """Raise ``KeyboardInterrupt`` in ``frame``'s caller once ``frame`` returns."""
    user_trace = sys.gettrace()

    def trace(fr, event, arg):
        if fr is frame and event in ("return", "exception"):
            if event == "return":
                fr.f_trace = None
                sys.settrace(user_trace)
                raise KeyboardInterrupt
        return trace if fr is frame else None

    frame.f_trace_lines = False
    frame.f_trace = trace
    if user_trace is None:
        sys.settrace(lambda fr, event, arg: None)   # tracing on, so the frame's hook runs


def _on_sigint(signum, frame):
    f = frame
    while f is not None:
        if f.f_code in _CRITICAL:
            _raise_on_return(f)
            return
        f = f.f_back
    signal.default_int_handler(signum, frame)


def install():
    """Handle SIGINT as above, where Python's default handler is in place (so a program
    that set its own handler keeps it)."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            signal.signal(signal.SIGINT, _on_sigint)
    except (ValueError, OSError):   # no signals here (an embedded interpreter)
        pass
