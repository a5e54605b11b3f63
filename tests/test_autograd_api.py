"""The autograd API a PyTorch program types, against PyTorch 2.13: ``tg.autograd.graph``
(``Node`` hooks and metadata, ``saved_tensors_hooks``, ``allow_mutation_on_saved_tensors``,
``register_multi_grad_hook``), custom ``Function`` (``setup_context``, ``once_differentiable``,
``mark_dirty``, ``mark_non_differentiable``, ``set_materialize_grads``, trailing ``None``s,
``.numpy()`` in ``forward``, double backward), ``grad_fn._saved_*``, ``gradgradcheck``,
``Variable``, ``register_post_accumulate_grad_hook``.

Each program takes the library as ``L`` and returns plain values (lists, strings, event
logs); a test runs it under tapegrad with written-out expectations and, where PyTorch is
installed, compares with PyTorch's results.
"""
import gc
import math
import weakref

import numpy as np
import pytest

import tapegrad as tg

try:
    import torch
except ImportError:   # the torch-free assertions still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def val(t):
    """A tensor as nested Python floats (None stays None)."""
    if t is None:
        return None
    return np.asarray(t.detach().numpy(), dtype=np.float64).round(10).tolist()


def same(a, b):
    """Results of one program under both libraries: equal, floats to 1e-9."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and isinstance(b, float):
        return a == b or abs(a - b) <= 1e-9 * max(1.0, abs(a)) or (math.isnan(a) and math.isnan(b))
    return a == b


def compare(program):
    """Run ``program`` under tapegrad and (if installed) PyTorch; return tapegrad's result."""
    mine = program(tg)
    if torch is not None:
        theirs = program(torch)
        assert same(mine, theirs), f"tapegrad: {mine}\nPyTorch:  {theirs}"
    return mine


def leaf(L, v):
    return L.tensor(v, dtype=L.float64, requires_grad=True)


# ---------------------------------------------------------------------------------------
# tg.autograd.graph.Node: name, next_functions, metadata, hooks
# ---------------------------------------------------------------------------------------

def node_hooks_elementwise(L):
    log = []
    x = leaf(L, [1.0, 2.0, 3.0])
    w = leaf(L, [[0.5, -1.0, 2.0], [1.0, 1.0, 1.0]])
    y = x.sin() * w                      # x is broadcast: its grad_input has x's shape
    z = y.exp().sum()
    fn = y.grad_fn
    log.append([fn.name(), isinstance(fn, L.autograd.graph.Node)])
    fn.metadata["tag"] = 7
    log.append(y.grad_fn.metadata["tag"])

    def pre(grad_outputs):
        log.append(["pre", [list(g.shape) for g in grad_outputs]])
        return (grad_outputs[0] * 2,)

    def post(grad_inputs, grad_outputs):
        log.append(["post", [None if g is None else list(g.shape) for g in grad_inputs],
                    [val(g) for g in grad_inputs]])

    h1 = fn.register_prehook(pre)
    h2 = fn.register_hook(post)
    z.backward(retain_graph=True)
    log.append([val(x.grad), val(w.grad)])
    h1.remove()
    x.grad = w.grad = None
    h3 = fn.register_hook(lambda gi, go: (gi[0] * 0, gi[1]))   # replaces grad_inputs
    z.backward(retain_graph=True)
    log.append([val(x.grad), val(w.grad)])
    h2.remove()
    h3.remove()
    x.grad = w.grad = None
    z.backward()
    log.append([val(x.grad), val(w.grad)])
    return log


def test_node_hooks_on_an_elementwise_node():
    log = compare(node_hooks_elementwise)
    assert log[0] == ["MulBackward0", True] and log[1] == 7
    assert log[2] == ["pre", [[2, 3]]]
    assert log[3][:2] == ["post", [[3], [2, 3]]]
    assert log[6][0] == [0.0, 0.0, 0.0]          # the hook's replacement reached x


@pytest.mark.usefixtures("both_walks")
def test_node_hooks_in_both_walks():
    log = node_hooks_elementwise(tg)
    x = np.array([1.0, 2.0, 3.0])
    w = np.array([[0.5, -1.0, 2.0], [1.0, 1.0, 1.0]])
    e = np.exp(np.sin(x) * w)
    gx = (e * w).sum(0) * np.cos(x)
    assert np.allclose(log[4][0], 2 * gx) and np.allclose(log[7][0], gx)
    assert np.allclose(log[7][1], e * np.sin(x))
    assert log[6][0] == [0.0, 0.0, 0.0] and np.allclose(log[6][1], log[7][1])


def node_hooks_python_ops(L):
    log = []
    a = leaf(L, [[1.0, 2.0], [3.0, 4.0]])
    b = a @ a
    s = b.sum()
    s.grad_fn.register_prehook(lambda go: log.append(["sum pre", [val(g) for g in go]]))
    b.grad_fn.register_hook(lambda gi, go: log.append(["mm post", [val(g) for g in gi],
                                                        [val(g) for g in go]]))
    s.backward()
    log.append(val(a.grad))
    return log


@pytest.mark.usefixtures("both_walks")
def test_node_hooks_on_array_op_nodes():
    log = compare(node_hooks_python_ops)
    assert log[0] == ["sum pre", [1.0]]
    assert log[-1] == [[7.0, 11.0], [9.0, 13.0]]


def accumulate_grad_hooks(L):
    log = []
    p = leaf(L, [1.0, 2.0])
    q = p * 3
    acc = q.grad_fn.next_functions[0][0]
    acc.register_prehook(lambda go: log.append(["acc pre", [val(g) for g in go]]))
    acc.register_hook(lambda gi, go: log.append(["acc post", list(gi), [val(g) for g in go]]))
    p.register_post_accumulate_grad_hook(lambda t: log.append(["post accumulate", val(t.grad)]))
    q.sum().backward()
    q = p * 3
    L.autograd.grad(q.sum(), p)      # autograd.grad accumulates nothing: no AccumulateGrad hooks
    log.append(val(p.grad))
    return log


@pytest.mark.usefixtures("both_walks")
def test_accumulate_grad_node_hooks_and_post_accumulate_grad_hook():
    log = compare(accumulate_grad_hooks)
    assert log == [["acc pre", [[3.0, 3.0]]], ["post accumulate", [3.0, 3.0]],
                   ["acc post", [], [[3.0, 3.0]]], [3.0, 3.0]]


def post_accumulate_errors(L):
    out = []
    for t in (leaf(L, [1.0]) * 2, L.tensor([1.0])):
        try:
            t.register_post_accumulate_grad_hook(lambda p: None)
        except RuntimeError as e:
            out.append(str(e))
    return out


