"""Special functions (``tg.special``, and ``tg.lgamma``/``digamma``/``polygamma``/``erfinv``...
as PyTorch has them at the top level): rows of the array-op table with NumPy forwards
written here from ``math`` and series (SciPy is no dependency), and rules in tapegrad ops,
so each differentiates to any order: ``lgamma' = digamma``, ``digamma' = polygamma(1)``,
``polygamma(n)' = polygamma(n + 1)``, ``erfinv' = sqrt(pi)/2 exp(erfinv^2)``.

Accuracy: ``lgamma``/``erfc`` are ``math``'s (vectorised); ``digamma``/``polygamma`` use the
recurrence up to x >= 20 + 2n and the asymptotic series (relative error ~1e-15 for float64);
``erfinv`` is Giles' single-precision approximation polished by two Newton steps.
"""
from __future__ import annotations

import math

import numpy as np

from ..core.elementwise import FUNCTIONS as ELEMENTWISE
from ..core.tensor import Tensor
from .array_ops import call, defop

_where, _exp, _log, _sqrt = (ELEMENTWISE[n] for n in ("where", "exp", "log", "sqrt"))


def _f64(x):
    return np.asarray(x, dtype=np.float64)


def _ufunc(fn):
    """``fn`` (a ``math`` function) over arrays; the pole of lgamma (ValueError) is +inf."""
    def safe(v):
        try:
            return fn(v)
        except ValueError:
            return math.inf
        except OverflowError:
            return math.inf
    u = np.frompyfunc(safe, 1, 1)
    return lambda x: np.asarray(u(_f64(x)), dtype=np.float64)


_lgamma = _ufunc(math.lgamma)
_erf = _ufunc(math.erf)
_erfc = _ufunc(math.erfc)

# B_2k / (2k) for k = 1..9 (the digamma series) and B_2k for the polygamma series
_BERNOULLI = (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510,
              43867 / 798)


def _digamma(x):
    x = _f64(x)
    out = np.empty_like(x)
    with np.errstate(all="ignore"):
        pole = (x <= 0) & (x == np.floor(x))
        neg = (x < 0.5) & ~pole
        # reflection: psi(x) = psi(1 - x) - pi / tan(pi x)
        y = np.where(neg, 1.0 - x, x)
        acc = np.zeros_like(y)
        low = y < 20.0
        while low.any():   # psi(y) = psi(y + 1) - 1 / y
            acc -= np.where(low, 1.0 / np.where(low, y, 1.0), 0.0)
            y = np.where(low, y + 1.0, y)
            low = y < 20.0
        inv2 = 1.0 / (y * y)
        series, power = 0.0, inv2
        for k, b in enumerate(_BERNOULLI, start=1):
            series = series + b / (2 * k) * power
            power = power * inv2
        psi = np.log(y) - 0.5 / y - series + acc
        psi = np.where(neg, psi - np.pi / np.tan(np.pi * x), psi)
        out[...] = np.where(pole, np.where(x == 0, -np.inf, np.nan), psi)
        out[np.isposinf(x)] = np.inf
        out[np.isnan(x)] = np.nan
    return out


def _polygamma(n, x):
    """The n-th derivative of digamma (n >= 1)."""
    if n == 0:
        return _digamma(x)
    x = _f64(x)
    sign = 1.0 if n % 2 else -1.0
    fact_n = math.factorial(n)
    with np.errstate(all="ignore"):
        pole = (x <= 0) & (x == np.floor(x))
        y = x.copy()
        acc = np.zeros_like(y)
        bound = 20.0 + 2 * n
        low = (y < bound) & ~pole & np.isfinite(y)
        while low.any():   # psi_n(y) = psi_n(y + 1) + (-1)^(n+1) n! / y^(n+1)
            acc += np.where(low, sign * fact_n / np.where(low, y, 1.0) ** (n + 1), 0.0)
            y = np.where(low, y + 1.0, y)
            low = y < bound
        series = math.factorial(n - 1) / y ** n + fact_n / (2 * y ** (n + 1))
        for k, b in enumerate(_BERNOULLI, start=1):
            series = series + b * math.factorial(2 * k + n - 1) / math.factorial(2 * k) \
                / y ** (2 * k + n)
        out = sign * series + acc
        out = np.where(pole, np.inf if n % 2 else np.nan, out)
        out = np.where(np.isposinf(x), 0.0, out)
    return np.where(np.isnan(x), np.nan, out)


