"""Register caps that compile a kernel without spills, at the most programs an SM can hold.

Without a cap, ptxas picks a kernel's registers a thread by its own occupancy heuristic and may
keep a few values in the stack frame to stay at that count (the segment kernel's specializations
kept 8 to 16 bytes that way, tests/kernels/test_segment_compile.py). With a cap (Triton's ``maxnreg``,
PTX's ``.maxnreg``) it takes up to that many registers and spills only what does not fit.
``spill_free_maxnreg`` compiles at ptxas's own choice first and, where that spills, at the caps
where the programs an SM holds step down (``occupancy_caps``), lowest first, keeping the first
that compiles without spills. ``maxnreg`` changes no result: only where values live.
"""
from __future__ import annotations

from typing import Callable, Optional

from . import cost, devices

MAX_REGISTERS_PER_THREAD = 255


def occupancy_caps(num_warps: int, at_least: int = 0,
                   device: devices.Device = devices.H100) -> list[int]:
    """The register caps a thread of a ``num_warps`` program can have where the programs an SM
    holds step down (``cost.programs_per_sm``; sm_80 and sm_90 have the same register file and
    limits): for each count of programs, the most registers that still fit that many (8 warps:
    32, 40, 48, 64, 80, 128, 255). Only those at least ``at_least`` rounded down to the
    allocation unit, ascending."""
    unit = cost.REGISTER_ALLOCATION_UNIT
    most = min(MAX_REGISTERS_PER_THREAD, device.registers_per_sm // (32 * num_warps))
    filling = cost.MAX_PROGRAMS_PER_SM * device.sms    # a launch that fills every SM
    highest = {}   # programs per SM -> the most registers a thread that allows
    for registers in range(unit, most + 1):
        highest[cost.programs_per_sm(device, filling, num_warps, registers)] = registers
    floor = at_least // unit * unit
    return sorted(c for c in highest.values() if c >= floor)


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
