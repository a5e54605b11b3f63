"""Active scalars and arrays inside Numba's nopython mode, and the tape they record onto.

An *active* scalar is a ``(value, ref)`` pair passed by value (a Numba ``StructModel``):
``ref >= 0`` is the tape entry that computed it, ``ref < 0`` the constant
``consts[-ref - 1]``, exactly as a reference in a ``tapegrad.Tape``.  Every op on actives
appends one entry to a tape whose header (length, capacity, buffer addresses) lives in a
process-global cell: generated code names the cell by its symbol
(``llvmlite.binding.add_symbol``), so compiled functions can be cached across processes.

There is one cell per *slot*, and the slot is part of the type (``Active(slot)``): a
function compiled for slot 1 records onto cell 1 and never touches cell 0, so threads
record at once, each on its own slot, with no lock and no thread-local lookup per op.

The append is emitted inline (an ``@intrinsic``-style lowering, ~3 ns an op); the buffers
grow on a cold path that calls back into Python (once per doubling).
"""
from __future__ import annotations

import ctypes
import hashlib
from pathlib import Path

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import typeof, types
from numba.core import cgutils
from numba.core.imputils import lower_cast
from numba.core.typeconv import Conversion
from numba.extending import (NativeValue, box, make_attribute_wrapper, models, register_model,
                             typeof_impl, unbox)

from ..core.tape import ARG, LEAF

N_SLOTS = 64          # recording cells: slot 0 for the calling thread, the rest for pools
HEADER_WORDS = 16 + 2 * 256   # n, cap, op*, a*, b*, val*, nconst, capconst, consts*, ..., cache
_N, _CAP, _OP, _A, _B, _VAL, _NC, _CAPC, _CONSTS, _FAILED, _COMPARES, _READS, _READ_REF = range(13)
_CACHE_SIZE = 256      # constant dedup: a direct-mapped cache of recent constants
_CACHE_BITS, _CACHE_REF = 16, 16 + _CACHE_SIZE
MAX_ENTRIES = (1 << 31) - 1   # references are int32

# A compiled function is cached against the signature of its arguments: the version of the
# jit layer's code goes into the type names, so a cache written by other overloads misses.
_HERE = Path(__file__).resolve().parent
VERSION = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(_HERE.glob("*.py")))).hexdigest()[:10]


class SlotTape:
    """The buffers one recording cell points to (NumPy arrays, reused between calls)."""

    def __init__(self, slot):
        self.slot = slot
        self.header = np.zeros(HEADER_WORDS, np.int64)
        self.op = np.zeros(0, np.int8)
        self.a = np.zeros(0, np.int32)
        self.b = np.zeros(0, np.int32)
        self.val = np.zeros(0, np.float64)
        self.consts = np.zeros(0, np.float64)
        self.adj = np.zeros(0, np.float64)       # the sweep's adjoints, zeroed as read
        self.reached = np.zeros(0, np.uint8)
        llvm.add_symbol(symbol(slot), self.header.ctypes.data)   # buffers: at the first start

    def grow_entries(self, need=0):
        n = int(self.header[_N])
        cap = max(2 * len(self.op), need, 1 << 12)
        if n >= MAX_ENTRIES:
            self.fail(MAX_ENTRIES)
            return
        cap = min(cap, MAX_ENTRIES + 1)
        for name in ("op", "a", "b", "val"):
            old = getattr(self, name)
            new = np.empty(cap, old.dtype)
            new[:n] = old[:n]
            setattr(self, name, new)
        h = self.header
        h[_OP], h[_A], h[_B], h[_VAL] = (self.op.ctypes.data, self.a.ctypes.data,
                                         self.b.ctypes.data, self.val.ctypes.data)
        h[_CAP] = cap

    def fail(self, why):
        """Compiled code cannot raise from the cold path: the recording goes on into entries
        that are thrown away, and the caller raises (``check``)."""
        self.header[_FAILED] = why
        self.header[_N] = 0
        self.header[_NC] = 1

    def check(self):
        why = int(self.header[_FAILED])
        if why:
            self.header[_FAILED] = 0
            if why == MAX_ENTRIES:
                raise RuntimeError(f"tg.jit: the recording grew past {MAX_ENTRIES} entries "
                                   "(tape references are int32); record less per call")
            raise MemoryError("tg.jit: no memory to grow the tape")

    def grow_consts(self, need=0):
        n = int(self.header[_NC])
        if n >= MAX_ENTRIES:
            self.fail(MAX_ENTRIES)
            return
        cap = max(2 * len(self.consts), need, 1 << 8)
        new = np.empty(cap, np.float64)
        new[:n] = self.consts[:n]
        self.consts = new
        self.header[_CONSTS] = new.ctypes.data
        self.header[_CAPC] = cap

    def start(self, leaves):
        """Begin a recording whose first entries are the leaves with values ``leaves``."""
        h = self.header
        k = len(leaves)
        h[_N] = 0
        if k >= len(self.op):
            self.grow_entries(k + 1)
        if not len(self.consts):
            self.grow_consts()
        self.op[:k] = LEAF
        self.a[:k] = -1
        self.b[:k] = -1
        self.val[:k] = leaves
        h[_N] = k
        h[_READS] = 0
        self.consts[0] = 0.0     # consts[0] = 0.0: the unused operand of unary ops
        h[_NC] = 1
        h[_CACHE_REF:_CACHE_REF + _CACHE_SIZE] = 0

    def release(self):
        """Drop the buffers (they are allocated again, small, by the next recording)."""
        self.header[:_CACHE_BITS] = 0
        self.op = np.zeros(0, np.int8)
        self.a = np.zeros(0, np.int32)
        self.b = np.zeros(0, np.int32)
        self.val = np.zeros(0, np.float64)
        self.consts = np.zeros(0, np.float64)
        self.adj = np.zeros(0, np.float64)
        self.reached = np.zeros(0, np.uint8)

    def record_comparisons(self, on):
        """While on, comparisons are recorded too (value 1/0), as the eager engine records
        them: a tape for replay needs them as guards."""
        self.header[_COMPARES] = int(on)

    @property
    def reads(self):
        """(how many, the reference of the last): values read out of actives while
        comparisons were recorded (``value(x)``, ``math.floor(x)``)."""
        return int(self.header[_READS]), int(self.header[_READ_REF])

    @property
    def n(self):
        return int(self.header[_N])

    @property
    def n_consts(self):
        return int(self.header[_NC])

    def sweep_buffers(self):
        n = self.n
        if len(self.adj) < n:
            self.adj = np.zeros(max(n, 2 * len(self.adj)), np.float64)
            self.reached = np.zeros(len(self.adj), np.uint8)
        return self.adj, self.reached


