"""Views: the tape as HTML and text tables, the backward graph as DOT / SVG / PNG."""
import re
import shutil
import sys

import numpy as np
import pytest

import tapegrad as tg
from tapegrad import viz


def seed_graph():
    """Seeds 000/003: e = (a + b) * d."""
    a = tg.tensor(2.0, requires_grad=True)
    b = tg.tensor(3.0, requires_grad=True)
    c = a + b
    d = tg.tensor(4.0, requires_grad=True)
    e = c * d
    return dict(a=a, b=b, c=c, d=d, e=e)


def parse_dot(source):
    """{node id: label} and [(tail id, head id)] in the order the edges are written."""
    labels = dict(re.findall(r'^\s+(\w+) \[label="((?:[^"\\]|\\.)*)"', source, re.M))
    edges = re.findall(r"^\s+(\w+) -> (\w+);$", source, re.M)
    return labels, edges


def by_label(labels, text):
    ids = [k for k, v in labels.items() if v == text]
    assert len(ids) == 1, (text, labels)
    return ids[0]


# -- draw: the DOT source ----------------------------------------------------------------

def test_seed_graph_has_the_seeds_nodes_and_edges():
    t = seed_graph()
    source = viz.draw(t["e"], names=t).source
    labels, edges = parse_dot(source)
    assert sorted(labels.values()) == sorted([
        "a = 2", "b = 3", "c = 5", "d = 4", "e = 20",
        "AccumulateGrad", "AccumulateGrad", "AccumulateGrad", "AddBackward0", "MulBackward0"])
    a, b, c, d, e = (by_label(labels, f"{n} = {v}") for n, v in zip("abcde", (2, 3, 5, 4, 20)))
    add, mul = by_label(labels, "AddBackward0"), by_label(labels, "MulBackward0")
    acc = {leaf: next(h for t_, h in edges if t_ == leaf) for leaf in (a, b, d)}
    assert {labels[n] for n in acc.values()} == {"AccumulateGrad"}
    assert len(set(acc.values())) == 3                  # one AccumulateGrad per leaf
    assert sorted(edges) == sorted([
        (a, acc[a]), (b, acc[b]), (d, acc[d]),          # leaf -> AccumulateGrad
        (acc[a], add), (acc[b], add),                   # c = a + b
        (add, c), (c, mul), (acc[d], mul),              # e = c * d
        (mul, e)])
    into_mul = [t_ for t_, h in edges if h == mul]
    assert into_mul == [c, acc[d]]                      # argument order: c * d
    assert "ordering=in" in source and "rankdir=TB" in source


def test_names_default_to_the_callers_variables():
    a = tg.tensor(2.0, requires_grad=True)
    b = tg.tensor(3.0, requires_grad=True)
    c = a + b
    d = tg.tensor(4.0, requires_grad=True)
    e = c * d
    labels, _ = parse_dot(viz.draw(e).source)
    assert {"a = 2", "b = 3", "c = 5", "d = 4", "e = 20"} <= set(labels.values())
    del a, b, c, d


def test_unnamed_tensors_show_tensor_and_their_shape():
    t = seed_graph()
    labels, _ = parse_dot(viz.draw(t["e"], names={}).source)
    assert sorted(v for v in labels.values() if v.startswith("tensor")) == [
        "tensor = 2", "tensor = 20", "tensor = 3", "tensor = 4"]   # c unnamed: no box
    w = tg.tensor(np.ones((2, 3)), requires_grad=True)
    labels, _ = parse_dot(viz.draw(tg.sum(w * 2.0), names={}).source)
    assert any(v.startswith("tensor (2, 3)\\l") for v in labels.values())
    assert {"SumBackward0", "MulBackward0", "AccumulateGrad"} <= set(labels.values())


def test_gradients_appear_after_backward_and_can_be_hidden():
    t = seed_graph()
    t["e"].backward()
    labels = set(parse_dot(viz.draw(t["e"], names=t).source)[0].values())
    assert {"a = 2\\ngrad = 4", "b = 3\\ngrad = 4", "d = 4\\ngrad = 5"} <= labels
    labels = set(parse_dot(viz.draw(t["e"], names=t, show_grads=False).source)[0].values())
    assert "a = 2" in labels and not any("grad" in v for v in labels)
    labels = set(parse_dot(viz.draw(t["e"], names=t, show_values=False,
                                    show_grads=False).source)[0].values())
    assert {"a", "b", "c", "d", "e"} <= labels


