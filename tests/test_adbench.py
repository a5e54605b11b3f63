"""``benchmarks/adbench.py``: every ADBench/GradBench objective runs under tapegrad at a tiny
size, its gradient agrees with central differences, and (with torch) its values and
derivatives agree with PyTorch's on the same code, so that the benchmark's implementations
cannot rot.  Nothing here is timed."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg

REPO = Path(__file__).resolve().parent.parent


def _load_bench():
    path = REPO / "benchmarks" / "adbench.py"
    spec = importlib.util.spec_from_file_location("_adbench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


adbench = _load_bench()
PROBLEMS = sorted(adbench.PROBLEMS)


def test_every_problem_has_a_tiny_size():
    assert set(adbench.TINY) == set(adbench.PROBLEMS)


@pytest.mark.parametrize("problem", PROBLEMS)
def test_runs_under_tapegrad(problem):
    args = adbench.TINY[problem]
    value = adbench.evaluate(tg, problem, args, "value")
    derivative = adbench.evaluate(tg, problem, args, "derivative")
    assert value and derivative
    assert all(np.isfinite(a).all() for a in value + derivative)


def _numeric_directional(f, x, v, eps=1e-6):
    return (f(x + eps * v) - f(x - eps * v)) / (2 * eps)


@pytest.mark.parametrize("problem", ["gmm", "lstm", "lse", "kmeans"])
def test_gradient_matches_central_differences(problem):
    rng = np.random.default_rng(1)
    make_input = adbench.PROBLEMS[problem][0]
    data = make_input(*adbench.TINY[problem])
    if problem == "gmm":
        names = ("alphas", "means", "icf")

        def f(*ts):
            x = tg.tensor(data["x"])
            return adbench.gmm_objective(tg, *ts, x, data["gamma"], data["m"])
    elif problem == "lstm":
        names = ("main_params", "extra_params")

        def f(*ts):
            return adbench.lstm_objective(tg, *ts, tg.tensor(data["state"]),
                                          tg.tensor(data["sequence"]))
    elif problem == "lse":
        names = ("x",)

        def f(*ts):
            return adbench.lse_objective(tg, *ts)
    else:
        names = ("centroids",)

        def f(*ts):
            return adbench.kmeans_cost(tg, tg.tensor(data["points"]), *ts)
    leaves = [tg.tensor(data[k], requires_grad=True) for k in names]
    grads = tg.autograd.grad(f(*leaves), leaves)
    directions = [rng.standard_normal(np.shape(data[k])) for k in names]
    analytic = sum(float(np.sum(g.numpy() * v)) for g, v in zip(grads, directions))

    def along(t):
        with tg.no_grad():
            return f(*(tg.tensor(data[k] + t * v) for k, v in zip(names, directions))).item()

    numeric = _numeric_directional(along, 0.0, 1.0)
    assert analytic == pytest.approx(numeric, rel=1e-6, abs=1e-8)


def test_kmeans_direction_is_gradient_over_twice_the_counts():
    # the Hessian of the k-means cost in a centroid is 2 I per point assigned to it
    data = adbench.kmeans_input(*adbench.TINY["kmeans"])
    points, centroids = data["points"], data["centroids"]
    d2 = ((points[:, None, :] - centroids[None]) ** 2).sum(-1)
    nearest = d2.argmin(1)
    counts = np.bincount(nearest, minlength=len(centroids))
    J = np.stack([2 * (counts[j] * centroids[j] - points[nearest == j].sum(0))
                  for j in range(len(centroids))])
    (direction,) = adbench.evaluate(tg, "kmeans", adbench.TINY["kmeans"], "derivative")
    np.testing.assert_allclose(direction, J / (2 * counts[:, None]), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("problem", PROBLEMS)
@pytest.mark.parametrize("which", ["value", "derivative"])
def test_agrees_with_torch(problem, which):
    torch = pytest.importorskip("torch")
    args = adbench.TINY[problem]
    got = adbench.evaluate(tg, problem, args, which)
    want = adbench.evaluate(torch, problem, args, which)
    assert [g.shape for g in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


def test_the_script_records_a_failure_and_carries_on(monkeypatch, tmp_path):
    def broken(torch, x):
        if torch is tg:
            raise NotImplementedError("not in tapegrad")
        return adbench.lse_gradient(torch, x)

    def wrong(torch, x):
        return (adbench.lse_objective(torch, x) * (1.5 if torch is tg else 1.0),)

    monkeypatch.setitem(adbench.PROBLEMS, "broken", (
        adbench.lse_input, adbench.lse_prepare, wrong, broken, "gradient", {}))
    monkeypatch.setitem(adbench.TINY, "broken", (5,))
    out = tmp_path / "adbench.json"
    assert adbench.main(["--tiny", "--no-jax", "--only", "broken", "lse", "--out", str(out)]) == 0
    rows = {r["problem"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["lse"]["ok"] and "tapegrad_derivative_s" in rows["lse"]
    failures = rows["broken"]["failures"]
    assert any("NotImplementedError: not in tapegrad" in f for f in failures)
    if adbench.pytorch is not None:
        assert any("value differs from PyTorch" in f for f in failures)
    assert "**FAILED**" in out.with_suffix(".md").read_text()


def test_compare_flags_a_nan_a_shape_and_an_error_above_rtol():
    ok = np.array([1.0, -2.0])
    assert adbench.compare([ok], [ok.copy()]) == (0.0, True)
    assert not adbench.compare([np.array([1.0, np.nan])], [ok])[1]
    assert not adbench.compare([ok[:1]], [ok])[1]
    assert not adbench.compare([ok * (1 + 1e-6)], [ok])[1]
    assert adbench.compare([ok * (1 + 1e-10)], [ok])[1]
    assert not adbench.compare([ok], [ok, ok])[1]
