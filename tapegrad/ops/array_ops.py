"""The array-op table: reductions, linear algebra, shape changes, indexing.  The single
source of truth for them, as ``optable.py`` is for the elementwise ops that sweep in Numba.

Each row is a forward over NumPy values and a vector-Jacobian product in HIPS autograd's
style: ``vjp(g, ans, *xs, **params)`` returns the gradient for each input, given ``g`` (the
gradient of the result) and ``ans`` (the result).  Rules are written in tapegrad ops on
tensors, once: the float walk runs them under no_grad, ``create_graph=True`` records them,
so they differentiate to any order.  Rows are registered with ``@defop``; the
``tg.<name>`` functions and ``Tensor`` methods are derived from the table in ``__init__``,
and ``tests/test_array_ops.py`` checks every row against finite differences (and fails when
a row has no test case).  A recorded array op is a ``pyfunc`` entry on the tape: the Numba
sweep stops there and calls the vjp (``pyop_backward``).
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Optional, Union

import numpy as np

from ..core.elementwise import FUNCTIONS as ELEMENTWISE
from ..core.pyop import Arg, record
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


ARRAY_OPS = {}


def defop(name, node, method=True, outputs=None, cast=True):
    """Register ``forward`` (the decorated function) with its ``vjp`` (``forward.defvjp``).

    The rule is written in tapegrad ops: ``vjp(g, ans, *args, **params)`` gets the result's
    gradient ``g`` and the result ``ans`` as tensors, each tensor argument
    as a tensor (recorded under ``create_graph=True``) and other arguments as given; it
    returns one gradient per positional argument (a tensor, None, or a function of no
    arguments computing it only when that input needs it).  Broadcasting is undone by the
    caller (``sum_to``), never inside a rule.  A multi-output op (``split``) gets lists of
    tensors as ``g`` and ``ans``.  The float walk runs a rule under no_grad on plain
    tensors, ``create_graph=True`` on recorded ones: one rule for every order."""
    def register(forward):
        def with_vjp(vjp):
            ARRAY_OPS[name] = ArrayOp(name, node, forward, vjp, method, outputs, cast)
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


def _record_call(op, node, args, outs, params):
    """Record array op ``op`` applied to ``args`` with results ``outs``; returns the result
    tensors.  The entry keeps the call (``PyOp.fwd``): the walk finds the rule from it."""
    T = recording()
    tensors = [a for a in args if isinstance(a, Tensor)]
    if T is None or not any(t._tape is not None for t in tensors):
        return [wrap(v) for v in outs]
    refs = [(t._entry if t._tape is T else T._ref(t)) if t._tape is not None else -1 for t in tensors]
    idx = record(T, node, refs, outs, None, (op.name, _template(args), params))
    return [tensor_of_entry(T, i, v) for i, v in zip(idx, outs)]


def pyop_backward(py, grads, saved, outs):
    """The input gradients of recorded Python op ``py`` (one per ``py.inputs``, None for
    an input that needs none), given its outputs' gradients ``grads`` (tensors).
    ``saved(ref)`` is the value an input had, as a tensor (recorded in a create_graph walk),
    and ``outs`` the outputs likewise.  The rule is the same in both walks: grad mode tells
    it whether to record."""
    if py.backward_fn is not None:   # a custom Function: its backward, on tensors
        return py.backward_fn(grads)
    name, template, params = py.fwd
    op = ARRAY_OPS[name]
    tensor_pos = [k for k, a in enumerate(template) if isinstance(a, (Arg, Tensor))]
    args = [saved(py.inputs[int(a)]) if isinstance(a, Arg) else a for a in template]
    multi = py.nout > 1 or name == "split"
    g, ans = (grads, outs) if multi else (grads[0], outs[0])
    gs = op.vjp(g, ans, *args, **params)
    return [_graph_shape(gs[k], args[k]) if r >= 0 else None
            for r, k in zip(py.inputs, tensor_pos)]


def call(name, *args, **params):
    """Apply array op ``name`` to tensors/constants ``args``; records when grad is on."""
    compared = False
    for a in args:   # inside tg.compile: array ops on its elements become scalar entries
        if a.__class__ is not Tensor:
            handler = getattr(a, "__tapegrad_array_op__", None)
            if handler is not None:
                return handler(name, args, params)
        elif a._value.__class__ is float and a._tape is not None:
            T = recording()
            if T is not None and T.rewrite_array_op is not None:
                return T.rewrite_array_op(name, args, params)
        elif getattr(a, "_comparison", None) is not None:
            compared = True
    op = ARRAY_OPS[name]
    tensors = [a for a in args if isinstance(a, Tensor)]
    if compared and not any(t._tape is not None for t in tensors):
        T = recording()
        g = recorded_comparison(T, tensors) if T is not None else None
        if g is not None:
            note_comparison_use(T, g)
    vals = [_np(a._value) if isinstance(a, Tensor) else a for a in args]
    ans = op.forward(*vals, **params)
    extra = None
    if op.outputs is not None:
        ans, extra = op.outputs(ans)
    dt = next((np.asarray(a._value).dtype for a in tensors if a._value.__class__ is not float), None) \
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
            out.append(Arg(k) if a._tape is not None else wrap(a._value))
            k += 1
        else:
            out.append(a)
    return tuple(out)


def _axes(dim, ndim):
    if dim is None:
        return None
    dims = dim if isinstance(dim, (tuple, list)) else (dim,)
    return tuple(d % max(ndim, 1) for d in dims)


def _name(base, dim):
    return f"{base}Backward0" if dim is None else f"{base}Backward1"


def _shape(x):
    return tuple(x.shape) if isinstance(x, Tensor) else np.shape(x)


def _numel(x):
    return int(np.prod(_shape(x), dtype=np.int64))


def _value(x):
    return np.asarray(x._value) if isinstance(x, Tensor) else np.asarray(x)


_where = ELEMENTWISE["where"]


def sum_to(g, shape):
    """Sum ``g`` down to ``shape`` (undo broadcasting), in recorded ops: the one broadcast
    reduction, applied by ``pyop_backward`` to every rule's result."""
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


