#!/usr/bin/env python3
"""Plot the benchmark results (``benchmarks/results/*.json``) into one PNG for the README.

    python benchmarks/report.py            # writes benchmarks/results/report.png and adbench.png

Left: the scalar workload (Rosenbrock, ns per scalar op, log scale) for plain Python floats,
tapegrad and PyTorch.  Middle: the tensor workloads as time relative to PyTorch (lower is
faster).  Right: ``tg.jit``'s value + gradient against plain Python's value alone, and
tapegrad eager and PyTorch eager on the same code (``benchmarks/jit.py``, log scale).  Every figure comes from the JSON the benchmark scripts wrote in one run each.

``adbench.png``: the ADBench/GradBench problems (``benchmarks/adbench.py``), tapegrad's time
over PyTorch's for the objective and for its derivative, per problem and size (log scale):
median process CPU time as bars, median wall-clock time as dots.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"


def load(name):
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def main(out=RESULTS / "report.png"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scalar, tensor, jit = load("scalar"), load("tensor"), load("jit")
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.4))
    ax = axes[0]
    if scalar:
        b = scalar["backends"]
        bars = [("plain floats\n(no gradient)", b["plain"]["ns_per_op"]["t_forward"], "#9ca3af"),
                ("tapegrad\nrecord+backward", b["tapegrad"]["ns_per_op"]["t_total"], "#2563eb")]
        if "ns_per_op" in b.get("torch", {}):
            bars.append(("PyTorch\nrecord+backward", b["torch"]["ns_per_op"]["t_total"],
                         "#f97316"))
        ax.bar([x[0] for x in bars], [x[1] for x in bars], color=[x[2] for x in bars])
        for k, (_, v, _) in enumerate(bars):
            ax.text(k, v * 1.08, f"{v:,.0f} ns", ha="center", fontsize=9)
        ax.set_yscale("log")
        ax.set_ylabel("ns per scalar op (log scale)")
        ax.set_title(f"Rosenbrock, n = {scalar['n']:,} ({scalar['date'][:10]})", fontsize=10)
    ax = axes[1]
    if tensor:
        r = tensor["results"]
        rows = [("MLP train step\n784-256-10, batch 128", r["mlp_step"]["tapegrad_s"] / r["mlp_step"]["torch_s"]),
                ("50 elementwise ops\non 8 floats + backward", 1 / r["elementwise_chain"]["torch_over_tapegrad"]),
                ("256x256 matmul\nforward + backward", r["matmul_256"]["tapegrad_over_torch"])]
        ax.barh([x[0] for x in rows], [x[1] for x in rows], color="#2563eb")
        ax.axvline(1.0, color="#f97316", lw=2, label="PyTorch = 1")
        ax.set_xlim(0, max(1.35, max(x[1] for x in rows) + 0.3))
        for k, (_, v) in enumerate(rows):
            ax.text(v + 0.03, k, f"{v:.2f}x", va="center", fontsize=9,
                    bbox=dict(facecolor="white", edgecolor="none", pad=1))
        ax.set_xlabel("tapegrad time / PyTorch time (lower is faster)")
        ax.set_title(f"Tensor workloads, float64, 1 thread ({tensor['meta']['date'][:10]})",
                     fontsize=10)
        ax.legend(loc="lower right", fontsize=8)
        ax.invert_yaxis()
    ax = axes[2]
    if jit:
        names = {"rosenbrock": "Rosenbrock\nn = 20,000", "lotka_volterra": "adaptive DOPRI5\nODE",
                 "kalman": "Kalman filter\n2,000 steps"}
        series = [("plain Python, value only", "plain_python_value_s", "#9ca3af"),
                  ("tg.jit value + gradient", None, "#2563eb"),
                  ("tapegrad eager", "tapegrad_eager_s", "#93c5fd"),
                  ("PyTorch eager", "torch_eager_s", "#f97316")]
        work = [w for w in names if w in jit["workloads"]]
        width = 0.2
        for k, (label, key, colour) in enumerate(series):
            vals = [jit["workloads"][w]["tg_jit"]["record_backward_s"] if key is None
                    else jit["workloads"][w].get(key, float("nan")) for w in work]
            ax.bar([i + (k - 1.5) * width for i in range(len(work))], [v * 1e3 for v in vals],
                   width, label=label, color=colour)
        ax.set_xticks(range(len(work)))
        ax.set_xticklabels([names[w] for w in work], fontsize=9)
        ax.set_yscale("log")
        ax.set_ylabel("ms per call (log scale)")
        ax.set_title(f"tg.jit: gradients of scalar code ({jit['date'][:10]})", fontsize=10)
        ax.set_ylim(top=ax.get_ylim()[1] * 30)
        ax.legend(fontsize=8, ncol=2, loc="upper center")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    adbench = load("adbench")
    if adbench:
        adbench_figure(plt, adbench, out.with_name("adbench.png"))


def adbench_figure(plt, adbench, out):
    rows = adbench["rows"]
    labels = [f"{r['problem']}  {r['size']}" for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.36 * len(rows) + 1.4))
    height = 0.38
    # bars: CPU time, which the machine's load moves least; dots: wall-clock time
    series = [("objective", "value", "#93c5fd"),
              ("derivative (gradient, Jacobian, J / H)", "derivative", "#2563eb")]
    for k, (label, which, colour) in enumerate(series):
        ys = [i + (k - 0.5) * height for i in range(len(rows))]
        cpu = [r.get(f"{which}_cpu_ratio", float("nan")) for r in rows]
        wall = [r.get(f"{which}_ratio", float("nan")) for r in rows]
        ax.barh(ys, cpu, height, color=colour, label=f"{label}, CPU time")
        ax.plot(wall, ys, "o", ms=3, color="#111827",
                label="the same, wall-clock time" if k else None)
        for y, v, w in zip(ys, cpu, wall):
            if v == v:
                ax.text(max(v, w if w == w else v) * 1.06, y, f"{v:.2f}x", va="center",
                        fontsize=7)
    for i, r in enumerate(rows):
        if not r["ok"]:
            ax.text(1.0, i, "  FAILED: see adbench.md", va="center", color="#dc2626", fontsize=8)
    ax.axvline(1.0, color="#f97316", lw=2, label="PyTorch = 1")
    ax.set_xscale("log")
    ticks = [0.125, 0.25, 0.5, 1, 2, 4, 8, 16, 32]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks], minor=False)
    ax.xaxis.set_minor_locator(plt.NullLocator())
    top = max([r.get(k, 1.0) for r in rows for k in ("value_ratio", "derivative_ratio",
                                                      "value_cpu_ratio", "derivative_cpu_ratio")])
    ax.set_xlim(0.1, max(4.0, 1.6 * top))
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("tapegrad time / PyTorch time, medians (log scale; lower is faster)")
    meta = adbench["meta"]
    ax.set_title(f"ADBench / GradBench problems, float64, {meta['threads']} thread(s) "
                 f"({meta['date'][:10]})", fontsize=10)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*(Path(a) for a in sys.argv[1:2]))
