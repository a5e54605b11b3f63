"""Tape optimisation (``tapegrad.optimize``): an optimised compiled tape gives the same
values, gradients, batches and Hessians as the tape it came from, with the entries that
cannot matter (constant, repeated, dead) gone; it is idempotent."""
import copy

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import kernels as K
from tapegrad.core.tape import OP_NAMES
from tapegrad.replay.tape_passes import _Pool, optimize
from tapegrad.replay.compiled_tape import CompiledTape, RetraceRequired, _validate

KEYS = ("op", "a", "b", "val0", "consts", "in_entries", "in_pos", "out", "guard_entries")


def _record(fn, x0):
    with tg.Tape() as tape:
        xs = [tg.tensor(float(v), requires_grad=True) for v in x0]
        y = fn(xs)
    return tape.compile(xs, y, optimize=False)


def _optimised(f):
    """A copy of ``f`` replaying the optimised arrays (checked as ``load`` checks a file)."""
    arrays, stats = optimize(*(getattr(f, k) for k in KEYS))
    for k in KEYS:
        assert arrays[k].dtype == getattr(f, k).dtype, k
    _validate({**arrays, "guard_values": f.guard_values},
              {"format": "tapegrad-compiled-tape", "version": 2, "ops": list(OP_NAMES),
               "n_inputs": f.n_inputs, "guards": [w for _, _, w in f.guards]})
    tern = np.nonzero(K.ARITY[arrays["op"]] == 3)[0]
    assert np.array_equal(arrays["b"][tern], tern - 1)      # each arg right before its op
    g = copy.copy(f)
    g.__dict__.pop("_fixed", None)      # derived from the arrays: recomputed on use
    for k in KEYS:
        setattr(g, k, arrays[k])
    g._inputs_changed()
    g.guards = [(int(i), v, w) for i, (_, v, w) in zip(arrays["guard_entries"], f.guards)]
    return g, stats


def _close(got, want):
    want = np.asarray(want)
    scale = max(1.0, float(np.max(np.abs(want)))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-13 * scale)


def _agree(f, g, points):
    """Same values, gradients (one point and batched), Hessians and JVPs."""
    rng = np.random.default_rng(1)
    for x in points:
        v, gr = f.value_and_grad(x)
        v2, gr2 = g.value_and_grad(x)
        _close(v2, v)
        _close(gr2, gr)
        _close(g.hessian(x), f.hessian(x))
        d = rng.normal(size=len(x))
        _close(g.jvp(x, d), f.jvp(x, d))
    X = np.array(points)
    V, G = f.value_and_grad(X)
    V2, G2 = g.value_and_grad(X)
    _close(V2, V)
    _close(G2, G)


def repeated(x):   # x*y twice, y*x (commutative), sin(x) twice, and a chain on top
    a, b, c = x
    u = a * b + tg.sin(a) * (a * b)
    w = b * a + tg.sin(a)
    return u * w + tg.tanh(a * b + tg.sin(a)) + c


def dead_code(x):  # results computed and never used; x[2] only feeds dead code
    a, b, c = x
    unused = tg.exp(c) * a + tg.cos(b)
    unused * unused
    return a * b + tg.sin(b)


def branchy(x):    # a guarded Python branch, where, clamp, and a repeated comparison
    a, b, c = x
    y = tg.where(a > 0, a * b, b - c) + tg.clamp(c, -0.5, 0.5) * tg.clamp(c, -0.5, 0.5)
    if a > 0:
        y = y + tg.where(a > 0, tg.sin(c), c) * a
    if b > 0.1:     # a comparison that only a guard uses
        y = y * 2.0
    return y * b


def rosen(x):
    t = 0.0
    for i in range(len(x) - 1):
        t = t + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return t


@pytest.mark.parametrize("fn", [repeated, dead_code, branchy])
def test_optimised_tape_replays_the_same(fn):
    rng = np.random.default_rng(0)
    x0 = rng.uniform(0.2, 1.0, 3)
    f = _record(fn, x0)
    g, stats = _optimised(f)
    assert stats["after_dead"] < stats["entries"] and len(g) == stats["after_dead"]
    _agree(f, g, [rng.uniform(0.1, 1.5, 3) for _ in range(6)])


