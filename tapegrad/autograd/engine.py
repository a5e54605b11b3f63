"""The reverse walk: one walk for ``backward()``, ``autograd.grad()`` and ``create_graph=True``.

A backward call walks each tape that holds part of the graph, from the outputs down.  The
walk is the same in both modes; only the adjoints differ:

- **floats** (``FloatAdjoints``): the entries between two stops are swept by the Numba
  kernel (``core.kernels.reverse``), the fast path;
- **recorded tensors** (``GraphAdjoints``, ``create_graph=True``): each entry's adjoint is
  a tensor expression built from the op table's partials, so the gradient has a
  ``grad_fn`` of its own and can be differentiated again.

At a stop -- a ``pyfunc`` head (array op, custom ``Function``, broadcast) or a tensor with
hooks -- the walk returns to Python: hooks run on the adjoint, and the op's backward runs
with grad mode set to ``create_graph`` (as in PyTorch).  Freed-graph and in-place checks
use the same data in both modes.  A ``link`` entry forwards its adjoint into the tape that
recorded the tensor; leaf gradients are summed over all tapes first, then each leaf's
hooks run once on the sum, then the result accumulates into ``.grad`` -- as PyTorch's
AccumulateGrad does.

A walk costs the graph it reaches, not the tape: a reach pass (``_reach``, in Numba) first
marks what the outputs can reach, and everything after it -- the sweep's range, the stops
that return to Python, the array layout, freeing, leaf gradients -- looks at those entries
only.  Graphs that nothing reaches any more (forward-only evaluations, earlier Jacobian
rows) stay on the tape until it is dropped, but no backward looks at them again.
"""
from __future__ import annotations

import contextlib
import dis
import itertools
import math
import operator
import threading

import numpy as np

from ..core import kernels as K
from ..core import optable
from ..core.elementwise import FUNCTIONS as ELEMENTWISE
from ..core.elementwise import GRAPH_PARTIALS, EfficientZero
from ..core.grad_mode import grad_mode
from ..core.numba_jit import jit
from ..core.tape import (ARG, CONST, LEAF, LINK, N_ELEMENTWISE, OP_NAMES, PYFUNC, PYOUT,
                         SECOND_BACKWARD, Tape, fresh_default_tape, recording)
from ..core.broadcast_loops import broadcast_copy
from ..core.dtypes import Size
from ..core.shapes import broadcast_view
from ..core.graph import LEAF_STATE, node_input_slots, node_name, node_state
from ..core.pyop import CALLS, pyop_array_call, pyop_at, pyop_inputs, pyop_name, pyop_nout
from ..core.tensor import Tensor, tensor_of_entry, wrap
from ..ops.array_ops import (DIRECT_CAT, DIRECT_INDEX, DIRECT_UNBIND, call_parts, spread_run,
                              constant_changed, direct_kind, full_reduction_scale,
                              is_full_reduction, pyop_backward, pyop_constant_backward,
                              pyop_numpy_backward, pyop_read_inputs, pyop_reads_output,
                              pyop_reads_values, pyop_saves, spread_grad, sum_to)
from .anomaly_mode import check_nan, is_anomaly_enabled
from .graph import pack_pending, release_outlived, release_saved, unpack_entry

_EMPTY_I = np.zeros(0, dtype=np.int64)
_EMPTY_F = np.zeros(0, dtype=np.float64)
_ARITY, _NO_GRAD = K.ARITY, K.NO_GRAD
_INDEXING = threading.Lock()


def _shape_of(v):
    return () if v.__class__ is float else v.shape


def seed_value(k, t, g):
    """The seed of output ``k`` (tensor ``t``) from ``grad_tensors[k]`` (``g``): a float or
    an ndarray shaped like ``t`` (ones for a scalar output when ``g`` is None)."""
    shape = _shape_of(t._value)
    if g is None:
        if t.numel() != 1:
            raise RuntimeError("grad can be implicitly created only for scalar outputs")
        return 1.0 if shape == () else np.ones(shape)
    gv = g._value if isinstance(g, Tensor) else (float(g) if isinstance(g, (int, float)) else np.asarray(g))
    gshape = _shape_of(gv)
    if gshape != shape and not (isinstance(g, (int, float)) and len(shape) == 0):
        raise RuntimeError(f"Mismatch in shape: grad_output[{k}] has a shape of {Size(gshape)!r} "
                           f"and output[{k}] has a shape of {Size(shape)!r}.")
    return gv if gv.__class__ is float else np.asarray(gv, dtype=np.float64)


def run_hook(hook, g):
    """``hook(g)``: the gradient it returns (or ``g``), checked as PyTorch checks it."""
    r = hook(g)
    if r is None:
        return g
    if not isinstance(r, Tensor):
        raise TypeError(f"hook '{getattr(hook, '__name__', hook)}' returned a "
                        f"{type(r).__name__}, expected a Tensor or None")
    if tuple(r.shape) != tuple(g.shape):
        raise RuntimeError(f"hook '{getattr(hook, '__name__', hook)}' has changed the size of "
                           "value")
    return r


def _is_leaf(t):
    T = t._tape
    return T.__class__ is not Tape or T._leaves.get(t._entry) is t


def _check(T, status, i):
    """Raise the error the kernel (or the graph walk) reported for entry ``i``."""
    if status == 1:
        raise RuntimeError(SECOND_BACKWARD)
    if status == 2:
        code = T._entry(i)[0]
        node = optable.OPS[code].node if code < N_ELEMENTWISE else \
            pyop_name(T._py[i]) if i in T._py else OP_NAMES[code]
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by "
            f"an inplace operation: it was saved by entry {i} ({node}) of {T!r}, and "
            "changed after it was saved. Hint: the gradient would be wrong, so it is not "
            "computed; avoid the in-place operation or clone the tensor first.")


def _check_saved(A, s, py):
    """Before Python op ``py`` (head entry ``s``) runs a backward that reads saved values:
    PyTorch's error for a value freed by an earlier backward, and for an array op's input
    whose memory was changed in place after it was saved: a leaf or a constant (their
    entries hold the tensor's own array), or any tensor changed where nothing recorded
    (no_grad: ``TapeArrays.overwritten``).  An entry changed by a recorded in-place op
    keeps a copy of what it saved (``ops/inplace_views.py``), and its rule computes with
    that (README: PyTorch raises there)."""
    if py.versions is not None and constant_changed(py):   # (an index tensor changed)
        _check(A.tape, 2, s)
    if not pyop_saves(py):
        return
    if A.freed[s]:
        raise RuntimeError(SECOND_BACKWARD)
    d = A.dirty
    last = s + py.nout   # (an in-place op's own entries may read the value it replaces)
    if py.backward_fn is None and len(d) and pyop_reads_values(py):
        leaves = A.tape._leaves
        changed = A.overwritten or _NO_CHANGES
        if any(r >= 0 and d[r] > last and (r in leaves or A.op[r] == CONST
                                           or changed.get(r, -1) > last)
               for r in pyop_read_inputs(py)):
            _check(A.tape, 2, s)
    if py.backward_fn is None and constant_changed(py):
        _check(A.tape, 2, s)
    if len(d) and pyop_reads_output(py) and any(d[j] > last for j in range(s + 1, last + 1)):
        _check(A.tape, 2, s)   # (its result changed in place: PyTorch saved the result)


_NO_CHANGES = {}


# the kernel's count of reached entries still to visit, given as "never runs out": the walk
# bounds each segment itself (by the reach pass's lowest entry), and counting the reached
# entries of a segment costs the segment again
_UNBOUNDED = 1 << 62
# A walk's setup takes the cheaper of two ways by size; both compute the same (the tests
# run both, see the ``both_walks`` fixture): tapes up to _SMALL entries get their
# adjoints by a whole-array fill, not per reached entry, and walks that reach up to
# _FEW_HITS entries read and mark them in a Python loop, not in NumPy (whose per-call cost
# is more than the loop's there).
_SMALL = 4096
# the flat layout's values end in three scratch slots: the sweep's number operands of an
# array entry (``kernels.reverse``)
_SCRATCH = [np.zeros(3)]
_FEW_HITS = 32
# Array entries of at least _LARGE elements stay out of the flat layout of the Numba sweep
# (laying them out copies every value and fills every adjoint): the walk stops at each
# such elementwise entry and runs it alone on the arrays themselves (``K.reverse_entry``),
# with the adjoints of it and its operands in buffers of their own.  Below that size one
# Numba call per entry costs more than the copy.
_LARGE = 4096
# VALUE_READ[o][j]: does any adjoint term of elementwise op o read operand j's value?  A
# large entry hands the kernel its own value in place of one no term reads (add, sub and
# neg read none): a broadcast or transposed operand would be copied contiguous for nothing.
VALUE_READ = tuple(tuple(bool(K.READS[o, :, j].any()) for j in range(3))
                   for o in range(N_ELEMENTWISE))


_SIZE = np.ndarray.size.__get__   # (an array's size, for map)
_FALSE = wrap(np.False_)
_NO_SWITCH = contextlib.nullcontext()


def _written_out(g, shape):
    """``g`` broadcast to ``shape`` as a new float64 array (``np.array(np.broadcast_to(g,
    shape))`` without broadcast_to's cost: 2.8 -> 0.4 us for a (5, 2) adjoint; a gradient
    repeated over a short inner run in a loop: ``broadcast_copy``)."""
    return broadcast_copy(g, shape)


def _masked(g):
    """Zeros where a partial masks a recorded gradient ``g``: ``where(False, g, 0)``, which
    stays in the graph as PyTorch's masked gradients do."""
    return ELEMENTWISE["where"](_FALSE, g, 0.0)


class WalkIndex:
    """What the walks over one tape derive from it, extended as the tape grows (so that a
    backward never pays for the whole tape): the constants as an array, a mark per stop
    entry, and the ``pyfunc`` heads in order with their operand references laid out flat."""

    __slots__ = ("nconsts", "consts", "nstops", "stopmark", "heads", "head_ptr", "head_refs")

    def __init__(self):
        self.nconsts = self.nstops = 0
        self.consts = self.stopmark = None
        self.heads = _EMPTY_I
        self.head_ptr = np.zeros(1, np.int64)
        self.head_refs = _EMPTY_I

    def update(self, T, n):
        """Bring the index up to ``T``'s first ``n`` entries; returns what a walk reads, as
        of now: ``(consts, stopmark, heads, head_ptr, head_refs)``."""
        with _INDEXING:   # (two threads walking one tape: each sees a whole index)
            self._update(T, n)
            return (self.consts[:self.nconsts], self.stopmark, self.heads, self.head_ptr,
                    self.head_refs)

    def _update(self, T, n):
        c = T._c
        nc = len(c)
        if not self.nconsts:   # (a fresh index: the constants in one call)
            self.consts = np.array(c, np.float64)
            self.nconsts = nc
        elif self.nconsts < nc:
            if len(self.consts) < nc:
                grown = np.empty(max(nc, 2 * self.nconsts, 64), np.float64)
                if self.nconsts:
                    grown[:self.nconsts] = self.consts[:self.nconsts]
                self.consts = grown
            self.consts[self.nconsts:nc] = c[self.nconsts:nc]
            self.nconsts = nc
        stops = T._stops
        new = [int(s) for s in stops[self.nstops:len(stops)]] if self.nstops < len(stops) else ()
        size = max(n, *new) + 1 if new else n + 1
        if self.stopmark is None or len(self.stopmark) < size:
            grown = np.zeros(max(size, 2 * (0 if self.stopmark is None else len(self.stopmark)),
                                 1024), np.uint8)
            if self.stopmark is not None:
                grown[:len(self.stopmark)] = self.stopmark
            self.stopmark = grown
        if new:
            mark = self.stopmark
            if len(new) <= _FEW_HITS:   # (a fancy store from a list costs ten of these)
                for h in new:
                    mark[h] = 1
            else:
                mark[new] = 1
            last = self.heads[-1] if len(self.heads) else -1
            py = T._py
            # heads are stops appended in recording order; a later stop on a head (a node
            # hook) repeats an earlier entry
            heads = [h for h in new if h > last and h in py]
            if heads:
                # (offsets and references summed in Python: a backward of a small graph
                # indexes a fresh tape, where NumPy's per-call cost would dominate)
                ptr, refs = [], []
                end = int(self.head_ptr[-1])
                for h in heads:
                    inputs = pyop_inputs(py[h])
                    refs.extend(inputs)
                    end += len(inputs)
                    ptr.append(end)
                if len(self.heads):
                    self.heads = np.concatenate((self.heads, np.array(heads, np.int64)))
                    self.head_ptr = np.concatenate((self.head_ptr, np.array(ptr, np.int64)))
                    self.head_refs = np.concatenate((self.head_refs, np.array(refs, np.int64)))
                else:   # (one array, three views: a fresh tape's index, at every backward)
                    k = len(heads)
                    flat = np.array(heads + [0] + ptr + refs, np.int64)
                    self.heads, self.head_ptr, self.head_refs = flat[:k], flat[k:2 * k + 1], flat[2 * k + 1:]
            self.nstops += len(new)


