#!/usr/bin/env python3
"""The one-call walk against the general walk: the same backward with ``_flat_walk`` on and
off (``autograd.engine.FLAT_WALK``), in one process, interleaved, medians (float64, one
thread).  What each case is:

- **lse**: ``autograd.grad`` of log-sum-exp from primitives (``max + log(sum(exp(x - max)))``,
  GradBench's) at n = 2,500, 20,000 (entries of 16,384 elements or more run alone);
- **GMM d=2 n=100**: adbench's GMM gradient (indices, einsum, broadcasts, logsumexp);
- **BA residual**: one bundle-adjustment residual recorded, then its two Jacobian rows by
  ``autograd.grad`` (slices, selects, cross, dot; the first with ``retain_graph``);
- **Jacobian rows**: 6 rows of a 6-element function by ``grad_outputs=`` with
  ``retain_graph`` (a given output gradient);
- **k-means Hessian diagonal**: the walk from a ``create_graph`` gradient (the general walk
  both times: a recorded-gradient tape is refused), as a check that refusing costs nothing;
- **unrelated graphs**: ``(v * 2.).sin().sum().backward()`` on 8 elements with 5 live
  unrelated graphs of 6,000 elements on the tape (the one-call walk lays out every array of
  the tape under its limit, reached or not: the case it loses).

Only the backward is timed where the forward is recorded separately (BA residual: record +
2 grads, as the objective runs).  Results: a table on stdout and JSON in
``benchmarks/results/walks.json`` (``--out``).

Usage::

    python benchmarks/walks.py            # ~1 minute
    python benchmarks/walks.py --quick    # fewer repeats
"""
from __future__ import annotations

import argparse
import sys

if __name__ == "__main__":
    from _blas import limit_threads   # before numpy is imported
    limit_threads()

import datetime as _dt  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
for p in (str(REPO), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import tapegrad as tg  # noqa: E402
from tapegrad.autograd import engine  # noqa: E402

import adbench as B  # noqa: E402

DEFAULT_OUT = HERE / "results" / "walks.json"
perf = time.perf_counter


def lse_case(n):
    x = tg.tensor(np.random.default_rng(0).uniform(-5.0, 5.0, n), requires_grad=True)
    return lambda: tg.autograd.grad(B.lse_objective(tg, x), x)


def gmm_case():
    args = B.gmm_prepare(tg, B.gmm_input(2, 5, 100))
    return lambda: B.gmm_gradient(tg, *args)


def ba_case():
    cams, X, w, _, feats = B.ba_prepare(tg, B.ba_input(5, 20, 50))
    inputs = (cams[0], X[0], w[0])

    def run():
        err = B.compute_reproj_err(tg, *inputs, feats[0])
        tg.autograd.grad(err[0], inputs, retain_graph=True)
        tg.autograd.grad(err[1], inputs)
    return run


def jacobian_rows_case():
    x = tg.tensor(np.random.default_rng(0).standard_normal(6), requires_grad=True)
    rows = [tg.tensor(np.eye(6)[k]) for k in range(6)]

    def run():
        y = (x * x).sin() * x.sum()
        return [tg.autograd.grad(y, x, grad_outputs=e, retain_graph=True)[0] for e in rows]
    return run


def kmeans_hessian_case():
    points, centroids = B.kmeans_prepare(tg, B.kmeans_input(1000, 10, 8))
    ones = tg.ones_like(centroids)

    def setup():
        (J,) = tg.autograd.grad(B.kmeans_cost(tg, points, centroids), centroids,
                                create_graph=True)
        return J
    return setup, lambda J: tg.autograd.grad(J, centroids, grad_outputs=ones)


def unrelated_case(graphs=5):
    w = tg.tensor(np.random.rand(2000), requires_grad=True)
    v = tg.tensor(np.random.rand(8), requires_grad=True)

    def setup():
        keep = [(w * float(j)).exp() + 1.0 for j in range(graphs)]
        return keep, (v * 2.0).sin().sum()
    return setup, lambda made: made[1].backward()


def timed(run, repeats, setup=None):
    """Median seconds of ``run()`` (of ``run(setup())``, timing ``run`` only), with the
    one-call walk on and off in turn."""
    times = {True: [], False: []}
    for flag in (True, False):   # (warm-up: both paths compiled and cached)
        engine.FLAT_WALK = flag
        for _ in range(3):
            run() if setup is None else run(setup())
    gc.collect()
    try:
        for _ in range(repeats):
            for flag in (True, False):
                engine.FLAT_WALK = flag
                made = None if setup is None else setup()
                t0 = perf()
                run() if setup is None else run(made)
                times[flag].append(perf() - t0)
    finally:
        engine.FLAT_WALK = True
    return {"one_call": statistics.median(times[True]),
            "general": statistics.median(times[False])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--threads", type=int, default=1, help="BLAS/OpenMP threads (default 1)")
    ap.add_argument("--out", default=str(DEFAULT_OUT), help="JSON results")
    args = ap.parse_args()
    scale = 0.25 if args.quick else 1.0
    cases = [
        ("lse gradient, n = 2,500", lse_case(2500), 2000, None),
        ("lse gradient, n = 20,000", lse_case(20000), 600, None),
        ("GMM d=2 n=100 gradient", gmm_case(), 300, None),
        ("BA residual: record + 2 grads", ba_case(), 1000, None),
        ("Jacobian rows (6 x 6, grad_outputs=)", jacobian_rows_case(), 600, None),
    ]
    setup, run = kmeans_hessian_case()
    cases.append(("k-means Hessian-diagonal walk", run, 600, setup))
    setup, run = unrelated_case()
    cases.append(("backward with 5 unrelated graphs", run, 1000, setup))
    results = {}
    print(f"{'case':<42} {'one-call':>10} {'general':>10}   ratio")
    for name, run, repeats, setup in cases:
        r = timed(run, max(20, int(repeats * scale)), setup)
        results[name] = r
        print(f"{name:<42} {r['one_call'] * 1e6:8.1f} us {r['general'] * 1e6:8.1f} us   "
              f"{r['one_call'] / r['general']:.2f}x", flush=True)
    meta = {"date": _dt.datetime.now().isoformat(timespec="seconds"),
            "python": platform.python_version(), "numpy": np.__version__,
            "threads": args.threads, "quick": args.quick}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
