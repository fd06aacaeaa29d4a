"""A tuning problem as plain numbers: what the candidates and the cost model need to know.

``select.py`` builds one from a tritonml layout and dtype; nothing here imports tritonml.
"""
from __future__ import annotations

from dataclasses import dataclass

SECTOR_BYTES = 32  # the GPU moves global memory in 32-byte sectors


@dataclass(frozen=True)
class Problem:
    op: str              # "scan" or "reduce"
    function: str        # "sum"/"product" for scans, a ReduceFunction name for reductions
    dtype: str           # the input's dtype name ("float32")
    element_bytes: int   # of the input
    state_bytes: int     # scan: the accumulator; reduce: one partial state (value + index or sum)
    out_bytes: int       # of one output element
    axis_len: int        # scanned or reduced positions per chain
    inner_len: int       # the kept dim programs tile across
    outer_len: int       # the other kept dims, together
    contiguous: bool     # the scanned/reduced positions are where the input's memory runs
    state_values: int = 1  # components of the state (reduce: 2 for value + index or max + sum)

    @property
    def elements(self) -> int:
        return self.axis_len * self.inner_len * self.outer_len

    @property
    def outputs(self) -> int:
        """Elements written: all of them for a scan, one per chain position for a reduction."""
        return self.elements if self.op == "scan" else self.inner_len * self.outer_len

    @property
    def ideal_bytes(self) -> int:
        """Input read once and output written once."""
        return self.elements * self.element_bytes + self.outputs * self.out_bytes

    def chains(self, block_inner: int) -> int:
        return self.outer_len * -(-self.inner_len // block_inner)

    def sector_waste(self, block_inner: int) -> float:
        """How many times the useful bytes a strided-axis tile reads: each step of the axis reads
        ``block_inner`` contiguous elements (fewer at the inner dim's end), rounded up to whole
        sectors when that is less than a sector. 1.0 where the scanned/reduced axis is contiguous."""
        if self.contiguous:
            return 1.0
        useful = min(block_inner, self.inner_len) * self.element_bytes
        if useful >= SECTOR_BYTES:
            return 1.0
        return SECTOR_BYTES / useful
