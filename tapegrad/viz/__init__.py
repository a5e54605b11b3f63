"""Views for people: a tape as a table (HTML for Jupyter, text for terminals) and the
backward graph of a tensor as a Graphviz drawing.

    tape_summary(tape)       # the Wengert list:  "   1  mul  v0, 2  -> v1 = 4"
    tape_html(tape)          # the same as an HTML table (Jupyter shows it for a tape)
    draw(e).render("e.png")  # tensors as boxes, backward nodes (MulBackward0, ...) as ellipses

The tables never walk a whole tape: op counts come from the tape's arrays with NumPy and
rows are built for the first and last few entries only, so a 1M-entry tape renders at once.
``draw`` walks ``grad_fn.next_functions`` as PyTorch users do; its DOT text needs nothing
installed, rendering it needs the ``graphviz`` package (``pip install "tapegrad[viz]"``) and
the Graphviz ``dot`` program.
"""
from __future__ import annotations

import pathlib
import sys
from collections import Counter

import numpy as np

from ..core.graph import AccumulateGrad
from ..core.pyop import pyop_at, pyop_name
from ..core.tape import ARG, OP_NAMES, PYFUNC, PYOUT, Tape
from ..core.tensor import Tensor, extend

__all__ = ["tape_html", "tape_summary", "draw", "Graph", "GraphvizNotFound"]


# -- tapes as tables ---------------------------------------------------------------------

def _is_array(v):
    return isinstance(v, np.ndarray) and v.ndim > 0


def _num(v, cell=False):
    """A float or an array, short enough for a graph label; ``cell``: on one line, with
    the array's shape (a table cell)."""
    if _is_array(v):
        body = np.array2string(v, precision=4, threshold=6, edgeitems=2, separator=", ",
                               max_line_width=60)
        return f"{' '.join(body.split())} {tuple(v.shape)}" if cell else body
    return format(float(v), ".8g" if cell else ".6g")


def _ref(tape, r):
    """An operand reference: ``v7`` for entry 7, the number itself for a constant."""
    return f"v{r}" if r >= 0 else format(tape._c[-r - 1], ".8g")


def _row(tape, i, sweep):
    """(index, op, inputs, output, value, adjoint) of entry ``i``, as strings."""
    code, ra, rb = tape._entry(i)
    if code == PYFUNC:
        py = pyop_at(tape, i)
        op, refs = py.name, py.inputs
    elif code == PYOUT:
        op, refs = OP_NAMES[code], (ra,)       # output k of the pyfunc head ``ra``
    elif code == ARG:
        op, refs = OP_NAMES[code], (ra, rb)    # 2nd and 3rd inputs of the ternary op after it
    else:
        op, refs = OP_NAMES[code], tape._inputs(i)
    if code in (PYFUNC, ARG):                    # no value of their own: bookkeeping rows
        return str(i), op, ", ".join(_ref(tape, r) for r in refs), f"v{i}", "", ""
    value = "(freed)" if tape._released and i in tape._released else _num(tape._value(i), cell=True)
    return (str(i), op, ", ".join(_ref(tape, r) for r in refs), f"v{i}", value,
            _adjoint(sweep, i))


def _adjoint(sweep, i):
    """Entry ``i``'s adjoint in a FloatAdjoints (``autograd.engine``) or a dict ``{entry: adjoint}``; '' when it has none."""
    if sweep is None:
        return ""
    reached = getattr(sweep, "reached", None)
    if reached is not None and (i >= len(reached) or not reached[i]):
        return ""
    g = sweep.get(i)
    return "" if g is None else _num(g, cell=True)


def _shown(n, max_rows):
    """The entries a table shows: all of them, or the first and last few, and how many not."""
    if n <= max_rows:
        return list(range(n)), [], 0
    head = max(1, (max_rows + 1) // 2)
    tail = max(1, max_rows - head)
    return list(range(head)), list(range(n - tail, n)), n - head - tail


def _counts(tape):
    """{op name: entries}, most frequent first; read from the tape's arrays, not a loop."""
    op = tape._arrays()[0]
    per_code = np.bincount(op.view(np.uint8), minlength=len(OP_NAMES))
    counts = Counter({OP_NAMES[c]: int(k) for c, k in enumerate(per_code) if k})
    if tape._py:  # python ops by their own names (SumBackward0, a custom Function, ...)
        del counts[OP_NAMES[PYFUNC]]
        counts.update(pyop_name(p) for p in tape._py.values())
    return counts.most_common()


def _size(nbytes):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} B"


