"""``vmap``: a function of one sample run over a batch -- recorded once, replayed in Numba.

The fast path (``Vmapped.last_path == "replay"``): the function, with every transform
inside it (``jacrev(f)``, ``hessian(f)``, ``grad(f)``...), runs once at the first sample
with its tensor arguments as leaves; the derivatives the inner transforms take are recorded
tensors (``create_graph``), so the recording computes the whole transformed function.
``tape.compile`` turns it into scalar entries, and ``CompiledTape.batch_outputs`` replays it
at every sample at once, the batch innermost.  When that recording cannot replay because a
recorded derivative branches on values (``where``, ``maximum``, ``clamp``: the engine reads
them in Python), a first-order derivative of a plain function (``jacrev``, ``jacfwd``,
``grad``, ``grad_and_value``) or its ``hessian`` is recorded as the function alone and
differentiated at replay (``CompiledTape.batch_jacobian``: one reverse sweep per output
over the batch; ``CompiledTape.hessian`` at each sample).

A branch on a recorded comparison (``relu``, ``max``, ``if x > 0``) is a guard: samples
whose branches go another way are recorded again at one of them and replayed with that
recording (one per branch pattern); ``tg.where`` replays both ways without a guard.  The
recordings are kept, keyed by the function and the arguments' shapes, for later calls, and
checked once against a fresh run at a second sample.

The eager path (``last_path`` starts with ``"eager"``): the function runs once per sample
and the results are stacked.  It runs when replay cannot follow the function (an op with
no elementwise form, a value read into Python, in-place changes to an input, an output
that is not a recorded float tensor, a result that disagrees with the fresh run), inside
another transform or when an argument requires grad (the results must stay
differentiable), and for arguments other than float64 tensors and hashable constants.

Tensors the function reads from outside its arguments are recorded as constants, as in
``tg.compile``.  Those Python shows -- closure cells, defaults, globals the function's code
names (and its own helper functions'), a module's parameters -- are part of the key the
recordings are kept under, by value: change one and the next call records again.  A tensor
reached otherwise (an attribute of an object) is not seen: pass a tensor that changes
between calls as an argument (``in_dims=None``), or call ``clear_cache()``.
"""
from __future__ import annotations

import functools
import hashlib
import types
from collections import Counter, OrderedDict

import numpy as np

from ..core.dtypes import float64
from ..core.grad_mode import enable_grad, is_grad_enabled, no_grad
from ..core.tape import Tape
from ..core.tensor import Tensor
from ..ops.factories import as_tensor
from ..ops.torch_api import FUNCTIONS as TORCH_FUNCTIONS
from ..replay import compile_tape
from .pytree import broadcast_prefix, tree_flatten, tree_unflatten
from .transforms import LEVELS, Transformed, argnums_tuple, inside_transform, is_nested

_stack = TORCH_FUNCTIONS["stack"]

# Calls served by each path, and recordings made: tests pin the path a function takes.
PATHS = Counter()

MAX_RECORDINGS = 16     # branch patterns per cache entry before the rest runs eagerly
CACHE_SIZE = 64
_CACHE = OrderedDict()


def clear_cache():
    """Forget every recording ``vmap`` kept (the next call records again)."""
    _CACHE.clear()


class Entry:
    """What one cache key holds: compiled recordings (one per branch pattern) and the
    outputs' layout, or why this function runs eagerly."""

    def __init__(self):
        self.tapes, self.eager, self.verified = [], None, False
        self.layout = self.out_spec = self.plan = None
        # "outputs": the transformed function's recording replayed; "sweeps": the function's
        # recording and one reverse sweep per output (see Vmapped.record)
        self.mode = "outputs"


class Piece:
    """One result of a derivative transform computed by sweeps: a block of the Jacobian
    (``output`` by input ``leaf``), of the Hessian (input ``leaf`` by input ``second``) or
    the value of ``output``; ``shape`` is the result's."""

    def __init__(self, kind, output, leaf, shape, second=None):
        self.kind, self.output, self.leaf, self.shape = kind, output, leaf, shape
        self.second = second
        self.rows = self.columns = None


def plain(func):
    return not isinstance(func, (Transformed, Vmapped))


