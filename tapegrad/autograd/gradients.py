"""``backward`` and ``grad`` (PyTorch's API), and the methods they give ``Tensor`` and ``Tape``."""
from __future__ import annotations

import gc
from typing import Optional, Sequence, Tuple, Union

import numpy as np

from ..core.tape import Tape
from ..core.tensor import Tensor, extend, wrap
from ..core.graph import Node
from .engine import accumulate, call_node, grad_value, hooked, run_backward
from .graph import run_callbacks



def _as_list(x):
    if x is None:
        return None
    return list(x) if isinstance(x, (list, tuple)) else [x]


Tensors = Union[Tensor, Sequence[Tensor]]


def backward(tensors: Tensors, grad_tensors: Optional[Union[Tensor, Sequence]] = None,
             retain_graph: Optional[bool] = None, create_graph: bool = False,
             inputs: Optional[Tensors] = None) -> None:
    """Compute the sum of gradients of ``tensors`` and accumulate them into the leaves' ``.grad``.

    ``grad_tensors`` gives the vector of the vector-Jacobian product for non-scalar outputs.
    Without ``retain_graph=True`` the graph is freed: a second backward through it raises.
    """
    tensors = _as_list(tensors)
    grads = _seeds(tensors, grad_tensors)
    # Creating a .grad tensor per leaf would trigger the cyclic garbage collector again and
    # again on large graphs (2x the backward time at 100k leaves); nothing here makes cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        inputs = None if inputs is None else _as_list(inputs)
        _root_hooks(tensors, grads, inputs, create_graph)
        acc, captured = run_backward(tensors, grads,
                                     create_graph if retain_graph is None else retain_graph,
                                     inputs=inputs, create_graph=create_graph)
        accumulate(acc, None if inputs is None else {id(t) for t in inputs}, create_graph)
        for x, g in zip(inputs or (), captured):   # a non-leaf input gets .grad too
            if g is not None and not x.is_leaf and id(x) not in acc.retained:
                g = grad_value(x, g)
                g = g if isinstance(g, Tensor) else wrap(g)
                cur = getattr(x, "_grad", None)
                x._grad = g if cur is None else cur + g
        run_callbacks()   # queued by hooks (register_multi_grad_hook), once at the end
    finally:
        if was_enabled:
            gc.enable()


def _root_hooks(tensors, grads, inputs, create_graph):
    """Run the hooks of a leaf that is the only output and not an input: PyTorch starts
    the walk at that output's node (with several outputs it starts from a dummy root and
    runs only the nodes it needs)."""
    if inputs is None or len(tensors) != 1:
        return
    t, g = tensors[0], grads[0]
    if isinstance(t, Tensor) and t.is_leaf and getattr(t, "_hooks", None) and \
            all(x is not t for x in inputs):
        hooked(t, g if g is not None else wrap(np.ones(t.shape)), create_graph)


def _seeds(tensors, grads):
    """The given gradients of ``tensors``, one each (None: ones for a scalar output)."""
    grads = _as_list(grads)
    if grads is None:
        return [None] * len(tensors)
    if len(grads) != len(tensors):
        for g in grads[:len(tensors)]:      # PyTorch checks their types first
            if g is not None and not isinstance(g, Tensor):
                raise TypeError("gradients can be either Tensors or None, but got "
                                f"{type(g).__name__}")
        raise RuntimeError(f"got {len(tensors)} tensors and {len(grads)} gradients")
    return grads


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
    grads = _seeds(outputs, grad_outputs)
    _root_hooks(outputs, grads, inputs, create_graph)
    acc, captured = run_backward(outputs, grads,
                               create_graph if retain_graph is None else retain_graph,
                               inputs=inputs, create_graph=create_graph)
    accumulate(acc, set(), create_graph)   # tensors that retain grad get it, as in PyTorch
    out, seen = [], {}
    for x, g in zip(inputs, captured):
        if id(x) in seen:   # an input given twice: its hooks run once
            out.append(seen[id(x)])
            continue
        if g is None:
            if not (allow_unused or materialize_grads):
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior.")
            if materialize_grads:
                g = 0.0 if x.ndim == 0 else np.zeros(x.shape)
            else:
                out.append(None)
                continue
        if x.is_leaf:   # a leaf input's hooks run on its gradient (a non-leaf's do not)
            g = hooked(x, g, create_graph)
        g = grad_value(x, g)
        out.append(g if isinstance(g, Tensor) else wrap(g))
        seen[id(x)] = out[-1]
    run_callbacks()   # queued by hooks (register_multi_grad_hook), once at the end
    return tuple(out)


def _tensor_backward(self, gradient=None, retain_graph: Optional[bool] = None,
                     create_graph: bool = False, inputs=None) -> None:
    """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (see ``tg.autograd.backward``)."""
    backward(self, gradient, retain_graph, create_graph, inputs=inputs)


def _tape_backward(self, y, gradient=None, retain_graph: Optional[bool] = None) -> None:
    """Run the reverse sweep from ``y`` and accumulate into the leaves' ``.grad``."""
    backward(y, gradient, retain_graph=retain_graph)


def _tape_gradient(self, y, sources, gradient=None, retain_graph: Optional[bool] = None):
    """Gradients of ``y`` with respect to ``sources`` (a tensor or a list of them),
    returned without touching ``.grad`` (like ``tg.autograd.grad``)."""
    single = not isinstance(sources, (list, tuple))
    out = grad(y, [sources] if single else list(sources), grad_outputs=gradient,
               retain_graph=retain_graph, allow_unused=True)
    return out[0] if single else list(out)


extend(Tensor, {"backward": _tensor_backward})
extend(Node, {"__call__": call_node})      # grad_fn(grad): one node's backward, as PyTorch
extend(Tape, {"backward": _tape_backward, "gradient": _tape_gradient})
