"""``tg.distributions`` against ``torch.distributions`` (torch 2.13; skipped without it).

- at the same parameters and values: ``log_prob``, ``entropy``, ``mean``, ``variance``,
  ``stddev``, ``cdf`` and ``kl_divergence`` equal PyTorch's to 1e-12 (float64), and so do
  the gradients of ``log_prob``/``entropy``/``kl`` with respect to the parameters;
- float64 finite differences for the same, and for losses of ``rsample`` (the
  reparameterisation: gradients flow through ``loc``/``scale``/``low``/``high``/``scale_tril``);
- samples come from tapegrad's generator, so their values differ from PyTorch's: their
  distribution is checked with a fixed seed and loose tolerances (moments, frequencies);
- shapes (``batch_shape``, ``event_shape``, sample shapes) and the errors for invalid
  parameters or values (types and messages) as PyTorch's.
"""
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import distributions as D

torch = pytest.importorskip("torch")
TD = torch.distributions

RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _torch_float64():
    torch.set_default_dtype(torch.float64)
    yield   # (conftest's fixture sets back what it found)

L2 = np.array([[1.3, 0.0], [0.4, 0.7]])
L3 = np.array([[[1.1, 0.0, 0.0], [0.2, 0.9, 0.0], [-0.3, 0.5, 1.4]],
               [[0.8, 0.0, 0.0], [0.1, 1.2, 0.0], [0.6, -0.2, 0.5]]])

# name -> (class name, {parameter: array}, value array): one distribution, its value
CASES = {
    "normal": ("Normal", {"loc": RNG.normal(size=(2, 3)), "scale": RNG.uniform(0.5, 2, (2, 3))},
               RNG.normal(size=(2, 3))),
    "normal_broadcast": ("Normal", {"loc": RNG.normal(size=(3,)), "scale": np.array(1.7)},
                         RNG.normal(size=(4, 3))),
    "normal_2": ("Normal", {"loc": np.array([0.4, -0.3]), "scale": np.array([0.8, 1.9])},
                 np.array([1.0, 0.2])),
    "uniform": ("Uniform", {"low": np.array([-1.0, 0.5]), "high": np.array([2.0, 0.9])},
                np.array([0.3, 0.6])),
    "bernoulli_probs": ("Bernoulli", {"probs": np.array([0.1, 0.5, 0.93])},
                        np.array([1.0, 0.0, 1.0])),
    "bernoulli_logits": ("Bernoulli", {"logits": np.array([-2.0, 0.3, 4.0])},
                         np.array([0.0, 0.0, 1.0])),
    "categorical_probs": ("Categorical", {"probs": RNG.uniform(0.1, 1, (2, 4))},
                          np.array([3.0, 0.0])),
    "categorical_logits": ("Categorical", {"logits": RNG.normal(size=(3, 5))},
                           np.array([[1.0, 4.0, 2.0], [0.0, 0.0, 3.0]])),
    "mvn_scale_tril": ("MultivariateNormal", {"loc": RNG.normal(size=(2, 3)), "scale_tril": L3},
                       RNG.normal(size=(2, 3))),
    "mvn_covariance": ("MultivariateNormal", {"loc": RNG.normal(size=2),
                                              "covariance_matrix": L2 @ L2.T},
                       RNG.normal(size=(5, 2))),
    "mvn_precision": ("MultivariateNormal", {"loc": RNG.normal(size=2),
                                             "precision_matrix": np.linalg.inv(L2 @ L2.T)},
                      RNG.normal(size=2)),
}


def _make(lib, name, requires_grad=False):
    cls, params, value = CASES[name]
    t = {k: lib.tensor(v, dtype=lib.float64, requires_grad=requires_grad)
         for k, v in params.items()}
    module = D if lib is tg else TD
    return getattr(module, cls)(**t), t, lib.tensor(value, dtype=lib.float64)


def _close(a, b, tol=1e-12):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    b = b.detach().numpy() if hasattr(b, "detach") else np.asarray(b)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", CASES)
def test_shapes_and_moments_as_pytorch(name):
    (d, _, _), (e, _, _) = _make(tg, name), _make(torch, name)
    assert tuple(d.batch_shape) == tuple(e.batch_shape)
    assert tuple(d.event_shape) == tuple(e.event_shape)
    assert d.has_rsample == e.has_rsample
    assert repr(d) == repr(e)
    for prop in ("mean", "variance", "stddev"):
        _close(getattr(d, prop), getattr(e, prop))
    _close(d.entropy(), e.entropy())
    for shape in ((), (4,), (2, 3)):
        assert tuple(d.sample(shape).shape) == tuple(e.sample(shape).shape)
        if e.has_rsample:
            assert tuple(d.rsample(shape).shape) == tuple(e.rsample(shape).shape)


