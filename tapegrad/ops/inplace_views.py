"""In-place ops on memory that views share, under PyTorch's rules.

``Tensor._inplace`` sends here a tensor that is a view, or the root of live views
(``core/views.py``).  The new value is written into the shared memory, so the base and every
view see it, and autograd follows PyTorch's rebase-on-in-place:

- through a view of a tensor that requires grad, the base's history becomes ``CopySlices``
  (the base with the view's part replaced by the in-place op's result);
- every live view of that memory (the one written through included) is then the base's new
  value viewed again (``AsStridedBackward0``), so a view never stands for a stale history;
- a view of a leaf that requires grad refuses in grad mode (PyTorch's error); under
  ``no_grad`` the leaf's memory is written (optimizers and init code do it);
- one version counter for the memory: what a tape saved from it is marked modified, and an
  entry whose saved value *is* this memory gets its own copy first, so a backward either
  raises (as PyTorch) or computes with the value it saved, never with the new one.
"""
from __future__ import annotations

import numpy as np

from ..core.grad_mode import grad_mode
from ..core.tape import Tape, keep_saved, recording
from ..core.tensor import UNREGISTERED_LEAF, note_unrecorded_change, own_the_old_value
from ..core.views import live_views, root_and_steps
from .array_ops import call, replay_view, view_through, writable_view

LEAF_VIEW = "a view of a leaf Variable that requires grad is being used in an in-place operation."
LEAF = "a leaf Variable that requires grad is being used in an in-place operation."
_NO_GRAD_VIEW = ("A view was created in no_grad mode and {} with grad mode enabled. Given that "
                 "this use case is ambiguous and error-prone, it is forbidden. You can clarify "
                 "your code by moving both the view and the inplace either both inside the "
                 "no_grad block (if you don't want the inplace to be tracked) or both outside (if "
                 "you want the inplace to be tracked).")
NO_GRAD_VIEW = _NO_GRAD_VIEW.format("is being modified inplace")
MULTI_OUTPUT_VIEW = ("Output {} of {} is a view and is being modified inplace. This view is the "
                     "output of a function that returns multiple views. Such functions do not "
                     "allow the output views to be modified inplace. You should replace the "
                     "inplace operation by an out-of-place one.")
OVERLAP = ("unsupported operation: more than one element of the written-to tensor refers to a "
           "single memory location. Please clone() the tensor before performing the operation.")


def _is_leaf_on_tape(t):
    T = t._tape
    return T.__class__ is Tape and T._leaves.get(t._entry) is t


def _written_place(self, root, steps):
    """The writable NumPy view of the memory an in-place op on ``self`` writes."""
    v = self._value
    place = v if v.__class__ is np.ndarray and v.ndim else (view_through(root._value, steps)
                                                            if steps else root._value)
    if not place.flags.writeable:
        if any(s == 0 and n > 1 for s, n in zip(place.strides, place.shape)):
            raise RuntimeError(OVERLAP)
        # a part of an expanded view that holds each element once (``x.expand(2, 3)[0]``):
        # PyTorch writes it; NumPy's broadcast views are read-only, so view the root again
        place = writable_view(place, root._value)
        if place is None:
            raise RuntimeError(OVERLAP)
    return place


def _as_dtype(v, like):
    """The in-place result ``v`` in the dtype of the tensor it is written into."""
    if v.__class__ is float:
        return v if like.dtype == np.float64 else np.asarray(v, like.dtype)
    return v if v.dtype == like.dtype else v.astype(like.dtype)


def _keep_saved(aliases, memory, rec_tape, start, kept=False):
    """Before ``memory`` changes: each tape entry of ``aliases`` is marked modified (from
    ``start`` on its recording tape: the in-place op's own entries may read the old
    value), and one whose saved value is this memory keeps a copy (a leaf's entry is
    only marked: its tensor is registered again, as after any in-place change)."""
    # (``kept``: ``keep_saved`` copied every saved array of this memory, under
    # allow_mutation_on_saved_tensors; a leaf is not marked then: it is registered again
    # after the change, so nothing reads its old entry from now on)
    for t in aliases:
        T = t._tape
        if T.__class__ is not Tape or (kept and T._leaves.get(t._entry) is t):
            continue
        e = t._entry
        saved = T._arr.get(e)
        if saved is not None and T._leaves.get(e) is not t and np.may_share_memory(saved, memory):
            T._arr[e] = saved.copy()
        T._dirty.append((e, start if T is rec_tape else len(T)))