class WalkPlan:
    """What a walk derives from a tape's structure alone, kept for the next walk over a tape
    of the same structure: the tape's WalkIndex (``index``), the reach from the walk's
    seeds (``reached``: hits, low, swept, stops) and the float walk's flat layout
    (``layout``).  A training loop records the same program onto a fresh tape every step,
    and deriving these again was a third of the fixed cost of a backward (~15 us of ~45).

    A plan is used only where what it was derived from is equal: the entry arrays
    (``key``: opcodes and operand references), the stops, the Python ops' inputs (the
    index; ``TapeArrays``), the seeds' entries (the reach; ``TapeArrays.reach``), and which
    reached entries hold arrays, of which sizes (the layout; ``FloatAdjoints``).  It holds
    no value, tensor or tape; once published (``WalkPlans.publish``) it is never changed."""

    __slots__ = ("n", "key", "stops", "inputs", "index", "seeds", "reached", "arrays",
                 "sizes", "layout")

    def __init__(self, T, op, a, b):
        self.n = len(op)
        self.key = (op.tobytes(), a.tobytes(), b.tobytes())
        self.stops = [int(s) for s in T._stops]   # (a NodeState is its entry; not kept)
        self.inputs = [pyop_inputs(py) for py in T._py.values()]
        self.index = self.seeds = self.reached = self.arrays = self.sizes = self.layout = None

    def matches(self, T, op, a, b):
        """Was this plan derived from a tape structured as ``T`` is (entries ``op``, ``a``,
        ``b``)?"""
        return (self.n == len(op) and self.stops == T._stops
                and self.key == (op.tobytes(), a.tobytes(), b.tobytes())
                and self.inputs == [pyop_inputs(py) for py in T._py.values()])

    def keep_index(self, ix):
        """Keep a copy of WalkIndex ``ix`` (the tape's may grow later; stopmark in place)."""
        self.index = (ix.nstops, ix.stopmark.copy(), ix.heads, ix.head_ptr, ix.head_refs)

    def fresh_index(self):
        """A WalkIndex for a new tape of this structure: the kept one, its constants to be
        read from that tape (``WalkIndex.update``: they are values, not structure)."""
        ix = WalkIndex()
        nstops, stopmark, ix.heads, ix.head_ptr, ix.head_refs = self.index
        ix.nstops, ix.stopmark = nstops, stopmark.copy()
        return ix


class WalkPlans:
    """The last few published WalkPlans, newest first (a loop repeats a few programs: a
    Jacobian loop walks each evaluation's tape twice, from two outputs), and the
    (entries, stops) counts of the last few tapes walked without one: a plan is derived only
    for a tape of counts seen before, so that a walk over a program never seen again pays
    nothing for it.  ``plans`` is replaced, never changed (readers iterate a snapshot)."""

    KEEP = 4

    def __init__(self):
        self.plans = ()
        self.seen = []
        self.lock = threading.Lock()

    def find(self, T, op, a, b):
        """``(plan, new)``: a published plan that tape ``T`` (entries ``op``, ``a``, ``b``)
        matches, or a new one to fill in as the walk derives it (None for a tape of
        counts not seen lately, or too long)."""
        last = T._walk_plan
        if last is not None and last[1] == len(op) and last[2] == len(T._stops):
            # (the plan of this very tape's last walk: entries and stops are only ever
            # appended, so at the same counts it is the same structure; a Jacobian loop
            # walks one retained tape again and again)
            return last[0], None
        for plan in self.plans:
            if plan.matches(T, op, a, b):
                return plan, None
        shape = (len(op), len(T._stops))
        with self.lock:
            if shape not in self.seen or len(op) > _PLAN_ENTRIES:
                self.seen.insert(0, shape)
                del self.seen[self.KEEP:]
                return None, None
        return None, WalkPlan(T, op, a, b)

    def publish(self, plan):
        """Make WalkPlan ``plan`` (holding a reach: a walk that records gradients derives no
        layout, a float walk then derives its own) the newest."""
        with self.lock:
            others = tuple(p for p in self.plans if p.key != plan.key or p.stops != plan.stops)
            self.plans = (plan,) + others[:self.KEEP - 1]


WALK_PLANS = WalkPlans()
# Tapes of more entries get no plan: a plan keeps its tape's structure alive (~60 bytes an
# entry: a 10-million-entry scalar tape would leave 600 MB behind its backward), and the
# setup it saves is a small part of walking that many
_PLAN_ENTRIES = 1 << 16


def walk_index(T, n):
    """What a walk over ``T``'s first ``n`` entries reads from its WalkIndex (see
    ``WalkIndex.update``)."""
    ix = T._walk_index
    if ix is None:
        with _INDEXING:
            ix = T._walk_index
            if ix is None:
                ix = T._walk_index = WalkIndex()
    return ix.update(T, n)


@jit
def _reach(op, a, b, seeds, heads, head_ptr, head_refs, stopmark, mark, hits, swept, stops):
    """Mark in ``mark`` (and list in ``hits``) every entry a walk from ``seeds`` can reach:
    operands of elementwise entries (not of comparisons, which pass no gradient), a
    ``pyout``'s head, a head's operands.  A superset of what the walk reaches (a Python
    backward may return None for an operand).  Elementwise entries and their operands
    are marked 2: the Numba sweep reads their values and adjoints (the flat layout of
    array entries).  Stops when every marked entry that has operands was visited;
    the walk never looks below the lowest such entry, however long the tape.

    Then (here, not in NumPy afterwards: at a backward's fixed cost each NumPy call counts)
    ``hits`` is sorted, and the entries marked 2 are copied to ``swept`` and the stops among
    the hits (``stopmark``) to ``stops``, in descending order (the walk's).  Returns
    ``(number of hits, lowest entry with operands, number swept, number of stops)``."""
    m = 0
    pending = 0
    low = op.shape[0]
    for s in seeds:
        if mark[s] == 0:
            mark[s] = 1
            hits[m] = s
            m += 1
            if op[s] < LEAF or op[s] == PYFUNC or op[s] == PYOUT:
                pending += 1
    i = seeds.max() if seeds.shape[0] else -1
    refs = np.empty(3, np.int64)
    while i >= 0 and pending > 0:
        if mark[i] == 0:
            i -= 1
            continue
        o = op[i]
        if o >= LEAF and o != PYFUNC and o != PYOUT:
            i -= 1
            continue
        pending -= 1
        low = i
        nr = 0
        if o < N_ELEMENTWISE:
            if not _NO_GRAD[o]:
                mark[i] = 2
                refs[0] = a[i]
                refs[1] = b[i]
                nr = 2
                if _ARITY[o] == 3:
                    refs[1] = a[b[i]]
                    refs[2] = b[b[i]]
                    nr = 3
        elif o == PYOUT:
            refs[0] = a[i]
            nr = 1
        if o == PYFUNC:
            h = np.searchsorted(heads, i)
            if h < heads.shape[0] and heads[h] == i:
                for k in range(head_ptr[h], head_ptr[h + 1]):
                    r = head_refs[k]
                    if r >= 0 and mark[r] == 0:
                        mark[r] = 1
                        hits[m] = r
                        m += 1
                        if op[r] < LEAF or op[r] == PYFUNC or op[r] == PYOUT:
                            pending += 1
        for k in range(nr):
            r = refs[k]
            if r >= 0:
                if mark[r] == 0:
                    hits[m] = r
                    m += 1
                    if op[r] < LEAF or op[r] == PYFUNC or op[r] == PYOUT:
                        pending += 1
                mark[r] = 2
        i -= 1
    hits[:m].sort()
    nswept = 0
    nstops = 0
    for k in range(m):
        h = hits[k]
        if mark[h] == 2:
            swept[nswept] = h
            nswept += 1
        if stopmark[h] != 0:
            nstops += 1
    j = nstops
    for k in range(m):
        h = hits[k]
        if stopmark[h] != 0:
            j -= 1
            stops[j] = h
    return m, low, nswept, nstops


@jit
def _sum_in_order(t):
    """``+0. + t[0] + t[1] + ...``, in that order: a number entry's terms as the sweep adds
    them one by one (a pairwise or vector sum rounds otherwise)."""
    total = 0.0
    for k in range(t.shape[0]):
        total += t[k]
    return total


