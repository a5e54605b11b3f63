"""The layers of ``tapegrad.nn`` against PyTorch 2.13: ``Flatten``/``Unflatten``, ``Dropout``
modes, ``LayerNorm``, ``Embedding``, ``BatchNorm1d``/``2d``, ``Conv1d``/``Conv2d``, pooling,
forward hooks, containers; values, gradients, parameter names and order, default
initialisation, exception types; a small CNN trained three steps beside PyTorch's.

The functionals' gradients (and Hessian-vector products) against finite differences and
PyTorch are ``NN_CASES`` in ``tests/test_nn.py``.  Torch-free assertions run without torch;
comparisons are skipped.
"""
import math
from collections import OrderedDict

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn as nn
import tapegrad.nn.functional as F

try:
    import torch
    import torch.nn.functional as TF
except ImportError:   # the torch-free assertions still run
    torch = TF = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")
RNG = np.random.default_rng(7)


def val(t):
    return np.asarray(t.detach()._value) if isinstance(t, tg.Tensor) else t.detach().numpy()


def same_weights(ours, theirs):
    """PyTorch's module in float64 with our module holding its parameters and buffers."""
    theirs.double()
    ours.load_state_dict(theirs.state_dict())
    return ours, theirs


def run_both(ours, theirs, x, seed=0, rtol=1e-12, atol=1e-13, node=True, grad_rtol=1e-10):
    """Forward both modules on ``x``, backward a fixed random weighting of the output;
    compare outputs, node names, input gradients and parameter gradients (by name)."""
    gx = tg.tensor(x, requires_grad=x.dtype.kind == "f")
    tx = torch.tensor(x, requires_grad=x.dtype.kind == "f")
    a, b = ours(gx), theirs(tx)
    np.testing.assert_allclose(val(a), val(b), rtol=rtol, atol=atol)
    if node:
        assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__
    c = np.random.default_rng(seed).normal(size=tuple(b.shape))
    (a * tg.tensor(c)).sum().backward()
    (b * torch.tensor(c)).sum().backward()
    if x.dtype.kind == "f":
        np.testing.assert_allclose(val(gx.grad), val(tx.grad), rtol=grad_rtol, atol=1e-12)
    tp = dict(theirs.named_parameters())
    assert [n for n, _ in ours.named_parameters()] == list(tp)
    for n, p in ours.named_parameters():
        if tp[n].grad is None:
            assert p.grad is None, n
        else:
            np.testing.assert_allclose(val(p.grad), val(tp[n].grad), rtol=grad_rtol,
                                       atol=1e-12, err_msg=n)
    return a, b


# -- Flatten / Unflatten --------------------------------------------------------------------

def test_flatten_unflatten():
    x = tg.tensor(np.arange(24.0).reshape(2, 3, 4), requires_grad=True)
    y = nn.Flatten()(x)
    assert y.shape == (2, 12) and type(y.grad_fn).__name__ == "ViewBackward0"
    assert nn.Flatten(0, 1)(x).shape == (6, 4)
    z = nn.Unflatten(1, (2, 6))(y)
    assert z.shape == (2, 2, 6)
    np.testing.assert_array_equal(val(z).reshape(-1), np.arange(24.0))
    assert nn.Unflatten(-1, (2, 2))(x).shape == (2, 3, 2, 2)
    assert repr(nn.Flatten()) == "Flatten(start_dim=1, end_dim=-1)"
    assert repr(nn.Unflatten(1, (2, 6))) == "Unflatten(dim=1, unflattened_size=(2, 6))"
    z.sum().backward()
    np.testing.assert_array_equal(val(x.grad), np.ones((2, 3, 4)))
    with pytest.raises(TypeError):
        nn.Unflatten(1, 6)


@needs_torch
def test_flatten_unflatten_match_torch():
    x = RNG.normal(size=(2, 3, 4, 5))
    for d in ("Dropout1d", "Dropout2d", "Dropout3d"):
        assert repr(getattr(nn, d)(0.2)) == repr(getattr(torch.nn, d)(0.2))
    for ours, theirs in [(nn.Flatten(), torch.nn.Flatten()), (nn.Flatten(2), torch.nn.Flatten(2)),
                         (nn.Unflatten(2, (2, 2)), torch.nn.Unflatten(2, (2, 2)))]:
        assert repr(ours) == repr(theirs)
        run_both(ours, theirs, x)


# -- Dropout and train/eval -----------------------------------------------------------------

def test_dropout_modes_propagate():
    model = nn.Sequential(nn.Linear(50, 50), nn.Sequential(nn.Dropout(0.4), nn.ReLU()))
    drop = model[1][0]
    assert model.training and drop.training
    x = tg.ones(200, 50)
    tg.manual_seed(0)
    y = drop(x)
    zeros = float((val(y) == 0).mean())
    assert 0.35 < zeros < 0.45
    np.testing.assert_allclose(val(y)[val(y) != 0], 1 / 0.6)
    assert model.eval() is model
    assert not drop.training and not model[1].training
    assert drop(x) is x                                    # the identity in eval mode
    model.train()
    assert drop.training
    model.train(False)
    assert not drop.training
    assert F.dropout(x, 0.5, training=False) is x
    with pytest.raises(ValueError, match="between 0 and 1"):
        nn.Dropout(1.5)
    # the mask is seeded by tg.manual_seed
    drop.train()
    tg.manual_seed(3)
    a = val(drop(x)).copy()
    tg.manual_seed(3)
    np.testing.assert_array_equal(val(drop(x)), a)


def test_channel_dropout():
    tg.manual_seed(1)
    x = tg.ones(4, 50, 3, 3, requires_grad=True)
    d = nn.Dropout2d(0.3)
    y = val(d(x))
    per_channel = y.reshape(4, 50, 9)
    assert np.all((per_channel == 0).all(2) | (per_channel == 1 / 0.7).all(2))
    assert 0.15 < (per_channel == 0).all(2).mean() < 0.45
    assert nn.Dropout2d(0.3).eval()(x) is x
    assert val(nn.Dropout1d(0.5)(tg.ones(2, 8, 5))).reshape(2, 8, 5).std(2).max() == 0
    with pytest.raises(RuntimeError, match="Expected 3D or 4D input"):
        F.dropout2d(tg.ones(5), 0.5)


