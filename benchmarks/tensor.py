#!/usr/bin/env python3
"""Tensor-workload benchmark: tapegrad beside PyTorch CPU and NumPy, float64, one thread.

Three workloads, each timed step by step with the backends interleaved (so that a noisy
machine slows both alike), reported as medians:

(a) **MLP training step**: 784-256-10 MLP (``nn.Linear``, ReLU), batch 128, cross-entropy,
    backward, ``Adam.step()``, ``zero_grad``.  Target: tapegrad <= 1.5x PyTorch's time.
    Also timed separately: forward + loss, backward, optimizer step.
(b) **elementwise chain**: 50 elementwise ops (mul, add, sin, exp, tanh, repeated) on
    8-element tensors (three leaves that require grad), then ``sum().backward()``.  This is
    per-op overhead.  Target: tapegrad >= 3x faster than PyTorch.
(c) **matmul**: ``C = A @ B`` on 256x256 with ``C.backward(G)`` against NumPy doing the same
    three products by hand (``A @ B``, ``G @ B.T``, ``A.T @ G``).  Target: within 1.5x of NumPy.

Threads: BLAS and OpenMP are limited to ONE thread for every backend (``--threads`` to
change): ``OPENBLAS_NUM_THREADS``, ``OMP_NUM_THREADS``, ``MKL_NUM_THREADS`` and
``NUMBA_NUM_THREADS`` are set before NumPy is imported (they are read once, when the BLAS
library loads), and ``torch.set_num_threads``.  Without it, NumPy's OpenBLAS uses every core
and, on a small shared machine, its spinning threads slow everything else down (the MLP
training step measured 5x slower with 2 threads on 2 busy cores).

Results: a table on stdout and JSON in ``benchmarks/results/tensor.json`` (``--out``).

Usage::

    python benchmarks/tensor.py            # full run (~1 minute)
    python benchmarks/tensor.py --quick    # fewer repeats
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
import tapegrad.nn as nn  # noqa: E402
import tapegrad.nn.functional as F  # noqa: E402
import tapegrad.optim as optim  # noqa: E402

try:
    import torch
except ImportError:      # the PyTorch columns are left out
    torch = None

DEFAULT_OUT = HERE / "results" / "tensor.json"
perf = time.perf_counter
cpu_time = time.thread_time


def interleaved(fns, repeats, warmup=3, cpu=None):
    """Call each ``fn`` of ``fns`` (name -> callable) in turn ``repeats`` times; returns the
    per-call times (seconds) per name.  ``cpu``: a dict that receives the per-call thread
    CPU times likewise (on a shared machine a call that waits for a core counts its wait
    in the wall clock, not here)."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    times = {k: [] for k in fns}
    cpus = {k: [] for k in fns}
    gc.collect()
    for _ in range(repeats):
        for k, fn in fns.items():
            t0, c0 = perf(), cpu_time()
            fn()
            c1, t1 = cpu_time(), perf()
            times[k].append(t1 - t0)
            cpus[k].append(c1 - c0)
    if cpu is not None:
        cpu.update(cpus)
    return times


def med(ts):
    return statistics.median(ts)


# -- (a) MLP training step -------------------------------------------------------------------
def bench_mlp(repeats):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((128, 784))
    y = rng.integers(0, 10, 128)
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = optim.Adam(model.parameters(), lr=1e-3)
    xt, yt = tg.tensor(x), tg.tensor(y)
    parts = {"forward+loss": [], "backward": [], "optimizer step": []}

    def tg_step(record=False):
        t0 = perf()
        opt.zero_grad()
        loss = F.cross_entropy(model(xt), yt)
        t1 = perf()
        loss.backward()
        t2 = perf()
        opt.step()
        t3 = perf()
        if record:
            parts["forward+loss"].append(t1 - t0)
            parts["backward"].append(t2 - t1)
            parts["optimizer step"].append(t3 - t2)

    fns = {"tapegrad": lambda: tg_step(True)}
    if torch is not None:
        tmodel = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                     torch.nn.Linear(256, 10)).double()
        tmodel.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
        topt = torch.optim.Adam(tmodel.parameters(), lr=1e-3)
        tx, ty = torch.tensor(x), torch.tensor(y)
        tparts = {"forward+loss": [], "backward": [], "optimizer step": []}

        def torch_step():
            t0 = perf()
            topt.zero_grad()
            loss = torch.nn.functional.cross_entropy(tmodel(tx), ty)
            t1 = perf()
            loss.backward()
            t2 = perf()
            topt.step()
            t3 = perf()
            tparts["forward+loss"].append(t1 - t0)
            tparts["backward"].append(t2 - t1)
            tparts["optimizer step"].append(t3 - t2)

        fns["torch"] = torch_step
    cpu = {}
    times = interleaved(fns, repeats, cpu=cpu)
    out = {"tapegrad_s": med(times["tapegrad"]), "tapegrad_cpu_s": med(cpu["tapegrad"]),
           "tapegrad_parts_s": {k: med(v[-repeats:]) for k, v in parts.items()}}
    if torch is not None:
        out["torch_s"] = med(times["torch"])
        out["torch_cpu_s"] = med(cpu["torch"])
        out["tapegrad_over_torch_cpu"] = out["tapegrad_cpu_s"] / out["torch_cpu_s"]
        out["torch_parts_s"] = {k: med(v[-repeats:]) for k, v in tparts.items()}
        out["tapegrad_over_torch"] = out["tapegrad_s"] / out["torch_s"]
    return out


