"""One tile of the segment kernel (tritonml/kernels/segment.py): its elements loaded, prepared and
scanned segment by segment, and the helpers that pick rows of a tile of states.

A tile's positions learn their segments from ``tile_segments`` (tritonml/kernels/segment_bounds.py);
the tile is then scanned with the *segmented* lift of the combine: states carry a "starts a
segment" flag, and ``(a, fa) + (b, fb)`` is ``(b if fb else a + b, fa | fb)`` (Blelloch, "Prefix
Sums and Their Applications", 1990), associative whenever the combine is, so
``tl.associative_scan`` runs it (``SEG_SCAN``, ``SEG_COMBINE``: records/state_combine.py).

``x`` and ``out`` are bundles of one tensor kind's (pointers, the chain's base offsets, axis
strides), each a tuple with one entry per tensor.
"""
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl

from .combine import cast_state, reduce_along, scan_along
from .segment_bounds import tile_segments
from .segment_ids import tile_ids


@triton.jit
def running_or(flags, REVERSE: tl.constexpr):
    """Whether a flag is set at or before each position in traversal order, [BLOCK_AXIS]."""
    return tl.cumsum(flags.to(tl.int32), 0, reverse=REVERSE) > 0


@triton.jit
def or_scalar(flags, flag):
    """``flags | flag`` for a tensor and a scalar (the interpreter's ``|`` of an int1 tensor and
    an int1 scalar gives an int32 tensor)."""
    return (flags.to(tl.int32) + flag.to(tl.int32)) > 0


@triton.jit
def pick_row(state, row, BLOCK_INNER: tl.constexpr):
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
def _load_xs(x, positions, mask):
    """The inputs' elements at axis ``positions`` [BLOCK_AXIS] where ``mask`` holds, as stored."""
    x_ptrs, x_offs, x_axis_strides = x
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
    state = _prepare_states(xs, positions, kept, PREPARE=PREPARE, LOAD_DTYPE=LOAD_DTYPE,
                            IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE, HOLES=HOLES,
                            BLOCK_AXIS=BLOCK_AXIS, BLOCK_INNER=BLOCK_INNER)
    flags = tl.broadcast_to(cuts[:, None], [BLOCK_AXIS, BLOCK_INNER])
    return scan_along(state + (flags,), 0, SEG_SCAN, reverse=REVERSE)


@triton.jit
def _from_carry(scanned, carry, carry_empty, SEG_COMBINE: tl.constexpr,
                STATE_DTYPE: tl.constexpr, BLOCK_AXIS: tl.constexpr,
                BLOCK_INNER: tl.constexpr):
    """A tile's running states: ``_scan_cut``'s ``scanned`` after ``carry`` (components
    [1, BLOCK_INNER]), which reaches the rows before the tile's first cut; an empty one
    (``carry_empty``) reaches nothing."""
    tile_flags = or_scalar(scanned[len(STATE_DTYPE)], carry_empty)
    before = ()
    for c in tl.static_range(len(STATE_DTYPE)):
        before = before + (tl.broadcast_to(carry[c], [BLOCK_AXIS, BLOCK_INNER]),)
    running = SEG_COMBINE(before + (tile_flags,), scanned[:len(STATE_DTYPE)] + (tile_flags,))
    return running[:len(STATE_DTYPE)]


@triton.jit
def store_scan(out, positions, mask, running):
    """Write a tile's running states (``segment_tile``'s, exclusive where it scanned so)."""
    out_ptrs, out_offs, out_axis_strides = out
    for o in tl.static_range(len(out_ptrs)):
        tl.store(out_ptrs[o] + out_offs[o] + positions[:, None] * out_axis_strides[o],
                 running[o].to(out_ptrs[o].dtype.element_ty), mask=mask)

