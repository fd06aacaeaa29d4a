"""The reduce kernels' regimes, forced with config=: rows, columns, the split in one launch and in
two; their launches, determinism, the float32 accuracy bound, 64-bit indexing, and the heuristics' choices."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import tritonml
from tritonml import runtime
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ReduceConfig
from tritonml.core.layout import ReduceLayout, reduce_layout
from tritonml.runtime import resident as _resident
from tritonml.launchers.reduce import ReduceFunction, launch_reduce, reduce_axes
from tritonml.records.builtin_reductions import RECORDS
from tritonml_autotune import spaces
from tritonml_autotune.heuristics import reduce_config

from benchmarks.reduce_oracle import (FUNCTIONS, assert_matches, bits, expected_tensor, make_input,
                                      supported)

# (shape, axes, config, kernels launched): tiles smaller than the data, so every regime walks
# several tiles per program, masks a partial last tile and (split) folds partials in several steps.
REGIMES = {
    "rows": ((6, 200), (1,), ReduceConfig("rows", 64, 4), ("reduce_kernel",)),
    "rows, axes apart": ((5, 6, 40), (0, 2), ReduceConfig("rows", 64, 4), ("reduce_kernel",)),
    "columns": ((200, 6), (0,), ReduceConfig("columns", 64, 4), ("reduce_kernel",)),
    "columns, strided": ((40, 5, 12), (0, 1), ReduceConfig("columns", 64, 8), ("reduce_kernel",)),
    # 1000 positions in 5 splits of 256: the fifth split is empty (identity partials). One launch:
    # the chain's last program folds the partial states.
    "split": ((1000,), None, ReduceConfig("split", 64, 1, splits=5, block_split=2),
              ("reduce_kernel",)),
    "split columns": ((600, 5), (0,), ReduceConfig("split", 32, 8, splits=5, block_split=2),
                      ("reduce_kernel",)),
    "split axes apart": ((8, 3, 25), (0, 2), ReduceConfig("split", 32, 4, splits=3, block_split=4),
                         ("reduce_kernel",)),
}
# The same splits folding in a second launch.
REGIMES.update({
    f"{name}, two launches": (shape, axes, dataclasses.replace(config, one_launch=False),
                              ("reduce_kernel", "reduce_partials_kernel"))
    for name, (shape, axes, config, _) in list(REGIMES.items()) if config.regime == "split"})


def _reduce(x, function, axes, config, **kwargs):
    return reduce_axes(x, axes, RECORDS[ReduceFunction[function]], config=config, **kwargs)


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.uint8],
                         ids=lambda d: str(d).replace("torch.", ""))
def test_regime_matches_oracle_for_every_function(regime, dtype):
    shape, axes, config, kernels = REGIMES[regime]
    for i, function in enumerate(FUNCTIONS):
        if not supported(function, dtype):
            continue
        x = make_input(shape, dtype, function, seed=i)
        if dtype == torch.float32 and i % 3 == 0:
            x = x.transpose(0, -1).contiguous().transpose(0, -1)  # same values, other strides
        with _trace.record() as rec:
            result = _reduce(x, function, axes, config)
        assert tuple(launch.name for launch in rec.launches) == kernels
        assert_matches(result, expected_tensor(x, function, axes),
                       f"{regime} {function} {dtype}")


@pytest.mark.parametrize("regime", ["rows", "columns", "split", "split columns",
                                    "split columns, two launches"])
def test_argmax_first_nan_and_first_tie_across_tiles_lanes_and_splits(regime):
    shape, axes, config, _ = REGIMES[regime]
    x = torch.zeros(shape)
    flat = x  # the reduced line of output 0
    for dim in reversed(range(x.dim())):
        if axes is not None and dim not in axes:
            flat = flat.select(dim, 0)
    n = flat.numel()
    flat[n - 5] = 3.0
    flat[n // 2] = 3.0           # the first maximum: lies in an earlier tile / split
    flat[n - 2] = -3.0
    flat[n // 3] = -3.0          # the first minimum
    for function, want in (("ARGMAX", n // 2), ("ARGMIN", n // 3)):
        result = _reduce(x, function, axes, config)
        assert result.flatten()[0].item() == want, (function, regime)
        assert_matches(result, expected_tensor(x, function, axes), f"{regime} {function}")
    flat[n - 1] = float("nan")
    flat[n // 4 + 1] = float("nan")
    for function in ("ARGMAX", "ARGMIN"):
        result = _reduce(x, function, axes, config)
        assert result.flatten()[0].item() == n // 4 + 1, (function, regime)
    for function in ("MAX", "MIN", "LOG_SUM_EXP", "SUM"):
        assert torch.isnan(_reduce(x, function, axes, config).flatten()[0]), (function, regime)


@pytest.mark.parametrize("regime", REGIMES)
def test_results_are_bitwise_identical_run_to_run(regime):
    shape, axes, config, _ = REGIMES[regime]
    for function in ("SUM", "LOG_SUM_EXP", "ARGMAX", "MULTIPLY", "L2"):
        x = make_input(shape, torch.float32, function, seed=5)
        first = _reduce(x, function, axes, config)
        second = _reduce(x, function, axes, config)
        assert bits(first) == bits(second), (regime, function)
    x = make_input((4096,), torch.float32)
    assert bits(tritonml.reduce(x, "sum")) == bits(tritonml.reduce(x, "sum"))


@pytest.mark.parametrize("regime", [name for name in REGIMES
                                    if REGIMES[name][2].regime == "split" and "two" not in name])
def test_one_launch_split_gives_the_two_launch_bits_and_leaves_its_counters_at_zero(regime):
    shape, axes, config, _ = REGIMES[regime]
    runtime.clear()
    for function in ("SUM", "ARGMIN", "LOG_SUM_EXP", "MAX"):
        x = make_input(shape, torch.float32, function, seed=11)
        one = _reduce(x, function, axes, config)
        two = _reduce(x, function, axes, dataclasses.replace(config, one_launch=False))
        assert bits(one) == bits(two), (regime, function)
        assert_matches(one, expected_tensor(x, function, axes), f"{regime} {function}")
    (arrivals, uses), = _resident._workspaces.values()
    assert uses == 4 and not arrivals.any()


def test_a_failed_one_launch_split_drops_its_counters(monkeypatch):
    """A kernel interrupted part way may leave counters above 0: the next call must not use them."""
    shape, axes, config, _ = REGIMES["split columns"]
    x = make_input(shape, torch.float32, "SUM", seed=3)
    want = _reduce(x, "SUM", axes, config)
    held = next(iter(_resident._workspaces.values()))[0]
    held[:] = 1   # as if a launch had stopped after its first program

    def fail(*args, **kwargs):
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(_trace, "launch_prepared", fail)
        with pytest.raises(KeyboardInterrupt):
            _reduce(x, "SUM", axes, dataclasses.replace(config, block_split=4))
    assert not _resident._workspaces
    assert bits(_reduce(x, "SUM", axes, config)) == bits(want)


def test_float32_sum_of_2_to_24_uniform_values_is_within_1e_minus_6():
    x = torch.rand(1 << 24, generator=torch.Generator().manual_seed(24))
    exact = np.sum(x.numpy().astype(np.float64))
    got = tritonml.reduce(x, "sum").item()
    assert abs(got - exact) / exact < 1e-6
    split = _reduce(x, "SUM", None, ReduceConfig("split", 1 << 18, 1, splits=8, block_split=8))
    assert abs(split.item() - exact) / exact < 1e-6


@pytest.mark.parametrize("function", ["SUM", "ARGMAX", "MIN", "LOG_SUM_EXP", "MULTIPLY"])
def test_64_bit_offsets_give_the_same_result(function, monkeypatch):
    """INDEX_64 is chosen for tensors past 2**31 elements; force it on a small one to run the
    64-bit address and index arithmetic (both regimes, both stages)."""
    x = make_input((5, 6, 70), torch.float32, function).transpose(1, 2)
    axes = (0, 1)
    combine = RECORDS[ReduceFunction[function]]
    for config in (ReduceConfig("rows", 32, 4), ReduceConfig("split", 32, 2, splits=3, block_split=2),
                   ReduceConfig("split", 32, 2, splits=3, block_split=2, one_launch=False)):
        want = _reduce(x, function, axes, config)
        out = torch.empty_like(want)
        layout = reduce_layout(tuple(x.shape), x.stride(), out.stride(), axes,
                               combine.returns_index)
        assert not layout.needs_index_64(config.block_inner, x.numel() + config.block_axis)
        with monkeypatch.context() as m, _trace.record() as rec:
            m.setattr(ReduceLayout, "needs_index_64", lambda *args: True)
            launch_reduce(x, out, layout, combine, config)
        assert all(launch.meta["INDEX_64"] for launch in rec.launches)
        assert bits(out) == bits(want)


def test_huge_inputs_switch_to_64_bit_indexing():
    x = torch.zeros(1).expand(2**31 + 7)
    with _trace.record(execute=False) as rec:
        tritonml.reduce(x, "argmin")
    assert rec.launches[0].meta["INDEX_64"]
    with _trace.record(execute=False) as rec:
        tritonml.reduce(torch.zeros(1).expand(1000), "argmin")
    assert not rec.launches[0].meta["INDEX_64"]


# ---------------------------------------------------------------------------------------------
# Heuristics
# ---------------------------------------------------------------------------------------------
def _layout_of(shape, axes, view=None, returns_index=False):
    x = torch.empty(shape, device="meta")  # strides without memory
    if view is not None:
        x = view(x)
    axes = tuple(range(len(shape))) if axes is None else axes
    out_shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape))
    out = torch.empty(out_shape, device="meta")
    return x, reduce_layout(tuple(x.shape), x.stride(), out.stride(), axes, returns_index)


HEURISTIC_CASES = {
    "rows": ((512, 4096), (1,), None, "rows"),
    "many short rows": ((1 << 16, 16), (1,), None, "rows"),
    "columns": ((256, 1 << 17), (0,), None, "columns"),
    "transposed rows are columns": ((1 << 17, 256), (1,), lambda t: t.t().contiguous().t(),
                                    "columns"),
    "few columns": ((4096, 512), (0,), None, "split"),
    "reduce all": ((1 << 22,), None, None, "split"),
    "one long row": ((2, 1 << 21), (1,), None, "split"),
    "few long columns": ((1 << 20, 4), (0,), None, "split"),
    "small": ((3, 5), (1,), None, "rows"),
}


@pytest.mark.parametrize("case", HEURISTIC_CASES)
def test_gpu_heuristic_picks_regime_and_valid_config(case):
    shape, axes, view, regime = HEURISTIC_CASES[case]
    _, layout = _layout_of(shape, axes, view)
    config = reduce_config(layout, "cuda")
    config.validate()
    assert config.regime == regime, config
    assert config.block_axis * config.block_inner <= spaces.GPU_REDUCE.tile_elements


@pytest.mark.parametrize("case", HEURISTIC_CASES)
def test_cpu_heuristic_never_splits_and_uses_large_tiles(case):
    shape, axes, view, _ = HEURISTIC_CASES[case]
    _, layout = _layout_of(shape, axes, view)
    config = reduce_config(layout, "cpu")
    config.validate()
    assert config.regime in ("rows", "columns") and config.splits == 1
    elements = min(layout.red_len * layout.inner_len, spaces.CPU_REDUCE.tile_elements)
    assert config.block_axis * config.block_inner >= elements // 2


@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.float32])
@pytest.mark.parametrize("case", ["reduce all", "one long row", "few long columns"])
def test_split_workspace_stays_within_the_bytes_budget(case, dtype):
    """The split's partial states (written, then read back) must keep the bytes moved within
    1.05 x (input + output): at most 16 bytes of state per output per split program."""
    shape, axes, view, _ = HEURISTIC_CASES[case]
    x, layout = _layout_of(shape, axes, view)
    config = reduce_config(layout, "cuda")
    assert config.regime == "split"
    element = torch.empty((), dtype=dtype).element_size()
    outputs = layout.outer_len * layout.inner_len
    ideal = layout.red_len * outputs * element + outputs * 8
    chains = layout.chains(config.block_inner)
    workspace = 2 * 16 * chains * config.splits * config.block_inner
    assert workspace <= 0.05 * ideal, (config, workspace, ideal)
