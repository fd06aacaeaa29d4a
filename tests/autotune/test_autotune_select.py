"""``tritonml_autotune.select``: the config a launcher gets, in the documented order of resolution,
and the cost model's choices. Timings come from an injected deterministic timer; every test has its
own ``TRITONML_CACHE_DIR``.
"""
from __future__ import annotations

import json
import math
import re

import pytest
import torch

import tritonml
from tritonml.runtime import trace as _trace
from tritonml import tuning
from tritonml_autotune.configs import ReduceConfig, ScanConfig
from tritonml.core.dtypes import ACC_TORCH_DTYPE
from tritonml.core.layout import axis_layout, reduce_layout
from tritonml.launchers.reduce import ReduceFunction
from tritonml.records.builtin_reductions import RECORDS
from tritonml.records.builtin_reductions import record_of
from tritonml_autotune import (candidates, compiled, cost, devices, engine, heuristics, select,
                               shipped, spaces, suite)
from tritonml_autotune.problem import Problem

TARGETS = (devices.H100, devices.A100)
DTYPES = (torch.int8, torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int32,
          torch.uint8, torch.int64)


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONML_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("TRITONML_AUTOTUNE", raising=False)
    monkeypatch.delenv(devices.TARGET_ENV, raising=False)
    engine.set_timing(None)
    select.forget()
    yield tmp_path / "cache"
    select.forget()


def strides(shape):
    return torch.empty(shape, device="meta").stride()


def scan_layout(shape, axis):
    return axis_layout(shape, strides(shape), strides(shape), axis)


def red_layout(shape, axes, index=False):
    out_shape = [1 if i in axes else s for i, s in enumerate(shape)]
    return reduce_layout(shape, strides(shape), strides(out_shape), axes, index)


# ---------------------------------------------------------------------------------------------
# The interpreter: exactly the heuristics
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, axis", [((128, 2048), 1), ((1024, 256), 0), ((1, 1 << 18), 1),
                                         ((3, 5, 7), 1), ((7,), 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.float64])
def test_without_a_target_the_cpu_gets_the_heuristics_config(shape, axis, dtype, isolated):
    layout = scan_layout(shape, axis)
    choice = select.choose_scan(layout, dtype, torch.device("cpu"), "sum")
    expected = heuristics.scan_config(layout, "cpu", None, ACC_TORCH_DTYPE[dtype].itemsize)
    assert choice == engine.Choice(expected, engine.DEFAULT)
    layout = red_layout(shape, (axis,))
    for function in ("SUM", "ARGMAX"):
        choice = select.choose_reduce(layout, dtype, torch.device("cpu"), function,
                                      **record_bytes(function, dtype),
                                      make_runner=lambda config: pytest.fail("timed on a CPU"))
        assert choice == engine.Choice(heuristics.reduce_config(layout, "cpu"), engine.DEFAULT)
    assert not isolated.exists()  # nothing read from or written to the cache


def record_bytes(function: str, dtype) -> dict:
    """What tritonml tells the tuner of a reduce function: its record's bytes."""
    record = record_of(function)
    return dict(partial_bytes=record.state_bytes((dtype,)), out_bytes=record.out_bytes((dtype,)))


def expected_state_bytes(function: str, dtype) -> int:
    """The partial states of docs/reduce.md, written out: sums and products in the accumulation
    dtype, extrema in the input's (half types: float32), plus an int32 index for ARGMAX/ARGMIN,
    LOG_SUM_EXP's (max, sum) in float32 (float64 for float64)."""
    value = 4 if dtype in (torch.float16, torch.bfloat16) else dtype.itemsize
    if function in ("MAX", "MIN"):
        return value
    if function in ("ARGMAX", "ARGMIN"):
        return value + 4
    if function == "LOG_SUM_EXP":
        return 2 * (8 if dtype == torch.float64 else 4)
    return ACC_TORCH_DTYPE[dtype].itemsize