@jit
def _sum_lanes(t):
    """``+0.`` plus the terms of ``t`` in eight running sums from ``+0.`` (lane ``j``: the
    terms ``j``, ``j + 8``, ... in order), then ``((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7))``
    and the last ``n % 8`` terms in order: how a number entry's terms over an entry of
    ``_LANES_FROM`` elements or more are summed (4x faster than one running sum,
    ``_sum_in_order``, and closer to the exact sum).  ``array_ops._sum_last`` sums each
    row of a matrix alike (the same bits); one kernel for both was measured slower: Numba
    does not inline a call per row (1,000 rows of 5: 1.1 -> 5.9 us), and lanes started
    from the first eight terms, as ``_sum_last``'s, do not vectorize here (160,000 terms:
    23 -> 53 us)."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    n = t.shape[0]
    m = n - n % 8
    for k in range(0, m, 8):
        s0 += t[k]
        s1 += t[k + 1]
        s2 += t[k + 2]
        s3 += t[k + 3]
        s4 += t[k + 4]
        s5 += t[k + 5]
        s6 += t[k + 6]
        s7 += t[k + 7]
    total = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    for k in range(m, n):
        total += t[k]
    return total


@jit
def _place(off, nel, flat, sizes):
    """The flat layout's offsets (-1 for entries outside it) and sizes per entry, for the
    array entries ``flat`` of sizes ``sizes``, laid out in that order."""
    off[:] = -1
    start = 0
    for k in range(flat.shape[0]):
        off[flat[k]] = start
        nel[flat[k]] = sizes[k]
        start += sizes[k]


def grow_marks(marks, n):
    """Per-entry marks (uint8) for at least ``n`` entries, with room: a tape grows between
    walks; ``marks`` (or None) copied in."""
    grown = np.zeros(max(n, 2 * (0 if marks is None else len(marks))), np.uint8)
    if marks is not None:
        grown[:len(marks)] = marks
    return grown


class TapeArrays:
    """What a walk over tape ``T`` reads: its entry arrays, constants, freed and modified
    marks (the last as the tape length when an entry's tensor was changed in place)."""

    __slots__ = ("tape", "op", "a", "b", "val", "consts", "freed", "dirty", "overwritten", "n",
                 "stopmark", "heads", "plan", "new_plan")

    def __init__(self, T, entries=None, planned=False):
        """``entries``: the entries whose in-place changes matter (a walk's reachable ones,
        ascending); None for all.  ``planned``: a walk's, which reuses a WalkPlan of a tape
        structured as ``T`` (``plan``; its WalkIndex too where ``T`` was not walked before),
        or derives one (``new_plan``)."""
        self.tape = T
        self.op, self.a, self.b, self.val = T._arrays()
        n = self.n = len(self.op)
        self.plan = self.new_plan = None
        if planned:
            self.plan, self.new_plan = WALK_PLANS.find(T, self.op, self.a, self.b)
            if self.plan is not None:
                T._walk_plan = (self.plan, n, len(T._stops))
                if T._walk_index is None:
                    T._walk_index = self.plan.fresh_index()
        self.consts, self.stopmark, *self.heads = walk_index(T, n)
        if self.new_plan is not None:
            self.new_plan.keep_index(T._walk_index)
        freed = T._freed   # (None until a backward frees an entry: run_backward)
        if freed is None:
            freed = np.zeros(n, np.uint8)
        elif len(freed) < n:
            freed = T._freed = grow_marks(freed, n)
        self.freed = freed
        self.find_dirty(entries)

    def check_only(self, executed, hits):
        """Check saved values (freed, changed in place) only at the entries marked in
        ``executed`` (uint8, one per entry) among the reachable ``hits``."""
        if self.tape._freed is None and not len(self.dirty):
            return   # (nothing freed or changed: every check passes anyway)
        skipped = hits[executed[hits] == 0]
        if len(skipped):
            self.freed = self.freed[:self.n].copy()
            self.freed[skipped] = K.UNCHECKED

    def find_dirty(self, entries):
        """Mark in ``dirty`` the entries changed in place since recorded: tensors modified
        in place, and constant tensors saved by reference whose version moved on (only
        among ``entries`` when given: checking every constant of a long tape at every
        backward cost the whole tape)."""
        T, n = self.tape, self.n
        sources = T._const_sources
        if not sources or (entries is not None and not len(entries)):
            stale = []
        elif entries is None or len(sources) <= len(entries):
            # (fewer constants than entries to check: each constant's version, then the
            # stale ones among the entries)
            stale = [k for k, (t, version) in sources.items()
                     if k < n and getattr(t, "_version", 0) != version]
            if stale and entries is not None:
                at = np.minimum(np.searchsorted(entries, stale), len(entries) - 1)
                stale = [k for k, j in zip(stale, at.tolist()) if entries[j] == k]
        else:
            stale = []
            for k in entries[self.op[entries] == CONST].tolist():
                t, version = sources.get(k, (None, 0))
                if t is not None and getattr(t, "_version", 0) != version:
                    stale.append(k)
        self.dirty = _EMPTY_I
        self.overwritten = None
        if T._dirty or stale:
            self.dirty = np.zeros(n, np.int64)
            for k, when in T._dirty:
                if k < n:
                    self.dirty[k] = max(self.dirty[k], when)
            self.dirty[stale] = n + 1   # changed after every entry that could have saved it
            self._dirty_broadcasts(entries)
            # entry -> the tape length at the last change of its tensor where nothing
            # recorded (no_grad; such a change marks it dirty too): that wrote the memory the
            # tape holds for it, or gave the entry the new value, so an op recorded before
            # reads the new value unless it raises (``_check_saved``)
            if T._changes:
                self.overwritten = overwritten = {}
                for at, k, _ in T._changes:
                    if at > overwritten.get(k, -1):
                        overwritten[k] = at

    def _dirty_broadcasts(self, entries):
        """A ``broadcast`` entry views its operand's memory: it is modified when the operand
        is (PyTorch's version check of the operand that the op saved before broadcasting)."""
        T, op, dirty = self.tape, self.op, self.dirty
        outs = np.flatnonzero(op == PYOUT) if entries is None else entries[op[entries] == PYOUT]
        for e in outs.tolist():
            py = pyop_at(T, self.a[e])
            if py is not None and py.name == "broadcast" and py.fwd is not None:
                src = py.inputs[0]
                if src >= 0 and dirty[src] > dirty[e]:
                    dirty[e] = dirty[src]

    def reach(self, seeds):
        """``(hits, low, swept, stops)``: the entries a walk from ``seeds`` can reach,
        ascending, the lowest of them that has operands, those the Numba sweep reads, and
        the stops among them from the top, as a list (see ``_reach``)."""
        plan = self.plan
        if plan is not None and plan.seeds == tuple(seeds):
            hits, low, swept, stops = plan.reached
            return hits, low, swept, list(stops)
        n = self.n
        found = np.empty(3 * n, np.int64)   # (one allocation for the three lists)
        hits, swept, stops = found[:n], found[n:2 * n], found[2 * n:]
        m, low, nswept, nstops = _reach(self.op, self.a, self.b,
                                        np.fromiter(seeds, np.int64, len(seeds)), *self.heads,
                                        self.stopmark, np.zeros(n, np.uint8), hits, swept,
                                        stops)
        hits, swept, stops = hits[:m], swept[:nswept], stops[:nstops].tolist()
        self.plan = None   # (its layout is of another reach)
        plan = self.new_plan
        if plan is not None:
            plan.seeds = tuple(seeds)
            hits.flags.writeable = swept.flags.writeable = False   # (shared by later walks)
            plan.reached = (hits, low, swept, tuple(stops))
        return hits, low, swept, stops


def _array_entries(arrays, val, swept):
    """The entries among ``swept`` that hold arrays, ascending, and their arrays: those
    whose value in ``val`` is NaN (found in NumPy, in the reach's cost, not the tape's),
    less the few NaN numbers among them."""
    flat = swept[np.isnan(val[swept])].tolist()
    arrs = list(map(arrays.get, flat))
    if any(map(operator.is_, arrs, itertools.repeat(None))):   # (a NaN number)
        flat = [k for k, v in zip(flat, arrs) if v is not None]
        arrs = [v for v in arrs if v is not None]
    return flat, arrs


def _filled(v, n):
    """``np.full(n, v)`` for ``FloatAdjoints.entry``'s vectorized loop, which only reads it
    (a number operand or a spread gradient written out over a large entry): kept per value
    (its bits: -0.0 and NaNs apart) and length from ``_FILLED_FROM`` elements, where the
    fill costs more than looking it up (GMM d=10's ``x ** 2`` entry of 50,000 elements,
    its 2.0 written out: 58 -> 49 us)."""
    if n < _FILLED_FROM or n > _FILLED_UP_TO:
        return np.full(n, v)
    key = (_F64_SCALAR(v).tobytes(), n)
    out = _FILLED.get(key)
    if out is None:
        if len(_FILLED) >= _FILLED_LIMIT:
            _FILLED.clear()
        out = _FILLED[key] = np.full(n, v)
    return out


_F64_SCALAR = np.float64
_FILLED = {}   # (bits of a number, length) -> the number written out (_filled)
_FILLED_FROM = 4096
# (at most 16 arrays of up to 2 MB: GMM and k-means use three or four; past that size the
# fill is a small part of the entry's own loop, and a kept array would hold memory)
_FILLED_UP_TO = 1 << 18
_FILLED_LIMIT = 16


class FloatAdjoints:
    """Adjoints as numbers: scalar entries in ``adj``, array entries of the Numba layout in
    ``aadj``, other array entries (inputs and outputs of Python ops only, such as the
    weights of a matmul) in the dict ``side``."""

    create_graph = False
    __slots__ = ("tape", "arrays", "adj", "reached", "off", "nel", "aval", "aadj", "side", "owned",
                 "spread", "needed", "executed", "hits", "stops", "large", "gather")

    def __init__(self, arrays, hits, swept):
        self.tape = arrays.tape
        self.arrays = arrays
        n = arrays.n
        # adjoints start at -0.0: -0.0 + g is g for every g (a -0.0 too), so a gradient
        # keeps PyTorch's sign where 0.0 + -0.0 would lose it.  Only the entries the walk
        # can reach are set: zeros come from the allocator at no cost, a fill would cost
        # the whole tape.
        if n <= _SMALL:   # (a fill of a short tape costs less than the scattered store)
            self.adj = np.empty(n)
            self.adj.fill(-0.0)
        else:
            self.adj = np.zeros(n)
            self.adj[hits] = -0.0
        self.reached = np.zeros(n, np.uint8)
        self.hits = hits
        self.off, self.nel, self.aval, self.large = self._layout(arrays, swept)
        if len(self.aval):
            self.aadj = np.empty(len(self.aval))
            self.aadj.fill(-0.0)
        else:
            self.aadj = _EMPTY_F
        self.side = {}
        self.owned = set()
        self.gather = _EMPTY_I   # (basic indices the sweep runs itself: ``_gathers``)
        # entries whose ``side`` adjoint is still one number broadcast (a read-only view, as
        # a sum's gradient comes): large entries read it as it is, anything else gets it
        # written out first
        self.spread = set()

    @staticmethod
    def _layout(A, swept):
        """Flat layout of the array entries among ``swept`` (the reachable elementwise
        entries and their operands) under ``_LARGE`` elements: offsets, sizes, values; and
        the large elementwise entries, which the walk runs one by one (``entry``).  Other
        array entries (large ones, inputs and outputs of Python ops only) keep their
        adjoints in ``side``."""
        arrays = A.tape._arr
        plan = A.plan
        if plan is not None and plan.layout is not None and arrays and len(swept):
            # the same reached entries hold arrays, of the same sizes
            cand, arrs = _array_entries(arrays, A.val, swept)
            if cand == plan.arrays and list(map(_SIZE, arrs)) == plan.sizes:
                off, nel, flat, large = plan.layout
                if len(flat) != len(arrs):   # (large entries left out)
                    arrs = list(map(arrays.get, flat))
                aval = np.concatenate(arrs + _SCRATCH, axis=None, dtype=np.float64) if arrs \
                    else _EMPTY_F
                return off, nel, aval, list(large)
        off, nel, aval, large, flat, cand, sizes = FloatAdjoints._new_layout(A, swept)
        plan = A.new_plan
        if plan is not None and arrays and len(swept):
            plan.arrays, plan.sizes = cand, sizes
            plan.layout = (off, nel, flat, tuple(large))
        return off, nel, aval, large

    @staticmethod
    def _new_layout(A, swept):
        """``_layout``'s offsets, sizes, values and large entries, and for a WalkPlan the
        entries laid out, the candidates (reached entries holding arrays) and their sizes."""
        arrays, n = A.tape._arr, A.n
        if not arrays or not len(swept):
            return _EMPTY_I, _EMPTY_I, _EMPTY_F, (), [], [], []
        flat, arrs = _array_entries(arrays, A.val, swept)
        large = ()
        m = len(flat)
        cand = flat
        sizes = np.fromiter(map(_SIZE, arrs), np.int64, m)
        all_sizes = sizes.tolist()
        if m and sizes.max() >= _LARGE:
            # (the operands of an array entry have its size, or are numbers: a large
            # entry's operands are large too, so no flat entry refers to a large one)
            small = (sizes < _LARGE).tolist()
            large = [k for k, s in zip(flat, small) if not s and A.op[k] < N_ELEMENTWISE]
            flat = [k for k, s in zip(flat, small) if s]
            arrs = [v for v, s in zip(arrs, small) if s]
            sizes = sizes[sizes < _LARGE]
            m = len(flat)
        if not flat:    # (no offsets at all: a fill as long as the tape is not free)
            return _EMPTY_I, _EMPTY_I, _EMPTY_F, large, flat, cand, all_sizes
        off = np.empty(n, np.int64)
        nel = np.zeros(n, np.int64)
        # (offsets summed and placed in Numba: fancy stores from lists cost more)
        _place(off, nel, np.fromiter(flat, np.int64, m), sizes)
        aval = np.concatenate(arrs + _SCRATCH, axis=None, dtype=np.float64)
        return off, nel, aval, large, flat, cand, all_sizes

    def segment(self, start, stop):
        """Sweep entries ``start`` down to ``stop + 1`` in Numba."""
        A = self.arrays
        status, i = K.reverse(A.op, A.a, A.b, A.val, A.consts, self.adj, self.reached, A.freed,
                              A.dirty, self.off, self.nel, self.aval, self.aadj, self.gather,
                              start, stop, _UNBOUNDED)
        _check(self.tape, status, i)

    def entry(self, i):
        """Large array entry ``i`` in Numba on its own arrays (see ``_LARGE``), as the sweep
        would run it in the flat layout."""
        A, T = self.arrays, self.tape
        arrays, side = T._arr, self.side
        o = int(A.op[i])
        if not self.reached[i] or K.NO_GRAD[o]:   # (before any buffer is made for operands)
            return
        ra, rb, rc = int(A.a[i]), int(A.b[i]), -1
        if K.ARITY[o] == 3:
            ra, rb, rc = ra, int(A.a[rb]), int(A.b[rb])
        out = _elements(arrays[i])
        g, step = side.get(i), 1
        if g is None:
            g = np.full(out.shape, -0.0)
        elif i in self.spread:
            g, step = _elements(g.flat[0]), 0
        else:
            g = _elements(g)
        vals, adjs, sums = [], [], []   # (value, step) and (adjoint, mode) per operand
        lanes = None
        read = VALUE_READ[o]
        for j, r in enumerate((ra, rb, rc)):
            if r < 0:     # a constant number (or the unused operand): no adjoint
                vals += [A.consts[-r - 1:-r], 0]
                adjs += [_EMPTY_F, 0]
            elif r not in arrays and out.shape[0] >= _LANES_FROM:
                # a number entry broadcast over a large entry: its terms set in an array of
                # their own, summed in lanes (``_sum_lanes``), then added to its adjoint
                n = out.shape[0]
                vals += [np.full(n, A.val[r]) if read[j] else out, 1]
                terms = np.empty(n)
                lanes = [] if lanes is None else lanes
                lanes.append((r, terms))
                adjs += [terms, 2]
            elif r not in arrays:   # a number entry broadcast over the elements: its terms
                vals += [A.val[r:r + 1], 0]   # summed from +0. first, then added to its
                total = np.zeros(1)           # adjoint (PyTorch's sum_to_size)
                sums.append((r, total))
                adjs += [total, 1]
            elif A.op[r] == CONST:  # (nothing reads a constant's adjoint)
                vals += [_elements(arrays[r]) if read[j] else out, 1]
                adjs += [_EMPTY_F, 0]
            else:
                # a buffer no term reached yet is set by the first term (an operand used
                # twice, x * x: the later one adds), not filled with -0.0 first
                buf = side.get(r)
                mode = 1
                if buf is None:
                    buf = side[r] = np.empty(arrays[r].shape)
                    self.owned.add(id(buf))
                    mode = 2
                elif r in self.spread or not buf.flags.c_contiguous:
                    # written out: the terms add into it in place, through a flat view
                    self.spread.discard(r)
                    buf = side[r] = np.array(buf, dtype=np.float64, order="C")
                    self.owned.add(id(buf))
                vals += [_elements(arrays[r]) if read[j] else out, 1]
                adjs += [buf.reshape(-1), mode]
        # The vectorizable loop (``K.fast_loop``) takes one or two operands, arrays only, and
        # sets its terms: numbers are written out as arrays (those the terms do not read are
        # any array of n elements), a term for a buffer that has some already goes through a
        # scratch array added after, and a number entry's terms through one summed in order
        # from +0. (the same sums, in the same order, as adding in the loop).  Not for zero
        # tensors.
        want, scratch, ordered = 0, [], []
        if K.ARITY[o] <= 2 and self.reached[i] == 1 and not K.ZERO_TENSOR[o]:
            n = out.shape[0]
            if step == 0:
                g, step = _filled(g[0], n), 1
            for k in range(K.ARITY[o]):
                if vals[2 * k + 1] == 0:
                    vals[2 * k] = _filled(vals[2 * k][0], n) if read[k] else out
                    vals[2 * k + 1] = 1
            if K.ARITY[o] == 1:   # (y is not read: any array of n elements)
                vals[2], vals[3] = vals[0], 1
            targets = []
            for k in range(2):
                buf, mode = adjs[2 * k], adjs[2 * k + 1]
                if mode:
                    want |= 1 << k
                    t = buf if mode == 2 else np.empty(n)
                    if mode == 1:
                        (ordered if buf.shape[0] == 1 and n > 1 else scratch).append((buf, t))
                    targets.append(t)
                else:
                    targets.append(_EMPTY_F)
        else:
            targets = [_EMPTY_F, _EMPTY_F]
        status = K.reverse_entry(A.op, A.a, A.b, self.adj, self.reached, A.freed, A.dirty, i, g,
                                 step, out, *vals, *adjs, want, *targets)
        _check(T, status, i)
        for buf, t in scratch:
            buf += t
        for total, t in ordered:
            total[0] = _sum_in_order(t)
        for r, total in sums:
            self.adj[r] += total[0]
        if lanes is not None:
            for r, terms in lanes:
                self.adj[r] += _sum_lanes(terms)

    def _flat(self, i):
        """Offset of array entry ``i`` in ``aadj``, or -1 when it lives in ``side``."""
        return int(self.off[i]) if len(self.off) else -1

    def get(self, i):
        """The adjoint of entry ``i``: a float, or an ndarray shaped like its value."""
        arr = self.tape._arr.get(i)
        if arr is None:
            return float(self.adj[i])
        o = self._flat(i)
        if o >= 0:   # a view: entry i's slot no longer changes once the sweep is past it
            return self.aadj[o:o + arr.size].reshape(arr.shape)
        g = self.side.get(i)
        if g is None:
            return np.zeros(arr.shape)
        if i in self.spread:
            self.spread.discard(i)
            g = self.side[i] = np.array(g, dtype=np.float64, order="C")
            self.owned.add(id(g))
        return g

    def tensor(self, i):
        return wrap(self.get(i))

    def value(self, r):
        """The value entry or constant ``r`` saved (``saved`` wraps it)."""
        return saved_value(self.tape, r)

    def set(self, i, g):
        if isinstance(g, Tensor):
            g = g._value
        arr = self.tape._arr.get(i)
        if arr is None:
            self.adj[i] = float(np.sum(g)) if g.__class__ is not float else g
            return
        o = self._flat(i)
        if o >= 0:
            # (into a view shaped like the entry: NumPy broadcasts g there, as broadcast_to
            # would, without broadcast_to's cost)
            self.aadj[o:o + arr.size].reshape(arr.shape)[...] = g
        else:
            g = self.side[i] = _written_out(g, arr.shape)
            self.owned.add(id(g))
            self.spread.discard(i)

    def seed(self, i, g):
        """Entry ``i``'s gradient from the caller: never adopted (the caller's array must not
        change when other gradients add into the entry)."""
        self.set(i, g)

    def add(self, i, g):
        if isinstance(g, Tensor):
            g = g._value
        arr = self.tape._arr.get(i)
        if arr is None:   # (a number: g a number, or an array summed, a 0-d one read)
            self.adj[i] += g if isinstance(g, float) else \
                float(g) if g.__class__ is np.ndarray and not g.ndim else float(np.sum(g))
            return
        o = self._flat(i)
        if o >= 0:
            slot = self.aadj[o:o + arr.size].reshape(arr.shape)
            slot += g
        else:
            cur = self.side.get(i)
            if cur is not None:
                if i in self.spread:   # (a read-only view: the sum is a new array)
                    self.spread.discard(i)
                    cur = self.side[i] = np.add(cur, g, dtype=np.float64)
                    self.owned.add(id(cur))
                else:
                    cur += g
            elif (g.__class__ is np.ndarray and g.dtype == np.float64 and g.size > 1
                  and not any(g.strides) and g.shape == arr.shape):
                self._keep_spread(i, g.flat[0], arr.shape)
            elif (g.__class__ is np.ndarray and g.base is None and g.flags.writeable
                  and g.shape == arr.shape and g.dtype == np.float64 and id(g) not in self.owned):
                self.side[i] = g          # a fresh array from a vjp: adopt it, no copy
                self.owned.add(id(g))     # (a vjp returning one array twice gets a copy)
            else:
                # (owned too: a rule may return its gradient itself, as cumsum's over a
                # dim of 1 does, which must not become the operand's adjoint as well --
                # the two would then be one .grad)
                g = self.side[i] = _written_out(g, arr.shape)
                self.owned.add(id(g))

    def add_at(self, i, idx, g):
        """Add ``g``, the gradient of ``x[idx]`` for a basic index, to array entry ``i``'s
        adjoint: what ``add`` does with getitem's rule's result (zeros with ``g`` written at
        ``idx``: ``g`` added there, ``+0.`` elsewhere, whose sign of zero matters), without
        that array.  False where entry ``i`` is a number (``add`` then)."""
        arr = self.tape._arr.get(i)
        if arr is None:
            return False
        o = self._flat(i)
        if o >= 0:
            buf = self.aadj[o:o + arr.size].reshape(arr.shape)
        else:
            buf = self.side.get(i)
            if buf is None:   # (the first gradient: the rule's array itself, as add adopts it)
                buf = self.side[i] = np.zeros(arr.shape)
                buf[idx] = g
                self.owned.add(id(buf))
                return True
            if i in self.spread:   # (a read-only view: written out first)
                self.spread.discard(i)
                buf = self.side[i] = np.array(buf, dtype=np.float64, order="C")
                self.owned.add(id(buf))
        part = buf[idx] + g
        buf += 0.0
        buf[idx] = part
        return True

    def _keep_spread(self, i, number, shape):
        """Entry ``i``'s first adjoint, one number broadcast (a sum's gradient): kept so,
        read-only, over a copy of the number (whatever a gradient views is not ours)."""
        self.side[i] = broadcast_view(np.array(number, np.float64), shape)
        self.spread.add(i)

    def add_number(self, i, g):
        """Add the number ``g`` to every element of entry ``i``'s adjoint: what ``add``
        does with ``g`` broadcast over the entry (a full sum's or mean's gradient)."""
        arr = self.tape._arr.get(i)
        if arr is None:
            self.adj[i] += g
            return
        o = self._flat(i)
        if o >= 0:
            slot = self.aadj[o:o + arr.size]
            slot += g
        elif i not in self.side and arr.size > 1:
            self._keep_spread(i, g, arr.shape)   # (the first gradient, as ``add`` keeps it)
        else:
            self.add(i, broadcast_view(np.array(g, np.float64), arr.shape))

    def saved(self, r):
        """The value entry or constant ``r`` saved, as a tensor for a Python backward."""
        return wrap(self.value(r))

    def leaf_grads(self):
        T = self.tape
        leaves = T._leaves
        if not leaves:
            return [], []
        hits = self.hits
        if len(leaves) <= _FEW_HITS:
            # (the tape's leaves, ascending as they were pushed, not the reached entries:
            # a chain of ops reaches many entries and a few leaves)
            reached = self.reached
            n = len(reached)
            hit = [i for i in leaves if i < n and reached[i]]
            ts = [leaves[i] for i in hit]
            if T._arr:
                return ts, [self.get(i) for i in hit]
            item = self.adj.item
            return ts, [item(i) for i in hit]
        if len(hits) <= _FEW_HITS:
            reached = self.reached
            hit = [i for i in hits.tolist() if i in leaves and reached[i]]
            ts = [leaves[i] for i in hit]
            if T._arr:
                return ts, [self.get(i) for i in hit]
            item = self.adj.item
            return ts, [item(i) for i in hit]
        idx = hits[self.arrays.op[hits] == LEAF]
        hit = idx[self.reached[idx] != 0].tolist()
        ts = [leaves[i] for i in hit]
        if T._arr:
            return ts, [self.get(i) for i in hit]
        return ts, self.adj[hit].tolist()


def saved_value(T, r):
    """The value entry or constant ``r`` of tape ``T`` saved."""
    if r < 0:
        return T._c[-r - 1]
    arr = T._arr.get(r)   # (an array entry's value without reading its opcode first)
    return T._value(r) if arr is None else arr


def _elements(v):
    """Array ``v``'s elements as a flat, writable float64 array (a view where it is one
    already).  Writable even where only read: Numba compiles the kernels again for every
    combination of read-only arguments (minutes of compilation for broadcast constants)."""
    a = np.ascontiguousarray(v, dtype=np.float64).reshape(-1)
    return a if a.flags.writeable else a.copy()


class GraphAdjoints:
    """Adjoints as recorded tensors (``create_graph=True``): a dict entry -> tensor (or a
    number where nothing recorded flowed in yet); entries are walked in Python with the
    op table's partials evaluated in recorded ops."""

    create_graph = True
    __slots__ = ("tape", "arrays", "adj", "reached", "views", "needed", "executed", "hits",
                 "stops")
    large = ()   # (every entry is walked in Python)

    def seed(self, i, g):
        self.add(i, g)

    def __init__(self, arrays, hits, swept=None):   # (swept: the float walk's layout)
        self.tape = arrays.tape
        self.arrays = arrays
        self.adj = {}
        self.reached = np.zeros(arrays.n, np.uint8)
        self.views = {}
        self.hits = hits

    def saved(self, r):
        """Entry ``r`` as a tensor that refers back to it (ops on it are recorded), or the
        constant ``r``: what a recorded backward computes with."""
        T = self.tape
        if r < 0:
            return wrap(T._c[-r - 1])
        code = T._entry(r)[0]
        if code == LEAF:
            return T._leaves[r]
        if code == CONST:
            return wrap(T._value(r))   # (an array, or a tensor's number: _const_t)
        v = self.views.get(r)
        if v is None:
            v = self.views[r] = tensor_of_entry(T, r, T._value(r))
        return v

    def recorded(self, r):
        """Does entry or constant ``r`` carry a graph (what ``saved`` gives records)?"""
        return r >= 0 and self.tape._entry(r)[0] != CONST

    def constant_backward(self, py, s):
        """Recorded op ``py``'s input gradients (stop ``s``) as constants where its result's
        gradient is a constant and its rule would record nothing (``pyop_constant_backward``:
        k-means' cost ends in sum, min, matmul and broadcasts of a constant gradient); None
        where the rule runs on tensors."""
        given = self.adj.get(s + 1)
        if given.__class__ is Tensor:
            if given._tape is not None:
                return None
            g = given._value
        elif given.__class__ is float:
            g = given
        else:   # (an EfficientZero: the tensor rule)
            return None
        T = self.tape
        grads = _direct_constant_backward(py, g, self.value)
        if grads is None:
            grads = pyop_constant_backward(py, g, T._value(s + 1), self.value, self.recorded)
        if grads is None:
            return None
        out = []
        for v in grads:
            if v.__class__ is np.ndarray and v.ndim:
                if v is g and given.__class__ is Tensor:
                    v = given    # (the tensor rule passes g itself on)
                elif v.base is not None or not v.flags.writeable:
                    # a view of g or of a value (the tensor rule's result is a view tensor,
                    # sharing a version counter): memory of its own, as the float walk's
                    v = wrap(np.array(v))
                else:
                    v = wrap(v)
            elif v is not None and not isinstance(v, Tensor):   # (a rule may end in a tensor op)
                v = wrap(float(v))
            out.append(v)
        return out

    def value(self, r):
        return saved_value(self.tape, r)

    def get(self, i):
        g = self.adj.get(i)
        if g.__class__ is EfficientZero and g.graph is not None:
            return g.graph
        if g is None or g.__class__ is EfficientZero:
            arr = self.tape._arr.get(i)
            return 0.0 if arr is None else wrap(np.zeros(arr.shape))
        return g

    def tensor(self, i):
        g = self.get(i)
        return g if isinstance(g, Tensor) else wrap(g)

    def set(self, i, g):
        self.adj[i] = g

    def add(self, i, g):
        T = self.tape
        if i not in T._arr and isinstance(g, Tensor) and g.ndim:
            g = g.sum()      # a 0-d operand broadcast over an array entry
        cur = self.adj.get(i)
        if cur is None:
            self.adj[i] = g
            return
        zc, zg = cur.__class__ is EfficientZero, g.__class__ is EfficientZero
        if zc and zg:
            graphs = [z.graph for z in (cur, g) if z.graph is not None]
            self.adj[i] = EfficientZero(graphs[0] + graphs[1] if len(graphs) == 2 else
                                        graphs[0] if graphs else None)
        elif zc or zg:   # PyTorch's sum with a zero tensor: -0.0 becomes +0.0
            real, z = (g, cur) if zc else (cur, g)
            self.adj[i] = real + (0.0 if z.graph is None else z.graph)
        else:
            self.adj[i] = cur + g

    def segment(self, start, stop):
        """Walk entries ``start`` down to ``stop + 1``, recording each adjoint."""
        A, T = self.arrays, self.tape
        reached, op, hits = self.reached, A.op, self.hits
        # only entries the walk can reach, not every entry of the range
        within = hits[np.searchsorted(hits, stop, "right"):np.searchsorted(hits, start, "right")]
        for i in within[::-1].tolist():
            if not reached[i]:
                continue
            code = int(op[i])
            if code >= N_ELEMENTWISE:
                if code == PYOUT:
                    reached[A.a[i]] = 1
                continue
            if K.NO_GRAD[code]:   # a comparison: no gradient flows through it
                continue
            g = self.adj.get(i)
            refs = T._inputs(i)
            if g.__class__ is EfficientZero:
                # a zero tensor's backward: the rule on +0s, where an input gets a zero
                # tensor as PyTorch's rule passes it on (ZERO_MODE 0), its graph kept
                gm = self.get(i)
                parts = entry_grads(self, i, gm if isinstance(gm, Tensor) else wrap(gm))
                for k in node_input_slots(T, i):
                    r, p = refs[k], parts[k]
                    if r < 0:
                        continue
                    if K.ZERO_MODE[code, k] == 0 and p.__class__ is not EfficientZero:
                        # +0s recorded so that their own gradient is a zero tensor again
                        p = EfficientZero(ELEMENTWISE["sgn"](p * 0.0) if isinstance(p, Tensor)
                                          and p._tape is not None else None)
                    self.add(r, p)
                    reached[r] = 1
                continue
            for r, p in zip(refs, entry_grads(self, i, g)):
                if r >= 0:
                    if p is not None:
                        self.add(r, p)
                    reached[r] = 1   # (reached through masks only: its inputs get zeros)

    def leaf_grads(self):
        leaves = self.tape._leaves
        hit = [i for i in self.hits.tolist() if self.reached[i] and i in leaves]
        return [leaves[i] for i in hit], [self.get(i) for i in hit]


def _direct_constant_backward(py, g, value):
    """``constant_backward``'s input gradient for a packed shared call (``record_shared``)
    of a broadcast, a sum or mean over dims, or a basic index, on a float64 input: the float
    walk's own step (``_direct_step``: ``spread_grad``, or ``g`` written at the index into
    zeros, as getitem's rule), without the rule's argument building (k-means' Newton
    direction: its create_graph walk steps 8-18 us each, the NumPy work ~1-6).  These
    rules record nothing from a constant gradient.  None elsewhere (the rule then)."""
    direct = _direct_call(py)
    if direct is None or direct[2][0] < 0:
        return None
    kind, r = direct[0], direct[2][0]
    k = kind[0]
    if k == DIRECT_INDEX:
        x = value(r)
        if x.__class__ is not np.ndarray or x.dtype != _F64 or \
                (g.__class__ is not float and (g.__class__ is not np.ndarray or g.dtype != _F64)):
            return None
        out = np.zeros(x.shape)
        out[kind[1]] = g
        return [out]
    if k == DIRECT_UNBIND or k == DIRECT_CAT:
        return None
    v = spread_grad(kind, g, value(r))
    return None if v is None else [v]


def entry_grads(adj, i, g, changed=None):
    """What elementwise entry ``i`` passes to each operand from its gradient ``g`` (a
    tensor, or None where only masks reached it): tensors aligned with its operands, built
    from the op table's partials in tensor ops (recorded under ``create_graph``).  The
    recorded walk runs every entry here; the float walk only entries whose node has hooks
    or whose saved values ``saved_tensors_hooks`` changed (``changed``: {operand ref or
    'out': tensor}).  Freed-graph and in-place checks first, as the Numba sweep's."""
    A, T = adj.arrays, adj.tape
    code = int(A.op[i])
    refs = T._inputs(i)
    dirty = A.dirty
    if K.SAVES[code] and A.freed[i] < K.UNCHECKED and (A.freed[i] or len(dirty)):
        r3 = list(refs) + [-1] * (3 - len(refs))
        status = K.saved_state(code, i, r3[0], r3[1], r3[2], A.op, A.freed, dirty, len(dirty) > 0)
        if status:
            _check(T, status, i)
    if g is None:
        return [None] * len(refs)
    pad = [False] * (3 - len(refs))
    flags = ([r >= 0 for r in refs] + pad
             + [r >= 0 or r in T._tensor_consts for r in refs] + pad)   # (need, tensors)
    if not changed and not PARTIALS_READ[code]:
        # (add, sub, neg, clone: terms of g alone -- no saved tensor or value made per
        # operand, ~3 us an entry of a create_graph walk)
        parts = GRAPH_PARTIALS[code](g, None, None, None, None, None, None, None, None, *flags)
    else:
        parts = _partials_read(adj, T, code, i, g, refs, changed or {}, flags)
    # None: the partial masks, PyTorch's where(mask, grad, 0): zeros that keep g's graph
    # and flow on (an op below multiplies them as usual)
    grads = [None if r < 0 else (_masked(g) if p is None else p) for r, p in zip(refs, parts)]
    if is_anomaly_enabled():    # detect_anomaly: name the node that returned NaN
        check_nan(node_name(T, i), [grads[k] for k in node_input_slots(T, i)
                                    if grads[k].__class__ is not EfficientZero])
    return grads


def _reads_operands(fn):
    """Does generated graph partial ``fn`` read an operand or the result (its tensor or its
    value), not only ``g`` and the flags?  From its code: the op table stays the one source."""
    names = {"x", "y", "z", "out", "xv", "yv", "zv", "outv"}
    # (any instruction naming one -- a load, or a closure cell for a nested function)
    return bool(names & set(fn.__code__.co_cellvars)) or any(
        ins.argval in names for ins in dis.get_instructions(fn))


PARTIALS_READ = tuple(_reads_operands(fn) for fn in GRAPH_PARTIALS)


def _partials_read(adj, T, code, i, g, refs, changed, flags):
    """``entry_grads``' partials of entry ``i`` (op ``code``) with its operands' saved
    tensors and values (``changed``: saved_tensors_hooks' replacements; ``flags``: the
    partials' need and tensor flags)."""
    pad = [None] * (3 - len(refs))
    ts = [changed[r] if r in changed else adj.saved(r) for r in refs] + pad
    vs = [changed[r]._value if r in changed else
          np.asarray(T._value(r)) if r >= 0 and r in T._arr else
          (T._value(r) if r >= 0 else T._c[-r - 1]) for r in refs] + pad
    out = changed.get("out")
    return GRAPH_PARTIALS[code](g, ts[0], ts[1], ts[2], adj.saved(i) if out is None else out,
                                vs[0], vs[1], vs[2], T._value(i) if out is None else out._value,
                                *flags)


def _broadcast_source(T, r):
    """The entry that operand ``r`` broadcasts (implicit broadcasting has no node), or None."""
    code, ra, _ = T._entry(r)
    py = pyop_at(T, ra) if code == PYOUT else None
    if py is not None and py.fwd is not None and py.name == "broadcast":
        return py.inputs[0]
    return None


class _NodeCall(GraphAdjoints):
    """Adjoints of a direct call of a node (``grad_fn(grad)``): saved values as tensors that
    record under grad mode, as a create_graph walk's, but no walk."""

    create_graph = False


def call_node(node, *grads):
    """``grad_fn(*grad_outputs)``: the gradients the node passes to its operands (None for
    one without grad; a tensor alone for a node with one operand), recorded when grad mode
    is on, as PyTorch's (where a node called directly runs its backward formula)."""
    T, i = node._tape, node._entry
    if T is None:                     # AccumulateGrad
        return ()
    A = TapeArrays(T)
    adj = _NodeCall(A, _EMPTY_I)
    grads = [g if isinstance(g, Tensor) or g is None else wrap(g) for g in grads]
    if A.op[i] < N_ELEMENTWISE:       # (broadcast operands' gradients are not reduced:
        refs = T._inputs(i)           # PyTorch reduces them when they flow on)
        out = [adj.tensor(r) if p.__class__ is EfficientZero else p   # (zeros shaped like the operand)
               for r, p in zip(T._inputs(i), entry_grads(adj, i, grads[0]))]
        slots = node_input_slots(T, i)          # one per edge (next_functions)
        refs, out = [refs[k] for k in slots], [out[k] for k in slots]
    else:
        py = pyop_at(T, i)
        _check_saved(A, i, py)
        grads = [adj.tensor(i + 1 + k) if g is None else g for k, g in enumerate(grads)]
        out = pyop_backward(py, grads, adj.saved, [adj.saved(i + 1 + k) for k in range(py.nout)])
        refs = py.inputs
    out = [p if r >= 0 and T._entry(r)[0] != CONST and not
           (T._entry(r)[0] < N_ELEMENTWISE and K.NO_GRAD[T._entry(r)[0]]) else None
           for r, p in zip(refs, out)]     # constants and comparisons get None
    return out[0] if len(out) == 1 else tuple(out)


def run_node(adj, s, state, changed):
    """Elementwise entry ``s`` in Python (not in the Numba sweep): for its node's hooks
    (``grad_fn.register_prehook``/``register_hook``, which see and may replace the gradients
    of the node's inputs, reduced to their shapes as PyTorch's are) or for values that
    ``saved_tensors_hooks`` unpacked differently."""
    T, reached = adj.tape, adj.reached
    g = adj.tensor(s)
    if state is not None and state.pre:
        g = state.run_pre([g])[0]
    refs = list(T._inputs(s))
    grads = entry_grads(adj, s, g, changed)
    for k, (r, p) in enumerate(zip(refs, grads)):
        src = None if r < 0 or p is None or p.__class__ is EfficientZero else _broadcast_source(T, r)
        if src is not None:
            refs[k], grads[k] = src, sum_to(p, np.shape(T._value(src)))
    if state is not None and state.post:
        slots = list(node_input_slots(T, s))
        new = state.run_post([grads[k] for k in slots], [g])
        for k, p in zip(slots, new):
            grads[k] = p
    for r, p in zip(refs, grads):
        if r >= 0 and p is not None:
            adj.add(r, p)
            reached[r] = 1


@jit
def _depends_below(op, a, b, out, r, lo):
    """Whether entry ``r`` depends on a source when ``r < lo`` may be outside the worked-out
    range: below it, only entries without work lie in a walk's graph (sources, links, and
    the ``arg`` entry of a three-operand op, whose operands are such entries or in range)."""
    if r < 0:
        return False
    if out[r] != 0:
        return True
    if r >= lo:
        return False
    o = op[r]
    if o == LINK:
        return True
    if o == ARG:
        p = a[r]
        q = b[r]
        return ((p >= 0 and (out[p] != 0 or (p < lo and op[p] == LINK)))
                or (q >= 0 and (out[q] != 0 or (q < lo and op[q] == LINK))))
    return False


@jit
def _depends_on(op, a, b, sources, heads, head_ptr, head_refs, lo, hi):
    """Per entry of ``lo..hi``: 1 if it depends on an entry marked in ``sources`` (1 for a
    ``link``, whose tape may hold one), marked in ``sources`` in place.
    ``heads``/``head_ptr``/``head_refs``: the pyfunc heads in order and their operand
    references, laid out flat."""
    out = sources
    h = np.searchsorted(heads, lo)
    for i in range(lo, hi + 1):
        o = op[i]
        if sources[i] != 0 or o == LINK:
            out[i] = 1
        elif o < N_ELEMENTWISE and _NO_GRAD[o]:
            continue   # a comparison: no gradient flows through it (where's condition)
        elif o < N_ELEMENTWISE or o == ARG:
            if _depends_below(op, a, b, out, a[i], lo) or _depends_below(op, a, b, out, b[i], lo):
                out[i] = 1
        elif o == PYOUT:
            out[i] = out[a[i]]
        elif o == PYFUNC:
            while h < heads.shape[0] and heads[h] < i:
                h += 1
            if h < heads.shape[0] and heads[h] == i:
                for k in range(head_ptr[h], head_ptr[h + 1]):
                    if _depends_below(op, a, b, out, head_refs[k], lo):
                        out[i] = 1


def needed_entries(T, A, inputs, lo=0, hi=None):
    """Which entries of ``T`` lead to one of ``inputs`` (backward's and grad's ``inputs=``):
    the walk runs hooks, Python rules and ``retain_grad`` only there, as PyTorch prunes
    the nodes it does not need.  Only entries ``lo..hi`` (the walk's range) are worked out."""
    sources = np.zeros(A.n, np.uint8)
    for x in inputs:
        for i in (T._leaf_of.get(id(x)), x._entry if x._tape is T else None):
            if i is not None and i < A.n:
                sources[i] = 1
    if len(T._leaf_of) != len(T._leaves):
        # a leaf whose memory changed in place where nothing recorded (through ``detach()``,
        # under no_grad, ``.data``) was unbound, to be registered again with its new value:
        # it is still the leaf of the entries that used it before (PyTorch: one
        # AccumulateGrad), which ``_leaf_of`` no longer names.  (Only then: a scan of the
        # tape's leaves.)
        wanted = {id(x) for x in inputs}   # (alive, as the tape's leaves are: ids unique)
        for i, t in T._leaves.items():
            if id(t) in wanted and i < A.n:
                sources[i] = 1
    _depends_on(A.op, A.a, A.b, sources, *A.heads, lo, A.n - 1 if hi is None else hi)
    return sources


def executed_entries(T, needed, seeds, one_root, inputs, runs_on):
    """The entries whose nodes a walk with ``inputs=`` runs, as PyTorch's engine does: those
    that lead to an input, and the output's own node when it is the only output -- but not
    a non-leaf input's own node, where the gradient is taken before it would run, unless
    another input is reached through it (``runs_on``: those inputs' entries)."""
    executed = needed.copy()
    if one_root:
        for i in seeds:
            executed[i] = 1
    for x in inputs:
        j = x._entry if x._tape is T else None
        if j is not None and j < len(executed) and (runs_on is None or j not in runs_on):
            executed[j] = 0
    return executed


def _runs_on(T, targets, inputs):
    """The entries of non-leaf inputs on ``T`` whose node the walk runs on: some other input
    is reached through it."""
    mine = [j for _, S, j in targets if S is T]
    if not mine:
        return []
    A = TapeArrays(T)
    out = []
    for j in mine:
        others = [x for x in inputs if not (x._tape is T and x._entry == j)]
        if others and needed_entries(T, A, others)[j]:
            out.append(j)
    return out


def walk_tape(T, seeds, create_graph, inputs=None, before_hooks=None, one_root=False):
    """The reverse walk over tape ``T`` from ``{entry: seed}``; returns its adjoints.  With
    ``inputs``, only the parts of the graph that lead to them run hooks and rules, and the
    output's own node when it is the only output (``one_root``: PyTorch starts there; with
    several outputs it starts from a dummy root and runs only the nodes it needs).
    ``before_hooks``: ``{entry: None}`` filled with those entries' gradients as they were
    before their hooks ran (what ``autograd.grad`` returns for a non-leaf input)."""
    A = TapeArrays(T, _EMPTY_I, True)   # (in-place changes looked up once the reach is known)
    hits, low, swept, stops = A.reach(seeds)
    A.find_dirty(hits)
    start = max(seeds)
    needed = executed = None if inputs is None else needed_entries(T, A, inputs, low, start)
    if needed is not None:
        # the sweep still runs entries that lead to no input (their adjoints reach only
        # entries like them), but PyTorch does not run those nodes: what they saved being
        # freed or changed in place raises nothing, and a backward frees none of them
        executed = executed_entries(T, needed, seeds, one_root, inputs, before_hooks)
        A.check_only(executed, hits)
    # under detect_anomaly every entry is walked in Python, so that a NaN names its node
    adj = (GraphAdjoints if create_graph or is_anomaly_enabled() else FloatAdjoints)(A, hits,
                                                                                swept)
    reached = adj.reached
    numpy_rules = adj.__class__ is FloatAdjoints
    for i, g in seeds.items():
        adj.seed(i, g)
        reached[i] = 1
    large = adj.large
    if large:   # (each runs alone, at a stop of its own)
        stops = sorted(set(stops).union(large), reverse=True)
        large = set(large)
    if numpy_rules and len(adj.off) and stops:   # (basic indices the sweep runs itself)
        adj.gather, stops = _gathers(T, stops, T._arr, adj.off, needed)
    pos = start
    # Python code runs at the stops only (hooks, Python backwards) and sees grad mode set
    # to create_graph, as in PyTorch; a walk whose stops run none (no stops, or only full
    # sums and means the float walk adds itself) does not switch it (the recorded walk,
    # whose every entry records, runs under it as a whole: run_backward).  Nothing can
    # attach a hook to a later stop when no Python code runs, so their scales hold.
    scales = [_spread_scale(adj, T, s, needed) for s in stops]
    python = None in scales
    with grad_mode(create_graph) if python else _NO_SWITCH:
        for s, scale in zip(stops, scales):
            if pos > s:
                py = T._py.get(s)
                if py is not None and pos <= s + pyop_nout(py):
                    # only the head's own outputs lie between (a Python op's result is
                    # where most walks start): they pass reach to it, no kernel call
                    for k in range(s + 1, pos + 1):
                        if reached[k]:
                            reached[s] = 1
                else:
                    adj.segment(pos, s)
            pos = s
            pruned = needed is not None and not needed[s]
            if not reached[s] or (pruned and not (one_root and s in seeds)):
                if s in large:   # (pruning skips hooks and Python rules, not the sweep)
                    adj.entry(s)
                    pos = s - 1
                continue
            if python and scale is not None:   # (a hook that ran may have attached one)
                scale = _spread_scale(adj, T, s, needed)
            if scale is not None:
                r = pyop_inputs(T._py[s])[0]
                g = adj.adj[s + 1]
                adj.add_number(r, g if scale == 1.0 else g * scale)
                reached[r] = 1
                pos = s - 1
                continue
            hooks = T._hooks.get(s)
            if hooks:
                g = given = adj.tensor(s)
                if before_hooks is not None and s in before_hooks:
                    before_hooks[s] = g if create_graph else wrap(np.array(g._value, copy=True))
                for hook in list(hooks):
                    g = run_hook(hook, g)
                adj.set(s, g)
                if g is not given and reached[s] == 2:
                    # a hook's own result in place of sgn's zero tensor (g + 1): a gradient
                    # like any other from here, not a zero tensor the sweep passes on as +0
                    reached[s] = 1
            py = None if pruned else pyop_at(T, s)
            state = None if pruned else node_state(T, s)   # hooks on the node (autograd.graph)
            if py is not None:
                _check_saved(A, s, py)
                _pyop_step(adj, py, s, state, reached, numpy_rules, create_graph)
                pos = s - 1
            elif not pruned and A.op[s] < N_ELEMENTWISE and not K.NO_GRAD[A.op[s]]:
                changed = unpack_entry(T, s)    # saved_tensors_hooks
                if changed is not None or (state is not None and (state.pre or state.post)):
                    run_node(adj, s, state, changed)
                    pos = s - 1
            if pos == s and s in large:
                adj.entry(s)
                pos = s - 1
    if pos >= low:   # (nothing below the lowest reachable entry has work)
        adj.segment(pos, low - 1)
    adj.needed, adj.executed = needed, executed
    adj.stops = stops
    if A.new_plan is not None and A.new_plan.reached is not None:
        WALK_PLANS.publish(A.new_plan)
        T._walk_plan = (A.new_plan, A.n, len(A.new_plan.stops))
    return adj


def _pyop_step(adj, py, s, state, reached, numpy_rules, create_graph):
    """The walk's step at Python op ``py`` (head ``s``), its results' gradients in: its
    inputs' gradients added to their adjoints (and marked reached).  The float walk runs a
    rule with no node hooks (``state``) on NumPy values where it can (``numpy_rules``)."""
    if state is None and numpy_rules and _direct_backward(adj, py, s, reached):
        return
    grads_in = None
    if state is None and py.nout == 1:
        grads_in = (pyop_numpy_backward(py, adj.get(s + 1), adj.value(s + 1), adj.value)
                    if numpy_rules else
                    adj.constant_backward(py, s) if create_graph else None)
    if grads_in is None:
        grads_in = _run_pyop(adj, py, s, state, reached)
    for r, g in zip(py.inputs, grads_in):
        if g is not None and r >= 0:
            adj.add(r, g)
            reached[r] = 1


def _direct_backward(adj, py, s, reached):
    """The float walk's own backward of the array ops walks stop at most (``direct_kind``:
    basic indices, unbind, cat and stack, broadcasts and sums over dims) at Python op
    ``py`` (head ``s``): ``_direct_step``.  False for any other op."""
    if py.backward_fn is not None:
        return False
    kind = direct_kind(py.fwd)
    return kind is not None and _direct_step(adj, kind, py.fwd, py.inputs, py.nout, s, reached)


def _direct_step(adj, kind, fwd, refs, nout, s, reached):
    """The float walk's own backward of array call ``fwd`` of kind ``kind`` (``direct_kind``;
    inputs ``refs``, ``nout`` results from head ``s``), the results' gradients in: ``x[idx]``
    with a basic index adds its gradient into x's adjoint at idx, without the rule's zeros;
    ``cat`` and ``stack`` give each input its slice of g; ``unbind`` (a tensor's iteration)
    stacks its parts'; broadcasts and sums over dims, the functions their rules call
    (``spread_grad``): the same values as their rules (tests/test_numpy_rules.py).  False
    where it does not apply (the rule then)."""
    k = kind[0]
    if k == DIRECT_INDEX:
        r = refs[0]
        if r >= 0 and adj.add_at(r, kind[1], adj.get(s + 1)):
            reached[r] = 1
            return True
        return False
    if k == DIRECT_UNBIND:
        return _unbind_backward(adj, refs, nout, s, reached, kind[1])
    if k == DIRECT_CAT:
        parts = call_parts(fwd, refs, lambda r: _float64_shape(adj.value(r)))
        if parts is None:
            return False
        g = adj.get(s + 1)
        if g.__class__ is not np.ndarray:
            return False
        for r, at in parts:
            if r >= 0:
                adj.add(r, g[at])
                reached[r] = 1
        return True
    r = refs[0]
    if nout != 1 or r < 0:
        return False
    g = spread_grad(kind, adj.get(s + 1), adj.value(r))
    if g is None:
        return False
    adj.add(r, g)
    reached[r] = 1
    return True


def _zeros_like_entry(adj, i):
    v = adj.value(i)
    return wrap(np.zeros(v.shape) if v.__class__ is np.ndarray and v.ndim else 0.0)


def _unbind_backward(adj, refs, n, s, reached, dim):
    """Unbind's rule in the float walk (``n`` parts): the parts' gradients stacked (zeros for
    a part no gradient reached), a 1-D input's as one slice of the adjoints of its parts'
    entries."""
    r = refs[0]
    if r < 0 or _float64_shape(adj.value(r)) is None:
        return False
    if adj.tape._arr.get(s + 1) is None:   # (0-d parts: number entries s + 1 ... s + n)
        if adj.value(r).ndim != 1:
            return False
        g = adj.adj[s + 1:s + 1 + n].copy()
        g[reached[s + 1:s + 1 + n] == 0] = 0.0
    else:
        g = np.stack([adj.get(k) if reached[k] else np.zeros(adj.value(k).shape)
                      for k in range(s + 1, s + 1 + n)], axis=dim)
    adj.add(r, g)
    reached[r] = 1
    return True


def _float64_shape(v):
    if v.__class__ is float:   # (a float64 number entry)
        return ()
    return v.shape if v.__class__ is np.ndarray and v.dtype == np.float64 else None


def _run_pyop(adj, py, s, state, reached):
    """The input gradients of recorded Python op ``py`` at stop ``s``, its rule (or custom
    backward) run on tensors, with the node's hooks."""
    # None for an output no gradient reached, as node hooks see it in PyTorch; a custom
    # Function materializes zeros itself unless told not to, an array op here
    grads = [adj.tensor(s + 1 + k) if reached[s + 1 + k] else None for k in range(py.nout)]
    if state is not None and state.pre:
        grads = state.run_pre(grads)
    seen = grads
    if py.backward_fn is None:   # (zeros, +0. as PyTorch's: not the walk's -0. start)
        grads = [_zeros_like_entry(adj, s + 1 + k) if g is None else g
                 for k, g in enumerate(grads)]
    grads_in = pyop_backward(py, grads, adj.saved, [adj.saved(s + 1 + k) for k in range(py.nout)])
    if state is not None and state.post:
        grads_in = state.run_post(grads_in, seen)
    if is_anomaly_enabled():
        check_nan(py.name, grads_in)
    return grads_in


def _spread_scale(adj, T, s, needed):
    """The factor of stop ``s`` when it is a full sum or mean (``full_reduction_scale``) whose
    gradient the float walk adds itself: nothing attached to its node or result, not
    pruned by ``inputs=``; else None (the walk calls its rule)."""
    if adj.create_graph or (needed is not None and not needed[s]):
        return None
    py = T._py.get(s)
    call = None if py is None else pyop_array_call(py)   # (a stop's PyOp is not made here)
    if call is None or len(call[0]) != 1 or call[0][0] < 0 or not is_full_reduction(call[1]):
        return None
    arrays = T._arr
    if s + 1 in arrays or T._hooks.get(s) or node_state(T, s) is not None:
        return None    # (a result that is not a float64 number: float32, keepdim)
    x = arrays.get(call[0][0])
    return full_reduction_scale(call[1], 1 if x is None else x.size)


class Grads:
    """Gradients gathered for leaves (and retained non-leaves), summed per tensor."""

    __slots__ = ("ts", "gs", "index", "retained")

    def __init__(self):
        self.ts, self.gs, self.index, self.retained = [], [], None, set()

    def _idx(self):
        if self.index is None:
            self.index = {id(t): k for k, t in enumerate(self.ts)}
        return self.index

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


def run_backward(tensors, grad_tensors, retain_graph, inputs=None, create_graph=False):
    """Walk from ``tensors`` seeded with ``grad_tensors``.

    Returns ``(grads, captured)``: ``grads`` (a Grads) holds the summed gradient of every
    leaf reached and of every reached non-leaf that retains grad; ``captured`` holds the
    gradients of ``inputs`` (aligned with it, None where unreached).  With
    ``create_graph`` the gradients are recorded tensors, else floats and ndarrays.
    """
    pack_pending()   # what ops saved inside an active saved_tensors_hooks block
    if len(tensors) == 1 and not create_graph:
        acc = _flat_walk(tensors[0], grad_tensors[0], retain_graph, inputs)
        if acc is not None:
            return acc, [] if inputs is None else [acc.get(x) for x in inputs]
    if create_graph:
        T = recording()   # (where the gradients' entries go: see _flat_walk)
        if T is not None:
            T._gradients = True
    work = {}
    acc = Grads()
    for k, (t, g) in enumerate(zip(tensors, grad_tensors)):
        if not isinstance(t, Tensor):
            raise TypeError(f"backward(): expected a Tensor, got {type(t).__name__}")
        if t._tape is None:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not "
                               "have a grad_fn")
        gv = seed_value(k, t, g)
        if create_graph:   # a given gradient stays a tensor (it may require grad)
            v = t._value
            if g is None and v.__class__ is not float and v.dtype.kind == "f":
                gv = np.ones(v.shape, v.dtype)   # (the output's dtype, as PyTorch: a float32
                # graph's gradients round as float32, not as float64 cast at the end)
            gv = g if isinstance(g, Tensor) else wrap(gv)
        if _is_leaf(t):
            acc.extend([t], [gv])
            continue
        seeds = work.setdefault(id(t._tape), [t._tape, {}])[1]
        seeds[t._entry] = seeds[t._entry] + gv if t._entry in seeds else gv

    targets = []  # (position, tape, entry) for non-leaf inputs
    captured = [None] * (len(inputs) if inputs is not None else 0)
    if inputs is not None:
        for pos, x in enumerate(inputs):
            if not _is_leaf(x):
                targets.append((pos, x._tape, x._entry))

    walked = []
    # (the float walk sets grad mode where it runs Python code: walk_tape)
    recorded = create_graph or is_anomaly_enabled()
    with grad_mode(create_graph) if recorded else _NO_SWITCH:
        while work:
            _, (T, seeds) = work.popitem()
            # a non-leaf input whose node runs on (another input lies beyond it) is captured
            # before its hooks; one whose node does not run, after them (PyTorch's order)
            before = {j: None for j in _runs_on(T, targets, inputs)} if targets else {}
            adj = walk_tape(T, seeds, create_graph, inputs, before, len(tensors) == 1)
            walked.append(adj)
            reached = adj.reached
            acc.extend(*adj.leaf_grads())
            for i, (S, j) in T._links.items():
                if i < len(reached) and reached[i]:
                    s = work.setdefault(id(S), [S, {}])[1]
                    g = adj.get(i)
                    s[j] = s[j] + g if j in s else g
            kept = set()
            for ref in T._retain.values():
                t = ref()
                if t is None or t._tape is not T or id(t) in kept:
                    continue
                # the tensor's entry now: an in-place op since retain_grad moved it on, and
                # PyTorch's retained gradient follows it (that of the changed tensor)
                i = t._entry
                if i < len(reached) and reached[i] and (adj.needed is None or adj.needed[i]
                                                        or (len(tensors) == 1 and i in seeds)):
                    kept.add(id(t))
                    acc.extend([t], [adj.get(i)])
                    acc.retained.add(id(t))
            for pos, S, j in targets:
                if S is T and j < len(reached) and reached[j]:
                    g = adj.get(j) if before.get(j) is None else before[j]
                    if isinstance(g, Tensor) and not create_graph:
                        g = g._value
                    captured[pos] = g if captured[pos] is None else captured[pos] + g

    if not retain_graph:
        for adj in walked:
            T = adj.tape
            hits, reached = adj.hits, adj.reached
            freed = T._freed
            if freed is None or len(freed) < len(reached):
                freed = T._freed = grow_marks(freed, len(reached))
            if adj.executed is not None:   # (only the nodes a walk with inputs= ran)
                reached = reached & adj.executed
            if len(hits) <= _FEW_HITS:
                for i in hits.tolist():
                    if reached[i]:
                        freed[i] = 1
            elif len(reached) <= _SMALL:   # (one whole-array op: reached is 0 off the hits)
                head = freed[:len(reached)]
                np.bitwise_or(head, reached != 0, out=head)
            else:   # (a mark of 1: reached by zero tensors only is 2, which as a freed
                freed[hits] |= reached[hits] != 0   # mark would mean UNCHECKED)
            release_saved(T, reached, adj.stops)   # what hooks packed and Functions saved goes too
            if fresh_default_tape(T):   # (T records no more: what only it read can go)
                release_outlived(T)
    if inputs is not None:
        for pos, x in enumerate(inputs):
            if _is_leaf(x):
                captured[pos] = acc.get(x)
    return acc, captured


