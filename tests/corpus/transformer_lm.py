# The "language modeling with nn.Transformer" tutorial in small: PositionalEncoding,
# TransformerEncoder with a causal mask (nn.Transformer.generate_square_subsequent_mask),
# and a full nn.Transformer encoder-decoder step; dropout 0 so both libraries agree.
import math

import torch
import torch.nn as nn


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=16):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[:x.size(0)]


class TransformerModel(nn.Module):
    def __init__(self, ntoken, d_model, nhead, d_hid, nlayers):
        super().__init__()
        self.pos_encoder = PositionalEncoding(d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, d_hid, dropout=0.0)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers,
                                                         enable_nested_tensor=False)
        self.embedding = nn.Embedding(ntoken, d_model)
        self.d_model = d_model
        self.linear = nn.Linear(d_model, ntoken)

    def forward(self, src, src_mask=None):
        src = self.pos_encoder(self.embedding(src) * math.sqrt(self.d_model))
        return self.linear(self.transformer_encoder(src, src_mask))


def fill(model, scale):
    with torch.no_grad():
        for k, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-1.0, 1.0, p.numel()).reshape(p.shape).sin() * scale
                    * (1 + 0.02 * k))


torch.manual_seed(0)
model = TransformerModel(11, 8, 2, 16, 2)
fill(model, 0.3)
data = torch.tensor([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]])
targets = torch.tensor([[3, 4], [5, 6], [7, 8], [9, 10], [1, 2]]).reshape(-1)
mask = nn.Transformer.generate_square_subsequent_mask(data.size(0))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
losses = []
for step in range(3):
    optimizer.zero_grad()
    output = model(data, mask)
    loss = nn.functional.cross_entropy(output.view(-1, 11), targets)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())

seq2seq = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=2,
                         dim_feedforward=12, dropout=0.0, batch_first=True)
fill(seq2seq, 0.4)
src = torch.linspace(-1, 1, 2 * 5 * 8).reshape(2, 5, 8)
tgt = torch.linspace(1, -1, 2 * 3 * 8).reshape(2, 3, 8).cos()
out = seq2seq(src, tgt, tgt_mask=seq2seq.generate_square_subsequent_mask(3),
              src_key_padding_mask=torch.tensor([[False] * 5, [False] * 4 + [True]]))
out.pow(2).mean().backward()
RESULTS = {"losses": losses, "mask": mask[1].tolist(), "out": out[1, 2, :3].tolist(),
           "grad": seq2seq.decoder.layers[1].multihead_attn.in_proj_weight.grad.norm().item(),
           "params": sum(p.numel() for p in seq2seq.parameters())}