def _headline(tape):
    n = len(tape)
    return (f"Tape: {n:,} {'entry' if n == 1 else 'entries'}, {len(tape._leaves):,} leaves, "
            f"{len(tape._py):,} python ops, {_size(tape.nbytes)}")


def tape_summary(tape, max_rows=20, sweep=None):
    """The tape as a plain-text Wengert list, one entry a line::

        Tape: 3 entries, 1 leaves, 0 python ops, 167 B
        ops: leaf 1, mul 1, sin 1
           0  leaf             -> v0 = 2
           1  mul   v0, 3      -> v1 = 6
           2  sin   v1         -> v2 = -0.279415

    Operands ``vK`` are entries, bare numbers are constants.  Tapes longer than
    ``max_rows`` show their first and last entries only.  With ``sweep`` (a ``FloatAdjoints`` or a
    dict ``{entry: adjoint}``) each line ends with the entry's adjoint.
    """
    n = len(tape)
    counts = _counts(tape)
    lines = [_headline(tape), "ops: " + ", ".join(f"{op} {k:,}" for op, k in counts)]
    head, tail, hidden = _shown(n, max_rows)
    rows = [_row(tape, i, sweep) for i in head + tail]
    if not rows:
        return lines[0]
    w = [max(len(r[k]) for r in rows) for k in range(5)]

    def line(r):
        s = f"  {r[0]:>{w[0]}}  {r[1]:<{w[1]}}  {r[2]:<{w[2]}}  -> {r[3]:<{w[3]}}"
        s += f" = {r[4]:<{w[4]}}" if r[4] else " " * (w[4] + 3)
        return (s + (f"   adjoint {r[5]}" if r[5] else "")).rstrip()

    lines += [line(r) for r in rows[:len(head)]]
    if hidden:
        lines.append(f"  {'':>{w[0]}}  ... {hidden:,} entries not shown ...")
    lines += [line(r) for r in rows[len(head):]]
    return "\n".join(lines)


_CSS = """<style>
.tapegrad-tape table {border-collapse: collapse; font-size: 12px}
.tapegrad-tape th, .tapegrad-tape td {padding: 1px 10px; text-align: left; white-space: nowrap;
  font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace}
.tapegrad-tape .n {text-align: right}
.tapegrad-tape tr.gap td {text-align: center; font-style: italic; opacity: 0.7}
.tapegrad-tape .ops {margin: 2px 0 6px 0; font-size: 12px}
</style>"""


def tape_html(tape, max_rows=50, sweep=None):
    """The tape as an HTML table (index, op, inputs, output, value, and the adjoint when
    ``sweep`` -- a ``FloatAdjoints`` or a dict ``{entry: adjoint}`` -- is given), headed by a summary:
    entries, leaves, python ops, memory and the number of entries per op.  Tapes longer than
    ``max_rows`` show their first and last entries only."""
    from html import escape as esc               # (not at import: tables are rare)
    n = len(tape)
    counts = _counts(tape)
    head, tail, hidden = _shown(n, max_rows)
    cols = ["#", "op", "inputs", "output", "value"] + (["adjoint"] if sweep is not None else [])
    right = {0, 4, 5}                            # numbers align right

    def tr(tag, cells):
        return "<tr>" + "".join(f'<{tag} class="n">{esc(c)}</{tag}>' if k in right else
                                f"<{tag}>{esc(c)}</{tag}>" for k, c in enumerate(cells)) + "</tr>"

    body = [tr("td", _row(tape, i, sweep)[:len(cols)]) for i in head]
    if hidden:
        body.append(f'<tr class="gap"><td colspan="{len(cols)}">&#8942; {hidden:,} entries '
                    f"not shown &#8942;</td></tr>")
    body += [tr("td", _row(tape, i, sweep)[:len(cols)]) for i in tail]
    ops = " &middot; ".join(f"{esc(op)}&nbsp;{k:,}" for op, k in counts)
    table = (f"<table><thead>{tr('th', cols)}</thead><tbody>{''.join(body)}</tbody></table>"
             if n else "")
    return (f'{_CSS}<div class="tapegrad-tape"><div><b>{esc(_headline(tape))}</b></div>'
            f'<div class="ops">{ops}</div>{table}</div>')


