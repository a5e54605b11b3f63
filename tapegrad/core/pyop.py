"""Ops whose backward runs in Python: the ``pyfunc`` entries of the tape.

The elementwise ops of the op table sweep in Numba.  Everything else -- broadcasting,
reductions, indexing, custom ``Function``s -- is one ``pyfunc`` head entry plus one
``pyout`` entry per output; the reverse walk stops at the head and calls the op's
backward with the outputs' adjoints.
"""
from __future__ import annotations

import threading

import numpy as np

from . import interrupts
from .shapes import broadcast_view
from .tape import PYFUNC, PYOUT


class Arg(int):
    """In a ``PyOp.fwd`` argument list: the op's tensor input number ``int(self)``."""


class PyOp:
    """A recorded op with a Python backward: ``name`` (its node name), ``inputs`` (operand
    references, -1 for a tensor input without grad), ``nout`` outputs.

    An array op has ``fwd``, ``(array op name, arguments, params)`` with each tensor that
    requires grad given as an ``Arg``: the reverse walk finds its rule in the array-op
    table, and ``tg.compile`` runs it again on elements.  Other ops (custom ``Function``s)
    have ``backward_fn(grads_out) -> grads_in`` over tensors: under ``create_graph=True``
    it runs with grad mode on, so what it computes is recorded, as in PyTorch.

    ``versions``: ``(tensor, version)`` of index tensors whose memory the rule reads
    (``note_index_versions``), or None."""

    __slots__ = ("name", "inputs", "backward_fn", "nout", "fwd", "versions")

    def __init__(self, name, inputs, backward_fn, nout, fwd=None):
        self.name, self.inputs, self.backward_fn, self.nout = name, inputs, backward_fn, nout
        self.fwd = fwd
        self.versions = None


def record(T, name, refs, values, backward_fn, fwd=None):
    """Record a Python-backward op on tape T; returns the output entries' indices."""
    if len(values) == 1:   # (most ops)
        return [record_one(T, name, refs, values[0], backward_fn, fwd)]
    push = T._push
    head = push(PYFUNC, -1, -1, 0.0)
    T._py[head] = PyOp(name, tuple(refs), backward_fn, len(values), fwd)
    T._stops.append(head)
    if all(v.__class__ is float for v in values):   # (an unbind's elements)
        return T._push_floats(PYOUT, head, values)
    return [push(PYOUT, head, -1, v) for v in values]


# Shared calls, by number: ``(array op name, template, params)`` tuples that many recorded
# ops share (ops/array_ops.py decides which calls are shared).  Append-only, so a number
# stays valid as long as the process; past CALLS_LIMIT (a program slicing at ever new
# offsets, ``x[i:i + 3]``: a few MB of calls and keys by then), calls are no longer shared.
CALLS = []
CALLS_LIMIT = 1 << 14


_REGISTERING = threading.Lock()   # (a number read after another thread's append would be its)


def register_call(fwd):
    """The number of shared call ``fwd`` (appended to ``CALLS``), or None once full."""
    with _REGISTERING:
        if len(CALLS) >= CALLS_LIMIT:
            return None
        CALLS.append(fwd)
        return len(CALLS) - 1


def record_shared(T, name, refs, value, call):
    """``record_one`` of an array op with one output whose call is shared call number
    ``call``.  The tape holds ``(name, inputs, call)``, a tuple of strs and ints, in place of
    a ``PyOp``: Python's garbage collector stops tracking such a tuple within its first two
    collections (and the dict of them, once every value is one), where every PyOp a tape
    keeps alive is traversed again at each full collection (10% of the LSTM objective).
    ``pyop_at`` gives the ``PyOp``."""
    head = T._push_pyop(value)
    T._py[head] = (name, tuple(refs), call)
    T._stops.append(head)
    return head + 1


def pyop_at(T, head):
    """The ``PyOp`` recorded at head entry ``head`` of tape ``T``, or None."""
    py = T._py.get(head)
    if py.__class__ is tuple:
        return PyOp(py[0], py[1], None, 1, CALLS[py[2]])
    return py


def pyop_array_call(py):
    """``(inputs, fwd)`` of a value of a tape's ``_py`` that is an array op (a ``PyOp`` or a
    packed one), without making a ``PyOp``; None for a custom Function."""
    if py.__class__ is tuple:
        return py[1], CALLS[py[2]]
    return None if py.backward_fn is not None else (py.inputs, py.fwd)


def pyop_inputs(py):
    """The input references of a value of a tape's ``_py`` (a ``PyOp`` or a packed one)."""
    return py[1] if py.__class__ is tuple else py.inputs


def pyop_nout(py):
    """The number of outputs of a value of a tape's ``_py`` (a packed one has one)."""
    return 1 if py.__class__ is tuple else py.nout


def pyop_name(py):
    """The node name of a value of a tape's ``_py`` (a ``PyOp`` or a packed one)."""
    return py[0] if py.__class__ is tuple else py.name


def record_one(T, name, refs, value, backward_fn, fwd=None):
    """``record`` of an op with one output (most ops): returns the output entry's index."""
    head = T._push_pyop(value)
    T._py[head] = PyOp(name, tuple(refs), backward_fn, 1, fwd)
    T._stops.append(head)
    return head + 1


def note_index_versions(t, indices):
    """Tensor ``t``, the one result of a recorded Python op, took the integer or mask
    tensors ``indices`` as an index that its rule reads (held as their own memory, not a
    copy): their versions now, so that a backward after one changed in place raises, as
    PyTorch's saved indices do, instead of reading the new index."""
    T = t._tape
    if T is None or not indices:
        return
    py = pyop_at(T, t._entry - 1)
    if py is not None and py.nout == 1:
        py.versions = tuple((s, s._version) for s in indices)
        T._py[t._entry - 1] = py   # (a packed one unpacked: it holds the versions)


def record_broadcast(T, r, value, shape):
    """Reference to entry ``r`` (holding ``value``) broadcast to ``shape``: a ``broadcast``
    entry, the one place where gradients are summed back to an operand's shape.
    ``next_functions`` looks through it, as PyTorch's graph has no node for implicit
    broadcasting.  Its rule is the array op ``expand``'s.

    The entry holds a read-only broadcast view, not a copy: copying an operand to the
    result's size cost more than the op itself (fresh pages for every copy the tape keeps).
    It views the value the tape holds for ``r`` (a view op's result is kept there as a
    copy, so a later in-place change of the base cannot reach it unnoticed); an in-place
    change of ``r`` marks this entry modified too (``find_dirty`` in the walk).  Its call is
    shared by every broadcast to the same shape (``record_shared``)."""
    held = T._arr.get(r)
    v = value if held is None else held
    if v.__class__ is not np.ndarray or v.dtype != np.float64:
        v = np.asarray(v, np.float64)
    shape = tuple(shape)
    call = _BROADCAST_CALLS.get(shape)
    if call is None:
        call = register_call(("expand", _FIRST_ARG, {"shape": shape}))
        if call is None:   # (CALLS is full)
            return record_one(T, "broadcast", (r,), broadcast_view(v, shape), None,
                              ("expand", _FIRST_ARG, {"shape": shape}))
        _BROADCAST_CALLS[shape] = call
    return record_shared(T, "broadcast", (r,), broadcast_view(v, shape), call)


_FIRST_ARG = (Arg(0),)   # (the template of a broadcast's call: an Arg is immutable)
_BROADCAST_CALLS = {}    # shape -> the number of the shared call broadcasting to it


interrupts.protect(record, record_one, record_shared)
