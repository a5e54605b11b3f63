"""The README: its first section has the two commands (the second is CI's), and every
Python block runs as pasted, each on its own, printing what its comments say."""
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_readme_starts_with_the_two_commands():
    lines = README.read_text().splitlines()
    block = lines[lines.index("```bash") + 1: lines.index("```bash") + 3]
    assert block[0].endswith("python -m tapegrad")
    assert block[1].endswith('pip install -e ".[test]" && python -m pytest -q')
    ci = (README.parent / ".ci" / "run").read_text()
    assert block[1] in ci


def test_the_first_block_prints_what_it_says(capsys):
    exec(compile(BLOCKS[0], "README block 1", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "tensor(20., grad_fn=<MulBackward0>)"
    assert out[1].startswith("((<AddBackward0") and "AccumulateGrad" in out[1]
    assert out[2] == "tensor(4., requires_grad=True)"
    assert out[3] == "tensor(4.) tensor(4.) tensor(5.)"


@pytest.mark.parametrize("k", range(len(BLOCKS)), ids=[f"block{k + 1}" for k in range(len(BLOCKS))])
def test_every_block_runs_as_pasted(k, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    scope = {"__name__": f"readme_block_{k + 1}"}
    exec(compile(BLOCKS[k], f"README block {k + 1}", "exec"), scope)
    if "accuracy" in scope:          # the training loop learns
        assert scope["accuracy"] > 0.8
    if "decay" in scope:   # tg.jit's loop: ten steps of f = 1 - kh + (kh)^2 / 2 (h = 0.1)
        value, grad = scope["decay"].value_and_grad(2.0, 1.0)
        f, df = 1 - 0.2 + 0.02, -0.1 + 2.0 * 0.01
        assert value == pytest.approx(f ** 10, rel=1e-9)
        assert grad == pytest.approx(10 * f ** 9 * df, rel=1e-9)
