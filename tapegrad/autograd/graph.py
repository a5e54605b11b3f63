"""``tg.autograd.graph``: PyTorch's ``torch.autograd.graph``.

- ``Node``, the class of every ``grad_fn`` (a view of a tape entry built on access, see
  ``core/graph.py``): ``name()``, ``next_functions``, ``metadata``, ``register_hook``,
  ``register_prehook``, and the values its backward saved (``_saved_self``...);
- ``saved_tensors_hooks(pack, unpack)`` (and ``save_on_cpu``, ``disable_saved_tensors_hooks``);
- ``allow_mutation_on_saved_tensors``, ``increment_version``;
- ``register_multi_grad_hook``, ``get_gradient_edge``.

Hooks for saved tensors: a custom ``Function``'s saved tensors are packed when saved and
unpacked when ``ctx.saved_tensors`` is read, as in PyTorch.  Built-in ops record without a
Python call per op, so inside a ``saved_tensors_hooks`` block the recording tape's value
lists are ones that report each entry appended: what an elementwise op saved (named as
PyTorch names it, from the op table) is packed as the op is recorded, and unpacked when the
backward reaches the op, whose rule then runs in Python on the unpacked values if they
differ.  Array ops (matmul, reductions...) are not packed; their rules read the tape.
"""
from __future__ import annotations

import threading
from typing import NamedTuple
from weakref import ref

import numpy as np

from ..core import interrupts, optable
from ..core.graph import (AccumulateGrad, Node, RemovableHandle, leaf_state_for, node_state,
                          node_state_for, node_states)
from ..core.pyop import pyop_at, pyop_inputs, pyop_name, pyop_nout
from ..core.kernels import NO_GRAD, SAVES_OUT, SAVES_X, SAVES_Y, SAVES_Z
from ..core.tape import (ARG, CONST, LEAF, LINK, N_ELEMENTWISE, PYOUT, SECOND_BACKWARD,
                         Tape, recording, thread_state)
from ..core.tensor import Tensor, extend, tensor_of_entry, wrap

__all__ = ["Node", "GradientEdge", "get_gradient_edge", "saved_tensors_hooks", "save_on_cpu",
           "disable_saved_tensors_hooks", "allow_mutation_on_saved_tensors",
           "register_multi_grad_hook", "increment_version"]


class _Local(threading.local):
    def __init__(self):
        self.frames = []       # active saved_tensors_hooks, innermost last
        self.disabled = None   # the message of an active disable_saved_tensors_hooks
        self.callbacks = []    # run once at the end of the current backward
        self.packing = 0       # > 0 while a pack hook runs
        self.retired = None    # weak reference to the default tape the last backward freed


_local = _Local()


# -- saved values (``grad_fn._saved_self``...) ----------------------------------------------
# PyTorch's names for what an op's backward saved: its inputs by position, and "result"
_SLOT_NAMES = {"pow": ("self", "exponent"), "clamp": ("self", "min", "max"),
               "where": ("condition", "self", "other")}
_NUMBER_PARAMS = {"pow", "clamp"}   # a Python number there is saved as a number
# where a row's rule reads other values than PyTorch's formula (div's uses its result where
# PyTorch's uses self), the values PyTorch saves, so that the names and packs match
_PYTORCH_SAVES = {"div": ("x", "y")}


def _mentions(expr, var):
    if expr is None:
        return False
    for ch in "()*/+-,<>=":
        expr = expr.replace(ch, " ")
    return var in expr.split()


def saved_slots(T, i):
    """``[(name, operand ref or 'out' or None)]``: what entry ``i``'s backward saved, under
    PyTorch's names, from the op table's ``SAVES_*`` flags.  An input no needed partial
    reads is None, as in PyTorch (``x * c`` with ``c`` constant: ``_saved_self`` is None)."""
    code = T._entry(i)[0]
    if code >= N_ELEMENTWISE or NO_GRAD[code]:
        return []
    op = optable.OPS[code]
    refs = T._inputs(i)
    names = _SLOT_NAMES.get(op.name, ("self", "other", "third"))
    saves = _PYTORCH_SAVES.get(op.name)
    flags = (SAVES_X[code], SAVES_Y[code], SAVES_Z[code]) if saves is None else \
        tuple(v in saves for v in "xyz")
    partials = (op.dx, op.dy, op.dz)
    grads = [r >= 0 and T._entry(r)[0] != CONST for r in refs]   # operands that need grad
    slots = []
    for k, r in enumerate(refs):
        if flags[k]:
            needed = (grads[k] and _mentions(partials[k], "xyz"[k])) or \
                any(grads[j] for j in range(len(refs)) if j != k)
            slots.append((names[k], r if needed else None))
    slots.sort(key=lambda slot: slot[0])   # PyTorch's order: inputs by name, then the result
    tensors = [r >= 0 or r in T._tensor_consts for r in refs]   # not Python numbers
    if (SAVES_OUT[code] if saves is None else "out" in saves) and \
            any(t and _mentions(p, "out") for t, p in zip(tensors, partials)):
        slots.append(("result", "out"))
    return slots


