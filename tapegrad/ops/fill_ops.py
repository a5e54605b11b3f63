"""Array-op rows of the in-place ops that overwrite a tensor's values -- ``zero_``,
``fill_``, ``copy_`` -- and those ``Tensor`` methods.

In PyTorch an overwritten tensor that required grad still does, through a node whose
gradient to the old value is zero (``ZeroBackward0``, ``FillBackward2``/``3``,
``CopyBackwards``): a backward through it must not reach what it held before.
"""
from __future__ import annotations

import numpy as np

from ..core.tensor import Tensor, wrap
from .array_ops import call, defop


def _zeros_like(x):
    return wrap(np.zeros(x.shape))


@defop("zero", "ZeroBackward0", method=False, saves=False)
def zero(x):
    return np.zeros_like(x)


zero.defvjp(lambda g, ans, x: (_zeros_like(x),))      # d zeros / dx = 0


@defop("fill", "FillBackward2", method=False, saves=False)
def fill(x, value):
    return np.full_like(x, value)


fill.defvjp(lambda g, ans, x, value: (_zeros_like(x), None))


@defop("fill_with", "FillBackward3", method=False, saves=False)
def fill_with(x, value):
    return np.full_like(x, np.asarray(value).reshape(()))


# every element is the 0-d value: its gradient sums the result's
fill_with.defvjp(lambda g, ans, x, value: (_zeros_like(x), lambda: call("sum", g)))


@defop("copy", "CopyBackwards", method=False, saves=False)
def copy(x, src):
    return np.array(np.broadcast_to(src, np.shape(x)), dtype=np.result_type(x, src))


copy.defvjp(lambda g, ans, x, src: (_zeros_like(x), g))   # src broadcast: summed back by the caller


def fill_(self, value):
    """Fill with ``value`` in place (a number, or a 0-d tensor)."""
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError("fill_ only supports 0-dimension value tensor but got tensor "
                               f"with {value.ndim} dimensions.")
        return self._inplace(lambda s: call("fill_with", s, value))
    return self._inplace(lambda s: call("fill", s, value))


def zero_(self):
    """Fill with zeros in place (e.g. ``x.grad.zero_()``)."""
    return self._inplace(lambda s: call("zero", s))


def copy_(self, src):
    """Copy ``src``'s values into this tensor, in place (broadcasting ``src``)."""
    return self._inplace(lambda s: call("copy", s, src))


TENSOR_METHODS = {"fill_": fill_, "zero_": zero_, "copy_": copy_}
