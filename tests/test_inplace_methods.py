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


@pytest.mark.parametrize("name", [n for n in _INPLACE_FORMS if n not in BITWISE])
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
