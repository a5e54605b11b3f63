"""Ops over tensors: the array-op table, PyTorch-shaped functions, factories.

Importing this layer gives ``Tensor`` its array-op methods (``x.sum()``, ``x[i]``, ``@``).
"""
from __future__ import annotations

from ..core.tensor import Tensor, extend
from . import array_ops, factories, fill_ops, inplace_views, nn_array_ops, nn_ops, torch_api

extend(Tensor, torch_api.METHODS)
extend(Tensor, {"_inplace_view": inplace_views.inplace_view})
extend(Tensor, fill_ops.TENSOR_METHODS)
