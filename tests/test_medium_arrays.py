"""The medium-size array paths of GMM and k-means (``benchmarks/adbench.py``): a sum over
leading axes in one Numba pass (``_sum_rows``), large entries that skip the values no
adjoint term reads.  They give NumPy's bits where they replace NumPy, and PyTorch's values
and gradients."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd.gradcheck import gradcheck
from tapegrad.ops import array_ops

torch = pytest.importorskip("torch")

SHAPES_DIMS = [((1000, 5, 2), (0,)), ((1000, 5, 2), (0, 1)), ((3, 3, 3, 27), (0, 1, 2)),
               ((300, 2), 0), ((2, 128), -2), ((64, 64), (0,)), ((7, 1000), 0),
               ((300, 1), 0), ((17, 16), 1), ((40, 7, 3), (1, 0))]


def _awkward(shape, seed):
    """Values over 16 decades with signed zeros, infinities and NaNs in them."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, shape)
    x[rng.random(shape) < 0.4] = -0.0
    x[rng.random(shape) < 0.01] = np.inf
    x[rng.random(shape) < 0.01] = -np.inf
    x[rng.random(shape) < 0.005] = np.nan
    return x


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dim", SHAPES_DIMS)
def test_sum_over_leading_axes_keeps_numpys_bits(shape, dim, keepdim):
    for seed in range(5):
        x = _awkward(shape, seed)
        axes = array_ops._axes(dim, x.ndim)
        with np.errstate(invalid="ignore"):   # (inf - inf)
            want = np.add.reduce(x, axis=axes, keepdims=keepdim)
            got = array_ops.sum(x, dim, keepdim)
        assert got.shape == want.shape
        # bit for bit, signed zeros included (a NaN's sign bit aside)
        assert np.array_equal(np.isnan(got), np.isnan(want))
        assert (np.nan_to_num(got, nan=7.0).tobytes()
                == np.nan_to_num(want, nan=7.0).tobytes())


@pytest.mark.parametrize("shape,dim", SHAPES_DIMS)
def test_sum_over_leading_axes_as_pytorch(shape, dim):
    data = np.random.default_rng(0).standard_normal(shape)
    outs = []
    for lib in (tg, torch):
        x = lib.tensor(data, requires_grad=True)
        y = lib.sum(x, dim, keepdim=True)
        w = lib.tensor(np.arange(y.numel(), dtype=np.float64).reshape(tuple(y.shape)))
        (g,) = lib.autograd.grad((y * w).sum(), x)
        outs.append((y.detach().numpy(), g.numpy(), type(y.grad_fn).__name__))
    np.testing.assert_allclose(outs[0][0], outs[1][0], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
    assert outs[0][2] == outs[1][2]


# an expand's gradient (a broadcast operand of a large elementwise entry) is a leading sum
def test_broadcast_operand_gradient_as_pytorch():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((1, 5, 2)), rng.standard_normal((1000, 1, 2))
    res = []
    for lib in (tg, torch):
        ta, tb = lib.tensor(a, requires_grad=True), lib.tensor(b, requires_grad=True)
        y = ((ta - tb) * (tb + ta)).sum()
        res.append([g.numpy() for g in lib.autograd.grad(y, (ta, tb))])
    for mine, theirs in zip(*res):
        np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)


# large entries of add/sub read no operand values: a transposed and a broadcast operand
# (each would be copied contiguous) give PyTorch's gradients and signed zeros
@pytest.mark.parametrize("op", ["add", "sub"])
def test_large_entry_with_unread_operands_as_pytorch(op):
    rng = np.random.default_rng(2)
    p = rng.standard_normal((2, 5000))
    q = rng.standard_normal((5000, 2))
    q[::7] = -0.0
    res = []
    for lib in (tg, torch):
        tp, tq = lib.tensor(p, requires_grad=True), lib.tensor(q, requires_grad=True)
        y = getattr(lib, op)(tp.t(), tq)             # a transposed operand
        z = getattr(lib, op)(y, tp[0][:, None])      # a broadcast one
        w = lib.tensor(np.where(np.arange(10000) % 3 == 0, -0.0, 1.5).reshape(5000, 2))
        res.append([g.numpy() for g in lib.autograd.grad((z * w).sum(), (tp, tq))])
    for mine, theirs in zip(*res):
        assert mine.tobytes() == theirs.tobytes()


def test_gradcheck_of_large_entries_and_leading_sums():
    rng = np.random.default_rng(3)
    p = tg.tensor(rng.standard_normal((2, 2100)), requires_grad=True)
    q = tg.tensor(rng.standard_normal((2100, 2)), requires_grad=True)

    def f(p, q):
        y = (p.t() - q) + p[1][:, None]
        return (y * y).sum(0)

    assert gradcheck(f, (p, q))
