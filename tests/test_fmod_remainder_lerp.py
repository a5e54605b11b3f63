"""``fmod``, ``remainder`` (``%``) and ``lerp`` on tensors with history are ops of their own,
as in PyTorch, not compositions (``x - trunc(x / y) * y`` rounded ``trunc(x / y) * y``:
``fmod(1e20, 3)`` gave 0 where it is 1, and lost the sign of a zero; ``x + w (end - x)`` is
not PyTorch's rounding for |w| >= 0.5): PyTorch's values bit for bit, nodes, gradients (the
divisor's through PyTorch's rounded quotients), second derivatives, and float64 finite
differences.  torch 2.13; the PyTorch comparisons skip without it."""
import numpy as np
import pytest

import tapegrad as tg

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

X = np.array([1e20, 7.5, -0.0, 5e15 + 1.0, 0.3, -7.5, 7.5, -0.0, 0.0, 2.5, -1e-300, 3.0])
Y = np.array([3.0, 2.0, 2.0, 0.7, 0.1, 2.0, -2.0, -2.0, -3.0, 2.5, 5.0, np.inf])

# name -> function of (x, y, lib): the op on tensors that require grad
PROGRAMS = {
    "fmod(x, y)": lambda x, y, L: L.fmod(x, y),
    "remainder(x, y)": lambda x, y, L: L.remainder(x, y),
    "x % y": lambda x, y, L: x % y,
    "x % 2.5": lambda x, y, L: x % 2.5,
    "x.fmod(-1.5)": lambda x, y, L: x.fmod(-1.5),
    "x.remainder(0-d y)": lambda x, y, L: x.remainder(y[1]),
    "fmod(x as (12, 1), y)": lambda x, y, L: L.fmod(x.reshape(12, 1), y),
    "(x * 3) % (y + 1)": lambda x, y, L: (x * 3.0) % (y + 1.0),
    "(x * y) % 2.5": lambda x, y, L: (x * y) % 2.5,
    "(x * 1).fmod_(y)": lambda x, y, L: (x * 1.0).fmod_(y),
    "(x * 1).remainder_(-2.5)": lambda x, y, L: (x * 1.0).remainder_(-2.5),
}


def _bits(a):
    a = np.asarray(a, dtype=np.float64)
    return np.where(np.isnan(a), np.nan, a).tobytes()


def _run(lib, name, create_graph=False):
    x = lib.tensor(X.copy(), requires_grad=True)
    y = lib.tensor(Y.copy(), requires_grad=True)
    out = PROGRAMS[name](x, y, lib)
    node = type(out.grad_fn).__name__ if lib is torch else out.grad_fn.name()
    g = lib.tensor(np.linspace(-1.0, 2.0, out.numel()).reshape(tuple(out.shape)))
    gx, gy = lib.autograd.grad(out, (x, y), g, create_graph=create_graph, allow_unused=True)
    second = None
    if create_graph:   # (the remainders' own derivatives are constants: a graph only through
        # the ops around them)
        second = (gx.requires_grad, gy is not None and gy.requires_grad)
        if gx.requires_grad:
            (d,) = lib.autograd.grad((gx * gx).sum(), (y,), allow_unused=True)
            second += (None if d is None else d.detach().numpy().tolist(),)
    return (out.detach().numpy(), node, None if gx is None else gx.detach().numpy(),
            None if gy is None else gy.detach().numpy(), second)


@needs_torch
@pytest.mark.parametrize("name", PROGRAMS)
def test_values_nodes_and_gradients_as_pytorch(name):
    torch.set_default_dtype(torch.float64)
    try:
        mine, theirs = _run(tg, name), _run(torch, name)
    finally:
        torch.set_default_dtype(torch.float32)
    assert mine[1] == theirs[1]
    assert _bits(mine[0]) == _bits(theirs[0])   # (signed zeros included)
    for a, b in zip(mine[2:4], theirs[2:4]):
        assert (a is None) == (b is None)
        if a is None:
            continue
        if "(12, 1)" in name:   # (gradients summed over a broadcast: the order of the sum
            np.testing.assert_allclose(a, b, rtol=1e-14, atol=0.0)   # is the libraries' own)
        else:
            assert _bits(a) == _bits(b)


