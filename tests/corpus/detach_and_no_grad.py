# detach, no_grad, requires_grad_ and is_leaf, as the autograd tutorial shows them.
import torch

x = torch.ones(3, requires_grad=True)
y = x * 2
z = y.detach()
with torch.no_grad():
    w = x * 3
v = torch.zeros(2).requires_grad_()
u = (v + 1).sum()
u.backward()
RESULTS = {"y_rg": y.requires_grad, "z_rg": z.requires_grad, "w_rg": w.requires_grad,
           "x_leaf": x.is_leaf, "y_leaf": y.is_leaf, "z_leaf": z.is_leaf,
           "v_grad": v.grad.tolist(), "grad_fn": type(y.grad_fn).__name__}
