"""The array-op table: reductions, linear algebra, shape changes, indexing.  The single
source of truth for them, as ``optable.py`` is for the elementwise ops that sweep in Numba.

Each row is a forward over NumPy values and a vector-Jacobian product in HIPS autograd's
style: ``vjp(g, ans, *xs, **params)`` returns the gradient for each input, given ``g`` (the
gradient of the result) and ``ans`` (the result).  Rules are written in tapegrad ops on
tensors, once: the float walk runs them under no_grad, ``create_graph=True`` records them,
so they differentiate to any order.  Rows are registered with ``@defop``; the
``tg.<name>`` functions and ``Tensor`` methods are derived from the table in ``__init__``,
and ``tests/test_array_ops.py`` checks every row against finite differences (and fails when
a row has no test case).  A recorded array op is a ``pyfunc`` entry on the tape: the Numba
sweep stops there and calls the vjp (``pyop_backward``).
"""
from __future__ import annotations

import builtins
import math
import warnings
from typing import Callable, NamedTuple, Optional, Union

import numpy as np

from ..core.elementwise import FUNCTIONS as ELEMENTWISE
from ..core.fma import fma as _fused
from ..core.dtypes import scalar_type_name
from ..core.shapes import broadcast_view, torch_layout, wrap_dim, wrap_dims
from ..core.pyop import Arg, note_index_versions, record, record_one, record_shared, register_call
from ..core.grad_mode import is_grad_enabled
from ..core.numba_jit import jit
from ..core.tape import next_tape, recording
from ..core.tensor import (Tensor, as_float64, note_comparison_use, recorded_comparison,
                           tensor_of_entry, wrap)
from ..core import interrupts
from ..core.views import register_parts, register_view, remember_view


class ArrayOp(NamedTuple):
    name: str
    node: Union[str, Callable]  # node name, or a function of the call's (values, params)
    forward: Callable           # (*values, **params) -> value (or tuple: see ``outputs``)
    vjp: Callable               # (g, ans, *values, **params) -> tuple of input gradients
    method: bool = True         # also a Tensor method
    outputs: Optional[Callable] = None  # for multi-output ops: ans -> (differentiable, extra)
    cast: bool = True           # results take the inputs' float dtype (float32 stays float32)
    edges: Union[int, Callable, None] = None  # the node's inputs: the first ``edges`` tensor
    #   arguments (PyTorch's differentiable ones; a function of the call's values and params);
    #   later ones are constants
    saves: bool = True          # the rule reads saved values (False: only shapes and params,
    #   so a second backward through a freed graph may run it, as PyTorch allows); or a
    #   function of the node's name, for an op whose nodes differ (getitem's)
    view: bool = False          # the forward returns a NumPy view of its first argument
    #   where it can: the result is a view sharing the input's memory (``core/views.py``)
    reads: Optional[tuple] = None   # the positions of the arguments whose values the rule
    #   reads (None: all); an in-place change of a constant one before the backward raises
    reads_output: bool = False  # PyTorch's rule saves the result: an in-place change of it
    #   before the backward raises
    saves_indices: bool = False  # the forward's second output (the indices min/max over a
    #   dim, sort, topk, kthvalue chose) goes with the recorded call as the param
    #   ``indices``: the rule routes the gradient by them and reads no value, as PyTorch's
    #   saved indices (an input changed in place under no_grad after the op: the forward's
    #   choice, no error; the rule recomputing them read the new values)
    numpy_rule: bool = False    # the rule also runs on plain float64 NumPy values: it uses
    #   only ``rule_call``, shapes and NumPy arithmetic, so the float walk calls it so
    #   (``pyop_numpy_backward``), without wrapping every value in a tensor
    # what a numpy_rule's gradients depend on besides g, differentiably: "nothing" (it reads
    # its inputs for shapes, indices and comparisons only: sum, expand, min over a dim),
    # "others" (each input's gradient is linear in each other input and does not read its
    # own: matmul, einsum); None: not declared.  With a constant g, a create_graph walk runs
    # such a rule on NumPy values where it would record nothing (``pyop_constant_backward``)
    grad_depends: Optional[str] = None


ARRAY_OPS = {}


def defop(name, node, method=True, outputs=None, cast=True, edges=None, saves=True, view=False,
          reads=None, reads_output=False, numpy_rule=False, grad_depends=None,
          saves_indices=False):
    """Register ``forward`` (the decorated function) with its ``vjp`` (``forward.defvjp``).

    The rule is written in tapegrad ops: ``vjp(g, ans, *args, **params)`` gets the result's
    gradient ``g`` and the result ``ans`` as tensors, each tensor argument
    as a tensor (recorded under ``create_graph=True``) and other arguments as given; it
    returns one gradient per positional argument (a tensor, None, or a function of no
    arguments computing it only when that input needs it).  Broadcasting is undone by the
    caller (``sum_to``), never inside a rule.  A multi-output op (``split``) gets lists of
    tensors as ``g`` and ``ans``.  The float walk runs a rule under no_grad on plain
    tensors, ``create_graph=True`` on recorded ones: one rule for every order.  ``edges``
    limits the node's inputs (``next_functions``) to the first tensor arguments, PyTorch's
    differentiable ones (``nll_loss``'s target and weight are constants)."""
    def register(forward):
        def with_vjp(vjp):
            ARRAY_OPS[name] = ArrayOp(name, node, forward, vjp, method, outputs, cast, edges,
                                      saves, view, reads, reads_output, saves_indices,
                                      numpy_rule, grad_depends)
            return vjp
        forward.defvjp = with_vjp
        return forward
    return register


_F64 = np.float64
_DT64 = np.dtype(np.float64)
_float = builtins.float
_new = object.__new__   # (a result made without Tensor(): tg.Tensor(data)'s __init__)


def contiguous(v):
    """``v`` laid out in row-major order, as PyTorch writes the results of reductions,
    scans and copies whatever the input's layout (a later ``view``/``flatten`` of it is a
    view there, so ``grad_fn`` names and ``view``'s errors follow from the layout).  Dims
    of size 1 get row-major strides too: NumPy's ``keepdims`` gives a kept dim the stride
    of the input's reduced dim (``x.t().sum(1, keepdim=True)``: strides (1, 5) where
    PyTorch's are (1, 1)), which ``stride()`` shows and matmul's fold test reads."""
    if v.__class__ is not np.ndarray:
        return v
    if not v.flags.c_contiguous:
        return v.copy()
    if v.ndim > 1 and 1 in v.shape and v.size:
        rows = tuple(k * v.itemsize for k in row_major_strides(v.shape))
        if v.strides != rows:   # (the same memory, the size-1 dims' steps as PyTorch's)
            return np.ndarray(v.shape, v.dtype, v, 0, rows)
    return v


def row_major_strides(shape):
    """PyTorch's strides (in elements) of a contiguous tensor of ``shape`` (a dim of size 0
    steps as one of size 1: ``zeros(3, 0)`` has strides (1, 1))."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= builtins.max(n, 1)
    return tuple(reversed(out))


def like_layout(v, x):
    """``v`` laid out as PyTorch lays out sort's and flip's results of ``x``, in memory of
    its own (``v`` may view ``x``): ``x``'s own strides where ``x`` is dense (PyTorch's
    ``empty_like`` keeps them, a dim of size 1 included), else TensorIterator's layout for
    an operand ``x`` (``torch_layout``: a permuted ``x``'s strides, C order for an expanded
    one)."""
    if x.__class__ is np.ndarray and v.shape == x.shape and v.ndim >= 2 and 1 in x.shape \
            and v.size:
        steps = _dense_steps(x)
        if steps is not None:   # (a size-1 dim's stride is x's, not a row-major one)
            strides = tuple(k * v.itemsize for k in steps)
            if v.strides == strides and not np.may_share_memory(v, x):
                return v
            out = np.ndarray(x.shape, v.dtype, np.empty(x.size, v.dtype), 0, strides)
            out[...] = v
            return out
    if x.__class__ is np.ndarray and v.shape == x.shape and v.ndim >= 2 and not x.flags.c_contiguous:
        out = torch_layout(v, (x,))
        if out is not v:
            return out
        return np.copy(v, order="K") if np.may_share_memory(v, x) else v
    return v if v.flags.c_contiguous and not np.may_share_memory(v, x) else v.copy()


def _dense_steps(x):
    """``x``'s strides in elements where its elements fill one block without gaps or
    overlaps (each dim longer than 1 steps over the smaller ones exactly, all forward), else
    None."""
    steps = [st // x.itemsize for st in x.strides]
    need = 1
    for k in sorted((k for k in range(x.ndim) if x.shape[k] != 1), key=steps.__getitem__):
        if steps[k] != need:
            return None
        need *= x.shape[k]
    return steps


def _np(v):
    return np.asarray(v) if v.__class__ is not float else np.float64(v)


def _out(v, like=None):
    """A forward result as a tensor value: 0-d float64 becomes a Python float."""
    if v.__class__ is float and like is None:   # (an unbind's elements)
        return v
    if v.__class__ is not np.ndarray:
        v = np.asarray(v)
    if like is not None and v.dtype != like and like.kind == "f":
        v = v.astype(like)
    if v.ndim == 0 and v.dtype == np.float64:
        return float(v)
    if v.dtype is not _DT64 and v.dtype == _DT64:
        v = as_float64(v)
    return v


def _record_call(op, node, args, outs, params, edges=None, shared=False, tensors=None):
    """Record array op ``op`` applied to ``args`` with results ``outs``; returns the result
    tensors.  The entry keeps the call (``PyOp.fwd``): the walk finds the rule from it; the
    node's inputs are the first ``edges`` tensors (all for None).  ``shared``: the results
    view the input's memory, so the tape keeps its own copies (an in-place change through
    a view must not change what autograd saved).  ``tensors``: the tensors among ``args``
    when the caller has them already."""
    T = recording()
    if tensors is None:
        tensors = [a for a in args if isinstance(a, Tensor)]
    if edges is not None:
        tensors = tensors[:edges]
    if T is None:
        return [wrap(v) for v in outs]
    if T._retiring:
        T = next_tape(T, tensors)
    refs, live, dead = [], False, False
    for t in tensors:   # (a tape reference is taken only once one input is known to be live)
        tt = t._tape
        if tt is None:
            refs.append(-1)
            dead = True
        else:
            live = True
            refs.append(t._entry if tt is T else T._ref(t))
    if not live:
        return [wrap(v) for v in outs]
    kept = [np.array(v) if v.__class__ is np.ndarray else v for v in outs] if shared else outs
    n = len(args)
    name = op.name
    if not dead and n == len(refs):   # every argument an input
        if len(outs) == 1:
            number = _SHARED_CALLS.get((name, n, id(params)))
            if number is None:
                number = shared_call(name, n, params)
            if number is not None:
                return [tensor_of_entry(T, record_shared(T, node, refs, kept[0], number), outs[0])]
        fwd = (name, arg_numbers(n), params)
    else:
        fwd = (name, _template(args, edges, op.reads), params)
    if len(outs) == 1:
        return [tensor_of_entry(T, record_one(T, node, refs, kept[0], None, fwd), outs[0])]
    idx = record(T, node, refs, kept, None, fwd)
    return [tensor_of_entry(T, i, v) for i, v in zip(idx, outs)]


def pyop_saves(py):
    """Does recorded Python op ``py``'s backward read saved values?  (A custom Function:
    assumed so.)  A backward through a freed graph may run one that does not."""
    if py.backward_fn is not None:
        return True
    saves = ARRAY_OPS[py.fwd[0]].saves
    return saves(py.name) if callable(saves) else saves


def pyop_reads_output(py):
    """Does recorded Python op ``py``'s backward read its result (PyTorch saves it)?"""
    return py.backward_fn is None and ARRAY_OPS[py.fwd[0]].reads_output


def pyop_reads_values(py):
    """Does recorded Python op ``py``'s backward read its inputs' values?  (An in-place
    change of one before the backward then raises.)"""
    return py.backward_fn is not None or ARRAY_OPS[py.fwd[0]].reads != ()


def pyop_read_inputs(py):
    """The input references of recorded Python op ``py`` whose values its backward reads
    (PyTorch saves them): all of a custom Function's; an array op's at the positions of its
    call in its ``reads``; of an op whose inputs' gradients each read the others only
    (``grad_depends="others"``: matmul), those some other input's gradient reads (PyTorch's
    mm saves ``self`` only where ``mat2`` requires grad)."""
    if py.backward_fn is not None:
        return py.inputs
    op = ARRAY_OPS[py.fwd[0]]
    if op.saves_indices and py.fwd[2].get("indices") is not None:
        return []
    reads = op.reads
    if reads is None:
        if op.grad_depends == "others":
            inputs = py.inputs
            return [r for k, r in enumerate(inputs)
                    if builtins.any(q >= 0 for j, q in enumerate(inputs) if j != k)]
        return py.inputs
    return [py.inputs[int(a)] for k, a in enumerate(py.fwd[1]) if a.__class__ is Arg and k in reads]


def pyop_backward(py, grads, saved, outs):
    """The input gradients of recorded Python op ``py`` (one per ``py.inputs``, None for
    an input that needs none), given its outputs' gradients ``grads`` (tensors).
    ``saved(ref)`` is the value an input had, as a tensor (recorded in a create_graph walk),
    and ``outs`` the outputs likewise.  The rule is the same in both walks: grad mode tells
    it whether to record."""
    if py.backward_fn is not None:   # a custom Function: its backward, on tensors
        return py.backward_fn(grads)
    name, _, params = py.fwd
    args, tensor_pos = _rule_arguments(py, saved, _as_given)
    multi = py.nout > 1 or name in _MULTI_OUTPUT
    g, ans = (grads, outs) if multi else (grads[0], outs[0])
    gs = ARRAY_OPS[name].vjp(g, ans, *args, **params)
    return [_graph_shape(gs[k], args[k]) if r >= 0 else None
            for r, k in zip(py.inputs, tensor_pos)]


def _rule_arguments(py, input_value, constant_value):
    """The arguments of recorded op ``py``'s rule: its call's template with each input as
    ``input_value(ref)`` and each constant tensor as ``constant_value(tensor)``, and the
    positions of the inputs among them; None where ``input_value`` gives None."""
    inputs = py.inputs
    args, tensor_pos = [], []
    for k, a in enumerate(py.fwd[1]):
        if a.__class__ is Arg:
            a = input_value(inputs[int(a)])
            if a is None:
                return None
            tensor_pos.append(k)
        elif isinstance(a, Tensor):
            tensor_pos.append(k)
            a = constant_value(a)
        args.append(a)
    del tensor_pos[len(inputs):]
    return args, tensor_pos


def _as_given(t):
    return t


def _constant_value(t):
    """A constant tensor of a rule's call (an index) as ``call`` passes its value."""
    v = t._value
    return _F64(v) if v.__class__ is float else np.asarray(v)


def pyop_numpy_backward(py, g, ans, value):
    """``pyop_backward`` in the float walk on NumPy values: the input gradients of recorded
    op ``py`` given its one result's gradient ``g`` and value ``ans`` (numbers or arrays), and
    ``value(ref)``, the value of an entry or constant; None when the rule must run on
    tensors (a rule that is not a ``numpy_rule``, several outputs, a value that is not
    float64, which ``call`` would cast).  The same rule, without a tensor made for each
    value and each step's result (most of a small rule's cost)."""
    if py.backward_fn is not None or py.nout != 1:
        return None
    name, _, params = py.fwd
    op = ARRAY_OPS[name]
    if not op.numpy_rule or name == "split":
        return None
    g, ans = _float64(g), _float64(ans)
    if g is None or ans is None:
        return None
    found = _rule_arguments(py, lambda r: _float64(value(r)), _constant_value)
    if found is None:
        return None
    args, tensor_pos = found
    gs = op.vjp(g, ans, *args, **params)
    return [_graph_shape(gs[k], args[k], numpy=True) if r >= 0 else None
            for r, k in zip(py.inputs, tensor_pos)]


