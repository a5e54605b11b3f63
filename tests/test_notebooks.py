"""The notebooks in ``notebooks/`` run top to bottom, and are stored without outputs.

Executing them needs ``nbformat``, ``nbclient``, ``ipykernel`` and ``matplotlib`` (the
``test`` extra); without them that test is skipped.  The kernel is a ``python3`` kernel
running this interpreter, with the repository root first on ``PYTHONPATH`` (so the
notebooks exercise this checkout), ``MPLBACKEND=Agg`` (no display needed) and the
notebooks' folder as working directory.  PyTorch and Graphviz are optional there: the
notebooks leave out what needs them.
"""
from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NB_DIR = REPO / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 120  # seconds per cell
ANSI = re.compile(r"\x1b\[[0-9;]*m")  # colours in IPython tracebacks


def _ids(paths):
    return [p.name for p in paths]


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found in {NB_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_is_stored_without_outputs(path):
    """Outputs are stripped before committing: no outputs, no execution counts."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    dirty = [i for i, cell in enumerate(nb["cells"])
             if cell["cell_type"] == "code"
             and (cell.get("outputs") != [] or cell.get("execution_count") is not None)]
    assert not dirty, (f"{path.name}: code cells {dirty} have outputs or execution counts; "
                       f"clear them before committing (e.g. `jupyter nbconvert "
                       f"--clear-output --inplace {path.relative_to(REPO)}`)")


@pytest.fixture
def kernel_env(tmp_path, monkeypatch):
    """Environment the notebook kernel inherits: a ``python3`` kernelspec for this
    interpreter (ahead of any other ``python3`` kernel installed on the machine), the
    checkout on ``PYTHONPATH``, the Agg backend for matplotlib and one BLAS thread."""
    spec = tmp_path / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (tapegrad tests)",
        "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", os.pathsep.join(
        [str(tmp_path)] + [p for p in os.environ.get("JUPYTER_PATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        if var not in os.environ:   # a threaded BLAS crawls on a busy 2-core machine
            monkeypatch.setenv(var, "1")
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # quiet debugpy warning


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_notebook_runs(path, kernel_env):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    pytest.importorskip("matplotlib")

    nb = nbformat.read(str(path), as_version=4)
    nbformat.validate(nb)
    client = nbclient.NotebookClient(
        nb, kernel_name="python3", timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(NB_DIR)}})
    failure = None
    try:
        client.execute()
    except nbclient.exceptions.CellTimeoutError as exc:
        failure = f"{path.name}: a cell ran longer than {CELL_TIMEOUT} s\n{exc}"
    except nbclient.exceptions.CellExecutionError as exc:
        failure = f"{path.name}: a cell raised\n{exc}"
    if failure is not None:
        pytest.fail(ANSI.sub("", failure), pytrace=False)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs
              if o.output_type == "error"]
    assert not errors, errors
