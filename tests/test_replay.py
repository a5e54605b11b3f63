"""Compiled replay of scalar programs: values and gradients at new points equal a fresh
recording; batches equal one point at a time; value-dependent branches refuse to replay."""
import numpy as np
import pytest

import tapegrad as tg


def rosen(x):
    t = 0.0
    for i in range(len(x) - 1):
        t = t + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return t


def program(x):   # every elementwise op kind, fan-out and constants
    a, b, c = x
    u = (a * b).sin() + tg.exp(c * 0.1) - 2.0 / (1.0 + b * b)
    v = tg.atan2(u, c + 3.0) * tg.sigmoid(a) + tg.clamp(b, -0.5, 0.5) ** 2
    return u * v + tg.maximum(a, c) + tg.log1p(a * a) + tg.relu(b - 0.3)


def _record(fn, x0):
    with tg.Tape() as tape:
        xs = [tg.tensor(float(v), requires_grad=True) for v in x0]
        y = fn(xs)
    return tape, xs, y


def _fresh(fn, x):
    tape, xs, y = _record(fn, x)
    y.backward()
    return y.item(), np.array([t.grad.item() for t in xs])


@pytest.mark.parametrize("fn,n", [(rosen, 30), (program, 3)])
def test_replay_equals_a_fresh_recording(fn, n):
    rng = np.random.default_rng(0)
    x0 = rng.uniform(-1, 1, n)
    tape, xs, y = _record(fn, x0)
    f = tape.compile(xs, y)
    for _ in range(5):
        x = rng.uniform(-1, 1, n)
        v, g = f.value_and_grad(x)
        v2, g2 = _fresh(fn, x)
        assert v == pytest.approx(v2, rel=1e-14)
        np.testing.assert_allclose(g, g2, rtol=1e-13, atol=1e-14)
        assert f(x) == v


def test_batched_replay_equals_one_point_at_a_time():
    rng = np.random.default_rng(1)
    tape, xs, y = _record(program, rng.uniform(-1, 1, 3))
    f = tape.compile(xs, y)
    X = rng.uniform(-1, 1, (64, 3))
    V, G = f.value_and_grad(X)
    assert V.shape == (64,) and G.shape == (64, 3)
    for k in range(64):
        v, g = f.value_and_grad(X[k])
        assert V[k] == v
        np.testing.assert_allclose(G[k], g, rtol=1e-14)
    np.testing.assert_allclose(f(X), V)


@pytest.mark.parametrize("threads", ["1", "2", "3"])
def test_blocks_on_threads_equal_one_point_at_a_time(threads, monkeypatch):
    monkeypatch.setenv("TAPEGRAD_NUM_THREADS", threads)
    rng = np.random.default_rng(2)
    tape, xs, y = _record(program, rng.uniform(-1, 1, 3))
    f = tape.compile(xs, y)
    monkeypatch.setattr(type(f), "_block", lambda self, nb: 8)   # 13 blocks, the last short
    X = rng.uniform(-1, 1, (100, 3))
    V, G = f.value_and_grad(X)
    for k in (0, 7, 8, 50, 99):
        v, g = f.value_and_grad(X[k])
        assert V[k] == v
        np.testing.assert_array_equal(G[k], g)
    np.testing.assert_array_equal(f(X), V)


def test_a_guard_flip_in_a_later_block_names_its_point(monkeypatch):
    monkeypatch.setenv("TAPEGRAD_NUM_THREADS", "2")

    def branchy(x):
        return x[0] * x[1] * 2.0 if x[0] > 0 else x[0] * x[1]

    tape, xs, y = _record(branchy, [0.5, 1.0])
    f = tape.compile(xs, y)
    monkeypatch.setattr(type(f), "_block", lambda self, nb: 8)
    X = np.ones((40, 2))
    X[29, 0] = -1.0
    with pytest.raises(tg.RetraceRequired, match="point 29"):
        f.value_and_grad(X)


def test_a_leaf_used_twice_and_constants_stay_constants():
    with tg.Tape() as tape:
        x = tg.tensor(2.0, requires_grad=True)
        k = tg.tensor(3.0)                # no grad: a constant of the program
        y = x * x * k + x
    f = tape.compile([x], y)
    v, g = f.value_and_grad([5.0])
    assert v == 5.0 * 5.0 * 3.0 + 5.0 and g.tolist() == [2 * 5.0 * 3.0 + 1.0]
    # (k is a constant entry of the tape, which keeps its version: in a batch it is the same
    # number at every point)
    V, G = f.value_and_grad(np.array([[5.0], [-1.0]]))
    assert V.tolist() == [80.0, 2.0] and G[:, 0].tolist() == [31.0, -5.0]


