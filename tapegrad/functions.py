"""Ops whose backward runs in Python (NumPy): the ``pyfunc`` entries of the tape.

The elementwise ops of the op table sweep in Numba.  Everything else -- broadcasting,
reductions, indexing, custom ``Function``s -- is one ``pyfunc`` head entry plus one
``pyout`` entry per output; the Numba sweep stops at the head and calls ``backward``
here with the outputs' adjoints.  Broadcasting is undone in one place: ``unbroadcast``.
"""
from __future__ import annotations

import numpy as np

from .tape import PYFUNC, PYOUT, recording
from .tensor import Tensor, _new, _wrap


class PyOp:
    """A recorded op with a Python backward: ``backward_fn(grads_out) -> grads_in``.
    ``graph``, where the op has one, is the same backward written in recorded tensor ops
    (tensors in, tensors out), for ``create_graph=True``.  ``fwd``, for array ops, is
    ``(array op name, arguments, params)`` with each tensor argument given as its position
    in ``inputs``: enough to run the op again on other values (``scalarize.scalarize_tape``)."""

    __slots__ = ("name", "inputs", "backward_fn", "nout", "graph", "fwd")

    def __init__(self, name, inputs, backward_fn, nout, graph=None, fwd=None):
        self.name, self.inputs, self.backward_fn, self.nout = name, inputs, backward_fn, nout
        self.graph, self.fwd = graph, fwd

    def backward(self, sw, head):
        grads_out = [sw.get(head + 1 + k) for k in range(self.nout)]
        grads_in = self.backward_fn(grads_out)
        for r, g in zip(self.inputs, grads_in):
            if g is not None:
                sw.add_ref(r, g)


def record(T, name, refs, values, backward_fn, graph=None, fwd=None):
    """Record a Python-backward op on tape T; returns the output entries' indices."""
    head = T._push(PYFUNC, -1, -1, 0.0)
    T._py[head] = PyOp(name, tuple(refs), backward_fn, len(values), graph, fwd)
    T._stops.append(head)
    return [T._push(PYOUT, head, -1, v) for v in values]


def _as_tensor(T, i, v):
    r = _new(Tensor)
    r._v = v
    r._t = T
    r._i = i
    return r


def unbroadcast(g, shape):
    """Sum gradient ``g`` down to ``shape`` (undo NumPy broadcasting)."""
    g = np.asarray(g)
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    g = g.sum(axis=tuple(range(lead))) if lead > 0 else g
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and g.shape[k] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def _expand_ref(T, t, r, shape):
    """Reference to ``t`` (entry r) broadcast to ``shape``: a ``broadcast`` entry, the one
    place where gradients are summed back to an operand's shape.  ``next_functions`` looks
    through it, as PyTorch's graph has no node for implicit broadcasting."""
    v = t._v
    src_shape = () if v.__class__ is float else v.shape
    out = np.array(np.broadcast_to(np.asarray(v, np.float64), shape))

    def backward(grads):
        g = unbroadcast(grads[0], src_shape)
        return [float(g) if src_shape == () else g]

    def graph(grads):
        from .array_ops import sum_to
        return [sum_to(grads[0], src_shape)]

    return record(T, "broadcast", [r], [out], backward, graph,
                  ("expand", (Arg(0),), {"shape": tuple(shape)}))[0]


class Arg(int):
    """In a ``PyOp.fwd`` argument list: the op's tensor input number ``int(self)``."""


def apply(name, inputs, value, backward_fn, graph_fn=None, fwd=None):
    """Run-time helper for Python-backward ops: returns the result tensor, recorded when
    grad mode is on and an input requires grad.  ``backward_fn(g)`` returns input grads
    (``graph_fn(g)`` the same as recorded tensors, where the op supports ``create_graph``)."""
    T = recording()
    if T is None or not any(isinstance(t, Tensor) and t._t is not None for t in inputs):
        return _wrap(np.asarray(value) if value.__class__ is not float else value)
    if value.__class__ is not float:
        value = np.asarray(value)
        if value.ndim == 0 and value.dtype == np.float64:
            value = float(value)
    refs = [(t._i if t._t is T else T._ref(t)) if isinstance(t, Tensor) and t._t is not None
            else -1 for t in inputs]
    i = record(T, name, refs, [value], lambda gs: backward_fn(gs[0]),
               graph_fn and (lambda gs: graph_fn(gs[0])), fwd)[0]
    return _as_tensor(T, i, value)
