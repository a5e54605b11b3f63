"""Keyword forms of the tensor methods and functions PyTorch programs use most
(``x.add(y, alpha=2)``, ``x.sum(dim=1, keepdim=True)``, ``torch.clamp(x, min=0)``, ...): the
same values, dtypes and shapes as PyTorch's, and the same gradients for the inputs."""
import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(21)
X = RNG.normal(size=(3, 4))
Y = RNG.normal(size=(3, 4)) + 2.5          # away from zero: a divisor
IDX = [[0, 2], [1, 1], [3, 0]]

# name -> fn(m, x, y): x and y are float64 (3, 4) tensors that require grad
CASES = {
    "reshape_shape": lambda m, x, y: (x.reshape(shape=(4, 3)), m.reshape(input=x, shape=(12,))),
    "view_size": lambda m, x, y: (x * 1).view(size=(2, 6)),
    "permute_dims": lambda m, x, y: x.permute(dims=(1, 0)),
    "expand_size": lambda m, x, y: x[:1].expand(size=(2, 3, 4)),
    "split_split_size": lambda m, x, y: x.split(split_size=2, dim=1),
    "unflatten": lambda m, x, y: (x.unflatten(1, (2, -1)), m.unflatten(x, 0, (3, 1))),
    "add_alpha": lambda m, x, y: x.add(y, alpha=2),
    "add_other_alpha": lambda m, x, y: x.add(other=y, alpha=-0.5),
    "add_scalar_alpha": lambda m, x, y: x.add(3, alpha=2),
    "torch_add_alpha": lambda m, x, y: m.add(x, y, alpha=3),
    "torch_add_input_other": lambda m, x, y: m.add(input=x, other=y),
    "sub_alpha": lambda m, x, y: x.sub(y, alpha=2),
    "torch_sub_alpha": lambda m, x, y: m.sub(x, other=y, alpha=0.5),
    "subtract_alpha": lambda m, x, y: m.subtract(x, y, alpha=2),
    "rsub_alpha": lambda m, x, y: m.rsub(x, y, alpha=2),
    "mul_other": lambda m, x, y: x.mul(other=y),
    "multiply": lambda m, x, y: m.multiply(x, other=y),
    "div_rounding": lambda m, x, y: (x.div(y, rounding_mode="floor"),
                                     m.div(x, y, rounding_mode="trunc")),
    "divide_other": lambda m, x, y: m.divide(x, other=y),
    "true_divide": lambda m, x, y: x.true_divide(y),
    "pow_exponent": lambda m, x, y: (x.pow(exponent=2), m.pow(y, exponent=0.5)),
    "pow_self": lambda m, x, y: m.pow(2, y),
    "addcmul_value": lambda m, x, y: (x.addcmul(y, x, value=0.5),
                                      m.addcmul(x, tensor1=y, tensor2=x, value=2)),
    "addcdiv_value": lambda m, x, y: (x.addcdiv(x, y, value=2),
                                      m.addcdiv(x, tensor1=x, tensor2=y, value=-1)),
    "clamp_min": lambda m, x, y: x.clamp(min=0),
    "clamp_max": lambda m, x, y: x.clamp(max=0.5),
    "clamp_both": lambda m, x, y: m.clamp(x, min=-0.5, max=0.5),
    "clamp_tensors": lambda m, x, y: x.clamp(min=y - 3, max=y - 2),
    "clip": lambda m, x, y: (x.clip(min=-0.2), m.clip(x, max=0.1)),
    "clamp_min_max_methods": lambda m, x, y: (x.clamp_min(min=0.1), x.clamp_max(max=0.1)),
    "sum_dim_keepdim": lambda m, x, y: (x.sum(dim=1, keepdim=True), m.sum(x, dim=(0, 1))),
    "sum_dtype": lambda m, x, y: (x.sum(dtype=m.float32), m.sum(x, 0, dtype=m.float32)),
    "sum_int_dtype": lambda m, x, y: m.tensor([[1, 2], [3, 4]]).sum(dim=0, dtype=m.float64),
    "mean_dim_keepdim": lambda m, x, y: (x.mean(dim=0, keepdim=True), x.mean(dim=[0, 1])),
    "mean_dtype": lambda m, x, y: (x.mean(dtype=m.float32),
                                   m.tensor([1, 2]).mean(dtype=m.float64)),
    "prod_dim": lambda m, x, y: (x.prod(dim=1, keepdim=True), m.prod(x, dtype=m.float64)),
    "std_var": lambda m, x, y: (x.std(dim=1, unbiased=False), x.var(dim=0, keepdim=True),
                                x.std(dim=1, correction=0), m.var(x, dim=1, correction=2)),
    "max_min_dim": lambda m, x, y: (tuple(x.max(dim=1, keepdim=True)), tuple(x.min(dim=0))),
    "max_other": lambda m, x, y: (m.max(x, other=y), x.maximum(other=y), x.minimum(y)),
    "amax_amin": lambda m, x, y: (x.amax(dim=(0, 1)), x.amin(dim=1, keepdim=True)),
    "argmax_argmin": lambda m, x, y: (x.argmax(dim=1, keepdim=True), x.argmin(dim=0),
                                      m.argmax(x)),
    "norm_p": lambda m, x, y: (x.norm(p=1, dim=1, keepdim=True), x.norm(p="fro"),
                               m.norm(x, dim=0)),
    "logsumexp": lambda m, x, y: (x.logsumexp(dim=1, keepdim=True), m.logsumexp(x, dim=0)),
    "softmax": lambda m, x, y: (x.softmax(dim=1), m.softmax(x, dim=0),
                                x.log_softmax(dim=-1)),
    "softmax_dtype": lambda m, x, y: (x.softmax(dim=1, dtype=m.float32),
                                      m.log_softmax(x, 0, dtype=m.float32)),
    "cumsum_cumprod": lambda m, x, y: (x.cumsum(dim=1), m.cumsum(x, dim=0),
                                       x.cumprod(dim=1)),
    "cumsum_dtype": lambda m, x, y: m.tensor([1, 2, 3]).cumsum(dim=0, dtype=m.float64),
    "matmul_other": lambda m, x, y: (x.matmul(other=y.T), m.matmul(x, other=y.T),
                                     x.mm(mat2=y.T)),
    "transpose_dims": lambda m, x, y: (x.transpose(dim0=0, dim1=1), m.transpose(x, 1, 0)),
    "flatten": lambda m, x, y: (x.flatten(start_dim=0, end_dim=-1), m.flatten(x, start_dim=1)),
    "squeeze_unsqueeze": lambda m, x, y: (x.unsqueeze(dim=1), x.unsqueeze(1).squeeze(dim=1),
                                          m.unsqueeze(x, dim=0)),
    "expand_repeat": lambda m, x, y: (x[:1].expand(2, 3, 4), x.repeat(2, 1)),
    "split_chunk": lambda m, x, y: (x.split(2, dim=1), x.chunk(chunks=2, dim=1),
                                    m.split(x, [1, 3], dim=1)),
    "gather": lambda m, x, y: (x.gather(dim=1, index=m.tensor(IDX)),
                               m.gather(x, 1, index=m.tensor(IDX))),
    "index_select": lambda m, x, y: (x.index_select(dim=0, index=m.tensor([2, 0])),
                                     m.index_select(x, dim=1, index=m.tensor([3]))),
    "masked_fill": lambda m, x, y: (x.masked_fill(mask=x > 0, value=0.5),
                                    m.masked_fill(x, x < 0, value=-1.0)),
    "where": lambda m, x, y: (m.where(x > 0, x, y), m.where(condition=x > 0, input=x, other=y),
                              x.where(x > 0, y)),
    "topk_sort": lambda m, x, y: (tuple(x.topk(k=2, dim=1, largest=False)),
                                  tuple(x.sort(dim=1, descending=True)),
                                  x.argsort(dim=1, descending=True)),
    "lerp": lambda m, x, y: (x.lerp(end=y, weight=0.25), m.lerp(x, y, weight=0.5)),
    "comparisons": lambda m, x, y: (x.eq(other=y), x.lt(other=0), m.gt(x, other=y),
                                    x.ge(0.1), m.ne(x, other=x)),
    "allclose_isclose": lambda m, x, y: (x.allclose(other=x + 1e-9, rtol=1e-5),
                                         m.isclose(x, other=x, atol=0.0)),
    "any_all": lambda m, x, y: ((x > 0).any(dim=1), (x > 0).all(dim=0, keepdim=True),
                                m.any(x > 0, dim=0)),
    "to_type": lambda m, x, y: (x.to(dtype=m.float32), x.type(dtype=m.float32),
                                x.to(m.float32, copy=True)),
    "new_factories": lambda m, x, y: (x.new_zeros(size=(2,)), x.new_ones((2, 2)),
                                      x.new_full(size=(2,), fill_value=3.0)),
    "roll_flip": lambda m, x, y: (x.roll(shifts=1, dims=0), m.roll(x, 2, dims=1),
                                  x.flip(dims=(0,)), m.flip(x, dims=[1])),
    "tril_triu": lambda m, x, y: (x.tril(diagonal=1), m.triu(x, diagonal=-1)),
    "narrow": lambda m, x, y: (x.narrow(dim=1, start=1, length=2), m.narrow(x, 0, 1, 1)),
    "unbind": lambda m, x, y: (x.unbind(dim=1), m.unbind(x, dim=0)),
    "cat_stack": lambda m, x, y: (m.cat(tensors=(x, y), dim=1), m.cat([x, y], dim=0),
                                  m.stack(tensors=[x, y], dim=1), m.concat([x, y], dim=-1)),
    "round_decimals": lambda m, x, y: (x.round(decimals=2), m.round(x, decimals=1)),
    "nan_to_num": lambda m, x, y: (x / (x > 0)).nan_to_num(nan=0.0, posinf=1.0, neginf=-1.0),
    "fmod_remainder": lambda m, x, y: (x.fmod(other=0.3), x.remainder(other=y),
                                       m.remainder(x, other=0.7)),
    "dot_outer": lambda m, x, y: (m.dot(x[0], y[0]), x[0].dot(y[0]), m.outer(x[0], vec2=y[1]),
                                  x[0].outer(vec2=y[1])),
    "einsum_bmm": lambda m, x, y: (m.einsum("ij,kj->ik", x, y),
                                   m.bmm(x[None], mat2=y.T[None])),
    "repeat_interleave": lambda m, x, y: (x.repeat_interleave(repeats=2, dim=0),
                                          m.repeat_interleave(x, 2, dim=1)),
    "count_nonzero": lambda m, x, y: ((x > 0).count_nonzero(dim=1), m.count_nonzero(x, dim=0)),
    "scatter_add": lambda m, x, y: (x.scatter_add(dim=1, index=m.tensor(IDX), src=y[:, :2]),
                                    x.scatter(dim=1, index=m.tensor(IDX), value=2.0)),
    "index_add": lambda m, x, y: x.index_add(dim=0, index=m.tensor([0, 0, 2]), source=y, alpha=2),
    "index_copy": lambda m, x, y: x.index_copy(dim=0, index=m.tensor([2, 0, 1]), source=y),
    "index_put": lambda m, x, y: (x.index_put(indices=(m.tensor([1]),), values=y[0], accumulate=True),
                                  m.index_put(x, indices=[m.tensor([0])], values=y[1])),
    "inplace_keywords": lambda m, x, y: ((x * 1).add_(y, alpha=2), (x * 1).sub_(other=y, alpha=3),
                                         (x * 1).mul_(other=y), (x * 1).clamp_(min=0),
                                         (x * 1).div_(y, rounding_mode="floor"),
                                         (x * 1).addcmul_(x, y, value=2),
                                         (x * 1).addcdiv_(x, y, value=0.5),
                                         (x * 1).fill_(value=2.0), (x * 1).pow_(exponent=2)),
    "elementwise_out_of_place": lambda m, x, y: (m.exp(input=x), m.sigmoid(input=x),
                                                 m.tanh(x), m.abs(input=x), x.relu(),
                                                 m.sqrt(input=y), m.log(input=y)),
    "atan2_hypot": lambda m, x, y: (m.atan2(x, other=y), x.atan2(other=y), m.hypot(x, other=y)),
    "float_power": lambda m, x, y: m.float_power(y, exponent=2),
    "squeeze_multiple": lambda m, x, y: x[None, :, None].squeeze(dim=(0, 2)),
    "var_mean": lambda m, x, y: (m.var_mean(x, dim=1, correction=0),
                                 m.std_mean(x, dim=0, keepdim=True)),
    "full_like": lambda m, x, y: (m.full_like(x, fill_value=2.0), m.zeros_like(input=x),
                                  m.ones_like(x, dtype=m.float32)),
    "factories": lambda m, x, y: (m.zeros(size=(2, 3), dtype=m.float32), m.ones(2, 3, dtype=m.int64),
                                  m.arange(start=1, end=7, step=2), m.arange(end=4.0),
                                  m.linspace(start=0.0, end=1.0, steps=5),
                                  m.full(size=(2,), fill_value=1.5), m.eye(n=2, m=3),
                                  m.tensor(data=[1.0, 2.0], dtype=m.float64),
                                  m.empty(2, 2).fill_(0.0), m.zeros_like(x, dtype=m.int64)),
    "reductions_input_keyword": lambda m, x, y: (m.mean(input=x, dim=1, keepdim=True),
                                                 m.sum(input=x, dim=0), m.amax(input=x, dim=1),
                                                 tuple(m.max(input=x, dim=0, keepdim=True)),
                                                 m.std(input=x, dim=0, keepdim=True),
                                                 m.logsumexp(input=x, dim=1)),
    "clone_detach_type_as": lambda m, x, y: (x.clone(memory_format=m.contiguous_format),
                                             x.detach().requires_grad_(False), x.type_as(y),
                                             x.to(device="cpu", dtype=m.float64),
                                             x.new_tensor([1.0, 2.0])),
    "inplace_unary_and_fills": lambda m, x, y: ((x * 1).abs_(), (x * 1).exp_(),
                                                (x * 1).masked_fill_(mask=x > 0, value=1.0),
                                                (x * 1).index_fill_(1, m.tensor([0, 2]), -1.0),
                                                (x * 1).clamp_(max=0.2), (x * 1).zero_()),
    "matrix_keywords": lambda m, x, y: (m.mm(input=x, mat2=y.T), m.mv(x, vec=y[0]),
                                        m.addmm(x[:, :3], x, y.T[:, :3], beta=0.5, alpha=2.0),
                                        m.baddbmm(x[None, :, :3], x[None], y.T[None, :, :3],
                                                  beta=2, alpha=0.5),
                                        x.t().matmul(y), m.tensordot(x, y, dims=2)),
    "logical_and_bitwise": lambda m, x, y: (m.logical_and(x > 0, other=y > 3),
                                            (x > 0).logical_or(other=y > 3),
                                            m.bitwise_xor(m.tensor([1, 6]), other=m.tensor([3, 3]))),
    "sort_topk_functions": lambda m, x, y: (tuple(m.sort(x, dim=0, descending=True, stable=True)),
                                            tuple(m.topk(x, k=1, dim=0, largest=True, sorted=True)),
                                            m.argsort(x, dim=0, descending=False),
                                            tuple(m.min(x, dim=1, keepdim=False))),
    "cumulative_and_diff": lambda m, x, y: (m.cumsum(x, dim=1), m.diff(x, n=1, dim=1),
                                            m.cumprod(x, dim=0), m.logcumsumexp(x, dim=1)),
    "addr_cov_isin": lambda m, x, y: (m.addr(x[:, :3], x[:, 0], y[0, :3], beta=0.5, alpha=2),
                                      m.cov(x), m.cov(y, correction=0), x[0].cov(),
                                      m.isin(m.tensor([1, 2, 5]), m.tensor([2, 5]), invert=True),
                                      m.isin(x, x[0, :2])),
    "nn_functional_keywords": lambda m, x, y: (
        m.nn.functional.softmax(x, dim=1), m.nn.functional.relu(input=x),
        m.nn.functional.normalize(x, p=2.0, dim=1),
        m.nn.functional.pad(x, pad=(1, 1), mode="constant", value=0.5),
        m.nn.functional.cross_entropy(input=x, target=m.tensor([0, 3, 1]), reduction="sum",
                                      label_smoothing=0.1),
        m.nn.functional.mse_loss(input=x, target=y, reduction="mean"),
        m.nn.functional.dropout(x, p=0.0, training=True),
        m.nn.functional.linear(input=x, weight=y, bias=None)),
}


