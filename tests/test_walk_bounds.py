"""A backward walks the graph it reaches, not the whole tape: unrelated graphs (live or dead)
recorded before it change neither its gradients nor the range of entries it sweeps, and
repeated evaluations on one tape sweep the same range every time.  The swept range is
read from the arguments the walk hands the Numba sweep (a structural check, no timing)."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.core import kernels

try:
    import torch
except ImportError:
    torch = None


@pytest.fixture
def swept(monkeypatch):
    """Entries the Numba sweep is asked to walk, summed over the calls since the last reset.
    (The general walk's: a small tape of elementwise entries takes one sweep call down
    from the seed, ``_flat_walk``, which ends at the last entry it reached.)"""
    monkeypatch.setattr(engine, "FLAT_WALK", False)
    seen = []
    sweep = kernels.reverse

    def recording_sweep(*args):
        start, stop = args[14], args[15]
        seen.append(start - stop)
        return sweep(*args)

    monkeypatch.setattr(kernels, "reverse", recording_sweep)
    return seen


def small_graph(L, w):
    y = (w * 2.0).sin() + 1.0
    return (y * y).exp() - w


def test_unrelated_graphs_change_neither_gradients_nor_the_swept_range(swept):
    with tg.Tape():
        w = tg.tensor(0.3, requires_grad=True)
        small_graph(tg, w).backward()
        alone, grad_alone = sum(swept), w.grad.item()
    swept.clear()
    with tg.Tape():
        live = [small_graph(tg, tg.tensor(0.1 * k, requires_grad=True)) for k in range(1000)]
        for k in range(1000):   # dead ones too: results dropped at once
            small_graph(tg, tg.tensor(0.2 * k, requires_grad=True))
        w = tg.tensor(0.3, requires_grad=True)
        small_graph(tg, w).backward()
    assert len(live) == 1000 and sum(swept) == alone
    assert w.grad.item() == grad_alone


def test_array_graphs_after_unrelated_ones_get_the_same_gradients():
    x0 = np.linspace(-1.0, 1.0, 8)
    with tg.Tape():
        x = tg.tensor(x0, requires_grad=True)
        ((x * 2.0).sin() * x).sum().backward()
        want = x.grad.numpy().copy()
    with tg.Tape():
        keep = [((tg.tensor(x0 + k, requires_grad=True) * 3.0).sin()).sum() for k in range(1000)]
        x = tg.tensor(x0, requires_grad=True)
        ((x * 2.0).sin() * x).sum().backward()
    assert len(keep) == 1000
    assert np.array_equal(x.grad.numpy(), want)
    if torch is not None:
        t = torch.tensor(x0, requires_grad=True)
        ((t * 2.0).sin() * t).sum().backward()
        assert np.allclose(t.grad.numpy(), want, rtol=1e-12, atol=0)


def jacobian(params, pairs):
    rows = []
    for i, j in pairs:
        r = (params[i] * params[j]).sin() - params[j].exp() * 0.1
        r.backward(retain_graph=True)
        rows.append([0.0 if p.grad is None else p.grad.item() for p in params])
        for p in params:
            p.grad = None
    return rows


def test_repeated_evaluations_sweep_the_same_range(swept):
    """A Jacobian loop (one backward(retain_graph=True) per residual) run five times on one
    tape: the leaves stay at the bottom of the tape, yet every run sweeps what the first
    did and gets the same rows."""
    pairs = [(0, 1), (1, 2), (2, 0), (3, 1)]
    with tg.Tape() as tape:
        params = [tg.tensor(v, requires_grad=True) for v in (0.5, -0.3, 0.8, 1.1)]
        first = jacobian(params, pairs)
        per_run = [sum(swept)]
        for _ in range(4):
            swept.clear()
            assert jacobian(params, pairs) == first
            per_run.append(sum(swept))
    assert len(tape) > 4 * 5 * len(pairs)        # every run stayed on the tape
    assert per_run == [per_run[0]] * 5


def test_grad_with_inputs_after_many_graphs(swept):
    """``autograd.grad(..., inputs)`` (what ``functional.vjp`` calls) works out which
    entries lead to the inputs over the walk's range only, and gets PyTorch's values."""
    with tg.Tape():
        x = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
        outs = [((x * k).sin() * x).sum() for k in range(1, 300)]
        g = tg.autograd.grad(outs[-1], x)[0]
        g0 = tg.autograd.grad(outs[0], x)[0]
    assert max(swept) < 20
    k = 299.0
    xv = np.array([0.5, -1.0, 2.0])
    assert np.allclose(g.numpy(), k * np.cos(k * xv) * xv + np.sin(k * xv))
    assert np.allclose(g0.numpy(), np.cos(xv) * xv + np.sin(xv))


def test_a_backward_frees_only_the_graph_it_walked():
    with tg.Tape():
        a = tg.tensor(0.7, requires_grad=True)
        ya = small_graph(tg, a)
        b = tg.tensor(0.2, requires_grad=True)
        yb = small_graph(tg, b)
        yb.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            yb.backward()
        ya.backward()      # a graph below the freed one is untouched
    assert a.grad is not None


# -- create_graph through min / max with indices (k-means' Newton direction) ---------------

def kmeans_loss(L, x, c):
    d = ((x[:, None, :] - c[None, :, :]) ** 2).sum(-1)
    m, idx = d.min(dim=1)
    far, _ = d.max(dim=0)
    return m.sum() + 0.1 * far.sum() + ((x - c[idx]) ** 2).sum()


@pytest.mark.skipif(torch is None, reason="compares with PyTorch")
def test_newton_direction_through_min_max_with_indices_matches_torch():
    rng = np.random.default_rng(3)
    X, C = rng.standard_normal((12, 2)), rng.standard_normal((3, 2))
    got = []
    for L in (tg, torch):
        x = L.tensor(X)
        c = L.tensor(C, requires_grad=True)
        g, = L.autograd.grad(kmeans_loss(L, x, c), c, create_graph=True)
        H = L.stack([L.autograd.grad(g.reshape(-1)[k], c, retain_graph=True)[0].reshape(-1)
                     for k in range(C.size)])
        v = L.ones_like(c)
        hv, = L.autograd.grad((g * v).sum(), c)
        got.append((g.detach().numpy().copy(), H.numpy().copy(), hv.numpy().copy()))
    for ours, theirs in zip(*got):
        assert np.allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("which", ["min", "max"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, True), (-1, False)])
def test_second_derivative_through_min_max_with_indices(which, dim, keepdim):
    c = tg.tensor(np.random.default_rng(4).standard_normal((3, 4)), requires_grad=True)

    def f(c):
        values, indices = getattr(c ** 3, which)(dim=dim, keepdim=keepdim)
        assert indices.dtype == tg.int64
        return values * values.sin()

    assert tg.autograd.gradcheck(f, (c,))
    assert tg.autograd.gradgradcheck(f, (c,))


@pytest.mark.parametrize("n", [3, 100])   # a flush checks a few entries in Python, more in NumPy
def test_a_broken_tape_is_not_swept(n):
    with tg.Tape() as tape:
        x = tg.tensor(1.0, requires_grad=True)
        y = x
        for _ in range(n):
            y = y * 1.5
        tape._rec_a[-1] = len(tape) + 5   # an operand recorded after its op
        with pytest.raises(RuntimeError, match="refers to a later entry"):
            y.backward()
