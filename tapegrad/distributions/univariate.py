"""``Normal``, ``Uniform``, ``Bernoulli`` and ``Categorical``, with PyTorch's formulas."""
from __future__ import annotations

import math

import numpy as np

from ..core.dtypes import Size, finfo
from ..core.grad_mode import no_grad
from ..ops.array_ops import call
from ..ops.factories import rand, randn
from ..ops.torch_api import bernoulli, broadcast_tensors, multinomial
from .distribution import (LOG_SQRT_2PI, Constraint, Distribution, as_param, boolean,
                           broadcast_all, lazy_property, positive, real,
                           unit_interval)


class Normal(Distribution):
    """The normal distribution with mean ``loc`` and standard deviation ``scale``."""

    arg_constraints = {"loc": real, "scale": positive}
    support = real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = randn(shape, dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        var = self.scale ** 2
        log_scale = self.scale.log()
        return -((value - self.loc) ** 2) / (2 * var) - log_scale - LOG_SQRT_2PI

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 0.5 * (1 + ((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)).erf())

    def icdf(self, value):
        return self.loc + self.scale * (2 * value - 1).erfinv() * math.sqrt(2)

    def entropy(self):
        return 0.5 + 0.5 * math.log(2 * math.pi) + self.scale.log()


class Uniform(Distribution):
    """The uniform distribution on the half-open interval ``[low, high)``."""

    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = broadcast_all(low, high)
        super().__init__(self.low.shape, validate_args=validate_args)

    @property
    def arg_constraints(self):
        low, high = self.low.detach().numpy(), self.high.detach().numpy()
        return {"low": Constraint(f"LessThan(upper_bound={_bound(self.high)})",
                                  lambda x: x < high),
                "high": Constraint(f"GreaterThan(lower_bound={_bound(self.low)})",
                                   lambda x: x > low)}

    @property
    def support(self):
        low, high = self.low.detach().numpy(), self.high.detach().numpy()
        return Constraint(f"Interval(lower_bound={_bound(self.low)}, "
                          f"upper_bound={_bound(self.high)})", lambda x: (low <= x) & (x <= high))

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return np.nan * self.high

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        u = rand(shape, dtype=self.low.dtype)
        return self.low + u * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lb = (self.low <= value).type_as(self.low)
        ub = (self.high > value).type_as(self.low)
        return (lb * ub).log() - (self.high - self.low).log()

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        result = (value - self.low) / (self.high - self.low)
        return result.clamp(min=0, max=1)

    def entropy(self):
        return (self.high - self.low).log()


def _bound(t):
    return float(t) if t.numel() == 1 else t


def _clamp_probs(probs):
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def _one_of(probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both.")


class Bernoulli(Distribution):
    """The Bernoulli distribution: 1 with probability ``probs`` (or ``sigmoid(logits)``)."""

    arg_constraints = {"probs": unit_interval, "logits": real}
    support = boolean

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            param = self.logits
        self._param = param
        super().__init__(param.shape, validate_args=validate_args)

    @lazy_property
    def probs(self):   # (the one given lives in __dict__ and hides this)
        return self.logits.sigmoid()

    @lazy_property
    def logits(self):
        p = _clamp_probs(self.probs)
        return p.log() - (-p).log1p()

    @property
    def mean(self):
        return self.probs

    @property
    def mode(self):
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return mode.masked_fill(self.probs == 0.5, np.nan)

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        with no_grad():
            return bernoulli(self.probs.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        logits, value = broadcast_all(self.logits, value)
        return -call("binary_cross_entropy_with_logits", logits, value, None, None, "none")

    def entropy(self):
        return call("binary_cross_entropy_with_logits", self.logits, self.probs, None, None,
                    "none")


class Categorical(Distribution):
    """The categorical distribution over ``0 .. K-1`` with weights ``probs`` (normalised)
    or ``logits`` (log-weights, normalised) along the last dimension."""


    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(probs, logits)
        if probs is not None:
            probs = as_param(probs)
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
            param = self.probs
        else:
            logits = as_param(logits)
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            param = self.logits
        self._param = param
        self._num_events = param.shape[-1]
        super().__init__(param.shape[:-1], validate_args=validate_args)

    arg_constraints = {
        "probs": Constraint("Simplex()", lambda x: np.all(x >= 0, -1)
                            & (np.abs(x.sum(-1) - 1) < 1e-6)),
        "logits": Constraint("IndependentConstraint(Real(), 1)", lambda x: np.all(x == x, -1))}

    @property
    def support(self):
        n = self._num_events
        return Constraint(f"IntegerInterval(lower_bound=0, upper_bound={n - 1})",
                          lambda x: (x == np.floor(x)) & (x >= 0) & (x <= n - 1))

    @lazy_property
    def probs(self):
        return self.logits.softmax(-1)

    @lazy_property
    def logits(self):
        return _clamp_probs(self.probs).log()

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return self._nan()

    @property
    def mode(self):
        return self.probs.argmax(dim=-1)

    @property
    def variance(self):
        return self._nan()

    def _nan(self):
        return (self.probs.detach()[..., 0] * np.nan).expand(self._extended_shape())

    def sample(self, sample_shape=Size()):
        sample_shape = Size(sample_shape)
        probs_2d = self.probs.detach().reshape(-1, self._num_events)
        n = int(np.prod(sample_shape, dtype=np.int64))
        with no_grad():
            samples_2d = multinomial(probs_2d, n, True).T
        return samples_2d.reshape(self._extended_shape(sample_shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        value = value.long().unsqueeze(-1)
        value, log_pmf = broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        min_real = finfo(self.logits.dtype).min
        logits = self.logits.clamp(min=min_real)
        p_log_p = logits * self.probs
        return -p_log_p.sum(-1)