def _graph_shape(g, x):
    """A rule's gradient, shaped like the input ``x`` (thunks are called here)."""
    if callable(g):
        g = g()
    if g is None:
        return None
    shape = _shape(x)
    if _shape(g) != shape:
        g = sum_to(g, shape) if len(_shape(g)) >= len(shape) else call("expand", g, shape)
    return g


def _spread(g, x, dim, keepdim):
    """A reduced result (or its gradient) expanded back over ``x``'s shape."""
    shape = _shape(x)
    if dim is not None and not keepdim:
        axes = _axes(dim, len(shape))
        g = call("reshape", g, tuple(1 if k in axes else n for k, n in enumerate(shape)))
    return call("expand", g, shape) if _shape(g) != shape else g


def _ties(g, ans, x, dim=None, keepdim=False):
    # d max / dx = the gradient split evenly among the elements equal to the max (as PyTorch)
    mask = _where(x == _spread(ans, x, dim, keepdim), 1.0, 0.0)
    return (_spread(g / call("sum", mask, dim=dim, keepdim=keepdim), x, dim, keepdim) * mask,)


def _products_of_others(x, dim):
    """For each element, the product of the others along ``dim`` (all if None), without
    dividing (so zeros are fine): row i of an n x n table holding x with x_i set to 1."""
    xm = call("reshape", x, (-1,)) if dim is None else call("transpose", x, dim, -1)
    n = _shape(xm)[-1]
    table = call("expand", call("unsqueeze", xm, -2), _shape(xm)[:-1] + (n, n))
    others = call("prod", _where(np.eye(n, dtype=bool), 1.0, table), dim=-1)
    return call("reshape", others, _shape(x)) if dim is None else call("transpose", others, dim, -1)


def _reverse_cumsum(g, dim):
    return call("flip", call("cumsum", call("flip", g, (dim,)), dim), (dim,))