def is_hessian(func):
    """``hessian(f)``: a Jacobian of a Jacobian of a plain function, one ``argnums``."""
    inner = getattr(func, "func", None)
    return isinstance(func, Transformed) and isinstance(inner, Transformed) and \
        func.kind in ("jacrev", "jacfwd") and inner.kind in ("jacrev", "jacfwd") and \
        func.options == inner.options and not func.options[1] and plain(inner.func)


def sweepable(func):
    """A first-order derivative (without aux) or the Hessian of a plain function: the
    replay computes it from the function's own recording, by reverse sweeps over the batch
    (by the replay's Hessian at each sample)."""
    return is_hessian(func) or isinstance(func, Transformed) and plain(func.func) and \
        func.kind in ("jacrev", "jacfwd", "grad", "grad_and_value") and not func.options[1]


def swept_function(func):
    return func.func.func if is_hessian(func) else func.func


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """``torch.func.vmap``: ``func`` of one sample, run over a batch.  ``in_dims`` (an int,
    None for an argument shared by every sample, or a structure matching the arguments)
    says which dimension of each argument is the batch; ``out_dims`` where the batch goes
    in each output.  Recorded once and replayed in Numba where it can, else run per sample
    (see the module's notes; ``.last_path`` says which ran)."""
    return Vmapped(func, in_dims, out_dims)


