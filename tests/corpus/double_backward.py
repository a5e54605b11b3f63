# Second derivatives with create_graph=True, and a gradient penalty.
import torch

x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
y = (x ** 3).sum()
(g,) = torch.autograd.grad(y, x, create_graph=True)
(h,) = torch.autograd.grad(g.sum(), x)
w = torch.tensor([0.5, -1.0], requires_grad=True)
inp = torch.tensor([[1.0, 2.0], [3.0, -1.0]], requires_grad=True)
out = torch.tanh(inp @ w).sum()
(gi,) = torch.autograd.grad(out, inp, create_graph=True)
penalty = (gi.norm() - 1) ** 2
penalty.backward()
RESULTS = {"g": g.tolist(), "h": h.tolist(), "penalty": penalty.item(), "w_grad": w.grad.tolist()}
