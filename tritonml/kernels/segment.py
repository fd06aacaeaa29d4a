"""The segment kernel: scans and reductions restarted at segment boundaries along one axis, in one
launch, reading x once, whatever the lengths of the segments.

Segments are given by ``offsets`` (n + 1 non-decreasing boundaries, offsets[0] = 0 and
offsets[n] = the axis length): segment s is the axis positions [offsets[s], offsets[s + 1]).

Work is cut by elements, not by segments: the axis is cut into tiles of BLOCK_AXIS positions and
the tiles into chunks of ``chunk_tiles``, one program each, so a program's work does not depend on
how the lengths are distributed. Short segments are packed many to a tile; a long one is split
across chunks (the reduce-by-key decomposition of Merrill & Garland's CUB ``DeviceReduce::
ReduceByKey`` and of Sengupta et al., "Scan Primitives for GPU Computing", 2007).

Inside a tile, each position's segment comes from a histogram of the boundaries that fall in the
tile and its running sum (no per-element search), and the tile is scanned with the *segmented*
lift of the combine: states carry a "starts a segment" flag, and ``(a, fa) + (b, fb)`` is
``(b if fb else a + b, fa | fb)`` (Blelloch, "Prefix Sums and Their Applications", 1990), which is
associative whenever the combine is, so ``tl.associative_scan`` runs it.

Chunks and carries: a chunk whose first segment started in an earlier chunk needs the fold of that
segment's part before it. Each chunk publishes its *tail* (the state of its last segment so far,
in traversal order) and the chunk that needs a carry folds the tails of the chunks from the one
where its segment started, in WINDOW-wide vector loads (the published-vector protocol of the scan
kernels: tickets, epoch-tagged status words, tritonml/kernels/scan.py). Chunks wholly inside a long
segment publish their aggregate and wait for nobody, so there is no serial chain of tiles; only
the chunk where a segment ends (reduce) or each chunk of it (scan) reads the tails before it.

- SCAN False (reduce): each segment's result is written once, by the chunk where it ends in
  traversal order: ``FINISH(state, count)``, count its length. Empty segments are written by the
  tile whose range (tile_start, tile_end] holds their boundary (tile 0 also owns those at 0):
  ``initial`` (HAS_INITIAL), the axis length (EMPTY_INDEX: an index output), else
  ``FINISH(identity, 0)``. HAS_INITIAL folds ``initial`` into every segment first.
- SCAN True: every element gets its segment's running state, inclusive or (EXCLUSIVE) the state
  before it, the identity at a segment's first element. A chunk that must wait for a carry first
  folds its last segment to publish its tail (``_fold_span``: the whole chunk only when one
  segment spans it, a second read from L2), then scans the chunk from the carry.

REVERSE traverses the axis from its end: tiles stay aligned in memory, the tile order flips and
the in-tile scan runs backwards; a segment then starts at its last element.
"""
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl

from .combine import cast_state, reduce_along, scan_along
from .scan import (STATE_AGGREGATE, STATUS_BASE, _chain_bases, _draw_ticket, _publish, _tile_of,
                   _wait_counting)

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
def _gallop_up(offsets_ptr, position, lo, end):
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
def _segment_near(offsets_ptr, position, axis_len, n_segments):
    """``_segment_of(offsets_ptr, position, 0, n_segments)`` galloping from where the segment
    would be if all had one length: a few loads when lengths are alike, at most about
    4 log2(n_segments) when they are not."""
    # float32 rather than an int64 division: ptxas makes that a called subroutine, and a call
    # in the kernel makes it keep values in the stack frame; a guess needs no exact quotient
    density = n_segments.to(tl.float32) / tl.maximum(axis_len, 1).to(tl.float32)
    guess = (position.to(tl.float32) * density).to(position.dtype)
    guess = tl.maximum(tl.minimum(guess, n_segments - 1), 0)
    if tl.load(offsets_ptr + guess).to(position.dtype) <= position:
        found = _gallop_up(offsets_ptr, position, guess, n_segments)
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
def _empty_results(out_ptrs, out_offs, out_axis_strides, inner_mask, segments, empty,
                   axis_len, initial_value, FINISH: tl.constexpr, IDENTITY: tl.constexpr,
                   STATE_DTYPE: tl.constexpr, HAS_INITIAL: tl.constexpr,
                   EMPTY_INDEX: tl.constexpr, BOUNDARY_BLOCK: tl.constexpr,
                   BLOCK_INNER: tl.constexpr):
    """Write the results of the empty ``segments`` ([BOUNDARY_BLOCK, 1], where ``empty``)."""
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
def _tile_segments(offsets_ptr, out_ptrs, out_offs, out_axis_strides, inner_mask, tile_start,
                   known, width, axis_len, n_segments, initial_value, FINISH: tl.constexpr,
                   IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr, SCAN: tl.constexpr,
                   REVERSE: tl.constexpr, HAS_INITIAL: tl.constexpr, EMPTY_INDEX: tl.constexpr,
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
            _empty_results(out_ptrs, out_offs, out_axis_strides, inner_mask, index[:, None],
                           empty[:, None], axis_len, initial_value, FINISH, IDENTITY,
                           STATE_DTYPE, HAS_INITIAL, EMPTY_INDEX, BOUNDARY_BLOCK, BLOCK_INNER)
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
        starts = scan_along(tl.where(firsts & ~padding, positions, -1), 0, _maximum)
        starts = tl.maximum(starts, start_first)
        stop_last = tl.load(offsets_ptr + tl.minimum(seg_first + tl.max(running, 0) + 1,
                                                     n_segments)).to(tile_start.dtype)
        stops = scan_along(tl.where(lasts & ~padding, positions + 1, stop_last), 0, _minimum,
                           reverse=True)
        lengths = stops - starts
    return segments, firsts, lasts, lengths, next_known


@triton.jit
def _running_or(flags, REVERSE: tl.constexpr):
    """Whether a flag is set at or before each position in traversal order, [BLOCK_AXIS]."""
    return tl.cumsum(flags.to(tl.int32), 0, reverse=REVERSE) > 0


@triton.jit
def _or_scalar(flags, flag):
    """``flags | flag`` for a tensor and a scalar (the interpreter's ``|`` of an int1 tensor and
    an int1 scalar gives an int32 tensor)."""
    return (flags.to(tl.int32) + flag.to(tl.int32)) > 0


@triton.jit
def _row(state, row, BLOCK_INNER: tl.constexpr):
    """Row ``row`` of each component of a [rows, BLOCK_INNER] state, as [1, BLOCK_INNER]."""
    at = tl.arange(0, state[0].shape[0])[:, None] == row
    picked = ()
    for c in tl.static_range(len(state)):
        picked = picked + (_pick(tl.where(at, state[c], tl.zeros_like(state[c])), at),)
    return picked


@triton.jit
def _take_set(a, fa, b, fb):
    return tl.where(fb, b, a), fa | fb


@triton.jit
def _pick(values, at):
    """The one value of each column where ``at`` holds, [1, columns], bit for bit."""
    flags = tl.broadcast_to(at, values.shape)
    picked, _ = reduce_along((values, flags), 0, _take_set, keep_dims=True)
    return picked


@triton.jit
def _load_xs(x_ptrs, x_offs, positions, x_axis_strides, mask):
    """The inputs' elements at axis ``positions`` [BLOCK_AXIS] where ``mask`` holds, as stored."""
    xs = ()
    for c in tl.static_range(len(x_ptrs)):
        xs = xs + (tl.load(x_ptrs[c] + x_offs[c] + positions[:, None] * x_axis_strides[c],
                           mask=mask),)
    return xs


@triton.jit
def _prepare_states(xs, positions, kept, PREPARE: tl.constexpr, LOAD_DTYPE: tl.constexpr,
                    IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr, HOLES: tl.constexpr,
                    BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """The states of loaded elements ``xs`` at ``positions``, components [BLOCK_AXIS,
    BLOCK_INNER]; HOLES: the rows not ``kept`` [BLOCK_AXIS] hold the identity instead."""
    loaded = ()
    for c in tl.static_range(len(xs)):
        loaded = loaded + (xs[c].to(LOAD_DTYPE[c]),)
    prepared = PREPARE(loaded, tl.broadcast_to(positions[:, None], [BLOCK_AXIS, BLOCK_INNER]))
    state = ()
    for c in tl.static_range(len(STATE_DTYPE)):
        component = tl.broadcast_to(prepared[c].to(STATE_DTYPE[c]), [BLOCK_AXIS, BLOCK_INNER])
        if HOLES:
            component = tl.where(kept[:, None], component, IDENTITY[c]).to(STATE_DTYPE[c])
        state = state + (component,)
    return state


@triton.jit
def _scan_cut(xs, positions, cuts, kept, PREPARE: tl.constexpr, SEG_SCAN: tl.constexpr,
              LOAD_DTYPE: tl.constexpr, IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr,
              REVERSE: tl.constexpr, HOLES: tl.constexpr, BLOCK_AXIS: tl.constexpr,
              BLOCK_INNER: tl.constexpr):
    """Prepare the states of a tile's loaded elements ``xs`` at ``positions`` and scan them in
    traversal order, a new segment starting at each of ``cuts`` [BLOCK_AXIS]: the state
    components [BLOCK_AXIS, BLOCK_INNER] and the running "a cut so far" flag. HOLES: the rows
    not ``kept`` [BLOCK_AXIS] hold the identity instead."""
    state = _prepare_states(xs, positions, kept, PREPARE, LOAD_DTYPE, IDENTITY, STATE_DTYPE,
                            HOLES, BLOCK_AXIS, BLOCK_INNER)
    flags = tl.broadcast_to(cuts[:, None], [BLOCK_AXIS, BLOCK_INNER])
    return scan_along(state + (flags,), 0, SEG_SCAN, reverse=REVERSE)


@triton.jit
def _from_carry(scanned, carry, carry_empty, SEG_COMBINE: tl.constexpr,
                STATE_DTYPE: tl.constexpr, BLOCK_AXIS: tl.constexpr,
                BLOCK_INNER: tl.constexpr):
    """A tile's running states: ``_scan_cut``'s ``scanned`` after ``carry`` (components
    [1, BLOCK_INNER]), which reaches the rows before the tile's first cut; an empty one
    (``carry_empty``) reaches nothing."""
    tile_flags = _or_scalar(scanned[len(STATE_DTYPE)], carry_empty)
    before = ()
    for c in tl.static_range(len(STATE_DTYPE)):
        before = before + (tl.broadcast_to(carry[c], [BLOCK_AXIS, BLOCK_INNER]),)
    running = SEG_COMBINE(before + (tile_flags,), scanned[:len(STATE_DTYPE)] + (tile_flags,))
    return running[:len(STATE_DTYPE)]


@triton.jit
def _store_scan(out_ptrs, out_offs, positions, out_axis_strides, mask, running):
    """Write a tile's running states (``_segment_tile``'s, exclusive where it scanned so)."""
    for o in tl.static_range(len(out_ptrs)):
        tl.store(out_ptrs[o] + out_offs[o] + positions[:, None] * out_axis_strides[o],
                 running[o].to(out_ptrs[o].dtype.element_ty), mask=mask)


@triton.jit
def _segment_tile(x_ptrs, x_offs, inner_mask, offsets_ptr, out_ptrs, out_offs,
                  out_axis_strides, tile, known, width, carry, carry_empty, load_from, axis_len,
                  n_segments, x_axis_strides, initial_value, PREPARE: tl.constexpr,
                  MERGE: tl.constexpr, SEG_COMBINE: tl.constexpr, SEG_SCAN: tl.constexpr,
                  FINISH: tl.constexpr, LOAD_DTYPE: tl.constexpr, IDENTITY: tl.constexpr,
                  STATE_DTYPE: tl.constexpr, SCAN: tl.constexpr, EXCLUSIVE: tl.constexpr,
                  REVERSE: tl.constexpr,
                  HAS_INITIAL: tl.constexpr, EMPTY_INDEX: tl.constexpr, INDEX_64: tl.constexpr,
                  BLOCK_AXIS: tl.constexpr, BOUNDARY_BLOCK: tl.constexpr,
                  BLOCK_INNER: tl.constexpr):
    """Load one tile and scan it from ``carry`` (the state of the chunk's last segment so far,
    components [1, BLOCK_INNER]; ``carry_empty``: nothing scanned yet), segment by segment.
    Rows before ``load_from`` in traversal order are not read (their states are garbage, which
    no later head lets through).

    EXCLUSIVE (scan): each row reads the element before it in traversal order instead of its own
    (the identity where it starts a segment or the tile), so the segmented scan of that window
    is the exclusive scan of the tile, with no shuffle of registers between rows; the one
    element the window leaves out, where traversal leaves the tile, is read on its own to
    complete the tile's last state. Every element is read only by its own tile, before the tile
    is written: in-place execution stays safe.

    Returns (running, last, segments, heads, ends, lengths, positions, valid, next_known): each
    position's state (its segment's fold so far in this chunk; EXCLUSIVE: before the position),
    the inclusive state where traversal leaves the tile (components [1, BLOCK_INNER]), each
    position's segment, whether a segment starts / ends there in traversal order, the segment's
    length (reduce), the positions [BLOCK_AXIS], which are on the axis, and
    ``_tile_segments``' next ``known``."""
    tile_start = tile * BLOCK_AXIS
    if INDEX_64:
        tile_start = tile_start.to(tl.int64)
    segments, firsts, lasts, lengths, next_known = _tile_segments(
        offsets_ptr, out_ptrs, out_offs, out_axis_strides, inner_mask, tile_start, known, width,
        axis_len, n_segments, initial_value, FINISH, IDENTITY, STATE_DTYPE, SCAN, REVERSE,
        HAS_INITIAL, EMPTY_INDEX, BLOCK_AXIS, BOUNDARY_BLOCK, BLOCK_INNER)
    positions = tile_start + tl.arange(0, BLOCK_AXIS)
    valid = positions < axis_len
    if REVERSE:
        heads = lasts
        ends = firsts
    else:
        heads = firsts
        ends = lasts
    if REVERSE:
        end_row = 0
        read = positions + 1 if EXCLUSIVE else positions
        loaded = (read < axis_len) & (read <= load_from)
    else:
        end_row = BLOCK_AXIS - 1
        read = positions - 1 if EXCLUSIVE else positions
        loaded = (read < axis_len) & (read >= load_from)
    if EXCLUSIVE:
        # (the row where traversal enters the tile reads what ``carry`` already holds)
        loaded = loaded & ~heads & (tl.arange(0, BLOCK_AXIS) != BLOCK_AXIS - 1 - end_row)
        last_position = tile_start + end_row + tl.arange(0, 1)
        if REVERSE:
            last_read = (last_position < axis_len) & (last_position <= load_from)
        else:
            last_read = (last_position < axis_len) & (last_position >= load_from)
        last_xs = _load_xs(x_ptrs, x_offs, last_position, x_axis_strides,
                           last_read[:, None] & inner_mask)
    xs = _load_xs(x_ptrs, x_offs, read, x_axis_strides, loaded[:, None] & inner_mask)
    scanned = _scan_cut(xs, read, heads, loaded, PREPARE, SEG_SCAN, LOAD_DTYPE, IDENTITY,
                        STATE_DTYPE, REVERSE, EXCLUSIVE, BLOCK_AXIS, BLOCK_INNER)
    running = _from_carry(scanned, carry, carry_empty, SEG_COMBINE, STATE_DTYPE, BLOCK_AXIS,
                          BLOCK_INNER)
    last = _row(running, end_row, BLOCK_INNER)
    if EXCLUSIVE:
        # (no scan of one row: Triton 3.6's layout pass fails on it)
        own = _prepare_states(last_xs, last_position, last_read, PREPARE, LOAD_DTYPE, IDENTITY,
                              STATE_DTYPE, True, 1, BLOCK_INNER)
        last = cast_state(MERGE(last, own), STATE_DTYPE)
    return running, last, segments, heads, ends & valid, lengths, positions, valid, next_known


@triton.jit
def _fold_tile(x_ptrs, x_offs, inner_mask, tile, load_from, axis_len, x_axis_strides,
               PREPARE: tl.constexpr, SEG_SCAN: tl.constexpr, LOAD_DTYPE: tl.constexpr,
               STATE_DTYPE: tl.constexpr, REVERSE: tl.constexpr, INDEX_64: tl.constexpr,
               BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """The fold of one tile's positions from ``load_from`` on in traversal order (all in one
    segment), components [1, BLOCK_INNER]: a scan cut at ``load_from`` and at every row not read,
    whose last valid row in traversal order holds the fold."""
    tile_start = tile * BLOCK_AXIS
    if INDEX_64:
        tile_start = tile_start.to(tl.int64)
    positions = tile_start + tl.arange(0, BLOCK_AXIS)
    valid = positions < axis_len
    if REVERSE:
        loaded = valid & (positions <= load_from)
        end_row = 0
    else:
        loaded = valid & (positions >= load_from)
        end_row = tl.minimum(axis_len - 1 - tile_start, BLOCK_AXIS - 1)
    xs = _load_xs(x_ptrs, x_offs, positions, x_axis_strides, loaded[:, None] & inner_mask)
    scanned = _scan_cut(xs, positions, (positions == load_from) | ~loaded, loaded, PREPARE,
                        SEG_SCAN, LOAD_DTYPE, None, STATE_DTYPE, REVERSE, False, BLOCK_AXIS,
                        BLOCK_INNER)
    return _row(scanned[:len(STATE_DTYPE)], end_row, BLOCK_INNER)


@triton.jit
def _fold_span(x_ptrs, x_offs, inner_mask, first_step, end_step, n_tiles, load_from, axis_len,
               x_axis_strides, PREPARE: tl.constexpr, MERGE: tl.constexpr,
               SEG_SCAN: tl.constexpr, LOAD_DTYPE: tl.constexpr, STATE_DTYPE: tl.constexpr,
               REVERSE: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr,
               BLOCK_INNER: tl.constexpr):
    """The fold of the traversal's positions from ``load_from`` (in tile ``first_step``) to the
    end of tile ``end_step - 1``, which all lie in one segment: a chunk's tail, read without its
    boundaries."""
    total = _fold_tile(x_ptrs, x_offs, inner_mask, _tile_of(first_step, n_tiles, REVERSE),
                       load_from, axis_len, x_axis_strides, PREPARE, SEG_SCAN, LOAD_DTYPE,
                       STATE_DTYPE, REVERSE, INDEX_64, BLOCK_AXIS, BLOCK_INNER)
    for step in range(first_step + 1, end_step):
        total = MERGE(total, _fold_tile(x_ptrs, x_offs, inner_mask,
                                        _tile_of(step, n_tiles, REVERSE), load_from, axis_len,
                                        x_axis_strides, PREPARE, SEG_SCAN, LOAD_DTYPE,
                                        STATE_DTYPE, REVERSE, INDEX_64, BLOCK_AXIS,
                                        BLOCK_INNER))
        total = cast_state(total, STATE_DTYPE)
    return total


@triton.jit
def _fold_inside(x_ptrs, x_offs, inner_mask, first_tile, end_tile, axis_len, x_axis_strides,
                 PREPARE: tl.constexpr, MERGE: tl.constexpr, ALONG: tl.constexpr,
                 LOAD_DTYPE: tl.constexpr, IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr,
                 INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr, FOLD_TILES: tl.constexpr,
                 BLOCK_INNER: tl.constexpr):
    """The fold of the axis positions of tiles ``first_tile`` to ``end_tile - 1`` (in memory
    order), all in one segment, components [1, BLOCK_INNER]. Each step issues the loads of
    FOLD_TILES tiles before it merges any, and merges them element by element into one tile of
    states, which ALONG (the reduction's own fold of a tile's rows, as the reduce kernels use
    it) folds at the end: the registers of one tile of states, the bytes in flight of
    FOLD_TILES. For merges that may fold in any fixed order (COMMUTATIVE in
    ``segment_kernel``)."""
    acc = ()
    for c in tl.static_range(len(STATE_DTYPE)):
        acc = acc + (tl.full([BLOCK_AXIS, BLOCK_INNER], IDENTITY[c], STATE_DTYPE[c]),)
    rows = tl.arange(0, BLOCK_AXIS)
    for tile in range(first_tile, end_tile, FOLD_TILES):
        tile_start = tile * BLOCK_AXIS
        if INDEX_64:
            tile_start = tile_start.to(tl.int64)
        loads = ()   # FOLD_TILES x inputs, tile-major
        for k in tl.static_range(FOLD_TILES):
            positions = tile_start + k * BLOCK_AXIS + rows
            mask = ((positions < end_tile * BLOCK_AXIS) & (positions < axis_len))[:, None]
            mask = mask & inner_mask
            for c in tl.static_range(len(x_ptrs)):
                loads = loads + (tl.load(x_ptrs[c] + x_offs[c]
                                         + positions[:, None] * x_axis_strides[c], mask=mask),)
        for k in tl.static_range(FOLD_TILES):
            positions = tile_start + k * BLOCK_AXIS + rows
            mask = ((positions < end_tile * BLOCK_AXIS) & (positions < axis_len))[:, None]
            mask = mask & inner_mask
            xs = ()
            for c in tl.static_range(len(x_ptrs)):
                xs = xs + (loads[k * len(x_ptrs) + c].to(LOAD_DTYPE[c]),)
            prepared = PREPARE(xs, tl.broadcast_to(positions[:, None],
                                                   [BLOCK_AXIS, BLOCK_INNER]))
            state = ()
            for c in tl.static_range(len(STATE_DTYPE)):
                state = state + (tl.where(mask, prepared[c].to(STATE_DTYPE[c]), IDENTITY[c])
                                 .to(STATE_DTYPE[c]),)
            acc = cast_state(MERGE(acc, state), STATE_DTYPE)
    # (``merge_along``'s halving of a [1024, 1] tile compiled to every thread folding all of
    # it through shared memory: 254 registers and 560 bytes of spills; ``tl.sum`` shuffles)
    folded = ALONG(acc, MERGE)   # components [BLOCK_INNER]
    total = ()
    for c in tl.static_range(len(STATE_DTYPE)):
        total = total + (tl.reshape(folded[c], [1, BLOCK_INNER]).to(STATE_DTYPE[c]),)
    return total


@triton.jit
def _fold_tails(published_ptrs, status_ptr, chain_first_slot, first, end, epoch_base,
                MERGE: tl.constexpr, SEG_SCAN: tl.constexpr, STATE_DTYPE: tl.constexpr,
                WINDOW: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """The fold, in traversal order, of the tails chunks ``first`` to ``end - 1`` of this chain
    published, components [1, BLOCK_INNER], read WINDOW at a time once they are published."""
    total = _tail_window(published_ptrs, status_ptr, chain_first_slot, first, end, epoch_base,
                         SEG_SCAN, STATE_DTYPE, WINDOW, BLOCK_INNER)
    for base in range(first + WINDOW, end, WINDOW):
        total = MERGE(total, _tail_window(published_ptrs, status_ptr, chain_first_slot, base,
                                          end, epoch_base, SEG_SCAN, STATE_DTYPE, WINDOW,
                                          BLOCK_INNER))
    return total


@triton.jit
def _tail_window(published_ptrs, status_ptr, chain_first_slot, base, end, epoch_base,
                 SEG_SCAN: tl.constexpr, STATE_DTYPE: tl.constexpr, WINDOW: tl.constexpr,
                 BLOCK_INNER: tl.constexpr):
    """The fold of the published tails of chunks ``base`` to min(base + WINDOW, end) - 1, in one
    vector load per component once every status word says they are published."""
    lanes = tl.arange(0, BLOCK_INNER)[None, :]
    index = base + tl.arange(0, WINDOW)[:, None]          # [WINDOW, 1], chunks
    needed = index < end
    words = status_ptr + STATUS_BASE + chain_first_slot + index
    _wait_counting(words, needed, epoch_base)   # on every Triton: see its docstring
    tl.atomic_add(words, 0, mask=needed, sem="acquire", scope="gpu")
    tl.debug_barrier()   # every thread's reads after every acquire (see scan_chunked)
    slots = chain_first_slot + index
    tails = ()
    for c in tl.static_range(len(STATE_DTYPE)):
        tails = tails + (tl.load(published_ptrs[c] + slots * BLOCK_INNER + lanes,
                                 mask=needed & (lanes < BLOCK_INNER), cache_modifier=".cg"),)
    # rows past ``end`` follow the ones kept: the scan's row end - 1 - base ignores them
    heads = tl.broadcast_to(index == base, [WINDOW, BLOCK_INNER])
    scanned = scan_along(tails + (heads,), 0, SEG_SCAN)
    return _row(scanned[:len(STATE_DTYPE)], tl.minimum(end - base, WINDOW) - 1, BLOCK_INNER)


@triton.jit
def _chunk_walk(x_ptrs, x_offs, inner_mask, offsets_ptr, out_ptrs, out_offs, first_step,
                end_step, n_tiles, known, carry, carry_empty, load_from, axis_len, n_segments,
                x_axis_strides,
                out_axis_strides, initial_value, PREPARE: tl.constexpr, MERGE: tl.constexpr,
                SEG_COMBINE: tl.constexpr, SEG_SCAN: tl.constexpr, FINISH: tl.constexpr,
                LOAD_DTYPE: tl.constexpr, IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr,
                SCAN: tl.constexpr, STORE: tl.constexpr, EXCLUSIVE: tl.constexpr,
                REVERSE: tl.constexpr, HAS_INITIAL: tl.constexpr, EMPTY_INDEX: tl.constexpr,
                INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr,
                BOUNDARY_BLOCK: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """Walk the traversal's tiles ``first_step`` to ``end_step - 1`` from ``carry``, reading the
    positions from ``load_from`` on in traversal order; ``known``: what ``_tile_segments`` needs
    to know of the first tile (each later tile's comes from the tile before it).

    STORE (scan): writes every element's running (or, EXCLUSIVE, preceding) state. Reduce:
    writes every segment that starts (in traversal order) and ends in the walk, and returns the
    state of the one that started before the walk, where it ends in it.

    Returns (carry, open_state, open_count, open_found): the state of the last segment after the
    walk, and for reduce the walk's first segment's partial state, length and whether it ends."""
    rows = tl.arange(0, BLOCK_AXIS)
    open_state = carry
    if INDEX_64:
        open_count = tl.zeros([], tl.int64)
    else:
        open_count = tl.zeros([], tl.int32)
    open_found = tl.zeros([], tl.int1)
    started = tl.zeros([], tl.int1)   # a head in the walk so far
    # boundaries to read first in a tile: as many as the tile before held, and some slack (the
    # first tile: as many as a tile holds on average; a galloping search for the count here
    # took the forward scan from 62 registers a thread to 80 and spills)
    density = n_segments.to(tl.float32) / tl.maximum(axis_len, 1).to(tl.float32)
    width = (density * BLOCK_AXIS).to(tl.int32) + BOUNDARY_SLACK
    for step in range(first_step, end_step):
        running, last, segments, heads, ends, lengths, positions, valid, next_known = \
            _segment_tile(x_ptrs, x_offs, inner_mask, offsets_ptr, out_ptrs, out_offs,
                          out_axis_strides, _tile_of(step, n_tiles, REVERSE), known, width,
                          carry, carry_empty, load_from, axis_len, n_segments, x_axis_strides,
                          initial_value, PREPARE, MERGE, SEG_COMBINE, SEG_SCAN, FINISH,
                          LOAD_DTYPE, IDENTITY, STATE_DTYPE, SCAN, EXCLUSIVE, REVERSE,
                          HAS_INITIAL, EMPTY_INDEX, INDEX_64, BLOCK_AXIS, BOUNDARY_BLOCK,
                          BLOCK_INNER)
        own = _or_scalar(_running_or(heads, REVERSE), started)
        if SCAN:
            if STORE:
                _store_scan(out_ptrs, out_offs, positions, out_axis_strides,
                            valid[:, None] & inner_mask, running)
        else:
            counts = lengths[:, None]
            results = running
            if HAS_INITIAL:
                results = MERGE(((tl.zeros([BLOCK_AXIS, BLOCK_INNER], STATE_DTYPE[0])
                                  + initial_value).to(STATE_DTYPE[0]),), results)
            outputs = FINISH(results, counts)
            mask = (ends & own)[:, None] & inner_mask
            for o in tl.static_range(len(out_ptrs)):
                tl.store(out_ptrs[o] + out_offs[o] + segments[:, None] * out_axis_strides[o],
                         outputs[o].to(out_ptrs[o].dtype.element_ty), mask=mask)
            # the walk's first segment, where it ends here before any head of the walk
            closing = ends & ~own
            row = tl.max(tl.where(closing, rows, -1), 0)
            found_here = row >= 0
            picked = _row(running, tl.maximum(row, 0), BLOCK_INNER)
            kept = ()
            for c in tl.static_range(len(STATE_DTYPE)):
                kept = kept + (tl.where(found_here, picked[c], open_state[c]),)
            open_state = kept
            open_count = tl.where(found_here, tl.sum(tl.where(rows == row, lengths, 0), 0),
                                  open_count)
            open_found = open_found | found_here
        carry = last
        carry_empty = tl.zeros([], tl.int1)
        held = tl.abs(next_known - known).to(tl.int32)
        width = held + held // 32 + BOUNDARY_SLACK
        known = next_known
        started = started | (tl.sum(heads.to(tl.int32), 0) > 0)
    return carry, open_state, open_count, open_found


@triton.jit
def _inside_one_segment(offsets_ptr, first_segment, first_position, end_step, n_tiles,
                        n_segments, SCAN: tl.constexpr, REVERSE: tl.constexpr,
                        BLOCK_AXIS: tl.constexpr):
    """Whether the chunk from ``first_position`` (in ``first_segment``) to the end of the
    traversal's tile ``end_step - 1`` lies in one segment, with nothing to find in it: a scan's
    has no segment start after its first element in traversal order; a reduction's (forward)
    also owns no boundary (so no result to write, no empty segment), the segment going on past
    its last tile's end."""
    if REVERSE:   # (scans only)
        lowest = _tile_of(end_step - 1, n_tiles, REVERSE).to(first_position.dtype) * BLOCK_AXIS
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


@triton.jit
def _chunk_tail(x_ptrs, x_offs, inner_mask, offsets_ptr, first_position, end_step, n_tiles,
                axis_len, n_segments, x_axis_strides, PREPARE: tl.constexpr,
                MERGE: tl.constexpr, SEG_SCAN: tl.constexpr, LOAD_DTYPE: tl.constexpr,
                STATE_DTYPE: tl.constexpr, REVERSE: tl.constexpr, INDEX_64: tl.constexpr,
                BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """A scan's chunk's tail, the fold of its last segment only, read from where it starts in
    the chunk (the whole chunk only when one segment spans it)."""
    last_tile = _tile_of(end_step - 1, n_tiles, REVERSE)
    if INDEX_64:
        last_tile = last_tile.to(tl.int64)
    if REVERSE:
        last_position = last_tile * BLOCK_AXIS
    else:
        last_position = tl.minimum((last_tile + 1) * BLOCK_AXIS, axis_len) - 1
    last_segment = _segment_near(offsets_ptr, last_position, axis_len, n_segments)
    if REVERSE:
        tail_from = tl.minimum(tl.load(offsets_ptr + last_segment + 1)
                               .to(first_position.dtype) - 1, first_position)
    else:
        tail_from = tl.maximum(tl.load(offsets_ptr + last_segment)
                               .to(first_position.dtype), first_position)
    tail_step = _tile_of(tail_from // BLOCK_AXIS, n_tiles, REVERSE)
    return _fold_span(x_ptrs, x_offs, inner_mask, tail_step, end_step, n_tiles, tail_from,
                      axis_len, x_axis_strides, PREPARE, MERGE, SEG_SCAN, LOAD_DTYPE,
                      STATE_DTYPE, REVERSE, INDEX_64, BLOCK_AXIS, BLOCK_INNER)


@triton.jit
def segment_kernel(
    # pointers: inputs and outputs (tuples, one entry per tensor, unless PTR_TUPLES is False),
    # the int64 boundaries, the int32 status words (the scan kernels' resident workspace) and the
    # published tails (one workspace per state component)
    x_ptrs, out_ptrs, offsets_ptr, status_ptr, published_ptrs,
    # layout (tritonml.launchers.scan.layout_args' order; out's axis runs over segments in reduce)
    axis_len, inner_len, outer_sizes,
    x_axis_strides, x_inner_strides, x_outer_strides,
    out_axis_strides, out_inner_strides, out_outer_strides,
    n_segments, chunk_tiles, initial_value,
    # meta-parameters
    PREPARE: tl.constexpr, MERGE: tl.constexpr, ALONG: tl.constexpr, SEG_COMBINE: tl.constexpr,
    SEG_SCAN: tl.constexpr, FINISH: tl.constexpr, LOAD_DTYPE: tl.constexpr,
    IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr, SCAN: tl.constexpr,
    EXCLUSIVE: tl.constexpr, REVERSE: tl.constexpr, HAS_INITIAL: tl.constexpr,
    EMPTY_INDEX: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr,
    BOUNDARY_BLOCK: tl.constexpr, BLOCK_INNER: tl.constexpr, WINDOW: tl.constexpr,
    FOLD_TILES: tl.constexpr, COMMUTATIVE: tl.constexpr, PTR_TUPLES: tl.constexpr,
):
    """One program per chunk of ``chunk_tiles`` tiles of one chain (an outer index x a block of
    BLOCK_INNER inner positions); grid = chains * cdiv(max(cdiv(axis_len, BLOCK_AXIS), 1),
    chunk_tiles). Programs take chunks from a ticket counter, so a program only waits for
    chunks whose programs have started. Results are fixed by the shape, the offsets and the
    config, not by timing: run to run bit-identical."""
    if not PTR_TUPLES:  # one input and one output passed as plain pointers (see scan.py)
        x_ptrs, out_ptrs, published_ptrs = (x_ptrs,), (out_ptrs,), (published_ptrs,)
    ticket, epoch_base = _draw_ticket(status_ptr, INDEX_64)
    n_tiles = tl.maximum(tl.cdiv(axis_len, BLOCK_AXIS), 1)
    n_chunks = tl.cdiv(n_tiles, chunk_tiles)
    chain = ticket // n_chunks
    chunk = ticket % n_chunks
    chain_first_slot = ticket - chunk
    first_step = chunk * chunk_tiles
    end_step = tl.minimum(first_step + chunk_tiles, n_tiles)
    x_offs, inner_mask = _chain_bases(chain, inner_len, outer_sizes, x_outer_strides,
                                      x_inner_strides, INDEX_64, BLOCK_INNER)
    out_offs, _ = _chain_bases(chain, inner_len, outer_sizes, out_outer_strides,
                               out_inner_strides, INDEX_64, BLOCK_INNER)
    # the chunk's first element in traversal order, its segment, and whether the segment
    # started in an earlier chunk (then ``before``: the chunk where it started)
    first_tile = _tile_of(first_step, n_tiles, REVERSE)
    if INDEX_64:
        first_tile = first_tile.to(tl.int64)
    if REVERSE:
        first_position = tl.minimum((first_tile + 1) * BLOCK_AXIS, axis_len) - 1
    else:
        first_position = first_tile * BLOCK_AXIS
    first_position = tl.maximum(first_position, 0)
    first_segment = _segment_near(offsets_ptr, first_position, axis_len, n_segments)
    if REVERSE:
        head = tl.load(offsets_ptr + first_segment + 1).to(first_position.dtype) - 1
    else:
        head = tl.load(offsets_ptr + first_segment).to(first_position.dtype)
    opened_before = (chunk > 0) & (head != first_position)
    # what the walks' first tile needs (``_tile_segments``): forward, its first position's
    # segment; reverse, the last boundary at or before its end
    if REVERSE:
        known = _gallop_up(offsets_ptr, first_position + 1, first_segment, n_segments + 1)
    else:
        known = first_segment
    before = _tile_of(head // BLOCK_AXIS, n_tiles, REVERSE) // chunk_tiles
    empty_carry = ()
    for c in tl.static_range(len(STATE_DTYPE)):
        empty_carry = empty_carry + (tl.full([1, BLOCK_INNER], 0, STATE_DTYPE[c]),)
    yes = tl.full([], 1, tl.int1)

    inside = _inside_one_segment(offsets_ptr, first_segment, first_position, end_step, n_tiles,
                                 n_segments, SCAN, REVERSE, BLOCK_AXIS)
    if REVERSE:   # the chunk's tiles in memory order
        fold_first = _tile_of(end_step - 1, n_tiles, REVERSE)
        fold_end = first_tile + 1
    else:
        fold_first = first_tile
        fold_end = end_step
    if SCAN:
        if opened_before:
            # publish the tail first, so that no chunk's carry waits on a chain of walks; a tile
            # of several inner positions keeps the one-tile fold (its registers are at ptxas's
            # 128 already, and the second path's would be spilled)
            if COMMUTATIVE and BLOCK_INNER == 1:
                if inside:
                    tail = _fold_inside(x_ptrs, x_offs, inner_mask, fold_first, fold_end,
                                        axis_len, x_axis_strides, PREPARE, MERGE, ALONG,
                                        LOAD_DTYPE, IDENTITY, STATE_DTYPE, INDEX_64, BLOCK_AXIS,
                                        FOLD_TILES, BLOCK_INNER)
                else:
                    tail = _chunk_tail(x_ptrs, x_offs, inner_mask, offsets_ptr, first_position,
                                       end_step, n_tiles, axis_len, n_segments, x_axis_strides,
                                       PREPARE, MERGE, SEG_SCAN, LOAD_DTYPE, STATE_DTYPE,
                                       REVERSE, INDEX_64, BLOCK_AXIS, BLOCK_INNER)
            else:   # (a user's combine folds in traversal order: it may not commute)
                tail = _chunk_tail(x_ptrs, x_offs, inner_mask, offsets_ptr, first_position,
                                   end_step, n_tiles, axis_len, n_segments, x_axis_strides,
                                   PREPARE, MERGE, SEG_SCAN, LOAD_DTYPE, STATE_DTYPE, REVERSE,
                                   INDEX_64, BLOCK_AXIS, BLOCK_INNER)
            if chunk != n_chunks - 1:
                _publish(published_ptrs, status_ptr, ticket, tail, epoch_base + STATE_AGGREGATE,
                         BLOCK_INNER)
            carry = _fold_tails(published_ptrs, status_ptr, chain_first_slot, before, chunk,
                                epoch_base, MERGE, SEG_SCAN, STATE_DTYPE, WINDOW, BLOCK_INNER)
            _chunk_walk(x_ptrs, x_offs, inner_mask, offsets_ptr, out_ptrs, out_offs, first_step,
                        end_step, n_tiles, known, carry, ~yes, first_position, axis_len,
                        n_segments, x_axis_strides, out_axis_strides, initial_value, PREPARE,
                        MERGE, SEG_COMBINE, SEG_SCAN, FINISH, LOAD_DTYPE, IDENTITY, STATE_DTYPE,
                        SCAN, True, EXCLUSIVE, REVERSE, HAS_INITIAL, EMPTY_INDEX, INDEX_64,
                        BLOCK_AXIS, BOUNDARY_BLOCK, BLOCK_INNER)
        else:
            tail = _chunk_walk(
                x_ptrs, x_offs, inner_mask, offsets_ptr, out_ptrs, out_offs, first_step,
                end_step, n_tiles, known, empty_carry, yes, first_position, axis_len,
                n_segments, x_axis_strides, out_axis_strides, initial_value, PREPARE, MERGE,
                SEG_COMBINE, SEG_SCAN, FINISH, LOAD_DTYPE, IDENTITY, STATE_DTYPE, SCAN, True,
                EXCLUSIVE, REVERSE, HAS_INITIAL, EMPTY_INDEX, INDEX_64, BLOCK_AXIS,
                BOUNDARY_BLOCK, BLOCK_INNER)[0]
            if chunk != n_chunks - 1:
                _publish(published_ptrs, status_ptr, ticket, tail, epoch_base + STATE_AGGREGATE,
                         BLOCK_INNER)
    elif inside:
        # Nothing to find or write: fold in larger tiles, publish, and leave the segment's
        # result to the chunk where it ends.
        _publish(published_ptrs, status_ptr, ticket,
                 _fold_inside(x_ptrs, x_offs, inner_mask, fold_first, fold_end, axis_len,
                              x_axis_strides, PREPARE, MERGE, ALONG, LOAD_DTYPE, IDENTITY,
                              STATE_DTYPE, INDEX_64, BLOCK_AXIS, FOLD_TILES, BLOCK_INNER),
                 epoch_base + STATE_AGGREGATE, BLOCK_INNER)
    else:
        tail, open_state, open_count, open_found = _chunk_walk(
            x_ptrs, x_offs, inner_mask, offsets_ptr, out_ptrs, out_offs, first_step, end_step,
            n_tiles, known, empty_carry, yes, first_position, axis_len, n_segments,
            x_axis_strides, out_axis_strides,
            initial_value, PREPARE, MERGE, SEG_COMBINE, SEG_SCAN, FINISH, LOAD_DTYPE, IDENTITY,
            STATE_DTYPE, SCAN, False, EXCLUSIVE, REVERSE, HAS_INITIAL, EMPTY_INDEX, INDEX_64,
            BLOCK_AXIS, BOUNDARY_BLOCK, BLOCK_INNER)
        if chunk != n_chunks - 1:
            _publish(published_ptrs, status_ptr, ticket, tail, epoch_base + STATE_AGGREGATE,
                     BLOCK_INNER)
        if opened_before & open_found:
            carry = _fold_tails(published_ptrs, status_ptr, chain_first_slot, before, chunk,
                                epoch_base, MERGE, SEG_SCAN, STATE_DTYPE, WINDOW, BLOCK_INNER)
            results = MERGE(carry, open_state)
            if HAS_INITIAL:
                results = MERGE(((tl.zeros([1, BLOCK_INNER], STATE_DTYPE[0])
                                  + initial_value).to(STATE_DTYPE[0]),), results)
            outputs = FINISH(results, open_count)
            for o in tl.static_range(len(out_ptrs)):
                tl.store(out_ptrs[o] + out_offs[o] + first_segment * out_axis_strides[o],
                         outputs[o].to(out_ptrs[o].dtype.element_ty), mask=inner_mask)
