"""``tg.autograd.forward_ad``: forward-mode AD with PyTorch's API.

    import tapegrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        x = fwAD.make_dual(primal, tangent)
        y = f(x)
        jvp = fwAD.unpack_dual(y).tangent      # J_f(primal) @ tangent

A dual tensor is a ``Tensor`` that carries its tangent; every op on one computes its primal
as usual (recorded for reverse mode when that applies) and its tangent eagerly, with no
second set of rules:

- an elementwise op: the op table's partial derivatives times the input tangents (the
  same partials, in tensor ops, that a ``create_graph`` backward records: for an
  elementwise op the vector-Jacobian and Jacobian-vector products are the same products);
- an array op: its vector-Jacobian product transposed, by the double-vjp rule: ``u(v) =
  J^T v`` is recorded with a leaf ``v``, and as ``u`` is linear in ``v``, ``J t = d/dv
  <u(v), t>``;
- a custom ``Function``: its ``jvp(ctx, *tangents)``, as in PyTorch.

The tangents are tensors computed with tensor ops, so they are differentiable in reverse
mode when they or the primals require grad (forward-over-reverse).
"""
from __future__ import annotations

import threading
from typing import NamedTuple, Optional

import numpy as np

from ..core.elementwise import GRAPH_PARTIALS
from ..core.grad_mode import enable_grad
from ..core.kernels import NO_GRAD
from ..core.tape import Tape, thread_state
from ..core.tensor import Tensor, compare, elementwise_fallback, wrap
from ..ops.array_ops import call
from .gradients import grad

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]

_new = object.__new__


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal and its tangent (None: no tangent)."""
    primal: Tensor
    tangent: Optional[Tensor]


class _Levels(threading.local):
    def __init__(self):
        self.stack = []      # the active level objects (one at most)


_levels = _Levels()


def _level():
    return _levels.stack[-1] if _levels.stack else None


def enter_dual_level():
    """Enter a new forward-mode level; returns its index (one level at a time)."""
    if _levels.stack:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _levels.stack.append(object())
    return len(_levels.stack) - 1


def exit_dual_level(*, level=None):
    """Leave the current level: its dual tensors lose their tangents."""
    if not _levels.stack:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    _levels.stack.pop()


class dual_level:
    """Context manager of a forward-mode level: ``with fwAD.dual_level(): ...``."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False


class DualTensor(Tensor):
    """A tensor with a tangent for forward mode (``make_dual``): the ops on it compute the
    tangent of their result too (see the module docstring)."""

    __slots__ = ("_tangent", "_level")

    def __repr__(self):
        text = Tensor.__repr__(self)
        t = _tangent(self)
        if t is None:
            return text
        # PyTorch's suffix layout: on the last line if it fits in 80 columns, else indented
        body, suffix = text[:-1], f"tangent={t!r}"
        last_line = len(body) - body.rfind("\n") + 1
        sep = ",\n" + " " * len("tensor(") if last_line + len(suffix) + 2 > 80 else ", "
        return f"{body}{sep}{suffix})"

    __str__ = __repr__

    def _inplace(self, compute, aliased=False):
        results = []

        def computed(s):
            results.append(compute(s))
            return results[-1]

        Tensor._inplace(self, computed)
        self._tangent = _tangent(results[0]) if results else None
        return self


def _tangent(t):
    """The tangent of ``t`` at the active level (None: none)."""
    if t.__class__ is not DualTensor or t._level is not _level() or _level() is None:
        return None
    return t._tangent


def _primal(a):
    """A dual tensor's primal: a plain tensor standing for the same value and entry."""
    if a.__class__ is not DualTensor:
        return a
    p = _new(Tensor)
    p._value, p._tape = a._value, a._tape
    if a._tape.__class__ is Tape:
        p._entry = a._entry
    p._grad = p._hooks = None
    return p


def _dual(primal, tangent):
    """``primal`` (a plain tensor) with ``tangent`` at the active level."""
    d = _new(DualTensor)
    d._value, d._tape = primal._value, primal._tape
    if primal._tape.__class__ is Tape:
        d._entry = primal._entry
    d._grad = d._hooks = None
    d._tangent, d._level = tangent, _level()
    return d


def _shape_str(shape):
    return "[" + ", ".join(str(n) for n in shape) + "]"


