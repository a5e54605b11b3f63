# Parameters written in place through views under no_grad (initialisation code), then
# trained; a row of the weight read as a view follows the optimiser's in-place updates.
import torch
import torch.nn as nn

lin = nn.Linear(3, 2)
with torch.no_grad():
    lin.weight.zero_()
    lin.weight[0] = torch.tensor([1.0, 2.0, 3.0])
    lin.weight[:, 2].fill_(0.5)
    lin.weight.t()[1].mul_(-1.0)
    lin.weight.diagonal().add_(1.0)
    lin.bias.copy_(torch.tensor([0.1, -0.1]))
x = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
opt = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
row = lin.weight[1]
seen = []
for step in range(4):
    opt.zero_grad()
    loss = (lin(x) ** 2).mean()
    loss.backward()
    opt.step()
    seen.append(row.tolist())
try:
    lin.weight[0].add_(1.0)             # grad mode: a view of a leaf refuses
    refused = ""
except RuntimeError as err:
    refused = str(err)
RESULTS = {
    "weight": lin.weight.tolist(),
    "bias": lin.bias.tolist(),
    "row_after_each_step": seen,
    "is_leaf": lin.weight.is_leaf,
    "refused": refused,
}