def test_exact_counts_one_repeat_one_dead():
    def fn(x):
        a, b = x
        u, v = a * b, a * b
        tg.sin(a)                     # dead
        return u + v

    f = _record(fn, [0.5, 2.0])     # leaf, leaf, mul, mul, sin, add
    g, stats = _optimised(f)
    assert stats["entries"] == 6 and stats["folded"] == 0
    assert (stats["after_fold"], stats["after_merge"], stats["after_dead"]) == (6, 5, 4)
    assert list(g.op) == [K.LEAF, K.LEAF, 2, 0] and list(g.a[2:]) == [0, 2]
    assert list(g.b[2:]) == [1, 2]
    _agree(f, g, [np.array([0.3, -1.2]), np.array([2.0, 0.5])])


def test_only_commutative_ops_merge_with_swapped_operands():
    def fn(x):
        a, b = x
        return ((a - b) * (b - a) + a / b + b / a + tg.atan2(a, b) + tg.atan2(b, a)
                + (a + b) * (b + a))

    f = _record(fn, [0.5, 2.0])
    g, stats = _optimised(f)
    assert stats["entries"] - stats["after_dead"] == 1      # only b + a goes
    _agree(f, g, [np.array([0.3, -1.2]), np.array([2.0, 0.5])])


def test_dead_input_leaf_is_dropped_and_its_gradient_is_zero():
    f = _record(dead_code, [0.4, 0.6, 0.8])
    g, stats = _optimised(f)
    assert stats["inputs_dropped"] == 1 and 2 not in g.in_pos
    x = np.array([0.3, 0.7, 1.1])
    assert g.value_and_grad(x)[1][2] == 0.0 and g.hessian(x)[2].tolist() == [0.0] * 3
    assert g.value_and_grad(x[None])[1][0, 2] == 0.0


def test_guards_survive_and_still_refuse():
    f = _record(branchy, [0.5, 0.5, 0.5])
    g, _ = _optimised(f)
    assert len(g.guard_entries) == len(f.guard_entries)
    assert all(g.op[i] == f.op[j] for i, j in zip(g.guard_entries, f.guard_entries))
    for h in (f, g):
        with pytest.raises(RetraceRequired):
            h.value_and_grad(np.array([-0.5, 0.5, 0.5]))
        with pytest.raises(RetraceRequired):
            h.value_and_grad(np.array([0.5, 0.0, 0.5]))
        with pytest.raises(RetraceRequired):
            h.value_and_grad(np.array([[0.5, 0.5, 0.5], [-0.5, 0.5, 0.5]]))


def test_repeated_outputs_share_one_entry():
    with tg.Tape() as tape:
        xs = [tg.tensor(v, requires_grad=True) for v in (0.3, 0.9)]
        xs[1] * xs[0] + 0.0 * xs[0]   # dead
        outs = [xs[0] * xs[1], tg.sin(xs[0]) * xs[1], xs[1] * xs[0]]
    f = tape.compile(xs, outs, optimize=False)
    g, stats = _optimised(f)
    assert g.out[0] == g.out[2] and stats["after_dead"] < stats["entries"]
    x = np.array([1.2, -0.4])
    _close(g(x), f(x))
    _close(g.jacobian(x), f.jacobian(x))
    _close(g.vjp(x, [1.0, 2.0, 3.0]), f.vjp(x, [1.0, 2.0, 3.0]))


def _hand_tape():
    """A tape no recording makes: entries whose operands are all constants.

    0 leaf x; 1 mul(2.0, 3.0) = 6; 2 sin(#1) = sin 6; 3 add(x, #2); 4 arg(-1.5, #1);
    5 clamp(x, #4) = clamp(x, -1.5, 6); 6 gt(#1, 0.0) = 1; 7 arg(#2, #1);
    8 where(#6, #7) = sin 6; 9 mul(#5, #8); 10 add(#3, #9) -> out.
    Constants: [0.0, 2.0, 3.0, -1.5, 0.0]."""
    f = CompiledTape.__new__(CompiledTape)
    f.op = np.array([K.LEAF, 2, 15, 0, K.ARG, 38, 34, K.ARG, 39, 2, 0], dtype=np.int8)
    f.a = np.array([-1, -2, 1, 0, -4, 0, 1, 2, 6, 5, 3], dtype=np.int32)
    f.b = np.array([-1, -3, -1, 2, 1, 4, -5, 1, 7, 8, 9], dtype=np.int32)
    f.consts = np.array([0.0, 2.0, 3.0, -1.5, 0.0])
    f.val0 = np.zeros(len(f.op))
    f.in_entries, f.in_pos = np.array([0]), np.array([0])
    f.out = np.array([10])
    f.guard_entries, f.guard_values, f.guards = np.zeros(0, np.int64), np.zeros(0), []
    f.n_inputs = 1
    f._inputs_changed()
    f.val0 = f._forward(np.array([0.25]))[:len(f.op)]
    return f


