# pytorch/examples "vae" in small: fc1 -> (mu, logvar) -> reparameterize -> decode with a
# sigmoid, BCE (reduction='sum') + KLD, Adam; the noise of the reparameterisation is fixed
# (torch.randn_like draws differ between libraries).
import torch
import torch.nn.functional as F
from torch import nn, optim


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 8)
        self.fc21 = nn.Linear(8, 2)
        self.fc22 = nn.Linear(8, 2)
        self.fc3 = nn.Linear(2, 8)
        self.fc4 = nn.Linear(8, 12)

    def encode(self, x):
        h1 = F.relu(self.fc1(x))
        return self.fc21(h1), self.fc22(h1)

    def reparameterize(self, mu, logvar, eps):
        std = torch.exp(0.5 * logvar)
        return mu + eps * std

    def decode(self, z):
        h3 = F.relu(self.fc3(z))
        return torch.sigmoid(self.fc4(h3))

    def forward(self, x, eps):
        mu, logvar = self.encode(x.view(-1, 12))
        z = self.reparameterize(mu, logvar, eps)
        return self.decode(z), mu, logvar


def loss_function(recon_x, x, mu, logvar):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 12), reduction="sum")
    KLD = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return BCE + KLD


torch.manual_seed(0)
model = VAE()
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.6, 0.6, p.numel()).reshape(p.shape).cos() - 0.4 + 0.03 * k)
optimizer = optim.Adam(model.parameters(), lr=1e-2)
data = (torch.linspace(0, 6, 4 * 12).reshape(4, 3, 4).sin() + 1) / 2
eps = torch.linspace(-1, 1, 8).reshape(4, 2)
losses = []
model.train()
for epoch in range(4):
    optimizer.zero_grad()
    recon_batch, mu, logvar = model(data, eps)
    loss = loss_function(recon_batch, data, mu, logvar)
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
model.eval()
with torch.no_grad():
    sample = model.decode(torch.tensor([[0.5, -0.5]]))
RESULTS = {"losses": losses, "sample": sample[0, :4].tolist(), "mu": mu[0].tolist()}
