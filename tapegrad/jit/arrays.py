"""Arrays of actives inside a ``tg.jit`` function: indexing, slicing, assignment, ``len``,
``shape``, and the constructors that make them (``np.zeros_like``/``np.empty_like`` of an
active array, ``tapegrad.jit.zeros(shape, like)``)."""
from __future__ import annotations

import operator

import numpy as np
from numba import types
from numba.core import cgutils, errors
from numba.core.imputils import (RefType, impl_ret_new_ref, iternext_impl, lower_builtin)
from numba.core.typing.templates import AbstractTemplate, infer_global, signature
from numba.extending import intrinsic, overload, overload_attribute, overload_method

from ..core import optable
from .active import Active, ActiveArray, ActiveArrayIter, emit_constant, emit_read, make_active


def _slot(t):
    return t.slot if isinstance(t, (Active, ActiveArray)) else None


@intrinsic
def scalar_like(typingctx, like, value, ref):
    """An active of ``like``'s slot from its value and reference."""
    slot = _slot(like)
    if slot is None:
        return None

    def codegen(context, builder, sig, args):
        return make_active(context, builder, sig.return_type, args[1], args[2])
    return signature(Active(slot), like, types.float64, types.int64), codegen


@intrinsic
def array_like(typingctx, like, vals, refs):
    """An array of actives of ``like``'s slot from arrays of values and references."""
    slot = _slot(like)
    if slot is None or not isinstance(vals, types.Array):
        return None
    ty = ActiveArray(slot, vals)

    def codegen(context, builder, sig, args):
        out = cgutils.create_struct_proxy(ty)(context, builder)
        context.nrt.incref(builder, sig.args[1], args[1])
        context.nrt.incref(builder, sig.args[2], args[2])
        out.vals = args[1]
        out.refs = args[2]
        return out._getvalue()
    return signature(ty, like, vals, refs), codegen


@intrinsic
def constant_ref(typingctx, like, value):
    """The tape reference of the number ``value`` (a constant) in ``like``'s slot."""
    slot = _slot(like)
    if slot is None:
        return None

    def codegen(context, builder, sig, args):
        v = context.cast(builder, args[1], sig.args[1], types.float64)
        return emit_constant(builder, slot, v)
    return signature(types.int64, like, value), codegen


def _is_int_index(A, i):
    if isinstance(i, types.Integer):
        return A.ndim == 1
    return (isinstance(i, types.BaseTuple) and len(i) == A.ndim
            and all(isinstance(t, types.Integer) for t in i))


@overload(operator.getitem)
def _getitem(A, i):
    if not isinstance(A, ActiveArray):
        return None
    if _is_int_index(A, i):
        def scalar(A, i):
            return scalar_like(A, A.vals[i], A.refs[i])
        return scalar

    def part(A, i):
        return array_like(A, A.vals[i], A.refs[i])
    return part


@overload(operator.setitem)
def _setitem(A, i, v):
    if isinstance(A, types.Array) and isinstance(v, (Active, ActiveArray)):
        raise errors.TypingError(
            "tapegrad.jit: an active value cannot go into a plain float array (it would lose "
            "its gradient): make the array with np.empty_like/np.zeros_like of an active "
            "array, or tg.jit.zeros(shape, like) with `like` any active value")
    if not isinstance(A, ActiveArray):
        return None
    if isinstance(v, Active):
        def set_active(A, i, v):
            A.vals[i] = v.value
            A.refs[i] = v.ref
        return set_active
    if isinstance(v, ActiveArray):
        def set_array(A, i, v):
            A.vals[i] = v.vals
            A.refs[i] = v.refs
        return set_array
    if isinstance(v, (types.Float, types.Integer, types.Boolean)):
        def set_number(A, i, v):
            A.vals[i] = v
            A.refs[i] = constant_ref(A, v)
        return set_number


@overload(len)
def _len(A):
    if isinstance(A, ActiveArray):
        return lambda A: len(A.vals)


@overload_attribute(ActiveArray, "shape")
def _shape(A):
    return lambda A: A.vals.shape


@overload_attribute(ActiveArray, "size")
def _size(A):
    return lambda A: A.vals.size


@overload_attribute(ActiveArray, "ndim")
def _ndim(A):
    return lambda A: A.vals.ndim


