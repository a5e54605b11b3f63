"""The walk plan (``engine.WalkPlan``): a backward over a tape structured as the last one
reuses its walk index, reach and layout.  A reused plan must give what deriving them again
gives, and a tape that differs in anything the plan was derived from must not use it."""
import threading

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine


class _Counted(engine.WalkPlans):
    def __init__(self):
        super().__init__()
        self.counts = {"used": 0, "walks": 0}

    def find(self, *args):
        plan, new = super().find(*args)
        self.counts["walks"] += 1
        self.counts["used"] += plan is not None
        return plan, new


class _NoPlans(engine.WalkPlans):
    def find(self, *args):
        return None, None


@pytest.fixture
def plans(monkeypatch):
    """Counts of walks that used a plan (``used``) and walks in all (``walks``).  (Plans are
    the general walk's: a small tape of elementwise entries takes ``_flat_walk``, which
    needs none.)"""
    monkeypatch.setattr(engine, "FLAT_WALK", False)
    counted = _Counted()
    monkeypatch.setattr(engine, "WALK_PLANS", counted)
    return counted.counts


def _no_plans(monkeypatch):
    monkeypatch.setattr(engine, "WALK_PLANS", _NoPlans())


def _program(x, w, c):
    """Scalar, small-array and Python-op entries, a constant ``c`` and a large product."""
    h = (x * w).sin() + c * x.exp()
    big = (w.sum() * tg.ones(5000, dtype=tg.float64) * c).cos()
    return h.sum() * h[1] + big.mean() + (x ** 2).logsumexp(0)


def _grads(xv, wv, c):
    x = tg.tensor(xv, requires_grad=True)
    w = tg.tensor(wv, requires_grad=True)
    _program(x, w, c).backward()
    return x.grad.numpy().copy(), w.grad.numpy().copy()


def test_a_repeated_program_reuses_its_plan_with_new_values(plans, monkeypatch):
    rng = np.random.default_rng(0)
    points = [(rng.standard_normal(3), rng.standard_normal(3), float(rng.uniform(1, 2)))
              for _ in range(6)]
    got = [_grads(*p) for p in points]
    assert plans["used"] >= 3    # (the first walks derive the plan)
    _no_plans(monkeypatch)
    for p, (gx, gw) in zip(points, got):
        ex, ew = _grads(*p)
        np.testing.assert_array_equal(gx, ex)
        np.testing.assert_array_equal(gw, ew)


def test_sizes_numbers_and_seeds_that_differ_do_not_take_the_plan(plans, monkeypatch):
    def f(v, which):
        x = tg.tensor(v, requires_grad=True)
        a, b = (x * 2.0).sin().sum(), (x * 3.0).cos().sum()
        (a if which else b).backward()
        return x.grad.numpy().copy()

    runs = [(np.arange(3.0), 1), (np.arange(3.0), 1), (np.arange(3.0), 1),
            (np.arange(5.0), 1),              # same entries, other sizes
            (np.float64(2.0), 1),             # a number where an array was
            (np.arange(3.0), 0),              # the other output: another reach
            (np.arange(5000.0), 1), (np.arange(5000.0), 1), (np.arange(5000.0), 1),
            (np.arange(3.0), 1)]
    got = [f(v, w) for v, w in runs]
    assert plans["used"] >= 2
    for (v, which), g in zip(runs, got):
        expect = 2 * np.cos(2 * np.asarray(v)) if which else -3 * np.sin(3 * np.asarray(v))
        np.testing.assert_allclose(g, expect, rtol=1e-15, atol=0)


def test_hooks_and_retained_tapes_after_a_plan(plans):
    def f(hook, retain):
        x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = x * 2.0
        if hook:
            y.register_hook(lambda g: g * 10.0)
        z = y.sin().sum()
        z.backward(retain_graph=retain)
        if retain:    # (a tape walked before: its own index, the plan's reach)
            z.backward()
        return x.grad.numpy().copy()

    base = 2 * np.cos(2 * np.arange(1.0, 4.0))
    for hook, retain in [(0, 0), (0, 0), (0, 0), (1, 0), (1, 0), (1, 0), (0, 1), (0, 0)]:
        np.testing.assert_allclose(f(hook, retain), base * (10 if hook else 1) * (2 if retain else 1),
                                   rtol=1e-15)
    # the third walk without the hook and the third with it, the retained tape's walks and
    # the last walk (how many depends on whether the first records on a fresh tape)
    assert plans["used"] >= 3


def test_threads_walking_two_programs(plans):
    errors = []

    def work(k):
        try:
            for i in range(200):
                v = np.arange(1.0, 3.0 + k) + i
                x = tg.tensor(v, requires_grad=True)
                ((x * k).sin().sum() if k % 2 else (x ** 2).sum()).backward()
                expect = k * np.cos(k * v) if k % 2 else 2 * v
                np.testing.assert_allclose(x.grad.numpy(), expect, rtol=1e-14)
        except Exception as e:   # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def _same(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    return a == b


def test_fuzz_programs_run_again_give_what_they_gave(plans, monkeypatch):
    """Every fuzz program run three times in a row (the later runs walk with a plan, where
    their first backward does not retain its tape) observes what it did without plans."""
    pytest.importorskip("torch")
    from fuzz.programs import TG, program_at, run_steps

    programs = [program_at(11, k, None) for k in range(150)]
    with_plans = [[run_steps(p, TG).records for _ in range(3)] for p in programs]
    assert plans["used"] > 50
    _no_plans(monkeypatch)
    for p, runs in zip(programs, with_plans):
        alone = run_steps(p, TG).records
        for records in runs:
            assert _same(records, alone), p


def test_long_tapes_get_no_plan(plans, monkeypatch):
    monkeypatch.setattr(engine, "_PLAN_ENTRIES", 20)
    used = []
    for n in (3, 30):   # entries on the tape: 1 + 2 per step of the loop below
        before = plans["used"]
        for _ in range(4):
            x = tg.tensor(1.5, requires_grad=True)
            y = x
            for _ in range(n):
                y = (y * 0.5).sin()
            y.backward()
        used.append(plans["used"] - before)
    assert used[0] >= 1 and used[1] == 0, used


def test_a_retained_tape_walked_row_by_row(plans, monkeypatch):
    """A Jacobian loop: one retained tape walked for each row (one-hot gradients, so the
    tape does not grow), a hook added between two walks (the stops change, the entries
    do not)."""
    def rows(hook_at):
        x = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
        y = (x * x.flip(0)).sin() * 3.0
        out = []
        for i in range(3):
            if i == hook_at:
                y.register_hook(lambda g: g * 2.0)
            (g,) = tg.autograd.grad(y, x, grad_outputs=tg.eye(3, dtype=tg.float64)[i],
                                    retain_graph=True)
            out.append(g.numpy().copy())
        return np.array(out)

    got = [rows(h) for h in (None, None, 1, 2)]
    # (each call records on the one retained tape, further on: its third row walks the
    # tape again at the length of the second, which derived the plan)
    assert plans["used"] >= 2
    _no_plans(monkeypatch)
    for h, g in zip((None, None, 1, 2), got):
        np.testing.assert_array_equal(g, rows(h))
    assert not np.array_equal(got[0], got[2])   # (the hook doubled the later rows)
