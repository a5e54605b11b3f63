"""``tg.jit`` on whole programs: random programs with branches and loops against eager
tapegrad, an adaptive DOPRI5 integrator against central differences, arrays of actives,
tuples, helpers, and the errors users see."""
from __future__ import annotations

import importlib.util
import math
import os

import numba
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.jit import clamp, sigmoid, value, zeros


# -- random programs -------------------------------------------------------------------------
UNARY = ["sin", "cos", "tanh", "exp_s", "sqrt_s", "abs", "sigmoid", "atan"]
BINARY = ["+", "-", "*", "/"]


def _program(rng, n_stmts=12):
    """Source of ``prog(p, c)`` over ``p`` (5 values) with names a function table provides:
    straight-line ops, if/else on comparisons, a loop with a value-dependent break."""
    lines = ["def prog(p, c):", "    v0 = p[0]", "    v1 = p[1]", "    v2 = p[2] * c",
             "    v3 = p[3]", "    v4 = p[4]"]
    n = 5

    def expr():
        a, b = rng.integers(0, n, 2)
        k = rng.integers(0, 4)
        if k == 0:
            return f"{UNARY[rng.integers(len(UNARY))]}(v{a})"
        if k == 1:
            op = BINARY[rng.integers(len(BINARY))]
            if op == "/":
                return f"v{a} / (1.5 + sin(v{b}))"
            return f"v{a} {op} v{b}"
        if k == 2:
            return f"{rng.uniform(-2, 2):.3f} * v{a} + {rng.integers(1, 4)}"
        return f"max(v{a}, v{b}, {rng.uniform(-1, 1):.3f})"

    for _ in range(n_stmts):
        kind = rng.integers(0, 4)
        if kind == 0:
            a, b = rng.integers(0, n, 2)
            lines += [f"    if v{a} > v{b}:", f"        v{n} = {expr()}", "    else:",
                      f"        v{n} = {expr()}"]
        elif kind == 1:
            a = rng.integers(0, n)
            lines += [f"    v{n} = v{a}", "    for i in range(4):",
                      f"        v{n} = 0.5 * v{n} + sin(v{n}) * {rng.uniform(-1, 1):.3f}",
                      f"        if v{n} > 1.2:", "            break"]
        else:
            lines.append(f"    v{n} = {expr()}")
        n += 1
    lines.append("    return " + " + ".join(f"tanh(v{k})" for k in range(n - 4, n)))
    return "\n".join(lines) + "\n"


HELPERS_JIT = """
import math
from tapegrad.jit import sigmoid
def sin(x): return math.sin(x)
"""


def _jit_namespace():
    return {"sin": math.sin, "cos": math.cos, "tanh": math.tanh, "atan": math.atan,
            "exp_s": lambda x: math.exp(x), "sqrt_s": None, "abs": abs, "sigmoid": sigmoid}


