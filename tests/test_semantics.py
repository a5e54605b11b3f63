"""Autograd semantics and error messages, as PyTorch has them.

Every expected error type and message below was checked by running the same
code with torch 2.13 (CPU); torch is not needed to run this file.  Messages are
matched on a distinctive, regex-escaped substring.
"""

import gc
import math
import re
import threading
import tracemalloc

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import optable

# every test here runs with the float walk and with the recorded walk of create_graph=True
pytestmark = pytest.mark.usefixtures("both_walks")

def leaf(v, **kw):
    return tg.tensor(v, requires_grad=True, **kw)


def node_name(node):
    return type(node).__name__


# ---------------------------------------------------------------------------
# construction, dtype, conversions
# ---------------------------------------------------------------------------


def test_integer_tensor_cannot_require_grad():
    with pytest.raises(RuntimeError, match=re.escape("Only Tensors of floating point and complex dtype can require gradients")):
        tg.tensor(1, requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape("Only Tensors of floating point and complex dtype can require gradients")):
        tg.tensor([1, 2, 3], requires_grad=True)


def test_requires_grad_on_integer_tensor_raises():
    # torch words this one differently from the constructor
    x = tg.tensor([1, 2, 3])
    with pytest.raises(RuntimeError, match=re.escape("only Tensors of floating point dtype can require gradients")):
        x.requires_grad_()


def test_dtypes():
    assert tg.tensor([1.0, 2.0], dtype=tg.float32).dtype == tg.float32
    assert tg.tensor([1.0, 2.0], dtype=tg.float64).dtype == tg.float64
    assert tg.tensor([1.0, 2.0]).dtype == tg.float64
    assert tg.tensor(1.5).dtype == tg.float64
    assert tg.float32 != tg.float64


INTEGER_DATA = [   # data, and the dtype PyTorch gives it
    (3, "int64"), ([1, 2], "int64"), (np.int32(3), "int32"), (np.array([1, 2], np.int32), "int32"),
    (np.int16(2), "int16"), (np.array([1], np.int8), "int8"),
    ([np.int32(1), np.int32(2)], "int32"), ([np.int32(1), 2], "int64"), ([True, 2], "int64"),
    ([np.int8(1), np.uint8(2)], "int16"),
]


@pytest.mark.parametrize("data,dtype", INTEGER_DATA, ids=repr)
def test_tensor_of_numpy_integers_keeps_their_dtype(data, dtype):
    assert tg.tensor(data).dtype == getattr(tg, dtype)
    torch = pytest.importorskip("torch")
    assert torch.tensor(data).dtype == getattr(torch, dtype)


def test_arange_of_numpy_integers_is_int64_as_pytorch():
    for args in [(5,), (np.int32(5),), (np.int16(1), np.int32(7))]:
        assert tg.arange(*args).dtype == tg.int64


def test_float32_is_really_single_precision():
    x = tg.tensor(0.1, dtype=tg.float32)
    assert x.item() == float(np.float32(0.1))  # 0.10000000149011612
    assert tg.tensor(0.1).item() == 0.1


def test_float32_grad_has_float32_dtype():
    x = leaf([1.0, 2.0], dtype=tg.float32)
    y = x * x
    assert y.dtype == tg.float32
    y.backward(tg.tensor([1.0, 1.0], dtype=tg.float32))
    assert x.grad.dtype == tg.float32
    assert x.grad.tolist() == [2.0, 4.0]


def test_numpy_on_tensor_requiring_grad_raises():
    x = leaf([1.0, 2.0])
    with pytest.raises(RuntimeError, match=re.escape("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")):
        x.numpy()
    a = x.detach().numpy()
    assert isinstance(a, np.ndarray)
    assert a.tolist() == [1.0, 2.0]


def test_numpy_of_plain_tensor():
    a = tg.tensor([1.5, -2.0, 3.0]).numpy()
    assert isinstance(a, np.ndarray)
    assert a.dtype == np.float64
    assert a.tolist() == [1.5, -2.0, 3.0]


def test_item_float_tolist_shape_ndim():
    s = tg.tensor(2.5)
    assert s.item() == 2.5
    assert isinstance(s.item(), float)
    assert float(s) == 2.5
    assert tuple(s.shape) == ()
    assert s.ndim == 0
    assert s.tolist() == 2.5

    v = tg.tensor([1.0, 2.0, 3.0])
    assert v.tolist() == [1.0, 2.0, 3.0]
    assert tuple(v.shape) == (3,)
    assert v.ndim == 1

    m = tg.zeros(2, 3)
    assert tuple(m.shape) == (2, 3)
    assert m.ndim == 2
    assert m.tolist() == [[0.0] * 3] * 2

    g = leaf(4.0)
    assert g.item() == 4.0  # item() works on tensors that require grad
    assert float((g * 2).detach()) == 8.0


def test_item_on_multi_element_tensor_raises():
    # torch: RuntimeError: a Tensor with 3 elements cannot be converted to Scalar
    with pytest.raises(RuntimeError, match=re.escape("a Tensor with 3 elements cannot be converted to Scalar")):
        tg.tensor([1.0, 2.0, 3.0]).item()


