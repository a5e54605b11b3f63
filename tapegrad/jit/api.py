"""``tg.jit``: a function of floats compiled by Numba, recording its tape at every call.

Each call that needs derivatives takes a free recording cell (a *slot*, see ``active.py``),
writes the leaves (the elements of the arguments named by ``argnums``), runs the compiled
function on actives -- which appends every op to the cell's buffers -- and sweeps the
buffers.  Calls from several threads take different slots and run at once (the compiled
code holds no GIL); a function is compiled once per slot it runs on (and cached).
"""
from __future__ import annotations

import numbers
import os
import queue
import re
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
from numba import types
from numba.core import errors
from numba.extending import typeof_impl

from ..core import kernels as K
from ..core import optable
from ..core.elementwise import FUNCTIONS
from ..core.numba_jit import jit as njit_cached
from ..core.tape import ARG, N_ELEMENTWISE, Tape
from ..core.tensor import Tensor, wrap
from .active import N_SLOTS, SLOTS, ArrayArg, ArrayResult, ScalarArg, ScalarResult
from .sweep import seed_and_sweep


class Recording(NamedTuple):
    """``f.record(...)``: the call recorded on a ``tapegrad.Tape`` (the same entry format as
    every tape), its leaf tensors (the elements of the ``argnums`` arguments, in order) and
    its output tensors (the elements of the result)."""
    tape: Tape
    inputs: list
    outputs: list
    value: object


class JitError(TypeError):
    """Code that a tg.jit function cannot compile, said in a line or two."""


# -- slots ----------------------------------------------------------------------------------
_FREE = queue.LifoQueue()    # LIFO: one thread at a time always gets slot 0 (compiled once)


def _reset_slots():
    while not _FREE.empty():
        _FREE.get_nowait()
    for s in reversed(range(N_SLOTS)):
        _FREE.put(s)


_reset_slots()
# a child forked while another thread held a slot would wait for it forever
os.register_at_fork(after_in_child=_reset_slots)


def release():
    """Free the recording buffers of every cell not in use (each keeps the size of the
    largest recording it held, so that the next call of the same size allocates nothing)."""
    held = []
    try:
        while True:
            held.append(_FREE.get_nowait())
    except queue.Empty:
        pass
    for s in held:
        SLOTS[s].release()
    for s in reversed(held):
        _FREE.put(s)


class _Slot:
    def __enter__(self):
        self.slot = _FREE.get()
        return self.slot

    def __exit__(self, *exc):
        _FREE.put(self.slot)
        return False


_POOL = []


def _pool():
    if not _POOL or _POOL[0] != os.getpid():
        n = max(1, min(os.cpu_count() or 1, N_SLOTS - 1))
        _POOL[:] = [os.getpid(), ThreadPoolExecutor(n, thread_name_prefix="tapegrad-jit"), n]
    return _POOL[1], _POOL[2]


def _is_number(x):
    return isinstance(x, (numbers.Real, np.floating, np.integer)) and not isinstance(x, bool)


def _leaf_count(x):
    if isinstance(x, tuple):
        return sum(_leaf_count(e) for e in x)
    return int(np.size(x))


def _shaped(flat, x):
    """``flat`` (leaf values) shaped as the argument ``x``."""
    if isinstance(x, tuple):
        out, k = [], 0
        for e in x:
            n = _leaf_count(e)
            out.append(_shaped(flat[k:k + n], e))
            k += n
        return tuple(out)
    if _is_number(x) or np.ndim(x) == 0:
        return float(flat[0])
    return flat.reshape(np.shape(x))


def _flat(v, x, what):
    """The vector ``v`` shaped like argument ``x``, flattened."""
    parts = []

    def walk(v, x):
        if isinstance(x, tuple):
            if not isinstance(v, tuple) or len(v) != len(x):
                raise ValueError(f"{what} must be shaped like the argument")
            for ve, xe in zip(v, x):
                walk(ve, xe)
            return
        a = np.asarray(v, dtype=np.float64)
        if a.size != _leaf_count(x):
            raise ValueError(f"{what} must be shaped like the argument: {np.shape(x)}")
        parts.append(a.reshape(-1))
    walk(v, x)
    return np.concatenate(parts) if parts else np.zeros(0)


