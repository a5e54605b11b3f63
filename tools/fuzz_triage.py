"""Minimise every failure of one fuzzer family and count them by the ops they use.

    python tools/fuzz_triage.py create_graph 4000 [seed]

Prints ``passed failed``, then one line per (failure class, ops of the minimised program)
with its count, most frequent first; ``--pickle PATH`` keeps (class, ops, source, program)
tuples for a closer look.  (``tools/fuzz.py`` prints one reproducer per class; this groups
a family's failures by what they are made of, which is what to fix first.)
"""
import argparse
import collections
import os
import pickle
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tests.fuzz.programs import FAMILIES, check, fuzz, minimise, source, step_label  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("family", choices=FAMILIES)
    parser.add_argument("count", type=int)
    parser.add_argument("seed", type=int, nargs="?", default=0)
    parser.add_argument("--pickle", default=None)
    args = parser.parse_args()
    report = fuzz(args.seed, args.count, args.family)
    print(report.passed, report.failed)
    found = []
    for cls, results in report.classes.items():
        for r in results:
            small = minimise(r.program, cls, 200)
            labels = tuple(sorted({step_label(s) for s in small.steps}))
            found.append((cls, labels, source(small, check(small).mismatch), small))
    for (cls, labels), n in collections.Counter((f[0], f[1]) for f in found).most_common():
        print(n, cls, labels)
    if args.pickle:
        with open(args.pickle, "wb") as f:
            pickle.dump(found, f)
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
