#!/usr/bin/env python3
"""ADBench / GradBench problems, written once in PyTorch style and run with PyTorch and tapegrad.

Every objective below takes the array library as its first argument, ``torch``, and is called
with ``torch`` itself and with ``tapegrad`` in its place: the code is the same, only the module
differs.  The implementations are our own, written from the suites' published definitions
(microsoft/ADBench, gradbench/gradbench; their PyTorch tools give the reference semantics):

- **gmm**: log-likelihood of a Gaussian mixture with a Wishart prior (alphas K, means K x d,
  icf K x d(d+1)/2 -- the log of the diagonal then the strict lower triangle, column by
  column, of each component's inverse-covariance Cholesky factor --, points x n x d, prior
  gamma and m); the objective and its gradient with respect to alphas, means and icf.
- **ba**: bundle adjustment.  A camera is 11 numbers (Rodrigues rotation 3, centre 3,
  focal 1, principal point 2, radial distortion 2); residuals are ``w * (project(cam, X) -
  feat)`` (2 per observation) and ``1 - w**2`` (1 per observation).  The Jacobian is built as
  the suites' PyTorch tool builds it: one observation at a time, one backward per residual
  row, each camera, point and weight its own leaf tensor.
- **lstm**: ADBench's LSTM with diagonal weights (l layers, c characters of b = 14 bits);
  the objective is the negative log-likelihood of the next character, with ADBench's
  normaliser ``log(2 + sum(exp(ypred)))`` (its PyTorch code calls Python's ``sum(..., 2)``,
  its C++ adds 2); the gradient with respect to the main and the extra parameters.  The
  weight rows are taken out of the parameter matrices once per call rather than once per
  time step, for both libraries alike.
- **lse**: GradBench's log-sum-exp written from primitives, ``max + log(sum(exp(x - max)))``,
  value and gradient; also ``torch.logsumexp`` (the fused op) as a second row.
- **kmeans**: GradBench's k-means: cost = sum over points of the minimum over centroids of
  the squared distance (distances as GradBench computes them, ``|p|^2 + |c|^2 - 2 c.p``), and
  its Newton direction ``J / H`` where J is the gradient with respect to the centroids and
  H the Hessian's diagonal, got as a Hessian-vector product with ones through
  ``create_graph=True`` (the Hessian is diagonal) -- a second derivative through ``min``
  with indices.

**Inputs.**  We have no network and none of the suites' data files, so every input is made
here from a fixed seed (NumPy ``default_rng``), the way the suites' generators make theirs:
gmm as ADBench's ``gmm-data-gen.py`` (alphas, icf and x standard normal, means uniform on
[0, 1), gamma = 1, m = 0); lstm as ADBench's ``lstm/gen_data.py`` (state, main and extra
parameters uniform on [0, 1)), except that the sequence is c random 14-bit characters
instead of the bits of the first c characters of their text file; kmeans as GradBench
(points uniform on [0, 1), the centroids the last k points in reverse order, so that each
centroid is the closest one to at least one point); lse uniform on [-5, 5).  Bundle
adjustment: the suites read one camera, point, weight and feature from an ADBench file
(real BAL values) and repeat it n, m and p times; we draw every camera, point, weight and
feature separately (uniform, in ranges that keep points in front of the cameras: rotation
angles <= 0.2 rad, camera centres at z in [-6, -4], points in [-1, 1]^3) so that a wrong
index cannot hide behind equal values; observation i sees camera i mod n and point i mod m,
as in the suites.

**Hand tracking** (ADBench/GradBench ``ht``) is left out: it needs the suites' hand model
files (a skinned mesh with its bone hierarchy and weights), which we do not have and will
not invent.

**Checks.**  Before any timing, tapegrad's values and gradients are compared with PyTorch's
(float64, rtol 1e-8); a mismatch or an exception is printed loudly, recorded in the JSON and
the table, and the script carries on.

**Timing.**  One BLAS/OpenMP/Numba thread and ``torch.set_num_threads(1)`` (``--threads``),
set before NumPy loads; the libraries are called in turn within each repeat, in one process,
and the medians are reported with the ratio tapegrad / PyTorch (above 1: tapegrad slower),
both of wall-clock time and of process CPU time (``time.process_time``): on a busy machine
the wall clock also counts the time the process waited for a core.
JAX (``jax.numpy`` through a small adapter) joins for lse, gmm and kmeans when it is
installed (``pip install jax``), with ``jit``; the first call (the compile) is left out of the
timing and JAX's calls are timed back to back after the others (see ``run_problem``).

Results: a table on stdout, ``benchmarks/results/adbench.md`` and ``adbench.json``.

Usage::

    python benchmarks/adbench.py            # full run (~10 minutes, most of it the largest LSTM)
    python benchmarks/adbench.py --quick    # fewer repeats, no largest sizes
    python benchmarks/adbench.py --only gmm lse
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
import math  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import tapegrad  # noqa: E402

try:
    import torch as pytorch
except ImportError:      # only tapegrad runs; nothing is checked
    pytorch = None

DEFAULT_OUT = HERE / "results" / "adbench.json"
perf = time.perf_counter
# CPU time of the whole process: unlike the wall clock, it leaves out the time spent waiting
# for a core, which on a busy 2-core machine stalled one call in four by 10-20 ms
cpu_time = time.process_time
RTOL = 1e-8


# ============================== GMM (ADBench gmm) ==============================================
def multigammaln(a, p):
    """log of the multivariate gamma function Gamma_p(a) (a constant of the prior)."""
    return 0.25 * p * (p - 1) * math.log(math.pi) + sum(math.lgamma(a - 0.5 * j)
                                                         for j in range(p))


def lower_triangle_index(d):
    """Where each entry of the d x d strict lower triangle lives in a row of ``icf`` (after the d
    log-diagonal entries, column by column), and a 0/1 mask of the triangle."""
    index, mask = np.zeros((d, d), dtype=np.int64), np.zeros((d, d))
    k = d
    for col in range(d):
        for row in range(col + 1, d):
            index[row, col], mask[row, col] = k, 1.0
            k += 1
    return index, mask


def log_wishart_prior(torch, p, wishart_gamma, wishart_m, sum_qs, Qdiags, icf):
    n = p + wishart_m + 1
    k = icf.shape[0]
    out = torch.sum(0.5 * wishart_gamma * wishart_gamma
                    * (torch.sum(Qdiags ** 2, 1) + torch.sum(icf[:, p:] ** 2, 1))
                    - wishart_m * sum_qs)
    C = n * p * math.log(wishart_gamma / math.sqrt(2))
    return out - k * (C - multigammaln(0.5 * n, p))


def gmm_objective(torch, alphas, means, icf, x, wishart_gamma, wishart_m):
    n, d = x.shape
    Qdiags = torch.exp(icf[:, :d])
    sum_qs = torch.sum(icf[:, :d], 1)
    index, mask = lower_triangle_index(d)
    Ls = icf[:, torch.tensor(index)] * torch.tensor(mask)          # K x d x d
    xcentered = x[:, None, :] - means[None, :, :]                   # n x K x d
    Lxcentered = Qdiags * xcentered + torch.einsum("ijk,mik->mij", Ls, xcentered)
    sqsum_Lxcentered = torch.sum(Lxcentered ** 2, 2)
    inner_term = alphas + sum_qs - 0.5 * sqsum_Lxcentered
    slse = torch.sum(torch.logsumexp(inner_term, 1))
    CONSTANT = -n * d * 0.5 * math.log(2 * math.pi)
    return (CONSTANT + slse - n * torch.logsumexp(alphas, 0)
            + log_wishart_prior(torch, d, wishart_gamma, wishart_m, sum_qs, Qdiags, icf))


def gmm_input(d, K, n, seed=0):
    rng = np.random.default_rng(seed)
    return {"alphas": rng.standard_normal(K), "means": rng.uniform(0.0, 1.0, (K, d)),
            "icf": rng.standard_normal((K, d + d * (d - 1) // 2)),
            "x": rng.standard_normal((n, d)), "gamma": 1.0, "m": 0}


def gmm_prepare(torch, data):
    leaves = [torch.tensor(data[k], requires_grad=True) for k in ("alphas", "means", "icf")]
    return (*leaves, torch.tensor(data["x"]), data["gamma"], data["m"])


def gmm_value(torch, alphas, means, icf, x, gamma, m):
    return (gmm_objective(torch, alphas, means, icf, x, gamma, m),)


def gmm_gradient(torch, alphas, means, icf, x, gamma, m):
    value = gmm_objective(torch, alphas, means, icf, x, gamma, m)
    return (value, *torch.autograd.grad(value, (alphas, means, icf)))


# ============================== bundle adjustment (ADBench ba) ==================================
ROT_IDX, C_IDX, F_IDX, X0_IDX, RAD_IDX = 0, 3, 6, 7, 9


def rodrigues_rotate_point(torch, rot, X):
    sqtheta = torch.sum(rot ** 2)
    if sqtheta != 0.0:
        theta = torch.sqrt(sqtheta)
        costheta = torch.cos(theta)
        sintheta = torch.sin(theta)
        w = (1.0 / theta) * rot
        w_cross_X = torch.linalg.cross(w, X)
        tmp = torch.dot(w, X) * (1.0 - costheta)
        return X * costheta + w_cross_X * sintheta + w * tmp
    return X + torch.linalg.cross(rot, X)


def radial_distort(torch, rad_params, proj):
    rsq = torch.sum(proj ** 2)
    L = 1.0 + rad_params[0] * rsq + rad_params[1] * rsq * rsq
    return proj * L


def project(torch, cam, X):
    Xcam = rodrigues_rotate_point(torch, cam[ROT_IDX:ROT_IDX + 3], X - cam[C_IDX:C_IDX + 3])
    distorted = radial_distort(torch, cam[RAD_IDX:RAD_IDX + 2], Xcam[0:2] / Xcam[2])
    return distorted * cam[F_IDX] + cam[X0_IDX:X0_IDX + 2]


def compute_reproj_err(torch, cam, X, w, feat):
    return w * (project(torch, cam, X) - feat)


def compute_w_err(torch, w):
    return 1.0 - w ** 2


def ba_input(n, m, p, seed=0):
    rng = np.random.default_rng(seed)
    cams = np.empty((n, 11))
    cams[:, ROT_IDX:ROT_IDX + 3] = rng.uniform(-0.2, 0.2, (n, 3))
    cams[:, C_IDX:C_IDX + 2] = rng.uniform(-1.0, 1.0, (n, 2))
    cams[:, C_IDX + 2] = rng.uniform(-6.0, -4.0, n)
    cams[:, F_IDX] = rng.uniform(0.5, 1.5, n)
    cams[:, X0_IDX:X0_IDX + 2] = rng.uniform(-0.1, 0.1, (n, 2))
    cams[:, RAD_IDX:RAD_IDX + 2] = rng.uniform(-0.05, 0.05, (n, 2))
    obs = np.array([(i % n, i % m) for i in range(p)], dtype=np.int64)
    return {"cams": cams, "X": rng.uniform(-1.0, 1.0, (m, 3)), "w": rng.uniform(0.5, 1.5, p),
            "obs": obs, "feats": rng.uniform(-1.0, 1.0, (p, 2))}


def ba_prepare(torch, data):
    # one leaf per camera, point and weight, as the suites' PyTorch tool: torch.autograd.grad
    # of one residual with respect to rows of one big leaf would sweep the whole matrix
    cams = tuple(torch.tensor(c, requires_grad=True) for c in data["cams"])
    X = tuple(torch.tensor(x, requires_grad=True) for x in data["X"])
    w = tuple(torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in data["w"])
    return cams, X, w, [tuple(map(int, o)) for o in data["obs"]], torch.tensor(data["feats"])


def ba_value(torch, cams, X, w, obs, feats):
    reproj = [compute_reproj_err(torch, cams[c], X[q], w[j], feats[j])
              for j, (c, q) in enumerate(obs)]
    return torch.stack(reproj), torch.stack([compute_w_err(torch, wj) for wj in w])


def ba_jacobian(torch, cams, X, w, obs, feats):
    """Residuals and their Jacobian blocks: one backward per residual row."""
    reproj, blocks, w_err, w_blocks = [], [], [], []
    for j, (c, q) in enumerate(obs):
        inputs = (cams[c], X[q], w[j])
        err = compute_reproj_err(torch, *inputs, feats[j])
        rows = [torch.cat([g.reshape(-1) for g in torch.autograd.grad(err[r], inputs,
                                                                     retain_graph=r == 0)])
                for r in range(2)]
        reproj.append(err.detach())
        blocks.append(torch.stack(rows))
    for wj in w:
        e = compute_w_err(torch, wj)
        w_blocks.append(torch.autograd.grad(e, wj)[0])
        w_err.append(e.detach())
    return torch.stack(reproj), torch.stack(blocks), torch.stack(w_err), torch.stack(w_blocks)


# ============================== LSTM (ADBench lstm) =============================================
def lstm_model(torch, weight, bias, hidden, cell, inp):
    gates = torch.cat((inp, hidden, inp, hidden)) * weight + bias
    h = hidden.shape[0]
    forget = torch.sigmoid(gates[0:h])
    ingate = torch.sigmoid(gates[h:2 * h])
    outgate = torch.sigmoid(gates[2 * h:3 * h])
    change = torch.tanh(gates[3 * h:])
    cell = cell * forget + ingate * change
    hidden = outgate * torch.tanh(cell)
    return hidden, cell


def lstm_predict(torch, w, w2, s, x):
    x = x * w2[0]
    s2 = []
    for i in range(0, len(s), 2):
        hidden, cell = lstm_model(torch, w[i], w[i + 1], s[i], s[i + 1], x)
        s2 += [hidden, cell]
        x = hidden
    return x * w2[1] + w2[2], s2


def lstm_objective(torch, main_params, extra_params, state, sequence):
    w = [main_params[i] for i in range(main_params.shape[0])]
    w2 = [extra_params[i] for i in range(extra_params.shape[0])]
    s = [state[i] for i in range(state.shape[0])]
    total, count = 0.0, 0
    inp = sequence[0]
    for t in range(sequence.shape[0] - 1):
        ypred, s = lstm_predict(torch, w, w2, s, inp)
        # ADBench's normaliser: log(2 + sum(exp(ypred))), not a log-softmax
        ynorm = ypred - torch.log(torch.sum(torch.exp(ypred)) + 2.0)
        ygold = sequence[t + 1]
        total = total + torch.sum(ygold * ynorm)
        count += ygold.shape[0]
        inp = ygold
    return -total / count


def lstm_input(layers, chars, bits=14, seed=0):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 2 ** bits, chars)
    sequence = ((codes[:, None] >> np.arange(bits - 1, -1, -1)) & 1).astype(np.float64)
    return {"main_params": rng.uniform(0.0, 1.0, (2 * layers, 4 * bits)),
            "extra_params": rng.uniform(0.0, 1.0, (3, bits)),
            "state": rng.uniform(0.0, 1.0, (2 * layers, bits)), "sequence": sequence}


def lstm_prepare(torch, data):
    return (torch.tensor(data["main_params"], requires_grad=True),
            torch.tensor(data["extra_params"], requires_grad=True),
            torch.tensor(data["state"]), torch.tensor(data["sequence"]))


def lstm_value(torch, main_params, extra_params, state, sequence):
    return (lstm_objective(torch, main_params, extra_params, state, sequence),)


def lstm_gradient(torch, main_params, extra_params, state, sequence):
    value = lstm_objective(torch, main_params, extra_params, state, sequence)
    return (value, *torch.autograd.grad(value, (main_params, extra_params)))


# ============================== log-sum-exp (GradBench lse) =====================================
def lse_objective(torch, x):
    max_val = torch.max(x)
    return max_val + torch.log(torch.sum(torch.exp(x - max_val)))


def lse_fused_objective(torch, x):
    return torch.logsumexp(x, 0)


def lse_input(n, seed=0):
    return {"x": np.random.default_rng(seed).uniform(-5.0, 5.0, n)}


def lse_prepare(torch, data):
    return (torch.tensor(data["x"], requires_grad=True),)


def lse_value(torch, x):
    return (lse_objective(torch, x),)


def lse_gradient(torch, x):
    return torch.autograd.grad(lse_objective(torch, x), x)


def lse_fused_value(torch, x):
    return (lse_fused_objective(torch, x),)


def lse_fused_gradient(torch, x):
    return torch.autograd.grad(lse_fused_objective(torch, x), x)


# ============================== k-means (GradBench kmeans) ======================================
def kmeans_cost(torch, points, centroids):
    a_sqr = torch.sum(points ** 2, 1)[None, :]
    b_sqr = torch.sum(centroids ** 2, 1)[:, None]
    dists = a_sqr + b_sqr - 2 * torch.matmul(centroids, points.T)
    min_dist, _ = torch.min(dists, 0)
    return torch.sum(min_dist)


def kmeans_dir(torch, points, centroids):
    """Newton direction J / diag(H): the Hessian is diagonal, so H @ ones is its diagonal."""
    cost = kmeans_cost(torch, points, centroids)
    (J,) = torch.autograd.grad(cost, centroids, create_graph=True)
    (H,) = torch.autograd.grad(J, centroids, grad_outputs=torch.ones_like(centroids))
    return J.detach() / H


def kmeans_input(n, k, d, seed=0):
    points = np.random.default_rng(seed).uniform(0.0, 1.0, (n, d))
    return {"points": points, "centroids": points[-k:][::-1].copy()}


def kmeans_prepare(torch, data):
    return torch.tensor(data["points"]), torch.tensor(data["centroids"], requires_grad=True)


def kmeans_value(torch, points, centroids):
    return (kmeans_cost(torch, points, centroids),)


def kmeans_gradient(torch, points, centroids):
    return (kmeans_dir(torch, points, centroids),)


# ============================== the problems and their sizes ====================================
# name -> (make input, prepare, objective, derivative, derivative's label, sizes {label: args})
PROBLEMS = {
    "gmm": (gmm_input, gmm_prepare, gmm_value, gmm_gradient, "gradient",
            {"d=2 K=5 n=100": (2, 5, 100), "d=2 K=5 n=1000": (2, 5, 1000),
             "d=10 K=5 n=1000": (10, 5, 1000), "d=2 K=5 n=10000": (2, 5, 10000)}),
    "ba": (ba_input, ba_prepare, ba_value, ba_jacobian, "Jacobian",
           {"n=5 m=20 p=50": (5, 20, 50), "n=20 m=100 p=400": (20, 100, 400)}),
    "lstm": (lstm_input, lstm_prepare, lstm_value, lstm_gradient, "gradient",
             {"l=2 c=64": (2, 64), "l=2 c=1024": (2, 1024), "l=4 c=4096": (4, 4096)}),
    "lse": (lse_input, lse_prepare, lse_value, lse_gradient, "gradient",
            {"n=2,500": (2500,), "n=20,000": (20000,), "n=160,000": (160000,)}),
    "lse (fused logsumexp)": (lse_input, lse_prepare, lse_fused_value, lse_fused_gradient,
                              "gradient", {"n=160,000": (160000,)}),
    "kmeans": (kmeans_input, kmeans_prepare, kmeans_value, kmeans_gradient, "J / H (dir)",
               {"n=1000 k=10 d=8": (1000, 10, 8), "n=10000 k=100 d=8": (10000, 100, 8)}),
}
# the sizes left out by --quick (each takes seconds a call in PyTorch)
LARGEST = {("lstm", "l=4 c=4096"), ("gmm", "d=2 K=5 n=10000")}
# tiny sizes for tests/test_adbench.py
TINY = {"gmm": (3, 3, 7), "ba": (2, 3, 5), "lstm": (2, 4), "lse": (9,),
        "lse (fused logsumexp)": (9,), "kmeans": (20, 3, 2)}


def to_numpy(t):
    if hasattr(t, "detach"):
        return np.asarray(t.detach().numpy(), dtype=np.float64)
    return np.asarray(t, dtype=np.float64)


def evaluate(lib, problem, args, which):
    """Run ``problem`` at the size ``args`` with ``lib``; ``which`` is "value" or
    "derivative"; returns the outputs as NumPy arrays."""
    make_input, prepare, value, derivative, _, _ = PROBLEMS[problem]
    inputs = prepare(lib, make_input(*args))
    return [to_numpy(t) for t in (value if which == "value" else derivative)(lib, *inputs)]


def compare(got, want, rtol=RTOL):
    """Largest relative error of ``got`` against ``want`` (error over the largest magnitude of
    each output, so that entries near zero in a large output do not dominate), and whether
    every output is within ``rtol``.  A NaN or inf where the other has none is an infinite
    error (a plain ``max`` would skip a NaN)."""
    if len(got) != len(want):
        return math.inf, False
    worst = 0.0
    for g, w in zip(got, want):
        finite = np.isfinite(w)
        if g.shape != w.shape or not np.array_equal(np.isfinite(g), finite) or not \
                np.array_equal(g[~finite], w[~finite], equal_nan=True):
            return math.inf, False
        if finite.any():
            scale = max(float(np.max(np.abs(w[finite]))), 1e-300)
            worst = max(worst, float(np.max(np.abs(g[finite] - w[finite]))) / scale)
    return worst, worst <= rtol


# ============================== JAX (optional) ==================================================
def jax_backend(threads):
    """``jax.numpy`` dressed as much of ``torch`` as lse, gmm and kmeans use, and a maker of
    their jitted derivatives (problem, input -> callable); None without JAX."""
    # XLA's CPU thread pool, pinned like BLAS and PyTorch (read when the backend starts)
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen="
                          f"{'false' if threads == 1 else 'true'} "
                          f"intra_op_parallelism_threads={threads}")
    try:
        import jax
        import jax.numpy as jnp
        import jax.scipy.special as jsp
    except ImportError:
        return None
    jax.config.update("jax_enable_x64", True)

    class TorchShapedJax:
        exp, log, sqrt, sum, einsum, matmul = (jnp.exp, jnp.log, jnp.sqrt, jnp.sum,
                                               jnp.einsum, jnp.matmul)

        @staticmethod
        def tensor(a):
            return jnp.asarray(a)

        @staticmethod
        def max(x):
            return jnp.max(x)

        @staticmethod
        def min(x, dim):
            return jnp.min(x, dim), jnp.argmin(x, dim)

        @staticmethod
        def logsumexp(x, dim):
            return jsp.logsumexp(x, axis=dim)

    T = TorchShapedJax

    def kmeans_direction(points, c):
        grad = jax.grad(lambda c: kmeans_cost(T, points, c))
        J, H = jax.jvp(grad, (c,), (jnp.ones_like(c),))     # H @ ones: the diagonal
        return J / H

    def derivative(problem, data):
        if problem == "gmm":
            fn = jax.value_and_grad(lambda a, mu, q, x: gmm_objective(
                T, a, mu, q, x, data["gamma"], data["m"]), argnums=(0, 1, 2))
            keys = ("alphas", "means", "icf", "x")
        elif problem == "lse":
            fn, keys = jax.grad(lambda x: lse_objective(T, x)), ("x",)
        elif problem == "lse (fused logsumexp)":
            fn, keys = jax.grad(lambda x: lse_fused_objective(T, x)), ("x",)
        elif problem == "kmeans":
            fn, keys = kmeans_direction, ("points", "centroids")
        else:
            return None
        fn, args = jax.jit(fn), [jnp.asarray(data[k]) for k in keys]
        return lambda: flatten_jax(fn(*args))

    return jax.__version__, derivative


def flatten_jax(out):
    """JAX's nested (value, (grads...)) as a flat list of NumPy arrays (waiting for them)."""
    if isinstance(out, (tuple, list)):
        return [a for part in out for a in flatten_jax(part)]
    return [np.asarray(out)]


