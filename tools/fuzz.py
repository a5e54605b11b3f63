"""Differential fuzzing of tapegrad against PyTorch (issue "Gradients that match PyTorch").

    python tools/fuzz.py --seed 0 --count 3000 [--family scalar] [--show 1] [--jobs 2]

Prints the failure classes (family / kind of mismatch / op or feature) with counts, a
minimised reproducer per class, and ends with ``N passed, M failed``.  Deterministic for
a seed.  The programs, comparator and minimiser live in ``tests/fuzz/programs.py``.

The programs run in child processes, ``--shard`` of them each: a program that takes its
process down (PyTorch 2.13 segfaults on one of seed 6's first 20,000 programs, which ended
the whole run with no report) is found by halving its shard, run once on each library
alone to say whose crash it is, and reported as a ``process-crash`` failure with its
program (not minimised: that would run it here).  ``--jobs 0`` runs everything in this
process, as before.
"""
import argparse
import multiprocessing
import os
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tests.fuzz.programs import (FAMILIES, Mismatch, Program, Report, Result,  # noqa: E402
                                 family_of, fuzz, merge, program_at, run_one_side, summary)

SPAWN = multiprocessing.get_context("spawn")   # Numba's and PyTorch's thread pools: not fork-safe


def _shard_child(conn, seed, start, count, family):
    conn.send(fuzz(seed, count, family, start))


def _side_child(conn, seed, index, family, side):
    program = program_at(seed, index, family)   # generating runs PyTorch: it may crash too
    conn.send(program)
    run_one_side(program, side)
    conn.send(None)


def _in_child(target, *args):
    """(exit code, the messages the child sent before it ended)."""
    receiving, sending = SPAWN.Pipe(duplex=False)
    child = SPAWN.Process(target=target, args=(sending,) + args)
    child.start()
    sending.close()
    messages = []
    try:
        while True:
            messages.append(receiving.recv())
    except EOFError:   # the child ended, normally or not
        pass
    child.join()
    return child.exitcode, messages


def _crash_result(seed: int, index: int, family, code: int) -> Result:
    """Whose crash program ``index`` is: each library alone, in a process of its own."""
    program, who = None, "only with both libraries in one process"
    for side in ("torch", "tg"):
        exit_code, messages = _in_child(_side_child, seed, index, family, side)
        program = messages[0] if messages else program
        if exit_code != 0:
            who = "torch while generating" if not messages else \
                ("PyTorch" if side == "torch" else "tapegrad")
            code = exit_code
            break
    fam = family_of(index, family)
    detail = f"program {index} of seed {seed}: the process ended with code {code} ({who})"
    if program is None:
        program = Program(fam, [])
    return Result(program, f"{fam} / process-crash / {who}",
                  Mismatch("process-crash", "program", detail))


def _run_range(seed: int, start: int, count: int, family) -> Report:
    code, messages = _in_child(_shard_child, seed, start, count, family)
    if code == 0 and messages:
        return messages[0]
    if count == 1:
        report = Report(failed=1)
        result = _crash_result(seed, start, family, code)
        fam = family_of(start, family)
        report.per_family[fam] = {"passed": 0, "failed": 1}
        report.classes[result.failure] = [result]
        return report
    half = count // 2
    return merge([_run_range(seed, start, half, family),
                  _run_range(seed, start + half, count - half, family)])


def fuzz_isolated(seed: int, count: int, family, shard: int, jobs: int) -> Report:
    shards = [(s, min(shard, count - s)) for s in range(0, count, shard)]
    reports = [None] * len(shards)
    lock = threading.Lock()
    todo = list(range(len(shards)))

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                k = todo.pop(0)
            reports[k] = _run_range(seed, shards[k][0], shards[k][1], family)

    threads = [threading.Thread(target=worker) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return merge(reports)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--family", choices=FAMILIES, default=None,
                        help="one family only (default: all, in turn)")
    parser.add_argument("--show", type=int, default=1,
                        help="minimised reproducers to print per failure class")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="child processes at once (0: run in this process)")
    parser.add_argument("--shard", type=int, default=1000,
                        help="programs per child process")
    args = parser.parse_args()
    if args.jobs == 0:
        report = fuzz(args.seed, args.count, args.family)
    else:
        report = fuzz_isolated(args.seed, args.count, args.family, args.shard, args.jobs)
    print(summary(report, show=args.show))
    print(f"{report.passed} passed, {report.failed} failed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
