"""The numbers the heuristics use, as data, each with where it came from.

The tile limits differ by target: ``GPU_SCAN``/``CPU_SCAN`` and ``GPU_REDUCE``/``CPU_REDUCE`` hold
them, one instance per target (CPU: Triton's interpreter). The module constants are GPU-only.
"""
from __future__ import annotations

from dataclasses import dataclass

from .devices import H100


@dataclass(frozen=True)
class ScanSpace:
    """A scan's tile limits on one target. The element budget of a tile is ``tile_bytes`` over the
    accumulator size where bytes bound it, else ``tile_elements``."""
    tile_bytes: int | None        # accumulator bytes per tile, or None
    tile_elements: int | None     # elements per tile whatever the accumulator, or None
    rows_max_block_axis: int      # widest tile along the contiguous axis ("rows")
    columns_max_block_inner: int  # widest tile along a strided axis's contiguous inner dim

    def tile_budget(self, acc_bytes: int) -> int:
        if self.tile_bytes is None:
            return self.tile_elements
        # a power of two, as tiles are (tl.arange): a state of 12 or 24 bytes (a tuple state,
        # e.g. (float32, int64)) would otherwise get 8192 // 12 = 682
        most = max(1, self.tile_bytes // acc_bytes)
        return 1 << (most.bit_length() - 1)


@dataclass(frozen=True)
class ReduceSpace:
    """A reduction's tile limits on one target."""
    tile_elements: int            # elements per tile
    rows_max_block_axis: int      # longest tile along a contiguous reduced axis ("rows")
    columns_max_block_inner: int  # widest tile along a contiguous kept dim ("columns")


GPU_SCAN = ScanSpace(
    # Accumulator bytes per scan tile on a GPU: 1024 elements of a float64/int64 accumulator, 2048
    # of a float32 one. Read off the compiled code (tritonml/bench/gpu_compile.py, sm_80/sm_90,
    # 4 warps): 8 KiB tiles take 50-170 registers per thread with no spills; 16 KiB tiles (4096
    # float32 summed in float64) reached 255 registers with spills in the look-back kernel and took
    # ptxas minutes.
    tile_bytes=8192, tile_elements=None,
    # Widest tile along the contiguous axis ("rows"): 2048 elements is 16 per thread at 4 warps,
    # enough for 128-bit loads with several in flight per thread.
    rows_max_block_axis=2048,
    # Widest tile along a strided axis's contiguous inner dim ("columns"): 128 float32 = 512 bytes,
    # four full 128-byte lines per axis step.
    columns_max_block_inner=128,
)
# Triton's interpreter runs a program's tile ops as numpy calls (fast) and its programs and loop
# iterations one by one in Python (slow): on the CPU, tiles are as large as memory comfortably allows.
CPU_SCAN = ScanSpace(tile_bytes=None, tile_elements=1 << 16,
                     rows_max_block_axis=1 << 14, columns_max_block_inner=1 << 12)

# Independent scans needed to fill a GPU without splitting the axis: two programs per SM, counted
# on an H100 when there is neither a target nor a CUDA device to ask. Fewer than this, and a long
# axis, switch to the chunked regime (the look-back's before; the tuner still weighs both).
GPU_MIN_PROGRAMS = 2 * H100.sms
# The look-back regime only pays when each independent scan splits into at least this many tiles.
LOOKBACK_MIN_TILES = 4
# Rows per look-back tile at least: a tile publishes its aggregate and prefix and reads a prefix
# back (3 accumulator rows of block_inner values); 128 rows keep that under 2.5% of the tile's
# bytes for float32 (3 * 8 B / (128 * 2 * 4 B)) and under 10% even for int8.
LOOKBACK_MIN_BLOCK_AXIS = 128
# A taller look-back tile the tuner also considers along a contiguous axis (one lane wide, 8 warps):
# on an H100 one row of 2**26 float32 took 1.48 ms in 4096-element tiles against 5.51 ms in the
# 1024-element tiles the element budget allows, since the look-back's time is bound by its chain
# of tiles (cost.LOOKBACK_TILE_SECONDS). Compiled for sm_80/sm_90 without spills in every dtype.
LOOKBACK_TALL_BLOCK_AXIS = 4096
# Warps: 8 for tiles above this many elements, else 4.
GPU_EIGHT_WARPS_ABOVE = 2048

# The chunked regime (tritonml/kernels/scan_chunked.py, scan_chunked_kernel: reduce, then scan,
# each chunk of tiles read twice). Few independent scans (fewer than two programs per SM) along an axis of at
# least this many of the one-pass tile take it on a GPU, as they took the look-back before.
CHUNKED_MIN_TILES = 4
# The share of the L2 cache the chunks in flight (resident programs x a chunk's input bytes) may
# fill for their second read to hit there. The rest is left to what streams through L2 beside
# them: the outputs written, other chunks' first reads, the workspaces. An assumption (half),
# not measured; the cost model charges the share of the second read that does not fit to DRAM.
CHUNKED_L2_SHARE = 0.5
# Positions along the axis a chunk spans at least, where the L2 allows: a chunk publishes one row
# of accumulators (and its successors read it back from L2), under 1.6% of a float32 chunk's
# input bytes at 128 rows (8 B / (128 x 4 B)), as the look-back's tiles (LOOKBACK_MIN_BLOCK_AXIS).
CHUNKED_MIN_CHUNK_AXIS = 128
# Chunks per look-back group (ScanConfig.window): one vector load polls a group's status words and
# one reads its published values, so a group is one round trip of the only serial chain. At most
# 256 (a 2**26 row in 4096-element chunks is 64 groups, a few us against its 179 us of bytes on
# an H100), at least 64 where the chunks allow (fewer distinct WINDOWs, fewer compiled kernels),
# and the [window, block_inner] accumulators a program scans stay within one tile's budget (a
# strided axis's 128-lane tile gets windows of 8).
CHUNKED_MAX_WINDOW = 256
CHUNKED_MIN_WINDOW = 64
# Shortest chunked tile along a contiguous axis the candidates try to reach two programs per SM:
# 4 elements a thread at 4 warps (one 128-bit float32 load), the smallest tile that
# benchmarks/compile_facts.py measures.
CHUNKED_MIN_BLOCK_AXIS = 512
# Narrowest chunked tile along a strided axis's inner dim the candidates try: 32 lanes are a full
# 128-byte line of float32 and whole sectors of any dtype (as REDUCE_COLUMNS_MIN_BLOCK_INNER).
CHUNKED_MIN_BLOCK_INNER = 32

# ---------------------------------------------------------------------------------------------
# Reduce
# ---------------------------------------------------------------------------------------------
GPU_REDUCE = ReduceSpace(
    # Elements per reduce tile on a GPU. The running per-lane states are at most 16 bytes an element
    # (ARGMAX: value + index; a float32 SUM accumulates in float64): 4096 elements over 8 warps are
    # 16 elements and at most 64 state registers per thread, with four 128-bit float32 loads in
    # flight.
    tile_elements=4096,
    # Longest tile along a contiguous reduced axis ("rows"): the whole tile, so a long row is read
    # in 16 KiB float32 steps; short rows stack BLOCK_INNER of them per tile instead.
    rows_max_block_axis=4096,
    # Widest tile along a contiguous kept dim ("columns"): 256 float32 = 1 KiB, eight full 128-byte
    # lines per reduced step; the remaining 16 rows of the tile give each thread independent loads.
    columns_max_block_inner=256,
)
# Triton's interpreter (CPU): measured on a 2-core machine with triton 3.9, a tile load costs about
# 0.2 us an element and each loop iteration about 1.5 ms and each program about 10 ms on top, so
# tiles of 2**18 elements keep the fixed costs under 5% of a large reduction. The interpreter never
# gains from "split" (programs run one after another), so the heuristic never picks it on the CPU;
# tests force it with config=.
CPU_REDUCE = ReduceSpace(tile_elements=1 << 18, rows_max_block_axis=1 << 18,
                         columns_max_block_inner=1 << 16)

# Filling the GPU (docs/tuning.md, "Reductions that fill the GPU"). "columns" first narrows its tile
# along the kept dim, down to this many lanes, while the chains (outer x inner blocks) are fewer
# than 2 programs per SM: 32 lanes are a full 128-byte line of float32 and whole 32-byte sectors of
# any dtype, so narrower tiles cost no extra bytes; the rest of the element budget makes the tile
# taller.
REDUCE_COLUMNS_MIN_BLOCK_INNER = 32
# "split": taken only when one launch cannot give every SM a program (chains < SMs) and the time
# model says the second launch pays for itself; it then aims at 2 programs per SM. The heuristic does not see the dtype, so the partial states are bounded
# for the worst case: at most 16 bytes of state per output per split program (ARGMAX of float64:
# value + int64 index), written once and read back once, against at least 1 byte per reduced
# position (int8). Each split program folds at least this many reduced positions per output, so
# that traffic is <= 2 x 16 / 1024 = 3.1% of the input (float32 SUM: 2 x 8 / 4096 = 0.4%), inside
# the 1.05x bound on bytes moved.
REDUCE_SPLIT_MIN_AXIS_PER_PROGRAM = 1024
# The candidates (autotune/candidates.py) see the dtype, so their split programs fold as few
# reduced positions as keep the partial states (written once, read back once) within this share of
# the input's bytes: float32 SUM (8-byte state) 2 x 8 / (4 x 200) = 2%, int8 SUM 2 x 8 / 800.
REDUCE_SPLIT_MAX_PARTIAL_SHARE = 0.02
# Bytes an input element is counted at when the heuristic weighs a split's second launch against
# one launch that leaves SMs idle (it does not see the dtype): float32's, the common case.
REDUCE_ASSUMED_ELEMENT_BYTES = 4
# Warps: 8 for tiles of at least this many elements, else 4 (a 1024-element tile is 8 per thread
# at 4 warps).
GPU_REDUCE_EIGHT_WARPS_FROM = 4096
