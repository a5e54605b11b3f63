"""Views share memory with their base, as in PyTorch (compared with torch 2.13; skipped
without it).

- aliasing: a change through a view shows in its base and the other way round, for every
  view op (indexing, ``view``/``reshape``, ``t``/``transpose``/``permute``, ``squeeze``/
  ``unsqueeze``, ``expand``, ``narrow``, ``select``, ``diagonal``, ``split``...);
- autograd through in-place ops on views of non-leaves (PyTorch's rebase: the base's
  history becomes ``CopySlices``, the views' ``AsStridedBackward0``): values, gradients,
  ``grad_fn`` names, and float64 finite differences;
- one version counter per memory: PyTorch's "modified by an inplace operation" errors;
- a view of a leaf that requires grad refuses in-place ops in grad mode, works under
  ``no_grad``; ``view`` of a non-contiguous tensor raises PyTorch's error.
"""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

LIBS = (tg, torch)


@pytest.fixture(autouse=True)
def _torch_float64():
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(torch.float32)


def _base(lib):
    return lib.tensor(np.arange(12.0).reshape(3, 4) - 4.5)


# view name -> function of the base (3, 4)
VIEWS = {
    "x[0]": lambda x: x[0],
    "x[:, 1]": lambda x: x[:, 1],
    "x[1:, ::2]": lambda x: x[1:, ::2],
    "x[None]": lambda x: x[None],
    "x[...]": lambda x: x[...],
    "x[1][2:]": lambda x: x[1][2:],
    "x.t()": lambda x: x.t(),
    "x.T": lambda x: x.T,
    "x.mT": lambda x: x.mT,
    "x.transpose(0, 1)": lambda x: x.transpose(0, 1),
    "x.permute(1, 0)": lambda x: x.permute(1, 0),
    "x.view(-1)": lambda x: x.view(-1),
    "x.view(2, 6)[1]": lambda x: x.view(2, 6)[1],
    "x.reshape(6, 2)": lambda x: x.reshape(6, 2),
    "x.flatten()": lambda x: x.flatten(),
    "x.unsqueeze(1)": lambda x: x.unsqueeze(1),
    "x[:, :1].squeeze()": lambda x: x[:, :1].squeeze(),
    "x.narrow(1, 1, 2)": lambda x: x.narrow(1, 1, 2),
    "x.select(1, 3)": lambda x: x.select(1, 3),
    "x.diagonal()": lambda x: x.diagonal(),
    "x.diagonal(1)": lambda x: x.diagonal(1),
    "x.split(3, 1)[1]": lambda x: x.split(3, 1)[1],
    "x.chunk(3)[2]": lambda x: x.chunk(3)[2],
    "x.unbind(1)[2]": lambda x: x.unbind(1)[2],
    "x.t().reshape(2, 2, 3)": lambda x: x.t().reshape(2, 2, 3),
    "x.view_as(y)": lambda x: x.view_as(x.new_zeros(2, 6)),
}


@pytest.mark.parametrize("name", VIEWS)
def test_a_change_through_the_view_shows_in_the_base(name):
    out = []
    for lib in LIBS:
        x = _base(lib)
        v = VIEWS[name](x)
        v.mul_(2).add_(1)
        out.append((x.tolist(), v.tolist(), v._base is x))
    assert out[0] == out[1]


@pytest.mark.parametrize("name", VIEWS)
def test_a_change_of_the_base_shows_in_the_view(name):
    out = []
    for lib in LIBS:
        x = _base(lib)
        v = VIEWS[name](x)
        x.sub_(3)
        x[0, 0] = 100.0
        out.append((v.tolist(), x._version, v._version))
    assert out[0] == out[1]


def test_element_views_read_and_write_their_base():
    out = []
    for lib in LIBS:
        x = _base(lib)
        e, row = x[1][2], x[2]
        x.add_(1)                  # an element read before sees the change
        first = e.item()
        e.add_(10)                 # and writes through
        row[0] = -1.0
        idx = lib.tensor([3, 1, 2])
        k = idx[0]
        idx.mul_(2)
        out.append((first, e.item(), x.tolist(), int(k), [float(v) for v in x[0]]))
    assert out[0] == out[1]


