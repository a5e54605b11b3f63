# A PyTorch 2 style Function: ctx-less forward with setup_context, once_differentiable,
# mark_non_differentiable, and double backward through a Function.
import torch
from torch.autograd.function import once_differentiable


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(x):
        return x ** 3, (x > 0)

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, grad, _):
        (x,) = ctx.saved_tensors
        return grad * 3 * x ** 2


class Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


x = torch.tensor([0.5, -2.0], requires_grad=True)
y, positive = Cube.apply(x)
(g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
g.sum().backward()
s = Square.apply(x).sum()
(gs,) = torch.autograd.grad(s, x, create_graph=True)
try:
    gs.sum().backward()
    refused = False
except RuntimeError:
    refused = True
RESULTS = {"y": y.tolist(), "positive_rg": positive.requires_grad, "g": g.tolist(),
           "second": x.grad.tolist(), "once": refused}