def test_branches_are_guarded_and_flips_raise():
    def f(x):
        return x * x if x > 0 else -x      # the comparison is recorded; the branch guarded

    with tg.Tape() as tape:
        x = tg.tensor(2.0, requires_grad=True)
        y = f(x)
    g = tape.compile([x], y)
    assert g.value_and_grad([3.0]) == (9.0, pytest.approx([6.0]))
    with pytest.raises(tg.RetraceRequired, match=r"test_replay.py:\d+ goes the other way"):
        g.value_and_grad([-1.0])
    with pytest.raises(tg.RetraceRequired, match="point 1"):
        g.value_and_grad(np.array([[3.0], [-1.0]]))
    v, G = g.value_and_grad(np.array([[3.0], [0.5]]))
    assert v.tolist() == [9.0, 0.25] and G[:, 0].tolist() == [6.0, 1.0]


def test_builtin_max_is_guarded():
    with tg.Tape() as tape:
        a = tg.tensor(1.0, requires_grad=True)
        b = tg.tensor(2.0, requires_grad=True)
        y = max(a, b) * 3.0
    g = tape.compile([a, b], y)
    assert g.value_and_grad([0.0, 5.0])[1].tolist() == [0.0, 3.0]
    with pytest.raises(tg.RetraceRequired):
        g([5.0, 0.0])


def test_where_replays_both_branches():
    with tg.Tape() as tape:
        x = tg.tensor(2.0, requires_grad=True)
        y = tg.where(x > 0, x * x, -x)
    g = tape.compile([x], y)
    assert g.value_and_grad([3.0]) == (9.0, pytest.approx([6.0]))
    assert g.value_and_grad([-4.0]) == (4.0, pytest.approx([-1.0]))
    V, G = g.value_and_grad(np.array([[3.0], [-4.0]]))
    assert V.tolist() == [9.0, 4.0] and G[:, 0].tolist() == [6.0, -1.0]


def test_other_value_reads_refuse_to_replay():
    with tg.Tape() as tape:
        x = tg.tensor(2.0, requires_grad=True)
        y = x * float(x)
    with pytest.raises(tg.RetraceRequired, match="read the value of"):
        tape.compile([x], y)


def test_tapes_with_array_entries_are_run_again_on_elements():
    with tg.Tape() as tape:
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        y = (x * x).sum()
    f = tape.compile([x], y)
    assert f([3.0, 4.0]) == 25.0 and list(f.grad([3.0, 4.0])) == [6.0, 8.0]
    with tg.Tape() as tape:
        x = tg.tensor(1.0, requires_grad=True)
        y = tg.stack([x, x * 3.0]).sum()
    f = tape.compile([x], y)
    assert f([2.0]) == 8.0 and f.in_shapes == [()]


def test_bad_input_shapes_are_errors_not_crashes():
    tape, xs, y = _record(rosen, [0.1, 0.2, 0.3])
    f = tape.compile(xs, y)
    with pytest.raises(ValueError, match=r"shape \(3,\) or a batch of shape \(B, 3\)"):
        f.value_and_grad([1.0, 2.0])
    with pytest.raises(ValueError):
        tape.compile(xs, tg.tensor(1.0))


def test_a_read_of_an_intermediate_names_its_entry():
    with tg.Tape() as tape:
        x = tg.tensor(2.0, requires_grad=True)
        u = x * 3.0
        y = u * u if u.item() > 1 else u
    with pytest.raises(tg.RetraceRequired, match=r"entry 1 \(mul\)"):
        tape.compile([x], y)


def test_tg_compile_records_once_and_replays():
    calls = []

    @tg.compile
    def f(x):
        calls.append(1)
        return rosen(x)

    rng = np.random.default_rng(5)
    for _ in range(4):
        x = rng.uniform(-1, 1, 6)
        v, g = f.value_and_grad(x)
        v2, g2 = _fresh(rosen, x)
        assert v == pytest.approx(v2, rel=1e-14)
        np.testing.assert_allclose(g, g2, rtol=1e-13)
    assert len(calls) == 1 and f.retraces == 0
    G = f.grad(rng.uniform(-1, 1, (10, 6)))
    assert G.shape == (10, 6) and len(calls) == 1
    f(rng.uniform(-1, 1, 4))          # another input size records again
    assert len(calls) == 2


