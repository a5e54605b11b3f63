# Views and in-place ops as real code writes them: a matrix built column by column into a
# preallocated tensor, each state of a recurrence stored in a row of an output, and a model
# that shifts a column and scales a row of its features in place.
import torch

x = torch.linspace(-1.0, 1.0, 5)
V = torch.zeros(5, 4)
for i in range(4):
    V[:, i] = x ** i                    # Vandermonde matrix
w = torch.tensor([0.5, -1.0, 0.25, 2.0], requires_grad=True)
y = V @ w

W = torch.tensor([[0.5, -0.2], [0.1, 0.3]], requires_grad=True)
h = torch.zeros(2)
states = torch.zeros(4, 2)
for t in range(4):
    h = torch.tanh(W @ h + y[t])
    states[t] = h
loss = (states ** 2).sum()

feats = states * 1.0
feats[:, 0] += 1.0                      # x[:, 0] += 1 inside a model
feats.t()[1].mul_(2.0)                  # through a transposed view
row = feats[2]
first = feats.view(-1)[:3]
loss = loss + (feats ** 2).sum() + row.sum() + first.sum()
loss.backward()
RESULTS = {
    "V": V.tolist(),
    "states": states.tolist(),
    "feats": feats.tolist(),
    "loss": loss.item(),
    "w_grad": w.grad.tolist(),
    "W_grad": W.grad.tolist(),
    "nodes": [type(t.grad_fn).__name__ for t in (states, feats, row, first)],
    "row_views_feats": row._base is feats,
}
