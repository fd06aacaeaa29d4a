"""The segment kernel moves each byte once: bytes counted in Triton's interpreter
(``tritonml/bench/memtrace.py``) against the ideal, x read once + the results written once + the
boundaries read once, <= 1.05 x, in one launch, whatever the lengths: many segments of 1 to 3, a
few long ones, a power law, empty ones among them.

Configs are chosen for an H100 with 4 SMs instead of 132 (``SMALL_H100``), so that these inputs,
small enough for the interpreter, are cut into many chunks as inputs 1,000 times larger are on
the real GPU (there of about 16 tiles, here of one or two): a chunk's search of the boundaries
weighs at least what it weighs there. DRAM bytes count each boundary once: those a tile reads
past its own are read again by the next tile from L1 or L2, bounded apart. One program walking
16 tiles reads each tile's boundaries in a few operations (dependent round trips at most).

A scan whose segments span whole chunks reads those chunks twice, the second time from L2 (the
chunk's tail is published before its carry is known, as the chunked scan does): bounded here by
2 reads of x + 1 write."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import tritonml
from benchmarks import segment_oracle
from tritonml.bench.memtrace import trace_memory
from tritonml.launchers import segment as S
from tritonml.records.builtin_scans import SUM
from tritonml.records.builtin_reductions import record_of
from tritonml_autotune import devices
from tritonml_autotune.configs import SegmentConfig

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET,
                                reason="bytes are counted in Triton's interpreter")
BYTES_BOUND = 1.05
AXIS_LEN = 1 << 14
SMALL_H100 = dataclasses.replace(devices.H100, name="H100 with 4 SMs", sms=4)


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


# A tile reads its boundaries in vector loads sized by the count of the tile before; those read
# past its last one are read again by the next tile of the same program, a step later: on a GPU
# from L1 or L2, not DRAM. DRAM bytes count each boundary once; the re-reads are bounded apart,
# as a share of the ideal bytes (most where lengths vary most from tile to tile: a power law).
MAX_BOUNDARY_REREAD = 0.15


def _dram_bytes(trace, ideal: int, kind: str) -> int:
    """The traffic with each boundary counted once, after checking the boundaries' re-reads."""
    reread = trace.by_region("offsets")["load"] - trace.distinct_bytes("offsets", "load")
    assert reread <= MAX_BOUNDARY_REREAD * ideal, f"{kind}: {reread / ideal:.3f} x ideal re-read"
    return trace.total_bytes - reread


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("shape,axis", [((AXIS_LEN,), 0), ((AXIS_LEN, 4), 0)])
def test_a_segmented_reduction_moves_each_byte_once(kind, shape, axis):
    offsets = torch.from_numpy(_lengths(kind))
    x = torch.rand(shape, dtype=torch.float32)
    with devices.targeting(SMALL_H100), trace_memory({"x": x, "offsets": offsets}) as trace:
        out, = S.segment_reduce_axis(x, record_of("SUM"), offsets, axis)
    ideal = _ideal(x, out, offsets)
    assert trace.by_region("x")["load"] == x.numel() * 4 == trace.distinct_bytes("x", "load")
    assert len(trace.kernels) == 1 and trace.torch_work == []
    moved = _dram_bytes(trace, ideal, kind)
    assert moved <= BYTES_BOUND * ideal, (
        f"{kind}: moved {moved} bytes, {moved / ideal:.4f} x ideal")
    want = segment_oracle.segment_reduce_expected(x, "SUM", offsets.tolist(), axis)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_a_segmented_scan_moves_each_byte_once(kind):
    offsets = torch.from_numpy(_lengths(kind))
    x = torch.rand(AXIS_LEN, dtype=torch.float32)
    with devices.targeting(SMALL_H100), trace_memory({"x": x, "offsets": offsets}) as trace:
        out = S.segment_scan_axis(x, SUM, offsets, 0)
    ideal = _ideal(x, out, offsets)
    # segments spanning chunks: their chunks are read twice
    reads = 2 if kind in ("long", "power law") else 1
    assert trace.by_region("x")["load"] <= reads * BYTES_BOUND * x.numel() * 4
    assert len(trace.kernels) == 1 and trace.torch_work == []
    bound = BYTES_BOUND * (ideal + (reads - 1) * x.numel() * 4)
    moved = _dram_bytes(trace, ideal, kind)
    assert moved <= bound, f"{kind}: moved {moved} bytes, {moved / ideal:.4f} x ideal"
    want = segment_oracle.segment_scan_reference(x, "sum", offsets.tolist(), 0, False, False)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


# One program walking all 16 tiles of AXIS_LEN (a chunk as long as an H100's on 2**24 elements):
# the operations that read the boundaries, per tile, are the longest chain of dependent round
# trips a tile can wait on before its data.
WALK = SegmentConfig(1024, 1, chunk_tiles=16, window=16, boundary_block=1024, num_warps=8,
                     fold_tiles=4)
# A galloping search of scalars from the tile before took 17 to 23 operations a tile here.
MAX_BOUNDARY_OPERATIONS_PER_TILE = 6


@pytest.mark.parametrize("kind", ("short", "with empties"))
@pytest.mark.parametrize("op", ("reduce", "scan", "reversed exclusive scan"))
def test_a_walk_reads_each_tiles_boundaries_in_a_few_operations(kind, op):
    offsets = torch.from_numpy(_lengths(kind))
    x = torch.rand(AXIS_LEN, dtype=torch.float32)
    with trace_memory({"x": x, "offsets": offsets}) as trace:
        if op == "reduce":
            out, = S.segment_reduce_axis(x, record_of("SUM"), offsets, 0, config=WALK)
        else:
            reverse = op == "reversed exclusive scan"
            out = S.segment_scan_axis(x, SUM, offsets, 0, reverse=reverse, exclusive=reverse,
                                      config=WALK)
    tiles = AXIS_LEN // WALK.block_axis
    per_tile = trace.operations("offsets", "load") / tiles
    assert per_tile <= MAX_BOUNDARY_OPERATIONS_PER_TILE, f"{kind} {op}: {per_tile} a tile"
    _dram_bytes(trace, _ideal(x, out, offsets), kind)
    if op == "reduce":
        want = segment_oracle.segment_reduce_expected(x, "SUM", offsets.tolist(), 0)
        torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    else:
        want = segment_oracle.segment_scan_reference(x, "sum", offsets.tolist(), 0, reverse,
                                                     reverse)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)