def test_post_accumulate_grad_hook_errors():
    assert compare(post_accumulate_errors) == [
        "post accumulate grad hooks cannot be registered on non-leaf tensors",
        "cannot register a hook on a tensor that doesn't require gradient"]


def test_post_accumulate_grad_hook_as_an_optimizer_step():
    # the pattern of PyTorch's "optimizer step in backward" tutorial
    p = tg.tensor([1.0, 2.0], requires_grad=True)

    def step(t):
        with tg.no_grad():
            t.sub_(0.5 * t.grad)
        t.grad = None

    h = p.register_post_accumulate_grad_hook(step)
    (p * p).sum().backward()
    assert p.tolist() == [0.0, 0.0] and p.grad is None
    h.remove()
    (p + 1).sum().backward()
    assert p.grad.tolist() == [1.0, 1.0]


# ---------------------------------------------------------------------------------------
# saved tensors: grad_fn._saved_*, saved_tensors_hooks, allow_mutation_on_saved_tensors
# ---------------------------------------------------------------------------------------

def saved_values(L):
    x = leaf(L, [1.0, 2.0])
    c = L.tensor([3.0, 4.0])
    out = []
    for y in (x * c, c * x, x / c, c / x, x ** 2, x ** c, x.exp(), x.sin(), x.tanh(),
              L.atan2(x, c),
              x.sqrt(), x.sigmoid(), x.clamp(0.0, 1.5), L.where(x > 1, x, c)):
        fn = y.grad_fn
        for name in ("_saved_self", "_saved_other", "_saved_result", "_saved_exponent",
                     "_saved_condition"):
            if name in dir(fn):
                v = getattr(fn, name)
                out.append([fn.name(), name, v if not hasattr(v, "shape") else
                            [val(v), v.requires_grad]])
    return out


def test_saved_values_of_common_nodes():
    out = compare(saved_values)
    assert ["MulBackward0", "_saved_self", None] in out
    assert ["MulBackward0", "_saved_other", [[3.0, 4.0], False]] in out
    assert ["ExpBackward0", "_saved_result", [val(tg.exp(tg.tensor([1.0, 2.0]))), True]] in out


def test_saved_values_identity_and_errors():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    assert y.grad_fn._saved_result is not y and tg.equal(y.grad_fn._saved_result, y)
    assert x.sin().grad_fn._saved_self is x      # a saved leaf is the leaf itself
    assert y.grad_fn._saved_result.grad_fn == y.grad_fn
    with pytest.raises(AttributeError, match="not writable"):
        y.grad_fn._saved_result = x
    with pytest.raises(AttributeError):
        y.grad_fn._saved_nothing
    y.sum().backward()
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.grad_fn._saved_result


@needs_torch
def test_saved_values_freed_error_as_pytorch():
    msgs = []
    for L in (tg, torch):
        x = leaf(L, [1.0, 2.0])
        y = x.exp()
        y.sum().backward()
        with pytest.raises(RuntimeError) as e:
            y.grad_fn._saved_result
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def saved_tensors_hooks_program(L):
    log = []

    def pack(x):
        log.append(["pack", val(x), x.requires_grad])
        return x

    def unpack(x):
        log.append(["unpack", val(x)])
        return x

    a = L.ones(3, requires_grad=True)
    b = L.ones(3, requires_grad=True) * 2
    with L.autograd.graph.saved_tensors_hooks(pack, unpack):
        y = a * b
    y.sum().backward()
    log.append(val(a.grad))
    x = leaf(L, [1.0, 2.0, 3.0])
    with L.autograd.graph.saved_tensors_hooks(lambda t: t * 4, lambda t: t / 4):
        y = L.pow(x, 2)
    y.sum().backward()
    log.append(val(x.grad))
    x.grad = None
    with L.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t + 1):   # changes it
        y = x.sin()
    y.sum().backward()
    log.append(val(x.grad))
    store = []

    def to_store(t):
        store.append(t.detach().clone())
        return len(store) - 1

    x.grad = None
    with L.autograd.graph.saved_tensors_hooks(to_store, lambda k: store[k]):
        y = (x.exp() * x).sum()
        y.backward()                 # a backward inside the block
    log.append([val(x.grad), len(store)])
    with L.autograd.graph.save_on_cpu():
        y = (x * x).sum()
    x.grad = None
    y.backward()
    log.append(val(x.grad))
    return log


def test_saved_tensors_hooks():   # (a create_graph backward inside the block packs what it records)
    log = compare(saved_tensors_hooks_program)
    assert log[:4] == [["pack", [2.0, 2.0, 2.0], True], ["pack", [1.0, 1.0, 1.0], True],
                       ["unpack", [2.0, 2.0, 2.0]], ["unpack", [1.0, 1.0, 1.0]]]
    assert log[4] == [2.0, 2.0, 2.0]
    assert log[5] == [2.0, 4.0, 6.0]
    assert np.allclose(log[6], np.cos(np.array([1.0, 2.0, 3.0]) + 1))
    assert log[7][1] == 3                   # exp saves its result, mul both operands
    assert log[8] == [2.0, 4.0, 6.0]


@pytest.mark.usefixtures("both_walks")
def test_saved_tensors_hooks_in_both_walks():
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with tg.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t + 1):
        y = x.sin() * 2
    y.sum().backward()
    assert np.allclose(x.grad.tolist(), 2 * np.cos(np.array([2.0, 3.0, 4.0])))


def saved_hooks_function(L):
    log = []

    class Double(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            log.append(["saved", val(x)])
            return g * 2

    x = leaf(L, [1.0, 2.0])
    with L.autograd.graph.saved_tensors_hooks(lambda t: log.append(["pack", val(t)]) or t,
                                              lambda t: log.append(["unpack", val(t)]) or t):
        y = Double.apply(x)
    y.sum().backward()
    log.append(val(x.grad))
    return log


def test_saved_tensors_hooks_on_a_custom_function():
    assert compare(saved_hooks_function) == [["pack", [1.0, 2.0]], ["unpack", [1.0, 2.0]],
                                             ["saved", [1.0, 2.0]], [2.0, 2.0]]


def raw_saved_and_pack_timing(L):
    log = []
    x = leaf(L, [1.0, 2.0])
    y = x.pow(2)
    raw = y.grad_fn._raw_saved_self
    raw.register_hooks(lambda t: log.append(["pack", val(t), t.requires_grad]) or t * 1,
                       lambda t: log.append(["unpack", val(t)]) or t)
    try:
        raw.register_hooks(lambda t: t, lambda t: t)
    except RuntimeError as e:
        log.append(str(e))
    y.sum().backward()
    log.append(val(x.grad))
    try:
        y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)
    except RuntimeError as e:
        log.append(str(e)[:60])
    store = []
    x.grad = None
    with L.autograd.graph.saved_tensors_hooks(lambda t: store.append(t) or len(store) - 1,
                                              lambda k: store[k]):
        y = x.pow(2)
        log.append(len(store))     # packed inside the op, as PyTorch
        z = y.exp()
        log.append(len(store))
        with L.autograd.graph.saved_tensors_hooks(lambda t: log.append("inner") or t,
                                                  lambda t: t):
            w = z * x
        log.append(len(store))
        v = w.sin()
        log.append(len(store))
    v.sum().backward()
    log.append(val(x.grad))
    return log


