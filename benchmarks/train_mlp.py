#!/usr/bin/env python3
"""Train small MLPs with ``tapegrad.nn`` + ``tapegrad.optim`` in two styles.

* **tensor style** -- ``nn.Sequential(Linear, ReLU, Linear, ReLU, Linear)`` on the whole data
  set as one (N, 2) tensor, ``F.cross_entropy``, ``optim.Adam``: the PyTorch way.  Data: two
  interleaved spirals (1000 points, 1.5 turns each, Gaussian noise).
* **scalar style** -- micrograd's MLP: every weight is a 0-d tensor
  (``tg.tensor(float, requires_grad=True)``), a neuron is ``relu(b + sum(w_i * x_i))`` written
  as a Python loop, the loss is the mean hinge loss ``relu(1 - y * score)`` over a mini-batch
  of points fed one at a time.  Every multiply and add is one tape entry (the scalar fast
  path), so this measures tapegrad on its home ground.  Data: two moons (1000 points): the
  spirals need a much bigger network than is sensible to run one float at a time.

Both print the training accuracy and the time, and the results go to
``benchmarks/results/train_mlp.json`` (``--out``).  The datasets and models are also used by
``tests/test_nn.py`` (the spirals at full size, fewer steps; the moons at 100 points).

Run as a script, BLAS is limited to one thread (``--threads``; ``OPENBLAS_NUM_THREADS`` etc.
are set before NumPy is imported): on a 2-core machine OpenBLAS's second thread spins and
slowed the tensor-style run up to 5x when anything else was running.

Usage::

    python benchmarks/train_mlp.py            # full size: 1000 points each
    python benchmarks/train_mlp.py --quick    # smaller, for a smoke run
"""
from __future__ import annotations

import argparse
import os
import sys

if __name__ == "__main__":
    from _blas import limit_threads   # before numpy is imported
    limit_threads()

import datetime as _dt  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import random  # noqa: E402
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

DEFAULT_OUT = HERE / "results" / "train_mlp.json"


# -- data ---------------------------------------------------------------------------------
def make_spirals(n=1000, turns=1.5, noise=0.05, seed=0):
    """Two interleaved spirals: ``n`` points (classes alternate), radius in [0, 1]."""
    rng = np.random.default_rng(seed)
    k = np.arange(n) % 2
    t = np.sqrt(rng.random(n)) * turns * 2 * np.pi      # uniform density along an arm
    r = t / (turns * 2 * np.pi)
    ang = t + np.pi * k
    X = np.stack([r * np.cos(ang), r * np.sin(ang)], 1) + noise * rng.standard_normal((n, 2))
    return X, k.astype(np.int64)


def make_moons(n=1000, noise=0.1, seed=0):
    """Two interleaving half circles (scikit-learn's ``make_moons``), classes alternate."""
    rng = np.random.default_rng(seed)
    k = np.arange(n) % 2
    t = rng.random(n) * np.pi
    X = np.where(k[:, None] == 0, np.stack([np.cos(t), np.sin(t)], 1),
                 np.stack([1 - np.cos(t), 0.5 - np.sin(t)], 1))
    return X + noise * rng.standard_normal((n, 2)), k.astype(np.int64)


# -- tensor style -------------------------------------------------------------------------
def tensor_mlp(hidden=64, seed=0):
    tg.manual_seed(seed)
    return nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 2))


def train_tensor(X, y, hidden=64, steps=300, lr=0.01, seed=0):
    """Full-batch Adam on cross-entropy; returns a dict with accuracy and time."""
    model = tensor_mlp(hidden, seed)
    opt = optim.Adam(model.parameters(), lr=lr)
    Xt, yt = tg.tensor(X), tg.tensor(y)
    t0 = time.perf_counter()
    for _ in range(steps):
        opt.zero_grad()
        loss = F.cross_entropy(model(Xt), yt)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - t0
    with tg.no_grad():
        logits = model(Xt)
        final = F.cross_entropy(logits, yt).item()
    acc = float(np.mean(np.argmax(logits.numpy(), 1) == y))
    return {"accuracy": acc, "seconds": seconds, "steps": steps, "final_loss": final,
            "ms_per_step": 1e3 * seconds / steps,
            "parameters": sum(p.numel() for p in model.parameters()), "model": repr(model)}


