"""PyTorch-shaped functions and methods over the array-op table (``array_ops.ARRAY_OPS``).

Each function here only maps PyTorch's signature onto a row of the table (``call``); the
math lives in the table.  ``tapegrad/__init__.py`` exposes them as ``tg.<name>`` and, for
rows marked ``method``, as ``Tensor`` methods.
"""
from __future__ import annotations

import builtins
import re
from collections import namedtuple
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.elementwise import FUNCTIONS as ELEMENTWISE
from ..core.dtypes import float32, float64
from ..core.tape import recording
from ..core.tensor import Tensor, note_comparison_use, wrap
from .array_ops import (call, full_slice as _full, index, index_shape, index_steps, is_advanced_index, shape_arg,
                        without_leading_ones, wrap_dim)

MaxMin = namedtuple("MaxMin", ["values", "indices"])
Dim = Optional[Union[int, Tuple[int, ...], List[int]]]
_INT = (int, np.integer)


def _dims(dim, ndim=None):
    """A reduction's ``dim`` as the table takes it: None (all dims), an int or a tuple;
    ``()`` and ``[]`` name every dim, as in PyTorch."""
    if isinstance(dim, (list, tuple)):
        return tuple(dim) or (tuple(range(ndim)) if ndim is not None else None)
    return dim


