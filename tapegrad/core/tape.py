"""The Wengert tape: flat arrays of opcodes, operand references and values.

Entry ``i`` of a tape is one recorded op.  It has an opcode ``op[i]``, two operand
references ``a[i]`` and ``b[i]`` and a value ``val[i]``.  A reference ``r >= 0`` names an
earlier entry; ``r < 0`` names the constant ``consts[-r - 1]``.  A tensor that requires
grad knows its tape (``t._tape``) and its entry (``t._entry``); the tensor *is* its entry's output.

Array-valued entries keep their value in ``_arr`` (entry -> ndarray) and ``val[i]`` is NaN;
the sweep lays them out in one flat buffer.  Ops whose backward runs in Python (custom
``Function``, broadcasting, reductions) are a ``pyfunc`` head entry followed by one
``pyout`` entry per output; the sweep stops at the head and calls back into Python.

Recording appends to Python lists (the cheapest append there is); every ``CHUNK`` entries,
and before each sweep, the lists are moved into NumPy arrays, so a long tape costs
17 bytes an entry (int8 opcode, 2 x int32 references, float64 value).
"""
from __future__ import annotations

import contextlib
import contextvars
import itertools
import os
import sys
import threading
from typing import Iterator, NamedTuple, Optional, Tuple

import numpy as np

from . import interrupts, optable
from .numba_jit import jit

CHUNK = 1 << 16
# Array entries flush every ARRAY_CHUNK entries, so the default tape sees how much array
# memory it holds and rolls over past ROLLOVER_BYTES (an evaluation loop without backward
# over large arrays would otherwise keep every call's values until CHUNK entries).
ARRAY_CHUNK = 1 << 8
ROLLOVER_BYTES = 64 << 20
# Past SOFT_ROLLOVER_BYTES the default tape retires sooner, at the first op that starts a
# new expression while no result of it is alive (``_unreferenced``): a forward-only loop
# then reuses a few MB of freed arrays instead of touching fresh pages up to ROLLOVER_BYTES
# (its objective ran 1.5-4x slower while they faulted in).  Only then: handing over while
# a result lives links it from the new tape when the expression goes on with it, and an
# evaluation loop that hands over at the same point of every call (``(a + b) - 2 * (c @ p)``
# at ``@``) made a chain of linked tapes that kept every call's arrays.  After _SOFT_TRIES
# such checks found a result alive, it retires as a full tape does (``next_tape``).
SOFT_ROLLOVER_BYTES = 4 << 20
# An array of LARGE_ARRAY elements or more counts at once towards a flush (and so towards
# the rollovers above): a flush every ARRAY_CHUNK entries held 465 MB of k-means arrays
# (8 MB each) before one looked, and 10-20 MB of 80 KB ones (fresh pages for every
# result: a 10 x 1,000 matmul took 55 us against NumPy's 8).  (Counting costs a call per
# array op, nothing beside an op on 4,096 elements.)
LARGE_ARRAY = 1 << 12
_LARGE_FLUSH_BYTES = 2 << 20
_SOFT_TRIES = 8            # failed checks before a soft retiring tape retires as a full one
# A retiring tape that every later op goes on with hands over once its arrays pass this many
# times SOFT_ROLLOVER_BYTES (it kept them all until CHUNK entries: a loop of ``xc - mc``
# on 10,000 elements with ``mc`` kept alive grew by 80 MB of RSS every 1,000 ops, each op
# on fresh pages).  (One objective's graph passes it only past ~16 MB of arrays: GMM
# n = 10,000 records 4.3 MB, the LSTM at c = 1,024 6.5 MB.)
_CONTINUED_BYTES = 4
UNREGISTERED_LEAF = "unregistered-leaf"   # a leaf's _tape when no tape holds it
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_SAMPLED = 64   # new arrays sized at a flush; more are estimated from these
_BINDING = threading.Lock()   # a leaf's (_tape, _entry) pair is written and read as one
MAX_ENTRIES = (1 << 31) - 1 - CHUNK   # operand references are int32 (a chunk of headroom)
N_ELEMENTWISE = len(optable.OPS)
LEAF, LINK, CONST, ARG, PYFUNC, PYOUT = range(N_ELEMENTWISE, N_ELEMENTWISE + len(optable.STRUCTURAL))
OP_NAMES = tuple(op.name for op in optable.OPS) + optable.STRUCTURAL
_N_CODES = N_ELEMENTWISE + len(optable.STRUCTURAL)
_FEW = 32   # up to this many new entries, a flush copies them from the lists directly
_NOTHING_STORED = (np.zeros(0, np.int8), np.zeros(0, np.int32), np.zeros(0, np.int32),
                   np.zeros(0, np.float64))

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
        self.keeping_saved = 0   # (allow_mutation_on_saved_tensors blocks open: keep_saved)
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
    thread_state.refresh()
    return _rec.get()


