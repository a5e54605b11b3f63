"""An operand broadcast by an elementwise op (``x * w`` with ``x`` of shape (3, 1)) and then
changed in place: PyTorch's version check raises when the op saved it, and not when the op
did not (torch 2.13; skipped without it).  The tape's ``broadcast`` entry views the operand's
memory, so a missed check would read the new value.  Each program runs under both libraries;
what it returns, or the error raised, must agree."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace"


@pytest.fixture(autouse=True)
def _torch_float64():
    torch.set_default_dtype(torch.float64)
    yield   # (conftest's fixture sets back what it found)


def _inputs(lib, rows=3):
    w = lib.tensor(np.arange(12.0).reshape(3, 4) / 7, requires_grad=True)
    col = lib.tensor(np.linspace(-1.0, 2.0, rows).reshape(rows, 1), requires_grad=True)
    return w, col


def _saved_operand_changed(lib):
    w, col = _inputs(lib)
    x = col * 2.0
    y = x * w
    x.add_(1)
    y.sum().backward()


def _unsaved_operand_changed(lib):
    w, col = _inputs(lib)
    x = col * 2.0
    y = (x + w) * 3.0
    x.add_(1)
    y.sum().backward()
    return w.grad.tolist(), col.grad.tolist()


def _saved_view_changed(lib):
    w, col = _inputs(lib, rows=6)
    base = col * 2.0
    v = base[0:3]
    y = v * w
    v.mul_(3)
    y.sum().backward()


def _saved_operand_changed_create_graph(lib):
    w, col = _inputs(lib)
    x = col * 2.0
    y = (x * w) ** 2
    x.mul_(2)
    lib.autograd.grad(y.sum(), w, create_graph=True)


def _broadcast_operands_both_ways(lib):
    w, col = _inputs(lib)
    row = lib.tensor([[0.5, -1.0, 2.0, 0.25]], requires_grad=True)
    y = (col * w - row) ** 2 + col / row
    (gc, gr) = lib.autograd.grad(y.sum(), (col, row), create_graph=True)
    (h,) = lib.autograd.grad((gc.sum() + gr.sum()), w)
    return y.tolist(), gc.tolist(), gr.tolist(), h.tolist()


def _changed_after_the_backward_read_it(lib):
    w, col = _inputs(lib)
    x = col * 2.0
    y = x * w
    y.sum().backward()
    x.add_(1)
    return w.grad.tolist(), (x * w).sum().item()


PROGRAMS = [_saved_operand_changed, _unsaved_operand_changed, _saved_view_changed,
            _saved_operand_changed_create_graph, _broadcast_operands_both_ways,
            _changed_after_the_backward_read_it]


def _outcome(lib, program):
    try:
        return "ok", program(lib)
    except RuntimeError as e:
        return "RuntimeError", str(e)[:len(MODIFIED)]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__.strip("_") for p in PROGRAMS])
def test_broadcast_operand_versions_as_pytorch(program):
    ours, theirs = _outcome(tg, program), _outcome(torch, program)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        for a, b in zip(ours[1], theirs[1]):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    else:
        assert ours[1] == theirs[1] == MODIFIED


def test_broadcast_gradcheck():
    rng = np.random.default_rng(0)
    col = tg.tensor(rng.standard_normal((3, 1)), requires_grad=True)
    row = tg.tensor(rng.standard_normal((1, 4)), requires_grad=True)
    f = lambda a, b: (a * b - b) ** 2 + a / (b * b + 1.0)  # noqa: E731
    assert tg.autograd.gradcheck(f, (col, row))
    assert tg.autograd.gradgradcheck(f, (col, row))

