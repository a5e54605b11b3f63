"""``nn.RNN``, ``nn.LSTM``, ``nn.GRU``, their cells and ``pad_sequence`` against PyTorch 2.13
(parameter names, shapes and order; outputs and final states; gradients of the input, the
initial states and every parameter, first and second order), with torch-free checks of
shapes, initialisation, errors and central differences."""
import math

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn as nn
from tapegrad.nn import rnn as tg_rnn

try:
    import torch
except ImportError:   # the torch-free tests still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """PyTorch's thread pool spins on a busy machine (0.1 s for a 4-step LSTM); these
    tensors are tiny."""
    if torch is None:
        yield
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)

RNG = np.random.default_rng(5)
L, N, H_IN, H = 4, 3, 4, 5
X = RNG.normal(size=(L, N, H_IN))


def val(t):
    return np.asarray(t.detach()._value) if isinstance(t, tg.Tensor) else t.detach().numpy()


def flat(o):
    return [o] if not isinstance(o, (tuple, list)) else [z for y in o for z in flat(y)]


def expected_names(num_layers, bidirectional, bias=True):
    names = []
    for layer in range(num_layers):
        for sfx in ("", "_reverse")[:1 + bidirectional]:
            kinds = ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if bias else ())
            names += [f"{k}_l{layer}{sfx}" for k in kinds]
    return names


# -- torch-free -------------------------------------------------------------------------

@pytest.mark.parametrize("kind,gates", [("RNN", 1), ("LSTM", 4), ("GRU", 3)])
def test_parameter_names_shapes_and_initialisation(kind, gates):
    tg.manual_seed(0)
    m = getattr(nn, kind)(H_IN, 6, num_layers=2, bidirectional=True)
    shapes = dict((n, tuple(p.shape)) for n, p in m.named_parameters())
    assert list(shapes) == expected_names(2, True)
    assert shapes["weight_ih_l0"] == (gates * 6, H_IN)
    assert shapes["weight_ih_l1_reverse"] == (gates * 6, 12)
    assert shapes["weight_hh_l1"] == (gates * 6, 6) and shapes["bias_hh_l0"] == (gates * 6,)
    bound = 1 / math.sqrt(6)
    values = np.concatenate([val(p).ravel() for p in m.parameters()])
    assert np.abs(values).max() <= bound and np.abs(values).max() > 0.9 * bound
    assert [n for n, _ in getattr(nn, kind)(3, 2, bias=False).named_parameters()] == \
        ["weight_ih_l0", "weight_hh_l0"]
    assert [len(w) for w in m.all_weights] == [4] * 4 and m.all_weights[1][0] is \
        m.weight_ih_l0_reverse
    m.flatten_parameters()
    cell = getattr(nn, kind + "Cell")(3, 6)
    assert [(n, tuple(p.shape)) for n, p in cell.named_parameters()] == [
        ("weight_ih", (gates * 6, 3)), ("weight_hh", (gates * 6, 6)), ("bias_ih", (gates * 6,)),
        ("bias_hh", (gates * 6,))]


@pytest.mark.parametrize("make", [lambda: nn.GRU(10, 100), lambda: nn.LSTMCell(10, 100)])
def test_initialisation_is_pytorchs_uniform(make):
    """Every parameter from U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) (std bound/sqrt 3);
    ``reset_parameters`` draws again."""
    tg.manual_seed(3)
    m = make()
    w = val(m.weight_hh).copy() if hasattr(m, "weight_hh") else val(m.weight_hh_l0).copy()
    for p in m.parameters():
        v = val(p)
        assert np.abs(v).max() <= 0.1 and v.max() > 0.09 and v.min() < -0.09
    assert np.std(w) == pytest.approx(0.1 / math.sqrt(3), rel=0.02)
    assert abs(np.mean(w)) < 0.002
    m.reset_parameters()
    assert not np.array_equal(w, val(next(p for n, p in m.named_parameters() if "hh" in n)))


def test_output_and_state_shapes():
    x = tg.tensor(X)
    out, (h, c) = nn.LSTM(H_IN, 6, num_layers=2, bidirectional=True)(x)
    assert out.shape == (L, N, 12) and h.shape == (4, N, 6) and c.shape == (4, N, 6)
    out, h = nn.GRU(H_IN, 6, batch_first=True)(x)                 # (batch=L, seq=N)
    assert out.shape == (L, N, 6) and h.shape == (1, L, 6)
    out, h = nn.RNN(H_IN, 2, num_layers=3)(tg.tensor(X[:, 0]))    # unbatched
    assert out.shape == (L, 2) and h.shape == (3, 2)
    out, (h, c) = nn.LSTM(H_IN, 2, bidirectional=True, batch_first=True)(tg.tensor(X[:, 0]))
    assert out.shape == (L, 4) and h.shape == (2, 2) and c.shape == (2, 2)
    h, c = nn.LSTMCell(H_IN, 2)(tg.tensor(X[0, 0]))
    assert h.shape == (2,) and c.shape == (2,)
    assert nn.GRUCell(H_IN, 2)(tg.tensor(X[0])).shape == (N, 2)


def test_errors():
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(4, 2, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
        nn.RNNBase("GRU", 4, 3, proj_size=2)
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        nn.LSTM(4, 3, proj_size=3)
    with pytest.raises(ValueError, match="dropout"):
        nn.GRU(4, 3, dropout=1.5)
    with pytest.warns(UserWarning, match="num_layers greater than 1"):
        nn.GRU(4, 3, dropout=0.5)
    lstm = nn.LSTM(H_IN, H, num_layers=2)
    with pytest.raises(RuntimeError,
                       match=r"Expected hidden\[0\] size \(2, 3, 5\), got \[1, 3, 5\]"):
        lstm(tg.tensor(X), (tg.zeros(1, N, H), tg.zeros(2, N, H)))
    with pytest.raises(RuntimeError, match="hx and cx should also be 3-D"):
        lstm(tg.tensor(X), (tg.zeros(N, H), tg.zeros(N, H)))
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        nn.GRU(H_IN, H)(tg.tensor(X[:, 0]), tg.zeros(2, H))
    with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size"):
        nn.RNN(H_IN + 1, H)(tg.tensor(X))
    with pytest.raises(ValueError, match="Expected input to be 2D or 3D"):
        nn.RNN(H_IN, H)(tg.tensor(X[0, 0]))
    with pytest.raises(ValueError, match="does not match weight dtype"):
        nn.RNN(H_IN, H)(tg.tensor(X).float())
    with pytest.raises(ValueError, match="Expected input to be 1D or 2D"):
        nn.GRUCell(H_IN, H)(tg.tensor(X))
    with pytest.raises(RuntimeError, match="inconsistent hidden_size"):
        nn.LSTMCell(H_IN, H)(tg.tensor(X[0]), (tg.zeros(N, H + 1), tg.zeros(N, H)))


def test_packing_round_trips_and_rejects_bad_lengths():
    seqs = [tg.tensor(RNG.normal(size=(n, 2))) for n in (2, 4, 1)]
    packed = tg_rnn.pack_sequence(seqs, enforce_sorted=False)
    assert val(packed.batch_sizes).tolist() == [3, 2, 1, 1]
    assert val(packed.sorted_indices).tolist() == [1, 0, 2]
    back = tg_rnn.unpack_sequence(packed)
    for a, b in zip(seqs, back):
        np.testing.assert_array_equal(val(a), val(b))
    padded, lengths = tg_rnn.pad_packed_sequence(packed, total_length=6)
    assert tuple(padded.shape) == (6, 3, 2) and val(lengths).tolist() == [2, 4, 1]
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        tg_rnn.pack_sequence(seqs)
    with pytest.raises(RuntimeError, match="greater than 0"):
        tg_rnn.pack_padded_sequence(tg.tensor(X), [4, 0, 2], enforce_sorted=False)
    with pytest.raises(ValueError, match="total_length to be at least"):
        tg_rnn.pad_packed_sequence(packed, total_length=3)
    with pytest.raises(TypeError, match="input must be a Tensor"):
        nn.LSTMCell(H_IN, H)(packed)


def test_dropout_between_layers_only_in_training():
    tg.manual_seed(1)
    m = nn.GRU(H_IN, H, num_layers=2, dropout=0.5)
    x = tg.tensor(X)
    m.eval()
    a, b = m(x)[0], m(x)[0]
    np.testing.assert_array_equal(val(a), val(b))
    m.train()
    c = m(x)[0]
    assert not np.allclose(val(a), val(c))
    m.dropout = 1.0                      # the second layer then sees zeros, whatever x is
    np.testing.assert_array_equal(val(m(x)[0]), val(m(x * 2.0)[0]))


def _directional_check(f, tensors, eps=1e-6):
    """``f()``'s gradient with respect to each of ``tensors`` along a random direction,
    against central differences (HIPS autograd's ``check_vjp`` in small)."""
    for t in tensors:
        t.grad = None
    f().backward()
    for t in tensors:
        v = RNG.normal(size=t.shape)
        base = np.asarray(t._value).copy()
        with tg.no_grad():
            t._value[...] = base + eps * v
            up = f().item()
            t._value[...] = base - eps * v
            down = f().item()
            t._value[...] = base
        assert (up - down) / (2 * eps) == pytest.approx(float(np.sum(val(t.grad) * v)),
                                                        rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_gradients_vs_central_differences(kind):
    tg.manual_seed(2)
    m = getattr(nn, kind)(2, 3, num_layers=2, bidirectional=True)
    x = tg.tensor(RNG.normal(size=(3, 2, 2)), requires_grad=True)
    states = [tg.tensor(RNG.normal(size=(4, 2, 3)), requires_grad=True)
              for _ in range(2 if kind == "LSTM" else 1)]
    hx = tuple(states) if kind == "LSTM" else states[0]
    w = [tg.tensor(RNG.normal(size=s)) for s in [(3, 2, 6), (4, 2, 3)]]

    def f():
        out, hn = m(x, hx)
        return (out * w[0]).sum() + (flat(hn)[0] * w[1]).sum()

    _directional_check(f, [x, *states, *m.parameters()])


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_tg_compile_replays_a_frozen_layer(kind):
    """``tg.compile`` records the layer's array ops on elements and replays them."""
    m = getattr(nn, kind)(2, 3, bidirectional=True)
    for p in m.parameters():
        p.requires_grad_(False)

    def f(x):
        return (m(x.reshape(3, 1, 2))[0] ** 2).sum()

    compiled = tg.compile(f)
    for x0 in RNG.normal(size=(2, 6)):
        value, grad = compiled.value_and_grad(x0)
        x = tg.tensor(x0, requires_grad=True)
        f(x).backward()
        assert value == pytest.approx(f(tg.tensor(x0)).item(), rel=1e-13)
        np.testing.assert_allclose(grad, val(x.grad), rtol=1e-12, atol=1e-14)


def test_pad_sequence_and_unpad():
    seqs = [tg.tensor(RNG.normal(size=(n, 2)), requires_grad=True) for n in (3, 1, 2)]
    p = tg_rnn.pad_sequence(seqs)
    assert p.shape == (3, 3, 2)
    np.testing.assert_array_equal(val(p[1:, 1]), 0.0)
    np.testing.assert_array_equal(val(p[:2, 2]), val(seqs[2]))
    q = tg_rnn.pad_sequence(seqs, batch_first=True, padding_value=-1.0, padding_side="left")
    assert q.shape == (3, 3, 2)
    np.testing.assert_array_equal(val(q[1, :2]), -1.0)
    (p.sum() + 2 * q.sum()).backward()
    assert all(np.all(val(s.grad) == 3.0) for s in seqs)
    back = tg_rnn.unpad_sequence(p, tg.tensor([3, 1, 2]))
    assert [tuple(b.shape) for b in back] == [(3, 2), (1, 2), (2, 2)]
    ids = tg_rnn.pad_sequence([tg.tensor([1, 2, 3]), tg.tensor([4])], batch_first=True)
    assert val(ids).tolist() == [[1, 2, 3], [4, 0, 0]]


# -- against PyTorch --------------------------------------------------------------------

def _state_shape(module, x, k=0):
    """The shape of initial state ``k`` (h, then c): h is ``proj_size`` wide when set."""
    if "Cell" in type(module).__name__:
        return x.shape[:-1] + (module.hidden_size,)
    layers = module.num_layers * (2 if module.bidirectional else 1)
    batch = () if x.ndim == 2 else (x.shape[0 if module.batch_first else 1],)
    return (layers,) + batch + ((k == 0 and module.proj_size) or module.hidden_size,)


def _run_both(make, x, given_state, create_graph=False):
    """Build both modules (tapegrad's with PyTorch's weights), run them on ``x`` (and random
    initial states), weight the outputs and return (ours, theirs): outputs, input and state
    gradients, parameter gradients by name."""
    ours, theirs = make(nn), make(torch.nn).double()
    assert repr(ours) == repr(theirs)
    assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    ours.load_state_dict(theirs.state_dict())
    lstm = "LSTM" in type(ours).__name__
    arrays = [x] + ([RNG.normal(size=_state_shape(ours, x, k)) for k in range(1 + lstm)]
                    if given_state else [])
    results = []
    for lib, module in ((tg, ours), (torch, theirs)):
        inputs = [lib.tensor(a, requires_grad=True) for a in arrays]
        state = None if not given_state else tuple(inputs[1:]) if lstm else inputs[1]
        outs = flat(module(inputs[0]) if state is None else module(inputs[0], state))
        weights = [np.cos(np.arange(math.prod(o.shape))).reshape(tuple(o.shape)) for o in outs]
        loss = sum((o * lib.tensor(w)).sum() for o, w in zip(outs, weights))
        if create_graph:   # a second-order quantity: the squared norm of d loss / d x
            gx, = lib.autograd.grad(loss, inputs[0], create_graph=True)
            loss = (gx * gx).sum()
        loss.backward()
        results.append(([val(o) for o in outs], [val(t.grad) for t in inputs],
                        {n: val(p.grad) for n, p in module.named_parameters()}))
    return results


def _assert_same(ours, theirs, rtol=1e-11, atol=1e-13):
    for a, b in zip(ours[0], theirs[0]):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    for k, (a, b) in enumerate(zip(ours[1], theirs[1])):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"input {k}")
    assert ours[2].keys() == theirs[2].keys()
    for n in ours[2]:
        np.testing.assert_allclose(ours[2][n], theirs[2][n], rtol=rtol, atol=atol, err_msg=n)


# (module kwargs, input, initial state given): layers 1-3, bidirectional, batch_first,
# unbatched, without bias, each with and without initial states across the three kinds
LAYER_CASES = [
    (dict(), X, False),
    (dict(num_layers=2, bidirectional=True), X, True),
    (dict(num_layers=2, batch_first=True), X, True),
    (dict(bidirectional=True, batch_first=True), X, False),
    (dict(num_layers=2, bidirectional=True), X[:, 0], True),
    (dict(bias=False, num_layers=3), X[:, 1], False),
    (dict(bias=False, bidirectional=True), X, True),
    (dict(batch_first=True, num_layers=2), X[:, 2], True),
]
KINDS = [("RNN", {}), ("RNN", {"nonlinearity": "relu"}), ("LSTM", {}), ("GRU", {})]


@needs_torch
@pytest.mark.parametrize("kind,extra", KINDS, ids=["rnn_tanh", "rnn_relu", "lstm", "gru"])
@pytest.mark.parametrize("case", range(len(LAYER_CASES)))
def test_layers_match_torch(kind, extra, case):
    kw, x, given = LAYER_CASES[case]
    ours, theirs = _run_both(lambda m: getattr(m, kind)(H_IN, H, **kw, **extra), x, given)
    _assert_same(ours, theirs)


PROJ_CASES = [dict(proj_size=2), dict(proj_size=3, num_layers=2, bidirectional=True),
              dict(proj_size=1, batch_first=True, bias=False)]


@needs_torch
@pytest.mark.parametrize("kw", PROJ_CASES)
@pytest.mark.parametrize("x,given", [(X, True), (X, False), (X[:, 1], True)],
                         ids=["batched-h", "batched", "single-h"])
def test_lstm_projection_matches_torch(kw, x, given):
    ours, theirs = _run_both(lambda m: m.LSTM(H_IN, H, **kw), x, given)
    _assert_same(ours, theirs)


def test_lstm_projection_gradcheck():
    tg.manual_seed(3)
    m = nn.LSTM(2, 3, proj_size=2, bidirectional=True)
    x = tg.tensor(RNG.normal(size=(3, 2, 2)), requires_grad=True)
    h0 = tg.tensor(RNG.normal(size=(2, 2, 2)), requires_grad=True)
    c0 = tg.tensor(RNG.normal(size=(2, 2, 3)), requires_grad=True)
    w = m.weight_hr_l0_reverse
    assert tuple(w.shape) == (2, 3) and tuple(m.weight_hh_l0.shape) == (12, 2)
    assert tg.autograd.gradcheck(lambda x, h0, c0, w: m(x, (h0, c0))[0], (x, h0, c0, w))


def _packed_case(kind, kw, lengths, enforce_sorted, given, batch_first):
    """Both libraries pack a padded batch, run the layer on it and unpack: the packed
    output, the padded output, the lengths, the final states and every gradient."""
    theirs = getattr(torch.nn, kind)(H_IN, H, **kw).double()
    ours = getattr(nn, kind)(H_IN, H, **kw)
    ours.load_state_dict(theirs.state_dict())
    B, T = len(lengths), max(lengths)
    x_np = RNG.normal(size=(B, T, H_IN) if batch_first else (T, B, H_IN))
    layers = (2 if kw.get("bidirectional") else 1) * kw.get("num_layers", 1)
    widths = [kw.get("proj_size") or H, H][:1 + (kind == "LSTM")]
    states_np = [RNG.normal(size=(layers, B, w)) for w in widths]
    results = []
    for lib, module, utils in ((tg, ours, tg_rnn), (torch, theirs, torch.nn.utils.rnn)):
        x = lib.tensor(x_np, requires_grad=True)
        states = [lib.tensor(s, requires_grad=True) for s in states_np]
        packed = utils.pack_padded_sequence(x, lib.tensor(lengths), batch_first=batch_first,
                                            enforce_sorted=enforce_sorted)
        hx = None if not given else tuple(states) if kind == "LSTM" else states[0]
        out, h = module(packed, hx)
        padded, lens = utils.pad_packed_sequence(out, batch_first=batch_first,
                                                 padding_value=0.5)
        finals = list(h) if kind == "LSTM" else [h]
        loss = sum((t * lib.tensor(np.cos(np.arange(t.numel())).reshape(tuple(t.shape)))).sum()
                   for t in [padded] + finals)
        loss.backward()
        results.append([val(out.data), val(out.batch_sizes), val(padded), val(lens)]
                       + [val(t) for t in finals] + [val(x.grad)]
                       + ([val(s.grad) for s in states] if given else [])
                       + [val(p.grad) for p in module.parameters()])
    for a, b in zip(*results):
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("kind,kw", [("RNN", {}), ("GRU", dict(num_layers=2)),
                                     ("LSTM", dict(bidirectional=True)),
                                     ("GRU", dict(num_layers=2, bidirectional=True)),
                                     ("LSTM", dict(proj_size=2, num_layers=2,
                                                   bidirectional=True))])
@pytest.mark.parametrize("lengths,enforce_sorted,given,batch_first",
                         [([4, 3, 1], True, False, False), ([2, 4, 1, 4], False, True, False),
                          ([3, 3], True, True, True), ([1, 3], False, False, True)])
def test_packed_sequences_match_torch(kind, kw, lengths, enforce_sorted, given, batch_first):
    _packed_case(kind, kw, lengths, enforce_sorted, given, batch_first)


def test_packed_gru_gradcheck():
    tg.manual_seed(4)
    m = nn.GRU(2, 3, bidirectional=True)
    x = tg.tensor(RNG.normal(size=(3, 3, 2)), requires_grad=True)
    h0 = tg.tensor(RNG.normal(size=(2, 3, 3)), requires_grad=True)

    def f(x, h0):
        packed = tg_rnn.pack_padded_sequence(x, [2, 3, 1], enforce_sorted=False)
        out, h = m(packed, h0)
        return tg_rnn.pad_packed_sequence(out)[0], h
    assert tg.autograd.gradcheck(f, (x, h0))


@needs_torch
def test_pack_sequence_helpers_match_torch():
    arrays = [RNG.normal(size=(n, 3)) for n in (2, 5, 1, 5)]
    outs = []
    for lib, utils in ((tg, tg_rnn), (torch, torch.nn.utils.rnn)):
        seqs = [lib.tensor(a, requires_grad=True) for a in arrays]
        packed = utils.pack_sequence(seqs, enforce_sorted=False)
        padded, lengths = utils.pad_packed_sequence(packed, batch_first=True, total_length=7)
        (padded * lib.tensor(np.sin(np.arange(padded.numel())).reshape(tuple(padded.shape)))
         ).sum().backward()
        outs.append([val(packed.data), val(packed.batch_sizes), val(packed.sorted_indices),
                     val(packed.unsorted_indices), val(padded), val(lengths)]
                    + [val(s.grad) for s in seqs]
                    + [val(s) for s in utils.unpack_sequence(packed)])
        assert packed.double().data.dtype == lib.float64
    for a, b in zip(*outs):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@needs_torch
@pytest.mark.parametrize("kind,extra", [("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu"}),
                                        ("LSTMCell", {}), ("GRUCell", {}),
                                        ("GRUCell", {"bias": False})])
