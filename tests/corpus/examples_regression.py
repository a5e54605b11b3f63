# pytorch/examples "regression": polynomial features, smooth_l1_loss, .data updates.
import torch
import torch.nn.functional as F

POLY_DEGREE = 4
W_target = torch.tensor([[0.5], [-1.0], [0.25], [2.0]])
b_target = torch.tensor([0.3])


def make_features(x):
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def f(x):
    return x.mm(W_target) + b_target.item()


torch.manual_seed(0)
fc = torch.nn.Linear(W_target.size(0), 1)
with torch.no_grad():
    fc.weight.zero_()
    fc.bias.zero_()
for batch_idx in range(200):
    batch_x = make_features(torch.linspace(-1, 1, 32) * (0.5 + (batch_idx % 5) / 10))
    batch_y = f(batch_x)
    fc.zero_grad()
    output = F.smooth_l1_loss(fc(batch_x), batch_y)
    loss = output.item()
    output.backward()
    for param in fc.parameters():
        param.data.add_(-0.1 * param.grad)
RESULTS = {"loss": loss, "weight": fc.weight.view(-1).tolist(), "bias": fc.bias.item()}
