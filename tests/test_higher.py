"""create_graph=True: gradients recorded on the tape and differentiated again."""
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core.elementwise import FUNCTIONS
from tapegrad.core.optable import OPS


def test_third_order_of_cube():
    x = tg.tensor(2.0, requires_grad=True)
    (g1,) = tg.autograd.grad(x ** 3, [x], create_graph=True)
    (g2,) = tg.autograd.grad(g1, [x], create_graph=True)
    (g3,) = tg.autograd.grad(g2, [x])
    assert (g1.item(), g2.item(), g3.item()) == (12.0, 12.0, 6.0)
    assert g1.grad_fn is not None and g2.requires_grad


def _num_hessian(f, x, h=1e-4):
    n = len(x)
    H = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            def fx(di, dj):
                z = list(x)
                z[i] += di
                z[j] += dj
                return f(z)
            H[i, j] = (fx(h, h) - fx(h, -h) - fx(-h, h) + fx(-h, -h)) / (4 * h * h)
    return H


@pytest.mark.parametrize("name", [op.name for op in OPS if op.arity <= 2])
def test_second_derivatives_of_every_elementwise_op(name):
    """Mixed second derivatives through each op, against central differences."""
    op = OPS[[o.name for o in OPS].index(name)]
    rng = np.random.default_rng(3)
    x0 = [float(rng.uniform(lo, hi)) for lo, hi in op.domain]
    fn = FUNCTIONS[name]   # (the fused backward rows are not in tg's namespace)

    def f_tg(xs):
        y = fn(*xs) if op.arity == 2 else fn(xs[0])
        return y * xs[0] + (xs[0] * xs[-1]).sin() * y

    xs = [tg.tensor(v, requires_grad=True) for v in x0]
    y = f_tg(xs)
    grads = tg.autograd.grad(y, xs, create_graph=True)
    H = np.zeros((len(xs), len(xs)))
    for i, g in enumerate(grads):
        if g.requires_grad:
            row = tg.autograd.grad(g, xs, allow_unused=True, retain_graph=True)
            H[i] = [0.0 if r is None else r.item() for r in row]

    def f_float(z):
        with tg.no_grad():
            return f_tg([tg.tensor(v) for v in z]).item()

    np.testing.assert_allclose(H, _num_hessian(f_float, x0), rtol=1e-4, atol=1e-4)


def test_backward_create_graph_sets_a_differentiable_grad():
    x = tg.tensor(1.5, requires_grad=True)
    y = x.sin() * x
    y.backward(create_graph=True)
    g = x.grad
    assert g.grad_fn is not None
    assert g.item() == pytest.approx(math.cos(1.5) * 1.5 + math.sin(1.5))
    (h,) = tg.autograd.grad(g, [x])
    assert h.item() == pytest.approx(-math.sin(1.5) * 1.5 + 2 * math.cos(1.5))


def test_arrays_and_broadcast_scalars():
    v = tg.tensor([0.5, 1.0, 2.0], requires_grad=True)
    s = tg.tensor(0.7, requires_grad=True)
    y = (v * s).tanh() * v
    gv, gs = tg.autograd.grad(y, [v, s], grad_outputs=tg.ones(3), create_graph=True)
    (hs,) = tg.autograd.grad(gs, [s])
    vv = np.array([0.5, 1.0, 2.0])
    t = np.tanh(vv * 0.7)
    # d/ds sum(tanh(v s) v) = sum(v^2 (1 - t^2)); d2/ds2 = sum(v^3 * -2 t (1 - t^2))
    assert gs.item() == pytest.approx(np.sum(vv ** 2 * (1 - t ** 2)))
    assert hs.item() == pytest.approx(np.sum(vv ** 3 * -2 * t * (1 - t ** 2)))


def test_third_order_through_array_ops():
    """Every array-op rule is written in recorded ops, so orders compose: d^3/dx^3 of
    sum(softmax(x * c)[0] * cumprod(x)) against central differences of the second."""
    c = tg.tensor([1.0, -2.0, 0.5])

    def f(x):
        return ((x * c).softmax(0)[0] * x.cumprod(0)).sum() + x.prod() * x.norm()

    def second(xv, v):
        x = tg.tensor(xv, requires_grad=True)
        (g,) = tg.autograd.grad(f(x), x, create_graph=True)
        (h,) = tg.autograd.grad((g * tg.tensor(v)).sum(), x, create_graph=True)
        return x, h

    xv, v, u = np.array([0.3, -0.7, 1.1]), np.array([0.5, 1.0, -0.4]), np.array([1.0, 0.2, 0.3])
    x, h = second(xv, v)
    (third,) = tg.autograd.grad((h * tg.tensor(u)).sum(), x)
    step = 1e-5
    want = (second(xv + step * u, v)[1].detach().numpy()
            - second(xv - step * u, v)[1].detach().numpy()) / (2 * step)
    np.testing.assert_allclose(third.numpy(), want, rtol=1e-5, atol=1e-7)


