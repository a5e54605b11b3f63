"""A backward with ``inputs=`` (``autograd.grad``, ``backward(inputs=...)``) runs, as PyTorch's
engine does, only the nodes that lead to an input, and the output's node when it is the only
output -- not a non-leaf input's own node, unless another input lies beyond it: what the other
nodes saved being freed or changed in place raises nothing, and the walk frees none of them. Each program is compared with PyTorch (skipped without it) and with its
value worked out by hand."""

import math

import numpy as np
import pytest

import tapegrad as tg

X0 = [0.5, -1.0, 2.0]
W0 = [1.0, 2.0, 3.0]
EXP_X = [math.exp(v) for v in X0]


def leaf(m, values):
    return m.tensor(values, dtype=m.float64, requires_grad=True)


def changed_branch_to_its_own_output(m, create_graph):
    """grad of v3.sum() in v3, while v2, saved by the exp behind v3, was zeroed"""
    x = leaf(m, X0)
    v2 = x.exp()
    v3 = v2.clone()
    v2.zero_()
    return m.autograd.grad(v3.sum(), [v3], create_graph=create_graph)


def changed_branch_beside_the_input(m, create_graph):
    x = leaf(m, X0)
    w = leaf(m, W0)
    v2 = x.exp()
    v3 = v2.clone()
    v2.zero_()
    return m.autograd.grad((v3 * w).sum(), [w], create_graph=create_graph)


def freed_branch_beside_the_input(m, create_graph):
    x = leaf(m, X0)
    w = leaf(m, W0)
    y = x.exp()
    c = (y * w).sum()
    y.sin().sum().backward()   # frees the exp's saved result
    return m.autograd.grad(c, [w], create_graph=create_graph)


def grad_in_one_input_leaves_the_rest_unfreed(m, create_graph):
    x = leaf(m, X0)
    w = leaf(m, W0)
    y = x.exp()
    c = (y * w).sum()
    gw, = m.autograd.grad(c, [w], create_graph=create_graph)
    y.sin().sum().backward()   # the exp did not run, so it was not freed
    return gw, x.grad


def backward_with_inputs_leaves_the_rest_unfreed(m, create_graph):
    x = leaf(m, X0)
    w = leaf(m, W0)
    y = x.exp()
    c = (y * w).sum()
    c.backward(inputs=[w], create_graph=create_graph)
    y.sin().sum().backward()
    return w.grad, x.grad


def changed_matmul_operand_beside_the_input(m, create_graph):
    x = m.tensor([[0.5, -1.0], [2.0, 1.0]], dtype=m.float64, requires_grad=True)
    w = m.tensor([1.0, 2.0], dtype=m.float64, requires_grad=True)
    y = x.exp()
    z = y @ y
    z2 = z.clone()
    y.zero_()
    return m.autograd.grad((z2 * w).sum(), [w], create_graph=create_graph)


def freed_large_branch_beside_the_input(m, create_graph):
    x = m.tensor(np.linspace(-1.0, 1.0, 50_000), requires_grad=True)
    w = m.tensor(np.ones(50_000), requires_grad=True)
    y = x.exp()
    c = (y * w).sum()
    y.sin().sum().backward()
    return m.autograd.grad(c, [w], create_graph=create_graph)


def changed_value_saved_by_a_nonleaf_inputs_node(m, create_graph):
    """the gradient of y is taken before y's node would run, so what it saved is not read"""
    x = leaf(m, X0)
    w = m.tensor(W0, dtype=m.float64)
    y = x * w
    w.zero_()
    return m.autograd.grad(y.sum(), [y, y], create_graph=create_graph)


def changed_value_saved_by_the_output_that_is_the_input(m, create_graph):
    x = leaf(m, X0)
    w = m.tensor(W0, dtype=m.float64)
    y = x * w
    w.zero_()
    return m.autograd.grad(y, [y], grad_outputs=m.ones(3, dtype=m.float64),
                           create_graph=create_graph)


def freed_nonleaf_inputs_node(m, create_graph):
    x = leaf(m, X0)
    y = x.exp()
    y.sum().backward()
    return m.autograd.grad(y.sum(), [y], create_graph=create_graph)


def nonleaf_input_of_two_outputs(m, create_graph):
    x = leaf(m, X0)
    w = m.tensor(W0, dtype=m.float64)
    y = x * w
    z = y * 2
    w.zero_()
    return m.autograd.grad([z.sum(), y.sum()], [y], create_graph=create_graph)


