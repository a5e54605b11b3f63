"""``tapegrad.nn`` / ``tapegrad.optim`` against PyTorch (float64): the same layers, losses and
optimizers on the same data must give the same values, gradients and parameters.

Skipped without torch; CI runs the whole suite again with torch installed.
"""
import math
import types

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tapegrad as tg  # noqa: E402
import tapegrad.nn as nn  # noqa: E402
import tapegrad.nn.functional as F  # noqa: E402
import tapegrad.nn.init as init  # noqa: E402
import tapegrad.nn.modules as tg_modules  # noqa: E402
import tapegrad.optim as optim  # noqa: E402

TF = torch.nn.functional


def val(t):
    return np.asarray(t.detach()._value) if isinstance(t, tg.Tensor) else t.detach().numpy()


def pair(a, requires_grad=True):
    """The same float64 data as a tapegrad and a torch tensor."""
    a = np.asarray(a)
    if a.dtype.kind == "f":
        return (tg.tensor(a.copy(), requires_grad=requires_grad),
                torch.tensor(a.copy(), dtype=torch.float64, requires_grad=requires_grad))
    return tg.tensor(a.copy()), torch.tensor(a.copy())


def compare(tg_fn, torch_fn, *arrays, rtol=1e-12, atol=1e-14, node=True):
    """Run both on the same inputs; compare outputs, node names (unless ``node=False``: where
    PyTorch composes several nodes and tapegrad records one) and input gradients."""
    tgs, ths = zip(*(pair(a) for a in arrays))
    a, b = tg_fn(*tgs), torch_fn(*ths)
    np.testing.assert_allclose(val(a), val(b), rtol=rtol, atol=atol)
    if node:
        assert type(a.grad_fn).__name__ == type(b.grad_fn).__name__
    seed = np.random.default_rng(0).normal(size=tuple(b.shape))
    if a.shape == ():
        a.backward(tg.tensor(float(seed)))
    else:
        a.backward(tg.tensor(seed))
    b.backward(torch.tensor(seed))
    for k, (x, y) in enumerate(zip(tgs, ths)):
        if y.grad is None:
            assert x.grad is None
            continue
        np.testing.assert_allclose(val(x.grad), val(y.grad), rtol=1e-10, atol=1e-13,
                                   err_msg=f"gradient of input {k}")


RNG = np.random.default_rng(42)
X = RNG.normal(size=(6, 4)) * 2
T = RNG.integers(0, 4, size=6)
W4 = RNG.random(4) + 0.5


@pytest.mark.parametrize("kw", [
    {}, {"reduction": "sum"}, {"reduction": "none"}, {"weight": W4},
    {"weight": W4, "reduction": "sum"}, {"ignore_index": 2}, {"label_smoothing": 0.15},
    {"label_smoothing": 0.1, "weight": W4}, {"label_smoothing": 0.1, "ignore_index": 1},
], ids=lambda kw: ",".join(f"{k}" for k in kw) or "default")
def test_cross_entropy(kw):
    def run(m, f):
        def fn(x):
            extra = dict(kw)
            if "weight" in extra:
                extra["weight"] = m.tensor(extra["weight"], dtype=m.float64)
            return f(x, m.tensor(T), **extra)
        return fn
    compare(run(tg, F.cross_entropy), run(torch, TF.cross_entropy), X,
            node="label_smoothing" not in kw)


def test_cross_entropy_soft_targets_and_shapes():
    probs = RNG.random((6, 4))
    probs /= probs.sum(1, keepdims=True)
    compare(lambda x, p: F.cross_entropy(x, p.detach(), reduction="sum"),
            lambda x, p: TF.cross_entropy(x, p.detach(), reduction="sum"), X, probs)
    x3 = RNG.normal(size=(2, 3, 5))
    t3 = RNG.integers(0, 3, size=(2, 5))
    compare(lambda x: F.cross_entropy(x, tg.tensor(t3)),
            lambda x: TF.cross_entropy(x, torch.tensor(t3)), x3)
    compare(lambda x: F.cross_entropy(x, tg.tensor(t3), reduction="none"),
            lambda x: TF.cross_entropy(x, torch.tensor(t3), reduction="none"), x3, node=False)
    compare(lambda x: F.cross_entropy(x, tg.tensor(2)),
            lambda x: TF.cross_entropy(x, torch.tensor(2)), X[0])


