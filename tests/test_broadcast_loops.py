"""``core.broadcast_loops``: ``(n, 1, d) <op> (1, K, d)`` (either first), and operands that
broadcast as a matrix with a row or a column, or a column with a row, computed by Numba
loops instead of NumPy's broadcasting loop: NumPy's values bit for bit (inf, NaN, signed
zeros included), PyTorch's values and strides, the same gradients, and NumPy for every
other shape."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import broadcast_loops as loops, optable

try:
    import torch
except ImportError:
    torch = None

CODES = {op.name: k for k, op in enumerate(optable.OPS)}
NUMPY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide}
SHAPES = [(2, 2, 1), (100, 5, 2), (7, 3, 4), (300, 10, 8)]


def _same_bits(got, want):
    nan = np.isnan(want)   # (a NaN's payload is left to the machine)
    return np.array_equal(np.isnan(got), nan) and np.array_equal(
        got[~nan].view(np.int64), want[~nan].view(np.int64))


@pytest.mark.parametrize("x_shape, y_shape", [
    ((3, 1, 2), (1, 4, 3)),    # last dims differ
    ((1, 1, 2), (1, 4, 2)),    # n = 1
    ((3, 1, 2), (1, 1, 2)),    # K = 1
    ((3, 2, 2), (1, 2, 2)),    # not an outer product
    ((3, 1), (1, 4)),          # too few elements for the two-dim loops
    ((40, 1, 200), (1, 3, 1)), # three merged dims, not the outer rows
    ((8, 600), (9, 600)),      # not broadcast
])
def test_other_shapes_are_numpys(x_shape, y_shape):
    assert loops.broadcast_arith(CODES["sub"], np.zeros(x_shape), np.zeros(y_shape)) is None


def test_other_ops_dtypes_and_layouts_are_numpys():
    x, y = np.ones((3, 1, 2)), np.ones((1, 4, 2))
    assert loops.broadcast_arith(CODES["pow"], x, y) is None
    assert loops.broadcast_arith(CODES["sub"], x.astype(np.float32), y) is None
    assert loops.broadcast_arith(CODES["sub"], np.ones((2, 1, 3))[:, :, ::2], y) is None


@pytest.mark.parametrize("name", list(NUMPY))
def test_tensors_take_it_with_pytorchs_values_and_gradients(name, monkeypatch):
    taken = []
    real = loops.broadcast_arith

    def counted(*args):
        v = real(*args)
        taken.append(v is not None)
        return v
    monkeypatch.setattr("tapegrad.core.tensor.broadcast_arith", counted)
    rng = np.random.default_rng(3)
    xs, ms = rng.standard_normal((50, 3)), rng.uniform(0.5, 1.5, (4, 3))

    def program(m, x, mu):
        op = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b,
              "mul": lambda a, b: a * b, "div": lambda a, b: a / b}[name]
        return op(x[:, None, :], mu[None, :, :]), op(mu[None, :, :], x[:, None, :])

    x, mu = tg.tensor(xs), tg.tensor(ms, requires_grad=True)
    outs = program(tg, x, mu)
    assert taken == [True, True]
    (g,) = tg.autograd.grad((outs[0] * outs[1]).sin().sum(), mu)
    if torch is not None:
        tx, tmu = torch.tensor(xs), torch.tensor(ms, requires_grad=True)
        touts = program(torch, tx, tmu)
        for o, t in zip(outs, touts):
            np.testing.assert_array_equal(o.detach().numpy(), t.detach().numpy())
            assert tuple(s // 8 for s in o.detach().numpy().strides) == tuple(t.stride())
        (tgrad,) = torch.autograd.grad((touts[0] * touts[1]).sin().sum(), tmu)
        np.testing.assert_allclose(g.numpy(), tgrad.numpy(), rtol=1e-12, atol=1e-13)


# (x shape, y shape): the outer rows, then a matrix with a row or a column, a column by a
# row, after dims of size 1 are dropped and neighbours merged; both orders are run
PAIRS = [((n, 1, d), (1, k, d)) for n, k, d in SHAPES] + [
    ((1000, 5), (5,)), ((1000, 5), (1000, 1)), ((10, 1), (1, 1000)), ((20, 1, 300), (300,)),
    ((4, 300, 1, 5), (4, 300, 1, 1)), ((2, 3, 700), (1, 1, 700)), ((64, 1), (1, 128)),
    ((1, 1, 5000), (1, 1))]


def _pair(x_shape, y_shape, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(x_shape), rng.standard_normal(y_shape)
    x.flat[0], y.flat[0], x.flat[1], y.flat[-1] = 0.0, -0.0, np.inf, np.nan
    y.flat[len(y.flat) // 2] = 0.0
    return x, y


@pytest.mark.parametrize("shapes", PAIRS)
@pytest.mark.parametrize("name", list(NUMPY))
def test_numpys_values_bit_for_bit(name, shapes):
    x, y = _pair(*shapes, seed=len(name))
    outer_rows = len(shapes[0]) == len(shapes[1]) == 3 and shapes[0][1] == 1
    with np.errstate(all="ignore"):
        for a, b in ((x, y), (y, x)):
            got = loops.broadcast_arith(CODES[name], a, b)
            want = NUMPY[name](a, b)
            if got is None:
                # (a division along short rows, and a 1-element operand, stay NumPy's; the
                # outer rows always run here)
                assert not outer_rows
                assert (name == "div" and want.shape[-1] < 64) or min(a.size, b.size) == 1
                continue
            assert got.shape == want.shape and got.flags.c_contiguous
            assert _same_bits(got, want)


def test_two_dim_broadcasts_are_taken():
    x, y = np.ones((1000, 5)), np.ones(5)
    for name in ("add", "sub", "mul"):
        assert loops.broadcast_arith(CODES[name], x, y) is not None
        assert loops.broadcast_arith(CODES[name], y, x) is not None
    assert loops.broadcast_arith(CODES["div"], np.ones((10, 1)), np.ones((1, 1000))) is not None


def test_broadcast_copy_is_numpys_copy_of_the_broadcast():
    """``broadcast_copy`` (a gradient written out over its operand's shape: the Numba loop
    where a dim repeats inside the array, NumPy elsewhere) gives NumPy's broadcast copied,
    C-ordered, for arrays, their broadcast views, other layouts and numbers; NumPy's
    error where they do not broadcast."""
    from tapegrad.core.broadcast_loops import broadcast_copy, _merged_dims
    rng = np.random.default_rng(3)
    looped = 0
    for _ in range(5000):
        nd = int(rng.integers(1, 5))
        shape = tuple(int(rng.integers(1, 7)) * (int(rng.integers(1, 16)) if rng.random() < 0.4
                                                 else 1) for _ in range(nd))
        gshape = tuple(1 if rng.random() < 0.4 else n for n in shape)[int(rng.integers(0, nd)):]
        g = rng.standard_normal(gshape)
        if rng.random() < 0.2 and g.ndim > 1:
            g = np.asfortranarray(g)
        expected = np.array(np.broadcast_to(g, shape))
        if rng.random() < 0.4:
            g = np.broadcast_to(g, shape)
        elif g.flags.c_contiguous and expected.size >= 1024 and \
                _merged_dims(g.shape, g.strides, shape) is not None:
            looped += 1
        got = broadcast_copy(g, shape)
        assert got.flags.c_contiguous and got.shape == shape
        np.testing.assert_array_equal(got, expected)
    assert looped >= 30
    assert broadcast_copy(2.5, (2, 3)).tolist() == [[2.5] * 3] * 2
    with pytest.raises(ValueError):
        broadcast_copy(np.ones((3, 4)), (5, 4, 5))