def nonleaf_inputs_node_is_not_freed(m, create_graph):
    x = leaf(m, X0)
    y = x.exp()
    gy, = m.autograd.grad(y.sum(), [y], create_graph=create_graph)
    y.sum().backward()   # through the exp, which the grad above did not run
    return gy, x.grad


def nonleaf_input_made_by_an_array_op(m, create_graph):
    x = m.tensor([[0.5, -1.0], [1.0, 2.0]], dtype=m.float64, requires_grad=True)
    y = x @ x
    with m.no_grad():
        x.mul_(2)
    return m.autograd.grad(y.sum(), [y], create_graph=create_graph)


def _ex():
    return np.exp(np.array([[0.5, -1.0], [2.0, 1.0]]))


RUNS = {   # program: what each gradient it returns is, worked out by hand
    changed_branch_to_its_own_output: [np.ones(3)],
    changed_branch_beside_the_input: [np.array(EXP_X)],
    freed_branch_beside_the_input: [np.array(EXP_X)],
    grad_in_one_input_leaves_the_rest_unfreed: [np.array(EXP_X),
                                                np.cos(EXP_X) * np.array(EXP_X)],
    backward_with_inputs_leaves_the_rest_unfreed: [np.array(EXP_X),
                                                   np.cos(EXP_X) * np.array(EXP_X)],
    changed_matmul_operand_beside_the_input: [(_ex() @ _ex()).sum(axis=0)],
    freed_large_branch_beside_the_input: [np.exp(np.linspace(-1.0, 1.0, 50_000))],
    changed_value_saved_by_a_nonleaf_inputs_node: [np.ones(3), np.ones(3)],
    changed_value_saved_by_the_output_that_is_the_input: [np.ones(3)],
    freed_nonleaf_inputs_node: [np.ones(3)],
    nonleaf_input_of_two_outputs: [np.full(3, 3.0)],
    nonleaf_inputs_node_is_not_freed: [np.ones(3), np.array(EXP_X)],
    nonleaf_input_made_by_an_array_op: [np.ones((2, 2))],
}


def _arrays(grads):
    return [np.asarray(g.detach().numpy(), dtype=np.float64) for g in grads]


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("program", list(RUNS), ids=lambda f: f.__name__)
def test_nodes_that_lead_to_no_input_are_not_run(program, create_graph):
    got = _arrays(program(tg, create_graph))
    for g, want in zip(got, RUNS[program], strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-12)


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("program", list(RUNS), ids=lambda f: f.__name__)
def test_nodes_that_lead_to_no_input_are_not_run_as_pytorch(program, create_graph):
    torch = pytest.importorskip("torch")
    for g, want in zip(_arrays(program(tg, create_graph)),
                       _arrays(program(torch, create_graph)), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-12)


def changed_value_saved_by_the_output_node(m):
    x = leaf(m, X0)
    w = leaf(m, W0)
    a = x * 2
    z = a * w   # the output's own node runs, and it saved a
    a.add_(1)
    return m.autograd.grad(z.sum(), [w])


def changed_value_between_output_and_input(m):
    x = leaf(m, X0)
    v2 = x.exp()
    v3 = v2.clone()
    v2.zero_()
    return m.autograd.grad(v3.sum(), [x])


def freed_value_between_output_and_input(m):
    x = leaf(m, X0)
    w = leaf(m, W0)
    y = x.exp()
    c = (y * w).sum()
    y.sin().sum().backward()
    return m.autograd.grad(c, [x])


def changed_value_saved_by_a_nonleaf_input_another_lies_beyond(m):
    x = leaf(m, X0)
    w = m.tensor(W0, dtype=m.float64)
    y = x * w
    w.zero_()
    return m.autograd.grad(y.sum(), [y, x])   # y's node runs: x lies beyond it


RAISES = {
    changed_value_saved_by_the_output_node: "modified by an inplace operation",
    changed_value_between_output_and_input: "modified by an inplace operation",
    freed_value_between_output_and_input: "backward through the graph a second time",
    changed_value_saved_by_a_nonleaf_input_another_lies_beyond: "modified by an inplace",
}


@pytest.mark.parametrize("program", list(RAISES), ids=lambda f: f.__name__)
def test_nodes_that_run_still_check_what_they_saved(program):
    with pytest.raises(RuntimeError, match=RAISES[program]):
        program(tg)
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match=RAISES[program]):
        program(torch)
