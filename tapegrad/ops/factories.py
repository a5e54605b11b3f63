"""Tensor creation: ``tensor``, ``as_tensor``, ``from_numpy``, ``zeros``, ``ones``, ``full``,
``empty``, ``eye``, ``arange``, ``linspace``, ``rand``, ``randn``, ``randint``, ``randperm``,
``normal``, the ``*_like`` factories, ``manual_seed``, and PyTorch's legacy constructors
(``tg.Tensor(data)``, ``LongTensor``...).

Every factory takes PyTorch's keywords: ``dtype=``, ``device=`` (the CPU only: see
``core.dtypes.as_device``), ``requires_grad=``, ``size=``; ``layout``/``pin_memory``/
``memory_format``/``generator`` are accepted and have no effect.  Float factories make the
default dtype (``tg.get_default_dtype()``, float64 unless changed).  ``empty`` gives zeros
(PyTorch's values are whatever the memory held).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np

from ..core.dtypes import (SCALAR_TYPE_NAMES, as_device, as_dtype, dtype as _dtype, dtype_of, float64,
                           get_default_dtype, set_default_dtype)
from ..core.tensor import Tensor, check_float, wrap

DType = Optional[Union[_dtype, np.dtype, type, str]]
Number = Union[int, float, bool]
SizeArg = Union[int, Sequence[int]]

class Generator(np.random.Generator):
    """A random generator, as ``torch.Generator``: a NumPy ``Generator`` (PCG64) with
    PyTorch's methods (``manual_seed``, ``seed``, ``initial_seed``, ``get_state``/
    ``set_state``).  Pass it as ``generator=`` to ``rand``, ``randn``, ``randint``,
    ``randperm``, ``normal``; the values are NumPy's draws, not PyTorch's."""

    def __init__(self, device=None):
        as_device(device)
        seed = int(np.random.SeedSequence().entropy % (1 << 63))
        super().__init__(np.random.PCG64(seed))
        self._initial_seed = seed

    def manual_seed(self, seed):
        """Restart the stream from ``seed``; returns the generator."""
        self.bit_generator.state = np.random.PCG64(int(seed)).state
        self._initial_seed = int(seed)
        return self

    def seed(self):
        """Restart from a fresh random seed, which is returned."""
        seed = int(np.random.SeedSequence().entropy % (1 << 63))
        self.manual_seed(seed)
        return seed

    def initial_seed(self):
        """The seed the stream started from."""
        return self._initial_seed

    def get_state(self):
        """The generator's state (NumPy's bit-generator state, a dict)."""
        return self.bit_generator.state

    def set_state(self, state):
        """Restore a state from ``get_state``; returns the generator."""
        self.bit_generator.state = state
        return self

    @property
    def device(self):
        return as_device(None)


_rng = Generator()   # tapegrad's generator (others read it as factories._rng at each call)
default_generator = _rng


def random_source(generator=None):
    """``generator``, or tapegrad's generator when None (the NumPy ``Generator`` to draw from)."""
    return _rng if generator is None else generator


_gen = random_source


def _np_dtype(dtype, default=None):
    if dtype is None:
        return default
    if isinstance(dtype, _dtype):
        return dtype.np
    return as_dtype(dtype).np


def _float(dtype):
    """``dtype`` as NumPy's, or the default float dtype."""
    return _np_dtype(dtype, get_default_dtype().np)


def _make(v, requires_grad, device=None):
    as_device(device)
    if requires_grad:
        check_float(v if isinstance(v, np.ndarray) else np.asarray(v))
    return wrap(v, requires_grad)


