"""``Tensor``: a value plus, when it requires grad, its place on a tape.

The slots (the recording fast paths read them for every op):

- ``_value``: a Python float for a 0-d float64 tensor (the fast path), else a NumPy array;
- ``_tape``: None when the tensor does not require grad, ``_UNREG`` for a leaf that
  requires grad but is on no tape yet, else the Tape whose entry is this tensor;
- ``_entry``: that entry's index;
- ``_comparison``: for a comparison result, the ``(tape, entry)`` that recorded it (a guard
  source);
- ``_grad``, ``_hooks``, ``_retains``: ``.grad``, leaf hooks, ``retain_grad()``.

A leaf is a tensor whose entry is a ``leaf`` entry (or that has none).  This module also
holds the elementwise dispatch that the generated fast paths (``elementwise.py``) fall back
to: arrays, mixed dtypes, broadcasting, comparisons.
"""
from __future__ import annotations

import math
import os
import sys
import warnings
from typing import Callable, Optional, Union

import numpy as np

from . import interrupts, optable
from .forward import ARRAY_FORWARD, SCALAR_FORWARD
from .dtypes import (Size, bool_, dtype, dtype_of, float16, float32, float64, int8, int16,
                     int32, int64, scalar_type_name, uint8)
from .graph import node_for
from .broadcast_loops import broadcast_arith
from .printing import format_value
from .shapes import broadcast_error, broadcast_view, laid_out, wrap_dim
from .pyop import record_broadcast
from .tape import (ARRAY_CHUNK, LARGE_ARRAY, ARG, CONST, UNREGISTERED_LEAF, Tape, boot,
                   keep_saved, next_tape, rec_get, recording, thread_state)
from .views import forget_views, register_detached

import builtins as _b  # noqa: E402  (methods named float/int/... below read the builtins)

_new = object.__new__
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # tapegrad/
_UNREG = UNREGISTERED_LEAF   # marker: a leaf that requires grad, not yet on a tape


def as_float64(v):
    """Float64 array ``v`` (its dtype equal to float64's, not NumPy's float64 dtype object:
    an array made inside a kernel loaded from Numba's cache, or unpickled) as a view with
    NumPy's own, which the fast paths test by identity (``dtype is _F64``): such a value
    took the general path at every op (k-means' ``min`` values: sum 6.3 -> 2.5 us)."""
    return v.view(_F64)


def wrap(v, requires_grad=False):
    """A new tensor holding value ``v`` (no autograd history)."""
    if v.__class__ is not float:
        if isinstance(v, np.ndarray):
            if v.ndim == 0 and v.dtype == np.float64:
                v = _b.float(v)
            elif v.dtype is not _F64 and v.dtype == _F64:
                v = as_float64(v)
        elif isinstance(v, np.floating) and v.dtype == np.float64:
            v = _b.float(v)
        else:
            v = np.asarray(v)
            if v.ndim == 0 and v.dtype == np.float64:
                v = _b.float(v)
    r = _new(Tensor)
    r._value = v
    r._tape = _UNREG if requires_grad else None
    r._grad = r._hooks = None
    return r


def tensor_of_entry(T, i, v):
    """The tensor standing for entry ``i`` of tape ``T``, with value ``v``."""
    r = _new(Tensor)
    r._value = v
    r._tape = T
    r._entry = i
    return r


def _record(T, code, refs, v):
    """Record elementwise op ``code`` with operand references ``refs`` on tape ``T``, the tape
    they were taken on (taking one may fill a chunk of the default tape, after which
    ``recording()`` is a fresh tape where these references mean other entries)."""
    if len(refs) == 3:
        rb = T._push(ARG, refs[1], refs[2], 0.0)
        i = T._push(code, refs[0], rb, v)
    else:
        i = T._push(code, refs[0], refs[1] if len(refs) > 1 else -1, v)
    r = _new(Tensor)   # (not Tensor(): that runs tg.Tensor(data)'s __init__)
    r._value = v
    r._tape = T
    r._entry = i
    return r


def _operand_ref(T, t, shape):
    """Reference from tape T to tensor/number ``t`` as an operand of an op with output
    ``shape``; array operands of another shape are broadcast by a recorded expand."""
    if isinstance(t, Tensor):
        v = t._value
        if t._tape is None:  # a constant tensor
            if shape == () or v.__class__ is float or v.size == 1:
                return T._const_t(_b.float(np.asarray(v).reshape(())) if v.__class__ is not float else v,
                                  t)
            if v.__class__ is not np.ndarray or v.dtype is not _F64:
                v = np.asarray(v, np.float64)
            # (the tensor's own array where it has the result's shape, as the fast paths
            # push it: a read-only view of it costs a copy in the walk, _elements)
            return T._push_const(t, v if v.shape == shape else broadcast_view(v, shape))
        r = t._entry if t._tape is T else T._ref(t)
        vshape = () if v.__class__ is float else v.shape
        if vshape != shape and vshape != ():  # 0-d operands broadcast in the sweep itself
            r = record_broadcast(T, r, v, shape)
        return r
    return T._const(t)


def _value_of(x, name, pos):
    if isinstance(x, Tensor):
        return x._value
    if isinstance(x, (bool, _b.int, _b.float)):
        return x
    if isinstance(x, (np.ndarray, np.number)):
        return x
    raise TypeError(f"{name}(): argument (position {pos}) must be Tensor or number, "
                    f"not {type(x).__name__}")


def _promote(a, b):
    """PyTorch's promoteTypes: a float type beats an integer or bool one (int64 with float16
    is float16); within a kind, as NumPy (uint8 with int8 is int16)."""
    if a is None or b is None:
        return b if a is None else a
    if (a.kind == "f") != (b.kind == "f"):
        return a if a.kind == "f" else b
    return np.promote_types(a, b)


def _combine(higher, lower):
    """PyTorch's combine_categories: a lower-priority operand counts only when it is of a
    higher category (bool < integer < float)."""
    if higher is None or lower is None:
        return lower if higher is None else higher
    if higher.kind == "f":
        return higher
    if higher.kind == "b" or lower.kind == "f":
        return _promote(higher, lower)
    return higher


def _result_dtype(args, vals):
    """NumPy dtype of an elementwise op's operands, by PyTorch's type promotion
    (``torch.result_type``): tensors with dimensions first, then 0-d tensors, then Python
    numbers, a later group counting only when of a higher category; a Python int is int64
    (so ``uint8 + 1`` stays uint8), a Python float the default float dtype (float64)."""
    groups = [None, None, None]
    for a, v in zip(args, vals):
        if isinstance(a, Tensor) or isinstance(a, (np.ndarray, np.generic)):
            k, dt = (1, _F64) if v.__class__ is float else ((0 if v.ndim else 1), v.dtype)
        elif isinstance(a, (bool, np.bool_)):
            k, dt = 2, _BOOL
        elif isinstance(a, _b.int):
            k, dt = 2, _I64
        else:
            k, dt = 2, _F64
        groups[k] = _promote(groups[k], dt)
    return _combine(groups[0], _combine(groups[1], groups[2]))


def result_dtype(*args):
    """PyTorch's ``result_type`` of tensors and Python numbers, as a NumPy dtype."""
    return _result_dtype(args, [a._value if isinstance(a, Tensor) else a for a in args])


_F64 = np.dtype(np.float64)
_I64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)
_NAN = math.nan
_ND = np.ndarray


def elementwise_fallback(code, args):
    """Every case the generated scalar fast paths do not take: arrays, float32, mixed.

    First a fast path for float64 arrays of one shape mixed with Python numbers and 0-d
    float64 tensors (the common array case; a 0-d operand broadcasts in the sweep itself,
    as ``_operand_ref`` records it): the NumPy ufunc runs without ``np.errstate`` (which costs more than the
    ufunc on small arrays), so NumPy may warn about inf/nan results there."""
    shape = None
    rg = False
    vals = []
    for a in args:
        c = a.__class__
        if c is Tensor:
            v = a._value
            if v.__class__ is _b.float:
                vals.append(v)
                if a._tape is not None:
                    rg = True
                continue
            if v.__class__ is not _ND or v.dtype is not _F64 or (shape is not None and v.shape != shape):
                break
            shape = v.shape
            vals.append(v)
            if a._tape is not None:
                rg = True
        elif c is _b.float or c is _b.int:
            vals.append(a)
        else:
            break
    else:
        if shape is not None and len(args) < 3:
            v = laid_out(_VF[code](*vals), vals)
            if not rg:
                return wrap(v)
            try:
                T = rec_get()
            except LookupError:
                T = boot()
            if T is None:
                return wrap(v)
            if T._retiring:
                T = next_tape(T, args)
            x = args[0]
            if x.__class__ is Tensor:
                t = x._tape
                ra = x._entry if t is T else T._ref(x) if t is not None else \
                    T._push_const(x, x._value) if x._value.__class__ is not _b.float else \
                    T._const_t(x._value, x)
            else:
                ra = T._cmap.get(x) or T._const(x)   # (a known number: its reference, never 0)
            rb = -1
            if len(args) == 2:
                y = args[1]
                if y.__class__ is Tensor:
                    t = y._tape
                    rb = y._entry if t is T else T._ref(y) if t is not None else \
                        T._push_const(y, y._value) if y._value.__class__ is not _b.float else \
                        T._const_t(y._value, y)
                else:
                    rb = T._cmap.get(y) or T._const(y)
            vs = T._rec_val
            n = len(vs)
            if n >= ARRAY_CHUNK or v.size >= LARGE_ARRAY:
                n = T._flush_array(v)
            i = T._base + n
            T._rec_op.append(code)
            T._rec_a.append(ra)
            T._rec_b.append(rb)
            vs.append(_NAN)
            T._arr[i] = v
            r = _new(Tensor)
            r._value = v
            r._tape = T
            r._entry = i
            return r
    if len(args) == 2:
        r = _broadcast_pair(code, args)
        if r is not None:
            return r
    return _generic_slow(code, args)


def _broadcast_pair(code, args):
    """``x op y`` for float64 arrays of two shapes that broadcast (``a[None, :] +
    b[:, None]``), or an array with a number or a 0-d float64 tensor the fast path above
    did not take: the ufunc, then the operands recorded as ``_operand_ref`` records them.
    None for anything else (other dtypes, comparisons used as numbers, shapes that do not
    broadcast: ``_generic_slow`` raises PyTorch's error), which ``_generic_slow`` handles.  As
    on the fast path above, the ufunc runs without ``np.errstate``."""
    vals = []
    rg = arrays = False
    for a in args:
        c = a.__class__
        if c is Tensor:
            v = a._value
            if v.__class__ is _ND:
                if v.dtype is not _F64:
                    return None
                arrays = True
            elif v.__class__ is not _b.float:
                return None
            if a._tape is not None:
                rg = True
            elif getattr(a, "_comparison", None) is not None:
                return None
        elif c is _b.float or c is _b.int:
            v = a
        else:
            return None
        vals.append(v)
    if not arrays:
        return None
    # (``x[:, None, :] - m[None, :, :]``, ``a[None, :] + b[:, None]``, a row or a column with
    # a matrix: NumPy's loop runs a short row at a time there)
    v = broadcast_arith(code, vals[0], vals[1]) if len(vals) == 2 else None
    if v is None:
        try:
            v = _VF[code](*vals)
        except (ValueError, OverflowError, TypeError):
            return None
    v = laid_out(v, vals)
    if v.__class__ is not _ND or v.dtype is not _F64 or not v.ndim:
        return None
    if not rg:
        return wrap(v)
    T = recording()
    if T is None:
        return wrap(v)
    if T._retiring:
        T = next_tape(T, args)
    shape = v.shape
    return _record(T, code, [_operand_ref(T, a, shape) for a in args], v)


def _generic_slow(code, args):
    for a in args:
        if a.__class__ is not Tensor:
            handler = getattr(a, "__tapegrad_elementwise__", None)
            if handler is not None:   # a tensor type that records ops its own way (tg.compile)
                return handler(code, args)
    op = optable.OPS[code]
    first = 1 if op.name == "where" else 0
    if not isinstance(args[first], Tensor) and not any(isinstance(a, Tensor) for a in args):
        raise TypeError(f"{op.name}(): argument 'input' (position {first + 1}) must be Tensor, "
                        f"not {type(args[first]).__name__}")
    vals = [_value_of(a, op.name, k + 1) for k, a in enumerate(args)]
    for a, v in zip(args, vals):
        if isinstance(a, Tensor) and a._tape is not None and op.name == "where" and a is args[0]:
            raise RuntimeError("where(): the condition cannot require grad")
    if first and isinstance(args[0], Tensor) and np.asarray(vals[0]).dtype.kind != "b":
        raise RuntimeError("where expected condition to be a boolean tensor, but got a tensor "
                           f"with dtype {scalar_type_name(np.asarray(vals[0]).dtype)}")
    if all(v.__class__ is float or isinstance(v, (_b.int, _b.float)) for v in vals):
        xs = [_b.float(v) for v in vals] + [0.0] * (3 - len(vals))
        try:
            v = _SF[code](*xs)
        except (ArithmeticError, ValueError):
            v = ieee_value(code, *xs)
        v = _b.float(v)
    else:
        # clamp's absent bounds (+-inf) do not promote an integer tensor, as PyTorch's None
        typed = [(a, v) for a, v in list(zip(args, vals))[first:]
                 if not (op.name in ("clamp", "clamp_no_max") and a.__class__ is _b.float
                         and math.isinf(a))]
        dt = _result_dtype(*zip(*typed))
        if dt.kind != "f" and not op.int_result:
            dt = _F64   # int / int, sqrt(int): the default float dtype
        arrs = [np.asarray(v) for v in vals]
        for k, (a, x) in enumerate(zip(args, arrs)):
            if k < first:
                arrs[k] = x.astype(bool)
            elif a.__class__ is not _b.float:   # Python floats stay weak, as in PyTorch
                arrs[k] = x.astype(dt, copy=False)   # (a Python int wraps: uint8 - 1 is 255)
        mismatch = broadcast_error([a.shape for a in (arrs[1:] if op.name == "where" else arrs)])
        if mismatch is not None:
            raise mismatch
        with np.errstate(all="ignore"):
            v = _VF[code](*arrs)
        v = laid_out(np.asarray(v), arrs).astype(dt, copy=False)
        if dt.kind != "f":
            return wrap(v)   # integer and bool results never require grad
        if v.ndim == 0 and v.dtype == np.float64:
            v = _b.float(v)
    T = recording()
    if T is None:
        return wrap(v)
    if T._retiring:
        T = next_tape(T, args)
    if not any(isinstance(a, Tensor) and a._tape is not None for a in args):
        g = recorded_comparison(T, args)
        if g is None:
            return wrap(v)
        if op.name != "where" or getattr(args[0], "_comparison", None) is not g or \
                any(getattr(a, "_comparison", None) is not None for a in args[1:]):
            note_comparison_use(T, g)   # a comparison used as a number: not replayable
            return wrap(v)
        if T.rewrite_array_op is None:
            note_comparison_use(T, g, "tg.where with constant branches is a constant outside "
                                      "tg.compile, as in PyTorch; record it with tg.compile")
            return wrap(v)
        # where(recorded condition, constants) while tg.compile records: recorded, so that a
        # replay follows the condition (the result requires grad, with zero gradient); outside
        # tg.compile it is a constant, as PyTorch's
    else:
        for k, a in enumerate(args):   # a comparison used as a number, beside recorded values
            g = getattr(a, "_comparison", None) if isinstance(a, Tensor) else None
            if g is not None and g[0] is T and not (op.name == "where" and k == 0):
                note_comparison_use(T, g)
    shape = () if v.__class__ is float else v.shape
    refs = []
    for k, a in enumerate(args):
        if op.name == "where" and k == 0:  # the condition, stored as 0/1
            g = getattr(a, "_comparison", None) if isinstance(a, Tensor) else None
            cshape = np.shape(vals[0])
            if g is not None and g[0] is T and (cshape == shape or cshape == ()):
                refs.append(g[1])    # a recorded comparison: replay re-evaluates it
                continue
            c = np.asarray(vals[0], dtype=np.float64)
            refs.append(T._const(_b.float(c)) if c.ndim == 0 or shape == () else
                        T._push(CONST, -1, -1, np.broadcast_to(c, shape)))
        else:
            refs.append(_operand_ref(T, a, shape))
    return _record(T, code, refs, v)


def ieee_value(code, x, y, z):
    """The op's value under IEEE rules (inf, nan) where Python's math raises."""
    with np.errstate(all="ignore"):
        return _b.float(_VF[code](*(np.float64(v) for v in (x, y, z)[:_ARITY[code]])))


class Tensor:
    """An n-dimensional value that can record the operations applied to it.

    Create tensors with :func:`tapegrad.tensor` and the factories (``zeros``, ``randn``...).
    """

    __slots__ = ("_value", "_tape", "_entry", "_grad", "_hooks", "_retains", "_comparison",
                 "_vc", "__weakref__", "__dict__")
    # set on views and their roots only (core/views.py): here, what every other tensor reads
    _view = None
    _views = None
    _detached = False   # x.detach(): a view in memory and version only (core/views.py)
    _untracked = False  # x.data: a detached view with a version counter of its own
    _multi_output = None   # (k, node, version): output k of split/unbind (or a view of one),
                           # PyTorch's views of a multi-output node, which refuse in-place ops
                           # and, after their memory changed, their grad_fn
    __hash__ = object.__hash__
    # A subclass whose ops record differently (tg.compile's Elements) sets these to
    # handler(code, args) and handler(array op name, args, params).
    __tapegrad_elementwise__ = None
    __tapegrad_array_op__ = None

    # -- storage ----------------------------------------------------------------------
    @property
    def _version(self):
        """How many times the memory of this tensor was changed in place: one counter for a
        base and all its views, as in PyTorch (a saved value checks it)."""
        info = self._view
        return getattr(self if info is None or self._untracked else info[0], "_vc", 0)

    @_version.setter
    def _version(self, n):
        info = self._view
        (self if info is None or self._untracked else info[0])._vc = n

    @property
    def _base(self):
        """The tensor whose memory this view shares (None for a tensor that is not a view)."""
        info = self._view
        if info is None:
            return None
        return self.__dict__.get("_detached_base") if self._detached else info[0]

    # -- autograd attributes ----------------------------------------------------------
    @property
    def requires_grad(self):
        """True when operations on this tensor are recorded for differentiation."""
        return self._tape is not None

    @requires_grad.setter
    def requires_grad(self, flag):
        self.requires_grad_(flag)

    @property
    def is_leaf(self):
        """True for tensors not produced by a recorded operation."""
        t = self._tape
        if t.__class__ is not Tape or t._leaves.get(self._entry) is self:
            return True
        mo = self._multi_output   # (PyTorch reads grad_fn here, which refuses)
        if mo is not None and self._version != mo[2]:
            raise RuntimeError(MULTI_OUTPUT_MODIFIED.format(mo[0], mo[1]))
        return False

    @property
    def grad_fn(self):
        """The backward node of the op that produced this tensor (None for leaves)."""
        t = self._tape
        if t.__class__ is not Tape or t._leaves.get(self._entry) is self:
            return None
        mo = self._multi_output
        if mo is not None and self._version != mo[2]:
            raise RuntimeError(MULTI_OUTPUT_MODIFIED.format(mo[0], mo[1]))
        return node_for(t, self._entry)

    @property
    def grad(self):
        """The accumulated gradient (a Tensor) of a leaf, or of a tensor that retains grad."""
        g = getattr(self, "_grad", None)
        t = self._tape   # (is_leaf without its refusal for a changed multi-output view, as PyTorch)
        if g is None and t.__class__ is Tape and t._leaves.get(self._entry) is not self \
                and not getattr(self, "_retains", False):
            warnings.warn(
                "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. "
                "Its .grad attribute won't be populated during autograd.backward(). If you "
                "indeed want the .grad field to be populated for a non-leaf Tensor, use "
                ".retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor by "
                "mistake, make sure you access the leaf Tensor instead.", UserWarning, stacklevel=2)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None and not isinstance(value, Tensor):
            raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of "
                            f"type {type(value).__name__}")
        if value is not None and value.shape != self.shape:
            raise RuntimeError(f"assigned grad has data of a different size: {tuple(value.shape)} "
                               f"vs {tuple(self.shape)}")
        self._grad = value

    @property
    def retains_grad(self):
        """True if a non-leaf tensor keeps its ``.grad`` (see ``retain_grad``)."""
        return bool(getattr(self, "_retains", False))

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """Set ``requires_grad`` in place (leaves only); returns self."""
        if not self.is_leaf:
            if requires_grad:
                return self
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach().")
        if requires_grad:
            if self._tape is None:
                if self._value.__class__ is not float and self._value.dtype.kind not in "fc":
                    raise RuntimeError("only Tensors of floating point dtype can require gradients")
                self._tape = _UNREG
        else:
            self._tape = None
        return self

    def retain_grad(self) -> None:
        """Keep the gradient of this non-leaf tensor in ``.grad`` after backward."""
        if self._tape is None:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.is_leaf:
            return
        self._retains = True
        import weakref
        self._tape._retain[self._entry] = weakref.ref(self)

    def register_hook(self, hook: Callable[["Tensor"], Optional["Tensor"]]) -> "_HookHandle":
        """Call ``hook(grad)`` when this tensor's gradient is computed; a returned tensor
        replaces the gradient.  Returns a handle with ``remove()``."""
        if self._tape is None:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        if self.is_leaf:
            hooks = getattr(self, "_hooks", None)
            if hooks is None:
                hooks = self._hooks = []
        else:
            T = self._tape
            hooks = T._hooks.setdefault(self._entry, [])
            T._stops.append(self._entry)
        hooks.append(hook)
        return _HookHandle(hooks, hook)

    def detach(self) -> "Tensor":
        """A new leaf sharing this tensor's value, cut from the graph."""
        try:
            value = self._value
        except AttributeError:   # Tensor.detach(3.0): PyTorch's descriptor error, not ours
            raise TypeError("descriptor 'detach' for 'Tensor' objects doesn't apply to a "
                            f"'{type(self).__name__}' object") from None
        if self._tape is not None:
            # a recorded value taken as a constant: a replay of the tape would keep the
            # recorded value where the program computes a new one (compile refuses)
            _note_read(self)
        out = wrap(value)
        register_detached(out, self)   # PyTorch's: one version counter with self
        return out

    def detach_(self):
        """Cut this tensor from the graph in place (it becomes a leaf without grad)."""
        self._tape = None
        return self

    @property
    def data(self):
        """The value as a tensor that does not require grad (shares memory)."""
        if self._tape is not None:
            _note_read(self)   # (as detach)
        out = wrap(self._value)
        # PyTorch's .data shares the memory, not the version counter: an in-place change
        # through it goes unnoticed by what saved this tensor, but what reads it later (a
        # view's entry, a number entry) reads the new value (ops/inplace_views.py)
        register_detached(out, self, untracked=True)
        return out

    @data.setter
    def data(self, other):
        if self._views is not None:   # new memory: the views keep the old one, unlinked
            forget_views(self)
        if self._view is not None:
            self._view = None
        self._value = other._value if isinstance(other, Tensor) else wrap(other)._value
        t = self._tape
        if t.__class__ is Tape and t._leaves.get(self._entry) is self:
            t._dirty.append((self._entry, len(t)))
            t._leaf_of.pop(id(self), None)
            self._tape = _UNREG   # re-register with the new value on next use

    def __reduce_ex__(self, protocol):
        # pickling and deepcopy keep the value and requires_grad, never the tape
        v = self._value
        return (_rebuild, (v if v.__class__ is _b.float else np.array(v), self._tape is not None))

    def __deepcopy__(self, memo):
        v = self._value
        return wrap(v if v.__class__ is _b.float else np.array(v), self._tape is not None)

    # -- values -------------------------------------------------------------------------
    @property
    def shape(self):
        """The shape, as a ``tapegrad.Size`` (a tuple)."""
        v = self._value
        return Size(() if v.__class__ is float else v.shape)

    def size(self, dim=None):
        """The shape, or its length along ``dim``."""
        s = self.shape
        if dim is None:
            return s
        if not s:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        return s[wrap_dim(dim, len(s))]

    @property
    def ndim(self):
        """The number of dimensions."""
        v = self._value
        return 0 if v.__class__ is float else v.ndim

    def dim(self):
        """The number of dimensions."""
        return self.ndim

    def numel(self):
        v = self._value
        return 1 if v.__class__ is float else _b.int(v.size)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def dtype(self):
        """The element type (``tg.float64``, ``tg.float32``, ...)."""
        return dtype_of(self._value)

    def is_floating_point(self):
        """True for floating-point dtypes."""
        return self.dtype.is_floating_point

    def item(self) -> Union[float, int, bool]:
        """The value of a one-element tensor as a Python number."""
        _note_read(self)
        v = self._value
        if v.__class__ is float:
            return v
        if v.size != 1:
            raise RuntimeError(f"a Tensor with {v.size} elements cannot be converted to Scalar")
        return v.reshape(()).item()

    def tolist(self):
        """The value as a (nested) list of Python numbers, or a number for 0-d."""
        _note_read(self)
        v = self._value
        return v if v.__class__ is float else v.tolist()

    def numpy(self) -> np.ndarray:
        """The value as a NumPy array (shares memory for array tensors)."""
        # grad mode off (no_grad, a custom Function's forward) allows it, as in PyTorch
        if self._tape is not None and thread_state.grad_enabled:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        v = self._value
        return np.array(v) if v.__class__ is float else v

    def __array__(self, dtype=None, copy=None):
        if self._tape is not None and thread_state.grad_enabled:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return np.asarray(self._value, dtype=dtype)

    def __float__(self):
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        _note_read(self)
        return _b.float(self._value) if self._value.__class__ is _b.float else _b.float(self.item())

    def __int__(self):
        if self.numel() != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return _b.int(self.item())

    def __bool__(self):
        _note_read(self)   # (once: item() would note the read, or the guard, again)
        v = self._value
        if v.__class__ is float:
            return bool(v)
        if v.size != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        return bool(v.reshape(()).item())

    def __index__(self):
        if self.dtype.is_floating_point:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return _b.int(self.item())

    def __repr__(self):
        body = format_value(self._value)
        extra = []
        if self.dtype not in (float64, int64, bool_):
            extra.append(f"dtype={self.dtype!r}")
        fn = self.grad_fn if self._tape.__class__ is Tape else None
        if fn is not None:
            extra.append(f"grad_fn=<{type(fn).__name__}>")
        elif self._tape is not None:
            extra.append("requires_grad=True")
        return "tensor(" + ", ".join([body] + extra) + ")"

    __str__ = __repr__

    def __format__(self, spec):
        # as PyTorch: a 0-d tensor formats as its number (f"loss {loss}" prints 0.25)
        if self.ndim == 0 or (spec and self.numel() == 1):
            return format(self.item(), spec)
        return repr(self)

    # -- comparisons (not differentiable) ------------------------------------------------
    def __lt__(self, o): return compare(_CODES["lt"], self, o)
    def __le__(self, o): return compare(_CODES["le"], self, o)
    def __gt__(self, o): return compare(_CODES["gt"], self, o)
    def __ge__(self, o): return compare(_CODES["ge"], self, o)
    def __eq__(self, o): return compare(_CODES["eq"], self, o)
    def __ne__(self, o): return compare(_CODES["ne"], self, o)

    # -- in-place ops -----------------------------------------------------------------
    def _inplace(self, compute, aliased=False):
        """``self = compute(self)`` in place, under PyTorch's rules: an error on a leaf that
        requires grad while grad mode is on; a recorded result becomes a new entry that
        ``self`` now stands for, and the old entry is marked modified so that a backward
        through an op that saved it raises instead of using a stale value.  A view, or a
        tensor with live views, writes into the memory they share (``_inplace_view``,
        defined by the ops layer: it returns None when no view of this memory is alive)."""
        if (self._view is not None or self._views is not None) and \
                self._inplace_view(compute, aliased) is not None:
            return self
        grad_on = recording() is not None
        if grad_on and self._tape is not None and self.is_leaf:
            raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                               "operation.")
        # a new version, as PyTorch's every in-place op: what saved this tensor by reference
        # must not use it.  (Before compute: a constant it records holds the old value, which
        # a recorded op replaces rather than writes.)  self is no view here: views go above.
        self._vc = getattr(self, "_vc", 0) + 1
        rec = recording()
        start = len(rec) if rec is not None else 0
        r = compute(self)
        old = self._tape
        # (allow_mutation_on_saved_tensors: what saved a leaf keeps a copy; its tensor is
        # registered again below, so nothing reads the old entry from now on)
        kept = r._tape.__class__ is not Tape and keep_saved(self._value, (self,)) and \
            old.__class__ is Tape and old._leaves.get(self._entry) is self
        if old.__class__ is Tape and not kept:
            if r._tape is not old:
                changed_at = len(old)
            elif aliased:
                # ``x.mul_(x)``: the op saved ``x`` as its other operand too, and changed it
                # (PyTorch's version check raises at the backward; ``add_`` saves none)
                changed_at = r._entry + 1
            else:   # (the op's own entries read the old value, which the tape keeps: a
                changed_at = start   # composition's, ``log10_``'s ``log``, as PyTorch's clone)
            old._dirty.append((self._entry, changed_at))
        v = r._value
        if self.dtype is not float64 and v.__class__ is float:
            v = np.asarray(v, self.dtype.np)
        elif v.__class__ is not float and v.dtype != self.dtype.np:
            v = v.astype(self.dtype.np)
        if r._tape.__class__ is Tape:          # recorded: self is now the new entry
            mem = self._value
            if rec is r._tape:
                own_the_old_value(rec, start, self, mem)
            # a tensor without grad: the op wrote its memory, as PyTorch (from_numpy's array
            # and .data see it).  (A recorded tensor's memory is its entry's saved value.)
            if old.__class__ is not Tape and mem.__class__ is np.ndarray and \
                    v.__class__ is np.ndarray and mem.flags.writeable and \
                    mem.shape == v.shape and mem.dtype == v.dtype:
                mem[...] = v
                v = mem
            self._tape, self._entry, self._value = r._tape, r._entry, v
        else:
            note_unrecorded_change(self)
            if old.__class__ is Tape and old._leaves.get(self._entry) is self:
                old._leaf_of.pop(id(self), None)
                self._tape = _UNREG            # re-register with the new value on next use
            if v.__class__ is not float and self._value.__class__ is not float and \
                    self._value.flags.writeable:
                self._value[...] = v            # really in place: .data and aliases see it
            else:
                self._value = v
            if self._tape.__class__ is Tape and old._arr.get(self._entry) is not self._value:
                # a non-leaf keeps its node; what uses it from now on saves its new value
                # (a number entry's, or a read-only array's: not the memory written above)
                old._rebind_value(self._entry, self._value)
        return self

    def add_(self, other, alpha=1):
        """In place ``self += alpha * other``."""
        return self._inplace(lambda s: s + (other if alpha == 1 else other * alpha),
                             other is self)

    def sub_(self, other, alpha=1):
        """In place ``self -= alpha * other``."""
        return self._inplace(lambda s: s - (other if alpha == 1 else other * alpha),
                             other is self)

    def mul_(self, other):
        """In place ``self *= other``."""
        return self._inplace(lambda s: s * other, other is self)

    def div_(self, other, *, rounding_mode=None):
        """In place ``self /= other`` (rounded by ``rounding_mode``, as ``div``)."""
        if rounding_mode is not None:   # (the ops layer's div takes it)
            return self._inplace(lambda s: s.div(other, rounding_mode=rounding_mode),
                                 other is self)
        return self._inplace(lambda s: s / other, other is self)

    def pow_(self, exponent):
        """In place ``self **= exponent``."""
        return self._inplace(lambda s: s ** exponent, exponent is self)

    def clamp_(self, min=None, max=None):
        """In place ``clamp``."""
        return self._inplace(lambda s: s.clamp(min, max))

    __iadd__ = add_
    __isub__ = sub_
    __imul__ = mul_
    __itruediv__ = div_
    __ipow__ = pow_


