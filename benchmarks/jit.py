#!/usr/bin/env python3
"""``tg.jit`` benchmark: gradients of scalar Python loops recorded inside Numba, against
plain Python, Numba (value only), tapegrad eager, ``tg.compile`` replay, PyTorch eager and
JAX, side by side in one process; medians.

Workloads (one source each, run by every backend that can run it):

* **Rosenbrock**, n = 20,000, as a loop (8 scalar ops a term): the cost per op of
  recording and sweeping, tape bytes per entry.
* **Lotka-Volterra**, adaptive Dormand-Prince 5(4) with error control (``while t < t_end``,
  steps accepted or rejected on values): the gradient of x(T) + y(T) with respect to the
  4 parameters.  Control flow that depends on the parameters: ``tg.compile`` must record
  again at every new point (it is timed at its recorded point, its best case); JAX cannot
  reverse-differentiate ``lax.while_loop``, so its workaround is a ``lax.scan`` over a
  fixed step bound with finished steps masked (timed for bounds that cover the run).
* **Kalman filter**: the exact log-likelihood of a constant-velocity model (2-D state,
  2x2 covariance written out in scalars) over 2,000 noisy positions, differentiated with
  respect to log process noise and log measurement noise: a maximum-likelihood fit's
  inner loop.  JAX runs it as ``lax.scan`` (its control flow does not depend on values).

Also: the first call of each ``tg.jit`` function (compiled from scratch, no cache), and a
fresh process with a warm cache (import + first gradient).  BLAS is pinned to one thread.

    python benchmarks/jit.py            # writes benchmarks/results/jit.json
    python benchmarks/jit.py --quick    # smoke run, writes nothing

JAX and CasADi come from the ``bench`` extra (skipped when not importable); PyTorch when
installed (``--no-torch`` to skip).  CasADi's SX graphs cannot branch on values, so it runs
Rosenbrock and the Kalman filter, not the adaptive solver.
"""
from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    from _blas import limit_threads   # before numpy is imported
    limit_threads()
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numba  # noqa: E402
import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402
from tapegrad.jit.active import SLOTS  # noqa: E402


def median_time(fn, repeats, min_time=0.0):
    """Median seconds of ``fn()`` over ``repeats`` runs (more while under ``min_time``)."""
    times = []
    t_end = time.perf_counter() + min_time
    while len(times) < repeats or (time.perf_counter() < t_end and len(times) < 200):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


