"""Targets: device facts, the time model, and choosing configs as for a named GPU on CPU tensors.

``tritonml.tuning.target("H100")`` (or ``TRITONML_TARGET=H100``) makes the heuristics choose as on
that GPU while the kernels run where the tensors are; these tests compare the launches so recorded
with what the heuristics choose for a CUDA device.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from unittest import mock

import pytest
import torch

import tritonml
from tritonml import runtime
import tritonml.tuning
import tritonml_autotune.heuristics as heuristics
from tritonml.runtime import trace as _trace
from tritonml.core.layout import axis_layout, reduce_layout
from tritonml_autotune import devices, model, select, spaces
from tests.timing import limit

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Chains between 2 x 108 (A100) and 2 x 132 (H100): an H100 target splits a scan, an A100 does not.
BETWEEN_A100_AND_H100 = 240
# Reductions split only when one launch leaves SMs idle: chains between 108 (A100) and 132 (H100)
# SMs, over rows long enough that the split's second launch pays for itself on an H100.
REDUCE_BETWEEN_A100_AND_H100, LONG_ROW = 120, 1 << 19


@pytest.fixture(autouse=True)
def _no_target_in_environment(monkeypatch):
    monkeypatch.delenv(devices.TARGET_ENV, raising=False)


def describe(launches) -> list:
    """What a config decides about each launch: kernel, grid, tile and warps."""
    return [dict(kernel=launch.name, grid=list(launch.grid),
                 **{k: launch.meta.get(k) for k in ("BLOCK_AXIS", "BLOCK_INNER", "BLOCK_SPLIT",
                                                      "num_warps")})
            for launch in launches]


def record_as_cuda(run, execute=False) -> list:
    """The launches of ``run()`` with configs chosen as for a CUDA device (an H100): the heuristics
    patched for launchers that call them, ``select.gpu_of`` for launchers wired to ``select``."""
    scan_config, reduce_config = heuristics.scan_config, heuristics.reduce_config
    with mock.patch.object(select, "gpu_of", lambda _device: devices.active() or devices.H100), \
         mock.patch.object(heuristics, "scan_config",
                           lambda layout, _type, _device=None, acc_bytes=8, element_bytes=None:
                           scan_config(layout, "cuda", None, acc_bytes, element_bytes)), \
         mock.patch.object(heuristics, "reduce_config",
                           lambda layout, _type, _device=None: reduce_config(layout, "cuda")), \
         _trace.record(execute=execute) as rec:
        # Plans remembered before (or made under) the patches would hide (or leak) them.
        runtime.clear()
        try:
            run()
        finally:
            runtime.clear()
    return describe(rec.launches)


def record(run, execute=True) -> list:
    with _trace.record(execute=execute) as rec:
        run()
    return describe(rec.launches)


# ---------------------------------------------------------------------------------------------
# Device facts
# ---------------------------------------------------------------------------------------------

def test_device_facts_are_looked_up_by_name_in_any_case():
    h100 = tritonml.tuning.device("h100")
    assert h100 is devices.H100 is devices.lookup("H100")
    assert (h100.sms, h100.registers_per_sm, h100.shared_memory_per_sm, h100.max_threads_per_sm,
            h100.copy_bandwidth_bytes_per_s, h100.launch_overhead_s) == (
        132, 65536, 228 * 1024, 2048, 3.0e12, 4e-6)
    a100 = devices.lookup("a100")
    assert (a100.sms, a100.registers_per_sm, a100.shared_memory_per_sm, a100.max_threads_per_sm,
            a100.copy_bandwidth_bytes_per_s) == (108, 65536, 164 * 1024, 2048, 1.7e12)
    assert tritonml.tuning.targets() == ("A100", "H100")
    with pytest.raises(Exception):
        h100.sms = 1  # frozen


def test_default_gpu_program_count_is_two_programs_per_h100_sm():
    assert spaces.GPU_MIN_PROGRAMS == 2 * devices.H100.sms


# ---------------------------------------------------------------------------------------------
# The time model, against numbers worked by hand
# ---------------------------------------------------------------------------------------------

def test_a_launch_filling_the_sms_moves_bytes_at_full_bandwidth():
    # 3e9 B / 3e12 B/s = 1 ms, + 4 us launch overhead; 264 programs >= 132 SMs.
    assert model.modeled_seconds(devices.H100, [(3e9, 264)]) == pytest.approx(1.004e-3)
    assert model.modeled_seconds(devices.H100, [(3e9, 132)]) == pytest.approx(1.004e-3)


def test_a_launch_with_fewer_programs_than_sms_gets_their_share_of_the_bandwidth():
    # 66 programs on 132 SMs: half the bandwidth, 2 ms; A100: 54 of 108 SMs, 1.7e9 B at 0.85e12 B/s.
    assert model.modeled_seconds(devices.H100, [(3e9, 66)]) == pytest.approx(2.004e-3)
    assert model.modeled_seconds(devices.A100, [(1.7e9, 54)]) == pytest.approx(2.004e-3)
    # One program: 1/132 of 3e12 B/s; 3e6 B then take 132 us.
    assert model.modeled_seconds(devices.H100, [(3e6, 1)]) == pytest.approx(132e-6 + 4e-6)


def test_launches_add_up_and_each_pays_its_overhead():
    launches = [(3e9, 264), (3e9, 66), (0, 1)]
    assert model.modeled_seconds(devices.H100, launches) == pytest.approx(1.004e-3 + 2.004e-3 + 4e-6)
    assert model.modeled_seconds(devices.H100, []) == 0


def test_ideal_is_one_launch_at_full_bandwidth():
    assert model.ideal_seconds(devices.H100, 3e9) == pytest.approx(1.004e-3)
    assert model.ideal_seconds(devices.A100, 1.7e9) == pytest.approx(1.004e-3)


def test_model_rejects_launches_without_programs_or_with_negative_bytes():
    with pytest.raises(ValueError, match="programs"):
        model.modeled_seconds(devices.H100, [(1e6, 0)])
    with pytest.raises(ValueError, match="bytes_moved"):
        model.modeled_seconds(devices.H100, [(-1, 1)])


# ---------------------------------------------------------------------------------------------
# Targets choose as the CUDA heuristics do, on CPU tensors
# ---------------------------------------------------------------------------------------------

def test_h100_target_runs_the_cuda_chunked_scan_on_cpu_tensors():
    # One row of 2**17: the cost model takes one chunked launch (two tile steps a program, one
    # look-back group) over the look-back's chain of 32 tiles (cost.LOOKBACK_TILE_SECONDS each).
    x = torch.randn(1, 1 << 17)
    expected = record_as_cuda(lambda: tritonml.cumulative_sum(x, 1))
    with tritonml.tuning.target("H100") as chosen:
        assert chosen is devices.H100 and tritonml.tuning.current() is devices.H100
        with _trace.record() as rec:
            result = tritonml.cumulative_sum(x, 1)
        got = describe(rec.launches)
    assert got == expected
    assert rec.launches[0].name == "scan_chunked_kernel"
    torch.testing.assert_close(result, torch.cumsum(x.double(), 1).float())
    # Without a target the CPU tile limits apply: one tile per row, no chunks.
    assert record(lambda: tritonml.cumulative_sum(x, 1), execute=False) != expected


def test_h100_target_runs_the_cuda_split_reduction_on_cpu_tensors():
    x = torch.randn(4, 1 << 16)
    run = lambda: tritonml.reduce(x, tritonml.ReduceFunction.SUM, (1,))  # noqa: E731
    expected = record_as_cuda(run)
    with tritonml.tuning.target("H100"):
        with _trace.record() as rec:
            result = run()
    assert describe(rec.launches) == expected
    assert [launch.grid for launch in rec.launches] == [(4, 16)]  # split; the last program folds
    torch.testing.assert_close(result, x.double().sum(1, keepdim=True).float())
    assert len(record(run, execute=False)) == 1  # the CPU never splits


@pytest.mark.parametrize("shape, axis", [((64, 1 << 17), 0), ((512, 4096), 1), ((3, 5, 7), 1)])
def test_h100_target_picks_the_cuda_reduce_config_for_other_layouts(shape, axis):
    x = torch.empty(shape)
    run = lambda: tritonml.reduce(x, tritonml.ReduceFunction.ARGMAX, (axis,))  # noqa: E731
    with tritonml.tuning.target("H100"):
        got = record(run, execute=False)
    assert got == record_as_cuda(run)


def test_a100_target_fills_108_sms_where_an_h100_needs_more_chains():
    # 120 long rows: one program per SM on an A100 (>= 108), not on an H100 (< 132).
    x = torch.empty(REDUCE_BETWEEN_A100_AND_H100, LONG_ROW)
    out = torch.empty(REDUCE_BETWEEN_A100_AND_H100, 1)
    layout = reduce_layout(tuple(x.shape), x.stride(), out.stride(), (1,), False)
    with tritonml.tuning.target("H100"):
        on_h100 = heuristics.reduce_config(layout, "cpu")
    with tritonml.tuning.target("A100"):
        on_a100 = heuristics.reduce_config(layout, "cpu")
    assert (on_h100.regime, on_h100.splits) == ("split", 3)
    assert (on_a100.regime, on_a100.splits) == ("rows", 1)
    with tritonml.tuning.target("A100"):
        launches = record(lambda: tritonml.reduce(x, tritonml.ReduceFunction.SUM, (1,)),
                          execute=False)
    assert [launch["grid"] for launch in launches] == [[REDUCE_BETWEEN_A100_AND_H100, 1]]

    # A scan of 240 rows of 4096: chunked on an H100 (the heuristics' regime for too few long
    # scans, the look-back's before), one program per row on an A100.
    x = torch.empty(BETWEEN_A100_AND_H100, 4096)
    layout = axis_layout(tuple(x.shape), x.stride(), x.stride(), 1)
    with tritonml.tuning.target("H100"):
        assert heuristics.scan_config(layout, "cpu", None, 8).regime == "chunked"
    with tritonml.tuning.target("A100"):
        assert heuristics.scan_config(layout, "cpu", None, 8).regime == "rows"


def test_no_target_leaves_the_choice_to_the_device_type():
    x = torch.empty(BETWEEN_A100_AND_H100, 4096)
    layout = axis_layout(tuple(x.shape), x.stride(), x.stride(), 1)
    assert tritonml.tuning.current() is None
    assert heuristics.scan_config(layout, "cuda", None, 8).regime == "chunked"
    assert heuristics.scan_config(layout, "cpu", None, 8).block_axis == 4096


# ---------------------------------------------------------------------------------------------
# The environment variable, nesting, threads, errors
# ---------------------------------------------------------------------------------------------

_CHILD = """
import json, torch, tritonml
from tritonml.runtime import trace as _trace
x = torch.empty(4, 8192)
with _trace.record(execute=False) as rec:
    tritonml.reduce(x, tritonml.ReduceFunction.SUM, (1,))
    tritonml.cumulative_sum(x, 1)
