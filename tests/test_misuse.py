"""The misuse probe (``tools/misuse_probe.py``): calls a PyTorch user gets wrong raise what
PyTorch raises (the exception type), or compute what PyTorch computes."""
import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
_spec = importlib.util.spec_from_file_location(
    "misuse_probe", Path(__file__).resolve().parents[1] / "tools" / "misuse_probe.py")
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


# differences still to fix (strict: a fixed one must leave this list)
KNOWN = set()


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True))
                                  if n in KNOWN else n for n in sorted(probe.CASES)])
def test_misuse_gets_pytorchs_outcome(name):
    import tapegrad
    torch.set_default_dtype(torch.float64)
    try:
        mine = probe.outcome(probe.CASES[name], tapegrad)
        theirs = probe.outcome(probe.CASES[name], torch)
    finally:
        torch.set_default_dtype(torch.float32)
    assert not probe.differs(mine, theirs), f"tapegrad {mine[:3]} / torch {theirs[:3]}"
