# Hooks on a leaf and on an intermediate, and retain_grad.
import torch

seen = []
a = torch.tensor(2.0, requires_grad=True)
b = a * 3
b.register_hook(lambda g: seen.append(g.item()) or g * 2)
b.retain_grad()
c = b ** 2
a.register_hook(lambda g: g + 1)
c.backward()
RESULTS = {"seen": seen, "b_grad": b.grad.item(), "a_grad": a.grad.item()}
