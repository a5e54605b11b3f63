"""The array-op table: ops whose backward is NumPy code (reductions, linear algebra,
shape changes, indexing).  The single source of truth for them, as ``optable.py`` is for the
elementwise ops that sweep in Numba.

Each row is a forward over NumPy values and a vector-Jacobian product in HIPS autograd's
style: ``vjp(g, ans, *xs, **params)`` returns the gradient for each input, given ``g`` (the
gradient of the result) and ``ans`` (the result).  Rows are registered with ``@defop``; the
``tg.<name>`` functions and ``Tensor`` methods are derived from the table in ``__init__``,
and ``tests/test_array_ops.py`` checks every row against finite differences (and fails when
a row has no test case).  A recorded array op is a ``pyfunc`` entry on the tape: the Numba
sweep stops there and calls the vjp.
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Union

import numpy as np

from ..core.pyop import Arg, record, unbroadcast
from ..core.tape import recording
from ..core.tensor import (Tensor, note_comparison_use, recorded_comparison, tensor_of_entry,
                           wrap)


class ArrayOp(NamedTuple):
    name: str
    node: Union[str, Callable]  # node name, or a function of the call's (values, params)
    forward: Callable           # (*values, **params) -> value (or tuple: see ``outputs``)
    vjp: Callable               # (g, ans, *values, **params) -> tuple of input gradients
    method: bool = True         # also a Tensor method
    outputs: Optional[Callable] = None  # for multi-output ops: ans -> (differentiable, extra)
    cast: bool = True           # results take the inputs' float dtype (float32 stays float32)
    tensor_vjp: bool = False    # the vjp is written in tapegrad ops on tensors (see below)


ARRAY_OPS = {}


def defop(name, node, method=True, outputs=None, cast=True, tensor_vjp=False):
    """Register ``forward`` (the decorated function) with its ``vjp`` (``forward.vjp``).

    With ``tensor_vjp`` the rule is written in tapegrad ops: ``vjp(g, ans, *args, **params)``
    gets the result's gradient ``g`` and the result ``ans`` as tensors, each tensor argument
    as a tensor (recorded under ``create_graph=True``) and other arguments as given; it
    returns one gradient per positional argument (a tensor, None, or a function of no
    arguments computing it only when that input needs it).  Broadcasting is undone by the
    caller (``sum_to``), never inside a rule."""
    def register(forward):
        def with_vjp(vjp):
            ARRAY_OPS[name] = ArrayOp(name, node, forward, vjp, method, outputs, cast, tensor_vjp)
            return vjp
        forward.defvjp = with_vjp
        return forward
    return register


def _np(v):
    return np.asarray(v) if v.__class__ is not float else np.float64(v)


def _out(v, like=None):
    """A forward result as a tensor value: 0-d float64 becomes a Python float."""
    v = np.asarray(v)
    if like is not None and v.dtype != like and like.kind == "f":
        v = v.astype(like)
    if v.ndim == 0 and v.dtype == np.float64:
        return float(v)
    return v


def apply(name, inputs, value, backward_fn, differentiable=False):
    """Record a Python-backward op with result ``value`` (when grad mode is on and an input
    requires grad); returns the result tensor.  ``backward_fn(g)`` takes the result's
    gradient and returns one gradient per input (or None).  With ``differentiable`` it is
    written in tapegrad ops on tensors, so ``create_graph=True`` records it; otherwise it
    works on NumPy values and ``create_graph=True`` through it raises."""
    T = recording()
    if T is None or not any(isinstance(t, Tensor) and t._t is not None for t in inputs):
        return wrap(np.asarray(value) if value.__class__ is not float else value)
    if value.__class__ is not float:
        value = np.asarray(value)
        if value.ndim == 0 and value.dtype == np.float64:
            value = float(value)
    refs = [(t._i if t._t is T else T._ref(t)) if isinstance(t, Tensor) and t._t is not None
            else -1 for t in inputs]
    if differentiable:
        def run(gs):
            return backward_fn(gs[0])
    else:
        def run(gs):
            return backward_fn(gs[0]._v)
    i = record(T, name, refs, [value], run, differentiable)[0]
    return tensor_of_entry(T, i, value)


def _record_call(op, node, args, outs, params):
    """Record array op ``op`` applied to ``args`` with results ``outs``; returns the result
    tensors.  The entry keeps the call (``PyOp.fwd``): the walk finds the rule from it."""
    T = recording()
    tensors = [a for a in args if isinstance(a, Tensor)]
    if T is None or not any(t._t is not None for t in tensors):
        return [wrap(v) for v in outs]
    refs = [(t._i if t._t is T else T._ref(t)) if t._t is not None else -1 for t in tensors]
    idx = record(T, node, refs, outs, None, True, (op.name, _template(args), params))
    return [tensor_of_entry(T, i, v) for i, v in zip(idx, outs)]


def pyop_backward(py, grads, saved, outs, create_graph):
    """The input gradients of recorded Python op ``py`` (one per ``py.inputs``, None for
    an input that needs none), given its outputs' gradients ``grads`` (tensors).
    ``saved(ref)`` is the value an input had, as a tensor (recorded in a create_graph walk),
    and ``outs`` the outputs likewise."""
    if py.backward_fn is not None:   # a custom Function, or an op of nn.functional
        if create_graph and not py.differentiable:
            raise NotImplementedError(
                f"create_graph=True through {py.name} is not supported: its backward is "
                "NumPy code")
        return py.backward_fn(grads)
    name, template, params = py.fwd
    op = ARRAY_OPS[name]
    tensor_pos = [k for k, a in enumerate(template) if isinstance(a, (Arg, Tensor))]
    args = [saved(py.inputs[int(a)]) if isinstance(a, Arg) else a for a in template]
    multi = py.nout > 1 or name == "split"
    g, ans = (grads, outs) if multi else (grads[0], outs[0])
    if op.tensor_vjp:
        gs = op.vjp(g, ans, *args, **params)
        return [_graph_shape(gs[k], args[k]) if r >= 0 else None
                for r, k in zip(py.inputs, tensor_pos)]
    if create_graph:
        rule = GRAPH_VJPS.get(name)
        if rule is None:
            raise NotImplementedError(
                f"create_graph=True through {py.name} ({name}) is not supported yet")
        gs = rule(g, [a._v for a in ans] if multi else ans._v, *args, **params)
        return [_graph_shape(gs[k], args[k]) if r >= 0 else None
                for r, k in zip(py.inputs, tensor_pos)]
    vals = [_np(a._v) if isinstance(a, Tensor) else a for a in args]
    gv = [np.asarray(x._v) for x in g] if multi else np.asarray(g._v)
    av = [x._v for x in ans] if multi else np.asarray(ans._v)
    gs = op.vjp(gv, av, *vals, **params)
    return [_shape_grad(gs[k], vals[k]) if r >= 0 else None
            for r, k in zip(py.inputs, tensor_pos)]


def call(name, *args, **params):
    """Apply array op ``name`` to tensors/constants ``args``; records when grad is on."""
    compared = False
    for a in args:   # inside tg.compile: array ops on its elements become scalar entries
        if a.__class__ is not Tensor:
            handler = getattr(a, "__tapegrad_array_op__", None)
            if handler is not None:
                return handler(name, args, params)
        elif a._v.__class__ is float and a._t is not None:
            T = recording()
            if T is not None and T.rewrite_array_op is not None:
                return T.rewrite_array_op(name, args, params)
        elif getattr(a, "_g", None) is not None:
            compared = True
    op = ARRAY_OPS[name]
    tensors = [a for a in args if isinstance(a, Tensor)]
    if compared and not any(t._t is not None for t in tensors):
        T = recording()
        g = recorded_comparison(T, tensors) if T is not None else None
        if g is not None:
            note_comparison_use(T, g)
    vals = [_np(a._v) if isinstance(a, Tensor) else a for a in args]
    ans = op.forward(*vals, **params)
    extra = None
    if op.outputs is not None:
        ans, extra = op.outputs(ans)
    dt = next((np.asarray(a._v).dtype for a in tensors if a._v.__class__ is not float), None) \
        if op.cast else None
    node = op.node(*vals, **params) if callable(op.node) else op.node
    if isinstance(ans, tuple):  # several differentiable outputs (split, chunk)
        return tuple(_record_call(op, node, args, [_out(v, dt) for v in ans], params))
    res = _record_call(op, node, args, [_out(ans, dt)], params)[0]
    return res if extra is None else (res, wrap(extra))


def _template(args):
    """The arguments of a recorded call, each tensor that requires grad replaced by its
    input number (a tensor without grad is a constant: kept as a tensor of its value)."""
    out, k = [], 0
    for a in args:
        if isinstance(a, Tensor):
            out.append(Arg(k) if a._t is not None else wrap(a._v))
            k += 1
        else:
            out.append(a)
    return tuple(out)


def _shape_grad(g, x):
    """An input's gradient, shaped like the input.  A rule may return a thunk (a function
    of no arguments) for a costly gradient: it is only called when the input needs it."""
    if callable(g):
        g = g()
    if g is None:
        return None
    x = np.asarray(x)
    g = np.asarray(g, dtype=np.float64)
    if g.shape != x.shape:
        g = unbroadcast(g, x.shape) if g.ndim >= x.ndim else np.broadcast_to(g, x.shape)
    return float(g) if x.ndim == 0 else g


def _axes(dim, ndim):
    if dim is None:
        return None
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    return tuple(d % max(ndim, 1) for d in dims)


def _keep(g, x, dim, keepdim):
    """Reshape a reduced gradient so that it broadcasts against the input ``x``."""
    g = np.asarray(g)
    if dim is None:
        return np.broadcast_to(g.reshape((1,) * x.ndim) if x.ndim else g, x.shape)
    if not keepdim:
        for d in sorted(_axes(dim, x.ndim)):
            g = np.expand_dims(g, d)
    return np.broadcast_to(g, x.shape)


def _name(base, dim):
    return f"{base}Backward0" if dim is None else f"{base}Backward1"


# -- reductions ---------------------------------------------------------------------------

@defop("sum", lambda x, dim=None, keepdim=False: _name("Sum", dim))
def sum(x, dim=None, keepdim=False):  # noqa: A001
    return np.sum(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


@sum.defvjp
def _(g, ans, x, dim=None, keepdim=False):
    return (_keep(g, x, dim, keepdim),)


@defop("mean", lambda x, dim=None, keepdim=False: _name("Mean", dim))
def mean(x, dim=None, keepdim=False):
    return np.mean(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


@mean.defvjp
def _(g, ans, x, dim=None, keepdim=False):
    return (_keep(g, x, dim, keepdim) * (np.size(ans) / max(x.size, 1)),)


@defop("prod", lambda x, dim=None, keepdim=False: _name("Prod", dim))
def prod(x, dim=None, keepdim=False):
    return np.prod(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


@prod.defvjp
def _(g, ans, x, dim=None, keepdim=False):
    # d prod / d x_i = prod of the others (computed without dividing, so zeros are fine)
    ax = _axes(dim, x.ndim)
    ax = tuple(range(x.ndim)) if ax is None else ax
    moved = np.moveaxis(x, ax, tuple(range(-len(ax), 0)))
    flat = moved.reshape(moved.shape[:moved.ndim - len(ax)] + (-1,))
    left = np.cumprod(np.concatenate([np.ones(flat.shape[:-1] + (1,)), flat[..., :-1]], -1), -1)
    right = np.cumprod(np.concatenate([np.ones(flat.shape[:-1] + (1,)), flat[..., :0:-1]], -1),
                       -1)[..., ::-1]
    others = np.moveaxis((left * right).reshape(moved.shape), tuple(range(-len(ax), 0)), ax)
    return (_keep(g, x, dim, keepdim) * others,)


def _ties_vjp(g, ans, x, dim=None, keepdim=False):
    # full reductions split the gradient evenly among ties, as PyTorch's max()/amax
    mask = (x == _keep(ans, x, dim, keepdim)).astype(np.float64)
    count = _keep(np.sum(mask, axis=_axes(dim, x.ndim), keepdims=keepdim), x, dim, keepdim)
    return (_keep(g, x, dim, keepdim) * mask / count,)


@defop("amax", "AmaxBackward0")
def amax(x, dim=None, keepdim=False):
    return np.amax(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


amax.defvjp(_ties_vjp)


@defop("amin", "AminBackward0")
def amin(x, dim=None, keepdim=False):
    return np.amin(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


amin.defvjp(_ties_vjp)


def _arg_extreme(argfn):
    def forward(x, dim, keepdim=False):
        idx = argfn(x, axis=dim, keepdims=True)
        vals = np.take_along_axis(x, idx, axis=dim)
        if not keepdim:
            vals, idx = np.squeeze(vals, dim), np.squeeze(idx, dim)
        return vals, idx.astype(np.int64)
    return forward


def _route(argfn):
    def vjp(g, ans, x, dim, keepdim=False):
        idx = argfn(x, axis=dim, keepdims=True)
        gk = g if keepdim else np.expand_dims(g, dim)
        out = np.zeros(x.shape)
        np.put_along_axis(out, idx, gk, axis=dim)
        return (out,)
    return vjp


@defop("max_dim", "MaxBackward0", method=False, outputs=tuple)
def max_dim(x, dim, keepdim=False):
    return _arg_extreme(np.argmax)(x, dim, keepdim)


max_dim.defvjp(_route(np.argmax))


@defop("min_dim", "MinBackward0", method=False, outputs=tuple)
def min_dim(x, dim, keepdim=False):
    return _arg_extreme(np.argmin)(x, dim, keepdim)


min_dim.defvjp(_route(np.argmin))


@defop("max_all", "MaxBackward1", method=False)
def max_all(x):
    return np.max(x)


max_all.defvjp(lambda g, ans, x: _ties_vjp(g, ans, x))


@defop("min_all", "MinBackward1", method=False)
def min_all(x):
    return np.min(x)


min_all.defvjp(lambda g, ans, x: _ties_vjp(g, ans, x))


@defop("var", "VarBackward0")
def var(x, dim=None, unbiased=True, keepdim=False, correction=None):
    ddof = (1 if unbiased else 0) if correction is None else correction
    return np.var(x, axis=_axes(dim, x.ndim), ddof=ddof, keepdims=keepdim)


@var.defvjp
def _(g, ans, x, dim=None, unbiased=True, keepdim=False, correction=None):
    # d var / dx = 2 (x - mean) / (N - ddof)
    ddof = (1 if unbiased else 0) if correction is None else correction
    n = x.size // max(np.size(ans), 1)
    mu = np.mean(x, axis=_axes(dim, x.ndim), keepdims=True)
    return (_keep(g, x, dim, keepdim) * 2.0 * (x - mu) / (n - ddof),)


@defop("std", "StdBackward0")
def std(x, dim=None, unbiased=True, keepdim=False, correction=None):
    return np.sqrt(var(x, dim, unbiased, keepdim, correction))


@std.defvjp
def _(g, ans, x, dim=None, unbiased=True, keepdim=False, correction=None):
    # d std = d var / (2 std)
    (gv,) = ARRAY_OPS["var"].vjp(g, ans ** 2, x, dim, unbiased, keepdim, correction)
    return (gv / (2.0 * _keep(ans, x, dim, keepdim)),)


@defop("norm", "LinalgVectorNormBackward0")
def norm(x, p=2, dim=None, keepdim=False):
    ax = _axes(dim, x.ndim)
    if p == 2:
        return np.sqrt(np.sum(x * x, axis=ax, keepdims=keepdim))
    if p == 1:
        return np.sum(np.abs(x), axis=ax, keepdims=keepdim)
    if p in (np.inf, "inf"):
        return np.max(np.abs(x), axis=ax, keepdims=keepdim)
    return np.sum(np.abs(x) ** p, axis=ax, keepdims=keepdim) ** (1.0 / p)


@norm.defvjp
def _(g, ans, x, p=2, dim=None, keepdim=False):
    a = _keep(ans, x, dim, keepdim)
    gk = _keep(g, x, dim, keepdim)
    if p == 2:   # x / |x|, 0 at the origin (as PyTorch)
        return (gk * np.where(a == 0, 0.0, x / np.where(a == 0, 1.0, a)),)
    if p == 1:
        return (gk * np.sign(x),)
    if p in (np.inf, "inf"):
        return _ties_vjp(g, ans, np.abs(x), dim, keepdim)[0] * np.sign(x),
    return (gk * np.sign(x) * np.abs(x) ** (p - 1) * np.where(a == 0, 0.0, a) ** (1 - p),)


@defop("logsumexp", "LogsumexpBackward0")
def logsumexp(x, dim, keepdim=False):
    ax = _axes(dim, x.ndim)
    m = np.max(x, axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    return out if keepdim else np.squeeze(out, ax)


@logsumexp.defvjp
def _(g, ans, x, dim, keepdim=False):
    # d lse / dx = softmax(x)
    return (_keep(g, x, dim, keepdim) * np.exp(x - _keep(ans, x, dim, keepdim)),)


@defop("softmax", "SoftmaxBackward0")
def softmax(x, dim):
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


@softmax.defvjp
def _(g, ans, x, dim):
    # J^T g = s * (g - sum(g s))
    return (ans * (g - np.sum(g * ans, axis=dim, keepdims=True)),)


@defop("log_softmax", "LogSoftmaxBackward0")
def log_softmax(x, dim):
    m = np.max(x, axis=dim, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True))


@log_softmax.defvjp
def _(g, ans, x, dim):
    # J^T g = g - softmax * sum(g)
    return (g - np.exp(ans) * np.sum(g, axis=dim, keepdims=True),)


# -- linear algebra -----------------------------------------------------------------------

def _mm_name(a, b):
    if a.ndim == 1 and b.ndim == 1:
        return "DotBackward0"
    if a.ndim == 2 and b.ndim == 1:
        return "MvBackward0"
    if a.ndim == 2 and b.ndim == 2:
        return "MmBackward0"
    if a.ndim == 1:
        return "SqueezeBackward4"
    return "UnsafeViewBackward0"


@defop("matmul", lambda a, b: _mm_name(a, b))
def matmul(a, b):
    return np.matmul(a, b)


@matmul.defvjp
def _(g, ans, a, b):
    # dA = g B^T, dB = A^T g, with 1-D operands promoted as matmul does, then unbroadcast
    if a.ndim == 1 and b.ndim == 1:
        return (g * b, g * a)
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = np.expand_dims(g2, -2)
    if b.ndim == 1:
        g2 = np.expand_dims(g2, -1)

    def ga():
        r = np.matmul(g2, np.swapaxes(b2, -1, -2))
        return unbroadcast(r[..., 0, :] if a.ndim == 1 else r, a.shape)

    def gb():
        r = np.matmul(np.swapaxes(a2, -1, -2), g2)
        return unbroadcast(r[..., :, 0] if b.ndim == 1 else r, b.shape)

    return (ga, gb)


def _linear_node(x, w, b=None):
    if x.ndim == 2:
        return "MmBackward0" if b is None else "AddmmBackward0"
    return "UnsafeViewBackward0" if b is None else "ViewBackward0"


@defop("linear", _linear_node, method=False)
def linear(x, w, b=None):
    """x W^T + b, fused (no transposed copy of W, no broadcast entry for b)."""
    out = np.matmul(x, w.T)
    return out if b is None else out + b


@linear.defvjp
def _(g, ans, x, w, b=None):
    # dx = g W ; dW = g^T x (summed over leading dims) ; db = sum of g over leading dims
    g2 = g.reshape(-1, g.shape[-1])
    return (lambda: g @ w,
            lambda: g2.T @ x.reshape(-1, x.shape[-1]),
            None if b is None else (lambda: g2.sum(0)))


@defop("outer", "MulBackward0")
def outer(a, b):
    return np.outer(a, b)


outer.defvjp(lambda g, ans, a, b: (lambda: g @ b, lambda: a @ g))


# -- shapes -------------------------------------------------------------------------------

def shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


@defop("reshape", "ViewBackward0")
def reshape(x, shape):
    return np.reshape(x, shape).copy()


reshape.defvjp(lambda g, ans, x, shape: (np.reshape(g, x.shape),))


@defop("transpose", "TransposeBackward0")
def transpose(x, dim0, dim1):
    return np.swapaxes(x, dim0, dim1).copy()


transpose.defvjp(lambda g, ans, x, dim0, dim1: (np.swapaxes(g, dim0, dim1),))


@defop("t", "TBackward0")
def t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x.T.copy()


t.defvjp(lambda g, ans, x: (g.T,))


@defop("permute", "PermuteBackward0")
def permute(x, dims):
    return np.transpose(x, dims).copy()


permute.defvjp(lambda g, ans, x, dims: (np.transpose(g, np.argsort(dims)),))


@defop("squeeze", lambda x, dim=None: "SqueezeBackward0" if dim is None else "SqueezeBackward1")
def squeeze(x, dim=None):
    if dim is not None and x.ndim and x.shape[dim] != 1:
        return x.copy()
    return np.squeeze(x, axis=dim).copy()


squeeze.defvjp(lambda g, ans, x, dim=None: (np.reshape(g, x.shape),))


@defop("unsqueeze", "UnsqueezeBackward0")
def unsqueeze(x, dim):
    return np.expand_dims(x, dim if dim >= 0 else x.ndim + 1 + dim).copy()


unsqueeze.defvjp(lambda g, ans, x, dim: (np.reshape(g, x.shape),))


@defop("expand", "ExpandBackward0")
def expand(x, shape):
    shape = tuple(x.shape[k - (len(shape) - x.ndim)] if n == -1 else n
                  for k, n in enumerate(shape))
    return np.array(np.broadcast_to(x, shape))


expand.defvjp(lambda g, ans, x, shape: (unbroadcast(g, x.shape),))


@defop("cat", "CatBackward0", method=False)
def cat(*xs, dim=0):
    return np.concatenate(xs, axis=dim)


@cat.defvjp
def _(g, ans, *xs, dim=0):
    cuts = np.cumsum([x.shape[dim] for x in xs])[:-1]
    return tuple(np.split(g, cuts, axis=dim))


@defop("stack", "StackBackward0", method=False)
def stack(*xs, dim=0):
    return np.stack(xs, axis=dim)


stack.defvjp(lambda g, ans, *xs, dim=0: tuple(np.moveaxis(g, dim, 0)))


@defop("split", "SplitBackward0")
def split(x, split_size_or_sections, dim=0):
    n = x.shape[dim]
    if isinstance(split_size_or_sections, int):
        cuts = list(range(split_size_or_sections, n, split_size_or_sections))
    else:
        cuts = list(np.cumsum(split_size_or_sections)[:-1])
    return tuple(p.copy() for p in np.split(x, cuts, axis=dim))


@split.defvjp
def _(gs, outs, x, split_size_or_sections, dim=0):
    return (np.concatenate([np.broadcast_to(g, o.shape) for g, o in zip(gs, outs)], axis=dim),)


# -- indexing -----------------------------------------------------------------------------

def _index_node(idx):
    parts = idx if isinstance(idx, tuple) else (idx,)
    if any(isinstance(p, (list, np.ndarray)) for p in parts):
        return "IndexBackward0"
    last = [p for p in parts if p is not Ellipsis]
    if not last:
        return "AliasBackward0"
    if last[-1] is None:
        return "UnsqueezeBackward0"
    return "SelectBackward0" if isinstance(last[-1], (int, np.integer)) else "SliceBackward0"


@defop("getitem", lambda x, idx: _index_node(idx), method=False)
def getitem(x, idx):
    return np.array(x[idx])


@getitem.defvjp
def _(g, ans, x, idx):
    out = np.zeros(x.shape)
    np.add.at(out, idx, g)   # repeated integer indices accumulate
    return (out,)


@defop("gather", "GatherBackward0")
def gather(x, dim, index):
    return np.take_along_axis(x, index, axis=dim)


@gather.defvjp
def _(g, ans, x, dim, index):
    out = np.zeros(x.shape)
    idx = list(np.indices(index.shape, sparse=True))
    idx[dim] = index
    np.add.at(out, tuple(idx), g)
    return (out,)


@defop("index_select", "IndexSelectBackward0")
def index_select(x, dim, index):
    return np.take(x, index, axis=dim)


@index_select.defvjp
def _(g, ans, x, dim, index):
    out = np.zeros(x.shape)
    sl = [slice(None)] * x.ndim
    sl[dim] = index
    np.add.at(out, tuple(sl), g)
    return (out,)


@defop("take", "TakeBackward0")
def take(x, index):
    return np.take(x, index)


@take.defvjp
def _(g, ans, x, index):
    out = np.zeros(x.size)
    np.add.at(out, np.ravel(index), np.ravel(g))
    return (out.reshape(x.shape),)


@defop("index_put", "CopySlices", method=False)
def index_put(x, idx, v):
    out = np.array(x, dtype=np.result_type(x, np.asarray(v)) if np.asarray(x).dtype.kind != "f"
                   else np.asarray(x).dtype)
    out[idx] = v
    return out


@index_put.defvjp
def _(g, ans, x, idx, v):
    gx = np.array(g)
    gx[idx] = 0.0
    gv = np.asarray(g)[idx]
    return (gx, None, unbroadcast(gv, np.shape(v)) if np.ndim(gv) >= np.ndim(v) else gv)


@defop("to_dtype", "ToCopyBackward0", method=False, cast=False)
def to_dtype(x, dtype):
    return x.astype(dtype)


# the result's gradient has the result's dtype (as in PyTorch), then converts back
to_dtype.defvjp(lambda g, ans, x, dtype: (g.astype(dtype).astype(x.dtype),))


# -- the same vjps as recorded tensor ops, for create_graph=True --------------------------
# HIPS autograd's rule: a vjp written with differentiable primitives can be differentiated
# again.  A row here takes the arguments as given (tensors or constants) and returns
# tensors (or thunks); ops without a row raise NotImplementedError under create_graph.

@defop("unindex", "IndexPutBackward0", method=False)
def unindex(g, shape, idx):
    """Zeros of ``shape`` with ``g`` added at ``idx``: the adjoint of ``getitem``."""
    out = np.zeros(shape)
    np.add.at(out, idx, g)
    return out


unindex.defvjp(lambda g, ans, v, shape, idx: (np.asarray(g)[idx],))


def _shape(x):
    return tuple(x.shape) if isinstance(x, Tensor) else np.shape(x)


def sum_to(g, shape):
    """``unbroadcast`` in recorded ops: sum ``g`` down to ``shape``."""
    shape = tuple(shape)
    if _shape(g) == shape:
        return g
    lead = len(_shape(g)) - len(shape)
    if lead > 0:
        g = call("sum", g, dim=tuple(range(lead)))
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and _shape(g)[k] != 1)
    if axes:
        g = call("sum", g, dim=axes, keepdim=True)
    return g if _shape(g) == shape else call("reshape", g, shape)


def _spread(g, x, dim, keepdim):
    """``_keep`` in recorded ops: a reduced gradient expanded back over ``x``'s shape."""
    shape = _shape(x)
    if dim is None:
        g = call("reshape", g, (1,) * len(shape))
    elif not keepdim:
        for d in sorted(_axes(dim, len(shape))):
            g = call("unsqueeze", g, d)
    return call("expand", g, shape) if _shape(g) != shape else g


