"""Activations at signed zeros, denormals, their kinks, infinities and NaN, against PyTorch:
values and gradients bit for bit (a -0. stays -0., a NaN stays NaN with PyTorch's gradient),
and second derivatives.  (Last-bit differences of PyTorch's own formulas are left out:
hardswish's gradient inside (-3, 3), hardsigmoid's float32 1/6.)"""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

XS = np.array([-0.0, 0.0, -1e-320, 1e-320, -2.0, 3.0, -3.0, 6.0, -6.0, 0.5, -0.5, 7.0,
               np.inf, -np.inf, np.nan])
EXACT = {
    "relu6": lambda F, x: F.relu6(x),
    "hardtanh": lambda F, x: F.hardtanh(x),
    "hardtanh(-2, 0.5)": lambda F, x: F.hardtanh(x, -2.0, 0.5),
    "hardshrink": lambda F, x: F.hardshrink(x),
    "threshold": lambda F, x: F.threshold(x, 0.5, -0.0),
    "threshold(-1, 2)": lambda F, x: F.threshold(x, -1.0, 2.0),
    "hardsigmoid (values)": lambda F, x: F.hardsigmoid(x),
    "hardswish (values)": lambda F, x: F.hardswish(x),
}


def _bits(a):
    return [repr(float(v)) for v in np.asarray(a, float).reshape(-1)]


def _run(L, fn, grads=True):
    x = L.tensor(XS, dtype=L.float64, requires_grad=True)
    y = fn(L.nn.functional, x)
    y.backward(L.ones_like(y))
    return _bits(y.detach().numpy()), _bits(x.grad.numpy()) if grads else None


@pytest.mark.parametrize("name", EXACT)
def test_values_and_gradients_bit_for_bit(name):
    grads = "(values)" not in name
    assert _run(tg, EXACT[name], grads) == _run(torch, EXACT[name], grads)


@pytest.mark.parametrize("name", ["hardsigmoid (values)", "hardswish (values)"])
def test_gradients_within_rounding(name):
    got, want = [], []
    for L, out in ((tg, got), (torch, want)):
        x = L.tensor(XS, dtype=L.float64, requires_grad=True)
        EXACT[name](L.nn.functional, x).sum().backward()
        out.append(x.grad.numpy())
    np.testing.assert_allclose(got[0], want[0], rtol=1e-7, atol=0)


def test_softshrink_keeps_a_nan():
    # (PyTorch's sign of a zero result depends on the element's place in its vectorised
    # loop: compared without it)
    got = []
    for L in (tg, torch):
        x = L.tensor(XS, dtype=L.float64, requires_grad=True)
        L.nn.functional.softshrink(x).sum().backward()
        got.append((np.abs(L.nn.functional.softshrink(x).detach().numpy()).tolist(),
                    x.grad.numpy().tolist()))
    np.testing.assert_array_equal(np.array(got[0][0]), np.array(got[1][0]))
    np.testing.assert_array_equal(np.array(got[0][1]), np.array(got[1][1]))


@pytest.mark.parametrize("name", [n for n in EXACT if "hardsigmoid" not in n])
def test_second_derivatives(name):   # (PyTorch cannot differentiate hardsigmoid's backward)
    pts = np.array([-4.0, -3.5, -2.0, -0.7, 0.3, 0.7, 2.5, 4.0, 7.5])   # (off the kinks)
    got = []
    for L in (tg, torch):
        x = L.tensor(pts, dtype=L.float64, requires_grad=True)
        g, = L.autograd.grad(EXACT[name](L.nn.functional, x).sum(), x, create_graph=True)
        h, = L.autograd.grad(g.sum(), x, allow_unused=True) if g.requires_grad else (None,)
        got.append(np.zeros(len(pts)) if h is None else h.detach().numpy())
    np.testing.assert_allclose(got[0], got[1], rtol=1e-12, atol=1e-15)
