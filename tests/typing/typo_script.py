"""Keywords misspelt in calls of tritonml's public functions (tests/test_typing.py): pyright must
name the misspelt keyword on each line that ends with a "names" comment, also for the functions
with overloads (where a call that no overload accepts would otherwise be reported as "No overloads
for ... match" without saying why)."""
import torch
import triton

import tritonml
import tritonml.distributed


@triton.jit
def add(a, b):
    return (a[0] + b[0],)


x = torch.ones(3)
tritonml.cumulative_sum(x, 0, revers=True)                      # names: revers
tritonml.cumulative_product(x, 0, exclusiv=True)                # names: exclusiv
tritonml.linear_recurrence(x, x, 0, inital=x)                   # names: inital
tritonml.segment_reduce(x, "SUM", lenghts=torch.tensor([3]))    # names: lenghts
tritonml.associative_scan(add, x, 0, revrse=True)               # names: revrse
tritonml.distributed.associative_scan(add, x, 0, grop=None)     # names: grop
tritonml.reduce(x, "SUM", axes=[0], keepdim=True)               # names: keepdim
tritonml.var(x, dims=0)                                         # names: dims
