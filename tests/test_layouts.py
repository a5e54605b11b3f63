"""Elementwise results are laid out as PyTorch's TensorIterator lays them out
(``core.shapes.torch_layout``) when an operand is not C-contiguous: a permuted first operand
gives its layout to the result even beside a contiguous one, an expanded operand gives a
C-ordered one.  Contiguity decides what a later ``view``/``flatten``/``reshape`` records
(a view, or a copy then an unsafe view), so the layout is part of the graph PyTorch builds."""
import numpy as np
import pytest

import tapegrad as tg

try:
    import torch
except ImportError:
    torch = None

rng = np.random.default_rng(0)
A, C = rng.random((2, 2, 4)), rng.random((4, 2, 2))
X, Y = rng.random((3, 5)), rng.random((5, 3))
# name -> (program on a module, inputs, torch's strides of the result)
CASES = {
    "maximum of a permuted and a contiguous": (lambda m, a, c: m.maximum(a.permute(2, 1, 0), c), (A, C), (1, 4, 8)),
    "erf of an expanded": (lambda m, b: m.erf(b.expand(2, 2, 2, 2)), (A[:, :, :2].copy(),), (8, 4, 2, 1)),
    "transposed times contiguous": (lambda m, x, y: x.t() * y, (X, Y), (1, 5)),
    "contiguous times transposed": (lambda m, x, y: y * x.t(), (X, Y), (3, 1)),
    "transposed plus a number": (lambda m, x: x.t() + 2.0, (X,), (1, 5)),
    "exp of a transposed": (lambda m, x: x.t().exp(), (X,), (1, 5)),
    "exp of a slice": (lambda m, x: x[:, ::2].exp(), (rng.random((4, 6)),), (3, 1)),
    "permuted times a broadcast column": (lambda m, x, y: x.permute(2, 0, 1) * y,
                                          (rng.random((3, 4, 5)), rng.random((3, 1))), (1, 20, 5)),
    "transposed 4-d minus contiguous": (lambda m, x, y: x.transpose(1, 3) - y,
                                        (rng.random((2, 3, 4, 5)), rng.random((2, 5, 4, 3))), (60, 1, 5, 20)),
    "comparison of a transposed": (lambda m, x, y: x.t() > y, (X, Y), (1, 5)),
    "where of transposed": (lambda m, x, y: m.where(x.t() > 0.5, x.t(), y), (X, Y), (1, 5)),
    # slices whose strides fall from dim to dim (torch_layout's early C-order return)
    "slice times slice": (lambda m, x: x[:, :3] * x[:, 3:], (rng.random((4, 6)),), (3, 1)),
    "slice times a transposed": (lambda m, x, y: x[:, :4] * y[:4].t(), (rng.random((4, 6)), rng.random((6, 4))), (4, 1)),
    "transposed times a slice": (lambda m, x, y: y[:4].t() * x[:, :4], (rng.random((4, 6)), rng.random((6, 4))), (1, 4)),
    "slice with a dim of size 1 plus a number": (lambda m, z: z[:, :, ::2] + 1.0, (rng.random((3, 1, 6)),), (3, 3, 1)),
}


