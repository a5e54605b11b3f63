"""Tensor element types (``tg.float64``, ``tg.int64``, ``tg.bool``...), the default float
type, devices (``tg.device``: only the CPU holds tensors) and ``tg.Size``."""
from __future__ import annotations

import builtins

import numpy as np


class dtype:
    """A tensor element type (``tg.float64``, ``tg.float32``, ``tg.int64``, ``tg.bool``)."""

    __slots__ = ("name", "np", "is_floating_point", "is_complex", "is_signed", "itemsize")

    def __init__(self, name, np_dtype):
        self.name = name
        self.np = np.dtype(np_dtype)
        self.is_floating_point = self.np.kind == "f"
        self.is_complex = self.np.kind == "c"
        self.is_signed = self.np.kind in "fic"
        self.itemsize = self.np.itemsize

    def __repr__(self):
        return f"tapegrad.{self.name}"

    def __reduce__(self):   # pickled by name: the module's object comes back
        return (_by_name, (self.name,))


float16 = dtype("float16", np.float16)
float32 = dtype("float32", np.float32)
float64 = dtype("float64", np.float64)
int8 = dtype("int8", np.int8)
int16 = dtype("int16", np.int16)
int32 = dtype("int32", np.int32)
int64 = dtype("int64", np.int64)
uint8 = dtype("uint8", np.uint8)
bool_ = dtype("bool", np.bool_)
_DTYPES = {d.np: d for d in (float16, float32, float64, int8, int16, int32, int64, uint8, bool_)}
# PyTorch's other names of the same types (tg.float is float32, as torch.float)
ALIASES = {"half": float16, "float": float32, "double": float64, "short": int16, "int": int32,
           "long": int64, "bool": bool_}
_NAMES = dict({d.name: d for d in _DTYPES.values()}, **ALIASES)


def _by_name(name):
    return _NAMES[name]


def dtype_of(v):
    """The dtype of a tensor value (a Python float is float64)."""
    if v.__class__ is float:
        return float64
    return _DTYPES[v.dtype]


def as_dtype(d):
    """A tapegrad dtype from a dtype, a NumPy dtype or type, or a name (``"float32"``)."""
    if isinstance(d, dtype):
        return d
    if isinstance(d, str) and d in _NAMES:
        return _NAMES[d]
    try:
        return _DTYPES[np.dtype(d)]
    except (TypeError, KeyError):
        raise TypeError(f"not a tapegrad dtype: {d!r}") from None


_default = [float64]


def get_default_dtype() -> dtype:
    """The float type of new tensors made from Python floats and of float factories
    (``zeros``, ``randn``...): float64 unless ``set_default_dtype`` changed it."""
    return _default[0]


def set_default_dtype(d) -> None:
    """Set the float type of factories and of ``tensor(<Python floats>)`` (float64 or
    float32; float16 as PyTorch allows).  Type promotion of ``int / int`` still gives
    float64."""
    d = as_dtype(d)
    if not d.is_floating_point:
        raise TypeError("only floating-point types are supported as the default type")
    _default[0] = d


class finfo:
    """Machine limits of a float dtype, as ``torch.finfo`` (the default dtype's without an
    argument): ``bits``, ``eps``, ``max``, ``min``, ``tiny``/``smallest_normal``,
    ``resolution``, ``dtype`` (its name)."""

    def __init__(self, type=None):  # noqa: A002  (torch's argument name)
        d = get_default_dtype() if type is None else as_dtype(type)
        if not d.is_floating_point:
            raise TypeError("torch.finfo() requires a floating point input type. Use "
                            "torch.iinfo to handle 'torch.finfo'")
        f = np.finfo(d.np)
        self.bits, self.eps, self.max, self.min = f.bits, float(f.eps), float(f.max), float(f.min)
        self.tiny = self.smallest_normal = float(f.smallest_normal)
        self.resolution = 10.0 ** -f.precision
        self.dtype = d.name

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, "
                f"eps={self.eps:g}, smallest_normal={self.smallest_normal:g}, "
                f"tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype, as ``torch.iinfo``: ``bits``, ``max``, ``min``, ``dtype``."""

    def __init__(self, type):  # noqa: A002
        d = as_dtype(type)
        if d.np.kind not in "iub":
            raise TypeError("torch.iinfo() requires an integer input type. Use torch.finfo to "
                            "handle 'torch.iinfo'")
        i = np.iinfo(d.np) if d.np.kind != "b" else None
        self.bits = d.np.itemsize * 8
        self.max, self.min = (int(i.max), int(i.min)) if i is not None else (1, 0)
        self.dtype = d.name

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"


