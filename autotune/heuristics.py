"""Per-shape config choice: a small, explainable heuristic (the full tuner is a later issue)."""
from __future__ import annotations

from tritonml_autotune.configs import MAX_REDUCE_SPLITS, ReduceConfig, ScanConfig

from . import cost, devices, spaces


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _gpu_programs_target(device) -> int:
    try:
        import torch
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        return 2 * sms
    except Exception:
        return spaces.GPU_MIN_PROGRAMS


def _choose_for(device_type: str, device):
    """(on a GPU?, programs that fill it): for the active target (``devices.active()``) when one
    is set, whatever the tensors' device; else for ``device_type``/``device`` as given."""
    target = devices.active()
    if target is not None:
        return True, 2 * target.sms
    if device_type == "cuda":
        return True, _gpu_programs_target(device)
    return False, None


def chunk_split(tiles_per_chain: int, chains: int, block_axis: int, tile_bytes: float,
                resident: int, l2_bytes: float, fill_programs: int,
                window_most: int) -> tuple[int, int]:
    """(chunk_tiles, window) of a chunked scan (``ScanConfig``) of ``block_axis``-long tiles.
    Chunks are

    - at most as long as keeps the chunks in flight, ``resident`` programs' (resident at once on
      the whole GPU) times a chunk's ``tile_bytes`` per tile, within ``spaces.CHUNKED_L2_SHARE``
      of ``l2_bytes``, so that a chunk's second read still finds it in L2 (no limit where the
      whole input fits);
    - within that, at least ``spaces.CHUNKED_MIN_CHUNK_AXIS`` positions long (the published
      states stay a small share of a chunk's bytes), and as long as chains x chunks >=
      ``fill_programs`` (two programs per SM: every SM busy, with slack) allows;

    and the window of ``spaces.CHUNKED_MIN_WINDOW`` to ``CHUNKED_MAX_WINDOW`` chunks (fewer where
    the chunks are fewer), at most ``window_most``, at least 2."""
    budget = spaces.CHUNKED_L2_SHARE * l2_bytes
    by_fill = max(1, chains * tiles_per_chain // max(1, fill_programs))
    shortest = -(-spaces.CHUNKED_MIN_CHUNK_AXIS // block_axis)
    if chains * tiles_per_chain * tile_bytes <= budget:
        by_l2 = tiles_per_chain
    else:
        by_l2 = max(1, int(budget // (resident * tile_bytes)))
    chunk_tiles = max(1, min(by_l2, max(shortest, by_fill), tiles_per_chain))
    chunks = -(-tiles_per_chain // chunk_tiles)
    window = min(spaces.CHUNKED_MAX_WINDOW, max(spaces.CHUNKED_MIN_WINDOW, next_pow2(chunks)),
                 window_most)
    return chunk_tiles, max(2, window)


def chunk_window_most(block_inner: int, acc_bytes: int) -> int:
    """The largest window whose [window, block_inner] accumulators (the published states a
    program scans) fit one scan tile's budget (``spaces.GPU_SCAN``), a power of two."""
    most = max(1, spaces.GPU_SCAN.tile_budget(acc_bytes) // block_inner)
    return 1 << (most.bit_length() - 1)


def widest_window(block_inner: int, acc_bytes: int) -> int:
    """The largest window the tuner gives a chunked tile of ``block_inner`` lanes
    (``chunk_window_most``, at most ``spaces.CHUNKED_MAX_WINDOW``): the one whose registers the
    compile facts and the compile tests measure, as the window's accumulators add to the tile's."""
    return min(spaces.CHUNKED_MAX_WINDOW, chunk_window_most(block_inner, acc_bytes))


def _chunked(layout, contiguous_tile: tuple, budget: int, acc_bytes: int, element_bytes: int,
             fill_programs: int) -> ScanConfig:
    """The heuristics' chunked config. Along a contiguous axis the one-pass tile; along a strided
    one ``spaces.CHUNKED_MIN_BLOCK_INNER`` lanes at most: the published states are one row of
    accumulators per chunk, so their share of a chunk's bytes falls with the chunk's length along
    the axis, which the L2 bounds by its lanes (the narrowest tile fits the longest chunks). The
    heuristics do not see the compiled registers: resident programs are what threads allow (the
    most, so the chunks in flight are not underestimated)."""
    axis_len, inner_len = max(layout.axis_len, 1), max(layout.inner_len, 1)
    if layout.axis_is_contiguous:
        block_axis, block_inner = contiguous_tile
    else:
        block_inner = min(next_pow2(inner_len), spaces.CHUNKED_MIN_BLOCK_INNER)
        block_axis = min(next_pow2(axis_len), max(1, budget // block_inner))
    warps = 8 if block_axis * block_inner > spaces.GPU_EIGHT_WARPS_ABOVE else 4
    device = devices.active() or devices.H100
    sms = max(1, fill_programs // 2)
    # enough programs that their share per SM does not bound the residents
    resident = sms * cost.programs_per_sm(device, sms * cost.MAX_PROGRAMS_PER_SM, warps, None)
    chains = layout.outer_len * -(-inner_len // block_inner)
    tile_bytes = block_axis * min(block_inner, inner_len) * element_bytes
    chunk_tiles, window = chunk_split(-(-axis_len // block_axis), chains, block_axis, tile_bytes,
                                      resident, device.l2_bytes, fill_programs,
                                      chunk_window_most(block_inner, acc_bytes))
    return ScanConfig("chunked", block_axis, block_inner, warps, chunk_tiles=chunk_tiles,
                      window=window)


def scan_config(layout, device_type: str, device=None, acc_bytes: int = 8,
                element_bytes: int | None = None) -> ScanConfig:
    """Pick regime and tile for a scan over ``layout`` (a ``tritonml.core.layout.AxisLayout``);
    ``acc_bytes`` is the size of the accumulator type (``tritonml.core.dtypes.ACC_DTYPE``),
    ``element_bytes`` an input element's (default: ``acc_bytes``, which is at least that).

    The tile covers the contiguous side first: along the axis when it is where the memory runs
    ("rows"), else along the inner dim ("columns"). On a GPU, fewer independent scans than two
    programs per SM along an axis of at least ``spaces.CHUNKED_MIN_TILES`` such tiles take
    "chunked": the axis is cut into chunks that fill the SMs, and no tile waits for the one
    before it (the cost model still weighs the look-back against it, ``candidates.py``)."""
    axis_len, inner_len = max(layout.axis_len, 1), max(layout.inner_len, 1)
    on_gpu, fill_programs = _choose_for(device_type, device)
    space = spaces.GPU_SCAN if on_gpu else spaces.CPU_SCAN
    budget = space.tile_budget(acc_bytes)
    if layout.axis_is_contiguous:
        regime = "rows"
        block_axis = min(next_pow2(axis_len), space.rows_max_block_axis, budget)
        block_inner = min(next_pow2(inner_len), max(1, budget // block_axis))
    else:
        regime = "columns"
        block_inner = min(next_pow2(inner_len), space.columns_max_block_inner)
        block_axis = min(next_pow2(axis_len), max(1, budget // block_inner))
    warps = 8 if block_axis * block_inner > spaces.GPU_EIGHT_WARPS_ABOVE else 4
    if on_gpu:
        chains = layout.outer_len * -(-inner_len // block_inner)
        if chains < fill_programs and axis_len >= spaces.CHUNKED_MIN_TILES * block_axis:
            return _chunked(layout, (block_axis, block_inner), budget, acc_bytes,
                            element_bytes or acc_bytes, fill_programs)
    return ScanConfig(regime, block_axis, block_inner, warps)


def _split_pays(elements: int, chains: int, split_programs: int, sms: int) -> bool:
    """Whether a split (two launches, ``split_programs`` in the first) beats one launch of
    ``chains`` programs in the time model (``model.py``), on the active target's bandwidth and
    launch overhead (an H100's without one). The dtype is not known here: the input is counted at
    ``spaces.REDUCE_ASSUMED_ELEMENT_BYTES`` an element."""
    device = devices.active() or devices.H100
    seconds = (elements * spaces.REDUCE_ASSUMED_ELEMENT_BYTES
               / device.copy_bandwidth_bytes_per_s)
    one = seconds / min(1.0, chains / sms) + device.launch_overhead_s
    split = seconds / min(1.0, split_programs / sms) + 2 * device.launch_overhead_s
    return split < one


def reduce_config(layout, device_type: str, device=None) -> ReduceConfig:
    """Pick regime and tile for a reduction over ``layout`` (a ``tritonml.core.layout.ReduceLayout``).

    The tile covers the contiguous side first: along the reduced positions when they are where the
    memory runs ("rows"), else along the inner kept dim ("columns"); the rest of the element budget
    goes to the other side. On a GPU, too few chains for the SMs and a long enough reduction switch
    to "split".
    """
    red_len, inner_len = max(layout.red_len, 1), max(layout.inner_len, 1)
    on_gpu, fill_programs = _choose_for(device_type, device)
    space = spaces.GPU_REDUCE if on_gpu else spaces.CPU_REDUCE
    budget = space.tile_elements
    if layout.reduction_is_contiguous:
        regime = "rows"
        block_axis = min(next_pow2(red_len), space.rows_max_block_axis)
        block_inner = min(next_pow2(inner_len), max(1, budget // block_axis))
    else:
        regime = "columns"
        block_inner = min(next_pow2(inner_len), space.columns_max_block_inner)
        block_axis = min(next_pow2(red_len), max(1, budget // block_inner))
    splits = 1
    if on_gpu:
        sms = max(1, fill_programs // 2)
        if regime == "columns":
            # More programs along the kept dim first: narrower tiles, each still whole lines.
            while (block_inner > spaces.REDUCE_COLUMNS_MIN_BLOCK_INNER
                   and layout.outer_len * -(-inner_len // block_inner) < fill_programs):
                block_inner //= 2
            block_axis = min(next_pow2(red_len), max(1, budget // block_inner))
        chains = layout.outer_len * -(-inner_len // block_inner)
        # Split the reduced positions over more programs (each keeping enough of them that the
        # partial states stay small) only when one launch leaves SMs idle and the time model says
        # the second launch's overhead is paid back.
        most = red_len // max(spaces.REDUCE_SPLIT_MIN_AXIS_PER_PROGRAM, block_axis)
        wanted = -(-fill_programs // chains)
        candidate = min(most, wanted, MAX_REDUCE_SPLITS)
        if chains < sms and candidate >= 2 and _split_pays(
                red_len * layout.outer_len * inner_len, chains, chains * candidate, sms):
            regime, splits = "split", candidate
    block_split = min(next_pow2(splits), max(1, budget // block_inner))
    warps = 8 if on_gpu and block_axis * block_inner >= spaces.GPU_REDUCE_EIGHT_WARPS_FROM else 4
    return ReduceConfig(regime, block_axis, block_inner, warps, splits, block_split)