def test_constant_folding_on_a_hand_written_tape():
    f = _hand_tape()
    g, stats = _optimised(f)
    # mul, sin, gt, where (and its arg) fold; clamp keeps its arg; leaf, add, clamp, mul, add
    assert stats["folded"] == 4 and stats["after_fold"] == 11 - 5
    assert list(g.op) == [K.LEAF, 0, K.ARG, 38, 2, 0]
    assert g.b[3] == 2 and g.a[2] < 0 and g.b[2] < 0          # arg right before its clamp
    # 2.0 and 3.0 are no longer used; consts[4] (0.0) shares slot 0; 1.0 (#6) only fed #8
    assert g.consts.tolist() == [0.0, -1.5, 6.0, np.sin(6.0)]
    for x in (-3.0, -0.2, 0.4, 2.0, 7.0):
        v = x + np.sin(6.0) + min(max(x, -1.5), 6.0) * np.sin(6.0)
        assert g(np.array([x])) == pytest.approx(v, rel=1e-15)
    _agree(f, g, [np.array([x]) for x in (-3.0, -0.2, 0.4, 2.0)])



def test_a_guard_on_constants_stays_an_entry():
    f = _hand_tape()      # guard on entry 6, gt(6.0, 0.0): constant, but kept and checked
    f.guard_entries, f.guard_values = np.array([6]), np.array([1.0])
    f.guards = [(6, True, "hand:6")]
    g, stats = _optimised(f)
    assert stats["folded"] == 2 and list(g.op[g.guard_entries]) == [34]
    _agree(f, g, [np.array([x]) for x in (-3.0, 0.4, 2.0)])
    g.guard_values = np.array([0.0])
    with pytest.raises(RetraceRequired):
        g(np.array([0.5]))


def test_constants_share_slots_by_bits():
    nan = float("nan")
    pool = _Pool([0.0, -0.0, nan, nan, 1.0, 1.0, -0.0])
    assert pool.refs.tolist() == [-1, -2, -3, -4, -5, -5, -2]
    assert pool.ref(nan) == -6 and pool.ref(1.0) == -5


def test_folding_keeps_the_sign_of_zero():
    f = _hand_tape()
    # entry 1 becomes mul(-0.0, 3) = -0.0 and entry 6 compares nan: gt(nan, 0) = 0, so
    # where takes its third operand, -0.0
    f.consts = np.array([0.0, -0.0, 3.0, -1.5, np.nan])
    f.a[6], f.b[6] = -5, -1
    f.val0 = f._forward(np.array([0.25]))[:len(f.op)]
    g, _ = _optimised(f)
    zeros = [c for c in g.consts if c == 0.0]
    assert sorted(np.signbit(zeros).tolist()) == [False, True]
    _agree(f, g, [np.array([x]) for x in (-3.0, 0.4, 2.0)])


def test_rosenbrock_is_already_optimal_and_optimising_is_idempotent():
    rng = np.random.default_rng(2)
    f = _record(rosen, rng.uniform(0.2, 0.8, 40))
    g, stats = _optimised(f)
    assert stats["after_dead"] == stats["entries"] == len(f)
    assert np.array_equal(g.op, f.op) and np.array_equal(g.val0, f.val0)
    assert np.array_equal(g.a >= 0, f.a >= 0) and np.array_equal(g.out, f.out)
    _agree(f, g, [rng.uniform(-1, 1, 40) for _ in range(3)])
    for h in (g, _optimised(_record(repeated, [0.3, 0.6, 0.9]))[0],
              _optimised(_record(branchy, [0.3, 0.6, 0.9]))[0], _optimised(_hand_tape())[0]):
        again, stats = optimize(*(getattr(h, k) for k in KEYS))
        assert stats["entries"] == stats["after_dead"] == len(h) and stats["folded"] == 0
        for k in KEYS:
            assert np.array_equal(again[k], getattr(h, k), equal_nan=k in ("val0", "consts")), k