def test_partial_state_bytes_match_the_kernels_state_types():
    from tritonml.core.dtypes import TORCH_DTYPE
    for function in ReduceFunction:
        for dtype in DTYPES:
            if RECORDS[function].float_only and not dtype.is_floating_point:
                continue
            _, state, _ = RECORDS[function].kernel_state((dtype,), False)
            size = sum(TORCH_DTYPE[d].itemsize for d in state)
            assert record_bytes(function.name, dtype)["partial_bytes"] == size, (function, dtype)
            assert expected_state_bytes(function.name, dtype) == size, (function, dtype)
            # what the tuner's problem holds
            with tuning.target("H100"):
                plan = select.plan_reduce(red_layout((64, 8), (0,)), dtype, None, function.name,
                                          **record_bytes(function.name, dtype))
            assert plan.problem.state_bytes == size, (function, dtype)
            assert plan.problem.out_bytes == (8 if function.name.startswith("ARG")
                                              else dtype.itemsize), (function, dtype)
    for dtype in DTYPES:
        assert select.accumulator_bytes(dtype) == ACC_TORCH_DTYPE[dtype].itemsize


# ---------------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------------
def test_the_key_holds_op_regime_dtype_buckets_layout_device_and_versions():
    with tuning.target("H100"):
        plan = select.plan_reduce(red_layout((4096, 1000), (0,)), torch.float16, None, "MAX",
                                  **record_bytes("MAX", torch.float16))
    key = plan.key
    assert {k: key[k] for k in ("op", "function", "dtype", "axis", "inner", "outer", "layout",
                                "device", "regime")} == dict(
        op="reduce", function="MAX", dtype="float16", axis=4096, inner=1024, outer=1,
        layout="strided", device="H100", regime=plan.heuristic["regime"])
    assert key["version"] == select.version() and key["triton"] and key["torch"]
    assert "tritonml" in key["version"]


@pytest.mark.parametrize("low, high, same", [(1023, 1024, True), (1024, 1025, False),
                                             (4097, 8192, True), (2, 3, False)])
def test_sizes_share_a_key_within_a_power_of_two_bucket(low, high, same):
    with tuning.target("H100"):
        keys = [select.plan_scan(scan_layout((64, n), 1), torch.float32, None, "sum").key
                for n in (low, high)]
        inner = [select.plan_scan(scan_layout((n, 64), 1), torch.float32, None, "sum").key
                 for n in (low, high)]
        outer = [select.plan_scan(scan_layout((n, 64, 8), 1), torch.float32, None, "sum").key
                 for n in (low, high)]
    assert (keys[0] == keys[1]) is same
    assert (inner[0]["inner"] == inner[1]["inner"]) is same
    assert (outer[0]["outer"] == outer[1]["outer"]) is same
    assert {keys[0]["axis"], inner[0]["inner"], outer[0]["outer"]} == {engine.log2_bucket(low)}


def test_layout_class_separates_contiguous_and_strided_axes():
    with tuning.target("H100"):
        rows = select.plan_scan(scan_layout((256, 256), 1), torch.float32, None, "sum").key
        columns = select.plan_scan(scan_layout((256, 256), 0), torch.float32, None, "sum").key
    assert (rows["layout"], columns["layout"]) == ("contiguous", "strided")


# ---------------------------------------------------------------------------------------------
# Resolution order on a GPU
# ---------------------------------------------------------------------------------------------
def fake_seconds(config) -> float:
    """A deterministic 'measurement' from what a launch was given: prefers tiles of 512 elements,
    then fewer warps. Independent of the cost model."""
    return abs(math.log2(config.block_axis * config.block_inner) - 9) + config.num_warps / 100


def timer_from_launches(fn) -> float:
    """Times ``fn`` by recording its launches (nothing runs) and reading their tile and warps."""
    with _trace.record(execute=False) as rec:
        fn()
    meta = rec.launches[0].meta
    return fake_seconds(ScanConfig("rows", meta["BLOCK_AXIS"], meta["BLOCK_INNER"],
                                   meta["num_warps"]))


def item_plan(op, shape, axes, dtype=torch.float32):
    item = suite.Item(op, shape, axes)
    with tuning.target("H100"):
        plan, layout = tuning.plan_for(item, dtype, torch.device("cpu"))
    return item, plan, tuning.runner_factory(item, dtype, torch.device("cpu"), layout)


