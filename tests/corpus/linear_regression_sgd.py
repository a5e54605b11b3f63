# Linear regression with nn.Linear, MSELoss and SGD: the first loop of every tutorial.
import torch
import torch.nn as nn

torch.manual_seed(0)
X = torch.linspace(-1, 1, 20).reshape(20, 1)
y = 3.0 * X - 0.5
model = nn.Linear(1, 1)
with torch.no_grad():
    model.weight.fill_(0.1)
    model.bias.fill_(0.0)
loss_fn = nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
losses = []
for step in range(50):
    opt.zero_grad()
    loss = loss_fn(model(X), y)
    loss.backward()
    opt.step()
    losses.append(loss.item())
RESULTS = {"losses": losses[::10], "weight": model.weight.item(), "bias": model.bias.item()}
