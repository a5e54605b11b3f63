"""``tg.jit``: every op-table row on actives against the eager engine and central
differences (table-driven: a row without a case fails), the sweep against the engine's
``kernels.reverse``, random programs with branches and loops against eager tapegrad,
Rosenbrock, and the generated files being current."""
from __future__ import annotations

import hashlib
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.core import kernels as K
from tapegrad.core.elementwise import FUNCTIONS
from tapegrad.core.optable import OPS
from tapegrad.jit import overloads

ROOT = Path(__file__).resolve().parents[1]
ROWS = [op for op in OPS if op.name in overloads.FORMS]
OPERATOR_SYNTAX = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "pow": "**",
                   "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def test_generated_files_are_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "jit_codegen.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_every_row_has_a_jit_form():
    internal = [op.name for op in OPS if getattr(op, "backward_of", None) or op.internal]
    missing = [op.name for op in OPS if op.name not in overloads.FORMS and op.name not in internal]
    assert not missing, f"op rows without a tg.jit form: {missing}"


def _name(fn):
    mod = getattr(fn, "__module__", None) or ""
    if fn.__class__.__name__ == "ufunc" or mod.startswith("numpy"):
        return f"np.{fn.__name__}"
    if mod == "math":
        return f"math.{fn.__name__}"
    if mod in ("_operator", "operator"):
        return f"operator.{fn.__name__}"
    if mod == "builtins":
        return fn.__name__
    return fn.__name__     # a function of tapegrad.jit


def _cases(op, fn, kind):
    """(expression over x, y, z (actives) and the numbers 1.5, 2, which operands are
    active) for one jit form of a row."""
    f = _name(fn)
    n = op.arity
    if kind == "compare":
        s = OPERATOR_SYNTAX[fn.__name__]
        return [(f"(x * 2.0 if x {s} y else y * 3.0)", None), (f"(x * 2.0 if x {s} 0.5 else x * 3.0)", None),
                (f"(y * 2.0 if 0.5 {s} y else y * 3.0)", None)]
    if kind == "int":
        return [(f"x * {f}(x * 3.0)", None)]
    if kind == "reduce":
        return [(f"{f}(x, y)", "xy"), (f"{f}(x, y, z)", "xyz"), (f"{f}(x, 1.5, y)", "x1y"),
                (f"{f}(1.5, x)", "1x")]
    name = fn.__name__
    if f.startswith("operator.") and name.startswith("i") and name[1:] in OPERATOR_SYNTAX:
        s = OPERATOR_SYNTAX[name[1:]]
        return [(f"_inplace_{name[1:]}(x, y)", "xy")]
    if f.startswith("operator.") and name in OPERATOR_SYNTAX:
        s = OPERATOR_SYNTAX[name]
        return [(f"x {s} y", "xy"), (f"x {s} 1.5", "x1"), (f"1.5 {s} y", "1y"), (f"x {s} 2", "x2"),
                (f"2 {s} y", "2y")]
    if name == "neg":
        return [("-x", "x")]
    if n == 1:
        return [(f"{f}(x)", "x")]
    if n == 2:
        return [(f"{f}(x, y)", "xy"), (f"{f}(x, 1.5)", "x1"), (f"{f}(1.5, y)", "1y")]
    return [(f"{f}(x, y, z)", "xyz"), (f"{f}(x, 0.5, z)", "x1z")]


CASES = [(op, fn, kind, expr, who) for op in ROWS for fn, kind in overloads.FORMS[op.name]
         for expr, who in _cases(op, fn, kind)]

SOURCE = ["import math, operator", "import numpy as np", "from tapegrad.jit import *", "",
          "def _inplace_add(x, y):\n    t = x\n    t += y\n    return t",
          "def _inplace_sub(x, y):\n    t = x\n    t -= y\n    return t",
          "def _inplace_mul(x, y):\n    t = x\n    t *= y\n    return t",
          "def _inplace_truediv(x, y):\n    t = x\n    t /= y\n    return t",
          "def _inplace_pow(x, y):\n    t = x\n    t **= y\n    return t", "",
          "def rows(p, k):", "    x = p[0]", "    y = p[1]", "    z = p[2]"]
for _k, _c in enumerate(CASES):
    SOURCE.append(f"    if k == {_k}:\n        return {_c[3]}")
SOURCE.append("    return x")


def _rows_file(tmp_path_factory):
    """The generated cases in a real file (Numba caches functions from files): in the user's
    cache folder, named by the source's hash, so later runs load it compiled."""
    text = "\n".join(SOURCE) + "\n"
    name = "jit_rows_" + hashlib.sha256(text.encode()).hexdigest()[:12] + ".py"
    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tapegrad-tests"
    try:
        base.mkdir(parents=True, exist_ok=True)
        path = base / name
        if not path.exists():
            path.write_text(text)
    except OSError:
        path = tmp_path_factory.mktemp("jit_rows") / name
        path.write_text(text)
    return path


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    path = _rows_file(tmp_path_factory)
    import importlib.util
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = mod      # (the cached code refers to its module by name)
    spec.loader.exec_module(mod)
    for name in ("_inplace_add", "_inplace_sub", "_inplace_mul", "_inplace_truediv", "_inplace_pow"):
        setattr(mod, name, tg.jit(getattr(mod, name)).dispatcher)
    return tg.jit(mod.rows)


