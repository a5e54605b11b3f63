"""Shared fixtures.

``both_walks``: run a test twice, once with the float reverse walk and once with the
recorded-tensor walk of ``create_graph=True`` forced underneath ``backward()`` and
``autograd.grad()``.  The two modes are one walk with different adjoints; semantic tests
(hooks, retain_grad, links between tapes, custom Functions, freed graphs, in-place checks)
must give the same results in both.
"""
import pytest

from tapegrad.autograd import gradients


@pytest.fixture(params=["float walk", "recorded walk"])
def both_walks(request, monkeypatch):
    if request.param == "recorded walk":
        run = gradients.run_backward

        def recorded(*args, **kwargs):
            kwargs["create_graph"] = True
            return run(*args, **kwargs)

        monkeypatch.setattr(gradients, "run_backward", recorded)
    return request.param
