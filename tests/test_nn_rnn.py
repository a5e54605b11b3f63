"""``nn.RNN``, ``nn.LSTM``, ``nn.GRU`` and their cells against PyTorch 2.13 (parameter names and
order, outputs and final states, input and parameter gradients), with torch-free checks of
shapes, initialisation and a finite-difference gradient."""
import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn as nn

try:
    import torch
except ImportError:   # the torch-free assertions still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")
RNG = np.random.default_rng(5)
X = RNG.normal(size=(5, 3, 4))


def val(t):
    return np.asarray(t.detach()._value) if isinstance(t, tg.Tensor) else t.detach().numpy()


def _flat(o):
    return [o] if not isinstance(o, tuple) else [z for y in o for z in _flat(y)]


def test_shapes_and_initialisation():
    tg.manual_seed(0)
    lstm = nn.LSTM(4, 6, num_layers=2, bidirectional=True)
    names = [n for n, _ in lstm.named_parameters()]
    assert names[:4] == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    assert names[4] == "weight_ih_l0_reverse" and len(names) == 16
    assert lstm.weight_ih_l1.shape == (24, 12)
    bound = 1 / math.sqrt(6)
    assert all(np.abs(val(p)).max() <= bound for p in lstm.parameters())
    out, (h, c) = lstm(tg.tensor(X))
    assert out.shape == (5, 3, 12) and h.shape == (4, 3, 6) and c.shape == (4, 3, 6)
    out, h = nn.GRU(4, 6, batch_first=True)(tg.tensor(X))
    assert out.shape == (5, 3, 6) and h.shape == (1, 5, 6)
    out, h = nn.RNN(4, 2)(tg.tensor(X[:, 0]))                  # unbatched
    assert out.shape == (5, 2) and h.shape == (1, 2)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(4, 2, nonlinearity="sigmoid")


def test_gru_gradient_vs_finite_differences():
    gru = nn.GRU(2, 3)
    x0 = RNG.normal(size=(4, 1, 2))
    c = RNG.normal(size=(4, 1, 3))

    def f(x):
        return (gru(x)[0] * tg.tensor(c)).sum()

    x = tg.tensor(x0, requires_grad=True)
    f(x).backward()
    num = np.zeros_like(x0)
    for i in np.ndindex(x0.shape):
        xp, xm = x0.copy(), x0.copy()
        xp[i] += 1e-6
        xm[i] -= 1e-6
        with tg.no_grad():
            num[i] = (f(tg.tensor(xp)).item() - f(tg.tensor(xm)).item()) / 2e-6
    np.testing.assert_allclose(val(x.grad), num, rtol=1e-6, atol=1e-9)


CASES = [
    (lambda m: m.RNN(4, 6), X, None),
    (lambda m: m.RNN(4, 6, num_layers=2, nonlinearity="relu", bidirectional=True), X, None),
    (lambda m: m.LSTM(4, 6), X, None),
    (lambda m: m.LSTM(4, 5, num_layers=2, bidirectional=True, batch_first=True), X, None),
    (lambda m: m.GRU(4, 6, bias=False), X, None),
    (lambda m: m.GRU(4, 3, num_layers=3), X[:, 0], None),
    (lambda m: m.GRU(4, 6, num_layers=2), X, "h"),
    (lambda m: m.LSTM(4, 6), X[:, 1], "hc"),
    (lambda m: m.LSTMCell(4, 6), X[0], None),
    (lambda m: m.GRUCell(4, 6), X[0], "h"),
    (lambda m: m.RNNCell(4, 6, nonlinearity="relu"), X[0, 0], None),
]


@needs_torch
@pytest.mark.parametrize("k", range(len(CASES)))
def test_recurrent_layers_match_torch(k):
    make, x, state = CASES[k]
    ours, theirs = make(nn), make(torch.nn).double()
    assert repr(ours) == repr(theirs)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    ours.load_state_dict(theirs.state_dict())
    gx, tx = tg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    args_g, args_t = [gx], [tx]
    if state is not None:
        cell = "Cell" in type(ours).__name__
        layers = 1 if cell else ours.num_layers * (2 if ours.bidirectional else 1)
        shape = ((x.shape[0],) if cell else (layers,) + ((x.shape[1],) if x.ndim == 3 else ())) \
            + (ours.hidden_size,)
        hs = [RNG.normal(size=shape) for _ in state]
        args_g.append(tuple(tg.tensor(h) for h in hs) if len(hs) > 1 else tg.tensor(hs[0]))
        args_t.append(tuple(torch.tensor(h) for h in hs) if len(hs) > 1 else torch.tensor(hs[0]))
    a, b = _flat(ours(*args_g)), _flat(theirs(*args_t))
    assert [tuple(u.shape) for u in a] == [tuple(v.shape) for v in b]
    for u, v in zip(a, b):
        np.testing.assert_allclose(val(u), val(v), rtol=1e-12, atol=1e-14)
    weights = [np.cos(np.arange(np.prod(v.shape))).reshape(tuple(v.shape)) for v in b]
    sum((u * tg.tensor(w)).sum() for u, w in zip(a, weights)).backward()
    sum((v * torch.tensor(w)).sum() for v, w in zip(b, weights)).backward()
    np.testing.assert_allclose(val(gx.grad), val(tx.grad), rtol=1e-10, atol=1e-13)
    for (n, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(val(p.grad), val(q.grad), rtol=1e-10, atol=1e-13, err_msg=n)


@needs_torch
def test_lstm_language_model_steps_match_torch():
    """Embedding -> LSTM -> Linear, three Adam steps: the same losses and parameters."""
    def build(m):
        class LM(m.Module):
            def __init__(self):
                super().__init__()
                self.emb = m.Embedding(7, 4)
                self.rnn = m.LSTM(4, 5, num_layers=2, dropout=0.0, batch_first=True)
                self.out = m.Linear(5, 7)

            def forward(self, idx):
                h, _ = self.rnn(self.emb(idx))
                return self.out(h)
        return LM()

    ours, theirs = build(nn), build(torch.nn).double()
    ours.load_state_dict(theirs.state_dict())
    idx = RNG.integers(0, 7, size=(2, 6))
    gopt = tg.optim.Adam(ours.parameters(), lr=0.05)
    topt = torch.optim.Adam(theirs.parameters(), lr=0.05, foreach=False)
    for _ in range(3):
        for model, opt, m, F in ((ours, gopt, tg, tg.nn.functional),
                                 (theirs, topt, torch, torch.nn.functional)):
            opt.zero_grad()
            logits = model(m.tensor(idx[:, :-1]))
            loss = F.cross_entropy(logits.reshape(-1, 7), m.tensor(idx[:, 1:]).reshape(-1))
            loss.backward()
            opt.step()
            model.last = loss.item()
        assert ours.last == pytest.approx(theirs.last, rel=1e-10)
    for (n, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        np.testing.assert_allclose(val(a), val(b), rtol=1e-9, atol=1e-12, err_msg=n)
