"""The optimizer base class of ``tapegrad.optim``: parameter groups, state, ``zero_grad``,
``step`` (a closure under grad mode; the update under ``no_grad``), ``state_dict``."""
from __future__ import annotations

from collections import defaultdict

import numpy as np

from ..core.grad_mode import enable_grad, no_grad
from ..core.tensor import Tensor

__all__ = ["Optimizer", "required"]


class _Required:
    def __repr__(self):
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class: ``param_groups`` (a list of dicts with ``params`` and the hyper-parameters),
    ``state`` (per-parameter dict), ``zero_grad()``, ``step()``, ``state_dict()``."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)   # state[p] starts empty, as PyTorch's
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
        self.state = defaultdict(dict)   # state[p] starts empty, as PyTorch's
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
