"""Probability distributions, as PyTorch's ``torch.distributions``: parameters, ``sample``
(no gradient), ``rsample`` (reparameterised), ``log_prob``, ``entropy`` and the KL
divergence, differentiable through tapegrad ops.

    from tapegrad.distributions import Categorical
    m = Categorical(probs)
    action = m.sample()
    loss = -m.log_prob(action) * reward
"""
from .distribution import Distribution, set_default_validate_args
from .kl import kl_divergence, register_kl
from .multivariate import Independent, MultivariateNormal
from .univariate import Bernoulli, Categorical, Normal, Uniform

__all__ = ["Distribution", "Normal", "Uniform", "Bernoulli", "Categorical",
           "MultivariateNormal", "Independent", "kl_divergence", "register_kl",
           "set_default_validate_args"]