# -- workloads: one source, run on floats, actives, tapegrad tensors and torch tensors -------
def rosen(x):
    s = 0.0
    for i in range(len(x) - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


A21 = 1 / 5
A31, A32 = 3 / 40, 9 / 40
A41, A42, A43 = 44 / 45, -56 / 15, 32 / 9
A51, A52, A53, A54 = 19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729
A61, A62, A63, A64, A65 = 9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656
B1, B3, B4, B5, B6 = 35 / 384, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84
E1, E3, E4, E5, E6, E7 = 71 / 57600, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40
T_END, TOL = 15.0, 1e-9


def lotka_volterra(p, t_end, tol):
    """x(t_end) + y(t_end) of dx = a x - b x y, dy = c x y - d y from (1, 1): adaptive
    Dormand-Prince 5(4), first-same-as-last, steps accepted on a scaled error norm."""
    a, b, c, d = p[0], p[1], p[2], p[3]
    t = 0.0
    x = 1.0
    y = 1.0
    h = 0.01
    k1x = a * x - b * x * y
    k1y = c * x * y - d * y
    while t < t_end:
        if t + h > t_end:
            h = t_end - t
        x2 = x + h * A21 * k1x
        y2 = y + h * A21 * k1y
        k2x = a * x2 - b * x2 * y2
        k2y = c * x2 * y2 - d * y2
        x3 = x + h * (A31 * k1x + A32 * k2x)
        y3 = y + h * (A31 * k1y + A32 * k2y)
        k3x = a * x3 - b * x3 * y3
        k3y = c * x3 * y3 - d * y3
        x4 = x + h * (A41 * k1x + A42 * k2x + A43 * k3x)
        y4 = y + h * (A41 * k1y + A42 * k2y + A43 * k3y)
        k4x = a * x4 - b * x4 * y4
        k4y = c * x4 * y4 - d * y4
        x5 = x + h * (A51 * k1x + A52 * k2x + A53 * k3x + A54 * k4x)
        y5 = y + h * (A51 * k1y + A52 * k2y + A53 * k3y + A54 * k4y)
        k5x = a * x5 - b * x5 * y5
        k5y = c * x5 * y5 - d * y5
        x6 = x + h * (A61 * k1x + A62 * k2x + A63 * k3x + A64 * k4x + A65 * k5x)
        y6 = y + h * (A61 * k1y + A62 * k2y + A63 * k3y + A64 * k4y + A65 * k5y)
        k6x = a * x6 - b * x6 * y6
        k6y = c * x6 * y6 - d * y6
        xn = x + h * (B1 * k1x + B3 * k3x + B4 * k4x + B5 * k5x + B6 * k6x)
        yn = y + h * (B1 * k1y + B3 * k3y + B4 * k4y + B5 * k5y + B6 * k6y)
        k7x = a * xn - b * xn * yn
        k7y = c * xn * yn - d * yn
        ex = h * (E1 * k1x + E3 * k3x + E4 * k4x + E5 * k5x + E6 * k6x + E7 * k7x)
        ey = h * (E1 * k1y + E3 * k3y + E4 * k4y + E5 * k5y + E6 * k6y + E7 * k7y)
        sx = ex / (tol + tol * abs(xn))
        sy = ey / (tol + tol * abs(yn))
        err2 = 0.5 * (sx * sx + sy * sy)
        if err2 <= 1.0:
            t = t + h
            x = xn
            y = yn
            k1x = k7x
            k1y = k7y
        h = h * min(5.0, max(0.2, 0.9 * (err2 + 1e-30) ** -0.1))
    return x + y


log = math.log   # the tensor backends run the same code with their own log (with_log)


def kalman(theta, ys, dt):
    """Log-likelihood of positions ``ys`` under a constant-velocity model with process
    noise exp(theta[0]) and measurement noise exp(theta[1])."""
    q = 2.718281828459045 ** theta[0]
    r = 2.718281828459045 ** theta[1]
    q11 = q * dt * dt * dt / 3.0
    q12 = q * dt * dt / 2.0
    q22 = q * dt
    m0 = 0.0
    m1 = 0.0
    p00 = 10.0
    p01 = 0.0
    p11 = 10.0
    ll = 0.0
    for k in range(len(ys)):
        # predict: m = F m, P = F P F' + Q with F = [[1, dt], [0, 1]]
        m0 = m0 + dt * m1
        p00 = p00 + dt * (2.0 * p01 + dt * p11) + q11
        p01 = p01 + dt * p11 + q12
        p11 = p11 + q22
        # update with y = m0 + noise
        s = p00 + r
        v = ys[k] - m0
        ll = ll - 0.5 * (log(6.283185307179586 * s) + v * v / s)
        k0 = p00 / s
        k1 = p01 / s
        m0 = m0 + k0 * v
        m1 = m1 + k1 * v
        p11 = p11 - k1 * p01
        p01 = p01 - k0 * p01
        p00 = p00 - k0 * p00
    return ll


def with_log(fn, log_fn):
    """``fn`` (the same code) reading ``log_fn`` as its global ``log``."""
    import types
    return types.FunctionType(fn.__code__, {**fn.__globals__, "log": log_fn}, fn.__name__)


# one source, compiled as: value only (numba.njit), recorded (tg.jit), and plain Python
kalman_jit = tg.jit(kalman)
kalman_njit = numba.njit(kalman)
rosen_jit = tg.jit(rosen)
rosen_njit = numba.njit(rosen)
lv_jit = tg.jit(lotka_volterra)
lv_njit = numba.njit(lotka_volterra)


def kalman_data(n, seed=0):
    rng = np.random.default_rng(seed)
    dt = 0.1
    pos, vel, ys = 0.0, 1.0, []
    for _ in range(n):
        vel += rng.normal(0.0, math.sqrt(0.5 * dt))
        pos += dt * vel
        ys.append(pos + rng.normal(0.0, 0.7))
    return np.array(ys), dt


# -- backends ------------------------------------------------------------------------------
def jit_parts(f, args):
    """tg.jit: record + backward, record alone, sweep alone, entries, bytes."""
    out = {}
    out["record_backward_s"] = median_time(lambda: f.value_and_grad(*args), 7, 1.0)
    slot = 0
    call = f._record(args, (0,), slot)
    n = SLOTS[slot].n
    out["entries"] = n
    out["constants"] = SLOTS[slot].n_consts
    out["bytes_per_entry"] = 17.0      # int8 + 2 x int32 + float64, in reused buffers
    out["bytes_per_entry_with_constants"] = (17.0 * n + 8.0 * SLOTS[slot].n_consts) / n
    out["record_s"] = median_time(lambda: f._record(args, (0,), slot), 7, 1.0)
    call = f._record(args, (0,), slot)
    out["sweep_s"] = median_time(lambda: call.vjp([1.0]), 7, 1.0)
    out["sweep_ns_per_entry"] = out["sweep_s"] / n * 1e9
    out["record_ns_per_entry"] = out["record_s"] / n * 1e9
    return out


def interleaved_ratio(fast, slow, repeats=15):
    """Median over runs of time(fast) / time(slow), timed alternately: on a machine shared
    with other jobs, both sides of each ratio see the same load."""
    ratios = []
    for _ in range(repeats):
        t = time.perf_counter()
        fast()
        a = time.perf_counter() - t
        t = time.perf_counter()
        slow()
        ratios.append(a / (time.perf_counter() - t))
    return statistics.median(ratios)


def first_call(fn, args):
    """Seconds of the first gradient of a fresh, uncached compile of ``fn``."""
    f = tg.jit.JitFunction(fn)
    f.dispatcher = numba.njit(nogil=True, error_model="numpy")(fn)
    t = time.perf_counter()
    f.value_and_grad(*args)
    return time.perf_counter() - t


def eager_grad(fn, args, make):
    """tapegrad eager: record on tensors, backward."""
    def run():
        p = make(args[0])
        out = fn(p, *args[1:])
        out.backward()
    return run


def fresh_process_time():
    code = ("import time; t0 = time.perf_counter(); import numpy as np; import tapegrad as tg; "
            "import sys; sys.path.insert(0, %r); import jit as B; t1 = time.perf_counter(); "
            "B.rosen_jit.value_and_grad(np.linspace(-1, 1, 100)); t2 = time.perf_counter(); "
            "print(t1 - t0, t2 - t1)" % str(HERE))
    env = dict(os.environ, PYTHONPATH=str(HERE.parent))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if r.returncode:
        return {"error": r.stderr[-500:]}
    a, b = map(float, r.stdout.split()[-2:])
    return {"import_s": a, "first_gradient_s": b, "total_s": a + b}


def main():
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-jax", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results" / "jit.json"))
    args = ap.parse_args()
    quick = args.quick
    n = 2000 if quick else 20000
    res = {"date": time.strftime("%Y-%m-%d %H:%M"), "machine": platform.machine(),
           "python": platform.python_version(), "numpy": np.__version__,
           "numba": numba.__version__, "cpu_count": os.cpu_count(),
           "load_average_at_start": os.getloadavg()[0], "workloads": {}}

    torch = None
    if not args.no_torch:
        try:
            import torch
            torch.set_num_threads(1)
            res["torch"] = torch.__version__
        except ImportError:
            res["torch"] = "not installed"
    casadi = None
    try:
        import casadi
        res["casadi"] = casadi.__version__
    except ImportError:
        res["casadi"] = "not installed"
    jax = None
    if not args.no_jax:
        try:
            import jax
            jax.config.update("jax_enable_x64", True)
            import jax.numpy as jnp
            from jax import lax
            res["jax"] = jax.__version__
        except ImportError:
            res["jax"] = "not installed"
            jax = None

    # -- Rosenbrock --------------------------------------------------------------------
    x = np.random.default_rng(0).uniform(-1.2, 1.2, n)
    xl = x.tolist()
    W = {"n": n, "ops": 8 * (n - 1)}
    W["first_call_s"] = first_call(rosen, (x,))
    W["plain_python_value_s"] = median_time(lambda: rosen(xl), 7, 1.0)
    rosen_njit(x)
    W["numba_value_s"] = median_time(lambda: rosen_njit(x), 7, 0.5)
    W["tg_jit"] = jit_parts(rosen_jit, (x,))
    W["tg_jit_over_plain_python_interleaved"] = interleaved_ratio(
        lambda: rosen_jit.value_and_grad(x), lambda: rosen(xl))
    W["tapegrad_eager_s"] = median_time(
        eager_grad(rosen, (x,), lambda v: tg.tensor(v, requires_grad=True).unbind()
                   if hasattr(tg.Tensor, "unbind") else [tg.tensor(float(e), requires_grad=True) for e in v]),
        3)
    fc = tg.compile(rosen)
    fc.value_and_grad(x)
    W["tg_compile_replay_s"] = median_time(lambda: fc.value_and_grad(x + 0.01), 7, 1.0)
    if torch is not None:
        def torch_run():
            xs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in xl]
            rosen(xs).backward()
        W["torch_eager_s"] = median_time(torch_run, 1 if not quick else 1)
    if jax is not None:
        def rosen_jnp(v):
            return jnp.sum(100.0 * (v[1:] - v[:-1] ** 2) ** 2 + (1.0 - v[:-1]) ** 2)
        g = jax.jit(jax.value_and_grad(rosen_jnp))
        xj = jnp.asarray(x)
        t = time.perf_counter()
        jax.block_until_ready(g(xj))
        W["jax_first_call_s"] = time.perf_counter() - t
        W["jax_jit_vectorised_s"] = median_time(lambda: jax.block_until_ready(g(xj)), 20, 0.5)
    if casadi is not None:
        W.update(casadi_gradient(casadi, rosen, x))
    v, gr = rosen_jit.value_and_grad(x)
    W["check_value_vs_python"] = abs(v - rosen(xl)) / abs(v)
    res["workloads"]["rosenbrock"] = W

    # -- Lotka-Volterra, adaptive DOPRI5 ------------------------------------------------
    p = np.array([1.5, 1.0, 1.0, 3.0])
    W = {"t_end": T_END, "tol": TOL}
    W["first_call_s"] = first_call(lotka_volterra, (p, T_END, TOL))
    W["plain_python_value_s"] = median_time(lambda: lotka_volterra(p.tolist(), T_END, TOL), 5, 1.0)
    lv_njit(p, T_END, TOL)
    W["numba_value_s"] = median_time(lambda: lv_njit(p, T_END, TOL), 7, 0.5)
    W["tg_jit"] = jit_parts(lv_jit, (p, T_END, TOL))
    pl = p.tolist()
    W["tg_jit_over_plain_python_interleaved"] = interleaved_ratio(
        lambda: lv_jit.value_and_grad(p, T_END, TOL), lambda: lotka_volterra(pl, T_END, TOL))
    v, g = lv_jit.value_and_grad(p, T_END, TOL)
    fd = []
    for j in range(4):
        e = np.zeros(4)
        e[j] = 1e-6
        fd.append((lv_njit(p + e, T_END, TOL) - lv_njit(p - e, T_END, TOL)) / 2e-6)
    W["gradient"] = list(map(float, g))
    W["max_rel_diff_vs_central_differences"] = float(np.max(np.abs(g - fd) / np.abs(fd)))
    W["tapegrad_eager_s"] = median_time(
        eager_grad(lotka_volterra, (p, T_END, TOL), lambda v: [tg.tensor(float(e), requires_grad=True) for e in v]), 3)
    fc = tg.compile(lambda q: lotka_volterra(q, T_END, TOL))
    t = time.perf_counter()
    fc.value_and_grad(p)
    W["tg_compile_record_s"] = time.perf_counter() - t
    W["tg_compile_replay_same_point_s"] = median_time(lambda: fc.value_and_grad(p), 7, 1.0)
    if torch is not None:
        def torch_run():
            ps = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in p]
            lotka_volterra(ps, T_END, TOL).backward()
        W["torch_eager_s"] = median_time(torch_run, 1)
    steps = W["tg_jit"]["entries"]
    if jax is not None:
        W["jax_masked_scan"] = jax_masked_scan(jax, jnp, lax, p, quick)
    res["workloads"]["lotka_volterra"] = W

    # -- Kalman filter log-likelihood ------------------------------------------------------
    ys, dt = kalman_data(500 if quick else 2000)
    theta = np.array([math.log(0.5), math.log(0.49)])
    W = {"n_observations": len(ys)}
    W["first_call_s"] = first_call(kalman, (theta, ys, dt))
    ysl = ys.tolist()
    W["plain_python_value_s"] = median_time(lambda: kalman(theta.tolist(), ysl, dt), 5, 1.0)
    kalman_njit(theta, ys, dt)
    W["numba_value_s"] = median_time(lambda: kalman_njit(theta, ys, dt), 7, 0.5)
    W["tg_jit"] = jit_parts(kalman_jit, (theta, ys, dt))
    thl = theta.tolist()
    W["tg_jit_over_plain_python_interleaved"] = interleaved_ratio(
        lambda: kalman_jit.value_and_grad(theta, ys, dt), lambda: kalman(thl, ysl, dt))
    W["tapegrad_eager_s"] = median_time(
        eager_grad(with_log(kalman, tg.log), (theta, ysl, dt),
                   lambda v: [tg.tensor(float(e), requires_grad=True) for e in v]), 3)
    if torch is not None:
        def torch_run():
            th = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in theta]
            with_log(kalman, torch.log)(th, ysl, dt).backward()
        W["torch_eager_s"] = median_time(torch_run, 3)
    if jax is not None:
        W.update(jax_kalman(jax, jnp, lax, theta, ys, dt))
    if casadi is not None:
        W.update(casadi_gradient(casadi, kalman, theta, (ysl, dt), casadi.log))
    res["workloads"]["kalman"] = W

    res["fresh_process_warm_cache"] = fresh_process_time()
    res["load_average_at_end"] = os.getloadavg()[0]   # (another job on the machine slows it)
    report(res)
    if not quick:
        Path(args.out).write_text(json.dumps(res, indent=1) + "\n")
        print("wrote", args.out)


