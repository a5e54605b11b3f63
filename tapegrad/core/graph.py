"""``grad_fn`` views: backward-graph nodes computed from the tape when accessed.

No node object exists while recording.  ``t.grad_fn`` builds a small view of ``t``'s tape
entry whose class is named as PyTorch names it (``MulBackward0``); ``next_functions``
walks the entry's operands.  Two views of the same entry compare equal.
"""
from __future__ import annotations

import math
import weakref

from . import optable
from .pyop import pyop_inputs, pyop_name
from .tape import ARG, CONST, LEAF, LINK, PYFUNC, PYOUT, N_ELEMENTWISE

_CLASSES = {}
_CODES = {op.name: k for k, op in enumerate(optable.OPS)}
_WHERE, _CLAMP = _CODES["where"], _CODES["clamp"]


class RemovableHandle:
    """What ``register_hook`` returns: ``remove()`` unregisters the hook."""

    __slots__ = ("_hooks", "_hook")

    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class NodeState(int):
    """What users attach to a node: ``register_hook``/``register_prehook`` hooks, the
    ``metadata`` dict, saved values packed by ``saved_tensors_hooks`` (``packed``), and for
    a leaf's ``AccumulateGrad`` the post-accumulate-grad hooks.

    No node object lives while recording, so a node's state is an entry of its tape's
    ``_stops`` (an int, the entry's index: the walk returns to Python there).  The tape owns
    it and it dies with the tape: a registry outside would keep the tape alive through
    hooks and saved values that refer to its tensors."""

    def __new__(cls, entry):
        st = int.__new__(cls, entry)
        st.pre, st.post, st.metadata, st.post_accumulate, st.packed = [], [], {}, [], None
        return st

    def run_pre(self, grads):
        """``grad_outputs`` after the pre-hooks (each may return a replacement tuple)."""
        for hook in list(self.pre):
            r = hook(tuple(grads))
            if r is not None:
                grads = list(_checked(hook, r, grads))
        return grads

    def after_accumulate(self, t, g):
        """A leaf's ``AccumulateGrad`` ran: the post-accumulate-grad hooks ``hook(t)``, then
        its hooks ``hook((), (grad,))`` (PyTorch's order)."""
        for hook in list(self.post_accumulate):
            hook(t)
        for hook in list(self.post):
            hook((), (g,))

    def run_post(self, grads_in, grads_out):
        """``grad_inputs`` after the hooks ``hook(grad_inputs, grad_outputs)``."""
        for hook in list(self.post):
            r = hook(tuple(grads_in), tuple(grads_out))
            if r is not None:
                grads_in = list(_checked(hook, r, grads_in))
        return grads_in


def _checked(hook, r, old):
    r = tuple(r) if isinstance(r, (tuple, list)) else (r,)
    if len(r) != len(old):
        raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has returned an incorrect "
                           f"number of values (got {len(r)}, but expected {len(old)})")
    return r


_STATE_AT = weakref.WeakKeyDictionary()   # tape -> {entry: position of its state in _stops}
LEAF_STATE = {}                           # id(leaf) -> NodeState of its AccumulateGrad


def node_state(T, i):
    """What users attached to entry ``i``'s node (None: nothing)."""
    if not _STATE_AT:      # the common case: nothing attached anywhere (a test per stop)
        return None
    d = _STATE_AT.get(T)
    k = None if d is None else d.get(i)
    return None if k is None else T._stops[k]


def node_states(T):
    """Every ``NodeState`` of tape ``T``."""
    d = _STATE_AT.get(T) if _STATE_AT else None
    return [] if d is None else [T._stops[k] for k in d.values()]


def node_state_for(T, i):
    """Entry ``i``'s ``NodeState``, created on first use."""
    st = node_state(T, i)
    if st is None:
        st = NodeState(i)
        _STATE_AT.setdefault(T, {})[i] = len(T._stops)
        T._stops.append(st)
    return st


def leaf_state_for(t):
    """Leaf ``t``'s ``NodeState``, created on first use (dropped with ``t``)."""
    st = LEAF_STATE.get(id(t))
    if st is None:
        st = LEAF_STATE[id(t)] = NodeState(-1)
        weakref.finalize(t, LEAF_STATE.pop, id(t), None)
    return st


_QUALIFIED = {"CopySlices": "torch::autograd::CopySlices"}


