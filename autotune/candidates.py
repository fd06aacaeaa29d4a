"""The configs timing or the cost model chooses among, per regime, built around the heuristics'.

Lists stay short (at most ``MAX_CANDIDATES``): every candidate is compiled when it is timed. The
heuristics' config (``heuristics.py``) always comes first, so it wins ties and is always among them.
Configs are plain dicts of ``tritonml_autotune.configs.ScanConfig``/``ReduceConfig`` fields; tiles
stay inside the GPU tile limits of ``spaces.py``, warps follow the heuristics' rule
(``compiled.scan_warps``/``reduce_warps``).
"""
from __future__ import annotations

import math

from tritonml_autotune.configs import MAX_REDUCE_SPLITS

from . import compiled, cost, spaces
from .devices import Device
from .heuristics import chunk_split, chunk_window_most, next_pow2
from .problem import SECTOR_BYTES, Problem

MAX_CANDIDATES = 14


def _unique(configs, limit: int = MAX_CANDIDATES) -> list[dict]:
    out, seen = [], set()
    for config in configs:
        text = tuple(sorted(config.items()))
        if text not in seen:
            seen.add(text)
            out.append(config)
    return out[:limit]


def _narrowest_lanes(problem: Problem) -> int:
    """Fewest inner lanes a strided-axis tile may have: one whole sector per axis step."""
    return max(1, SECTOR_BYTES // problem.element_bytes)


def _lanes(problem: Problem, widest: int) -> list[int]:
    """Tile widths along the contiguous inner dim, widest first, down to one sector."""
    lanes, width = [], min(widest, next_pow2(problem.inner_len))
    while width >= 1:
        lanes.append(width)
        if width <= _narrowest_lanes(problem):
            break
        width //= 2
    return lanes


# ---------------------------------------------------------------------------------------------
# Scans
# ---------------------------------------------------------------------------------------------
def _scan(regime: str, block_axis: int, block_inner: int) -> dict:
    return dict(regime=regime, block_axis=block_axis, block_inner=block_inner,
                num_warps=compiled.scan_warps(block_axis * block_inner))


def _chunked(problem: Problem, device: Device, block_axis: int, block_inner: int) -> dict | None:
    """A chunked config of this tile (``heuristics.chunk_split``), its resident programs from the
    kernel's compiled registers where ``compiled.json`` has them (else from threads alone, the
    most); None where one chunk a chain is enough, or where chunks of one tile already overflow
    the L2 budget (a smaller tile is among the candidates)."""
    config = _scan("chunked", block_axis, block_inner)
    tiles = -(-problem.axis_len // block_axis)
    chains = problem.chains(block_inner)
    usage = cost.kernel_usage(problem, device, "scan_chunked", block_axis * block_inner,
                              config["num_warps"])
    resident = device.sms * cost.programs_per_sm(device, chains * tiles, config["num_warps"],
                                                 usage.registers if usage else None)
    tile_bytes = (block_axis * min(block_inner, problem.inner_len) * problem.element_bytes
                  * problem.sector_waste(block_inner))
    chunk_tiles, window = chunk_split(tiles, chains, block_axis, tile_bytes, resident,
                                      device.l2_bytes, 2 * device.sms,
                                      chunk_window_most(block_inner, problem.state_bytes))
    programs = chains * -(-tiles // chunk_tiles)
    in_flight = min(programs, resident) * chunk_tiles * tile_bytes
    if chunk_tiles >= tiles or in_flight > spaces.CHUNKED_L2_SHARE * device.l2_bytes:
        return None
    return dict(config, chunk_tiles=chunk_tiles, window=window)


def _chunked_tiles(problem: Problem, budget: int, lanes: list, sms: int) -> list[tuple]:
    """Chunked tiles: along a contiguous axis one lane, the element budget, the tall 4096 (8
    warps) as the look-back's, and where one-tile chunks of the budget are fewer than two
    programs per SM, the tallest tile (at least ``CHUNKED_MIN_BLOCK_AXIS``) that gives that
    many; along a strided axis 128, 64 and 32 lanes (whole 128-byte lines of float32), each as
    tall as the budget allows."""
    axis_p2 = next_pow2(problem.axis_len)
    if problem.contiguous:
        filling = min(axis_p2, budget)
        while (filling > spaces.CHUNKED_MIN_BLOCK_AXIS
               and problem.chains(1) * -(-problem.axis_len // filling) < 2 * sms):
            filling //= 2
        return [(min(axis_p2, budget), 1), (min(axis_p2, spaces.LOOKBACK_TALL_BLOCK_AXIS), 1),
                (filling, 1)]
    widest = [width for width in lanes if width >= spaces.CHUNKED_MIN_BLOCK_INNER]
    return [(min(axis_p2, max(1, budget // width)), width) for width in widest or lanes[:1]]


def scan_candidates(problem: Problem, heuristic: dict, device: Device) -> list[dict]:
    """The heuristics' config; one-pass tiles of 1, 1/2 and 1/4 the element budget ("rows") or
    of every width down to one sector ("columns"); chunked tiles (``_chunked_tiles``) where the
    chains are too few to fill ``device`` with one chunk each; look-back tiles from the budget
    down to ``LOOKBACK_MIN_BLOCK_AXIS`` tall where the axis has at least ``LOOKBACK_MIN_TILES``
    of them (the look-back stays where the cost model finds it faster: short axes, whose few
    tiles' hand-overs cost less than a chunk's second read and its tail)."""
    space = spaces.GPU_SCAN
    budget = space.tile_budget(problem.state_bytes)
    axis_p2, inner_p2 = next_pow2(problem.axis_len), next_pow2(problem.inner_len)
    configs = [heuristic]
    if problem.contiguous:
        for share in (1, 2, 4):
            block_axis = min(axis_p2, space.rows_max_block_axis, max(1, budget // share))
            configs.append(_scan("rows", block_axis,
                                 min(inner_p2, max(1, budget // block_axis))))
        lookback_inner = [min(inner_p2, max(1, budget // axis_p2))]
        lanes = lookback_inner
    else:
        lanes = _lanes(problem, space.columns_max_block_inner)
        for block_inner in lanes:
            configs.append(_scan("columns", min(axis_p2, max(1, budget // block_inner)),
                                 block_inner))
        lookback_inner = [lanes[-1], lanes[0]]
    for block_axis, block_inner in _chunked_tiles(problem, budget, lanes, device.sms):
        chunked = _chunked(problem, device, block_axis, block_inner)
        if chunked is not None:
            configs.append(chunked)
    if problem.contiguous and problem.axis_len >= (spaces.LOOKBACK_MIN_TILES
                                                   * spaces.LOOKBACK_TALL_BLOCK_AXIS):
        # Fewer, taller tiles shorten the look-back's chain of prefix hand-overs, which bounds
        # its time on a GPU (cost.LOOKBACK_TILE_SECONDS); this tile compiles without spills.
        configs.append(_scan("lookback", spaces.LOOKBACK_TALL_BLOCK_AXIS, 1))
    height = budget
    while height >= spaces.LOOKBACK_MIN_BLOCK_AXIS:
        for block_inner in lookback_inner:
            block_axis = min(axis_p2, max(1, budget // block_inner), height)
            if problem.axis_len >= spaces.LOOKBACK_MIN_TILES * block_axis:
                configs.append(_scan("lookback", block_axis, block_inner))
        height //= 2
    return _unique(configs)


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------
def _reduce(regime: str, block_axis: int, block_inner: int, splits: int = 1,
            one_launch: bool = True) -> dict:
    budget = spaces.GPU_REDUCE.tile_elements
    return dict(regime=regime, block_axis=block_axis, block_inner=block_inner,
                num_warps=compiled.reduce_warps(block_axis * block_inner), splits=splits,
                block_split=min(next_pow2(splits), max(1, budget // block_inner)),
                one_launch=one_launch)


def split_min_axis(problem: Problem) -> int:
    """Reduced positions each split program folds at least, so that the partial states (written
    and read back) stay within ``REDUCE_SPLIT_MAX_PARTIAL_SHARE`` of the input's bytes, for this
    problem's state and element sizes."""
    return math.ceil(2 * problem.state_bytes
                     / (spaces.REDUCE_SPLIT_MAX_PARTIAL_SHARE * problem.element_bytes))


def _split_counts(problem: Problem, one: dict, sms: int) -> list[int]:
    """Splits that bring one launch's chains up to one and to two programs per SM, where each
    split program still folds ``split_min_axis`` positions and at least one tile."""
    chains = problem.chains(one["block_inner"])
    if chains >= sms:
        return []
    most = min(problem.axis_len // max(split_min_axis(problem), one["block_axis"]),
               MAX_REDUCE_SPLITS)
    counts = {min(most, -(-programs // chains)) for programs in (sms, 2 * sms)}
    return sorted(count for count in counts if count >= 2)


def reduce_candidates(problem: Problem, heuristic: dict, sms: int) -> list[dict]:
    """The heuristics' config; one-launch tiles (contiguous reduction: 4096, 2048 and 1024
    positions long; else every width from 256 lanes down to one sector, as tall as the element
    budget allows); and splits of the narrowest and the widest of them that fill the SMs, each
    folding in the chain's last program (one launch) and in a second launch (timing on a GPU
    decides between them; the cost model prefers one launch)."""
    space = spaces.GPU_REDUCE
    budget = space.tile_elements
    red_p2, inner_p2 = next_pow2(problem.axis_len), next_pow2(problem.inner_len)
    if problem.contiguous:
        regime = "rows"
        tiles = [(min(red_p2, space.rows_max_block_axis, length), 0)
                 for length in (budget, budget // 2, budget // 4)]
        tiles = [(axis, min(inner_p2, max(1, budget // axis))) for axis, _ in tiles]
    else:
        regime = "columns"
        tiles = [(min(red_p2, max(1, budget // lanes)), lanes)
                 for lanes in _lanes(problem, space.columns_max_block_inner)]
    ones = _unique(_reduce(regime, axis, lanes) for axis, lanes in tiles)
    splits = [_reduce("split", one["block_axis"], one["block_inner"], count, one_launch)
              for one in _unique([ones[-1], ones[0]])
              for count in _split_counts(problem, one, sms)
              for one_launch in (True, False)]
    return _unique([heuristic, *ones, *splits])
