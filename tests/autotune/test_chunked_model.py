"""The tuner and the chunked scan regime: the cost model's terms (by hand), the heuristics' and the
candidates' chunked configs, the long scans' modeled targets and their table in
docs/performance.md. Everything here is the model's arithmetic; nothing is timed.
"""
from __future__ import annotations

import dataclasses

import pytest
import torch

from tritonml_autotune.configs import MAX_SCAN_WINDOW, ScanConfig
from tritonml.core.layout import axis_layout
from tritonml.bench import long_scans
from tritonml_autotune import (candidates, compiled, cost, devices, engine, heuristics, select,
                               shipped, spaces, suite)
from tritonml_autotune.problem import Problem

H100, A100 = devices.H100, devices.A100
LOOKBACK_S = 90e-9       # the measured hand-over of one look-back tile (docs/tuning.md)
MiB = 1 << 20


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITONML_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(devices.TARGET_ENV, raising=False)
    select.forget()
    yield
    select.forget()


def no_registers(monkeypatch):
    monkeypatch.setattr(compiled, "usage", lambda *args: None)


def row(n, element=4, state=8):
    """One contiguous row of ``n`` elements (float32 summed in float64 by default)."""
    return Problem("scan", "sum", "float32", element, state, element, n, 1, 1, True)


def chunked(block_axis, chunk_tiles, window, block_inner=1, warps=4):
    return dict(regime="chunked", block_axis=block_axis, block_inner=block_inner,
                num_warps=warps, chunk_tiles=chunk_tiles, window=window)


