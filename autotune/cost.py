"""The cost model: modeled seconds of a candidate config, for choosing when nothing can be timed.

Per launch, from the config and the problem's sizes (``problem.py``):

    streaming = max(DRAM bytes / (bandwidth * min(1, programs / sms) * occupancy),
                    L2 bytes / (L2 bandwidth * min(1, programs / sms)),
                    waves * tile steps per program * TILE_STEP_SECONDS)
    seconds = max(streaming, serial hand-overs) + tail + launch overhead

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
- the chunked regime (``_chunked``): each program reads its chunk twice, once to fold it and once
  to scan it. DRAM bytes are the input read once, the output written once and the workspaces (a
  4-byte status word and ``block_inner`` published states per chunk, written once); the second
  read comes from L2 while the chunks in flight fit in ``spaces.CHUNKED_L2_SHARE`` of it (in
  flight: the resident programs, as ``occupancy`` counts them, times a chunk's input bytes), and
  the share that does not fit is charged to DRAM. What is read from L2 alone (the second read
  that fits, and each program's look-back over its group's published states) is counted apart
  (``Launch.l2_bytes``) and bounds the streaming at the device's L2 bandwidth (an assumption,
  ``devices.py``), with the DRAM traffic that passes through L2 too. Its serial part is one
  hand-over per group of ``window`` chunks, each taken as long as a look-back tile's
  (``LOOKBACK_TILE_SECONDS``), and its tail a program's own publish, poll and acquire-and-load
  (three ``FOLD_ROUND_TRIP_SECONDS``). Without compile facts for its kernel (``compiled.usage``
  answers None) registers are unknown: resident programs are bounded by threads alone, the most
  chunks in flight (the L2 fit errs on the safe side), and occupancy by threads alone;
- tile steps: a program walks its tiles one after another (load, combine, store; nothing is
  pipelined across steps), so a launch takes at least its waves of resident programs
  (``programs_per_sm``) times the steps each program makes times ``TILE_STEP_SECONDS``, measured
  on an H100. It binds where few programs walk many tiles: a tiled scan down few wide columns.
  Where programs make different numbers of steps (``Launch.total_steps``: the segment kernel's
  chunks), at least all the steps shared over the resident programs, and the slowest program's;
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
from dataclasses import dataclass, replace

from . import compiled, devices, model, spaces
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
# One tile step of a program that walks its tiles in a loop (load a tile, combine, store, carry on),
# latency included. Measured on an H100 (Triton 3.6, 2026-11-23, benchmarks/results/): a tiled
# scan of 4096x16384 along axis 0 ran 128 programs of 512 steps of [8, 128] float32 in 0.555 ms
# (1.08 us a step), 256 steps of [16, 128] float16 in 0.308 ms (1.2 us), 512 of [8, 128] int32 in
# 0.664 ms (1.3 us): far from the bandwidth (0.97 TB/s of 3.0), each program's steps in series.
TILE_STEP_SECONDS = 1.1e-6
# A chunked scan's last program, after its fold: publish its aggregate, poll its group's status
# words, then one acquire pass and one load of their values, each a dependent round trip.
CHUNKED_TAIL_ROUND_TRIPS = 3
STATUS_WORD_BYTES = 4    # one int32 status word per chunk (tritonml/launchers/scan.py, state_work)


@dataclass(frozen=True)
class Launch:
    kernel: str          # as in tables/compiled.json
    tile_elements: int   # the tile the registers hold
    num_warps: int
    programs: int
    bytes_moved: float   # DRAM traffic
    # hand-overs one after another, LOOKBACK_TILE_SECONDS each (a look-back's tiles along the
    # axis, a chunked scan's groups of chunks)
    serial_tiles: int = 0
    # after the streaming: a one-launch split's fold, a chunked scan's last look-back
    tail_seconds: float = 0.0
    # Read from L2 alone, on top of bytes_moved (which passes through L2 as well): a chunked scan's
    # second read where its chunks in flight fit, and its look-back over published states.
    l2_bytes: float = 0.0
    reread_bytes: float = 0.0   # a chunked scan's second read, all of it (in l2_bytes or DRAM)
    steps: int = 1   # tiles each program loads one after another (TILE_STEP_SECONDS each)
    # Where programs make different numbers of steps (the segment kernel's chunks): the steps of
    # all programs together; ``steps`` is then the most one program makes. Programs take work in
    # ticket order as SMs free up, so the launch steps at least total / resident programs deep.
    total_steps: int = 0


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
        """DRAM bytes, every launch together."""
        return sum(launch.bytes_moved for launch in self.launches)

    @property
    def l2_bytes(self) -> float:
        """Bytes read from L2 alone (counted apart from ``bytes_moved``)."""
        return sum(launch.l2_bytes for launch in self.launches)


def kernel_usage(problem: Problem, device: Device, kernel: str, tile_elements: int,
                 num_warps: int) -> compiled.Usage | None:
    """``compiled.usage`` for this problem's state and dtype on ``device``'s architecture (the
    newest the table has, ``devices.ARCHS``, for an architecture it does not)."""
    arch = device.arch if device.arch in devices.ARCHS else max(devices.ARCHS)
    state = compiled.state_class(problem.state_values)
    return compiled.usage(kernel, state, problem.dtype, arch, tile_elements, num_warps)


def _window_reads(chunks: int, window: int) -> int:
    """Published states one chain's chunks read back: chunk c reads its group's earlier chunks
    (c % window of them) and, past the first group, the previous group's prefix."""
    full, rest = divmod(chunks, window)
    return (full * window * (window - 1) // 2 + rest * (rest - 1) // 2
            + max(0, chunks - window))


