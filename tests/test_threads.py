"""Threads recording their own graphs over shared leaves get exactly the gradients of a
single-threaded run (PyTorch's rule; only .grad accumulation on a shared leaf is the
user's race), also with Numba's bounds checks on."""
import os
import subprocess
import sys
import textwrap

import numpy as np

import tapegrad as tg

SHARED_LEAVES = textwrap.dedent("""
    import sys, threading
    import numpy as np
    import tapegrad as tg

    sys.setswitchinterval(1e-6)          # switch threads as often as possible
    rng = np.random.default_rng(0)
    W1 = tg.tensor(rng.normal(size=(4, 3)), requires_grad=True)
    W2 = tg.tensor(rng.normal(size=(3,)), requires_grad=True)
    xs = [tg.tensor(rng.normal(size=(3,))) for _ in range(8)]

    def loss(x):
        h = (W1 @ x).tanh()
        s = (h[:3] * W2).sum() + (W1 * W1).sum() * 0.01
        return s * s + W2[0] * W1[0, 0] + W1[1, 2].sin() * W2[2]

    ref = [[g.numpy().copy() for g in tg.autograd.grad(loss(x), [W1, W2])] for x in xs]
    wrong = []

    def worker(k):
        for it in range(ROUNDS):
            g1, g2 = tg.autograd.grad(loss(xs[k]), [W1, W2])
            if not (np.array_equal(g1.numpy(), ref[k][0]) and np.array_equal(g2.numpy(), ref[k][1])):
                wrong.append((k, it))

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(len(wrong))
""")


def _run(rounds, **env):
    r = subprocess.run([sys.executable, "-c", SHARED_LEAVES.replace("ROUNDS", str(rounds))],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, **env})
    assert r.returncode == 0, r.stderr[-2000:]
    return int(r.stdout.split()[-1])


def test_threads_sharing_leaves_get_single_threaded_gradients():
    assert _run(120) == 0


def test_threads_sharing_leaves_with_numba_bounds_checks(tmp_path):
    # a fresh cache folder: the kernels compile again, with bounds checks in them
    assert _run(20, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path)) == 0


def test_a_leaf_shared_with_another_thread_stays_bound_to_its_own_tape():
    """The owner's fast path keeps reading the leaf's entry on its own tape; another
    thread's tape finds the leaf in its own table."""
    import threading
    x = tg.tensor(2.0, requires_grad=True)
    (x * x).backward()
    with tg.Tape() as mine:
        y = x * 3
    seen = {}

    def other():
        with tg.Tape() as theirs:
            (g,) = tg.autograd.grad(x * x * x, x)
        seen["g"], seen["bound"] = float(g), x._tape is theirs

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"g": 12.0, "bound": False} and x._tape is mine
    (g,) = tg.autograd.grad(y, x)
    assert float(g) == 3.0


def test_a_compiled_tape_shared_by_threads_gives_each_its_own_results():
    import threading
    with tg.Tape() as tape:
        xs = [tg.tensor(0.5, requires_grad=True) for _ in range(6)]
        y = sum(((xs[k + 1] - xs[k] ** 2) ** 2 + (1 - xs[k]) ** 2 for k in range(5)), 0.0)
    f = tape.compile(xs, y)
    rng = np.random.default_rng(0)
    points = [rng.uniform(-1, 1, size=(40, 6)) for _ in range(8)]
    want = [f.value_and_grad(p) for p in points]
    wrong = []

    def worker(k):
        for _ in range(50):
            values, grads = f.value_and_grad(points[k])
            one_v, one_g = f.value_and_grad(points[k][3])
            if not (np.array_equal(values, want[k][0]) and np.array_equal(grads, want[k][1])
                    and one_v == want[k][0][3] and np.array_equal(one_g, want[k][1][3])):
                wrong.append(k)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong
