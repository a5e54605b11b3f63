"""``tapegrad.nn`` and ``tapegrad.optim``: modules, losses, initialisers, optimizers, training.

Gradients are checked against central finite differences in float64.  The comparisons with
PyTorch are in ``tests/test_torch_nn.py`` (CI runs the whole suite again with torch
installed).  The two training runs use the data sets and models of
``benchmarks/train_mlp.py`` (loaded from its path).
"""
import importlib.util
import json
import math
import os
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn as nn
import tapegrad.nn.functional as F
import tapegrad.nn.init as init
import tapegrad.optim as optim
from tapegrad.ops import nn_ops
from tapegrad.ops.array_ops import ARRAY_OPS

REPO = Path(__file__).resolve().parent.parent


def _load_bench():
    path = REPO / "benchmarks" / "train_mlp.py"
    spec = importlib.util.spec_from_file_location("_train_mlp", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def val(t):
    return np.asarray(t.detach()._value)


def numgrad(f, x, eps=1e-6):
    """Central differences of the scalar function ``f`` (ndarray -> float) at ``x``."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def check_grad(fn, *arrays, rtol=1e-6, atol=1e-8):
    """``fn(*tensors)`` -> scalar tensor; its gradients agree with finite differences."""
    ts = [tg.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*ts)
    out.backward()
    for k, (a, t) in enumerate(zip(arrays, ts)):
        def f(v, k=k):
            args = [tg.tensor(v) if j == k else tg.tensor(arrays[j]) for j in range(len(arrays))]
            with tg.no_grad():
                return fn(*args).item()
        np.testing.assert_allclose(val(t.grad), numgrad(f, a), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {k}")
    return out


# -- modules: discovery, names, state ----------------------------------------------------
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = tg.tensor(2.0, requires_grad=True)      # a 0-d parameter
        self.lin = nn.Linear(3, 2)
        self.const = tg.ones(2)                              # no grad: a plain attribute
        self.register_buffer("running", tg.zeros(2))
        self.note = "text"

    def forward(self, x):
        return self.lin(x) * self.scale + self.const


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.seq = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))

    def forward(self, x):
        return self.seq(self.first(x))


def test_parameters_discovered_by_attribute_assignment():
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["first.scale", "first.lin.weight", "first.lin.bias", "seq.0.weight",
                     "seq.0.bias", "seq.2.weight", "seq.2.bias"]
    assert len(list(net.parameters())) == 7
    assert [n for n, _ in net.named_buffers()] == ["first.running"]
    assert [n for n, _ in net.named_children()] == ["first", "seq"]
    assert [n for n, _ in net.named_modules()] == ["", "first", "first.lin", "seq", "seq.0",
                                                   "seq.1", "seq.2"]
    assert all(isinstance(p, nn.Parameter) for p in net.parameters())
    assert not isinstance(net.first.const, nn.Parameter)
    assert net.first.note == "text"
    assert net.get_parameter("seq.2.bias") is net.seq[2].bias
    assert net.get_submodule("first.lin") is net.first.lin
    with pytest.raises(AttributeError, match="'Block' object has no attribute 'missing'"):
        net.first.missing


def test_non_leaf_and_plain_tensors_are_not_parameters():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = tg.tensor([1.0, 2.0], requires_grad=True)
            self.derived = self.w * 2          # requires grad but is not a leaf
            self.data = tg.tensor([1.0])       # does not require grad
    m = M()
    assert [n for n, _ in m.named_parameters()] == ["w"]
    assert "derived" in m.__dict__ and "data" in m.__dict__


def test_parameter_factory():
    base = tg.tensor([1.0, 2.0])
    p = nn.Parameter(base)
    assert p.requires_grad and p.is_leaf and p.grad_fn is None
    assert type(p) is tg.Tensor and isinstance(p, nn.Parameter)
    assert not isinstance(base, nn.Parameter)
    assert np.shares_memory(p._value, base._value)           # like PyTorch: shares the data
    q = nn.Parameter(tg.tensor(3.0))
    assert q.shape == () and q.item() == 3.0 and q.requires_grad
    with pytest.raises(AttributeError, match="no attribute .detach."):   # as PyTorch
        nn.Parameter(np.zeros((2, 2)))
    assert not nn.Parameter(tg.ones(2), requires_grad=False).requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        nn.Parameter(tg.tensor([1, 2]))


def test_shared_and_reassigned_parameters():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2               # each parameter once
    assert [n for n, _ in seq.named_parameters()] == ["0.weight", "0.bias"]
    m = nn.Linear(2, 2)
    m.bias = None
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    assert repr(m) == "Linear(in_features=2, out_features=2, bias=False)"
    with pytest.raises(TypeError, match="cannot assign 'Tensor' as parameter 'weight'"):
        m.weight = tg.ones(2, 2)
    m.weight = tg.zeros(2, 2, requires_grad=True)       # a new parameter replaces it
    assert float(m(tg.ones(2)).sum()) == 0.0
    del m.weight
    assert [n for n, _ in m.named_parameters()] == []


def test_train_eval_propagate():
    net = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(0.5), nn.ReLU()))
    assert net.training and net[1][0].training
    assert net.eval() is net
    assert not net.training and not net[1][0].training
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError):
        net.train("yes")


def test_zero_grad():
    net = nn.Linear(3, 2)
    net(tg.ones(3)).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(p.grad is not None and float(p.grad.abs().sum()) == 0.0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_state_dict_detached_tensors_and_round_trip():
    a, b = Net(), Net()
    sd = a.state_dict()
    assert list(sd) == ["first.scale", "first.running", "first.lin.weight", "first.lin.bias",
                        "seq.0.weight", "seq.0.bias", "seq.2.weight", "seq.2.bias"]
    assert all(isinstance(v, tg.Tensor) and not v.requires_grad for v in sd.values())
    assert sd["first.scale"].shape == () and sd["first.lin.weight"].shape == (2, 3)
    snapshot = sd["first.lin.weight"].clone()
    with tg.no_grad():                                     # shares the value, as PyTorch's
        a.first.lin.weight.mul_(2.0)
    np.testing.assert_array_equal(val(sd["first.lin.weight"]), 2.0 * val(snapshot))
    sd = a.state_dict()
    keep = b.seq[0].weight
    result = b.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    assert b.seq[0].weight is keep                           # loaded in place
    x = tg.randn(5, 3)
    np.testing.assert_array_equal(val(a(x)), val(b(x)))
    kv = a.state_dict(keep_vars=True)
    assert kv["first.scale"] is a.first.scale


def test_load_state_dict_errors():
    m = nn.Linear(2, 3)
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "bias"'):
        m.load_state_dict({"weight": np.zeros((3, 2))})
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "extra"'):
        m.load_state_dict({"weight": np.zeros((3, 2)), "bias": np.zeros(3), "extra": 1.0})
    with pytest.raises(RuntimeError, match="size mismatch for weight"):
        m.load_state_dict({"weight": np.zeros((2, 3)), "bias": np.zeros(3)})
    r = m.load_state_dict({"weight": np.ones((3, 2))}, strict=False)
    assert r.missing_keys == ["bias"]
    np.testing.assert_array_equal(val(m.weight), np.ones((3, 2)))


def test_loaded_values_are_used_by_the_next_backward():
    m = nn.Linear(2, 1)
    m.load_state_dict({"weight": np.array([[1.0, 2.0]]), "bias": np.array([0.5])})
    x = tg.tensor([3.0, 4.0])
    y = m(x)
    assert y.item() == 11.5
    (y * y).backward()
    np.testing.assert_allclose(val(m.weight.grad), 2 * 11.5 * np.array([[3.0, 4.0]]))


def test_repr_like_pytorch():
    assert repr(nn.Linear(2, 3)) == "Linear(in_features=2, out_features=3, bias=True)"
    net = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Dropout(0.25),
                        nn.Sequential(nn.Linear(16, 2), nn.Tanh(), nn.Sigmoid()))
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=2, out_features=16, bias=True)\n"
        "  (1): ReLU()\n"
        "  (2): Dropout(p=0.25, inplace=False)\n"
        "  (3): Sequential(\n"
        "    (0): Linear(in_features=16, out_features=2, bias=True)\n"
        "    (1): Tanh()\n"
        "    (2): Sigmoid()\n"
        "  )\n"
        ")")
    assert repr(Block()) == ("Block(\n  (lin): Linear(in_features=3, out_features=2, bias=True)\n)")


# -- layers -------------------------------------------------------------------------------
def test_linear_shapes_and_node():
    tg.manual_seed(0)
    m = nn.Linear(3, 4)
    assert m.weight.shape == (4, 3) and m.bias.shape == (4,)
    assert m(tg.randn(5, 3)).shape == (5, 4)
    assert m(tg.randn(3)).shape == (4,)
    assert m(tg.randn(2, 5, 3)).shape == (2, 5, 4)
    assert type(m(tg.randn(5, 3)).grad_fn).__name__ == "AddmmBackward0"
    assert type(nn.Linear(3, 4, bias=False)(tg.randn(5, 3)).grad_fn).__name__ == "MmBackward0"
    with tg.no_grad():
        assert not m(tg.randn(5, 3)).requires_grad
    assert nn.Linear(3, 4, bias=False).bias is None


def test_linear_init_ranges_and_seed():
    tg.manual_seed(1)
    m = nn.Linear(400, 300)
    bound = 1 / math.sqrt(400)          # kaiming_uniform_(a=sqrt(5)) on fan_in = 400
    w, b = val(m.weight), val(m.bias)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.99 * bound
    assert abs(w.std() - bound / math.sqrt(3)) < 0.01 * bound      # uniform's std
    assert abs(w.mean()) < 0.01 * bound
    tg.manual_seed(1)
    np.testing.assert_array_equal(val(nn.Linear(400, 300).weight), w)


def test_linear_gradients_vs_finite_differences():
    rng = np.random.default_rng(0)
    x, w, b = rng.normal(size=(4, 3)), rng.normal(size=(2, 3)), rng.normal(size=2)
    c = rng.normal(size=(4, 2))
    check_grad(lambda x, w, b: (F.linear(x, w, b) * tg.tensor(c)).sum(), x, w, b)
    check_grad(lambda x, w: (F.linear(x, w) * tg.tensor(c)).sum(), x, w)
    x3 = rng.normal(size=(2, 2, 3))
    check_grad(lambda x, w, b: (F.linear(x, w, b).tanh()).sum(), x3, w, b)
    check_grad(lambda x, w, b: (F.linear(x, w, b) * tg.tensor(c[0])).sum(), x[0], w, b)


def test_sequential():
    tg.manual_seed(0)
    l1, l2 = nn.Linear(2, 3), nn.Linear(3, 1)
    seq = nn.Sequential(l1, nn.ReLU(), l2)
    assert len(seq) == 3 and seq[0] is l1 and seq[-1] is l2 and list(seq)[1].__class__ is nn.ReLU
    x = tg.randn(4, 2)
    np.testing.assert_array_equal(val(seq(x)), val(l2(l1(x).relu())))
    assert isinstance(seq[:2], nn.Sequential) and len(seq[:2]) == 2
    named = nn.Sequential(OrderedDict([("inp", nn.Linear(2, 2)), ("act", nn.Tanh())]))
    assert [n for n, _ in named.named_parameters()] == ["inp.weight", "inp.bias"]
    seq.append(nn.Sigmoid())
    assert len(seq) == 4 and 0 < float(seq(x).min()) and float(seq(x).max()) < 1
    with pytest.raises(IndexError):
        seq[4]


def test_dropout_train_and_eval():
    tg.manual_seed(0)
    drop = nn.Dropout(0.3)
    x = tg.ones(200, 100, requires_grad=True)
    y = drop(x)
    v = val(y)
    kept = v != 0
    assert abs(kept.mean() - 0.7) < 0.01
    np.testing.assert_allclose(v[kept], 1 / 0.7)
    assert type(y.grad_fn).__name__ == "MulBackward0"          # as PyTorch on CPU
    y.sum().backward()
    np.testing.assert_array_equal(val(x.grad), v)             # d(x * mask / 0.7)/dx
    drop.eval()
    assert drop(x) is x
    drop.train()
    tg.manual_seed(0)
    np.testing.assert_array_equal(val(drop(x)), v)            # seeded by tg.manual_seed
    assert float(F.dropout(x, 1.0).abs().sum()) == 0.0
    assert F.dropout(x, 0.0) is x
    with pytest.raises(ValueError, match="dropout probability"):
        nn.Dropout(1.5)
    s = tg.tensor(2.0, requires_grad=True)
    assert F.dropout(s, 0.5).item() in (0.0, 4.0)


# -- functional ---------------------------------------------------------------------------
def _log_softmax_ref(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def test_softmax_and_log_softmax():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 4))
    for dim in (0, 1, -1):
        np.testing.assert_allclose(val(F.log_softmax(tg.tensor(x), dim)), _log_softmax_ref(x, dim))
        np.testing.assert_allclose(val(F.softmax(tg.tensor(x), dim)),
                                   np.exp(_log_softmax_ref(x, dim)))
        c = rng.normal(size=(3, 4))
        check_grad(lambda t: (F.softmax(t, dim) * tg.tensor(c)).sum(), x)
        check_grad(lambda t: (F.log_softmax(t, dim) * tg.tensor(c)).sum(), x)
    big = tg.tensor([[1000.0, 0.0, -1000.0]], requires_grad=True)
    assert np.all(np.isfinite(val(F.log_softmax(big, 1))))
    np.testing.assert_allclose(val(F.softmax(big, 1)), [[1.0, 0.0, 0.0]])
    assert type(F.softmax(big, 1).grad_fn).__name__ == "SoftmaxBackward0"
    assert type(F.log_softmax(big, 1).grad_fn).__name__ == "LogSoftmaxBackward0"
    assert F.softmax(tg.tensor(3.0), 0).item() == 1.0


def _ce_ref(x, t, w=None):
    ls = _log_softmax_ref(x, 1)
    wt = np.ones(x.shape[1]) if w is None else w
    return -ls[np.arange(len(t)), t] * wt[t], wt[t]


def test_cross_entropy_values():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(6, 4)) * 3
    t = np.array([0, 3, 1, 1, 2, 0])
    per, _ = _ce_ref(x, t)
    X, T = tg.tensor(x, requires_grad=True), tg.tensor(t)
    loss = F.cross_entropy(X, T)
    assert type(loss.grad_fn).__name__ == "NllLossBackward0"
    assert loss.shape == ()
    np.testing.assert_allclose(loss.item(), per.mean())
    np.testing.assert_allclose(F.cross_entropy(X, T, reduction="sum").item(), per.sum())
    np.testing.assert_allclose(val(F.cross_entropy(X, T, reduction="none")), per)
    w = rng.random(4) + 0.5
    per_w, wt = _ce_ref(x, t, w)
    np.testing.assert_allclose(F.cross_entropy(X, T, weight=tg.tensor(w)).item(),
                               per_w.sum() / wt.sum())
    t_ign = t.copy()
    t_ign[[1, 4]] = -100
    keep = t_ign != -100
    np.testing.assert_allclose(F.cross_entropy(X, tg.tensor(t_ign)).item(), per[keep].mean())
    # numerically stable: huge logits
    huge = tg.tensor([[1000.0, -1000.0], [-1000.0, 1000.0]])
    assert F.cross_entropy(huge, tg.tensor([0, 1])).item() == 0.0
    np.testing.assert_allclose(F.cross_entropy(huge, tg.tensor([1, 1])).item(), 1000.0)
    # unbatched input (C,) with a 0-d target
    np.testing.assert_allclose(F.cross_entropy(tg.tensor(x[0]), tg.tensor(t[0])).item(), per[0])
    with pytest.raises(IndexError, match="out of bounds"):
        F.cross_entropy(X, tg.tensor([0, 1, 2, 3, 4, 0]))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.cross_entropy(X, T, reduction="avg")


def test_cross_entropy_gradients():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(5, 3))
    t = tg.tensor(np.array([2, 0, 1, 1, 2]))
    w = tg.tensor(rng.random(3) + 0.5)
    c = tg.tensor(rng.normal(size=5))
    check_grad(lambda X: F.cross_entropy(X, t), x)
    check_grad(lambda X: F.cross_entropy(X, t, reduction="sum"), x)
    check_grad(lambda X: (F.cross_entropy(X, t, reduction="none") * c).sum(), x)
    check_grad(lambda X: F.cross_entropy(X, t, weight=w), x)
    check_grad(lambda X: F.cross_entropy(X, tg.tensor([2, -100, 1, -100, 0])), x)
    check_grad(lambda X: F.cross_entropy(X, t, label_smoothing=0.2), x)
    check_grad(lambda X: F.cross_entropy(X, t, weight=w, label_smoothing=0.1), x)
    probs = rng.random((5, 3))
    probs /= probs.sum(1, keepdims=True)
    check_grad(lambda X: F.cross_entropy(X, tg.tensor(probs)), x)
    # (N, C, d): class dimension 1
    x3 = rng.normal(size=(2, 3, 4))
    t3 = tg.tensor(rng.integers(0, 3, size=(2, 4)))
    check_grad(lambda X: F.cross_entropy(X, t3), x3)
    # the fused backward is (softmax - onehot) / N
    X = tg.tensor(x, requires_grad=True)
    F.cross_entropy(X, t).backward()
    expected = np.exp(_log_softmax_ref(x, 1))
    expected[np.arange(5), val(t)] -= 1
    np.testing.assert_allclose(val(X.grad), expected / 5, rtol=1e-12)


def test_nll_loss_matches_cross_entropy():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 3))
    t = tg.tensor(np.array([2, 0, 1, 1, 2]))
    a = F.cross_entropy(tg.tensor(x), t)
    b = F.nll_loss(F.log_softmax(tg.tensor(x), 1), t)
    np.testing.assert_allclose(a.item(), b.item())
    check_grad(lambda X: F.nll_loss(F.log_softmax(X, 1), t), x)
    assert type(b.grad_fn if b.requires_grad else None).__name__ == "NoneType"


def test_mse_loss():
    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    out = check_grad(lambda a, b: F.mse_loss(a, b), x, y)
    assert type(out.grad_fn).__name__ == "MseLossBackward0"
    np.testing.assert_allclose(out.item(), ((x - y) ** 2).mean())
    np.testing.assert_allclose(F.mse_loss(tg.tensor(x), tg.tensor(y), reduction="sum").item(),
                               ((x - y) ** 2).sum())
    np.testing.assert_allclose(val(F.mse_loss(tg.tensor(x), tg.tensor(y), reduction="none")),
                               (x - y) ** 2)
    c = tg.tensor(rng.normal(size=(4, 3)))
    check_grad(lambda a, b: (F.mse_loss(a, b, reduction="none") * c).sum(), x, y)
    check_grad(lambda a, b: F.mse_loss(a, b, reduction="sum"), x, y)
    check_grad(lambda a, b: F.mse_loss(a, b), 1.5, -0.5)                    # 0-d
    check_grad(lambda a, b: F.mse_loss(a, b), x, y[0])                      # broadcast target
    np.testing.assert_allclose(nn.MSELoss()(tg.tensor(x), tg.tensor(y)).item(),
                               ((x - y) ** 2).mean())


def _bce_logits_ref(x, y, pw=1.0):
    return -(pw * y * np.log(1 / (1 + np.exp(-x))) + (1 - y) * np.log(1 - 1 / (1 + np.exp(-x))))


def test_binary_cross_entropy_with_logits():
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(4, 3)), rng.random((4, 3))
    out = check_grad(lambda a, b: F.binary_cross_entropy_with_logits(a, b), x, y)
    assert type(out.grad_fn).__name__ == "BinaryCrossEntropyWithLogitsBackward0"
    np.testing.assert_allclose(out.item(), _bce_logits_ref(x, y).mean())
    pw = rng.random(3) + 0.5
    w = rng.random((4, 3))
    np.testing.assert_allclose(
        F.binary_cross_entropy_with_logits(tg.tensor(x), tg.tensor(y), pos_weight=tg.tensor(pw),
                                           reduction="sum").item(),
        _bce_logits_ref(x, y, pw).sum())
    check_grad(lambda a, b: F.binary_cross_entropy_with_logits(a, b, pos_weight=tg.tensor(pw)),
               x, y)
    check_grad(lambda a, b: F.binary_cross_entropy_with_logits(a, b, weight=tg.tensor(w),
                                                               reduction="sum"), x, y)
    c = tg.tensor(rng.normal(size=(4, 3)))
    check_grad(lambda a, b: (F.binary_cross_entropy_with_logits(a, b, reduction="none") * c).sum(),
               x, y)
    # stable for huge logits: no inf, no nan, exact limits
    big = tg.tensor([1000.0, -1000.0, 1000.0, -1000.0], requires_grad=True)
    tgt = tg.tensor([1.0, 0.0, 0.0, 1.0])
    loss = F.binary_cross_entropy_with_logits(big, tgt, reduction="none")
    np.testing.assert_array_equal(val(loss), [0.0, 0.0, 1000.0, 1000.0])
    loss.sum().backward()
    np.testing.assert_array_equal(val(big.grad), [0.0, 0.0, 1.0, -1.0])
    with pytest.raises(ValueError, match="must be the same as input size"):
        F.binary_cross_entropy_with_logits(tg.ones(3), tg.ones(2))


def test_binary_cross_entropy_and_l1_and_leaky_relu():
    rng = np.random.default_rng(7)
    p, y = rng.random((3, 2)) * 0.8 + 0.1, rng.random((3, 2))
    out = check_grad(lambda a, b: F.binary_cross_entropy(a, b), p, y)
    np.testing.assert_allclose(out.item(), (-(y * np.log(p) + (1 - y) * np.log(1 - p))).mean())
    x, z = rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
    out = check_grad(lambda a, b: F.l1_loss(a, b), x, z)
    np.testing.assert_allclose(out.item(), np.abs(x - z).mean())
    check_grad(lambda a: F.leaky_relu(a, 0.1).sum(), x)
    np.testing.assert_allclose(val(nn.LeakyReLU(0.1)(tg.tensor(x))), np.where(x > 0, x, 0.1 * x))
    with pytest.raises(RuntimeError, match="between 0 and 1"):
        F.binary_cross_entropy(tg.tensor([1.5]), tg.tensor([1.0]))


def test_loss_modules():
    rng = np.random.default_rng(8)
    x, t = tg.tensor(rng.normal(size=(4, 3))), tg.tensor(np.array([0, 2, 1, 0]))
    assert nn.CrossEntropyLoss()(x, t).item() == F.cross_entropy(x, t).item()
    assert nn.CrossEntropyLoss(reduction="sum")(x, t).item() == \
        F.cross_entropy(x, t, reduction="sum").item()
    assert nn.NLLLoss()(x, t).item() == F.nll_loss(x, t).item()
    y = tg.tensor(rng.random((4, 3)))
    assert nn.BCEWithLogitsLoss()(x, y).item() == F.binary_cross_entropy_with_logits(x, y).item()
    assert repr(nn.CrossEntropyLoss()) == "CrossEntropyLoss()"


# -- every loss and activation of nn.functional: value, gradient, Hessian-vector product ---
# A case is (fn, arrays, options): ``fn(F, T, *xs)`` runs on tapegrad or on PyTorch (``F`` the
# functional module, ``T`` the library's tensor constructor for constants), ``xs`` are the
# differentiable inputs made from ``arrays``.  Options: node=False where PyTorch records a
# different node; torch=False where no same-valued PyTorch run exists (dropout's mask);
# grad_rtol where PyTorch's backward kernel uses a float32 constant (hardswish's 1/6, celu's
# 1/alpha).
_R = np.random.default_rng(11)
_X, _Y = _R.normal(size=(4, 3)), _R.normal(size=(4, 3))
_P, _Q = _R.uniform(0.1, 0.9, size=(4, 3)), _R.uniform(size=(4, 3))
_W3, _W4 = _R.uniform(0.5, 1.5, size=3), _R.uniform(0.5, 1.5, size=(4, 3))
_T4 = np.array([2, 0, 1, 2])
_X3, _T3 = _R.normal(size=(2, 3, 4)), _R.integers(0, 3, size=(2, 4))
_PROBS = _R.uniform(size=(4, 3))
_PROBS /= _PROBS.sum(1, keepdims=True)

NN_CASES = {
    "relu": [(lambda F, T, x: F.relu(x), [_X], {})],
    "tanh": [(lambda F, T, x: F.tanh(x), [_X], {})],
    "sigmoid": [(lambda F, T, x: F.sigmoid(x), [_X], {})],
    "leaky_relu": [(lambda F, T, x: F.leaky_relu(x, 0.2), [_X], {})],
    "softplus": [(lambda F, T, x: F.softplus(x), [_X], {}),
                 (lambda F, T, x: F.softplus(x, beta=2.0, threshold=3.0), [2 * _X], {})],
    "gelu": [(lambda F, T, x: F.gelu(x), [_X], {}),
             (lambda F, T, x: F.gelu(x, approximate="tanh"), [_X], {})],
    "silu": [(lambda F, T, x: F.silu(x), [_X], {})],
    "elu": [(lambda F, T, x: F.elu(x, alpha=0.7), [_X], {})],
    "softmax": [(lambda F, T, x: F.softmax(x, 1), [_X], {})],
    "log_softmax": [(lambda F, T, x: F.log_softmax(x, 0), [_X], {})],
    "linear": [(lambda F, T, x, w, b: F.linear(x, w, b), [_X, _Y[:2], _W3[:2]], {})],
    "dropout": [(lambda F, T, x: F.dropout(x, 0.4), [_X], {"torch": False})],
    "mse_loss": [(lambda F, T, x, y: F.mse_loss(x, y), [_X, _Y], {}),
                 (lambda F, T, x, y: F.mse_loss(x, y, reduction="none"), [_X, _Y], {}),
                 (lambda F, T, x, y: F.mse_loss(x, y, reduction="sum"), [_X, _Y[0]], {})],
    "l1_loss": [(lambda F, T, x, y: F.l1_loss(x, y), [_X, _Y], {}),
                (lambda F, T, x, y: F.l1_loss(x, y, reduction="none"), [_X, _Y], {}),
                (lambda F, T, x, y: F.l1_loss(x, y, reduction="sum"), [_X, _Y], {})],
    "smooth_l1_loss": [(lambda F, T, x, y: F.smooth_l1_loss(x, y), [2 * _X, _Y], {}),
                       (lambda F, T, x, y: F.smooth_l1_loss(x, y, reduction="none", beta=0.5),
                        [_X, _Y], {}),
                       (lambda F, T, x, y: F.smooth_l1_loss(x, y, reduction="sum", beta=0.0),
                        [_X, _Y], {"node": False})],
    "nll_loss": [(lambda F, T, x: F.nll_loss(x, T(_T4)), [_X], {}),
                 (lambda F, T, x: F.nll_loss(x, T(_T4), weight=T(_W3), ignore_index=0), [_X], {}),
                 (lambda F, T, x: F.nll_loss(x, T(_T3), reduction="none"), [_X3],
                  {"node": False})],
    "cross_entropy": [
        (lambda F, T, x: F.cross_entropy(x, T(_T4)), [_X], {}),
        (lambda F, T, x: F.cross_entropy(x, T(_T4), reduction="sum", ignore_index=1), [_X], {}),
        (lambda F, T, x: F.cross_entropy(x, T(_T4), weight=T(_W3), label_smoothing=0.2), [_X],
         {"node": False}),
        (lambda F, T, x: F.cross_entropy(x, T(_T3), reduction="none"), [_X3], {"node": False}),
        (lambda F, T, x: F.cross_entropy(x, T(_T3), weight=T(_W3)), [_X3], {}),
        (lambda F, T, x, p: F.cross_entropy(x, p, label_smoothing=0.1), [_X, _PROBS],
         {"node": False}),
        (lambda F, T, x: F.cross_entropy(x, T(_T4[0])), [_X[0]], {})],
    "binary_cross_entropy": [
        (lambda F, T, p, y: F.binary_cross_entropy(p, y), [_P, _Q], {}),
        (lambda F, T, p, y: F.binary_cross_entropy(p, y, weight=T(_W3), reduction="none"),
         [_P, _Q], {}),
        (lambda F, T, p, y, w: F.binary_cross_entropy(p, y, weight=w), [_P, _Q, _W4],
         {"torch": False})],
    "binary_cross_entropy_with_logits": [
        (lambda F, T, x, y: F.binary_cross_entropy_with_logits(x, y), [_X, _Q], {}),
        (lambda F, T, x, y: F.binary_cross_entropy_with_logits(
            x, y, weight=T(_W4), pos_weight=T(_W3), reduction="sum"), [_X, _Q], {}),
        # PyTorch has no gradient for weight and pos_weight; tapegrad has
        (lambda F, T, x, y, w, pw: F.binary_cross_entropy_with_logits(
            x, y, weight=w, pos_weight=pw, reduction="none"), [_X, _Q, _W4, _W3],
         {"torch": False})],
}

# The layers' functionals (rows of ops/nn_array_ops.py): convolution, pooling, normalisation,
# embedding, Huber loss.  Small shapes: the finite differences run one forward per element.
_CX, _CW = _R.normal(size=(2, 2, 5, 4)), _R.normal(size=(4, 2, 3, 2))
_C1X, _C1W = _R.normal(size=(2, 3, 7)), _R.normal(size=(2, 3, 3))
_RM, _RV = _R.normal(size=3), _R.uniform(0.5, 2.0, size=3)
_E, _IDX = _R.normal(size=(5, 3)), np.array([[0, 1, 4], [4, 4, 2]])
NN_CASES.update({
    "huber_loss": [(lambda F, T, x, y: F.huber_loss(x, y, delta=0.8), [2 * _X, _Y], {}),
                   (lambda F, T, x, y: F.huber_loss(x, y, reduction="none", delta=1.5),
                    [2 * _X, _Y], {})],
    "layer_norm": [(lambda F, T, x, w, b: F.layer_norm(x, (3,), w, b), [_X, _W3, _Y[0]], {}),
                   (lambda F, T, x: F.layer_norm(x, [4, 3], eps=1e-3), [_X], {})],
    "batch_norm": [(lambda F, T, x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                    [_X, _W3, _Y[0]], {}),
                   (lambda F, T, x: F.batch_norm(x, None, None, training=True), [_X3], {}),
                   (lambda F, T, x, w, b: F.batch_norm(x, T(_RM), T(_RV), w, b),
                    [_X, _W3, _Y[0]], {})],
    # (padding_idx gives its row no gradient, unlike finite differences: tests/test_nn_layers.py)
    "embedding": [(lambda F, T, w: F.embedding(T(_IDX), w), [_E], {})],
    "conv1d": [(lambda F, T, x, w, b: F.conv1d(x, w, b, stride=2, padding=1, dilation=2),
                [_C1X, _C1W, _W3[:2]], {})],
    "conv2d": [(lambda F, T, x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=1),
                [_CX, _CW, _R.normal(size=4)], {}),
               (lambda F, T, x, w: F.conv2d(x, w, padding="same", dilation=(1, 2), groups=2),
                [_CX, _CW[:, :1]], {})],
    "max_pool1d": [(lambda F, T, x: F.max_pool1d(x, 3, 2, padding=1), [_C1X], {})],
    "max_pool2d": [(lambda F, T, x: F.max_pool2d(x, 2), [_CX], {}),
                   (lambda F, T, x: F.max_pool2d(x, (3, 2), stride=2, padding=1, ceil_mode=True),
                    [_CX], {})],
    "avg_pool1d": [(lambda F, T, x: F.avg_pool1d(x, 3, 2, padding=1), [_C1X], {})],
    "pad": [(lambda F, T, x: F.pad(x, (1, 2, -1, 1), value=0.5), [_CX], {}),
            (lambda F, T, x: F.pad(x, (2, 1, 1, 3), mode="reflect"), [_CX], {}),
            (lambda F, T, x: F.pad(x, (2, 3), mode="replicate"), [_C1X], {}),
            (lambda F, T, x: F.pad(x, (1, 2, 2, 0), mode="circular"), [_CX], {"node": False})],
    "dropout1d": [(lambda F, T, x: F.dropout1d(x, 0.4), [_C1X], {"torch": False})],
    "dropout2d": [(lambda F, T, x: F.dropout2d(x, 0.4), [_CX], {"torch": False})],
    "dropout3d": [(lambda F, T, x: F.dropout3d(x[None], 0.4), [_CX], {"torch": False})],
})

# Activations, distances and losses composed of recorded ops (PyTorch records one fused node
# for most: node=False).  The inputs keep away from the kinks (hardtanh's bounds, ...).
_K = np.array([[-7.3, -3.4, -1.6, -0.7], [-0.3, 0.2, 0.55, 0.9], [1.4, 2.6, 3.3, 6.8]])
_SIGN = np.array([1, -1, 1, -1])
_N4 = _R.normal(size=(4, 5))
NN_CASES.update({
    "hardtanh": [(lambda F, T, x: F.hardtanh(x, -1.5, 2.0), [_K], {"node": False})],
    "relu6": [(lambda F, T, x: F.relu6(x), [_K], {"node": False})],
    "selu": [(lambda F, T, x: F.selu(x), [_K], {"node": False})],
    "celu": [(lambda F, T, x: F.celu(x, 0.7), [_K], {"node": False, "grad_rtol": 1e-6})],
    "mish": [(lambda F, T, x: F.mish(x), [_K], {"node": False})],
    "softsign": [(lambda F, T, x: F.softsign(x), [_K], {"node": False})],
    "logsigmoid": [(lambda F, T, x: F.logsigmoid(x), [_K], {"node": False})],
    "softmin": [(lambda F, T, x: F.softmin(x, 1), [_K], {"node": False})],
    "hardswish": [(lambda F, T, x: F.hardswish(x), [_K], {"node": False, "grad_rtol": 1e-6})],
    # (PyTorch has no second derivative of hardsigmoid: first order in test_nn_layers.py)
    "hardsigmoid": [(lambda F, T, x: F.hardsigmoid(x), [_K], {"torch": False})],
    "tanhshrink": [(lambda F, T, x: F.tanhshrink(x), [_K], {"node": False})],
    "softshrink": [(lambda F, T, x: F.softshrink(x, 0.6), [_K], {"node": False})],
    "hardshrink": [(lambda F, T, x: F.hardshrink(x, 0.6), [_K], {"node": False})],
    "threshold": [(lambda F, T, x: F.threshold(x, 0.5, -2.0), [_K], {"node": False})],
    "glu": [(lambda F, T, x: F.glu(x, 1), [_K], {"node": False})],
    "prelu": [(lambda F, T, x, w: F.prelu(x, w), [_CX, np.array([0.25, -0.5])],
               {"node": False})],
    "normalize": [(lambda F, T, x: F.normalize(x), [_N4], {}),
                  (lambda F, T, x: F.normalize(x, p=1.0, dim=0), [_N4], {"node": False})],
    "cosine_similarity": [(lambda F, T, a, b: F.cosine_similarity(a, b), [_N4, _N4[:, ::-1] * 2],
                           {"node": False})],
    "pairwise_distance": [(lambda F, T, a, b: F.pairwise_distance(a, b), [_N4, _N4[::-1].copy()],
                           {"node": False})],
    "one_hot": [(lambda F, T, x: x * F.one_hot(T(np.array([2, 0, 1, 3])), 4), [_N4[:, :4]],
                 {})],
    "kl_div": [(lambda F, T, x, t: F.kl_div(x, t, reduction="batchmean"),
                [np.log(_PROBS), _PROBS[::-1].copy()], {"node": False}),
               (lambda F, T, x, t: F.kl_div(x, t, reduction="none", log_target=True),
                [_X, _Y], {"node": False})],
    "soft_margin_loss": [(lambda F, T, x: F.soft_margin_loss(x, T(_SIGN * 1.0)), [_N4[:, :4]],
                          {"node": False})],
    # (PyTorch has no second derivative of it: no Hessian-vector products)
    "multi_margin_loss": [
        (lambda F, T, x: F.multi_margin_loss(x, T(np.array([0, 3, 1, 1]))), [_N4[:, :4]],
         {"hvp": False}),
        (lambda F, T, x: F.multi_margin_loss(x, T(np.array([2, 0, 1, 3])), p=2, margin=0.6,
                                             weight=T(np.array([0.5, 2.0, 1.5, 1.0])),
                                             reduction="none"), [_N4[:, :4]], {"hvp": False})],
    "multilabel_soft_margin_loss": [
        (lambda F, T, x: F.multilabel_soft_margin_loss(x, T((_SIGN > 0) * 1.0)), [_N4[:, :4]],
         {}),
        (lambda F, T, x, w: F.multilabel_soft_margin_loss(x, T((_SIGN > 0) * 1.0), weight=w,
                                                          reduction="none"),
         [_N4[:, :4], _N4[0, :4]], {})],
    "margin_ranking_loss": [(lambda F, T, a, b: F.margin_ranking_loss(a, b, T(_SIGN * 1.0),
                                                                      margin=0.3),
                             [_N4[0, :4], _N4[1, :4]], {"node": False})],
    "hinge_embedding_loss": [(lambda F, T, x: F.hinge_embedding_loss(x, T(_SIGN * 1.0)),
                              [_N4[:, :4]], {"node": False})],
    "poisson_nll_loss": [(lambda F, T, x, y: F.poisson_nll_loss(x, y), [_X, _P], {"node": False}),
                         (lambda F, T, x, y: F.poisson_nll_loss(x, y, log_input=False,
                                                                full=True, reduction="sum"),
                          [_P, 3 * _Q], {"node": False})],
    "gaussian_nll_loss": [(lambda F, T, x, y, v: F.gaussian_nll_loss(x, y, v), [_X, _Y, _P],
                           {"node": False}),
                          (lambda F, T, x, y, v: F.gaussian_nll_loss(x, y, v, full=True,
                                                                     reduction="none"),
                           [_X, _Y, _P[:, 0]], {"node": False})],
    "cosine_embedding_loss": [(lambda F, T, a, b: F.cosine_embedding_loss(
        a, b, T(_SIGN[:4] * 1.0), margin=0.1), [_N4, _N4[::-1].copy()], {"node": False})],
    "conv_transpose1d": [(lambda F, T, x, w, b: F.conv_transpose1d(x, w, b, stride=2, padding=1,
                                                                   output_padding=1),
                          [_C1X, _C1W.transpose(1, 0, 2).copy(), _W3[:2]], {})],
    "conv_transpose2d": [(lambda F, T, x, w: F.conv_transpose2d(x, w, stride=(2, 1), padding=1,
                                                                dilation=(1, 2), groups=2),
                          [_CX, _CW[:2]], {}),
                         (lambda F, T, x, w, b: F.conv_transpose2d(x, w, b),
                          [_CX, _CW[:2], _W3[:2]], {})],
    "group_norm": [(lambda F, T, x, w, b: F.group_norm(x, 2, w, b), [_C1X[:, :2].repeat(2, 1),
                                                                  _W3[:2].repeat(2), _W4[:, 0]],
                    {"node": False})],
    "instance_norm": [(lambda F, T, x: F.instance_norm(x), [_CX], {"node": False}),
                      (lambda F, T, x, w, b: F.instance_norm(x, T(_RM[:2]), T(_RV[:2]), w, b,
                                                             use_input_stats=False),
                       [_CX, _W3[:2], _W4[0, :2]], {"node": False})],
    "interpolate": [(lambda F, T, x: F.interpolate(x, scale_factor=2), [_CX], {"node": False}),
                    (lambda F, T, x: F.interpolate(x, size=(7, 3)), [_CX], {"node": False}),
                    (lambda F, T, x: F.interpolate(x, scale_factor=1.7, mode="bilinear"),
                     [_CX], {"node": False}),
                    (lambda F, T, x: F.interpolate(x, size=(3, 6), mode="bilinear",
                                                   align_corners=True), [_CX], {"node": False}),
                    (lambda F, T, x: F.interpolate(x, size=10, mode="linear"), [_C1X],
                     {"node": False})],
    "pixel_shuffle": [(lambda F, T, x: F.pixel_shuffle(x, 2), [_CX.reshape(2, 4, 5, 2)],
                       {"node": False})],
    "pixel_unshuffle": [(lambda F, T, x: F.pixel_unshuffle(x, 2),
                         [_CX.reshape(1, 2, 4, 10)[..., :4].copy()], {"node": False})],
    "adaptive_avg_pool1d": [(lambda F, T, x: F.adaptive_avg_pool1d(x, 3), [_C1X],
                             {"node": False})],
    "adaptive_avg_pool2d": [(lambda F, T, x: F.adaptive_avg_pool2d(x, (3, 3)), [_CX],
                             {"node": False}),
                            (lambda F, T, x: F.adaptive_avg_pool2d(x, (1, None)), [_CX],
                             {"node": False})],
    "adaptive_max_pool1d": [(lambda F, T, x: F.adaptive_max_pool1d(x, 4), [_C1X],
                             {"node": False})],
    "adaptive_max_pool2d": [(lambda F, T, x: F.adaptive_max_pool2d(x, (2, 3)), [_CX],
                             {"node": False}),
                            (lambda F, T, x: F.adaptive_max_pool2d(x, 1), [_CX],
                             {"node": False})],
    "scaled_dot_product_attention": [
        (lambda F, T, q, k, v: F.scaled_dot_product_attention(q, k, v), [_X3, _X3[::-1].copy(),
                                                                         _X3 * 0.5],
         {"node": False}),
        (lambda F, T, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                                              scale=0.3),
         [_X3, _X3[:, ::-1].copy(), _X3 * 0.5], {"node": False}),
        (lambda F, T, q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=T(np.array([[True, False, True]] * 3))),
         [_X3[..., :3], _X3[..., :3] * 2, _X3[..., 1:]], {"node": False})],
    "unfold": [(lambda F, T, x: F.unfold(x, (2, 3), padding=1, stride=2), [_CX], {}),
               (lambda F, T, x: F.unfold(x, 2, dilation=(2, 1)), [_CX[0]], {})],
    "fold": [(lambda F, T, c: F.fold(c, (5, 4), (2, 3), padding=1, stride=2),
              [_R.normal(size=(2, 12, 6))], {}),
             (lambda F, T, c: F.fold(c, (3, 4), 2), [_R.normal(size=(8, 6))], {})],
    "triplet_margin_loss": [(lambda F, T, a, p, n: F.triplet_margin_loss(a, p, n, swap=True),
                             [_N4, _N4[::-1].copy(), _N4[:, ::-1].copy()], {"node": False})],
    "avg_pool2d": [(lambda F, T, x: F.avg_pool2d(x, 2, padding=1, count_include_pad=False),
                    [_CX], {}),
                   (lambda F, T, x: F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
                    [_CX], {})],
})


# Functionals added with PyTorch's top-level names (session 38); the in-place forms on a
# copy (x * 1: an in-place change of a leaf that requires grad is refused)
NN_CASES.update({
    "rms_norm": [(lambda F, T, x, w: F.rms_norm(x, (3,), w, 1e-6), [_X, _W3], {"node": False}),
                 (lambda F, T, x: F.rms_norm(x, [4, 3]), [_X], {"node": False})],
    "bilinear": [(lambda F, T, a, b, w, c: F.bilinear(a, b, w, c),
                  [_N4, _N4[::-1].copy(), _R.normal(size=(2, 5, 5)), _W3[:2]], {"node": False})],
    # (PyTorch has no second derivative of pdist: no Hessian-vector products)
    "pdist": [(lambda F, T, x: F.pdist(x), [_N4], {"node": False, "hvp": False}),
              (lambda F, T, x: F.pdist(x, 1.5), [_N4], {"node": False, "hvp": False})],
    "alpha_dropout": [(lambda F, T, x: F.alpha_dropout(x, 0.3) * 1, [_X], {"node": False}),
                      (lambda F, T, x: F.alpha_dropout(x, 0.3, True), [_X], {"torch": False})],
    "feature_alpha_dropout": [
        (lambda F, T, x: F.feature_alpha_dropout(x, 0.3, True), [_CX], {"torch": False})],
    "rrelu": [(lambda F, T, x: F.rrelu(x, 0.1, 0.3), [_K], {"node": False}),
              (lambda F, T, x: F.rrelu(x, 0.1, 0.3, True), [_K], {"torch": False})],
    "channel_shuffle": [(lambda F, T, x: F.channel_shuffle(x, 2), [_CX.reshape(2, 4, 5, 2)],
                         {"node": False})],
    "relu_": [(lambda F, T, x: F.relu_(x * 1), [_K], {"node": False})],
    "elu_": [(lambda F, T, x: F.elu_(x * 1, 0.7), [_K], {"node": False})],
    "leaky_relu_": [(lambda F, T, x: F.leaky_relu_(x * 1, 0.2), [_K], {"node": False})],
    "hardtanh_": [(lambda F, T, x: F.hardtanh_(x * 1, -1.5, 2.0), [_K], {"node": False})],
    "selu_": [(lambda F, T, x: F.selu_(x * 1), [_K], {"node": False})],
    "celu_": [(lambda F, T, x: F.celu_(x * 1, 0.7), [_K], {"node": False, "grad_rtol": 1e-6})],
    "threshold_": [(lambda F, T, x: F.threshold_(x * 1, 0.5, -2.0), [_K], {"node": False})],
    "rrelu_": [(lambda F, T, x: F.rrelu_(x * 1, 0.1, 0.3), [_K], {"node": False})],
    # (hard=True's straight-through gradient is no derivative of its value: tested below)
    "gumbel_softmax": [(lambda F, T, x: F.gumbel_softmax(x, 0.5), [_N4], {"torch": False}),
                       (lambda F, T, x: F.gumbel_softmax(x, 2.0, dim=0), [_N4],
                        {"torch": False})],
    "triplet_margin_with_distance_loss": [
        (lambda F, T, a, p, n: F.triplet_margin_with_distance_loss(a, p, n, swap=True),
         [_N4, _N4[::-1] * 0.5, _N4 * 2.0 - 1.0], {"node": False}),
        (lambda F, T, a, p, n: F.triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda u, v: ((u - v) ** 2).sum(-1), margin=3.0,
            reduction="none"), [_N4, _N4[::-1] * 0.5, _N4 * 2.0 - 1.0], {"node": False})],
    "lp_pool1d": [(lambda F, T, x: F.lp_pool1d(x, 2, 3, 2), [_C1X], {"node": False}),
                  (lambda F, T, x: F.lp_pool1d(x.abs() + 0.1, 3.0, 2), [_C1X], {"node": False})],
    "lp_pool2d": [(lambda F, T, x: F.lp_pool2d(x, 2, 2), [_CX], {"node": False}),
                  (lambda F, T, x: F.lp_pool2d(x, float("inf"), (2, 1), (1, 1)), [_CX],
                   {"node": False})],
    "conv3d": [(lambda F, T, x, w, b: F.conv3d(x, w, b, stride=(2, 1, 1), padding=1),
                [_CX.reshape(2, 2, 5, 2, 2), _CW[:, :, :2, :].reshape(4, 2, 2, 1, 2), _W4[:, 0]],
                {})],
    "conv_transpose3d": [(lambda F, T, x, w: F.conv_transpose3d(x, w, None, 2, 0, 1),
                          [_CX.reshape(2, 2, 5, 2, 2), _CW[:2, :, :2, :].reshape(2, 2, 2, 1, 2)],
                          {})],
    "embedding_bag": [
        (lambda F, T, w: F.embedding_bag(T(np.array([1, 2, 4, 4, 3, 0])), w,
                                         T(np.array([0, 2, 2, 5]))), [_E], {"node": False}),
        (lambda F, T, w, p: F.embedding_bag(T(np.array([[1, 2], [4, 0]])), w, mode="sum",
                                            per_sample_weights=p), [_E, _W4[:2, :2].copy()],
         {"node": False, "hvp": False}),   # (PyTorch has no second derivative there)
        (lambda F, T, w: F.embedding_bag(T(np.array([1, 2, 4, 3, 3, 0])), w,
                                         T(np.array([0, 3])), mode="max"), [_E],
         {"node": False})],
    "local_response_norm": [
        (lambda F, T, x: F.local_response_norm(x, 3), [_CX], {"node": False}),
        (lambda F, T, x: F.local_response_norm(x, 4, 0.1, 0.5, 2.0), [_C1X], {"node": False})],
})


def test_every_functional_has_a_case():
    assert set(NN_CASES) == set(F.__all__), "add an NN_CASES entry for each new functional"
    rows = {n for n, op in ARRAY_OPS.items() if op.forward.__module__ == nn_ops.__name__}
    assert rows <= set(NN_CASES), "each row of ops/nn_ops.py is a functional with a case"


def _nn_scalar(F, T, fn, xs):
    """The case's output and a scalar of it (weighted by fixed random numbers)."""
    out = fn(F, T, *xs)
    c = T(np.random.default_rng(1).normal(size=tuple(out.shape)))
    return out, (out * c).sum()


def _tg_run(fn, xs):
    tg.manual_seed(0)                      # the same dropout mask on every run
    return _nn_scalar(F, tg.tensor, fn, xs)


def _tg_grads(fn, arrays, create_graph=False):
    xs = [tg.tensor(a, requires_grad=True) for a in arrays]
    out, s = _tg_run(fn, xs)
    return xs, out, s, tg.autograd.grad(s, xs, create_graph=create_graph)


def _tg_hvp(fn, arrays, vs):
    xs, _, _, gs = _tg_grads(fn, arrays, create_graph=True)
    dot = sum((g * tg.tensor(v)).sum() for g, v in zip(gs, vs))
    if not dot.requires_grad:             # the gradient is constant in the inputs
        return [np.zeros(np.shape(a)) for a in arrays]
    return [np.zeros(np.shape(a)) if h is None else val(h)
            for a, h in zip(arrays, tg.autograd.grad(dot, xs, allow_unused=True))]


def _nn_case_ids():
    return [(n, k) for n, cs in NN_CASES.items() for k in range(len(cs))]


def _directions(arrays):
    rng = np.random.default_rng(2)
    return [rng.normal(size=np.shape(a)) for a in arrays]


@pytest.mark.parametrize("name,k", _nn_case_ids())
def test_functional_gradient_and_hvp_vs_finite_differences(name, k):
    fn, arrays, opts = NN_CASES[name][k]
    _, _, _, gs = _tg_grads(fn, arrays)
    for j, (a, g) in enumerate(zip(arrays, gs)):
        def f(v, j=j):
            args = [tg.tensor(v if i == j else arrays[i]) for i in range(len(arrays))]
            return _tg_run(fn, args)[1].item()
        np.testing.assert_allclose(val(g), numgrad(f, a), rtol=1e-6, atol=1e-8,
                                   err_msg=f"gradient of input {j}")
    if not opts.get("hvp", True):
        return
    vs, h = _directions(arrays), 1e-5
    hv = _tg_hvp(fn, arrays, vs)
    # H v = (grad(x + h v) - grad(x - h v)) / 2h
    plus = _tg_grads(fn, [a + h * v for a, v in zip(arrays, vs)])[3]
    minus = _tg_grads(fn, [a - h * v for a, v in zip(arrays, vs)])[3]
    for j, (p, m, got) in enumerate(zip(plus, minus, hv)):
        np.testing.assert_allclose(got, (val(p) - val(m)) / (2 * h), rtol=1e-5, atol=1e-7,
                                   err_msg=f"Hessian-vector product, input {j}")


@pytest.mark.filterwarnings("ignore:Using a target size")   # PyTorch's, on broadcasting
@pytest.mark.parametrize("name,k", _nn_case_ids())
def test_functional_value_gradient_and_hvp_vs_pytorch(name, k):
    torch = pytest.importorskip("torch")
    fn, arrays, opts = NN_CASES[name][k]
    if not opts.get("torch", True):
        pytest.skip("no PyTorch run with the same values (random mask)")
    xs, out, _, gs = _tg_grads(fn, arrays)
    txs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    tout, ts = _nn_scalar(torch.nn.functional, torch.tensor, fn, txs)
    np.testing.assert_allclose(val(out), tout.detach().numpy(), rtol=1e-12, atol=1e-14)
    if opts.get("node", True):
        assert type(out.grad_fn).__name__ == type(tout.grad_fn).__name__
    tgs = torch.autograd.grad(ts, txs, create_graph=True)
    grad_rtol = opts.get("grad_rtol", 1e-10)
    for j, (g, tgr) in enumerate(zip(gs, tgs)):
        np.testing.assert_allclose(val(g), tgr.detach().numpy(), rtol=grad_rtol, atol=1e-13,
                                   err_msg=f"gradient of input {j}")
    if not opts.get("hvp", True):
        return
    vs = _directions(arrays)
    hv = _tg_hvp(fn, arrays, vs)
    dot = sum((g * torch.tensor(v)).sum() for g, v in zip(tgs, vs))
    ths = torch.autograd.grad(dot, txs, allow_unused=True, materialize_grads=True) \
        if dot.requires_grad else [torch.zeros(np.shape(a)) for a in arrays]
    for j, (got, th) in enumerate(zip(hv, ths)):
        np.testing.assert_allclose(got, th.detach().numpy(force=True),
                                   rtol=max(1e-9, grad_rtol), atol=1e-12,
                                   err_msg=f"Hessian-vector product, input {j}")


# -- init ---------------------------------------------------------------------------------
def test_init_functions():
    tg.manual_seed(3)
    w = tg.empty(200, 100) if hasattr(tg, "empty") else tg.zeros(200, 100)
    arr = w._value
    assert init.kaiming_uniform_(w, a=math.sqrt(5)) is w
    assert w._value is arr                                     # in place
    bound = math.sqrt(6 / ((1 + 5) * 100))
    assert np.abs(val(w)).max() <= bound and np.abs(val(w)).max() > 0.99 * bound
    init.kaiming_uniform_(w, nonlinearity="relu")
    assert np.abs(val(w)).max() <= math.sqrt(6 / 100)
    init.xavier_uniform_(w)
    xb = math.sqrt(6 / 300)
    assert np.abs(val(w)).max() <= xb and np.abs(val(w)).max() > 0.99 * xb
    init.uniform_(w, -2, 3)
    assert val(w).min() >= -2 and val(w).max() < 3 and abs(val(w).mean() - 0.5) < 0.05
    init.normal_(w, 1.0, 0.5)
    assert abs(val(w).mean() - 1.0) < 0.01 and abs(val(w).std() - 0.5) < 0.01
    init.kaiming_normal_(w)
    assert abs(val(w).std() - math.sqrt(2 / 100)) < 0.01
    init.xavier_normal_(w, gain=2.0)
    assert abs(val(w).std() - 2 * math.sqrt(2 / 300)) < 0.01
    init.zeros_(w)
    assert not val(w).any()
    init.ones_(w)
    assert val(w).min() == 1.0 == val(w).max()
    init.constant_(w, 0.25)
    assert np.all(val(w) == 0.25)
    init.eye_(w)
    np.testing.assert_array_equal(val(w), np.eye(200, 100))
    tg.manual_seed(9)
    a = val(init.normal_(tg.zeros(5))).copy()
    tg.manual_seed(9)
    np.testing.assert_array_equal(val(init.normal_(tg.zeros(5))), a)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(tg.zeros(5))
    s = tg.tensor(0.0, requires_grad=True)                 # 0-d, requires grad
    init.constant_(s, 1.5)
    assert s.item() == 1.5 and s.requires_grad and s.is_leaf
    assert init.calculate_gain("tanh") == 5 / 3
    assert init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)


