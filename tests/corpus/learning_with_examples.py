# "Learning PyTorch with examples": fitting sin(x) by a third-order polynomial with tensors and
# manual gradients, with autograd, with a custom autograd Function (LegendrePolynomial3),
# with nn.Sequential + Flatten + MSELoss(reduction='sum'), with optim.RMSprop, and the
# DynamicNet (Python's random picks the depth: the same draws in both runs).
import math
import random

import torch

dtype = torch.float
x = torch.linspace(-math.pi, math.pi, 200, dtype=dtype)
y = torch.sin(x)

# tensors, gradients by hand
a, b, c, d = (torch.tensor(v, dtype=dtype) for v in (0.1, -0.2, 0.3, -0.05))
learning_rate = 1e-6
for t in range(50):
    y_pred = a + b * x + c * x ** 2 + d * x ** 3
    loss = (y_pred - y).pow(2).sum().item()
    grad_y_pred = 2.0 * (y_pred - y)
    grad_a = grad_y_pred.sum()
    grad_b = (grad_y_pred * x).sum()
    grad_c = (grad_y_pred * x ** 2).sum()
    grad_d = (grad_y_pred * x ** 3).sum()
    a -= learning_rate * grad_a
    b -= learning_rate * grad_b
    c -= learning_rate * grad_c
    d -= learning_rate * grad_d
manual = [a.item(), b.item(), c.item(), d.item(), loss]

# autograd
a, b, c, d = (torch.tensor(v, dtype=dtype, requires_grad=True) for v in (0.1, -0.2, 0.3, -0.05))
for t in range(50):
    y_pred = a + b * x + c * x ** 2 + d * x ** 3
    loss = (y_pred - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        for p in (a, b, c, d):
            p -= learning_rate * p.grad
            p.grad = None
autograd = [a.item(), b.item(), c.item(), d.item(), loss.item()]


class LegendrePolynomial3(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 0.5 * (5 * input ** 3 - 3 * input)

    @staticmethod
    def backward(ctx, grad_output):
        input, = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input ** 2 - 1)


a, b, c, d = (torch.full((), v, dtype=dtype, requires_grad=True) for v in (0.0, -1.0, 0.0, 0.3))
for t in range(50):
    P3 = LegendrePolynomial3.apply
    y_pred = a + b * P3(c + d * x)
    loss = (y_pred - y).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        for p in (a, b, c, d):
            p -= 5e-6 * p.grad
            p.grad = None
legendre = [a.item(), b.item(), c.item(), d.item(), loss.item()]

# nn and optim
p = torch.tensor([1, 2, 3])
xx = x.unsqueeze(-1).pow(p)
model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
with torch.no_grad():
    model[0].weight.copy_(torch.tensor([[0.5, -0.1, 0.05]]))
    model[0].bias.fill_(0.1)
loss_fn = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
for t in range(50):
    loss = loss_fn(model(xx), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
linear_layer = model[0]
rmsprop = [linear_layer.bias.item()] + linear_layer.weight[0].tolist() + [loss.item()]


class DynamicNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c, self.d, self.e = (
            torch.nn.Parameter(torch.tensor(v)) for v in (0.1, 0.8, 0.0, -0.1, 0.01))

    def forward(self, x):
        y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
        for exp in range(4, random.randint(4, 6)):
            y = y + self.e * x ** exp
        return y


random.seed(0)
model = DynamicNet()
criterion = torch.nn.MSELoss(reduction="sum")
optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
for t in range(30):
    loss = criterion(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
RESULTS = {"manual": manual, "autograd": autograd, "legendre": legendre, "rmsprop": rmsprop,
           "dynamic": [p.item() for p in model.parameters()] + [loss.item()]}