def test_factories():
    assert tg.zeros(3).tolist() == [0.0, 0.0, 0.0]
    assert tg.ones(2).tolist() == [1.0, 1.0]
    assert tg.full((2,), 7.0).tolist() == [7.0, 7.0]
    assert tg.arange(4).tolist() == [0, 1, 2, 3]
    assert tg.arange(0.0, 1.0, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75]
    assert tg.linspace(0.0, 1.0, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    x = tg.tensor([1.0, 2.0])
    assert tg.zeros_like(x).tolist() == [0.0, 0.0]
    assert tg.ones_like(x).tolist() == [1.0, 1.0]
    for t in (tg.zeros(3), tg.ones(2), tg.rand(3), tg.randn(3)):
        assert t.is_leaf and t.requires_grad is False and t.dtype == tg.float64
    r = tg.rand(1000).tolist()
    assert all(0.0 <= v < 1.0 for v in r)


def test_manual_seed_makes_random_reproducible():
    tg.manual_seed(123)
    a = tg.randn(5).tolist()
    b = tg.rand(5).tolist()
    tg.manual_seed(123)
    assert tg.randn(5).tolist() == a
    assert tg.rand(5).tolist() == b
    assert a != tg.randn(5).tolist()


def test_data_attribute():
    x = leaf(3.0)
    d = x.data
    assert d.requires_grad is False
    assert d.is_leaf
    assert d.item() == 3.0


# ---------------------------------------------------------------------------
# backward errors
# ---------------------------------------------------------------------------


def test_backward_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match=re.escape("element 0 of tensors does not require grad and does not have a grad_fn")):
        tg.tensor(1.0).backward()
    with pytest.raises(RuntimeError, match=re.escape("element 0 of tensors does not require grad and does not have a grad_fn")):
        (tg.tensor(1.0) * 2).backward()


def test_backward_with_wrong_gradient_shape_raises():
    x = leaf([1.0, 2.0, 3.0])
    y = x * 2
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        y.backward(tg.tensor([1.0, 1.0]))


def test_backward_of_vector_without_gradient_raises():
    y = leaf([1.0, 2.0, 3.0]) * 2
    with pytest.raises(RuntimeError, match=re.escape("grad can be implicitly created only for scalar outputs")):
        y.backward()


def test_second_backward_raises_and_retain_graph_allows_it():
    x = leaf(3.0)
    z = x * x
    z.backward(retain_graph=True)
    z.backward()
    assert x.grad.item() == 12.0
    with pytest.raises(RuntimeError, match=re.escape("Trying to backward through the graph a second time")):
        z.backward()
    assert x.grad.item() == 12.0


def test_second_backward_through_advanced_indexing_raises():
    """``x[mask]``'s node (IndexBackward0) saves its indices in PyTorch: a second backward
    through it raises even below a node that saves nothing (``[-2]``, SelectBackward0);
    basic indexing saves nothing and a second backward through it runs (fuzzer, seed 5)."""
    x = tg.tensor([[[-0.0, 1.046]], [[-0.773, 1.569]]], requires_grad=True)
    z = x[x > 0.0][-2]
    z.backward()
    with pytest.raises(RuntimeError, match=re.escape("Trying to backward through the graph a second time")):
        z.backward()
    y = x[1:][0, 0, 1]
    y.backward()
    y.backward()
    assert x.grad.numpy()[1, 0, 1] == 2.0


@pytest.mark.parametrize("ops", [0, 40], ids=["few entries", "many entries"])
def test_an_entry_reached_by_a_zero_tensor_only_is_freed_too(ops, both_walks):
    # sgn's gradient is PyTorch's efficient zero tensor: exp's node, reached by it alone,
    # still ran and freed its saved result (the walk marked it 2, "reached by zero tensors",
    # and a freed mark of 2 meant "unchecked" once more than 32 entries were reached)
    x = leaf(1.5)
    y = x.exp()
    h = x
    for _ in range(ops):
        h = h * 1.01
    (y.sgn() + h).backward()
    with pytest.raises(RuntimeError, match=re.escape("Trying to backward through the graph a second time")):
        (y * 1.0).backward()


def test_grad_after_backward_freed_graph_raises():
    x = leaf(3.0)
    z = x.sin() * x
    z.backward()
    with pytest.raises(RuntimeError, match=re.escape("Trying to backward through the graph a second time")):
        tg.autograd.grad(z, [x])


# ---------------------------------------------------------------------------
# tg.autograd.backward / tg.autograd.grad
# ---------------------------------------------------------------------------


def test_autograd_backward_with_grad_tensors():
    x = leaf(2.0)
    y = x * x
    tg.autograd.backward([y], [tg.tensor(3.0)])
    assert x.grad.item() == 12.0

    x = leaf(2.0)
    tg.autograd.backward(x * x)
    assert x.grad.item() == 4.0


def test_autograd_backward_several_roots():
    x = leaf(2.0)
    y1 = x * x
    y2 = x * 3
    tg.autograd.backward([y1, y2])
    assert x.grad.item() == 7.0


def test_autograd_grad_returns_tuple_and_leaves_grad_alone():
    x = leaf(2.0)
    y = x**3
    g = tg.autograd.grad(y, [x])
    assert isinstance(g, tuple)
    assert len(g) == 1
    assert g[0].item() == 12.0
    assert x.grad is None


def test_autograd_grad_single_tensor_input():
    x = leaf(2.0)
    g = tg.autograd.grad(x**3, x)
    assert isinstance(g, tuple) and len(g) == 1
    assert g[0].item() == 12.0


def test_autograd_grad_several_inputs_and_grad_outputs():
    x1 = leaf([1.0, 2.0])
    x2 = leaf([3.0, 4.0])
    y = x1 * x2 + x1.sin()
    g1, g2 = tg.autograd.grad(y, [x1, x2], grad_outputs=tg.tensor([1.0, 10.0]))
    assert g1.tolist() == pytest.approx([3.0 + math.cos(1.0), 10.0 * (4.0 + math.cos(2.0))], rel=1e-14)
    assert g2.tolist() == [1.0, 20.0]
    assert x1.grad is None and x2.grad is None


def test_autograd_grad_retain_graph():
    x = leaf(2.0)
    y = x * x
    (g,) = tg.autograd.grad(y, [x], retain_graph=True)
    (g2,) = tg.autograd.grad(y, [x])
    assert g.item() == g2.item() == 4.0