# ============================== timing ==========================================================
def interleaved(fns, budget_s, min_repeats=5, max_repeats=200):
    """Call each of ``fns`` (name -> callable) twice (a warm-up, then one call to size the
    run), then in turn until about ``budget_s`` per function has passed; per name, the
    per-call wall-clock times and the process CPU times (seconds)."""
    slowest = 0.0
    for fn in fns.values():
        fn()
        t0 = perf()
        fn()
        slowest = max(slowest, perf() - t0)
    repeats = int(min(max_repeats, max(min_repeats, budget_s / max(slowest, 1e-9))))
    wall, cpu = {k: [] for k in fns}, {k: [] for k in fns}
    gc.collect()
    for _ in range(repeats):
        for name, fn in fns.items():
            t0, c0 = perf(), cpu_time()
            fn()
            wall[name].append(perf() - t0)
            cpu[name].append(cpu_time() - c0)
    return wall, cpu


def run_problem(problem, label, args, budget_s, jax_derivative):
    make_input, prepare, value, derivative, deriv_label, _ = PROBLEMS[problem]
    data = make_input(*args)
    row = {"problem": problem, "size": label, "derivative": deriv_label, "failures": []}
    fns = {}
    for which, fn in (("value", value), ("derivative", derivative)):
        tg_inputs = prepare(tapegrad, data)
        try:
            tg_out = [to_numpy(t) for t in fn(tapegrad, *tg_inputs)]
        except Exception as exc:       # recorded and reported; the other problems still run
            msg = f"tapegrad {which} raised {type(exc).__name__}: {exc}"
            row["failures"].append(msg)
            print(f"\n!!! FAILED {problem} [{label}] {msg}")
            traceback.print_exc(limit=-3)
            tg_out = None
        if tg_out is not None:
            fns[("tapegrad", which)] = (lambda f=fn, a=tg_inputs: f(tapegrad, *a))
        if pytorch is not None:
            th_inputs = prepare(pytorch, data)
            th_out = [to_numpy(t) for t in fn(pytorch, *th_inputs)]
            fns[("torch", which)] = (lambda f=fn, a=th_inputs: f(pytorch, *a))
            if tg_out is not None:
                err, ok = compare(tg_out, th_out)
                row[f"{which}_max_rel_err"] = err
                if not ok:
                    msg = (f"tapegrad's {which} differs from PyTorch's: max relative error "
                           f"{err:.3g} > {RTOL:g}")
                    row["failures"].append(msg)
                    print(f"\n!!! MISMATCH {problem} [{label}] {msg}")
        jfn = jax_derivative(problem, data) if jax_derivative and which == "derivative" else None
        if jfn is not None:
            jout = jfn()                       # compiles
            if pytorch is not None:
                err, ok = compare(jout, th_out)
                row["jax_max_rel_err"] = err
                if not ok:
                    row["failures"].append(f"JAX differs from PyTorch: {err:.3g}")
                    print(f"\n!!! MISMATCH {problem} [{label}] JAX: max relative error {err:.3g}")
            fns[("jax", which)] = jfn
    for which in ("value", "derivative"):
        group = {lib: fn for (lib, w), fn in fns.items() if w == which and lib != "jax"}
        if not group:
            continue
        wall, cpu = interleaved(group, budget_s)
        if ("jax", which) in fns:
            # back to back, not interleaved: a jitted call runs on XLA's worker thread, and
            # waking it after Python has been busy took 0.3-1.7 ms on a loaded 2-core machine
            # against 46 us in a tight loop
            jax_wall, jax_cpu = interleaved({"jax": fns[("jax", which)]}, budget_s)
            wall.update(jax_wall)
            cpu.update(jax_cpu)
        for lib in wall:
            row[f"{lib}_{which}_s"] = statistics.median(wall[lib])
            row[f"{lib}_{which}_quartiles_s"] = statistics.quantiles(wall[lib], n=4)[::2]
            row[f"{lib}_{which}_cpu_s"] = statistics.median(cpu[lib])
            row[f"{lib}_{which}_repeats"] = len(wall[lib])
        if f"tapegrad_{which}_s" in row and f"torch_{which}_s" in row:
            row[f"{which}_ratio"] = row[f"tapegrad_{which}_s"] / row[f"torch_{which}_s"]
            row[f"{which}_cpu_ratio"] = (row[f"tapegrad_{which}_cpu_s"]
                                         / row[f"torch_{which}_cpu_s"])
    row["ok"] = not row["failures"]
    return row


