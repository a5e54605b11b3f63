# d2l.ai, "Automatic Differentiation": dot products, non-scalar backward, detach, control flow.
import torch

x = torch.arange(4.0)
x.requires_grad_(True)
y = 2 * torch.dot(x, x)
y.backward()
first = (x.grad == 4 * x).tolist()
x.grad.zero_()
y = x.sum()
y.backward()
second = x.grad.tolist()
x.grad.zero_()
y = x * x
y.backward(gradient=torch.ones(len(y)))
third = x.grad.tolist()
x.grad.zero_()
y = x * x
u = y.detach()
z = u * x
z.sum().backward()
fourth = (x.grad == u).tolist()


def f(a):
    b = a * 2
    while b.norm() < 1000:
        b = b * 2
    if b.sum() > 0:
        c = b
    else:
        c = 100 * b
    return c


a = torch.tensor(0.7, requires_grad=True)
d = f(a)
d.backward()
RESULTS = {"first": first, "second": second, "third": third, "fourth": fourth,
           "control_flow": (a.grad == d / a).item()}
