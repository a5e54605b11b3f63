"""Array code inside ``tg.compile`` is recorded as scalar entries (``tapegrad.scalarize``):
every array op with an elementwise form gives the same values, gradients and Hessians as the
tensor engine, and array results give Jacobians of their shape."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.replay.elementwise_rewrite import SCALAR_RULES
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
    # a value read into Python: every call records again (one warning), results stay right
    f = tg.compile(lambda x: (x * float(x[0])).sum())
    with pytest.warns(RuntimeWarning, match="read the value of a leaf"):
        assert f(np.ones(3)) == 3.0
    assert f(np.full(3, 2.0)) == 12.0 and f.eager is not None
    value, grad = f.value_and_grad(np.array([2.0, 1.0, 1.0]))
    assert value == 8.0 and grad.tolist() == [2.0, 2.0, 2.0]   # float(x[0]) is a constant
    with pytest.raises(NotImplementedError, match="max_dim has no elementwise form"):
        tg.compile(lambda x: x.reshape(1, 3).max(1).values.sum())(np.ones(3))


def test_branches_on_elements_are_guarded():
    f = tg.compile(lambda x: (x * x).sum() if (x[0] > 0) else x.sum())
    assert f(np.array([1.0, 2.0])) == 5.0
    assert f(np.array([-1.0, 2.0])) == 1.0 and f.retraces == 1


def _recorded(fn, shapes, xs):
    """Record sum(tanh(fn(...)) * w) with array leaves on an explicit tape."""
    with tg.Tape() as tape:
        ts = [tg.tensor(x, requires_grad=True) for x in xs]
        out = fn(*ts)
        w = np.random.default_rng(len(shapes)).normal(size=tuple(out.shape))
        y = (tg.tanh(out) * (tg.tensor(w) if out.ndim else 0.7)).sum()
    return tape, ts, y


@pytest.mark.parametrize("name,k", [(n, k) for n, cs in CASES.items() for k in range(len(cs))
                                    if n not in NO_FORM])
def test_tape_compile_of_tensor_code(name, k):
    """An explicit tape recorded with array tensors compiles (run again on elements) and
    replays as a fresh recording at new values."""
    fn, shapes = CASES[name][k][:2]
    rng = np.random.default_rng(k)
    tape, ts, y = _recorded(fn, shapes, [rng.normal(size=s) for s in shapes])
    f = tape.compile(ts, y)
    assert f.in_shapes == [tuple(s) for s in shapes]
    new = [rng.normal(size=s) for s in shapes]
    v, g = f.value_and_grad(new)
    _, ts2, y2 = _recorded(fn, shapes, new)
    y2.backward()
    assert v == pytest.approx(y2.item(), rel=1e-12, abs=1e-12)
    for got, t in zip(f.split(g), ts2):
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_tape_compile_of_an_mlp_loss_and_its_array_outputs():
    rng = np.random.default_rng(3)
    W0, b0, X = rng.normal(size=(3, 4)), rng.normal(size=3), rng.normal(size=(5, 4))
    with tg.Tape() as tape:
        W, b = tg.tensor(W0, requires_grad=True), tg.tensor(b0, requires_grad=True)
        h = tg.tanh(tg.tensor(X) @ W.t() + b)
        loss = (h ** 2).mean()
    f = tape.compile([W, b], loss)
    H = f.hessian([W0, b0])
    assert H.shape == (15, 15)
    hs = 1e-6
    p = np.concatenate([W0.ravel(), b0])
    fd = np.array([(f.grad(p + hs * e) - f.grad(p - hs * e)) / (2 * hs) for e in np.eye(15)])
    np.testing.assert_allclose(H, fd, rtol=1e-6, atol=1e-8)
    g = tape.compile([W, b], h)       # an array output
    J = g.jacobian([W0, b0])
    assert g([W0, b0]).shape == (5, 3) and J.shape == (5, 3, 15)


class _Square(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * x

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_tape_compile_refuses_what_it_cannot_run_again():
    with tg.Tape() as tape:
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        y = _Square.apply(x).sum()
    with pytest.raises(NotImplementedError, match="custom Function"):
        tape.compile([x], y)
    with tg.Tape() as tape:
        x = tg.tensor([1.0], requires_grad=True)      # a branch on a 1-element array
        y = (x * 2.0).sum() if x > 0 else x.sum()
    with pytest.raises(NotImplementedError, match="array comparison"):
        tape.compile([x], y)
    with tg.Tape() as tape:
        x = tg.tensor([1.0, -2.0], requires_grad=True)
        s = x.sum()
        y = s * s if s > 0 else -s
    f = tape.compile([x], y)          # recorded at sum = -1: the branch -s
    assert f([-3.0, 1.0]) == 2.0
    with pytest.raises(tg.RetraceRequired, match="goes the other way"):
        f([3.0, 1.0])


def test_where_with_constant_branches_follows_its_condition():
    for f in (tg.compile(lambda x: tg.where(x[0] > 0, 1.0, -1.0) * x[1]),
              tg.compile(lambda x: tg.where(x > 0, 1.0, -1.0)[:1].sum() * x[1])):
        assert f([1.0, 2.0]) == 2.0 and f([-1.0, 2.0]) == -2.0 and f.retraces == 0
    g = tg.compile(lambda x: (tg.where(x > 0, 1.0, -1.0) * x).sum())
    assert g([1.0, 2.0]) == 3.0 and g([-1.0, 2.0]) == 3.0 and g([-1.0, -2.0]) == 3.0
    np.testing.assert_array_equal(g.grad([-1.0, 2.0]), [-1.0, 1.0])


def test_a_comparison_used_as_a_number_is_not_replayed():
    for body, at_plus, at_minus in ((lambda x: ((x[0] > 0) * 2.0) * x[1], 4.0, 0.0),
                                    (lambda x: ((x > 0) * 2.0 * x).sum(), 6.0, 4.0)):
        f = tg.compile(body)
        with pytest.warns(RuntimeWarning, match="a comparison used as a number"):
            assert f([1.0, 2.0]) == at_plus
        assert f([-1.0, 2.0]) == at_minus      # recorded again at this point: right


def test_tape_compile_guards_comparisons_in_tensor_code():
    """A comparison of elements recorded with array tensors stays where's condition (the
    replay follows it), and one used as a number makes compile refuse."""
    x = tg.tensor([0.1, 0.5, 0.3, 0.2, 0.9], requires_grad=True)
    with tg.Tape() as tape:
        y = tg.where(x[1] > x[3], x[1], x[3])
    f = tape.compile([x], [y])
    for p in ([0.1, 0.5, 0.3, 0.2, 0.9], [0.1, 0.1, 0.3, 0.2, 0.9]):
        assert f(np.array(p)) == max(p[1], p[3])
    with tg.Tape() as tape:
        y = x[0] + (x[4] > 0.23)
    with pytest.raises(tg.RetraceRequired, match="a comparison used as a number"):
        tape.compile([x], [y])


def test_compile_of_a_function_of_a_number():
    f = tg.compile(lambda x: (x * x).sin())
    assert f(3.0) == pytest.approx(np.sin(9.0))
    value, grad = f.value_and_grad(3.0)
    assert grad == pytest.approx(6 * np.cos(9.0)) and np.ndim(grad) == 0
    assert f.grad(np.array([1.0, 2.0])) == pytest.approx(2 * np.array([1.0, 2.0]) * np.cos([1.0, 4.0]))
    assert f.hessian(1.0) == pytest.approx(2 * np.cos(1.0) - 4 * np.sin(1.0))


def test_vectorised_comparisons_guard_and_in_place_ops_record():
    k = tg.compile(lambda x: (x * x).sum() if (x > 0)[0] else x.sum())
    assert k([1.0, 2.0]) == 5.0 and k([-1.0, 2.0]) == 1.0 and k.retraces == 1

    def f(x):
        y = x.clone()
        y *= 2.0
        y[0] = y[1] * y[0]
        return y.sum()

    c = tg.compile(f)
    assert c([1.0, 3.0]) == 18.0 and c([2.0, 5.0]) == 50.0
    np.testing.assert_array_equal(c.grad([2.0, 5.0]), [20.0, 10.0])


def test_losses_and_activations_compile():
    """Every loss and activation row has an elementwise form: tg.compile replays it with
    the eager value and gradient."""
    import tapegrad.nn.functional as F
    from tapegrad.ops.array_ops import ARRAY_OPS as ROWS
    from tapegrad.replay.elementwise_rewrite import NN_RULES
    rng = np.random.default_rng(0)
    target = rng.uniform(0.1, 0.9, 6)
    cases = {
        "mse_loss": lambda x: F.mse_loss(x, tg.tensor(target)),
        "smooth_l1_loss": lambda x: F.smooth_l1_loss(x, tg.tensor(target), beta=0.3),
        "soft_margin_loss": lambda x: F.soft_margin_loss(x, tg.tensor(np.sign(target - 0.5))),
        "binary_cross_entropy": lambda x: F.binary_cross_entropy(x.sigmoid(), tg.tensor(target)),
        "binary_cross_entropy_with_logits": lambda x: F.binary_cross_entropy_with_logits(
            x, tg.tensor(target), pos_weight=tg.tensor(np.full(6, 2.0))),
        "cross_entropy": lambda x: F.cross_entropy(x.reshape(3, 2) @ tg.tensor(np.ones((2, 3))),
                                                   tg.tensor([0, 2, 1])),
        "nll_loss": lambda x: F.nll_loss(F.log_softmax(x.reshape(3, 2), 1), tg.tensor([0, 1, 1]),
                                         weight=tg.tensor([1.0, 3.0])),
        "gelu": lambda x: (F.gelu(x) + F.gelu(x, approximate="tanh")).sum(),
        "silu": lambda x: F.silu(x).sum(),
        "elu": lambda x: F.elu(x, alpha=0.7).sum(),
        "softplus": lambda x: F.softplus(x, beta=2.0).sum(),
        "leaky_relu": lambda x: F.leaky_relu(x, 0.2).sum(),
    }
    assert set(cases) == set(NN_RULES) and set(NN_RULES) <= set(ROWS)
    x0 = rng.normal(size=6)
    for name, fn in cases.items():
        x = tg.tensor(x0, requires_grad=True)
        y = fn(x)
        (g,) = tg.autograd.grad(y, x)
        value, grad = tg.compile(fn).value_and_grad(x0)
        assert value == pytest.approx(float(y), rel=1e-12), name
        assert np.allclose(grad, g.numpy(), rtol=1e-10, atol=1e-12), name


def test_a_boolean_mask_of_recorded_values_refuses_to_replay():
    """``x[x > 0]`` selects other elements at other points: compile refuses, naming why."""
    x = tg.tensor([[-1.0], [0.5], [2.0]], requires_grad=True)
    with tg.Tape() as tape:
        y = (x[x > 0.0] * 2).sum()
    with pytest.raises(tg.RetraceRequired, match="an index computed from recorded values"):
        tape.compile([x], [y])
    f = tg.compile(lambda z: (z[z > 0.0] * 2).sum())
    with pytest.warns(RuntimeWarning, match="an index computed from recorded values"):
        assert f(np.array([-1.0, 0.5, 2.0])) == 5.0
    assert f(np.array([1.0, 0.5, -2.0])) == 3.0      # recorded again at that point: right


@pytest.mark.parametrize("point", [[1.0, 0.0], [0.0, 0.0], [3.0, -0.0], [1e-300, 0.0], [1.0, 2.0]])
def test_norm_at_zero_replays_pytorchs_gradient(point):
    """Replayed ``norm`` masks sqrt at 0 (gradient 0, as PyTorch's; sqrt's own rule gave NaN:
    a silently wrong replay the fuzzer found) and is |x| for one element (x * x underflows)."""
    torch = pytest.importorskip("torch")

    def fn(lib, x):
        v = x[1:]
        return (v + v.norm()).sum() + x.norm() * x[0] + v.norm(dim=0)

    f = tg.compile(lambda x: fn(tg, x))
    t = torch.tensor(point, dtype=torch.float64, requires_grad=True)
    y = fn(torch, t)
    y.backward()
    for p in (np.array(point), np.array([2.0, 0.0])):   # (the second: a replay)
        f(p)
    value, grad = f.value_and_grad(np.array(point))
    np.testing.assert_allclose(value, y.item(), rtol=1e-15)
    np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-15)   # (NaN fails here)
    assert np.array_equal(np.signbit(grad), np.signbit(t.grad.numpy()))
