"""tapegrad keeps freed C-heap memory between iterations (core/memory.py), so that arrays
freed after one backward serve the next without fresh page faults."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tapegrad.core import memory

ROOT = Path(__file__).resolve().parents[1]

# allocate and free a few MB of arrays, as one objective + backward does, and count the
# page faults of the later rounds
_ROUNDS = """
import resource
import numpy as np
import tapegrad
def one_round():
    kept = [np.ones(50_000) for _ in range(40)]   # 16 MB in 400 KB arrays
    return sum(a[0] for a in kept)
one_round()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    one_round()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(top_pad):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env[memory.ENV] = str(top_pad)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", _ROUNDS], env=env, capture_output=True,
                         text=True, check=True)
    return int(out.stdout.split()[-1])


def _glibc():
    return sys.platform.startswith("linux") and os.confstr("CS_GNU_LIBC_VERSION") is not None


@pytest.mark.skipif(not _glibc(), reason="glibc's malloc only")
def test_freed_arrays_are_reused_without_page_faults():
    # 10 rounds of 16 MB are ~40,000 pages: without the pad malloc hands a good part of them
    # back each round (11,400 faults on the CI machine), with it none
    untouched = _faults(0)
    padded = _faults(memory.DEFAULT_TOP_PAD)
    assert untouched > 4_000
    assert padded < untouched // 20


def test_zero_or_a_users_malloc_setting_leaves_malloc_alone(monkeypatch):
    assert memory.retain_heap_top(0) is False
    monkeypatch.setenv("MALLOC_TOP_PAD_", "0")
    assert memory.retain_heap_top(1 << 20) is False


@pytest.mark.xfail(strict=True, reason="README: a detached tensor keeps its source's tape "
                                       "alive (its view root is the source tensor)")
def test_a_detached_result_does_not_keep_its_tape_alive():
    # PyTorch's x.detach() shares x's memory and version counter, not its graph: a
    # training loop's losses.append(loss.detach()) keeps no step's saved tensors.  Here the
    # detached tensor's view root is loss, whose tape holds every array the step recorded
    # (1,000 steps of a 128 x 256 MLP: 930 MB against 170 MB with loss.item()).
    import gc
    import weakref

    import numpy as np

    import tapegrad as tg
    w = tg.tensor(np.full((4, 4), 0.1), requires_grad=True)
    loss = (w @ w).tanh().sum()
    loss.backward()
    tape = weakref.ref(loss._tape)
    kept = loss.detach()
    del loss
    gc.collect()
    assert float(kept) == pytest.approx(16 * np.tanh(0.04))
    assert tape() is None
