"""The README's tour runs and prints what it says."""
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_tour_runs(capsys):
    code = re.search(r"## A tour\n\n```python\n(.*?)```", README.read_text(), re.S).group(1)
    exec(compile(code, "README tour", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "tensor(20., grad_fn=<MulBackward0>)"
    assert out[2] == "tensor(4., requires_grad=True)"
    assert out[3] == "tensor(4.) tensor(4.) tensor(5.)"
    assert out[4].startswith("179992 tensor(-51.2000)")


def test_readme_starts_with_the_two_commands():
    lines = README.read_text().splitlines()
    block = lines[lines.index("```bash") + 1: lines.index("```bash") + 3]
    assert block[0].endswith("python -m tapegrad")
    assert block[1].endswith('pip install -e ".[test]" && python -m pytest -q')
    ci = (README.parent / ".ci" / "run").read_text()
    assert block[1] in ci


def test_readme_nn_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    ns = {}
    exec(compile("import tapegrad as tg\n" + blocks[1], "README nn example", "exec"), ns)
    assert ns["loss"].item() < 0.7   # it trains: below the loss of a coin flip (ln 2)