def _flat(r):
    return [z for v in r for z in _flat(v)] if isinstance(r, (tuple, list)) else [r]


def _run(m, name):
    x = m.tensor(X, requires_grad=True)
    y = m.tensor(Y, requires_grad=True)
    out = _flat(CASES[name](m, x, y))
    tensors = [o for o in out if isinstance(o, m.Tensor)]
    live = [o for o in tensors if o.requires_grad]
    if live:
        sum((o * m.tensor(np.cos(np.arange(o.numel())).reshape(tuple(o.shape)))
             .to(o.dtype)).sum() for o in live).backward()
    values = [(o.detach().numpy() if isinstance(o, m.Tensor) else o) for o in out]
    dtypes = [str(o.dtype).split(".")[-1] if isinstance(o, m.Tensor) else type(o).__name__
              for o in out]
    grads = [None if t.grad is None else t.grad.numpy() for t in (x, y)]
    return values, dtypes, grads


@pytest.mark.parametrize("name", sorted(CASES))
def test_keyword_forms_match_pytorch(name):
    torch.set_default_dtype(torch.float64)
    try:
        theirs = _run(torch, name)
    finally:
        torch.set_default_dtype(torch.float32)
    ours = _run(tg, name)
    assert ours[1] == theirs[1], "dtypes"
    for a, b in zip(ours[0], theirs[0]):
        assert np.shape(a) == np.shape(b)
        single = getattr(b, "dtype", None) == np.float32   # (PyTorch's float32 arithmetic)
        np.testing.assert_allclose(a, b, rtol=1e-6 if single else 1e-12, atol=1e-14)
    single = "float32" in theirs[1]   # a float32 part of the graph: PyTorch's rounding
    for a, b in zip(ours[2], theirs[2]):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-6 if single else 1e-12, atol=1e-14)


def test_cov_and_addr_gradcheck():
    x = tg.tensor(X[:, :3], requires_grad=True)
    v = tg.tensor(Y[0, :2], requires_grad=True)
    assert tg.autograd.gradcheck(lambda x: tg.cov(x, correction=0), (x,))
    assert tg.autograd.gradcheck(lambda x, v: tg.addr(x[:2], v, x[0], beta=0.5, alpha=2),
                                 (x, v))
