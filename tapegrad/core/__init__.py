"""The core: the op table, the tape, tensors, grad_fn views and the generated kernels.

Nothing here imports from the layers above (``ops``, ``autograd``, ``compile``, ``nn``,
``optim``, ``viz``); they extend ``Tensor`` and ``Tape`` with their methods
(``tensor.extend``).
"""
from __future__ import annotations

from . import elementwise, interrupts, memory, optable
from .tensor import Tensor, extend

# (before any tape holds arrays: see memory's docstring)
memory.retain_heap_top()


def _elementwise_methods():
    """Tensor methods and operators of the op table's rows (a row with a ``keyword`` gets its
    method from the ops layer, whose function takes the keyword)."""
    methods = {}
    for op in optable.OPS:
        fn = elementwise.FUNCTIONS[op.name]
        if op.method and not op.keyword:
            methods[op.name] = elementwise.WITH_ALPHA.get(op.name, fn)
        if op.dunder:
            methods[f"__{op.dunder}__"] = fn
            if op.name in elementwise.REFLECTED:
                methods[f"__r{op.dunder}__"] = elementwise.REFLECTED[op.name]
    methods["__radd__"] = elementwise.REFLECTED["add"]
    # PyTorch's aliases
    methods.update(true_divide=elementwise.FUNCTIONS["div"], multiply=methods["mul"],
                   subtract=methods["sub"])
    return methods


extend(Tensor, _elementwise_methods())
# the generated recording fast paths write the tape: Ctrl-C waits for them to return
interrupts.protect(*elementwise.FUNCTIONS.values(), *elementwise.REFLECTED.values(),
                   *elementwise.WITH_ALPHA.values())
interrupts.install()