def operand_tensor(T, i, r, number=False, condition=False):
    """Operand ``r`` of entry ``i`` (or its result, ``r == 'out'``) as a tensor: a leaf
    itself, a recorded value with its ``grad_fn``, a constant without grad (or a Python
    number, with ``number``)."""
    if r == "out":
        return tensor_of_entry(T, i, T._value(i))
    if r < 0:
        c = T._c[-r - 1]
        return c if number and r not in T._tensor_consts else wrap(c)
    code, ra, _ = T._entry(r)
    if condition:
        return wrap(np.asarray(T._value(r)) != 0)
    if code == LEAF:
        return T._leaves[r]
    if code == CONST:
        return wrap(T._value(r))
    if code == LINK:
        S, j = T._links[r]
        return operand_tensor(S, j, j)
    if code == PYOUT and pyop_name(T._py[ra]) == "broadcast":  # implicit broadcasting: no node
        return operand_tensor(T, i, pyop_inputs(T._py[ra])[0])
    return tensor_of_entry(T, r, T._value(r))


def _saved_value(T, i, name):
    code = T._entry(i)[0]
    for slot, r in saved_slots(T, i):
        if slot == name:
            if r is None:      # not saved (PyTorch's undefined saved value reads as None)
                return None
            if T._freed is not None and i < len(T._freed) and T._freed[i]:
                raise RuntimeError(SECOND_BACKWARD)
            packed = _packed(T, i, r)
            if packed is not None:          # read back through its unpack hook, as PyTorch
                return packed[0](packed[1])
            opname = optable.OPS[code].name
            return operand_tensor(T, i, r, number=opname in _NUMBER_PARAMS,
                                  condition=opname == "where" and slot == "condition")
    raise AttributeError(f"no saved value '_saved_{name}'")


def _packed(T, i, r):
    """``(unpack hook, packed value)`` of operand ``r`` of entry ``i``, or None."""
    st = node_state(T, i)
    for operand, unpack, p in (st.packed or ()) if st is not None else ():
        if operand == r:
            return unpack, p
    return None


def _function_ctx(T, i):
    py = pyop_at(T, i) if T is not None else None
    return None if py is None else getattr(py.backward_fn, "ctx", None)


class SavedTensor:
    """``grad_fn._raw_saved_<name>``: one saved value, with ``register_hooks(pack_hook,
    unpack_hook)`` for it alone (packed now, unpacked when the backward reaches its op)."""

    __slots__ = ("_tape", "_entry", "_ref", "_condition")

    def __init__(self, T, i, r, condition):
        self._tape, self._entry, self._ref, self._condition = T, i, r, condition

    def _freed(self):
        T, i = self._tape, self._entry
        return T._freed is not None and i < len(T._freed) and T._freed[i]

    def unpack(self):
        if self._freed():
            raise RuntimeError(SECOND_BACKWARD)
        packed = _packed(self._tape, self._entry, self._ref)
        if packed is not None:
            return packed[0](packed[1])
        return self._value()

    def _value(self):
        return operand_tensor(self._tape, self._entry, self._ref, condition=self._condition)

    def register_hooks(self, pack_hook, unpack_hook):
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TypeError("register_hooks(): incompatible function arguments: expected "
                            "two callables")
        if self._freed():
            raise RuntimeError(
                "Calling register_hooks on a saved tensor after it has been freed. Saved "
                "intermediate values of the graph are freed when you call .backward() or "
                "autograd.grad(). Specify retain_graph=True if you need to backward through "
                "the graph a second time or if you need to access saved variables after "
                "calling backward.")
        st = node_state_for(self._tape, self._entry)
        if any(ref == self._ref for ref, _, _ in st.packed or ()):
            raise RuntimeError("Calling register_hooks on a saved tensor whose hooks have "
                               "already been set. Hint: only one pair of hooks is allowed at "
                               "a time.")
        st.packed = (st.packed or []) + [(self._ref, unpack_hook,
                                          pack_hook(self._value().detach()))]


