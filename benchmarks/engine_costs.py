#!/usr/bin/env python3
"""Engine costs: what a backward and a recorded op cost apart from the arithmetic, beside
PyTorch CPU (float64, one thread), medians.

(a) **backward with N unrelated graphs on the tape**: N = 0, 1,000, 5,000 small graphs
    (a 3-element array expression summed, half of them kept alive) recorded before a
    10-entry scalar graph whose ``backward(retain_graph=True)`` is timed.  Target: the same
    time for every N.
(b) **repeated evaluations**: a bundle-adjustment-like objective (100 residuals, each a
    small array expression of two 0-d parameters) whose Jacobian is taken with one
    ``backward(retain_graph=True)`` per residual, run 5 times on one tape; run 5 against
    run 1.  Target: 1.0x.
(c) **fixed cost of a tiny backward**: ``(w * 3.0).backward()`` on a 0-d leaf; and the
    same for a small array graph with a reduction (an array op with a Python backward):
    ``(x * 2.0).sin().sum().backward()`` on a 3-element leaf.
(d) **per-op record cost** on an 8-element array: ``y = y * 1.0001`` (y requires grad),
    against the NumPy ufunc alone.
(e) **log-sum-exp gradient**: ``logsumexp(x, 0).backward()`` at n = 2,500, 20,000, 160,000.

The backends run interleaved where they are timed side by side, so that a noisy machine
slows both alike; ratios are within one run.  Results: a table on stdout and JSON in
``benchmarks/results/engine_costs.json`` (``--out``).

Usage::

    python benchmarks/engine_costs.py            # full run (~1 minute)
    python benchmarks/engine_costs.py --quick    # fewer repeats
"""
from __future__ import annotations

import argparse
import os
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
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import tapegrad as tg  # noqa: E402

try:
    import torch
except ImportError:      # the PyTorch columns are left out
    torch = None

DEFAULT_OUT = HERE / "results" / "engine_costs.json"
perf = time.perf_counter


