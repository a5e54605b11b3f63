"""``optim.RMSprop``, ``optim.Adagrad``, optimizer state dicts, ``optim.lr_scheduler`` and
``nn.utils`` gradient clipping against PyTorch 2.13 (skipped without it), with torch-free
checks by hand.  (SGD and Adam options: ``tests/test_torch_nn.py``.)"""
import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn as nn
import tapegrad.optim as optim
from tapegrad.optim import lr_scheduler

try:
    import torch
except ImportError:   # the torch-free assertions still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def val(t):
    return np.asarray(t.detach()._value) if isinstance(t, tg.Tensor) else t.detach().numpy()


_INIT = [np.random.default_rng(1).normal(size=(3, 4)), np.random.default_rng(2).normal(size=4),
         np.array(0.7)]


def _params(m):
    return [m.tensor(v.copy() if v.ndim else float(v), dtype=m.float64, requires_grad=True)
            for v in _INIT]


def _loss(ps):
    return ((ps[0] * 1.5).sin().sum() + (ps[1] * ps[1]).sum() * 0.5
            + (ps[2] * ps[2] * ps[2]).tanh() + (ps[0].sum() * ps[2]))


def _steps(opt, ps, n):
    for _ in range(n):
        opt.zero_grad()
        _loss(ps).backward()
        opt.step()


# -- RMSprop / Adagrad ----------------------------------------------------------------------

def test_adagrad_and_rmsprop_by_hand():
    p = tg.tensor([1.0, -2.0], requires_grad=True)
    opt = optim.Adagrad([p], lr=0.5, eps=0.0)
    assert opt.state[p]["sum"].tolist() == [0.0, 0.0]       # state made at construction
    (p * p).sum().backward()                                 # g = 2p
    opt.step()
    np.testing.assert_allclose(val(p), [1.0 - 0.5, -2.0 + 0.5])   # p - lr g / |g|
    q = tg.tensor(3.0, requires_grad=True)
    opt = optim.RMSprop([q], lr=0.1, alpha=0.9, eps=0.0)
    (q * 2.0).backward()
    opt.step()
    assert math.isclose(q.item(), 3.0 - 0.1 * 2.0 / math.sqrt(0.1 * 4.0))
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.RMSprop([q], lr=-1)
    with pytest.raises(ValueError, match="Invalid lr_decay"):
        optim.Adagrad([q], lr_decay=-1)


OPTIMIZERS = [
    ("RMSprop", dict(lr=0.01)),
    ("RMSprop", dict(lr=0.01, alpha=0.9, eps=1e-6, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True)),
    ("RMSprop", dict(lr=0.01, momentum=0.5, centered=True, maximize=True, weight_decay=0.01)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3,
                     eps=1e-6)),
    ("Adagrad", dict(lr=0.1, maximize=True)),
    ("Adadelta", dict()),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1, maximize=True)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("AdamW", dict(lr=0.05, betas=(0.8, 0.9), weight_decay=0.1, amsgrad=True)),
]


@needs_torch
@pytest.mark.parametrize("name,kw", OPTIMIZERS,
                         ids=[f"{n}-{','.join(k for k in kw if k != 'lr') or 'plain'}"
                              for n, kw in OPTIMIZERS])
def test_optimizers_match_torch(name, kw):
    """Same parameters (a matrix, a vector, a 0-d scalar), same loss: the same parameters
    after every one of 8 steps; then the state dicts have PyTorch's keys, and a state dict
    loaded into a fresh optimizer continues the same trajectory."""
    gps, tps = _params(tg), _params(torch)
    gopt = getattr(optim, name)(gps, **kw)
    topt = getattr(torch.optim, name)(tps, **kw, foreach=False)
    for step in range(8):
        _steps(gopt, gps, 1)
        _steps(topt, tps, 1)
        for k, (g, t) in enumerate(zip(gps, tps)):
            np.testing.assert_allclose(val(g), val(t), rtol=1e-12, atol=1e-14,
                                       err_msg=f"step {step}, parameter {k}")
    gsd, tsd = gopt.state_dict(), topt.state_dict()
    assert sorted(gsd["state"]) == sorted(tsd["state"])
    for k in tsd["state"]:
        assert sorted(gsd["state"][k]) == sorted(tsd["state"][k])
        for n, v in tsd["state"][k].items():
            np.testing.assert_allclose(np.asarray(gsd["state"][k][n], float), val(v).astype(float),
                                       rtol=1e-12, atol=1e-14, err_msg=n)
    assert [g["params"] for g in gsd["param_groups"]] == [g["params"] for g in tsd["param_groups"]]
    fresh = _params(tg)
    for p, g in zip(fresh, gps):
        with tg.no_grad():
            p.copy_(g)
    gopt2 = getattr(optim, name)(fresh, **kw)
    gopt2.load_state_dict(gsd)
    _steps(gopt2, fresh, 3)
    _steps(topt, tps, 3)
    for g, t in zip(fresh, tps):
        np.testing.assert_allclose(val(g), val(t), rtol=1e-12, atol=1e-14)


