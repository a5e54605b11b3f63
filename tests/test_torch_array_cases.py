"""Array ops, indexing and losses against PyTorch 2.13 at the corners: gather's shapes, std/var
with no spread or no degrees of freedom left, dims out of range (and 0-d tensors), exception
types and messages, and the backward graph (``grad_fn`` names, ``next_functions``).

Each class has a torch-free test (the expected values written out) and a comparison with
PyTorch (skipped without it); a seeded sweep compares random shapes, dims and keepdim.
"""
import math
import warnings

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn.functional as tF

try:
    import torch
    import torch.nn.functional as F
except ImportError:   # the torch-free assertions still run
    torch = F = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def _leaf(m, v):
    v = np.asarray(v)
    if v.dtype.kind == "f":
        return m.tensor(v, dtype=m.float64, requires_grad=True)
    return m.tensor(v)


def _name(fn):
    return None if fn is None else fn.name().replace("torch::autograd::", "")


def graph(t):
    """A tensor's backward graph as nested tuples of node names (None: an edge without a node)."""
    def walk(fn):
        if fn is None:
            return None
        return (_name(fn),) + tuple(walk(f) for f, _ in fn.next_functions)
    return walk(t.grad_fn)


def outcome(m, fn, values, seed=0):
    """fn on leaves of ``values`` in library ``m``: ("raise", type, message) or
    ("ok", shape, value, graph, grads) after a backward of a random seed."""
    xs = [_leaf(m, v) for v in values]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = fn(m, *xs)
    except Exception as e:   # noqa: BLE001  (the type is what is compared)
        return ("raise", type(e).__name__, str(e).split("\n")[0])
    value = np.asarray(y.detach().tolist(), dtype=float)
    grads = None
    if y.requires_grad:
        w = np.random.default_rng(seed).normal(size=tuple(y.shape))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y.backward(m.tensor(w))
        grads = [np.asarray(x.grad.tolist()) if x.requires_grad and x.grad is not None else None
                 for x in xs]
    return ("ok", tuple(y.shape), value, graph(y), grads)


def assert_same(fn, values):
    got, want = outcome(tg, fn, values), outcome(torch, fn, values)
    assert got[:2] == want[:2], f"tapegrad {got} vs torch {want}"
    if got[0] == "raise":
        assert got[2] == want[2]
        return
    assert got[3] == want[3], f"graph: tapegrad {got[3]} vs torch {want[3]}"
    np.testing.assert_allclose(got[2], want[2], rtol=1e-10, atol=1e-12, equal_nan=True)
    assert (got[4] is None) == (want[4] is None)
    for g, w in zip(got[4] or [], want[4] or []):
        assert (g is None) == (w is None)
        if g is not None:
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, equal_nan=True)


# -- gather --------------------------------------------------------------------------------

A32 = np.arange(6.0).reshape(3, 2)
GATHER = {
    "smaller index": (0, [[1]]),
    "longer along dim": (0, [[1, 0], [1, 0], [1, 0], [2, 2]]),
    "dim 1": (1, [[1, 0, 1, 1]]),
    "dim -1": (-1, [[1], [0]]),
    "too big elsewhere": (0, [[1, 0, 1]]),
    "fewer dims": (0, [1]),
    "out of bounds": (0, [[3]]),
    "negative index": (0, [[-1]]),
    "dim out of range": (2, [[1]]),
    "empty": (0, np.zeros((0, 2), np.int64)),
}