def test_autograd_grad_with_respect_to_non_leaf():
    x = leaf(2.0)
    h = x * 3
    y = h * h + x
    gh, gx = tg.autograd.grad(y, [h, x])
    assert gh.item() == 12.0  # 2h
    assert gx.item() == 37.0  # 2h * 3 + 1
    assert x.grad is None


def test_autograd_grad_unused_input_raises():
    x1 = leaf(1.0)
    x2 = leaf(2.0)
    y = x1 * 3
    # torch < 2.x: "One of the differentiated Tensors appears to not have been used ..."
    # torch 2.13: "The differentiated Tensor at index 1 appears to not have been used ..."
    with pytest.raises(RuntimeError, match=re.escape("appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior.")):
        tg.autograd.grad(y, [x1, x2])


def test_autograd_grad_allow_unused():
    x1 = leaf(1.0)
    x2 = leaf(2.0)
    y = x1 * 3
    g1, g2 = tg.autograd.grad(y, [x1, x2], allow_unused=True)
    assert g1.item() == 3.0
    assert g2 is None


def test_create_graph_second_derivative():
    x = leaf(2.0)
    y = x**3
    (g,) = tg.autograd.grad(y, [x], create_graph=True)
    assert g.item() == 12.0
    assert g.requires_grad
    (g2,) = tg.autograd.grad(g, [x])
    assert g2.item() == 12.0  # 6x


# ---------------------------------------------------------------------------
# requires_grad_, retain_grad, hooks
# ---------------------------------------------------------------------------


def test_requires_grad_false_on_non_leaf_raises():
    y = leaf(1.0) * 3
    with pytest.raises(RuntimeError, match=re.escape("you can only change requires_grad flags of leaf variables.")):
        y.requires_grad_(False)


def test_requires_grad_false_on_leaf():
    x = leaf(1.0)
    assert x.requires_grad_(False) is x
    assert x.requires_grad is False
    assert (x * 2).requires_grad is False


def test_retain_grad_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match=re.escape("can't retain_grad on Tensor that has requires_grad=False")):
        tg.tensor(1.0).retain_grad()


def test_retain_grad_and_retains_grad():
    x = leaf(2.0)
    y = x * 3
    assert y.retains_grad is False
    assert x.retains_grad is False
    y.retain_grad()
    assert y.retains_grad is True
    (y * y).backward()
    assert y.grad.item() == 12.0  # 2y
    assert x.grad.item() == 36.0
    x.retain_grad()  # no-op on a leaf
    assert x.retains_grad is False


def test_retain_grad_accumulates_over_fan_out():
    x = leaf(2.0)
    y = x * x
    y.retain_grad()
    z = y * 3 + y.sin()
    z.backward()
    assert y.grad.item() == pytest.approx(3 + math.cos(4.0), rel=1e-14)
    assert x.grad.item() == pytest.approx((3 + math.cos(4.0)) * 4.0, rel=1e-14)


def test_hook_on_leaf_replaces_gradient():
    x = leaf(2.0)
    calls = []

    def hook(g):
        calls.append(g.item())
        return g * 10

    x.register_hook(hook)
    (x * x).backward()
    assert calls == [4.0]
    assert x.grad.item() == 40.0


def test_hook_on_leaf_runs_once_on_summed_gradient():
    x = leaf(2.0)
    calls = []
    x.register_hook(lambda g: calls.append(g.item()))
    (x * 3 + x * 5).backward()
    assert calls == [8.0]
    assert x.grad.item() == 8.0  # a hook returning None keeps the gradient


def test_hook_on_non_leaf_changes_upstream_gradient():
    x = leaf(2.0)
    y = x * 3
    seen = []
    y.register_hook(lambda g: (seen.append(g.item()), g * 2)[1])
    (y * y).backward()
    assert seen == [12.0]
    assert x.grad.item() == 72.0  # 2 * 2y * 3


def test_register_hook_on_tensor_without_grad_raises():
    with pytest.raises(RuntimeError, match=re.escape("cannot register a hook on a tensor that doesn't require gradient")):
        tg.tensor(1.0).register_hook(lambda g: g)


# ---------------------------------------------------------------------------
# grad modes
# ---------------------------------------------------------------------------


def test_is_grad_enabled_default():
    assert tg.is_grad_enabled() is True


def test_no_grad_context_manager():
    x = leaf(1.0)
    with tg.no_grad():
        assert tg.is_grad_enabled() is False
        y = x * 2
    assert tg.is_grad_enabled() is True
    assert y.requires_grad is False and y.grad_fn is None and y.is_leaf


def test_no_grad_decorator():
    @tg.no_grad()
    def f(t):
        assert tg.is_grad_enabled() is False
        return t * 2

    y = f(leaf(1.0))
    assert y.requires_grad is False
    assert tg.is_grad_enabled() is True


def test_enable_grad_inside_no_grad_and_nesting():
    x = leaf(1.0)
    with tg.no_grad():
        with tg.enable_grad():
            assert tg.is_grad_enabled() is True
            y = x * 2
        assert tg.is_grad_enabled() is False
        with tg.no_grad():
            assert tg.is_grad_enabled() is False
        assert tg.is_grad_enabled() is False
    assert tg.is_grad_enabled() is True
    assert y.requires_grad is True
    assert node_name(y.grad_fn) == "MulBackward0"


def test_enable_grad_decorator():
    @tg.enable_grad()
    def f(t):
        return t * 2

    with tg.no_grad():
        y = f(leaf(1.0))
        assert tg.is_grad_enabled() is False
    assert y.requires_grad is True


