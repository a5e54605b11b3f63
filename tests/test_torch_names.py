"""PyTorch's top-level names for layer functions (``torch.conv2d``, ``torch.dropout``,
``torch.batch_norm``, ``torch.embedding``...) and its top-level in-place functions
(``torch.relu_(x)``), with PyTorch's signatures there, against PyTorch."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

R = np.random.default_rng(5)
X4 = R.standard_normal((2, 4, 5, 5))
X3 = R.standard_normal((2, 4, 9))
W2 = R.standard_normal((3, 4, 3, 3))
W1 = R.standard_normal((3, 4, 2))
E = R.standard_normal((6, 3))

CASES = {   # name -> (function of the library, the float inputs that require grad)
    "conv2d": (lambda L, x, w: L.conv2d(x, w, None, 1, 1), (X4, W2)),
    "conv1d": (lambda L, x, w: L.conv1d(x, w, None, 2), (X3, W1)),
    "conv_transpose1d": (lambda L, x, w: L.conv_transpose1d(x, w.transpose(0, 1)[:, :3], None, 2),
                         (X3, W1)),
    "conv_transpose2d": (lambda L, x, w: L.conv_transpose2d(x, w.transpose(0, 1), None, 1, 1),
                         (X4, W2)),
    "dropout (eval)": (lambda L, x: L.dropout(x, 0.3, False), (X4,)),
    "layer_norm": (lambda L, x, w: L.layer_norm(x, (5,), w[0, 0, 0, :3].repeat(2)[:5], None,
                                                1e-5, True), (X4, W2)),
    "group_norm": (lambda L, x: L.group_norm(x, 2, None, None, 1e-5, True), (X4,)),
    "batch_norm": (lambda L, x, w: L.batch_norm(x, w[0, :, 0, 0], w[1, :, 0, 0], None, None,
                                                True, 0.1, 1e-5, True), (X4, W2)),
    "instance_norm": (lambda L, x: L.instance_norm(x, None, None, None, None, True, 0.1, 1e-5,
                                                   True), (X4,)),
    "embedding": (lambda L, w: L.embedding(w, L.tensor([[0, 2], [5, 2]]), 2), (E,)),
    "embedding, no padding": (lambda L, w: L.embedding(w, L.tensor([1, 3, 3])), (E,)),
    "max_pool2d": (lambda L, x: L.max_pool2d(x, 2, 2, 0, 1, True), (X4,)),
    "max_pool1d": (lambda L, x: L.max_pool1d(x, 3, 2), (X3,)),
    "avg_pool1d": (lambda L, x: L.avg_pool1d(x, 3, 2, 1, False, False), (X3,)),
    "adaptive_avg_pool1d": (lambda L, x: L.adaptive_avg_pool1d(x, 4), (X3,)),
    "selu": (lambda L, x: L.selu(x), (X3,)),
    "celu": (lambda L, x: L.celu(x, 0.7), (X3,)),
    "threshold": (lambda L, x: L.threshold(x, 0.2, -1.0), (X3,)),
    "pixel_shuffle": (lambda L, x: L.pixel_shuffle(x, 2), (X4,)),
    "pixel_unshuffle": (lambda L, x: L.pixel_unshuffle(x[:, :, :4, :4], 2), (X4,)),
    "hardshrink": (lambda L, x: L.hardshrink(x, 0.4), (X3,)),
    "prelu": (lambda L, x, w: L.prelu(x, w[0, :, 0, 0]), (X4, W2)),
    "pairwise_distance": (lambda L, x, w: L.pairwise_distance(x[0], x[1] * w[0, 0, 0, 0]),
                          (X3, W2)),
}


def _run(L, name):
    f, inputs = CASES[name]
    ts = [L.tensor(v, dtype=L.float64, requires_grad=True) for v in inputs]
    out = f(L, *ts)
    (out * out).sum().backward()
    return [out.detach().numpy()] + [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_names_as_pytorch(name):
    # (PyTorch's celu gradient, from its result through elu's input_scale, is off by up to
    # ~4e-8 relative: celu'(-0.1) at alpha 0.7 is 0.86687791 there, exp(-0.1 / 0.7) =
    # 0.86687790 here)
    rtol = 1e-7 if name == "celu" else 1e-12
    for got, want in zip(_run(tg, name), _run(torch, name)):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-13)


def test_celu_gradient_is_exact():
    x0 = np.array([-2.0, -0.5, -0.1, -1e-3, 0.3])
    x = tg.tensor(x0, requires_grad=True)
    tg.celu(x, 0.7).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(x0 > 0, 1.0, np.exp(x0 / 0.7)),
                               rtol=1e-15)


@pytest.mark.parametrize("name", ["abs_", "relu_", "sigmoid_", "exp_", "zero_", "clamp_",
                                  "nan_to_num_", "sqrt_", "fill_", "xlogy_"])
def test_top_level_inplace_functions_as_pytorch(name):
    args = {"clamp_": (-0.5, 0.5), "nan_to_num_": (0.25,), "fill_": (1.5,),
            "xlogy_": (2.0,)}.get(name, ())
    got = []
    for L in (tg, torch):
        x = L.tensor([-1.5, 0.25, 2.0, float("nan")], dtype=L.float64)
        r = getattr(L, name)(x, *args)
        got.append((r is x, ["nan" if v != v else v for v in x.tolist()]))
    assert got[0] == got[1]


A = np.array([[0.5, np.nan, -1.0], [2.0, 3.0, np.nan]])
B = np.array([[1.0, 0.25, np.nan], [2.0, -4.0, np.nan]])
M = R.standard_normal((3, 3))
V = np.array([0.5, -1.5, 2.0, 0.0])

DIFFERENTIABLE = {   # name -> (function of the library, the float inputs that require grad)
    "fmax": (lambda L, a, b: L.fmax(a, b), (A, B)),
    "fmin": (lambda L, a, b: L.fmin(a, b), (A, B)),
    "fmax method, a number": (lambda L, a: a.fmax(L.tensor(0.75, dtype=L.float64)), (A,)),
    "logaddexp2": (lambda L, a, b: L.logaddexp2(a, b), (np.nan_to_num(A), np.nan_to_num(B) * 300)),
    "inner": (lambda L, a, b: L.inner(a, b), (M, M.T.copy())),
    "inner 1-d": (lambda L, a: L.inner(a, a * 2), (V,)),
    "vdot": (lambda L, a: L.vdot(a, a + 1), (V,)),
    "ger": (lambda L, a: L.ger(a, a[:3]), (V,)),
    "matrix_power 3": (lambda L, m: L.matrix_power(m, 3), (M,)),
    "matrix_power -2": (lambda L, m: m.matrix_power(-2), (M,)),
    "matrix_power 0": (lambda L, m: L.matrix_power(m, 0) + m, (M,)),
    "chain_matmul": (lambda L, m: L.chain_matmul(m, m.T, m), (M,)),
    "diagflat": (lambda L, m: L.diagflat(m[:2], 1), (M,)),
    "ravel": (lambda L, m: m.t().ravel() * L.tensor(np.arange(9.0)), (M,)),
    "positive": (lambda L, m: L.positive(m) * 2, (M,)),
    "hsplit": (lambda L, m: L.hsplit(m, [1])[1] * 3, (M,)),
    "vsplit": (lambda L, m: m.vsplit(3)[2] * 3, (M,)),
    "dsplit": (lambda L, m: L.dsplit(m.reshape(1, 3, 3), 3)[1] * 3, (M,)),
    "cartesian_prod": (lambda L, v: L.cartesian_prod(v, v[:2] * 2), (V,)),
    "combinations": (lambda L, v: L.combinations(v, 2), (V,)),
    "combinations with replacement": (lambda L, v: L.combinations(v, 3, True), (V,)),
}


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE))
def test_more_torch_functions_as_pytorch(name):
    f, inputs = DIFFERENTIABLE[name]
    got = []
    for L in (tg, torch):
        ts = [L.tensor(v, dtype=L.float64, requires_grad=True) for v in inputs]
        out = f(L, *ts)
        (out * L.tensor(np.arange(1.0, out.numel() + 1).reshape(tuple(out.shape)),
                        dtype=L.float64)).sum().backward()
        got.append([out.detach().numpy()] + [t.grad.numpy() for t in ts])
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("N, increasing", [(4, False), (None, True), (1, False)])
def test_vander_as_pytorch(N, increasing):
    """Values as PyTorch's; the gradient against the powers' own (PyTorch's backward of its
    vander raises on this input: its cumprod's saved value is changed in place)."""
    got = [L.vander(L.tensor(V, dtype=L.float64), N, increasing).numpy() for L in (tg, torch)]
    np.testing.assert_array_equal(got[0], got[1])
    x = tg.tensor(V, requires_grad=True)
    n = len(V) if N is None else N
    r = tg.vander(x, N, increasing)
    assert r.requires_grad == (n > 1) == torch.vander(torch.tensor(V, requires_grad=True), N,
                                                      increasing).requires_grad
    if n == 1:
        return
    r.sum().backward()
    want = sum(k * V ** (k - 1) if k else 0 * V for k in range(n))
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-14)


