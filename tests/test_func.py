"""``tg.func`` against ``torch.func`` (values, structures, error types and messages) and
against float64 central differences; ``vmap`` takes the replay path where it can (pinned
through ``last_path``) and stays right where samples take different branches or replay
cannot follow the function."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg

try:
    import torch
    import torch.func
except ImportError:   # the finite-difference checks still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def _t(m, a):
    """A float64 tensor of ``m`` (tapegrad or torch)."""
    return m.tensor(np.asarray(a, dtype=np.float64), dtype=m.float64)


def _np(t):
    if isinstance(t, (tuple, list)):
        return [_np(x) for x in t]
    return np.asarray(t.detach().numpy(), dtype=np.float64)


def _close(got, want, rtol=1e-10, atol=1e-12):
    if isinstance(want, (tuple, list)):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            _close(g, w, rtol, atol)
        return
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(_np(got), _np(want), rtol=rtol, atol=atol)


# (name, function of a module m -> function of tensors, input shapes)
SCALAR = [
    ("cubic", lambda m: lambda x: (x ** 3).sum() + x[0] * x[1], [(3,)]),
    ("quadratic form", lambda m: lambda x, A: (x @ A @ x) * m.cos(x).sum(), [(3,), (3, 3)]),
    ("scalar", lambda m: lambda s: m.exp(s) * s, [()]),
    ("reductions", lambda m: lambda x: (x - x.mean()).pow(2).mean() / x.std() + x.amax(),
     [(4,)]),
]
TENSOR = [
    ("elementwise", lambda m: lambda x: x ** 2 * m.sin(x), [(3,)]),
    ("matmul", lambda m: lambda A, x: m.tanh(A @ x) * x.sum(), [(2, 3), (3,)]),
    ("broadcasting", lambda m: lambda x, y: x[:, None] * m.exp(y)[None, :] - y, [(2,), (3,)]),
    ("two outputs", lambda m: lambda x, y: (x * y, m.exp(x).sum() + y[0]), [(2,), (2,)]),
]
# branches on comparisons: relu's mask, where, a Python if (a guard); with maximum too
BRANCHY = lambda m: lambda x: (m.relu(x) * x + m.where(x > 0.5, m.sin(x), m.cos(x))  # noqa
                               + (x.sum() if x[2] > 0 else -x.prod()))
WITH_MAX = lambda m: lambda x: BRANCHY(m)(x) * m.maximum(x[0], x[1])  # noqa: E731


def _inputs(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) for s in shapes]


def _argnums(shapes):
    return 0 if len(shapes) == 1 else tuple(range(len(shapes)))


@needs_torch
@pytest.mark.parametrize("name,make,shapes", SCALAR)
def test_grad_and_grad_and_value_match_torch(name, make, shapes):
    xs = _inputs(shapes, 0)
    for argnums in (0, _argnums(shapes)):
        got = tg.func.grad(make(tg), argnums=argnums)(*[_t(tg, x) for x in xs])
        want = torch.func.grad(make(torch), argnums=argnums)(*[_t(torch, x) for x in xs])
        _close(got, want)
    aux = lambda m: lambda *a: (make(m)(*a), a[0] * 2)  # noqa: E731
    (g, (v, a)) = tg.func.grad_and_value(aux(tg), has_aux=True)(*[_t(tg, x) for x in xs])
    (gw, (vw, aw)) = torch.func.grad_and_value(aux(torch), has_aux=True)(
        *[_t(torch, x) for x in xs])
    _close((g, v, a), (gw, vw, aw))
    assert not g.requires_grad and not v.requires_grad and not a.requires_grad


@needs_torch
@pytest.mark.parametrize("transform", ["jacrev", "jacfwd"])
@pytest.mark.parametrize("name,make,shapes", TENSOR)
def test_jacobians_match_torch(transform, name, make, shapes):
    xs = _inputs(shapes, 1)
    for argnums in (0, _argnums(shapes)):
        got = getattr(tg.func, transform)(make(tg), argnums=argnums)(*[_t(tg, x) for x in xs])
        want = getattr(torch.func, transform)(make(torch), argnums=argnums)(
            *[_t(torch, x) for x in xs])
        _close(got, want)


@needs_torch
@pytest.mark.parametrize("name,make,shapes", TENSOR)
def test_vjp_and_jvp_match_torch(name, make, shapes):
    xs = _inputs(shapes, 2)
    rng = np.random.default_rng(3)
    out, fn = tg.func.vjp(make(tg), *[_t(tg, x) for x in xs])
    out_w, fn_w = torch.func.vjp(make(torch), *[_t(torch, x) for x in xs])
    _close(out, out_w)
    ct = [rng.normal(size=tuple(o.shape)) for o in (out_w if isinstance(out_w, tuple)
                                                    else (out_w,))]
    pack = (lambda m: tuple(_t(m, c) for c in ct)) if isinstance(out_w, tuple) else \
        (lambda m: _t(m, ct[0]))
    _close(fn(pack(tg)), fn_w(pack(torch)))
    _close(fn(pack(tg)), fn_w(pack(torch)))     # vjp_fn can be called again
    tangents = [rng.normal(size=x.shape) for x in xs]
    got = tg.func.jvp(make(tg), tuple(_t(tg, x) for x in xs), tuple(_t(tg, v) for v in tangents))
    want = torch.func.jvp(make(torch), tuple(_t(torch, x) for x in xs),
                          tuple(_t(torch, v) for v in tangents))
    _close(got, want)


@needs_torch
@pytest.mark.parametrize("name,make,shapes", SCALAR)
def test_hessian_and_compositions_match_torch(name, make, shapes):
    xs = _inputs(shapes, 4)
    f_tg, f_t = make(tg), make(torch)
    args_tg, args_t = [_t(tg, x) for x in xs], [_t(torch, x) for x in xs]
    want = torch.func.hessian(f_t)(*args_t)
    _close(tg.func.hessian(f_tg)(*args_tg), want, rtol=1e-9)
    _close(tg.func.jacfwd(tg.func.jacrev(f_tg))(*args_tg), want, rtol=1e-9)
    _close(tg.func.jacrev(tg.func.jacrev(f_tg))(*args_tg), want, rtol=1e-9)
    _close(tg.func.vmap(tg.func.hessian(f_tg), in_dims=(0,) + (None,) * (len(xs) - 1))(
        *[tg.stack([args_tg[0], args_tg[0] * 0.5])] + args_tg[1:]),
        torch.func.vmap(torch.func.hessian(f_t), in_dims=(0,) + (None,) * (len(xs) - 1))(
        *[torch.stack([args_t[0], args_t[0] * 0.5])] + args_t[1:]), rtol=1e-9)


@needs_torch
def test_grad_of_grad_of_a_scalar_function_matches_torch():
    f = lambda m: lambda x: m.sin(x) * x ** 3  # noqa: E731
    for x in (0.3, -1.7):
        _close(tg.func.grad(tg.func.grad(tg.func.grad(f(tg))))(_t(tg, x)),
               torch.func.grad(torch.func.grad(torch.func.grad(f(torch))))(_t(torch, x)))
    # the inner level's variable captured by the outer level (no perturbation confusion)
    g = lambda m: lambda x: m.func.grad(lambda y: x * y ** 2)(x * 3.0)  # noqa: E731
    _close(tg.func.grad(g(tg))(_t(tg, 1.5)), torch.func.grad(g(torch))(_t(torch, 1.5)))


@needs_torch
@pytest.mark.parametrize("name,make,shapes", TENSOR)
def test_vmap_jacrev_per_sample_jacobians_replay_and_match_torch(name, make, shapes):
    xs = _inputs([(6,) + s for s in shapes], 5)
    argnums = _argnums(shapes)
    batched = tg.func.vmap(tg.func.jacrev(make(tg), argnums=argnums))
    got = batched(*[_t(tg, x) for x in xs])
    assert batched.last_path == "replay"
    want = torch.func.vmap(torch.func.jacrev(make(torch), argnums=argnums))(
        *[_t(torch, x) for x in xs])
    _close(got, want)


@needs_torch
def test_vmap_in_dims_out_dims_and_structures_match_torch():
    f = lambda m: lambda x, A, c: {"y": m.tanh(A @ x) * c, "s": (x * x).sum()}  # noqa: E731
    x, A = _inputs([(3, 5), (2, 3)], 6)
    for in_dims, out_dims in [((1, None, None), 0), ((1, None, None), (1, 0)),
                              ((-1, None, None), {"y": 0, "s": 0})]:
        if isinstance(out_dims, tuple):
            continue   # a tuple out_dims for a dict output is refused by both
        batched = tg.func.vmap(f(tg), in_dims=in_dims, out_dims=out_dims)
        got = batched(_t(tg, x), _t(tg, A), 2.0)
        want = torch.func.vmap(f(torch), in_dims=in_dims, out_dims=out_dims)(
            _t(torch, x), _t(torch, A), 2.0)
        assert batched.last_path == "replay" and list(got) == list(want)
        for k in want:
            _close(got[k], want[k])
    g = lambda m: lambda x, A: m.tanh(A @ x)  # noqa: E731
    got = tg.func.vmap(g(tg), in_dims=(0, None), out_dims=1)(_t(tg, x.T), _t(tg, A))
    want = torch.func.vmap(g(torch), in_dims=(0, None), out_dims=1)(_t(torch, x.T),
                                                                    _t(torch, A))
    _close(got, want)


@needs_torch
def test_vmap_over_samples_whose_branches_differ_is_right():
    X = np.array([[1.0, 2.0, 0.5], [-1.0, 0.2, -0.3], [0.7, -2.0, 1.2], [-0.4, 0.9, 0.0],
                  [0.6, 0.6, -2.0], [0.3, -0.1, 0.8]])
    tg.func.clear_cache()
    before = tg.func.PATHS["recordings"]
    twin = {tg.func.jacrev: torch.func.jacrev, tg.func.jacfwd: torch.func.jacfwd}
    for make in (BRANCHY, WITH_MAX):
        for transform in (lambda f: f, tg.func.jacrev, tg.func.jacfwd):
            batched = tg.func.vmap(transform(make(tg)))
            got = batched(_t(tg, X))
            assert batched.last_path == "replay"
            # (torch.func.vmap refuses the Python `if`: PyTorch one sample at a time)
            per_sample = twin.get(transform, lambda f: f)(make(torch))
            _close(got, torch.stack([per_sample(x) for x in _t(torch, X)]))
    # the Python `if` is a guard: several branch patterns, one recording each
    assert tg.func.PATHS["recordings"] - before > 6
    # second order: the recorded Hessian replays where its derivatives allow (relu, the
    # `if`); through where/maximum (a create_graph derivative branching on values) the
    # replay's own Hessian runs at each sample; a composition neither covers runs eagerly
    for make in (BRANCHY, WITH_MAX):
        def total(x, make=make):
            return make(tg)(x).sum()

        def total_t(x, make=make):
            return make(torch)(x).sum()

        per_sample = torch.func.hessian(total_t)
        want = torch.stack([per_sample(x) for x in _t(torch, X)])
        batched = tg.func.vmap(tg.func.hessian(total))
        _close(batched(_t(tg, X)), want)
        assert batched.last_path == "replay"
        batched = tg.func.vmap(tg.func.jacrev(tg.func.grad(total)))
        _close(batched(_t(tg, X)), want)
        # (both hold a prod, whose recorded derivative divides by x: right away from zeros)
        assert batched.last_path.startswith("eager")


def test_vmap_jacobians_match_central_differences():
    f = TENSOR[1][1](tg)   # tanh(A @ x) * x.sum()
    A, x = _inputs([(5, 2, 3), (5, 3)], 7)
    JA, Jx = tg.func.vmap(tg.func.jacrev(f, argnums=(0, 1)))(_t(tg, A), _t(tg, x))
    h = 1e-6
    for b in range(5):
        def fx(v):
            return _np(f(_t(tg, A[b]), _t(tg, v)))
        for j in range(3):
            e = np.zeros(3)
            e[j] = h
            np.testing.assert_allclose(_np(Jx)[b][:, j], (fx(x[b] + e) - fx(x[b] - e)) / (2 * h),
                                       rtol=1e-6, atol=1e-8)
        for i, j in [(0, 0), (1, 2)]:
            E = np.zeros((2, 3))
            E[i, j] = h
            fd = (_np(f(_t(tg, A[b] + E), _t(tg, x[b]))) - _np(f(_t(tg, A[b] - E),
                                                               _t(tg, x[b])))) / (2 * h)
            np.testing.assert_allclose(_np(JA)[b][:, i, j], fd, rtol=1e-6, atol=1e-8)
    # and the replayed Hessians of a scalar function against differences of its gradient
    s = SCALAR[0][1](tg)
    X = _inputs([(4, 3)], 8)[0]
    H = _np(tg.func.vmap(tg.func.hessian(s))(_t(tg, X)))
    for b in range(4):
        for j in range(3):
            e = np.zeros(3)
            e[j] = h
            fd = (_np(tg.func.grad(s)(_t(tg, X[b] + e))) -
                  _np(tg.func.grad(s)(_t(tg, X[b] - e)))) / (2 * h)
            np.testing.assert_allclose(H[b][:, j], fd, rtol=1e-6, atol=1e-6)


@needs_torch
def test_vmap_falls_back_where_replay_cannot_follow_and_stays_right():
    X = _inputs([(4, 3)], 9)[0]
    cases = {
        "detach": lambda m: lambda x: x * x.detach(),            # a value held as a constant
        "sort": lambda m: lambda x: x.sort()[0] * x,             # no elementwise form
        "in-place on the input": lambda m: lambda x: x.mul_(2.0) + 1.0,
    }
    for name, make in cases.items():
        batched = tg.func.vmap(make(tg))
        got = batched(_t(tg, X))
        assert batched.last_path.startswith("eager"), name
        want = torch.stack([make(torch)(_t(torch, x)) for x in X])
        _close(got, want)
    # reading a value into Python: torch.func refuses .item() under vmap; tapegrad runs it
    batched = tg.func.vmap(lambda x: x * float(x[0]))
    _close(batched(_t(tg, X)), _t(tg, X * X[:, :1]))
    assert batched.last_path.startswith("eager")
    # arguments that require grad keep their graph: the eager path, differentiable
    Xg = _t(tg, X).requires_grad_()
    tg.func.vmap(tg.func.grad(lambda x: (x ** 3).sum()))(Xg).sum().backward()
    np.testing.assert_allclose(_np(Xg.grad), 6 * X)


def test_vmap_keeps_its_recording_and_replays_constant_derivatives():
    f = lambda x: x @ tg.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])  # noqa: E731
    X = _t(tg, _inputs([(7, 3)], 10)[0])
    tg.func.clear_cache()
    J = tg.func.vmap(tg.func.jacrev(f))(X)     # a linear function: the same J everywhere
    recordings = tg.func.PATHS["recordings"]
    batched = tg.func.vmap(tg.func.jacrev(f))  # written again inline: the same recording
    J2 = batched(X * 2.0)
    assert batched.last_path == "replay" and tg.func.PATHS["recordings"] == recordings
    want = np.broadcast_to(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]).T, (7, 2, 3))
    np.testing.assert_array_equal(_np(J), want)
    np.testing.assert_array_equal(_np(J2), want)


@needs_torch
def test_results_stay_differentiable_for_the_callers_autograd():
    f = lambda m: lambda x: (m.sin(x) * x).sum()  # noqa: E731
    x0 = np.array([0.3, -1.2, 2.0])
    a = _t(tg, x0).requires_grad_()
    b = _t(torch, x0).requires_grad_()
    ga, gb = tg.func.grad(f(tg))(a), torch.func.grad(f(torch))(b)
    assert ga.requires_grad and gb.requires_grad
    (ga * ga).sum().backward()
    (gb * gb).sum().backward()
    _close(a.grad, b.grad)


@needs_torch
def test_bundle_adjustment_per_observation_jacobian_replays():
    # the showcase's residual, written once for both libraries (loaded from its path)
    spec = importlib.util.spec_from_file_location(
        "_bench_func", Path(__file__).resolve().parent.parent / "benchmarks" / "func.py")
    ba = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ba)
    cams, X, w, feats = ba.observations(50, seed=0)
    batched = tg.func.vmap(tg.func.jacrev(ba.residual, argnums=(0, 1, 2)))
    got = batched(*[_t(tg, a) for a in (cams, X, w, feats)])
    assert batched.last_path == "replay"
    want = torch.func.vmap(torch.func.jacrev(ba.residual, argnums=(0, 1, 2)))(
        *[_t(torch, a) for a in (cams, X, w, feats)])
    _close(got, want, rtol=1e-9)


@needs_torch
def test_misuse_raises_torchs_errors():
    x = _t(tg, [1.0, 2.0, 3.0])
    xt = _t(torch, [1.0, 2.0, 3.0])
    cases = [
        lambda m, x: m.func.grad(lambda x: x * 2)(x),
        lambda m, x: m.func.grad(lambda x: 1.0)(x),
        lambda m, x: m.func.grad(lambda x: x.sum(), has_aux=True)(x),
        lambda m, x: m.func.grad(lambda x: x.sum(), argnums=1)(x),
        lambda m, x: m.func.grad(lambda x: x.sum(), argnums=())(x),
        lambda m, x: m.func.jvp(lambda x: x, x, x),
        lambda m, x: m.func.jvp(lambda x: x, (x,), (x[:2],)),
        lambda m, x: m.func.vmap(lambda a, b: a + b)(x, m.zeros(4, dtype=m.float64)),
        lambda m, x: m.func.vmap(lambda a: a, in_dims=None)(x),
        lambda m, x: m.func.vmap(lambda a: a, in_dims=1)(x),
        lambda m, x: m.func.vmap(lambda a, b: a * b)(x, 2.0),
        lambda m, x: m.func.vmap(lambda a: 1.0)(x),
    ]
    for case in cases:
        with pytest.raises(Exception) as want:
            case(torch, xt)
        with pytest.raises(want.type) as got:
            case(tg, x)
        assert str(got.value).replace("tapegrad", "torch") == str(want.value)


@needs_torch
def test_per_sample_gradients_of_a_parameter_dict_match_torch():
    """torch.func's own recipe: vmap(grad(loss), in_dims=(None, 0, 0))(params, x, y)."""
    rng = np.random.default_rng(11)
    params = {"W": rng.normal(size=(4, 3)), "b": rng.normal(size=4), "v": rng.normal(size=4)}
    X, Y = rng.normal(size=(8, 3)), rng.normal(size=8)

    def make(m):
        def loss(p, x, y):
            return ((m.tanh(p["W"] @ x + p["b"]) * p["v"]).sum() - y) ** 2
        return loss

    batched = tg.func.vmap(tg.func.grad(make(tg)), in_dims=(None, 0, 0))
    got = batched({k: _t(tg, v) for k, v in params.items()}, _t(tg, X), _t(tg, Y))
    want = torch.func.vmap(torch.func.grad(make(torch)), in_dims=(None, 0, 0))(
        {k: _t(torch, v) for k, v in params.items()}, _t(torch, X), _t(torch, Y))
    assert batched.last_path == "replay" and list(got) == list(want)
    for k in want:
        _close(got[k], want[k])
    nested = tg.func.vmap(tg.func.vmap(lambda z: z.sin() * z[0]))
    Z = rng.normal(size=(3, 4, 2))
    _close(nested(_t(tg, Z)), _t(tg, np.sin(Z) * Z[..., :1]))
    assert nested.last_path == "replay"