@pytest.mark.parametrize("x,given", [(X[0], False), (X[0], True), (X[0, 0], True),
                                     (X[0, 0], False)], ids=["batched", "batched-h", "single-h",
                                                             "single"])
def test_cells_match_torch(kind, extra, x, given):
    ours, theirs = _run_both(lambda m: getattr(m, kind)(H_IN, H, **extra), x, given)
    _assert_same(ours, theirs)


@needs_torch
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_second_order_gradients_match_torch(kind):
    ours, theirs = _run_both(lambda m: getattr(m, kind)(H_IN, 3, num_layers=2,
                                                        bidirectional=True), X[:3, :2], True,
                             create_graph=True)
    _assert_same(ours, theirs, rtol=1e-10, atol=1e-12)


BAD_CALLS = [
    (lambda m: m.LSTM(H_IN, H, 2), lambda t: (t(X), (t(np.zeros((1, N, H))),
                                                    t(np.zeros((2, N, H)))))),
    (lambda m: m.LSTM(H_IN, H, 2), lambda t: (t(X), (t(np.zeros((N, H))), t(np.zeros((N, H)))))),
    (lambda m: m.GRU(H_IN, H), lambda t: (t(X[:, 0]), t(np.zeros((2, H))))),
    (lambda m: m.RNN(H_IN, H), lambda t: (t(X), t(np.zeros((N, H))))),
    (lambda m: m.GRU(H_IN, H), lambda t: (t(X[:, 0]), t(np.zeros((1, 1, H))))),
    (lambda m: m.RNN(H_IN + 1, H), lambda t: (t(X),)),
    (lambda m: m.RNN(H_IN, H), lambda t: (t(X[0, 0]),)),
    (lambda m: m.LSTM(H_IN, H), lambda t: (t(X).float(),)),
    (lambda m: m.GRUCell(H_IN, H), lambda t: (t(X),)),
    (lambda m: m.RNNCell(H_IN, H), lambda t: (t(X[0]), t(np.zeros((2, H))))),
    (lambda m: m.LSTMCell(H_IN, H), lambda t: (t(X[0]), (t(np.zeros((N, H + 1))),
                                                       t(np.zeros((N, H)))))),
    (lambda m: m.LSTMCell(H_IN, H), lambda t: (t(X[0]), (t(X), t(np.zeros((N, H)))))),
    (lambda m: m.RNNCell(H_IN + 1, H), lambda t: (t(X[0]),)),
    (lambda m: m.LSTM(H_IN, H, proj_size=2), lambda t: (t(X), (t(np.zeros((1, N, H))),
                                                              t(np.zeros((1, N, H)))))),
    (lambda m: m.LSTM(H_IN, H, proj_size=2), lambda t: (t(X), (t(np.zeros((1, N, 2))),
                                                              t(np.zeros((1, N, 2)))))),
]


