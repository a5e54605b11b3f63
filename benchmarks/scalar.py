#!/usr/bin/env python3
"""Scalar autodiff benchmark: plain floats vs tapegrad vs PyTorch vs micrograd.

The workload is the extended Rosenbrock function over ``n`` scalars, written
as an explicit Python loop so that every backend records the same 8 scalar
operations per term::

    t = t + (100 * (x[i+1] - x[i]**2)**2 + (1 - x[i])**2)

Measured (medians over several repeats, all in one process):

* plain Python floats: forward evaluation only (the floor);
* tapegrad: record (``with tg.Tape()`` + leaf creation + forward), backward
  (``y.backward()``, the reverse sweep) and both together;
* PyTorch eager with 0-d float64 tensors (if ``import torch`` works);
* micrograd ``Value`` (if importable).

Plus, for tapegrad: tape bytes per entry (``tape.nbytes / len(tape)``), RSS
growth while recording a ~10-million-op tape (in a subprocess, ``--no-big``
or ``--quick`` skips it) and the start-up time of a fresh process doing one
tiny backward (run twice; the second run sees a warm Numba cache).

Results are printed as a table and written as JSON to
``benchmarks/results/scalar.json`` (see ``--out``).

Usage::

    python benchmarks/scalar.py            # n = 20,000, 7 repeats, big tape
    python benchmarks/scalar.py --quick    # smoke run: n = 2,000, 3 repeats
    python benchmarks/scalar.py --n 50000 --repeats 5 --no-big
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import textwrap
import threading
import time
import traceback
from pathlib import Path

OPS_PER_TERM = 8
HERE = Path(__file__).resolve().parent
REPO = HERE.parent
DEFAULT_OUT = HERE / "results" / "scalar.json"

# Make ``import tapegrad`` work when the script is run from a source checkout
# without installing the package.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


# --------------------------------------------------------------------------
# workload
# --------------------------------------------------------------------------

def rosen(x):
    """Extended Rosenbrock; 8 scalar ops per term (counting the accumulate)."""
    t = 0.0
    for i in range(len(x) - 1):
        t = t + (100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2)
    return t


def rosen_grad(x):
    """Analytic gradient of :func:`rosen` (plain floats), for a sanity check."""
    n = len(x)
    g = [0.0] * n
    for i in range(n - 1):
        a = x[i + 1] - x[i] ** 2
        g[i] += -400.0 * a * x[i] - 2.0 * (1.0 - x[i])
        g[i + 1] += 200.0 * a
    return g


def make_x0(n, seed=0):
    rng = random.Random(seed)
    return [rng.uniform(-1.5, 1.5) for _ in range(n)]


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

def _median(xs):
    return statistics.median(xs) if xs else None


def _as_float(v):
    if v is None:
        return None
    item = getattr(v, "item", None)
    return float(item()) if callable(item) else float(v)


def _grad_err(grads, x0):
    """Largest absolute error of computed grads vs the analytic gradient."""
    ref = rosen_grad(x0)
    err = 0.0
    for g, r in zip(grads, ref):
        err = max(err, abs(g - r))
    return err


def _timed_repeats(fn, repeats):
    """Call ``fn()`` ``repeats`` times; ``fn`` returns a dict of phase times.

    Returns ``{phase: [seconds, ...]}`` plus the last call's extra info.
    """
    phases = {}
    extra = {}
    for _ in range(repeats):
        gc.collect()
        res = fn()
        for k, v in res.items():
            if k.startswith("t_"):
                phases.setdefault(k, []).append(v)
            else:
                extra[k] = v
    return phases, extra


def _rss_bytes():
    """Current resident set size in bytes (Linux /proc), else None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _run_with_big_stack(fn, stack_bytes=512 * 1024 * 1024):
    """Run ``fn`` in a thread with a large C stack (micrograd recurses)."""
    box = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            box["error"] = e

    old = threading.stack_size()
    try:
        threading.stack_size(stack_bytes)
        th = threading.Thread(target=target)
        th.start()
        th.join()
    finally:
        threading.stack_size(old)
    if "error" in box:
        raise box["error"]
    return box["result"]


# --------------------------------------------------------------------------
# backends
# --------------------------------------------------------------------------