def _rebind(aliases):
    """After an in-place change that recorded nothing for them (no_grad, ``detach()``), each
    alias with history keeps its node, and its tape entry takes its new value: an op using
    it from now on saves that, as PyTorch's would (``_keep_saved`` kept the old value and
    marked the readers before, which raise at backward).  A view's is kept as a copy, as
    a view op's result is (``_record_call``)."""
    for t in aliases:
        T = t._tape
        if T.__class__ is Tape and T._leaves.get(t._entry) is not t:
            v = t._value
            T._rebind_value(t._entry, v if v.__class__ is float or t._view is None
                            else np.array(v))


def inplace_view(self, compute, aliased=False):
    """``self = compute(self)`` written into the memory ``self`` shares with views (the
    ``Tensor._inplace`` of views); None when no view of it is alive (the plain path)."""
    root, steps = root_and_steps(self)
    views = live_views(root)
    if not steps and not views:
        return None
    if self._detached:
        return _inplace_detached(self, compute, root, steps, views)
    memory = root._value
    T = recording()
    if T is not None and root._tape is not None:
        # (PyTorch looks at how the view was made first: an unbind of a leaf is refused as
        # a multi-output view, not as a view of a leaf)
        if self._multi_output is not None and self._tape is not None:
            raise RuntimeError(MULTI_OUTPUT_VIEW.format(*self._multi_output[:2]))
        if _is_leaf_or_unregistered(root):
            raise RuntimeError(LEAF_VIEW if steps else LEAF)
        # a view made under no_grad of a tensor that requires grad has no history to rebase
        if steps and self._tape is None:
            raise RuntimeError(NO_GRAD_VIEW)
    tracked = root._tape is not None
    # a 0-d float64 root holds a Python float (its aliases: detach(), .data): no memory to
    # write into, so the root's value is replaced
    place = None if memory.__class__ is float else _written_place(self, root, steps)
    start = len(T) if T is not None else 0
    if steps and tracked and T is not None and self._tape is not None:
        r = _compute_on_written_view(self, compute, root, steps, aliased)
    else:
        r = compute(self)
    v = float(r._value) if place is None else _as_dtype(r._value, place)
    recorded = r._tape.__class__ is Tape
    if recorded and not tracked:   # (c.div_(w) of a constant c that has aliases: c.data)
        own_the_old_value(r._tape, start, self, memory)
    # (no keep_saved here: a change through a view, ``writing_a_view``)
    _keep_saved([root] + views, memory, r._tape if recorded else None, start)
    if recorded:
        new_root = call("copy_slices", root, r, steps) if steps else r
        _write(root, place, v)
        root._tape, root._entry = new_root._tape, new_root._entry
        for w in views:   # each view is the base's new value viewed again, but one made
            if w._detached:   # under no_grad (PyTorch refuses its later use) or detached
                _reread(w, root._value)
            elif w is self or w._tape is not None or not tracked:
                nv = replay_view(root, root_and_steps(w)[1])      # refuses its later use)
                w._tape, w._entry, w._value = nv._tape, nv._entry, nv._value
            else:
                _reread(w, root._value)
    else:
        _write(root, place, v)
        note_unrecorded_change(root)
        if _is_leaf_on_tape(root):   # registered again with its new value on next use
            root._tape._leaf_of.pop(id(root), None)
            root._tape = UNREGISTERED_LEAF
        for w in views:
            _reread(w, root._value)
        _rebind([root] + views)
        _view_again(root, views)
    root._vc = getattr(root, "_vc", 0) + 1
    return self


def _compute_on_written_view(view, compute, root, steps, aliased):
    """``compute(view)`` reading ``view`` as a new view of ``root`` whose gradient goes into
    its part of the root only, as PyTorch's CopySlices routes the in-place op's gradient
    (the view's own history, which other uses of it keep, would add zeros elsewhere)."""
    history = view._tape, view._entry
    written = replay_view(root, steps, "written_view")
    view._tape, view._entry = written._tape, written._entry
    try:
        r = compute(view)
    finally:
        view._tape, view._entry = history
    T = written._tape
    if aliased and r._tape is T:
        # ``v.mul_(v)``: the op saved the view as its other operand too, and changed it
        # (PyTorch's version check raises at the backward)
        T._dirty.append((written._entry, r._entry + 1))
    return r


