"""The fast paths of recording array ops on small tensors (``benchmarks/array_ops.py``) give
what the general paths give, as PyTorch (torch 2.13; skipped without it): ``c[3]``,
``c[0:3]`` on a tensor with history, ``sum``, ``stack``, ``cross`` of two 3-vectors.
Values, gradients, ``grad_fn`` names, views sharing memory and version counters, errors,
float64 finite differences, and replays of tapes that used them.
"""
import warnings

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

LIBS = (tg, torch)


@pytest.fixture(autouse=True)
def _torch_float64():
    torch.set_default_dtype(torch.float64)   # (tensor(1.25) is float64, as tapegrad's)
    yield   # (conftest's fixture sets back what it found)

DATA = np.array([0.5, -1.25, 2.0, -0.0, 3.5, -4.0, 1.0])


def _leaf(lib, data=DATA):
    return lib.tensor(data, requires_grad=True)


# name -> function of a leaf (7,) that requires grad: the recorded op on it, or on a
# non-leaf made from it
PROGRAMS = {
    "c[3]": lambda c: c[3],
    "c[-1]": lambda c: c[-1],
    "c[0:3]": lambda c: c[0:3],
    "c[::2]": lambda c: c[::2],
    "c[5:1]": lambda c: c[5:1],
    "c[-3:]": lambda c: c[-3:],
    "c[1:6:2]": lambda c: c[1:6:2],
    "(c * 2)[2]": lambda c: (c * 2.0)[2],
    "(c * 2)[1:4]": lambda c: (c * 2.0)[1:4],
    "c.reshape(7, 1)[2]": lambda c: c.reshape(7, 1)[2],
    "c[2:5][1]": lambda c: c[2:5][1],
    "c.sum()": lambda c: c.sum(),
    "c.reshape(7, 1).sum(0)": lambda c: c.reshape(7, 1).sum(0),
    "c.reshape(7, 1).sum(-1, keepdim=True)": lambda c: c.reshape(7, 1).sum(-1, keepdim=True),
    "c.sum((0,))": lambda c: c.sum((0,)),
    "c[2].sum()": lambda c: c[2].sum(),
    "dot(c, c)": lambda c: c.dot(c),
    "stack([c, c * 2])": lambda c: stack_of(c, (c, c * 2.0)),
    "stack([c, c], 1)": lambda c: stack_of(c, (c, c), 1),
    "stack([c, c], -1)": lambda c: stack_of(c, (c, c), -1),
    "stack([c[0], c[1]])": lambda c: stack_of(c, (c[0], c[1])),
    "cat([c, c])": lambda c: cat_of(c, (c, c)),
    "cross(c[:3], c[3:6])": lambda c: lib_of(c).linalg.cross(c[:3], c[3:6]),
    "cross(c[1:4], c[4:])": lambda c: lib_of(c).linalg.cross(c[1:4], c[4:], dim=0),
    "cross(c[:3], c[:3])": lambda c: lib_of(c).linalg.cross(c[:3], c[:3]),
    # an operand without grad: a constant in the recorded call, no edge
    "cat([c, const])": lambda c: cat_of(c, (c, const_of(c))),
    "stack([const, c * 2])": lambda c: stack_of(c, (const_of(c), c * 2.0)),
    "dot(const, c)": lambda c: lib_of(c).dot(const_of(c), c),
    "cross(const, c[1:4])": lambda c: lib_of(c).linalg.cross(const_of(c)[:3], c[1:4]),
    "c.reshape(7).sum()": lambda c: c.reshape(7).sum(),
    "c.reshape(-1, 1)[1:3]": lambda c: c.reshape(-1, 1)[1:3],
    # ints only on a tensor with history: a SelectBackward0 per int (select_recorded)
    "(c * 2).reshape(7, 1)[3, 0]": lambda c: (c * 2.0).reshape(7, 1)[3, 0],
    "(c * 2).reshape(7, 1)[-2, -1]": lambda c: (c * 2.0).reshape(7, 1)[-2, -1],
    "(c * 2).reshape(1, 7, 1)[0, 4]": lambda c: (c * 2.0).reshape(1, 7, 1)[0, 4],
    "c * c[2] (c bound to the tape)": lambda c: (c * 1.0) * c[2],
}


