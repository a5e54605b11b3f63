"""Differential fuzzing of tapegrad against PyTorch.

A program is a list of ``Step``s (data, not source text), so that a failing one can be cut
down step by step and printed as a short reproducer.  Step ``i`` binds ``v{i}``; arguments
refer to earlier results through ``Ref(i)``.  The same steps run on tapegrad and on torch
(float64); every result is observed (value, dtype, shape, requires_grad, is_leaf, grad_fn
and a few levels of next_functions, or the exception class), then every ``.grad`` and every
hook call, and the two observation lists are compared.

Programs are generated *while running them on torch*: a proposed step that torch refuses
is dropped, so the programs are mostly valid PyTorch and a tapegrad exception is a finding.
Steps whose error behaviour is the point (in-place on a leaf, a second backward through a
freed graph) are kept even when torch raises.

Families: ``scalar`` (0-d DAGs over every op of the op table, special points),
``tensor`` (array ops, indexing, in-place, losses, int/bool tensors), ``autograd``
(hooks, retain_grad, detach, no_grad, retain_graph, autograd.grad), ``create_graph``
(second derivatives) and ``replay`` (``tg.compile`` and ``tape.compile`` at new points).
"""
from __future__ import annotations

import ast
import contextlib
import math
import operator
import random
import signal
import threading
import warnings
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch

import tapegrad as tg
from tapegrad.core.optable import OPS
from tapegrad.ops.array_ops import ARRAY_OPS
from tapegrad.ops.torch_api import FUNCTIONS as ARRAY_FUNCTIONS

# names whose backward is an array-op rule (the rows, and the PyTorch-shaped functions over them)
ARRAY_OP_NAMES = set(ARRAY_OPS) | set(ARRAY_FUNCTIONS) | {"var", "std", "norm", "t", "T"}

torch.set_default_dtype(torch.float64)

FAMILIES = ("scalar", "tensor", "autograd", "create_graph", "replay")

# ---------------------------------------------------------------------------------------
# Program representation


@dataclass(frozen=True)
class Ref:
    """The result of step ``i`` (printed as ``v{i}``)."""
    i: int


@dataclass(frozen=True)
class Dtype:
    """A dtype literal, resolved per library (``lib.int64``)."""
    name: str


@dataclass(frozen=True)
class Step:
    # leaf, input, call, method, binop, pyfn, getitem, setitem, attr, backward, grad, hook, ifgt
    kind: str
    name: str = ""       # function, method, operator symbol, attribute or hook name
    args: tuple = ()
    kw: tuple = ()       # (name, value) pairs
    nograd: bool = False  # run inside ``with lib.no_grad():``
    error_ok: bool = False  # torch may raise here: the error itself is compared


@dataclass
class Program:
    family: str
    steps: List[Step]
    points: list = field(default_factory=list)  # replay: new inputs to evaluate at
    mode: str = ""                              # replay: "tg.compile" or "tape.compile"


# Names that differ between tapegrad and torch.  Every op-table name exists in torch under
# the same name today; the map stays so that a renamed op costs one line here.
TORCH_NAMES: Dict[str, str] = {}

BINOPS: Dict[str, Callable] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "**": operator.pow, "@": operator.matmul, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
}
DUNDER_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "pow": "**"}
COMPARE_SYMBOLS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}

# Hooks are named so that a program stays plain data; each is also its own source text.
HOOKS: Dict[str, str] = {
    "none": "lambda g: None",
    "double": "lambda g: g * 2",
    "add1": "lambda g: g + 1",
}


class Lib:
    """One side of the comparison: the module plus the differences in spelling."""

    def __init__(self, module, name: str):
        self.module, self.name = module, name

    def fn(self, dotted: str):
        obj = self.module
        for part in dotted.split("."):
            if self.name == "torch":
                part = TORCH_NAMES.get(part, part)
            obj = getattr(obj, part)
        return obj


TG = Lib(tg, "tg")
TORCH = Lib(torch, "torch")


class ProgramTimeout(BaseException):
    """Raised by the per-program alarm; a BaseException so library code cannot swallow it."""


# ---------------------------------------------------------------------------------------
# Running a program


def resolve(arg, env, lib):
    if isinstance(arg, Ref):
        return env[arg.i]
    if isinstance(arg, Dtype):
        return getattr(lib.module, arg.name)
    if isinstance(arg, list):
        return [resolve(a, env, lib) for a in arg]
    if isinstance(arg, tuple):
        return tuple(resolve(a, env, lib) for a in arg)
    if isinstance(arg, slice):
        return slice(resolve(arg.start, env, lib), resolve(arg.stop, env, lib),
                     resolve(arg.step, env, lib))
    return arg


def make_hook(name: str, calls: list):
    def hook(g):
        calls.append(observe(g))
        if name == "double":
            return g * 2
        if name == "add1":
            return g + 1
        return None
    return hook


def execute(step: Step, env: list, lib: Lib, hook_calls: Dict[int, list]):
    """Run one step; returns the value bound to ``v{i}``."""
    args = resolve(step.args, env, lib)
    kw = {k: resolve(v, env, lib) for k, v in step.kw}
    grad_mode = lib.module.no_grad() if step.nograd else contextlib.nullcontext()
    with grad_mode:
        k = step.kind
        if k == "leaf":
            data, dtype, requires_grad = args
            return lib.module.tensor(data, dtype=dtype, requires_grad=requires_grad)
        if k == "call":
            return lib.fn(step.name)(*args, **kw)
        if k == "method":
            return getattr(args[0], step.name)(*args[1:], **kw)
        if k == "binop":
            if step.name == "neg":
                return -args[0]
            return BINOPS[step.name](*args)
        if k == "pyfn":  # Python's builtin max/min/abs on tensors
            return {"max": max, "min": min, "abs": abs}[step.name](*args)
        if k == "getitem":
            return args[0][args[1]]
        if k == "setitem":
            args[0][args[1]] = args[2]
            return args[0]
        if k == "attr":
            return getattr(args[0], step.name)
        if k == "backward":
            args[0].backward(**kw)
            return None
        if k == "grad":
            return lib.module.autograd.grad(args[0], args[1], **kw)
        if k == "hook":
            calls = hook_calls.setdefault(len(env), [])
            args[0].register_hook(make_hook(step.name, calls))
            return None
        if k == "ifgt":
            p, q, then_name, then_arg, else_name, else_arg = args
            if p > q:
                return lib.fn(then_name)(then_arg)
            return lib.fn(else_name)(else_arg)
        raise ValueError(f"unknown step kind {k!r}")


# Off while ``warm_up`` runs: a first compile of the kernels takes longer than a program's
# budget on a busy machine, and an alarm that interrupts it leaves it to start again with
# the next program (two fuzzer processes on a fresh checkout compiled for 20 minutes).
_BUDGETS = {"on": True, "warm": False}


@contextlib.contextmanager
def time_budget(seconds: float):
    """Nothing may hang: an alarm interrupts a program that runs too long (main thread only)."""
    if threading.current_thread() is not threading.main_thread() or not seconds or \
            not _BUDGETS["on"]:
        yield
        return

    def alarm(signum, frame):
        raise ProgramTimeout()

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def is_tensor(v) -> bool:
    return isinstance(v, (tg.Tensor, torch.Tensor))


def node_signature(fn, depth: int):
    """grad_fn class name and the names of its next_functions, ``depth`` levels down."""
    if fn is None:
        return None
    name = type(fn).__name__
    if depth == 0:
        return (name,)
    nexts = getattr(fn, "next_functions", ())
    return (name, tuple(node_signature(n, depth - 1) for n, _ in nexts))


def torch_value(v) -> np.ndarray:
    """A torch tensor's values.  Torch's double backward may hand out a ZeroTensor, whose
    ``numpy(force=True)`` can crash torch 2.13 (a segfault in memset): read zeros instead."""
    t = v.detach()
    if t._is_zerotensor():
        return np.zeros(tuple(t.shape), dtype=np.dtype(str(t.dtype).split(".")[-1]))
    return np.array(t.numpy(force=True))


def _graph_place(v) -> dict:
    """``is_leaf`` and ``grad_fn`` of ``v``, or the error reading them raises (a multi-output
    view whose memory changed in place refuses both, in PyTorch as here)."""
    try:
        return {"is_leaf": bool(v.is_leaf), "grad_fn": node_signature(v.grad_fn, 3)}
    except RuntimeError as e:
        raised = ("raises", type(e).__name__)
        return {"is_leaf": raised, "grad_fn": raised}


def observe(v) -> dict:
    if v is None:
        return {"type": "None"}
    if is_tensor(v):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return {
                "type": "tensor",
                "dtype": str(v.dtype).split(".")[-1],
                "shape": tuple(v.shape),
                "value": torch_value(v) if isinstance(v, torch.Tensor) else
                np.array(v.detach().numpy()),
                "requires_grad": bool(v.requires_grad),
                **_graph_place(v),
            }
    if isinstance(v, (tuple, list)):
        return {"type": "seq", "len": len(v), "items": [observe(x) for x in v]}
    if isinstance(v, (bool, int, float, np.floating, np.integer)):
        return {"type": "number", "value": np.array(v, dtype=float)}
    return {"type": type(v).__name__}


@dataclass
class Outcome:
    records: List[Tuple[str, Any]]   # (label, observation dict or ("exc", class name))
    inplace_on_view: bool = False     # torch only: an in-place step wrote into a view


def run_steps(program: Program, lib: Lib, timeout: float = 5.0) -> Outcome:
    """Run on one library, catching everything: a crash of this runner is itself recorded."""
    records: List[Tuple[str, Any]] = []
    out = Outcome(records)
    env: list = []
    hook_calls: Dict[int, list] = {}
    try:
        with time_budget(timeout), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for i, step in enumerate(program.steps):
                if step.kind in ("setitem", "method") and lib is TORCH and step.args:
                    target = resolve(step.args[0], env, lib)
                    writes = step.kind == "setitem" or step.name.endswith("_")
                    if writes and is_tensor(target) and target._is_view():
                        out.inplace_on_view = True
                try:
                    value = execute(step, env, lib, hook_calls)
                except ProgramTimeout:
                    raise
                except Exception as e:  # noqa: BLE001 - every exception is an observation
                    records.append((f"v{i}", ("exc", type(e).__name__)))
                    return out
                env.append(value)
                records.append((f"v{i}", observe(value)))
            for i, v in enumerate(env):
                if is_tensor(v):
                    records.append((f"v{i}.grad", observe(v.grad)))
                    records.append((f"v{i}.after", observe(v)))
            for i in sorted(hook_calls):
                records.append((f"hook v{i}", {"type": "calls", "len": len(hook_calls[i])}))
                for j, call in enumerate(hook_calls[i]):
                    records.append((f"hook v{i} call {j}", call))
    except ProgramTimeout:
        records.append(("program", ("timeout", "")))
    except BaseException as e:  # noqa: BLE001 - the runner itself must never take the fuzzer down
        records.append(("program", ("crash", f"{type(e).__name__}: {e}")))
    return out


# ---------------------------------------------------------------------------------------
# Replay: tg.compile and tape.compile evaluated at new points against fresh torch runs


def run_body(steps, env, lib):
    for step in steps:
        env.append(execute(step, env, lib, {}))
    return env[-1]


