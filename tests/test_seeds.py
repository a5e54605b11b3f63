"""One test per code example in the seed documents (/work/shared/seeds/*.txt).

The seeds are blog posts explaining PyTorch autograd.  Every example is run
here with ``torch`` replaced by ``tapegrad`` (imported as ``tg``); the
expected values, node names, reprs and error messages are the ones PyTorch
2.13 gives for the same code (checked by hand against torch, which is not
needed to run this file).

Seeds 000 and 003 are two copies of the same post ("How does PyTorch
calculate gradient: a programming perspective"), seed 001 is "PyTorch
Autograd: understanding the heart of PyTorch's magic" and seed 002 is "How
does PyTorch's autograd calculate the gradient of a loss with respect to a
tensor's output?".
"""

import math
import re
import warnings

import numpy as np
import pytest

import tapegrad as tg

# every test here runs with the float walk and with the recorded walk of create_graph=True
pytestmark = pytest.mark.usefixtures("both_walks")

NODE_REPR = r"<{name} object at 0x[0-9a-fA-F]+>"


def node_name(node):
    """The class name of a graph node, as PyTorch's ``type(node).__name__``."""
    return type(node).__name__


def abcde():
    """Seeds 000/003: the toy graph e = (a + b) * d."""
    a = tg.tensor(2.0, requires_grad=True)
    b = tg.tensor(3.0, requires_grad=True)
    c = a + b
    d = tg.tensor(4.0, requires_grad=True)
    e = c * d
    return a, b, c, d, e


# ---------------------------------------------------------------------------
# Seeds 000 / 003: "a programming perspective"
# ---------------------------------------------------------------------------


def test_seed000_backward_and_autograd_backward_are_equal():
    # "y.backward()  torch.autograd.backward(y)" -- "They are equal"
    x1 = tg.tensor(1.5, requires_grad=True)
    y1 = x1 * x1 * x1 + x1.sin()
    y1.backward()

    x2 = tg.tensor(1.5, requires_grad=True)
    y2 = x2 * x2 * x2 + x2.sin()
    tg.autograd.backward(y2)

    expected = 3 * 1.5**2 + math.cos(1.5)
    assert x1.grad.item() == pytest.approx(expected, rel=1e-12)
    assert x2.grad.item() == pytest.approx(expected, rel=1e-12)
    assert x1.grad.item() == x2.grad.item()


def test_seed000_forward_values_of_toy_graph():
    a, b, c, d, e = abcde()
    assert c.item() == 5.0
    assert e.item() == 20.0
    assert c.requires_grad and e.requires_grad
    assert not c.is_leaf and not e.is_leaf
    assert a.is_leaf and b.is_leaf and d.is_leaf


def test_seed000_repr_of_e():
    # "tensor(20., grad_fn=<MulBackward0>)"
    *_, e = abcde()
    assert repr(e) == "tensor(20., grad_fn=<MulBackward0>)"


def test_seed000_grad_fn_is_mulbackward0():
    *_, e = abcde()
    assert node_name(e.grad_fn) == "MulBackward0"
    assert e.grad_fn.name() == "MulBackward0"
    assert re.fullmatch(NODE_REPR.format(name="MulBackward0"), repr(e.grad_fn))


def test_seed000_next_functions_of_e():
    # "((<AddBackward0 at 0x268c6d3e668>, 0), (<AccumulateGrad at 0x268c6d3e588>, 0))"
    *_, e = abcde()
    nf = e.grad_fn.next_functions
    assert isinstance(nf, tuple)
    assert len(nf) == 2
    for pair in nf:
        assert isinstance(pair, tuple) and len(pair) == 2
        assert pair[1] == 0
    assert [node_name(n) for n, _ in nf] == ["AddBackward0", "AccumulateGrad"]
    assert re.fullmatch(NODE_REPR.format(name="AddBackward0"), repr(nf[0][0]))
    assert re.fullmatch(NODE_REPR.format(name="AccumulateGrad"), repr(nf[1][0]))
    # repr of the whole tuple reads as PyTorch prints it
    assert re.fullmatch(
        r"\(\(" + NODE_REPR.format(name="AddBackward0") + r", 0\), \("
        + NODE_REPR.format(name="AccumulateGrad") + r", 0\)\)",
        repr(nf),
    )


def test_seed000_next_functions_of_addbackward():
    # ag = e.grad_fn.next_functions[0][0]; ag.next_functions
    # "((<AccumulateGrad at 0x268c6d3e978>, 0), (<AccumulateGrad at 0x268c6d3e898>, 0))"
    a, b, c, d, e = abcde()
    ag = e.grad_fn.next_functions[0][0]
    assert node_name(ag) == "AddBackward0"
    assert ag.name() == "AddBackward0"
    nf = ag.next_functions
    assert [node_name(n) for n, _ in nf] == ["AccumulateGrad", "AccumulateGrad"]
    assert [i for _, i in nf] == [0, 0]
    # "if we go with the AccumulateGrad in a and b, we should also see familiar tensors"
    assert nf[0][0].variable is a
    assert nf[1][0].variable is b


