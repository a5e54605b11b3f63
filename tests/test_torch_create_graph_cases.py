"""create_graph=True corner cases where PyTorch is the spec: each case runs on tapegrad and,
where installed, on PyTorch, and both must give the values written out here (so the test
runs everywhere).

- a zero partial still passes a zero gradient on: ``zeros_like(grad)`` for piecewise
  constant ops (it does not require grad), ``where(mask, grad, 0)`` for masks (it keeps the
  graph), and the ops below multiply it as usual (``exp``'s rule gives a gradient that
  requires grad; an infinite partial makes it NaN);
- a branch of a rule is PyTorch's ``where`` also on one element, so a second backward sends
  the branch not taken zeros (``x ** y`` and ``atan2`` at 0 give NaN there); a condition on
  a Python number is a plain branch (``x ** 0.0`` is ``zeros_like``, ``x ** tensor(0.)`` is
  not);
- partials on Python-number operands follow IEEE (``x / 0.0``, ``0.0 ** x``);
- cumprod and prod with zeros and infinities: PyTorch's rules (the O(n^2) one under grad
  mode, the O(n) one without), a dim of size 1 passes the gradient as it is;
- elu: 1 at NaN, and its second derivative times (x < 0) as PyTorch's;
- each rule records PyTorch's formula, structure included (differentiated again, ``g / y``
  and ``g * (1 / y)`` give different NaNs and signed zeros): the fused backward ops
  (``sigmoid_backward``, ``tanh_backward``, ``threshold_backward`` for relu,
  ``leaky_relu_backward``, ``elu_backward``, ``gelu_backward``, ``softplus_backward``,
  ``smooth_l1_loss_backward``, ``mse_loss_backward``, ``binary_cross_entropy_backward``)
  with their
  double-backward formulas and node names (and bce's first derivatives: PyTorch's kernel
  clamps x (1 - x) at float32's 1e-12, the target's is -logit(x); with logits,
  ``(sigmoid(x) - y) * grad``), atan2's
  masked reciprocal, div's ``-grad * ((x / y) / y)``, pow's ``where`` with a constant zero,
  ``x ** 2`` as ``2 * x ** 1``.
"""
import math

import pytest

import tapegrad as tg

try:
    import torch
except ImportError:   # the PyTorch half of each test skips
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

nan, inf = math.nan, math.inf


def _tensor(L):
    def make(v, requires_grad=True):
        return L.tensor(v, dtype=L.float64, requires_grad=requires_grad)
    return make


def _grad(L, y, x, **kw):
    return L.autograd.grad(y, x, **kw)[0]


def round_flows(L, T):
    x = T(-0.656)
    g = _grad(L, x.exp().round(), x, create_graph=True)
    g.backward()
    return g.item(), g.requires_grad, x.grad.item()


def sign_gives_zeros_like(L, T):
    x = T(3.0)
    s = x.sign()
    g = _grad(L, s + s ** math.inf, x, create_graph=True)
    return g.item(), g.requires_grad


def divide_by_zero(L, T):
    x = T(1.5)
    return _grad(L, x / 0.0, x, create_graph=True).item(), \
        _grad(L, x / -0.0, x, create_graph=True).item()


def zero_to_the_x(L, T):
    x = T(1.286)
    g = _grad(L, 0.0 ** x, x, create_graph=True)
    return g.item(), g.requires_grad


def pow_zero_number_and_tensor(L, T):
    x = T(-1.793)
    a = _grad(L, x ** 0.0, x, create_graph=True)
    b = _grad(L, x ** T(0.0, False), x, create_graph=True)
    return a.item(), a.requires_grad, b.item(), b.requires_grad


def pow_zero_zero_second(L, T):
    x = T(1.343)
    d = x - x
    g = _grad(L, x + d ** d, x, create_graph=True)
    g.backward()
    return g.item(), x.grad.item()


def pow_number_zero_second(L, T):
    x = T(0.954)
    d = x - x
    g = _grad(L, d + (d * d) ** 0.0, x, create_graph=True)
    return _grad(L, g, x).item()


def atan2_origin_second(L, T):
    x = T(-0.0)
    a = L.atan2(x, x)
    g = _grad(L, L.where(a < x, x, a), x, create_graph=True)
    return g.item(), _grad(L, g, x).item()


