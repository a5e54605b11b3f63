"""The Wengert tape: flat arrays of opcodes, operand references and values.

Entry ``i`` of a tape is one recorded op.  It has an opcode ``op[i]``, two operand
references ``a[i]`` and ``b[i]`` and a value ``val[i]``.  A reference ``r >= 0`` names an
earlier entry; ``r < 0`` names the constant ``consts[-r - 1]``.  A tensor that requires
grad knows its tape (``t._t``) and its entry (``t._i``); the tensor *is* its entry's output.

Array-valued entries keep their value in ``_arr`` (entry -> ndarray) and ``val[i]`` is NaN;
the sweep lays them out in one flat buffer.  Ops whose backward runs in Python (custom
``Function``, broadcasting, reductions) are a ``pyfunc`` head entry followed by one
``pyout`` entry per output; the sweep stops at the head and calls back into Python.

Recording appends to Python lists (the cheapest append there is); every ``_CHUNK`` entries,
and before each sweep, the lists are moved into NumPy arrays, so a long tape costs
17 bytes an entry (int8 opcode, 2 x int32 references, float64 value).
"""
from __future__ import annotations

import contextvars
import threading
from typing import Iterator, NamedTuple, Optional, Tuple

import numpy as np

from . import _table

_CHUNK = 1 << 16
_N = len(_table.OPS)
LEAF, LINK, CONST, ARG, PYFUNC, PYOUT = range(_N, _N + len(_table.STRUCTURAL))
_NAMES = tuple(op.name for op in _table.OPS) + _table.STRUCTURAL
_EMPTY_I = np.zeros(0, dtype=np.int64)
_EMPTY_F = np.zeros(0, dtype=np.float64)

SECOND_BACKWARD = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")


# The tape ops record onto (None under no_grad) is read by every recorded op, so it lives
# in a ContextVar: its get() is ~4x cheaper than a threading.local attribute.  A new thread
# starts with an empty context: the first read raises LookupError and boots its state.
_rec = contextvars.ContextVar("tapegrad_recording_tape")
rec_get = _rec.get


class _State(threading.local):
    """Per-thread recording state: grad mode, the ``with Tape()`` stack, the default tape."""

    def __init__(self):
        self.grad_enabled = True
        self.stack = []          # explicit ``with Tape()`` tapes, innermost last
        self.implicit = Tape()   # the default tape of this thread
        self.refresh()

    @property
    def rec(self):
        """The tape ops record onto now, or None under no_grad."""
        if not self.grad_enabled:
            return None
        return self.stack[-1] if self.stack else self.implicit

    def refresh(self):
        _rec.set(self.rec)


def boot():
    """The recording tape of a thread whose context has none yet."""
    _tls.refresh()
    return _rec.get()


def recording():
    """The tape ops record onto in this thread now (None under ``no_grad``)."""
    try:
        return _rec.get()
    except LookupError:
        return boot()


class Entry(NamedTuple):
    """One tape entry as users see it when iterating a tape."""
    index: int
    op: str
    inputs: Tuple[int, ...]   # entry indices of the inputs (constants left out)
    output: int               # the entry index, which is also the output slot
    value: object             # float, or ndarray for array entries