@needs_torch
def test_dropout_node_and_gradient_follow_the_mask():
    x = tg.tensor(RNG.normal(size=(30, 20)), requires_grad=True)
    y = F.dropout(x, 0.3)
    assert type(y.grad_fn).__name__ == type(TF.dropout(torch.ones(2, requires_grad=True), 0.3)
                                            .grad_fn).__name__
    y.sum().backward()
    np.testing.assert_allclose(val(x.grad), (val(y) != 0) / 0.7)


# -- LayerNorm ------------------------------------------------------------------------------

def test_layer_norm_torch_free():
    ln = nn.LayerNorm(4)
    assert [n for n, _ in ln.named_parameters()] == ["weight", "bias"]
    np.testing.assert_array_equal(val(ln.weight), np.ones(4))
    np.testing.assert_array_equal(val(ln.bias), np.zeros(4))
    x = RNG.normal(size=(3, 4)) * 3 + 1
    y = val(ln(tg.tensor(x)))
    ref = (x - x.mean(1, keepdims=True)) / np.sqrt(x.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(y, ref, rtol=1e-12)
    assert nn.LayerNorm([2, 4], elementwise_affine=False).weight is None
    assert nn.LayerNorm(4, bias=False).bias is None
    with pytest.raises(RuntimeError, match="normalized_shape"):
        ln(tg.ones(3, 5))


@needs_torch
@pytest.mark.parametrize("args,kw,shape", [((5,), {}, (3, 5)),
                                           (([3, 5],), {"eps": 1e-3}, (2, 3, 5)),
                                           ((5,), {"elementwise_affine": False}, (4, 5)),
                                           ((5,), {"bias": False}, (2, 2, 5))])
def test_layer_norm_matches_torch(args, kw, shape):
    ours, theirs = same_weights(nn.LayerNorm(*args, **kw), torch.nn.LayerNorm(*args, **kw))
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_()
    ours.load_state_dict(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    run_both(ours, theirs, RNG.normal(size=shape) * 2)


# -- Embedding ------------------------------------------------------------------------------

def test_embedding_torch_free():
    tg.manual_seed(0)
    emb = nn.Embedding(1000, 20, padding_idx=3)
    w = val(emb.weight)
    assert w.shape == (1000, 20) and not w[3].any()
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1) < 0.02       # N(0, 1), as PyTorch
    idx = tg.tensor([[3, 5, 5], [0, 3, 999]])
    out = emb(idx)
    assert out.shape == (2, 3, 20) and type(out.grad_fn).__name__ == "EmbeddingBackward0"
    out.sum().backward()
    g = val(emb.weight.grad)
    assert not g[3].any() and (g[5] == 2).all() and (g[0] == 1).all() and not g[1].any()
    with pytest.raises(RuntimeError, match="Long, Int"):
        emb(tg.tensor([1.0]))
    with pytest.raises(IndexError, match="index out of range"):
        emb(tg.tensor([1000]))
    assert nn.Embedding(5, 2, padding_idx=-1).padding_idx == 4
    frozen = nn.Embedding.from_pretrained(tg.tensor(np.eye(3)))
    assert not frozen.weight.requires_grad and list(frozen.parameters()) == []
    np.testing.assert_array_equal(val(frozen(tg.tensor([2]))), [[0.0, 0.0, 1.0]])


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"padding_idx": 1}, {"padding_idx": -2}, {"max_norm": 1.5},
                                {"max_norm": 1.0, "norm_type": 1.0}])
def test_embedding_matches_torch(kw):
    ours, theirs = same_weights(nn.Embedding(6, 4, **kw), torch.nn.Embedding(6, 4, **kw))
    assert repr(ours) == repr(theirs)
    idx = np.array([[1, 2, 4], [4, 4, 1]])
    run_both(ours, theirs, idx)
    if "max_norm" in kw:     # rows looked up were renormalised in place, as in PyTorch
        np.testing.assert_allclose(val(ours.weight), val(theirs.weight), rtol=1e-12)


# -- BatchNorm ------------------------------------------------------------------------------

