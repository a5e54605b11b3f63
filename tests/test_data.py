"""``tapegrad.utils.data``: data sets, samplers, ``DataLoader`` and ``default_collate``, with
PyTorch 2.13's batches (skipped without it) where the order does not depend on the generator."""
from collections import namedtuple

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.utils.data import (BatchSampler, ConcatDataset, DataLoader, Dataset,
                                 IterableDataset, RandomSampler, SequentialSampler, Subset,
                                 TensorDataset, default_collate, random_split)

try:
    import torch
    import torch.utils.data as tdata
except ImportError:   # the torch-free assertions still run
    torch = tdata = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")


def val(t):
    return np.asarray(t._value) if isinstance(t, tg.Tensor) else t.numpy()


X = np.arange(30.0).reshape(10, 3)
Y = np.arange(10) % 3


def test_tensor_dataset_and_loader_batches():
    ds = TensorDataset(tg.tensor(X), tg.tensor(Y))
    assert len(ds) == 10
    x0, y0 = ds[0]
    assert val(x0).tolist() == [0.0, 1.0, 2.0] and y0.item() == 0
    loader = DataLoader(ds, batch_size=4)
    assert len(loader) == 3
    batches = list(loader)
    assert [tuple(b[0].shape) for b in batches] == [(4, 3), (4, 3), (2, 3)]
    assert isinstance(batches[0], list) and batches[0][1].dtype == tg.int64
    np.testing.assert_array_equal(np.concatenate([val(b[0]) for b in batches]), X)
    dropped = DataLoader(ds, batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [b[0].shape[0] for b in dropped] == [4, 4]
    with pytest.raises(AssertionError, match="Size mismatch"):
        TensorDataset(tg.ones(3), tg.ones(4))


def test_shuffle_is_seeded_by_manual_seed_and_covers_everything():
    ds = TensorDataset(tg.tensor(X))

    def order(seed):
        tg.manual_seed(seed)
        return np.concatenate([val(b[0])[:, 0] for b in DataLoader(ds, batch_size=3,
                                                                    shuffle=True)])

    a, b, c = order(1), order(1), order(2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert sorted(a.tolist()) == X[:, 0].tolist()
    loader = DataLoader(ds, batch_size=10, shuffle=True)
    tg.manual_seed(0)
    first, second = (val(next(iter(loader))[0])[:, 0] for _ in range(2))
    assert not np.array_equal(first, second)      # a new permutation at each pass


def test_default_collate():
    Point = namedtuple("Point", "x y")
    batch = [{"a": 1.5, "b": np.array([1, 2]), "c": "s", "p": Point(1, 2.0)},
             {"a": 2.5, "b": np.array([3, 4]), "c": "t", "p": Point(3, 4.0)}]
    out = default_collate(batch)
    assert out["a"].dtype == tg.float64 and val(out["a"]).tolist() == [1.5, 2.5]
    assert val(out["b"]).tolist() == [[1, 2], [3, 4]] and out["b"].dtype == tg.int64
    assert out["c"] == ["s", "t"]
    assert isinstance(out["p"], Point) and out["p"].x.dtype == tg.int64
    tup = default_collate([(tg.ones(2), 1), (tg.zeros(2), 2)])
    assert isinstance(tup, list) and tuple(tup[0].shape) == (2, 2)
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])


def test_datasets_samplers_and_options():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return float(i * i)

    both = Squares() + Squares()
    assert isinstance(both, ConcatDataset) and len(both) == 10 and both[7] == 4.0
    assert both[-1] == 16.0
    sub = Subset(Squares(), [4, 0])
    assert [sub[0], sub[1]] == [16.0, 0.0]
    tg.manual_seed(0)
    parts = random_split(range(10), [0.3, 0.7])
    assert [len(p) for p in parts] == [3, 7]
    assert sorted(list(parts[0]) + list(parts[1])) == list(range(10))
    assert list(BatchSampler(SequentialSampler(range(5)), 2, False)) == [[0, 1], [2, 3], [4]]
    assert len(BatchSampler(range(5), 2, True)) == 2
    assert len(list(RandomSampler(range(4), replacement=True, num_samples=9))) == 9
    loader = DataLoader(Squares(), batch_size=None)
    assert [x for x in loader] == [0.0, 1.0, 4.0, 9.0, 16.0]
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(Squares(), shuffle=True, sampler=SequentialSampler(range(5)))
    custom = DataLoader(Squares(), batch_size=2, collate_fn=lambda b: sum(b))
    assert list(custom) == [1.0, 13.0, 16.0]

    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(7))

    assert [val(b).tolist() for b in DataLoader(Stream(), batch_size=3)] == \
        [[0, 1, 2], [3, 4, 5], [6]]


def test_a_training_loop_over_a_loader():
    tg.manual_seed(0)
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 2))
    ys = xs @ np.array([2.0, -1.0]) + 0.5
    model = tg.nn.Linear(2, 1)
    opt = tg.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(TensorDataset(tg.tensor(xs), tg.tensor(ys)), batch_size=16, shuffle=True)
    for _ in range(30):
        for xb, yb in loader:
            opt.zero_grad()
            loss = tg.nn.functional.mse_loss(model(xb).squeeze(1), yb)
            loss.backward()
            opt.step()
    np.testing.assert_allclose(val(model.weight)[0], [2.0, -1.0], atol=1e-3)


@needs_torch
@pytest.mark.parametrize("kw", [{"batch_size": 3}, {"batch_size": 4, "drop_last": True},
                                {"batch_size": 1}, {"batch_size": None}])
def test_batches_match_torch(kw):
    ours = list(DataLoader(TensorDataset(tg.tensor(X), tg.tensor(Y)), **kw))
    theirs = list(tdata.DataLoader(tdata.TensorDataset(torch.tensor(X), torch.tensor(Y)), **kw))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert type(a) is type(b)
        for u, v in zip(a, b):
            np.testing.assert_array_equal(val(u), val(v))
            assert str(u.dtype).split(".")[-1] == str(v.dtype).split(".")[-1]
    batch = [{"a": 1.5, "b": (1, np.array([1.0, 2.0]))}, {"a": 2.0, "b": (2, np.array([3.0, 4.0]))}]
    mine, torchs = default_collate(batch), tdata.default_collate(batch)
    assert type(mine["b"]) is type(torchs["b"])
    np.testing.assert_array_equal(val(mine["b"][1]), val(torchs["b"][1]))
    assert str(mine["a"].dtype).split(".")[-1] == str(torchs["a"].dtype).split(".")[-1]


def test_tensor_dataset_batches_equal_the_collated_samples():
    """A TensorDataset's batches are taken with one index per tensor (fast): the same as
    stacking its samples with default_collate."""
    ds = TensorDataset(tg.tensor(X), tg.tensor(Y), tg.tensor(X[:, 0] > 5))
    for seed in (0, 1):
        tg.manual_seed(seed)
        fast = list(DataLoader(ds, batch_size=3, shuffle=True))
        tg.manual_seed(seed)
        slow = list(DataLoader(ds, batch_size=3, shuffle=True,
                               collate_fn=lambda b: default_collate(b)))
        for a, b in zip(fast, slow):
            assert type(a) is type(b) is list
            for u, v in zip(a, b):
                assert u.dtype == v.dtype and u.shape == v.shape
                np.testing.assert_array_equal(val(u), val(v))