def test_batch_replay_methods_equal_one_point_at_a_time_and_mark_other_branches():
    """CompiledTape.batch_outputs / batch_jacobian (what vmap replays with): the rows of the
    points that took the recorded branches equal the one-point methods, the others are
    marked; an input no output reads gets zero gradients."""
    with tg.Tape() as tape:
        x = tg.tensor([0.5, 1.0, -2.0, 3.0]).requires_grad_()
        y = tg.stack([x[0] * x[1].sin(), x[1] / (1.0 + x[0] ** 2)]) * (x[2] if x[0] > 0 else 1.0)
    compiled = tape.compile([x], [y])
    X = np.random.default_rng(12).normal(size=(300, 4))
    values, ok = compiled.batch_outputs(X)
    values2, J, ok2 = compiled.batch_jacobian(X)
    assert np.array_equal(ok, X[:, 0] > 0) and np.array_equal(ok, ok2)
    np.testing.assert_array_equal(values[ok], values2[ok])
    for p in np.nonzero(ok)[0][:20]:
        np.testing.assert_allclose(values[p], compiled(X[p]), rtol=1e-14)
        np.testing.assert_allclose(J[p], compiled.jacobian(X[p]), rtol=1e-14)
    assert np.all(J[ok][:, :, 3] == 0.0)