def test_reshape_of_a_non_contiguous_tensor_copies_and_view_raises():
    for lib in LIBS:
        x = _base(lib)
        r = x.t().reshape(12)      # a copy: not a view
        r.zero_()
        assert x.abs().sum().item() > 0 and r._base is None
        assert x.t().contiguous().view(12).tolist() == x.t().reshape(12).tolist()
    with pytest.raises(RuntimeError) as theirs:
        _base(torch).t().view(12)
    with pytest.raises(RuntimeError) as mine:
        _base(tg).t().view(12)
    assert str(mine.value) == str(theirs.value)


def test_strides_and_contiguity_as_pytorch():
    makers = [lambda x: x, lambda x: x.t(), lambda x: x[:, 1], lambda x: x[1:, ::2],
              lambda x: x.unsqueeze(0), lambda x: x.expand(2, 3, 4), lambda x: x.diagonal(),
              lambda x: x.t().contiguous(), lambda x: x[0, 1]]
    for make in makers:
        mine, theirs = make(_base(tg)), make(_base(torch))
        assert mine.stride() == theirs.stride()
        assert mine.is_contiguous() == theirs.is_contiguous()
        assert mine.storage_offset() == theirs.storage_offset()


@pytest.mark.parametrize("make", [lambda x, i: x[:, i], lambda x, i: x[i], lambda x, i: x[:, :, i],
                                  lambda x, i: x[:, i, 1], lambda x, i: x[i, :, i],
                                  lambda x, i: x[1:, :, ::2][:, i], lambda x, i: x[x > 0.5]],
                         ids=["middle", "first", "last", "after a select", "two", "of a slice",
                              "mask"])
def test_an_advanced_index_of_a_row_major_tensor_is_contiguous(make):
    # NumPy puts x[:, i]'s indexed dims first in memory; PyTorch's result is contiguous, so
    # its strides, view() and the layout of ops after it follow (GMM's icf[:, index])
    got = []
    for lib in LIBS:
        x = lib.tensor(np.arange(60.0).reshape(5, 3, 4) / 60.0)
        r = make(x, lib.tensor([[0, 0], [2, 1]]))
        got.append((r.stride(), r.is_contiguous(), r.view(-1).tolist()))
    assert got[0] == got[1]


@pytest.mark.xfail(strict=True, reason="README deviation: a size-1 dim's stride is NumPy's "
                   "(fuzzer seed 29); fixed, this passes and the README line goes")
@pytest.mark.parametrize("make", [lambda x: x[:, :1].unsqueeze(1), lambda x: x[:, 0].unsqueeze(1),
                                  lambda x: x[:, :1].reshape(4, 1, 1)], ids=["unsqueeze",
                                                                              "column", "reshape"])
def test_the_stride_of_a_new_dim_of_size_one(make):
    x = [lib.zeros(4, 2) for lib in LIBS]
    assert make(x[0]).stride() == make(x[1]).stride()


def _view_after_unrecorded_change(lib, kind):
    w = lib.tensor([1.0, 3.0], requires_grad=True)
    if kind == "no_grad":
        v = w[0]
        with lib.no_grad():
            w.mul_(2)
    else:   # through a detached alias of a non-leaf base
        y = w * 3
        v = y[1:]
        y.detach().add_(1)
    (v * v).sum().backward()
    return type(v.grad_fn).__name__.removeprefix("tapegrad."), v.tolist(), w.grad.tolist()


@pytest.mark.parametrize("kind", ["no_grad", "detached"])
def test_a_view_after_an_unrecorded_in_place_change_of_its_base(kind):
    # PyTorch regenerates the view's grad_fn as AsStridedBackward0 of the base's node once
    # the base's version moved on (fuzzer seed 39)
    ours = _view_after_unrecorded_change(tg, kind)
    assert ours == ("AsStridedBackward0", _VIEW_AFTER[kind][0], _VIEW_AFTER[kind][1])
    assert _view_after_unrecorded_change(torch, kind) == ours


_VIEW_AFTER = {"no_grad": (2.0, [4.0, 0.0]), "detached": ([10.0], [0.0, 60.0])}


def test_in_place_on_an_expanded_view_raises_as_pytorch():
    msgs = []
    for lib in LIBS:
        e = lib.ones(3).expand(2, 3)
        with pytest.raises(RuntimeError) as err:
            e.add_(1)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


# -- autograd through in-place ops on views of non-leaves ----------------------------------

def _rows_written(lib, a, b):
    y = a * 2
    y[0].mul_(3)
    return y, y[0]


def _transposed(lib, a, b):
    y = a * 2.0
    v = y.t()
    v.add_(b.unsqueeze(1))
    return y, v


def _column_zeroed(lib, a, b):
    y = a.sin()
    y[:, 1].zero_()
    return y, y[:, 2]


def _flat_assigned(lib, a, b):
    y = a * 1.0
    y.view(-1)[2] = b[0] * b[1]
    return y, y.view(-1)


def _view_of_view(lib, a, b):
    y = a * a
    u = y[1:3]
    u[:, 0].add_(b[:2])
    return y, u


def _other_views_follow(lib, a, b):
    y = a * 1.0
    v1, v2 = y[0], y[:, 0]
    v1.mul_(b[0])
    return y, v2 * v2          # v2 shares y[0, 0]: its history follows the change


def _base_changed_under_a_view(lib, a, b):
    y = a + 1.0
    v = y[1]
    y.mul_(b[1])
    return y, v


def _diagonal_added(lib, a, b):
    y = a * 1.0
    y.diagonal().add_(b[:3])
    return y, y.diagonal()


def _zeros_filled_row_by_row(lib, a, b):
    out = lib.zeros(3, 4)
    for i in range(3):
        out[i] = a[i] * b[i]
    out[:, 0].mul_(2.0)
    return out, out[1]


def _elements_through_a_loop(lib, a, b):
    y = a * 1.0
    for i in range(3):   # (PyTorch refuses in-place on the rows of ``for row in y``: unbind)
        row = y[i]
        row[1] = row[0] + 2.0 * row[2]
    return y, y[:, 1]


PROGRAMS = [_rows_written, _transposed, _column_zeroed, _flat_assigned, _view_of_view,
            _other_views_follow, _base_changed_under_a_view, _diagonal_added,
            _zeros_filled_row_by_row, _elements_through_a_loop]


def _run(lib, program, seed=0):
    rng = np.random.default_rng(seed)
    a = lib.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = lib.tensor(rng.standard_normal(4), requires_grad=True)
    base, view = program(lib, a, b)
    names = (type(base.grad_fn).__name__, base.grad_fn.name(), type(view.grad_fn).__name__)
    loss = (base * base).sum() + (view * lib.tensor(np.linspace(1, 2, view.numel())).reshape(
        view.shape)).sum()
    loss.backward()
    grads = [None if t.grad is None else t.grad.tolist() for t in (a, b)]
    return base.tolist(), view.tolist(), grads[0], grads[1], names


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_gradient_through_in_place_on_a_view_matches_pytorch(program):
    mine, theirs = _run(tg, program), _run(torch, program)
    for m, t in zip(mine[:4], theirs[:4]):
        assert (m is None) == (t is None)
        if m is not None:
            np.testing.assert_allclose(np.asarray(m), np.asarray(t), rtol=1e-12, atol=1e-12)
    assert mine[4] == theirs[4]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__ for p in PROGRAMS])
def test_gradient_through_in_place_on_a_view_matches_finite_differences(program):
    def f(a, b):
        base, view = program(tg, a, b)
        return (base * base).sum() + view.sum()

    rng = np.random.default_rng(1)
    a = tg.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = tg.tensor(rng.standard_normal(4), requires_grad=True)
    assert tg.autograd.gradcheck(f, (a, b))