def _flat_walk(t, g, retain_graph, inputs=None):
    """The walk of ``run_backward`` from ``t`` seeded with ``g`` (its ``grad_tensors``
    entry: None for ones; ``t`` float64, a number or an array) where its tape holds
    nothing the general walk's setup is for: elementwise entries and array ops of float64
    values (a custom Function, or a result of another dtype, only where the walk does not
    reach it: it looks at a Python op once the sweep reached it, and returns None at one it
    cannot take, or past ``_FLAT_UNREACHED`` ones passed unreached, nothing outside it
    changed by then); no links to other tapes, hooks, retained tensors,
    node hooks, in-place changes, freed entries or changed constant tensors; at most
    ``_SMALL`` entries, ``_FLAT_STOPS`` Python ops and ``_FLAT_ELEMENTS`` array elements; not
    on a tape a create_graph walk recorded gradients onto (``T._gradients``): a walk from
    such a gradient reaches its own entries and little of the forward graph below them,
    which the general walk's reach pass skips and this walk's whole-tape layout and stop
    loop do not (k-means' Hessian diagonal, the walk from J: 80 us general, 120 here).
    With ``inputs`` (``autograd.grad``, ``backward(inputs=)``), only where they are leaves
    and hold every leaf of the tape: then every entry leads to one of them, and the walk
    runs and frees what the general walk's pruning would.  Every array of the tape is laid
    out (``FlatAdjoints``), not only those the graph reaches; one sweep call between Python
    ops (one in all without any; basic indices run inside it, ``_gathers``), and at each
    the general walk's step (``_pyop_step``; a
    full sum's or mean's gradient added as ``_spread_scale``'s): the same kernel, seed,
    adjoint start, reach and freed marks as ``walk_tape`` and ``run_backward``'s (the tests
    run both: the ``both_walks`` fixture).  None where it does not apply, before anything
    outside it changed.  A backward of a small program spent ~20 us on the general walk's
    setup (plans, the walk index, the reach pass, stops): ``(w * 3.).backward()`` with its
    record 25 -> 15 us.  The sweep ends at the last entry it reached, without the reach
    pass that bounds the general walk: on a tape this small that costs less than the
    pass."""
    if not isinstance(t, Tensor):
        return None   # (run_backward's TypeError)
    T = t._tape
    v = t._value
    if (T.__class__ is not Tape or T._links or T._hooks or T._retain or T._dirty
            or T._freed is not None or not FLAT_WALK or is_anomaly_enabled()
            or T._leaves.get(t._entry) is t or len(T._stops) > _FLAT_STOPS or T._gradients
            or (v.__class__ is not float and (v.__class__ is not np.ndarray or v.dtype != _F64))):
        return None
    if inputs is not None and not _flat_inputs(T, inputs):
        return None
    # (run_backward's seed, and its errors: the general walk would raise the same first)
    seed = 1.0 if g is None and v.__class__ is float else seed_value(0, t, g)
    sources = T._const_sources
    if sources and (len(sources) > _FEW_HITS or any(getattr(c, "_version", 0) != v
                                                     for c, v in sources.values())):
        return None
    op, a, b, val = T._arrays()
    n = len(op)
    i = t._entry
    # (after the flush, which may have retired the tape: then it is another one)
    if n > _SMALL or i >= n or len(T._stops) != len(T._py):
        return None
    arrays = T._arr
    if len(arrays) > _FLAT_ARRAYS:
        return None
    large = []   # (elementwise entries of _FLAT_LARGE elements or more: run alone)
    if arrays:
        flat = sorted(arrays)
        arrs = list(map(arrays.__getitem__, flat))
        sizes = list(map(_SIZE, arrs))
        limit = _FLAT_LARGE
        if sum(sizes) > _FLAT_ELEMENTS and \
                sum(size for size in sizes if size < _FLAT_LARGE) > _FLAT_ELEMENTS:
            limit = _LARGE   # (walk_tape's limit: medium arrays run alone too)
        if max(sizes) >= limit:   # (walk_tape's layout: see _LARGE)
            small = [size < limit for size in sizes]
            large = [k for k, s in zip(flat, small) if not s and op[k] < N_ELEMENTWISE and k <= i]
            flat = [k for k, s in zip(flat, small) if s]
            arrs = [v for v, s in zip(arrs, small) if s]
            sizes = [size for size, s in zip(sizes, small) if s]
        if sum(sizes) > _FLAT_ELEMENTS:
            return None
    for head in T._stops:
        if head.__class__ is not int:
            return None   # (a node's hooks: NodeState, an int of its own class)
    heads = [head for head in T._stops if head < i]   # (none after the seed is reached)
    large_set = set(large) if large else _NO_HEADS
    off = nel = _EMPTY_I
    aval = aadj = _EMPTY_F
    if arrays:
        off, nel = np.empty(n, np.int64), np.zeros(n, np.int64)
        _place(off, nel, np.array(flat, np.int64), np.array(sizes, np.int64))
        aval = np.concatenate(arrs + _SCRATCH, axis=None, dtype=np.float64)
        aadj = np.empty(len(aval))
        aadj.fill(-0.0)
    c = T._c
    consts = np.array(c, np.float64) if len(c) <= _FEW_HITS else walk_index(T, n)[0]
    adj = np.empty(n)
    adj.fill(-0.0)   # (as FloatAdjoints: -0.0 + g is g)
    marks = np.zeros(2 * n, np.uint8)   # (one allocation: reached, and freed marks none yet)
    reached, freed = marks[:n], marks[n:]
    # (FlatAdjoints: made where more than numbers and laid-out arrays take part; else at
    # the first rule, below)
    fa = None
    if large or seed.__class__ is not float or i in arrays or \
            (arrays and len(flat) < len(arrays)):
        fa = FlatAdjoints(_FlatArrays(T, op, a, b, val, consts, freed), adj, reached, off, nel,
                          aval, aadj)
        fa.seed(i, seed)   # (walk_tape's seed)
    else:
        adj[i] = seed
    reached[i] = 1
    pos = i
    gather = _EMPTY_I
    if arrays and heads:   # (basic indices of laid-out arrays: the sweep runs them itself)
        gather, heads = _gathers(T, heads, arrays, off, states=False)
    sweeps = (op, a, b, val, consts, adj, reached, freed, _EMPTY_I, off, nel, aval, aadj, gather)
    # walk_tape's stops: Python ops, and large entries, each run alone on its arrays.  A
    # stop is looked at (``_flat_stop``) only once the sweep reached it; one it cannot take
    # hands the whole walk to the general one (nothing outside this walk changed yet).
    # Stops not reached cost a sweep call each: past _FLAT_UNREACHED of them (a tape that
    # keeps earlier graphs: a Jacobian loop's rows with retain_graph, evaluations without
    # backward) the general walk's reach pass, which passes them over, costs less.
    switch = None   # (walk_tape's grad mode for the rules, set at the first one)
    unreached = 0
    try:
        work = heads[::-1] if not large else sorted(heads + large, reverse=True)
        for head in work:
            if head in large_set:
                if pos > head:
                    _sweep(T, sweeps, pos, head)
                fa.entry(head)   # (nothing where it is not reached)
                pos = head - 1
                continue
            py = T._py.get(head)
            if py is None:
                return None
            nout = pyop_nout(py)
            if pos <= head + nout:   # (only its results between: they pass reach on)
                if reached[pos] if nout == 1 else reached[head + 1:pos + 1].any():
                    reached[head] = 1
            else:
                _sweep(T, sweeps, pos, head)
            pos = head
            if not reached[head]:
                unreached += 1
                if unreached > _FLAT_UNREACHED:
                    return None
                continue
            step = _flat_stop(T, head, py)
            if step is None:
                return None
            r, scale, check = step
            if scale is not None:   # (walk_tape's step at a full sum or mean)
                g = adj.item(head + 1)
                if scale != 1.0:
                    g = g * scale
                if fa is not None:
                    fa.add_number(r, g)
                elif r in arrays:   # (add_number's step for an entry in the layout)
                    slot = aadj[off[r]:off[r] + nel[r]]
                    slot += g
                else:
                    adj[r] += g
                reached[r] = 1
            else:
                if switch is None:
                    switch = grad_mode(False)
                    switch.__enter__()
                    if fa is None:
                        fa = FlatAdjoints(_FlatArrays(T, op, a, b, val, consts, freed), adj,
                                          reached, off, nel, aval, aadj)
                if py.__class__ is tuple:
                    kind = _CALL_FACTS[py[2]][2]   # (set by _flat_stop)
                    if kind is not None and not check and _direct_step(
                            fa, kind, CALLS[py[2]], py[1], 1, head, reached):
                        pos = head - 1
                        continue
                    py = pyop_at(T, head)
                if check:
                    _check_saved(fa.arrays, head, py)
                _pyop_step(fa, py, head, None, reached, True, False)
            pos = head - 1
    finally:
        if switch is not None:
            switch.__exit__(None, None, None)
    pending = int(np.count_nonzero(reached[:pos + 1])) if heads or large else 1
    if pending:
        _sweep(T, sweeps, pos, -1, pending)
    acc = Grads()
    leaves = T._leaves
    if leaves:
        hit = [k for k in leaves if k < n and reached[k]]
        acc.ts = [leaves[k] for k in hit]
        acc.gs = [adj.item(k) if k not in arrays else
                  aadj[off[k]:off[k] + nel[k]].reshape(arrays[k].shape) if off[k] >= 0 else
                  fa.get(k) for k in hit]
    if not retain_graph:
        np.minimum(reached, 1, out=freed)   # (1, as run_backward marks them; none before)
        T._freed = freed
        if fresh_default_tape(T):
            release_outlived(T)
    return acc


