"""``Module``, ``Parameter`` and the layers of ``tapegrad.nn``.

Parameters.  ``tg.Tensor`` is a ``__slots__`` class whose recording fast paths test
``x.__class__ is Tensor``, so a ``Parameter`` subclass would fall off every fast path.
Instead ``nn.Parameter(t)`` returns a plain leaf ``Tensor`` with ``requires_grad=True`` (sharing
``t``'s value), and a ``Module`` treats *any leaf tensor that requires grad assigned as an
attribute* as a parameter (``self.w = tg.randn(3, requires_grad=True)`` registers ``w``).
``isinstance(x, nn.Parameter)`` is true for exactly those tensors.  A tensor that does not
require grad stays a plain attribute (use ``register_buffer`` for state that should go into
``state_dict``); assigning one to a registered parameter's name raises, as in PyTorch.
"""
from __future__ import annotations

import math
import warnings
from collections import OrderedDict, namedtuple

import numpy as np

from ..autograd.function import Function
from ..core.grad_mode import is_grad_enabled
from ..core.tensor import Tensor, wrap
from . import functional as F
from . import init
from .values import set_value

__all__ = ["Parameter", "Module", "Sequential", "ModuleList", "ParameterList", "Identity",
           "Linear", "ReLU", "LeakyReLU", "Softplus", "GELU", "SiLU", "ELU", "Tanh", "Sigmoid",
           "Softmax", "LogSoftmax", "Dropout", "MSELoss", "L1Loss", "SmoothL1Loss",
           "CrossEntropyLoss", "NLLLoss", "BCELoss", "BCEWithLogitsLoss", "ModuleDict",
           "RemovableHandle", "Flatten", "Unflatten", "LayerNorm", "Embedding", "BatchNorm1d",
           "BatchNorm2d", "Conv1d", "Conv2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
           "HuberLoss", "ParameterDict", "AdaptiveAvgPool2d", "Dropout1d", "Dropout2d",
           "Dropout3d", "BackwardHookFunction", "ReLU6", "SELU", "Mish", "Hardswish",
           "Hardsigmoid", "Softsign", "LogSigmoid", "Tanhshrink", "Hardtanh", "CELU", "Softmin",
           "Softshrink", "Hardshrink", "Threshold", "GLU", "PReLU", "CosineSimilarity",
           "PairwiseDistance", "KLDivLoss", "SoftMarginLoss", "MultiLabelSoftMarginLoss",
           "MultiMarginLoss",
           "MarginRankingLoss",
           "HingeEmbeddingLoss", "CosineEmbeddingLoss", "PoissonNLLLoss", "GaussianNLLLoss",
           "TripletMarginLoss"]


class Buffer:
    """``nn.Buffer(data, persistent=True)``: assigned to a module's attribute, ``data`` is
    registered as a buffer (``register_buffer``), saved in ``state_dict`` unless not
    ``persistent``; the attribute then holds the tensor itself."""

    def __init__(self, data=None, *, persistent=True):
        self.data = data if data is None or isinstance(data, Tensor) else wrap(np.asarray(data))
        self.persistent = persistent


def _is_param(value):
    return isinstance(value, Tensor) and value._tape is not None and value.is_leaf


class _ParameterMeta(type):
    def __instancecheck__(cls, obj):
        return _is_param(obj)


class Parameter(metaclass=_ParameterMeta):
    """``Parameter(data=None, requires_grad=True)``: a leaf tensor that requires grad.

    Returns a plain ``tg.Tensor`` sharing ``data``'s value (see the module docstring);
    ``isinstance(t, Parameter)`` is true for every leaf tensor that requires grad."""

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            t = wrap(np.zeros(0))
        elif isinstance(data, Tensor):
            t = wrap(data._value)
        else:   # PyTorch calls data.detach() on anything that is not a plain tensor
            raise AttributeError(f"'{type(data).__name__}' object has no attribute 'detach'")
        if requires_grad:
            t.requires_grad_(True)
        return t


class BackwardHookFunction(Function):
    """The identity, whose backward calls the module's backward hooks (PyTorch's node
    ``BackwardHookFunctionBackward``)."""

    @staticmethod
    def forward(ctx, callback, *tensors):
        ctx.callback = callback
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.callback(grads))