@pytest.fixture
def torch_float64():
    """tapegrad's default dtype is float64 (README): PyTorch's set so for the comparison."""
    was = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(was)


UTILITIES = {
    "tril_indices": lambda L: L.tril_indices(4, 3, -1),
    "triu_indices": lambda L: L.triu_indices(3, 5, 1),
    "unravel_index": lambda L: L.unravel_index(L.tensor([0, 7, 11, -1]), (3, 4)),
    "argwhere": lambda L: L.argwhere(L.tensor([[0.0, 1.5], [2.0, 0.0]])),
    "broadcast_shapes": lambda L: L.broadcast_shapes((2, 1, 3), (4, 1), 3),
    "result_type int float": lambda L: L.result_type(L.tensor([1, 2]), 2.5),
    "result_type int32 uint8": lambda L: L.result_type(L.tensor([1], dtype=L.int32),
                                                       L.tensor([1], dtype=L.uint8)),
    "result_type 0-d": lambda L: L.result_type(L.tensor([1], dtype=L.float32), L.tensor(2.0)),
    "promote_types": lambda L: (L.promote_types(L.int64, L.float32),
                                L.promote_types(L.uint8, L.int8), L.promote_types(L.bool, L.int16)),
    "can_cast": lambda L: (L.can_cast(L.float64, L.int32), L.can_cast(L.int64, L.float32),
                           L.can_cast(L.bool, L.uint8), L.can_cast(L.int8, L.bool)),
    "is_same_size": lambda L: (L.is_same_size(L.zeros(2, 3), L.ones(2, 3)),
                               L.zeros(2).is_same_size(L.zeros(3))),
    "is_signed": lambda L: (L.is_signed(L.zeros(2)), L.tensor([1], dtype=L.uint8).is_signed()),
    "scalar_tensor": lambda L: L.scalar_tensor(3),
    "scalar_tensor int64": lambda L: L.scalar_tensor(3, dtype=L.int64),
}


