"""``python -m tapegrad``: a backward graph read as PyTorch prints it, then a timed 100k-op scalar workload."""
from __future__ import annotations

import time

import tapegrad as tg


def graph_example():
    a = tg.tensor(2.0, requires_grad=True)
    b = tg.tensor(3.0, requires_grad=True)
    c = a + b
    d = tg.tensor(4.0, requires_grad=True)
    e = c * d
    print(">>> e = (a + b) * d")
    print(e)
    print(">>> e.grad_fn.next_functions")
    print(e.grad_fn.next_functions)
    print(">>> e.grad_fn.next_functions[1][0].variable")
    print(e.grad_fn.next_functions[1][0].variable)
    e.backward()
    print(">>> e.backward(); a.grad, b.grad, d.grad")
    print(a.grad, b.grad, d.grad)


def rosenbrock(x):
    t = 0.0
    for i in range(len(x) - 1):
        t = t + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return t


def scalar_workload(n=12_500):
    x0 = [0.5 + 0.001 * i for i in range(n)]
    ops = 8 * (n - 1)
    t0 = time.perf_counter()
    rosenbrock(x0)
    t_plain = time.perf_counter() - t0
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        with tg.Tape() as tape:
            xs = [tg.tensor(v, requires_grad=True) for v in x0]
            y = rosenbrock(xs)
        t1 = time.perf_counter()
        y.backward()
        t2 = time.perf_counter()
        best = (t1 - t0, t2 - t1) if best is None or sum(best) > t2 - t0 else best
    rec, bwd = best
    print(f"\nRosenbrock, n = {n}: {ops:,} scalar ops, tape of {len(tape):,} entries")
    print(f"  plain Python floats     {t_plain * 1e3:8.2f} ms  ({t_plain / ops * 1e9:6.1f} ns/op)")
    print(f"  tapegrad record         {rec * 1e3:8.2f} ms  ({rec / ops * 1e9:6.1f} ns/op)")
    print(f"  tapegrad backward       {bwd * 1e3:8.2f} ms  ({bwd / ops * 1e9:6.1f} ns/op)")
    print(f"  record + backward = {(rec + bwd) / t_plain:.1f}x the plain-float evaluation")
    print(f"  x[0].grad = {xs[0].grad}")


if __name__ == "__main__":
    graph_example()
    scalar_workload()
