# pytorch/examples "time_sequence_prediction" in small: two stacked LSTMCells over sine waves,
# future steps fed back, trained by LBFGS with a closure (few iterations, so float32 and
# float64 runs stay close).
import torch
import torch.nn as nn
import torch.optim as optim


class Sequence(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 6)
        self.lstm2 = nn.LSTMCell(6, 6)
        self.linear = nn.Linear(6, 1)

    def forward(self, input, future=0):
        outputs = []
        h_t = torch.zeros(input.size(0), 6, dtype=input.dtype)
        c_t = torch.zeros(input.size(0), 6, dtype=input.dtype)
        h_t2 = torch.zeros(input.size(0), 6, dtype=input.dtype)
        c_t2 = torch.zeros(input.size(0), 6, dtype=input.dtype)
        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        return torch.cat(outputs, dim=1)


t = torch.arange(12).reshape(1, 12) + torch.tensor([[0.0], [3.0], [7.0]])
data = torch.sin(t / 2.0)
input, target = data[:, :-1], data[:, 1:]
seq = Sequence()
with torch.no_grad():
    for k, p in enumerate(seq.parameters()):
        p.copy_(torch.linspace(-0.4, 0.4, p.numel()).reshape(p.shape).cos() * (0.5 - 0.05 * k))
criterion = nn.MSELoss()
optimizer = optim.LBFGS(seq.parameters(), lr=0.5, max_iter=3)
losses = []
for i in range(2):
    def closure():
        optimizer.zero_grad()
        out = seq(input)
        loss = criterion(out, target)
        losses.append(loss.item())
        loss.backward()
        return loss
    optimizer.step(closure)
with torch.no_grad():
    future = 3
    pred = seq(input[:1], future=future)
    test_loss = criterion(pred[:, :-future], target[:1])
RESULTS = {"losses": losses, "test_loss": test_loss.item(), "pred": pred[0, -3:].tolist()}