def _strides(v):
    return tuple(s // v.itemsize for s in v.strides)


@pytest.mark.parametrize("name", list(CASES))
def test_layout_is_pytorchs(name):
    program, inputs, strides = CASES[name]
    ours = program(tg, *[tg.tensor(v, requires_grad=v.dtype == np.float64) for v in inputs])
    assert _strides(ours._value) == strides
    if torch is not None:
        theirs = program(torch, *[torch.tensor(v) for v in inputs])
        assert tuple(theirs.stride()) == strides
        np.testing.assert_array_equal(ours.detach().numpy(), theirs.numpy())


@pytest.mark.parametrize("name", ["maximum of a permuted and a contiguous", "erf of an expanded",
                                  "transposed times contiguous"])
def test_flatten_records_as_pytorch(name):
    """A non-contiguous result flattens through a copy (``UnsafeViewBackward0`` over
    ``CloneBackward0``), a contiguous one as a view (the fuzzer's seed-2 programs)."""
    program, inputs, _ = CASES[name]
    leaves = [tg.tensor(v, requires_grad=True) for v in inputs]
    out = program(tg, *leaves).flatten()
    names = (out.grad_fn.name(), out.grad_fn.next_functions[0][0].name())
    if torch is not None:
        t_leaves = [torch.tensor(v, requires_grad=True) for v in inputs]
        t_out = program(torch, *t_leaves).flatten()
        assert names == (t_out.grad_fn.name(), t_out.grad_fn.next_functions[0][0].name())
    want = ("ViewBackward0",) if name == "erf of an expanded" else ("UnsafeViewBackward0", "CloneBackward0")
    assert names[:len(want)] == want
    out.sum().backward()
    for x in leaves:
        assert x.grad is not None and x.grad.shape == x.shape


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("shape", [(2, 3, 4), (4, 5), (1, 4, 4), (3, 1, 5)])
def test_reduction_strides_are_pytorchs(shape):
    """A reduction's result (keepdim or not) of every permutation of ``shape`` has PyTorch's
    strides, the kept dims of size 1 included (NumPy's ``keepdims`` gave them the reduced
    dim's stride: 260 of 3,080 such results differed; ``all``, ``any`` and
    ``count_nonzero`` followed a permuted input's layout where PyTorch's are row-major),
    and ``matmul`` folds by them as PyTorch does (a keepdim sum of a transposed tensor times
    a vector: ``MvBackward0``, not a ``BmmBackward0``: the fuzzer's seed 127)."""
    import itertools
    for perm in itertools.permutations(range(len(shape))):
        for dim in range(len(shape)):
            for keepdim in (True, False):
                seen = []
                for lib in (tg, torch):
                    x = lib.tensor(np.arange(float(np.prod(shape))).reshape(shape),
                                   dtype=lib.float64).permute(*perm)
                    for name in ("sum", "mean", "amax", "prod", "logsumexp"):
                        y = getattr(x, name)(dim=dim, keepdim=keepdim)
                        seen.append((name, tuple(y.shape), y.stride()))
                    seen.append(("norm", x.norm(dim=dim, keepdim=keepdim).stride()))
                    for name in ("all", "any"):   # (PyTorch writes these row-major)
                        seen.append((name, getattr(x > 3.0, name)(dim=dim, keepdim=keepdim)
                                     .stride()))
                    seen.append(("count_nonzero", x.count_nonzero(dim=dim).stride()))
                half = len(seen) // 2
                assert seen[:half] == seen[half:], (perm, dim, keepdim)
    names = []
    for lib in (tg, torch):
        x = lib.tensor(np.arange(16.0).reshape(1, 4, 4), dtype=lib.float64, requires_grad=True)
        y = lib.matmul(x.transpose(0, -1).sum(dim=-2, keepdim=True),
                       lib.tensor([1.5], dtype=lib.float64))
        node = y.grad_fn.next_functions[0][0]
        names.append(type(node).__name__ if lib is torch else node.name())
    assert names[0] == names[1] == "MvBackward0"


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 4, 4), (3, 1, 5)])
def test_flip_sort_cummax_strides_are_pytorchs(shape):
    """``flip`` and ``sort`` keep a dense input's strides, those of its dims of size 1
    included (PyTorch's ``empty_like``), and ``cummax``'s indices are row-major, as
    PyTorch's: for every permutation of ``shape`` and every dim (55 of 464 such results
    differed in a size-1 dim's stride)."""
    import itertools
    for perm in itertools.permutations(range(len(shape))):
        for dim in range(len(shape)):
            seen = []
            for lib in (tg, torch):
                x = lib.tensor(np.arange(float(np.prod(shape))).reshape(shape),
                               dtype=lib.float64).permute(*perm)
                for y in (x.flip(dim), *x.sort(dim), *x.cummax(dim)):
                    seen.append((tuple(y.shape), y.stride()))
            half = len(seen) // 2
            assert seen[:half] == seen[half:], (perm, dim)
