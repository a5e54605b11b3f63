"""``tapegrad.optim``: ``SGD``, ``Adam`` and ``AdamW`` (PyTorch's ``torch.optim``).

Updates run on the parameters' NumPy values, without recording, and follow PyTorch's
single-tensor ("for-loop") implementations operation by operation, so that the same initial
parameters and gradients give the same parameters after any number of steps (to rounding:
PyTorch's vectorized CPU kernels use fused multiply-adds in places).
A float64 array parameter and its state (momentum buffer, Adam moments) are updated in place
by one fused, vectorized Numba loop (one pass over memory instead of PyTorch's six to ten);
other arrays (float32, non-contiguous) by the same operations in NumPy; 0-d parameters (whose
value is a Python float, the scalar fast path) by Python float arithmetic.

The new value is written back with ``nn._utils.write`` / ``mark_written`` -- under
``tg.no_grad()``, through ``Tensor._inplace``, the code path of ``p.sub_(...)`` -- which marks
the old tape entry as modified and re-registers the leaf, so the next forward records the new
value and a backward through a graph that saved the old value raises.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.numba_jit import jit
from ..core.grad_mode import enable_grad, no_grad
from ..nn.values import mark_written, write
from ..core.tensor import Tensor

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class: ``param_groups`` (a list of dicts with ``params`` and the hyper-parameters),
    ``state`` (per-parameter dict), ``zero_grad()``, ``step()``, ``state_dict()``."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = {}
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + type(params).__name__)
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    def add_param_group(self, param_group):
        """Add a group: ``{"params": [...], "lr": ...}``; missing options take the defaults."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            param_group["params"] = list(params)
        for p in param_group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + type(p).__name__)
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in param_group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        if len({id(p) for p in param_group["params"]}) != len(param_group["params"]):
            raise ValueError("a parameter group holds the same parameter twice")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters (to None by default, as PyTorch 2)."""
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none:
                    p._grad = None
                elif p._grad is not None:
                    p._grad.zero_()

    def step(self, closure=None):
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group):
        raise NotImplementedError

    # -- state ----------------------------------------------------------------------------
    def state_dict(self):
        """``{"state": {index: {name: value}}, "param_groups": [...]}`` with parameters
        replaced by their index (values are NumPy copies / Python numbers)."""
        index = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                if p in self.state:
                    state[index[id(p)]] = {k: (np.array(v) if isinstance(v, np.ndarray) else v)
                                           for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        params = [p for g in self.param_groups for p in g["params"]]
        for g, saved in zip(self.param_groups, groups):
            if len(g["params"]) != len(saved["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't "
                                 "match the size of optimizer's group")
        self.state = {}
        for k, st in state_dict["state"].items():
            p = params[int(k)]
            self.state[p] = {n: (np.array(v, dtype=np.float64) if np.ndim(v) and
                                 not isinstance(p._value, float) else v) for n, v in st.items()}
        for g, saved in zip(self.param_groups, groups):
            for k, v in saved.items():
                if k != "params":
                    g[k] = v

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}"
            for key in sorted(group):
                if key != "params":
                    s += f"\n    {key}: {group[key]}"
        return s + "\n)"


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