def _plain(v):
    if isinstance(v, tuple):
        return tuple(_plain(x) for x in v)
    if hasattr(v, "tolist") and not isinstance(v, (tg.dtype, torch.dtype)):
        return (v.tolist(), str(v.dtype).split(".")[-1]) if hasattr(v, "dtype") else v.tolist()
    if isinstance(v, (tg.dtype, torch.dtype)):
        return str(v).split(".")[-1]
    return tuple(v) if isinstance(v, (list, tuple)) or type(v).__name__ == "Size" else v


@pytest.mark.parametrize("name", sorted(UTILITIES))
def test_utilities_as_pytorch(name, torch_float64):
    assert _plain(UTILITIES[name](tg)) == _plain(UTILITIES[name](torch))


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"])
@pytest.mark.parametrize("args", [(5,), (6, False), (1,), (0,), (8, True)])
def test_windows_as_pytorch(name, args):
    got = getattr(tg, name)(*args)
    want = getattr(torch, name)(*args, dtype=torch.float64)
    assert got.dtype == tg.float64 and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-14, atol=1e-15)


def test_window_parameters_as_pytorch():
    np.testing.assert_allclose(tg.hamming_window(7, False, 0.5, 0.5).numpy(),
                               torch.hamming_window(7, False, 0.5, 0.5, dtype=torch.float64))
    np.testing.assert_allclose(tg.kaiser_window(6, True, 5.0).numpy(),
                               torch.kaiser_window(6, True, 5.0, dtype=torch.float64))
    assert tg.hann_window(4, dtype=tg.float32).dtype == tg.float32