def test_seed000_variable_on_addbackward_raises_attributeerror():
    # "AttributeError: 'AddBackward0' object has no attribute 'variable'"
    *_, e = abcde()
    ag = e.grad_fn.next_functions[0][0]
    with pytest.raises(AttributeError) as info:
        ag.variable
    assert str(info.value) == "'AddBackward0' object has no attribute 'variable'"


def test_seed000_variable_on_accumulategrad_is_the_leaf():
    # ag = e.grad_fn.next_functions[1][0]; ag.variable -> tensor(4., requires_grad=True)
    *_, d, e = abcde()
    ag = e.grad_fn.next_functions[1][0]
    assert node_name(ag) == "AccumulateGrad"
    assert ag.variable is d
    assert repr(ag.variable) == "tensor(4., requires_grad=True)"
    # "AccumulateGrad has two methods called next_functions and variable"
    assert ag.next_functions == ()


def test_seed000_e_backward_fills_leaf_grads():
    # e = (a+b)*d: de/da = de/db = d = 4, de/dd = a+b = 5
    a, b, c, d, e = abcde()
    assert a.grad is None and b.grad is None and d.grad is None
    e.backward()
    assert a.grad.item() == 4.0
    assert b.grad.item() == 4.0
    assert d.grad.item() == 5.0
    assert a.grad.requires_grad is False


def test_seed000_sin_backward_returns_cos():
    # "auto grad_result = grad * self.cos()"
    x = tg.tensor(0.7, requires_grad=True)
    y = x.sin()
    assert node_name(y.grad_fn) == "SinBackward0"
    assert y.grad_fn.name() == "SinBackward0"
    assert y.item() == pytest.approx(math.sin(0.7), rel=1e-15)
    y.backward()
    assert x.grad.item() == pytest.approx(math.cos(0.7), rel=1e-15)


def test_seed000_sin_function_form():
    x = tg.tensor([0.0, 1.0, -2.5], requires_grad=True)
    y = tg.sin(x)
    assert node_name(y.grad_fn) == "SinBackward0"
    y.backward(tg.ones(3))
    assert x.grad.tolist() == pytest.approx([math.cos(v) for v in (0.0, 1.0, -2.5)], rel=1e-15)


# ---------------------------------------------------------------------------
# Seed 001: "PyTorch Autograd -- understanding the heart of PyTorch's magic"
# ---------------------------------------------------------------------------


def test_seed001_float_numpy_array_can_be_made_to_require_grad():
    # x = np.array([1., 2., 3.]); x = torch.from_numpy(x); x.requires_grad_(True)
    x = tg.tensor(np.array([1.0, 2.0, 3.0]))
    assert x.requires_grad is False
    assert x.requires_grad_(True) is x
    assert x.requires_grad is True
    assert x.is_leaf
    assert x.tolist() == [1.0, 2.0, 3.0]
    assert x.dtype == tg.float64


def test_seed001_integer_tensor_cannot_require_grad():
    # "gradients can only be calculated for floating point tensors"
    with pytest.raises(RuntimeError, match="Only Tensors of floating point and complex dtype can require gradients"):
        tg.tensor(np.array([1, 2, 3]), requires_grad=True)


def test_seed001_randn_creates_a_leaf():
    # "x = torch.randn(1, 1)" is one of the ways of creating a leaf
    x = tg.randn(1, 1)
    assert tuple(x.shape) == (1, 1)
    assert x.is_leaf
    assert x.requires_grad is False
    assert x.grad_fn is None
    assert x.requires_grad_() is x
    assert x.requires_grad and x.is_leaf


def test_seed001_graph_without_requires_grad():
    # "DCG with requires_grad = False": x holds 1.0, y holds 2.0, z = x * y
    x = tg.tensor(1.0)
    y = tg.tensor(2.0)
    z = x * y
    for t in (x, y, z):
        assert t.requires_grad is False
        assert t.grad is None
        assert t.grad_fn is None
        assert t.is_leaf is True
    assert x.data.item() == 1.0
    assert y.data.item() == 2.0
    assert z.data.item() == 2.0


