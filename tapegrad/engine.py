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
from .tensor import Size, Tensor, _new, _wrap


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


class Grads:
    """Gradients gathered for leaves (and retained non-leaves), summed per tensor."""

    __slots__ = ("ts", "gs", "_index", "retained")

    def __init__(self):
        self.ts, self.gs, self._index, self.retained = [], [], None, set()

    def _idx(self):
        if self._index is None:
            self._index = {id(t): k for k, t in enumerate(self.ts)}
        return self._index

    def extend(self, ts, gs):
        if not self.ts and len(set(map(id, ts))) == len(ts):  # the common case: one sweep
            self.ts, self.gs = list(ts), list(gs)
            return
        index, all_ts, all_gs = self._idx(), self.ts, self.gs
        for t, g in zip(ts, gs):
            k = index.get(id(t))
            if k is None:
                index[id(t)] = len(all_ts)
                all_ts.append(t)
                all_gs.append(g)
            else:
                all_gs[k] = all_gs[k] + g

    def get(self, t):
        k = self._idx().get(id(t))
        return None if k is None else self.gs[k]


def run_backward(tensors, grad_tensors, retain_graph, inputs=None):
    """Sweep from ``tensors`` seeded with ``grad_tensors``.

    Returns ``(grads, captured)``: ``grads`` (a Grads) holds the summed gradient of every
    leaf reached and of every reached non-leaf that retains grad; ``captured`` holds the
    gradients of ``inputs`` (aligned with it, None where unreached).
    """
    work = {}
    acc = Grads()
    for k, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if not isinstance(t, Tensor):
            raise TypeError(f"backward(): expected a Tensor, got {type(t).__name__}")
        if t._t is None:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not "
                               "have a grad_fn")
        gv = _seed_value(k, t, g)
        if _is_leaf(t):
            acc.extend([t], [gv])
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
            leaves = T._leaves
            idx = np.fromiter(leaves.keys(), np.int64, len(leaves))
            hit = idx[reached[idx] != 0].tolist()
            ts = [leaves[i] for i in hit]
            if T._arr:
                acc.extend(ts, [sw.get(i) for i in hit])
            else:
                acc.extend(ts, sw.adj[hit].tolist())
        for i, (S, j) in T._links.items():
            if reached[i]:
                s = work.setdefault(id(S), [S, {}])[1]
                g = sw.get(i)
                s[j] = s[j] + g if j in s else g
        for i, ref in T._retain.items():
            t = ref()
            if t is not None and reached[i] and t._t is T and t._i == i:
                acc.extend([t], [sw.get(i)])
                acc.retained.add(id(t))
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
                captured[pos] = acc.get(x)
    return acc, captured


def _grad_value(t, g):
    """Gradient value shaped and typed like ``t``."""
    v = t._v
    if v.__class__ is float:
        return float(np.sum(g)) if g.__class__ is not float else g
    return np.asarray(np.broadcast_to(g, v.shape), dtype=v.dtype).copy() if np.shape(g) != v.shape \
        else np.asarray(g, dtype=v.dtype)


def accumulate(acc, only=None):
    """Run leaf hooks on the summed gradients, then accumulate into ``.grad``
    (only for tensors whose id is in ``only``, when given)."""
    new = _new
    retained = acc.retained
    for t, g in zip(acc.ts, acc.gs):
        if only is not None and id(t) not in only:
            continue
        if t._v.__class__ is not float or g.__class__ is not float:
            g = _grad_value(t, g)
        try:
            hooks = t._hooks
            cur = t._grad
        except AttributeError:  # a non-leaf that retains grad
            hooks = None
            cur = getattr(t, "_grad", None)
        if hooks and id(t) not in retained:
            for hook in list(hooks):
                r = hook(_wrap(g))
                if r is not None:
                    g = _grad_value(t, r._v if isinstance(r, Tensor) else r)
        if cur is None:
            r = new(Tensor)
            # a gradient the sweep made for this call is owned outright; views are copied
            r._v = g if g.__class__ is float or (g.base is None and g.flags.writeable) else g.copy()
            r._t = None
            r._grad = r._hooks = None
            t._grad = r
        elif cur._v.__class__ is not float and cur._v.dtype == np.result_type(cur._v, g):
            cur._v += g       # accumulate in place, as PyTorch does
        else:
            cur._v = cur._v + g