def test_init_of_a_used_parameter_is_seen_by_the_next_forward():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    (p * p).sum().backward()
    init.constant_(p, 3.0)
    p.grad = None
    (p * p).sum().backward()
    np.testing.assert_array_equal(val(p.grad), [6.0, 6.0])


# -- optimizers ---------------------------------------------------------------------------
def test_sgd_by_hand():
    p = tg.tensor([1.0, -2.0], requires_grad=True)
    s = tg.tensor(0.5, requires_grad=True)
    opt = optim.SGD([p, s], lr=0.1)
    (p * p).sum().backward()
    (s * s * s).backward()
    opt.step()
    np.testing.assert_allclose(val(p), [1.0 - 0.1 * 2.0, -2.0 + 0.1 * 4.0])
    assert s._value.__class__ is float and s.item() == pytest.approx(0.5 - 0.1 * 0.75)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None
    opt.zero_grad()
    assert p.grad is None and s.grad is None


def test_sgd_momentum_by_hand():
    p = tg.tensor([1.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.5)
    xs = [1.0]
    buf = None
    for _ in range(3):
        opt.zero_grad()
        (p * 3.0).sum().backward()
        g = 3.0 + 0.5 * xs[-1]
        buf = g if buf is None else 0.9 * buf + g
        xs.append(xs[-1] - 0.1 * buf)
        opt.step()
        assert val(p)[0] == pytest.approx(xs[-1], rel=1e-14)


def test_adam_first_steps():
    p = tg.tensor([1.0, -1.0, 0.0], requires_grad=True)
    opt = optim.Adam([p], lr=0.01)
    (p * tg.tensor([2.0, -3.0, 0.0])).sum().backward()
    opt.step()
    # the first step moves each coordinate by lr * sign(g) (up to eps)
    np.testing.assert_allclose(val(p), [0.99, -0.99, 0.0], rtol=1e-6)
    assert opt.state[p]["step"] == 1.0
    np.testing.assert_allclose(opt.state[p]["exp_avg"], [0.2, -0.3, 0.0])


def test_optimizer_param_groups_and_errors():
    a = tg.tensor([1.0], requires_grad=True)
    b = tg.tensor([1.0], requires_grad=True)
    opt = optim.SGD([{"params": [a]}, {"params": b, "lr": 1.0}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 1.0]
    assert opt.param_groups[1]["momentum"] == 0
    (a * 1.0 + b * 1.0).sum().backward()
    opt.step()
    assert val(a)[0] == pytest.approx(0.9) and val(b)[0] == pytest.approx(0.0)
    c = tg.tensor([1.0], requires_grad=True)
    opt.add_param_group({"params": [c], "lr": 0.5})
    assert len(opt.param_groups) == 3
    opt.step()                                              # c has no grad: skipped
    assert val(c)[0] == 1.0
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [a]})
    with pytest.raises(ValueError, match="empty parameter list"):
        optim.SGD([], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        optim.Adam([a], lr=-1)
    with pytest.raises(ValueError, match="Nesterov momentum requires"):
        optim.SGD([a], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="non-leaf"):
        optim.SGD([a * 2], lr=0.1)
    with pytest.raises(TypeError):
        optim.SGD(a, lr=0.1)
    assert "Parameter Group 0" in repr(opt)


def test_optimizer_state_dict_round_trip():
    def make():
        p = tg.tensor([1.0, 2.0], requires_grad=True)
        return p, optim.Adam([p], lr=0.1)
    p1, o1 = make()
    for _ in range(3):
        o1.zero_grad()
        (p1 * p1).sum().backward()
        o1.step()
    p2, o2 = make()
    p2.data = tg.tensor(val(p1).copy())
    o2.load_state_dict(o1.state_dict())
    for p, o in ((p1, o1), (p2, o2)):
        o.zero_grad()
        (p * p).sum().backward()
        o.step()
    np.testing.assert_array_equal(val(p1), val(p2))


def test_step_invalidates_graphs_that_saved_the_old_value():
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.1)
    loss = (p * p).sum()
    loss.backward(retain_graph=True)
    opt.step()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