def test_batch_norm_torch_free():
    bn = nn.BatchNorm1d(3)
    assert [n for n, _ in bn.named_parameters()] == ["weight", "bias"]
    assert list(bn.state_dict()) == ["weight", "bias", "running_mean", "running_var",
                                     "num_batches_tracked"]
    x = RNG.normal(size=(8, 3)) * 2 + 5
    y = val(bn(tg.tensor(x)))
    np.testing.assert_allclose(y.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(val(bn.running_mean), 0.1 * x.mean(0), rtol=1e-12)
    np.testing.assert_allclose(val(bn.running_var), 0.9 + 0.1 * x.var(0, ddof=1), rtol=1e-12)
    assert int(val(bn.num_batches_tracked)) == 1
    bn.eval()
    ye = val(bn(tg.tensor(x)))
    np.testing.assert_allclose(ye, (x - val(bn.running_mean)) / np.sqrt(val(bn.running_var)
                                                                        + 1e-5), rtol=1e-12)
    assert int(val(bn.num_batches_tracked)) == 1          # eval does not count
    with pytest.raises(ValueError, match="expected 2D or 3D input"):
        bn(tg.ones(2, 3, 4, 5))
    bn.train()
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(tg.ones(1, 3))
    with pytest.raises(ValueError, match="expected 4D input"):
        nn.BatchNorm2d(3)(tg.ones(2, 3))


@needs_torch
@pytest.mark.parametrize("make,shape", [
    (lambda m: m.BatchNorm1d(3), (6, 3)),
    (lambda m: m.BatchNorm1d(3, momentum=None), (4, 3, 5)),
    (lambda m: m.BatchNorm1d(3, affine=False, eps=1e-3), (5, 3)),
    (lambda m: m.BatchNorm1d(3, track_running_stats=False), (5, 3)),
    (lambda m: m.BatchNorm2d(2, momentum=0.3), (3, 2, 4, 3)),
], ids=["1d", "1d-3d-cumulative", "no-affine", "no-running", "2d"])
def test_batch_norm_matches_torch_in_training_and_eval(make, shape):
    ours, theirs = same_weights(make(nn), make(torch.nn))
    assert repr(ours) == repr(theirs)
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_()
    ours.load_state_dict(theirs.state_dict())
    for step in range(3):                                  # running statistics move alike
        run_both(ours, theirs, RNG.normal(size=shape) * 2 + step)
        for (n, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
            np.testing.assert_allclose(a, b.numpy(), rtol=1e-12, atol=1e-14, err_msg=n)
    ours.eval()
    theirs.eval()
    run_both(ours, theirs, RNG.normal(size=shape))


# -- Conv -----------------------------------------------------------------------------------

def test_conv_torch_free():
    conv = nn.Conv2d(3, 8, 3, padding=1)
    assert [n for n, _ in conv.named_parameters()] == ["weight", "bias"]
    assert conv.weight.shape == (8, 3, 3, 3) and conv.bias.shape == (8,)
    bound = 1 / math.sqrt(27)                  # kaiming_uniform_(a=sqrt(5)): 1/sqrt(fan_in)
    assert np.abs(val(conv.weight)).max() <= bound and np.abs(val(conv.bias)).max() <= bound
    y = conv(tg.ones(2, 3, 5, 5))
    assert y.shape == (2, 8, 5, 5) and type(y.grad_fn).__name__ == "ConvolutionBackward0"
    # a 1x1 convolution is a matrix product over channels
    c1 = nn.Conv1d(2, 3, 1, bias=False)
    x = RNG.normal(size=(4, 2, 6))
    np.testing.assert_allclose(val(c1(tg.tensor(x))),
                               np.einsum("oc,ncl->nol", val(c1.weight)[:, :, 0], x), rtol=1e-12)
    with pytest.raises(RuntimeError, match="channels"):
        conv(tg.ones(1, 4, 5, 5))
    with pytest.raises(ValueError, match="divisible by groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(RuntimeError, match="too small"):
        nn.Conv2d(3, 1, 5)(tg.ones(1, 3, 2, 2))


def test_conv_gradient_vs_finite_differences():
    x0, w0, b0 = RNG.normal(size=(2, 2, 5, 6)), RNG.normal(size=(3, 2, 2, 3)), RNG.normal(size=3)
    c = RNG.normal(size=(2, 3, 2, 3))

    def f(x, w, b):
        return (F.conv2d(x, w, b, stride=2, padding=(0, 1), dilation=(2, 1)) * tg.tensor(c)).sum()

    xs = [tg.tensor(a, requires_grad=True) for a in (x0, w0, b0)]
    f(*xs).backward()
    for k, a in enumerate((x0, w0, b0)):
        num = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            ap, am = a.copy(), a.copy()
            ap[i] += 1e-6
            am[i] -= 1e-6
            args_p = [tg.tensor(ap if j == k else v) for j, v in enumerate((x0, w0, b0))]
            args_m = [tg.tensor(am if j == k else v) for j, v in enumerate((x0, w0, b0))]
            num[i] = (f(*args_p).item() - f(*args_m).item()) / 2e-6
        np.testing.assert_allclose(val(xs[k].grad), num, rtol=1e-6, atol=1e-8)


@needs_torch
@pytest.mark.parametrize("make,shape", [
    (lambda m: m.Conv2d(3, 4, 3), (2, 3, 6, 5)),
    (lambda m: m.Conv2d(4, 6, (3, 2), stride=2, padding=(1, 2), dilation=(1, 2), groups=2),
     (2, 4, 7, 6)),
    (lambda m: m.Conv2d(2, 3, 3, padding="same", bias=False), (1, 2, 4, 4)),
    (lambda m: m.Conv2d(2, 3, 2, padding="valid"), (2, 2, 3, 3)),
    (lambda m: m.Conv1d(3, 5, 4, stride=3, padding=2), (2, 3, 11)),
    (lambda m: m.Conv1d(2, 4, 3, groups=2, dilation=3), (3, 2, 10)),
    (lambda m: m.Conv2d(2, 3, 3, padding=(1, 2), padding_mode="reflect"), (2, 2, 5, 6)),
    (lambda m: m.Conv2d(2, 3, (2, 3), padding="same", padding_mode="replicate"), (1, 2, 4, 5)),
    (lambda m: m.Conv1d(2, 3, 3, padding=2, padding_mode="circular", stride=2), (2, 2, 7)),
    (lambda m: m.ConvTranspose2d(3, 4, 3), (2, 3, 4, 5)),
    (lambda m: m.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=(1, 0), output_padding=(1, 0),
                                 groups=2, dilation=(1, 2), bias=False), (2, 4, 3, 4)),
    (lambda m: m.ConvTranspose1d(2, 3, 4, stride=3, padding=1, output_padding=2), (2, 2, 5)),
    (lambda m: m.ConvTranspose1d(2, 3, 2), (2, 4)),
], ids=["2d", "2d-all-options", "same", "valid", "1d", "1d-groups", "reflect", "replicate-same",
        "circular", "transposed", "transposed-options", "transposed-1d", "transposed-unbatched"])
def test_conv_matches_torch(make, shape):
    ours, theirs = same_weights(make(nn), make(torch.nn))
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    run_both(ours, theirs, RNG.normal(size=shape), rtol=1e-11)


@needs_torch
def test_conv_init_matches_torch_distribution():
    torch.manual_seed(0)
    tg.manual_seed(0)
    ours, theirs = nn.Conv2d(16, 32, 5), torch.nn.Conv2d(16, 32, 5)
    for a, b in ((ours.weight, theirs.weight), (ours.bias, theirs.bias)):
        assert abs(val(a).max() / b.max().item() - 1) < 0.05
        assert abs(val(a).std() / b.std().item() - 1) < 0.1


@needs_torch
def test_conv_unbatched_and_errors_match_torch():
    w = RNG.normal(size=(4, 3, 2, 2))
    x = RNG.normal(size=(3, 5, 5))
    np.testing.assert_allclose(val(F.conv2d(tg.tensor(x), tg.tensor(w))),
                               TF.conv2d(torch.tensor(x), torch.tensor(w)).numpy(), rtol=1e-12)
    for bad in (dict(padding="same", stride=2), dict(padding="full")):
        with pytest.raises((RuntimeError, ValueError)) as theirs:
            TF.conv2d(torch.tensor(x), torch.tensor(w), **bad)
        with pytest.raises(type(theirs.value)):
            F.conv2d(tg.tensor(x), tg.tensor(w), **bad)
        with pytest.raises((RuntimeError, ValueError)) as theirs:
            torch.nn.Conv2d(3, 4, 3, **bad)
        with pytest.raises(type(theirs.value), match=str(theirs.value)[:20]):
            nn.Conv2d(3, 4, 3, **bad)


# -- pooling --------------------------------------------------------------------------------

def test_pooling_torch_free():
    x = tg.tensor(np.arange(16.0).reshape(1, 1, 4, 4), requires_grad=True)
    y = F.max_pool2d(x, 2)
    np.testing.assert_array_equal(val(y), [[[[5.0, 7.0], [13.0, 15.0]]]])
    y.sum().backward()
    np.testing.assert_array_equal(val(x.grad)[0, 0], [[0, 0, 0, 0], [0, 1, 0, 1],
                                                      [0, 0, 0, 0], [0, 1, 0, 1]])
    np.testing.assert_array_equal(val(F.avg_pool2d(x, 2)), [[[[2.5, 4.5], [10.5, 12.5]]]])
    out, idx = nn.MaxPool2d(2, return_indices=True)(x)
    np.testing.assert_array_equal(val(idx), [[[[5, 7], [13, 15]]]])
    assert repr(nn.MaxPool2d(2)) == ("MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, "
                                     "ceil_mode=False)")
    with pytest.raises(RuntimeError, match="pad should be at most half"):
        F.max_pool2d(x, 2, padding=2)


@needs_torch
@pytest.mark.parametrize("make,shape", [
    (lambda m: m.MaxPool2d(2), (2, 3, 6, 5)),
    (lambda m: m.MaxPool2d((3, 2), stride=(2, 1), padding=1, dilation=(1, 2), ceil_mode=True),
     (2, 2, 7, 6)),
    (lambda m: m.MaxPool2d(3, 2, 1), (3, 6, 6)),
    (lambda m: m.AvgPool2d(2), (2, 3, 6, 5)),
    (lambda m: m.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False), (2, 2, 8, 7)),
    (lambda m: m.AvgPool2d((2, 3), divisor_override=5), (1, 2, 4, 6)),
    (lambda m: m.AvgPool2d(2, 1, 1), (3, 5, 5)),
    (lambda m: m.MaxPool1d(3, 2, 1), (2, 3, 9)),
    (lambda m: m.AvgPool1d(2), (2, 3, 9)),
], ids=["max", "max-options", "max-unbatched", "avg", "avg-options", "avg-divisor",
        "avg-unbatched", "max1d", "avg1d"])
def test_pooling_matches_torch(make, shape):
    ours, theirs = make(nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    run_both(ours, theirs, RNG.normal(size=shape))


@needs_torch
def test_max_pool_indices_match_torch():
    x = RNG.normal(size=(2, 3, 7, 6))
    for kw in ({"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1,
                                    "ceil_mode": True}):
        a, ia = F.max_pool2d(tg.tensor(x), return_indices=True, **kw)
        b, ib = TF.max_pool2d(torch.tensor(x), return_indices=True, **kw)
        np.testing.assert_array_equal(val(a), b.numpy())
        np.testing.assert_array_equal(val(ia), ib.numpy())


# -- hooks ----------------------------------------------------------------------------------

def _hook_log(m):
    """Register the same hooks on ``m`` (ours or PyTorch's) and return the log they write."""
    log = []
    lin = m[0]
    h1 = lin.register_forward_pre_hook(lambda mod, args: log.append("pre1"))
    lin.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    h3 = lin.register_forward_hook(lambda mod, args, out: log.append(("post", tuple(out.shape))))
    lin.register_forward_hook(lambda mod, args, out: out + 1)
    lin.register_forward_pre_hook(lambda mod, args: log.append("first"), prepend=True)
    lin.register_forward_hook(lambda mod, args, kwargs, out: log.append(("kw", sorted(kwargs))),
                              with_kwargs=True)
    return log, (h1, h3)


def test_forward_hooks_torch_free():
    m = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    log, (h1, h3) = _hook_log(m)
    x = tg.ones(4, 2)
    y = m[0](x)
    with tg.no_grad():
        ref = F.linear(x * 2, m[0].weight, m[0].bias) + 1
    np.testing.assert_allclose(val(y), val(ref))
    assert log == ["first", "pre1", ("post", (4, 3)), ("kw", [])]
    h1.remove()
    h3.remove()
    h3.remove()                                         # twice is fine
    log.clear()
    m(x)
    assert log == ["first", ("kw", [])]
    calls = []
    with m[1].register_forward_hook(lambda *a: calls.append(1)):
        m(x)
    m(x)
    assert calls == [1]                                  # removed on leaving the block
    # a pre-hook returning a non-tuple replaces the single argument
    lin = nn.Linear(2, 2)
    lin.register_forward_pre_hook(lambda mod, args: tg.zeros(1, 2))
    np.testing.assert_allclose(val(lin(tg.ones(5, 2))), val(lin.bias)[None])
    # with_kwargs pre-hook returns (args, kwargs)
    mod = nn.Identity()
    mod.register_forward_pre_hook(lambda mod, a, k: ((a[0] + 1,), k), with_kwargs=True)
    assert val(mod(tg.tensor(1.0))) == 2.0


@needs_torch
def test_forward_hooks_match_torch():
    ours = nn.Sequential(nn.Linear(2, 3), nn.ReLU())
    theirs = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU())
    same_weights(ours, theirs)
    (log1, _), (log2, _) = _hook_log(ours), _hook_log(theirs)
    x = RNG.normal(size=(4, 2))
    a, b = ours(tg.tensor(x)), theirs(torch.tensor(x))
    np.testing.assert_allclose(val(a), val(b), rtol=1e-12)
    assert log1 == log2


# -- containers -----------------------------------------------------------------------------

@needs_torch
def test_containers_match_torch():
    def build(m):
        seq = m.Sequential(m.Linear(2, 3), m.ReLU(), m.Linear(3, 4))
        seq.append(m.Tanh())
        seq.insert(1, m.Identity())
        del seq[2]
        seq.extend([m.Linear(4, 1)])
        d = m.ModuleDict({"a": m.Linear(1, 2), "b": m.Flatten()})
        d["c"] = m.LayerNorm(2)
        return m.ModuleDict(OrderedDict([("seq", seq), ("d", d)]))

    ours, theirs = build(nn), build(torch.nn)
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    seq, tseq = ours["seq"], theirs["seq"]
    assert len(seq) == len(tseq) == 5
    assert type(seq[-1]).__name__ == type(tseq[-1]).__name__ == "Linear"
    assert [type(s).__name__ for s in seq[1:3]] == [type(s).__name__ for s in tseq[1:3]]
    assert list(ours["d"].keys()) == list(theirs["d"].keys()) == ["a", "b", "c"]
    assert "a" in ours["d"] and len(ours["d"]) == 3


# -- a small CNN, three training steps beside PyTorch's --------------------------------------

def _cnn(m):
    return m.Sequential(
        m.Conv2d(1, 4, 3, padding=1), m.BatchNorm2d(4), m.ReLU(), m.MaxPool2d(2),
        m.Conv2d(4, 6, 3, stride=1, groups=2), m.ReLU(), m.AvgPool2d(2, ceil_mode=True),
        m.Flatten(), m.Linear(6 * 1 * 1, 8), m.LayerNorm(8), m.Dropout(0.0), m.Linear(8, 3))


@needs_torch
@pytest.mark.parametrize("opt,kw", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True,
                                                 weight_decay=1e-3)),
                                    ("Adam", dict(lr=0.01)), ("RMSprop", dict(lr=0.01))])
