"""The cost model: modeled seconds of a candidate config, for choosing when nothing can be timed.

Per launch, from the config and the problem's sizes (``problem.py``):

    seconds = bytes / (bandwidth * min(1, programs / sms) * occupancy) + launch overhead

- bytes: input read and output written, in whole 32-byte sectors (a strided-axis tile narrower than
  a sector reads the whole sector), plus the look-back's three accumulator rows per tile and a
  split's partial states (written by the first launch, read by the second);
- programs against the SMs: an idle SM's share of the bandwidth is lost (``model.py``);
- occupancy: the warps a launch keeps resident on a busy SM are its programs per SM times their
  warps, at most what threads and the registers per thread (``compiled.py``, read from the
  sm_80/sm_90 compile) allow. Below ``FULL_BANDWIDTH_WARPS`` the SM gets that fraction of its
  bandwidth: too few loads in flight (few small programs), or register pressure;
- the look-back's chain of tiles: each tile's inclusive prefix waits for its predecessor's, so a
  look-back launch takes at least ``LOOKBACK_TILE_SECONDS`` per tile along the axis, whatever the
  bandwidth (measured on an H100, see below);
- a one-launch split's fold: the chain's last program folds the partial states after its own
  streaming ends, one round trip for the arrival counter and one per ``block_split`` states, each
  taken as long as a look-back tile's hand-over (``FOLD_ROUND_TRIP_SECONDS``). The fold's code
  after the streaming loop can change how ptxas schedules that loop: where the compiled one-launch
  kernel keeps fewer loads in flight per warp than the two-launch split's first kernel at the same
  tile (``compiled.py``, read from the SASS), its streaming takes longer in that proportion (an
  H100 once ran such a one-launch split 3x slower than the two launches);
- launches: each adds the device's launch overhead.

A candidate whose compiled kernel spills is never chosen (infinite cost). On inputs of
``FILL_ELEMENTS`` or more, candidates whose first launch has fewer programs than SMs lose
(``FILL_PENALTY_S``) when a candidate that has enough, without moving more than ``BYTES_SLACK`` x
the ideal bytes, models within ``FILL_SLACK`` of the fastest: the work is split over every SM
unless that costs more than the few idle SMs do (a second launch's overhead on a small input).
Between candidates that fill the GPU, one launch wins over two by the second's overhead.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import compiled, model
from .devices import Device
from .problem import Problem

# Resident warps per SM assumed to keep an SM's share of the bandwidth busy: one 8-warp program of a
# 4096-element tile (16 elements, four 128-bit float32 loads, per thread), an eighth of the 64 warps
# an sm_80/sm_90 SM can hold. An assumption, not measured here; fewer cost bandwidth in proportion.
FULL_BANDWIDTH_WARPS = 8
FILL_ELEMENTS = 1 << 20
FILL_PENALTY_S = 1.0
FILL_SLACK = 1.05
BYTES_SLACK = 1.05
MAX_PROGRAMS_PER_SM = 32          # resident thread blocks per SM (sm_80 and sm_90)
REGISTER_ALLOCATION_UNIT = 8      # registers per thread are allocated in steps of 8
# Time per tile along the axis of a look-back scan: the prefix hand-over from one tile to the next
# (a global-memory round trip). Measured on an H100 (Triton 3.6, 2026-11-23), one row of 2**26
# float32: 65,536 tiles of 1024 in 5.51 ms (84 ns a tile), 16,384 tiles of 4096 in 1.48 ms (90 ns
# a tile), both far above the 0.18 ms the bytes need. Assumed the same on other GPUs.
LOOKBACK_TILE_SECONDS = 90e-9
# One dependent global-memory round trip through L2 (an atomic, or a load that waits on it): the
# same hand-over as a look-back tile's. Not measured apart.
FOLD_ROUND_TRIP_SECONDS = LOOKBACK_TILE_SECONDS


@dataclass(frozen=True)
class Launch:
    kernel: str          # as in tables/compiled.json
    tile_elements: int   # the tile the registers hold
    num_warps: int
    programs: int
    bytes_moved: float
    serial_tiles: int = 0   # tiles one after another (a look-back's tiles along the axis)
    tail_seconds: float = 0.0   # after the streaming: a one-launch split's fold


@dataclass(frozen=True)
class Estimate:
    launches: tuple
    seconds: float       # math.inf when a launch spills
    spills: bool
    registers: int | None   # the most any launch needs per thread (None: not in the table)

    @property
    def first_programs(self) -> int:
        return self.launches[0].programs

    @property
    def bytes_moved(self) -> float:
        return sum(launch.bytes_moved for launch in self.launches)


def _launches(problem: Problem, config: dict) -> list[Launch]:
    axis, lanes, warps = config["block_axis"], config["block_inner"], config["num_warps"]
    elem, waste = problem.element_bytes, problem.sector_waste(lanes)
    chains = problem.chains(lanes)
    read = problem.elements * elem * waste
    if problem.op == "scan":
        written = problem.outputs * problem.out_bytes * waste
        if config["regime"] == "lookback":
            tiles = chains * -(-problem.axis_len // axis)
            exchange = 3 * tiles * lanes * problem.state_bytes
            return [Launch("scan_lookback", axis * lanes, warps, tiles, read + written + exchange,
                           serial_tiles=-(-problem.axis_len // axis))]
        return [Launch("scan_tiled", axis * lanes, warps, chains, read + written)]
    written = problem.outputs * problem.out_bytes
    splits = config["splits"]
    if splits == 1:
        return [Launch("reduce", axis * lanes, warps, chains, read + written)]
    partials = problem.state_bytes * problem.outputs * splits
    fold = config["block_split"] * lanes
    if config.get("one_launch", True):
        round_trips = 1 + -(-splits // config["block_split"])
        return [Launch("reduce_split_last", axis * lanes, warps, chains * splits,
                       read + 2 * partials + written,
                       tail_seconds=round_trips * FOLD_ROUND_TRIP_SECONDS)]
    return [Launch("reduce_split", axis * lanes, warps, chains * splits, read + partials),
            Launch("reduce_partials", fold, warps, chains, partials + written)]


def occupancy(device: Device, launch: Launch, registers: int | None) -> float:
    """The fraction of a busy SM's bandwidth ``launch`` keeps, given its registers per thread."""
    threads = 32 * launch.num_warps
    programs = min(-(-launch.programs // device.sms), MAX_PROGRAMS_PER_SM,
                   device.max_threads_per_sm // threads)
    if registers:
        allocated = -(-registers // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
        programs = min(programs, max(1, device.registers_per_sm // (allocated * threads)))
    return min(1.0, programs * launch.num_warps / FULL_BANDWIDTH_WARPS)


def launch_seconds(device: Device, launch: Launch, registers: int | None,
                   latency_bound: float = 1.0) -> float:
    """``latency_bound``: how many times longer the streaming takes than occupancy alone says
    (fewer loads in flight than the kernel it stands in for)."""
    busy = min(1.0, launch.programs / device.sms)
    streaming = latency_bound * (launch.bytes_moved / (device.copy_bandwidth_bytes_per_s * busy
                                                       * occupancy(device, launch, registers)))
    return (max(streaming, launch.serial_tiles * LOOKBACK_TILE_SECONDS) + launch.tail_seconds
            + device.launch_overhead_s)


def estimate(problem: Problem, config: dict, device: Device) -> Estimate:
    arch = compiled.ARCH_OF_DEVICE.get(device.name, max(compiled.ARCH_OF_DEVICE.values()))
    state = compiled.state_class(problem.function if problem.op == "reduce" else None)
    seconds, spills, most = 0.0, False, None
    launches = _launches(problem, config)
    for launch in launches:
        usage = compiled.usage(launch.kernel, state, problem.dtype, arch, launch.tile_elements,
                               launch.num_warps)
        registers = usage.registers if usage else None
        spills = spills or bool(usage and usage.spills)
        most = registers if most is None else max(most, registers or 0)
        latency_bound = 1.0
        if launch.kernel == "reduce_split_last" and usage and usage.loads_in_flight:
            twin = compiled.usage("reduce_split", state, problem.dtype, arch,
                                  launch.tile_elements, launch.num_warps)
            if twin and twin.loads_in_flight and twin.loads_in_flight > usage.loads_in_flight:
                latency_bound = twin.loads_in_flight / usage.loads_in_flight
        seconds += launch_seconds(device, launch, registers, latency_bound)
    return Estimate(tuple(launches), math.inf if spills else seconds, spills, most)


def costs(problem: Problem, configs: list, device: Device) -> list[float]:
    """Each config's cost (lower is better): its modeled seconds, infinite when it spills, plus
    ``FILL_PENALTY_S`` where it leaves SMs idle on a large input and another config, in as many
    launches and within the byte slack, does not."""
    estimates = [estimate(problem, config, device) for config in configs]
    fastest = min(e.seconds for e in estimates)
    filling = [e.seconds for e in estimates if e.first_programs >= device.sms
               and e.bytes_moved <= BYTES_SLACK * problem.ideal_bytes]
    enforce = (problem.elements >= FILL_ELEMENTS and bool(filling)
               and min(filling) <= FILL_SLACK * fastest)
    return [e.seconds + (FILL_PENALTY_S if enforce and e.first_programs < device.sms else 0.0)
            for e in estimates]


def model_ideal_seconds(problem: Problem, device: Device) -> float:
    """The floor the estimates compare with: the ideal bytes in one full launch (``model.py``)."""
    return model.ideal_seconds(device, problem.ideal_bytes)
