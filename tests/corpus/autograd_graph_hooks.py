# torch.autograd.graph: Node hooks and prehooks, saved_tensors_hooks, post-accumulate hooks.
import torch

a = torch.tensor([1.0, 2.0], requires_grad=True)
b = a.exp()
c = (b * a).sum()
seen = []
h1 = b.grad_fn.register_hook(lambda grad_inputs, grad_outputs: seen.append(
    ("hook", [g.tolist() for g in grad_outputs])))
h2 = c.grad_fn.register_prehook(lambda grad_outputs: seen.append(
    ("prehook", [g.tolist() for g in grad_outputs])))
a.register_post_accumulate_grad_hook(lambda p: seen.append(("post", p.grad.tolist())))
packed = []


def pack(t):
    packed.append(tuple(t.shape))
    return t


with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
    d = (a * a).sin().sum()
d.backward()
c.backward()
h1.remove()
h2.remove()
RESULTS = {"seen": seen, "packed": len(packed) > 0, "grad": a.grad.tolist(),
           "name": b.grad_fn.name()}