class _BackwardHooks:
    """One call's backward hooks, as PyTorch's ``BackwardHook``: the tensor inputs and
    outputs pass through ``BackwardHookFunction``; the outputs' backward runs the pre-hooks
    on ``grad_output``, the inputs' backward runs the full hooks on ``grad_input``."""

    def __init__(self, module, args):
        self.module, self.n_args = module, len(args)
        self.in_pos = [k for k, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        self.grad_output = None

    @staticmethod
    def _through(callback, tensors):
        out = BackwardHookFunction.apply(callback, *tensors)
        return out if isinstance(out, tuple) else (out,)

    def _spread(self, grads, pos, n):
        full = [None] * n
        for k, g in zip(pos, grads):
            full[k] = g
        return tuple(full)

    def _run_full_hooks(self, grad_input):
        for hook in list(self.module._backward_hooks.values()):
            res = hook(self.module, grad_input, self.grad_output)
            if res is not None:
                res = tuple(res) if isinstance(res, (tuple, list)) else (res,)
                if len(res) != len(grad_input):
                    raise RuntimeError(f"Backward hook returned an invalid number of grad_input,"
                                       f" got {len(res)}, but expected {len(grad_input)}")
                grad_input = res
        return grad_input

    def wrap_inputs(self, args):
        if not self.in_pos:
            return args
        def on_input_grads(grads):
            gi = self._run_full_hooks(self._spread(grads, self.in_pos, self.n_args))
            return tuple(gi[k] for k in self.in_pos)
        new = list(args)
        for k, t in zip(self.in_pos, self._through(on_input_grads,
                                                   [args[k] for k in self.in_pos])):
            new[k] = t
        return tuple(new)

    def wrap_outputs(self, out):
        outs = out if isinstance(out, tuple) else (out,)
        pos = [k for k, o in enumerate(outs) if isinstance(o, Tensor) and o.requires_grad]
        if not pos:
            return out

        def on_output_grads(grads):
            go = self._spread(grads, pos, len(outs))
            for hook in list(self.module._backward_pre_hooks.values()):
                res = hook(self.module, go)
                if res is not None:
                    go = tuple(res) if isinstance(res, (tuple, list)) else (res,)
            self.grad_output = go
            if not self.in_pos:   # no input needs a gradient: the hooks run now, with Nones
                if self.module._backward_hooks:
                    warnings.warn("Full backward hook is firing when gradients are computed "
                                  "with respect to module outputs since no inputs require "
                                  "gradients.", UserWarning, stacklevel=2)
                self._run_full_hooks((None,) * self.n_args)
            return tuple(go[k] for k in pos)

        new = list(outs)
        for k, t in zip(pos, self._through(on_output_grads, [outs[k] for k in pos])):
            new[k] = t
        return tuple(new) if isinstance(out, tuple) else new[0]


class RemovableHandle:
    """What ``register_*_hook`` returns: ``remove()`` unregisters the hook (also on leaving
    a ``with`` block)."""

    _next_id = 0

    def __init__(self, table, extra=None):
        self.id = RemovableHandle._next_id
        RemovableHandle._next_id += 1
        self._table, self._extra = table, extra

    def remove(self):
        self._table.pop(self.id, None)
        if self._extra is not None:
            self._extra.discard(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _addindent(s, num_spaces):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    first = lines.pop(0)
    return first + "\n" + "\n".join(num_spaces * " " + line for line in lines)


class Module:
    """Base class of all layers and models (PyTorch's ``nn.Module``).

    Subclasses call ``super().__init__()`` and assign parameters (leaf tensors that require
    grad) and submodules as attributes; ``forward`` defines the computation and
    ``module(x)`` calls it."""

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_hooks_with_kwargs"] = set()
        d["_backward_pre_hooks"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()

    def forward(self, *input):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  f'"forward" function')

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        pre, post = d.get("_forward_pre_hooks"), d.get("_forward_hooks")
        backward = d.get("_backward_hooks") or d.get("_backward_pre_hooks")
        if not pre and not post and not backward:
            return self.forward(*args, **kwargs)
        with_kwargs = d["_hooks_with_kwargs"]
        for key, hook in list(pre.items()):
            if key in with_kwargs:
                res = hook(self, args, kwargs)
                if res is not None:
                    if not (isinstance(res, tuple) and len(res) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {res}.")
                    args, kwargs = res
            else:
                res = hook(self, args)
                if res is not None:
                    args = res if isinstance(res, tuple) else (res,)
        hooked = _BackwardHooks(self, args) if backward and is_grad_enabled() else None
        if hooked is not None:
            args = hooked.wrap_inputs(args)
        out = self.forward(*args, **kwargs)
        for key, hook in list(post.items()):
            res = hook(self, args, kwargs, out) if key in with_kwargs else hook(self, args, out)
            if res is not None:
                out = res
        return out if hooked is None else hooked.wrap_outputs(out)

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """Run ``hook(module, grad_output)`` when the gradients of the module's outputs are
        computed; a result other than None replaces ``grad_output``.  Returns a handle."""
        return self._add_hook(self._backward_pre_hooks, hook, prepend, False)

    def register_full_backward_hook(self, hook, prepend=False):
        """Run ``hook(module, grad_input, grad_output)`` when the gradients of the module's
        positional tensor inputs are computed (None for inputs that need none); a result other
        than None replaces ``grad_input``.  Returns a handle."""
        return self._add_hook(self._backward_hooks, hook, prepend, False)

    def _add_hook(self, table, hook, prepend, with_kwargs):
        handle = RemovableHandle(table, self.__dict__["_hooks_with_kwargs"])
        table[handle.id] = hook
        if with_kwargs:
            self.__dict__["_hooks_with_kwargs"].add(handle.id)
        if prepend:
            table.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """Run ``hook(module, args)`` before each ``forward``; a result other than None
        replaces the positional arguments (a non-tuple is wrapped).  ``with_kwargs``:
        ``hook(module, args, kwargs)`` returning None or ``(args, kwargs)``.  Returns a
        handle whose ``remove()`` unregisters the hook."""
        return self._add_hook(self._forward_pre_hooks, hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False,
                              always_call=False):
        """Run ``hook(module, args, output)`` after each ``forward``; a result other than
        None replaces the output.  ``with_kwargs``: ``hook(module, args, kwargs, output)``.
        Returns a handle whose ``remove()`` unregisters the hook."""
        return self._add_hook(self._forward_hooks, hook, prepend, with_kwargs)

    # -- attribute registration ---------------------------------------------------------
    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if _is_param(value):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._drop(name)
            params[name] = value
        elif isinstance(value, Buffer):   # (nn.Buffer: registered, its tensor stored)
            self._drop(name)
            self.register_buffer(name, value.data, value.persistent)
        elif isinstance(value, Module):
            modules = d.get("_modules")
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._drop(name)
            modules[name] = value
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(a leaf tensor that requires grad, or None, expected)")
            params[name] = None
        elif d.get("_modules") is not None and name in d["_modules"]:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module "
                                f"'{name}' (Module or None expected)")
            d["_modules"][name] = None
        elif d.get("_buffers") is not None and name in d["_buffers"]:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(Tensor or None expected)")
            d["_buffers"][name] = value
        else:
            object.__setattr__(self, name, value)

    def _drop(self, name):
        d = self.__dict__
        d.pop(name, None)
        for key in ("_parameters", "_buffers", "_modules"):
            reg = d.get(key)
            if reg is not None:
                reg.pop(name, None)
        s = d.get("_non_persistent_buffers_set")
        if s is not None:
            s.discard(name)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            reg = d.get(key)
            if reg is not None and name in reg:
                return reg[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if name in d.get(key, ()):
                del d[key][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers)
                      | set(self._modules))

    def register_parameter(self, name, param):
        """Register ``param`` (a leaf tensor that requires grad, or None) as ``name``."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        if not isinstance(name, str) or "." in name or name == "":
            raise KeyError(f'parameter name can\'t contain "." or be empty, got {name!r}')
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not _is_param(param):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (a leaf tensor that requires grad, or None, required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Register a tensor that is state but not a parameter (saved in ``state_dict``
        unless ``persistent=False``)."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        if not isinstance(name, str) or "." in name or name == "":
            raise KeyError(f'buffer name can\'t contain "." or be empty, got {name!r}')
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Register ``module`` (or None) as the child ``name``."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        if not isinstance(name, str) or "." in name or name == "":
            raise KeyError(f'module name can\'t contain "." or be empty, got {name!r}')
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    # -- traversal ----------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from m.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, key, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse \
            else [(prefix, self)]
        for mprefix, m in mods:
            for name, v in getattr(m, key).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield mprefix + ("." if mprefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, parameter) pairs, each parameter once: ``0.weight`` in a Sequential."""
        return self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        if target == "":
            return self
        m = self
        for item in target.split("."):
            if not hasattr(m, item):
                raise AttributeError(f"{type(m).__name__} has no attribute `{item}`")
            m = getattr(m, item)
            if not isinstance(m, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return m

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def apply(self, fn):
        """Call ``fn`` on every submodule (children first) and on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # -- dtype and device -----------------------------------------------------------------
    def _cast_floats(self, np_dtype):
        """Convert every float parameter and buffer to ``np_dtype`` in place (the same tensor
        objects, as PyTorch's ``param.data = ...``: optimizers holding them stay valid)."""
        for t in list(self.parameters()) + list(self.buffers()):
            v = np.asarray(t._value)
            if v.dtype.kind == "f" and v.dtype != np_dtype:
                t.data = wrap(v.astype(np_dtype))
                if t._grad is not None:
                    t._grad = wrap(np.asarray(t._grad._value).astype(np_dtype))
        return self

    def to(self, *args, **kwargs):
        """``to(dtype)``, ``to(device)``, ``to(tensor)``, ``to(device, dtype)``: float
        parameters and buffers take the dtype; the only device is the CPU."""
        dtype, device = kwargs.get("dtype"), kwargs.get("device")
        for a in args:
            if isinstance(a, Tensor):
                dtype = a.dtype
            elif isinstance(a, str) or type(a).__name__ == "device":
                device = a
            elif a is not None:
                dtype = a
        if device is not None and str(device).split(":")[0] != "cpu":
            raise AssertionError("Torch not compiled with CUDA enabled")
        if dtype is None:
            return self
        np_dtype = np.dtype(getattr(dtype, "np", dtype))
        if np_dtype.kind != "f":
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got "
                            f"desired dtype={dtype}")
        return self._cast_floats(np_dtype)

    def double(self):
        return self._cast_floats(np.dtype(np.float64))

    def float(self):
        return self._cast_floats(np.dtype(np.float32))

    def half(self):
        return self._cast_floats(np.dtype(np.float16))

    def type(self, dst_type):
        return self.to(dst_type)

    def cpu(self):
        return self

    def cuda(self, device=None):
        raise AssertionError("Torch not compiled with CUDA enabled")

    # -- modes and gradients --------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Reset the gradients of all parameters (to None by default, as PyTorch 2)."""
        for p in self.parameters():
            if set_to_none:
                p._grad = None
            elif p._grad is not None:
                p._grad.zero_()

    # -- state ----------------------------------------------------------------------------
    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict ``name -> tensor`` of all parameters and persistent buffers.

        Values are detached tensors sharing the parameters' values, as PyTorch's (an update
        of the parameters in place shows in them; ``copy.deepcopy`` or ``v.clone()`` to keep
        a snapshot); ``keep_vars=True``: the tensors themselves."""
        if destination is None:
            destination = OrderedDict()
        for mprefix, m in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            dot = mprefix + ("." if mprefix else "")
            for name, p in m._parameters.items():
                if p is not None:
                    destination[dot + name] = p if keep_vars else p.detach()
            for name, b in m._buffers.items():
                if b is not None and name not in m._non_persistent_buffers_set:
                    destination[dot + name] = b if keep_vars else b.detach()
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values (NumPy arrays, tapegrad or torch tensors, numbers) into the parameters
        and buffers in place.  ``strict``: raise on missing or unexpected keys."""
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        staged = []
        for k, t in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            if isinstance(v, Tensor):
                v = v._value
            elif hasattr(v, "detach") and hasattr(v, "numpy"):   # a torch tensor
                v = v.detach().cpu().numpy()
            v = np.asarray(v)
            if v.shape != tuple(t.shape):
                errors.append(f'size mismatch for {k}: copying a param with shape '
                              f'{_torch_size(v.shape)} from checkpoint, the shape in current '
                              f'model is {_torch_size(t.shape)}.')
                continue
            staged.append((t, v))
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        for t, v in staged:
            set_value(t, v.astype(t.dtype.np, copy=True))
        return _IncompatibleKeys(missing, unexpected)

    # -- printing -------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra_lines = []
        extra = self.extra_repr()
        if extra:
            extra_lines = extra.split("\n")
        child_lines = []
        for key, module in self._modules.items():
            mod_str = _addindent(repr(module), 2)
            child_lines.append("(" + key + "): " + mod_str)
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def _torch_size(shape):
    return f"torch.Size({list(shape)})"


# -- containers ---------------------------------------------------------------------------
class _NumberedModules(Module):
    """What Sequential and ModuleList share: children named ``0``, ``1``, ... in order."""

    def __setitem__(self, idx, module):
        key = list(self._modules.keys())[idx]
        setattr(self, key, module)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self


class Sequential(_NumberedModules):
    """Modules applied in order: ``Sequential(Linear(2, 16), ReLU(), Linear(16, 2))`` (or an
    ``OrderedDict`` of named modules)."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def forward(self, input):
        for module in self._modules.values():
            input = module(input)
        return input

    def __delitem__(self, idx):
        keys = list(self._modules.keys())
        for key in (keys[idx] if isinstance(idx, slice) else [keys[idx]]):
            del self._modules[key]
        # PyTorch renumbers the remaining modules
        mods = list(self._modules.values())
        self._modules.clear()
        for k, m in enumerate(mods):
            self._modules[str(k)] = m

    def insert(self, index, module):
        mods = list(self._modules.values())
        n = len(mods)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        mods.insert(index if index >= 0 else index + n, module)
        self._modules.clear()
        for k, m in enumerate(mods):
            self.add_module(str(k), m)
        return self

    def extend(self, sequential):
        for m in sequential:
            self.append(m)
        return self

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        mods = list(self._modules.values())
        n = len(mods)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range")
        return mods[idx]



class ModuleList(_NumberedModules):
    """A list of modules, registered as ``0``, ``1``, ..."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __repr__(self):
        """PyTorch's: runs of equal modules print once, as ``(0-2): 3 x Linear(...)``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        blocks = []                                 # [start, end, repr]
        for i, r in enumerate(reprs):
            if blocks and blocks[-1][2] == r:
                blocks[-1][1] = i
            else:
                blocks.append([i, i, r])
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2)
                 for a, b, r in blocks]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])
        return mods[idx]


    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self


class _RegisteredDict(Module):
    """What ModuleDict and ParameterDict share: a dict view of one of the module's
    registries (``_registry``), in insertion order; a subclass says how a value is
    registered (``__setitem__``) and in which order a plain dict is added (``update``)."""

    _registry = ""          # "_modules" or "_parameters"
    _sorts_plain_dicts = False

    def __init__(self, values=None):
        super().__init__()
        if values is not None:
            self.update(values)

    @property
    def _store(self):
        return getattr(self, self._registry)

    def __getitem__(self, key):
        return self._store[key]

    def __delitem__(self, key):
        del self._store[key]

    def __len__(self):
        return len(self._store)

    def __iter__(self):
        return iter(self._store)

    def __contains__(self, key):
        return key in self._store

    def keys(self):
        return self._store.keys()

    def values(self):
        return self._store.values()

    def items(self):
        return self._store.items()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def clear(self):
        self._store.clear()

    def update(self, values):
        """Add ``values`` (a mapping or pairs); a ParameterDict takes a plain dict in sorted
        key order, as PyTorch's (an ``OrderedDict`` or one of these dicts in its own order)."""
        if isinstance(values, (OrderedDict, _RegisteredDict)) or not hasattr(values, "items"):
            items = list(values.items() if hasattr(values, "items") else values)
        else:
            items = sorted(values.items()) if self._sorts_plain_dicts else list(values.items())
        for key, value in items:
            self[key] = value


class ModuleDict(_RegisteredDict):
    """An ordered dict of modules registered under their keys."""

    _registry = "_modules"

    def __setitem__(self, key, module):
        self.add_module(key, module)


def _as_parameter(value):
    """A tensor as a parameter: PyTorch's containers wrap a plain tensor in ``Parameter``."""
    return value if _is_param(value) else Parameter(value)


class ParameterList(Module):
    """A list of parameters, registered as ``0``, ``1``, ... (e.g. the weights of a neuron
    built from 0-d scalar tensors).  Iterates over the tensors themselves; a value that is
    not a tensor is kept as it is, unregistered, as PyTorch's."""

    def __init__(self, values=None):
        super().__init__()
        self.__dict__["_list"] = []
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        return self._list[idx]

    def __len__(self):
        return len(self._list)

    def __iter__(self):
        return iter(self._list)

    def append(self, value):
        if isinstance(value, Tensor):
            value = _as_parameter(value)
            self.register_parameter(str(len(self._list)), value)
        self._list.append(value)
        return self

    def extend(self, values):
        for v in values:
            self.append(v)
        return self

    def extra_repr(self):
        lines = []
        for k, p in enumerate(self._list):
            if not isinstance(p, Tensor):
                lines.append(f"({k}): Object of type: {type(p).__name__}")
                continue
            shape = "x".join(str(n) for n in p.shape) or "()"
            lines.append(f"({k}): Parameter containing: [tapegrad.{p.dtype.name} of size {shape}]")
        return "\n".join(lines)


class ParameterDict(_RegisteredDict):
    """A dict of parameters registered under their keys."""

    _registry = "_parameters"
    _sorts_plain_dicts = True

    def __setitem__(self, key, value):
        self.register_parameter(key, _as_parameter(value))


# -- layers -------------------------------------------------------------------------------
class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """``y = x @ weight.T + bias`` with ``weight`` (out_features, in_features).

    Initialised as PyTorch: ``kaiming_uniform_(weight, a=sqrt(5))`` -- i.e. U(-1/sqrt(fan_in),
    1/sqrt(fan_in)) -- and ``bias`` from U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        if min(in_features, out_features) < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension "
                               f"{min(out_features, in_features) if out_features < 0 else in_features}: "
                               f"[{out_features}, {in_features}]")
        self.in_features = in_features
        self.out_features = out_features
        np_dtype = np.float64 if dtype is None else getattr(dtype, "np", dtype)
        self.weight = Parameter(wrap(np.empty((out_features, in_features), np_dtype)))
        if bias:
            self.bias = Parameter(wrap(np.empty(out_features, np_dtype)))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


class ReLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.relu(input, self.inplace) if self.inplace else input.relu()

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return F.silu(input, self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Tanh(Module):
    def forward(self, input):
        return input.tanh()


class Sigmoid(Module):
    def forward(self, input):
        return input.sigmoid()


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim)


class Dropout(Module):
    """Inverted dropout in training mode (zero with probability ``p``, scale by 1/(1-p));
    the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Flatten(Module):
    """Flatten dims ``start_dim`` .. ``end_dim`` into one (``ViewBackward0``)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, input):
        return input.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size``."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be tuple of ints, but found type "
                            + type(unflattened_size).__name__)
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, input):
        shape = list(input.shape)
        d = self.dim + len(shape) if self.dim < 0 else self.dim
        return input.reshape(tuple(shape[:d]) + self.unflattened_size + tuple(shape[d + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


def _np_dtype(dtype):
    return np.float64 if dtype is None else getattr(dtype, "np", dtype)


class LayerNorm(Module):
    """Normalise over the last dims ``normalized_shape`` (mean 0, biased variance 1), then
    ``* weight + bias`` (initialised to ones and zeros)."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(wrap(np.ones(self.normalized_shape, _np_dtype(dtype))))
            if bias:
                self.bias = Parameter(wrap(np.zeros(self.normalized_shape, _np_dtype(dtype))))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}, bias={self.bias is not None}")


class Embedding(Module):
    """A table of ``num_embeddings`` vectors of size ``embedding_dim``, initialised from
    N(0, 1) (the row ``padding_idx`` zero, and it gets no gradient)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None:
            if padding_idx > 0:
                assert padding_idx < num_embeddings, "Padding_idx must be within num_embeddings"
            elif padding_idx < 0:
                assert padding_idx >= -num_embeddings, "Padding_idx must be within num_embeddings"
                padding_idx = num_embeddings + padding_idx
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            self.weight = Parameter(
                wrap(np.empty((num_embeddings, embedding_dim), _np_dtype(dtype))),
                requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            w = np.array(self.weight._value)
            w[self.padding_idx] = 0.0
            set_value(self.weight, w)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq is not False:
            s += ", scale_grad_by_freq=True"
        if self.sparse is not False:
            s += ", sparse=True"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None,
                        norm_type=2.0, scale_grad_by_freq=False, sparse=False):
        """An ``Embedding`` holding ``embeddings`` (2-d); ``freeze``: no gradient."""
        if len(embeddings.shape) != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=embeddings, _freeze=freeze)


class _BatchNorm(Module):
    _dims: tuple = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        dt = _np_dtype(dtype)
        if affine:
            self.weight = Parameter(wrap(np.ones(num_features, dt)))
            if bias:
                self.bias = Parameter(wrap(np.zeros(num_features, dt)))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", wrap(np.zeros(num_features, dt)))
            self.register_buffer("running_var", wrap(np.ones(num_features, dt)))
            self.register_buffer("num_batches_tracked", wrap(np.array(0, np.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            set_value(self.num_batches_tracked, np.array(0, np.int64))

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            if self.bias is not None:
                init.zeros_(self.bias)

    def forward(self, input):
        ndim = len(input.shape)
        if ndim not in self._dims:
            raise ValueError(f"expected {'D or '.join(map(str, self._dims))}D input "
                             f"(got {ndim}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            n = int(self.num_batches_tracked._value) + 1
            set_value(self.num_batches_tracked, np.array(n, np.int64))
            factor = 1.0 / n if self.momentum is None else self.momentum
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs over all but the channel dim;
    running statistics (mean, unbiased variance) for evaluation, moved by ``momentum``
    (``None``: a cumulative average)."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) inputs over all but the channel dim."""
    _dims = (4,)


class GroupNorm(Module):
    """Normalise groups of channels of each sample, then ``* weight + bias`` per channel."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None,
                 dtype=None, *, bias=True):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.affine = affine
        dt = _np_dtype(dtype)
        if affine:
            self.weight = Parameter(wrap(np.ones(num_channels, dt)))
            if bias:
                self.bias = Parameter(wrap(np.zeros(num_channels, dt)))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, "
                f"affine={self.affine}, bias={self.bias is not None}")


class _InstanceNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False,
                 track_running_stats=False, device=None, dtype=None, *, bias=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device,
                         dtype, bias=bias)

    def forward(self, input):
        nd = len(input.shape)
        if nd not in (self._dims[0] - 1, self._dims[0]):
            raise ValueError(f"expected {self._dims[0] - 1}D or {self._dims[0]}D input "
                             f"(got {nd}D input)")
        unbatched = nd == self._dims[0] - 1
        x = input.unsqueeze(0) if unbatched else input
        y = F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            self.momentum if self.momentum is not None else 0.0, self.eps)
        return y.squeeze(0) if unbatched else y


class InstanceNorm1d(_InstanceNorm):
    """Instance normalisation of (N, C, L) [or (C, L)] inputs."""
    _dims = (3,)


class InstanceNorm2d(_InstanceNorm):
    """Instance normalisation of (N, C, H, W) [or (C, H, W)] inputs."""
    _dims = (4,)


class Upsample(Module):
    """``F.interpolate`` with fixed ``size`` or ``scale_factor``, ``mode`` and
    ``align_corners``."""

    def __init__(self, size=None, scale_factor=None, mode="nearest", align_corners=None,
                 recompute_scale_factor=None):
        super().__init__()
        self.name = type(self).__name__
        self.size = size
        self.scale_factor = float(scale_factor) if isinstance(scale_factor, (int, float)) \
            else (tuple(float(f) for f in scale_factor) if scale_factor else None)
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, input):
        return F.interpolate(input, self.size, self.scale_factor, self.mode, self.align_corners,
                             recompute_scale_factor=self.recompute_scale_factor)

    def extra_repr(self):
        if self.scale_factor is not None:
            info = f"scale_factor={self.scale_factor!r}"
        else:
            info = f"size={self.size!r}"
        return info + f", mode={self.mode!r}"


class UpsamplingNearest2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    def __init__(self, size=None, scale_factor=None):
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)


class PixelShuffle(Module):
    def __init__(self, upscale_factor):
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, input):
        return F.pixel_shuffle(input, self.upscale_factor)

    def extra_repr(self):
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor):
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, input):
        return F.pixel_unshuffle(input, self.downscale_factor)

    def extra_repr(self):
        return f"downscale_factor={self.downscale_factor}"


def _ntuple(v, n):
    return tuple(v) if isinstance(v, (tuple, list)) else (v,) * n


class _ConvNd(Module):
    _nd = 0

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 dilation=1, groups=1, bias=True, padding_mode="zeros", device=None,
                 dtype=None):
        super().__init__()
        n = self._nd
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'same', 'valid'}")
            if padding == "same" and any(s != 1 for s in _ntuple(stride, n)):
                raise ValueError("padding='same' is not supported for strided convolutions")
        if padding_mode not in ("zeros", "reflect", "replicate", "circular"):
            raise ValueError(f"padding_mode must be one of ['zeros', 'reflect', 'replicate', "
                             f"'circular'], but got padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _ntuple(kernel_size, n), _ntuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _ntuple(padding, n)
        self.dilation, self.groups = _ntuple(dilation, n), groups
        self.transposed, self.output_padding = False, (0,) * n
        self.padding_mode = padding_mode
        dt = _np_dtype(dtype)
        self.weight = Parameter(wrap(np.empty(self._weight_shape(), dt)))
        if bias:
            self.bias = Parameter(wrap(np.empty(out_channels, dt)))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def _weight_shape(self):
        return (self.out_channels, self.in_channels // self.groups) + self.kernel_size

    def reset_parameters(self):
        # PyTorch's: kaiming_uniform_(a=sqrt(5)), i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
        # and the bias from the same range; the fan-in is read off the weight's layout
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = int(np.prod(self.weight.shape[1:]))
            if fan_in != 0:
                bound = 1.0 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.kernel_size):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _conv(self, conv, input):
        if self.padding_mode == "zeros":
            return conv(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)
        # PyTorch's: pad in the mode (last dim first), then a convolution without padding
        if isinstance(self.padding, str):
            total = [0 if self.padding == "valid" else d * (k - 1)
                     for k, d in zip(self.kernel_size, self.dilation)]
            pairs = [(t // 2, t - t // 2) for t in total]
        else:
            pairs = [(p, p) for p in self.padding]
        amounts = tuple(a for lo_hi in reversed(pairs) for a in lo_hi)
        return conv(F.pad(input, amounts, mode=self.padding_mode), self.weight, self.bias,
                    self.stride, 0, self.dilation, self.groups)


class Conv1d(_ConvNd):
    """1-d convolution (cross-correlation) of (N, C, L) inputs."""
    _nd = 1

    def forward(self, input):
        return self._conv(F.conv1d, input)


class Conv2d(_ConvNd):
    """2-d convolution (cross-correlation) of (N, C, H, W) inputs."""
    _nd = 2

    def forward(self, input):
        return self._conv(F.conv2d, input)


class Conv3d(_ConvNd):
    """3-d convolution (cross-correlation) of (N, C, D, H, W) inputs."""
    _nd = 3

    def forward(self, input):
        return self._conv(F.conv3d, input)


class _ConvTransposeNd(_ConvNd):
    """``ConvTranspose*d``: the weight is (in_channels, out_channels / groups, K...); the
    output grows by ``(n - 1) stride - 2 padding + dilation (k - 1) + output_padding + 1``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for '
                             f"{type(self).__name__}")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype)
        self.output_padding = _ntuple(output_padding, self._nd)
        self.transposed = True

    def _weight_shape(self):
        return (self.in_channels, self.out_channels // self.groups) + self.kernel_size

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * len(self.kernel_size):
            s += f", padding={self.padding}"
        if self.dilation != (1,) * len(self.dilation):
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * len(self.output_padding):
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        n = self._nd
        size = list(output_size)[-n:]
        spatial = tuple(input.shape)[-n:]
        out = []
        for i in range(n):
            least = ((spatial[i] - 1) * self.stride[i] - 2 * self.padding[i]
                     + self.dilation[i] * (self.kernel_size[i] - 1) + 1)
            extra = size[i] - least
            top = least + max(self.stride[i], self.dilation[i]) - 1
            if not 0 <= extra <= top - least:
                raise ValueError(f"requested an output size of {size}, but valid sizes range "
                                 f"from {least} to {top}")
            out.append(extra)
        return tuple(out)


class ConvTranspose1d(_ConvTransposeNd):
    """The transposed 1-d convolution (the gradient of a convolution in its input)."""
    _nd = 1

    def forward(self, input, output_size=None):
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose2d(_ConvTransposeNd):
    """The transposed 2-d convolution (the gradient of a convolution in its input)."""
    _nd = 2

    def forward(self, input, output_size=None):
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class ConvTranspose3d(_ConvTransposeNd):
    """The transposed 3-d convolution (the gradient of a convolution in its input)."""
    _nd = 3

    def forward(self, input, output_size=None):
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding,
                                  self._output_padding(input, output_size), self.groups,
                                  self.dilation)