def sum(input: Tensor, dim: Dim = None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A001
    """Sum of all elements, or over ``dim`` (int or tuple)."""
    return call("sum", input, dim=_dims(dim, input.ndim), keepdim=keepdim)


def mean(input: Tensor, dim: Dim = None, keepdim: bool = False, dtype=None) -> Tensor:
    """Mean of all elements, or over ``dim``."""
    return call("mean", input, dim=_dims(dim, input.ndim), keepdim=keepdim)


def prod(input: Tensor, dim: Optional[int] = None, keepdim: bool = False, dtype=None) -> Tensor:
    """Product of all elements, or over ``dim`` (an int)."""
    return call("prod", input, dim=dim, keepdim=keepdim)


def _extreme(kind, input, dim, keepdim, other):
    if isinstance(dim, Tensor):   # tg.max(a, b): the elementwise maximum
        other, dim = dim, None
    if other is not None:
        return ELEMENTWISE["maximum" if kind == "max" else "minimum"](input, other)
    if dim is None:
        return call(f"{kind}_all", input)
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
    return call("logsumexp", input, dim=_dims(dim), keepdim=keepdim)


def softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """exp(x) / sum(exp(x)) along ``dim``, computed stably."""
    return call("softmax", input, dim=dim)


def log_softmax(input: Tensor, dim: int, dtype=None) -> Tensor:
    """log(softmax(x)) along ``dim``, computed stably."""
    return call("log_softmax", input, dim=dim)


def cumsum(input: Tensor, dim: int, dtype=None) -> Tensor:
    """Cumulative sums along ``dim``."""
    return call("cumsum", input, dim=dim)


def cumprod(input: Tensor, dim: int, dtype=None) -> Tensor:
    """Cumulative products along ``dim`` (the gradient is exact with zeros in the input)."""
    return call("cumprod", input, dim=dim)


def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with NumPy/PyTorch semantics (dot, mv, mm, batched)."""
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


def _contiguous_strides(shape):
    return tuple(int(np.prod(shape[k + 1:], dtype=np.int64)) for k in range(len(shape)))


def _expanded_strides(shape, to):
    """The strides of a contiguous tensor of ``shape`` expanded to ``to`` (0 where expanded)."""
    own = (0,) * (len(to) - len(shape)) + _contiguous_strides(shape)
    lead = len(to) - len(shape)
    return tuple(0 if k < lead or (shape[k - lead] == 1 and n != 1) else own[k]
                 for k, n in enumerate(to))


def _is_contiguous(shape, strides):
    # PyTorch's test: dims of size 1 are skipped
    return all(n == 1 or s == c for n, s, c in zip(shape, strides, _contiguous_strides(shape)))


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
        return call("view_node", x, new_shape, node="ReshapeAliasBackward0")
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
    if na >= 3 and nb <= 2:   # fold a's batch into its rows: one mm (or mv)
        rows = int(np.prod(sa[:-1], dtype=np.int64))
        out = call("matmul", call("reshape", a, shape=(rows, sa[-1])), b)
        return call("view_node", out, sa[:-1] + sb[1:], node="UnsafeViewBackward0")
    if nb >= 3 and na <= 2 and a._tape is not None:   # fold b's batch: (b^T a^T)^T
        bt = transpose(b, -1, -2)
        shape_t = sb[:-2] + (sb[-1], sb[-2])
        strides_t = _contiguous_strides(sb)
        strides_t = strides_t[:-2] + (strides_t[-1], strides_t[-2])
        rows = int(np.prod(shape_t[:-1], dtype=np.int64))
        folded = _reshape_as_torch(bt, shape_t, strides_t, (rows, sb[-2]))
        out = call("matmul", folded, t(a) if na == 2 else a)
        out = call("view_node", out, shape_t[:-1] + sa[:-1], node="UnsafeViewBackward0")
        if na == 1:
            return out
        out = transpose(out, -1, -2)
        shape_o = tuple(out.shape)
        strides_o = _contiguous_strides(shape_t[:-1] + sa[:-1])
        strides_o = strides_o[:-2] + (strides_o[-1], strides_o[-2])
        return out if _is_contiguous(shape_o, strides_o) else ELEMENTWISE["clone"](out)
    # a batch of matrix products: both expanded to the broadcast batch, then one bmm
    n, m = (sa[-2] if na > 1 else 1), sa[-1]
    p = sb[-1] if nb > 1 else 1
    batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    count = int(np.prod(batch, dtype=np.int64))
    operands = []
    for x, s, tail in ((a, sa, (n, m)), (b, sb, (sb[-2] if nb > 1 else sb[0], p))):
        full = batch + tail
        operands.append(_reshape_as_torch(call("expand", x, shape=full), full,
                                          _expanded_strides(s, full), (count,) + tail))
    out = call("matmul", *operands)
    shape = batch + ((n,) if na > 1 else ()) + ((p,) if nb > 1 else ())
    return call("view_node", out, shape, node="UnsafeViewBackward0")


def linear(input: Tensor, weight: Tensor, bias: Optional[Tensor] = None) -> Tensor:
    """``input @ weight.T + bias`` as one fused op (``tg.nn.functional.linear``)."""
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
    return matmul(input, vec)


def dot(input: Tensor, other: Tensor) -> Tensor:
    """Dot product of two 1-D tensors."""
    if input.ndim != 1 or other.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {other.ndim}D tensors")
    return matmul(input, other)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of two 1-D tensors."""
    return call("outer", input, vec2)


def t(input: Tensor) -> Tensor:
    """Transpose of a 2-D tensor (a 0-D or 1-D tensor's values as they are, in a new node,
    as PyTorch's TBackward0)."""
    return call("t", input)


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap dimensions ``dim0`` and ``dim1``."""
    return call("transpose", input, dim0=dim0, dim1=dim1)


def permute(input: Tensor, *dims: Union[int, Sequence[int]]) -> Tensor:
    """Reorder dimensions."""
    return call("permute", input, dims=shape_arg(dims))


def reversed_dims(self):
    """The tensor with its dimensions reversed (``x.T``)."""
    if self.ndim < 2:
        return self
    return call("permute", self, dims=tuple(range(self.ndim - 1, -1, -1)))


def reshape(input: Tensor, *shape: Union[int, Sequence[int]]) -> Tensor:
    """The same values in a new shape (``-1`` infers one dimension)."""
    shape = shape_arg(shape)
    if builtins.sum(n == -1 for n in shape) > 1:
        raise RuntimeError("only one dimension can be inferred")
    try:
        np.empty(input.shape).reshape(shape)
    except ValueError:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size "
                           f"{input.numel()}") from None
    return call("reshape", input, shape=shape)


view = reshape


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
    return call("squeeze", input, dim=dim)


def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a dimension of size 1 at ``dim``."""
    return call("unsqueeze", input, dim=dim)


def expand(input: Tensor, *sizes: Union[int, Sequence[int]]) -> Tensor:
    """Broadcast to ``sizes`` (``-1`` keeps a dimension); the gradient sums back."""
    sizes = shape_arg(sizes)
    check_expand(input, sizes)
    return call("expand", input, shape=sizes)


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


def flip(input: Tensor, *dims: Union[int, Sequence[int]]) -> Tensor:
    """Reverse the order of the elements along ``dims``."""
    return call("flip", input, dims=shape_arg(dims))


def roll(input: Tensor, shifts: Union[int, Sequence[int]],
         dims: Optional[Union[int, Sequence[int]]] = None) -> Tensor:
    """Shift the elements by ``shifts`` along ``dims`` (of the flattened input without
    ``dims``), wrapping around."""
    return call("roll", input, shifts=_dims(shifts) if isinstance(shifts, list) else shifts,
                dims=_dims(dims))


def cat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate tensors along ``dim``."""
    if not len(tensors):
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    shapes = [tuple(t.shape) for t in tensors]
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


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Stack tensors along a new dimension ``dim``."""
    if not len(tensors):
        raise RuntimeError("stack expects a non-empty TensorList")
    shapes = [tuple(t.shape) for t in tensors]
    dim = wrap_dim(dim, len(shapes[0]) + 1)
    for k, s in enumerate(shapes):
        if s != shapes[0]:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(shapes[0])} at entry 0 and {list(s)} at entry {k}")
    return call("stack", *tensors, dim=dim)


