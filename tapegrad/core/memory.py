"""The C heap between backward passes (glibc only).

A tape keeps every array an op recorded until its backward (PyTorch keeps only what its
backward saves), and a walk keeps every adjoint to its end: one iteration of a medium-size
objective holds a few to a few tens of MB, all freed together afterwards.  glibc's malloc
then gives the free top of its heap back to the kernel (it keeps 128 KB), so the next
iteration gets fresh pages and takes a page fault for every 4 KB it writes: about 2 us each
on a VM, 846 faults (~2 ms) per GMM gradient at d = 10, n = 1000, more than its arithmetic.

``retain_heap_top`` asks malloc to keep a pad of freed memory at the top of its heap and to
serve arrays under 32 MB from the heap (glibc raises its threshold to there by itself, but
only once such an array was freed; setting the pad switches that adaptation off).  The
process keeps up to the pad of memory it no longer uses; its peak is unchanged.  PyTorch,
which frees what its backward does not need, faults far less without it.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

# glibc's mallopt parameters (malloc.h)
_M_TOP_PAD = -2
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD = 32 << 20   # glibc's own upper limit for it on 64-bit
DEFAULT_TOP_PAD = 64 << 20   # kmeans at n = 10,000, k = 100 frees ~50 MB a call
ENV = "TAPEGRAD_MALLOC_TOP_PAD"


def retain_heap_top(top_pad=None):
    """Keep ``top_pad`` bytes (default: ``$TAPEGRAD_MALLOC_TOP_PAD``, else 64 MB; 0: leave
    malloc alone) of freed memory at the top of the C heap.  Does nothing off glibc, or when
    the process set glibc's own ``MALLOC_*`` variables (the user's choice stands).  Returns
    whether malloc took the setting."""
    if top_pad is None:
        top_pad = int(os.environ.get(ENV, DEFAULT_TOP_PAD))
    if top_pad <= 0 or not sys.platform.startswith("linux"):
        return False
    if any(k.startswith("MALLOC_") and k.endswith("_") for k in os.environ):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version   # (musl has mallopt too, with other meanings)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    top_pad = min(top_pad, 1 << 30)
    return bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD) and mallopt(_M_TOP_PAD, top_pad))