def test_set_grad_enabled_context_and_decorator():
    x = leaf(1.0)
    with tg.set_grad_enabled(False):
        assert tg.is_grad_enabled() is False
        assert (x * 2).requires_grad is False
        with tg.set_grad_enabled(True):
            assert (x * 2).requires_grad is True
    assert tg.is_grad_enabled() is True

    @tg.set_grad_enabled(False)
    def f(t):
        return t * 2

    assert f(x).requires_grad is False
    assert tg.is_grad_enabled() is True


def test_set_grad_enabled_as_a_function_call():
    try:
        tg.set_grad_enabled(False)
        assert tg.is_grad_enabled() is False
        assert (leaf(1.0) * 2).requires_grad is False
    finally:
        tg.set_grad_enabled(True)
    assert tg.is_grad_enabled() is True


def test_grad_mode_restored_after_exception():
    with pytest.raises(ValueError):
        with tg.no_grad():
            raise ValueError("boom")
    assert tg.is_grad_enabled() is True

    @tg.no_grad()
    def bad():
        raise KeyError("x")

    with pytest.raises(KeyError):
        bad()
    assert tg.is_grad_enabled() is True

    with tg.no_grad():
        with pytest.raises(ValueError):
            with tg.enable_grad():
                raise ValueError
        assert tg.is_grad_enabled() is False
    assert tg.is_grad_enabled() is True


def test_grad_mode_is_per_thread():
    seen = []

    def worker():
        seen.append(tg.is_grad_enabled())
        seen.append((leaf(1.0) * 2).requires_grad)

    with tg.no_grad():
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        assert tg.is_grad_enabled() is False
    assert seen == [True, True]

    # and a thread turning grad off does not turn it off here
    def off():
        with tg.no_grad():
            barrier.wait()
            barrier.wait()

    barrier = threading.Barrier(2)
    t = threading.Thread(target=off)
    t.start()
    barrier.wait()
    assert tg.is_grad_enabled() is True
    barrier.wait()
    t.join()


# ---------------------------------------------------------------------------
# in-place operations
# ---------------------------------------------------------------------------

LEAF_INPLACE = re.escape("a leaf Variable that requires grad is being used in an in-place operation.")


def test_inplace_add_on_leaf_requiring_grad_raises():
    x = leaf(1.0)
    with pytest.raises(RuntimeError, match=LEAF_INPLACE):
        x += 1
    x = leaf(1.0)
    with pytest.raises(RuntimeError, match=LEAF_INPLACE):
        x.add_(1)
    x = leaf(1.0)
    with pytest.raises(RuntimeError, match=LEAF_INPLACE):
        x.mul_(2)
    assert x.item() == 1.0


def test_inplace_on_leaf_allowed_under_no_grad():
    x = leaf(1.0)
    with tg.no_grad():
        x += 1
        x.mul_(2)
        x.add_(0.5)
    assert x.item() == 4.5
    assert x.requires_grad is True
    assert x.is_leaf
    (x * x).backward()
    assert x.grad.item() == 9.0


def test_inplace_returns_self():
    x = tg.tensor([1.0, 2.0])
    assert x.add_(1) is x
    assert x.mul_(2) is x
    assert x.tolist() == [4.0, 6.0]
    y = x
    y += 1
    assert y is x
    assert x.tolist() == [5.0, 7.0]


def test_inplace_on_saved_tensor_then_backward_raises():
    x = leaf(3.0)
    y = x * 2
    z = y * y
    y.mul_(3)
    with pytest.raises(RuntimeError, match=re.escape("modified by an inplace operation")):
        z.backward()


def test_inplace_on_unsaved_tensor_keeps_gradient_right():
    # torch: x.grad == 2 (z = y + 1 saved nothing)
    x = leaf(3.0)
    y = x * 2
    z = y + 1
    y.add_(1)
    assert y.item() == 7.0 and z.item() == 7.0
    z.backward()
    assert x.grad.item() == 2.0


def test_inplace_on_non_leaf_is_differentiated():
    # torch: y = x*2; z = y+1; y.add_(1); w = z*y -> dw/dx = 28 at x=3
    x = leaf(3.0)
    y = x * 2
    z = y + 1
    y.add_(1)
    assert node_name(y.grad_fn) == "AddBackward0"
    w = z * y
    w.backward()
    assert x.grad.item() == 28.0

    x = leaf(3.0)
    y = x * 2
    y.mul_(3)
    assert node_name(y.grad_fn) == "MulBackward0"
    y.backward()
    assert x.grad.item() == 6.0

    x = leaf(3.0)
    y = x * 2
    y += 1
    y.backward()
    assert x.grad.item() == 2.0


def test_grad_zero_():
    x = leaf(2.0)
    (x * x).backward()
    assert x.grad.item() == 4.0
    x.grad.zero_()
    assert x.grad.item() == 0.0
    (x * x).backward()
    assert x.grad.item() == 4.0


def test_zero_on_vector():
    v = tg.tensor([1.0, 2.0])
    assert v.zero_() is v
    assert v.tolist() == [0.0, 0.0]


# ---------------------------------------------------------------------------
# detach
# ---------------------------------------------------------------------------


def test_detach_is_leaf_without_grad_with_same_value():
    x = leaf([1.0, 2.0])
    y = x * 2
    d = y.detach()
    assert d.is_leaf
    assert d.requires_grad is False
    assert d.grad_fn is None
    assert d.tolist() == [2.0, 4.0]
    assert (d * x).requires_grad is True
    (d * x).backward(tg.ones(2))
    assert x.grad.tolist() == [2.0, 4.0]  # d is a constant


def test_detach_shares_storage():
    # torch: in-place changes to a detached tensor show up in the original
    y = leaf([1.0, 2.0]) * 2
    d = y.detach()
    d.add_(10)
    assert y.tolist() == [12.0, 14.0]


# ---------------------------------------------------------------------------
# grad_fn views
# ---------------------------------------------------------------------------


