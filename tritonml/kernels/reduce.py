"""Reduce kernels: fold one or more axes of a tensor (sum, product, max, argmax, ...).

A reduction is four ``@triton.jit`` functions passed as ``tl.constexpr`` parameters (see the
"Reductions" part of tritonml/kernels/combine.py): PREPARE turns loaded elements into a state,
MERGE folds states elementwise, ALONG folds a tile's lanes, FINISH turns a state into the outputs.
The state is a tuple of any number of components, each with its own dtype (STATE_DTYPES) and
identity (IDENTITIES). The twelve DirectML functions read one input and write one output, passed as
single pointers; ``tritonml.reduce_with`` passes tuples of pointers (PTR_TUPLES), for any number
of inputs and outputs of one shape and one workspace per state component.

The input is viewed (by tritonml/launchers/reduce.py) as

    outer dims (kept) x inner (one kept dim, tiled) x reduced dims (flattened)

and each program owns one "chain": one outer index and BLOCK_INNER consecutive inner positions,
i.e. BLOCK_INNER outputs. It walks the flattened reduced index ``r`` in [BLOCK_AXIS, BLOCK_INNER]
tiles, merging every tile into per-lane running states (so the only sequential chains are one per
lane, BLOCK_AXIS times shorter than the axis), and folds the lanes once at the end.

- "rows" (the reduced memory is the contiguous one): a tall tile, loads coalesce along dim 0.
- "columns" (a kept dim is contiguous): a wide tile, loads coalesce along the inner dim.
- "split" (few outputs, long reduction): the same kernel with a second grid dimension splitting the
  reduced range; each program writes its folded state to a workspace (WRITE_PARTIAL). With FOLD_LAST
  (one launch), each program then counts itself in on its chain's arrival counter (one integer
  atomic, acquire-release) and the last to arrive folds the chain's partial states in a fixed order,
  finishes, and puts the counter back to 0 for the next launch (a resident workspace,
  tritonml/runtime/resident.py); the "last block" pattern of CUDA's threadFenceReduction sample and
  of CUB's single-pass reductions. Without it, ``reduce_partials_kernel`` folds them in a second
  launch. Either way the states fold in the same order, so both give the same bits.

Every input element is read once; the outputs (or the partial states) are written once.

Determinism: each lane folds its elements in increasing ``r``, lanes fold in a fixed tree, split
boundaries depend only on the config, and the partials fold in a fixed order: the same config gives
bit-identical results run to run.

ARGMAX/ARGMIN: ``r`` decomposes over the reduced dims in *memory* order (for coalescing), but the
index each element carries is its row-major position over the reduced axes in their *original*
order (``red_weight*``); the tie rule compares those indices, so the answer does not depend on the
traversal order.
"""
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl

from .combine import cast_state, full_state, where_state
from .indexing import chain_offsets, unflatten_offsets


@triton.jit
def _reduced_offsets(r, red_sizes, x_red_strides, red_weights,
                     RED_DIMS: tl.constexpr, NEEDS_INDEX: tl.constexpr):
    """Element offsets and row-major indices of flattened reduced positions ``r`` ([BLOCK_AXIS, 1]).

    Dims are outermost first, the last RED_DIMS entries of each tuple in use. With one reduced dim
    no division is needed (and contiguity stays visible to the compiler, which vectorizes the
    loads).
    """
    last: tl.constexpr = len(red_sizes) - 1
    if RED_DIMS == 1:
        offsets = r * x_red_strides[last]
        index = r * red_weights[last]
    elif NEEDS_INDEX:
        offsets, index = unflatten_offsets(r, red_sizes, x_red_strides, red_weights)
    else:
        offsets, _ = unflatten_offsets(r, red_sizes, x_red_strides, x_red_strides)
        index = r
    return offsets, index