def where_masked_chain(L, T):
    x, c = T(1.431), T(0.0, False)
    w = L.where(c >= c, c, x)
    w = L.where(c <= -0.5, w, w)
    g = _grad(L, L.pow(w, 1.278), x, create_graph=True)
    g.backward()
    return g.item(), g.requires_grad, x.grad.item()


def cumprod_dim_of_one(L, T):
    x = T([[1.175], [-1.0]])
    g = _grad(L, x.cumprod(1).sum(), x, create_graph=True)
    return g.tolist(), g.requires_grad


CUMPROD_INF = [[0.459, -1.0, 1.527, 0.432], [-0.658, inf, -1.697, 0.778],
               [0.0, 3.0, -0.431, -0.577]]


def cumprod_inf_create_graph(L, T):
    x = T(CUMPROD_INF)
    return _grad(L, L.cumprod(x, -1).sum(), x, create_graph=True).tolist()


def cumprod_inf_floats(L, T):   # PyTorch's rule without grad mode differs from the one with
    x = T(CUMPROD_INF)
    L.cumprod(x, -1).sum().backward()
    return x.grad.tolist()


def cumprod_zeros_floats(L, T):
    x = T([[0.0, 2.0, 0.0, 3.0, 0.5], [1.5, 0.0, 2.0, 0.0, -1.0]])
    L.cumprod(x, 1).sum().backward()
    return x.grad.tolist()


def prod_zero_nan_inf_second(L, T):
    x = T([[0.0, nan], [-1.113, 1.559], [2.0, -1.0], [-inf, 1.079]])
    g = _grad(L, x.prod(-2, keepdim=True).sum(), x, create_graph=True)
    return g.tolist(), _grad(L, g.sum(), x).tolist()


def prod_one_zero_element(L, T):   # one element: the gradient as it is (its view)
    x = T([[-0.0]])
    g = _grad(L, x.prod(), x, create_graph=True)
    return g.tolist(), g.requires_grad


def prod_two_zeros(L, T):
    x = T([0.0, 2.0, 0.0])
    x.prod().backward()
    return x.grad.tolist()


def pow_tensor_two_second(L, T):   # the sweep's x ** 2 shortcut is not a rule in y
    x, y = T(1.5), T(2.0)
    g = _grad(L, x ** y, x, create_graph=True)
    return g.item(), [h.item() for h in L.autograd.grad(g, [x, y])]


def atan2_underflow(L, T):   # x^2 + y^2 == 0 with x, y != 0: computed zeros, as at the origin
    out = []
    for create_graph, seed in ((False, inf), (False, 1.0), (True, 1.0)):
        x, y = T(1e-300), T(1e-300)
        gx, gy = L.autograd.grad(L.atan2(x, y), [x, y], grad_outputs=T(seed, False),
                                 create_graph=create_graph)
        out += [gx.item(), gy.item()]
    return out


def elu_at_zero_nan_inf(L, T):   # 1 at NaN; elu_double_backward multiplies by (x < 0)
    x = T([inf, 0.0, -0.0, nan, -1.0, 2.0])
    g = _grad(L, L.nn.functional.elu(x).sum(), x, create_graph=True)
    h = _grad(L, (g * T([1.0, inf, -0.889, 1.0, 2.0, 1.0], False)).sum(), x)
    return g.tolist(), h.tolist()


# -- each op's recorded backward is PyTorch's formula, structure included --------------------

def _second(L, T, f, x0, w1, w2):
    """The first and second derivative of ``f`` at ``x0`` (list), weighted by ``w1``, ``w2``."""
    x = T(x0)
    g = _grad(L, (f(x) * T(w1, False)).sum(), x, create_graph=True)
    return g.tolist(), _grad(L, (g * T(w2, False)).sum(), x).tolist()


def _node(g):
    return type(g.grad_fn).__name__


def sigmoid_backward_node(L, T):   # sigmoid_backward(grad, result): its own double backward
    x = T([-1.652, -0.0])
    g = _grad(L, x.sigmoid().sum(), x, create_graph=True)
    return _node(g), _grad(L, (g * T([-0.0, -0.636], False)).sum(), x).tolist()


