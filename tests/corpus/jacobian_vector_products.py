# Vector-Jacobian products with grad_outputs, and autograd.functional.
import torch
from torch.autograd.functional import hessian, jacobian


def f(x):
    return torch.stack([x[0] * x[1], x[0].sin() + x[1] ** 2])


x = torch.tensor([0.3, -1.2], requires_grad=True)
y = f(x)
(vjp,) = torch.autograd.grad(y, x, grad_outputs=torch.tensor([1.0, 2.0]))
J = jacobian(f, torch.tensor([0.3, -1.2]))
H = hessian(lambda v: (v ** 3).sum() + v[0] * v[1], torch.tensor([0.3, -1.2]))
RESULTS = {"vjp": vjp.tolist(), "J": J.tolist(), "H": H.tolist()}
