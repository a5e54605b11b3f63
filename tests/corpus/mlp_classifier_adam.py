# A small MLP classifier: Sequential, ReLU, CrossEntropyLoss, Adam, eval under no_grad.
import torch
import torch.nn as nn

torch.manual_seed(0)
X = torch.tensor([[0.0, 0.0], [0.0, 1.0], [1.0, 0.0], [1.0, 1.0]] * 4)
y = torch.tensor([0, 1, 1, 0] * 4)
model = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 2))
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (1 + 0.1 * k))
opt = torch.optim.Adam(model.parameters(), lr=0.05)
loss_fn = nn.CrossEntropyLoss()
for epoch in range(30):
    opt.zero_grad()
    loss = loss_fn(model(X), y)
    loss.backward()
    opt.step()
with torch.no_grad():
    pred = model(X).argmax(dim=1)
RESULTS = {"loss": loss.item(), "accuracy": (pred == y).float().mean().item()}