_BASIC_PARTS = (int, slice, type(None), type(Ellipsis))


# How the float walk runs an array call's backward itself (``direct_kind``)
DIRECT_INDEX, DIRECT_UNBIND, DIRECT_EXPAND, DIRECT_SPREAD, DIRECT_CAT = range(5)


def direct_kind(fwd):
    """For a recorded array call ``fwd`` (``(name, arguments, params)``; None for a custom
    Function's op), how the float walk runs its backward itself, with the functions its
    rule calls and without the rule's argument building and checks (most of what these
    cheap rules cost; the same values): ``(DIRECT_INDEX, idx)`` a getitem with a basic
    index (ints, slices, None, Ellipsis: a view of its input), whose rule writes ``g`` at
    ``idx`` into zeros (the walk adds ``g`` there into the input's adjoint);
    ``(DIRECT_UNBIND, dim)``; ``(DIRECT_EXPAND,)`` an ``expand`` (an implicit broadcast
    too) and ``(DIRECT_SPREAD, dim, keepdim, mean)`` a sum or mean over dims, on one input
    (``spread_grad``); ``(DIRECT_CAT,)`` a ``cat`` or ``stack`` (``call_parts``); else
    None.  A function of the call alone: the walk keeps it per shared call."""
    if fwd is None:
        return None
    name, args, params = fwd
    if name == "getitem":
        idx = args[1]
        c = idx.__class__
        if c is int or c is slice or (c is tuple and builtins.all(p.__class__ in _BASIC_PARTS
                                                                  for p in idx)):
            return DIRECT_INDEX, idx
        return None
    if name == "unbind":
        return DIRECT_UNBIND, params.get("dim", 0)
    if name == "cat" or name == "stack":
        return (DIRECT_CAT,)
    if len(args) != 1:
        return None
    if name == "expand":
        return (DIRECT_EXPAND,)
    if (name == "sum" or name == "mean") and len(params) <= 2 and \
            params.keys() <= {"dim", "keepdim"}:
        return DIRECT_SPREAD, params.get("dim"), params.get("keepdim", False), name == "mean"
    return None


def spread_grad(kind, g, x):
    """The input's gradient of a ``DIRECT_EXPAND`` or ``DIRECT_SPREAD`` call (``kind``) given
    ``g``, its result's gradient, and ``x``, the input's value (float64 NumPy values, else
    None: the rule), by the functions its rule calls (``sum_to``, ``_spread``)."""
    g, x = _float64(g), _float64(x)
    if g is None or x is None:
        return None
    if kind[0] == DIRECT_EXPAND:
        return sum_to(g, x.shape)
    _, dim, keepdim, mean = kind
    if mean:
        g = g * (g.size / max(x.size, 1))
    return _spread(g, x, dim, keepdim)


def spread_run(kind, x_shape, out_shape):
    """Where the sweep runs a ``DIRECT_EXPAND`` or ``DIRECT_SPREAD`` call's backward itself
    (``kernels.spread``), with ``spread_grad``'s sums: ``(-1, na, nb, nc)`` for a broadcast
    of an input of ``x_shape`` to ``out_shape`` over one run of ``nb`` elements (the
    input seen as ``(na, nc)``) that ``sum_to`` sums in one reduction before the last axis
    (``_sum_middle``'s and NumPy's: each input element ``0.0 +`` its terms in order);
    ``(-2, na, nb, nc)`` for a sum over one run of dims, whose gradient adds one term to
    each element, ``(-3, ...)`` for a mean (the term times ``g.size / x.size``, which is
    ``1 / nb`` rounded once).  None elsewhere: two reductions (leading dims and dims of
    size 1), a run ending at the last axis (``nc`` 1: NumPy sums that pairwise), dims apart,
    a full sum."""
    if kind[0] == DIRECT_EXPAND:
        lead = len(out_shape) - len(x_shape)
        axes = [lead + k for k, n in enumerate(x_shape) if n == 1 and out_shape[lead + k] != 1]
        if lead < 0 or (lead > 0 and axes) or (lead == 0 and not axes):
            return None
        first, k = (0, lead) if lead else (axes[0], len(axes))
        if lead == 0 and axes[-1] - first + 1 != k:
            return None
        nc = _prod(out_shape[first + k:])
        return (-1, _prod(out_shape[:first]), _prod(out_shape[first:first + k]), nc) \
            if nc >= 2 else None
    if kind[0] != DIRECT_SPREAD or kind[1] is None:
        return None
    axes = sorted(_axes(kind[1], len(x_shape)))
    if not axes or axes[-1] - axes[0] + 1 != len(axes):
        return None
    first, k = axes[0], len(axes)
    return (-3 if kind[3] else -2, _prod(x_shape[:first]), _prod(x_shape[first:first + k]),
            _prod(x_shape[first + k:]))


def call_parts(fwd, refs, shape_of):
    """For a recorded ``cat`` or ``stack`` call ``fwd`` with input references ``refs``:
    ``[(input reference, index of its part of the result)]``, the slices of ``g`` its rule
    passes on (references -1 included: a tensor without grad); else None.
    ``shape_of(ref)``: an input entry's shape (None: not float64)."""
    parts, start, shapes = [], 0, []
    for a in fwd[1]:
        if a.__class__ is Arg:
            shape = shape_of(refs[int(a)])
            if shape is None:
                return None
            shapes.append(shape)
        elif isinstance(a, Tensor):
            shapes.append(_shape(a))
        else:
            return None
    if fwd[0] == "stack" and shapes:   # (input k: the result's slice k along dim)
        lead = (slice(None),) * wrap_dim(fwd[2].get("dim", 0), len(shapes[0]) + 1)
        return [(ref, lead + (k,)) for k, ref in enumerate(refs)]
    if not shapes or not shapes[0]:
        return None
    dim = wrap_dim(fwd[2].get("dim", 0), len(shapes[0]))
    lead = (slice(None),) * dim
    for ref, shape in zip(refs, shapes):
        end = start + shape[dim]
        parts.append((ref, lead + (slice(start, end),)))
        start = end
    return parts


def pyop_records_nothing(py, recorded):
    """With a constant gradient, does recorded op ``py``'s rule record nothing?  Its
    gradients depend on no recorded value besides g (``grad_depends``; ``recorded(ref)``:
    does input ``ref`` carry a graph)."""
    if py.backward_fn is not None:
        return False
    depends = ARRAY_OPS[py.fwd[0]].grad_depends
    return depends == "nothing" or (depends == "others" and
                                    builtins.sum(1 for r in py.inputs if recorded(r)) <= 1)


def pyop_constant_backward(py, g, ans, value, recorded):
    """``pyop_numpy_backward`` in a create_graph walk where the gradient ``g`` reaching
    recorded op ``py`` is a constant (a number or array) and its rule would record nothing:
    the input gradients as NumPy values; None where the rule must run on tensors."""
    return pyop_numpy_backward(py, g, ans, value) if pyop_records_nothing(py, recorded) else None


def _float64(v):
    """``v`` as ``call`` hands a float64 value to a forward (a number as np.float64), or
    None for any other value."""
    if v.__class__ is float:
        return _F64(v)
    if v.__class__ is np.ndarray or v.__class__ is _F64:
        dt = v.dtype
        if dt is _DT64 or dt == _DT64:   # (arrays made in Numba carry dtype objects of their own)
            return v
    return None


def rule_call(name, *args, **params):
    """``call`` in a rule: on tensors ``call`` itself; on NumPy values (a ``numpy_rule``
    run by ``pyop_numpy_backward``) the op's forward alone, which is what ``call`` computes
    where nothing records.  (A rule's values are all tensors or all NumPy values.)"""
    for a in args:
        if isinstance(a, Tensor):
            return call(name, *args, **params)
    return ARRAY_OPS[name].forward(*args, **params)


def call(name, *args, **params):
    """Apply array op ``name`` to tensors/constants ``args``; records when grad is on."""
    # one pass over the arguments (this is every array op's fixed cost): the tensors, their
    # NumPy values, the first array's dtype, whether one has a tape, and tg.compile's hooks
    tensors, vals, dt, live = [], [], None, False
    for a in args:
        c = a.__class__
        if c is Tensor:
            v = a._value
            if v.__class__ is float:
                if a._tape is not None:   # inside tg.compile: array ops on its elements
                    live = True           # are scalar entries
                    T = recording()
                    if T is not None and T.rewrite_array_op is not None:
                        return T.rewrite_array_op(name, args, params)
                v = _F64(v)
            else:
                if a._tape is not None:
                    live = True
                if v.__class__ is not np.ndarray:
                    v = np.asarray(v)
                if dt is None:
                    dt = v.dtype
            tensors.append(a)
            vals.append(v)
        elif c in _PLAIN_ARGS:   # (no tapegrad protocol: skip the lookups below)
            vals.append(a)
        else:
            handler = getattr(a, "__tapegrad_array_op__", None)
            if handler is not None:
                return handler(name, args, params)
            if isinstance(a, Tensor):   # (a subclass)
                v = a._value
                v = _F64(v) if v.__class__ is float else np.asarray(v)
                if dt is None and a._value.__class__ is not float:
                    dt = v.dtype
                if a._tape is not None:
                    live = True
                tensors.append(a)
            else:
                v = a
            vals.append(v)
    op = ARRAY_OPS[name]
    T = recording()
    if T is not None and not live:
        # a recorded comparison used where no argument has a tape (the only case where it
        # matters; looked for only then: a failed lookup of the slot costs)
        for t in tensors:
            if t.__class__ is Tensor and getattr(t, "_comparison", None) is not None:
                g = recorded_comparison(T, tensors)
                if g is not None:
                    note_comparison_use(T, g)
                break
    ans = op.forward(*vals, **params)
    extra = None
    if op.outputs is not None:
        ans, extra = op.outputs(ans)
    if not op.cast:
        dt = None
    if T is None or not live:   # (a rule in the float walk; no_grad; constants only)
        if not op.view:
            return _unrecorded(ans, dt, extra)
        node = edges = None     # (read only where a call records)
    else:
        node = op.node
        if node.__class__ is not str:
            node = node(*vals, **params)
        edges = op.edges
        if edges is not None and edges.__class__ is not int:
            edges = edges(*vals, **params)
    if op.view and vals[0].__class__ is np.ndarray:
        return _view_call(op, node, args, ans, params, edges, tensors)
    if extra is not None and op.saves_indices:
        params = {**params, "indices": extra}
    if ans.__class__ is _F64 and (dt is None or dt is _DT64):   # (a float64 reduction)
        out = float(ans)
    elif ans.__class__ is np.ndarray and (dt is None or ans.dtype is dt) and ans.ndim:
        out = ans
    elif isinstance(ans, tuple):  # several differentiable outputs (split, chunk)
        return tuple(_record_call(op, node, args, [_out(v, dt) for v in ans], params, edges,
                                  False, tensors))
    else:
        out = _out(ans, dt)
    res = _record_call(op, node, args, [out], params, edges, False, tensors)[0]
    if extra is None:
        return res
    extra = wrap(extra)
    if op.saves_indices:   # (the indices it returns are the ones it saved, as PyTorch's:
        note_index_versions(res, [extra])   # changed in place, the backward raises)
    return res, extra


def call_arrays(name, xs, params=None):
    """``call(name, *xs, **params)`` where every argument is a tensor: the same value, node
    and entry.  Tensors that are exactly ``Tensor``s holding float64 arrays (bundle
    adjustment's and the LSTM's ``sum``, ``cat``, ``stack``, ``dot``, ``cross``) skip
    ``call``'s analysis of its arguments, which cost as much as the op; anything else goes
    to ``call``."""
    if params is None:
        params = _NO_PARAMS
    op = ARRAY_OPS[name]
    vals, live = [], False
    for x in xs:
        if x.__class__ is not Tensor:
            return call(name, *xs, **params)
        v = x._value
        if v.__class__ is not np.ndarray or v.dtype is not _DT64:
            return call(name, *xs, **params)
        if x._tape is not None:
            live = True
        elif getattr(x, "_comparison", None) is not None:   # (call notes its use)
            return call(name, *xs, **params)
        vals.append(v)
    if op.view or op.outputs is not None or op.edges is not None:
        return call(name, *xs, **params)
    ans = op.forward(*vals, **params)
    if ans.__class__ is _F64:
        out = float(ans)
    elif ans.__class__ is np.ndarray and ans.dtype is _DT64 and ans.ndim:
        out = ans
    else:
        out = _out(ans, _DT64 if op.cast else None)
    T = recording()
    if T is None or not live:
        return wrap(out)
    if T._retiring:
        T = next_tape(T, xs)
    node = op.node
    if node.__class__ is not str:
        node = node(*vals, **params)
    refs, dead = [], False   # (as _record_call takes them, for one output)
    for x in xs:
        tt = x._tape
        if tt is T:
            refs.append(x._entry)
        elif tt is None:
            refs.append(-1)
            dead = True
        else:
            refs.append(T._ref(x))
    n = len(xs)
    if not dead:
        number = _SHARED_CALLS.get((name, n, id(params)))
        if number is None:
            number = shared_call(name, n, params)
        if number is not None:
            return tensor_of_entry(T, record_shared(T, node, refs, out, number), out)
        return tensor_of_entry(T, record_one(T, node, refs, out, None, (name, arg_numbers(n), params)), out)
    return tensor_of_entry(T, record_one(T, node, refs, out, None,
                                         (name, _template(xs, None, op.reads), params)), out)


SUM_ALL = {"dim": None, "keepdim": False}


def sum_all(x):
    """``call("sum", x)`` for exactly a ``Tensor`` with history holding a float64 array (the
    most common reduction: every loss, the LSTM's and GMM's sums): the same value, node and
    entry as ``call_arrays``, without its generic steps (3.5 -> 1.7 us on 14 elements).
    None where that does not apply."""
    v = x._value
    T = recording()
    if T is None or v.__class__ is not np.ndarray or v.dtype is not _DT64:
        return None
    number = _SHARED_CALLS.get(("sum", 1, id(SUM_ALL)))
    if number is None:
        number = shared_call("sum", 1, SUM_ALL)
        if number is None:   # (no more shared calls: call_arrays records a call of its own)
            return None
    out = float(np.add.reduce(v) if v.ndim == 1 else np.add.reduce(v, axis=None))
    if T._retiring:
        T = next_tape(T, (x,))
    tape = x._tape
    ref = x._entry if tape is T else T._ref(x)
    return tensor_of_entry(T, record_shared(T, "SumBackward0", (ref,), out, number), out)


def _unrecorded(ans, dt, extra):
    """``call``'s results where nothing records: the values ``_record_call`` would wrap."""
    if ans.__class__ is _F64 and (dt is None or dt is _DT64):
        res = wrap(float(ans))
    elif ans.__class__ is np.ndarray and (dt is None or ans.dtype is dt) and ans.ndim:
        res = wrap(ans)
    elif isinstance(ans, tuple):
        return tuple(wrap(_out(v, dt)) for v in ans)
    else:
        res = wrap(_out(ans, dt))
    return res if extra is None else (res, wrap(extra))


# argument classes that carry no ``__tapegrad_array_op__`` handler (``call`` looks it up only
# on others: a failed ``getattr`` on every shape and index was a share of each call)
_PLAIN_ARGS = frozenset((int, float, bool, str, tuple, list, slice, type(None), type(Ellipsis),
                         np.ndarray))


def _is_view_of(v, x):
    """Does NumPy array ``v`` view ``x``'s memory?  An empty one made from it does too (its
    memory is no bytes): PyTorch's empty slice is a view, whose ``grad_fn`` an in-place
    change of the base renews like any other's."""
    if np.may_share_memory(v, x):
        return True
    if v.size or x.__class__ is not np.ndarray:
        return False
    return _memory_owner(v) is _memory_owner(x)


