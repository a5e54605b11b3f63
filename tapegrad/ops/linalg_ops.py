"""Matrix decompositions and the functions made of them, as ``torch.linalg`` has them:
``cholesky``, ``solve_triangular``, ``eigh``/``eigvalsh``, ``svd``/``svdvals``, ``qr``,
``matrix_exp``, ``multi_dot``, and PyTorch's older top-level names (``torch.cholesky``,
``cholesky_solve``, ``cholesky_inverse``, ``triangular_solve``, ``torch.svd``, ``torch.qr``).

Rows as in ``array_ops.py``: a NumPy (LAPACK) forward and a vector-Jacobian product written
in tapegrad ops, so each differentiates to any order.  The rules are PyTorch's
(``FunctionsManual.cpp``: ``cholesky_backward``, ``linalg_solve_triangular``'s,
``linalg_eig_backward``, ``svd_backward``, ``linalg_qr_backward``, ``matrix_exp``'s block
formula), real float64 only; ``tests/test_linalg_decompositions.py`` checks each against
PyTorch (sign-free functions of eigen- and singular vectors: LAPACK builds may choose other
signs) and central differences.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ..core.elementwise import FUNCTIONS as ELEMENTWISE
from ..core.tensor import Tensor, wrap
from .array_ops import call, contiguous, defop
from .everyday_ops import LinAlgError

EighResult = namedtuple("eigh", ["eigenvalues", "eigenvectors"])
SvdResult = namedtuple("svd", ["U", "S", "Vh"])
OldSvdResult = namedtuple("svd", ["U", "S", "V"])
QrResult = namedtuple("qr", ["Q", "R"])
TriangularSolveResult = namedtuple("triangular_solve", ["solution", "cloned_coefficient"])


def _mT(x):
    return call("transpose", x, -2, -1)


def _mm(a, b):
    return call("matmul", a, b)


def _eye_like(x):
    return wrap(np.eye(x.shape[-1]))


def _diag_embed(v):
    """A batch of vectors as the diagonals of zero matrices (the last dim)."""
    return call("unsqueeze", v, -1) * _eye_like(v)


def _diagonal(x):
    return call("diagonal", x, 0, -2, -1)


def _given(g):
    """Is the output gradient ``g`` one a backward reached?  A multi-output rule gets zeros
    for an output no gradient reached; PyTorch's rules leave such an output's terms out
    (where eigen- or singular values repeat, their 0 / 0 would be NaN)."""
    return g is not None and (g._tape is not None or bool(np.any(np.asarray(g._value))))


# -- Cholesky ----------------------------------------------------------------------------------

def _not_positive_definite(a):
    """PyTorch's error for the first matrix of ``a`` that is not positive-definite, naming the
    order of its first leading minor that is not."""
    batch = a.reshape((-1,) + a.shape[-2:])
    for k, m in enumerate(batch):
        order = _first_failing_order(m)
        if order:
            where = f"(Batch element {k}): " if a.ndim > 2 else ""
            return LinAlgError(
                f"linalg.cholesky: {where}The factorization could not be completed because "
                f"the input is not positive-definite (the leading minor of order {order} "
                "is not positive-definite).")
    return LinAlgError("linalg.cholesky: The factorization could not be completed because "
                       "the input is not positive-definite.")


def _first_failing_order(m):
    """The order of the first leading minor of matrix ``m`` that is not positive-definite,
    or 0."""
    for order in range(1, m.shape[-1] + 1):
        try:
            np.linalg.cholesky(m[:order, :order])
        except np.linalg.LinAlgError:
            return order
    return 0


def cholesky_info(a):
    """PyTorch's ``info`` of ``cholesky_ex``: per matrix of ``a``, 0 or the order of its first
    leading minor that is not positive-definite (int32)."""
    batch = np.asarray(a, np.float64).reshape((-1,) + np.shape(a)[-2:])
    info = [_first_failing_order(m) for m in batch]
    return np.asarray(info, np.int32).reshape(np.shape(a)[:-2])


@defop("cholesky", "LinalgCholeskyExBackward0", method=False)
def cholesky(a, upper=False, check_errors=True):
    """The lower factor ``L`` of ``a = L L^T`` (the upper one, ``L^T``, with ``upper``); only
    ``a``'s lower triangle is read, as LAPACK's.  Without ``check_errors`` (``cholesky_ex``) a
    matrix that is not positive-definite gives NaN in place of LAPACK's partial factor."""
    try:
        factor = np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        if check_errors:
            raise _not_positive_definite(a) from None
        batch = np.asarray(a, np.float64).reshape((-1,) + a.shape[-2:])
        parts = []
        for m in batch:
            try:
                parts.append(np.linalg.cholesky(m))
            except np.linalg.LinAlgError:
                parts.append(np.full(m.shape, np.nan))
        factor = np.stack(parts).reshape(a.shape) if parts else np.array(a, np.float64)
    return contiguous(np.swapaxes(factor, -1, -2)) if upper else contiguous(factor)


