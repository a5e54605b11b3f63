"""In-place forms of methods (``atan2_``, ``cumsum_``, ``log10_``...) and the aliasing rule
of in-place ops (``y.mul_(y)`` saves ``y`` as its other operand, then changes it: PyTorch's
version check raises at the backward), against PyTorch: values, dtypes, node names,
gradients or the error.  Compositions name their own nodes (README)."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.ops.torch_api import _INPLACE_FORMS

torch = pytest.importorskip("torch")

X = np.array([[0.5, 1.25, 2.0], [0.75, 1.5, 0.6]])
O = np.array([[0.3, 1.7, 1.1], [0.9, 0.4, 1.3]])
UNARY = {"absolute", "acosh", "arccos", "arccosh", "arcsin", "arcsinh", "arctan", "arctanh",
         "asinh", "atanh", "deg2rad", "rad2deg", "erfc", "fix", "frac", "log10", "log2",
         "negative", "rsqrt", "sinc", "logical_not"}
ARGS = {"cumsum": lambda L: (1,), "cumprod": lambda L: (1,), "mvlgamma": lambda L: (1,),
        "clip": lambda L: (0.6, 1.4), "float_power": lambda L: (2.0,)}
COMPOSED = {"acosh", "arccosh", "asinh", "arcsinh", "atanh", "arctanh", "deg2rad", "rad2deg",
            "frac", "hypot", "log10", "log2", "rsqrt", "sinc", "copysign"}   # (node names: README)
PYTORCH_CANNOT = {"acosh", "arccosh", "asinh", "arcsinh", "atanh", "arctanh"}


def _listed(a):
    """``a`` as nested lists, NaN as a string (so that lists compare equal)."""
    return [["nan" if v != v else v for v in row] for row in a.tolist()]


def _run(L, name):
    x = L.tensor(X, dtype=L.float64, requires_grad=True)
    y = x * 1 + (1.0 if name in ("acosh", "arccosh") else 0.0)
    args = ARGS[name](L) if name in ARGS else () if name in UNARY else \
        (L.tensor(O, dtype=L.float64),)
    r = getattr(y, name + "_")(*args)
    node = y.grad_fn.name() if hasattr(y.grad_fn, "name") else type(y.grad_fn).__name__
    out = [r is y, str(y.dtype).split(".")[-1], _listed(np.round(y.detach().numpy(), 12)),
           None if name in COMPOSED else node]
    try:
        y.sum().backward()
        out.append(_listed(np.round(x.grad.numpy(), 9)))
    except NotImplementedError:   # (PyTorch's inplace asinh_ and others)
        out.append("NotImplementedError")
    return out


BITWISE = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not"}


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("name", sorted(BITWISE))
def test_bitwise_inplace_forms_as_pytorch(name, dtype):
    got = []
    for L in (tg, torch):
        a = np.array([[0, 1, 5], [12, 7, 3]]) if dtype != "bool" else np.array([[0, 1, 1], [0, 0, 1]])
        b = np.array([[3, 1, 6], [10, 2, 3]]) if dtype != "bool" else np.array([[1, 1, 0], [0, 1, 1]])
        x = L.tensor(a, dtype=getattr(L, dtype))
        args = () if name == "bitwise_not" else (L.tensor(b, dtype=getattr(L, dtype)),)
        r = getattr(x, name + "_")(*args)
        got.append((r is x, str(x.dtype).split(".")[-1], x.tolist()))
    assert got[0] == got[1]


# (tested below with arguments of their own)
OWN_TESTS = {"addmm", "addmv", "addbmm", "baddbmm", "addr", "ldexp", "gcd", "lcm",
             "bitwise_left_shift", "bitwise_right_shift", "polygamma"}


@pytest.mark.parametrize("name", [n for n in _INPLACE_FORMS if n not in BITWISE | OWN_TESTS])
def test_inplace_forms_as_pytorch(name):
    got, want = _run(tg, name), _run(torch, name)
    if name in PYTORCH_CANNOT:
        assert want[-1] == "NotImplementedError"
        want[-1] = got[-1]   # (tapegrad's: the gradient of the composition, checked below)
        x = X + 1.0 if name in ("acosh", "arccosh") else X
        fn = getattr(torch, {"arccosh": "acosh", "arcsinh": "asinh", "arctanh": "atanh"}.get(name, name))
        xt = torch.tensor(x, requires_grad=True)
        fn(xt).sum().backward()
        np.testing.assert_allclose(np.array(got[-1], float), xt.grad.numpy(), atol=1e-8)
    assert got == want


ALIASED = {
    "y.mul_(y)": lambda y: y.mul_(y), "y.add_(y)": lambda y: y.add_(y),
    "y.sub_(y)": lambda y: y.sub_(y), "y.div_(y)": lambda y: y.div_(y),
    "y.pow_(y)": lambda y: y.pow_(y), "y *= y": lambda y: y.__imul__(y),
    "y.addcmul_(y, y)": lambda y: y.addcmul_(y, y), "y.atan2_(y)": lambda y: y.atan2_(y),
    "y.mul_(2)": lambda y: y.mul_(2.0), "y.log10_()": lambda y: y.log10_(),
    "y.hypot_(y * 1)": lambda y: y.hypot_(y * 1),
}


def _aliased(L, name, kind):
    if kind == "0-d":
        x = L.tensor(1.5, dtype=L.float64, requires_grad=True)
        y = x * 1
    else:
        x = L.tensor([[1.5, 2.0], [3.0, 0.5]], dtype=L.float64, requires_grad=True)
        y = (x * 1)[0] if kind == "view" else x * 1
    ALIASED[name](y)
    try:
        y.sum().backward()
    except RuntimeError as e:
        return ["RuntimeError", "modified by an inplace operation" in str(e)]
    return np.round(x.grad.numpy(), 9).tolist()


@pytest.mark.parametrize("kind", ["0-d", "array", "view"])
@pytest.mark.parametrize("name", ALIASED)
def test_an_inplace_op_on_itself_as_pytorch(name, kind):
    assert _aliased(tg, name, kind) == _aliased(torch, name, kind)


COMPARISONS = ["eq", "ne", "gt", "lt", "ge", "le", "greater", "greater_equal", "less",
               "less_equal", "not_equal"]


def _compared(L, name, other_kind, create_graph=False):
    x = L.tensor(X, dtype=L.float64, requires_grad=True)
    w = L.tensor(np.where(O > 1.0, X, O), dtype=L.float64, requires_grad=True)
    y = x * 1.0
    other = {"number": 1.25, "tensor": w, "int": 1}[other_kind]
    r = getattr(y, name + "_")(other)
    out = [r is y, str(y.dtype).split(".")[-1], y.detach().numpy().tolist(),
           type(y.grad_fn).__name__ if L is torch else y.grad_fn.name()]
    (y * 3.0 + x * x).sum().backward(create_graph=create_graph)
    out += [x.grad.detach().numpy().tolist(), None if w.grad is None else w.grad.numpy().tolist()]
    return out


@pytest.mark.parametrize("other", ["number", "tensor", "int"])
@pytest.mark.parametrize("name", COMPARISONS)
def test_comparisons_in_place_as_pytorch(name, other):
    """``y.eq_(v)``: the comparison as 0/1 of y's dtype, PyTorch's EqBackward0 (a number)
    or EqBackward1 (a tensor), zero gradients to both (the old node is not kept)."""
    assert _compared(tg, name, other) == _compared(torch, name, other)


def test_comparison_in_place_under_create_graph():
    assert _compared(tg, "gt", "tensor", True) == _compared(torch, "gt", "tensor", True)


@pytest.mark.parametrize("dtype", ["int64", "bool", "float32"])
@pytest.mark.parametrize("name", ["eq", "lt", "not_equal"])
def test_comparisons_in_place_without_grad(name, dtype):
    got = []
    for L in (tg, torch):
        x = L.tensor(np.array([[0, 1, 5], [2, 1, 0]]), dtype=getattr(L, dtype))
        r = getattr(x, name + "_")(1)
        got.append((r is x, str(x.dtype).split(".")[-1], x.tolist()))
    assert got[0] == got[1]


@pytest.mark.parametrize("form", ["floor_divide", "floor_divide_", "//", "heaviside",
                                  "heaviside_"])
def test_no_derivative_as_pytorch(form):
    """PyTorch records floor division and heaviside with a ``NotImplemented`` node: the
    result requires grad, and a backward that reaches it raises (tapegrad took them as
    constants: a gradient where PyTorch has none)."""
    got = []
    for L in (tg, torch):
        x = L.tensor(X, dtype=L.float64, requires_grad=True)
        y = x * 1.0
        v = L.tensor([0.5], dtype=L.float64)
        r = {"floor_divide": lambda: L.floor_divide(y, 0.7),
             "floor_divide_": lambda: y.floor_divide_(0.7), "//": lambda: y // 0.7,
             "heaviside": lambda: L.heaviside(y - 1.0, v),
             "heaviside_": lambda: (y - 1.0).heaviside_(v)}[form]()
        name = type(r.grad_fn).__name__ if L is torch else r.grad_fn.name()
        try:
            (r + x).sum().backward()
            err = None
        except RuntimeError as e:
            err = str(e)
        got.append((r.requires_grad, name, r.detach().numpy().tolist(), err))
    assert got[0] == got[1]


R = np.random.default_rng(3)
M23, M34, V3, V4 = R.random((2, 3)), R.random((3, 4)), R.random(3), R.random(4)
B234, B243 = R.random((2, 3, 4)), R.random((2, 4, 3))

PRODUCTS = {   # name -> (input, the operands, kw)
    "addmm": (R.random((2, 4)), (M23, M34), {}),
    "addmm beta 0 (NaN input)": (np.full((2, 4), np.nan), (M23, M34), {"beta": 0}),
    "addmm alpha 0 (inf operand)": (R.random((2, 4)), (M23 * np.inf, M34), {"alpha": 0}),
    "addmm beta alpha": (R.random((2, 4)), (M23, M34), {"beta": 0.5, "alpha": -2.0}),
    "addmv": (R.random(3), (R.random((3, 4)), V4), {"beta": 2.0}),
    "addmv beta 0": (np.full(3, np.inf), (R.random((3, 4)), V4), {"beta": 0}),
    "addbmm": (R.random((3, 3)), (B234, B243), {"alpha": 0.5}),
    "baddbmm": (R.random((2, 3, 3)), (B234, B243), {}),
    "addr": (R.random((3, 4)), (V3, V4), {"beta": 0}),
}


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("case", sorted(PRODUCTS))
def test_products_with_input_as_pytorch(case, inplace):
    """``addmm``/``addmv``/``addbmm``/``baddbmm``/``addr`` and their in-place forms: values
    and gradients; a factor of 0 ignores its term (NaN and inf there do not propagate, as
    PyTorch's), its gradient zeros."""
    base, operands, kw = PRODUCTS[case]
    name = case.split()[0]
    got = []
    for L in (tg, torch):
        i = L.tensor(base, dtype=L.float64, requires_grad=True)
        ops = [L.tensor(v, dtype=L.float64, requires_grad=True) for v in operands]
        y = i * 1.0
        r = getattr(y, name + "_")(*ops, **kw) if inplace else getattr(L, name)(y, *ops, **kw)
        r.sum().backward()
        # (rounded: PyTorch's BLAS call scales inside the product, tapegrad's composition
        # after it: the last bits differ)
        got.append([_listed(np.round(np.atleast_2d(r.detach().numpy().reshape(r.shape[0], -1)),
                                     12)),
                    _listed(np.atleast_2d(np.round(i.grad.numpy(), 12)))]
                   + [_listed(np.atleast_2d(np.round(o.grad.numpy(), 12).reshape(len(o.grad), -1)))
                      for o in ops])
    assert got[0] == got[1]


@pytest.mark.parametrize("name", ["gcd", "lcm", "bitwise_left_shift", "bitwise_right_shift"])
@pytest.mark.parametrize("form", ["function", "method", "in place"])
def test_integer_ops_as_pytorch(name, form):
    got = []
    for L in (tg, torch):
        a, b = L.tensor([12, 18, 7, -9, 0]), L.tensor([8, 12, 21, 6, 3])
        r = getattr(L, name)(a, b) if form == "function" else getattr(a, name)(b) \
            if form == "method" else getattr(a, name + "_")(b)
        got.append((r is a, str(r.dtype).split(".")[-1], r.tolist()))
    assert got[0] == got[1]
    with pytest.raises(NotImplementedError, match="not implemented for 'Double'"):
        getattr(tg, name)(tg.tensor([1.5]), tg.tensor([2.5]))


def test_shift_operators_as_pytorch():
    for L in (tg, torch):
        a = L.tensor([1, 2, 3])
        assert (a << 2).tolist() == [4, 8, 12] and (a >> 1).tolist() == [0, 1, 1]


@pytest.mark.parametrize("inplace", [False, True])
def test_ldexp_as_pytorch(inplace):
    got = []
    for L in (tg, torch):
        x = L.tensor(X, dtype=L.float64, requires_grad=True)
        e = L.tensor([[1, 2, -1], [0, 3, 5]])
        y = x * 1.0
        r = y.ldexp_(e) if inplace else L.ldexp(y, e)
        r.sum().backward()
        got.append((str(r.dtype).split(".")[-1], r.detach().numpy().tolist(),
                    x.grad.numpy().tolist()))
    # PyTorch's rule computes pow(2, e) in e's integer dtype: 2 ** -1 is 0 there, where its
    # forward scales by 0.5 (README): tapegrad's gradient is the forward's factor
    assert got[0][:2] == got[1][:2]
    assert got[0][2] == [[2.0, 4.0, 0.5], [1.0, 8.0, 32.0]]
    assert got[1][2] == [[2.0, 4.0, 0.0], [1.0, 8.0, 32.0]]


@pytest.mark.parametrize("shape, wrap", [((3, 3), False), ((5, 2), True), ((5, 2), False),
                                         ((2, 2, 2), False)])
def test_fill_diagonal_as_pytorch(shape, wrap):
    """Values and gradients; the node is ``where``'s (PyTorch's ``CopySlices``: a
    composition, README)."""
    got = []
    for L in (tg, torch):
        x = L.tensor(np.arange(np.prod(shape), dtype=float).reshape(shape), dtype=L.float64,
                     requires_grad=True)
        y = x * 1.0
        r = y.fill_diagonal_(-1.5, wrap=wrap)
        (r * r).sum().backward()
        got.append((r is y, r.detach().numpy().tolist(), x.grad.numpy().tolist()))
    assert got[0] == got[1]


def test_polygamma_in_place_and_share_memory():
    """(PyTorch's trigamma is accurate to ~3e-10 relative: trigamma(0.5) = pi^2 / 2 is
    4.934802202074 there, 4.934802200545 here.)"""
    got = []
    for L in (tg, torch):
        x = L.tensor(X, dtype=L.float64, requires_grad=True)
        y = x * 1.0
        r = y.polygamma_(1)
        r.sum().backward()
        t = L.tensor(X)
        got.append((r is y, r.detach().numpy(), x.grad.numpy(), t.share_memory_() is t))
    assert got[0][0] and got[1][0] and got[0][3] and got[1][3]
    np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-9)
    np.testing.assert_allclose(got[0][2], got[1][2], rtol=1e-8)
    assert abs(tg.polygamma(1, tg.tensor(0.5)).item() - np.pi ** 2 / 2) < 1e-14
