"""Launchers: validate -> canonicalize (outer, axis, inner) -> choose a config -> launch.

Each launcher is a plain function of tensors returning a tensor, so it can be registered as a
torch custom op as it is; each takes ``config=`` so a tuned config can be passed in, and scans
take the combine function as a parameter (``ScanCombine``).
"""
from .scan import PRODUCT, SUM, ScanCombine, cumulative_product, cumulative_scan, cumulative_sum

__all__ = ["ScanCombine", "SUM", "PRODUCT", "cumulative_scan", "cumulative_sum", "cumulative_product"]
