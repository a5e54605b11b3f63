"""Two-operand einsums that are batched matrix products run as ``matmul`` once their
operands reach ``_EINSUM_PLANNED`` elements (``everyday_ops._einsum_as_matmul``): values
as NumPy's einsum computes them (to rounding), gradients as PyTorch's; the others (a
diagonal, a letter summed out of one operand alone, a broadcast letter, integers) keep
NumPy's einsum.  Small products contracting one short letter into at most three run in the
``_short_products`` kernel (``SHORT``), with the same checks."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.ops import everyday_ops

try:
    import torch
except ImportError:
    torch = None

# (equation, shapes): every kind of letter -- batch, free on either side, contracted
CASES = [
    ("ijk,mik->mij", ((5, 2, 2), (1000, 5, 2))),
    ("mij,mik->ijk", ((1000, 5, 2), (1000, 5, 2))),
    ("mij,ijk->mik", ((1000, 5, 2), (5, 2, 2))),
    ("bij,bjk->bik", ((8, 30, 20), (8, 20, 25))),
    ("ij,jk->ik", ((70, 60), (60, 80))),
    ("ij,kj->ki", ((70, 60), (80, 60))),
    ("i,j->ij", ((3000,), (1200,))),
    ("ij,ij->", ((70, 80), (70, 80))),
    ("bhqd,bhkd->bhqk", ((2, 3, 30, 16), (2, 3, 40, 16))),
    ("ijk,ikl->jl", ((10, 20, 30), (10, 30, 15))),
    ("ij,jk", ((70, 60), (60, 80))),                       # implicit output
    ("...ij,...jk->...ik", ((4, 30, 20), (4, 20, 25))),
]
# not products: NumPy's einsum
OTHERS = [
    ("ii,i->i", ((80, 80), (80,))),                         # a diagonal
    ("ij,jk->i", ((70, 60), (60, 80))),                     # k summed out of one operand
    ("...ij,...jk->...ik", ((1, 60, 40), (4, 40, 25))),     # a broadcast letter
]

# small (under _EINSUM_PLANNED), one contracted letter of <= _SHORT_CONTRACTION elements,
# 1-3 output letters: the kernel, letters absent from an operand broadcast
SHORT = [
    ("ijk,mik->mij", ((5, 2, 2), (100, 5, 2))),     # GMM's, and its gradients' below
    ("mij,ijk->mik", ((100, 5, 2), (5, 2, 2))),
    ("ij,jk->ik", ((7, 16), (16, 9))),
    ("ij,kj->ki", ((7, 3), (9, 3))),
    ("ij,ij->i", ((40, 3), (40, 3))),
    ("bij,bjk->kib", ((3, 1, 4), (3, 4, 5))),     # a size-1 letter, the output permuted
    ("ij,jk->ik", ((0, 3), (3, 4))),               # no results
]


def _operands(shapes, seed):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) for s in shapes]


@pytest.mark.parametrize("equation,shapes", CASES + OTHERS)
def test_values_are_numpys_einsum(equation, shapes):
    xs = _operands(shapes, 0)
    assert sum(x.size for x in xs) >= everyday_ops._EINSUM_PLANNED
    got = tg.einsum(equation, *[tg.tensor(x) for x in xs]).numpy()
    want = np.einsum(equation, *xs)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("equation,shapes", SHORT)
@pytest.mark.parametrize("layout", ["C", "F", "sliced"])
def test_short_products_are_numpys_einsum(equation, shapes, layout, monkeypatch):
    """In the kernel (checked: it runs), whatever the operands' strides; values to
    rounding, gradients as PyTorch's."""
    calls = []
    kernel = everyday_ops._short_products
    monkeypatch.setattr(everyday_ops, "_short_products", lambda *a: calls.append(1) or kernel(*a))
    xs = _operands(shapes, 6)
    if layout == "F":
        xs = [np.asfortranarray(x) for x in xs]
    elif layout == "sliced":
        xs = [np.repeat(x, 2, axis=-1)[..., ::2] for x in xs]
    assert sum(x.size for x in xs) < everyday_ops._EINSUM_PLANNED
    ours = [tg.tensor(x, requires_grad=True) for x in xs]
    got = tg.einsum(equation, *ours)
    want = np.einsum(equation, *xs)
    assert got.shape == want.shape and got.detach().numpy().flags.c_contiguous
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-13, atol=1e-13)
    assert calls or want.size == 0
    if torch is None:
        return
    seed = np.random.default_rng(7).standard_normal(want.shape)
    theirs = [torch.tensor(x, requires_grad=True) for x in xs]
    (got * tg.tensor(seed)).sum().backward()
    (torch.einsum(equation, *theirs) * torch.tensor(seed)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("equation,shapes", CASES)
def test_products_take_matmul(equation, shapes):
    xs = _operands(shapes, 1)
    ins, out = everyday_ops.parse_einsum(equation, [x.shape for x in xs])
    product = everyday_ops._einsum_as_matmul(ins, out, *xs)
    assert product is not None and (np.ndim(product) == 0 or product.flags.c_contiguous)


@pytest.mark.parametrize("equation,shapes", OTHERS)
def test_others_keep_numpys_einsum(equation, shapes):
    xs = _operands(shapes, 2)
    ins, out = everyday_ops.parse_einsum(equation, [x.shape for x in xs])
    assert everyday_ops._einsum_as_matmul(ins, out, *xs) is None
    ints = [x.astype(np.int64) for x in _operands(CASES[0][1], 3)]
    assert everyday_ops._einsum_as_matmul(["ijk", "mik"], "mij", *ints) is None


@pytest.mark.skipif(torch is None, reason="needs PyTorch")
@pytest.mark.parametrize("equation,shapes", CASES + OTHERS)
def test_gradients_are_pytorchs(equation, shapes):
    xs = _operands(shapes, 4)
    seed = np.random.default_rng(5).standard_normal(np.einsum(equation, *xs).shape)
    ours = [tg.tensor(x, requires_grad=True) for x in xs]
    theirs = [torch.tensor(x, requires_grad=True) for x in xs]
    (tg.einsum(equation, *ours) * tg.tensor(seed)).sum().backward()
    (torch.einsum(equation, *theirs) * torch.tensor(seed)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-10)


def test_products_written_into_the_result_are_the_copied_products():
    """Where the product's rows lie in the C-ordered result as blocks (``_product_into``:
    GMM's 'mij,ijk->mik'), it is written there directly: bit for bit the product computed
    then copied transposed, and C-ordered; random equations of two to three letters a
    side, some taking that path."""
    rng = np.random.default_rng(7)
    into = 0
    for _ in range(1500):
        a = "".join(rng.choice(list("abcde"), int(rng.integers(1, 4)), replace=False))
        b = "".join(rng.choice(list("abcde"), int(rng.integers(1, 4)), replace=False))
        out = [c for c in sorted(set(a + b)) if rng.random() < 0.6]
        rng.shuffle(out)
        out = "".join(out)
        size = {c: int(rng.integers(1, 6)) * int(rng.integers(1, 9)) for c in set(a + b)}
        x = rng.standard_normal([size[c] for c in a])
        y = rng.standard_normal([size[c] for c in b])
        plan = everyday_ops._product_plan(a, b, out, x.shape, y.shape, True)
        if plan is None or plan[0] != "matmul":
            continue
        _, (px, sx), (py, sy), shape, back, written = plan
        got = everyday_ops._einsum_as_matmul((a, b), out, x, y, True)
        z = np.matmul(x.transpose(px).reshape(sx), y.transpose(py).reshape(sy)).reshape(shape)
        copied = z[()] if back is None else np.ascontiguousarray(z.transpose(back))
        assert np.array_equal(got, copied), (a, b, out)
        if written is not None:
            into += 1
            assert got.flags.c_contiguous
    assert into >= 30
