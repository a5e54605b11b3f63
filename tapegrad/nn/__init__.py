"""``tapegrad.nn``: modules, parameters, losses and initialisers (PyTorch's ``torch.nn``).

    import tapegrad as tg
    import tapegrad.nn as nn
    import tapegrad.nn.functional as F

    model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    loss = F.cross_entropy(model(x), y)
    loss.backward()

``nn.Parameter(t)`` returns a plain leaf tensor that requires grad; a ``Module`` registers any
such tensor assigned as an attribute (see ``tapegrad/nn/modules.py``).
"""
from __future__ import annotations

from . import functional, init
from .modules import (ELU, GELU, BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, Dropout, Identity,
                      L1Loss, LeakyReLU, Linear, LogSoftmax, Module, ModuleList, MSELoss, NLLLoss,
                      Parameter, ParameterList, ReLU, Sequential, Sigmoid, SiLU, SmoothL1Loss,
                      Softmax, Softplus, Tanh)

__all__ = ["functional", "init", "Module", "Parameter", "Sequential", "ModuleList",
           "ParameterList", "Identity", "Linear", "ReLU", "LeakyReLU", "Tanh", "Sigmoid",
           "Softmax", "LogSoftmax", "Dropout", "MSELoss", "L1Loss", "CrossEntropyLoss", "NLLLoss",
           "BCELoss", "BCEWithLogitsLoss", "Softplus", "GELU", "SiLU", "ELU", "SmoothL1Loss"]
