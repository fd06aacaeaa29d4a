"""The in-process plans (tritonml/runtime/plan.py), the direct eager path of the public functions
(tritonml/torch_ops/define.py: direct_call_allowed) and the relaunch cache key of compiled kernels
(tritonml/runtime/relaunch.py: launch_compiled).

Results are compared with numpy; the plan tests count how often a launcher plans, and check that
every check that reads data pointers still runs on a plan reuse.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tritonml
from tritonml import runtime
from tritonml.runtime import plan as _plan, relaunch as _relaunch
from tritonml.core import triton_compat as _triton_compat
from tritonml.torch_ops import define as _define
from tritonml.launchers import reduce as reduce_ops
from tritonml.launchers import scan as scan_ops
from tritonml.launchers import segment as segment_ops
from tritonml.runtime import trace as _trace
from tritonml.records.builtin_reductions import record_of
from tritonml_autotune.configs import ReduceConfig, ScanConfig


def _count_plans(monkeypatch, modules: dict):
    """``{kind: 0}`` for each ``kind: module`` of ``modules``, counting the calls of the module's
    planner (``_plan_scan`` / ``_plan_reduce``), with no plans to start from."""
    runtime.clear()
    counts = dict.fromkeys(modules, 0)
    for kind, module in modules.items():
        name = f"_plan_{kind}"

        def counting(*args, _original=getattr(module, name), _kind=kind, **kwargs):
            counts[_kind] += 1
            return _original(*args, **kwargs)
        monkeypatch.setattr(module, name, counting)
    return counts


@pytest.fixture
def plan_counts(monkeypatch):
    """How many times each launcher planned (a plan-cache miss) during the test."""
    yield _count_plans(monkeypatch, {"scan": scan_ops, "reduce": reduce_ops})
    runtime.clear()


def test_a_repeated_call_plans_once_and_stays_right(plan_counts):
    for seed in range(3):
        x = torch.randn(6, 50, generator=torch.Generator().manual_seed(seed))
        got = tritonml.cumulative_sum(x, 1)
        np.testing.assert_allclose(got.numpy(), np.cumsum(x.double().numpy(), 1), rtol=1e-6, atol=1e-6)
        red = tritonml.reduce(x, "sum", 1)
        np.testing.assert_allclose(red.numpy(), x.double().numpy().sum(1, keepdims=True),
                                   rtol=1e-6, atol=1e-6)
    assert plan_counts == {"scan": 1, "reduce": 1}


@pytest.mark.parametrize("change", ["shape", "stride", "dtype", "axis", "reverse", "out", "grad mode",
                                    "negative view"])
def test_every_keyed_fact_plans_anew(plan_counts, change):
    x = torch.randn(8, 40)
    tritonml.cumulative_sum(x, 1)
    kwargs = {}
    axis = 1
    if change == "shape":
        x = torch.randn(8, 41)
    elif change == "stride":
        x = torch.randn(40, 8).t()
    elif change == "dtype":
        x = x.double()
    elif change == "axis":
        axis = 0
    elif change == "reverse":
        kwargs["reverse"] = True
    elif change == "out":
        kwargs["out"] = torch.empty(8, 40)
    elif change == "negative view":
        x = torch.randn(8, 40)._neg_view()
    context = torch.no_grad() if change == "grad mode" else torch.enable_grad()
    with context:
        got = tritonml.cumulative_sum(x, axis, **kwargs)
    expected = np.cumsum(x.double().numpy(), axis)
    if kwargs.get("reverse"):
        expected = np.flip(np.cumsum(np.flip(x.double().numpy(), axis), axis), axis)
    np.testing.assert_allclose(got.double().numpy(), expected, rtol=1e-6, atol=1e-6)
    assert plan_counts["scan"] == 2


def test_types_that_compare_equal_plan_apart(plan_counts):
    """``True == 1`` in Python, but only a bool is a flag and only an int an axis."""
    x = torch.randn(4, 10)
    tritonml.cumulative_sum(x, 1, reverse=True)
    with pytest.raises(TypeError, match="reverse: expected a bool"):
        tritonml.cumulative_sum(x, 1, reverse=1)
    tritonml.reduce(x, "sum", 1)
    with pytest.raises(TypeError, match="axes: expected an int"):
        tritonml.reduce(x, "sum", True)
    tritonml.reduce(x, "sum", 1, keepdims=True)
    with pytest.raises(TypeError, match="keepdims: expected a bool"):
        tritonml.reduce(x, "sum", 1, keepdims=1)


def test_pointer_checks_run_on_every_call(plan_counts):
    """A plan remembers metadata only: an out that overlaps x is refused even when a call with
    the same metadata (and memory apart) was planned before, and it is left untouched."""
    buffer = torch.randn(2, 64)
    x, out = buffer[0, :40], buffer[1, :40]
    tritonml.cumulative_sum(x, 0, out=out)
    np.testing.assert_allclose(out.numpy(), np.cumsum(x.double().numpy()), rtol=1e-6, atol=1e-6)
    overlapping = buffer[0, 10:50]
    before = buffer.clone()
    with pytest.raises(ValueError, match="out: partially overlaps the input"):
        tritonml.cumulative_sum(x, 0, out=overlapping)
    assert torch.equal(buffer, before)

    data = torch.randn(2, 64)
    r_x, r_out = data[0].view(8, 8), data[1, :8].view(8, 1)
    tritonml.reduce(r_x, "max", 1, out=r_out)
    with pytest.raises(ValueError, match="out: partially overlaps the input"):
        tritonml.reduce(r_x, "max", 1, out=data[0, :8].view(8, 1))
    assert plan_counts == {"scan": 1, "reduce": 1}


def test_in_place_after_out_of_place_with_the_same_metadata(plan_counts):
    x = torch.randn(5, 30)
    other = torch.empty(5, 30)
    tritonml.cumulative_product(x, 1, out=other)
    expected = np.cumprod(x.double().numpy(), 1)
    tritonml.cumulative_product(x, 1, out=x)
    np.testing.assert_allclose(x.numpy(), expected, rtol=1e-5)


def test_the_plan_cache_is_bounded(monkeypatch):
    runtime.clear()
    monkeypatch.setattr(_plan, "MAX_PLANS", 3)
    for n in range(1, 8):
        x = torch.arange(n, dtype=torch.int32)
        assert tritonml.cumulative_sum(x, 0).tolist() == np.cumsum(np.arange(n)).tolist()
        assert len(_plan._plans) <= 3
    runtime.clear()


@pytest.fixture
def segment_plan_counts(monkeypatch):
    """How many times the segment launchers planned (a plan-cache miss) during the test."""
    yield _count_plans(monkeypatch, {"reduce": segment_ops, "scan": segment_ops})
    runtime.clear()


def _segment_sums(x, bounds):
    return np.stack([x[a:b].sum(0) for a, b in zip(bounds[:-1], bounds[1:])])


def test_a_repeated_segment_call_plans_once_and_stays_right(segment_plan_counts):
    """The segment launchers take the plan path: the same metadata (shapes, strides, dtypes, the
    number of segments, options) plans once, whatever the values of x and the boundaries, on
    the direct path, through the torch op and through the launcher itself."""
    for seed, bounds in enumerate(([0, 3, 3, 7], [0, 0, 5, 7], [0, 7, 7, 7])):
        x = torch.randn(7, 5, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
        offsets = torch.tensor(bounds)
        expected = _segment_sums(x.numpy(), bounds)
        np.testing.assert_allclose(tritonml.segment_reduce(x, "sum", offsets=offsets).numpy(),
                                   expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            segment_ops.segment_reduce_axis(x, record_of("SUM"), offsets, 0)[0].numpy(),
            expected, rtol=1e-12, atol=1e-12)
        got = torch.ops.tritonml.segment_reduce(x, offsets, "SUM", 0, False, None)   # the op
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)
        scanned = tritonml.segment_scan(x, "sum", offsets=offsets)
        for a, b in zip(bounds[:-1], bounds[1:]):
            np.testing.assert_allclose(scanned[a:b].numpy(), np.cumsum(x[a:b].numpy(), 0),
                                       rtol=1e-12, atol=1e-12)
    assert segment_plan_counts == {"reduce": 1, "scan": 1}


@pytest.mark.parametrize("change", ["segments", "shape", "dtype", "axis", "keepdims", "initial",
                                    "initial's sign", "function"])
def test_every_keyed_fact_of_a_segment_call_plans_anew(segment_plan_counts, change):
    x, offsets = torch.ones(6, 3), torch.tensor([0, 2, 2, 6])
    tritonml.segment_reduce(x, "sum", offsets=offsets, initial=0.0)
    kwargs = dict(offsets=offsets, initial=0.0)
    function = "sum"
    if change == "segments":
        kwargs["offsets"] = torch.tensor([0, 2, 6])
    elif change == "shape":
        x = torch.ones(6, 4)
    elif change == "dtype":
        x = x.double()
    elif change == "axis":
        x, kwargs["axis"] = x.t().contiguous(), 1
    elif change == "keepdims":
        kwargs["keepdims"] = True
    elif change == "initial":
        kwargs["initial"] = 1.0
    elif change == "initial's sign":
        kwargs["initial"] = -0.0   # equal to 0.0 to Python, but another kernel argument
    else:
        function = "max"
    got = tritonml.segment_reduce(x, function, **kwargs)
    assert segment_plan_counts["reduce"] == 2
    bounds = kwargs["offsets"].tolist()
    expected = _segment_sums(x.double().numpy(), bounds) + float(kwargs["initial"])
    if function == "max":
        expected = np.stack([np.maximum(x[a:b].double().numpy().max(0, initial=-np.inf),
                                        kwargs["initial"]) for a, b in zip(bounds, bounds[1:])])
    if change == "axis":
        expected = _segment_sums(x.t().double().numpy(), bounds).T + kwargs["initial"]
    if change == "keepdims":
        expected = expected[:, None]
    np.testing.assert_allclose(got.double().numpy(), expected)


def test_segment_scans_check_out_pointers_on_every_call(segment_plan_counts):
    buffer = torch.randn(2, 64)
    x, offsets = buffer[0, :40], torch.tensor([0, 15, 40])
    out = buffer[1, :40]
    segment_ops.segment_scan_axis(x, scan_ops.SUM, offsets, 0, out=out)
    np.testing.assert_allclose(out[15:].numpy(), np.cumsum(x[15:].double().numpy()), rtol=1e-5,
                               atol=1e-5)
    before = buffer.clone()
    with _trace.record() as rec, pytest.raises(ValueError, match="out: partially overlaps"):
        segment_ops.segment_scan_axis(x, scan_ops.SUM, offsets, 0, out=buffer[0, 10:50])
    assert rec.launches == [] and torch.equal(buffer, before)
    segment_ops.segment_scan_axis(x, scan_ops.SUM, offsets, 0, out=x)   # in place: x itself
    np.testing.assert_allclose(x.numpy(), out.numpy(), rtol=1e-6)
    assert segment_plan_counts["scan"] == 2   # (out is x plans apart)


def test_launches_name_their_tensors():
    """Every tensor argument of every planned launch is a named slot (``Slot``), bound by name
    in one place (``steps.bind``); no launcher numbers its tensors."""
    from tritonml.runtime import steps as _steps
    runtime.clear()
    x = torch.randn(4, 300)
    tritonml.cumulative_sum(x, 1)
    tritonml.reduce(x, "max", 1)
    tritonml.segment_reduce(x, "sum", offsets=torch.tensor([0, 100, 300]), axis=1)
    works = [plan.work for plan in _plan._plans.values()]
    layout = tritonml.core.layout.axis_layout((4, 300), x.stride(), x.stride(), 1)
    for config in (ScanConfig("lookback", 16, 4, 4), ScanConfig("chunked", 8, 4, chunk_tiles=3)):
        works.append(scan_ops.scan_work(layout, scan_ops.SUM, x.dtype, False, False,
                                        reverse=False, exclusive=False, config=config,
                                        has_initial=True, store_carry=True))
    reduce_layout = tritonml.core.layout.reduce_layout((4, 300), x.stride(), (1, 1), (1,), False)
    works.append(reduce_ops.reduce_work(reduce_layout, record_of("SUM"), x.dtype, False, False,
                                        ReduceConfig("split", 16, 1, splits=4, one_launch=True)))

    def slots_of(arg):
        return [arg] if not isinstance(arg, tuple) else [s for a in arg for s in slots_of(a)]
    for work in works:
        for step in work.steps:
            assert all(isinstance(s, _steps.Slot) for arg in step.slots for s in slots_of(arg))
        assert all(isinstance(space.slot, _steps.Slot) for space in work.workspaces)
    assert len(works) == 6 and sum(len(w.workspaces) for w in works) >= 6
    runtime.clear()


# --------------------------------------------------------------------------------------------
# The direct eager path
# --------------------------------------------------------------------------------------------
def test_direct_calls_are_possible_on_this_torch():
    assert _define._DIRECT_CALLS_POSSIBLE
    assert _define.direct_call_allowed(torch.ones(3))


def test_direct_calls_step_aside_for_autograd_transforms_modes_and_the_profiler():
    x = torch.ones(3)
    needs_grad = torch.ones(3, requires_grad=True)
    assert not _define.direct_call_allowed(needs_grad)
    with torch.no_grad():
        assert _define.direct_call_allowed(needs_grad)
    assert not _define.direct_call_allowed(x, torch.ones(3, requires_grad=True))

    seen = []
    torch.func.vmap(lambda row: seen.append(_define.direct_call_allowed(row)) or row)(torch.ones(2, 3))
    assert seen == [False]

    from torch.utils._python_dispatch import TorchDispatchMode

    class Passthrough(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Passthrough():
        assert not _define.direct_call_allowed(x)
    class FunctionPassthrough(torch.overrides.TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with FunctionPassthrough():
        assert not _define.direct_call_allowed(x)
    with torch.profiler.profile():
        assert not _define.direct_call_allowed(x)
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        assert not _define.direct_call_allowed(mode.from_tensor(x))


def test_the_profiler_sees_the_registered_ops():
    x = torch.randn(4, 16)
    with torch.profiler.profile() as prof:
        tritonml.cumulative_sum(x, 1)
        tritonml.reduce(x, "sum", 1)
    names = {event.name for event in prof.events()}
    assert "tritonml::cumulative_sum" in names and "tritonml::reduce" in names


def test_out_writes_bump_the_version_counter_as_the_ops_do():
    x = torch.randn(4, 16)
    out, red_out = torch.empty(4, 16), torch.empty(4, 1)
    versions = out._version, red_out._version, x._version
    tritonml.cumulative_sum(x, 1, out=out)
    tritonml.reduce(x, "sum", 1, out=red_out)
    tritonml.cumulative_sum(x, 1, out=x)
    assert (out._version, red_out._version, x._version) == tuple(v + 1 for v in versions)
    np.testing.assert_allclose(red_out.numpy()[:, 0], out.double().numpy()[:, -1], rtol=1e-5)


def test_overwriting_a_tensor_saved_for_backward_is_detected():
    a = torch.randn(3, 5, requires_grad=True)
    saved = torch.randn(3, 5)
    loss = (a * saved).sum()  # mul saves ``saved`` for the gradient of a
    tritonml.cumulative_sum(torch.randn(3, 5), 1, out=saved)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()


# --------------------------------------------------------------------------------------------
# The relaunch key of compiled kernels (runs without a GPU: only the key is computed)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("a, b", [(1, 2), (16, 17), (2 ** 31 - 16, 2 ** 31), (2 ** 63 - 16, 2 ** 63),
                                  (True, 1), ((1, 16), (1, 32 + 1))])
def test_relaunch_keys_separate_what_triton_specializes_on(a, b):
    assert _relaunch._arg_key(a) != _relaunch._arg_key(b)


def test_relaunch_keys_merge_what_triton_does_not_specialize_on():
    assert _relaunch._arg_key(32) == _relaunch._arg_key(48)
    assert _relaunch._arg_key(3) == _relaunch._arg_key(5)
    buffer = torch.empty(64)
    assert _relaunch._arg_key(buffer[:8]) == _relaunch._arg_key(buffer[4:12])
    assert _relaunch._arg_key(buffer[:8]) != _relaunch._arg_key(buffer[1:9])
    assert _relaunch._arg_key(buffer) != _relaunch._arg_key(buffer.double())


def test_relaunch_keys_refuse_tensor_subclasses():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.empty(4))
    with pytest.raises(_relaunch._NotPlain):
        _relaunch._arg_key(fake)


def test_meta_parameters_are_ordered_as_the_kernel_declares_them():
    from triton.runtime.jit import JITFunction

    from tritonml.kernels.reduce import reduce_kernel
    compiled_mode = JITFunction(reduce_kernel.fn)  # the interpreter's kernels carry no params
    names = [p.name for p in compiled_mode.params]
    assert names[:2] == ["x_ptr", "out_ptr"]
    meta = {name: 0 for name in reversed(names[4:])}
    meta["num_warps"] = 4
    assert _relaunch._meta_order(compiled_mode, 4, meta) == tuple(names[4:])
    del meta[names[-1]]
    assert _relaunch._meta_order(compiled_mode, 4, meta) is None


# --------------------------------------------------------------------------------------------
# Scratch tensors for timing candidates
# --------------------------------------------------------------------------------------------
def test_candidates_are_never_timed_on_the_interpreter_or_under_tracing():
    from torch._subclasses.fake_tensor import FakeTensorMode

    from tritonml.runtime import scratch as _scratch
    assert not _scratch.can_time(torch.ones(3))
    with FakeTensorMode() as mode:
        assert not _scratch.can_time(mode.from_tensor(torch.ones(3)))


def test_scratch_runners_share_one_allocation_and_never_touch_the_callers_tensors():
    from tritonml.runtime import scratch as _scratch
    allocations, launched = [], []

    def make_tensors():
        x = _scratch.scratch_input((4, 6), (1, 4), torch.float32, "cpu")
        allocations.append(x)
        return x, torch.empty(4, 6)

    make_runner = _scratch.runner_factory(make_tensors, lambda t, config: launched.append((t, config)))
    runners = [make_runner(config) for config in ("a", "b", "c")]
    for run in runners:
        run()
    assert len(allocations) == 1 and allocations[0].stride() == (1, 4)
    assert [config for _, config in launched] == ["a", "b", "c"]
    assert all(t[0] is allocations[0] for t, _ in launched)
    assert allocations[0].std() > 0.5  # random values, not zeros
    ints = _scratch.scratch_input((1000,), (1,), torch.int8, "cpu")
    assert 0 <= int(ints.min()) and int(ints.max()) < 100 and len(set(ints.tolist())) > 10


def test_a_prepared_launch_passes_exactly_what_a_full_launch_passes(monkeypatch):
    """The GPU relaunch path, without a GPU: a stand-in compiled kernel and driver record what the
    launcher hands to Triton's launcher, first through ``launch_compiled`` (the general path), then
    through the prepared launch's own cache; both must be the tensors, the rest of the arguments,
    then the meta-parameters in the kernel's parameter order."""
    from triton.runtime.jit import JITFunction

    from tritonml.kernels.scan import scan_tiled_kernel
    from tritonml.runtime import steps as _steps
    from tritonml.launchers.scan import SUM, scan_work

    class Kernel:  # the compiled-mode kernel's parameter list (its hash would need compiled mode)
        params = JITFunction(scan_tiled_kernel.fn).params

    kernel = Kernel()
    calls = []

    class Compiled:
        function = packed_metadata = None

        def launch_metadata(self, grid, stream, *args):
            return None

        def run(self, *args):
            calls.append(args)

    class Driver:
        def get_current_device(self):
            return 0

        def get_current_stream(self, device):
            return 7

    monkeypatch.setattr(_triton_compat.driver, "_active", Driver())
    x, out = torch.empty(16, 256), torch.empty(16, 256)
    layout = tritonml.core.layout.axis_layout((16, 256), x.stride(), out.stride(), 1)
    work = scan_work(layout, SUM, x.dtype, False, False, reverse=True, exclusive=False,
                     config=ScanConfig("rows", 256, 4, 4))
    (step,) = work.steps
    prepared = _relaunch.PreparedLaunch(kernel, step.launch.grid, step.launch.tail,
                                             step.launch.meta)
    # tensors: x, out and the initial's and the carry's slots (x stands in without them)
    order = tuple(p.name for p in kernel.params[4 + len(prepared.tail):])
    key = (kernel, 0, tuple(_relaunch._arg_key(a) for a in (x, out, x, x, *prepared.tail)),
           tuple(prepared.meta.items()))
    monkeypatch.setitem(_relaunch._compiled, key, (Compiled(), order))
    assert prepared.launch([x, out, x, x]) and prepared.launch([x, out, x, x])
    expected = (x, out, x, x, *prepared.tail, *(prepared.meta[name] for name in order))
    assert len(calls) == 2
    for args in calls:
        assert args[:4] == (4, 1, 1, 7)            # grid (16 rows / 4 per program), stream
        assert args[9:] == expected
    assert order[-3:] == ("BLOCK_AXIS", "BLOCK_INNER", "PTR_TUPLES") and "num_warps" not in order
    assert isinstance(step, _steps.Step)