def test_timing_picks_the_fastest_candidate_and_stores_it(isolated):
    item, plan, runner = item_plan("SUM", (3000, 70), (0,))
    assert shipped.lookup("H100", plan.key) is None  # not a shipped shape
    assert len(plan.candidates) > 2
    with engine.using_timer(timer_from_launches):
        choice = select.decide(plan, runner)
    best = min(plan.candidates, key=lambda c: fake_seconds(ReduceConfig(**c)))
    assert choice == engine.Choice(ReduceConfig(**best), engine.TIMED,
                                   fake_seconds(ReduceConfig(**best)))
    stored = json.loads((isolated / "autotune-v1.json").read_text())["entries"]
    assert list(stored.values()) == [{"config": best, "seconds": choice.seconds, "source": "timed"}]
    # Later: read back, not timed again (a timer that fails would be noticed).
    again = select.decide(plan, lambda config: pytest.fail("timed twice"))
    assert again == engine.Choice(ReduceConfig(**best), engine.CACHED, choice.seconds)


def test_a_cached_timed_winner_comes_before_the_shipped_table(isolated):
    item = suite.ITEMS[0]
    with tuning.target("H100"):
        plan, _ = tuning.plan_for(item, torch.float32, None)
    entry = shipped.lookup("H100", plan.key)
    assert entry is not None and entry["source"] == "modeled"
    assert select.decide(plan).source == select.TABLE
    other = next(c for c in plan.candidates if c != entry["config"])
    engine.default_cache().put(plan.key, {"config": other, "seconds": 1e-5, "source": "timed"})
    assert select.decide(plan) == engine.Choice(ScanConfig(**other), engine.CACHED, 1e-5)


def test_the_shipped_table_comes_before_timing():
    with tuning.target("H100"):
        plan, _ = tuning.plan_for(suite.ITEMS[0], torch.float32, None)
    choice = select.decide(plan, lambda config: pytest.fail("timed a shipped shape"))
    assert choice.source == select.TABLE
    assert select.fields(choice.config) == shipped.lookup("H100", plan.key)["config"]


def test_timing_off_gives_the_modeled_choice_and_stores_nothing(isolated, monkeypatch):
    monkeypatch.setenv("TRITONML_AUTOTUNE", "0")
    _, plan, runner = item_plan("SUM", (3000, 70), (0,))
    choice = select.decide(plan, lambda config: pytest.fail("timed with timing off"))
    assert choice == select.modeled(plan) and choice.source == engine.MODELED
    assert not isolated.exists()


def test_choose_times_only_on_the_cuda_device_it_chooses_for(isolated):
    layout = red_layout((3000, 70), (0,))
    with tuning.target("H100"):  # CPU tensors: the interpreter's time says nothing about an H100
        choice = select.choose_reduce(layout, torch.float32, torch.device("cpu"), "SUM",
                                      **record_bytes("SUM", torch.float32),
                                      make_runner=lambda config: pytest.fail("timed"))
    assert choice.source == engine.MODELED
    with tuning.target("A100"):  # remembered per target: an A100's answer is its own
        a100 = select.choose_reduce(layout, torch.float32, torch.device("cpu"), "SUM",
                                    **record_bytes("SUM", torch.float32))
    assert a100 == select.modeled(_plan_on("A100", layout))


def _plan_on(name, layout):
    with tuning.target(name):
        return select.plan_reduce(layout, torch.float32, None, "SUM",
                                  **record_bytes("SUM", torch.float32))


def test_a_recorded_modeled_choice_does_not_stop_timing(isolated):
    _, plan, runner = item_plan("SUM", (3000, 70), (0,))
    engine.record_modeled(plan.key, plan.candidates[-1])
    with engine.using_timer(timer_from_launches):
        assert select.decide(plan, runner).source == engine.TIMED
    engine.record_modeled(plan.key, plan.candidates[-1])  # never over a timed winner
    assert select.decide(plan).source == engine.CACHED