def test_grad_fn_names_after_rebase_as_pytorch():
    names = []
    for lib in LIBS:
        a = lib.ones(3, 4, requires_grad=True)
        y = a * 2
        v = y[0]
        first = v.grad_fn.name()
        v.mul_(3)
        w = y[1]
        y.t().add_(1)
        names.append((first, v.grad_fn.name(), y.grad_fn.name(), w.grad_fn.name(),
                      repr(y).split("grad_fn=")[1], y.view(-1).grad_fn.name(),
                      v._version, y._version))
    assert names[0] == names[1]


# -- version counters and saved values ---------------------------------------------------

def _saved_then_changed_through_a_view(lib):
    a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = a * 1.0
    z = y.sin()               # sin saves y
    y[0].mul_(2)
    return z.sum()


def _matmul_saved_then_changed(lib):
    w = lib.ones(2, 2, requires_grad=True)
    z = w @ w                 # matmul (a Python backward) saves the leaf
    with lib.no_grad():
        w.t()[1].add_(1)
    return z.sum()


def _view_saved_then_base_changed(lib):
    a = lib.ones(2, 3, requires_grad=True)
    y = a * 1.0
    v = y[1]
    z = v * v                 # saves the view
    y.add_(1)
    return z.sum()


def _leaf_saved_then_changed_under_no_grad(lib):
    w = lib.ones(3, requires_grad=True)
    z = (w * w).sum()
    with lib.no_grad():
        w[0] = 5.0
    return z


@pytest.mark.parametrize("program", [_saved_then_changed_through_a_view,
                                     _matmul_saved_then_changed, _view_saved_then_base_changed,
                                     _leaf_saved_then_changed_under_no_grad])
def test_a_saved_value_changed_through_a_view_raises_as_pytorch(program):
    for lib in LIBS:
        loss = program(lib)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            loss.backward()


def test_a_python_backward_computes_with_the_value_it_saved():
    # PyTorch raises (matmul saved y); tapegrad's tape kept a copy of y: the gradient is the
    # one of the values multiplied, never one computed from the changed memory
    a = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = a * 1.0
    z = y @ y
    y.t()[1].add_(1.0)
    z.sum().backward()
    ref = tg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    (ref @ ref).sum().backward()
    assert a.grad.tolist() == ref.grad.tolist()


def test_a_change_that_no_saved_value_needs_keeps_the_gradient():
    grads = []
    for lib in LIBS:
        a = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = a * 2
        z = y + 1             # add saves nothing
        y[1] = 7.0
        (z * 3).sum().backward()
        grads.append(a.grad.tolist())
    assert grads[0] == grads[1]


def test_versions_are_shared_as_pytorch():
    out = []
    for lib in LIBS:
        x = _base(lib)
        v, w = x[0], x.t()
        v.add_(1)
        w.mul_(2)
        x[2] = 0.0
        out.append((x._version, v._version, w._version, x[1]._version))
    assert out[0] == out[1]


# -- leaves ------------------------------------------------------------------------------

LEAF_CASES = {
    "w[0].add_(1)": lambda w: w[0].add_(1),
    "w.t().mul_(2)": lambda w: w.t().mul_(2),
    "w.view(-1)[0] = 1": lambda w: w.view(-1).__setitem__(0, 1.0),
    "w[:, 1] = 0": lambda w: w.__setitem__((slice(None), 1), 0.0),
    "w.diagonal().zero_()": lambda w: w.diagonal().zero_(),
}


@pytest.mark.parametrize("name", LEAF_CASES)
def test_in_place_on_a_view_of_a_leaf_raises_as_pytorch(name):
    msgs = []
    for lib in LIBS:
        w = lib.ones(2, 3, requires_grad=True)
        with pytest.raises(RuntimeError) as err:
            LEAF_CASES[name](w)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


def test_in_place_on_views_of_a_leaf_under_no_grad_changes_the_leaf():
    out = []
    for lib in LIBS:
        w = lib.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
        with lib.no_grad():
            for name in LEAF_CASES:
                LEAF_CASES[name](w)
            row = w[1]
            w.mul_(3)
        w.data[0, 2] = 9.0
        (w * w).sum().backward()
        out.append((w.tolist(), row.tolist(), w.is_leaf, w.requires_grad, w.grad.tolist(),
                    w._version))
    assert out[0][:5] == out[1][:5]