# -- the backward graph ------------------------------------------------------------------

_INSTALL = ('Install both with: pip install "tapegrad[viz]" (the Python package) and '
            "apt-get install graphviz (the dot program; macOS: brew install graphviz, conda: "
            "conda install graphviz). Graph.source holds the DOT text without them.")


class GraphvizNotFound(RuntimeError):
    """Rendering needs the ``graphviz`` Python package and the Graphviz ``dot`` program."""


class Graph:
    """A drawn backward graph: ``.source`` is its DOT text; ``.render(path)`` writes a PNG or
    SVG file, and Jupyter shows it as SVG (both need Graphviz installed)."""

    def __init__(self, source, n_nodes, n_edges):
        self.source = source
        self.n_nodes, self.n_edges = n_nodes, n_edges

    def pipe(self, format="svg"):
        """The rendered graph as bytes in ``format`` (any format ``dot -T`` knows)."""
        try:
            import graphviz
        except ImportError as exc:
            raise GraphvizNotFound(
                "rendering a tapegrad graph needs the graphviz Python package, which is not "
                "installed, and the Graphviz 'dot' program. " + _INSTALL) from exc
        try:
            return graphviz.Source(self.source).pipe(format=format)
        except graphviz.ExecutableNotFound as exc:
            raise GraphvizNotFound(
                "rendering a tapegrad graph needs the Graphviz 'dot' program, which was not "
                "found on PATH. " + _INSTALL) from exc

    def render(self, path, format=None):
        """Write the graph to ``path`` as ``format`` ("png", "svg", "pdf", ...; by default
        the path's suffix, else png); returns the path."""
        path = pathlib.Path(path)
        fmt = format or path.suffix.lstrip(".").lower() or "png"
        path.write_bytes(self.pipe(fmt))
        return path

    def _repr_svg_(self):
        return self.pipe("svg").decode("utf-8")

    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            return {"image/svg+xml": self._repr_svg_()}
        except GraphvizNotFound as exc:  # a notebook without Graphviz still shows something
            return {"text/plain": f"{exc}\n\n{self.source}"}

    def __repr__(self):
        return f"<tapegrad.viz.Graph: {self.n_nodes} nodes, {self.n_edges} edges>"


_MIN_CHAIN = 3
_STYLE = {  # light fills; tensors are boxes, backward nodes ellipses
    "leaf": 'shape=box, style="filled,rounded", fillcolor="#dbeafe"',
    "root": 'shape=box, style="filled,rounded", fillcolor="#dcfce7"',
    "tensor": 'shape=box, style="filled,rounded", fillcolor="#f3f4f6"',
    "op": 'shape=ellipse, style=filled, fillcolor="#fef9c3"',
    "acc": 'shape=ellipse, style=filled, fillcolor="#fde7c8"',
    "chain": 'shape=ellipse, style=filled, fillcolor="#fef9c3", peripheries=2',
    "more": 'shape=plaintext, style="", fontcolor="#6b7280"',
}
_HEAD = """digraph backward {
  graph [rankdir=TB, ordering=in, bgcolor=white, nodesep=0.3, ranksep=0.35];
  node [fontname="Helvetica", fontsize=11, color="#6b7280", penwidth=0.8, height=0.35];
  edge [color="#6b7280", arrowsize=0.7];"""


def _key(node):
    """The identity of a backward node: its tape entry, or its leaf for AccumulateGrad."""
    if hasattr(node, "variable"):
        return id(node.variable)
    return (id(node._tape), node._entry)


def _tensor_key(t):
    """(node key, output number) of the edge that carries tensor ``t``'s gradient."""
    node = t.grad_fn
    if node is None:
        return id(t), 0
    return _key(node), (t._entry - node._entry - 1 if t._entry != node._entry else 0)


