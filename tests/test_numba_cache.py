"""A damaged Numba cache heals: the damaged files are deleted, one warning says so, the
kernel compiles again and is cached afresh -- never a crash or a permanent failure."""
import glob
import os
import subprocess
import sys
import textwrap

KERNEL = textwrap.dedent("""
    import warnings
    warnings.simplefilter("always")
    from tapegrad.core.numba_jit import jit

    @jit
    def twice_plus_one(x):
        return 2.0 * x + 1.0

    print(twice_plus_one(20.0))
""")


def _run(folder):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    r = subprocess.run([sys.executable, "-W", "always", os.path.join(folder, "kernel_user.py")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "41.0", r.stdout + r.stderr
    return r.stderr


def _cache_files(folder, suffix):
    return glob.glob(os.path.join(folder, "__pycache__", f"*twice_plus_one*.{suffix}"))


def test_damaged_cache_files_are_rebuilt(tmp_path):
    folder = str(tmp_path)
    script = os.path.join(folder, "kernel_user.py")
    with open(script, "w") as f:
        f.write(KERNEL)
    os.utime(script, (1.6e9, 1.6e9))   # Numba does not trust a cache of a just-written file
    assert "damaged" not in _run(folder)              # compiles and writes the cache
    (data,) = _cache_files(folder, "nbc")
    raw = bytearray(open(data, "rb").read())
    for k in range(60, len(raw), 97):                 # flip bytes all over the machine code
        raw[k] ^= 0xFF
    open(data, "wb").write(bytes(raw))
    assert "was damaged" in _run(folder)              # detected, deleted, rebuilt
    assert "damaged" not in _run(folder)              # and the rebuilt cache is sound
    (index,) = _cache_files(folder, "nbi")
    with open(index, "r+b") as f:
        f.truncate(10)                                # a torn write of the index
    assert "was damaged" in _run(folder)
    assert "damaged" not in _run(folder)