def test_array_values_and_grads_in_boxes():
    W = tg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    s = tg.sum(W * W)
    s.backward()
    labels, edges = parse_dot(viz.draw(s, names={"W": W, "s": s}).source)
    w = next(v for v in labels.values() if v.startswith("W (2, 3)"))
    assert "[[0., 1., 2.]" in w and "grad [[ 0.,  2.,  4.]" in w
    mul = by_label(labels, "MulBackward0")
    acc = by_label(labels, "AccumulateGrad")
    assert [t_ for t_, h in edges if h == mul] == [acc, acc]   # W * W: two edges


def test_leaf_and_constant_roots():
    x = tg.tensor(1.5, requires_grad=True)
    labels, edges = parse_dot(viz.draw(x, names={"x": x}).source)
    assert sorted(labels.values()) == ["AccumulateGrad", "x = 1.5"]
    assert len(edges) == 1
    k = tg.tensor(7.0)
    labels, edges = parse_dot(viz.draw(k, names={"k": k}).source)
    assert list(labels.values()) == ["k = 7"] and edges == []


def test_collapse_chains_merges_single_input_runs():
    x = tg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(50):
        y = y * 1.01
    z = y.sin() + x.exp()
    plain = viz.draw(z, names={})
    assert plain.source.count('"MulBackward0"') == 50
    g = viz.draw(z, names={}, collapse_chains=True)
    labels, edges = parse_dot(g.source)
    assert "MulBackward0" not in labels.values()
    # the chain is Mul x50 plus the sin above it (sin's only input is the chain)
    chain = by_label(labels, "chain of 51 nodes\\nMulBackward0 \u00d750, SinBackward0 \u00d71")
    acc, add = by_label(labels, "AccumulateGrad"), by_label(labels, "AddBackward0")
    assert (acc, chain) in edges and (chain, add) in edges
    assert repr(g) == "<tapegrad.viz.Graph: 6 nodes, 6 edges>"  # + Exp, Add, x, z


def test_collapse_keeps_named_tensors_and_shared_nodes():
    x = tg.tensor(1.0, requires_grad=True)
    h = x
    for _ in range(5):
        h = h.sin()
    mid = h                                   # named: ends a run
    for _ in range(5):
        h = h.cos()
    y = h * mid                               # mid has two consumers: not inside a run
    labels, _ = parse_dot(viz.draw(y, names={"mid": mid, "y": y}, collapse_chains=True).source)
    assert "SinBackward0 \u00d74" in labels.values()
    assert "CosBackward0 \u00d75" in labels.values()
    assert any(v.startswith("mid = ") for v in labels.values())
    assert "SinBackward0" in labels.values()  # the sin that makes mid stays on its own


def test_max_nodes_cuts_the_walk_with_a_note():
    x = tg.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(100):
        y = y * 1.01
    labels, edges = parse_dot(viz.draw(y, names={}, max_nodes=10).source)
    assert list(labels.values()).count("MulBackward0") == 10
    assert "... more not drawn (max_nodes=10)" in labels.values()
    full = viz.draw(y, names={}, max_nodes=None).source
    assert full.count('"MulBackward0"') == 100 and "more not drawn" not in full


def test_graph_across_tapes():
    x = tg.tensor(0.5, requires_grad=True)
    with tg.Tape():
        h = x.exp()
    with tg.Tape():
        y = h * 3.0
    labels, edges = parse_dot(viz.draw(y, names={"x": x, "h": h, "y": y}).source)
    assert {"ExpBackward0", "MulBackward0", "AccumulateGrad"} <= set(labels.values())
    h_box = next(k for k, v in labels.items() if v.startswith("h = "))
    assert (h_box, by_label(labels, "MulBackward0")) in edges


