"""Sparse Hessians of a compiled tape: the sparsity pattern, a colouring, compressed HVPs.

The pattern (Walther's nonlinear interaction domains): each entry depends on a set D(i) of
inputs; an entry whose op has a non-zero second partial in operands (j, k)
(``kernels.HESSIAN_PAIRS``, derived from the op table) adds D(j) x D(k) to the pattern.
Only the entries that feed such an operand need their D (a reverse pass marks them), so a
long linear accumulation (a running sum) costs nothing.

Columns of the Hessian that share no row can share a seed vector: a greedy distance-2
colouring of the pattern's graph gives the seed matrix S (one column per colour), one
forward-over-reverse sweep gives H S, and each non-zero H[i, j] is read off directly as
(H S)[i, colour(j)].  Rosenbrock's tridiagonal Hessian needs 3 colours at any n.
"""
from __future__ import annotations

import numpy as np

from ..core import kernels as K

# above this many inputs in one dependency set, the Hessian is treated as dense
MAX_SET = 256


def _operands(op, a, b, i):
    o = op[i]
    if K.ARITY[o] == 3:
        j = b[i]
        return (int(a[i]), int(a[j]), int(b[j]))
    if K.ARITY[o] == 2:
        return (int(a[i]), int(b[i]))
    return (int(a[i]),)


def pattern(op, a, b, in_entries, in_pos, n_inputs):
    """Lower-and-upper non-zero pattern of the Hessian of the tape's output as (rows, cols)
    index arrays, or None when it is (close to) dense or too costly to find."""
    n = len(op)
    pairs = K.HESSIAN_PAIRS
    ne = K.N_ELEMENTWISE
    need = np.zeros(n, dtype=bool)
    for i in range(n - 1, -1, -1):
        o = op[i]
        if o >= ne:
            continue
        ops = None
        if pairs[o] or need[i]:
            ops = _operands(op, a, b, i)
        if pairs[o]:
            for j, k in pairs[o]:
                for r in (ops[j], ops[k]):
                    if r >= 0:
                        need[r] = True
        if need[i]:
            for r in ops:
                if r >= 0:
                    need[r] = True
    D = {}
    for e, p in zip(in_entries.tolist(), in_pos.tolist()):
        D[e] = D.get(e, frozenset()) | {p}
    empty = frozenset()
    nz = set()
    for i in range(n):
        o = op[i]
        if o >= ne or not (need[i] or pairs[o]):
            continue
        ops = _operands(op, a, b, i)
        sets = [D.get(r, empty) if r >= 0 else empty for r in ops]
        for j, k in pairs[o]:
            for p in sets[j]:
                for q in sets[k]:
                    nz.add((p, q))
                    nz.add((q, p))
        if need[i]:
            d = sets[0].union(*sets[1:])
            if len(d) > MAX_SET and len(d) > n_inputs // 4:
                return None
            D[i] = d
        if len(nz) > n_inputs * n_inputs // 4:
            return None
    if not nz:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    rc = np.array(sorted(nz), dtype=np.int64)
    return rc[:, 0], rc[:, 1]


def colour(rows, cols, n):
    """Greedy distance-2 colouring of the pattern's graph: columns j, k get different
    colours whenever some row has non-zeros in both (or H[j, k] != 0)."""
    adj = [[] for _ in range(n)]
    for r, c in zip(rows.tolist(), cols.tolist()):
        adj[r].append(c)
    colours = np.full(n, -1, dtype=np.int64)
    for j in range(n):
        used = set()
        for r in adj[j]:             # rows where column j is non-zero (symmetric pattern)
            used.add(colours[r])
            for k in adj[r]:
                used.add(colours[k])
        c = 0
        while c in used:
            c += 1
        colours[j] = c
    return colours
