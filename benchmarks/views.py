#!/usr/bin/env python3
"""Element access and views: tapegrad beside PyTorch CPU, float64, one thread.

Per-element times (medians over repeats, the backends interleaved):

- ``sum(x)`` and ``for v in x`` over a 1-D tensor of 1000 elements (int indexing and
  ``__iter__``), without grad and with a leaf that requires grad;
- ``x[i]`` alone, and ``h[i]``, ``M[i, j]`` of tensors with history (recorded: one and two
  ``SelectBackward0`` nodes, as PyTorch's);
- a view (``x[:, 1]``, ``x.t()``) plus an in-place op through it, without grad.

Results: a table on stdout and JSON in ``benchmarks/results/views.json`` (``--out``).

Usage::

    python benchmarks/views.py            # prints a table (us per element / per call)
"""
from __future__ import annotations

import os
import sys

if __name__ == "__main__":
    from _blas import limit_threads   # before numpy is imported
    limit_threads()

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402
import tapegrad as tg  # noqa: E402

try:
    import torch
    torch.set_num_threads(1)
except ImportError:      # the PyTorch column is left out
    torch = None

perf = time.perf_counter
N = 1000


def timed(fns, repeats=30, warmup=3):
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


def cases(lib):
    data = np.linspace(0.0, 1.0, N)
    x = lib.tensor(data)
    w = lib.tensor(data, requires_grad=True)
    m = lib.tensor(np.ones((N, 4)))

    def iterate():
        for v in x:
            pass

    def index():
        for i in range(N):
            x[i]

    h = w * 1.0                                        # (a tensor with history)
    hm = lib.tensor(np.ones((25, N // 25)), requires_grad=True) * 1.0

    def index_recorded():
        for i in range(N):
            h[i]

    def index_matrix():
        for i in range(25):
            for j in range(N // 25):
                hm[i, j]

    def col_inplace():
        m[:, 1].add_(1.0)

    def t_inplace():
        m.t().mul_(1.0)

    return {
        "sum(x), no grad (per element)": (lambda: sum(x), N),
        "for v in x, no grad (per element)": (iterate, N),
        "x[i], no grad (per element)": (index, N),
        "sum(w), w requires grad (per element)": (lambda: sum(w), N),
        "h[i], h with history (per element)": (index_recorded, N),
        "M[i, j], M with history (per element)": (index_matrix, N),
        "m[:, 1].add_(1), no grad (per call)": (col_inplace, 1),
        "m.t().mul_(1), no grad (per call)": (t_inplace, 1),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(HERE / "results" / "views.json"))
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    libs = {"tapegrad": tg}
    if torch is not None:
        torch.set_default_dtype(torch.float64)
        libs["torch"] = torch
    table = {name: cases(lib) for name, lib in libs.items()}
    print(f"{'case':42s}" + "".join(f"{n:>12s}" for n in libs) + "   (us)")
    results = {}
    for case in table["tapegrad"]:
        fns = {n: table[n][case][0] for n in libs}
        t = timed(fns)
        per = table["tapegrad"][case][1]
        results[case] = {n: t[n] / per * 1e6 for n in libs}
        print(f"{case:42s}" + "".join(f"{results[case][n]:12.2f}" for n in libs))
    Path(args.out).write_text(json.dumps({"unit": "us", "cases": results}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
