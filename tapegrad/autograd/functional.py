"""``tg.autograd.functional``: ``vjp, jvp, jacobian, hessian, hvp, vhp`` with PyTorch's
signatures and return structures, built on ``tg.autograd.grad``.

- ``vjp``/``vhp``/``hvp``: one reverse sweep (``hvp``/``vhp`` through ``create_graph``).
- ``jvp``: the double-vjp trick, as PyTorch does -- ``J v = d/du (u^T J) v`` with a
  dummy ``u`` -- so it runs ``create_graph`` through the function's ops (every op's
  backward is written in tapegrad ops, so this works to any order).
- ``jacobian``/``hessian``: one reverse sweep per output element (``strategy=
  "forward-mode"``: one ``jvp`` per input element).

For a scalar program called many times, ``tg.compile`` is the fast path: its ``jvp``,
``hessian``... run as Numba sweeps over the recorded tape.
"""
from __future__ import annotations

import numpy as np

from ..core.tensor import Tensor, wrap
from ..ops.torch_api import stack
from .gradients import grad as _grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "hvp", "vhp"]


def _as_tuple(x, arg, fn):
    """(was a tuple, tuple of tensors), with PyTorch's type errors."""
    is_tuple = isinstance(x, (tuple, list))
    xs = tuple(x) if is_tuple else (x,)
    for k, t in enumerate(xs):
        if not isinstance(t, Tensor):
            where = f"The {arg} given to {fn} must be either a Tensor or a tuple of Tensors"
            got = f"but the value at index {k} has type {type(t).__name__}" if is_tuple else \
                f"but the given {arg} has type {type(t).__name__}"
            raise TypeError(f"{where} {got}.")
    return is_tuple, xs


def _prepare(inputs, create_graph):
    """Fresh leaves that require grad; with ``create_graph``, a recorded alias of an input
    that requires grad, so that results stay differentiable with respect to the original."""
    out = []
    for x in inputs:
        if create_graph and x.requires_grad:
            out.append(x * 1.0)
        else:
            out.append(x.detach().requires_grad_(True))
    return tuple(out)


def _shape(t):
    return tuple(t.shape)


def _numel(t):
    return int(np.prod(_shape(t), dtype=np.int64))


def _zeros(x):
    return wrap(0.0 if x.ndim == 0 else np.zeros(_shape(x)))


def _check_v(v, refs, what, fn):
    if v is None:
        if len(refs) != 1 or _numel(refs[0]) != 1:
            raise RuntimeError(f"The vector v can only be None if the {what} to the "
                               "user-provided function is a single Tensor with a single element.")
        return (wrap(np.ones(_shape(refs[0])) if refs[0].ndim else 1.0),)
    _, vs = _as_tuple(v, "v", fn)
    if len(vs) != len(refs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(refs)} but got "
                           f"{len(vs)}.")
    for k, (a, b) in enumerate(zip(vs, refs)):
        if _shape(a) != _shape(b):
            raise RuntimeError(f"Entry {k} in v has invalid size: should be "
                               f"torch.Size({list(_shape(b))}) but got torch.Size({list(_shape(a))}).")
    return vs


def _outputs(func, inputs, fn):
    is_tuple, outs = _as_tuple(func(*inputs), "outputs of the user-provided function", fn)
    return is_tuple, outs


def _reverse(outputs, inputs, seeds, create_graph, retain=True):
    """Gradients of the outputs (seeded) with respect to inputs; zeros where unused."""
    pairs = [(o, s) for o, s in zip(outputs, seeds) if o.requires_grad]
    if not pairs:
        return tuple(_zeros(x) for x in inputs)
    gs = _grad([o for o, _ in pairs], inputs, [s for _, s in pairs], retain_graph=retain,
               create_graph=create_graph, allow_unused=True)
    return tuple(_zeros(x) if g is None else g for g, x in zip(gs, inputs))


def _finish(ts, create_graph):
    return tuple(t if create_graph else t.detach() for t in ts)


def _shape_like(is_tuple, ts):
    return ts if is_tuple else ts[0]


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T J)``: the vector-Jacobian product at ``inputs``."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outs = _outputs(func, inputs, "vjp")
    vs = _check_v(v, outs, "output", "vjp")
    gs = _reverse(outs, inputs, vs, create_graph)
    return _shape_like(out_tuple, _finish(outs, create_graph)), \
        _shape_like(in_tuple, _finish(gs, create_graph))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), J v)``: the Jacobian-vector product (by the double-vjp trick)."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
    vs = _check_v(v, inputs, "input", "jvp")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outs = _outputs(func, inputs, "jvp")
    return _shape_like(out_tuple, _finish(outs, create_graph)), \
        _shape_like(out_tuple, _finish(_jvp(outs, inputs, vs, create_graph), create_graph))


def _jvp(outs, inputs, vs, create_graph):
    us = [wrap(np.zeros(_shape(o)) if o.ndim else 0.0).requires_grad_(True) for o in outs]
    gs = [g for g in _reverse(outs, inputs, us, True)]
    live = [(g, v) for g, v in zip(gs, vs) if g.requires_grad]
    if not live:
        return tuple(_zeros(o) for o in outs)
    res = _grad([g for g, _ in live], us, [v for _, v in live], retain_graph=True,
                create_graph=create_graph, allow_unused=True)
    return tuple(_zeros(o) if r is None else r for r, o in zip(res, outs))