def casadi_gradient(casadi, fn, x0, rest=(), log=None):
    """CasADi: the SX graph the same scalar loop builds, ``Function(x -> [f, grad f])``
    evaluated by its SX virtual machine (construction timed apart)."""
    t = time.perf_counter()
    x = casadi.SX.sym("x", len(x0))
    body = fn if log is None else with_log(fn, log)
    f = body([x[i] for i in range(len(x0))], *rest)
    F = casadi.Function("f", [x], [f, casadi.gradient(f, x)])
    build = time.perf_counter() - t
    X = casadi.DM(np.asarray(x0))
    F(X)
    return {"casadi_build_s": build,
            "casadi_sx_gradient_s": median_time(lambda: F(X), 7, 1.0)}


def jax_masked_scan(jax, jnp, lax, p, quick):
    """DOPRI5 under ``lax.scan`` over a fixed number of steps, finished steps masked (JAX
    cannot reverse-differentiate ``lax.while_loop``): compile + run per step bound."""
    def rhs(q, x, y):
        return q[0] * x - q[1] * x * y, q[2] * x * y - q[3] * y

    def solve(q, bound):
        def step(carry, _):
            t, x, y, h, k1x, k1y = carry
            live = t < T_END
            h = jnp.where(t + h > T_END, T_END - t, h)
            k2x, k2y = rhs(q, x + h * A21 * k1x, y + h * A21 * k1y)
            k3x, k3y = rhs(q, x + h * (A31 * k1x + A32 * k2x), y + h * (A31 * k1y + A32 * k2y))
            k4x, k4y = rhs(q, x + h * (A41 * k1x + A42 * k2x + A43 * k3x), y + h * (A41 * k1y + A42 * k2y + A43 * k3y))
            k5x, k5y = rhs(q, x + h * (A51 * k1x + A52 * k2x + A53 * k3x + A54 * k4x),
                           y + h * (A51 * k1y + A52 * k2y + A53 * k3y + A54 * k4y))
            k6x, k6y = rhs(q, x + h * (A61 * k1x + A62 * k2x + A63 * k3x + A64 * k4x + A65 * k5x),
                           y + h * (A61 * k1y + A62 * k2y + A63 * k3y + A64 * k4y + A65 * k5y))
            xn = x + h * (B1 * k1x + B3 * k3x + B4 * k4x + B5 * k5x + B6 * k6x)
            yn = y + h * (B1 * k1y + B3 * k3y + B4 * k4y + B5 * k5y + B6 * k6y)
            k7x, k7y = rhs(q, xn, yn)
            ex = h * (E1 * k1x + E3 * k3x + E4 * k4x + E5 * k5x + E6 * k6x + E7 * k7x)
            ey = h * (E1 * k1y + E3 * k3y + E4 * k4y + E5 * k5y + E6 * k6y + E7 * k7y)
            sx = ex / (TOL + TOL * jnp.abs(xn))
            sy = ey / (TOL + TOL * jnp.abs(yn))
            err2 = 0.5 * (sx * sx + sy * sy)
            ok = live & (err2 <= 1.0)
            hn = h * jnp.minimum(5.0, jnp.maximum(0.2, 0.9 * (err2 + 1e-30) ** -0.1))
            new = (jnp.where(ok, t + h, t), jnp.where(ok, xn, x), jnp.where(ok, yn, y),
                   jnp.where(live, hn, h), jnp.where(ok, k7x, k1x), jnp.where(ok, k7y, k1y))
            return new, None
        x0 = jnp.float64(1.0)
        k1 = rhs(q, x0, x0)
        carry = (jnp.float64(0.0), x0, x0, jnp.float64(0.01), k1[0], k1[1])
        (t, x, y, *_), _ = lax.scan(step, carry, None, length=bound)
        return x + y, t

    out = {}
    pj = jnp.asarray(p)
    try:   # JAX's own adaptive Dormand-Prince, differentiated by its adjoint ODE
        from jax.experimental.ode import odeint

        def field(state, t, q):
            x, y = state[0], state[1]
            return jnp.stack([q[0] * x - q[1] * x * y, q[2] * x * y - q[3] * y])

        def final(q):
            ys = odeint(field, jnp.array([1.0, 1.0]), jnp.array([0.0, T_END]), q,
                        rtol=TOL, atol=TOL)
            return ys[-1, 0] + ys[-1, 1]
        g = jax.jit(jax.value_and_grad(final))
        t = time.perf_counter()
        jax.block_until_ready(g(pj))
        first = time.perf_counter() - t
        out["odeint"] = {"compile_and_first_s": first,
                         "gradient_s": median_time(lambda: jax.block_until_ready(g(pj)), 5, 1.0),
                         "gradient": [float(e) for e in g(pj)[1]]}
    except Exception as e:   # noqa: BLE001  (an older or newer JAX without it)
        out["odeint"] = {"skipped": f"{type(e).__name__}: {e}"}
    for bound in ((1000,) if quick else (1000, 2000, 4000)):
        g = jax.jit(jax.value_and_grad(lambda q: solve(q, bound)[0]))
        t = time.perf_counter()
        (v, gr) = jax.block_until_ready(g(pj))
        first = time.perf_counter() - t
        t_reached = float(jax.jit(lambda q: solve(q, bound)[1])(pj))
        run = median_time(lambda: jax.block_until_ready(g(pj)), 5, 1.0)
        out[str(bound)] = {"compile_and_first_s": first, "gradient_s": run,
                           "covers_run": t_reached >= T_END, "value": float(v),
                           "gradient": [float(e) for e in gr]}
    return out