def test_small_cnn_trains_like_torch(opt, kw):
    ours, theirs = same_weights(_cnn(nn), _cnn(torch.nn))
    x = RNG.normal(size=(6, 1, 6, 6))
    y = RNG.integers(0, 3, size=6)
    gopt = getattr(tg.optim, opt)(ours.parameters(), **kw)
    topt = getattr(torch.optim, opt)(theirs.parameters(), **kw, foreach=False)
    for step in range(3):
        gopt.zero_grad()
        topt.zero_grad()
        gl = F.cross_entropy(ours(tg.tensor(x)), tg.tensor(y))
        tl = TF.cross_entropy(theirs(torch.tensor(x)), torch.tensor(y))
        gl.backward()
        tl.backward()
        np.testing.assert_allclose(gl.item(), tl.item(), rtol=1e-10, err_msg=f"step {step}")
        gopt.step()
        topt.step()
    for (n, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        np.testing.assert_allclose(a, b.numpy(), rtol=1e-8, atol=1e-10, err_msg=n)
    ours.eval()
    theirs.eval()
    np.testing.assert_allclose(val(ours(tg.tensor(x))), val(theirs(torch.tensor(x))), rtol=1e-8,
                               atol=1e-10)


def test_small_cnn_learns_without_torch():
    tg.manual_seed(0)
    model = _cnn(nn)
    opt = tg.optim.Adam(model.parameters(), lr=0.02)
    x = tg.tensor(RNG.normal(size=(12, 1, 6, 6)))
    y = tg.tensor(RNG.integers(0, 3, size=12))
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0]