class _MaxPoolNd(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool1d(_MaxPoolNd):
    def forward(self, input):
        return F.max_pool1d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class MaxPool2d(_MaxPoolNd):
    def forward(self, input):
        return F.max_pool2d(input, self.kernel_size, self.stride, self.padding, self.dilation,
                            ceil_mode=self.ceil_mode, return_indices=self.return_indices)


class AvgPool1d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True):
        super().__init__()
        self.kernel_size = _ntuple(kernel_size, 1)
        self.stride = _ntuple(stride if stride is not None else kernel_size, 1)
        self.padding = _ntuple(padding, 1)
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    _fn = None

    def __init__(self, output_size, return_indices=False):
        super().__init__()
        self.output_size = output_size
        if return_indices:
            self.return_indices = return_indices

    def forward(self, input):
        return type(self)._fn(input, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    """Means over ``output_size`` adaptive windows (PyTorch's windows)."""
    _fn = staticmethod(F.adaptive_avg_pool1d)


class AdaptiveAvgPool2d(_AdaptivePool):
    """Means over an ``output_size`` grid of adaptive windows (PyTorch's windows)."""
    _fn = staticmethod(F.adaptive_avg_pool2d)


class AdaptiveMaxPool1d(_AdaptivePool):
    """Maxima over ``output_size`` adaptive windows."""
    _fn = staticmethod(F.adaptive_max_pool1d)


class AdaptiveMaxPool2d(_AdaptivePool):
    """Maxima over an ``output_size`` grid of adaptive windows."""
    _fn = staticmethod(F.adaptive_max_pool2d)


class Unfold(Module):
    """The sliding blocks of (N, C, H, W) inputs as columns (``F.unfold``)."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def forward(self, input):
        return F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Unfold):
    """Blocks summed back into (N, C, *output_size) (``F.fold``)."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__(kernel_size, dilation, padding, stride)
        self.output_size = output_size

    def forward(self, input):
        return F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                      self.stride)

    def extra_repr(self):
        return f"output_size={self.output_size}, " + super().extra_repr()