def torch_at(program: Program, point) -> Tuple[float, np.ndarray]:
    """Value and flat gradient of the program run freshly by torch at ``point``."""
    if program.mode == "tg.compile":
        x = torch.tensor(np.asarray(point, dtype=float), requires_grad=True)
        y = run_body(program.steps[1:], [x], TORCH)
        leaves = [x]
    else:
        leaves, env, arrays = [], [], iter(point)
        for step in program.steps:
            if step.kind == "leaf" and step.args[2]:
                data = next(arrays)
                step = replace(step, args=(np.asarray(data).tolist(),) + step.args[1:])
            env.append(execute(step, env, TORCH, {}))
            if step.kind == "leaf" and step.args[2]:
                leaves.append(env[-1])
        y = env[-1]
    grads = torch.autograd.grad(y, leaves, allow_unused=True)
    flat = [np.zeros(t.numel()) if g is None else torch_value(g).ravel()
            for g, t in zip(grads, leaves)]
    return float(y), np.concatenate(flat)


def run_replay(program: Program, lib: Lib, timeout: float = 10.0) -> Outcome:
    records: List[Tuple[str, Any]] = []
    try:
        with time_budget(timeout), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if lib is TORCH:
                evaluate = lambda p: torch_at(program, p)  # noqa: E731
                batch = None
                records.append(("compile", {"type": "None"}))
            else:
                try:
                    fn = compile_tapegrad(program)
                    records.append(("compile", {"type": "None"}))
                except ProgramTimeout:
                    raise
                except Exception as e:  # noqa: BLE001 - refusing to compile is an observation
                    records.append(("compile", ("exc", type(e).__name__)))
                    return Outcome(records)
                evaluate = lambda p: fn.value_and_grad(p)  # noqa: E731
                batch = fn
            for j, p in enumerate(program.points):
                try:
                    value, grad = evaluate(p)
                    records.append((f"point {j}", {"type": "point", "value": np.array(value),
                                                   "grad": np.asarray(grad).ravel()}))
                except ProgramTimeout:
                    raise
                except tg.RetraceRequired:
                    # documented for tape.compile: a guard that flips raises (torch just
                    # follows the other branch); tg.compile must retrace instead
                    name = "documented" if program.mode == "tape.compile" else "RetraceRequired"
                    records.append((f"point {j}", ("retrace", name)))
                except Exception as e:  # noqa: BLE001
                    records.append((f"point {j}", ("exc", type(e).__name__)))
            if program.mode == "tg.compile" and len(program.points) > 1:
                # the whole batch at once must agree with the points one by one
                if lib is TORCH:
                    at_points = [r[1] for r in records if r[0].startswith("point")]
                    values = [r["value"] for r in at_points if isinstance(r, dict)]
                    grads = [r["grad"] for r in at_points if isinstance(r, dict)]
                    if len(values) == len(program.points):
                        records.append(("batch", {"type": "point", "value": np.array(values),
                                                  "grad": np.concatenate(grads)}))
                    else:
                        records.append(("batch", ("exc", "point raised")))
                else:
                    try:
                        values, grads = batch.value_and_grad(np.array(program.points))
                        records.append(("batch", {"type": "point", "value": np.asarray(values),
                                                  "grad": np.asarray(grads).ravel()}))
                    except ProgramTimeout:
                        raise
                    except Exception as e:  # noqa: BLE001
                        records.append(("batch", ("exc", type(e).__name__)))
    except ProgramTimeout:
        records.append(("program", ("timeout", "")))
    except BaseException as e:  # noqa: BLE001
        records.append(("program", ("crash", f"{type(e).__name__}: {e}")))
    return Outcome(records)


def compile_tapegrad(program: Program):
    if program.mode == "tg.compile":
        body = program.steps[1:]
        return tg.compile(lambda x: run_body(body, [x], TG))
    with tg.Tape() as tape:
        env: list = []
        run_body(program.steps, env, TG)
    inputs = [env[i] for i, s in enumerate(program.steps) if s.kind == "leaf" and s.args[2]]
    return tape.compile(inputs, [env[-1]])


# ---------------------------------------------------------------------------------------
# Comparing


@dataclass
class Mismatch:
    kind: str
    label: str
    detail: str

    def step_index(self) -> Optional[int]:
        head = self.label.split(".")[0].split(" ")[-1]
        return int(head[1:]) if head.startswith("v") and head[1:].isdigit() else None


def values_differ(a: np.ndarray, b: np.ndarray) -> Optional[str]:
    if a.shape != b.shape:
        return "shape"
    a = a.astype(float) if a.dtype != bool else a
    b = b.astype(float) if b.dtype != bool else b
    if a.dtype == bool or b.dtype == bool:
        return None if np.array_equal(a, b) else "value"
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if not np.array_equal(nan_a, nan_b):
        return "nan"
    ok = ~nan_a
    if not np.allclose(a[ok], b[ok], rtol=1e-9, atol=1e-12):
        return "value"
    zeros = ok & (a == 0) & (b == 0)
    if not np.array_equal(np.signbit(a[zeros]), np.signbit(b[zeros])):
        return "signed-zero"
    return None


def compare_obs(mine, theirs) -> Optional[Tuple[str, str]]:
    """(kind, detail) of the first difference between two observations, or None."""
    if isinstance(mine, tuple) or isinstance(theirs, tuple):
        if isinstance(mine, tuple) and mine[0] in ("crash", "timeout", "retrace"):
            return mine[0], mine[1]
        if isinstance(mine, tuple) and isinstance(theirs, tuple):
            if mine[1] == theirs[1]:
                return None
            return "exception-type", f"tg {mine[1]} / torch {theirs[1]}"
        raised = f"tg {mine[1]}" if isinstance(mine, tuple) else f"torch {theirs[1]}"
        return f"exception({raised})", raised + " raised"
    if mine["type"] != theirs["type"]:
        if {mine["type"], theirs["type"]} == {"None", "tensor"}:
            t = theirs if theirs["type"] == "tensor" else mine
            zero = not np.any(t["value"])
            side = "tg" if mine["type"] == "None" else "torch"
            return ("none-vs-zero" if zero else "none-vs-value"), f"{side} None"
        return "type", f"tg {mine['type']} / torch {theirs['type']}"
    if mine["type"] == "seq":
        if mine["len"] != theirs["len"]:
            return "len", f"tg {mine['len']} / torch {theirs['len']}"
        for a, b in zip(mine["items"], theirs["items"]):
            diff = compare_obs(a, b)
            if diff:
                return diff
        return None
    for key in ("len", "dtype", "shape"):
        if key in mine and mine[key] != theirs[key]:
            return key, f"tg {mine[key]} / torch {theirs[key]}"
    for key in ("value", "grad"):
        if key in mine:
            kind = values_differ(mine[key], theirs[key])
            if kind:
                prefix = "grad-" if key == "grad" else ""
                return prefix + kind, f"tg {mine[key].tolist()} / torch {theirs[key].tolist()}"
    for key in ("requires_grad", "is_leaf"):
        if key in mine and mine[key] != theirs[key]:
            return key, f"tg {mine[key]} / torch {theirs[key]}"
    if "grad_fn" in mine and mine["grad_fn"] != theirs["grad_fn"]:
        a, b = mine["grad_fn"], theirs["grad_fn"]
        top = (a or ("None",))[0] != (b or ("None",))[0]
        return ("grad_fn" if top else "next_functions"), f"tg {a} / torch {b}"
    return None


# Which mismatch names a program's failure when it has several: a wrong value or gradient
# matters more than a graph that prints differently, so structure never masks a number.
SEVERITY = ("crash", "timeout", "retrace", "exception", "exception-type", "missing", "value", "nan",
            "shape", "dtype", "len", "type", "none-vs-value", "requires_grad", "is_leaf",
            "none-vs-zero", "signed-zero", "grad_fn", "next_functions")


def severity(kind: str) -> int:
    base = kind.split("-", 1)[1] if kind.startswith(("grad-", "hook-", "after-")) else kind
    base = base.split("(")[0]
    base = "value" if base == "value" or base not in SEVERITY else base
    return SEVERITY.index(base)


def compare(mine: Outcome, theirs: Outcome) -> Optional[Mismatch]:
    """The most severe difference (the earliest among equals), or None.  Records are matched
    by label: a side that raised stops recording, and hooks may be called a different number
    of times, so the two lists need not line up."""
    a, b = dict(mine.records), dict(theirs.records)
    order = [label for label, _ in theirs.records] + [l for l, _ in mine.records if l not in b]
    stopped = {id(a): _stopped(mine), id(b): _stopped(theirs)}
    found: List[Mismatch] = []
    for label in order:
        if label in a and label in b:
            diff = compare_obs(a[label], b[label])
            if diff:
                kind, detail = diff
                if kind in ("crash", "timeout"):
                    pass
                elif ".grad" in label:
                    kind = "grad-" + kind if not kind.startswith("grad") else kind
                elif label.startswith("hook"):
                    kind = "hook-" + kind
                elif label.endswith(".after"):
                    kind = "after-" + kind
                found.append(Mismatch(kind, label, detail))
        elif label.startswith("hook"):  # an extra or missing call: also a count mismatch
            called = "called" if label in a else "not called"
            found.append(Mismatch("hook-len", label, f"tg {called}"))
        else:
            side = a if label not in a else b  # the side lacking it must have stopped early
            owner = "tg" if label in a else "torch"
            record = (a if label in a else b)[label]
            if label == "program" and isinstance(record, tuple) and record[0] in ("crash",
                                                                                  "timeout"):
                # one side's runner timed out or crashed: say so (it is no missing value)
                found.append(Mismatch(record[0], label, f"{owner}: {record[1]}".rstrip(": ")))
            elif not stopped[id(side)]:
                found.append(Mismatch("missing", label, f"only {owner} has it"))
    if not found:
        return None
    return min(found, key=lambda m: severity(m.kind))


def _stopped(outcome: Outcome) -> bool:
    return bool(outcome.records) and isinstance(outcome.records[-1][1], tuple)


# ---------------------------------------------------------------------------------------
# Documented deviations: the ONLY mismatches the comparator skips


@dataclass(frozen=True)
class Deviation:
    reason: str                                       # the README bullet it quotes
    applies: Callable[[Program, Outcome, Mismatch], bool]


def _after_create_graph(program: Program, m: "Mismatch") -> bool:
    """Does the mismatching value come after a step that recorded a backward pass?"""
    last = m.step_index()
    steps = program.steps if last is None else program.steps[:last + 1]
    return any(("create_graph", True) in s.kw for s in steps)


_NOT_ARRAY_OPS = {"where", "clamp", "maximum", "minimum", "pow", "atan2"}


def _step_kind(program: Program, m: "Mismatch") -> Optional[str]:
    """The kind of the step where ``m`` showed (``grad``: a gradient autograd.grad returned)."""
    k = m.step_index()
    return program.steps[k].kind if k is not None and k < len(program.steps) else None


def _uses_array_ops(program: Program) -> bool:
    """Does a step run an array op's rule (a reduction, matmul, indexing, a shape op)?"""
    elementwise = {op.name for op in OPS} | _NOT_ARRAY_OPS
    for s in program.steps:
        name = (s.name or "").split(".")[-1].strip("_")
        if s.kind in ("getitem", "setitem") or name in ("@", "matmul", "mm", "mv", "dot"):
            return True
        if s.kind in ("call", "method") and name and name not in elementwise and \
                name in ARRAY_OP_NAMES:
            return True
    return False


_PICKS_ZERO = {"maximum", "minimum", "clamp", "clamp_min", "clamp_max", "amax", "amin", "max",
               "min"}