def recording():
    """The tape ops record onto in this thread now (None under ``no_grad``)."""
    try:
        return _rec.get()
    except LookupError:
        return boot()


@jit
def _first_bad_entry(op, a, b, start, end, lowest, ncodes):
    """The first entry of ``start..end`` with an operand reference that is not an earlier
    entry or a known constant, or an unknown opcode; -1 if none.  (Compiled: a flush
    before every backward checks its new entries, and NumPy's dozen calls here were a
    tenth of a small backward.)"""
    for i in range(start, end):
        ra = a[i]
        rb = b[i]
        o = op[i]
        if not (lowest <= ra < i and lowest <= rb < i and 0 <= o < ncodes):
            return i
    return -1


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

    __slots__ = ("_rec_op", "_rec_a", "_rec_b", "_rec_val", "_c", "_base", "_stored_op", "_stored_a", "_stored_b", "_stored_val",
                 "_arr", "_leaves", "_leaf_of", "_owner", "_links", "_linkcache", "_py", "_hooks", "_retain",
                 "_stops", "_freed", "_dirty", "_const_sources", "_const_entries", "_tensor_consts", "_cmap", "_reads", "_changes", "_guards",
                 "_walk_index", "_walk_plan", "_released", "rewrite_array_op", "_arr_seen", "_arr_bytes", "_retiring", "_large_bytes",
                 "_gradients", "__weakref__")

    def __init__(self):
        self._rec_op, self._rec_a, self._rec_b, self._rec_val = [], [], [], []
        self._c = [0.0]            # constants; consts[0] = 0.0 is the unused operand
        self._base = 0             # entries already moved into the arrays below
        # (shared empty arrays: a flush replaces them before writing; a tape is made after
        # every backward, and four allocations were a third of its cost)
        self._stored_op, self._stored_a, self._stored_b, self._stored_val = _NOTHING_STORED
        self._arr = {}             # entry -> ndarray value (array entries)
        self._arr_seen = 0         # len(_arr) at the last flush, and the bytes of the arrays
        self._arr_bytes = 0        # added by then (estimated: see _flush)
        self._retiring = 0         # the default tape is full (its length then): the next op
        #   that starts a new expression records on a fresh one (``next_tape``); negative
        #   (minus the tries left) past SOFT_ROLLOVER_BYTES: the same, once nothing of it lives
        self._large_bytes = 0      # bytes of large arrays appended since the last flush
        self._leaves = {}          # entry -> leaf Tensor (gets .grad)
        self._leaf_of = {}         # id(leaf) -> its entry here (leaves shared across threads)
        self._owner = threading.get_ident()   # the thread that records onto this tape
        self._links = {}           # entry -> (tape, entry): a non-leaf of another tape
        self._linkcache = {}
        self._py = {}              # head entry -> PyOp, or (name, inputs, call number) (core/pyop.py)
        self._hooks = {}           # entry -> [hook, ...] of a non-leaf tensor
        self._retain = {}          # entry -> weakref to a tensor that retains grad
        self._stops = []           # entries where the sweep calls back into Python
        self._freed = None         # uint8 per entry: freed by a backward without retain_graph
        self._released = None      # entries whose arrays a freeing backward dropped (a set)
        self._dirty = []           # (entry, tape length) for tensors modified in place
        # const entry -> (tensor, its version then): a tensor without grad saved by reference,
        # whose in-place change after that makes a backward that needs it raise
        self._const_sources = {}
        self._const_entries = {}              # id(tensor) -> (tensor, version, entry): _const_t
        self._tensor_consts = set()           # constant refs that came from tensors (not Python numbers)
        self._cmap = {}            # Python-number constant -> its reference (deduplicated)
        self._reads = []           # (entry, "file:line") where Python read a recorded value
        self._changes = []         # (tape length, entry, "file:line"): a tensor with history
        #                            changed in place where nothing records (no_grad)
        self._guards = []          # (comparison entry, outcome, "file:line") of branches taken
        self._walk_index = None    # what the reverse walk derives from this tape, kept up to date
        self._walk_plan = None     # (walk plan, entries, stops) of its last planned walk (engine)
        self._gradients = False    # a create_graph walk recorded gradients here (engine)
        # while tg.compile records: handler(name, args, params) rewriting array ops on 0-d
        # tensors into scalar entries (None otherwise)
        self.rewrite_array_op = None

    # -- context manager ------------------------------------------------------------
    def __enter__(self):
        st = thread_state
        st.stack.append(self)
        st.refresh()
        return self

    def __exit__(self, *exc):
        st = thread_state
        if st.stack and st.stack[-1] is self:
            st.stack.pop()
        else:  # exited out of order: remove wherever it is
            st.stack[:] = [t for t in st.stack if t is not self]
        st.refresh()
        return False

    # -- recording --------------------------------------------------------------------
    def __len__(self) -> int:
        return self._base + len(self._rec_val)

    def _flush(self, reading=False):
        """Move the recording lists into the NumPy arrays; returns 0 (the new list length).
        ``reading``: for a walk, which counts the new arrays only once there are
        ``_SAMPLED`` of them (a backward of a small graph pays for every step here)."""
        n = len(self._rec_val)
        if n:
            end = self._base + n
            if end > MAX_ENTRIES or len(self._c) > MAX_ENTRIES:
                raise RuntimeError(
                    f"this tape would hold more than {MAX_ENTRIES} entries (or constants): "
                    "its operand slots are int32. Record less on one tape (call backward() "
                    "more often, or use tg.no_grad() where no gradient is needed).")
            if not self._base:
                # a fresh tape (a backward's first flush, mostly): arrays of exactly these
                # entries, made from the lists in one call each (a later flush grows them)
                (self._stored_op, self._stored_a, self._stored_b,
                 self._stored_val) = self._lists_as_arrays(n)
            else:
                if end > len(self._stored_op):
                    cap = max(end, 2 * len(self._stored_op), 1024)
                    for name in ("_stored_op", "_stored_a", "_stored_b", "_stored_val"):
                        old = getattr(self, name)
                        new = np.empty(cap, old.dtype)
                        new[:self._base] = old[:self._base]
                        setattr(self, name, new)
                s = slice(self._base, end)
                if n <= _FEW:   # (a backward of a small graph: NumPy's per-call cost dominates)
                    self._stored_op[s] = self._rec_op
                    self._stored_a[s] = self._rec_a
                    self._stored_b[s] = self._rec_b
                    self._stored_val[s] = self._rec_val
                else:
                    for stored, new in zip((self._stored_op, self._stored_a, self._stored_b,
                                            self._stored_val), self._lists_as_arrays(n)):
                        stored[s] = new
            self._check_chunk(self._base, end)
            if thread_state.implicit is not self:
                pass
            elif end < CHUNK and not self._holds_too_much(reading):
                if self._retiring == 0 and self._arr_bytes >= SOFT_ROLLOVER_BYTES:
                    self._retiring = -_SOFT_TRIES
                elif self._retiring != 0 and not reading and \
                        self._arr_bytes >= _CONTINUED_BYTES * SOFT_ROLLOVER_BYTES:
                    # every op since it began retiring went on with its results (``xc - mc``
                    # with ``mc`` kept), so no check could hand it over: now, the next op
                    # linking what it uses
                    successor(self)
            else:
                # a full chunk (or too much array memory) on the default tape: it retires, so
                # that it is freed as soon as no result of it is alive -- as PyTorch frees a
                # graph whose outputs died, even when nothing ever calls backward().  The
                # fresh tape starts at the next op none of whose operands is a result here
                # (``next_tape``): an op that goes on with this tape's results would link
                # them, and a tape linked from the default one stays alive, with every tape
                # it links to in turn (a chain that never died).  A tape still retiring a
                # chunk later (every op goes on with its results) hands over at once.
                if self._retiring <= 0:
                    self._retiring = end
                elif end - self._retiring >= CHUNK:
                    successor(self)
            self._rec_op.clear(); self._rec_a.clear(); self._rec_b.clear(); self._rec_val.clear()
            self._base = end
            self._large_bytes = 0
        return 0

    def _lists_as_arrays(self, n):
        """The ``n`` entries of the recording lists as four arrays (op, a, b, val).  The
        opcodes (below 128: ``_check_chunk`` turns away the rest) go through a bytearray,
        half of ``fromiter``'s cost (a 53-entry flush 1.0 -> 0.6 us, 13 -> 5 ns an entry)."""
        return (np.frombuffer(bytearray(self._rec_op), np.int8),
                np.fromiter(self._rec_a, np.int32, n),
                np.fromiter(self._rec_b, np.int32, n), np.fromiter(self._rec_val, np.float64, n))

    def _flush_array(self, v):
        """Flush, if due, before array value ``v`` is appended: every ``ARRAY_CHUNK``
        entries, and once the large arrays (``LARGE_ARRAY``) appended since the last flush
        pass ``_LARGE_FLUSH_BYTES``; returns the new list length."""
        n = len(self._rec_val)
        if n < ARRAY_CHUNK:
            self._large_bytes += v.nbytes
            if self._large_bytes < _LARGE_FLUSH_BYTES:
                return n
        return self._flush()

    def _holds_too_much(self, reading=False):
        """Do this tape's arrays pass ``ROLLOVER_BYTES``?  The arrays added since the last
        flush are counted from the newest ``_SAMPLED`` of them (a flush is every
        ``ARRAY_CHUNK`` entries at most: the estimate only decides when to roll over);
        ``reading``: only once there are ``_SAMPLED`` of them."""
        arr = self._arr
        new = len(arr) - self._arr_seen
        if reading and new < _SAMPLED:
            return self._arr_bytes > ROLLOVER_BYTES
        if new > 0:
            sizes = [v.nbytes for v in itertools.islice(reversed(arr.values()), _SAMPLED)]
            self._arr_bytes += sum(sizes) * new // len(sizes)
        self._arr_seen = len(arr)
        return self._arr_bytes > ROLLOVER_BYTES

    def _unreferenced(self):
        """Does nothing but the recording machinery refer to this tape: the thread's state,
        the leaves bound here and tapegrad's own frames (the op being recorded)?  Counted
        from ``sys.getrefcount``: any other holder (a result tensor, a link from another
        tape, a temporary of the expression being evaluated, a user's variable) makes it
        False, so an error here only ever keeps a tape that could have retired."""
        held = sys.getrefcount(self) - 1   # (less getrefcount's own argument)
        known = (thread_state.implicit is self) + (rec_get(None) is self)
        for t in self._leaves.values():
            known += t._tape is self
        known += 1      # (this frame's self; its f_locals would hold f, a cycle)
        f = sys._getframe(1)
        while f is not None:
            if f.f_code.co_filename.startswith(_PACKAGE_DIR):
                local = f.f_locals
                for v in local.values():   # (no generator: it would hold self in a cell)
                    known += v is self
                # a local that a comprehension or closure reads lives in a cell, which
                # holds it besides f_locals (``_record_call``'s T: no tape ever retired
                # under a loop of array ops)
                for name in f.f_code.co_cellvars:
                    known += local.get(name) is self
            f = f.f_back
        return held <= known

    def _check_chunk(self, start, end):
        """Every operand reference of entries ``start..end`` names an earlier entry or a
        constant, and every opcode is known: the Numba kernels index with these unchecked,
        so a broken tape raises here instead of corrupting memory there.  (Unused operands
        are -1, which passes: constant 0 is the 0.0 every tape has.)"""
        i = _first_bad_entry(self._stored_op, self._stored_a, self._stored_b, start, end,
                             -len(self._c), _N_CODES)
        if i >= 0:
            raise RuntimeError(f"tapegrad internal error: tape entry {i} refers to a later "
                               "entry or an unknown constant; the tape is not swept")

    def _push(self, code, ra, rb, v):
        """Append one entry (any value kind); returns its index."""
        vs = self._rec_val
        n = len(vs)
        if v.__class__ is float:
            if n >= CHUNK:
                n = self._flush()
        elif n >= ARRAY_CHUNK or (v.ndim and v.size >= LARGE_ARRAY):
            n = self._flush_array(v)
        i = self._base + n
        if v.__class__ is not float:
            if v.ndim:
                self._arr[i] = v
                v = np.nan
            else:           # 0-d values are scalar entries, whatever their dtype
                v = float(v)
        self._rec_op.append(code); self._rec_a.append(ra); self._rec_b.append(rb); vs.append(v)
        return i

    def _push_floats(self, code, ra, values):
        """``_push(code, ra, -1, v)`` for each of ``values`` (Python floats) in one call (the
        outputs of an ``unbind``); returns their indices."""
        n, k = len(self._rec_val), len(values)
        if n + k > CHUNK:
            return [self._push(code, ra, -1, v) for v in values]
        i = self._base + n
        self._rec_op.extend([code] * k); self._rec_a.extend([ra] * k)
        self._rec_b.extend([-1] * k); self._rec_val.extend(values)
        return range(i, i + k)

    def _push_pyop(self, v):
        """Append a ``pyfunc`` head and its one ``pyout`` entry, holding ``v``; returns the
        head's index.  (``_push`` twice, in one call: most array ops have one output.)"""
        vs = self._rec_val
        n = len(vs)
        if n >= CHUNK - 1:
            n = self._flush()
        elif v.__class__ is not float and v.ndim and (n >= ARRAY_CHUNK or v.size >= LARGE_ARRAY):
            n = self._flush_array(v)
        head = self._base + n
        if v.__class__ is not float:
            if v.ndim:
                self._arr[head + 1] = v
                v = np.nan
            else:
                v = float(v)
        self._rec_op.extend((PYFUNC, PYOUT)); self._rec_a.extend((-1, head))
        self._rec_b.extend((-1, -1)); vs.extend((0.0, v))
        return head

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

    def _const_t(self, c, t=None):
        """A constant number ``c`` that came from tensor ``t`` (which does not require grad):
        a constant entry that keeps ``t``'s version, as ``_push_const`` does for arrays, so
        that an in-place change of ``t`` before the backward raises where PyTorch's node
        saved it; one entry per tensor and version.  Without ``t``, or on a tape that
        ``tg.compile`` records on (a replayed program holds its constants as numbers), a
        constant reference marked as a tensor's."""
        if t is None or self.rewrite_array_op is not None:
            self._c.append(float(c))
            r = -len(self._c)
            self._tensor_consts.add(r)
            return r
        version = getattr(t, "_version", 0)
        known = self._const_entries.get(id(t))
        if known is not None and known[0] is t and known[1] == version:
            return known[2]
        i = self._push(CONST, -1, -1, float(c))
        self._const_sources[i] = (t, version)
        self._const_entries[id(t)] = (t, version, i)
        return i

    def _push_const(self, t, value):
        """An array constant entry holding ``value``, the value of tensor ``t`` (no grad)."""
        i = self._push(CONST, -1, -1, value)
        self._const_sources[i] = (t, getattr(t, "_version", 0))
        return i

    def _push_leaf(self, t, bound):
        """Register leaf ``t`` on this tape.  ``bound``: the tape ``t`` is bound to now (its
        ``_tape``), which the fast paths read with ``_entry``.  The leaf is rebound here
        unless another thread's tape holds it: then this tape finds it in ``_leaf_of``."""
        i = self._push(LEAF, -1, -1, t._value)
        self._leaves[i] = t
        self._leaf_of[id(t)] = i
        if bound.__class__ is not Tape or bound._owner == self._owner:
            with _BINDING:
                if t._tape is bound:      # entry first: a reader that sees this tape in
                    t._entry = i          # _tape (only this thread's own) sees its entry
                    t._tape = self
        return i

    def _rebind_value(self, i, v):
        """Entry ``i``'s tensor was changed in place where nothing recorded (no_grad,
        ``detach()``): what reads it from now on reads ``v``, its value now (an array, or a
        number for a number entry), as PyTorch's ops save a tensor as it is when they use it.
        (What read it before is marked modified: a backward through that raises.)"""
        if i in self._arr:
            self._arr[i] = v
        elif i >= self._base:
            self._rec_val[i - self._base] = float(v)
        else:
            self._stored_val[i] = float(v)

    def _ref(self, t):
        """Reference to tensor ``t`` (which requires grad) from this tape: registers a leaf,
        or links a non-leaf of another tape so that gradients flow on into it."""
        j = self._leaf_of.get(id(t))
        if j is not None and self._leaves.get(j) is t:
            return j
        with _BINDING:                    # a consistent (tape, entry) pair of a shared leaf
            src, e = t._tape, t._entry if t._tape.__class__ is Tape else -1
        if src.__class__ is not Tape or src._leaves.get(e) is t:
            return self._push_leaf(t, src)
        key = (id(src), e)
        link = self._linkcache.get(key)
        # (a new link where the tensor has another value object since: a number entry
        # changed in place where nothing recorded; an array is changed in its memory)
        if link is not None and link[1] is t._value:
            return link[0]
        j = self._push(LINK, -1, -1, t._value)
        self._links[j] = (src, e)
        self._linkcache[key] = (j, t._value)
        return j

    # -- reading ----------------------------------------------------------------------
    def _arrays(self):
        self._flush(reading=True)
        n = self._base
        return self._stored_op[:n], self._stored_a[:n], self._stored_b[:n], self._stored_val[:n]

    def _entry(self, i):
        """(opcode, a, b) of entry ``i``."""
        if i >= self._base:
            k = i - self._base
            return self._rec_op[k], self._rec_a[k], self._rec_b[k]
        # (``item``: a Python int without a NumPy scalar in between, a third of the cost)
        return self._stored_op.item(i), self._stored_a.item(i), self._stored_b.item(i)

    def _value(self, i):
        v = self._arr.get(i)   # (an array entry: never a Python op's head)
        if v is not None:
            return v
        if self._entry(i)[0] == PYFUNC:
            return None   # a Python op's head holds no value: its outputs follow it
        return self._rec_val[i - self._base] if i >= self._base else self._stored_val.item(i)

    def _inputs(self, i):
        """Operand references of entry ``i`` in argument order (constants are < 0)."""
        code, ra, rb = self._entry(i)
        if code == PYOUT:
            return (ra,)
        if code == PYFUNC:   # (a PyOp, or core/pyop.py's packed tuple: name, inputs, call)
            py = self._py[i]
            return tuple(py[1] if py.__class__ is tuple else py.inputs)
        if code >= N_ELEMENTWISE:
            return ()
        arity = optable.OPS[code].arity
        if arity == 3:
            _, rb2, rc = self._entry(rb)
            return (ra, rb2, rc)
        return (ra, rb)[:arity]

    def __iter__(self) -> Iterator[Entry]:
        for i in range(len(self)):
            code = self._entry(i)[0]
            py = self._py.get(i) if code == PYFUNC else None
            name = OP_NAMES[code] if py is None else py[0] if py.__class__ is tuple else py.name
            ins = tuple(r for r in self._inputs(i) if r >= 0)
            yield Entry(i, name, ins, i, self._value(i))

    @property
    def nbytes(self):
        """Bytes held by this tape's entry storage (arrays, lists and array values)."""
        listed = 4 * 8 * len(self._rec_val) + 8 * len(self._c) + 100 * len(self._cmap)
        frozen = self._stored_op.nbytes + self._stored_a.nbytes + self._stored_b.nbytes + self._stored_val.nbytes
        return frozen + listed + sum(v.nbytes for v in self._arr.values())

    def __repr__(self):
        n = len(self)
        return (f"<tapegrad.Tape: {n} entries, {len(self._leaves)} leaves, "
                f"{len(self._py)} python ops, {self.nbytes / 1e6:.3g} MB>")