def _sweep(T, arrays, start, stop, pending=_UNBOUNDED):
    """``_flat_walk``'s sweep of entries ``start`` down to ``stop + 1`` (``arrays``: the
    kernel's arguments before them), as ``FloatAdjoints.segment``."""
    status, at = K.reverse(*arrays, start, stop, pending)
    _check(T, status, at)


class FlatAdjoints(FloatAdjoints):
    """``FloatAdjoints`` over ``_flat_walk``'s arrays (``arrays``: a ``_FlatArrays``), for its
    seed, its steps at Python ops and its large entries: every array of the tape under
    ``_FLAT_LARGE`` elements in the flat layout, larger ones in ``side``."""

    __slots__ = ()

    def __init__(self, arrays, adj, reached, off, nel, aval, aadj):
        self.tape, self.arrays, self.adj, self.reached = arrays.tape, arrays, adj, reached
        self.off, self.nel, self.aval, self.aadj = off, nel, aval, aadj
        self.side, self.owned, self.spread, self.large = {}, set(), set(), ()
        self.gather = _EMPTY_I


class _FlatArrays:
    """What ``FloatAdjoints.entry`` and ``_check_saved`` read of a ``TapeArrays``, for
    ``_flat_walk`` (whose tape has no freed entries and no in-place changes)."""

    __slots__ = ("tape", "op", "a", "b", "val", "consts", "freed", "dirty", "overwritten")

    def __init__(self, T, op, a, b, val, consts, freed):
        self.tape, self.op, self.a, self.b, self.val = T, op, a, b, val
        self.consts, self.freed, self.dirty, self.overwritten = consts, freed, _EMPTY_I, None