def test_step_with_an_explicit_tape_kept_across_steps():
    """A tape that outlives the step: the next forward must record the new value."""
    p = tg.tensor([1.0, 2.0], requires_grad=True)
    s = tg.tensor(3.0, requires_grad=True)
    opt = optim.SGD([p, s], lr=0.5)
    tape = tg.Tape()
    for expected_p, expected_s in (([1.0, 2.0], 3.0), ([0.5, 1.0], 1.5)):
        opt.zero_grad()
        with tape:
            loss = (p * p).sum() * 0.5 + s * s * 0.5
        loss.backward()
        np.testing.assert_array_equal(val(p.grad), expected_p)
        assert s.grad.item() == expected_s
        opt.step()


def test_step_closure():
    p = tg.tensor([2.0], requires_grad=True)
    opt = optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss
    with tg.no_grad():
        loss = opt.step(closure)
    assert loss.item() == 4.0 and val(p)[0] == 1.0


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True),
    lambda ps: optim.Adam(ps, lr=0.05, weight_decay=0.01, amsgrad=True),
    lambda ps: optim.AdamW(ps, lr=0.05),
], ids=["sgd-nesterov", "adam-amsgrad", "adamw"])
def test_scalar_and_array_parameters_update_alike(make):
    """0-d parameters (Python floats inside) follow the same arithmetic as arrays."""
    scalars = [tg.tensor(v, requires_grad=True) for v in (0.3, -1.2)]
    arrays = [tg.tensor([0.3, -1.2], requires_grad=True)]
    o1, o2 = make(scalars), make(arrays)
    for _ in range(4):
        o1.zero_grad()
        o2.zero_grad()
        sum(((s * s).sin() for s in scalars), 0.0).backward()
        (arrays[0] * arrays[0]).sin().sum().backward()
        o1.step()
        o2.step()
        np.testing.assert_allclose([s.item() for s in scalars], val(arrays[0]), rtol=1e-14)


