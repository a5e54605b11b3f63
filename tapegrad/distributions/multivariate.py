"""``MultivariateNormal`` and ``Independent``."""
from __future__ import annotations

import math

import numpy as np

from ..autograd.function import Function
from ..core.dtypes import Size
from ..ops.factories import randn, tensor
from ..ops.torch_api import solve
from .distribution import Distribution, as_param, dependent, real, lazy_property, sum_rightmost


class Cholesky(Function):
    """``L`` lower triangular with ``L Lᵀ = A`` (PyTorch's ``linalg.cholesky``); the
    backward is PyTorch's ``cholesky_backward``, in tapegrad ops so it differentiates again."""

    @staticmethod
    def forward(ctx, A):
        a = A.detach().numpy()
        try:
            L = tensor(np.linalg.cholesky(a), dtype=A.dtype)
        except np.linalg.LinAlgError:
            raise ValueError("Expected parameter covariance_matrix to be positive definite "
                             "(its Cholesky factorization failed)") from None
        ctx.save_for_backward(L)
        return L

    @staticmethod
    def backward(ctx, gL):
        (L,) = ctx.saved_tensors
        Lt = L.transpose(-2, -1)
        g = (Lt @ gL).tril()
        g = 0.5 * (g + g.tril(-1).transpose(-2, -1))   # Φ: lower part, diagonal halved
        g = solve(Lt, g)                                # L⁻ᵀ Φ
        return solve(L, g, left=False)                  # L⁻ᵀ Φ L⁻¹


def batch_mahalanobis(L, x):
    """``xᵀ (L Lᵀ)⁻¹ x`` over the last dimension, ``L`` broadcast against ``x``'s batch."""
    n = x.shape[-1]
    batch = tuple(np.broadcast_shapes(tuple(L.shape[:-2]), tuple(x.shape[:-1])))
    # (tril: PyTorch solves a triangular system, whose gradient in L is lower triangular)
    y = solve(L.tril().expand(batch + (n, n)), x.expand(batch + (n,)).unsqueeze(-1)).squeeze(-1)
    return (y * y).sum(-1)


class MultivariateNormal(Distribution):
    """The normal distribution over vectors with mean ``loc`` and covariance given by one of
    ``covariance_matrix``, ``precision_matrix`` or ``scale_tril`` (``L`` with ``Σ = L Lᵀ``)."""

    # (a covariance is checked by its Cholesky factorisation, scale_tril's diagonal below)
    arg_constraints = {"loc": real, "covariance_matrix": dependent,
                       "precision_matrix": dependent, "scale_tril": dependent}
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None,
                 validate_args=None):
        loc = as_param(loc)
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + \
                (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or "
                             "scale_tril may be specified.")
        given = next(m for m in (scale_tril, covariance_matrix, precision_matrix) if m is not None)
        given = as_param(given, loc)
        if given.dim() < 2:
            what = ("scale_tril" if scale_tril is not None else "covariance_matrix"
                    if covariance_matrix is not None else "precision_matrix")
            raise ValueError(f"{what} matrix must be at least two-dimensional, with optional "
                             "leading batch dimensions")
        batch = tuple(np.broadcast_shapes(tuple(given.shape[:-2]), tuple(loc.shape[:-1])))
        n = loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = given.expand(batch + (-1, -1))
            self._unbroadcasted_scale_tril = given
        elif covariance_matrix is not None:
            self.covariance_matrix = given.expand(batch + (-1, -1))
            self._unbroadcasted_scale_tril = Cholesky.apply(given)
        else:
            self.precision_matrix = given.expand(batch + (-1, -1))
            self._unbroadcasted_scale_tril = Cholesky.apply(given.inverse())
        self.loc = loc.expand(batch + (-1,))
        super().__init__(batch, (n,), validate_args=validate_args)
        if self._validate_args and scale_tril is not None:
            d = np.diagonal(given.detach().numpy(), axis1=-2, axis2=-1)
            if not np.all(d > 0):
                raise ValueError(f"Expected parameter scale_tril ({type(given).__name__} of shape "
                                 f"{tuple(given.shape)}) of distribution {self!r} to satisfy "
                                 f"the constraint LowerCholesky(), but found invalid values:\n"
                                 f"{given}")

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        shape = tuple(self._batch_shape) + tuple(self._event_shape)
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(shape)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(self._matrix_shape())

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.transpose(-2, -1)).expand(self._matrix_shape())

    def _matrix_shape(self):
        return tuple(self._batch_shape) + tuple(self._event_shape) * 2

    def rsample(self, sample_shape=Size()):
        shape = self._extended_shape(sample_shape)
        eps = randn(shape, dtype=self.loc.dtype)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        diff = value - self.loc
        M = batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - half_log_det

    def entropy(self):
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return H if len(self._batch_shape) == 0 else H.expand(self._batch_shape)


class Independent(Distribution):
    """``base_distribution`` with its ``reinterpreted_batch_ndims`` rightmost batch dimensions
    read as event dimensions (``log_prob`` sums over them)."""

    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        n = reinterpreted_batch_ndims
        if n > len(base_distribution.batch_shape):
            raise ValueError("Expected reinterpreted_batch_ndims <= len(base_distribution."
                             f"batch_shape), actual {n} vs "
                             f"{len(base_distribution.batch_shape)}")
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = n + len(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = n
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    @property
    def has_rsample(self):
        return self.base_dist.has_rsample

    @property
    def support(self):
        return self.base_dist.support

    @property
    def mean(self):
        return self.base_dist.mean

    @property
    def mode(self):
        return self.base_dist.mode

    @property
    def variance(self):
        return self.base_dist.variance

    def sample(self, sample_shape=Size()):
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape=Size()):
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self):
        return (f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})")