def _flat_inputs(T, inputs):
    """May ``_flat_walk`` take a walk with ``inputs``: leaves, every leaf of ``T`` among them,
    none of them unbound (changed in place where nothing records: two entries of one
    tensor, whose gradients the general walk sums)?"""
    if len(T._leaf_of) != len(T._leaves):
        return False
    wanted = set()
    for x in inputs:
        if not isinstance(x, Tensor) or not _is_leaf(x):
            return False
        wanted.add(id(x))
    return all(id(x) in wanted for x in T._leaves.values())


def _flat_stop(T, head, py):
    """``(input, scale, check)`` for the Python op ``py`` at ``head`` where ``_flat_walk``
    can take it: an array op (not a custom Function) of float64 inputs and results
    (nothing attached to its node: the walk takes no tape with node hooks); ``scale`` the
    factor of a full sum or mean of one input to a number (``_spread_scale``: ``input`` its
    reference), else None (the general walk's step); ``check``: does it hold index or
    constant tensors whose in-place change ``_check_saved`` looks for (nothing else it
    looks for is on the tape).  Else None."""
    if py.__class__ is tuple:   # (a shared call: what the walk needs of it, kept per call)
        facts = _CALL_FACTS.get(py[2])
        if facts is None:
            facts = _call_facts(py[2])
        reduction, check, _ = facts
        refs, nout = py[1], 1
    else:
        if py.backward_fn is not None:
            return None
        fwd = py.fwd
        refs, nout = py.inputs, py.nout
        reduction = fwd[0] if is_full_reduction(fwd) else None
        check = py.versions is not None or any(v.__class__ is Tensor for v in fwd[1])
    arrays = T._arr
    if reduction is not None and nout == 1 and len(refs) == 1 and refs[0] >= 0 \
            and head + 1 not in arrays:
        if reduction == "sum":   # (its gradient is added as walk_tape adds it)
            return refs[0], 1.0, False
        x = arrays.get(refs[0])
        return refs[0], full_reduction_scale(CALLS[py[2]] if py.__class__ is tuple else py.fwd,
                                             1 if x is None else x.size), False
    # (a value of another float dtype: the general walk keeps its gradient in that dtype,
    # where the flat layout would hold it as float64; integer results, such as max's
    # indices, take none)
    for k in range(head + 1, head + nout + 1):
        v = arrays.get(k)
        if v is not None and v.dtype != _F64 and v.dtype.kind not in "biu":
            return None
    for r in refs:
        v = arrays.get(r)
        if v is not None and v.dtype != _F64:
            return None
    return -1, None, check


