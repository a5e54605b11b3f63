"""``tg.autograd.gradcheck``: analytical gradients against float64 central differences."""
from __future__ import annotations

import warnings

import numpy as np

from ..core.tape import Tape
from ..core.tensor import Tensor, wrap
from . import forward_ad
from .gradients import grad


class GradcheckError(RuntimeError):
    """Raised by ``gradcheck`` when the analytical and numerical Jacobians disagree."""


def _outputs(func, inputs):
    out = func(*inputs)
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _numerical(func, inputs, k, eps):
    """Jacobians of every output with respect to input ``k`` by central differences:
    a list over outputs of (out numel, in numel) arrays."""
    x = inputs[k]
    base = np.array(x.detach()._value, dtype=np.float64)
    cols = []
    for j in range(base.size):
        vals = []
        for sign in (1.0, -1.0):
            p = base.copy().reshape(-1)
            p[j] += sign * eps
            xs = list(inputs)
            # grad mode stays on (gradgradcheck's function calls autograd.grad), on a tape
            # of its own that goes when the evaluation is done
            xs[k] = wrap(p.reshape(base.shape) if base.ndim else float(p[0]),
                         requires_grad=x.requires_grad)
            with Tape():
                vals.append([np.array(o._value, dtype=np.float64).reshape(-1)
                             if isinstance(o, Tensor) else None for o in _outputs(func, xs)])
        cols.append([None if a is None else (a - b) / (2 * eps) for a, b in zip(*vals)])
    n_out = len(cols[0]) if cols else 0
    return [None if cols[0][i] is None else np.array([c[i] for c in cols]).T
            for i in range(n_out)]


def _analytical(func, inputs, k):
    x = inputs[k].detach().requires_grad_(True)
    xs = list(inputs)
    xs[k] = x
    outs = _outputs(func, xs)
    J = []
    for o in outs:
        if not isinstance(o, Tensor) or not o.requires_grad:
            J.append(None if not isinstance(o, Tensor) else np.zeros((o.numel(), x.numel())))
            continue
        rows = []
        for j in range(o.numel()):
            e = np.zeros(o.numel())
            e[j] = 1.0
            (g,) = grad(o, x, wrap(e.reshape(tuple(o.shape)) if o.ndim else 1.0),
                        retain_graph=True, allow_unused=True)
            rows.append(np.zeros(x.numel()) if g is None else
                        np.array(g._value, dtype=np.float64).reshape(-1))
        J.append(np.array(rows).reshape(o.numel(), x.numel()))
    return J


def _forward(func, inputs, k):
    """Jacobians of every output with respect to input ``k`` by forward mode
    (``forward_ad``), one column per element of the input."""
    x = inputs[k]
    cols = []
    for j in range(x.numel()):
        e = np.zeros(x.numel())
        e[j] = 1.0
        with forward_ad.dual_level():
            xs = list(inputs)
            xs[k] = forward_ad.make_dual(x.detach(), wrap(e.reshape(tuple(x.shape)) if x.ndim
                                                          else 1.0))
            outs = _outputs(func, xs)
            cols.append([None if not isinstance(o, Tensor) else
                         _flat(forward_ad.unpack_dual(o).tangent, o) for o in outs])
    n_out = len(cols[0]) if cols else 0
    return [None if cols[0][i] is None else np.array([c[i] for c in cols]).T
            for i in range(n_out)]


def _flat(t, like):
    return np.zeros(like.numel()) if t is None else np.array(t._value, np.float64).reshape(-1)


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              check_forward_ad=False, check_backward_ad=True, **unused) -> bool:
    """Check the gradients of ``func`` at ``inputs`` (those that require grad) against
    central differences in float64: ``True``, or ``GradcheckError`` naming the output,
    the input and both Jacobians (``False`` with ``raise_exception=False``).  Reverse mode
    is checked unless ``check_backward_ad=False``, forward mode (``forward_ad``) with
    ``check_forward_ad=True``."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    checked = [k for k, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of the them have requires_grad=True.")
    for k in checked:
        if inputs[k].dtype is not None and str(inputs[k].dtype) != "tapegrad.float64":
            warnings.warn(f"Input #{k} requires gradient and is not a double precision "
                          "floating point. This check will likely fail if all the inputs are "
                          "not of double precision floating point.", UserWarning)
        num = _numerical(func, inputs, k, eps)
        modes = ([("", _analytical)] if check_backward_ad else []) + \
            ([("forward AD ", _forward)] if check_forward_ad else [])
        for mode, jacobian in modes:
            for i, (a, n) in enumerate(zip(jacobian(func, inputs, k), num)):
                if a is None or n is None:
                    continue
                if not np.allclose(a, n, rtol=rtol, atol=atol):
                    if not raise_exception:
                        return False
                    raise GradcheckError(
                        f"{mode}Jacobian mismatch for output {i} with respect to input {k},\n"
                        f"numerical:{wrap(n)}\nanalytical:{wrap(a)}\n")
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  raise_exception=True, **unused) -> bool:
    """Check second derivatives: ``gradcheck`` of the map ``(inputs, v) -> grad(func(inputs),
    inputs, v, create_graph=True)`` (PyTorch's).  ``grad_outputs`` (``v``): random when not
    given, one per output of ``func``."""
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    outs = [o for o in _outputs(func, inputs) if isinstance(o, Tensor) and o.requires_grad]
    if grad_outputs is None:
        rng = np.random.default_rng(0)
        grad_outputs = tuple(wrap(rng.standard_normal(tuple(o.shape)) if o.ndim else
                                  float(rng.standard_normal()), requires_grad=True) for o in outs)
    else:
        grad_outputs = tuple(grad_outputs) if isinstance(grad_outputs, (tuple, list)) \
            else (grad_outputs,)
    n = len(grad_outputs)

    def first_derivatives(*args):
        xs, vs = args[:len(args) - n], args[len(args) - n:]
        ys = [o for o in _outputs(func, xs) if isinstance(o, Tensor) and o.requires_grad]
        diff = [x for x in xs if isinstance(x, Tensor) and x.requires_grad]
        gs = grad(ys, diff, list(vs), create_graph=True, allow_unused=True)
        return tuple(g for g in gs if g is not None)

    return gradcheck(first_derivatives, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
