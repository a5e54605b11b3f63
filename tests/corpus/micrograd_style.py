# micrograd's test_sanity_check and test_more_ops, on tensors.
import torch

x = torch.tensor([-4.0]).double()
x.requires_grad = True
z = 2 * x + 2 + x
q = z.relu() + z * x
h = (z * z).relu()
y = h + q + q * x
y.backward()
a = torch.tensor([-4.0]).double(); b = torch.tensor([2.0]).double()
a.requires_grad = True; b.requires_grad = True
c = a + b
d = a * b + b ** 3
c = c + c + 1
c = c + 1 + c + (-a)
d = d + d * 2 + (b + a).relu()
d = d + 3 * d + (b - a).relu()
e = c - d
f = e ** 2
g = f / 2.0
g = g + 10.0 / f
g.backward()
RESULTS = {"y": y.item(), "x_grad": x.grad.item(), "g": g.item(),
           "a_grad": a.grad.item(), "b_grad": b.grad.item()}
