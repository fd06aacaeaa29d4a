"""The tuner's planning on plain layouts, no kernel run and nothing timed: the heuristics' configs
(``heuristics.scan_config`` / ``reduce_config``) and the plans ``select`` builds for the CPU and for
each GPU target, from layouts that are plain records of the numbers the tuner reads (it imports
nothing from tritonml). Each property is checked against numbers worked out here: tiles within
the target's element budget and no larger than the next power of two of what they cover, the
contiguous side tiled first, work split only on a GPU that one program per chain leaves idle, and
every program still given work.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from hypothesis import given, settings, strategies as st

from tritonml.core.layout import axis_layout, reduce_layout
from tritonml_autotune import devices, heuristics, select, spaces
from tritonml_autotune.configs import MAX_REDUCE_SPLITS, MAX_SCAN_WINDOW

FAST = settings(max_examples=120, deadline=None)
TARGETS = (None, "H100", "A100")   # None: no target, the interpreter's configs


@dataclass(frozen=True)
class ScanLayout:
    """What the tuner reads of a scan's canonical layout (``tritonml.core.layout.AxisLayout``)."""
    axis_len: int
    inner_len: int
    outer_len: int
    axis_is_contiguous: bool


@dataclass(frozen=True)
class ReduceLayout:
    """What the tuner reads of a reduction's (``tritonml.core.layout.ReduceLayout``)."""
    red_len: int
    inner_len: int
    outer_len: int
    reduction_is_contiguous: bool