@pytest.mark.usefixtures("both_walks")
def test_raw_saved_tensor_hooks_and_when_packing_happens():
    log = compare(raw_saved_and_pack_timing)
    assert log[0] == ["pack", [1.0, 2.0], False] and log[2] == ["unpack", [1.0, 2.0]]
    assert log[1].startswith("Calling register_hooks on a saved tensor whose hooks have")
    assert log[3] == [2.0, 4.0]
    assert log[4] == "Calling register_hooks on a saved tensor after it has been f"
    assert log[5:11] == [1, 2, "inner", "inner", 2, 3]


def test_disable_saved_tensors_hooks():
    with tg.autograd.graph.disable_saved_tensors_hooks("no hooks here"):
        with pytest.raises(RuntimeError, match="no hooks here"):
            with tg.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    with tg.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        pass


def mutation_on_saved(L):
    with L.autograd.graph.allow_mutation_on_saved_tensors():
        a = L.ones(2, 3, dtype=L.float64, requires_grad=True)
        b = a.clone()
        out = (b ** 2).sum()
        b.sin_()
        out.sum().backward()
    return [val(a.grad), val(b)]


def mutation_not_allowed(L):
    a = L.ones(2, 3, requires_grad=True)
    b = a.clone()
    out = (b ** 2).sum()
    b.sin_()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()
    return True


def test_allow_mutation_on_saved_tensors():
    grad, b = compare(mutation_on_saved)
    assert grad == [[2.0] * 3] * 2 and np.allclose(b, math.sin(1.0))
    assert compare(mutation_not_allowed)


# Changes that record nothing inside allow_mutation_on_saved_tensors: PyTorch clones what
# saved the tensor first, so a backward computes with the value it had when saved.  Each
# program: (its gradients as tapegrad computes them, written out: the old values').
def _leaf_lse_no_grad(L):
    a = leaf(L, [1.0, 2.0])
    out = a.logsumexp(0)
    with L.no_grad():
        a.add_(1.0)
    out.backward()
    return a.grad


def _leaf_before_and_after(L):   # (ops after the change read the new value)
    a = leaf(L, [1.0, 2.0])
    before = (a * a).sum()
    with L.no_grad():
        a.add_(1.0)
    after = (a * a * a).sum()
    (before + after).backward()
    return a.grad


def _leaf_broadcast_saved(L):   # (a broadcast view of the leaf was saved)
    a = leaf(L, [[1.0, 2.0], [3.0, 4.0]])
    before = (a * L.tensor([1.0, 2.0], dtype=L.float64)).sum() + (a * a).sum()
    with L.no_grad():
        a.sub_(L.tensor([1.0, 0.0], dtype=L.float64))
    before.backward()
    return a.grad


def _leaf_through_detach(L):
    a = leaf(L, [1.0, 2.0])
    out = (a * a).sum()
    a.detach().mul_(2.0)
    out.backward()
    return a.grad


def _leaf_through_detach_recorded(L):   # (the change records onto the detached tensor)
    a = leaf(L, [1.0, 2.0])
    w = leaf(L, 2.0)
    out = (a * a).sum()
    d = a.detach()
    d.mul_(w)
    out.backward()
    return a.grad


def _leaf_through_data(L):   # (outside the block .data goes unnoticed: the new value)
    a = leaf(L, [1.0, 2.0])
    out = (a * a).sum()
    a.data.mul_(2.0)
    out.backward()
    return a.grad


def _constant_changed(L):
    k = L.tensor([1.0, 2.0], dtype=L.float64)
    a = leaf(L, [1.0, 2.0])
    out = (a * k * k).sum()
    k.mul_(5.0)
    out.backward()
    return a.grad


def _leaf_norm_clamp(L):
    a = leaf(L, [1.0, 2.0, 3.0])
    out = a.norm()
    with L.no_grad():
        a.clamp_(max=1.5)
    out.backward()
    return a.grad


CHANGES_KEEPING_SAVED = {
    "leaf, logsumexp, no_grad add_": (_leaf_lse_no_grad, [0.2689414214, 0.7310585786]),
    "leaf, ops before and after": (_leaf_before_and_after, [14.0, 31.0]),
    "leaf, broadcast saved": (_leaf_broadcast_saved, [[3.0, 6.0], [7.0, 10.0]]),
    "leaf, through detach()": (_leaf_through_detach, [2.0, 4.0]),
    "leaf, through detach(), recorded": (_leaf_through_detach_recorded, [2.0, 4.0]),
    "leaf, through .data": (_leaf_through_data, [2.0, 4.0]),
    "constant tensor": (_constant_changed, [1.0, 4.0]),
    "leaf, norm, no_grad clamp_": (_leaf_norm_clamp, [0.2672612419, 0.5345224838, 0.8017837257]),
}


@pytest.mark.parametrize("name", CHANGES_KEEPING_SAVED)
def test_allow_mutation_keeps_what_was_saved_from_unrecorded_changes(name):
    program, expected = CHANGES_KEEPING_SAVED[name]

    def inside(L):
        with L.autograd.graph.allow_mutation_on_saved_tensors():
            return val(program(L))

    assert compare(inside) == expected


def _non_leaf_no_grad(L):
    a = leaf(L, [1.0, 2.0])
    y = a * 2.0
    out = (y ** 2).sum()
    with L.no_grad():
        y.mul_(3.0)
    out.backward()
    return a.grad


def test_allow_mutation_non_leaf_changed_where_nothing_records_raises():
    # deviation (README): PyTorch computes with the old value ([8, 16]); tapegrad's entry
    # for y holds one value, the new one, for the ops after the change, so it refuses
    with tg.autograd.graph.allow_mutation_on_saved_tensors():
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            _non_leaf_no_grad(tg)
    if torch is not None:
        with torch.autograd.graph.allow_mutation_on_saved_tensors():
            assert val(_non_leaf_no_grad(torch)) == [8.0, 16.0]


def _leaf_setitem(L):
    a = leaf(L, [[1.0, 2.0], [3.0, 4.0]])
    out = (a * a).sum()
    with L.no_grad():
        a[0, 1] = 7.0
    out.backward()
    return a.grad


