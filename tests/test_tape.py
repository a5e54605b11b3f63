"""The tape itself: entries, nesting, links between tapes, memory, long chains."""
import gc
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tapegrad as tg


def test_entries_describe_the_program():
    with tg.Tape() as tape:
        x = tg.tensor(2.0, requires_grad=True)
        y = (x * 3.0).sin()
    entries = list(tape)
    assert [e.op for e in entries] == ["leaf", "mul", "sin"]
    assert entries[1].inputs == (0,) and entries[2].inputs == (1,)
    assert entries[2].output == 2
    assert entries[2].value == pytest.approx(math.sin(6.0))
    assert len(tape) == 3
    assert "3 entries" in repr(tape)
    assert tape.nbytes > 0


def test_gradient_does_not_touch_grad_and_backward_does():
    with tg.Tape() as tape:
        a = tg.tensor(1.5, requires_grad=True)
        b = tg.tensor(-0.5, requires_grad=True)
        y = a * a * b + b
    ga, gb = tape.gradient(y, [a, b], retain_graph=True)
    assert ga.item() == pytest.approx(2 * 1.5 * -0.5) and gb.item() == pytest.approx(1.5 ** 2 + 1)
    assert a.grad is None and b.grad is None
    tape.backward(y)
    assert a.grad.item() == pytest.approx(ga.item())


def test_innermost_tape_records():
    with tg.Tape() as outer:
        x = tg.tensor(1.0, requires_grad=True)
        u = x * 2.0
        with tg.Tape() as inner:
            v = u * 3.0
        w = v + 1.0
    assert v._tape is inner and w._tape is outer and u._tape is outer
    w.backward()       # flows outer -> inner -> outer through links
    assert x.grad.item() == 6.0


def test_leaf_used_on_two_tapes_gets_the_sum():
    x = tg.tensor(2.0, requires_grad=True)
    with tg.Tape():
        a = x * x
    with tg.Tape():
        b = x * 3.0
    (a + b).backward()
    assert x.grad.item() == 7.0


def test_ten_thousand_op_chain_has_no_recursion_limit():
    x = tg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(20_000):
        y = y * 1.0001
    y.backward()
    assert x.grad.item() == pytest.approx(1.0001 ** 20_000)
    fn = y.grad_fn   # the view is built from the tape: no deep Python object graph
    assert fn.name() == "MulBackward0"


def test_training_loop_memory_is_bounded():
    w = tg.tensor(0.5, requires_grad=True)

    def step():
        loss = (w * 3.0 - 1.0) ** 2
        loss.backward()
        with tg.no_grad():
            w.sub_(0.01 * w.grad)
        w.grad.zero_()
        return loss

    for _ in range(200):
        step()
    tape = tg.current_tape()
    gc.collect()
    import tracemalloc
    tracemalloc.start()
    for _ in range(500):
        step()
    gc.collect()
    small = tracemalloc.get_traced_memory()[0]
    for _ in range(3000):
        step()
    gc.collect()
    big = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert big - small < 200_000, (small, big)
    assert len(tg.current_tape()) < 50  # the default tape rolls over after each backward
    assert tape is not tg.current_tape()


def test_no_grad_records_nothing():
    with tg.Tape() as tape:
        x = tg.tensor(1.0, requires_grad=True)
        with tg.no_grad():
            y = x * 2.0
    assert len(tape) == 0 and not y.requires_grad and y.grad_fn is None


def test_array_and_scalar_entries_share_one_tape():
    with tg.Tape() as tape:
        v = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        s = tg.tensor(2.0, requires_grad=True)
        y = (v * s).sin()       # the 0-d tensor broadcasts inside the sweep
        z = y.sum() * s
    z.backward()
    vv = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(v.grad.numpy(), 2.0 * np.cos(vv * 2.0) * 2.0)
    assert s.grad.item() == pytest.approx(np.sum(np.sin(vv * 2)) + 2.0 * np.sum(np.cos(vv * 2) * vv))
    assert [e.op for e in tape][:4] == ["leaf", "leaf", "mul", "sin"]
    nf = (v * s).grad_fn.next_functions     # as PyTorch: no node for broadcasting
    assert [n.variable for n, _ in nf] == [v, s]