@triton.jit
def reduce_kernel(
    # pointers: the input(s), the output(s), and (WRITE_PARTIAL only) the partial-state
    # workspace(s); each a tuple with PTR_TUPLES, else one tensor (aux_ptr: state component 1);
    # (FOLD_LAST only) the per-chain arrival counters, int32, 0 at the start
    x_ptr, out_ptr, state_ptr, aux_ptr, arrivals_ptr,
    # sizes: reduced elements in all, per split program
    red_len, split_len,
    # layout (tritonml.core.layout.ReduceLayout.kernel_args): lengths, then strides in elements; the
    # tuples have one entry per outer / reduced dim, outermost first; red_weights are each reduced
    # dim's row-major index weight over the original reduced axes. Every input shares x's strides,
    # every output out's.
    inner_len, outer_sizes, red_sizes,
    x_inner_stride, x_outer_strides, x_red_strides, red_weights,
    out_inner_stride, out_outer_strides,
    # meta-parameters: the reduction, its state, the layout, the tile
    PREPARE: tl.constexpr, MERGE: tl.constexpr, ALONG: tl.constexpr, FINISH: tl.constexpr,
    LOAD_DTYPES: tl.constexpr, STATE_DTYPES: tl.constexpr, IDENTITIES: tl.constexpr,
    PTR_TUPLES: tl.constexpr,
    NEEDS_INDEX: tl.constexpr, RED_DIMS: tl.constexpr, WRITE_PARTIAL: tl.constexpr,
    FOLD_LAST: tl.constexpr, NEGATE_X: tl.constexpr, NEGATE_OUT: tl.constexpr,
    INDEX_64: tl.constexpr, BLOCK_AXIS: tl.constexpr, BLOCK_INNER: tl.constexpr,
    BLOCK_SPLIT: tl.constexpr,
):
    """Grid (chains, splits): chains = outer_len * cdiv(inner_len, BLOCK_INNER); program (c, s)
    folds reduced positions [s * split_len, (s + 1) * split_len) of chain c (split_len a multiple of
    BLOCK_AXIS, or >= red_len with one split).

    Writes FINISH(state) to the outputs ([BLOCK_INNER] each), or with WRITE_PARTIAL component i of
    the folded state to its workspace at [(c * splits + s) * BLOCK_INNER + j]; with FOLD_LAST as
    well, the chain's last program to finish folds those (BLOCK_SPLIT at a time) into the outputs.

    PTR_TUPLES: x_ptr, out_ptr and state_ptr are tuples (one pointer per input, output and state
    component; ``tritonml.reduce_with``); else single tensors, aux_ptr holding state component 1
    (the DirectML functions: torch's tracing of Triton kernels, ``wrap_triton``, sees only tensors
    passed as top-level arguments, so the ops torch.compile traces keep them so).

    LOAD_DTYPES[i]: the dtype input i is converted to on load (before PREPARE).
    NEGATE_X / NEGATE_OUT: the inputs / outputs are torch views with the negative bit set (their
    memory holds the negated values): the sign flips on load / before the store.
    """
    chain = tl.program_id(0)
    split = tl.program_id(1)
    if INDEX_64:
        chain = chain.to(tl.int64)  # workspace slots: chain * splits * BLOCK_INNER may pass int32
    x_offs, out_offs, inner_mask = chain_offsets(  # [1, BLOCK_INNER] each
        chain, inner_len, outer_sizes, x_outer_strides, out_outer_strides, x_inner_stride,
        out_inner_stride, INDEX_64, BLOCK_INNER)
    r_begin = split * split_len
    if INDEX_64:
        r_begin = r_begin.to(tl.int64)
    r_end = tl.minimum(r_begin + split_len, red_len)

    state = full_state([BLOCK_AXIS, BLOCK_INNER], IDENTITIES, STATE_DTYPES)  # per-lane running
    for r_start in range(r_begin, r_end, BLOCK_AXIS):
        r = r_start + tl.arange(0, BLOCK_AXIS)[:, None]  # [BLOCK_AXIS, 1]
        if INDEX_64:
            # Explicitly: the interpreter runs this loop with a plain Python int as r_start, so
            # r would otherwise be int32 there whatever r_begin's type.
            r = r.to(tl.int64)
        red_offs, index = _reduced_offsets(r, red_sizes, x_red_strides, red_weights, RED_DIMS,
                                           NEEDS_INDEX)
        mask = (r < r_end) & inner_mask                  # [BLOCK_AXIS, BLOCK_INNER]
        tiles = ()
        for i in tl.static_range(len(LOAD_DTYPES)):
            tile = tl.load(_nth(x_ptr, i, PTR_TUPLES) + x_offs + red_offs, mask=mask,
                           other=0).to(LOAD_DTYPES[i])
            if NEGATE_X:
                tile = -tile
            tiles = tiles + (tile,)
        # Masked lanes hold the identity, set after PREPARE in each component's state dtype (where
        # every identity is exact): whatever PREPARE makes of the 0 loaded there is dropped.
        tile_state = where_state(mask, PREPARE(tiles, index), IDENTITIES, STATE_DTYPES)
        state = cast_state(MERGE(state, tile_state), STATE_DTYPES)
    state = ALONG(state, MERGE)                          # [BLOCK_INNER] each

    lane = tl.arange(0, BLOCK_INNER)
    lane_mask = tl.reshape(inner_mask, [BLOCK_INNER])
    if WRITE_PARTIAL:
        splits = tl.num_programs(1)
        slot = (chain * splits + split) * BLOCK_INNER + lane
        for i in tl.static_range(len(STATE_DTYPES)):
            tl.store(_state_nth(state_ptr, aux_ptr, i, PTR_TUPLES) + slot,
                     state[i].to(STATE_DTYPES[i]), mask=lane_mask)
        if FOLD_LAST:
            # Every thread's partial store is ordered before the one thread's release (as the
            # look-back's publish); the acquire half makes the others' partials visible to the
            # last program, whose loads then read them from L2 (.cg).
            tl.debug_barrier()
            _fold_if_last(state_ptr, aux_ptr, out_ptr, arrivals_ptr, chain, splits, red_len,
                          inner_len, outer_sizes, out_inner_stride, out_outer_strides, MERGE,
                          ALONG, FINISH, STATE_DTYPES, IDENTITIES, PTR_TUPLES, NEGATE_OUT,
                          INDEX_64, BLOCK_SPLIT, BLOCK_INNER)
    else:
        _store_outputs(out_ptr, tl.reshape(out_offs, [BLOCK_INNER]), lane_mask,
                       FINISH(state, red_len), NEGATE_OUT, PTR_TUPLES)