# shared call number -> (``"sum"``/``"mean"`` for a full reduction, else None; does the call
# hold tensors; its ``direct_kind``), for ``_flat_walk``: CALLS only grows, a number's call
# never changes
_CALL_FACTS = {}
_NO_HEADS = frozenset()


def _call_facts(call):
    fwd = CALLS[call]
    facts = _CALL_FACTS[call] = (fwd[0] if is_full_reduction(fwd) else None,
                                 any(v.__class__ is Tensor for v in fwd[1]), direct_kind(fwd))
    return facts


def _gathers(T, heads, arrays, off, needed=None, states=True):
    """``(gather, heads left)`` for a float walk: the Python ops among the stops ``heads``
    that are a basic index (``DIRECT_INDEX``), a broadcast or a sum over dims that
    ``spread_run`` takes, of a float64 array entry in the layout, whose result is in it too
    (or a number, for an index), with nothing attached to their node and not pruned
    (``needed``; ``states``: look for node hooks, which ``_flat_walk`` turned away), go
    to the sweep (``kernels.reverse``'s ``gather``: per entry a position,
    then each one's input, then its size and map, or ``spread_run``'s four numbers); the
    others stay the walk's.  Its step at them was ``_direct_step``'s: the same sums, in
    the same order.  Where none is, ``_EMPTY_I`` and ``heads`` itself."""
    found = None
    py_ops = T._py
    for h in heads:
        py = py_ops.get(h)
        if py is None or (needed is not None and not needed[h]) or \
                (states and node_state(T, h) is not None):
            continue
        direct = _direct_call(py)
        if direct is None or direct[0][0] == DIRECT_UNBIND:
            continue
        kind, fwd, refs, key = direct
        if kind[0] == DIRECT_CAT:
            r, at = -1, _cat_blocks(fwd, refs, arrays, off, h)
        else:
            r = refs[0]
            x = _laid_out(arrays, off, r)
            v = arrays.get(h + 1)
            if x is None or (v is not None and _laid_out(arrays, off, h + 1) is None):
                continue
            if kind[0] == DIRECT_INDEX:
                at = _index_map(x.shape, kind[1], key)
            elif v is None:
                continue
            else:
                at = _spread_map(kind, x.shape, v.shape)
        if at is None:
            continue
        if found is None:
            found = []
        found.append((h, r, at))
    if found is None:
        return _EMPTY_I, heads
    # (one array, filled in place: an array per part and a concatenate cost twice as much)
    n = len(off)
    size = n
    for _, _, at in found:
        size += 5 if at.__class__ is tuple else len(at) if at.__class__ is list else 2 + len(at)
    gather = np.full(size, -1, np.int64)
    pos = n
    for h, r, at in found:
        gather[h] = pos
        gather[pos] = r
        if at.__class__ is tuple:   # (spread_run's four numbers)
            gather[pos + 1:pos + 5] = at
            pos += 5
        elif at.__class__ is list:   # (_cat_blocks': -4, then the parts, from pos + 1)
            gather[pos + 1:pos + len(at)] = at[1:]
            pos += len(at)
        else:
            k = len(at)
            gather[pos + 1] = k
            gather[pos + 2:pos + 2 + k] = at
            pos += 2 + k
    taken = {h for h, _, _ in found}
    return gather, [h for h in heads if h not in taken]