def _swap(x):
    return call("transpose", x, -1, -2)


def _g_matmul(g, ans, a, b):
    # dA = g B^T, dB = A^T g, 1-D operands promoted as matmul does, then summed to shape
    mm, unsq, sq = (lambda p, q: call("matmul", p, q)), (lambda t, d: call("unsqueeze", t, d)), \
        (lambda t, d: call("squeeze", t, dim=d))
    if len(_shape(a)) == 1 and len(_shape(b)) == 1:   # dot
        return (lambda: g * b, lambda: g * a)
    if len(_shape(a)) == 1:   # (k,) @ (..., k, p)
        return (lambda: sum_to(sq(mm(b, unsq(g, -1)), -1), _shape(a)),
                lambda: sum_to(mm(unsq(a, -1), unsq(g, -2)), _shape(b)))
    if len(_shape(b)) == 1:   # (..., m, k) @ (k,)
        return (lambda: sum_to(mm(unsq(g, -1), unsq(b, -2)), _shape(a)),
                lambda: sum_to(sq(mm(unsq(g, -2), a), -2), _shape(b)))
    return (lambda: sum_to(mm(g, _swap(b)), _shape(a)),
            lambda: sum_to(mm(_swap(a), g), _shape(b)))


def _g_linear(g, ans, x, w, b=None):
    n_out, n_in = _shape(w)
    g2 = call("reshape", g, (-1, n_out))
    return (lambda: call("matmul", g, w),
            lambda: call("matmul", call("t", g2), call("reshape", x, (-1, n_in))),
            None if b is None else (lambda: call("sum", g2, dim=0)))


