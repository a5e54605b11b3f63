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
