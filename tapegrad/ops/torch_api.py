"""PyTorch-shaped functions and methods over the array-op table (``array_ops.ARRAY_OPS``).

Each function here only maps PyTorch's signature onto a row of the table (``call``); the
math lives in the table.  ``tapegrad/__init__.py`` exposes them as ``tg.<name>`` and, for
rows marked ``method``, as ``Tensor`` methods.
"""
from __future__ import annotations

import builtins
import itertools
import math
import re
import warnings
from collections import namedtuple
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.elementwise import FUNCTIONS as ELEMENTWISE
from ..core import optable
from ..core.dtypes import (CPU, scalar_type_name, as_device, as_dtype, bool_, device as _device, float16, float32,
                           float64, get_default_dtype, int8, int16, int32, int64, uint8, Size)
from ..core.pyop import note_index_versions
from ..core.tape import UNREGISTERED_LEAF, Tape, recording, writing_a_view
from ..core.tensor import Tensor, check_float, note_comparison_use, result_dtype, wrap
from ..core.views import live_views, register_parts, register_view, root_and_steps
from . import everyday_ops, inplace_views, linalg_ops, special
from .factories import (LEGACY_CONSTRUCTORS, factory_shape, legacy_new, random_source,
                        tensor as _new_tensor, tensor_init)
from .array_ops import contiguous as rows_in_order, row_major_strides
from .array_ops import (SUM_ALL, basic_index, basic_steps, select_recorded, call, call_arrays, call_view, sum_all, full_slice as _full, index, index_shape, index_steps, is_advanced_index, shape_arg,
                        view_through, without_leading_ones, wrap_dim)

MaxMin = namedtuple("MaxMin", ["values", "indices"])
_ND, _F64, _float, _new = np.ndarray, np.float64, builtins.float, object.__new__
_DT64 = np.dtype(np.float64)
_NO_PARAMS = {}   # (shared by the steps of element views: never written)
Dim = Optional[Union[int, Tuple[int, ...], List[int]]]
_INT = (int, np.integer)


def _dims(dim, ndim=None):
    """A reduction's ``dim`` as the table takes it: None (all dims), an int or a tuple;
    ``()`` and ``[]`` name every dim, as in PyTorch."""
    if isinstance(dim, (list, tuple)):
        return tuple(dim) or (tuple(range(ndim)) if ndim is not None else None)
    if dim is not None and not isinstance(dim, (int, np.integer)):
        raise TypeError(f"received an invalid combination of arguments - got "
                        f"(dim={type(dim).__name__}, ), but expected an int or a tuple of ints")
    return dim


def _as(input, dtype):
    """``input`` converted to ``dtype`` first (a reduction's ``dtype=``), as PyTorch."""
    return input if dtype is None else _convert(input, as_dtype(dtype))


_SUM_ALL_KEEPDIM = {"dim": None, "keepdim": True}
_SUM_DIM = {}   # (sum's params over one dim, made once: a recorded call shares them)