def symbol(slot):
    return f"tapegrad_jit_tape_{slot}"


SLOTS = []


@ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_int64)
def _grow(slot, what):
    """Called from compiled code (with the GIL taken by ctypes) when a buffer is full."""
    t = SLOTS[slot]
    try:
        if what == 0:
            t.grow_entries()
        else:
            t.grow_consts()
    except MemoryError:
        t.fail(1)


llvm.add_symbol("tapegrad_jit_grow", ctypes.cast(_grow, ctypes.c_void_p).value)
SLOTS.extend(SlotTape(s) for s in range(N_SLOTS))


# -- types --------------------------------------------------------------------------------
class Active(types.Type):
    """A float64 that records: (value, reference) recorded onto cell ``slot``."""

    def __init__(self, slot):
        self.slot = slot
        super().__init__(name=f"tapegrad.active[{slot}, {VERSION}]")

    def can_convert_from(self, typingctx, other):
        if isinstance(other, (types.Float, types.Integer, types.Boolean)):
            return Conversion.safe

    def unify(self, typingctx, other):
        if isinstance(other, (types.Float, types.Integer, types.Boolean)):
            return self


class ActiveArray(types.IterableType):
    """An array of actives: a float64 array of values and an int64 array of references of
    the same shape (``vals``, ``refs``)."""

    def __init__(self, slot, vals):
        self.slot = slot
        self.vals = vals
        self.refs = vals.copy(dtype=types.int64)
        super().__init__(name=f"tapegrad.active_array[{slot}, {vals}, {VERSION}]")

    @property
    def ndim(self):
        return self.vals.ndim

    @property
    def dtype(self):
        return Active(self.slot)

    @property
    def iterator_type(self):
        return ActiveArrayIter(self)


class ActiveArrayIter(types.SimpleIteratorType):
    """``for v in a``: the actives of a 1-D array of actives (rows of an n-D one)."""

    def __init__(self, array):
        self.array = array
        item = (Active(array.slot) if array.ndim == 1 else
                ActiveArray(array.slot, array.vals.copy(
                    ndim=array.ndim - 1, layout="C" if array.vals.layout == "C" else "A")))
        super().__init__(f"iter({array})", item)


@register_model(Active)
class ActiveModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("value", types.float64), ("ref", types.int64)])


@register_model(ActiveArray)
class ActiveArrayModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("vals", fe_type.vals), ("refs", fe_type.refs)])


@register_model(ActiveArrayIter)
class ActiveArrayIterModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("array", fe_type.array),
                                        ("index", types.EphemeralPointer(types.intp))])


make_attribute_wrapper(Active, "value", "value")
make_attribute_wrapper(Active, "ref", "ref")
make_attribute_wrapper(ActiveArray, "vals", "vals")
make_attribute_wrapper(ActiveArray, "refs", "refs")