def jax_kalman(jax, jnp, lax, theta, ys, dt):
    def ll(th):
        q = jnp.exp(th[0])
        r = jnp.exp(th[1])
        Q = (q * dt ** 3 / 3.0, q * dt ** 2 / 2.0, q * dt)

        def step(c, y):
            m0, m1, p00, p01, p11, acc = c
            m0 = m0 + dt * m1
            p00 = p00 + dt * (2.0 * p01 + dt * p11) + Q[0]
            p01 = p01 + dt * p11 + Q[1]
            p11 = p11 + Q[2]
            s = p00 + r
            v = y - m0
            acc = acc - 0.5 * (jnp.log(6.283185307179586 * s) + v * v / s)
            k0, k1 = p00 / s, p01 / s
            return (m0 + k0 * v, m1 + k1 * v, p00 - k0 * p00, p01 - k0 * p01, p11 - k1 * p01, acc), None
        c = (0.0, 0.0, 10.0, 0.0, 10.0, 0.0)
        c = tuple(jnp.float64(v) for v in c)
        return lax.scan(step, c, jnp.asarray(ys))[0][-1]
    g = jax.jit(jax.value_and_grad(ll))
    th = jnp.asarray(theta)
    t = time.perf_counter()
    jax.block_until_ready(g(th))
    first = time.perf_counter() - t
    return {"jax_first_call_s": first,
            "jax_scan_s": median_time(lambda: jax.block_until_ready(g(th)), 7, 1.0)}