@needs_torch
@pytest.mark.parametrize("name", ["fmod(x, y)", "remainder(x, y)", "(x * y) % 2.5"])
def test_second_derivatives_as_pytorch(name):
    torch.set_default_dtype(torch.float64)
    try:
        mine, theirs = _run(tg, name, True), _run(torch, name, True)
    finally:
        torch.set_default_dtype(torch.float32)
    assert mine[4] == theirs[4]


@pytest.mark.parametrize("op", ["fmod", "remainder"])
def test_gradients_match_finite_differences(op):
    # (away from the jumps: the quotient is constant near every point)
    x = tg.tensor([0.3, 2.7, -1.9, 5.2], requires_grad=True)
    y = tg.tensor([0.7, -1.1, 0.9, 1.7], requires_grad=True)
    assert tg.autograd.gradcheck(getattr(tg, op), (x, y))
    assert tg.autograd.gradgradcheck(getattr(tg, op), (x, y))


def test_the_old_composition_was_wrong_here():
    x = tg.tensor([1e20, 5e15 + 1.0], requires_grad=True)
    np.testing.assert_array_equal(tg.fmod(x, tg.tensor([3.0, 0.7])).detach().numpy(),
                                  np.fmod([1e20, 5e15 + 1.0], [3.0, 0.7]))


@needs_torch
@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_rounded_division_as_pytorch(mode):
    # (PyTorch's floor is the fmod-based floor division: (5e15 + 1) // 0.7 is ...143, where
    # floor(x / y) gives ...145)
    got = []
    for lib in (tg, torch):
        x = lib.tensor(X.copy(), requires_grad=True)
        q = lib.div(x, lib.tensor(Y.copy()), rounding_mode=mode)
        got.append((_bits(q.detach().numpy()), q.requires_grad))
    assert got[0] == got[1]


LERPS = {
    "lerp(x, e, 0.5)": lambda x, e, w, L: L.lerp(x, e, 0.5),
    "x.lerp(e, 0.3)": lambda x, e, w, L: x.lerp(e, 0.3),
    "x.lerp(e, 0.7)": lambda x, e, w, L: x.lerp(e, 0.7),
    "x.lerp(e, -0.2)": lambda x, e, w, L: x.lerp(e, -0.2),
    "x.lerp(e, 1.5)": lambda x, e, w, L: x.lerp(e, 1.5),
    "lerp(x, e, w)": lambda x, e, w, L: L.lerp(x, e, w),
    "lerp(x, e[0], w)": lambda x, e, w, L: L.lerp(x, e[0], w),
}
LX = np.array([-0.0, 1.0, 3.0, 1e16, 0.1, -2.5])
LE = np.array([-0.0, 2.0, -1.0, 1.0, 0.7, 2.5])
LW = np.array([0.5, 0.3, 0.9, 0.7, -0.6, 0.49])


@needs_torch
@pytest.mark.parametrize("name", LERPS)
def test_lerp_as_pytorch(name):
    got = []
    for lib in (tg, torch):
        x, e, w = (lib.tensor(v.copy(), requires_grad=True) for v in (LX, LE, LW))
        out = LERPS[name](x, e, w, lib)
        node = type(out.grad_fn).__name__ if lib is torch else out.grad_fn.name()
        out.backward(lib.tensor(np.linspace(-1.0, 2.0, out.numel())))
        got.append((_bits(out.detach().numpy()), node) + tuple(
            None if t.grad is None else _bits(t.grad.numpy()) for t in (x, e, w)))
    assert got[0] == got[1]


def test_lerp_matches_finite_differences():
    x, e, w = (tg.tensor(v[[1, 2, 4, 5]], requires_grad=True) for v in (LX, LE, LW))
    assert tg.autograd.gradcheck(tg.lerp, (x, e, w))
    assert tg.autograd.gradgradcheck(tg.lerp, (x, e, w))