def _chunked(problem: Problem, config: dict, device: Device, chains: int, read: float,
             written: float) -> Launch:
    """A chunked scan's launch (module docstring): its DRAM bytes with the share of the second
    read that overflows the L2 budget, its L2-only reads, its group hand-overs and its tail."""
    axis, lanes, warps = config["block_axis"], config["block_inner"], config["num_warps"]
    tiles = -(-problem.axis_len // axis)             # per chain
    chunks = -(-tiles // config["chunk_tiles"])      # per chain
    launch = Launch("scan_chunked", axis * lanes, warps, chains * chunks, read + written,
                    steps=min(tiles, config["chunk_tiles"]))
    if chunks == 1:   # one program per chain: one read, nothing published or waited for
        return launch
    window = config["window"]
    one_state = STATUS_WORD_BYTES + lanes * problem.state_bytes   # per chunk: word + values
    published = chains * (chunks - 1) * one_state    # every chunk but a chain's last publishes
    looked_back = chains * _window_reads(chunks, window) * one_state
    usage = kernel_usage(problem, device, launch.kernel, launch.tile_elements, warps)
    resident = device.sms * programs_per_sm(device, launch.programs, warps,
                                            usage.registers if usage else None)
    in_flight = min(launch.programs, resident) * read / launch.programs
    budget = spaces.CHUNKED_L2_SHARE * device.l2_bytes
    missed = max(0.0, in_flight - budget) / in_flight
    return replace(launch, bytes_moved=read + written + published + missed * read,
                   l2_bytes=(1.0 - missed) * read + looked_back, reread_bytes=read,
                   steps=2 * launch.steps,
                   serial_tiles=-(-chunks // window),
                   tail_seconds=CHUNKED_TAIL_ROUND_TRIPS * FOLD_ROUND_TRIP_SECONDS)


def _launches(problem: Problem, config: dict, device: Device) -> list[Launch]:
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
        if config["regime"] == "chunked":
            return [_chunked(problem, config, device, chains, read, written)]
        return [Launch("scan_tiled", axis * lanes, warps, chains, read + written,
                       steps=-(-problem.axis_len // axis))]
    written = problem.outputs * problem.out_bytes
    splits = config["splits"]
    if splits == 1:
        return [Launch("reduce", axis * lanes, warps, chains, read + written,
                       steps=-(-problem.axis_len // axis))]
    split_steps = -(-problem.axis_len // (splits * axis))
    partials = problem.state_bytes * problem.outputs * splits
    fold = config["block_split"] * lanes
    if config.get("one_launch", True):
        round_trips = 1 + -(-splits // config["block_split"])
        return [Launch("reduce_split_last", axis * lanes, warps, chains * splits,
                       read + 2 * partials + written,
                       tail_seconds=round_trips * FOLD_ROUND_TRIP_SECONDS, steps=split_steps)]
    return [Launch("reduce_split", axis * lanes, warps, chains * splits, read + partials,
                   steps=split_steps),
            Launch("reduce_partials", fold, warps, chains, partials + written,
                   steps=-(-splits // config["block_split"]))]


def programs_per_sm(device: Device, programs: int, num_warps: int,
                    registers: int | None) -> int:
    """Programs of a launch of ``programs`` resident on one busy SM at once: at most its share of
    them, ``MAX_PROGRAMS_PER_SM``, and what threads and (when known) registers per thread allow."""
    threads = 32 * num_warps
    resident = min(-(-programs // device.sms), MAX_PROGRAMS_PER_SM,
                   device.max_threads_per_sm // threads)
    if registers:
        allocated = -(-registers // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
        resident = min(resident, max(1, device.registers_per_sm // (allocated * threads)))
    return resident


def occupancy(device: Device, launch: Launch, registers: int | None) -> float:
    """The fraction of a busy SM's bandwidth ``launch`` keeps, given its registers per thread."""
    resident = programs_per_sm(device, launch.programs, launch.num_warps, registers)
    return min(1.0, resident * launch.num_warps / FULL_BANDWIDTH_WARPS)


def launch_seconds(device: Device, launch: Launch, registers: int | None,
                   latency_bound: float = 1.0) -> float:
    """``latency_bound``: how many times longer the streaming takes than occupancy alone says
    (fewer loads in flight than the kernel it stands in for)."""
    busy = min(1.0, launch.programs / device.sms)
    dram = latency_bound * (launch.bytes_moved / (device.copy_bandwidth_bytes_per_s * busy
                                                  * occupancy(device, launch, registers)))
    # Everything goes through L2: the DRAM traffic, and what is read from L2 alone.
    l2 = (launch.bytes_moved + launch.l2_bytes) / (device.l2_bandwidth_bytes_per_s * busy)
    resident = device.sms * programs_per_sm(device, launch.programs, launch.num_warps, registers)
    if launch.total_steps:
        stepping = max(-(-launch.total_steps // resident), launch.steps) * TILE_STEP_SECONDS
    else:
        stepping = -(-launch.programs // resident) * launch.steps * TILE_STEP_SECONDS
    return (max(dram, l2, stepping, launch.serial_tiles * LOOKBACK_TILE_SECONDS)
            + launch.tail_seconds + device.launch_overhead_s)


def estimate(problem: Problem, config: dict, device: Device) -> Estimate:
    seconds, spills, most = 0.0, False, None
    launches = _launches(problem, config, device)
    for launch in launches:
        usage = kernel_usage(problem, device, launch.kernel, launch.tile_elements,
                             launch.num_warps)
        registers = usage.registers if usage else None
        spills = spills or bool(usage and usage.spills)
        most = registers if most is None else max(most, registers or 0)
        latency_bound = 1.0
        if launch.kernel == "reduce_split_last" and usage and usage.loads_in_flight:
            twin = kernel_usage(problem, device, "reduce_split", launch.tile_elements,
                                launch.num_warps)
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