def _load(tmp_path, name, source, header):
    path = tmp_path / f"{name}.py"
    path.write_text(header + source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


JIT_HEADER = """import math
from tapegrad.jit import sigmoid
sin, cos, tanh, atan = math.sin, math.cos, math.tanh, math.atan
def exp_s(x):
    return math.exp(min(x, 5.0))
def sqrt_s(x):
    return math.sqrt(x * x + 0.1)
"""
EAGER_HEADER = """import tapegrad as tg
def _t(f):
    return lambda x: f(x if isinstance(x, tg.Tensor) else tg.tensor(float(x)))
sin, cos, tanh, atan, sigmoid = _t(tg.sin), _t(tg.cos), _t(tg.tanh), _t(tg.atan), _t(tg.sigmoid)
def exp_s(x):
    return tg.exp(tg.minimum(x, tg.tensor(5.0)))
def sqrt_s(x):
    return tg.sqrt(x * x + 0.1)
"""


@pytest.mark.parametrize("seed", range(4))
def test_random_program_against_eager(tmp_path, seed):
    rng = np.random.default_rng(seed)
    src = _program(rng)
    jm = _load(tmp_path, f"jit_prog_{seed}", src, JIT_HEADER)
    em = _load(tmp_path, f"eager_prog_{seed}", src, EAGER_HEADER)
    for name in ("exp_s", "sqrt_s"):
        setattr(jm, name, tg.jit(getattr(jm, name)))
    f = tg.jit(jm.prog)
    for _ in range(5):
        p = rng.uniform(-1.5, 1.5, 5)
        v, g = f.value_and_grad(p, 0.7)
        pt = [tg.tensor(float(x), requires_grad=True) for x in p]
        out = em.prog(pt, 0.7)
        ge = tg.autograd.grad(out, pt, allow_unused=True)
        ge = np.array([0.0 if q is None else float(q) for q in ge])
        assert v == pytest.approx(float(out), rel=1e-13, abs=1e-14), src
        np.testing.assert_allclose(g, ge, rtol=1e-11, atol=1e-13, err_msg=src)


# -- an adaptive ODE integrator: while on values, step control, tuples of state -----------
A21 = 1 / 5
A31, A32 = 3 / 40, 9 / 40
A41, A42, A43 = 44 / 45, -56 / 15, 32 / 9
A51, A52, A53, A54 = 19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729
A61, A62, A63, A64, A65 = 9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656
B1, B3, B4, B5, B6 = 35 / 384, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84
E1, E3, E4, E5, E6, E7 = 71 / 57600, -71 / 16695, 71 / 1920, -17253 / 339200, 22 / 525, -1 / 40


@tg.jit
def lv_rhs(p, x, y):
    return p[0] * x - p[1] * x * y, p[2] * x * y - p[3] * y


@tg.jit
def lotka_volterra(p, t_end, tol):
    """x(t_end) + y(t_end) of the Lotka-Volterra system, adaptive Dormand-Prince 5(4)."""
    t = 0.0
    x = 1.0
    y = 1.0
    h = 0.01
    k1x, k1y = lv_rhs(p, x, y)
    steps = 0
    while t < t_end:
        if t + h > t_end:
            h = t_end - t
        k2x, k2y = lv_rhs(p, x + h * A21 * k1x, y + h * A21 * k1y)
        k3x, k3y = lv_rhs(p, x + h * (A31 * k1x + A32 * k2x), y + h * (A31 * k1y + A32 * k2y))
        k4x, k4y = lv_rhs(p, x + h * (A41 * k1x + A42 * k2x + A43 * k3x),
                          y + h * (A41 * k1y + A42 * k2y + A43 * k3y))
        k5x, k5y = lv_rhs(p, x + h * (A51 * k1x + A52 * k2x + A53 * k3x + A54 * k4x),
                          y + h * (A51 * k1y + A52 * k2y + A53 * k3y + A54 * k4y))
        k6x, k6y = lv_rhs(p, x + h * (A61 * k1x + A62 * k2x + A63 * k3x + A64 * k4x + A65 * k5x),
                          y + h * (A61 * k1y + A62 * k2y + A63 * k3y + A64 * k4y + A65 * k5y))
        xn = x + h * (B1 * k1x + B3 * k3x + B4 * k4x + B5 * k5x + B6 * k6x)
        yn = y + h * (B1 * k1y + B3 * k3y + B4 * k4y + B5 * k5y + B6 * k6y)
        k7x, k7y = lv_rhs(p, xn, yn)
        ex = h * (E1 * k1x + E3 * k3x + E4 * k4x + E5 * k5x + E6 * k6x + E7 * k7x)
        ey = h * (E1 * k1y + E3 * k3y + E4 * k4y + E5 * k5y + E6 * k6y + E7 * k7y)
        err = math.sqrt(0.5 * ((ex / (tol + tol * abs(xn))) ** 2 + (ey / (tol + tol * abs(yn))) ** 2))
        if err <= 1.0:
            t = t + h
            x, y = xn, yn
            k1x, k1y = k7x, k7y
            steps += 1
        h = h * min(5.0, max(0.2, 0.9 * err ** -0.2))
    return x + y


def test_dopri5_against_central_differences():
    p = np.array([1.5, 1.0, 1.0, 3.0])
    v, g = lotka_volterra.value_and_grad(p, 10.0, 1e-10)
    for j in range(4):
        e = np.zeros(4)
        e[j] = 1e-6
        # the value at a nearby point takes other steps: differences match to ~tol
        fd = (lotka_volterra(p + e, 10.0, 1e-10) - lotka_volterra(p - e, 10.0, 1e-10)) / 2e-6
        assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-6)
    # value only: the same function on floats, nothing recorded
    assert lotka_volterra(p, 10.0, 1e-10) == pytest.approx(v, rel=1e-14)


