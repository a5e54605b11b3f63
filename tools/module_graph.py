"""Print and check the import graph of the ``tapegrad`` package, layer by layer.

    python tools/module_graph.py        # exit status 1 when a layering rule is broken

It reads the sources with ``ast`` and never imports ``tapegrad``: the point is to check
the package when its import is what is broken.  ``tests/test_layers.py`` uses the
functions below.  ``root`` is always the package folder (``.../tapegrad``); its name is
the top-level module name.
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

# Lowest layer first.  A module may import from lower layers and from its own folder only,
# so nn, viz and func (all 4) must not import one another.  The top package and __main__ are 6.
LAYERS = {"core": 0, "ops": 1, "autograd": 2, "replay": 3, "jit": 3, "nn": 4, "viz": 4, "func": 4,
          "distributions": 4,
          "optim": 5, "utils": 5}
TOP = 6
NAMES = {0: "core", 1: "ops", 2: "autograd", 3: "replay, jit", 4: "nn, viz, func, distributions", 5: "optim, utils",
         6: "top"}


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file; a package's ``__init__`` is named by the package."""
    out = {}
    for path in sorted(Path(root).rglob("*.py")):
        parts = list(path.relative_to(Path(root).parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _imports(root: Path):
    """Yield (module, lineno, imported module, source text, in a function?, private?) for
    every import of a module of this package."""
    pkg, modules = Path(root).name, _modules(root)
    for module, path in modules.items():
        # Relative imports are resolved against the package holding the module.
        is_init = path.name == "__init__.py"
        here = module.split(".") if is_init else module.split(".")[:-1]
        for node, in_func in _walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found = [(a.name, f"import {a.name}", False) for a in node.names]
            else:
                base = ".".join(here[:len(here) - node.level + 1] + [node.module or ""]
                                if node.level else [node.module]).strip(".")
                found = []
                for a in node.names:
                    # `from X import y` imports the module X.y when there is one, else X.
                    sub = f"{base}.{a.name}"
                    text = f"from {'.' * node.level}{node.module or ''} import {a.name}"
                    found.append((sub if sub in modules else base, text, _is_private(a.name)))
            for target, text, private_name in found:
                if target == pkg or target.startswith(pkg + "."):
                    private = private_name or any(map(_is_private, target.split(".")[1:]))
                    yield module, node.lineno, target, text, in_func, private


def _walk(tree, in_func=False):
    """Yield (import node, inside a function body?) for all imports, however nested."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, in_func
        nested = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _walk(child, in_func or nested)


def module_graph(root) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (at module level or in functions)."""
    graph = {m: set() for m in _modules(root)}
    for module, _, target, *_ in _imports(root):
        graph[module].add(target)
    return graph


def function_level_imports(root) -> list[tuple[str, int, str]]:
    """Internal imports inside function bodies: they hide a dependency (often a cycle)."""
    return [(m, line, t) for m, line, t, _, in_func, _ in _imports(root) if in_func]


def private_name_imports(root) -> list[tuple[str, int, str]]:
    """Imports of ``_name``s or ``_module``s: another module's private parts."""
    return [(m, line, text) for m, line, _, text, _, private in _imports(root) if private]


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] != "__main__" else ""


def layer_of(module: str) -> int:
    folder = _folder(module)
    if not folder:
        return TOP
    if folder not in LAYERS:
        raise ValueError(f"{module} is in no layer: add {folder!r} to LAYERS in {__file__}")
    return LAYERS[folder]


def upward_imports(graph) -> list[tuple[str, str]]:
    """Edges to a higher layer, or to another folder of the same layer (nn <-> viz)."""
    return sorted((src, dst) for src, dsts in graph.items() for dst in dsts
                  if not (layer_of(dst) < layer_of(src) or _folder(dst) == _folder(src)))


def cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module, and self-imports (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop())
                on_stack.discard(comp[-1])
            if len(comp) > 1 or v in graph.get(v, ()):
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def main(root: Path) -> int:
    graph, pkg = module_graph(root), root.name
    short = lambda m: m[len(pkg) + 1:] if m != pkg else pkg  # noqa: E731
    for layer in sorted(set(map(layer_of, graph))):
        print(f"layer {layer}: {NAMES.get(layer, '?')}")
        for m in sorted(m for m in graph if layer_of(m) == layer):
            print(f"  {short(m):28} -> {', '.join(sorted(map(short, graph[m]))) or '-'}")
    problems = ([f"cycle among: {', '.join(c)}" for c in cycles(graph)]
                + [f"upward import: {s} (layer {layer_of(s)}) imports {d} (layer {layer_of(d)})"
                   for s, d in upward_imports(graph)]
                + [f"function-level import: {m}:{line} imports {t}"
                   for m, line, t in function_level_imports(root)]
                + [f"private import: {m}:{line}: {text}" for m, line, text in private_name_imports(root)])
    print()
    print("\n".join(problems) if problems else
          "no cycles, no upward imports (and no function-level or private internal imports)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(Path(__file__).resolve().parents[1] / "tapegrad"))