# ============================== output ==========================================================
def fmt_t(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:,.0f} us"
    return f"{s * 1e3:,.1f} ms" if s < 1.0 else f"{s:,.2f} s"


def fmt_ratio(r, cpu=None):
    if r is None:
        return "-"
    return f"{r:.2f}x" + ("" if cpu is None else f" ({cpu:.2f}x)")


def markdown_table(rows, meta):
    has_jax = any("jax_derivative_s" in r for r in rows)
    head = ["problem", "size", "objective: tapegrad", "PyTorch", "ratio (CPU)",
            "derivative", "tapegrad", "PyTorch", "ratio (CPU)"]
    if has_jax:
        head.append("JAX (jit)")
    head.append("check vs PyTorch (max rel. error)")
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if k < 2 or h.startswith(("deriv", "check")) else "---:"
                            for k, h in enumerate(head)) + "|"]
    for r in rows:
        if r["ok"]:
            errs = [r.get(k) for k in ("value_max_rel_err", "derivative_max_rel_err")]
            check = ("ok (" + ", ".join(f"{e:.0e}" for e in errs if e is not None) + ")"
                     if any(e is not None for e in errs) else "not checked (no PyTorch)")
        else:
            check = "**FAILED**: " + "; ".join(r["failures"]).replace("|", "\\|")
        cells = [r["problem"], r["size"], fmt_t(r.get("tapegrad_value_s")),
                 fmt_t(r.get("torch_value_s")),
                 fmt_ratio(r.get("value_ratio"), r.get("value_cpu_ratio")),
                 r["derivative"], fmt_t(r.get("tapegrad_derivative_s")),
                 fmt_t(r.get("torch_derivative_s")),
                 fmt_ratio(r.get("derivative_ratio"), r.get("derivative_cpu_ratio"))]
        if has_jax:
            cells.append(fmt_t(r.get("jax_derivative_s")))
        cells.append(check)
        lines.append("| " + " | ".join(cells) + " |")
    note = (f"float64, {meta['threads']} thread(s), medians of interleaved repeats "
            f"({meta['date'][:10]}, Python {meta['python']}, NumPy {meta['numpy']}, "
            f"PyTorch {meta['torch']}" + (f", JAX {meta['jax']}" if meta.get("jax") else "")
            + f", {meta['cpus']} CPUs). Ratio = tapegrad's median time / PyTorch's (below 1: "
            "tapegrad faster); in parentheses the ratio of the median process CPU times, "
            "which leave out the time a busy machine kept the process waiting for a core. "
            "The derivative's time includes the objective's.")
    return (f"# ADBench / GradBench problems: tapegrad vs PyTorch\n\n"
            f"Written by `benchmarks/adbench.py`; {note}\n\n" + "\n".join(lines) + "\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="about 0.3 s of repeats per call, and not the largest sizes")
    ap.add_argument("--tiny", action="store_true",
                    help="the tests' tiny sizes and a few repeats: a smoke run of the script")
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS/OpenMP/torch threads (set before NumPy loads; default 1)")
    ap.add_argument("--only", nargs="*", choices=sorted(PROBLEMS), help="these problems only")
    ap.add_argument("--no-jax", action="store_true", help="leave JAX out even if installed")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT,
                    help="JSON results (the markdown table goes beside it, .md)")
    args = ap.parse_args(argv)
    if pytorch is not None:
        pytorch.set_num_threads(args.threads)
    else:
        print("PyTorch is not installed: tapegrad runs alone and nothing is checked")
    jax = None if args.no_jax else jax_backend(args.threads)
    budget = 0.0 if args.tiny else 0.3 if args.quick else 2.0
    rows = []
    for problem, spec in PROBLEMS.items():
        if args.only and problem not in args.only:
            continue
        sizes = {"tiny": TINY[problem]} if args.tiny else spec[5]
        for label, size in sizes.items():
            if args.quick and (problem, label) in LARGEST:
                continue
            row = run_problem(problem, label, size, budget, jax[1] if jax else None)
            rows.append(row)
            print(f"{problem:<22} {label:<18} value {fmt_t(row.get('tapegrad_value_s')):>9} "
                  f"vs {fmt_t(row.get('torch_value_s')):>9} ({fmt_ratio(row.get('value_ratio'))})"
                  f"   {row['derivative']} {fmt_t(row.get('tapegrad_derivative_s')):>9} vs "
                  f"{fmt_t(row.get('torch_derivative_s')):>9} "
                  f"({fmt_ratio(row.get('derivative_ratio'))})"
                  + (f"  jax {fmt_t(row['jax_derivative_s'])}" if "jax_derivative_s" in row
                     else "") + ("" if row["ok"] else "   FAILED"), flush=True)
    meta = {"date": _dt.datetime.now().isoformat(timespec="seconds"),
            "python": platform.python_version(), "numpy": np.__version__,
            "torch": getattr(pytorch, "__version__", None), "jax": jax[0] if jax else None,
            "threads": args.threads, "quick": args.quick, "tiny": args.tiny, "rtol": RTOL,
            "env": {k: os.environ.get(k) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                     "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")},
            "machine": platform.machine(), "processor": platform.processor(),
            "cpus": os.cpu_count()}
    table = markdown_table(rows, meta)
    print("\n" + table)
    failures = [f"{r['problem']} [{r['size']}]: {f}" for r in rows for f in r["failures"]]
    if failures:
        print("!!! " + f"{len(failures)} FAILURE(S):\n!!! " + "\n!!! ".join(failures))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(table)
    print(f"wrote {args.out} and {args.out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
