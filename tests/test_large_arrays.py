"""Large array entries: the walk runs each elementwise entry of at least ``engine._LARGE``
elements alone on its own arrays (``kernels.reverse_entry``) instead of laying it out in the
flat arrays of the Numba sweep.  Both ways must give the same gradients bit for bit (signed
zeros, NaN and inf included), for every op of the table and every kind of operand, and the
same errors; at real sizes the gradients are PyTorch's.
"""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.core.elementwise import FUNCTIONS
from tapegrad.core.optable import OPS

try:
    import torch
except ImportError:
    torch = None

N = 48
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5])


def _values(op, k, rng):
    lo, hi = op.domain[k]
    v = rng.uniform(lo, hi, N)
    v[:len(SPECIAL)] = SPECIAL[rng.permutation(len(SPECIAL))]
    return v


def _grads(build, large):
    """The gradients of the leaves ``build`` returns, with every array entry run alone
    (``large``) or laid out flat."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "_LARGE", 1 if large else 1 << 60)
        leaves, out, seed = build()
        with np.errstate(all="ignore"):
            out.backward(seed)
    return [t.grad.numpy() if t.grad is not None else None for t in leaves]


def _same_bits(a, b):
    """Equal bit for bit, signed zeros included; a NaN matches any NaN (the sign bit of a
    NaN is not a value: LLVM folds ``a + -g`` into ``a - g``, which keeps ``g``'s)."""
    if a is None or b is None:
        return a is None and b is None
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    ok = ~np.isnan(a)
    return np.array_equal(a[ok].view(np.int64), b[ok].view(np.int64))


def _seed(rng, shape):
    s = rng.standard_normal(shape)
    s.flat[:4] = [0.0, -0.0, np.inf, np.nan]
    return tg.tensor(s)


# how an op's operands are given: every one an array leaf, the second a 0-d leaf (it
# broadcasts over the elements in the sweep), one leaf used twice, a number constant
KINDS = ["arrays", "0-d operand", "same leaf twice", "number constant"]


@pytest.mark.parametrize("name,kind", [(op.name, kind) for op in OPS if not op.compare
                                       for kind in (KINDS if op.arity > 1 else KINDS[:1])])
def test_large_entries_give_the_flat_sweeps_gradients_bit_for_bit(name, kind):
    op = next(o for o in OPS if o.name == name)
    rng = np.random.default_rng(hash((name, kind)) % 2**32)
    vals = [_values(op, k, rng) for k in range(op.arity)]
    if name == "where":
        vals[0] = rng.random(N) < 0.5

    def build():
        leaves = []
        args = []
        for k, v in enumerate(vals):
            if name == "where" and k == 0:
                args.append(tg.tensor(v))
            elif kind == "0-d operand" and k == 1:
                t = tg.tensor(float(v[5]), requires_grad=True)
                leaves.append(t)
                args.append(t)
            elif kind == "number constant" and k == op.arity - 1:
                args.append(float(v[5]))
            elif kind == "same leaf twice" and k > 0 and args and isinstance(args[0], tg.Tensor) \
                    and args[0].requires_grad:
                args.append(args[0])
            else:
                t = tg.tensor(v, requires_grad=True)
                leaves.append(t)
                args.append(t)
        # an entry above, so that the entry under test gets its gradient from the sweep
        with np.errstate(all="ignore"):
            out = FUNCTIONS[name](*args) * 1.5
        return leaves, out, _seed(rng, out.shape)

    state = rng.bit_generator.state
    flat = _grads(build, large=False)
    rng.bit_generator.state = state
    alone = _grads(build, large=True)
    assert all(_same_bits(a, b) for a, b in zip(flat, alone)), name


def test_zero_tensors_and_chains_match_bit_for_bit():
    """sgn passes PyTorch's efficient zero tensor on (entries reached by zero tensors only),
    and a chain mixes array entries, 0-d entries and Python ops."""
    rng = np.random.default_rng(1)
    xv = rng.standard_normal(N)
    xv[:4] = [0.0, -0.0, 1.0, -1.0]

    def build():
        x = tg.tensor(xv, requires_grad=True)
        m = tg.tensor(0.25, requires_grad=True)
        a = (x - m).exp()
        b = tg.sgn(x * m) * a + x.relu() * 0.0
        out = tg.log(a.sum()) * m + b.sum() + tg.max(x)
        return [x, m], out, None

    assert all(_same_bits(a, b) for a, b in zip(_grads(build, False), _grads(build, True)))


@pytest.mark.parametrize("n", [engine._LARGE, 3 * engine._LARGE + 7])
def test_log_sum_exp_of_large_arrays_matches_torch(n):
    torch_ = pytest.importorskip("torch")
    xv = np.random.default_rng(n).uniform(-5, 5, n)
    x = tg.tensor(xv, requires_grad=True)
    m = tg.max(x)
    (g,) = tg.autograd.grad(m + tg.log(tg.sum(tg.exp(x - m * 1.0))), x)
    xt = torch_.tensor(xv, requires_grad=True)
    mt = torch_.max(xt)
    (gt,) = torch_.autograd.grad(mt + torch_.log(torch_.sum(torch_.exp(xt - mt * 1.0))), xt)
    # (the max's gradient sums n terms: in another order than PyTorch's reduction)
    np.testing.assert_allclose(g.numpy(), gt.numpy(), rtol=1e-10, atol=1e-16)


def test_large_entries_gradcheck(monkeypatch):
    monkeypatch.setattr(engine, "_LARGE", 1)
    x = tg.tensor(np.linspace(0.1, 0.9, 6), requires_grad=True)
    y = tg.tensor(np.linspace(-1.0, 2.0, 6), requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: (a * b).sin() / (a + 2.0) - b.exp() * a, (x, y))


def test_large_entries_check_in_place_changes_and_freed_graphs():
    x = tg.tensor(np.linspace(-1, 1, engine._LARGE), requires_grad=True)
    y = (x * 2.0).exp()          # exp saves its result
    y.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    z = (x * 3.0).sin()
    z.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        z.sum().backward()


def test_large_gradient_buffers_are_not_shared():
    """A leaf's .grad owns its memory: a second backward adds into it, not into a buffer of
    the walk or a value the user holds."""
    n = engine._LARGE
    x = tg.tensor(np.ones(n), requires_grad=True)
    seed = tg.tensor(np.full(n, 2.0))
    (x * 3.0).backward(seed)
    first = x.grad.numpy().copy()
    (x * 3.0).backward(seed)
    np.testing.assert_array_equal(x.grad.numpy(), 2 * first)
    np.testing.assert_array_equal(seed.numpy(), np.full(n, 2.0))


def test_a_callers_gradient_array_is_never_written():
    """``grad_tensors`` seed the walk: an output that another output depends on gets more
    gradient added, which must go into the walk's own buffer, not the caller's array (it
    did, for the outputs of array ops, when the seed array was adopted as the buffer)."""
    for n in (2, engine._LARGE):
        x = tg.tensor(np.ones((n, 2)), requires_grad=True)
        for y in (x @ tg.tensor(np.ones((2, 2))), x * 2.0):   # an array op's, an entry's output
            z = y.sum(0)
            gy = np.ones((n, 2))
            tg.autograd.backward([z, y], [tg.tensor(np.ones(2)), tg.from_numpy(gy)])
            np.testing.assert_array_equal(gy, np.ones((n, 2)))


@pytest.mark.parametrize("shape", [(0, 4), (1, 1), (0,)])
def test_a_sums_gradient_into_an_empty_or_one_element_value(shape):
    # (a sum's gradient is one number broadcast; kept so only for two elements or more:
    # an empty one has no number to keep — fuzzer seed 0 found an IndexError)
    x = tg.tensor(np.arange(8.0).reshape(2, 4), requires_grad=True)
    part = x[1:-1:2] if shape[0] == 0 else x[:1, :1]
    if len(shape) == 1:
        part = part.reshape(-1)
    (part.sum() * 2).backward()
    want = np.zeros((2, 4))
    if part.numel():
        want[0, 0] = 2.0
    assert np.array_equal(x.grad.numpy(), want)


def test_numbers_written_out_over_large_entries_keep_their_bits():
    """``engine._filled`` keeps a number written out over a large entry per its bits and
    length: -0.0 and +0.0, NaNs and the gradient spread from a sum each get their own, one
    after another in a process, bit for bit the gradients of the fill they replace."""
    n = max(engine._FILLED_FROM, engine._FLAT_LARGE) + 3   # (an entry run alone)
    x_value = np.linspace(-2.0, 3.0, n)
    for c in (0.0, -0.0, np.nan, -np.nan, 2.0, 0.0, -0.0, 2.0):
        x = tg.tensor(x_value, requires_grad=True)
        (x * c).sum().backward()           # (c written out: mul's partial reads it)
        assert np.full(n, c).tobytes() == x.grad.numpy().tobytes()
        x = tg.tensor(x_value, requires_grad=True)
        ((x * 2.0).sum() * c).backward()   # (the sum's gradient, c, spread over the entry)
        assert np.full(n, c * 2.0).tobytes() == x.grad.numpy().tobytes()