def bench_plain(x0, repeats):
    def once():
        t0 = time.perf_counter()
        y = rosen(x0)
        t1 = time.perf_counter()
        return {"t_forward": t1 - t0, "value": y}

    once()  # warm-up
    return _timed_repeats(once, repeats)


def bench_tapegrad(tg, x0, repeats):
    def once(xvals):
        t0 = time.perf_counter()
        with tg.Tape() as tape:
            xs = [tg.tensor(v, requires_grad=True) for v in xvals]
            y = rosen(xs)
        t1 = time.perf_counter()
        y.backward()
        t2 = time.perf_counter()
        return tape, xs, y, {"t_record": t1 - t0, "t_backward": t2 - t1,
                             "t_total": t2 - t0}

    # First call on a tiny input: pays Numba compilation / cache loading.
    t0 = time.perf_counter()
    once(x0[:3])
    warmup_s = time.perf_counter() - t0

    info = {"first_call_s": warmup_s}

    def timed():
        tape, xs, y, times = once(x0)
        out = dict(times)
        out["tape_len"] = len(tape)
        nbytes = getattr(tape, "nbytes", None)
        out["tape_nbytes"] = int(nbytes) if isinstance(nbytes, (int, float)) else None
        out["value"] = _as_float(y)
        out["grads"] = [_as_float(x.grad) for x in xs]
        del tape, xs, y
        return out

    phases, extra = _timed_repeats(timed, repeats)
    grads = extra.pop("grads")
    info.update(extra)
    info["sweep_ns_per_entry"] = _sweep_alone(tg, x0, repeats)
    info["grad_max_abs_err"] = _grad_err(grads, x0)
    if info.get("tape_nbytes") is not None and info.get("tape_len"):
        info["bytes_per_entry"] = info["tape_nbytes"] / info["tape_len"]
    else:
        info["bytes_per_entry"] = None
    return phases, info


def _sweep_alone(tg, x0, repeats):
    """The reverse sweep alone (Numba kernel plus its array setup; no .grad mapping),
    median ns per tape entry.  Uses the engine's ``walk_tape``, which frees nothing."""
    try:
        from tapegrad.autograd.engine import walk_tape
    except ImportError:   # an older layout
        walk_tape = None
    if walk_tape is None:
        if getattr(tg.Tape, "_sweep", None) is None:
            return None

        def walk_tape(tape, seeds, create_graph):
            return tape._sweep(seeds)
    with tg.Tape() as tape:
        xs = [tg.tensor(v, requires_grad=True) for v in x0]
        y = rosen(xs)
    walk_tape(tape, {y._entry: 1.0}, False)  # converts the recording lists once
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        walk_tape(tape, {y._entry: 1.0}, False)
        times.append(time.perf_counter() - t0)
    return _median(times) / len(tape) * 1e9


def bench_torch(torch, x0, repeats):
    torch.set_num_threads(1)

    def once(xvals):
        t0 = time.perf_counter()
        xs = [torch.tensor(v, dtype=torch.float64, requires_grad=True)
              for v in xvals]
        y = rosen(xs)
        t1 = time.perf_counter()
        y.backward()
        t2 = time.perf_counter()
        return xs, y, {"t_record": t1 - t0, "t_backward": t2 - t1,
                       "t_total": t2 - t0}

    once(x0[:3])  # warm-up

    def timed():
        xs, y, times = once(x0)
        out = dict(times)
        out["value"] = float(y.item())
        out["grads"] = [float(x.grad.item()) for x in xs]
        return out

    phases, extra = _timed_repeats(timed, repeats)
    grads = extra.pop("grads")
    extra["grad_max_abs_err"] = _grad_err(grads, x0)
    return phases, extra


def bench_micrograd(Value, x0, repeats):
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(x0) + 10_000))

    def once(xvals):
        t0 = time.perf_counter()
        xs = [Value(v) for v in xvals]
        y = rosen(xs)
        t1 = time.perf_counter()
        y.backward()
        t2 = time.perf_counter()
        return xs, y, {"t_record": t1 - t0, "t_backward": t2 - t1,
                       "t_total": t2 - t0}

    def timed():
        xs, y, times = once(x0)
        out = dict(times)
        out["value"] = float(y.data)
        out["grads"] = [float(x.grad) for x in xs]
        return out

    def run():
        once(x0[:3])
        return _timed_repeats(timed, repeats)

    phases, extra = _run_with_big_stack(run)
    grads = extra.pop("grads")
    extra["grad_max_abs_err"] = _grad_err(grads, x0)
    return phases, extra


