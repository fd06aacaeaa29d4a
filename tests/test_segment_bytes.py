"""The segment kernel moves each byte once: bytes counted in Triton's interpreter
(``tritonml/bench/memtrace.py``) against the ideal, x read once + the results written once + the
boundaries read once, <= 1.05 x, in one launch, with the configs chosen for an H100, whatever the
lengths: many segments of 1 to 3, a few long ones, a power law, empty ones among them.

A scan whose segments span whole chunks reads those chunks twice, the second time from L2 (the
chunk's tail is published before its carry is known, as the chunked scan does): bounded here by
2 reads of x + 1 write."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tritonml
from benchmarks import segment_oracle
from tritonml.bench.memtrace import trace_memory
from tritonml.launchers import segment as S
from tritonml.launchers.scan_records import SUM
from tritonml.reduce_functions import record_of
from tritonml_autotune import devices

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET,
                                reason="bytes are counted in Triton's interpreter")
BYTES_BOUND = 1.05
AXIS_LEN = 1 << 14


def _lengths(kind: str) -> np.ndarray:
    """The boundaries of one kind of lengths covering AXIS_LEN positions."""
    rng = np.random.default_rng(0)
    if kind == "short":          # many segments of 1 to 3
        lengths = rng.integers(1, 4, AXIS_LEN)
    elif kind == "long":         # a few segments of thousands
        lengths = np.array([AXIS_LEN // 3, 7, AXIS_LEN])
    elif kind == "power law":    # skewed: most short, a few long
        lengths = rng.pareto(1.2, AXIS_LEN).astype(np.int64) + 1
    else:                        # "with empties": half of the segments empty, the rest 1 to 4
        lengths = rng.integers(1, 5, 2 * AXIS_LEN) * rng.integers(0, 2, 2 * AXIS_LEN)
    ends = np.cumsum(lengths)
    return np.concatenate([[0], ends[ends < AXIS_LEN], [AXIS_LEN]])


KINDS = ("short", "long", "power law", "with empties")


def _ideal(x, out, offsets) -> int:
    return sum(t.numel() * t.element_size() for t in (x, out, offsets))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape,axis", [((AXIS_LEN,), 0), ((AXIS_LEN, 4), 0)])
def test_a_segmented_reduction_moves_each_byte_once(kind, shape, axis):
    offsets = torch.from_numpy(_lengths(kind))
    x = torch.rand(shape, dtype=torch.float32)
    with devices.targeting("H100"), trace_memory({"x": x, "offsets": offsets}) as trace:
        out, = S.segment_reduce_axis(x, record_of("SUM"), offsets, axis)
    ideal = _ideal(x, out, offsets)
    assert trace.by_region("x")["load"] == x.numel() * 4 == trace.distinct_bytes("x", "load")
    assert len(trace.kernels) == 1 and trace.torch_work == []
    assert trace.total_bytes <= BYTES_BOUND * ideal, (
        f"{kind}: moved {trace.total_bytes} bytes, {trace.total_bytes / ideal:.4f} x ideal")
    want = segment_oracle.segment_reduce_expected(x, "SUM", offsets.tolist(), axis)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_a_segmented_scan_moves_each_byte_once(kind):
    offsets = torch.from_numpy(_lengths(kind))
    x = torch.rand(AXIS_LEN, dtype=torch.float32)
    with devices.targeting("H100"), trace_memory({"x": x, "offsets": offsets}) as trace:
        out = S.segment_scan_axis(x, SUM, offsets, 0)
    ideal = _ideal(x, out, offsets)
    # segments spanning chunks: their chunks are read twice
    reads = 2 if kind in ("long", "power law") else 1
    assert trace.by_region("x")["load"] <= reads * BYTES_BOUND * x.numel() * 4
    assert len(trace.kernels) == 1 and trace.torch_work == []
    bound = BYTES_BOUND * (ideal + (reads - 1) * x.numel() * 4)
    assert trace.total_bytes <= bound, (
        f"{kind}: moved {trace.total_bytes} bytes, {trace.total_bytes / ideal:.4f} x ideal")
    want = segment_oracle.segment_scan_reference(x, "sum", offsets.tolist(), 0, False, False)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