def _values_at(program: Program, m: "Mismatch", lib: Lib) -> List[list]:
    """Every step's value when ``lib`` runs the program: a replay program without grad at the
    point (or, for a batch, each point) where the gradients differ ([] when a step refuses),
    another program as it is."""
    if program.family != "replay":   # the program as it is, up to a step that raises
        env: list = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                run_body(program.steps, env, lib)
            except Exception:  # noqa: BLE001 - the values before it still count
                pass
        return [env]
    label = m.label.split()
    points = program.points if label[0] != "point" else [program.points[int(label[1])]]
    runs = []
    for point in points:
        if program.mode == "tg.compile":
            env = [lib.module.tensor(np.asarray(point, dtype=float).tolist(),
                                     dtype=lib.module.float64)]
            steps = program.steps[1:]
        else:
            env, steps, arrays = [], [], iter(point)
            for step in program.steps:
                if step.kind == "leaf" and step.args[2]:
                    step = replace(step, args=(np.asarray(next(arrays)).tolist(),) + step.args[1:])
                steps.append(step)
        with lib.module.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                run_body(steps, env, lib)
            except Exception:  # noqa: BLE001 - a step that refuses without grad
                return []
        runs.append(env)
    return runs


def _floats(v) -> Optional[np.ndarray]:
    if isinstance(v, torch.Tensor) and v.dtype == torch.float64:
        return torch_value(v).astype(float)
    if isinstance(v, tg.Tensor) and v.dtype == tg.float64:
        return np.asarray(v.detach().tolist(), dtype=float)
    return None


def _nonfinite_at(program: Program, m: "Mismatch") -> bool:
    """Is an input or an intermediate value of the replayed program ±inf or NaN at the point
    where the gradients differ?  (PyTorch computes it.)"""
    for env in _values_at(program, m, TORCH):
        if any(v is not None and not np.isfinite(v).all() for v in map(_floats, env)):
            return True
    return False


_BRANCHES = {"clamp", "maximum", "minimum", "where", "amax", "amin", "max", "min", "relu",
             ">", ">=", "<", "<=", "==", "!=", "gt", "ge", "lt", "le", "eq", "ne", "ifgt",
             "trunc", "floor", "ceil", "round", "sign"}


def _rounding_tie(program: Program, m: "Mismatch") -> bool:
    """Do tapegrad and PyTorch compute a value that differs by rounding only (summed in
    another order), which a later branch-like op (comparison, clamp, max, where) meets?"""
    names = [(s.name or s.kind).split(".")[-1] for s in program.steps]
    last = None if m.label.endswith(".grad") else m.step_index()   # (a .grad: any step)
    if last is not None:   # the branch must come before the value that differs
        names = names[:last + 1]
    mine, theirs = _values_at(program, m, TG), _values_at(program, m, TORCH)
    for env_tg, env_torch in zip(mine, theirs):
        for k, (a, b) in enumerate(zip(map(_floats, env_tg), map(_floats, env_torch))):
            if a is None or b is None or a.shape != b.shape or np.array_equal(a, b, equal_nan=True):
                continue
            if np.allclose(a, b, rtol=1e-13, atol=0, equal_nan=True) and \
                    any(n in _BRANCHES for n in names[k + 1:]):
                return True
    return False


def _zero_pick(program: Program, m: "Mismatch") -> bool:
    """Is the first value that differs between tapegrad and PyTorch the result of an op that
    picks between equal values (``maximum(0., -0.)``) differing in the sign of a zero only?
    (Every later difference follows from it.)"""
    names = [(s.name or s.kind).split(".")[-1] for s in program.steps]
    for env_tg, env_torch in zip(_values_at(program, m, TG), _values_at(program, m, TORCH)):
        for k, (a, b) in enumerate(zip(map(_floats, env_tg), map(_floats, env_torch))):
            if a is None or b is None or a.shape != b.shape:
                continue
            if np.array_equal(a, b, equal_nan=True) and \
                    np.array_equal(np.signbit(a), np.signbit(b)):
                continue
            return names[k] in _PICKS_ZERO and np.array_equal(a, b, equal_nan=True)
    return False


def _half_tensor_exponent(program: Program, m: "Mismatch") -> bool:
    """Does a ``**`` step raise an array to a tensor exponent of 0.5 or -0.5?  (NumPy's power
    computes sqrt there, PyTorch's C pow: the reverse of the number exponent's case.)"""
    steps = [s for s in program.steps if s.name in ("**", "pow") and len(s.args) == 2
             and isinstance(s.args[1], Ref)]
    if not steps or m.kind.startswith("exception"):
        return False
    for env in _values_at(program, m, TORCH):
        for s in steps:
            if s.args[1].i < len(env):
                e = _floats(env[s.args[1].i])
                if e is not None and e.size == 1 and abs(float(e.reshape(-1)[0])) == 0.5:
                    return True
    return False


def _elu_of_nan(program: Program, m: "Mismatch") -> bool:
    """Does an ``elu`` step take a NaN (a leaf's, or one an earlier op made: ``log`` of a
    negative) as PyTorch runs the program?"""
    steps = [s for s in program.steps if s.name == "nn.functional.elu" and s.args
             and isinstance(s.args[0], Ref)]
    for env in _values_at(program, m, TORCH):
        for s in steps:
            if s.args[0].i < len(env):
                e = _floats(env[s.args[0].i])
                if e is not None and np.isnan(e).any():
                    return True
    return False


def _uses(program: Program, *names: str) -> bool:
    return any(s.name in names for s in program.steps)


def _graph_matches(mine, theirs) -> bool:
    """Do two ``node_signature`` trees agree, a leaf cut at the depth limit (``(name,)``)
    agreeing with any node of its name?"""
    if mine is None or theirs is None:
        return mine is theirs
    if mine[0] != theirs[0]:
        return False
    if len(mine) == 1 or len(theirs) == 1:
        return True
    return len(mine[1]) == len(theirs[1]) and all(map(_graph_matches, mine[1], theirs[1]))


def _without_log_softmax(tree):
    """``tree`` with each ``LogSoftmaxBackward0`` right under an ``NllLossBackward0`` dropped
    (its input taking its place)."""
    if tree is None or len(tree) == 1:
        return tree
    name, nexts = tree
    if name == "NllLossBackward0":
        nexts = tuple(n[1][0] if n is not None and n[0] == "LogSoftmaxBackward0" and len(n) > 1
                      and len(n[1]) == 1 else n for n in nexts)
    return (name, tuple(_without_log_softmax(n) for n in nexts))


def fused_cross_entropy_only(m: "Mismatch") -> bool:
    """Is tapegrad's graph PyTorch's but for the ``LogSoftmaxBackward0`` under each
    ``NllLossBackward0``?"""
    mine, _, theirs = m.detail[len("tg "):].partition(" / torch ")
    try:
        mine, theirs = ast.literal_eval(mine), ast.literal_eval(theirs)
    except (ValueError, SyntaxError):
        return False
    return _graph_matches(mine, _without_log_softmax(theirs))


def _zero_for_nan_only(m: "Mismatch") -> bool:
    """Does tapegrad's gradient differ from PyTorch's only by 0. where PyTorch's is NaN (a
    dropped element's NaN that PyTorch multiplies into a zero gradient)?"""
    mine, _, theirs = m.detail[len("tg "):].partition(" / torch ")
    try:
        names = {"__builtins__": {}}, {"nan": math.nan, "inf": math.inf}
        mine, theirs = (np.asarray(eval(t, *names), dtype=float) for t in (mine, theirs))
    except Exception:  # noqa: BLE001 - a detail in another form: not this deviation
        return False
    if mine.shape != theirs.shape:
        return False
    same = (mine == theirs) | (np.isnan(mine) & np.isnan(theirs))
    return bool(np.all(same | ((mine == 0.0) & np.isnan(theirs))) and not np.all(same))


def _uses_sgn(program: Program) -> bool:
    """Does the program meet ``sgn``'s zero tensor: ``sgn`` itself, or the second derivatives
    of ``abs`` and ``l1_loss`` (their gradients are ``grad * x.sgn()``)?"""
    names = {(s.name or "").split(".")[-1] for s in program.steps}
    return "sgn" in names or (bool(names & {"abs", "l1_loss"}) and any(
        ("create_graph", True) in s.kw for s in program.steps))


