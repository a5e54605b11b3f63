"""Array-op-table-driven tests: every row of ``tapegrad.array_ops.ARRAY_OPS`` has a case
here (``test_every_array_op_has_a_case`` fails otherwise).  Gradients and Hessian-vector
products (double backward) are checked against central differences along a random direction
(as HIPS autograd's ``check_grads``) in float64, and against PyTorch when it is installed."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.ops import array_ops
from tapegrad.ops.array_ops import ARRAY_OPS

# the rows of array_ops.py (other modules that add rows test them beside their code)
ROWS = {n for n, op in ARRAY_OPS.items() if op.forward.__module__ == array_ops.__name__}
INTERNAL = {"unindex", "ungather"}   # adjoints of indexing: PyTorch has no function of the name

RNG = np.random.default_rng(1)

# row name -> list of (function of tensors, input shapes)
CASES = {
    "sum": [(lambda x: x.sum(), [(3, 4)]), (lambda x: x.sum(1), [(3, 4)]),
            (lambda x: x.sum((0, 2), keepdim=True), [(2, 3, 4)]), (lambda x: x.sum(), [()])],
    "mean": [(lambda x: x.mean(), [(3, 4)]), (lambda x: x.mean(-1, keepdim=True), [(3, 4)])],
    "prod": [(lambda x: x.prod(), [(2, 3)]), (lambda x: x.prod(1), [(3, 4)])],
    "amax": [(lambda x: x.amax(1), [(3, 4)]), (lambda x: x.amax(), [(3, 4)])],
    "amin": [(lambda x: x.amin(0), [(3, 4)])],
    "max_dim": [(lambda x: x.max(1).values, [(3, 4)]), (lambda x: x.max(0, keepdim=True)[0], [(3, 4)])],
    "min_dim": [(lambda x: x.min(1).values, [(3, 4)])],
    "max_all": [(lambda x: x.max(), [(3, 4)])],
    "min_all": [(lambda x: x.min(), [(3, 4)])],
    "var": [(lambda x: x.var(), [(3, 4)]), (lambda x: x.var(1, unbiased=False), [(3, 4)])],
    "std": [(lambda x: x.std(), [(3, 4)]), (lambda x: x.std(0), [(3, 4)])],
    "norm": [(lambda x: x.norm(), [(3, 4)]), (lambda x: x.norm(dim=1), [(3, 4)]),
             (lambda x: x.norm(p=1), [(5,)])],
    "logsumexp": [(lambda x: x.logsumexp(1), [(3, 4)])],
    "softmax": [(lambda x: x.softmax(1), [(3, 4)]), (lambda x: x.softmax(0), [(3, 4)])],
    "log_softmax": [(lambda x: x.log_softmax(-1), [(3, 4)])],
    "matmul": [(lambda a, b: a @ b, [(3, 4), (4, 2)]), (lambda a, b: a @ b, [(4,), (4,)]),
               (lambda a, b: a @ b, [(3, 4), (4,)]), (lambda a, b: a @ b, [(4,), (4, 2)]),
               (lambda a, b: a @ b, [(2, 3, 4), (2, 4, 5)]), (lambda a, b: a @ b, [(2, 3, 4), (4, 5)])],
    "outer": [(lambda a, b: tg.outer(a, b), [(3,), (4,)])],
    "fmod": [(lambda x, y: x.fmod(y.abs() + 0.5), [(3, 4), (3, 4)]), (lambda x: x.fmod(0.7), [(5,)]),
             (lambda x, y: (x * 3.0).fmod(-(y.abs() + 0.5)), [(3, 4), (4,)])],
    "lerp": [(lambda x, e: x.lerp(e, 0.3), [(3, 4), (3, 4)]), (lambda x, e: x.lerp(e, 0.7), [(4,), (3, 4)]),
             (lambda x, e, w: x.lerp(e, w), [(3, 4), (3, 4), (3, 4)]),
             (lambda x, e, w: x.lerp(e, w), [(3, 4), (4,), (3, 1)])],
    "remainder": [(lambda x, y: x % (y.abs() + 0.5), [(3, 4), (3, 4)]),
                  (lambda x: x.remainder(-0.7), [(5,)]),
                  (lambda x, y: (x * 3.0).remainder(-(y.abs() + 0.5)), [(2, 3), (3,)])],
    "linear": [(lambda x, w, b: tg.linear(x, w, b), [(5, 3), (4, 3), (4,)]),
               (lambda x, w: tg.linear(x, w), [(2, 5, 3), (4, 3)])],
    "reshape": [(lambda x: x.reshape(4, 3), [(3, 4)]), (lambda x: x.view(-1), [(3, 4)]),
                (lambda x: x.flatten(), [(2, 3, 4)])],
    "view_node": [(lambda a, b: a @ b, [(2, 3, 4), (4,)]), (lambda a, b: a @ b, [(4,), (4, 2)]),
                  (lambda a, b: a @ b, [(2, 1, 3, 4), (3, 4, 2)])],
    "transpose": [(lambda x: x.transpose(0, 2), [(2, 3, 4)])],
    "t": [(lambda x: x.t(), [(3, 4)])],
    "permute": [(lambda x: x.permute(2, 0, 1), [(2, 3, 4)]), (lambda x: x.T, [(3, 4)])],
    "squeeze": [(lambda x: x.squeeze(), [(3, 1, 4)]), (lambda x: x.squeeze(1), [(3, 1, 4)])],
    "unsqueeze": [(lambda x: x.unsqueeze(1), [(3, 4)])],
    "expand": [(lambda x: x.expand(3, 4), [(4,)]), (lambda x: x.expand(2, -1, 4), [(3, 1)])],
    "cat": [(lambda a, b: tg.cat([a, b], 1), [(3, 2), (3, 4)])],
    "stack": [(lambda a, b: tg.stack([a, b], 1), [(3, 4), (3, 4)])],
    "split": [(lambda x: x.split(2, 1)[1] * 2.0 + x.split(2, 1)[0], [(3, 4)]),
              (lambda x: x.chunk(3)[2], [(5, 2)])],
    "unbind": [(lambda x: x.unbind(1)[2] * 2.0 + x.unbind(1)[0], [(3, 4)]),
               (lambda x: tg.stack(list(x)[::-1]), [(3, 4)]),
               (lambda x: x.unbind()[1] * x.unbind()[3], [(5,)])],
    "getitem": [(lambda x: x[1], [(3, 4)]), (lambda x: x[:, 1:3], [(3, 4)]),
                (lambda x: x[..., None, 0], [(3, 4)]), (lambda x: x[[0, 2, 0]], [(3, 4)]),
                (lambda x: x[tg.tensor([[True, False, True, True]] * 3)], [(3, 4)])],
    "gather": [(lambda x: x.gather(1, tg.tensor([[0, 0], [1, 3], [2, 2]])), [(3, 4)])],
    "index_select": [(lambda x: x.index_select(0, tg.tensor([2, 0, 2])), [(3, 4)])],
    "take": [(lambda x: x.take(tg.tensor([0, 5, 5, 11])), [(3, 4)])],
    "cumsum": [(lambda x: x.cumsum(1), [(3, 4)]), (lambda x: tg.cumsum(x, -1), [(5,)])],
    "cumprod": [(lambda x: x.cumprod(1), [(3, 4)]), (lambda x: tg.cumprod(x, 0), [(4, 2)])],
    "flip": [(lambda x: x.flip(0), [(3, 4)]), (lambda x: tg.flip(x, (0, 2)), [(2, 3, 4)])],
    "roll": [(lambda x: x.roll(1, 0), [(3, 4)]), (lambda x: x.roll((1, -2), (0, 1)), [(3, 4)]),
             (lambda x: tg.roll(x, 5), [(3, 4)])],
    # float32 in the middle: a linear function and a coarse step keep the difference exact
    "to_dtype": [(lambda x: x.float().double() * 2.0, [(3,)], 0.25)],
}


def _index_put(x, v):
    y = x * 1.0
    y[1:, 2] = v
    return y * y


CASES["index_put"] = [(_index_put, [(3, 4), (2,)])]
CASES["index_put_add"] = [(lambda x, v: (x * 1.0).index_put((tg.tensor([1, 1, 0]),), v, accumulate=True) ** 2,
                           [(3, 4), (3, 4)]),
                          (lambda x, v: x.index_put((tg.tensor([2, 0]), tg.tensor([1, 1])), v * v,
                                                    accumulate=True), [(3, 4), ()])]


def _through_view(x):
    y = x * 1.0
    v = y[1]
    v.mul_(x[0])   # y's history becomes CopySlices, v's AsStridedBackward0
    return v


def _columns_written(x):
    y = x * 1.0
    y[:, 1].mul_(x[:, 0])
    y.t()[2].add_(x[0, :3])
    return y


CASES["as_strided"] = [(_through_view, [(3, 4)])]
CASES["copy_slices"] = [(_columns_written, [(3, 4)])]


def _row_read_then_written(x):
    y = x * 1.0
    v = y[1]
    u = v + x[2]   # v's own history, beside the in-place op's input (written_view)
    v.mul_(x[0])
    return y * u.sum()


CASES["written_view"] = [(_row_read_then_written, [(3, 4)]), (_through_view, [(3, 4)])]
CASES["reshape_alias"] = [(lambda x: x.t().reshape(2, 2, 3), [(3, 4)])]
CASES["diagonal"] = [(lambda x: x.diagonal(), [(3, 4)]), (lambda x: x.diagonal(1), [(3, 4)]),
                     (lambda x: x.diagonal(-1, 1, 2), [(2, 3, 4)])]
CASES["unindex"] = [(lambda v: array_ops.call("unindex", v, (3, 4), (slice(None), 1)), [(3,)]),
                    (lambda v: array_ops.call("unindex", v, (4,), ([0, 2, 0],)), [(3,)])]
CASES["ungather"] = [(lambda v: array_ops.call("ungather", v, (3, 4), 1,
                                               np.array([[0, 0], [1, 3], [2, 2]])), [(3, 2)])]


def _backward_data(name, g, out, dim):
    """PyTorch's ``_softmax_backward_data``-style functions: on torch tensors (the
    comparisons run each case there) torch's own, else tapegrad's array op."""
    if not isinstance(g, tg.Tensor):
        import torch
        return getattr(torch, "_" + name)(g, out, dim, torch.float64)
    return array_ops.call(name, g, out, dim)


CASES["softmax_backward_data"] = [
    (lambda g, o: _backward_data("softmax_backward_data", g, o, 1), [(3, 4), (3, 4)]),
    (lambda g, o: _backward_data("softmax_backward_data", g, o, 0), [(3, 4), (3, 4)])]
CASES["log_softmax_backward_data"] = [
    (lambda g, o: _backward_data("log_softmax_backward_data", g, o, -1), [(3, 4), (3, 4)]),
    (lambda g, o: _backward_data("log_softmax_backward_data", g, o, 0), [(5,), (5,)])]
ALL_CASES = [(n, k) for n, cs in CASES.items() for k in range(len(cs))]


def test_every_array_op_has_a_case():
    assert set(CASES) == ROWS, "add a CASES entry for each new array op"


def _check(fn, shapes, h=1e-6):
    xs = [RNG.normal(size=s) for s in shapes]
    ts = [tg.tensor(x, requires_grad=True) for x in xs]
    y = fn(*ts)
    w = RNG.normal(size=tuple(y.shape))
    y.backward(tg.tensor(w))
    direction = [RNG.normal(size=s) for s in shapes]

    def f(shift):
        with tg.no_grad():
            out = fn(*[tg.tensor(x + shift * d) for x, d in zip(xs, direction)])
        return np.sum(np.asarray(out.tolist()) * w)

    fd = (f(h) - f(-h)) / (2 * h)
    analytic = sum(np.sum(t.grad.numpy() * d) for t, d in zip(ts, direction))
    assert analytic == pytest.approx(fd, rel=1e-5, abs=1e-6)
    for t, s in zip(ts, shapes):
        assert tuple(t.grad.shape) == tuple(s)


@pytest.mark.parametrize("name,k", ALL_CASES)
def test_array_op_gradient(name, k):
    _check(*CASES[name][k])


def _on_torch(torch, fn, *tensors):
    """Run a case's lambda on torch tensors (the tg.* functions it calls map onto torch's)."""
    names = ("tensor", "cat", "stack", "outer", "linear", "cumsum", "cumprod", "flip", "roll")
    saved = {n: getattr(tg, n) for n in names}
    try:
        tg.tensor = lambda d, **k: torch.tensor(d)
        tg.cat, tg.stack, tg.outer = torch.cat, torch.stack, torch.outer
        tg.linear = torch.nn.functional.linear
        tg.cumsum, tg.cumprod, tg.flip, tg.roll = torch.cumsum, torch.cumprod, torch.flip, torch.roll
        return fn(*tensors)
    finally:
        for n, f in saved.items():
            setattr(tg, n, f)


@pytest.mark.parametrize("name,k", ALL_CASES)
def test_array_op_matches_pytorch(name, k):
    torch = pytest.importorskip("torch")
    if name in INTERNAL:
        pytest.skip("internal op (an indexing adjoint): PyTorch has no function of that name")
    fn, shapes = CASES[name][k][:2]
    xs = [RNG.normal(size=s) for s in shapes]
    ts = [tg.tensor(x, requires_grad=True) for x in xs]
    y = fn(*ts)
    tt = [torch.tensor(x, requires_grad=True) for x in xs]
    yt = _on_torch(torch, fn, *tt)
    np.testing.assert_allclose(np.asarray(y.tolist()), yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert y.grad_fn.name() == yt.grad_fn.name()
    w = RNG.normal(size=tuple(y.shape))
    y.backward(tg.tensor(w))
    yt.backward(torch.tensor(w))
    for a, b in zip(ts, tt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_broadcasting_grads_keep_input_shapes():
    a = tg.tensor(RNG.normal(size=(3, 1)), requires_grad=True)
    b = tg.tensor(RNG.normal(size=(4,)), requires_grad=True)
    c = tg.tensor(1.5, requires_grad=True)
    ((a + b) * c).sum().backward()
    assert tuple(a.grad.shape) == (3, 1) and tuple(b.grad.shape) == (4,) and a.grad.ndim == 2
    assert c.grad.ndim == 0
    np.testing.assert_allclose(a.grad.numpy(), np.full((3, 1), 4 * 1.5))


def test_max_ties_split_and_max_dim_routes():
    x = tg.tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5]
    y = tg.tensor([[1.0, 3.0, 3.0]], requires_grad=True)
    v, i = y.max(1)
    v.sum().backward()
    assert y.grad.tolist() == [[0.0, 1.0, 0.0]] and i.tolist() == [1]


@pytest.mark.parametrize("shape, dim", [((4, 40), 0), ((40, 4), 1), ((3, 5, 20), 1),
                                        ((20, 5, 3), 1), ((100, 30), 0)])
def test_min_max_over_a_dim_route_to_the_first_extreme_as_pytorch(shape, dim):
    """The routing kernel's two walks (row by row for rows of 16 or more elements, column
    by column below): ties go to the first, a NaN beats every number and later NaNs."""
    torch = pytest.importorskip("torch")
    x = np.round(np.random.default_rng(3).standard_normal(shape), 1)
    x.reshape(-1)[::17] = np.nan
    for fn in ("min", "max"):
        a, b = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        got = tg.autograd.grad(getattr(tg, fn)(a, dim)[0].sum(), a)[0].numpy()
        want = torch.autograd.grad(getattr(torch, fn)(b, dim)[0].sum(), b)[0].numpy()
        np.testing.assert_array_equal(got, want)


def test_repeated_integer_indices_accumulate():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[[0, 0, 2]].sum().backward()
    assert x.grad.tolist() == [2.0, 0.0, 1.0]


def test_bad_indices_raise_clear_errors():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 3"):
        x[5]
    with pytest.raises(IndexError, match="too many indices"):
        x[0, 0]
    with pytest.raises(RuntimeError, match="out of bounds"):
        tg.randn(2, 3).gather(1, tg.tensor([[0], [7]]))
    with pytest.raises(IndexError, match="out of range"):
        x.take(tg.tensor([3]))
    with pytest.raises(RuntimeError, match="cannot be multiplied"):
        tg.randn(2, 3) @ tg.randn(2, 3)
    with pytest.raises(RuntimeError, match="is invalid for input of size 6"):
        tg.randn(2, 3).reshape(4, 2)


def _random_broadcast_pair(rng):
    """Two shapes that broadcast: dims of size 1 dropped or kept, 0-d, empty dims."""
    nd = int(rng.integers(0, 4))
    base = [int(rng.choice([0, 1, 2, 3])) if rng.random() < 0.15 else int(rng.integers(1, 4))
            for _ in range(nd)]
    a = [n if rng.random() < 0.6 else 1 for n in base]
    b = [n if rng.random() < 0.6 else 1 for n in base]
    a = a[int(rng.integers(0, nd + 1)):] if rng.random() < 0.3 else a
    return tuple(a), tuple(b)


@pytest.mark.parametrize("seed", range(40))
def test_elementwise_broadcasting_random_shapes(seed):
    """Binary elementwise ops over random broadcastable shapes (0-d and empty dims too):
    gradients have the inputs' shapes and match central differences."""
    rng = np.random.default_rng(seed)
    sa, sb = _random_broadcast_pair(rng)
    op = [lambda x, y: x * y + x, lambda x, y: tg.atan2(x, y + 3.0), lambda x, y: (x - y).tanh(),
          lambda x, y: tg.maximum(x, y) * y][seed % 4]
    xa, xb = rng.normal(size=sa), rng.normal(size=sb)
    ta, tb = tg.tensor(xa, requires_grad=True), tg.tensor(xb, requires_grad=True)
    out = op(ta, tb)
    w = rng.normal(size=tuple(out.shape))
    (out * tg.tensor(w)).sum().backward()
    assert tuple(ta.grad.shape) == sa and tuple(tb.grad.shape) == sb
    h = 1e-6
    for t, x, other in ((ta, xa, lambda v: op(tg.tensor(v), tg.tensor(xb))),
                        (tb, xb, lambda v: op(tg.tensor(xa), tg.tensor(v)))):
        d = rng.normal(size=x.shape)
        fd = (np.sum(np.asarray(other(x + h * d).tolist()) * w)
              - np.sum(np.asarray(other(x - h * d).tolist()) * w)) / (2 * h)
        assert np.sum(t.grad.numpy() * d) == pytest.approx(fd, rel=1e-5, abs=1e-6)