def _memory_owner(a):
    """What owns array ``a``'s memory: the array at the end of its ``base`` chain, or the
    object that one's memory belongs to (Numba's arrays: its MemInfo)."""
    while a.base.__class__ is np.ndarray:
        a = a.base
    return a if a.base is None else a.base


def _view_call(op, node, args, ans, params, edges, tensors=None):
    """A view op's results: each that shares the input's memory is registered as a view of
    it (one step: this call; a ``split`` part: the slice it is)."""
    x = args[0]
    if ans.__class__ is tuple:   # split, unbind: a view per part
        parts, base = ans, x._value
        # (an unbind's parts all view the input's memory, a float64 vector's numbers too)
        shared = [_is_view_of(p, base) for p in parts] if op.name != "unbind" else \
            [base.__class__ is np.ndarray] * len(parts)
        res = _record_call(op, node, args, [_out(p) for p in parts], params, edges,
                           any(shared), tensors)
        part_slices, multi_name = _MULTI_OUTPUT[op.name]
        slices = part_slices(base.shape, parts, args[1:], params)
        views = [r for r, s in zip(res, shared) if s]
        register_parts(views, x, [("getitem", (idx,), {}) for idx, s in zip(slices, shared) if s])
        if views and views[0]._tape is not None:   # (PyTorch's multi-output views: no in-place)
            version = views[0]._version   # (one counter: the input's memory)
            for k, (r, s) in enumerate(zip(res, shared)):
                if s:
                    r._multi_output = (k, multi_name, version)
        return tuple(res)
    shared = ans.__class__ is np.ndarray and _is_view_of(ans, x._value)
    out = ans if ans.__class__ is not np.ndarray or ans.ndim or ans.dtype != np.float64 \
        else float(ans)
    if node is None:   # (nothing records: call found no tape)
        r = wrap(out)
    else:
        r = _record_call(op, node, args, [out], params, edges, shared, tensors)[0]
    if shared:
        register_view(r, x, (op.name, args[1:], params))
    return r


def call_view(name, x, params, node=None):
    """``call(name, x, **params)`` for view op ``name`` (unsqueeze, squeeze, transpose,
    permute, t) of exactly a ``Tensor`` holding a float64 array: the same value, node, entry
    and view, without ``call``'s analysis of its arguments (``x.unsqueeze(1)`` 8.0 -> 3.2
    us, ``p.T`` of a constant 5 -> 2).  Anything else goes to ``call`` (``node``, the node's
    name where it is not the op's own: the in-place view ops' ``TBackward1``, of a tensor of
    any dtype)."""
    v = x._value
    tape = x._tape
    if x.__class__ is not Tensor or v.__class__ is not np.ndarray or \
            (v.dtype is not _DT64 and node is None) or \
            (tape is None and getattr(x, "_comparison", None) is not None):
        return call(name, x, **params)
    op = ARRAY_OPS[name]
    ans = op.forward(v, **params)
    if ans.__class__ is not np.ndarray or not _is_view_of(ans, v):
        return call(name, x, **params)
    out = ans if ans.ndim or ans.dtype is not _DT64 else float(ans)
    number = None
    if tape is not None:   # (what the record needs)
        if node is None:
            node = op.node if op.node.__class__ is str else op.node(v, **params)
        number = _SHARED_CALLS.get((name, 1, id(params)))
        if number is None:
            number = shared_call(name, 1, params)
    return _record_view(x, out, node, number, (name, arg_numbers(1), params),
                        (name, (), params))


def _record_view(x, out, node, number, fwd, step):
    """The tensor of ``out``, a view of tensor ``x`` through ``step``: recorded where ``x``
    has history and grad is on (node ``node``; shared call ``number``, or the call ``fwd``
    for None), the tape keeping a copy of it; registered as a view of ``x``."""
    T = recording()
    tape = x._tape
    if T is None or tape is None:
        r = wrap(out)
    else:
        if T._retiring:
            T = next_tape(T, (x,))
        ref = x._entry if tape is T else T._ref(x)
        kept = np.array(out) if out.__class__ is np.ndarray else out
        r = tensor_of_entry(T, record_one(T, node, (ref,), kept, None, fwd) if number is None
                            else record_shared(T, node, (ref,), kept, number), out)
    register_view(r, x, step)
    return r


def view_through(a, steps):
    """The NumPy view of array ``a`` that ``steps`` (view ops) lead to (0-d for an element,
    never a NumPy scalar: it is written through)."""
    for name, args, params in steps:
        a = ARRAY_OPS[name].forward(a, *args, **params)
    return a


_ARGS = tuple(Arg(k) for k in range(16))   # (made once: an Arg is immutable)
_ARG_TUPLES = tuple(_ARGS[:n] for n in range(len(_ARGS) + 1))
_MANY_ARG_TUPLES = {}   # (argument-number tuples of more than 16, by length: stack of 400)


def arg_numbers(n):
    """The template ``(Arg(0), ..., Arg(n - 1))`` of a call whose ``n`` arguments are all
    inputs, made once per ``n``: a tape keeps every op's template, which Python's garbage
    collector traverses again at every full collection."""
    if n < len(_ARG_TUPLES):
        return _ARG_TUPLES[n]
    t = _MANY_ARG_TUPLES.get(n)
    if t is None:
        if len(_MANY_ARG_TUPLES) >= 256:
            _MANY_ARG_TUPLES.clear()
        t = _MANY_ARG_TUPLES.setdefault(n, tuple(Arg(k) for k in range(n)))
    return t


_SHARED_CALLS = {}   # (shared calls' numbers in CALLS, by shared_call's and _shared_index_call's keys)
_EXACT = frozenset((type(None), bool, int, str))   # (values equal only when the same)


def shared_call(name, n, params):
    """The number in ``CALLS`` (core/pyop.py) of the call ``(name, arg_numbers(n),
    params)`` whose ``n`` arguments are all inputs, where the params are Nones, bools, ints,
    strs and tuples of ints (``sum(dim=None)``, ``sum(dim=1)``, ``permute(dims=(1, 0))``),
    else None.  Every op recorded with the
    same call shares it (``record_shared``): a tape kept a fresh tuple and a ``PyOp`` per
    op alive, which Python's garbage collector traversed again at every full collection
    (the LSTM objective spent a quarter of its time there).

    Callers first look the call up by the identity of ``params``
    (``_SHARED_CALLS[name, n, id(params)]``), which finds a module's constant params
    (``SUM_ALL``) in one lookup: ``CALLS`` holds that dict for good, so no other dict can
    have its id.  Other keys carry each value's class: ``1``, ``True`` and ``1.0`` are
    equal as keys, not as arguments; a float (``-0.0 == 0.0``) is never shared."""
    if not params:
        key = (name, n)
    else:
        key = [name, n]
        for k, v in params.items():
            if v.__class__ not in _EXACT and not (v.__class__ is tuple and _int_tuple(v)):
                return None
            key += (k, v.__class__, v)
        key = tuple(key)
    number = _SHARED_CALLS.get(key)
    if number is None:
        number = register_call((name, arg_numbers(n), params))
        if number is not None:
            _SHARED_CALLS[key] = _SHARED_CALLS[name, n, id(params)] = number
    return number


def _int_tuple(v):
    """Is ``v`` a tuple of ints (not bools: ``(True,) == (1,)``), a permute's or a reshape's
    params, equal only when the same?"""
    for d in v:
        if d.__class__ is not int:
            return False
    return True


def _shared_index_call(idx):
    """``shared_call`` of ``getitem`` with the one-step index ``idx`` (an int, a plain
    slice, or a step of ``basic_steps``: full slices then an int, a slice or a None, as
    ``basic_index`` takes them), else None.  (A step as a tuple was a ``PyOp`` of its own
    at every call: GMM's ``icf[:, :d]``, ``x[:, None, :]``; shared, a walk finds what it
    needs of it per call number.)"""
    c = idx.__class__
    if c is int:
        key = (int, idx)   # (a class first: never equal to shared_call's keys)
    elif c is slice:
        key = (slice, idx.start, idx.stop, idx.step)
    elif c is tuple:
        key = [tuple]   # (each part: its class, then its values: the key reads back one way)
        for p in idx:
            pc = p.__class__
            if pc is slice:
                if not (_plain_part(p.start) and _plain_part(p.stop) and _plain_part(p.step)):
                    return None
                key += (slice, p.start, p.stop, p.step)
            elif pc is int or p is None:
                key += (pc, p)
            else:
                return None
        key = tuple(key)
    else:
        return None
    number = _SHARED_CALLS.get(key)
    if number is None:
        number = register_call(("getitem", (_ARGS[0], idx), _NO_PARAMS))
        if number is not None:
            _SHARED_CALLS[key] = number
    return number


def _plain_part(v):
    """Is ``v`` None or an int (a slice's bound or step a shared index may hold)?"""
    return v is None or v.__class__ is int


def _template(args, edges=None, reads=None):
    """The arguments of a recorded call, each tensor that requires grad replaced by its
    input number (a tensor without grad, or past the op's ``edges``, is a constant: kept as
    a tensor of its value, noting the version of the memory it shares where the op's rule
    reads it)."""
    out, k = [], 0
    for pos, a in enumerate(args):
        if isinstance(a, Tensor):
            live = a._tape is not None and (edges is None or k < edges)
            if live:
                out.append(_ARGS[k] if k < len(_ARGS) else Arg(k))
            else:
                c = wrap(a._value)
                if a._value.__class__ is not float and (reads is None or pos in reads):
                    c.__dict__["_constant_of"] = (a, a._version)
                out.append(c)
            k += 1
        else:
            out.append(a)
    return tuple(out)


def constant_changed(py):
    """Was a tensor that array op ``py`` took as a constant (no grad), or as an index, changed
    in place since it was recorded?  Its rule would read the new value (PyTorch's version
    counter raises)."""
    for t, version in py.versions or ():
        if t._version != version:
            return True
    for a in py.fwd[1]:
        if a.__class__ is Tensor:
            src = a.__dict__.get("_constant_of")
            if src is not None and src[0]._version != src[1]:
                return True
    return False


def _axes(dim, ndim):
    """NumPy axes of a reduction over ``dim`` (None: all); a 0-d tensor has none to reduce."""
    if dim is None:
        return None
    if dim.__class__ is int and -ndim <= dim < ndim:   # (most calls: one dim, in range)
        return (dim % ndim,)
    axes = wrap_dims(dim, ndim)
    return axes if ndim > 0 else ()


def _along(fn, x, dim):
    """``fn(x, axis)`` along ``dim``; a 0-d ``x`` is taken as one element along dim 0."""
    dim = wrap_dim(dim, x.ndim)
    if x.ndim == 0:
        return fn(x.reshape(1), 0).reshape(())
    return fn(x, dim)


def _name(base, dim):
    return f"{base}Backward0" if dim is None else f"{base}Backward1"


def _shape(x):
    if x.__class__ is Tensor:   # (read from the value: most calls, in every backward)
        v = x._value
        if v.__class__ is np.ndarray:
            return v.shape
        if v.__class__ is float:
            return ()
    elif x.__class__ is np.ndarray:   # (a numpy_rule's values)
        return x.shape
    return tuple(x.shape) if isinstance(x, Tensor) else np.shape(x)


def _numel(x):
    return int(np.prod(_shape(x), dtype=np.int64))


def _value(x):
    return np.asarray(x._value) if isinstance(x, Tensor) else np.asarray(x)


_where = ELEMENTWISE["where"]


def _select(cond, a, b):
    """``where`` in a ``numpy_rule``: NumPy's on NumPy values (a selection: the same values)."""
    if isinstance(cond, Tensor):
        return _where(cond, a, b)
    return np.where(cond, a, b)


def _exp(v):
    """``v.exp()`` in a ``numpy_rule`` (the op table's array exp is NumPy's)."""
    return v.exp() if isinstance(v, Tensor) else np.exp(v)


def sum_to(g, shape):
    """Sum ``g`` down to ``shape`` (undo broadcasting), in recorded ops: the one broadcast
    reduction, applied by ``pyop_backward`` to every rule's result."""
    shape = tuple(shape)
    if g.__class__ is np.ndarray:   # (a rule's NumPy value: one sum in a kernel, mostly)
        out = _summed_in_kernels(g, shape)
        if out is not None:
            return out
    if _shape(g) == shape:
        return g
    lead = len(_shape(g)) - len(shape)
    if lead > 0:
        g = rule_call("sum", g, dim=tuple(range(lead)))
    axes = tuple(k for k, n in enumerate(shape) if n == 1 and _shape(g)[k] != 1)
    if axes:
        g = rule_call("sum", g, dim=axes, keepdim=True)
    return g if _shape(g) == shape else rule_call("reshape", g, shape)


def _summed_in_kernels(g, shape):
    """``sum_to(g, shape)`` for an ndarray ``g`` where it is one sum in a kernel
    (``_sum_in_kernels``: the same call, without ``sum_to``'s and the op's layers -- a
    (1000, 5, 2) gradient to (5, 2) 9.9 -> 5.8 us), else None."""
    key = (g.shape, shape)
    found = _SUMMED_AXES.get(key, False)
    if found is False:
        gs, found = g.shape, None
        lead = len(gs) - len(shape)
        if lead > 0 and gs[lead:] == shape:   # (sum_to's leading dims, no size-1 dims)
            found = (tuple(range(lead)), False)
        elif lead == 0 and gs != shape:       # (its size-1 dims, kept)
            axes = tuple(k for k, n in enumerate(shape) if n == 1 and gs[k] != 1)
            if axes and all(n == m for k, (n, m) in enumerate(zip(shape, gs))
                            if k not in axes):
                found = (axes, True)
        if len(_SUMMED_AXES) >= _SUM_PLANS_LIMIT:
            _SUMMED_AXES.clear()
        _SUMMED_AXES[key] = found
    return None if found is None else _sum_in_kernels(g, *found)


_SUMMED_AXES = {}   # (gradient's shape, input's shape) -> (axes, keepdim) of its one sum, or None


def _graph_shape(g, x, numpy=False):
    """A rule's gradient, shaped like the input ``x`` (thunks are called here); ``numpy``: the
    rule ran on NumPy values (``pyop_numpy_backward``) and its result stays one."""
    if g.__class__ is not Tensor:   # (most rules return tensors)
        if callable(g):
            g = g()
        if g is None:
            return None
    shape = _shape(x)
    if _shape(g) != shape:
        if not numpy and not isinstance(g, Tensor):
            g = wrap(g)   # (a rule's NumPy result among tensors: reshaped as a tensor)
        g = sum_to(g, shape) if len(_shape(g)) >= len(shape) else rule_call("expand", g, shape)
    return g


def _spread(g, x, dim, keepdim):
    """A reduced result (or its gradient) expanded back over ``x``'s shape."""
    shape = _shape(x)
    if g.__class__ is _F64:   # (a numpy_rule's number: a reduction to one)
        g = np.asarray(g)
    if g.__class__ is np.ndarray:   # (a numpy_rule's value: the view, without two calls)
        if dim is not None and not keepdim:
            g = g.reshape(_reduced_shape(shape, _axes(dim, len(shape)), True))
        return broadcast_view(g, shape) if g.shape != shape else g
    if dim is not None and not keepdim:
        axes = _axes(dim, len(shape))
        g = rule_call("reshape", g, _reduced_shape(shape, axes, True))
    return rule_call("expand", g, shape) if _shape(g) != shape else g


def _ties(g, ans, x, dim=None, keepdim=False):
    # d max / dx = the gradient split evenly among the elements equal to the max (as PyTorch)
    mask = _where(x == _spread(ans, x, dim, keepdim), 1.0, 0.0)
    return (_spread(g / call("sum", mask, dim=dim, keepdim=keepdim), x, dim, keepdim) * mask,)