@needs_torch
def test_tensors_the_function_reads_besides_its_arguments():
    """A closure's tensor changed in place between calls is seen (recorded again), and a
    module's parameters that require grad keep their graph through vmap, as in PyTorch."""
    W = tg.tensor([[1.0, 2.0], [3.0, 4.0]])
    X = _t(tg, np.ones((3, 2)))

    def f(x):
        return W @ x

    first = tg.func.vmap(tg.func.jacrev(f))(X)
    W.mul_(2.0)
    batched = tg.func.vmap(tg.func.jacrev(f))
    second = batched(X)
    assert batched.last_path == "replay"
    np.testing.assert_array_equal(_np(second), 2 * _np(first))
    tg.manual_seed(0)
    lin = tg.nn.Linear(2, 3)
    lin_t = torch.nn.Linear(2, 3).double()
    with torch.no_grad():
        lin_t.weight.copy_(torch.tensor(_np(lin.weight)))
        lin_t.bias.copy_(torch.tensor(_np(lin.bias)))
    Xn = np.random.default_rng(13).normal(size=(4, 2))
    batched = tg.func.vmap(lambda x: lin(x).tanh())
    (batched(_t(tg, Xn)) ** 2).sum().backward()
    (torch.func.vmap(lambda x: lin_t(x).tanh())(_t(torch, Xn)) ** 2).sum().backward()
    assert batched.last_path.startswith("eager")
    _close(lin.weight.grad, lin_t.weight.grad)
    _close(lin.bias.grad, lin_t.bias.grad)


