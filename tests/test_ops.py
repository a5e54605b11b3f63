"""Op-table-driven tests: every op's value and gradient, scalar and array.

Each op of ``tapegrad.core.optable.OPS`` needs one row in ``REFERENCE`` below (an independent
implementation of its value); ``test_every_op_has_a_row`` fails when a new op has none.
Gradients are checked against central finite differences in float64.
"""
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core.elementwise import FUNCTIONS
from tapegrad.core.optable import OPS

# op name -> reference value on Python floats (independent of the table's forward)
REFERENCE = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "pow": lambda x, y: x ** y,
    "atan2": math.atan2,
    "maximum": max,
    "minimum": min,
    "neg": lambda x: -x,
    "abs": abs,
    "reciprocal": lambda x: 1.0 / x,
    "clone": lambda x: x,
    "exp": math.exp,
    "log": math.log,
    "log1p": math.log1p,
    "expm1": math.expm1,
    "exp2": lambda x: 2.0 ** x,
    "sqrt": math.sqrt,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "sinh": math.sinh,
    "cosh": math.cosh,
    "tanh": math.tanh,
    "sigmoid": lambda x: 1.0 / (1.0 + math.exp(-x)),
    "relu": lambda x: max(x, 0.0),
    "erf": math.erf,
    "sign": lambda x: math.copysign(1.0, x) if x else 0.0,
    "sgn": lambda x: math.copysign(1.0, x) if x else 0.0,
    "round": lambda x: float(round(x)),
    "floor": lambda x: float(math.floor(x)),
    "ceil": lambda x: float(math.ceil(x)),
    "trunc": lambda x: float(math.trunc(x)),
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "clamp": lambda x, lo, hi: min(max(x, lo), hi),
    "clamp_min": max,
    "clamp_max": min,
    "clamp_no_max": lambda x, lo, hi: max(x, lo),
    "where": lambda c, x, y: x if c else y,
    # PyTorch's fused backward ops (internal rows, recorded by create_graph rules)
    "sigmoid_backward": lambda g, s: g * (1.0 - s) * s,
    "tanh_backward": lambda g, t: g * (1.0 - t * t),
    "threshold_backward": lambda g, x: 0.0 if x <= 0.0 else g,
    "leaky_relu_backward": lambda g, x, slope: g if x > 0.0 else g * slope,
    "elu_backward": lambda g, x, alpha: g * alpha * math.exp(x) if x <= 0.0 else g,
    "gelu_backward": lambda g, x: g * (0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
                                       + x * math.exp(-x * x / 2.0) / math.sqrt(2.0 * math.pi)),
    "softplus_backward": lambda g, bx, t: g if bx > t else g / (1.0 + math.exp(-bx)),
    "mse_loss_backward": lambda g, x, t: 2.0 * (x - t) * g,
    "binary_cross_entropy_backward": lambda g, x, t: g * (x - t) / max((1.0 - x) * x, 1e-12),
    "smooth_l1_backward": lambda g, d, beta: g * max(-1.0, min(1.0, d / beta)),
}

NAMES = [op.name for op in OPS]
RNG = np.random.default_rng(0)
H = 1e-6


def test_every_op_has_a_row():
    assert set(REFERENCE) == set(NAMES), "add a REFERENCE row for each new op (and remove stale ones)"


def _sample(op, rng, size=None):
    vals = []
    for k, (lo, hi) in enumerate(op.domain):
        if op.name == "where" and k == 0:
            vals.append(rng.random(size) < 0.5 if size else bool(rng.random() < 0.5))
        else:
            vals.append(rng.uniform(lo, hi, size) if size else float(rng.uniform(lo, hi)))
    return vals


def _diff_args(op):
    """Positions of the differentiable inputs tested (clamp bounds and where's condition are constants)."""
    if op.compare:
        return []
    if op.name == "clamp":
        return [0]
    if op.name == "where":
        return [1, 2]
    if op.backward_of:   # PyTorch's fused backward ops: a number parameter (elu's alpha) or
        # an input with a zero derivative (zeros_like) has partial 0.0
        return [k for k, f in enumerate((op.dx, op.dy, op.dz)[:op.arity]) if f != "0.0"]
    return list(range(op.arity))


