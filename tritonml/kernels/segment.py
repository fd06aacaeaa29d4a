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
tile and its running sum (no per-element search: tritonml/kernels/segment_bounds.py, which holds
all the boundary finding), and the tile is scanned with the *segmented* lift of the combine
(tritonml/kernels/segment_tile.py): states carry a "starts a segment" flag, and
``(a, fa) + (b, fb)`` is ``(b if fb else a + b, fa | fb)`` (Blelloch, "Prefix Sums and Their
Applications", 1990), which is associative whenever the combine is, so ``tl.associative_scan``
runs it.

Chunks and carries: a chunk whose first segment started in an earlier chunk needs the fold of that
segment's part before it. Each chunk publishes its *tail* (the state of its last segment so far,
in traversal order) and the chunk that needs a carry folds the tails of the chunks from the one
where its segment started, in WINDOW-wide vector loads (the look-back protocol the scan kernels
share: tickets, epoch-tagged status words, kernels/lookback.py). Chunks wholly inside a long
segment publish their aggregate and wait for nobody, so there is no serial chain of tiles; only
the chunk where a segment ends (reduce) or each chunk of it (scan) reads the tails before it.

- SCAN False (reduce): each segment's result is written once, by the chunk where it ends in
  traversal order: ``FINISH(state, count)``, count its length. Empty segments are written by the
  tile whose range (tile_start, tile_end] holds their boundary (tile 0 also owns those at 0):
  ``initial`` (HAS_INITIAL), the axis length (EMPTY_INDEX: an index output), else
  ``FINISH(identity, 0)``. FOLD_INITIAL (with HAS_INITIAL) folds ``initial`` into every segment
  first; without it, ``initial`` is the empty segments' value alone (torch_scatter's 0 for an
  empty group's max, written where the segments are found rather than by a pass after).
- SCAN True: every element gets its segment's running state, inclusive or (EXCLUSIVE) the state
  before it, the identity at a segment's first element. A chunk that must wait for a carry first
  folds its last segment to publish its tail (``_fold_span``: the whole chunk only when one
  segment spans it, a second read from L2), then scans the chunk from the carry.
- SUB_TILES > 1 (reduce only): a tile is walked as SUB_TILES slices of SUB_AXIS positions: the
  loads of every slice are issued first and the tile's boundaries read once, then each slice is
  scanned from the carry of the one before and its ended segments written. A step has the whole
  tile's bytes in flight and one slice's scan in registers.

SEGMENT_IDS (a forward reduction, SUB_TILES 1): ``offsets`` is a sorted index instead, one
segment id per axis position (kernels/segment_ids.py): the index is read once, by this launch,
with no boundaries made before, and each program reports the least and greatest id and the
descents it read, so that the caller can refuse an index out of range or unsorted. Same tiles,
same chunks, same scans: a reduction gives the same bits from ids as from the offsets of the
same segments.

REVERSE traverses the axis from its end: tiles stay aligned in memory, the tile order flips and
the in-tile scan runs backwards; a segment then starts at its last element.