@pytest.mark.parametrize("cls,kw", [
    ("Adam", dict(lr=0.05)), ("AdamW", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, betas=(0.4, 0.9), weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.05, betas=(0.4, 0.9), weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.05, maximize=True)),
    ("SGD", dict(lr=0.1)), ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, maximize=True)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True))],
    ids=["adam", "adamw", "adam-wd-amsgrad-lowbeta", "adamw-wd-amsgrad-lowbeta",
         "adam-maximize", "sgd", "sgd-momentum-wd", "sgd-dampening-maximize", "sgd-nesterov"])
def test_fused_kernels_match_numpy_path(monkeypatch, cls, kw):
    """Float64 arrays take one Numba pass; other values the NumPy operations: same numbers."""
    def run():
        p = tg.tensor(np.linspace(-1.0, 1.0, 12).reshape(3, 4), requires_grad=True)
        opt = getattr(optim, cls)([p], **kw)
        for _ in range(5):
            opt.zero_grad()
            (p * p).sin().sum().backward()
            opt.step()
        return val(p).copy(), {k: np.array(v) for k, v in opt.state.get(p, {}).items()}
    fused, fused_state = run()
    monkeypatch.setattr(optim, "_fusable", lambda x, g: False)
    plain, plain_state = run()
    assert fused_state.keys() == plain_state.keys()
    np.testing.assert_allclose(fused, plain, rtol=1e-15, atol=1e-16)
    for k in fused_state:
        np.testing.assert_allclose(fused_state[k], plain_state[k], rtol=1e-15, atol=1e-16)


