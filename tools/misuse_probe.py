"""Misuse probe: calls PyTorch users get wrong, run on tapegrad and on PyTorch; prints the
cases whose outcome differs (exception type, or one raises and the other does not).

    python tools/misuse_probe.py          # exit status 1 when a case differs

A case is a lambda of the library module ``L``; outcomes are compared by exception type
(PyTorch's is the spec), and by value when neither raises.
"""
import math
import sys
import warnings

import numpy as np

CASES = {
    "sum over dim 2 of a matrix": lambda L: L.ones(2, 3).sum(dim=2),
    "sum over dim 1 of a vector": lambda L: L.ones(3).sum(dim=1),
    "mean over dim -3 of a matrix": lambda L: L.ones(2, 3).mean(-3),
    "softmax over dim 2 of a matrix": lambda L: L.softmax(L.ones(2, 3), dim=2),
    "cat of mismatched shapes": lambda L: L.cat([L.ones(2, 3), L.ones(2, 4)]),
    "cat of nothing": lambda L: L.cat([]),
    "stack of mismatched shapes": lambda L: L.stack([L.ones(2), L.ones(3)]),
    "expand to a smaller size": lambda L: L.ones(3).expand(2),
    "add of unbroadcastable shapes": lambda L: L.ones(2, 3) + L.ones(4),
    "matmul of mismatched shapes": lambda L: L.ones(2, 3) @ L.ones(2, 3),
    "matmul of 0-d tensors": lambda L: L.tensor(2.0) @ L.tensor(3.0),
    "reshape to a wrong size": lambda L: L.ones(6).reshape(4, 2),
    "view with two -1": lambda L: L.ones(6).view(-1, -1),
    "float() of a vector": lambda L: float(L.ones(3)),
    "item() of a vector": lambda L: L.ones(3).item(),
    "bool() of a vector": lambda L: bool(L.ones(3)),
    "int() of a vector": lambda L: int(L.ones(2)),
    "tensor(None)": lambda L: L.tensor(None),
    "tensor('abc')": lambda L: L.tensor("abc"),
    "tensor of ragged lists": lambda L: L.tensor([[1.0, 2.0], [3.0]]),
    "tensor of a dict": lambda L: L.tensor({"a": 1}),
    "index out of range": lambda L: L.ones(3)[3],
    "index of a 0-d tensor": lambda L: L.tensor(1.0)[0],
    "too many indices": lambda L: L.ones(3)[0, 0],
    "float index": lambda L: L.ones(3)[1.5],
    "setitem out of range": lambda L: L.ones(3).__setitem__(5, 1.0),
    "setitem with a wrong shape": lambda L: L.ones(3).__setitem__(slice(None), L.ones(2)),
    "backward of a vector": lambda L: (L.ones(3, requires_grad=True) * 2).backward(),
    "backward without grad": lambda L: L.ones(3).sum().backward(),
    "backward twice": lambda L: _twice(L),
    "grad of an unused input": lambda L: L.autograd.grad((L.ones(2, requires_grad=True) * 2).sum(),
                                                         L.ones(2, requires_grad=True)),
    "grad of an input that needs no grad": lambda L: L.autograd.grad(
        (L.ones(2, requires_grad=True) * 2).sum(), L.ones(2)),
    "grad with grad_outputs of the wrong shape": lambda L: L.autograd.grad(
        (L.ones(2, requires_grad=True) * 2), L.ones(2, requires_grad=True), L.ones(3)),
    "requires_grad on an integer tensor": lambda L: L.tensor([1, 2], requires_grad=True),
    "requires_grad_ on a non-leaf set to False": lambda L: (L.ones(2, requires_grad=True) * 2).requires_grad_(False),
    "in-place on a leaf that requires grad": lambda L: L.ones(2, requires_grad=True).add_(1),
    "zero_ of a leaf that requires grad": lambda L: L.ones(2, requires_grad=True).zero_(),
    "numpy() of a tensor that requires grad": lambda L: L.ones(2, requires_grad=True).numpy(),
    "gather with a float index": lambda L: L.gather(L.ones(3), 0, L.tensor([0.0])),
    "gather out of range": lambda L: L.gather(L.ones(3), 0, L.tensor([5])),
    "index_select with a float index": lambda L: L.index_select(L.ones(3), 0, L.tensor([0.0])),
    "cross_entropy with a float target of the wrong shape": lambda L: L.nn.functional.cross_entropy(
        L.ones(2, 3), L.ones(5)),
    "cross_entropy target out of range": lambda L: L.nn.functional.cross_entropy(
        L.ones(2, 3), L.tensor([0, 7])),
    "mse_loss of mismatched shapes (broadcasts with a warning)": lambda L: L.nn.functional.mse_loss(
        L.ones(2, 3), L.ones(3)),
    "linear of mismatched shapes": lambda L: L.nn.Linear(3, 2)(L.ones(2, 4)),
    "Linear with a negative size": lambda L: L.nn.Linear(-1, 2),
    "SGD with a negative lr": lambda L: L.optim.SGD([L.ones(2, requires_grad=True)], lr=-1.0),
    "SGD with no parameters": lambda L: L.optim.SGD([], lr=0.1),
    "Adam with bad betas": lambda L: L.optim.Adam([L.ones(2, requires_grad=True)], betas=(1.5, 0.9)),
    "clamp with min > max": lambda L: L.clamp(L.ones(3), min=2.0, max=1.0),
    "pow of a negative number to 0.5": lambda L: L.tensor(-1.0) ** 0.5,
    "log of 0": lambda L: L.log(L.tensor(0.0)),
    "division by zero": lambda L: L.tensor(1.0) / 0,
    "integer division by zero": lambda L: L.tensor([1]) // 0,
    "transpose of dims out of range": lambda L: L.ones(2, 3).transpose(0, 2),
    "permute with repeated dims": lambda L: L.ones(2, 3).permute(0, 0),
    "squeeze of dim out of range": lambda L: L.ones(2, 3).squeeze(3),
    "unsqueeze of dim out of range": lambda L: L.ones(2, 3).unsqueeze(4),
    "split into size 0": lambda L: L.ones(4).split(0),
    "zeros of a negative size": lambda L: L.zeros(-1),
    "ones of a float size": lambda L: L.ones(2.5),
    "arange with step 0": lambda L: L.arange(0, 5, 0),
    "linspace with negative steps": lambda L: L.linspace(0, 1, -2),
    "max over an empty tensor": lambda L: L.ones(0).max(),
    "argmax over an empty tensor": lambda L: L.ones(0).argmax(),
    "mean of an integer tensor": lambda L: L.tensor([1, 2]).mean(),
    "norm of an integer tensor": lambda L: L.tensor([1, 2]).norm(),
    "hook that is not callable": lambda L: L.ones(2, requires_grad=True).register_hook(3),
    "register_hook on a tensor without grad": lambda L: L.ones(2).register_hook(lambda g: g),
    "retain_grad on a tensor without grad": lambda L: L.ones(2).retain_grad(),
    "detach_ then backward": lambda L: _detached(L),
    "where with a float condition": lambda L: L.where(L.ones(2), L.ones(2), L.zeros(2)),
    "where with unbroadcastable shapes": lambda L: L.where(L.ones(2) > 0, L.ones(3), L.zeros(2)),
    "comparison of unbroadcastable shapes": lambda L: L.ones(2) < L.ones(3),
    "backward with a gradient of the wrong shape": lambda L: (L.ones(2, requires_grad=True) * 2).backward(L.ones(3)),
    "Function returning a wrong number of gradients": lambda L: _bad_function(L),
    "no_grad used as a function on a non-callable": lambda L: L.no_grad()(3),
    "manual_seed with a string": lambda L: L.manual_seed("a"),
    "tensor.to an unknown device": lambda L: L.ones(2).to("tpu"),
    "tensor of a very large integer": lambda L: L.tensor([2 ** 70]),
    "sum with dim as a float": lambda L: L.ones(2, 3).sum(dim=1.0),
    "sum with a repeated dim": lambda L: L.ones(2, 3).sum(dim=(0, 0)),
    "softmax without dim on a matrix (deprecated, warns)": lambda L: L.nn.functional.softmax(L.ones(2, 3)),
    "log_softmax over dim 3": lambda L: L.log_softmax(L.ones(2, 3), 3),
    "cumsum over dim 2 of a vector": lambda L: L.cumsum(L.ones(3), 2),
    "flip of a dim out of range": lambda L: L.flip(L.ones(3), (1,)),
    "roll with mismatched shifts and dims": lambda L: L.roll(L.ones(3, 2), (1, 2), (0,)),
    "gather with fewer dims": lambda L: L.gather(L.ones(3, 2), 0, L.tensor([1])),
    "index_select with a 2-D index": lambda L: L.index_select(L.ones(3), 0, L.tensor([[0]])),
    "unbind of dim out of range": lambda L: L.ones(2, 3).unbind(2),
    "chunk into 0": lambda L: L.ones(4).chunk(0),
    "narrow past the end": lambda L: L.ones(4).narrow(0, 2, 5),
    "repeat with fewer sizes than dims": lambda L: L.ones(2, 3).repeat(2),
    "t() of a 3-D tensor": lambda L: L.ones(2, 3, 4).t(),
    "mm of 1-D tensors": lambda L: L.mm(L.ones(3), L.ones(3)),
    "dot of 2-D tensors": lambda L: L.dot(L.ones(2, 2), L.ones(2, 2)),
    "dot of different lengths": lambda L: L.dot(L.ones(2), L.ones(3)),
    "outer of 2-D tensors (flattens? no: raises)": lambda L: L.outer(L.ones(2, 2), L.ones(2)),
    "bmm of 2-D tensors": lambda L: L.bmm(L.ones(2, 2), L.ones(2, 2)),
    "mv with a matrix second": lambda L: L.mv(L.ones(2, 2), L.ones(2, 2)),
    "addition of a string": lambda L: L.ones(2) + "a",
    "multiplication by None": lambda L: L.ones(2) * None,
    "pow with a tensor exponent of another shape": lambda L: L.ones(2) ** L.ones(3),
    "len of a 0-d tensor": lambda L: len(L.tensor(1.0)),
    "iteration over a 0-d tensor": lambda L: list(L.tensor(1.0)),
    "tensor.grad set to a wrong shape": lambda L: setattr(L.ones(2, requires_grad=True), "grad", L.ones(3)),
    "requires_grad set on a non-leaf": lambda L: setattr(L.ones(2, requires_grad=True) * 2, "requires_grad", False),
    "backward with create_graph and a non-tensor gradient": lambda L: (L.ones(2, requires_grad=True) * 2).backward([1.0, 1.0]),
    "grad of a non-tensor output": lambda L: L.autograd.grad(3.0, L.ones(2, requires_grad=True)),
    "grad with outputs and grad_outputs of different lengths": lambda L: L.autograd.grad(
        [L.ones(2, requires_grad=True).sum()], [L.ones(2, requires_grad=True)], [L.tensor(1.0), L.tensor(1.0)]),
    "Function.apply with a keyword argument": lambda L: _kw_function(L),
    "Function called directly": lambda L: L.autograd.Function()(L.ones(2)),
    "ctx.save_for_backward of a non-tensor": lambda L: _save_non_tensor(L),
    "Parameter of a non-tensor": lambda L: L.nn.Parameter([1.0, 2.0]),
    "Module call without forward": lambda L: L.nn.Module()(L.ones(2)),
    "Sequential of a non-module": lambda L: L.nn.Sequential(3),
    "Linear with a float size": lambda L: L.nn.Linear(2.5, 2),
    "Linear on an integer input": lambda L: L.nn.Linear(2, 2)(L.tensor([[1, 2]])),
    "load_state_dict with a missing key": lambda L: L.nn.Linear(2, 2).load_state_dict({"weight": L.ones(2, 2)}),
    "load_state_dict with a wrong shape": lambda L: L.nn.Linear(2, 2).load_state_dict({"weight": L.ones(3, 2), "bias": L.ones(2)}),
    "Dropout with p > 1": lambda L: L.nn.Dropout(1.5),
    "dropout with p < 0": lambda L: L.nn.functional.dropout(L.ones(2), -0.1),
    "mse_loss with a bad reduction": lambda L: L.nn.functional.mse_loss(L.ones(2), L.ones(2), reduction="avg"),
    "nll_loss of a 1-D input with a batch target": lambda L: L.nn.functional.nll_loss(L.ones(3), L.tensor([0, 1])),
    "binary_cross_entropy of values outside [0, 1]": lambda L: L.nn.functional.binary_cross_entropy(L.tensor([1.5]), L.tensor([1.0])),
    "binary_cross_entropy of mismatched shapes": lambda L: L.nn.functional.binary_cross_entropy(L.tensor([0.5, 0.5]), L.tensor([1.0])),
    "SGD with momentum < 0": lambda L: L.optim.SGD([L.ones(2, requires_grad=True)], lr=0.1, momentum=-1),
    "SGD nesterov without momentum": lambda L: L.optim.SGD([L.ones(2, requires_grad=True)], lr=0.1, nesterov=True),
    "Adam with a negative lr": lambda L: L.optim.Adam([L.ones(2, requires_grad=True)], lr=-0.1),
    "Adam with a negative eps": lambda L: L.optim.Adam([L.ones(2, requires_grad=True)], eps=-1.0),
    "optimizer of a tensor (not an iterable)": lambda L: L.optim.SGD(L.ones(2, requires_grad=True), lr=0.1),
    "optimizer of a non-leaf": lambda L: L.optim.SGD([L.ones(2, requires_grad=True) * 2], lr=0.1),
    "ones of a negative size in a tuple": lambda L: L.ones((2, -3)),
    "full of a wrong fill type": lambda L: L.full((2,), "a"),
    "arange with end before start": lambda L: L.arange(5, 0, 1),
    "randn of a float size": lambda L: L.randn(2.5),
    "randint with high <= low": lambda L: L.randint(5, 5, (2,)),
    "eye of a negative size": lambda L: L.eye(-1),
    "tensor with requires_grad on a bool": lambda L: L.tensor([True], requires_grad=True),
    "tensor of mixed types": lambda L: L.tensor([1.0, "a"]),
    "zeros_like of a list": lambda L: L.zeros_like([1.0, 2.0]),
    "clamp without bounds": lambda L: L.clamp(L.ones(2)),
    "clamp with a tensor min of another shape": lambda L: L.clamp(L.ones(2), min=L.ones(3)),
    "sqrt of a list": lambda L: L.sqrt([1.0, 4.0]),
    "exp of a Python float": lambda L: L.exp(1.0),
    "maximum of a tensor and a number": lambda L: L.maximum(L.ones(2), 0.5),
    "where with a number condition": lambda L: L.where(True, L.ones(2), L.zeros(2)),
    "masked_fill with a float mask": lambda L: L.ones(2).masked_fill(L.ones(2), 0.0),
    "topk with k too large": lambda L: L.ones(3).topk(5),
    "sort over dim out of range": lambda L: L.ones(3).sort(dim=1),
    "argmax over dim out of range": lambda L: L.ones(3).argmax(dim=1),
    "one-element tensor to bool (ok)": lambda L: bool(L.tensor([0.0])),
    "empty tensor to bool": lambda L: bool(L.ones(0)),
    "item of an empty tensor": lambda L: L.ones(0).item(),
    "std of a single element (nan, warns)": lambda L: L.tensor([1.0]).std(),
    "var over dim with correction too large": lambda L: L.ones(2, 2).var(dim=0, correction=3),
    "expand with a -1 in a new leading dim": lambda L: L.ones(3).expand(-1, 3),
    "view of a non-contiguous tensor": lambda L: L.ones(2, 3).t().view(6),
    "detach of a non-tensor": lambda L: L.Tensor.detach(3.0),
    "no_grad nesting with a bad argument": lambda L: L.set_grad_enabled("yes"),
    "hook returning a wrong type": lambda L: _hook_wrong_type(L),
    "hook returning a wrong shape": lambda L: _hook_wrong_shape(L),
    "retain_graph misuse: backward through a freed Function": lambda L: _freed_function(L),
    "in-place on a view of a leaf": lambda L: L.ones(3, requires_grad=True)[0].add_(1),
    "in-place changing a saved tensor": lambda L: _inplace_saved(L),
    "tensor.new_tensor of a string": lambda L: L.ones(2).new_tensor("a"),
    "tensor.to an integer dtype keeps grad? (raises on requires_grad)": lambda L: L.ones(2, requires_grad=True).to(L.int64).requires_grad_(),
}


