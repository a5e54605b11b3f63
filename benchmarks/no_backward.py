"""Evaluations without backward: time per call and memory stay flat.

A line search or a validation loss evaluates a function of parameters that require grad and
drops the result without calling backward().  PyTorch frees such a graph when its outputs
die; tapegrad records onto a default tape that retires after 65,536 entries or 64 MB of
arrays, or past 4 MB once no result of it is alive, and hands over to a fresh one between
expressions, so a tape whose results are all gone is freed.  This script runs 100,000 evaluations of ``float(((W @ x).tanh() ** 2).sum())``
(small arrays: the shape that grew the tape without bound before) and 3,000 of a k-means
cost over 1000 x 10 x 8 arrays (~1.4 MB of values a call, which a hand-over in the middle of
an expression kept alive in a chain of tapes: 2 GB after 1,500 calls), and prints the median
time per call and the process's resident memory for each block; both must stay flat.
Results: ``results/no_backward.json``.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _blas import limit_threads   # before numpy is imported
    limit_threads()

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402

HERE = Path(__file__).resolve().parent


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def run(name, evaluate, calls, block):
    print(name)
    rows = []
    for start in range(0, calls, block):
        times = []
        for _ in range(block):
            t0 = time.perf_counter()
            evaluate()
            times.append(time.perf_counter() - t0)
        rows.append({"calls": start + block, "median_us": float(np.median(times) * 1e6),
                     "rss_mb": rss_mb(), "tape_entries": len(tg.current_tape())})
        r = rows[-1]
        print(f"{r['calls']:>7,} calls: {r['median_us']:8.1f} us/call, RSS {r['rss_mb']:6.1f} MB, "
              f"default tape {r['tape_entries']:>6,} entries")
    first, last = rows[0], rows[-1]
    print(f"last block / first block: time {last['median_us'] / first['median_us']:.2f}x, "
          f"RSS {last['rss_mb'] / first['rss_mb']:.2f}x")
    return rows


def main():
    rng = np.random.default_rng(0)
    W = tg.tensor(rng.normal(size=(16, 8)), requires_grad=True)
    x = tg.tensor(rng.normal(size=8))
    X = tg.tensor(rng.normal(size=(1000, 8)), requires_grad=True)
    C = tg.tensor(rng.normal(size=(10, 8)))
    results = {
        "small": run("small arrays: float(((W @ x).tanh() ** 2).sum())",
                     lambda: float(((W @ x).tanh() ** 2).sum()), 100_000, 10_000),
        "kmeans": run("k-means cost, X 1000 x 8, C 10 x 8",
                      lambda: float(((X[:, None, :] - C[None]) ** 2).sum(-1)
                                    .min(dim=1).values.sum()), 3_000, 300),
    }
    out = HERE / "results" / "no_backward.json"
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), **results}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