def test_tuning_forget_drops_the_plans_and_timing_can_be_switched(plan_counts):
    from tritonml import tuning
    from tritonml_autotune import engine
    x = torch.randn(3, 9)
    tritonml.cumulative_sum(x, 1)
    tritonml.cumulative_sum(x, 1)
    assert plan_counts["scan"] == 1
    tuning.forget()
    got = tritonml.cumulative_sum(x, 1)
    assert plan_counts["scan"] == 2
    np.testing.assert_allclose(got.numpy(), np.cumsum(x.double().numpy(), 1), rtol=1e-6, atol=1e-6)
    with tuning.timing(False):
        assert not engine.timing_enabled()
    tuning.set_timing(True)
    try:
        assert engine.timing_enabled()
    finally:
        tuning.set_timing(None)


def test_the_host_overhead_benchmark_takes_the_gpu_relaunch_path_with_the_launch_stubbed(capsys):
    """``python -m benchmarks.host_overhead --stub-launch`` times what a warm call does on a GPU up
    to the kernel's C launcher: every call of every case must reach that launcher exactly once
    (the relaunch path), and none may go through ``JITFunction.run``."""
    from benchmarks import host_overhead

    assert host_overhead.main(["--stub-launch", "--calls", "3"]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines()
            if line.startswith("| ") and "µs" not in line]
    assert {name.strip() for name, _, _ in rows} == {
        "cumulative_sum (public)", "cumulative_sum out= (public)", "launcher cumulative_scan",
        "reduce SUM (public)", "reduce SUM out= (public)", "launcher reduce_axes"}
    for name, us, relaunched in rows:
        assert float(relaunched) == 1.0 and float(us) > 0, name