def _cholesky_back(g, factor, a, upper=False, check_errors=True):
    # PyTorch's cholesky_backward: gA = L^{-T} phi(L^T gL) L^{-1}, phi taking the lower
    # triangle, symmetrized with its diagonal halved
    L, gL = (_mT(factor), _mT(g)) if upper else (factor, g)
    phi = call("tril", _mm(_mT(L), gL))
    phi = 0.5 * (phi + _mT(call("tril", phi, -1)))
    ga = call("solve_triangular", _mT(L), phi, upper=True)
    return (call("solve_triangular", L, ga, upper=False, left=False),)


cholesky.defvjp(_cholesky_back)


# -- triangular solves -------------------------------------------------------------------------

def _triangle(a, upper, unitriangular):
    t = np.triu(a) if upper else np.tril(a)
    if unitriangular:
        t = t.copy()
        idx = np.arange(t.shape[-1])
        t[..., idx, idx] = 1.0
    return t


def _substitute(t, b, upper):
    """``t x = b`` for triangular ``t`` by substitution, where LAPACK's general solver refuses
    a zero on the diagonal: inf and NaN where PyTorch's triangular solver gives them."""
    batch = np.broadcast_shapes(t.shape[:-2], b.shape[:-2])
    t = np.broadcast_to(t, batch + t.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    n = t.shape[-1]
    x = np.zeros(batch + b.shape[-2:])
    with np.errstate(all="ignore"):
        for i in (range(n - 1, -1, -1) if upper else range(n)):
            rest = np.einsum("...j,...jk->...k", t[..., i, :], x)   # (rows not solved yet: 0)
            x[..., i, :] = (b[..., i, :] - rest) / t[..., i, i, None]
    return x


@defop("solve_triangular", "LinalgSolveTriangularBackward0", method=False)
def solve_triangular(a, b, upper, left=True, unitriangular=False):
    """``X`` with ``A X = B`` (``X A = B`` without ``left``) for the upper or lower triangle of
    ``a`` (a unit diagonal with ``unitriangular``)."""
    t = _triangle(a, upper, unitriangular)
    if not left:
        t, b, upper = np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2), not upper
    try:
        x = np.linalg.solve(t, b)
    except np.linalg.LinAlgError:
        x = _substitute(t, b, upper)
    return contiguous(np.swapaxes(x, -1, -2) if not left else x)


def _solve_triangular_back(g, ans, a, b, upper, left=True, unitriangular=False):
    # X = A^{-1} B: gB = A^{-T} g, gA = -gB X^T (left); X = B A^{-1}: gB = g A^{-T},
    # gA = -X^T gB; gA kept to the triangle read
    def gb():
        return call("solve_triangular", _mT(a), g, upper=not upper, left=left,
                    unitriangular=unitriangular)

    def ga():
        d = gb()
        full = -_mm(d, _mT(ans)) if left else -_mm(_mT(ans), d)
        return call("triu", full, 1 if unitriangular else 0) if upper else \
            call("tril", full, -1 if unitriangular else 0)
    return ga, gb


solve_triangular.defvjp(_solve_triangular_back)


# -- symmetric eigendecomposition ----------------------------------------------------------------

@defop("eigh", "LinalgEighBackward0", method=False)
def eigh(a, UPLO="L"):
    w, v = np.linalg.eigh(a, UPLO)
    return contiguous(w), contiguous(v)


