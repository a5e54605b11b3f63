"""Matrix decompositions (``ops/linalg_ops.py``): values and gradients against PyTorch, first
and second derivatives against central differences, PyTorch's errors.

Eigenvectors, singular vectors and QR factors are unique up to the sign of each vector (LAPACK
builds may choose others), so what is compared is a function that does not see the signs:
their squares, ``Q R``-invariant products."""
import warnings

import numpy as np
import pytest

import tapegrad as tg

try:
    import torch
except ImportError:   # the central-difference checks still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch not installed")
RNG = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def _torch_float64():
    if torch is not None:
        torch.set_default_dtype(torch.float64)
    yield   # (conftest's fixture sets back what it found)


def spd(n, batch=()):
    m = RNG.normal(size=batch + (n, n))
    return m @ np.swapaxes(m, -1, -2) + n * np.eye(n)


def lower(n, batch=()):
    return np.tril(RNG.normal(size=batch + (n, n))) + 3 * np.eye(n)


def weights(shape):
    return RNG.normal(size=shape)


# name -> (inputs as arrays, program(L, *tensors) -> list of outputs whose weighted sum is
# the loss; every output a function of the inputs that does not see sign choices)
def _cholesky(L, a, upper=False):
    return [L.linalg.cholesky(a, upper=upper)]


def _eigh(L, a, uplo="L"):
    w, v = L.linalg.eigh(a, UPLO=uplo)
    return [w, v * v]


def _eigvalsh(L, a):
    return [L.linalg.eigvalsh(a)]


def _svd(L, a, full):
    u, s, vh = L.linalg.svd(a, full_matrices=full)
    k = min(a.shape[-2], a.shape[-1])
    return [s, u[..., :, :k] ** 2, vh[..., :k, :] ** 2]


def _svdvals(L, a):
    return [L.linalg.svdvals(a)]


def _qr(L, a):
    q, r = L.linalg.qr(a)
    return [q * q, r * r, q @ r]


def _solve_triangular(L, a, b, upper, left, unit):
    return [L.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=unit)]


def _cholesky_solve(L, b, a):
    return [L.cholesky_solve(b, L.linalg.cholesky(a))]


def _cholesky_inverse(L, a):
    return [L.cholesky_inverse(L.linalg.cholesky(a, upper=True), upper=True)]


def _matrix_exp(L, a):
    return [L.linalg.matrix_exp(a)]


def _multi_dot(L, a, b, c, d):
    return [L.linalg.multi_dot([a, b, c, d])]


def _pinv(L, a):
    return [L.linalg.pinv(a)]


def _triangular_solve(L, b, a):
    with warnings.catch_warnings():   # (PyTorch's deprecation warning)
        warnings.simplefilter("ignore")
        return [L.triangular_solve(b, a, upper=False, transpose=True).solution]


def _old_svd(L, a):
    u, s, v = L.svd(a)
    return [s, u * u, v * v]


def _cond(L, a):
    return [L.linalg.cond(a)]


def _lstsq(L, a, b, driver=None):
    r = L.linalg.lstsq(a, b, driver=driver)
    return [r.solution]


