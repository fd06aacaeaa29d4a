"""Where the segment kernel's tiles meet their segments when the segments are given by a sorted
index (``SEGMENT_IDS`` in kernels/segment.py): ``ids[p]`` is the segment of axis position ``p``,
non-decreasing, so segment ``g`` is the run of positions holding ``g`` (empty where none does).

This is how a scatter of a sorted index (torch_scatter's ``segment_coo``) reduces in one pass:
the index is read once, by the kernel itself, with no boundaries made before. What the
boundaries told (kernels/segment_bounds.py), the index tells here from neighbours:

- a position's segment is its id; it starts a segment where the id differs from the one before
  (the tile's ids loaded again one position back, the lines of its own load, from cache), and
  ends one where the next position starts one (a histogram of the starts one row back, as the
  boundaries' tiles count their ends; the tile's last row reads the id after the tile);
- a segment's first position, where it started before the tile, is carried along the walk
  (``known``), and a chunk's first one is found by a search down the index (``run_start``,
  ``SEARCH_IDS`` ids a round trip), which also tells the chunk where its first segment
  started;
- the empty segments are the ids no position holds: a tile writes those above the id before it
  and up to its last id (the last tile: up to the last segment), so each is written once.

The same pass checks the index (each program's least and greatest id and its descents: an id
below the one before), so that a caller can refuse an index out of range or unsorted after the
launch; the kernel's writes then stay inside the output (ids are clamped to the segments) and
every wait ends (a search never goes past the chunk's own position), whatever the index holds.
"""
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl

from .segment_bounds import empty_results, run_bounds

# What a program reports of its ids (``facts``: int64 per program): the least, the greatest, and
# how many positions hold an id below the one before (a descent).
FACT_LOWEST = tl.constexpr(0)
FACT_HIGHEST = tl.constexpr(1)
FACT_DESCENTS = tl.constexpr(2)
FACTS = tl.constexpr(3)
# Segments a tile checks for emptiness a step (a histogram of its ids over each block of them),
# and ids a chunk's search for its first segment's start reads a round trip (``run_start``).
# With either larger (1,024, the boundaries' block; 128), Triton 3.6's sm_80 AVERAGE kept 8
# bytes of a loop's registers in local memory (tests/kernels/test_segment_compile.py).
EMPTY_BLOCK = tl.constexpr(256)
SEARCH_IDS = tl.constexpr(64)
# Ids' bounds before any is read: no id lies outside int64's range.
LOWEST_START = tl.constexpr(2**63 - 1)
HIGHEST_START = tl.constexpr(-2**63)


@triton.jit
def run_start(ids_ptr, position, BLOCK: tl.constexpr):
    """The first position of the run of equal ids holding ``position``, never above it whatever
    the index holds. BLOCK ids a round trip: samples at a stride growing BLOCK-fold until one
    differs from the id at ``position`` (or lies before the axis), then samples narrowing the
    stretch where it did: one round trip for a run shorter than BLOCK, about two per factor of
    BLOCK in its length beyond (a scalar galloping search took two per factor of 2)."""
    value = tl.load(ids_ptr + position)
    steps = tl.arange(0, BLOCK).to(tl.int64) + 1
    origin = position.to(tl.int64)
    # widen: the first k of origin - k * stride (k = 1..BLOCK) outside the run
    stride = origin * 0 + 1
    outside = tl.full([], BLOCK + 1, tl.int64)
    while outside > BLOCK:
        at = origin - steps * stride
        same = (at >= 0) & (tl.load(ids_ptr + tl.maximum(at, 0)) == value)
        outside = tl.min(tl.where(same, BLOCK + 1, steps), 0)
        stride = tl.where(outside > BLOCK, stride * BLOCK, stride)
    top = origin - (outside - 1) * stride   # in the run
    low = origin - outside * stride         # outside it, or before the axis
    # narrow: the first k of low + k * step (k = 1..BLOCK, at most top) in the run
    while top - low > 1:
        step = (top - low + BLOCK - 1) // BLOCK
        at = tl.minimum(low + steps * step, top)
        inside = (at >= 0) & (tl.load(ids_ptr + tl.maximum(at, 0)) == value)
        first = tl.min(tl.where(inside, steps, BLOCK + 1), 0)
        top = tl.minimum(low + first * step, top)
        low = low + (first - 1) * step
    return top.to(position.dtype)


@triton.jit
def id_facts(ids_ptr, first, end, axis_len, BLOCK: tl.constexpr):
    """(least, greatest, descents) of the ids at positions ``first`` to ``end - 1`` (the
    descent into ``first`` included), read BLOCK at a time: the check of a chunk whose ids the
    kernel does not otherwise read."""
    lowest = tl.full([], LOWEST_START, tl.int64)
    highest = tl.full([], HIGHEST_START, tl.int64)
    descents = tl.zeros([], tl.int64)
    for base in range(first, end, BLOCK):
        positions = base + tl.arange(0, BLOCK)
        valid = (positions < end) & (positions < axis_len)
        ids = tl.load(ids_ptr + positions, mask=valid, other=0).to(tl.int64)
        before = tl.load(ids_ptr + positions - 1, mask=valid & (positions > 0),
                         other=HIGHEST_START).to(tl.int64)
        lowest = tl.minimum(lowest, tl.min(tl.where(valid, ids, LOWEST_START), 0))
        highest = tl.maximum(highest, tl.max(tl.where(valid, ids, HIGHEST_START), 0))
        descents += tl.sum((valid & (ids < before)).to(tl.int64), 0)
    return lowest, highest, descents