def test_optimizers_on_float32_parameters():
    p = tg.tensor(np.array([1.0, -2.0], np.float32), requires_grad=True)
    for opt in (optim.SGD([p], lr=0.1, momentum=0.9), optim.Adam([p], lr=0.1)):
        for _ in range(2):
            opt.zero_grad()
            (p * p).sum().backward()
            opt.step()
        assert p.dtype is tg.float32 and p.is_leaf and p.requires_grad


# -- training runs --------------------------------------------------------------------------
def test_mlp_learns_two_spirals():
    """1000 points, 2-64-64-2 ReLU MLP, 200 full-batch Adam steps: >= 97% training accuracy.

    Runs in a subprocess with BLAS limited to one thread (the variables must be set before
    NumPy loads): with two OpenBLAS threads on a busy 2-core machine this run took 4x longer
    (the second thread spins), with one it takes ~1 s."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    code = ("import json, sys; sys.path.insert(0, 'benchmarks'); import train_mlp as b; "
            "X, y = b.make_spirals(1000); r = b.train_tensor(X, y, steps=200); "
            "r.pop('model'); print(json.dumps(r))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["accuracy"] >= 0.97, r


def test_scalar_micrograd_style_mlp_learns_moons():
    bench = _load_bench()
    X, y = bench.make_moons(100)
    r = bench.train_scalar(X, y, hidden=(8, 8), steps=100, lr=0.05, batch_size=100)
    assert r["accuracy"] >= 0.97, r
    model = bench.ScalarMLP(2, [8, 8, 1])
    assert len(list(model.parameters())) == 8 * 3 + 8 * 9 + 9
    assert all(p.shape == () for p in model.parameters())


def test_parameter_and_module_dicts_behave_as_pytorchs():
    torch = pytest.importorskip("torch")
    seen = []
    for m, lib in ((nn, tg), (torch.nn, torch)):
        pd = m.ParameterDict({"b": lib.ones(2), "a": m.Parameter(lib.zeros(3))})
        pd.update(OrderedDict([("z", lib.ones(1)), ("c", lib.ones(1))]))
        popped = pd.pop("z")
        md = m.ModuleDict({"z": m.ReLU(), "a": m.Tanh()})
        md.update([("c", m.ReLU())])
        del md["z"]
        pl = m.ParameterList([lib.ones(2), 3.0])
        seen.append((list(pd.keys()), tuple(popped.shape), popped.requires_grad,
                     [n for n, _ in pd.named_parameters()], list(md), "c" in md, len(md),
                     [n for n, _ in pl.named_parameters()], pl[1], len(pl)))
        pd.clear()
        md.clear()
        assert len(pd) == 0 and len(md) == 0
    assert seen[0] == seen[1]


def _in_torch64(run):
    """``run(torch)`` with float64 as PyTorch's default dtype (tapegrad's); skipped without
    PyTorch."""
    torch = pytest.importorskip("torch")
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return run(torch)
    finally:
        torch.set_default_dtype(before)


UNREDUCED_LOSSES = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
                    "binary_cross_entropy", "soft_margin_loss", "binary_cross_entropy_with_logits",
                    "kl_div", "poisson_nll_loss"]


@pytest.mark.parametrize("name", UNREDUCED_LOSSES)
def test_an_unreduced_loss_of_a_permuted_input_has_pytorchs_layout(name):
    # PyTorch's kernel lays its result out as its input (fuzzer seed 68: NumPy's C order
    # made a later view succeed and a product pick another zero), values as before
    def run(lib):
        x = lib.tensor(np.linspace(0.1, 0.9, 12).reshape(1, 3, 4)).transpose(0, -1)
        y = lib.tensor(np.full((4, 3, 1), 0.25))
        loss = getattr(lib.nn.functional, name)(x, y, reduction="none")
        try:
            loss.view(12)
            viewed = True
        except RuntimeError:
            viewed = False
        return loss.tolist(), viewed, tuple(loss.stride())[:2]
    ours = run(tg)
    permuted = name not in ("binary_cross_entropy_with_logits", "kl_div")
    assert ours[1] is not permuted and (ours[2] == (1, 4)) is permuted
    theirs = _in_torch64(run)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-12)
    assert ours[1:] == theirs[1:]


def test_soft_margin_loss_is_pytorchs_kernel():
    # one SoftMarginLossBackward0 node, log1p(exp(-x y)) with no threshold (exp overflows
    # to inf, the gradient there NaN), PyTorch's backward formula, errors for a target that
    # requires grad and for a target that broadcasts the input
    def run(lib):
        x = lib.tensor([-800.0, -30.0, 0.5, -0.0], requires_grad=True)
        y = lib.tensor([1.0, 1.0, -1.0, 1.0])
        loss = lib.nn.functional.soft_margin_loss(x, y, reduction="none")
        loss.sum().backward()
        out = [loss.grad_fn.name(), loss.tolist(), x.grad.tolist()]
        for red in ("mean", "sum"):
            g, = lib.autograd.grad(lib.nn.functional.soft_margin_loss(x[1:], y[1:], reduction=red),
                                   x, create_graph=True)
            out.append(lib.autograd.grad(g.sum(), x)[0].tolist())
        for args in [(x, lib.tensor([1.0, -1.0, 1.0, 1.0], requires_grad=True)),
                     (x[:2].reshape(2, 1), y[:2])]:
            with pytest.raises(RuntimeError) as err:
                lib.nn.functional.soft_margin_loss(*args)
            out.append(str(err.value))
        return out
    with np.errstate(over="ignore", invalid="ignore"):
        ours = run(tg)
    assert ours[0] == "SoftMarginLossBackward0" and ours[1][0] == math.inf
    assert math.isnan(ours[2][0]) and ours[2][1] == -0.9999999999999064
    theirs = _in_torch64(run)
    assert str(ours) == str(theirs)


def test_silu_is_pytorchs_formula_to_the_bit():
    # PyTorch's kernel is x / (1 + exp(-x)); x * sigmoid(x) rounded half of all values
    # differently (fuzzer seed 74: 0.685).  Where both exps agree, so do the two silus.
    torch = pytest.importorskip("torch")
    x = np.array([0.685, -0.0, 0.0, 1.5, -2.25, 30.0, -30.0, -800.0, 800.0, np.inf])
    ours = F.silu(tg.tensor(x))._value
    theirs = torch.nn.functional.silu(torch.tensor(x)).numpy()
    assert ours.tobytes() == theirs.tobytes()


def test_multi_margin_loss_is_pytorchs_kernel_to_the_bit():
    # one MultiMarginLossBackward0 op: PyTorch's kernel's order of additions, float64
    # accumulator over the samples, the target's shape for "none", and its errors
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    x, t, w = rng.normal(size=(5, 4)), np.array([0, 3, 1, 1, 2]), rng.random(4) + 0.5
    cases = [(x, t, {}), (x, t, {"p": 2, "margin": 2.5}), (x, t, {"weight": w}),
             (x, t, {"reduction": "none", "p": 2, "weight": w}), (x, t, {"reduction": "sum"}),
             (x[0], t[0], {}), (x[0], t[:1], {"reduction": "none"}),
             (x[0], t[0], {"reduction": "none"}), (np.array(0.7), np.array(0), {})]
    for dtype in ("float64", "float32"):
        for xv, tv, kw in cases:
            got = []
            for lib in (tg, torch):
                xt = lib.tensor(xv, dtype=getattr(lib, dtype), requires_grad=True)
                extra = {k: lib.tensor(v, dtype=getattr(lib, dtype)) if k == "weight" else v
                         for k, v in kw.items()}
                loss = lib.nn.functional.multi_margin_loss(xt, lib.tensor(tv), **extra)
                seed = np.random.default_rng(0).normal(size=tuple(loss.shape))
                loss.backward(lib.tensor(seed, dtype=getattr(lib, dtype)))
                got.append((np.asarray(loss.detach().numpy()).tobytes(), tuple(loss.shape),
                            xt.grad.numpy().tobytes(), type(loss.grad_fn).__name__))
            assert got[0] == got[1], (dtype, kw, np.shape(xv))
    errors = [lambda L: L.nn.functional.multi_margin_loss(L.zeros(3, 4), L.tensor([0, 1, 2]), p=3),
              lambda L: L.nn.functional.multi_margin_loss(L.zeros(3, 4), L.tensor([0, 5, 1])),
              lambda L: L.nn.functional.multi_margin_loss(L.zeros(3, 4), L.tensor([0, 1])),
              lambda L: L.nn.functional.multi_margin_loss(L.zeros(3, 4),
                                                          L.tensor([0., 1., 2.], dtype=L.float64)),
              lambda L: L.nn.functional.multi_margin_loss(L.zeros(3, 4), L.tensor([0, 1, 2]),
                                                          weight=L.ones(3)),
              lambda L: L.nn.functional.multi_margin_loss(L.zeros(2, 3, 4), L.tensor([0, 1])),
              lambda L: L.nn.functional.multi_margin_loss(
                  L.zeros(3, 4), L.tensor([0, 1, 2]), weight=L.ones(4, requires_grad=True))]
    for case in errors:
        with pytest.raises((RuntimeError, ValueError)) as theirs:
            case(torch)
        with pytest.raises(theirs.type) as mine:
            case(tg)
        assert str(mine.value) == str(theirs.value)
    # its gradient has no derivative in PyTorch: a NotImplemented node, and an error
    for lib in (tg, torch):
        xt = lib.tensor(x, requires_grad=True)
        g, = lib.autograd.grad(lib.nn.functional.multi_margin_loss(xt, lib.tensor(t)), xt,
                               create_graph=True)
        assert type(g.grad_fn).__name__ == "NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::multi_margin_loss_backward "
                                               "is not implemented"):
            lib.autograd.grad(g.sum(), xt)
    mine = nn.MultiMarginLoss(p=2, margin=0.7)(tg.tensor(x), tg.tensor(t))
    theirs = torch.nn.MultiMarginLoss(p=2, margin=0.7)(torch.tensor(x), torch.tensor(t))
    assert mine.item() == theirs.item()


INPLACE_MODULES = [("ReLU", ()), ("LeakyReLU", (0.2,)), ("SiLU", ()), ("ELU", (0.7,)),
                   ("Hardtanh", (-0.5, 0.5)), ("ReLU6", ()), ("SELU", ()), ("CELU", (0.7,)),
                   ("Mish", ()), ("Hardsigmoid", ()), ("Hardswish", ()),
                   ("Threshold", (0.1, -2.0)), ("Dropout", (0.0,))]


def _inplace_residual(L, name, args):
    """PyTorch's ``inplace=True``: the module writes its input, which a residual then reads."""
    x = L.tensor(_K, dtype=L.float64, requires_grad=True)
    h = x * 1.5
    module = getattr(L.nn, name)(*args, inplace=True)
    y = module(h)
    out = h + y            # (h is y now)
    out.sum().backward()
    return y is h, out.detach().numpy(), x.grad.numpy()


