"""The numbers the heuristics use, as data, each with where it came from."""

# Elements per scan tile on a GPU. A float32 scan accumulates in float64, so 4096 elements are 32 KiB
# of registers per program: 64 registers per thread at 4 warps (the H100/A100 budget allows 255),
# leaving room for the scan's shuffles. Larger tiles cut loop overhead but lower occupancy.
GPU_SCAN_TILE_ELEMENTS = 4096
# Widest tile along the contiguous axis ("rows"): 2048 elements is 16 per thread at 4 warps,
# enough for 128-bit loads with several in flight per thread.
GPU_ROWS_MAX_BLOCK_AXIS = 2048
# Widest tile along a strided axis's contiguous inner dim ("columns"): 128 float32 = 512 bytes,
# four full 128-byte lines per axis step.
GPU_COLUMNS_MAX_BLOCK_INNER = 128
# Independent scans needed to fill a GPU without splitting the axis: two programs per SM on a
# 132-SM H100. Fewer than this, and a long axis, switch to the look-back regime.
GPU_MIN_PROGRAMS = 264
# The look-back regime only pays when each independent scan splits into at least this many tiles.
LOOKBACK_MIN_TILES = 4
# Warps: 8 for tiles above this many elements, else 4.
GPU_EIGHT_WARPS_ABOVE = 2048

# Triton's interpreter runs a program's tile ops as numpy calls (fast) and its programs and loop
# iterations one by one in Python (slow): on the CPU, tiles are as large as memory comfortably allows.
CPU_SCAN_TILE_ELEMENTS = 1 << 16
CPU_ROWS_MAX_BLOCK_AXIS = 1 << 14
CPU_COLUMNS_MAX_BLOCK_INNER = 1 << 12
