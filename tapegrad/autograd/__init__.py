"""``tapegrad.autograd``: ``backward``, ``grad``, custom ``Function``, the functional API
and ``gradcheck`` (PyTorch's API), on the reverse walk of ``engine``."""
from __future__ import annotations

from . import functional
from .function import Function, FunctionCtx
from .gradcheck import GradcheckError, gradcheck
from .gradients import backward, grad

__all__ = ["backward", "grad", "Function", "FunctionCtx", "functional", "gradcheck",
           "GradcheckError"]
