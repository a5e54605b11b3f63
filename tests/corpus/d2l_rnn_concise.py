# d2l.ai "Concise implementation of recurrent neural networks": nn.RNN over one-hot inputs
# (F.one_hot of the transposed batch), an RNNModel with a Linear head, gradient clipping by
# the global norm written by hand as d2l's grad_clipping, perplexity, greedy prediction.
import math

import torch
from torch import nn
from torch.nn import functional as F


class RNNModel(nn.Module):
    def __init__(self, rnn_layer, vocab_size):
        super().__init__()
        self.rnn = rnn_layer
        self.vocab_size = vocab_size
        self.num_hiddens = self.rnn.hidden_size
        self.num_directions = 2 if self.rnn.bidirectional else 1
        self.linear = nn.Linear(self.num_hiddens * self.num_directions, self.vocab_size)

    def forward(self, inputs, state):
        X = F.one_hot(inputs.T.long(), self.vocab_size)
        # (d2l writes X.to(torch.float32): the modules' dtype, tapegrad's default being float64)
        X = X.to(self.linear.weight.dtype)
        Y, state = self.rnn(X, state)
        output = self.linear(Y.reshape((-1, Y.shape[-1])))
        return output, state

    def begin_state(self, batch_size=1):
        if not isinstance(self.rnn, nn.LSTM):
            return torch.zeros((self.num_directions * self.rnn.num_layers, batch_size,
                                self.num_hiddens))
        return (torch.zeros((self.num_directions * self.rnn.num_layers, batch_size,
                             self.num_hiddens)),
                torch.zeros((self.num_directions * self.rnn.num_layers, batch_size,
                             self.num_hiddens)))


def grad_clipping(net, theta):
    params = [p for p in net.parameters() if p.requires_grad]
    norm = torch.sqrt(sum(torch.sum((p.grad ** 2)) for p in params))
    if norm > theta:
        for param in params:
            param.grad[:] *= theta / norm


def predict(prefix, num_preds, net):
    state = net.begin_state(batch_size=1)
    outputs = [prefix[0]]
    get_input = lambda: torch.tensor([outputs[-1]]).reshape((1, 1))
    for y in prefix[1:]:
        _, state = net(get_input(), state)
        outputs.append(y)
    for _ in range(num_preds):
        y, state = net(get_input(), state)
        outputs.append(int(y.argmax(dim=1).reshape(1)))
    return outputs


vocab_size, num_hiddens = 6, 8
results = {}
for name, layer in (("rnn", nn.RNN(vocab_size, num_hiddens)),
                    ("gru", nn.GRU(vocab_size, num_hiddens, num_layers=2)),
                    ("lstm", nn.LSTM(vocab_size, num_hiddens))):
    net = RNNModel(layer, vocab_size)
    with torch.no_grad():
        for k, p in enumerate(net.parameters()):
            p.copy_(torch.linspace(-0.6, 0.6, p.numel()).reshape(p.shape).sin()
                    * (0.7 + 0.05 * k))
    corpus = torch.tensor([0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 2, 4, 1, 3, 5])
    X = torch.stack([corpus[0:5], corpus[6:11]])
    Y = torch.stack([corpus[1:6], corpus[7:12]])
    loss = nn.CrossEntropyLoss()
    updater = torch.optim.SGD(net.parameters(), lr=1.0)
    perplexities = []
    for epoch in range(3):
        state = net.begin_state(batch_size=X.shape[0])
        y = Y.T.reshape(-1)
        y_hat, state = net(X, state)
        l = loss(y_hat, y.long()).mean()
        updater.zero_grad()
        l.backward()
        grad_clipping(net, 1)
        updater.step()
        perplexities.append(math.exp(l.item()))
    results[name] = {"perplexity": perplexities, "predict": predict([0, 1], 4, net)}
RESULTS = results
