"""Set the BLAS/OpenMP/Numba thread count before NumPy is imported (``--threads N``,
default 1): on a 2-core machine OpenBLAS's second thread spins and slowed small matrix work
several times whenever anything else ran.  Imported first by the benchmark scripts."""
import argparse
import os

VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def limit_threads():
    """Apply ``--threads`` (default 1) from the command line; returns the count."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--threads", type=int, default=1)
    threads = pre.parse_known_args()[0].threads
    for var in VARS:
        os.environ[var] = str(threads)
    return threads
