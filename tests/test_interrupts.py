"""Ctrl-C at any moment while recording leaves every tape consistent (tapegrad delivers the
interrupt when the function writing the tape returns), and interrupted batches stop."""
import os
import subprocess
import sys
import textwrap

import numpy as np

import tapegrad as tg

STORM = textwrap.dedent("""
    import os, random, signal, threading, time
    # a process started in the background inherits SIGINT ignored: take Python's handler
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import numpy as np
    import tapegrad as tg

    random.seed(0)
    stop = False

    go = threading.Event()

    def send_interrupts():       # SIGINT every 0.5-3 ms, as a user hammering Ctrl-C
        go.wait()                # (not while Thread.start() waits for this thread to run)
        while not stop:
            time.sleep(random.uniform(0.0005, 0.003))
            os.kill(os.getpid(), signal.SIGINT)

    def program(x, arr):
        y = x
        for k in range(200):
            y = y * 1.0001 + 0.001 if k % 2 else (y.sin() + x)
        (arr * 1.5 + arr.sin()).sum()
        return y

    with tg.Tape() as recorded:
        leaves = [tg.tensor(0.1 * k, requires_grad=True) for k in range(50)]
        total = sum((l.sin() * l for l in leaves), 0.0)
    compiled = recorded.compile(leaves, total)
    points = np.random.default_rng(0).uniform(size=(2000, 50))
    want = compiled.value_and_grad(points)

    x = tg.tensor(0.7, requires_grad=True)
    arr = tg.tensor(np.linspace(0, 1, 8), requires_grad=True)
    tg.autograd.grad(program(x, arr), x)          # compile the kernels before the storm
    counts = {"interrupted": 0, "k": 0}

    def storm(t0):
        while True:
            try:
                if time.time() - t0 > 3:
                    return
                counts["k"] += 1
                y = program(x, arr)
                if counts["k"] % 3 == 0:
                    tg.autograd.grad(y, x)            # interrupted while sweeping
                if counts["k"] % 5 == 0:
                    compiled.value_and_grad(points)   # interrupted while replaying a batch
            except KeyboardInterrupt:
                counts["interrupted"] += 1

    threading.Thread(target=send_interrupts, daemon=True).start()
    t0 = time.time()
    while not stop:     # (an interrupt between two statements of this test's own loop
        try:            # lands here: the storm goes on)
            go.set()
            storm(t0)
            stop = True
            time.sleep(0.05)
        except KeyboardInterrupt:
            counts["interrupted"] += 1
    interrupted = counts["interrupted"]
    got = compiled.value_and_grad(points)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    tape = tg.current_tape()
    lengths = {len(tape._rec_op), len(tape._rec_a), len(tape._rec_b), len(tape._rec_val)}
    (g,) = tg.autograd.grad(program(x, arr), x)    # the interrupted tape still works
    with tg.Tape():
        (fresh,) = tg.autograd.grad(program(x, arr), x)
    print(interrupted, len(lengths), float(g) == float(fresh))
""")


def test_interrupts_while_recording_leave_the_tape_consistent(tmp_path):
    script = tmp_path / "storm.py"
    script.write_text(STORM)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    interrupted, lengths, same = r.stdout.split()
    assert int(interrupted) > 50           # the storm did interrupt, many times
    assert lengths == "1" and same == "True"


def test_an_interrupted_batch_stops_its_workers(monkeypatch):
    """A block that raises makes the other workers stop at their next block."""
    with tg.Tape() as tape:
        xs = [tg.tensor(0.5, requires_grad=True) for _ in range(4)]
        y = sum((x.sin() * x for x in xs), 0.0)
    f = tape.compile(xs, y)
    calls = []
    plain = f._forward_batch

    def failing(X, buf, first_point=0):
        calls.append(first_point)
        if first_point == 0:
            raise KeyboardInterrupt
        return plain(X, buf, first_point=first_point)

    monkeypatch.setattr(f, "_forward_batch", failing)
    monkeypatch.setenv("TAPEGRAD_NUM_THREADS", "2")
    try:
        f(np.random.default_rng(0).uniform(size=(128 * 40, 4)))
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("the interrupt was swallowed")
    assert len(calls) < 40                  # the workers did not run every block
