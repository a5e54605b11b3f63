"""Custom differentiable operations, as PyTorch's ``torch.autograd.Function``.

Subclass ``Function`` with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``
(or, PyTorch 2 style, a ctx-less ``forward(*args)`` plus ``setup_context(ctx, inputs,
output)``) and call ``MyFn.apply(...)``.  ``forward`` runs with grad mode off; the op takes
part in the tape as one ``pyfunc`` entry whose backward calls yours (with grad mode on under
``create_graph=True``, so a backward written in tensor ops can be differentiated again).
Its node is named ``MyFnBackward``.  ``once_differentiable`` marks a backward that cannot.
"""
from __future__ import annotations

import functools
import inspect
import warnings

import numpy as np

from ..core.grad_mode import is_grad_enabled, no_grad
from ..core.pyop import record
from ..core.tape import SECOND_BACKWARD, Tape, recording
from ..core.tensor import Tensor, tensor_of_entry, wrap
from ..ops.array_ops import sum_to
from .forward_ad import function_jvp, primal
from .graph import pack_saved, unpack_saved


def _versions(tensors):
    """What tells a saved tensor's later in-place change: its value and the version of
    that value's memory."""
    return tuple(None if t is None else (id(t._value), getattr(t, "_version", 0))
                 for t in tensors)


class FunctionCtx:
    """The ``ctx`` passed to ``forward`` (or ``setup_context``) and ``backward``."""

    def __init__(self, needs_input_grad=()):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._versions = ()
        self._packed = None       # (unpack, packed values) under saved_tensors_hooks
        self._dirty = ()
        self._non_differentiable = ()
        self._materialize = True
        self._released = False

    def save_for_backward(self, *tensors):
        """Keep ``tensors`` for ``backward`` (read back as ``ctx.saved_tensors``)."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{len(self._saved)} is of type {type(t).__name__}")
        self._saved = tensors
        self._versions = _versions(tensors)

    def save_for_forward(self, *tensors):
        self.saved_for_forward = tensors

    def _saved_outputs_are(self, outs, results):
        """Saved forward outputs stand for the recorded results (so that a create_graph
        backward differentiates through them, as PyTorch's saved outputs do)."""
        swap = {id(o): r for o, r in zip(outs, results)}
        self._saved = tuple(swap.get(id(t), t) for t in self._saved)
        self._versions = _versions(self._saved)
        for name, v in list(vars(self).items()):   # ctx.result = result, as PyTorch's
            if not name.startswith("_") and id(v) in swap:
                setattr(self, name, swap[id(v)])

    def _pack(self):
        """Run the active ``saved_tensors_hooks`` pack hook on every saved tensor."""
        packed = pack_saved(self._saved)
        if packed is not None:
            self._packed = packed

    def release(self):
        """A backward freed the graph: the saved tensors go (reading them raises)."""
        self._released = True
        self._saved, self._versions, self._packed = (), (), None

    @property
    def saved_tensors(self):
        if self._released:
            raise RuntimeError(SECOND_BACKWARD)
        for k, (t, version) in enumerate(zip(self._saved, self._versions)):
            if t is not None and _versions((t,))[0] != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: saved tensor {k} of a custom Function was "
                    "changed after it was saved. "
                    "Hint: the gradient would be wrong, so it is not computed; avoid the "
                    "in-place operation or clone the tensor first.")
        if self._packed is not None:
            return unpack_saved(self._packed)
        return tuple(self._saved)

    saved_variables = saved_tensors

    def mark_dirty(self, *tensors):
        """``forward`` changed these inputs in place and returns them."""
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors):
        """These outputs do not require grad; their gradient in ``backward`` is zeros (or
        None without materialized gradients)."""
        self._non_differentiable = tensors

    def set_materialize_grads(self, value):
        """False: ``backward`` gets None, not zeros, for an output that got no gradient."""
        self._materialize = bool(value)


def _shape_str(shape):
    return "[" + ", ".join(str(n) for n in shape) + "]"


def _expandable(shape, to):
    """Whether ``shape`` broadcasts to ``to`` (PyTorch's is_expandable_to)."""
    if len(shape) > len(to):
        return False
    return all(a == b or a == 1 for a, b in zip(reversed(shape), reversed(to)))


def _has_setup_context(cls):
    return getattr(cls, "setup_context") is not Function.setup_context


def _bind(fn, args, kwargs, lead=()):
    bound = inspect.signature(fn).bind(*lead, *args, **kwargs)
    bound.apply_defaults()
    return tuple(bound.args[len(lead):])


