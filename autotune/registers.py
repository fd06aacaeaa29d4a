"""Register caps that compile a kernel without spills, at the most programs an SM can hold.

Without a cap, ptxas picks a kernel's registers a thread by its own occupancy heuristic and may
keep a few values in the stack frame to stay at that count (the segment kernel's specializations
kept 8 to 40 bytes that way, tests/test_segment_compile.py). With a cap (Triton's ``maxnreg``,
PTX's ``.maxnreg``) it takes up to that many registers and spills only what does not fit.
``spill_free_maxnreg`` compiles at ptxas's own choice first and, where that spills, at the caps
where the programs an SM holds step down (``occupancy_caps``), lowest first, keeping the first
that compiles without spills. ``maxnreg`` changes no result: only where values live.
"""
from __future__ import annotations

from typing import Callable, Optional

REGISTERS_PER_SM = 65536          # sm_80 and sm_90
THREADS_PER_SM = 2048
MAX_REGISTERS_PER_THREAD = 255
# ptxas allocates a warp's registers in units of 256, 8 a thread
REGISTER_GRANULE = 8


def occupancy_caps(num_warps: int, at_least: int = 0) -> list[int]:
    """The register caps a thread of a ``num_warps`` program can have where the programs an SM
    holds step down: for each count of programs, the most registers that still fit that many
    (8 warps: 32, 40, 48, 64, 80, 128, 255). Only those at least ``at_least`` rounded down to
    the granule, ascending."""
    threads = 32 * num_warps
    floor = at_least // REGISTER_GRANULE * REGISTER_GRANULE
    caps = set()
    for programs in range(1, THREADS_PER_SM // threads + 1):
        per_thread = REGISTERS_PER_SM // (programs * threads) // REGISTER_GRANULE \
            * REGISTER_GRANULE
        caps.add(min(MAX_REGISTERS_PER_THREAD, per_thread))
    return sorted(c for c in caps if c >= floor)


def spill_free_maxnreg(compile_at: Callable[[Optional[int]], tuple[int, int]],
                       num_warps: int) -> Optional[int]:
    """The ``maxnreg`` to launch with: None where ptxas's own choice spills nothing, else the
    lowest of ``occupancy_caps`` from that choice's registers up that compiles without spills.
    Where every cap spills, the one that spills least (None if that is ptxas's choice).

    ``compile_at(maxnreg)`` compiles the kernel with that cap (None: no cap) and returns
    ``(registers a thread, bytes spilled)``."""
    registers, spilled = compile_at(None)
    if not spilled:
        return None
    least, best = spilled, None
    for cap in occupancy_caps(num_warps, registers):
        _, spilled = compile_at(cap)
        if not spilled:
            return cap
        if spilled < least:
            least, best = spilled, cap
    return best
