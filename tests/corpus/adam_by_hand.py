# An optimizer written as torch.optim's single-tensor Adam and SGD are (in-place keyword forms:
# mul_(...).add_(grad, alpha=), addcmul_(value=), addcdiv_(value=), add_(alpha=)), trained on a
# small regression next to the library's Adam; the two must agree step by step.
import math

import torch


class MyAdam(torch.optim.Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                grad = p.grad
                if group["weight_decay"] != 0:
                    grad = grad.add(p, alpha=group["weight_decay"])
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                bias_correction1 = 1 - beta1 ** state["step"]
                bias_correction2 = 1 - beta2 ** state["step"]
                step_size = group["lr"] / bias_correction1
                denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
                p.addcdiv_(exp_avg, denom, value=-step_size)


def sgd_momentum(params, bufs, lr=0.05, momentum=0.9, dampening=0.1):
    with torch.no_grad():
        for p, buf in zip(params, bufs):
            buf.mul_(momentum).add_(p.grad, alpha=1 - dampening)
            p.sub_(buf, alpha=lr)
            p.grad.zero_()


def model_and_data():
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    with torch.no_grad():
        for k, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (1 + 0.2 * k))
    x = torch.linspace(-2, 2, 30).reshape(10, 3)
    y = x.pow(2).sum(dim=1, keepdim=True).sqrt().clamp(min=0.5, max=2.5)
    return model, x, y


trajectories = []
for make in (lambda ps: MyAdam(ps, lr=0.05, weight_decay=0.01),
             lambda ps: torch.optim.Adam(ps, lr=0.05, weight_decay=0.01)):
    model, x, y = model_and_data()
    opt = make(model.parameters())
    losses = []
    for step in range(6):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    trajectories.append(losses)

model, x, y = model_and_data()
bufs = [torch.zeros_like(p) for p in model.parameters()]
momentum_losses = []
for step in range(6):
    loss = torch.sub(model(x), y, alpha=1.0).pow(2).mean(dim=0).sum()
    loss.backward()
    sgd_momentum(list(model.parameters()), bufs)
    momentum_losses.append(loss.item())
RESULTS = {"mine": trajectories[0], "library": trajectories[1], "momentum": momentum_losses,
           "same": all(abs(a - b) < 1e-5 for a, b in zip(*trajectories))}