def test_seed001_graph_with_requires_grad():
    # "DCG with requires_grad = True"
    x = tg.tensor(1.0, requires_grad=True)
    y = tg.tensor(2.0)
    z = x * y
    assert (x.requires_grad, y.requires_grad, z.requires_grad) == (True, False, True)
    assert (x.is_leaf, y.is_leaf, z.is_leaf) == (True, True, False)
    assert x.grad_fn is None and y.grad_fn is None
    assert node_name(z.grad_fn) == "MulBackward0"
    assert x.grad is None and y.grad is None
    nf = z.grad_fn.next_functions
    assert node_name(nf[0][0]) == "AccumulateGrad" and nf[0][0].variable is x
    assert nf[1] == (None, 0)
    z.backward()
    assert x.grad.item() == 2.0
    assert y.grad is None


def test_seed001_requires_grad_in_place():
    # "For an arbitrary tensor a It can be manipulated in-place as follows: a.requires_grad_(True)"
    a = tg.tensor([1.0, 2.0])
    out = a.requires_grad_(True)
    assert out is a
    assert a.requires_grad is True
    b = (a * a).requires_grad
    assert b is True
    # default argument is True, too
    c = tg.tensor(3.0)
    c.requires_grad_()
    assert c.requires_grad is True


def test_seed001_grad_is_none_until_backward():
    # "Even if requires_grad is True, it will hold a None value unless .backward() is called"
    x = tg.tensor(3.0, requires_grad=True)
    out = x * x + 1.0
    assert x.grad is None
    out.backward()
    # "x.grad will hold d out / dx"
    assert x.grad.item() == 6.0


def test_seed001_is_leaf_rules():
    # leaf if: created explicitly; created by ops on tensors that all have
    # requires_grad=False; created by .detach()
    x = tg.tensor(1.0)
    assert x.is_leaf
    w = tg.randn(1, 1)
    assert w.is_leaf
    p = tg.tensor(2.0) * tg.tensor(3.0) + 1.0
    assert p.is_leaf and p.requires_grad is False
    r = tg.tensor(2.0, requires_grad=True)
    q = r * 3.0
    assert not q.is_leaf
    det = q.detach()
    assert det.is_leaf
    assert det.requires_grad is False
    assert det.grad_fn is None
    assert det.item() == 6.0


def test_seed001_backward_only_fills_leaves_that_require_grad():
    # "gradients are calculated only for the nodes which have both requires_grad and is_leaf True"
    x = tg.tensor(2.0, requires_grad=True)
    k = tg.tensor(5.0)
    h = x * k
    out = h * h
    out.backward()
    assert x.grad.item() == 2 * 5.0 * 5.0 * 2.0  # d/dx (5x)^2 = 50 x
    assert k.grad is None
    with pytest.warns(UserWarning, match="retain_grad"):
        assert h.grad is None


def test_seed001_no_grad_stops_tracking():
    # "the code can be wrapped inside with torch.no_grad():"
    x = tg.tensor(1.0, requires_grad=True)
    with tg.no_grad():
        y = x * 2
        z = y.sin() + x
    for t in (y, z):
        assert t.requires_grad is False
        assert t.grad_fn is None
        assert t.is_leaf
    assert y.item() == 2.0
    assert z.item() == pytest.approx(math.sin(2.0) + 1.0, rel=1e-15)
    # tracking resumes afterwards
    w = x * 2
    assert w.requires_grad is True
    assert node_name(w.grad_fn) == "MulBackward0"


def test_seed001_backward_default_gradient_is_one():
    # x = torch.tensor(1.0, requires_grad=True); z = x ** 3; z.backward()
    # "a tensor is automatically passed as z.backward(torch.tensor(1.0))"; x.grad is 3
    x = tg.tensor(1.0, requires_grad=True)
    z = x**3
    assert node_name(z.grad_fn) == "PowBackward0"
    z.backward()
    assert x.grad.item() == 3.0

    x2 = tg.tensor(1.0, requires_grad=True)
    z2 = x2**3
    z2.backward(tg.tensor(1.0))
    assert x2.grad.item() == 3.0


def _xyz_vectors():
    # "x = torch.tensor([0.0, 2.0, 8.0], requires_grad = True)
    #  y = torch.tensor([5.0 , 1.0 , 7.0], requires_grad = True)  and z = x * y"
    x = tg.tensor([0.0, 2.0, 8.0], requires_grad=True)
    y = tg.tensor([5.0, 1.0, 7.0], requires_grad=True)
    return x, y, x * y


def test_seed001_vector_backward_with_external_gradient():
    # z.backward(torch.FloatTensor([1.0, 1.0, 1.0]))
    x, y, z = _xyz_vectors()
    assert z.tolist() == [0.0, 2.0, 56.0]
    assert tuple(z.shape) == (3,)
    z.backward(tg.tensor([1.0, 1.0, 1.0]))
    assert x.grad.tolist() == [5.0, 1.0, 7.0]
    assert y.grad.tolist() == [0.0, 2.0, 8.0]


