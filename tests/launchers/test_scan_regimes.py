"""The three scan regimes on long axes, the look-back's determinism and scheduling independence,
and the accuracy bounds."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from triton.runtime import interpreter

import tritonml
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ScanConfig
from tritonml.launchers.scan import PRODUCT, SUM, cumulative_scan
from tests.lookback_knob import prefix_every
from benchmarks.scan_oracle import accumulation_allowance, round_to, scan_matches, to_numpy, ulp

LONG = 1 << 17

# (name, shape, axis, config): each regime on an axis of >= 2**17 elements; the look-back ones
# split every scan over many programs (the count is asserted).
REGIME_CASES = [
    ("rows", (2, LONG), 1, ScanConfig("rows", 8192, 2)),
    ("columns", (LONG, 3), 0, ScanConfig("columns", 8192, 4)),
    ("lookback-row", (LONG,), 0, ScanConfig("lookback", 4096, 1)),
    ("lookback-strided", (LONG, 3), 0, ScanConfig("lookback", 4096, 4)),
]


def _programs(launches):
    return sum(l.grid[0] for l in launches)


@pytest.mark.parametrize("name,shape,axis,config", REGIME_CASES, ids=[c[0] for c in REGIME_CASES])
@pytest.mark.parametrize("dtype,reverse,exclusive", [
    (torch.float32, False, False), (torch.int32, True, True), (torch.float16, True, False),
    (torch.int64, False, True)])
def test_long_axis_in_each_regime(name, shape, axis, config, dtype, reverse, exclusive):
    rng = np.random.default_rng(len(name) * 31 + shape[0] % 97)
    if dtype.is_floating_point:
        x = torch.from_numpy(rng.uniform(0, 1, size=shape)).to(dtype)
    else:
        x = torch.from_numpy(rng.integers(-2**31, 2**31 - 1, size=shape)).to(dtype)
    x_np = to_numpy(x)
    with _trace.record() as rec:
        result = cumulative_scan(x, axis, SUM, reverse=reverse, exclusive=exclusive, config=config)
    assert len(rec.launches) == 1
    if config.regime == "lookback":
        assert rec.launches[0].name == "scan_lookback_kernel"
        assert _programs(rec.launches) >= 32  # each scan split across many programs
    allowance = accumulation_allowance(x_np, axis, "sum", reverse, exclusive, dtype)
    ok, msg = scan_matches(result, x_np, axis, "sum", reverse, exclusive, allowance)
    assert ok, msg


@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True)])
def test_lookback_is_bit_identical_to_tiled_and_across_runs(reverse, exclusive):
    # Same BLOCK_AXIS -> the same left fold of tile totals: bitwise equal results, run to run,
    # however far each tile had to look back (PREFIX_EVERY forces long look-backs).
    x = torch.from_numpy(np.random.default_rng(3).standard_normal((12000, 3))).to(torch.float32)
    tiled = cumulative_scan(x, 0, SUM, reverse=reverse, exclusive=exclusive,
                            config=ScanConfig("columns", 512, 4))
    config = ScanConfig("lookback", 512, 4)
    for every in (1, 3, 1000):
        with prefix_every(every):
            first = cumulative_scan(x, 0, SUM, reverse=reverse, exclusive=exclusive, config=config)
            again = cumulative_scan(x, 0, SUM, reverse=reverse, exclusive=exclusive, config=config)
        assert torch.equal(first, tiled) and torch.equal(again, tiled)


@pytest.fixture
def shuffled_program_order(monkeypatch):
    """Run the interpreter's programs in a random order instead of 0, 1, 2, ...: the interpreter
    numbers programs through set_grid_idx, so remap the numbers it hands out."""
    builder = interpreter.interpreter_builder
    original = builder.set_grid_idx
    rng = np.random.default_rng(11)
    orders = {}

    def shuffled(x, y, z):
        n = builder.grid_dim[0]
        if n not in orders:
            orders[n] = rng.permutation(n)
        original(int(orders[n][x]), y, z)

    monkeypatch.setattr(builder, "set_grid_idx", shuffled)
    yield orders


def test_lookback_result_does_not_depend_on_program_order(shuffled_program_order):
    # Tiles come from a ticket counter, so a program only waits on tickets already taken by
    # running programs: any launch order completes (no deadlock) with the same bits.
    x = torch.from_numpy(np.random.default_rng(5).uniform(-1, 1, size=(3, 20000))).to(torch.float32)
    config = ScanConfig("lookback", 1024, 1)
    with _trace.record() as rec:
        shuffled = cumulative_scan(x, 1, SUM, config=config)
    assert shuffled_program_order, "the programs were not reordered"
    assert any((order != np.arange(len(order))).any() for order in shuffled_program_order.values())
    in_order = cumulative_scan(x, 1, SUM, config=ScanConfig("rows", 1024, 1))
    assert torch.equal(shuffled, in_order)
    ok, msg = scan_matches(shuffled, to_numpy(x), 1, "sum", False, False,
                           accumulation_allowance(to_numpy(x), 1, "sum", False, False, x.dtype))
    assert ok, msg


def test_lookback_product():
    rng = np.random.default_rng(9)
    x = torch.from_numpy(rng.uniform(0.999, 1.001, size=(3, 30000)))
    result = cumulative_scan(x, 1, PRODUCT, reverse=True, config=ScanConfig("lookback", 2048, 2))
    ok, msg = scan_matches(result, to_numpy(x), 1, "prod", True, False,
                           accumulation_allowance(to_numpy(x), 1, "prod", True, False, x.dtype))
    assert ok, msg


# --------------------------------------------------------------------------------------------
# Accuracy bounds
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", [None, ScanConfig("lookback", 16384, 1)], ids=["auto", "lookback"])
def test_float32_running_sum_of_4m_uniform_values_within_3e7(config):
    x = torch.from_numpy(np.random.default_rng(0).uniform(0, 1, size=1 << 22).astype(np.float32))
    result = cumulative_scan(x, 0, SUM, config=config).numpy().astype(np.float64)
    reference = np.cumsum(x.numpy().astype(np.float64))
    relative = np.abs(result - reference) / reference
    assert relative.max() <= 3e-7, relative.max()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", ["sum", "prod"])
def test_half_types_within_one_ulp(dtype, op):
    rng = np.random.default_rng(1)
    n = 1 << 15  # sums of [0, 1) stay below float16's 65504
    values = rng.uniform(0, 1, size=n) if op == "sum" else rng.uniform(0.999, 1.001, size=n)
    x = torch.from_numpy(values).to(dtype)
    fn = tritonml.cumulative_sum if op == "sum" else tritonml.cumulative_product
    got = fn(x, 0).to(torch.float64).numpy()
    exact64 = to_numpy(x).astype(np.float64)
    exact = np.cumsum(exact64) if op == "sum" else np.cumprod(exact64)
    want = round_to(exact, dtype)
    assert (np.abs(got - want) <= ulp(want, dtype)).all()