thread_state = _State()


def keep_saved(memory, tensors):
    """Under ``allow_mutation_on_saved_tensors``, before ``memory`` (an ndarray) is written
    where nothing records (no_grad, ``detach()``, ``.data``): every array that the tapes of
    ``tensors`` and this thread's tapes saved and that shares ``memory`` keeps a copy of its
    value now, and a constant entry made of it no longer watches its tensor's version, as
    PyTorch clones a saved tensor before it is changed.  False (and nothing done) outside
    such a block, or for a value that is not an array."""
    if not thread_state.keeping_saved or memory.__class__ is not np.ndarray:
        return False
    tapes = {id(T): T for T in [thread_state.implicit, *thread_state.stack,
                                *(t._tape for t in tensors)] if T.__class__ is Tape}
    for T in tapes.values():
        arrays = T._arr
        copied = [k for k, a in arrays.items()
                  if a.__class__ is np.ndarray and np.may_share_memory(a, memory)]
        for k in copied:
            arrays[k] = arrays[k].copy()
            T._const_sources.pop(k, None)
    return True


@contextlib.contextmanager
def writing_a_view():
    """An in-place change through a view (``x[i] = v``) where ``keep_saved`` does not apply:
    PyTorch's allow_mutation_on_saved_tensors clones the view written, and its backward
    then reads neither the old value nor the new one consistently, so tapegrad raises as
    outside it."""
    was = thread_state.keeping_saved
    thread_state.keeping_saved = 0
    try:
        yield
    finally:
        thread_state.keeping_saved = was


