"""Sums over a run of axes and ``logsumexp`` over short last rows run in Numba kernels
(``array_ops._sum_last``, ``_sum_middle``, ``_max_last``) where NumPy's reduction loops
once per row: their results must be NumPy's, bit for bit, at every size the kernels take
and at the thresholds around them."""
import warnings

import numpy as np
import pytest

from tapegrad.ops import array_ops

# (the data has inf and -inf in one row: NumPy's own reduction warns of inf - inf)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SHAPES = [(1000, 5), (300, 3, 7), (1000, 8), (64, 4), (40, 3, 4, 5), (20, 128), (20, 129),
          (20, 127), (20, 9), (37, 7), (2, 1000, 2), (4, 3, 1000), (256, 1), (1, 512)]


def _values(shape, rng):
    x = rng.standard_normal(shape) * np.exp(rng.uniform(-15.0, 15.0, shape))
    flat = x.reshape(-1)
    flat[0] = np.nan
    flat[1:5] = -0.0           # a row start of negative zeros
    flat[7] = np.inf
    if x.ndim == 2 and x.shape[0] > 3 and x.shape[1] > 1:
        x[1, :] = -0.0         # a row of negative zeros sums to +0.0, as NumPy's
        x[2, :] = -np.inf
        x[3, 1] = np.inf
    return x


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


def _reference_logsumexp(x, axes, keepdim):   # the NumPy path the kernels replace
    m = np.maximum.reduce(x, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.add.reduce(np.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdim else out.squeeze(axes)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("keepdim", [False, True])
def test_sums_over_runs_of_axes_are_numpys(shape, keepdim):
    rng = np.random.default_rng(len(shape) * 1000 + shape[-1])
    x = _values(shape, rng)
    nd = len(shape)
    runs = {tuple(range(i, j)) for i in range(nd) for j in range(i + 1, nd + 1)}
    for axes in sorted(runs):
        got = array_ops.ARRAY_OPS["sum"].forward(x, axes[0] if len(axes) == 1 else axes,
                                                 keepdim)
        assert _same(got, np.add.reduce(x, axis=axes, keepdims=keepdim)), axes


@pytest.mark.parametrize("shape", [s for s in SHAPES if len(s) >= 2])
@pytest.mark.parametrize("keepdim", [False, True])
def test_logsumexp_over_short_rows_is_the_numpy_path(shape, keepdim):
    rng = np.random.default_rng(shape[-1])
    x = _values(shape, rng)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for dim in range(len(shape)):
            got = array_ops.ARRAY_OPS["logsumexp"].forward(x, dim, keepdim)
            assert _same(got, _reference_logsumexp(x, (dim,), keepdim)), dim


def test_the_kernels_take_the_short_rows():
    """The sizes above do reach the kernels (a threshold moved would leave them untested)."""
    x = np.ones((1000, 5))
    assert array_ops._blocks(x, (1,)) == (1000, 5, 1)
    assert array_ops._blocks(np.ones((1000, 5, 2)), (1,)) == (1000, 5, 2)
    assert array_ops._blocks(np.ones((20, 129)), (1,)) is None     # NumPy halves long rows
    assert array_ops._blocks(np.ones((4, 3, 1000)), (1,)) is None  # wide: NumPy's loop
    assert array_ops._blocks(np.ones((1000, 5))[:, ::2], (1,)) is None   # not C-ordered
