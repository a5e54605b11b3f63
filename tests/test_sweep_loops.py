"""The reverse sweep's loops over an array entry's elements: ``contiguous_loop`` (whole
arrays of the flat layout, or an array and a constant number, in loops LLVM vectorizes)
gives the general ``array_loop``'s bits, and a walk through it gives PyTorch's gradients."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import kernels as K
from tapegrad.core.optable import OPS


def _awkward(n, seed, lo=-3.0, hi=3.0):
    """Values over a few decades with signed zeros in them (no inf or NaN: a NaN's sign
    bit is not compared below)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(lo, hi, n) * 10.0 ** rng.integers(-3, 2, n)
    x[rng.random(n) < 0.2] = -0.0
    return x


def _layout(o, n, seed):
    """A flat layout: the entry's values and adjoint at 0, x at n, y at 2n, three scratch
    slots at 3n (as ``kernels.reverse`` lays them out); adjoints start non-zero, so that an
    added term is checked, not only a set one."""
    lo, hi = OPS[o].domain[0]
    lo, hi = max(lo, -3.0), min(hi, 3.0)
    aval = np.concatenate([_awkward(n, seed), _awkward(n, seed + 1, lo, hi),
                           _awkward(n, seed + 2, lo, hi), [0.0, 0.0, 0.0]])
    if lo > 0:   # (log's domain: positive operands)
        aval[n:3 * n] = np.abs(aval[n:3 * n]) + lo + 0.5
    aval[3 * n:3 * n + 2] = aval[n], aval[2 * n]   # (the scratch slots of number operands)
    aadj = np.concatenate([_awkward(n, seed + 3), _awkward(2 * n, seed + 4), [0.0, 0.0, 0.0]])
    return aval, aadj


CASES = [(0, 1, 1, 1, 1), (1, 1, 0, 1, 0), (2, 0, 1, 0, 1)]   # case, sx, sy, mx, my


@pytest.mark.parametrize("n", [16, 37, 300])
@pytest.mark.parametrize("case,sx,sy,mx,my", CASES)
def test_contiguous_loop_gives_the_general_loops_bits(n, case, sx, sy, mx, my):
    covered = set()
    for o, op in enumerate(OPS):
        if op.arity > 2 or (op.arity == 1 and case != 1):
            continue
        aval, aadj = _layout(o, n, o)
        scratch = 3 * n
        ox = n if sx else scratch
        oy = 2 * n if sy else scratch + 1
        if op.arity == 1:
            oy, aval[scratch + 1] = scratch + 1, 0.0   # (consts[0], a unary op's operand)
        mine, general = aadj.copy(), aadj.copy()
        with np.errstate(all="ignore"):
            if not K.contiguous_loop(o, case, n, mine, 0, aval, 0, aval, ox, aval, oy, mine, ox,
                                     mine, oy):
                continue
            K.array_loop(o, n, general, 0, 1, aval, 0, aval, ox, sx, aval, oy, sy, aval,
                         scratch + 2, 0, general, ox, mx, general, oy, my, general,
                         scratch + 2, 0)
        covered.add(op.name)
        assert np.array_equal(np.isnan(mine), np.isnan(general)), op.name
        assert (np.nan_to_num(mine, nan=7.0).tobytes()
                == np.nan_to_num(general, nan=7.0).tobytes()), op.name
    assert {"add", "mul", "exp"} <= covered or (case != 1 and {"add", "mul"} <= covered)


@pytest.mark.parametrize("n", [16, 40])
def test_walks_through_the_contiguous_loops_give_pytorchs_gradients(n):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(n)
    xs, ys = rng.uniform(0.5, 2.0, n), rng.uniform(-2.0, 2.0, n)

    def program(m, x, y):
        h = x * y + 0.5          # both arrays; an array and a number
        h = 2.0 - h / y          # a number and an array; both arrays
        h = (-h).exp() * 0.1 + h.tanh() - m.sigmoid(h) + m.relu(h)
        return (m.log(h * h + 1.0) * y).sum()

    grads = []
    for m in (tg, torch):
        x, y = m.tensor(xs, requires_grad=True), m.tensor(ys, requires_grad=True)
        program(m, x, y).backward()
        grads.append((x.grad.numpy(), y.grad.numpy()))
    for mine, theirs in zip(*grads):
        np.testing.assert_allclose(mine, theirs, rtol=1e-13, atol=1e-15)
