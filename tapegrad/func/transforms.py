"""``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``: the
derivative transforms of ``torch.func``, on tapegrad's reverse walk.

Each transform calls the function once with fresh nodes for the inputs it differentiates
(a leaf, or a view of a tensor an outer transform already tracks) and takes gradients with
``autograd.grad``.  Inside another transform (``jacfwd(jacrev(f))``, ``grad(grad(f))``,
``vmap`` recording ``jacrev(f)``) the gradients are taken with ``create_graph=True``, so
they are recorded tensors the outer transform differentiates again: one walk for every
order, no second set of rules.  At the outermost level the results are detached.

``jvp`` is the transpose of a vjp (the "double vjp": ``J v = d/du (u^T J) v``), and
``jacfwd`` computes the same Jacobian as ``jacrev`` by reverse sweeps (one per output
element): the values are the same, and only reverse sweeps compose with everything the walk
records.  The fast path for batches is ``vmap``, which records the whole transformed
function once and replays it (``tapegrad/func/batching.py``).
"""
from __future__ import annotations

import functools
import threading
from contextlib import contextmanager

from ..autograd import grad as autograd_grad
from ..core.grad_mode import enable_grad
from ..core.tape import Tape
from ..core.tensor import Tensor
from ..ops.factories import ones_like, zeros, zeros_like
from ..ops.torch_api import FUNCTIONS as TORCH_FUNCTIONS
from .pytree import tree_flatten, tree_map, tree_unflatten

_stack = TORCH_FUNCTIONS["stack"]


class Levels(threading.local):
    """Per thread: how many transforms are running their function (``depth``), and while
    ``vmap`` records, the tape it records on (``recording``)."""

    depth = 0
    recording = None


LEVELS = Levels()


@contextmanager
def inside_transform():
    LEVELS.depth += 1
    try:
        yield
    finally:
        LEVELS.depth -= 1


def is_nested(*trees):
    """Must this level's derivatives be recorded?  Yes inside another transform, and when
    an argument is tracked by the caller's own autograd (its result stays differentiable,
    as with torch.func)."""
    return LEVELS.depth > 0 or any(isinstance(t, Tensor) and t.requires_grad
                                   for tree in trees for t in tree_flatten(tree)[0])


@contextmanager
def level_tape(nested):
    """The outermost level records on a tape of its own, dropped with its results; a
    nested level records where the outer one does, so their graphs connect."""
    if nested:
        yield
    else:
        with Tape():
            yield


def level_input(x, fn):
    """A fresh node for ``x`` at this level: gradients are taken with respect to it, and
    when an outer level tracks ``x`` they still flow out through it."""
    if not isinstance(x, Tensor):
        raise RuntimeError(f"{fn}: expected every differentiated argument to be a Tensor, "
                           f"got {type(x)}")
    return x.view_as(x) if x.requires_grad else x.detach().requires_grad_()


def finish(tree, nested):
    """Results at the outermost level are plain tensors (no graph into this level)."""
    if nested:
        return tree
    return tree_map(lambda t: t.detach() if isinstance(t, Tensor) else t, tree)


def derivative(t, nested):
    """A derivative that does not depend on the inputs (``jacrev`` of a linear function):
    while ``vmap`` records, it becomes a leaf of the recording, which replays it as the
    constant it is; ``vmap`` treats any other unrecorded output as one replay cannot follow."""
    if nested and LEVELS.recording is not None and not t.requires_grad:
        return t.detach().requires_grad_().clone()   # (an op records the leaf on the tape)
    return t


def gradients(outputs, inputs, grad_outputs, create_graph):
    """d(sum grad_outputs . outputs)/d inputs, a tensor per input (zeros where unused)."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        return [zeros_like(x).detach() for x in inputs]
    if create_graph and LEVELS.recording is not None:
        # while vmap records, the seeds are recorded (leaves replay takes as constants):
        # a rule that branches on a recorded comparison then records its where, which a
        # replay follows, instead of choosing between constants, which it cannot
        pairs = [(o, g if isinstance(g, Tensor) and g.requires_grad else
                  (ones_like(o) if g is None else g).detach().requires_grad_())
                 for o, g in pairs]
    got = autograd_grad([o for o, _ in pairs], inputs, [g for _, g in pairs],
                        retain_graph=True, create_graph=create_graph, allow_unused=True)
    return [zeros_like(x).detach() if g is None else g for g, x in zip(got, inputs)]


def argnums_tuple(argnums, n_args):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError("argnums must be non-empty")
    for k in nums:
        if not isinstance(k, int):
            raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(k)}")
        if not -n_args <= k < n_args:
            raise RuntimeError(f"Got argnum={k}, but only {n_args} positional inputs")
    return tuple(k % n_args for k in nums)


def with_level_inputs(args, argnums, fn):
    """``args`` with the differentiated ones replaced by level inputs: (args, [(leaves,
    spec)] per argnum)."""
    args = list(args)
    parts = []
    for k in argnums_tuple(argnums, len(args)):
        leaves, spec = tree_flatten(args[k])
        leaves = [level_input(x, fn) for x in leaves]
        args[k] = tree_unflatten(leaves, spec)
        parts.append((leaves, spec))
    return args, parts


def per_argnum(argnums, parts, values):
    """Flat per-input ``values`` back into the structure of the differentiated arguments."""
    out, at = [], 0
    for leaves, spec in parts:
        out.append(tree_unflatten(values[at:at + len(leaves)], spec))
        at += len(leaves)
    return out[0] if isinstance(argnums, int) else tuple(out)


class Transformed:
    """A transformed function.  Two are equal when they apply the same transform with the
    same options to the same function, so ``vmap(jacrev(f))`` written inline at every call
    finds the recording the previous call made."""

    def __init__(self, kind, func, options, call):
        self.kind, self.func, self.options, self.call = kind, func, options, call
        functools.update_wrapper(self, func, updated=())

    def __call__(self, *args, **kwargs):
        return self.call(*args, **kwargs)

    def __eq__(self, other):
        return isinstance(other, Transformed) and \
            (self.kind, self.func, self.options) == (other.kind, other.func, other.options)

    def __hash__(self):
        return hash((self.kind, self.func, self.options))

    def __repr__(self):
        return f"<tg.func.{self.kind}({getattr(self.func, '__name__', self.func)!r})>"


def hashable(argnums):
    return argnums if isinstance(argnums, int) else tuple(argnums)


def split_aux(out, has_aux, fn):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{fn}(f)(*args): output of function f should be a tuple: "
                           "(output, aux) if has_aux is True")
    return out


def grad_and_value(func, argnums=0, has_aux=False):
    """``torch.func.grad_and_value``: ``(gradient, value)`` of a function returning a
    scalar tensor; with ``has_aux`` the function returns ``(value, aux)`` and this returns
    ``(gradient, (value, aux))``.  ``argnums`` (int or tuple) picks the arguments; the
    gradient has their structure.  Runs ``func`` once per call (eagerly, one reverse
    sweep); under ``vmap`` the whole thing is recorded once and replayed."""
    def wrapper(*args, **kwargs):
        nested = is_nested(args, kwargs)
        with level_tape(nested), enable_grad(), inside_transform():
            args, parts = with_level_inputs(args, argnums, "grad_and_value(f)(*args)")
            output, aux = split_aux(func(*args, **kwargs), has_aux, "grad_and_value")
            if not isinstance(output, Tensor):
                raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a "
                                   f"Tensor, got {type(output)}")
            if output.dim() != 0:
                raise RuntimeError(
                    "grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, "
                    f"got tensor with {output.dim()} dims. Maybe you wanted to use the vjp or "
                    "jacrev APIs instead?")
            flat = [x for leaves, _ in parts for x in leaves]
            gs = gradients([output], flat, [None], nested)
            gs = [derivative(g, nested) for g in gs]
        g = finish(per_argnum(argnums, parts, gs), nested)
        value = finish(output, nested)
        return (g, (value, finish(aux, nested))) if has_aux else (g, value)

    return Transformed("grad_and_value", func, (hashable(argnums), has_aux), wrapper)


def grad(func, argnums=0, has_aux=False):
    """``torch.func.grad``: the gradient of a scalar function (``(gradient, aux)`` with
    ``has_aux``).  See ``grad_and_value``."""
    both = grad_and_value(func, argnums, has_aux)

    def wrapper(*args, **kwargs):
        g, value = both(*args, **kwargs)
        return (g, value[1]) if has_aux else g

    return Transformed("grad", func, (hashable(argnums), has_aux), wrapper)


def output_leaves(out, fn):
    leaves, spec = tree_flatten(out)
    for t in leaves:
        if not isinstance(t, Tensor):
            raise RuntimeError(f"{fn}: Expected f to be a function that has only Tensors (or "
                               f"nested tuples of them) as outputs, got {type(t)}")
    return leaves, spec


def vjp(func, *primals, has_aux=False):
    """``torch.func.vjp``: ``(output, vjp_fn)`` (and ``aux``), where ``vjp_fn(cotangents)``
    returns a tuple with one gradient per primal.  ``vjp_fn`` can be called many times."""
    nested = is_nested(primals)
    with level_tape(nested), enable_grad(), inside_transform():
        args, parts = with_level_inputs(primals, tuple(range(len(primals))), "vjp(f, *primals)")
        out, aux = split_aux(func(*args), has_aux, "vjp")
        outs, out_spec = output_leaves(out, "vjp(f, *primals)")
    flat = [x for leaves, _ in parts for x in leaves]

    def vjp_fn(*cotangents):
        ct = cotangents[0] if len(cotangents) == 1 else cotangents
        cts, spec = tree_flatten(ct)
        if spec != out_spec:
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as "
                               f"pytree structure of outputs to the function. cotangents: "
                               f"{spec}, primal output: {out_spec}")
        for o, c in zip(outs, cts):
            if tuple(o.shape) != tuple(c.shape):
                raise RuntimeError(f"Mismatch in shape: grad_output[0] has a shape of "
                                   f"{c.shape} and output[0] has a shape of {o.shape}.")
        inner = nested or is_nested(ct)
        with enable_grad(), inside_transform():
            gs = [derivative(g, inner) for g in gradients(outs, flat, cts, inner)]
        return finish(per_argnum(tuple(parts), parts, gs), inner)

    result = (finish(out, nested), vjp_fn)
    return result + (finish(aux, nested),) if has_aux else result


def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """``torch.func.jvp``: ``(output, J @ tangents)`` (and ``aux``).  Computed as the
    transpose of a vjp (two reverse sweeps), so it composes with every other transform."""
    if not isinstance(primals, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals to be a tuple. E.g. "
                           "it should be valid to call f(*primals).")
    if not isinstance(tangents, tuple) or tree_flatten(tangents)[1] != tree_flatten(primals)[1]:
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have "
                           "the same python structure.")
    for p, t in zip(tree_flatten(primals)[0], tree_flatten(tangents)[0]):
        if tuple(p.shape) != tuple(t.shape):
            raise RuntimeError(
                "Trying to set a forward gradient that has a different size than that of the "
                f"original Tensor, this is not supported. Tensor is of size {list(p.shape)} "
                f"while the given forward gradient is of size {list(t.shape)}.")
    nested = is_nested(primals, tangents)
    with level_tape(nested), enable_grad(), inside_transform():
        args, parts = with_level_inputs(primals, tuple(range(len(primals))),
                                        "jvp(f, primals, tangents)")
        out, aux = split_aux(func(*args), has_aux, "jvp")
        outs, out_spec = output_leaves(out, "jvp(f, primals, tangents)")
        flat = [x for leaves, _ in parts for x in leaves]
        seeds = [zeros_like(o).detach().requires_grad_() if o.requires_grad else None
                 for o in outs]
        live = [(o, u) for o, u in zip(outs, seeds) if u is not None]
        gs = gradients([o for o, _ in live], flat, [u for _, u in live], True) if live else []
        pairs = [(g, t) for g, t in zip(gs, tree_flatten(tangents)[0]) if g.requires_grad]
        us = [u for _, u in live]
        tan = gradients([g for g, _ in pairs], us, [t for _, t in pairs], nested) \
            if pairs else [zeros_like(u).detach() for u in us]
        it = iter(tan)
        jv = [derivative(next(it), nested) if u is not None else zeros_like(o).detach()
              for o, u in zip(outs, seeds)]
    result = (finish(out, nested), finish(tree_unflatten(jv, out_spec), nested))
    return result + (finish(aux, nested),) if has_aux else result


def jacobian_rows(o, flat, nested):
    """d o / d x for every input ``x``: shape ``o.shape + x.shape``, one sweep per element
    of ``o``."""
    if not o.requires_grad:
        return [zeros(tuple(o.shape) + tuple(x.shape)) for x in flat]
    rows = [[] for _ in flat]
    n = o.numel()
    for k in range(n):
        seed = zeros(n)
        seed[k] = 1.0
        for r, g in zip(rows, gradients([o], flat, [seed.reshape(o.shape)], nested)):
            r.append(g)
    return [_stack(r).reshape(tuple(o.shape) + tuple(x.shape)) for r, x in zip(rows, flat)]


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """``torch.func.jacrev``: the Jacobian of every output with respect to the arguments
    ``argnums`` (shape ``output.shape + input.shape``), by one reverse sweep per output
    element; with ``has_aux``, ``(jacobian, aux)``.  ``chunk_size`` is accepted (the sweeps
    run one at a time).  ``vmap(jacrev(f))`` records it once and replays the batch."""
    return Transformed("jacrev", func, (hashable(argnums), has_aux),
                       jacobian_transform(func, argnums, has_aux, "jacrev"))


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """``torch.func.jacfwd``: the same Jacobian as ``jacrev`` (tapegrad computes both by
    reverse sweeps, which compose with every transform; the values are equal)."""
    return Transformed("jacfwd", func, (hashable(argnums), has_aux),
                       jacobian_transform(func, argnums, has_aux, "jacfwd"))


def jacobian_transform(func, argnums, has_aux, name):
    def wrapper(*args, **kwargs):
        nested = is_nested(args, kwargs)
        with level_tape(nested), enable_grad(), inside_transform():
            args, parts = with_level_inputs(args, argnums, f"{name}(f)(*args)")
            out, aux = split_aux(func(*args, **kwargs), has_aux, name)
            outs, out_spec = output_leaves(out, f"{name}(f)(*args)")
            flat = [x for leaves, _ in parts for x in leaves]
            jac = [per_argnum(argnums, parts,
                              [derivative(j, nested) for j in jacobian_rows(o, flat, nested)])
                   for o in outs]
        result = finish(tree_unflatten(jac, out_spec), nested)
        return (result, finish(aux, nested)) if has_aux else result

    return wrapper


def hessian(func, argnums=0):
    """``torch.func.hessian``: ``jacfwd(jacrev(func, argnums), argnums)``."""
    return jacfwd(jacrev(func, argnums), argnums)