def test_zero_grad_sets_none_by_default():
    p = tg.tensor([1.0], requires_grad=True)
    opt = optim.RMSprop([p])
    (p * 2).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and val(p.grad).tolist() == [0.0]
    opt.zero_grad()
    assert p.grad is None


# -- lr_scheduler ---------------------------------------------------------------------------

def test_step_lr_by_hand_and_state_dict():
    p = tg.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=1.0)
    s = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    seen = [s.get_last_lr()[0]]
    for _ in range(5):
        opt.step()
        s.step()
        seen.append(s.get_last_lr()[0])
    assert seen == [1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
    assert opt.param_groups[0]["lr"] == 0.25 and opt.param_groups[0]["initial_lr"] == 1.0
    state = s.state_dict()
    assert "optimizer" not in state and state["last_epoch"] == 5
    opt2 = optim.SGD([p], lr=0.25)
    s2 = lr_scheduler.StepLR(opt2, step_size=2, gamma=0.5)
    s2.load_state_dict(state)
    s2.step()
    assert s2.get_last_lr() == [0.125]
    with pytest.raises(TypeError, match="is not an Optimizer"):
        lr_scheduler.StepLR(object(), 2)


def _schedulers(m):
    S = m.optim.lr_scheduler
    return {
        "StepLR": lambda o: S.StepLR(o, step_size=3, gamma=0.3),
        "MultiStepLR": lambda o: S.MultiStepLR(o, milestones=[2, 5, 5, 9], gamma=0.5),
        "ExponentialLR": lambda o: S.ExponentialLR(o, gamma=0.9),
        "CosineAnnealingLR": lambda o: S.CosineAnnealingLR(o, T_max=5, eta_min=0.001),
        "LambdaLR": lambda o: S.LambdaLR(o, lambda e: 1.0 / (1 + e)),
        "LambdaLR-groups": lambda o: S.LambdaLR(o, [lambda e: 0.9 ** e, lambda e: 1 + e]),
        "MultiplicativeLR": lambda o: S.MultiplicativeLR(o, lambda e: 0.95),
        "ConstantLR": lambda o: S.ConstantLR(o, factor=0.5, total_iters=4),
        "LinearLR": lambda o: S.LinearLR(o, start_factor=0.2, total_iters=6),
        "PolynomialLR": lambda o: S.PolynomialLR(o, total_iters=8, power=2.0),
        "CosineAnnealingWarmRestarts": lambda o: S.CosineAnnealingWarmRestarts(o, 3, T_mult=2,
                                                                               eta_min=0.01),
        "OneCycleLR": lambda o: S.OneCycleLR(o, max_lr=[1.0, 0.5], total_steps=25),
        "OneCycleLR-3-phase": lambda o: S.OneCycleLR(o, max_lr=0.8, epochs=5, steps_per_epoch=5,
                                                     anneal_strategy="linear",
                                                     three_phase=True),
        "SequentialLR": lambda o: S.SequentialLR(o, [S.LinearLR(o, 0.1, total_iters=4),
                                                     S.ExponentialLR(o, 0.8)], milestones=[4]),
        "ChainedScheduler": lambda o: S.ChainedScheduler([S.ConstantLR(o, 0.5, 3),
                                                          S.ExponentialLR(o, 0.9)]),
    }


@needs_torch
@pytest.mark.parametrize("name", list(_schedulers(tg)))
def test_schedulers_match_torch(name):
    """Two parameter groups, 20 epochs: the same learning rates every epoch (exactly), and
    the same state dict."""
    def make(m):
        a, b = (m.tensor([1.0], requires_grad=True) for _ in range(2))
        o = m.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.3}], lr=0.1, momentum=0.9)
        return o, _schedulers(m)[name](o)

    (go, gs), (to, ts) = make(tg), make(torch)
    assert gs.get_last_lr() == ts.get_last_lr()
    for epoch in range(24):
        go.step()
        to.step()
        gs.step()
        ts.step()
        assert gs.get_last_lr() == ts.get_last_lr(), f"epoch {epoch}"
        for g, t in zip(go.param_groups, to.param_groups):
            assert (g["lr"], g["momentum"]) == (t["lr"], t["momentum"])
    tsd = ts.state_dict()
    gsd = gs.state_dict()
    for key in ("last_epoch", "base_lrs", "_last_lr", "_step_count"):
        assert gsd.get(key) == tsd.get(key), key


@needs_torch
def test_reduce_lr_on_plateau_matches_torch():
    metrics = [1.0, 0.9, 0.95, 0.95, 0.95, 0.94, 0.96, 0.97, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6]
    for kw in ({"patience": 2}, {"mode": "max", "factor": 0.5, "patience": 1, "cooldown": 2},
               {"threshold": 0.1, "threshold_mode": "abs", "patience": 0, "min_lr": 0.02}):
        runs = []
        for m in (tg, torch):
            p = m.tensor([1.0], requires_grad=True)
            o = m.optim.SGD([p], lr=0.1)
            s = m.optim.lr_scheduler.ReduceLROnPlateau(o, **kw)
            lrs = []
            for v in metrics:
                s.step(v)
                lrs.append(s.get_last_lr())
            runs.append((lrs, s.num_bad_epochs, s.best))
        assert runs[0] == runs[1], kw


