"""The ``tg.cuda``, ``tg.special``, ``tg.linalg``, ``tg.testing`` and ``tg.backends``
namespaces: modules (``types.ModuleType``) named as PyTorch's submodules, over functions of
this layer.  ``tapegrad/__init__.py``
registers them in ``sys.modules``, so ``import tapegrad.special`` and ``from tapegrad.linalg
import cross`` work as with ``torch``."""
from __future__ import annotations

import types

import numpy as np

from ..core.tensor import Tensor
from . import special as special_rows
from .torch_api import FUNCTIONS, LINALG


# -- tg.cuda: the questions PyTorch programs ask about CUDA, answered as by a PyTorch built
# without it (tapegrad's tensors live on the CPU)

def is_available() -> bool:
    """False: no CUDA device can hold a tapegrad tensor."""
    return False


def device_count() -> int:
    """0."""
    return 0


def manual_seed(seed: int) -> None:
    """Does nothing (no CUDA generator), as in PyTorch without CUDA."""


def manual_seed_all(seed: int) -> None:
    """Does nothing (no CUDA generator), as in PyTorch without CUDA."""


def empty_cache() -> None:
    """Does nothing (no CUDA memory)."""


def is_initialized() -> bool:
    """False."""
    return False


def current_device() -> int:
    """Raises as PyTorch built without CUDA."""
    raise AssertionError("Torch not compiled with CUDA enabled")


def synchronize(device=None) -> None:
    """Raises as PyTorch built without CUDA."""
    raise AssertionError("Torch not compiled with CUDA enabled")


# -- tg.testing: assert_close as PyTorch's (its default tolerances by dtype, its messages)

_TOLERANCES = {"float16": (1e-3, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}


def assert_close(actual, expected, *, rtol=None, atol=None, equal_nan=False, check_dtype=True,
                 msg=None, **kw):
    """Raise AssertionError unless ``actual`` and ``expected`` (tensors or numbers) have the
    same shape (and dtype) and every element is within ``atol + rtol * |expected|``."""
    a_t, e_t = isinstance(actual, Tensor), isinstance(expected, Tensor)
    a = actual.detach().numpy() if a_t else np.asarray(actual)
    e = expected.detach().numpy() if e_t else np.asarray(expected)
    if a_t and e_t:
        if tuple(actual.shape) != tuple(expected.shape):
            raise AssertionError(msg or f"The values for attribute 'shape' do not match: "
                                 f"torch.Size({list(actual.shape)}) != "
                                 f"torch.Size({list(expected.shape)}).")
        if check_dtype and actual.dtype is not expected.dtype:
            raise AssertionError(msg or f"The values for attribute 'dtype' do not match: "
                                 f"torch.{actual.dtype.name} != torch.{expected.dtype.name}.")
    elif np.shape(a) != np.shape(e):
        raise AssertionError(msg or f"The values for attribute 'shape' do not match: "
                             f"{np.shape(a)} != {np.shape(e)}.")
    name = (actual.dtype.name if a_t else "float64" if a.dtype.kind == "f" else a.dtype.name)
    dr, da = _TOLERANCES.get(name, (0.0, 0.0))
    rtol, atol = (dr if rtol is None else rtol), (da if atol is None else atol)
    a64, e64 = a.astype(np.float64), e.astype(np.float64)
    with np.errstate(all="ignore"):
        diff = np.abs(a64 - e64)
        ok = (diff <= atol + rtol * np.abs(e64)) | (a64 == e64)
        if equal_nan:
            ok |= np.isnan(a64) & np.isnan(e64)
        if ok.all():
            return
        bad = ~ok
        rel = diff / np.abs(e64)
        def worst(d):
            return np.unravel_index(np.argmax(np.where(bad, np.nan_to_num(d, nan=np.inf), -1)),
                                    diff.shape)
        k_abs, k_rel = worst(diff), worst(rel)
    kind = "Tensor-likes" if (a_t or e_t) and a.ndim else "Scalars"
    verdict = "equal" if rtol == 0 and atol == 0 else "close"   # (integers: exact)
    text = (f"{kind} are not {verdict}!\n\nMismatched elements: {int(bad.sum())} / {bad.size} "
            f"({100.0 * bad.sum() / bad.size:.1f}%)\n"
            f"Greatest absolute difference: {diff[k_abs]} at index {tuple(int(i) for i in k_abs)} "
            f"(up to {atol} allowed)\n"
            f"Greatest relative difference: {rel[k_rel]} at index {tuple(int(i) for i in k_rel)} "
            f"(up to {rtol} allowed)")
    raise AssertionError(msg or text)


# -- tg.backends and determinism: PyTorch's switches, accepted (tapegrad is deterministic and
# has no CUDA, cuDNN or MPS)

_deterministic = [False]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Accepted (tapegrad's algorithms are deterministic whatever the mode)."""
    _deterministic[0] = bool(mode)


def are_deterministic_algorithms_enabled():
    """The mode ``use_deterministic_algorithms`` set."""
    return _deterministic[0]


def _module(name, doc, functions):
    m = types.ModuleType(name, doc)
    m.__dict__.update(functions)
    m.__all__ = sorted(functions)
    return m


cuda = _module("tapegrad.cuda", "What PyTorch programs ask about CUDA: no CUDA device here.",
               {f.__name__: f for f in (is_available, device_count, manual_seed,
                                        manual_seed_all, empty_cache, is_initialized,
                                        current_device, synchronize)})
special = _module("tapegrad.special", "Special functions, as ``torch.special`` names them.",
                  dict(special_rows.SPECIAL, **{n: FUNCTIONS[n] for n in
                                                ("softmax", "log_softmax", "logsumexp")}))
linalg = _module("tapegrad.linalg", "Linear algebra, as ``torch.linalg`` names it.", LINALG)
testing = _module("tapegrad.testing", "Test helpers, as ``torch.testing``.",
                  {"assert_close": assert_close})
_no = lambda: False  # noqa: E731
cudnn = _module("tapegrad.backends.cudnn", "cuDNN's switches (no cuDNN here).",
                {"is_available": _no, "version": lambda: None})
cudnn.enabled, cudnn.deterministic, cudnn.benchmark, cudnn.allow_tf32 = True, False, False, False
mps = _module("tapegrad.backends.mps", "Apple's MPS (not here).",
              {"is_available": _no, "is_built": _no})
backend_cuda = _module("tapegrad.backends.cuda", "CUDA's switches (no CUDA here).",
                       {"is_built": _no})
backend_cuda.matmul = types.SimpleNamespace(allow_tf32=False,
                                            allow_fp16_reduced_precision_reduction=True)
backends = _module("tapegrad.backends", "PyTorch's backend switches, accepted.",
                   {"cudnn": cudnn, "mps": mps, "cuda": backend_cuda})
NAMESPACES = {"cuda": cuda, "special": special, "linalg": linalg, "testing": testing,
              "backends": backends}
SUBMODULES = [cudnn, mps, backend_cuda]   # importable too: import tapegrad.backends.cudnn
DETERMINISM = {"use_deterministic_algorithms": use_deterministic_algorithms,
               "are_deterministic_algorithms_enabled": are_deterministic_algorithms_enabled}