class _DropoutNd(Dropout):
    _fn = None

    def forward(self, input):
        return type(self)._fn(input, self.p, self.training, self.inplace)


class Dropout1d(_DropoutNd):
    """Zero whole channels of (N, C, L) inputs with probability ``p`` in training."""
    _fn = staticmethod(F.dropout1d)


class Dropout2d(_DropoutNd):
    """Zero whole channels of (N, C, H, W) inputs with probability ``p`` in training."""
    _fn = staticmethod(F.dropout2d)


class Dropout3d(_DropoutNd):
    """Zero whole channels of (N, C, D, H, W) inputs with probability ``p`` in training."""
    _fn = staticmethod(F.dropout3d)


class _Inplace(Module):
    """An activation with an ``inplace`` flag (the result written into the input)."""
    _fn = None

    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input, inplace=self.inplace)

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU6(_Inplace):
    _fn = staticmethod(F.relu6)


class SELU(_Inplace):
    _fn = staticmethod(F.selu)


class Mish(_Inplace):
    _fn = staticmethod(F.mish)


class Hardswish(_Inplace):
    _fn = staticmethod(F.hardswish)


class Hardsigmoid(_Inplace):
    _fn = staticmethod(F.hardsigmoid)


class _Plain(Module):
    _fn = None

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return type(self)._fn(input)


