#!/usr/bin/env python3
"""Compiled replay benchmark: Rosenbrock recorded once, differentiated at new points.

For n = 200 and n = 20,000 (8 scalar ops per term), side by side in one process:

* plain-Python-float evaluation of the function alone (no gradient);
* tapegrad ``tape.compile(...)``: value + gradient at one new point (Numba replay + sweep);
* a hand-vectorised NumPy analytic value + gradient (the best a human does by hand);
* a batch of 2,000 points: compiled batched replay vs the NumPy analytic gradient;
* record + compile time, and the first call (Numba compile or cache load);
* second order: the compiled Hessian-vector product (forward over reverse) and, for n = 200,
  the full Hessian (``tg.compile(rosen).hvp`` / ``.hessian``).

JAX and CasADi are measured when importable (``pip install -e ".[bench]"``; skipped
otherwise), in the same process, with ratios tapegrad time / their time (medians):

* JAX (float64): what a JAX user writes, the vectorised ``jnp`` Rosenbrock, under
  ``jit(value_and_grad)`` at one point and ``jit(vmap(value_and_grad))`` on the batch; the
  first call (trace + XLA compile + run) separately; ``jit`` of the forward-over-reverse HVP
  and of ``jax.hessian``.  For n = 200 also the same scalar loop as tapegrad's (``x[i]``),
  unrolled under ``jit``, for its compile time.  Not for n = 20,000: the unrolled trace has
  ~100x as many equations, and XLA compile time grows with them (reported as ~77 s for a
  16k-op loop) -- far past this benchmark's budget.
  XLA runs its own thread pool, and tapegrad's batches run on its own threads
  (``TAPEGRAD_NUM_THREADS``, default one per core); ``--threads`` reaches neither, so
  ``*_cpu_per_wall`` records the process CPU time over wall time in the timed loops
  (1.0 = one core busy).
* CasADi: the SX graph built by the same scalar loop, ``Function(x -> [f, gradient(f, x)])``,
  evaluated by CasADi's SX virtual machine: the raw call ``F(x)`` on a NumPy vector (the
  result is ``DM``; converting it to NumPy is timed separately), the same with the input
  already a ``DM``, and the batch through ``F.map(B)`` (serial) on an (n, B) matrix;
  construction times; ``jtimes(gradient(f, x), x, v)`` for the HVP and the sparse
  ``hessian(f, x)``.

Allocation-bound figures (the NumPy batch, tapegrad's Hessian) move by 3x or more from run
to run with glibc's malloc state (whether a temporary of a few MB comes back from the heap
or from a fresh, page-faulted mmap): compare several runs before reading much into them.

    python benchmarks/replay.py            # writes benchmarks/results/replay.json
    python benchmarks/replay.py --quick    # smoke run (n = 200, 2,000), writes nothing
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

try:
    import jax  # noqa: E402
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp  # noqa: E402
except ImportError:
    jax = None
try:
    import casadi as ca  # noqa: E402
except ImportError:
    ca = None


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


def rosen_hvp_np(x, v):
    """Analytic Hessian-vector product (the Hessian is tridiagonal)."""
    a, b = x[:-1], x[1:]
    diag = np.zeros_like(x)
    diag[:-1] = 1200.0 * a * a - 400.0 * b + 2.0
    diag[1:] += 200.0
    off = -400.0 * a
    hv = diag * v
    hv[:-1] += off * v[1:]
    hv[1:] += off * v[:-1]
    return hv


def rosen_hessian_np(x):
    n = len(x)
    return np.stack([rosen_hvp_np(x, e) for e in np.eye(n)])


def timed(fn, repeats, number=1):
    """Median seconds per call over ``repeats`` groups of ``number`` calls, and the process
    CPU time over the wall time of them all (how many cores were kept busy)."""
    ts, cpu = [], 0.0
    for _ in range(repeats):
        c0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        ts.append((time.perf_counter() - t0) / number)
        cpu += time.process_time() - c0
    return statistics.median(ts), cpu / (sum(ts) * number)


def best(fn, repeats, number=1):
    return timed(fn, repeats, number)[0]


def first_call(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def jax_lower_compile(fn, *args):
    """Seconds to trace + lower ``jit(fn)`` and to XLA-compile it, ahead of time (a fresh
    ``fn`` object each time, so no cache is hit)."""
    t0 = time.perf_counter()
    lowered = jax.jit(fn).lower(*args)
    t1 = time.perf_counter()
    lowered.compile()
    return t1 - t0, time.perf_counter() - t1


def rosen_jnp(x):
    return jnp.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


def bench_jax(n, x1, X, v, repeats, number, single_s, batch_s, hvp_s, hessian_s):
    """JAX baselines; ``*_s`` are tapegrad's times for the ratios."""
    ready = jax.block_until_ready
    xj, Xj, vj = jnp.asarray(x1), jnp.asarray(X), jnp.asarray(v)
    vg = jax.jit(jax.value_and_grad(rosen_jnp))
    vg_batch = jax.jit(jax.vmap(jax.value_and_grad(rosen_jnp)))
    hvp = jax.jit(lambda x, v: jax.jvp(jax.grad(rosen_jnp), (x,), (v,))[1])
    r = {"installed": True, "version": jax.__version__,
         "note": "inputs already jax arrays on the CPU device; every timed call ends in "
                 "block_until_ready"}
    r["first_call_s"], (val, g) = first_call(lambda: ready(vg(xj)))
    r["trace_lower_s"], r["compile_s"] = jax_lower_compile(jax.value_and_grad(rosen_jnp), xj)
    r["value_and_grad_s"], r["cpu_per_wall"] = timed(lambda: ready(vg(xj)), repeats, number)
    r["batch_first_call_s"], (V, G) = first_call(lambda: ready(vg_batch(Xj)))
    r["batch_trace_lower_s"], r["batch_compile_s"] = jax_lower_compile(
        jax.vmap(jax.value_and_grad(rosen_jnp)), Xj)
    r["batch_s"], r["batch_cpu_per_wall"] = timed(lambda: ready(vg_batch(Xj)),
                                                  max(3, repeats // 3))
    r["hvp_first_call_s"], hv = first_call(lambda: ready(hvp(xj, vj)))
    r["hvp_s"] = best(lambda: ready(hvp(xj, vj)), repeats, number)
    r["max_grad_err_vs_analytic"] = float(np.max(np.abs(np.asarray(g) - rosen_np(x1)[1])))
    r["max_batch_grad_err_vs_analytic"] = float(np.max(np.abs(np.asarray(G) - rosen_np(X)[1])))
    r["max_hvp_err_vs_analytic"] = float(np.max(np.abs(np.asarray(hv) - rosen_hvp_np(x1, v))))
    del V, G
    Xj = None   # free the batch arrays
    ratios = {"value_and_grad": single_s / r["value_and_grad_s"],
              "batch": batch_s / r["batch_s"], "hvp": hvp_s / r["hvp_s"]}
    if hessian_s is not None:
        hess = jax.jit(jax.hessian(rosen_jnp))
        r["hessian_first_call_s"], H = first_call(lambda: ready(hess(xj)))
        r["hessian_s"] = best(lambda: ready(hess(xj)), repeats, max(1, number // 10))
        r["max_hessian_err_vs_analytic"] = float(np.max(np.abs(np.asarray(H)
                                                               - rosen_hessian_np(x1))))
        ratios["hessian"] = hessian_s / r["hessian_s"]
        # the same scalar loop as tapegrad's, unrolled by the trace: ~8 ops per term
        unrolled = jax.jit(jax.value_and_grad(rosen))
        r["unrolled_jaxpr_eqns"] = len(jax.make_jaxpr(rosen)(xj).jaxpr.eqns)
        r["unrolled_value_and_grad_jaxpr_eqns"] = len(
            jax.make_jaxpr(jax.value_and_grad(rosen))(xj).jaxpr.eqns)
        r["unrolled_first_call_s"], (val, g) = first_call(lambda: ready(unrolled(xj)))
        r["unrolled_trace_lower_s"], r["unrolled_compile_s"] = jax_lower_compile(
            jax.value_and_grad(rosen), xj)
        r["unrolled_value_and_grad_s"] = best(lambda: ready(unrolled(xj)), repeats, number)
        r["unrolled_max_grad_err_vs_analytic"] = float(np.max(np.abs(np.asarray(g)
                                                                     - rosen_np(x1)[1])))
        ratios["value_and_grad_vs_unrolled"] = single_s / r["unrolled_value_and_grad_s"]
    else:
        r["unrolled"] = ("not run at this n: ~100x the equations of n = 200; XLA compile "
                         "time grows with them (minutes), past this benchmark's budget")
    r["tapegrad_over_jax"] = ratios
    return r


def bench_casadi(n, x1, X, v, repeats, number, single_s, batch_s, hvp_s, hessian_s):
    """CasADi baselines (SX, the scalar loop); ``*_s`` are tapegrad's times for the ratios."""
    batch = len(X)
    r = {"installed": True, "version": ca.__version__,
         "note": "SX virtual machine (no C code generation / jit); F.map(B) is serial"}
    t0 = time.perf_counter()
    x = ca.SX.sym("x", n)
    y = 0.0   # rosen's loop (an SX has no len()), indexing the symbolic vector
    for i in range(n - 1):
        y = y + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    t1 = time.perf_counter()
    F = ca.Function("f", [x], [y, ca.gradient(y, x)])
    t2 = time.perf_counter()
    Fm = F.map(batch)
    t3 = time.perf_counter()
    r.update({"build_expression_s": t1 - t0, "function_and_gradient_s": t2 - t1,
              "map_s": t3 - t2, "n_instructions": int(F.n_instructions())})
    x1d = ca.DM(x1)
    val, g = F(x1)
    r["value_and_grad_s"], r["cpu_per_wall"] = timed(lambda: F(x1), repeats, number)
    r["value_and_grad_dm_input_s"] = best(lambda: F(x1d), repeats, number)
    r["to_numpy_s"] = best(lambda: (float(val), g.full()), repeats, number)
    Xt = X.T
    Xd = ca.DM(Xt)
    V, G = Fm(Xd)
    r["batch_dm_input_s"] = best(lambda: Fm(Xd), max(3, repeats // 3))
    # the raw call converts the (n, B) NumPy matrix (seconds at n = 20,000): fewer repeats
    r["batch_s"], r["batch_cpu_per_wall"] = timed(lambda: Fm(Xt), 3 if n <= 2000 else 1)
    r["batch_to_numpy_s"] = best(lambda: (V.full(), G.full()), 1)
    r["max_grad_err_vs_analytic"] = float(np.max(np.abs(g.full()[:, 0] - rosen_np(x1)[1])))
    r["max_batch_grad_err_vs_analytic"] = float(np.max(np.abs(G.full().T - rosen_np(X)[1])))
    Xd = V = G = None
    vs = ca.SX.sym("v", n)
    t0 = time.perf_counter()
    Fhvp = ca.Function("hvp", [x, vs], [ca.jtimes(ca.gradient(y, x), x, vs)])
    r["hvp_construction_s"] = time.perf_counter() - t0
    r["hvp_s"] = best(lambda: Fhvp(x1, v), repeats, number)
    r["max_hvp_err_vs_analytic"] = float(np.max(np.abs(Fhvp(x1, v).full()[:, 0]
                                                       - rosen_hvp_np(x1, v))))
    ratios = {"value_and_grad": single_s / r["value_and_grad_s"],
              "value_and_grad_dm_input": single_s / r["value_and_grad_dm_input_s"],
              "batch": batch_s / r["batch_s"], "batch_dm_input": batch_s / r["batch_dm_input_s"],
              "hvp": hvp_s / r["hvp_s"]}
    if hessian_s is not None:
        t0 = time.perf_counter()
        H = ca.hessian(y, x)[0]
        Fh = ca.Function("h", [x], [H])
        r["hessian_construction_s"] = time.perf_counter() - t0
        r["hessian_nnz"] = int(H.nnz())
        r["hessian_s"] = best(lambda: Fh(x1), repeats, number)
        r["max_hessian_err_vs_analytic"] = float(np.max(np.abs(Fh(x1).full()
                                                               - rosen_hessian_np(x1))))
        ratios["hessian"] = hessian_s / r["hessian_s"]
    r["tapegrad_over_casadi"] = ratios
    return r


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
        "tapegrad_threads": int(os.environ.get("TAPEGRAD_NUM_THREADS")
                                or len(os.sched_getaffinity(0))),
    }
    # the batch's blocks run on tapegrad's threads (TAPEGRAD_NUM_THREADS; one per core)
    res["tapegrad_batch_s"], res["tapegrad_batch_cpu_per_wall"] = timed(
        lambda: f.value_and_grad(X), max(3, repeats // 3))
    res["numpy_analytic_batch_s"] = best(lambda: rosen_np(X), max(3, repeats // 3))
    v, g = f.value_and_grad(x1)
    vn, gn = rosen_np(x1)
    res["max_grad_err_vs_analytic"] = float(np.max(np.abs(g - gn)))
    V, G = f.value_and_grad(X)
    res["max_batch_grad_err_vs_analytic"] = float(np.max(np.abs(G - rosen_np(X)[1])))
    res["speedup_vs_plain_python"] = res["plain_python_s"] / res["tapegrad_value_and_grad_s"]
    res["batch_ns_per_op_per_point"] = res["tapegrad_batch_s"] / (len(f) * batch) * 1e9
    res["batch_vs_numpy_analytic"] = res["tapegrad_batch_s"] / res["numpy_analytic_batch_s"]
    res["compile_stats"] = getattr(f, "stats", None)   # what tape.compile's optimiser removed
    res["tapegrad_cpu_per_wall"] = timed(lambda: f.value_and_grad(x1), 1, number)[1]
    # second order, through the user-facing tg.compile (records on its first call)
    v = rng.standard_normal(n)
    fc = tg.compile(rosen)
    res["hvp_first_call_s"], hv = first_call(lambda: fc.hvp(x1, v))
    res["tapegrad_hvp_s"] = best(lambda: fc.hvp(x1, v), repeats, number)
    res["max_hvp_err_vs_analytic"] = float(np.max(np.abs(hv - rosen_hvp_np(x1, v))))
    hessian_s = None
    if n <= 200:   # the dense Hessian: n = 200 only
        res["hessian_first_call_s"], H = first_call(lambda: fc.hessian(x1))
        hessian_s = res["tapegrad_hessian_s"] = best(lambda: fc.hessian(x1), repeats,
                                                     max(1, number // 10))
        res["max_hessian_err_vs_analytic"] = float(np.max(np.abs(H - rosen_hessian_np(x1))))
    # the coloured sparse Hessian (3 sweeps for Rosenbrock's tridiagonal one, any n)
    res["sparse_hessian_first_call_s"], (r_, c_, hv_) = first_call(lambda: fc.sparse_hessian(x1))
    res["tapegrad_sparse_hessian_s"] = best(lambda: fc.sparse_hessian(x1), repeats,
                                            max(1, number // 10))
    res["sparse_hessian_nnz"] = int(len(hv_))
    Ha = rosen_hessian_np(x1) if n <= 2000 else None
    if Ha is not None:
        res["max_sparse_hessian_err_vs_analytic"] = float(np.max(np.abs(hv_ - Ha[r_, c_])))
    args = (n, x1, X, v, repeats, number, res["tapegrad_value_and_grad_s"],
            res["tapegrad_batch_s"], res["tapegrad_hvp_s"], hessian_s)
    res["jax_installed"] = jax is not None
    res["casadi_installed"] = ca is not None
    res["jax"] = bench_jax(*args) if jax is not None else {"installed": False}
    res["casadi"] = bench_casadi(*args) if ca is not None else {"installed": False}
    return res


def report_baselines(r):
    j, c = r["jax"], r["casadi"]
    print(f"  tapegrad sparse Hessian ({r['sparse_hessian_nnz']} non-zeros, coloured) "
          f"{r['tapegrad_sparse_hessian_s'] * 1e3:.3f} ms (first call, with the pattern: "
          f"{r['sparse_hessian_first_call_s'] * 1e3:.0f} ms)")
    if r.get("tapegrad_hessian_s") is not None:
        print(f"  tapegrad HVP {r['tapegrad_hvp_s'] * 1e6:.1f} us, Hessian "
              f"{r['tapegrad_hessian_s'] * 1e3:.2f} ms (first calls "
              f"{r['hvp_first_call_s'] * 1e3:.0f} ms, {r['hessian_first_call_s'] * 1e3:.0f} ms)")
    else:
        print(f"  tapegrad HVP {r['tapegrad_hvp_s'] * 1e6:.1f} us "
              f"(first call {r['hvp_first_call_s'] * 1e3:.0f} ms)")
    if j["installed"]:
        q = j["tapegrad_over_jax"]
        print(f"  JAX {j['version']} jit(value_and_grad) {j['value_and_grad_s'] * 1e6:.1f} us "
              f"(tapegrad/JAX {q['value_and_grad']:.2f}x; first call "
              f"{j['first_call_s'] * 1e3:.0f} ms, XLA compile alone {j['compile_s'] * 1e3:.0f} ms; "
              f"{j['cpu_per_wall']:.2f} cores)")
        print(f"      vmap batch {j['batch_s'] * 1e3:.2f} ms (tapegrad/JAX {q['batch']:.2f}x; "
              f"first call {j['batch_first_call_s'] * 1e3:.0f} ms, XLA compile alone "
              f"{j['batch_compile_s'] * 1e3:.0f} ms; "
              f"{j['batch_cpu_per_wall']:.2f} cores)")
        line = f"      HVP {j['hvp_s'] * 1e6:.1f} us (tapegrad/JAX {q['hvp']:.2f}x)"
        if "hessian_s" in j:
            line += (f", hessian {j['hessian_s'] * 1e3:.2f} ms (tapegrad/JAX "
                     f"{q['hessian']:.2f}x)")
        print(line)
        if "unrolled_first_call_s" in j:
            print(f"      unrolled scalar loop ({j['unrolled_jaxpr_eqns']:,} jaxpr equations, "
                  f"{j['unrolled_value_and_grad_jaxpr_eqns']:,} with the gradient): first "
                  f"call {j['unrolled_first_call_s']:.2f} s (trace + lower "
                  f"{j['unrolled_trace_lower_s']:.2f} s, XLA compile "
                  f"{j['unrolled_compile_s']:.2f} s), then "
                  f"{j['unrolled_value_and_grad_s'] * 1e6:.1f} us")
    if c["installed"]:
        q = c["tapegrad_over_casadi"]
        print(f"  CasADi {c['version']} SX: build {c['build_expression_s'] * 1e3:.0f} ms, "
              f"Function + gradient {c['function_and_gradient_s'] * 1e3:.0f} ms, map "
              f"{c['map_s'] * 1e3:.0f} ms ({c['n_instructions']:,} instructions)")
        print(f"      F(x) {c['value_and_grad_s'] * 1e6:.1f} us (tapegrad/CasADi "
              f"{q['value_and_grad']:.2f}x); DM input {c['value_and_grad_dm_input_s'] * 1e6:.1f}"
              f" us ({q['value_and_grad_dm_input']:.2f}x); to NumPy "
              f"{c['to_numpy_s'] * 1e6:.1f} us")
        print(f"      map batch {c['batch_s'] * 1e3:.1f} ms (tapegrad/CasADi {q['batch']:.2f}x);"
              f" DM input {c['batch_dm_input_s'] * 1e3:.1f} ms ({q['batch_dm_input']:.2f}x); "
              f"to NumPy {c['batch_to_numpy_s'] * 1e3:.0f} ms")
        line = f"      HVP (jtimes) {c['hvp_s'] * 1e6:.1f} us (tapegrad/CasADi {q['hvp']:.2f}x)"
        if "hessian_s" in c:
            line += (f", sparse hessian ({c['hessian_nnz']:,} nonzeros) "
                     f"{c['hessian_s'] * 1e6:.1f} us (tapegrad/CasADi {q['hessian']:.2f}x)")
        print(line)


def main():
    quick = "--quick" in sys.argv
    out = {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(),
           "cpus": os.cpu_count(), "python": platform.python_version(),
           "numpy": np.__version__, "load_average_at_start": os.getloadavg()[0],
           "runs": []}
    for n in ((200, 2000) if quick else (200, 20_000)):
        r = bench(n, 2000 if not quick else 200, 11 if not quick else 3)
        out["runs"].append(r)
        print(f"\nRosenbrock n = {n:,} ({r['tape_entries']:,} tape entries)")
        print(f"  record {r['record_s'] * 1e3:.1f} ms, compile {r['compile_s'] * 1e3:.1f} ms, "
              f"first call {r['first_call_s'] * 1e3:.1f} ms")
        print(f"  plain Python value only      {r['plain_python_s'] * 1e6:10.1f} us")
        print(f"  tapegrad value + gradient    {r['tapegrad_value_and_grad_s'] * 1e6:10.1f} us"
              f"  ({r['speedup_vs_plain_python']:.1f}x faster than plain Python's value)")
        print(f"  NumPy analytic value + grad  {r['numpy_analytic_s'] * 1e6:10.1f} us")
        print(f"  batch of {r['batch']}: tapegrad {r['tapegrad_batch_s'] * 1e3:.2f} ms "
              f"({r['batch_ns_per_op_per_point']:.2f} ns per entry per point, "
              f"{r['tapegrad_threads']} threads, {r['tapegrad_batch_cpu_per_wall']:.2f} cores), "
              f"NumPy analytic "
              f"{r['numpy_analytic_batch_s'] * 1e3:.2f} ms -> {r['batch_vs_numpy_analytic']:.2f}x")
        print(f"  max |grad - analytic| {r['max_grad_err_vs_analytic']:.1e} (single), "
              f"{r['max_batch_grad_err_vs_analytic']:.1e} (batch)")
        report_baselines(r)
    if quick:
        return
    path = HERE / "results" / "replay.json"
    path.write_text(json.dumps(out, indent=1))
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