class Tape:
    """A flat Wengert list of recorded operations.

    Use as a context manager to record onto it: ``with tg.Tape() as tape: ...``.  Without
    one, ops record onto a per-thread default tape.  Tapes nest; the innermost records.
    """

    __slots__ = ("_op", "_a", "_b", "_v", "_c", "_base", "_fop", "_fa", "_fb", "_fv",
                 "_arr", "_leaves", "_links", "_linkcache", "_py", "_hooks", "_retain",
                 "_stops", "_freed", "_dirty", "_sweeps", "_tc", "_cmap", "_flat", "_reads", "_guards",
                 "_scalarize", "__weakref__")

    def __init__(self):
        self._op, self._a, self._b, self._v = [], [], [], []
        self._c = [0.0]            # constants; consts[0] = 0.0 is the unused operand
        self._base = 0             # entries already moved into the arrays below
        self._fop = np.zeros(0, np.int8)
        self._fa = np.zeros(0, np.int32)
        self._fb = np.zeros(0, np.int32)
        self._fv = np.zeros(0, np.float64)
        self._arr = {}             # entry -> ndarray value (array entries)
        self._leaves = {}          # entry -> leaf Tensor (gets .grad)
        self._links = {}           # entry -> (tape, entry): a non-leaf of another tape
        self._linkcache = {}
        self._py = {}              # head entry -> PyOp (backward in Python)
        self._hooks = {}           # entry -> [hook, ...] of a non-leaf tensor
        self._retain = {}          # entry -> weakref to a tensor that retains grad
        self._stops = []           # entries where the sweep calls back into Python
        self._freed = None         # uint8 per entry: freed by a backward without retain_graph
        self._dirty = []           # (entry, tape length) for tensors modified in place
        self._sweeps = 0
        self._tc = set()           # constant refs that came from tensors (not Python numbers)
        self._cmap = {}            # Python-number constant -> its reference (deduplicated)
        self._flat = {}            # array entries the Numba sweep reads (an ordered set)
        self._reads = []           # (entry, "file:line") where Python read a recorded value
        self._guards = []          # (comparison entry, outcome, "file:line") of branches taken
        self._scalarize = False    # tg.compile records: array ops become scalar entries

    # -- context manager ------------------------------------------------------------
    def __enter__(self):
        st = _tls
        st.stack.append(self)
        st.refresh()
        return self

    def __exit__(self, *exc):
        st = _tls
        if st.stack and st.stack[-1] is self:
            st.stack.pop()
        else:  # exited out of order: remove wherever it is
            st.stack[:] = [t for t in st.stack if t is not self]
        st.refresh()
        return False

    # -- recording --------------------------------------------------------------------
    def __len__(self) -> int:
        return self._base + len(self._v)

    def _flush(self):
        """Move the recording lists into the NumPy arrays; returns 0 (the new list length)."""
        n = len(self._v)
        if n:
            end = self._base + n
            if end > len(self._fop):
                cap = max(end, 2 * len(self._fop), 1024)
                for name in ("_fop", "_fa", "_fb", "_fv"):
                    old = getattr(self, name)
                    new = np.empty(cap, old.dtype)
                    new[:self._base] = old[:self._base]
                    setattr(self, name, new)
            s = slice(self._base, end)
            self._fop[s] = np.fromiter(self._op, np.int8, n)
            self._fa[s] = np.fromiter(self._a, np.int32, n)
            self._fb[s] = np.fromiter(self._b, np.int32, n)
            self._fv[s] = np.fromiter(self._v, np.float64, n)
            self._op.clear(); self._a.clear(); self._b.clear(); self._v.clear()
            self._base = end
        return 0

    def _push(self, code, ra, rb, v):
        """Append one entry (any value kind); returns its index."""
        vs = self._v
        n = len(vs)
        if n >= _CHUNK:
            n = self._flush()
        i = self._base + n
        if v.__class__ is not float:
            if v.ndim:
                self._arr[i] = v
                v = np.nan
            else:           # 0-d values are scalar entries, whatever their dtype
                v = float(v)
        self._op.append(code); self._a.append(ra); self._b.append(rb); vs.append(v)
        return i

    def _const(self, c):
        """Reference to the Python-number constant ``c``; equal constants share one slot
        (except zeros, whose sign matters, and NaN)."""
        c = float(c)
        r = self._cmap.get(c)
        if r is None:
            self._c.append(c)
            r = -len(self._c)
            if c != 0.0:
                self._cmap[c] = r
        return r

    def _const_t(self, c):
        """A constant that came from a tensor that does not require grad."""
        self._c.append(float(c))
        r = -len(self._c)
        self._tc.add(r)
        return r

    def _push_leaf(self, t):
        i = self._push(LEAF, -1, -1, t._v)
        self._leaves[i] = t
        t._t = self
        t._i = i
        return i

    def _ref(self, t):
        """Reference to tensor ``t`` (which requires grad) from this tape: registers a leaf,
        or links a non-leaf of another tape so that gradients flow on into it."""
        src = t._t
        if src.__class__ is not Tape or src._leaves.get(t._i) is t:
            return self._push_leaf(t)
        key = (id(src), t._i)
        j = self._linkcache.get(key)
        if j is None:
            j = self._push(LINK, -1, -1, t._v)
            self._links[j] = (src, t._i)
            self._linkcache[key] = j
        return j

    # -- reading ----------------------------------------------------------------------
    def _arrays(self):
        self._flush()
        n = self._base
        return self._fop[:n], self._fa[:n], self._fb[:n], self._fv[:n]

    def _entry(self, i):
        """(opcode, a, b) of entry ``i``."""
        if i >= self._base:
            k = i - self._base
            return self._op[k], self._a[k], self._b[k]
        return int(self._fop[i]), int(self._fa[i]), int(self._fb[i])

    def _value(self, i):
        if self._entry(i)[0] == PYFUNC:
            return None   # a Python op's head holds no value: its outputs follow it
        if i in self._arr:
            return self._arr[i]
        return self._v[i - self._base] if i >= self._base else float(self._fv[i])

    def _inputs(self, i):
        """Operand references of entry ``i`` in argument order (constants are < 0)."""
        code, ra, rb = self._entry(i)
        if code == PYOUT:
            return (ra,)
        if code == PYFUNC:
            return tuple(self._py[i].inputs)
        if code >= _N:
            return ()
        arity = _table.OPS[code].arity
        if arity == 3:
            _, rb2, rc = self._entry(rb)
            return (ra, rb2, rc)
        return (ra, rb)[:arity]

    def __iter__(self) -> Iterator[Entry]:
        for i in range(len(self)):
            code = self._entry(i)[0]
            name = self._py[i].name if code == PYFUNC else _NAMES[code]
            ins = tuple(r for r in self._inputs(i) if r >= 0)
            yield Entry(i, name, ins, i, self._value(i))

    @property
    def nbytes(self):
        """Bytes held by this tape's entry storage (arrays, lists and array values)."""
        listed = 4 * 8 * len(self._v) + 8 * len(self._c) + 100 * len(self._cmap)
        frozen = self._fop.nbytes + self._fa.nbytes + self._fb.nbytes + self._fv.nbytes
        return frozen + listed + sum(v.nbytes for v in self._arr.values())

    def __repr__(self):
        n = len(self)
        return (f"<tapegrad.Tape: {n} entries, {len(self._leaves)} leaves, "
                f"{len(self._py)} python ops, {self.nbytes / 1e6:.3g} MB>")

    def compile(self, inputs, outputs, optimize: bool = True):
        """A :class:`~tapegrad.replay.CompiledTape`: this recording replayed in Numba at new
        values of ``inputs`` (value, gradient, batches of points).  ``optimize`` folds
        constants, merges common subexpressions and drops dead entries first
        (``.stats`` says how much each pass removed)."""
        from .replay import compile_tape
        return compile_tape(self, inputs, outputs, optimize)

    def summary(self, max_rows: int = 20) -> None:
        """Print the tape as a Wengert list (first and last entries of a long tape)."""
        from .viz import tape_summary
        print(tape_summary(self, max_rows))

    def _repr_html_(self):
        from .viz import tape_html
        return tape_html(self)

    # -- gradients --------------------------------------------------------------------
    def backward(self, y, gradient=None, retain_graph: Optional[bool] = None) -> None:
        """Run the reverse sweep from ``y`` and accumulate into the leaves' ``.grad``."""
        from .autograd import backward
        backward(y, gradient, retain_graph=retain_graph)

    def gradient(self, y, sources, gradient=None, retain_graph: Optional[bool] = None):
        """Gradients of ``y`` with respect to ``sources`` (a tensor or a list of them),
        returned without touching ``.grad`` (like ``tg.autograd.grad``)."""
        from .autograd import grad
        single = not isinstance(sources, (list, tuple))
        out = grad(y, [sources] if single else list(sources), grad_outputs=gradient,
                   retain_graph=retain_graph, allow_unused=True)
        return out[0] if single else list(out)

    # -- the sweep ---------------------------------------------------------------------
    def _layout(self, n):
        """Flat layout of the array entries the Numba sweep touches (elementwise ops and
        their array operands, noted in ``_flat`` when recorded): offsets, sizes, values.
        Other array entries (inputs and outputs of Python ops only, such as the weights
        of a matmul) keep their adjoints in a dict."""
        if not self._arr:
            return _EMPTY_I, _EMPTY_I, _EMPTY_F
        off = np.full(n, -1, np.int64)
        if not self._flat:
            return off, _EMPTY_I, _EMPTY_F
        keys = list(self._flat)
        arrs = [self._arr[k] for k in keys]
        sizes = np.fromiter((x.size for x in arrs), np.int64, len(arrs))
        nel = np.zeros(n, np.int64)
        off[keys] = np.cumsum(sizes) - sizes
        nel[keys] = sizes
        aval = np.concatenate(arrs, axis=None, dtype=np.float64)
        return off, nel, aval

    def _sweep(self, seeds):
        """Reverse sweep seeded with ``{entry: gradient}``; returns a Sweep with the adjoints."""
        from . import _kernels as K
        op, a, b, val = self._arrays()
        n = len(op)
        consts = np.fromiter(self._c, np.float64, len(self._c))
        off, nel, aval = self._layout(n)
        sw = Sweep(self, np.zeros(n), np.zeros(n, np.uint8), off, nel, np.zeros(len(aval)))
        freed = self._freed
        if freed is None or len(freed) < n:
            grown = np.zeros(n, np.uint8)
            if freed is not None:
                grown[:len(freed)] = freed
            self._freed = freed = grown
        dirty = _EMPTY_I
        if self._dirty:
            dirty = np.zeros(n, np.int64)
            for k, when in self._dirty:
                dirty[k] = max(dirty[k], when)
        for i, g in seeds.items():
            sw.add(i, g)
            sw.reached[i] = 1
        start = max(seeds)
        stops = sorted((s for s in set(self._stops) if s <= start), reverse=True)
        pos = start
        args = (op, a, b, val, consts, sw.adj, sw.reached, freed, dirty, off, nel, aval, sw.aadj)
        for s in stops:
            self._check(*K.reverse(*args, pos, s, _pending(sw.reached, s, pos)))
            pos = s
            if not sw.reached[s]:
                continue
            if s in self._hooks:
                g = sw.get(s)
                for hook in self._hooks[s]:
                    r = hook(_grad_tensor(g))
                    if r is not None:
                        g = r._v
                sw.set(s, g)
            if s in self._py:
                if freed[s]:
                    raise RuntimeError(SECOND_BACKWARD)
                self._py[s].backward(sw, s)
                pos = s - 1
        if pos >= 0:
            self._check(*K.reverse(*args, pos, -1, _pending(sw.reached, -1, pos)))
        self._sweeps += 1
        return sw

    def _check(self, status, i):
        if status == 1:
            raise RuntimeError(SECOND_BACKWARD)
        if status == 2:
            code = self._entry(i)[0]
            node = _table.OPS[code].node if code < _N else _NAMES[code]
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by "
                f"an inplace operation: it was saved by entry {i} ({node}) of {self!r}, and "
                "changed after it was saved. Hint: the gradient would be wrong, so it is not "
                "computed; avoid the in-place operation or clone the tensor first.")