class Softsign(_Plain):
    _fn = staticmethod(F.softsign)


class LogSigmoid(_Plain):
    _fn = staticmethod(F.logsigmoid)


class Tanhshrink(_Plain):
    _fn = staticmethod(F.tanhshrink)


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None,
                 max_value=None):
        super().__init__()
        self.min_val = min_val if min_value is None else min_value
        self.max_val = max_val if max_value is None else max_value
        self.inplace = inplace
        if self.max_val <= self.min_val:
            raise AssertionError("max_val must be greater than min_val")

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self):
        return (f"min_val={self.min_val}, max_val={self.max_val}"
                + (", inplace=True" if self.inplace else ""))


class CELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class Softmin(Softmax):
    def forward(self, input):
        return F.softmin(input, self.dim)


class _Shrink(Module):
    _fn = None

    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return type(self)._fn(input, self.lambd)

    def extra_repr(self):
        return str(self.lambd)


class Softshrink(_Shrink):
    _fn = staticmethod(F.softshrink)


class Hardshrink(_Shrink):
    _fn = staticmethod(F.hardshrink)


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value, self.inplace = threshold, value, inplace

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self):
        return (f"threshold={self.threshold}, value={self.value}"
                + (", inplace=True" if self.inplace else ""))


class GLU(Module):
    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class PReLU(Module):
    """``x`` where ``x >= 0``, else ``weight * x``; ``weight`` (one, or one per channel)
    starts at ``init``."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters, self.init = num_parameters, init
        self.weight = Parameter(
            wrap(np.full(num_parameters, float(init), _np_dtype(dtype))))

    def reset_parameters(self):
        init.constant_(self.weight, self.init)

    def forward(self, input):
        return F.prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class CosineSimilarity(Module):
    def __init__(self, dim=1, eps=1e-8):
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1, x2):
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p=2.0, eps=1e-6, keepdim=False):
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1, x2):
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# -- losses -------------------------------------------------------------------------------
class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction="mean"):
        super().__init__()
        self.reduction = reduction


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", beta=1.0):
        super().__init__(reduction=reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction="mean", delta=1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction="mean", log_target=False):
        super().__init__(reduction=reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class SoftMarginLoss(_Loss):
    def forward(self, input, target):
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class MultiMarginLoss(_Loss):
    def __init__(self, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(reduction=reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.dim() != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{weight.dim()}D instead")
        self.p, self.margin = p, margin
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.multi_margin_loss(input, target, p=self.p, margin=self.margin,
                                   weight=self.weight, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction=reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.multilabel_soft_margin_loss(input, target, weight=self.weight,
                                             reduction=self.reduction)


class _MarginLoss(_Loss):
    _default_margin = 0.0

    def __init__(self, margin=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction=reduction)
        self.margin = self._default_margin if margin is None else margin


class MarginRankingLoss(_MarginLoss):
    def forward(self, input1, input2, target):
        return F.margin_ranking_loss(input1, input2, target, self.margin,
                                     reduction=self.reduction)


class HingeEmbeddingLoss(_MarginLoss):
    _default_margin = 1.0

    def forward(self, input, target):
        return F.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class CosineEmbeddingLoss(_MarginLoss):
    def forward(self, input1, input2, target):
        return F.cosine_embedding_loss(input1, input2, target, self.margin,
                                       reduction=self.reduction)


class PoissonNLLLoss(_Loss):
    def __init__(self, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                 reduction="mean"):
        super().__init__(reduction=reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input, target):
        return F.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                  reduction=self.reduction)


class GaussianNLLLoss(_Loss):
    def __init__(self, *, full=False, eps=1e-6, reduction="mean"):
        super().__init__(reduction=reduction)
        self.full, self.eps = full, eps

    def forward(self, input, target, var):
        return F.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class TripletMarginLoss(_Loss):
    def __init__(self, margin=1.0, p=2.0, eps=1e-6, swap=False, size_average=None, reduce=None,
                 reduction="mean"):
        super().__init__(reduction=reduction)
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps,
                                     self.swap, reduction=self.reduction)


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean", label_smoothing=0.0):
        super().__init__(reduction=reduction)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_Loss):
    def __init__(self, weight=None, size_average=None, ignore_index=-100, reduce=None,
                 reduction="mean"):
        super().__init__(reduction=reduction)
        self.ignore_index = ignore_index
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class BCELoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean"):
        super().__init__(reduction=reduction)
        self.register_buffer("weight", weight)

    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight, reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction="mean",
                 pos_weight=None):
        super().__init__(reduction=reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, weight=self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)



# -- modules of the functionals added with PyTorch's names (session 38) -----------------------
class RMSNorm(Module):
    """``x / sqrt(mean(x**2 over normalized_shape) + eps) * weight`` (weight initialised to
    ones; ``eps`` None: the dtype's machine epsilon)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None,
                 dtype=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(wrap(np.ones(self.normalized_shape, _np_dtype(dtype))))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self):
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class Bilinear(Module):
    """``y_k = x1^T W_k x2 + b_k``; weight (out, in1, in2) and bias from
    U(-1/sqrt(in1), 1/sqrt(in1)), as PyTorch's."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        np_dtype = _np_dtype(dtype)
        self.weight = Parameter(wrap(np.empty((out_features, in1_features, in2_features),
                                              np_dtype)))
        if bias:
            self.bias = Parameter(wrap(np.empty(out_features, np_dtype)))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1.0 / math.sqrt(self.in1_features) if self.in1_features else 0.0
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class AlphaDropout(Dropout):
    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training, self.inplace)


class FeatureAlphaDropout(Dropout):
    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training, self.inplace)


class RReLU(Module):
    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace
                                                          else "")


class Softmax2d(Module):
    """Softmax over the channels (dim -3) of a (C, H, W) or (N, C, H, W) input."""

    def forward(self, input):
        if input.ndim not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.ndim}D "
                             "instead")
        return F.softmax(input, -3)


class ChannelShuffle(Module):
    def __init__(self, groups):
        super().__init__()
        self.groups = groups

    def forward(self, input):
        return F.channel_shuffle(input, self.groups)

    def extra_repr(self):
        return f"groups={self.groups}"


class _LPPool(Module):
    def __init__(self, norm_type, kernel_size, stride=None, ceil_mode=False):
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def extra_repr(self):
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPool):
    def forward(self, input):
        return F.lp_pool1d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LPPool2d(_LPPool):
    def forward(self, input):
        return F.lp_pool2d(input, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)


class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"


class TripletMarginWithDistanceLoss(_Loss):
    def __init__(self, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        self.distance_function = distance_function if distance_function is not None else \
            PairwiseDistance()
        self.margin, self.swap = margin, swap

    def forward(self, anchor, positive, negative):
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)


class EmbeddingBag(Module):
    """``num_embeddings`` vectors of size ``embedding_dim`` (N(0, 1); the row ``padding_idx``
    zero) summed, averaged or maxed per bag (``functional.embedding_bag``)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, mode="mean", sparse=False, _weight=None,
                 include_last_offset=False, padding_idx=None, device=None, dtype=None):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.mode, self.sparse = scale_grad_by_freq, mode, sparse
        self.include_last_offset = include_last_offset
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            self.weight = Parameter(wrap(np.empty((num_embeddings, embedding_dim),
                                                  _np_dtype(dtype))))
            self.reset_parameters()
        else:
            self.weight = Parameter(_weight)

    reset_parameters = Embedding.reset_parameters

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type,
                               self.scale_grad_by_freq, self.mode, self.sparse,
                               per_sample_weights, self.include_last_offset, self.padding_idx)

    def extra_repr(self):
        out = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.max_norm is not None:
            out += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            out += f", norm_type={self.norm_type}"
        if self.scale_grad_by_freq:
            out += f", scale_grad_by_freq={self.scale_grad_by_freq}"
        out += f", mode={self.mode!r}"
        if self.padding_idx is not None:
            out += f", padding_idx={self.padding_idx}"
        return out