@pytest.mark.parametrize("name", CASES)
def test_log_prob_entropy_and_their_gradients_as_pytorch(name):
    (d, dp, dv), (e, ep, ev) = _make(tg, name, True), _make(torch, name, True)
    lp, elp = d.log_prob(dv), e.log_prob(ev)
    _close(lp, elp)
    w = RNG.normal(size=tuple(elp.shape))
    loss = (lp * tg.tensor(w)).sum() + d.entropy().sum()
    eloss = (elp * torch.tensor(w)).sum() + e.entropy().sum()
    grads = tg.autograd.grad(loss, list(dp.values()))
    egrads = torch.autograd.grad(eloss, list(ep.values()))
    for g, eg in zip(grads, egrads):
        _close(g, eg, 1e-10)


@pytest.mark.parametrize("name", [n for n in CASES if CASES[n][0] not in
                                  ("Categorical", "Bernoulli", "Uniform")])   # (discrete, flat)
def test_log_prob_gradient_in_the_value_as_pytorch(name):
    (d, _, dv), (e, _, ev) = _make(tg, name), _make(torch, name)
    dv.requires_grad_()
    ev.requires_grad_()
    (g,) = tg.autograd.grad(d.log_prob(dv).sum(), [dv])
    (eg,) = torch.autograd.grad(e.log_prob(ev).sum(), [ev])
    _close(g, eg, 1e-10)


def _symmetric(params):
    """A covariance or precision read through its symmetric part: finite differences move
    one element at a time, PyTorch's (and our) Cholesky gradient is the symmetric one."""
    return {k: (v + v.transpose(-2, -1)) / 2 if k.endswith("_matrix") else v
            for k, v in params.items()}


@pytest.mark.parametrize("name", CASES)
def test_log_prob_and_entropy_gradients_match_finite_differences(name):
    cls, params, value = CASES[name]
    inputs = tuple(tg.tensor(v, dtype=tg.float64, requires_grad=True) for v in params.values())
    names = list(params)
    x = tg.tensor(value, dtype=tg.float64)

    def f(*ps):
        d = getattr(D, cls)(**_symmetric(dict(zip(names, ps))), validate_args=False)
        return d.log_prob(x).sum() + d.entropy().sum()
    assert tg.autograd.gradcheck(f, inputs)


@pytest.mark.parametrize("name", [n for n in CASES if CASES[n][0] != "Uniform"
                                  and CASES[n][0] not in ("Bernoulli", "Categorical")])
def test_rsample_loss_gradients_match_finite_differences(name):
    cls, params, _ = CASES[name]
    inputs = tuple(tg.tensor(v, dtype=tg.float64, requires_grad=True) for v in params.values())
    names = list(params)

    def f(*ps):
        tg.manual_seed(3)   # the same noise at every evaluation
        d = getattr(D, cls)(**_symmetric(dict(zip(names, ps))), validate_args=False)
        return (d.rsample((4,)) ** 2).sum()
    assert tg.autograd.gradcheck(f, inputs)


def test_uniform_rsample_gradients_are_the_reparameterisation():
    low = tg.tensor([-1.0, 0.5], requires_grad=True)
    high = tg.tensor([2.0, 0.9], requires_grad=True)
    tg.manual_seed(5)
    s = D.Uniform(low, high).rsample((6,))
    tg.manual_seed(5)
    u = tg.rand(6, 2)
    # s = low + u (high - low): d/dlow = 1 - u, d/dhigh = u
    gl, gh = tg.autograd.grad(s.sum(), [low, high])
    _close(gl, (1 - u).sum(0))
    _close(gh, u.sum(0))

    def f(a, b):
        tg.manual_seed(1)   # the same noise at every evaluation
        return (D.Uniform(a, b).rsample((3,)) ** 2).sum()
    assert tg.autograd.gradcheck(f, (low, high))


KL_PAIRS = [("normal", "normal"), ("uniform", "uniform"), ("bernoulli_probs", "bernoulli_logits"),
            ("categorical_logits", "categorical_logits"), ("mvn_scale_tril", "mvn_scale_tril"),
            ("mvn_covariance", "mvn_precision"), ("uniform", "normal_2")]


def _other(lib, name):
    """A second distribution of the same kind (shifted parameters)."""
    cls, params, _ = CASES[name]
    shifted = {k: (v * 0.8 + (0.1 if k in ("loc", "logits") else 0.0)) if k != "high"
               else v + 0.3 for k, v in params.items()}
    if k := next((k for k in ("low",) if k in shifted), None):
        shifted[k] = params[k] - 0.2
    t = {k: lib.tensor(v, dtype=lib.float64, requires_grad=True) for k, v in shifted.items()}
    return getattr(D if lib is tg else TD, cls)(**t), t