DEVIATIONS: Tuple[Deviation, ...] = (
    Deviation(
        "README: '`sgn`'s derivative is PyTorch's efficient zero tensor, a zero that some rules "
        "below it pass on as it is (products and quotients of the gradient) while others compute "
        "with it; tapegrad follows that per elementwise op (so `abs`'s second derivative, "
        "`grad * x.sgn()`, is PyTorch's), but array ops, `pow` and third derivatives below "
        "`sgn` compute with plain zeros, and where the zero tensor and another gradient reach "
        "one input tapegrad adds a `0.` that PyTorch leaves out (so `erf(x.abs())`'s second "
        "derivative at `x = -0.` is `0.`, PyTorch's `-0.`): a NaN, an infinity or the sign of "
        "a zero there can differ, and where PyTorch raises on that zero (a second backward "
        "into the same `.grad`), tapegrad does not.'",
        lambda p, o, m: _uses_sgn(p) and (m.kind.endswith(("nan", "signed-zero", "inf"))
                                          or m.kind.startswith("exception(torch")),
    ),
    Deviation(
        "README: '`cross_entropy` is one fused `NllLossBackward0` node over the logits (PyTorch: "
        "an `NllLossBackward0` node over a `LogSoftmaxBackward0` node), so its `next_functions` "
        "skip PyTorch's `LogSoftmaxBackward0`; values and gradients follow PyTorch.'",
        lambda p, o, m: (m.kind == "next_functions" and _uses(p, "nn.functional.cross_entropy")
                         and fused_cross_entropy_only(m)),
    ),
    Deviation(
        "README: 'Losses: `smooth_l1_loss(beta=0)` stays `SmoothL1LossBackward0` (PyTorch: "
        "`l1_loss`'s nodes), and `binary_cross_entropy(_with_logits)` gives gradients for "
        "`weight`/`pos_weight` where PyTorch refuses them.'",
        lambda p, o, m: (m.kind in ("grad_fn", "next_functions")
                         and _uses(p, "nn.functional.smooth_l1_loss"))
        or (_uses(p, "nn.functional.binary_cross_entropy",
                  "nn.functional.binary_cross_entropy_with_logits")
            and any(k in ("weight", "pos_weight") for s in p.steps for k, _ in s.kw)),
    ),
    Deviation(
        "README: 'Gradients computed with `create_graph=True` are recorded from each op's "
        "backward formula as PyTorch writes it, with PyTorch's fused backward ops where it has "
        "them (`SigmoidBackwardBackward0`, `ThresholdBackwardBackward0`), but the other parts "
        "of a formula are forward ops, so some `grad_fn` and `next_functions` name forward "
        "nodes (`MulBackward0`, `WhereBackward0`) where PyTorch shows its own; their values, "
        "`requires_grad` and higher derivatives follow PyTorch.'",
        lambda p, o, m: m.kind in ("grad_fn", "next_functions") and _after_create_graph(p, m),
    ),
    Deviation(
        "README: 'The sign of a zero gradient is PyTorch's through elementwise ops; through the "
        "rules of array ops (reductions, matmul, indexing, cumulative ops) a zero gradient can "
        "be `0.` where PyTorch's is `-0.` or the reverse, since the two add the same terms in a "
        "different order.'",
        lambda p, o, m: (m.kind.endswith(("grad-signed-zero", "hook-signed-zero"))
                         or (m.kind == "signed-zero" and _step_kind(p, m) == "grad"))
        and _uses_array_ops(p),
    ),
    Deviation(
        "README: 'Compiled replay refuses what it cannot follow: a tape whose recording read a "
        "recorded value into Python, used a comparison as a number, or indexed with a boolean "
        "mask of recorded values (`x[x > 0]`) raises `tg.RetraceRequired` at `tape.compile` "
        "(and `tg.compile` records such a function again at every call), where PyTorch just "
        "runs the code.'",
        lambda p, o, m: p.family == "replay" and m.kind == "exception(tg ReadsRecordedValues)",
    ),
    Deviation(
        "README: 'In compiled replay a value that no output uses (overwritten by `x[i] = c`, or "
        "computed and dropped) passes no gradient, so a NaN or inf in it does not turn a zero "
        "gradient into NaN, as PyTorch's multiplication of zeros through it does.'",
        lambda p, o, m: p.family == "replay" and m.kind == "grad-nan"
        and (any(s.kind == "setitem" for s in p.steps)
             or (any(s.kind == "getitem" for s in p.steps) and _zero_for_nan_only(m))),
    ),
    Deviation(
        "README: 'Compiled replay of `amax`/`max` over elements that tie exactly splits the "
        "gradient as its chain of `maximum` does (halves at each tie: 1/4, 1/4, 1/2 for three "
        "equal maxima), where PyTorch and the eager engine split it evenly; both are "
        "subgradients, and ties of floats computed from different inputs are rare.'",
        lambda p, o, m: p.family == "replay" and m.kind == "grad-value"
        and any((s.name or "").split(".")[-1] in _PICKS_ZERO for s in p.steps),
    ),
    Deviation(
        "README: 'Compiled replay of tensor code runs reductions as scalar formulas (`prod` as a "
        "chain of products, `var` through the mean, `amax` as a chain of `maximum`): equal to "
        "PyTorch's values and gradients at finite points, but where an input or an intermediate "
        "value is ±inf or NaN a gradient entry can be NaN where PyTorch's is a number (±inf, 0), "
        "or a number where PyTorch's is NaN (`amax` of `[1., nan, 0.5]`: replay gives each input "
        "1, as `maximum` passes its gradient on at a NaN; PyTorch and the eager engine NaN).'",
        lambda p, o, m: p.family == "replay" and m.kind == "grad-nan" and _nonfinite_at(p, m),
    ),
    Deviation(
        "README: 'Values follow PyTorch to rounding, not bit for bit (NumPy and PyTorch add in "
        "different orders, in `sum` and `norm` for instance, and their `log1p`/`expm1` can "
        "differ in the last bit); where a comparison, a `clamp` bound, a `max`, a `where` or "
        "a rounding op (`trunc`, `floor`) meets values that tie in one library and differ by "
        "that rounding in the other, the branch taken, and so a value or gradient, can "
        "differ.'",
        lambda p, o, m: m.kind.startswith(("grad", "value", "signed-zero", "nan", "hook-value",
                                            "hook-signed-zero", "hook-nan"))
        and _rounding_tie(p, m),
    ),
    Deviation(
        "README: 'Where PyTorch's own result depends on the tensor's size (its vectorised "
        "kernels against its scalar ones), tapegrad gives one answer for every size: the sign "
        "of a zero that `maximum`/`minimum`/`clamp`/`clamp_min`/`clamp_max`/`amax`/`amin`/`max`/"
        "`min` pick between `0.` and `-0.` (equal values), and `elu`'s gradient at a NaN "
        "input (1, as PyTorch's scalar kernel; its vectorised one gives NaN).'",
        lambda p, o, m: (m.kind == "signed-zero" and any(
            (s.name or "").split(".")[-1] in _PICKS_ZERO for s in p.steps))
        or (m.kind.startswith(("value", "grad", "signed-zero", "nan"))
            and any((s.name or "").split(".")[-1] in _PICKS_ZERO for s in p.steps)
            and _zero_pick(p, m))
        or (m.kind in ("grad-nan", "nan", "hook-nan") and _uses(p, "nn.functional.elu")
            and _elu_of_nan(p, m)),
    ),
    Deviation(
        "README: 'After an in-place op through a view, the base's `CopySlices` node has the "
        "in-place op's own node as its second input (PyTorch folds that op into `CopySlices`); "
        "values, gradients and the names of `grad_fn` (`CopySlices`, `AsStridedBackward0`) are "
        "PyTorch's.'",
        lambda p, o, m: m.kind == "next_functions" and o.inplace_on_view,
    ),
    Deviation(
        "README: '`x ** 0.5` and `x ** -0.5` use C's `pow`, where PyTorch (with a Python number "
        "as the exponent) computes `sqrt(x)` and `1 / sqrt(x)`: the two differ at `-0.` (`0.` "
        "against `-0.`, `inf` against `-inf`) and at `-inf` (`0.` against NaN), and elsewhere "
        "in the last bit. For an array raised to a tensor exponent of 0.5 or -0.5 it is the "
        "reverse (NumPy's `power` computes `sqrt` there, PyTorch C's `pow`).'",
        lambda p, o, m: any(s.name in ("**", "pow") and any(
            isinstance(a, float) and abs(a) == 0.5 for a in s.args) for s in p.steps)
        or _half_tensor_exponent(p, m),
    ),
)


def deviation_for(program: Program, torch_outcome: Outcome, m: Mismatch) -> Optional[Deviation]:
    for d in DEVIATIONS:
        if d.applies(program, torch_outcome, m):
            return d
    return None


# ---------------------------------------------------------------------------------------
# Checking one program: the failure class


def step_label(step: Step) -> str:
    """The op or feature a step exercises, with T for tensor and c for number operands."""
    shapes = ",".join("T" if isinstance(a, Ref) else ("c" if isinstance(a, (int, float)) else "…")
                      for a in step.args)
    if step.kind == "binop":
        return f"{step.name}({shapes})"
    if step.kind in ("call", "method"):
        name = step.name.split(".")[-1]
        return f"{name}({shapes})" if step.kind == "call" else f".{name}()"
    if step.kind == "hook":
        return f"register_hook({step.name})"
    if step.kind == "grad":
        return "autograd.grad" + ("(create_graph)" if ("create_graph", True) in step.kw else "")
    if step.kind in ("getitem", "setitem"):
        index = step.args[1]
        parts = index if isinstance(index, tuple) else (index,)
        return f"{step.kind}[{','.join(type(p).__name__ for p in parts)}]"
    return step.kind


def features(program: Program) -> str:
    found = set()
    for s in program.steps:
        if s.kind in ("backward", "grad", "hook", "setitem"):
            found.add(s.kind)
        if s.nograd:
            found.add("no_grad")
        if s.name in ("detach", "retain_grad") or (s.kind == "method" and s.name.endswith("_")):
            found.add(s.name)
        if ("create_graph", True) in s.kw:
            found.add("create_graph")
        if ("retain_graph", True) in s.kw:
            found.add("retain_graph")
    return "+".join(sorted(found)) or "-"


@dataclass
class Result:
    program: Program
    failure: Optional[str] = None     # the failure class
    mismatch: Optional[Mismatch] = None
    deviation: Optional[Deviation] = None


def writes_in_place(step: Step) -> bool:
    return step.kind == "setitem" or (step.kind == "method" and step.name.endswith("_"))


def differentiable_alone(step: Step) -> bool:
    return step.kind in ("call", "method", "binop", "getitem", "setitem", "pyfn")


@dataclass
class TorchTrace:
    """What torch saw at each step: the value then (in-place steps change it later) and the
    gradient that reached it (``retain_grad`` on every intermediate), for isolating a step."""
    values: list
    grads: list


def torch_trace(program: Program) -> TorchTrace:
    env: list = []
    values: list = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in program.steps:
            try:
                v = execute(step, env, TORCH, {})
            except Exception:  # noqa: BLE001 - values up to the failing step suffice
                break
            env.append(v)
            if isinstance(v, torch.Tensor):
                values.append(v.detach().clone().requires_grad_(v.requires_grad)
                              if v.is_floating_point() else v.detach().clone())
                try:
                    if v.requires_grad and not v.is_leaf:
                        v.retain_grad()
                except RuntimeError:   # (a changed multi-output view: PyTorch raises)
                    pass
            else:
                values.append(v)
        grads = [v.grad if isinstance(v, torch.Tensor) else None for v in env]
    return TorchTrace(values, grads)


def isolate(program: Program, k: int, trace: TorchTrace) -> Optional[Program]:
    """Step ``k`` alone on fresh leaves holding its inputs' values, seeded with the gradient
    torch's whole program sent into it (or fixed weights when it sent none)."""
    step = program.steps[k]
    steps: List[Step] = []
    renumber: Dict[int, int] = {}

    def leaf_for(arg):
        if isinstance(arg, Ref):
            if arg.i not in renumber:
                v = trace.values[arg.i] if arg.i < len(trace.values) else None
                if not isinstance(v, torch.Tensor):
                    raise LookupError
                dtype = str(v.dtype).split(".")[-1]
                steps.append(Step("leaf", args=(v.detach().numpy().tolist(), Dtype(dtype),
                                                bool(v.requires_grad))))
                renumber[arg.i] = len(steps) - 1
            return Ref(renumber[arg.i])
        if isinstance(arg, (list, tuple)):
            return type(arg)(leaf_for(a) for a in arg)
        return arg

    try:
        args = leaf_for(step.args)
        kw = tuple((n, leaf_for(v)) for n, v in step.kw)
    except LookupError:
        return None
    out = trace.values[k] if k < len(trace.values) else None
    if not (isinstance(out, torch.Tensor) and out.requires_grad and out.is_floating_point()):
        return None
    if writes_in_place(step):  # torch refuses in-place on a leaf: write into a copy of it
        steps.append(Step("binop", "*", (args[0], 1.0)))
        args = (Ref(len(steps) - 1),) + tuple(args[1:])
    steps.append(replace(step, args=args, kw=kw, nograd=False, error_ok=False))
    y = Ref(len(steps) - 1)
    upstream = trace.grads[k] if k < len(trace.grads) else None
    if upstream is None or tuple(upstream.shape) != tuple(out.shape):
        upstream = (np.arange(out.numel(), dtype=float) % 7 + 1.0).reshape(tuple(out.shape)) / 4.0
    else:
        upstream = upstream.detach().numpy()
    steps.append(Step("leaf", args=(upstream.tolist(), Dtype("float64"), False)))
    steps.append(Step("backward", args=(y,), kw=(("gradient", Ref(len(steps) - 1)),)))
    return Program(program.family, steps)


def same_base(a: str, b: str) -> bool:
    """``grad-value`` of an isolated step explains ``value`` of an autograd.grad result."""
    strip = lambda k: k.split("-", 1)[1] if k.startswith(("grad-", "after-")) else k  # noqa: E731
    return strip(a) == strip(b)


def blame(program: Program, m: Mismatch) -> str:
    """The op or feature to name in the failure class."""
    k = m.step_index()
    if program.family == "replay":  # the minimised reproducer shows the ops
        return program.mode
    direct = (k is not None and ".grad" not in m.label and ".after" not in m.label
              and not m.label.startswith("hook")
              and program.steps[k].kind not in ("backward", "grad"))
    if direct:
        return step_label(program.steps[k])
    # a gradient went wrong somewhere upstream: find the first step that is wrong on its own
    trace = torch_trace(program)
    for j, step in enumerate(program.steps):
        if differentiable_alone(step):
            alone = isolate(program, j, trace)
            if alone is None:
                continue
            local = compare(run_steps(alone, TG), run_steps(alone, TORCH))
            if local is not None and same_base(local.kind, m.kind):
                return step_label(step)
    # no step is wrong alone: the composition or a feature (hook, retain_grad, in-place,
    # autograd.grad) is; name where the difference showed
    if m.label.startswith("hook"):
        return "hook"
    if k is not None and ".grad" in m.label:
        return "leaf .grad" if program.steps[k].kind == "leaf" else "non-leaf .grad"
    if k is not None:
        return step_label(program.steps[k])
    return features(program)


