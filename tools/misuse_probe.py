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
}


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