# ---------------------------------------------------------------------------------------------
# Candidates
# ---------------------------------------------------------------------------------------------
SHAPES = {  # representative problems: (op, shape, axes)
    "tall columns": ("SUM", (1 << 16, 1024), (0,)),
    "many short rows": ("SUM", (1 << 16, 64), (1,)),
    "one long row": ("SUM", (1 << 24,), None),
    "several axes": ("SUM", (64, 128, 32, 64), (0, 2)),
    "argmax columns": ("ARGMAX", (8192, 1024), (0,)),
    "scan rows": ("cumulative_sum", (4096, 4096), (1,)),
    "scan columns": ("cumulative_sum", (4096, 4096), (0,)),
    "scan one long row": ("cumulative_sum", (1, 1 << 24), (1,)),
    "scan few rows": ("cumulative_product", (64, 1 << 16), (1,)),
}
SIZES = (torch.int8, torch.float16, torch.float32, torch.float64)  # every dtype size
# One launch of 1024 columns in 8-lane (one-sector) float32 tiles is 128 programs, 4 short of an
# H100's SMs; a split to fill them models 1.25x slower (a second launch on 32 MiB), so the model
# keeps the one launch (docs/tuning.md, "The cost model").
ONE_LAUNCH_NEARLY_FULL = {("argmax columns", torch.float32, "H100")}


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("dtype", SIZES, ids=str)
@pytest.mark.parametrize("target", TARGETS, ids=lambda d: d.name)
def test_modeled_choices_fill_the_sms_never_spill_and_run_the_right_launches(name, dtype, target):
    op, shape, axes = SHAPES[name]
    item = suite.Item(op, shape, axes)
    with tuning.target(target.name):
        plan, _ = tuning.plan_for(item, dtype, None)
    assert plan.heuristic in plan.candidates and plan.candidates[0] == plan.heuristic
    assert len(plan.candidates) <= candidates.MAX_CANDIDATES
    config = select.modeled(plan).config
    x = torch.empty(shape, dtype=dtype)
    with _trace.record(execute=False) as rec:
        if op.startswith("cumulative"):
            tritonml.launchers.scan.cumulative_scan(x, axes[0], tritonml.launchers.scan.SUM, config=config)
        else:
            tritonml.launchers.reduce.reduce_axes(x, axes, RECORDS[ReduceFunction[op]], config=config)
    grids = [math.prod(launch.grid) for launch in rec.launches]
    if (name, dtype, target.name) in ONE_LAUNCH_NEARLY_FULL:
        assert len(grids) == 1 and grids[0] >= 0.95 * target.sms, (config, grids)
    else:
        assert grids[0] >= target.sms, (config, grids)      # every SM has a program
    assert len(grids) <= 2
    arch = {"H100": 90, "A100": 80}[target.name]
    for launch in rec.launches:
        raw = spill_bytes_measured(launch, dtype, arch, op)
        if raw is None and not has_compile_facts(kernel_of(launch)):
            # The chunked kernel has no entries in compiled.json yet (compile_facts.py lists it;
            # the table is regenerated apart, with ptxas): the model must then know no registers.
            assert kernel_of(launch) == "scan_chunked", launch.name
            assert cost.estimate(plan.problem, select.fields(config), target).registers is None
            continue
        assert raw is not None and raw <= compiled.SPILL_TOLERANCE_BYTES, (launch.name, raw)


def kernel_of(launch) -> str | None:
    """The compiled.json kernel name of a recorded launch."""
    if launch.name == "reduce_kernel":
        return ("reduce_split_last" if launch.meta["FOLD_LAST"] else
                "reduce_split" if launch.meta["WRITE_PARTIAL"] else "reduce")
    return {"scan_tiled_kernel": "scan_tiled", "scan_lookback_kernel": "scan_lookback",
            "scan_chunked_kernel": "scan_chunked",
            "reduce_partials_kernel": "reduce_partials"}.get(launch.name)


def has_compile_facts(kernel) -> bool:
    data = json.loads(compiled.TABLE_PATH.read_text())["entries"]
    return any(e["kernel"] == kernel for e in data)


