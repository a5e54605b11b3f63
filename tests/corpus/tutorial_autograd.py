# PyTorch tutorial "Automatic differentiation with torch.autograd" and "A gentle introduction".
import torch

torch.manual_seed(0)
x = torch.ones(5)
y = torch.zeros(3)
w = torch.linspace(-1, 1, 15).reshape(5, 3).requires_grad_()
b = torch.tensor([0.1, -0.2, 0.3], requires_grad=True)
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
node = type(z.grad_fn).__name__
loss.backward()
with torch.no_grad():
    z2 = torch.matmul(x, w) + b
z_det = z.detach()
inp = torch.eye(4, 5, requires_grad=True)
out = (inp + 1).pow(2).t()
out.backward(torch.ones_like(out), retain_graph=True)
first = inp.grad.clone()
out.backward(torch.ones_like(out), retain_graph=True)
second = inp.grad.clone()
inp.grad.zero_()
out.backward(torch.ones_like(out), retain_graph=True)
a = torch.tensor([2., 3.], requires_grad=True)
bb = torch.tensor([6., 4.], requires_grad=True)
Q = 3 * a ** 3 - bb ** 2
Q.backward(gradient=torch.tensor([1., 1.]))
xx, yy = torch.rand(5, 5), torch.rand(5, 5)
zz = torch.rand((5, 5), requires_grad=True)
RESULTS = {"node": node, "w_grad": w.grad.tolist(), "b_grad": b.grad.tolist(),
           "z2_rg": z2.requires_grad, "z_det_rg": z_det.requires_grad,
           "first": first.tolist(), "second": second.tolist(), "third": inp.grad.tolist(),
           "Q": (9 * a ** 2 == a.grad).tolist() + (-2 * bb == bb.grad).tolist(),
           "excl": [(xx + yy).requires_grad, (xx + zz).requires_grad]}
