# Examples from torch.autograd's docstrings: register_hook with remove, functional API.
import torch
from torch.autograd.functional import hessian, hvp, jacobian, jvp, vhp, vjp

v = torch.tensor([0., 0., 0.], requires_grad=True)
h = v.register_hook(lambda grad: grad * 2)
v.backward(torch.tensor([1., 2., 3.]))
hooked = v.grad.tolist()
h.remove()


def exp_reducer(x):
    return x.exp().sum(dim=1)


def exp_adder(x, y):
    return 2 * x.exp() + 3 * y


def pow_reducer(x):
    return x.pow(3).sum()


inputs = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
J1 = jacobian(exp_reducer, inputs)
J2 = jacobian(exp_reducer, inputs, create_graph=True)
J3 = jacobian(exp_adder, (torch.tensor([0.5, 1.0]), torch.tensor([2.0, 3.0])))
H = hessian(pow_reducer, inputs)
out, vjp_v = vjp(exp_reducer, inputs, torch.ones(2))
out2, jvp_v = jvp(exp_reducer, inputs, torch.ones(2, 2))
out3, hvp_v = hvp(pow_reducer, inputs, torch.ones(2, 2))
out4, vhp_v = vhp(pow_reducer, inputs, torch.ones(2, 2))
RESULTS = {"hooked": hooked, "J1": J1.tolist(), "J2_rg": J2.requires_grad,
           "J3": [j.tolist() for j in J3], "H": H.tolist(), "vjp": vjp_v.tolist(),
           "jvp": jvp_v.tolist(), "hvp": hvp_v.tolist(), "vhp": vhp_v.tolist()}
