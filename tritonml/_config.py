"""Launch configurations: what a launcher needs to know to launch a kernel, nothing more.

A config comes from the heuristics in ``autotune/`` (importable as ``tritonml_autotune``) or from
the caller (``config=`` on the launchers in ``tritonml.ops``), so a tuned choice can be passed in.
"""
from __future__ import annotations

from dataclasses import dataclass

SCAN_REGIMES = ("rows", "columns", "lookback")


def _is_pow2(n) -> bool:
    return isinstance(n, int) and n > 0 and n & (n - 1) == 0


@dataclass(frozen=True)
class ScanConfig:
    """How a scan runs.

    regime: "rows" (contiguous axis: tall tiles, programs carry the tally), "columns" (strided
        axis: wide tiles coalesced along the inner dim), "lookback" (the axis split over many
        programs in one pass). "rows" and "columns" run the same kernel with different tiles.
    block_axis, block_inner: tile shape, powers of two.
    num_warps: warps per program on a GPU (ignored by the interpreter).
    prefix_every: look-back only; 1 in production, > 1 forces long look-backs in tests.
    """
    regime: str
    block_axis: int
    block_inner: int
    num_warps: int = 4
    prefix_every: int = 1

    def validate(self, name: str = "config") -> None:
        if self.regime not in SCAN_REGIMES:
            raise ValueError(f"{name}.regime: {self.regime!r} is not one of {SCAN_REGIMES}")
        for field in ("block_axis", "block_inner", "num_warps", "prefix_every"):
            value = getattr(self, field)
            if field != "prefix_every" and not _is_pow2(value):
                raise ValueError(f"{name}.{field}: {value!r} must be a power of two")
        if not isinstance(self.prefix_every, int) or self.prefix_every < 1:
            raise ValueError(f"{name}.prefix_every: {self.prefix_every!r} must be an int >= 1")
        if self.block_axis * self.block_inner > 1 << 20:
            raise ValueError(f"{name}: a tile of {self.block_axis} x {self.block_inner} elements is "
                             "too large (at most 2**20 elements)")