def _caller_names(depth=2):
    """Tensors bound to names in the caller's frame (globals, then locals, which win)."""
    frame = sys._getframe(depth)
    out = {}
    for scope in (frame.f_globals, frame.f_locals):
        out.update((k, v) for k, v in scope.items()
                   if isinstance(v, Tensor) and not k.startswith("_"))
    return out


def _walk(root, max_nodes):
    """Breadth-first over ``next_functions`` from ``root``.  Returns the nodes (node j is
    ``nodes[j]``), {node key: j}, each node's inputs as [(j, output_nr)] in argument order
    (j = -1: left out at ``max_nodes``), and how many inputs were left out."""
    nodes, index, inputs, cut = [root], {_key(root): 0}, [], 0
    limit = float("inf") if max_nodes is None else max_nodes
    for node in nodes:                            # grows as the walk goes: breadth-first
        ins = []
        for nxt, nr in node.next_functions:
            if nxt is None:
                continue
            k = _key(nxt)
            j = index.get(k)
            if j is None:
                if len(nodes) >= limit:
                    ins.append((-1, 0))
                    cut += 1
                    continue
                j = index[k] = len(nodes)
                nodes.append(nxt)
            ins.append((j, nr))
        inputs.append(ins)
    return nodes, index, inputs, cut


def _chains(nodes, inputs, boxed):
    """Maximal runs of single-input backward nodes, each the only consumer of the next,
    from the output end; only runs of ``_MIN_CHAIN`` or more.  ``boxed``: nodes whose
    output is drawn as a tensor box (which ends a run)."""
    consumers = Counter(j for ins in inputs for j, _ in ins)
    single = [len(ins) == 1 and j not in boxed and not hasattr(nodes[j], "variable")
              for j, ins in enumerate(inputs)]
    down = {}                                     # j -> its single input, in the same run
    for j, ins in enumerate(inputs):
        if single[j]:
            m = ins[0][0]
            if m >= 0 and single[m] and consumers[m] == 1:   # (m = -1: cut at max_nodes)
                down[j] = m
    runs = []
    for j in sorted(down.keys() - set(down.values())):   # the top of each run
        run = [j]
        while run[-1] in down:
            run.append(down[run[-1]])
        if len(run) >= _MIN_CHAIN:
            runs.append(run)
    return runs


def _dot_str(s, left=False):
    """A quoted DOT string; ``left``: its lines left-justified (arrays in a box)."""
    nl = "\\l" if left else "\\n"
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", nl)
    return f'"{s}{nl if left else ""}"'