def const_of(c):
    return lib_of(c).tensor(DATA[::-1] * 3.0)


def lib_of(t):
    return tg if isinstance(t, tg.Tensor) else torch


def stack_of(c, parts, dim=0):
    return lib_of(c).stack(list(parts), dim)


def cat_of(c, parts, dim=0):
    return lib_of(c).cat(list(parts), dim)


@pytest.mark.parametrize("name", PROGRAMS)
def test_values_gradients_and_nodes_as_pytorch(name):
    fn = PROGRAMS[name]
    outs = {}
    for lib in LIBS:
        c = _leaf(lib)
        y = fn(c)
        node = type(y.grad_fn).__name__ if lib is torch else y.grad_fn.name()
        g = lib.tensor(np.linspace(-1.0, 2.0, y.numel()).reshape(tuple(y.shape)))
        y.backward(g)
        outs[lib] = (y.detach().numpy(), c.grad.numpy(), node, tuple(y.shape))
    (yt, gt, nt, st), (yp, gp, np_, sp) = outs[tg], outs[torch]
    assert st == sp and nt == np_
    np.testing.assert_array_equal(yt, yp)
    np.testing.assert_array_equal(np.signbit(yt), np.signbit(yp))   # -0. stays -0.
    np.testing.assert_allclose(gt, gp, rtol=1e-14, atol=0.0)


@pytest.mark.parametrize("name", PROGRAMS)
def test_gradients_match_finite_differences(name):
    assert tg.autograd.gradcheck(PROGRAMS[name], (_leaf(tg),))


# (an empty slice, c[5:1], is left out: its version stays 0 where PyTorch's is the base's,
# on every path)
@pytest.mark.parametrize("name", [n for n in PROGRAMS if n.startswith("c[") and n != "c[5:1]"
                                  and "sum" not in n])
def test_index_of_a_recorded_tensor_is_a_view_with_one_version(name):
    fn = PROGRAMS[name]
    for lib in LIBS:
        c = _leaf(lib)
        h = c * 1.0
        v = fn(h)
        with lib.no_grad():
            h.add_(1.0)
        np.testing.assert_array_equal(v.detach().numpy(), fn(DATA + 1.0))
        assert v._version == h._version == 1


@pytest.mark.parametrize("idx", [7, -8, 100])
def test_an_index_out_of_range_raises_as_pytorch(idx):
    msgs = []
    for lib in LIBS:
        c = _leaf(lib) * 1.0
        with pytest.raises(IndexError) as e:
            c[idx]
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_a_zero_step_slice_raises_as_pytorch():
    for lib in LIBS:
        with pytest.raises(ValueError if lib is torch else (ValueError, IndexError)):
            (_leaf(lib) * 1.0)[::0]


def test_cross_of_float32_vectors_keeps_float32_as_pytorch():
    a32, b32 = DATA[:3].astype(np.float32), DATA[3:6].astype(np.float32)
    res = [lib.linalg.cross(lib.tensor(a32), lib.tensor(b32)) for lib in LIBS]
    assert str(res[0].dtype).split(".")[-1] == str(res[1].dtype).split(".")[-1] == "float32"
    np.testing.assert_array_equal(res[0].numpy(), res[1].numpy())


def test_cross_with_a_bad_dim_raises_as_pytorch():
    for lib in LIBS:
        with pytest.raises(IndexError, match="Dimension out of range"):
            lib.linalg.cross(_leaf(lib)[:3], _leaf(lib)[3:6], dim=1)