def tensor(data: Any, dtype: DType = None, device=None, requires_grad: bool = False,
           pin_memory: bool = False) -> Tensor:
    """A new tensor from a number, a (nested) list or a NumPy array (always a copy).

    Python floats give the default dtype (float64); a float32 array stays float32; Python
    ints give int64, NumPy integers (arrays, scalars, lists of them) keep their dtype."""
    if data.__class__ is float and dtype is None and device is None \
            and get_default_dtype() is float64:   # the scalar fast path
        return wrap(data, requires_grad)
    if isinstance(data, Tensor):
        data = data._value
    try:
        a = np.array(data, dtype=_np_dtype(dtype))
    except (ValueError, TypeError):
        _check_data(data)
        raise
    if a.dtype.kind in "OUSV":
        _check_data(data)
        if a.dtype.kind == "O":   # Python ints past int64
            raise ValueError("Overflow when unpacking long long")
    if dtype is None and a.dtype == np.uint64 and not isinstance(data, np.ndarray):
        raise ValueError("Overflow when unpacking long long")
    if dtype is None and a.dtype.kind == "f" and not isinstance(data, np.ndarray) \
            and not isinstance(data, np.floating):
        a = a.astype(get_default_dtype().np)
    return _make(a, requires_grad, device)


def _check_data(data, dim=0):
    """Raise PyTorch's error for data that is not a (nested) sequence of numbers of one
    shape; returns the shape of good data."""
    if isinstance(data, (bool, int, float, complex, np.number, np.bool_)):
        return ()
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OUSV":
        return data.shape
    if isinstance(data, str):
        raise TypeError(f"new(): invalid data type '{type(data).__name__}'")
    if not isinstance(data, (list, tuple)):
        raise RuntimeError(f"Could not infer dtype of {type(data).__name__}")
    shapes = [_check_data(d, dim + 1) for d in data]
    for s in shapes[1:]:
        if len(s) != len(shapes[0]):
            raise ValueError(f"expected sequence of length {len(shapes[0])} at dim {dim + 1} "
                             f"(got {len(s)})" if not s or not shapes[0] else
                             "setting an array element with a sequence")
        if s != shapes[0]:
            k = next(i for i, (m, n) in enumerate(zip(shapes[0], s)) if m != n)
            raise ValueError(f"expected sequence of length {shapes[0][k]} at dim {dim + 1 + k} "
                             f"(got {s[k]})")
    return (len(data),) + (shapes[0] if shapes else ())


def as_tensor(data: Any, dtype: DType = None, device=None) -> Tensor:
    """``data`` as a tensor without a copy where possible: a tensor of the same dtype is
    returned as it is, a NumPy array of a tapegrad dtype is shared (as ``from_numpy``);
    anything else is copied as by ``tensor``."""
    as_device(device)
    if isinstance(data, Tensor):
        if dtype is None or as_dtype(dtype) is data.dtype:
            return data
        return data.to(as_dtype(dtype))
    if isinstance(data, np.ndarray) and data.ndim and data.dtype in _SHARED_DTYPES:
        return wrap(data if dtype is None else data.astype(_np_dtype(dtype), copy=False))
    return tensor(data, dtype=dtype)


_SHARED_DTYPES = {np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.int16,
                                        np.int32, np.int64, np.uint8, np.bool_)}


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A tensor over ``ndarray``'s memory (no copy), as ``torch.from_numpy``.

    What is shared: the tensor's values are the array itself, so in-place changes on either
    side (``a[0] = 5``, ``t.add_(1)``, ``t[0] = 5`` without grad) show in the other.  A 0-d
    float64 array is copied (0-d float64 tensors hold a Python float) and an op that
    records the tensor in place under autograd gives it a new value (as PyTorch's views,
    tapegrad's recorded in-place results are new arrays)."""
    if not isinstance(ndarray, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(ndarray).__name__})")
    if ndarray.dtype not in _SHARED_DTYPES:
        raise TypeError(f"can't convert np.ndarray of type numpy.{ndarray.dtype.type.__name__}. "
                        "The only supported types are: float64, float32, float16, int64, int32, "
                        "int16, int8, uint8, and bool.")
    return wrap(ndarray)


def is_tensor(obj: Any) -> bool:
    """True when ``obj`` is a tapegrad tensor."""
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:
    """The number of elements of ``input``."""
    return input.numel()