def _graph_names(fn, depth=8):
    """grad_fn names down ``depth`` levels, AccumulateGrad and None included."""
    if fn is None or depth == 0:
        return None if fn is None else type(fn).__name__
    return (type(fn).__name__, tuple(_graph_names(f, depth - 1) for f, _ in fn.next_functions))


@pytest.mark.parametrize("shape,kw", [
    ((6, 4), {}), ((6, 4), {"reduction": "sum"}), ((6, 4), {"reduction": "none"}), ((4,), {}),
    ((2, 3, 5), {}), ((2, 3, 5), {"reduction": "none"}), ((6, 4), {"label_smoothing": 0.2}),
    ((6, 4), {"weight": W4}), ((2, 4, 3), {"weight": W4, "reduction": "sum"}),
], ids=lambda v: ",".join(map(str, v)) if isinstance(v, tuple) else ",".join(v) or "default")
def test_cross_entropy_with_class_probabilities_is_pytorchs_composition(shape, kw):
    # PyTorch: -(log_softmax(x) * p [* w]).sum() / positions, or summed, or summed over the
    # class dim: values, gradients of logits and target, and every node but those of ops
    # with a number (README: DivBackward0 with a constant, PyTorch's C++ DivBackward1)
    dim = 0 if len(shape) == 1 else 1
    p = RNG.random(shape)
    p /= p.sum(dim, keepdims=True)
    x = RNG.normal(size=shape)
    out = []
    for m, f in ((tg, F), (torch, TF)):
        xt, pt = m.tensor(x, requires_grad=True), m.tensor(p, requires_grad=True)
        extra = {k: m.tensor(v) if k == "weight" else v for k, v in kw.items()}
        loss = f.cross_entropy(xt, pt, **extra)
        names = _graph_names(loss.grad_fn)
        loss.sum().backward()
        out.append((np.asarray(val(loss)), val(xt.grad), val(pt.grad), names))
    for mine, theirs in zip(out[0][:3], out[1][:3]):
        np.testing.assert_allclose(mine, theirs, rtol=1e-13, atol=1e-15)
    mine, theirs = out[0][3], out[1][3]
    assert (mine == theirs) == (kw.get("reduction") in ("sum", "none")
                                and not kw.get("label_smoothing"))
    assert _number_ops_as_tensor_ops(mine) == _number_ops_as_tensor_ops(theirs)


def _number_ops_as_tensor_ops(names):
    """Graph names with an op on a number (PyTorch's C++ ``DivBackward1``, one edge) read as
    the op on a constant tensor (``DivBackward0``, whose constant's edge is None)."""
    if not isinstance(names, tuple):
        return names
    name, inputs = names
    if name in ("DivBackward1", "MulBackward1", "AddBackward1"):
        name = name[:-1] + "0"
    return name, tuple(_number_ops_as_tensor_ops(i) for i in inputs if i is not None)


def test_cross_entropy_with_class_probabilities_refuses_as_pytorch():
    cases = [lambda m: m.nn.functional.cross_entropy(m.zeros(3, 4), m.zeros(3, 4, dtype=m.long)),
             lambda m: m.nn.functional.cross_entropy(m.zeros(3, 4), m.zeros(3, 4), ignore_index=0),
             lambda m: m.nn.functional.cross_entropy(m.zeros(3, 4), m.zeros(3, 4),
                                                     label_smoothing=1.5),
             lambda m: m.nn.functional.cross_entropy(m.zeros(3, 4), m.tensor([0, 1, 2]),
                                                     label_smoothing=1.5)]
    for case in cases:
        with pytest.raises(RuntimeError) as theirs:
            case(torch)
        with pytest.raises(RuntimeError) as mine:
            case(tg)
        assert str(mine.value) == str(theirs.value)