class Function:
    """Base class of custom autograd operations (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        warnings.warn(f"{self.__class__} should not be instantiated. Methods on autograd "
                      "functions are all static, so you should invoke them on the class "
                      "itself. Instantiating an autograd function will raise an error in a "
                      "future version of PyTorch.", DeprecationWarning, stacklevel=2)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(
            "Legacy autograd function with non-static forward method is deprecated. Please "
            "use new-style autograd function with static forward method. (Example: "
            "https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode AD.")

    @classmethod
    def vjp(cls, ctx, *grad_outputs):
        return cls.backward(ctx, *grad_outputs)

    @staticmethod
    def jvp(ctx, *grad_inputs):
        raise NotImplementedError("You must implement the jvp function for custom "
                                  "autograd.Function to use it with forward mode AD.")

    @classmethod
    def apply(cls, *args, **kwargs):
        new_style = _has_setup_context(cls)
        if new_style:
            args = _bind(cls.forward, args, kwargs)
        elif kwargs:
            args = _bind(cls.forward, args, kwargs, lead=(None,))
        duals = args
        args = tuple(primal(a) for a in args)   # forward mode: forward sees the primals
        out, ctx = cls._apply(args, new_style)
        return function_jvp(cls, ctx, duals, out)

    @classmethod
    def _apply(cls, args, new_style):
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with no_grad():
            if new_style:
                out = cls.forward(*args)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args)
        T = recording()
        if T is None or not any(needs):
            return out, ctx
        return _record_function(cls, ctx, args, needs, out, T), ctx


def _record_function(cls, ctx, args, needs, out, T):
    """Record the call as one ``pyfunc`` entry; the outputs that require grad stand for it."""
    name = f"{cls.__name__}Backward"
    is_tuple = isinstance(out, tuple)
    outs = out if is_tuple else (out,)
    pos = [k for k, o in enumerate(outs) if isinstance(o, Tensor)]
    tensor_outs = [outs[k] for k in pos]
    shapes = [(tuple(o.shape), np.asarray(o._value).dtype) for o in tensor_outs]
    non_diff = {id(t) for t in ctx._non_differentiable}
    dirty = {id(t) for t in ctx._dirty}
    for t in ctx._dirty:
        if t.requires_grad and t.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad has been used in an "
                               "in-place operation.")
    refs = [(a._entry if a._tape is T else T._ref(a)) if n else -1 for a, n in zip(args, needs)]
    backward_fn = _backward_fn(cls, ctx, args, needs, shapes, name)
    backward_fn.ctx = ctx     # the node's attributes are the ctx's, as in PyTorch
    idx = record(T, name, refs, [o._value for o in tensor_outs], backward_fn)
    results = []
    for i, o in zip(idx, tensor_outs):
        differentiable = id(o) not in non_diff and o.dtype.is_floating_point
        if id(o) in dirty:          # changed in place: the input now stands for this entry
            old = o._tape
            if old.__class__ is Tape:
                old._dirty.append((o._entry, len(old)))
            if differentiable:
                o._tape, o._entry = T, i
            results.append(o)
        elif differentiable:
            results.append(tensor_of_entry(T, i, o._value))
        else:
            results.append(o if o._tape is None else wrap(o._value))
    ctx._saved_outputs_are(tensor_outs, results)
    ctx._pack()
    full = list(outs)
    for k, r in zip(pos, results):
        full[k] = r
    return tuple(full) if is_tuple else full[0]


def _backward_fn(cls, ctx, args, needs, shapes, name):
    def backward_fn(grads_out):
        # grads_out are tensors (None: an output no gradient reached); under
        # create_graph=True they are recorded, and so is what backward computes from them
        # and the saved tensors (as in PyTorch)
        grads = [g if g is not None or not ctx._materialize else wrap(np.zeros(*s))
                 for g, s in zip(grads_out, shapes)]
        gs = cls.vjp(ctx, *grads)     # backward, or a vjp defined instead (PyTorch's alias)
        gs = tuple(gs) if isinstance(gs, (tuple, list)) else (gs,)
        if len(gs) > len(args) and all(g is None for g in gs[len(args):]):
            gs = gs[:len(args)]      # extra trailing Nones are accepted, as in PyTorch
        if len(gs) != len(args):
            raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                               f"(expected {len(args)}, got {len(gs)})")
        result = []
        for k, (a, g, n) in enumerate(zip(args, gs, needs)):
            if g is not None and not isinstance(a, Tensor):
                raise RuntimeError(f"function {name} returned a gradient different than None "
                                   f"at position {k + 1}, but the corresponding forward input "
                                   "was not a Variable")
            if g is None or not n:
                result.append(None)
                continue
            if not isinstance(g, Tensor):
                g = wrap(np.asarray(g, dtype=np.float64))
            gshape, ashape = tuple(g.shape), tuple(a.shape)
            if gshape != ashape:
                if not _expandable(ashape, gshape):
                    raise RuntimeError(f"Function {name} returned an invalid gradient at index "
                                       f"{k} - got {_shape_str(gshape)} but expected shape "
                                       f"compatible with {_shape_str(ashape)}")
                g = sum_to(g, ashape)
            result.append(g)
        return result
    return backward_fn


_ONCE = ("trying to differentiate twice a function that was marked with "
         "@once_differentiable")


def once_differentiable(fn):
    """Decorate a ``backward`` that is not differentiable: it runs with grad mode off, and
    a ``create_graph`` gradient through it raises when differentiated again (PyTorch's)."""
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not is_grad_enabled():
            return outputs
        if not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            return outputs
        T = recording()
        single = not isinstance(outputs, tuple)
        outs = (outputs,) if single else outputs
        # as PyTorch: each output becomes the output of an error node over a detached leaf
        # copy, so a second backward that reaches it raises
        tensors = [o for o in outs if isinstance(o, Tensor)]
        fakes = [wrap(o._value, requires_grad=True) for o in tensors]
        idx = record(T, "torch::autograd::Error", [T._ref(f) for f in fakes],
                     [o._value for o in tensors], _raise_once)
        it = iter(tensor_of_entry(T, i, o._value) for i, o in zip(idx, tensors))
        res = tuple(next(it) if isinstance(o, Tensor) else o for o in outs)
        return res[0] if single else res
    return wrapper


def _raise_once(grads):
    raise RuntimeError(_ONCE)


class InplaceFunction(Function):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace
