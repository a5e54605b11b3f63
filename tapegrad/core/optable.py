"""The op table: the single source of truth for every differentiable elementwise op.

One row per op.  Everything else is derived from these rows by ``tools/codegen.py``:
the opcode numbers, the branches of the Numba reverse sweep (``kernels.py``), the fast
Python recording methods (``elementwise.py``), the ``tg.<name>`` functions and ``Tensor``
methods, the node names users see (``grad_fn``), which inputs an op saves for backward,
the op list in the docs, and the op tests (``tests/test_ops.py`` walks this table).

Vocabulary of a row (fixed names, as in PyTorch's derivatives.yaml and HIPS autograd):

- ``fwd``: the forward on Python floats, over ``x`` (first input), ``y``, ``z`` and the
  module ``math``.  If it raises (``math.log(0.0)``), the value is taken from ``vfwd`` on
  a NumPy float64 scalar instead, so results follow IEEE rules (``-inf``, ``nan``) as in
  PyTorch.  ``fwd`` must also compile in Numba (it is the replay forward).
- ``vfwd``: the forward on NumPy arrays (``np``).
- ``dx``, ``dy``, ``dz``: the local partial derivative of the result with respect to each
  input, over ``x``, ``y``, ``z`` and ``out`` (the result).  The sweep multiplies each by
  the incoming gradient ``g`` in one shared update, so a rule never mentions ``g``.
  Functions available: ``sqrt exp log sin cos sinh cosh erf`` (math) and ``sign``.
- ``gx``, ``gy``, ``gz`` (optional): the adjoint term of each input as PyTorch's
  ``derivatives.yaml`` writes it, over ``g``, ``x``, ``y``, ``z``, ``out``, the functions
  above and the rows of this table (``sigmoid_backward(g, out)``): what a ``create_graph``
  backward records instead of ``g * partial``.  The structure matters there: differentiated
  again, ``g / y`` and ``g * (1 / y)`` give different NaNs, infinities and signed zeros.
- ``backward_of``: the row is one of PyTorch's fused backward ops (``sigmoid_backward``), the
  op a ``g*`` rule of op ``backward_of`` records; its partials are PyTorch's double-backward
  formulas and its node PyTorch's (``SigmoidBackwardBackward0``).  Such a row is internal:
  no Tensor method, not in the docs' op list (a surface generated from the table skips it).
- ``node``: the ``grad_fn`` class name, as PyTorch prints it; ``node_c`` the name used
  when the second input is a Python number, if PyTorch names that case differently.
- ``domain``: where the op tests sample each input (a smooth region of the op).

A branch of a partial that is the constant ``0.0`` is a *mask*, as PyTorch's ``where``/
``masked_fill``/``zeros_like`` in its backward formulas: that input gets a zero, even from
an infinite or NaN incoming gradient, and the zero flows on to the ops below it (which
multiply it as usual).  Under ``create_graph`` a partial that is 0 everywhere (``sign``) is
``zeros_like(g)``, which does not require grad; a masked branch is ``where(mask, g, 0)``,
which keeps ``g``'s graph.  A computed zero (``y`` in ``mul`` at ``y == 0``) multiplies as
usual (``inf * 0 = nan``), as in PyTorch.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Tuple


class Op(NamedTuple):
    name: str
    arity: int
    fwd: str
    vfwd: str
    dx: str
    dy: Optional[str] = None
    dz: Optional[str] = None
    node: str = ""
    node_c: Optional[str] = None
    node_r: Optional[str] = None  # ... and when the first input is a Python number
    # ``tg.sub(2.0, x)`` (the function, a number first) takes the number as a tensor, as
    # torch.sub does: SubBackward0 with a None edge (``2.0 - x`` stays RsubBackward1)
    wraps_number_first: bool = False
    domain: Tuple[Tuple[float, float], ...] = ((-2.0, 2.0),)
    method: bool = True  # also a Tensor method (``x.sin()``)
    dunder: Optional[str] = None  # Python operator protocol name (``mul`` -> ``__mul__``)
    commutative: bool = False     # ``2 * x`` records as ``x * 2``, as PyTorch does
    rewrite_r: Optional[str] = None  # ``number OP tensor`` records as this composition of rows
    int_result: bool = False  # integer/bool inputs give that dtype (else the default float)
    gx: Optional[str] = None   # create_graph: PyTorch's recorded adjoint terms (see above)
    gy: Optional[str] = None
    gz: Optional[str] = None
    backward_of: Optional[str] = None  # an internal row: PyTorch's fused backward of that op
    compare: bool = False         # a comparison: a bool tensor without grad (a guard source)
    # its derivative is PyTorch's efficient zero tensor (``sgn`` of a real tensor): a zero that
    # create_graph passes on as +0 through every op below it, without sign flips or NaN
    efficient_zero: bool = False
    sig: Optional[str] = None  # Python signature of a ternary op ...
    call: Optional[str] = None  # ... and how it maps onto (x, y, z)
    params: Optional[str] = None  # PyTorch's names of the inputs ("input, other" if None)
    alpha: bool = False  # the method takes PyTorch's ``alpha=``: ``input op alpha * other``
    # PyTorch's extra keyword of the method (``x.div(y, rounding_mode=...)``): the ops
    # layer's function, which takes it, is the method; the row serves the operator (``x / y``)
    keyword: Optional[str] = None
    # the input (x, y or z) that makes PyTorch's node save what its partial reads whenever it
    # is a tensor, taking a gradient or not (``pow``'s tensor exponent: PowBackward1 saves the
    # result), so an in-place change of those values raises at the backward, as there
    saved_for_tensor: Optional[str] = None
    # a row another function records (``torch_api.clamp`` without a max): no ``tg.<name>``,
    # not in the README's op list
    internal: bool = False
    # what PyTorch's node saves beyond what the partials read ("x out": ``sgn``, whose
    # partial is 0 but whose SgnBackward0 saves both): an in-place change of it raises
    saves: str = ""


U = ((-2.0, 2.0),)
POS = ((0.2, 3.0),)
UNIT = ((-0.9, 0.9),)
B2 = ((-2.0, 2.0), (-2.0, 2.0))

OPS: Tuple[Op, ...] = (
    # binary arithmetic -------------------------------------------------------------
    Op("add", 2, "x + y", "np.add(x, y)", "1.0", "1.0", node="AddBackward0", dunder="add",
       commutative=True, int_result=True, domain=B2, alpha=True),
    Op("sub", 2, "x - y", "np.subtract(x, y)", "1.0", "-1.0", gy="-g", node="SubBackward0", dunder="sub",
       node_r="RsubBackward1", wraps_number_first=True, int_result=True, domain=B2,
       alpha=True),
    Op("mul", 2, "x * y", "np.multiply(x, y)", "y", "x", node="MulBackward0", dunder="mul",
       commutative=True, int_result=True, domain=B2),
    # d/dx x/y = 1/y ; d/dy x/y = -x/y^2 = -out/y (PyTorch: -grad * ((x / y) / y), a
    # division of its own: differentiated again, its parts do not add up with out's)
    Op("div", 2, "x / y", "np.true_divide(x, y)", "1.0 / y", "-out / y",
       gx="g / y", gy="-g * ((x / y) / y)",
       node="DivBackward0", dunder="truediv", rewrite_r="mul(reciprocal(y), x)",
       domain=((-2.0, 2.0), (0.5, 2.0)), keyword="rounding_mode"),
    # d/dx x^y = y x^(y-1) (0 where y == 0, as PyTorch) ; d/dy x^y = x^y log x (0 at x == 0, y >= 0:
    # a computed zero, as PyTorch's, so an infinite gradient gives NaN there)
    # (y == 2 is the common case, x**2: a multiply instead of a call to pow)
    Op("pow", 2, "x * x if y == 2.0 else math.pow(x, y)", "np.power(x, y)",
       "2.0 * x if y == 2.0 else (0.0 if y == 0.0 else y * x ** (y - 1.0))",
       "0.0 * (out * out) if (x == 0.0 and y >= 0.0) else out * log(x)",
       # PyTorch's pow_backward_exponent: grad * where(cond, 0, result * log(x)) (the zero is
       # a constant: the branch not taken passes nothing back to the result); in the sweep a
       # computed +0. (times an infinite gradient: NaN, as there), whatever the sign of
       # out = (-0.) ** y
       gy="g * (0.0 if (x == 0.0 and y >= 0.0) else out * log(x))",
       node="PowBackward1", dunder="pow", node_c="PowBackward0", saved_for_tensor="y",
       node_r="PowBackward2", int_result=True, domain=((0.3, 2.0), (-2.0, 2.0)),
       params="input, exponent"),
    # atan2(x, y) = angle of (y, x): d/dx = y/(x^2+y^2) ; d/dy = -x/(x^2+y^2)
    # (where x^2+y^2 is 0 -- the origin, or both tiny -- PyTorch's partials are computed
    # zeros, not masks: times an infinite gradient they give NaN, and a create_graph
    # gradient depends on x and y)
    Op("atan2", 2, "math.atan2(x, y)", "np.arctan2(x, y)",
       "0.0 * y if x * x + y * y == 0.0 else y / (x * x + y * y)",
       "-0.0 * x if x * x + y * y == 0.0 else -x / (x * x + y * y)",
       # PyTorch: recip = (x*x + y*y).reciprocal().masked_fill_(x*x + y*y == 0, 0), computed
       # once for both inputs
       gx="g * y * (recip := (0.0 if x * x + y * y == 0.0 else reciprocal(x * x + y * y)))",
       gy="g * -x * (recip := (0.0 if x * x + y * y == 0.0 else reciprocal(x * x + y * y)))",
       node="Atan2Backward0",
       domain=((0.3, 2.0), (0.3, 2.0))),
    # ties split the gradient evenly, as PyTorch's maximum/minimum; a tie returns x (so
    # maximum(-0., 0.) is -0.) and NaN propagates from either side, as PyTorch
    Op("maximum", 2, "x if (x >= y or x != x) else y", "np.where((x >= y) | (x != x), x, y)",
       "0.0 if x < y else (0.5 if x == y else 1.0)",
       "0.0 if y < x else (0.5 if x == y else 1.0)", node="MaximumBackward0", int_result=True,
       domain=B2),
    Op("minimum", 2, "x if (x <= y or x != x) else y", "np.where((x <= y) | (x != x), x, y)",
       "0.0 if x > y else (0.5 if x == y else 1.0)",
       "0.0 if y > x else (0.5 if x == y else 1.0)", node="MinimumBackward0", int_result=True,
       domain=B2),
    # unary ---------------------------------------------------------------------------
    Op("neg", 1, "-x", "np.negative(x)", "-1.0", gx="-g", node="NegBackward0", dunder="neg",
       int_result=True),
    Op("abs", 1, "abs(x)", "np.abs(x)", "sign(x)", gx="g * sgn(x)", node="AbsBackward0",
       dunder="abs", int_result=True),  # abs'(0) = 0
    Op("exp", 1, "math.exp(x)", "np.exp(x)", "out", node="ExpBackward0"),
    Op("log", 1, "math.log(x)", "np.log(x)", "1.0 / x", gx="g / x", node="LogBackward0",
       domain=POS),
    Op("log1p", 1, "math.log1p(x)", "np.log1p(x)", "1.0 / (1.0 + x)", gx="g / (x + 1.0)",
       node="Log1PBackward0",
       domain=((-0.8, 2.0),)),
    Op("expm1", 1, "math.expm1(x)", "np.expm1(x)", "out + 1.0", node="Expm1Backward0"),
    # sqrt'(0) = inf, as PyTorch
    Op("sqrt", 1, "math.sqrt(x)", "np.sqrt(x)", "0.5 / out", gx="g / (2.0 * out)",
       node="SqrtBackward0", domain=POS),
    Op("sin", 1, "math.sin(x)", "np.sin(x)", "cos(x)", node="SinBackward0"),
    Op("cos", 1, "math.cos(x)", "np.cos(x)", "-sin(x)", node="CosBackward0"),
    Op("tan", 1, "math.tan(x)", "np.tan(x)", "1.0 + out * out", gx="g * (1.0 + out ** 2.0)",
       node="TanBackward0",
       domain=((-1.2, 1.2),)),
    Op("asin", 1, "math.asin(x)", "np.arcsin(x)", "1.0 / sqrt(1.0 - x * x)",
       node="AsinBackward0", domain=UNIT),
    Op("acos", 1, "math.acos(x)", "np.arccos(x)", "-1.0 / sqrt(1.0 - x * x)",
       node="AcosBackward0", domain=UNIT),
    Op("atan", 1, "math.atan(x)", "np.arctan(x)", "1.0 / (1.0 + x * x)", gx="g / (x * x + 1.0)",
       node="AtanBackward0"),
    Op("sinh", 1, "math.sinh(x)", "np.sinh(x)", "cosh(x)", node="SinhBackward0"),
    Op("cosh", 1, "math.cosh(x)", "np.cosh(x)", "sinh(x)", node="CoshBackward0"),
    Op("tanh", 1, "math.tanh(x)", "np.tanh(x)", "1.0 - out * out", gx="tanh_backward(g, out)",
       node="TanhBackward0"),
    # fused: sigma' = sigma (1 - sigma), stable for large |x|
    Op("sigmoid", 1, "1.0 / (1.0 + math.exp(-x))", "sigmoid_array(x)",   # (core/array_forward.py)
       "out * (1.0 - out)", gx="sigmoid_backward(g, out)", node="SigmoidBackward0",
       domain=((-4.0, 4.0),)),
    # relu(-0.) = -0., relu(nan) = nan, relu'(0) = 0, relu'(nan) = 1, as PyTorch; its backward
    # (threshold_backward) reads x, so a create_graph gradient through it requires grad
    Op("relu", 1, "0.0 if x < 0.0 else x", "np.where(x < 0.0, 0.0, x)",
       "0.0 if out <= 0.0 else 1.0", gx="threshold_backward(g, out)", node="ReluBackward0",
       int_result=True),
    # erf' = 2/sqrt(pi) exp(-x^2)
    Op("erf", 1, "math.erf(x)", "erf_array(x)", "1.1283791670955126 * exp(-x * x)",
       gx="1.1283791670955126 * exp(-(x ** 2.0)) * g", node="ErfBackward0"),
    # piecewise constant: zero gradient almost everywhere, as PyTorch; sign(nan) = sign(-0.) = 0.
    # and the roundings keep the sign of x (ceil(-0.2) = -0.), as PyTorch
    Op("sign", 1, "1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)",
       "(x > 0.0) * 1.0 - (x < 0.0) * 1.0", "0.0", node="SignBackward0", int_result=True),
    Op("round", 1, "math.copysign(float(round(x)), x)", "np.round(x)", "0.0",
       node="RoundBackward0", int_result=True, keyword="decimals"),
    Op("floor", 1, "math.copysign(float(math.floor(x)), x)", "np.floor(x)", "0.0",
       node="FloorBackward0", int_result=True),
    Op("ceil", 1, "math.copysign(float(math.ceil(x)), x)", "np.ceil(x)", "0.0",
       node="CeilBackward0", int_result=True),
    Op("trunc", 1, "math.copysign(float(math.trunc(x)), x)", "np.trunc(x)", "0.0",
       node="TruncBackward0", int_result=True),
    # comparisons: bool results that never require grad; recorded (value 0/1) when an
    # operand is recorded, so that replay can re-evaluate them (guards, where's condition)
    Op("lt", 2, "1.0 if x < y else 0.0", "np.less(x, y)", "0.0", "0.0", compare=True, domain=B2),
    Op("le", 2, "1.0 if x <= y else 0.0", "np.less_equal(x, y)", "0.0", "0.0", compare=True,
       domain=B2),
    Op("gt", 2, "1.0 if x > y else 0.0", "np.greater(x, y)", "0.0", "0.0", compare=True,
       domain=B2),
    Op("ge", 2, "1.0 if x >= y else 0.0", "np.greater_equal(x, y)", "0.0", "0.0", compare=True,
       domain=B2),
    Op("eq", 2, "1.0 if x == y else 0.0", "np.equal(x, y)", "0.0", "0.0", compare=True,
       domain=B2),
    Op("ne", 2, "1.0 if x != y else 0.0", "np.not_equal(x, y)", "0.0", "0.0", compare=True,
       domain=B2),
    # ternary -------------------------------------------------------------------------
    # clamp(x, lo, hi): inclusive at both bounds; NaN in any input gives NaN; hi wins when
    # lo > hi, and with lo == hi only x (inside) or hi (above) gets the gradient: PyTorch's
    # clamp_backward_min_max
    Op("clamp", 3,
       "math.nan if (x != x or y != y or z != z) else "
       "(z if (y if x < y else x) > z else (y if x < y else x))",
       "np.where((x != x) | (y != y) | (z != z), np.nan, "
       "np.where(np.where(x < y, y, x) > z, z, np.where(x < y, y, x)))",
       "1.0 if (x >= y and x <= z) else 0.0",
       "1.0 if (x < y and y < z) else 0.0",
       "1.0 if (x > z or z < y) else 0.0",
       node="ClampBackward1", int_result=True, method=False,   # (the method: PyTorch's overloads)
       sig="input, min=None, max=None",
       call="input, -math.inf if min is None else min, math.inf if max is None else max", domain=((-2.0, 2.0), (-1.0, -1.0), (1.0, 1.0))),
    # where(cond, a, b): cond is not differentiable
    Op("where", 3, "y if x != 0.0 else z", "np.where(x, y, z)", "0.0",
       "1.0 if x != 0.0 else 0.0", "0.0 if x != 0.0 else 1.0",
       node="WhereBackward0", int_result=True, sig="condition, input, other", call="condition, input, other", domain=((0.0, 1.0), (-2.0, 2.0), (-2.0, 2.0)), method=False),
    # new rows go here, at the end: an opcode is a row's position, and saved tapes keep them
    # d/dx 1/x = -1/x^2 = -out^2 ; ``number / tensor`` records as reciprocal then mul, as PyTorch
    Op("reciprocal", 1, "1.0 / x", "np.reciprocal(x)", "-out * out", gx="-g * (out * out)",
       node="ReciprocalBackward0",
       domain=((0.3, 2.0),)),
    Op("clone", 1, "x", "np.copy(x)", "1.0", node="CloneBackward0", int_result=True,
       keyword="memory_format"),
    # PyTorch's fused backward ops, recorded by the create_graph rules above (x: the incoming
    # gradient, y: the saved value); their partials are PyTorch's double-backward formulas
    # sigmoid_backward(g, s) = g (1 - s) s: d/dg = (1 - s) s ; d/ds = g (1 - 2 s)
    Op("sigmoid_backward", 2, "x * (1.0 - y) * y", "x * (1.0 - y) * y", "(1.0 - y) * y",
       "x * (-2.0 * y + 1.0)", gx="sigmoid_backward(g, y)", gy="g * x * (-2.0 * y + 1.0)",
       node="SigmoidBackwardBackward0", backward_of="sigmoid", method=False,
       domain=((-2.0, 2.0), (0.05, 0.95))),
    # tanh_backward(g, t) = g (1 - t^2): d/dg = 1 - t^2 ; d/dt = -2 t g
    Op("tanh_backward", 2, "x * (1.0 - y * y)", "x * (1.0 - y * y)", "1.0 - y * y",
       "-2.0 * y * x", gx="tanh_backward(g, y)", gy="g * (-2.0 * y * x)",
       node="TanhBackwardBackward0", backward_of="tanh", method=False,
       domain=((-2.0, 2.0), (-0.9, 0.9))),
    # threshold_backward(g, x) = 0 where x <= 0 else g (relu's, threshold 0): d/dg is the
    # same mask ; d/dx = 0 everywhere (PyTorch: zeros_like(grad))
    Op("threshold_backward", 2, "0.0 if y <= 0.0 else x", "np.where(y <= 0.0, 0.0, x)",
       "0.0 if y <= 0.0 else 1.0", "0.0", gx="threshold_backward(g, y)",
       node="ThresholdBackwardBackward0", backward_of="relu", method=False, domain=B2),
    # ... and those of the activations and losses of ``ops/nn_ops.py`` (z: a number parameter)
    # leaky_relu_backward(g, x, slope) = g where x > 0 else g slope ; d/dx = 0 (zeros_like)
    Op("leaky_relu_backward", 3, "x if y > 0.0 else x * z", "np.where(y > 0.0, x, x * z)",
       "1.0 if y > 0.0 else z", "0.0", "0.0", gx="leaky_relu_backward(g, y, z)",
       node="LeakyReluBackwardBackward0", backward_of="leaky_relu", method=False,
       sig="grad_output, input, negative_slope", call="grad_output, input, negative_slope",
       domain=((-2.0, 2.0), (-2.0, 2.0), (0.01, 0.01))),
    # elu_backward(g, x, alpha) = g alpha exp(x) where x <= 0 else g ; d/dx: PyTorch's
    # elu_double_backward, elu_backward(grad g, x, alpha) * (x < 0): a product, NaN stays NaN
    Op("elu_backward", 3, "x * z * math.exp(y) if y <= 0.0 else x",
       "np.where(y <= 0.0, x * z * np.exp(np.minimum(y, 0.0)), x)",
       "z * exp(y) if y <= 0.0 else 1.0",
       "(x * z * exp(y) if y <= 0.0 else x) * (1.0 if y < 0.0 else 0.0)", "0.0",
       gx="elu_backward(g, y, z)", gy="elu_backward(g * x, y, z) * (1.0 if y < 0.0 else 0.0)",
       node="EluBackwardBackward0", backward_of="elu", method=False,
       sig="grad_output, input, alpha", call="grad_output, input, alpha",
       domain=((-2.0, 2.0), (-2.0, 2.0), (1.0, 1.0))),
    # gelu_backward(g, x) = g (Phi(x) + x phi(x)) ; d/dx = g (2 phi(x) - x^2 phi(x))
    Op("gelu_backward", 2,
       "x * (0.5 * (1.0 + math.erf(y * 0.7071067811865476))"
       " + y * (0.3989422804014327 * math.exp(y * y * -0.5)))",
       "x * (0.5 * (1.0 + erf_array(y * 0.7071067811865476))"
       " + y * (0.3989422804014327 * np.exp(y * y * -0.5)))",
       "0.5 * (1.0 + erf(y * 0.7071067811865476)) + y * (0.3989422804014327 * exp(y * y * -0.5))",
       "x * (2.0 * (0.3989422804014327 * exp(-0.5 * (y * y)))"
       " - y * y * (0.3989422804014327 * exp(-0.5 * (y * y))))",
       gx="gelu_backward(g, y)",
       gy="g * x * (2.0 * (pdf := 0.3989422804014327 * exp(-0.5 * (sq := y * y))) - sq * pdf)",
       node="GeluBackwardBackward0", backward_of="gelu", method=False, domain=B2),
    # softplus_backward(g, bx, threshold), bx = beta x: g where bx > threshold, else
    # g e / (e + 1), e = exp(bx) ; d/dbx: PyTorch's softplus_double_backward,
    # sigmoid_backward(g, sigmoid(bx)) (bx < threshold) (its factor beta: the rule's bx = x beta)
    Op("softplus_backward", 3, "x if y > z else x * math.exp(y) / (math.exp(y) + 1.0)",
       "np.where(y > z, x, x * np.exp(np.minimum(y, z)) / (np.exp(np.minimum(y, z)) + 1.0))",
       "1.0 if y > z else exp(y) / (exp(y) + 1.0)",
       "x * (1.0 - 1.0 / (1.0 + exp(-y))) * (1.0 / (1.0 + exp(-y))) * (1.0 if y < z else 0.0)",
       "0.0", gx="softplus_backward(g, y, z)",
       gy="sigmoid_backward(g * x, sigmoid(y)) * (1.0 if y < z else 0.0)",
       node="SoftplusBackwardBackward0", backward_of="softplus", method=False,
       sig="grad_output, input, threshold", call="grad_output, input, threshold",
       domain=((-2.0, 2.0), (-2.0, 2.0), (20.0, 20.0))),
    # mse_loss_backward(g, x, t) = 2 (x - t) g ; double backward: 2 (grad g) for x, minus that
    # for t (for t itself, PyTorch's rule swaps the two: mse_loss_backward(g, t, x))
    Op("mse_loss_backward", 3, "2.0 * (y - z) * x", "2.0 * (y - z) * x", "2.0 * (y - z)",
       "2.0 * x", "-2.0 * x", gx="mse_loss_backward(g, y, z)", gy="2.0 * (g * x)",
       gz="-(2.0 * (g * x))", node="MseLossBackwardBackward0", backward_of="mse_loss",
       method=False, sig="grad_output, input, target", call="grad_output, input, target",
       domain=((-2.0, 2.0), (-2.0, 2.0), (-2.0, 2.0))),
    # binary_cross_entropy_backward(g, x, t) = g (x - t) / max(x (1 - x), eps), eps the float32
    # 1e-12 of PyTorch's kernel; its double-backward formulas (eps = 1e-12 there) for g, x, t
    Op("binary_cross_entropy_backward", 3,
       "x * (y - z) / max((1.0 - y) * y, 9.999999960041972e-13)",
       "x * (y - z) / np.maximum((1.0 - y) * y, 9.999999960041972e-13)",
       "(y - z) / ((y + 1e-12) * (1.0 - y + 1e-12))",
       "(y * y - 2.0 * y * z + z) / ((y + 1e-12) ** 2.0 * (1.0 - y + 1e-12) ** 2.0) * x",
       "-x / max((1.0 - y) * y, 1e-12)",
       gx="(y - z) / ((y + 1e-12) * (1.0 - y + 1e-12)) * g",
       gy="(y * y - 2.0 * y * z + z) / ((y + 1e-12) ** 2.0 * (1.0 - y + 1e-12) ** 2.0) * (g * x)",
       gz="-g * x / maximum((1.0 - y) * y, 1e-12)",
       node="BinaryCrossEntropyBackwardBackward0", backward_of="binary_cross_entropy",
       method=False, sig="grad_output, input, target", call="grad_output, input, target",
       domain=((-2.0, 2.0), (0.2, 0.8), (0.0, 1.0))),
    # smooth_l1_backward(g, d, beta), d = input - target: -g for d <= -beta, g for d >= beta,
    # g d / beta between ; d/dd: PyTorch's smooth_l1_loss_double_backward, g (|d| < beta) / beta
    Op("smooth_l1_backward", 3, "-x if y <= -z else (x if y >= z else y * x / z)",
       "np.where(y <= -z, -x, np.where(y >= z, x, y * x / z))",
       "-1.0 if y <= -z else (1.0 if y >= z else y / z)",
       "x * (1.0 if (y < z and -y < z) else 0.0) / z", "0.0",
       gx="smooth_l1_backward(g, y, z)", gy="g * x * (1.0 if (y < z and -y < z) else 0.0) / z",
       node="SmoothL1LossBackwardBackward0", backward_of="smooth_l1_loss", method=False,
       sig="grad_output, difference, beta", call="grad_output, difference, beta",
       domain=((-2.0, 2.0), (-2.0, 2.0), (0.5, 0.5))),
    # sgn: sign, whose derivative is PyTorch's efficient zero tensor (abs's rule uses it)
    Op("sgn", 1, "1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)",
       "(x > 0.0) * 1.0 - (x < 0.0) * 1.0", "0.0", node="SgnBackward0", int_result=True,
       efficient_zero=True, saves="x out"),
    # clamp with one bound (``clamp_min``, ``clamp_max``): PyTorch's own nodes, 0 for a number
    # bound, 1 for a tensor; x keeps the gradient at a tie, the bound takes it where it wins
    # (rows appended: a saved compiled tape's opcodes stay those of the rows above)
    Op("clamp_min", 2, "math.nan if (x != x or y != y) else (y if x < y else x)",
       "np.where((x != x) | (y != y), np.nan, np.where(x < y, y, x))",
       "1.0 if x >= y else 0.0", "1.0 if x < y else 0.0",
       node="ClampMinBackward1", node_c="ClampMinBackward0", int_result=True, method=False,
       params="input, min", domain=B2),
    Op("clamp_max", 2, "math.nan if (x != x or y != y) else (y if x > y else x)",
       "np.where((x != x) | (y != y), np.nan, np.where(x > y, y, x))",
       "1.0 if x <= y else 0.0", "1.0 if x > y else 0.0",
       node="ClampMaxBackward1", node_c="ClampMaxBackward0", int_result=True, method=False,
       params="input, max", domain=B2),
    # clamp(x, min=t) with a tensor t and no max: PyTorch's clamp.Tensor node (ClampBackward0,
    # an edge per bound, None for the max) with clamp_backward_min_max's rule for an absent
    # max: t takes the gradient where x < t, at t = +inf too.  (The clamp row records an
    # absent max as +inf, and its partial for min, ``x < min and min < max``, is the rule with
    # a max: with t = +inf it gave 0.  The max here is that +inf, which no partial reads.)
    Op("clamp_no_max", 3, "math.nan if (x != x or y != y) else (y if x < y else x)",
       "np.where((x != x) | (y != y), np.nan, np.where(x < y, y, x))",
       "1.0 if x >= y else 0.0", "1.0 if x < y else 0.0", "0.0",
       node="ClampBackward0", int_result=True, method=False, internal=True,
       sig="input, min, max=math.inf", call="input, min, max", domain=((-2.0, 2.0), (-1.0, -1.0), (1.0, 1.0))),
    # 2 ** x: a row of its own, not pow(2.0, x), because PyTorch's Exp2Backward0 saves the
    # result (grad * result * ln 2): changing x in place after it does not spoil it
    Op("exp2", 1, "2.0 ** x", "np.exp2(x)", "out * 0.6931471805599453",
       gx="g * out * 0.6931471805599453", node="Exp2Backward0"),
)

# Structural opcodes follow the elementwise ones; the sweep treats them specially.
STRUCTURAL = (
    "leaf",    # a leaf tensor registered on this tape (gradient goes to .grad)
    "link",    # a non-leaf tensor of another tape (gradient continues there)
    "const",   # an array constant (no gradient)
    "arg",     # extra operands of a ternary op (a, b hold its 2nd and 3rd inputs)
    "pyfunc",  # head of an op whose backward runs in Python (custom Function, expand, ...)
    "pyout",   # one output of a pyfunc (a holds the head)
)



def saved_inputs(op: Op) -> Tuple[bool, bool, bool, bool]:
    """Which of (x, y, z, out) the op's backward reads: derived from its partials (and
    ``saves``).  (A
    ``g*`` rule may read others, as div's ``x``: the tape keeps every entry's value, and the
    in-place checks stay those of the sweep, so ``x / 2.0`` does not save ``x``.)"""
    import re

    text = " ".join(f for f in (op.dx, op.dy, op.dz, op.saves) if f)
    return tuple(bool(re.search(r"\b%s\b" % n, text)) for n in ("x", "y", "z", "out"))