def factory_shape(size, kw=None, name=None):
    """A factory's shape from its ``*size`` (ints or one sequence) or its ``size=``
    keyword (in ``kw``, the factory's other keywords, which must be empty)."""
    if kw:
        keyword = kw.pop("size", None)
        if kw:
            raise TypeError(f"{name}() got an unexpected keyword argument '{next(iter(kw))}'")
        if keyword is not None:
            if size:
                raise TypeError(f"{name}() got multiple values for argument 'size'")
            size = (keyword,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for n in size:
        if not isinstance(n, (int, np.integer)) and not (isinstance(n, Tensor) and n.numel() == 1
                                                         and not n.dtype.is_floating_point):
            raise TypeError(f"expected a tuple of ints as size, but got an element of type "
                            f"{type(n).__name__}")
    size = tuple(int(n) for n in size)
    if any(n < 0 for n in size):
        raise RuntimeError(f"Trying to create tensor with negative dimension "
                           f"{next(n for n in size if n < 0)}: {list(size)}")
    return size


def zeros(*size: SizeArg, dtype: DType = None, device=None, requires_grad: bool = False,
          layout=None, pin_memory: bool = False, out=None, **kw) -> Tensor:
    """A tensor of zeros of the given shape (the default float dtype unless ``dtype``)."""
    return _make(np.zeros(factory_shape(size, kw, "zeros"), _float(dtype)), requires_grad, device)


def ones(*size: SizeArg, dtype: DType = None, device=None, requires_grad: bool = False,
         layout=None, pin_memory: bool = False, out=None, **kw) -> Tensor:
    """A tensor of ones of the given shape."""
    return _make(np.ones(factory_shape(size, kw, "ones"), _float(dtype)), requires_grad, device)


def empty(*size: SizeArg, dtype: DType = None, device=None, requires_grad: bool = False,
          layout=None, pin_memory: bool = False, memory_format=None, out=None, **kw) -> Tensor:
    """A tensor of the given shape whose values are to be written (tapegrad's are zeros)."""
    return _make(np.zeros(factory_shape(size, kw, "empty"), _float(dtype)), requires_grad, device)


def _fill_dtype(fill_value):
    if isinstance(fill_value, (bool, np.bool_)):
        return np.bool_
    if isinstance(fill_value, (int, np.integer)):
        return np.int64
    return get_default_dtype().np


def full(size: SizeArg, fill_value: Number, dtype: DType = None, device=None,
         requires_grad: bool = False, layout=None, pin_memory: bool = False, out=None) -> Tensor:
    """A tensor of the given shape filled with ``fill_value`` (an int gives int64, a bool
    bool, a float the default float dtype, as PyTorch)."""
    if isinstance(fill_value, Tensor):
        fill_value = fill_value.item()
    if not isinstance(fill_value, (bool, int, float, complex, np.number, np.bool_)):
        raise TypeError(f"full(): argument 'fill_value' (position 2) must be Number, not "
                        f"{type(fill_value).__name__}")
    dt = _np_dtype(dtype, _fill_dtype(fill_value))
    return _make(np.full(factory_shape((size,)), fill_value, dt), requires_grad, device)


def eye(n: int, m: Optional[int] = None, dtype: DType = None, device=None,
        requires_grad: bool = False, layout=None, pin_memory: bool = False, out=None) -> Tensor:
    """The ``n`` x ``m`` identity matrix (``m = n`` by default)."""
    if n < 0:
        raise RuntimeError(f"n must be greater or equal to 0, got {n}")
    if m is not None and m < 0:
        raise RuntimeError(f"m must be greater or equal to 0, got {m}")
    return _make(np.eye(n, n if m is None else m, dtype=_float(dtype)), requires_grad, device)


def arange(start: Number = None, end: Optional[Number] = None, step: Number = 1,
           dtype: DType = None, device=None, requires_grad: bool = False, layout=None,
           pin_memory: bool = False, out=None) -> Tensor:
    """Values from ``start`` to ``end`` (exclusive) by ``step`` (``arange(end=4)`` too)."""
    if start is None and end is None:
        raise TypeError("arange() missing 1 required positional arguments: \"end\"")
    if end is None:
        start, end = 0, start
    elif start is None:
        start = 0
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    a = np.arange(start, end, step, dtype=_np_dtype(dtype))
    if dtype is None and a.dtype.kind == "i":   # (PyTorch: int64 from any integer scalars)
        a = a.astype(np.int64)
    elif dtype is None and a.dtype.kind == "f":
        a = a.astype(get_default_dtype().np)
    return _make(a, requires_grad, device)


def linspace(start: Number, end: Number, steps: int, dtype: DType = None, device=None,
             requires_grad: bool = False, layout=None, pin_memory: bool = False, out=None) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive."""
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _make(np.linspace(start, end, steps, dtype=_float(dtype)), requires_grad, device)


def rand(*size: SizeArg, dtype: DType = None, device=None, requires_grad: bool = False,
         generator=None, layout=None, pin_memory: bool = False, out=None, **kw) -> Tensor:
    """Uniform random values in [0, 1) (seeded by ``manual_seed``)."""
    return _make(_gen(generator).random(factory_shape(size, kw, "rand")).astype(_float(dtype)),
                 requires_grad, device)


def randn(*size: SizeArg, dtype: DType = None, device=None, requires_grad: bool = False,
          generator=None, layout=None, pin_memory: bool = False, out=None, **kw) -> Tensor:
    """Standard normal random values (seeded by ``manual_seed``)."""
    shape = factory_shape(size, kw, "randn")
    return _make(_gen(generator).standard_normal(shape).astype(_float(dtype)),
                 requires_grad, device)


def randint(*args, size=None, dtype: DType = None, device=None, requires_grad: bool = False,
            generator=None, layout=None, pin_memory: bool = False, out=None) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``: random integers in
    [low, high) (int64 unless ``dtype``)."""
    if size is None and args and isinstance(args[-1], (tuple, list)):
        args, size = args[:-1], args[-1]
    if size is None or len(args) not in (1, 2):
        raise TypeError("randint() received an invalid combination of arguments: expected "
                        "(int high, tuple of ints size) or (int low, int high, tuple of ints size)")
    low, high = (0, args[0]) if len(args) == 1 else args
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} "
                           f">= to={high}")
    v = _gen(generator).integers(low, high, factory_shape((size,)), dtype=np.int64)
    return _make(v.astype(_np_dtype(dtype, np.int64)), requires_grad, device)


