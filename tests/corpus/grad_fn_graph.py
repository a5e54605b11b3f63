# Reading the backward graph: grad_fn names, next_functions and AccumulateGrad.
import torch

a = torch.tensor(2.0, requires_grad=True)
b = torch.tensor(3.0, requires_grad=True)
e = (a + b) * b.exp()


def walk(fn):
    if fn is None:
        return None
    return [type(fn).__name__] + [walk(f) for f, _ in fn.next_functions]


RESULTS = {"graph": walk(e.grad_fn), "var": e.grad_fn.next_functions[0][0].next_functions[0][0].variable.item()}