def check(program: Program, classify: bool = True) -> Result:
    if program.family == "replay":
        mine, theirs = run_replay(program, TG), run_replay(program, TORCH)
        allowed = {label for label, obs in mine.records if obs == ("retrace", "documented")}
        mine.records = [r for r in mine.records if r[0] not in allowed]
        theirs.records = [r for r in theirs.records if r[0] not in allowed]
    else:
        mine, theirs = run_steps(program, TG), run_steps(program, TORCH)
    m = compare(mine, theirs)
    if m is None:
        return Result(program)
    dev = deviation_for(program, theirs, m)
    if dev is not None:
        return Result(program, deviation=dev, mismatch=m)
    failure = f"{program.family} / {m.kind} / {blame(program, m) if classify else '?'}"
    return Result(program, failure, m)


# ---------------------------------------------------------------------------------------
# Minimising


def drop_steps(program: Program, drop: set) -> Optional[Program]:
    """The program without the steps in ``drop``; a reference to a dropped step is redirected
    to that step's first tensor argument (so ``sin(v2)`` dropped means its users take ``v2``)."""
    target: Dict[int, Optional[int]] = {}
    new_index: Dict[int, int] = {}
    steps: List[Step] = []

    def first_ref(arg) -> Optional[Ref]:
        if isinstance(arg, Ref):
            return arg
        if isinstance(arg, (list, tuple)):
            for a in arg:
                r = first_ref(a)
                if r is not None:
                    return r
        return None

    def remap(arg):
        if isinstance(arg, Ref):
            i = arg.i
            while i in target:
                i = target[i]
                if i is None:
                    raise LookupError
            return Ref(new_index[i])
        if isinstance(arg, list):
            return [remap(a) for a in arg]
        if isinstance(arg, tuple):
            return tuple(remap(a) for a in arg)
        if isinstance(arg, slice):
            return slice(remap(arg.start), remap(arg.stop), remap(arg.step))
        return arg

    try:
        for i, step in enumerate(program.steps):
            if i in drop:
                r = first_ref(step.args)
                target[i] = r.i if r is not None else None
                continue
            steps.append(replace(step, args=remap(step.args),
                                 kw=tuple((n, remap(v)) for n, v in step.kw)))
            new_index[i] = len(steps) - 1
    except LookupError:
        return None
    if program.family == "replay":
        # the last step is the compiled output; tg.compile keeps its input, tape.compile one leaf
        last = len(program.steps) - 1
        if last in drop or not steps:
            return None
        if program.mode == "tg.compile" and steps[0].kind != "input":
            return None
        if program.mode == "tape.compile":
            inputs = [i for i, s in enumerate(program.steps) if s.kind == "leaf" and s.args[2]]
            kept = [j for j, i in enumerate(inputs) if i not in drop]
            if not kept:
                return None
            points = [[p[j] for j in kept] for p in program.points]
            return replace(program, steps=steps, points=points)
    return replace(program, steps=steps)


