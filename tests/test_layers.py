"""The package's layering (see ``tools/module_graph.py``): no import cycles, no imports
from a higher layer, no internal imports hidden in functions, no private-name imports."""
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tapegrad"

# tools/ is not a package: load the checker from its file.
_spec = importlib.util.spec_from_file_location("module_graph", ROOT / "tools" / "module_graph.py")
mg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mg)


@pytest.fixture(scope="module")
def graph():
    return mg.module_graph(PACKAGE)


def _lines(items):
    return "\n  " + "\n  ".join(items)


def test_every_module_is_in_a_layer(graph):
    unplaced = []
    for module in sorted(graph):
        try:
            mg.layer_of(module)
        except ValueError as e:
            unplaced.append(str(e))
    assert not unplaced, "modules outside every layer:" + _lines(unplaced)


def test_no_cycles(graph):
    found = mg.cycles(graph)
    assert not found, "import cycles (each line: modules that import each other):" + _lines(
        ", ".join(c) for c in found)


def test_no_upward_imports(graph):
    bad = mg.upward_imports(graph)
    assert not bad, "imports from a higher layer (or between nn and viz):" + _lines(
        f"{src} (layer {mg.layer_of(src)}) imports {dst} (layer {mg.layer_of(dst)})"
        for src, dst in bad)


def test_no_function_level_internal_imports():
    bad = mg.function_level_imports(PACKAGE)
    assert not bad, "tapegrad imports inside functions (move them to module level):" + _lines(
        f"{module}:{line} imports {target}" for module, line, target in bad)


def test_no_private_name_imports():
    bad = mg.private_name_imports(PACKAGE)
    assert not bad, "imports of private names or modules:" + _lines(
        f"{module}:{line}: {text}" for module, line, text in bad)


FAKE = {
    "__init__.py": "from . import core, nn\n",
    "__main__.py": "import tapegrad\n",
    "core/__init__.py": "",
    "core/a.py": "from . import b\n",                          # a <-> b: a cycle
    "core/b.py": "from .a import thing\n__version__ = _hidden = 1\n",
    "core/s.py": "from . import s\n",                          # a self-import
    "core/c.py": "from ..nn import layer\n",                   # core -> nn: upward
    "core/d.py": "import os\n\ndef f():\n    from .a import thing\n    import numpy\n",
    "core/e.py": ("from __future__ import annotations\nfrom .b import _hidden, __version__\n"
                  "from . import _private_mod\n"),
    "core/_private_mod.py": "",
    "nn/__init__.py": "",
    "nn/layer.py": "from ..viz import plot\n",                  # nn -> viz: sideways
    "viz/__init__.py": "plot = None\n",
    "optim/__init__.py": "import tapegrad.nn.layer as L\nfrom tapegrad.nn import layer\n",
}


def test_checker_finds_each_kind_of_violation(tmp_path):
    pkg = tmp_path / "tapegrad"
    for name, text in FAKE.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)

    g = mg.module_graph(pkg)
    assert g["tapegrad"] == {"tapegrad.core", "tapegrad.nn"}
    assert g["tapegrad.__main__"] == {"tapegrad"}
    assert g["tapegrad.core.a"] == {"tapegrad.core.b"}
    assert g["tapegrad.core.d"] == {"tapegrad.core.a"}             # function level counts
    assert g["tapegrad.core.e"] == {"tapegrad.core.b", "tapegrad.core._private_mod"}
    assert g["tapegrad.nn.layer"] == {"tapegrad.viz"}
    assert g["tapegrad.optim"] == {"tapegrad.nn.layer"}

    assert [mg.layer_of(m) for m in ("tapegrad.core.a", "tapegrad.ops", "tapegrad.autograd.x",
                                     "tapegrad.replay", "tapegrad.nn.layer", "tapegrad.viz",
                                     "tapegrad.optim", "tapegrad", "tapegrad.__main__")] == \
        [0, 1, 2, 3, 4, 4, 5, 6, 6]
    with pytest.raises(ValueError):
        mg.layer_of("tapegrad.elsewhere")

    assert mg.cycles(g) == [["tapegrad.core.a", "tapegrad.core.b"], ["tapegrad.core.s"]]
    # optim -> nn is allowed (optim is layer 5); __main__ -> tapegrad is within the top.
    assert mg.upward_imports(g) == [("tapegrad.core.c", "tapegrad.nn.layer"),
                                    ("tapegrad.nn.layer", "tapegrad.viz")]
    assert mg.function_level_imports(pkg) == [("tapegrad.core.d", 4, "tapegrad.core.a")]
    assert mg.private_name_imports(pkg) == [("tapegrad.core.e", 2, "from .b import _hidden"),
                                            ("tapegrad.core.e", 3, "from . import _private_mod")]