def sum(input: Tensor, dim: Dim = None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A001
    """Sum of all elements, or over ``dim`` (int or tuple)."""
    if dim is None and dtype is None:   # (the common case: nothing to convert)
        if not keepdim and input.__class__ is Tensor and input._tape is not None:
            out = sum_all(input)
            if out is not None:
                return out
        return call_arrays("sum", (input,), _SUM_ALL_KEEPDIM if keepdim else SUM_ALL)
    if dim.__class__ is int and dtype is None:   # (one dim: GMM's, k-means' sums)
        params = _SUM_DIM.get((dim, keepdim)) if keepdim.__class__ is bool else None
        if params is None:
            params = {"dim": dim, "keepdim": keepdim}
            if keepdim.__class__ is bool and len(_SUM_DIM) < 64:
                _SUM_DIM[dim, keepdim] = params
        return call_arrays("sum", (input,), params)
    return call("sum", _as(input, dtype), dim=_dims(dim, input.ndim), keepdim=keepdim)


def mean(input: Tensor, dim: Dim = None, keepdim: bool = False, dtype=None) -> Tensor:
    """Mean of all elements, or over ``dim``."""
    return call("mean", _as(input, dtype), dim=_dims(dim, input.ndim), keepdim=keepdim)


def prod(input: Tensor, dim: Optional[int] = None, keepdim: bool = False, dtype=None) -> Tensor:
    """Product of all elements, or over ``dim`` (an int)."""
    return call("prod", _as(input, dtype), dim=dim, keepdim=keepdim)


def _extreme(kind, input, dim, keepdim, other):
    if isinstance(dim, Tensor):   # tg.max(a, b): the elementwise maximum
        other, dim = dim, None
    if other is not None:
        return ELEMENTWISE["maximum" if kind == "max" else "minimum"](input, other)
    if dim is None:   # (call_arrays: past call's argument analysis for a float64 array)
        return call_arrays(f"{kind}_all", (input,))
    vals, idx = call(f"{kind}_dim", input, dim=dim, keepdim=keepdim)
    return MaxMin(vals, idx)


def max(input, dim=None, keepdim=False, *, other=None):  # noqa: A001
    """``max(x)``: the largest element (ties share the gradient); ``max(x, dim)``:
    ``(values, indices)`` (the gradient goes to the index); ``max(x, y)``: maximum."""
    return _extreme("max", input, dim, keepdim, other)


def min(input, dim=None, keepdim=False, *, other=None):  # noqa: A001
    """Like ``max``, for the smallest elements."""
    return _extreme("min", input, dim, keepdim, other)


def amax(input, dim=(), keepdim=False):
    """Largest elements over ``dim`` (all dims by default); ties share the gradient."""
    return call("amax", input, dim=_dims(dim) if dim != () else None, keepdim=keepdim)


def amin(input, dim=(), keepdim=False):
    """Smallest elements over ``dim`` (all dims by default); ties share the gradient."""
    return call("amin", input, dim=_dims(dim) if dim != () else None, keepdim=keepdim)


def var(input: Tensor, dim: Dim = None, unbiased: bool = True, keepdim: bool = False, *,
        correction: Optional[int] = None) -> Tensor:
    """Variance (unbiased by default, as PyTorch)."""
    return call("var", input, dim=_dims(dim), unbiased=unbiased, keepdim=keepdim,
                correction=correction)


def std(input: Tensor, dim: Dim = None, unbiased: bool = True, keepdim: bool = False, *,
        correction: Optional[int] = None) -> Tensor:
    """Standard deviation (unbiased by default, as PyTorch)."""
    return call("std", input, dim=_dims(dim), unbiased=unbiased, keepdim=keepdim,
                correction=correction)


def norm(input, p="fro", dim=None, keepdim=False):
    """Vector norm (2-norm by default) of all elements or over ``dim``."""
    p = 2 if p in ("fro", None) else p
    return call("norm", input, p=p, dim=_dims(dim, input.ndim), keepdim=keepdim)


def logsumexp(input: Tensor, dim: Dim, keepdim: bool = False) -> Tensor:
    """log(sum(exp(x))) over ``dim``, computed stably."""
    if dim.__class__ is int:   # (GMM's: nothing to convert)
        return call_arrays("logsumexp", (input,), {"dim": dim, "keepdim": keepdim})
    return call("logsumexp", input, dim=_dims(dim), keepdim=keepdim)


def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``, computed stably."""
    return call("softmax", _as(input, dtype), dim=dim)


def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably."""
    return call("log_softmax", _as(input, dtype), dim=dim)


def cumsum(input: Tensor, dim: int, dtype=None) -> Tensor:
    """Cumulative sums along ``dim``."""
    return call("cumsum", _as(input, dtype), dim=dim)


def cumprod(input: Tensor, dim: int, dtype=None) -> Tensor:
    """Cumulative products along ``dim`` (the gradient is exact with zeros in the input)."""
    return call("cumprod", _as(input, dtype), dim=dim)


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with NumPy/PyTorch semantics (dot, mv, mm, batched)."""
    if input.__class__ is Tensor and other.__class__ is Tensor:   # (the common mm: no checks)
        a, b = input._value, other._value
        if a.__class__ is _ND and b.__class__ is _ND and a.ndim == 2 and b.ndim == 2 and \
                a.shape[1] == b.shape[0] and a.dtype is _DT64 and b.dtype is _DT64:
            return call_arrays("matmul", (input, other))
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{input.ndim}D and {other.ndim}D")
    a, b = input.shape, other.shape
    k_a = a[-1]
    k_b = b[0] if len(b) == 1 else b[-2]
    if k_a != k_b:
        if len(a) == 2 and len(b) == 2:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a[0]}x{a[1]} and "
                               f"{b[0]}x{b[1]})")
        if len(a) == 1 and len(b) == 1:
            raise RuntimeError(f"inconsistent tensor size, expected tensor [{a[0]}] and src "
                               f"[{b[0]}] to have the same number of elements, but got {a[0]} "
                               f"and {b[0]} elements respectively")
        raise RuntimeError(f"size mismatch in matmul: {tuple(a)} @ {tuple(b)}")
    one_row = len(a) <= 2 and len(b) <= 2 and (len(a) == 2 or len(b) == 1)   # dot, mv, mm
    folds = len(a) >= 3 and len(b) <= 2   # computed as one mm (or mv) with or without grad
    if one_row or input.__class__ is not Tensor or other.__class__ is not Tensor:
        return call("matmul", input, other)   # (inside tg.compile an operand is elements)
    untracked = recording() is None or (input._tape is None and other._tape is None)
    if untracked and not folds:
        return call("matmul", input, other)
    return _matmul_decomposed(input, other)


def _folds(a, b):
    """Does PyTorch's matmul fold batched ``a`` into a matrix for ``b`` (a matrix or a
    vector: its ``should_fold``)?  When ``b`` requires grad, or when ``a``'s batch dims
    merge with its rows without a copy; else it runs a ``bmm`` on ``a`` expanded
    (``BmmBackward0`` over ``ReshapeAliasBackward0`` for a permuted or sliced ``a``)."""
    if b._tape is not None or a.numel() == 0:
        return True
    shape, strides = a._value.shape, strides_of(a._value)
    return builtins.all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(len(shape) - 2))


def _is_contiguous(shape, strides):
    # PyTorch's test: dims of size 1 are skipped, and an empty tensor is contiguous
    return 0 in shape or builtins.all(n == 1 or s == c for n, s, c in
                                      zip(shape, strides, row_major_strides(shape)))


def _can_view(shape, strides, new_shape):
    """Whether a tensor of ``shape``/``strides`` has a view of ``new_shape`` (the test of
    PyTorch's ``computeStride``: the merged dims of each chunk must be contiguous in memory)."""
    if builtins.min(shape, default=1) == 0:
        return True
    view_d, tensor_numel, view_numel = len(new_shape) - 1, 1, 1
    chunk_base = strides[-1] if strides else 1
    for d in range(len(shape) - 1, -1, -1):
        tensor_numel *= shape[d]
        if d == 0 or (shape[d - 1] != 1 and strides[d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return False
            if d > 0:
                chunk_base, tensor_numel, view_numel = strides[d - 1], 1, 1
    return view_d == -1


def _reshape_as_torch(x, shape, strides, new_shape):
    """``x.reshape(new_shape)`` recorded as PyTorch records it for a tensor laid out with
    ``strides``: a view, an aliasing reshape, or a copy then an unsafe view."""
    if _is_contiguous(shape, strides):
        return call("reshape", x, shape=new_shape)
    if _can_view(shape, strides, new_shape):
        return call("reshape_alias", x, new_shape)
    return call("view_node", ELEMENTWISE["clone"](x), new_shape, node="UnsafeViewBackward0")


def _matmul_decomposed(a, b):
    """``a @ b`` with a 1-D operand beside a matrix, or a batch, recorded as PyTorch's
    ``at::matmul`` decomposes it (a node each for the views, the ``mm``/``mv``/``bmm`` and
    the final unsafe view), so that ``grad_fn`` and ``next_functions`` read as PyTorch's."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    na, nb = len(sa), len(sb)
    if na == 1 and nb == 2:   # a.unsqueeze(0).mm(b).squeeze_(0)
        out = call("matmul", unsqueeze(a, 0), b)
        return call("view_node", out, sb[1:], node="SqueezeBackward4")
    if na == 3 and nb == 3 and sa[0] != sb[0]:   # a batch of one that needs grad: a matrix
        if sa[0] == 1 and a._tape is not None:
            return matmul(squeeze(a, 0), b)
        if sb[0] == 1 and b._tape is not None:
            return matmul(a, squeeze(b, 0))
    if na >= 3 and nb <= 2 and _folds(a, b):   # a's batch into its rows: one mm (or mv)
        rows = int(np.prod(sa[:-1], dtype=np.int64))   # (a view, or a copy as PyTorch's)
        out = call("matmul", reshape(a, (rows, sa[-1])), b)
        return call("view_node", out, sa[:-1] + sb[1:], node="UnsafeViewBackward0")
    if nb >= 3 and na <= 2 and a._tape is not None:   # fold b's batch: (b^T a^T)^T
        bt = transpose(b, -1, -2)
        shape_t = sb[:-2] + (sb[-1], sb[-2])
        strides_t = row_major_strides(sb)
        strides_t = strides_t[:-2] + (strides_t[-1], strides_t[-2])
        rows = int(np.prod(shape_t[:-1], dtype=np.int64))
        folded = _reshape_as_torch(bt, shape_t, strides_t, (rows, sb[-2]))
        out = call("matmul", folded, t(a) if na == 2 else a)
        out = call("view_node", out, shape_t[:-1] + sa[:-1], node="UnsafeViewBackward0")
        if na == 1:
            return out
        out = transpose(out, -1, -2)
        shape_o = tuple(out.shape)
        strides_o = row_major_strides(shape_t[:-1] + sa[:-1])
        strides_o = strides_o[:-2] + (strides_o[-1], strides_o[-2])
        return out if _is_contiguous(shape_o, strides_o) else ELEMENTWISE["clone"](out)
    # a batch of matrix products: both expanded to the broadcast batch, then one bmm
    n, m = (sa[-2] if na > 1 else 1), sa[-1]
    p = sb[-1] if nb > 1 else 1
    batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    count = int(np.prod(batch, dtype=np.int64))
    operands = []
    # (a vector b is expanded as a vector, then made a column: (count, m) -> (count, m, 1))
    for x, s, tail in ((a, sa, (n, m)), (b, sb, (sb[-2], p) if nb > 1 else sb)):
        full = batch + tail
        e = call("expand", x, shape=full)   # (laid out as x is: a permuted or sliced batch)
        operands.append(_reshape_as_torch(e, full, strides_of(e._value), (count,) + tail))
    if nb == 1:
        operands[1] = unsqueeze(operands[1], 2)
    out = call("matmul", *operands)
    if nb == 1:
        out = squeeze(out, -1)
    shape = batch + ((n,) if na > 1 else ()) + ((p,) if nb > 1 else ())
    return call("view_node", out, shape, node="UnsafeViewBackward0")


def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``input @ weight.T + bias`` as one fused op (``tg.nn.functional.linear``)."""
    if input.dtype.np.kind not in "fc" and weight.dtype.np.kind in "fc":
        raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got "
                           f"{scalar_type_name(input.dtype.np)} and "
                           f"{scalar_type_name(weight.dtype.np)}")
    if input.shape[-1] != weight.shape[-1]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied "
                           f"({input.numel() // input.shape[-1]}x{input.shape[-1]} and "
                           f"{weight.shape[-1]}x{weight.shape[0]})")
    return call("linear", input, weight) if bias is None else call("linear", input, weight, bias)


def mm(input: Tensor, mat2: Tensor) -> Tensor:
    """Matrix product of two 2-D tensors."""
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError("self must be a matrix")
    return matmul(input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix-vector product."""
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {input.ndim}, {vec.ndim}")
    return matmul(input, vec)


def dot(input: Tensor, other: Tensor) -> Tensor:
    """Dot product of two 1-D tensors."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    if input.shape == other.shape:   # (what matmul does with two vectors, without its checks)
        return call_arrays("matmul", (input, other))
    return matmul(input, other)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two 1-D tensors."""
    for name, v in (("self", input), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v.ndim}-D")
    return call("outer", input, vec2)


def t(input: Tensor) -> Tensor:
    """Transpose of a 2-D tensor (a 0-D or 1-D tensor's values as they are, in a new node,
    as PyTorch's TBackward0)."""
    return call_view("t", input, _NO_PARAMS)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap dimensions ``dim0`` and ``dim1``."""
    return call_view("transpose", input, {"dim0": dim0, "dim1": dim1})


def _shape_keyword(name, args, kw, key):
    """``x.reshape(shape=(2, 3))``: PyTorch's keyword for a shape given as ``*args``."""
    if kw:
        extra = sorted(set(kw) - {key})
        if args or extra:
            raise TypeError(f"{name}() got an unexpected keyword argument "
                            f"'{extra[0] if extra else key}'")
        return (kw[key],)
    return args


def permute(input: Tensor, *dims: Union[int, Sequence[int]], **kw) -> Tensor:
    """Reorder dimensions."""
    dims = _shape_keyword("permute", dims, kw, "dims")
    return call_view("permute", input, {"dims": shape_arg(dims)})


def reversed_dims(self):
    """The tensor with its dimensions reversed (``x.T``)."""
    if self.ndim < 2:
        return self
    return call_view("permute", self, _reversed_dims_params(self.ndim))


def _shape_in_place(name, params, node):
    """``x.<name>_(...)``: ``x`` becomes ``x.<name>(...)``, a view of its memory with another
    shape and strides (PyTorch's ``t_``, ``transpose_``, ``unsqueeze_``, ``squeeze_``), its
    node ``node`` (PyTorch's ``TBackward1``...).  Refused, as PyTorch, on a leaf that requires
    grad (or a view of one) while grad mode is on; refused by tapegrad (PyTorch allows
    them) on a tensor with live views of it, whose steps from it would change meaning, and
    on a tensor with history under ``no_grad``."""
    def method(self, *args):
        p = params(*args)
        root, steps = root_and_steps(self)
        recording_now = recording() is not None
        if recording_now and root._tape is not None and (root.is_leaf or self.is_leaf):
            raise RuntimeError(f"a {'view of a ' if steps else ''}leaf Variable that requires "
                               "grad is being used in an in-place operation.")
        if not steps and live_views(self):
            raise RuntimeError(f"{name}_(): tapegrad cannot change the shape of a tensor in "
                               f"place while views of it are alive; use {name}() instead")
        if not recording_now and self._tape is not None and not self.is_leaf:
            raise RuntimeError(f"{name}_(): tapegrad cannot change the shape of a tensor with "
                               f"history in place under no_grad; use {name}() instead")
        r = call_view(name, self, p, node(p) if recording_now else None)
        if r._tape is not None:
            self._tape, self._entry = r._tape, r._entry
        elif self._tape is not None:   # a leaf that requires grad, under no_grad: registered
            old = self._tape           # again with its new shape at its next use
            if old.__class__ is Tape and old._leaves.get(self._entry) is self:
                old._leaf_of.pop(id(self), None)
                self._tape = UNREGISTERED_LEAF
        self._value = r._value
        if steps:
            self._view = r._view
        root._vc = getattr(root, "_vc", 0) + 1
        return self
    method.__name__ = f"{name}_"
    method.__doc__ = f"``{name}`` in place (the tensor's shape and strides change)."
    return method


def _squeeze_node(p):
    dim = p["dim"]
    return "SqueezeBackward3" if dim is None else \
        "SqueezeBackward5" if dim.__class__ in (tuple, list) else "SqueezeBackward4"


def _reversed_dims_params(ndim):
    """``{"dims": (ndim - 1, ..., 0)}``, one dict per ndim (a shared call is found by its
    params' identity first)."""
    params = _REVERSED_DIMS.get(ndim)
    if params is None:
        params = _REVERSED_DIMS[ndim] = {"dims": tuple(range(ndim - 1, -1, -1))}
    return params


_REVERSED_DIMS = {}


def _new_shape(input, shape):
    """``shape`` (``-1`` inferred) for ``input``, or PyTorch's error."""
    shape = shape_arg(shape)
    if builtins.sum(n == -1 for n in shape) > 1:
        raise RuntimeError("only one dimension can be inferred")
    try:
        return shape, np.empty(tuple(input.shape), np.int8).reshape(shape).shape
    except ValueError:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size "
                           f"{input.numel()}") from None


def strides_of(v):
    """PyTorch's strides (in elements) of a tensor value.  NumPy gives a new empty array
    strides 0: PyTorch's are a contiguous tensor's.  (A view of an empty tensor keeps
    NumPy's: PyTorch's permuted ones cannot be told from them.)"""
    if v.__class__ is not np.ndarray:
        return ()
    if not v.size and not builtins.any(v.strides):
        return row_major_strides(v.shape)
    return tuple(s // v.itemsize for s in v.strides)


def reshape(input: Tensor, *shape: Union[int, Sequence[int]], **kw) -> Tensor:
    """The same values in a new shape (``-1`` infers one dimension): a view when the
    memory allows one (always for a contiguous tensor), else a copy, as in PyTorch."""
    shape = _shape_keyword("reshape", shape, kw, "shape")
    shape, resolved = _new_shape(input, shape)
    v = input._value
    if v.__class__ is not np.ndarray or input.__class__ is not Tensor:
        return call("reshape", input, shape=shape)
    if v.size and v.flags.c_contiguous:
        # NumPy's flag skips dims of size 1 as PyTorch's test does: what _reshape_as_torch
        # finds first, without working out the strides in Python (most of a reshape's cost)
        return call("reshape", input, shape=resolved)
    return _reshape_as_torch(input, v.shape, strides_of(v), resolved)


def view(input: Tensor, *shape: Union[int, Sequence[int]], **kw) -> Tensor:
    """The same memory in a new shape; PyTorch's error where the memory has no such view
    (use ``reshape``)."""
    shape = _shape_keyword("view", shape, kw, "size")
    shape, resolved = _new_shape(input, shape)
    v = input._value
    if v.__class__ is np.ndarray and input.__class__ is Tensor:
        strides = strides_of(v)
        if not _is_contiguous(v.shape, strides) and not _can_view(v.shape, strides, resolved):
            raise RuntimeError("view size is not compatible with input tensor's size and stride "
                               "(at least one dimension spans across two contiguous subspaces). "
                               "Use .reshape(...) instead.")
    return call("reshape", input, shape=shape)


def is_contiguous(self, memory_format=None):
    """True when the elements lie in memory in order (row-major), as PyTorch decides it."""
    v = self._value
    return v.__class__ is not np.ndarray or _is_contiguous(v.shape, strides_of(v))


def contiguous(self, memory_format=None):
    """The tensor itself when contiguous, else a copy laid out in order (CloneBackward0)."""
    if is_contiguous(self):
        return self
    out = ELEMENTWISE["clone"](self)
    out._value = np.ascontiguousarray(out._value)   # (the tape's copy is the same values)
    return out


def stride(self, dim=None):
    """Steps in memory (in elements) between neighbours along each dim."""
    s = strides_of(self._value)
    return s if dim is None else s[wrap_dim(dim, len(s))]


def data_ptr(self):
    """The address of the first element (views of one memory differ by their offset)."""
    v = self._value
    return v.ctypes.data if v.__class__ is np.ndarray else 0


def storage_offset(self):
    """Where this view starts in its base's memory, in elements (0 for a non-view)."""
    root, steps = root_and_steps(self)
    if not steps or root._value.__class__ is not np.ndarray:
        return 0
    v = view_through(root._value, steps)
    return (v.ctypes.data - root._value.ctypes.data) // v.itemsize


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal along ``dim1``/``dim2`` (a view), as the last dim."""
    if input.ndim < 2:
        raise RuntimeError(f"diagonal dimensions requested must be different, got dim1={dim1} "
                           f"and dim2={dim2}" if input.ndim and wrap_dim(dim1, input.ndim)
                           == wrap_dim(dim2, input.ndim) else
                           "diagonal(): expected a tensor of at least 2 dimensions")
    d1, d2 = wrap_dim(dim1, input.ndim), wrap_dim(dim2, input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions requested must be different, got dim1={dim1} "
                           f"and dim2={dim2}")
    return call("diagonal", input, offset, d1, d2)


def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dimensions ``start_dim`` to ``end_dim`` into one."""
    s = tuple(input.shape)
    st, e = wrap_dim(start_dim, len(s)), wrap_dim(end_dim, len(s))
    if st > e:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if not s:
        return reshape(input, (1,))
    if st == e:   # nothing to merge: the tensor itself, as PyTorch
        return input
    n = int(np.prod(s[st:e + 1], dtype=np.int64))
    return reshape(input, s[:st] + (n,) + s[e + 1:])


def squeeze(input: Tensor, dim: Optional[int] = None) -> Tensor:
    """Remove dimensions of size 1 (or only ``dim``)."""
    return call_view("squeeze", input, _dim_params(dim) if dim.__class__ is int or dim is None
                     else {"dim": dim})


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a dimension of size 1 at ``dim``."""
    return call_view("unsqueeze", input, _dim_params(dim) if dim.__class__ is int
                     else {"dim": dim})


def expand(input: Tensor, *sizes: Union[int, Sequence[int]], **kw) -> Tensor:
    """Broadcast to ``sizes`` (``-1`` keeps a dimension); the gradient sums back."""
    sizes = shape_arg(_shape_keyword("expand", sizes, kw, "size"))
    check_expand(input, sizes)
    return call("expand", input, shape=sizes)


_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))   # (gather's, scatter's, index_select's)
_TYPE_NAMES = {"float64": "Double", "float32": "Float", "float16": "Half", "int64": "Long",
               "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


def check_expand(input, sizes):
    """Raise PyTorch's error when ``input`` cannot be expanded to ``sizes``."""
    have = tuple(input.shape)
    lead = len(sizes) - len(have)
    if lead < 0:
        kind = _TYPE_NAMES.get(np.dtype(input.dtype.np).name, "Double")
        raise RuntimeError(f"expand(torch.{kind}Tensor{{{list(have)}}}, size={list(sizes)}): the "
                           f"number of sizes provided ({len(sizes)}) must be greater or equal to "
                           f"the number of dimensions in the tensor ({len(have)})")
    for k, n in enumerate(sizes):
        if k < lead:
            if n < 0:
                raise RuntimeError(f"The expanded size of the tensor ({n}) isn't allowed in a "
                                   f"leading, non-existing dimension {k}")
        elif n != -1 and have[k - lead] != 1 and n != have[k - lead]:
            raise RuntimeError(f"The expanded size of the tensor ({n}) must match the existing "
                               f"size ({have[k - lead]}) at non-singleton dimension {k}.  Target "
                               f"sizes: {list(sizes)}.  Tensor sizes: {list(have)}")


def expand_as(input: Tensor, other: Tensor) -> Tensor:
    """``expand`` to the shape of ``other``."""
    return expand(input, tuple(other.shape))


def flip(input: Tensor, *dims: Union[int, Sequence[int]], **keyword) -> Tensor:
    """Reverse the order of the elements along ``dims`` (also ``dims=``)."""
    if keyword.keys() - {"dims"}:
        raise TypeError(f"flip() got an unexpected keyword argument "
                        f"'{next(iter(keyword.keys() - {'dims'}))}'")
    return call("flip", input, dims=shape_arg(dims or (keyword["dims"],)))


def roll(input: Tensor, shifts: Union[int, Sequence[int]],
         dims: Optional[Union[int, Sequence[int]]] = None) -> Tensor:
    """Shift the elements by ``shifts`` along ``dims`` (of the flattened input without
    ``dims``), wrapping around."""
    ns = len(shifts) if isinstance(shifts, (list, tuple)) else 1
    nd = 0 if dims is None else len(dims) if isinstance(dims, (list, tuple)) else 1
    if dims is not None and ns != nd:
        raise RuntimeError(f"shifts and dimensions must align. shifts: {ns}, dims:{nd}")
    return call("roll", input, shifts=_dims(shifts) if isinstance(shifts, list) else shifts,
                dims=_dims(dims))


def _dim_params(dim):
    """``{"dim": dim}`` for a wrapped dim, one dict per dim: a recorded call is shared by
    the identity of its params (``call_arrays``), where a fresh dict cost a lookup by
    value at every ``cat``/``stack`` (1 of the LSTM cell's 6 us ``cat``)."""
    params = _DIM_PARAMS.get(dim)
    if params is None:
        params = {"dim": dim}
        if len(_DIM_PARAMS) < 64:
            _DIM_PARAMS[dim] = params
    return params


_DIM_PARAMS = {}


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate tensors along ``dim``."""
    if not len(tensors):
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    shapes = _shapes(tensors)
    if shapes[0] and shapes.count(shapes[0]) == len(shapes):   # (equal shapes: nothing to check)
        return call_arrays("cat", tuple(tensors), _dim_params(wrap_dim(dim, len(shapes[0]))))
    for k, s in enumerate(shapes):
        if not s:
            raise RuntimeError(f"zero-dimensional tensor (at position {k}) cannot be concatenated")
    dim = wrap_dim(dim, len(shapes[0]))
    for k, s in enumerate(shapes):
        if len(s) != len(shapes[0]):
            raise RuntimeError(f"Tensors must have same number of dimensions: got "
                               f"{len(shapes[0])} and {len(s)}")
        for d, (n, m) in enumerate(zip(shapes[0], s)):
            if d != dim and n != m:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. "
                                   f"Expected size {n} but got size {m} for tensor number {k} "
                                   "in the list.")
    return call("cat", *tensors, dim=dim)


concat = cat


def _shapes(tensors):
    """The shape of each tensor, as a tuple (read from its array where it has one)."""
    out = []
    for t in tensors:
        v = t._value if t.__class__ is Tensor else None
        out.append(v.shape if v.__class__ is _ND else () if v.__class__ is _float
                   else tuple(t.shape))
    return out


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack tensors along a new dimension ``dim``."""
    if not len(tensors):
        raise RuntimeError("stack expects a non-empty TensorList")
    shapes = _shapes(tensors)
    dim = wrap_dim(dim, len(shapes[0]) + 1)
    for k, s in enumerate(shapes):
        if s != shapes[0]:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(shapes[0])} at entry 0 and {list(s)} at entry {k}")
    return call_arrays("stack", tuple(tensors), _dim_params(dim))


def split(tensor: Tensor, split_size_or_sections: Union[int, Sequence[int], None] = None,
          dim: int = 0, *, split_size=None) -> Tuple[Tensor, ...]:
    """Split into pieces of ``split_size_or_sections`` along ``dim``."""
    if split_size is not None:   # (the method's keyword, as PyTorch's Tensor.split)
        split_size_or_sections = split_size
    if split_size_or_sections is None:
        raise TypeError("split() missing required argument 'split_size_or_sections'")
    if isinstance(split_size_or_sections, (int, np.integer)) and split_size_or_sections == 0 \
            and tensor.ndim and tensor.shape[wrap_dim(dim, tensor.ndim)] != 0:
        raise RuntimeError(f"split_size can only be 0 if dimension size is 0, but got dimension "
                           f"size of {tensor.shape[wrap_dim(dim, tensor.ndim)]}")
    return call("split", tensor, split_size_or_sections, dim=dim)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> Tuple[Tensor, ...]:
    """Split into ``chunks`` pieces of (nearly) equal size along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    dim = wrap_dim(dim, input.ndim)
    n = input.shape[dim]
    return split(input, -(-n // chunks), dim)


def index_value(idx):
    if isinstance(idx, Tensor):
        v = idx._value
        return np.asarray(v) if v.__class__ is not float else v
    if isinstance(idx, (list, range)):   # (x[range(n), target]: an integer array, as PyTorch)
        v = np.asarray(idx)
        return v if v.size else v.astype(np.int64)   # (x[[]]: no indices, not a float array)
    if isinstance(idx, tuple):
        return tuple(index_value(i) for i in idx)
    return idx


def _torch_index(idx):
    """Index ``idx`` as PyTorch reads it, where NumPy reads it otherwise: a list holding a
    sequence, a tensor, a slice, ``None`` or ``...`` (and shorter than 32) is a tuple of
    indices (``x[[[0, 1]]]`` is ``x[[0, 1]]``); a bool (``x[True]``) is a 0-d mask, not the
    integer 1 (a new dim taken whole or not at all); a slice's step must be positive
    (PyTorch's ValueErrors)."""
    if idx.__class__ is list and len(idx) < 32 and builtins.any(
            p is None or p is Ellipsis or isinstance(p, (Tensor, np.ndarray, list, tuple, slice))
            for p in idx):
        warnings.warn("Using a non-tuple sequence for multidimensional indexing is deprecated "
                      "and will be changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. "
                      "In pytorch 2.9 this will be interpreted as tensor index, "
                      "x[torch.tensor(seq)], which will result either in an error or a "
                      "different result", UserWarning, stacklevel=3)
        idx = tuple(idx)
    parts = idx if idx.__class__ is tuple else (idx,)
    changed = False
    for p in parts:
        if p.__class__ is slice:
            step = p.step
            if step is not None and not isinstance(step, Tensor) and step <= 0:
                raise ValueError("slice step cannot be zero" if step == 0 else
                                 "step must be greater than zero")
        elif p.__class__ is bool:
            changed = True
        elif isinstance(p, (np.bool_, np.floating, float)):
            raise IndexError(_BAD_INDEX + f"(got {_type_name_of(p)})")
    if not changed:
        return idx
    # (a 0-d mask: ``index_steps`` unsqueezes there and indexes the new dim, as PyTorch)
    parts = tuple(np.array(p) if p.__class__ is bool else p for p in parts)
    return parts if idx.__class__ is tuple else parts[0]


_BAD_INDEX = ("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
              "are valid indices ")


def _type_name_of(p):
    """A type's name as PyTorch's errors print it (Python's ``tp_name``: ``float``,
    ``numpy.bool``)."""
    t = type(p)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _uint8_masks(idx):
    """Index ``idx`` (NumPy values) with each uint8 array of one or more dims as the bool
    mask PyTorch takes it for (deprecated there: its UserWarning), not as integers."""
    parts = idx if isinstance(idx, tuple) else (idx,)
    if not builtins.any(isinstance(p, np.ndarray) and p.dtype == np.uint8 and p.ndim
                        for p in parts):
        return idx
    warnings.warn("indexing with dtype torch.uint8 is now deprecated, please use a dtype "
                  "torch.bool instead.", UserWarning, stacklevel=3)
    parts = tuple(p.astype(bool) if isinstance(p, np.ndarray) and p.dtype == np.uint8 and p.ndim
                  else p for p in parts)
    return parts if isinstance(idx, tuple) else parts[0]


def _check_uint8_fill(idx, scalar):
    """PyTorch writes a number or a 0-d value (``scalar``) through an index whose one
    array is a mask with ``masked_fill_``, which takes bool masks only: a uint8 one raises."""
    arrays = [p for p in (idx if isinstance(idx, tuple) else (idx,)) if isinstance(p, np.ndarray)]
    if scalar and len(arrays) == 1 and arrays[0].dtype == np.uint8 and arrays[0].ndim:
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           "unsigned char")


def check_index(input, idx):
    parts = idx if isinstance(idx, tuple) else (idx,)
    dims = [k for k, p in enumerate(parts) if p is not None and p is not Ellipsis]
    if len(dims) > input.ndim and not builtins.any(isinstance(p, np.ndarray) and p.dtype == bool for p in parts):
        if input.ndim == 0:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        raise IndexError(f"too many indices for tensor of dimension {input.ndim}")
    _check_masks(input.shape, parts)
    try:
        np.empty(input.shape, dtype=np.int8)[idx]
    except IndexError as e:
        msg = str(e)
        if msg.startswith("only integers, slices"):
            odd = [p for p in parts if not isinstance(p, (int, np.integer, slice, np.ndarray))
                   and p is not None and p is not Ellipsis]
            raise IndexError(_BAD_INDEX + f"(got {_type_name_of(odd[0]) if odd else 'unknown'})"
                             ) from None
        m = re.search(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)", msg)
        if m:
            dim = _pytorch_index_dim(parts, int(m.group(2)), input.ndim)
            raise IndexError(f"index {m.group(1)} is out of bounds for dimension {dim} "
                             f"with size {m.group(3)}") from None
        raise IndexError(msg) from None
    except (TypeError, ValueError) as e:
        raise IndexError(str(e)) from None


def _dims_taken(p):
    """How many dims of the input index part ``p`` takes: none for ``None`` and ``...``, a
    mask as many as it has (a 0-d one none), anything else one."""
    if p is None or p is Ellipsis:
        return 0
    return p.ndim if isinstance(p, np.ndarray) and p.dtype == bool else 1


def _check_masks(shape, parts):
    """PyTorch's error where a bool mask among index ``parts`` does not have the shape of
    the dims it covers of a tensor of ``shape``.  PyTorch applies the basic parts first (a
    ``None`` or a 0-d mask adds a dim of 1, an integer takes its dim away) and names the
    dims of that tensor."""
    d, dims, masks = 0, [], []   # d: the input's dim; dims: the tensor after the basic parts
    for k, p in enumerate(parts):
        if p is None or (isinstance(p, np.ndarray) and p.dtype == bool and not p.ndim):
            dims.append(1)
        elif p is Ellipsis:   # (the parts after it take the input's last dims)
            n = len(shape) - d - builtins.sum(map(_dims_taken, parts[k + 1:]))
            dims += shape[d:d + n]
            d += n
        elif isinstance(p, (int, np.integer)):
            d += 1
        else:
            n = _dims_taken(p)
            if isinstance(p, np.ndarray) and p.dtype == bool:
                masks.append((len(dims), p))
            dims += shape[d:d + n]
            d += n
    if d > len(shape):
        return   # (too many indices: the trial indexing's error)
    dims += shape[d:]   # (the dims no part takes)
    for at, p in masks:
        for j, n in enumerate(p.shape):
            if dims[at + j] != n:
                raise IndexError(f"The shape of the mask {list(p.shape)} at index {j} does not "
                                 f"match the shape of the indexed tensor {list(dims)} at "
                                 f"index {at + j}")


def _pytorch_index_dim(parts, axis, ndim):
    """The dim PyTorch names where index ``parts`` is out of range on NumPy's ``axis``: the
    axis for an integer (a select), the position among the index's integer arrays for one of
    them (PyTorch's index kernel counts its index tensors: ``m[:, [9]]`` is "dimension 0")."""
    d, arrays = 0, 0
    for p in parts:
        if p is None:
            continue
        if p is Ellipsis:
            d += ndim - builtins.sum(map(_dims_taken, parts))
            continue
        if isinstance(p, np.ndarray) and p.dtype == bool:
            d += p.ndim
            arrays += 1
            continue
        advanced = isinstance(p, (list, np.ndarray)) and np.ndim(p) > 0
        if d == axis:
            return arrays if advanced else axis
        arrays += advanced
        d += 1
    return axis


def note_recorded_index(idx):
    """A boolean mask computed from recorded values (``x[x > 0]``) selects other elements at
    other points: a replay of the recording could not follow it, so ``compile`` refuses."""
    T = recording()
    for part in (idx if isinstance(idx, tuple) else (idx,)):
        g = getattr(part, "_comparison", None) if isinstance(part, Tensor) else None
        if T is not None and g is not None and g[0] is T:
            note_comparison_use(T, g, "an index computed from recorded values")


def getitem(input: Tensor, idx) -> Tensor:
    """``x[idx]``: integers, slices, ``...``, ``None``, bool masks and integer arrays,
    recorded as PyTorch records them (``x[i, j]`` is two ``SelectBackward0`` nodes).  Basic
    indices give a view of ``x``'s memory, advanced ones a copy."""
    if idx.__class__ is int and input._tape is None and input.__class__ is Tensor:
        v = input._value   # the hot case (``for v in x``, ``sum(x)``): one element or row
        if v.__class__ is _ND and v.ndim and -v.shape[0] <= idx < v.shape[0]:
            part = v[idx]
            if part.__class__ is _F64:
                part = _float(part)
            elif part.__class__ is not _ND:
                part = v[idx, ...]   # (an element of another dtype: its 0-d view)
            r = _new(Tensor)   # as wrap(part), without its checks
            r._value = part
            r._tape = r._grad = r._hooks = None
            register_view(r, input, ("getitem", (idx,), _NO_PARAMS))
            return r
    if input.__class__ is Tensor and input._tape is not None and input._value.__class__ is _ND \
            and input._value.ndim and (
            (idx.__class__ is int and -input._value.shape[0] <= idx < input._value.shape[0])
            or (idx.__class__ is slice and _plain_slice(idx))):
        if idx.__class__ is int and input._value.dtype is _DT64:
            r = select_recorded(input, idx)
            if r is not None:
                return r
        return basic_index(input, idx)   # one step, nothing to check: c[3], c[0:3]
    if idx is None:   # (c[None]: one new dim, as c[None, ...])
        idx = (None,)
    if idx.__class__ is tuple and input._tape is not None and input.__class__ is Tensor:
        r = _select_each(input, idx)   # (M[i, j]: a SelectBackward0 per int, as PyTorch's)
        if r is not None:
            return r
    if idx.__class__ is tuple and input.__class__ is Tensor and input._value.__class__ is _ND \
            and (input._tape is not None or getattr(input, "_comparison", None) is None):
        steps = basic_steps(input._value.shape, idx)
        if steps:   # views only, nothing to check
            for step, node in steps:
                input = basic_index(input, step, node)
            return input
    if input.__class__ is Tensor and input._value.__class__ is _ND:
        out = _integer_index(input, idx)
        if out is not None:
            return out
    idx = _torch_index(idx)
    tensors = index_tensors(idx)
    for t in tensors:
        v = t._value
        if v.__class__ is _ND and v.dtype.kind == "i" and v.dtype.itemsize < 4:
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    note_recorded_index(idx)
    idx = _uint8_masks(index_value(idx))
    check_index(input, idx)
    return _noting_index(index(input, idx), tensors)


def _select_each(x, idx):
    """``x[i, j, ...]`` with ints in range only, of a float64 tensor with history: one
    ``select_recorded`` per int (``M[i, j]`` 7.4 -> 5.5 us, PyTorch's 2.4); None where the
    first one does not apply (a later one that does not goes through ``basic_index``, as
    ``basic_steps`` would)."""
    v = x._value
    if v.__class__ is not _ND or v.dtype is not _DT64 or not 0 < len(idx) <= v.ndim:
        return None
    for k, n in zip(idx, v.shape):
        if k.__class__ is not int or not -n <= k < n:
            return None
    r = select_recorded(x, idx[0])
    if r is None:
        return None
    for k in idx[1:]:
        x = r
        r = select_recorded(x, k)
        if r is None:
            r = basic_index(x, k)
    return r


def _integer_index(input, idx):
    """``x[i]`` or ``x[:, ..., :, i]`` (full slices, then one int32 or int64 array or tensor
    of at least one dim: GMM's ``icf[:, index]``, a gather of rows) as ``getitem`` records it:
    the one ``IndexBackward0`` step ``index_steps`` gives, without the general path's
    analysis of the index (16-21 us of a 3-4 us op).  None for anything else, and where an
    index is out of range (the general path raises PyTorch's error; nothing recorded yet)."""
    if idx.__class__ is tuple:
        if not idx:
            return None
        p = idx[-1]
        for s in idx[:-1]:
            if s.__class__ is not slice or s.start is not None or s.stop is not None \
                    or s.step is not None:
                return None
    else:
        p = idx
    t = None
    if p.__class__ is Tensor:
        if p._tape is not None or getattr(p, "_comparison", None) is not None:
            return None
        t, p = p, p._value
    if p.__class__ is not _ND or p.dtype not in _INDEX_DTYPES or not p.ndim:
        return None   # (int8 and int16 tensors: the general path raises PyTorch's error)
    if idx.__class__ is tuple:
        if len(idx) > input._value.ndim:
            return None
        step = idx[:-1] + (p,)
    else:
        step = p
    try:
        out = call("getitem", input, step)
    except IndexError:
        return None
    return out if t is None else _noting_index(out, [t])


def index_tensors(idx):
    """The tensors among index ``idx``'s parts (integer tensors, masks): their memory is the
    recorded index, which the backward reads."""
    if isinstance(idx, Tensor):
        return [idx]
    return [p for p in idx if isinstance(p, Tensor)] if isinstance(idx, tuple) else []


def _noting_index(out, tensors):
    """``out``, recorded with ``tensors`` as its index (``note_index_versions``)."""
    if tensors and out._tape is not None:
        note_index_versions(out, tensors)
    return out


def _plain_slice(s):
    """A slice of ints (or Nones) with a positive step: valid on any dim."""
    start, stop, step = s.start, s.stop, s.step
    return ((start is None or start.__class__ is int) and (stop is None or stop.__class__ is int)
            and (step is None or (step.__class__ is int and step > 0)))


def iterate(self):
    """``for v in x``: the views ``x[0]``, ``x[1]``, ...: for a tensor with a graph, the
    outputs of one ``unbind`` (PyTorch's ``__iter__``: one ``UnbindBackward0`` node, not a
    ``SelectBackward0`` per element); else each read when it is reached."""
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    if self._tape is None:
        if self.__class__ is Tensor and self._value.__class__ is _ND:
            return _parts(self, self._value)
    elif isinstance(self, Tensor):
        return iter(unbind(self, 0))
    return (self[k] for k in range(self.shape[0]))


def _parts(x, v, block=256):
    """``x[k]`` for each k, as ``getitem``'s fast path makes them, made ``block`` at a time
    (a vector's elements read by one ``tolist``, registered as views in one pass; not all
    at once: iterating a long vector of data keeps a block of tensors, not one per
    element)."""
    n = v.shape[0]
    flat = v.ndim == 1 and v.dtype == np.float64
    for start in range(0, n, block):
        stop = builtins.min(start + block, n)
        if flat:
            values = v[start:stop].tolist()
        else:
            values = []
            for k in range(start, stop):
                part = v[k]
                if part.__class__ is _F64:
                    part = _float(part)
                elif part.__class__ is not _ND:
                    part = v[k, ...]
                values.append(part)
        parts = []
        for part in values:
            r = _new(Tensor)
            r._value = part
            r._tape = r._grad = r._hooks = None
            parts.append(r)
        register_parts(parts, x, [("getitem", (k,), _NO_PARAMS) for k in range(start, stop)])
        yield from parts


def gather(input: Tensor, dim: int, index) -> Tensor:
    """``out[i][j] = input[index[i][j]][j]`` for ``dim`` 0 (and so on): the result has the
    index's shape, which may be smaller than the input's in every dim but ``dim``
    (repeated indices accumulate in backward)."""
    tensors = index_tensors(index)
    index = np.asarray(index_value(index))
    if index.dtype not in _INDEX_DTYPES:
        raise RuntimeError("gather(): Expected dtype int32/int64 for index")
    dim = wrap_dim(dim, input.ndim)
    have, want = tuple(input.shape) or (1,), index.shape or (1,)
    if len(want) != len(have):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    for d, (n, m) in enumerate(zip(have, want)):
        if d != dim and m > n:
            raise RuntimeError(f"Size does not match at dimension {d} expected index {list(want)} "
                               f"to be no larger than self {list(have)} apart from dimension {dim}")
    bad = (index < 0) | (index >= have[dim])
    if bad.any():
        raise RuntimeError(f"index {int(index[bad].flat[0])} is out of bounds for dimension {dim} "
                           f"with size {have[dim]}")
    return _noting_index(call("gather", input, dim, index), tensors)


def index_select(input: Tensor, dim: int, index) -> Tensor:
    """Slices of ``input`` along ``dim`` at the integer ``index`` (a vector)."""
    tensors = index_tensors(index)
    index = np.asarray(index_value(index))
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if index.dtype not in _INDEX_DTYPES:
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    dim = wrap_dim(dim, input.ndim)
    if input.ndim == 0 and index.size != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                           f"{index.size} value(s)")
    n = input.shape[dim] if input.ndim else 1
    if np.any(index >= n) or np.any(index < -n):
        raise IndexError("index out of range in self")
    return _noting_index(call("index_select", input, dim, index), tensors)


def take(input: Tensor, index) -> Tensor:
    """Elements of the flattened input at ``index``."""
    tensors = index_tensors(index)
    index = index_value(index)
    if np.asarray(index).dtype != np.int64:
        dt = np.asarray(index).dtype.name
        raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                           f"{_TYPE_NAMES.get(dt, dt)}")
    if np.any(index >= input.numel()) or np.any(index < -input.numel()):
        raise IndexError(f"out of range: tried to access index {int(np.max(index))} on a "
                         f"tensor of {input.numel()} elements.")
    return _noting_index(call("take", input, index), tensors)