class Vmapped:
    def __init__(self, func, in_dims, out_dims):
        self.func, self.in_dims, self.out_dims = func, in_dims, out_dims
        self.last_path = None
        self.__name__ = getattr(func, "__name__", "function")
        self.__doc__ = getattr(func, "__doc__", None)

    def __repr__(self):
        return f"<tg.func.vmap({self.__name__!r}), last path: {self.last_path}>"

    def __eq__(self, other):
        return isinstance(other, Vmapped) and (self.func, self.in_dims, self.out_dims) == \
            (other.func, other.in_dims, other.out_dims)

    def __hash__(self):
        return hash((self.func, freeze(self.in_dims), freeze(self.out_dims)))

    def where(self):
        return f"vmap({self.__name__}, in_dims={self.in_dims!r}, ...)(<inputs>)"

    def __call__(self, *args, **kwargs):
        flat, spec = tree_flatten(args)
        dims = self.batch_dims(args, flat)
        size = self.batch_size(flat, dims)
        reason = self.replay_refused(flat, kwargs)
        captured = captured_tensors(self.func) if reason is None else []
        if reason is None and is_grad_enabled() and any(t.requires_grad for t in captured):
            reason = "a tensor the function reads requires grad (the results keep its graph)"
        if reason is None:
            key = (self, spec, tuple(dims), freeze(kwargs),
                   tuple(signature(x, d) for x, d in zip(flat, dims)),
                   tuple(fingerprint(t) for t in captured))
            try:
                entry = _CACHE.pop(key, None) or Entry()
                _CACHE[key] = entry
            except TypeError:   # an unhashable function: recorded at every call
                entry = Entry()
            while len(_CACHE) > CACHE_SIZE:
                _CACHE.popitem(last=False)
            if entry.eager is None:
                out = self.replay(entry, flat, dims, spec, size, kwargs)
                if out is not None:
                    self.last_path = "replay"
                    PATHS["replay"] += 1
                    return out
            reason = entry.eager
        self.last_path = f"eager: {reason}"
        PATHS["eager"] += 1
        return self.eager(flat, dims, spec, size, kwargs)

    # -- arguments ----------------------------------------------------------------------
    def batch_dims(self, args, flat):
        in_dims = self.in_dims
        if not isinstance(in_dims, (int, tuple)) or isinstance(in_dims, bool):
            raise ValueError(f"{self.where()}: expected `in_dims` to be int or a (potentially "
                             f"nested) tuple matching the structure of inputs, got: "
                             f"{type(in_dims)}.")
        if isinstance(in_dims, tuple) and len(in_dims) != len(args):
            raise ValueError(f"{self.where()}: in_dims is not compatible with the structure of "
                             f"`inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but "
                             f"inputs has structure {tree_flatten(args)[1]}.")
        dims = broadcast_prefix(in_dims, args, f"{self.where()}: in_dims")
        for k, (x, d) in enumerate(zip(flat, dims)):
            if d is None:
                continue
            if not isinstance(d, int):
                raise ValueError(f"{self.where()}: in_dims must be int, None or tuples of them,"
                                 f" got {type(d)}")
            if not isinstance(x, Tensor):
                raise ValueError(f"{self.where()}: Got in_dim={d} for an input but the input "
                                 f"is of type {type(x)}. We cannot vmap over non-Tensor "
                                 "arguments, please use None as the respective in_dim")
            if not -x.dim() <= d < x.dim():
                raise ValueError(f"{self.where()}: Got in_dim={d} for some input, but that "
                                 f"input is a Tensor of dimensionality {x.dim()} so expected "
                                 f"in_dim to satisfy -{x.dim()} <= in_dim < {x.dim()}.")
            dims[k] = d % x.dim()
        return dims

    def batch_size(self, flat, dims):
        sizes = [x.shape[d] for x, d in zip(flat, dims) if d is not None]
        if not sizes:
            raise ValueError(f"{self.where()}: Expected at least one Tensor to vmap over")
        if len(set(sizes)) > 1:
            raise ValueError("vmap: Expected all tensors to have the same size in the mapped "
                             f"dimension, got sizes {sizes} for the mapped dimension")
        return sizes[0]

    @staticmethod
    def replay_refused(flat, kwargs):
        if is_nested(flat, kwargs):
            return "inside another transform, or an argument requires grad"
        for x in flat:
            if isinstance(x, Tensor) and x.dtype is not float64:
                return f"a {x.dtype} argument (replay runs float64)"
            if not isinstance(x, Tensor) and freeze(x) is None:
                return f"an argument of type {type(x).__name__} that is not a hashable constant"
        if freeze(kwargs) is None:
            return "a keyword argument that is not a hashable constant"
        return None

    @staticmethod
    def sample(flat, dims, p):
        return [x.select(d, p) if d is not None else x for x, d in zip(flat, dims)]

    # -- the eager path -----------------------------------------------------------------
    def outputs_at(self, flat, dims, spec, p, kwargs):
        out = self.func(*tree_unflatten(self.sample(flat, dims, p), spec), **kwargs)
        outs, out_spec = tree_flatten(out)
        return outs, out_spec

    def eager(self, flat, dims, spec, size, kwargs):
        per_sample = [self.outputs_at(flat, dims, spec, p, kwargs) for p in range(size)]
        outs, out_spec = per_sample[0]
        out_dims = broadcast_prefix(self.out_dims, tree_unflatten(outs, out_spec),
                                    f"{self.where()}: out_dims")
        result = []
        for k, (o, d) in enumerate(zip(outs, out_dims)):
            if d is None:
                result.append(o)
                continue
            if not isinstance(o, Tensor):
                raise ValueError(f"vmap({self.__name__}, ...): `{self.__name__}` must only "
                                 f"return Tensors, got type {type(o)}. Did you mean to set "
                                 "out_dims= to None for output?")
            result.append(_stack([s[0][k] for s in per_sample], d))
        return tree_unflatten(result, out_spec)

    # -- the replay path ----------------------------------------------------------------
    def record(self, entry, flat, dims, spec, p, kwargs):
        """Record at sample ``p`` and compile (None when replay cannot follow the function:
        ``entry.eager`` then says why).  The transformed function is recorded whole (its
        derivatives as recorded ops, which replay fastest); a first-order derivative of a
        plain function whose recorded derivative cannot replay (it branches on values:
        ``where``, ``maximum``) is recorded as the function itself instead, differentiated
        at replay by reverse sweeps over the batch."""
        compiled = self.record_with(entry, flat, dims, spec, p, kwargs, entry.mode == "sweeps")
        if compiled is None and not entry.tapes and entry.mode == "outputs" and \
                sweepable(self.func):
            entry.mode, entry.eager = "sweeps", None
            compiled = self.record_with(entry, flat, dims, spec, p, kwargs, sweeps=True)
        return compiled

    def record_with(self, entry, flat, dims, spec, p, kwargs, sweeps):
        previous = LEVELS.recording
        func = swept_function(self.func) if sweeps else self.func
        try:
            with Tape() as tape:
                LEVELS.recording = tape
                leaves = [x.detach().requires_grad_() if isinstance(x, Tensor) else x
                          for x in self.sample(flat, dims, p)]
                with enable_grad(), inside_transform():
                    out = func(*tree_unflatten(leaves, spec), **kwargs)
            outs, out_spec = tree_flatten(out)
            for o in outs:
                if not (isinstance(o, Tensor) and o.requires_grad):
                    raise TypeError("an output that is not a recorded float tensor (it does "
                                    "not depend on the inputs, or not differentiably)")
            plan = self.sweep_plan(leaves, spec, outs, out_spec) if sweeps else \
                [Piece("value", k, None, tuple(o.shape)) for k, o in enumerate(outs)]
            if sweeps:
                plan, out_spec = plan
            compiled = compile_tape(tape, [x for x in leaves if isinstance(x, Tensor)], outs)
        except Exception as e:   # replay cannot follow it; the eager path gives the answer
            entry.eager = f"recording failed: {type(e).__name__}: {e}"
            return None
        finally:
            LEVELS.recording = previous
        PATHS["recordings"] += 1
        layout = [piece.shape for piece in plan]
        if entry.layout is None:
            entry.layout, entry.out_spec, entry.plan = layout, out_spec, plan
        elif (entry.layout, entry.out_spec) != (layout, out_spec):
            entry.eager = "another branch returns results of other shapes"
            return None
        entry.tapes.append(compiled)
        return compiled

    def sweep_plan(self, flat, spec, outs, out_spec):
        """Where each result of ``jacrev``/``jacfwd``/``grad``/``grad_and_value`` comes
        from: a block of the Jacobian (an output, an input leaf) or an output's value, in
        the order of the transform's result; and that result's structure."""
        kind, (argnums, _) = self.func.kind, self.func.options
        hessian = is_hessian(self.func)
        if (hessian or kind in ("grad", "grad_and_value")) and \
                not (len(outs) == 1 and outs[0].dim() == 0):
            raise TypeError("a gradient or Hessian of a function that does not return one "
                            "scalar tensor")
        columns, at = {}, 0          # flat leaf index -> its columns of the input vector
        for k, x in enumerate(flat):
            if isinstance(x, Tensor):
                columns[k] = slice(at, at + x.numel())
                at += x.numel()
        rows, at = [], 0
        for o in outs:
            rows.append(slice(at, at + o.numel()))
            at += o.numel()
        firsts = np.cumsum([0] + [c.num_leaves for c in spec.children])
        nums = argnums_tuple(argnums, len(spec.children))
        for k in nums:
            for leaf in range(firsts[k], firsts[k + 1]):
                if not isinstance(flat[leaf], Tensor):
                    raise TypeError("a differentiated argument that is not a tensor")

        def per_argnum(make):
            """The structure of the arguments ``argnums`` with ``make(flat leaf index)`` at
            each leaf."""
            per_arg = [tree_unflatten([make(leaf) for leaf in range(firsts[k], firsts[k + 1])],
                                      spec.children[k]) for k in nums]
            return per_arg[0] if isinstance(argnums, int) else tuple(per_arg)

        def blocks(i):
            return per_argnum(lambda leaf: Piece("jacobian", i, leaf, tuple(outs[i].shape)
                                                 + tuple(flat[leaf].shape)))

        def hessian_blocks(a):
            return per_argnum(lambda b: Piece("hessian", 0, a, tuple(flat[a].shape)
                                              + tuple(flat[b].shape), second=b))

        if hessian:    # the Jacobian (by leaf b) of each leaf a of the gradient's structure
            firsts_a, inner_spec = tree_flatten(per_argnum(lambda a: a))
            result = tree_unflatten([hessian_blocks(a) for a in firsts_a], inner_spec)
        elif kind in ("jacrev", "jacfwd"):
            result = tree_unflatten([blocks(i) for i in range(len(outs))], out_spec)
        elif kind == "grad":
            result = blocks(0)
        else:
            result = (blocks(0), Piece("value", 0, None, tuple(outs[0].shape)))
        pieces, result_spec = tree_flatten(result)
        for piece in pieces:
            if piece.kind == "hessian":
                piece.rows, piece.columns = columns[piece.leaf], columns[piece.second]
            else:
                piece.rows, piece.columns = rows[piece.output], columns.get(piece.leaf)
        return pieces, result_spec

    def rows(self, entry, compiled, X):
        """The results at the points ``X`` laid out as ``entry.layout`` says, a row per
        point, and the mask of points that took every recorded branch."""
        if entry.mode == "outputs":
            return compiled.batch_outputs(X)
        if entry.plan[0].kind == "hessian":   # the replay's Hessian, one sample at a time
            _, ok = compiled.batch_outputs(X)
            H = np.zeros((len(X), compiled.n_inputs, compiled.n_inputs))
            for p in np.nonzero(ok)[0]:
                H[p] = compiled.hessian(X[p])
            return np.concatenate([H[:, piece.rows, piece.columns].reshape(len(X), -1)
                                   for piece in entry.plan], axis=1), ok
        values, J, ok = compiled.batch_jacobian(X)
        parts = [values[:, piece.rows] if piece.kind == "value" else
                 J[:, piece.rows, piece.columns].reshape(len(X), -1) for piece in entry.plan]
        return np.concatenate(parts, axis=1), ok

    def replay(self, entry, flat, dims, spec, size, kwargs):
        """The outputs at every sample from the recordings (recording at a sample whose
        branches none of them follows); None when the eager path must run."""
        X = np.concatenate([inputs_matrix(x, d, size) for x, d in zip(flat, dims)
                            if isinstance(x, Tensor)], axis=1)
        if not entry.tapes and self.record(entry, flat, dims, spec, 0, kwargs) is None:
            return None
        Y = None     # (samples, results)
        pending, tried = np.arange(size), 0
        while len(pending):
            fresh = tried == len(entry.tapes)
            if not fresh:
                compiled = entry.tapes[tried]
            elif len(entry.tapes) < MAX_RECORDINGS:
                compiled = self.record_with(entry, flat, dims, spec, int(pending[0]), kwargs,
                                            entry.mode == "sweeps")
                if compiled is None and entry.mode == "outputs" and sweepable(self.func):
                    # another branch's recorded derivative cannot replay (a prod's rule
                    # divides by x away from zeros): every sample by sweeps, as in ``record``
                    entry.__init__()
                    entry.mode = "sweeps"
                    return self.replay(entry, flat, dims, spec, size, kwargs)
                if compiled is None:
                    return None
            else:   # too many branch patterns: the rest one sample at a time, eagerly
                for p in pending:
                    Y[p] = self.flat_values(flat, dims, spec, int(p), kwargs)
                PATHS["eager_samples"] += len(pending)
                break
            values, ok = self.rows(entry, compiled, X if Y is None else X[pending])
            if fresh and not ok[0]:   # refuses its own sample (a NaN compared): eagerly there
                values[0] = self.flat_values(flat, dims, spec, int(pending[0]), kwargs)
                ok[0] = True
            if Y is None and ok.all():
                Y = values      # every sample took the first recording's branches
            else:
                if Y is None:
                    Y = np.empty((size, values.shape[1]))
                Y[pending[ok]] = values[ok]
            pending, tried = pending[~ok], tried + 1
        if not entry.verified and not self.verify(entry, flat, dims, spec, size, kwargs, Y):
            return None
        return self.assemble(entry, Y, size)

    def flat_values(self, flat, dims, spec, p, kwargs):
        with no_grad():
            outs, _ = self.outputs_at(flat, dims, spec, p, kwargs)
        return np.concatenate([np.asarray(o.detach().numpy(), dtype=np.float64).reshape(-1)
                               for o in outs])

    def verify(self, entry, flat, dims, spec, size, kwargs, Y):
        """Once per entry: the replay at the last sample must equal a fresh run there.  A
        recording that took a value as a constant which is not one (``x.detach()``, a
        computation under ``no_grad``, a closure read through NumPy) fails this."""
        entry.verified = True
        if size < 2:
            entry.verified = False   # nothing but the recorded sample yet: check next call
            return True
        expected = self.flat_values(flat, dims, spec, size - 1, kwargs)
        scale = max(1.0, float(np.nanmax(np.abs(expected), initial=0.0)))
        if not np.allclose(Y[size - 1], expected, rtol=1e-9, atol=1e-12 * scale,
                           equal_nan=True):
            entry.eager = ("the replay disagreed with a fresh run at another sample (the "
                           "function uses a value the recording holds as a constant: detach, "
                           "no_grad, a read into NumPy)")
            entry.tapes.clear()
            return False
        return True

    def assemble(self, entry, Y, size):
        out_dims = broadcast_prefix(self.out_dims,
                                    tree_unflatten(list(range(len(entry.layout))),
                                                   entry.out_spec),
                                    f"{self.where()}: out_dims")
        result, at = [], 0
        for shape, d in zip(entry.layout, out_dims):
            n = int(np.prod(shape, dtype=np.int64))
            block = Y[:, at:at + n].reshape((size,) + shape)
            at += n
            if d is None:
                result.append(as_tensor(block[0].copy()))
                continue
            result.append(as_tensor(np.ascontiguousarray(np.moveaxis(block, 0, d))))
        return tree_unflatten(result, entry.out_spec)


