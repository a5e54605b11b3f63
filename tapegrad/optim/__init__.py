"""``tapegrad.optim``: ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``, ``Adadelta`` and
``lr_scheduler`` (PyTorch's ``torch.optim``).

Updates run on the parameters' NumPy values, without recording, and follow PyTorch's
single-tensor ("for-loop") implementations operation by operation, so that the same initial
parameters and gradients give the same parameters after any number of steps (to rounding:
PyTorch's vectorized CPU kernels use fused multiply-adds in places).
A float64 array parameter and its state (momentum buffer, Adam moments) are updated in place
by one fused, vectorized Numba loop (one pass over memory instead of PyTorch's six to ten);
other arrays (float32, non-contiguous) by the same operations in NumPy; 0-d parameters (whose
value is a Python float, the scalar fast path) by Python float arithmetic.

The new value is written back with ``nn.values.write`` / ``mark_written`` -- under
``tg.no_grad()``, through ``Tensor._inplace``, the code path of ``p.sub_(...)`` -- which marks
the old tape entry as modified and re-registers the leaf, so the next forward records the new
value and a backward through a graph that saved the old value raises.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.numba_jit import jit
from ..nn.values import mark_written, write
from . import lr_scheduler
from .lbfgs import LBFGS
from .optimizer import Optimizer, required

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "LBFGS",
           "lr_scheduler"]


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum (PyTorch's formulation: the buffer
    starts as the first gradient), dampening, Nesterov momentum and weight decay."""

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _update_group(self, group):
        lr, mom, damp = group["lr"], group["momentum"], group["dampening"]
        wd, nesterov, maximize = group["weight_decay"], group["nesterov"], group["maximize"]
        state = self.state
        for p in group["params"]:
            if p._grad is None:
                continue
            x = p._value
            graw = p._grad._value
            if x.__class__ is not float and _fusable(x, graw):   # one Numba pass, in place
                st = state.get(p) if mom else None
                first = mom and st is None
                if first:
                    st = state[p] = {"momentum_buffer": np.empty(x.shape, np.float64)}
                buf = st["momentum_buffer"] if mom else x
                _sgd_kernel(x.reshape(-1), graw.reshape(-1), buf.reshape(-1), float(lr),
                            float(mom), float(damp), float(wd), bool(nesterov),
                            -1.0 if maximize else 1.0, bool(first))   # one signature
                mark_written(p)
                continue
            g = -graw if maximize else graw
            if x.__class__ is float:                      # 0-d parameter: Python floats
                if wd:
                    g = g + wd * x
                if mom:
                    st = state.get(p)
                    if st is None:
                        buf = g
                        state[p] = {"momentum_buffer": buf}
                    else:
                        buf = st["momentum_buffer"] * mom + (1.0 - damp) * g
                        st["momentum_buffer"] = buf
                    g = g + mom * buf if nesterov else buf
                write(p, x - lr * g)
                continue
            # NumPy fallback (float32 or non-contiguous values), the same operations
            if wd:
                g = g + wd * x
            if mom:
                st = state.get(p)
                if st is None:
                    buf = np.array(g, dtype=np.float64)
                    state[p] = {"momentum_buffer": buf}
                else:
                    buf = st["momentum_buffer"]
                    buf *= mom
                    buf += (1.0 - damp) * g if damp else g
                g = g + mom * buf if nesterov else buf
            write(p, x - lr * g)