# -- the layers' rows and compiled replay -----------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda x: F.conv1d(x.reshape(1, 1, -1), tg.ones(1, 1, 2)).sum(),
    lambda x: F.layer_norm(x, (4,)).sum(),
    lambda x: F.max_pool1d(x.reshape(1, 1, -1), 2).sum(),
    lambda x: F.embedding(tg.tensor([0, 1]), x.reshape(2, 2)).sum(),
], ids=["conv", "layer_norm", "max_pool", "embedding"])
def test_replay_refuses_the_layer_rows_by_name(fn):
    """tg.compile and tape.compile have no elementwise form of these rows: they refuse,
    naming the row, rather than guess."""
    with pytest.raises(NotImplementedError, match="has no elementwise form"):
        tg.compile(fn)(np.arange(4.0))
    with tg.Tape() as tape:
        x = tg.tensor(np.arange(4.0), requires_grad=True)
        y = fn(x)
    with pytest.raises(NotImplementedError, match="has no elementwise form"):
        tape.compile([x], y)


def test_create_graph_through_conv_and_norm():
    """Second derivatives through conv, batch norm and max pooling (rules in tapegrad ops)."""
    x = tg.tensor(RNG.normal(size=(2, 2, 4, 4)), requires_grad=True)
    w = tg.tensor(RNG.normal(size=(3, 2, 2, 2)), requires_grad=True)

    def f(x, w):
        h = F.batch_norm(F.conv2d(x, w), None, None, training=True)
        return (F.max_pool2d(h, 2) ** 2).sum()

    gx, gw = tg.autograd.grad(f(x, w), (x, w), create_graph=True)
    assert gx.requires_grad and gw.requires_grad
    v = RNG.normal(size=(3, 2, 2, 2))
    (hw,) = tg.autograd.grad((gw * tg.tensor(v)).sum(), (w,))
    eps = 1e-5
    plus = tg.tensor(val(w) + eps * v, requires_grad=True)
    minus = tg.tensor(val(w) - eps * v, requires_grad=True)
    (gplus,) = tg.autograd.grad(f(x, plus), (plus,))
    (gminus,) = tg.autograd.grad(f(x, minus), (minus,))
    np.testing.assert_allclose(val(hw), (val(gplus) - val(gminus)) / (2 * eps), rtol=1e-5,
                               atol=1e-6)


# -- dtype moves, ParameterDict, adaptive pooling, more initialisers --------------------------

def test_module_dtype_moves_keep_the_tensors():
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    w = model[0].weight
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    assert model.float() is model
    assert w.dtype == tg.float32 and model[0].weight is w
    assert model[1].running_mean.dtype == tg.float32
    assert model[1].num_batches_tracked.dtype == tg.int64          # not a float: kept
    loss = model(tg.ones(4, 3, dtype=tg.float32)).sum()
    loss.backward()
    opt.step()                                                    # the optimizer still holds w
    assert w.dtype == tg.float32 and w.grad.dtype == tg.float32
    model.double()
    assert w.dtype == tg.float64
    assert model.to("cpu") is model and model.to(tg.float32) is model and w.dtype == tg.float32
    assert model.cpu() is model
    with pytest.raises(AssertionError, match="CUDA"):
        model.cuda()
    with pytest.raises(AssertionError, match="CUDA"):
        model.to("cuda")


@needs_torch
def test_parameter_dict_and_adaptive_pool_match_torch():
    def build(m):
        return m.ParameterDict({"b": m.Parameter(m.ones(2)), "a": m.Parameter(m.zeros(3))})

    ours = build(types_ns(nn, tg))
    theirs = build(types_ns(torch.nn, torch))
    assert list(ours.keys()) == list(theirs.keys()) == ["a", "b"]      # a dict: sorted
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert "a" in ours and len(ours) == 2
    for size, shape in (((1, 1), (2, 3, 4, 6)), (2, (3, 4, 6)), ((None, 3), (1, 2, 4, 6)),
                        (4, (1, 2, 5, 7)), ((3, 2), (2, 2, 7, 5))):
        for cls in ("AdaptiveAvgPool2d", "AdaptiveMaxPool2d"):
            ours, theirs = getattr(nn, cls)(size), getattr(torch.nn, cls)(size)
            assert repr(ours) == repr(theirs)
            run_both(ours, theirs, RNG.normal(size=shape), node=False)
    for cls in ("AdaptiveAvgPool1d", "AdaptiveMaxPool1d"):
        run_both(getattr(nn, cls)(3), getattr(torch.nn, cls)(3), RNG.normal(size=(2, 3, 7)),
                 node=False)


