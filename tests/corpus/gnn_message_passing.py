# Graph message passing as PyTorch Geometric-style code writes it without the library:
# messages gathered by index_select, aggregated per node with scatter_reduce (sum, mean,
# amax with include_self=False), index_add_ and scatter_add; a two-layer GCN trained with Adam.
import torch
import torch.nn as nn
import torch.nn.functional as F

edge_index = torch.tensor([[0, 1, 1, 2, 3, 3, 4, 5, 5, 0],
                           [1, 0, 2, 1, 4, 2, 3, 4, 0, 5]])
num_nodes, features = 6, 3
x = torch.linspace(-1, 1, num_nodes * features).reshape(num_nodes, features).sin()


def aggregate(messages, dst, reduce):
    index = dst.unsqueeze(1).expand(-1, messages.size(1))
    out = torch.zeros(num_nodes, messages.size(1), dtype=messages.dtype)
    return out.scatter_reduce(0, index, messages, reduce=reduce, include_self=False)


class GCNLayer(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)

    def forward(self, x, edge_index):
        src, dst = edge_index
        deg = torch.zeros(num_nodes).index_add_(0, dst, torch.ones(dst.size(0)))
        norm = deg.clamp(min=1).pow(-0.5)
        messages = self.lin(x).index_select(0, src) * (norm[src] * norm[dst]).unsqueeze(1)
        out = torch.zeros(num_nodes, messages.size(1)).scatter_add(
            0, dst.unsqueeze(1).expand_as(messages), messages)
        return out + aggregate(messages, dst, "amax") * 0.1


class GCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = GCNLayer(features, 5)
        self.conv2 = GCNLayer(5, 2)

    def forward(self, x, edge_index):
        return self.conv2(F.relu(self.conv1(x, edge_index)), edge_index)


torch.manual_seed(0)
model = GCN()
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.7, 0.7, p.numel()).reshape(p.shape).cos() * (1 - 0.2 * k))
labels = torch.tensor([0, 1, 0, 1, 1, 0])
optimizer = torch.optim.Adam(model.parameters(), lr=0.05, weight_decay=5e-4)
losses = []
for epoch in range(5):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x, edge_index), labels)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
src, dst = edge_index
messages = x.index_select(0, src)
pooled = {r: aggregate(messages, dst, r)[:, 0].tolist() for r in ("sum", "mean", "amax", "amin")}
products = torch.ones(num_nodes, features).scatter_reduce(
    0, dst.unsqueeze(1).expand(-1, features), messages, "prod")
RESULTS = {"losses": losses, "pooled": pooled, "prod": products[1].tolist()}
