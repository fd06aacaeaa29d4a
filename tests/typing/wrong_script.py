"""Misuses of tritonml's public API that pyright must reject (tests/test_typing.py): each line
marked ``# error`` is a type error, so the test fails if the types accept it."""
import torch

import tritonml

x = torch.ones(3)
tritonml.cumulative_sum("x", 0)                          # error: a str for a tensor
tritonml.reduce(x, "sum", axes="0")                      # error: a str for axes
total: torch.Tensor = tritonml.cumulative_sum(x, 0, return_carry=True)  # error: a tuple
pair: tuple = tritonml.var(x)                            # error: var returns a tensor
tritonml.segment_reduce(x, "sum", offsets=[0, 3])        # error: a list for offsets
tritonml.enable(devices=3)                               # error: an int for devices