def _erfinv(x):
    x = _f64(x)
    with np.errstate(all="ignore"):
        w = -np.log((1.0 - x) * (1.0 + x))
        small = w < 5.0
        ws = w - 2.5
        p1 = 2.81022636e-08
        for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
            p1 = c + p1 * ws
        wl = np.sqrt(w) - 3.0
        p2 = -0.000200214257
        for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                  -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
            p2 = c + p2 * wl
        a = np.abs(x)
        b = np.where(small, p1, p2) * a
        for _ in range(2):   # Newton on erf(b) = |x|, near 1 as erfc(b) = 1 - |x| (exact)
            r = np.where(a < 0.5, _erf(b) - a, (1.0 - a) - _erfc(b))
            step = r / (2.0 / math.sqrt(math.pi) * np.exp(-b * b))
            b = np.where(np.isfinite(step), b - step, b)
        y = np.copysign(b, x)
        y = np.where(x == 1.0, np.inf, np.where(x == -1.0, -np.inf, y))
        return np.where(np.abs(x) > 1.0, np.nan, y)


# -- rows ----------------------------------------------------------------------------------

@defop("lgamma", "LgammaBackward0")
def lgamma(x):
    return _lgamma(x)


lgamma.defvjp(lambda g, ans, x: (lambda: g * call("digamma", x),))   # d lgamma = digamma


@defop("digamma", "DigammaBackward0")
def digamma(x):
    return _digamma(x)


digamma.defvjp(lambda g, ans, x: (lambda: g * call("polygamma", 1, x),))   # d psi = psi_1


def _polygamma_node(n, x):
    return "PolygammaBackward0"


@defop("polygamma", _polygamma_node, method=False)
def polygamma(n, x):
    return _polygamma(n, x)


polygamma.defvjp(lambda g, ans, n, x: (None, lambda: g * call("polygamma", n + 1, x)))


@defop("erfinv", "ErfinvBackward0")
def erfinv(x):
    return _erfinv(x)


# d erfinv(x) = sqrt(pi) / 2 * exp(erfinv(x)^2)
erfinv.defvjp(lambda g, ans, x: (lambda: g * (0.5 * math.sqrt(math.pi)) * _exp(ans * ans),))


@defop("erfc", "ErfcBackward0")
def erfc(x):
    return _erfc(x)


# d erfc(x) = -2 / sqrt(pi) * exp(-x^2)
erfc.defvjp(lambda g, ans, x: (lambda: g * (-2.0 / math.sqrt(math.pi)) * _exp(-(x * x)),))


def _logit_forward(x, eps=None):
    x = np.asarray(x)
    if eps is not None:
        x = np.clip(x, eps, 1.0 - eps)
    with np.errstate(all="ignore"):
        return np.log(x / (1.0 - x))


@defop("logit", "LogitBackward0")
def logit(x, eps=None):
    return _logit_forward(x, eps)


def _logit_grad(g, x, eps):
    d = g / (x * (1.0 - x))
    if eps is None:
        return d
    return _where((x < eps) | (x > 1.0 - eps), 0.0, d)   # clamped: constant there


logit.defvjp(lambda g, ans, x, eps=None: (lambda: _logit_grad(g, x, eps),))


@defop("mvlgamma", "MvlgammaBackward0")
def mvlgamma(x, p):
    x = _f64(x)
    return sum(_lgamma(x - 0.5 * i) for i in range(p)) + p * (p - 1) / 4 * math.log(math.pi)


# d mvlgamma(x, p) = sum_i digamma(x - i/2)
mvlgamma.defvjp(lambda g, ans, x, p:
                (lambda: g * sum((call("digamma", x - 0.5 * i) for i in range(1, p)),
                                 call("digamma", x)),))