def interleaved(fns, repeats, warmup=3):
    """Call each ``fn`` of ``fns`` (name -> callable) in turn ``repeats`` times; returns the
    median time per call (seconds) per name."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {k: [] for k in fns}
    gc.collect()
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = perf()
            fn()
            times[k].append(perf() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def libs():
    return {"tapegrad": tg, **({"torch": torch} if torch is not None else {})}


def scalar(L, v):
    return L.tensor(v, dtype=L.float64, requires_grad=True)


def unrelated_graph(L, k):
    """A small graph with an array op and a reduction (a Python op on tapegrad's tape)."""
    w = scalar(L, 0.01 * k)
    return ((L.tensor([0.5, -1.0, 2.0], dtype=L.float64) * w).sin() * 2.0).sum()


def ten_entries(w):
    """A 10-entry graph (a leaf and nine ops) ending in a 0-d output."""
    y = w * 2.0
    y = y.sin() + 1.0
    y = y * y
    y = y.exp() - w
    y = y.tanh() * 3.0
    return y


# -- (a) backward with N unrelated graphs on the tape -------------------------------------
def bench_unrelated(ns, repeats):
    out = {}
    for n in ns:
        fns, keep = {}, []
        for name, L in libs().items():
            with tg.Tape():   # (a tape of its own for each N; PyTorch ignores it)
                others = [unrelated_graph(L, k) for k in range(n)][::2]   # half die
                w = scalar(L, 0.3)
                y = ten_entries(w)
            keep.append((others, y))
            fns[name] = (lambda y: lambda: y.backward(retain_graph=True))(y)
        out[n] = interleaved(fns, repeats)
    return out


# -- (b) repeated evaluations --------------------------------------------------------------
def jacobian_run(L, params, pairs):
    """One evaluation: residuals of parameter pairs, one backward per residual (a Jacobian
    row each), the rows collected as numbers."""
    v = L.tensor([0.5, -1.0, 2.0], dtype=L.float64)
    res = [((params[i] * v).sin() * params[j]).sum() + params[i] * 0.5 - params[j].exp() * 0.1
           for i, j in pairs]
    rows = []
    for r in res:
        r.backward(retain_graph=True)
        rows.append([0.0 if p.grad is None else float(p.grad) for p in params])
        for p in params:
            p.grad = None
    return rows


def bench_repeated(runs=5, residuals=100, nparams=20, repeats=5):
    rng = np.random.default_rng(0)
    pairs = [tuple(rng.choice(nparams, 2, replace=False)) for _ in range(residuals)]
    out = {}
    for name, L in libs().items():
        per_run = [[] for _ in range(runs)]
        for _ in range(repeats):
            with tg.Tape():   # every run records on this one tape (retain_graph=True)
                params = [scalar(L, float(v)) for v in rng.uniform(-1, 1, nparams)]
                for k in range(runs):
                    t0 = perf()
                    jacobian_run(L, params, pairs)
                    per_run[k].append(perf() - t0)
        med = [statistics.median(t) for t in per_run]
        out[name] = {"run_s": med, "last_over_first": med[-1] / med[0]}
    return out


# -- (c) fixed cost of a tiny backward -------------------------------------------------------
def bench_tiny(repeats):
    fns = {}
    for name, L in libs().items():
        w = scalar(L, 2.0)
        fns[name] = (lambda w: lambda: (w * 3.0).backward())(w)
    return interleaved(fns, repeats)


def bench_tiny_array(repeats):
    fns = {}
    for name, L in libs().items():
        x = L.tensor([1.0, 2.0, 3.0], dtype=L.float64, requires_grad=True)
        fns[name] = (lambda x: lambda: (x * 2.0).sin().sum().backward())(x)
    return interleaved(fns, repeats)


# -- (d) per-op record cost ----------------------------------------------------------------
def bench_record(repeats, chain=100):
    fns = {}
    for name, L in libs().items():
        x = L.tensor(np.linspace(0.1, 0.8, 8), dtype=L.float64, requires_grad=True)

        def run(x=x):
            y = x
            for _ in range(chain):
                y = y * 1.0001
        fns[name] = run
    xv = np.linspace(0.1, 0.8, 8)

    def ufunc():
        y = xv
        for _ in range(chain):
            y = y * 1.0001
    fns["numpy ufunc"] = ufunc
    return {k: v / chain for k, v in interleaved(fns, repeats).items()}


# -- (e) log-sum-exp gradient --------------------------------------------------------------
def bench_lse(ns, repeats):
    out = {}
    rng = np.random.default_rng(0)
    for n in ns:
        xv = rng.standard_normal(n)
        fns = {}
        for name, L in libs().items():
            x = L.tensor(xv, dtype=L.float64, requires_grad=True)
            fns[name] = (lambda L, x: lambda: L.logsumexp(x, 0).backward())(L, x)
        out[n] = interleaved(fns, repeats)
    return out


def fmt_t(s):
    if s is None:
        return "-"
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


def ratio(r):
    return f"{r['tapegrad'] / r['torch']:.2f}x" if "torch" in r else "-"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS/OpenMP/torch threads (set before NumPy loads; default 1)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if torch is not None:
        torch.set_num_threads(args.threads)
    reps = 30 if args.quick else 200

    unrelated = bench_unrelated((0, 1000, 5000), reps)
    repeated = bench_repeated(repeats=2 if args.quick else 5)
    tiny = bench_tiny(reps * 10)
    tiny_array = bench_tiny_array(reps * 10)
    record = bench_record(reps)
    lse = bench_lse((2500, 20000, 160000), max(10, reps // 4))

    print(f"\nfloat64, {args.threads} thread(s), medians; ratio = tapegrad / torch\n")
    print(f"{'case':<58} {'tapegrad':>10} {'torch':>10} {'ratio':>7}")
    for n, r in unrelated.items():
        row = f"(a) 10-entry backward, {n:,} unrelated graphs on the tape"
        print(f"{row:<58} {fmt_t(r['tapegrad']):>10} {fmt_t(r.get('torch')):>10} {ratio(r):>7}")
    for name, r in repeated.items():
        print(f"(b) Jacobian loop, {name}: run 1 {fmt_t(r['run_s'][0])}, run 5 "
              f"{fmt_t(r['run_s'][-1])}: run 5 / run 1 = {r['last_over_first']:.2f}x")
    print(f"{'(c) tiny backward (one op recorded + backward)':<58} {fmt_t(tiny['tapegrad']):>10} "
          f"{fmt_t(tiny.get('torch')):>10} {ratio(tiny):>7}")
    print(f"{'(c) same, (x * 2.0).sin().sum() on 3 elements':<58} "
          f"{fmt_t(tiny_array['tapegrad']):>10} {fmt_t(tiny_array.get('torch')):>10} "
          f"{ratio(tiny_array):>7}")
    print(f"{'(d) record one op on 8 elements':<58} {fmt_t(record['tapegrad']):>10} "
          f"{fmt_t(record.get('torch')):>10} {ratio(record):>7}   "
          f"(NumPy ufunc alone {fmt_t(record['numpy ufunc'])})")
    for n, r in lse.items():
        print(f"{'(e) logsumexp(x, 0).backward(), n = ' + format(n, ','):<58} "
              f"{fmt_t(r['tapegrad']):>10} {fmt_t(r.get('torch')):>10} {ratio(r):>7}")

    meta = {"date": _dt.datetime.now().isoformat(timespec="seconds"),
            "python": platform.python_version(), "numpy": np.__version__,
            "torch": getattr(torch, "__version__", None), "threads": args.threads,
            "machine": platform.machine(), "processor": platform.processor(),
            "cpus": os.cpu_count(), "repeats": reps}
    res = {"backward_with_unrelated_graphs_s": unrelated, "repeated_evaluations": repeated,
           "tiny_backward_s": tiny, "tiny_array_backward_s": tiny_array,
           "record_op_8_elements_s": record, "logsumexp_backward_s": lse}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": res}, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
