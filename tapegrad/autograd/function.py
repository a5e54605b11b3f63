"""Custom differentiable operations: subclass ``Function`` with static ``forward(ctx, ...)``
and ``backward(ctx, *grads)``, call ``MyFn.apply(...)``.  The op takes part in the tape as a
``pyfunc`` entry whose backward calls yours; its node is named ``MyFnBackward``."""
from __future__ import annotations

import numpy as np

from ..core.grad_mode import no_grad
from ..core.pyop import record
from ..core.tape import recording
from ..core.tensor import Tensor, tensor_of_entry, wrap


def _versions(tensors):
    """What tells a saved tensor's later in-place change: its value and the version of
    that value's memory."""
    return tuple(None if t is None else (id(t._value), getattr(t, "_version", 0))
                 for t in tensors)


class FunctionCtx:
    """The ``ctx`` passed to ``forward`` and ``backward``."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._versions = ()

    def save_for_backward(self, *tensors):
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError("save_for_backward can only save variables, but argument "
                                f"{len(self._saved)} is of type {type(t).__name__}")
        self._saved = tensors
        self._versions = _versions(tensors)

    def _saved_outputs_are(self, outs, results):
        """Saved forward outputs stand for the recorded results (so that a create_graph
        backward differentiates through them, as PyTorch's saved outputs do)."""
        swap = {id(o): r for o, r in zip(outs, results)}
        self._saved = tuple(swap.get(id(t), t) for t in self._saved)
        self._versions = _versions(self._saved)

    @property
    def saved_tensors(self):
        for k, (t, version) in enumerate(zip(self._saved, self._versions)):
            if t is not None and _versions((t,))[0] != version:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: saved tensor {k} of a custom Function was "
                    "changed after it was saved. "
                    "Hint: the gradient would be wrong, so it is not computed; avoid the "
                    "in-place operation or clone the tensor first.")
        return tuple(self._saved)

    def mark_non_differentiable(self, *tensors):
        pass

    def set_materialize_grads(self, value):
        pass


def _shape_str(shape):
    return "[" + ", ".join(str(n) for n in shape) + "]"


class Function:
    """Base class of custom autograd operations (see the module docstring)."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom "
                                  "autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement either the backward or vjp method for "
                                  "your custom autograd.Function to use it with backward mode AD.")

    @classmethod
    def apply(cls, *args):
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with no_grad():
            out = cls.forward(ctx, *args)
        is_tuple = isinstance(out, tuple)
        outs = out if is_tuple else (out,)
        T = recording()
        if T is None or not any(needs):
            return out
        name = f"{cls.__name__}Backward"
        tensor_outs = [o if isinstance(o, Tensor) else wrap(np.asarray(o)) for o in outs]
        refs = [(a._entry if a._tape is T else T._ref(a)) if n else -1 for a, n in zip(args, needs)]

        def backward_fn(grads_out):
            # grads_out are tensors; under create_graph=True they are recorded, and so is
            # what backward computes from them and the saved tensors (as in PyTorch)
            gs = cls.backward(ctx, *grads_out)
            gs = gs if isinstance(gs, tuple) else (gs,)
            if len(gs) != len(args):
                raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                                   f"(expected {len(args)}, got {len(gs)})")
            result = []
            for k, (a, g, n) in enumerate(zip(args, gs, needs)):
                if g is None or not n:
                    result.append(None)
                    continue
                if not isinstance(g, Tensor):
                    g = wrap(np.asarray(g, dtype=np.float64))
                gshape = tuple(g.shape)
                if gshape != tuple(a.shape):
                    try:
                        np.broadcast_to(np.zeros(gshape), a.shape)
                        ok = np.prod(gshape, dtype=int) == a.numel()
                    except ValueError:
                        ok = False
                    if not ok:
                        raise RuntimeError(f"Function {name} returned an invalid gradient at index "
                                           f"{k} - got {_shape_str(gshape)} but expected shape "
                                           f"compatible with {_shape_str(a.shape)}")
                    g = g.reshape(tuple(a.shape))
                result.append(g)
            return result

        idx = record(T, name, refs, [o._value for o in tensor_outs], backward_fn)
        res = tuple(tensor_of_entry(T, i, o._value) for i, o in zip(idx, tensor_outs))
        ctx._saved_outputs_are(tensor_outs, res)
        return res if is_tuple else res[0]