def setitem(input: Tensor, idx, value) -> None:
    """``x[idx] = value``, in place under the in-place rules (recorded as CopySlices)."""
    idx = _torch_index(idx)
    tensors = index_tensors(idx)
    note_recorded_index(idx)
    idx = index_value(idx)
    _check_uint8_fill(idx, not isinstance(value, Tensor) or value.ndim == 0)
    idx = _uint8_masks(idx)
    check_index(input, idx)
    if not isinstance(value, Tensor):   # a constant input: an edge without a node, as PyTorch's
        value = wrap(np.asarray(value))
    steps = index_steps(tuple(input.shape), idx)
    target = index_shape(tuple(input.shape), idx)
    advanced = is_advanced_index(steps[-1])
    whole = steps[-1]
    whole = len(steps) == 1 and (whole == () if isinstance(whole, tuple) else
                                 whole is Ellipsis or (input.ndim and _full(whole, input.shape[0])))
    if not (len(steps) == 1 and (advanced or whole)) and input.is_leaf and \
            input._tape is not None and recording() is not None:
        raise RuntimeError(inplace_views.LEAF_VIEW)   # PyTorch writes into a view of x
    stripped = without_leading_ones(value.shape)
    if advanced:
        _check_put_shape(stripped, target)
    elif value.shape != target:
        check_expand(wrap(np.empty(stripped, np.int8)), target)
    if value._tape is not None and value.ndim and value.shape != target:
        # PyTorch views the value without its leading ones, then expands it over x's view
        # (a 0-d value it passes to fill_ as it is)
        if not advanced or stripped != tuple(value.shape):
            value = reshape(value, stripped)
        if not advanced and value.shape != target:
            value = expand(value, target)
    if whole:
        row = "fill_with" if value.ndim == 0 else "copy"   # all of x: as fill_ or copy_
        input._inplace(lambda s: call(row, s, value))
        return
    with writing_a_view():   # (PyTorch writes into a view of x)
        input._inplace(lambda s: call("index_put", s, idx, value))
    _noting_index(input, tensors)


def _check_put_shape(stripped, target):
    """PyTorch's error where a value (without its leading ones) does not broadcast to the
    shape an advanced index selects."""
    try:
        fits = np.broadcast_shapes(stripped, target) == target
    except ValueError:
        fits = False
    if not fits:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(stripped)} cannot "
                           f"be broadcast to indexing result of shape {list(target)}")


# -- dtypes and devices ---------------------------------------------------------------------

_LEGACY_TYPES = {f"torch.{name}Tensor": getattr(np, key) for key, name in _TYPE_NAMES.items()}


def _convert(self, dt):
    """``self`` as dtype ``dt``: recorded (differentiable) between float types, a constant
    otherwise (an integer or bool tensor never requires grad)."""
    if dt is self.dtype:
        return self
    if dt.is_floating_point and self.dtype.is_floating_point:
        return call("to_dtype", self, dtype=dt.np)
    v = self._value
    with np.errstate(invalid="ignore"):   # nan -> int: PyTorch's value, without a warning
        return wrap(np.asarray(v).astype(dt.np))


def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False,
       memory_format=None):
    """This tensor converted to a dtype and/or device: ``to(dtype)``, ``to(device)``,
    ``to(device, dtype)``, ``to(other)`` (other's dtype), with keywords as PyTorch.  The
    tensor itself when nothing changes (unless ``copy=True``); differentiable between float
    types.  Only the CPU is a device here (``tg.device``)."""
    for a in args:
        if isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, (str, _device)) or (isinstance(a, (int, np.integer))
                                                and not isinstance(a, bool)):
            device = a if not isinstance(a, (int, np.integer)) else _device(a)
        elif isinstance(a, bool):
            pass   # non_blocking: a CPU copy has nothing to wait for
        else:
            dtype = as_dtype(a)
    if device is not None:
        as_device(device)
    out = self if dtype is None else _convert(self, as_dtype(dtype))
    if copy and out is self:
        out = ELEMENTWISE["clone"](self)
    return out


def cpu(self, memory_format=None):
    """This tensor (tapegrad's tensors are always on the CPU)."""
    return self


def cuda(self, device=None, non_blocking=False, memory_format=None):
    """Raises as PyTorch built without CUDA."""
    raise AssertionError("Torch not compiled with CUDA enabled")


def _dtype_method(dt, name):
    def convert(self, memory_format=None):
        return _convert(self, dt)
    convert.__name__ = name
    convert.__doc__ = f"``to(tg.{dt.name})``."
    return convert


def tensor_type(self, dtype=None, non_blocking=False):
    """``x.type()``: PyTorch's type name (``'torch.DoubleTensor'``); ``x.type(dtype)``: the
    tensor converted (``dtype`` may be such a name)."""
    if dtype is None:
        return f"torch.{_TYPE_NAMES[self.dtype.name]}Tensor"
    if isinstance(dtype, str) and dtype.startswith("torch."):
        if dtype not in _LEGACY_TYPES:
            raise ValueError(f"invalid type: '{dtype}'")
        dtype = _LEGACY_TYPES[dtype]
    elif callable(dtype) and getattr(dtype, "__name__", "") in LEGACY_CONSTRUCTORS:
        dtype = _LEGACY_TYPES["torch." + dtype.__name__]
    return _convert(self, as_dtype(dtype))


def type_as(self, other):
    """This tensor converted to ``other``'s dtype."""
    return _convert(self, other.dtype)


def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
    """A new tensor of ``data`` with this tensor's dtype (unless ``dtype``)."""
    return _new_tensor(data, dtype=dtype or self.dtype, device=device,
                       requires_grad=requires_grad)


def _new_factory(fill):
    def factory(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
                pin_memory=False, **kw):
        as_device(device)
        shape = factory_shape(size if size else (kw.pop("size"),))
        v = fill(shape, (dtype and as_dtype(dtype) or self.dtype).np, **kw)
        if requires_grad:
            check_float(v)
        return wrap(v, requires_grad)
    return factory


def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False,
             layout=None, pin_memory=False):
    """A tensor of ``size`` filled with ``fill_value``, of this tensor's dtype."""
    return _new_factory(lambda s, dt: np.full(s, fill_value, dt))(
        self, size, dtype=dtype, device=device, requires_grad=requires_grad)


def element_size(self):
    """The size of one element in bytes."""
    return self.dtype.itemsize


# -- reductions to indices and truth values ------------------------------------------------------

def _numpy_names(fn):
    """Accept NumPy's ``axis=``/``keepdims=`` for ``dim=``/``keepdim=``, as PyTorch does."""
    def with_aliases(*args, **kw):
        if "axis" in kw:
            if "dim" in kw:
                raise TypeError(f"{fn.__name__}() got multiple values for argument 'dim'")
            kw["dim"] = kw.pop("axis")
        if "keepdims" in kw:
            kw["keepdim"] = kw.pop("keepdims")
        return fn(*args, **kw)
    with_aliases.__name__, with_aliases.__doc__ = fn.__name__, fn.__doc__
    with_aliases.__wrapped__ = fn
    return with_aliases


def _array(x):
    """``x``'s values as a NumPy array, read into Python (an index, a mask, a count): for a
    recorded value (or a comparison of recorded values) the read is noted, so that a replay
    of the tape, which could not follow it, is refused (``RetraceRequired``); tg.compile's
    elements refuse to be read."""
    if not isinstance(x, Tensor):
        return np.asarray(x)
    if x.__class__ is not Tensor:
        return np.asarray(x)
    T = x._tape
    g = (T, x._entry) if T.__class__ is Tape else getattr(x, "_comparison", None)
    if T is not None and g is None:   # a leaf not on a tape yet: before everything
        R = recording()
        g = (R, -1) if R is not None else None
    if g is not None and g[0] is recording():
        note_comparison_use(g[0], g, "values read into NumPy (a mask, an index, a count)")
    return np.asarray(x._value)


def _reduce_dims(fn, input, dim, keepdim):
    v = _array(input)
    if dim is None:
        out = fn(v, axis=None, keepdims=keepdim) if keepdim else fn(v)
        return out
    if v.ndim == 0:
        wrap_dim(dim if isinstance(dim, int) else 0, 1)
        return fn(v)
    axes = tuple(wrap_dim(d, v.ndim) for d in dim) if isinstance(dim, (tuple, list)) \
        else wrap_dim(dim, v.ndim)
    return fn(v, axis=axes, keepdims=keepdim)


def _arg(fn, name, input, dim, keepdim):
    v = _array(input)
    if v.size == 0 and (dim is None or v.ndim == 0 or v.shape[wrap_dim(dim, v.ndim)] == 0):
        raise IndexError(f"{name}(): Expected reduction dim to be specified for input.numel() "
                         "== 0." if dim is None else
                         f"{name}(): Expected reduction dim {dim} to have non-zero size.")
    if dim is None:
        out = fn(v.reshape(-1))
        return wrap(np.asarray(out, np.int64).reshape((1,) * v.ndim if keepdim else ()))
    if v.ndim == 0:
        wrap_dim(dim, 1)
        return wrap(np.zeros((), np.int64))
    d = wrap_dim(dim, v.ndim)
    return wrap(np.asarray(fn(v, axis=d, keepdims=keepdim), np.int64))