CASES = {
    "tensorinv": (lambda: [(np.eye(6) * 3 + RNG.normal(size=(6, 6))).reshape(2, 3, 6)],
                  lambda L, a: [L.linalg.tensorinv(a, 2)]),
    "tensorsolve dims": (lambda: [(np.eye(6) * 3 + RNG.normal(size=(6, 6))).reshape(2, 3, 6)
                                  .transpose(0, 2, 1).copy(), RNG.normal(size=(2, 3))],
                         lambda L, a, b: [L.linalg.tensorsolve(a, b, dims=(1,))]),
    "lstsq tall": (lambda: [RNG.normal(size=(5, 3)), RNG.normal(size=(5, 2))], _lstsq),
    "lstsq wide (minimum norm), vector b": (lambda: [RNG.normal(size=(3, 5)),
                                                     RNG.normal(size=(3,))], _lstsq),
    "lstsq batch, gelsd": (lambda: [RNG.normal(size=(2, 4, 3)), RNG.normal(size=(2, 4, 1))],
                           lambda L, a, b: _lstsq(L, a, b, "gelsd")),
    "cholesky": (lambda: [spd(4)], _cholesky),
    "cholesky upper, batch": (lambda: [spd(3, (2,))], lambda L, a: _cholesky(L, a, True)),
    "cholesky reads the lower triangle": (lambda: [spd(3) + np.triu(np.ones((3, 3)), 1)],
                                          _cholesky),
    "eigh": (lambda: [spd(4)], _eigh),
    "eigh UPLO=U, batch": (lambda: [spd(3, (2,))], lambda L, a: _eigh(L, a, "U")),
    "eigh not symmetric (lower read)": (lambda: [spd(3) + np.tril(np.ones((3, 3)), -1)], _eigh),
    "eigvalsh": (lambda: [spd(5)], _eigvalsh),
    "svd square": (lambda: [RNG.normal(size=(4, 4))], lambda L, a: _svd(L, a, False)),
    "svd tall": (lambda: [RNG.normal(size=(5, 3))], lambda L, a: _svd(L, a, False)),
    "svd wide, batch": (lambda: [RNG.normal(size=(2, 3, 5))], lambda L, a: _svd(L, a, False)),
    "svd tall, full_matrices": (lambda: [RNG.normal(size=(5, 3))],
                                lambda L, a: _svd(L, a, True)),
    "svd wide, full_matrices": (lambda: [RNG.normal(size=(3, 5))],
                                lambda L, a: _svd(L, a, True)),
    "svdvals": (lambda: [RNG.normal(size=(4, 3))], _svdvals),
    "torch.svd": (lambda: [RNG.normal(size=(4, 3))], _old_svd),
    "qr square": (lambda: [RNG.normal(size=(4, 4))], _qr),
    "qr tall, batch": (lambda: [RNG.normal(size=(2, 5, 3))], _qr),
    "qr wide": (lambda: [RNG.normal(size=(3, 5))], _qr),
    "solve_triangular lower, left": (lambda: [lower(3), RNG.normal(size=(3, 2))],
                                     lambda L, a, b: _solve_triangular(L, a, b, False, True,
                                                                       False)),
    "solve_triangular upper, right": (lambda: [lower(3).T.copy(), RNG.normal(size=(2, 3))],
                                      lambda L, a, b: _solve_triangular(L, a, b, True, False,
                                                                        False)),
    "solve_triangular unit, batch b": (lambda: [lower(3), RNG.normal(size=(2, 3, 2))],
                                       lambda L, a, b: _solve_triangular(L, a, b, False, True,
                                                                         True)),
    "solve_triangular full matrix given": (lambda: [RNG.normal(size=(3, 3)) + 3 * np.eye(3),
                                                    RNG.normal(size=(3, 2))],
                                           lambda L, a, b: _solve_triangular(L, a, b, True,
                                                                             True, False)),
    "cholesky_solve": (lambda: [RNG.normal(size=(3, 2)), spd(3)], _cholesky_solve),
    "cholesky_inverse": (lambda: [spd(3)], _cholesky_inverse),
    "triangular_solve": (lambda: [RNG.normal(size=(3, 2)), lower(3)], _triangular_solve),
    "matrix_exp": (lambda: [RNG.normal(size=(3, 3))], _matrix_exp),
    "matrix_exp large norm, batch": (lambda: [4 * RNG.normal(size=(2, 3, 3))], _matrix_exp),
    "multi_dot": (lambda: [RNG.normal(size=(3,)), RNG.normal(size=(3, 5)),
                           RNG.normal(size=(5, 2)), RNG.normal(size=(2, 4))], _multi_dot),
    "pinv tall": (lambda: [RNG.normal(size=(5, 3))], _pinv),
    "cond": (lambda: [RNG.normal(size=(3, 3))], _cond),
}


def _run(L, name, arrays):
    make, program = CASES[name]
    xs = [L.tensor(a, requires_grad=True) for a in arrays]
    outs = program(L, *xs)
    ws = [weights(tuple(o.shape)) for o in outs]
    loss = sum((o * L.tensor(w)).sum() for o, w in zip(outs, ws))
    grads = L.autograd.grad(loss, xs)
    return [o.detach().numpy() for o in outs], [g.numpy() for g in grads], ws


@needs_torch
@pytest.mark.parametrize("name", CASES)
def test_values_and_gradients_as_pytorch(name):
    arrays = CASES[name][0]()
    state = RNG.bit_generator.state
    mine, my_grads, _ = _run(tg, name, arrays)
    RNG.bit_generator.state = state   # (the same weights)
    theirs, their_grads, _ = _run(torch, name, arrays)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-10)
    for a, b in zip(my_grads, their_grads):
        np.testing.assert_allclose(a, b, rtol=1e-8, atol=1e-10)