def _point(op, rng):
    dom = list(op.domain) + [op.domain[-1]] * (3 - len(op.domain))
    p = np.array([rng.uniform(lo, hi) if lo < hi else lo for lo, hi in dom])
    if op.name == "where":
        p[0] = 1.0 if rng.uniform() < 0.5 else 0.0
    return p


def _eager(op, kind, fn, expr, who, p):
    """The row on tapegrad tensors (eager engine): value and gradient w.r.t. x, y, z."""
    xs = [tg.tensor(float(v), requires_grad=not (op.name == "where" and k == 0))
          for k, v in enumerate(p)]
    num = {"1": tg.tensor(1.5), "2": tg.tensor(2.0)}
    if op.arity == 3:
        num["1"] = tg.tensor(0.5)
    args = [xs["xyz".index(c)] if c in "xyz" else num[c] for c in who]
    if op.name == "where":   # (eager where wants a bool condition, as PyTorch's)
        args[0] = args[0] != 0.0
    if kind == "reduce":
        out = args[0]
        for a in args[1:]:
            out = FUNCTIONS[op.name](out, a)
    else:
        out = FUNCTIONS[op.name](*args)
    leaves = [t for t in xs if t.requires_grad]
    grads = dict(zip(map(id, leaves), tg.autograd.grad(out, leaves, allow_unused=True)))
    return float(out), np.array([0.0 if grads.get(id(t)) is None else float(grads[id(t)])
                                 for t in xs])


@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=[f"{c[0].name}-{c[3]}" for c in CASES])
def test_row_against_eager_and_differences(rows, case):
    op, fn, kind, expr, who = CASES[case]
    rng = np.random.default_rng(case)
    for _ in range(3):
        p = _point(op, rng)
        v, g = rows.value_and_grad(p, case)
        # central differences of the jit function itself
        h = 1e-6
        for j in range(3):
            e = np.zeros(3)
            e[j] = h
            fd = (rows.value_and_grad(p + e, case)[0] - rows.value_and_grad(p - e, case)[0]) / (2 * h)
            if op.name == "where" and j == 0:
                continue
            assert g[j] == pytest.approx(fd, rel=1e-5, abs=1e-6), (expr, j, p)
        if who is not None:
            ve, ge = _eager(op, kind, fn, expr, who, p)
            assert v == pytest.approx(ve, rel=1e-14, abs=1e-15), expr
            np.testing.assert_allclose(g, ge, rtol=1e-13, atol=1e-15, err_msg=expr)


def test_every_row_has_cases():
    covered = {c[0].name for c in CASES}
    assert covered == set(overloads.FORMS)


# -- the sweep against the engine's ----------------------------------------------------------
@tg.jit
def _mixed(p, c):
    s = 0.0
    for i in range(len(p)):
        t = math.sin(p[i]) * p[(i + 1) % len(p)] + c
        if t > 0.3:
            s += math.sqrt(t * t + 1.0) / (1.0 + abs(p[i]))
        else:
            s -= np.clip(t, -0.2, 0.2) ** 3 + max(p[i], t, 0.1)
    return s * math.exp(-p[0] * p[0])


def test_sweep_matches_engine_reverse():
    p = np.random.default_rng(1).uniform(-1, 1, 30)
    f = _mixed
    value, grad = f.value_and_grad(p, 0.25)
    call = f._record((p, 0.25), (0,), 0)
    op, a, b, val, consts = (x.copy() for x in call.arrays())
    n, nleaves, out = len(op), call.nleaves, int(call.refs[0])
    adj = np.zeros(n)
    reached = np.zeros(n, np.uint8)
    adj[out] = 1.0
    reached[out] = 1
    K.reverse(op, a, b, val, consts, adj, reached, np.zeros(n, np.uint8), np.zeros(0, np.int64),
              np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0),
              np.zeros(0, np.int64), out, -1, 1)
    np.testing.assert_array_equal(adj[:nleaves], grad)
    assert value == call.value()


def test_rosenbrock_against_eager():
    @tg.jit
    def rosen(x):
        s = 0.0
        for i in range(len(x) - 1):
            s += 100.0 * (x[i + 1] - x[i] ** 2) ** 2 + (1.0 - x[i]) ** 2
        return s

    x = np.random.default_rng(2).uniform(-1.5, 1.5, 200)
    x0 = x.copy()
    v, g = rosen.value_and_grad(x)
    assert np.array_equal(x, x0)       # the caller's array is not modified
    xt = tg.tensor(x, requires_grad=True)
    s = tg.tensor(0.0)
    for i in range(len(x) - 1):
        s = s + 100.0 * (xt[i + 1] - xt[i] ** 2) ** 2 + (1.0 - xt[i]) ** 2
    s.backward()
    assert v == pytest.approx(float(s), rel=1e-14)
    np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-12)
    # reusing the buffers: a second call gives the same
    v2, g2 = rosen.value_and_grad(x)
    assert v2 == v and np.array_equal(g2, g)