def split(tensor: Tensor, split_size_or_sections: Union[int, Sequence[int]],
          dim: int = 0) -> Tuple[Tensor, ...]:
    """Split into pieces of ``split_size_or_sections`` along ``dim``."""
    return call("split", tensor, split_size_or_sections, dim=dim)


def chunk(input: Tensor, chunks: int, dim: int = 0) -> Tuple[Tensor, ...]:
    """Split into ``chunks`` pieces of (nearly) equal size along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("chunk expects at least a 1-dimensional tensor")
    dim = wrap_dim(dim, input.ndim)
    n = input.shape[dim]
    return split(input, -(-n // chunks), dim)


def index_value(idx):
    if isinstance(idx, Tensor):
        v = idx._value
        return np.asarray(v) if v.__class__ is not float else v
    if isinstance(idx, list):
        return np.asarray(idx)
    if isinstance(idx, tuple):
        return tuple(index_value(i) for i in idx)
    return idx


def check_index(input, idx):
    parts = idx if isinstance(idx, tuple) else (idx,)
    dims = [k for k, p in enumerate(parts) if p is not None and p is not Ellipsis]
    if len(dims) > input.ndim and not any(isinstance(p, np.ndarray) and p.dtype == bool for p in parts):
        if input.ndim == 0:
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        raise IndexError(f"too many indices for tensor of dimension {input.ndim}")
    try:
        np.empty(input.shape, dtype=np.int8)[idx]
    except IndexError as e:
        msg = str(e)
        m = re.search(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)", msg)
        if m:
            raise IndexError(f"index {m.group(1)} is out of bounds for dimension {m.group(2)} "
                             f"with size {m.group(3)}") from None
        raise IndexError(msg) from None
    except (TypeError, ValueError) as e:
        raise IndexError(str(e)) from None


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
    recorded as PyTorch records them (``x[i, j]`` is two ``SelectBackward0`` nodes)."""
    note_recorded_index(idx)
    idx = index_value(idx)
    check_index(input, idx)
    return index(input, idx)


def gather(input: Tensor, dim: int, index) -> Tensor:
    """``out[i][j] = input[index[i][j]][j]`` for ``dim`` 0 (and so on): the result has the
    index's shape, which may be smaller than the input's in every dim but ``dim``
    (repeated indices accumulate in backward)."""
    index = np.asarray(index_value(index))
    if index.dtype.kind not in "iu":
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
    return call("gather", input, dim, index)


def index_select(input: Tensor, dim: int, index) -> Tensor:
    """Slices of ``input`` along ``dim`` at the integer ``index`` (a vector)."""
    index = np.asarray(index_value(index))
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    if index.dtype.kind not in "iu":
        raise RuntimeError("index_select(): Expected dtype int32 or int64 for index")
    dim = wrap_dim(dim, input.ndim)
    if input.ndim == 0 and index.size != 1:
        raise RuntimeError(f"index_select(): Index to scalar can have only 1 value, got "
                           f"{index.size} value(s)")
    n = input.shape[dim] if input.ndim else 1
    if np.any(index >= n) or np.any(index < -n):
        raise IndexError("index out of range in self")
    return call("index_select", input, dim, index)


