"""Scans and reductions over a tensor sharded along one axis across the processes of a
``torch.distributed`` group, or over a ``torch.distributed.tensor.DTensor``.

Every rank calls the same function with its own shard (SPMD). Only small per-rank *states* cross
the network, never the data: one state per independent scan (the shard's shape without the axis)
or one partial reduction. States are exchanged with ``all_gather`` and folded in rank order by
every rank with tritonml's own kernels, so results are the same on every run and, for
reductions, bitwise the same on every rank. Before any data moves, the ranks exchange a small
metadata record (shape, dtype, axis, operation, local length, any local error) and refuse
mismatches with the same error on every rank. The algorithm, its cost and its determinism
argument: docs/distributed.md.

The modules: ``spmd`` (the group, its collectives and the one protocol every function runs),
``scan`` and ``reduce`` (the public functions: their local steps and what they do with the
exchanged states), ``fold`` (each reduce function's partial state and fold), ``dtensor`` (DTensor
in and out).

This package imports ``torch.distributed``; ``import tritonml`` does not import it.
"""
from __future__ import annotations

import sys

from ..torch_ops import dtensor as _dtensor_rules
from . import dtensor
from .reduce import reduce
from .scan import associative_scan, cumulative_product, cumulative_sum
from .spmd import METADATA_TIMEOUT

# the DTensor rules of torch.ops.tritonml.* (a layer below) run their work through this package
_dtensor_rules.attach(sys.modules[__name__])

__all__ = ["cumulative_sum", "cumulative_product", "associative_scan", "reduce",
           "METADATA_TIMEOUT"]