def test_grad_fn_views_compare_equal_and_name():
    a = leaf(2.0)
    b = leaf(3.0)
    e = (a + b) * b
    assert e.grad_fn == e.grad_fn
    assert e.grad_fn.name() == "MulBackward0"
    assert e.grad_fn.next_functions[0][0] == e.grad_fn.next_functions[0][0]
    assert e.grad_fn.next_functions[0][0].name() == "AddBackward0"
    assert e.grad_fn != e.grad_fn.next_functions[0][0]


def test_next_functions_none_for_constant_operand():
    x = leaf(3.0)
    for out in (x * tg.tensor(2.0), x * 2, 2 * x, x + 2):
        nf = out.grad_fn.next_functions
        assert len(nf) == 2
        assert node_name(nf[0][0]) == "AccumulateGrad"
        assert nf[0][0].variable is x
        assert nf[0][1] == 0
        assert nf[1] == (None, 0)


def test_next_functions_of_node_from_same_tensor_twice():
    x = leaf(3.0)
    y = x * x
    nf = y.grad_fn.next_functions
    assert [node_name(n) for n, _ in nf] == ["AccumulateGrad", "AccumulateGrad"]
    assert nf[0][0].variable is x and nf[1][0].variable is x


def test_leaf_has_no_grad_fn():
    assert leaf(1.0).grad_fn is None
    assert tg.tensor(1.0).grad_fn is None


# ---------------------------------------------------------------------------
# custom Function
# ---------------------------------------------------------------------------


