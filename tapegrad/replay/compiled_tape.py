"""Compiled replay: a recorded tape run again, in Numba, at new input values.

``tape.compile(inputs, outputs)`` returns a :class:`CompiledTape`.  Calling it re-evaluates
every entry from new inputs in one Numba loop (``kernels.replay_point``) and the reverse sweep
runs on those values; no Python runs per op.  A batch of points (one more leading
dimension) replays with the batch innermost (``replay_batch``/``reverse_batch``), so the
dispatch on each opcode is paid once for the whole batch.

What replays: scalar entries -- 0-d float64 leaves as inputs, the elementwise ops of the
op table, Python constants (which stay constants).  A tape recorded with array tensors is
first run again on elements (``elementwise_rewrite.scalarize_tape``), so every array op
becomes scalar entries; custom ``Function``s cannot be run again and make ``compile``
refuse.

Branches: a comparison of recorded values (``x > 0``) is itself recorded, and a Python
branch on it (``if x > 0:``, ``max(a, b)``) records a guard.  Replay re-evaluates every
guard and raises :class:`RetraceRequired` naming the source line when one goes the other way,
never returning a silently wrong value; ``tg.where(x > 0, a, b)`` replays both ways.  A
recorded value read into Python in any other way (``float(t)``, ``t.item()``) makes
``compile`` refuse the tape, naming the line.
"""
from __future__ import annotations

import json
import os
import stat
import threading
import warnings
import zipfile
from typing import Sequence, Union

import numpy as np

from ..core import kernels as K
from ..core.numba_jit import jit
from ..core import optable
from ..core.tape import ARG, LEAF, N_ELEMENTWISE, OP_NAMES, Tape
from ..core.tensor import Tensor, wrap
from .elementwise_rewrite import Elements, array_op, elements, scalarize_tape
from .sparsity import colour, pattern
from .tape_passes import optimize


@jit
def _outputs_read(op, a, b, out):
    """Per entry: 1 if an output depends on it through the tape's operand references."""
    n = op.shape[0]
    live = np.zeros(n, np.uint8)
    for o in out:
        live[o] = 1
    for i in range(n - 1, -1, -1):
        if live[i] != 0 and (op[i] < N_ELEMENTWISE or op[i] == ARG):
            if a[i] >= 0:
                live[a[i]] = 1
            if b[i] >= 0:
                live[b[i]] = 1
    return live


class RetraceRequired(RuntimeError):
    """The recording depends on Python control flow over recorded values: replaying it at
    other inputs could take other branches, so it must be recorded again there."""


class ReadsRecordedValues(RetraceRequired):
    """The recording read a recorded value into Python (``float(x)``): it is right at the
    point it was recorded at, and replays nowhere else."""