# -- reductions ---------------------------------------------------------------------------

@defop("sum", lambda x, dim=None, keepdim=False: _name("Sum", dim))
def sum(x, dim=None, keepdim=False):  # noqa: A001
    return np.sum(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


# d sum / dx_i = 1
sum.defvjp(lambda g, ans, x, dim=None, keepdim=False: (_spread(g, x, dim, keepdim),))


@defop("mean", lambda x, dim=None, keepdim=False: _name("Mean", dim))
def mean(x, dim=None, keepdim=False):
    return np.mean(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


# d mean / dx_i = 1 / N
mean.defvjp(lambda g, ans, x, dim=None, keepdim=False:
            (_spread(g * (_numel(ans) / max(_numel(x), 1)), x, dim, keepdim),))


@defop("prod", lambda x, dim=None, keepdim=False: _name("Prod", dim))
def prod(x, dim=None, keepdim=False):
    return np.prod(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


@prod.defvjp
def _(g, ans, x, dim=None, keepdim=False):
    # d prod / dx_i = prod of the others = prod / x_i away from zeros
    if np.all(_value(x) != 0):
        return (_spread(g * ans, x, dim, keepdim) / x,)
    return (_spread(g, x, dim, keepdim) * _products_of_others(x, dim),)


@defop("amax", "AmaxBackward0")
def amax(x, dim=None, keepdim=False):
    return np.amax(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


amax.defvjp(_ties)


@defop("amin", "AminBackward0")
def amin(x, dim=None, keepdim=False):
    return np.amin(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


amin.defvjp(_ties)


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
        # d max(x, dim) / dx = 1 at the index it returned, 0 elsewhere
        idx = argfn(_value(x), axis=dim, keepdims=True)
        gk = g if keepdim else call("unsqueeze", g, dim)
        return (call("ungather", gk, _shape(x), dim, idx),)
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


max_all.defvjp(lambda g, ans, x: _ties(g, ans, x))


@defop("min_all", "MinBackward1", method=False)
def min_all(x):
    return np.min(x)


min_all.defvjp(lambda g, ans, x: _ties(g, ans, x))


def _ddof(unbiased, correction):
    return (1 if unbiased else 0) if correction is None else correction


@defop("var", "VarBackward0")
def var(x, dim=None, unbiased=True, keepdim=False, correction=None):
    return np.var(x, axis=_axes(dim, x.ndim), ddof=_ddof(unbiased, correction), keepdims=keepdim)


@var.defvjp
def _(g, ans, x, dim=None, unbiased=True, keepdim=False, correction=None):
    # d var / dx = 2 (x - mean) / (N - ddof)
    n = _numel(x) // max(_numel(ans), 1)
    scale = 2.0 / (n - _ddof(unbiased, correction))
    return (_spread(g * scale, x, dim, keepdim) * (x - call("mean", x, dim=dim, keepdim=True)),)


@defop("std", "StdBackward0")
def std(x, dim=None, unbiased=True, keepdim=False, correction=None):
    return np.sqrt(var(x, dim, unbiased, keepdim, correction))


# d std = d var / (2 std)
std.defvjp(lambda g, ans, x, dim=None, unbiased=True, keepdim=False, correction=None:
           ARRAY_OPS["var"].vjp(g / (ans * 2.0), ans, x, dim, unbiased, keepdim, correction))


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
    safe = _where(ans == 0.0, 1.0, ans)   # x is 0 where the norm is: the gradient is 0 (as PyTorch)
    if p == 2:   # d |x| = x / |x|
        return (_spread(g / safe, x, dim, keepdim) * x,)
    if p == 1:   # d sum |x| = sign x
        return (_spread(g, x, dim, keepdim) * x.sign(),)
    if p in (np.inf, "inf"):   # d max |x| = sign x at the ties of the max
        return (_ties(g, ans, x.abs(), dim, keepdim)[0] * x.sign(),)
    # d |x|_p = sign x |x|^(p-1) |x|_p^(1-p)
    return (_spread(g * safe ** (1.0 - p), x, dim, keepdim) * x.sign() * x.abs() ** (p - 1.0),)


@defop("logsumexp", "LogsumexpBackward0")
def logsumexp(x, dim, keepdim=False):
    ax = _axes(dim, x.ndim)
    m = np.max(x, axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    return out if keepdim else np.squeeze(out, ax)


# d lse / dx = softmax(x) = exp(x - lse)
logsumexp.defvjp(lambda g, ans, x, dim, keepdim=False:
                 (_spread(g, x, dim, keepdim) * (x - _spread(ans, x, dim, keepdim)).exp(),))


@defop("softmax", "SoftmaxBackward0")
def softmax(x, dim):
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


# J^T g = s (g - sum(g s))
softmax.defvjp(lambda g, ans, x, dim:
               (ans * (g - call("sum", g * ans, dim=dim, keepdim=True)),))


@defop("log_softmax", "LogSoftmaxBackward0")
def log_softmax(x, dim):
    m = np.max(x, axis=dim, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True))


# J^T g = g - softmax sum(g)
log_softmax.defvjp(lambda g, ans, x, dim:
                   (g - ans.exp() * call("sum", g, dim=dim, keepdim=True),))


@defop("cumsum", "CumsumBackward0")
def cumsum(x, dim):
    return np.cumsum(x, axis=dim)


# d out_j / dx_i = 1 for j >= i: the reversed cumulative sum
cumsum.defvjp(lambda g, ans, x, dim: (_reverse_cumsum(g, dim),))


@defop("cumprod", "CumprodBackward0")
def cumprod(x, dim):
    return np.cumprod(x, axis=dim)


@cumprod.defvjp
def _(g, ans, x, dim):
    # d out_j / dx_i = prod_{k <= j, k != i} x_k for j >= i (= out_j / x_i away from zeros)
    if np.all(_value(x) != 0):
        return (_reverse_cumsum(g * ans, dim) / x,)
    xm, gm = call("transpose", x, dim, -1), call("transpose", g, dim, -1)
    n = _shape(xm)[-1]
    table = call("expand", call("unsqueeze", xm, -2), _shape(xm)[:-1] + (n, n))
    partial = call("cumprod", _where(np.eye(n, dtype=bool), 1.0, table), -1)   # [..., i, j]
    gx = call("sum", partial * (call("unsqueeze", gm, -2) * wrap(np.triu(np.ones((n, n))))), dim=-1)
    return (call("transpose", gx, dim, -1),)


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


def _mm(a, b):
    return call("matmul", a, b)


def _mT(v):
    """``v`` with its last two dims swapped.  Nothing records a tensor without history (the
    float walk, or a constant): a NumPy view then, which BLAS reads without a copy."""
    if v._tape is None:
        return wrap(np.swapaxes(np.asarray(v._value), -1, -2))
    return call("transpose", v, -1, -2)


def _col(v):
    return call("unsqueeze", v, -1)


def _row(v):
    return call("unsqueeze", v, -2)


@matmul.defvjp
def _(g, ans, a, b):
    # dA = g B^T, dB = A^T g, a 1-D operand promoted as matmul does (the caller sums batches)
    na, nb = len(_shape(a)), len(_shape(b))
    if na == 1 and nb == 1:
        return (lambda: g * b, lambda: g * a)
    if na == 1 and nb == 2:
        return (lambda: _mm(b, g), lambda: call("outer", a, g))
    if na == 2 and nb == 1:
        return (lambda: call("outer", g, b), lambda: _mm(g, a))
    if na == 1:
        return (lambda: call("squeeze", _mm(b, _col(g)), dim=-1), lambda: _mm(_col(a), _row(g)))
    if nb == 1:
        return (lambda: _mm(_col(g), _row(b)), lambda: call("squeeze", _mm(_row(g), a), dim=-2))
    return (lambda: _mm(g, _mT(b)), lambda: _mm(_mT(a), g))


def _linear_node(x, w, b=None):
    if x.ndim == 2:
        return "MmBackward0" if b is None else "AddmmBackward0"
    return "UnsafeViewBackward0" if b is None else "ViewBackward0"


@defop("linear", _linear_node, method=False)
def linear(x, w, b=None):
    """x W^T + b, fused (no transposed copy of W, no broadcast entry for b)."""
    out = np.matmul(x, w.T)
    return out if b is None else out + b


def _rows(v, n):
    return v if len(_shape(v)) == 2 else call("reshape", v, (-1, n))


@linear.defvjp
def _(g, ans, x, w, b=None):
    # dx = g W ; dW = g^T x and db = sum of g, over the leading dims
    n_out, n_in = _shape(w)
    g2 = _rows(g, n_out)
    return (lambda: _mm(g, w),
            lambda: _mm(_mT(g2), _rows(x, n_in)),
            None if b is None else (lambda: call("sum", g2, dim=0)))


@defop("outer", "MulBackward0")
def outer(a, b):
    return np.outer(a, b)


# d (a b^T) = (g b, g^T a)
outer.defvjp(lambda g, ans, a, b: (lambda: _mm(g, b), lambda: _mm(a, g)))


# -- shapes -------------------------------------------------------------------------------

def shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _reshape_back(g, ans, x, *args, **params):
    # a reshape's adjoint: the gradient in the input's shape
    return (call("reshape", g, _shape(x)),)


@defop("reshape", "ViewBackward0")
def reshape(x, shape):
    return np.reshape(x, shape).copy()


reshape.defvjp(_reshape_back)


@defop("transpose", "TransposeBackward0")
def transpose(x, dim0, dim1):
    return np.swapaxes(x, dim0, dim1).copy()


# a swap is its own inverse
transpose.defvjp(lambda g, ans, x, dim0, dim1: (call("transpose", g, dim0, dim1),))


@defop("t", "TBackward0")
def t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x.T.copy()


t.defvjp(lambda g, ans, x: (call("t", g),))


@defop("permute", "PermuteBackward0")
def permute(x, dims):
    return np.transpose(x, dims).copy()


# the inverse permutation
permute.defvjp(lambda g, ans, x, dims:
               (call("permute", g, tuple(int(k) for k in np.argsort(dims))),))


@defop("squeeze", lambda x, dim=None: "SqueezeBackward0" if dim is None else "SqueezeBackward1")
def squeeze(x, dim=None):
    if dim is not None and x.ndim and x.shape[dim] != 1:
        return x.copy()
    return np.squeeze(x, axis=dim).copy()


squeeze.defvjp(_reshape_back)


@defop("unsqueeze", "UnsqueezeBackward0")
def unsqueeze(x, dim):
    return np.expand_dims(x, dim if dim >= 0 else x.ndim + 1 + dim).copy()


unsqueeze.defvjp(_reshape_back)


@defop("expand", "ExpandBackward0")
def expand(x, shape):
    shape = tuple(x.shape[k - (len(shape) - x.ndim)] if n == -1 else n
                  for k, n in enumerate(shape))
    return np.array(np.broadcast_to(x, shape))


# the gradient summed back over the broadcast dims
expand.defvjp(lambda g, ans, x, shape: (sum_to(g, _shape(x)),))


@defop("flip", "FlipBackward0")
def flip(x, dims):
    return np.flip(x, axis=dims).copy()


# a flip is its own inverse
flip.defvjp(lambda g, ans, x, dims: (call("flip", g, dims),))


@defop("roll", "RollBackward0")
def roll(x, shifts, dims=None):
    return np.roll(x, shifts, axis=dims)


# rolled back
roll.defvjp(lambda g, ans, x, shifts, dims=None:
            (call("roll", g, tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts,
                  dims),))


def _slices(g, xs, dim, pick):
    """``g`` cut into one part per input: ``pick(k, x)`` indexes along ``dim``."""
    dim %= len(_shape(g))
    return tuple(call("getitem", g, (slice(None),) * dim + (pick(k, x),))
                 for k, x in enumerate(xs))


@defop("cat", "CatBackward0", method=False)
def cat(*xs, dim=0):
    return np.concatenate(xs, axis=dim)


@cat.defvjp
def _(g, ans, *xs, dim=0):
    # each input's part of g
    ends = np.cumsum([_shape(x)[dim] for x in xs])
    return _slices(g, xs, dim, lambda k, x: slice(int(ends[k] - _shape(x)[dim]), int(ends[k])))


@defop("stack", "StackBackward0", method=False)
def stack(*xs, dim=0):
    return np.stack(xs, axis=dim)


# each input's slice of g
stack.defvjp(lambda g, ans, *xs, dim=0: _slices(g, xs, dim, lambda k, x: k))


@defop("split", "SplitBackward0")
def split(x, split_size_or_sections, dim=0):
    n = x.shape[dim]
    if isinstance(split_size_or_sections, int):
        cuts = list(range(split_size_or_sections, n, split_size_or_sections))
    else:
        cuts = list(np.cumsum(split_size_or_sections)[:-1])
    return tuple(p.copy() for p in np.split(x, cuts, axis=dim))


# the parts' gradients put back together
split.defvjp(lambda gs, outs, x, split_size_or_sections, dim=0: (call("cat", *gs, dim=dim),))


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


# g added back at idx (repeated integer indices accumulate)
getitem.defvjp(lambda g, ans, x, idx: (call("unindex", g, _shape(x), idx),))


@defop("unindex", "IndexPutBackward0", method=False)
def unindex(g, shape, idx):
    """Zeros of ``shape`` with ``g`` added at ``idx``: the adjoint of ``getitem``."""
    out = np.zeros(shape)
    np.add.at(out, idx, g)
    return out


# the adjoint of a scatter-add is the gather
unindex.defvjp(lambda g, ans, v, shape, idx: (call("getitem", g, idx),))


@defop("gather", "GatherBackward0")
def gather(x, dim, index):
    return np.take_along_axis(x, index, axis=dim)


gather.defvjp(lambda g, ans, x, dim, index: (call("ungather", g, _shape(x), dim, index),))


@defop("ungather", "ScatterAddBackward0", method=False)
def ungather(g, shape, dim, index):
    """Zeros of ``shape`` with ``g`` added along ``dim`` at ``index``: gather's adjoint."""
    out = np.zeros(shape)
    idx = list(np.indices(np.shape(index), sparse=True))
    idx[dim] = index
    np.add.at(out, tuple(idx), g)
    return out


ungather.defvjp(lambda g, ans, v, shape, dim, index: (call("gather", g, dim, index),))


@defop("index_select", "IndexSelectBackward0")
def index_select(x, dim, index):
    return np.take(x, index, axis=dim)


index_select.defvjp(lambda g, ans, x, dim, index:
                    (call("unindex", g, _shape(x), (slice(None),) * (dim % len(_shape(x)))
                          + (index,)),))


@defop("take", "TakeBackward0")
def take(x, index):
    return np.take(x, index)


take.defvjp(lambda g, ans, x, index:
            (call("reshape", call("unindex", g, (_numel(x),), (index,)), _shape(x)),))


@defop("index_put", "CopySlices", method=False)
def index_put(x, idx, v):
    out = np.array(x, dtype=np.result_type(x, np.asarray(v)) if np.asarray(x).dtype.kind != "f"
                   else np.asarray(x).dtype)
    out[idx] = v
    return out


# x's gradient is g with the overwritten places zeroed; v's is g there
index_put.defvjp(lambda g, ans, x, idx, v:
                 (lambda: call("index_put", g, idx, 0.0), None, lambda: call("getitem", g, idx)))


@defop("to_dtype", "ToCopyBackward0", method=False, cast=False)
def to_dtype(x, dtype):
    return x.astype(dtype)


# the result's gradient has the result's dtype (as in PyTorch), then converts back
to_dtype.defvjp(lambda g, ans, x, dtype:
                (call("to_dtype", call("to_dtype", g, dtype), _value(x).dtype),))
