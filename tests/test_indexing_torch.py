"""``x[idx]`` and ``x[idx] = v`` read as PyTorch reads them, where NumPy reads them otherwise
(torch 2.13; skipped without it): a list holding a sequence is a tuple of indices, a bool is a
new dim taken whole or not at all (not the integer 1), ``...`` beside ``None`` counts the
dims right, an empty list is no index, a slice's step must be positive, a mask must have the
shape of what it covers, and the errors are PyTorch's.  Values, shapes, ``grad_fn`` names,
gradients, or the exception's type and message."""
import warnings

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

LIBS = (tg, torch)

# each a function of (x: a (3, 2) float64 tensor with history, L: the library)
READS = {
    "x[True]": lambda x, L: x[True],
    "x[False]": lambda x, L: x[False],
    "x[True, 0]": lambda x, L: x[True, 0],
    "x[0, True]": lambda x, L: x[0, True],
    "x[False, None]": lambda x, L: x[False, None],
    "x[True, ..., 0]": lambda x, L: x[True, ..., 0],
    "x[..., True]": lambda x, L: x[..., True],
    "x[idx, True, ...]": lambda x, L: x[L.tensor([0, 2]), True, ...],
    "x[[True, False, True], True]": lambda x, L: x[[True, False, True], True],
    "x[mask2d, True]": lambda x, L: x[L.tensor([[True, False], [False, True], [True, True]]), True],
    "x[np.bool_(True)]": lambda x, L: x[np.bool_(True)],
    "x[[[0, 1]]]": lambda x, L: x[[[0, 1]]],
    "x[[[0, 1], [1, 0]]]": lambda x, L: x[[[0, 1], [1, 0]]],
    "x[[0, slice(None)]]": lambda x, L: x[[0, slice(None)]],
    "x[[None, 0]]": lambda x, L: x[[None, 0]],
    "x[[0, 1, 1]]": lambda x, L: x[[0, 1, 1]],
    "x[None, ..., None]": lambda x, L: x[None, ..., None],
    "x[0:1, ..., 0]": lambda x, L: x[0:1, ..., 0],
    "x[idx, ..., 0]": lambda x, L: x[L.tensor([0, 2]), ..., 0],
    "x[..., None, 1]": lambda x, L: x[..., None, 1],
    "x[None, 0, ..., None]": lambda x, L: x[None, 0, ..., None],
    "y[..., mask, 0]": lambda x, L: x.reshape(3, 2, 1).expand(3, 2, 4)[..., L.tensor([True, False]), 0],
    "y[..., mask of 3, 0]": lambda x, L: x.reshape(3, 2, 1).expand(3, 2, 4)[..., L.tensor([True, False, True]), 0],
    "x[[]]": lambda x, L: x[[]],
    "x[:, ::2]": lambda x, L: x[:, ::2],
    # errors
    "x[::-1]": lambda x, L: x[::-1],
    "x[idx, ::-1]": lambda x, L: x[L.tensor([0, 2]), ::-1],
    "x[::0]": lambda x, L: x[::0],
    "x[1.5]": lambda x, L: x[1.5],
    "x[np.float64(1)]": lambda x, L: x[np.float64(1.0)],
    "x[0, 0.5]": lambda x, L: x[0, 0.5],
    "x[object()]": lambda x, L: x[object()],
    "x[empty mask]": lambda x, L: x[L.tensor(np.zeros(0, bool))],
    "x[mask of 2]": lambda x, L: x[L.tensor([True, False])],
    "x[:, mask of 3]": lambda x, L: x[:, L.tensor([True, False, True])],
    "x[mask 3x3]": lambda x, L: x[L.tensor(np.ones((3, 3), bool))],
    "x[0, mask of 3]": lambda x, L: x[0, L.tensor([True, False, True])],
}


def _leaf(lib):
    return lib.tensor(np.arange(6.0).reshape(3, 2) - 2.5, requires_grad=True)


def _outcome(lib, fn):
    x = _leaf(lib)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = fn(x * 1.0, lib)
    except (IndexError, ValueError, RuntimeError, TypeError) as e:
        return (type(e).__name__, str(e).split(" (Triggered")[0])
    node = type(y.grad_fn).__name__ if lib is torch else y.grad_fn.name()
    if y.numel():
        y.backward(lib.tensor(np.linspace(-1.0, 2.0, y.numel()).reshape(tuple(y.shape))))
    grad = None if x.grad is None else x.grad.numpy().tolist()
    return (tuple(y.shape), y.detach().numpy().tolist(), node, grad)


@pytest.mark.parametrize("name", READS)
def test_reads_as_pytorch(name):
    assert _outcome(tg, READS[name]) == _outcome(torch, READS[name])


# each (index, value) for x[index] = value on a (3, 2) tensor
WRITES = {
    "x[True] = 7": (lambda L: True, lambda L: 7.0),
    "x[False] = 7": (lambda L: False, lambda L: 7.0),
    "x[True, 0] = row": (lambda L: (True, 0), lambda L: L.tensor(np.array([[9.0, 8.0]]))),
    "x[[[0, 2]]] = 7": (lambda L: [[0, 2]], lambda L: 7.0),
    "x[None, ..., None] = col": (lambda L: (None, Ellipsis, None), lambda L: L.tensor(np.array([[-1.0], [-2.0]]))),
    "x[0:1, ..., 0] = 7": (lambda L: (slice(0, 1), Ellipsis, 0), lambda L: 7.0),
    "x[[]] = 7": (lambda L: [], lambda L: 7.0),
    "x[::-1] = 7": (lambda L: slice(None, None, -1), lambda L: 7.0),
    "x[mask of 2] = 7": (lambda L: L.tensor([True, False]), lambda L: 7.0),
}


@pytest.mark.parametrize("name", WRITES)
def test_writes_as_pytorch(name):
    index, value = WRITES[name]
    results = []
    for lib in LIBS:
        x = lib.tensor(np.arange(6.0).reshape(3, 2))
        try:
            x[index(lib)] = value(lib)
            results.append(x.numpy().tolist())
        except (IndexError, ValueError, RuntimeError) as e:
            results.append((type(e).__name__, str(e).split(" (Triggered")[0]))
    assert results[0] == results[1]


@pytest.mark.parametrize("name", ["x[True, 0]", "x[0, True]", "x[[[0, 1], [1, 0]]]",
                                  "x[None, ..., None]", "x[idx, True, ...]"])
def test_gradients_match_finite_differences(name):
    fn = READS[name]
    assert tg.autograd.gradcheck(lambda x: fn(x, tg) * fn(x, tg), (_leaf(tg),))


def test_a_list_read_as_a_tuple_warns_as_pytorch():
    for lib in LIBS:
        with pytest.warns(UserWarning, match="non-tuple sequence for multidimensional indexing"):
            _leaf(lib)[[[0, 1]]]
