# A part-of-speech tagger in the style of the "Sequence models and LSTM networks" tutorial,
# batched: sentences of different lengths packed with pack_sequence, a 2-layer bidirectional
# LSTM with proj_size, the packed output unpacked and masked in the loss, SGD.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_sequence, pad_packed_sequence, unpack_sequence

word_to_ix = {"The": 0, "dog": 1, "ate": 2, "the": 3, "apple": 4, "Everybody": 5,
              "read": 6, "that": 7, "book": 8}
training_data = [("The dog ate the apple".split(), [0, 1, 2, 0, 1]),
                 ("Everybody read that book".split(), [1, 2, 0, 1]),
                 ("The book".split(), [0, 1])]


class LSTMTagger(nn.Module):
    def __init__(self, embedding_dim, hidden_dim, vocab_size, tagset_size):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab_size, embedding_dim)
        self.lstm = nn.LSTM(embedding_dim, hidden_dim, num_layers=2, bidirectional=True,
                            proj_size=3)
        self.hidden2tag = nn.Linear(6, tagset_size)

    def forward(self, sentences):
        packed = pack_sequence([self.word_embeddings(s) for s in sentences],
                               enforce_sorted=False)
        out, (h, c) = self.lstm(packed)
        padded, lengths = pad_packed_sequence(out, padding_value=-1.0)
        return F.log_softmax(self.hidden2tag(padded), dim=2), lengths, out, h, c


def prepare_sequence(seq, to_ix):
    return torch.tensor([to_ix[w] for w in seq], dtype=torch.long)


torch.manual_seed(1)
model = LSTMTagger(4, 5, len(word_to_ix), 3)
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.8, 0.8, p.numel()).reshape(p.shape).sin() * (0.6 + 0.02 * k))
loss_function = nn.NLLLoss(ignore_index=-100)
optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
sentences = [prepare_sequence(s, word_to_ix) for s, _ in training_data]
targets = nn.utils.rnn.pad_sequence([torch.tensor(t) for _, t in training_data],
                                    padding_value=-100)
losses = []
for epoch in range(4):
    model.zero_grad()
    tag_scores, lengths, packed_out, h, c = model(sentences)
    loss = loss_function(tag_scores.reshape(-1, 3), targets.reshape(-1))
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
with torch.no_grad():
    tag_scores, lengths, packed_out, h, c = model(sentences)
    tags = [s[:n].argmax(dim=1).tolist() for s, n in zip(tag_scores.unbind(1), lengths)]
RESULTS = {"losses": losses, "tags": tags, "lengths": lengths.tolist(),
           "batch_sizes": packed_out.batch_sizes.tolist(), "h": list(h.shape),
           "c": list(c.shape), "unpacked": [len(s) for s in unpack_sequence(packed_out)]}