@pytest.mark.parametrize("p_name,q_name", KL_PAIRS)
def test_kl_divergence_and_its_gradients_as_pytorch(p_name, q_name):
    (p, pp, _), (ep, epp, _) = _make(tg, p_name, True), _make(torch, p_name, True)
    if p_name == q_name:
        (q, qp), (eq, eqp) = _other(tg, q_name), _other(torch, q_name)
    else:
        (q, qp, _), (eq, eqp, _) = _make(tg, q_name, True), _make(torch, q_name, True)
    kl, ekl = D.kl_divergence(p, q), TD.kl_divergence(ep, eq)
    _close(kl, ekl)
    if not np.all(np.isfinite(ekl.detach().numpy())):
        return
    grads = tg.autograd.grad(kl.sum(), list(pp.values()) + list(qp.values()))
    egrads = torch.autograd.grad(ekl.sum(), list(epp.values()) + list(eqp.values()))
    for g, eg in zip(grads, egrads):
        _close(g, eg, 1e-10)


def test_kl_infinite_where_pytorch_is():
    p, q = D.Uniform(tg.tensor([0.0, 0.0]), tg.tensor([1.0, 1.0])), \
        D.Uniform(tg.tensor([0.5, -1.0]), tg.tensor([2.0, 2.0]))
    ep, eq = TD.Uniform(torch.tensor([0.0, 0.0]), torch.tensor([1.0, 1.0])), \
        TD.Uniform(torch.tensor([0.5, -1.0]), torch.tensor([2.0, 2.0]))
    _close(D.kl_divergence(p, q), TD.kl_divergence(ep, eq))
    n = D.Normal(tg.zeros(2), tg.ones(2))
    _close(D.kl_divergence(n, p), TD.kl_divergence(TD.Normal(torch.zeros(2), torch.ones(2)), ep))


def test_kl_of_independent_normals_sums_the_event_dims():
    loc, scale = RNG.normal(size=(2, 3)), RNG.uniform(0.5, 2, (2, 3))
    p = D.Independent(D.Normal(tg.tensor(loc), tg.tensor(scale)), 1)
    q = D.Independent(D.Normal(tg.tensor(loc + 0.3), tg.tensor(scale * 1.5)), 1)
    ep = TD.Independent(TD.Normal(torch.tensor(loc), torch.tensor(scale)), 1)
    eq = TD.Independent(TD.Normal(torch.tensor(loc + 0.3), torch.tensor(scale * 1.5)), 1)
    _close(D.kl_divergence(p, q), TD.kl_divergence(ep, eq))
    x = RNG.normal(size=(5, 2, 3))
    assert tuple(p.batch_shape) == (2,) and tuple(p.event_shape) == (3,)
    _close(p.log_prob(tg.tensor(x)), ep.log_prob(torch.tensor(x)))
    _close(p.entropy(), ep.entropy())
    _close(p.mean, ep.mean)
    _close(p.variance, ep.variance)
    assert tuple(p.rsample((4,)).shape) == (4, 2, 3)


def test_register_kl_and_missing_pair():
    class MyNormal(D.Normal):
        pass

    p = MyNormal(tg.tensor(0.0), tg.tensor(1.0))
    _close(D.kl_divergence(p, D.Normal(tg.tensor(1.0), tg.tensor(2.0))),
           TD.kl_divergence(TD.Normal(torch.tensor(0.0), torch.tensor(1.0)),
                            TD.Normal(torch.tensor(1.0), torch.tensor(2.0))))

    @D.register_kl(MyNormal, D.Normal)
    def _kl_mine(p, q):
        return p.loc * 0 + 42.0
    assert float(D.kl_divergence(p, D.Normal(tg.tensor(1.0), tg.tensor(2.0)))) == 42.0
    for lib, mod in ((tg, D), (torch, TD)):
        with pytest.raises(NotImplementedError):
            mod.kl_divergence(mod.Bernoulli(probs=lib.tensor(0.3)),
                              mod.Normal(lib.tensor(0.0), lib.tensor(1.0)))


def test_cdf_and_icdf_of_normal_and_uniform_as_pytorch():
    (d, _, v), (e, _, ev) = _make(tg, "normal"), _make(torch, "normal")
    _close(d.cdf(v), e.cdf(ev))
    q = tg.tensor([[0.1, 0.5, 0.9], [0.3, 0.6, 0.99]])
    _close(d.icdf(q), e.icdf(torch.tensor(q.numpy())))
    (d, _, v), (e, _, ev) = _make(tg, "uniform"), _make(torch, "uniform")
    _close(d.cdf(v), e.cdf(ev))