_SWEPT_CALLS = frozenset(("getitem", "expand", "sum", "mean", "cat", "stack"))   # (calls _gathers may take)


def _direct_call(py):
    """``(kind, fwd, inputs, shared call number or None)`` of a value of a tape's ``_py``
    whose backward the walks run themselves (``direct_kind``: one output, no custom
    backward, no index tensor or saved index versions), else None."""
    if py.__class__ is tuple:
        facts = _CALL_FACTS.get(py[2])
        if facts is None:
            facts = _call_facts(py[2])
        if facts[2] is None or facts[1]:   # (facts[1]: a tensor among the call's arguments)
            return None
        return facts[2], CALLS[py[2]], py[1], py[2]
    fwd = py.fwd
    if fwd is None or fwd[0] not in _SWEPT_CALLS or py.backward_fn is not None \
            or py.nout != 1 or py.versions is not None:
        return None
    kind = direct_kind(fwd)
    return None if kind is None else (kind, fwd, py.inputs, None)


def _laid_out(arrays, off, r):
    """Entry ``r``'s value where it is a float64 array in the walk's layout, else None."""
    x = arrays.get(r) if r >= 0 else None
    # (``is`` first: most arrays carry NumPy's own float64 dtype object)
    if x is None or off.item(r) < 0 or (x.dtype is not _F64 and x.dtype != _F64):
        return None
    return x


def _cat_blocks(fwd, refs, arrays, off, h):
    """For ``_gathers``: a ``cat`` or ``stack`` along dim 0 (call ``fwd``, input references
    ``refs``, head ``h``) whose result and every input with a gradient are float64 arrays in
    the layout: ``[unused, -4, parts, then per part its input, the start of its block in
    the result and the block's size]`` (``_direct_step``'s ``g[at]`` added to each input,
    in the order of the parts); else None."""
    v = _laid_out(arrays, off, h + 1)
    if v is None:
        return None

    def shape_of(r):
        x = _laid_out(arrays, off, r)
        return None if x is None else x.shape
    parts = call_parts(fwd, refs, shape_of)   # (None unless every input is laid out)
    if parts is None:
        return None
    row = v.size // v.shape[0] if v.shape[0] else 0
    out = [-1, -4, 0]
    for r, at in parts:
        if r < 0:
            continue   # (a tensor without grad)
        if len(at) != 1:
            return None   # (along another dim: the parts interleave)
        p = at[0]
        start, size = (p * row, row) if p.__class__ is int else \
            (p.start * row, (p.stop - p.start) * row)
        if arrays[r].size != size:
            return None
        out += (r, start, size)
    out[2] = (len(out) - 3) // 3
    return out


def _spread_map(kind, x_shape, out_shape):
    """``spread_run`` of a broadcast or a sum over dims, kept per kind and shapes."""
    key = (kind, x_shape, out_shape)
    try:
        run = _SPREAD_RUNS.get(key, False)
    except TypeError:   # (a sum over a list of dims)
        return spread_run(kind, x_shape, out_shape)
    if run is False:
        run = spread_run(kind, x_shape, out_shape)
        if len(_SPREAD_RUNS) >= _INDEX_MAPS_LIMIT:
            _SPREAD_RUNS.clear()
        _SPREAD_RUNS[key] = run
    return run


def _index_map(shape, idx, call):
    """The flat position in an array of ``shape`` of each element of its basic index
    ``idx`` (C order, as the layout holds both); kept per shape and index (``call``: the
    index's shared call number, or None); None for an index NumPy does not take."""
    key = (shape, call) if call is not None else (shape, _index_key(idx))
    at = _INDEX_MAPS.get(key)
    if at is None:
        try:
            at = np.ascontiguousarray(np.arange(math.prod(shape), dtype=np.int64)
                                      .reshape(shape)[idx], dtype=np.int64).reshape(-1)
        except (IndexError, TypeError, ValueError):
            return None
        if len(_INDEX_MAPS) >= _INDEX_MAPS_LIMIT:
            _INDEX_MAPS.clear()
        _INDEX_MAPS[key] = at
    return at


def _index_key(idx):
    """A basic index as a key (slices are not hashable before Python 3.12)."""
    parts = idx if idx.__class__ is tuple else (idx,)
    return tuple((p.start, p.stop, p.step) if p.__class__ is slice else
                 ("...",) if p is Ellipsis else p for p in parts)


# (shape, index) -> _index_map's positions: an objective's slices, every call
_INDEX_MAPS = {}
_SPREAD_RUNS = {}   # (kind, input shape, result shape) -> spread_run's numbers, or None
_INDEX_MAPS_LIMIT = 4096


_F64 = np.dtype(np.float64)


# Off: every backward takes the general walk (the tests run both; see ``_flat_walk``).
FLAT_WALK = True

# (a flat walk lays out every array of its tape under _FLAT_LARGE elements, reached or not:
# beyond this many elements in all, the general walk's reach pass, which lays out only what
# the graph reaches, may cost less.  Measured: 131,072 made a k-means gradient 12% and GMM
# d=2 n=1,000's 7% faster, but a backward of 8 elements with 20 unrelated live graphs of
# 6,000 elements on the tape 114 us against the general walk's 58; at 32,768 that case
# costs at most ~10 us more than the general walk)
_FLAT_ELEMENTS = 1 << 15
# A tape that keeps what earlier walks retained (a Jacobian loop's rows with retain_graph)
# grows by a graph per row: looking at every Python op of it, reached or not, made its rows
# cost 2-13x the general walk's, which only goes where the graph reaches.  The one-call
# walk looks at a Python op only once the sweep reached it (one not reached costs a sweep
# call); past _FLAT_UNREACHED of those it hands the walk to the general one, whose reach
# pass skips them (run here first, that pass cost 25-35 us on every fresh tape of more
# than 16 ops).  Every array is still laid out: at most _FLAT_ARRAYS of them (GMM's
# objective has 34, a BA residual ~30).  Measured on a growing Jacobian loop (6 rows of a
# 1-op graph per call, retained; benchmarks/walks.py): rows at the general walk's time +1%.
_FLAT_STOPS = 256
_FLAT_UNREACHED = 16
_FLAT_ARRAYS = 64
# A number entry broadcast over an elementwise entry of at least this many elements sums
# its terms in lanes (``_sum_lanes``: 4-5x faster), one by one below (the sweep's order in
# the flat layout, which holds smaller entries only: both walks sum alike at every size).
_LANES_FROM = 1 << 14
# Elementwise entries of at least this many elements run alone on their own arrays, as the
# general walk's large ones (``_LARGE``): laying them out copies every value.  (Higher than
# _LARGE: a walk that lays out every small array of a small tape copied up to ~60,000
# elements for less than the general walk's setup.)  Where the arrays under it hold more
# than _FLAT_ELEMENTS elements, those of _LARGE elements or more run alone, as the general
# walk runs them (GMM d=2 n=1,000: eight arrays of 10,000 elements; its gradient 1,053 ->
# 992 us against the general walk).
_FLAT_LARGE = 1 << 14


def grad_value(t, g):
    """Gradient ``g`` shaped and typed like ``t``: a value, or a tensor under create_graph."""
    if isinstance(g, Tensor):
        if tuple(g.shape) != tuple(t.shape):
            g = g.expand(tuple(t.shape)) if g.ndim <= t.ndim else g.sum()
        if g.dtype != t.dtype and g.dtype.is_floating_point and t.dtype.is_floating_point:
            g = g.to(t.dtype)   # (PyTorch casts a gradient to its input's dtype, recorded)
        return g
    v = t._value
    if v.__class__ is float:
        return float(np.sum(g)) if g.__class__ is not float else g
    if g.__class__ is np.ndarray and g.shape == v.shape and g.dtype == v.dtype:
        return g   # (the common case, without np.shape's and np.asarray's dispatch)
    return np.asarray(np.broadcast_to(g, v.shape), dtype=v.dtype).copy() if np.shape(g) != v.shape \
        else np.asarray(g, dtype=v.dtype)


def accumulate(acc, only=None, create_graph=False):
    """Run leaf hooks on the summed gradients, then accumulate into ``.grad``
    (only for tensors whose id is in ``only``, when given).  Under ``create_graph`` the
    gradients are recorded tensors and ``.grad`` accumulates out of place, recorded too."""
    if create_graph:
        with grad_mode(True):
            _accumulate_recorded(acc, only)
        return
    if not LEAF_STATE and not any(getattr(t, "_hooks", None) for t in acc.ts):
        _accumulate_values(acc, only)   # (no hook to run: grad mode does not matter)
        return
    with grad_mode(False):   # hooks run with grad mode off, as in PyTorch
        _accumulate_values(acc, only)


def hooked(t, g, create_graph):
    """Leaf ``t``'s gradient ``g`` after its hooks (what ``autograd.grad`` returns)."""
    hooks = getattr(t, "_hooks", None)
    if not hooks:
        return g
    with grad_mode(create_graph):
        g = g if isinstance(g, Tensor) else wrap(grad_value(t, g))
        for hook in list(hooks):
            g = run_hook(hook, g)
    return g


def _accumulate_recorded(acc, only):
    for t, g in zip(acc.ts, acc.gs):
        if only is not None and id(t) not in only and id(t) not in acc.retained:
            continue
        g = grad_value(t, g)
        hooks = getattr(t, "_hooks", None)
        if hooks and id(t) not in acc.retained:
            g = g if isinstance(g, Tensor) else wrap(g)
            for hook in list(hooks):
                g = run_hook(hook, g)
        g = g if isinstance(g, Tensor) else wrap(g)
        state = LEAF_STATE.get(id(t)) if LEAF_STATE and id(t) not in acc.retained else None
        if state is not None:   # hooks on the leaf's AccumulateGrad node
            g = state.run_pre([g])[0]
        cur = getattr(t, "_grad", None)
        t._grad = g if cur is None else cur + g
        if state is not None:
            state.after_accumulate(t, g)


def _accumulate_values(acc, only):
    new = object.__new__
    retained = acc.retained
    for t, g in zip(acc.ts, acc.gs):
        if only is not None and id(t) not in only and id(t) not in retained:
            continue
        if t._value.__class__ is not float or g.__class__ is not float:
            g = grad_value(t, g)
            if g.__class__ is Tensor:
                g = g._value
        try:
            hooks = t._hooks
            cur = t._grad
        except AttributeError:  # a non-leaf that retains grad
            hooks = None
            cur = getattr(t, "_grad", None)
        if hooks and id(t) not in retained:
            for hook in list(hooks):
                r = run_hook(hook, wrap(g))
                g = grad_value(t, r._value)
        state = LEAF_STATE.get(id(t)) if LEAF_STATE and id(t) not in retained else None
        if state is not None:   # hooks on the leaf's AccumulateGrad node
            g = grad_value(t, state.run_pre([wrap(g)])[0]._value)
        if cur is None:
            r = new(Tensor)
            # a gradient the sweep made for this call is owned outright; views are copied
            r._value = g if g.__class__ is float or (g.base is None and g.flags.writeable) else g.copy()
            r._tape = None
            r._grad = r._hooks = None
            t._grad = r
        elif cur._value.__class__ is not float and cur._value.dtype == np.result_type(cur._value, g):
            cur._value += g       # accumulate in place, as PyTorch does
        else:
            cur._value = cur._value + g
        if state is not None:
            state.after_accumulate(t, wrap(g))
