"""``detach()`` shares memory and the version counter with its source, ``.data`` shares
memory only, and every in-place op bumps ``_version``, as in PyTorch (torch 2.13; skipped
without it).  Each program runs under both libraries; what it returns (values, versions,
flags, grad_fn names, the error raised) must agree."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

MODIFIED = "one of the variables needed for gradient computation has been modified by an inplace"


@pytest.fixture(autouse=True)
def _torch_float64():
    torch.set_default_dtype(torch.float64)
    yield   # (conftest's fixture sets back what it found)


def _leaf(lib):
    return lib.tensor([0.5, -1.0, 2.0], requires_grad=True)


def _detached_of_leaf_changed(lib):
    x = _leaf(lib)
    d = x.detach()
    d.add_(1)
    return x.tolist(), x._version, d._version, d._base is None, d.requires_grad, d.is_leaf


def _detached_of_saved_leaf_changed(lib):
    x = _leaf(lib)
    y = (x * x).sum()
    x.detach().mul_(2)
    y.backward()


def _detached_of_saved_result_changed(lib):
    x = _leaf(lib)
    y = x * 2
    z = y.sin()
    y.detach().mul_(2)
    z.sum().backward()


def _detached_of_unsaved_result_changed(lib):
    x = _leaf(lib)
    y = x * 2
    z = y * 3   # (saves 3, not y)
    y.detach().zero_()
    z.sum().backward()
    return x.grad.tolist(), y.tolist(), y._version


def _source_changed_under_a_detached(lib):
    x = _leaf(lib)
    y = x * 2
    d = y.detach()
    y.add_(1)
    return d.tolist(), d._version, y._version


def _detached_of_a_view(lib):
    x = _leaf(lib)
    y = x * 1
    v = y[1:]
    dv = v.detach()
    dv.zero_()
    return y.tolist(), y._version, v._version, dv._version, dv._base is None


def _view_of_a_detached(lib):
    x = _leaf(lib)
    d = x.detach()
    part = d[:2]
    part.add_(10)   # grad mode on: allowed, nothing of it requires grad
    return x.tolist(), x._version, part._base is d


def _detached_takes_a_history_of_its_own(lib):
    x = _leaf(lib)
    w = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    d = y.detach()
    d.mul_(w)
    d.sum().backward()
    return (d.requires_grad, type(d.grad_fn).__name__, type(y.grad_fn).__name__, y.tolist(),
            w.grad.tolist(), x._version)


def _scalar_detached(lib):
    s = lib.tensor(2.0, requires_grad=True)
    d = s.detach()
    d.add_(1)
    return s.item(), s._version, d.item()


def _scalar_saved_then_detached_changed(lib):
    s = lib.tensor(2.0, requires_grad=True)
    y = s.sin()
    s.detach().add_(1)
    y.backward()


def _sgd_step_through_detach(lib):
    p = _leaf(lib)
    (p ** 2).sum().backward()
    p.detach().sub_(0.1 * p.grad)
    (p ** 2).sum().backward()   # uses the new value: no error, p was re-read
    return p.tolist(), p.grad.tolist(), p._version


def _data_changes_bump_no_version(lib):
    x = _leaf(lib)
    y = x * 2
    z = y.sin()
    y.data.mul_(2)   # PyTorch's documented difference: no error, the new value is used
    z.sum().backward()
    return y._version, x.grad.tolist()


def _recorded_in_place_bumps_the_version(lib):
    x = _leaf(lib)
    y = x * 2
    before = y._version
    y.add_(1)
    y.mul_(x)
    z = lib.ones(3)
    z.add_(1)
    return before, y._version, z._version


def _detached_made_a_leaf_that_requires_grad(lib):
    x = _leaf(lib)
    d = x.detach().requires_grad_()
    with lib.no_grad():
        d.mul_(3)
    (d * d).sum().backward()
    try:
        d.add_(1)
    except RuntimeError as e:
        return x.tolist(), d.grad.tolist(), x._version, str(e)


def _view_of_a_detached_leaf_that_requires_grad(lib):
    d = _leaf(lib).detach().requires_grad_()
    try:
        d[0].fill_(3.0)   # a view of a leaf that requires grad: PyTorch's error
    except RuntimeError as e:
        return str(e)


def _pow_result_changed(exponent, shape, create_graph=False):
    # PowBackward1 (a tensor exponent) saves the result whether the exponent takes a
    # gradient or not; PowBackward0 (a number) does not save it
    def program(lib):
        x = lib.tensor(np.full(shape, 0.023), requires_grad=True)
        y = x ** (x.detach() if exponent == "detached" else
                  lib.tensor(np.full(shape, 1.5)) if exponent == "constant" else 1.5)
        y.sub_(1.692)
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=create_graph)
        return g.tolist()
    program.__name__ = f"_pow_{exponent}_exponent_result_changed_{len(shape)}d" + \
        ("_create_graph" if create_graph else "")
    return program


def _constant_changed(walked, nconsts):
    # a constant saved by reference, changed in place: the backward of the graph that
    # saved it raises, that of another graph on the tape does not (the walk looks for
    # stale constants among the entries it reaches: fewer constants than entries, or more)
    def program(lib):
        x = lib.tensor(np.arange(1.0, 6.0), requires_grad=True)
        cs = [lib.tensor(np.arange(5.0) + k) for k in range(nconsts)]
        saved = (x * cs[0]).sum()
        others = [(x * c).sum() for c in cs[1:]]
        other = (x * 2).sin().sum()
        cs[0].add_(1)
        (saved if walked else other).backward()
        return x.grad.tolist(), len(others)
    program.__name__ = f"_constant_changed_{'in' if walked else 'outside'}_the_graph_{nconsts}"
    return program


CONSTANT_PROGRAMS = [_constant_changed(w, n) for w in (True, False) for n in (1, 12)]


POW_PROGRAMS = [_pow_result_changed(e, s, c) for e in ("detached", "constant", "number")
                for s in ((), (3,)) for c in (False, True)]


PROGRAMS = POW_PROGRAMS + CONSTANT_PROGRAMS + [_view_of_a_detached_leaf_that_requires_grad, _detached_made_a_leaf_that_requires_grad, _detached_of_leaf_changed, _detached_of_saved_leaf_changed,
            _detached_of_saved_result_changed, _detached_of_unsaved_result_changed,
            _source_changed_under_a_detached, _detached_of_a_view, _view_of_a_detached,
            _detached_takes_a_history_of_its_own, _scalar_detached,
            _scalar_saved_then_detached_changed, _sgd_step_through_detach,
            _data_changes_bump_no_version, _recorded_in_place_bumps_the_version]


def _outcome(lib, program):
    try:
        return "ok", program(lib)
    except RuntimeError as e:
        return "RuntimeError", str(e)[:len(MODIFIED)]


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.__name__.strip("_") for p in PROGRAMS])
def test_detach_data_and_versions_as_pytorch(program):
    ours, theirs = _outcome(tg, program), _outcome(torch, program)
    assert ours[0] == theirs[0], (ours, theirs)
    if ours[0] == "ok":
        np.testing.assert_equal(ours[1], theirs[1])
    else:
        assert ours[1] == theirs[1] == MODIFIED