def covering_pow2(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1)."""
    p = 1
    while p < n:
        p *= 2
    return p


lengths = st.one_of(st.integers(0, 70), st.integers(1, 1 << 26),
                    st.sampled_from((1 << 20, (1 << 24) + 1, 1 << 26)))
scan_layouts = st.builds(ScanLayout, lengths, lengths, st.integers(1, 5000), st.booleans())
reduce_layouts = st.builds(ReduceLayout, lengths, lengths, st.integers(1, 5000), st.booleans())
acc_bytes = st.sampled_from((1, 2, 4, 8, 16))


def fill_programs(target) -> int | None:
    """Programs that fill the target: two per SM (``spaces.GPU_MIN_PROGRAMS`` on an H100)."""
    return None if target is None else 2 * devices.lookup(target, "target").sms


@FAST
@given(scan_layouts, st.sampled_from(TARGETS), acc_bytes)
def test_a_scan_tile_fits_the_budget_and_covers_the_contiguous_side_first(layout, target, acc):
    with devices.targeting(target):
        config = heuristics.scan_config(layout, "cpu", None, acc)
    config.validate()   # what a caller passing this config back gets (the launchers check)
    space = spaces.CPU_SCAN if target is None else spaces.GPU_SCAN
    assert config.block_axis * config.block_inner <= space.tile_budget(acc)
    assert config.block_axis <= covering_pow2(layout.axis_len)
    assert config.block_inner <= covering_pow2(layout.inner_len)
    if config.regime != "chunked":
        assert config.regime == ("rows" if layout.axis_is_contiguous else "columns")
        return
    # Chunked: only on a GPU whose SMs the independent scans leave idle (along a strided axis
    # the chunked tile may be narrower than the one-pass tile they were counted with).
    assert target is not None and layout.outer_len < fill_programs(target)
    if layout.axis_is_contiguous:
        chains = layout.outer_len * -(-max(layout.inner_len, 1) // config.block_inner)
        assert chains < fill_programs(target)
        assert layout.axis_len >= spaces.CHUNKED_MIN_TILES * config.block_axis
    tiles = -(-layout.axis_len // config.block_axis)
    assert 1 <= config.chunk_tiles <= tiles
    assert 2 <= config.window <= MAX_SCAN_WINDOW
    # the window's published states are scanned as one tile: within the budget (2 at least)
    assert config.window == 2 or config.window * config.block_inner <= space.tile_budget(acc)


@FAST
@given(reduce_layouts, st.sampled_from(TARGETS))
def test_a_reduce_tile_fits_the_budget_and_splits_only_an_idle_gpu(layout, target):
    with devices.targeting(target):
        config = heuristics.reduce_config(layout, "cpu")
    config.validate()
    space = spaces.CPU_REDUCE if target is None else spaces.GPU_REDUCE
    assert config.block_axis * config.block_inner <= space.tile_elements
    assert config.block_axis <= covering_pow2(layout.red_len)
    assert config.block_inner <= covering_pow2(layout.inner_len)
    assert config.regime in ("rows" if layout.reduction_is_contiguous else "columns", "split")
    if config.regime != "split":
        assert config.splits == 1
        return
    chains = layout.outer_len * -(-max(layout.inner_len, 1) // config.block_inner)
    assert target is not None and chains < fill_programs(target) // 2   # fewer chains than SMs
    assert 2 <= config.splits <= MAX_REDUCE_SPLITS
    # every split program folds at least a tile, and enough positions to keep the partials small
    per_program = max(spaces.REDUCE_SPLIT_MIN_AXIS_PER_PROGRAM, config.block_axis)
    assert config.splits * per_program <= layout.red_len
    assert config.block_split >= 1 and config.block_split * config.block_inner <= max(
        space.tile_elements, config.block_inner)


@FAST
@given(scan_layouts, st.sampled_from(TARGETS[1:]),
       st.sampled_from((torch.float16, torch.float32, torch.int64)))
def test_a_gpu_scan_plan_offers_the_heuristics_first_and_only_valid_distinct_configs(
        layout, target, dtype):
    with devices.targeting(target):
        plan = select.plan_scan(layout, dtype, None, "sum")
    assert plan.gpu.name == target
    assert plan.candidates[0] == plan.heuristic
    assert len({tuple(sorted(c.items())) for c in plan.candidates}) == len(plan.candidates)
    for candidate in plan.candidates:
        plan.config(candidate).validate()
    problem = plan.problem
    assert (problem.axis_len, problem.inner_len, problem.outer_len) == (
        max(layout.axis_len, 1), max(layout.inner_len, 1), layout.outer_len)
    assert problem.element_bytes == dtype.itemsize
    assert problem.contiguous == layout.axis_is_contiguous


@FAST
@given(reduce_layouts, st.sampled_from(TARGETS[1:]),
       st.sampled_from((("SUM", 8, 4), ("ARGMAX", 8, 8), ("LOG_SUM_EXP", 8, 4))))
def test_a_gpu_reduce_plan_offers_the_heuristics_first_and_only_valid_distinct_configs(
        layout, target, function_bytes):
    function, partial_bytes, out_bytes = function_bytes   # a float32 reduction's
    with devices.targeting(target):
        plan = select.plan_reduce(layout, torch.float32, None, function,
                                  partial_bytes=partial_bytes, out_bytes=out_bytes)
    assert plan.candidates[0] == plan.heuristic
    assert len({tuple(sorted(c.items())) for c in plan.candidates}) == len(plan.candidates)
    for candidate in plan.candidates:
        plan.config(candidate).validate()
    assert (plan.problem.state_bytes, plan.problem.out_bytes) == (partial_bytes, out_bytes)


def test_without_a_target_or_a_gpu_the_plan_is_the_heuristics_alone():
    layout = ScanLayout(1 << 20, 1, 1, True)
    with devices.targeting(None):   # whatever TRITONML_TARGET says
        plan = select.plan_scan(layout, torch.float32, None, "sum")
        assert plan.gpu is None and plan.candidates == ()
        assert select.decide(plan).config == plan.config(plan.heuristic)


# The problem a plan states, from real layouts: as many elements and outputs as the tensor has.
@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple), st.data())
def test_a_plan_counts_the_elements_and_outputs_of_the_tensor(shape, data):
    strides = tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))
    axis = data.draw(st.integers(0, len(shape) - 1))
    with devices.targeting("H100"):
        scan = select.plan_scan(axis_layout(shape, strides, strides, axis), torch.float32, None,
                                "sum")
        axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
        reduce = select.plan_reduce(reduce_layout(shape, strides, strides, axes, False),
                                    torch.float32, None, "SUM", partial_bytes=8, out_bytes=4)
    assert scan.problem.elements == scan.problem.outputs == math.prod(shape)
    assert reduce.problem.elements == math.prod(shape)
    assert reduce.problem.outputs == math.prod(s for d, s in enumerate(shape) if d not in axes)
    assert reduce.problem.ideal_bytes == 4 * (math.prod(shape) + reduce.problem.outputs)