def spill_bytes_measured(launch, dtype, arch, op):
    """The largest spill compiled.json holds for this kernel at this many elements per thread or
    more, read from the raw entries (the oracle for compiled.usage)."""
    kernel = kernel_of(launch)
    tile = launch.meta.get("BLOCK_SPLIT", launch.meta.get("BLOCK_AXIS")) * launch.meta["BLOCK_INNER"]
    per_thread = max(1, tile // (32 * launch.meta["num_warps"]))
    state = "value+index" if op in ("ARGMAX", "ARGMIN") else "value"
    data = json.loads(compiled.TABLE_PATH.read_text())["entries"]
    rows = [e for e in data if e["kernel"] == kernel and e["state"] == state and e["arch"] == arch
            and e["dtype"] == compiled.dtype_class(str(dtype).replace("torch.", ""))]
    larger = sorted({max(1, e["block_axis"] * e["block_inner"] // (32 * e["num_warps"]))
                     for e in rows} - set(range(per_thread)))
    if not larger:
        return None
    return max(e["spill_bytes"] for e in rows
               if max(1, e["block_axis"] * e["block_inner"] // (32 * e["num_warps"])) == larger[0])


def test_one_launch_where_the_chains_already_fill_the_gpu():
    with tuning.target("H100"):
        plan, _ = tuning.plan_for(suite.Item("SUM", (512, 4096), (1,)), torch.float32, None)
    estimate = cost.estimate(plan.problem, select.fields(select.modeled(plan).config), plan.gpu)
    assert len(estimate.launches) == 1 and estimate.first_programs == 512


def test_a_spilling_candidate_is_never_chosen(monkeypatch):
    with tuning.target("H100"):
        plan, _ = tuning.plan_for(suite.Item("cumulative_sum", (16384, 4096), (1,)),
                                  torch.float32, None)
    first = select.modeled(plan).config
    largest = first.block_axis * first.block_inner
    assert any(c["block_axis"] * c["block_inner"] < largest for c in plan.candidates)
    real = compiled.usage

    def spills_from_the_first_size(kernel, state, dtype, arch, tile_elements, num_warps):
        if tile_elements >= largest:  # as if ptxas spilled these tiles
            return compiled.Usage(255, 64)
        return real(kernel, state, dtype, arch, tile_elements, num_warps)
    monkeypatch.setattr(compiled, "usage", spills_from_the_first_size)
    second = select.modeled(plan).config
    assert second.block_axis * second.block_inner < largest


KERNEL_OF_REGIME = {"rows": "scan_tiled", "columns": "scan_tiled", "lookback": "scan_lookback",
                    "chunked": "scan_chunked"}


def test_the_compile_facts_cover_every_candidate_of_the_suite():
    """Every candidate's registers are known, but the chunked kernel's until compiled.json has
    entries for it (then its candidates are held to the same)."""
    for target in TARGETS:
        for item in suite.ITEMS:
            for dtype in item.dtypes:
                with tuning.target(target.name):
                    plan, _ = tuning.plan_for(item, getattr(torch, dtype), None)
                for config in plan.candidates:
                    registers = cost.estimate(plan.problem, config, target).registers
                    kernel = KERNEL_OF_REGIME.get(config["regime"])
                    if kernel == "scan_chunked" and not has_compile_facts(kernel):
                        assert registers is None, (item, config)
                    else:
                        assert registers, (item, config)


# ---------------------------------------------------------------------------------------------
# Shipped tables, the suite, the doc
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", TARGETS, ids=lambda d: d.name)
def test_shipped_tables_hold_the_cost_models_choice_for_every_suite_problem(target):
    data = shipped.read(shipped.path_for(target.name))
    assert data["device"] == target.name
    expected = {}
    with tuning.target(target.name):
        for item in suite.ITEMS:
            for dtype in item.dtypes:
                plan, _ = tuning.plan_for(item, getattr(torch, dtype), None)
                expected[shipped.table_key(plan.key)] = select.fields(select.modeled(plan).config)
    assert {k: e["config"] for k, e in data["entries"].items()} == expected
    assert {(e["source"], e["generator"]) for e in data["entries"].values()} == {
        ("modeled", select.version())}


def test_the_suite_matches_the_benchmarks():
    from benchmarks import cases, gpu_timing
    scans = {(shape, (axis,)) for shape, axis, _ in cases.SCAN_SHAPES.values()}
    scans |= {(shape, (axis,)) for shape, axis in gpu_timing.GPU_SCAN_SHAPES.values()}
    assert {(i.shape, i.axes) for i in suite.ITEMS if i.op == "cumulative_sum"} == scans
    reductions = set()
    for case in cases.REDUCE_CASES:
        dtypes = tuple(str(d).replace("torch.", "") for d in (case.dtypes or cases.DTYPES))
        for shape in (case.shape, gpu_timing.GPU_REDUCE_SHAPES[case.regime]):
            reductions.add((case.function.upper(), shape, case.axes, dtypes))
    assert {(i.op, i.shape, i.axes, i.dtypes) for i in suite.ITEMS
            if not i.op.startswith("cumulative")} == reductions
    assert suite.DTYPES == tuple(str(d).replace("torch.", "") for d in cases.DTYPES)


@pytest.mark.source_tree
def test_the_doc_table_of_choices_is_what_the_code_chooses():
    from benchmarks import doc_table

    text = doc_table.DOC.read_text(encoding="utf-8")
    assert doc_table.rendered(text) == text, "run python -m benchmarks.doc_table"
    assert re.search(r"<!-- choices H100 begin -->\n\| problem", text)


def test_the_look_back_is_modeled_as_a_chain_of_tiles_and_takes_taller_tiles():
    """One long row: the look-back's time is its tiles one after another (measured on an H100:
    about 90 ns a tile), so 4096-element tiles model 4x faster than 1024-element ones, and the
    taller tile the element budget alone would not give is among the candidates. The tuner now
    chooses neither: a chunked scan has no chain of tiles (tests/autotune/test_chunked_model.py)."""
    with tuning.target("H100"):
        plan, _ = tuning.plan_for(suite.Item("cumulative_sum", (1, 1 << 26), (1,)), torch.float32,
                                  None)
        chosen = select.modeled(plan).config
    assert chosen.regime == "chunked"
    tall = dict(regime="lookback", block_axis=spaces.LOOKBACK_TALL_BLOCK_AXIS, block_inner=1,
                num_warps=8)
    assert tall in plan.candidates
    lookbacks = [c for c in plan.candidates if c["regime"] == "lookback"]
    fastest = min(lookbacks, key=lambda c: cost.estimate(plan.problem, c, devices.H100).seconds)
    assert fastest == tall
    for block_axis, warps in ((1024, 4), (4096, 8)):
        config = dict(regime="lookback", block_axis=block_axis, block_inner=1, num_warps=warps)
        seconds = cost.estimate(plan.problem, config, devices.H100).seconds
        chain = (1 << 26) // block_axis * cost.LOOKBACK_TILE_SECONDS
        assert chain <= seconds <= chain + 2 * devices.H100.launch_overhead_s, (block_axis, seconds)


# ---------------------------------------------------------------------------------------------
# One-launch splits in the cost model
# ---------------------------------------------------------------------------------------------
SPLIT_PROBLEM = Problem("reduce", "SUM", "float32", 4, 8, 4, 4096, 512, 1, False)
ONE_LAUNCH_SPLIT = dict(regime="split", block_axis=512, block_inner=8, num_warps=8, splits=3,
                        block_split=4, one_launch=True)


def _usage_with_loads_in_flight(one_launch: int, two_launch: int):
    def usage(kernel, *args):
        return compiled.Usage(64, 0, one_launch if kernel == "reduce_split_last" else two_launch)
    return usage


@pytest.mark.parametrize("one_launch, two_launch", [(1, 3), (2, 2), (3, 2)])
def test_a_one_launch_split_with_fewer_loads_in_flight_than_its_twin_streams_slower(
        monkeypatch, one_launch, two_launch):
    monkeypatch.setattr(compiled, "usage", _usage_with_loads_in_flight(one_launch, two_launch))
    device = devices.H100
    estimate = cost.estimate(SPLIT_PROBLEM, ONE_LAUNCH_SPLIT, device)
    # By hand: 64 chains x 3 splits = 192 programs (every SM busy); 8 warps at 64 registers fill
    # an SM's bandwidth; bytes = input + partial states written and read back + output.
    partials = 8 * 512 * 3
    moved = 4096 * 512 * 4 + 2 * partials + 512 * 4
    streaming = moved / device.copy_bandwidth_bytes_per_s * max(1.0, two_launch / one_launch)
    fold = (1 + 1) * cost.FOLD_ROUND_TRIP_SECONDS   # the arrival counter, then 3 states <= 4
    assert [launch.programs for launch in estimate.launches] == [192]
    # ...and each program makes cdiv(4096, 3 x 512) = 3 tile steps one after another
    stepping = 3 * cost.TILE_STEP_SECONDS
    assert estimate.seconds == pytest.approx(max(streaming, stepping) + fold
                                             + device.launch_overhead_s)


def test_the_model_prefers_the_one_launch_split_unless_its_loop_loses_loads_in_flight(monkeypatch):
    two = dict(ONE_LAUNCH_SPLIT, one_launch=False)
    for one_launch, two_launch, better in ((2, 2, "one"), (1, 4, "two")):
        monkeypatch.setattr(compiled, "usage", _usage_with_loads_in_flight(one_launch, two_launch))
        seconds = cost.costs(SPLIT_PROBLEM, [ONE_LAUNCH_SPLIT, two], devices.H100)
        assert (seconds[0] < seconds[1]) == (better == "one"), (one_launch, two_launch, seconds)