@pytest.mark.parametrize("form", ["function", "method", "in place"])
def test_nextafter_as_pytorch(form):
    """Values, PyTorch's NextafterBackward0 (the gradient to the input as it is, zeros to
    ``other``), and the error for integers."""
    got = []
    for L in (tg, torch):
        x = L.tensor([1.0, 2.0, -0.0, 5.0, 5.0, np.nan], dtype=L.float64, requires_grad=True)
        o = L.tensor([0.0, 3.0, 1.0, 5.0, 5.0, 1.0], dtype=L.float64, requires_grad=True)
        y = x * 1.0
        r = L.nextafter(y, o) if form == "function" else y.nextafter(o) if form == "method" \
            else y.nextafter_(o)
        name = type(r.grad_fn).__name__ if L is torch else r.grad_fn.name()
        r.backward(L.tensor([1.0, -0.0, 3.0, np.inf, -1.0, 6.0], dtype=L.float64))
        got.append((name, np.nan_to_num(r.detach().numpy(), nan=123.0).tolist(),
                    np.signbit(r.detach().numpy()).tolist(), x.grad.tolist(),
                    np.signbit(x.grad.numpy()).tolist(), o.grad.tolist()))
        with pytest.raises(NotImplementedError, match="nextafter_cpu"):
            L.nextafter(L.tensor([1]), L.tensor([2]))
    assert got[0] == got[1]


P = R.standard_normal((4, 3))
Q = R.standard_normal((4, 3))
LABELS = np.array([1.0, -1.0, 1.0, -1.0])
POSITIVE = np.abs(R.standard_normal((4, 3))) + 0.1

