# The "NLP from scratch: translation with a sequence to sequence network" tutorial in small:
# an EncoderRNN and a DecoderRNN (GRU) with teacher forcing, NLLLoss over log_softmax, SGD.
import torch
import torch.nn as nn
import torch.nn.functional as F


class EncoderRNN(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.embedding = nn.Embedding(input_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)

    def forward(self, input):
        return self.gru(self.embedding(input))


class DecoderRNN(nn.Module):
    def __init__(self, hidden_size, output_size):
        super().__init__()
        self.embedding = nn.Embedding(output_size, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True)
        self.out = nn.Linear(hidden_size, output_size)

    def forward(self, encoder_hidden, target):
        batch_size = target.size(0)
        decoder_input = torch.zeros(batch_size, 1, dtype=torch.long)   # SOS = 0
        hidden = encoder_hidden
        outputs = []
        for i in range(target.size(1)):
            output, hidden = self.gru(F.relu(self.embedding(decoder_input)), hidden)
            outputs.append(self.out(output))
            decoder_input = target[:, i].unsqueeze(1)        # teacher forcing
        return F.log_softmax(torch.cat(outputs, dim=1), dim=-1), hidden


torch.manual_seed(0)
encoder, decoder = EncoderRNN(7, 6), DecoderRNN(6, 8)
with torch.no_grad():
    for k, p in enumerate(list(encoder.parameters()) + list(decoder.parameters())):
        p.copy_(torch.linspace(-0.4, 0.4, p.numel()).reshape(p.shape).sin() * (1 + 0.1 * k))
source = torch.tensor([[1, 2, 3, 4], [4, 3, 2, 1], [5, 6, 5, 6]])
target = torch.tensor([[2, 3, 4, 7], [5, 4, 3, 7], [6, 1, 6, 7]])
params = list(encoder.parameters()) + list(decoder.parameters())
optimizer = torch.optim.SGD(params, lr=0.2)
criterion = nn.NLLLoss()
losses = []
for epoch in range(3):
    optimizer.zero_grad()
    encoder_outputs, encoder_hidden = encoder(source)
    decoder_outputs, _ = decoder(encoder_hidden, target)
    loss = criterion(decoder_outputs.view(-1, decoder_outputs.size(-1)), target.view(-1))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(params, 1.0)
    optimizer.step()
    losses.append(loss.item())
with torch.no_grad():
    _, hidden = encoder(source)
    greedy = decoder(hidden, target)[0].argmax(-1)
RESULTS = {"losses": losses, "greedy": greedy.tolist(),
           "encoder_outputs": list(encoder_outputs.shape)}