def tanh_backward_second(L, T):   # tanh_backward(grad, result)
    x = T([-0.0, inf, 0.5, -inf])
    g = _grad(L, (x.tanh() * T([1.0, 1.0, -0.0, 1.0], False)).sum(), x, create_graph=True)
    return _node(g), _grad(L, (g * T([-0.5, inf, 1.0, -0.0], False)).sum(), x).tolist()


def relu_threshold_backward(L, T):   # threshold_backward(grad, result, 0): a -0 passes as -0,
    x = T([1.367, -0.18, nan, 0.0])  # and the second derivative (zeros) depends on x
    g = _grad(L, (L.relu(x) * T([-0.0, 0.5, 0.5, 2.0], False)).sum(), x, create_graph=True)
    h = _grad(L, (g * T([inf, 1.0, 1.0, nan], False)).sum(), x, create_graph=True)
    return _node(g), g.tolist(), h.requires_grad, h.tolist()


def leaky_relu_second(L, T):   # leaky_relu_backward: a -0 incoming gradient stays -0
    return _second(L, T, L.nn.functional.leaky_relu, [0.547, -0.32, 0.0, nan],
                   [-0.0, 1.758, inf, -0.0], [inf, -0.0, 1.0, 1.0])


def elu_second(L, T):   # elu_backward(grad * g, x) * (x < 0)
    return _second(L, T, L.nn.functional.elu, [-inf, -1.0, -0.0, 0.5, inf, nan],
                   [inf, -0.0, 1.0, inf, 1.0, 1.0], [1.0, inf, inf, -0.0, -0.0, 1.0])


def gelu_second_third(L, T):   # gelu_double_backward, input * input computed once
    x = T([-0.046, 0.0, nan, -inf, 1.5])
    g = _grad(L, (L.nn.functional.gelu(x) * T([-0.0, 1.0, 1.861, 1.0, inf], False)).sum(), x,
              create_graph=True)
    h = _grad(L, g.sum(), x, create_graph=True)
    return _node(g), h.tolist(), _grad(L, h.sum(), x).tolist()


def softplus_at_inf(L, T):   # sigmoid_backward(grad * g, sigmoid(x)) * (x < threshold)
    return _second(L, T, L.nn.functional.softplus, [inf, 25.0, -inf, 0.5],
                   [1.0, 1.0, 1.0, -0.0], [inf, nan, -0.0, 1.0])


def smooth_l1_at_beta(L, T):   # |x - y| == beta: outside, as PyTorch's (|d| < beta) / beta
    x, y = T([0.5, -0.5, inf, 0.2]), T([1.0, 0.0, 0.5, 0.2])
    gx, gy = L.autograd.grad(L.nn.functional.smooth_l1_loss(x, y, beta=0.5), [x, y],
                             create_graph=True)
    w = T([-1.713, -0.0, inf, -0.0], False)
    return gx.tolist(), gy.tolist(), [h.tolist() for h in L.autograd.grad((gx * w).sum(), [x, y])]


def atan2_reciprocal(L, T):   # grad * other * (x*x + y*y).reciprocal(), masked at the origin
    x, y = T([-0.0, 0.0, 1e-300, 2.0]), T([1.0, 0.0, 1e-300, -0.0])
    gx, gy = L.autograd.grad(L.atan2(x, y).sum(), [x, y], create_graph=True)
    return [h.tolist() for h in L.autograd.grad((gx * T([-0.0, 1.0, 1.0, inf], False)).sum(),
                                                 [x, y])]


def quotients_third(L, T):   # grad / other, -grad * ((x / y) / y), grad / (2 * result), ...
    out = []
    for f, x0, w1, w2 in ((lambda x: 1.5 / x, -1e-300, -0.0, -0.0), (lambda x: x.sqrt(), 1e-300, 1.0, 0.0),
                          (lambda x: x.log(), -1e-300, -0.0, 1.0), (lambda x: x.atan(), inf, 1.0, inf),
                          (lambda x: x.reciprocal(), 1e-300, inf, 1.0), (lambda x: x.tan(), -0.0, 1.0, -0.0)):
        x = T([x0])
        g = _grad(L, (f(x) * T([w1], False)).sum(), x, create_graph=True)
        h = _grad(L, (g * T([w2], False)).sum(), x, create_graph=True)
        out.append((g.item(), h.item(), _grad(L, (h * T([w2], False)).sum(), x).item()))
    return out


def pow_two_third(L, T):   # x ** 2 records 2 * x ** 1: its third derivative exists (zeros)
    x = T([1.5, -0.0])
    g = _grad(L, (x ** 2.0).sum(), x, create_graph=True)
    h = _grad(L, g.sum(), x, create_graph=True)
    return h.tolist(), h.requires_grad, _grad(L, h.sum(), x).tolist()


def pow_exponent_where(L, T):   # grad * where(cond, 0, result * log(x)): nothing flows back
    x = T([-inf, -3.0, 3.0])    # to the result from the zero
    g = _grad(L, (2.0 ** x).sum(), x, create_graph=True)
    a = _grad(L, (g * T([-0.0, inf, 1.0], False)).sum(), x).tolist()
    x = T([3.0, 0.0])
    g = _grad(L, ((x ** x) * T([inf, 1.0], False)).sum(), x, create_graph=True)
    return a, _grad(L, (g * T([-0.0, 1.0], False)).sum(), x).tolist()



def bce_eps_and_logit(L, T):   # PyTorch's kernel clamps x (1 - x) at float32's 1e-12; the
    x, t = T([0.0, 0.2, 1.0]), T([0.3, 0.5, 0.5])   # target's gradient is -logit(x)
    gx, gt = L.autograd.grad(L.nn.functional.binary_cross_entropy(x, t, reduction="sum"), [x, t],
                             create_graph=True)
    hx, ht = L.autograd.grad((gx * T([1.0, -inf, -0.0], False)).sum(), [x, t])
    return gx.tolist(), gt.tolist(), hx.tolist(), ht.tolist()


def bce_with_logits_third(L, T):   # (sigmoid(x) - y) * grad, as PyTorch writes it
    x = T([-1e-300, 2.0, -inf])
    g = _grad(L, L.nn.functional.binary_cross_entropy_with_logits(x, T([0.3, 0.3, 0.3], False)),
              x, create_graph=True)
    h = _grad(L, g.sum(), x, create_graph=True)
    return g.tolist(), h.tolist(), _grad(L, h.sum(), x).tolist()


def div_fresh_quotient(L, T):   # -grad * ((x / y) / y): a division of its own, whose parts
    x, y = T(-0.5), T(-1.471)     # do not add up with those reaching x / y
    q = x / y
    g = _grad(L, q * y, y, create_graph=True)
    return [h.item() for h in L.autograd.grad(g, [x, y])]


def mse_loss_backward_target(L, T):   # mse_loss_backward(grad, t, x) for the target
    x, y = T([-0.0, 0.5, inf]), T([0.5, -0.0, -1.5])
    gx, gy = L.autograd.grad((L.nn.functional.mse_loss(x, y, reduction="none")
                              * T([-inf, 1.0, -0.0], False)).sum(), [x, y], create_graph=True)
    return [h.tolist() for h in L.autograd.grad((gx + gy * T([-0.0, 3.0, 1.0], False)).sum(),
                                                 [x, y])]

def norm_at_zero_second(L, T):   # (x / |x|).masked_fill(|x| == 0, 0): 0/0 at second order
    x = T([[-0.0, 3.0], [0.0, 4.0]])
    g = _grad(L, x.norm(dim=0).sum(), x, create_graph=True)
    return g.tolist(), _grad(L, g.sum(), x).tolist()


def var_without_dof(L, T):   # g * where(x == mean, nan, inf): constants, no graph
    x = T([0.5])
    g = _grad(L, x.var(), x, create_graph=True)
    return g.tolist(), g.requires_grad


def cumsum_dim_of_one_sign(L, T):   # cumsum_backward passes g as it is: -0. stays -0.
    x = T([[-0.965, 3.0]])
    g = _grad(L, (L.cumsum(x, 0) * L.tensor([[-0.0, 2.0]], dtype=L.float64)).sum(), x,
              create_graph=True)
    return g.tolist()


def cumprod_underflow_sign(L, T):   # a product that underflows to -0. beside a zero input
    x = T([[-1.649, 2.0, 1e-300, 1e-300], [1.0, 0.0, 2.0, 3.0]])
    L.cumprod(x, 1).sum().backward()
    return x.grad.tolist()