@pytest.mark.parametrize("name, args", INPLACE_MODULES)
def test_inplace_modules_write_their_input_as_pytorch(name, args):
    mine = _inplace_residual(tg, name, args)
    assert mine[0]
    torch = pytest.importorskip("torch")
    if torch is not None:
        theirs = _inplace_residual(torch, name, args)
        assert theirs[0]
        np.testing.assert_allclose(mine[1], theirs[1], rtol=1e-12)
        np.testing.assert_allclose(mine[2], theirs[2], rtol=1e-6)   # (celu: its float32 constant)


def test_gumbel_softmax_samples_are_distributions_and_hard_ones_one_hot():
    tg.manual_seed(3)
    logits = tg.tensor(np.log([[0.7, 0.2, 0.1]] * 4000), requires_grad=True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    np.testing.assert_allclose(soft.detach().numpy().sum(1), 1.0, rtol=1e-12)
    hard = F.gumbel_softmax(logits, hard=True)
    h = hard.detach().numpy()
    assert set(np.unique(h)) <= {0.0, 1.0} and np.all(h.sum(1) == 1.0)
    np.testing.assert_allclose(h.mean(0), [0.7, 0.2, 0.1], atol=0.03)   # (Gumbel-max sampling)
    (hard * tg.tensor([1.0, 2.0, 3.0])).sum().backward()   # (straight through: the soft gradient)
    assert np.all(np.isfinite(logits.grad.numpy())) and np.abs(logits.grad.numpy()).sum() > 0