def randperm(n: int, dtype: DType = None, device=None, requires_grad: bool = False,
             generator=None, layout=None, pin_memory: bool = False, out=None) -> Tensor:
    """A random permutation of ``0 .. n-1`` (int64 unless ``dtype``)."""
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    return _make(_gen(generator).permutation(n).astype(_np_dtype(dtype, np.int64)), requires_grad,
                 device)


def normal(mean, std=1.0, size=None, *, generator=None, dtype: DType = None, device=None,
           requires_grad: bool = False, layout=None, pin_memory: bool = False, out=None) -> Tensor:
    """Normal random values of ``mean`` and ``std`` (numbers or tensors, broadcast), or of
    ``size`` for number arguments.  The result does not record a gradient to ``mean`` or
    ``std`` (PyTorch's is zero)."""
    as_device(device)
    m = mean._value if isinstance(mean, Tensor) else mean
    s = std._value if isinstance(std, Tensor) else std
    if np.any(np.asarray(s) < 0):
        raise RuntimeError("normal expects all elements of std >= 0.0")
    if size is not None:
        shape = factory_shape((size,))
    else:
        if not isinstance(mean, Tensor) and not isinstance(std, Tensor):
            raise TypeError("normal() received an invalid combination of arguments: numbers "
                            "for mean and std need a size")
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
    dt = next((t.dtype.np for t in (mean, std) if isinstance(t, Tensor)), None)
    v = np.asarray(m + s * _gen(generator).standard_normal(shape))
    v = v.astype(_np_dtype(dtype, dt or _float(None)))
    return _make(v, requires_grad)


def manual_seed(seed: int) -> Generator:
    """Seed tapegrad's random generator (``rand``, ``randn``, ``randint``, ...); returns it
    (``tg.default_generator``, a ``tg.Generator``: also a NumPy ``Generator``)."""
    return _rng.manual_seed(seed)


def seed() -> int:
    """Seed tapegrad's generator from fresh entropy; returns the seed."""
    return _rng.seed()


def initial_seed() -> int:
    """The seed tapegrad's generator started from."""
    return _rng.initial_seed()


def get_rng_state():
    """The state of tapegrad's generator (for ``set_rng_state``)."""
    return _rng.get_state()


def set_rng_state(new_state) -> None:
    """Restore tapegrad's generator to a state from ``get_rng_state``."""
    _rng.set_state(new_state)


