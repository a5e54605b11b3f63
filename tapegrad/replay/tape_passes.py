"""Tape optimisation before replay: constant folding, common subexpressions, dead entries.

A compiled tape (``replay.CompiledTape``) replays every entry it holds, at every point of
a batch; entries that cannot change the outputs only cost time.  ``optimize`` takes a
compiled tape's arrays and returns new arrays with the same meaning and fewer entries:

1. ``fold_constants``: an elementwise entry whose operands are all constants becomes a
   constant (computed by ``kernels.forward``, the replay's own forward).
2. ``merge_common``: entries with the same op and operands merge into the first
   (operands in either order for commutative ops; leaf entries never merge).
3. ``drop_dead``: only entries an output or a guard depends on stay.

The passes work on a *resolved* view of the tape: every entry holds its own operands
``x, y, z`` (a ternary op's 2nd and 3rd operands are read out of its ``arg`` entry), and
``keep`` marks the entries still in the program.  ``_renumber`` writes the arrays back,
each kept ternary with its ``arg`` entry recorded immediately before it, as recording
does.  Unused operand slots hold -1 (``consts[0]``, the 0.0 every tape starts with).
"""
from __future__ import annotations

import struct

import numpy as np

from ..core import kernels as K
from ..core import optable

_ELEMENTWISE = K.N_ELEMENTWISE
_ARITY = K.ARITY.astype(np.int64)
_COMMUTATIVE = np.array([o.commutative for o in optable.OPS] + [False] * len(optable.STRUCTURAL))


class _Pool:
    """The constants, equal ones in one slot: equal means the same bits, so 0.0 and -0.0
    stay apart and a NaN never merges."""

    def __init__(self, consts):
        self.values, self._slot = [], {}
        self.refs = np.array([self.ref(float(c)) for c in consts], dtype=np.int64)

    def ref(self, v):
        key = struct.pack("<d", v)
        r = self._slot.get(key) if v == v else None
        if r is None:
            self.values.append(v)
            r = -len(self.values)
            if v == v:
                self._slot[key] = r
        return r

    def value(self, r):
        return self.values[-r - 1]


def _resolve(op, a, b, consts):
    """(o, x, y, z, keep, pool): opcodes, the three operands of every entry (-1 where
    unused; constants already pooled), and the entries that count (all but ``arg``)."""
    o = op.astype(np.int64)
    arity = _ARITY[o]
    x = np.where(arity >= 1, a, -1).astype(np.int64)
    y = np.where(arity == 2, b, -1).astype(np.int64)
    z = np.full(len(o), -1, dtype=np.int64)
    tern = arity == 3
    y[tern], z[tern] = a[b[tern]], b[b[tern]]
    pool = _Pool(consts)
    for r in (x, y, z):
        c = r < 0
        r[c] = pool.refs[-r[c] - 1]
    keep = o != K.ARG
    return o, x, y, z, keep, pool


def _count(o, keep):
    """Entries of the written-back tape: the kept ones and an ``arg`` per kept ternary."""
    return int(keep.sum() + (keep & (_ARITY[o] == 3)).sum())


def _substitute(refs, sub):
    """Replace each entry reference r >= 0 by ``sub[r]`` (constants stay)."""
    for r in refs:
        e = r >= 0
        r[e] = sub[r[e]]


def fold_constants(o, x, y, z, keep, pool, protect):
    """Entries whose operands are all constants become constants, in rounds (folding one
    entry can make the entries that use it constant), except the ``protect``ed ones.
    Returns how many folded."""
    arity = _ARITY[o]
    may = keep & (o < _ELEMENTWISE) & ~protect
    folded = 0
    while True:
        const = (x < 0) & ((arity < 2) | (y < 0)) & ((arity < 3) | (z < 0))
        now = np.nonzero(may & const)[0]
        if not len(now):
            return folded
        sub = np.arange(len(o))
        for i in now.tolist():
            v = K.forward(int(o[i]), pool.value(x[i]),
                          pool.value(y[i]) if arity[i] >= 2 else 0.0,
                          pool.value(z[i]) if arity[i] == 3 else 0.0)
            sub[i] = pool.ref(float(v))
        keep[now] = may[now] = False
        folded += len(now)
        _substitute((x, y, z), sub)


def merge_common(o, x, y, z, keep):
    """Entries with the same op and operands (after earlier merges; either order for a
    commutative op) merge into the first.  Returns ``rep``: entry -> the entry it is now.

    Merging is sequential (``sin(x*y)`` twice repeats only once ``x*y`` has merged), so it
    is a loop over the entries; a sort first checks that some two entries are alike as
    recorded, without which nothing can merge (most tapes: then no loop at all)."""
    rep = np.arange(len(o))
    ents = np.nonzero(keep & (o < _ELEMENTWISE))[0]
    comm = _COMMUTATIVE[o]
    lo, hi = np.where(comm, np.minimum(x, y), x), np.where(comm, np.maximum(x, y), y)
    keys = np.stack((o, lo, hi, z))[:, ents]
    keys = keys[:, np.lexsort(keys)]
    if not np.any(np.all(keys[:, 1:] == keys[:, :-1], axis=0)):
        return rep        # no two entries alike as recorded: no merge can start anywhere
    R, X, Y, Z, O, comm = (v.tolist() for v in (rep, x, y, z, o, comm))
    first = {}
    for i in ents.tolist():
        xi, yi, zi = X[i], Y[i], Z[i]
        xi = R[xi] if xi >= 0 else xi
        yi = R[yi] if yi >= 0 else yi
        zi = R[zi] if zi >= 0 else zi
        if comm[i] and yi < xi:
            xi, yi = yi, xi
        R[i] = first.setdefault((O[i], xi, yi, zi), i)
    rep = np.array(R, dtype=np.int64)
    keep &= rep == np.arange(len(o))
    _substitute((x, y, z), rep)
    return rep