def clamp_number_overload(L, T):   # a 0-d tensor bound beside a number: ClampBackward1
    x = T([0.5, -1.0])
    y = x.clamp(min=L.tensor(0.0, dtype=L.float64), max=inf)
    return y.grad_fn.name(), len(y.grad_fn.next_functions)


def test_clamp_tensor_bound_beside_a_number():
    """A deviation (README): a bound that requires grad beside a number is a tensor bound,
    where PyTorch raises TypeError."""
    x, hi = tg.tensor([0.5, -1.0], requires_grad=True), tg.tensor(0.2, requires_grad=True)
    y = tg.clamp(x, -0.7, hi)
    y.sum().backward()
    assert y.tolist() == [0.2, -0.7] and y.grad_fn.name() == "ClampBackward0"
    assert x.grad.tolist() == [0.0, 0.0] and hi.grad.item() == 1.0
    if torch is not None:
        with pytest.raises(TypeError):
            torch.clamp(torch.tensor([0.5]), -0.7, torch.tensor(0.2, requires_grad=True))


CASES = {   # the case, and PyTorch's result
    round_flows: (0.0, True, 0.0),
    sign_gives_zeros_like: (0.0, False),
    divide_by_zero: (inf, -inf),
    zero_to_the_x: (0.0, True),
    pow_zero_number_and_tensor: (0.0, False, 0.0, True),
    pow_zero_zero_second: (1.0, nan),
    pow_number_zero_second: 0.0,
    atan2_origin_second: (1.0, nan),
    where_masked_chain: (0.0, True, 0.0),
    cumprod_dim_of_one: ([[1.0], [1.0]], False),
    cumprod_inf_create_graph: [[-2.186664, 1.462678776, -0.6572880000000001, -0.700893],
                               [nan, 1.3273610280000003, -inf, inf], [3.453061, 0.0, 0.0, 0.0]],
    cumprod_inf_floats: [[-2.186664, 1.4626787760000002, -0.6572880000000001, -0.700893],
                         [nan, nan, -inf, inf], [3.453061, 0.0, 0.0, 0.0]],
    cumprod_zeros_floats: [[3.0, 0.0, 0.0, 0.0, 0.0], [1.0, 4.5, 0.0, 0.0, 0.0]],
    prod_zero_nan_inf_second: ([[inf, -1.6821609999999998], [nan, nan], [nan, nan], [-0.0, nan]],
                               [[nan, nan], [-inf, nan], [nan, nan], [nan, nan]]),
    prod_one_zero_element: ([[1.0]], False),
    prod_two_zeros: [0.0, 0.0, 0.0],
    pow_tensor_two_second: (3.0, [2.0, 2.716395324324493]),
    atan2_underflow: [nan, nan, 0.0, -0.0, 0.0, -0.0],
    elu_at_zero_nan_inf: ([1.0, 1.0, 1.0, 1.0, 0.36787944117144233, 1.0],
                          [0.0, nan, -0.0, 0.0, 0.7357588823428847, 0.0]),
    sigmoid_backward_node: ("SigmoidBackwardBackward0", [-0.0, -0.0]),
    tanh_backward_second: ("TanhBackwardBackward0", [-0.0, nan, 0.0, -0.0]),
    relu_threshold_backward: ("ThresholdBackwardBackward0", [-0.0, 0.0, 0.5, 0.0], True,
                              [0.0, 0.0, 0.0, 0.0]),
    leaky_relu_second: ([-0.0, 0.017580000000000002, inf, -0.0], [0.0, 0.0, 0.0, 0.0]),
    elu_second: ([nan, -0.0, 1.0, inf, 1.0, 1.0], [nan, nan, nan, nan, -0.0, 0.0]),
    gelu_second_third: ("GeluBackwardBackward0", [-0.0, 0.7978845608028654, nan, nan, -inf],
                        [-0.0, -0.0, nan, nan, nan]),
    softplus_at_inf: ([1.0, 1.0, 0.0, -0.0], [nan, nan, -0.0, -0.0]),
    smooth_l1_at_beta: ([-0.25, -0.25, 0.25, 0.0], [0.25, 0.25, -0.25, 0.0],
                        [[-0.0, -0.0, nan, -0.0], [0.0, 0.0, nan, 0.0]]),
    atan2_reciprocal: [[-0.0, nan, nan, nan], [0.0, nan, nan, nan]],
    quotients_third: [(nan, nan, nan), (5e+149, -0.0, nan), (0.0, 0.0, 0.0), (0.0, nan, nan),
                      (-inf, inf, -inf), (1.0, 0.0, 0.0)],
    pow_two_third: ([2.0, 2.0], True, [0.0, 0.0]),
    pow_exponent_where: ([-0.0, inf, 3.843624111345611], [nan, nan]),
    bce_eps_and_logit: ([-300000001198.74084, -1.8749999999999996, 500000001997.9014],
                        [inf, 1.3862943611198906, -inf],
                        [2.9999999999939995e+23, -inf, -0.0], [-1000000000000.0, inf, 0.0]),
    bce_with_logits_third: ([0.06666666666666667, 0.19359902599262746, -0.09999999999999999],
                            [0.08333333333333333, 0.034997861801168866, 0.0],
                            [0.0, -0.0266541670187177, 0.0]),
    div_fresh_quotient: [0.0, 0.0],
    mse_loss_backward_target: [[nan, -4.0, 0.0], [nan, 4.0, 0.0]],
    norm_at_zero_second: ([[0.0, 0.6], [0.0, 0.8]], [[nan, 0.032], [nan, -0.02400000000000002]]),
    var_without_dof: ([nan], False),
    cumsum_dim_of_one_sign: [[-0.0, 2.0]],
    cumprod_underflow_sign: [[3.0, -1.649, -3.298, 0.0], [1.0, 9.0, 0.0, 0.0]],
    clamp_number_overload: ("ClampBackward1", 1),
}


