"""Every scan specialization the launcher can choose on a GPU compiles for sm_80 and sm_90 (no GPU
needed), and the compiled code is what the design says: 128-bit global accesses for aligned
contiguous float32 data, no spills.

One subprocess per core runs compiled Triton (``tritonml/bench/gpu_compile.py``); the cases come
from tests/gpu_compile_cases.py: regime (rows, columns, look-back, the tuner's taller look-back
tile) x dtype x direction x exclusive = 192 launches per arch, plus the ``initial=`` carry-in's
(HAS_INITIAL) launches for float32 and int32 in every regime (32 per arch). The chunked regime's
tiles (the tuner's, ``gpu_compile_cases.CHUNKED_TILES``) are compiled apart: sums in every dtype
class, both directions, inclusive and exclusive, initial and carry, products and tuple states (108
launches per arch).
"""
from __future__ import annotations

import os
import sys
import time

import pytest

from tritonml.bench.gpu_compile import compile_in_subprocess, run_workers
from tests.gpu_compile_cases import (CHUNKED_DTYPES, INITIAL_DTYPES, all_chunked_launches,
                                     carry_scan_launches, initial_scan_launches, scan_launches)
from tests import triton_releases
from tests.timing import limit
from tritonml_autotune.devices import ARCHS


@pytest.fixture(scope="module")
def compiled_scans():
    return compile_in_subprocess(scan_launches() + initial_scan_launches(), archs=ARCHS)


def test_every_scan_specialization_compiles_for_sm80_and_sm90(compiled_scans):
    failures = [(r["case"], r["arch"], r.get("error")) for r in compiled_scans if not r["ok"]]
    assert not failures, failures[:5]
    covered = {(r["case"]["regime"], r["case"]["dtype"], r["case"]["reverse"], r["case"]["exclusive"],
                r["case"]["initial"], r["arch"]) for r in compiled_scans}
    assert len(covered) == 4 * 12 * 2 * 2 * 2 + 4 * len(INITIAL_DTYPES) * 2 * 2 * 2


def test_scans_that_return_their_carry_compile_for_sm80_and_sm90_without_spills():
    results = compile_in_subprocess(carry_scan_launches(), archs=ARCHS)
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
                if (r.get("local_bytes", 0) or r.get("stack_bytes", 0) > MAX_STACK_BYTES)
                and not triton_releases.allowed_lookback_spill(r)]
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
# The chunked scan (scan_chunked_kernel): its tiles, windows and specializations
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compiled_chunked():
    # The compiling process imports tests.gpu_compile_cases to find the tuple combines (its path
    # starts at the repository root: tritonml/bench/gpu_compile.py).
    return compile_in_subprocess(all_chunked_launches(), archs=ARCHS)


def test_every_chunked_specialization_compiles_for_sm80_and_sm90(compiled_chunked):
    failures = [(r["case"], r["arch"], r.get("error")) for r in compiled_chunked if not r["ok"]]
    assert not failures, failures[:5]
    assert {r["kernel"] for r in compiled_chunked} == {"scan_chunked_kernel"}
    sums = {(c["regime"], c["dtype"], c["reverse"], c["exclusive"], r["arch"])
            for r in compiled_chunked for c in [r["case"]]
            if c.get("combine") == "sum" and c["regime"] in ("chunked rows", "chunked columns")
            and not c["initial"]}
    assert len(sums) == 2 * len(CHUNKED_DTYPES) * 2 * 2 * 2
    carries = [r for r in compiled_chunked if r["case"].get("carry")]
    assert len(carries) == 2 * len(INITIAL_DTYPES) * 2 * 2
    assert {r["case"]["state"] for r in compiled_chunked if "state" in r["case"]} == {
        "linear float32", "linear float32 flagged", "matrix float32"}
    # the built-in sum and product fold element by element, a user's combine tile by tile
    assert {r["case"]["commutative"] for r in compiled_chunked if "state" in r["case"]} == {False}
    assert {r["case"]["commutative"] for r in compiled_chunked if "combine" in r["case"]} == {True}


# What ptxas may keep in a chunked specialization's stack frame: 3 of the 216 compiles park one
# to four 32-bit values there across the loops at 72-128 registers (sm_90: linear float32
# flagged, reverse, 16 bytes; the 4x4 matrix state, exclusive, and a float32 column tile with
# initial and carry, 8 bytes each), touched only outside every loop. Register pressure would show
# as more registers, local memory, or frame accesses inside the streaming loops.
MAX_CHUNKED_STACK_BYTES = 16


