"""The float walk's shortcuts (``engine.walk_tape``): a full ``sum()``/``mean()`` whose
gradient the walk adds itself instead of calling the rule, without a grad-mode switch when
no Python code runs.  Each case runs in every walk (``both_walks``: the recorded walk calls
the rules) and against PyTorch: values, signs of zeros, hooks attached during the walk,
freed graphs."""
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.autograd.gradcheck import gradcheck

torch = pytest.importorskip("torch")


def _pair(values):
    x = tg.tensor(np.array(values, dtype=np.float64), requires_grad=True)
    xt = torch.tensor(np.array(values, dtype=np.float64), requires_grad=True)
    return x, xt


def _same(g, gt):
    """Equal values and equal signs of zeros (a gradient of -0. must not come back +0.)."""
    a = np.asarray(g._value, dtype=np.float64).reshape(-1)
    b = gt.detach().numpy().astype(np.float64).reshape(-1)
    assert a.shape == b.shape
    np.testing.assert_allclose(a, b, rtol=1e-13, atol=0)
    assert (np.signbit(a) == np.signbit(b)).all(), (a, b)


REDUCTIONS = ["sum", "mean"]
# 0-d, one element, empty, a few, and large (its adjoint outside the flat layout)
SHAPES = [(), (1,), (0,), (3,), (2, 3), (5000,)]


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("scale", [2.0, -0.0, 0.0])
def test_full_reduction_gradient_as_pytorch(both_walks, name, shape, scale):
    rng = np.random.default_rng(len(shape) + sum(shape))
    x, xt = _pair(rng.standard_normal(shape))
    (getattr((x * 1.5).sin(), name)() * scale).backward()
    (getattr((xt * 1.5).sin(), name)() * scale).backward()
    _same(x.grad, xt.grad)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_of_a_leaf_and_fan_out(both_walks, name):
    x, xt = _pair([0.5, -0.0, 2.0])
    for v, lib in ((x, tg), (xt, torch)):
        w = lib.tensor([[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]], dtype=lib.float64,
                       requires_grad=True)
        y = getattr(v, name)() * 3.0 + getattr(v @ w, name)() - getattr(v * v, name)()
        y.backward()
        (x if lib is tg else xt).w = w
    _same(x.grad, xt.grad)
    _same(x.w.grad, xt.w.grad)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_seeded_reduction_and_retained_graph_accumulate(both_walks, name):
    x, xt = _pair([1.0, -2.0, 3.0, 0.5])
    y, yt = getattr(x.exp(), name)(), getattr(xt.exp(), name)()
    y.backward(tg.tensor(-0.0), retain_graph=True)
    yt.backward(torch.tensor(-0.0, dtype=torch.float64), retain_graph=True)
    _same(x.grad, xt.grad)
    y.backward(tg.tensor(2.0))
    yt.backward(torch.tensor(2.0, dtype=torch.float64))
    _same(x.grad, xt.grad)


def test_second_backward_through_freed_sum(both_walks):
    # sum's rule saves nothing: PyTorch runs it again; the exp below it saved its result
    x, xt = _pair([1.0, 2.0])
    y, yt = x.sum(), xt.sum()
    y.backward()
    yt.backward()
    y.backward()
    yt.backward()
    _same(x.grad, xt.grad)
    z, zt = x.exp().sum(), xt.exp().sum()
    z.backward()
    zt.backward()
    with pytest.raises(RuntimeError) as theirs:
        zt.backward()
    with pytest.raises(RuntimeError) as ours:
        z.backward()
    assert str(ours.value).split(".")[0] == str(theirs.value).split(".")[0]


def test_hook_attached_to_the_sum_during_the_walk(both_walks):
    # a tensor hook on the sum's result runs first and attaches a prehook to the sum's
    # node: the walk must call it (no shortcut decided before the hook ran)
    x, xt = _pair([0.25, -1.0, 4.0])
    seen = []
    for v, lib in ((x, tg), (xt, torch)):
        s = (v * 2.0).sum()

        def attach(g, s=s):
            s.grad_fn.register_prehook(lambda grads: (grads[0] * 10.0,))
            return g * 3.0
        s.register_hook(attach)
        s.backward()
        seen.append(s.grad_fn.name())
    assert seen[0] == seen[1] == "SumBackward0"
    _same(x.grad, xt.grad)


def _values(g):
    return g.detach().numpy().copy() if isinstance(g, torch.Tensor) else np.array(g._value)


@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_under_no_grad_mode_and_hooks_on_input(both_walks, name):
    # grad mode as the caller left it; a hook on the reduced tensor sees the spread gradient
    x, xt = _pair([1.0, 2.0, 3.0])
    seen = []
    for v, lib in ((x, tg), (xt, torch)):
        h = v * 2.0
        h.register_hook(lambda g: seen.append(_values(g)) or g * -1.0)
        y = getattr(h, name)()
        with lib.no_grad():
            y.backward()
            assert not lib.is_grad_enabled()
        assert lib.is_grad_enabled()
    np.testing.assert_array_equal(seen[0], seen[1])
    _same(x.grad, xt.grad)


def test_reduction_with_inputs_and_grad(both_walks):
    x, xt = _pair([0.5, 1.5])
    y, yt = (x * x).mean() + x.sum(), (xt * xt).mean() + xt.sum()
    (g,) = tg.autograd.grad(y, x)
    (gt,) = torch.autograd.grad(yt, xt)
    _same(g, gt)


def test_reduction_gradcheck():
    x = tg.tensor(np.array([[0.3, -0.7], [1.1, 0.2]]), requires_grad=True)
    assert gradcheck(lambda v: (v.sin().sum() * v.exp().mean()), (x,))


def test_no_grad_mode_switch_without_python_at_stops(monkeypatch):
    # a walk whose only stop is a full sum runs no Python rule: its rule is never called
    calls = []

    def counting(real):
        def counted(*args):
            calls.append(args)
            return real(*args)
        return counted
    monkeypatch.setattr(engine, "pyop_backward", counting(engine.pyop_backward))
    monkeypatch.setattr(engine, "pyop_numpy_backward", counting(engine.pyop_numpy_backward))
    monkeypatch.setattr(engine, "spread_grad", counting(engine.spread_grad))
    x = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    (x * 3.0).sum().backward()
    assert calls == []
    assert x.grad._value.tolist() == [3.0, 3.0]
    x.sum(dim=0).backward()   # (with a dim: the walk stops there, spread_grad)
    assert len(calls) == 1
    assert math.isclose(x.grad._value[0], 4.0)
