"""``tg.save`` / ``tg.load``: tensors, containers and state dicts (modules, optimizers,
schedulers) in a NumPy archive without pickles; ``tg.load`` still reads compiled tapes."""
import io
import json
import zipfile
from collections import Counter, OrderedDict

import numpy as np
import pytest

import tapegrad as tg
import tapegrad.nn as nn
import tapegrad.nn.functional as F

try:
    import torch
except ImportError:   # the torch-free assertions still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def val(t):
    return np.asarray(t.detach()._value) if isinstance(t, tg.Tensor) else t.detach().numpy()


def test_tensors_and_containers_round_trip(tmp_path):
    obj = {"w": tg.tensor(np.arange(6.0).reshape(2, 3), requires_grad=True),
           "f32": tg.tensor([1.5, 2.5], dtype=tg.float32), "i": tg.tensor([1, 2, 3]),
           "b": tg.tensor([True, False]), "s": tg.tensor(2.5),
           "nested": [1, 2.5, "text", None, True, (np.array([1.0, 2.0]), np.float32(3.0))],
           3: OrderedDict([("z", 1), ("a", 2)]), "inf": float("inf"), "c": Counter([2, 2, 5])}
    path = tmp_path / "obj.pt"
    tg.save(obj, path)
    assert path.exists() and not (tmp_path / "obj.pt.npz").exists()   # the path as given
    got = tg.load(path, weights_only=True, map_location="cpu")
    assert list(got) == list(obj)
    np.testing.assert_array_equal(val(got["w"]), val(obj["w"]))
    assert got["w"].requires_grad and got["w"].is_leaf and not got["i"].requires_grad
    assert got["f32"].dtype == tg.float32 and got["i"].dtype == tg.int64
    assert got["b"].dtype == tg.bool and got["s"].item() == 2.5 and got["s"].shape == ()
    n = got["nested"]
    assert n[:5] == [1, 2.5, "text", None, True] and isinstance(n[5], tuple)
    assert isinstance(n[5][0], np.ndarray) and n[5][1] == np.float32(3.0)
    assert isinstance(n[5][1], np.float32)
    assert isinstance(got[3], OrderedDict) and list(got[3]) == ["z", "a"]
    assert got["inf"] == float("inf") and got["c"] == Counter([2, 2, 5])
    buf = io.BytesIO()                                     # file objects too
    tg.save([tg.ones(2)], buf)
    buf.seek(0)
    assert val(tg.load(buf)[0]).tolist() == [1.0, 1.0]


def test_no_pickle_anywhere(tmp_path):
    path = tmp_path / "m.pt"
    tg.save({"a": tg.ones(3)}, path)
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == ["__tapegrad_save__.npy", "a0.npy"]
    with pytest.raises(TypeError, match="cannot save"):
        tg.save({"f": lambda x: x}, tmp_path / "bad.pt")
    with pytest.raises(TypeError, match=r"save its state_dict\(\)"):
        tg.save(nn.Linear(2, 2), tmp_path / "model.pt")
    with pytest.raises(TypeError, match="dtype object"):
        tg.save(np.array([object()]), tmp_path / "bad.pt")
    # an object array in a file is refused (NumPy's allow_pickle=False), not unpickled
    np.savez(tmp_path / "evil.npz", __tapegrad_save__=np.array("{}"),
             a0=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ValueError):
        tg.load(tmp_path / "evil.npz")


def test_damaged_files_raise_value_error(tmp_path):
    good = {"format": "tapegrad-save", "version": 1, "obj": {"t": "tensor", "k": "a0"}}
    for meta in ("not json", json.dumps({"format": "x"}), json.dumps({**good, "version": 9}),
                 json.dumps({**good, "obj": {"t": "tensor", "k": "a7"}}),
                 json.dumps({**good, "obj": {"t": "dict", "v": [[{"t": "list", "v": []},
                                                                 {"t": "py", "v": 1}]]}}),
                 json.dumps({**good, "obj": {"t": "py", "v": [1]}}),
                 json.dumps({**good, "obj": {"t": "what"}})):
        np.savez(tmp_path / "d.npz", __tapegrad_save__=np.array(meta), a0=np.zeros(2))
        with pytest.raises(ValueError):
            tg.load(tmp_path / "d.npz")
    buf = io.BytesIO(b"not a zip")
    with pytest.raises(ValueError, match="not a file written by tg.save"):
        tg.load(buf)


def test_load_still_reads_compiled_tapes(tmp_path):
    f = tg.compile(lambda x: (x * x).sum())
    f([1.0, 2.0])
    f.tape_fn.save(tmp_path / "tape")                      # NumPy writes tape.npz
    g = tg.load(tmp_path / "tape")
    assert isinstance(g, tg.CompiledTape) and g(np.array([3.0, 4.0])) == 25.0
    with pytest.raises(FileNotFoundError):
        tg.load(tmp_path / "missing")
    (tmp_path / "junk.npz").write_bytes(b"junk")
    with pytest.raises(ValueError, match="not a tapegrad compiled tape"):
        tg.load(tmp_path / "junk.npz")


def _model():
    return nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4, 3))


def test_module_optimizer_and_scheduler_checkpoints(tmp_path):
    tg.manual_seed(0)
    x = tg.tensor(np.random.default_rng(0).normal(size=(5, 1, 4, 3)))
    y = tg.tensor([0, 1, 2, 1, 0])
    model = _model()
    opt = tg.optim.Adam(model.parameters(), lr=0.01)
    sched = tg.optim.lr_scheduler.MultiStepLR(opt, [2, 4], gamma=0.5)

    def train(model, opt, sched, n):
        losses = []
        for _ in range(n):
            opt.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            sched.step()
            losses.append(loss.item())
        return losses

    train(model, opt, sched, 3)
    tg.save({"model": model.state_dict(), "opt": opt.state_dict(),
             "sched": sched.state_dict(), "epoch": 3}, tmp_path / "ckpt.pt")
    ck = tg.load(tmp_path / "ckpt.pt")
    model2 = _model()
    model2.load_state_dict(ck["model"])
    opt2 = tg.optim.Adam(model2.parameters(), lr=0.01)
    sched2 = tg.optim.lr_scheduler.MultiStepLR(opt2, [2, 4], gamma=0.5)
    opt2.load_state_dict(ck["opt"])
    sched2.load_state_dict(ck["sched"])
    assert ck["epoch"] == 3 and list(ck["model"]) == list(model.state_dict())
    assert train(model2, opt2, sched2, 3) == train(model, opt, sched, 3)
    assert sched2.get_last_lr() == sched.get_last_lr()


@needs_torch
def test_state_dict_names_and_values_match_torch(tmp_path):
    theirs = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.BatchNorm2d(2),
                                 torch.nn.ReLU(), torch.nn.Flatten(),
                                 torch.nn.Linear(4, 3)).double()
    ours = _model()
    ours.load_state_dict(theirs.state_dict())
    tg.save(ours.state_dict(), tmp_path / "m.pt")
    back = tg.load(tmp_path / "m.pt")
    assert list(back) == list(theirs.state_dict())
    for (k, a), b in zip(back.items(), theirs.state_dict().values()):
        np.testing.assert_array_equal(a, b.numpy(), err_msg=k)
    fresh = _model().eval()
    fresh.load_state_dict(back)
    x = np.random.default_rng(1).normal(size=(2, 1, 4, 3))
    np.testing.assert_allclose(val(fresh(tg.tensor(x))), val(theirs.eval()(torch.tensor(x))),
                               rtol=1e-12)