# -- Python side: arguments in, results out -------------------------------------------------
class ScalarArg:
    """An active scalar argument (a leaf) as passed to compiled code."""
    __slots__ = ("value", "ref", "slot")

    def __init__(self, value, ref, slot):
        self.value, self.ref, self.slot = value, ref, slot


class ArrayArg:
    """An array of actives (leaves) as passed to compiled code."""
    __slots__ = ("vals", "refs", "slot")

    def __init__(self, vals, refs, slot):
        self.vals, self.refs, self.slot = vals, refs, slot


class ScalarResult:
    """An active scalar returned by compiled code: its value and tape reference."""
    __slots__ = ("value", "ref")

    def __init__(self, value, ref):
        self.value, self.ref = value, ref

    def __repr__(self):
        return f"ScalarResult({self.value!r}, ref={self.ref})"


class ArrayResult:
    """An array of actives returned by compiled code."""
    __slots__ = ("vals", "refs")

    def __init__(self, vals, refs):
        self.vals, self.refs = vals, refs


# Numba types arguments of these classes at every call: the types are made once
_TYPES = {}


@typeof_impl.register(ScalarArg)
def _typeof_scalar(val, c):
    t = _TYPES.get(val.slot)
    if t is None:
        t = _TYPES[val.slot] = Active(val.slot)
    return t


@typeof_impl.register(ArrayArg)
def _typeof_array(val, c):
    key = (val.slot, val.vals.ndim)     # (the values are always a C-ordered float64 copy)
    t = _TYPES.get(key)
    if t is None:
        t = _TYPES[key] = ActiveArray(val.slot, typeof(val.vals, c.purpose))
    return t


@unbox(Active)
def _unbox_scalar(typ, obj, c):
    out = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    v = c.pyapi.object_getattr_string(obj, "value")
    r = c.pyapi.object_getattr_string(obj, "ref")
    out.value = c.pyapi.float_as_double(v)
    out.ref = c.pyapi.long_as_longlong(r)
    c.pyapi.decref(v)
    c.pyapi.decref(r)
    return NativeValue(out._getvalue(), is_error=cgutils.is_not_null(c.builder, c.pyapi.err_occurred()))


@unbox(ActiveArray)
def _unbox_array(typ, obj, c):
    out = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    v = c.pyapi.object_getattr_string(obj, "vals")
    r = c.pyapi.object_getattr_string(obj, "refs")
    nv = c.unbox(typ.vals, v)
    nr = c.unbox(typ.refs, r)
    out.vals = nv.value
    out.refs = nr.value
    c.pyapi.decref(v)
    c.pyapi.decref(r)
    err = c.builder.or_(nv.is_error, nr.is_error)
    return NativeValue(out._getvalue(), is_error=err)


@box(Active)
def _box_scalar(typ, val, c):
    s = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val)
    v = c.pyapi.float_from_double(s.value)
    r = c.pyapi.long_from_longlong(s.ref)
    cls = c.pyapi.unserialize(c.pyapi.serialize_object(ScalarResult))
    res = c.pyapi.call_function_objargs(cls, (v, r))
    for o in (v, r, cls):
        c.pyapi.decref(o)
    return res


@box(ActiveArray)
def _box_array(typ, val, c):
    s = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val)
    c.context.nrt.incref(c.builder, typ.vals, s.vals)
    c.context.nrt.incref(c.builder, typ.refs, s.refs)
    v = c.box(typ.vals, s.vals)
    r = c.box(typ.refs, s.refs)
    cls = c.pyapi.unserialize(c.pyapi.serialize_object(ArrayResult))
    res = c.pyapi.call_function_objargs(cls, (v, r))
    for o in (v, r, cls):
        c.pyapi.decref(o)
    return res


# -- code generation: the inline append -----------------------------------------------------
_I64 = ir.IntType(64)
_I32 = ir.IntType(32)
_I8 = ir.IntType(8)
_F64 = ir.DoubleType()


def _header(builder, slot):
    mod = builder.module
    name = symbol(slot)
    g = mod.globals.get(name)
    if g is None:
        g = ir.GlobalVariable(mod, ir.ArrayType(_I64, HEADER_WORDS), name)
        g.linkage = "external"
    return g


def _word(builder, g, k):
    return builder.gep(g, [_I64(0), _I64(k)], inbounds=True)


def _grow_fn(builder):
    mod = builder.module
    fn = mod.globals.get("tapegrad_jit_grow")
    if fn is None:
        fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [_I64, _I64]), "tapegrad_jit_grow")
    return fn


def _buffer(builder, g, k, ty):
    return builder.inttoptr(builder.load(_word(builder, g, k)), ty.as_pointer())