# -- scalar style (micrograd) -------------------------------------------------------------
class Neuron(nn.Module):
    """``relu(b + sum_i w_i x_i)`` over 0-d tensors (linear when ``nonlin=False``)."""

    def __init__(self, nin, rng, nonlin=True):
        super().__init__()
        scale = 1.0 / nin ** 0.5
        self.w = nn.ParameterList([tg.tensor(rng.uniform(-scale, scale), requires_grad=True)
                                   for _ in range(nin)])
        self.b = tg.tensor(0.0, requires_grad=True)
        self.nonlin = nonlin

    def forward(self, x):
        act = self.b
        for wi, xi in zip(self.w, x):
            act = act + wi * xi
        return act.relu() if self.nonlin else act

    def extra_repr(self):
        return f"{'ReLU' if self.nonlin else 'Linear'}, nin={len(self.w)}"


class Layer(nn.Module):
    def __init__(self, nin, nout, rng, nonlin=True):
        super().__init__()
        self.neurons = nn.ModuleList([Neuron(nin, rng, nonlin) for _ in range(nout)])

    def forward(self, x):
        return [n(x) for n in self.neurons]


class ScalarMLP(nn.Module):
    """micrograd's ``MLP(nin, nouts)``: a list of layers of neurons of 0-d tensors."""

    def __init__(self, nin, nouts, seed=0):
        super().__init__()
        rng = random.Random(seed)
        sizes = [nin] + list(nouts)
        self.layers = nn.ModuleList([Layer(sizes[i], sizes[i + 1], rng, nonlin=i != len(nouts) - 1)
                                     for i in range(len(nouts))])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x[0] if len(x) == 1 else x


def scalar_accuracy(model, X, y):
    with tg.no_grad():
        scores = [model(x).item() for x in X.tolist()]
    return float(np.mean((np.array(scores) > 0) == (y > 0)))


def train_scalar(X, y, hidden=(16, 16), steps=300, lr=0.03, batch_size=50, seed=0):
    """Adam on the mean hinge loss over mini-batches, one 0-d tensor op at a time."""
    model = ScalarMLP(2, list(hidden) + [1], seed)
    params = list(model.parameters())
    opt = optim.Adam(params, lr=lr)
    n = len(X)
    Xl, yl = X.tolist(), (2.0 * y - 1.0).tolist()
    rng = np.random.default_rng(seed)
    entries = 0
    t0 = time.perf_counter()
    for _ in range(steps):
        idx = rng.choice(n, batch_size, replace=False).tolist() if batch_size < n else range(n)
        opt.zero_grad()
        with tg.Tape() as tape:
            loss = 0.0
            for i in idx:
                loss = loss + (1.0 - yl[i] * model(Xl[i])).relu()
            loss = loss * (1.0 / len(idx))
        entries += len(tape)
        loss.backward()
        opt.step()
    seconds = time.perf_counter() - t0
    acc = scalar_accuracy(model, X, y)
    return {"accuracy": acc, "seconds": seconds, "steps": steps, "batch_size": batch_size,
            "ms_per_step": 1e3 * seconds / steps, "parameters": len(params),
            "tape_entries_per_step": entries / steps,
            "ns_per_entry": 1e9 * seconds / max(entries, 1), "final_loss": loss.item(),
            "model": f"ScalarMLP(2, {list(hidden) + [1]})"}


# -- main -----------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller data, for a smoke run")
    ap.add_argument("--threads", type=int, default=1,
                    help="BLAS/OpenMP threads (set before NumPy loads; default 1)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    n = 300 if args.quick else 1000
    results = {}

    X, y = make_spirals(n)
    r = train_tensor(X, y)
    results["tensor_spirals"] = dict(r, dataset=f"spirals n={n} turns=1.5 noise=0.05")
    print(f"tensor style, spirals n={n}: accuracy {r['accuracy']:.3f} in {r['seconds']:.2f} s "
          f"({r['steps']} Adam steps, {r['ms_per_step']:.2f} ms/step, "
          f"{r['parameters']} parameters)")

    X, y = make_moons(n)
    r = train_scalar(X, y, steps=100 if args.quick else 300)
    results["scalar_moons"] = dict(r, dataset=f"moons n={n} noise=0.1")
    print(f"scalar style, moons n={n}: accuracy {r['accuracy']:.3f} in {r['seconds']:.2f} s "
          f"({r['steps']} Adam steps of batch {r['batch_size']}, {r['ms_per_step']:.1f} ms/step, "
          f"{r['tape_entries_per_step']:.0f} tape entries/step, {r['ns_per_entry']:.0f} ns/entry "
          f"all in, {r['parameters']} scalar parameters)")

    meta = {"date": _dt.datetime.now().isoformat(timespec="seconds"),
            "python": platform.python_version(), "numpy": np.__version__,
            "machine": platform.machine(), "processor": platform.processor(),
            "cpus": os.cpu_count(), "quick": args.quick, "threads": args.threads}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    print(f"wrote {args.out}")
    ok = all(r["accuracy"] >= 0.97 for r in results.values())
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    sys.exit(main())
