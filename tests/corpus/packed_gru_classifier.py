# A sequence classifier as the tutorials write it: an Embedding, a bidirectional GRU over a
# PackedSequence (pack_padded_sequence with enforce_sorted=False, pad_packed_sequence back),
# the last hidden states of both directions into a Linear, cross_entropy, Adam.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence


class Classifier(nn.Module):
    def __init__(self, vocab, emb, hidden, classes):
        super().__init__()
        self.embedding = nn.Embedding(vocab, emb, padding_idx=0)
        self.rnn = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, tokens, lengths):
        packed = pack_padded_sequence(self.embedding(tokens), lengths, batch_first=True,
                                      enforce_sorted=False)
        out, h = self.rnn(packed)
        padded, out_lengths = pad_packed_sequence(out, batch_first=True)
        return self.fc(torch.cat([h[0], h[1]], dim=1)), padded, out_lengths


torch.manual_seed(0)
model = Classifier(10, 4, 5, 3)
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape).cos() * (0.3 + 0.05 * k))
sentences = [torch.tensor([3, 1, 4]), torch.tensor([1, 5, 9, 2, 6]), torch.tensor([5]),
             torch.tensor([3, 5, 8, 9])]
lengths = torch.tensor([len(s) for s in sentences])
tokens = pad_sequence(sentences, batch_first=True)
labels = torch.tensor([0, 2, 1, 2])
opt = torch.optim.Adam(model.parameters(), lr=0.05)
losses = []
for step in range(4):
    opt.zero_grad()
    logits, padded, out_lengths = model(tokens, lengths)
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    opt.step()
    losses.append(loss.item())
RESULTS = {"losses": losses, "padded": list(padded.shape), "lengths": out_lengths.tolist(),
           "pad_sum": padded[2, 1:].abs().sum().item(),
           "grad_norm": model.embedding.weight.grad.norm().item()}