def _nonempty(name, x, dim):
    """PyTorch's errors for a max/min over no elements."""
    if x.size:
        return
    if dim is None:
        raise RuntimeError(f"{name}(): Expected reduction dim to be specified for input.numel() "
                           "== 0. Specify the reduction dim with the 'dim' argument.")
    for d in (dim if isinstance(dim, (tuple, list)) else (dim,)):
        if x.shape[wrap_dim(d, x.ndim)] == 0:
            raise IndexError(f"{name}(): Expected reduction dim {d} to have non-zero size.")


def _reverse_cumsum(g, dim):
    if _numel(g) <= 1 or _shape(g)[dim] == 1:   # PyTorch's cumsum_backward: g as it is
        return g
    return call("flip", call("cumsum", call("flip", g, (dim,)), dim), (dim,))


# -- reductions ---------------------------------------------------------------------------

# sums over a run of axes of at least this many elements take the kernels below (below it,
# a kernel's dispatch costs what NumPy's short loops do); NumPy's reduction runs its inner
# loop once per row, slow where rows are short: 1000 x 8 summed over its last axis 19 us,
# (1000, 5, 2) over its last 73 us and over its middle one 98 us; here 4, 9 and 12 us, bit
# for bit NumPy's sums (tests/test_reduction_kernels.py)
_ROWS_SUMMED = 256
_SHORT_ROW = 128   # (``_sum_last``'s rows at most: NumPy halves longer ones, fast enough)


@jit
def _sum_middle(x, out):
    """``out[a, c] = 0.0 + x[a, 0, c] + x[a, 1, c] + ...`` in that order: NumPy's reduction
    over the middle axis of a row-major (A, B, C) array with C >= 2 (over the leading axes
    when A is 1), bit for bit (a NaN made from inf - inf may differ in sign)."""
    na, nb, nc = x.shape
    flat = x.reshape(x.size)
    res = out.reshape(out.size)
    res[:] = 0.0   # (NumPy starts from add's identity: -0.0s sum to +0.0)
    for a in range(na):
        o = a * nc
        for b in range(nb):
            lo = (a * nb + b) * nc
            for c in range(nc):
                res[o + c] += flat[lo + c]


@jit
def _sum_last(x, out):
    """``out[a] = 0.0 + x[a]``'s sum as NumPy's ``pairwise_sum`` adds it (in order below 8
    elements, else 8 running sums of every 8th element, then the rest in order): NumPy's
    reduction over the last axis of a row-major (A, B) array with B <= 128, bit for bit."""
    nb = x.shape[1]
    tail = nb - nb % 8
    for a in range(x.shape[0]):
        # (a row indexed from 0: LLVM drops the negative-index checks that offsets into the
        # flat array keep, 2.8 -> 1.1 us for 1,000 rows of 5)
        row = x[a]
        if nb < 8:
            res = 0.0
            for i in range(nb):
                res += row[i]
        else:
            r0, r1, r2, r3 = row[0], row[1], row[2], row[3]
            r4, r5, r6, r7 = row[4], row[5], row[6], row[7]
            for i in range(8, tail, 8):
                r0 += row[i]
                r1 += row[i + 1]
                r2 += row[i + 2]
                r3 += row[i + 3]
                r4 += row[i + 4]
                r5 += row[i + 5]
                r6 += row[i + 6]
                r7 += row[i + 7]
            res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
            for i in range(tail, nb):
                res += row[i]
        out[a] = 0.0 + res


@jit
def _max_last(x, out):
    """The maximum of each row of a row-major (A, B) array, NaN where a row has one (which
    of equal zeros is left to chance: only ``logsumexp``'s shift reads it, whose sign does
    not matter there)."""
    nb = x.shape[1]
    for a in range(x.shape[0]):
        row = x[a]   # (indexed from 0, as in _sum_last)
        m = row[0]
        for i in range(1, nb):
            v = row[i]
            if not (m >= v or m != m):
                m = v
        out[a] = m


def _blocks(x, axes):
    """``(A, B, C)``: float64 C-ordered ``x`` seen as (A, B, C) with ``axes`` (one run of
    consecutive axes, not all of them) as B, where the kernels above reduce it as NumPy
    does and faster; else None."""
    if x.dtype is not _DT64 or not x.flags.c_contiguous:
        return None
    plan = _sum_plan(x.shape, axes, False)
    return None if plan is None else plan[:3]


def _sum_plan(shape, axes, keepdim):
    """``(A, B, C, result shape)`` of ``_blocks`` for an array of ``shape`` (float64,
    C-ordered: the caller checks) summed over ``axes`` (a tuple), kept per shape and
    axes: working it out cost a third of the sum (``_sum_in_kernels`` of (1000, 5, 2) over
    its first dim 6.8 -> 5.2 us); None where NumPy sums."""
    key = (shape, axes, keepdim)
    plan = _SUM_PLANS.get(key, False)
    if plan is not False:
        return plan
    k = len(axes)
    plan = None
    if 0 < k < len(shape) and _prod(shape) >= _ROWS_SUMMED:
        first = axes[0]
        if tuple(axes) == tuple(range(first, first + k)):
            na, nb, nc = _prod(shape[:first]), _prod(shape[first:first + k]), \
                _prod(shape[first + k:])
            # (wide rows between reduced axes: NumPy's own loop is as fast)
            if not (nb < 2 or (nc == 1 and (na < 2 or nb > _SHORT_ROW))
                    or (na > 1 and nc > _SHORT_ROW)):
                plan = (na, nb, nc, _reduced_shape(shape, axes, keepdim))
    if len(_SUM_PLANS) >= _SUM_PLANS_LIMIT:
        _SUM_PLANS.clear()
    _SUM_PLANS[key] = plan
    return plan


_SUM_PLANS = {}   # (shape, axes, keepdim) -> _sum_plan's plan, or None
_SUM_PLANS_LIMIT = 4096


def _sum_in_kernels(x, axes, keepdim):
    """The sum of ``x`` over ``axes`` in a kernel, bit for bit NumPy's (``_blocks``), else
    None."""
    if x.dtype is not _DT64 or not x.flags.c_contiguous:
        return None
    plan = _sum_plan(x.shape, axes, keepdim)
    if plan is None:
        return None
    na, nb, nc, shape = plan
    out = np.empty(shape)
    if nc == 1:
        _sum_last(x.reshape(na, nb), out.reshape(na))
    else:
        _sum_middle(x.reshape(na, nb, nc), out.reshape(na, nc))
    return out


def _reduced_shape(shape, axes, keepdim):
    if keepdim:
        return tuple(1 if k in axes else n for k, n in enumerate(shape))
    return tuple(n for k, n in enumerate(shape) if k not in axes)


def _prod(shape):
    n = 1
    for s in shape:
        n *= s
    return n




@defop("sum", lambda x, dim=None, keepdim=False: _name("Sum", dim), saves=False, numpy_rule=True,
       grad_depends="nothing")
def sum(x, dim=None, keepdim=False):  # noqa: A001
    if x.__class__ is np.ndarray:   # what np.sum calls for an ndarray, without its dispatch
        if dim is None and not keepdim and x.ndim == 1:
            return np.add.reduce(x)   # (a vector: axis 0 is every axis)
        axes = None if dim is None else _axes(dim, x.ndim)
        if axes is not None and x.size >= _ROWS_SUMMED:
            out = _sum_in_kernels(x, axes, keepdim)
            if out is not None:
                return out
        return contiguous(np.add.reduce(x, axis=axes, keepdims=keepdim))
    return np.sum(x, axis=_axes(dim, x.ndim), keepdims=keepdim)


# d sum / dx_i = 1
sum.defvjp(lambda g, ans, x, dim=None, keepdim=False: (_spread(g, x, dim, keepdim),))


@defop("mean", lambda x, dim=None, keepdim=False: _name("Mean", dim), saves=False,
       numpy_rule=True, grad_depends="nothing")
def mean(x, dim=None, keepdim=False):
    if x.dtype.kind not in "fc":
        raise RuntimeError("mean(): could not infer output dtype. Input dtype must be either a "
                           f"floating point or complex dtype. Got: {scalar_type_name(x.dtype)}")
    return contiguous(np.mean(x, axis=_axes(dim, x.ndim), keepdims=keepdim))


# d mean / dx_i = 1 / N
mean.defvjp(lambda g, ans, x, dim=None, keepdim=False:
            (_spread(g * (_numel(ans) / max(_numel(x), 1)), x, dim, keepdim),))


def is_full_reduction(fwd):
    """Is a recorded op's call ``fwd`` one ``full_reduction_scale`` gives a factor for?"""
    return full_reduction_scale(fwd, 1) is not None


def full_reduction_scale(fwd, numel):
    """For a recorded op's call ``fwd``, a sum or mean of every element of an input of ``numel``
    elements to one number: the factor ``c`` of its rules above, whose input gradient is
    ``g * c`` in every element (``g``: the result's gradient); None for any other op.
    The float walk adds that number itself, without a rule call, array-op dispatch and
    grad-mode switch (most of a small backward's cost); create_graph runs the rules."""
    if fwd is None or fwd[0] not in ("sum", "mean"):
        return None
    params = fwd[2]
    if params.get("dim") is not None or params.get("keepdim"):
        return None
    return 1.0 if fwd[0] == "sum" else 1 / max(numel, 1)


@defop("prod", lambda x, dim=None, keepdim=False: _name("Prod", dim), reads_output=True)
def prod(x, dim=None, keepdim=False):
    return contiguous(np.prod(x, axis=_axes(dim, x.ndim), keepdims=keepdim))


@prod.defvjp
def _(g, ans, x, dim=None, keepdim=False):
    # d prod / dx_i = prod of the others = prod / x_i away from zeros
    shape = _shape(x)
    if not shape:
        return (g,)
    if np.all(_value(x) != 0):
        _note_no_zeros(x, "prod")
        return (_spread(g, x, dim, keepdim) * (_spread(ans, x, dim, keepdim) / x),)
    if dim is None:
        if len(_value(x).reshape(-1)) == 1:   # the one element: g as it is, as PyTorch
            return (call("reshape", g, shape),)
        if not is_grad_enabled() and np.count_nonzero(_value(x) == 0) > 1:
            return (wrap(np.zeros(shape)),)   # PyTorch's zeros_like (no graph to keep)
        return (call("reshape", g * _exclusive_products(call("reshape", x, (-1,)), 0), shape),)
    if shape[dim] == 1 or 0 in shape:   # out is x: g (in x's shape), as PyTorch
        return (_spread(g, x, dim, keepdim),)
    return (_spread(g, x, dim, keepdim) * _exclusive_products(x, dim),)


def _note_no_zeros(x, op):
    """A recorded rule that divides by ``x`` holds only where ``x`` has no zeros (PyTorch's
    rule branches there too): a replay at a zero would divide by it, so the tape notes the
    read and ``compile`` refuses."""
    T = recording()
    if T is not None and isinstance(x, Tensor) and x._tape is T:
        note_comparison_use(T, (T, x._entry), f"a create_graph=True backward through {op} "
                                              "(it divides by the input away from zeros)")


def _exclusive_products(x, dim):
    """For each element, the product of the others along ``dim``: the products before it
    times the products after it (PyTorch's prod_safe_zeros_backward; zeros are fine)."""
    n = _shape(x)[dim]
    dim = wrap_dim(dim, len(_shape(x)))
    part = lambda v, lo, hi=None: call("getitem", v, (slice(None),) * dim + (slice(lo, hi),))  # noqa: E731
    ones = wrap(np.ones(tuple(1 if k == dim else m for k, m in enumerate(_shape(x)))))
    before = call("cumprod", call("cat", ones, part(x, 0, n - 1), dim=dim), dim)
    after = call("flip", call("cumprod", call("cat", ones, call("flip", part(x, 1), (dim,)), dim=dim),
                              dim), (dim,))
    return before * after


@defop("amax", "AmaxBackward0", reads_output=True)
def amax(x, dim=None, keepdim=False):
    _nonempty("amax", x, dim)
    return contiguous(np.amax(x, axis=_axes(dim, x.ndim), keepdims=keepdim))


amax.defvjp(_ties)


@defop("amin", "AminBackward0", reads_output=True)
def amin(x, dim=None, keepdim=False):
    _nonempty("amin", x, dim)
    return contiguous(np.amin(x, axis=_axes(dim, x.ndim), keepdims=keepdim))


amin.defvjp(_ties)


@jit
def _first_extreme(x, largest):
    """Along axis 1 of ``x`` (outer, n, inner), the index of the first smallest element (the
    largest with ``largest``), a NaN beating every number, and that element: NumPy's
    argmin/argmax.  (NumPy's own, along any axis but the last, copies the array first and
    took longer than the rest of a small k-means' objective.)"""
    outer, n, inner = x.shape
    idx = np.zeros((outer, 1, inner), np.int64)
    best = np.empty((outer, 1, inner), x.dtype)
    for o in range(outer):
        for j in range(inner):
            best[o, 0, j] = x[o, 0, j]
        for i in range(1, n):
            for j in range(inner):
                b = best[o, 0, j]
                if b != b:
                    continue
                v = x[o, i, j]
                if v != v or (v > b if largest else v < b):
                    best[o, 0, j] = v
                    idx[o, 0, j] = i
    return idx, best


@jit
def _route_first_extreme(x, g, largest, out):
    """``out`` (zeros shaped like ``x``: outer, n, inner) with ``g[o, j]`` at the first
    extreme of ``x[o, :, j]`` (``_first_extreme``'s): min/max over a dim's gradient in one
    pass, without the index arrays NumPy's scatter needs (``ungather(..., assign=True)``).
    Row by row where the rows are long (a column walk strides over the whole array: a
    k-means' min over 100 x 10,000 distances took 1.4 ms that way, 0.6 ms so), column by
    column where they are short."""
    outer, n, inner = x.shape
    if inner < 16:
        for o in range(outer):
            for j in range(inner):
                b = x[o, 0, j]
                k = 0
                if b == b:
                    for i in range(1, n):
                        v = x[o, i, j]
                        if v != v:   # (the first NaN beats every number and every later NaN)
                            k = i
                            break
                        if v > b if largest else v < b:
                            b = v
                            k = i
                out[o, k, j] = g[o, j]
        return
    best = np.empty(inner, x.dtype)
    at = np.empty(inner, np.int64)
    for o in range(outer):
        for j in range(inner):
            best[j] = x[o, 0, j]
            at[j] = 0
        for i in range(1, n):
            for j in range(inner):
                b = best[j]
                if b != b:   # (the first NaN beats every number and every later NaN)
                    continue
                v = x[o, i, j]
                if v != v or (v > b if largest else v < b):
                    best[j] = v
                    at[j] = i
        for j in range(inner):
            out[o, at[j], j] = g[o, j]


def _routed(x, g, dim, largest):
    """The gradient of min/max over ``dim`` of float64 array ``x`` given the result's
    gradient ``g`` (NumPy values, as a ``numpy_rule`` runs): ``g`` at the element the
    forward chose, zeros elsewhere."""
    shape = x.shape
    outer, n, inner = math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])
    out = np.zeros(shape)
    _route_first_extreme(np.ascontiguousarray(x).reshape(outer, n, inner),
                         np.ascontiguousarray(g, np.float64).reshape(outer, inner), largest,
                         out.reshape(outer, n, inner))
    return out


def _extreme_along(x, dim, largest):
    """``(index, value)`` of the first extreme of ``x`` along ``dim``, keeping the dim."""
    if x.dtype == np.float64 and x.size:
        shape = x.shape
        x3 = np.ascontiguousarray(x).reshape(math.prod(shape[:dim]), shape[dim], -1)
        idx, vals = _first_extreme(x3, largest)
        kept = shape[:dim] + (1,) + shape[dim + 1:]
        return idx.reshape(kept), vals.reshape(kept)
    idx = (np.argmax if largest else np.argmin)(x, axis=dim, keepdims=True)
    return idx, np.take_along_axis(x, idx, axis=dim)