def test_broadcast_arrays_are_hidden_from_next_functions():
    a = tg.tensor(np.ones((3, 1)), requires_grad=True)
    b = tg.tensor(np.ones(4), requires_grad=True)
    with tg.Tape() as tape:
        c = a + b
    assert "broadcast" in [e.op for e in tape]   # the one place that sums gradients back
    assert [n.variable for n, _ in c.grad_fn.next_functions] == [a, b]


def test_imports_and_runs_without_a_writable_cache(tmp_path):
    """A read-only install must still import and differentiate (Numba compiles uncached)."""
    code = textwrap.dedent("""
        import tapegrad as tg
        x = tg.tensor(2.0, requires_grad=True)
        (x * x).backward()
        print(x.grad.item())
    """)
    ro = tmp_path / "ro"
    ro.mkdir()
    import shutil
    pkg = os.path.join(os.path.dirname(tg.__file__))
    shutil.copytree(pkg, ro / "tapegrad", ignore=shutil.ignore_patterns("__pycache__"))
    os.chmod(ro / "tapegrad", 0o555)
    env = dict(os.environ, PYTHONPATH=str(ro), NUMBA_CACHE_DIR="/proc/nonexistent",
               PYTHONDONTWRITEBYTECODE="1")
    if os.geteuid() == 0:
        pytest.skip("root can write anywhere: a read-only cache cannot be simulated")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "4.0"


def test_jit_falls_back_when_numba_cannot_cache(monkeypatch):
    """Numba raises at decoration when no cache directory is writable: we compile uncached."""
    import numba
    from tapegrad.core import numba_jit as _jit
    real = numba.njit
    calls = []

    def fake_njit(*args, cache=False, **kw):
        calls.append(cache)
        if cache:
            raise RuntimeError("cannot cache function 'f': no locator available for file 'x'")
        return real(*args, cache=False, **kw)

    monkeypatch.setattr(numba, "njit", fake_njit)

    @_jit.jit
    def f(x):
        return x + 1.0

    assert f(1.0) == 2.0 and calls == [True, False]


def test_a_tape_is_freed_when_nothing_refers_to_it():
    import weakref
    x = tg.tensor(2.0, requires_grad=True)
    with tg.Tape() as tape:
        y = (x * x).sin()
    ref = weakref.ref(tape)
    y.backward()
    del tape, y
    # the leaf still names its last tape (it re-registers on the next one it is used on)
    with tg.Tape():
        (x * 3.0).backward()
    gc.collect()
    assert ref() is None


def test_evaluations_without_backward_free_their_tapes():
    """Results dropped without backward: the default tape rolls over at a full chunk, and
    the old one is freed once none of its results is alive (PyTorch frees such graphs)."""
    import gc
    import weakref

    from tapegrad.core.tape import CHUNK
    a = tg.tensor(1.5, requires_grad=True)
    first = weakref.ref(tg.current_tape())
    for _ in range(CHUNK + 10):
        float(a * 2.0)
    gc.collect()
    assert first() is None and len(tg.current_tape()) < CHUNK
    kept = a * 3.0                        # a result alive across a roll-over still works
    for _ in range(CHUNK + 10):
        float(a * 2.0)
    (g,) = tg.autograd.grad(kept * kept, a)
    assert float(g) == 2 * 3.0 * 1.5 * 3.0