def _parts(g, xs, dim, pick):
    nd = len(_shape(g))
    dim = dim % nd
    return tuple(call("getitem", g, (slice(None),) * dim + (pick(k, x),))
                 for k, x in enumerate(xs))


def _g_cat(g, ans, *xs, dim=0):
    ends = np.cumsum([_shape(x)[dim] for x in xs])
    return _parts(g, xs, dim, lambda k, x: slice(int(ends[k] - _shape(x)[dim]), int(ends[k])))


GRAPH_VJPS = {
    "sum": lambda g, ans, x, dim=None, keepdim=False: (_spread(g, x, dim, keepdim),),
    "mean": lambda g, ans, x, dim=None, keepdim=False:
        (_spread(g, x, dim, keepdim) * (np.size(ans) / max(int(np.prod(_shape(x))), 1)),),
    "matmul": _g_matmul,
    "linear": _g_linear,
    "outer": lambda g, ans, a, b: (lambda: call("matmul", g, b), lambda: call("matmul", a, g)),
    "reshape": lambda g, ans, x, shape: (call("reshape", g, _shape(x)),),
    "squeeze": lambda g, ans, x, dim=None: (call("reshape", g, _shape(x)),),
    "unsqueeze": lambda g, ans, x, dim: (call("reshape", g, _shape(x)),),
    "transpose": lambda g, ans, x, dim0, dim1: (call("transpose", g, dim0, dim1),),
    "t": lambda g, ans, x: (call("t", g),),
    "permute": lambda g, ans, x, dims: (call("permute", g, tuple(np.argsort(dims))),),
    "expand": lambda g, ans, x, shape: (sum_to(g, _shape(x)),),
    "cat": _g_cat,
    "stack": lambda g, ans, *xs, dim=0: _parts(g, xs, dim, lambda k, x: k),
    "getitem": lambda g, ans, x, idx: (call("unindex", g, _shape(x), idx),),
    "unindex": lambda g, ans, v, shape, idx: (call("getitem", g, idx),),
    "to_dtype": lambda g, ans, x, dtype: (call("to_dtype", g, np.asarray(x._v if isinstance(x, Tensor) else x).dtype),),
}


def _graph_shape(g, x):
    """A recorded gradient, shaped like the input ``x`` (thunks are called here)."""
    if callable(g):
        g = g()
    if g is None:
        return None
    shape = _shape(x)
    if _shape(g) != shape:
        g = sum_to(g, shape) if len(_shape(g)) >= len(shape) else call("expand", g, shape)
    return g