@triton.jit
def tile_ids(ids_ptr, out, inner_mask, tile_start, known, axis_len, n_segments, initial_value,
             FINISH: tl.constexpr, IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr,
             HAS_INITIAL: tl.constexpr, EMPTY_INDEX: tl.constexpr, BLOCK_AXIS: tl.constexpr,
             BOUNDARY_BLOCK: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """``tile_segments`` (kernels/segment_bounds.py) of a reduction, forward, from the ids.

    ``known``: the first position of the segment holding ``tile_start`` (the walk's first tile:
    ``run_start``'s; each later tile's comes from the tile before). Returns (segments, firsts,
    lasts, lengths, next_known, facts): per position [BLOCK_AXIS] its segment (its id, clamped
    to the segments), whether it is its segment's first / last position (padding past the axis:
    both), the segment's length where it ends in the tile, the next tile's ``known``, and the
    tile's (least, greatest, descents) of its ids. Writes the results of the empty segments
    above the id before the tile and up to its last id (the last tile: up to the last
    segment)."""
    rows = tl.arange(0, BLOCK_AXIS)
    positions = tile_start + rows
    valid = positions < axis_len
    ids = tl.load(ids_ptr + positions, mask=valid, other=0).to(tl.int64)
    # (-1 before the axis: the empty segments there are found as a gap)
    before = tl.load(ids_ptr + positions - 1, mask=valid & (positions > 0), other=-1).to(tl.int64)
    padding = ~valid
    firsts = (ids != before) | padding
    # a row ends its segment where the next row starts one (the tile's last: where the id after
    # the tile differs), and at the axis's end
    starts_next = firsts & valid & (rows > 0)
    next_starts = tl.histogram(tl.where(starts_next, rows - 1, 0).to(tl.int32), BLOCK_AXIS,
                               mask=starts_next) > 0
    last_id = tl.sum(tl.where(rows == BLOCK_AXIS - 1, ids, 0), 0)
    following = tl.load(ids_ptr + tl.minimum(tile_start + BLOCK_AXIS, axis_len - 1))
    # (compared as a vector: the interpreter's ``&`` of an int1 tensor with an int1 scalar, or
    # with one broadcast, holds int32)
    differs = (rows * 0 + following.to(tl.int64)) != last_id
    leaves = (rows == BLOCK_AXIS - 1) & differs
    lasts = next_starts | leaves | (positions + 1 >= axis_len)
    segments = tl.minimum(tl.maximum(ids, 0), n_segments - 1).to(tile_start.dtype)
    starts, stops = run_bounds(firsts & valid, lasts & valid, positions, known, axis_len)
    lengths = stops - starts
    next_known = tl.max(tl.where(valid, starts, known), 0)
    lowest = tl.min(tl.where(valid, ids, LOWEST_START), 0)
    highest = tl.max(tl.where(valid, ids, HIGHEST_START), 0)
    descents = tl.sum((valid & (positions > 0) & (ids < before)).to(tl.int64), 0)
    # the empty segments this tile owns: every id in (the id before the tile, its last id], or
    # up to the last segment in the last tile, that no position holds; none where the tile
    # holds a descent (the index is refused, and the span could be anything)
    owned_from = tl.sum(tl.where(rows == 0, before, 0), 0) + 1
    last_row = tl.minimum(axis_len - 1 - tile_start, BLOCK_AXIS - 1)
    owned_to = tl.sum(tl.where(rows == last_row, ids, 0), 0)
    owned_to = tl.where(tile_start + BLOCK_AXIS >= axis_len, n_segments - 1, owned_to)
    owned_from = tl.maximum(owned_from, 0)
    owned_to = tl.where(descents > 0, -1, tl.minimum(owned_to, n_segments - 1))
    lanes = tl.arange(0, EMPTY_BLOCK)
    for block_start in range(owned_from, owned_to + 1, EMPTY_BLOCK):
        offset = segments - block_start
        in_block = valid & (offset >= 0) & (offset < EMPTY_BLOCK)
        held = tl.histogram(tl.where(in_block, offset, 0).to(tl.int32), EMPTY_BLOCK,
                            mask=in_block)
        slots = block_start + lanes
        empty = (held == 0) & (slots <= owned_to)
        empty_results(out, inner_mask, slots[:, None], empty[:, None], axis_len, initial_value,
                      FINISH=FINISH, IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE,
                      HAS_INITIAL=HAS_INITIAL, EMPTY_INDEX=EMPTY_INDEX,
                      BOUNDARY_BLOCK=EMPTY_BLOCK, BLOCK_INNER=BLOCK_INNER)
    return segments, firsts, lasts, lengths, next_known, (lowest, highest, descents)