def _node_getattr(self, name):
    T, i = self._tape, self._entry
    if T is not None:
        if name.startswith("_raw_saved_"):
            for slot, r in saved_slots(T, i):
                if slot == name[11:] and r is not None and \
                        (r == "out" or r >= 0 or r in T._tensor_consts):
                    return SavedTensor(T, i, r, slot == "condition")
        if name.startswith("_saved_"):
            if any(slot == name[7:] for slot, _ in saved_slots(T, i)):
                return _saved_value(T, i, name[7:])
        elif not name.startswith("__"):
            ctx = _function_ctx(T, i)
            if ctx is not None:   # a custom Function's node is its ctx, as in PyTorch
                return getattr(ctx, name)
    raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")


def _node_dir(self):
    names = object.__dir__(self)
    if self._tape is not None:
        names += ["_saved_" + slot for slot, _ in saved_slots(self._tape, self._entry)]
    return names


extend(Node, {"__getattr__": _node_getattr, "__dir__": _node_dir})


# -- gradient edges -------------------------------------------------------------------
class GradientEdge(NamedTuple):
    """A node and one of its outputs: where a tensor's gradient enters the graph."""
    node: Node
    output_nr: int


def get_gradient_edge(tensor):
    """The ``GradientEdge`` of ``tensor``: its ``grad_fn`` (``AccumulateGrad`` for a leaf)."""
    if not tensor.requires_grad:
        raise RuntimeError("It is not possible to get the gradient edge for a Tensor that "
                           "does not require gradients")
    fn = tensor.grad_fn
    if fn is None:
        return GradientEdge(AccumulateGrad(tensor), 0)
    T = tensor._tape
    code, ra, _ = T._entry(tensor._entry)
    return GradientEdge(fn, tensor._entry - ra - 1 if code == PYOUT else 0)