def test_gather_takes_the_index_shape():
    a = tg.tensor(A32, requires_grad=True)
    y = tg.gather(a, 0, tg.tensor([[1]]))
    assert tuple(y.shape) == (1, 1) and y.tolist() == [[2.0]]
    y = a.gather(0, tg.tensor([[1, 0], [1, 0], [2, 2]]))
    assert y.tolist() == [[2.0, 1.0], [2.0, 1.0], [4.0, 5.0]]
    y.sum().backward()   # scatter-add into zeros of a's shape
    assert a.grad.tolist() == [[0.0, 2.0], [2.0, 0.0], [1.0, 1.0]]
    with pytest.raises(RuntimeError, match="Index tensor must have the same number of dimensions"):
        a.gather(0, tg.tensor([1]))
    with pytest.raises(RuntimeError, match=r"Size does not match at dimension 1 expected index "
                                           r"\[1, 3\] to be no larger than self \[3, 2\]"):
        a.gather(0, tg.tensor([[1, 0, 1]]))
    with pytest.raises(RuntimeError, match="index -1 is out of bounds for dimension 0 with size 3"):
        a.gather(0, tg.tensor([[-1]]))
    with pytest.raises(RuntimeError, match="Expected dtype int32/int64 for index"):
        a.gather(0, tg.tensor([[1.0]]))
    s = tg.tensor(2.0, requires_grad=True)
    assert s.gather(0, tg.tensor(0)).tolist() == 2.0 and s.gather(0, tg.tensor([0])).tolist() == [2.0]


@needs_torch
@pytest.mark.parametrize("case", sorted(GATHER))
def test_gather_matches_pytorch(case):
    dim, index = GATHER[case]
    assert_same(lambda m, a, i: m.gather(a, dim, i), [A32, np.asarray(index, np.int64)])


def _central_difference_check(fn, shapes, seed=0, h=1e-6):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=s) for s in shapes]
    ts = [tg.tensor(x, requires_grad=True) for x in xs]
    y = fn(*ts)
    w = rng.normal(size=tuple(y.shape))
    y.backward(tg.tensor(w))
    d = [rng.normal(size=s) for s in shapes]

    def f(t):
        with tg.no_grad():
            return float(np.sum(np.asarray(fn(*[tg.tensor(x + t * v) for x, v in zip(xs, d)]).tolist()) * w))
    fd = (f(h) - f(-h)) / (2 * h)
    assert sum(float(np.sum(t.grad.numpy() * v)) for t, v in zip(ts, d)) == pytest.approx(fd, rel=1e-6)


def _set_into_view(x, v):
    y = x * 1.0
    y[1, :, [0, 2]] = v   # into a view of y (PyTorch's semantics: [1] first, then the rest)
    return y * y


SMALL_INDEX = {
    "gather smaller index": (lambda x: x.gather(0, tg.tensor([[2], [0]])), [(3, 4)]),
    "gather 0-d": (lambda x: x.gather(0, tg.tensor([0, 0])), [()]),
    "setitem into a view": (_set_into_view, [(2, 3, 4), (1, 3, 2)]),
}


@pytest.mark.parametrize("case", sorted(SMALL_INDEX))
def test_small_index_gradients_match_central_differences(case):
    _central_difference_check(*SMALL_INDEX[case])


@needs_torch
@pytest.mark.parametrize("case", sorted(SMALL_INDEX))
def test_small_index_cases_match_pytorch(case):
    fn, shapes = SMALL_INDEX[case]
    rng = np.random.default_rng(1)
    assert_same(lambda m, *xs: fn(*xs) if m is tg else _torch_twin(case)(*xs),
                [rng.normal(size=s) for s in shapes])


@pytest.mark.parametrize("case", sorted(SMALL_INDEX))
def test_small_index_cases_replay(case):
    """tape.compile runs these indexing rules again on elements, with PyTorch's semantics:
    the replayed value and gradient at a new point are the eager ones there."""
    fn, shapes = SMALL_INDEX[case]
    rng = np.random.default_rng(2)

    def eager(point):
        ts = [tg.tensor(p, requires_grad=True) for p in point]
        y = (fn(*ts) * 1.3).sum()
        return float(y), np.concatenate([np.ravel(g.numpy()) for g in tg.autograd.grad(y, ts)])

    with tg.Tape() as tape:
        ts = [tg.tensor(rng.normal(size=s), requires_grad=True) for s in shapes]
        y = (fn(*ts) * 1.3).sum()
    f = tape.compile(ts, [y])
    point = [rng.normal(size=s) for s in shapes]
    value, grad = f.value_and_grad(point)
    want_value, want_grad = eager(point)
    assert value == pytest.approx(want_value, rel=1e-12)
    assert np.allclose(grad, want_grad, rtol=1e-12, atol=1e-14)


