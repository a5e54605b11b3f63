"""``tg.jit`` beyond the gradient: the recording as a tapegrad tape, Hessians, Jacobians,
batches on a thread pool and calls from user threads."""
from __future__ import annotations

import math
import threading

import numpy as np
import pytest

import tapegrad as tg


@tg.jit
def _branchy(p, c):
    s = 0.0
    for i in range(len(p)):
        if p[i] > c:
            s += p[i] * p[i] * math.sin(p[i])
        else:
            s += math.exp(p[i] * c) + abs(p[i])
    return s * s / 10.0


def _numeric_hessian(f, x, h=1e-4):
    n = len(x)
    H = np.zeros((n, n))
    for j in range(n):
        e = np.zeros(n)
        e[j] = h
        H[:, j] = (f(x + e)[1] - f(x - e)[1]) / (2 * h)
    return H


def test_hvp_and_hessian():
    p = np.array([0.3, -0.7, 1.2, 0.1])
    H = _branchy.hessian(p, 0.2)
    Hn = _numeric_hessian(lambda x: _branchy.value_and_grad(x, 0.2), p)
    np.testing.assert_allclose(H, Hn, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(H, H.T, rtol=1e-12)
    v = np.array([1.0, -2.0, 0.5, 0.25])
    np.testing.assert_allclose(_branchy.hvp(p, 0.2, v=v), H @ v, rtol=1e-12)


def test_record_is_a_tapegrad_tape():
    p = np.array([0.3, -0.7, 1.2, 0.1])
    rec = _branchy.record(p, 0.2)
    assert isinstance(rec.tape, tg.Tape)
    v, g = _branchy.value_and_grad(p, 0.2)
    assert rec.value == pytest.approx(v, rel=1e-14)
    ge = tg.autograd.grad(rec.outputs[0], rec.inputs)
    np.testing.assert_allclose([float(t) for t in ge], g, rtol=1e-13)
    # compile-style replay with guards: right at points taking the same branches, and a
    # RetraceRequired (never a silently wrong value) where a branch goes the other way
    f = rec.tape.compile(rec.inputs, rec.outputs)
    q = p + 0.01
    vq, gq = f.value_and_grad(q)
    v2, g2 = _branchy.value_and_grad(q, 0.2)
    assert vq == pytest.approx(v2, rel=1e-13)
    np.testing.assert_allclose(gq, g2, rtol=1e-12)
    with pytest.raises(tg.RetraceRequired):
        f.value_and_grad(np.array([0.3, 0.7, 1.2, 0.1]))
    np.testing.assert_allclose(f.hessian(p), _branchy.hessian(p, 0.2), rtol=1e-10)


@tg.jit
def _vector(p):
    out = np.empty_like(p)
    for i in range(len(p)):
        out[i] = math.sin(p[i]) * p[(i + 1) % len(p)]
    return out


@tg.jit
def _pair(p):
    return p[0] * p[1], math.exp(p[0])


def test_jacobian_vjp_jvp():
    p = np.array([0.4, -1.1, 0.9])
    n = len(p)
    J = np.zeros((n, n))
    for i in range(n):
        J[i, i] += math.cos(p[i]) * p[(i + 1) % n]
        J[i, (i + 1) % n] += math.sin(p[i])
    np.testing.assert_allclose(_vector.jacobian(p), J, rtol=1e-14)
    w = np.array([1.0, 2.0, -1.0])
    v, g = _vector.vjp(p, w=w)
    np.testing.assert_allclose(g, w @ J, rtol=1e-14)
    np.testing.assert_allclose(v, [math.sin(p[i]) * p[(i + 1) % n] for i in range(n)])
    v, t = _vector.jvp(p, v=w)
    np.testing.assert_allclose(t, J @ w, rtol=1e-14)
    # a tuple result; more outputs than inputs goes forward
    Jp = _pair.jacobian(np.array([0.5, 2.0]))
    np.testing.assert_allclose(Jp, [[2.0, 0.5], [math.exp(0.5), 0.0]])

    @tg.jit
    def wide(x):
        out = np.zeros_like(x)
        return out
    assert wide.jacobian(np.array([1.0, 2.0])).shape == (2, 2)


@tg.jit
def _rosen(x):
    s = 0.0
    for i in range(len(x) - 1):
        s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return s


def test_batch_on_threads():
    P = np.random.default_rng(0).uniform(-1, 1, (12, 6))
    values, grads = _rosen.value_and_grad(P, batch=True)
    for j in range(len(P)):
        v, g = _rosen.value_and_grad(P[j])
        assert values[j] == v
        np.testing.assert_array_equal(grads[j], g)


def test_user_threads_record_at_once():
    rng = np.random.default_rng(3)
    points = [rng.uniform(-1, 1, 200) for _ in range(8)]
    expected = [_rosen.value_and_grad(p) for p in points]
    got = [None] * len(points)
    barrier = threading.Barrier(4)

    def work(k):
        barrier.wait()
        for _ in range(20):
            for j in range(k, len(points), 4):
                got[j] = _rosen.value_and_grad(points[j])
                assert got[j][0] == expected[j][0]
                assert np.array_equal(got[j][1], expected[j][1])

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    errors = []
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for j in range(len(points)):
        assert got[j][0] == expected[j][0] and np.array_equal(got[j][1], expected[j][1])
    assert not errors


def test_release_frees_the_buffers_and_recording_goes_on():
    x = np.random.default_rng(5).uniform(-1, 1, 5000)
    v, g = _rosen.value_and_grad(x)
    tg.jit.release()
    from tapegrad.jit.active import SLOTS
    assert len(SLOTS[0].op) == 0
    v2, g2 = _rosen.value_and_grad(x)
    assert v2 == v and np.array_equal(g2, g)


def test_sparse_hessian():
    x = np.random.default_rng(6).uniform(-1, 1, 30)
    rows, cols, vals = _rosen.sparse_hessian(x)
    H = np.zeros((30, 30))
    H[rows, cols] = vals
    np.testing.assert_allclose(H, _rosen.hessian(x), rtol=1e-12, atol=1e-12)
    assert len(vals) == 30 + 2 * 29          # tridiagonal


@tg.jit
def _with_where(p):
    s = 0.0
    for i in range(len(p)):
        s += tg.jit.where(p[i] > 0.0, p[i] * p[i], -p[i]) + tg.jit.clamp(p[i], -0.5, 0.5)
        s += max(p[i], 0.5) * np.minimum(0.3, p[i]) + np.clip(p[i], 0.0, 1.0)
    return s


def test_record_of_ternary_rows():
    p = np.array([0.3, -0.7, 1.2])
    rec = _with_where.record(p)
    v, g = _with_where.value_and_grad(p)
    assert rec.value == v
    ge = tg.autograd.grad(rec.outputs[0], rec.inputs)
    np.testing.assert_allclose([float(t) for t in ge], g, rtol=1e-14)


@tg.jit
def _reads_a_value(p):
    k = math.floor(p[0] * 3.0)          # an int from a recorded value: not recorded
    return p[1] * k + p[0] * tg.jit.value(p[1])


def test_record_marks_values_read_out_of_the_tape():
    p = np.array([0.7, 1.3])
    rec = _reads_a_value.record(p)
    assert rec.value == _reads_a_value.value_and_grad(p)[0]
    with pytest.raises(tg.RetraceRequired):
        rec.tape.compile(rec.inputs, rec.outputs)
