"""Differential fuzzing against PyTorch: about 2,000 random programs across the families of
``tests/fuzz/programs.py`` (scalar, tensor, autograd, create_graph, replay).  Documented
deviations are skipped by ``DEVIATIONS`` there and nowhere else.  ``tools/fuzz.py`` runs
the same with more programs and prints minimised reproducers."""
from pathlib import Path

import pytest

pytest.importorskip("torch")  # the fuzzer compares against it
# tests/ is on sys.path under pytest (no __init__.py there), so the helper package is `fuzz`

from fuzz.programs import DEVIATIONS, FAMILIES, fuzz  # noqa: E402

COUNT = 2000


def test_deviations_quote_the_readme():
    """Each skipped deviation quotes its README bullet word for word."""
    readme = Path(__file__).resolve().parents[1].joinpath("README.md").read_text()
    section = readme.split("## Differences from PyTorch, on purpose", 1)[1].split("\n## ", 1)[0]
    flat = " ".join(section.split())
    for d in DEVIATIONS:
        quote = d.reason.split("'", 1)[1].rsplit("'", 1)[0]
        assert " ".join(quote.split()) in flat, d.reason


def test_programs_match_torch():
    """Fails when a program's value, gradient, exception or graph differs from PyTorch's
    (outside the documented deviations), with the failure classes as its message (run
    ``python tools/fuzz.py --seed 0 --count 2000`` for reproducers).  Programs that only ran
    past their time budget xfail instead: on a cold Numba cache a kernel compiled for the
    first time on a busy machine can take longer than a program's 5 s."""
    report = fuzz(seed=0, count=COUNT)
    assert report.passed + report.failed == COUNT
    assert set(report.per_family) == set(FAMILIES)
    if report.failed:
        ranked = sorted(report.classes.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        classes = "; ".join(f"{len(r)}x {c}" for c, r in ranked)
        print(f"{report.failed} of {COUNT} programs differ from PyTorch:")
        print("\n".join(f"{len(r):5d}  {c}" for c, r in ranked))
        differ = [c for c in report.classes if c.split(" / ")[1] != "timeout"]
        assert not differ, (f"{report.failed} of {COUNT} programs differ from PyTorch "
                            f"(python tools/fuzz.py --seed 0 --count {COUNT} for reproducers): "
                            f"{classes}")
        pytest.xfail(f"{report.failed} of {COUNT} programs ran past their time budget: {classes}")


def test_shards_add_up_to_the_run():
    """``tools/fuzz.py`` runs a seed in shards (child processes): programs ``start ..`` of a
    shard are the run's own, and the merged report is the run's."""
    from fuzz.programs import merge
    whole = fuzz(seed=3, count=30)
    parts = merge([fuzz(seed=3, count=12), fuzz(seed=3, count=18, start=12)])
    assert (parts.passed, parts.failed) == (whole.passed, whole.failed)
    assert parts.per_family == whole.per_family
    assert parts.skipped_deviations == whole.skipped_deviations
    assert sorted(parts.classes) == sorted(whole.classes)
