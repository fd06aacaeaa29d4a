"""Where the segment kernel's tiles and chunks meet segment boundaries (kernels/segment.py).

Segments are given by ``offsets`` (n + 1 non-decreasing boundaries, offsets[0] = 0 and
offsets[n] = the axis length): segment s is the axis positions [offsets[s], offsets[s + 1]).
Everything here reads ``offsets`` and nothing of x:

- one position's segment: a galloping search from where the segment would be if all had one
  length (``segment_near``), a few scalar loads when lengths are alike (``gallop_up``: from a
  known segment upwards), which finds a chunk's first and last segments;
- whether a whole chunk lies inside one segment (``inside_one_segment``);
- a tile's boundaries (``tile_segments``): the boundaries in the tile read in vector loads,
  counted per position with a histogram, whose running sum gives each position its segment with
  no per-element search. A reduction also writes the results of the empty segments there.
"""
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl

from .combine import scan_along
from .scan import tile_of

# Boundaries a tile reads beyond the count of the tile before (a walk's first tile reads this
# many): one round trip where lengths vary little, a few re-read bytes where they vary.
BOUNDARY_SLACK = tl.constexpr(16)


@triton.jit
def _segment_of(offsets_ptr, position, lo, hi):
    """The largest s in [lo, hi) with offsets[s] <= position, given offsets[lo] <= position
    (binary search). With hi = n_segments: the segment holding ``position`` (empty segments
    before it share its boundary and lose)."""
    lo = lo + position * 0
    hi = hi + position * 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        below = tl.load(offsets_ptr + mid).to(position.dtype) <= position
        lo = tl.where(below, mid, lo)
        hi = tl.where(below, hi, mid)
    return lo


@triton.jit
def gallop_up(offsets_ptr, position, lo, end):
    """``_segment_of(offsets_ptr, position, lo, end)`` in about 2 log2(answer - lo) loads: the
    steps double from ``lo`` until they pass ``position``, then a binary search."""
    lo = lo + position * 0
    step = lo * 0 + 1
    top = tl.minimum(lo + step, end)
    below = (top < end) & (tl.load(offsets_ptr + tl.minimum(top, end - 1)).to(position.dtype)
                           <= position)
    while below:
        lo = top
        step = step * 2
        top = tl.minimum(lo + step, end)
        below = (top < end) & (tl.load(offsets_ptr + tl.minimum(top, end - 1))
                               .to(position.dtype) <= position)
    return _segment_of(offsets_ptr, position, lo, top)


@triton.jit
def _gallop_down(offsets_ptr, position, hi):
    """``_segment_of(offsets_ptr, position, 0, hi)`` searching down from ``hi``: about
    2 log2(hi - answer) loads."""
    top = hi + position * 0
    step = top * 0 + 1
    low = tl.maximum(top - step, 0)
    above = (low > 0) & (tl.load(offsets_ptr + low).to(position.dtype) > position)
    while above:
        top = low
        step = step * 2
        low = tl.maximum(top - step, 0)
        above = (low > 0) & (tl.load(offsets_ptr + low).to(position.dtype) > position)
    return _segment_of(offsets_ptr, position, low, top)


@triton.jit
def segment_near(offsets_ptr, position, axis_len, n_segments):
    """``_segment_of(offsets_ptr, position, 0, n_segments)`` galloping from where the segment
    would be if all had one length: a few loads when lengths are alike, at most about
    4 log2(n_segments) when they are not."""
    # float32 rather than an int64 division: ptxas makes that a called subroutine, and a call
    # in the kernel makes it keep values in the stack frame; a guess needs no exact quotient
    density = n_segments.to(tl.float32) / tl.maximum(axis_len, 1).to(tl.float32)
    guess = (position.to(tl.float32) * density).to(position.dtype)
    guess = tl.maximum(tl.minimum(guess, n_segments - 1), 0)
    if tl.load(offsets_ptr + guess).to(position.dtype) <= position:
        found = gallop_up(offsets_ptr, position, guess, n_segments)
    else:
        found = _gallop_down(offsets_ptr, position, guess)
    return found