def captured_tensors(func, limit=256):
    """The tensors ``func`` reads besides its arguments, as far as Python shows them: the
    closure cells, defaults and globals its code names, the parameters and buffers of a
    module (anything with ``parameters()``), and the same for the functions of the caller's
    own code it names, through tg.func's wrappers and ``functools.partial``.  A recording
    holds them as constants, so ``vmap`` keys its recordings on their values."""
    found, seen, todo = [], set(), [func]
    while todo and len(seen) < limit:
        f = todo.pop()
        if id(f) in seen:
            continue
        seen.add(id(f))
        if isinstance(f, Tensor):
            found.append(f)
        elif isinstance(f, (Transformed, Vmapped, functools.partial)):
            todo.append(f.func)
            todo += list(getattr(f, "args", ())) + list(getattr(f, "keywords", {}).values())
        elif isinstance(f, (tuple, list)):
            todo += list(f)
        elif isinstance(f, dict):
            todo += list(f.values())
        elif isinstance(f, types.FunctionType):
            if f.__module__ and f.__module__.split(".")[0] in LIBRARIES:
                continue    # library code: its own constants are not the caller's
            cells = [c.cell_contents for c in f.__closure__ or () if not _empty(c)]
            names = [f.__globals__[n] for n in f.__code__.co_names if n in f.__globals__]
            todo += cells + list(f.__defaults__ or ()) + names
        elif callable(getattr(type(f), "parameters", None)) and not isinstance(f, type):
            todo += list(f.parameters()) + list(getattr(f, "buffers", list)())
    return found