def test_tg_compile_records_again_when_a_branch_flips():
    @tg.compile
    def f(x):
        return x[0] * x[1] if x[0] > 0 else -x[1]

    assert f.value_and_grad([2.0, 3.0])[0] == 6.0
    assert f.value_and_grad([-2.0, 3.0])[1].tolist() == [0.0, -1.0]
    assert f.retraces == 1
    V, G = f.value_and_grad(np.array([[2.0, 3.0], [-1.0, 1.0]]))
    assert V.tolist() == [6.0, -1.0] and G.tolist() == [[3.0, 2.0], [0.0, -1.0]]


def test_save_and_load_round_trip(tmp_path):
    tape, xs, y = _record(program, [0.3, -0.2, 0.5])
    f = tape.compile(xs, y)
    path = tmp_path / "f.npz"
    f.save(path)
    g = tg.load(path)
    x = np.array([0.1, 0.4, -0.7])
    v, gr = f.value_and_grad(x)
    v2, gr2 = g.value_and_grad(x)
    assert v == v2 and gr.tolist() == gr2.tolist()
    assert g.guards == f.guards


def _corrupt(tmp_path, f, **changes):
    path = tmp_path / "f.npz"
    f.save(path)
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    data.update(changes)
    bad = tmp_path / "bad.npz"
    np.savez(bad, **data)
    return bad


