"""``tapegrad.autograd``: ``backward``, ``grad`` and custom ``Function`` (PyTorch's API)."""
from __future__ import annotations

import gc
from typing import Optional, Sequence, Tuple, Union

from ..engine import accumulate, run_backward
from ..tensor import Tensor, _wrap
from .function import Function, FunctionCtx

__all__ = ["backward", "grad", "Function", "FunctionCtx"]


def _as_list(x):
    if x is None:
        return None
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _check_create_graph(create_graph):
    if create_graph:
        raise NotImplementedError(
            "create_graph=True (differentiating a gradient) is not supported by this version "
            "of tapegrad; it needs the backward pass recorded onto the tape.")


Tensors = Union[Tensor, Sequence[Tensor]]


def backward(tensors: Tensors, grad_tensors: Optional[Union[Tensor, Sequence]] = None,
             retain_graph: Optional[bool] = None, create_graph: bool = False,
             inputs: Optional[Tensors] = None) -> None:
    """Compute the sum of gradients of ``tensors`` and accumulate them into the leaves' ``.grad``.

    ``grad_tensors`` gives the vector of the vector-Jacobian product for non-scalar outputs.
    Without ``retain_graph=True`` the graph is freed: a second backward through it raises.
    """
    _check_create_graph(create_graph)
    tensors = _as_list(tensors)
    grads = _as_list(grad_tensors) or [None] * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"grad_tensors should have the same length as tensors: got "
                           f"{len(grads)} and {len(tensors)}")
    # Creating a .grad tensor per leaf would trigger the cyclic garbage collector again and
    # again on large graphs (2x the backward time at 100k leaves); nothing here makes cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        acc, _ = run_backward(tensors, grads, bool(retain_graph))
        accumulate(acc, None if inputs is None else {id(t) for t in _as_list(inputs)})
    finally:
        if was_enabled:
            gc.enable()


def grad(outputs: Tensors, inputs: Tensors, grad_outputs: Optional[Union[Tensor, Sequence]] = None,
         retain_graph: Optional[bool] = None, create_graph: bool = False,
         allow_unused: Optional[bool] = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> Tuple[Optional[Tensor], ...]:
    """Gradients of ``outputs`` with respect to ``inputs``, returned as a tuple; ``.grad``
    is left alone.  Inputs not reached raise unless ``allow_unused=True`` (then None)."""
    _check_create_graph(create_graph)
    outputs = _as_list(outputs)
    single = isinstance(inputs, Tensor)
    inputs = _as_list(inputs)
    for x in inputs:
        if not isinstance(x, Tensor):
            raise TypeError(f"grad(): inputs must be Tensors, got {type(x).__name__}")
        if not x.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    grads = _as_list(grad_outputs) or [None] * len(outputs)
    _, captured = run_backward(outputs, grads, bool(retain_graph), inputs=inputs)
    out = []
    for x, g in zip(inputs, captured):
        if g is None:
            if not (allow_unused or materialize_grads):
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior.")
            if materialize_grads:
                import numpy as np
                g = 0.0 if x.ndim == 0 else np.zeros(x.shape)
            else:
                out.append(None)
                continue
        from ..engine import _grad_value
        out.append(_wrap(_grad_value(x, g)))
    return tuple(out)