LIBRARIES = {"tapegrad", "numpy", "torch", "scipy", "builtins", "functools", "math"}


def _empty(cell):
    try:
        cell.cell_contents
    except ValueError:
        return True
    return False


def fingerprint(t):
    """A captured tensor's identity and current value."""
    v = np.ascontiguousarray(t.detach().numpy())
    return id(t), tuple(t.shape), str(t.dtype), hashlib.blake2b(v.reshape(-1).view(np.uint8)).digest()


def inputs_matrix(x, d, size):
    """An argument's elements per sample: (size, numel of one sample)."""
    v = np.asarray(x.detach().numpy(), dtype=np.float64)
    if d is None:
        return np.broadcast_to(v.reshape(1, -1), (size, v.size))
    return np.moveaxis(v, d, 0).reshape(size, -1)


def signature(x, d):
    if isinstance(x, Tensor):
        shape = tuple(x.shape)
        return ("tensor", shape[:d] + shape[d + 1:] if d is not None else shape, d)
    return ("constant", freeze(x))


def freeze(x):
    """A hashable stand-in for a constant argument (None when it has none: a tensor in a
    keyword argument would otherwise be recorded as a constant and cached by identity)."""
    if isinstance(x, Tensor):
        return None
    if isinstance(x, dict):
        items = [(k, freeze(v)) for k, v in x.items()]
        return None if any(v is None and x[k] is not None for k, v in items) else \
            ("dict", tuple(items))
    if isinstance(x, (tuple, list)):
        items = tuple(freeze(v) for v in x)
        return None if any(f is None and v is not None for f, v in zip(items, x)) else \
            (type(x).__name__, items)
    try:
        hash(x)
    except TypeError:
        return None
    return ("value", type(x).__name__, x)