@jit
def _sgd_kernel(p, g, buf, lr, mom, damp, wd, nesterov, sign, first):
    """One SGD step over flat float64 arrays, in place, in one pass, with PyTorch's
    single-tensor SGD operations in its order (``sign`` = -1 to maximize)."""
    for i in range(p.size):
        x = p[i]
        gi = sign * g[i]
        if wd != 0.0:
            gi = gi + wd * x                                  # grad.add(p, alpha=wd)
        if mom != 0.0:
            b = gi if first else buf[i] * mom + (1.0 - damp) * gi
            buf[i] = b
            gi = gi + mom * b if nesterov else b
        p[i] = x + (-lr) * gi                                 # p.add_(grad, alpha=-lr)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction, L2 ``weight_decay`` (added to the gradient)
    and optional AMSGrad, as PyTorch's ``torch.optim.Adam``."""

    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, maximize=False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _update_group(self, group):
        lr, (b1, b2), eps = group["lr"], group["betas"], group["eps"]
        wd, amsgrad, maximize = group["weight_decay"], group["amsgrad"], group["maximize"]
        decoupled = self._decoupled
        state = self.state
        w1 = 1.0 - float(b1)
        for p in group["params"]:
            if p._grad is None:
                continue
            x = p._value
            scalar = x.__class__ is float
            st = state.get(p)
            if st is None:
                def zero():
                    return 0.0 if scalar else np.zeros(x.shape, np.float64)
                st = state[p] = {"step": 0.0, "exp_avg": zero(), "exp_avg_sq": zero()}
                if amsgrad:
                    st["max_exp_avg_sq"] = zero()
            step = st["step"] = st["step"] + 1.0
            bc1 = 1.0 - b1 ** step
            bc2_sqrt = math.sqrt(1.0 - b2 ** step)
            step_size = lr / bc1
            g = p._grad._value
            if not scalar and _fusable(x, g):       # one Numba pass, in place
                m, v = st["exp_avg"], st["exp_avg_sq"]
                vmax = st["max_exp_avg_sq"] if amsgrad else m
                _adam_kernel(x.reshape(-1), g.reshape(-1), m.reshape(-1), v.reshape(-1),
                             vmax.reshape(-1), -1.0 if maximize else 1.0,
                             1.0 - lr * wd if decoupled else 1.0, 0.0 if decoupled else float(wd),
                             bool(w1 < 0.5), w1 if w1 < 0.5 else -(1.0 - w1), float(b2),
                             float(eps), float(step_size), bc2_sqrt, bool(amsgrad))
                mark_written(p)
                continue
            if maximize:
                g = -g
            if decoupled:
                x = x * (1.0 - lr * wd)               # AdamW: p.mul_(1 - lr * wd)
            elif wd:
                g = g + wd * x                        # Adam: grad.add(p, alpha=wd)
            if scalar:
                m = st["exp_avg"]                     # torch: exp_avg.lerp_(g, 1 - b1)
                m = st["exp_avg"] = m + w1 * (g - m) if w1 < 0.5 else g - (g - m) * (1.0 - w1)
                v = st["exp_avg_sq"] = st["exp_avg_sq"] * b2 + (1.0 - b2) * g * g
                if amsgrad:
                    v = st["max_exp_avg_sq"] = max(st["max_exp_avg_sq"], v)
                denom = math.sqrt(v) / bc2_sqrt + eps
                write(p, x - step_size * (m / denom))
                continue
            # NumPy fallback (float32 or non-contiguous values), the same operations
            m, v = st["exp_avg"], st["exp_avg_sq"]
            t = g - m
            if w1 < 0.5:                              # torch's lerp: m + w1 * (g - m)
                t *= w1
                m += t
            else:                                     # ... or g - (g - m) * (1 - w1)
                t *= 1.0 - w1
                np.subtract(g, t, out=m)
            v *= b2
            t = g * (1.0 - b2)                       # torch: addcmul_(g, g, value=1 - b2)
            t *= g
            v += t
            if amsgrad:
                vm = st["max_exp_avg_sq"]
                np.maximum(vm, v, out=vm)
                v = vm
            denom = np.sqrt(v)
            denom /= bc2_sqrt
            denom += eps
            np.divide(m, denom, out=denom)           # denom now holds m / denom
            denom *= -step_size
            denom += x                                # the new value
            write(p, denom)


def _fusable(x, g):
    return (x.dtype == np.float64 and g.dtype == np.float64 and x.flags.c_contiguous
            and x.flags.writeable and g.flags.c_contiguous and x.shape == g.shape)