class LazyLinear(Linear):
    """``Linear`` whose ``in_features`` is the last dim of its first input: its weight and
    bias are empty tensors until then, filled in place (the same tensors, so an optimizer
    made before holds them) and initialised as ``Linear``'s; the module then is a
    ``Linear``, as PyTorch's."""

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        Module.__init__(self)
        self.in_features, self.out_features = 0, out_features
        self._dtype = _np_dtype(dtype)
        self.weight = Parameter(wrap(np.empty(0, self._dtype)))
        if bias:
            self.bias = Parameter(wrap(np.empty(0, self._dtype)))
        else:
            self.register_parameter("bias", None)

    def reset_parameters(self):
        if self.in_features:
            Linear.reset_parameters(self)

    def forward(self, input):
        self.in_features = input.shape[-1]
        self.weight.data = wrap(np.empty((self.out_features, self.in_features), self._dtype))
        if self.bias is not None:
            self.bias.data = wrap(np.empty(self.out_features, self._dtype))
        Linear.reset_parameters(self)
        del self._dtype
        self.__class__ = Linear   # (PyTorch's cls_to_become)
        return Linear.forward(self, input)


__all__ += ["Conv3d", "ConvTranspose3d", "Buffer", "LazyLinear", "EmbeddingBag", "RMSNorm", "Bilinear", "AlphaDropout", "FeatureAlphaDropout", "RReLU", "Softmax2d",
            "ChannelShuffle", "LPPool1d", "LPPool2d", "LocalResponseNorm",
            "TripletMarginWithDistanceLoss"]
