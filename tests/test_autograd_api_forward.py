"""``tg.autograd.forward_ad`` (``dual_level``, ``make_dual``, ``unpack_dual``) against
PyTorch's forward mode and against central differences."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.autograd.forward_ad as fwAD

try:
    import torch
    import torch.autograd.forward_ad as torch_fwAD
except ImportError:   # the torch-free assertions still run
    torch = torch_fwAD = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")

rng = np.random.default_rng(0)
A, B = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
TA, TB = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))

FUNCTIONS = {   # written once for both libraries (L is tapegrad or torch)
    "elementwise": lambda L, a, b: (a.sin() * a.exp() / (1 + a * a)).tanh() ** 2,
    "sums": lambda L, a, b: a.sum(dim=0) + a.mean() + a.sum(),
    "matmul": lambda L, a, b: a @ b,
    "softmax": lambda L, a, b: L.softmax(a, dim=1),
    "indexing": lambda L, a, b: a[1:, ::2] * 3,
    "shapes": lambda L, a, b: L.cat([a.reshape(2, 6), a.t().reshape(2, 6)], 0).unsqueeze(0),
    "broadcast": lambda L, a, b: a * b[:, 0] + b.sum(),
    "reductions": lambda L, a, b: a.amax(dim=1) + a.norm() + a.logsumexp(dim=0).sum(),
    "where": lambda L, a, b: L.where(a > 0, a * a, -a),
    "one input": lambda L, a, b: (a @ a.t()).exp().sum(),
}


def jvp(L, fw, name):
    f = FUNCTIONS[name]
    with fw.dual_level():
        a = fw.make_dual(L.tensor(A, dtype=L.float64), L.tensor(TA, dtype=L.float64))
        b = fw.make_dual(L.tensor(B, dtype=L.float64), L.tensor(TB, dtype=L.float64))
        out = fw.unpack_dual(f(L, a, b))
        return out.primal.detach().numpy().copy(), out.tangent.detach().numpy().copy()


def central_difference(name, eps=1e-6):
    f = FUNCTIONS[name]

    def value(s):
        with tg.no_grad():
            return np.asarray(f(tg, tg.tensor(A + s * TA), tg.tensor(B + s * TB)).numpy())
    return (value(eps) - value(-eps)) / (2 * eps)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jvp_against_central_differences(name):
    primal, tangent = jvp(tg, fwAD, name)
    with tg.no_grad():
        expected = np.asarray(FUNCTIONS[name](tg, tg.tensor(A), tg.tensor(B)).numpy())
    assert np.allclose(primal, expected)
    assert np.allclose(tangent, central_difference(name), rtol=1e-6, atol=1e-7)


@needs_torch
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_jvp_as_pytorch(name):
    mine, theirs = jvp(tg, fwAD, name), jvp(torch, torch_fwAD, name)
    assert np.allclose(mine[0], theirs[0], rtol=1e-12, atol=1e-12)
    assert np.allclose(mine[1], theirs[1], rtol=1e-10, atol=1e-12)


def levels_program(L, fw):
    out = []
    p = L.tensor([1.0, 2.0], dtype=L.float64)
    t = L.tensor([1.0, 0.0], dtype=L.float64)
    for args in ((p, t),):
        try:
            fw.make_dual(*args)
        except RuntimeError as e:
            out.append(str(e))
    u = fw.unpack_dual(p)
    out.append([type(u).__name__, list(u._fields), u.tangent is None, u.primal is p])
    with fw.dual_level() as level:
        out.append(level)
        d = fw.make_dual(p, t)
        out.append([fw.unpack_dual(d).tangent is t, d.tolist()])
        for bad in ((p, L.ones(3, dtype=L.float64)), (L.tensor([1, 2]), L.tensor([1, 2]))):
            try:
                fw.make_dual(*bad)
            except (RuntimeError, ValueError) as e:
                out.append([type(e).__name__, str(e)])
        out.append(fw.unpack_dual(p * 3).tangent is None)     # no dual in its graph
        y = (d * d).sin().sum()
        out.append(fw.unpack_dual(y).tangent.item())
    out.append(fw.unpack_dual(y).tangent is None)            # the level is gone
    return out


def test_levels_and_errors():
    out = levels_program(tg, fwAD)
    assert out[0] == ("Trying to create a dual Tensor for forward AD but no level exists, "
                      "make sure to enter_dual_level() first.")
    assert out[1] == ["UnpackedDualTensor", ["primal", "tangent"], True, True]
    assert out[2] == 0 and out[3] == [True, [1.0, 2.0]]
    assert out[4] == ["RuntimeError", "Trying to set a forward gradient that has a different "
                      "size than that of the original Tensor, this is not supported. Tensor is "
                      "of size [2] while the given forward gradient is of size [3]."]
    assert out[5] == ["ValueError", "Expected primal to be floating point or complex, but got: "
                      "tapegrad.int64"]
    assert out[6] is True and out[8] is True
    assert out[7] == pytest.approx(2 * np.cos(1.0))
    if torch is not None:
        theirs = levels_program(torch, torch_fwAD)
        theirs[5][1] = theirs[5][1].replace("torch.", "tapegrad.")
        assert out == theirs


def module_program(L, nn, fw):
    model = nn.Linear(3, 2)
    with L.no_grad():
        model.weight.copy_(L.tensor([[1.0, -2.0, 0.5], [0.0, 1.0, 3.0]]))
        model.bias.copy_(L.tensor([0.1, -0.1]))
    x = L.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    params = dict(model.named_parameters())
    with fw.dual_level():
        for name, p in params.items():
            delattr(model, name)
            setattr(model, name, fw.make_dual(p, L.ones_like(p) * 0.5))
        jvp = fw.unpack_dual(model(x).tanh()).tangent
    return jvp.detach().numpy().round(6).tolist()


def test_jvp_of_a_module_over_its_parameters():
    out = module_program(tg, tg.nn, fwAD)
    y = np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]) @ np.array(
        [[1.0, -2.0, 0.5], [0.0, 1.0, 3.0]]).T + [0.1, -0.1]
    dy = 0.5 * (np.array([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]]).sum(1, keepdims=True) + 1)
    assert np.allclose(out, (1 - np.tanh(y) ** 2) * dy, atol=1e-6)
    if torch is not None:
        assert np.allclose(out, module_program(torch, torch.nn, torch_fwAD), atol=1e-5)


def test_forward_over_reverse():
    # a primal that requires grad: the tangent is differentiable (PyTorch's forward-over-reverse)
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with fwAD.dual_level():
        d = fwAD.make_dual(x, tg.tensor([1.0, 0.0]))
        y = (d * d * d).sum()
        p, t = fwAD.unpack_dual(y)
        t.backward()
    assert p.item() == 9.0 and t.item() == 3.0 and x.grad.tolist() == [6.0, 0.0]


def tutorial_program(L, fw):
    # PyTorch's forward-mode AD tutorial, in float64
    log = []
    primal = L.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=L.float64)
    tangent = L.tensor([[1.0, 0.0], [0.5, 2.0]], dtype=L.float64)
    with fw.dual_level():
        dual_input = fw.make_dual(primal, tangent)
        log.append([dual_input.requires_grad, fw.unpack_dual(dual_input).tangent is tangent])
        dual_input_alt = fw.make_dual(primal, tangent.T)
        log.append(fw.unpack_dual(dual_input_alt).tangent is not tangent)
        plain = L.tensor([[1.0, 1.0], [2.0, 2.0]], dtype=L.float64)
        out = dual_input ** 2 + plain ** 2
        log.append(fw.unpack_dual(out).tangent.tolist())
        with L.no_grad():                           # forward mode ignores grad mode
            w = dual_input * 3
        log.append(fw.unpack_dual(w).tangent.tolist())
        z = dual_input.clone()
        z.mul_(2)                                   # in place: the tangent follows
        log.append(fw.unpack_dual(z).tangent.tolist())
        log.append(fw.unpack_dual(dual_input > 2).tangent)
    log.append(fw.unpack_dual(out).tangent)
    return log


def test_tutorial_program():
    log = tutorial_program(tg, fwAD)
    assert log == [[False, True], True, [[2.0, 0.0], [3.0, 16.0]], [[3.0, 0.0], [1.5, 6.0]],
                   [[2.0, 0.0], [1.0, 4.0]], None, None]
    if torch is not None:
        assert log == tutorial_program(torch, torch_fwAD)


def test_repr_of_a_dual_tensor():
    with fwAD.dual_level():
        d = fwAD.make_dual(tg.tensor([1.0, 2.0]), tg.tensor([0.5, 0.0]))
        assert repr(d) == "tensor([1., 2.], tangent=tensor([0.5000, 0.0000]))"
        m = fwAD.make_dual(tg.ones(2, 2), tg.ones(2, 2))
        assert repr(m) == ("tensor([[1., 1.],\n        [1., 1.]], "
                           "tangent=tensor([[1., 1.],\n        [1., 1.]]))")
        w = fwAD.make_dual(tg.ones(2, 5) * 1.5, tg.ones(2, 5) * 2.25)   # too long: indented
        assert repr(w) == ("tensor([[1.5000, 1.5000, 1.5000, 1.5000, 1.5000],\n"
                           "        [1.5000, 1.5000, 1.5000, 1.5000, 1.5000]],\n"
                           "       tangent=tensor([[2.2500, 2.2500, 2.2500, 2.2500, 2.2500],\n"
                           "        [2.2500, 2.2500, 2.2500, 2.2500, 2.2500]]))")
    assert repr(d) == "tensor([1., 2.])"


def custom_function_program(L, fw):
    class Exp(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = L.exp(x)
            ctx.result = result
            return result

        @staticmethod
        def jvp(ctx, g):
            return g * ctx.result

    class NoJvp(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    p = L.tensor([0.5, 1.0], dtype=L.float64, requires_grad=True)
    t = L.tensor([1.0, 2.0], dtype=L.float64)
    with fw.dual_level():
        jvp = fw.unpack_dual(Exp.apply(fw.make_dual(p, t))).tangent
        try:
            NoJvp.apply(fw.make_dual(p, t))
            err = None
        except NotImplementedError as e:
            err = str(e)
    ok = L.autograd.gradcheck(Exp.apply, (p,), check_forward_ad=True, check_backward_ad=False,
                              check_undefined_grad=False, check_batched_grad=False)
    return [jvp.detach().numpy().round(12).tolist(), err, ok]


def test_custom_function_jvp():
    out = custom_function_program(tg, fwAD)
    assert np.allclose(out[0], np.exp([0.5, 1.0]) * [1.0, 2.0])
    assert out[1] == ("You must implement the jvp function for custom autograd.Function to "
                      "use it with forward mode AD.") and out[2] is True
    if torch is not None:
        assert out == custom_function_program(torch, torch_fwAD)


def test_gradcheck_forward_mode_finds_a_wrong_jvp():
    class Wrong(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

        @staticmethod
        def jvp(ctx, t):
            return t                       # misses the factor 2x

    x = tg.tensor([0.5, 1.5], requires_grad=True)
    assert tg.autograd.gradcheck(Wrong.apply, (x,))
    with pytest.raises(tg.autograd.GradcheckError, match="forward AD Jacobian mismatch"):
        tg.autograd.gradcheck(Wrong.apply, (x,), check_forward_ad=True)
