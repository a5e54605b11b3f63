"""Shared fixtures.

``both_walks``: run a test four times: with the float reverse walk (its setup for small
graphs with and without the one-call walk of a tape of numbers, then the one for large graphs
and large arrays forced on the same graph), and with the
recorded-tensor walk of ``create_graph=True`` forced underneath ``backward()`` and
``autograd.grad()``.  The two modes are one walk with different adjoints; semantic tests
(hooks, retain_grad, links between tapes, custom Functions, freed graphs, in-place checks)
must give the same results in both.
"""
import sys

import pytest

from tapegrad.autograd import engine, gradients


@pytest.fixture(autouse=True)
def _torch_default_dtype():
    """Every test starts with PyTorch's own default dtype (float32) and leaves it as it found
    it: a module that wants float64 sets it in a fixture of its own (which runs after this
    one).  Without this a test saw whatever an earlier module left: float64 set at import
    by some, float32 set back by others' fixtures, so its result depended on the order."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "set_default_dtype"):
        yield
        return
    was = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    yield
    torch.set_default_dtype(was)


@pytest.fixture(params=["float walk", "float walk, no flat walk", "float walk, large-graph setup",
                        "recorded walk"])
def both_walks(request, monkeypatch):
    # (a walk plan is derived under one setup: none carries over from another test's)
    monkeypatch.setattr(engine, "WALK_PLANS", engine.WalkPlans())
    if request.param == "float walk, no flat walk":
        # a small tape of elementwise entries takes ``_flat_walk``, one sweep call; the
        # general walk over it must compute the same
        monkeypatch.setattr(engine, "FLAT_WALK", False)
    if request.param == "float walk, large-graph setup":
        # the setup a walk over a long tape or a large graph takes (NumPy over the reached
        # entries), forced on the small graphs of the tests: it must compute the same
        monkeypatch.setattr(engine, "_SMALL", -1)
        monkeypatch.setattr(engine, "_FEW_HITS", -1)
        # and every array entry run alone on its own arrays, as large ones are
        monkeypatch.setattr(engine, "_LARGE", 1)
    if request.param == "recorded walk":
        run = gradients.run_backward

        def recorded(*args, **kwargs):
            kwargs["create_graph"] = True
            return run(*args, **kwargs)

        monkeypatch.setattr(gradients, "run_backward", recorded)
    return request.param
