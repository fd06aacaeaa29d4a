"""Launchers: validate -> canonicalize (outer, axis, inner) -> choose a config -> launch.

Each launcher is a plain function of tensors returning a tensor, so it can be registered as a
torch custom op as it is; each takes ``config=`` so a tuned config can be passed in, and scans
and reductions take the combine function as a parameter (``ScanCombine``, ``ReduceCombine``).
"""
from .reduce import ReduceCombine, ReduceFunction, launch_reduce, reduce, reduce_axes
from .scan import PRODUCT, SUM, ScanCombine, cumulative_product, cumulative_scan, cumulative_sum

__all__ = ["ReduceCombine", "ReduceFunction", "reduce", "reduce_axes", "launch_reduce",
           "ScanCombine", "SUM", "PRODUCT", "cumulative_scan", "cumulative_sum", "cumulative_product"]
