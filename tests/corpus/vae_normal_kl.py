# A VAE's loss as pytorch/examples and the tutorials write it with torch.distributions:
# q(z|x) = Normal(mu, std), the KL to the Normal(0, 1) prior by kl_divergence, a Gaussian
# likelihood by log_prob, and Independent for the per-sample sums.  The latent sample is
# rsample()'s; to keep the compared output deterministic the loss is also taken at a fixed
# noise (mu + std * eps, the reparameterisation rsample uses), and rsample is only checked
# for its shape and for passing gradients.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Independent, Normal, kl_divergence


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(6, 8)
        self.mu = nn.Linear(8, 2)
        self.logvar = nn.Linear(8, 2)
        self.dec = nn.Linear(2, 6)

    def encode(self, x):
        h = F.relu(self.enc(x))
        return self.mu(h), self.logvar(h)


model = VAE()
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.4, 0.4, p.numel()).reshape(p.shape) * (1 - 0.05 * k))

x = torch.linspace(-1, 1, 24).reshape(4, 6)
eps = torch.linspace(-1.5, 1.5, 8).reshape(4, 2)
mu, logvar = model.encode(x)
std = torch.exp(0.5 * logvar)
q = Normal(mu, std)
prior = Normal(torch.zeros_like(mu), torch.ones_like(std))
z_sampled = q.rsample()
z = mu + std * eps
recon = model.dec(z)
likelihood = Independent(Normal(recon, torch.ones_like(recon) * 0.5), 1)
kl = kl_divergence(q, prior).sum(-1)
loss = (kl - likelihood.log_prob(x)).mean()
loss.backward()
closed_form = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp(), dim=-1)

RESULTS = {"loss": loss.item(), "kl": kl.tolist(), "closed_form_kl": closed_form.tolist(),
           "log_prob": likelihood.log_prob(x).tolist(), "entropy": q.entropy().sum().item(),
           "z_shape": list(z_sampled.shape), "z_requires_grad": z_sampled.requires_grad,
           "event_shape": list(likelihood.event_shape),
           "grad_mu_weight": model.mu.weight.grad.tolist(),
           "grad_logvar_bias": model.logvar.bias.grad.tolist()}