def test_hessian_through_array_ops():
    """x^T A x + sum(x^3) + x0 x2 through matmul, sum, indexing and broadcasting."""
    xv = np.array([0.3, -0.5, 0.8])
    A = np.arange(9.0).reshape(3, 3) / 5
    x = tg.tensor(xv, requires_grad=True)
    y = x @ tg.tensor(A) @ x + (x ** 3).sum() + x[0] * x[2] + (x + tg.tensor([[1.0]])).sum()
    (g,) = tg.autograd.grad(y, x, create_graph=True)
    H = np.array([tg.autograd.grad(g[i], x, retain_graph=True)[0].numpy() for i in range(3)])
    want = A + A.T + np.diag(6 * xv)
    want[0, 2] += 1
    want[2, 0] += 1
    np.testing.assert_allclose(H, want, rtol=1e-14, atol=1e-14)


# create_graph rules that branch: their conditions are recorded comparisons (where's
# condition), so the tape of a gradient replays at points where the branches go another way
BRANCHING_RULES = {
    "maximum": lambda x: tg.maximum(x, x * 0.5) * x,
    "minimum": lambda x: tg.minimum(x.sin(), x * x) * x,
    "where": lambda x: tg.where(x > 0.5, x.sin(), x.cos()) * x,
    "clamp by numbers": lambda x: x.clamp(-0.5, 0.5) * x,
    "clamp by tensors": lambda x: tg.clamp(x * x, -x, x.cos()) * x,
    "relu": lambda x: tg.relu(x) * x,
    "atan2": lambda x: tg.atan2(x, x - 0.3) * x,
    "pow": lambda x: (x * x) ** (x - 0.2),
    "elu": lambda x: tg.nn.functional.elu(x) * x,
}
RECORDED_AT = [0.3, -0.7, 1.1]
FLIPPED = [[-0.3, 0.7, 0.2], [1.0, 0.6, -2.0], [0.55, -0.45, 0.0], [0.0, 0.3, 0.25]]


def _create_graph_gradient(f, xv):
    with tg.Tape() as tape:
        x = tg.tensor(xv, requires_grad=True)
        (g,) = tg.autograd.grad(f(x).sum(), x, create_graph=True)
    return tape, x, g


@pytest.mark.parametrize("name", list(BRANCHING_RULES))
def test_create_graph_tapes_through_branching_rules_replay_where_branches_flip(name):
    f = BRANCHING_RULES[name]
    tape, x, g = _create_graph_gradient(f, RECORDED_AT)
    assert not tape._reads
    v = tg.tensor([0.5, 1.0, -0.4])
    with tape:
        hv = (g * v).sum()   # its gradient is the Hessian times v: a replayed second derivative
    gradient, hessian_v = tape.compile([x], g), tape.compile([x], hv)
    for p in [RECORDED_AT] + FLIPPED:
        _, xp, gp = _create_graph_gradient(f, p)
        (want_hv,) = tg.autograd.grad((gp * v).sum(), xp)
        np.testing.assert_allclose(gradient(np.array(p)), gp.detach().numpy(),
                                   rtol=1e-13, atol=1e-15, equal_nan=True)
        np.testing.assert_allclose(hessian_v.jacobian(np.array(p)).reshape(-1),
                                   want_hv.numpy(), rtol=1e-12, atol=1e-14, equal_nan=True)


def test_a_create_graph_choice_between_constants_still_refuses_to_replay():
    with tg.Tape() as tape:
        x = tg.tensor([0.3, -0.7], requires_grad=True)
        (g,) = tg.autograd.grad(tg.where(x > 0, x, -x).sum(), x, create_graph=True)
        assert not g.requires_grad   # (as PyTorch's: the slope of |x| is piecewise constant)
        y = (g * x).sum()            # so the recording holds the signs as a constant
    with pytest.raises(tg.RetraceRequired, match="create_graph=True backward through where"):
        tape.compile([x], y)
    with tg.Tape() as tape:
        x = tg.tensor([0.3, -0.7], requires_grad=True)
        (g,) = tg.autograd.grad(x.prod(), x, create_graph=True)   # divides by x: no zeros here
    with pytest.raises(tg.RetraceRequired, match="create_graph=True backward through prod"):
        tape.compile([x], g)