def _eigh_back(gs, outs, a, UPLO="L"):
    # PyTorch's linalg_eig_backward (Hermitian): gA = V (diag(gL) + skew(V^T gV) / E) V^T,
    # E[i, j] = L[j] - L[i] (1 on the diagonal)
    (gw, gv), (w, v) = gs, outs
    if not _given(gv):
        return (_mm(v, _mm(_diag_embed(gw), _mT(v))),)
    vgv = _mm(_mT(v), gv)
    vgv = 0.5 * (vgv - _mT(vgv))
    e = call("unsqueeze", w, -2) - call("unsqueeze", w, -1) + _eye_like(w)
    inner = vgv / e
    if _given(gw):
        inner = inner + _diag_embed(gw)
    return (_mm(v, _mm(inner, _mT(v))),)


eigh.defvjp(_eigh_back)


# -- singular value decomposition -----------------------------------------------------------------

@defop("svd", "LinalgSvdBackward0", method=False)
def svd(a, full_matrices=True):
    u, s, vh = np.linalg.svd(a, full_matrices=full_matrices)
    return contiguous(u), contiguous(s), contiguous(vh)


def _svd_back(gs, outs, a, full_matrices=True):
    # PyTorch's svd_backward (real); with full_matrices the columns of U and rows of Vh past
    # min(m, n) take no gradient (derivatives.yaml narrows them away)
    (gu, gsv, gvh), (u, s, vh) = gs, outs
    m, n = a.shape[-2], a.shape[-1]
    k = min(m, n)
    if full_matrices and m != n:
        u, vh = u[..., :, :k], vh[..., :k, :]
        gu, gvh = gu[..., :, :k], gvh[..., :k, :]
    has_u, has_v = _given(gu), _given(gvh)
    if not has_u and not has_v:
        return (_mm(u, call("unsqueeze", gsv, -1) * vh) if m >= n else
                _mm(u * call("unsqueeze", gsv, -2), vh),)
    s2 = s * s
    e = call("unsqueeze", s2, -2) - call("unsqueeze", s2, -1) + _eye_like(s)
    if has_u:
        ugu = _mm(_mT(u), gu)
        ugu = ugu - _mT(ugu)
    if has_v:
        vgv = _mm(vh, _mT(gvh))
        vgv = vgv - _mT(vgv)
    if has_u and has_v:
        inner = (ugu * call("unsqueeze", s, -2) + call("unsqueeze", s, -1) * vgv) / e
    elif has_u:
        inner = (ugu / e) * call("unsqueeze", s, -2)
    else:
        inner = call("unsqueeze", s, -1) * (vgv / e)
    if _given(gsv):
        inner = inner + _diag_embed(gsv)
    if m > n and has_u:
        ga = _mm(u, inner)
        gus = gu / call("unsqueeze", s, -2)
        ga = ga + gus - _mm(u, _mm(_mT(u), gus))
        return (_mm(ga, vh),)
    if m < n and has_v:
        ga = _mm(inner, vh)
        sgv = gvh / call("unsqueeze", s, -1)
        ga = ga + sgv - _mm(_mm(sgv, _mT(vh)), vh)
        return (_mm(u, ga),)
    return (_mm(u, _mm(inner, vh)),)


svd.defvjp(_svd_back)


# -- QR ---------------------------------------------------------------------------------------------

@defop("qr", "LinalgQrBackward0", method=False)
def qr(a, mode="reduced"):
    if mode == "r":   # (Q is not computed: an empty tensor, as PyTorch's)
        return np.empty(0), contiguous(np.linalg.qr(a, "r"))
    q, r = np.linalg.qr(a, mode)
    return contiguous(q), contiguous(r)


def _copyltu(x):
    """The symmetric matrix of ``x``'s lower triangle."""
    return call("tril", x) + _mT(call("tril", x, -1))


def _qr_square_back(gq, gr, q, r):
    # A = QR with R square: gA = (gQ + Q copyltu(M)) R^{-T}, M = R gR^T - gQ^T Q
    mat = _mm(r, _mT(gr)) - _mm(_mT(gq), q)
    b = gq + _mm(q, _copyltu(mat))
    return _mT(call("solve_triangular", r, _mT(b), upper=True))