@triton.jit
def segment_tile(x, out, inner_mask, offsets_ptr, tile, known, width, carry, carry_empty,
                 load_from, axis_len, n_segments, initial_value, PREPARE: tl.constexpr,
                 MERGE: tl.constexpr, SEG_COMBINE: tl.constexpr, SEG_SCAN: tl.constexpr,
                 FINISH: tl.constexpr, LOAD_DTYPE: tl.constexpr, IDENTITY: tl.constexpr,
                 STATE_DTYPE: tl.constexpr, SCAN: tl.constexpr, EXCLUSIVE: tl.constexpr,
                 REVERSE: tl.constexpr, HAS_INITIAL: tl.constexpr, EMPTY_INDEX: tl.constexpr,
                 INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr, BOUNDARY_BLOCK: tl.constexpr,
                 BLOCK_INNER: tl.constexpr, SEGMENT_IDS: tl.constexpr = False):
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

    SEGMENT_IDS (a forward reduction): ``offsets_ptr`` holds a sorted index, each position's
    segment (``tile_ids``, kernels/segment_ids.py), and ``known`` the first position of the
    segment holding the tile's first.

    Returns (running, last, segments, heads, ends, lengths, positions, valid, next_known,
    facts): each position's state (its segment's fold so far in this chunk; EXCLUSIVE: before
    the position), the inclusive state where traversal leaves the tile (components
    [1, BLOCK_INNER]), each position's segment, whether a segment starts / ends there in
    traversal order, the segment's length (reduce), the positions [BLOCK_AXIS], which are on
    the axis, ``tile_segments``' next ``known``, and (SEGMENT_IDS) the tile's (least, greatest,
    descents) of its ids."""
    tile_start = tile * BLOCK_AXIS
    if INDEX_64:
        tile_start = tile_start.to(tl.int64)
    if SEGMENT_IDS:
        segments, firsts, lasts, lengths, next_known, facts = tile_ids(
            offsets_ptr, out, inner_mask, tile_start, known, axis_len, n_segments,
            initial_value, FINISH=FINISH, IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE,
            HAS_INITIAL=HAS_INITIAL, EMPTY_INDEX=EMPTY_INDEX, BLOCK_AXIS=BLOCK_AXIS,
            BOUNDARY_BLOCK=BOUNDARY_BLOCK, BLOCK_INNER=BLOCK_INNER)
    else:
        segments, firsts, lasts, lengths, next_known = tile_segments(
            offsets_ptr, out, inner_mask, tile_start, known, width, axis_len, n_segments,
            initial_value, FINISH=FINISH, IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE,
            SCAN=SCAN, REVERSE=REVERSE, HAS_INITIAL=HAS_INITIAL, EMPTY_INDEX=EMPTY_INDEX,
            BLOCK_AXIS=BLOCK_AXIS, BOUNDARY_BLOCK=BOUNDARY_BLOCK, BLOCK_INNER=BLOCK_INNER)
        facts = (tl.zeros([], tl.int64), tl.zeros([], tl.int64), tl.zeros([], tl.int64))
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
        last_xs = _load_xs(x, last_position, last_read[:, None] & inner_mask)
    xs = _load_xs(x, read, loaded[:, None] & inner_mask)
    # (EXCLUSIVE: the rows not read, each segment's first, hold the identity)
    running, last = scan_rows(xs, read, heads, loaded, carry, carry_empty, end_row,
                              PREPARE=PREPARE, SEG_COMBINE=SEG_COMBINE, SEG_SCAN=SEG_SCAN,
                              LOAD_DTYPE=LOAD_DTYPE, IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE,
                              REVERSE=REVERSE, HOLES=EXCLUSIVE, ROWS=BLOCK_AXIS,
                              BLOCK_INNER=BLOCK_INNER)
    if EXCLUSIVE:
        # (no scan of one row: Triton 3.6's layout pass fails on it)
        own = _prepare_states(last_xs, last_position, last_read, PREPARE=PREPARE,
                              LOAD_DTYPE=LOAD_DTYPE, IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE,
                              HOLES=True, BLOCK_AXIS=1, BLOCK_INNER=BLOCK_INNER)
        last = cast_state(MERGE(last, own), STATE_DTYPE)
    return (running, last, segments, heads, ends & valid, lengths, positions, valid, next_known,
            facts)


@triton.jit
def fold_tile(x, inner_mask, tile, load_from, axis_len, PREPARE: tl.constexpr,
              SEG_SCAN: tl.constexpr, LOAD_DTYPE: tl.constexpr, STATE_DTYPE: tl.constexpr,
              REVERSE: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr,
              BLOCK_INNER: tl.constexpr):
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
    xs = _load_xs(x, positions, loaded[:, None] & inner_mask)
    scanned = _scan_cut(xs, positions, (positions == load_from) | ~loaded, loaded,
                        PREPARE=PREPARE, SEG_SCAN=SEG_SCAN, LOAD_DTYPE=LOAD_DTYPE, IDENTITY=None,
                        STATE_DTYPE=STATE_DTYPE, REVERSE=REVERSE, HOLES=False,
                        BLOCK_AXIS=BLOCK_AXIS, BLOCK_INNER=BLOCK_INNER)
    return pick_row(scanned[:len(STATE_DTYPE)], end_row, BLOCK_INNER)


@triton.jit
def slice_rows(values, k, SUB_TILES: tl.constexpr, SUB_AXIS: tl.constexpr):
    """Positions k * SUB_AXIS to (k + 1) * SUB_AXIS - 1 of an integer vector of
    SUB_TILES * SUB_AXIS, as [SUB_AXIS]: a select and a sum over the SUB_TILES rows of its
    [SUB_TILES, SUB_AXIS] view (Triton has no slicing of tensors)."""
    grid = tl.reshape(values, [SUB_TILES, SUB_AXIS])
    at = tl.arange(0, SUB_TILES)[:, None] == k
    return tl.sum(tl.where(at, grid, tl.zeros_like(grid)), 0)


@triton.jit
def slice_flags(flags, k, SUB_TILES: tl.constexpr, SUB_AXIS: tl.constexpr):
    """``slice_rows`` of a flag vector."""
    return slice_rows(flags.to(tl.int32), k, SUB_TILES=SUB_TILES, SUB_AXIS=SUB_AXIS) > 0


@triton.jit
def load_slices(x, tile_start, load_from, axis_len, inner_mask, SUB_TILES: tl.constexpr,
                SUB_AXIS: tl.constexpr):
    """The inputs' elements of a tile's SUB_TILES slices of SUB_AXIS positions, every load
    issued before any is used: a tuple, slice-major (slice k's inputs at k * len(x's pointers)).
    Positions before ``load_from`` or past the axis are not read."""
    loads = ()
    for k in tl.static_range(SUB_TILES):
        positions = tile_start + k * SUB_AXIS + tl.arange(0, SUB_AXIS)
        loaded = (positions < axis_len) & (positions >= load_from)
        loads = loads + _load_xs(x, positions, loaded[:, None] & inner_mask)
    return loads


@triton.jit
def scan_rows(xs, positions, heads, kept, carry, carry_empty, end_row, PREPARE: tl.constexpr,
              SEG_COMBINE: tl.constexpr, SEG_SCAN: tl.constexpr, LOAD_DTYPE: tl.constexpr,
              IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr, REVERSE: tl.constexpr,
              HOLES: tl.constexpr, ROWS: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """ROWS rows of loaded elements ``xs`` at ``positions`` (a tile, or a slice of one),
    scanned in traversal order from ``carry`` with a segment starting at each of ``heads``
    (HOLES: the rows not ``kept`` hold the identity): each row's running state and the state at
    ``end_row``, where traversal leaves the rows (components [1, BLOCK_INNER])."""
    scanned = _scan_cut(xs, positions, heads, kept, PREPARE=PREPARE, SEG_SCAN=SEG_SCAN,
                        LOAD_DTYPE=LOAD_DTYPE, IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE,
                        REVERSE=REVERSE, HOLES=HOLES, BLOCK_AXIS=ROWS, BLOCK_INNER=BLOCK_INNER)
    running = _from_carry(scanned, carry, carry_empty, SEG_COMBINE=SEG_COMBINE,
                          STATE_DTYPE=STATE_DTYPE, BLOCK_AXIS=ROWS, BLOCK_INNER=BLOCK_INNER)
    return running, pick_row(running, end_row, BLOCK_INNER)
