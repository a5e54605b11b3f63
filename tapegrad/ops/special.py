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


# tg.special.<name> (beside the rows' own names)
SPECIAL = {
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
