"""The segment kernel compiles for sm_80 and sm_90 in the specializations a GPU runs
(tests/segment_compile_cases.py), without a GPU: no spill beyond ``MAX_SEGMENT_STACK_BYTES``,
at most ``MAX_LOCAL_ACCESSES_IN_LOOPS`` local-memory accesses in a loop, and, where x's axis is
contiguous, loads of x as wide as its tile allows (128 bits, or a thread's four lanes of 8 or 16
bits in a 1-D tile)."""
import pytest
import torch

import tritonml
from tests.segment_compile_cases import segment_launches
from tritonml.bench.gpu_compile import compile_in_subprocess

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="compiles for a GPU without one")

# Not yet the "no spills" the kernel should reach: where a specialization needs a little more
# than 48, 64, 80 or 128 registers a thread (8 warps: five to two programs per SM), ptxas holds it
# there and keeps up to 40 bytes of spills in the stack frame (the 1-D scans, 8 or 16 bytes read
# outside loops; the tiles of many rows and of a strided axis: LOG_SUM_EXP, 64-bit integer scans,
# the sum scans on sm_80), a few of them read inside loops (docs/segments.md). The 1-D
# reductions, whose config sets ``maxnreg``, spill nowhere. These are the measured ceilings, so
# that growth is caught.
MAX_SEGMENT_STACK_BYTES = 40
MAX_LOCAL_ACCESSES_IN_LOOPS = 7


@pytest.fixture(scope="module")
def compiled_segments():
    return compile_in_subprocess(segment_launches(), archs=(80, 90), timeout=1800)


def test_every_segment_specialization_compiles_for_sm80_and_sm90(compiled_segments):
    failed = [(r["case"], r["arch"], r.get("error", "")[-300:]) for r in compiled_segments
              if not r.get("ok", True) or r.get("error")]
    assert not failed, failed[:3]


def test_segment_kernels_spill_no_more_than_measured_on_sm80_and_sm90(compiled_segments):
    spilling = [(r["case"], r["arch"], r.get("registers"), r.get("stack_bytes"))
                for r in compiled_segments
                if r.get("local_bytes", 0)
                or r.get("local_accesses_in_loops", 0) > MAX_LOCAL_ACCESSES_IN_LOOPS
                or r.get("stack_bytes", 0) > MAX_SEGMENT_STACK_BYTES]
    assert not spilling, spilling[:5]


def _widest_load_bits(result) -> int:
    """The widest load of x a tile allows: 128 bits, or all of a thread's lanes of a 1-D tile
    (four 8-bit or 16-bit elements are 32 or 64 bits)."""
    if result["case"]["layout"] != "flat":
        return 128
    meta = result["meta"]
    lanes = meta["BLOCK_AXIS"] * meta["BLOCK_INNER"] // (32 * meta["num_warps"])
    return min(128, lanes * getattr(torch, result["case"]["dtype"][6:]).itemsize * 8)


def test_one_dimensional_reductions_do_not_spill_on_sm80_and_sm90(compiled_segments):
    spilling = [(r["case"], r["arch"], r.get("registers"), r.get("stack_bytes"))
                for r in compiled_segments
                if r["case"]["layout"] == "flat" and "reverse" not in r["case"]
                and (r.get("stack_bytes", 0) or r.get("local_bytes", 0))]
    assert not spilling, spilling[:5]


def test_segment_rows_load_128_bit_vectors_on_sm80_and_sm90(compiled_segments):
    narrow = [(r["case"], r["arch"], r["max_load_bits"]) for r in compiled_segments
              if r["case"]["layout"] in ("flat", "rows")
              and r["max_load_bits"] < _widest_load_bits(r)]
    assert not narrow, narrow[:5]