class _HookHandle:
    def __init__(self, hooks, hook):
        self._hooks, self._hook = hooks, hook

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


MULTI_OUTPUT_MODIFIED = ("Output {} of {} is a view and its base or another view of its base "
                         "has been modified inplace. This view is the output of a function "
                         "that returns multiple views. Such functions do not allow the output "
                         "views to be modified inplace. You should replace the inplace "
                         "operation by an out-of-place one.")


def own_the_old_value(T, start, t, mem):
    """The entries ``T`` recorded from ``start`` for an in-place op on ``t`` (no grad) hold
    ``t``'s value before the op as a constant.  The op writes ``t``'s memory ``mem``, so
    they get their own copy (PyTorch saves a clone of the original self): a later in-place
    change of ``t`` does not touch it, and must not mark it modified."""
    sources, pys, arrays = T._const_sources, T._py, T._arr
    shared = mem.__class__ is np.ndarray
    for k in range(start, len(T)):     # (the op's own few entries)
        s = sources.get(k)
        if s is not None and s[0] is t:
            del sources[k]
            a = arrays.get(k)
            if shared and a is not None and np.may_share_memory(a, mem):
                arrays[k] = a.copy()
        py = pys.get(k)
        if py is not None and py.__class__ is not tuple:   # (a packed one has no constants)
            for a in py.fwd[1]:
                if a.__class__ is Tensor and a.__dict__.get("_constant_of", (None,))[0] is t:
                    del a.__dict__["_constant_of"]
                    if shared and a._value.__class__ is np.ndarray and \
                            np.may_share_memory(a._value, mem):
                        a._value = a._value.copy()