def _call(op, args):
    return FUNCTIONS[op.name](*args)   # (the fused backward rows are not in tg's namespace)


@pytest.mark.parametrize("name", NAMES)
def test_scalar_value_and_gradient(name):
    op = OPS[NAMES.index(name)]
    for trial in range(5):
        vals = _sample(op, RNG)
        diff = _diff_args(op)
        args = [tg.tensor(v, requires_grad=True) if k in diff else v for k, v in enumerate(vals)]
        if op.name == "where":
            args[0] = tg.tensor(vals[0])
        y = _call(op, args)
        assert y.item() == pytest.approx(REFERENCE[name](*vals), rel=1e-12, abs=1e-12)
        if op.compare:   # a bool result that does not require grad
            assert y.dtype is tg.bool and not y.requires_grad
            continue
        y.backward()
        for k in diff:
            plus = list(vals); plus[k] += H
            minus = list(vals); minus[k] -= H
            fd = (REFERENCE[name](*plus) - REFERENCE[name](*minus)) / (2 * H)
            assert args[k].grad.item() == pytest.approx(fd, rel=1e-5, abs=1e-6), (name, k, vals)


@pytest.mark.parametrize("name", NAMES)
def test_array_value_and_vjp(name):
    """The same op on arrays: value elementwise, and a vector-Jacobian product."""
    op = OPS[NAMES.index(name)]
    vals = _sample(op, RNG, size=(2, 3))
    diff = _diff_args(op)
    args = [tg.tensor(v, requires_grad=True) if k in diff else
            (tg.tensor(v) if isinstance(v, np.ndarray) else v) for k, v in enumerate(vals)]
    y = _call(op, args)
    ref = np.vectorize(REFERENCE[name])(*vals)
    np.testing.assert_allclose(y.detach().numpy(), ref, rtol=1e-12, atol=1e-12)
    if op.compare:
        return
    w = RNG.normal(size=(2, 3))
    y.backward(tg.tensor(w))
    for k in diff:
        plus = list(vals); plus[k] = vals[k] + H
        minus = list(vals); minus[k] = vals[k] - H
        fd = (np.vectorize(REFERENCE[name])(*plus) - np.vectorize(REFERENCE[name])(*minus)) / (2 * H)
        np.testing.assert_allclose(args[k].grad.numpy(), w * fd, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", [op.name for op in OPS if op.method])
def test_method_form_matches_function_form(name):
    op = OPS[NAMES.index(name)]
    vals = _sample(op, RNG)
    t = tg.tensor(vals[0])
    assert getattr(t, name)(*vals[1:]).item() == _call(op, [t] + vals[1:]).item()


def test_node_names_come_from_the_table():
    for op in OPS:
        if op.compare:
            continue
        vals = _sample(op, RNG)
        diff = _diff_args(op)
        args = [tg.tensor(v, requires_grad=True) if k in diff else
                (tg.tensor(v) if op.name == "where" and k == 0 else v) for k, v in enumerate(vals)]
        if op.arity == 2:
            args[1] = tg.tensor(vals[1], requires_grad=True)
        assert _call(op, args).grad_fn.name() == op.node


# -- PyTorch's values at kinks and at the edges of domains ---------------------------

def _grad(fn, x):
    t = tg.tensor(x, requires_grad=True)
    fn(t).backward()
    return t.grad.item()


def test_kinks_match_pytorch():
    assert _grad(tg.relu, 0.0) == 0.0
    assert _grad(tg.abs, 0.0) == 0.0
    assert _grad(tg.sqrt, 0.0) == math.inf
    assert _grad(lambda t: t.clamp(-1.0, 1.0), -1.0) == 1.0
    assert _grad(lambda t: t.clamp(-1.0, 1.0), 1.0) == 1.0
    assert _grad(lambda t: t.clamp(-1.0, 1.0), 1.5) == 0.0
    assert _grad(lambda t: tg.maximum(t, tg.tensor(0.0)), 0.0) == 0.5
    assert _grad(lambda t: t ** 0.0, 0.0) == 0.0


def test_ieee_values_instead_of_python_errors():
    assert tg.log(tg.tensor(0.0)).item() == -math.inf
    assert math.isnan(tg.sqrt(tg.tensor(-1.0)).item())
    assert (tg.tensor(1.0) / 0.0).item() == math.inf
    assert tg.exp(tg.tensor(1000.0)).item() == math.inf
    assert math.isnan((tg.tensor(-8.0) ** (1.0 / 3.0)).item())
    assert tg.sigmoid(tg.tensor(-1000.0)).item() == 0.0


def test_python_numbers_on_either_side():
    x = tg.tensor(3.0, requires_grad=True)
    y = 2 - x + 2 * x - x / 4 + 1 / x + 2 ** x + x ** 2
    y.backward()
    expect = -1 + 2 - 0.25 - 1 / 9 + math.log(2) * 8 + 6
    assert x.grad.item() == pytest.approx(expect)


def test_equal_constants_share_a_slot_but_signed_zeros_do_not():
    with tg.Tape() as tape:
        x = tg.tensor(2.0, requires_grad=True)
        y = x * 100.0 + x * 100.0 + x * 100
        a = x * -0.0
        b = x * 0.0
    assert tape._c.count(100.0) == 1
    zeros = [c for c in tape._c[1:] if c == 0.0]   # both zeros kept, each with its sign
    assert sorted(math.copysign(1.0, c) for c in zeros) == [-1.0, 1.0]
    assert math.copysign(1.0, a.item()) == -1.0 and math.copysign(1.0, b.item()) == 1.0
    y.backward()
    assert x.grad.item() == 300.0


def _fd_hessian(f, x, h=1e-4):
    """Central second differences of a Python-float function (4 evaluations per entry)."""
    n = len(x)
    H = np.empty((n, n))
    for j in range(n):
        for k in range(n):
            def at(sj, sk):
                p = list(x)
                p[j] += sj * h
                p[k] += sk * h
                return f(p)
            H[j, k] = (at(1, 1) - at(1, -1) - at(-1, 1) + at(-1, -1)) / (4 * h * h)
    return H


@pytest.mark.parametrize("name", [n for n in NAMES if _diff_args(OPS[NAMES.index(n)])])
def test_second_order_replay(name):
    """Replayed Hessian, HVP, Jacobian and JVP of the op, alone and composed (so the
    tangent of its result flows on), against finite differences of the reference."""
    op = OPS[NAMES.index(name)]
    diff = _diff_args(op)
    rng = np.random.default_rng(7)
    for trial in range(3):
        vals = _sample(op, rng)
        if op.name == "where":
            vals[0] = bool(trial % 2)

        def full(xs):
            args = list(vals)
            for k, v in zip(diff, xs):
                args[k] = v
            return args

        for outer, ref_outer in ((lambda u: u, lambda u: u),
                                 (lambda u: tg.sin(u) + u * u, lambda u: math.sin(u) + u * u)):
            with tg.Tape() as tape:
                xs = [tg.tensor(vals[k], requires_grad=True) for k in diff]
                y = outer(_call(op, full(xs)))
            f = tape.compile(xs, y)
            x0 = np.array([vals[k] for k in diff])
            H = f.hessian(x0)
            want = _fd_hessian(lambda p: ref_outer(REFERENCE[name](*full(p))), list(x0))
            np.testing.assert_allclose(H, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} {vals}")
            r, c, hv = f.sparse_hessian(x0)        # the pattern from HESSIAN_PAIRS covers H
            Hs = np.zeros_like(H)
            Hs[r, c] = hv
            np.testing.assert_array_equal(Hs, H)
            v = rng.normal(size=len(diff))
            np.testing.assert_allclose(f.hvp(x0, v), H @ v, rtol=1e-12, atol=1e-12)
            g = f.grad(x0)
            np.testing.assert_allclose(f.jacobian(x0), g, rtol=1e-14, atol=0)
            assert f.jvp(x0, v) == pytest.approx(g @ v, rel=1e-12, abs=1e-12)