# -- devices ---------------------------------------------------------------------------

_DEVICE_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip",
                 "ve", "fpga", "maia", "xla", "lazy", "vulkan", "mps", "meta", "hpu", "mtia",
                 "privateuseone")


class device:
    """Where a tensor lives, as ``torch.device``: ``tg.device("cpu")``.  Any of PyTorch's
    device names can be named (``tg.device("cuda:0")``), but tapegrad's tensors live on
    the CPU only: moving one elsewhere raises as PyTorch built without CUDA does."""

    __slots__ = ("type", "index")

    def __init__(self, type, index=None):  # noqa: A002  (torch's argument name)
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, (int, np.integer)) and not isinstance(type, bool):
            raise RuntimeError("Cannot access accelerator device when none is available.")
        elif not isinstance(type, str):
            raise TypeError(f"device() received an invalid combination of arguments - got "
                            f"({builtins.type(type).__name__})")
        else:
            name, sep, num = type.partition(":")
            if name not in _DEVICE_TYPES:
                raise RuntimeError(f"Expected one of {', '.join(_DEVICE_TYPES)} device type at "
                                   f"start of device string: {type}")
            if sep:
                if not num.isdigit() or index is not None:
                    raise RuntimeError(f"Invalid device string: '{type}'")
                index = int(num)
            type = name
        if index is not None and index < 0:
            raise RuntimeError("Device index must not be negative")
        self.type, self.index = type, index

    def __repr__(self):
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other):
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self):
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (self.type, self.index))


CPU = device("cpu")
_default_device = [CPU]


def as_device(d):
    """``d`` (a device, a name such as ``"cpu"``, or None for the default) as a CPU device;
    raises as PyTorch without CUDA for any other device."""
    if d is None:
        return _default_device[0]
    if not isinstance(d, device):
        d = device(d)
    if d.type == "cuda":
        raise AssertionError("Torch not compiled with CUDA enabled")
    if d.type != "cpu":
        raise RuntimeError(f"tapegrad tensors live on the CPU only: cannot use device '{d}'")
    return d if d.index is None else CPU


def get_default_device() -> device:
    """The device of new tensors (always the CPU)."""
    return _default_device[0]


def set_default_device(d) -> None:
    """As ``torch.set_default_device``: only the CPU (or None) is accepted."""
    _default_device[0] = as_device(d)


class _Named:
    """A named constant PyTorch passes around: a memory format or a layout (tapegrad's
    tensors have one of each, so these are accepted and mean nothing more)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"tapegrad.{self.name}"


memory_format, layout = _Named, _Named
contiguous_format = _Named("contiguous_format")
preserve_format = _Named("preserve_format")
channels_last = _Named("channels_last")
strided = _Named("strided")
FORMATS = {"contiguous_format": contiguous_format, "preserve_format": preserve_format,
           "channels_last": channels_last, "strided": strided}


class Size(tuple):
    """The shape of a tensor: a tuple that prints as ``tapegrad.Size([2, 3])``."""

    def __repr__(self):
        return f"tapegrad.Size({list(self)})"

    def numel(self):
        """The number of elements."""
        return int(np.prod(self, dtype=np.int64))


# PyTorch's names of the scalar types (``Long`` for int64), as its messages and legacy
# constructors (``LongTensor``) spell them
SCALAR_TYPE_NAMES = {np.dtype(np.float64): "Double", np.dtype(np.float32): "Float",
                     np.dtype(np.float16): "Half", np.dtype(np.int64): "Long",
                     np.dtype(np.int32): "Int", np.dtype(np.int16): "Short",
                     np.dtype(np.int8): "Char", np.dtype(np.uint8): "Byte",
                     np.dtype(np.bool_): "Bool"}


def scalar_type_name(np_dtype) -> str:
    """PyTorch's name of a NumPy dtype's scalar type (``Long`` for int64)."""
    d = np.dtype(np_dtype)
    return SCALAR_TYPE_NAMES.get(d, d.name)