def _flat(v):
    if isinstance(v, (list, tuple)):
        return [y for x in v for y in _flat(x)]
    return [v]


def _same(a, b):
    """Equal leaf by leaf: floats with NaN equal to NaN and the sign of a zero counting."""
    a, b = _flat(a), _flat(b)
    return len(a) == len(b) and all(
        (x != x and y != y) or (x == y and type(x) is type(y) and
                                (not isinstance(x, float) or math.copysign(1, x) == math.copysign(1, y)))
        for x, y in zip(a, b))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("case", list(CASES), ids=lambda c: c.__name__)
def test_tapegrad(case):
    got = case(tg, _tensor(tg))
    assert _same(got, CASES[case]), got


@needs_torch
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("case", list(CASES), ids=lambda c: c.__name__)
def test_torch(case):
    before = torch.get_default_dtype()   # (other test modules set float64 at import)
    torch.set_default_dtype(torch.float64)
    try:
        got = case(torch, _tensor(torch))
    finally:
        torch.set_default_dtype(before)
    assert _same(got, CASES[case]), got


def float32_leaf(L):
    x = L.tensor([1.0, 2.0], dtype=L.float32, requires_grad=True)
    g = _grad(L, (x ** 3).sum(), x, create_graph=True)   # ones of float32 seed the walk
    h = _grad(L, g.sum(), x)
    return str(g.dtype).split(".")[-1], type(g.grad_fn).__name__, g.tolist(), \
        str(h.dtype).split(".")[-1], h.tolist()


def float32_leaf_in_a_float64_product(L):
    x = L.tensor([1.0, 2.0], dtype=L.float32, requires_grad=True)
    w = L.tensor([3.0, 0.5], dtype=L.float64, requires_grad=True)
    gx, gw = L.autograd.grad((x * w).sum(), (x, w), create_graph=True)
    h = _grad(L, (gx * gx).sum(), w)   # through the recorded cast back to float64
    return str(gx.dtype).split(".")[-1], type(gx.grad_fn).__name__, gx.tolist(), \
        str(gw.dtype).split(".")[-1], h.tolist()


DTYPE_CASES = {   # a create_graph gradient has its input's dtype, as PyTorch's
    float32_leaf: ("float32", "MulBackward0", [3.0, 12.0], "float32", [6.0, 12.0]),
    float32_leaf_in_a_float64_product: ("float32", "ToCopyBackward0", [3.0, 0.5], "float64",
                                        [6.0, 1.0]),
}


@pytest.mark.parametrize("case", list(DTYPE_CASES), ids=lambda c: c.__name__)
def test_create_graph_gradients_have_the_inputs_dtype(case):
    assert case(tg) == DTYPE_CASES[case]
    if torch is not None:
        assert case(torch) == DTYPE_CASES[case]
