"""Every scan specialization the launcher can choose on a GPU compiles for sm_80 and sm_90 (no GPU
needed), and the compiled code is what the design says: 128-bit global accesses for aligned
contiguous float32 data, no spills.

One subprocess per core runs compiled Triton (``benchmarks/gpu_compile.py``); the cases come from
tests/gpu_compile_cases.py: regime (rows, columns, look-back, the tuner's taller look-back tile) x
dtype x direction x exclusive = 192 launches per arch, plus the ``initial=`` carry-in's
(HAS_INITIAL) launches for float32 and int32 in every regime (32 per arch).
"""
from __future__ import annotations

import os
import sys
import time

import pytest

from benchmarks.gpu_compile import compile_in_subprocess, run_workers
from gpu_compile_cases import (INITIAL_DTYPES, carry_scan_launches, initial_scan_launches,
                               scan_launches)


@pytest.fixture(scope="module")
def compiled_scans():
    return compile_in_subprocess(scan_launches() + initial_scan_launches(), archs=(80, 90))


def test_every_scan_specialization_compiles_for_sm80_and_sm90(compiled_scans):
    failures = [(r["case"], r["arch"], r.get("error")) for r in compiled_scans if not r["ok"]]
    assert not failures, failures[:5]
    covered = {(r["case"]["regime"], r["case"]["dtype"], r["case"]["reverse"], r["case"]["exclusive"],
                r["case"]["initial"], r["arch"]) for r in compiled_scans}
    assert len(covered) == 4 * 12 * 2 * 2 * 2 + 4 * len(INITIAL_DTYPES) * 2 * 2 * 2


def test_scans_that_return_their_carry_compile_for_sm80_and_sm90_without_spills():
    results = compile_in_subprocess(carry_scan_launches(), archs=(80, 90))
    failures = [(r["case"], r["arch"], r.get("error")) for r in results if not r["ok"]]
    assert not failures, failures[:5]
    assert {r["case"]["carry"] for r in results} == {True}
    assert len(results) == 4 * len(INITIAL_DTYPES) * 2 * 2
    spills = [(r["case"], r["arch"], r.get("stack_bytes"), r.get("local_bytes")) for r in results
              if r.get("local_bytes", 0) or r.get("stack_bytes", 0) > MAX_STACK_BYTES]
    assert not spills, spills


# ptxas keeps spills in the stack frame. Three look-back specializations (uint8/uint16 on sm_80)
# spill one 8-byte value at 32 registers (ptxas -v: "8 bytes spill stores"); anything larger is a
# regression. Noted in docs/scan.md.
MAX_STACK_BYTES = 8


def test_no_register_spills_beyond_one_value(compiled_scans):
    spilling = [(r["case"], r["arch"], r.get("stack_bytes"), r.get("local_bytes"))
                for r in compiled_scans
                if r.get("local_bytes", 0) or r.get("stack_bytes", 0) > MAX_STACK_BYTES]
    assert not spilling, spilling[:5]
    assert max(r["registers"] for r in compiled_scans) < 255


def test_aligned_contiguous_float32_accesses_are_128_bit_vectors(compiled_scans):
    for r in compiled_scans:
        case = r["case"]
        if case["dtype"] != "float32":
            continue
        # Stores are always aligned tiles. Inclusive loads too; exclusive loads read the tile's
        # window shifted by one element (docs/scan.md), so on a contiguous axis they are aligned
        # only to the element and stay scalar, still coalesced across the warp.
        assert r["max_store_bits"] == 128, (case, r["arch"])
        if not (case["exclusive"] and case["regime"] in ("rows", "lookback", "lookback tall")):
            assert r["max_load_bits"] == 128, (case, r["arch"])


# ---------------------------------------------------------------------------------------------
# The worker processes themselves
# ---------------------------------------------------------------------------------------------
def test_a_worker_that_floods_stderr_and_hangs_is_killed_at_the_timeout(tmp_path):
    pid_file = tmp_path / "pid"
    child = ("import os, sys, time\n"
             f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
             "sys.stderr.write('x' * (2 << 20))\n"
             "sys.stderr.flush()\n"
             "time.sleep(600)\n")
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="was killed"):
        compile_in_subprocess([{"kernel": "none"}], archs=(80,), timeout=3,
                              command=(sys.executable, "-c", child))
    assert time.monotonic() - start < 60
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(int(pid_file.read_text()), 0)


def test_a_failing_worker_raises_with_the_end_of_its_stderr():
    child = "import sys; sys.stderr.write('x' * (1 << 20) + 'the reason'); sys.exit(3)"
    with pytest.raises(RuntimeError, match="exited with 3:\nx*the reason$"):
        run_workers((sys.executable, "-c", child), [""], timeout=60)


def test_workers_run_the_module_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert compile_in_subprocess([], archs=(80,), timeout=300) == []


# ---------------------------------------------------------------------------------------------
# Reading the SASS: loads in flight in the busiest loop
# ---------------------------------------------------------------------------------------------
def _sass(lines):
    return "\n".join(f"        /*{16 * i:04x}*/   {text} ;   /* 0x0 */" for i, text in enumerate(lines))


LOOP_TWO_THEN_ONE = [
    "MOV R2, RZ",
    "@P0 LDG.E.128 R8, desc[UR4][R4.64]",      # 0x10: the loop starts here
    "@P1 LDG.E.128 R12, desc[UR4][R6.64]",     # two loads issued...
    "FADD R20, R8, R20",                       # ...before R8 is read
    "LDG.E R16, desc[UR4][R4.64+0x200]",
    "FADD R21, R16, R21",                      # one, read at once
    "IADD3 R4, P2, R4, 0x400, RZ",
    "@!P3 BRA 0x10",
    "STG.E desc[UR4][R30.64], R20",
    "EXIT",
]


def test_loads_in_flight_counts_the_loads_issued_before_one_is_read():
    from tritonml.bench.gpu_compile import loads_in_flight

    assert loads_in_flight(_sass(LOOP_TWO_THEN_ONE)) == 2
    # A store that reads a loaded register waits on the load as an ALU instruction does.
    serial = ["LDG.E.64 R8, desc[UR4][R4.64]", "STG.E.64 desc[UR4][R6.64], R8",
              "LDG.E.64 R10, desc[UR4][R4.64+0x8]", "STG.E.64 desc[UR4][R6.64+0x8], R10",
              "@P0 BRA 0x0"]
    assert loads_in_flight(_sass(serial)) == 1
    # Only loops count: straight-line loads are not a streaming loop.
    assert loads_in_flight(_sass(LOOP_TWO_THEN_ONE[:7] + ["EXIT"])) == 0
    # A load whose address comes from an earlier load (a pointer chase) waits for it.
    chase = ["LDG.E.64 R8, desc[UR4][R4.64]", "LDG.E R10, desc[UR4][R8.64]",
             "FADD R1, R10, R1", "@P0 BRA 0x0"]
    assert loads_in_flight(_sass(chase)) == 1


def test_loads_in_flight_of_a_compiled_reduction_is_read_for_sm90():
    """The summary of a real compile carries the count (the cost model reads it from
    autotune/tables/compiled.json): a float32 row reduction's loop issues 128-bit loads, at least
    one of them in flight."""
    from reduce_helpers import dedupe, gpu_reduce_launches

    descriptions = dedupe(gpu_reduce_launches([("rows", "SUM", __import__("torch").float32)]))
    (result,) = compile_in_subprocess(descriptions, archs=(90,))
    assert result["ok"], result.get("error")
    assert 1 <= result["loads_in_flight"] <= 16
