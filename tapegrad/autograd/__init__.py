"""``tapegrad.autograd``: ``backward``, ``grad`` and custom ``Function`` (PyTorch's API)."""
from __future__ import annotations

import gc
from typing import Optional, Sequence, Tuple, Union

from ..engine import accumulate, run_backward
from ..tensor import Tensor, _wrap
from .function import Function, FunctionCtx

__all__ = ["backward", "grad", "Function", "FunctionCtx", "functional", "gradcheck",
           "GradcheckError"]


def _as_list(x):
    if x is None:
        return None
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _graph_seeds(tensors, grads):
    """Seeds for a recorded backward: given tensors stay tensors (they may require grad)."""
    from ..engine import _seed_value
    out = []
    for k, (t, g) in enumerate(zip(tensors, grads)):
        if not isinstance(t, Tensor):
            raise TypeError(f"backward(): expected a Tensor, got {type(t).__name__}")
        if t._t is None:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not "
                               "have a grad_fn")
        v = _seed_value(k, t, g)
        out.append(g if isinstance(g, Tensor) else (v if v.__class__ is float else _wrap(v)))
    return out


def _as_grad(g):
    return g if isinstance(g, Tensor) else _wrap(g)


Tensors = Union[Tensor, Sequence[Tensor]]


def backward(tensors: Tensors, grad_tensors: Optional[Union[Tensor, Sequence]] = None,
             retain_graph: Optional[bool] = None, create_graph: bool = False,
             inputs: Optional[Tensors] = None) -> None:
    """Compute the sum of gradients of ``tensors`` and accumulate them into the leaves' ``.grad``.

    ``grad_tensors`` gives the vector of the vector-Jacobian product for non-scalar outputs.
    Without ``retain_graph=True`` the graph is freed: a second backward through it raises.
    """
    tensors = _as_list(tensors)
    grads = _as_list(grad_tensors) or [None] * len(tensors)
    if len(grads) != len(tensors):
        raise RuntimeError(f"grad_tensors should have the same length as tensors: got "
                           f"{len(grads)} and {len(tensors)}")
    if create_graph:   # record the backward pass: .grad gets a grad_fn of its own
        from ..higher import run_backward_graph
        keep = None if inputs is None else {id(t) for t in _as_list(inputs)}
        for leaf, g in run_backward_graph(tensors, _graph_seeds(tensors, grads))[0]:
            if keep is not None and id(leaf) not in keep:
                continue
            cur = leaf._grad
            leaf._grad = _as_grad(g) if cur is None else cur + g
        return
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


def _unused(allowed):
    if not allowed:
        raise RuntimeError(
            "One of the differentiated Tensors appears to not have been used in the graph. "
            "Set allow_unused=True if this is the desired behavior.")
    return None


def grad(outputs: Tensors, inputs: Tensors, grad_outputs: Optional[Union[Tensor, Sequence]] = None,
         retain_graph: Optional[bool] = None, create_graph: bool = False,
         allow_unused: Optional[bool] = None, is_grads_batched: bool = False,
         materialize_grads: bool = False) -> Tuple[Optional[Tensor], ...]:
    """Gradients of ``outputs`` with respect to ``inputs``, returned as a tuple; ``.grad``
    is left alone.  Inputs not reached raise unless ``allow_unused=True`` (then None)."""
    outputs = _as_list(outputs)
    single = isinstance(inputs, Tensor)
    inputs = _as_list(inputs)
    for x in inputs:
        if not isinstance(x, Tensor):
            raise TypeError(f"grad(): inputs must be Tensors, got {type(x).__name__}")
        if not x.requires_grad:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
    grads = _as_list(grad_outputs) or [None] * len(outputs)
    if create_graph:
        from ..higher import run_backward_graph
        leaf_grads, captured = run_backward_graph(outputs, _graph_seeds(outputs, grads), inputs)
        for pos, x in enumerate(inputs):
            for leaf, g in leaf_grads:
                if leaf is x:
                    captured[pos] = g if captured[pos] is None else captured[pos] + g
        return tuple(_as_grad(g) if g is not None else _unused(allow_unused or materialize_grads)
                     for g in captured)
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


from . import functional  # noqa: E402
from .gradcheck import GradcheckError, gradcheck  # noqa: E402
