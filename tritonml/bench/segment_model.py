"""The segmented ops at full size, as the tuner's H100 time model sees them: modeled, nothing timed.

Three distributions of segment lengths over float32 data: a million segments of 1 to 3 elements,
three segments of 10**7, and a power law (Pareto, shape 1.2) over 2**24 elements. For each, the
segment kernel's launch (tritonml/kernels/segment.py) with the config an H100 gets
(``tritonml_autotune.segments.segment_config``): its programs against the SMs, how many segments a
program packs and how many programs the longest segment is split over, its DRAM bytes against the
ideal (x read once, the result written once, the boundaries read once), and its modeled seconds
(``tritonml_autotune.cost.launch_seconds``: bandwidth at the occupancy its registers allow, each
program's tile steps in series at the measured ``TILE_STEP_SECONDS``, the look-back's round trips)
against one ideal launch (``model.ideal_seconds``). ``table()`` is docs/segments.md's "Modeled on
an H100" table (``python -m benchmarks.doc_table`` writes it).

What the model charges (autotune/cost.py): the published chunk tails and status words as DRAM
bytes; a scan's second read of the chunks a segment spans from L2 (as the chunked scan's); the
fold of the tails before the chunk where the longest segment ends, one round trip per WINDOW
chunks; a program's tiles one after another. The registers per thread are ptxas's for sm_90
(tests/kernels/test_segment_compile.py), which set how many programs an SM holds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from tritonml_autotune import cost, devices, model
from tritonml_autotune.segments import segment_config

from ..kernels.segment_ids import SEARCH_IDS

# ptxas's registers per thread for sm_90 at the H100 config of a 1-D float32 x (a 1024 x 1 tile;
# tests/kernels/test_segment_compile.py checks these figures): the SUM reduction of a program
# that walks several tiles, as every distribution here has (a float64 state; 4 warps, maxnreg
# 255: two programs per SM; a one-tile program, with no loop, takes 159 and three), and the
# forward sum scan (8 warps, ptxas's own choice, without spills: four).
REGISTERS = {"reduce": 177, "scan": 64}
ELEMENT_BYTES = 4          # float32 x and result
STATE_BYTES = 8            # float64 state (float32 accumulates in float64)
OFFSET_BYTES = 8           # int64 boundaries
IDS_FACT_BYTES = 3 * 8     # a program's least id, greatest id and descents (SEGMENT_IDS)


@dataclass(frozen=True)
class Distribution:
    label: str
    lengths: np.ndarray


def distributions() -> tuple:
    rng = np.random.default_rng(0)
    pareto = rng.pareto(1.2, 1 << 24).astype(np.int64) + 1
    ends = np.cumsum(pareto)
    kept = pareto[: int(np.searchsorted(ends, 1 << 24))]
    return (Distribution("a million segments of 1 to 3", rng.integers(1, 4, 10 ** 6)),
            Distribution("three segments of 10**7", np.full(3, 10 ** 7)),
            Distribution("power law over 2**24", np.append(kept, (1 << 24) - kept.sum())))


@dataclass(frozen=True)
class Modeled:
    label: str
    op: str
    elements: int
    segments: int
    programs: int
    segments_per_program: float
    longest_split_over: int       # programs the longest segment's elements fall in
    bytes_ratio: float            # DRAM bytes / ideal bytes
    seconds: float
    ideal_seconds: float

    @property
    def time_ratio(self) -> float:
        return self.seconds / self.ideal_seconds


def _chunks(offsets: np.ndarray, config, elements: int):
    """Per program, in ticket order: its tiles walked, its first tile, the tile after its last,
    and the segment holding its first element."""
    tiles = max(1, -(-elements // config.block_axis))
    first = np.arange(0, tiles, config.chunk_tiles)
    end = np.minimum(first + config.chunk_tiles, tiles)
    segment = np.searchsorted(offsets, first * config.block_axis, side="right") - 1
    return end - first, first, end, segment


def scan_tails(offsets: np.ndarray, config, elements: int) -> tuple:
    """Per program of a scan: the tiles its tail fold reads (its last segment's part, 0 where the
    chunk's first segment starts in it and nothing is folded first), and whether the chunk has no
    segment start after its first element (the fold then goes ``fold_tiles`` tiles a step)."""
    walk, first, end, segment = _chunks(offsets, config, elements)
    start = first * config.block_axis
    n = len(offsets) - 1
    opened_before = (first > 0) & (offsets[np.minimum(segment, n)] != start)
    last = np.minimum(end * config.block_axis, elements) - 1
    last_start = offsets[np.searchsorted(offsets, last, side="right") - 1]
    tail_tiles = end - np.maximum(last_start, start) // config.block_axis
    inside = offsets[np.minimum(segment + 1, n)] >= end * config.block_axis
    return np.where(opened_before, tail_tiles, 0), inside


def chunk_steps(offsets: np.ndarray, config, elements: int, op: str,
                ids: bool = False) -> np.ndarray:
    """The tile steps each program of the segment kernel makes, in ticket order, as the kernel
    decides them from ``offsets`` (``_inside_one_segment``): a reduction's chunk inside one
    segment folds ``fold_tiles`` tiles a step (``ids``, segments from a sorted index: then
    reads its ids as many tiles a step, to check them), any other walks its tiles one at a
    time; a scan's chunk whose last segment started before it first folds that segment's part
    (its tail: the whole chunk inside one segment, ``fold_tiles`` tiles a step), then walks its
    tiles."""
    walk, first, end, segment = _chunks(offsets, config, elements)
    if op == "reduce":
        start = first * config.block_axis
        following = offsets[np.minimum(segment + 1, len(offsets) - 1)]
        inside = (following > end * config.block_axis) & ((start > 0) | (segment == 0))
        folds = -(-walk // config.fold_tiles)
        return np.where(inside, folds * (2 if ids else 1), walk)
    tail_tiles, inside = scan_tails(offsets, config, elements)
    return walk + np.where(inside, -(-tail_tiles // config.fold_tiles), tail_tiles)


def kernel_launch(lengths: np.ndarray, op: str, device=devices.H100, *, inner: int = 1,
                  element_bytes: int = ELEMENT_BYTES, state_bytes: int = STATE_BYTES,
                  registers=None, boundary_bytes: int = OFFSET_BYTES,
                  ids_bytes: int = 0, result_bytes: Optional[int] = None) -> tuple:
    """The segment kernel's launch over segments of ``lengths`` along an axis with ``inner``
    contiguous positions beside it (a row of ``inner`` values per position: one chain while
    ``inner`` fits a tile's ``MAX_BLOCK_INNER``), as ``cost.Launch``; with its config, the most
    programs the longest segment spans, the ideal bytes (x read once, the result written once,
    the boundaries read once, ``boundary_bytes`` each) and the modeled seconds (``registers``
    per thread: the 1-D figures of ``REGISTERS`` unless given). ``ids_bytes``: a reduction's
    segments come from a sorted index of that many bytes an element instead (``SEGMENT_IDS``:
    the index read once in place of the boundaries, its view one element back and each
    chunk's search for its first segment's start from L2, each program's three facts
    written). ``result_bytes``: a result's element, where not x's (a reduction stored in its
    accumulation dtype)."""
    elements, segments = int(lengths.sum()), len(lengths)
    with devices.targeting(device):
        config = segment_config(elements, inner, 1, state_bytes, "cuda", scan=op == "scan",
                                slices=not ids_bytes)
    tile = config.block_axis * config.block_inner
    tiles = -(-elements // config.block_axis)
    chunk = config.chunk_tiles * config.block_axis          # positions per program
    chains = -(-inner // config.block_inner)
    programs = chains * -(-tiles // config.chunk_tiles)
    longest = int(lengths.max())
    split = -(-(longest - 1) // chunk) + 1     # programs it can span, at worst alignment
    x = elements * inner * element_bytes
    result = ((segments if op == "reduce" else elements) * inner
              * (element_bytes if result_bytes is None else result_bytes))
    boundaries = (segments + 1) * boundary_bytes if not ids_bytes else elements * ids_bytes
    published = programs * (config.block_inner * state_bytes + cost.STATUS_WORD_BYTES)
    if ids_bytes:
        published += programs * IDS_FACT_BYTES
    ideal = x + result + boundaries
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    steps = chunk_steps(offsets, config, elements, op, ids=bool(ids_bytes))
    # a scan's chunk whose last segment started before it folds that segment's part first (its
    # tail), then scans the chunk: the tail's tiles are read twice, the second time from L2
    reread = 0.0
    if op == "scan":
        reread = float(np.sum(scan_tails(offsets, config, elements)[0])) * config.block_axis \
            * inner * element_bytes
    # from ids: each tile's view one element back (the lines of its own load), and each chunk's
    # search for where its first segment started (SEARCH_IDS ids a round trip)
    shifted = elements * ids_bytes + programs * SEARCH_IDS.value * ids_bytes
    launch = cost.Launch("segment", tile, config.num_warps, programs, ideal + published,
                         serial_tiles=-(-split // config.window),
                         tail_seconds=cost.CHUNKED_TAIL_ROUND_TRIPS * cost.FOLD_ROUND_TRIP_SECONDS,
                         l2_bytes=reread + shifted, reread_bytes=reread, steps=int(steps.max()),
                         total_steps=int(steps.sum()))
    seconds = cost.launch_seconds(device, launch, REGISTERS[op] if registers is None
                                  else registers)
    return launch, config, split, ideal, seconds


def modeled(distribution: Distribution, op: str, device=devices.H100) -> Modeled:
    """The segment kernel's launch for ``distribution`` (``op``: "reduce" or "scan")."""
    lengths = distribution.lengths
    launch, _, split, ideal, seconds = kernel_launch(lengths, op, device)
    return Modeled(distribution.label, op, int(lengths.sum()), len(lengths), launch.programs,
                   len(lengths) / launch.programs, split, launch.bytes_moved / ideal, seconds,
                   model.ideal_seconds(device, ideal))


def rows(device=devices.H100) -> list:
    return [modeled(d, op, device) for d in distributions() for op in ("reduce", "scan")]


def table(device=devices.H100) -> str:
    lines = ["| lengths | op | segments | programs | segments / program | longest split over "
             "| bytes / ideal | modeled / ideal time |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows(device):
        lines.append(f"| {r.label} | {r.op} | {r.segments:,} | {r.programs:,} | "
                     f"{r.segments_per_program:,.1f} | {r.longest_split_over:,} | "
                     f"{r.bytes_ratio:.3f} | {r.time_ratio:.2f} |")
    return "\n".join(lines) + "\n"