# -- (b) elementwise chain ---------------------------------------------------------------------
def chain(m, x, a, b):
    """50 elementwise ops: (mul, add, sin, exp, tanh) x 10."""
    h = x
    for _ in range(10):
        h = h * a
        h = h + b
        h = h.sin()
        h = h.exp()
        h = h.tanh()
    return h


def bench_chain(repeats):
    rng = np.random.default_rng(1)
    xv, av, bv = rng.random(8), 0.5 + rng.random(8), rng.random(8) - 0.5
    leaves = [tg.tensor(v, requires_grad=True) for v in (xv, av, bv)]

    def tg_run():
        for t in leaves:
            t.grad = None
        chain(tg, *leaves).sum().backward()

    fns = {"tapegrad": tg_run}
    check = {}
    if torch is not None:
        tleaves = [torch.tensor(v, requires_grad=True) for v in (xv, av, bv)]

        def torch_run():
            for t in tleaves:
                t.grad = None
            chain(torch, *tleaves).sum().backward()

        fns["torch"] = torch_run
        tg_run()
        torch_run()
        check["max_grad_diff_vs_torch"] = max(
            float(np.max(np.abs(np.asarray(g.grad._value) - t.grad.numpy())))
            for g, t in zip(leaves, tleaves))

    def numpy_forward():           # the floor: the same 50 NumPy ufunc calls, no gradient
        h = xv
        for _ in range(10):
            h = np.tanh(np.exp(np.sin(h * av + bv)))
        return h

    fns["numpy forward only"] = numpy_forward
    cpu = {}
    times = interleaved(fns, repeats, cpu=cpu)
    out = {"tapegrad_s": med(times["tapegrad"]), "tapegrad_cpu_s": med(cpu["tapegrad"]),
           "numpy_forward_only_s": med(times["numpy forward only"]), **check}
    if torch is not None:
        out["torch_s"] = med(times["torch"])
        out["torch_cpu_s"] = med(cpu["torch"])
        out["torch_over_tapegrad"] = out["torch_s"] / out["tapegrad_s"]
        out["torch_over_tapegrad_cpu"] = out["torch_cpu_s"] / out["tapegrad_cpu_s"]
    out["tapegrad_us_per_op"] = 1e6 * out["tapegrad_s"] / 52     # 50 ops + sum + backward
    return out


# -- (c) matmul -----------------------------------------------------------------------------------
def bench_matmul(repeats, n=256):
    rng = np.random.default_rng(2)
    av, bv, gv = (rng.standard_normal((n, n)) for _ in range(3))
    A, B, G = tg.tensor(av, requires_grad=True), tg.tensor(bv, requires_grad=True), tg.tensor(gv)

    def tg_run():
        A.grad = B.grad = None
        (A @ B).backward(G)

    def np_run():
        c = av @ bv
        ga = gv @ bv.T
        gb = av.T @ gv
        return c, ga, gb

    def np_fwd():
        return av @ bv

    fns = {"tapegrad": tg_run, "numpy 3 products": np_run, "numpy A @ B": np_fwd}
    if torch is not None:
        ta, tb, tgr = (torch.tensor(v, requires_grad=r) for v, r in ((av, True), (bv, True),
                                                                     (gv, False)))

        def torch_run():
            ta.grad = tb.grad = None
            (ta @ tb).backward(tgr)

        fns["torch"] = torch_run
    times = interleaved(fns, repeats)
    tg_run()
    c, ga, gb = np_run()
    out = {"tapegrad_s": med(times["tapegrad"]),
           "numpy_3_products_s": med(times["numpy 3 products"]),
           "numpy_forward_s": med(times["numpy A @ B"]),
           "max_grad_diff_vs_numpy": float(max(np.max(np.abs(A.grad.numpy() - ga)),
                                               np.max(np.abs(B.grad.numpy() - gb))))}
    out["tapegrad_over_numpy"] = out["tapegrad_s"] / out["numpy_3_products_s"]
    if torch is not None:
        out["torch_s"] = med(times["torch"])
        out["tapegrad_over_torch"] = out["tapegrad_s"] / out["torch_s"]
    return out


