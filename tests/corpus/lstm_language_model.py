# pytorch/examples "word_language_model" in small: Embedding, LSTM, Linear, cross_entropy.
import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, input, hidden):
        emb = self.encoder(input)
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(output).view(-1, self.decoder.out_features), hidden


torch.manual_seed(0)
model = RNNModel(12, 6, 5, 2)
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.3, 0.3, p.numel()).reshape(p.shape) * (1 + 0.05 * k))
data = torch.tensor([[1, 2], [3, 4], [5, 6], [7, 8]])
targets = torch.tensor([2, 3, 4, 5, 6, 7, 8, 9])
hidden = (torch.zeros(2, 2, 5), torch.zeros(2, 2, 5))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
losses = []
for step in range(3):
    opt.zero_grad()
    output, h = model(data, hidden)
    loss = nn.functional.cross_entropy(output, targets)
    loss.backward()
    opt.step()
    losses.append(loss.item())
RESULTS = {"losses": losses, "h": list(h[0].shape)}