# -- arrays of actives, tuples, helpers ----------------------------------------------------
@tg.jit
def _smooth(p):
    q = np.empty_like(p)             # an array that holds actives
    for i in range(len(p)):
        q[i] = math.sin(p[i]) + 0.5 * p[max(i - 1, 0)]
    r = zeros(len(p) - 1, p)
    for i in range(len(r)):
        r[i] = q[i + 1] - q[i]
    r[0] = 2.0                        # a number: a constant in the tape
    head = q[1:3]                     # a slice keeps the references
    s = 0.0
    for i in range(len(r)):
        s += r[i] * r[i]
    return s + head[0] * head[1] + q.shape[0]


def _smooth_eager(p):
    q = [tg.sin(p[i]) + 0.5 * p[max(i - 1, 0)] for i in range(len(p))]
    r = [q[i + 1] - q[i] for i in range(len(p) - 1)]
    r[0] = tg.tensor(2.0)
    s = 0.0
    for v in r:
        s = s + v * v
    return s + q[1] * q[2] + len(p)


def test_arrays_of_actives():
    p = np.linspace(-1.0, 1.3, 7)
    v, g = _smooth.value_and_grad(p)
    pt = [tg.tensor(float(x), requires_grad=True) for x in p]
    out = _smooth_eager(pt)
    ge = np.array([float(t) for t in tg.autograd.grad(out, pt)])
    assert v == pytest.approx(float(out), rel=1e-14)
    np.testing.assert_allclose(g, ge, rtol=1e-13)


@tg.jit
def _two_args(a, b, pair, scale):
    x, y = pair
    return scale * (a * b[0] + b[1] * x) + y * y


def test_tuple_arguments_and_argnums():
    b = np.array([2.0, 3.0])
    v, (ga, gb, gpair) = _two_args.value_and_grad(1.5, b, (0.5, -1.0), 2.0, argnums=(0, 1, 2))
    assert v == 2.0 * (1.5 * 2.0 + 3.0 * 0.5) + 1.0
    assert ga == 4.0
    np.testing.assert_array_equal(gb, [3.0, 1.0])
    assert gpair == (6.0, -2.0)
    assert _two_args.grad(1.5, b, (0.5, -1.0), 2.0, argnums=3) == 1.5 * 2.0 + 3.0 * 0.5
    # a 2-D argument
    @tg.jit
    def quad(m):
        s = 0.0
        for i in range(m.shape[0]):
            for j in range(m.shape[1]):
                s += (i + 1) * m[i, j] ** 2
        return s
    m = np.arange(6.0).reshape(2, 3)
    v, g = quad.value_and_grad(m)
    np.testing.assert_array_equal(g, 2 * m * np.array([[1.0], [2.0]]))


@numba.njit
def _numba_helper(x, k):
    return x * x + k


@tg.jit
def _uses_numba_helper(x):
    return _numba_helper(x, 1.0) * _numba_helper(x, 2)


def test_numba_helper_compiles_for_actives():
    v, g = _uses_numba_helper.value_and_grad(1.5)
    assert v == (1.5 ** 2 + 1) * (1.5 ** 2 + 2)
    assert g == pytest.approx(2 * 1.5 * (1.5 ** 2 + 2) + 2 * 1.5 * (1.5 ** 2 + 1))


def _plain_helper(x):
    return x * 2.0


@tg.jit
def _uses_plain_helper(x):
    return _plain_helper(x) + 1.0


@tg.jit
def _calls_float(x):
    return math.sin(float(x))


@tg.jit
def _uses_unsupported(x):
    return math.gamma(x)      # no row of the op table


@tg.jit
def _into_float_array(p, w):
    q = np.empty_like(p)          # p is not active here: q holds floats
    q[0] = w * p[0]
    return q[0]


@tg.jit
def _detaches(x):
    return x * value(x)


def test_errors_users_can_act_on():
    with pytest.raises(tg.jit.__class__ and Exception) as e:
        _uses_plain_helper.value_and_grad(1.0)
    msg = str(e.value)
    assert "_plain_helper" in msg and "@tg.jit" in msg and "test_jit_programs.py:" in msg
    assert len(msg) < 400
    with pytest.raises(TypeError) as e:
        _calls_float.value_and_grad(1.0)
    assert "value" in str(e.value) and "test_jit_programs.py:" in str(e.value)
    with pytest.raises(TypeError) as e:
        _uses_unsupported.value_and_grad(1.0)
    assert "test_jit_programs.py:" in str(e.value) and len(str(e.value)) < 400
    with pytest.raises(TypeError) as e:
        _into_float_array.value_and_grad(np.ones(2), 2.0, argnums=1)
    assert "tg.jit.zeros" in str(e.value) and "test_jit_programs.py:" in str(e.value)
    # value(x) detaches: d/dx x * value(x) = value(x)
    assert _detaches.value_and_grad(3.0) == (9.0, 3.0)


