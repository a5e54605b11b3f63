"""Differential fuzzing of tapegrad against PyTorch (issue "Gradients that match PyTorch").

    python tools/fuzz.py --seed 0 --count 3000 [--family scalar] [--show 1]

Prints the failure classes (family / kind of mismatch / op or feature) with counts, a
minimised reproducer per class, and ends with ``N passed, M failed``.  Deterministic for
a seed.  The programs, comparator and minimiser live in ``tests/fuzz/programs.py``.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tests.fuzz.programs import FAMILIES, fuzz, summary  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--family", choices=FAMILIES, default=None,
                        help="one family only (default: all, in turn)")
    parser.add_argument("--show", type=int, default=1,
                        help="minimised reproducers to print per failure class")
    args = parser.parse_args()
    report = fuzz(args.seed, args.count, args.family)
    print(summary(report, show=args.show))
    print(f"{report.passed} passed, {report.failed} failed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
