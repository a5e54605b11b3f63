"""Which tensors are views of which: the bookkeeping behind memory shared as in PyTorch.

A view (``x[0]``, ``x.t()``, ``x.view(-1)``...) holds a NumPy view of its base's array as
its value, so a change through either shows in the other.  Its *root* is the tensor whose
array it views (PyTorch's ``_base``: never itself a view) and its *steps* the view ops
that lead from the root to it, ``(array op name, arguments, params)`` each: an in-place op
through a view replays them to find the memory it writes, and autograd replays them on the
root's new history (``AsStridedBackward0``).

Two attributes hold it, set only on the tensors concerned (``Tensor`` has class-level
defaults of None, so no op that makes a tensor pays for them):

- ``view._view``: ``(root, steps)``; it keeps the root alive, as PyTorch's ``_base`` does;
- ``root._views``: weak references to its views (pruned as they die), which an in-place
  change of the memory updates.

A 0-d float64 view (an element ``x[i]``) holds a Python float, as every 0-d float64 tensor
does (the fast path): an in-place change of the memory refreshes its value.

A detached tensor (``x.detach()``) is registered as a view with ``_detached`` set: it shares
the memory and the version counter (PyTorch's ``detach``) but no history, so an in-place
change through it marks what saved the memory modified and never rebases the base's
history; views of a detached tensor are detached too.  ``x.data`` is registered so too, with
``_untracked`` set: a version counter of its own (PyTorch documents that in-place changes
through it bump no version of ``x``), so a change through it is not seen by what saved ``x``
but reaches every alias's value and tape entry (``ops/inplace_views.py``).
"""
from __future__ import annotations

from weakref import ref


class ViewRefs(list):
    """A root's weak references to its views; dead ones are dropped when the list has
    doubled since the last pruning (amortised)."""

    __slots__ = ("limit",)


def register_view(view, src, step):
    """Note that tensor ``view`` is ``src`` viewed through ``step`` (src may be a view)."""
    info = src._view
    if info is None:
        root, steps = src, (step,)
    else:
        root, steps = info[0], info[1] + (step,)
    view._view = (root, steps)
    if src._multi_output is not None and view._tape is not None:
        view._multi_output = (0, view.grad_fn.name().removesuffix("Backward0"), src._version)
    if src._detached:   # (its _base is the detached tensor, not the memory's root)
        view._detached = True
        if src._untracked:
            view._untracked = True
        view._detached_base = src._detached_base if src._view is not None and \
            "_detached_base" in src.__dict__ else src
    remember_view(root, view)


def register_parts(parts, src, steps):
    """``register_view(part, src, step)`` for each part and its step: the outputs of one
    view op with several (an ``unbind``'s: one pass, not one call per element)."""
    if src._multi_output is not None or src._detached:
        for part, step in zip(parts, steps):
            register_view(part, src, step)
        return
    info = src._view
    root, before = (src, ()) if info is None else info
    for part, step in zip(parts, steps):
        part._view = (root, before + (step,))
    refs = root._views
    if refs is None:
        refs = root._views = ViewRefs()
        refs.limit = 32
    refs.extend(map(ref, parts))
    if len(refs) > refs.limit:
        refs[:] = [r for r in refs if r() is not None]
        refs.limit = 2 * len(refs) + 32


def register_detached(alias, src, untracked=False):
    """Note that tensor ``alias`` is ``src.detach()``: same memory, same version counter;
    ``untracked``: ``src.data``, a version counter of its own."""
    info = src._view
    root, steps = (src, ()) if info is None else info
    alias._view = (root, steps)
    alias._detached = True
    if untracked:
        alias._untracked = True
    remember_view(root, alias)


def remember_view(root, view):
    """Add ``view`` to ``root``'s weak references to its views."""
    refs = root._views
    if refs is None:
        refs = root._views = ViewRefs()
        refs.limit = 32
    refs.append(ref(view))
    if len(refs) > refs.limit:
        refs[:] = [r for r in refs if r() is not None]
        refs.limit = 2 * len(refs) + 32


def root_and_steps(t):
    """(root, steps) of view ``t``, or (t, ()) for a tensor that is not a view."""
    info = t._view
    return (t, ()) if info is None else info


def live_views(root):
    """The views of ``root`` that are alive, oldest first."""
    refs = root._views
    if refs is None:
        return []
    views, kept = [], []
    for r in refs:
        v = r()
        if v is not None:
            views.append(v)
            kept.append(r)
    if not views:
        root._views = None
    elif len(kept) < len(refs):   # (the dead ones dropped: the next look scans only these)
        refs[:] = kept
    return views


def forget_views(root):
    """``root`` gets new memory (``x.data = ...``): its views keep the old one, unlinked."""
    for v in live_views(root):
        v._view = None
    root._views = None