def test_a_tape_that_used_the_fast_paths_replays_at_a_new_point():
    def f(lib, a, b):
        r = lib.cat([a * b, b])
        return (r[0] * r[1:3].sum() + lib.stack([a, b])[1][2]) * a.dot(b)

    a, b = _leaf(tg, DATA[:3]), _leaf(tg, DATA[3:6])
    T = tg.Tape()
    with T:
        y = f(tg, a, b)
    replay = T.compile([a, b], [y])
    pa, pb = DATA[1:4] * 1.5, DATA[4:7] - 0.25
    ta, tb = _leaf(torch, pa), _leaf(torch, pb)
    ty = f(torch, ta, tb)
    ty.backward()
    value, grad = replay.value_and_grad(np.concatenate([pa, pb]))
    np.testing.assert_allclose(value, ty.item(), rtol=1e-13)
    np.testing.assert_allclose(grad, np.concatenate([ta.grad.numpy(), tb.grad.numpy()]),
                               rtol=1e-13)


# an array with a 0-d tensor (a leaf, a recorded value, a constant), either side: the
# elementwise fast path records the 0-d operand as it is, broadcast in the sweep
MIXED = {
    "c * s": lambda c, s: c * s,
    "s * c": lambda c, s: s * c,
    "c / s": lambda c, s: c / s,
    "s - c": lambda c, s: s - c,
    "c + s.sin()": lambda c, s: c + s.sin(),
    "c ** s": lambda c, s: c.abs() ** s,
    "c * const": lambda c, s: c * lib_of(c).tensor(1.5),
    "const / c": lambda c, s: lib_of(c).tensor(-2.0) / (c * c + 1.0),
    "atan2(c, s)": lambda c, s: lib_of(c).atan2(c, s),
}


@pytest.mark.parametrize("name", MIXED)
def test_an_array_with_a_0d_tensor_as_pytorch(name):
    fn = MIXED[name]
    outs = {}
    for lib in LIBS:
        c, s = _leaf(lib), lib.tensor(1.25, requires_grad=True)
        y = fn(c, s)
        node = type(y.grad_fn).__name__ if lib is torch else y.grad_fn.name()
        y.backward(lib.tensor(np.linspace(-1.0, 2.0, y.numel())))
        outs[lib] = (y.detach().numpy(), c.grad.numpy(), None if s.grad is None else s.grad.item(),
                     node)
    (yt, gt, st, nt), (yp, gp, sp, np_) = outs[tg], outs[torch]
    assert nt == np_
    np.testing.assert_allclose(yt, yp, rtol=1e-15, atol=0.0)
    np.testing.assert_allclose(gt, gp, rtol=1e-13, atol=1e-300)
    assert (st is None) == (sp is None)
    if st is not None:
        np.testing.assert_allclose(st, sp, rtol=1e-13)


@pytest.mark.parametrize("name", MIXED)
def test_an_array_with_a_0d_tensor_matches_finite_differences(name):
    assert tg.autograd.gradcheck(MIXED[name], (_leaf(tg), tg.tensor(1.25, requires_grad=True)))


# two arrays of shapes that broadcast (or an array and a 0-d tensor of another dtype path),
# and tuple indices of ints, slices and Nones: their own fast paths (k-means' and GMM's
# ``a[None, :] + b[:, None]``, ``x[:, None, :] - m[None, :, :]``)
BROADCAST = {
    "col + row": lambda c, r: c + r,
    "row * col": lambda c, r: r * c,
    "col / row": lambda c, r: c / (r * r + 1.0),
    "row - col[None]": lambda c, r: r - c[None],
    "pow(col, row)": lambda c, r: c.abs() ** (r + 0.25),
    "atan2(col, row)": lambda c, r: lib_of(c).atan2(c, r),
    "maximum(col, row)": lambda c, r: lib_of(c).maximum(c, r),
    "col * const row": lambda c, r: c * lib_of(c).tensor([[1.0, -2.0, 0.5, 3.0]]),
    "const col - row": lambda c, r: lib_of(c).tensor([[1.0], [0.0], [-1.0]]) - r,
    "c[:, None, :] - c[None, :, :]": lambda c, r: (c * r)[:, None, :] - (c * r)[None, :, :],
    "(c * r)[None, :][:, 1:3]": lambda c, r: (c * r)[None, :][:, 1:3],
    "(c * r)[:, 0]": lambda c, r: (c * r)[:, 0],
    "(c * r)[2, 3]": lambda c, r: (c * r)[2, 3],
    "(c * r)[-1, None, ::2]": lambda c, r: (c * r)[-1, None, ::2],
    "(c * r)[None, 1, None]": lambda c, r: (c * r)[None, 1, None],
}