def make_dual(tensor, tangent, *, level=None):
    """A tensor with value ``tensor`` and forward gradient ``tangent``."""
    if _level() is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    if not tensor.dtype.is_floating_point:
        raise ValueError("Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not tangent.dtype.is_floating_point:
        raise ValueError("Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than "
                           "that of the original Tensor, this is not supported. Tensor is of "
                           f"size {_shape_str(tensor.shape)} while the given forward gradient "
                           f"is of size {_shape_str(tangent.shape)}.")
    base = _primal(tensor)
    if base.requires_grad:   # differentiable through the dual (PyTorch: a view)
        base = base.clone() if thread_state.grad_enabled else base
    return _dual(base, tangent)


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of ``tensor``: its value (a tensor without tangent) and its
    tangent at the active level (None when it has none)."""
    if not isinstance(tensor, DualTensor):
        return UnpackedDualTensor(tensor, None)
    return UnpackedDualTensor(_primal(tensor), _tangent(tensor))


def _zeros_like(t):
    return wrap(np.zeros(tuple(t.shape)) if t.ndim else 0.0)


# -- forward rules ----------------------------------------------------------------------
def _elementwise(code, args):
    """Elementwise op ``code`` on ``args`` with dual tensors among them: the primal, and the
    tangent from the op table's partials (in tensor ops) times the input tangents."""
    plain = [_primal(a) for a in args]
    if NO_GRAD[code]:    # a comparison: no tangent
        return compare(code, *plain)
    out = elementwise_fallback(code, plain)
    tangents = [_tangent(a) if isinstance(a, Tensor) else None for a in args]
    if all(t is None for t in tangents) or not out.dtype.is_floating_point:
        return out
    pad = [None] * (3 - len(plain))
    vals = [a._value if isinstance(a, Tensor) else a for a in plain] + pad
    tensors = [isinstance(a, Tensor) for a in plain] + [False] * len(pad)
    shape = tuple(out.shape)
    total = None
    for k, t in enumerate(tangents):
        if t is None:
            continue
        g = t if tuple(t.shape) == shape else call("expand", t, shape)
        need = [j == k for j in range(3)]
        part = GRAPH_PARTIALS[code](g, *(plain + pad), out, *vals, out._value, *need,
                                    *tensors)[k]
        if part is not None:     # None: a masked partial, a zero tangent
            total = part if total is None else total + part
    return _dual(out, _zeros_like(out) if total is None else total)


def _array_op(name, args, params):
    """Array op ``name`` with dual tensors among ``args``: the primal, and the tangents of
    its floating outputs by the double-vjp rule (see the module docstring)."""
    plain = [_primal(a) if isinstance(a, Tensor) else a for a in args]
    out = call(name, *plain, **params)
    tangents = [_tangent(a) if isinstance(a, Tensor) else None for a in args]
    duals = [k for k, t in enumerate(tangents) if t is not None]
    outs = list(out) if isinstance(out, tuple) else [out]
    diff = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.dtype.is_floating_point]
    if not duals or not diff:
        return out
    jvps = _double_vjp(name, plain, params, duals, [tangents[k] for k in duals], diff)
    for k, j in zip(diff, jvps):
        outs[k] = _dual(outs[k], j)
    return tuple(outs) if isinstance(out, tuple) else outs[0]


def _double_vjp(name, plain, params, duals, tangents, diff):
    """``J t`` for the outputs ``diff`` of array op ``name``: d/dv <J^T v, t>, on a tape of
    its own (the primals' graph joins in when something requires grad: forward over
    reverse)."""
    keep = any(plain[k].requires_grad for k in duals) or any(t.requires_grad for t in tangents)
    with enable_grad(), Tape():
        xs = list(plain)
        for k in duals:
            if not (keep and plain[k].requires_grad):
                xs[k] = wrap(plain[k]._value, requires_grad=True)
        res = call(name, *xs, **params)
        res = list(res) if isinstance(res, tuple) else [res]
        outs = [res[k] for k in diff]
        vs = [wrap(np.zeros(tuple(o.shape)) if o.ndim else 0.0, requires_grad=True)
              for o in outs]
        live = [(o, v) for o, v in zip(outs, vs) if o.requires_grad]
        us = grad([o for o, _ in live], [xs[k] for k in duals], [v for _, v in live],
                  create_graph=True, allow_unused=True) if live else [None] * len(duals)
        terms = [(u * t).sum() for u, t in zip(us, tangents) if u is not None]
        if not terms:
            return [_zeros_like(o) for o in outs]
        s = terms[0]
        for term in terms[1:]:
            s = s + term
        if not s.requires_grad:
            return [_zeros_like(o) for o in outs]
        js = grad(s, vs, allow_unused=True, create_graph=keep)
    return [_zeros_like(o) if j is None else j for o, j in zip(outs, js)]


DualTensor.__tapegrad_elementwise__ = staticmethod(_elementwise)
DualTensor.__tapegrad_array_op__ = staticmethod(_array_op)


def function_jvp(cls, ctx, args, out):
    """A custom Function called on dual tensors: its outputs with the tangents of its
    ``jvp(ctx, *input tangents)`` (PyTorch's; no jvp is an error)."""
    tangents = [_tangent(a) if isinstance(a, Tensor) else None for a in args]
    if all(t is None for t in tangents):
        return out
    tangents = [(_zeros_like(a) if t is None else t) if isinstance(a, Tensor) else None
                for a, t in zip(args, tangents)]
    res = cls.jvp(ctx, *tangents)
    outs = out if isinstance(out, tuple) else (out,)
    res = res if isinstance(res, tuple) else (res,)
    new = tuple(_dual(o, t) if isinstance(o, Tensor) and t is not None else o
                for o, t in zip(outs, res))
    return new if isinstance(out, tuple) else new[0]


def primal(a):
    """``a`` without its tangent (a custom Function's forward sees primals, as PyTorch's)."""
    return _primal(a) if isinstance(a, DualTensor) else a