# -- main ------------------------------------------------------------------------------------------
def fmt_t(s):
    return f"{s * 1e6:,.0f} us" if s < 1e-2 else f"{s * 1e3:,.2f} ms"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS/OpenMP/torch threads (set before NumPy loads; default 1)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    if torch is not None:
        torch.set_num_threads(args.threads)
    reps = (20, 300, 20) if args.quick else (100, 2000, 100)

    res = {"mlp_step": bench_mlp(reps[0]), "elementwise_chain": bench_chain(reps[1]),
           "matmul_256": bench_matmul(reps[2])}

    a, b, c = res["mlp_step"], res["elementwise_chain"], res["matmul_256"]
    rows = [("(a) MLP 784-256-10 train step, batch 128", a["tapegrad_s"], a.get("torch_s"),
             "other", None,
             f"tapegrad/torch = {a['tapegrad_over_torch']:.2f}x (target <= 1.5x)"
             if "torch_s" in a else ""),
            ("(b) 50 elementwise ops on 8 floats + backward", b["tapegrad_s"], b.get("torch_s"),
             "numpy fwd only", b["numpy_forward_only_s"],
             f"torch/tapegrad = {b['torch_over_tapegrad']:.2f}x (target >= 3x)"
             if "torch_s" in b else ""),
            ("(c) 256x256 matmul forward + backward", c["tapegrad_s"], c.get("torch_s"),
             "numpy 3 products", c["numpy_3_products_s"],
             f"tapegrad/numpy = {c['tapegrad_over_numpy']:.2f}x (target <= 1.5x)")]
    print(f"\nfloat64, {args.threads} thread(s), medians\n")
    print(f"{'workload':<48} {'tapegrad':>11} {'torch':>11} {'numpy':>11}  ratio")
    for name, t, tt, _, npv, ratio in rows:
        print(f"{name:<48} {fmt_t(t):>11} {fmt_t(tt) if tt else '-':>11} "
              f"{fmt_t(npv) if npv else '-':>11}  {ratio}")
    print("\n(a) parts, tapegrad vs torch: " + ", ".join(
        f"{k} {fmt_t(v)} vs {fmt_t(a['torch_parts_s'][k]) if 'torch_parts_s' in a else '-'}"
        for k, v in a["tapegrad_parts_s"].items()))
    print(f"(b) tapegrad {b['tapegrad_us_per_op']:.1f} us per op all in; numpy forward alone "
          f"{fmt_t(b['numpy_forward_only_s'])}")
    print(f"(c) numpy A @ B alone {fmt_t(c['numpy_forward_s'])}")
    if "torch_cpu_s" in a:   # (the ratios to read on a loaded machine)
        print(f"thread CPU time, medians: (a) {fmt_t(a['tapegrad_cpu_s'])} vs "
              f"{fmt_t(a['torch_cpu_s'])}, tapegrad/torch = {a['tapegrad_over_torch_cpu']:.2f}x; "
              f"(b) {fmt_t(b['tapegrad_cpu_s'])} vs {fmt_t(b['torch_cpu_s'])}, "
              f"torch/tapegrad = {b['torch_over_tapegrad_cpu']:.2f}x")

    meta = {"date": _dt.datetime.now().isoformat(timespec="seconds"),
            "python": platform.python_version(), "numpy": np.__version__,
            "torch": getattr(torch, "__version__", None), "threads": args.threads,
            "env": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                     "MKL_NUM_THREADS")},
            "machine": platform.machine(), "processor": platform.processor(),
            "cpus": os.cpu_count(), "repeats": dict(zip(("mlp", "chain", "matmul"), reps))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": res}, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
