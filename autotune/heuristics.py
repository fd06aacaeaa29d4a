"""Per-shape config choice: a small, explainable heuristic (the full tuner is a later issue)."""
from __future__ import annotations

from tritonml._config import MAX_REDUCE_SPLITS, ReduceConfig, ScanConfig

from . import devices, spaces


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


def scan_config(layout, device_type: str, device=None, acc_bytes: int = 8) -> ScanConfig:
    """Pick regime and tile for a scan over ``layout`` (a ``tritonml._layout.AxisLayout``);
    ``acc_bytes`` is the size of the accumulator type (``tritonml._dtypes.ACC_DTYPE``)."""
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
    if on_gpu:
        chains = layout.outer_len * -(-inner_len // block_inner)
        # Look-back tiles are tall: each tile publishes and reads back 3 accumulator rows, which
        # must stay a few percent of the tile's own traffic.
        lookback_axis = min(next_pow2(axis_len),
                            max(spaces.LOOKBACK_MIN_BLOCK_AXIS, budget // block_inner))
        lookback_inner = max(1, min(block_inner, budget // lookback_axis))
        if (chains < fill_programs
                and axis_len >= spaces.LOOKBACK_MIN_TILES * lookback_axis):
            regime, block_axis, block_inner = "lookback", lookback_axis, lookback_inner
    warps = 8 if block_axis * block_inner > spaces.GPU_EIGHT_WARPS_ABOVE else 4
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
    """Pick regime and tile for a reduction over ``layout`` (a ``tritonml.ops.reduce.ReduceLayout``).

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
