# Loss code users write by hand: one-hot targets by scatter_ (and by scatter with reduce='add'
# for soft labels), label smoothing against F.cross_entropy(label_smoothing=), focal loss with
# gather, mixup with lerp, a masked mean with masked_fill and index_fill_.
import torch
import torch.nn as nn
import torch.nn.functional as F


class LabelSmoothingLoss(nn.Module):
    def __init__(self, classes, smoothing=0.0, dim=-1):
        super().__init__()
        self.confidence = 1.0 - smoothing
        self.smoothing = smoothing
        self.cls = classes
        self.dim = dim

    def forward(self, pred, target):
        pred = pred.log_softmax(dim=self.dim)
        with torch.no_grad():
            true_dist = torch.zeros_like(pred)
            true_dist.fill_(self.smoothing / (self.cls - 1))
            true_dist.scatter_(1, target.data.unsqueeze(1), self.confidence)
        return torch.mean(torch.sum(-true_dist * pred, dim=self.dim))


def focal_loss(logits, target, gamma=2.0):
    logp = F.log_softmax(logits, dim=1).gather(dim=1, index=target.unsqueeze(1)).squeeze(1)
    p = logp.exp()
    return (-(1 - p).pow(exponent=gamma) * logp).mean()


logits = torch.linspace(-2, 2, 5 * 4).reshape(5, 4).sin().mul(3).requires_grad_()
target = torch.tensor([0, 3, 1, 1, 2])
smooth = LabelSmoothingLoss(4, smoothing=0.1)(logits, target)
library = F.cross_entropy(logits, target, label_smoothing=0.1 * 4 / 3)
focal = focal_loss(logits, target)
(smooth + focal).backward()
grad = logits.grad.sum(dim=0).tolist()

counts = torch.zeros(5, 4).scatter(1, torch.tensor([[0, 0], [3, 1], [1, 1], [1, 2], [2, 2]]),
                                   1.0, reduce="add")
soft = counts / counts.sum(dim=1, keepdim=True)
soft_loss = torch.sum(-soft * logits.log_softmax(dim=1), dim=1).mean()

x1 = torch.linspace(0, 1, 12).reshape(3, 4)
x2 = torch.linspace(1, 0, 12).reshape(3, 4)
mixed = torch.lerp(x1, x2, weight=0.3)
mask = torch.tensor([[True, False, False, True]]).expand(3, 4)
masked_mean = mixed.masked_fill(mask, 0.0).sum() / (~mask).sum()
filled = mixed.clone().index_fill_(1, torch.tensor([0, 2]), -1.0)
RESULTS = {"smooth": smooth.item(), "library": library.item(), "focal": focal.item(),
           "grad": grad, "soft_loss": soft_loss.item(), "counts": counts.sum(0).tolist(),
           "masked_mean": masked_mean.item(), "filled": filled[0].tolist()}
