"""The configs timing or the cost model chooses among, per regime, built around the heuristics'.

Lists stay short (at most ``MAX_CANDIDATES``): every candidate is compiled when it is timed. The
heuristics' config (``heuristics.py``) always comes first, so it wins ties and is always among
them. Configs are plain dicts of ``tritonml._config.ScanConfig``/``ReduceConfig`` fields; tiles
stay inside the GPU tile limits of ``spaces.py``, warps follow the heuristics' rule
(``compiled.scan_warps``/``reduce_warps``).
"""
from __future__ import annotations

import math

from tritonml._config import MAX_REDUCE_SPLITS

from . import compiled, spaces
from .heuristics import next_pow2
from .problem import SECTOR_BYTES, Problem

MAX_CANDIDATES = 12


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


def scan_candidates(problem: Problem, heuristic: dict) -> list[dict]:
    """The heuristics' config; one-pass tiles of 1, 1/2 and 1/4 the element budget ("rows") or
    of every width down to one sector ("columns"); look-back tiles from the budget down to
    ``LOOKBACK_MIN_BLOCK_AXIS`` tall where the axis has at least ``LOOKBACK_MIN_TILES`` of them."""
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
    else:
        lanes = _lanes(problem, space.columns_max_block_inner)
        for block_inner in lanes:
            configs.append(_scan("columns", min(axis_p2, max(1, budget // block_inner)),
                                 block_inner))
        lookback_inner = [lanes[-1], lanes[0]]
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