@needs_torch
@pytest.mark.parametrize("argnums", [0, 1, (0, 1), (1, 0)])
def test_vmap_hessian_through_maximum_replays_with_torchs_structure(argnums):
    def make(m):
        return lambda x, y, c: (x[:2].sin() * m.maximum(y, x[1:])).sum() * c

    X, Y = _inputs([(6, 3), (6, 2)], 14)
    batched = tg.func.vmap(tg.func.hessian(make(tg), argnums=argnums), in_dims=(0, 0, None))
    got = batched(_t(tg, X), _t(tg, Y), 2.0)
    want = torch.func.vmap(torch.func.hessian(make(torch), argnums=argnums),
                           in_dims=(0, 0, None))(_t(torch, X), _t(torch, Y), 2.0)
    assert batched.last_path == "replay"
    _close(got, want)


# create_graph rules that branch (where, maximum, minimum, clamp, relu): their conditions
# are recorded comparisons, so second derivatives record whole and replay over the batch
PIECEWISE = lambda m: lambda x: ((x.clamp(-0.5, 0.5) * x.sin()).sum()  # noqa: E731
                                 + (m.maximum(x, x.cos()) * x).sum()
                                 + m.where(x > 0.2, x ** 3, m.minimum(x, 0.1 * x) * x).sum()
                                 + (m.relu(x - 0.4) * x[0]).sum())


