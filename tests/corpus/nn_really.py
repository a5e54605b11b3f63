# "What is torch.nn really?": a logistic regression written with tensors (manual weights,
# log_softmax, nll, accuracy), then refactored step by step: F.cross_entropy, nn.Module with
# nn.Parameter, nn.Linear, optim, TensorDataset and DataLoader, a Lambda layer, a CNN with
# nn.Sequential and AdaptiveAvgPool2d, a WrappedDataLoader with a preprocess function.
import math

import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

n, d, classes = 32, 16, 4
x_train = (torch.arange(n * d, dtype=torch.float32).reshape(n, d) * 0.37).sin()
y_train = torch.arange(n) % classes
x_valid, y_valid = x_train[:8] * 0.5, y_train[:8]
bs, lr = 8, 0.5

weights = torch.linspace(-1, 1, d * classes).reshape(d, classes) / math.sqrt(d)
weights.requires_grad_()
bias = torch.zeros(classes, requires_grad=True)


def log_softmax(x):
    return x - x.exp().sum(-1).log().unsqueeze(-1)


def model(xb):
    return log_softmax(xb @ weights + bias)


def nll(input, target):
    # (the tutorial indexes with range(...): tapegrad's indexing takes a list of it)
    return -input[list(range(target.shape[0])), target].mean()


def accuracy(out, yb):
    preds = torch.argmax(out, dim=1)
    return (preds == yb).float().mean()


for epoch in range(2):
    for i in range((n - 1) // bs + 1):
        start_i = i * bs
        xb, yb = x_train[start_i:start_i + bs], y_train[start_i:start_i + bs]
        loss = nll(model(xb), yb)
        loss.backward()
        with torch.no_grad():
            weights -= weights.grad * lr
            bias -= bias.grad * lr
            weights.grad.zero_()
            bias.grad.zero_()
manual = [nll(model(x_train), y_train).item(), accuracy(model(x_train), y_train).item(),
          F.cross_entropy(x_train @ weights + bias, y_train).item()]


class Mnist_Logistic(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(d, classes)

    def forward(self, xb):
        return self.lin(xb)


def get_model():
    model = Mnist_Logistic()
    with torch.no_grad():
        model.lin.weight.copy_(torch.linspace(-1, 1, d * classes).reshape(classes, d) / 4)
        model.lin.bias.zero_()
    return model, optim.SGD(model.parameters(), lr=lr)


def loss_batch(model, loss_func, xb, yb, opt=None):
    loss = loss_func(model(xb), yb)
    if opt is not None:
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.item(), len(xb)


def fit(epochs, model, loss_func, opt, train_dl, valid_dl):
    history = []
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_dl:
            loss_batch(model, loss_func, xb, yb, opt)
        model.eval()
        with torch.no_grad():
            losses, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl])
        history.append(sum(l * m for l, m in zip(losses, nums)) / sum(nums))
    return history


train_dl = DataLoader(TensorDataset(x_train, y_train), batch_size=bs)
valid_dl = DataLoader(TensorDataset(x_valid, y_valid), batch_size=bs * 2)
model, opt = get_model()
logistic = fit(3, model, F.cross_entropy, opt, train_dl, valid_dl)


class Lambda(nn.Module):
    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, x):
        return self.func(x)


def preprocess(x, y):
    return x.view(-1, 1, 4, 4), y


class WrappedDataLoader:
    def __init__(self, dl, func):
        self.dl, self.func = dl, func

    def __len__(self):
        return len(self.dl)

    def __iter__(self):
        for b in self.dl:
            yield self.func(*b)


cnn = nn.Sequential(
    nn.Conv2d(1, 4, kernel_size=3, stride=1, padding=1), nn.ReLU(),
    nn.Conv2d(4, classes, kernel_size=3, stride=2, padding=1), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), Lambda(lambda x: x.view(x.size(0), -1)))
with torch.no_grad():
    for k, p in enumerate(cnn.parameters()):
        p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape).cos() * (0.5 - 0.1 * k))
opt = optim.SGD(cnn.parameters(), lr=0.1, momentum=0.9)
cnn_history = fit(2, cnn, F.cross_entropy, opt, WrappedDataLoader(train_dl, preprocess),
                  WrappedDataLoader(valid_dl, preprocess))
RESULTS = {"manual": manual, "logistic": logistic, "cnn": cnn_history,
           "batches": len(train_dl)}