def test_seed001_vector_backward_without_gradient_raises():
    # "z.backward() would give a RuntimeError: grad can be implicitly created only for scalar outputs"
    x, y, z = _xyz_vectors()
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar outputs"):
        z.backward()
    assert x.grad is None and y.grad is None


def test_seed001_vector_jacobian_product_weights():
    # "The tensor passed into the backward function acts like weights for a
    #  weighted output of gradient" -- v^T J
    x, y, z = _xyz_vectors()
    v = [0.5, -2.0, 10.0]
    z.backward(tg.tensor(v))
    assert x.grad.tolist() == [0.5 * 5.0, -2.0 * 1.0, 10.0 * 7.0]
    assert y.grad.tolist() == [0.5 * 0.0, -2.0 * 2.0, 10.0 * 8.0]


# ---------------------------------------------------------------------------
# Seed 002: "How does PyTorch's autograd calculate the gradient of a loss ..."
# ---------------------------------------------------------------------------


def test_seed002_grad_fn_names():
    # print(y.grad_fn); print(z.grad_fn) -> <MulBackward0 ...>, <AddBackward0 ...>
    x = tg.tensor([2.0], requires_grad=True)
    y = x * x
    z = y + 3
    assert node_name(y.grad_fn) == "MulBackward0"
    assert node_name(z.grad_fn) == "AddBackward0"
    assert re.fullmatch(NODE_REPR.format(name="MulBackward0"), str(y.grad_fn))
    assert re.fullmatch(NODE_REPR.format(name="AddBackward0"), str(z.grad_fn))
    # "at this point, no gradients have been calculated yet"
    assert x.grad is None
    assert z.tolist() == [7.0]


def test_seed002_backward_leaf_grad_and_nonleaf_grad_warning():
    # z.backward(); print(x.grad) -> tensor([4.]); print(y.grad) -> None (+ UserWarning)
    x = tg.tensor([2.0], requires_grad=True)
    y = x * x
    z = y + 3
    z.backward()
    assert x.grad.tolist() == [4.0]
    assert tuple(x.grad.shape) == (1,)
    assert repr(x.grad) == "tensor([4.])"
    with pytest.warns(UserWarning, match="retain_grad"):
        yg = y.grad
    assert yg is None


def test_seed002_leaf_grad_access_does_not_warn():
    x = tg.tensor([2.0], requires_grad=True)
    (x * x + 3).backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert x.grad.tolist() == [4.0]


def test_seed002_retain_grad_keeps_intermediate_gradient():
    # "if we wanted y's gradient" -- the working way is y.retain_grad()
    x = tg.tensor([2.0], requires_grad=True)
    y = x * x
    y.retain_grad()
    z = y + 3
    z.backward()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert y.grad.tolist() == [1.0]
    assert x.grad.tolist() == [4.0]


def test_seed002_fan_out_gradients_are_summed():
    # y = x*x; a = y+1; b = y*2; c = a+b; c.backward(); x.grad -> tensor([12.])
    x = tg.tensor([2.0], requires_grad=True)
    y = x * x
    a = y + 1
    b = y * 2
    c = a + b
    assert c.tolist() == [13.0]
    c.backward()
    assert x.grad.tolist() == [12.0]


def test_seed002_gradients_accumulate_over_backward_calls():
    # "subsequent calls to .backward() will add to the existing gradient"
    x = tg.tensor([2.0], requires_grad=True)
    y = x * x
    z = y + 3
    z.backward(retain_graph=True)
    assert x.grad.tolist() == [4.0]
    z.backward()
    assert x.grad.tolist() == [8.0]


def test_seed002_gradients_accumulate_over_fresh_graphs_and_zeroing():
    # training-loop flavour: rebuild the graph each time; zero the grads
    x = tg.tensor([2.0], requires_grad=True)
    for expected in (4.0, 8.0, 12.0):
        (x * x + 3).backward()
        assert x.grad.tolist() == [expected]
    x.grad.zero_()
    assert x.grad.tolist() == [0.0]
    (x * x + 3).backward()
    assert x.grad.tolist() == [4.0]


def test_seed002_second_backward_without_retain_graph_raises():
    x = tg.tensor([2.0], requires_grad=True)
    y = x * x
    z = y + 3
    z.backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        z.backward()
    # the failed call must not have changed the gradient
    assert x.grad.tolist() == [4.0]


def test_seed002_custom_function_activation():
    # "the custom autograd.Function class ... to extend the autograd system
    #  with custom operations ... specialized activation functions"
    class Square(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    x = tg.tensor([2.0, -3.0], requires_grad=True)
    y = Square.apply(x)
    assert y.tolist() == [4.0, 9.0]
    assert node_name(y.grad_fn) == "SquareBackward"
    y.backward(tg.tensor([1.0, 1.0]))
    assert x.grad.tolist() == [4.0, -6.0]
