"""The compatibility corpus: PyTorch programs (``tests/corpus/*.py``) run under PyTorch and
under tapegrad with only the imports changed (``import torch`` -> ``import tapegrad as
torch``, ``import torch.nn as nn`` -> ``import tapegrad.nn as nn``, ``from torch.x import y``
-> ``from tapegrad.x import y``).  Each program leaves its results in ``RESULTS``; the two
runs must agree (PyTorch computes in float32 by default, tapegrad in float64, hence the
tolerance).  Without PyTorch the tapegrad run still has to finish."""
import math
import re
from pathlib import Path

import pytest

CORPUS = sorted((Path(__file__).parent / "corpus").glob("*.py"))


def with_tapegrad(source: str) -> str:
    """The program with its torch imports pointed at tapegrad (and nothing else changed)."""
    out = []
    for line in source.splitlines():
        line = re.sub(r"^(\s*)import torch$", r"\1import tapegrad as torch", line)
        line = re.sub(r"^(\s*)import torch\.(\S+) as (\w+)", r"\1import tapegrad.\2 as \3", line)
        line = re.sub(r"^(\s*)from torch(\.\S+)? import", r"\1from tapegrad\2 import", line)
        out.append(line)
    return "\n".join(out) + "\n"


def run(path: Path, tapegrad: bool):
    source = path.read_text()
    if tapegrad:
        source = with_tapegrad(source)
        assert "torch." not in "".join(l for l in source.splitlines() if l.startswith(("import", "from")))
    scope = {"__name__": f"corpus_{path.stem}"}
    exec(compile(source, str(path), "exec"), scope)   # noqa: S102 - our own test programs
    return scope["RESULTS"]


def same(a, b, path=""):
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: keys {a.keys()} / {b.keys()}"
        for k in a:
            same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), f"{path}: {a} / {b}"
        for k, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{k}]")
    elif isinstance(a, str):   # (a dtype prints with its module's name: tapegrad.int64)
        assert a.replace("tapegrad", "torch") == b, f"{path}: tapegrad {a!r} / torch {b!r}"
    elif isinstance(a, bool) or a is None:
        assert a == b, f"{path}: tapegrad {a!r} / torch {b!r}"
    else:
        assert math.isclose(a, b, rel_tol=2e-5, abs_tol=1e-6), f"{path}: tapegrad {a} / torch {b}"


def test_the_import_rewrite_changes_imports_only():
    src = "import torch\nimport torch.nn as nn\nfrom torch.autograd import grad\nx = torch.ones(2)\n"
    assert with_tapegrad(src) == ("import tapegrad as torch\nimport tapegrad.nn as nn\n"
                                  "from tapegrad.autograd import grad\nx = torch.ones(2)\n")


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_program_runs_under_tapegrad_with_pytorchs_results(path):
    mine = run(path, tapegrad=True)
    torch = pytest.importorskip("torch")
    torch.set_default_dtype(torch.float32)
    theirs = run(path, tapegrad=False)
    same(mine, theirs)