def test_empty_tensors_reduce_and_differentiate():
    x = tg.tensor(np.zeros((0, 3)), requires_grad=True)
    y = (x * 2.0).sum(0)
    assert y.tolist() == [0.0, 0.0, 0.0]
    y.sum().backward()
    assert tuple(x.grad.shape) == (0, 3)


def _loss(out, coarse, lib=tg):
    """A loss with a non-zero second derivative: sum(tanh(out)); sum(out^2) for a case run
    with a coarse step (float32 inside: the gradient is linear, so the difference is exact)."""
    return (out * out).sum() if coarse else lib.tanh(out).sum()


def _loss_grad(fn, xs, coarse, create_graph=False):
    ts = [tg.tensor(x, requires_grad=True) for x in xs]
    return ts, tg.autograd.grad(_loss(fn(*ts), coarse), ts, create_graph=create_graph)


def _hvp(fn, xs, vs, coarse):
    """The Hessian-vector product of the loss by double backward."""
    ts, gs = _loss_grad(fn, xs, coarse, create_graph=True)
    assert all(g.requires_grad for g in gs)
    hv = tg.autograd.grad(sum((g * tg.tensor(v)).sum() for g, v in zip(gs, vs)), ts,
                          allow_unused=True)
    return [np.zeros(np.shape(x)) if h is None else h.numpy() for h, x in zip(hv, xs)]


