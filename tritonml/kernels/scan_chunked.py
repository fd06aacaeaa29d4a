"""The chunked scan kernel: few, long scans at the copy bandwidth, with no serial chain of tiles.

``scan_chunked_kernel`` (regime "chunked", docs/scan.md regime d) is a reduce-then-scan in one
launch: the axis is cut into chunks of ``chunk_tiles`` tiles, one program each; a program folds
its chunk, publishes the aggregate, folds what its group of WINDOW chunks published before it with
one vector load per round trip (the decoupled look-back of Merrill & Garland, "Single-pass
Parallel Prefix Scan with Decoupled Look-back", 2016, made wide), and scans its chunk again from
that tally. It shares the tile step, the state helpers, the ticket and the publication protocol
with the other scan kernels (``tritonml/kernels/scan.py``, whose module docstring describes
tuple states, FLAGGED, HAS_INITIAL and STORE_CARRY; ``tritonml/kernels/lookback.py``, the
epoch-tagged status words).
"""
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl

from .combine import row_of, scan_along
from .lookback import (STATE_AGGREGATE, STATE_PREFIX, STATUS_BASE, draw_chunk, publish,
                       wait_published)
from .scan import (chain_bases, empty_state, first_carry, load_state, scan_tile, scan_walk,
                   store_carry, tile_of)


