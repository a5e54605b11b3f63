# PyTorch note "Extending torch.autograd": LinearFunction with needs_input_grad, MulConstant,
# and gradcheck.
import torch
from torch.autograd import Function, gradcheck


class LinearFunction(Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output += bias.unsqueeze(0).expand_as(output)
        return output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias


class MulConstant(Function):
    @staticmethod
    def forward(ctx, tensor, constant):
        ctx.constant = constant
        return tensor * constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


linear = LinearFunction.apply
torch.manual_seed(0)
inp = (torch.linspace(-1, 1, 20 * 20).reshape(20, 20).double().requires_grad_(),
       torch.linspace(0, 1, 30 * 20).reshape(30, 20).double().requires_grad_())
ok = gradcheck(linear, inp, eps=1e-6, atol=1e-4)
x = torch.tensor([1.0, 2.0], requires_grad=True)
W = torch.tensor([[0.5, -1.0], [2.0, 0.25]], requires_grad=True)
bias = torch.tensor([0.1, 0.2], requires_grad=True)
y = linear(x.unsqueeze(0), W, bias)
(MulConstant.apply(y, 3.0)).sum().backward()
RESULTS = {"gradcheck": ok, "x": x.grad.tolist(), "W": W.grad.tolist(), "b": bias.grad.tolist()}