def _point(name, k):
    fn, shapes = CASES[name][k][:2]
    rng = np.random.default_rng(k)
    return (fn, [rng.normal(size=s) for s in shapes], [rng.normal(size=s) for s in shapes],
            len(CASES[name][k]) > 2)


@pytest.mark.parametrize("name,k", ALL_CASES)
def test_array_op_hessian_vector_product(name, k):
    """create_graph through the op's rule: Hessian-vector products against central
    differences of first-order gradients."""
    fn, xs, vs, coarse = _point(name, k)
    hv = _hvp(fn, xs, vs, coarse)
    h = CASES[name][k][2] if coarse else 1e-5
    plus = _loss_grad(fn, [x + h * v for x, v in zip(xs, vs)], coarse)[1]
    minus = _loss_grad(fn, [x - h * v for x, v in zip(xs, vs)], coarse)[1]
    for got, p, m in zip(hv, plus, minus):
        np.testing.assert_allclose(got, (p.numpy() - m.numpy()) / (2 * h), rtol=1e-5, atol=1e-7)


def _torch_hvp(torch, fn, xs, vs, coarse):
    tt = [torch.tensor(x, requires_grad=True) for x in xs]
    gs = torch.autograd.grad(_loss(_on_torch(torch, fn, *tt), coarse, torch), tt,
                             create_graph=True)
    hv = torch.autograd.grad(sum((g * torch.tensor(v)).sum() for g, v in zip(gs, vs)), tt,
                             allow_unused=True)
    return [np.zeros(np.shape(x)) if h is None else h.detach().numpy() for h, x in zip(hv, xs)]


