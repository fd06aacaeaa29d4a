"""One pass over a 1-D index: the facts its checks need and, where it is sorted, its group
boundaries.

A scatter's index must be checked (every value in [0, n)) and, where it turns out sorted, the
group boundaries of the sorted values are what the segment kernel reads (boundary g: the first
position whose value is at least g). Both need every value of the index once; this kernel reads
it once for both, so a sorted index costs one read of the index before the reduction, not two
(a check, then a search for the boundaries).

Each program takes BLOCK consecutive positions [start, end) and

- folds its values into the facts: the least value, the greatest, and the descents (positions
  whose value is below the one before, the first position compared with the previous tile's
  last): integer atomics, so the facts do not depend on the programs' order;
- where its tile is non-decreasing, including across its first position, writes the boundaries
  of the groups (prev, last] (unless they are more than MAX_TILE_GROUPS: then it counts itself
  in the facts and the caller searches for the boundaries, in parallel over the groups): prev the value before ``start`` (-1 at the first tile), last the
  tile's last value (``n_groups`` at the last tile, whose search ends at the axis length). Each
  boundary is the first position in the tile whose value is at least the group, a binary search
  of the tile (L1-resident) per group, BLOCK_GROUPS groups at a time. When every tile is
  non-decreasing (no descent at all) the ranges (prev, last] of the tiles cover [0, n_groups]
  exactly once, so every boundary is written once; otherwise some are not written, and the
  caller, which finds descents in the facts, does not use them.

Values out of [0, n_groups) clip the groups written to [0, n_groups]: the facts report them and
the caller raises before using anything.
"""
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl

# facts_ptr's four int64 entries, as the launcher initializes them
FACT_MIN = tl.constexpr(0)
FACT_MAX = tl.constexpr(1)
FACT_DESCENTS = tl.constexpr(2)
FACT_LEFT = tl.constexpr(3)   # sorted tiles that left their boundaries to the caller


@triton.jit
def _first_at_least(keys_ptr, key_stride, groups, wanted, start, end,
                    SEARCH_STEPS: tl.constexpr):
    """For each of ``groups`` (where ``wanted``), the first position in [start, end) whose value
    is at least it (``end`` where none is), the values there being non-decreasing."""
    low = tl.zeros(groups.shape, tl.int64) + start
    high = tl.where(wanted, tl.zeros(groups.shape, tl.int64) + end, low)
    for _ in tl.static_range(SEARCH_STEPS):
        open_range = low < high
        middle = (low + high) // 2
        value = tl.load(keys_ptr + middle * key_stride, mask=open_range, other=0).to(tl.int64)
        right = open_range & (value < groups)
        low = tl.where(right, middle + 1, low)
        high = tl.where(open_range & ~right, middle, high)
    return low


@triton.jit
def index_bounds_kernel(keys_ptr, length, key_stride, facts_ptr, offsets_ptr, n_groups,
                        BLOCK: tl.constexpr, BLOCK_GROUPS: tl.constexpr,
                        SEARCH_STEPS: tl.constexpr, MAX_TILE_GROUPS: tl.constexpr,
                        WRITE_OFFSETS: tl.constexpr):
    """grid = cdiv(length, BLOCK); ``length`` >= 1. ``facts_ptr``: int64 [min, max, descents,
    left], initialized to (the int64 maximum, the int64 minimum, 0, 0); ``offsets_ptr``:
    n_groups + 1 int64 boundaries, written where the index is sorted (WRITE_OFFSETS) by the
    tiles that span at most MAX_TILE_GROUPS groups; a tile spanning more (a long run of empty
    groups: a search per group in one program would be slow) counts itself in ``left``, and
    the caller finds the boundaries another way."""
    start = tl.program_id(0).to(tl.int64) * BLOCK
    positions = start + tl.arange(0, BLOCK)
    inside = positions < length
    keys = tl.load(keys_ptr + positions * key_stride, mask=inside, other=0).to(tl.int64)
    has_before = inside & (positions > 0)
    # the value before each position: one element on from ``keys``' view, hitting its sectors
    before = tl.load(keys_ptr + (positions - 1) * key_stride, mask=has_before,
                     other=0).to(tl.int64)
    least = tl.min(tl.where(inside, keys, 9223372036854775807), 0)
    greatest = tl.max(tl.where(inside, keys, -9223372036854775807 - 1), 0)
    descents = tl.sum((has_before & (keys < before)).to(tl.int64), 0)
    tl.atomic_min(facts_ptr + FACT_MIN, least, sem="relaxed")
    tl.atomic_max(facts_ptr + FACT_MAX, greatest, sem="relaxed")
    tl.atomic_add(facts_ptr + FACT_DESCENTS, descents, sem="relaxed")
    if WRITE_OFFSETS:
        if descents == 0:
            end = tl.minimum(start + BLOCK, length)
            if start > 0:
                previous = tl.load(keys_ptr + (start - 1) * key_stride).to(tl.int64)
            else:
                previous = tl.full([], -1, tl.int64)
            if end == length:
                last = tl.zeros([], tl.int64) + n_groups
            else:
                last = tl.load(keys_ptr + (end - 1) * key_stride).to(tl.int64)
            first_group = tl.minimum(tl.maximum(previous, -1), n_groups).to(tl.int64) + 1
            end_group = tl.minimum(tl.maximum(last, -1), n_groups).to(tl.int64) + 1
            if end_group - first_group > MAX_TILE_GROUPS:
                tl.atomic_add(facts_ptr + FACT_LEFT, 1, sem="relaxed")
                end_group = first_group
            for group_start in range(first_group, end_group, BLOCK_GROUPS):
                groups = group_start + tl.arange(0, BLOCK_GROUPS).to(tl.int64)
                wanted = groups < end_group
                found = _first_at_least(keys_ptr, key_stride, groups, wanted, start, end,
                                        SEARCH_STEPS=SEARCH_STEPS)
                tl.store(offsets_ptr + groups, found, mask=wanted)
