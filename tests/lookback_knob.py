"""Long look-back chains on demand: ``PREFIX_EVERY``, the look-back kernel's test knob
(tritonml/kernels/scan.py), a module global rather than a kernel parameter so the shipped
kernel's signature and compiled code know nothing of it.

``prefix_every(n)``: while it is entered, the look-back kernel publishes the inclusive prefix of
every n-th tile only, so the other tiles look back over up to n - 1 aggregates (n past the tile
count: only the first tile's prefix, every tile walks back to it). Triton's interpreter reads the
global at each launch; compiled Triton hashes it into the kernel once, so this runs under the
interpreter only (every caller's tensors are CPU tensors).
"""
from __future__ import annotations

import contextlib

import triton.language as tl

import tritonml
from tritonml.kernels import scan as _scan_kernels


@contextlib.contextmanager
def prefix_every(n: int):
    if not tritonml.INTERPRET:
        raise RuntimeError("prefix_every: the PREFIX_EVERY knob needs Triton's interpreter")
    if type(n) is not int or n < 1:
        raise ValueError(f"prefix_every: {n!r} must be an int >= 1")
    saved = _scan_kernels.PREFIX_EVERY
    _scan_kernels.PREFIX_EVERY = tl.constexpr(n)
    try:
        yield
    finally:
        _scan_kernels.PREFIX_EVERY = saved


def prefix_every_for(config, n: int):
    """``prefix_every(n)`` where ``config`` is a look-back config, else the shipped 1: for tests
    parametrized over configs of several regimes."""
    return prefix_every(n if config is not None and config.regime == "lookback" else 1)
