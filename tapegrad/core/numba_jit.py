"""``jit``: Numba's ``njit`` with the settings every tapegrad kernel uses.

``cache=True`` makes a warm start cheap (~10 ms a kernel instead of seconds of
compilation), but Numba raises at decoration time when no cache directory is
writable (a read-only install with no usable ``NUMBA_CACHE_DIR``).  Then we compile
without a cache rather than fail to import.
"""
from __future__ import annotations

import numba

_OPTIONS = dict(nogil=True, error_model="numpy")  # IEEE results (1/0 = inf), as PyTorch


def jit(fn=None, **options):
    """Decorate ``fn`` as an ``@njit(cache=True, nogil=True)`` kernel (cache if possible)."""
    def wrap(f):
        opts = {**_OPTIONS, **options}
        try:
            return numba.njit(cache=True, **opts)(f)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return numba.njit(cache=False, **opts)(f)

    return wrap(fn) if fn is not None else wrap
