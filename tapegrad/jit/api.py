"""``tg.jit``: a function of floats compiled by Numba, recording its tape at every call."""
from __future__ import annotations

import numbers
import re

import numpy as np
from numba import types
from numba.core import errors
from numba.extending import typeof_impl

from ..core.numba_jit import jit as njit_cached
from .active import SLOTS, ArrayArg, ArrayResult, ScalarArg, ScalarResult
from .sweep import seed_and_sweep


def _leaf_count(x):
    if isinstance(x, tuple):
        return sum(_leaf_count(e) for e in x)
    return np.size(x)


class JitFunction:
    """A ``tg.jit`` function: call it for the value (nothing recorded), or ask for
    ``value_and_grad``/``grad`` (records the call's tape in Numba, then sweeps it)."""

    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "jit")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__wrapped__ = fn
        self.dispatcher = njit_cached(fn)

    def __call__(self, *args):
        return self._call(self.dispatcher, args)

    def _call(self, dispatcher, args):
        try:
            return dispatcher(*args)
        except errors.TypingError as e:
            raise JitError(rephrase(str(e), self.__name__)) from None
        except errors.UnsupportedError as e:
            raise JitError(rephrase(str(e), self.__name__)) from None

    # -- recording ------------------------------------------------------------------------
    @staticmethod
    def _argnums(argnums, nargs):
        many = not isinstance(argnums, int)
        nums = tuple(argnums) if many else (argnums,)
        nums = tuple(k + nargs if k < 0 else k for k in nums)
        for k in nums:
            if not 0 <= k < nargs:
                raise ValueError(f"argnums={argnums!r} for a call with {nargs} arguments")
        return nums, many

    @staticmethod
    def _active(x, slot, first, values):
        """``x`` as leaves numbered from ``first`` (values appended to ``values``)."""
        if isinstance(x, tuple):
            out = []
            for e in x:
                e, first = JitFunction._active(e, slot, first, values)
                out.append(e)
            return tuple(out), first
        if isinstance(x, (numbers.Real, np.floating, np.integer)) and not isinstance(x, bool):
            values.append(np.array([float(x)]))
            return ScalarArg(float(x), first, slot), first + 1
        a = np.array(x, dtype=np.float64, copy=True, order="C")
        if a.ndim == 0:
            values.append(a.reshape(1))
            return ScalarArg(float(a), first, slot), first + 1
        values.append(a.reshape(-1))
        refs = np.arange(first, first + a.size, dtype=np.int64).reshape(a.shape)
        return ArrayArg(a, refs, slot), first + a.size

    def _record(self, args, argnums, slot=0):
        """Run the function on actives made from ``args[argnums]``; returns (result, list of
        (argnum, original argument, first leaf))."""
        tape = SLOTS[slot]
        args = list(args)
        values, first, leaves = [], 0, []
        for k in argnums:
            leaves.append((k, args[k], first))
            args[k], first = self._active(args[k], slot, first, values)
        tape.start(np.concatenate(values) if values else np.zeros(0))
        result = self._call(self.dispatcher, args)
        tape.check()
        return result, leaves, first

    @staticmethod
    def _shaped(flat, x):
        if isinstance(x, tuple):
            out, k = [], 0
            for e in x:
                n = _leaf_count(e)
                out.append(JitFunction._shaped(flat[k:k + n], e))
                k += n
            return tuple(out)
        if isinstance(x, (numbers.Real, np.floating, np.integer)) or np.ndim(x) == 0:
            return float(flat[0])
        return flat.reshape(np.shape(x))

    def _value_and_grad(self, args, argnums, slot=0):
        nums, many = self._argnums(argnums, len(args))
        tape = SLOTS[slot]
        with tape.lock:
            result, leaves, nleaves = self._record(args, nums, slot)
            if isinstance(result, ScalarResult):
                value, out = result.value, result.ref
            elif isinstance(result, (float, int, np.floating)):
                value, out = float(result), -1      # does not depend on the arguments
            else:
                raise TypeError(f"tg.jit: value_and_grad() needs a scalar result; {self.__name__} "
                                f"returned {type(result).__name__} (use jacobian/vjp for arrays)")
            grads = np.zeros(nleaves)
            adj, reached = tape.sweep_buffers()
            n = tape.n
            seed_and_sweep(tape.op[:n], tape.a[:n], tape.b[:n], tape.val[:n],
                           tape.consts[:tape.n_consts], adj, reached, out, 1.0, nleaves, grads)
        gs = tuple(self._shaped(grads[first:first + _leaf_count(x)], x) for _, x, first in leaves)
        return value, (gs if many else gs[0])

    def value_and_grad(self, *args, argnums=0):
        """``(value, gradient)`` of the scalar result with respect to ``args[argnums]``
        (a tuple of argnums gives a tuple of gradients), each shaped as its argument."""
        return self._value_and_grad(args, argnums)

    def grad(self, *args, argnums=0):
        return self._value_and_grad(args, argnums)[1]


@typeof_impl.register(JitFunction)
def _typeof_jit_function(val, c):
    """Called from another compiled function, a tg.jit function is its Numba dispatcher:
    it compiles for the actives it is given."""
    return types.Dispatcher(val.dispatcher)


class JitError(TypeError):
    """Code that a tg.jit function cannot compile, said in a line or two."""


_WHERE = re.compile(r'File "([^"]+)", line (\d+)')


def rephrase(message, name):
    """Numba's TypingError as a short message naming the user's file and line."""
    where = _WHERE.findall(message)
    # the innermost location that is not tapegrad's own code nor Numba's
    user = [f"{f}:{l}" for f, l in where if "tapegrad/jit" not in f and "numba" not in f]
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
        return (f"tg.jit: {name}{at}: {sig} is not supported on active values (tg.jit "
                "supports the op table's elementwise ops, math.*, NumPy scalar ufuncs, "
                "indexing and arrays of actives; see tapegrad.jit)")
    first = message.strip().splitlines()
    body = [l for l in first if l.strip() and not l.startswith("Failed in nopython")]
    return f"tg.jit: {name}{at}: " + (body[0].strip() if body else "cannot compile")


def jit(fn=None):
    """Compile ``fn`` (plain Python over floats and NumPy arrays: loops, ``if``/``while`` on
    values, ``math``) with Numba; ``fn.value_and_grad(*args, argnums=0)`` records its tape
    at native speed at every call and sweeps it."""
    if fn is None:
        return jit
    return JitFunction(fn)