@jit
def _adam_kernel(p, g, m, v, vmax, sign, decay, wd, lo, c, b2, eps, step_size, bc2_sqrt,
                 amsgrad):
    """One Adam(W) step over flat float64 arrays, in place, in one pass, with PyTorch's
    single-tensor Adam operations in its order.  Options come as numbers (``sign`` = -1 to
    maximize, ``decay`` = 1 - lr * wd for AdamW, else 1; ``wd`` the L2 term of Adam) and
    loop-invariant tests, so that LLVM vectorizes the loop (7x faster than with branches)."""
    for i in range(p.size):
        x = p[i] * decay                               # AdamW: p.mul_(1 - lr * wd)
        gi = sign * g[i]
        if wd != 0.0:
            gi = gi + wd * x                           # Adam: grad.add(p, alpha=wd)
        mi = m[i]
        mi = (mi if lo else gi) + c * (gi - mi)        # exp_avg.lerp_(grad, 1 - beta1)
        m[i] = mi
        vi = v[i] * b2 + (1.0 - b2) * gi * gi          # exp_avg_sq.mul_(b2).addcmul_(g, g)
        v[i] = vi
        if amsgrad:
            vi = max(vmax[i], vi)
            vmax[i] = vi
        p[i] = x + (-step_size) * (mi / (math.sqrt(vi) / bc2_sqrt + eps))   # addcdiv_


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` before the step)."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)


def _lerp(m, g, w):
    """PyTorch's ``lerp``: ``m + w (g - m)`` for ``w < 0.5``, else ``g - (g - m) (1 - w)``."""
    return m + w * (g - m) if w < 0.5 else g - (g - m) * (1.0 - w)


def _arrays(p, st_names, st, init=0.0):
    x = p._value
    scalar = x.__class__ is float
    for name in st_names:
        if name not in st:
            st[name] = init if scalar else np.full(np.shape(x), init, np.float64)
    return scalar


class RMSprop(Optimizer):
    """RMSprop (Hinton): ``v = alpha v + (1 - alpha) g^2``, ``p -= lr g / (sqrt(v) + eps)``,
    optionally centered (``v - mean(g)^2``), with momentum and L2 ``weight_decay``, as
    PyTorch's ``torch.optim.RMSprop`` (its single-tensor operations, in its order)."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= momentum:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= alpha:
            raise ValueError(f"Invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                                      momentum=momentum, centered=centered, maximize=maximize))

    def _update_group(self, group):
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        wd, mom, centered = group["weight_decay"], group["momentum"], group["centered"]
        for p in group["params"]:
            if p._grad is None:
                continue
            st = self.state.setdefault(p, {"step": 0.0})
            names = ["square_avg"] + (["momentum_buffer"] if mom > 0 else []) \
                + (["grad_avg"] if centered else [])
            scalar = _arrays(p, names, st)
            x = p._value if scalar else np.asarray(p._value, np.float64)
            g = p._grad._value
            g = -g if group["maximize"] else g
            st["step"] += 1.0
            if wd:
                g = g + wd * x
            st["square_avg"] = sa = st["square_avg"] * alpha + (1.0 - alpha) * g * g
            if centered:
                st["grad_avg"] = ga = _lerp(st["grad_avg"], g, 1.0 - alpha)
                avg = _sqrt(sa + (-1.0 * ga) * ga, scalar) + eps
            else:
                avg = _sqrt(sa, scalar) + eps
            if mom > 0:
                st["momentum_buffer"] = buf = st["momentum_buffer"] * mom + g / avg
                new = x + (-lr) * buf
            else:
                new = x + (-lr) * (g / avg)
            write(p, new if scalar else new.astype(p._value.dtype, copy=False))


def _sqrt(v, scalar):
    return math.sqrt(v) if scalar else np.sqrt(v)


class Adagrad(Optimizer):
    """Adagrad: ``s += g^2``, ``p -= clr g / (sqrt(s) + eps)`` with
    ``clr = lr / (1 + (step - 1) lr_decay)`` and L2 ``weight_decay``, as PyTorch's
    ``torch.optim.Adagrad`` (state made at construction, as there)."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False,
                 fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= lr_decay:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not 0.0 <= initial_accumulator_value:
            raise ValueError(f"Invalid initial_accumulator_value value: "
                             f"{initial_accumulator_value}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      maximize=maximize))
        for group in self.param_groups:
            for p in group["params"]:
                st = self.state.setdefault(p, {"step": 0.0})
                _arrays(p, ["sum"], st, float(group["initial_accumulator_value"]))

    def _update_group(self, group):
        lr, lr_decay, eps, wd = group["lr"], group["lr_decay"], group["eps"], group["weight_decay"]
        for p in group["params"]:
            if p._grad is None:
                continue
            st = self.state.setdefault(p, {"step": 0.0})
            scalar = _arrays(p, ["sum"], st, float(group["initial_accumulator_value"]))
            x = p._value if scalar else np.asarray(p._value, np.float64)
            g = p._grad._value
            g = -g if group["maximize"] else g
            st["step"] = step = st["step"] + 1.0
            if wd:
                g = g + wd * x
            clr = lr / (1 + (step - 1) * lr_decay)
            st["sum"] = s = st["sum"] + (1.0 * g) * g
            new = x + (-clr) * (g / (_sqrt(s, scalar) + eps))
            write(p, new if scalar else new.astype(p._value.dtype, copy=False))


class Adadelta(Optimizer):
    """Adadelta (Zeiler): ``v = rho v + (1 - rho) g^2``,
    ``d = sqrt(u + eps) / sqrt(v + eps) g``, ``u = rho u + (1 - rho) d^2``, ``p -= lr d``,
    with L2 ``weight_decay``, as PyTorch's ``torch.optim.Adadelta``."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize))

    def _update_group(self, group):
        lr, rho, eps, wd = group["lr"], group["rho"], group["eps"], group["weight_decay"]
        for p in group["params"]:
            if p._grad is None:
                continue
            st = self.state.setdefault(p, {"step": 0.0})
            scalar = _arrays(p, ["square_avg", "acc_delta"], st)
            x = p._value if scalar else np.asarray(p._value, np.float64)
            g = p._grad._value
            g = -g if group["maximize"] else g
            st["step"] += 1.0
            if wd:
                g = g + wd * x
            st["square_avg"] = sa = st["square_avg"] * rho + (1.0 - rho) * g * g
            delta = _sqrt(st["acc_delta"] + eps, scalar) / _sqrt(sa + eps, scalar) * g
            st["acc_delta"] = st["acc_delta"] * rho + (1.0 - rho) * delta * delta
            new = x + (-lr) * delta
            write(p, new if scalar else new.astype(p._value.dtype, copy=False))