def test_corrupted_files_give_errors_not_crashes(tmp_path):
    tape, xs, y = _record(rosen, [0.1, 0.2, 0.3, 0.4])
    f = tape.compile(xs, y)
    a = f.a.copy()
    a[-1] = 10 ** 6                      # an operand far outside the tape
    cases = [dict(a=a), dict(op=np.full_like(f.op, 120)), dict(out=np.array([10 ** 9])),
             dict(in_entries=f.in_entries + 10 ** 6), dict(consts=np.zeros(0)),
             dict(b=f.b.astype(np.int64)), dict(meta=np.array("{}"))]
    for change in cases:
        with pytest.raises(ValueError, match="corrupted|not a tapegrad"):
            tg.load(_corrupt(tmp_path, f, **change))
    (tmp_path / "junk.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="not a tapegrad compiled tape"):
        tg.load(tmp_path / "junk.npz")


def _fd_jacobian(g, x, h=1e-6):
    return np.array([(g(x + h * e) - g(x - h * e)) / (2 * h) for e in np.eye(len(x))]).T


@pytest.mark.parametrize("chunk", [None, 7])
def test_hessian_and_hvp_match_finite_differences_of_the_gradient(chunk, monkeypatch):
    rng = np.random.default_rng(3)
    x0 = rng.uniform(-1, 1, 30)
    tape, xs, y = _record(rosen, x0)
    f = tape.compile(xs, y)
    if chunk:   # several sweeps of directions, as for a big tape
        monkeypatch.setattr(type(f), "_chunk", lambda self, k: min(k, chunk))
    x = rng.uniform(-1, 1, 30)
    H = f.hessian(x)
    np.testing.assert_allclose(H, _fd_jacobian(f.grad, x), rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(H, H.T, rtol=1e-12, atol=1e-12)
    v = rng.normal(size=30)
    np.testing.assert_allclose(f.hvp(x, v), H @ v, rtol=1e-10, atol=1e-10)


def several(x):   # 3 outputs of 2 inputs (forward mode is cheaper) and a leaf used twice
    a, b = x
    return [a * b, tg.sin(a) + b * b * b, tg.exp(a - b) * a]


def _outputs(fn, n_in, x0):
    with tg.Tape() as tape:
        xs = [tg.tensor(float(v), requires_grad=True) for v in x0]
        ys = fn(xs)
    return tape.compile(xs, ys)


@pytest.mark.parametrize("fn,n_in", [(several, 2), (lambda x: [tg.tanh(x[0] * x[1] + x[2])], 3),
                                     (lambda x: [x[0] * x[1] - x[2] * x[3], tg.exp(x[0])], 4)])
def test_jacobian_jvp_vjp_match_finite_differences(fn, n_in):
    rng = np.random.default_rng(4)
    f = _outputs(fn, n_in, rng.uniform(-1, 1, n_in))
    x = rng.uniform(-1, 1, n_in)
    J = np.atleast_2d(f.jacobian(x))
    np.testing.assert_allclose(J, np.atleast_2d(_fd_jacobian(f, x)), rtol=1e-7, atol=1e-8)
    v, w = rng.normal(size=n_in), rng.normal(size=J.shape[0])
    np.testing.assert_allclose(np.atleast_1d(f.jvp(x, v)), J @ v, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(f.vjp(x, w), w @ J, rtol=1e-12, atol=1e-12)


def test_second_order_methods_of_tg_compile_and_their_errors():
    f = tg.compile(rosen)
    x = np.array([0.5, -0.3, 0.8])
    H = f.hessian(x)
    # d2/dx0^2 of 100 (x1 - x0^2)^2 + (1 - x0)^2 = 1200 x0^2 - 400 x1 + 2
    assert H[0, 0] == pytest.approx(1200 * 0.25 + 400 * 0.3 + 2)
    assert H[0, 1] == pytest.approx(-400 * 0.5) and H[0, 2] == 0.0
    np.testing.assert_allclose(f.hvp(x, [1.0, 0.0, 0.0]), H[:, 0])
    assert f.jvp(x, [0.0, 1.0, 0.0]) == pytest.approx(f.grad(x)[1])
    with pytest.raises(ValueError, match=r"shape \(3,\)"):
        f.hvp(x, [1.0, 2.0])
    with pytest.raises(ValueError, match="one point"):
        f.tape_fn.hessian(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"shape \(1,\)"):
        f.vjp(x, [1.0, 2.0])


def pick(x):   # the comparison comes after both candidates: it chose the output
    y = x[0] * x[1]
    z = x[0] + x[1]
    return y if y > z else z


@pytest.mark.parametrize("fn,want", [(pick, lambda a, b: max(a * b, a + b)),
                                     (lambda x: max(x[0], x[1]) * 2.0, lambda a, b: 2 * max(a, b))])
def test_a_comparison_after_the_output_still_guards_it(fn, want):
    f = tg.compile(fn)
    assert f([3.0, 3.0]) == want(3.0, 3.0)
    for p in ([0.5, 0.5], [3.0, 3.0], [0.5, 2.0], [2.0, 0.5]):
        assert f(p) == pytest.approx(want(*p))
    tape, xs, y = _record(pick, [3.0, 3.0])
    g = tape.compile(xs, y)
    with pytest.raises(tg.RetraceRequired, match="goes the other way"):
        g(np.array([0.5, 0.5]))


def test_tg_compile_keeps_one_recording_per_branch_pattern():
    f = tg.compile(lambda x: x[0] * x[1] if x[0] > 0 else x[0] - x[1])
    X = np.random.default_rng(0).uniform(-1, 1, (200, 2))
    V, G = f.value_and_grad(X)
    assert f.retraces == 1 and len(f.tapes) == 2       # not one retrace per flip
    want = np.where(X[:, 0] > 0, X[:, 0] * X[:, 1], X[:, 0] - X[:, 1])
    np.testing.assert_allclose(V, want, rtol=1e-15)
    np.testing.assert_allclose(G[:, 1], np.where(X[:, 0] > 0, X[:, 0], -1.0), rtol=1e-15)


def test_an_unused_input_gets_a_zero_gradient_and_a_constant_result_is_an_error():
    f = tg.compile(lambda x: x[0] * 3.0)
    v, g = f.value_and_grad([2.0, 5.0])
    assert v == 6.0 and list(g) == [3.0, 0.0]
    np.testing.assert_array_equal(f.hessian([2.0, 5.0]), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="does not depend on x"):
        tg.compile(lambda x: tg.tensor(3.0))([1.0, 2.0])
    assert "CompiledTape: 2 inputs -> a scalar function, 2 entries" in repr(f.tape_fn)


def test_damaged_files_and_the_npz_suffix(tmp_path):
    tape, xs, y = _record(rosen, [0.1, 0.2, 0.3])
    f = tape.compile(xs, y)
    f.save(tmp_path / "model")                    # NumPy writes model.npz
    g = tg.load(tmp_path / "model")
    assert g(np.array([0.3, 0.2, 0.1])) == f(np.array([0.3, 0.2, 0.1]))
    good = (tmp_path / "model.npz").read_bytes()
    for name, data in (("cut.npz", good[: len(good) // 2]), ("empty.npz", b""),
                       ("text.npz", b"hello\n")):
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError, match="not a tapegrad compiled tape"):
            tg.load(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        tg.load(tmp_path / "missing")


def _dense(f, x):
    return f.tape_fn._hvps(np.asarray(x, float), np.eye(len(x)))


@pytest.mark.parametrize("fn,n,colours", [
    (rosen, 50, 3),                                             # tridiagonal: 3 at any n
    (lambda x: sum(tg.sin(x[i]) * x[i + 2] for i in range(len(x) - 2)) + x[0] * x[-1], 40, None),
    (lambda x: tg.exp(sum(x[i] for i in range(len(x)))), 30, None),   # dense: no colouring
])
def test_coloured_hessians_equal_dense_ones(fn, n, colours):
    f = tg.compile(fn)
    x = np.random.default_rng(5).uniform(-1, 1, n)
    H = f.hessian(x)
    np.testing.assert_allclose(H, _dense(f, x), rtol=1e-13, atol=1e-13)
    r, c, v = f.sparse_hessian(x)
    Hs = np.zeros((n, n))
    Hs[r, c] = v
    np.testing.assert_array_equal(Hs, H)
    sp = f.tape_fn._sparse(force=True)
    if colours is not None:
        assert int(sp[2].max()) + 1 == colours and len(v) == 3 * n - 2
    elif fn.__code__.co_code and "exp" in fn.__code__.co_names:
        assert sp is None or int(sp[2].max()) + 1 == n


def _small_compiled():
    with tg.Tape() as t:
        x = [tg.tensor(1.0, requires_grad=True) for _ in range(3)]
        y = x[0] * x[1] + x[2]
    return t.compile(x, y)


def test_replay_inputs_of_the_wrong_rank_raise_and_an_empty_batch_gives_empty_results():
    f = _small_compiled()
    for bad in (np.zeros((2, 2, 3)), np.zeros(2), np.zeros((4, 2))):
        with pytest.raises(ValueError, match=r"shape \(3,\) or a batch of shape \(B, 3\)"):
            f(bad)
    assert f(np.zeros((0, 3))).shape == (0,)
    values, grads = f.value_and_grad(np.zeros((0, 3)))
    assert values.shape == (0,) and grads.shape == (0, 3)


def test_load_refuses_what_is_not_a_regular_file_or_claims_too_much(tmp_path, monkeypatch):
    import os
    import zipfile

    from tapegrad.replay import compiled_tape
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        tg.load(str(fifo))                                  # would block on open
    bomb = tmp_path / "bomb.npz"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("op.npy", b"\0" * (8 << 20))             # 8 MB in a few kB
    monkeypatch.setattr(compiled_tape, "LOAD_LIMIT_BYTES", 1 << 20)
    with pytest.raises(ValueError, match="more than the limit"):
        tg.load(str(bomb))
    odd = tmp_path / "odd.npz"
    with zipfile.ZipFile(odd, "w") as z:
        z.writestr("evil.txt", b"x")
    with pytest.raises(ValueError, match="unexpected member"):
        tg.load(str(odd))


def test_load_names_the_field_of_bad_metadata(tmp_path):
    import json
    f = _small_compiled()
    f.save(tmp_path / "ok")
    with np.load(tmp_path / "ok.npz") as z:
        arrays = {k: z[k] for k in z.files}
    for meta, field in ((["not", "a", "dict"], "meta is not a JSON object"),
                        ({"format": "tapegrad-compiled-tape", "version": 1, "guards": 3,
                          "n_inputs": 3}, "'guards'"),
                        ({"format": "tapegrad-compiled-tape", "version": 1, "guards": [],
                          "n_inputs": "3"}, "'n_inputs'"),
                        ({"format": "x", "version": 1}, "'format'")):
        np.savez(tmp_path / "bad.npz", **{**arrays, "meta": np.array(json.dumps(meta))})
        with pytest.raises(ValueError, match=field):
            tg.load(tmp_path / "bad.npz")


def test_load_refuses_a_file_of_another_op_table(tmp_path):
    # opcodes are positions in the op table: a file that does not say which table (format
    # version 1) or names another is refused, never replayed as other ops
    import json
    f = _small_compiled()
    f.save(tmp_path / "ok")
    with np.load(tmp_path / "ok.npz") as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))
    assert meta["version"] == 2 and meta["ops"][:3] == ["add", "sub", "mul"]
    older = {k: v for k, v in meta.items() if k != "ops"}
    other = {**meta, "ops": meta["ops"][:-8] + ["clamp_min"] + meta["ops"][-8:]}
    for bad in ({**older, "version": 1}, older, other):
        np.savez(tmp_path / "bad.npz", **{**arrays, "meta": np.array(json.dumps(bad))})
        with pytest.raises(ValueError, match="another op table"):
            tg.load(tmp_path / "bad.npz")


def test_tape_compile_of_an_input_element_returned_as_it_is():
    """``x[0, 3]`` with no op after it: the output is the input's element (gradient 1)."""
    x = [[1.0, -1.274, 1.961, -1.07]]
    for pick in (lambda v: v[0, 3], lambda v: v[..., 3][0], lambda v: v[0, 3:].amin(0)):
        with tg.Tape() as tape:
            v = tg.tensor(x, requires_grad=True)
            y = pick(v)
        value, grad = tape.compile([v], [y]).value_and_grad([x])
        assert value == -1.07 and grad.tolist() == [0.0, 0.0, 0.0, 1.0]


def test_tape_compile_of_empty_reductions():
    """An empty sum is 0. and an empty product 1., as in PyTorch (it raised a TypeError)."""
    x = [[1.0, 2.0], [3.0, 4.0]]
    for pick, want in ((lambda v: v[1:-1].sum(), 0.0), (lambda v: v[:, :0].sum(1).sum(), 0.0),
                       (lambda v: v[1:-1].prod(), 1.0)):
        with tg.Tape() as tape:
            v = tg.tensor(x, requires_grad=True)
            y = pick(v)
        value, grad = tape.compile([v], [y]).value_and_grad([x])
        assert value == want and grad.tolist() == [0.0] * 4


def test_tape_compile_of_log_softmax_over_an_infinite_row_is_nan_as_pytorch():
    x = [[np.inf, -0.767, -np.inf, -1.0], [2.0, -0.463, -0.5, 1.135]]
    with tg.Tape() as tape:
        v = tg.tensor(x, requires_grad=True)
        y = tg.log_softmax(v, -1)[..., 2].sum()
    with np.errstate(all="ignore"):
        value, grad = tape.compile([v], [y]).value_and_grad([x])
        eager = tg.tensor(x, requires_grad=True)
        tg.log_softmax(eager, -1)[..., 2].sum().backward()
    assert np.isnan(value)
    np.testing.assert_allclose(grad, eager.grad.numpy().ravel(), rtol=1e-12)   # NaNs alike


def test_tape_compile_of_an_input_returned_as_it_is():
    with tg.Tape() as tape:
        v = tg.tensor(-1.931, requires_grad=True)
        w = tg.tensor(2.0, requires_grad=True)
        y = w * 2.0
    assert tape.compile([v], [v]).value_and_grad([-1.5]) == (-1.5, [1.0])
    value, grad = tape.compile([v, w], [v]).value_and_grad([-1.5, 3.0])
    assert value == -1.5 and grad.tolist() == [1.0, 0.0]
    assert tape.compile([v, w], [y]).value_and_grad([-1.5, 3.0])[0] == 6.0


def test_tape_compile_of_std_with_no_spread_has_gradient_zero_as_pytorch():
    """sqrt' is infinite at 0: PyTorch's std_backward masks it (the replay did inf * 0)."""
    x = [[-1.808, 1.253, 1.0, 3.0]]
    with tg.Tape() as tape:
        v = tg.tensor(x, requires_grad=True)
        y = tg.index_select(v, 0, tg.tensor([0, 0])).std(0).sum()   # two equal rows
    value, grad = tape.compile([v], [y]).value_and_grad([x])
    assert value == 0.0 and grad.tolist() == [0.0] * 4
    value, grad = tape.compile([v], [y]).value_and_grad([[[1.0, 2.0, 3.0, 4.0]]])
    assert value == 0.0 and grad.tolist() == [0.0] * 4


def test_hessian_refuses_a_dense_matrix_of_gigabytes_and_points_to_sparse_hessian(monkeypatch):
    import tapegrad.replay.compiled_tape as ct
    tape, xs, y = _record(rosen, np.full(6, 0.5))
    f = tape.compile(xs, y)
    H = f.hessian(np.ones(6))
    monkeypatch.setattr(ct, "DENSE_HESSIAN_LIMIT", 35)
    with pytest.raises(ValueError, match=r"dense \(6, 6\) matrix .* sparse_hessian"):
        f.hessian(np.ones(6))
    rows, cols, vals = f.sparse_hessian(np.ones(6))
    S = np.zeros((6, 6))
    S[rows, cols] = vals
    np.testing.assert_array_equal(S, H)


def test_reprs_say_what_a_compiled_object_is_and_does():
    tape, xs, y = _record(rosen, np.full(3, 0.5))
    text = repr(tape.compile(xs, y))
    assert "3 inputs -> a scalar function" in text and "value_and_grad" in text
    f = tg.compile(lambda x: x[0] * x[1])
    assert "records at its first call" in repr(f)
    f(np.array([1.0, 2.0]))
    assert "1 recording(s)" in repr(f) and "hessian" in repr(f)
    assert "guards" in tg.compile.__doc__ and "tg.jit" in tg.compile.__doc__


def test_replay_of_amax_at_a_tie_splits_as_its_chain_of_maximum_does():
    """A documented deviation: eager (and PyTorch) split evenly among tied maxima; the
    replay's chain of maximum halves at each tie."""
    x = [1.0, 2.0, 2.0, 2.0]
    with tg.Tape() as tape:
        v = tg.tensor(x, requires_grad=True)
        y = v.amax(0)
    assert tape.compile([v], [y]).value_and_grad([x])[1].tolist() == [0.0, 0.25, 0.25, 0.5]
    v = tg.tensor(x, requires_grad=True)
    v.amax(0).backward()
    np.testing.assert_allclose(v.grad.numpy(), [0.0, 1 / 3, 1 / 3, 1 / 3])


def test_detach_of_a_recorded_value_is_refused():
    """``x * x.detach()`` takes x's recorded value as a constant: replayed at a new point it
    would keep the old value (silently wrong), so compile refuses and tg.compile records
    such a function again at every call."""
    with tg.Tape() as tape:
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        y = (x * x.detach()).sum() + (x * x.data).sum()
    with pytest.raises(tg.RetraceRequired):
        tape.compile([x], [y])
    f = tg.compile(lambda v: v * v.detach())
    with pytest.warns(RuntimeWarning):
        assert f(3.0) == 9.0
    assert f(4.0) == 16.0


@pytest.mark.parametrize("case", ["non-leaf", "leaf", "view"])
def test_a_tape_changed_in_place_where_nothing_records_is_not_replayed(case):
    """An in-place change under no_grad of a tensor with history is not on the tape: a
    replay would not repeat it (it gave 20 for 14.5, and 11 for 19 with a leaf), so compile
    refuses, naming the change."""
    with tg.Tape() as tape:
        a = tg.tensor([0.3, 1.2], requires_grad=True)
        v = a * 2
        if case == "non-leaf":
            with tg.no_grad():
                v.sub_(0.5)
            y = (v * v).sum()
        elif case == "leaf":
            y1 = (a * 2).sum()
            with tg.no_grad():
                a.add_(1.0)
            y = y1 + (a * a).sum()
        else:
            w = v[1:]
            with tg.no_grad():
                w.sub_(0.5)
            y = (v * v).sum()
    with pytest.raises(tg.RetraceRequired, match="in place where nothing records"):
        tape.compile([a], [y])


def test_a_change_where_nothing_records_after_the_outputs_leaves_them_replayable():
    """An optimizer's step (no_grad) after the loss was recorded: the loss replays."""
    with tg.Tape() as tape:
        a = tg.tensor([0.3, 1.2], requires_grad=True)
        y = (a * a).sum()
        with tg.no_grad():
            a.sub_(0.1)
    f = tape.compile([a], [y])
    value, grad = f.value_and_grad([np.array([1.0, 2.0])])
    assert value == 5.0 and grad.tolist() == [2.0, 4.0]


def test_a_recorded_number_assigned_at_an_index_tensor_or_a_slice_replays():
    # ``y[i] = x[0] * 2`` with an index tensor (index_put) or a slice wrote the recorded
    # number where NumPy read its array: compile raised; one place keeps the element itself
    def fn(x):
        y = x * 1.0
        y[tg.tensor([1])] = x[0] * 2.0
        y[0:2] = y[1] * x[2]
        y[2] = x[1] - 1.0
        y[tg.tensor([True, False, True])] = y[0] * x[1]
        return (y ** 3).sum()
    f = tg.compile(fn)
    for x in (np.array([1.0, 2.0, 3.0]), np.array([0.5, -1.0, 4.0])):
        xt = tg.tensor(x, requires_grad=True)
        want = fn(xt)
        want.backward()
        v, g = f.value_and_grad(x)
        assert v == pytest.approx(float(want), rel=1e-14)
        np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-14)


# products that are all -0.: a sum of them starts from +0. (BLAS), but PyTorch's mm of one
# column by one row (and linear with one input feature over several rows) is an outer
# product, each result its one -0. product; (program of the library and a vector of n zeros,
# n, whether each result is -0.)
ZERO_PRODUCTS = {
    "mm K=1": (lambda m, z: z.reshape(2, 1) @ -m.ones(1, 2), 2, True),
    "mm K=2": (lambda m, z: z.reshape(2, 2) @ -m.ones(2, 2), 4, False),
    "dot": (lambda m, z: z.reshape(1) @ -m.ones(1), 1, False),
    "mv K=1": (lambda m, z: z.reshape(2, 1) @ -m.ones(1), 2, False),
    "vm K=1": (lambda m, z: z.reshape(1) @ -m.ones(1, 3), 1, False),
    "bmm K=1": (lambda m, z: z.reshape(2, 2, 1) @ -m.ones(2, 1, 2), 4, False),
    "3-d @ 2-d K=1": (lambda m, z: z.reshape(2, 3, 1) @ -m.ones(1, 2), 6, True),
    "3-d @ 2-d K=2": (lambda m, z: z.reshape(2, 3, 2) @ -m.ones(2, 2), 12, False),
    "linear in=1": (lambda m, z: m.nn.functional.linear(z.reshape(3, 1), -m.ones(2, 1)), 3, True),
    "linear in=1, -0. bias": (lambda m, z: m.nn.functional.linear(z.reshape(3, 1), -m.ones(2, 1),
                                                                 -m.zeros(2)), 3, True),
    "linear in=2": (lambda m, z: m.nn.functional.linear(z.reshape(3, 2), -m.ones(2, 2)), 6, False),
    "linear of a vector": (lambda m, z: m.nn.functional.linear(z, -m.ones(2, 1)), 1, False),
    "linear 3-d in=1": (lambda m, z: m.nn.functional.linear(z.reshape(2, 3, 1), -m.ones(2, 1)),
                        6, True),
    "linear of one row": (lambda m, z: m.nn.functional.linear(z.reshape(1, 1), -m.ones(2, 1)),
                          1, False),
}


@pytest.mark.parametrize("name", list(ZERO_PRODUCTS))
def test_the_sign_of_a_zero_matmul_eager_and_replayed(name):
    program, n, negative = ZERO_PRODUCTS[name]
    eager = np.asarray(program(tg, tg.zeros(n))._value).reshape(-1)
    replayed = tg.compile(lambda x: program(tg, x * 0.0).reshape(-1))(np.ones(n))
    for got in (eager, replayed):
        assert not got.any() and np.signbit(got).all() == negative and \
            np.signbit(got).any() == negative
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float64)
    try:
        theirs = program(torch, torch.zeros(n)).numpy().reshape(-1)
    finally:
        torch.set_default_dtype(torch.float32)
    assert np.signbit(theirs).tolist() == np.signbit(eager).tolist()


def test_a_constant_output_keeps_the_sign_of_its_zero():
    # x[0] = -0.0 makes the output a constant, which replay holds as an entry: -0.0 + -0.0
    with tg.Tape() as tape:
        x = tg.tensor([0.5], requires_grad=True)
        y = x * 1.0
        y[0] = -0.0
        out = y[0]
    value, grad = tape.compile([x], [out]).value_and_grad([[0.5]])
    assert value == 0.0 and np.signbit(value)
    assert grad.tolist() == [0.0]