@needs_torch
@pytest.mark.parametrize("k", range(len(BAD_CALLS)))
def test_errors_match_torch(k):
    make, args = BAD_CALLS[k]
    errors = []
    for lib in (nn, torch.nn):
        module = make(lib)
        if lib is torch.nn:
            module.double()
        with pytest.raises(Exception) as e:
            module(*args(tg.tensor if lib is nn else torch.tensor))
        errors.append((e.type, str(e.value).replace("tapegrad", "torch")))
    assert errors[0] == errors[1]


@needs_torch
def test_dropout_one_matches_torch():
    """Dropout with p=1 is deterministic: the second layer gets zeros in both."""
    ours, theirs = _run_both(lambda m: m.LSTM(H_IN, H, num_layers=2, dropout=1.0), X, True)
    _assert_same(ours, theirs)


@needs_torch
def test_float32_module_matches_torch():
    ours, theirs = nn.GRU(H_IN, H, dtype=tg.float32), torch.nn.GRU(H_IN, H)
    ours.load_state_dict(theirs.state_dict())
    a = ours(tg.tensor(X, dtype=tg.float32))[0]
    b = theirs(torch.tensor(X, dtype=torch.float32))[0]
    assert a.dtype == tg.float32
    np.testing.assert_allclose(val(a), val(b), rtol=1e-5, atol=1e-6)


