"""The segment kernel's config (``SegmentConfig``): tile shape and chunk length from the shape
alone, never from the segments' lengths (which live on the device), so a config costs no sync.

Programs split the axis by elements. On a GPU (or with a target set, ``devices.active()``) the
chunks are as long as leaves ``PROGRAMS_PER_SM`` programs per SM, and never shorter than one
tile: every SM busy, and each program's look-back (one vector load per WINDOW chunks) a small
share of its work. On the CPU (Triton's interpreter), where programs run one after another, one
chunk per chain: the fewest programs.
"""
from __future__ import annotations

from tritonml_autotune.configs import SegmentConfig

from .heuristics import _choose_for, next_pow2

# A chunk inside one segment folds its tiles several at a time (``FOLD_TILES``), so a chunk
# holding a boundary takes longer than the rest: short chunks keep the slowest one close to the
# average. A multiple of the programs an SM holds at once (two or three of the 1-D reductions,
# three or four of the 1-D scans, tritonml/bench/segment_model.py) leaves no partial last wave.
PROGRAMS_PER_SM = {"scan": 12, "reduce": 12}
# Lanes of one tile: 1024 (4 lanes a thread at 8 warps, 8 at the 1-D reductions' 4) for states
# of one 8-byte component, half as many for wider states; 2048 lanes at 8 warps spilled hundreds
# of bytes (tests/kernels/test_segment_compile.py has what these compile to). A tile's reads of the
# boundaries stay a small share of its bytes (tests/bench/test_segment_bytes.py).
TILE_LANES = 1024
# A chunk inside one segment folds 4 tiles a step (a reduction's chunk, a scan's tail; 4096 lanes,
# the chunked scan's tile), half as many for wider states: plain loads and merges, no boundaries,
# no scan.
FOLD_TILES = 4
NUM_WARPS = 8
# A reduction of one-lane-wide tiles (the segmented axis with one inner position, a 1-D x) runs
# 4 warps (8 lanes a thread) and lets ptxas take the registers it needs (``maxnreg`` 255): about
# 160 a thread where a program takes one tile, three programs of 1,024 lanes per SM without
# spills; 177 where it walks several (Triton 3.9's sm_90; 255 on 3.6), two, as 8 warps at about
# 110 hold; ptxas held 4 warps to 128 with spills, and a cap of 168 for three spills
# (tests/kernels/test_segment_compile.py, docs/segments.md).
REDUCE_1D_WARPS = 4
REDUCE_1D_MAXNREG = 255
MAX_BLOCK_INNER = 64
# A reduction of tiles several lanes wide (block_inner > 1: rows of a GNN's features, a strided
# axis) walks tiles of SUB_TILES slices: one step loads SUB_TILES x TILE_LANES lanes (16 KiB of
# float32) and finds their segments in one read of the boundaries, then scans one slice at a time
# (tritonml/kernels/segment.py). At 1,024 lanes a step such a reduction held two programs of
# 4 KiB per SM; a step is a dependent round trip (``TILE_STEP_SECONDS``), so bytes in flight per
# step set its speed. The one-lane 1-D tiles keep whole tiles: their per-position vectors (the
# segment of each lane) are as large as the tile, and slicing them costs what it saves.
SUB_TILES = 4
# Slices, and the 4 warps with ptxas free to take 255 registers they run at (two programs per
# SM, as 8 warps at 116 held), for states of up to 8 bytes (SUM, MAX, MIN, MULTIPLY and AVERAGE
# of every dtype, a float32 LOG_SUM_EXP): on sm_90 they compiled to 137 to 207 registers on
# Triton 3.9 and 165 to 232 on 3.6, no spills. A value and an index (ARGMAX, ARGMIN) took 254
# where a program walks several tiles and spilled 384 bytes where it walks one, so wider states
# keep whole tiles at 8 warps.
SUB_TILE_STATE_BYTES = 8
# A look-back window holds at most 256 chunks (a quarter of a 1-D tile's lanes): with windows of
# 1,024 the 1-D forward scans compiled to 74 registers a thread on sm_90 (three programs of 8
# warps per SM), with 256 to 58-64 (four); a segment over every chunk of a 1-D x (at most
# PROGRAMS_PER_SM per SM) takes one round trip per 256 of them.
MAX_WINDOW_CHUNKS = 256


def segment_config(axis_len: int, inner_len: int, outer_len: int, state_bytes: int,
                   device_type: str, device=None, *, scan: bool = False,
                   slices: bool = True) -> SegmentConfig:
    """The config of a segmented scan (``scan``) or reduction along an axis of ``axis_len``
    positions with ``inner_len`` inner positions and ``outer_len`` outer positions, for a state
    of ``state_bytes`` per element; ``slices``: a reduction's wide tiles may go in slices (not
    where the segments come from ids, whose tiles are whole)."""
    block_inner = min(next_pow2(inner_len), MAX_BLOCK_INNER)
    chains = outer_len * -(-inner_len // block_inner)
    lanes = TILE_LANES if state_bytes < 16 else TILE_LANES // 2
    block_axis = max(16, min(lanes // block_inner, next_pow2(max(axis_len, 1))))
    sub_tiles = 1
    if not scan and slices and block_inner > 1 and state_bytes <= SUB_TILE_STATE_BYTES:
        sub_tiles = max(1, min(SUB_TILES, next_pow2(max(axis_len, 1)) // block_axis))
        block_axis *= sub_tiles
    tiles = max(1, -(-axis_len // block_axis))
    on_gpu, fill = _choose_for(device_type, device)
    if on_gpu:
        programs = max(1, fill // 2 * PROGRAMS_PER_SM["scan" if scan else "reduce"])  # fill: 2/SM
        chunk_tiles = max(1, -(-chains * tiles // programs))
    else:
        chunk_tiles = tiles
    chunks = -(-tiles // chunk_tiles)
    # a look-back window holds no more lanes than a tile: scanning a [64, 64] window of states
    # took the many-rows tiles to 146-255 registers a thread (docs/segments.md)
    window = min(MAX_WINDOW_CHUNKS, max(16, next_pow2(chunks)), max(2, lanes // block_inner))
    # the 1-D reductions and the sliced ones: 4 warps, ptxas free to take what it needs
    few_warps = not scan and (block_inner == 1 or sub_tiles > 1)
    return SegmentConfig(block_axis, block_inner, chunk_tiles, window,
                         boundary_block=min(block_axis // sub_tiles, 1024),
                         num_warps=REDUCE_1D_WARPS if few_warps else NUM_WARPS,
                         fold_tiles=max(1, (FOLD_TILES if state_bytes < 16 else FOLD_TILES // 2)
                                        // sub_tiles),
                         maxnreg=REDUCE_1D_MAXNREG if few_warps else None,
                         sub_tiles=sub_tiles)