def current_tape() -> Optional["Tape"]:
    """The tape ops record onto in this thread now (None under ``no_grad``)."""
    return recording()


def next_tape(T, tensors):
    """The tape an op on ``tensors`` (a sequence; passed as one, not as ``*args``: a call
    with ``*args`` holds the tape once more while it runs, which ``_unreferenced`` would
    take for a result alive) records onto when the default tape ``T`` is retiring:
    ``T`` while an operand is a result recorded on it (the expression goes on), else a
    fresh default tape."""
    for t in tensors:   # (numbers among them have no tape)
        if getattr(t, "_tape", None) is T and T._leaves.get(t._entry) is not t:
            return T
    if T._retiring < 0 and not T._unreferenced():   # (soft: see SOFT_ROLLOVER_BYTES)
        T._retiring += 1
        if T._retiring == 0:
            # a result kept alive (a user's variable, Jupyter's Out): the tape cannot be
            # freed, but it need not grow.  It retires as a full one does, at the next op
            # that starts a new expression: waiting for more bytes (twice, up to
            # ROLLOVER_BYTES) kept every later op's arrays, fresh pages each (a 10 x 1,000
            # matmul 60 us against 19).  A link to it from there keeps it alive no longer
            # than the result does: the next tape retires softly on its own.
            T._retiring = len(T)
        return T
    return successor(T)


