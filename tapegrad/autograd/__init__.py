"""``tapegrad.autograd``: ``backward``, ``grad``, custom ``Function``, the functional API,
``gradcheck``/``gradgradcheck``, ``tg.autograd.graph`` (nodes, hooks, saved tensors) and
forward mode (``forward_ad``), as PyTorch's ``torch.autograd``, on the reverse walk of
``engine``."""
from __future__ import annotations

from . import forward_ad, functional, graph
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .gradients import backward, grad
from .variable import Variable

__all__ = ["backward", "grad", "Function", "FunctionCtx", "functional", "gradcheck",
           "gradgradcheck", "GradcheckError", "graph", "forward_ad", "once_differentiable",
           "Variable"]