def _torch_twin(case):
    if case == "gather smaller index":
        return lambda x: x.gather(0, torch.tensor([[2], [0]]))
    if case == "gather 0-d":
        return lambda x: x.gather(0, torch.tensor([0, 0]))
    return _set_into_view


# -- std and var where nothing spreads or no degree of freedom is left ----------------------

COLUMN = [[1.0, 2.0], [1.0, 3.0], [1.0, 4.0]]


def test_std_at_zero_spread_has_zero_gradient():
    x = tg.tensor(COLUMN, requires_grad=True)
    x.std(0).sum().backward()
    assert x.grad.tolist() == [[0.0, -0.5], [0.0, 0.0], [0.0, 0.5]]
    z = tg.tensor([5.0, 5.0], requires_grad=True)
    (g,) = tg.autograd.grad(z.std(), z, create_graph=True)
    assert g.tolist() == [0.0, 0.0]
    assert tg.autograd.grad(g.sum(), z)[0].tolist() == [0.0, 0.0]


def test_var_past_the_degrees_of_freedom_is_nan_or_inf():
    x = tg.tensor(COLUMN, requires_grad=True)
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        v = x.var(0, correction=3)
    assert math.isnan(v.tolist()[0]) and v.tolist()[1] == math.inf
    v.sum().backward()
    assert x.grad.tolist()[0][1] == -math.inf and x.grad.tolist()[2][1] == math.inf
    with pytest.warns(UserWarning):
        assert math.isnan(tg.tensor([5.0]).std().item())


EQUAL_ROWS = [[1.866, 1.866, 1.866], [0.5, 1.866, 2.0], [0.1, 0.1, 0.1], [math.inf] * 3]


def test_var_of_equal_values_over_a_dim_is_exactly_zero():
    """Over a dim, PyTorch's Welford update gives exactly 0 for equal finite values (two
    passes leave 7e-32 for three 1.866), and std's gradient there is 0 (fuzzer seed 13:
    ``where(x.var(1) > 0, ...)`` picked the other branch)."""
    x = tg.tensor(EQUAL_ROWS, requires_grad=True)
    v = x.var(1)
    assert v.tolist()[0] == 0.0 and v.tolist()[2] == 0.0 and v.tolist()[1] > 0.0
    assert math.isnan(v.tolist()[3])            # (inf - inf: not equal values)
    tg.where(x.var(1) > 0, x.var(1), -0.74).sum().backward()
    assert x.grad.tolist()[0] == [0.0, 0.0, 0.0]
    y = tg.tensor(EQUAL_ROWS[:3], requires_grad=True)
    y.std(1).sum().backward()
    assert y.grad.tolist()[0] == [0.0, 0.0, 0.0] and y.grad.tolist()[2] == [0.0, 0.0, 0.0]


def _std_second_order_at_no_spread(lib):
    x = lib.tensor([[0.0, 0.0, 0.0], [0.5, 1.8, -0.5]], dtype=lib.float64, requires_grad=True)
    c = lib.tensor([0.987, 1.318], dtype=lib.float64, requires_grad=True)
    (gx,) = lib.autograd.grad((x.std(dim=-1) * c).sum(), [x], create_graph=True)
    gx.sum().backward()
    return gx.tolist(), c.grad.tolist(), x.grad.tolist()


