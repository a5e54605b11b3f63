"""Array code inside ``tg.compile`` is recorded as scalar entries (``tapegrad.scalarize``):
every array op with an elementwise form gives the same values, gradients and Hessians as the
tensor engine, and array results give Jacobians of their shape."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.scalarize import SCALAR_RULES
from test_array_ops import CASES

NO_FORM = {"max_dim", "min_dim", "unindex", "to_dtype"}   # see test_ops_without_a_form_say_so


def _pieces(x, shapes):
    """Split a flat input into tensors of the given shapes (works on any tensor)."""
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s, dtype=np.int64))
        p = x[at:at + n]
        out.append(p.reshape(s) if s != () else p[0] if n == 1 and hasattr(p, "_elems") else p.reshape(()))
        at += n
    return out


def _case_fn(fn, shapes):
    sizes = sum(int(np.prod(s, dtype=np.int64)) for s in shapes)

    def f(x):
        out = fn(*_pieces(x, shapes))
        w = np.random.default_rng(sizes).normal(size=tuple(out.shape))   # the same every call
        w = tg.tensor(w) if out.ndim else 0.7
        return (tg.tanh(out) * w).sum()

    return f, sizes


@pytest.mark.parametrize("name,k", [(n, k) for n, cs in CASES.items() for k in range(len(cs))
                                    if n not in NO_FORM])
def test_array_op_compiles_to_scalars(name, k):
    fn, shapes = CASES[name][k][:2]
    f, n = _case_fn(fn, shapes)
    rng = np.random.default_rng(k)
    x0 = rng.normal(size=n)
    c = tg.compile(f)
    for x in (x0, rng.normal(size=n)):     # the second point replays the first's recording
        v, g = c.value_and_grad(x)
        t = tg.tensor(x, requires_grad=True)
        ref = _case_fn(fn, shapes)[0](t)
        ref.backward()
        assert v == pytest.approx(ref.item(), rel=1e-12, abs=1e-12)
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-10, atol=1e-12)
    H = c.hessian(x)
    h = 1e-6
    fd = np.array([(c.grad(x + h * e) - c.grad(x - h * e)) / (2 * h) for e in np.eye(n)])
    np.testing.assert_allclose(H, fd, rtol=1e-5, atol=1e-5)


def test_every_rule_is_exercised():
    assert set(SCALAR_RULES) | NO_FORM >= set(CASES)


def rosen_vec(x):
    return (100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2).sum()


def rosen_loop(x):
    t = 0.0
    for i in range(len(x) - 1):
        t = t + 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
    return t


def test_vectorised_rosenbrock_replays_as_the_loop_does():
    f, g = tg.compile(rosen_vec), tg.compile(rosen_loop)
    rng = np.random.default_rng(0)
    for x in rng.uniform(-1.5, 1.5, (3, 40)):
        assert f(x) == pytest.approx(g(x), rel=1e-14)
        np.testing.assert_allclose(f.grad(x), g.grad(x), rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(f.hessian(x), g.hessian(x), rtol=1e-13, atol=1e-12)
    X = rng.uniform(-1.5, 1.5, (50, 40))
    np.testing.assert_allclose(f.grad(X), g.grad(X), rtol=1e-13, atol=1e-12)
    assert abs(len(f.tape_fn) - len(g.tape_fn)) <= 1


def test_array_results_give_jacobians_of_their_shape():
    A = np.random.default_rng(1).normal(size=(3, 4))
    f = tg.compile(lambda x: tg.tanh(A @ x).reshape(3, 1) * x[:2])     # (3, 2)
    x = np.linspace(-0.5, 0.7, 4)
    y = f(x)
    assert y.shape == (3, 2)
    J = f.jacobian(x)
    assert J.shape == (3, 2, 4)
    h = 1e-6
    fd = np.stack([(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(4)], axis=-1)
    np.testing.assert_allclose(J, fd, rtol=1e-7, atol=1e-9)
    v, w = np.arange(4.0), np.ones((3, 2))
    np.testing.assert_allclose(f.jvp(x, v), J @ v, rtol=1e-12)
    np.testing.assert_allclose(f.vjp(x, w), np.tensordot(w, J, 2), rtol=1e-12)
    assert f(np.stack([x, 2 * x])).shape == (2, 3, 2)
    with pytest.raises(ValueError, match="needs a scalar function"):
        f.grad(x)


def test_reading_values_and_ops_without_a_form_say_so():
    for body in (lambda x: tg.tensor(np.asarray(x)).sum(), lambda x: x.numpy().sum()):
        with pytest.raises(TypeError, match="read the values of its input"):
            tg.compile(body)(np.ones(3))
    with pytest.raises(tg.RetraceRequired, match="read the value of a leaf"):
        tg.compile(lambda x: (x * float(x[0])).sum())(np.ones(3))
    with pytest.raises(NotImplementedError, match="max_dim has no elementwise form"):
        tg.compile(lambda x: x.reshape(1, 3).max(1).values.sum())(np.ones(3))


def test_branches_on_elements_are_guarded():
    f = tg.compile(lambda x: (x * x).sum() if (x[0] > 0) else x.sum())
    assert f(np.array([1.0, 2.0])) == 5.0
    assert f(np.array([-1.0, 2.0])) == 1.0 and f.retraces == 1
