"""core/array_forward.py: ops NumPy computes as several ufuncs, as one Numba loop on small
arrays (the scalar formula, libm's exp), NumPy's expression above ``SMALL`` elements."""
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core.array_forward import SMALL, sigmoid_array

RNG = np.random.default_rng(7)
EDGES = np.array([0.0, -0.0, 1e-300, -745.0, -710.0, 710.0, 40.0, -40.0, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("shape", [(14,), (3, 5), (SMALL,), (2, 1, 4)])
def test_a_small_arrays_sigmoid_is_the_scalar_formula_elementwise(shape):
    x = RNG.normal(scale=8.0, size=shape)
    x.reshape(-1)[:min(x.size, len(EDGES))] = EDGES[:x.size]
    got = sigmoid_array(x)
    want = np.array([1.0 / (1.0 + math.exp(-v)) if v > -709.0 or math.isnan(v) else 0.0
                     for v in x.reshape(-1)]).reshape(shape)
    assert got.shape == shape and got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    # the tensor op takes it (and its scalar path agrees)
    t = tg.sigmoid(tg.tensor(x))
    np.testing.assert_array_equal(t.numpy(), want)
    assert [tg.sigmoid(tg.tensor(v)).item() for v in x.reshape(-1)[:5]] == list(want.reshape(-1)[:5])


@pytest.mark.parametrize("x", [RNG.normal(size=SMALL + 1), RNG.normal(size=(4, 4)).T,
                               RNG.normal(size=20).astype(np.float32), np.float64(0.5),
                               np.zeros((0, 3))])
def test_other_arrays_take_numpys_expression(x):
    got = sigmoid_array(x)
    want = 1.0 / (1.0 + np.exp(-x))
    assert np.shape(got) == np.shape(want) and np.result_type(got) == np.result_type(want)
    np.testing.assert_array_equal(got, want)


def test_a_small_sigmoids_gradient():
    x = tg.tensor(RNG.normal(size=14), requires_grad=True)
    s = tg.sigmoid(x)
    s.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), s.detach().numpy() * (1 - s.detach().numpy()),
                               rtol=1e-15)


def _foreign_float64(shape):
    """A float64 array whose dtype object is not NumPy's own (as an array made inside a
    kernel loaded from Numba's cache, or an unpickled one, has)."""
    import pickle
    d = pickle.loads(pickle.dumps(np.dtype(np.float64)))
    a = RNG.normal(size=shape).view(d)
    assert a.dtype is not np.dtype(np.float64) and a.dtype == np.float64
    return a


def test_values_hold_numpys_own_float64_dtype():
    # the fast paths test ``dtype is float64``: a value with another float64 dtype object took
    # the general path at every op
    f64 = np.dtype(np.float64)
    a = _foreign_float64((4, 3))
    assert tg.tensor(a)._value.dtype is f64
    from tapegrad.core.tensor import wrap
    assert wrap(a)._value.dtype is f64
    x = tg.tensor(RNG.normal(size=(4, 3)), requires_grad=True)
    for t in (tg.min(x, 0)[0], tg.max(x, 1)[0], tg.min(x * 1.0, 1).values, tg.sum(x, 0),
              tg.logsumexp(x, 1)):
        assert t._value.dtype is f64
