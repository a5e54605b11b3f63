# PyTorch tutorial "Tensors": creation, attributes, indexing, joining, arithmetic, bridges.
import numpy as np
import torch

data = [[1, 2], [3, 4]]
x_data = torch.tensor(data)
np_array = np.array(data)
x_np = torch.from_numpy(np_array)
x_ones = torch.ones_like(x_data)
x_rand = torch.rand_like(x_data, dtype=torch.float)
shape = (2, 3,)
ones, zeros = torch.ones(shape), torch.zeros(shape)
tensor = torch.rand(3, 4)
attrs = [tuple(tensor.shape), tensor.is_floating_point(), str(tensor.device)]  # (default dtype: a documented difference)
if torch.cuda.is_available():
    tensor = tensor.to("cuda")
tensor = torch.ones(4, 4)
first_row, first_col, last_col = tensor[0], tensor[:, 0], tensor[..., -1]
tensor[:, 1] = 0
t1 = torch.cat([tensor, tensor, tensor], dim=1)
y1 = tensor @ tensor.T
y2 = tensor.matmul(tensor.T)
y3 = torch.rand_like(y1)
torch.matmul(tensor, tensor.T, out=y3)
z1 = tensor * tensor
z2 = tensor.mul(tensor)
agg = tensor.sum()
agg_item = agg.item()
tensor.add_(5)
t = torch.ones(5)
n = t.numpy()
t.add_(1)
shared = n.tolist()
n2 = np.ones(5)
t2 = torch.from_numpy(n2)
np.add(n2, 1, out=n2)
RESULTS = {"x_data": x_data.tolist(), "dtype": str(x_data.dtype), "x_np": x_np.tolist(),
           "ones": x_ones.tolist(), "rand_dtype": str(x_rand.dtype), "attrs": attrs,
           "t1": list(t1.shape), "y": (y1 == y2).all().item(), "y3": (y3 == y1).all().item(),
           "z": (z1 == z2).all().item(), "agg": agg_item, "agg_type": type(agg_item).__name__,
           "tensor": tensor.tolist(), "shared": shared, "t2": t2.tolist()}