def drop_dead(x, y, z, keep, roots):
    """Keep only the entries ``roots`` (outputs, guards) depend on: a loop from the end,
    unless every entry is a root or used by another (then all are live)."""
    live = np.zeros(len(keep), dtype=bool)
    live[roots] = True
    used = live.copy()
    for r in (x, y, z):
        used[r[keep & (r >= 0)]] = True
    if np.all(used[keep]):
        return            # each entry is a root or used by a later one: all are live
    L, X, Y, Z = live.tolist(), x.tolist(), y.tolist(), z.tolist()
    for i in np.nonzero(keep)[0][::-1].tolist():
        if L[i]:
            for r in (X[i], Y[i], Z[i]):
                if r >= 0:
                    L[r] = True
    keep &= np.array(L, dtype=bool)


def _renumber(o, x, y, z, keep, pool, val0, b):
    """Write the kept entries back as tape arrays, in their recorded order; each ternary's
    ``arg`` entry goes immediately before it.  Unused constants are dropped (``consts[0]``
    stays, the -1 of unused operands).  Returns (arrays, entry -> new index)."""
    ents = np.nonzero(keep)[0]
    tern = _ARITY[o[ents]] == 3
    pos = np.cumsum(1 + tern) - 1
    new = np.full(len(o), -1, dtype=np.int64)
    new[ents] = pos
    n = int(pos[-1]) + 1 if len(pos) else 0
    xs, ys, zs = x[ents], y[ents], z[ents]
    used = np.unique(np.concatenate(([-1], xs[xs < 0], ys[ys < 0], zs[zs < 0])))[::-1]
    cnew = np.zeros(len(pool.values) + 1, dtype=np.int64)
    cnew[-used] = -np.arange(1, len(used) + 1)

    def ref(r):
        return np.where(r >= 0, new[np.maximum(r, 0)], cnew[-np.minimum(r, -1)])

    xs, ys, zs = ref(xs), ref(ys), ref(zs)
    out_op = np.empty(n, dtype=np.int8)
    out_a, out_b = np.empty(n, dtype=np.int32), np.empty(n, dtype=np.int32)
    out_val = np.empty(n, dtype=np.float64)
    out_op[pos], out_a[pos], out_val[pos] = o[ents], xs, val0[ents]
    out_b[pos] = np.where(tern, pos - 1, ys)
    arg = pos[tern] - 1
    out_op[arg], out_a[arg], out_b[arg] = K.ARG, ys[tern], zs[tern]
    out_val[arg] = val0[b[ents[tern]]]
    consts = np.array(pool.values, dtype=np.float64)[-used - 1]
    return {"op": out_op, "a": out_a, "b": out_b, "val0": out_val, "consts": consts}, new


def optimize(op, a, b, val0, consts, in_entries, in_pos, out, guard_entries):
    """Fold constants, merge common subexpressions and drop dead entries of a compiled
    tape's arrays.  Returns (arrays, stats): ``arrays`` has the keys ``op a b val0 consts
    in_entries in_pos out guard_entries`` with the same meaning and dtypes (guard entries
    stay in their order, one per guard; dead input leaves are dropped with their
    ``in_pos`` row).  ``stats``: ``entries`` (before), ``after_fold``, ``after_merge``,
    ``after_dead`` (entry counts, ``arg`` entries included), ``folded``, ``consts`` and
    ``consts_after``, ``inputs_dropped`` (input leaf entries that were dead)."""
    o, x, y, z, keep, pool = _resolve(op, a, b, consts)
    stats = {"entries": len(op), "consts": len(consts)}
    protect = np.zeros(len(o), dtype=bool)
    protect[out] = protect[guard_entries] = True
    stats["folded"] = fold_constants(o, x, y, z, keep, pool, protect)
    stats["after_fold"] = _count(o, keep)
    rep = merge_common(o, x, y, z, keep)
    out, guard_entries = rep[out], rep[guard_entries]
    stats["after_merge"] = _count(o, keep)
    drop_dead(x, y, z, keep, np.concatenate((out, guard_entries)))
    stats["after_dead"] = _count(o, keep)
    arrays, new = _renumber(o, x, y, z, keep, pool, val0, b)
    live = keep[in_entries]
    arrays.update(in_entries=new[in_entries[live]], in_pos=in_pos[live].astype(np.int64),
                  out=new[out], guard_entries=new[guard_entries])
    stats["consts_after"] = len(arrays["consts"])
    stats["inputs_dropped"] = int((~live).sum())
    return arrays, stats
