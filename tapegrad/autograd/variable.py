"""``tg.autograd.Variable``: PyTorch's deprecated ``Variable``, which returns a Tensor."""
from __future__ import annotations

import numpy as np

from ..core.tensor import Tensor, wrap
from .graph import queue_callback


class _VariableMeta(type):
    def __instancecheck__(cls, other):
        return isinstance(other, Tensor)


class _ExecutionEngine:
    """``Variable._execution_engine``: ``queue_callback(fn)`` runs ``fn()`` once when the
    current backward has finished."""

    @staticmethod
    def queue_callback(fn):
        queue_callback(fn)


class Variable(metaclass=_VariableMeta):
    """``Variable(t, requires_grad=False)``: a new leaf tensor sharing ``t``'s value (every
    tensor is an instance of ``Variable``, as in PyTorch)."""

    _execution_engine = _ExecutionEngine()

    def __new__(cls, data=None, requires_grad=False, volatile=False):
        if data is None:
            return wrap(np.zeros(0))
        if not isinstance(data, Tensor):
            raise TypeError("Variable data has to be a tensor, but got "
                            f"{type(data).__name__}")
        if requires_grad and not data.dtype.is_floating_point:
            raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                               "gradients")
        return wrap(data._value, requires_grad=bool(requires_grad))