def test_chunked_scans_do_not_spill(compiled_chunked):
    spilling = [(r["case"], r["arch"], r.get("registers"), r.get("stack_bytes"),
                 r.get("local_bytes"), r.get("local_accesses_in_loops"))
                for r in compiled_chunked
                if (r.get("local_bytes", 0) or r["local_accesses_in_loops"]
                    or r.get("stack_bytes", 0) > MAX_CHUNKED_STACK_BYTES)
                and not triton_releases.allowed_chunked_stack(r)]
    assert not spilling, spilling[:5]
    assert max(r["registers"] for r in compiled_chunked) < 255


def test_chunked_streaming_loops_move_128_bit_vectors(compiled_chunked):
    """Aligned float32 and float16 data: the fold's loads (the first read, ``evict_last``) and the
    stores are 128-bit vectors in every tile; so are the second read's loads (``evict_first``)
    except for exclusive scans along a contiguous axis, whose window is shifted by one element
    (docs/scan.md). A 4-component float32 state's tile gives each thread 2 elements: 64 bits."""
    checked = 0
    for r in compiled_chunked:
        case = r["case"]
        if case["dtype"] not in ("float32", "float16"):
            continue
        widest = 64 if case.get("arity") == 4 else 128
        loads = r["load_bits_by_eviction"]
        assert r["max_store_bits"] == widest, (case, r["arch"])
        assert loads["evict_last"] == widest, (case, r["arch"], loads)
        if not (case["exclusive"] and case["contiguous"]):
            assert loads["evict_first"] == widest, (case, r["arch"], loads)
        checked += 1
    assert checked >= 100


def test_the_ptx_reader_sees_loads_with_eviction_hints():
    from types import SimpleNamespace

    from tritonml.bench.gpu_compile import summarize

    ptx = "\n".join([
        "@%p6 ld.global.L1::evict_last.L2::cache_hint.v4.b32 { %r65, %r66, %r67, %r68 }, "
        "[ %rd22 + 0 ], %rd23;",
        "@%p44 ld.global.L1::evict_first.L2::cache_hint.v2.b32 { %r6, %r7 }, [ %rd4 + 0 ], %rd9;",
        "@%p31 ld.global.cg.b64 { %rd275 }, [ %rd276 + 0 ];",
        "@%p3 st.global.v4.b32 [ %rd17 + 0 ], { %r65, %r66, %r67, %r68 };"])
    compiled = SimpleNamespace(asm={"ptx": ptx, "cubin": b""},
                               metadata=SimpleNamespace(num_warps=4, shared=0))
    summary = summarize(compiled)
    assert summary["max_load_bits"] == 128 and summary["max_store_bits"] == 128
    assert summary["load_bits_by_eviction"] == {"evict_last": 128, "evict_first": 64, "none": 64}


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
        compile_in_subprocess([{"kernel": "none"}], archs=(80,), timeout=limit(3),
                              command=(sys.executable, "-c", child))
    assert time.monotonic() - start < limit(60)  # killed at the timeout, not after the sleep
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(int(pid_file.read_text()), 0)


def test_a_failing_worker_raises_with_the_end_of_its_stderr():
    child = "import sys; sys.stderr.write('x' * (1 << 20) + 'the reason'); sys.exit(3)"
    with pytest.raises(RuntimeError, match="exited with 3:\nx*the reason$"):
        run_workers((sys.executable, "-c", child), [""], timeout=limit(60))


def test_workers_run_the_module_from_any_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert compile_in_subprocess([], archs=(80,), timeout=limit(300)) == []


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


def test_local_accesses_in_loops_counts_only_those_inside_a_loop():
    from tritonml.bench.gpu_compile import local_accesses_in_loops

    parked = ["STL [R1], R0",                            # before the loop: parked
              "LDG.E R2, desc[UR4][R4.64]",              # 0x10: the loop starts here
              "LDL R3, [R1]",                            # inside: counted
              "@P0 BRA 0x10",
              "LDL R5, [R1]",                            # after: not counted
              "EXIT"]
    assert local_accesses_in_loops(_sass(parked)) == 1
    assert local_accesses_in_loops(_sass(parked[:2] + parked[3:])) == 0
    assert local_accesses_in_loops(_sass(LOOP_TWO_THEN_ONE)) == 0


def test_loads_in_flight_of_a_compiled_reduction_is_read_for_sm90():
    """The summary of a real compile carries the count (the cost model reads it from
    autotune/tables/compiled.json): a float32 row reduction's loop issues 128-bit loads, at least
    one of them in flight."""
    from tests.reduce_helpers import dedupe, gpu_reduce_launches

    descriptions = dedupe(gpu_reduce_launches([("rows", "SUM", __import__("torch").float32)]))
    (result,) = compile_in_subprocess(descriptions, archs=(90,))
    assert result["ok"], result.get("error")
    assert 1 <= result["loads_in_flight"] <= 16