def _arg_extreme(largest):
    def forward(x, dim, keepdim=False):
        dim = wrap_dim(dim, x.ndim)
        if x.ndim == 0:
            return x.copy(), np.zeros((), np.int64)
        idx, vals = _extreme_along(x, dim, largest)
        if not keepdim:
            vals, idx = np.squeeze(vals, dim), np.squeeze(idx, dim)
        return vals, idx.astype(np.int64, copy=False)
    return forward


@jit
def _route_at(idx, g, out):
    """``out[o, idx[o, j], j] = g[o, j]``: a min's or max's gradient at the indices its
    forward chose (``out`` zeros; an index outside ``out`` is skipped, never written)."""
    n = out.shape[1]
    for o in range(idx.shape[0]):
        for j in range(idx.shape[1]):
            k = idx[o, j]
            if 0 <= k < n:
                out[o, k, j] = g[o, j]


def _route(largest):
    def vjp(g, ans, x, dim, keepdim=False, indices=None):
        # d max(x, dim) / dx = 1 at the index it returned, 0 elsewhere
        if not _shape(x):
            return (g,)
        shape = _shape(x)
        d = wrap_dim(dim, len(shape))
        if indices is None:   # (a call recorded without them: found again in x)
            if not isinstance(g, Tensor) and x.dtype == np.float64 and x.size:
                return (_routed(x, g, d, largest),)   # (NumPy values)
            idx, _ = _extreme_along(_value(x), d, largest)
        else:
            if not isinstance(g, Tensor) and x.dtype == np.float64 and x.size:
                # (the indices as they are, dim kept or not: the same order row by row;
                # np.expand_dims cost as much as the kernel: k-means' min 20 -> 16 us)
                outer, n = math.prod(shape[:d]), shape[d]
                out = np.zeros(shape)
                _route_at(np.ascontiguousarray(indices, np.int64).reshape(outer, -1),
                          np.ascontiguousarray(g, np.float64).reshape(outer, -1),
                          out.reshape(outer, n, -1))
                return (out,)
            idx = indices if keepdim else np.expand_dims(indices, d)
        gk = g if keepdim else rule_call("unsqueeze", g, dim)
        return (rule_call("ungather", gk, shape, dim, idx, assign=True),)
    return vjp


# (``indices``: the forward's own, which ``call`` records with the call: ``saves_indices``)
@defop("max_dim", "MaxBackward0", method=False, outputs=tuple,
       numpy_rule=True, grad_depends="nothing", saves_indices=True)
def max_dim(x, dim, keepdim=False, indices=None):
    return _arg_extreme(True)(x, dim, keepdim)


max_dim.defvjp(_route(True))


@defop("min_dim", "MinBackward0", method=False, outputs=tuple,
       numpy_rule=True, grad_depends="nothing", saves_indices=True)
def min_dim(x, dim, keepdim=False, indices=None):
    return _arg_extreme(False)(x, dim, keepdim)


min_dim.defvjp(_route(False))


@defop("max_all", "MaxBackward1", method=False, reads_output=True, numpy_rule=True)
def max_all(x):
    _nonempty("max", x, None)
    # (what np.max calls for an ndarray, without its dispatch: half of lse's max at 2,500)
    return np.maximum.reduce(x, axis=None) if x.__class__ is np.ndarray else np.max(x)


# arrays of at least this many elements take ``_evenly_flat`` in the float walk (below it,
# the kernel's dispatch costs what NumPy's three short passes do)
_EVENLY_KERNEL = 256


@jit
def _tie(v, a):
    """Is ``v`` one of the elements a max/min ``a`` of all elements came from (a NaN, for a
    NaN ``a``)?"""
    return v == a or (a != a and v != v)


@jit
def _evenly_flat(x, a, g, out):
    """``_evenly`` on a flat float64 array, in two passes and no mask: the ties counted, then
    ``g / count`` where they are and +0. elsewhere."""
    count = 0
    for k in range(x.shape[0]):
        if _tie(x[k], a):
            count += 1
    share = g / float(count)
    for k in range(x.shape[0]):
        out[k] = share if _tie(x[k], a) else 0.0


def _evenly(g, ans, x):
    # d max / dx for the max of all elements, PyTorch's evenly_distribute_backward: g split
    # among the elements equal to it (the NaNs, for a NaN max), exactly 0 elsewhere.  (Three
    # passes over x, not nine: the ties as a mask, counted, the share put where they are.)
    # The count is a number in both walks (no gradient flows through it): counted by NumPy,
    # it divides as a float, g / 3.0 being g / 3 bit for bit.
    if x.__class__ is np.ndarray and x.dtype is _DT64 and x.size >= _EVENLY_KERNEL:
        out = np.empty(x.shape)   # (the float walk, large arrays: one kernel)
        _evenly_flat(np.ascontiguousarray(x).reshape(-1), float(ans), float(g), out.reshape(-1))
        return (out,)
    a = ans._value if isinstance(ans, Tensor) else ans
    ties = x != x if a != a else x == ans
    count = np.count_nonzero(ties._value if isinstance(ties, Tensor) else ties)
    return (_select(ties, g / float(count), 0.0),)


max_all.defvjp(_evenly)


@defop("min_all", "MinBackward1", method=False, reads_output=True, numpy_rule=True)
def min_all(x):
    _nonempty("min", x, None)
    return np.minimum.reduce(x, axis=None) if x.__class__ is np.ndarray else np.min(x)


min_all.defvjp(_evenly)


def _ddof(unbiased, correction):
    return (1 if unbiased else 0) if correction is None else correction


def _reduced_count(x, dim):
    """How many elements of ``x`` each result of a reduction over ``dim`` combines."""
    ax = _axes(dim, len(_shape(x)))
    return _numel(x) if ax is None else int(np.prod([_shape(x)[a] for a in ax], dtype=np.int64))


def _variance(x, dim, unbiased, keepdim, correction, name):
    """sum((x - mean)^2) / max(N - correction, 0), as PyTorch: nan or inf (and a warning)
    where no degree of freedom is left."""
    if x.dtype.kind not in "fc":
        raise RuntimeError("std and var only support floating point and complex dtypes")
    ax = _axes(dim, x.ndim)
    n = _reduced_count(x, dim)
    dof = n - _ddof(unbiased, correction)
    if dof <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly less "
                      "than the reduction factor (input numel divided by output numel).",
                      UserWarning, stacklevel=5)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = x - np.sum(x, axis=ax, keepdims=True) / n
        out = np.sum(d * d, axis=ax, keepdims=keepdim) / builtins.max(dof, 0)
    if dof > 0 and n > 1 and out.size > 1 and x.dtype.kind == "f":
        # over a dim (more than one result) PyTorch's Welford update never moves off equal
        # values: exactly 0 there, where two passes leave rounding (7e-32 for three 1.866):
        # a `where(x.var(1) > 0, ...)` or std's backward (0 where std is 0) would differ.
        # (A reduction to one number takes PyTorch's other kernel: rounding either way.)
        hi = np.max(x, axis=ax, keepdims=keepdim)
        equal = (hi == np.min(x, axis=ax, keepdims=keepdim)) & np.isfinite(hi)
        if equal.any():
            out = np.where(equal, 0.0, out).astype(out.dtype, copy=False)
    return contiguous(out)


@defop("var", "VarBackward0")
def var(x, dim=None, unbiased=True, keepdim=False, correction=None):
    return _variance(x, dim, unbiased, keepdim, correction, "var")


@var.defvjp
def _(g, ans, x, dim=None, unbiased=True, keepdim=False, correction=None):
    # d var / dx = 2 (x - mean) / (N - ddof)  (inf or negative past N, as PyTorch)
    dof = _reduced_count(x, dim) - _ddof(unbiased, correction)
    if dof <= 0 and (dim is None or x.ndim == 0):
        # PyTorch's var_backward: no degree of freedom left, g times nan (x at its mean,
        # inf * 0) or inf, constants that do not depend on x's graph
        return (_spread(g, x, dim, keepdim) * _where(x == call("mean", x), math.nan, math.inf),)
    scale = float(np.float64(2.0) / dof) if dof else math.inf
    return (_spread(g * scale, x, dim, keepdim) * (x - call("mean", x, dim=dim, keepdim=True)),)


@defop("std", "StdBackward0", reads_output=True)
def std(x, dim=None, unbiased=True, keepdim=False, correction=None):
    return np.sqrt(_variance(x, dim, unbiased, keepdim, correction, "std"))


# d std = d var / (2 std), and 0 where std is 0 (as PyTorch: no nan at zero spread).  As
# PyTorch's std_backward writes it, (g / (2 std)).masked_fill_(std == 0, 0): differentiated
# again, the gradient's term there is 0 / 0 (NaN), as PyTorch's (fuzzer seed 18)
@std.defvjp
def _(g, ans, x, dim=None, unbiased=True, keepdim=False, correction=None):
    with np.errstate(divide="ignore", invalid="ignore"):   # (the masked g / 0)
        g_var = _where(ans == 0.0, 0.0, g / (ans * 2.0))
    return ARRAY_OPS["var"].vjp(g_var, ans, x, dim, unbiased, keepdim, correction)


@defop("norm", "LinalgVectorNormBackward0", reads_output=True)
def norm(x, p=2, dim=None, keepdim=False):
    return contiguous(_vector_norm(x, p, dim, keepdim))


def _vector_norm(x, p, dim, keepdim):
    if x.dtype.kind not in "fc":
        raise RuntimeError("linalg.vector_norm: Expected a floating point or complex tensor as "
                           f"input. Got {scalar_type_name(x.dtype)}")
    ax = _axes(dim, x.ndim)
    if p == 2:
        if all(x.shape[a] == 1 for a in (ax if ax is not None else range(x.ndim))):
            # one element: |x|, as PyTorch (the square of 1e-300 would underflow to 0)
            return np.abs(np.sum(x, axis=ax, keepdims=keepdim))
        return np.sqrt(np.sum(x * x, axis=ax, keepdims=keepdim))
    if p == 1:
        return np.sum(np.abs(x), axis=ax, keepdims=keepdim)
    if p in (np.inf, "inf"):
        return np.max(np.abs(x), axis=ax, keepdims=keepdim)
    return np.sum(np.abs(x) ** p, axis=ax, keepdims=keepdim) ** (1.0 / p)


@norm.defvjp
def _(g, ans, x, p=2, dim=None, keepdim=False):
    safe = _where(ans == 0.0, 1.0, ans)   # x is 0 where the norm is: the gradient is 0 (as PyTorch)
    if p == 2:   # d |x| = x / |x|, masked to 0 where |x| = 0 (PyTorch's norm_backward)
        # masked after the division, as PyTorch: its second derivative at |x| = 0 is 0/0 = nan
        n = _spread(ans, x, dim, keepdim)
        return (_spread(g, x, dim, keepdim) * _where(n == 0.0, 0.0, x / n),)
    if p == 1:   # d sum |x| = sign x
        return (_spread(g, x, dim, keepdim) * x.sign(),)
    if p in (np.inf, "inf"):   # d max |x| = sign x at the ties of the max
        return (_ties(g, ans, x.abs(), dim, keepdim)[0] * x.sign(),)
    # d |x|_p = sign x |x|^(p-1) |x|_p^(1-p)
    return (_spread(g * safe ** (1.0 - p), x, dim, keepdim) * x.sign() * x.abs() ** (p - 1.0),)


@defop("logsumexp", "LogsumexpBackward0", reads_output=True, numpy_rule=True)
def logsumexp(x, dim, keepdim=False):
    ax = _axes(dim, x.ndim)
    blocks = _blocks(x, ax) if x.__class__ is np.ndarray else None
    if blocks is not None and blocks[2] == 1:   # (short rows: the kernels, NumPy's values)
        rows = x.reshape(blocks[:2])
        m = np.empty(blocks[0])
        _max_last(rows, m)
        m = np.where(np.isfinite(m), m, 0.0)
        e = np.exp(rows - m[:, None])
        out = np.empty(blocks[0])
        _sum_last(e, out)
        return np.log(out, out=out).__iadd__(m).reshape(_reduced_shape(x.shape, ax, keepdim))
    # (the ufuncs' own reductions: np.max and np.sum cost as much again in dispatch here)
    m = np.maximum.reduce(x, axis=ax, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.add.reduce(np.exp(x - m), axis=ax, keepdims=True)) + m
    return contiguous(out if keepdim else out.squeeze(ax))


# d lse / dx = softmax(x) = exp(x - lse)
def _logsumexp_vjp(g, ans, x, dim, keepdim=False):
    if g.__class__ is ans.__class__ is x.__class__ is np.ndarray and dim is not None:
        # (NumPy values: g and lse broadcast as they are, with dims kept, into one new
        # array written in place -- not views spread over x, NumPy's slow broadcasting
        # loop: GMM's (1000, 5) 21 -> 14 us; the same operations, the same values)
        kept = _reduced_shape(x.shape, _axes(dim, x.ndim), True)
        e = x - ans.reshape(kept)
        np.exp(e, out=e)
        e *= g.reshape(kept)
        return (e,)
    if x.__class__ is np.ndarray and x.ndim and g.__class__ in _NUMBER_VALUES and \
            ans.__class__ in _NUMBER_VALUES:
        # (a reduction to one number, GMM's logsumexp of its weights: the same in place,
        # without spreading g and lse over x: 29 -> 17 us a step)
        e = x - ans
        np.exp(e, out=e)
        e *= g
        return (e,)
    return (_spread(g, x, dim, keepdim) * _exp(x - _spread(ans, x, dim, keepdim)),)


_NUMBER_VALUES = (float, _F64)


logsumexp.defvjp(_logsumexp_vjp)


@defop("softmax", "SoftmaxBackward0", reads=(), reads_output=True, numpy_rule=True)
def softmax(x, dim):
    # contiguous, as PyTorch's softmax kernels write it (a later flatten is a view)
    return contiguous(_along(_softmax, x, dim))


def _softmax(x, dim):
    e = np.exp(x - np.max(x, axis=dim, keepdims=True))
    return e / np.sum(e, axis=dim, keepdims=True)


# J^T g = s (g - sum(g s)), one op as PyTorch's _softmax_backward_data: its own signed
# zeros, its own second derivatives (below)
softmax.defvjp(lambda g, ans, x, dim: (rule_call("softmax_backward_data", g, ans, dim),))


def _kernel_sum(v, dim):
    """The sum along ``dim`` (kept) that PyTorch's softmax backward kernels compute: along
    the last dim it starts from the first term, so terms that are all -0. sum to -0. (a
    plain sum, as along the other dims, starts from +0.)."""
    s = np.add.reduce(v, axis=dim, keepdims=True)
    if dim % v.ndim == v.ndim - 1 and not s.all():
        s = np.where(np.logical_and.reduce((v == 0) & np.signbit(v), axis=dim, keepdims=True),
                     -0.0, s)
    return s


def _backward_data_args(g, out, dim):
    g, out = np.asarray(g, np.float64), np.asarray(out, np.float64)
    if out.ndim == 0:
        return g.reshape(1), out.reshape(1), 0
    return g, out, wrap_dim(dim, out.ndim)


@defop("softmax_backward_data", "SoftmaxBackwardDataBackward0", method=False)
def softmax_backward_data(g, out, dim):
    shape = np.shape(out)
    g, out, dim = _backward_data_args(g, out, dim)
    return contiguous(((g - _kernel_sum(g * out, dim)) * out).reshape(shape))


