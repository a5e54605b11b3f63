# Training utilities: LayerNorm, Embedding, Dropout modes, clip_grad_norm_, lr_scheduler,
# state_dict round trip through save/load, forward hooks.
import os
import tempfile

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.norm = nn.LayerNorm(4)
        self.drop = nn.Dropout(0.5)
        self.out = nn.Linear(4, 1)

    def forward(self, idx):
        return self.out(self.drop(self.norm(self.emb(idx)))).squeeze(-1)


torch.manual_seed(0)
model = Model()
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) + 0.05 * k)
shapes = []
model.norm.register_forward_hook(lambda m, inp, out: shapes.append(tuple(out.shape)))
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
idx = torch.tensor([[1, 2, 3], [4, 5, 6]])
target = torch.tensor([[0.5, -0.5, 1.0], [0.0, 0.25, -1.0]])
model.eval()
lrs, norms = [], []
for step in range(5):
    opt.zero_grad()
    loss = ((model(idx) - target) ** 2).mean()
    loss.backward()
    norms.append(float(nn.utils.clip_grad_norm_(model.parameters(), 1.0)))
    opt.step()
    sched.step()
    lrs.append(sched.get_last_lr()[0])
path = os.path.join(tempfile.mkdtemp(), "model.pt")
torch.save(model.state_dict(), path)
fresh = Model()
fresh.load_state_dict(torch.load(path))
fresh.eval()
model.train()
train_mode = [m.training for m in model.modules()]
RESULTS = {"loss": loss.item(), "lrs": lrs, "norms": norms, "shapes": shapes[:1],
           "same": torch.allclose(fresh(idx), model.eval()(idx)), "train_mode": train_mode}