def _qr_back(gs, outs, a, mode="reduced"):
    (gq, gr), (q, r) = gs, outs
    m, n = a.shape[-2], a.shape[-1]
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when "
                           "mode='r'. Please use linalg.qr(A, mode='reduced') if you are going "
                           "to differentiate through linalg.qr.")
    if mode == "complete" and m > n:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and "
                           "nrows > ncols.")
    if m >= n:
        return (_qr_square_back(gq, gr, q, r),)
    # m < n: A = Q [R1 R2]; the first m columns as a square QR, where R2 = Q^T Y moves gQ
    r1, gr1, gr2 = r[..., :, :m], gr[..., :, :m], gr[..., :, m:]
    y = a[..., :, m:] if isinstance(a, Tensor) else wrap(np.asarray(a)[..., :, m:])
    gx = _qr_square_back(gq + _mm(y, _mT(gr2)), gr1, q, r1)
    return (call("cat", gx, _mm(q, gr2), dim=-1),)


qr.defvjp(_qr_back)


# -- matrix exponential ---------------------------------------------------------------------------

# Pade coefficients of degree 13 and the 1-norm bounds up to which degrees 3..13 suffice
# (Higham, "The scaling and squaring method for the matrix exponential revisited", 2005)
_PADE13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
           129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
           40840800.0, 960960.0, 16380.0, 182.0, 1.0)
_THETA13 = 5.371920351148152