def types_ns(nn_mod, lib):
    """``nn``'s names with ``ones``/``zeros`` of the library (for one build function)."""
    class NS:
        pass
    ns = NS()
    ns.ParameterDict, ns.Parameter = nn_mod.ParameterDict, nn_mod.Parameter
    ns.ones = lambda n: lib.ones(n, dtype=lib.float64)
    ns.zeros = lambda n: lib.zeros(n, dtype=lib.float64)
    return ns


def test_trunc_normal_and_orthogonal():
    import tapegrad.nn.init as init
    tg.manual_seed(0)
    w = init.trunc_normal_(tg.zeros(200, 100), std=0.5, a=-0.6, b=0.4)
    assert val(w).min() >= -0.6 and val(w).max() <= 0.4
    q = val(init.orthogonal_(tg.zeros(4, 6), gain=2.0))
    np.testing.assert_allclose(q @ q.T, 4.0 * np.eye(4), atol=1e-12)
    q = val(init.orthogonal_(tg.zeros(6, 2, 2)))
    np.testing.assert_allclose(q.reshape(6, 4).T @ q.reshape(6, 4), np.eye(4), atol=1e-12)
    with pytest.raises(ValueError):
        init.orthogonal_(tg.zeros(3))


# every row of ops/nn_array_ops.py is reached by a functional with NN_CASES in tests/test_nn.py
# (there checked against finite differences, PyTorch, and Hessian-vector products: the
# transposed-convolution and weight rows are the convolution's first and second derivatives)
ROW_FUNCTIONALS = {"conv": "conv2d", "conv_transpose": "conv_transpose2d", "conv_weight": "conv2d",
                   "max_pool2d": "max_pool2d", "avg_pool2d": "avg_pool2d",
                   "layer_norm": "layer_norm", "batch_norm": "batch_norm",
                   "embedding": "embedding", "huber_loss": "huber_loss", "constant_pad": "pad",
                   "index_pad": "pad", "unfold": "unfold", "fold": "fold",
                   "soft_margin_loss_backward": "soft_margin_loss",
                   "multi_margin_loss_backward": "multi_margin_loss"}


def test_every_layer_row_has_a_functional_with_cases():
    from tapegrad.ops import nn_array_ops
    from tapegrad.ops.array_ops import ARRAY_OPS
    rows = {n for n, op in ARRAY_OPS.items() if op.forward.__module__ == nn_array_ops.__name__}
    assert rows == set(ROW_FUNCTIONALS), "add the new row to ROW_FUNCTIONALS and NN_CASES"
    assert set(ROW_FUNCTIONALS.values()) <= set(F.__all__)


# -- backward hooks -------------------------------------------------------------------------

def _backward_hook_log(m, lib):
    """The same backward hooks on ``m`` (ours or PyTorch's); they log what they see (as
    NumPy) and double grad_input of the first layer and halve grad_output of the last."""
    log = []

    def shapes(gs):
        return [None if g is None else np.round(val(g), 12).tolist() for g in gs]

    m[0].register_full_backward_hook(
        lambda mod, gi, go: (log.append(("full0", shapes(gi), shapes(go))),
                             None if gi[0] is None else (gi[0] * 2,))[1])
    m[2].register_full_backward_pre_hook(
        lambda mod, go: (log.append(("pre2", shapes(go))), (go[0] * 0.5,))[1])
    h = m[2].register_full_backward_hook(lambda mod, gi, go: log.append(("full2", shapes(gi),
                                                                          shapes(go))))
    return log, h