def test_dot_labels_are_escaped():
    x = tg.tensor(1.0, requires_grad=True)
    src = viz.draw(x * 2.0, names={'say "hi"\\': x}).source
    assert 'label="say \\"hi\\"\\\\ = 1"' in src


# -- draw: rendering -----------------------------------------------------------------------

def needs_graphviz():
    pytest.importorskip("graphviz")
    if shutil.which("dot") is None:
        pytest.skip("the Graphviz 'dot' program is not installed")


def test_render_svg_and_png(tmp_path):
    needs_graphviz()
    t = seed_graph()
    g = viz.draw(t["e"], names=t)
    svg = g._repr_svg_()
    assert "<svg" in svg and "MulBackward0" in svg and "AccumulateGrad" in svg
    assert g._repr_mimebundle_() == {"image/svg+xml": svg}
    png = g.render(tmp_path / "e.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    out = g.render(tmp_path / "e", format="svg")
    assert "<svg" in out.read_text()


def test_missing_graphviz_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)     # import graphviz -> ImportError
    t = seed_graph()
    g = viz.draw(t["e"], names=t)
    assert "MulBackward0" in g.source                      # the DOT text needs nothing
    with pytest.raises(viz.GraphvizNotFound, match="graphviz Python package") as err:
        g.render("never-written.png")
    msg = str(err.value)
    assert "pip install" in msg and "tapegrad[viz]" in msg and "apt-get install graphviz" in msg
    bundle = g._repr_mimebundle_()
    assert list(bundle) == ["text/plain"] and "tapegrad[viz]" in bundle["text/plain"]
    assert g.source in bundle["text/plain"]


def test_missing_dot_program_says_how_to_install(monkeypatch, tmp_path):
    pytest.importorskip("graphviz")
    monkeypatch.setenv("PATH", str(tmp_path))              # no dot on PATH
    t = seed_graph()
    with pytest.raises(viz.GraphvizNotFound, match="'dot' program") as err:
        viz.draw(t["e"], names=t)._repr_svg_()
    assert "apt-get install graphviz" in str(err.value)


# -- tapes as tables -----------------------------------------------------------------------

def small_tape():
    with tg.Tape() as tape:
        x = tg.tensor(2.0, requires_grad=True)
        y = (x * 3.0).sin()
        z = tg.sum(tg.tensor([1.0, 2.0], requires_grad=True) * y)
    return tape, x, y, z


def test_text_summary_is_a_wengert_list():
    tape, x, y, z = small_tape()
    text = viz.tape_summary(tape)
    lines = text.splitlines()
    assert re.fullmatch(rf"Tape: {len(tape)} entries, 2 leaves, 1 python ops, [\d.]+ k?B",
                        lines[0])
    counts = dict(item.rsplit(" ", 1) for item in lines[1].removeprefix("ops: ").split(", "))
    assert counts == {"leaf": "2", "mul": "2", "sin": "1", "SumBackward0": "1", "pyout": "1"}
    assert sum(map(int, counts.values())) == len(tape)
    assert re.search(r"^\s+0\s+leaf\s+-> v0\s+= 2$", text, re.M)
    assert re.search(r"^\s+1\s+mul\s+v0, 3\s+-> v1\s+= 6$", text, re.M)
    assert re.search(r"^\s+2\s+sin\s+v1\s+-> v2\s+= -0\.2794155$", text, re.M)
    assert re.search(r"^\s+\d+\s+SumBackward0\s+v\d+\s+-> v\d+$", text, re.M)
    assert re.search(r"pyout\s+v\d+\s+-> v\d+\s+= -0\.83824649$", text, re.M)
    short = viz.tape_summary(tape, max_rows=4)
    assert f"... {len(tape) - 4:,} entries not shown ..." in short
    assert len(short.splitlines()) == 2 + 4 + 1


def test_text_summary_with_adjoints():
    tape, x, y, z = small_tape()
    text = viz.tape_summary(tape, sweep={y._entry: 1.5})
    assert re.search(r"-> v2\s+= -0\.2794155\s+adjoint 1\.5$", text, re.M)
    assert text.count("adjoint") == 1


