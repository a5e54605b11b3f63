"""``tapegrad.nn.utils``: gradient clipping and parameter vectors (PyTorch's
``torch.nn.utils``).

The clipping functions rescale ``p.grad`` in place without recording, as PyTorch's do under
``no_grad``.
"""
from __future__ import annotations

import math

import numpy as np

from ...core.tensor import Tensor, wrap
from ..values import set_value, value
from . import rnn

__all__ = ["rnn", "clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_",
           "parameters_to_vector", "vector_to_parameters"]


def _tensors(parameters):
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def _vector_norm(v, norm_type):
    v = np.abs(np.asarray(v, dtype=np.float64)).reshape(-1)
    if norm_type == math.inf:
        return float(v.max()) if v.size else 0.0
    if norm_type == -math.inf:
        return float(v.min()) if v.size else math.inf
    if norm_type == 0:
        return float(np.count_nonzero(v))
    if norm_type == 2:
        return float(np.sqrt(np.dot(v, v)))
    return float(np.sum(v ** norm_type) ** (1.0 / norm_type))


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The ``norm_type`` norm of the norms of ``tensors`` (the norm of all their entries
    together), as a 0-d tensor."""
    tensors = [t for t in _tensors(tensors) if t is not None]
    norm_type = float(norm_type)
    if not tensors:
        return wrap(0.0)
    total = _vector_norm([_vector_norm(value(t), norm_type) for t in tensors], norm_type)
    if error_if_nonfinite and not math.isfinite(total):
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from "
                           "`parameters` is non-finite, so it cannot be clipped. To disable "
                           "this error and scale the gradients by the non-finite norm anyway, "
                           "set `error_if_nonfinite=False`")
    return wrap(total)


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by ``max_norm / (total_norm + 1e-6)`` when that is below 1."""
    grads = [p._grad for p in _tensors(parameters) if p._grad is not None]
    if not grads:
        return
    coef = min(float(max_norm) / (float(value(total_norm)) + 1e-6), 1.0)
    for g in grads:
        set_value(g, value(g) * coef)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Rescale the gradients of ``parameters`` in place so that their total ``norm_type``
    norm is at most ``max_norm`` (the factor is ``max_norm / (norm + 1e-6)``, at most 1, as
    PyTorch's).  Returns the total norm before clipping (a 0-d tensor)."""
    params = _tensors(parameters)
    total = get_total_norm([p._grad for p in params if p._grad is not None], norm_type,
                           error_if_nonfinite)
    clip_grads_with_norm_(params, max_norm, total)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient entry of ``parameters`` to [-clip_value, clip_value], in place."""
    c = float(clip_value)
    for p in _tensors(parameters):
        if p._grad is not None:
            set_value(p._grad, np.clip(value(p._grad), -c, c))


def parameters_to_vector(parameters):
    """The parameters' values flattened and concatenated into one 1-d tensor (a copy)."""
    return wrap(np.concatenate([np.asarray(value(p), np.float64).reshape(-1)
                                for p in _tensors(parameters)]))


def vector_to_parameters(vec, parameters):
    """Write the 1-d ``vec`` into the parameters, in order (in place, without recording)."""
    v = value(vec)
    if v.ndim != 1:
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    k = 0
    for p in _tensors(parameters):
        n = int(np.prod(p.shape))
        set_value(p, v[k:k + n].reshape(tuple(p.shape)))
        k += n
