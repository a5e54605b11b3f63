# In-place ops on a non-leaf keep the graph right; changing a saved tensor is caught.
import torch

a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = a * 2
b.add_(1)
b.mul_(3)
b.sum().backward()
c = torch.tensor([1.0, 2.0], requires_grad=True)
d = c.exp()
e = d * 2
d.add_(1)          # exp saved its result: changing it breaks the backward
try:
    d.sum().backward()
    caught = False
except RuntimeError as err:
    caught = "inplace" in str(err)
RESULTS = {"a_grad": a.grad.tolist(), "caught": caught}
