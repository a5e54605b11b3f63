"""``Distribution``, the base of ``tg.distributions`` (PyTorch's ``torch.distributions``),
and the argument checks its subclasses share.

Every quantity is written in tapegrad ops, so ``log_prob``, ``entropy``, ``rsample`` and the
KL divergences are differentiable with no rule of their own.  Samples are drawn from
tapegrad's generator (``tg.manual_seed``): their values differ from PyTorch's, their
distribution does not.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.dtypes import Size, get_default_dtype
from ..core.grad_mode import no_grad
from ..core.tensor import Tensor
from ..ops.factories import tensor as _tensor
from ..ops.torch_api import broadcast_tensors

_validate_default = True


def set_default_validate_args(value: bool) -> None:
    """Whether new distributions check their arguments (PyTorch's default: True)."""
    global _validate_default
    if value not in (True, False):
        raise ValueError
    _validate_default = value


def as_param(x, like=None):
    """``x`` as a tensor (a number becomes one of the default dtype, or of ``like``'s)."""
    if isinstance(x, Tensor):
        return x
    return _tensor(x, dtype=like.dtype if like is not None else get_default_dtype())


def broadcast_all(*values):
    """The arguments as tensors of one shape (numbers take the tensors' dtype)."""
    like = next((v for v in values if isinstance(v, Tensor)), None)
    if like is None and not all(isinstance(v, (int, float)) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number, "
                         "torch.Tensor or objects implementing __torch_function__.")
    return broadcast_tensors(*(as_param(v, like) for v in values))


def sum_rightmost(value, dim):
    """``value`` summed over its ``dim`` rightmost dimensions."""
    return value if dim == 0 else value.reshape(tuple(value.shape[:-dim]) + (-1,)).sum(-1)


def _shape_text(shape):
    return f"torch.Size({list(shape)})"


class lazy_property:   # noqa: N801  (PyTorch's name)
    """A parameter computed from the other on first use and kept (``probs`` from
    ``logits``...); the one given is set on the instance and hides it."""

    def __init__(self, compute):
        self.compute = compute
        self.__doc__ = compute.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = self.compute(instance)
        instance.__dict__[self.compute.__name__] = value
        return value


class Constraint:
    """Where a parameter or a value must lie; ``check(x)`` is a boolean array."""

    def __init__(self, text, check):
        self.text, self.check = text, check

    def __repr__(self):
        return self.text


real = Constraint("Real()", lambda x: x == x)   # (not nan)
positive = Constraint("GreaterThan(lower_bound=0.0)", lambda x: x > 0)
unit_interval = Constraint("Interval(lower_bound=0.0, upper_bound=1.0)", lambda x: (x >= 0) & (x <= 1))
boolean = Constraint("Boolean()", lambda x: (x == 0) | (x == 1))
# a parameter checked by its distribution's own code (named in repr, as PyTorch's)
dependent = Constraint("Dependent()", lambda x: np.ones(np.shape(x), bool))


class Distribution:
    """A probability distribution over values of shape ``batch_shape + event_shape``."""

    has_rsample = False
    has_enumerate_support = False
    arg_constraints: dict = {}
    support = None

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        self._validate_args = _validate_default if validate_args is None else validate_args
        if self._validate_args:
            for name, constraint in self.arg_constraints.items():
                if constraint is dependent or (name not in self.__dict__ and isinstance(
                        type(self).__dict__.get(name), lazy_property)):
                    continue   # checked by the subclass, or computed from the one given
                value = getattr(self, name)
                ok = constraint.check(np.asarray(value.detach().numpy()))
                if not np.all(ok):
                    raise ValueError(
                        f"Expected parameter {name} ({type(value).__name__} of shape "
                        f"{tuple(value.shape)}) of distribution {self!r} to satisfy the "
                        f"constraint {constraint!r}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{self.__class__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=Size()):
        """A sample (no gradient flows into it)."""
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=Size()):
        """A reparameterised sample (gradients flow into the parameters)."""
        raise NotImplementedError

    def sample_n(self, n):
        return self.sample(Size((n,)))

    def log_prob(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=Size()):
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value):
        """PyTorch's checks of a value given to ``log_prob``: a tensor, of a shape that
        broadcasts against the distribution's, inside the support."""
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim = len(self._event_shape)
        if tuple(value.shape[value.dim() - event_dim:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: "
                             f"{_shape_text(value.shape)} vs {_shape_text(self._event_shape)}.")
        actual = tuple(value.shape)
        expected = tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: "
                                 f"{_shape_text(actual)} vs {_shape_text(expected)}.")
        support = self.support
        if support is not None and not np.all(support.check(np.asarray(value.detach().numpy()))):
            raise ValueError(
                f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) "
                f"to be within the support ({support!r}) of the distribution {self!r}, but "
                f"found invalid values:\n{value}")

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{k}: {self.__dict__[k] if self.__dict__[k].numel() == 1 else _shape_text(self.__dict__[k].shape)}"
                         for k in names)
        return f"{self.__class__.__name__}({args})"


LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))