NORMS_AND_MORE = {   # name -> (function of the library, the float inputs that require grad)
    "rms_norm": (lambda L, x, w: L.rms_norm(x, (3,), w[0], 1e-6), (P, Q)),
    "rms_norm, eps None": (lambda L, x: L.nn.functional.rms_norm(x, [4, 3]), (P,)),
    "bilinear": (lambda L, x, y, w: L.nn.functional.bilinear(x, y, w.reshape(4, 3, 1)[:, :, 0]
                                                             .unsqueeze(-1) * w[:1, None, :],
                                                             w[0, :1].expand(4)), (P, Q, P)),
    "pdist": (lambda L, x: L.nn.functional.pdist(x), (P,)),
    "pdist p=1": (lambda L, x: L.pdist(x, 1.0), (P,)),
    "dist": (lambda L, x, y: L.dist(x, y), (P, Q)),
    "dist p=3": (lambda L, x, y: L.dist(x, y[0], 3), (P, Q)),
    "frobenius_norm": (lambda L, x: L.frobenius_norm(x, (0, 1)), (P,)),
    "nuclear_norm": (lambda L, x: L.nuclear_norm(x), (P,)),
    "matrix_norm nuc keepdim": (lambda L, x: L.linalg.matrix_norm(x, "nuc", keepdim=True), (P,)),
    "matrix_norm 2": (lambda L, x: L.linalg.matrix_norm(x, 2), (P,)),
    "matrix_norm -2": (lambda L, x: L.linalg.matrix_norm(x, -2), (P,)),
    "matrix_norm 1": (lambda L, x: L.linalg.matrix_norm(x, 1), (P,)),
    "matrix_norm -inf, dims swapped": (lambda L, x: L.linalg.matrix_norm(x, -float("inf"),
                                                                         (1, 0)), (P,)),
    "matrix_norm inf keepdim": (lambda L, x: L.linalg.matrix_norm(x, float("inf"),
                                                                  keepdim=True), (P,)),
    "renorm": (lambda L, x: L.renorm(x, 2, 0, 1.0), (P,)),
    "renorm method p=1 dim 1": (lambda L, x: x.renorm(1, 1, 1.5), (P,)),
    "masked_scatter": (lambda L, x, y: L.masked_scatter(x, L.tensor(P > 0), y), (P, Q)),
    "masked_scatter broadcast mask": (lambda L, x, y: x.masked_scatter(
        L.tensor(np.array([True, False, True])), y.reshape(-1)), (P, Q)),
    "corrcoef": (lambda L, x: L.corrcoef(x), (P,)),
    "adjoint": (lambda L, x: L.adjoint(x) * 2, (P,)),
    "kl_div int reduction": (lambda L, x, y: L.kl_div(x, y, 2), (P, POSITIVE)),
    "kl_div log_target": (lambda L, x, y: L.kl_div(x, y, 0, log_target=True), (P, Q)),
    "cosine_embedding_loss": (lambda L, x, y: L.cosine_embedding_loss(
        x, y, L.tensor(LABELS), 0.1, 1), (P, Q)),
    "margin_ranking_loss": (lambda L, x, y: L.margin_ranking_loss(
        x[:, 0], y[:, 0], L.tensor(LABELS), 0.2, 2), (P, Q)),
    "hinge_embedding_loss": (lambda L, x: L.hinge_embedding_loss(
        x[:, 0], L.tensor(LABELS), 0.5, 0), (P,)),
    "triplet_margin_loss": (lambda L, x, y: L.triplet_margin_loss(x, y, x * 0.5 + 1, 1.0, 2.0,
                                                                  1e-6, True, 1), (P, Q)),
    "poisson_nll_loss": (lambda L, x, y: L.poisson_nll_loss(x, y, True, True, 1e-8, 1),
                         (P, POSITIVE)),
    "binary_cross_entropy_with_logits": (lambda L, x, y: L.binary_cross_entropy_with_logits(
        x, L.sigmoid(y), None, None, 2), (P, Q)),
    "constant_pad_nd": (lambda L, x: L.constant_pad_nd(x, (1, 2), 0.5), (P,)),
    "channel_shuffle": (lambda L, x: L.nn.functional.channel_shuffle(x.reshape(1, 4, 3), 2),
                        (P,)),
    "rrelu (eval)": (lambda L, x: L.rrelu(x), (P,)),
    "rrelu (F, eval)": (lambda L, x: L.nn.functional.rrelu(x, 0.1, 0.3), (P,)),
    "alpha_dropout (eval)": (lambda L, x: L.alpha_dropout(x, 0.3, False) * 1, (P,)),
    "selu_": (lambda L, x: L.selu_(x * 1), (P,)),
    "celu_": (lambda L, x: L.celu_(x * 1, 0.5), (P,)),
    "threshold_": (lambda L, x: L.threshold_(x * 1, 0.1, 2.0), (P,)),
    "F.elu_": (lambda L, x: L.nn.functional.elu_(x * 1, 0.7), (P,)),
    "F.leaky_relu_": (lambda L, x: L.nn.functional.leaky_relu_(x * 1, 0.2), (P,)),
    "F.hardtanh_": (lambda L, x: L.nn.functional.hardtanh_(x * 1, -0.5, 0.5), (P,)),
    "F.relu_": (lambda L, x: L.nn.functional.relu_(x * 1), (P,)),
    "split_with_sizes": (lambda L, x: L.split_with_sizes(x, [1, 3])[1] * 2, (P,)),
    "unsafe_chunk": (lambda L, x: L.unsafe_chunk(x, 2, 1)[1] * 2, (P,)),
    "concatenate": (lambda L, x, y: L.concatenate([x, y], axis=1), (P, Q)),
    "fill with a tensor": (lambda L, x, y: L.fill(x, y[0, 0]), (P, Q)),
}


def _value_and_gradients_as_pytorch(f, inputs, rtol):
    """``f`` of each library on ``inputs`` (float64, requiring grad): its value and the
    gradients of a weighted sum of it (zeros for an input it does not use) agree."""
    got = []
    for L in (tg, torch):
        ts = [L.tensor(v, dtype=L.float64, requires_grad=True) for v in inputs]
        out = f(L, *ts)
        weights = L.tensor(np.arange(1.0, out.numel() + 1).reshape(tuple(out.shape)),
                           dtype=L.float64)
        grads = L.autograd.grad((out * weights).sum(), ts, allow_unused=True)
        got.append([out.detach().numpy()] + [np.zeros(1) if g is None else g.numpy()
                                             for g in grads])
    for a, b in zip(*got):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


@pytest.mark.parametrize("name", sorted(NORMS_AND_MORE))
def test_norms_losses_and_more_as_pytorch(name, torch_float64):
    _value_and_gradients_as_pytorch(*NORMS_AND_MORE[name], rtol=1e-10)