def test_html_table_rows_and_summary():
    tape, x, y, z = small_tape()
    page = viz.tape_html(tape)
    assert f"Tape: {len(tape)} entries, 2 leaves, 1 python ops" in page
    assert "leaf&nbsp;2" in page and "sin&nbsp;1" in page and "SumBackward0&nbsp;1" in page
    rows = re.findall(r"<tr>(.*?)</tr>", page)
    assert len(rows) == 1 + len(tape)                      # header + one row an entry
    cells = [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r) for r in rows]
    assert cells[0] == ["#", "op", "inputs", "output", "value"]
    assert cells[2] == ["1", "mul", "v0, 3", "v1", "6"]
    assert cells[3] == ["2", "sin", "v1", "v2", "-0.2794155"]
    assert "adjoint" not in page and "not shown" not in page


def test_html_adjoint_column_from_a_sweep():
    tape, x, y, z = small_tape()
    from tapegrad.autograd.engine import walk_tape
    sweep = walk_tape(tape, {z._entry: 1.0}, create_graph=False)
    page = viz.tape_html(tape, sweep=sweep)
    cells = [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r) for r in re.findall(r"<tr>(.*?)</tr>", page)]
    assert cells[0][-1] == "adjoint"
    dz_dy = 1.0 + 2.0
    assert float(cells[3][-1]) == pytest.approx(dz_dy)                     # v2 = y
    assert float(cells[1][-1]) == pytest.approx(dz_dy * np.cos(6.0) * 3.0)  # v0 = x


def test_names_are_escaped_in_html():
    odd = type("Odd&Op<b>", (tg.autograd.Function,), {
        "forward": staticmethod(lambda ctx, x: x * 2.0),
        "backward": staticmethod(lambda ctx, g: g * 2.0)})
    with tg.Tape() as tape:
        odd.apply(tg.tensor(1.0, requires_grad=True))
    page = viz.tape_html(tape)
    assert "Odd&amp;Op&lt;b&gt;Backward" in page and "Op<b>" not in page


def long_tape(n):
    with tg.Tape() as tape:
        x = tg.tensor(1.0, requires_grad=True)
        y = x
        for _ in range(n):
            y = y * 1.0000001
    return tape, y


def test_million_entry_tape_renders_fast_without_iterating_it(monkeypatch):
    tape, _ = long_tape(1_000_000)
    assert len(tape) == 1_000_001

    def iterate(self):
        raise AssertionError("the views must not iterate the whole tape")
    monkeypatch.setattr(tg.Tape, "__iter__", iterate)
    # no timing here (shared machines are noisy): the views must not walk the tape in
    # Python, which the monkeypatched __iter__ enforces; they read counts with NumPy
    page = viz.tape_html(tape)
    text = viz.tape_summary(tape)
    assert "Tape: 1,000,001 entries, 1 leaves, 0 python ops" in page
    assert "mul&nbsp;1,000,000 &middot; leaf&nbsp;1" in page
    assert "999,951 entries not shown" in page                 # 25 first + 25 last rows
    assert page.count("<tr>") == 1 + 50
    assert "<td>v999999, 1.0000001</td><td>v1000000</td>" in page
    assert "ops: mul 1,000,000, leaf 1" in text
    assert "999,981 entries not shown" in text
    assert re.search(r"^\s+1000000\s+mul\s+v999999, 1\.0000001\s+-> v1000000\s+= 1\.1051709$",
                     text, re.M)


def test_long_graph_draws_fast_up_to_max_nodes():
    _, y = long_tape(1_000_000)
    g = viz.draw(y, names={}, collapse_chains=True)   # walks max_nodes, not the chain
    labels = set(parse_dot(g.source)[0].values())
    assert labels == {"MulBackward0 \u00d7500", "... more not drawn (max_nodes=500)",
                      "tensor = 1.10517"}


def test_tape_shows_itself(capsys):
    with tg.Tape() as tape:
        x = tg.tensor(2.0, requires_grad=True)
        y = (x * 3.0).sin()
    assert tape._repr_html_() == viz.tape_html(tape)
    tape.summary()
    assert capsys.readouterr().out == viz.tape_summary(tape) + "\n"
    assert tg.viz.draw is viz.draw
