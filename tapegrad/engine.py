"""The backward driver: seeds the sweeps, follows links between tapes, fills ``.grad``.

One backward call sweeps each tape that holds part of the graph (usually just one, in
one Numba call).  A ``link`` entry forwards its adjoint into the tape that recorded the
tensor; since adjoints are linear, a tape swept twice in one call gives the same sums.
Leaf gradients are summed over all sweeps first, then each leaf's hooks run once on the
sum, then the result accumulates into ``.grad`` -- as PyTorch's AccumulateGrad does.
"""
from __future__ import annotations

import numpy as np

from .tape import Tape, _tls
from .tensor import Size, Tensor, _wrap


def _shape_of(v):
    return () if v.__class__ is float else v.shape


def _seed_value(k, t, g):
    shape = _shape_of(t._v)
    if g is None:
        if t.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        return 1.0 if shape == () else np.ones(shape)
    gv = g._v if isinstance(g, Tensor) else (float(g) if isinstance(g, (int, float)) else np.asarray(g))
    gshape = _shape_of(gv)
    if gshape != shape:
        if isinstance(g, (int, float)) and len(shape) == 0:
            pass
        else:
            raise RuntimeError(f"Mismatch in shape: grad_output[{k}] has a shape of {Size(gshape)!r} "
                               f"and output[{k}] has a shape of {Size(shape)!r}.")
    return gv if gv.__class__ is float else np.asarray(gv, dtype=np.float64)


def _is_leaf(t):
    T = t._t
    return T.__class__ is not Tape or T._leaves.get(t._i) is t


def run_backward(tensors, grad_tensors, retain_graph, inputs=None):
    """Sweep from ``tensors`` seeded with ``grad_tensors``.

    Returns ``(leaf_grads, captured)``: ``leaf_grads`` maps id(leaf) -> [leaf, gradient]
    for every leaf reached (and every retained non-leaf, under key ('r', id)); ``captured``
    holds the gradients of ``inputs`` (list aligned with it, None where unreached).
    """
    work = {}
    leaf_acc = {}

    def acc(key, t, g):
        cur = leaf_acc.get(key)
        if cur is None:
            leaf_acc[key] = [t, g]
        else:
            cur[1] = cur[1] + g

    for k, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if not isinstance(t, Tensor):
            raise TypeError(f"backward(): expected a Tensor, got {type(t).__name__}")
        if t._t is None:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not "
                               "have a grad_fn")
        gv = _seed_value(k, t, g)
        if _is_leaf(t):
            acc(id(t), t, gv)
            continue
        seeds = work.setdefault(id(t._t), [t._t, {}])[1]
        seeds[t._i] = seeds[t._i] + gv if t._i in seeds else gv

    targets = []  # (position, tape, entry) for non-leaf inputs
    captured = [None] * (len(inputs) if inputs is not None else 0)
    if inputs is not None:
        for pos, x in enumerate(inputs):
            if not _is_leaf(x):
                targets.append((pos, x._t, x._i))

    swept = []
    while work:
        _, (T, seeds) = work.popitem()
        sw = T._sweep(seeds)
        swept.append(sw)
        reached = sw.reached
        if T._leaves:
            idx = np.fromiter(T._leaves.keys(), np.int64, len(T._leaves))
            hit = idx[reached[idx] != 0].tolist()
            if T._arr:
                for i in hit:
                    leaf = T._leaves[i]
                    acc(id(leaf), leaf, sw.get(i))
            else:
                leaves = T._leaves
                for i, g in zip(hit, sw.adj[hit].tolist()):
                    leaf = leaves[i]
                    acc(id(leaf), leaf, g)
        for i, (S, j) in T._links.items():
            if reached[i]:
                s = work.setdefault(id(S), [S, {}])[1]
                g = sw.get(i)
                s[j] = s[j] + g if j in s else g
        for i, ref in T._retain.items():
            t = ref()
            if t is not None and reached[i] and t._t is T and t._i == i:
                acc(("r", id(t)), t, sw.get(i))
        for pos, S, j in targets:
            if S is T and reached[j]:
                g = sw.get(j)
                captured[pos] = g if captured[pos] is None else captured[pos] + g

    if not retain_graph:
        for sw in swept:
            T = sw.tape
            n = len(sw.reached)
            np.maximum(T._freed[:n], sw.reached, out=T._freed[:n])
            st = _tls
            if st.implicit is T:  # start a fresh default tape: memory stays bounded in loops
                st.implicit = Tape()
                st.refresh()
    if inputs is not None:
        for pos, x in enumerate(inputs):
            if _is_leaf(x):
                hit = leaf_acc.get(id(x))
                captured[pos] = None if hit is None else hit[1]
    return leaf_acc, captured


def _grad_value(t, g):
    """Gradient value shaped and typed like ``t``."""
    v = t._v
    if v.__class__ is float:
        return float(np.sum(g)) if g.__class__ is not float else g
    return np.asarray(np.broadcast_to(g, v.shape), dtype=v.dtype).copy() if np.shape(g) != v.shape \
        else np.asarray(g, dtype=v.dtype)


def accumulate(leaf_acc):
    """Run leaf hooks on the summed gradients, then accumulate into ``.grad``."""
    for key, (t, g) in leaf_acc.items():
        g = _grad_value(t, g)
        hooks = getattr(t, "_hooks", None) if key.__class__ is not tuple else None
        if hooks:
            for hook in list(hooks):
                r = hook(_wrap(g))
                if r is not None:
                    g = _grad_value(t, r._v if isinstance(r, Tensor) else r)
        cur = getattr(t, "_grad", None)
        if cur is None:
            t._grad = _wrap(g.copy() if g.__class__ is not float else g)
        else:
            cur._v = cur._v + g
