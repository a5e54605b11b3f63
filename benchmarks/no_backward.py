"""Evaluations without backward: time per call and memory stay flat.

A line search or a validation loss evaluates a function of parameters that require grad and
drops the result without calling backward().  PyTorch frees such a graph when its outputs
die; tapegrad records onto a default tape that rolls over to a fresh one every 65,536
entries, so a tape whose results are all gone is freed.  This script runs 100,000 such
evaluations of ``float(((W @ x).tanh() ** 2).sum())`` (the shape that grew the tape without
bound before) and prints the median time per call and the process's resident memory for
each block of 10,000 calls; both must stay flat.  Results: ``results/no_backward.json``.
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


def main(calls=100_000, block=10_000):
    rng = np.random.default_rng(0)
    W = tg.tensor(rng.normal(size=(16, 8)), requires_grad=True)
    x = tg.tensor(rng.normal(size=8))
    rows = []
    for start in range(0, calls, block):
        times = []
        for _ in range(block):
            t0 = time.perf_counter()
            float(((W @ x).tanh() ** 2).sum())
            times.append(time.perf_counter() - t0)
        rows.append({"calls": start + block, "median_us": float(np.median(times) * 1e6),
                     "rss_mb": rss_mb(), "tape_entries": len(tg.current_tape())})
        r = rows[-1]
        print(f"{r['calls']:>7,} calls: {r['median_us']:6.1f} us/call, RSS {r['rss_mb']:6.1f} MB, "
              f"default tape {r['tape_entries']:>6,} entries")
    first, last = rows[0], rows[-1]
    print(f"last block / first block: time {last['median_us'] / first['median_us']:.2f}x, "
          f"RSS {last['rss_mb'] / first['rss_mb']:.2f}x")
    out = HERE / "results" / "no_backward.json"
    out.write_text(json.dumps({"date": time.strftime("%Y-%m-%d"), "rows": rows}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