class _Call:
    """One recorded call: the cell, its entries, leaves and outputs."""

    def __init__(self, tape, result, leaves, nleaves):
        self.tape, self.leaves, self.nleaves = tape, leaves, nleaves
        self.result = result
        if isinstance(result, ScalarResult):
            self.values, self.refs, self.shape = np.array([result.value]), np.array([result.ref]), None
        elif isinstance(result, ArrayResult):
            self.values = result.vals.reshape(-1)
            self.refs = result.refs.reshape(-1)
            self.shape = result.vals.shape
        elif isinstance(result, tuple):
            vals, refs = [], []
            for e in result:
                if isinstance(e, ScalarResult):
                    vals.append(e.value)
                    refs.append(e.ref)
                elif _is_number(e):
                    vals.append(float(e))
                    refs.append(-1)
                else:
                    raise TypeError("tg.jit: a tuple result may hold scalars only")
            self.values, self.refs, self.shape = np.array(vals), np.array(refs, np.int64), (len(vals),)
        elif _is_number(result):
            self.values, self.refs, self.shape = np.array([float(result)]), np.array([-1]), None
        elif isinstance(result, np.ndarray):
            self.values = result.astype(np.float64).reshape(-1)
            self.refs = np.full(self.values.size, -1, np.int64)
            self.shape = result.shape
        else:
            raise TypeError(f"tg.jit: cannot differentiate a result of type {type(result).__name__}")
        self.refs = np.asarray(self.refs, np.int64)

    def value(self):
        return float(self.values[0]) if self.shape is None else self.values.reshape(self.shape).copy()

    def arrays(self):
        t, n = self.tape, self.tape.n
        return t.op[:n], t.a[:n], t.b[:n], t.val[:n], t.consts[:t.n_consts]

    def vjp(self, seeds):
        grads = np.zeros(self.nleaves)
        adj, reached = self.tape.sweep_buffers()
        seed_and_sweep(*self.arrays(), adj, reached, self.refs, np.asarray(seeds, np.float64),
                       self.nleaves, grads)
        return grads

    def rows(self):
        """(op, a, b, V) in the engine's replay layout: the entries' values, then the
        constants (a reference r < 0 is row n - r - 1)."""
        op, a, b, val, consts = self.arrays()
        return op, a, b, np.concatenate((val, consts))

    def row(self, r):
        n = self.tape.n
        return np.where(r >= 0, r, n - r - 1)

    def tangents(self, V_dirs):
        """Tangents of every entry along the columns of ``V_dirs`` ((nleaves, k))."""
        op, a, b, V = self.rows()
        T = np.zeros((len(V), V_dirs.shape[1]))
        T[:self.nleaves] = V_dirs
        K.tangent_point(op, a, b, V, T, self.tape.n)
        return T

    def scalar_out(self, what):
        if self.shape is not None:
            raise TypeError(f"tg.jit: {what}() needs a scalar result")
        return int(self.refs[0])


