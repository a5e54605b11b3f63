"""Which tensors are views of which: the registry behind storage shared as in PyTorch.

A view (``x[0]``, ``x.t()``, ``x.view(-1)``...) holds a NumPy view of its base's array as
its value, so a change through either shows in the other.  Its *root* is the tensor whose
array it views (PyTorch's ``_base``: never itself a view) and its *steps* the view ops
that lead from the root to it, ``(array op name, arguments, params)`` each: an in-place op
through a view replays them to find the memory it writes, and autograd replays them on the
root's new history (``AsStridedBackward0``).

The registry is kept outside the tensors, in two dicts keyed by ``id``, so that tensors
that are not views cost nothing: no slot to set when an op makes a tensor, and one
``if VIEW_OF`` (an empty dict) in the in-place path of a program without views.

- ``VIEW_OF``: id(view) -> (root, steps); the entry goes when the view dies (and keeps the
  root alive while the view lives, as PyTorch's ``_base`` does);
- ``VIEWS_ON``: id(root) -> [weakref to the root, [weakrefs to its views]]; the entry
  goes when the root dies.

A 0-d float64 view (an element ``x[i]``) holds a Python float, as every 0-d float64 tensor
does (the fast path): it is registered like the others, and an in-place change of the
storage refreshes its value.
"""
from __future__ import annotations

import weakref

VIEW_OF = {}
VIEWS_ON = {}


def register_view(view, src, step):
    """Note that tensor ``view`` is ``src`` viewed through ``step`` (src may be a view)."""
    info = VIEW_OF.get(id(src))
    if info is None:
        root, steps = src, (step,)
    else:
        root, steps = info[0], info[1] + (step,)
    k = id(view)
    VIEW_OF[k] = (root, steps)
    rk = id(root)
    entry = VIEWS_ON.get(rk)
    if entry is None:
        entry = VIEWS_ON[rk] = [weakref.ref(root, lambda _, rk=rk: VIEWS_ON.pop(rk, None)), [], 32]
    refs = entry[1]
    refs.append(weakref.ref(view, lambda _, k=k: VIEW_OF.pop(k, None)))
    if len(refs) > entry[2]:   # drop the dead ones now and then (amortised)
        refs[:] = [r for r in refs if r() is not None]
        entry[2] = 2 * len(refs) + 32


def root_and_steps(t):
    """(root, steps) of view ``t``, or (t, ()) for a tensor that is not a view."""
    info = VIEW_OF.get(id(t))
    return (t, ()) if info is None else info


def base_of(t):
    """PyTorch's ``t._base``: the tensor whose storage ``t`` views, or None."""
    info = VIEW_OF.get(id(t))
    return None if info is None else info[0]


def live_views(root):
    """The views of ``root`` that are alive, oldest first."""
    entry = VIEWS_ON.get(id(root))
    if entry is None:
        return []
    views = [r() for r in entry[1]]
    views = [v for v in views if v is not None]
    if not views:
        VIEWS_ON.pop(id(root), None)
    return views


def has_views(t):
    """True when ``t`` is a view or the root of views (alive or not yet pruned)."""
    k = id(t)
    return k in VIEW_OF or k in VIEWS_ON
