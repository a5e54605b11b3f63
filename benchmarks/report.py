#!/usr/bin/env python3
"""Plot the benchmark results (``benchmarks/results/*.json``) into one PNG for the README.

    python benchmarks/report.py            # writes benchmarks/results/report.png

Left: the scalar workload (Rosenbrock, ns per scalar op, log scale) for plain Python floats,
tapegrad and PyTorch.  Right: the tensor workloads as time relative to PyTorch (lower is
faster).  Every figure comes from the JSON the benchmark scripts wrote in one run each.
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

    scalar, tensor = load("scalar"), load("tensor")
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
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
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*(Path(a) for a in sys.argv[1:2]))