@needs_torch
@pytest.mark.parametrize("kw", [dict(), dict(batch_first=True, padding_value=-2.0),
                                dict(padding_side="left")])
def test_pad_sequence_matches_torch(kw):
    arrays = [RNG.normal(size=(n, 2, 3)) for n in (2, 4, 1)]
    outs = []
    for lib, pad in ((tg, tg_rnn.pad_sequence), (torch, torch.nn.utils.rnn.pad_sequence)):
        seqs = [lib.tensor(a, requires_grad=True) for a in arrays]
        p = pad(seqs, **kw)
        (p * lib.tensor(np.sin(np.arange(p.numel())).reshape(tuple(p.shape)))).sum().backward()
        outs.append([val(p)] + [val(s.grad) for s in seqs])
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


@needs_torch
def test_lstm_language_model_steps_match_torch():
    """Embedding -> LSTM -> Linear, two SGD steps from PyTorch's weights: the same losses
    and parameters."""
    def build(m):
        class LM(m.Module):
            def __init__(self):
                super().__init__()
                self.emb = m.Embedding(7, 4)
                self.rnn = m.LSTM(4, 5, num_layers=2, batch_first=True)
                self.out = m.Linear(5, 7)

            def forward(self, idx):
                h, _ = self.rnn(self.emb(idx))
                return self.out(h)
        return LM()

    ours, theirs = build(nn), build(torch.nn).double()
    ours.load_state_dict(theirs.state_dict())
    idx = RNG.integers(0, 7, size=(2, 6))
    for model, lib, F in ((ours, tg, tg.nn.functional), (theirs, torch, torch.nn.functional)):
        model.losses = []
        for _ in range(2):   # SGD by hand: torch.optim's first use imports torch._dynamo (4 s)
            logits = model(lib.tensor(idx[:, :-1]))
            loss = F.cross_entropy(logits.reshape(-1, 7), lib.tensor(idx[:, 1:]).reshape(-1))
            loss.backward()
            with lib.no_grad():
                for p in model.parameters():
                    p -= 0.5 * p.grad
                    p.grad = None
            model.losses.append(loss.item())
    np.testing.assert_allclose(ours.losses, theirs.losses, rtol=1e-12)
    for (n, a), b in zip(ours.state_dict().items(), theirs.state_dict().values()):
        np.testing.assert_allclose(val(a), val(b), rtol=1e-10, atol=1e-13, err_msg=n)