def _col_row(lib):
    return (lib.tensor([[0.5], [-1.25], [2.0]], requires_grad=True),
            lib.tensor([[1.5, -0.0, 2.5, -3.0]], requires_grad=True))


def _nodes(lib, y):
    names, f = [], y.grad_fn
    while f is not None and f.next_functions:
        names.append(type(f).__name__ if lib is torch else f.name())
        f = f.next_functions[0][0]
    return names


@pytest.mark.parametrize("name", BROADCAST)
def test_broadcast_operands_and_tuple_indices_as_pytorch(name):
    fn = BROADCAST[name]
    outs = {}
    for lib in LIBS:
        c, r = _col_row(lib)
        y = fn(c, r)
        nodes = _nodes(lib, y)
        y.backward(lib.tensor(np.linspace(-1.0, 2.0, y.numel()).reshape(tuple(y.shape))))
        grads = [None if x.grad is None else x.grad.numpy() for x in (c, r)]
        outs[lib] = (y.detach().numpy(), *grads, nodes, tuple(y.shape), y._base is not None)
    t, p = outs[tg], outs[torch]
    assert t[3:] == p[3:]
    np.testing.assert_allclose(t[0], p[0], rtol=1e-15, atol=0.0)
    np.testing.assert_array_equal(np.signbit(t[0]), np.signbit(p[0]))
    for a, b in zip(t[1:3], p[1:3]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("name", BROADCAST)
def test_broadcast_operands_and_tuple_indices_match_finite_differences(name):
    c, r = _col_row(tg)
    assert tg.autograd.gradcheck(BROADCAST[name], (c, r))
    assert tg.autograd.gradgradcheck(BROADCAST[name], (c, r))


@pytest.mark.parametrize("idx", [(3, 0), (0, 4), (None, 0, 0, 0), (0, "a"), (slice(0, 2.5),)])
def test_a_bad_tuple_index_raises_as_pytorch(idx):
    errors = []
    for lib in LIBS:
        c, r = _col_row(lib)
        with pytest.raises((IndexError, TypeError, ValueError)) as e:
            (c * r)[idx]
        errors.append(e.type)
    assert errors[0] is errors[1] or IndexError in errors


def test_shapes_that_do_not_broadcast_raise_as_pytorch():
    msgs = []
    for lib in LIBS:
        a = lib.tensor(np.ones((3, 2)), requires_grad=True)
        with pytest.raises(RuntimeError) as e:
            a + lib.ones(3)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_float32_beside_float64_broadcasts_as_pytorch():
    res = [lib.tensor(np.ones((3, 1), np.float32)) * lib.tensor(np.ones((1, 2)), requires_grad=True)
           for lib in LIBS]
    assert str(res[0].dtype).split(".")[-1] == str(res[1].dtype).split(".")[-1] == "float64"


@pytest.mark.parametrize("name", ["cat([c, const])", "stack([const, c * 2])", "dot(const, c)",
                                  "cross(const, c[1:4])", "c.sum()", "cat([c, c])"])
def test_next_functions_as_pytorch(name):
    # (the recording fast path takes its own references: a constant operand has no edge)
    names = {}
    for lib in LIBS:
        fn = PROGRAMS[name](_leaf(lib)).grad_fn
        names[lib] = [None if f is None else (f.name() if lib is tg else type(f).__name__)
                      for f, _ in fn.next_functions]
    assert names[tg] == names[torch]


@pytest.mark.parametrize("name", ["c.sum()", "cat([c, c])", "stack([c, c * 2])", "dot(c, c)",
                                  "cat([c, const])", "c.reshape(7).sum()"])
def test_second_derivatives_match_finite_differences(name):
    # (the rules' own fast paths -- expand of one number, cat's offsets -- under create_graph)
    fn = PROGRAMS[name]
    assert tg.autograd.gradgradcheck(lambda c: fn(c) * fn(c), (_leaf(tg),))


# ``x[:, idx]`` and ``x[idx]`` with one integer index (``getitem``'s ``_integer_index``:
# GMM's ``icf[:, index]``), beside PyTorch: the same node, values, layout and gradient
# (repeated indices add up), the index's in-place change caught, errors as PyTorch's
INTEGER_INDEX = {
    "m[:, idx2d]": lambda m, L: m[:, L.tensor([[0, 0], [2, -1]])],
    "m[idx]": lambda m, L: m[L.tensor([2, 0, 2])],
    "(m * 2)[:, idx]": lambda m, L: (m * 2.0)[:, L.tensor([3, 1])],
    "m.reshape(3, 2, 2)[:, :, idx]": lambda m, L: m.reshape(3, 2, 2)[:, :, L.tensor([1, 0, 1])],
    "m[:, int32 idx]": lambda m, L: m[:, L.tensor(np.array([1, -4], np.int32))],
    "m[:, ndarray idx]": lambda m, L: m[:, np.array([2, 2, 0])],
    "m[:, empty idx]": lambda m, L: m[:, L.tensor(np.zeros(0, np.int64))],
    "m.t()[idx]": lambda m, L: m.t()[L.tensor([0, 3])],
}


def _matrix(lib):
    return lib.tensor(np.arange(12.0).reshape(3, 4) * 0.5 - 2.0, requires_grad=True)


@pytest.mark.parametrize("name", INTEGER_INDEX)
def test_one_integer_index_as_pytorch(name):
    outs = {}
    for lib in LIBS:
        m = _matrix(lib)
        y = INTEGER_INDEX[name](m, lib)
        node = type(y.grad_fn).__name__ if lib is torch else y.grad_fn.name()
        y.backward(lib.tensor(np.linspace(-1.0, 2.0, y.numel()).reshape(tuple(y.shape))))
        outs[lib] = (y.detach().numpy(), m.grad.numpy(), node, tuple(y.shape), y.stride(),
                     y.is_contiguous())
    t, p = outs[tg], outs[torch]
    assert t[2:] == p[2:]
    np.testing.assert_array_equal(t[0], p[0])
    np.testing.assert_array_equal(t[1], p[1])


@pytest.mark.parametrize("name", INTEGER_INDEX)
def test_one_integer_index_matches_finite_differences(name):
    fn = INTEGER_INDEX[name]
    assert tg.autograd.gradcheck(lambda m: fn(m, tg) * fn(m, tg), (_matrix(tg),))


@pytest.mark.parametrize("idx", [[0, 4], [-5], [[1], [7]]])
def test_one_integer_index_out_of_range_raises_as_pytorch(idx):
    msgs = []
    for lib in LIBS:
        m = _matrix(lib)
        with pytest.raises(IndexError) as e:
            m[:, lib.tensor(idx)]
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


def test_one_integer_index_changed_in_place_raises_at_backward_as_pytorch():
    for lib in LIBS:
        m = _matrix(lib)
        idx = lib.tensor([0, 2])
        y = (m * 1.0)[:, idx]
        idx.add_(1)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            y.sum().backward()


@pytest.mark.parametrize("index", [
    lambda m, L: m[:, L.tensor([0, 4])], lambda m, L: m[L.tensor([5])],
    lambda m, L: m[L.tensor([0]), L.tensor([9])], lambda m, L: m[1, L.tensor([9])],
    lambda m, L: m[:, [9]], lambda m, L: m[:, 5], lambda m, L: m[..., L.tensor([7])],
    lambda m, L: m[None, :, L.tensor([7])], lambda m, L: m[L.tensor([7]), 1],
    lambda m, L: m[L.tensor([True, False, True]), L.tensor([9])]])
def test_an_index_out_of_range_names_pytorchs_dim(index):
    # (PyTorch counts integer-array indices among themselves: m[:, [9]] is "dimension 0")
    msgs = []
    for lib in LIBS:
        with pytest.raises(IndexError) as e:
            index(lib.zeros(3, 4), lib)
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


@pytest.mark.parametrize("dtype", [np.int8, np.int16])
def test_an_int8_or_int16_index_tensor_raises_as_pytorch(dtype):
    msgs = []
    for lib in LIBS:
        with pytest.raises(IndexError) as e:
            _matrix(lib)[:, lib.tensor(np.array([1, 2], dtype))]
        msgs.append(str(e.value))
    assert msgs[0] == msgs[1]


# A uint8 index tensor (or array) is a bool mask in PyTorch (deprecated: a UserWarning), not
# integers: the same elements, gradient and node
UINT8_INDEX = {
    "m[u8 rows]": lambda m, L: m[L.tensor(np.array([1, 0, 1], np.uint8))],
    "m[:, u8 columns]": lambda m, L: m[:, L.tensor(np.array([0, 1, 1, 0], np.uint8))],
    "m[u8 ndarray]": lambda m, L: m[np.array([0, 0, 1], np.uint8)],
    "(m * 2)[u8 2-d]": lambda m, L: (m * 2.0)[L.tensor((np.arange(12).reshape(3, 4) % 3 == 0)
                                                        .astype(np.uint8))],
}


@pytest.mark.parametrize("name", UINT8_INDEX)
def test_a_uint8_index_is_a_mask_as_pytorch(name):
    outs = {}
    for lib in LIBS:
        m = _matrix(lib)
        with pytest.warns(UserWarning, match="uint8 is now deprecated"):
            y = UINT8_INDEX[name](m, lib)
        node = type(y.grad_fn).__name__ if lib is torch else y.grad_fn.name()
        with warnings.catch_warnings():   # (PyTorch's backward warns once more)
            warnings.simplefilter("ignore")
            y.backward(lib.tensor(np.linspace(-1.0, 2.0, y.numel()).reshape(tuple(y.shape))))
        outs[lib] = (y.detach().numpy(), m.grad.numpy(), node)
    t, p = outs[tg], outs[torch]
    assert t[2] == p[2]
    np.testing.assert_array_equal(t[0], p[0])
    np.testing.assert_array_equal(t[1], p[1])


def test_a_uint8_mask_set_to_a_number_raises_and_to_a_tensor_writes_as_pytorch():
    results = []
    for lib in LIBS:
        x = lib.tensor(np.arange(6.0).reshape(3, 2))
        mask = lib.tensor(np.array([1, 0, 1], np.uint8))
        with pytest.raises(RuntimeError) as e:
            x[mask] = 7.0
        with pytest.warns(UserWarning, match="uint8 is now deprecated"):
            x[mask] = lib.tensor([9.0, 8.0])
        results.append((str(e.value), x.numpy().tolist()))
    assert results[0] == results[1]


# The index dtypes PyTorch's index ops take (int32/int64, or int64 only), and its errors
INDEX_OPS = {
    "gather": lambda L, x, i: L.gather(x, 0, i.reshape(1, 2)),
    "index_select": lambda L, x, i: L.index_select(x, 0, i),
    "take": lambda L, x, i: L.take(x, i),
    "scatter": lambda L, x, i: x.scatter(0, i.reshape(1, 2), 1.0),
    "scatter_add": lambda L, x, i: x.scatter_add(0, i.reshape(1, 2), L.ones(1, 2)),
    "scatter_reduce": lambda L, x, i: x.scatter_reduce(0, i.reshape(1, 2), L.ones(1, 2), "sum"),
    "index_add": lambda L, x, i: x.index_add(0, i, L.ones(2, 2)),
    "index_copy": lambda L, x, i: x.index_copy(0, i, L.ones(2, 2)),
    "index_fill": lambda L, x, i: x.index_fill(0, i, 1.0),
}


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.int64, np.float64])
@pytest.mark.parametrize("name", INDEX_OPS)
def test_index_ops_take_pytorchs_index_dtypes(name, dtype):
    outcomes = []
    for lib in LIBS:
        x = lib.tensor(np.arange(6.0).reshape(3, 2))
        i = lib.tensor(np.array([0, 2], dtype))
        try:
            out = INDEX_OPS[name](lib, x, i)
            outcomes.append(("ok", out.numpy().tolist()))
        except (RuntimeError, IndexError) as e:
            outcomes.append((type(e).__name__, str(e).split(" (Triggered")[0]))
    assert outcomes[0] == outcomes[1]


