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
from gpu_compile_cases import INITIAL_DTYPES, initial_scan_launches, scan_launches


@pytest.fixture(scope="module")
def compiled_scans():
    return compile_in_subprocess(scan_launches() + initial_scan_launches(), archs=(80, 90))


def test_every_scan_specialization_compiles_for_sm80_and_sm90(compiled_scans):
    failures = [(r["case"], r["arch"], r.get("error")) for r in compiled_scans if not r["ok"]]
    assert not failures, failures[:5]
    covered = {(r["case"]["regime"], r["case"]["dtype"], r["case"]["reverse"], r["case"]["exclusive"],
                r["case"]["initial"], r["arch"]) for r in compiled_scans}
    assert len(covered) == 4 * 12 * 2 * 2 * 2 + 4 * len(INITIAL_DTYPES) * 2 * 2 * 2


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
