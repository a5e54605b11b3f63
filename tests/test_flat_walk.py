"""``_flat_walk``: a backward over a small tape of elementwise entries and array ops, from
``backward()`` and from ``autograd.grad``/``backward(inputs=)`` whose inputs hold every
leaf, is one sweep call between those ops and the general walk's step at each.  It must
take those walks, give the general walk's gradients bit for bit (and PyTorch's), free what
it frees, and leave every other walk to the general one."""
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.core.tape import fresh_default_tape, thread_state

try:
    import torch
except ImportError:
    torch = None


def _lse(m, x):
    mx = m.max(x)
    return mx + m.log(m.sum(m.exp(x - mx)))


PROGRAMS = {
    # GradBench's log-sum-exp: max and sum, neither at the seed
    "log-sum-exp": _lse,
    "min, then a mean at the seed": lambda m, x: (m.min(x) * x).mean(),
    "fused logsumexp times a sum": lambda m, x: m.logsumexp(x * 2.0, 0) * x.sum(),
    "max of max": lambda m, x: m.max(x) * m.max(x * x) - m.min(x).exp(),
    "numbers after the reductions": lambda m, x: (m.sum(x * x) ** 0.5).tanh() * 3.0,
}
# array ops of array results: the general walk's steps of its own (basic index, cat,
# broadcasts, sums over dims, unbind), NumPy rules, tensor rules, several results
ARRAY_PROGRAMS = {
    "index and cat": lambda m, x: m.cat([x[1:3] * 2.0, x[:2].exp(), x[4:]]).tanh().sum(),
    # basic indices the sweep runs itself (steps, None, Ellipsis, a row, an element), a -0.
    # gradient through one (its input's other elements get +0.)
    "basic indices": lambda m, x: (x.reshape(2, -1)[:, 1:3][1] * x[None, 1:3][0]).sum()
    + (x.reshape(2, -1)[..., 0] * x[::2][:2]).prod() + x[2] * -0.0 + x[:2].sum() * -0.0,
    "matmul": lambda m, x: (x.reshape(2, -1) @ x[:x.shape[0] // 2]).sin().sum(),
    "broadcast and sum over a dim": lambda m, x: (x.reshape(2, -1).sum(0) * x.reshape(2, -1)
                                                  - x[:2].reshape(2, 1)).mean(),
    "iteration": lambda m, x: sum(v * v for v in x),
    "stack and softmax": lambda m, x: m.log_softmax(m.stack([x, x * x]), 1)[1, 2],
    "tensor rules": lambda m, x: x.cumsum(0).prod() + m.sort(x)[0][-1],
    "several results": lambda m, x: m.max(x.reshape(2, -1), 1)[0].sum()
    + sum(c.mean() for c in x.split(x.shape[0] // 3)),
}
VALUES = {
    "distinct": [0.3, -1.2, 2.5, 0.7, -0.4],
    "ties at the max and min": [1.0, 3.0, -2.0, 3.0, -2.0],
    "a NaN": [0.5, float("nan"), 1.5, -0.5, 2.0],
    "large": list(np.random.default_rng(5).standard_normal(3000)),
}
HOW = ["backward", "grad", "backward(inputs=)"]


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("values", [[0.3, -1.2, 2.5, 0.7, -0.4, 1.1],
                                    list(np.random.default_rng(6).standard_normal(200))])
@pytest.mark.parametrize("name", ARRAY_PROGRAMS)
def test_array_ops_take_one_walk_with_the_general_walks_bits(name, values, how, flat_taken,
                                                             monkeypatch, entries):
    program = ARRAY_PROGRAMS[name]
    got = _gradient(tg, program, values, how).numpy()
    assert flat_taken == {True: 1, False: 0}
    monkeypatch.setattr(engine, "FLAT_WALK", False)
    general = _gradient(tg, program, values, how).numpy()
    np.testing.assert_array_equal(got, general)
    assert np.array_equal(np.signbit(got), np.signbit(general))
    if torch is not None:
        want = _gradient(torch, program, values, how).numpy()
        # (BLAS sums a matmul's products in its own order)
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


def test_a_float32_result_of_an_array_op_takes_the_general_walk(flat_taken):
    x = tg.tensor(VALUES["distinct"], dtype=tg.float64, requires_grad=True)
    (x[1:4].float() * 2.0).sum().backward()
    assert flat_taken == {True: 0, False: 1}
    np.testing.assert_array_equal(x.grad.numpy(), [0.0, 2.0, 2.0, 2.0, 0.0])


def test_an_index_tensor_changed_in_place_raises(flat_taken):
    """An advanced index saved by its op (``_check_saved`` at the op's step)."""
    for m in [tg] + ([torch] if torch is not None else []):
        x = m.tensor(VALUES["distinct"], dtype=m.float64, requires_grad=True)
        idx = m.tensor([0, 2, 2])
        y = (x[idx] * x[idx]).sum()
        idx[0] = 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            m.autograd.grad(y, x)


def _gradient(m, program, values, how):
    x = m.tensor(values, dtype=m.float64, requires_grad=True)
    y = program(m, x)
    if how == "grad":
        return m.autograd.grad(y, x)[0]
    y.backward(inputs=[x] if how == "backward(inputs=)" else None)
    return x.grad


@pytest.fixture(autouse=True)
def fresh_tape():
    """Each test records on a fresh default tape: one left by a backward that raised holds
    what the walk turns away (in-place marks)."""
    fresh_default_tape(thread_state.implicit)


@pytest.fixture
def flat_taken(monkeypatch):
    """How many walks ``_flat_walk`` took (and how many it turned away)."""
    taken = {True: 0, False: 0}
    walk = engine._flat_walk

    def counted(*args):
        acc = walk(*args)
        taken[acc is not None] += 1
        return acc

    monkeypatch.setattr(engine, "_flat_walk", counted)
    return taken


@pytest.fixture(params=["small entries laid out", "every entry alone", "medium entries alone"])
def entries(request, monkeypatch):
    """The walk as it runs, and with every elementwise entry run alone on its own arrays,
    as it runs those of ``_FLAT_LARGE`` elements or more (``FloatAdjoints.entry``), and with
    a tape whose small arrays hold more than ``_FLAT_ELEMENTS`` elements, whose entries of
    ``_LARGE`` elements or more then run alone (the general walk's limit, here 4 for both
    walks: GMM's medium sizes)."""
    if request.param == "every entry alone":
        monkeypatch.setattr(engine, "_FLAT_LARGE", 1)
    elif request.param == "medium entries alone":
        monkeypatch.setattr(engine, "_LARGE", 4)
        monkeypatch.setattr(engine, "_FLAT_ELEMENTS", 24)
    return request.param


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("values", VALUES)
@pytest.mark.parametrize("name", PROGRAMS)
def test_reductions_anywhere_take_one_walk_with_the_general_walks_bits(name, values, how,
                                                                       flat_taken, monkeypatch,
                                                                       entries):
    program, xs = PROGRAMS[name], VALUES[values]
    got = _gradient(tg, program, xs, how).numpy()
    assert flat_taken == {True: 1, False: 0}
    monkeypatch.setattr(engine, "FLAT_WALK", False)
    general = _gradient(tg, program, xs, how).numpy()
    np.testing.assert_array_equal(got, general)   # (bit for bit: NaN where NaN)
    assert np.array_equal(np.signbit(got), np.signbit(general))
    if torch is not None:
        want = _gradient(torch, program, xs, how).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("flat", [True, False])
@pytest.mark.parametrize("how", HOW)
def test_the_walk_frees_its_graph_as_the_general_walk(how, flat, monkeypatch):
    monkeypatch.setattr(engine, "FLAT_WALK", flat)
    for m in [tg] + ([torch] if torch is not None else []):
        x = m.tensor(VALUES["distinct"], dtype=m.float64, requires_grad=True)
        y = _lse(m, x)
        (m.autograd.grad(y, x) if how == "grad" else
         y.backward(inputs=[x] if how == "backward(inputs=)" else None))
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            m.autograd.grad(y, x)


def test_an_input_that_is_not_every_leaf_takes_the_general_walk(flat_taken):
    """A leaf the gradient reaches but ``inputs`` does not name: the general walk prunes
    (its entries are not run, not freed)."""
    out = []
    for m in [tg] + ([torch] if torch is not None else []):
        x = m.tensor(VALUES["distinct"], dtype=m.float64, requires_grad=True)
        w = m.tensor(VALUES["ties at the max and min"], dtype=m.float64, requires_grad=True)
        out.append(m.autograd.grad(_lse(m, x) + m.max(w * 2.0), x)[0].numpy())
    assert flat_taken == {True: 0, False: 1}
    if torch is not None:
        np.testing.assert_allclose(out[0], out[1], rtol=1e-12)


def test_a_hook_on_a_reductions_node_takes_the_general_walk(flat_taken):
    x = tg.tensor(VALUES["distinct"], dtype=tg.float64, requires_grad=True)
    mx = tg.max(x)
    seen = []
    mx.grad_fn.register_hook(lambda grads_in, grads_out: seen.append(grads_out[0].item()))
    (mx * 3.0 + x.sum()).backward()
    assert flat_taken == {True: 0, False: 1} and seen == [3.0]
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 1.0, 4.0, 1.0, 1.0])


@pytest.mark.parametrize("how", HOW)
def test_an_input_changed_in_place_after_max_saved_it_raises(how):
    for m in [tg] + ([torch] if torch is not None else []):
        x = m.tensor(VALUES["distinct"], dtype=m.float64, requires_grad=True)
        y = m.max(x).exp()
        with m.no_grad():
            x.mul_(2.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (m.autograd.grad(y, x) if how == "grad" else
             y.backward(inputs=[x] if how == "backward(inputs=)" else None))


SEEDED = {
    "elementwise": lambda m, x: (x * x).sin() * 2.0,
    "array ops": lambda m, x: m.cat([x[1:] * x[:-1], x.max(0, keepdim=True)[0]]),
    "a number": lambda m, x: (x.exp() * x[2]).sum(),
}


def _seeded(m, program, how, seed):
    x = m.tensor(VALUES["distinct"], dtype=m.float64, requires_grad=True)
    y = program(m, x)
    g = m.tensor(seed(y.shape), dtype=m.float64)
    if how == "grad":
        return m.autograd.grad(y, x, grad_outputs=g)[0]
    if how == "Jacobian rows":   # (retain_graph between the rows: the same tape again)
        rows = []
        for k in range(y.numel()):
            e = m.zeros(y.numel(), dtype=m.float64)
            e[k] = 1.0
            rows.append(m.autograd.grad(y, x, grad_outputs=e.reshape(y.shape),
                                        retain_graph=True)[0])
        return m.stack(rows)
    y.backward(g, inputs=[x] if how == "backward(inputs=)" else None)
    return x.grad


@pytest.mark.parametrize("how", ["backward", "grad", "backward(inputs=)", "Jacobian rows"])
@pytest.mark.parametrize("name", SEEDED)
def test_a_given_output_gradient_seeds_the_walk(name, how, flat_taken, monkeypatch, entries):
    """``backward(gradient)``, ``grad_outputs=``: an array seed (or a number's), set as the
    general walk sets it."""
    def seed(shape):
        return np.linspace(-1.5, 2.0, int(np.prod(shape))).reshape(shape)
    program = SEEDED[name]
    got = _seeded(tg, program, how, seed).numpy()
    assert flat_taken[True] >= 1 and flat_taken[False] == 0
    monkeypatch.setattr(engine, "FLAT_WALK", False)
    np.testing.assert_array_equal(got, _seeded(tg, program, how, seed).numpy())
    if torch is not None:
        np.testing.assert_allclose(got, _seeded(torch, program, how, seed).numpy(),
                                   rtol=1e-12, atol=1e-15)


def test_a_seed_of_the_wrong_shape_and_a_missing_one_raise_as_pytorch():
    for m in [tg] + ([torch] if torch is not None else []):
        x = m.tensor(VALUES["distinct"], dtype=m.float64, requires_grad=True)
        y = x * 2.0
        with pytest.raises(RuntimeError, match=r"Mismatch in shape: grad_output\[0\] has a "
                                               r"shape of \w+.Size\(\[2\]\) and output\[0\] "
                                               r"has a shape of \w+.Size\(\[5\]\)"):
            m.autograd.grad(y, x, grad_outputs=m.ones(2, dtype=m.float64))
        with pytest.raises(RuntimeError, match="grad can be implicitly created only for "
                                               "scalar outputs"):
            y.backward()


def test_a_tape_holding_recorded_gradients_takes_the_general_walk(flat_taken):
    """A second-order walk from a gradient a create_graph walk recorded (k-means' Hessian
    diagonal): it reaches little of the tape, which the general walk's reach pass bounds."""
    out = []
    for m in [tg] + ([torch] if torch is not None else []):
        x = m.tensor(VALUES["distinct"], dtype=m.float64, requires_grad=True)
        (g,) = m.autograd.grad((m.min(x) * x.exp()).sum() + (x ** 3).sum(), x,
                               create_graph=True)
        out.append(m.autograd.grad(g, x, grad_outputs=m.ones_like(x))[0].numpy())
    assert flat_taken == {True: 0, False: 1}
    if torch is not None:
        np.testing.assert_allclose(out[0], out[1], rtol=1e-12)


def _with_dead_graphs(m, dead, kind):
    """The gradient of a small graph recorded after ``dead`` graphs that nothing reaches
    (evaluations without backward, still on the default tape), each one Python op of a
    number: "selects" (an element and its exp), "float32" (an element as float32: a result
    the walk cannot take), "custom Function" (one the walk leaves to the general one)."""
    x = m.tensor(VALUES["distinct"], dtype=m.float64, requires_grad=True)
    keep = []
    for k in range(dead):
        part = x[k % 5]
        if kind == "selects":
            keep.append(part.exp())
        elif kind == "float32":
            keep.append(part.float() * 2.0)
        else:
            keep.append(_twice(m).apply(part))
    (g,) = m.autograd.grad((x[1:3] * x[2:4]).sum() + m.max(x), x)
    return g.numpy()


def _twice(m):
    """A custom Function of library ``m`` (its ``Function``): ``2 x``, its own backward."""
    class Twice(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

        @staticmethod
        def backward(ctx, g):
            return g * 2.0
    return Twice


@pytest.mark.parametrize("kind", ["selects", "float32", "custom Function"])
@pytest.mark.parametrize("dead", [1, 5, 40])
def test_python_ops_the_walk_does_not_reach_are_passed_over(dead, kind, flat_taken,
                                                            monkeypatch):
    """A stop is looked at only once the sweep reached it: one the walk could not take is
    no reason to turn the walk away where nothing reaches it; past ``_FLAT_UNREACHED`` stops
    passed over (the float32 cast or the Function of each dead graph: its select, a basic
    index, the sweep runs itself, ``_gathers``) the general walk, whose reach pass skips
    them, takes the walk."""
    got = _with_dead_graphs(tg, dead, kind)
    taken = kind == "selects" or dead <= engine._FLAT_UNREACHED
    assert flat_taken == {True: int(taken), False: int(not taken)}
    monkeypatch.setattr(engine, "FLAT_WALK", False)
    np.testing.assert_array_equal(got, _with_dead_graphs(tg, dead, kind))
    if torch is not None:
        np.testing.assert_allclose(got, _with_dead_graphs(torch, dead, kind), rtol=1e-12)


def test_a_reached_python_op_the_walk_cannot_take_hands_the_walk_over(flat_taken):
    """Found during the walk (a custom Function below array ops it already ran): the general
    walk runs from the start, with nothing of the first attempt left behind."""
    out = []
    for m in [tg] + ([torch] if torch is not None else []):
        x = m.tensor(VALUES["distinct"], dtype=m.float64, requires_grad=True)
        y = _twice(m).apply(x)[1:4].sum(0) * x[0]
        y.backward()
        out.append(x.grad.numpy())
    assert flat_taken == {True: 0, False: 1}
    # d/dx0 = 2 (x1 + x2 + x3), d/dx1..3 = 2 x0
    np.testing.assert_allclose(out[0], [4.0, 0.6, 0.6, 0.6, 0.0], rtol=1e-14)
    if torch is not None:
        np.testing.assert_allclose(out[0], out[1], rtol=1e-12)


@pytest.mark.parametrize("n", [engine._LANES_FROM - 1, engine._LANES_FROM, 20000])
def test_a_number_broadcast_over_a_large_entry_sums_its_terms_in_lanes(n, monkeypatch):
    """``s`` (a number entry) times an array of ``n`` elements: s's gradient is the sum of
    its terms ``x[k]`` -- one by one from +0. below ``_LANES_FROM`` elements (the flat
    layout's order), in eight lanes from there (``_sum_lanes``), the same in both walks and
    within rounding of the exact sum and of PyTorch's."""
    xs = np.random.default_rng(7).standard_normal(n) * 1e3
    grads = []
    for flat in (True, False):
        monkeypatch.setattr(engine, "FLAT_WALK", flat)
        w = tg.tensor(0.75, dtype=tg.float64, requires_grad=True)
        x = tg.tensor(xs, dtype=tg.float64)
        s = w * 2.0
        (g,) = tg.autograd.grad((x * s).sum(), w)
        grads.append(g.item())
    assert grads[0] == grads[1]
    terms = xs.copy()   # (d(x s)/ds = x, times the sum's gradient 1.0)
    want = engine._sum_lanes(terms) if n >= engine._LANES_FROM else \
        engine._sum_in_order(terms)
    assert grads[0] == want * 2.0
    assert abs(grads[0] - 2.0 * math.fsum(xs)) <= 1e-9 * np.abs(xs).sum()
    if torch is not None:
        w = torch.tensor(0.75, dtype=torch.float64, requires_grad=True)
        (g,) = torch.autograd.grad((torch.tensor(xs) * (w * 2.0)).sum(), w)
        assert abs(g.item() - grads[0]) <= 1e-12 * np.abs(xs).sum()


def _general_walk_indices(m, case):
    x = m.tensor(VALUES["distinct"] + [1.7], dtype=m.float64, requires_grad=True)
    w = m.tensor([0.5, -2.0], dtype=m.float64, requires_grad=True)
    u = x * 1.5   # (the walk's layout holds what elementwise entries read and write)
    part = u[1:3]
    seen = []
    if case == "hook on a slice's result":
        part.register_hook(lambda g: g * 3.0)
    elif case == "node hook on a slice":
        part.grad_fn.register_hook(lambda grads_in, grads_out: seen.append(1))
    y = (part * w).sin().sum() + (u[None, 2:5][0] * x[4]).prod() + u[::2].max()
    if case == "inputs= prunes":   # (v's branch is pruned)
        v = m.tensor([0.25, 4.0], dtype=m.float64, requires_grad=True)
        return [g.numpy() for g in m.autograd.grad(y + ((v * 1.0)[1:] * 2.0).sum(), (x, w))]
    y.backward()
    assert case != "node hook on a slice" or seen == [1]
    return [x.grad.numpy(), w.grad.numpy()]


@pytest.mark.parametrize("case", ["plain", "hook on a slice's result", "node hook on a slice",
                                  "inputs= prunes"])
def test_the_general_walk_runs_basic_indices_in_the_sweep(case, monkeypatch):
    """The general walk (a hook, a node hook, an input that is not every leaf: the one-call
    walk turns these away) hands basic indices to the sweep too, except where something is
    attached to the node or the walk prunes it: the gradients of the walk that runs every
    index in Python (``_gathers`` taking none) bit for bit, and PyTorch's."""
    real = engine._gathers
    taken = []

    def counted(*args, **kw):
        gather, left = real(*args, **kw)
        taken.append(len(args[1]) - len(left))
        return gather, left
    monkeypatch.setattr(engine, "FLAT_WALK", False)
    monkeypatch.setattr(engine, "_gathers", counted)
    got = _general_walk_indices(tg, case)
    # (u[1:3] and x[4]: both ends in the layout; u[1:3] not where its node has a hook)
    assert sum(taken) == (1 if case == "node hook on a slice" else 2)
    monkeypatch.setattr(engine, "_gathers", lambda T, heads, *args, **kw: (engine._EMPTY_I,
                                                                           heads))
    for a, b in zip(got, _general_walk_indices(tg, case)):
        np.testing.assert_array_equal(a, b)
        assert np.array_equal(np.signbit(a), np.signbit(b))
    if torch is not None:
        for a, b in zip(got, _general_walk_indices(torch, case)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


# broadcasts and sums over dims the sweep runs itself (``spread_run``), and ones it leaves
# to Python: a run ending at the last axis (NumPy sums it pairwise), a broadcast summed
# twice (leading dims, then dims of size 1); -0. gradients through them
SPREAD_PROGRAMS = {
    "a broadcast over a middle dim": lambda m, x: (x.reshape(2, 3, -1)
                                                   * x.reshape(2, 3, -1).sum(1, keepdim=True)
                                                   ).sin().sum(),
    "leading dims": lambda m, x: (x.reshape(3, -1).sum(0) * x.reshape(3, -1)).sin().sum()
    + (x.reshape(-1, 2)[None] * x.reshape(-1, 2)).sin().mean(),
    "the last axis, and summed twice": lambda m, x: (
        x.reshape(-1, 2).sum(1, keepdim=True) * x.reshape(-1, 2)).sum()
        + (x.reshape(-1, 1)[:2] * x.reshape(1, -1)).sin().sum()
        + (x.reshape(1, -1)[:, 1:3] * (m.cat([x, x])[:12] * 2.0).reshape(3, 2, 2)).sin().sum(),
    "means over dims": lambda m, x: (x.reshape(3, -1).mean(0) * x.reshape(3, -1)).sin().sum()
    + (x.reshape(2, 3, -1).mean((0, 1), keepdim=True) * x.reshape(2, 3, -1)).cos().mean()
    + x.reshape(-1, 2).mean(1).sin().sum(),
    # cat and stack along dim 0 (the sweep: each input its block), along dim 1 (Python);
    # an input twice, a part without grad
    "cat and stack": lambda m, x: (m.cat([x * 2.0, x.sin(), x * 2.0]) * m.cat([x, x, x])).sum()
    + (m.stack([x.cos(), x * x]) * 3.0).sin().sum()
    + (m.cat([x.reshape(2, -1), x.reshape(2, -1) * 0.5]) ** 2).sum()
    + (m.cat([x.reshape(2, -1), x.reshape(2, -1).exp()], 1) ** 2).sum()
    + (m.cat([x, m.ones_like(x)]) * m.cat([x, x])).sum(),
    "-0. gradients": lambda m, x: (x.reshape(2, -1).sum(0, keepdim=True)
                                   * x.reshape(2, -1)).sum() * -0.0
        + (x.reshape(3, -1).sum(0) * -0.0 * x.reshape(3, -1)).sum(),
}


def _spread_gradient(m, program, values, how, flat, spreads, monkeypatch):
    monkeypatch.setattr(engine, "FLAT_WALK", flat)
    if not spreads:
        monkeypatch.setattr(engine, "_spread_map", lambda *args: None)
        monkeypatch.setattr(engine, "_cat_blocks", lambda *args: None)
    try:
        return _gradient(m, program, values, how).numpy()
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("size", [6, 600])
@pytest.mark.parametrize("name", SPREAD_PROGRAMS)
def test_broadcasts_and_sums_over_dims_run_in_the_sweep_with_pythons_bits(name, size, how,
                                                                         monkeypatch):
    """Both walks hand broadcasts, sums over a run of dims and cats along dim 0 to the
    sweep: the gradients of the walks that run them in Python, bit for bit (a broadcast's
    terms summed in order from 0.0, as ``sum_to``'s kernels and NumPy do; 600 elements: the
    kernels, 6: NumPy), and PyTorch's."""
    program = SPREAD_PROGRAMS[name]
    rng = np.random.default_rng(size)   # (magnitudes far apart: the order of a sum shows)
    values = list(rng.standard_normal(size) * 10.0 ** rng.integers(-6, 6, size))
    taken = []

    def counted(real):
        def run(*args):
            found = real(*args)
            taken.append(found is not None)
            return found
        return run
    monkeypatch.setattr(engine, "_spread_map", counted(engine._spread_map))
    monkeypatch.setattr(engine, "_cat_blocks", counted(engine._cat_blocks))
    got = _spread_gradient(tg, program, values, how, True, True, monkeypatch)
    assert any(taken)
    for flat, spreads in [(True, False), (False, True), (False, False)]:
        other = _spread_gradient(tg, program, values, how, flat, spreads, monkeypatch)
        np.testing.assert_array_equal(got, other)
        assert np.array_equal(np.signbit(got), np.signbit(other))
    if torch is not None:
        want = _gradient(torch, program, values, how).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
        assert np.array_equal(np.signbit(got), np.signbit(want)) or name != "-0. gradients"


@pytest.mark.parametrize("kind, x_shape, out_shape, run", [
    ((2,), (1, 5, 2), (100, 5, 2), (-1, 1, 100, 10)),     # a dim of size 1 broadcast
    ((2,), (5, 2), (100, 5, 2), (-1, 1, 100, 10)),        # leading dims
    ((2,), (3, 1, 1, 4), (3, 5, 6, 4), (-1, 3, 30, 4)),   # a run of two dims
    ((2,), (5, 1), (5, 7), None),                         # the last axis: pairwise
    ((2,), (1, 4), (3, 2, 4), None),                      # leading dims and a dim of size 1
    ((2,), (1, 5, 1, 2), (3, 5, 4, 2), None),             # dims apart
    ((3, 1, False, False), (4, 5, 6), (4, 6), (-2, 4, 5, 6)),
    ((3, (2, 1), True, False), (4, 5, 6), (4, 1, 1), (-2, 4, 30, 1)),
    ((3, (0, 2), False, False), (4, 5, 6), (5,), None),   # dims apart
    ((3, 1, False, True), (4, 5, 6), (4, 6), (-3, 4, 5, 6)),   # a mean
    ((3, (0, 1), True, True), (3, 7, 2), (1, 1, 2), (-3, 1, 21, 2)),
    ((3, None, False, False), (4, 5), (), None),          # a full sum
])
def test_spread_run(kind, x_shape, out_shape, run):
    from tapegrad.ops.array_ops import DIRECT_EXPAND, DIRECT_SPREAD, spread_run
    kind = ((DIRECT_EXPAND,) if kind == (2,) else (DIRECT_SPREAD,) + kind[1:])
    assert spread_run(kind, x_shape, out_shape) == run