def take(input: Tensor, index) -> Tensor:
    """Elements of the flattened input at ``index``."""
    index = index_value(index)
    if np.any(index >= input.numel()) or np.any(index < -input.numel()):
        raise IndexError(f"out of range: tried to access index {int(np.max(index))} on a "
                         f"tensor of {input.numel()} elements.")
    return call("take", input, index)


def to(self, dtype):
    """This tensor converted to ``dtype`` (differentiable, as PyTorch's ``to``)."""
    if self.dtype is dtype:
        return self
    return call("to_dtype", self, dtype=dtype.np)


def to_float64(self):
    """``to(tg.float64)`` (``x.double()``)."""
    return to(self, float64)


def to_float32(self):
    """``to(tg.float32)`` (``x.float()``)."""
    return to(self, float32)


def setitem(input: Tensor, idx, value) -> None:
    """``x[idx] = value``, in place under the in-place rules (recorded as CopySlices)."""
    note_recorded_index(idx)
    idx = index_value(idx)
    check_index(input, idx)
    if not isinstance(value, Tensor):   # a constant input: an edge without a node, as PyTorch's
        value = wrap(np.asarray(value))
    steps = index_steps(tuple(input.shape), idx)
    target = index_shape(tuple(input.shape), idx)
    advanced = is_advanced_index(steps[-1])
    stripped = without_leading_ones(value.shape)
    if advanced:
        try:
            fits = np.broadcast_shapes(stripped, target) == target
        except ValueError:
            fits = False
        if not fits:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(stripped)} cannot "
                               f"be broadcast to indexing result of shape {list(target)}")
    elif value.shape != target:
        check_expand(wrap(np.empty(stripped, np.int8)), target)
    if value._tape is not None and value.ndim and value.shape != target:
        # PyTorch views the value without its leading ones, then expands it over x's view
        # (a 0-d value it passes to fill_ as it is)
        if not advanced or stripped != tuple(value.shape):
            value = reshape(value, stripped)
        if not advanced and value.shape != target:
            value = expand(value, target)
    whole = steps[-1]
    if len(steps) == 1 and (whole == () if isinstance(whole, tuple) else
                            whole is Ellipsis or (input.ndim and _full(whole, input.shape[0]))):
        row = "fill_with" if value.ndim == 0 else "copy"   # all of x: as fill_ or copy_
        input._inplace(lambda s: call(row, s, value))
        return
    input._inplace(lambda s: call("index_put", s, idx, value))


# Tensor methods (name -> function); PyTorch's method signatures take ``self`` first.
METHODS = {
    "sum": sum, "mean": mean, "prod": prod, "max": max, "min": min, "amax": amax,
    "amin": amin, "var": var, "std": std, "norm": norm, "logsumexp": logsumexp,
    "softmax": softmax, "log_softmax": log_softmax, "matmul": matmul, "mm": mm, "mv": mv,
    "dot": dot, "outer": outer, "t": t, "transpose": transpose, "permute": permute,
    "reshape": reshape, "view": view, "flatten": flatten, "squeeze": squeeze,
    "unsqueeze": unsqueeze, "expand": expand, "expand_as": expand_as, "split": split,
    "chunk": chunk, "cumsum": cumsum, "cumprod": cumprod, "flip": flip, "roll": roll,
    "gather": gather, "index_select": index_select, "take": take,
}
FUNCTIONS = dict(METHODS, cat=cat, concat=concat, stack=stack, linear=linear)
METHODS.update(
    to=to, double=to_float64, float=to_float32, __getitem__=getitem, __setitem__=setitem,
    __matmul__=matmul, __rmatmul__=lambda self, other: matmul(other, self),
    T=property(reversed_dims, doc="The tensor with its dimensions reversed."),
    mT=property(lambda self: transpose(self, -2, -1), doc="The last two dimensions swapped."))
