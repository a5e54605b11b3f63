"""The generated modules must match the op table (run tools/codegen.py after editing it)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_generated_files_are_current():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "codegen.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_kernel_forward_matches_python_forward():
    """The Numba forward (used for replay) agrees with the recording forward."""
    import math
    from tapegrad.core import kernels as K, forward as M
    from tapegrad.core.optable import OPS
    for k, op in enumerate(OPS):
        lo, hi = op.domain[0]
        x = (lo + hi) / 2 + 0.1
        y = z = 0.7
        if op.name == "clamp":
            y, z = -0.5, 0.5
        assert math.isclose(K.forward(k, x, y, z), M.SCALAR_FORWARD[k](x, y, z), rel_tol=1e-12), op.name