def minimise(program: Program, failure: str, budget: int = 300) -> Program:
    """Delta debugging over the step list: remove chunks, then single steps, while the
    program still fails with the same failure class."""
    tries = [0]

    def still_fails(candidate: Optional[Program]) -> bool:
        if candidate is None or tries[0] >= budget:
            return False
        tries[0] += 1
        return check(candidate).failure == failure

    current = program
    chunk = max(1, len(current.steps) // 2)
    while chunk >= 1:
        changed = False
        start = len(current.steps) - chunk
        while start >= 0:
            candidate = drop_steps(current, set(range(start, start + chunk)))
            if still_fails(candidate):
                current, changed = candidate, True
            start -= chunk
        if not changed:
            chunk //= 2
    if program.points:  # fewer points too
        for j in reversed(range(len(current.points))):
            candidate = replace(current, points=current.points[:j] + current.points[j + 1:])
            if candidate.points and still_fails(candidate):
                current = candidate
    return current


# ---------------------------------------------------------------------------------------
# Printing a reproducer


def fmt(arg) -> str:
    if isinstance(arg, Ref):
        return f"v{arg.i}"
    if isinstance(arg, Dtype):
        return f"lib.{arg.name}"
    if isinstance(arg, float):
        if math.isnan(arg):
            return "math.nan"
        if math.isinf(arg):
            return "math.inf" if arg > 0 else "-math.inf"
        return repr(arg)
    if isinstance(arg, list):
        return "[" + ", ".join(fmt(a) for a in arg) + "]"
    if isinstance(arg, tuple):
        return "(" + ", ".join(fmt(a) for a in arg) + ("," if len(arg) == 1 else "") + ")"
    return repr(arg)


def fmt_index(index) -> str:
    parts = index if isinstance(index, tuple) else (index,)
    out = []
    for p in parts:
        if isinstance(p, slice):
            s = ":".join("" if v is None else fmt(v) for v in (p.start, p.stop, p.step))
            out.append(s[:-1] if s.endswith(":") and p.step is None else s)
        elif p is Ellipsis:
            out.append("...")
        else:
            out.append(fmt(p))
    return ", ".join(out)


def step_source(i: int, step: Step) -> str:
    a = [fmt(x) for x in step.args]
    kw = [f"{n}={fmt(v)}" for n, v in step.kw]
    k = step.kind
    if k == "leaf":
        text = f"lib.tensor({a[0]}, dtype={a[1]}, requires_grad={a[2]})"
    elif k == "input":
        return f"# v{i} = x, the 1-d input of the compiled function"
    elif k == "call":
        text = f"lib.{step.name}({', '.join(a + kw)})"
    elif k == "method":
        text = f"{a[0]}.{step.name}({', '.join(a[1:] + kw)})"
    elif k == "binop":
        text = f"-{a[0]}" if step.name == "neg" else f"{a[0]} {step.name} {a[1]}"
    elif k == "pyfn":
        text = f"{step.name}({', '.join(a)})"
    elif k == "getitem":
        text = f"{a[0]}[{fmt_index(step.args[1])}]"
    elif k == "setitem":
        text = f"{a[0]}[{fmt_index(step.args[1])}] = {a[2]}; v{i} = {a[0]}"
        return _with_nograd(step, text)
    elif k == "attr":
        text = f"{a[0]}.{step.name}"
    elif k == "backward":
        return _with_nograd(step, f"v{i} = {a[0]}.backward({', '.join(kw)})")  # None
    elif k == "grad":
        text = f"lib.autograd.grad({a[0]}, {a[1]}{''.join(', ' + x for x in kw)})"
    elif k == "hook":
        return _with_nograd(step, f"v{i} = {a[0]}.register_hook({HOOKS[step.name]})")
    elif k == "ifgt":
        text = f"lib.{a[2][1:-1]}({a[3]}) if {a[0]} > {a[1]} else lib.{a[4][1:-1]}({a[5]})"
    else:
        text = f"<{k}>"
    return _with_nograd(step, f"v{i} = {text}")


def replay_source(program: Program, body: List[str]) -> List[str]:
    """Compiled on tapegrad, then torch run freshly at each point (``lib`` picks the library)."""
    last = f"v{len(body) - 1}"
    if program.mode == "tg.compile":
        lines = ["def f(x):", "    v0 = x"] + ["    " + b for b in body[1:]]
        lines.append(f"    return {last}")
        lines += ["lib = tg", "g = tg.compile(f)", "for p in ("]
        lines += [f"        {fmt(np.asarray(p).tolist())}," for p in program.points]
        lines += ["        ):",
                  "    lib = tg; print('tg   ', g.value_and_grad(np.array(p)))",
                  "    lib = torch; x = torch.tensor(p, requires_grad=True); y = f(x)",
                  "    print('torch', y.item(), torch.autograd.grad(y, x, allow_unused=True))"]
        return lines
    inputs = [i for i, s in enumerate(program.steps) if s.kind == "leaf" and s.args[2]]
    names = ", ".join(f"v{i}" for i in inputs)
    lines = ["lib = tg", "with tg.Tape() as tape:"] + ["    " + b for b in body]
    lines.append(f"fn = tape.compile([{names}], [{last}])")
    for p in program.points:
        point = fmt([np.asarray(x).tolist() for x in p])
        lines.append(f"print('tg   ', fn.value_and_grad({point}))")
        lines.append("lib = torch")
        arrays = iter(p)
        for i, step in enumerate(program.steps):
            if i in inputs:
                step = replace(step, args=(np.asarray(next(arrays)).tolist(),) + step.args[1:])
            lines.append(step_source(i, step))
        lines.append(f"print('torch', {last}.item(), torch.autograd.grad({last}, [{names}], "
                     "allow_unused=True))")
    return lines


def _with_nograd(step: Step, text: str) -> str:
    return f"with lib.no_grad(): {text}" if step.nograd else text


def source(program: Program, mismatch: Optional[Mismatch] = None) -> str:
    """A reproducer: one loop over both libraries; prints the mismatching value and the grads."""
    lines = ["import math, numpy as np, torch, tapegrad as tg",
             "torch.set_default_dtype(torch.float64)",
             "for lib in (tg, torch):"]
    body = [step_source(i, s) for i, s in enumerate(program.steps)]
    if program.family == "replay":
        lines = lines[:2] + replay_source(program, body)
        if mismatch is not None:
            lines.append(f"# mismatch at {mismatch.label}: {mismatch.detail[:200]}")
        return "\n".join(lines)
    lines += ["    " + b for b in body]
    shown = [f"v{i}.grad" for i, s in enumerate(program.steps) if s.kind == "leaf" and s.args[2]]
    k = mismatch.step_index() if mismatch else None
    if (k is not None and ".grad" not in mismatch.label and not mismatch.label.startswith("hook")
            and program.steps[k].kind not in ("backward", "hook")):
        what = "grad_fn.next_functions" if "next_functions" in mismatch.kind else (
            "grad_fn" if mismatch.kind == "grad_fn" else "")
        if program.steps[k].kind == "grad":  # a tuple of gradients
            what = ""
        shown.insert(0, f"v{k}" + (f".{what}" if what else ""))
    if shown:
        lines.append(f"    print(lib.__name__, {', '.join(shown)})")
    if mismatch is not None:
        lines.append(f"# mismatch at {mismatch.label}: {mismatch.detail[:200]}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Generating


SPECIAL = (0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, 1e300, -1e300, 1e-300)
RARE = (math.inf, -math.inf, math.nan)
ELEMENTWISE = tuple(op for op in OPS if not op.compare and not op.backward_of
                    and op.name not in ("clamp", "where"))
UNARY = tuple(op for op in ELEMENTWISE if op.arity == 1)
BINARY = tuple(op for op in ELEMENTWISE if op.arity == 2)
COMPARES = tuple(op for op in OPS if op.compare)


class Builder:
    """Appends steps while running them on torch, to know shapes and drop invalid proposals."""

    def __init__(self, rng: random.Random, family: str):
        self.rng, self.family = rng, family
        self.steps: List[Step] = []
        self.env: list = []
        self.hook_calls: Dict[int, list] = {}
        self.stopped = False
        # +-1e300 only where no reduction sums them: a sum of 1e300 and -1e300 depends on the
        # summation order, which is no bug (tensor code uses 1e-300, inf and nan instead)
        self.huge = family == "scalar"

    def add(self, step: Step) -> Optional[Ref]:
        if self.stopped:
            return None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = execute(step, self.env, TORCH, self.hook_calls)
        except Exception:  # noqa: BLE001
            if step.error_ok:  # the error is what this step tests; nothing runs after it
                self.steps.append(step)
                self.stopped = True
            return None
        self.steps.append(step)
        self.env.append(value)
        return Ref(len(self.steps) - 1)

    def refs(self, want: Callable[[Any], bool]) -> List[Ref]:
        return [Ref(i) for i, v in enumerate(self.env) if want(v)]

    def pick(self, want: Callable[[Any], bool]) -> Optional[Ref]:
        refs = self.refs(want)
        if not refs:
            return None
        # prefer recent results so that programs are chains more often than flat fans
        return refs[-1] if self.rng.random() < 0.5 else self.rng.choice(refs)

    def number(self, domain=(-2.0, 2.0)) -> float:
        r = self.rng.random()
        if r < 0.55:
            return round(self.rng.uniform(*domain), 3)
        if r < 0.93:
            return self.rng.choice(SPECIAL[:8])
        if self.huge:
            return self.rng.choice(SPECIAL[8:] + RARE)
        return self.rng.choice(SPECIAL[10:] + RARE)

    def constant(self, data, dtype="float64") -> Optional[Ref]:
        """A tensor without grad holding exactly ``data`` (indices, labels, targets)."""
        return self.add(Step("leaf", args=(np.asarray(data).tolist(), Dtype(dtype), False)))

    def leaf(self, shape=(), dtype="float64", requires_grad=True, domain=(-2.0, 2.0)) -> Ref:
        if dtype == "float64":
            data = np.array([self.number(domain) for _ in range(int(np.prod(shape)))])
        elif dtype == "int64":
            data = np.array([self.rng.randint(-3, 3) for _ in range(int(np.prod(shape)))])
        else:
            data = np.array([self.rng.random() < 0.5 for _ in range(int(np.prod(shape)))])
        data = data.reshape(shape).tolist()
        return self.add(Step("leaf", args=(data, Dtype(dtype), requires_grad)))


def is_float(v) -> bool:
    return isinstance(v, torch.Tensor) and v.is_floating_point()


def needs_grad(v) -> bool:
    return is_float(v) and v.requires_grad


def grad_leaf(v) -> bool:
    """A float leaf that requires grad.  (``is_leaf`` of a multi-output view whose base was
    changed in place raises in PyTorch: no leaf, for the generator.)"""
    try:
        return needs_grad(v) and v.is_leaf
    except RuntimeError:
        return False


# --- scalar -----------------------------------------------------------------------------


def scalar_op(b: Builder) -> None:
    rng = b.rng
    x = b.pick(lambda v: is_float(v) and v.dim() == 0)
    y = b.pick(lambda v: is_float(v) and v.dim() == 0)
    r = rng.random()
    if r < 0.35:
        op = rng.choice(UNARY)
        form = rng.random()
        if op.name == "neg" and form < 0.3:
            b.add(Step("binop", "neg", (x,)))
        elif op.name == "abs" and form < 0.3:
            b.add(Step("pyfn", "abs", (x,)))
        elif form < 0.6:
            b.add(Step("method", op.name, (x,)))
        else:
            b.add(Step("call", op.name, (x,)))
    elif r < 0.75:
        op = rng.choice(BINARY)
        lhs, rhs = x, y
        if rng.random() < 0.35:  # a Python number on either side
            c = b.number(op.domain[1] if rng.random() < 0.5 else (-2.0, 2.0))
            lhs, rhs = (c, y) if rng.random() < 0.4 else (x, c)
        if rng.random() < 0.2 and op.name in ("maximum", "minimum", "atan2", "sub", "div", "pow"):
            lhs, rhs = x, x  # ties and the diagonal
        if op.dunder and rng.random() < 0.6:
            b.add(Step("binop", DUNDER_SYMBOLS[op.dunder], (lhs, rhs)))
        elif isinstance(lhs, Ref) and rng.random() < 0.3:
            b.add(Step("method", op.name, (lhs, rhs)))
        else:
            b.add(Step("call", op.name, (lhs, rhs)))
    elif r < 0.87:
        v = float(b.env[x.i])
        lo = rng.choice([None, v, b.number(), -1.0])
        hi = rng.choice([None, v, b.number(), 1.0])
        if lo is None and hi is None:
            lo = v
        if rng.random() < 0.2:  # tensor bounds
            lo = y
        kw = tuple((n, val) for n, val in (("min", lo), ("max", hi)) if val is not None)
        b.add(Step("method" if rng.random() < 0.4 else "call", "clamp", (x,), kw))
    else:
        op = rng.choice(COMPARES)
        other = y if rng.random() < 0.6 else b.number()
        cond = b.add(Step("binop", COMPARE_SYMBOLS[op.name], (x, other)) if rng.random() < 0.5
                     else Step("call", op.name, (x, other)))
        if cond is not None:
            z = b.pick(lambda v: is_float(v) and v.dim() == 0)
            alt = z if rng.random() < 0.7 else b.number()
            b.add(Step("call", "where", (cond, y, alt)))


def scalar_leaves(b: Builder) -> None:
    n = b.rng.randint(1, 3)
    for _ in range(n):
        b.leaf(())
    if b.rng.random() < 0.3:  # two leaves holding one value: ties across leaves
        b.add(Step("leaf", args=(float(b.env[0]), Dtype("float64"), True)))
    if b.rng.random() < 0.3:
        b.leaf((), requires_grad=False)


def finish_scalar_loss(b: Builder) -> Optional[Ref]:
    outs = b.refs(needs_grad)[-b.rng.randint(1, 3):]
    if not outs:
        return None
    loss = outs[0]
    for o in outs[1:]:
        loss = b.add(Step("binop", "+", (loss, o))) or loss
    if b.env[loss.i].dim() > 0:
        loss = b.add(Step("method", "sum", (loss,))) or loss
    return loss


def gen_scalar(b: Builder) -> None:
    scalar_leaves(b)
    for _ in range(b.rng.randint(2, 8)):
        scalar_op(b)
    loss = finish_scalar_loss(b)
    if loss is not None:
        b.add(Step("backward", args=(loss,)))


# --- tensor -----------------------------------------------------------------------------


def random_shape(rng: random.Random) -> tuple:
    return tuple(rng.randint(1, 4) for _ in range(rng.randint(1, 3)))


def broadcast_partner(rng: random.Random, shape: tuple) -> tuple:
    r = rng.random()
    if r < 0.4:
        return shape
    if r < 0.7:
        return tuple(1 if rng.random() < 0.5 else d for d in shape)
    if r < 0.9:
        return shape[rng.randint(0, len(shape)):]
    return ()


def tensor_op(b: Builder) -> None:
    rng = b.rng
    # empty tensors (an empty slice) have no index to pick: they are compared, not extended
    x = b.pick(lambda v: is_float(v) and v.dim() > 0 and v.numel() > 0) or b.pick(
        lambda v: is_float(v) and v.dim() == 0)
    if x is None:
        return
    t = b.env[x.i]
    nd = t.dim()
    dim = rng.randint(-nd, nd - 1) if nd else 0
    r = rng.random()
    if r < 0.15:
        op = rng.choice(UNARY + (next(o for o in OPS if o.name == "clamp"),))
        if op.name == "clamp":
            b.add(Step("method", "clamp", (x,), (("min", b.number()), ("max", 1.0))))
        else:
            b.add(Step(rng.choice(["call", "method"]), op.name, (x,)))
    elif r < 0.3:
        op = rng.choice(BINARY)
        other = b.pick(lambda v: is_float(v) and v.shape == t.shape and v is not t)
        if other is None or rng.random() < 0.5:
            other = b.leaf(broadcast_partner(rng, tuple(t.shape)), requires_grad=rng.random() < 0.7,
                           domain=op.domain[1])
        if rng.random() < 0.15:
            other = b.number(op.domain[1])
        lhs, rhs = (other, x) if rng.random() < 0.3 else (x, other)
        if op.dunder and rng.random() < 0.6:
            b.add(Step("binop", DUNDER_SYMBOLS[op.dunder], (lhs, rhs)))
        else:
            b.add(Step("call", op.name, (lhs, rhs)))
    elif r < 0.45:
        name = rng.choice(["sum", "mean", "prod", "amax", "amin", "max", "min", "var", "std",
                           "norm", "logsumexp", "softmax", "log_softmax", "cumsum", "cumprod"])
        whole = ("sum", "mean", "prod", "max", "min", "norm", "var", "std")
        if name in whole and rng.random() < 0.3:
            out = b.add(Step("method", name, (x,)))
        elif name in ("softmax", "log_softmax", "cumsum", "cumprod"):
            out = b.add(Step("method" if rng.random() < 0.5 else "call", name, (x, dim)))
        elif name == "logsumexp" or name == "prod":
            out = b.add(Step("method", name, (x, dim), (("keepdim", rng.random() < 0.5),)))
        else:
            out = b.add(Step("method", name, (x,), (("dim", dim), ("keepdim", rng.random() < 0.5))))
        if out is not None and isinstance(b.env[out.i], tuple):  # max/min with dim
            b.add(Step("getitem", args=(out, rng.randint(0, 1))))
    elif r < 0.55:
        choice = rng.choice(["reshape", "transpose", "permute", "squeeze", "unsqueeze", "expand",
                             "t", "flip", "roll", "flatten"])
        if choice == "reshape":
            shape = (-1,) if rng.random() < 0.5 else tuple(reversed(t.shape))
            b.add(Step("method", "reshape", (x, shape)))
        elif choice == "transpose":
            b.add(Step("method", "transpose", (x, 0, -1)))
        elif choice == "permute":
            b.add(Step("method", "permute", (x, tuple(rng.sample(range(nd), nd)))))
        elif choice == "squeeze":
            b.add(Step("method", "squeeze", (x, dim) if rng.random() < 0.6 else (x,)))
        elif choice == "unsqueeze":
            b.add(Step("method", "unsqueeze", (x, rng.randint(-nd - 1, nd))))
        elif choice == "expand":
            b.add(Step("method", "expand", (x, (2,) + tuple(t.shape))))
        elif choice == "t" and nd <= 2:
            b.add(Step("method", "t", (x,)))
        elif choice == "flip":
            b.add(Step("method", "flip", (x, (dim,))))
        elif choice == "roll":
            b.add(Step("method", "roll", (x, rng.randint(-2, 2), dim)))
        else:
            b.add(Step("method", "flatten", (x,)))
    elif r < 0.62:
        choice = rng.choice(["matmul", "cat", "stack", "split"])
        if choice == "matmul":
            shape = (t.shape[-1],) if rng.random() < 0.4 else (t.shape[-1], rng.randint(1, 3))
            w = b.leaf(shape, requires_grad=rng.random() < 0.8)
            b.add(Step("binop", "@", (x, w)) if rng.random() < 0.5
                  else Step("call", "matmul", (x, w)))
        elif choice in ("cat", "stack"):
            w = b.leaf(tuple(t.shape), requires_grad=rng.random() < 0.7)
            pair = [x, w] if rng.random() < 0.5 else [w, x]
            b.add(Step("call", choice, (pair,), (("dim", dim),)))
        else:
            parts = b.add(Step("method", "split", (x, rng.randint(1, 2), dim)))
            if parts is not None:
                b.add(Step("getitem", args=(parts, rng.randint(0, len(b.env[parts.i]) - 1))))
    elif r < 0.75:
        index_op(b, x, t, dim)
    elif r < 0.87:
        inplace_op(b, x, t)
    elif r < 0.95:
        functional_op(b, x, t, dim)
    else:
        int_bool_op(b, x, t)


def index_op(b: Builder, x: Ref, t, dim: int) -> None:
    rng = b.rng
    n = t.shape[0] if t.dim() else 1
    r = rng.random()
    if r < 0.25:
        key = rng.randint(-n, n - 1)
    elif r < 0.45:
        key = slice(rng.choice([None, 0, 1]), rng.choice([None, -1, n]), rng.choice([None, 2]))
    elif r < 0.6:
        key = (Ellipsis, rng.randint(0, t.shape[-1] - 1)) if t.dim() else ()
    elif r < 0.75:
        key = b.constant([rng.randint(-n, n - 1) for _ in range(rng.randint(1, 4))], "int64")
    elif r < 0.85:
        key = b.add(Step("binop", ">", (x, 0.0)))
    else:
        if rng.random() < 0.5:
            idx = np.array([rng.randint(0, t.shape[dim] - 1) for _ in range(t.numel())])
            idx = b.constant(idx.reshape(tuple(t.shape)), "int64")
            b.add(Step("method", "gather", (x, dim, idx)))
        else:
            sel = b.constant([rng.randint(0, t.shape[dim] - 1) for _ in range(2)], "int64")
            b.add(Step("call", "index_select", (x, dim, sel)))
        return
    if key is not None:
        b.add(Step("getitem", args=(x, key)))


def inplace_op(b: Builder, x: Ref, t) -> None:
    rng = b.rng
    r = rng.random()
    if r < 0.12:  # in-place on a leaf that requires grad: torch refuses
        leaf = b.pick(grad_leaf)
        if leaf is not None:
            b.add(Step("method", "add_", (leaf, 1.0), error_ok=True))
        return
    if r < 0.3:  # a constant written with a value that requires grad
        target = b.leaf(tuple(t.shape), requires_grad=False)
    elif r < 0.4:  # a view of a non-leaf (a documented deviation: copies, not views)
        target = b.add(Step("getitem", args=(x, 0))) if t.dim() else None
    else:
        target = b.add(Step("binop", "*", (x, 1.0)))  # a non-leaf to modify
    if target is None:
        return
    tv = b.env[target.i]
    name = rng.choice(["add_", "mul_", "sub_", "div_", "clamp_", "fill_", "zero_", "setitem",
                       "setitem"])
    if name in ("add_", "mul_", "sub_", "div_"):
        other = x if b.env[x.i].shape == tv.shape and rng.random() < 0.6 else b.number((0.5, 2.0))
        b.add(Step("method", name, (target, other), error_ok=True))
    elif name == "clamp_":
        b.add(Step("method", name, (target,), (("min", -0.5), ("max", b.number())), error_ok=True))
    elif name == "fill_":
        b.add(Step("method", name, (target, b.number()), error_ok=True))
    elif name == "zero_":
        b.add(Step("method", name, (target,), error_ok=True))
    else:
        key = 0 if tv.dim() else ()
        src = x if tv.dim() and b.env[x.i].shape == tv.shape[1:] else b.number()
        if tv.dim() and rng.random() < 0.5:
            key = slice(0, 1)
            src = b.number()
        if rng.random() < 0.3 and tv.dim():
            scal = b.pick(lambda v: needs_grad(v) and v.dim() == 0)
            src = scal if scal is not None else src
        b.add(Step("setitem", args=(target, key, src), error_ok=True))
    if rng.random() < 0.4:  # then use the modified tensor, so its backward runs
        b.add(Step("method", "exp", (target,)))


def functional_op(b: Builder, x: Ref, t, dim: int) -> None:
    rng = b.rng
    name = rng.choice(["relu", "gelu", "silu", "elu", "leaky_relu", "softplus", "tanh", "sigmoid",
                       "mse_loss", "l1_loss", "smooth_l1_loss", "binary_cross_entropy",
                       "binary_cross_entropy_with_logits", "cross_entropy", "nll_loss",
                       "softmax", "log_softmax"])
    f = "nn.functional." + name
    reduction = (("reduction", rng.choice(["mean", "sum", "none"])),)
    if name in ("softmax", "log_softmax"):
        b.add(Step("call", f, (x,), (("dim", dim),)))
    elif name in ("mse_loss", "l1_loss", "smooth_l1_loss"):
        target = b.leaf(tuple(t.shape), requires_grad=rng.random() < 0.3)
        kw = reduction + ((("beta", rng.choice([0.5, 1.0])),) if name == "smooth_l1_loss" else ())
        b.add(Step("call", f, (x, target), kw))
    elif name == "binary_cross_entropy":
        p = b.add(Step("call", "sigmoid", (x,)))
        b.add(Step("call", f, (p, probabilities(b, t)), reduction))
    elif name == "binary_cross_entropy_with_logits":
        b.add(Step("call", f, (x, probabilities(b, t)), reduction))
    elif name in ("cross_entropy", "nll_loss") and t.dim() == 2:
        labels = b.constant([rng.randint(0, t.shape[1] - 1) for _ in range(t.shape[0])], "int64")
        inp = x if name == "cross_entropy" else b.add(Step("call", "log_softmax", (x, 1)))
        b.add(Step("call", f, (inp, labels), reduction))
    elif name in ("leaky_relu", "elu", "softplus"):
        b.add(Step("call", f, (x,)))
    else:
        b.add(Step("call", f, (x,)))


def probabilities(b: Builder, t) -> Ref:
    """Targets of binary cross entropy: in [0, 1], no special points."""
    values = np.round([b.rng.random() for _ in range(t.numel())], 3)
    return b.constant(values.reshape(tuple(t.shape)))


def int_bool_op(b: Builder, x: Ref, t) -> None:
    rng = b.rng
    i = b.leaf(tuple(t.shape), dtype="int64", requires_grad=False)
    r = rng.random()
    if i is None:
        return
    if r < 0.3:
        b.add(Step("binop", rng.choice(["+", "*", "-"]), (x, i) if rng.random() < 0.5 else (i, x)))
    elif r < 0.5:
        b.add(Step("binop", rng.choice(["+", "*"]), (i, rng.choice([2, 1.5]))))
    elif r < 0.7:
        mask = b.leaf(tuple(t.shape), dtype="bool", requires_grad=False)
        if mask is not None:
            b.add(Step("call", "where", (mask, x, i if rng.random() < 0.5 else 0.0)))
    elif r < 0.85:
        m = b.add(Step("binop", rng.choice(["<", ">=", "=="]), (x, i)))
        if m is not None:
            b.add(Step("method", "sum", (m,)))
    else:
        args = (i,) if rng.random() < 0.5 else (i, 0)
        b.add(Step("method", rng.choice(["sum", "max", "cumsum"]), args))


def tensor_leaves(b: Builder) -> None:
    for _ in range(b.rng.randint(1, 2)):
        b.leaf(random_shape(b.rng))


def finish_tensor_loss(b: Builder) -> Optional[Ref]:
    refs = b.refs(needs_grad)
    if not refs:
        return None
    y = refs[-1]
    if b.env[y.i].dim() > 0:
        w = b.leaf(tuple(b.env[y.i].shape), requires_grad=False)
        y2 = b.add(Step("binop", "*", (y, w))) if w is not None else None
        y = b.add(Step("method", "sum", (y2 or y,))) or y
    return y


def gen_tensor(b: Builder) -> None:
    tensor_leaves(b)
    for _ in range(b.rng.randint(2, 6)):
        tensor_op(b)
    loss = finish_tensor_loss(b)
    if loss is not None and b.env[loss.i].dim() == 0:
        b.add(Step("backward", args=(loss,)))


# --- autograd features ------------------------------------------------------------------


def feature(b: Builder) -> None:
    rng = b.rng
    x = b.pick(needs_grad)
    if x is None:
        return
    r = rng.random()
    if r < 0.35:
        b.add(Step("hook", rng.choice(list(HOOKS)), (x,)))
    elif r < 0.55:
        b.add(Step("method", "retain_grad", (x,)))
    elif r < 0.7:
        d = b.add(Step("method", "detach", (x,)))
        if d is not None and rng.random() < 0.5:
            b.add(Step("method", "requires_grad_", (d,)))
    elif r < 0.85:
        b.add(Step("binop", "*", (x, 2.0), nograd=True))
    else:
        b.add(Step("method", "exp", (x,), nograd=rng.random() < 0.5))


def gen_autograd(b: Builder) -> None:
    rng = b.rng
    scalar = rng.random() < 0.5
    (scalar_leaves if scalar else tensor_leaves)(b)
    for _ in range(rng.randint(3, 8)):
        if rng.random() < 0.4:
            feature(b)
        else:
            (scalar_op if scalar else tensor_op)(b)
    loss = (finish_scalar_loss if scalar else finish_tensor_loss)(b)
    if loss is None or b.env[loss.i].dim() != 0:
        return
    leaves = b.refs(grad_leaf)
    r = rng.random()
    if r < 0.35:
        twice = rng.random() < 0.7
        b.add(Step("backward", args=(loss,), kw=(("retain_graph", twice),)))
        # a second backward: accumulates with retain_graph, raises without it
        b.add(Step("backward", args=(loss,), error_ok=True))
    elif r < 0.55:
        inputs = rng.sample(leaves, rng.randint(1, len(leaves))) if leaves else []
        b.add(Step("backward", args=(loss,), kw=(("inputs", inputs),)))
    else:
        inputs = b.refs(needs_grad)
        chosen = rng.sample(inputs, min(len(inputs), rng.randint(1, 3)))
        outputs = [loss]
        kw: list = [("allow_unused", True)]
        other = b.pick(lambda v: needs_grad(v) and v.dim() == 0)
        if other is not None and other != loss and rng.random() < 0.4:
            outputs.append(other)  # several outputs
        if rng.random() < 0.4:
            kw.append(("grad_outputs", [b.add(Step("leaf", args=(rng.choice([1.0, -2.0, 0.5]),
                                                                Dtype("float64"), False)))
                                        for _ in outputs]))
            if any(g is None for g in kw[-1][1]):
                kw.pop()
        if rng.random() < 0.5:
            kw.append(("retain_graph", True))
        b.add(Step("grad", args=(outputs, chosen), kw=tuple(kw)))


# --- create_graph -----------------------------------------------------------------------


def gen_create_graph(b: Builder) -> None:
    rng = b.rng
    scalar = rng.random() < 0.5
    (scalar_leaves if scalar else tensor_leaves)(b)
    for _ in range(rng.randint(2, 6)):
        (scalar_op if scalar else tensor_op)(b)
    loss = (finish_scalar_loss if scalar else finish_tensor_loss)(b)
    leaves = b.refs(grad_leaf)
    if loss is None or not leaves or b.env[loss.i].dim() != 0:
        return
    grads = b.add(Step("grad", args=([loss], leaves),
                       kw=(("create_graph", True), ("allow_unused", True))))
    if grads is None:
        return
    total = None
    for j, g in enumerate(b.env[grads.i]):
        if g is None or not g.requires_grad:
            continue
        gj = b.add(Step("getitem", args=(grads, j)))
        w = b.leaf(tuple(g.shape), requires_grad=False)
        term = b.add(Step("method", "sum", (b.add(Step("binop", "*", (gj, w))),)))
        total = term if total is None else b.add(Step("binop", "+", (total, term)))
    if total is not None:
        if rng.random() < 0.5:
            b.add(Step("backward", args=(total,)))
        else:
            b.add(Step("grad", args=([total], leaves), kw=(("allow_unused", True),)))


# --- replay -----------------------------------------------------------------------------


def replay_op(b: Builder, n: int) -> None:
    """One step of a compiled function's body: elements of x, ops, branches, where, min/max."""
    rng = b.rng
    x = Ref(0)
    scalars = lambda v: is_float(v) and v.dim() == 0  # noqa: E731
    r = rng.random()
    if r < 0.2 or not b.refs(scalars):
        b.add(Step("getitem", args=(x, rng.randint(0, n - 1))))
    elif r < 0.45:
        scalar_op(b)
    elif r < 0.6:
        p, q = b.pick(scalars), b.pick(scalars)
        then_op, else_op = rng.choice(UNARY).name, rng.choice(UNARY).name
        b.add(Step("ifgt", args=(p, q, then_op, b.pick(scalars), else_op, b.pick(scalars))))
    elif r < 0.72:
        b.add(Step("pyfn", rng.choice(["max", "min"]), (b.pick(scalars), b.pick(scalars))))
    elif r < 0.85:
        pair = (b.pick(scalars), b.pick(scalars))
        cond = b.add(Step("binop", rng.choice([">", "<", ">="]), pair))
        if cond is not None:
            other = b.pick(scalars) if rng.random() < 0.7 else b.number()
            b.add(Step("call", "where", (cond, b.pick(scalars), other)))
    else:
        name = rng.choice(["sum", "prod", "amax", "logsumexp", "norm", "softmax", "mean"])
        if name == "softmax":
            s = b.add(Step("call", "softmax", (x, 0)))
            if s is not None:
                b.add(Step("getitem", args=(s, rng.randint(0, n - 1))))
        elif name in ("amax", "logsumexp"):
            b.add(Step("method", name, (x, 0)))
        else:
            part = b.add(Step("getitem", args=(x, slice(rng.choice([None, 1]), None))))
            if part is not None:
                b.add(Step("method", name, (part,)))


def new_points(rng: random.Random, base: np.ndarray, count: int) -> list:
    points = []
    for j in range(count):
        p = base + np.round(np.array([rng.uniform(-1.5, 1.5) for _ in base]), 3)
        if j % 3 == 2 and len(p) > 1:  # ties: where max/min and branches split
            p[1] = p[0]
        points.append(p)
    return points


def gen_replay(b: Builder) -> Program:
    rng = b.rng
    if rng.random() < 0.6:
        b.huge = True
        n = rng.randint(2, 4)
        base = np.round(np.array([rng.uniform(-2, 2) for _ in range(n)]), 3)
        x = torch.tensor(base, requires_grad=True)
        b.steps.append(Step("input"))
        b.env.append(x)
        for _ in range(rng.randint(3, 8)):
            replay_op(b, n)
        loss = finish_scalar_loss(b)
        if loss is None:
            return Program("replay", [], mode="tg.compile")
        if loss.i != len(b.steps) - 1:
            b.add(Step("binop", "+", (loss, 0.0)))
        return Program("replay", b.steps, [base] + new_points(rng, base, rng.randint(2, 5)),
                       mode="tg.compile")
    # tape.compile of tensor code: no Python branches; array ops and in-place index writes
    tensor_leaves(b)
    for _ in range(rng.randint(2, 5)):
        choice = rng.random()
        x = b.pick(lambda v: is_float(v) and v.dim() > 0 and v.numel() > 0)
        if x is None:
            break
        t = b.env[x.i]
        if choice < 0.8:
            tensor_op_for_replay(b, x, t)
        else:
            cond = b.add(Step("binop", ">", (x, 0.0)))
            if cond is not None:
                b.add(Step("call", "where", (cond, x, b.number())))
    loss = finish_tensor_loss(b)
    if loss is None or b.env[loss.i].dim() != 0:
        return Program("replay", [], mode="tape.compile")
    if loss.i != len(b.steps) - 1:
        b.add(Step("binop", "+", (loss, 0.0)))
    leaves = [b.env[i] for i, s in enumerate(b.steps) if s.kind == "leaf" and s.args[2]]
    points = [[v.detach().numpy().copy() for v in leaves]]
    for j in range(rng.randint(2, 4)):
        points.append([np.round(v.detach().numpy() + np.array(
            [rng.uniform(-1, 1) for _ in range(v.numel())]).reshape(v.shape), 3) for v in leaves])
    return Program("replay", b.steps, points, mode="tape.compile")


def tensor_op_for_replay(b: Builder, x: Ref, t) -> None:
    """The array ops that ``tape.compile`` documents as rewritten into elementwise ops."""
    rng = b.rng
    nd = t.dim()
    dim = rng.randint(-nd, nd - 1)
    r = rng.random()
    if r < 0.3:
        op = rng.choice(UNARY + BINARY)
        if op.arity == 1:
            b.add(Step("call", op.name, (x,)))
        else:
            w = b.leaf(broadcast_partner(rng, tuple(t.shape)), requires_grad=rng.random() < 0.5,
                       domain=op.domain[1])
            b.add(Step("call", op.name, (x, w)))
    elif r < 0.55:
        name = rng.choice(["sum", "mean", "prod", "amax", "amin", "var", "std", "norm", "logsumexp",
                           "softmax", "log_softmax"])
        if name in ("softmax", "log_softmax"):
            b.add(Step("call", name, (x, dim)))
        elif name == "norm":
            b.add(Step("method", name, (x,)))
        else:
            b.add(Step("method", name, (x, dim)))
    elif r < 0.7:
        w = b.leaf((t.shape[-1], rng.randint(1, 3)), requires_grad=rng.random() < 0.7)
        b.add(Step("binop", "@", (x, w)))
    elif r < 0.85:
        index_op(b, x, t, dim)
    else:
        c = b.add(Step("binop", "*", (x, 1.0)))
        if c is not None:
            b.add(Step("setitem", args=(c, 0, b.number()) if nd == 1 else (c, 0, 0.0)))


GENERATORS = {
    "scalar": gen_scalar,
    "tensor": gen_tensor,
    "autograd": gen_autograd,
    "create_graph": gen_create_graph,
}


def generate(seed: int, family: str) -> Program:
    """A deterministic program for ``(seed, family)``."""
    rng = random.Random(f"{family}:{seed}")
    b = Builder(rng, family)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if family == "replay":
            return gen_replay(b)
        GENERATORS[family](b)
    return Program(family, b.steps)


def family_of(index: int, family: Optional[str]) -> str:
    return family or FAMILIES[index % len(FAMILIES)]


@dataclass
class Report:
    passed: int = 0
    failed: int = 0
    skipped_deviations: Dict[str, int] = field(default_factory=dict)
    classes: Dict[str, List[Result]] = field(default_factory=dict)
    per_family: Dict[str, Dict[str, int]] = field(default_factory=dict)


def fuzz(seed: int, count: int, family: Optional[str] = None, start: int = 0) -> Report:
    """Programs ``start .. start + count - 1`` of the seed (a shard of a longer run gives the
    same programs as the run itself)."""
    # PyTorch's default dtype is float64 while the programs run, whatever the caller (a
    # test run before it) left it at: float32 there made Python numbers float32 on the
    # PyTorch side only (13 of 2,000 programs in the suite's bounded run)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        warm_up()
        return _fuzz(seed, count, family, start)
    finally:
        torch.set_default_dtype(default)


def warm_up(programs: int = 4):
    """Run a few programs of each family (of a seed of its own) without time budgets, once
    a process: the kernels they compile are compiled before any program is timed."""
    if _BUDGETS["warm"]:
        return
    _BUDGETS["on"] = False
    try:
        for fam in FAMILIES:
            for k in range(programs):
                try:
                    check(program_at(999_983, k, fam))
                except Exception:  # noqa: BLE001 - only the compiling matters here
                    pass
    finally:
        _BUDGETS["on"] = True
        _BUDGETS["warm"] = True


def program_at(seed: int, index: int, family: Optional[str]) -> Program:
    """Program ``index`` of ``seed``, as a run generates it (a program with no steps is
    drawn again)."""
    fam = family_of(index, family)
    program = generate(seed * 1_000_003 + index, fam)
    if not program.steps:
        program = generate(seed * 1_000_003 + index + 7_919, fam)
    return program


def run_one_side(program: Program, side: str) -> Outcome:
    """The program on one library alone (``"tg"`` or ``"torch"``): which of the two takes a
    process down, when running both did."""
    lib = TG if side == "tg" else TORCH
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        return run_replay(program, lib) if program.family == "replay" else run_steps(program, lib)
    finally:
        torch.set_default_dtype(default)


def merge(reports: List[Report]) -> Report:
    """One report of several shards' (in the order given)."""
    total = Report()
    for r in reports:
        total.passed += r.passed
        total.failed += r.failed
        for key, n in r.skipped_deviations.items():
            total.skipped_deviations[key] = total.skipped_deviations.get(key, 0) + n
        for cls, results in r.classes.items():
            total.classes.setdefault(cls, []).extend(results)
        for fam, stats in r.per_family.items():
            mine = total.per_family.setdefault(fam, {"passed": 0, "failed": 0})
            for key in mine:
                mine[key] += stats[key]
    return total


def _fuzz(seed: int, count: int, family: Optional[str], start: int = 0) -> Report:
    report = Report()
    for index in range(start, start + count):
        fam = family_of(index, family)
        program = Program(fam, [])
        try:
            program = program_at(seed, index, family)
            result = check(program)
        except Exception as e:  # noqa: BLE001 - a fuzzer bug is reported, not fatal
            result = Result(program, f"{fam} / fuzzer-crash / {type(e).__name__}",
                            Mismatch("fuzzer-crash", "program", f"{type(e).__name__}: {e}"))
        stats = report.per_family.setdefault(fam, {"passed": 0, "failed": 0})
        if result.failure is None:
            report.passed += 1
            stats["passed"] += 1
            if result.deviation is not None:
                key = result.deviation.reason[:60]
                report.skipped_deviations[key] = report.skipped_deviations.get(key, 0) + 1
            continue
        report.failed += 1
        stats["failed"] += 1
        report.classes.setdefault(result.failure, []).append(result)
    return report


def summary(report: Report, show: int = 1, minimise_budget: int = 300) -> str:
    lines = []
    for fam, stats in sorted(report.per_family.items()):
        lines.append(f"family {fam}: {stats['passed']} passed, {stats['failed']} failed")
    for reason, n in sorted(report.skipped_deviations.items()):
        lines.append(f"skipped as documented deviation ({n}): {reason}...")
    ranked = sorted(report.classes.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    for cls, results in ranked:
        lines.append(f"\n=== {cls}: {len(results)}")
        first = results[0]
        lines.append(f"    first mismatch at {first.mismatch.label}: {first.mismatch.detail[:300]}")
        for r in results[:show]:
            if "fuzzer-crash" in cls:
                lines.append("    (a bug of the fuzzer itself: no reproducer)")
                continue
            if "process-crash" in cls:   # running it here would take the fuzzer down
                lines.append("    " + source(r.program).replace("\n", "\n    "))
                continue
            small = minimise(r.program, cls, minimise_budget)
            again = check(small)
            lines.append("    " + source(small, again.mismatch).replace("\n", "\n    "))
    return "\n".join(lines)