def _expm(a):
    """exp of one square matrix: Pade 13 with scaling and squaring."""
    n = a.shape[-1]
    norm = np.abs(a).sum(axis=0).max() if n else 0.0
    s = max(0, int(np.ceil(np.log2(norm / _THETA13)))) if norm > _THETA13 else 0
    a = a / (2.0 ** s)
    b = _PADE13
    ident = np.eye(n)
    a2 = a @ a
    a4 = a2 @ a2
    a6 = a4 @ a2
    u = a @ (a6 @ (b[13] * a6 + b[11] * a4 + b[9] * a2) + b[7] * a6 + b[5] * a4 + b[3] * a2
             + b[1] * ident)
    v = a6 @ (b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + b[2] * a2 \
        + b[0] * ident
    r = np.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r


@defop("matrix_exp", "LinalgMatrixExpBackward0", method=False)
def matrix_exp(a):
    a = np.asarray(a, np.float64)
    if a.ndim == 2:
        return _expm(a)
    flat = a.reshape((-1,) + a.shape[-2:])
    return np.stack([_expm(m) for m in flat]).reshape(a.shape) if len(flat) else a.copy()


def _matrix_exp_back(g, ans, a):
    # PyTorch's backward_analytic_function_of_a_matrix: exp([[A^T, G], [0, A^T]]) holds the
    # gradient in its top-right block
    n = a.shape[-1]
    at = _mT(a)
    zeros = wrap(np.zeros(tuple(a.shape)))
    block = call("cat", call("cat", at, g, dim=-1), call("cat", zeros, at, dim=-1), dim=-2)
    return (call("matrix_exp", block)[..., :n, n:],)


matrix_exp.defvjp(_matrix_exp_back)


# -- the public functions ---------------------------------------------------------------------------

def _check_matrix(A, name):
    if not isinstance(A, Tensor):
        raise TypeError(f"linalg.{name}(): argument 'A' (position 1) must be Tensor, not "
                        f"{type(A).__name__}")
    if A.ndim < 2:
        raise RuntimeError(f"linalg.{name}: The input tensor A must have at least 2 dimensions.")


def check_square(A, name):
    """PyTorch's errors for ``A`` that is not a (batch of) square matrices."""
    _check_matrix(A, name)
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"linalg.{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _float64(A, name):
    if A.dtype.np != np.float64:
        raise NotImplementedError(f"linalg.{name}: only float64 tensors are supported, got "
                                  f"{A.dtype}")


def linalg_cholesky(A, *, upper=False):
    """The lower Cholesky factor ``L`` of a symmetric positive-definite ``A = L L^T`` (or of
    each in a batch); ``upper``: ``L^T``.  ``LinAlgError`` for a matrix that is not
    positive-definite, naming its first leading minor that is not."""
    check_square(A, "cholesky")
    _float64(A, "cholesky")
    return call("cholesky", A, upper=upper)


CholeskyExResult = namedtuple("cholesky_ex", ["L", "info"])


def linalg_cholesky_ex(A, *, upper=False, check_errors=False):
    """``(L, info)``: ``info`` 0 for a positive-definite matrix, else the order of its first
    leading minor that is not (and ``L`` NaN there, where PyTorch leaves LAPACK's partial
    factor); raises only with ``check_errors``."""
    check_square(A, "cholesky")
    _float64(A, "cholesky")
    if check_errors:
        try:
            return CholeskyExResult(call("cholesky", A, upper=upper), _no_errors(A))
        except LinAlgError as e:
            raise LinAlgError(str(e).replace("linalg.cholesky:", "linalg.cholesky_ex:", 1)) \
                from None
    info = cholesky_info(A.detach()._value)
    return CholeskyExResult(call("cholesky", A, upper=upper, check_errors=False), wrap(info))


def _no_errors(A):
    return wrap(np.zeros(tuple(A.shape[:-2]), np.int32))


def cholesky(A, upper=False):
    """``torch.cholesky`` (PyTorch's older name): ``linalg.cholesky(A, upper=upper)``."""
    return linalg_cholesky(A, upper=upper)


def linalg_solve_triangular(A, B, *, upper, left=True, unitriangular=False):
    """``X`` with ``A X = B`` (``X A = B`` when not ``left``) reading only the upper or lower
    triangle of ``A`` (and 1s on its diagonal with ``unitriangular``)."""
    check_square(A, "solve_triangular")
    _check_matrix(B, "solve_triangular")
    _float64(A, "solve_triangular")
    k = B.shape[-2] if left else B.shape[-1]
    if k != A.shape[-1]:
        raise RuntimeError(f"linalg.solve_triangular: Incompatible shapes of A and B for the "
                           f"equation {'AX = B' if left else 'XA = B'} "
                           f"({A.shape[-2]}x{A.shape[-1]} and {B.shape[-2]}x{B.shape[-1]})")
    return call("solve_triangular", A, B, upper=bool(upper), left=bool(left),
                unitriangular=bool(unitriangular))


def triangular_solve(b, A, upper=True, transpose=False, unitriangular=False):
    """``torch.triangular_solve`` (PyTorch's older name): ``(X, A.clone())`` with
    ``op(A) X = b``, ``op(A)`` being ``A^T`` with ``transpose``."""
    if transpose:
        A_ = call("transpose", A, -2, -1)
        x = linalg_solve_triangular(A_, b, upper=not upper, unitriangular=unitriangular)
    else:
        x = linalg_solve_triangular(A, b, upper=upper, unitriangular=unitriangular)
    return TriangularSolveResult(x, A.clone())


def cholesky_solve(B, L, upper=False):
    """``X`` with ``A X = B`` given ``A``'s Cholesky factor ``L`` (upper with ``upper``)."""
    check_square(L, "cholesky_solve")
    lower = call("transpose", L, -2, -1) if upper else L
    y = linalg_solve_triangular(lower, B, upper=False)
    return linalg_solve_triangular(call("transpose", lower, -2, -1), y, upper=True)


def cholesky_inverse(L, upper=False):
    """The inverse of ``A`` given its Cholesky factor ``L`` (upper with ``upper``)."""
    check_square(L, "cholesky_inverse")
    return cholesky_solve(wrap(np.eye(L.shape[-1])), L, upper)


def linalg_eigh(A, UPLO="L"):
    """``(eigenvalues, eigenvectors)`` of a symmetric matrix, reading its lower triangle
    (``UPLO="U"``: its upper one); eigenvalues ascending, eigenvectors as columns (their signs
    are LAPACK's choice)."""
    check_square(A, "eigh")
    _float64(A, "eigh")
    if UPLO not in ("L", "U"):
        raise RuntimeError(f"Expected UPLO argument to be 'L' or 'U', but got {UPLO}")
    return EighResult(*call("eigh", A, UPLO=UPLO))


def linalg_eigvalsh(A, UPLO="L"):
    """The eigenvalues of a symmetric matrix, ascending (``linalg_eigh``'s first result)."""
    return linalg_eigh(A, UPLO)[0]


def linalg_svd(A, full_matrices=True, *, driver=None):
    """``(U, S, Vh)`` with ``A = U diag(S) Vh``, singular values descending."""
    _check_matrix(A, "svd")
    _float64(A, "svd")
    return SvdResult(*call("svd", A, full_matrices=bool(full_matrices)))


def linalg_svdvals(A, *, driver=None):
    """The singular values of ``A``, descending."""
    return linalg_svd(A, False)[1]


def svd(input, some=True, compute_uv=True):
    """``torch.svd`` (PyTorch's older name): ``(U, S, V)``, ``V`` not transposed; without
    ``compute_uv`` zeros for ``U`` and ``V``."""
    U, S, Vh = linalg_svd(input, not some)
    if not compute_uv:
        m, n = input.shape[-2], input.shape[-1]
        batch = tuple(input.shape[:-2])
        return OldSvdResult(wrap(np.zeros(batch + (m, m))), linalg_svd(input, False)[1],
                            wrap(np.zeros(batch + (n, n))))
    return OldSvdResult(U, S, call("transpose", Vh, -2, -1))


def linalg_qr(A, mode="reduced"):
    """``(Q, R)`` with ``A = QR`` (``mode``: ``"reduced"``, ``"complete"`` or ``"r"``, which
    leaves ``Q`` empty)."""
    _check_matrix(A, "qr")
    _float64(A, "qr")
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           "'reduced' (default), 'r', or 'complete'")
    return QrResult(*call("qr", A, mode=mode))