def test_std_second_order_at_no_spread_is_pytorchs():
    """std's backward is PyTorch's (g / (2 std)).masked_fill_(std == 0, 0): its derivative in
    g is 0 / 0 on a row without spread, NaN as PyTorch's (fuzzer seed 18: 0 where PyTorch
    gives NaN)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (the masked division warns nothing)
        gx, cg, xg = _std_second_order_at_no_spread(tg)
    assert gx[0] == [0.0, 0.0, 0.0] and math.isnan(cg[0]) and cg[1] == 0.0
    assert xg[0] == [0.0, 0.0, 0.0] and np.allclose(xg[1], 0.0, atol=1e-15)
    if torch is not None:
        tgx, tcg, _ = _std_second_order_at_no_spread(torch)
        assert np.allclose(gx, tgx, rtol=1e-14, atol=0) and math.isnan(tcg[0])


def test_replayed_var_of_equal_values_over_a_dim_is_exactly_zero():
    """tape.compile's replay of var/std (scalar sums) gives the eager op's exact 0 on equal
    rows: the same branch of a ``where`` and the same gradient (it gave 1.519, not 0.039)."""
    def program(x):
        return tg.where(x.var(1) > 0, x.var(1), -0.74).sum() + x.std(1).sum()

    with tg.Tape() as tape:
        x = tg.tensor(np.random.default_rng(0).normal(size=(3, 3)), requires_grad=True)
        y = program(x)
    value, grad = tape.compile([x], [y]).value_and_grad([np.array(EQUAL_ROWS[:3])])
    xe = tg.tensor(EQUAL_ROWS[:3], requires_grad=True)
    ye = program(xe)
    ye.backward()
    assert value == float(ye)
    assert np.allclose(grad, xe.grad.numpy().ravel(), rtol=1e-12, atol=0)
    assert grad[:3].tolist() == [0.0] * 3 and grad[6:].tolist() == [0.0] * 3


@needs_torch
@pytest.mark.parametrize("op", ["std", "var"])
@pytest.mark.parametrize("dim", [0, 1, None])
def test_std_var_of_equal_values_match_pytorch(op, dim):
    assert_same(lambda m, x: getattr(x, op)(dim), [EQUAL_ROWS[:3]])
    assert_same(lambda m, x: getattr(x, op)(dim, keepdim=True), [[[0.25] * 4] * 3])


STDVAR = [(op, dim, c) for op in ("std", "var") for dim in (0, 1, None) for c in (0, 1, 2, 3, 4)]


@needs_torch
@pytest.mark.parametrize("op,dim,correction", STDVAR)
def test_std_var_corners_match_pytorch(op, dim, correction):
    assert_same(lambda m, x: getattr(x, op)(dim, correction=correction), [COLUMN])


@needs_torch
@pytest.mark.parametrize("op", ["std", "var"])
def test_std_var_of_one_element_and_0d_match_pytorch(op):
    for v in ([5.0], 5.0, [[5.0, 5.0]]):
        assert_same(lambda m, x: getattr(x, op)(), [v])
        assert_same(lambda m, x: getattr(x, op)(unbiased=False), [v])


# -- dims out of range, 0-d tensors --------------------------------------------------------

M23 = [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
DIM_CALLS = {
    "sum": lambda m, x, d: x.sum(dim=d), "mean": lambda m, x, d: x.mean(d),
    "amax": lambda m, x, d: x.amax(d), "amin": lambda m, x, d: x.amin(d),
    "std": lambda m, x, d: x.std(d), "var": lambda m, x, d: x.var(d),
    "logsumexp": lambda m, x, d: x.logsumexp(d), "prod": lambda m, x, d: x.prod(d),
    "norm": lambda m, x, d: x.norm(dim=d), "softmax": lambda m, x, d: x.softmax(d),
    "log_softmax": lambda m, x, d: x.log_softmax(d), "cumsum": lambda m, x, d: x.cumsum(d),
    "cumprod": lambda m, x, d: x.cumprod(d), "max": lambda m, x, d: x.max(d)[0],
    "min": lambda m, x, d: x.min(d)[0], "squeeze": lambda m, x, d: x.squeeze(d),
    "unsqueeze": lambda m, x, d: x.unsqueeze(d), "transpose": lambda m, x, d: x.transpose(d, 0),
    "permute": lambda m, x, d: x.permute(d, 0) if x.ndim == 2 else x.permute(d),
    "flatten": lambda m, x, d: x.flatten(d), "cat": lambda m, x, d: m.cat([x, x], d),
    "stack": lambda m, x, d: m.stack([x, x], d), "flip": lambda m, x, d: x.flip(d),
    "roll": lambda m, x, d: x.roll(1, d), "split": lambda m, x, d: x.split(1, d)[0],
    "chunk": lambda m, x, d: x.chunk(1, d)[0],
    "gather": lambda m, x, d: x.gather(d, m.zeros((1,) * x.ndim, dtype=m.int64)),
    "index_select": lambda m, x, d: x.index_select(d, m.tensor([0])),
}


def test_dims_out_of_range_raise_index_error():
    x = tg.tensor(M23)
    with pytest.raises(IndexError, match=r"^Dimension out of range \(expected to be in range of "
                                         r"\[-2, 1\], but got 2\)$"):
        x.sum(dim=2)
    with pytest.raises(IndexError, match=r"range of \[-1, 0\], but got 1"):
        tg.tensor([1.0, 2.0, 3.0]).sum(dim=1)
    with pytest.raises(IndexError, match=r"range of \[-3, 2\], but got 3"):
        x.unsqueeze(3)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times in the list of dims"):
        x.sum((0, -2))
    for name, f in DIM_CALLS.items():
        with pytest.raises(IndexError, match="Dimension out of range"):
            f(tg, x, 3 if name in ("unsqueeze", "stack") else 2)


def test_0d_tensors_take_dim_0_and_minus_1():
    s = tg.tensor(2.0, requires_grad=True)
    y = s.logsumexp(0)
    y.backward()
    assert y.tolist() == 2.0 and s.grad.tolist() == 1.0
    assert s.sum(-1).grad_fn.name() == "SumBackward1"
    assert s.softmax(0).tolist() == 1.0 and s.unsqueeze(-1).tolist() == [2.0]
    with pytest.raises(IndexError, match=r"range of \[-1, 0\], but got 1"):
        s.sum(1)


@needs_torch
@pytest.mark.parametrize("name", sorted(DIM_CALLS))
@pytest.mark.parametrize("value", [M23, [1.0, 2.0, 3.0], 2.0], ids=["2d", "1d", "0d"])
@pytest.mark.parametrize("dim", [-4, -3, -2, -1, 0, 1, 2, 3])
def test_dims_match_pytorch(name, value, dim):
    assert_same(lambda m, x: DIM_CALLS[name](m, x, dim), [value])


# -- exception types and messages ---------------------------------------------------------

ERRORS = {
    "cat ndim": lambda m: m.cat([m.zeros(2, 3), m.zeros(3)]),
    "cat sizes": lambda m: m.cat([m.zeros(2, 3), m.zeros(2, 2)], 0),
    "cat 0-d": lambda m: m.cat([m.tensor(1.0), m.tensor(2.0)]),
    "cat empty": lambda m: m.cat([]),
    "stack sizes": lambda m: m.stack([m.zeros(2, 3), m.zeros(3)]),
    "stack empty": lambda m: m.stack([]),
    "expand size": lambda m: m.zeros(3).expand(2, 2),
    "expand fewer": lambda m: m.zeros(2, 3, dtype=m.float64).expand(3),
    "expand -1 new": lambda m: m.zeros(3).expand(-1, 3),
    "permute repeat": lambda m: m.zeros(2, 3).permute(0, 0),
    "permute length": lambda m: m.zeros(2, 3).permute(0),
    "flatten order": lambda m: m.zeros(2, 3).flatten(1, 0),
    "split 0-d": lambda m: m.tensor(1.0).split(1),
    "chunk 0-d": lambda m: m.tensor(1.0).chunk(1),
    "roll 0-d": lambda m: m.tensor(1.0).roll(1, 0),
    "index_select matrix": lambda m: m.zeros(2, 3).index_select(0, m.tensor([[0]])),
    "view two -1": lambda m: m.zeros(2, 3).view(-1, -1),
    "dot sizes": lambda m: m.zeros(3) @ m.zeros(2),
    "tensor None": lambda m: m.tensor(None),
    "tensor str": lambda m: m.tensor("abc"),
    "tensor ragged": lambda m: m.tensor([[1.0, 2.0], [3.0]]),
    "tensor object": lambda m: m.tensor(object()),
    "tensor None inside": lambda m: m.tensor([1.0, None]),
    "setitem advanced shape": lambda m: m.zeros(2, 3).__setitem__(([0, 1],), m.zeros(3, 2)),
    "setitem basic shape": lambda m: m.zeros(5).__setitem__(slice(0, 2), m.ones(3)),
}


def test_exceptions_are_pytorchs():
    with pytest.raises(RuntimeError, match=r"Sizes of tensors must match except in dimension 0\. "
                                           r"Expected size 3 but got size 2 for tensor number 1"):
        tg.cat([tg.zeros(2, 3), tg.zeros(2, 2)])
    with pytest.raises(RuntimeError, match=r"The expanded size of the tensor \(2\) must match the "
                                           r"existing size \(3\) at non-singleton dimension 1"):
        tg.zeros(3).expand(2, 2)
    with pytest.raises(RuntimeError, match="Could not infer dtype of NoneType"):
        tg.tensor(None)
    with pytest.raises(TypeError, match="invalid data type 'str'"):
        tg.tensor("abc")
    t = tg.zeros(5)
    t[3] = tg.tensor([3.0])   # leading dims of size 1 are dropped, as PyTorch
    t[1:3] = tg.ones(1, 1, 2)
    assert t.tolist() == [0.0, 1.0, 1.0, 3.0, 0.0]


@needs_torch
@pytest.mark.parametrize("case", sorted(ERRORS))
def test_exceptions_match_pytorch(case):
    got, want = outcome(tg, lambda m: ERRORS[case](m), []), outcome(torch, lambda m: ERRORS[case](m), [])
    assert got[:3] == want[:3] if want[0] == "raise" else got[0] == "ok"


# -- the backward graph -------------------------------------------------------------------

def _set(index, value=7.0):
    def f(m, x, *v):
        y = x * 1.0
        y[index] = v[0] if v else value
        return y
    return f


GRAPHS = {
    "where": (lambda m, x, y: m.where(x > 0, x, y), [(3, 4), (3, 4)]),
    "where number": (lambda m, x: m.where(x > 0, x, 0.0), [(3, 4)]),
    "clamp numbers": (lambda m, x: x.clamp(-0.5, 0.5), [(3, 4)]),
    "clamp min": (lambda m, x: x.clamp(min=-0.5), [(3, 4)]),
    "clamp tensors": (lambda m, x, lo, hi: x.clamp(lo, hi), [(3, 4), (3, 4), (3, 4)]),
    "clamp tensor min": (lambda m, x, lo: x.clamp(min=lo), [(3, 4), (3, 4)]),
    "clamp constant tensors": (lambda m, x: x.clamp(m.zeros(3, 4), m.ones(3, 4)), [(3, 4)]),
    "get i, j": (lambda m, x: x[1, 2], [(3, 4)]),
    "get i, slice": (lambda m, x: x[1, 1:3], [(3, 4)]),
    "get slice, i": (lambda m, x: x[1:3, 2], [(3, 4)]),
    "get :, :": (lambda m, x: x[:, :], [(3, 4)]),
    "get :": (lambda m, x: x[:], [(3, 4)]),
    "get None, i, None, j": (lambda m, x: x[None, 1, None, 2], [(2, 3, 4)]),
    "get i, list": (lambda m, x: x[1, [0, 2]], [(3, 4)]),
    "get i, :, list": (lambda m, x: x[1, :, [0, 1]], [(2, 3, 4)]),
    "get list, :, i": (lambda m, x: x[[0, 1], :, 1], [(2, 3, 4)]),
    "get 0-d int tensor": (lambda m, x: x[m.tensor(1)], [(2, 3, 4)]),
    "set int": (_set(1), [(3, 4)]),
    "set int, int": (_set((1, 2)), [(3, 4)]),
    "set list": (_set([0, 2]), [(3, 4)]),
    "set int, list": (_set((1, [0, 2])), [(3, 4)]),
    "set :, list": (_set((slice(None), [0, 2])), [(3, 4)]),
    "set all": (_set(Ellipsis), [(3, 4)]),
    "set tensor": (_set(1), [(3, 4), (4,)]),
    "set tensor leading ones": (_set(1), [(3, 4), (1, 1, 4)]),
    "set tensor broadcast": (_set(slice(1, None)), [(3, 4), (4,)]),
    "set list tensor": (_set([0, 2]), [(3, 4), (1, 4)]),
    "set all tensor": (_set(slice(None)), [(3, 4), (1, 3, 4)]),
    "nll": (lambda m, x: (tF if m is tg else F).nll_loss(x, m.tensor([0, 1, 3])), [(3, 4)]),
    "nll weight": (lambda m, x: (tF if m is tg else F).nll_loss(
        x, m.tensor([0, 1, 3]), weight=m.tensor([1.0, 2.0, 0.5, 1.0], dtype=m.float64)), [(3, 4)]),
    "split sizes": (lambda m, x: x.split([1, 3], 1)[1], [(3, 4)]),
    "chunk": (lambda m, x: x.chunk(2, 1)[1], [(3, 4)]),
    "mse constant target": (lambda m, x: (tF if m is tg else F).mse_loss(x, m.zeros(3, 4)),
                            [(3, 4)]),
}


def test_graph_views_are_pytorchs():
    x = tg.tensor(np.ones((3, 4)), requires_grad=True)
    y = tg.tensor(np.ones((3, 4)), requires_grad=True)
    assert len(tg.where(x > 0, x, y).grad_fn.next_functions) == 2
    assert graph(x.clamp(-1.0, 1.0)) == ("ClampBackward1", ("AccumulateGrad",))
    assert graph(x.clamp(y, y + 1.0))[0] == "ClampBackward0"
    assert graph(x[1, 2]) == ("SelectBackward0", ("SelectBackward0", ("AccumulateGrad",)))
    z = x * 1.0
    z[tg.tensor([0, 2])] = 1.0
    assert z.grad_fn.name() == "IndexPutBackward0"
    assert graph(tF.nll_loss(x, tg.tensor([0, 1, 3]))) == ("NllLossBackward0", ("AccumulateGrad",))
    # class targets are no input of the (fused) cross-entropy node; probabilities are
    assert len(tF.cross_entropy(x, tg.tensor([0, 1, 3])).grad_fn.next_functions) == 1
    assert len(tF.cross_entropy(x, y.softmax(1)).grad_fn.next_functions) == 2
    assert x.split([1, 3], 1)[0].grad_fn.name() == "SplitWithSizesBackward0"


@needs_torch
@pytest.mark.parametrize("case", sorted(GRAPHS))
def test_graphs_match_pytorch(case):
    fn, shapes = GRAPHS[case]
    rng = np.random.default_rng(0)
    assert_same(fn, [rng.normal(size=s) for s in shapes])


# -- a seeded sweep: random shapes, dims and keepdim ------------------------------------------

REDUCTIONS = ("sum", "mean", "amax", "amin", "std", "var", "logsumexp", "prod", "norm")


def _reduction_case(k):
    rng = np.random.default_rng(k)
    nd = int(rng.integers(0, 4))
    x = rng.normal(size=tuple(int(n) for n in rng.integers(1, 4, size=nd)))
    if x.size > 1 and k % 5 == 0:
        x.flat[1] = x.flat[0]   # a tie
    op, kind = REDUCTIONS[k % len(REDUCTIONS)], int(rng.integers(0, 3))
    n = max(nd, 1)
    dim = None if kind == 0 or op == "logsumexp" and kind == 0 else \
        int(rng.integers(-n - 1, n + 1)) if kind == 1 or op == "prod" else \
        tuple(int(d) for d in rng.choice(range(-n, n), size=min(2, n), replace=False))
    if op == "logsumexp" and dim is None:
        dim = 0
    keepdim = bool(rng.integers(0, 2))

    def f(m, t):
        if dim is None:
            return getattr(t, op)()
        if op == "norm":
            return t.norm(dim=dim, keepdim=keepdim)
        return getattr(t, op)(dim, keepdim=keepdim)
    return f, x


@needs_torch
@pytest.mark.parametrize("k", range(90))
def test_random_reductions_match_pytorch(k):
    f, x = _reduction_case(k)
    assert_same(f, [x])


LOSSES = {
    "mse": lambda m, x, y, r: (tF if m is tg else F).mse_loss(x, y, reduction=r),
    "smooth_l1": lambda m, x, y, r: (tF if m is tg else F).smooth_l1_loss(x, y, reduction=r),
    "bce_with_logits": lambda m, x, y, r: (tF if m is tg else F).binary_cross_entropy_with_logits(
        x, y.detach().sigmoid(), reduction=r),
    "nll": lambda m, x, y, r: (tF if m is tg else F).nll_loss(
        x.log_softmax(1), m.tensor([0, 2, 1]), reduction=r),
    "nll_ignore": lambda m, x, y, r: (tF if m is tg else F).nll_loss(
        x, m.tensor([0, 2, 1]), ignore_index=2, reduction=r),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_match_pytorch(name, reduction):
    rng = np.random.default_rng(3)
    assert_same(lambda m, x, y: LOSSES[name](m, x, y, reduction),
                [rng.normal(size=(3, 4)), rng.normal(size=(3, 4))])


# -- max/min of all elements and norms at the corners (found by the fuzzer) ----------------

CORNERS = {
    # PyTorch's evenly_distribute_backward: the NaNs share the gradient of a NaN min/max,
    # and the other elements get exactly 0 even from an infinite gradient
    "min of all with NaNs": (lambda m, x: x.min(), [[1.0, math.nan, 2.0, math.nan]]),
    "max of all, infinite gradient": (lambda m, x: x.max() * math.inf, [[1.0, 3.0, 2.0, 3.0]]),
    # one element: |x| (its square would underflow), masked to 0 where the norm is 0
    "norm over a dim of size 1": (lambda m, x: x.norm(dim=-1), [[[1.406], [1e-300], [-1.99]]]),
    "norm of a zero row, infinite gradient": (lambda m, x: x.norm(dim=1) * math.inf,
                                              [[[0.0, 0.0], [3.0, 4.0]]]),
    "norm of a 0-d tensor that underflows": (lambda m, x: x.norm(), [-1e-300]),
    # a dim of size 1 with zeros elsewhere: the gradient is g put back in x's shape
    "narrow": (lambda m, x: x.narrow(1, 1, 2) * 2.0, [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]),
    "narrow with a negative start": (lambda m, x: m.narrow(x, -1, -2, 2), [[[1.0, 2.0, 3.0]]]),
    "select": (lambda m, x: x.select(1, -1) * 3.0, [[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]),
    "prod over a dim of size 1, with zeros": (lambda m, x: x.prod(-3),
                                              [[[[[1.0, 0.0, 2.0]]], [[[0.0, 3.0, 1.0]]]]]),
}


def test_cross_entropy_with_a_minus_inf_logit_of_another_class():
    """Class targets pick their class's log-probability: no 0 * -inf from the others."""
    x = tg.tensor([[3.0, -0.6, -math.inf], [-math.inf, 1.0, 0.5]], requires_grad=True)
    loss = tF.cross_entropy(x, tg.tensor([0, 1]), reduction="none")
    loss.sum().backward()
    assert np.isfinite(loss.tolist()).all() and np.isfinite(x.grad.tolist()).all()
    if torch is not None:
        xt = torch.tensor([[3.0, -0.6, -math.inf], [-math.inf, 1.0, 0.5]], dtype=torch.float64,
                          requires_grad=True)
        lt = F.cross_entropy(xt, torch.tensor([0, 1]), reduction="none")
        lt.sum().backward()
        np.testing.assert_allclose(loss.tolist(), lt.tolist(), rtol=1e-12)
        np.testing.assert_allclose(x.grad.tolist(), xt.grad.tolist(), rtol=1e-12)


def test_corners_without_torch():
    x = tg.tensor([1.0, math.nan, 2.0, math.nan], requires_grad=True)
    x.min().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.0, 0.5]
    x = tg.tensor([[1.406], [1e-300], [-1.99]], requires_grad=True)
    x.norm(dim=-1).sum().backward()
    assert x.grad.tolist() == [[1.0], [1.0], [-1.0]]


@needs_torch
@pytest.mark.parametrize("case", sorted(CORNERS))
def test_corners_match_pytorch(case):
    fn, values = CORNERS[case]
    assert_same(fn, values)