def argmax(input, dim=None, keepdim=False):
    """The index of the largest element (of the flattened tensor, or along ``dim``); a NaN
    counts as the largest."""
    return _arg(np.argmax, "argmax", input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    """The index of the smallest element (a NaN counts as the smallest, as PyTorch)."""
    return _arg(np.argmin, "argmin", input, dim, keepdim)


def _truth(fn, input, dim, keepdim):
    v = _array(input)
    # (row-major, as PyTorch writes all's and any's results whatever the input's layout)
    out = rows_in_order(np.asarray(_reduce_dims(fn, v.astype(bool), dim, keepdim)))
    return wrap(out.astype(np.uint8) if v.dtype == np.uint8 else out)


def all(input, dim=None, keepdim=False):  # noqa: A001
    """True when every element is nonzero (over ``dim``: an int or a tuple)."""
    return _truth(np.all, input, dim, keepdim)


def any(input, dim=None, keepdim=False):  # noqa: A001
    """True when some element is nonzero (over ``dim``)."""
    return _truth(np.any, input, dim, keepdim)


def _predicate(fn, name):
    def test(input):
        v = _array(input)
        if v.dtype.kind != "f":
            return wrap(np.full(v.shape, fn is np.isfinite))
        return wrap(np.asarray(fn(v)))
    test.__name__ = name
    test.__doc__ = f"Elementwise ``{name}``: a bool tensor."
    return test


isnan = _predicate(np.isnan, "isnan")
isinf = _predicate(np.isinf, "isinf")
isfinite = _predicate(np.isfinite, "isfinite")
isposinf = _predicate(np.isposinf, "isposinf")
isneginf = _predicate(np.isneginf, "isneginf")


def _logical(fn, name):
    def logical(input, other):
        return wrap(np.asarray(fn(_array(input).astype(bool), _array(other).astype(bool))))
    logical.__name__ = name
    logical.__doc__ = f"Elementwise ``{name}`` of the truth values: a bool tensor."
    return logical


logical_and = _logical(np.logical_and, "logical_and")
logical_or = _logical(np.logical_or, "logical_or")
logical_xor = _logical(np.logical_xor, "logical_xor")


def logical_not(input):
    """Elementwise not of the truth values: a bool tensor."""
    return wrap(np.logical_not(_array(input)))


def _bit_dtype(a, b):
    """The result dtype of a bitwise op (PyTorch's promotion for bool and integer types)."""
    da = _array(a).dtype
    if isinstance(b, Tensor):
        db = _array(b).dtype
        if b.ndim == 0 and a.ndim:   # a 0-d tensor counts only when of a higher category
            return da if (da.kind != "b" or db.kind == "b") else np.promote_types(da, db)
        return np.promote_types(da, db)
    if isinstance(b, (bool, np.bool_)):
        return da
    return da if da.kind != "b" else np.dtype(np.int64)


def _bitwise(fn, name):
    def bitwise(input, other):
        for x in (input, other):
            v = _array(x)
            if v.dtype.kind == "f":
                raise NotImplementedError(f"\"{name}_cpu\" not implemented for "
                                          f"'{_TYPE_NAMES[v.dtype.name]}'")
        dt = _bit_dtype(input, other) if isinstance(input, Tensor) else _bit_dtype(other, input)
        out = fn(_array(input).astype(dt), _array(other).astype(dt))
        return wrap(np.asarray(out, dt))
    bitwise.__name__ = name
    bitwise.__doc__ = f"Elementwise ``{name}`` of bool or integer tensors (``&``, ``|``, ``^``)."
    return bitwise


bitwise_and = _bitwise(np.bitwise_and, "bitwise_and")
bitwise_or = _bitwise(np.bitwise_or, "bitwise_or")
bitwise_xor = _bitwise(np.bitwise_xor, "bitwise_xor")


def bitwise_not(input):
    """Elementwise not of a bool tensor, or the bitwise not of an integer tensor."""
    v = _array(input)
    if v.dtype.kind == "f":
        raise NotImplementedError(f"\"bitwise_not_cpu\" not implemented for "
                                  f"'{_TYPE_NAMES[v.dtype.name]}'")
    return wrap(np.asarray(np.invert(v)))


def invert(self):
    """``~x``: ``bitwise_not`` of a bool or integer tensor."""
    if self.dtype.is_floating_point:
        raise TypeError("~ (operator.invert) is only implemented on integer and Boolean-type "
                        "tensors")
    return bitwise_not(self)


def equal(input, other):
    """True when the two tensors have the same shape and elements (a Python bool)."""
    a, b = _array(input), _array(other)
    return bool(a.shape == b.shape and np.array_equal(a, b))


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Elementwise ``|input - other| <= atol + rtol * |other|`` (infinities equal to
    themselves): a bool tensor."""
    a, b = _array(input), _array(other)
    if isinstance(input, Tensor) and isinstance(other, Tensor) and a.dtype != b.dtype:
        raise RuntimeError(f"{_TYPE_NAMES[a.dtype.name]} did not match "
                           f"{_TYPE_NAMES[b.dtype.name]}")
    np.broadcast_shapes(a.shape, b.shape) if not _broadcast_error(a, b) else None
    with np.errstate(all="ignore"):
        return wrap(np.asarray(np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


def _broadcast_error(a, b):
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        sa, sb = a.shape[::-1], b.shape[::-1]
        k = next(i for i, (m, n) in enumerate(zip(sa, sb)) if m != n and 1 not in (m, n))
        raise RuntimeError(f"The size of tensor a ({sa[k]}) must match the size of tensor b "
                           f"({sb[k]}) at non-singleton dimension "
                           f"{builtins.max(a.ndim, b.ndim) - 1 - k}") from None
    return False


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """True when every element is close (``isclose``): a Python bool."""
    return bool(np.all(isclose(input, other, rtol, atol, equal_nan)._value))


def nonzero(input, *, as_tuple=False):
    """The indices of the nonzero elements: an (n, ndim) int64 tensor, or with ``as_tuple``
    one index tensor per dim."""
    v = _array(input)
    if as_tuple:
        if v.ndim == 0:
            return (wrap(np.zeros(int(v != 0), np.int64)),)
        return tuple(wrap(i.astype(np.int64)) for i in np.nonzero(v))
    return wrap(np.argwhere(v).astype(np.int64))


def count_nonzero(input, dim=None):
    """The number of nonzero elements (over ``dim``)."""
    return wrap(rows_in_order(np.asarray(np.count_nonzero(_array(input), axis=dim), np.int64)))


# -- sorting, selecting, scattering ----------------------------------------------------------

SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])


def sort(input, dim=-1, descending=False, stable=False):
    """``(values, indices)`` sorted along ``dim`` (stably; NaN counts as the largest); the
    values are differentiable (each gradient goes back to its element)."""
    if isinstance(dim, bool):   # sort(x, True): descending, as PyTorch's overload
        dim, descending = -1, dim
    if input.ndim:
        wrap_dim(dim, input.ndim)
    vals, idx = call("sort", input, dim=dim, descending=descending)
    return SortResult(vals, idx)


def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort ``input`` along ``dim`` (int64)."""
    return wrap(everyday_ops.sort_indices(_array(input), dim, descending))


def msort(input):
    """``input`` sorted along dim 0."""
    return sort(input, 0).values


def topk(input, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    """``(values, indices)`` of the ``k`` largest (or smallest) elements along ``dim``."""
    n = input.shape[wrap_dim(dim, input.ndim)] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    vals, idx = call("topk", input, k, dim=dim, largest=largest, sorted=sorted)
    return TopkResult(vals, idx)


def _index_array(index):
    index = np.asarray(index_value(index))
    if index.dtype not in _INDEX_DTYPES:   # (PyTorch names scatter_reduce's "scatter()" too)
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    return index.astype(np.int64)


def _check_scatter(input, dim, index, src, name):
    dim = wrap_dim(dim, builtins.max(input.ndim, 1))
    n = input.shape[dim] if input.ndim else 1
    if index.size and (index.min() < -n or index.max() >= n):
        raise RuntimeError(f"index {int(index.max() if index.max() >= n else index.min())} is "
                           f"out of bounds for dimension {dim} with size {n}")
    if builtins.max(index.ndim, 1) != builtins.max(input.ndim, 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    return dim


def scatter(input, dim, index, src=None, value=None, *, reduce=None):
    """``input`` with ``src`` (a tensor, or a number) written along ``dim`` at ``index``:
    ``out[index[i][j]][j] = src[i][j]`` for dim 0.  Differentiable in ``input`` (where not
    overwritten) and ``src``."""
    if reduce not in (None, "add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    src = value if src is None else src
    tensors = index_tensors(index)
    index = _index_array(index)
    dim = _check_scatter(input, dim, index, src, "scatter")
    index = index % (input.shape[dim] if input.ndim else 1)
    if reduce is not None:   # PyTorch has no derivative for these (a backward raises)
        if isinstance(src, Tensor):
            warnings.warn("The reduce argument of torch.scatter with Tensor src is deprecated "
                          "and will be removed in a future PyTorch release. Use "
                          "torch.scatter_reduce instead for more reduction options.",
                          UserWarning, stacklevel=2)
        return call("scatter_folded", input, dim, index, src, reduce)
    if isinstance(src, Tensor) and src.ndim == 0 and index.ndim:
        src = src.item()
    return _noting_index(call("scatter", input, dim, index, src), tensors)


def scatter_add(input, dim, index, src):
    """``input`` with ``src`` added along ``dim`` at ``index`` (repeated indices add up)."""
    tensors = index_tensors(index)
    index = _index_array(index)
    dim = _check_scatter(input, dim, index, src, "scatter_add")
    index = index % (input.shape[dim] if input.ndim else 1)
    return _noting_index(call("scatter_add", input, dim, index, src), tensors)


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):
    """``input`` with each ``src`` value folded into its place along ``dim`` at ``index`` by
    ``reduce`` (``"sum"``, ``"prod"``, ``"mean"``, ``"amax"``, ``"amin"``), the place's own
    value included unless ``include_self=False``.  Differentiable in ``input`` and ``src``
    (PyTorch's ``scatter_reduce_backward``: ties of amax/amin share the gradient)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_reduce(): argument 'src' (position 3) must be Tensor, not "
                        f"{type(src).__name__}")
    reduce = {"max": "amax", "min": "amin"}.get(reduce, reduce)   # PyTorch's aliases
    if reduce not in ("sum", "prod", "mean", "amax", "amin"):
        raise RuntimeError(f"reduce argument must be either sum, prod, mean, amax or amin, got "
                           f"{reduce}")
    tensors = index_tensors(index)
    index = _index_array(index)
    dim = _check_scatter(input, dim, index, src, "scatter_reduce")
    if input.dtype != src.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    index = index % (input.shape[dim] if input.ndim else 1)
    if src.ndim and tuple(src.shape) != index.shape:   # only this part is scattered
        src = src[tuple(slice(0, n) for n in index.shape)]
    return _noting_index(call("scatter_reduce", input, dim, index, src, reduce, include_self),
                         tensors)


def index_add(input, dim, index, source, *, alpha=1):
    """``input`` with ``alpha * source`` slices added along ``dim`` at ``index``."""
    tensors = index_tensors(index)
    index = np.asarray(index_value(index))
    if index.dtype not in _INDEX_DTYPES:
        raise RuntimeError(f"index_add_(): Expected dtype int32/int64 for index but got: "
                           f"{_TYPE_NAMES.get(index.dtype.name, index.dtype.name)}")
    index = index.astype(np.int64).reshape(-1)
    dim = wrap_dim(dim, builtins.max(input.ndim, 1))
    n = input.shape[dim] if input.ndim else 1
    if index.size and (index.min() < 0 or index.max() >= n):
        raise IndexError("index out of range in self")
    k = source.shape[dim] if source.ndim else 1
    if index.size != k:
        raise RuntimeError(f"index_add_(): Number of indices ({index.size}) should be equal to "
                           f"source.size(dim): ({k}), for dim: {dim}")
    if source.ndim != input.ndim or builtins.any(
            a != b for j, (a, b) in enumerate(zip(input.shape, source.shape)) if j != dim):
        raise RuntimeError("source tensor shape must match self tensor shape, excluding the "
                           f"specified dimension. Got self.shape = {list(input.shape)} "
                           f"source.shape = {list(source.shape)}")
    return _noting_index(call("index_add", input, dim, index, source, alpha=alpha), tensors)


def index_copy(input, dim, index, source):
    """``input`` with its slices along ``dim`` at ``index`` replaced by ``source``'s (PyTorch's
    checks, in its order: the index's dims and dtype, the dtypes, the slices' shapes, the
    count, the bounds)."""
    tensors = index_tensors(index)
    index = np.asarray(index_value(index))
    if index.ndim > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.ndim})")
    if index.dtype != np.int64:
        raise RuntimeError("index_copy_(): Expected a long tensor for index, but got "
                           f"{_TYPE_NAMES.get(index.dtype.name, index.dtype.name)}")
    index = index.reshape(-1)
    dim = wrap_dim(dim, builtins.max(input.ndim, 1))
    if input.dtype != source.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype, but "
                           f"got (self) {_type_name(input)} and (source) {_type_name(source)}")
    if source.ndim == 0:
        if index.size != 1:
            raise IndexError("index_copy_(): When source is scalar, index should have one "
                             f"element (got {index.size})")
    elif input.ndim and source.ndim != input.ndim:
        raise IndexError("index_copy_(): When source and destination are not scalars, their "
                         f"dimensionality must match. Source dimensionality ({source.ndim}), "
                         f"destination dimensionality ({input.ndim})")
    else:
        mine, theirs = (tuple(n for k, n in enumerate(t.shape) if k != dim) for t in (input, source))
        if mine != theirs:   # (PyTorch names dimension 0 for the source's)
            raise RuntimeError(
                "index_copy_(): Source/destination tensor must have same slice shapes. "
                f"Destination slice shape: {' '.join(map(str, mine))} at dimension {dim} and "
                f"source slice shape: {' '.join(map(str, theirs))} at dimension 0.")
        if index.size != source.shape[dim]:
            raise IndexError(f"index_copy_(): Number of indices ({index.size}) should be equal "
                             f"to source.size(dim) ({source.shape[dim]})")
    n = input.shape[dim] if input.ndim else 1
    bad = index[(index < 0) | (index >= n)]
    if bad.size:
        raise IndexError(f"index_copy_(): index {bad[0]} is out of bounds for dimension {dim} "
                         f"with size {n}")
    return _noting_index(call("index_copy", input, dim, index, source), tensors)


def _type_name(t):
    return _TYPE_NAMES.get(t._value.dtype.name if t._value.__class__ is np.ndarray else "float64")


def index_put(input, indices, values, accumulate=False):
    """``input`` with ``values`` written at the advanced index ``indices`` (a tuple of
    integer or mask tensors); ``accumulate``: added, a repeated place getting every value."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError("index_put(): argument 'indices' (position 1) must be tuple of Tensors, "
                        f"not {type(indices).__name__}")
    for k, t in enumerate(indices):
        if not isinstance(t, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 0, but got "
                            f"{type(t).__name__}")
    if not isinstance(values, Tensor):
        raise TypeError("index_put(): argument 'values' (position 2) must be Tensor, not "
                        f"{type(values).__name__}")
    if input.dtype != values.dtype:
        raise RuntimeError("Index put requires the source and destination dtypes match, got "
                           f"{_type_name(input)} for the destination and {_type_name(values)} "
                           "for the source.")
    idx = tuple(indices)
    tensors = index_tensors(idx)
    note_recorded_index(idx)
    idx = index_value(idx)
    _check_uint8_fill(idx, values.ndim == 0)
    idx = _uint8_masks(idx)
    check_index(input, idx)
    # (all of the value's dims: index_put drops no leading ones, where x[i] = v does)
    _check_put_shape(tuple(values.shape), index_shape(tuple(input.shape), idx))
    # a 0-d integer index as a one-element one: the same places, and PyTorch's advanced
    # index (IndexPutBackward0), where NumPy takes a 0-d array as a basic index (CopySlices)
    idx = tuple(i.reshape(1) if i.__class__ is np.ndarray and i.ndim == 0 and i.dtype.kind in "iu"
                else i for i in idx)
    op = "index_put_add" if accumulate else "index_put"
    return _noting_index(call(op, input, idx, values), tensors)


def masked_fill(input, mask, value):
    """``input`` with ``value`` (a number or a 0-d tensor) where ``mask`` is True."""
    m = _array(mask)
    if m.dtype != np.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{_TORCH_DTYPE_NAMES.get(m.dtype.name, m.dtype.name)}")
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")
    _broadcast_error(m, _array(input))
    return call("masked_fill", input, m, value)


def _inplace_row(fn, name=None):
    """The in-place form of ``fn(self, ...)`` (named ``name``, else ``fn``'s name and
    ``_``): the result replaces ``self``'s value (under the in-place rules of
    ``Tensor._inplace``)."""
    def inplace(self, *args, **kw):
        aliased = builtins.any(a is self for a in args) or builtins.any(a is self for a in kw.values())
        return self._inplace(lambda s: fn(s, *args, **kw), aliased)
    inplace.__name__ = name or fn.__name__ + "_"
    inplace.__doc__ = f"In place ``{fn.__name__}``."
    return inplace


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each element (or slice along ``dim``) repeated ``repeats`` times (an int, or a
    tensor of counts); the flattened input when ``dim`` is None."""
    if repeats is None:   # repeat_interleave(counts): indices repeated by their counts
        counts = _array(input).astype(np.int64)
        return wrap(np.repeat(np.arange(counts.size, dtype=np.int64), counts))
    if dim is None:
        input, dim = reshape(input, -1), 0
    dim = wrap_dim(dim, builtins.max(input.ndim, 1))
    if isinstance(repeats, Tensor) and repeats.numel() == 1 and repeats.ndim == 0:
        repeats = repeats.item()
    if isinstance(repeats, (int, np.integer)):
        if repeats < 0:
            raise RuntimeError("Repeats must be non-negative")
        if input.ndim == 0:
            input = reshape(input, 1)
        shape = tuple(input.shape)
        # as PyTorch: a new dim after ``dim``, expanded, then merged (one ViewBackward0)
        x = call("expand", unsqueeze(input, dim + 1),
                 shape=shape[:dim + 1] + (int(repeats),) + shape[dim + 1:])
        return call("reshape", ELEMENTWISE["clone"](x) if x._tape is None else x,
                    shape=shape[:dim] + (shape[dim] * int(repeats),) + shape[dim + 1:])
    counts = _array(repeats).astype(np.int64).reshape(-1)
    n = input.shape[dim] if input.ndim else 1
    if counts.size not in (1, n):
        raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                           f"repeats.size(0) = {counts.size} and input.size(0) = {n}")
    if np.any(counts < 0):
        raise RuntimeError("repeats can not be negative")
    return call("index_select", input, dim, np.repeat(np.arange(n), counts))


def einsum(equation, *operands):
    """Einstein summation (NumPy's ``einsum`` forward); differentiable in every operand: a
    gradient is the einsum of the result's gradient with the other operands."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    operands = tuple(o if isinstance(o, Tensor) else wrap(np.asarray(o)) for o in operands)
    _check_einsum(equation, operands)
    return call("einsum", equation, *operands)


def _check_einsum(equation, operands):
    """PyTorch's errors for an equation the operands do not fit."""
    ins, out = everyday_ops.parse_einsum(equation, [tuple(o.shape) for o in operands])
    seen = {}
    for k, (sub, o) in enumerate(zip(ins, operands)):
        for c, n in zip(sub, o.shape):
            m = seen.setdefault(c, n)
            if n != m and 1 not in (n, m):
                raise RuntimeError(f"einsum(): subscript {c} has size {n} for operand {k} which "
                                   f"does not broadcast with previously seen size {m}")
            if m == 1:
                seen[c] = n
    for c in out:
        if c not in seen:
            raise RuntimeError(f"einsum(): output subscript {c} does not appear in the equation "
                               "for any input operand")


def cross(input, other, dim=None):
    """The cross product of 3-vectors along ``dim`` (the first dim of size 3 when None, as
    ``torch.cross``); operands broadcast."""
    sa, sb = _shapes((input, other))
    if len(sa) != len(sb):
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    if dim is None:
        shape = _broadcast_shape(input, other)
        dim = next((k for k, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    d = wrap_dim(dim, len(sa))
    if sa[d] != 3 or sb[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{sa[d]} and {sb[d]}")
    if sa != sb:
        _broadcast_shape(input, other)
    return call_arrays("cross", (input, other), {"dim": d})


def _broadcast_shape(a, b):
    """The broadcast shape of two tensors, or PyTorch's error (from their shapes alone: no
    value is read)."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    if sa == sb:
        return sa
    _broadcast_error(a, b)
    return np.broadcast_shapes(sa, sb)


def linalg_cross(input, other, *, dim=-1):
    """``tg.linalg.cross``: the cross product along ``dim`` (the last by default)."""
    return cross(input, other, dim=dim)


_TORCH_DTYPE_NAMES = {"float64": "double", "float32": "float", "float16": "half",
                      "int64": "long int", "int32": "int", "uint8": "unsigned char"}


def _unary_inplace_methods():
    """``sin_``, ``exp_``, ``relu_``... for every unary method row of the op table: the row
    applied in place (``Tensor._inplace``); an integer tensor refuses a float result, as
    PyTorch does."""
    methods = {}
    for op in optable.OPS:
        if op.arity != 1 or not op.method or op.name in ("clone",):
            continue
        fn = ELEMENTWISE[op.name]

        def inplace(self, fn=fn, op=op):
            if not op.int_result and not self.dtype.is_floating_point:
                raise RuntimeError(f"result type {_TYPE_NAMES[get_default_dtype().name]} can't "
                                   f"be cast to the desired output type "
                                   f"{_TYPE_NAMES[self.dtype.name]}")
            return self._inplace(fn)
        inplace.__name__ = f"{op.name}_"
        inplace.__doc__ = f"In place ``{op.name}``."
        methods[inplace.__name__] = inplace
    return methods


# -- more of what PyTorch programs use: compositions of the rows above -----------------------

def repeat(input, *sizes):
    """The tensor tiled ``sizes`` times along each dim (leading new dims allowed)."""
    sizes = shape_arg(sizes)
    if len(sizes) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    return call("repeat", input, tuple(int(k) for k in sizes))


def tile(input, dims):
    """``repeat`` with ``dims`` padded with leading ones to the tensor's dims."""
    dims = shape_arg((dims,))
    return repeat(input, (1,) * (input.ndim - len(dims)) + tuple(dims))


def tril(input, diagonal=0):
    """The lower triangle (on and below ``diagonal``) of the last two dims; zeros above."""
    _check_matrix(input, "tril")
    return call("tril", input, diagonal)


def triu(input, diagonal=0):
    """The upper triangle (on and above ``diagonal``); zeros below."""
    _check_matrix(input, "triu")
    return call("triu", input, diagonal)


def _check_matrix(input, name):
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")


def diag(input, diagonal=0):
    """A vector's diagonal matrix, or a matrix's diagonal (offset ``diagonal``)."""
    if input.ndim not in (1, 2):
        raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " f"{input.ndim}D")
    return call("diag", input, diagonal)


def trace(input):
    """The sum of a matrix's diagonal."""
    if input.ndim != 2:
        raise RuntimeError("trace: expected a matrix, but got tensor with dim " f"{input.ndim}")
    return call("trace", input)


def bmm(input, mat2):
    """Batched matrix product of two 3-D tensors."""
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor" if input.ndim != 3 else
                           "batch2 must be a 3D tensor")
    return call("matmul", input, mat2)


def _times(t, s):
    """``t * s`` for the ``beta``/``alpha`` of ``addmm`` and its kin, where a factor of 0
    ignores ``t`` as PyTorch's (its NaN and inf do not reach the result; its gradient is
    zeros): ``where(False, t, 0.)``."""
    if s == 1:
        return t
    if s == 0:
        return ELEMENTWISE["where"](wrap(np.zeros(t.shape, bool)), t, 0.0)
    return t * s


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat1 @ mat2)`` (a ``beta`` of 0 ignores ``input``)."""
    return _times(input, beta) + _times(mm(mat1, mat2), alpha)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * (batch1 @ batch2)``."""
    return _times(input, beta) + _times(bmm(batch1, batch2), alpha)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):
    """``beta * input + alpha * sum_i batch1[i] @ batch2[i]``."""
    return _times(input, beta) + _times(sum(bmm(batch1, batch2), 0), alpha)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    """``beta * input + alpha * (mat @ vec)``."""
    return _times(input, beta) + _times(mv(mat, vec), alpha)


def unbind(input, dim=0):
    """The slices along ``dim``, as a tuple: one ``UnbindBackward0`` node's outputs (views
    that an in-place op refuses, as PyTorch's multi-output views)."""
    if input.ndim == 0:
        raise IndexError("Dimension specified as 0 but tensor has no dimensions")
    dim = wrap_dim(dim, input.ndim)
    if input.shape[dim] == 0:
        return ()
    return call("unbind", input, dim=dim)


def narrow(input, dim, start, length):
    """Elements ``start`` to ``start + length`` along ``dim`` (a view)."""
    dim = wrap_dim(dim, input.ndim)
    size = input.shape[dim]
    start = int(start)
    if not -size <= start <= size:
        raise IndexError(f"start out of range (expected to be in range of [{-size}, {size}], "
                         f"but got {start})")
    start %= builtins.max(size, 1) if start < 0 else size + 1
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    if start + length > size:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({size}).")
    return getitem(input, (slice(None),) * dim + (slice(start, start + length),))


def select(input, dim, index):
    """The slice at ``index`` along ``dim`` (``x.select(0, i)`` is ``x[i]``)."""
    dim = wrap_dim(dim, input.ndim)
    size = input.shape[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {dim}")
    return getitem(input, (slice(None),) * dim + (index,))


def masked_select(input, mask):
    """The elements where ``mask`` (broadcast) is True, as a 1-D tensor."""
    m = _array(mask)
    if m.dtype != np.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = np.broadcast_shapes(tuple(input.shape), m.shape)
    x = input if tuple(input.shape) == shape else expand(input, shape)
    return getitem(x, np.broadcast_to(m, shape))


def broadcast_to(input, size):
    """``expand`` to ``size``."""
    return expand(input, size)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common shape."""
    shape = np.broadcast_shapes(*(tuple(t.shape) for t in tensors))
    return tuple(t if tuple(t.shape) == shape else expand(t, shape) for t in tensors)


def view_as(input, other):
    """``view`` to ``other``'s shape."""
    return view(input, tuple(other.shape))


def unflatten(input, dim, sizes):
    """Dimension ``dim`` split into ``sizes`` (one of them may be -1): a reshape."""
    d = wrap_dim(dim, input.ndim)
    shape = tuple(input.shape)
    return reshape(input, shape[:d] + tuple(sizes) + shape[d + 1:])


def reshape_as(input, other):
    """``reshape`` to ``other``'s shape."""
    return reshape(input, tuple(other.shape))


def swapaxes(input, axis0, axis1):
    """``transpose`` (NumPy's name)."""
    return transpose(input, axis0, axis1)


def movedim(input, source, destination):
    """Move dims ``source`` to positions ``destination`` (ints or sequences)."""
    def dims(d):
        return [wrap_dim(k, input.ndim) for k in (d if isinstance(d, (list, tuple)) else [d])]
    src, dst = dims(source), dims(destination)
    order = [d for d in range(input.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return permute(input, tuple(order))


_E = ELEMENTWISE


def square(input):
    """``x ** 2``."""
    return _E["pow"](input, 2)


def rsqrt(input):
    """``1 / sqrt(x)``."""
    return _E["reciprocal"](_E["sqrt"](input))


def log2(input):
    """The base-2 logarithm."""
    return _E["log"](input) * (1.0 / np.log(2.0))


def log10(input):
    """The base-10 logarithm."""
    return _E["log"](input) * (1.0 / np.log(10.0))


def frac(input):
    """``x - trunc(x)``."""
    return input - _E["trunc"](input)


def asinh(input):
    """The inverse hyperbolic sine."""
    return _E["sign"](input) * _E["log"](_E["abs"](input) + _E["sqrt"](input * input + 1.0)) \
        if not _grad_free(input) else _np_unary(np.arcsinh, input)


def acosh(input):
    """The inverse hyperbolic cosine."""
    return _E["log"](input + _E["sqrt"](input * input - 1.0)) if not _grad_free(input) \
        else _np_unary(np.arccosh, input)


def atanh(input):
    """The inverse hyperbolic tangent."""
    return (_E["log1p"](input) - _E["log1p"](-input)) * 0.5 if not _grad_free(input) \
        else _np_unary(np.arctanh, input)


def _grad_free(x):
    """Does ``x`` record nothing: a number, or a tensor without a tape that is not one of
    ``tg.compile``'s elements (whose class takes array ops: ``__tapegrad_array_op__``)?"""
    return not isinstance(x, Tensor) or (
        x._tape is None and getattr(type(x), "__tapegrad_array_op__", None) is None)


def _np_unary(fn, input):
    """``fn`` on a tensor that records nothing: NumPy's value (exact, no composition)."""
    v = _array(input)
    with np.errstate(all="ignore"):
        out = fn(v if v.dtype.kind == "f" else v.astype(get_default_dtype().np))
    return wrap(np.asarray(out))


def deg2rad(input):
    """Degrees to radians."""
    return input * (np.pi / 180.0)


def rad2deg(input):
    """Radians to degrees."""
    return input * (180.0 / np.pi)


def hypot(input, other):
    """``sqrt(x^2 + y^2)``."""
    return _E["sqrt"](input * input + other * other)


def _log_sum(input, other, exp, log):
    """``log(exp(x) + exp(y))`` shifted by the larger: ``logaddexp`` and ``logaddexp2``.
    The shift's own gradient cancels (the result does not depend on it; at ties each input
    gets half, as PyTorch's): no detach, so tg.compile can record it."""
    m = _E["maximum"](input, other)
    m = _E["where"](_E["abs"](m) == np.inf, 0.0, m)
    return m + log(exp(input - m) + exp(other - m))


def logaddexp(input, other):
    """``log(exp(x) + exp(y))``, computed stably."""
    return _log_sum(input, other, _E["exp"], _E["log"])


def lerp(input, end, weight):
    """``input + weight * (end - input)``, rounded as PyTorch's (``array_ops.lerp``)."""
    return call("lerp", input, end, weight)


def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 * tensor2``."""
    return input + (tensor1 * tensor2 if value == 1 else tensor1 * tensor2 * value)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 / tensor2``."""
    return input + (tensor1 / tensor2 if value == 1 else tensor1 / tensor2 * value)


def clamp_min(input, min):  # noqa: A002
    """``clamp(x, min=min)`` as PyTorch's ``clamp_min`` (its node: ``ClampMinBackward0/1``)."""
    return _E["clamp_min"](input, min)


def clamp_max(input, max):  # noqa: A002
    """``clamp(x, max=max)`` as PyTorch's ``clamp_max`` (its node: ``ClampMaxBackward0/1``)."""
    return _E["clamp_max"](input, max)


def _integral(*xs):
    return builtins.all(not isinstance(x, Tensor) or not x.dtype.is_floating_point for x in xs) \
        and not builtins.any(isinstance(x, float) for x in xs)


def remainder(input, other):
    """Python's ``%``: the remainder with the sign of ``other`` (``x - floor(x / y) * y``)."""
    if _integral(input, other) or (_grad_free(input) and _grad_free(other)):
        _check_integer_divisor(input, other)
        a, b = _array(input), _array(other)
        with np.errstate(all="ignore"):
            out = np.remainder(a, b)
        return wrap(np.asarray(out, dtype=_result_of(input, other, out)))
    return call("remainder", input, other)


def fmod(input, other):
    """C's ``fmod``: the remainder with the sign of ``input``."""
    if _integral(input, other) or (_grad_free(input) and _grad_free(other)):
        _check_integer_divisor(input, other)
        a, b = _array(input), _array(other)
        with np.errstate(all="ignore"):
            out = np.fmod(a, b)
        return wrap(np.asarray(out, dtype=_result_of(input, other, out)))
    return call("fmod", input, other)


def _check_integer_divisor(input, other):
    if _integral(input, other) and np.any(_array(other) == 0):
        raise RuntimeError("ZeroDivisionError")


def _requires_grad(*xs):
    return builtins.any(isinstance(x, Tensor) and x._tape is not None for x in xs)


def floor_divide(input, other, _inplace=False):
    """``floor(x / y)`` (PyTorch records it with no derivative: a backward through it
    raises)."""
    _check_integer_divisor(input, other)
    if _requires_grad(input, other) and recording() is not None:
        return call("floor_divide", input, other, inplace=_inplace)
    a, b = _array(input), _array(other)
    with np.errstate(all="ignore"):
        out = np.floor_divide(a, b)
    return wrap(np.asarray(out, dtype=_result_of(input, other, out)))


def _result_of(input, other, out):
    """The dtype of an arithmetic result: ``input``'s unless ``other`` is of a higher kind."""
    t = input if isinstance(input, Tensor) else other
    dt = t.dtype.np
    o = other if t is input else input
    if isinstance(o, float) and dt.kind != "f":
        return get_default_dtype().np
    if isinstance(o, Tensor) and o.ndim and (o.dtype.np.kind == "f") != (dt.kind == "f"):
        return o.dtype.np if o.dtype.np.kind == "f" else dt
    if isinstance(o, Tensor) and o.ndim:
        return np.promote_types(dt, o.dtype.np)
    return dt


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """NaN as ``nan``, +-inf as ``posinf``/``neginf`` (the dtype's largest finite values by
    default); the gradient passes where the value was finite."""
    fi = np.finfo(input.dtype.np) if input.dtype.is_floating_point else None
    if fi is None:
        return input
    hi = fi.max if posinf is None else posinf
    lo = fi.min if neginf is None else neginf
    x = _E["where"](input != input, float(nan), input)
    x = _E["where"](x == np.inf, float(hi), x)
    return _E["where"](x == -np.inf, float(lo), x)


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """Differences of neighbours along ``dim`` (``n`` times)."""
    dim = wrap_dim(dim, input.ndim)
    if prepend is not None or append is not None:
        input = cat([t for t in (prepend, input, append) if t is not None], dim)
    for _ in range(n):
        k = input.shape[dim]
        lo = (slice(None),) * dim + (slice(0, k - 1),)
        hi = (slice(None),) * dim + (slice(1, k),)
        input = getitem(input, hi) - getitem(input, lo)
    return input


def meshgrid(*tensors, indexing="ij"):
    """Coordinate grids of 1-D tensors (``indexing="ij"`` or ``"xy"``)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    n = len(tensors)
    sizes = [t.numel() for t in tensors]
    if indexing == "xy" and n >= 2:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for k, t in enumerate(tensors):
        axis = k
        if indexing == "xy" and n >= 2 and k < 2:
            axis = 1 - k
        shape = [1] * n
        shape[axis] = t.numel()
        out.append(expand(reshape(t, tuple(shape)), tuple(sizes)))
    return tuple(out)


def logspace(start, end, steps, base=10.0, dtype=None, device=None, requires_grad=False,
             layout=None, pin_memory=False, out=None):
    """``base ** linspace(start, end, steps)``."""
    as_device(device)
    dt = (as_dtype(dtype) if dtype is not None else get_default_dtype()).np
    v = np.logspace(start, end, steps, base=base).astype(dt)
    if requires_grad:
        check_float(v)
    return wrap(v, requires_grad)


def cdist(x1, x2, p=2.0):
    """Pairwise ``p``-norm distances between the rows of ``x1`` and ``x2`` (batched)."""
    d = unsqueeze(x1, -2) - unsqueeze(x2, -3)
    return norm(d, p=p, dim=-1)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    """``x1 . x2 / max(|x1| |x2|, eps)`` along ``dim``."""
    w12 = sum(x1 * x2, dim)
    n1 = sum(x1 * x1, dim)
    n2 = sum(x2 * x2, dim)
    return w12 / _E["sqrt"](_E["clamp"](n1 * n2, eps * eps, None))


_threads = [1]


def get_num_threads() -> int:
    """The thread count set by ``set_num_threads`` (tapegrad's sweeps run on one thread)."""
    return _threads[0]


def set_num_threads(n: int) -> None:
    """Accepted for PyTorch programs; tapegrad's kernels run on one thread whatever it is."""
    if int(n) < 1:
        raise RuntimeError("set_num_threads expects a positive integer")
    _threads[0] = int(n)


# -- stacking, picking and statistics (compositions of the rows above) --------------------------

def atleast_1d(*tensors):
    """Each tensor with at least 1 dim."""
    out = tuple(reshape(t, (1,)) if t.ndim == 0 else t for t in _tensor_args(tensors))
    return out[0] if len(out) == 1 else out


def atleast_2d(*tensors):
    """Each tensor with at least 2 dims (a vector becomes a row)."""
    out = tuple(reshape(t, (1,) * (2 - t.ndim) + tuple(t.shape)) if t.ndim < 2 else t
                for t in _tensor_args(tensors))
    return out[0] if len(out) == 1 else out


def atleast_3d(*tensors):
    """Each tensor with at least 3 dims (as NumPy: (n,) -> (1, n, 1), (m, n) -> (m, n, 1))."""
    def lift(t):
        if t.ndim == 0:
            return reshape(t, (1, 1, 1))
        if t.ndim == 1:
            return reshape(t, (1, t.shape[0], 1))
        if t.ndim == 2:
            return unsqueeze(t, -1)
        return t
    out = tuple(lift(t) for t in _tensor_args(tensors))
    return out[0] if len(out) == 1 else out


def _tensor_args(tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(tensors[0])
    return tensors


def hstack(tensors):
    """Concatenate along dim 1 (dim 0 for vectors)."""
    ts = atleast_1d(*tensors)
    ts = ts if isinstance(ts, tuple) else (ts,)
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def vstack(tensors):
    """Concatenate rows (vectors become rows)."""
    ts = atleast_2d(*tensors)
    return cat(ts if isinstance(ts, tuple) else (ts,), 0)


def dstack(tensors):
    """Concatenate along dim 2 (after ``atleast_3d``)."""
    ts = atleast_3d(*tensors)
    return cat(ts if isinstance(ts, tuple) else (ts,), 2)


def column_stack(tensors):
    """Vectors as columns, matrices as they are, concatenated along dim 1."""
    return cat([reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in tensors], 1)


def fliplr(input):
    """Reverse the columns."""
    return flip(input, 1)


def flipud(input):
    """Reverse the rows."""
    return flip(input, 0)


def rot90(input, k=1, dims=(0, 1)):
    """Rotate by 90 degrees ``k`` times in the plane of ``dims``."""
    k %= 4
    d0, d1 = dims
    if k == 1:
        return transpose(flip(input, d1), d0, d1)
    if k == 2:
        return flip(input, (d0, d1))
    if k == 3:
        return flip(transpose(input, d0, d1), d1)
    return input


def kron(input, other):
    """The Kronecker product."""
    a, b = atleast_1d(input), atleast_1d(other)
    n = builtins.max(a.ndim, b.ndim)
    a = reshape(a, (1,) * (n - a.ndim) + tuple(a.shape))
    b = reshape(b, (1,) * (n - b.ndim) + tuple(b.shape))
    shape_a, shape_b = tuple(a.shape), tuple(b.shape)
    inter_a = tuple(x for s in shape_a for x in (s, 1))
    inter_b = tuple(x for s in shape_b for x in (1, s))
    out = reshape(a, inter_a) * reshape(b, inter_b)
    return reshape(out, tuple(p * q for p, q in zip(shape_a, shape_b)))


def tensordot(a, b, dims=2):
    """Contract the last ``dims`` dims of ``a`` with the first of ``b`` (or the listed dims)."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    if isinstance(dims, (int, np.integer)):
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = [list(d) if isinstance(d, (list, tuple)) else [d] for d in dims]
    da = [wrap_dim(d, a.ndim) for d in da]
    db = [wrap_dim(d, b.ndim) for d in db]
    sa = list(letters[:a.ndim])
    sb = list(letters[a.ndim:a.ndim + b.ndim])
    for i, j in zip(da, db):
        sb[j] = sa[i]
    out = [c for k, c in enumerate(sa) if k not in da] + \
        [c for k, c in enumerate(sb) if k not in db]
    return einsum(f"{''.join(sa)},{''.join(sb)}->{''.join(out)}", a, b)


def block_diag(*tensors):
    """The tensors (matrices, vectors as rows, numbers) on the diagonal of a zero matrix."""
    mats = [reshape(t, (1, 1)) if t.ndim == 0 else reshape(t, (1, t.shape[0])) if t.ndim == 1
            else t for t in tensors]
    cols = builtins.sum(m.shape[1] for m in mats)
    rows, at = [], 0
    for m in mats:
        r, c = m.shape
        pad = [wrap(np.zeros((r, at), m.dtype.np)), m,
               wrap(np.zeros((r, cols - at - c), m.dtype.np))]
        rows.append(cat(pad, 1))
        at += c
    return cat(rows, 0)


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """The last dim of ``input`` on diagonal ``offset`` of new matrices (the last two dims)."""
    if (dim1, dim2) not in ((-2, -1), (input.ndim - 1, input.ndim)):
        raise NotImplementedError("diag_embed: only the last two dims are supported")
    return _diag_embed_offset(input, offset)


def _diag_embed_offset(input, offset):
    # zeros with the values written on diagonal ``offset``: an index_put (differentiable)
    m = input.shape[-1]
    n = m + abs(offset)
    rows = np.arange(m) + builtins.max(-offset, 0)
    cols = np.arange(m) + builtins.max(offset, 0)
    base = wrap(np.zeros(tuple(input.shape[:-1]) + (n, n), input.dtype.np))
    return call("index_put", base, (Ellipsis, rows, cols), input)


def take_along_dim(input, indices, dim=None):
    """``gather`` with ``indices`` broadcast against ``input`` (flattened when ``dim`` is None)."""
    if dim is None:
        return take(input, indices)
    idx = np.asarray(index_value(indices))
    dim = wrap_dim(dim, input.ndim)
    shape = list(np.broadcast_shapes(tuple(d for k, d in enumerate(input.shape) if k != dim),
                                     tuple(d for k, d in enumerate(idx.shape) if k != dim)))
    full_idx = np.broadcast_to(idx, tuple(shape[:dim]) + (idx.shape[dim],) + tuple(shape[dim:]))
    x_shape = tuple(shape[:dim]) + (input.shape[dim],) + tuple(shape[dim:])
    x = input if tuple(input.shape) == x_shape else expand(input, x_shape)
    # (a copy of the index, as PyTorch's broadcast: a later in-place change of ``indices``
    # reaches neither the result nor its backward)
    return gather(x, dim, np.array(full_idx, order="C"))


MinMaxResult = namedtuple("aminmax", ["min", "max"])
ValuesIndices = namedtuple("values_indices", ["values", "indices"])


def aminmax(input, *, dim=None, keepdim=False):
    """``(min, max)`` (over ``dim``)."""
    return MinMaxResult(amin(input, dim if dim is not None else (), keepdim),
                        amax(input, dim if dim is not None else (), keepdim))


def _cumulative_extreme(input, dim, better):
    v = _array(input)
    dim = wrap_dim(dim, builtins.max(v.ndim, 1))
    if v.ndim == 0:
        return ValuesIndices(input * 1.0 if input.dtype.is_floating_point else input,
                             wrap(np.zeros((), np.int64)))
    moved = np.moveaxis(v, dim, -1)
    idx = np.zeros(moved.shape, np.int64)
    best = moved[..., 0].copy()
    for k in range(1, moved.shape[-1]):
        take_new = better(moved[..., k], best) | np.isnan(moved[..., k])
        take_new &= ~np.isnan(best)
        best = np.where(take_new, moved[..., k], best)
        idx[..., k] = np.where(take_new, k, idx[..., k - 1])
    idx = rows_in_order(np.ascontiguousarray(np.moveaxis(idx, -1, dim)))
    return ValuesIndices(gather(input, dim, idx), wrap(idx))


def cummax(input, dim):
    """``(values, indices)`` of the running maximum along ``dim`` (differentiable values)."""
    return _cumulative_extreme(input, dim, np.greater_equal)


def cummin(input, dim):
    """``(values, indices)`` of the running minimum along ``dim``."""
    return _cumulative_extreme(input, dim, np.less_equal)


def logcumsumexp(input, dim):
    """log(cumsum(exp(x))) along ``dim``, shifted by the maximum for stability."""
    m = amax(input, dim, True)   # (its gradient cancels, as logaddexp's shift)
    m = ELEMENTWISE["where"](ELEMENTWISE["abs"](m) == np.inf, 0.0, m)
    return ELEMENTWISE["log"](cumsum(ELEMENTWISE["exp"](input - m), dim)) + m


def _kth(input, k, dim, keepdim, nan_wins=False):
    """Values and indices of the k-th smallest (0-based) along ``dim`` (with ``nan_wins``, a
    row's first NaN instead where it has one, as PyTorch's median)."""
    dim = wrap_dim(dim, builtins.max(input.ndim, 1))
    vals, idx = call("kthvalue", input, k, dim, keepdim=keepdim, nan_wins=nan_wins)
    return ValuesIndices(vals, idx)


def kthvalue(input, k, dim=-1, keepdim=False):
    """``(values, indices)`` of the ``k``-th smallest element (1-based) along ``dim``."""
    n = input.shape[wrap_dim(dim, input.ndim)] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    return _kth(input, k - 1, dim, keepdim)


def median(input, dim=None, keepdim=False):
    """The lower median (of all elements, or ``(values, indices)`` along ``dim``); a NaN
    makes it NaN, as PyTorch."""
    if dim is None:
        flat = reshape(input, -1)
        n = flat.shape[0]
        if n == 0:
            return wrap(np.asarray(np.nan, input.dtype.np))
        v = _array(flat)
        if v.dtype.kind == "f" and np.isnan(v).any():
            return getitem(flat, int(np.flatnonzero(np.isnan(v))[0]))
        return _kth(flat, (n - 1) // 2, 0, False).values
    n = input.shape[wrap_dim(dim, input.ndim)] if input.ndim else 1
    vals, idx = _kth(input, (n - 1) // 2, dim, keepdim, nan_wins=True)
    return ValuesIndices(vals, idx)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The ``q``-quantiles (a number or a 1-D tensor) with linear interpolation between order
    statistics (differentiable)."""
    if interpolation != "linear":
        raise NotImplementedError("quantile: only interpolation='linear' is supported")
    x = reshape(input, -1) if dim is None else input
    d = 0 if dim is None else wrap_dim(dim, input.ndim)
    qs = _array(q).astype(np.float64)
    if np.any((qs < 0) | (qs > 1)):
        raise RuntimeError("quantile() q values must be in the range [0, 1]")
    srt = sort(x, d).values
    n = x.shape[d]
    outs = []
    for qq in np.atleast_1d(qs):
        pos = qq * (n - 1)
        lo, hi = int(np.floor(pos)), int(np.ceil(pos))
        a = select_along(srt, d, lo)
        b = select_along(srt, d, hi)
        r = a + (b - a) * (pos - lo)
        outs.append(unsqueeze(r, d) if keepdim else r)
        if keepdim and dim is None:
            outs[-1] = reshape(r, (1,) * input.ndim)
    return outs[0] if np.ndim(qs) == 0 else stack(outs, 0)


def select_along(x, dim, k):
    """``x`` at index ``k`` of ``dim`` (that dim removed)."""
    return getitem(x, (slice(None),) * dim + (k,))


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """``quantile`` ignoring NaNs (all elements only)."""
    if dim is not None:
        raise NotImplementedError("nanquantile: only dim=None is supported")
    v = _array(input).reshape(-1)
    return quantile(getitem(reshape(input, -1), ~np.isnan(v)), q, interpolation=interpolation)


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum with NaNs counted as 0."""
    return sum(ELEMENTWISE["where"](input != input, 0.0, input), dim, keepdim, dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the elements that are not NaN."""
    keep = input == input
    count = sum(keep, dim, keepdim)
    return nansum(input, dim, keepdim, dtype=dtype) / count


def var_mean(input, dim=None, *, correction=1, keepdim=False, unbiased=None):
    """``(var, mean)``."""
    c = correction if unbiased is None else int(bool(unbiased))
    return (var(input, dim, keepdim=keepdim, correction=c), mean(input, dim, keepdim))


def std_mean(input, dim=None, *, correction=1, keepdim=False, unbiased=None):
    """``(std, mean)``."""
    c = correction if unbiased is None else int(bool(unbiased))
    return (std(input, dim, keepdim=keepdim, correction=c), mean(input, dim, keepdim))


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    """The distinct elements (sorted), with the inverse indices and counts if asked."""
    if dim is not None:
        raise NotImplementedError("unique(dim=...) is not supported")
    vals, inverse, counts = np.unique(_array(input), return_inverse=True, return_counts=True)
    out = [wrap(vals)]
    if return_inverse:
        out.append(wrap(inverse.reshape(tuple(input.shape)).astype(np.int64)))
    if return_counts:
        out.append(wrap(counts.astype(np.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def bincount(input, weights=None, minlength=0):
    """Counts of each non-negative integer (weighted sums with ``weights``)."""
    v = _array(input)
    if v.ndim != 1 or v.dtype.kind not in "iu":
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if weights is None:
        return wrap(np.bincount(v, minlength=minlength).astype(np.int64))
    n = builtins.max(int(v.max()) + 1 if v.size else 0, minlength)
    return call("ungather", weights, (n,), 0, v) if isinstance(weights, Tensor) and \
        weights._tape is not None else wrap(np.bincount(v, _array(weights), minlength))


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    """Insertion points of ``values`` in ``sorted_sequence`` (along its last dim)."""
    s, v = _array(sorted_sequence), _array(values)
    side = side or ("right" if right else "left")
    if s.ndim == 1:
        out = np.searchsorted(s, v, side=side)
    else:
        out = np.stack([np.searchsorted(r, q, side=side)
                        for r, q in zip(s.reshape(-1, s.shape[-1]), v.reshape(-1, v.shape[-1]))])
        out = out.reshape(v.shape)
    return wrap(np.asarray(out, np.int32 if out_int32 else np.int64))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    """The bucket of each element among the 1-D ``boundaries``."""
    out = np.searchsorted(_array(boundaries), _array(input), side="right" if right else "left")
    return wrap(np.asarray(out, np.int32 if out_int32 else np.int64))


def histc(input, bins=100, min=0, max=0):  # noqa: A002
    """A histogram of ``bins`` equal bins between ``min`` and ``max`` (the data's range when
    both are 0)."""
    v = _array(input).astype(np.float64).reshape(-1)
    lo, hi = (float(v.min()), float(v.max())) if min == 0 and max == 0 and v.size else (min, max)
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    counts, _ = np.histogram(v[(v >= lo) & (v <= hi)], bins=bins, range=(lo, hi))
    return wrap(counts.astype(input.dtype.np if input.dtype.is_floating_point else np.float64))


def signbit(input):
    """True where the sign bit is set (-0. included)."""
    return wrap(np.signbit(_array(input)))


def heaviside(input, values, _inplace=False):
    """0 below zero, 1 above, ``values`` at zero (PyTorch records it with no derivative)."""
    if _requires_grad(input, values) and recording() is not None:
        return call("heaviside", input, values, inplace=_inplace)
    return wrap(np.asarray(np.heaviside(_array(input), _array(values))).astype(input.dtype.np))


def _compared_inplace(name, alias=None):
    """``x.eq_(y)`` ...: the comparison written into ``x`` (0/1 of its dtype), recorded
    as PyTorch's EqBackward0/1 (zero gradients) where ``x`` has history."""
    def inplace(self, other):
        return self._inplace(lambda s: call("compared", s, other, kind=name), other is self)
    inplace.__name__ = f"{alias or name}_"
    inplace.__doc__ = f"In place ``{name}``, as 0/1 of this tensor's dtype."
    return inplace


def copysign(input, other):
    """``|input|`` with ``other``'s sign (differentiable in ``input``)."""
    s = np.where(np.signbit(np.broadcast_to(_array(other), np.broadcast_shapes(
        tuple(input.shape), np.shape(_array(other))))), -1.0, 1.0)
    return ELEMENTWISE["abs"](input) * wrap(s)


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """The trapezoidal rule along ``dim`` (spacing ``dx``, or sample points ``x``)."""
    dim = wrap_dim(dim, y.ndim)
    n = y.shape[dim]
    lo = select_range(y, dim, 0, n - 1)
    hi = select_range(y, dim, 1, n)
    if x is None:
        return sum(lo + hi, dim) * (0.5 * (1.0 if dx is None else dx))
    xd = diff(x, dim=-1 if x.ndim == 1 else dim)
    if x.ndim == 1 and y.ndim > 1:
        xd = reshape(xd, (n - 1,) + (1,) * (y.ndim - 1 - dim))
    return sum((lo + hi) * xd, dim) * 0.5


def select_range(x, dim, start, stop):
    """``x[start:stop]`` along ``dim``."""
    return getitem(x, (slice(None),) * dim + (slice(start, stop),))


def tensor_split(input, indices_or_sections, dim=0):
    """Split into ``n`` nearly equal pieces (the first ones one longer), or at indices."""
    dim = wrap_dim(dim, input.ndim)
    n = input.shape[dim]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        sizes = [n // k + (1 if i < n % k else 0) for i in range(k)]
        bounds = np.cumsum([0] + sizes)
    else:
        bounds = [0] + [builtins.min(int(i), n) for i in index_value(indices_or_sections)] + [n]
    return tuple(select_range(input, dim, int(a), builtins.max(int(a), int(b)))
                 for a, b in zip(bounds[:-1], bounds[1:]))


# -- linear algebra ----------------------------------------------------------------------------

SlogdetResult = namedtuple("slogdet", ["sign", "logabsdet"])


def inv(A):
    """The inverse of a square matrix (or of each in a batch)."""
    linalg_ops.check_square(A, "inv")
    return call("inv", A)


def det(A):
    """The determinant of a square matrix (or of each in a batch)."""
    linalg_ops.check_square(A, "det")
    return call("det", A)


def slogdet(A):
    """``(sign, logabsdet)`` of the determinant; ``logabsdet`` is differentiable."""
    linalg_ops.check_square(A, "slogdet")
    logabsdet, sign = call("slogdet", A)
    return SlogdetResult(sign, logabsdet)


def logdet(A):
    """log(det(A)): NaN for a negative determinant, -inf for a zero one."""
    sign, logabsdet = slogdet(A)
    return ELEMENTWISE["where"](sign < 0, np.nan, logabsdet)


def solve(A, B, *, left=True):
    """``X`` with ``A X = B`` (``left=False``: ``X A = B``)."""
    linalg_ops.check_square(A, "solve")
    if not left:
        return transpose(solve(transpose(A, -2, -1), transpose(B, -2, -1)), -2, -1)
    n = A.shape[-1]
    k = B.shape[-1] if B.ndim == 1 else B.shape[-2]
    if k != n:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation AX = "
                           f"B ({n}x{n} and {'x'.join(map(str, B.shape))})")
    return call("solve", A, B)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """The ``ord``-norm of ``x`` flattened, or over ``dim``."""
    return call("norm", _as(x, dtype), p=ord, dim=_dims(dim, x.ndim), keepdim=keepdim)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):  # noqa: A002
    """The matrix norm ``ord`` of the matrices over ``dim``: ``"fro"``, ``"nuc"`` (the sum of
    the singular values), 2 and -2 (the largest and smallest), 1 and -1 (the largest and
    smallest column sum of absolute values), ``inf`` and ``-inf`` (row sums), as PyTorch's
    compositions of them."""
    if ord == "fro":
        return vector_norm(A, 2, tuple(dim), keepdim, dtype=dtype)
    if ord not in ("nuc", 2, -2, 1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    A = _as(A, dtype)
    d0, d1 = (wrap_dim(d, A.ndim) for d in dim)
    if ord in ("nuc", 2, -2):
        s = linalg_ops.linalg_svdvals(movedim(A, (d0, d1), (-2, -1)))
        out = sum(s, -1) if ord == "nuc" else amax(s, -1) if ord == 2 else amin(s, -1)
        if keepdim:
            out = unsqueeze(unsqueeze(out, builtins.min(d0, d1)), builtins.max(d0, d1))
        return out
    absolute = ELEMENTWISE["abs"](A)
    summed, other = (d0, d1) if ord in (1, -1) else (d1, d0)
    sums = sum(absolute, summed, keepdim=True)
    out = amax(sums, other, keepdim=True) if ord in (1, math.inf) else amin(sums, other,
                                                                            keepdim=True)
    return out if keepdim else squeeze(squeeze(out, builtins.max(d0, d1)), builtins.min(d0, d1))


def linalg_norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """``vector_norm`` or ``matrix_norm`` as ``torch.linalg.norm`` chooses."""
    matrix_dims = isinstance(dim, (tuple, list)) and len(dim) == 2
    if isinstance(ord, str) or (ord is not None and matrix_dims):
        return matrix_norm(A, ord if ord is not None else "fro", dim or (-2, -1), keepdim,
                           dtype=dtype)
    if ord is None and dim is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def vecdot(x, y, *, dim=-1):
    """The dot products of ``x`` and ``y`` along ``dim``."""
    return sum(x * y, dim)


# -- random fills and draws ----------------------------------------------------------------------

def _fill_random(self, values):
    """``self``'s values replaced by ``values`` in place (recorded as ``copy_``: no gradient
    reaches what ``self`` held, as PyTorch's random fills)."""
    v = np.asarray(values).astype(self.dtype.np)
    return self._inplace(lambda s: call("copy", s, wrap(v)))


def uniform_(self, a=0.0, b=1.0, *, generator=None):
    """Fill with uniform values in [a, b)."""
    return _fill_random(self, random_source(generator).uniform(a, b, tuple(self.shape)))


def normal_(self, mean=0.0, std=1.0, *, generator=None):
    """Fill with normal values of ``mean`` and ``std``."""
    return _fill_random(self, random_source(generator).normal(mean, std, tuple(self.shape)))


def random_(self, from_=0, to=None, *, generator=None, **kw):
    """Fill with integers in [from, to) (``random_(to)``: [0, to); ``random_()``: up to the
    dtype's largest exactly representable integer)."""
    keyword = "from" in kw
    from_ = kw.pop("from", from_)
    if to is None and from_ != 0 and not keyword:   # random_(to)
        from_, to = 0, from_
    if to is None:
        d = self.dtype.np
        to = (1 << (np.finfo(d).nmant + 1)) + 1 if d.kind == "f" else \
            (2 if d.kind == "b" else int(np.iinfo(d).max))
    return _fill_random(self, random_source(generator).integers(from_, to, tuple(self.shape)))


def bernoulli_(self, p=0.5, *, generator=None):
    """Fill with 1 (probability ``p``, a number or a tensor) or 0."""
    p = _array(p)
    return _fill_random(self, random_source(generator).random(tuple(self.shape)) < p)


def exponential_(self, lambd=1.0, *, generator=None):
    """Fill with exponential values of rate ``lambd``."""
    return _fill_random(self, random_source(generator).exponential(1.0 / lambd, tuple(self.shape)))


def geometric_(self, p, *, generator=None):
    """Fill with geometric values (trials to the first success of probability ``p``)."""
    return _fill_random(self, random_source(generator).geometric(p, tuple(self.shape)))


def log_normal_(self, mean=1.0, std=2.0, *, generator=None):
    """Fill with values whose log is normal of ``mean`` and ``std``."""
    return _fill_random(self, random_source(generator).lognormal(mean, std, tuple(self.shape)))


def cauchy_(self, median=0.0, sigma=1.0, *, generator=None):
    """Fill with Cauchy values."""
    return _fill_random(self, median + sigma * random_source(generator).standard_cauchy(
        tuple(self.shape)))


def bernoulli(input, p=None, *, generator=None):
    """0/1 draws with the probabilities in ``input`` (or ``p``), of ``input``'s dtype."""
    probs = _array(input) if p is None else np.broadcast_to(_array(p), tuple(input.shape))
    if np.any((probs < 0) | (probs > 1)):
        raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    draws = random_source(generator).random(np.shape(probs)) < probs
    return wrap(draws.astype(input.dtype.np))


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """``num_samples`` indices drawn with the (unnormalised) weights of each row of
    ``input`` (1-D or 2-D), with or without replacement (int64)."""
    w = _array(input).astype(np.float64)
    if w.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not replacement and num_samples > w.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                           "replacement")
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    rows = w.reshape(-1, w.shape[-1])
    if np.any(rows.sum(-1) <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rng = random_source(generator)
    out = np.stack([rng.choice(len(r), num_samples, replace=replacement, p=r / r.sum())
                    for r in rows])
    return wrap(out.reshape(w.shape[:-1] + (num_samples,)).astype(np.int64))


def poisson(input, generator=None):
    """Poisson draws with the rates in ``input`` (of ``input``'s dtype)."""
    return wrap(random_source(generator).poisson(_array(input)).astype(input.dtype.np))


def legacy_new_method(self, *args, device=None):
    """``x.new(data)`` / ``x.new(2, 3)``: a tensor of this tensor's dtype (the legacy
    constructor)."""
    return legacy_new(self.dtype.np, *args, device=device)


# -- out= and alpha= on the tg.<name> functions ----------------------------------------------

def write_out(result, out, name):
    """``out=``: ``result``'s values written into ``out`` (resized when its shape differs, as
    PyTorch does), which is returned.  As PyTorch, refused when an argument requires grad."""
    if not isinstance(result, Tensor):
        raise TypeError(f"{name}(): out= is not supported for this function")
    if result._tape is not None and recording() is not None:
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    if result.dtype.is_floating_point and not out.dtype.is_floating_point:
        raise RuntimeError(f"result type {_TYPE_NAMES[result.dtype.name]} can't be cast to the "
                           f"desired output type {_TYPE_NAMES[out.dtype.name]}")
    v = np.asarray(result._value).astype(out.dtype.np)
    if tuple(out.shape) == v.shape and out._value.__class__ is not builtins.float:
        out._inplace(lambda s: call("copy", s, wrap(v)))
    else:
        out._value = v if v.ndim or v.dtype != np.float64 else builtins.float(v)
    return out


def with_out(fn, name=None):
    """``fn`` taking PyTorch's ``out=`` keyword as well."""
    name = name or fn.__name__

    def function(*args, out=None, **kw):
        r = fn(*args, **kw)
        return r if out is None else write_out(r, out, name)
    function.__name__, function.__doc__ = name, fn.__doc__
    function.__wrapped__ = fn
    return function


def _scaled(fn, name):
    def arithmetic(input, other, *, alpha=1, out=None):
        r = fn(input, other if alpha == 1 else other * alpha)
        return r if out is None else write_out(r, out, name)
    arithmetic.__name__ = name
    arithmetic.__doc__ = f"``input {'+' if name == 'add' else '-'} alpha * other`` (``out=`` too)."
    return arithmetic


def divide(input, other, *, rounding_mode=None, out=None):
    """``input / other``; ``rounding_mode="trunc"`` or ``"floor"`` rounds the quotient (no
    gradient through the rounding, as PyTorch's)."""
    if rounding_mode is None:
        r = ELEMENTWISE["div"](input, other)
    elif rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' "
                           f"but found '{rounding_mode}'")
    elif not _integral(input, other):
        if not isinstance(input, Tensor):
            input = wrap(input)
        r = call("div_rounded", input, other, rounding_mode)
    elif rounding_mode == "trunc":
        q = _array(ELEMENTWISE["div"](input, other))
        r = wrap(np.asarray(np.trunc(q)).astype(_result_of(input, other, q)))
    else:
        r = floor_divide(input, other)
    return r if out is None else write_out(r, out, "div")


def where(condition, input=None, other=None, *, out=None):
    """``where(condition, input, other)``: ``input`` where ``condition`` holds, else
    ``other`` (recorded, differentiable); ``where(condition)``: ``nonzero(as_tuple=True)``."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    if not isinstance(condition, Tensor):
        raise TypeError(f"where() received an invalid combination of arguments - got "
                        f"({type(condition).__name__}, {type(input).__name__}, "
                        f"{type(other).__name__}), but expected (Tensor condition, Tensor input, "
                        "Tensor other)")
    r = ELEMENTWISE["where"](condition, input, other)
    return r if out is None else write_out(r, out, "where")


def _two_tensors(fn, name):
    def binary(input, other, *, out=None):
        for pos, (arg, v) in enumerate((("input", input), ("other", other)), 1):
            if not isinstance(v, Tensor):
                raise TypeError(f"{name}(): argument '{arg}' (position {pos}) must be Tensor, "
                                f"not {type(v).__name__}")
        r = fn(input, other)
        return r if out is None else write_out(r, out, name)
    binary.__name__ = name
    binary.__doc__ = f"Elementwise ``{name}`` of two tensors (PyTorch refuses a number here)."
    return binary


def clamp(input, min=None, max=None, *, out=None):  # noqa: A002
    """``input`` limited to ``[min, max]`` (numbers or tensors; one of them may be None)."""
    if min is None and max is None:
        raise RuntimeError("torch.clamp: At least one of 'min' or 'max' must not be None")
    if isinstance(min, Tensor) != isinstance(max, Tensor) and min is not None and max is not None:
        # PyTorch has a Tensor and a Number overload: a bound of each kind takes the Number
        # one, which a 0-d tensor without grad passes as its number (ClampBackward1).  Other
        # tensor bounds beside a number PyTorch refuses; tapegrad takes them as tensors.
        bound = min if isinstance(min, Tensor) else max
        if not (bound.ndim or bound.requires_grad):
            if bound is min:
                min = bound.item()
            else:
                max = bound.item()
    if max is None and isinstance(min, Tensor):   # (PyTorch's rule without a max)
        r = ELEMENTWISE["clamp_no_max"](input, min)
    else:
        r = ELEMENTWISE["clamp"](input, min, max)
    return r if out is None else write_out(r, out, "clamp")


def rsub(input, other, *, alpha=1, out=None):
    """``other - alpha * input`` (``out=`` too)."""
    r = ELEMENTWISE["sub"](other, input if alpha == 1 else input * alpha)
    return r if out is None else write_out(r, out, "rsub")


def float_power(input, exponent, *, out=None):
    """``input ** exponent`` computed in float64, as PyTorch's."""
    base = _convert(input, float64) if isinstance(input, Tensor) else builtins.float(input)
    if isinstance(exponent, Tensor):
        exponent = _convert(exponent, float64)
    r = ELEMENTWISE["pow"](base, exponent)
    return r if out is None else write_out(r, out, "float_power")


def round(input, *, decimals=0, out=None):  # noqa: A001
    """Half to even, at ``decimals`` places (``round(x * 10^d) / 10^d``, as PyTorch); a zero
    gradient."""
    r = ELEMENTWISE["round"](input) if decimals == 0 else call("round_decimals", input, decimals)
    return r if out is None else write_out(r, out, "round")


def clone(input, *, memory_format=None):
    """A copy (recorded: ``CloneBackward0``); every layout is the contiguous one here."""
    return ELEMENTWISE["clone"](input)


def index_fill(input, dim, index, value):
    """``input`` with the slices at ``index`` along ``dim`` set to ``value`` (a number or a
    0-d tensor); a ``masked_fill`` of those slices."""
    index = np.asarray(index_value(index))
    if index.dtype != np.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    dim = wrap_dim(dim, builtins.max(input.ndim, 1))
    n = input.shape[dim] if input.ndim else 1
    mask = np.zeros(n, bool)
    mask[index.reshape(-1) % n if n else index.reshape(-1)] = True
    shape = [1] * input.ndim
    if input.ndim:
        shape[dim] = n
    return masked_fill(input, mask.reshape(shape), value)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    """``beta * input + alpha * outer(vec1, vec2)``."""
    return _times(input, beta) + _times(outer(vec1, vec2), alpha)


def ldexp(input, other):
    """``input * 2 ** other`` (PyTorch's composition; a float result)."""
    return input * ELEMENTWISE["pow"](2.0, other)


_as_tensor = wrap   # (fill_diagonal_'s parameter ``wrap``, PyTorch's name, hides the function)


def fill_diagonal_(input, fill_value, wrap=False):
    """Fill the main diagonal (of a 2-d tensor, or of all dims alike) in place; ``wrap``:
    restart below a tall matrix's diagonal every ``cols + 1`` rows, as NumPy's."""
    if input.ndim < 2:
        raise RuntimeError("dimensions must larger than 1")
    if input.ndim > 2 and len(set(input.shape)) != 1:
        raise RuntimeError("all dimensions of input must be of equal length")
    mask = np.zeros(input.shape, bool)
    np.fill_diagonal(mask, True, wrap=wrap)
    return input._inplace(lambda s: ELEMENTWISE["where"](_as_tensor(mask), fill_value, s))


def share_memory_(input):
    """Nothing to do for tensors in this process's memory (PyTorch's CPU tensors move to
    shared memory for ``torch.multiprocessing``): ``input`` itself."""
    return input


def cov(input, *, correction=1, fweights=None, aweights=None):
    """The covariance of the variables in ``input``'s rows over the observations in its
    columns (a 1-d input: one variable), divided by ``N - correction``."""
    if fweights is not None or aweights is not None:
        raise NotImplementedError("cov: fweights and aweights are not supported by tapegrad")
    if input.ndim > 2:
        raise ValueError(f"cov(): expected input to have two or fewer dimensions but got an "
                         f"input with {input.ndim} dimensions")
    x = input.reshape(1, -1) if input.ndim < 2 else input
    if not x.dtype.is_floating_point:
        x = _convert(x, get_default_dtype())
    centred = x - mean(x, 1, keepdim=True)
    c = matmul(centred, centred.transpose(0, 1)) / (x.shape[1] - correction)
    return c.reshape(()) if input.ndim < 2 else c


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each of ``elements`` is among ``test_elements`` (a bool tensor)."""
    a, b = _array(elements), _array(test_elements)
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        raise RuntimeError("Unsupported input type encountered for isin(): Bool")
    found = np.isin(a, b, invert=invert)
    return wrap(np.asarray(found))


def tensor_where(self, condition, other):
    """``x.where(condition, y)``: ``x`` where ``condition`` holds, else ``y``."""
    return where(condition, self, other)


ARITHMETIC = {"add": _scaled(ELEMENTWISE["add"], "add"), "sub": _scaled(ELEMENTWISE["sub"], "sub"),
              "subtract": _scaled(ELEMENTWISE["sub"], "sub"),
              "mul": with_out(ELEMENTWISE["mul"], "mul"),
              "multiply": with_out(ELEMENTWISE["mul"], "mul"), "div": divide, "divide": divide,
              "true_divide": divide, "where": where, "clamp": clamp,
              "maximum": _two_tensors(ELEMENTWISE["maximum"], "maximum"),
              "minimum": _two_tensors(ELEMENTWISE["minimum"], "minimum"), "rsub": rsub,
              "float_power": float_power, "round": round, "clone": clone,
              "index_fill": index_fill, "addr": addr, "cov": cov, "isin": isin}


# Tensor methods (name -> function); PyTorch's method signatures take ``self`` first.
METHODS = {
    "__init__": tensor_init,   # tg.Tensor(data), PyTorch's legacy constructor
    "sum": sum, "mean": mean, "prod": prod, "max": max, "min": min, "amax": amax,
    "amin": amin, "var": var, "std": std, "norm": norm, "logsumexp": logsumexp,
    "softmax": softmax, "log_softmax": log_softmax, "matmul": matmul, "mm": mm, "mv": mv,
    "dot": dot, "outer": outer, "t": t, "transpose": transpose, "permute": permute,
    "reshape": reshape, "view": view, "flatten": flatten, "unflatten": unflatten,
    "squeeze": squeeze,
    "diagonal": diagonal,
    "unsqueeze": unsqueeze, "expand": expand, "expand_as": expand_as, "split": split,
    "chunk": chunk, "cumsum": cumsum, "cumprod": cumprod, "flip": flip, "roll": roll,
    "gather": gather, "index_select": index_select, "take": take,
    "argmax": argmax, "argmin": argmin, "all": all, "any": any, "isnan": isnan,
    "isinf": isinf, "isfinite": isfinite, "isposinf": isposinf, "isneginf": isneginf,
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "logical_not": logical_not, "bitwise_and": bitwise_and, "bitwise_or": bitwise_or,
    "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not, "equal": equal,
    "allclose": allclose, "isclose": isclose, "nonzero": nonzero,
    "count_nonzero": count_nonzero, "sort": sort, "argsort": argsort, "msort": msort,
    "topk": topk, "scatter": scatter, "scatter_add": scatter_add,
    "scatter_reduce": scatter_reduce, "index_add": index_add, "index_copy": index_copy,
    "index_put": index_put,
    "masked_fill": masked_fill, "repeat_interleave": repeat_interleave, "cross": cross,
    "repeat": repeat, "tile": tile, "tril": tril, "triu": triu, "diag": diag, "trace": trace,
    "bmm": bmm, "addmm": addmm, "baddbmm": baddbmm, "unbind": unbind, "narrow": narrow,
    "select": select, "clamp": clamp, "clip": clamp,
    "masked_select": masked_select, "broadcast_to": broadcast_to, "view_as": view_as,
    "reshape_as": reshape_as, "swapaxes": swapaxes, "swapdims": swapaxes, "movedim": movedim,
    "moveaxis": movedim, "square": square, "rsqrt": rsqrt, "log2": log2, "log10": log10,
    "frac": frac, "asinh": asinh, "acosh": acosh, "atanh": atanh, "arcsinh": asinh,
    "arccosh": acosh, "arctanh": atanh, "deg2rad": deg2rad, "rad2deg": rad2deg,
    "hypot": hypot, "logaddexp": logaddexp, "lerp": lerp, "addcmul": addcmul,
    "addcdiv": addcdiv, "clamp_min": clamp_min, "clamp_max": clamp_max,
    "remainder": remainder, "fmod": fmod, "floor_divide": floor_divide,
    "nan_to_num": nan_to_num, "diff": diff,
}
# NumPy's axis=/keepdims= wherever PyTorch takes dim=/keepdim=
for _name in ("sum", "mean", "prod", "max", "min", "amax", "amin", "var", "std", "norm",
              "logsumexp", "softmax", "log_softmax", "cumsum", "cumprod", "squeeze", "unsqueeze",
              "argmax", "argmin", "all", "any", "sort", "argsort", "topk", "flatten",
              "index_select", "gather", "count_nonzero", "split", "chunk", "transpose",
              "repeat_interleave", "cross"):
    METHODS[_name] = _numpy_names(METHODS[_name])
FUNCTIONS = dict(METHODS, cat=cat, concat=concat, stack=stack, linear=linear, einsum=einsum,
                 is_nonzero=lambda input: bool(input), numel=lambda input: input.numel(),
                 broadcast_tensors=broadcast_tensors, meshgrid=meshgrid, logspace=logspace,
                 cdist=cdist, cosine_similarity=cosine_similarity)
# tg.<name>(..., out=t) as PyTorch (single-result functions), and tg.add(x, y, alpha=2)...
FUNCTIONS = {n: f if n in ("split", "chunk", "unbind", "equal", "allclose", "is_nonzero", "numel",
                           "broadcast_tensors", "meshgrid", "nonzero") else with_out(f, n)
             for n, f in FUNCTIONS.items()}
FUNCTIONS.update(ARITHMETIC, get_num_threads=get_num_threads, set_num_threads=set_num_threads,
                 bernoulli=bernoulli, multinomial=multinomial, poisson=poisson,
                 is_floating_point=lambda input: input.is_floating_point(),
                 is_complex=lambda input: False)
# the op-table rows whose method takes PyTorch's extra keyword (optable: ``keyword``)
METHODS.update({op.name: ARITHMETIC[op.name] for op in optable.OPS if op.keyword},
               divide=divide, float_power=float_power, index_fill=index_fill,
               index_fill_=_inplace_row(index_fill), where=tensor_where, addr=addr, cov=cov)
METHODS.update(
    to=to, cpu=cpu, cuda=cuda, type=tensor_type, type_as=type_as,
    double=_dtype_method(float64, "double"), float=_dtype_method(float32, "float"),
    half=_dtype_method(float16, "half"), long=_dtype_method(int64, "long"),
    int=_dtype_method(int32, "int"), short=_dtype_method(int16, "short"),
    char=_dtype_method(int8, "char"), byte=_dtype_method(uint8, "byte"),
    bool=_dtype_method(bool_, "bool"),
    device=property(lambda self: CPU, doc="The device the tensor lives on (the CPU)."),
    is_cuda=property(lambda self: False, doc="False: tapegrad's tensors live on the CPU."),
    is_cpu=property(lambda self: True, doc="True: tapegrad's tensors live on the CPU."),
    element_size=element_size, new_tensor=new_tensor, new_full=new_full,
    nelement=lambda self: self.numel(), ndimension=lambda self: self.ndim,
    uniform_=uniform_, normal_=normal_, random_=random_, bernoulli_=bernoulli_,
    exponential_=exponential_, geometric_=geometric_, log_normal_=log_normal_,
    cauchy_=cauchy_, bernoulli=bernoulli, multinomial=multinomial, new=legacy_new_method,
    get_device=lambda self: -1, is_complex=lambda self: False,
    new_zeros=_new_factory(lambda s, dt: np.zeros(s, dt)),
    new_ones=_new_factory(lambda s, dt: np.ones(s, dt)),
    new_empty=_new_factory(lambda s, dt: np.zeros(s, dt)),
    masked_fill_=_inplace_row(masked_fill), scatter_=_inplace_row(scatter),
    tril_=_inplace_row(tril), triu_=_inplace_row(triu), lerp_=_inplace_row(lerp),
    addcmul_=_inplace_row(addcmul), addcdiv_=_inplace_row(addcdiv),
    clamp_min_=_inplace_row(clamp_min), clamp_max_=_inplace_row(clamp_max),
    square_=_inplace_row(square), nan_to_num_=_inplace_row(nan_to_num),
    fmod_=_inplace_row(fmod), remainder_=_inplace_row(remainder),
    t_=_shape_in_place("t", lambda: _NO_PARAMS, lambda p: "TBackward1"),
    transpose_=_shape_in_place("transpose", lambda dim0, dim1: {"dim0": dim0, "dim1": dim1},
                               lambda p: "TransposeBackward1"),
    unsqueeze_=_shape_in_place("unsqueeze", lambda dim: {"dim": dim},
                               lambda p: "UnsqueezeBackward1"),
    squeeze_=_shape_in_place("squeeze", lambda dim=None: {"dim": dim}, _squeeze_node),
    swapaxes_=_shape_in_place("transpose", lambda axis0, axis1: {"dim0": axis0, "dim1": axis1},
                              lambda p: "TransposeBackward1"),
    swapdims_=_shape_in_place("transpose", lambda dim0, dim1: {"dim0": dim0, "dim1": dim1},
                              lambda p: "TransposeBackward1"),
    __mod__=remainder, __rmod__=lambda self, other: remainder(other, self),
    __floordiv__=floor_divide, __rfloordiv__=lambda self, other: floor_divide(other, self),
    scatter_add_=_inplace_row(scatter_add), index_add_=_inplace_row(index_add),
    index_copy_=_inplace_row(index_copy), index_put_=_inplace_row(index_put),
    scatter_reduce_=_inplace_row(scatter_reduce),
    __and__=bitwise_and, __rand__=bitwise_and, __or__=bitwise_or, __ror__=bitwise_or,
    __xor__=bitwise_xor, __rxor__=bitwise_xor, __invert__=invert,
    __getitem__=getitem, __setitem__=setitem, __iter__=iterate,
    is_contiguous=is_contiguous, contiguous=contiguous, stride=stride, data_ptr=data_ptr,
    storage_offset=storage_offset,
    __matmul__=matmul, __rmatmul__=lambda self, other: matmul(other, self),
    T=property(reversed_dims, doc="The tensor with its dimensions reversed."),
    mT=property(lambda self: transpose(self, -2, -1), doc="The last two dimensions swapped."),
    **_unary_inplace_methods())
# special functions PyTorch has at the top level and as methods
_SPECIAL = special.SPECIAL
FUNCTIONS.update({n: _SPECIAL[n] for n in ("lgamma", "digamma", "polygamma", "erfinv", "erfc",
                                           "logit", "xlogy", "sinc")},
                 mvlgamma=special.multigammaln)
METHODS.update({n: _SPECIAL[n] for n in ("lgamma", "digamma", "erfinv", "erfc", "logit",
                                         "xlogy", "sinc")},
               polygamma=lambda self, n: special.polygamma_checked(n, self),
               mvlgamma=special.multigammaln)
METHODS.update({f"{n}_": _inplace_row(METHODS[n])
                for n in ("lgamma", "digamma", "erfinv", "logit")})
# in-place forms PyTorch has of methods defined above or by the op table (the result
# replaces ``self``'s value under ``Tensor._inplace``'s rules); each checked against PyTorch
# (tests/test_inplace_methods.py)
_INPLACE_FORMS = (
    "absolute", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctan2",
    "arctanh", "asinh", "atan2", "atanh", "clip", "copysign", "cumprod", "cumsum", "deg2rad",
    "divide", "erfc", "fix", "float_power", "frac", "hypot", "log10", "log2", "multiply",
    "mvlgamma", "negative", "rad2deg", "rsqrt", "sinc", "subtract", "true_divide", "xlogy",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "addmm", "addmv", "addbmm",
    "baddbmm", "addr", "ldexp", "gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift",
    "polygamma",
)   # (the comparisons' are ``_compared_inplace``: theirs is a node of its own; floor_divide_
#      and heaviside_ name themselves in their backward's error, below)


_ALIASES = {"absolute": "abs", "arccos": "acos", "arcsin": "asin", "arctan": "atan",
            "arctan2": "atan2", "negative": "neg", "fix": "trunc",   # (NumPy's names)
            "greater": "gt", "greater_equal": "ge", "less": "lt", "less_equal": "le",
            "not_equal": "ne"}
_COMPARISON_NAMES = {**{n: n for n in everyday_ops.COMPARED},
                     **{a: n for a, n in _ALIASES.items() if n in everyday_ops.COMPARED}}


_EXTRA = {
    "atleast_1d": atleast_1d, "atleast_2d": atleast_2d, "atleast_3d": atleast_3d,
    "hstack": hstack, "vstack": vstack, "row_stack": vstack, "dstack": dstack,
    "column_stack": column_stack, "fliplr": fliplr, "flipud": flipud, "rot90": rot90,
    "kron": kron, "tensordot": tensordot, "block_diag": block_diag, "diag_embed": diag_embed,
    "take_along_dim": take_along_dim, "aminmax": aminmax, "cummax": cummax, "cummin": cummin,
    "logcumsumexp": logcumsumexp, "kthvalue": kthvalue, "median": median, "quantile": quantile,
    "nanquantile": nanquantile, "nansum": nansum, "nanmean": nanmean, "var_mean": var_mean,
    "std_mean": std_mean, "unique": unique, "bincount": bincount, "searchsorted": searchsorted,
    "bucketize": bucketize, "histc": histc, "signbit": signbit, "heaviside": heaviside,
    "copysign": copysign, "trapezoid": trapezoid, "trapz": trapezoid,
    "tensor_split": tensor_split, "addmv": addmv, "addbmm": addbmm, "ldexp": ldexp,
    "gcd": _bitwise(np.gcd, "gcd"), "lcm": _bitwise(np.lcm, "lcm"),
    "bitwise_left_shift": _bitwise(np.left_shift, "lshift"),
    "bitwise_right_shift": _bitwise(np.right_shift, "rshift"),
}
FUNCTIONS.update(_EXTRA)
METHODS.update({n: _EXTRA[n] for n in (
    "fliplr", "flipud", "rot90", "kron", "diag_embed", "aminmax", "cummax", "cummin",
    "logcumsumexp", "kthvalue", "median", "quantile", "nanquantile", "nansum", "nanmean",
    "unique", "bincount", "histc", "signbit", "heaviside", "copysign", "tensor_split",
    "addmv", "addbmm", "ldexp", "gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift")},
    take_along_dim=take_along_dim, fill_diagonal_=fill_diagonal_, share_memory_=share_memory_,
    __lshift__=_EXTRA["bitwise_left_shift"], __rshift__=_EXTRA["bitwise_right_shift"],
    __rlshift__=lambda self, other: _EXTRA["bitwise_left_shift"](other, self),
    __rrshift__=lambda self, other: _EXTRA["bitwise_right_shift"](other, self))
METHODS.update({alias: METHODS.get(n) or Tensor.__dict__[n] for alias, n in _ALIASES.items()})
FUNCTIONS.update({alias: FUNCTIONS.get(n) or ELEMENTWISE.get(n) for alias, n in _ALIASES.items()
                  if FUNCTIONS.get(n) or ELEMENTWISE.get(n)})
METHODS.update({f"{alias}_": _compared_inplace(n, alias) for alias, n in _COMPARISON_NAMES.items()})
METHODS.update(floor_divide_=_inplace_row(lambda s, other: floor_divide(s, other, True),
                                          "floor_divide_"),
               heaviside_=_inplace_row(lambda s, values: heaviside(s, values, True),
                                       "heaviside_"))
METHODS.update({f"{n}_": _inplace_row(METHODS.get(n) or Tensor.__dict__[n], f"{n}_")
                for n in _INPLACE_FORMS})
LINALG = {"cross": linalg_cross, "inv": inv, "det": det, "slogdet": slogdet, "solve": solve,
          "norm": linalg_norm, "vector_norm": vector_norm, "matrix_norm": matrix_norm,
          "matmul": matmul, "vecdot": vecdot, "LinAlgError": everyday_ops.LinAlgError}
LINALG.update(linalg_ops.LINALG_FUNCTIONS)
METHODS.update(inverse=inv, det=det, logdet=logdet, slogdet=slogdet)
METHODS.update(linalg_ops.TOP_FUNCTIONS)
FUNCTIONS.update({name: with_out(fn, name) for name, fn in linalg_ops.TOP_FUNCTIONS.items()})
FUNCTIONS.update(inverse=with_out(inv, "inverse"), det=det, logdet=logdet, slogdet=slogdet)


# -- more of PyTorch's names: compositions of the ops above, and dtype and shape utilities --
def _nan_ignoring(keep):
    """``fmax``/``fmin``: ``input`` where ``keep(input, other)`` holds or ``other`` is NaN, else
    ``other`` (a NaN only where both are); ``where`` picks, so each gradient goes to the
    element chosen, as PyTorch's FmaxBackward0."""
    def pick(input, other):
        other = other if isinstance(other, Tensor) else wrap(other)
        return ELEMENTWISE["where"](keep(input, other) | isnan(other), input, other)
    return pick


fmax = _nan_ignoring(lambda x, y: x >= y)
fmax.__name__, fmax.__doc__ = "fmax", "The larger of each pair, ignoring NaN (NumPy's fmax)."
fmin = _nan_ignoring(lambda x, y: x <= y)
fmin.__name__, fmin.__doc__ = "fmin", "The smaller of each pair, ignoring NaN (NumPy's fmin)."


def logaddexp2(input, other):
    """``log2(2 ** x + 2 ** y)``, computed stably."""
    return _log_sum(input, other, _E["exp2"], log2)


def nextafter(input, other):
    """The next float after each element towards ``other``'s (floats only)."""
    for v in (input, other):
        if _array(v).dtype.kind != "f":
            raise NotImplementedError("\"nextafter_cpu\" not implemented for "
                               f"'{_TYPE_NAMES[_array(v).dtype.name]}'")
    return call("nextafter", input, other)


def inner(input, other):
    """The sum of products over the last dims (a number times a tensor: the product)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    return tensordot(input, other, dims=([-1], [-1]))


def vdot(input, other):
    """The dot product of two 1-d tensors (real: ``dot``)."""
    return dot(input, other)


def ger(input, vec2):
    """``outer`` (PyTorch's older name)."""
    return outer(input, vec2)


def matrix_power(input, n):
    """``input`` multiplied by itself ``n`` times (``n < 0``: its inverse's power; ``n`` 0:
    identity matrices), by repeated squaring as PyTorch's."""
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"matrix_power(): argument 'n' must be int, not {type(n).__name__}")
    if input.ndim < 2 or input.shape[-1] != input.shape[-2]:
        raise RuntimeError("linalg.matrix_power: A must be batches of square matrices, but "
                           f"they are {input.shape[-2] if input.ndim >= 2 else 1} by "
                           f"{input.shape[-1] if input.ndim else 1} matrices")
    if n == 0:
        eye = np.broadcast_to(np.eye(input.shape[-1], dtype=input.dtype.np), input.shape)
        return wrap(np.array(eye))
    a = inv(input) if n < 0 else input
    n = abs(int(n))
    result = None
    while n:
        if n & 1:
            result = a if result is None else matmul(result, a)
        n >>= 1
        if n:
            a = matmul(a, a)
    return result


def chain_matmul(*matrices):
    """The product of the matrices, left to right."""
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    out = matrices[0]
    for m in matrices[1:]:
        out = matmul(out, m)
    return out


def diagflat(input, offset=0):
    """A matrix with ``input``'s elements (flattened) on diagonal ``offset``."""
    return diag(reshape(input, -1), offset)


def ravel(input):
    """``input`` flattened (a view where it can be, as ``reshape``)."""
    return reshape(input, -1)


def positive(input):
    """``input`` itself (PyTorch's unary plus; refused for bool)."""
    if input.dtype is bool_:
        raise RuntimeError("The `+` operator, on a bool tensor is not supported.")
    return input


def _split_dim(name, input, sections, dim, least):
    if input.ndim < least:
        raise RuntimeError(f"torch.{name} requires a tensor with at least {least} dimension, "
                           f"but got a tensor with {input.ndim} dimensions!")
    if isinstance(sections, (int, np.integer)) and input.shape[dim] % sections:
        raise RuntimeError(f"torch.{name} attempted to split along dimension {dim}, but the "
                           f"size of the dimension {input.shape[dim]} is not divisible by the "
                           f"split_size {sections}!")
    return tensor_split(input, sections, dim)


def hsplit(input, sections):
    """``tensor_split`` along dim 1 (dim 0 of a 1-d tensor), equal parts only for an int."""
    return _split_dim("hsplit", input, sections, 1 if input.ndim > 1 else 0, 1)


def vsplit(input, sections):
    return _split_dim("vsplit", input, sections, 0, 2)


def dsplit(input, sections):
    return _split_dim("dsplit", input, sections, 2, 3)


def argwhere(input):
    """The indices of the nonzero elements, one row each (``nonzero``)."""
    return nonzero(input)


def tril_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) indices of the lower triangle of a ``row`` x ``col`` matrix."""
    r, c = np.tril_indices(row, offset, col)
    return wrap(np.stack([r, c]).astype(np.int64 if dtype is None else as_dtype(dtype).np))


def triu_indices(row, col, offset=0, *, dtype=None, device=None, layout=None):
    """The (2, N) indices of the upper triangle of a ``row`` x ``col`` matrix."""
    r, c = np.triu_indices(row, offset, col)
    return wrap(np.stack([r, c]).astype(np.int64 if dtype is None else as_dtype(dtype).np))


def unravel_index(indices, shape):
    """Flat indices as a tuple of index tensors, one per dim of ``shape``."""
    v = np.asarray(indices._value if isinstance(indices, Tensor) else indices)
    if v.dtype.kind not in "iu":
        raise TypeError(f"expected 'indices' to be integer dtype, but got {as_dtype(v.dtype)}")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    total = int(np.prod(shape))
    if v.size and (v.min() < -total or v.max() >= total):
        raise RuntimeError("unravel_index: index out of bounds")
    return tuple(wrap(np.asarray(a, np.int64)) for a in np.unravel_index(v % total, shape))


def broadcast_shapes(*shapes):
    """The shape ``shapes`` broadcast to (PyTorch's error where they do not)."""
    shapes = [(s,) if isinstance(s, (int, np.integer)) else tuple(s) for s in shapes]
    try:
        return Size(np.broadcast_shapes(*shapes))
    except ValueError:
        raise RuntimeError(f"Shape mismatch: objects cannot be broadcast to a single shape.  "
                           f"Mismatch is between {shapes}") from None


def result_type(tensor1, tensor2):
    """The dtype PyTorch's type promotion gives an op of the two (tensors or numbers)."""
    return as_dtype(result_dtype(tensor1, tensor2))


def promote_types(type1, type2):
    """The smallest dtype both promote to (a float beats an integer, as PyTorch's)."""
    a, b = as_dtype(type1).np, as_dtype(type2).np
    if (a.kind == "f") != (b.kind == "f"):
        return as_dtype(a if a.kind == "f" else b)
    return as_dtype(np.promote_types(a, b))


def can_cast(from_, to):
    """Does PyTorch's casting rule allow ``from_`` to ``to`` (no float to integer, nothing
    to bool but bool)?"""
    a, b = as_dtype(from_).np, as_dtype(to).np
    order = "biuf"
    return order.index(a.kind if a.kind != "u" else "i") <= order.index(b.kind if b.kind != "u"
                                                                          else "i")


def is_same_size(input, other):
    return tuple(input.shape) == tuple(other.shape)


def is_signed(input):
    """Is ``input``'s dtype signed (floats and signed integers)?"""
    return input.dtype.np.kind in "fi"


def scalar_tensor(s, *, dtype=None, device=None, layout=None, pin_memory=None,
                  requires_grad=False):
    """A 0-d tensor of ``s`` (the default float dtype unless given)."""
    dt = get_default_dtype() if dtype is None else as_dtype(dtype)
    return wrap(np.asarray(s, dt.np), requires_grad=requires_grad)


def vander(x, N=None, increasing=False):
    """The Vandermonde matrix of 1-d ``x``: its powers 0 .. N-1 as columns (decreasing
    unless ``increasing``)."""
    if x.ndim != 1:
        raise RuntimeError("x must be a one-dimensional tensor.")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise RuntimeError("N must be non-negative.")
    if n == 0:
        return wrap(np.zeros((x.shape[0], 0), x.dtype.np))
    # (as PyTorch's: a column of ones, then the running products of x)
    ones = wrap(np.ones((x.shape[0], 1), x.dtype.np if x.dtype.np.kind == "f" else np.int64))
    out = ones if n == 1 else cat([ones, cumprod(expand(unsqueeze(x, 1), x.shape[0], n - 1), 1)], 1)
    return out if increasing else flip(out, (1,))


def cartesian_prod(*tensors):
    """Every combination of one element of each 1-d tensor, as rows (a 1-d tensor for one)."""
    if len(tensors) == 1:
        return tensors[0]
    grids = np.meshgrid(*[np.arange(t.shape[0]) for t in tensors], indexing="ij")
    return stack([t[wrap(g.reshape(-1))] for t, g in zip(tensors, grids)], 1)


def combinations(input, r=2, with_replacement=False):
    """The length-``r`` combinations of 1-d ``input``'s elements, as rows."""
    if input.ndim != 1:
        raise RuntimeError(f"Expect a 1D vector, but got shape {list(input.shape)}")
    if r < 0:
        raise RuntimeError(f"Expect a non-negative number, but got {r}")
    pick = itertools.combinations_with_replacement if with_replacement else \
        itertools.combinations
    rows = np.array(list(pick(range(input.shape[0]), r)), np.int64).reshape(-1, r)
    if r == 0 or not rows.size:
        return wrap(np.zeros((0,) if r == 0 else (0, r), input.dtype.np))
    return stack([input[wrap(rows[:, k])] for k in range(r)], 1)


# PyTorch's top-level in-place functions (``torch.relu_(x)`` is ``x.relu_()``)
_INPLACE_FUNCTIONS = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_", "arctan_",
    "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_", "clamp_max_",
    "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "detach_", "erf_", "erfc_", "exp2_",
    "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "index_put_", "lcm_", "ldexp_",
    "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_", "negative_",
    "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_", "sinc_", "sinh_",
    "sqrt_", "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_",
)


def _method_as_function(name):
    def function(input, *args, **kw):
        return getattr(input, name)(*args, **kw)
    function.__name__ = name
    function.__doc__ = f"``input.{name}(...)``."
    return function


FUNCTIONS.update({n: _method_as_function(n) for n in _INPLACE_FUNCTIONS})
_MORE = {"fmax": fmax, "fmin": fmin, "logaddexp2": logaddexp2, "inner": inner, "vdot": vdot,
         "nextafter": nextafter,
         "ger": ger, "matrix_power": matrix_power, "chain_matmul": chain_matmul,
         "diagflat": diagflat, "ravel": ravel, "positive": positive, "hsplit": hsplit,
         "vsplit": vsplit, "dsplit": dsplit, "argwhere": argwhere, "vander": vander,
         "cartesian_prod": cartesian_prod, "combinations": combinations}
FUNCTIONS.update(_MORE, tril_indices=tril_indices, triu_indices=triu_indices,
                 unravel_index=unravel_index, broadcast_shapes=broadcast_shapes,
                 result_type=result_type, promote_types=promote_types, can_cast=can_cast,
                 is_same_size=is_same_size, is_signed=is_signed, scalar_tensor=scalar_tensor)
METHODS.update({n: _MORE[n] for n in ("fmax", "fmin", "logaddexp2", "inner", "vdot", "ger", "nextafter",
                                      "matrix_power", "diagflat", "ravel", "positive",
                                      "hsplit", "vsplit", "dsplit", "argwhere")},
               is_same_size=is_same_size, is_signed=is_signed, nextafter_=_inplace_row(nextafter))


# -- torch.linalg's names for functions above --------------------------------------------------
def linalg_vander(x, *, N=None):
    """``torch.linalg.vander``: the powers ``x**0 .. x**(N-1)`` of the last dim of ``x`` along a
    new last dim (increasing: NumPy's ``vander`` with ``increasing=True``, batched)."""
    n = x.shape[-1] if N is None else N
    if x.ndim == 0:
        raise RuntimeError("x must have at least one dimension.")
    if n <= 1:
        if n < 1:
            raise RuntimeError("N must be greater than 1.")
        return wrap(np.ones(tuple(x.shape) + (1,), x.dtype.np))
    # (as PyTorch's: a column of ones, then the running products of x)
    ones = wrap(np.ones(tuple(x.shape) + (1,), x.dtype.np if x.dtype.np.kind == "f" else np.int64))
    powers = cumprod(expand(unsqueeze(x, -1), *tuple(x.shape), n - 1), -1)
    return cat([ones, powers], -1)


def linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.linalg.diagonal``: ``torch.diagonal`` over the last two dims by default."""
    return diagonal(A, offset, dim1, dim2)


InvExResult = namedtuple("inv_ex", ["inverse", "info"])
SolveExResult = namedtuple("solve_ex", ["result", "info"])


def _no_info(A):
    return wrap(np.zeros(tuple(A.shape[:-2]), np.int32))


def inv_ex(A, *, check_errors=False):
    """``(inv(A), info)``: info 0 (a singular matrix raises here, as with ``check_errors``)."""
    return InvExResult(inv(A), _no_info(A))


def solve_ex(A, B, *, left=True, check_errors=False):
    """``(solve(A, B), info)``: info 0 (a singular matrix raises here)."""
    return SolveExResult(solve(A, B, left=left), _no_info(A))


LINALG.update(matrix_power=matrix_power, vander=linalg_vander, diagonal=linalg_diagonal,
              inv_ex=inv_ex, solve_ex=solve_ex)



# -- more of PyTorch's names: norms, masked_scatter, renorm, and aliases ------------------------
def dist(input, other, p=2):
    """The ``p``-norm of ``input - other`` (broadcast), a composition (PyTorch:
    ``DistBackward0``)."""
    return call("norm", input - other, p=p, dim=None, keepdim=False)


def frobenius_norm(input, dim=(-2, -1), keepdim=False):
    """``linalg.vector_norm(input, 2, dim, keepdim)``."""
    return vector_norm(input, 2, dim, keepdim)


def nuclear_norm(input, dim=(-2, -1), keepdim=False):
    """The sum of the singular values of the matrices over ``dim`` (a ``bool`` second
    argument is ``keepdim``, as PyTorch's overload)."""
    if isinstance(dim, bool):
        dim, keepdim = (-2, -1), dim
    return matrix_norm(input, "nuc", dim, keepdim)


def renorm(input, p, dim, maxnorm):
    """Each slice along ``dim`` whose ``p``-norm is above ``maxnorm`` scaled to norm
    ``maxnorm`` (``maxnorm / (norm + 1e-7)``, as PyTorch), the others as they are."""
    if p <= 0:
        raise RuntimeError("renorm: non-positive-norm not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0 but got {maxnorm}")
    d = wrap_dim(dim, input.ndim)
    others = tuple(k for k in range(input.ndim) if k != d)
    norms = call("norm", input, p=p, dim=others, keepdim=True) if others else \
        ELEMENTWISE["abs"](input)
    factor = ELEMENTWISE["where"](norms > maxnorm, float(maxnorm) / (norms + 1e-7), 1.0)
    return input * factor


def masked_scatter(input, mask, source):
    """``input`` with the elements where ``mask`` (broadcast to its shape) holds taken from
    ``source`` in order (row-major); the gradient of each taken element goes to its place in
    ``source``, the others' to ``input``."""
    m = np.broadcast_to(np.asarray(mask._value if isinstance(mask, Tensor) else mask, bool),
                        tuple(input.shape))
    count = int(m.sum())
    if source.numel() < count:
        raise RuntimeError("Number of elements of source < number of ones in mask")
    order = np.maximum(np.cumsum(m.reshape(-1)) - 1, 0).reshape(m.shape)
    taken = reshape(source, (-1,))[wrap(order)] if source.numel() else \
        wrap(np.zeros(tuple(input.shape)))
    return ELEMENTWISE["where"](wrap(np.array(m)), taken, input)


def adjoint(input):
    """The conjugate transpose of the last two dims (the transpose, for real tensors)."""
    return transpose(input, -2, -1)


def _same(input):
    """``conj``, ``resolve_conj``, ``resolve_neg``, ``conj_physical`` of a real tensor: itself."""
    return input


def isreal(input):
    """True everywhere: tapegrad's tensors are real."""
    return wrap(np.ones(tuple(input.shape), bool))


def imag(input):
    raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")


def real(input):
    """A real tensor's real part: itself."""
    return input


def corrcoef(input):
    """Pearson correlation coefficients of the variables in ``input``'s rows, clipped to
    [-1, 1] as PyTorch's."""
    c = cov(input)
    if c.ndim == 0:
        return c / c
    d = ELEMENTWISE["sqrt"](diagonal(c, 0, 0, 1))
    return clamp((c / unsqueeze(d, 1)) / unsqueeze(d, 0), -1.0, 1.0)


def fill(input, value):
    """A new tensor of ``input``'s shape holding ``value`` (a number, or a 0-d tensor whose
    gradient sums): a ``where`` that takes ``value`` everywhere, so that ``input`` gets a
    zero gradient, as PyTorch's FillBackward."""
    if not isinstance(input, Tensor):
        raise TypeError(f"fill(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(input).__name__}")
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"fill only supports 0-dimension value tensor but got tensor with "
                           f"{value.ndim} dimensions.")
    everywhere = wrap(np.ones(tuple(input.shape), bool))
    if isinstance(value, Tensor) and value.dtype is not input.dtype:
        value = _convert(value, input.dtype)
    return ELEMENTWISE["where"](everywhere, value, input)


_MORE_NAMES = {
    "dist": dist, "frobenius_norm": frobenius_norm, "nuclear_norm": nuclear_norm,
    "renorm": renorm, "masked_scatter": masked_scatter, "adjoint": adjoint, "conj": _same,
    "resolve_conj": _same, "resolve_neg": _same, "conj_physical": _same, "isreal": isreal,
    "imag": imag, "real": real, "corrcoef": corrcoef,
}
FUNCTIONS.update(_MORE_NAMES, fill=fill, detach=lambda input: input.detach(),
                 concatenate=lambda tensors, axis=0, out=None: FUNCTIONS["cat"](tensors, axis,
                                                                                out=out),
                 split_with_sizes=lambda input, split_sizes, dim=0: split(input, list(split_sizes),
                                                                          dim),
                 unsafe_split=split, unsafe_chunk=chunk)
METHODS.update(_MORE_NAMES, split_with_sizes=FUNCTIONS["split_with_sizes"],
               unsafe_split=split, unsafe_chunk=chunk,
               renorm_=_inplace_row(renorm, "renorm_"),
               masked_scatter_=_inplace_row(masked_scatter, "masked_scatter_"))



def put(input, index, source, accumulate=False):
    """``input`` with ``source``'s elements written at the flat positions ``index`` of it
    (added with ``accumulate``), as ``index_put`` of the flattened input."""
    if not isinstance(index, Tensor) or np.asarray(index._value).dtype != np.int64:
        raise RuntimeError("put_(): Expected a long tensor for index, but got "
                           f"{index.dtype if isinstance(index, Tensor) else type(index).__name__}")
    if index.numel() != source.numel():
        raise RuntimeError(f"put_(): Expected source and index to have the same number of "
                           f"elements, but got source.numel() = {source.numel()}, "
                           f"index.numel() = {index.numel()}")
    n = input.numel()
    flat_index = np.asarray(index._value).reshape(-1)
    if np.any(flat_index >= n) or np.any(flat_index < -n):
        raise IndexError(f"out of range: tried to access index {int(np.max(flat_index))} on a "
                         f"tensor of {n} elements.")
    flat = index_put(reshape(input, (-1,)), (wrap(flat_index % builtins.max(n, 1)),),
                     reshape(source, (-1,)), accumulate)
    return reshape(flat, tuple(input.shape))


def index_reduce(input, dim, index, source, reduce, *, include_self=True):
    """``input`` with the slices of ``source`` along ``dim`` folded by ``reduce`` (``"prod"``,
    ``"mean"``, ``"amax"``, ``"amin"``) into the slices ``index`` names: ``scatter_reduce``
    with ``index`` spread over the other dims of ``source``."""
    if reduce not in ("prod", "mean", "amax", "amin"):
        raise RuntimeError(f"index_reduce(): Expected reduce to be one of prod, mean, amax or "
                           f"amin but got {reduce}.")
    d = wrap_dim(dim, builtins.max(input.ndim, 1))
    idx = np.asarray(index._value if isinstance(index, Tensor) else index, np.int64)
    if idx.ndim != 1 or len(idx) != (source.shape[d] if source.ndim else 1):
        raise IndexError("index_reduce_(): Index should have dimension 1 or 0 and the same "
                         "number of elements as source's size along dim")
    shape = [1] * source.ndim
    if source.ndim:
        shape[d] = len(idx)
    spread = np.broadcast_to(idx.reshape(shape), tuple(source.shape))
    return scatter_reduce(input, d, wrap(np.array(spread)), source, reduce,
                          include_self=include_self)


FUNCTIONS.update(put=put, index_reduce=index_reduce)
METHODS.update(put=put, index_reduce=index_reduce, put_=_inplace_row(put, "put_"),
               index_reduce_=_inplace_row(index_reduce, "index_reduce_"))


FUNCTIONS.update(i0=_SPECIAL["i0"])
METHODS.update(i0=_SPECIAL["i0"], i0_=_inplace_row(_SPECIAL["i0"], "i0_"))



# -- Python callables over elements, and resize_ (tensors that do not require grad) ------------
def _elementwise_python(self, name, fn, others=()):
    if self.requires_grad:
        raise RuntimeError(f"Can't call {name}() on Variable that requires grad. Use "
                           f"var.detach().{name}() instead.")
    v = np.asarray(self._value)
    arrays = [np.broadcast_to(np.asarray(o._value if isinstance(o, Tensor) else o), v.shape)
              for o in others]
    out = np.array([fn(*(a.item() for a in items)) for items in
                    zip(v.reshape(-1), *(a.reshape(-1) for a in arrays))] if v.size else [],
                   dtype=v.dtype).reshape(v.shape)
    return self._inplace(lambda s: wrap(out))


def apply_(self, callable):
    """Each element replaced by ``callable(element)`` (a Python function; no gradient)."""
    return _elementwise_python(self, "apply_", callable)


def map_(self, tensor, callable):
    """Each element replaced by ``callable(element, other)``, ``tensor`` broadcast."""
    return _elementwise_python(self, "map_", callable, (tensor,))


def map2_(self, x, y, callable):
    """Each element replaced by ``callable(element, x_element, y_element)``."""
    return _elementwise_python(self, "map2_", callable, (x, y))


def resize_(self, *sizes, memory_format=None):
    """This tensor given shape ``sizes``: its elements in order, the new ones 0 (PyTorch's
    are uninitialised memory); not for a tensor that requires grad, or that views or is
    viewed by another."""
    shape = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else \
        tuple(int(n) for n in sizes)
    if self.requires_grad:
        raise RuntimeError("cannot resize variables that require grad")
    root, steps = root_and_steps(self)
    if steps or live_views(root):
        raise NotImplementedError("resize_: a tensor that views or is viewed by another is not "
                                  "supported by tapegrad")
    v = np.asarray(self._value)
    out = np.zeros(shape, v.dtype)
    flat = out.reshape(-1)
    k = builtins.min(flat.size, v.size)
    flat[:k] = v.reshape(-1)[:k]
    if shape == v.shape:
        return self
    self.data = wrap(out)
    return self


def resize_as_(self, other, memory_format=None):
    """``resize_(other.shape)``."""
    return resize_(self, tuple(other.shape))


METHODS.update(apply_=apply_, map_=map_, map2_=map2_, resize_=resize_, resize_as_=resize_as_)



def tensorinv(A, ind=2):
    """The inverse of ``A`` read as a matrix of its first ``ind`` dims by the rest (their
    products equal), shaped as ``A.shape[ind:] + A.shape[:ind]``."""
    if ind <= 0:
        raise RuntimeError(f"Expected a strictly positive integer for 'ind', but got {ind}")
    out_shape, in_shape = tuple(A.shape[:ind]), tuple(A.shape[ind:])
    rows, cols = int(np.prod(out_shape)), int(np.prod(in_shape))
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[ind:]) "
                           f"== prod(self.shape[:ind]), but got {cols} != {rows}")
    return reshape(inv(reshape(A, (rows, cols))), in_shape + out_shape)


def tensorsolve(A, B, dims=None):
    """``X`` with ``tensordot(A, X, X.ndim) = B`` (``dims``: the dims of ``A`` that ``X``
    takes, moved to the end first)."""
    if dims is not None:
        dims = [wrap_dim(d, A.ndim) for d in dims]
        A = permute(A, [d for d in range(A.ndim) if d not in dims] + dims)
    x_shape = tuple(A.shape[B.ndim:])
    rows, cols = int(np.prod(tuple(A.shape[:B.ndim]))), int(np.prod(x_shape))
    if rows != cols:
        raise RuntimeError(f"Expected self to satisfy the requirement prod(self.shape[other.ndim:"
                           f"]) == prod(self.shape[:other.ndim]), but got {cols} != {rows}")
    return reshape(solve(reshape(A, (rows, cols)), reshape(B, (rows,))), x_shape)


LINALG.update(tensorinv=tensorinv, tensorsolve=tensorsolve)
