"""``create_graph=True``: the backward pass recorded onto the tape, so that gradients can be
differentiated again (``grad`` of ``grad``, to any order).

Instead of the Numba sweep, a Python walk over the tape computes each adjoint as a tensor
expression: the op table's partials (generated into ``_methods.GRAPH_PARTIALS``) are
evaluated with recorded tensor ops, so the gradient has a ``grad_fn`` of its own.  The
conditions inside a partial (``relu``'s ``x > 0``) only select a branch: they are evaluated
on plain values.  An op whose backward is NumPy code (a ``pyfunc`` entry) goes through its
recorded-op version (``array_ops.GRAPH_VJPS``: sums, means, matmul, linear, shapes,
indexing, cat/stack, broadcasting); one without raises ``NotImplementedError``.
"""
from __future__ import annotations

import math

import numpy as np

from .tape import CONST, LEAF, PYFUNC, PYOUT, Tape, _N, _NAMES
from .tensor import Tensor, _wrap


def _fn(name):
    def f(v):
        if isinstance(v, Tensor):
            from . import _methods as M
            return M.FUNCTIONS[name](v)
        return getattr(math, name)(v) if name != "sign" else float(np.sign(v))
    f.__name__ = f"_f_{name}"
    return f


_f_sqrt, _f_exp, _f_log, _f_sin, _f_cos, _f_sinh, _f_cosh, _f_sign = (
    _fn(n) for n in ("sqrt", "exp", "log", "sin", "cos", "sinh", "cosh", "sign"))


def _sel(cond, a, b):
    """``a`` where ``cond`` else ``b`` (``cond``: plain values, not recorded)."""
    if np.ndim(cond) == 0:
        return a if bool(cond) else b
    from . import _methods as M
    return M.FUNCTIONS["where"](_wrap(np.asarray(cond)), a, b)


_POS = {"x": 0, "y": 1, "z": 2}


def run_backward_graph(tensors, grads, inputs=None):
    """Gradients of ``tensors`` (seeded with ``grads``, floats or tensors) as recorded tensors.

    Returns ``(leaf_grads, captured)`` like ``engine.run_backward``: ``leaf_grads`` is a list
    of ``(leaf, gradient)``, ``captured`` the gradients of ``inputs`` (None where unreached).
    """
    from ._methods import GRAPH_CONDITIONS, GRAPH_PARTIALS
    tapes = {id(t._t): t._t for t in tensors}
    if len(tapes) != 1 or not all(T.__class__ is Tape for T in tapes.values()):
        raise NotImplementedError("create_graph=True needs all outputs recorded on one tape")
    (T,) = tapes.values()
    adj = {}
    for t, g in zip(tensors, grads):
        adj[t._i] = adj[t._i] + g if t._i in adj else g
    wanted = {}
    for pos, x in enumerate(inputs or ()):
        if x._t is T and T._leaves.get(x._i) is not x:
            wanted.setdefault(x._i, []).append(pos)
    captured = [None] * len(inputs or ())
    leaf_grads = []
    views = {}

    def tensor_of(r):
        if r < 0:
            return T._c[-r - 1]
        code = T._entry(r)[0]
        if code == LEAF:
            return T._leaves[r]
        if code == CONST:
            return _wrap(T._arr[r])
        v = views.get(r)
        if v is None:       # a tensor standing for entry r: ops on it refer back to it
            v = views[r] = Tensor()
            v._v, v._t, v._i = T._value(r), T, r
        return v

    outs = {}      # adjoints of pyfunc outputs, waiting for their head entry
    for i in range(max(adj), -1, -1):
        g = adj.pop(i, None)
        if g is None and i not in outs:
            continue
        for pos in wanted.get(i, ()):
            captured[pos] = g
        code = T._entry(i)[0]
        if code == LEAF:
            leaf_grads.append((T._leaves[i], g))
            continue
        if code == CONST:      # an array constant: its gradient goes nowhere
            continue
        if code == PYOUT:
            head = T._entry(i)[1]
            outs.setdefault(head, {})[i - head - 1] = g
            continue
        if code == PYFUNC:
            py, gs = T._py[i], outs.pop(i, {})
            if py.graph is None or py.nout != 1:
                raise NotImplementedError(
                    f"create_graph=True through {py.name} (tape entry {i}) is not supported "
                    "yet: its backward is NumPy code with no recorded-op version")
            for r, c in zip(py.inputs, py.graph([gs[0]])):
                if r >= 0 and c is not None:
                    adj[r] = adj[r] + c if r in adj else c
            continue
        if code >= _N:
            raise NotImplementedError(
                f"create_graph=True through {_NAMES[code]} (tape entry {i}) is not supported yet")
        refs = T._inputs(i)
        ts = [tensor_of(r) for r in refs] + [None] * (3 - len(refs))
        vs = [np.asarray(T._value(r)) if r >= 0 and r in T._arr else
              (T._value(r) if r >= 0 else T._c[-r - 1]) for r in refs] + [None] * (3 - len(refs))
        need = [r >= 0 for r in refs] + [False] * (3 - len(refs))
        parts = GRAPH_PARTIALS[code](ts[0], ts[1], ts[2], tensor_of(i),
                                     vs[0], vs[1], vs[2], T._value(i), *need)
        for r, names in zip(refs, GRAPH_CONDITIONS[code]):
            if r >= 0 and any((refs[_POS[n]] if n != "out" else i) >= 0 for n in names
                              if n == "out" or _POS[n] < len(refs)):
                T._reads.append((i, f"a create_graph=True backward through {_NAMES[code]}"
                                    " (its derivative branches on a recorded value)"))
                break
        for r, p in zip(refs, parts):
            if r < 0 or p is None:
                continue
            c = g * p
            if r not in T._arr and isinstance(c, Tensor) and c.ndim:
                c = c.sum()      # a 0-d operand broadcast over an array entry
            adj[r] = adj[r] + c if r in adj else c
    return leaf_grads, captured
