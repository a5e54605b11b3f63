"""Modules added with their functionals (``nn.RMSNorm``, ``nn.Bilinear``, the padding
modules, ``nn.LPPool2d``...): repr, values and gradients (input and parameters) against
PyTorch with the same parameters."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

R = np.random.default_rng(8)
X4 = R.normal(size=(2, 4, 5, 6))
X3 = R.normal(size=(2, 4, 7))
X2 = R.normal(size=(3, 4))

IDX2 = np.array([[0, 2, 1], [5, 5, 0]])

X5 = R.normal(size=(2, 3, 4, 5, 3))

MODULES = {   # name -> (constructor of the library's nn, inputs, training)
    "Conv3d": (lambda nn: nn.Conv3d(3, 4, (2, 3, 2), stride=(1, 2, 1), padding=1), (X5,), False),
    "Conv3d groups, reflect": (lambda nn: nn.Conv3d(3, 6, 2, groups=3, padding=1,
                                                    padding_mode="reflect"), (X5,), False),
    "ConvTranspose3d": (lambda nn: nn.ConvTranspose3d(3, 2, 2, stride=2, padding=1,
                                                      output_padding=1), (X5,), False),
    "EmbeddingBag sum": (lambda nn: nn.EmbeddingBag(6, 3, mode="sum"), (), False),
    "EmbeddingBag mean, padding": (lambda nn: nn.EmbeddingBag(6, 3, padding_idx=5), (), False),
    "EmbeddingBag max": (lambda nn: nn.EmbeddingBag(6, 3, mode="max"), (), False),
    "RMSNorm": (lambda nn: nn.RMSNorm((5, 6), eps=1e-6), (X4,), False),
    "RMSNorm eps None": (lambda nn: nn.RMSNorm(6), (X4,), False),
    "Bilinear": (lambda nn: nn.Bilinear(4, 4, 3), (X2, X2[::-1].copy()), False),
    "ZeroPad2d": (lambda nn: nn.ZeroPad2d((1, 0, 2, 1)), (X4,), False),
    "ConstantPad1d": (lambda nn: nn.ConstantPad1d(2, 0.5), (X3,), False),
    "ConstantPad3d": (lambda nn: nn.ConstantPad3d((1, 1, 0, 1, 1, 0), -1.0), (X4,), False),
    "ReflectionPad1d": (lambda nn: nn.ReflectionPad1d((2, 1)), (X3,), False),
    "ReflectionPad2d": (lambda nn: nn.ReflectionPad2d(1), (X4,), False),
    "ReplicationPad2d": (lambda nn: nn.ReplicationPad2d((0, 2, 1, 1)), (X4,), False),
    "CircularPad1d": (lambda nn: nn.CircularPad1d(3), (X3,), False),
    "LPPool1d": (lambda nn: nn.LPPool1d(2, 3, 2), (X3,), False),
    "LPPool2d": (lambda nn: nn.LPPool2d(2, (2, 3)), (X4,), False),
    "LocalResponseNorm": (lambda nn: nn.LocalResponseNorm(3, 0.1), (X4,), False),
    "RReLU (eval)": (lambda nn: nn.RReLU(0.1, 0.3), (X3,), False),
    "Softmax2d": (lambda nn: nn.Softmax2d(), (X4,), False),
    "ChannelShuffle": (lambda nn: nn.ChannelShuffle(2), (X4,), False),
    "AlphaDropout (eval)": (lambda nn: nn.AlphaDropout(0.3), (X3,), False),
    "TripletMarginWithDistanceLoss": (lambda nn: nn.TripletMarginWithDistanceLoss(swap=True),
                                      (X2, X2 * 0.5, X2[::-1].copy()), False),
}


def _run(L, name):
    make, inputs, training = MODULES[name]
    if L is torch:
        torch.manual_seed(0)
    module = make(L.nn)
    module.train(training)
    return module, [L.tensor(v, dtype=L.float64, requires_grad=True) for v in inputs]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_as_pytorch(name):
    theirs, their_inputs = _run(torch, name)
    theirs = theirs.double()
    mine, my_inputs = _run(tg, name)
    assert repr(mine) == repr(theirs)
    mine.load_state_dict({k: tg.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    outs = []
    for module, inputs, L in ((mine, my_inputs, tg), (theirs, their_inputs, torch)):
        out = module(*inputs) if inputs else module(L.tensor(IDX2))
        weights = L.tensor(np.arange(1.0, out.numel() + 1).reshape(tuple(out.shape)) / 7,
                           dtype=L.float64)
        (out * weights).sum().backward()
        outs.append([out.detach().numpy()] + [x.grad.numpy() for x in inputs]
                    + [p.grad.numpy() for p in module.parameters()])
    assert len(outs[0]) == len(outs[1])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


def test_lazy_linear_fills_its_parameters_in_place_and_becomes_a_linear():
    m = tg.nn.LazyLinear(3)
    assert repr(m) == repr(torch.nn.LazyLinear(3))
    weight, bias = m.weight, m.bias
    opt = tg.optim.SGD(m.parameters(), lr=0.1)   # (made before the first call, as usual)
    x = tg.tensor(R.normal(size=(2, 4)))
    y = m(x)
    assert type(m) is tg.nn.Linear and repr(m) == "Linear(in_features=4, out_features=3, bias=True)"
    assert m.weight is weight and m.bias is bias and tuple(weight.shape) == (3, 4)
    bound = 1 / np.sqrt(4)
    assert np.all(np.abs(weight.detach().numpy()) <= bound)
    before = weight.detach().numpy().copy()
    y.sum().backward()
    opt.step()
    np.testing.assert_allclose(weight.detach().numpy(),
                               before - 0.1 * np.tile(x.numpy().sum(0), (3, 1)))


def test_buffer_is_registered_as_pytorch():
    def program(L):
        class M(L.nn.Module):
            def __init__(self):
                super().__init__()
                self.a = L.nn.Buffer(L.ones(2))
                self.b = L.nn.Buffer(L.zeros(1), persistent=False)
        m = M()
        return (list(m.state_dict()), [n for n, _ in m.named_buffers()],
                isinstance(m.a, L.Tensor), m.a.tolist())
    assert program(tg) == program(torch) == (["a"], ["a", "b"], True, [1.0, 1.0])