# -- gradient clipping ----------------------------------------------------------------------

def test_clip_grad_norm_by_hand():
    a = tg.tensor([3.0, 0.0], requires_grad=True)
    b = tg.tensor(4.0, requires_grad=True)
    (a * tg.tensor([1.0, 0.0])).sum().backward()
    (b * 1.0).backward()
    a.grad = tg.tensor([3.0, 0.0])
    b.grad = tg.tensor(4.0)
    total = nn.utils.clip_grad_norm_([a, b], max_norm=1.0)
    assert total.item() == 5.0
    np.testing.assert_allclose(val(a.grad), [3.0 / (5.0 + 1e-6), 0.0])
    assert math.isclose(b.grad.item(), 4.0 / (5.0 + 1e-6))
    assert nn.utils.clip_grad_norm_(a, 10.0).item() == pytest.approx(3.0 / (5.0 + 1e-6))
    nn.utils.clip_grad_value_([a, b], 0.1)
    np.testing.assert_allclose(val(a.grad), [0.1, 0.0])
    b.grad = tg.tensor(float("inf"))
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([a, b], 1.0, error_if_nonfinite=True)
    v = nn.utils.parameters_to_vector([a, b])
    assert v.shape == (3,)
    nn.utils.vector_to_parameters(tg.tensor([1.0, 2.0, 3.0]), [a, b])
    assert val(a).tolist() == [1.0, 2.0] and b.item() == 3.0


@needs_torch
@pytest.mark.parametrize("norm_type", [2.0, 1.0, math.inf, 3.0])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    rng = np.random.default_rng(3)
    grads = [rng.normal(size=(3, 4)), rng.normal(size=5), np.array(1.5)]
    outs = []
    for m in (tg, torch):
        ps = [m.tensor(g.copy(), dtype=m.float64, requires_grad=True) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = m.tensor(g.copy(), dtype=m.float64)
        total = (nn.utils if m is tg else torch.nn.utils).clip_grad_norm_(ps, max_norm,
                                                                          norm_type=norm_type)
        outs.append((float(total), [val(p.grad) for p in ps]))
    assert outs[0][0] == pytest.approx(outs[1][0], rel=1e-13)
    for a, b in zip(outs[0][1], outs[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-13)



# -- LBFGS ----------------------------------------------------------------------------------

def test_lbfgs_minimises_a_quadratic():
    a = np.array([[3.0, 1.0], [1.0, 2.0]])
    b = np.array([1.0, -1.0])
    x = tg.tensor([0.0, 0.0], requires_grad=True)
    opt = optim.LBFGS([x], lr=1, max_iter=50, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = 0.5 * (x @ tg.tensor(a) @ x) - (tg.tensor(b) * x).sum()
        loss.backward()
        return loss

    opt.step(closure)
    np.testing.assert_allclose(val(x), np.linalg.solve(a, b), rtol=1e-6)
    with pytest.raises(ValueError, match="parameter groups"):
        optim.LBFGS([{"params": [x]}, {"params": [tg.tensor(1.0, requires_grad=True)]}])


def _bounded_loss(ps):
    return ((ps[0] * 1.5).sin().sum() + (ps[0] * ps[0]).sum() * 0.3
            + (ps[1] * ps[1]).sum() * 0.5 + (ps[2] * ps[2] * ps[2]).tanh() + ps[2] * ps[2])


@needs_torch
@pytest.mark.parametrize("kw", [dict(lr=0.5, max_iter=5), dict(lr=1, history_size=3),
                                dict(lr=1, max_iter=10, line_search_fn="strong_wolfe")],
                         ids=["fixed-step", "short-history", "strong-wolfe"])
def test_lbfgs_matches_torch(kw):
    gps, tps = _params(tg), _params(torch)
    gopt, topt = optim.LBFGS(gps, **kw), torch.optim.LBFGS(tps, **kw)
    for step in range(3):
        losses = []
        for ps, opt in ((gps, gopt), (tps, topt)):
            def closure(ps=ps, opt=opt):
                opt.zero_grad()
                loss = _bounded_loss(ps)
                loss.backward()
                return loss
            losses.append(float(opt.step(closure).detach()))
        assert losses[0] == pytest.approx(losses[1], rel=1e-10), f"step {step}"
        for k, (g, t) in enumerate(zip(gps, tps)):
            np.testing.assert_allclose(val(g), val(t), rtol=1e-9, atol=1e-11,
                                       err_msg=f"step {step}, parameter {k}")
    gs, ts = gopt.state[gps[0]], topt.state[tps[0]]
    assert (gs["n_iter"], gs["func_evals"]) == (ts["n_iter"], ts["func_evals"])
