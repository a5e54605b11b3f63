# Two backwards through one graph (retain_graph) accumulate; zeroing grads; the error.
import torch

x = torch.tensor([1.0, -2.0], requires_grad=True)
y = (x.sin() * x).sum()
y.backward(retain_graph=True)
first = x.grad.clone()
y.backward()
second = x.grad.clone()
x.grad.zero_()
try:
    y.backward()
    error = None
except RuntimeError as e:
    error = "second time" in str(e)
RESULTS = {"first": first.tolist(), "second": second.tolist(), "error": error}
