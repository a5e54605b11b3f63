# pytorch/examples "dcgan" in small: a Generator of ConvTranspose2d + BatchNorm2d + ReLU + Tanh,
# a Discriminator of Conv2d + LeakyReLU + BatchNorm2d + Sigmoid, weights_init by class name,
# BCELoss with real and fake labels, one Adam step each (fixed noise: draws differ between
# libraries), BatchNorm in training mode (batch statistics, running averages updated).
import torch
import torch.nn as nn
import torch.optim as optim

nz, ngf, ndf, nc = 4, 4, 4, 1


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False),
            nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, nc, 4, 2, 1, bias=False),
            nn.Tanh())

    def forward(self, input):
        return self.main(input)


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(ndf, ndf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ndf * 2),
            nn.LeakyReLU(0.2, inplace=True), nn.Flatten(), nn.Linear(ndf * 2, 1), nn.Sigmoid())

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def weights_init(m):
    classname = m.__class__.__name__
    with torch.no_grad():
        if classname.find("Conv") != -1 or classname.find("Linear") != -1:
            m.weight.copy_(torch.linspace(-0.3, 0.3, m.weight.numel()).reshape(m.weight.shape)
                           .sin())
            if m.bias is not None:
                m.bias.fill_(0.01)
        elif classname.find("BatchNorm") != -1:
            m.weight.copy_(1.0 + torch.linspace(-0.1, 0.1, m.weight.numel()))
            nn.init.constant_(m.bias, 0.05)


netG, netD = Generator(), Discriminator()
netG.apply(weights_init)
netD.apply(weights_init)
criterion = nn.BCELoss()
batch_size = 3
fixed_noise = torch.linspace(-1, 1, batch_size * nz).reshape(batch_size, nz, 1, 1)
real = torch.linspace(-1, 1, batch_size * 8 * 8).reshape(batch_size, 1, 8, 8).sin()
real_label, fake_label = 1.0, 0.0
optimizerD = optim.Adam(netD.parameters(), lr=0.01, betas=(0.5, 0.999))
optimizerG = optim.Adam(netG.parameters(), lr=0.01, betas=(0.5, 0.999))
history = []
for i in range(2):
    netD.zero_grad()
    label = torch.full((batch_size,), real_label, dtype=real.dtype)
    output = netD(real)
    errD_real = criterion(output, label)
    errD_real.backward()
    fake = netG(fixed_noise)
    label.fill_(fake_label)
    output = netD(fake.detach())
    errD_fake = criterion(output, label)
    errD_fake.backward()
    optimizerD.step()
    netG.zero_grad()
    label.fill_(real_label)
    output = netD(fake)
    errG = criterion(output, label)
    errG.backward()
    optimizerG.step()
    history.append([(errD_real + errD_fake).item(), errG.item(), output.mean().item()])
bn = netG.main[1]
RESULTS = {"history": history, "fake": list(fake.shape), "running_mean": bn.running_mean.tolist(),
           "batches_tracked": bn.num_batches_tracked.item()}
