"""Scan kernels: running combine (sum, product, ...) along one axis.

Two kernels, one algorithm each, parameterized by constexprs (combine function, identity,
accumulator type, direction, exclusive, 64-bit indexing, tile shape):

Tuple state: every scan runs a *state* of one or more components, one per input tensor (the
cumulative sum is the one-component case; ``tritonml.associative_scan`` passes several). Pointers,
strides, identities, accumulator types, negative-view flags and look-back workspaces are tuples
with one entry per component, so one kernel serves every arity; the arity and the dtypes are
specializations, the sizes are not. Two forms of one combine function are constexprs:
``COMBINE(a, b)`` takes and returns state tuples (carries, tile totals), ``SCAN_COMBINE`` takes
the 2 * N scalars ``tl.associative_scan`` hands to a combine (for the built-in sum and product it
is Triton's own combine object, which the interpreter runs through numpy).

FLAGGED: a combine without an identity. The state then carries one more component, an int1
"holds elements" flag: padding lanes and the empty starting tally have it clear, and the combine
(tritonml/records/state_combine.py) returns the other operand where one side is clear, so padding
never reaches the user's function's results. Published look-back vectors always hold elements
(every tile has at least one), so only the data components have workspaces.

- ``scan_tiled_kernel`` (regimes "rows" and "columns"): each program owns one tile column of an
  independent scan, ``[BLOCK_AXIS, BLOCK_INNER]`` at a time, and walks the axis carrying the tally.
  With a contiguous axis the launcher picks a tall tile (many axis elements, few rows); with a
  strided axis a wide tile whose loads coalesce along the contiguous inner dimension.
- ``scan_lookback_kernel`` (regime "lookback"): few, long scans split across many programs in one
  pass. Each program scans one tile, publishes the tile's aggregate, looks back over its
  predecessors and publishes its inclusive prefix (single-pass "decoupled look-back"; tickets,
  status words and waits: tritonml/kernels/lookback.py).

A third, ``scan_chunked_kernel`` (regime "chunked", tritonml/kernels/scan_chunked.py: few long
scans with no chain of tiles), is built from the helpers here.

Both read every input element once and write every output element once. Direction is a flip of the
tile order plus a reversed in-tile scan, so tiles stay aligned in memory in both directions.
Exclusive results come from shifting the loaded window by one element along the traversal (see
``scan_tile``), never from subtracting or dividing.

HAS_INITIAL: each scan's tally starts from its element of ``initial`` (x's shape without the axis,
read once per chain in ACC_DTYPE, ``first_carry``) instead of the identity; the tiled kernel
carries it from the start, the look-back's first tile in traversal order folds it into the prefix
it publishes.

STORE_CARRY: each scan also writes its last inclusive state (the tally after its last element in
traversal order, exclusive scans included) to ``carry``, in ACC_DTYPE and with ``initial``'s
layout (the launcher gives both one set of strides), so the next chunk of a sequence can start
from it with nothing rounded to x's dtype in between (docs/dsl.md, "Scanning in chunks").

Determinism: the tally entering a tile is always the left fold, in traversal order, of the totals
of the tiles before it. The tiled kernel computes it by construction; the look-back kernel folds
the predecessors' aggregates forward from the nearest published prefix, which gives the same value
whichever prefix it found. Both kernels therefore give bit-identical results for the same
BLOCK_AXIS, run to run.
"""
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl

from .combine import row_of, scan_along
from .indexing import chain_position, outer_index, strided_offset
from .lookback import (STATE_AGGREGATE, STATE_PREFIX, draw_ticket, publish, read_published,
                       wait_for_state)

# A test knob, not a parameter: the look-back kernel publishes the inclusive prefix of every
# PREFIX_EVERY-th tile only (1: every tile, what ships; the compiler folds the test away). Tests
# raise it under Triton's interpreter, which reads the global at each launch, to force long
# look-back chains (tests/lookback_knob.py). Compiled Triton hashes it into the kernel once and
# refuses a changed value.
PREFIX_EVERY = tl.constexpr(1)


