"""t_, transpose_, unsqueeze_ and squeeze_: a tensor's shape and strides changed in place,
as PyTorch changes them (the tensor is the same object; node TBackward1, ...), against
PyTorch: shapes, strides, node names and next_functions, versions, gradients, errors."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

OPS = {
    "t_": lambda y: y.t_(),
    "transpose_": lambda y: y.transpose_(0, 1),
    "transpose_(-1, 0)": lambda y: y.transpose_(-1, 0),
    "swapaxes_": lambda y: y.swapaxes_(0, 1),
    "swapdims_": lambda y: y.swapdims_(1, 0),
    "unsqueeze_": lambda y: y.unsqueeze_(1),
    "unsqueeze_(-1)": lambda y: y.unsqueeze_(-1),
    "squeeze_()": lambda y: y.unsqueeze_(0).squeeze_(),
    "squeeze_(0)": lambda y: y.unsqueeze_(0).squeeze_(0),
    "squeeze_((0,))": lambda y: y.unsqueeze_(0).squeeze_((0,)),
}
KINDS = ["leaf", "result", "constant", "view of a result", "view of a leaf"]


def _node(fn):
    if fn is None:
        return None
    return fn.name() if hasattr(fn, "name") else type(fn).__name__


def _run(L, op, kind):
    x = L.tensor(np.arange(6.0).reshape(2, 3), dtype=L.float64)
    if kind != "constant":
        x.requires_grad_()
    y = {"leaf": x, "constant": x, "result": x * 1, "view of a result": (x * 1)[0:2],
         "view of a leaf": x[0:2]}[kind]
    v0 = y._version
    try:
        r = OPS[op](y)
    except RuntimeError as e:
        return ("RuntimeError", str(e))
    out = [r is y, tuple(y.shape), tuple(y.stride()), y.is_contiguous(), y._version - v0,
           _node(y.grad_fn),
           [_node(n[0]) for n in y.grad_fn.next_functions] if y.grad_fn is not None else None]
    if y.requires_grad:
        w = L.tensor(np.arange(6.0).reshape(tuple(y.shape)) - 2.5, dtype=L.float64)
        (y * w).sum().backward()
        out.append(x.grad.tolist())
    return out


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("op", OPS)
def test_shape_changed_in_place_as_pytorch(op, kind):
    assert _run(tg, op, kind) == _run(torch, op, kind)


@pytest.mark.parametrize("lib", [tg, torch], ids=["tapegrad", "torch"])
def test_a_view_changed_in_place_still_writes_its_base(lib):
    b = lib.tensor(np.arange(6.0).reshape(2, 3), dtype=lib.float64, requires_grad=True)
    c = b * 1
    w = c[0:2]
    w.t_()
    w.mul_(3.0)
    assert w._base is c and tuple(w.shape) == (3, 2)
    assert c.tolist() == [[0.0, 3.0, 6.0], [9.0, 12.0, 15.0]]
    (c * lib.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=lib.float64)).sum().backward()
    assert b.grad.tolist() == [[3.0, 6.0, 9.0], [12.0, 15.0, 18.0]]


def test_a_leaf_under_no_grad_keeps_requiring_grad():
    got = []
    for L in (tg, torch):
        w = L.tensor(np.arange(6.0).reshape(2, 3), dtype=L.float64, requires_grad=True)
        with L.no_grad():
            w.t_()
        (w * L.tensor(np.arange(6.0).reshape(3, 2), dtype=L.float64)).sum().backward()
        got.append((tuple(w.shape), w.requires_grad, w.grad.tolist()))
    assert got[0] == got[1]


def test_refused_where_tapegrad_cannot_follow():
    # (PyTorch allows these: documented deviations)
    y = tg.tensor(np.ones((2, 3)), requires_grad=True) * 1
    row = y[0]
    with pytest.raises(RuntimeError, match="views of it are alive"):
        y.t_()
    assert tuple(y.shape) == (2, 3) and row.tolist() == [1.0, 1.0, 1.0]
    z = tg.tensor(np.ones((2, 3)), requires_grad=True) * 1
    with tg.no_grad(), pytest.raises(RuntimeError, match="under no_grad"):
        z.unsqueeze_(0)
    assert tuple(z.shape) == (2, 3)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_other_dtypes(dtype):
    got = []
    for L in (tg, torch):
        x = L.tensor(np.arange(6).reshape(2, 3), dtype=getattr(L, dtype))
        x.unsqueeze_(0)
        x.transpose_(0, 2)
        out = [tuple(x.shape), tuple(x.stride()), x.tolist()]
        if dtype == "float32":
            w = L.tensor(np.ones((2, 3)), dtype=L.float32, requires_grad=True)
            y = w * 2
            y.t_()
            (y * L.tensor(np.arange(6.0).reshape(3, 2), dtype=L.float32)).sum().backward()
            out += [tuple(y.shape), _node(y.grad_fn), w.grad.tolist()]
        got.append(out)
    assert got[0] == got[1]