class MyFn(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x


def test_custom_function_basic():
    x = leaf([1.0, 2.0])
    y = leaf([3.0, 5.0])
    out = MyFn.apply(x, y)
    assert out.tolist() == [3.0, 10.0]
    assert out.requires_grad
    assert node_name(out.grad_fn) == "MyFnBackward"
    assert out.grad_fn.name() == "MyFnBackward"
    out.backward(tg.tensor([1.0, 2.0]))
    assert x.grad.tolist() == [3.0, 10.0]
    assert y.grad.tolist() == [1.0, 4.0]


def test_custom_function_backward_is_the_one_used():
    class Wrong(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 100

    x = leaf(1.0)
    out = Wrong.apply(x)
    assert out.item() == 2.0
    assert node_name(out.grad_fn) == "WrongBackward"
    out.backward()
    assert x.grad.item() == 100.0


def test_custom_function_needs_input_grad():
    record = []

    class N(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            record.append(tuple(ctx.needs_input_grad))
            return g * 2, None

    x = leaf(1.0)
    N.apply(x, tg.tensor(2.0)).backward()
    assert record == [(True, False)]
    assert x.grad.item() == 2.0


def test_leaf_a_backward_passes_none_gets_no_grad():
    # the walk's reach marks both leaves (a superset: it cannot know what a Python backward
    # returns); only the one that got a gradient gets .grad, in every setup of the walk
    class FirstOnly(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g * 2, None

    for shape in ((), (3,)):
        x, y = leaf(np.ones(shape)), leaf(np.ones(shape))
        FirstOnly.apply(x, y).sum().backward()
        assert np.array_equal(x.grad.numpy(), np.full(shape, 2.0))
        assert y.grad is None


def test_custom_function_without_grad_inputs_is_not_tracked():
    out = MyFn.apply(tg.tensor(2.0), tg.tensor(3.0))
    assert out.item() == 6.0
    assert out.requires_grad is False
    assert out.grad_fn is None


def test_custom_function_wrong_number_of_gradients():
    class MyFn(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g

    x = leaf([1.0, 2.0])
    out = MyFn.apply(x, x)
    with pytest.raises(RuntimeError, match=re.escape("function MyFnBackward returned an incorrect number of gradients (expected 2, got 1)")):
        out.backward(tg.ones(2))


def test_custom_function_gradient_of_wrong_shape():
    class MyFn(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return tg.ones(3)

    x = leaf([1.0, 2.0])
    out = MyFn.apply(x)
    # torch: "Function MyFnBackward returned an invalid gradient at index 0 - got [3]
    #         but expected shape compatible with [2]"
    with pytest.raises(RuntimeError, match=re.escape("returned an invalid gradient at index 0")):
        out.backward(tg.ones(2))


def test_custom_function_multiple_outputs():
    class Two(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2, x * x

        @staticmethod
        def backward(ctx, ga, gb):
            (x,) = ctx.saved_tensors
            return ga * 2 + gb * 2 * x

    x = leaf(3.0)
    a, b = Two.apply(x)
    assert (a.item(), b.item()) == (6.0, 9.0)
    assert node_name(a.grad_fn) == "TwoBackward"
    (a + b).backward()
    assert x.grad.item() == 8.0

    # an unused output gets a zero gradient (torch materializes it)
    x = leaf(3.0)
    a, b = Two.apply(x)
    a.backward()
    assert x.grad.item() == 2.0


def test_custom_function_inside_larger_graph():
    x = leaf(0.5)
    y = MyFn.apply(x.sin(), x) * 3
    y.backward()
    # d/dx 3 x sin x = 3 (sin x + x cos x)
    assert x.grad.item() == pytest.approx(3 * (math.sin(0.5) + 0.5 * math.cos(0.5)), rel=1e-14)


# ---------------------------------------------------------------------------
# tg.Tape
# ---------------------------------------------------------------------------


def test_tape_records_entries():
    x1 = leaf(2.0)
    x2 = leaf(3.0)
    with tg.Tape() as tape:
        y = x1 * x2 + x1.sin()
    assert len(tape) > 0
    assert len(tape) >= 3  # mul, sin, add
    entries = list(tape)
    assert len(entries) == len(tape)
    for entry in entries:
        assert isinstance(entry.op, str) and entry.op
        assert isinstance(entry.inputs, tuple)
        assert all(isinstance(i, int) for i in entry.inputs)
        assert isinstance(entry.output, int)
        assert hasattr(entry, "value")
    assert any(
        np.ndim(e.value) == 0 and math.isclose(float(e.value), y.item(), rel_tol=1e-15) for e in entries
    )


def test_tape_gradient_does_not_touch_grad():
    x1 = leaf(2.0)
    x2 = leaf(3.0)
    with tg.Tape() as tape:
        y = x1 * x2 + x1.sin()
    g1, g2 = tape.gradient(y, [x1, x2])
    assert g1.item() == pytest.approx(3.0 + math.cos(2.0), rel=1e-15)
    assert g2.item() == 2.0
    assert x1.grad is None and x2.grad is None


def test_tape_backward_sets_grad():
    x1 = leaf(2.0)
    x2 = leaf(3.0)
    with tg.Tape() as tape:
        y = x1 * x2 + x1.sin()
    tape.backward(y)
    assert x1.grad.item() == pytest.approx(3.0 + math.cos(2.0), rel=1e-15)
    assert x2.grad.item() == 2.0


def test_tape_repr_mentions_entry_count():
    x = leaf(2.0)
    with tg.Tape() as tape:
        (x * x + 1) * x
    n = len(tape)
    assert n > 0
    assert re.search(rf"\b{n}\b", repr(tape))


def test_nested_tapes_innermost_records():
    x = leaf(2.0)
    with tg.Tape() as outer:
        a = x * 2
        n_outer = len(outer)
        assert n_outer > 0
        with tg.Tape() as inner:
            b = a * 3
            c = b.exp()
        assert len(inner) >= 2
        assert len(outer) == n_outer
        d = a + 1
        assert len(outer) > n_outer
    assert d.item() == 5.0
    # the graph spans both tapes: backward goes through the inner one into the outer one
    c.backward()
    assert x.grad.item() == pytest.approx(6.0 * math.exp(12.0), rel=1e-14)


def test_training_loop_memory_does_not_grow():
    # loss.backward() on a fresh loss each iteration: memory held must not
    # grow with the number of iterations (no ever-growing global tape).
    w = leaf(0.0)
    b = leaf(0.0)
    xs = [0.5 * i for i in range(4)]
    ys = [2.0 * v + 1.0 for v in xs]

    def step():
        loss = tg.tensor(0.0)
        for xv, yv in zip(xs, ys):
            err = w * xv + b - yv
            loss = loss + err * err
        loss.backward()
        with tg.no_grad():
            w.add_(w.grad * -0.02)
            b.add_(b.grad * -0.02)
        w.grad.zero_()
        b.grad.zero_()
        return loss

    for _ in range(50):  # warm-up (JIT compilation, caches)
        step()
    gc.collect()
    tracemalloc.start()
    try:
        for _ in range(200):
            step()
        gc.collect()
        after_200, _ = tracemalloc.get_traced_memory()
        for _ in range(1800):
            last = step()
        gc.collect()
        after_2000, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert after_2000 - after_200 < 1_000_000
    # and it did train
    assert last.item() < 1e-3
    assert w.item() == pytest.approx(2.0, abs=0.05)
    assert b.item() == pytest.approx(1.0, abs=0.05)


# A tensor without grad that an array op took as a constant, then changed in place: the
# op's rule would read the new value, so the backward raises PyTorch's error (a silently
# wrong gradient before); l1_loss (PyTorch saves input - target) keeps its own copy.
CONSTANT_CHANGED = {   # name: (loss of x and the constant c, PyTorch raises)
    "matmul": (lambda F, x, c: x @ c, True),
    "mse_loss": (lambda F, x, c: F.mse_loss(x, c), True),
    "smooth_l1_loss": (lambda F, x, c: F.smooth_l1_loss(x, c), True),
    "softmax and dot": (lambda F, x, c: F.softmax(x, 0).sum() + tg.dot(c, x), True),
    "cat then sum": (lambda F, x, c: tg.cat([x, c]).sum(), False),
    "l1_loss": (lambda F, x, c: F.l1_loss(x, c), False),
}


@pytest.mark.parametrize("name", sorted(CONSTANT_CHANGED))
def test_constant_changed_in_place_after_an_array_op(name):
    fn, raises = CONSTANT_CHANGED[name]
    x = tg.tensor([1.598, -0.598, -0.0], requires_grad=True)
    c = tg.tensor([2.0, -0.0, -0.557])
    y = fn(tg.nn.functional, x, c)
    c.div_(1.663)
    if raises:
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
    else:
        y.backward()
        c0 = np.array([2.0, -0.0, -0.557])
        want = {"cat then sum": np.ones(3),
                "l1_loss": np.sign(np.array([1.598, -0.598, -0.0]) - c0) / 3}[name]
        np.testing.assert_array_equal(x.grad.numpy(), want)


def test_in_place_op_recorded_on_a_constant_owns_the_value_it_replaced():
    # c.div_(w): c (no grad) takes the recorded result; the division keeps c's old value as
    # its own (PyTorch saves a clone of the original self), so a later write into c -- here
    # through a view -- changes nothing the backward reads: no error, PyTorch's gradient.
    w = tg.tensor([-1.532, 3.0, -0.252, -0.044], requires_grad=True)
    c = tg.tensor([0.5, 0.508, 1e-300, 0.451])
    c.div_(w)
    first = c[0]
    first[()] = -1.795
    first.backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.zeros(4))
    assert all(math.copysign(1, g) < 0 for g in w.grad.tolist())   # -0.: grad * -c / w**2
    # a constant used before the in-place op still counts as changed (PyTorch: same tensor)
    w2 = tg.tensor([2.0, 4.0, 8.0], requires_grad=True)
    x = tg.tensor([1.0, 1.0, 1.0], requires_grad=True)
    c = tg.tensor([1.0, 2.0, 3.0])
    y = x * c
    c.div_(w2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    # the later write is to the result, which the division did not save
    c = tg.tensor([1.0, 2.0, 3.0])
    c.div_(w2)
    c.add_(1)
    c.sum().backward()
    np.testing.assert_array_equal(w2.grad.numpy(), [-1.0 / 4, -2.0 / 16, -3.0 / 64])


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_backward_signed_zeros_and_double_backward_as_pytorch(name, dim):
    # PyTorch's backward kernels: along the last dim the sum starts from its first term, so
    # an all -0. gradient gives +0.; along other dims -0.  (Recorded on torch 2.13.)
    x = tg.tensor([[0.468, -0.451, 0.5], [1.568, 1.479, -0.052]], requires_grad=True)
    g = tg.tensor([[-0.0, -0.0, -0.0], [-0.0, -0.0, -0.0]])
    for create_graph in (False, True):
        (gx,) = tg.autograd.grad(getattr(x, name)(dim), x, g, create_graph=create_graph)
        assert np.signbit(gx.detach().numpy()).all() == (dim == 0)
    # the gradient is one node, whose own derivatives are PyTorch's double-backward formulas
    (gx,) = tg.autograd.grad((getattr(x, name)(dim) * tg.tensor([[1., 2, 3], [4, 5, 6]])).sum(),
                             x, create_graph=True)
    assert gx.grad_fn.name() == {"softmax": "SoftmaxBackwardDataBackward0",
                                 "log_softmax": "LogSoftmaxBackwardDataBackward0"}[name]
    w = np.array([[0.3, -1.0, 2.0], [0.5, 0.25, -0.75]])
    (h,) = tg.autograd.grad((gx * tg.tensor(w)).sum(), x)

    def first(x0):
        t = tg.tensor(x0, requires_grad=True)
        (d,) = tg.autograd.grad((getattr(t, name)(dim) * tg.tensor([[1., 2, 3], [4, 5, 6]])).sum(), t)
        return float((d * tg.tensor(w)).sum())
    x0, eps = x.detach().numpy(), 1e-6
    fd = np.zeros_like(x0)
    for i in np.ndindex(*x0.shape):
        e = np.zeros_like(x0)
        e[i] = eps
        fd[i] = (first(x0 + e) - first(x0 - e)) / (2 * eps)
    np.testing.assert_allclose(h.detach().numpy(), fd, rtol=1e-6, atol=1e-8)


def test_recorded_in_place_op_writes_the_memory_that_aliases_see():
    # PyTorch writes the storage: from_numpy's array and .data show the new value, and the
    # op keeps the old value for its backward (here d(c / w)/dw needs the old c)
    a = np.array([1.0, 2.0, 4.0])
    c = tg.from_numpy(a)
    alias = c.data
    w = tg.tensor([2.0, 4.0, 8.0], requires_grad=True)
    c.div_(w)
    np.testing.assert_array_equal(a, [0.5, 0.5, 0.5])
    np.testing.assert_array_equal(alias.numpy(), [0.5, 0.5, 0.5])
    c.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [-1.0 / 4, -2.0 / 16, -4.0 / 64])


def test_broadcast_operand_gradient_sums_from_plus_zero():
    # PyTorch reduces a broadcast operand's gradient with sum_to_size, a sum from +0.:
    # terms that are all -0. give +0. (recorded on torch 2.13)
    y = tg.tensor(2.0, requires_grad=True)
    x = tg.tensor([1.0, 2.0])
    for f in (lambda: x + y, lambda: x * y, lambda: (x * x + y * y).reciprocal()):
        (g,) = tg.autograd.grad(f(), y, tg.tensor([-0.0, -0.0]))
        assert g.item() == 0.0 and not math.copysign(1.0, g.item()) < 0


def _unary_rows():
    return [op for op in optable.OPS if op.arity == 1 and op.method and not op.internal
            and op.backward_of is None and not op.compare]


def _changed_after_a_unary_op(lib, op, which):
    lo, hi = op.domain[0]
    x0 = lib.tensor(np.linspace(lo, hi, 6)[1:-1], dtype=lib.float64, requires_grad=True)
    x = x0 * 1.0
    y = getattr(x, op.name)()
    (x if which == "input" else y).mul_(1.5)
    try:
        y.sum().backward()
        return "computes"
    except RuntimeError as e:
        return "raises" if "modified by an inplace operation" in str(e) else str(e)


@pytest.mark.parametrize("which", ["input", "result"])
@pytest.mark.parametrize("name", [op.name for op in _unary_rows()])
def test_a_unary_ops_operand_or_result_changed_in_place_as_pytorch(name, which):
    """Each elementwise row saves what PyTorch's node saves (its input, its result): a
    change of that in place before the backward raises, a change of the other computes
    (fuzzer seed 16: relu saved its input, where ReluBackward0 saves the result)."""
    torch = pytest.importorskip("torch")
    op = next(op for op in optable.OPS if op.name == name)
    if not hasattr(torch.Tensor, name):
        pytest.skip(f"torch.Tensor has no {name}")
    assert _changed_after_a_unary_op(tg, op, which) == _changed_after_a_unary_op(torch, op,
                                                                                  which)


def _changed_after_a_binary_op(lib, op, which, number):
    (lo, hi), (lo2, hi2) = op.domain if len(op.domain) == 2 else op.domain * 2
    x = lib.tensor(np.linspace(lo, hi, 6)[1:-1], dtype=lib.float64, requires_grad=True) * 1.0
    y = lib.tensor(np.linspace(hi2, lo2, 6)[1:-1], dtype=lib.float64, requires_grad=True) * 1.0
    out = getattr(lib, op.name)(x, 1.7 if number else y)
    {"x": x, "y": y, "out": out}[which].mul_(1.5)
    try:
        out.sum().backward()
        return "computes"
    except RuntimeError as e:
        return "raises" if "modified by an inplace operation" in str(e) else str(e)


@pytest.mark.parametrize("which", ["x", "y", "out", "x of x op number", "out of x op number"])
@pytest.mark.parametrize("name", [op.name for op in optable.OPS if op.arity == 2 and
                                  not op.internal and op.backward_of is None and not op.compare])
def test_a_binary_ops_operand_or_result_changed_in_place_as_pytorch(name, which):
    torch = pytest.importorskip("torch")
    op = next(op for op in optable.OPS if op.name == name)
    number = "number" in which
    if number and name in ("atan2", "maximum", "minimum"):
        pytest.skip("PyTorch takes no number there")
    which = which.split()[0]
    assert _changed_after_a_binary_op(tg, op, which, number) == \
        _changed_after_a_binary_op(torch, op, which, number)


RESULT_SAVING = {   # PyTorch's rules that save the op's result (and the ones that do not)
    "logsumexp": (lambda x: x.logsumexp(-1, keepdim=True), True),
    "softmax": (lambda x: x.softmax(-1), True),
    "log_softmax": (lambda x: x.log_softmax(-1), True),
    "amax": (lambda x: x.amax(-1, keepdim=True), True),
    "amin": (lambda x: x.amin(-1, keepdim=True), True),
    "max": (lambda x: x.max(), True),
    "min": (lambda x: x.min(), True),
    "prod": (lambda x: x.prod(), True),
    "norm": (lambda x: x.norm(), True),
    "std": (lambda x: x.std(), True),
    "cumprod": (lambda x: x.cumprod(0), True),
    "max(dim).values": (lambda x: x.max(dim=0).values, False),
    "sum": (lambda x: x.sum(-1, keepdim=True), False),
    "mean": (lambda x: x.mean(), False),
}


@pytest.mark.parametrize("name", RESULT_SAVING)
def test_an_array_ops_result_changed_in_place_before_the_backward(name):
    """PyTorch's rules that read the op's result raise once it changed in place (fuzzer
    seed 2: tapegrad computed with the value it had kept); the others compute."""
    torch = pytest.importorskip("torch")
    fn, raises = RESULT_SAVING[name]
    for lib in (tg, torch):
        x = lib.tensor([0.25, 0.5, 2.0], dtype=lib.float64, requires_grad=True)
        y = fn(x)
        y.sub_(1.5)
        if raises:
            with pytest.raises(RuntimeError, match="modified by an inplace operation"):
                y.sum().backward()
        else:
            y.sum().backward()
            assert x.grad is not None


# ops that index with an integer tensor or a mask: what their backward saves, as PyTorch's
# (IndexBackward0 and IndexSelectBackward0 save the index, GatherBackward0 and TakeBackward0
# the input too): changing a saved one in place makes the backward raise, changing one not
# saved does not.  name -> fn(m, x, index tensor)
INDEXING = {
    "getitem": (lambda m, x, i: x[i], [1, 0]),
    "getitem_mask": (lambda m, x, i: x[i], [True, False]),
    "getitem_tuple": (lambda m, x, i: x[i, 1:], [1, 0]),
    "getitem_list_column": (lambda m, x, i: x[:, i], [1, 0]),
    "index_select": (lambda m, x, i: x.index_select(0, i), [1, 0]),
    "take": (lambda m, x, i: m.take(x, i), [1, 0]),
    "gather": (lambda m, x, i: x.gather(0, i.reshape(1, 2)), [1, 0]),
    "take_along_dim": (lambda m, x, i: m.take_along_dim(x, i.reshape(2, 1), 1), [1, 0]),
    "setitem": (lambda m, x, i: _set(x * 1.0, i, x[0] * 2.0), [1, 0]),
    "index_add": (lambda m, x, i: (x * 1.0).index_add(0, i, x * 3.0), [1, 0]),
    "index_copy": (lambda m, x, i: (x * 1.0).index_copy(0, i, x * 3.0), [1, 0]),
    "index_put": (lambda m, x, i: (x * 1.0).index_put((i,), x[0] * 3.0), [1, 0]),
    "index_put_accumulate": (lambda m, x, i: (x * 1.0).index_put((i,), x * 3.0, accumulate=True),
                             [1, 0]),
    "scatter": (lambda m, x, i: (x * 1.0).scatter(0, i.reshape(1, 2), x[:1] * 3.0), [1, 0]),
    "scatter_add": (lambda m, x, i: (x * 1.0).scatter_add(0, i.reshape(1, 2), x[:1] * 3.0),
                    [1, 0]),
}


def _set(y, i, v):
    y[i] = v
    return y


def _index_backward(m, name, change):
    fn, index = INDEXING[name]
    x = m.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=m.float64, requires_grad=True)
    i = m.tensor(index)
    y = fn(m, x, i)
    if change == "input":
        x.detach().zero_()
    elif change == "index":
        i[0] = i[1]   # (an in-place change of the index tensor: [0, 0] or [False, False])
    try:
        (y * y).sum().backward()
    except RuntimeError as e:
        return type(e).__name__ + (": inplace" if "inplace" in str(e) else ": " + str(e))
    return x.grad.numpy().tolist()


@pytest.mark.parametrize("change", ["input", "index"])
@pytest.mark.parametrize("name", sorted(INDEXING))
def test_an_index_or_input_changed_in_place_after_indexing_as_pytorch(name, change):
    """(Fuzzer seed 29: x[i] raised when x changed; tapegrad's gradient read an index
    changed in place, where PyTorch raises.)"""
    torch = pytest.importorskip("torch")
    assert _index_backward(tg, name, change) == _index_backward(torch, name, change)