def successor(T):
    """A fresh default tape after ``T`` (this thread's default tape, full)."""
    T._retiring = 0
    if thread_state.implicit is not T:
        return T
    fresh_default_tape(T)
    return thread_state.implicit


def fresh_default_tape(T):
    """If ``T`` is this thread's default tape, start a fresh one (after a backward freed it:
    memory stays bounded in a training loop), and unbind ``T``'s leaves: a leaf that no
    later op uses would otherwise keep ``T``, and every array it holds, alive.  (The tape
    still lists them: a result of ``T`` that lives on gets their gradients; a leaf's next
    op binds it to the tape that records it.)  Returns whether ``T`` was the default tape."""
    st = thread_state
    if st.implicit is not T:
        return False
    st.implicit = Tape()
    st.refresh()
    with _BINDING:
        for t in T._leaves.values():
            if t._tape is T:
                t._tape = UNREGISTERED_LEAF
    return True


# (the default tape and the recording state that caches it change together)
interrupts.protect(fresh_default_tape, successor, Tape.__enter__, Tape.__exit__)
# Ctrl-C inside one of these is delivered when it returns: a tape is never half-written.
interrupts.protect(Tape._push, Tape._push_pyop, Tape._flush, Tape._push_leaf, Tape._push_const, Tape._ref,
                   Tape._const, Tape._const_t)
