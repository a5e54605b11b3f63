"""``tapegrad.autograd``: ``backward``, ``grad``, custom ``Function``, the functional API,
``gradcheck``/``gradgradcheck``, ``tg.autograd.graph`` (nodes, hooks, saved tensors) and
forward mode (``forward_ad``), as PyTorch's ``torch.autograd``, on the reverse walk of
``engine``."""
from __future__ import annotations

from . import forward_ad, functional, graph
from ..core.grad_mode import enable_grad, inference_mode, no_grad, set_grad_enabled
from .anomaly_mode import (detect_anomaly, is_anomaly_check_nan_enabled, is_anomaly_enabled,
                           set_detect_anomaly)
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .gradients import backward, grad
from .variable import Variable

__all__ = ["backward", "grad", "Function", "FunctionCtx", "functional", "gradcheck",
           "gradgradcheck", "GradcheckError", "graph", "forward_ad", "once_differentiable",
           "Variable", "no_grad", "enable_grad", "set_grad_enabled", "inference_mode",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled",
           "is_anomaly_check_nan_enabled"]