@defop("xlogy", "XlogyBackward0")
def xlogy(x, y):
    x, y = np.asarray(x), np.asarray(y)
    with np.errstate(all="ignore"):
        out = np.where(x == 0, 0.0, x * np.log(y))
    return np.where(np.isnan(y), np.nan, out)


# d/dx = log(y) (0 where x == 0, as PyTorch's xlogy(x != 0, y)); d/dy = x / y
def _nonzero(x):
    return _where(x != 0.0, 1.0, 0.0) if isinstance(x, Tensor) else float(x != 0)


xlogy.defvjp(lambda g, ans, x, y:
             (lambda: g * call("xlogy", _nonzero(x), y), lambda: g * x / y))


def polygamma_checked(n, input):
    """``polygamma(n, x)``: the n-th derivative of digamma (``n >= 0``)."""
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if n == 0:
        return call("digamma", input)
    return call("polygamma", int(n), input)


def multigammaln(input, p):
    """The log of the multivariate gamma function of dimension ``p``: ``p (p - 1) / 4 log pi
    + sum_i lgamma(x - i / 2)`` (no domain check, as PyTorch: a pole gives inf)."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    return call("mvlgamma", input, p)


def expit(input):
    """The logistic sigmoid (``sigmoid``)."""
    return ELEMENTWISE["sigmoid"](input)


def ndtr(input):
    """The standard normal CDF."""
    return (1.0 + ELEMENTWISE["erf"](input * (1.0 / math.sqrt(2.0)))) * 0.5


def ndtri(input):
    """The inverse of the standard normal CDF."""
    return call("erfinv", input * 2.0 - 1.0) * math.sqrt(2.0)


def log_ndtr(input):
    """log of the standard normal CDF (as ``log(erfc(-x / sqrt(2)) / 2)``)."""
    return _log(call("erfc", input * (-1.0 / math.sqrt(2.0))) * 0.5)


def entr(input):
    """``-x log x`` (0 at 0, -inf below 0)."""
    return _where(input > 0.0, -call("xlogy", input, input),
                  _where(input == 0.0, 0.0, -math.inf))


def sinc(input):
    """``sin(pi x) / (pi x)`` (1 at 0)."""
    px = input * math.pi
    safe = _where(input == 0.0, 1.0, px)
    return _where(input == 0.0, 1.0, ELEMENTWISE["sin"](safe) / safe)


def xlog1py(input, other):
    """``x * log1p(y)`` (0 where x is 0)."""
    return _where(input == 0.0, 0.0, input * ELEMENTWISE["log1p"](other))


def logit_checked(input, eps=None):
    """``log(x / (1 - x))``, with ``x`` clamped to ``[eps, 1 - eps]`` when ``eps`` is given."""
    return call("logit", input, eps=eps)


# -- modified Bessel functions of the first kind, orders 0 and 1 ------------------------------
# Cephes' Chebyshev coefficients (i0.c, i1.c; highest degree first), as PyTorch's
# calc_i0/calc_i0e/calc_i1/calc_i1e use them: exp(-|x|) I(x) on [0, 8] in x / 2 - 2 (I1's
# divided by x), and sqrt(|x|) exp(-|x|) I(x) beyond in 32 / |x| - 2
_I0E_A = (
    -4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
    1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
    -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
    9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
    -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
    1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
    -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
    1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
    -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
    1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1)
_I0E_B = (
    -7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
    3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
    1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
    -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
    7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
    -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
    3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
    2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
    8.04490411014108831608e-1)
_I1E_A = (
    2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
    -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
    3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
    -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
    9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
    -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
    4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
    -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
    2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
    -1.76416518357834055153e-1, 2.52587186443633654823e-1)
_I1E_B = (
    7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
    -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
    -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
    4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
    -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
    3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
    -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
    -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
    7.78576235018280120474e-1)


def _chbevl(y, coefficients):
    """Cephes' Chebyshev series (``chbevl``) at ``y``."""
    b0, b1, b2 = np.full_like(y, coefficients[0]), np.zeros_like(y), np.zeros_like(y)
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = y * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _bessel(x, order, scaled):
    """I0 / I1 (``order``), times exp(-|x|) when ``scaled``, as PyTorch's calc_i* compute
    them (the same operations in the same order)."""
    x = _f64(x)
    ax = np.abs(x)
    small = ax <= 8.0
    with np.errstate(all="ignore"):
        a = _chbevl(ax / 2.0 - 2.0, _I0E_A if order == 0 else _I1E_A)
        b = _chbevl(32.0 / ax - 2.0, _I0E_B if order == 0 else _I1E_B)
        scale = 1.0 if scaled else np.exp(ax)
        if order == 0:
            out = np.where(small, scale * a, scale * b / np.sqrt(ax))
        else:
            out = np.where(small, scale * ax * a, scale * b / np.sqrt(ax))
            out = np.where(x < 0, -out, out)
    return out