@overload_method(ActiveArray, "copy")
def _copy(A):
    return lambda A: array_like(A, A.vals.copy(), A.refs.copy())


@overload(np.copy)
def _np_copy(A):
    if isinstance(A, ActiveArray):
        return lambda A: array_like(A, A.vals.copy(), A.refs.copy())


def _zeros_like(A):
    if isinstance(A, ActiveArray):
        # reference -1 is constant 0, which every recording has: 0.0
        return lambda A: array_like(A, np.zeros(A.vals.shape), np.full(A.vals.shape, -1, np.int64))


overload(np.zeros_like)(_zeros_like)
overload(np.empty_like)(_zeros_like)


def zeros(shape, like):
    """An array of zeros that can hold actives of ``like`` (an active scalar or array), in
    a tg.jit function; in Python, a float array of zeros."""
    return np.zeros(shape)


@overload(zeros)
def _zeros(shape, like):
    if _slot(like) is not None:
        return lambda shape, like: array_like(like, np.zeros(shape), np.full(shape, -1, np.int64))


def value(x):
    """The value of an active (a float, or an array of floats for an array of actives),
    detached: nothing recorded depends on it.  On a plain number or array: itself."""
    return x


@intrinsic
def note_read(typingctx, like, ref):
    """Mark that a value left the tape (see ``active.emit_read``)."""
    slot = _slot(like)
    if slot is None:
        return None

    def codegen(context, builder, sig, args):
        emit_read(builder, slot, args[1])
        return context.get_dummy_value()
    return signature(types.none, like, types.int64), codegen


@overload(value)
def _value(x):
    if isinstance(x, Active):
        def scalar(x):
            note_read(x, x.ref)
            return x.value
        return scalar
    if isinstance(x, ActiveArray):
        def array(x):
            if x.refs.size:
                note_read(x, x.refs.reshape(x.refs.size)[0])
            return x.vals.copy()
        return array
    return lambda x: x


def _length(A):
    return len(A.vals)


def _item(A, i):
    return A[i]


@lower_builtin("getiter", ActiveArray)
def _getiter(context, builder, sig, args):
    it = cgutils.create_struct_proxy(sig.return_type)(context, builder)
    it.index = cgutils.alloca_once_value(builder, context.get_constant(types.intp, 0))
    it.array = args[0]
    context.nrt.incref(builder, sig.args[0], args[0])
    return impl_ret_new_ref(context, builder, sig.return_type, it._getvalue())


@lower_builtin("iternext", ActiveArrayIter)
@iternext_impl(RefType.BORROWED)
def _iternext(context, builder, sig, args, result):
    ty = sig.args[0]
    it = cgutils.create_struct_proxy(ty)(context, builder, value=args[0])
    index = builder.load(it.index)
    n = context.compile_internal(builder, _length, signature(types.intp, ty.array), [it.array])
    valid = builder.icmp_signed("<", index, n)
    result.set_valid(valid)
    with builder.if_then(valid):
        item = context.compile_internal(builder, _item, signature(ty.yield_type, ty.array, types.intp),
                                        [it.array, index])
        result.yield_(item)
        builder.store(builder.add(index, context.get_constant(types.intp, 1)), it.index)


@overload(operator.floordiv)
def _floordiv(x, y):
    """``x // y`` on actives: floor(x / y), recorded from the table's rows (zero gradient)."""
    if isinstance(x, Active) or isinstance(y, Active):
        return lambda x, y: np.floor(x / y)


@overload(operator.mod)
def _mod(x, y):
    """``x % y`` on actives: x - y floor(x / y) (Python's sign convention), from the rows."""
    if isinstance(x, Active) or isinstance(y, Active):
        return lambda x, y: x - y * np.floor(x / y)


# -- whole-array arithmetic: each elementwise row on arrays of actives, element by element --
# Typed by an AbstractTemplate (an @overload on operator.mul would slow the typing of every
# scalar op), lowered by compiling the element loop below for the call's types.
def _unary_loop(fn):
    def run(x):
        out = np.zeros_like(x)
        xs, os_ = _flat(x), _flat(out)
        for k in range(len(xs)):
            os_[k] = fn(xs[k])
        return out
    return run


