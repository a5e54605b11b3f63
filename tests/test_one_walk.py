"""One reverse walk: what the float walk of ``backward()`` computes, the recorded walk of
``create_graph=True`` computes too (hooks, links between tapes, custom Functions), and the
recorded gradient can be differentiated again.  The semantic tests of test_semantics.py and
test_seeds.py also run in both modes (the ``both_walks`` fixture)."""
import math

import numpy as np
import pytest

import tapegrad as tg

MODES = [False, True]


def grad_of(fn, x0, create_graph):
    x = tg.tensor(x0, requires_grad=True)
    (g,) = tg.autograd.grad(fn(x), x, create_graph=create_graph)
    return np.asarray(g.detach()._value, dtype=float)


@pytest.mark.parametrize("create_graph", MODES)
def test_hook_on_intermediate_applies_in_both_walks(create_graph):
    # the example: y = x*x with a hook zeroing its gradient; (y * 2) at x = 3
    def fn(x):
        y = x * x
        y.register_hook(lambda g: g * 0)
        return y * 2
    assert grad_of(fn, 3.0, create_graph) == 0.0


@pytest.mark.parametrize("create_graph", MODES)
def test_hook_scaling_gradient_is_differentiated_through(create_graph):
    def fn(x):
        y = x.sin()
        y.register_hook(lambda g: g * 3)
        return y * 2
    assert math.isclose(grad_of(fn, 0.4, create_graph), 6 * math.cos(0.4))


class Cube(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2


@pytest.mark.parametrize("create_graph", MODES)
def test_custom_function_in_both_walks(create_graph):
    assert math.isclose(grad_of(lambda x: Cube.apply(x).sin(), 0.7, create_graph),
                        math.cos(0.7 ** 3) * 3 * 0.7 ** 2)


def test_custom_function_double_backward_records_its_backward():
    x = tg.tensor(2.0, requires_grad=True)
    (g,) = tg.autograd.grad(Cube.apply(x), x, create_graph=True)
    (h,) = tg.autograd.grad(g, x)
    assert g.item() == 12.0 and h.item() == 12.0     # 3x^2 and 6x at x = 2


@pytest.mark.parametrize("create_graph", MODES)
def test_links_between_tapes_in_both_walks(create_graph):
    x = tg.tensor(2.0, requires_grad=True)
    with tg.Tape():
        y = x.sin()
    with tg.Tape():
        z = y * y
    (g,) = tg.autograd.grad(z, x, create_graph=create_graph)
    assert math.isclose(float(g), math.sin(4.0))      # d sin^2 x = sin 2x


def test_second_derivative_through_a_link():
    x = tg.tensor(2.0, requires_grad=True)
    with tg.Tape():
        y = x.sin()
    with tg.Tape():
        z = y * y
    (g,) = tg.autograd.grad(z, x, create_graph=True)
    (h,) = tg.autograd.grad(g, x)
    assert math.isclose(float(h), 2 * math.cos(4.0))


@pytest.mark.parametrize("create_graph", MODES)
def test_freed_graph_raises_in_both_walks(create_graph):
    x = tg.tensor(2.0, requires_grad=True)
    y = (x * x).exp()
    y.backward(create_graph=create_graph, retain_graph=False)
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward(create_graph=create_graph)


@pytest.mark.parametrize("create_graph", MODES)
def test_inplace_change_of_saved_value_raises_in_both_walks(create_graph):
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    c = b.sin()          # saves b
    b.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        c.sum().backward(create_graph=create_graph)


def test_retain_grad_and_leaf_hook_see_recorded_gradients():
    x = tg.tensor(1.5, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g) or g * 2)
    y = x * x
    y.retain_grad()
    (y * 3).backward(create_graph=True)
    assert float(y.grad) == 3.0
    assert float(x.grad) == 2 * 3 * 2 * 1.5
    assert seen and seen[0].requires_grad     # the hook saw a recorded gradient
    (h,) = tg.autograd.grad(x.grad, x)        # d/dx (2 * 6x) = 12, then x's hook doubles it
    assert float(h) == 24.0                   # (as PyTorch 2.13 gives)