@triton.jit
def _nth(ptrs, i: tl.constexpr, PTR_TUPLES: tl.constexpr):
    """Pointer ``i`` of a tuple, or the one pointer."""
    if PTR_TUPLES:
        return ptrs[i]
    else:
        return ptrs


@triton.jit
def _state_nth(state_ptr, aux_ptr, i: tl.constexpr, PTR_TUPLES: tl.constexpr):
    """The workspace of state component ``i``."""
    if PTR_TUPLES:
        return state_ptr[i]
    elif i == 0:
        return state_ptr
    else:
        return aux_ptr


@triton.jit
def _store_outputs(out_ptr, offsets, mask, results, NEGATE_OUT: tl.constexpr,
                   PTR_TUPLES: tl.constexpr):
    """Output i gets ``results[i]`` converted to its element type."""
    for i in tl.static_range(len(results)):
        result = results[i]
        if NEGATE_OUT:
            result = -result
        ptr = _nth(out_ptr, i, PTR_TUPLES)
        tl.store(ptr + offsets, result.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def reduce_partials_kernel(
    # pointers: the partial states written by reduce_kernel (WRITE_PARTIAL), the output(s); as
    # reduce_kernel's (tuples with PTR_TUPLES)
    state_ptr, aux_ptr, out_ptr,
    # sizes, and out's layout (as in reduce_kernel)
    splits, red_len, inner_len, outer_sizes, out_inner_stride, out_outer_strides,
    # meta-parameters (as reduce_kernel's)
    MERGE: tl.constexpr, ALONG: tl.constexpr, FINISH: tl.constexpr,
    STATE_DTYPES: tl.constexpr, IDENTITIES: tl.constexpr, PTR_TUPLES: tl.constexpr,
    NEGATE_OUT: tl.constexpr,
    INDEX_64: tl.constexpr, BLOCK_SPLIT: tl.constexpr, BLOCK_INNER: tl.constexpr,
):
    """Stage 2 of a two-launch "split": one program per chain folds its ``splits`` partial states
    and writes FINISH(state)."""
    chain = tl.program_id(0)
    if INDEX_64:
        chain = chain.to(tl.int64)
    _finish_chain(state_ptr, aux_ptr, out_ptr, chain, splits, red_len, inner_len, outer_sizes,
                  out_inner_stride, out_outer_strides, MERGE, ALONG, FINISH, STATE_DTYPES,
                  IDENTITIES, PTR_TUPLES, NEGATE_OUT, INDEX_64, BLOCK_SPLIT, BLOCK_INNER)


@triton.jit
def _finish_chain(state_ptr, aux_ptr, out_ptr, chain, splits, red_len, inner_len, outer_sizes,
                  out_inner_stride, out_outer_strides, MERGE: tl.constexpr, ALONG: tl.constexpr,
                  FINISH: tl.constexpr, STATE_DTYPES: tl.constexpr, IDENTITIES: tl.constexpr,
                  PTR_TUPLES: tl.constexpr, NEGATE_OUT: tl.constexpr, INDEX_64: tl.constexpr,
                  BLOCK_SPLIT: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """Fold chain ``chain``'s ``splits`` partial states, [BLOCK_SPLIT, BLOCK_INNER] at a time and
    always in the same order, and write FINISH(state) to its outputs."""
    _, out_offs, inner_mask = chain_offsets(  # [1, BLOCK_INNER] each; x's offsets are unused
        chain, inner_len, outer_sizes, out_outer_strides, out_outer_strides, out_inner_stride,
        out_inner_stride, INDEX_64, BLOCK_INNER)
    lane = tl.arange(0, BLOCK_INNER)
    lane_mask = tl.reshape(inner_mask, [BLOCK_INNER])
    state = full_state([BLOCK_SPLIT, BLOCK_INNER], IDENTITIES, STATE_DTYPES)
    for s_start in range(0, splits, BLOCK_SPLIT):
        s = s_start + tl.arange(0, BLOCK_SPLIT)[:, None]   # [BLOCK_SPLIT, 1]
        slot = (chain * splits + s) * BLOCK_INNER + lane[None, :]
        mask = (s < splits) & lane_mask[None, :]
        parts = ()
        for i in tl.static_range(len(STATE_DTYPES)):
            # .cg: other programs wrote these; read them from L2, never from a stale L1 line.
            parts = parts + (tl.load(_state_nth(state_ptr, aux_ptr, i, PTR_TUPLES) + slot,
                                     mask=mask, other=0, cache_modifier=".cg"),)
        state = cast_state(MERGE(state, where_state(mask, parts, IDENTITIES, STATE_DTYPES)),
                           STATE_DTYPES)
    _store_outputs(out_ptr, tl.reshape(out_offs, [BLOCK_INNER]), lane_mask,
                   FINISH(ALONG(state, MERGE), red_len), NEGATE_OUT, PTR_TUPLES)


@triton.jit(noinline=True)
def _fold_if_last(state_ptr, aux_ptr, out_ptr, arrivals_ptr, chain, splits, red_len, inner_len,
                  outer_sizes, out_inner_stride, out_outer_strides, MERGE: tl.constexpr,
                  ALONG: tl.constexpr, FINISH: tl.constexpr, STATE_DTYPES: tl.constexpr,
                  IDENTITIES: tl.constexpr, PTR_TUPLES: tl.constexpr, NEGATE_OUT: tl.constexpr,
                  INDEX_64: tl.constexpr, BLOCK_SPLIT: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """Count this program in on its chain; the last to arrive resets the counter and finishes the
    chain. Not inlined: kept apart from the streaming loop, ptxas schedules that loop's loads as
    in the two-launch kernel (docs/tuning.md, loads in flight)."""
    arrived = tl.atomic_add(arrivals_ptr + chain, 1, sem="acq_rel", scope="gpu")
    if arrived == splits - 1:
        tl.atomic_xchg(arrivals_ptr + chain, 0)   # every program of the chain has arrived
        _finish_chain(state_ptr, aux_ptr, out_ptr, chain, splits, red_len, inner_len,
                      outer_sizes, out_inner_stride, out_outer_strides, MERGE, ALONG, FINISH,
                      STATE_DTYPES, IDENTITIES, PTR_TUPLES, NEGATE_OUT, INDEX_64, BLOCK_SPLIT,
                      BLOCK_INNER)
