"""``a * b + c`` rounded once (a fused multiply-add), as PyTorch's compiled CPU kernels
compute it where their compiler contracts the expression (``lerp`` of a small weight:
``fma(w, end - x, x)``).  NumPy has no fused multiply-add; this is LLVM's ``llvm.fma``,
correctly rounded on every machine (an instruction where the CPU has one), signed zeros,
infinities and NaN as IEEE 754's fusedMultiplyAdd gives them."""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from .numba_jit import jit


@intrinsic
def _fma(typingctx, a, b, c):
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        d = ir.DoubleType()
        fn = builder.module.declare_intrinsic("llvm.fma", [d], ir.FunctionType(d, [d, d, d]))
        return builder.call(fn, args)
    return sig, codegen


@jit
def _fma_flat(a, b, c, out):
    for i in range(out.size):
        out[i] = _fma(a[i], b[i], c[i])


def fma(a, b, c):
    """``a * b + c`` rounded once, for float64 arrays or numbers that broadcast together: a
    new float64 array (or 0-d array) of their broadcast shape."""
    a, b, c = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64),
                                  np.asarray(c, np.float64))
    out = np.empty(a.shape)
    _fma_flat(np.ascontiguousarray(a).reshape(-1), np.ascontiguousarray(b).reshape(-1),
              np.ascontiguousarray(c).reshape(-1), out.reshape(-1))
    return out