def _pending(reached, stop, start):
    """Reached entries in (stop, start]: where the kernel still has work."""
    return int(np.count_nonzero(reached[stop + 1:start + 1]))


class Sweep:
    """The adjoints of one reverse sweep over a tape: scalar entries in ``adj``, array
    entries of the Numba layout in ``aadj``, other array entries in the dict ``side``."""

    __slots__ = ("tape", "adj", "reached", "off", "nel", "aadj", "side", "owned")

    def __init__(self, tape, adj, reached, off, nel, aadj):
        self.tape, self.adj, self.reached = tape, adj, reached
        self.off, self.nel, self.aadj = off, nel, aadj
        self.side = {}
        self.owned = set()

    def _flat(self, i):
        """Offset of array entry ``i`` in ``aadj``, or -1 when it lives in ``side``."""
        return self.off[i] if len(self.off) else -1

    def get(self, i):
        """The adjoint of entry ``i``: a float, or an ndarray shaped like its value."""
        arr = self.tape._arr.get(i)
        if arr is None:
            return float(self.adj[i])
        o = self._flat(i)
        if o >= 0:   # a view: entry i's slot no longer changes once the sweep is past it
            return self.aadj[o:o + self.nel[i]].reshape(arr.shape)
        g = self.side.get(i)
        return np.zeros(arr.shape) if g is None else g

    def set(self, i, g):
        arr = self.tape._arr.get(i)
        if arr is None:
            self.adj[i] = g
            return
        o = self._flat(i)
        if o >= 0:
            self.aadj[o:o + self.nel[i]] = np.broadcast_to(g, arr.shape).ravel()
        else:
            self.side[i] = np.array(np.broadcast_to(g, arr.shape), dtype=np.float64)

    def add(self, i, g):
        arr = self.tape._arr.get(i)
        if arr is None:
            self.adj[i] += float(np.sum(g)) if g.__class__ is not float else g
            return
        o = self._flat(i)
        if o >= 0:
            self.aadj[o:o + self.nel[i]] += np.broadcast_to(g, arr.shape).ravel()
        else:
            cur = self.side.get(i)
            if cur is not None:
                cur += g
            elif (g.__class__ is np.ndarray and g.base is None and g.flags.writeable
                  and g.shape == arr.shape and g.dtype == np.float64 and id(g) not in self.owned):
                self.side[i] = g          # a fresh array from a vjp: adopt it, no copy
                self.owned.add(id(g))     # (a vjp returning one array twice gets a copy)
            else:
                self.side[i] = np.array(np.broadcast_to(g, arr.shape), dtype=np.float64)

    def add_ref(self, r, g):
        """Add ``g`` into the adjoint of operand reference ``r`` (constants ignored)."""
        if r >= 0:
            self.add(r, g)
            self.reached[r] = 1


def _grad_tensor(g):
    from .tensor import _wrap
    return _wrap(g)


_tls = _State()


def current_tape() -> Optional["Tape"]:
    """The tape ops record onto in this thread now (None under ``no_grad``)."""
    return recording()