print(json.dumps([[l.name, list(l.grid), l.meta.get("BLOCK_AXIS"), l.meta.get("BLOCK_INNER"),
                   l.meta.get("num_warps")] for l in rec.launches]))
"""


def _child(target):
    env = {k: v for k, v in os.environ.items() if k != devices.TARGET_ENV}
    if target is not None:
        env[devices.TARGET_ENV] = target
    return subprocess.run([sys.executable, "-c", _CHILD], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=limit(300))


def test_environment_variable_chooses_as_the_context_manager_does():
    done = _child("h100")
    assert done.returncode == 0, done.stderr
    x = torch.empty(4, 8192)
    with tritonml.tuning.target("H100"), _trace.record(execute=False) as rec:
        tritonml.reduce(x, tritonml.ReduceFunction.SUM, (1,))
        tritonml.cumulative_sum(x, 1)
    expected = [[launch.name, list(launch.grid), launch.meta.get("BLOCK_AXIS"),
                 launch.meta.get("BLOCK_INNER"), launch.meta.get("num_warps")]
                for launch in rec.launches]
    assert json.loads(done.stdout) == expected


def test_environment_variable_is_read_at_each_choice_and_the_block_overrides_it(monkeypatch):
    monkeypatch.setenv(devices.TARGET_ENV, "A100")
    assert tritonml.tuning.current() is devices.A100
    with tritonml.tuning.target("H100"):
        assert tritonml.tuning.current() is devices.H100
    with tritonml.tuning.target(None):
        assert tritonml.tuning.current() is None
    monkeypatch.setenv(devices.TARGET_ENV, "")
    assert tritonml.tuning.current() is None


def test_bad_environment_value_names_the_variable_and_the_known_targets(monkeypatch):
    monkeypatch.setenv(devices.TARGET_ENV, "V100")
    x = torch.empty(4, 16)
    with pytest.raises(ValueError, match=r"TRITONML_TARGET: unknown target 'V100'; known targets: "
                                         r"A100, H100"):
        tritonml.cumulative_sum(x, 1)


def test_bad_target_name_names_the_parameter_and_the_known_targets():
    with pytest.raises(ValueError, match=r"name: unknown target 'B200'; known targets: A100, H100"):
        with tritonml.tuning.target("B200"):
            pass
    with pytest.raises(TypeError, match="name"):
        with tritonml.tuning.target(132):
            pass
    assert tritonml.tuning.current() is None


def test_targets_nest_and_unwind_on_errors():
    with tritonml.tuning.target("H100"):
        with tritonml.tuning.target("a100"):
            assert tritonml.tuning.current() is devices.A100
            with tritonml.tuning.target(None):
                assert tritonml.tuning.current() is None
            assert tritonml.tuning.current() is devices.A100
        assert tritonml.tuning.current() is devices.H100
        with pytest.raises(RuntimeError):
            with tritonml.tuning.target("A100"):
                raise RuntimeError
        assert tritonml.tuning.current() is devices.H100
    assert tritonml.tuning.current() is None


def test_each_thread_has_its_own_target():
    x = torch.empty(BETWEEN_A100_AND_H100, 4096)
    layout = axis_layout(tuple(x.shape), x.stride(), x.stride(), 1)
    both_inside = threading.Barrier(2)
    seen = {}

    def choose(name):
        with tritonml.tuning.target(name):
            both_inside.wait(timeout=limit(30))
            seen[name] = (tritonml.tuning.current(),
                          heuristics.scan_config(layout, "cpu", None, 8).regime)
            both_inside.wait(timeout=limit(30))

    with tritonml.tuning.target("H100"):
        threads = [threading.Thread(target=choose, args=(name,)) for name in ("H100", "A100")]
        fresh = threading.Thread(target=lambda: seen.setdefault("fresh", tritonml.tuning.current()))
        for thread in (*threads, fresh):
            thread.start()
        for thread in (*threads, fresh):
            thread.join()
        assert tritonml.tuning.current() is devices.H100
    assert seen == {"H100": (devices.H100, "chunked"), "A100": (devices.A100, "rows"),
                    "fresh": None}