def _write(root, place, v):
    if place is None:
        root._value = v
    else:
        place[...] = v


def _reread(view, memory):
    """Elements hold Python floats: read again after ``memory`` changed."""
    if view._value.__class__ is float:
        view._value = float(view_through(memory, root_and_steps(view)[1])) \
            if memory.__class__ is not float else memory


def _inplace_detached(self, compute, root, steps, views):
    """``self = compute(self)`` for a detached tensor (``x.detach()``): the memory it shares
    with ``root`` is written and its version moves on, so what saved it raises at backward
    (PyTorch's rule), but no history changes: the root keeps its own, and ``self`` gets
    one only when the op records (an operand that requires grad)."""
    T = recording()
    if T is not None:
        if _is_leaf_or_unregistered(self):   # x.detach().requires_grad_()
            raise RuntimeError(LEAF)
        base = self._base   # (a view of such a leaf: its base is the detached tensor)
        if base is not None and base is not self and _is_leaf_or_unregistered(base):
            raise RuntimeError(LEAF_VIEW)
    memory = root._value
    if memory.__class__ is float:   # a 0-d float64 root holds a Python float: no memory to
        place = None                # write into, so the root's value is replaced
    else:
        place = _written_place(self, root, steps)
    start = len(T) if T is not None else 0
    untracked = self._untracked   # (x.data: what saved x is not told, as in PyTorch)
    counter = self if untracked else root
    counter._vc = getattr(counter, "_vc", 0) + 1   # (before: the op's own constants are current)
    r = compute(self)
    recorded = r._tape.__class__ is Tape
    if recorded:   # the op saved self's memory as a constant (d.mul_(w)): keep the old value
        arrays = r._tape._arr
        for e in range(start, len(r._tape)):
            saved = arrays.get(e)
            if saved is not None and place is not None and np.may_share_memory(saved, place):
                arrays[e] = saved.copy()
    # (the root's memory changes whether or not the op recorded: under
    # allow_mutation_on_saved_tensors what saved it keeps the old value; else x.data's
    # change goes unnoticed by what saved x, as in PyTorch)
    kept = not steps and keep_saved(memory, [root] + views)   # (not through a view)
    if not untracked or kept:
        _keep_saved([root] + views, memory, r._tape if recorded else None, start, kept)
    if place is None:
        root._value = v = float(r._value)
    else:
        v = _as_dtype(r._value, place)
        place[...] = v
    for t in (root, self):
        if _is_leaf_on_tape(t):   # registered again with its new value on next use
            if untracked and not kept:   # (what read it before reads the new value, unnoticed)
                t._tape._rebind_value(t._entry, t._value)
            t._tape._leaf_of.pop(id(t), None)
            t._tape = UNREGISTERED_LEAF
    if recorded:
        self._tape, self._entry = r._tape, r._entry
    for w in views:
        _reread(w, root._value)
    if place is None or self._value.__class__ is float:
        self._value = float(v) if place is None else float(place)
    _rebind([root] + [w for w in views if w is not self or not recorded])
    if not untracked:
        _view_again(root, [w for w in views if w is not self])
    return self


def _view_again(root, views):
    """After a change of ``root``'s memory that recorded nothing for it (no_grad, through
    ``detach()``), each view with history is ``root`` viewed again, as PyTorch regenerates
    a view's grad_fn once its base's version moved on: ``AsStridedBackward0`` of the
    base's node (whatever the grad mode), so gradients reach the base's history (a leaf's:
    registered again with its new value).  A multi-output view is left: PyTorch refuses its
    grad_fn then."""
    if root._tape is None:
        return
    with grad_mode(True):
        for w in views:
            if w._detached or w._tape is None or w._multi_output is not None:
                continue
            nv = replay_view(root, root_and_steps(w)[1])
            w._tape, w._entry, w._value = nv._tape, nv._entry, nv._value


def _is_leaf_or_unregistered(t):
    """A leaf that requires grad (on a tape or not yet)."""
    return t._tape is UNREGISTERED_LEAF or _is_leaf_on_tape(t)
