#!/usr/bin/env python3
"""Recording an array op on a small tensor: tapegrad beside PyTorch CPU, float64, 1 thread.

The ops ADBench's bundle adjustment and LSTM spend their time in, on an 11-element leaf
``c`` that requires grad (``a``, ``b``: 3-vectors): ``c[0:3]``, ``c[3]``, ``c.sum()``,
``dot(c, c)``, ``stack([c, c])``, ``cat([c, c])``, ``linalg.cross(a, b)``; and GMM's and
k-means' (``m``: a 3 x 4 leaf): ``c[None, :]``, ``a[:, None] * b[None, :]`` (two indices and
a product of operands broadcast two ways), ``max(m, 0).values``.  Two figures
per op, in microseconds per op (medians over repeats, the backends interleaved):

- **record**: the op alone, called ``--ops`` times in a loop (tapegrad records each on one
  tape; the tape is dropped after the batch);
- **record + backward**: the op, then ``out.backward(ones)`` on its result (batches of a
  tenth as many).

Batches are short (a few hundred microseconds), so that on a busy machine most run without
being preempted and the median is one of those; the ratio of the median process CPU times
(``time.process_time``, which leaves out the time spent waiting for a core) is given too.

Results: a table on stdout and JSON in ``benchmarks/results/array_ops.json`` (``--out``).

Usage::

    python benchmarks/array_ops.py            # ~30 s
    python benchmarks/array_ops.py --quick    # fewer repeats
"""
from __future__ import annotations

import sys

if __name__ == "__main__":
    from _blas import limit_threads   # before numpy is imported
    limit_threads()

import argparse  # noqa: E402
import datetime as _dt  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
if str(HERE.parent) not in sys.path:
    sys.path.insert(0, str(HERE.parent))

import tapegrad as tg  # noqa: E402

try:
    import torch
    torch.set_num_threads(1)
except ImportError:      # the PyTorch column is left out
    torch = None

DEFAULT_OUT = HERE / "results" / "array_ops.json"
perf = time.perf_counter
cpu_time = time.process_time


def ops(L):
    """name -> (fn of the inputs, inputs) for library ``L`` (tapegrad or torch)."""
    c = L.tensor(np.arange(11.0), requires_grad=True)
    a = L.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    b = L.tensor(np.array([-2.0, 0.5, 4.0]), requires_grad=True)
    m = L.tensor(np.arange(12.0).reshape(3, 4) % 5, requires_grad=True)
    return {
        "c[0:3]": lambda: c[0:3],
        "c[3]": lambda: c[3],
        "c.sum()": lambda: c.sum(),
        "dot(c, c)": lambda: L.dot(c, c),
        "stack([c, c])": lambda: L.stack([c, c]),
        "cat([c, c])": lambda: L.cat([c, c]),
        "linalg.cross(a, b)": lambda: L.linalg.cross(a, b),
        "c[None, :]": lambda: c[None, :],
        "a[:, None] * b[None, :]": lambda: a[:, None] * b[None, :],
        "max(m, 0).values": lambda: L.max(m, 0)[0],
    }


def record_loop(L, fn, n):
    if L is tg:
        def run():
            with tg.Tape():
                for _ in range(n):
                    fn()
    else:
        def run():
            for _ in range(n):
                fn()
    return run


def backward_loop(L, fn, n):
    g = L.ones_like(fn())

    def run():
        for _ in range(n):
            out = fn()
            out.backward(g if out.ndim else None)
    return run


def interleaved(fns, repeats, warmup=2):
    """Median wall-clock and process CPU seconds of each function, called in turn."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    wall, cpu = {k: [] for k in fns}, {k: [] for k in fns}
    gc.collect()
    for _ in range(repeats):
        for k, fn in fns.items():
            t0, c0 = perf(), cpu_time()
            fn()
            c1, t1 = cpu_time(), perf()
            wall[k].append(t1 - t0)
            cpu[k].append(c1 - c0)
    return ({k: statistics.median(v) for k, v in wall.items()},
            {k: statistics.median(v) for k, v in cpu.items()})


def measure(n, repeats):
    libs = {"tapegrad": tg} if torch is None else {"tapegrad": tg, "torch": torch}
    tables = {name: ops(L) for name, L in libs.items()}
    rows = {}
    for op in tables["tapegrad"]:
        row = {}
        for what, loop, k in (("record", record_loop, n),
                              ("record+backward", backward_loop, max(n // 10, 1))):
            fns = {lib: loop(libs[lib], tables[lib][op], k) for lib in libs}
            t, c = interleaved(fns, repeats)
            for lib, s in t.items():
                row[f"{lib} {what} us"] = s / k * 1e6
            if torch is not None:
                row[f"{what} tapegrad/torch"] = t["tapegrad"] / t["torch"]
                row[f"{what} tapegrad/torch cpu"] = c["tapegrad"] / c["torch"]
        rows[op] = row
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)   # (read by _blas before numpy)
    p.add_argument("--ops", type=int, default=50, help="ops per timed batch of records")
    p.add_argument("--repeats", type=int, default=61)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args(argv)
    repeats = 11 if args.quick else args.repeats
    rows = measure(args.ops, repeats)
    cols = ["tapegrad record us", "torch record us", "record tapegrad/torch",
            "tapegrad record+backward us", "torch record+backward us",
            "record+backward tapegrad/torch"]
    cols = [c for c in cols if any(c in r for r in rows.values())]
    heads = ["op"] + [c.replace(" us", " (us)").replace("/torch", "/torch (CPU)")
                      for c in cols]
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" + "---:|" * len(cols))
    for op, r in rows.items():
        cells = [f"{r[c]:.2f}x ({r[c + ' cpu']:.2f}x)" if "/" in c else f"{r[c]:.2f}"
                 for c in cols]
        print(f"| `{op}` | " + " | ".join(cells) + " |")
    result = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__ if torch is not None else None,
        "threads": args.threads,
        "ops_per_batch": args.ops,
        "repeats": repeats,
        "rows": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
