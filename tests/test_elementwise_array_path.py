"""The generated fast path of elementwise ops on float64 arrays (``core/elementwise.py``)
records exactly what ``elementwise_fallback``'s general array path records: the same
entries, operand references, constants and array constants, the same values, and a plain
result where nothing requires grad.  And a tape whose entries refer to later entries is
refused at the flush before a sweep, on the short and the long copy alike.
"""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import optable
from tapegrad.core.elementwise import FUNCTIONS
from tapegrad.core.tensor import elementwise_fallback

DATA = np.array([0.25, 0.5, 0.75, 0.125, 0.625])   # in every op's domain (log, asin, ...)
OTHER = np.array([0.5, 0.375, 0.25, 0.875, 0.125])

OPS = [(k, op) for k, op in enumerate(optable.OPS)
       if op.arity in (1, 2) and not op.compare and op.name in FUNCTIONS]


def _operands(kind):
    """(x, y) for the binary cases: a leaf or a constant array, with a leaf, a constant
    array, a 0-d leaf, a 0-d constant, a Python float or int."""
    x = tg.tensor(DATA, requires_grad=kind != "const, const")
    return x, {"leaf, leaf": lambda: tg.tensor(OTHER, requires_grad=True),
               "leaf, const": lambda: tg.tensor(OTHER),
               "const, leaf": lambda: tg.tensor(OTHER, requires_grad=True),
               "const, const": lambda: tg.tensor(OTHER),
               "leaf, 0-d leaf": lambda: tg.tensor(0.5, requires_grad=True),
               "leaf, 0-d const": lambda: tg.tensor(0.5),
               "leaf, float": lambda: 0.75,
               "leaf, int": lambda: 2}[kind]()


def _recorded(fn, args):
    """What ``fn(*args)`` records on a tape of its own: (entries, constants, result)."""
    with tg.Tape() as T, np.errstate(all="ignore"):
        r = fn(*args)
    entries = [(e.op, e.inputs, np.asarray(e.value).tolist()) for e in T]
    # constants: their values, which came from tensors, and the array constants' sources
    consts = (list(T._c), sorted(T._tensor_consts),
              {k: (id(t), v) for k, (t, v) in T._const_sources.items()})
    return entries, consts, r


def _same(fast, general):
    (ef, cf, rf), (eg, cg, rg) = fast, general
    assert ef == eg
    assert cf == cg
    assert rf.requires_grad == rg.requires_grad and rf.is_leaf == rg.is_leaf
    np.testing.assert_array_equal(rf.detach().numpy(), rg.detach().numpy())
    np.testing.assert_array_equal(np.signbit(rf.detach().numpy()), np.signbit(rg.detach().numpy()))


@pytest.mark.parametrize("code, op", [(k, op) for k, op in OPS if op.arity == 1],
                         ids=lambda v: getattr(v, "name", ""))
@pytest.mark.parametrize("grad", [True, False])
def test_unary_array_path_records_as_the_general_path(code, op, grad):
    x = tg.tensor(DATA, requires_grad=grad)
    _same(_recorded(FUNCTIONS[op.name], (x,)), _recorded(elementwise_fallback, (code, (x,))))


@pytest.mark.parametrize("code, op", [(k, op) for k, op in OPS if op.arity == 2],
                         ids=lambda v: getattr(v, "name", ""))
@pytest.mark.parametrize("kind", ["leaf, leaf", "leaf, const", "const, leaf", "const, const",
                                  "leaf, 0-d leaf", "leaf, 0-d const", "leaf, float",
                                  "leaf, int"])
def test_binary_array_path_records_as_the_general_path(code, op, kind):
    x, y = _operands(kind)
    if kind == "const, leaf":
        x = tg.tensor(DATA)
    _same(_recorded(FUNCTIONS[op.name], (x, y)),
          _recorded(elementwise_fallback, (code, (x, y))))


def test_array_path_under_no_grad_records_nothing():
    x = tg.tensor(DATA, requires_grad=True)
    with tg.no_grad():
        y = (x * x).sin() + 1
    assert not y.requires_grad and y.grad_fn is None
    np.testing.assert_array_equal(y.numpy(), np.sin(DATA * DATA) + 1)


@pytest.mark.parametrize("length", [3, 40])   # (a flush copies up to 32 entries directly)
def test_a_tape_entry_that_refers_to_a_later_one_is_refused(length):
    x = tg.tensor(0.5, requires_grad=True)
    with tg.Tape() as T:
        y = x
        for _ in range(length):
            y = y * 1.5
    T._rec_a[length // 2] = len(T) + 5   # (a broken tape, as only a bug could write it)
    with pytest.raises(RuntimeError, match="internal error: tape entry"):
        y.backward()
