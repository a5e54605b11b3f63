"""``jit``: Numba's ``njit`` with the settings every tapegrad kernel uses, and a cache that
survives damage.

``cache=True`` makes a warm start cheap (~10 ms a kernel instead of seconds of
compilation).  Two things can go wrong with it:

- No cache directory is writable (a read-only install with no writable home and no
  ``NUMBA_CACHE_DIR``): Numba raises at decoration time.  Then we compile without a cache
  rather than fail to import.  (A read-only package directory alone is fine: Numba then
  uses the per-user cache, ``~/.cache/numba``.)
- A cache file is damaged (a truncated write, a flipped byte, a full disk).  Numba would
  raise at every later start (``EOFError``, ``UnpicklingError``) or even crash loading
  corrupted machine code.  So every cache file tapegrad writes starts with the SHA-256 of
  the rest, and is checked before Numba unpickles it; a file that fails the check (or that
  Numba cannot load for any reason) is deleted, one warning says so, and the kernel is
  compiled again and cached afresh.
"""
from __future__ import annotations

import functools
import glob
import hashlib
import io
import os
import pickle
import warnings

import numba
from numba.core import caching, dispatcher

from . import interrupts

_OPTIONS = dict(nogil=True, error_model="numpy")  # IEEE results (1/0 = inf), as PyTorch
_MAGIC = b"tapegrad-cache-1"      # then the SHA-256 of the payload, then the payload
_HEAD = len(_MAGIC) + 32


class DamagedCacheFile(Exception):
    """A cache file whose content does not match the digest it was written with."""


class UncheckedCacheFile(Exception):
    """A cache file written without a digest (by plain Numba or an older tapegrad)."""


def _with_digest(payload):
    return _MAGIC + hashlib.sha256(payload).digest() + payload


def _checked(raw, path):
    if not raw.startswith(_MAGIC):
        if _MAGIC.startswith(raw):   # ours, torn inside the header (or empty)
            raise DamagedCacheFile(path)
        raise UncheckedCacheFile(path)
    payload = raw[_HEAD:]
    if len(raw) < _HEAD or hashlib.sha256(payload).digest() != raw[len(_MAGIC):_HEAD]:
        raise DamagedCacheFile(path)
    return payload


class CheckedCacheFile(caching.IndexDataCacheFile):
    """Numba's index and data cache files, each written with a SHA-256 of its content and
    checked before it is unpickled."""

    def _save_index(self, overloads):
        payload = pickle.dumps(self._version, protocol=-1)
        payload += self._dump((self._source_stamp, overloads))
        with self._open_for_write(self._index_path) as f:
            f.write(_with_digest(payload))

    def _load_index(self):
        try:
            with open(self._index_path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return {}
        stream = io.BytesIO(_checked(raw, self._index_path))
        if pickle.load(stream) != self._version:
            return {}     # written by another Numba: recompile, as Numba itself does
        stamp, overloads = pickle.loads(stream.read())
        return overloads if stamp == self._source_stamp else {}

    def _save_data(self, name, data):
        with self._open_for_write(self._data_path(name)) as f:
            f.write(_with_digest(self._dump(data)))

    def _load_data(self, name):
        path = self._data_path(name)
        with open(path, "rb") as f:
            raw = f.read()
        return pickle.loads(_checked(raw, path))

    def discard(self):
        """Delete this function's index and data files (damaged: they are rebuilt)."""
        base = self._index_path[:-len(".nbi")]
        for path in [self._index_path] + glob.glob(glob.escape(base) + ".*.nbc"):
            try:
                os.remove(path)
            except OSError:
                pass


_warned = set()


@functools.lru_cache(maxsize=1)
def _table_stamp():
    """(mtime, size) of the op table and of the kernels generated from it."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    for name in ("optable.py", "kernels.py"):
        try:
            st = os.stat(os.path.join(here, name))
            out.append((st.st_mtime, st.st_size))
        except OSError:
            out.append(None)
    return tuple(out)


def _check_cache(dispatcher):
    """Give ``dispatcher``'s cache checked files, and make a load that fails for any reason
    discard them and compile again.  (Numba's cache classes are internal: if they change
    shape, the dispatcher keeps Numba's own cache.)"""
    try:
        cache = dispatcher._cache
        plain = cache._cache_file
        if type(plain) is not caching.IndexDataCacheFile:
            return
        checked = CheckedCacheFile.__new__(CheckedCacheFile)
        checked.__dict__.update(plain.__dict__)
        # Numba stamps a cache with its own source file only, but kernels everywhere read
        # the op table's constants (opcodes, arities) as globals frozen at compile time:
        # a changed table must recompile them all
        checked._source_stamp = (plain._source_stamp, _table_stamp())
        cache._cache_file = checked
        plain_load = cache.load_overload
    except AttributeError:
        return

    def load_overload(sig, target_context):
        try:
            return plain_load(sig, target_context)
        except UncheckedCacheFile:   # an older format: rebuild it quietly
            checked.discard()
            return None
        except Exception as e:   # noqa: BLE001  (any damage: rebuild rather than fail)
            checked.discard()
            name = getattr(dispatcher, "__name__", "kernel")
            if name not in _warned:
                _warned.add(name)
                warnings.warn(f"tapegrad: the Numba cache of {name} was damaged "
                              f"({type(e).__name__}); it was deleted and is being rebuilt",
                              RuntimeWarning, stacklevel=2)
            return None

    cache.load_overload = load_overload
    interrupts.protect(load_overload)   # Ctrl-C inside LLVM's loading would corrupt it


def jit(fn=None, **options):
    """Decorate ``fn`` as an ``@njit(cache=True, nogil=True)`` kernel (cache if possible)."""
    def wrap(f):
        opts = {**_OPTIONS, **options}
        try:
            dispatcher = numba.njit(cache=True, **opts)(f)
        except RuntimeError:  # "cannot cache function ...: no locator available"
            return numba.njit(cache=False, **opts)(f)
        _check_cache(dispatcher)
        return dispatcher

    return wrap(fn) if fn is not None else wrap


# Numba compiling a kernel (the first call of each, without a cache) runs LLVM: a Ctrl-C in
# the middle of it corrupts LLVM's state and aborts the process, so it waits for the end.
interrupts.protect(dispatcher.Dispatcher.compile)
