"""Tensor creation: ``tensor``, ``zeros``, ``ones``, ``full``, ``arange``, ``linspace``,
``rand``, ``randn``, ``manual_seed``, ``zeros_like``, ``ones_like``."""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np

from ..core.dtypes import dtype as _dtype, float64
from ..core.tensor import Tensor, check_float, wrap

DType = Optional[Union[_dtype, np.dtype, type, str]]
Number = Union[int, float, bool]

_rng = np.random.default_rng()


def _np_dtype(dtype, default=None):
    if dtype is None:
        return default
    if isinstance(dtype, _dtype):
        return dtype.np
    return np.dtype(dtype)


def _make(v, requires_grad):
    if requires_grad:
        check_float(v if isinstance(v, np.ndarray) else np.asarray(v))
    return wrap(v, requires_grad)


def tensor(data: Any, dtype: DType = None, requires_grad: bool = False) -> Tensor:
    """A new tensor from a number, a (nested) list or a NumPy array.

    Python floats give float64; a float32 array stays float32; ints give int64."""
    if data.__class__ is float and dtype is None:  # the scalar fast path
        return wrap(data, requires_grad)
    if isinstance(data, Tensor):
        data = data._value
    try:
        a = np.array(data, dtype=_np_dtype(dtype))
    except (ValueError, TypeError):
        _check_data(data)
        raise
    if a.dtype.kind in "OUSV":
        _check_data(data)
    if dtype is None and a.dtype.kind == "i":
        a = a.astype(np.int64)
    elif dtype is None and a.dtype.kind == "f" and not isinstance(data, np.ndarray) \
            and not isinstance(data, np.floating):
        a = a.astype(np.float64)
    return _make(a, requires_grad)


def _check_data(data, dim=0):
    """Raise PyTorch's error for data that is not a (nested) sequence of numbers of one
    shape; returns the shape of good data."""
    if isinstance(data, (bool, int, float, complex, np.number, np.bool_)):
        return ()
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OUSV":
        return data.shape
    if isinstance(data, str):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    if not isinstance(data, (list, tuple)):
        raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")
    shapes = [_check_data(d, dim + 1) for d in data]
    for s in shapes[1:]:
        if len(s) != len(shapes[0]):
            raise ValueError(f"expected sequence of length {len(shapes[0])} at dim {dim + 1} "
                             f"(got {len(s)})" if not s or not shapes[0] else
                             "setting an array element with a sequence")
        if s != shapes[0]:
            k = next(i for i, (m, n) in enumerate(zip(shapes[0], s)) if m != n)
            raise ValueError(f"expected sequence of length {shapes[0][k]} at dim {dim + 1 + k} "
                             f"(got {s[k]})")
    return (len(data),) + (shapes[0] if shapes else ())


def as_tensor(data: Any, dtype: DType = None) -> Tensor:
    """Like ``tensor`` (no copy for a matching NumPy array)."""
    if isinstance(data, Tensor):
        return data
    return wrap(np.asarray(data, dtype=_np_dtype(dtype)))


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def zeros(*size: Union[int, Sequence[int]], dtype: DType = None, requires_grad: bool = False) -> Tensor:
    """A tensor of zeros of the given shape (float64 unless ``dtype``)."""
    return _make(np.zeros(_size(size), _np_dtype(dtype, np.float64)), requires_grad)


def ones(*size: Union[int, Sequence[int]], dtype: DType = None, requires_grad: bool = False) -> Tensor:
    """A tensor of ones of the given shape."""
    return _make(np.ones(_size(size), _np_dtype(dtype, np.float64)), requires_grad)


def full(size: Union[int, Sequence[int]], fill_value: Number, dtype: DType = None,
         requires_grad: bool = False) -> Tensor:
    """A tensor of the given shape filled with ``fill_value``."""
    dt = _np_dtype(dtype, np.float64 if isinstance(fill_value, float) else None)
    return _make(np.full(_size((size,)), fill_value, dt), requires_grad)


def arange(start: Number, end: Optional[Number] = None, step: Number = 1, dtype: DType = None,
           requires_grad: bool = False) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step``."""
    if end is None:
        start, end = 0, start
    a = np.arange(start, end, step, dtype=_np_dtype(dtype))
    if dtype is None and a.dtype.kind == "i":
        a = a.astype(np.int64)
    return _make(a, requires_grad)


def linspace(start: Number, end: Number, steps: int, dtype: DType = None,
             requires_grad: bool = False) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    return _make(np.linspace(start, end, steps, dtype=_np_dtype(dtype, np.float64)), requires_grad)


def rand(*size: Union[int, Sequence[int]], dtype: DType = None, requires_grad: bool = False) -> Tensor:
    """Uniform random values in [0, 1) (seeded by ``manual_seed``)."""
    return _make(_rng.random(_size(size)).astype(_np_dtype(dtype, np.float64)), requires_grad)


def randn(*size: Union[int, Sequence[int]], dtype: DType = None, requires_grad: bool = False) -> Tensor:
    """Standard normal random values (seeded by ``manual_seed``)."""
    return _make(_rng.standard_normal(_size(size)).astype(_np_dtype(dtype, np.float64)),
                 requires_grad)


def manual_seed(seed: int) -> np.random.Generator:
    """Seed tapegrad's random generator (``rand``, ``randn``)."""
    global _rng
    _rng = np.random.default_rng(seed)
    return _rng


def zeros_like(t: Tensor, dtype: DType = None, requires_grad: bool = False) -> Tensor:
    """Zeros with the shape (and dtype) of ``t``."""
    return zeros(*t.shape, dtype=dtype or (t.dtype if t.dtype is not float64 else None),
                 requires_grad=requires_grad)


def ones_like(t: Tensor, dtype: DType = None, requires_grad: bool = False) -> Tensor:
    """Ones with the shape (and dtype) of ``t``."""
    return ones(*t.shape, dtype=dtype or (t.dtype if t.dtype is not float64 else None),
                requires_grad=requires_grad)
