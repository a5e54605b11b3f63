"""``tg.save`` / ``tg.load``: tensors, arrays, numbers, strings and lists, tuples and dicts
of them (state dicts of modules, optimizers and schedulers) in a NumPy ``.npz`` archive --
the arrays as ``.npy`` members and the structure as JSON, never a pickle, so loading a file
runs no code from it (``weights_only`` is accepted; it is always so).

``tg.load`` also reads a compiled tape written by ``CompiledTape.save``: a file whose
archive has no ``__tapegrad_save__`` member goes to ``replay.load``, unchanged.
"""
from __future__ import annotations

import json
import os
import stat
import zipfile
from collections import Counter, OrderedDict

import numpy as np

from ..core.tensor import Tensor, wrap
from ..replay import load as load_compiled_tape

__all__ = ["save", "load"]

MAGIC = "__tapegrad_save__"
FORMAT = "tapegrad-save"


def _encode(obj, arrays):
    """The JSON description of ``obj``; its arrays go into ``arrays`` as ``a<k>``."""
    def array(v):
        key = f"a{len(arrays)}"
        v = np.asarray(v)
        if v.dtype.kind in "OV":
            raise TypeError(f"tg.save: cannot save an array of dtype {v.dtype}")
        arrays[key] = v
        return key

    if isinstance(obj, Tensor):
        return {"t": "tensor", "k": array(obj._value), "grad": bool(obj.requires_grad)}
    if isinstance(obj, np.ndarray):
        return {"t": "ndarray", "k": array(obj)}
    if isinstance(obj, np.generic):
        return {"t": "npscalar", "k": array(obj)}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return {"t": "py", "v": obj}
    if isinstance(obj, (list, tuple)):
        kind = "list" if isinstance(obj, list) else "tuple"
        return {"t": kind, "v": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, dict):
        kind = ("ordered" if isinstance(obj, OrderedDict) else
                "counter" if isinstance(obj, Counter) else "dict")
        return {"t": kind, "v": [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()]}
    hint = ""
    if hasattr(obj, "state_dict") and callable(obj.state_dict):   # a Module or an optimizer
        hint = (f"; save its state_dict() and load that into a new {type(obj).__name__} "
                "(tg.save keeps no code, so a whole object cannot be rebuilt from the file)")
    raise TypeError(f"tg.save: cannot save an object of type {type(obj).__name__} (tensors, "
                    "NumPy arrays, numbers, strings, None, and lists, tuples and dicts of them)"
                    + hint)


def _decode(node, arrays):
    if not isinstance(node, dict) or "t" not in node:
        raise ValueError("tg.load: a damaged file (bad structure record)")
    kind = node["t"]
    if kind in ("tensor", "ndarray", "npscalar"):
        key = node.get("k")
        if key not in arrays:
            raise ValueError(f"tg.load: a damaged file (no array {key!r})")
        v = arrays[key]
        if kind == "ndarray":
            return v
        if kind == "npscalar":
            return v[()]
        t = wrap(float(v) if v.ndim == 0 and v.dtype == np.float64 else v)
        return t.requires_grad_(True) if node.get("grad") and v.dtype.kind in "fc" else t
    if kind == "py":
        v = node.get("v")
        if v is not None and not isinstance(v, (bool, int, float, str)):
            raise ValueError("tg.load: a damaged file (bad value record)")
        return v
    items = node.get("v")
    if not isinstance(items, list):
        raise ValueError("tg.load: a damaged file (bad container record)")
    if kind == "list":
        return [_decode(v, arrays) for v in items]
    if kind == "tuple":
        return tuple(_decode(v, arrays) for v in items)
    if kind in ("dict", "ordered", "counter"):
        if not all(isinstance(p, list) and len(p) == 2 for p in items):
            raise ValueError("tg.load: a damaged file (bad dict record)")
        pairs = [(_decode(k, arrays), _decode(v, arrays)) for k, v in items]
        try:
            out = {"dict": dict, "ordered": OrderedDict, "counter": Counter}[kind]()
            out.update(dict(pairs) if kind == "counter" else pairs)
            return out
        except TypeError:
            raise ValueError("tg.load: a damaged file (an unhashable key)") from None
    raise ValueError(f"tg.load: a damaged file (unknown record {kind!r})")


def save(obj, f, pickle_module=None, pickle_protocol=None,
         _use_new_zipfile_serialization=True, _disable_byteorder_record=False):
    """Write ``obj`` (tensors, NumPy arrays, numbers, strings, None, and lists, tuples and
    dicts of them, such as ``model.state_dict()`` or ``opt.state_dict()``) to ``f`` (a path,
    written as given, or a binary file object) as a NumPy ``.npz`` archive without pickles.
    ``tg.load(f)`` gives back the same structure."""
    arrays = {}
    meta = {"format": FORMAT, "version": 1, "obj": _encode(obj, arrays)}
    members = {MAGIC: np.array(json.dumps(meta, allow_nan=True)), **arrays}
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as fh:
            np.savez(fh, **members)
    else:
        np.savez(f, **members)


def _is_our_archive(path):
    """Is ``path`` a regular zip file holding the ``tg.save`` record?  (Anything else --
    missing, a FIFO, not a zip -- goes to the compiled-tape loader and its errors.)"""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with zipfile.ZipFile(path) as z:
            return f"{MAGIC}.npy" in z.namelist()
    except Exception:   # zipfile raises many kinds on a damaged archive; the loader names it
        return False


def _read(f):
    try:
        with np.load(f, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception as e:
        raise ValueError(f"tg.load: not a file written by tg.save (or a damaged one): "
                         f"{type(e).__name__}: {e}") from None
    if MAGIC not in data:
        raise ValueError("tg.load: not a file written by tg.save (no structure record)")
    try:
        meta = json.loads(str(data.pop(MAGIC)))
    except ValueError:
        raise ValueError("tg.load: a damaged file (its structure record is not JSON)") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ValueError("tg.load: a damaged file (bad 'format')")
    if meta.get("version") != 1:
        raise ValueError(f"tg.load: unknown version {meta.get('version')!r}")
    return _decode(meta.get("obj"), data)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None,
         **pickle_load_args):
    """Read what ``tg.save`` wrote (the same structure: tensors come back as tensors, with
    ``requires_grad`` as saved), or a compiled tape written by ``CompiledTape.save``.
    ``map_location`` and ``weights_only`` are accepted: there is only the CPU, and no code
    is ever loaded."""
    if isinstance(f, (str, os.PathLike)):
        path = os.fspath(f)
        if _is_our_archive(path):
            return _read(path)
        return load_compiled_tape(path)
    return _read(f)
