"""tapegrad: PyTorch's autograd API on a flat Wengert tape with a Numba reverse sweep.

    import tapegrad as tg
    a = tg.tensor(2.0, requires_grad=True)
    y = (a * a).sin()
    y.backward()
    a.grad                      # tensor(-2.6146)
"""
from __future__ import annotations

from . import _methods, _table
from . import tensor as _tensor_mod
from .factories import (arange, as_tensor, full, linspace, manual_seed, ones, ones_like, rand,
                        randn, tensor, zeros, zeros_like)
from . import api as _api
from .grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .tape import Tape, current_tape
from .replay import CompiledTape, RetraceRequired, compile, load  # noqa: A004
from .tensor import (Size, Tensor, bool_, dtype, float16, float32, float64, int8, int16, int32,
                     int64, uint8)
from . import autograd  # noqa: E402
from .autograd import Function  # noqa: F401
from . import viz  # noqa: E402

bool = bool_  # noqa: A001  (tg.bool, as torch.bool)
double, long = float64, int64

_tensor_mod._SF = _methods.SCALAR_FORWARD
_tensor_mod._VF = _methods.ARRAY_FORWARD


def _attach():
    """Tensor methods and ``tg.<op>`` functions, derived from the op table."""
    g = globals()
    for op in _table.OPS:
        fn = _methods.FUNCTIONS[op.name]
        g[op.name] = fn
        if op.method:
            setattr(Tensor, op.name, fn)
        if op.dunder:
            setattr(Tensor, f"__{op.dunder}__", fn)
            if op.name in _methods.REFLECTED:
                setattr(Tensor, f"__r{op.dunder}__", _methods.REFLECTED[op.name])
    # PyTorch's aliases
    Tensor.__radd__ = _methods.REFLECTED["add"]
    Tensor.true_divide = Tensor.divide = Tensor.div
    Tensor.multiply, Tensor.subtract = Tensor.mul, Tensor.sub
    Tensor.clip = Tensor.clamp
    for name, fn in _api.METHODS.items():
        setattr(Tensor, name, fn)
    g.update(_api.FUNCTIONS)
    g["divide"] = g["true_divide"] = g["div"]
    g["multiply"], g["subtract"], g["negative"] = g["mul"], g["sub"], g["neg"]
    g["clip"] = g["clamp"]


_attach()
del _attach

from . import nn, optim  # noqa: E402  (tg.nn, tg.optim: built on the API above)

__version__ = "0.1.0"
__all__ = ["Tensor", "Tape", "tensor", "zeros", "ones", "full", "arange", "linspace", "rand",
           "randn", "manual_seed", "zeros_like", "ones_like", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled", "autograd", "Function", "float32", "float64",
           "Size", "dtype", "current_tape", "nn", "optim", "viz", "CompiledTape",
           "RetraceRequired", "compile", "load"] + [op.name for op in _table.OPS]