def test_allow_mutation_change_through_a_view_raises():
    # deviation (README): PyTorch clones the view written, and its backward then reads the
    # new value here ([[2, 14], [6, 8]]); tapegrad refuses, as outside the block
    with tg.autograd.graph.allow_mutation_on_saved_tensors():
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            _leaf_setitem(tg)
    if torch is not None:
        with torch.autograd.graph.allow_mutation_on_saved_tensors():
            assert val(_leaf_setitem(torch)) == [[2.0, 14.0], [6.0, 8.0]]


def test_outside_allow_mutation_unrecorded_changes_still_raise_or_go_unnoticed():
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _leaf_lse_no_grad(tg)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _leaf_through_detach_recorded(tg)
    assert val(_leaf_through_data(tg)) == [4.0, 8.0]   # (PyTorch's .data: unnoticed)
    if torch is not None:
        assert val(_leaf_through_data(torch)) == [4.0, 8.0]


def increment_version_program(L):
    x = leaf(L, [1.0, 2.0])
    y = x * 1
    z = y * y
    w = y + 1                      # add saves nothing: still fine
    L.autograd.graph.increment_version(y)
    w.sum().backward()
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.sum().backward()
    return val(x.grad)


def test_increment_version_makes_a_saved_tensor_stale():
    assert compare(increment_version_program) == [1.0, 1.0]


# ---------------------------------------------------------------------------------------
# register_multi_grad_hook, queue_callback
# ---------------------------------------------------------------------------------------

def multi_grad_hook(L):
    log = []
    a, b = leaf(L, 1.0), leaf(L, 2.0)
    h = L.autograd.graph.register_multi_grad_hook(
        (a, b), lambda gs: log.append(["all", [val(g) for g in gs]]))
    (a * 3).backward()
    (a * b).backward()
    h.remove()
    (a * b).backward()
    L.autograd.graph.register_multi_grad_hook((a, b), lambda g: log.append(["any", val(g)]),
                                              mode="any")
    (a * b).backward()
    (a * b).backward()
    c = a * 1
    L.autograd.graph.register_multi_grad_hook((a, c), lambda gs: log.append(
        ["non-leaf", [val(g) for g in gs]]))
    (c * 5).backward()
    return log


@pytest.mark.usefixtures("both_walks")
def test_register_multi_grad_hook():
    log = compare(multi_grad_hook)
    assert log[:2] == [["all", [3.0, None]], ["all", [2.0, 1.0]]]
    assert log[2:4] == [["any", 2.0], ["any", 2.0]] or len(log[2:4]) == 2
    assert log[-1] == ["non-leaf", [5.0, 5.0]]


def test_queue_callback_runs_after_backward():
    log = []
    x = tg.tensor(2.0, requires_grad=True)
    x.register_hook(lambda g: tg.autograd.Variable._execution_engine.queue_callback(
        lambda: log.append(x.grad.item())))
    (x * 3).backward()
    assert log == [3.0]


# ---------------------------------------------------------------------------------------
# custom Function
# ---------------------------------------------------------------------------------------

def setup_context_program(L):
    class Scale(L.autograd.Function):
        @staticmethod
        def forward(x, k=2.0):
            return x * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, k = inputs
            ctx.k = k
            ctx.save_for_backward(x, output)

        @staticmethod
        def backward(ctx, g):
            x, out = ctx.saved_tensors
            return g * ctx.k, None

    x = leaf(L, [1.0, 2.0])
    y = Scale.apply(x)
    z = Scale.apply(x, k=3.0)
    (y + z).sum().backward()
    return [val(y), val(z), y.grad_fn.name(), val(x.grad)]


def test_setup_context_and_ctx_less_forward():
    assert compare(setup_context_program) == [[2.0, 4.0], [3.0, 6.0], "ScaleBackward", [5.0, 5.0]]