# The input that a case reads as a symmetric matrix (one triangle of it): PyTorch's gradient
# there is the symmetric one, the gradient of ``f((X + X^T) / 2)``, which is what central
# differences see once the input is symmetrized so
SYMMETRIC_INPUT = {"cholesky": 0, "cholesky upper, batch": 0,
                   "cholesky reads the lower triangle": 0, "eigh": 0, "eigh UPLO=U, batch": 0,
                   "eigh not symmetric (lower read)": 0, "eigvalsh": 0, "cholesky_solve": 1,
                   "cholesky_inverse": 0}


def _symmetrized(name):
    program, k = CASES[name][1], SYMMETRIC_INPUT.get(name)
    if k is None:
        return lambda *t: tuple(program(tg, *t))

    def on_symmetric(*t):
        t = list(t)
        t[k] = (t[k] + t[k].transpose(-2, -1)) * 0.5
        return tuple(program(tg, *t))
    return on_symmetric


@pytest.mark.parametrize("name", CASES)
def test_gradients_match_central_differences(name):
    xs = [tg.tensor(a, requires_grad=True) for a in CASES[name][0]()]
    assert tg.autograd.gradcheck(_symmetrized(name), xs, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("name", ["cholesky", "eigh", "svd tall", "qr wide",
                                  "solve_triangular upper, right", "matrix_exp", "pinv tall"])
def test_second_derivatives_match_central_differences(name):
    xs = [tg.tensor(a, requires_grad=True) for a in CASES[name][0]()]
    assert tg.autograd.gradgradcheck(_symmetrized(name), xs, atol=1e-5, rtol=1e-4)


def test_node_names_are_pytorchs():
    a = tg.tensor(spd(3), requires_grad=True)
    assert type(tg.linalg.cholesky(a).grad_fn).__name__ == "LinalgCholeskyExBackward0"
    assert type(tg.linalg.eigh(a)[0].grad_fn).__name__ == "LinalgEighBackward0"
    assert type(tg.linalg.svd(a)[1].grad_fn).__name__ == "LinalgSvdBackward0"
    assert type(tg.linalg.qr(a)[0].grad_fn).__name__ == "LinalgQrBackward0"
    assert type(tg.linalg.matrix_exp(a).grad_fn).__name__ == "LinalgMatrixExpBackward0"
    b = tg.tensor(np.eye(3))
    assert type(tg.linalg.solve_triangular(a, b, upper=True).grad_fn).__name__ == \
        "LinalgSolveTriangularBackward0"


def test_only_the_eigenvalues_used_at_a_repeated_eigenvalue():
    # PyTorch leaves the eigenvectors' terms out when nothing reached them: no 0 / 0
    a = tg.tensor(np.diag([2.0, 2.0, 5.0]), requires_grad=True)
    w, v = tg.linalg.eigh(a)
    (w * tg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert np.all(np.isfinite(a.grad.numpy()))
    np.testing.assert_allclose(np.trace(a.grad.numpy()), 6.0)


def _errors(L):
    out = []
    for f in (lambda: L.linalg.cholesky(L.tensor([[1.0, 2.0], [2.0, 1.0]])),
              lambda: L.linalg.cholesky(L.stack([L.eye(2), L.tensor([[1.0, 2.0], [2.0, 1.0]])])),
              lambda: L.linalg.cholesky(L.ones(3)),
              lambda: L.linalg.eigh(L.ones(2, 3)),
              lambda: L.linalg.solve_triangular(L.eye(3), L.ones(2, 2), upper=True),
              lambda: L.linalg.qr(L.ones(2, 2), mode="x"),
              lambda: L.linalg.qr(L.ones(3, 2, requires_grad=True), mode="r")[1].sum().backward(),
              lambda: L.linalg.qr(L.ones(3, 2, requires_grad=True),
                                  mode="complete")[0].sum().backward(),
              lambda: L.linalg.multi_dot([L.ones(2, 2)])):
        try:
            f()
            out.append(None)
        except Exception as e:   # noqa: BLE001  (the type is compared)
            out.append((isinstance(e, RuntimeError), str(e)))
    return out


def test_errors_as_pytorch():
    mine = _errors(tg)
    assert all(m is not None and m[0] for m in mine)
    assert "leading minor of order 2" in mine[0][1]
    assert "(Batch element 1)" in mine[1][1]
    if torch is not None:
        assert mine == _errors(torch)


def test_linalg_error_is_a_runtime_error_named_as_pytorchs():
    with pytest.raises(tg.linalg.LinAlgError, match="not positive-definite"):
        tg.linalg.cholesky(tg.tensor([[1.0, 2.0], [2.0, 1.0]]))


def _singular_triangular(L):
    a = L.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [2.0, 1.0, 3.0]])
    b = L.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    return [L.linalg.solve_triangular(a, b, upper=False).tolist(),
            L.linalg.solve_triangular(L.stack([a, a]), b.T, upper=False, left=False).tolist()]