@triton.jit
def _maximum(a, b):
    return tl.maximum(a, b)


@triton.jit
def _minimum(a, b):
    return tl.minimum(a, b)


@triton.jit
def run_bounds(firsts, lasts, positions, start_first, stop_last):
    """Each position's segment's first position and the one after its last, [BLOCK_AXIS]: the
    latest first at or before it (else ``start_first``, where the tile's first segment starts)
    and the earliest last at or after it, plus one (else ``stop_last``)."""
    starts = scan_along(tl.where(firsts, positions, -1), 0, _maximum)
    starts = tl.maximum(starts, start_first)
    stops = scan_along(tl.where(lasts, positions + 1, stop_last), 0, _minimum, reverse=True)
    return starts, stops


@triton.jit
def empty_results(out, inner_mask, segments, empty, axis_len, initial_value,
                   FINISH: tl.constexpr, IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr,
                   HAS_INITIAL: tl.constexpr, EMPTY_INDEX: tl.constexpr,
                   BOUNDARY_BLOCK: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """Write the results of the empty ``segments`` ([BOUNDARY_BLOCK, 1], where ``empty``) to
    ``out`` (pointers, the chain's base offsets, axis strides)."""
    out_ptrs, out_offs, out_axis_strides = out
    mask = empty & inner_mask
    for o in tl.static_range(len(out_ptrs)):
        dtype = out_ptrs[o].dtype.element_ty
        # ``+`` rather than ``.to``: Triton passes an int argument equal to 1 as a constant
        if HAS_INITIAL:
            values = (tl.zeros([BOUNDARY_BLOCK, BLOCK_INNER], dtype) + initial_value).to(dtype)
        elif EMPTY_INDEX:
            values = (tl.zeros([BOUNDARY_BLOCK, BLOCK_INNER], dtype) + axis_len).to(dtype)
        else:
            state = ()
            for c in tl.static_range(len(STATE_DTYPE)):
                state = state + (tl.full([BOUNDARY_BLOCK, BLOCK_INNER], IDENTITY[c],
                                         STATE_DTYPE[c]),)
            values = FINISH(state, tl.zeros([BOUNDARY_BLOCK, BLOCK_INNER], tl.int32))[o]
            values = values.to(dtype)
        tl.store(out_ptrs[o] + out_offs[o] + segments * out_axis_strides[o], values, mask=mask)


@triton.jit
def tile_segments(offsets_ptr, out, inner_mask, tile_start, known, width, axis_len, n_segments,
                  initial_value, FINISH: tl.constexpr, IDENTITY: tl.constexpr,
                  STATE_DTYPE: tl.constexpr, SCAN: tl.constexpr, REVERSE: tl.constexpr,
                  HAS_INITIAL: tl.constexpr, EMPTY_INDEX: tl.constexpr,
                  BLOCK_AXIS: tl.constexpr, BOUNDARY_BLOCK: tl.constexpr,
                  BLOCK_INNER: tl.constexpr):
    """Where the tile at ``tile_start`` meets segments, from the boundaries in it alone.

    ``known``: forward, the segment holding tile_start; reverse, the last boundary index at or
    before the tile's end (what the previous tile of the walk returned; the walk's first tile
    searches for it). ``width``: how many boundaries to read first (the walk's guess). Returns
    (segments, firsts, lasts, lengths, next_known), per position [BLOCK_AXIS]: its segment,
    whether it is its segment's first / last element (padding past the axis: both), the
    segment's length (reduce only), and the next tile's ``known``.

    The boundaries in (tile_start, tile_end] are read in vector loads from the known end of
    them, ``width`` at first, then, while all those read lie in the tile, as many as the
    positions left hold at the density read so far (at most BOUNDARY_BLOCK), until one lies
    outside it: one dependent round trip a tile where the walk guessed the count well (a
    galloping search of scalars takes about 2 log2 of them), and few boundaries read twice.
    They are counted per position with a histogram whose running sum is each position's
    segment past the first; the flags and lengths follow from the counts in registers (a
    running max of the segment starts, a reversed running min of the stops). Reduce: also
    writes the empty segments whose boundary lies in (tile_start, tile_end] (tile 0: also those
    at 0)."""
    tile_end = tile_start + BLOCK_AXIS
    counts = tl.zeros([BLOCK_AXIS], tl.int32)
    next_counts = tl.zeros([BLOCK_AXIS], tl.int32)   # boundaries one position later
    lanes = tl.arange(0, BOUNDARY_BLOCK)
    # (a guess out of int32's range wraps or saturates: any width from 1 to BOUNDARY_BLOCK is
    # correct, and ``extra`` keeps every later block at least BOUNDARY_SLACK wide)
    width = tl.minimum(tl.maximum(width, 1), BOUNDARY_BLOCK)
    if REVERSE:
        # blocks end at ``edge`` and go down: boundaries above tile_start (tile 0: down to 0)
        edge = known
        base = edge - width + 1
        reached = tile_end      # where the boundaries read so far reach
    else:
        # blocks start at ``edge`` and go up: boundaries up to tile_end
        edge = tl.where(tile_start == 0, 0, known + 1)
        base = edge
        reached = tile_start
    extra = tl.full([], BOUNDARY_SLACK, tl.int32)   # the least width of the next block
    above = edge * 0              # reverse: boundaries read above tile_start
    last_boundary = edge - 1      # forward: the last boundary read at or before tile_end
    more = width > 0
    while more:
        index = base + lanes
        readable = (lanes < width) & (index >= 0) & (index <= n_segments)
        bound = tl.load(offsets_ptr + tl.maximum(tl.minimum(index, n_segments), 0),
                        mask=readable, other=0).to(tile_start.dtype)
        if REVERSE:
            inside = readable & (bound > tile_start)
            listed = readable & ((bound > tile_start) | (tile_start == 0))
        else:
            inside = readable & (bound <= tile_end)
            listed = inside
        n_inside = tl.sum(inside.to(tl.int32), 0)
        n_listed = tl.sum(listed.to(tl.int32), 0)
        offset = bound - tile_start
        in_tile = listed & (offset > 0) & (offset < BLOCK_AXIS)
        counts += tl.histogram(tl.where(in_tile, offset, 0).to(tl.int32), BLOCK_AXIS,
                               mask=in_tile)
        # (a second histogram rather than a gather of the first: register gathers spill)
        ends_in_tile = listed & (offset > 0) & (offset <= BLOCK_AXIS)
        next_counts += tl.histogram(tl.where(ends_in_tile, offset - 1, 0).to(tl.int32),
                                    BLOCK_AXIS, mask=ends_in_tile)
        if not SCAN:
            # the next boundary of each listed one: the next lane, or past the block one load
            block_end = base + width
            after = tl.load(offsets_ptr + tl.minimum(block_end, n_segments))
            following = tl.gather(bound, tl.minimum(lanes + 1, BOUNDARY_BLOCK - 1), 0)
            following = tl.where(index == block_end - 1, after.to(tile_start.dtype),
                                 following)
            empty = listed & (index < n_segments) & (bound == following)
            empty_results(out, inner_mask, index[:, None], empty[:, None], axis_len,
                           initial_value, FINISH=FINISH, IDENTITY=IDENTITY,
                           STATE_DTYPE=STATE_DTYPE, HAS_INITIAL=HAS_INITIAL,
                           EMPTY_INDEX=EMPTY_INDEX, BOUNDARY_BLOCK=BOUNDARY_BLOCK,
                           BLOCK_INNER=BLOCK_INNER)
        # every boundary read lies in the tile: read the next block, further out
        more = n_listed == width
        if REVERSE:
            above += n_inside
            more = more & (base > 0)
            edge = base - 1
        else:
            last_boundary = base + n_inside - 1
            edge = base + width
        # the next block: as many as the tile's positions not yet reached hold at this block's
        # density, and some slack; at least ``extra``, which doubles (empty segments pile
        # boundaries on one position). While blocks go on, all they read lies in the tile, so
        # the guess is never negative and no block is narrower than BOUNDARY_SLACK.
        if REVERSE:
            block_reached = tl.min(tl.where(readable, bound, reached), 0)
            covered = reached - block_reached
            remaining = block_reached - tile_start
        else:
            block_reached = tl.max(tl.where(readable, bound, reached), 0)
            covered = block_reached - reached
            remaining = tile_end - block_reached
        reached = block_reached
        guess = (n_listed.to(tl.float32) * remaining.to(tl.float32)
                 / tl.maximum(covered, 1).to(tl.float32)).to(tl.int32)
        width = tl.minimum(tl.maximum(guess + guess // 32 + BOUNDARY_SLACK, extra),
                           BOUNDARY_BLOCK)
        extra = extra * 2
        if REVERSE:
            base = edge - width + 1
        else:
            base = edge
    if REVERSE:
        seg_first = known - above
        next_known = seg_first
    else:
        seg_first = known
        next_known = last_boundary
    running = tl.cumsum(counts, 0).to(tile_start.dtype)
    segments = tl.minimum(seg_first + running, n_segments - 1)
    rows = tl.arange(0, BLOCK_AXIS)
    positions = tile_start + rows
    padding = positions >= axis_len
    start_first = tl.load(offsets_ptr + seg_first).to(tile_start.dtype)
    # (int counts, not int1: the interpreter's where of an int1 scalar gives an int32 tensor)
    firsts = (tl.where(rows == 0, (start_first == tile_start).to(tl.int32), counts) > 0) | padding
    lasts = (next_counts > 0) | (positions + 1 >= axis_len)
    if SCAN:
        lengths = rows * 0
    else:
        # each segment's first position: the latest first at or before it in the tile, else the
        # tile's first segment's start; its stop: the earliest last at or after it, else the
        # boundary after the tile's last segment
        stop_last = tl.load(offsets_ptr + tl.minimum(seg_first + tl.max(running, 0) + 1,
                                                     n_segments)).to(tile_start.dtype)
        starts, stops = run_bounds(firsts & ~padding, lasts & ~padding, positions, start_first,
                                   stop_last)
        lengths = stops - starts
    return segments, firsts, lasts, lengths, next_known


@triton.jit
def inside_one_segment(offsets_ptr, first_segment, first_position, end_step, n_tiles,
                       n_segments, SCAN: tl.constexpr, REVERSE: tl.constexpr,
                       BLOCK_AXIS: tl.constexpr):
    """Whether the chunk from ``first_position`` (in ``first_segment``) to the end of the
    traversal's tile ``end_step - 1`` lies in one segment, with nothing to find in it: a scan's
    has no segment start after its first element in traversal order; a reduction's (forward)
    also owns no boundary (so no result to write, no empty segment), the segment going on past
    its last tile's end."""
    if REVERSE:   # (scans only)
        lowest = tile_of(end_step - 1, n_tiles, REVERSE).to(first_position.dtype) * BLOCK_AXIS
        start = tl.load(offsets_ptr + first_segment).to(first_position.dtype)
        inside = start <= lowest
    else:
        chunk_end = end_step.to(first_position.dtype) * BLOCK_AXIS
        following = tl.load(offsets_ptr + tl.minimum(first_segment + 1, n_segments))
        following = following.to(first_position.dtype)
        if SCAN:
            inside = following >= chunk_end
        else:
            inside = (following > chunk_end) & ((first_position > 0) | (first_segment == 0))
    return inside & (n_segments > 0)

