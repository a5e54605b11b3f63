# The "Autograd mechanics" note: requires_grad propagation and freezing a pretrained part,
# grad modes (no_grad, enable_grad, set_grad_enabled, inference_mode), in-place correctness
# (a saved tensor modified in place is an error), saved tensors hooks that keep copies.
import torch
import torch.nn as nn

# excluding a part of the model from gradient computation
model = nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2))
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-1, 1, p.numel()).reshape(p.shape) * (0.5 + 0.1 * k))
for param in model[0].parameters():
    param.requires_grad = False
x = torch.linspace(-1, 1, 8).reshape(2, 4)
out = model(x)
out.sum().backward()
frozen = [model[0].weight.grad is None, model[2].weight.grad.tolist(), out.requires_grad]

# grad modes
x = torch.ones(2, requires_grad=True)
with torch.no_grad():
    a = x * 2
    with torch.enable_grad():
        b = x * 2
with torch.set_grad_enabled(False):
    c = x * 2
torch.set_grad_enabled(True)
with torch.inference_mode():
    d = x * 2
modes = [a.requires_grad, b.requires_grad, c.requires_grad, d.requires_grad,
         torch.is_grad_enabled()]

# in-place correctness checks
y = torch.tensor([0.5, 1.5], requires_grad=True)
e = y.exp()
e.add_(1)          # exp saved its result: the backward must refuse
try:
    e.sum().backward()
    inplace = "no error"
except RuntimeError as err:
    inplace = "modified by an inplace operation" in str(err)
f = y.sin()
f.mul_(2)          # sin saved its input, which is untouched: fine
f.sum().backward()

# saved tensors hooks: pack a copy, unpack it
saved = []


def pack_hook(t):
    saved.append(t.detach().clone())
    return len(saved) - 1


def unpack_hook(k):
    return saved[k]


w = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
    z = (w * w).pow(3).sum()
z.backward()
RESULTS = {"frozen": frozen, "modes": modes, "inplace": inplace, "sin_grad": y.grad.tolist(),
           "hooks": [len(saved) > 0, w.grad.tolist()]}