def _kw_function(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, a, scale=2.0):
            return a * scale

        @staticmethod
        def backward(ctx, g):
            return g * 2.0, None
    return F.apply(L.ones(2, requires_grad=True), scale=3.0)


def _save_non_tensor(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(3.0)
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2
    return F.apply(L.ones(2, requires_grad=True))


def _hook_wrong_type(L):
    x = L.ones(2, requires_grad=True)
    x.register_hook(lambda g: "a")
    (x * 2).sum().backward()


def _hook_wrong_shape(L):
    x = L.ones(2, requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: L.ones(3))
    y.sum().backward()


def _freed_function(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        @staticmethod
        def backward(ctx, g):
            (a,) = ctx.saved_tensors
            return 2 * a * g
    y = F.apply(L.ones(2, requires_grad=True)).sum()
    y.backward()
    y.backward()


def _inplace_saved(L):
    x = L.ones(2, requires_grad=True)
    y = x * 1.0
    z = y.sin()
    y.mul_(2)
    z.sum().backward()


def _twice(L):
    x = L.ones(2, requires_grad=True)
    y = (x.exp()).sum()
    y.backward()
    y.backward()


def _detached(L):
    x = L.ones(2, requires_grad=True)
    y = x * 2
    y.detach_()
    y.sum().backward()


def _bad_function(L):
    class F(L.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a * b

        @staticmethod
        def backward(ctx, g):
            return (g,)
    a, b = L.ones(2, requires_grad=True), L.ones(2, requires_grad=True)
    F.apply(a, b).sum().backward()


def outcome(fn, L):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = fn(L)
    except Exception as e:   # noqa: BLE001 - the type is what is compared
        return ("raise", type(e).__name__, str(e).split("\n")[0][:100])
    try:
        v = np.asarray(r.detach().tolist() if hasattr(r, "detach") else r, dtype=float)
    except (TypeError, ValueError):
        v = None
    return ("ok", v)


def differs(a, b) -> bool:
    if a[0] != b[0]:
        return True
    if a[0] == "raise":
        return a[1] != b[1]
    if a[1] is None or b[1] is None:
        return False
    return a[1].shape != b[1].shape or not np.allclose(a[1], b[1], equal_nan=True)


def main() -> int:
    import torch
    import tapegrad
    torch.set_default_dtype(torch.float64)
    bad = 0
    for name, fn in CASES.items():
        mine, theirs = outcome(fn, tapegrad), outcome(fn, torch)
        if differs(mine, theirs):
            bad += 1
            print(f"{name}:\n    tapegrad {mine[:3] if mine[0] == 'raise' else mine}\n    torch    {theirs[:3] if theirs[0] == 'raise' else theirs}")
    print(f"{len(CASES) - bad} same, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