def _rows(outs, inputs, create_graph):
    """J[i][k] (output i, input k) by one reverse sweep per output element."""
    J = []
    for o in outs:
        per = [[] for _ in inputs]
        n = _numel(o)
        for j in range(n):
            e = np.zeros(n)
            e[j] = 1.0
            seed = wrap(e.reshape(_shape(o)) if o.ndim else 1.0)
            for k, g in enumerate(_reverse([o], inputs, [seed], create_graph)):
                per[k].append(g)
        J.append(tuple(_stack(per[k], _shape(o), _shape(x)) for k, x in enumerate(inputs)))
    return J


def _stack(gs, out_shape, in_shape):
    """Rows (one per output element) as a tensor of shape out_shape + in_shape."""
    if any(g.requires_grad for g in gs):   # create_graph: keep the rows recorded
        full = stack([g.reshape(in_shape) if in_shape else g for g in gs])
        return full.reshape(out_shape + in_shape)
    return wrap(np.array([np.asarray(g._value, dtype=np.float64) for g in gs])
                 .reshape(out_shape + in_shape))


def _nest(J, out_tuple, in_tuple):
    if out_tuple and in_tuple:
        return tuple(J)
    if out_tuple:
        return tuple(row[0] for row in J)
    if in_tuple:
        return J[0]
    return J[0][0]


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``: entry (i, k) has shape
    ``outputs[i].shape + inputs[k].shape``, nested as PyTorch nests it."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". '
                         f'Hint: If your strategy is reverse-mode, you may want to check '
                         f'"{strategy}".')
    in_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
    inputs = _prepare(inputs, create_graph)
    out_tuple, outs = _outputs(func, inputs, "jacobian")
    if strategy == "reverse-mode":
        J = _rows(outs, inputs, create_graph)
    else:   # one jvp per input element: columns
        cols = [[[] for _ in inputs] for _ in outs]
        for k, x in enumerate(inputs):
            for j in range(_numel(x)):
                vs = [_zeros(y) for y in inputs]
                e = np.zeros(_numel(x))
                e[j] = 1.0
                vs[k] = wrap(e.reshape(_shape(x)) if x.ndim else 1.0)
                for i, t in enumerate(_jvp(outs, inputs, vs, create_graph)):
                    cols[i][k].append(np.asarray(t.detach()._value, dtype=np.float64))
        J = [tuple(wrap(np.moveaxis(np.array(cols[i][k]).reshape(_shape(x) + _shape(o)),
                                     list(range(len(_shape(x)))),
                                     list(range(len(_shape(o)), len(_shape(o)) + len(_shape(x)))))
                         .copy())
                   for k, x in enumerate(inputs)) for i, o in enumerate(outs)]
    return _nest(J, out_tuple, in_tuple)


def _scalar_out(func, inputs, fn):
    out = func(*inputs)
    if isinstance(out, (tuple, list)):
        if len(out) != 1:
            raise RuntimeError(f"The function given to {fn} should return a single Tensor")
        out = out[0]
    if not isinstance(out, Tensor):
        raise TypeError(f"The outputs of the user-provided function given to {fn} must be "
                        f"either a Tensor or a tuple of Tensors but the given outputs of the "
                        f"user-provided function has type {type(out).__name__}.")
    if _numel(out) != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn} should "
                           "contain a single element")
    return out.reshape(()) if out.ndim else out


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a scalar ``func``: entry (i, j) has shape
    ``inputs[i].shape + inputs[j].shape`` (a Tensor for a single input)."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    inputs = _prepare(inputs, create_graph)
    out = _scalar_out(func, inputs, "hessian")
    gs = _reverse([out], inputs, [1.0], True)
    H = _rows(gs, inputs, create_graph)
    return tuple(H) if in_tuple else H[0][0]


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), v^T H)`` for a scalar ``func``."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "vhp")
    vs = _check_v(v, inputs, "input", "vhp")
    inputs = _prepare(inputs, create_graph)
    out = _scalar_out(func, inputs, "vhp")
    gs = _reverse([out], inputs, [1.0], True)
    res = _reverse(gs, inputs, vs, create_graph)
    return _finish((out,), create_graph)[0], _shape_like(in_tuple, _finish(res, create_graph))


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """``(func(*inputs), H v)`` for a scalar ``func`` (H is symmetric: the same sweep as
    ``vhp``)."""
    in_tuple, inputs = _as_tuple(inputs, "inputs", "hvp")
    vs = _check_v(v, inputs, "input", "hvp")
    inputs = _prepare(inputs, create_graph)
    out = _scalar_out(func, inputs, "hvp")
    gs = _reverse([out], inputs, [1.0], True)
    res = _reverse(gs, inputs, vs, create_graph)
    return _finish((out,), create_graph)[0], _shape_like(in_tuple, _finish(res, create_graph))
