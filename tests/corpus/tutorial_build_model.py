# PyTorch tutorial "Build the neural network": Flatten, Sequential, Softmax, parameters.
import torch
from torch import nn

device = "cuda" if torch.cuda.is_available() else "cpu"


class NeuralNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.flatten = nn.Flatten()
        self.linear_relu_stack = nn.Sequential(
            nn.Linear(4 * 4, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x):
        x = self.flatten(x)
        logits = self.linear_relu_stack(x)
        return logits


torch.manual_seed(0)
model = NeuralNetwork().to(device)
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.3, 0.3, p.numel()).reshape(p.shape) * (-1) ** k)
X = torch.linspace(0, 1, 3 * 16).reshape(3, 4, 4)
logits = model(X)
pred_probab = nn.Softmax(dim=1)(logits)
y_pred = pred_probab.argmax(1)
names = [(name, list(param.size())) for name, param in model.named_parameters()]
RESULTS = {"probs": pred_probab.tolist(), "pred": y_pred.tolist(), "names": [n for n, _ in names],
           "sizes": [s for _, s in names], "flat": list(nn.Flatten()(X).shape)}