def emit_append(builder, slot, code, ra, rb, value):
    """Append the entry (code, ra, rb, value) to cell ``slot``; returns its index (i64)."""
    g = _header(builder, slot)
    pn = _word(builder, g, _N)
    n = builder.load(pn)
    full = builder.icmp_signed(">=", n, builder.load(_word(builder, g, _CAP)))
    with builder.if_then(full, likely=False):
        builder.call(_grow_fn(builder), [_I64(slot), _I64(0)])
    n = builder.load(pn)       # (0 after a failed growth: see SlotTape.fail)
    builder.store(_I8(code), builder.gep(_buffer(builder, g, _OP, _I8), [n]))
    builder.store(builder.trunc(ra, _I32), builder.gep(_buffer(builder, g, _A, _I32), [n]))
    builder.store(builder.trunc(rb, _I32), builder.gep(_buffer(builder, g, _B, _I32), [n]))
    builder.store(value, builder.gep(_buffer(builder, g, _VAL, _F64), [n]))
    builder.store(builder.add(n, _I64(1)), pn)
    return n


def emit_compare(builder, slot, code, ra, rb, value):
    """Append comparison entry (code, ra, rb, value) when the cell records comparisons;
    ``ra``/``rb`` are thunks (a constant operand is pushed only then)."""
    g = _header(builder, slot)
    on = builder.icmp_signed("!=", builder.load(_word(builder, g, _COMPARES)), _I64(0))
    with builder.if_then(on, likely=False):
        emit_append(builder, slot, code, ra(), rb(), value)


def emit_read(builder, slot, ref):
    """Note that the value of reference ``ref`` left the tape (``value(x)``), when the cell
    records comparisons (a replay of such a recording is right only at its own point)."""
    g = _header(builder, slot)
    on = builder.icmp_signed("!=", builder.load(_word(builder, g, _COMPARES)), _I64(0))
    with builder.if_then(on, likely=False):
        p = _word(builder, g, _READS)
        builder.store(builder.add(builder.load(p), _I64(1)), p)
        builder.store(ref, _word(builder, g, _READ_REF))


def emit_constant(builder, slot, value):
    """The reference (< 0) of constant ``value`` in cell ``slot``: a direct-mapped cache of
    256 recent constants keeps a loop's literals from being pushed at every iteration."""
    g = _header(builder, slot)
    bits = builder.bitcast(value, _I64)
    h = builder.lshr(builder.mul(bits, _I64(0x9E3779B97F4A7C15 - (1 << 64))), _I64(56))
    pbits = builder.gep(g, [_I64(0), builder.add(h, _I64(_CACHE_BITS))], inbounds=True)
    pref = builder.gep(g, [_I64(0), builder.add(h, _I64(_CACHE_REF))], inbounds=True)
    cached = builder.load(pref)
    hit = builder.and_(builder.icmp_signed("!=", cached, _I64(0)),
                       builder.icmp_signed("==", builder.load(pbits), bits))
    with builder.if_else(hit, likely=True) as (then, otherwise):
        with then:
            bb_hit = builder.block
        with otherwise:
            pn = _word(builder, g, _NC)
            n = builder.load(pn)
            full = builder.icmp_signed(">=", n, builder.load(_word(builder, g, _CAPC)))
            with builder.if_then(full, likely=False):
                builder.call(_grow_fn(builder), [_I64(slot), _I64(1)])
            n = builder.load(pn)
            builder.store(value, builder.gep(_buffer(builder, g, _CONSTS, _F64), [n]))
            builder.store(builder.add(n, _I64(1)), pn)
            fresh = builder.sub(_I64(-1), n)
            builder.store(bits, pbits)
            builder.store(fresh, pref)
            bb_miss = builder.block
    ref = builder.phi(_I64)
    ref.add_incoming(cached, bb_hit)
    ref.add_incoming(fresh, bb_miss)
    return ref


def make_active(context, builder, ty, value, ref):
    out = cgutils.create_struct_proxy(ty)(context, builder)
    out.value = value
    out.ref = ref
    return out._getvalue()


def active_parts(context, builder, ty, val):
    s = cgutils.create_struct_proxy(ty)(context, builder, value=val)
    return s.value, s.ref


def as_double(context, builder, fromty, val):
    return context.cast(builder, val, fromty, types.float64)


@lower_cast(types.Float, Active)
@lower_cast(types.Integer, Active)
@lower_cast(types.Boolean, Active)
def _number_to_active(context, builder, fromty, toty, val):
    v = as_double(context, builder, fromty, val)
    return make_active(context, builder, toty, v, emit_constant(builder, toty.slot, v))


@lower_cast(types.IntegerLiteral, Active)
@lower_cast(types.BooleanLiteral, Active)
def _literal_to_active(context, builder, fromty, toty, val):
    v = context.get_constant(types.float64, float(fromty.literal_value))
    return make_active(context, builder, toty, v, emit_constant(builder, toty.slot, v))


ARG_CODE = ARG
