#!/usr/bin/env python3
"""``tg.func.vmap(tg.func.jacrev(f))``: the bundle-adjustment per-observation Jacobian.

The reprojection residual of one observation (the ADBench / GradBench definition): camera
parameters (11: Rodrigues rotation 3, centre 3, focal length 1, principal point 2, radial
distortion 2), one 3-D point (3) and a weight (1) give a 2-vector: rotate ``X - C`` by the
Rodrigues rotation of ``r``, project ``p = x[:2] / x[2]``, distort by
``1 + k1 |p|^2 + k2 |p|^4``, scale by ``f``, add the principal point, subtract the measured
feature, multiply by the weight.  Its Jacobian with respect to (camera, point, weight) is
2 x 15 per observation.  ``residual`` is written once and runs on tapegrad and on PyTorch
(only methods and indexing: ``m.stack``-free), without ADBench's ``theta == 0`` branch
(``torch.func.vmap`` refuses data-dependent Python control flow; no observation here has a
zero rotation).

Measured in one process, one thread everywhere (BLAS, PyTorch, tapegrad's batches), medians
over repeats, for N = 1,000 and 10,000 observations:

* tapegrad ``tg.func.vmap(tg.func.jacrev(residual, argnums=(0, 1, 2)))``, the object made
  once (a call records and compiles nothing after the first: ``first_call_s`` is that first
  call, recording + compile + replay) and written inline at every call (the cache finds the
  recording);
* PyTorch's per-observation loop: the residual of each observation and one
  ``torch.autograd.grad`` per residual component (2 reverse sweeps per observation);
* PyTorch's own ``torch.func.vmap(torch.func.jacrev(residual, argnums=(0, 1, 2)))``.

    python benchmarks/func.py           # writes benchmarks/results/func.json
    python benchmarks/func.py --quick   # N = 200 and 1,000, fewer repeats; writes nothing
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

if __name__ == "__main__":
    from _blas import limit_threads   # before numpy is imported
    os.environ["TAPEGRAD_NUM_THREADS"] = str(limit_threads())
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

import tapegrad as tg  # noqa: E402

ROT, CENTRE, FOCAL, PRINCIPAL, RADIAL = slice(0, 3), slice(3, 6), 6, slice(7, 9), slice(9, 11)


def cross(a, b):
    """a x b for 3-vectors, by indexing (no library call, so one source serves both)."""
    return a[[1, 2, 0]] * b[[2, 0, 1]] - a[[2, 0, 1]] * b[[1, 2, 0]]


def rodrigues_rotate(r, X):
    theta = (r * r).sum().sqrt()
    k = r / theta
    cos, sin = theta.cos(), theta.sin()
    return X * cos + cross(k, X) * sin + k * ((k * X).sum() * (1.0 - cos))


def residual(cam, X, w, feature):
    """The weighted reprojection error (2,) of one observation."""
    x = rodrigues_rotate(cam[ROT], X - cam[CENTRE])
    p = x[:2] / x[2]
    r2 = (p * p).sum()
    distortion = 1.0 + cam[RADIAL][0] * r2 + cam[RADIAL][1] * r2 * r2
    return (p * distortion * cam[FOCAL] + cam[PRINCIPAL] - feature) * w


def observations(n, seed=0):
    """n observations as NumPy arrays: cameras (n, 11), points (n, 3), weights (n,),
    features (n, 2); points about 10 units in front of cameras with small rotations."""
    rng = np.random.default_rng(seed)
    cams = np.empty((n, 11))
    cams[:, ROT] = rng.normal(0.0, 0.2, (n, 3))
    cams[:, CENTRE] = rng.normal(0.0, 0.5, (n, 3)) + [0.0, 0.0, -10.0]
    cams[:, FOCAL] = rng.uniform(400.0, 600.0, n)
    cams[:, PRINCIPAL] = rng.normal(0.0, 5.0, (n, 2))
    cams[:, RADIAL] = rng.normal(0.0, [1e-3, 1e-5], (n, 2))
    points = rng.normal(0.0, 1.0, (n, 3))
    weights = rng.uniform(0.5, 1.5, n)
    features = rng.normal(0.0, 50.0, (n, 2))
    return cams, points, weights, features


def median_time(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def torch_loop(torch, cams, points, weights, features):
    """PyTorch eager, one observation at a time: the residual, then one reverse sweep per
    component, each giving a row of the 2 x 15 Jacobian."""
    J = torch.empty(len(cams), 2, 15, dtype=torch.float64)
    for i in range(len(cams)):
        c = cams[i].detach().requires_grad_()
        x = points[i].detach().requires_grad_()
        w = weights[i].detach().requires_grad_()
        r = residual(c, x, w, features[i])
        for k in range(2):
            gc, gx, gw = torch.autograd.grad(r[k], (c, x, w), retain_graph=k == 0)
            J[i, k, :11], J[i, k, 11:14], J[i, k, 14] = gc, gx, gw
    return J


def flat(jacobians, n):
    """(d/dcam (n,2,11), d/dX (n,2,3), d/dw (n,2)) -> (n, 2, 15) NumPy."""
    return np.concatenate([np.asarray(j.detach().numpy()).reshape(n, 2, -1)
                           for j in jacobians], axis=2)


def run(n, repeats, loop_repeats, torch):
    data = observations(n)
    tg_args = [tg.tensor(a) for a in data]
    batched = tg.func.vmap(tg.func.jacrev(residual, argnums=(0, 1, 2)))
    tg.func.clear_cache()
    t = time.perf_counter()
    J = flat(batched(*tg_args), n)
    first = time.perf_counter() - t
    assert batched.last_path == "replay", batched.last_path
    res = {"n": n, "tapegrad_first_call_s": first,
           "tapegrad_vmap_jacrev_s": median_time(lambda: batched(*tg_args), repeats),
           "tapegrad_vmap_jacrev_inline_s": median_time(
               lambda: tg.func.vmap(tg.func.jacrev(residual, argnums=(0, 1, 2)))(*tg_args),
               repeats)}
    if torch is not None:
        t_args = [torch.tensor(a, dtype=torch.float64) for a in data]
        t_vmap = torch.func.vmap(torch.func.jacrev(residual, argnums=(0, 1, 2)))
        J_vmap = flat(t_vmap(*t_args), n)
        J_loop = torch_loop(torch, *t_args).numpy()
        res["max_abs_diff_vs_torch"] = float(max(np.abs(J - J_vmap).max(),
                                                 np.abs(J - J_loop).max()))
        res["max_abs_jacobian"] = float(np.abs(J_vmap).max())
        res["torch_func_vmap_jacrev_s"] = median_time(lambda: t_vmap(*t_args), repeats)
        res["torch_loop_s"] = median_time(lambda: torch_loop(torch, *t_args), loop_repeats)
        res["speedup_vs_torch_loop"] = res["torch_loop_s"] / res["tapegrad_vmap_jacrev_s"]
        res["speedup_vs_torch_func"] = (res["torch_func_vmap_jacrev_s"]
                                        / res["tapegrad_vmap_jacrev_s"])
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results" / "func.json"))
    args = ap.parse_args()
    torch = None
    if not args.no_torch:
        try:
            import torch
            import torch.func  # noqa: F401
            torch.set_num_threads(args.threads)
        except ImportError:
            torch = None
    sizes, repeats, loop_repeats = ((200, 1000), 5, 1) if args.quick else ((1000, 10000), 15, 3)
    results = [run(n, repeats, loop_repeats, torch) for n in sizes]
    print(f"{'N':>7} {'tg vmap(jacrev)':>16} {'inline':>10} {'first call':>11} "
          f"{'torch.func':>11} {'torch loop':>11} {'vs loop':>8} {'vs torch.func':>14}")
    for r in results:
        print(f"{r['n']:>7} {r['tapegrad_vmap_jacrev_s'] * 1e3:>13.2f} ms "
              f"{r['tapegrad_vmap_jacrev_inline_s'] * 1e3:>7.2f} ms "
              f"{r['tapegrad_first_call_s'] * 1e3:>8.1f} ms "
              + (f"{r['torch_func_vmap_jacrev_s'] * 1e3:>8.2f} ms "
                 f"{r['torch_loop_s'] * 1e3:>8.0f} ms {r['speedup_vs_torch_loop']:>7.0f}x "
                 f"{r['speedup_vs_torch_func']:>13.2f}x" if torch is not None else ""))
    if not args.quick:
        out = {"date": time.strftime("%Y-%m-%d"), "machine": platform.machine(),
               "cpus": os.cpu_count(), "python": platform.python_version(),
               "numpy": np.__version__, "torch": getattr(torch, "__version__", None),
               "threads": args.threads, "results": results}
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