def _view_made_under_no_grad_changed(lib):
    y = lib.ones(3, requires_grad=True) * 2
    with lib.no_grad():
        v = y[0]
    v.mul_(3)


def test_a_view_made_under_no_grad_refuses_a_tracked_in_place_as_pytorch():
    msgs = []
    for lib in LIBS:
        with pytest.raises(RuntimeError) as err:
            _view_made_under_no_grad_changed(lib)
        msgs.append(str(err.value))
    assert msgs[0] == msgs[1]


def test_a_view_made_under_no_grad_sees_its_base_change():
    out = []
    for lib in LIBS:
        y = lib.ones(2, 3, requires_grad=True) * 2
        with lib.no_grad():
            v, e = y.t(), y[1, 2]
        y.mul_(3)
        with lib.no_grad():
            out.append(((v * 1).tolist(), (e * 1).item()))
    assert out[0] == out[1]


def test_views_keep_their_base_alive_and_report_it():
    for lib in LIBS:
        x = _base(lib)
        v = x[1][2:]
        assert v._base is x and x._base is None and x.t().t()._base is x
        del x
        assert v._base is not None and v._base.shape == (3, 4)


# -- compiled replay --------------------------------------------------------------------

def _views_in_place(x):
    y = x.reshape(2, 3) * 2.0
    y[0].mul_(x[1])
    y.t()[1].add_(1.0)
    y.diagonal().mul_(3.0)
    v = y[1]
    y.mul_(0.5)               # v sees it
    return (y * y).sum() + (v * x[3:]).sum()


def _built_row_by_row(x):
    y = x * 1.0
    for i in range(5):
        y[i + 1] = y[i].clone() * x[i + 1]   # (PyTorch: the view itself is saved by mul)
    return y.sum()