def test_small_real_only_names():
    x = tg.tensor([[1.0, -2.0]])
    for name in ("conj", "resolve_conj", "resolve_neg", "conj_physical", "real"):
        assert getattr(tg, name)(x) is x
    assert tg.isreal(x).tolist() == [[True, True]]
    with pytest.raises(RuntimeError, match="imag is not implemented"):
        tg.imag(x)
    assert tg.detach(x * 1).grad_fn is None


def test_masked_scatter_needs_enough_source():
    for L in (tg, torch):
        with pytest.raises(RuntimeError, match="Number of elements of source < number of ones"):
            L.masked_scatter(L.zeros(2, 3), L.ones(2, 3, dtype=L.bool), L.ones(5))


def test_alpha_dropout_keeps_mean_and_variance_in_training():
    tg.manual_seed(0)
    x = tg.tensor(R.standard_normal(200_000))
    for f in (lambda v: tg.alpha_dropout(v, 0.2, True),
              lambda v: tg.nn.functional.feature_alpha_dropout(v.reshape(2000, 100, 1), 0.2,
                                                                True).reshape(-1)):
        y = f(x).numpy()
        assert abs(y.mean()) < 0.02 and abs(y.std() - 1.0) < 0.02
        assert (y != x.numpy()).mean() > 0.15


def test_rrelu_in_training_draws_slopes_between_the_bounds():
    x = tg.tensor(-np.ones(10_000), requires_grad=True)
    y = tg.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    slopes = -y.detach().numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and slopes.std() > 0.03
    y.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), slopes)


IDX = np.array([2, 0, 2])
SCATTERS = {
    "put": (lambda L, x, y: L.put(x, L.tensor([[0, 5], [-1, 2]]), y[:2, 0].reshape(2, 1)
                                  .expand(2, 2) * L.tensor([[1.0, 2.0], [3.0, 4.0]])), (P, Q)),
    "put accumulate": (lambda L, x, y: x.put(L.tensor([1, 1, 3]), y[0], True), (P, Q)),
    "put_": (lambda L, x, y: (x * 1).put_(L.tensor([4, 0]), y[1, :2]), (P, Q)),
    "index_reduce prod": (lambda L, x, y: L.index_reduce(x, 0, L.tensor(IDX), y[:3], "prod"),
                          (P, Q)),
    "index_reduce mean, not self": (lambda L, x, y: x.index_reduce(
        1, L.tensor([1, 1, 0]), y, "mean", include_self=False), (P, Q)),
    "index_reduce amax": (lambda L, x, y: L.index_reduce(x, 0, L.tensor(IDX),
                                                        L.round(y[:3] * 2) / 2, "amax"), (P, Q)),
    "index_reduce_ amin": (lambda L, x, y: (x * 1).index_reduce_(0, L.tensor(IDX), y[:3],
                                                                 "amin"), (P, Q)),
}


@pytest.mark.parametrize("name", sorted(SCATTERS))
def test_put_and_index_reduce_as_pytorch(name, torch_float64):
    _value_and_gradients_as_pytorch(*SCATTERS[name], rtol=1e-12)


def _python_callables_and_resize(L):
    out = []
    x = L.tensor([1.0, 2.0, 3.0])
    out.append([x.apply_(lambda v: v * 2) is x, x.tolist()])
    out.append(L.ones(3).map_(L.ones(3) * 2, lambda a, b: a + b).tolist())
    out.append(L.ones(3).map2_(L.ones(3) * 2, L.ones(1) * 5, lambda a, b, c: a + b * c).tolist())
    out.append(L.ones(2, 3).map_(L.tensor([1.0, 2.0, 0.5]), lambda a, b: a - b).tolist())
    out.append(L.tensor([1, 2]).apply_(lambda v: v + 0.7).tolist())
    out.append(L.arange(6.0).resize_(2, 2).tolist())
    out.append(L.arange(6.0).resize_as_(L.ones(2, 3)).tolist())
    out.append(list(L.arange(3.0).resize_(5).shape))
    y = L.tensor([1.0, 2.0], requires_grad=True)
    for f in (lambda: y.apply_(lambda v: v), lambda: (y * 1).map_(y, lambda a, b: a),
              lambda: y.resize_(3)):
        with pytest.raises(RuntimeError) as e:
            f()
        out.append(str(e.value))
    return out


def test_python_callables_and_resize_as_pytorch(torch_float64):
    assert _python_callables_and_resize(tg) == _python_callables_and_resize(torch)
