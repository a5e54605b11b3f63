# A custom nn.Module with a parameter and a buffer-free forward; named_parameters, state_dict.
import torch
import torch.nn as nn


class Affine(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([2.0, 3.0]))
        self.lin = nn.Linear(2, 1)

    def forward(self, x):
        return self.lin(x * self.scale)


torch.manual_seed(0)
m = Affine()
with torch.no_grad():
    m.lin.weight.copy_(torch.tensor([[0.5, -0.25]]))
    m.lin.bias.fill_(0.1)
out = m(torch.tensor([[1.0, 2.0]])).sum()
out.backward()
RESULTS = {"names": [n for n, _ in m.named_parameters()], "keys": list(m.state_dict().keys()),
           "out": out.item(), "scale_grad": m.scale.grad.tolist()}