def _like(t, dtype, name="zeros_like"):
    if not isinstance(t, Tensor):
        raise TypeError(f"{name}(): argument 'input' (position 1) must be Tensor, not "
                        f"{type(t).__name__}")
    return dtype_of(t._value).np if dtype is None else _np_dtype(dtype)


def zeros_like(input: Tensor, dtype: DType = None, device=None, requires_grad: bool = False,
               layout=None, memory_format=None) -> Tensor:
    """Zeros with the shape (and dtype) of ``input``."""
    dt = _like(input, dtype)
    return _make(np.zeros(input.shape, dt), requires_grad, device)


def ones_like(input: Tensor, dtype: DType = None, device=None, requires_grad: bool = False,
              layout=None, memory_format=None) -> Tensor:
    """Ones with the shape (and dtype) of ``input``."""
    dt = _like(input, dtype, "ones_like")
    return _make(np.ones(input.shape, dt), requires_grad, device)


def empty_like(input: Tensor, dtype: DType = None, device=None, requires_grad: bool = False,
               layout=None, memory_format=None) -> Tensor:
    """A tensor like ``input`` whose values are to be written (tapegrad's are zeros)."""
    return zeros_like(input, dtype, device, requires_grad)


def full_like(input: Tensor, fill_value: Number, dtype: DType = None, device=None,
              requires_grad: bool = False, layout=None, memory_format=None) -> Tensor:
    """``fill_value`` with the shape (and dtype) of ``input``."""
    dt = _like(input, dtype, "full_like")
    return _make(np.full(input.shape, fill_value, dt), requires_grad, device)


def _random_like(fn, input, dtype, device, requires_grad, name):
    dt = _like(input, dtype, name)
    if np.dtype(dt).kind != "f":
        raise NotImplementedError(f"\"check_uniform_bounds\" not implemented for "
                                  f"'{_LEGACY_NAMES[np.dtype(dt)]}'")
    return _make(fn(tuple(input.shape)).astype(dt), requires_grad, device)


def rand_like(input: Tensor, dtype: DType = None, device=None, requires_grad: bool = False,
              layout=None, memory_format=None) -> Tensor:
    """Uniform random values in [0, 1) with the shape (and dtype) of ``input``."""
    return _random_like(_rng.random, input, dtype, device, requires_grad, "rand_like")


def randn_like(input: Tensor, dtype: DType = None, device=None, requires_grad: bool = False,
               layout=None, memory_format=None) -> Tensor:
    """Standard normal values with the shape (and dtype) of ``input``."""
    return _random_like(_rng.standard_normal, input, dtype, device, requires_grad, "randn_like")


def randint_like(input: Tensor, low: int = 0, high: Optional[int] = None, dtype: DType = None,
                 device=None, requires_grad: bool = False, layout=None,
                 memory_format=None) -> Tensor:
    """Random integers in [low, high) with the shape (and dtype) of ``input``."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), dtype=dtype or input.dtype, device=device,
                   requires_grad=requires_grad)


# -- PyTorch's legacy constructors ---------------------------------------------------------

_LEGACY_NAMES = SCALAR_TYPE_NAMES


def legacy_new(np_dtype, *args, device=None):
    """``torch.Tensor(...)``/``torch.LongTensor(...)``: from data (a sequence or an array,
    converted to ``np_dtype``), or uninitialised (zeros) of the given sizes."""
    as_device(device)
    if not args:
        return wrap(np.zeros(0, np_dtype))
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        data = args[0]
        if isinstance(data, Tensor):
            return data if data.dtype.np == np_dtype else data.to(dtype_of(np.zeros(0, np_dtype)))
        if isinstance(data, (float, complex, bool, np.number)):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        if isinstance(data, np.ndarray):
            return wrap(np.array(data, dtype=np_dtype))
        _check_data(data)
        return wrap(np.array(data, dtype=np_dtype))
    return wrap(np.zeros(factory_shape(args), np_dtype))


def _legacy(np_dtype, name):
    def constructor(*args, device=None):
        return legacy_new(np_dtype, *args, device=device)
    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = (f"``torch.{name}``: a {np.dtype(np_dtype).name} tensor from data, or "
                           "of the given sizes (zeros).")
    return constructor


LEGACY_CONSTRUCTORS = {f"{n}Tensor": _legacy(d, f"{n}Tensor") for d, n in _LEGACY_NAMES.items()}


def set_default_tensor_type(t) -> None:
    """The legacy ``torch.set_default_tensor_type(torch.DoubleTensor)`` (or its name):
    ``set_default_dtype`` of that type (a CPU float type)."""
    name = t if isinstance(t, str) else getattr(t, "__name__", "")
    name = name[len("torch."):] if name.startswith("torch.") else name
    kinds = {f"{n}Tensor": d for d, n in _LEGACY_NAMES.items()}
    if name not in kinds:
        raise TypeError(f"invalid type object: only floating-point types are supported as the "
                        f"default type (got {t!r})")
    set_default_dtype(dtype_of(np.zeros(0, kinds[name])))


_EMPTY = np.zeros(0)   # tg.Tensor(): nothing can be written into it
_NO_DATA = object()


def tensor_init(self, data=_NO_DATA, *sizes, device=None):
    """``tg.Tensor(data)`` / ``tg.Tensor(2, 3)`` / ``tg.Tensor()``: a tensor of the default
    float dtype, as PyTorch's legacy constructor (``tg.Tensor(t)`` is ``t``'s value).

    Installed as ``Tensor.__init__`` (``torch_api.METHODS``).  Every tensor tapegrad makes
    itself is made with ``object.__new__(Tensor)``, which skips it (a Python ``__init__``
    per recorded op would cost 15-25% of a scalar op)."""
    if data is _NO_DATA:
        self._value = _EMPTY
        self._tape = None
        if device is not None:
            as_device(device)
        return
    if not sizes and isinstance(data, Tensor):
        v = data._value
    else:
        v = legacy_new(get_default_dtype().np, data, *sizes, device=device)._value
    self._value, self._tape, self._grad, self._hooks = v, None, None, None


# -- window functions (PyTorch's: periodic by default, the symmetric window of N + 1 points
# without its last one)
def _window(name, symmetric):
    def window(window_length, periodic=True, *args, dtype=None, layout=None, device=None,
               requires_grad=False, **kw):
        if window_length < 0:
            raise RuntimeError(f"{name} requires non-negative window_length, got "
                               f"window_length={window_length}")
        if window_length <= 1:
            v = np.ones(window_length)
        else:
            m = window_length + 1 if periodic else window_length
            v = symmetric(m, *args, **kw)[:window_length]
        return _make(np.asarray(v, _float(dtype)), requires_grad, device)
    window.__name__ = name
    window.__doc__ = f"PyTorch's ``{name}`` (periodic by default)."
    return window


def _hamming(m, alpha=0.54, beta=0.46):
    return alpha - beta * np.cos(2.0 * np.pi * np.arange(m) / (m - 1))


WINDOWS = {"hann_window": _window("hann_window", np.hanning),
           "hamming_window": _window("hamming_window", _hamming),
           "blackman_window": _window("blackman_window", np.blackman),
           "bartlett_window": _window("bartlett_window", np.bartlett),
           "kaiser_window": _window("kaiser_window", lambda m, beta=12.0: np.kaiser(m, beta))}


FUNCTIONS = {
    "tensor": tensor, "as_tensor": as_tensor, "from_numpy": from_numpy, "is_tensor": is_tensor,
    "numel": numel, "zeros": zeros, "ones": ones, "empty": empty, "full": full, "eye": eye,
    "arange": arange, "linspace": linspace, "rand": rand, "randn": randn, "randint": randint,
    "randperm": randperm, "normal": normal, "manual_seed": manual_seed, "seed": seed,
    "initial_seed": initial_seed, "get_rng_state": get_rng_state, "set_rng_state": set_rng_state,
    "Generator": Generator, "default_generator": default_generator,
    "set_default_tensor_type": set_default_tensor_type,
    "zeros_like": zeros_like, "ones_like": ones_like, "empty_like": empty_like,
    "full_like": full_like, "rand_like": rand_like, "randn_like": randn_like,
    "randint_like": randint_like, **LEGACY_CONSTRUCTORS, **WINDOWS,
}
