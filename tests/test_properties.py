"""Property tests: random scalar programs (fan-out, reuse, constants) built by hypothesis,
differentiated by tapegrad and by central finite differences."""
import math

from hypothesis import given, settings, strategies as st

import tapegrad as tg

UNARY = ["sin", "cos", "tanh", "sigmoid", "exp_small", "softsq", "neg", "atan"]
BINARY = ["add", "sub", "mul", "div_safe", "maximum_smooth", "pow_const"]


def _unary(name, v, lib):
    if name == "exp_small":
        return lib.exp(v * 0.1) if lib is tg else math.exp(v * 0.1)
    if name == "softsq":
        return lib.sqrt(v * v + 1.0) if lib is tg else math.sqrt(v * v + 1.0)
    if name == "neg":
        return -v
    return getattr(lib, name)(v) if lib is tg else getattr(math, name)(v) if name != "sigmoid" \
        else 1.0 / (1.0 + math.exp(-v))


def _binary(name, u, v, c):
    if name == "add":
        return u + v
    if name == "sub":
        return u - v
    if name == "mul":
        return u * v
    if name == "div_safe":
        return u / (v * v + 1.0)
    if name == "maximum_smooth":  # u + c: a constant on the right
        return u + c * v
    if name == "pow_const":
        return (u * u + 1.0) ** (c / 3.0)
    raise AssertionError(name)


program = st.lists(
    st.tuples(st.sampled_from(UNARY + BINARY), st.integers(0, 1000), st.integers(0, 1000),
              st.floats(-2.0, 2.0)),
    min_size=1, max_size=25)


def _run(prog, inputs, lib):
    vals = list(inputs)
    for name, i, j, c in prog:
        u, v = vals[i % len(vals)], vals[j % len(vals)]
        if name in UNARY:
            vals.append(_unary(name, u, tg if lib == "tg" else math))
        else:
            vals.append(_binary(name, u, v, c))
    out = vals[-1]
    for w in vals[len(inputs):-1:3]:  # fan-out: reuse intermediate values in the output
        out = out + 0.5 * w
    return out


@settings(max_examples=150, deadline=None)
@given(program, st.lists(st.floats(-1.5, 1.5), min_size=1, max_size=4))
def test_random_programs_match_finite_differences(prog, x0):
    xs = [tg.tensor(v, requires_grad=True) for v in x0]
    with tg.Tape():
        y = _run(prog, xs, "tg")
    if not isinstance(y, tg.Tensor) or not y.requires_grad:
        return
    assert math.isclose(y.item(), _run(prog, x0, "math"), rel_tol=1e-12, abs_tol=1e-12)
    y.backward()
    h = 1e-6
    for k, x in enumerate(xs):
        plus = list(x0); plus[k] += h
        minus = list(x0); minus[k] -= h
        fd = (_run(prog, plus, "math") - _run(prog, minus, "math")) / (2 * h)
        g = 0.0 if x.grad is None else x.grad.item()
        assert math.isclose(g, fd, rel_tol=1e-4, abs_tol=1e-5), (k, g, fd)


@settings(max_examples=50, deadline=None)
@given(program, st.lists(st.floats(-1.5, 1.5), min_size=1, max_size=4))
def test_default_tape_and_explicit_tape_agree(prog, x0):
    a = [tg.tensor(v, requires_grad=True) for v in x0]
    b = [tg.tensor(v, requires_grad=True) for v in x0]
    ya = _run(prog, a, "tg")
    with tg.Tape():
        yb = _run(prog, b, "tg")
    if not isinstance(ya, tg.Tensor) or not ya.requires_grad:
        return
    ya.backward()
    yb.backward()
    for p, q in zip(a, b):
        assert (p.grad is None) == (q.grad is None)
        if p.grad is not None:
            assert p.grad.item() == q.grad.item()