class JitFunction:
    """A ``tg.jit`` function: call it for the value (nothing recorded), or ask for
    derivatives (``value_and_grad``, ``grad``, ``vjp``, ``jvp``, ``jacobian``, ``hvp``,
    ``hessian``), or for the recording itself (``record``)."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "jit")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self.dispatcher = njit_cached(fn)

    def __repr__(self):
        return f"<tg.jit function {self.__name__}>"

    def __call__(self, *args):
        """The value, compiled for the plain arguments (nothing is recorded)."""
        return self._call(args)

    def _call(self, args):
        try:
            return self.dispatcher(*args)
        except (errors.TypingError, errors.UnsupportedError) as e:
            raise JitError(rephrase(str(e), self.__name__)) from None

    # -- recording ------------------------------------------------------------------------
    @staticmethod
    def _argnums(argnums, nargs):
        many = not isinstance(argnums, (int, np.integer))
        nums = tuple(argnums) if many else (int(argnums),)
        nums = tuple(k + nargs if k < 0 else k for k in nums)
        for k in nums:
            if not 0 <= k < nargs:
                raise ValueError(f"argnums={argnums!r} for a call with {nargs} arguments")
        return nums, many

    @staticmethod
    def _active(x, slot, first, values):
        """``x`` as leaves numbered from ``first`` (their values appended to ``values``)."""
        if isinstance(x, tuple):
            out = []
            for e in x:
                e, first = JitFunction._active(e, slot, first, values)
                out.append(e)
            return tuple(out), first
        if _is_number(x):
            values.append(np.array([float(x)]))
            return ScalarArg(float(x), first, slot), first + 1
        a = np.array(x, dtype=np.float64, copy=True, order="C")   # never the caller's array
        if a.ndim == 0:
            values.append(a.reshape(1))
            return ScalarArg(float(a), first, slot), first + 1
        values.append(a.reshape(-1))
        refs = np.arange(first, first + a.size, dtype=np.int64).reshape(a.shape)
        return ArrayArg(a, refs, slot), first + a.size

    def _record(self, args, nums, slot, comparisons=False):
        """Run the function on actives made from ``args[nums]`` on cell ``slot``."""
        tape = SLOTS[slot]
        args = list(args)
        values, first, leaves = [], 0, []
        for k in nums:
            leaves.append((k, args[k], first))
            args[k], first = self._active(args[k], slot, first, values)
        tape.start(values[0] if len(values) == 1 else
                   np.concatenate(values) if values else np.zeros(0))
        if comparisons:
            tape.record_comparisons(True)
            try:
                result = self._call(args)
            finally:
                tape.record_comparisons(False)
        else:
            result = self._call(args)
        tape.check()
        return _Call(tape, result, leaves, first)

    def _grads(self, call, flat, many):
        gs = tuple(_shaped(flat[first:first + _leaf_count(x)], x) for _, x, first in call.leaves)
        return gs if many else gs[0]

    def _value_and_grad(self, args, argnums, slot):
        nums, many = self._argnums(argnums, len(args))
        call = self._record(args, nums, slot)
        call.scalar_out("value_and_grad")
        return call.value(), self._grads(call, call.vjp([1.0]), many)

    def value_and_grad(self, *args, argnums=0, batch=False):
        """``(value, gradient)`` of the scalar result with respect to ``args[argnums]``
        (a tuple of argnums gives a tuple of gradients), each shaped as its argument.

        ``batch=True``: ``args[argnums]`` (one argnum) holds one point per row: the points
        are recorded and swept on a pool of threads, each on its own tape; returns the
        values (a 1-D array) and the gradients (one row per point)."""
        if batch:
            return self._batch(args, argnums)
        with _Slot() as slot:
            return self._value_and_grad(args, argnums, slot)

    def grad(self, *args, argnums=0, batch=False):
        return self.value_and_grad(*args, argnums=argnums, batch=batch)[1]

    def _batch(self, args, argnums):
        if not isinstance(argnums, (int, np.integer)):
            raise ValueError("batch=True takes one argnum (the argument holding the points)")
        k = int(argnums) + (len(args) if argnums < 0 else 0)
        P = np.asarray(args[k], dtype=np.float64)
        m = len(P)
        values = np.empty(m)
        grads = np.empty(P.shape)
        pool, nthreads = _pool()

        def work(lo, hi):
            with _Slot() as slot:
                a = list(args)
                for j in range(lo, hi):
                    a[k] = P[j] if P.ndim > 1 else float(P[j])
                    values[j], grads[j] = self._value_and_grad(a, k, slot)

        step = max(1, -(-m // nthreads))
        futures = [pool.submit(work, lo, min(m, lo + step)) for lo in range(0, m, step)]
        for f in futures:
            f.result()
        return values, grads

    # -- array results and second order --------------------------------------------------
    def vjp(self, *args, w, argnums=0):
        """``(value, w^T J)``: the result (any shape) and the cotangent ``w`` (shaped as the
        result) pulled back onto ``args[argnums]``."""
        nums, many = self._argnums(argnums, len(args))
        with _Slot() as slot:
            call = self._record(args, nums, slot)
            w = np.asarray(w, dtype=np.float64).reshape(-1)
            if w.size != call.refs.size:
                raise ValueError(f"w must be shaped like the result ({call.shape or ()})")
            return call.value(), self._grads(call, call.vjp(w), many)

    def jvp(self, *args, v, argnums=0):
        """``(value, J v)``: the result and its tangent along ``v`` (shaped as
        ``args[argnums]``), forward mode on the recorded tape."""
        nums, many = self._argnums(argnums, len(args))
        with _Slot() as slot:
            call = self._record(args, nums, slot)
            x = tuple(args[k] for k in nums) if many else args[nums[0]]
            vf = _flat(v, x, "v")
            T = call.tangents(vf[:, None])
            t = T[call.row(call.refs), 0]
            return call.value(), (float(t[0]) if call.shape is None else t.reshape(call.shape))

    def jacobian(self, *args, argnums=0):
        """The Jacobian of the result with respect to ``args[argnums]``: shape result shape +
        argument shape.  Reverse (one seed per output, swept together) when the result has
        no more elements than the argument, else forward (one tangent per input)."""
        nums, many = self._argnums(argnums, len(args))
        if many:
            raise ValueError("jacobian() takes one argnum")
        x = args[nums[0]]
        with _Slot() as slot:
            call = self._record(args, nums, slot)
            m, n = call.refs.size, call.nleaves
            if m <= n:
                op, a, b, V = call.rows()
                A = np.zeros((len(V), m))
                live = call.refs >= 0
                np.add.at(A, (call.refs[live], np.nonzero(live)[0]), 1.0)
                start = int(call.refs.max())
                if start >= 0:
                    K.reverse_multi(op, a, b, V, A, start, call.tape.n)
                J = A[:n].T.copy()
            else:
                T = call.tangents(np.eye(n))
                J = T[call.row(call.refs)]
                J[call.refs < 0] = 0.0
        return J.reshape((call.shape or ()) + np.shape(x))

    def hvp(self, *args, v, argnums=0):
        """The Hessian of the scalar result with respect to ``args[argnums]`` times ``v``
        (shaped as that argument): forward over reverse on the fresh tape."""
        nums, many = self._argnums(argnums, len(args))
        if many:
            raise ValueError("hvp() takes one argnum")
        x = args[nums[0]]
        with _Slot() as slot:
            call = self._record(args, nums, slot)
            o = call.scalar_out("hvp")
            D = self._hvps(call, o, _flat(v, x, "v")[:, None])
        return _shaped(D[:, 0], x)

    def hessian(self, *args, argnums=0):
        """The Hessian of the scalar result with respect to ``args[argnums]`` (shape: the
        argument's shape twice): all n Hessian-vector products in one sweep pair."""
        nums, many = self._argnums(argnums, len(args))
        if many:
            raise ValueError("hessian() takes one argnum")
        x = args[nums[0]]
        with _Slot() as slot:
            call = self._record(args, nums, slot)
            o = call.scalar_out("hessian")
            n = call.nleaves
            H = self._hvps(call, o, np.eye(n))
        return H.reshape(np.shape(x) * 2) if np.ndim(x) else float(H[0, 0])

    def sparse_hessian(self, *args, argnums=0):
        """The Hessian's non-zeros ``(rows, cols, values)`` with respect to ``args[argnums]``
        (flattened): the recording compiled as a tape (``record``, then ``tg.compile``'s
        coloured sweeps at this point)."""
        rec = self.record(*args, argnums=argnums)
        return rec.tape.compile(rec.inputs, rec.outputs).sparse_hessian(
            np.array([float(t.detach()) for t in rec.inputs]))

    @staticmethod
    def _hvps(call, o, dirs):
        n, k = call.nleaves, dirs.shape[1]
        if o < 0:
            return np.zeros((n, k))
        op, a, b, V = call.rows()
        A = np.full(len(V), -0.0)
        A[o] = 1.0
        K.reverse_point(op, a, b, V, A, o, call.tape.n)
        T = call.tangents(dirs)
        D = np.zeros_like(T)
        K.hvp_point(op, a, b, V, A, T, D, o, call.tape.n)
        return D[:n]

    # -- the recording as a tapegrad tape -------------------------------------------------
    def record(self, *args, argnums=0):
        """The call recorded onto a ``tapegrad.Tape`` (returned as a :class:`Recording`:
        tape, leaf tensors, output tensors, value), comparisons included as the eager
        engine records them, so ``rec.tape.compile(rec.inputs, rec.outputs)`` replays it
        with guards, and ``tg.autograd``, ``hvp``/``hessian``/``jacobian``, save/load and
        the tape views apply."""
        nums, many = self._argnums(argnums, len(args))
        with _Slot() as slot:
            call = self._record(args, nums, slot, comparisons=True)
            op, a, b, val, consts = (np.array(z) for z in call.arrays())
            reads, read_ref = call.tape.reads
        leaf_values = val[:call.nleaves]
        with Tape() as tape:
            inputs = [wrap(float(v), requires_grad=True) for v in leaf_values]
            ents = _replay_into_eager(op, a, b, consts, inputs, call.nleaves)
        outputs = [ents[r] if r >= 0 else wrap(float(v)) for r, v in zip(call.refs, call.values)]
        if reads and read_ref >= 0:
            # the function read a recorded value out of the tape (value(x), math.floor(x)):
            # the eager engine's mark for that, so that a replay refuses this tape
            float(ents[read_ref])
        return Recording(tape, inputs, outputs, call.value())


_NAMES = [op.name for op in optable.OPS]


def _replay_into_eager(op, a, b, consts, inputs, nleaves):
    """Run the recorded entries again through the eager engine (the tape's own ops): the
    tape it records onto has the same entries, leaves and comparisons (whose branches
    become guards)."""
    ents = list(inputs) + [None] * (len(op) - nleaves)

    def operand(r):
        return ents[r] if r >= 0 else float(consts[-r - 1])

    for i in range(nleaves, len(op)):
        o = int(op[i])
        if o >= N_ELEMENTWISE:
            continue      # ARG: read with its ternary op
        row = optable.OPS[o]
        if row.arity == 3:
            j = int(b[i])
            xs = [operand(int(a[i])), operand(int(a[j])), operand(int(b[j]))]
        else:
            xs = [operand(int(a[i])), operand(int(b[i]))][:row.arity]
        if row.name == "where":   # the condition as a bool tensor, as the eager where takes it
            c = xs[0] if isinstance(xs[0], Tensor) else wrap(float(xs[0]))
            xs[0] = c != 0.0
        if not any(isinstance(t, Tensor) for t in xs):
            xs[0] = wrap(float(xs[0]))
        r = FUNCTIONS[row.name](*xs)
        if row.compare:
            bool(r)        # the branch taken: a guard, as `if x < y:` records eagerly
        ents[i] = r
    return ents


@typeof_impl.register(JitFunction)
def _typeof_jit_function(val, c):
    """Called from another compiled function, a tg.jit function is its Numba dispatcher:
    it compiles for the actives it is given."""
    return types.Dispatcher(val.dispatcher)


_WHERE = re.compile(r'File "([^"]+)", line (\d+)')


def rephrase(message, name):
    """Numba's TypingError as a short message naming the user's file and line."""
    where = _WHERE.findall(message)
    # the innermost location that is not tapegrad's own code nor Numba's
    user = [f"{f}:{n}" for f, n in where if "tapegrad/jit" not in f and "numba" not in f]
    at = f" at {user[-1]}" if user else ""
    own = re.search(r"tapegrad\.jit: (.*?)(?:\n|$)", message)
    if own:
        return f"tg.jit: {name}{at}: {own.group(1)}"
    m = re.search(r"Untyped global name '([^']+)': Cannot determine Numba type of <class '([^']+)'>", message)
    if m and m.group(2) == "function":
        return (f"tg.jit: {name}{at} calls {m.group(1)}(), a plain Python function: decorate it "
                f"with @tg.jit (or @numba.njit) so that it compiles for active values")
    m = re.search(r"Untyped global name '([^']+)'", message)
    if m:
        return f"tg.jit: {name}{at} uses {m.group(1)!r}, which Numba cannot compile"
    m = re.search(r"No implementation of function (.*?) found for signature:\s*\n\s*\n\s*>>> ([^\n]+)", message)
    if m:
        sig = re.sub(r"tapegrad\.active\[\d+, [0-9a-f]+\]", "active",
                     re.sub(r"tapegrad\.active_array\[\d+, (.*?), [0-9a-f]+\]", r"active array \1", m.group(2)))
        return (f"tg.jit: {name}{at}: {sig} is not supported on active values: tg.jit "
                "records the op table's rows (operators, abs, min/max, and the math and "
                "NumPy functions of its rows), indexing and arrays of actives; write it in "
                "those terms (a @tg.jit helper can hold it)")
    lines = [s for s in message.strip().splitlines()
             if s.strip() and not s.startswith("Failed in nopython")]
    return f"tg.jit: {name}{at}: " + (lines[0].strip() if lines else "cannot compile")


def jit(fn=None):
    """Compile ``fn`` (plain Python over floats and NumPy arrays: loops, ``if``/``while`` on
    values, ``math``) with Numba; ``fn.value_and_grad(*args, argnums=0)`` records its tape
    at native speed at every call and sweeps it."""
    if fn is None:
        return jit
    return JitFunction(fn)