# -- samples: their distribution, not their values ----------------------------------------
def test_normal_samples_have_the_distribution_and_follow_the_seed():
    tg.manual_seed(0)
    d = D.Normal(tg.tensor([1.0, -2.0]), tg.tensor([0.5, 3.0]))
    s = d.sample((20000,)).numpy()
    np.testing.assert_allclose(s.mean(0), [1.0, -2.0], atol=0.1)
    np.testing.assert_allclose(s.std(0), [0.5, 3.0], rtol=0.05)
    tg.manual_seed(0)
    assert np.array_equal(d.sample((20000,)).numpy(), s)
    assert not d.sample().requires_grad


def test_categorical_bernoulli_uniform_samples_have_the_distribution():
    tg.manual_seed(1)
    probs = np.array([0.1, 0.6, 0.3])
    s = D.Categorical(tg.tensor(probs)).sample((20000,)).numpy()
    assert s.dtype == np.int64
    np.testing.assert_allclose(np.bincount(s, minlength=3) / len(s), probs, atol=0.02)
    b = D.Bernoulli(logits=tg.tensor([-1.0, 2.0])).sample((20000,)).numpy()
    np.testing.assert_allclose(b.mean(0), 1 / (1 + np.exp([1.0, -2.0])), atol=0.02)
    assert set(np.unique(b)) <= {0.0, 1.0}
    u = D.Uniform(tg.tensor(-1.0), tg.tensor(3.0)).sample((20000,)).numpy()
    assert u.min() >= -1.0 and u.max() < 3.0
    np.testing.assert_allclose([u.mean(), u.var()], [1.0, 16 / 12], rtol=0.05)


def test_multivariate_normal_samples_have_the_covariance():
    tg.manual_seed(2)
    cov = L2 @ L2.T
    s = D.MultivariateNormal(tg.tensor([1.0, -1.0]), tg.tensor(cov)).sample((40000,)).numpy()
    np.testing.assert_allclose(s.mean(0), [1.0, -1.0], atol=0.05)
    np.testing.assert_allclose(np.cov(s.T), cov, atol=0.06)


def test_sample_is_cut_from_the_graph_and_rsample_is_not():
    loc = tg.tensor([0.0, 1.0], requires_grad=True)
    d = D.Normal(loc, 1.0)
    assert not d.sample().requires_grad
    assert d.rsample().requires_grad
    with pytest.raises(NotImplementedError):
        D.Categorical(tg.tensor([0.5, 0.5])).rsample()


# -- errors as PyTorch's ---------------------------------------------------------------
def _message(fn, lib):
    with pytest.raises(ValueError) as info:
        fn(lib, D if lib is tg else TD)
    return str(info.value).split("but found")[0]


@pytest.mark.parametrize("fn", [
    lambda lib, m: m.Normal(lib.tensor([0.0, 1.0]), lib.tensor([1.0, -1.0])),
    lambda lib, m: m.Normal(lib.zeros(2), lib.ones(2)).log_prob(lib.tensor([0.0, 1.0, 2.0])),
    lambda lib, m: m.Bernoulli(probs=lib.tensor([0.2, 1.5])),
    lambda lib, m: m.Bernoulli(probs=lib.tensor([0.2]), logits=lib.tensor([0.1])),
    lambda lib, m: m.Bernoulli(probs=lib.tensor([0.2])).log_prob(lib.tensor([0.5])),
    lambda lib, m: m.Categorical(probs=lib.tensor([0.2, -0.1, 0.9])),
    lambda lib, m: m.Categorical(logits=lib.tensor([0.2, 0.1])).log_prob(lib.tensor(2)),
    lambda lib, m: m.Categorical(),
    lambda lib, m: m.Uniform(lib.tensor(1.0), lib.tensor(0.0)),
    lambda lib, m: m.Uniform(lib.tensor(0.0), lib.tensor(1.0)).log_prob(lib.tensor(2.0)),
    lambda lib, m: m.MultivariateNormal(lib.tensor(0.0), scale_tril=lib.eye(1)),
    lambda lib, m: m.MultivariateNormal(lib.zeros(2)),
    lambda lib, m: m.MultivariateNormal(lib.zeros(2), scale_tril=lib.ones(2)),
    lambda lib, m: m.Independent(m.Normal(lib.zeros(2), lib.ones(2)), 2),
], ids=["scale<0", "value shape", "probs>1", "probs and logits", "bernoulli support",
        "simplex", "categorical support", "neither", "low>=high", "uniform support",
        "mvn loc 0-d", "mvn no matrix", "mvn 1-d matrix", "independent ndims"])
def test_invalid_arguments_raise_pytorchs_value_error(fn):
    assert _message(fn, tg) == _message(fn, torch)


def test_validate_args_false_skips_the_checks():
    d = D.Normal(tg.tensor(0.0), tg.tensor(-1.0), validate_args=False)
    assert math.isnan(float(d.log_prob(tg.tensor(0.0))))
