"""tapegrad: PyTorch's autograd API on a flat Wengert tape with a Numba reverse sweep.

    import tapegrad as tg
    a = tg.tensor(2.0, requires_grad=True)
    y = (a * a).sin()
    y.backward()
    a.grad                      # tensor(-2.6146)

The package is layered; each layer imports only from the ones before it:
``core`` (op table, tape, tensors, kernels) -> ``ops`` (array ops, PyTorch-shaped
functions) -> ``autograd`` (the reverse walk, Function, functional API) -> ``replay``
(replay in Numba) -> ``nn``, ``optim``, ``viz``.
"""
from __future__ import annotations

import sys as _sys

from . import autograd, core, nn, ops, optim, viz
from .autograd import Function
from .autograd.anomaly_mode import is_anomaly_check_nan_enabled, is_anomaly_enabled
from .replay import CompiledTape, RetraceRequired, compile  # noqa: A004
from . import utils
from .utils.serialization import load, save   # tensors and state dicts; compiled tapes too
from . import jit  # the module is the decorator: @tg.jit, tg.jit.sigmoid, ...
from . import func  # tg.func.vmap, grad, jacrev, ... (torch.func)
from . import distributions  # tg.distributions.Normal, Categorical, kl_divergence, ...
from .jit import JitFunction
from .core import optable as _optable
from .core.elementwise import FUNCTIONS as _ELEMENTWISE
from .core.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                              is_inference_mode_enabled, no_grad, set_grad_enabled)
from .core.tape import Tape, current_tape
from .core.printing import get_printoptions, set_printoptions
from .core.dtypes import (Size, bool_, device, dtype, float16, float32, float64,
                          get_default_device, get_default_dtype, int8, int16, int32, int64,
                          set_default_device, set_default_dtype, uint8)
from .core.dtypes import ALIASES as _DTYPE_ALIASES, FORMATS as _FORMATS, finfo, iinfo
from .core.tensor import Tensor
from .ops.factories import (arange, as_tensor, full, linspace, manual_seed, ones, ones_like, rand,
                            randn, tensor, zeros, zeros_like)
from .ops.factories import FUNCTIONS as _FACTORIES
from .ops.torch_api import FUNCTIONS as _ARRAY_FUNCTIONS
from .ops.namespaces import DETERMINISM as _DETERMINISM, NAMESPACES as _NAMESPACES
from .ops.namespaces import SUBMODULES as _SUBMODULES

globals().update(_DTYPE_ALIASES)   # tg.float (float32), tg.double, tg.long, tg.int, tg.bool...
globals().update(_FORMATS)         # tg.contiguous_format, tg.strided, ...
globals().update(_FACTORIES)       # tg.eye, tg.empty, tg.randint, tg.LongTensor, ...
globals().update(_NAMESPACES)      # tg.cuda, tg.special, tg.linalg, tg.testing, tg.backends
_sys.modules.update({m.__name__: m for m in [*_NAMESPACES.values(), *_SUBMODULES]})
globals().update(_DETERMINISM)     # tg.use_deterministic_algorithms (accepted)

# tg.add, tg.sin, ... (the op table's rows; PyTorch's fused backward ops stay internal)
globals().update({op.name: _ELEMENTWISE[op.name] for op in _optable.OPS
                  if not (op.backward_of or op.internal)})
globals().update(_ARRAY_FUNCTIONS)   # tg.sum, tg.matmul, tg.cat, ...
globals().update(nn.functional.TORCH_NAMES)   # tg.conv2d, tg.dropout, tg.layer_norm, ...
negative = _ELEMENTWISE["neg"]   # (divide, multiply, subtract: in _ARRAY_FUNCTIONS, with out=)
clip = _ARRAY_FUNCTIONS["clamp"]   # (torch.clip is clamp: its overloads, a max absent)

__version__ = "0.1.0"
__all__ = ["Tensor", "Tape", "tensor", "zeros", "ones", "full", "arange", "linspace", "rand",
           "randn", "manual_seed", "zeros_like", "ones_like", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled", "autograd", "Function", "float32", "float64",
           "Size", "dtype", "current_tape", "nn", "optim", "viz", "CompiledTape",
           "RetraceRequired", "compile", "load", "save", "utils", "jit", "JitFunction", "func"] + [op.name for op in _optable.OPS
                                                   if not (op.backward_of or op.internal)]
