#!/usr/bin/env python3
"""Tape optimisation benchmark: what ``tapegrad.optimize`` removes from compiled tapes, and
how long it takes.

Cases, each recorded with 0-d tensors in Python loops and compiled with ``tape.compile``:

* Rosenbrock, n = 200 and 20,000 (``t = t + 100*(x[i+1] - x[i]**2)**2 + (1 - x[i])**2``);
* a micrograd-style MLP 2-16-16-1 (tanh), mean squared error over 16 fixed samples; the
  inputs are the 337 parameters, the samples are Python numbers (tape constants);
* a synthetic stress case (n = 20,000): ``rosen(x) + rosen(x)`` with a third Rosenbrock
  of ``sin(x)`` computed and left unused, so that merging and dead-entry elimination
  both run their per-entry loops over a long tape.

For each: entries before and after each pass (folding, merging, dead entries), constants
before and after, the median time of ``optimize``, the replay's value + gradient at one
point before and after, and the largest gradient difference between the two tapes.

    python benchmarks/tape_optimize.py     # writes benchmarks/results/tape_optimize.json
"""
from __future__ import annotations

import copy
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
from tapegrad.replay.tape_passes import optimize  # noqa: E402

KEYS = ("op", "a", "b", "val0", "consts", "in_entries", "in_pos", "out", "guard_entries")
SIZES = (2, 16, 16, 1)


def rosen(x):
    t = 0.0
    for i in range(len(x) - 1):
        t = t + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return t


def stress(x):
    rosen([tg.sin(v) for v in x])     # computed, never used
    return rosen(x) + rosen(x)


def n_params():
    return sum((nin + 1) * nout for nin, nout in zip(SIZES, SIZES[1:]))


def mlp_loss(params, data):
    """Micrograd's MLP: a neuron is ``sum(w * x) + b``, tanh on the hidden layers."""
    it = iter(params)
    layers = [[([next(it) for _ in range(nin)], next(it)) for _ in range(nout)]
              for nin, nout in zip(SIZES, SIZES[1:])]
    loss = 0.0
    for x, target in data:
        h = x
        for k, layer in enumerate(layers):
            h = [sum((w * v for w, v in zip(ws, h)), b) for ws, b in layer]
            if k < len(layers) - 1:
                h = [tg.tanh(v) for v in h]
        loss = loss + (h[0] - target) ** 2
    return loss / len(data)


def record(fn, x0):
    with tg.Tape() as tape:
        xs = [tg.tensor(float(v), requires_grad=True) for v in x0]
        y = fn(xs)
    return tape.compile(xs, y, optimize=False)


def optimised(f, arrays):
    g = copy.copy(f)
    for k in KEYS:
        setattr(g, k, arrays[k])
    g._one_entry_each = len(set(g.in_pos.tolist())) == len(g.in_pos)
    g.guards = [(int(i), v, w) for i, (_, v, w) in zip(arrays["guard_entries"], f.guards)]
    return g


def best(fn, repeats):
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def bench(name, fn, x0, repeats):
    t0 = time.perf_counter()
    f = record(fn, x0)
    record_s = time.perf_counter() - t0
    args = [getattr(f, k) for k in KEYS]
    arrays, stats = optimize(*args)
    g = optimised(f, arrays)
    x1 = np.asarray(x0) + 0.01
    f.value_and_grad(x1), g.value_and_grad(x1)     # compile / load the kernels
    res = {"case": name, "inputs": len(x0), "record_and_compile_s": record_s, **stats,
           "optimize_s": best(lambda: optimize(*args), repeats),
           "value_and_grad_s": best(lambda: f.value_and_grad(x1), repeats),
           "value_and_grad_optimised_s": best(lambda: g.value_and_grad(x1), repeats)}
    (v, gr), (v2, gr2) = f.value_and_grad(x1), g.value_and_grad(x1)
    res["value_diff"] = abs(v - v2)
    res["max_grad_diff"] = float(np.max(np.abs(gr - gr2)))
    res["optimize_ns_per_entry"] = res["optimize_s"] / stats["entries"] * 1e9
    return res


def main():
    quick = "--quick" in sys.argv
    rng = np.random.default_rng(0)
    big = 2000 if quick else 20_000
    repeats = 3 if quick else 7
    moons = rng.uniform(-1, 1, (16, 2))
    data = [(list(p), float(np.sign(p[0] * p[1]))) for p in moons]
    cases = [("rosenbrock", rosen, rng.uniform(0.2, 0.8, 200)),
             ("rosenbrock", rosen, rng.uniform(0.2, 0.8, big)),
             ("mlp_2_16_16_1", lambda p: mlp_loss(p, data), rng.normal(0, 0.5, n_params())),
             ("stress_repeat_and_dead", stress, rng.uniform(0.2, 0.8, big))]
    out = {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(),
           "cpus": os.cpu_count(), "python": platform.python_version(),
           "numpy": np.__version__, "runs": []}
    for name, fn, x0 in cases:
        r = bench(name, fn, x0, repeats)
        out["runs"].append(r)
        print(f"\n{name}, {r['inputs']:,} inputs")
        print(f"  entries {r['entries']:,} -> fold {r['after_fold']:,} ({r['folded']} folded)"
              f" -> merge {r['after_merge']:,} -> dead {r['after_dead']:,};"
              f" constants {r['consts']} -> {r['consts_after']};"
              f" inputs dropped {r['inputs_dropped']}")
        print(f"  optimize {r['optimize_s'] * 1e3:.1f} ms "
              f"({r['optimize_ns_per_entry']:.0f} ns per entry)")
        print(f"  value + gradient {r['value_and_grad_s'] * 1e6:.1f} us -> "
              f"{r['value_and_grad_optimised_s'] * 1e6:.1f} us optimised; "
              f"max |grad diff| {r['max_grad_diff']:.1e}")
    path = HERE / "results" / "tape_optimize.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
