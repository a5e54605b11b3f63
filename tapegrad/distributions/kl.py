"""``kl_divergence(p, q)`` and ``register_kl``: PyTorch's KL table for the distributions
of this package (the most specific registered pair of base classes is used)."""
from __future__ import annotations

import math

import numpy as np

from ..ops.array_ops import call
from ..ops.torch_api import solve, where
from .distribution import Distribution, sum_rightmost
from .multivariate import Independent, MultivariateNormal, batch_mahalanobis
from .univariate import Bernoulli, Categorical, Normal, Uniform

_KL_REGISTRY: dict = {}


def register_kl(type_p, type_q):
    """Decorator: ``fn(p, q)`` computes KL(p || q) for ``p`` a ``type_p`` and ``q`` a
    ``type_q`` (subclasses included)."""
    if not (isinstance(type_p, type) and issubclass(type_p, Distribution)):
        raise TypeError(f"Expected type_p to be a Distribution subclass but got {type_p}")
    if not (isinstance(type_q, type) and issubclass(type_q, Distribution)):
        raise TypeError(f"Expected type_q to be a Distribution subclass but got {type_q}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        return fn
    return decorator


def _dispatch(type_p, type_q):
    # the pair nearest in both MROs (PyTorch: the least of the matches in MRO order)
    best, fn = None, None
    for (p, q), f in _KL_REGISTRY.items():
        if issubclass(type_p, p) and issubclass(type_q, q):
            rank = (type_p.__mro__.index(p), type_q.__mro__.index(q))
            if best is None or rank < best:
                best, fn = rank, f
    return fn


def softplus(x):
    return call("softplus", x)


def kl_divergence(p: Distribution, q: Distribution):
    """KL(p || q), over the batch shape."""
    fn = _dispatch(type(p), type(q))
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type "
                                  f"{p.__class__.__name__} and q type {q.__class__.__name__}")
    return fn(p, q)


@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - var_ratio.log())


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    # PyTorch writes inf and 0 by index; a where has the same values and zero gradient there
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = where(p.probs == 0, 0.0, where(q.probs == 0, math.inf, t1))
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = where(p.probs == 1, 0.0, where(q.probs == 1, math.inf, t2))
    return t1 + t2


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = where((p.probs == 0).expand_as(t), 0.0, where((q.probs == 0).expand_as(t), math.inf, t))
    return t.sum(-1)


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    result = ((q.high - q.low) / (p.high - p.low)).log()
    return where((q.low > p.low) | (q.high < p.high), math.inf, result)


@register_kl(Normal, Uniform)
def _kl_normal_uniform(p, q):
    return where(p.loc == p.loc, math.inf, p.loc)   # (infinite, of p.loc's shape and dtype)


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    common_term = p.high - p.low
    t1 = (math.sqrt(math.pi * 2) * q.scale / common_term).log()
    t2 = common_term.pow(2) / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2).pow(2)
    return t1 + 0.5 * (t2 + t3) / q.scale.pow(2)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_multivariatenormal_multivariatenormal(p, q):
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different "
                         "event shapes cannot be computed")
    Lp, Lq = p._unbroadcasted_scale_tril, q._unbroadcasted_scale_tril
    half_term1 = Lq.diagonal(dim1=-2, dim2=-1).log().sum(-1) - \
        Lp.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    batch = tuple(np.broadcast_shapes(tuple(Lq.shape[:-2]), tuple(Lp.shape[:-2])))
    n = p.event_shape[0]
    X = solve(Lq.tril().expand(batch + (n, n)), Lp.expand(batch + (n, n)))   # (triangular)
    term2 = (X * X).sum((-2, -1))
    term3 = batch_mahalanobis(Lq, q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - n)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)