@pytest.mark.parametrize("case", [
    lambda m: m.nn.functional.cross_entropy(m.zeros(3, 4), m.zeros(3, 2, dtype=m.long)),
    lambda m: m.nn.functional.nll_loss(m.zeros(3, 4), m.zeros(3, 1, dtype=m.long)),
    lambda m: m.nn.functional.cross_entropy(m.zeros(2, 4, 5), m.zeros(2, 4, dtype=m.long)),
    lambda m: m.nn.functional.nll_loss(m.zeros(2, 4, 5, 3), m.zeros(2, 5, dtype=m.long)),
    lambda m: m.nn.functional.nll_loss(m.zeros(2, 4, 5, 3), m.zeros(2, 5, 4, dtype=m.long)),
    lambda m: m.nn.functional.nll_loss(m.zeros(2, 4, 5, 3, 2), m.zeros(2, 5, dtype=m.long)),
    lambda m: m.nn.functional.nll_loss(m.zeros(2, 4, 5), m.zeros(2, 5, 3, dtype=m.long)),
    lambda m: m.nn.functional.cross_entropy(m.zeros(3, 4), m.zeros(3, dtype=m.int32)),
    lambda m: m.nn.functional.nll_loss(m.zeros(3, 4), m.zeros(3, dtype=m.int16)),
    lambda m: m.nn.functional.nll_loss(m.zeros(3, 4), m.zeros(3, dtype=m.bool)),
])
def test_class_targets_refuse_as_pytorch(case):
    with pytest.raises(RuntimeError) as theirs:
        case(torch)
    with pytest.raises(RuntimeError) as mine:
        case(tg)
    assert str(mine.value) == str(theirs.value)


def test_byte_class_targets_are_accepted_as_pytorch():
    t = np.array([0, 3, 1], dtype=np.uint8)
    compare(lambda x: F.cross_entropy(x, tg.tensor(t)),
            lambda x: TF.cross_entropy(x, torch.tensor(t)), X[:3])


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_mse_l1_bce(reduction):
    y = RNG.random((6, 4))
    compare(lambda x: F.nll_loss(F.log_softmax(x, 1), tg.tensor(T), reduction=reduction),
            lambda x: TF.nll_loss(TF.log_softmax(x, 1), torch.tensor(T), reduction=reduction), X)
    compare(lambda a, b: F.mse_loss(a, b, reduction=reduction),
            lambda a, b: TF.mse_loss(a, b, reduction=reduction), X, y)
    compare(lambda a, b: F.l1_loss(a, b, reduction=reduction),
            lambda a, b: TF.l1_loss(a, b, reduction=reduction), X, y)
    p = 1 / (1 + np.exp(-X))
    compare(lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction),
            lambda a, b: TF.binary_cross_entropy(a, b, reduction=reduction), p, y, rtol=1e-10)


@pytest.mark.parametrize("kw", [{}, {"reduction": "sum"}, {"reduction": "none"},
                                {"pos_weight": True}, {"weight": True},
                                {"pos_weight": True, "weight": True, "reduction": "sum"}],
                         ids=lambda kw: ",".join(f"{k}" for k in kw) or "default")
def test_binary_cross_entropy_with_logits(kw):
    y = RNG.random((6, 4))
    pw, w = RNG.random(4) + 0.5, RNG.random((6, 4))
    xs = X.copy()
    xs[0, :2] = [800.0, -800.0]            # stable at extreme logits

    def run(m, f):
        def fn(x, t):
            extra = dict(kw)
            if "pos_weight" in extra:
                extra["pos_weight"] = m.tensor(pw, dtype=m.float64)
            if "weight" in extra:
                extra["weight"] = m.tensor(w, dtype=m.float64)
            return f(x, t, **extra)
        return fn
    compare(run(tg, F.binary_cross_entropy_with_logits),
            run(torch, TF.binary_cross_entropy_with_logits), xs, y, rtol=1e-11)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_log_softmax_leaky_relu(dim):
    compare(lambda x: F.softmax(x, dim), lambda x: TF.softmax(x, dim), X)
    compare(lambda x: F.log_softmax(x, dim), lambda x: TF.log_softmax(x, dim), X)
    compare(lambda x: F.leaky_relu(x, 0.2), lambda x: TF.leaky_relu(x, 0.2), X)


def test_linear_and_dropout_nodes():
    w, b = RNG.normal(size=(3, 4)), RNG.normal(size=3)
    compare(F.linear, TF.linear, X, w, b)
    compare(F.linear, TF.linear, X, w)
    tx, _ = pair(X)
    assert type(F.dropout(tx, 0.5).grad_fn).__name__ == \
        type(TF.dropout(torch.tensor(X, requires_grad=True), 0.5).grad_fn).__name__