# --------------------------------------------------------------------------
# subprocess measurements (tapegrad only)
# --------------------------------------------------------------------------

BIG_TAPE_CODE = textwrap.dedent(
    """
    import json, resource, sys, time
    sys.path.insert(0, {repo!r})

    def rss():
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            return None

    import tapegrad as tg
    # warm up (Numba compile / cache load) before taking the baseline
    with tg.Tape():
        a = tg.tensor(2.0, requires_grad=True)
        b = a * 0.5 + a
    b.backward()
    del a, b

    n_ops = {n_ops}
    iters = n_ops // 2                    # 2 ops per iteration: y*c, +x
    rss0 = rss()
    t0 = time.perf_counter()
    with tg.Tape() as tape:
        leaves = [tg.tensor(1.0 + 0.25 * k, requires_grad=True) for k in range(4)]
        y = leaves[0]
        for i in range(iters):
            y = y * 0.5 + leaves[i & 3]
    t1 = time.perf_counter()
    rss1 = rss()
    y.backward()
    t2 = time.perf_counter()
    rss2 = rss()
    nbytes = getattr(tape, "nbytes", None)
    out = {{
        "ops": 2 * iters,
        "tape_len": len(tape),
        "tape_nbytes": int(nbytes) if isinstance(nbytes, (int, float)) else None,
        "record_s": t1 - t0,
        "backward_s": t2 - t1,
        "rss_before": rss0,
        "rss_after_record": rss1,
        "rss_after_backward": rss2,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "grads": [float(x.grad.item()) if hasattr(x.grad, "item") else float(x.grad)
                  for x in leaves],
    }}
    print("RESULT " + json.dumps(out))
    """
)

COLD_START_CODE = (
    "import tapegrad as tg; a = tg.tensor(2.0, requires_grad=True); "
    "(a*a).backward()"
)


def big_tape(n_ops, timeout):
    code = BIG_TAPE_CODE.format(repo=str(REPO), n_ops=int(n_ops))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"big-tape subprocess failed (rc={proc.returncode}):\n"
                           f"{proc.stderr[-4000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    res = json.loads(line[len("RESULT "):])
    res["wall_s"] = wall
    if res["rss_before"] is not None and res["rss_after_record"] is not None:
        growth = res["rss_after_record"] - res["rss_before"]
        res["rss_growth_bytes"] = growth
        res["rss_growth_bytes_per_op"] = growth / res["ops"]
        res["rss_growth_bytes_per_entry"] = (growth / res["tape_len"]
                                             if res["tape_len"] else None)
    if res.get("tape_nbytes") and res.get("tape_len"):
        res["bytes_per_entry"] = res["tape_nbytes"] / res["tape_len"]
    return res


def cold_start(runs=2, timeout=600):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", COLD_START_CODE],
                              capture_output=True, text=True, env=env,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise RuntimeError(f"cold-start subprocess failed "
                               f"(rc={proc.returncode}):\n{proc.stderr[-4000:]}")
    # Reference point: a bare interpreter start, same way.
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True,
                   stdin=subprocess.DEVNULL)
    bare = time.perf_counter() - t0
    return {"runs_s": times, "first_s": times[0], "warm_cache_s": times[-1],
            "bare_python_s": bare}


# --------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------