def qr(input, some=True):
    """``torch.qr`` (PyTorch's older name): ``linalg.qr`` reduced, or complete without
    ``some``."""
    return linalg_qr(input, "reduced" if some else "complete")


def linalg_matrix_exp(A):
    """The matrix exponential (of each matrix in a batch)."""
    check_square(A, "matrix_exp")
    _float64(A, "matrix_exp")
    return call("matrix_exp", A)


def _chain_order(shapes):
    """The split of the cheapest product of matrices of ``shapes`` (the matrix-chain order,
    as PyTorch's multi_dot chooses for more than two)."""
    n = len(shapes)
    dims = [shapes[0][0]] + [s[1] for s in shapes]
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def linalg_multi_dot(tensors):
    """The product of the matrices ``tensors`` (the first may be a row vector, the last a
    column vector: 1-d), in the order that costs least."""
    tensors = list(tensors)
    if len(tensors) < 2:
        raise RuntimeError(f"multi_dot(): expected at least 2 tensors but got {len(tensors)}")
    first, last = tensors[0].ndim == 1, tensors[-1].ndim == 1
    mats = list(tensors)
    if first:
        mats[0] = call("unsqueeze", mats[0], 0)
    if last:
        mats[-1] = call("unsqueeze", mats[-1], -1)
    for k, m in enumerate(mats):
        if m.ndim != 2:
            raise RuntimeError(f"multi_dot(): tensor {k} must be 2D but got {m.ndim}D")
    split = _chain_order([tuple(m.shape) for m in mats])

    def product(i, j):
        if i == j:
            return mats[i]
        k = split[i][j]
        return call("matmul", product(i, k), product(k + 1, j))

    out = product(0, len(mats) - 1)
    if first and last:
        return call("reshape", out, ())
    if first:
        return call("squeeze", out, 0)
    if last:
        return call("squeeze", out, -1)
    return out


def _singular_tolerance(s, shape, atol=None, rtol=None):
    """PyTorch's cut for ``pinv``/``matrix_rank``/``lstsq``: ``max(atol, rtol * s_max)`` per
    matrix of singular values ``s`` (``rtol`` defaults to ``eps * max(m, n)`` unless ``atol``
    is positive), shaped to compare with ``s``."""
    smax = s[..., :1] if s.shape[-1] else np.zeros(s.shape[:-1] + (1,))
    if rtol is None:
        rtol = 0.0 if atol is not None and atol > 0 else \
            np.finfo(np.float64).eps * max(shape[-2], shape[-1])
    return np.maximum(0.0 if atol is None else float(atol), float(rtol) * smax)


def linalg_pinv(A, *, atol=None, rtol=None, hermitian=False):
    """The pseudo-inverse from the SVD: singular values at most ``max(atol, rtol * s_max)``
    count as zero (``rtol`` defaults to ``eps * max(m, n)`` where ``atol`` is not given)."""
    _check_matrix(A, "pinv")
    U, S, Vh = linalg_svd(A, False)
    s = np.asarray(S.detach()._value)
    keep = wrap(s > _singular_tolerance(s, tuple(A.shape), atol, rtol))
    inverse = ELEMENTWISE["where"](keep, 1.0 / S, 0.0)
    return call("matmul", call("transpose", Vh, -2, -1) * call("unsqueeze", inverse, -2),
                call("transpose", U, -2, -1))


