"""The ``tg.cuda``, ``tg.special`` and ``tg.linalg`` namespaces: modules (``types.ModuleType``)
named as PyTorch's submodules, over functions of this layer.  ``tapegrad/__init__.py``
registers them in ``sys.modules``, so ``import tapegrad.special`` and ``from tapegrad.linalg
import cross`` work as with ``torch``."""
from __future__ import annotations

import types

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
NAMESPACES = {"cuda": cuda, "special": special, "linalg": linalg}