# (index, value) of index_put and setitem with a uint8 index: a mask written (a UserWarning),
# or PyTorch's masked_fill_ error where one mask takes a number or a 0-d value
UINT8_PUTS = [
    (lambda L: (L.tensor(np.array([1, 0, 1], np.uint8)),), lambda L: L.tensor(7.0)),
    (lambda L: (L.tensor(np.array([1, 0, 1], np.uint8)),), lambda L: L.tensor([9.0, 8.0])),
    (lambda L: (L.tensor(np.array([[1, 0], [0, 0], [1, 1]], np.uint8)),), lambda L: L.tensor(7.0)),
    (lambda L: (L.tensor([0, 2]), L.tensor(np.array([1, 0], np.uint8))), lambda L: L.tensor(7.0)),
]


@pytest.mark.parametrize("case", range(len(UINT8_PUTS)))
@pytest.mark.parametrize("how", ["index_put", "setitem"])
def test_a_uint8_index_written_through_as_pytorch(case, how):
    index, value = UINT8_PUTS[case]
    results = []
    for lib in LIBS:
        x = lib.tensor(np.arange(6.0).reshape(3, 2))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if how == "index_put":
                    x = x.index_put(index(lib), value(lib))
                else:
                    x[index(lib)] = value(lib)
            results.append(x.numpy().tolist())
        except RuntimeError as e:
            results.append(str(e))
    assert results[0] == results[1]


