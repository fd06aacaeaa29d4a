"""Reductions chosen for a GPU keep its SMs busy: checked on recorded launches, with the time model.

Under ``tritonml.tuning.target(...)`` the launches a GPU would run are recorded without running
(``tritonml.runtime.trace.record(execute=False)``). For each: at most 2 launches; the launch that
reads the input has at least one program per SM when the input has >= 2**20 elements; bytes moved
(counted from the config, see ``analytic_bytes``) <= 1.05 x (input + output); modeled time
(``autotune/model.py``) <= 1.25 x one ideal launch. The byte count is checked against the
interpreter's count (``tritonml/bench/memtrace.py``) on small shapes, and the configs the heuristic
picks for the large shapes are run, forced on smaller shapes of the same regime, against the numpy
oracle.
"""
from __future__ import annotations

import math

import pytest
import torch

import tritonml  # first: chooses interpreted Triton on a machine without CUDA
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ReduceConfig
from tritonml.core.dtypes import TORCH_DTYPE
from tritonml.launchers.reduce import ReduceFunction, reduce_axes
from tritonml.records.builtin_reductions import RECORDS
from tritonml_autotune import devices, model

from tritonml.bench.memtrace import trace_memory
from benchmarks.reduce_oracle import assert_matches, expected_tensor

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="runs in Triton's interpreter")

TIME_BOUND, BYTES_BOUND = 1.25, 1.05
F32, F16, I8 = torch.float32, torch.float16, torch.int8

# (shape, axes, function, dtype, keepdims)
CASES = {
    "sum 4096x4096 axis 0": ((4096, 4096), (0,), "SUM", F32, True),
    "argmax 4096x4096 axis 0": ((4096, 4096), (0,), "ARGMAX", F32, True),
    "sum 4096x512 axis 0": ((4096, 512), (0,), "SUM", F32, True),
    "max 4096x512 axis 0": ((4096, 512), (0,), "MAX", F32, True),
    "sum 16x64x16x64 axes 0,2": ((16, 64, 16, 64), (0, 2), "SUM", F32, True),
    "sum int8 4096x4096 axis 0": ((4096, 4096), (0,), "SUM", I8, True),
    "max float16 4096x4096 axis 0": ((4096, 4096), (0,), "MAX", F16, False),
    "argmin float16 8192x1024 axis 0": ((8192, 1024), (0,), "ARGMIN", F16, False),
    "sum 64x2**17 axis 0": ((64, 1 << 17), (0,), "SUM", F32, True),
    "sum 512x4096 axis 1": ((512, 4096), (1,), "SUM", F32, False),
}
TARGETS = (devices.H100, devices.A100)

# Known gaps: none (every case models at 1.00 x on both targets; splits fold in one launch).
KNOWN_TIME_GAPS: dict = {}
KNOWN_PROGRAM_GAPS: dict = {}


