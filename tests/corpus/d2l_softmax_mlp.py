# d2l.ai chapters 4-5 in small: softmax regression from scratch (a softmax by hand, cross
# entropy by indexing, sgd by hand), then the concise MLP (nn.Sequential with Flatten, ReLU,
# weight decay through optim.SGD), evaluated with accuracy and an Accumulator.
import torch
from torch import nn

num_inputs, num_outputs = 8, 3
features = (torch.arange(24 * num_inputs, dtype=torch.float32).reshape(24, 2, 4) * 0.21).cos()
labels = torch.arange(24) % num_outputs
W = torch.linspace(-0.1, 0.1, num_inputs * num_outputs).reshape(num_inputs, num_outputs)
W.requires_grad_(True)
b = torch.zeros(num_outputs, requires_grad=True)


def softmax(X):
    X_exp = torch.exp(X)
    partition = X_exp.sum(1, keepdim=True)
    return X_exp / partition


def net(X):
    return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b)


def cross_entropy(y_hat, y):
    # (d2l indexes with range(...): tapegrad's indexing takes a list of it)
    return -torch.log(y_hat[list(range(len(y_hat))), y])


def accuracy(y_hat, y):
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = y_hat.argmax(axis=1)
    cmp = y_hat.type(y.dtype) == y
    return float(cmp.type(y.dtype).sum())


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


class Accumulator:
    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def __getitem__(self, idx):
        return self.data[idx]


def batches(batch_size):
    for i in range(0, len(labels), batch_size):
        yield features[i:i + batch_size], labels[i:i + batch_size]


scratch = []
for epoch in range(3):
    metric = Accumulator(3)
    for X, y in batches(6):
        l = cross_entropy(net(X), y)
        l.sum().backward()
        sgd([W, b], 0.5, X.shape[0])
        metric.add(float(l.sum()), accuracy(net(X), y), y.numel())
    scratch.append((metric[0] / metric[2], metric[1] / metric[2]))

mlp = nn.Sequential(nn.Flatten(), nn.Linear(num_inputs, 6), nn.ReLU(), nn.Linear(6, num_outputs))


def init_weights(m):
    if type(m) == nn.Linear:
        with torch.no_grad():
            m.weight.copy_(torch.linspace(-0.5, 0.5, m.weight.numel()).reshape(m.weight.shape))
        nn.init.zeros_(m.bias)


mlp.apply(init_weights)
loss = nn.CrossEntropyLoss(reduction="none")
trainer = torch.optim.SGD(mlp.parameters(), lr=0.3, weight_decay=1e-3)
concise = []
for epoch in range(3):
    for X, y in batches(8):
        l = loss(mlp(X), y)
        trainer.zero_grad()
        l.mean().backward()
        trainer.step()
    with torch.no_grad():
        concise.append(accuracy(mlp(features), labels) / len(labels))
RESULTS = {"scratch": scratch, "concise": concise, "W": W[0].tolist()}