def _cpu_model():
    """CPU model name (platform.processor() is often empty on Linux)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _versions():
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for dist in ("numba", "numpy", "torch", "micrograd", "tapegrad"):
        try:
            out[dist] = md.version(dist)
        except md.PackageNotFoundError:
            out[dist] = None
    # Imported-from-source packages have no dist metadata; ask the module.
    for mod in ("numba", "numpy", "torch", "tapegrad"):
        if out.get(mod) is None and mod in sys.modules:
            out[mod] = getattr(sys.modules[mod], "__version__", None)
    return out


def _fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def print_report(res):
    n = res["n"]
    ops = res["ops"]
    print(f"\nRosenbrock, n = {n:,} scalars, {ops:,} ops "
          f"({OPS_PER_TERM} per term), median of {res['repeats']} repeats")
    print(f"{'backend / phase':<28}{'median ms':>12}{'ns/op':>10}{'x plain':>10}")
    print("-" * 60)
    plain = res["backends"].get("plain", {}).get("median_s", {}).get("t_forward")
    for name, b in res["backends"].items():
        if "error" in b:
            print(f"{name:<28}error: {b['error'].strip().splitlines()[-1][:60]}")
            continue
        if b.get("skipped"):
            print(f"{name:<28}skipped: {b['skipped'][:60]}")
            continue
        for phase, med in b["median_s"].items():
            label = f"{name} {phase[2:]}"
            ratio = med / plain if plain else None
            print(f"{label:<28}{med * 1e3:>12.2f}{med / ops * 1e9:>10.1f}"
                  f"{_fmt(ratio, '.1f'):>10}")
    print("-" * 60)
    for k, v in res.get("ratios", {}).items():
        print(f"{k:<40}{_fmt(v, '.2f'):>10}")
    tgi = res["backends"].get("tapegrad", {}).get("info", {})
    if tgi:
        print(f"{'tapegrad first call (JIT/cache) s':<40}"
              f"{_fmt(tgi.get('first_call_s'), '.3f'):>10}")
        print(f"{'tapegrad tape entries':<40}{_fmt(tgi.get('tape_len'), ','):>10}")
        print(f"{'tapegrad tape bytes/entry':<40}"
              f"{_fmt(tgi.get('bytes_per_entry'), '.1f'):>10}")
        print(f"{'tapegrad reverse sweep alone ns/entry':<40}"
              f"{_fmt(tgi.get('sweep_ns_per_entry'), '.1f'):>10}")
    for name, b in res["backends"].items():
        err = b.get("info", {}).get("grad_max_abs_err")
        if err is not None:
            print(f"{name + ' grad max |err|':<40}{err:>10.2e}")
    big = res.get("big_tape")
    if big:
        if "error" in big:
            print(f"big tape: error: {big['error'].strip().splitlines()[-1]}")
        elif not big.get("skipped"):
            print(f"\nbig tape: {big['ops']:,} ops, {big['tape_len']:,} entries; "
                  f"record {big['record_s']:.2f} s, backward {big['backward_s']:.2f} s")
            print(f"  RSS growth {_fmt(big.get('rss_growth_bytes'), ',')} B = "
                  f"{_fmt(big.get('rss_growth_bytes_per_op'), '.1f')} B/op; "
                  f"tape.nbytes/entry {_fmt(big.get('bytes_per_entry'), '.1f')} B; "
                  f"maxrss {big['maxrss_kib'] / 1024:.0f} MiB")
    cs = res.get("cold_start")
    if cs:
        if "error" in cs:
            print(f"cold start: error: {cs['error'].strip().splitlines()[-1]}")
        else:
            print(f"\ncold start (import + tiny backward): first {cs['first_s']:.3f} s, "
                  f"warm cache {cs['warm_cache_s']:.3f} s "
                  f"(bare python {cs['bare_python_s']:.3f} s)")


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=None,
                   help="number of scalars (default 20000; 2000 with --quick)")
    p.add_argument("--repeats", type=int, default=None,
                   help="timed repeats per backend (default 7; 3 with --quick)")
    p.add_argument("--quick", action="store_true",
                   help="fast smoke run: n=2000, 3 repeats, no big tape")
    p.add_argument("--big", action=argparse.BooleanOptionalAction, default=None,
                   help="record a ~10M-op tape in a subprocess and measure RSS "
                        "(default on, off with --quick)")
    p.add_argument("--big-ops", type=int, default=10_000_000,
                   help="ops in the big tape (default 10,000,000)")
    p.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    p.add_argument("--no-micrograd", action="store_true", help="skip micrograd")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"JSON output path (default {DEFAULT_OUT.relative_to(REPO)})")
    args = p.parse_args(argv)

    n = args.n if args.n is not None else (2000 if args.quick else 20_000)
    repeats = args.repeats if args.repeats is not None else (3 if args.quick else 7)
    big = args.big if args.big is not None else not args.quick
    if n < 2 or repeats < 1:
        p.error("need --n >= 2 and --repeats >= 1")
    ops = OPS_PER_TERM * (n - 1)
    x0 = make_x0(n)

    res = {
        "benchmark": "scalar-rosenbrock",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "n": n,
        "ops": ops,
        "ops_per_term": OPS_PER_TERM,
        "repeats": repeats,
        "statistic": "median",
        "quick": args.quick,
        "machine": {
            "processor": platform.processor(),
            "machine": platform.machine(),
            "platform": platform.platform(),
            "cpu_model": _cpu_model(),
            "cpu_count": os.cpu_count(),
        },
        "gc": "enabled (default thresholds); gc.collect() before each repeat",
        "backends": {},
    }

    def run_backend(name, fn):
        print(f"running {name} ...", file=sys.stderr, flush=True)
        try:
            phases, info = fn()
        except Exception:  # noqa: BLE001 - a broken backend must not stop the rest
            tb = traceback.format_exc()
            print(tb, file=sys.stderr)
            res["backends"][name] = {"error": tb}
            return
        med = {k: _median(v) for k, v in phases.items()}
        res["backends"][name] = {
            "median_s": med,
            "ns_per_op": {k: v / ops * 1e9 for k, v in med.items()},
            "runs_s": phases,
            "info": info,
        }

    run_backend("plain", lambda: bench_plain(x0, repeats))

    try:
        import tapegrad as tg
    except Exception:  # noqa: BLE001
        tg = None
        res["backends"]["tapegrad"] = {"skipped": "import tapegrad failed",
                                       "error": traceback.format_exc()}
    if tg is not None:
        run_backend("tapegrad", lambda: bench_tapegrad(tg, x0, repeats))

    torch = None
    if args.no_torch:
        res["backends"]["torch"] = {"skipped": "--no-torch"}
    else:
        try:
            import torch
        except Exception:  # noqa: BLE001
            res["backends"]["torch"] = {"skipped": "torch not importable"}
    if torch is not None:
        run_backend("torch", lambda: bench_torch(torch, x0, repeats))

    Value = None
    if args.no_micrograd:
        res["backends"]["micrograd"] = {"skipped": "--no-micrograd"}
    else:
        try:
            from micrograd.engine import Value
        except Exception:  # noqa: BLE001
            res["backends"]["micrograd"] = {"skipped": "micrograd not importable"}
    if Value is not None:
        run_backend("micrograd", lambda: bench_micrograd(Value, x0, repeats))

    # Ratios between backends (medians).
    def med(backend, phase):
        return res["backends"].get(backend, {}).get("median_s", {}).get(phase)

    ratios = {}
    for phase in ("t_record", "t_backward", "t_total"):
        a, b = med("torch", phase), med("tapegrad", phase)
        ratios[f"torch/tapegrad {phase[2:]}"] = a / b if a and b else None
    for phase in ("t_record", "t_backward", "t_total"):
        a, b = med("micrograd", phase), med("tapegrad", phase)
        ratios[f"micrograd/tapegrad {phase[2:]}"] = a / b if a and b else None
    res["ratios"] = ratios

    if tg is not None and big:
        print(f"running big tape ({args.big_ops:,} ops, subprocess) ...",
              file=sys.stderr, flush=True)
        try:
            res["big_tape"] = big_tape(args.big_ops, timeout=1800)
        except Exception:  # noqa: BLE001
            tb = traceback.format_exc()
            print(tb, file=sys.stderr)
            res["big_tape"] = {"error": tb}
    else:
        res["big_tape"] = {"skipped": "no tapegrad" if tg is None else
                           "--quick / --no-big"}

    if tg is not None:
        print("running cold start (2 fresh processes) ...", file=sys.stderr,
              flush=True)
        try:
            res["cold_start"] = cold_start()
        except Exception:  # noqa: BLE001
            tb = traceback.format_exc()
            print(tb, file=sys.stderr)
            res["cold_start"] = {"error": tb}

    res["versions"] = _versions()

    print_report(res)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2, sort_keys=False) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
