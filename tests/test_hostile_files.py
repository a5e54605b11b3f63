"""Saved compiled tapes, mutated at random (seeded): ``tg.load`` either refuses with a
``ValueError`` or returns a tape whose replay runs; nothing crashes, nothing writes out of
bounds.  ``python tests/test_hostile_files.py N`` runs N mutations (the suite runs 300)."""
import io
import sys
import zipfile

import numpy as np

import tapegrad as tg


def _saved(tmp_path):
    with tg.Tape() as tape:
        x = [tg.tensor(0.3 + 0.1 * k, requires_grad=True) for k in range(4)]
        y = sum(((x[k] - x[k + 1] ** 2) ** 2 for k in range(3)), 0.0)
        z = tg.where(x[0] > x[1], x[0].sin(), x[1].exp()) + y
    path = tmp_path / "tape.npz"
    tape.compile(x, [z, y]).save(path)
    return path.read_bytes()


def _mutate(data, rng):
    """One of: flip bytes, truncate, or rewrite one member's array with random values."""
    kind = rng.integers(3)
    if kind == 0:
        raw = bytearray(data)
        for k in rng.integers(0, len(raw), size=rng.integers(1, 8)):
            raw[k] ^= int(rng.integers(1, 256))
        return bytes(raw)
    if kind == 1:
        return data[:int(rng.integers(0, len(data)))]
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        members = {m: z.read(m) for m in z.namelist()}
    name = sorted(members)[int(rng.integers(len(members)))]
    arrays = dict(np.load(io.BytesIO(data), allow_pickle=False))
    key = name[:-len(".npy")]
    a = arrays[key]
    if a.dtype.kind in "iu" and a.size:
        a = a.copy()
        a.flat[int(rng.integers(a.size))] = rng.integers(-2**31, 2**31 - 1, dtype=np.int64) \
            .astype(a.dtype) if a.dtype.itemsize >= 4 else rng.integers(-128, 128)
    elif a.dtype.kind == "f" and a.size:
        a = a.copy()
        a.flat[int(rng.integers(a.size))] = rng.choice([np.nan, np.inf, -1e308, 0.0])
    else:
        a = np.array(rng.choice(['{"format": 1}', "[]", "{}", "null", "x"]))
    arrays[key] = a
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def run(tmp_path, count, seed=0):
    original = _saved(tmp_path)
    rng = np.random.default_rng(seed)
    refused = loaded = 0
    for k in range(count):
        path = tmp_path / f"m{k % 4}.npz"
        path.write_bytes(_mutate(original, rng))
        try:
            f = tg.load(path)
        except ValueError:
            refused += 1
            continue
        loaded += 1
        try:     # a tape that loads must run: values may be anything, errors must be clean
            f(np.full(f.n_inputs, 0.5))
            f.value_and_grad(np.full((3, f.n_inputs), 0.5))
            f.hessian(np.full(f.n_inputs, 0.5))
        except (ValueError, tg.RetraceRequired):
            pass
    return refused, loaded


def test_mutated_files_are_refused_or_run(tmp_path):
    refused, loaded = run(tmp_path, 300)
    assert refused + loaded == 300 and refused > 100


if __name__ == "__main__":
    import pathlib
    import tempfile
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    with tempfile.TemporaryDirectory() as d:
        refused, loaded = run(pathlib.Path(d), n)
    print(f"{n} mutated files: {refused} refused with ValueError, {loaded} loaded and ran; "
          "no crash")
