"""Tensor element types (``tg.float64``, ``tg.int64``, ``tg.bool``...) and ``tg.Size``."""
from __future__ import annotations

import numpy as np


class dtype:
    """A tensor element type (``tg.float64``, ``tg.float32``, ``tg.int64``, ``tg.bool``)."""

    __slots__ = ("name", "np", "is_floating_point")

    def __init__(self, name, np_dtype):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = self.np.kind == "f"

    def __repr__(self):
        return f"tapegrad.{self.name}"


float16 = dtype("float16", np.float16)
float32 = dtype("float32", np.float32)
float64 = dtype("float64", np.float64)
int8 = dtype("int8", np.int8)
int16 = dtype("int16", np.int16)
int32 = dtype("int32", np.int32)
int64 = dtype("int64", np.int64)
uint8 = dtype("uint8", np.uint8)
bool_ = dtype("bool", np.bool_)
_DTYPES = {d.np: d for d in (float16, float32, float64, int8, int16, int32, int64, uint8, bool_)}


def dtype_of(v):
    """The dtype of a tensor value (a Python float is float64)."""
    if v.__class__ is float:
        return float64
    return _DTYPES[v.dtype]


class Size(tuple):
    """The shape of a tensor: a tuple that prints as ``tapegrad.Size([2, 3])``."""

    def __repr__(self):
        return f"tapegrad.Size({list(self)})"

    def numel(self):
        """The number of elements."""
        return int(np.prod(self, dtype=np.int64))
