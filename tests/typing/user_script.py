"""A small user script on tritonml's public API, type-checked by tests/test_typing.py.

Every annotation below states what the public API returns: were a return type wrong (a tuple
where a tensor is, Any where a tuple is...), pyright would reject an assignment or an unpacking
here. The script also runs (the test executes it), so it is correct Python as well.
"""
from __future__ import annotations

from typing import Tuple

import torch

import tritonml
from tritonml import reductions
from tritonml.kernels.combine import add_pairs, add_values

x: torch.Tensor = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])

# scans: a tensor, or (result, carry) with return_carry=True
running: torch.Tensor = tritonml.cumulative_sum(x, 1, reverse=False, exclusive=True)
chunk, carry = tritonml.cumulative_product(x, 1, return_carry=True)
product_and_carry: Tuple[torch.Tensor, torch.Tensor] = (chunk, carry)
h: torch.Tensor = tritonml.linear_recurrence(x, x, 1, initial=torch.zeros(2))
scanned: torch.Tensor = tritonml.associative_scan(add_values, x, 1)
pair: Tuple[torch.Tensor, ...] = tritonml.associative_scan(add_pairs, (x, x), 1)

# reductions: a DirectML function by member or name, with keepdims
total: torch.Tensor = tritonml.reduce(x, "sum", axes=1, keepdims=True)
largest: torch.Tensor = tritonml.reduce(x, tritonml.ReduceFunction.MAX, axes=(0, 1),
                                        keepdims=False)
function: tritonml.ReduceFunction = tritonml.ReduceFunction.parse("log_sum_exp")

# a user-defined reduction: tritonml.records.ready_reductions.welford gives (var, mean)
welford: tritonml.Reduction = reductions.welford
var_w, mean_w = tritonml.reduce_with(welford, x, axes=1)
sums: torch.Tensor = tritonml.segment_reduce(x, "sum", offsets=torch.tensor([0, 1, 3]), axis=1)
segment_welford = tritonml.segment_reduce(x, welford, lengths=torch.tensor([1, 2]), axis=1)
restarted: torch.Tensor = tritonml.segment_scan(x, "sum", lengths=torch.tensor([2, 1]), axis=1)

# torch's family
values: torch.Tensor = tritonml.cummax(x, 1).values
indices: torch.Tensor = tritonml.max_with_indices(x, 1).indices
low, high = tritonml.aminmax(x, dim=0)
var, mean = tritonml.var_mean(x, dim=1, correction=0)
std_and_mean: Tuple[torch.Tensor, torch.Tensor] = tritonml.std_mean(x, 1)
spread: torch.Tensor = tritonml.std(x) + tritonml.var(x, (0, 1), keepdim=True)
clean: torch.Tensor = tritonml.nansum(x, 1) + tritonml.nanmean(x, 1)
lse: torch.Tensor = tritonml.logcumsumexp(x, 1, reverse=True)

# routing torch's own ops, in a block or switched on and off
with tritonml.use_tritonml("cpu" if tritonml.INTERPRET else "cuda"):
    routed: torch.Tensor = torch.cumsum(x, 1)
tritonml.enable(("cpu",) if tritonml.INTERPRET else ("cuda",))   # cuda alone warns without a GPU
tritonml.disable()
version: str = tritonml.__version__

try:
    tritonml.associative_scan(add_values, x, 1)
except tritonml.CombineError as error:
    failed_line: int | None = error.lineno