Helpers take ``x`` and ``out`` as bundles of (pointers, the chain's base offsets, axis strides),
each a tuple with one entry per tensor, and their meta-parameters by keyword.
"""
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl

from .combine import cast_state, scan_along
from .lookback import STATE_AGGREGATE, STATUS_BASE, draw_chunk, publish, wait_counting
from .scan import chain_bases, tile_of
from .segment_bounds import (BOUNDARY_SLACK, gallop_up, inside_one_segment, segment_near,
                             tile_segments)
from .segment_ids import (FACT_DESCENTS, FACT_HIGHEST, FACT_LOWEST, FACTS, HIGHEST_START,
                          LOWEST_START, SEARCH_IDS, id_facts, run_start)
from .segment_tile import (fold_tile, load_slices, or_scalar, pick_row, running_or, scan_rows,
                           segment_tile, slice_flags, slice_rows, store_scan)


@triton.jit
def _fold_span(x, inner_mask, first_step, end_step, n_tiles, load_from, axis_len,
               PREPARE: tl.constexpr, MERGE: tl.constexpr, SEG_SCAN: tl.constexpr,
               LOAD_DTYPE: tl.constexpr, STATE_DTYPE: tl.constexpr, REVERSE: tl.constexpr,
               INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """The fold of the traversal's positions from ``load_from`` (in tile ``first_step``) to the
    end of tile ``end_step - 1``, which all lie in one segment: a chunk's tail, read without its
    boundaries."""
    total = fold_tile(x, inner_mask, tile_of(first_step, n_tiles, REVERSE), load_from, axis_len,
                      PREPARE=PREPARE, SEG_SCAN=SEG_SCAN, LOAD_DTYPE=LOAD_DTYPE,
                      STATE_DTYPE=STATE_DTYPE, REVERSE=REVERSE, INDEX_64=INDEX_64,
                      BLOCK_AXIS=BLOCK_AXIS, BLOCK_INNER=BLOCK_INNER)
    for step in range(first_step + 1, end_step):
        total = MERGE(total, fold_tile(x, inner_mask, tile_of(step, n_tiles, REVERSE), load_from,
                                       axis_len, PREPARE=PREPARE, SEG_SCAN=SEG_SCAN,
                                       LOAD_DTYPE=LOAD_DTYPE, STATE_DTYPE=STATE_DTYPE,
                                       REVERSE=REVERSE, INDEX_64=INDEX_64,
                                       BLOCK_AXIS=BLOCK_AXIS, BLOCK_INNER=BLOCK_INNER))
        total = cast_state(total, STATE_DTYPE)
    return total


@triton.jit
def _fold_inside(x, inner_mask, first_tile, end_tile, axis_len, PREPARE: tl.constexpr,
                 MERGE: tl.constexpr, ALONG: tl.constexpr, LOAD_DTYPE: tl.constexpr,
                 IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr, INDEX_64: tl.constexpr,
                 BLOCK_AXIS: tl.constexpr, FOLD_TILES: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """The fold of the axis positions of tiles ``first_tile`` to ``end_tile - 1`` (in memory
    order), all in one segment, components [1, BLOCK_INNER]. Each step issues the loads of
    FOLD_TILES tiles before it merges any, and merges them element by element into one tile of
    states, which ALONG (the reduction's own fold of a tile's rows, as the reduce kernels use
    it) folds at the end: the registers of one tile of states, the bytes in flight of
    FOLD_TILES. For merges that may fold in any fixed order (COMMUTATIVE in
    ``segment_kernel``)."""
    x_ptrs, x_offs, x_axis_strides = x
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
                         SEG_SCAN=SEG_SCAN, STATE_DTYPE=STATE_DTYPE, WINDOW=WINDOW,
                         BLOCK_INNER=BLOCK_INNER)
    for base in range(first + WINDOW, end, WINDOW):
        total = MERGE(total, _tail_window(published_ptrs, status_ptr, chain_first_slot, base,
                                          end, epoch_base, SEG_SCAN=SEG_SCAN,
                                          STATE_DTYPE=STATE_DTYPE, WINDOW=WINDOW,
                                          BLOCK_INNER=BLOCK_INNER))
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
    wait_counting(words, needed, epoch_base)   # on every Triton: see its docstring
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
    return pick_row(scanned[:len(STATE_DTYPE)], tl.minimum(end - base, WINDOW) - 1, BLOCK_INNER)


@triton.jit
def _write_ended(out, inner_mask, running, segments, heads, ends, lengths, started, open_state,
                 open_count, open_found, initial_value, MERGE: tl.constexpr,
                 FINISH: tl.constexpr, STATE_DTYPE: tl.constexpr, FOLD_INITIAL: tl.constexpr,
                 REVERSE: tl.constexpr, ROWS: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """A reduction's rows (a tile, or a slice of one) after their scan: write every segment
    that ends in them and started in the walk (``started``: a head earlier in the walk), and
    keep the walk's first segment's state and length where it ends here. Returns the updated
    (open_state, open_count, open_found, started)."""
    out_ptrs, out_offs, out_axis_strides = out
    rows = tl.arange(0, ROWS)
    own = or_scalar(running_or(heads, REVERSE), started)
    counts = lengths[:, None]
    results = running
    if FOLD_INITIAL:
        results = MERGE(((tl.zeros([ROWS, BLOCK_INNER], STATE_DTYPE[0])
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
    picked = pick_row(running, tl.maximum(row, 0), BLOCK_INNER)
    kept = ()
    for c in tl.static_range(len(STATE_DTYPE)):
        kept = kept + (tl.where(found_here, picked[c], open_state[c]),)
    open_count = tl.where(found_here, tl.sum(tl.where(rows == row, lengths, 0), 0), open_count)
    started = started | (tl.sum(heads.to(tl.int32), 0) > 0)
    return kept, open_count, open_found | found_here, started


@triton.jit
def _chunk_walk(x, out, inner_mask, offsets_ptr, first_step, end_step, n_tiles, known, carry,
                carry_empty, load_from, axis_len, n_segments, initial_value,
                PREPARE: tl.constexpr, MERGE: tl.constexpr, SEG_COMBINE: tl.constexpr,
                SEG_SCAN: tl.constexpr, FINISH: tl.constexpr, LOAD_DTYPE: tl.constexpr,
                IDENTITY: tl.constexpr, STATE_DTYPE: tl.constexpr, SCAN: tl.constexpr,
                EXCLUSIVE: tl.constexpr, REVERSE: tl.constexpr,
                HAS_INITIAL: tl.constexpr, FOLD_INITIAL: tl.constexpr,
                EMPTY_INDEX: tl.constexpr, INDEX_64: tl.constexpr,
                BLOCK_AXIS: tl.constexpr, BOUNDARY_BLOCK: tl.constexpr,
                BLOCK_INNER: tl.constexpr, SUB_TILES: tl.constexpr, SUB_AXIS: tl.constexpr,
                SEGMENT_IDS: tl.constexpr):
    """Walk the traversal's tiles ``first_step`` to ``end_step - 1`` from ``carry``, reading the
    positions from ``load_from`` on in traversal order; ``known``: what ``tile_segments`` needs
    to know of the first tile (each later tile's comes from the tile before it).

    Scan: writes every element's running (or, EXCLUSIVE, preceding) state. Reduce:
    writes every segment that starts (in traversal order) and ends in the walk, and returns the
    state of the one that started before the walk, where it ends in it.

    Returns (carry, open_state, open_count, open_found, facts): the state of the last segment
    after the walk, for reduce the walk's first segment's partial state, length and whether it
    ends, and (SEGMENT_IDS) the (least, greatest, descents) of the ids walked."""
    open_state = carry
    if INDEX_64:
        open_count = tl.zeros([], tl.int64)
    else:
        open_count = tl.zeros([], tl.int32)
    open_found = tl.zeros([], tl.int1)
    started = tl.zeros([], tl.int1)   # a head in the walk so far
    lowest = tl.full([], LOWEST_START, tl.int64)
    highest = tl.full([], HIGHEST_START, tl.int64)
    descents = tl.zeros([], tl.int64)
    # boundaries to read first in a tile: as many as the tile before held, and some slack (the
    # first tile: as many as a tile holds on average; a galloping search for the count here
    # took the forward scan from 62 registers a thread to 80 and spills)
    density = n_segments.to(tl.float32) / tl.maximum(axis_len, 1).to(tl.float32)
    width = (density * BLOCK_AXIS).to(tl.int32) + BOUNDARY_SLACK
    for step in range(first_step, end_step):
        if SUB_TILES > 1 and not SCAN:
            # a reduction's tile in slices: the segments found and every slice's loads issued
            # first, then the slices scanned and written one after another
            tile_start = tile_of(step, n_tiles, REVERSE) * BLOCK_AXIS
            if INDEX_64:
                tile_start = tile_start.to(tl.int64)
            loads = load_slices(x, tile_start, load_from, axis_len, inner_mask,
                                SUB_TILES=SUB_TILES, SUB_AXIS=SUB_AXIS)
            segments, firsts, lasts, lengths, next_known = tile_segments(
                offsets_ptr, out, inner_mask, tile_start, known, width, axis_len, n_segments,
                initial_value, FINISH=FINISH, IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE,
                SCAN=SCAN, REVERSE=REVERSE, HAS_INITIAL=HAS_INITIAL, EMPTY_INDEX=EMPTY_INDEX,
                BLOCK_AXIS=BLOCK_AXIS, BOUNDARY_BLOCK=BOUNDARY_BLOCK, BLOCK_INNER=BLOCK_INNER)
            n_inputs: tl.constexpr = len(LOAD_DTYPE)
            for k in tl.static_range(SUB_TILES):
                positions = tile_start + k * SUB_AXIS + tl.arange(0, SUB_AXIS)
                heads = slice_flags(firsts, k, SUB_TILES=SUB_TILES, SUB_AXIS=SUB_AXIS)
                ends = slice_flags(lasts, k, SUB_TILES=SUB_TILES, SUB_AXIS=SUB_AXIS) \
                    & (positions < axis_len)
                running, last = scan_rows(
                    loads[k * n_inputs:(k + 1) * n_inputs], positions, heads,
                    (positions < axis_len) & (positions >= load_from), carry, carry_empty,
                    SUB_AXIS - 1, PREPARE=PREPARE, SEG_COMBINE=SEG_COMBINE, SEG_SCAN=SEG_SCAN,
                    LOAD_DTYPE=LOAD_DTYPE, IDENTITY=None, STATE_DTYPE=STATE_DTYPE,
                    REVERSE=False, HOLES=False, ROWS=SUB_AXIS, BLOCK_INNER=BLOCK_INNER)
                open_state, open_count, open_found, started = _write_ended(
                    out, inner_mask, running, slice_rows(segments, k, SUB_TILES=SUB_TILES,
                                                         SUB_AXIS=SUB_AXIS),
                    heads, ends, slice_rows(lengths, k, SUB_TILES=SUB_TILES, SUB_AXIS=SUB_AXIS),
                    started, open_state, open_count, open_found, initial_value, MERGE=MERGE,
                    FINISH=FINISH, STATE_DTYPE=STATE_DTYPE, FOLD_INITIAL=FOLD_INITIAL,
                    REVERSE=REVERSE, ROWS=SUB_AXIS, BLOCK_INNER=BLOCK_INNER)
                carry = last
                carry_empty = tl.zeros([], tl.int1)
        else:
            running, last, segments, heads, ends, lengths, positions, valid, next_known, facts = \
                segment_tile(x, out, inner_mask, offsets_ptr, tile_of(step, n_tiles, REVERSE),
                             known, width, carry=carry, carry_empty=carry_empty,
                             load_from=load_from, axis_len=axis_len, n_segments=n_segments,
                             initial_value=initial_value, PREPARE=PREPARE, MERGE=MERGE,
                             SEG_COMBINE=SEG_COMBINE, SEG_SCAN=SEG_SCAN, FINISH=FINISH,
                             LOAD_DTYPE=LOAD_DTYPE,
                             IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE, SCAN=SCAN,
                             EXCLUSIVE=EXCLUSIVE, REVERSE=REVERSE, HAS_INITIAL=HAS_INITIAL,
                             EMPTY_INDEX=EMPTY_INDEX, INDEX_64=INDEX_64, BLOCK_AXIS=BLOCK_AXIS,
                             BOUNDARY_BLOCK=BOUNDARY_BLOCK, BLOCK_INNER=BLOCK_INNER,
                             SEGMENT_IDS=SEGMENT_IDS)
            lowest = tl.minimum(lowest, facts[0])
            highest = tl.maximum(highest, facts[1])
            descents += facts[2]
            if SCAN:
                store_scan(out, positions, valid[:, None] & inner_mask, running)
            else:
                open_state, open_count, open_found, started = _write_ended(
                    out, inner_mask, running, segments, heads, ends, lengths, started,
                    open_state, open_count, open_found, initial_value, MERGE=MERGE,
                    FINISH=FINISH, STATE_DTYPE=STATE_DTYPE, FOLD_INITIAL=FOLD_INITIAL,
                    REVERSE=REVERSE, ROWS=BLOCK_AXIS, BLOCK_INNER=BLOCK_INNER)
            carry = last
        carry_empty = tl.zeros([], tl.int1)
        held = tl.abs(next_known - known).to(tl.int32)
        width = held + held // 32 + BOUNDARY_SLACK
        known = next_known
    return carry, open_state, open_count, open_found, (lowest, highest, descents)


@triton.jit
def _chunk_tail(x, inner_mask, offsets_ptr, first_position, end_step, n_tiles, axis_len,
                n_segments, PREPARE: tl.constexpr, MERGE: tl.constexpr, SEG_SCAN: tl.constexpr,
                LOAD_DTYPE: tl.constexpr, STATE_DTYPE: tl.constexpr, REVERSE: tl.constexpr,
                INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """A scan's chunk's tail, the fold of its last segment only, read from where it starts in
    the chunk (the whole chunk only when one segment spans it)."""
    last_tile = tile_of(end_step - 1, n_tiles, REVERSE)
    if INDEX_64:
        last_tile = last_tile.to(tl.int64)
    if REVERSE:
        last_position = last_tile * BLOCK_AXIS
    else:
        last_position = tl.minimum((last_tile + 1) * BLOCK_AXIS, axis_len) - 1
    last_segment = segment_near(offsets_ptr, last_position, axis_len, n_segments)
    if REVERSE:
        tail_from = tl.minimum(tl.load(offsets_ptr + last_segment + 1)
                               .to(first_position.dtype) - 1, first_position)
    else:
        tail_from = tl.maximum(tl.load(offsets_ptr + last_segment)
                               .to(first_position.dtype), first_position)
    tail_step = tile_of(tail_from // BLOCK_AXIS, n_tiles, REVERSE)
    return _fold_span(x, inner_mask, tail_step, end_step, n_tiles, tail_from, axis_len,
                      PREPARE=PREPARE, MERGE=MERGE, SEG_SCAN=SEG_SCAN, LOAD_DTYPE=LOAD_DTYPE,
                      STATE_DTYPE=STATE_DTYPE, REVERSE=REVERSE, INDEX_64=INDEX_64,
                      BLOCK_AXIS=BLOCK_AXIS, BLOCK_INNER=BLOCK_INNER)


@triton.jit
def _store_facts(facts_ptr, ticket, facts):
    """A program's (least, greatest, descents) of the ids it read, in its ticket's slot."""
    slot = facts_ptr + ticket.to(tl.int64) * FACTS
    tl.store(slot + FACT_LOWEST, facts[0])
    tl.store(slot + FACT_HIGHEST, facts[1])
    tl.store(slot + FACT_DESCENTS, facts[2])


@triton.jit
def segment_kernel(
    # pointers: inputs and outputs (tuples, one entry per tensor, unless PTR_TUPLES is False),
    # the int64 boundaries (SEGMENT_IDS: the sorted index), the int32 status words (the scan
    # kernels' resident workspace), the published tails (one workspace per state component) and
    # (SEGMENT_IDS) the int64 facts each program reports of the index, FACTS per ticket
    x_ptrs, out_ptrs, offsets_ptr, status_ptr, published_ptrs, facts_ptr,
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
    FOLD_INITIAL: tl.constexpr,
    EMPTY_INDEX: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr,
    BOUNDARY_BLOCK: tl.constexpr, BLOCK_INNER: tl.constexpr, WINDOW: tl.constexpr,
    FOLD_TILES: tl.constexpr, COMMUTATIVE: tl.constexpr, PTR_TUPLES: tl.constexpr,
    SUB_TILES: tl.constexpr, SEGMENT_IDS: tl.constexpr = False,
):
    """One program per chunk of ``chunk_tiles`` tiles of one chain (an outer index x a block of
    BLOCK_INNER inner positions); grid = chains * cdiv(max(cdiv(axis_len, BLOCK_AXIS), 1),
    chunk_tiles). Programs take chunks from a ticket counter, so a program only waits for
    chunks whose programs have started. Results are fixed by the shape, the offsets and the
    config, not by timing: run to run bit-identical."""
    tl.static_assert(not SEGMENT_IDS or not (SCAN or REVERSE or SUB_TILES > 1),
                     "segment ids: forward reductions of whole tiles only")
    if not PTR_TUPLES:  # one input and one output passed as plain pointers (see scan.py)
        x_ptrs, out_ptrs, published_ptrs = (x_ptrs,), (out_ptrs,), (published_ptrs,)
    n_tiles = tl.maximum(tl.cdiv(axis_len, BLOCK_AXIS), 1)
    SUB_AXIS: tl.constexpr = BLOCK_AXIS // SUB_TILES   # a reduction's tile slices
    ticket, epoch_base, chain, chunk, n_chunks, first_step, end_step = draw_chunk(
        status_ptr, n_tiles, chunk_tiles, INDEX_64)
    chain_first_slot = ticket - chunk
    x_offs, inner_mask = chain_bases(chain, inner_len, outer_sizes, x_outer_strides,
                                      x_inner_strides, INDEX_64, BLOCK_INNER)
    out_offs, _ = chain_bases(chain, inner_len, outer_sizes, out_outer_strides,
                               out_inner_strides, INDEX_64, BLOCK_INNER)
    x = (x_ptrs, x_offs, x_axis_strides)
    out = (out_ptrs, out_offs, out_axis_strides)
    # the chunk's first element in traversal order and where it meets the segments
    first_tile = tile_of(first_step, n_tiles, REVERSE)
    if INDEX_64:
        first_tile = first_tile.to(tl.int64)
    if REVERSE:
        first_position = tl.minimum((first_tile + 1) * BLOCK_AXIS, axis_len) - 1
    else:
        first_position = first_tile * BLOCK_AXIS
    first_position = tl.maximum(first_position, 0)
    if SEGMENT_IDS:
        first_id = tl.load(offsets_ptr + first_position)
        first_segment = tl.minimum(tl.maximum(first_id, 0), n_segments - 1) \
            .to(first_position.dtype)
        head = run_start(offsets_ptr, first_position, BLOCK=SEARCH_IDS)
    else:
        first_segment = segment_near(offsets_ptr, first_position, axis_len, n_segments)
        if REVERSE:
            head = tl.load(offsets_ptr + first_segment + 1).to(first_position.dtype) - 1
        else:
            head = tl.load(offsets_ptr + first_segment).to(first_position.dtype)
    # whether the segment started in an earlier chunk (then ``before``: the chunk where it did)
    opened_before = (chunk > 0) & (head != first_position)
    # what the walks' first tile needs (``tile_segments``): forward, its first position's
    # segment; reverse, the last boundary at or before its end; from ids, where its first
    # position's segment starts
    if SEGMENT_IDS:
        known = head
    elif REVERSE:
        known = gallop_up(offsets_ptr, first_position + 1, first_segment, n_segments + 1)
    else:
        known = first_segment
    before = tile_of(head // BLOCK_AXIS, n_tiles, REVERSE) // chunk_tiles
    empty_carry = ()
    for c in tl.static_range(len(STATE_DTYPE)):
        empty_carry = empty_carry + (tl.full([1, BLOCK_INNER], 0, STATE_DTYPE[c]),)
    nothing_yet = tl.full([], 1, tl.int1)   # a walk's ``carry_empty``: no carry to start from

    if SEGMENT_IDS:
        # (the same test from ids: the chunk's first id goes on past its end, and tile 0 owns
        # no empty segment before it)
        chunk_end = end_step.to(first_position.dtype) * BLOCK_AXIS
        later = tl.load(offsets_ptr + tl.minimum(chunk_end, axis_len - 1))
        inside = ((chunk_end < axis_len) & (later == first_id)
                  & ((first_position > 0) | (first_id == 0)) & (n_segments > 0))
    else:
        inside = inside_one_segment(offsets_ptr, first_segment, first_position, end_step,
                                    n_tiles, n_segments, SCAN=SCAN, REVERSE=REVERSE,
                                    BLOCK_AXIS=BLOCK_AXIS)
    if REVERSE:   # the chunk's tiles in memory order
        fold_first = tile_of(end_step - 1, n_tiles, REVERSE)
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
                    tail = _fold_inside(x, inner_mask, fold_first, fold_end, axis_len,
                                        PREPARE=PREPARE, MERGE=MERGE, ALONG=ALONG,
                                        LOAD_DTYPE=LOAD_DTYPE, IDENTITY=IDENTITY,
                                        STATE_DTYPE=STATE_DTYPE, INDEX_64=INDEX_64,
                                        BLOCK_AXIS=BLOCK_AXIS, FOLD_TILES=FOLD_TILES,
                                        BLOCK_INNER=BLOCK_INNER)
                else:
                    tail = _chunk_tail(x, inner_mask, offsets_ptr, first_position, end_step,
                                       n_tiles, axis_len, n_segments, PREPARE=PREPARE,
                                       MERGE=MERGE, SEG_SCAN=SEG_SCAN, LOAD_DTYPE=LOAD_DTYPE,
                                       STATE_DTYPE=STATE_DTYPE, REVERSE=REVERSE,
                                       INDEX_64=INDEX_64, BLOCK_AXIS=BLOCK_AXIS,
                                       BLOCK_INNER=BLOCK_INNER)
            else:   # (a user's combine folds in traversal order: it may not commute)
                tail = _chunk_tail(x, inner_mask, offsets_ptr, first_position, end_step, n_tiles,
                                   axis_len, n_segments, PREPARE=PREPARE, MERGE=MERGE,
                                   SEG_SCAN=SEG_SCAN, LOAD_DTYPE=LOAD_DTYPE,
                                   STATE_DTYPE=STATE_DTYPE, REVERSE=REVERSE, INDEX_64=INDEX_64,
                                   BLOCK_AXIS=BLOCK_AXIS, BLOCK_INNER=BLOCK_INNER)
            if chunk != n_chunks - 1:
                publish(published_ptrs, status_ptr, ticket, tail, epoch_base + STATE_AGGREGATE,
                        BLOCK_INNER)
            carry = _fold_tails(published_ptrs, status_ptr, chain_first_slot, before, chunk,
                                epoch_base, MERGE=MERGE, SEG_SCAN=SEG_SCAN,
                                STATE_DTYPE=STATE_DTYPE, WINDOW=WINDOW, BLOCK_INNER=BLOCK_INNER)
            _chunk_walk(x, out, inner_mask, offsets_ptr, first_step, end_step, n_tiles, known,
                        carry=carry, carry_empty=~nothing_yet, load_from=first_position,
                        axis_len=axis_len, n_segments=n_segments, initial_value=initial_value,
                        PREPARE=PREPARE, MERGE=MERGE, SEG_COMBINE=SEG_COMBINE,
                        SEG_SCAN=SEG_SCAN, FINISH=FINISH, LOAD_DTYPE=LOAD_DTYPE,
                        IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE, SCAN=SCAN,
                        EXCLUSIVE=EXCLUSIVE, REVERSE=REVERSE, HAS_INITIAL=HAS_INITIAL,
                        FOLD_INITIAL=FOLD_INITIAL,
                        EMPTY_INDEX=EMPTY_INDEX, INDEX_64=INDEX_64, BLOCK_AXIS=BLOCK_AXIS,
                        BOUNDARY_BLOCK=BOUNDARY_BLOCK, BLOCK_INNER=BLOCK_INNER,
                        SUB_TILES=SUB_TILES, SUB_AXIS=SUB_AXIS, SEGMENT_IDS=False)
    elif inside:
        # Nothing to find or write: fold in larger tiles, publish, and leave the segment's
        # result to the chunk where it ends.
        publish(published_ptrs, status_ptr, ticket,
                _fold_inside(x, inner_mask, fold_first, fold_end, axis_len, PREPARE=PREPARE,
                             MERGE=MERGE, ALONG=ALONG, LOAD_DTYPE=LOAD_DTYPE, IDENTITY=IDENTITY,
                             STATE_DTYPE=STATE_DTYPE, INDEX_64=INDEX_64, BLOCK_AXIS=BLOCK_AXIS,
                             FOLD_TILES=FOLD_TILES, BLOCK_INNER=BLOCK_INNER),
                epoch_base + STATE_AGGREGATE, BLOCK_INNER)
        if SEGMENT_IDS:   # ids the fold does not read: checked on their own
            facts = id_facts(offsets_ptr, first_position, chunk_end, axis_len,
                             BLOCK=BLOCK_AXIS * FOLD_TILES)
            _store_facts(facts_ptr, ticket, facts)
    # The rest walk their chunk from nothing: a scan's chunk whose first segment starts in it, a
    # reduction's chunk that holds a boundary. One walk serves both (its code is the kernel's
    # largest part).
    walks_from_nothing = ~opened_before if SCAN else ~inside
    if walks_from_nothing:
        tail, open_state, open_count, open_found, facts = _chunk_walk(
            x, out, inner_mask, offsets_ptr, first_step, end_step, n_tiles, known,
            carry=empty_carry, carry_empty=nothing_yet, load_from=first_position,
            axis_len=axis_len, n_segments=n_segments, initial_value=initial_value,
            PREPARE=PREPARE, MERGE=MERGE, SEG_COMBINE=SEG_COMBINE, SEG_SCAN=SEG_SCAN,
            FINISH=FINISH, LOAD_DTYPE=LOAD_DTYPE, IDENTITY=IDENTITY, STATE_DTYPE=STATE_DTYPE,
            SCAN=SCAN, EXCLUSIVE=EXCLUSIVE, REVERSE=REVERSE, HAS_INITIAL=HAS_INITIAL,
            FOLD_INITIAL=FOLD_INITIAL,
            EMPTY_INDEX=EMPTY_INDEX, INDEX_64=INDEX_64, BLOCK_AXIS=BLOCK_AXIS,
            BOUNDARY_BLOCK=BOUNDARY_BLOCK, BLOCK_INNER=BLOCK_INNER,
            SUB_TILES=SUB_TILES, SUB_AXIS=SUB_AXIS, SEGMENT_IDS=SEGMENT_IDS)
        if SEGMENT_IDS:
            _store_facts(facts_ptr, ticket, facts)
        if chunk != n_chunks - 1:
            publish(published_ptrs, status_ptr, ticket, tail, epoch_base + STATE_AGGREGATE,
                    BLOCK_INNER)
        # a reduction's segment that started in an earlier chunk and ends in this one: its
        # result is the earlier chunks' published tails and this walk's first part
        if not SCAN:
            if opened_before & open_found:
                carry = _fold_tails(published_ptrs, status_ptr, chain_first_slot, before, chunk,
                                    epoch_base, MERGE=MERGE, SEG_SCAN=SEG_SCAN,
                                    STATE_DTYPE=STATE_DTYPE, WINDOW=WINDOW,
                                    BLOCK_INNER=BLOCK_INNER)
                results = MERGE(carry, open_state)
                if FOLD_INITIAL:
                    results = MERGE(((tl.zeros([1, BLOCK_INNER], STATE_DTYPE[0])
                                      + initial_value).to(STATE_DTYPE[0]),), results)
                outputs = FINISH(results, open_count)
                for o in tl.static_range(len(out_ptrs)):
                    tl.store(out_ptrs[o] + out_offs[o] + first_segment * out_axis_strides[o],
                             outputs[o].to(out_ptrs[o].dtype.element_ty), mask=inner_mask)