# ---------------------------------------------------------------------------------------------
# The cost model's chunked terms, by hand
# ---------------------------------------------------------------------------------------------
def test_a_chunked_row_reads_dram_once_and_its_second_read_from_l2(monkeypatch):
    no_registers(monkeypatch)
    n = 1 << 20
    config = chunked(1024, 4, 64)
    got = cost.estimate(row(n), config, H100)
    (launch,) = got.launches
    # 1024 tiles of 1024 in chunks of 4: 256 programs, one chain.
    assert (launch.kernel, launch.programs) == ("scan_chunked", 256)
    # DRAM: 4 MiB read + 4 MiB written + 255 published chunks (a 4-byte word and an 8-byte
    # float64 aggregate each; the chain's last chunk publishes nothing).
    assert got.bytes_moved == 8 * MiB + 255 * 12
    # 256 programs of 4 warps: 2 a SM, 264 resident by threads; 256 x 16 KiB = 4 MiB in flight,
    # within half the H100's 50 MiB: the whole second read comes from L2. Look-back reads:
    # 4 groups of 64 chunks, chunk c reading c % 64 earlier ones, plus the previous group's
    # prefix for the 192 chunks past the first group.
    reads = 4 * (64 * 63 // 2) + 192
    assert got.l2_bytes == 4 * MiB + reads * 12
    assert launch.reread_bytes == 4 * MiB
    dram_s = got.bytes_moved / 3.0e12             # every SM busy, 8 warps resident: full share
    l2_s = (got.bytes_moved + got.l2_bytes) / 5.5e12
    serial = 4 * LOOKBACK_S                       # cdiv(256 chunks, 64) group hand-overs
    tail = 3 * LOOKBACK_S                         # publish, poll, acquire-and-load
    stepping = 2 * 4 * cost.TILE_STEP_SECONDS     # one wave; 4 tiles folded, then scanned
    assert got.seconds == pytest.approx(max(dram_s, l2_s, serial, stepping) + tail + 4e-6)
    assert got.registers is None                  # no compile facts: registers unknown


def test_chunks_in_flight_beyond_the_l2_budget_are_read_again_from_dram(monkeypatch):
    no_registers(monkeypatch)
    n = 1 << 26
    config = chunked(1024, 8, 256)                # 32 KiB chunks, 8192 programs
    small = dataclasses.replace(H100, l2_bytes=2 * 132 * 16 * 32 * 1024 // 2)
    got = cost.estimate(row(n), config, small)
    # Resident: 132 SMs x 16 four-warp programs = 2112, x 32 KiB = 66 MiB in flight, twice the
    # budget (half of this L2): half of the 256 MiB second read is charged to DRAM.
    budget = small.l2_bytes / 2
    in_flight = 132 * 16 * 32 * 1024
    missed = (in_flight - budget) / in_flight
    assert missed == pytest.approx(0.5)
    chunks = n // (1024 * 8)
    published = (chunks - 1) * 12
    reads = (chunks // 256) * (256 * 255 // 2) + (chunks - 256)
    assert got.bytes_moved == pytest.approx(2 * 4 * n + published + missed * 4 * n)
    assert got.l2_bytes == pytest.approx((1 - missed) * 4 * n + reads * 12)
    # Known registers bound the resident programs: at 128 registers a thread, 4 of these
    # 128-thread programs a SM (65536 / (128 x 128)), 528 x 32 KiB = 16.5 MiB: it fits again.
    monkeypatch.setattr(compiled, "usage", lambda kernel, *args: compiled.Usage(128, 0))
    fitted = cost.estimate(row(n), config, small)
    assert fitted.bytes_moved == pytest.approx(2 * 4 * n + published)
    assert fitted.registers == 128


def test_one_chunk_a_chain_is_a_single_pass(monkeypatch):
    no_registers(monkeypatch)
    problem = Problem("scan", "sum", "float32", 4, 8, 4, 4096, 64, 16, False)
    got = cost.estimate(problem, chunked(64, 64, 64, block_inner=16), H100)
    (launch,) = got.launches
    # 16 x 4 chains of one chunk (64 tiles of 64 rows): one read, nothing published or waited.
    assert launch.programs == 64
    assert got.bytes_moved == 2 * 4 * 4096 * 64 * 16 and got.l2_bytes == 0
    assert launch.serial_tiles == 0 and launch.tail_seconds == 0


def test_the_look_back_keeps_its_chain_of_tiles(monkeypatch):
    no_registers(monkeypatch)
    config = dict(regime="lookback", block_axis=4096, block_inner=1, num_warps=8)
    got = cost.estimate(row(1 << 26), config, H100)
    tiles = (1 << 26) // 4096
    assert got.bytes_moved == 8 * (1 << 26) + 3 * tiles * 8 and got.l2_bytes == 0
    assert got.seconds == pytest.approx(tiles * LOOKBACK_S + 4e-6)


# ---------------------------------------------------------------------------------------------
# The heuristics
# ---------------------------------------------------------------------------------------------
def layout_of(shape, axis):
    strides = torch.empty(shape, device="meta").stride()
    return axis_layout(shape, strides, strides, axis)


FEW_LONG_SCANS = [((1, 1 << 26), 1), ((8, 1 << 22), 1), ((1 << 24,), 0), ((4096, 16384), 0),
                  ((4, 1 << 20), 1)]
# 240 rows are too few for an H100's 264 programs, enough for an A100's 216 (which keeps "rows",
# tests/autotune/test_tuning_targets.py).
FEW_ON_H100_ONLY = ((240, 4096), 1)


@pytest.mark.parametrize("shape, axis, target", [
    *((shape, axis, target) for shape, axis in FEW_LONG_SCANS for target in (H100, A100)),
    (*FEW_ON_H100_ONLY, H100)], ids=str)
def test_few_long_scans_take_the_chunked_regime_on_a_gpu(shape, axis, target):
    layout = layout_of(shape, axis)
    with devices.targeting(target):
        config = heuristics.scan_config(layout, "cuda", None, 8, 4)
    config.validate()
    assert config.regime == "chunked"
    assert config.window <= MAX_SCAN_WINDOW and config.window * config.block_inner <= 1 << 16
    tiles = -(-layout.axis_len // config.block_axis)
    chunks = -(-tiles // config.chunk_tiles)
    chains = layout.outer_len * -(-layout.inner_len // config.block_inner)
    assert chunks >= 2
    # Two programs per SM wherever chunks of at least 128 positions along the axis can give them
    # (shorter chunks would publish too much against their bytes).
    shortest = -(-128 // config.block_axis)
    if chains * -(-tiles // shortest) >= 2 * target.sms:
        assert chains * chunks >= 2 * target.sms
    # The chunks in flight (resident programs by threads alone, chunk bytes at the float32
    # element) fit half the L2, unless the whole input does.
    resident = target.sms * min(32, 2048 // (32 * config.num_warps))
    chunk_bytes = config.chunk_tiles * config.block_axis * config.block_inner * 4
    assert (min(chains * chunks, resident) * chunk_bytes <= target.l2_bytes / 2
            or chains * tiles * config.block_axis * config.block_inner * 4 <= target.l2_bytes / 2)


def test_strided_chunks_are_32_lanes_wide():
    """(4096, 16384) along axis 0: 128-lane columns give 128 chains, under an H100's 264
    programs; the chunked tile is 32 lanes, the rest of the 1024-element budget rows."""
    with devices.targeting("H100"):
        config = heuristics.scan_config(layout_of((4096, 16384), 0), "cuda", None, 8, 4)
    assert (config.regime, config.block_axis, config.block_inner) == ("chunked", 32, 32)


@pytest.mark.parametrize("shape, axis, expected", [
    # The interpreter's tiles (spaces.CPU_SCAN: 2**16 elements, rows at most 2**14 long, columns
    # at most 2**12 wide), as before the chunked regime: one program per chain.
    ((1, 1 << 26), 1, ScanConfig("rows", 1 << 14, 1, 8)),
    ((4096, 16384), 0, ScanConfig("columns", 16, 4096, 8)),
    ((8, 1 << 22), 1, ScanConfig("rows", 1 << 14, 4, 8)),     # 4 of the 8 rows a tile
    ((64, 3), 1, ScanConfig("rows", 4, 64, 4)),
])
def test_the_interpreter_keeps_its_one_pass_tiles(shape, axis, expected):
    assert heuristics.scan_config(layout_of(shape, axis), "cpu", None, 8) == expected
    choice = select.choose_scan(layout_of(shape, axis), torch.float32, torch.device("cpu"), "sum")
    assert choice == engine.Choice(expected, engine.DEFAULT)


# ---------------------------------------------------------------------------------------------
# Candidates and their dicts
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("target", [H100, A100], ids=lambda d: d.name)
@pytest.mark.parametrize("scan", long_scans.SCANS, ids=lambda s: s.label)
def test_chunked_candidates_are_valid_and_fit_the_l2(scan, target):
    plan = long_scans.plan(scan, target)
    assert len(plan.candidates) <= candidates.MAX_CANDIDATES
    chunked_ones = [c for c in plan.candidates if c["regime"] == "chunked"]
    assert chunked_ones
    problem = plan.problem
    for config in chunked_ones:
        ScanConfig(**config).validate()
        assert set(config) == {"regime", "block_axis", "block_inner", "num_warps",
                               "chunk_tiles", "window"}
        tiles = -(-problem.axis_len // config["block_axis"])
        chunks = -(-tiles // config["chunk_tiles"])
        programs = problem.chains(config["block_inner"]) * chunks
        assert chunks >= 2
        resident = target.sms * resident_per_sm(problem, config, target)
        chunk_bytes = (config["chunk_tiles"] * config["block_axis"]
                       * min(config["block_inner"], problem.inner_len) * problem.element_bytes)
        assert min(programs, resident) * chunk_bytes <= target.l2_bytes / 2, config
        shortest = -(-128 // config["block_axis"])
        if problem.chains(config["block_inner"]) * -(-tiles // shortest) >= 2 * target.sms:
            assert programs >= 2 * target.sms, config


def resident_per_sm(problem, config, target) -> int:
    """Programs of a config resident on one SM, by hand: at most 32, what 2048 threads allow,
    and what 65536 registers allow where compiled.json knows the kernel's (in steps of 8)."""
    threads = 32 * config["num_warps"]
    most = min(32, 2048 // threads)
    usage = compiled.usage("scan_chunked", "value", problem.dtype,
                           {"H100": 90, "A100": 80}[target.name],
                           config["block_axis"] * config["block_inner"], config["num_warps"])
    if usage is not None:
        most = min(most, max(1, 65536 // (-(-usage.registers // 8) * 8 * threads)))
    return most


def test_only_chunked_dicts_carry_chunk_fields():
    for config in (ScanConfig("rows", 1024, 1), ScanConfig("lookback", 4096, 1, 8)):
        assert "chunk_tiles" not in select.fields(config) and "window" not in select.fields(config)
        assert ScanConfig(**select.fields(config)) == config
    config = ScanConfig("chunked", 4096, 1, 8, chunk_tiles=3, window=128)
    assert select.fields(config) == dict(regime="chunked", block_axis=4096, block_inner=1,
                                         num_warps=8, chunk_tiles=3, window=128)
    assert ScanConfig(**select.fields(config)) == config


@pytest.mark.parametrize("target", ["H100", "A100"])
def test_the_shipped_chunked_entries_answer_their_problem(target):
    item = suite.Item("cumulative_sum", (1, 1 << 26), (1,))
    from tritonml import tuning
    with tuning.target(target):
        plan, _ = tuning.plan_for(item, torch.float32, None)
    entry = shipped.lookup(target, plan.key)
    assert entry["config"]["regime"] == "chunked" and entry["config"] in plan.candidates
    choice = select.decide(plan)
    assert choice.source == select.TABLE and select.fields(choice.config) == entry["config"]


# ---------------------------------------------------------------------------------------------
# The long scans at full size: modeled targets and the doc's table
# ---------------------------------------------------------------------------------------------
def ideal_bytes(scan) -> int:
    """Input read once and output written once, by hand: a float32 cumulative sum moves 8 bytes
    an element; a linear recurrence is planned as a tuple scan of its two float32 inputs, whose
    written bytes select counts as read (8 + 8; only h, 4 bytes, is stored)."""
    elements = 1
    for size in scan.shape:
        elements *= size
    return elements * (8 if scan.inputs == 1 else 16)


@pytest.mark.parametrize("scan", long_scans.SCANS, ids=lambda s: s.label)
def test_long_scans_model_within_the_targets_on_an_h100(scan):
    got = long_scans.modeled(scan, "H100")
    ideal = ideal_bytes(scan)
    ideal_seconds = ideal / H100.copy_bandwidth_bytes_per_s + H100.launch_overhead_s
    assert got.ideal_bytes == ideal
    assert got.estimate.seconds <= 1.25 * ideal_seconds, got.config
    assert got.estimate.bytes_moved <= 1.05 * ideal, got.config     # DRAM, L2 re-reads apart
    assert got.estimate.first_programs >= H100.sms
    if scan.shape[scan.axis] >= 1 << 24:
        # The look-back's chain of tiles: 90 ns for each along the axis, several times the bytes.
        tiles = scan.shape[scan.axis] // got.lookback["block_axis"]
        assert got.lookback_estimate.seconds >= tiles * LOOKBACK_S > 5 * ideal_seconds
        assert got.config["regime"] == "chunked"


@pytest.mark.source_tree
def test_the_long_scans_table_in_the_performance_doc_is_what_the_model_says():
    from benchmarks import doc_table

    text = doc_table.PERFORMANCE_DOC.read_text(encoding="utf-8")
    assert doc_table.rendered_performance(text) == text, "run python -m benchmarks.doc_table"
    section = text.split("<!-- long scans H100 begin -->\n")[1].split("<!-- long scans")[0]
    assert len(section.strip().splitlines()) == 2 + len(long_scans.SCANS)   # header, rule, rows
    assert "not measured" in text.split("## Long scans")[1].split("<!-- long scans")[0]


def test_the_tile_step_term_reproduces_the_measured_h100_columns_scan(monkeypatch):
    """benchmarks/results/h100_timing_2026-11-23.md: the tiled columns scan of 4096x16384 float32
    along axis 0, 128 programs of [8, 128] at 4 warps, took 0.555 ms (0.97 TB/s). The bandwidth
    terms alone model it at the ideal; the tile-step term (512 steps in series) brings the model
    within 5% of the measurement, and the tuner then prefers more, shorter walks."""
    no_registers(monkeypatch)
    problem = Problem("scan", "sum", "float32", 4, 8, 4, 4096, 16384, 1, False)
    measured = dict(regime="columns", block_axis=8, block_inner=128, num_warps=4)
    got = cost.estimate(problem, measured, H100)
    assert got.launches[0].programs == 128 and got.launches[0].steps == 512
    assert got.seconds == pytest.approx(0.555e-3, rel=0.05)
    with devices.targeting("H100"):
        chosen = select.modeled(select.plan_scan(
            axis_layout((4096, 16384), (16384, 1), (16384, 1), 0), torch.float32, None, "sum"))
    assert chosen.config != ScanConfig("columns", 8, 128, 4)
    assert cost.estimate(problem, select.fields(chosen.config), H100).seconds < got.seconds / 2