@needs_torch
@pytest.mark.parametrize("transform", ["hessian", "jacrev(grad)"])
def test_vmap_second_derivatives_through_branching_rules_replay(transform):
    # samples on both sides of every branch (clamp's bounds, maximum's, where's, relu's)
    X = np.array([[1.0, 2.0, 0.5], [-1.0, 0.2, -0.3], [0.7, -2.0, 1.2], [-0.4, 0.9, 0.1],
                  [0.6, 0.6, -2.0], [0.3, -0.1, 0.8], [0.45, 0.75, 0.35]])
    make = {"hessian": lambda m: m.func.hessian,
            "jacrev(grad)": lambda m: lambda f: m.func.jacrev(m.func.grad(f))}[transform]
    tg.func.clear_cache()
    recordings = tg.func.PATHS["recordings"]
    batched = tg.func.vmap(make(tg)(PIECEWISE(tg)))
    got = batched(_t(tg, X))
    assert batched.last_path == "replay"
    assert tg.func.PATHS["recordings"] == recordings + 1   # one recording: no guard, no retry
    want = torch.func.vmap(make(torch)(PIECEWISE(torch)))(_t(torch, X))
    _close(got, want)
    for x, w in zip(X, want):   # and each sample against the eager transform
        _close(make(tg)(PIECEWISE(tg))(_t(tg, x)), w)