@pytest.mark.parametrize("fn", [_views_in_place, _built_row_by_row])
def test_compiled_replay_of_in_place_through_views_matches_eager(fn):
    x0 = np.arange(6.0) + 0.5
    compiled = tg.compile(fn)
    compiled(x0)                                    # records
    for x in (x0 + 1.0, x0 * -0.5):
        value, grad = compiled.value_and_grad(x)    # replays
        xt = tg.tensor(x, requires_grad=True)
        eager = fn(xt)
        eager.backward()
        xp = torch.tensor(x, requires_grad=True)
        theirs = fn(xp)
        theirs.backward()
        np.testing.assert_allclose(value, theirs.item(), rtol=1e-12)
        np.testing.assert_allclose(grad, xp.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(eager.item(), theirs.item(), rtol=1e-12)
        with tg.Tape() as tape:                     # and a recorded tape, compiled
            xt = tg.tensor(x, requires_grad=True)
            out = fn(xt)
        value, grad = tape.compile([xt], [out]).value_and_grad(x)
        np.testing.assert_allclose(grad, xp.grad.numpy(), rtol=1e-12)


def test_compiled_in_place_on_an_expanded_view_raises():
    def fn(x):
        e = x[:1].expand(3)
        e.add_(1.0)
        return e.sum()

    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        tg.compile(fn)(np.ones(3))


# Results PyTorch writes in its own layout whatever the input's (reductions, scans, softmax,
# copies) or in the input's (sort, flip): what a later flatten/view makes of them depends on it.
LAYOUT_OPS = {
    "sum(1)": lambda L, t: t.sum(1), "mean(1, keepdim)": lambda L, t: t.mean(1, keepdim=True),
    "amax(1)": lambda L, t: t.amax(1), "prod(1)": lambda L, t: t.prod(1),
    "std(1)": lambda L, t: t.std(1), "norm(dim=1)": lambda L, t: t.norm(dim=1),
    "logsumexp(1)": lambda L, t: L.logsumexp(t, 1), "cumsum(0)": lambda L, t: t.cumsum(0),
    "cumprod(0)": lambda L, t: t.cumprod(0), "softmax(1)": lambda L, t: t.softmax(1),
    "log_softmax(0)": lambda L, t: t.log_softmax(0), "roll": lambda L, t: t.roll(1, 0),
    "tril": lambda L, t: t.tril(), "masked_fill": lambda L, t: t.masked_fill(t > 0, 1.0),
    "cat": lambda L, t: L.cat([t, t], 0), "sort(1)": lambda L, t: t.sort(1)[0],
    "flip(0)": lambda L, t: t.flip(0), "exp": lambda L, t: t.exp(),
}


@pytest.mark.parametrize("name", LAYOUT_OPS)
def test_result_layout_as_pytorch(name):
    out = []
    for lib in LIBS:
        base = lib.tensor(np.arange(48.0).reshape(3, 4, 4) % 7 - 3, requires_grad=True)
        r = LAYOUT_OPS[name](lib, base.permute(2, 0, 1))
        f = r.flatten()
        out.append((r.is_contiguous(), tuple(r.stride()), f.grad_fn.name()))
        f.sum().backward()
        out.append(np.array(base.grad.tolist()))
    assert out[0] == out[2]
    np.testing.assert_allclose(out[1], out[3], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("name", ["flip(0)", "sort(1)", "cumsum(0)", "tril", "exp"])
@pytest.mark.parametrize("contiguous", [True, False])
def test_a_result_that_is_not_a_view_does_not_share_its_input_memory(name, contiguous):
    base = tg.tensor(np.arange(48.0).reshape(3, 4, 4) % 7 - 3)
    x = base if contiguous else base.permute(2, 0, 1)
    before = x.tolist()
    LAYOUT_OPS[name](tg, x).zero_()
    assert x.tolist() == before


MULTI_OUTPUT_CASES = {
    "split": lambda b: b.split(2)[0].add_(1),
    "chunk": lambda b: b.chunk(2)[1].mul_(1),
    "unbind": lambda b: b.unbind(0)[1].mul_(1),
    "view of a split part": lambda b: b.split(2)[0][0].add_(1),
    "split into one part": lambda b: b.split(4)[0].add_(1),
}


@pytest.mark.parametrize("name", MULTI_OUTPUT_CASES)
def test_in_place_on_a_view_of_a_multi_output_op_raises_as_pytorch(name):
    for lib in LIBS:
        b = lib.ones(4, 2, dtype=lib.float64, requires_grad=True) * 1
        with pytest.raises(RuntimeError, match="is the output of a function that returns "
                                               "multiple views"):
            MULTI_OUTPUT_CASES[name](b)
        with lib.no_grad():   # allowed without grad, and on a tensor without grad
            MULTI_OUTPUT_CASES[name](b)
        MULTI_OUTPUT_CASES[name](lib.ones(4, 2))
        parts = b.split(2)   # the base itself may change while the parts live
        b.div_(2.0)
        leaf = lib.ones(4, 2, dtype=lib.float64, requires_grad=True)
        with pytest.raises(RuntimeError, match="is the output of a function that returns "
                                               "multiple views"):   # (before: a leaf's view)
            MULTI_OUTPUT_CASES[name](leaf)


def test_a_view_of_a_leaf_still_reaches_it_after_a_write_through_a_detached_alias():
    out = []
    for lib in LIBS:
        leaf = lib.tensor([[[-0.743, -0.0, 0.531]]], dtype=lib.float64, requires_grad=True)
        view = leaf.unsqueeze(-3)
        view.detach().mul_(1.938)
        y = (view * view).sum()
        grads = lib.autograd.grad([y], [leaf, view], allow_unused=True)
        out.append((view.grad_fn.name(), [g.tolist() for g in grads]))
    assert out[0] == out[1]


def test_a_multi_output_view_refuses_its_grad_fn_after_its_base_changed():
    for lib in LIBS:
        base = lib.tanh(lib.ones(4, 2, dtype=lib.float64, requires_grad=True))
        first, second = base.split(2, 0)
        assert first.grad_fn.name() == "SplitBackward0"
        base.div_(2.0)
        with pytest.raises(RuntimeError, match="Output 1 of Split is a view and its base or "
                                               "another view of its base has been modified"):
            second.grad_fn
        with pytest.raises(RuntimeError, match="Output 1 of Split is a view"):
            second.is_leaf   # (PyTorch reads grad_fn here)
        with pytest.warns(UserWarning, match="not a leaf"):
            assert second.grad is None   # (but not here)
        assert second.requires_grad


def test_in_place_through_a_part_of_an_expanded_view_writes_the_base():
    out = []
    for lib in LIBS:
        a = lib.tensor([[[1.0], [0.608]]], dtype=lib.float64, requires_grad=True)
        b = lib.tensor([[[0.0], [1.612]]], dtype=lib.float64, requires_grad=True)
        base = lib.cat([a, b], dim=0)
        expanded = base.expand((2, 2, 2, 1))
        part = expanded[-2].add_(2.0)
        (part * part + expanded * 3).sum().backward()
        out.append((base.tolist(), a.grad.tolist(), b.grad.tolist(), part.grad_fn.name()))
        with pytest.raises(RuntimeError, match="more than one element of the written-to"):
            lib.zeros(3).expand(2, 3).add_(1)
    assert out[0] == out[1]


SECOND_BACKWARD_CASES = {
    "setitem of a 0-d view": lambda c: c[0].__setitem__((), -1.0),
    "fill_ of a view": lambda c: c[0].fill_(-1.0),
    "add_ of a view (saves nothing)": lambda c: c[1:].add_(1.0),
}


@pytest.mark.parametrize("name", SECOND_BACKWARD_CASES)
def test_a_second_backward_through_copy_slices_raises(name):
    # PyTorch's CopySlices holds the in-place op's node and releases it in a backward, so
    # a second backward raises even where that op saved nothing (fuzzer seed 1)
    for lib in LIBS:
        x = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        c = x.clone()
        SECOND_BACKWARD_CASES[name](c)
        y = (c * 1.0).sum()
        y.backward()
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()
        plain = x.clone().add_(1.0).sum()   # (no view: nothing saved, a second one runs)
        plain.backward()
        plain.backward()
        want = [3.0, 3.0, 3.0] if name.startswith("add_") else [2.0, 3.0, 3.0]
        assert x.grad.tolist() == want


def _empty_slice_after_a_change_of_its_base(lib):
    # an empty basic slice is a view too: after an in-place change of its base its grad_fn
    # is renewed, as any view's
    x = lib.tensor([[[0.5, 2.0]]], dtype=lib.float64, requires_grad=True)
    b = x * 2.0
    v = b[1:]
    b[0:1] = x.min()
    (b.sum() + v.sum()).backward()
    return [v._base is b, tuple(v.shape), type(v.grad_fn).__name__ if lib is torch
            else v.grad_fn.name(), x.grad.tolist()]


def test_an_empty_slice_is_a_view_as_pytorch():
    assert _empty_slice_after_a_change_of_its_base(tg) == \
        _empty_slice_after_a_change_of_its_base(torch) == \
        [True, (0, 1, 2), "AsStridedBackward0", [[[2.0, 0.0]]]]


def test_iterating_a_long_constant_gives_views_block_by_block():
    # the elements are made 256 at a time: each is a view of x (PyTorch's unbind), one
    # made before an in-place change of x reads the new value, as one made after it
    x = tg.tensor(np.arange(600.0))
    it = iter(x)
    first = next(it)
    x.add_(1.0)
    rest = list(it)
    assert len(rest) == 599
    assert first.item() == 1.0 and rest[0].item() == 2.0 and rest[-1].item() == 600.0
    assert all(v._base is x for v in (first, rest[254], rest[255], rest[-1]))
    rows = list(tg.tensor(np.arange(6.0).reshape(3, 2)))
    rows[1].mul_(10.0)
    assert rows[1]._base.tolist() == [[0.0, 1.0], [20.0, 30.0], [4.0, 5.0]]


INPLACE_THROUGH_A_ROW = {
    "mul_": lambda m, v: v.mul_(0.5), "zero_": lambda m, v: v.zero_(),
    "fill_": lambda m, v: v.fill_(2.0), "copy_": lambda m, v: v.copy_(m.tensor([3.0])),
    "mul_ by -0.": lambda m, v: v.mul_(m.tensor([-0.0])), "neg_": lambda m, v: v.neg_(),
}


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("op", list(INPLACE_THROUGH_A_ROW))
def test_the_sign_of_a_zero_gradient_through_copy_slices(op, create_graph):
    # PyTorch's CopySlices writes the in-place op's gradient into the base's gradient at
    # the view (fuzzer seed 68: a -0. gradient there became +0.)
    got = []
    for lib in LIBS:
        w = lib.tensor([[0.122], [2.0]], requires_grad=True)
        y = w * 1
        INPLACE_THROUGH_A_ROW[op](lib, y[0])
        loss = (y[0] * lib.tensor([-0.0])).sum() + (y[1] * lib.tensor([-0.0])).sum()
        g, = lib.autograd.grad([loss], [w], create_graph=create_graph)
        got.append((g.tolist(), np.signbit(g.detach().numpy()).tolist()))
    assert got[0] == got[1]


def _row_divided(L, v0, v1):
    v2 = v0 * v1
    v2[0].div_(2.0)
    return (v2.prod(0) * L.tensor([0.808, 1.0], dtype=L.float64)).sum()


def _row_used_then_divided(L, v0, v1):
    v2 = v0 * v1
    row = v2[0]
    before = row * 3.0   # this use keeps the row's own history (SelectBackward0)
    row.div_(2.0)
    return (v2.prod(0) * L.tensor([0.808, 1.0], dtype=L.float64)).sum() + before.sum() * 0.0


def _column_of_transpose_scaled(L, v0, v1):
    v2 = v0 * v1
    v2.t()[1].mul_(-1.5)
    return (v2.prod(1) * L.tensor([-0.0, 2.0], dtype=L.float64)).sum()


THROUGH_A_VIEW_ONLY = {"row divided": _row_divided, "row used, then divided": _row_used_then_divided,
                       "column of a transpose scaled": _column_of_transpose_scaled}


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name", THROUGH_A_VIEW_ONLY)
def test_an_inplace_ops_gradient_goes_into_its_view_only(name, create_graph):
    # fuzzer seed 115: the view's own backward (zeros outside it) ran after CopySlices, so a
    # -0. gradient of the base elsewhere became +0.; PyTorch never runs it for the op's input
    got = []
    for L in LIBS:
        v0 = L.tensor([[-0.0, 1.0], [2.0, -1.123]], dtype=L.float64)
        v1 = L.tensor([[1.613, 1.0], [1.0, 3.0]], dtype=L.float64, requires_grad=True)
        y = THROUGH_A_VIEW_ONLY[name](L, v0, v1)
        g, = L.autograd.grad([y], [v1], create_graph=create_graph)
        got.append((g.tolist(), np.signbit(g.detach().numpy()).tolist()))
    assert got[0] == got[1]


# An empty tensor is contiguous, with a contiguous tensor's strides (a dim of size 0 steps as
# one of size 1), so that its reshape is a view (ViewBackward0), as in PyTorch; NumPy gives
# a new empty array strides 0
EMPTY = {
    "zeros(3, 0)": lambda L: L.zeros(3, 0, requires_grad=True) * 1.0,
    "zeros(0, 3)": lambda L: L.zeros(0, 3, requires_grad=True) * 1.0,
    "zeros(2, 0, 4)": lambda L: L.zeros(2, 0, 4, requires_grad=True) * 1.0,
    "zeros(0)": lambda L: L.zeros(0, requires_grad=True) * 1.0,
    "ones(3, 4)[:, 4:]": lambda L: L.ones(3, 4, requires_grad=True)[:, 4:],
    "ones(3, 4)[3:]": lambda L: L.ones(3, 4, requires_grad=True)[3:],
}


@pytest.mark.parametrize("name", EMPTY)
def test_an_empty_tensor_is_contiguous_with_pytorchs_strides(name):
    got = []
    for L in (tg, torch):
        x = EMPTY[name](L)
        r = x.reshape(-1, 1)
        node = r.grad_fn.name() if L is tg else type(r.grad_fn).__name__
        got.append((tuple(x.stride()), x.is_contiguous(), tuple(r.shape), node))
    assert got[0] == got[1]