def pinverse(input, rcond=1e-15):
    """``torch.pinverse``: ``linalg.pinv(input, rtol=rcond)``."""
    return linalg_pinv(input, rtol=rcond)


def linalg_matrix_rank(A, *, atol=None, rtol=None, hermitian=False):
    """The number of singular values above the tolerance of ``linalg_pinv`` (int64)."""
    _check_matrix(A, "matrix_rank")
    s = np.linalg.svd(np.asarray(A.detach()._value, np.float64), compute_uv=False)
    tol = _singular_tolerance(s, tuple(A.shape), atol, rtol)
    return wrap(np.asarray((s > tol).sum(-1), np.int64))


def linalg_cond(A, p=None):
    """The 2-norm condition number ``s_max / s_min`` (other ``p`` are not supported)."""
    if p not in (None, 2):
        raise NotImplementedError(f"linalg.cond: p={p!r} is not supported (only None or 2)")
    S = linalg_svdvals(A)
    return S[..., 0] / S[..., -1]


LstsqResult = namedtuple("lstsq", ["solution", "residuals", "rank", "singular_values"])


def linalg_lstsq(A, B, rcond=None, *, driver=None):
    """The least-squares solution ``X`` of ``A X = B`` (the minimum-norm one where ``A`` is
    rank-deficient: singular values under ``rcond * s_max`` count as zero), as
    ``pinv(A) @ B``, whose gradient is PyTorch's (its backward goes through ``pinv`` too).
    ``residuals`` (the squared column norms of ``A X - B``), ``rank`` and ``singular_values``
    where PyTorch's ``driver`` gives them (``"gelsy"``, its CPU default: the rank only)."""
    _check_matrix(A, "lstsq")
    driver = "gelsy" if driver is None else driver
    if driver not in ("gels", "gelsy", "gelsd", "gelss"):
        raise RuntimeError(f"torch.linalg.lstsq: parameter `driver` should be one of "
                           f"(gels, gelsy, gelsd, gelss), but got {driver}")
    vector = B.ndim == A.ndim - 1
    b = call("unsqueeze", B, -1) if vector else B
    if b.ndim < 2 or b.shape[-2] != A.shape[-2]:
        raise RuntimeError("torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    m, n = A.shape[-2], A.shape[-1]
    rtol = float(np.finfo(np.float64).eps * max(m, n)) if rcond is None or rcond < 0 \
        else float(rcond)
    x = call("matmul", linalg_pinv(A, rtol=rtol), b)
    s = np.linalg.svd(np.asarray(A.detach()._value, np.float64), compute_uv=False)
    rank = np.asarray((s > _singular_tolerance(s, (m, n), rtol=rtol)).sum(-1), np.int64)
    empty = wrap(np.zeros(0))
    residuals = empty
    if driver != "gelsy" and m > n and np.all(rank == n):
        r = np.asarray((call("matmul", A, x) - b).detach()._value)
        residuals = wrap((r * r).sum(-2))
    return LstsqResult(call("squeeze", x, -1) if vector else x, residuals,
                       wrap(rank) if driver != "gels" else wrap(np.zeros(0, np.int64)),
                       wrap(s) if driver in ("gelsd", "gelss") else empty)


LINALG_FUNCTIONS = {
    "cholesky": linalg_cholesky, "cholesky_ex": linalg_cholesky_ex,
    "solve_triangular": linalg_solve_triangular,
    "eigh": linalg_eigh, "eigvalsh": linalg_eigvalsh, "svd": linalg_svd,
    "svdvals": linalg_svdvals, "qr": linalg_qr, "matrix_exp": linalg_matrix_exp,
    "multi_dot": linalg_multi_dot, "pinv": linalg_pinv, "matrix_rank": linalg_matrix_rank,
    "cond": linalg_cond, "lstsq": linalg_lstsq}
# torch.<name> and Tensor.<name>
TOP_FUNCTIONS = {
    "cholesky": cholesky, "cholesky_solve": cholesky_solve, "cholesky_inverse": cholesky_inverse,
    "triangular_solve": triangular_solve, "svd": svd, "qr": qr, "matrix_exp": linalg_matrix_exp,
    "pinverse": pinverse}