@triton.jit
def chain_bases(chain, inner_len, outer_sizes, outer_strides, inner_strides,
                 INDEX_64: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """Each tensor's base offsets [1, BLOCK_INNER] for a chain (one tuple entry per component)
    and the inner mask. The outer index is decomposed once for every tensor."""
    outer_idx, inner_idx, inner_mask = chain_position(chain, inner_len, INDEX_64, BLOCK_INNER)
    index = outer_index(outer_idx, outer_sizes)
    bases = ()
    for c in tl.static_range(len(inner_strides)):
        bases = bases + (strided_offset(index, outer_strides[c]) + inner_idx * inner_strides[c],)
    return bases, inner_mask


@triton.jit
def load_state(x_ptrs, x_offs, positions, x_axis_strides, mask,
                IDENTITY: tl.constexpr, ACC_DTYPE: tl.constexpr, NEGATE_X: tl.constexpr,
                FLAGGED: tl.constexpr, EVICTION: tl.constexpr):
    """The state of the elements at ``positions`` (masked lanes: the identity; FLAGGED: the flag
    component says which lanes hold an element). EVICTION: the loads' L2 eviction policy ("" the
    default; the chunked kernel keeps a chunk in L2 for its second read)."""
    state = ()
    for c in tl.static_range(len(x_ptrs)):
        values = tl.load(x_ptrs[c] + x_offs[c] + positions * x_axis_strides[c],
                         mask=mask, eviction_policy=EVICTION).to(ACC_DTYPE[c])
        if NEGATE_X[c]:
            values = -values
        # The identity is filled in after the conversion, not through ``other=``: the interpreter
        # turns ``other=1`` for a bfloat16 load into the bit pattern 1 (a denormal), not the value 1.
        state = state + (tl.where(mask, values, tl.full(values.shape, IDENTITY[c], ACC_DTYPE[c])),)
    if FLAGGED:
        state = state + (mask,)
    return state


@triton.jit
def scan_tile(x_ptrs, x_offs, inner_mask, tile, axis_len, x_axis_strides,
               COMBINE: tl.constexpr, SCAN_COMBINE: tl.constexpr, IDENTITY: tl.constexpr,
               ACC_DTYPE: tl.constexpr, FLAGGED: tl.constexpr,
               REVERSE: tl.constexpr, EXCLUSIVE: tl.constexpr, NEGATE_X: tl.constexpr,
               INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr,
               EVICTION: tl.constexpr):
    """Load and scan one tile: axis positions [tile * BLOCK_AXIS, (tile + 1) * BLOCK_AXIS).

    Returns (partial, total, positions, mask): the in-tile inclusive or exclusive scan, a state of
    [BLOCK_AXIS, BLOCK_INNER] components, the combine of the whole tile (components
    [1, BLOCK_INNER]), the tile's axis positions [BLOCK_AXIS, 1] and its valid-element mask
    [BLOCK_AXIS, BLOCK_INNER].

    Exclusive: the loaded window is the tile's own elements shifted by one along the traversal
    (position p reads p - 1 forward, p + 1 reverse; the row where traversal starts reads the
    identity), so the inclusive scan of the window is the exclusive scan of the tile. The one
    element the window leaves out (where traversal leaves the tile) is loaded as a row of its own
    to complete the tile's total. Every element is read once, only by its own tile, so in-place
    execution is safe, and no value is subtracted or divided out.

    NEGATE_X: per component, x is a torch view with the negative bit set (memory holds the
    negated values).
    """
    tile_start = tile * BLOCK_AXIS
    positions = tile_start + tl.arange(0, BLOCK_AXIS)[:, None]            # [BLOCK_AXIS, 1]
    if INDEX_64:
        positions = positions.to(tl.int64)
    mask = (positions < axis_len) & inner_mask                           # [BLOCK_AXIS, BLOCK_INNER]
    if REVERSE:
        end_row = 0                     # traversal leaves the tile at its first row...
        shift = 1
    else:
        end_row = BLOCK_AXIS - 1        # ...or at its last
        shift = -1
    if EXCLUSIVE:
        window = positions + shift
        tile_end = tl.minimum(tile_start + BLOCK_AXIS, axis_len)
        window_mask = (window >= tile_start) & (window < tile_end) & inner_mask
    else:
        window = positions
        window_mask = mask
    values = load_state(x_ptrs, x_offs, window, x_axis_strides, window_mask, IDENTITY, ACC_DTYPE,
                         NEGATE_X, FLAGGED, EVICTION)
    partial = scan_along(values, 0, SCAN_COMBINE, reverse=REVERSE)
    total = row_of(partial, end_row)
    if EXCLUSIVE:
        last = tile_start + end_row + tl.arange(0, 1)[:, None]           # [1, 1]
        if INDEX_64:
            last = last.to(tl.int64)
        last_mask = (last < axis_len) & inner_mask                       # [1, BLOCK_INNER]
        total = COMBINE(total, load_state(x_ptrs, x_offs, last, x_axis_strides, last_mask,
                                           IDENTITY, ACC_DTYPE, NEGATE_X, FLAGGED, EVICTION))
    return partial, total, positions, mask


@triton.jit
def first_carry(init_ptrs, chain, inner_len, outer_sizes, init_inner_strides, init_outer_strides,
                 IDENTITY: tl.constexpr, ACC_DTYPE: tl.constexpr, FLAGGED: tl.constexpr,
                 HAS_INITIAL: tl.constexpr, NEGATE_INIT: tl.constexpr, INDEX_64: tl.constexpr,
                 BLOCK_INNER: tl.constexpr):
    """The tally a chain starts from, components [1, BLOCK_INNER]: its slice of ``initial``
    (HAS_INITIAL; NEGATE_INIT: per component, a negative view) or the identity (FLAGGED: an empty
    tally, flag clear)."""
    if HAS_INITIAL:
        bases, inner_mask = chain_bases(chain, inner_len, outer_sizes, init_outer_strides,
                                         init_inner_strides, INDEX_64, BLOCK_INNER)
        carry = load_state(init_ptrs, bases, 0, init_inner_strides, inner_mask, IDENTITY,
                            ACC_DTYPE, NEGATE_INIT, FLAGGED, "")
    else:
        carry = empty_state(init_ptrs, IDENTITY, ACC_DTYPE, FLAGGED, 1, BLOCK_INNER)
    return carry


@triton.jit
def empty_state(like_ptrs, IDENTITY: tl.constexpr, ACC_DTYPE: tl.constexpr,
                 FLAGGED: tl.constexpr, ROWS: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """The state of no elements, components [ROWS, BLOCK_INNER] (one per pointer of
    ``like_ptrs``): the identity, or (FLAGGED) any value with the flag clear."""
    state = ()
    for c in tl.static_range(len(like_ptrs)):
        state = state + (tl.full([ROWS, BLOCK_INNER], IDENTITY[c], ACC_DTYPE[c]),)
    if FLAGGED:
        state = state + (tl.full([ROWS, BLOCK_INNER], 0, tl.int1),)
    return state


@triton.jit
def store_carry(carry_ptrs, chain, inner_len, outer_sizes, init_inner_strides,
                 init_outer_strides, carry, INDEX_64: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """A chain's last inclusive state, components [1, BLOCK_INNER], into ``carry`` (initial's
    layout, the accumulation dtypes; a FLAGGED state's flag is not stored)."""
    bases, inner_mask = chain_bases(chain, inner_len, outer_sizes, init_outer_strides,
                                     init_inner_strides, INDEX_64, BLOCK_INNER)
    for c in tl.static_range(len(carry_ptrs)):
        tl.store(carry_ptrs[c] + bases[c], carry[c].to(carry_ptrs[c].dtype.element_ty),
                 mask=inner_mask)


@triton.jit
def store_state(out_ptrs, out_offs, positions, out_axis_strides, mask, state,
                 NEGATE_OUT: tl.constexpr, STORE: tl.constexpr):
    # STORE[c] False: component c is scanned but not written (its out pointer is never used), for
    # callers that need only some components (tritonml.linear_recurrence keeps h, not the gates'
    # running product), so they move only the bytes they keep.
    for c in tl.static_range(len(out_ptrs)):
        if STORE[c]:
            values = state[c]
            if NEGATE_OUT[c]:
                values = -values
            tl.store(out_ptrs[c] + out_offs[c] + positions * out_axis_strides[c],
                     values.to(out_ptrs[c].dtype.element_ty), mask=mask)


@triton.jit
def tile_of(step, n_tiles, REVERSE: tl.constexpr):
    """The tile at position ``step`` of the traversal (the last tile first in reverse)."""
    if REVERSE:
        tile = n_tiles - 1 - step
    else:
        tile = step
    return tile


@triton.jit
def scan_walk(x_ptrs, x_offs, out_ptrs, out_offs, inner_mask, first_step, end_step, n_tiles,
               carry, axis_len, x_axis_strides, out_axis_strides,
               COMBINE: tl.constexpr, SCAN_COMBINE: tl.constexpr, IDENTITY: tl.constexpr,
               ACC_DTYPE: tl.constexpr, FLAGGED: tl.constexpr, REVERSE: tl.constexpr,
               EXCLUSIVE: tl.constexpr, NEGATE_X: tl.constexpr, NEGATE_OUT: tl.constexpr,
               STORE: tl.constexpr, INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr,
               BLOCK_INNER: tl.constexpr, EVICTION: tl.constexpr):
    """Scan the traversal's tiles ``first_step`` to ``end_step - 1`` one after another, starting
    from ``carry`` (the tally of everything before them), writing each output; returns the tally
    after them."""
    for step in range(first_step, end_step):
        partial, total, positions, mask = scan_tile(
            x_ptrs, x_offs, inner_mask, tile_of(step, n_tiles, REVERSE), axis_len,
            x_axis_strides, COMBINE, SCAN_COMBINE, IDENTITY, ACC_DTYPE, FLAGGED, REVERSE,
            EXCLUSIVE, NEGATE_X, INDEX_64, BLOCK_AXIS, BLOCK_INNER, EVICTION)
        store_state(out_ptrs, out_offs, positions, out_axis_strides, mask,
                     COMBINE(carry, partial), NEGATE_OUT, STORE)
        carry = COMBINE(carry, total)
    return carry


# _PTR_TUPLES_WHY: PTR_TUPLES False passes each pointer argument of a one-component scan
# (cumulative_sum/product, linear state of one tensor) as a plain tensor, not a 1-tuple. torch's
# tracing of Triton kernels (``wrap_triton``, what torch.compile and export see on a GPU) only sees
# tensors passed as top-level arguments; a launch whose output sits in a tuple would look like it
# writes nothing and be dropped from the graph.
@triton.jit
def scan_tiled_kernel(
    # pointers: one tuple entry per state component
    x_ptrs, out_ptrs, init_ptrs, carry_ptrs,
    # layout (tritonml.launchers.scan.layout_args): lengths, then each tensor's strides in elements,
    # one tuple entry per component; the outer tuples have one entry per outer dim, outermost first
    axis_len, inner_len, outer_sizes,
    x_axis_strides, x_inner_strides, x_outer_strides,
    out_axis_strides, out_inner_strides, out_outer_strides,
    init_inner_strides, init_outer_strides,
    # meta-parameters (IDENTITY, ACC_DTYPE, NEGATE_*: one entry per component)
    COMBINE: tl.constexpr, SCAN_COMBINE: tl.constexpr, IDENTITY: tl.constexpr,
    ACC_DTYPE: tl.constexpr, FLAGGED: tl.constexpr,
    REVERSE: tl.constexpr, EXCLUSIVE: tl.constexpr, NEGATE_X: tl.constexpr,
    NEGATE_OUT: tl.constexpr, STORE: tl.constexpr, HAS_INITIAL: tl.constexpr,
    NEGATE_INIT: tl.constexpr, STORE_CARRY: tl.constexpr,
    INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr,
    PTR_TUPLES: tl.constexpr,
):
    """One program per (outer index, block of BLOCK_INNER inner positions); grid = outer_len *
    cdiv(inner_len, BLOCK_INNER). The program walks the whole axis in [BLOCK_AXIS, BLOCK_INNER]
    tiles, carrying a [1, BLOCK_INNER] tally per component.
    """
    if not PTR_TUPLES:  # one component passed as plain pointers (see _PTR_TUPLES_WHY)
        x_ptrs, out_ptrs, init_ptrs = (x_ptrs,), (out_ptrs,), (init_ptrs,)
        carry_ptrs = (carry_ptrs,)
    chain = tl.program_id(0)
    x_offs, inner_mask = chain_bases(chain, inner_len, outer_sizes, x_outer_strides,
                                      x_inner_strides, INDEX_64, BLOCK_INNER)
    out_offs, _ = chain_bases(chain, inner_len, outer_sizes, out_outer_strides,
                               out_inner_strides, INDEX_64, BLOCK_INNER)
    n_tiles = tl.cdiv(axis_len, BLOCK_AXIS)
    # tally of the tiles already traversed, starting from the initial
    carry = first_carry(init_ptrs, chain, inner_len, outer_sizes, init_inner_strides,
                         init_outer_strides, IDENTITY, ACC_DTYPE, FLAGGED, HAS_INITIAL,
                         NEGATE_INIT, INDEX_64, BLOCK_INNER)
    carry = scan_walk(x_ptrs, x_offs, out_ptrs, out_offs, inner_mask, 0, n_tiles, n_tiles, carry,
                       axis_len, x_axis_strides, out_axis_strides, COMBINE, SCAN_COMBINE,
                       IDENTITY, ACC_DTYPE, FLAGGED, REVERSE, EXCLUSIVE, NEGATE_X, NEGATE_OUT,
                       STORE, INDEX_64, BLOCK_AXIS, BLOCK_INNER, "")
    if STORE_CARRY:
        store_carry(carry_ptrs, chain, inner_len, outer_sizes, init_inner_strides,
                     init_outer_strides, carry, INDEX_64, BLOCK_INNER)


# Its layout and meta-parameters mirror scan_tiled_kernel's on purpose: the launcher passes both
# the same layout arguments and meta dict, and a kernel's parameter list cannot be shared.
@triton.jit
def scan_lookback_kernel(
    # pointers: data (one tuple entry per state component), then the int32 status words ([0:2] the
    # int64 ticket word, [2 + slot] each tile's status; a resident workspace, zeroed when new) and the
    # per-tile aggregate and inclusive-prefix vectors (one workspace per data component)
    x_ptrs, out_ptrs, init_ptrs, carry_ptrs, status_ptr, aggregate_ptrs, prefix_ptrs,
    # layout (tritonml.launchers.scan.layout_args): lengths, then each tensor's strides in elements,
    # one tuple entry per component; the outer tuples have one entry per outer dim, outermost first
    axis_len, inner_len, outer_sizes,
    x_axis_strides, x_inner_strides, x_outer_strides,
    out_axis_strides, out_inner_strides, out_outer_strides,
    init_inner_strides, init_outer_strides,
    # meta-parameters (IDENTITY, ACC_DTYPE, NEGATE_*: one entry per component)
    COMBINE: tl.constexpr, SCAN_COMBINE: tl.constexpr, IDENTITY: tl.constexpr,
    ACC_DTYPE: tl.constexpr, FLAGGED: tl.constexpr,
    REVERSE: tl.constexpr, EXCLUSIVE: tl.constexpr, NEGATE_X: tl.constexpr,
    NEGATE_OUT: tl.constexpr, STORE: tl.constexpr, HAS_INITIAL: tl.constexpr,
    NEGATE_INIT: tl.constexpr, STORE_CARRY: tl.constexpr,
    INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr,
    PTR_TUPLES: tl.constexpr,
):
    """One program per tile; grid = (independent scans) * cdiv(axis_len, BLOCK_AXIS).

    Programs take tiles from a ticket counter, not from their program id: a program only ever
    waits for tiles with smaller tickets, which belong to programs that have already started, so
    no hardware scheduling order can deadlock it (and running programs in any order in the
    interpreter gives the same result). Every tile publishes its inclusive prefix unless the
    module's ``PREFIX_EVERY`` test knob says otherwise.

    The ticket word also holds the launch's epoch (``draw_ticket``), so the resident status
    words need no clearing between launches.
    """
    if not PTR_TUPLES:  # one component passed as plain pointers (see _PTR_TUPLES_WHY)
        x_ptrs, out_ptrs, init_ptrs = (x_ptrs,), (out_ptrs,), (init_ptrs,)
        carry_ptrs = (carry_ptrs,)
        aggregate_ptrs, prefix_ptrs = (aggregate_ptrs,), (prefix_ptrs,)
    ticket, epoch_base = draw_ticket(status_ptr, INDEX_64)
    n_tiles = tl.cdiv(axis_len, BLOCK_AXIS)
    chain = ticket // n_tiles
    step = ticket % n_tiles  # position in traversal order; slot = ticket
    tile = tile_of(step, n_tiles, REVERSE)
    x_offs, inner_mask = chain_bases(chain, inner_len, outer_sizes, x_outer_strides,
                                      x_inner_strides, INDEX_64, BLOCK_INNER)
    out_offs, _ = chain_bases(chain, inner_len, outer_sizes, out_outer_strides,
                               out_inner_strides, INDEX_64, BLOCK_INNER)
    partial, total, positions, mask = scan_tile(
        x_ptrs, x_offs, inner_mask, tile, axis_len, x_axis_strides, COMBINE, SCAN_COMBINE,
        IDENTITY, ACC_DTYPE, FLAGGED, REVERSE, EXCLUSIVE, NEGATE_X, INDEX_64, BLOCK_AXIS,
        BLOCK_INNER, "")

    if step == 0:
        # The first tile in traversal order starts from the initial, so every published prefix
        # (and every tally folded from one) includes it.
        carry = first_carry(init_ptrs, chain, inner_len, outer_sizes, init_inner_strides,
                             init_outer_strides, IDENTITY, ACC_DTYPE, FLAGGED, HAS_INITIAL,
                             NEGATE_INIT, INDEX_64, BLOCK_INNER)
        publish(prefix_ptrs, status_ptr, ticket, COMBINE(carry, total),
                epoch_base + STATE_PREFIX, BLOCK_INNER)
    else:
        publish(aggregate_ptrs, status_ptr, ticket, total, epoch_base + STATE_AGGREGATE,
                BLOCK_INNER)
        # Walk back to the nearest published prefix...
        found = ticket - 1
        state = wait_for_state(status_ptr, found, epoch_base)
        while state != STATE_PREFIX:
            found -= 1
            state = wait_for_state(status_ptr, found, epoch_base)
        # ...then fold the aggregates after it forward, in traversal order: the same left fold
        # the tiled kernel computes, whichever prefix was found.
        carry = read_published(prefix_ptrs, found, FLAGGED, BLOCK_INNER)
        for slot in range(found + 1, ticket):
            carry = COMBINE(carry, read_published(aggregate_ptrs, slot, FLAGGED, BLOCK_INNER))
        if step % PREFIX_EVERY == 0:
            publish(prefix_ptrs, status_ptr, ticket, COMBINE(carry, total),
                    epoch_base + STATE_PREFIX, BLOCK_INNER)
    store_state(out_ptrs, out_offs, positions, out_axis_strides, mask, COMBINE(carry, partial),
                 NEGATE_OUT, STORE)
    if STORE_CARRY:
        if step == n_tiles - 1:
            store_carry(carry_ptrs, chain, inner_len, outer_sizes, init_inner_strides,
                         init_outer_strides, COMBINE(carry, total), INDEX_64, BLOCK_INNER)
