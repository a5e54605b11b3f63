"""``tg.autograd.functional`` and ``gradcheck``: values against finite differences and
closed forms, structures (tuple nesting, shapes) and values against PyTorch when installed."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import functional as AF

RNG = np.random.default_rng(5)

# (name, function of a module m -> function of tensors, input shapes); m is tg or torch
FUNCS = [
    ("elementwise", lambda m: lambda x: x ** 2 * m.sin(x), [(3,)]),
    ("matrix", lambda m: lambda A, x: m.tanh(A @ x) * x.sum(), [(2, 3), (3,)]),
    ("two outputs", lambda m: lambda x, y: (x * y, m.exp(x).sum() + y[0]), [(2,), (2,)]),
    ("scalar in", lambda m: lambda s: m.stack([s * s, m.sin(s)]), [()]),
]
SCALAR = [
    ("cubic", lambda m: lambda x: (x ** 3).sum() + x[0] * x[1], [(3,)]),
    ("quadratic form", lambda m: lambda x, A: (x @ A @ x) * m.cos(x).sum(), [(3,), (3, 3)]),
    ("scalar", lambda m: lambda s: m.exp(s) * s, [()]),
]


def _inputs(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=s) for s in shapes]


def _tg(xs):
    return [tg.tensor(x) for x in xs]


def _np(t):
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t, dtype=np.float64)


def _fd_jacobian(f, xs, k, h=1e-6):
    """d f / d xs[k] by central differences, shape out.shape + xs[k].shape (one output)."""
    x = xs[k]
    cols = []
    for j in range(x.size):
        d = np.zeros(x.size)
        d[j] = h
        p = list(xs); p[k] = x + d.reshape(x.shape)
        m = list(xs); m[k] = x - d.reshape(x.shape)
        cols.append((f(p) - f(m)) / (2 * h))
    out = np.array(cols)   # (in numel, *out shape)
    return np.moveaxis(out.reshape(x.shape + out.shape[1:]), list(range(x.ndim)),
                       list(range(out.ndim - 1, out.ndim - 1 + x.ndim))) if x.ndim else out[0]


def _values(fn, xs):
    out = fn(*_tg(xs))
    return [np.asarray(o.numpy(), dtype=np.float64) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("name,make,shapes", FUNCS)
def test_jacobian_against_finite_differences(name, make, shapes):
    fn = make(tg)
    xs = _inputs(shapes, 0)
    for strategy in ("reverse-mode", "forward-mode"):
        J = AF.jacobian(fn, tuple(_tg(xs)), strategy=strategy)
        n_out = len(_values(fn, xs))
        for i in range(n_out):
            for k in range(len(xs)):
                want = _fd_jacobian(lambda p: _values(fn, p)[i], xs, k)
                got = J[i][k] if n_out > 1 else J[k]
                np.testing.assert_allclose(_np(got), want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name,make,shapes", FUNCS)
def test_vjp_and_jvp_are_products_with_the_jacobian(name, make, shapes):
    fn = make(tg)
    xs = _inputs(shapes, 1)
    J = AF.jacobian(fn, tuple(_tg(xs)))
    outs = _values(fn, xs)
    n_out = len(outs)
    J = J if n_out > 1 else (J,)
    v = [RNG.normal(size=x.shape) for x in xs]
    w = [RNG.normal(size=o.shape) for o in outs]
    out, jv = AF.jvp(fn, tuple(_tg(xs)), tuple(_tg(v)))
    jv = jv if n_out > 1 else (jv,)
    out2, vj = AF.vjp(fn, tuple(_tg(xs)), tuple(_tg(w)) if n_out > 1 else _tg(w)[0])
    for i in range(n_out):
        want = sum(np.tensordot(_np(J[i][k]), v[k], axes=v[k].ndim) for k in range(len(xs)))
        np.testing.assert_allclose(_np(jv[i]), want, rtol=1e-10, atol=1e-12)
    for k in range(len(xs)):
        want = sum(np.tensordot(w[i], _np(J[i][k]), axes=w[i].ndim) for i in range(n_out))
        np.testing.assert_allclose(_np(vj[k]), want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name,make,shapes", SCALAR)
def test_hessian_hvp_vhp_against_finite_differences(name, make, shapes):
    fn = make(tg)
    xs = _inputs(shapes, 2)
    H = AF.hessian(fn, tuple(_tg(xs)))

    def grad_k(p, k):
        ts = [tg.tensor(x, requires_grad=True) for x in p]
        return _np(tg.autograd.grad(fn(*ts), ts[k])[0])

    for k in range(len(xs)):
        for j in range(len(xs)):
            want = _fd_jacobian(lambda p: grad_k(p, k), xs, j)
            np.testing.assert_allclose(_np(H[k][j]), want, rtol=1e-6, atol=1e-7)
    v = [RNG.normal(size=x.shape) for x in xs]
    for f in (AF.hvp, AF.vhp):
        out, hv = f(fn, tuple(_tg(xs)), tuple(_tg(v)))
        assert _np(out) == pytest.approx(float(_values(fn, xs)[0]))
        for k in range(len(xs)):
            want = sum(np.tensordot(_np(H[k][j]), v[j], axes=v[j].ndim) for j in range(len(xs)))
            np.testing.assert_allclose(_np(hv[k]), want, rtol=1e-10, atol=1e-12)


def test_single_tensor_in_and_out_give_tensors_and_create_graph_stays_differentiable():
    x = tg.tensor([0.5, -1.0, 2.0], requires_grad=True)
    J = AF.jacobian(lambda t: t ** 3, x, create_graph=True)
    assert isinstance(J, tg.Tensor) and tuple(J.shape) == (3, 3) and J.requires_grad
    J.sum().backward()      # d/dx sum(diag(3 x^2)) = 6 x
    np.testing.assert_allclose(x.grad.numpy(), 6 * x.detach().numpy())
    H = AF.hessian(lambda t: (t ** 3).sum(), x)
    assert isinstance(H, tg.Tensor) and not H.requires_grad
    np.testing.assert_allclose(H.numpy(), np.diag(6 * x.detach().numpy()))
    out, g = AF.vjp(lambda t: (t * t).sum(), x)
    np.testing.assert_allclose(g.numpy(), 2 * x.detach().numpy())


def test_unused_inputs_give_zeros_and_bad_arguments_raise():
    a, b = tg.tensor([1.0, 2.0]), tg.tensor(3.0)
    J = AF.jacobian(lambda x, y: x * 2.0, (a, b))
    np.testing.assert_allclose(J[1].numpy(), np.zeros(2))
    H = AF.hessian(lambda x: x.sum() * 2.0, a)      # linear: a zero Hessian
    np.testing.assert_allclose(H.numpy(), np.zeros((2, 2)))
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        AF.jacobian(lambda x: x, [1.0])
    with pytest.raises(RuntimeError, match="v can only be None"):
        AF.vjp(lambda x: x * 2.0, a)
    with pytest.raises(RuntimeError, match="invalid size"):
        AF.jvp(lambda x: x * 2.0, a, tg.tensor([1.0, 2.0, 3.0]))
    with pytest.raises(RuntimeError, match="single element"):
        AF.hessian(lambda x: x * 2.0, a)


class _WrongSquare(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x          # wrong: should be 2 x g


class _Square(_WrongSquare):
    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 2.0 * x


def test_gradcheck_passes_right_and_catches_wrong_backwards():
    x = tg.tensor([0.3, -1.2, 2.0], requires_grad=True)
    y = tg.tensor(0.7, requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: tg.sin(a) * b + a @ a, (x, y))
    assert tg.autograd.gradcheck(_Square.apply, (x,))
    with pytest.raises(tg.autograd.GradcheckError, match="Jacobian mismatch for output 0 "
                                                         "with respect to input 0"):
        tg.autograd.gradcheck(_WrongSquare.apply, (x,))
    assert tg.autograd.gradcheck(_WrongSquare.apply, (x,), raise_exception=False) is False
    with pytest.raises(ValueError, match="requires_grad=True"):
        tg.autograd.gradcheck(lambda a: a, (tg.tensor([1.0]),))


@pytest.mark.parametrize("name,make,shapes", FUNCS + SCALAR)
def test_functional_matches_pytorch(name, make, shapes):
    torch = pytest.importorskip("torch")
    TF = torch.autograd.functional
    xs = _inputs(shapes, 3)
    ours, theirs = make(tg), make(torch)
    tt = tuple(torch.tensor(x) for x in xs)

    def same(a, b):
        if isinstance(b, tuple):
            assert isinstance(a, tuple) and len(a) == len(b)
            for p, q in zip(a, b):
                same(p, q)
        else:
            assert tuple(a.shape) == tuple(b.shape)
            np.testing.assert_allclose(_np(a), b.detach().numpy(), rtol=1e-10, atol=1e-12)

    same(AF.jacobian(ours, tuple(_tg(xs))), TF.jacobian(theirs, tt))
    if (name, make, shapes) in SCALAR:
        same(AF.hessian(ours, tuple(_tg(xs))), TF.hessian(theirs, tt))
        v = tuple(RNG.normal(size=s) for s in shapes)
        for a, b in ((AF.hvp, TF.hvp), (AF.vhp, TF.vhp)):
            same(a(ours, tuple(_tg(xs)), tuple(_tg(v))), b(theirs, tt, tuple(torch.tensor(t) for t in v)))


def test_hessian_with_constant_array_operands():
    b = tg.tensor([1.0, -2.0, 0.5])
    x = tg.tensor([0.3, 0.7, -1.1])
    H = AF.hessian(lambda t: (b * t).sum() + ((t - b) ** 3 / b).sum(), x)
    xv, bv = x.numpy(), b.numpy()
    np.testing.assert_allclose(H.numpy(), np.diag(6 * (xv - bv) / bv), rtol=1e-13)