# -- hooks for saved tensors ------------------------------------------------------------
class saved_tensors_hooks:
    """Context manager: ``pack_hook(tensor)`` is called on each tensor saved for backward
    while it is active, and ``unpack_hook(packed)`` when backward needs it back; what
    ``unpack_hook`` returns is what backward uses (see the module docstring for when the
    hooks run on built-in ops)."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook, self.unpack_hook = pack_hook, unpack_hook
        self._spans = []       # [tape, next entry to pack, entries a pack hook recorded]
        self._outer = None     # the value list of the tape before this block

    def __enter__(self):
        if _local.disabled is not None:
            raise RuntimeError(_local.disabled)
        T = recording()
        self._spans = [] if T is None else [[T, len(T), set()]]
        if T is not None:      # pack each entry as it is recorded
            self._outer = T._rec_val, T._arr
            T._rec_val = _PackingValues(T._rec_val, self, T)
            T._arr = _PackingArrays(T._arr, self, T)
        _local.frames.append(self)
        return self

    def __exit__(self, *exc):
        pack_pending()
        frames = _local.frames
        if self in frames:
            frames.remove(self)
        if self._spans:
            T = self._spans[0][0]
            if isinstance(T._rec_val, _PackingValues) and T._rec_val.frame is self:
                outer = getattr(self._outer[0], "frame", None)
                T._rec_val = (list(T._rec_val) if outer is None else
                              _PackingValues(T._rec_val, outer, T))
                T._arr = (dict(T._arr) if outer is None else _PackingArrays(T._arr, outer, T))
        return False

    def _pack_recorded(self, T, complete_only):
        """Pack what entries of ``T`` recorded since the last call saved.  With
        ``complete_only``, stop at an entry whose array result is not stored yet."""
        for span in self._spans:
            if span[0] is T:
                break
        else:
            span = [T, 0, set()]
            self._spans.append(span)
        skip = span[2]
        for i in range(span[1], len(T)):
            code = T._entry(i)[0]
            st = node_state(T, i)
            if code < N_ELEMENTWISE and i not in skip and (st is None or st.packed is None):
                slots = [(name, r) for name, r in saved_slots(T, i)   # numbers are not tensors
                         if r is not None and (r == "out" or r >= 0 or r in T._tensor_consts)]
                if complete_only and slots and slots[-1][1] == "out" and i not in T._arr and \
                        T._value(i) != T._value(i):   # an array result not stored yet
                    return
                if slots:    # (a state is a stop: the walk unpacks them when it gets there)
                    opname = optable.OPS[code].name
                    node_state_for(T, i).packed = [
                        (r, self.unpack_hook, self._pack(T, skip, operand_tensor(
                            T, i, r, condition=opname == "where" and name == "condition")))
                        for name, r in slots]
            span[1] = i + 1

    def _pack(self, T, skip, t):
        """``pack_hook(t)``; what it records is not packed (PyTorch disables the hooks
        while one runs)."""
        start = len(T)
        _local.packing += 1
        try:
            return self.pack_hook(t)
        finally:
            _local.packing -= 1
            skip.update(range(start, len(T)))


class _PackingValues(list):
    """A tape's list of recorded values while ``saved_tensors_hooks`` is active: what an
    entry saved is packed as soon as the entry is recorded, as PyTorch packs inside the op."""

    __slots__ = ("frame", "tape")

    def __init__(self, items, frame, tape):
        super().__init__(items)
        self.frame, self.tape = frame, tape

    def append(self, v):
        list.append(self, v)
        if not _local.packing:
            self.frame._pack_recorded(self.tape, True)


class _PackingArrays(dict):
    """A tape's array values while ``saved_tensors_hooks`` is active: an entry whose array
    result is stored after it was appended (the array fast path) is packed then."""

    __slots__ = ("frame", "tape")

    def __init__(self, items, frame, tape):
        super().__init__(items)
        self.frame, self.tape = frame, tape

    def __setitem__(self, i, v):
        dict.__setitem__(self, i, v)
        if not _local.packing:
            self.frame._pack_recorded(self.tape, True)


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors stay where they are (tapegrad runs on the CPU): a no-op variant."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        super().__init__(lambda t: t, lambda t: t)


class disable_saved_tensors_hooks:
    """Context manager: registering saved-tensor hooks inside raises ``error_message``."""

    def __init__(self, error_message):
        self.error_message = error_message

    def __enter__(self):
        self._prev = _local.disabled
        _local.disabled = self.error_message
        return self

    def __exit__(self, *exc):
        _local.disabled = self._prev
        return False


def pack_pending():
    """Pack what built-in ops saved since the active ``saved_tensors_hooks`` were entered
    and is not packed yet (when they exit and when a backward starts); the innermost block
    packs what was recorded inside it."""
    if not _local.frames:
        return
    T = recording()
    for frame in reversed(_local.frames):
        if T is not None:
            frame._pack_recorded(T, False)      # (a tape started inside the block too)
        for span in list(frame._spans):
            frame._pack_recorded(span[0], False)


def unpack_entry(T, i):
    """``{operand ref or 'out': tensor}`` unpacked for entry ``i``: the values that differ
    from the recorded ones (None when its backward can use the tape as it is)."""
    st = node_state(T, i)
    item = None if st is None else st.packed
    if not item:
        return None
    changed = {}
    for r, unpack, p in item:
        t = unpack(p)
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but "
                            f"got result of type {type(t).__name__}")
        v = T._value(i) if r == "out" else (T._c[-r - 1] if r < 0 else T._value(r))
        if not np.array_equal(np.asarray(t._value), np.asarray(v), equal_nan=True):
            changed[r] = t
    return changed or None


def release_saved(T, freed, stops):
    """A backward without ``retain_graph`` freed the entries marked in ``freed``: drop what
    hooks packed for them and what custom Functions there saved, as PyTorch frees saved
    values (a packed temporary file is deleted then, not when the tape goes).  ``stops``:
    the stop entries the walk could reach (Python ops' heads among them)."""
    for st in node_states(T):
        if 0 <= st < len(freed) and freed[st] and st.packed:
            st.packed = None
    py_ops = T._py
    for head in stops:
        py = py_ops.get(head)   # (a packed one has no Function: pyop_at's backward_fn is None)
        ctx = None if py is None or py.__class__ is tuple else getattr(py.backward_fn, "ctx", None)
        if ctx is not None and head < len(freed) and freed[head]:
            ctx.release()


# a freed tape keeps less than this many bytes of op results as they are (sizing its readers
# costs a few microseconds, more than small arrays are worth)
RELEASE_BYTES = 64 << 10


def release_outlived(T):
    """``T``, this thread's default tape, was freed by a backward without ``retain_graph``
    (it records no more).  The tape freed before it is released now if it is still alive
    (``release_freed_values``): it outlived a whole step of the program, so something holds
    a result of it -- ``losses.append(loss.detach())`` holds ``loss``, whose entry keeps
    the tape.  Most freed tapes die with the step's variables: releasing each one at its own
    backward cost a walk over all its ops for nothing (2% of the LSTM gradient)."""
    before = _local.retired
    _local.retired = ref(T)
    before = None if before is None else before()
    if before is not None and before is not T:
        release_freed_values(before)


def release_freed_values(T):
    """Drop the arrays of default tape ``T`` (a backward freed it: it records no more) that
    only freed entries read, as PyTorch frees saved tensors: a tape that outlives its
    backward kept each step's arrays (and the constants its ops took, a batch of inputs)
    for good.

    Each such array becomes a zero-strided stub of its shape and dtype (the walk's layout and
    the tape's views read shapes; ``T._released`` names the entries).  An array that an
    entry not freed reads stays: a later backward through a branch this one did not reach
    (``inputs=`` pruning, a graph sharing the value) reads it.  A freed Python op drops the
    constant tensors of its call.  Explicit tapes keep everything: ``tape.compile()`` runs a
    tape again from its values."""
    arrays = T._arr
    if not arrays or T._freed is None:
        return
    if sum(v.nbytes for v in arrays.values()) < RELEASE_BYTES:
        return
    op, a, b = T._arrays()[:3]
    n = len(op)
    freed = np.zeros(n, np.bool_)   # (entries recorded after the walk are not freed)
    marks = T._freed[:n]
    freed[:len(marks)] = marks
    # what entries not freed read: the operands of elementwise entries (an ARG entry holds
    # a ternary op's other two), and a Python op's inputs and outputs
    reading = ~freed & ((op < N_ELEMENTWISE) | (op == ARG))
    read = np.zeros(n + 1, np.bool_)   # (n: the slot of every constant and unused operand)
    for refs in (a[reading], b[reading]):
        read[np.where(refs >= 0, refs, n)] = True
    released = T._released = T._released if T._released is not None else set()
    for head, py in T._py.items():
        if head >= n:
            continue
        if not freed[head]:
            for r in pyop_inputs(py):
                read[r if r >= 0 else n] = True
            read[head + 1:head + 1 + pyop_nout(py)] = True
        elif py.__class__ is not tuple and py.fwd is not None and head not in released:
            name, args, params = py.fwd   # (a packed op holds no constants)
            stub = any(x.__class__ is Tensor and x._value.__class__ is np.ndarray for x in args)
            if stub or "indices" in params:   # (min/max over a dim's: ``saves_indices``)
                py.fwd = (name, tuple(_stub_tensor(x) for x in args) if stub else args,
                          {k: v for k, v in params.items() if k != "indices"})
                released.add(head)
    for e, v in arrays.items():
        if e < n and freed[e] and not read[e] and e not in released and \
                (op[e] < N_ELEMENTWISE or op[e] == PYOUT):
            # (not ``arrays[e] =``: inside saved_tensors_hooks, storing packs a new entry)
            dict.__setitem__(arrays, e, np.broadcast_to(np.zeros((), v.dtype), v.shape))
            released.add(e)
    T._released = released or None


interrupts.protect(release_freed_values)   # (Ctrl-C: the tape's list of released entries stays whole)


def _stub_tensor(x):
    if x.__class__ is not Tensor or x._value.__class__ is not np.ndarray:
        return x
    v = x._value
    return wrap(np.broadcast_to(np.zeros((), v.dtype), v.shape))


def pack_saved(tensors):
    """``(unpack, packed)`` for a custom Function's saved tensors, or None without hooks."""
    if not _local.frames:
        return None
    frame = _local.frames[-1]
    return frame.unpack_hook, [None if t is None else frame.pack_hook(t) for t in tensors]


def unpack_saved(packed):
    unpack, values = packed
    return tuple(None if p is None else unpack(p) for p in values)


# -- in-place changes of saved tensors ----------------------------------------------------
class _RecordedInplaceAllowed(list):
    """A tape's in-place marks while ``allow_mutation_on_saved_tensors`` is active: a recorded
    in-place op leaves the saved value as it was (its result is a new entry), so it is not
    marked; a change of the memory itself (``.data``, ops without grad) still is."""

    def __init__(self, items, tape):
        super().__init__(items)
        self.tape = tape

    def append(self, item):
        entry, when = item
        if when < len(self.tape):   # marked by a recorded op: its own entry is `when`
            return
        super().append(item)


class allow_mutation_on_saved_tensors:
    """Context manager: a tensor saved for backward may be changed in place; backward uses
    the value it had when saved, as PyTorch's clone.  A recorded in-place op never
    overwrites a saved value; a change that records nothing (no_grad, ``detach()``,
    ``.data``) copies what saved the memory first (``keep_saved``).  A non-leaf changed
    where nothing records still raises at a backward through what saved it (its one tape
    entry holds the new value for the ops after the change: README)."""

    def __enter__(self):
        T = recording()
        self._tape = T
        if T is not None:
            T._dirty = _RecordedInplaceAllowed(T._dirty, T)
        thread_state.keeping_saved += 1   # (a change that records nothing: tape.keep_saved)
        return self

    def __exit__(self, *exc):
        thread_state.keeping_saved -= 1
        T = self._tape
        if T is not None and isinstance(T._dirty, _RecordedInplaceAllowed):
            T._dirty = list(T._dirty)
        return False


def increment_version(tensor):
    """Mark ``tensor`` as changed in place: a backward through an op that saved it raises."""
    tensors = tensor if isinstance(tensor, (list, tuple)) else (tensor,)
    for t in tensors:
        t._version = getattr(t, "_version", 0) + 1
        T = t._tape
        if T.__class__ is Tape:
            T._dirty.append((t._entry, len(T)))


# -- multi-tensor hooks ---------------------------------------------------------------
def queue_callback(fn):
    """Run ``fn()`` once when the current backward has finished."""
    _local.callbacks.append(fn)


def run_callbacks():
    """Called by ``backward``/``grad`` when they are done."""
    while _local.callbacks:
        cbs, _local.callbacks = _local.callbacks, []
        for fn in cbs:
            fn()


class _MultiHandle:
    def __init__(self, handles):
        self.handles = handles

    def remove(self):
        for h in self.handles:
            h.remove()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def register_multi_grad_hook(tensors, fn, *, mode="all"):
    """``mode="all"``: ``fn(grads)`` once per backward, after the gradients of ``tensors``
    were computed (None for those this backward does not reach).  ``mode="any"``:
    ``fn(grad)`` on the first of them computed."""
    if mode not in ("all", "any"):
        raise ValueError(f"Expects mode to be one of ('all', 'any') but got {mode}")
    tensors = tuple(tensors)
    state = {"grads": None, "fired": False}

    def finish():
        grads, state["grads"], state["fired"] = state["grads"], None, False
        if mode == "all" and grads is not None:
            fn(list(grads))

    def make(k):
        def hook(g):
            if mode == "any":
                if not state["fired"]:
                    state["fired"] = True
                    queue_callback(finish)
                    fn(g)
                return None
            if state["grads"] is None:
                state["grads"] = [None] * len(tensors)
                queue_callback(finish)
            state["grads"][k] = g
            return None
        return hook

    return _MultiHandle([t.register_hook(make(k)) for k, t in enumerate(tensors)
                         if t.requires_grad])


def _register_post_accumulate_grad_hook(self, hook):
    """``hook(tensor)`` after the gradient of this leaf was accumulated into ``.grad``
    (by ``backward``; ``autograd.grad`` accumulates nothing).  Returns a handle."""
    if not self.requires_grad:
        raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
    if not self.is_leaf:
        raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
    st = leaf_state_for(self)
    st.post_accumulate.append(hook)
    return RemovableHandle(st.post_accumulate, hook)


extend(Tensor, {"register_post_accumulate_grad_hook": _register_post_accumulate_grad_hook})