@pytest.mark.parametrize("op", ["broadcast", "comparison"])
def test_an_op_whose_operands_fill_the_chunk_records_on_their_tape(op):
    """Recording a broadcast operand (or a constant array) may fill the default tape's chunk,
    which rolls the default tape over: the op itself still goes on the tape its operand
    references point into (it went on the fresh one, whose flush then raised an internal
    error: a GMM objective evaluated 2340 times without backward)."""
    import threading

    from tapegrad.core.tape import CHUNK
    out = {}

    def run():   # (a thread of its own: a fresh default tape, so the roll-over is certain)
        col = tg.tensor([[0.5], [-1.0], [2.0]], requires_grad=True)
        row = tg.tensor([[1.0, 2.0, -3.0, 0.25]], requires_grad=True)
        y = None
        for _ in range(CHUNK // 3 + 10):
            if op == "comparison":
                (col < row).sum()           # (recorded: its operands are)
                y = (col * row).sum()
            else:
                y = (col + row).sum()
        (out["col"], out["row"]) = tg.autograd.grad(y, (col, row))
        out["len"] = len(tg.current_tape())

    t = threading.Thread(target=run)
    t.start()
    t.join()
    # d/dcol sum(col + row) = 4 (columns), d/drow = 3 (rows); d/dcol sum(col * row) = sum(row)
    expected = {"broadcast": (4.0, 3.0), "comparison": (0.25, 1.5)}[op]
    np.testing.assert_array_equal(out["col"].numpy(), np.full((3, 1), expected[0]))
    np.testing.assert_array_equal(out["row"].numpy(), np.full((1, 4), expected[1]))
    assert out["len"] < CHUNK


def test_array_evaluations_without_backward_free_their_tapes(monkeypatch):
    """The default tape also retires once its arrays pass ``ROLLOVER_BYTES`` (an objective
    over large arrays evaluated in a loop without backward kept every call's values: 1.4 MB
    a call, 2 GB after 1,500 calls), and hands over to a fresh tape only at an op that does
    not go on with its results: a hand-over in the middle of an expression linked the new
    tape to the old one, so each tape kept the one before it alive, forever."""
    import gc
    import threading
    import weakref

    from tapegrad.core import tape as tape_module
    monkeypatch.setattr(tape_module, "ROLLOVER_BYTES", 1 << 20)
    out = {}

    def run():   # (a thread of its own: a fresh default tape)
        rng = np.random.default_rng(0)
        x = tg.tensor(rng.normal(size=(100, 8)), requires_grad=True)
        c = tg.tensor(rng.normal(size=(10, 8)))

        def objective():   # ~200 KB of arrays a call
            d = ((x[:, None, :] - c[None]) ** 2).sum(-1)
            return d.min(dim=1).values.sum()

        def live_tapes():
            gc.collect()
            return sum(1 for o in gc.get_objects() if type(o) is tape_module.Tape)

        first = weakref.ref(tg.current_tape())
        before = live_tapes()   # (the first one, and other tests' tapes that may be alive)
        for _ in range(100):
            objective()
        out["first freed"] = live_tapes() <= before and first() is None
        kept = objective()                  # a result alive across roll-overs still works
        for _ in range(100):
            objective()
        out["kept elsewhere"] = kept._tape is not tg.current_tape()
        (g,) = tg.autograd.grad(kept, x)
        out["grad"] = g.numpy()
        xv, cv = x.detach().numpy(), c.numpy()
        j = (((xv[:, None, :] - cv[None]) ** 2).sum(-1)).argmin(axis=1)
        out["want"] = 2 * (xv - cv[j])

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert out["first freed"]   # (and every tape after it but the current one: no chain)
    assert out["kept elsewhere"]
    np.testing.assert_allclose(out["grad"], out["want"], rtol=1e-12)


def test_a_full_default_tape_hands_over_between_expressions():
    """A retiring default tape keeps recording while an op goes on with its results, and
    hands over at the first op whose operands are leaves, constants or other tapes'."""
    from tapegrad.core.tape import next_tape
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    T = tg.current_tape()
    y = a * 2.0
    T._retiring = len(T)
    assert next_tape(T, (y, a)) is T                # y is a result here: no hand-over
    z = y * 3.0                                   # (goes on, on T)
    assert z._tape is T and T._retiring
    w = a * 4.0                                   # a leaf only: a fresh tape
    assert w._tape is not T and not T._retiring and tg.current_tape() is w._tape
    (g,) = tg.autograd.grad((z * w).sum(), a)     # across the two tapes
    np.testing.assert_array_equal(g.numpy(), 2 * 24.0 * a.detach().numpy())


def _in_a_thread(fn):
    """Run ``fn`` in a thread of its own (a fresh default tape) and return its result."""
    import threading
    out = {}

    def run():
        out["result"] = fn()

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out["result"]


def test_forward_only_evaluations_retire_the_tape_once_nothing_of_it_lives(monkeypatch):
    """Past ``SOFT_ROLLOVER_BYTES`` the default tape retires at the first op that starts a new
    expression while no result of it is alive, long before ``ROLLOVER_BYTES``: a forward-only
    loop reuses a few MB instead of 64.  The objective below starts a new expression in its
    middle (``c @ p`` while ``a + b`` waits): a hand-over there would link the new tape to the
    old one (a chain keeping every call); it waits for the next call's first op."""
    import gc
    import weakref

    from tapegrad.core import tape as tape_module
    monkeypatch.setattr(tape_module, "SOFT_ROLLOVER_BYTES", 64 << 10)
    rng = np.random.default_rng(0)

    def run():
        x = tg.tensor(rng.normal(size=(200, 8)), requires_grad=True)
        c = tg.tensor(rng.normal(size=(10, 8)), requires_grad=True)

        def objective():   # ~60 KB of arrays a call
            a = (x ** 2).sum(1)[None, :]
            b = (c ** 2).sum(1)[:, None]
            return (a + b - 2 * (c @ x.T)).min(0).values.sum()

        seen = []
        for _ in range(120):
            objective()
            if not seen or seen[-1]() is not tg.current_tape():
                seen.append(weakref.ref(tg.current_tape()))
        gc.collect()
        live = sum(r() is not None for r in seen)
        kept = objective()             # a result alive while later calls hand over
        for _ in range(30):
            objective()
        (gx, gc_) = tg.autograd.grad(kept, (x, c))
        want = objective()
        (wx, wc) = tg.autograd.grad(want, (x, c))
        return len(seen), live, len(tg.current_tape()._links), gx, gc_, wx, wc

    tapes, live, links, gx, gc_, wx, wc = _in_a_thread(run)
    assert tapes >= 5 and live == 1 and links == 0
    np.testing.assert_array_equal(gx.numpy(), wx.numpy())
    np.testing.assert_array_equal(gc_.numpy(), wc.numpy())


def test_a_live_result_keeps_a_softly_retiring_tape():
    """A softly retiring tape (``_retiring < 0``) hands over only when no result of it is
    alive; a leaf that no later op uses does not keep a retired tape alive."""
    import gc
    import weakref

    def run():
        a = tg.tensor([1.0, 2.0], requires_grad=True)
        u = tg.tensor([3.0], requires_grad=True)
        y = a * 2.0 + u
        tape = weakref.ref(tg.current_tape())
        tape()._retiring = -8
        w = a * 4.0                       # y lives: no hand-over
        kept = w._tape is tape()
        del y, w
        z = a * 5.0                       # nothing of it alive: a fresh tape
        handed = z._tape is not tape()
        gc.collect()
        return kept, handed, tape() is None, u.requires_grad

    kept, handed, freed, u_grad = _in_a_thread(run)
    assert kept and handed and freed and u_grad


def test_a_result_kept_alive_does_not_make_the_tape_grow(monkeypatch):
    """A result kept alive (a user's variable, Jupyter's ``Out``) keeps its tape, but later
    forward-only ops do not pile up on it: after ``_SOFT_TRIES`` checks found it alive, the
    tape retires as a full one does, at the next op that starts a new expression.  (It waited
    for twice the bytes, again and again up to ``ROLLOVER_BYTES``: fresh pages for every
    80 KB matmul, 60 us against 19.)  The kept result's gradient is unchanged, and its tape
    is freed once it dies."""
    import gc
    import weakref

    from tapegrad.core import tape as tape_module
    monkeypatch.setattr(tape_module, "SOFT_ROLLOVER_BYTES", 256 << 10)
    rng = np.random.default_rng(0)

    def run():
        c = tg.tensor(rng.normal(size=(10, 8)), requires_grad=True)
        p = tg.tensor(rng.normal(size=(8, 1000)))
        kept = (c ** 2).sum(1)[:, None]
        first = weakref.ref(tg.current_tape())
        sizes = []
        for _ in range(300):      # 300 x 80 KB: 24 MB on one tape
            tg.matmul(c, p)
            sizes.append(tg.current_tape().nbytes)
        handed_over = tg.current_tape() is not first()
        (g,) = tg.autograd.grad(kept.sum(), c)
        del kept
        gc.collect()
        return max(sizes), handed_over, first() is None, g.numpy(), 2 * c.detach().numpy()

    biggest, handed_over, freed, g, want = _in_a_thread(run)
    assert handed_over and freed
    # (large arrays count towards a check once 2 MB of them pass: _LARGE_FLUSH_BYTES)
    assert biggest < 4 << 20      # (it reached the loop's 24 MB)
    np.testing.assert_array_equal(g, want)


def test_ops_that_all_go_on_with_a_kept_result_hand_over(monkeypatch):
    """Every op of the loop below goes on with ``mc``, a result kept alive, so no op starts
    a new expression where a retiring tape could hand over: past ``_CONTINUED_BYTES`` times
    ``SOFT_ROLLOVER_BYTES`` it hands over anyway, the next op linking ``mc`` (the tape kept
    every result until 65,536 entries: 80 MB of RSS per 1,000 ops of 10,000 elements).
    Gradients through the links are the same."""
    from tapegrad.core import tape as tape_module
    monkeypatch.setattr(tape_module, "SOFT_ROLLOVER_BYTES", 256 << 10)
    rng = np.random.default_rng(0)

    def run():
        x = tg.tensor(rng.normal(size=(1000, 2)))
        mu = tg.tensor(rng.normal(size=(5, 2)), requires_grad=True)
        xc, mc = x[:, None, :], mu[None, :, :]
        first = tg.current_tape()
        sizes = []
        for _ in range(300):     # (each op 240 KB: the result and two broadcast views)
            y = xc - mc
            sizes.append(tg.current_tape().nbytes)
        (g,) = tg.autograd.grad((y * y).sum(), mu)
        want = -2.0 * (x.numpy()[:, None, :] - mu.detach().numpy()[None]).sum(0)
        return max(sizes), tg.current_tape() is not first, g.numpy(), want

    biggest, handed_over, g, want = _in_a_thread(run)
    assert handed_over
    # (large arrays count at a flush once 2 MB of them pass: _LARGE_FLUSH_BYTES)
    assert biggest < 4 << 20     # (it reached the loop's 72 MB)
    np.testing.assert_allclose(g, want, rtol=1e-12)


def test_large_arrays_count_towards_a_roll_over_at_once():
    """Arrays of ``LARGE_ARRAY`` elements or more are counted when appended, not at the
    next ``ARRAY_CHUNK`` entries: 8 MB arrays evaluated without backward held hundreds of MB
    before a flush looked."""
    from tapegrad.core import tape as tape_module
    n = tape_module.LARGE_ARRAY * 2

    def run():
        x = tg.tensor(np.linspace(0.0, 1.0, n), requires_grad=True)
        sizes = []
        for _ in range(60):
            ((x * 2.0).exp() - x).sum()
            sizes.append(tg.current_tape().nbytes)
        return max(sizes)

    assert _in_a_thread(run) < 4 * tape_module.SOFT_ROLLOVER_BYTES


def test_array_ops_alone_count_towards_a_roll_over():
    """A loop of array ops only (Python-op entries: ``matmul``, ``sum``) and of elementwise
    ops through the generic array path (``x + 0-d tensor``) flushes every ``ARRAY_CHUNK``
    entries like the elementwise fast paths, so the default tape sees its bytes and retires:
    ``_push_pyop`` flushed only at ``CHUNK`` entries, and a forward-only matmul loop kept
    every 80 KB result (fresh pages each: 55 us a call against NumPy's 8)."""
    from tapegrad.core import tape as tape_module
    rng = np.random.default_rng(0)

    def run(op):
        c = tg.tensor(rng.normal(size=(10, 8)), requires_grad=True)
        p = tg.tensor(rng.normal(size=(8, 1000)))
        s = tg.tensor(2.0, requires_grad=True)
        sizes = []
        for _ in range(300):      # 300 x 80 KB: 24 MB without a roll-over
            op(c, p, s)
            sizes.append(tg.current_tape().nbytes)
        return max(sizes)

    limit = 2 * tape_module.SOFT_ROLLOVER_BYTES
    assert _in_a_thread(lambda: run(lambda c, p, s: tg.matmul(c, p))) < limit
    assert _in_a_thread(lambda: run(lambda c, p, s: (c @ p).t() + s)) < limit


def test_recorded_ops_share_their_call_tuples_for_the_garbage_collector():
    # A tape keeps each Python op's call (name, arguments, params) alive; a fresh tuple per
    # op is one more object every full collection traverses (a quarter of the LSTM
    # objective's time).  Equal calls share one tuple; calls that only compare equal do not.
    from tapegrad.ops.array_ops import shared_call
    x = tg.tensor(np.arange(56.0), requires_grad=True)
    with tg.Tape() as T:
        parts = [x[0:14] + 0 for _ in range(50)] + [x[3] * 1 for _ in range(50)]
        sums = [tg.sum(x) for _ in range(50)] + [x.sum(0, keepdim=True) for _ in range(50)]
    kept = list(T._py.values())
    assert all(py.__class__ is tuple for py in kept)   # (core/pyop.py's packed ops)
    assert len({py[2] for py in kept}) == 4
    assert len(parts) + len(sums) == 200
    gc.collect()
    gc.collect()   # (the inputs' tuples untracked in the first, the ops' in the second)
    assert not gc.is_tracked(T._py)   # (nothing for a full collection to traverse)
    assert [tg.core.pyop.pyop_at(T, e).fwd for e in sorted(T._py)[::50]] == [
        ("getitem", (0, slice(0, 14)), {}), ("getitem", (0, 3), {}),
        ("sum", (0,), {"dim": None, "keepdim": False}), ("sum", (0,), {"dim": 0, "keepdim": True})]
    assert shared_call("sum", 1, {"dim": 1}) == shared_call("sum", 1, {"dim": 1})
    assert shared_call("sum", 1, {"dim": 1}) != shared_call("sum", 1, {"dim": True})
    assert shared_call("fill", 1, {"value": 0.0}) is None   # (-0.0 == 0.0: never shared)
    calls = tg.core.pyop.CALLS
    assert calls[shared_call("sum", 1, {"dim": True})] == ("sum", (0,), {"dim": True})
    assert calls[shared_call("sum", 2, {})][1] == (0, 1)
    g = tg.autograd.grad(sum(p.sum() for p in parts) + sum(s.sum() for s in sums), x)[0]
    expect = np.full(56, 100.0)
    expect[:14] += 50
    expect[3] += 50
    np.testing.assert_array_equal(g.numpy(), expect)


def test_past_the_shared_calls_limit_ops_record_their_own_calls(monkeypatch):
    # CALLS is append-only (a call number stays valid for good); once full, new calls are
    # recorded as PyOps with their own call, with the same gradients
    from tapegrad.core import pyop
    from tapegrad.ops import array_ops
    monkeypatch.setattr(pyop, "CALLS_LIMIT", len(pyop.CALLS))
    monkeypatch.setattr(array_ops, "_SHARED_CALLS", {})   # (as if no call were shared yet)
    x = tg.tensor(np.arange(40.0), requires_grad=True)
    with tg.Tape() as T:
        parts = [x[i:i + 29 + i % 3] for i in range(7)]
        y = sum((p * p).sum() for p in parts)
    assert all(py.__class__ is pyop.PyOp for py in T._py.values())
    g = tg.autograd.grad(y, x)[0].numpy()
    expect = np.zeros(40)
    for i in range(7):
        expect[i:i + 29 + i % 3] += 2 * np.arange(40.0)[i:i + 29 + i % 3]
    np.testing.assert_array_equal(g, expect)
