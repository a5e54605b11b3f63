# pytorch/examples "mnist" network on random images: Conv2d, max_pool2d, dropout in eval,
# log_softmax + nll_loss, Adadelta-free SGD, a DataLoader over a TensorDataset.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.conv2 = nn.Conv2d(4, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(8 * 4 * 4, 16)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


torch.manual_seed(0)
model = Net()
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.2, 0.2, p.numel()).reshape(p.shape) * (1 + 0.1 * k))
images = torch.linspace(0, 1, 8 * 12 * 12).reshape(8, 1, 12, 12).sin()
labels = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7])
loader = DataLoader(TensorDataset(images, labels), batch_size=4, shuffle=False)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
model.eval()    # dropout off, so both libraries compute the same
losses = []
for epoch in range(2):
    for data, target in loader:
        opt.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
RESULTS = {"losses": losses, "batches": len(loader)}