@triton.jit
def _fold_chunk(x_ptrs, x_offs, inner_mask, first_step, end_step, n_tiles, axis_len,
                x_axis_strides, COMBINE: tl.constexpr, SCAN_COMBINE: tl.constexpr,
                IDENTITY: tl.constexpr, ACC_DTYPE: tl.constexpr, FLAGGED: tl.constexpr,
                REVERSE: tl.constexpr, NEGATE_X: tl.constexpr, COMMUTATIVE: tl.constexpr,
                INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """The combine of the tiles ``first_step`` to ``end_step - 1`` (in traversal order), components
    [1, BLOCK_INNER]: the chunk's aggregate. Its loads ask L2 to keep the lines (``evict_last``)
    for the chunk's second read.

    COMMUTATIVE (the built-in sum and product): the tiles are first combined element by element
    into one [BLOCK_AXIS, BLOCK_INNER] state, and only that is scanned: one cheap combine per
    element instead of a scan per tile. Any other combine folds the tiles' totals in order."""
    if COMMUTATIVE:
        acc = empty_state(x_ptrs, IDENTITY, ACC_DTYPE, FLAGGED, BLOCK_AXIS, BLOCK_INNER)
        for step in range(first_step, end_step):
            positions = tile_of(step, n_tiles, REVERSE) * BLOCK_AXIS + tl.arange(0, BLOCK_AXIS)[:, None]
            if INDEX_64:
                positions = positions.to(tl.int64)
            mask = (positions < axis_len) & inner_mask
            acc = COMBINE(acc, load_state(x_ptrs, x_offs, positions, x_axis_strides, mask,
                                           IDENTITY, ACC_DTYPE, NEGATE_X, FLAGGED, "evict_last"))
        aggregate = row_of(scan_along(acc, 0, SCAN_COMBINE), BLOCK_AXIS - 1)
    else:
        aggregate = empty_state(x_ptrs, IDENTITY, ACC_DTYPE, FLAGGED, 1, BLOCK_INNER)
        for step in range(first_step, end_step):
            _, total, _, _ = scan_tile(
                x_ptrs, x_offs, inner_mask, tile_of(step, n_tiles, REVERSE), axis_len, x_axis_strides, COMBINE,
                SCAN_COMBINE, IDENTITY, ACC_DTYPE, FLAGGED, REVERSE, False, NEGATE_X, INDEX_64,
                BLOCK_AXIS, BLOCK_INNER, "evict_last")
            aggregate = COMBINE(aggregate, total)
    return aggregate


@triton.jit
def _window_fold(values_ptrs, status_ptr, chain_first_slot, chunk, epoch_base,
                 SCAN_COMBINE: tl.constexpr, IDENTITY: tl.constexpr, ACC_DTYPE: tl.constexpr,
                 FLAGGED: tl.constexpr, WINDOW: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """The combine, in traversal order, of what ``chunk``'s predecessors in its group published:
    the previous group's inclusive prefix (none for the first group) and the aggregates of the
    group's chunks before it; components [1, BLOCK_INNER] (the empty state for the first chunk).

    The WINDOW status words are polled with one vector load per round trip until every one of
    them is published in this launch, then read once more with acquire order (so the values read
    after them are the published ones) and the values read in one vector load per component."""
    group_start = (chunk // WINDOW) * WINDOW
    index = group_start - 1 + tl.arange(0, WINDOW)[:, None]          # [WINDOW, 1], chunks
    needed = (index >= 0) & (index < chunk)
    words = status_ptr + STATUS_BASE + chain_first_slot + index
    wait_published(words, needed, epoch_base)
    tl.atomic_add(words, 0, mask=needed, sem="acquire", scope="gpu")
    # The thread that acquired a word is not the one that reads its values: the barrier orders
    # every thread's reads after every acquire.
    tl.debug_barrier()
    lanes = tl.arange(0, BLOCK_INNER)[None, :]
    slots = chain_first_slot + index
    state = ()
    for c in tl.static_range(len(values_ptrs)):
        values = tl.load(values_ptrs[c] + slots * BLOCK_INNER + lanes,
                         mask=needed & (lanes < BLOCK_INNER), cache_modifier=".cg")
        state = state + (tl.where(needed, values, tl.full(values.shape, IDENTITY[c],
                                                          ACC_DTYPE[c])),)
    if FLAGGED:
        state = state + (needed & (lanes < BLOCK_INNER),)
    scanned = scan_along(state, 0, SCAN_COMBINE)
    # row chunk - group_start holds everything up to chunk - 1
    return row_of(scanned, (chunk - group_start).to(tl.int32))


# Its layout and meta-parameters mirror scan_tiled_kernel's on purpose (see scan_lookback_kernel).
@triton.jit
def scan_chunked_kernel(
    # pointers: data (one tuple entry per state component), then the int32 status words ([0:2] the
    # int64 ticket word, [2 + slot] each chunk's status; the look-back's resident workspace) and
    # the per-chunk published vectors (one workspace per data component)
    x_ptrs, out_ptrs, init_ptrs, carry_ptrs, status_ptr, published_ptrs,
    # layout (tritonml.launchers.scan.layout_args), as scan_tiled_kernel's
    axis_len, inner_len, outer_sizes,
    x_axis_strides, x_inner_strides, x_outer_strides,
    out_axis_strides, out_inner_strides, out_outer_strides,
    init_inner_strides, init_outer_strides,
    chunk_tiles,
    # meta-parameters (IDENTITY, ACC_DTYPE, NEGATE_*: one entry per component)
    COMBINE: tl.constexpr, SCAN_COMBINE: tl.constexpr, IDENTITY: tl.constexpr,
    ACC_DTYPE: tl.constexpr, FLAGGED: tl.constexpr,
    REVERSE: tl.constexpr, EXCLUSIVE: tl.constexpr, NEGATE_X: tl.constexpr,
    NEGATE_OUT: tl.constexpr, STORE: tl.constexpr, HAS_INITIAL: tl.constexpr,
    NEGATE_INIT: tl.constexpr, STORE_CARRY: tl.constexpr,
    INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr,
    COMMUTATIVE: tl.constexpr, WINDOW: tl.constexpr,
    PTR_TUPLES: tl.constexpr,
):
    """One program per chunk of ``chunk_tiles`` tiles; grid = (independent scans) * chunks, a
    chain's chunks cdiv(cdiv(axis_len, BLOCK_AXIS), chunk_tiles).

    Reduce, then scan: a program folds its chunk to one aggregate (``_fold_chunk``, the chunk's
    first read), publishes it, folds what its group published before it (``_window_fold``: one
    poll of WINDOW status words per round trip, however many tiles came before), and scans its
    chunk again from that tally (the second read, from L2 while the chunks in flight fit there),
    writing the output. Chunks form groups of WINDOW; the last chunk of a group publishes its
    inclusive prefix instead of its aggregate, which the next group starts from. Each program
    waits for at most WINDOW chunks and one hand-over between groups: the only chain is one
    round trip per group, cdiv(chunks, WINDOW) in all.

    The tally entering chunk j is therefore fixed by the shape and the config, not by timing:
    (initial, then the groups' prefixes in order, each the in-group scan of its chunks'
    aggregates). Results are bit-identical run to run and whatever order programs run in, and
    tickets (``draw_chunk``) order the chunks so a program only waits for programs that have
    already started.
    """
    if not PTR_TUPLES:  # one component passed as plain pointers (see _PTR_TUPLES_WHY)
        x_ptrs, out_ptrs, init_ptrs = (x_ptrs,), (out_ptrs,), (init_ptrs,)
        carry_ptrs, published_ptrs = (carry_ptrs,), (published_ptrs,)
    n_tiles = tl.cdiv(axis_len, BLOCK_AXIS)
    ticket, epoch_base, chain, chunk, n_chunks, first_step, end_step = draw_chunk(
        status_ptr, n_tiles, chunk_tiles, INDEX_64)
    x_offs, inner_mask = chain_bases(chain, inner_len, outer_sizes, x_outer_strides,
                                      x_inner_strides, INDEX_64, BLOCK_INNER)
    out_offs, _ = chain_bases(chain, inner_len, outer_sizes, out_outer_strides,
                               out_inner_strides, INDEX_64, BLOCK_INNER)
    chain_first_slot = ticket - chunk
    in_group = chunk % WINDOW   # the last of its group publishes a prefix, the others aggregates
    # Only the first group starts from the initial; later ones from the previous group's prefix,
    # which includes it.
    if chunk < WINDOW:
        tally = first_carry(init_ptrs, chain, inner_len, outer_sizes, init_inner_strides,
                             init_outer_strides, IDENTITY, ACC_DTYPE, FLAGGED, HAS_INITIAL,
                             NEGATE_INIT, INDEX_64, BLOCK_INNER)
    else:
        tally = empty_state(init_ptrs, IDENTITY, ACC_DTYPE, FLAGGED, 1, BLOCK_INNER)
    if n_chunks > 1:
        aggregate = _fold_chunk(x_ptrs, x_offs, inner_mask, first_step, end_step, n_tiles,
                                axis_len, x_axis_strides, COMBINE, SCAN_COMBINE, IDENTITY,
                                ACC_DTYPE, FLAGGED, REVERSE, NEGATE_X, COMMUTATIVE, INDEX_64,
                                BLOCK_AXIS, BLOCK_INNER)
        if (in_group != WINDOW - 1) & (chunk != n_chunks - 1):
            publish(published_ptrs, status_ptr, ticket, aggregate,
                    epoch_base + STATE_AGGREGATE, BLOCK_INNER)
        before = _window_fold(published_ptrs, status_ptr, chain_first_slot, chunk, epoch_base,
                              SCAN_COMBINE, IDENTITY, ACC_DTYPE, FLAGGED, WINDOW, BLOCK_INNER)
        if chunk < WINDOW:
            tally = COMBINE(tally, before)
        else:
            tally = before
        if (in_group == WINDOW - 1) & (chunk != n_chunks - 1):
            publish(published_ptrs, status_ptr, ticket, COMBINE(tally, aggregate),
                    epoch_base + STATE_PREFIX, BLOCK_INNER)
    # the second read of the chunk: the last use of its lines
    carry = scan_walk(x_ptrs, x_offs, out_ptrs, out_offs, inner_mask, first_step, end_step,
                       n_tiles, tally, axis_len, x_axis_strides, out_axis_strides, COMBINE,
                       SCAN_COMBINE, IDENTITY, ACC_DTYPE, FLAGGED, REVERSE, EXCLUSIVE, NEGATE_X,
                       NEGATE_OUT, STORE, INDEX_64, BLOCK_AXIS, BLOCK_INNER, "evict_first")
    if STORE_CARRY:
        if chunk == n_chunks - 1:
            store_carry(carry_ptrs, chain, inner_len, outer_sizes, init_inner_strides,
                         init_outer_strides, carry, INDEX_64, BLOCK_INNER)
