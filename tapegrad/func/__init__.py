"""``tg.func``: PyTorch's ``torch.func`` -- ``grad``, ``grad_and_value``, ``vjp``, ``jvp``,
``jacrev``, ``jacfwd``, ``hessian``, ``vmap`` -- composable as in PyTorch
(``vmap(jacrev(f))(X)`` for per-sample Jacobians, ``jacfwd(jacrev(f))``, ``grad(grad(f))``).

The derivative transforms run the function once per call on tapegrad's reverse walk
(``transforms.py``); inside another transform they record their derivatives, so every
composition works.  ``vmap`` records the whole transformed function once at one sample and
replays the recording over the batch in Numba (``batching.py``), falling back to one eager
call per sample where replay cannot follow the function; ``vmap(...).last_path`` and
``tg.func.PATHS`` say which path ran.
"""
from __future__ import annotations

from .batching import PATHS, clear_cache, vmap
from .transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian", "vmap",
           "PATHS", "clear_cache"]