_UNARY = [tg.sin, tg.cos, tg.tanh, tg.atan, tg.sigmoid]
_BINARY = [lambda p, q: p + q, lambda p, q: p - q, lambda p, q: p * q, tg.maximum,
           tg.minimum, lambda p, q: tg.where(p > q, p, q * 0.5),
           lambda p, q: tg.clamp(p, -0.7, q)]


@pytest.mark.parametrize("seed", range(8))
def test_random_programs_with_repeats(seed):
    """Random straight-line programs that redo earlier ops (on the same operands, or
    swapped) and leave values unused."""
    rng = np.random.default_rng(seed)
    done = []

    def fn(x):
        vals = list(x)
        for v in x:     # every input on the tape (compile's rule), maybe only in dead code
            v * 1.0
        for _ in range(60):
            if done and rng.random() < 0.3:      # repeat an earlier op
                k, i, j = done[rng.integers(len(done))]
                if rng.random() < 0.5:   # x * y as y * x, but also x - y as y - x
                    i, j = j, i
            else:
                k = int(rng.integers(len(_UNARY) + len(_BINARY)))
                i, j = (int(v) for v in rng.integers(len(vals), size=2))
            done.append((k, i, j))
            vals.append(_UNARY[k](vals[i]) if k < len(_UNARY)
                        else _BINARY[k - len(_UNARY)](vals[i], vals[j]))
        return sum(vals[-8::2], vals[0] * 0.0)

    f = _record(fn, rng.uniform(-1, 1, 4))
    g, stats = _optimised(f)
    assert stats["after_dead"] <= stats["after_merge"] <= stats["entries"]
    # the same points as recorded: no guards here, so any point replays
    _agree(f, g, [rng.uniform(-1, 1, 4) for _ in range(4)])



def test_compile_optimizes_by_default_and_reports_the_shrink():
    def dup(x):
        a, b = x
        dead = tg.sin(a) * b          # noqa: F841  (never reaches the output)
        return a * b + b * a + tg.exp(a) * tg.exp(a)

    with tg.Tape() as tape:
        xs = [tg.tensor(v, requires_grad=True) for v in (0.3, -0.7)]
        y = dup(xs)
    plain = tape.compile(xs, y, optimize=False)
    opt = tape.compile(xs, y)
    # 2 leaves, sin, dead mul, a*b, b*a, add, exp, exp, mul, add
    assert plain.stats is None and len(plain) == 11
    assert opt.stats["entries"] == 11 and opt.stats["after_merge"] == 9
    assert len(opt) == opt.stats["after_dead"] == 7
    for x in ([0.3, -0.7], [1.5, 2.0]):
        _close(opt.value_and_grad(np.array(x))[1], plain.value_and_grad(np.array(x))[1])


def test_a_merged_repeat_sums_its_gradients_before_its_derivative():
    # README deviation: sqrt(x) used twice is one entry once optimised, whose derivative
    # (inf at 0) multiplies the sum of its uses' gradients, 0 + 1: inf, where PyTorch and
    # the tape as recorded multiply each use's, 0 * inf + 1 * inf: NaN (fuzzer seed 75)
    with tg.Tape() as tape:
        x = tg.tensor(0.0, requires_grad=True)
        y = tg.sqrt(x) * 0.0 + tg.sqrt(x)
    eager = tg.autograd.grad(y, x)[0].item()
    merged = tape.compile([x], [y]).value_and_grad([0.0])[1]
    kept = tape.compile([x], [y], optimize=False).value_and_grad([0.0])[1]
    assert np.isnan(eager) and np.isnan(kept[0])
    assert merged[0] == np.inf
    # away from the singular point the two agree to rounding
    assert np.allclose(tape.compile([x], [y]).value_and_grad([0.7])[1],
                       tape.compile([x], [y], optimize=False).value_and_grad([0.7])[1],
                       rtol=1e-15, atol=0)
