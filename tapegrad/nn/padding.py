"""Padding modules (PyTorch's ``nn.ConstantPad1d`` ... ``nn.CircularPad3d``): each is
``functional.pad`` with its mode over the last 1, 2 or 3 dims, the padding given as one int
for every side or as PyTorch's tuple (last dim first)."""
from __future__ import annotations

from . import functional as F
from .modules import Module

__all__ = [f"{kind}Pad{n}d" for kind in ("Constant", "Zero", "Reflection", "Replication",
                                         "Circular") for n in (1, 2, 3)]


class _Pad(Module):
    mode = "constant"
    dims = 1

    def __init__(self, padding, value=0.0):
        super().__init__()
        self.padding = (padding,) * (2 * self.dims) if isinstance(padding, int) else \
            tuple(padding)
        if len(self.padding) != 2 * self.dims:
            raise ValueError(f"{type(self).__name__}: expected padding of {2 * self.dims} "
                             f"values, got {self.padding}")
        self.value = value

    def forward(self, input):
        if self.mode == "constant":
            return F.pad(input, self.padding, value=self.value)
        return F.pad(input, self.padding, mode=self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding, value):
        super().__init__(padding, value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class _ZeroPad(_Pad):
    def __init__(self, padding):
        super().__init__(padding, 0.0)


def _kind(base, name, mode, dims):
    return type(name, (base,), {"mode": mode, "dims": dims, "__module__": __name__,
                                "__doc__": f"``functional.pad`` of the last {dims} dim(s), "
                                           f"mode ``{mode}``."})


ConstantPad1d, ConstantPad2d, ConstantPad3d = (_kind(_ConstantPad, f"ConstantPad{n}d",
                                                     "constant", n) for n in (1, 2, 3))
ZeroPad1d, ZeroPad2d, ZeroPad3d = (_kind(_ZeroPad, f"ZeroPad{n}d", "constant", n)
                                   for n in (1, 2, 3))
ReflectionPad1d, ReflectionPad2d, ReflectionPad3d = (
    _kind(_Pad, f"ReflectionPad{n}d", "reflect", n) for n in (1, 2, 3))
ReplicationPad1d, ReplicationPad2d, ReplicationPad3d = (
    _kind(_Pad, f"ReplicationPad{n}d", "replicate", n) for n in (1, 2, 3))
CircularPad1d, CircularPad2d, CircularPad3d = (_kind(_Pad, f"CircularPad{n}d", "circular", n)
                                               for n in (1, 2, 3))