def report(res):
    for name, W in res["workloads"].items():
        py = W["plain_python_value_s"]
        j = W["tg_jit"]
        print(f"\n== {name}: tg.jit record + backward {j['record_backward_s'] * 1e3:.3f} ms "
              f"= {j['record_backward_s'] / py:.3f}x plain-Python value-only ({py * 1e3:.2f} ms); "
              f"{j['entries']} entries, record {j['record_ns_per_entry']:.2f} + sweep "
              f"{j['sweep_ns_per_entry']:.2f} ns/entry; first call {W['first_call_s']:.2f} s; "
              f"timed alternately: {W['tg_jit_over_plain_python_interleaved']:.3f}x")
        for k, v in W.items():
            if k.endswith("_s") and k not in ("plain_python_value_s", "first_call_s"):
                print(f"   {k:34} {v * 1e3:10.3f} ms   = {v / j['record_backward_s']:9.2f}x tg.jit's gradient")
        if "jax_masked_scan" in W:
            for b, r in W["jax_masked_scan"].items():
                if "gradient_s" not in r or b == "odeint":
                    print(f"   jax {b}: {r}")
                    continue
                print(f"   jax masked scan, bound {b:>5}: {r['gradient_s'] * 1e3:.3f} ms "
                      f"(compile {r['compile_and_first_s']:.1f} s, covers the run: {r['covers_run']})")
    print("\nfresh process, warm cache:", res["fresh_process_warm_cache"])


if __name__ == "__main__":
    main()