@defop("i0", "I0Backward0")
def i0(x):
    return _bessel(x, 0, False)


@defop("special_i0e", "SpecialI0EBackward0", method=False)
def special_i0e(x):
    return _bessel(x, 0, True)


@defop("special_i1", "SpecialI1Backward0", method=False)
def special_i1(x):
    return _bessel(x, 1, False)


@defop("special_i1e", "SpecialI1EBackward0", method=False)
def special_i1e(x):
    return _bessel(x, 1, True)


def _near_zero_half(x, gradx):
    """PyTorch's i1/i1e backward: 0.5 where |x| <= eps (the limit there), ``gradx`` at a
    ``safe`` x elsewhere."""
    eps = float(np.finfo(np.float64).eps)
    return _where(ELEMENTWISE["abs"](x) > eps, gradx, 0.5)


def _safe(x):
    eps = float(np.finfo(np.float64).eps)
    return _where(ELEMENTWISE["abs"](x) > eps, x, eps)


# d i0 = i1; d i0e = i1e - sgn(x) i0e; d i1 = i0 - i1 / x; d i1e = i0e - i1e (sgn(x) + 1 / x)
i0.defvjp(lambda g, ans, x: (g * call("special_i1", x),))
special_i0e.defvjp(lambda g, ans, x: (g * (call("special_i1e", x)
                                           - ELEMENTWISE["sgn"](x) * ans),))
special_i1.defvjp(lambda g, ans, x: (g * _near_zero_half(
    x, call("i0", _safe(x)) - ans / _safe(x)),))
special_i1e.defvjp(lambda g, ans, x: (g * _near_zero_half(
    x, call("special_i0e", _safe(x)) - ans * (ELEMENTWISE["sgn"](_safe(x)) + 1.0 / _safe(x))),))


# tg.special.<name> (beside the rows' own names)
SPECIAL = {
    "i0": lambda input: call("i0", input), "i0e": lambda input: call("special_i0e", input),
    "i1": lambda input: call("special_i1", input), "i1e": lambda input: call("special_i1e", input),
    "modified_bessel_i0": lambda input: call("i0", input),
    "modified_bessel_i1": lambda input: call("special_i1", input),
    "lgamma": lambda input: call("lgamma", input), "gammaln": lambda input: call("lgamma", input),
    "digamma": lambda input: call("digamma", input), "psi": lambda input: call("digamma", input),
    "polygamma": polygamma_checked, "multigammaln": multigammaln,
    "erfinv": lambda input: call("erfinv", input), "erfc": lambda input: call("erfc", input),
    "logit": logit_checked, "expit": expit,
    "xlogy": lambda input, other: call("xlogy", input, other),
    "xlog1py": xlog1py, "ndtr": ndtr, "ndtri": ndtri, "log_ndtr": log_ndtr, "entr": entr,
    "sinc": sinc, "exp2": ELEMENTWISE["exp2"], "erf": ELEMENTWISE["erf"], "expm1": ELEMENTWISE["expm1"],
    "log1p": ELEMENTWISE["log1p"], "round": ELEMENTWISE["round"],
}