# PyTorch's derivatives.yaml: grad_output: _softmax_backward_data(grad, output);
# output: softmax_double_backward(grad, grad_output, dim, output)
softmax_backward_data.defvjp(lambda gg, ans, g, out, dim: (
    lambda: call("softmax_backward_data", gg, out, dim),
    lambda: g * gg - call("sum", out * g, dim=dim, keepdim=True) * gg
    - g * call("sum", out * gg, dim=dim, keepdim=True)))


@defop("log_softmax", "LogSoftmaxBackward0", reads=(), reads_output=True,
       numpy_rule=True)
def log_softmax(x, dim):
    return contiguous(_along(_log_softmax, x, dim))


def _log_softmax(x, dim):
    m = np.max(x, axis=dim, keepdims=True)
    return x - m - np.log(np.sum(np.exp(x - m), axis=dim, keepdims=True))


# J^T g = g - softmax sum(g), one op as PyTorch's _log_softmax_backward_data
log_softmax.defvjp(lambda g, ans, x, dim: (rule_call("log_softmax_backward_data", g, ans,
                                                     dim),))


@defop("log_softmax_backward_data", "LogSoftmaxBackwardDataBackward0", method=False)
def log_softmax_backward_data(g, out, dim):
    shape = np.shape(out)
    g, out, dim = _backward_data_args(g, out, dim)
    return contiguous((g - np.exp(out) * _kernel_sum(g, dim)).reshape(shape))


# PyTorch's derivatives.yaml: grad_output: grad - (grad * output.exp()).sum(dim, true);
# output: -grad_output.sum(dim, true) * output.exp() * grad
log_softmax_backward_data.defvjp(lambda gg, ans, g, out, dim: (
    lambda: gg - call("sum", gg * out.exp(), dim=dim, keepdim=True),
    lambda: -call("sum", g, dim=dim, keepdim=True) * out.exp() * gg))


@defop("cumsum", "CumsumBackward0", saves=False)
def cumsum(x, dim):
    # + 0.: PyTorch's running sum starts from 0., so it is never -0.
    return contiguous(_along(np.cumsum, x + 0.0 if x.dtype.kind in "fc" else x, dim))


# d out_j / dx_i = 1 for j >= i: the reversed cumulative sum
cumsum.defvjp(lambda g, ans, x, dim: (_reverse_cumsum(g, dim),))


@defop("cumprod", "CumprodBackward0", reads_output=True)
def cumprod(x, dim):
    return contiguous(_along(np.cumprod, x, dim))


@cumprod.defvjp
def _(g, ans, x, dim):
    # d out_j / dx_i = prod_{k <= j, k != i} x_k for j >= i (= out_j / x_i away from zeros)
    shape = _shape(x)
    if not shape or shape[dim] == 1 or 0 in shape:   # out is x: g as it is, as PyTorch
        return (g,)
    if np.all(_value(x) != 0):
        _note_no_zeros(x, "cumprod")
        return (_reverse_cumsum(ans * g, dim) / x,)
    xm, gm = call("transpose", x, dim, -1), call("transpose", g, dim, -1)
    if not is_grad_enabled():
        gx = wrap(_cumprod_zeros_grad(_value(xm), _value(gm), _value(call("transpose", ans, dim, -1))))
        return (call("transpose", gx, dim, -1),)
    # recorded (PyTorch's O(n^2) rule under grad mode): for each i, the products before it
    # times the cumulative products after it, only over j >= i
    n = _shape(xm)[-1]
    part = lambda v, lo, hi=None: call("getitem", v, (Ellipsis, slice(lo, hi)))  # noqa: E731
    cols = []
    for i in range(n):
        before = wrap(np.ones(_shape(xm)[:-1] + (1,))) if i == 0 else \
            call("prod", part(xm, 0, i), dim=-1, keepdim=True)
        omitted = before if i == n - 1 else \
            call("cat", before, before * call("cumprod", part(xm, i + 1), -1), dim=-1)
        cols.append(call("sum", part(gm, i) * omitted, dim=-1, keepdim=True))
    return (call("transpose", call("cat", *cols, dim=-1), dim, -1),)


def _cumprod_zeros_grad(x, g, out):
    """cumprod's gradient along the last axis of arrays with zeros, as PyTorch computes it
    without grad mode: before the first zero from out * g; at the first zero the products
    up to the second; 0 after it."""
    zeros = np.cumsum(x == 0, axis=-1)
    before = zeros == 0
    first = np.argmax(zeros == 1, axis=-1)[..., None]
    at_first = (np.arange(x.shape[-1]) == first) & (zeros == 1)
    between = (zeros == 1) & ~at_first
    prev = np.take_along_axis(out, np.maximum(first - 1, 0), axis=-1)
    prev = np.where(first == 0, 1.0, prev)
    with np.errstate(all="ignore"):   # inf and nan follow IEEE, as PyTorch's
        w = np.where(before, out * g, 0.0)
        # (+ 0.: PyTorch's running sum starts from 0., so it is never -0.)
        gx = np.where(before, np.flip(np.cumsum(np.flip(w, -1) + 0.0, -1), -1) / x, 0.0)
        val = np.sum(np.cumprod(np.where(between, x, 1.0), axis=-1) * np.where(zeros == 1, g, 0.0),
                     axis=-1, keepdims=True) * prev
    return np.where(at_first, val, gx)


# -- linear algebra -----------------------------------------------------------------------

def _mm_name(a, b):
    if a.ndim == 1 and b.ndim == 1:
        return "DotBackward0"
    if a.ndim == 2 and b.ndim == 1:
        return "MvBackward0"
    if a.ndim == 2 and b.ndim == 2:
        return "MmBackward0"
    if a.ndim == 3 and b.ndim == 3:
        return "BmmBackward0"
    if a.ndim == 1:
        return "SqueezeBackward4"
    return "UnsafeViewBackward0"


@defop("matmul", lambda a, b: _mm_name(a, b), numpy_rule=True, grad_depends="others")
def matmul(a, b):
    if a.ndim == 2 and b.ndim == 2 and a.shape[1] == 1 and a.shape[0] > 1 and b.shape[1] > 1:
        return a * b   # an outer product, as PyTorch's mm computes it: -0. products stay -0.
    return np.matmul(a, b)


def products_only(x_shape, w_shape):
    """Does PyTorch's ``linear`` of an input of ``x_shape`` by weights of ``w_shape`` (out,
    in) compute each result as its one product (one input feature, several rows and
    outputs: mm's outer product), so that a -0. product stays -0., where a sum of products
    starts from +0.?"""
    rows = 1
    for n in x_shape[:-1]:
        rows *= n
    return len(x_shape) >= 2 and w_shape[1] == 1 and rows > 1 and w_shape[0] > 1


def _mm(a, b):
    return rule_call("matmul", a, b)


def _mT(v):
    """``v`` with its last two dims swapped.  Nothing records a tensor without history (the
    float walk, or a constant): a NumPy view then, which BLAS reads without a copy."""
    if v.__class__ is np.ndarray:   # (a numpy_rule's value)
        return np.swapaxes(v, -1, -2)
    if v._tape is None:
        return wrap(np.swapaxes(np.asarray(v._value), -1, -2))
    return call("transpose", v, -1, -2)


def _col(v):
    return rule_call("unsqueeze", v, -1)


def _row(v):
    return rule_call("unsqueeze", v, -2)


@matmul.defvjp
def _(g, ans, a, b):
    # dA = g B^T, dB = A^T g, a 1-D operand promoted as matmul does (the caller sums batches)
    na, nb = len(_shape(a)), len(_shape(b))
    if na == 1 and nb == 1:
        return (lambda: g * b, lambda: g * a)
    if na == 1 and nb == 2:
        return (lambda: _mm(b, g), lambda: rule_call("outer", a, g))
    if na == 2 and nb == 1:
        return (lambda: rule_call("outer", g, b), lambda: _mm(g, a))
    if na == 1:
        return (lambda: rule_call("squeeze", _mm(b, _col(g)), dim=-1),
                lambda: _mm(_col(a), _row(g)))
    if nb == 1:
        return (lambda: _mm(_col(g), _row(b)),
                lambda: rule_call("squeeze", _mm(_row(g), a), dim=-2))
    return (lambda: _mm(g, _mT(b)), lambda: _mm(_mT(a), g))


def _linear_node(x, w, b=None):
    if x.ndim == 2:
        return "MmBackward0" if b is None else "AddmmBackward0"
    return "UnsafeViewBackward0" if b is None else "ViewBackward0"


@defop("linear", _linear_node, method=False, numpy_rule=True, grad_depends="others")
def linear(x, w, b=None):
    """x W^T + b, fused (no transposed copy of W, no broadcast entry for b)."""
    out = x * w.T if products_only(x.shape, w.shape) else np.matmul(x, w.T)
    return out if b is None else out + b


def _rows(v, n):
    return v if len(_shape(v)) == 2 else rule_call("reshape", v, (-1, n))


@linear.defvjp
def _(g, ans, x, w, b=None):
    # dx = g W ; dW = g^T x and db = sum of g, over the leading dims
    n_out, n_in = _shape(w)
    g2 = _rows(g, n_out)
    return (lambda: _mm(g, w),
            lambda: _mm(_mT(g2), _rows(x, n_in)),
            None if b is None else (lambda: rule_call("sum", g2, dim=0)))


def _remainder_node(name):
    # (PyTorch's Backward0 takes a Python number as the divisor, Backward1 a tensor)
    return lambda x, y: name + ("Backward0" if y.__class__ in (int, float, bool) else "Backward1")


def _remainder_rule(rounding):
    """The rule of ``fmod`` (``rounding`` "trunc") or ``remainder`` ("floor"): ``g`` for the
    dividend, ``-g * x.div(y, rounding_mode=rounding)`` for the divisor (PyTorch's formula:
    on tensors the recorded ``div_rounded``, whose derivative is zero).  PyTorch's "floor" is
    the fmod-based floor division NumPy's ``floor_divide`` computes, not ``floor(x / y)``."""
    def vjp(g, ans, x, y):
        def divisor():
            if isinstance(g, Tensor):   # (recorded: a quotient whose derivative is zero)
                return -g * call("div_rounded", x, y, rounding)
            with np.errstate(all="ignore"):   # (NumPy values: the float walk)
                q = np.trunc(x / y) if rounding == "trunc" else np.floor_divide(x, y)
            return -g * q
        return (lambda: g, divisor)
    return vjp


# The remainders are ops of their own, not ``x - trunc(x / y) * y``: that rounds ``trunc(x /
# y) * y`` (``fmod(1e20, 3)`` is 1, the composition gave 0) and loses the sign of a zero
@defop("fmod", _remainder_node("Fmod"), method=False, numpy_rule=True)
def fmod(x, y):
    with np.errstate(all="ignore"):
        return np.fmod(x, y)


fmod.defvjp(_remainder_rule("trunc"))


@defop("remainder", _remainder_node("Remainder"), method=False, numpy_rule=True)
def remainder(x, y):
    # PyTorch's: fmod, moved by y where its sign is not y's (a zero keeps x's sign, where
    # NumPy's remainder gives y's)
    with np.errstate(all="ignore"):
        r = np.fmod(x, y)
        return np.where((r != 0) & ((np.asarray(y) < 0) != (r < 0)), r + y, r)


remainder.defvjp(_remainder_rule("floor"))


def _lerp_node(x, end, weight):
    # (PyTorch's Backward0 takes a Python number as the weight, Backward1 a tensor)
    return "LerpBackward0" if weight.__class__ in (int, float) else "LerpBackward1"


@defop("lerp", _lerp_node, method=False, numpy_rule=True)
def lerp(x, end, weight):
    """PyTorch's CPU values: from ``x`` where the weight is small (|w| < 0.5), as one fused
    multiply-add ``fma(w, end - x, x)``, else back from ``end``: ``end - (end - x) * (1 -
    w)`` for a number weight, ``fma(w - 1, end - x, end)`` for a tensor one (its kernels,
    measured against torch 2.13: ``x + w (end - x)`` rounds otherwise, and gave +0. for
    ``lerp(-0., -0., 0.5)``).  Float32 without the fused rounding."""
    with np.errstate(all="ignore"):
        d = end - x
        fused = _fused if np.result_type(x, end, weight) == np.float64 else _unfused
        if weight.__class__ in (int, float):
            return fused(weight, d, x) if abs(weight) < 0.5 else end - d * (1 - weight)
        return np.where(np.abs(weight) < 0.5, fused(weight, d, x), fused(weight - 1, d, end))


def _unfused(a, b, c):
    return a * b + c


# PyTorch's formulas: g (1 - w), g w, g (end - x)
lerp.defvjp(lambda g, ans, x, end, weight: (lambda: g * (1 - weight), lambda: g * weight,
                                            lambda: g * (end - x)))


@defop("outer", "MulBackward0")
def outer(a, b):
    return np.outer(a, b)


# d (a b^T) = (g b, g^T a)
outer.defvjp(lambda g, ans, a, b: (lambda: _mm(g, b), lambda: _mm(a, g)))


# -- shapes -------------------------------------------------------------------------------

def shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(shape)


def _reshape_back(g, ans, x, *args, **params):
    # a reshape's adjoint: the gradient in the input's shape
    return (rule_call("reshape", g, _shape(x)),)


@defop("reshape", "ViewBackward0", saves=False, view=True, numpy_rule=True, grad_depends="nothing")
def reshape(x, shape):
    return np.reshape(x, shape)


reshape.defvjp(_reshape_back)


@defop("view_node", lambda x, shape, node: node, method=False, saves=False, numpy_rule=True,
       grad_depends="nothing")
def view_node(x, shape, node):
    """A reshape recorded under the name of the PyTorch view op it stands for
    (``UnsafeViewBackward0``, ``ReshapeAliasBackward0``, ``SqueezeBackward4``): the steps of
    PyTorch's ``matmul`` decomposition that tapegrad has no row of its own for."""
    return np.reshape(x, shape).copy()


view_node.defvjp(_reshape_back)


@defop("reshape_alias", "ReshapeAliasBackward0", method=False, saves=False, view=True,
       numpy_rule=True, grad_depends="nothing")
def reshape_alias(x, shape):
    """``reshape`` of a tensor that is not contiguous but has a view of the new shape."""
    return np.reshape(x, shape)


reshape_alias.defvjp(_reshape_back)


@defop("transpose", "TransposeBackward0", saves=False, view=True, numpy_rule=True,
       grad_depends="nothing")
def transpose(x, dim0, dim1):
    dim0, dim1 = wrap_dim(dim0, x.ndim), wrap_dim(dim1, x.ndim)
    return x.swapaxes(dim0, dim1) if x.ndim else x[...]


# a swap is its own inverse
transpose.defvjp(lambda g, ans, x, dim0, dim1: (rule_call("transpose", g, dim0, dim1),))


@defop("t", "TBackward0", saves=False, view=True, numpy_rule=True, grad_depends="nothing")
def t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return x.T


t.defvjp(lambda g, ans, x: (rule_call("t", g),))


@defop("permute", "PermuteBackward0", saves=False, view=True, numpy_rule=True,
       grad_depends="nothing")