def draw(y, show_values=True, show_grads=True, collapse_chains=False, max_nodes=500,
         names=None):
    """The backward graph of tensor ``y``, drawn as torchviz draws PyTorch's.

    Tensors are boxes (name or shape, value, gradient): the leaves on top in blue, ``y`` at
    the bottom in green, named intermediate tensors in grey.  Backward nodes are ellipses
    named as ``grad_fn`` names them (``MulBackward0``; ``AccumulateGrad`` for a leaf).
    Arrows follow the forward data flow; ``backward()`` walks them in reverse.

    ``names``: ``{name: tensor}`` used to label tensors; by default the tensors bound to
    names in the caller's scope.  ``collapse_chains``: draw each run of three or more
    single-input nodes as one node with its count.  ``max_nodes``: stop walking after this
    many backward nodes (None: no limit; collapsing a long chain needs it).  Returns a
    :class:`Graph` (``.source``, ``.render(path)``; Jupyter displays it).
    """
    if names is None:
        names = _caller_names()
    if y.grad_fn is not None:
        root = y.grad_fn
    elif y.requires_grad:
        root = AccumulateGrad(y)
    else:
        root = None
    nodes, index, inputs, cut = _walk(root, max_nodes) if root else ([], {}, [], 0)

    # Tensor boxes, keyed (node j, output_nr) like the edge that carries their gradient:
    # every leaf, the named intermediates, and y.  Values: (style, tensor, name).
    named = {}
    for name, t in names.items():
        if isinstance(t, Tensor) and t.requires_grad:
            k, nr = _tensor_key(t)
            if k in index:
                named.setdefault((index[k], nr), (name, t))
    boxes = {(j, 0): ("leaf", node.variable, named.get((j, 0), (None,))[0])
             for j, node in enumerate(nodes) if hasattr(node, "variable")}
    boxes.update((jn, ("tensor", t, name)) for jn, (name, t) in named.items() if jn not in boxes)
    if root is None:                              # y requires no grad: a lone box
        yname = next((n for n, t in names.items() if t is y), None)
        boxes[(-2, 0)] = ("root", y, yname)
    elif y.grad_fn is not None:
        yj = (0, _tensor_key(y)[1])
        boxes[yj] = ("root", y, named.get(yj, (None,))[0])

    ident = [f"n{j}" for j in range(len(nodes))] + ["more"]   # ident[-1]: the cut marker
    lines = [_HEAD]
    runs = []
    if collapse_chains:
        runs = _chains(nodes, inputs, {j for j, _ in boxes if j != 0})
    for r, run in enumerate(runs):
        kinds = Counter(type(nodes[j]).__name__ for j in run)
        label = ", ".join(f"{name} \u00d7{c:,}" for name, c in kinds.most_common(2))
        if len(kinds) > 1:
            label = f"chain of {len(run):,} nodes\n{label}" + (", ..." if len(kinds) > 2 else "")
        for j in run:
            ident[j] = f"c{r}"
        lines.append(f"  c{r} [label={_dot_str(label)}, {_STYLE['chain']}];")
    for j, node in enumerate(nodes):
        if ident[j][0] == "n":
            acc = hasattr(node, "variable")
            tip = "" if acc else f', tooltip="tape entry {node._entry}"'
            lines.append(f"  n{j} [label={_dot_str(type(node).__name__)}, "
                         f"{_STYLE['acc' if acc else 'op']}{tip}];")
    if cut:
        lines.append(f"  more [label={_dot_str(f'... more not drawn (max_nodes={max_nodes})')}"
                     f", {_STYLE['more']}];")
    box_id = {jn: f"t{b}" for b, jn in enumerate(boxes)}
    for jn, (style, t, name) in boxes.items():
        label = _dot_str(_box_label(t, name, show_values, show_grads), left=_is_array(t._value))
        lines.append(f"  {box_id[jn]} [label={label}, {_STYLE[style]}];")

    edges = []                                    # inputs in argument order (ordering=in)
    for j, ins in enumerate(inputs):
        for m, nr in ins:
            if ident[m] == ident[j]:
                continue                          # inside a collapsed chain
            via = (m, nr) in boxes and boxes[(m, nr)][0] != "leaf"
            edges.append((box_id[(m, nr)] if via else ident[m], ident[j]))
    for (j, nr), (style, _, _) in boxes.items():
        if j >= 0:                                # leaf -> AccumulateGrad, grad_fn -> output
            edges.append((box_id[(j, nr)], ident[j]) if style == "leaf" else
                         (ident[j], box_id[(j, nr)]))
    lines += [f"  {a} -> {b};" for a, b in edges]
    lines.append("}\n")
    drawn = len(set(ident[:len(nodes)])) + bool(cut) + len(boxes)
    return Graph("\n".join(lines), drawn, len(edges))


def _box_label(t, name, show_values, show_grads):
    """A tensor box: its name (or "tensor") and shape, value and gradient."""
    v, g = t._value, getattr(t, "_grad", None)       # not .grad: it warns for non-leaves
    if not _is_array(v):                          # a = 2 / grad = 4
        rows = [(name or "tensor") + (f" = {_num(v)}" if show_values else "")]
        if show_grads and g is not None:
            rows.append(f"grad = {_num(g._value)}")
        return "\n".join(rows)
    rows = [f"{name or 'tensor'} {tuple(v.shape)}"]   # W (2, 3) / [[...]] / grad [[...]]
    if show_values:
        rows.append(_num(v))
    if show_grads and g is not None:
        rows.append("grad " + _num(g._value))
    return "\n".join(rows)


def _tape_summary(self, max_rows: int = 20) -> None:
    """Print the tape as a Wengert list (first and last entries of a long tape)."""
    print(tape_summary(self, max_rows))


def _tape_repr_html(self):
    return tape_html(self)


extend(Tape, {"summary": _tape_summary, "_repr_html_": _tape_repr_html})