def _size(dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def state_bytes(function: str, dtype) -> int:
    """Bytes of one partial state (value, plus the index or running sum where there is one)."""
    _, state, _ = RECORDS[ReduceFunction[function]].kernel_state((dtype,), False)
    return sum(_size(TORCH_DTYPE[d]) for d in state)


def analytic_bytes(x, out, function, launches) -> list:
    """(bytes, programs) per launch: the first reads x once; a split writes one partial state per
    output per split, which the fold (the chain's last program, or a second launch) reads back
    before writing out."""
    programs = [math.prod(launch.grid) for launch in launches]
    x_bytes, out_bytes = x.numel() * x.element_size(), out.numel() * out.element_size()
    if not launches[0].meta["WRITE_PARTIAL"]:
        return [(x_bytes + out_bytes, programs[0])]
    partials = state_bytes(function, x.dtype) * out.numel() * launches[0].grid[1]
    if len(launches) == 1:   # the chains' last programs read the partial states back
        return [(x_bytes + 2 * partials + out_bytes, programs[0])]
    return [(x_bytes + partials, programs[0]), (partials + out_bytes, programs[1])]


def chosen_launches(case, device):
    shape, axes, function, dtype, keepdims = case
    x = torch.empty(shape, dtype=dtype)  # never read: the launches are only recorded
    with tritonml.tuning.target(device.name):
        with _trace.record(execute=False) as rec:
            out = reduce_axes(x, axes, RECORDS[ReduceFunction[function]], keepdims=keepdims)
    return x, out, rec.launches


@pytest.mark.parametrize("device", TARGETS, ids=lambda d: d.name)
@pytest.mark.parametrize("case", CASES)
def test_reductions_fill_the_gpu_within_the_time_and_bytes_bounds(case, device):
    x, out, launches = chosen_launches(CASES[case], device)
    function = CASES[case][2]
    counted = analytic_bytes(x, out, function, launches)
    ideal = x.numel() * x.element_size() + out.numel() * out.element_size()
    assert len(launches) <= 2, [launch.grid for launch in launches]
    if x.numel() >= 1 << 20:
        min_programs = KNOWN_PROGRAM_GAPS.get((case, device.name), device.sms)
        assert counted[0][1] >= min_programs, [launch.grid for launch in launches]
    assert sum(b for b, _ in counted) <= BYTES_BOUND * ideal, counted
    ratio = model.modeled_seconds(device, counted) / model.ideal_seconds(device, ideal)
    bound = KNOWN_TIME_GAPS.get((case, device.name), TIME_BOUND)
    assert ratio <= bound, (ratio, [launch.grid for launch in launches])


def test_one_launch_where_the_chains_already_fill_the_gpu():
    _, _, launches = chosen_launches(CASES["sum 512x4096 axis 1"], devices.H100)
    assert [launch.grid for launch in launches] == [(512, 1)]


# ---------------------------------------------------------------------------------------------
# The analytic count against the interpreter's
# ---------------------------------------------------------------------------------------------
MEASURED = {
    "columns, narrow": ((256, 96), (0,), "SUM", F32, ReduceConfig("columns", 128, 32, 8)),
    "split": ((2048, 64), (0,), "SUM", F32, ReduceConfig("split", 128, 32, 8, 4, 4)),
    "split argmax float16": ((2048, 64), (0,), "ARGMAX", F16,
                             ReduceConfig("split", 128, 32, 8, 4, 4)),
}


@pytest.mark.parametrize("case", MEASURED)
def test_analytic_bytes_match_the_interpreter(case):
    shape, axes, function, dtype, config = MEASURED[case]
    x = torch.randn(shape).to(dtype)
    combine = RECORDS[ReduceFunction[function]]
    with trace_memory({"input": x}) as trace:
        with _trace.record() as rec:
            out = reduce_axes(x, axes, combine, config=config)
    # A one-launch split's arrival counters are synchronization, not data: at most two atomics
    # (its arrival, and the last program's reset) per program.
    synchronization = sum(kernel.atomic_bytes for kernel in trace.kernels)
    assert trace.atomic_ops <= 2 * sum(math.prod(launch.grid) for launch in rec.launches)
    assert trace.total_bytes - synchronization == sum(
        b for b, _ in analytic_bytes(x, out, function, rec.launches))
    assert_matches(out, expected_tensor(x, function, axes))


# ---------------------------------------------------------------------------------------------
# The configs chosen for the large shapes compute the right result
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case, small_shape", [
    ("sum 4096x4096 axis 0", (2048, 200)),
    ("argmax 4096x4096 axis 0", (2048, 200)),
    ("sum int8 4096x4096 axis 0", (3000, 70)),
    ("argmin float16 8192x1024 axis 0", (2100, 40)),
    ("sum 16x64x16x64 axes 0,2", (6, 5, 7, 100)),
])
def test_chosen_configs_match_the_oracle_on_smaller_shapes(case, small_shape):
    from tritonml_autotune.heuristics import reduce_config
    from tritonml.core.layout import reduce_layout

    shape, axes, function, dtype, keepdims = CASES[case]
    big = torch.empty(shape, dtype=dtype)
    out = torch.empty([1 if i in axes else s for i, s in enumerate(shape)], dtype=big.dtype)
    layout = reduce_layout(shape, big.stride(), out.stride(), axes, function.startswith("ARG"))
    with tritonml.tuning.target("H100"):
        config = reduce_config(layout, "cpu")
    generator = torch.Generator().manual_seed(0)
    x = (torch.randn(small_shape, generator=generator) * 50).to(dtype)
    result = reduce_axes(x, axes, RECORDS[ReduceFunction[function]], keepdims=keepdims,
                         config=config)
    assert_matches(result, expected_tensor(x, function, axes, keepdims), (case, config))