def _binary_loops(fn, in_place):
    def both(x, y):
        if x.shape != y.shape:
            raise ValueError("tg.jit: arrays of actives of different shapes")
        out = x if in_place else np.zeros_like(x)
        xs, ys, os_ = _flat(x), _flat(y), _flat(out)
        for k in range(len(xs)):
            os_[k] = fn(xs[k], ys[k])
        return out

    def left(x, y):
        out = x if in_place else np.zeros_like(x)
        xs, os_ = _flat(x), _flat(out)
        for k in range(len(xs)):
            os_[k] = fn(xs[k], y)
        return out

    def right(x, y):
        out = np.zeros_like(y)
        ys, os_ = _flat(y), _flat(out)
        for k in range(len(ys)):
            os_[k] = fn(x, ys[k])
        return out
    return both, left, right


def _result(A):
    return ActiveArray(A.slot, A.vals.copy(layout="C"))


def _array_template(fn, arity, in_place):
    class Template(AbstractTemplate):
        key = fn

        def generic(self, args, kws):
            if kws or len(args) != arity or not any(isinstance(a, ActiveArray) for a in args):
                return None
            if not all(isinstance(a, _OPERAND) for a in args):
                return None
            slots = {a.slot for a in args if isinstance(a, (Active, ActiveArray))}
            if len(slots) != 1:
                return None
            arrays = [a for a in args if isinstance(a, ActiveArray)]
            if len(arrays) == 2 and arrays[0].ndim != arrays[1].ndim:
                return None
            if in_place:
                if not isinstance(args[0], ActiveArray):
                    return None
                return signature(args[0], *args)
            return signature(_result(arrays[0]), *args)
    return Template


_OPERAND = (Active, ActiveArray, types.Float, types.Integer)


def _lower_array_form(fn, arity, in_place):
    loops = [_unary_loop(fn)] if arity == 1 else _binary_loops(fn, in_place)

    def impl(context, builder, sig, args):
        if arity == 1:
            run = loops[0]
        else:
            x, y = (isinstance(t, ActiveArray) for t in sig.args)
            run = loops[0] if x and y else (loops[1] if x else loops[2])
        out = context.compile_internal(builder, run, sig, args)
        return impl_ret_new_ref(context, builder, sig.return_type, out) if not in_place else out
    return impl


def register_array_forms(forms):
    """Give every ``op`` form of a unary or binary row (operators, NumPy ufuncs) a form on
    arrays of actives: element by element, with numbers or actives broadcast; an in-place
    operator (``a += b``) writes into ``a``."""
    arity = {op.name: op.arity for op in optable.OPS}
    for name, fs in forms.items():
        n = arity[name]
        if n == 3:
            continue
        for fn, kind in fs:
            if kind != "op":
                continue
            fname = getattr(fn, "__name__", "")
            in_place = fname.startswith("i") and getattr(operator, fname, None) is fn
            infer_global(fn)(_array_template(fn, n, in_place))
            impl = _lower_array_form(fn, n, in_place)
            if n == 1:
                lower_builtin(fn, ActiveArray)(impl)
            else:
                for sig in ((ActiveArray, ActiveArray), (ActiveArray, types.Any),
                            (types.Any, ActiveArray)):
                    lower_builtin(fn, *sig)(impl)


@intrinsic
def _flat(typingctx, A):
    """A 1-D view of a C-ordered array of actives."""
    if not isinstance(A, ActiveArray):
        return None
    ty = ActiveArray(A.slot, A.vals.copy(ndim=1, layout="C"))

    def codegen(context, builder, sig, args):
        def ravel(A):
            return array_like(A, A.vals.reshape(A.vals.size), A.refs.reshape(A.refs.size))
        return context.compile_internal(builder, ravel, signature(ty, A), args)
    return signature(ty, A), codegen


@overload(np.sum)
def _np_sum(A):
    if isinstance(A, ActiveArray):
        def impl(A):
            xs = _flat(A)
            s = 0.0
            for k in range(len(xs)):
                s += xs[k]
            return s
        return impl


@overload_method(ActiveArray, "sum")
def _sum_method(A):
    return lambda A: np.sum(A)


@overload(np.dot)
def _np_dot(a, b):
    if (isinstance(a, ActiveArray) or isinstance(b, ActiveArray)) and a.ndim == 1 and b.ndim == 1:
        def impl(a, b):
            s = 0.0
            for k in range(len(a)):
                s += a[k] * b[k]
            return s
        return impl
