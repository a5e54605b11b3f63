"""``tg.autograd.forward_ad``: forward-mode AD with PyTorch's API.

    import tapegrad.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        x = fwAD.make_dual(primal, tangent)
        y = f(x)
        jvp = fwAD.unpack_dual(y).tangent      # J_f(primal) @ tangent

A dual tensor is a tensor the tape records (it requires grad); ``unpack_dual(y)`` gets the
Jacobian-vector product from the one reverse walk, by the double-vjp rule: ``u(v) = J^T v``
is recorded (``create_graph``) with a leaf ``v``, and since ``u`` is linear in ``v``,
``J t = d/dv <u(v), t>``.  Every op that has a reverse rule (elementwise rows, array ops,
custom Functions whose backward is differentiable) thus has a forward rule, with no second
set of rules.  Differences from PyTorch: dual tensors and what is computed from them
require grad (PyTorch's do not unless the primal does), and ops run under ``no_grad``
inside a level carry no tangent.
"""
from __future__ import annotations

import threading
import weakref
from typing import NamedTuple, Optional

import numpy as np

from ..core.tensor import Tensor, wrap
from .gradients import grad

__all__ = ["dual_level", "enter_dual_level", "exit_dual_level", "make_dual", "unpack_dual",
           "UnpackedDualTensor"]


class UnpackedDualTensor(NamedTuple):
    """What ``unpack_dual`` returns: the primal and its tangent (None: no tangent)."""
    primal: Tensor
    tangent: Optional[Tensor]


class _Level:
    __slots__ = ("duals",)

    def __init__(self):
        self.duals = {}     # id(dual) -> (weakref to the dual, its tangent, primal requires grad)

    def live(self):
        out = []
        for key, (ref, tangent, keeps) in list(self.duals.items()):
            d = ref()
            if d is None:
                del self.duals[key]
            else:
                out.append((d, tangent, keeps))
        return out


class _Levels(threading.local):
    def __init__(self):
        self.stack = []


_levels = _Levels()


def enter_dual_level():
    """Enter a new forward-mode level; returns its index (only one level at a time)."""
    if _levels.stack:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _levels.stack.append(_Level())
    return len(_levels.stack) - 1


def exit_dual_level(*, level=None):
    """Leave the current level: its dual tensors lose their tangents."""
    if not _levels.stack:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created. This is not supported.")
    _levels.stack.pop()


class dual_level:
    """Context manager of a forward-mode level: ``with fwAD.dual_level(): ...``."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False


def _shape_str(shape):
    return "[" + ", ".join(str(n) for n in shape) + "]"


def make_dual(tensor, tangent, *, level=None):
    """A tensor with value ``tensor`` and forward gradient ``tangent``."""
    if not _levels.stack:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    if not tensor.dtype.is_floating_point:
        raise ValueError("Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}")
    if not tangent.dtype.is_floating_point:
        raise ValueError("Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than "
                           "that of the original Tensor, this is not supported. Tensor is of "
                           f"size {_shape_str(tensor.shape)} while the given forward gradient "
                           f"is of size {_shape_str(tangent.shape)}.")
    keeps = tensor.requires_grad
    # a primal that requires grad stays differentiable through its dual (a recorded copy)
    dual = tensor * 1.0 if keeps else wrap(tensor._value, requires_grad=True)
    _levels.stack[-1].duals[id(dual)] = (weakref.ref(dual), tangent, keeps)
    return dual


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)`` of ``tensor``: its value and its Jacobian-vector product with
    the tangents of the level's dual tensors (None when it depends on none of them)."""
    if not isinstance(tensor, Tensor) or not _levels.stack:
        return UnpackedDualTensor(tensor, None)
    duals = _levels.stack[-1].live()
    for d, tangent, keeps in duals:
        if d is tensor:
            return UnpackedDualTensor(tensor if keeps else tensor.detach(), tangent)
    if not tensor.requires_grad or not duals:
        return UnpackedDualTensor(tensor, None)
    keeps = any(k for _, _, k in duals)
    primal = tensor if keeps else tensor.detach()
    v = wrap(np.zeros(tuple(tensor.shape)) if tensor.ndim else 0.0, requires_grad=True)
    us = grad(tensor, [d for d, _, _ in duals], grad_outputs=v, create_graph=True,
              allow_unused=True)
    terms = [(u * t).sum() for u, (_, t, _) in zip(us, duals) if u is not None]
    if not terms:
        return UnpackedDualTensor(primal, None)
    s = terms[0]
    for term in terms[1:]:
        s = s + term
    if not s.requires_grad:      # u does not depend on v: a zero derivative
        return UnpackedDualTensor(primal, wrap(np.zeros_like(np.asarray(tensor._value))))
    (jvp,) = grad(s, v, allow_unused=True, create_graph=keeps)
    if jvp is None:
        jvp = wrap(np.zeros_like(np.asarray(tensor._value)))
    return UnpackedDualTensor(primal, jvp if keeps else jvp.detach())