def _note_read(t):
    """Python read the value of a tensor that requires grad: a branch may depend on it, so
    a replay of the tape could be wrong (``compile`` refuses).  A leaf not on a tape yet is
    noted on the tape recording now, at entry -1 (before everything).  Reading a recorded
    comparison is a guard instead: replay re-evaluates it and checks the outcome."""
    T = t._tape
    if T is None:
        g = getattr(t, "_comparison", None)
        if g is not None:
            f = _user_frame()
            v = t._value
            g[0]._guards.append((g[1], v.item() if v.__class__ is not _b.float and v.ndim == 0
                                 else v, f"{f.f_code.co_filename}:{f.f_lineno}"))
        return
    i = t._entry if T.__class__ is Tape else -1
    if T.__class__ is not Tape:
        T = recording()
        if T is None:
            return
    f = _user_frame()
    T._reads.append((i, f"{f.f_code.co_filename}:{f.f_lineno}"))


def _user_frame():
    """The innermost frame outside tapegrad: the user's line."""
    f = sys._getframe(1)
    while f.f_back is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    return f


def recorded_comparison(T, args):
    """The ``(tape, entry)`` of a comparison recorded on T among ``args``, if any."""
    for a in args:
        g = getattr(a, "_comparison", None) if isinstance(a, Tensor) else None
        if g is not None and g[0] is T:
            return g
    return None