def test_element_of_a_matrix_is_two_select_nodes_and_a_view_as_pytorch():
    """``M[i, j]`` of a tensor with history: two ``SelectBackward0`` nodes (PyTorch's graph),
    a view whose value follows a change of the base, and a change through it that reaches
    the base and its gradient."""
    seen = {}
    for lib in LIBS:
        c = _leaf(lib, DATA[:6])
        m = (c * 2.0).reshape(2, 3)
        e = m[1, 2]
        chain = [type(e.grad_fn).__name__ if lib is torch else e.grad_fn.name()]
        node = e.grad_fn.next_functions[0][0]
        chain.append(type(node).__name__ if lib is torch else node.name())
        with lib.no_grad():
            m.mul_(3.0)
        moved = e.item()
        e.mul_(c[0])   # through the view: m's history changes
        (m * m).sum().backward()
        seen[lib] = (chain, moved, m.detach().numpy().copy(), c.grad.numpy().copy())
    (ct, mt, vt, gt), (cp, mp, vp, gp) = seen[tg], seen[torch]
    assert ct == cp == ["SelectBackward0", "SelectBackward0"]
    assert mt == mp
    np.testing.assert_array_equal(vt, vp)
    np.testing.assert_allclose(gt, gp, rtol=1e-14)


def test_element_of_a_tensor_recorded_on_another_tape_as_pytorch():
    """``h[i]`` where ``h`` was recorded on a tape other than the one recording now (a
    ``with tg.Tape()`` block that ended): the element links to it, and the gradient flows
    back through both tapes, as PyTorch's one graph."""
    grads = {}
    for lib in LIBS:
        c = _leaf(lib)
        if lib is tg:
            with tg.Tape():
                h = (c * 2.0).reshape(7, 1)
        else:
            h = (c * 2.0).reshape(7, 1)
        y = h[3, 0] * h[1, 0] + h[6][0]
        y.backward()
        grads[lib] = (y.item(), c.grad.numpy().copy())
    assert grads[tg][0] == grads[torch][0]
    np.testing.assert_array_equal(grads[tg][1], grads[torch][1])