class CompiledTape:
    """A scalar program recorded on a tape, replayed in Numba at new inputs."""

    out_shape = None   # for an array result: the outputs are its elements (C order)
    in_shapes = None   # for array inputs: their shapes (the input vector is their elements)

    def __init__(self, tape: Tape, inputs: Sequence[Tensor], outputs: Sequence[Tensor],
                 optimize: bool = True, at_recorded_point: bool = False):
        """``at_recorded_point``: the tape will only be evaluated at the point it was
        recorded at (``tg.compile``'s fallback), where values read into Python are right."""
        outputs = list(outputs)
        inputs = list(inputs)
        if tape._released:   # (a replay would run on stubs of the values the backward freed)
            raise RuntimeError(
                "compile(): a backward without retain_graph=True freed this tape's values; "
                "record it again, or call backward(retain_graph=True) before compiling")
        for t in outputs:
            if any(t is x for x in inputs) and getattr(t, "_tape", None) is not tape \
                    and t.requires_grad and t.is_leaf:
                tape._ref(t)   # an input returned as it is: its leaf entry is the output
        for t in outputs:
            if not isinstance(t, Tensor) or t._tape is not tape:
                raise ValueError("compile(): every output must be a tensor recorded on this tape")
        for x in inputs:
            if not isinstance(x, Tensor) or x._tape is None or \
                    (x._tape.__class__ is Tape and x._tape._leaves.get(x._entry) is not x):
                raise ValueError("compile(): every input must be a leaf tensor that requires "
                                 "grad (an input the recording never used gets a zero "
                                 "gradient)")
            if x.dtype is not None and str(x.dtype) != "tapegrad.float64":
                raise NotImplementedError("compile(): only float64 inputs replay")
        if not at_recorded_point:
            self._check_reads(tape)
            self._check_changes(tape, outputs)
        op, a, b, val = tape._arrays()
        # every guard counts, also one recorded after the outputs: ``return y if y > z else
        # z`` compares after computing both, and that comparison chose the output
        end = max([t._entry for t in outputs] + [g[0] for g in tape._guards]) + 1
        codes = op[:end]
        structural = np.any((codes >= N_ELEMENTWISE) & (codes != LEAF) & (codes != ARG))
        if structural or any(k < end for k in tape._arr) or \
                any(t._value.__class__ is not float for t in inputs + outputs):
            # array entries: run the tape again on elements, into a tape of scalar entries
            self.in_shapes = [tuple(x.shape) for x in inputs]
            tape, inputs, outputs, self.out_shape = scalarize_tape(tape, inputs, outputs)
            if not at_recorded_point:
                self._check_reads(tape)   # (a value the run on elements could not follow)
            op, a, b, val = tape._arrays()
            end = max([t._entry for t in outputs] + [g[0] for g in tape._guards]) + 1
        self._finish(tape, inputs, outputs, op, a, b, val, end, optimize)

    @staticmethod
    def _check_changes(tape, outputs):
        last = max(t._entry for t in outputs)
        for at, i, where in tape._changes:
            if at <= last:   # (an output recorded after the change may read it)
                raise ReadsRecordedValues(
                    f"the recording changed entry {i} ({OP_NAMES[tape._entry(i)[0]]}) in "
                    f"place where nothing records (no_grad) at {where}, before an output: a "
                    "replay would not repeat the change, so this tape cannot be replayed. "
                    "Change it where grad mode is on (the change is recorded), or a copy.")

    @staticmethod
    def _check_reads(tape):
        if tape._reads:   # any read: it may have chosen an output, even after computing it
            i, where = tape._reads[0]
            what = f"entry {i} ({OP_NAMES[tape._entry(i)[0]]})" if i >= 0 else "a leaf"
            raise ReadsRecordedValues(
                f"the recording read the value of {what} into Python at {where} (float(), "
                ".item(), int(), ...): code that depends on such a value cannot be checked at "
                "replay, so this tape cannot be replayed. Compare tensors instead (`if x > 0:` "
                "is recorded and checked), or use tg.where.")

    def _finish(self, tape, inputs, outputs, op, a, b, val, end, optimize):
        guards = list(tape._guards)
        if any(np.ndim(v) for _, v, _ in guards):
            raise NotImplementedError("compile(): a branch on an array comparison; this "
                                      "version replays scalar programs")
        seen = set()     # one guard per comparison entry, even when it was read twice
        self.guards = guards = [g for g in guards if not (g[0] in seen or seen.add(g[0]))]
        self.guard_entries = np.array([g[0] for g in guards], dtype=np.int64)
        self.guard_values = np.array([float(g[1]) for g in guards])
        self.op, self.a, self.b = op[:end].copy(), a[:end].copy(), b[:end].copy()
        self.val0 = val[:end].copy()
        self.consts = np.array(tape._c, dtype=np.float64)
        # every leaf entry (a leaf can be registered more than once) -> its input position
        where = {id(x): k for k, x in enumerate(inputs)}
        pairs = [(i, where[id(t)]) for i, t in tape._leaves.items() if i < end and id(t) in where]
        self.in_entries = np.array([p[0] for p in pairs], dtype=np.int64)
        self.in_pos = np.array([p[1] for p in pairs], dtype=np.int64)
        self.n_inputs = len(inputs)
        self.out = np.array([t._entry for t in outputs], dtype=np.int64)
        self._inputs_changed()
        self.stats = None
        if optimize:
            self._optimize()

    def _optimize(self):
        """Constant folding, common subexpressions, dead entries (``tapegrad.optimize``);
        ``self.stats`` keeps the entry counts after each pass."""
        arrays, self.stats = optimize(self.op, self.a, self.b, self.val0, self.consts,
                                      self.in_entries, self.in_pos, self.out,
                                      self.guard_entries)
        for k, v in arrays.items():
            setattr(self, k, v)
        self.guards = [(int(i), v, w) for i, (_, v, w) in zip(self.guard_entries, self.guards)]
        self._inputs_changed()

    def __len__(self):
        return len(self.op)

    def _inputs_changed(self):
        """After ``in_pos`` is set: does each input have one leaf entry?  (Else the
        adjoints of its entries are added up.)"""
        self._one_entry_each = len(np.unique(self.in_pos)) == len(self.in_pos)
        # inputs no output depends on: their gradient is 0.0, not the -0.0 the adjoints
        # start at (which stays where nothing was added)
        read = _outputs_read(self.op, self.a, self.b, self.out).astype(bool)
        read_pos = np.unique(self.in_pos[read[self.in_entries]])
        self._unread_inputs = np.setdiff1d(np.arange(self.n_inputs), read_pos)

    def split(self, v):
        """A vector over the inputs' elements (an input point, a gradient) as one array per
        input, in the inputs' shapes (the last axis of a batch is split)."""
        v = np.asarray(v)
        shapes = self.in_shapes or [()] * self.n_inputs
        cuts = np.cumsum([int(np.prod(s, dtype=np.int64)) for s in shapes])[:-1]
        return [p.reshape(v.shape[:-1] + s) for p, s in zip(np.split(v, cuts, axis=-1), shapes)]

    def __repr__(self):
        kind = "a scalar function" if len(self.out) == 1 else f"{len(self.out)} outputs"
        return (f"<CompiledTape: {self.n_inputs} inputs -> {kind}, {len(self.op)} entries, "
                f"{len(self.guards)} guards; replays in Numba: f(x), f.value_and_grad(x), "
                f"f.grad(X) for a batch X (B, {self.n_inputs}), jvp, vjp, jacobian, hvp, "
                f"hessian, sparse_hessian, save(path)>")

    def _x(self, x):
        if self.in_shapes is not None and isinstance(x, (list, tuple)) and \
                len(x) == len(self.in_shapes) and \
                all(np.shape(p) == s for p, s in zip(x, self.in_shapes)):
            x = np.concatenate([np.asarray(p, dtype=np.float64).reshape(-1) for p in x])
        x = np.asarray(x, dtype=np.float64)
        if x.ndim not in (1, 2) or x.shape[-1] != self.n_inputs:
            raise ValueError(f"expected a point of shape ({self.n_inputs},) or a batch of shape "
                             f"(B, {self.n_inputs}), got {x.shape}")
        return x

    def _layout(self, x, values=None):
        """One point's rows: the recorded values with the inputs at ``x`` (or, given
        ``values``, zeros with ``values`` on the inputs), then the constants."""
        if values is None:
            V = np.concatenate((self.val0, self.consts))
            V[self.in_entries] = x[self.in_pos]
        else:
            V = np.zeros(len(self.val0) + len(self.consts))
            V[self.in_entries] = values[self.in_pos]
        return V

    def _forward(self, x):
        """Values of all entries at one point, then the constants (``replay_point``'s layout)."""
        V = self._layout(x)
        K.replay_point(self.op, self.a, self.b, V, len(self.val0))
        self._check_point_guards(V)
        return V

    def _check_point_guards(self, V):
        self._check_guards(V[self.guard_entries][:, None] if len(self.guards) else None)

    def _check_guards(self, got, first_point=0):
        """Every branch the recording took must go the same way here (``got``: the guard
        entries' values, one column per point); else RetraceRequired."""
        if got is None:
            return
        bad = np.nonzero(got != self.guard_values[:, None])
        if len(bad[0]):
            g, k = int(bad[0][0]), int(bad[1][0])
            i, v, where = self.guards[g]
            raise RetraceRequired(
                f"the branch at {where} goes the other way at "
                f"{'this point' if got.shape[1] == 1 else f'point {first_point + k}'}: the "
                f"comparison (tape entry {i}) was {bool(v)} when recorded; record again there")

    def _shaped(self, out, lead=()):
        """Output values (last axis: the outputs) as the caller expects them: a float for
        one output, the result's shape for ``tg.compile`` of an array function."""
        if self.out_shape is not None:
            return out.reshape(lead + self.out_shape)
        if len(self.out) == 1:
            return float(out[0]) if not lead else out[..., 0]
        return out

    def _scalar(self, what):
        if self.out_shape is not None and int(np.prod(self.out_shape)) != 1:
            raise ValueError(f"{what}() needs a scalar function; this one returns shape "
                             f"{self.out_shape} (use jacobian, jvp or vjp)")

    def __call__(self, x) -> Union[float, np.ndarray]:
        """The outputs at ``x`` (shape (n,), or (B, n) for a batch of points)."""
        x = self._x(x)
        if x.ndim == 2:
            return self._shaped(self._batch_values(x).T, (x.shape[0],))
        return self._shaped(self._forward(x)[self.out].copy())

    def value_and_grad(self, x):
        """The (first) output and its gradient with respect to the inputs, at ``x``
        ((n,) -> (float, (n,)); (B, n) -> ((B,), (B, n)))."""
        self._scalar("value_and_grad")
        x = self._x(x)
        if x.ndim == 2:
            return self._value_and_grad_batch(x)
        V = self._forward(x)
        ADJ = np.full_like(V, -0.0)   # -0.0 + g is g for every g, -0.0 too (PyTorch's signs)
        o = int(self.out[0])
        ADJ[o] = 1.0
        K.reverse_point(self.op, self.a, self.b, V, ADJ, o, len(self.val0))
        return float(V[o]), self._on_inputs(ADJ[:, None])[:, 0]

    def grad(self, x) -> np.ndarray:
        """The gradient of the (first) output at ``x`` ((n,) or a batch (B, n))."""
        return self.value_and_grad(x)[1]

    # -- forward mode, several seeds, second order ------------------------------------
    def _chunk(self, k):
        """Directions per sweep: T and D of shape (rows, chunk) stay within ~32 MB each."""
        rows = len(self.val0) + len(self.consts)
        return int(max(1, min(k, (32 << 20) // (8 * rows))))

    def _tangents(self, V, v):
        """Tangents of every entry along the columns of ``v`` ((n_inputs, K))."""
        T = np.zeros((len(V), v.shape[1]))
        T[self.in_entries] = v[self.in_pos]
        K.tangent_point(self.op, self.a, self.b, V, T, len(self.val0))
        return T

    def _on_inputs(self, R, G=None):
        """Rows of the leaf entries of ``R`` summed per input -> (n_inputs, K) (into ``G``)."""
        if G is None:
            G = np.full((self.n_inputs, R.shape[1]), -0.0)
        if self._one_entry_each:
            G[self.in_pos] = R[self.in_entries]
        else:   # a leaf registered more than once: its entries' adjoints add up
            np.add.at(G, self.in_pos, R[self.in_entries])
        G[self._unread_inputs] = 0.0
        return G

    def _vec(self, v, n, what):
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (n,):
            raise ValueError(f"{what}: expected a vector of shape ({n},), got {v.shape}")
        return v

    def _single(self, x, what):
        x = self._x(x)
        if x.ndim != 1:
            raise ValueError(f"{what}() takes one point of shape ({self.n_inputs},), "
                             f"got {x.shape}")
        return x

    def jvp(self, x, v):
        """Forward mode: J(x) @ v, the directional derivative of the outputs along ``v``
        (a float for a single output, else shape (m,))."""
        x = self._single(x, "jvp")
        T = self._tangents(self._forward(x), self._vec(v, self.n_inputs, "jvp")[:, None])
        return self._shaped(T[self.out, 0])

    def vjp(self, x, w):
        """Reverse mode: w @ J(x) for a weight per output (a number for a single output)."""
        x = self._single(x, "vjp")
        w = np.asarray(w, dtype=np.float64)
        if self.out_shape is not None and w.shape != self.out_shape:
            raise ValueError(f"vjp: expected weights of the result's shape {self.out_shape}, "
                             f"got {w.shape}")
        w = self._vec(w.reshape(-1), len(self.out), "vjp")
        V = self._forward(x)
        A = np.full((len(V), 1), -0.0)
        np.add.at(A[:, 0], self.out, w)
        K.reverse_multi(self.op, self.a, self.b, V, A, int(self.out.max()), len(self.val0))
        return self._on_inputs(A)[:, 0]

    def jacobian(self, x):
        """d outputs / d inputs at ``x``: shape (n,) for one output, else (m, n).  One
        sweep with a seed per output (reverse) or a direction per input (forward),
        whichever needs fewer."""
        x = self._single(x, "jacobian")
        V = self._forward(x)
        m, n, stop = len(self.out), self.n_inputs, len(self.val0)
        J = np.empty((m, n))
        if m <= n:
            for s in range(0, m, self._chunk(m)):
                outs = self.out[s:s + self._chunk(m)]
                A = np.full((len(V), len(outs)), -0.0)
                A[outs, np.arange(len(outs))] = 1.0
                K.reverse_multi(self.op, self.a, self.b, V, A, int(outs.max()), stop)
                J[s:s + len(outs)] = self._on_inputs(A).T
        else:
            for s in range(0, n, self._chunk(n)):
                e = np.eye(n)[:, s:s + self._chunk(n)]
                J[:, s:s + e.shape[1]] = self._tangents(V, e)[self.out]
        if self.out_shape is not None:
            return J.reshape(self.out_shape + (n,))
        return J[0] if m == 1 else J

    def _hvps(self, x, vs):
        """H(x) @ vs for the first output, ``vs`` of shape (n_inputs, K): forward over
        reverse, one sweep pair for up to ``_chunk`` directions at once."""
        V = self._forward(x)
        stop, o = len(self.val0), int(self.out[0])
        A = np.full(len(V), -0.0)
        A[o] = 1.0
        K.reverse_point(self.op, self.a, self.b, V, A, o, stop)
        H = np.empty_like(vs)
        step = self._chunk(vs.shape[1])
        for s in range(0, vs.shape[1], step):
            T = self._tangents(V, vs[:, s:s + step])
            D = np.zeros_like(T)
            K.hvp_point(self.op, self.a, self.b, V, A, T, D, o, stop)
            H[:, s:s + step] = self._on_inputs(D)
        return H

    def hvp(self, x, v):
        """The Hessian of the (first) output at ``x`` times ``v``: forward over reverse,
        fused (values with tangents in one pass, adjoints with their tangents in one)."""
        self._scalar("hvp")
        x = self._single(x, "hvp")
        v = self._vec(v, self.n_inputs, "hvp")
        n, o = len(self.val0), int(self.out[0])
        V, T = self._layout(x), self._layout(None, v)
        K.forward_tangent(self.op, self.a, self.b, V, T, n)
        self._check_point_guards(V)
        A, D = np.full(len(V), -0.0), np.full(len(V), -0.0)
        A[o] = 1.0
        K.reverse_hvp(self.op, self.a, self.b, V, T, A, D, o, n)
        return self._on_inputs(D[:, None])[:, 0]

    def hessian(self, x):
        """The (n, n) Hessian of the (first) output at ``x``.  When its sparsity pattern
        allows, columns that share no row share a sweep (a coloured, compressed Hessian:
        3 sweeps for a tridiagonal one at any n); otherwise all n Hessian-vector products,
        swept together (directions innermost)."""
        self._scalar("hessian")
        x = self._single(x, "hessian")
        n = self.n_inputs
        if n * n > DENSE_HESSIAN_LIMIT:
            raise ValueError(
                f"hessian(): the dense ({n}, {n}) matrix would take {8 * n * n / 2**30:.1f} GiB; "
                "use sparse_hessian(x) for its non-zeros (rows, cols, values), or hvp(x, v)")
        sp = self._sparse()
        if sp is None:
            return self._hvps(x, np.eye(self.n_inputs))
        rows, cols, vals = self._compressed(x, sp)
        H = np.zeros((self.n_inputs, self.n_inputs))
        H[rows, cols] = vals
        return H

    def sparse_hessian(self, x):
        """The Hessian's non-zeros as ``(rows, cols, values)`` (both triangles; e.g.
        ``scipy.sparse.coo_matrix((values, (rows, cols)))``), found from the tape's
        structure and computed with one sweep per colour."""
        self._scalar("sparse_hessian")
        x = self._single(x, "sparse_hessian")
        sp = self._sparse(force=True)
        if sp is None:      # dense: every entry of the full Hessian
            H = self._hvps(x, np.eye(self.n_inputs))
            rows, cols = np.nonzero(np.ones_like(H, dtype=bool))
            return rows, cols, H[rows, cols]
        return self._compressed(x, sp)

    def _sparse(self, force=False):
        """(rows, cols, colours) of the Hessian's pattern, found once; None when dense or
        when colouring would save little (unless ``force``)."""
        sp = getattr(self, "_sp", False)
        if sp is False:
            pat = pattern(self.op, self.a, self.b, self.in_entries, self.in_pos, self.n_inputs)
            sp = None if pat is None else pat + (colour(pat[0], pat[1], self.n_inputs),)
            self._sp = sp
        if sp is None or force:
            return sp
        k = int(sp[2].max()) + 1 if self.n_inputs else 0
        return sp if k * 2 <= self.n_inputs else None

    def _compressed(self, x, sp):
        rows, cols, colours = sp
        k = int(colours.max()) + 1 if len(colours) else 1
        S = np.zeros((self.n_inputs, k))
        S[np.arange(self.n_inputs), colours] = 1.0
        B = self._hvps(x, S)
        return rows, cols, B[rows, colours[cols]]

    # -- files ------------------------------------------------------------------------
    _ARRAYS = ("op", "a", "b", "val0", "consts", "in_entries", "in_pos", "out",
               "guard_entries", "guard_values")

    def save(self, path):
        """Write this compiled tape to ``path`` (a NumPy ``.npz``: arrays plus JSON, no pickle)."""
        meta = {"format": "tapegrad-compiled-tape", "version": 2, "ops": list(OP_NAMES),
                "n_inputs": self.n_inputs,
                "guards": [where for _, _, where in self.guards],
                "out_shape": None if self.out_shape is None else list(self.out_shape)}
        np.savez(path, meta=np.array(json.dumps(meta)),
                 **{k: getattr(self, k) for k in self._ARRAYS})

    @classmethod
    def load(cls, path):
        """Read a file written by ``save``.  Every index is checked first, so a corrupted or
        hostile file raises ``ValueError`` instead of reaching a Numba kernel."""
        data, meta = _read_archive(path)
        self = cls.__new__(cls)
        _validate(data, meta)
        for k in cls._ARRAYS:
            setattr(self, k, data[k])
        self.n_inputs = int(meta["n_inputs"])
        shape = meta.get("out_shape")
        if shape is not None:
            if not (isinstance(shape, list) and all(isinstance(k, int) and k >= 0 for k in shape)
                    and int(np.prod(shape)) == len(self.out)):
                raise ValueError("corrupted tapegrad compiled tape: out_shape")
            self.out_shape = tuple(shape)
        self.guards = [(int(i), bool(v), w) for i, v, w in
                       zip(self.guard_entries, self.guard_values, meta["guards"])]
        self._inputs_changed()
        self.stats = None
        return self

    def _block(self, nb):
        """Points per block.  Measured on a 2-core EPYC (1 MiB L2): 64-128 points per block
        run at ~2 ns/entry/point, 256-512 five times slower (rows of 2-4 KB alias in the
        cache: each op reads two rows and writes a third); big tapes, which never fit,
        prefer the shorter rows."""
        rows = len(self.val0) + len(self.consts)
        return int(max(1, min(nb, 128 if rows <= 20_000 else 64)))   # (an empty batch: 1)

    def _fixed_rows(self):
        """Rows of V a batch must fill besides the inputs and constants: leaves that are
        not inputs (every other entry is recomputed by the forward replay)."""
        fixed = getattr(self, "_fixed", None)
        if fixed is None:
            leaves = np.nonzero(self.op == LEAF)[0]
            fixed = self._fixed = np.setdiff1d(leaves, self.in_entries)
        return fixed

    def _forward_batch(self, X, V=None, first_point=0, check_guards=True):
        n, nb = len(self.val0), X.shape[0]
        if V is None:
            V = np.empty((n + len(self.consts), nb))
        # rows 0..n-1: the entries; rows n..: the constants (so operands need no branch)
        V[n:] = self.consts[:, None]
        fixed = self._fixed_rows()
        if len(fixed):
            V[fixed] = self.val0[fixed, None]
        V[self.in_entries] = X[:, self.in_pos].T
        K.replay_batch(self.op, self.a, self.b, V, n)
        if len(self.guards) and check_guards:
            self._check_guards(V[self.guard_entries], first_point)
        return V

    def batch_outputs(self, X):
        """The outputs at every point of the batch ``X`` ((B, n) -> (B, m)) and a (B,) bool
        array: True where every recorded branch goes the recorded way.  The other points'
        rows are not valid (they need a recording of their own); instead of raising
        ``RetraceRequired`` at the first of them, this says which they are, so a caller can
        record once per branch pattern (``tg.func.vmap``)."""
        X = self._batch(X, "batch_outputs")
        out, ok = np.empty((X.shape[0], len(self.out))), np.ones(X.shape[0], dtype=bool)

        def work(s, e, bufs):
            V = self._forward_batch(X[s:e], bufs[0], check_guards=False)
            out[s:e] = V[self.out].T     # transposed a block at a time, while in cache
            self._guards_taken(V, ok[s:e])

        self._blocks(X.shape[0], work, 1)
        return out, ok

    def batch_jacobian(self, X):
        """The outputs and their Jacobian at every point of the batch ``X``: (B, m) values,
        (B, m, n) Jacobians, and the (B,) mask of points that took every recorded branch
        (as ``batch_outputs``).  Per block of points: one forward replay, then one reverse
        sweep per output, the batch innermost."""
        X = self._batch(X, "batch_jacobian")
        nb, n = X.shape[0], len(self.val0)
        values, ok = np.empty((nb, len(self.out))), np.ones(nb, dtype=bool)
        J = np.empty((nb, len(self.out), self.n_inputs))

        def work(s, e, bufs):
            V, A = bufs
            self._forward_batch(X[s:e], V, check_guards=False)
            values[s:e] = V[self.out].T
            self._guards_taken(V, ok[s:e])
            for k, o in enumerate(self.out):
                A.fill(-0.0)
                A[o] = 1.0
                K.reverse_batch(self.op, self.a, self.b, V, A, int(o), n)
                J[s:e, k] = self._on_inputs(A).T

        self._blocks(nb, work, 2)
        return values, J, ok

    def _batch(self, X, what):
        X = self._x(X)
        if X.ndim != 2:
            raise ValueError(f"{what}() takes a batch of shape (B, {self.n_inputs}), got "
                             f"{X.shape}")
        return X

    def _guards_taken(self, V, ok):
        """Per point of a block: does every guard go the recorded way?  (into ``ok``)"""
        if len(self.guards):
            ok[:] = np.all(V[self.guard_entries] == self.guard_values[:, None], axis=0)

    def _blocks(self, nb, work, nbuf):
        """Run ``work(start, stop, bufs)`` over blocks of points.  With several cores the
        blocks are dealt out to threads (the kernels release the GIL: plain Python threads
        run them in parallel -- no Numba threading layer, so this is safe with fork and with
        callers' own threads; ``TAPEGRAD_NUM_THREADS`` sets the count).  Each thread reuses
        ``nbuf`` (rows, block) arrays: a fresh multi-MB array per block costs page faults
        worth as much as the kernels."""
        bs = self._block(nb)
        rows = len(self.val0) + len(self.consts)
        spans = [(s, min(s + bs, nb)) for s in range(0, nb, bs)]

        stop = threading.Event()     # set when the caller is interrupted or a block fails

        def share(spans):
            full = [np.empty((rows, bs)) for _ in range(nbuf)]
            for s, e in spans:
                if stop.is_set():
                    return
                work(s, e, full if e - s == bs else [np.empty((rows, e - s)) for _ in full])

        pool = _pool() if len(spans) > 1 else None
        if pool is None:
            return share(spans)
        k = min(_threads(), len(spans))
        futures = [pool.submit(share, spans[j::k]) for j in range(k)]
        try:
            for f in futures:
                f.result()      # re-raises a block's RetraceRequired
        except BaseException:   # Ctrl-C or a failed block: the other workers stop too
            stop.set()
            for f in futures:
                f.cancel()
            raise

    def _batch_values(self, X):
        out = np.empty((len(self.out), X.shape[0]))

        def work(s, e, bufs):
            out[:, s:e] = self._forward_batch(X[s:e], bufs[0], first_point=s)[self.out]

        self._blocks(X.shape[0], work, 1)
        return out

    def _value_and_grad_batch(self, X):
        """Blocks of points: forward and reverse per block, so memory stays bounded and hot."""
        nb = X.shape[0]
        n, o = len(self.val0), int(self.out[0])
        values, G = np.empty(nb), np.full((self.n_inputs, nb), -0.0)

        def work(s, e, bufs):
            V, A = bufs
            self._forward_batch(X[s:e], V, first_point=s)
            A.fill(-0.0)
            A[o] = 1.0
            K.reverse_batch(self.op, self.a, self.b, V, A, o, n)
            values[s:e] = V[o]
            self._on_inputs(A, G[:, s:e])

        self._blocks(nb, work, 2)
        return values, G.T.copy()


_POOL = [None, None]   # ((pid, threads), executor): not reused after a fork or a new count


def _threads():
    env = os.environ.get("TAPEGRAD_NUM_THREADS")
    if env:
        return max(1, int(env))
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        return os.cpu_count() or 1


def _pool():
    n = _threads()
    if n <= 1:
        return None
    if _POOL[0] != (os.getpid(), n):
        from concurrent.futures import ThreadPoolExecutor
        _POOL[:] = [(os.getpid(), n), ThreadPoolExecutor(n, thread_name_prefix="tapegrad")]
    return _POOL[1]


def compile_tape(tape, inputs, outputs, optimize=True):
    """``tape.compile(inputs, outputs)``: see :class:`CompiledTape`."""
    single = isinstance(outputs, Tensor)
    return CompiledTape(tape, [inputs] if isinstance(inputs, Tensor) else inputs,
                        [outputs] if single else outputs, optimize)


_DTYPES = {"op": np.int8, "a": np.int32, "b": np.int32, "val0": np.float64,
           "consts": np.float64, "in_entries": np.int64, "in_pos": np.int64, "out": np.int64,
           "guard_entries": np.int64, "guard_values": np.float64}
_COMPARE_CODES = [k for k, o in enumerate(optable.OPS) if o.compare]
_TERNARY = np.array([o.arity == 3 for o in optable.OPS] + [False] * len(optable.STRUCTURAL))


# hessian() refuses to allocate a dense matrix of more entries than this (512 MiB): a
# large tape's Hessian is wanted sparse (sparse_hessian) or as products (hvp)
DENSE_HESSIAN_LIMIT = 1 << 26


# The most a compiled tape file may hold once decompressed (its members' declared sizes,
# checked before anything is decompressed: a small hostile file cannot claim gigabytes).
LOAD_LIMIT_BYTES = int(os.environ.get("TAPEGRAD_LOAD_LIMIT_BYTES", 1 << 31))


def _read_archive(path):
    """The arrays and metadata of a compiled tape file, read with every size checked first:
    a regular file, a zip archive of the expected ``.npy`` members, within the size limit."""
    path = os.fspath(path)
    if not os.path.exists(path) and os.path.exists(f"{path}.npz"):
        path = f"{path}.npz"      # save() lets NumPy add the suffix
    if not os.path.exists(path):
        raise FileNotFoundError(f"No such file: {path!r}")
    if not stat.S_ISREG(os.stat(path).st_mode):   # a FIFO or a device would block or stream
        raise ValueError(f"not a tapegrad compiled tape: {path}: not a regular file")
    names = {f"{k}.npy" for k in _DTYPES} | {"meta.npy"}
    try:
        with zipfile.ZipFile(path) as z:
            members = z.infolist()
            unknown = sorted(m.filename for m in members if m.filename not in names)
            if unknown:
                raise ValueError(f"unexpected member {unknown[0]!r}")
            total = sum(m.file_size for m in members)
            if total > LOAD_LIMIT_BYTES:
                raise ValueError(f"members declare {total} bytes, more than the limit "
                                 f"{LOAD_LIMIT_BYTES} (TAPEGRAD_LOAD_LIMIT_BYTES)")
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
        if "meta" not in data:
            raise ValueError("no 'meta' record")
        meta = json.loads(str(data.pop("meta")))
    except Exception as e:   # truncated or foreign files: zipfile, EOF, pickle refusal...
        raise ValueError(f"not a tapegrad compiled tape (or a damaged one): {path}: "
                         f"{type(e).__name__}: {e}") from None
    if not isinstance(meta, dict):
        raise ValueError(f"corrupted tapegrad compiled tape: {path}: meta is not a JSON object")
    return data, meta


def _validate(d, meta):
    """Check a loaded compiled tape: types, shapes, and that every reference is in range.
    Every problem is a ValueError naming the field."""
    def bad(why):
        raise ValueError(f"corrupted tapegrad compiled tape: {why}")

    if meta.get("format") != "tapegrad-compiled-tape" or meta.get("version") not in (1, 2):
        bad("unknown format or version (fields 'format', 'version')")
    guards_meta = meta.get("guards")
    if not isinstance(guards_meta, list) or not all(isinstance(w, str) for w in guards_meta):
        bad("field 'guards' is not a list of strings")
    for k, dt in _DTYPES.items():
        if k not in d:
            bad(f"missing array {k!r}")
        if d[k].dtype != dt or d[k].ndim != 1:
            bad(f"array {k!r} has dtype {d[k].dtype} and {d[k].ndim} dimensions")
    op, a, b = d["op"], d["a"].astype(np.int64), d["b"].astype(np.int64)
    n, nc = len(op), len(d["consts"])
    if not (len(a) == len(b) == len(d["val0"]) == n) or n == 0 or nc == 0:
        bad("array lengths disagree")
    elem = op < N_ELEMENTWISE
    if np.any(op < 0) or np.any(~elem & (op != LEAF) & (op != ARG)):
        bad("an opcode that a compiled tape cannot hold")
    idx = np.arange(n)
    for name, r in (("a", a), ("b", b)):
        used = elem | (op == ARG)
        if np.any(used & ((r >= idx) | (r < -nc))):
            bad(f"operand {name} of an entry refers outside the entries before it or the constants")
    tern = elem & _TERNARY[np.clip(op, 0, len(_TERNARY) - 1)]
    if np.any(tern & ((b < 0) | (op[np.clip(b, 0, n - 1)] != ARG))):
        bad("a ternary entry without its argument entry")
    n_in = meta.get("n_inputs")
    if not isinstance(n_in, int) or isinstance(n_in, bool) or n_in < 0:
        bad("field 'n_inputs' is not a count")
    ie, ip = d["in_entries"], d["in_pos"]
    if len(ie) != len(ip) or np.any((ie < 0) | (ie >= n)) or np.any((ip < 0) | (ip >= n_in)):
        bad("an input index out of range")
    if len(ie) and np.any(op[ie] != LEAF):
        bad("an input that is not a leaf entry")
    out = d["out"]
    if len(out) == 0 or np.any((out < 0) | (out >= n)):
        bad("an output index out of range")
    ge = d["guard_entries"]
    if len(ge) != len(d["guard_values"]) or len(ge) != len(guards_meta):
        bad("guard arrays disagree (fields 'guard_entries', 'guard_values', 'guards')")
    if np.any((ge < 0) | (ge >= n)) or (len(ge) and not np.all(np.isin(op[ge], _COMPARE_CODES))):
        bad("a guard that is not a comparison entry")
    # opcodes are positions in the op table: a file of another table (version 1 files do not
    # say which) would replay other ops, so it is refused, never guessed
    if meta.get("ops") != list(OP_NAMES):
        raise ValueError("compiled tape saved by a tapegrad with another op table (field "
                         "'ops'; files of format version 1 do not record it): record and save "
                         "it again with this version")


def load(path):
    """Read a compiled tape written by ``CompiledTape.save`` (validated; see ``load``)."""
    return CompiledTape.load(path)


class CompiledFunction:
    """``@tg.compile``: records ``fn`` on its first call and replays the recording after
    that; when a guarded branch goes the other way (or the input size changes) it tries the
    other recordings it holds (one per branch pattern seen, up to ``max_tapes``), and
    records again at that input only when none fits (``retraces`` counts those).

    ``x`` is a 1-D array of n numbers (the function sees a 1-D tensor of scalar elements)
    or a single number (the function sees a 0-d tensor); the first call decides which, and
    a batch is then ``(B, n)`` or ``(B,)``.  A function that reads a recorded value into
    Python (``if float(x[0]) > 0:``) cannot be replayed: it is recorded again at every
    call (``eager`` names the line; one warning says so), so results stay right."""

    max_tapes = 16

    def __init__(self, fn):
        self.fn = fn
        self.tapes = []          # compiled recordings, most recently used first
        self.retraces = 0
        self.scalar_input = None  # decided by the first call: 0-d or 1-D points
        self.eager = None         # why every call records again (None: replays)
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__name__ = getattr(fn, "__name__", "compiled")

    def __repr__(self):
        if self.eager is not None:
            state = f"records at every call ({self.eager})"
        elif not self.tapes:
            state = "records at its first call, replays after"
        else:
            state = (f"{len(self.tapes)} recording(s), {len(self.tapes[0].op)} entries, "
                     f"{self.retraces} retrace(s)")
        return (f"<tg.compile of {self.__name__}: {state}; f(x), f.value_and_grad(x), "
                "f.grad(X) for a batch, jvp, vjp, jacobian, hvp, hessian>")

    @property
    def tape_fn(self):
        """The compiled tape used last (None before the first call)."""
        return self.tapes[0] if self.tapes else None

    def _trace(self, x):
        """Run ``fn`` once at the point ``x`` (1-D), recording: (tape, leaves, outputs, shape)."""
        with Tape() as tape:
            tape.rewrite_array_op = array_op
            xs = [wrap(float(v), requires_grad=True) for v in x]
            y = self.fn(xs[0] if self.scalar_input else elements(xs))
            inputs = {id(e) for e in xs}
            for e in (list(y._elems.reshape(-1)) if isinstance(y, Elements) else [y]):
                if id(e) in inputs and e._tape.__class__ is not Tape:
                    tape._ref(e)        # an input returned as it is: an output too
        shape = None
        if isinstance(y, Elements):          # an array result: one output per element
            shape = tuple(y.shape)
            ys = list(y._elems.reshape(-1))
        else:
            ys = [y]
        for k, e in enumerate(ys):
            if not isinstance(e, Tensor) or e._tape.__class__ is not Tape:
                what = "the result" if shape is None else f"element {k} of the result"
                raise ValueError(
                    f"tg.compile: {what} does not depend on x (the function must return a "
                    "tensor computed from x with tapegrad operations)")
        return tape, xs, ys, shape

    def _record(self, x):
        tape, xs, ys, shape = self._trace(x)
        try:
            f = tape.compile(xs, ys)
        except ReadsRecordedValues as e:
            self.eager = str(e)
            warnings.warn(f"tg.compile: {self.__name__} {e} It is recorded again at every "
                          "call instead of replayed.", RuntimeWarning, stacklevel=4)
            return self._at_point(tape, xs, ys, shape)
        if self.tapes:
            self.retraces += 1
        f.out_shape = shape
        self.tapes = [f] + [t for t in self.tapes if t.n_inputs == f.n_inputs]
        del self.tapes[self.max_tapes:]
        return f

    @staticmethod
    def _at_point(tape, xs, ys, shape):
        """The recording, compiled to be evaluated at its own point only."""
        f = CompiledTape(tape, xs, ys, optimize=False, at_recorded_point=True)
        f.out_shape = shape
        return f

    def _points(self, x):
        """``x`` as float64 points: (n,) for one point, (B, n) for a batch."""
        x = np.asarray(x, dtype=np.float64)
        if self.scalar_input is None:
            if x.ndim not in (0, 1, 2):
                raise ValueError(f"expected a 1-D input (or a number), got shape {x.shape}")
            self.scalar_input = x.ndim == 0
        if self.scalar_input:
            if x.ndim > 1:
                raise ValueError(f"expected a number or a batch of numbers (B,), got shape "
                                 f"{x.shape}")
            return x[..., None]
        if x.ndim not in (1, 2):
            raise ValueError(f"expected a 1-D input or a batch (B, n), got shape {x.shape}")
        return x

    def _squeeze(self, method, out, batch):
        """Results for a scalar input: drop the input's axis of length 1."""
        if not self.scalar_input:
            return out
        if method == "value_and_grad":
            return out[0], out[1][..., 0] if batch else float(out[1][0])
        if method in ("jacobian", "vjp"):
            return out[..., 0] if np.ndim(out) > 1 or batch else float(np.reshape(out, -1)[0])
        if method == "hessian":
            return float(out[0, 0])
        return out

    def _point(self, x, method, *args):
        if self.eager is not None:
            tape, xs, ys, shape = self._trace(x)
            return getattr(self._at_point(tape, xs, ys, shape), method)(x, *args)
        for k, f in enumerate(self.tapes):
            if f.n_inputs != len(x):
                continue
            try:
                out = getattr(f, method)(x, *args)
            except RetraceRequired:
                continue
            if k:
                self.tapes.insert(0, self.tapes.pop(k))
            return out
        f = self._record(x)
        return getattr(f, method)(x, *args)

    def _any(self, x, method, *args):
        x = self._points(x)
        args = tuple(self._points_like(a) for a in args)
        if x.ndim == 2:
            if self.eager is None:
                if self.tape_fn is None or self.tape_fn.n_inputs != x.shape[1]:
                    self._record(x[0])
                if self.eager is None:
                    try:
                        return self._squeeze(method, getattr(self.tape_fn, method)(x), True)
                    except RetraceRequired:   # some points branch differently: one at a time
                        pass
            rows = [self._point(p, method) for p in x]
            if method == "value_and_grad":
                out = np.array([r[0] for r in rows]), np.array([r[1] for r in rows])
            else:
                out = np.array(rows)
            return self._squeeze(method, out, True)
        return self._squeeze(method, self._point(x, method, *args), False)

    def _points_like(self, v):
        v = np.asarray(v, dtype=np.float64)
        return v[..., None] if self.scalar_input and v.ndim == 0 else v

    def __call__(self, x):
        """The value at ``x`` (a point -> float; a batch -> (B,))."""
        return self._any(x, "__call__")

    def value_and_grad(self, x):
        """Value and gradient at ``x`` (NumPy in, NumPy out; batches of points too)."""
        return self._any(x, "value_and_grad")

    def grad(self, x):
        """The gradient at ``x`` (a point or a batch)."""
        return self.value_and_grad(x)[1]

    def jvp(self, x, v):
        """J(x) @ v (forward mode)."""
        return self._any(x, "jvp", v)

    def vjp(self, x, w):
        """w @ J(x) (reverse mode)."""
        return self._any(x, "vjp", w)

    def jacobian(self, x):
        """The Jacobian at ``x`` ((n,) for a scalar function)."""
        return self._any(x, "jacobian")

    def hvp(self, x, v):
        """Hessian-vector product H(x) @ v (forward over reverse)."""
        return self._any(x, "hvp", v)

    def hessian(self, x):
        """The (n, n) Hessian at ``x`` (coloured when sparse)."""
        return self._any(x, "hessian")

    def sparse_hessian(self, x):
        """The Hessian's non-zeros at ``x`` as ``(rows, cols, values)``."""
        return self._any(x, "sparse_hessian")


def compile(fn):  # noqa: A001  (tg.compile, as torch.compile / jax.jit)
    """Compile ``fn`` by recording it once and replaying the recording in Numba.

    ``fn(x)`` is plain Python over tapegrad ops; ``x`` is a 1-D array of n numbers (the
    function sees a 1-D tensor whose elements are scalars) or one number (a 0-d tensor).
    The returned object records ``fn`` at its first call and then replays the tape at new
    inputs, with no Python per op:

    - ``f(x)`` the value, ``f.value_and_grad(x)`` / ``f.grad(x)`` reverse mode, and the same
      for a batch ``X`` of shape (B, n) in one sweep;
    - ``f.jvp(x, v)``, ``f.vjp(x, w)``, ``f.jacobian(x)`` for array results;
    - ``f.hvp(x, v)``, ``f.hessian(x)`` (coloured when sparse), ``f.sparse_hessian(x)``.

    Python branches on recorded comparisons (``if x[0] > 0:``) become guards: a point that
    takes another branch is recorded again (one tape per branch pattern).  A function that
    reads a recorded value into Python (``float(x[0])``) is recorded at every call, with one
    warning naming the line, so results stay right.  For code whose control flow changes
    at every call (loops until convergence, adaptive steps), see ``tg.jit``."""
    return CompiledFunction(fn)
