"""``tapegrad.optim``: ``SGD``, ``Adam`` and ``AdamW`` (PyTorch's ``torch.optim``).

Updates run on the parameters' NumPy values, without recording, and follow PyTorch's
single-tensor ("for-loop") implementations operation by operation, so that the same initial
parameters and gradients give the same parameters (to rounding) after any number of steps.
Array state (momentum buffers, Adam moments) is updated in place with NumPy; 0-d parameters
(whose value is a Python float, the scalar fast path) are updated with Python float arithmetic.

The new value is written back with ``nn._utils.set_value`` -- ``with tg.no_grad():`` +
``Tensor._inplace``, the code path of ``p.sub_(...)`` under ``no_grad`` -- which marks the old
tape entry as modified and re-registers the leaf, so the next forward records the new value.
"""
from __future__ import annotations

import math

import numpy as np

from .grad_mode import enable_grad
from .nn._utils import set_value
from .tensor import Tensor

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
                                 not isinstance(p._v, float) else v) for n, v in st.items()}
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


def _grad_value(p, maximize):
    g = p._grad
    if g is None:
        return None
    g = g._v
    if maximize:
        g = -g
    return g


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
            g = _grad_value(p, maximize)
            if g is None:
                continue
            x = p._v
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
                set_value(p, x - lr * g)
                continue
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
            set_value(p, x - lr * g)


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
        w1 = 1.0 - b1
        for p in group["params"]:
            g = _grad_value(p, maximize)
            if g is None:
                continue
            x = p._v
            scalar = x.__class__ is float
            st = state.get(p)
            if st is None:
                z = 0.0 if scalar else np.zeros(x.shape, np.float64)
                st = state[p] = {"step": 0.0, "exp_avg": z,
                                 "exp_avg_sq": 0.0 if scalar else np.zeros(x.shape, np.float64)}
                if amsgrad:
                    st["max_exp_avg_sq"] = 0.0 if scalar else np.zeros(x.shape, np.float64)
            step = st["step"] = st["step"] + 1.0
            if decoupled:
                x = x * (1.0 - lr * wd)               # AdamW: p.mul_(1 - lr * wd)
            elif wd:
                g = g + wd * x
            bc1 = 1.0 - b1 ** step
            bc2_sqrt = math.sqrt(1.0 - b2 ** step)
            step_size = lr / bc1
            if scalar:
                m = st["exp_avg"]                     # torch: exp_avg.lerp_(g, 1 - b1)
                m = st["exp_avg"] = m + w1 * (g - m) if w1 < 0.5 else g - (g - m) * (1.0 - w1)
                v = st["exp_avg_sq"] = st["exp_avg_sq"] * b2 + (1.0 - b2) * g * g
                if amsgrad:
                    v = st["max_exp_avg_sq"] = max(st["max_exp_avg_sq"], v)
                denom = math.sqrt(v) / bc2_sqrt + eps
                set_value(p, x - step_size * (m / denom))
                continue
            m, v = st["exp_avg"], st["exp_avg_sq"]
            # exp_avg.lerp_(g, w1): torch computes m + w1 * (g - m) for w1 < 0.5
            if w1 < 0.5:
                t = g - m
                t *= w1
                m += t
            else:                                    # torch: g - (g - m) * (1 - w1)
                t = g - m
                t *= 1.0 - w1
                np.subtract(g, t, out=m)
            v *= b2
            t = g * (1.0 - b2)                      # torch: addcmul_(g, g, value=1 - b2)
            t *= g
            v += t
            if amsgrad:
                vm = st["max_exp_avg_sq"]
                np.maximum(vm, v, out=vm)
                v = vm
            denom = np.sqrt(v)
            denom /= bc2_sqrt
            denom += eps
            np.divide(m, denom, out=denom)          # denom now holds m / denom
            denom *= -step_size
            denom += x                               # the new value
            set_value(p, denom)


class AdamW(Adam):
    """Adam with decoupled weight decay (``p *= 1 - lr * weight_decay`` before the step)."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