def _same_net(tg_net, torch_net):
    torch_net.double()
    tg_net.load_state_dict(torch_net.state_dict())
    return tg_net, torch_net


def test_mlp_forward_backward_and_state_dict_names():
    tnet = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 8),
                               torch.nn.ReLU(), torch.nn.Linear(8, 3))
    gnet = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))
    _same_net(gnet, tnet)
    assert [n for n, _ in gnet.named_parameters()] == [n for n, _ in tnet.named_parameters()]
    assert list(gnet.state_dict()) == list(tnet.state_dict())
    assert repr(gnet) == repr(tnet)
    gx, tx = pair(X, requires_grad=False)
    gl = F.cross_entropy(gnet(gx), tg.tensor(T % 3))
    tl = TF.cross_entropy(tnet(tx), torch.tensor(T % 3))
    np.testing.assert_allclose(gl.item(), tl.item(), rtol=1e-13)
    gl.backward()
    tl.backward()
    for (n, gp), (_, tp) in zip(gnet.named_parameters(), tnet.named_parameters()):
        np.testing.assert_allclose(val(gp.grad), tp.grad.numpy(), rtol=1e-10, atol=1e-14,
                                   err_msg=n)


def test_reprs_match_torch():
    for g, t in [(nn.Linear(2, 3, bias=False), torch.nn.Linear(2, 3, bias=False)),
                 (nn.Dropout(0.2), torch.nn.Dropout(0.2)), (nn.ReLU(), torch.nn.ReLU()),
                 (nn.LeakyReLU(0.2), torch.nn.LeakyReLU(0.2)),
                 (nn.Softmax(dim=1), torch.nn.Softmax(dim=1)),
                 (nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()),
                 (nn.MSELoss(), torch.nn.MSELoss()), (nn.Identity(), torch.nn.Identity())]:
        assert repr(g) == repr(t)


def test_init_gains_and_bounds_match_torch():
    for nl, p in [("linear", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                  ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]:
        assert init.calculate_gain(nl, p) == torch.nn.init.calculate_gain(nl, p)
    for fn in ("kaiming_uniform_", "xavier_uniform_"):
        kw = {"a": math.sqrt(5)} if fn == "kaiming_uniform_" else {}
        g = getattr(init, fn)(tg.zeros(300, 200), **kw)
        t = getattr(torch.nn.init, fn)(torch.zeros(300, 200, dtype=torch.float64), **kw)
        assert abs(val(g).max() / t.max().item() - 1) < 0.01
        assert abs(val(g).std() / t.std().item() - 1) < 0.02


OPTIMIZERS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.2, weight_decay=0.05)),
    ("SGD", dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.5, maximize=True)),
    ("Adam", dict(lr=0.05)),
    ("Adam", dict(lr=0.05, betas=(0.3, 0.8), eps=1e-6)),
    ("Adam", dict(lr=0.05, weight_decay=0.1, amsgrad=True)),
    ("Adam", dict(lr=0.05, maximize=True)),
    ("AdamW", dict(lr=0.05)),
    ("AdamW", dict(lr=0.05, weight_decay=0.3, amsgrad=True)),
]


@pytest.mark.parametrize("name,kw", OPTIMIZERS,
                         ids=[f"{n}-{','.join(k for k in kw if k != 'lr') or 'plain'}"
                              for n, kw in OPTIMIZERS])
def test_optimizers_match_torch(name, kw):
    """Same initial parameters (a matrix, a vector, a 0-d scalar) and the same loss: the
    parameters agree after every one of 8 steps."""
    rng = np.random.default_rng(1)
    init_vals = [rng.normal(size=(3, 4)), rng.normal(size=4), np.array(0.7)]

    def params(m):
        return [m.tensor(v.copy() if v.ndim else float(v), dtype=m.float64, requires_grad=True)
                for v in init_vals]

    def loss_of(m, ps):
        return ((ps[0] * 1.5).sin().sum() + (ps[1] * ps[1]).sum() * 0.5
                + (ps[2] * ps[2] * ps[2]).tanh() + (ps[0].sum() * ps[2]))

    gps, tps = params(tg), params(torch)
    gopt = getattr(optim, name)(gps, **kw)
    topt = getattr(torch.optim, name)(tps, **kw, foreach=False)
    for step in range(8):
        for ps, opt, m in ((gps, gopt, tg), (tps, topt, torch)):
            opt.zero_grad()
            loss_of(m, ps).backward()
            opt.step()
        for k, (g, t) in enumerate(zip(gps, tps)):
            np.testing.assert_allclose(val(g), val(t), rtol=1e-12, atol=1e-14,
                                       err_msg=f"step {step}, parameter {k}")


