"""Launchers: validate -> canonicalize (outer, axis, inner) -> choose a config -> launch.

Each launcher is a plain function of tensors; tritonml/torch_ops registers them as torch ops. Each
takes ``config=`` so a tuned config can be passed in, and scans and reductions take the combine
function as a parameter (``ScanCombine``; a reduce function's ``ReduceRecord``,
tritonml/records/builtin_reductions.py).
"""
from .reduce import ReduceRecord, launch_reduce, reduce_axes
from .scan import PRODUCT, SUM, ScanCombine, cumulative_scan, launch_scan

__all__ = ["ReduceRecord", "reduce_axes", "launch_reduce",
           "ScanCombine", "SUM", "PRODUCT", "cumulative_scan", "launch_scan"]