class Node:
    """A backward node: the view of one tape entry."""

    __slots__ = ("_tape", "_entry")

    def __init__(self, tape, i):
        self._tape, self._entry = tape, i

    def name(self):
        # PyTorch's nodes written by hand in C++ report their C++ name
        n = type(self).__name__
        return _QUALIFIED.get(n, n)

    def _state(self):
        return node_state_for(self._tape, self._entry)

    @property
    def next_functions(self):
        """((node, output_nr), ...) for each input; (None, 0) for inputs without grad."""
        T = self._tape
        return tuple(_edge(T, r) for r in _node_inputs(T, self._entry))

    @property
    def metadata(self):
        """A dict kept with this node (the same for every view of it)."""
        return self._state().metadata

    def register_hook(self, fn):
        """``fn(grad_inputs, grad_outputs)`` after this node computed the gradients of its
        inputs; a returned tuple replaces ``grad_inputs``.  Returns a handle."""
        st = self._state()
        st.post.append(fn)
        return RemovableHandle(st.post, fn)

    def register_prehook(self, fn):
        """``fn(grad_outputs)`` before this node runs; a returned tuple replaces them."""
        st = self._state()
        st.pre.append(fn)
        return RemovableHandle(st.pre, fn)

    def __setattr__(self, name, value):
        if name.startswith("_saved_"):
            raise AttributeError(f"attribute '{name}' of '{type(self).__name__}' objects is "
                                 "not writable")
        object.__setattr__(self, name, value)

    def __eq__(self, other):
        return type(other) is type(self) and other._tape is self._tape and other._entry == self._entry

    def __hash__(self):
        return hash((id(self._tape), self._entry))

    def __repr__(self):
        return f"<{type(self).__name__} object at {hex(id(self))}>"


class AccumulateGrad(Node):
    """The node of a leaf tensor: its gradient accumulates into ``variable.grad``."""

    __slots__ = ("variable",)
    next_functions = ()

    def __init__(self, variable):
        self._tape, self._entry = None, -1
        self.variable = variable

    def _state(self):
        return leaf_state_for(self.variable)

    def register_hook(self, fn):
        st = self._state()
        st.post.append(fn)
        return RemovableHandle(st.post, fn)

    def register_prehook(self, fn):
        st = self._state()
        st.pre.append(fn)
        return RemovableHandle(st.pre, fn)

    def __eq__(self, other):
        return type(other) is AccumulateGrad and other.variable is self.variable

    def __hash__(self):
        return hash(id(self.variable))


def _node_class(name):
    cls = _CLASSES.get(name)
    if cls is None:
        cls = _CLASSES[name] = type(name, (Node,), {"__slots__": (), "__module__": __name__})
    return cls


def _number_side(T, code, ra, rb):
    """Which input of a binary op was a Python number PyTorch names specially: 1, 0 or None."""
    op = optable.OPS[code]
    if op.arity != 2:
        return None
    if op.node_c and rb < 0 and rb not in T._tensor_consts:
        return 1
    if op.node_r and ra < 0 and ra not in T._tensor_consts:
        return 0
    return None


def _tensor_bounds(T, refs):
    """True when a clamp's bounds took PyTorch's tensor overload (``ClampBackward0``, an edge
    per input) rather than its number overload (``ClampBackward1``, an edge for ``x`` only).
    PyTorch takes a 0-d tensor that needs no grad (a constant ``r < 0`` here) as a number
    when the other bound is a number; a bound not given is recorded as an infinite number."""
    if any(r >= 0 for r in refs[1:]):
        return True
    lo, hi = refs[1], refs[2]
    given = [r for r, default in ((lo, -math.inf), (hi, math.inf)) if T._c[-r - 1] != default
             or r in T._tensor_consts]
    return bool(given) and all(r in T._tensor_consts for r in given)


def node_input_slots(T, i):
    """The operand positions of entry ``i`` that are its node's inputs (its edges)."""
    refs = T._inputs(i)
    code, ra, rb = T._entry(i)
    if code == _WHERE:   # the condition is not differentiable: no edge, as in PyTorch
        return range(1, len(refs))
    if code == _CLAMP and not _tensor_bounds(T, refs):
        return range(1)
    if code < N_ELEMENTWISE:
        side = _number_side(T, code, ra, rb)
        if side is not None:
            return range(1 - side, 2 - side)
    return range(len(refs))


def _node_inputs(T, i):
    refs = T._inputs(i)
    return tuple(refs[k] for k in node_input_slots(T, i))


def node_name(T, i):
    """The PyTorch-style node name of entry ``i``."""
    code, ra, rb = T._entry(i)
    if code == PYOUT:
        return node_name(T, ra)
    if code == PYFUNC:
        return pyop_name(T._py[i])
    if code >= N_ELEMENTWISE:
        return optable.STRUCTURAL[code - N_ELEMENTWISE]
    op = optable.OPS[code]
    if code == _CLAMP and _tensor_bounds(T, T._inputs(i)):
        return "ClampBackward0"
    side = _number_side(T, code, ra, rb)
    return op.node if side is None else (op.node_c if side == 1 else op.node_r)


def node_for(T, i):
    code, ra, _ = T._entry(i)
    if code == PYOUT:
        i = ra
    return _node_class(node_name(T, i))(T, i)


def _edge(T, r):
    if r < 0:
        return (None, 0)
    code, ra, _ = T._entry(r)
    if code == LEAF:
        return (AccumulateGrad(T._leaves[r]), 0)
    if code == LINK:
        S, j = T._links[r]
        return _edge(S, j)
    if code in (CONST, ARG):
        return (None, 0)
    if code == PYOUT:
        if pyop_name(T._py[ra]) == "broadcast":   # implicit broadcasting has no node, as PyTorch
            return _edge(T, pyop_inputs(T._py[ra])[0])
        return (node_for(T, ra), r - ra - 1)
    return (node_for(T, r), 0)