@pytest.mark.parametrize("name,k", ALL_CASES)
def test_array_op_hessian_vector_product_matches_pytorch(name, k):
    torch = pytest.importorskip("torch")
    if name in INTERNAL:
        pytest.skip("internal op (an indexing adjoint): PyTorch has no function of that name")
    fn, xs, vs, coarse = _point(name, k)
    for got, want in zip(_hvp(fn, xs, vs, coarse), _torch_hvp(torch, fn, xs, vs, coarse)):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("x", [[2.0, 0.0, 3.0, -1.5], [0.0, 0.0, 1.5, 2.0], [1.5, 2.0, -1.0, 0.0]])
def test_cumprod_and_prod_with_zeros_match_pytorch(x):
    """With zeros in the input the rules avoid dividing: gradients and Hessian-vector
    products against PyTorch (and central differences without it)."""
    vs = [np.array([0.3, -1.2, 0.7, 2.0])]
    for fn in (lambda t: t.cumprod(0), lambda t: t.reshape(2, 2).cumprod(1),
               lambda t: t.prod(), lambda t: t.reshape(2, 2).prod(0)):
        ts, (g,) = _loss_grad(fn, [np.array(x)], False)
        hv = _hvp(fn, [np.array(x)], vs, False)
        h = 1e-5
        p = _loss_grad(fn, [np.array(x) + h * vs[0]], False)[1][0].numpy()
        m = _loss_grad(fn, [np.array(x) - h * vs[0]], False)[1][0].numpy()
        np.testing.assert_allclose(hv[0], (p - m) / (2 * h), rtol=1e-5, atol=1e-7)
        try:
            import torch
        except ImportError:
            continue
        xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
        (gt,) = torch.autograd.grad(torch.tanh(fn(xt)).sum(), xt)
        np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(hv[0], _torch_hvp(torch, fn, [np.array(x)], vs, False)[0],
                                   rtol=1e-9, atol=1e-12)


def test_unbind_parts_no_gradient_reaches_get_positive_zeros():
    # PyTorch's UnbindBackward0 stacks zeros for them (+0.); the walk's adjoints start at -0.
    for walk in ("float", "create_graph"):
        x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
        a, b, c = x.unbind()
        if walk == "float":
            (a * b).backward()
            g = x.grad
        else:
            g, = tg.autograd.grad(a * b, x, create_graph=True)
        assert g.tolist() == [2.0, 1.0, 0.0]
        assert not np.signbit(g.detach().numpy()).any()