@needs_torch
@pytest.mark.filterwarnings("ignore:Full backward hook is firing")   # both libraries warn
@pytest.mark.parametrize("input_grad", [True, False])
def test_backward_hooks_match_torch(input_grad):
    ours = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    same_weights(ours, theirs)
    (log1, h1), (log2, h2) = _backward_hook_log(ours, tg), _backward_hook_log(theirs, torch)
    x = RNG.normal(size=(5, 3))
    gx, tx = tg.tensor(x, requires_grad=input_grad), torch.tensor(x, requires_grad=input_grad)
    a, b = ours(gx), theirs(tx)
    assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__ == "BackwardHookFunctionBackward"
    a.sum().backward()
    b.sum().backward()
    assert log1 == log2
    if input_grad:
        np.testing.assert_allclose(val(gx.grad), val(tx.grad), rtol=1e-12)
    for (n, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(val(p.grad), val(q.grad), rtol=1e-12, err_msg=n)
    h1.remove()
    h2.remove()
    log1.clear()
    log2.clear()
    ours(gx).sum().backward()
    theirs(tx).sum().backward()
    assert log1 == log2 and [e[0] for e in log1] == ["pre2", "full0"]



# -- more activation and loss modules -----------------------------------------------------------

ACTIVATIONS = [
    lambda m: m.ReLU6(), lambda m: m.Hardtanh(-2.0, 3.0), lambda m: m.SELU(),
    lambda m: m.CELU(0.5), lambda m: m.Mish(), lambda m: m.Softsign(), lambda m: m.LogSigmoid(),
    lambda m: m.Softmin(dim=1), lambda m: m.Hardswish(), lambda m: m.Hardsigmoid(),
    lambda m: m.Tanhshrink(), lambda m: m.Softshrink(0.3), lambda m: m.Hardshrink(0.3),
    lambda m: m.Threshold(0.1, 20.0), lambda m: m.GLU(1), lambda m: m.PReLU(),
    lambda m: m.PReLU(6, init=0.1)]


@needs_torch
@pytest.mark.parametrize("k", range(len(ACTIVATIONS)))
def test_more_activation_modules_match_torch(k):
    ours, theirs = ACTIVATIONS[k](nn), ACTIVATIONS[k](torch.nn)
    assert repr(ours) == repr(theirs)
    x = RNG.normal(size=(4, 6, 3)) * 3
    same_weights(ours, theirs)
    # PyTorch's hardsigmoid backward multiplies by the float32 1/6
    run_both(ours, theirs, x, rtol=1e-12, node=False,
             grad_rtol=1e-7 if isinstance(ours, nn.Hardsigmoid) else 1e-10)
    assert repr(ACTIVATIONS[k](nn)) == repr(ACTIVATIONS[k](torch.nn))
    assert repr(nn.ReLU6(inplace=True)) == repr(torch.nn.ReLU6(inplace=True))


LOSSES = [
    (lambda m: m.KLDivLoss(reduction="batchmean"), 2),
    (lambda m: m.KLDivLoss(reduction="sum", log_target=True), 2),
    (lambda m: m.SoftMarginLoss(), "sign"), (lambda m: m.MarginRankingLoss(0.2), "pair"),
    (lambda m: m.MultiLabelSoftMarginLoss(reduction="sum"), "sign-rows"),
    (lambda m: m.HingeEmbeddingLoss(margin=0.5), "sign"),
    (lambda m: m.CosineEmbeddingLoss(0.1, reduction="none"), "pair-rows"),
    (lambda m: m.PoissonNLLLoss(), 2), (lambda m: m.PoissonNLLLoss(log_input=False, full=True), 2),
    (lambda m: m.GaussianNLLLoss(), 3), (lambda m: m.TripletMarginLoss(swap=True), 3),
    (lambda m: m.CosineSimilarity(dim=1), 2), (lambda m: m.PairwiseDistance(p=1.0), 2),
]


@needs_torch
@pytest.mark.parametrize("k", range(len(LOSSES)))
def test_more_loss_modules_match_torch(k):
    make, kind = LOSSES[k]
    ours, theirs = make(nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    rng = np.random.default_rng(k)
    sign = np.where(rng.random(4) < 0.5, -1.0, 1.0)
    if kind == "sign":
        arrays, consts = [rng.normal(size=4)], [sign]
    elif kind == "pair":
        arrays, consts = [rng.normal(size=4), rng.normal(size=4)], [sign]
    elif kind == "pair-rows":
        arrays, consts = [rng.normal(size=(4, 3)), rng.normal(size=(4, 3))], [sign]
    elif kind == "sign-rows":   # (multi-label targets: 0/1 per class)
        arrays, consts = [rng.normal(size=(4, 3))], [(rng.random((4, 3)) < 0.5) * 1.0]
    else:
        arrays, consts = [rng.uniform(0.2, 2.0, size=(4, 3)) for _ in range(kind)], []
    gs = [tg.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    a = ours(*gs, *[tg.tensor(c) for c in consts])
    b = theirs(*ts, *[torch.tensor(c) for c in consts])
    np.testing.assert_allclose(val(a), val(b), rtol=1e-12, atol=1e-14)
    a.sum().backward()
    b.sum().backward()
    for g, t in zip(gs, ts):
        np.testing.assert_allclose(val(g.grad), val(t.grad), rtol=1e-10, atol=1e-13)



@needs_torch
def test_conv_transpose_output_size_and_init_match_torch():
    ours, theirs = same_weights(nn.ConvTranspose2d(2, 3, 3, stride=2),
                                torch.nn.ConvTranspose2d(2, 3, 3, stride=2))
    x = RNG.normal(size=(1, 2, 4, 4))
    a = ours(tg.tensor(x), output_size=[10, 10])
    b = theirs(torch.tensor(x), output_size=[10, 10])
    assert a.shape == tuple(b.shape) == (1, 3, 10, 10)
    np.testing.assert_allclose(val(a), val(b), rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError):
        ours(tg.tensor(x), output_size=[12, 12])
    tg.manual_seed(0)
    torch.manual_seed(0)
    g, t = nn.ConvTranspose2d(16, 8, 4), torch.nn.ConvTranspose2d(16, 8, 4)
    assert g.weight.shape == tuple(t.weight.shape) == (16, 8, 4, 4)
    assert abs(val(g.weight).max() / t.weight.max().item() - 1) < 0.05
    bound = 1 / math.sqrt(8 * 16)                     # the fan-in of the weight's layout
    assert np.abs(val(g.bias)).max() <= bound and np.abs(val(t.bias)).max() <= bound



@needs_torch
@pytest.mark.parametrize("make,shape", [
    (lambda m: m.GroupNorm(2, 6), (3, 6, 4)),
    (lambda m: m.GroupNorm(3, 6, affine=False, eps=1e-3), (2, 6, 2, 3)),
    (lambda m: m.InstanceNorm2d(3), (2, 3, 4, 5)),
    (lambda m: m.InstanceNorm1d(3, affine=True, track_running_stats=True), (4, 3, 6)),
    (lambda m: m.InstanceNorm2d(3, momentum=None, track_running_stats=True), (3, 4, 5)),
    (lambda m: m.Upsample(scale_factor=2), (2, 3, 4, 5)),
    (lambda m: m.Upsample(size=(5, 7), mode="bilinear"), (2, 3, 4, 5)),
    (lambda m: m.UpsamplingBilinear2d(scale_factor=1.5), (2, 3, 4, 5)),
    (lambda m: m.UpsamplingNearest2d(size=3), (2, 3, 4, 5)),
    (lambda m: m.PixelShuffle(2), (2, 8, 3, 2)),
    (lambda m: m.PixelUnshuffle(2), (2, 2, 4, 6)),
], ids=["group", "group-no-affine", "instance", "instance-1d-running", "instance-unbatched",
        "nearest", "bilinear", "bilinear-corners", "nearest-size", "pixel-shuffle",
        "pixel-unshuffle"])
def test_group_instance_norm_and_resampling_match_torch(make, shape):
    ours, theirs = same_weights(make(nn), make(torch.nn))
    assert repr(ours) == repr(theirs)
    with torch.no_grad():
        for p in theirs.parameters():
            p.normal_()
    ours.load_state_dict(theirs.state_dict())
    for _ in range(2):
        run_both(ours, theirs, RNG.normal(size=shape) * 2, node=False)
        for (n, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
            np.testing.assert_allclose(val(a), val(b), rtol=1e-12, atol=1e-14, err_msg=n)
    ours.eval()
    theirs.eval()
    run_both(ours, theirs, RNG.normal(size=shape), node=False)


# -- attention ------------------------------------------------------------------------------

def _attention_run(ours, theirs, arrays, masks, **kw):
    gs = [tg.tensor(a, requires_grad=True) for a in arrays]
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    a = ours(*gs, **{k: tg.tensor(v) for k, v in masks.items()}, **kw)
    b = theirs(*ts, **{k: torch.tensor(v) for k, v in masks.items()}, **kw)
    a, b = (a if isinstance(a, tuple) else (a,)), (b if isinstance(b, tuple) else (b,))
    weights = []
    for u, v in zip(a, b):
        if v is None:
            assert u is None
            continue
        np.testing.assert_allclose(val(u), val(v), rtol=1e-11, atol=1e-13)
        weights.append(np.cos(np.arange(v.numel())).reshape(tuple(v.shape)))
    sum((u * tg.tensor(w)).sum() for u, w in zip([x for x in a if x is not None], weights)) \
        .backward()
    sum((v * torch.tensor(w)).sum() for v, w in zip([x for x in b if x is not None], weights)) \
        .backward()
    for g, t in zip(gs, ts):
        np.testing.assert_allclose(val(g.grad), val(t.grad), rtol=1e-10, atol=1e-12)
    for (n, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(val(p.grad), val(q.grad), rtol=1e-10, atol=1e-12, err_msg=n)


@needs_torch
@pytest.mark.parametrize("kw,masks,batch_first", [
    ({}, {}, False),
    ({"average_attn_weights": False}, {"key_padding_mask": np.array([[False, False, True, False],
                                                                     [False, True, False, False]])},
     True),
    ({"need_weights": False}, {"attn_mask": np.triu(np.ones((3, 4), bool), 1)}, False),
    ({}, {"attn_mask": RNG.normal(size=(3, 4))}, False),
], ids=["plain", "padding-mask", "bool-mask", "float-mask"])
def test_multihead_attention_matches_torch(kw, masks, batch_first):
    ours, theirs = nn.MultiheadAttention(6, 2, batch_first=batch_first), \
        torch.nn.MultiheadAttention(6, 2, batch_first=batch_first)
    same_weights(ours, theirs)
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    q = RNG.normal(size=(2, 3, 6) if batch_first else (3, 2, 6))
    k = RNG.normal(size=(2, 4, 6) if batch_first else (4, 2, 6))
    v = RNG.normal(size=k.shape)
    _attention_run(ours, theirs, [q, k, v], masks, **kw)


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"norm_first": True, "activation": "gelu",
                                     "batch_first": True}])
def test_transformer_encoder_matches_torch(kw):
    def build(m):
        layer = m.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kw)
        return m.TransformerEncoder(layer, 2, norm=m.LayerNorm(8), enable_nested_tensor=False)

    ours, theirs = same_weights(build(nn), build(torch.nn))
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    src = RNG.normal(size=(3, 5, 8))
    # batch_first: 3 sequences of 5 steps, the last two steps of each padded
    masks = {"src_key_padding_mask": np.array([[False] * 3 + [True] * 2] * 3)} if kw else {}
    _attention_run(ours, theirs, [src], masks)
    ours.eval()
    theirs.eval()
    with torch.no_grad():
        np.testing.assert_allclose(val(ours(tg.tensor(src))), val(theirs(torch.tensor(src))),
                                   rtol=1e-11, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("kw", [{}, {"norm_first": True, "activation": "gelu",
                                     "batch_first": True}])
def test_transformer_decoder_matches_torch(kw):
    def build(m):
        layer = m.TransformerDecoderLayer(8, 2, dim_feedforward=16, dropout=0.0, **kw)
        return m.TransformerDecoder(layer, 2, norm=m.LayerNorm(8))

    ours, theirs = same_weights(build(nn), build(torch.nn))
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    tgt, memory = RNG.normal(size=(4, 3, 8)), RNG.normal(size=(5, 3, 8))
    masks = {"tgt_mask": np.triu(np.ones((4, 4), bool), 1)}
    if kw:   # batch_first: 4 targets of 3 steps, 4 memories of 5 steps, the last one padded
        tgt, memory = RNG.normal(size=(4, 3, 8)), RNG.normal(size=(4, 5, 8))
        masks = {"tgt_mask": np.triu(np.ones((3, 3), bool), 1),
                 "memory_key_padding_mask": np.array([[False] * 4 + [True]] * 4)}
    _attention_run(ours, theirs, [tgt, memory], masks)


@needs_torch
def test_transformer_matches_torch():
    def build(m):
        return m.Transformer(d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=1,
                             dim_feedforward=16, dropout=0.0, batch_first=True)

    ours, theirs = same_weights(build(nn), build(torch.nn))
    assert repr(ours) == repr(theirs)
    mask = nn.Transformer.generate_square_subsequent_mask(4)
    np.testing.assert_array_equal(val(mask), val(torch.nn.Transformer
                                                 .generate_square_subsequent_mask(4).double()))
    src, tgt = RNG.normal(size=(2, 5, 8)), RNG.normal(size=(2, 4, 8))
    _attention_run(ours, theirs, [src, tgt], {"tgt_mask": val(mask)})
    for lib, model in ((tg, ours), (torch, theirs)):
        with pytest.raises(RuntimeError, match="the batch number of src and tgt"):
            model(lib.tensor(src), lib.tensor(tgt[:1]))


def test_transformer_initialisation_and_gradcheck():
    tg.manual_seed(0)
    model = nn.Transformer(d_model=4, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                           dim_feedforward=6, dropout=0.0)
    w = model.encoder.layers[0].linear1.weight
    bound = math.sqrt(6 / (4 + 6))                       # xavier_uniform_ over every matrix
    assert 0 < float(w.abs().max()) <= bound and float(w.abs().max()) > bound / 2
    src = tg.tensor(RNG.normal(size=(3, 2, 4)), requires_grad=True)
    tgt = tg.tensor(RNG.normal(size=(2, 2, 4)), requires_grad=True)
    mask = nn.Transformer.generate_square_subsequent_mask(2)
    assert tg.autograd.gradcheck(lambda s, t: model(s, t, tgt_mask=mask), (src, tgt))


def test_module_list_repr_collapses_repeats():
    m = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)] + [nn.ReLU(), nn.ReLU()])
    assert repr(m) == ("ModuleList(\n  (0-2): 3 x Linear(in_features=2, out_features=2, "
                       "bias=True)\n  (3-4): 2 x ReLU()\n)")



@needs_torch
def test_unfold_fold_modules_match_torch():
    for ours, theirs, shape in ((nn.Unfold((2, 3), padding=1), torch.nn.Unfold((2, 3), padding=1),
                                 (2, 3, 5, 6)),
                                (nn.Fold((5, 6), 2, stride=(1, 2)),
                                 torch.nn.Fold((5, 6), 2, stride=(1, 2)), (2, 12, 12))):
        assert repr(ours) == repr(theirs)
        run_both(ours, theirs, RNG.normal(size=shape))