@tg.jit
def _nan_path(x):
    return 0.0 * math.sqrt(x) + x


def test_nan_and_inf_flow_as_in_the_eager_engine():
    v, g = _nan_path.value_and_grad(0.0)
    t = tg.tensor(0.0, requires_grad=True)
    out = 0.0 * tg.sqrt(t) + t
    out.backward()
    assert v == float(out)
    assert (math.isnan(g) and math.isnan(float(t.grad))) or g == float(t.grad)
    one_over = tg.jit(lambda x: 1.0 / x)
    assert one_over.value_and_grad(0.0)[0] == math.inf


@tg.jit
def _zero_partial_path(x):
    return np.sign(math.sqrt(x)) + x


def test_a_piecewise_constant_still_reaches_its_operand():
    # sign's gradient is 0; times sqrt'(0) = inf that is nan, in the eager engine as here
    v, g = _zero_partial_path.value_and_grad(0.0)
    t = tg.tensor(0.0, requires_grad=True)
    (tg.sign(tg.sqrt(t)) + t).backward()
    assert math.isnan(float(t.grad)) == math.isnan(g)


@tg.jit
def _iterates(p, m):
    s = 0.0
    for v in p:
        s += v * v
    for row in m:
        for v in row:
            s += math.sin(v)
    return s + p[0] % 0.7 + p[1] // 0.3


def test_iteration_floordiv_and_mod():
    p = np.array([1.0, 2.0, 3.0])
    m = np.arange(6.0).reshape(2, 3) / 5
    v, (gp, gm) = _iterates.value_and_grad(p, m, argnums=(0, 1))
    assert v == pytest.approx(14.0 + np.sin(m).sum() + 1.0 % 0.7 + 2.0 // 0.3, rel=1e-14)
    np.testing.assert_allclose(gp, [3.0, 4.0, 6.0])
    np.testing.assert_allclose(gm, np.cos(m), rtol=1e-14)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_fork_while_another_thread_holds_a_slot():
    import threading
    import time
    started, release = threading.Event(), threading.Event()

    def hold():
        with tg.jit.api._Slot():
            started.set()
            release.wait(10)
    t = threading.Thread(target=hold)
    t.start()
    started.wait(10)
    try:
        pid = os.fork()
        if pid == 0:   # the child: slots the parent's threads held are free here
            try:
                ok = _detaches.value_and_grad(3.0) == (9.0, 3.0)
            finally:
                os._exit(0 if ok else 1)
        deadline = time.time() + 60
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done or time.time() > deadline:
                break
            time.sleep(0.05)
        assert done and os.waitstatus_to_exitcode(status) == 0
    finally:
        release.set()
        t.join()


@tg.jit
def _rosen_vectorised(x):
    return np.sum(100.0 * (x[1:] - x[:-1] ** 2) ** 2 + (1.0 - x[:-1]) ** 2)


@tg.jit
def _array_arithmetic(x, w):
    y = np.sin(x) * w + 2.0
    y += x
    y = np.maximum(y, 0.5) - abs(x) / (1.0 + x * x)
    return np.dot(y, x) + y.sum() + np.sum(-x)


def test_whole_array_arithmetic():
    x = np.linspace(-1.0, 1.3, 7)
    v, g = _rosen_vectorised.value_and_grad(x)
    xt = tg.tensor(x, requires_grad=True)
    ref = (100.0 * (xt[1:] - xt[:-1] ** 2) ** 2 + (1.0 - xt[:-1]) ** 2).sum()
    ref.backward()
    assert v == pytest.approx(float(ref.detach()), rel=1e-14)
    np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-13)
    v, (gx, gw) = _array_arithmetic.value_and_grad(x, 0.7, argnums=(0, 1))
    for j in range(len(x)):
        e = np.zeros(len(x))
        e[j] = 1e-6
        fd = (_array_arithmetic.value_and_grad(x + e, 0.7)[0]
              - _array_arithmetic.value_and_grad(x - e, 0.7)[0]) / 2e-6
        assert gx[j] == pytest.approx(fd, rel=1e-6, abs=1e-8)
    fd = (_array_arithmetic.value_and_grad(x, 0.7 + 1e-6)[0]
          - _array_arithmetic.value_and_grad(x, 0.7 - 1e-6)[0]) / 2e-6
    assert gw == pytest.approx(fd, rel=1e-6)