def once_differentiable_program(L):
    class Cube(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        @L.autograd.function.once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = leaf(L, [1.0, 2.0])
    y = Cube.apply(x)
    y.sum().backward()
    out = [val(x.grad)]
    y = Cube.apply(x)
    (g,) = L.autograd.grad((y * y).sum(), x, create_graph=True)
    out.append([val(g), g.requires_grad])
    with pytest.raises(RuntimeError) as e:
        g.sum().backward()
    out.append(str(e.value))
    return out


def test_once_differentiable():
    out = compare(once_differentiable_program)
    assert out[0] == [3.0, 12.0] and out[1] == [[6.0, 192.0], True]
    assert out[2] == ("trying to differentiate twice a function that was marked with "
                      "@once_differentiable")


def ctx_marks_program(L):
    log = []

    class AddOne(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    x = leaf(L, [1.0, 2.0])
    y = x * 1
    z = AddOne.apply(y)
    log.append([z is y, val(y), y.grad_fn.name()])
    (z * z).sum().backward()
    log.append(val(x.grad))
    try:
        AddOne.apply(x)
    except RuntimeError as e:
        log.append(str(e))

    class ArgMax(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax()
            ctx.mark_non_differentiable(idx)
            return x * 2, idx, x * 3

        @staticmethod
        def backward(ctx, ga, gi, gc):
            log.append(["grads", val(ga), val(gi), val(gc), list(ctx.needs_input_grad)])
            return ga * 2 + gc * 3

    x = leaf(L, [1.0, 5.0, 2.0])
    a, i, c = ArgMax.apply(x)
    log.append([i.requires_grad, i.grad_fn is None, i.item()])
    a.sum().backward()
    log.append(val(x.grad))

    class Lazy(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            log.append(["lazy", val(ga), gb])
            return ga * 2

    x = leaf(L, [1.0, 2.0])
    a, b = Lazy.apply(x)
    a.sum().backward()
    log.append(val(x.grad))
    return log


@pytest.mark.usefixtures("both_walks")
def test_mark_dirty_mark_non_differentiable_set_materialize_grads():
    log = compare(ctx_marks_program)
    assert log[0] == [True, [2.0, 3.0], "AddOneBackward"]
    assert log[1] == [4.0, 6.0]
    assert log[2] == "a leaf Variable that requires grad has been used in an in-place operation."
    assert log[3] == [False, True, 1.0]
    assert log[4] == ["grads", [1.0, 1.0, 1.0], 0.0, [0.0, 0.0, 0.0], [True]]
    assert log[6] == ["lazy", [1.0, 1.0], None]


def gradients_returned_program(L):
    out = []

    class Trailing(L.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * 2, None, None, None      # extra trailing Nones: accepted

    x = leaf(L, [1.0, 2.0])
    Trailing.apply(x, 2).sum().backward()
    out.append(val(x.grad))

    class TooMany(Trailing):
        @staticmethod
        def backward(ctx, g):
            return g, None, g

    class NotATensor(Trailing):
        @staticmethod
        def backward(ctx, g):
            return g, g

    class Broadcast(Trailing):
        @staticmethod
        def backward(ctx, g):
            return L.ones(3, 2), None           # summed to the input's shape

    for cls in (TooMany, NotATensor, Broadcast):
        x.grad = None
        try:
            cls.apply(x, 2).sum().backward()
            out.append(val(x.grad))
        except RuntimeError as e:
            out.append(str(e))
    return out


@pytest.mark.usefixtures("both_walks")
def test_gradients_a_backward_returns():
    out = compare(gradients_returned_program)
    assert out[0] == [2.0, 2.0]
    assert out[1] == "function TooManyBackward returned an incorrect number of gradients " \
                     "(expected 2, got 3)"
    assert out[2] == ("function NotATensorBackward returned a gradient different than None at "
                      "position 2, but the corresponding forward input was not a Variable")
    assert out[3] == [3.0, 3.0]


def numpy_in_forward_program(L):
    class NpSin(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return L.tensor(np.sin(x.numpy()))      # grad mode is off in forward

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * L.tensor(np.cos(x.detach().numpy()))

    x = leaf(L, [0.5, 1.0])
    NpSin.apply(x).sum().backward()
    with L.no_grad():
        n = x.numpy().tolist()
    return [val(x.grad), n]


def test_numpy_inside_forward():
    out = compare(numpy_in_forward_program)
    assert np.allclose(out[0], np.cos([0.5, 1.0])) and out[1] == [0.5, 1.0]
    with pytest.raises(RuntimeError, match="Can't call numpy"):
        tg.tensor([1.0], requires_grad=True).numpy()


def double_backward_program(L):
    class Square(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    x = leaf(L, [1.0, 3.0])
    y = Square.apply(x).sin().sum()
    (g,) = L.autograd.grad(y, x, create_graph=True)
    g.sum().backward()
    return [val(g), val(x.grad), g.grad_fn is not None]


@pytest.mark.usefixtures("both_walks")
def test_double_backward_through_a_function():
    g, gg, has = double_backward_program(tg)
    x = np.array([1.0, 3.0])
    assert np.allclose(g, 2 * x * np.cos(x * x)) and has
    assert np.allclose(gg, 2 * np.cos(x * x) - 4 * x * x * np.sin(x * x))
    if torch is not None:
        assert same([g, gg, has], double_backward_program(torch))


def test_custom_function_node_is_its_ctx():
    class Keep(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.scale = 3.0
            ctx.save_for_backward(x)
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * ctx.scale

    x = tg.tensor([1.0], requires_grad=True)
    y = Keep.apply(x)
    assert y.grad_fn.scale == 3.0 and y.grad_fn.saved_tensors[0] is x
    assert y.grad_fn.needs_input_grad == (True,)


def test_function_gradcheck_against_central_differences():
    class Cube(tg.autograd.Function):
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x * x * g

    x = tg.tensor([0.3, -1.2, 2.0], requires_grad=True)
    assert tg.autograd.gradcheck(Cube.apply, (x,))
    assert tg.autograd.gradgradcheck(Cube.apply, (x,))


# ---------------------------------------------------------------------------------------
# gradgradcheck, Variable
# ---------------------------------------------------------------------------------------

def test_gradgradcheck():
    x = tg.tensor([0.5, 1.5], requires_grad=True)
    y = tg.tensor([[1.0, -2.0], [0.3, 0.7]], requires_grad=True)
    assert tg.autograd.gradgradcheck(lambda a, b: (a.sin() * b).exp().sum(dim=0), (x, y))

    class WrongSecond(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 3 * x.detach() * x * g       # second derivative misses a term

    with pytest.raises(tg.autograd.GradcheckError):
        tg.autograd.gradgradcheck(WrongSecond.apply, (x,))
    assert not tg.autograd.gradgradcheck(WrongSecond.apply, (x,), raise_exception=False)
    assert tg.autograd.gradcheck(WrongSecond.apply, (x,))


@needs_torch
def test_gradgradcheck_as_pytorch():
    for L in (tg, torch):
        x = leaf(L, [0.5, 1.5])
        assert L.autograd.gradgradcheck(lambda a: (a * a).tanh(), (x,))


def variable_program(L):
    V = L.autograd.Variable
    x = leaf(L, [1.0, 2.0])
    y = x * 2
    v = V(y)
    w = V(L.tensor([1.0, 2.0]), requires_grad=True)
    (w * w).sum().backward()
    t = L.tensor([1.0, 1.0])
    u = V(t)
    u.add_(1)                      # shares t's memory
    errors = []
    for args, kwargs in ((([1.0],), {}), ((L.tensor([1, 2]),), {"requires_grad": True})):
        try:
            V(*args, **kwargs)
        except (TypeError, RuntimeError) as e:
            errors.append(str(e))
    return [v.is_leaf, v.requires_grad, v is y, isinstance(w, V), isinstance(3, V),
            w.requires_grad, val(w.grad), val(t), errors, list(V().shape)]


def test_variable():
    assert compare(variable_program) == [
        True, False, False, True, False, True, [2.0, 4.0], [2.0, 2.0],
        ["Variable data has to be a tensor, but got list",
         "Only Tensors of floating point and complex dtype can require gradients"], [0]]


def hook_order_program(L):
    log = []
    a = leaf(L, 1.0)
    b = a.sin()
    c = b * 3
    b.register_hook(lambda g: log.append(["tensor hook", val(g)]))
    b.retain_grad()
    b.grad_fn.register_prehook(lambda go: log.append(["node prehook", val(go[0])]) or
                               (go[0] * 10,))
    b.grad_fn.register_hook(lambda gi, go: log.append(["node hook", val(gi[0]), val(go[0])]))
    a.register_hook(lambda g: log.append(["leaf hook", val(g)]))
    c.backward()
    log.append(["grads", val(b.grad), val(a.grad)])
    x = leaf(L, [1.0, 2.0, 3.0, 4.0])
    p, q = x.split(2)         # a node with two outputs, one of them unused
    p.grad_fn.register_prehook(lambda go: log.append(["split pre", [val(g) for g in go]]))
    p.grad_fn.register_hook(lambda gi, go: log.append(["split post", [val(g) for g in gi],
                                                       [val(g) for g in go]]))
    (p * 2).sum().backward()
    log.append(val(x.grad))
    x = leaf(L, [1.0, 2.0])
    y = x * x
    y.grad_fn.register_hook(lambda gi, go: log.append(["create_graph", gi[0].requires_grad,
                                                       go[0].requires_grad]))
    (g,) = L.autograd.grad(y.sum(), x, create_graph=True)
    log.append([val(g), g.requires_grad])
    return log


@pytest.mark.usefixtures("both_walks")
def test_hook_order_tensor_then_node_then_leaf():
    log = compare(hook_order_program)
    assert [entry[0] for entry in log[:4]] == ["tensor hook", "node prehook", "node hook",
                                               "leaf hook"]
    assert log[4][1] == 3.0                     # retain_grad sees the tensor hook's gradient
    assert log[5] == ["split pre", [[2.0, 2.0], None]]
    assert log[6] == ["split post", [[2.0, 2.0, 0.0, 0.0]], [[2.0, 2.0], None]]
    assert log[8] == ["create_graph", True, False]


def mark_dirty_numpy_program(L):
    class Inplace(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x_npy = x.numpy()          # shares x's memory (grad mode is off in forward)
            x_npy += 1
            ctx.mark_dirty(x)
            return x

        @staticmethod
        @L.autograd.function.once_differentiable
        def backward(ctx, grad_output):
            return grad_output

    out = []
    a = leaf(L, [1.0]).clone()
    b = a * a
    r = Inplace.apply(a)
    out.append([r is a, val(a), r.grad_fn.name()])
    try:
        b.backward()
    except RuntimeError as e:
        out.append(str(e)[:60])
    c = leaf(L, [1.0, 2.0])
    d = c * 1
    Inplace.apply(d)
    (d * d).sum().backward()
    out.append(val(c.grad))
    return out


def test_mark_dirty_after_changing_the_input_through_numpy():
    out = compare(mark_dirty_numpy_program)
    assert out == [[True, [2.0], "InplaceBackward"],
                   "one of the variables needed for gradient computation has bee",
                   [4.0, 6.0]]


def test_hooks_and_packed_values_do_not_keep_a_tape_alive():
    w = tg.tensor([1.0, 2.0], requires_grad=True)
    tapes = []
    for _ in range(3):
        with tg.autograd.graph.save_on_cpu():
            y = (w * w).exp()
        y.grad_fn.register_hook(lambda gi, go, y=y: None)    # refers to its own tensor
        y.grad_fn.metadata["y"] = y
        tapes.append(weakref.ref(y._tape))
        y.sum().backward()
        del y
    gc.collect()
    assert [t() is not None for t in tapes[:-1]] == [False, False]   # (w holds the last)


def vjp_alias_program(L):
    class Double(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def vjp(ctx, g):             # PyTorch's alias of backward
            return g * 2

    x = leaf(L, [1.0, 3.0])
    Double.apply(x).sum().backward()
    return val(x.grad)


def test_a_function_may_define_vjp_instead_of_backward():
    assert compare(vjp_alias_program) == [2.0, 2.0]


def checkpoint_program(L):
    class Checkpoint(L.autograd.Function):      # recompute in backward (a reentrant backward)
        @staticmethod
        def forward(ctx, run_function, x):
            ctx.run_function = run_function
            ctx.save_for_backward(x)
            with L.no_grad():
                return run_function(x)

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            x = x.detach().requires_grad_()
            with L.enable_grad():
                y = ctx.run_function(x)
            L.autograd.backward(y, g)
            return None, x.grad

    w = leaf(L, [0.5, -1.0, 2.0])
    a = leaf(L, [1.0, 2.0, 3.0])

    def f(x):
        return (x * w).sin() * x

    Checkpoint.apply(f, a * 2).exp().sum().backward()
    out = [val(a.grad), val(w.grad)]
    a.grad = w.grad = None
    f(a * 2).exp().sum().backward()
    return out + [val(a.grad), val(w.grad)]


def test_checkpointing_function_with_a_backward_inside_backward():
    out = compare(checkpoint_program)
    assert np.allclose(out[0], out[2]) and np.allclose(out[1], out[3])


def saved_value_unpacks_program(L):
    log = []

    def pack_hook(x):
        log.append(["pack", val(x)])
        return x

    def unpack_hook(x):
        log.append(["unpack", val(x)])
        return x

    x = leaf(L, [1.0, 2.0])
    y = x.pow(2)
    log.append([L.equal(x, y.grad_fn._saved_self), x is y.grad_fn._saved_self])
    y.grad_fn._raw_saved_self.register_hooks(pack_hook, unpack_hook)
    log.append(["saved", val(y.grad_fn._saved_self)])     # read through unpack_hook
    y.sum().backward()
    x = leaf(L, [1.0, 2.0])
    with L.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = x.exp()
    log.append(["result", val(y.grad_fn._saved_result)])
    y.sum().backward()
    log.append(val(x.grad))
    return log


def test_reading_a_packed_saved_value_unpacks_it():
    log = compare(saved_value_unpacks_program)
    assert log[0] == [True, True]
    assert [entry[0] for entry in log[1:9]] == ["pack", "unpack", "saved", "unpack", "pack",
                                                "unpack", "result", "unpack"]


def freed_saved_program(L):
    log = []

    class Square(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * x * g

    class Packed:                      # stands for a temporary file: gone when freed
        def __init__(self, t):
            self.t = t
            log.append("packed")

        def __del__(self):
            log.append("released")

    x = leaf(L, [1.0, 2.0])
    y = Square.apply(x)
    log.append(len(y.grad_fn.saved_tensors))
    y.sum().backward()
    try:
        y.grad_fn.saved_tensors
    except RuntimeError as e:
        log.append(str(e)[:50])
    with L.autograd.graph.saved_tensors_hooks(Packed, lambda p: p.t):
        z = x.sin()
    z.sum().backward()
    log.append("after backward")
    return log


def test_a_backward_frees_saved_and_packed_values():
    log = compare(freed_saved_program)
    assert log == [1, "Trying to backward through the graph a second time",
                   "packed", "released", "after backward"]


def anomaly_program(L):
    out = []
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        with L.autograd.detect_anomaly():
            out.append(L.is_anomaly_enabled())
            x = leaf(L, [1.0, 2.0])
            (x * x).sum().backward()
            out.append(val(x.grad))
    out.append(L.is_anomaly_enabled())
    L.autograd.set_detect_anomaly(True)
    out.append([L.is_anomaly_enabled(), L.is_anomaly_check_nan_enabled()])
    L.autograd.set_detect_anomaly(False)
    with L.autograd.set_detect_anomaly(True, check_nan=False):
        out.append(L.is_anomaly_check_nan_enabled())
    with L.autograd.no_grad():
        out.append(L.is_grad_enabled())
    with L.autograd.set_grad_enabled(False):
        out.append(L.is_grad_enabled())
    out.append(L.is_anomaly_enabled())
    return out


def test_anomaly_mode_and_grad_mode_names():
    assert compare(anomaly_program) == [True, [2.0, 4.0], False, [True, True], False, False,
                                        False, False]


def anomaly_nan_program(L):
    class NanFunc(L.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    out = []
    with pytest.warns(UserWarning):
        with L.autograd.detect_anomaly():
            for f, x in ((NanFunc.apply, [1.0, 2.0]), (L.sqrt, [-1.0, 1.0]),
                         (lambda t: t.sqrt() * 0, [0.0, 1.0]), (lambda t: (t * t).exp(), [1.0, 2.0])):
                x = leaf(L, x)
                try:
                    f(x).sum().backward()
                    out.append(val(x.grad))
                except RuntimeError as e:
                    out.append(str(e))
    x = leaf(L, [-1.0, 1.0])
    x.sqrt().sum().backward()              # not in anomaly mode: NaN gradients, no error
    out.append(math.isnan(val(x.grad)[0]))
    return out


def test_detect_anomaly_names_the_node_that_returned_nan():
    out = compare(anomaly_nan_program)
    assert out[:3] == ["Function 'NanFuncBackward' returned nan values in its 0th output.",
                       "Function 'SqrtBackward0' returned nan values in its 0th output.",
                       "Function 'SqrtBackward0' returned nan values in its 0th output."]
    assert np.allclose(out[3], 2 * np.array([1.0, 2.0]) * np.exp([1.0, 4.0])) and out[4]


def node_call_program(L):
    out = []
    a, b = leaf(L, 2.0), leaf(L, 3.0)
    e = (a + b) * b
    for fn, g in ((e.grad_fn, L.tensor(1.0, dtype=L.float64)),
                  (a.sin().grad_fn, L.tensor(1.0, dtype=L.float64)),
                  ((a * 2).grad_fn, L.tensor(1.0, dtype=L.float64))):
        r = fn(g)
        out.append([val(t) for t in r] if isinstance(r, tuple) else val(r))
    x = leaf(L, [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    out.append(val(x.sum().grad_fn(L.tensor(1.0, dtype=L.float64))))
    out.append([val(t) for t in (x @ L.ones(3, 2, dtype=L.float64)).grad_fn(
        L.ones(2, 2, dtype=L.float64))])
    out.append(list(e.grad_fn.next_functions[1][0](L.tensor(1.0, dtype=L.float64))))
    w = leaf(L, [1.0, -1.0, 2.0])
    y = w * L.tensor([[1.0], [2.0]], dtype=L.float64)      # not reduced to w's shape
    out.append([val(t) for t in y.grad_fn(L.ones(2, 3, dtype=L.float64))])
    out.append([val(t) for t in L.where(w > 0, w, w * 2).grad_fn(L.ones(3, dtype=L.float64))])
    out.append(val(w.clamp(0, 1).grad_fn(L.ones(3, dtype=L.float64))))
    r = e.grad_fn(L.tensor(1.0, dtype=L.float64))
    out.append([t.requires_grad for t in r])              # recorded under grad mode
    with L.no_grad():
        out.append([t.requires_grad for t in e.grad_fn(L.tensor(1.0, dtype=L.float64))])
    return out


def test_calling_a_node_runs_its_backward():
    out = compare(node_call_program)
    assert out[0] == [3.0, 5.0] and out[2] == [2.0, None]
    assert out[5] == [] and out[6][1] is None and out[7] == [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    assert out[9:] == [[True, True], [False, False]]


def optimizer_in_backward_program(L):
    # PyTorch's tutorial "fuse the optimizer step into the backward pass"
    model = L.nn.Sequential(L.nn.Linear(4, 8), L.nn.ReLU(), L.nn.Linear(8, 1))
    with L.no_grad():
        for k, p in enumerate(model.parameters()):
            p.copy_(L.linspace(-1, 1, p.numel()).reshape(p.shape) * (k + 1) / 3)
    optimizer_dict = {p: L.optim.Adam([p], lr=0.01) for p in model.parameters()}

    def optimizer_hook(parameter):
        optimizer_dict[parameter].step()
        optimizer_dict[parameter].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(optimizer_hook)
    x = L.linspace(-2, 2, 12).reshape(3, 4)
    out = []
    for _ in range(3):
        loss = model(x).pow(2).sum()
        loss.backward()
        out.append([round(loss.item(), 4), all(p.grad is None for p in model.parameters())])
    out.append([round(v, 4) for v in model[0].weight.flatten().tolist()[:4]])
    return out


def test_optimizer_step_in_a_post_accumulate_grad_hook():
    out = compare(optimizer_in_backward_program)
    assert [o[1] for o in out[:3]] == [True] * 3 and out[0][0] > out[1][0] > out[2][0]


def retained_across_in_place_program(L):
    # retain_grad, then an in-place op: the retained gradient is the changed tensor's, as
    # PyTorch's retains_grad follows the tensor (it was None in tapegrad)
    x = leaf(L, [1.0, -1.3])
    y = x.neg()
    y.retain_grad()
    y.mul_(3.0)
    (y * y).sum().backward()
    z = leaf(L, 1.5).neg()
    z.retain_grad()
    z.sub_(-0.0)
    z.retain_grad()        # (twice, before and after: one gradient, not two summed)
    z.backward()
    return [y.grad.tolist(), x.grad.tolist(), z.grad.item()]


def test_retained_gradient_follows_an_in_place_op():
    y_grad, x_grad, z_grad = compare(retained_across_in_place_program)
    np.testing.assert_allclose(y_grad, [-6.0, 7.8], rtol=1e-15)
    np.testing.assert_allclose(x_grad, [18.0, -23.4], rtol=1e-15)
    assert z_grad == 1.0


def _leaf_changed_where_nothing_records(lib, how, mode):
    """A leaf used, changed in place where nothing records (under no_grad, through
    ``detach()``, through ``.data``), used again: both uses reach its gradient, with
    ``inputs=`` / ``autograd.grad`` too (the change unbinds the leaf from the tape)."""
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    y1 = (x * 2.0).sum()
    if how == "no_grad":
        with lib.no_grad():
            x.add_(1.0)
    elif how == "detach":
        x.detach().add_(1.0)
    else:
        x.data.add_(1.0)
    z = y1 + (x * 3.0).sum()
    if mode == "grad":
        return val(lib.autograd.grad(z, x)[0])
    if mode == "grad, two inputs":
        return [val(g) for g in lib.autograd.grad(z, [x, y1])]
    z.backward(inputs=[x] if mode == "inputs" else None)
    return val(x.grad)


@pytest.mark.parametrize("how", ["no_grad", "detach", "data"])
@pytest.mark.parametrize("mode", ["grad", "grad, two inputs", "inputs", "backward"])
def test_a_leaf_changed_where_nothing_records_keeps_both_uses(how, mode):
    got = _leaf_changed_where_nothing_records(tg, how, mode)
    assert got == ([[5.0, 5.0], 1.0] if mode == "grad, two inputs" else [5.0, 5.0])
    if torch is not None:
        assert got == _leaf_changed_where_nothing_records(torch, how, mode)


NONLEAF_CHANGES = ["no_grad", "detach", "data", "no_grad on a view", "detach of a view",
                   "data of a view", "no_grad on the view", "detach of the view",
                   "no_grad setitem"]


def _nonleaf_changed_where_nothing_records(lib, how, shape, use):
    """A non-leaf ``v = a * 2`` (and its view ``w = v[1:]``) changed in place where nothing
    records, then used by an op that saves it: that op saves the new value, and the
    gradient reaches ``a`` through ``v``'s own node (fuzzer seed 15: the tape kept the old
    value, 2.4 for 0.4)."""
    a = lib.tensor([0.3, 1.2, -0.7][:shape], dtype=lib.float64, requires_grad=True) \
        if shape else lib.tensor(0.3, dtype=lib.float64, requires_grad=True)
    v = a * 2
    w = v[1:] if shape else None
    if how == "no_grad":
        with lib.no_grad():
            v.sub_(0.5)
    elif how == "detach":
        v.detach().sub_(0.5)
    elif how == "data":
        v.data.sub_(0.5)
    elif how == "data of a view":
        v.data[1:].mul_(3.0)
    elif how == "no_grad on a view":
        with lib.no_grad():
            v[1:].mul_(3.0)
    elif how == "detach of a view":
        v.detach()[1:].mul_(3.0)
    elif how == "no_grad on the view":
        with lib.no_grad():
            w.mul_(3.0)
    elif how == "detach of the view":
        w.detach().mul_(3.0)
    else:
        with lib.no_grad():
            v[0] = 5.0
    f = {"square": lambda t: t * t, "sin": lambda t: t.sin(),
         "matmul": lambda t: (t @ t).reshape(1) if t.ndim else t * t}[use]
    y = f(v).sum() + (f(w).sum() if w is not None else 0.0)
    y.backward()
    return val(v), val(a.grad)


@pytest.mark.parametrize("use", ["square", "sin", "matmul"])
@pytest.mark.parametrize("shape", [3, 0], ids=["array", "0-d"])
@pytest.mark.parametrize("how", NONLEAF_CHANGES)
def test_a_nonleaf_changed_where_nothing_records_is_saved_with_its_new_value(how, shape, use):
    if not shape and ("view" in how or "setitem" in how):
        pytest.skip("a 0-d tensor has no view of part of it")
    v, grad = _nonleaf_changed_where_nothing_records(tg, how, shape, use)
    # the gradient at the new values: through v, and through w = v[1:]
    vv = np.asarray(v, dtype=float)
    d = {"square": 2 * vv, "sin": np.cos(vv), "matmul": 2 * vv}[use]
    if shape:
        d[1:] += d[1:]
    assert np.allclose(grad, 2 * d, rtol=1e-9, atol=0)   # (val rounds to 10 digits)
    if torch is not None:
        assert (v, grad) == _nonleaf_changed_where_nothing_records(torch, how, shape, use)


@pytest.mark.parametrize("how", ["no_grad", "detach"])
@pytest.mark.parametrize("shape", [2, 0], ids=["array", "0-d"])
def test_a_nonleaf_of_another_tape_changed_where_nothing_records(how, shape):
    """A tape links a non-leaf of another tape (the value it had then): used again after an
    in-place change where nothing records, the link is made again with the new value (a
    0-d tensor's number is a new object; it kept the old link: 2.4 for 0.4)."""
    a = tg.tensor([0.3, 1.2][:shape] if shape else 0.3, dtype=tg.float64, requires_grad=True)
    v = a * 2
    with tg.Tape():
        (v * 3.0).sum()        # the link
        if how == "no_grad":
            with tg.no_grad():
                v.sub_(0.5)
        else:
            v.detach().sub_(0.5)
        y = (v * v).sum()
    y.backward()
    assert np.allclose(val(a.grad), 4 * np.asarray(val(v)), rtol=1e-9)


def _changed_through_data(lib, case, shape):
    """PyTorch's ``.data``: the memory, not the version counter.  What saved the tensor
    before the change reads the new value unnoticed; what saved ``.data`` itself raises."""
    value = [0.3, 1.2][:shape] if shape else 0.3
    a = lib.tensor(value, dtype=lib.float64, requires_grad=True)
    if case == "saved before, non-leaf":
        v = a * 2
        u = (v * v).sum()
        v.data.add_(1.0)
        u.backward()
        return val(a.grad)
    if case == "saved before, leaf":
        u = (a * a).sum()
        a.data.add_(1.0)
        (u + (a * 3.0).sum()).backward()
        return val(a.grad)
    if case == "the alias saved":
        d = (a * 2).data
        y = (a * d).sum()
        d.add_(1.0)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.backward()
        return "raised"
    c = lib.tensor(value, dtype=lib.float64)   # "versions": a tensor without grad
    d, e = c.data, c.detach()
    c.add_(1.0)
    d.add_(1.0)
    return c._version, d._version, e._version, val(c), val(d), val(e)


@pytest.mark.parametrize("shape", [2, 0], ids=["array", "0-d"])
@pytest.mark.parametrize("case", ["saved before, non-leaf", "saved before, leaf",
                                  "the alias saved", "versions"])
def test_a_change_through_data_is_pytorchs(case, shape):
    got = _changed_through_data(tg, case, shape)
    if torch is not None:
        assert got == _changed_through_data(torch, case, shape)
    want = {"saved before, non-leaf": [6.4, 13.6], "saved before, leaf": [5.6, 7.4],
            "the alias saved": "raised",
            "versions": (1, 1, 1, [2.3, 3.2], [2.3, 3.2], [2.3, 3.2])}[case]
    if not shape and case != "the alias saved":
        want = want[0] if case != "versions" else (1, 1, 1, 2.3, 2.3, 2.3)
    assert got == want


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_a_rule_returning_its_gradient_does_not_alias_two_grads(op):
    """cumsum's and cumprod's rules over a dim of 1 return the gradient they are given: the
    operand's adjoint must not be that same array, or the leaf's and the retained
    non-leaf's .grad are one array and a second backward adds into both (3 for 2)."""
    def run(lib):
        x = lib.tensor([[1.0], [3.0], [0.617]], dtype=lib.float64, requires_grad=True)
        y = getattr(x, op)(-1)
        y.retain_grad()
        s = y.reshape((-1,)).sum()
        s.backward(retain_graph=True)
        s.backward()
        return val(x.grad), val(y.grad)
    got = run(tg)
    assert got == ([[2.0], [2.0], [2.0]], [[2.0], [2.0], [2.0]])
    if torch is not None:
        assert got == run(torch)
