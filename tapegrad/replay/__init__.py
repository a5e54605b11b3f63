"""Compiled replay: a recorded tape run again in Numba at new inputs (values, gradients,
batches, forward mode, Hessians), tape passes, sparsity, save/load, and ``tg.compile``."""
from __future__ import annotations

from ..core.tape import Tape
from ..core.tensor import extend
from .compiled_tape import CompiledTape, RetraceRequired, compile, compile_tape, load  # noqa: A004


def _tape_compile(self, inputs, outputs, optimize: bool = True):
    """A :class:`~tapegrad.replay.compiled_tape.CompiledTape`: this recording replayed in Numba at
    new values of ``inputs`` (value, gradient, batches of points).  ``optimize`` folds
    constants, merges common subexpressions and drops dead entries first (``.stats`` says
    how much each pass removed)."""
    return compile_tape(self, inputs, outputs, optimize)


extend(Tape, {"compile": _tape_compile})

__all__ = ["CompiledTape", "RetraceRequired", "compile", "compile_tape", "load"]