def note_unrecorded_change(t):
    """Tensor ``t``, which has history, was changed in place where nothing records (no_grad):
    a replay of the entries recorded from now on would not repeat the change, so ``compile``
    refuses outputs among them (an optimizer's step after the loss leaves the loss's)."""
    T = t._tape
    if T.__class__ is Tape:
        f = _user_frame()
        T._changes.append((len(T), t._entry, f"{f.f_code.co_filename}:{f.f_lineno}"))


def note_comparison_use(T, g, why="a comparison used as a number; use tg.where(cond, a, b)"):
    """A recorded comparison's value flowed into an op that does not record (its other
    operands are constants): a replay could not follow it, so ``compile`` must refuse."""
    f = _user_frame()
    T._reads.append((g[1], f"{f.f_code.co_filename}:{f.f_lineno} ({why})"))


def compare(code, x, y):
    """``x <op> y`` elementwise: a bool tensor that does not require grad.  When an operand is
    recorded, so is the comparison (its entry holds 0/1): a replay re-evaluates it, for the
    branch it decides (``bool()`` records a guard) or as ``tg.where``'s condition."""
    for a in (x, y):
        if isinstance(a, Tensor) and a.__class__ is not Tensor:
            handler = a.__tapegrad_elementwise__
            if handler is not None:   # a tensor type that records ops its own way (tg.compile)
                return handler(code, (x, y))
    xv = x._value if isinstance(x, Tensor) else x
    yv = y._value if isinstance(y, Tensor) else y
    if xv.__class__ is np.ndarray and yv.__class__ is np.ndarray and xv.shape != yv.shape:
        mismatch = broadcast_error([xv.shape, yv.shape])   # (only arrays can clash)
        if mismatch is not None:
            raise mismatch
    v = laid_out(np.asarray(_VF[code](np.asarray(xv), np.asarray(yv))), (xv, yv))
    r = wrap(v)
    T = recording()
    if T is None or not any(isinstance(t, Tensor) and t._tape is not None for t in (x, y)):
        return r
    shape = v.shape
    refs = [_operand_ref(T, t, shape) if isinstance(t, Tensor) else T._const(t) for t in (x, y)]
    rec = _record(T, code, refs, v.astype(np.float64) if v.ndim else _b.float(v))
    r._comparison = (T, rec._entry)
    return r


def extend(cls, methods):
    """Give ``cls`` (``Tensor`` or ``Tape``) the methods a higher layer defines for it.

    The core defines the data and the elementwise ops; ``tapegrad.ops`` adds the array
    ops (``x.sum()``, ``x[i]``, ``@``), ``tapegrad.autograd`` adds ``backward``, and so on,
    each layer once, when it is imported.  A name defined twice is an error."""
    for name, fn in methods.items():
        if name in cls.__dict__:
            raise RuntimeError(f"{cls.__name__}.{name} is defined twice")
        setattr(cls, name, fn)


def _rebuild(v, requires_grad):
    return wrap(v, requires_grad)


def check_float(v):
    if v.__class__ is not float and v.dtype.kind not in "fc":
        raise RuntimeError("Only Tensors of floating point and complex dtype can require gradients")


_SF, _VF = SCALAR_FORWARD, ARRAY_FORWARD
_WHERE = [op.name for op in optable.OPS].index("where")
_CODES = {op.name: k for k, op in enumerate(optable.OPS)}
_ARITY = tuple(op.arity for op in optable.OPS)

# Ctrl-C inside these is delivered when they return (they append tape entries)
interrupts.protect(elementwise_fallback, _record)