def test_singular_triangular_solve_gives_inf_and_nan_as_pytorch():
    mine = _singular_triangular(tg)
    assert np.isinf(mine[0][0][0]) and np.isnan(mine[0][0][1])
    if torch is not None:
        np.testing.assert_array_equal(np.array(mine[0]), np.array(_singular_triangular(torch)[0]))
        np.testing.assert_array_equal(np.array(mine[1]), np.array(_singular_triangular(torch)[1]))


def test_small_aliases():
    x = tg.tensor([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(tg.linalg.vander(x).numpy(), np.vander([1.0, 2, 3],
                                                                         increasing=True))
    a = tg.tensor(spd(3))
    np.testing.assert_allclose(tg.linalg.matrix_power(a, 2).numpy(), a.numpy() @ a.numpy())
    np.testing.assert_array_equal(tg.linalg.diagonal(a).numpy(), np.diagonal(a.numpy()))
    inverse, info = tg.linalg.inv_ex(a)
    np.testing.assert_allclose(inverse.numpy(), np.linalg.inv(a.numpy()))
    assert info.tolist() == 0
    assert tg.linalg.matrix_rank(tg.tensor(np.outer([1.0, 2.0], [3.0, 4.0]))).tolist() == 1
    if torch is not None:
        t = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
        assert tg.linalg.vander(tg.tensor(t.numpy())).tolist() == torch.linalg.vander(t).tolist()


def _lstsq_extras(L):
    a = L.tensor(np.arange(12.0).reshape(4, 3) ** 1.5)
    b = L.tensor(np.arange(8.0).reshape(4, 2))
    out = []
    for driver in ("gelsy", "gelsd", "gelss", "gels"):
        r = L.linalg.lstsq(a, b, driver=driver)
        out.append([r.residuals.numpy().round(8).tolist(), r.rank.tolist(),
                    r.singular_values.numpy().round(8).tolist()])
    rank_deficient = L.tensor(np.outer([1.0, 2.0, 3.0], [1.0, 1.0]))
    r = L.linalg.lstsq(rank_deficient, L.tensor([[1.0], [0.0], [2.0]]))
    out.append([r.rank.tolist(), r.solution.numpy().round(10).tolist()])   # (minimum norm)
    return out


@needs_torch
def test_lstsq_residuals_rank_and_singular_values_as_pytorch():
    assert _lstsq_extras(tg) == _lstsq_extras(torch)


def _cholesky_ex(L):
    a = L.tensor(np.stack([np.eye(2) * 2, [[1.0, 2.0], [2.0, 1.0]], [[4.0, 1.0], [1.0, 3.0]]]),
                 requires_grad=True)
    r = L.linalg.cholesky_ex(a)
    (r.L[0].sum() + r.L[2].sum()).backward()
    try:
        L.linalg.cholesky_ex(a, check_errors=True)
        error = None
    except RuntimeError as e:
        error = str(e)
    return (r.info.tolist(), r.L.detach().numpy()[[0, 2]].round(12).tolist(),
            a.grad.numpy()[[0, 2]].round(12).tolist(), error)


def test_cholesky_ex_as_pytorch():
    mine = _cholesky_ex(tg)
    assert mine[0] == [0, 2, 0] and "cholesky_ex: (Batch element 1)" in mine[3]
    if torch is not None:
        assert mine == _cholesky_ex(torch)
    # (PyTorch's L of the matrix that fails is LAPACK's partial factor; here NaN: README)
    assert np.all(np.isnan(tg.linalg.cholesky_ex(tg.tensor([[1.0, 2.0], [2.0, 1.0]])).L.numpy()))