def test_adam_param_groups_match_torch():
    rng = np.random.default_rng(2)
    a0, b0 = rng.normal(size=5), rng.normal(size=(2, 2))
    ga, gb = tg.tensor(a0, requires_grad=True), tg.tensor(b0, requires_grad=True)
    ta, tb = (torch.tensor(v, requires_grad=True) for v in (a0, b0))
    gopt = optim.Adam([{"params": [ga]}, {"params": [gb], "lr": 0.3, "weight_decay": 0.1}],
                      lr=0.01)
    topt = torch.optim.Adam([{"params": [ta]}, {"params": [tb], "lr": 0.3, "weight_decay": 0.1}],
                            lr=0.01, foreach=False)
    for _ in range(5):
        for a, b, opt in ((ga, gb, gopt), (ta, tb, topt)):
            opt.zero_grad()
            ((a * a).exp().sum() + (b * b * b).sum()).backward()
            opt.step()
    np.testing.assert_allclose(val(ga), val(ta), rtol=1e-12)
    np.testing.assert_allclose(val(gb), val(tb), rtol=1e-12)


def test_training_steps_match_torch():
    """Ten Adam steps of an MLP with cross-entropy: the same trajectory as PyTorch."""
    tnet = torch.nn.Sequential(torch.nn.Linear(2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    gnet = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
    _same_net(gnet, tnet)
    x = RNG.normal(size=(32, 2))
    y = (x[:, 0] * x[:, 1] > 0).astype(np.int64)
    gopt = optim.Adam(gnet.parameters(), lr=0.01)
    topt = torch.optim.Adam(tnet.parameters(), lr=0.01, foreach=False)
    for _ in range(10):
        gopt.zero_grad()
        topt.zero_grad()
        gl = F.cross_entropy(gnet(tg.tensor(x)), tg.tensor(y))
        tl = TF.cross_entropy(tnet(torch.tensor(x)), torch.tensor(y))
        gl.backward()
        tl.backward()
        gopt.step()
        topt.step()
        np.testing.assert_allclose(gl.item(), tl.item(), rtol=1e-10)
    for (n, gp), (_, tp) in zip(gnet.named_parameters(), tnet.named_parameters()):
        np.testing.assert_allclose(val(gp), val(tp), rtol=1e-9, atol=1e-12, err_msg=n)


_NS = types.SimpleNamespace(nn=tg_modules)   # tapegrad's modules as torch.nn's names


@pytest.mark.parametrize("make", [
    lambda m: m.nn.Softplus(beta=2.0, threshold=3.0), lambda m: m.nn.GELU(),
    lambda m: m.nn.GELU(approximate="tanh"), lambda m: m.nn.SiLU(), lambda m: m.nn.ELU(0.5),
    lambda m: m.nn.LeakyReLU(0.1)], ids=["softplus", "gelu", "gelu_tanh", "silu", "elu", "leaky"])
def test_activation_modules(make):
    ours, theirs = make(_NS), make(torch)
    assert repr(ours) == repr(theirs)
    compare(ours, theirs, X)


def test_smooth_l1_loss_module():
    y = RNG.normal(size=(6, 4))
    for beta in (1.0, 0.5, 0.0):
        ours, theirs = _NS.nn.SmoothL1Loss(beta=beta), torch.nn.SmoothL1Loss(beta=beta)
        assert repr(ours) == repr(theirs)
        compare(ours, theirs, X, y, node=beta != 0.0)
    with pytest.raises(RuntimeError, match="negative values for beta"):
        F.smooth_l1_loss(tg.tensor(X), tg.tensor(y), beta=-1.0)