def permute(x, dims):
    wrapped = _CHECKED_PERMUTATIONS.get((dims, x.ndim)) if dims.__class__ is tuple else None
    if wrapped is not None:   # (x.T of a matrix at every call: the checks below, once)
        return x.transpose(wrapped)
    if len(dims) != x.ndim:
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does "
                           "not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {x.ndim} is not equal to len(dims) = {len(dims)}")
    dims = tuple(wrap_dim(d, x.ndim) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    if len(_CHECKED_PERMUTATIONS) < 1024 and _int_tuple(dims):
        _CHECKED_PERMUTATIONS[dims, x.ndim] = dims
    return x.transpose(dims)


# (dims, ndim) -> the same dims wrapped, for permutations already checked (ints only:
# True == 1 as a key, and permute refuses no bool, so a bool's key must not be made)
_CHECKED_PERMUTATIONS = {}


# the inverse permutation
permute.defvjp(lambda g, ans, x, dims:
               (rule_call("permute", g, tuple(int(k) for k in
                                         np.argsort([wrap_dim(d, len(dims)) for d in dims]))),))


def _squeeze_node(x, dim=None):
    if dim is None:
        return "SqueezeBackward0"
    return "SqueezeBackward2" if isinstance(dim, (tuple, list)) else "SqueezeBackward1"


@defop("squeeze", _squeeze_node, saves=False, view=True, numpy_rule=True, grad_depends="nothing")
def squeeze(x, dim=None):
    """Drop the dims of size 1 (of those in ``dim``, an int or a tuple, when given)."""
    if dim is None:
        return np.squeeze(x)
    axes = tuple(d for d in _axes(dim, x.ndim) if x.shape[d] == 1)
    return np.squeeze(x, axis=axes)


squeeze.defvjp(_reshape_back)


@defop("unsqueeze", "UnsqueezeBackward0", saves=False, view=True, numpy_rule=True,
       grad_depends="nothing")
def unsqueeze(x, dim):
    d = wrap_dim(dim, x.ndim + 1)
    return x.reshape(x.shape[:d] + (1,) + x.shape[d:])   # (np.expand_dims' own reshape)


unsqueeze.defvjp(_reshape_back)


@defop("expand", "ExpandBackward0", saves=False, view=True, numpy_rule=True, grad_depends="nothing")
def expand(x, shape):
    """A read-only view (several elements share one place in memory: an in-place op on it
    raises, as in PyTorch)."""
    if x.__class__ is _F64 or x.__class__ is np.ndarray and x.ndim == 0:
        # one number everywhere (every sum's gradient): the view np.broadcast_to makes, at a
        # fifth of its cost
        for n in shape:
            if n.__class__ is not int or n < 0:
                break
        else:
            if x.__class__ is _F64:
                x = np.array(x)
            out = np.ndarray(shape, x.dtype, x, 0, (0,) * len(shape))
            out.flags.writeable = False
            return out
    shape = tuple(x.shape[k - (len(shape) - x.ndim)] if n == -1 else n
                  for k, n in enumerate(shape))
    # PyTorch's strides (NumPy's broadcast_to gives a kept size-1 dim stride 0, and
    # matmul's fold test reads them: should_fold); a C-ordered x viewed directly, at less
    # than broadcast_to's cost
    if x.__class__ is np.ndarray and x.size and len(shape) >= x.ndim and x.flags.c_contiguous:
        out = np.ndarray(shape, x.dtype, x, 0, _expand_strides(x, shape))
        out.flags.writeable = False
        return out
    out = np.broadcast_to(x, shape)
    if 1 in shape:
        strides = _expand_strides(x, shape)
        if strides != out.strides:
            out = np.lib.stride_tricks.as_strided(x, shape, strides, writeable=False)
    return out


def _expand_strides(x, shape):
    """PyTorch's strides (in bytes) of ``x.expand(shape)`` (its ``inferExpandGeometry``):
    a dim kept keeps its stride, a broadcast one gets 0, a new leading dim of size 1 the
    stride that would make it contiguous with the dim after it."""
    strides = [0] * len(shape)
    for i in range(len(shape) - 1, -1, -1):
        dim = x.ndim - len(shape) + i
        if dim >= 0:
            stride, size = x.strides[dim], x.shape[dim]
            if size != shape[i] and size != 1:   # (never a view past x's memory)
                raise ValueError(f"cannot expand shape {x.shape} to {shape}")
        else:
            stride = shape[i + 1] * strides[i + 1] if i + 1 < len(shape) else x.itemsize
            size = 1
        strides[i] = stride if size == shape[i] else 0
    return tuple(strides)


# the gradient summed back over the broadcast dims
expand.defvjp(lambda g, ans, x, shape: (sum_to(g, _shape(x)),))


@defop("flip", "FlipBackward0", saves=False)
def flip(x, dims):
    return like_layout(np.flip(x, axis=_axes(dims, x.ndim)), x)


# a flip is its own inverse
flip.defvjp(lambda g, ans, x, dims: (call("flip", g, dims),))


@defop("roll", "RollBackward0", saves=False)
def roll(x, shifts, dims=None):
    if dims is not None and x.ndim == 0:
        raise IndexError(f"Dimension specified as {dims[0] if isinstance(dims, tuple) else dims} "
                         "but tensor has no dimensions")
    if dims is not None:
        dims = wrap_dims(dims, x.ndim) if isinstance(dims, tuple) else wrap_dim(dims, x.ndim)
    return contiguous(np.roll(x, shifts, axis=dims))


# rolled back
roll.defvjp(lambda g, ans, x, shifts, dims=None:
            (call("roll", g, tuple(-s for s in shifts) if isinstance(shifts, tuple) else -shifts,
                  dims),))


def _slices(g, xs, dim, pick):
    """``g`` cut into one part per input: ``pick(k, x)`` indexes along ``dim``."""
    dim = wrap_dim(dim, len(_shape(g)))
    return tuple(rule_call("getitem", g, (slice(None),) * dim + (pick(k, x),))
                 for k, x in enumerate(xs))


@defop("cat", "CatBackward0", method=False, saves=False, numpy_rule=True, grad_depends="nothing")
def cat(*xs, dim=0):
    return contiguous(np.concatenate(xs, axis=wrap_dim(dim, xs[0].ndim)))


@cat.defvjp
def _(g, ans, *xs, dim=0):
    # each input's part of g
    dim = wrap_dim(dim, len(_shape(g)))
    starts = [0]
    for x in xs:
        starts.append(starts[-1] + _shape(x)[dim])
    return _slices(g, xs, dim, lambda k, x: slice(starts[k], starts[k + 1]))


@defop("stack", "StackBackward0", method=False, saves=False, numpy_rule=True,
       grad_depends="nothing")
def stack(*xs, dim=0):
    axis = wrap_dim(dim, xs[0].ndim + 1)
    first = xs[0]
    shape, dtype = (first.shape, first.dtype) if first.__class__ is np.ndarray else (None, None)
    same_dtype = True
    for x in xs:
        if x.__class__ is not np.ndarray or x.shape != shape:
            return np.stack(xs, axis=axis)
        same_dtype = same_dtype and x.dtype == dtype
    if axis == 0 and same_dtype:   # (arrays of one shape and dtype, one after another)
        return np.array(xs)
    # what np.stack does once it has checked the shapes, without its dispatch
    at = (slice(None),) * axis + (None,)
    return np.concatenate([x[at] for x in xs], axis=axis)


# each input's slice of g
stack.defvjp(lambda g, ans, *xs, dim=0: _slices(g, xs, dim, lambda k, x: k))


@defop("split", lambda x, split_size_or_sections, dim=0:
       "SplitBackward0" if isinstance(split_size_or_sections, int) else "SplitWithSizesBackward0",
       saves=False, view=True)
def split(x, split_size_or_sections, dim=0):
    if x.ndim == 0:
        raise RuntimeError("split expects at least a 1-dimensional tensor")
    dim = wrap_dim(dim, x.ndim)
    n = x.shape[dim]
    if isinstance(split_size_or_sections, int):
        cuts = list(range(split_size_or_sections, n, split_size_or_sections))
    else:
        cuts = list(np.cumsum(split_size_or_sections)[:-1])
    return tuple(np.split(x, cuts, axis=dim))


# the parts' gradients put back together
split.defvjp(lambda gs, outs, x, split_size_or_sections, dim=0: (call("cat", *gs, dim=dim),))


def split_slices(shape, parts, args, params):
    """The index of each part of a ``split`` of an array of ``shape`` into ``parts``."""
    dim = wrap_dim(params.get("dim", 0), len(shape))
    out, start = [], 0
    for p in parts:
        n = p.shape[dim]
        out.append((slice(None),) * dim + (slice(start, start + n),))
        start += n
    return out


@defop("unbind", "UnbindBackward0", saves=False, view=True)
def unbind(x, dim=0):
    """The slices along ``dim`` (wrapped), views of ``x``: a float64 vector's elements as
    numbers (``_view_call`` registers them as its views, as ``getitem``'s fast path), other
    elements as 0-d views (written through)."""
    if x.ndim == 1:
        if x.dtype == np.float64:
            return tuple(x.tolist())
        return tuple(x[k, ...] for k in range(x.shape[0]))
    return tuple(np.moveaxis(x, dim, 0))


# the parts' gradients stacked back (a part no gradient reached gets zeros)
unbind.defvjp(lambda gs, outs, x, dim=0: (call("stack", *gs, dim=dim),))


def unbind_slices(shape, parts, args, params):
    """The index of each part of an ``unbind`` of an array of ``shape`` (each ends in
    ``...``: NumPy's view, not a scalar, for an element)."""
    dim = params.get("dim", 0)
    return [(slice(None),) * dim + (k, Ellipsis) for k in range(shape[dim])]


# several outputs, also when there is one: the rule takes the list of their gradients
_MULTI_OUTPUT = {"split": (split_slices, "Split"), "unbind": (unbind_slices, "Unbind")}


@defop("diagonal", "DiagonalBackward0", saves=False, view=True)
def diagonal(x, offset=0, dim1=0, dim2=1):
    """The diagonal along ``dim1``/``dim2`` as a (writable) view, moved to the last dim."""
    d = np.diagonal(x, offset, wrap_dim(dim1, x.ndim), wrap_dim(dim2, x.ndim))
    if x.flags.writeable:   # NumPy's diagonal view is read-only; PyTorch's is not
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            d.flags.writeable = True
    return d


@diagonal.defvjp
def _(g, ans, x, offset=0, dim1=0, dim2=1):
    # g written on the diagonal of zeros of x's shape
    steps = (("diagonal", (offset, dim1, dim2), {}),)
    return (call("copy_slices", wrap(np.zeros(_shape(x))), g, steps),)


# -- views replayed and written through (in-place ops on views; core/views.py) ---------------

@defop("as_strided", "AsStridedBackward0", method=False, saves=False)
def as_strided(x, steps):
    """``x`` viewed through ``steps``: a view's value replayed on its base's new history
    after an in-place change of their memory (PyTorch's ``AsStridedBackward0``)."""
    return view_through(x, steps)


@as_strided.defvjp
def _(g, ans, x, steps):
    # each step's own adjoint, the last step first (view adjoints read shapes only)
    shapes = [_shape(x)]
    for name, args, params in steps[:-1]:
        shapes.append(np.shape(ARRAY_OPS[name].forward(np.empty(shapes[-1], np.int8), *args,
                                                        **params)))
    for (name, args, params), shape in zip(reversed(steps), reversed(shapes)):
        like = wrap(np.broadcast_to(np.float64(0.0), shape))
        g = _graph_shape(ARRAY_OPS[name].vjp(g, None, like, *args, **params)[0], like)
    return (g,)


@defop("written_view", "AsStridedBackward0", method=False, saves=False)
def written_view(x, steps):
    """``x`` viewed through ``steps`` as the input of an in-place op through that view: its
    gradient goes into the view's part of ``x`` only (PyTorch's CopySlices runs the in-place
    op's backward and writes the result there, never the view's own backward, whose zeros
    outside the view would turn the base's -0. gradients into +0.)."""
    return view_through(x, steps)


# g written into -0. (the neutral element of the sum with what the base gets elsewhere)
written_view.defvjp(lambda g, ans, x, steps:
                    (lambda: call("copy_slices", wrap(np.full(_shape(x), -0.0)), g, steps),))


def replay_view(root, steps, op_name="as_strided"):
    """``root`` viewed through ``steps``, recorded as one ``AsStridedBackward0`` (the tape
    keeps a copy of the value; the tensor views the root's memory); ``op_name``
    "written_view" for the input of an in-place op through the view."""
    op = ARRAY_OPS[op_name]
    part = view_through(root._value, steps)
    out = part if part.ndim or part.dtype != np.float64 else float(part)
    return _record_call(op, op.node, (root, steps), [out], {}, None, True)[0]


# (saves: PyTorch's CopySlices holds the in-place op's node and releases it in a backward,
# so a second backward raises even where that op saved nothing; reads: none of its values)
@defop("copy_slices", "CopySlices", method=False, saves=True, reads=())
def copy_slices(base, src, steps):
    """``base`` with ``src`` written into its view through ``steps`` (a new array): an
    in-place op through a view, as the base's history sees it (PyTorch's ``CopySlices``)."""
    out = np.array(base, dtype=np.result_type(base, src) if base.dtype.kind != "f" else base.dtype)
    place = view_through(out, steps)
    if not place.flags.writeable:   # (through an expand)
        place = writable_view(place, out)
    place[...] = src
    return out


def writable_view(place, memory):
    """``place``, a read-only view of ``memory`` made through ``expand`` that holds each
    element once (``x.expand(2, 3)[0]``), as a writable view of the same elements: PyTorch
    writes such a part in place.  None where ``memory`` cannot be viewed so."""
    if memory.__class__ is not np.ndarray or not memory.flags.writeable or \
            not (memory.flags.c_contiguous or memory.flags.f_contiguous) or \
            any(s == 0 and n > 1 for s, n in zip(place.strides, place.shape)):
        return None
    size = memory.itemsize
    flat = np.lib.stride_tricks.as_strided(memory, shape=(memory.size,), strides=(size,),
                                           writeable=True)
    offset = place.__array_interface__["data"][0] - memory.__array_interface__["data"][0]
    return np.lib.stride_tricks.as_strided(flat[offset // size:], shape=place.shape,
                                           strides=place.strides, writeable=True)


# base: g with the written part -0. (the neutral element of a sum: what reaches that part
# through the view is added there, and is all there is, as PyTorch's CopySlices writes the
# in-place op's gradient there; +0. turned a -0. one into +0.); src: g's part there
copy_slices.defvjp(lambda g, ans, base, src, steps:
                   (lambda: call("copy_slices", g, -0.0, steps),
                    lambda: sum_to(call("as_strided", g, steps), _shape(src))))


# -- indexing -----------------------------------------------------------------------------

def _is_int(p):
    return isinstance(p, (int, np.integer)) or (isinstance(p, np.ndarray) and p.ndim == 0
                                   and p.dtype.kind in "iu")


def _is_advanced(p):
    return isinstance(p, np.ndarray) and not _is_int(p)


def full_slice(p, n):
    """True for a slice that takes all of a dim of size ``n``."""
    return isinstance(p, slice) and p.step in (None, 1) and p.indices(n)[:2] == (0, n)


def index_steps(shape, idx):
    """The single-dimension indices PyTorch applies one after another for ``x[idx]`` (one
    ``SelectBackward0``, ``SliceBackward0`` or ``UnsqueezeBackward0`` node each, left to
    right; full slices of a tuple make none), then the advanced parts (integer arrays,
    masks) together as one last index (``IndexBackward0``); ``[()]`` when nothing is
    left (``AliasBackward0``)."""
    if not isinstance(idx, tuple):
        return [int(idx) if _is_int(idx) else idx]
    consumed = builtins.sum(p.ndim if _is_advanced(p) and p.dtype == bool else
                            (0 if p is None or p is Ellipsis else 1) for p in idx)
    shape, steps, advanced, d, taken = list(shape), [], [], 0, 0
    for p in idx:
        if p is Ellipsis:
            # the dims left after d, less those the parts after it take, are the ellipsis's
            # (``consumed`` counts the advanced parts before it too: ``taken`` of them)
            d = len(shape) - consumed + taken
        elif _is_advanced(p) and p.dtype == bool and not p.ndim:
            # a 0-d mask (``x[True]``): PyTorch unsqueezes there and takes the new dim with
            # a one-element mask (all of it, or none)
            steps.append((slice(None),) * d + (None,))
            shape.insert(d, 1)
            advanced.append((d, p.reshape(1)))
            d += 1   # (no dim of the input: ``consumed`` counted none for it)
        elif _is_advanced(p):
            advanced.append((d, p))
            d += p.ndim if p.dtype == bool else 1
            taken += p.ndim if p.dtype == bool else 1
        elif p is None:
            steps.append((slice(None),) * d + (None,))
            shape.insert(d, 1)
            d += 1
        elif _is_int(p):
            steps.append((slice(None),) * d + (int(p),))
            del shape[d]
            consumed -= 1
        else:
            if not full_slice(p, shape[d]):
                steps.append((slice(None),) * d + (p,))
                shape[d] = len(range(*p.indices(shape[d])))
            d += 1
            consumed -= 1
    if advanced:
        last = [slice(None)] * d
        for k, p in advanced:
            last[k] = p
        for k, p in reversed(advanced):   # a mask spans p.ndim dims
            if p.dtype == bool:
                del last[k + 1:k + p.ndim]
        steps.append(tuple(last))
    return steps or [()]


def _index_node(idx):
    if idx.__class__ is int:   # (the common cases first)
        return "SelectBackward0"
    if idx.__class__ is slice:
        return "SliceBackward0"
    parts = idx if isinstance(idx, tuple) else (idx,)
    if any(isinstance(p, (list, np.ndarray)) for p in parts):
        return "IndexBackward0"
    last = [p for p in parts if p is not Ellipsis]
    if not last:
        return "AliasBackward0"
    if last[-1] is None:
        return "UnsqueezeBackward0"
    return "SelectBackward0" if isinstance(last[-1], (int, np.integer)) else "SliceBackward0"


# (IndexBackward0 saves its indices: a second backward through a freed one raises there)
@defop("getitem", lambda x, idx: _index_node(idx), method=False,
       saves=lambda node: node == "IndexBackward0", view=True, reads=(1,),   # (x: its shape)
       numpy_rule=True, grad_depends="nothing")
def getitem(x, idx):
    """``x[idx]``: a view for basic indices (an element as a 0-d view), a copy for
    advanced ones."""
    if idx.__class__ is int:   # an element or a row: its view at once
        return x[idx, ...]
    r = x[idx]
    if r.__class__ is not np.ndarray:   # an element: the 0-d view of it
        r = x[(idx if isinstance(idx, tuple) else (idx,)) + (Ellipsis,)]
    elif not r.flags.c_contiguous and _advanced_copy(idx) and _row_major(x):
        # NumPy lays out ``x[:, index]`` with the indexed dims first in memory; PyTorch's
        # index of a tensor laid out row by row (contiguous, or a select or slice of one) is
        # contiguous (its strides, ``view``, and every later elementwise op's layout follow)
        r = np.ascontiguousarray(r)
    return r


def _advanced_copy(idx):
    """Does index ``idx`` hold an integer or mask array (NumPy's result is a copy)?"""
    for p in (idx if idx.__class__ is tuple else (idx,)):
        if isinstance(p, (list, np.ndarray)):
            return True
    return False


def _row_major(x):
    """Are ``x``'s strides in row-major order (not increasing over its dims of size > 1)?"""
    last = None
    for n, st in zip(x.shape, x.strides):
        if n > 1:
            if last is not None and st > last:
                return False
            last = st
    return True


# g added back at idx (repeated integer indices accumulate)
getitem.defvjp(lambda g, ans, x, idx: (rule_call("unindex", g, _shape(x), idx),))


@defop("unindex", "IndexPutBackward0", method=False, saves=False, numpy_rule=True,
       grad_depends="nothing")
def unindex(g, shape, idx):
    """Zeros of ``shape`` with ``g`` added at ``idx``: the adjoint of ``getitem``."""
    out = np.zeros(shape)
    if idx.__class__ is not int and idx.__class__ is not slice and is_advanced_index(idx):
        # an index may repeat: its gradients add up
        np.add.at(out, idx, g)
    else:   # written, as PyTorch's select/slice backward does: a -0. stays -0.
        out[idx] = g
    return out


# the adjoint of a scatter-add is the gather
unindex.defvjp(lambda g, ans, v, shape, idx: (rule_call("getitem", g, idx),))


def along_index(index, dim):
    """The NumPy index that takes ``index`` along ``dim`` and every other position as
    itself: ``out[i][j] = x[index[i][j]][j]`` for dim 0.  A 0-d index is one element."""
    index = np.atleast_1d(index)
    idx = list(np.indices(index.shape, sparse=True))
    idx[dim] = index
    return tuple(idx)


@defop("gather", "GatherBackward0")   # (PyTorch saves x and the index)
def gather(x, dim, index):
    """PyTorch's gather: the result has the index's shape (which may be smaller than the
    input's in every dim but ``dim``)."""
    return np.atleast_1d(x)[along_index(index, dim)].reshape(np.shape(index))


gather.defvjp(lambda g, ans, x, dim, index: (call("ungather", g, _shape(x), dim, index),))


@defop("ungather", lambda g, shape, dim, index, assign=False:
       "ScatterBackward0" if assign else "ScatterAddBackward0",
       method=False, saves=False, numpy_rule=True, grad_depends="nothing")
def ungather(g, shape, dim, index, assign=False):
    """Zeros of ``shape`` with ``g`` added along ``dim`` at ``index``: gather's adjoint
    (scatter_add); ``assign``: one index per position along ``dim``, ``g`` written there
    (scatter, min/max over a dim's adjoint: a -0. stays -0.)."""
    out = np.zeros(tuple(shape) or (1,))
    idx = along_index(index, dim)
    if assign:   # (the caller's indices hit no place twice: sort's, min/max's)
        out[idx] = np.reshape(g, idx[dim].shape)
    elif np.ndim(index) and np.shape(index)[dim] == 1:
        # one index per position along dim: no place is hit twice, so an assignment adds
        # (+ 0.0: 0.0 + -0.0 is 0.0), at a third of np.add.at's cost
        out[idx] = np.reshape(g, idx[dim].shape) + 0.0
    else:
        np.add.at(out, idx, np.reshape(g, idx[dim].shape))
    return out.reshape(shape)


ungather.defvjp(lambda g, ans, v, shape, dim, index, assign=False:
                (rule_call("gather", g, dim, index),))


@defop("index_select", "IndexSelectBackward0", reads=(2,))   # (the index; x: its shape)
def index_select(x, dim, index):
    if x.ndim == 0:   # one element: the index is 0
        return x.copy()
    return np.take(x, index, axis=wrap_dim(dim, x.ndim))


index_select.defvjp(lambda g, ans, x, dim, index:
                    (g if not _shape(x) else
                     call("unindex", g, _shape(x), (slice(None),) * wrap_dim(dim, len(_shape(x)))
                          + (index,)),))


@defop("take", "TakeBackward0")   # (PyTorch saves x and the index)
def take(x, index):
    return np.take(x, index)


take.defvjp(lambda g, ans, x, index:
            (call("reshape", call("unindex", g, (_numel(x),), (index,)), _shape(x)),))


def is_advanced_index(step):
    """True for an index with an integer array or a mask in it."""
    parts = step if isinstance(step, tuple) else (step,)
    return any(isinstance(p, list) or _is_advanced(p) for p in parts)


def without_leading_ones(shape):
    """``shape`` without its leading dims of size 1 (PyTorch drops them from an assigned
    value)."""
    shape = tuple(shape)
    while shape and shape[0] == 1:
        shape = shape[1:]
    return shape


_NO_PARAMS = {}   # (the params of a one-step index: shared, never written)


def basic_index(x, idx, node=None):
    """``call("getitem", x, idx)`` for the common one-step index of a tensor ``x`` with
    history or without (exactly a ``Tensor``, holding an array of 1 dim or more; not a
    recorded comparison, whose use ``call`` notes): an int in range or a slice of ints with a
    step that is not 0 (``c[3]``, ``c[0:3]``), or a step of ``basic_steps``, which need no
    analysis; the caller checks that (``node``: the step's node name, when known).  The same
    value, node, tape entry and view as the general path, at a third of its cost."""
    v = x._value
    c = idx.__class__
    if c is slice:
        out, node = v[idx], "SliceBackward0"
    elif c is int:
        if v.ndim == 1 and v.dtype is _DT64:
            # an element of a float64 vector (``for v in w``, ``sum(w)``): its number directly
            out = _float(v[idx])
        else:   # (a row, or an element of another dtype: its 0-d view)
            out = v[idx, ...]
        node = "SelectBackward0"
    else:   # one step of index_steps: full slices, then an int, a slice or a None
        out = v[idx]
        if node is None:
            node = _index_node(idx)
        if out.__class__ is not np.ndarray:   # an element: the 0-d view of it
            out = v[idx + (Ellipsis,)]
        if not out.ndim and out.dtype is _DT64:
            out = float(out)
    # (a basic index is a view, an empty one too, as PyTorch's empty slice)
    number = None
    if x._tape is not None:
        number = _SHARED_CALLS.get((slice, idx.start, idx.stop, idx.step)) if c is slice \
            else None
        if number is None:
            number = _shared_index_call(idx)
    return _record_view(x, out, node, number, ("getitem", (_ARGS[0], idx), _NO_PARAMS),
                        ("getitem", (idx,), _NO_PARAMS))


def select_recorded(x, idx):
    """``x[idx]`` for an int ``idx`` in range of a float64 ``Tensor`` ``x`` with history
    (not a multi-output view, not detached) while grad is on: ``basic_index``'s entry,
    node and view in one step, without its layers (``h[i]`` of a vector with history 2.3
    -> 1.8 us, PyTorch's 1.1: element access in scalar-heavy code); None where that does
    not apply (the caller takes the general path)."""
    T = recording()
    tape = x._tape
    if T is None or tape is None or x._multi_output is not None or x._detached:
        return None
    if T._retiring:
        T = next_tape(T, (x,))
    v = x._value
    if v.ndim == 1:
        out = kept = _float(v[idx])
    else:
        out = v[idx]
        kept = np.array(out)   # (the tape keeps a view op's value as a copy: _record_view)
    number = _SELECT_CALLS.get(idx)
    if number is None:
        number = _shared_index_call(idx)
        if number is None:
            return None
        _SELECT_CALLS[idx] = number
    ref = x._entry if tape is T else T._ref(x)   # (_record_view's reference)
    head = T._push_pyop(kept)
    T._py[head] = ("SelectBackward0", (ref,), number)
    T._stops.append(head)
    r = _new(Tensor)
    r._value = out
    r._tape = T
    r._entry = head + 1
    # (register_view's bookkeeping, for a source that is neither detached nor multi-output)
    info = x._view
    step = ("getitem", (idx,), _NO_PARAMS)
    root = x if info is None else info[0]
    r._view = (root, (step,) if info is None else info[1] + (step,))
    remember_view(root, r)
    return r


_SELECT_CALLS = {}   # (int index -> its shared getitem call's number: select_recorded)
interrupts.protect(select_recorded)


def basic_steps(shape, idx):
    """``index_steps`` of ``idx``, each with its node name, when ``idx`` is a tuple of ints in
    range, slices of ints and Nones (``x[None, :]``, ``x[:, 0]``, ``icf[:, 2:]``: every
    step a view that ``basic_index`` records), else None.  Worked out here in one pass, as
    ``index_steps`` would: a None adds a dim, an int removes one, a full slice makes no step."""
    steps, d, k, n = [], 0, 0, len(shape)   # d: the dim of the result so far, k: of the input
    for p in idx:
        if p is None:
            steps.append(((_FULL,) * d + (None,), "UnsqueezeBackward0"))
            d += 1
            continue
        if k == n:
            return None
        c = p.__class__
        if c is int:
            if not -shape[k] <= p < shape[k]:
                return None
            steps.append(((_FULL,) * d + (p,), "SelectBackward0"))
        elif c is slice:
            start, stop, step = p.start, p.stop, p.step
            if start is None and stop is None and step is None:   # (full: no step)
                d += 1
                k += 1
                continue
            if not ((start is None or start.__class__ is int)
                    and (stop is None or stop.__class__ is int)
                    and (step is None or (step.__class__ is int and step > 0))):
                return None   # (a step of 0 or less: the general path raises PyTorch's error)
            if not full_slice(p, shape[k]):
                steps.append(((_FULL,) * d + (p,), "SliceBackward0"))
            d += 1
        else:
            return None
        k += 1
    return steps


_FULL = slice(None)


def index(x, idx):
    """``x[idx]`` recorded as PyTorch records it: one getitem per ``index_steps`` step."""
    for step in index_steps(_shape(x), idx):
        x = call("getitem", x, step)
    return x


def view_at(a, idx):
    """(view, last step): the NumPy view of ``a`` after the basic steps of ``idx`` and the
    step left to apply, so that ``view[last]`` is ``x[idx]`` with PyTorch's semantics."""
    steps = index_steps(np.shape(a), idx)
    for step in steps[:-1]:
        a = a[step]
    return a, steps[-1]


def index_shape(shape, idx):
    """The shape of ``x[idx]`` for ``x`` of ``shape``."""
    view, last = view_at(np.empty(shape, np.int8), idx)
    return view[last].shape


def _index_put_node(x, idx, v):
    # advanced indices alone write into x itself (index_put); anything else into a view of it
    steps = index_steps(np.shape(x), idx)
    return "IndexPutBackward0" if len(steps) == 1 and is_advanced_index(steps[0]) else "CopySlices"


@defop("index_put", _index_put_node, method=False, reads=(1,))   # (x, v: only their shapes)
def index_put(x, idx, v):
    """``x`` with ``x[idx] = v``; ``v``'s leading dims of size 1 are dropped first and the
    rest broadcasts, as in PyTorch."""
    out, v = _put_operands(x, v)
    view, last = view_at(out, idx)
    view[last] = v.reshape(without_leading_ones(v.shape))
    return out


def _put_operands(x, v):
    """``index_put``'s result to write into (a copy of ``x``, promoted for a float value
    into an integer ``x``) and ``v`` as an array."""
    v = np.asarray(v)
    x = np.asarray(x)
    return np.array(x, dtype=np.result_type(x, v) if x.dtype.kind != "f" else x.dtype), v


def _put_value_grad(g, idx, v):
    """The gradient of ``index_put``'s value ``v``: ``g`` at ``idx``, summed back over the
    broadcast and shaped like ``v``."""
    gv = sum_to(index(g, idx), without_leading_ones(_shape(v)))
    return gv if _shape(gv) == _shape(v) else call("reshape", gv, _shape(v))


# x's gradient is g with the overwritten places zeroed
index_put.defvjp(lambda g, ans, x, idx, v: (lambda: call("index_put", g, idx, 0.0), None,
                                           lambda: _put_value_grad(g, idx, v)))


@defop("index_put_add", "IndexPutBackward0", method=False, reads=(1,))
def index_put_add(x, idx, v):
    """``x`` with ``v`` added at ``idx`` (``index_put(..., accumulate=True)``): a place the
    index repeats gets every value there, as in PyTorch."""
    out, v = _put_operands(x, v)
    view, last = view_at(out, idx)
    # the values broadcast to the places first: NumPy 2.4's add.at broadcasts a short value
    # over a 2-d index of a vector wrongly (and reads memory it does not own)
    np.add.at(view, last, np.broadcast_to(v.reshape(without_leading_ones(v.shape)),
                                          view[last].shape))
    return out


# x's gradient is g
index_put_add.defvjp(lambda g, ans, x, idx, v: (g, None, lambda: _put_value_grad(g, idx, v)))


@defop("to_dtype", "ToCopyBackward0", method=False, cast=False, saves=False)
def to_dtype(x, dtype):
    return x.astype(dtype)


# the result's gradient has the result's dtype (as in PyTorch), then converts back
to_dtype.defvjp(lambda g, ans, x, dtype:
                (call("to_dtype", call("to_dtype", g, dtype), _value(x).dtype),))
