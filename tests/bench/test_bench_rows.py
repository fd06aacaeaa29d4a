"""``tritonml bench`` when a case fails: the case becomes a row saying so, in the CSV, the JSON
and the markdown, and every other case is still measured and written. And the README's command,
``tritonml bench --quick``, run as a user runs it (the console script, from a fresh folder) on
the case whose dry run crashed it (the one-pass segment_coo);
tests/bench/test_bench_readme_command.py runs it whole."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
import torch

import tritonml  # first: chooses interpreted Triton on a machine without CUDA
from tritonml import cli
from tritonml.bench import cases, gpu_compile, timing
from tritonml.launchers import scan as scan_launchers
from tritonml.runtime import trace
from tests.timing import limit

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="bytes are counted in Triton's "
                                                                 "interpreter")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CASES = ("--cases", "scan-square-last,reduce-rows", "--dtypes", "float32,float16")


def _ideal(entry: str, dtype: str) -> int:
    """Contiguous scan along the last axis: read x, write out; reduction over rows: read x, write
    one per row."""
    rows, cols = cases.ENTRIES[entry].quick_shape
    itemsize = {"float32": 4, "float16": 2}[dtype]
    if entry == "scan-square-last":
        return 2 * rows * cols * itemsize
    return rows * cols * itemsize + rows * itemsize


def _outputs(directory):
    with open(directory / "bench.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(directory / "bench.json") as f:
        document = json.load(f)
    return rows, document, (directory / "bench.md").read_text()


def _assert_the_others_measured(rows, failed):
    assert [(r["entry"], r["dtype"]) for r in rows] == [
        ("scan-square-last", "float32"), ("scan-square-last", "float16"),
        ("reduce-rows", "float32"), ("reduce-rows", "float16")]
    for r in rows:
        if (r["entry"], r["dtype"]) == failed:
            assert r["status"] == "failed"
            continue
        assert r["status"] == "ok", r
        assert int(r["ideal_bytes"]) == _ideal(r["entry"], r["dtype"])
        assert int(r["bytes_moved"]) == _ideal(r["entry"], r["dtype"])  # both move the ideal


def test_a_case_that_fails_in_its_dry_run_is_a_row_and_the_others_are_written(
        tmp_path, monkeypatch, capsys):
    """As a read-back of a kernel's writes did in a dry run: the case raises only while its
    launches are described for the compile facts."""
    real = scan_launchers.cumulative_scan

    def cumulative_scan(x, *args, **kwargs):
        if trace.dry_run() and x.dtype == torch.float16:
            raise RuntimeError("stand-in: read what the dry run never wrote")
        return real(x, *args, **kwargs)

    monkeypatch.setattr(scan_launchers, "cumulative_scan", cumulative_scan)
    directory = tmp_path / "out"
    code = cli.main(["bench", "--quick", *CASES, "--no-plots", "--output", str(directory)])
    assert code == 1
    rows, document, markdown = _outputs(directory)
    _assert_the_others_measured(rows, ("scan-square-last", "float16"))
    note = "counting: RuntimeError: stand-in: read what the dry run never wrote"
    (failed,) = [r for r in rows if r["status"] == "failed"]
    assert failed["note"] == note
    (failed_json,) = [r for r in document["rows"] if r["status"] == "failed"]
    assert failed_json["note"] == note and "cumulative_scan" in failed_json["traceback"]
    # the rows that ran compiled their launches for sm_90 (the failure cost them nothing)
    assert all(int(r["load_bits"]) == 128 for r in rows if r["status"] == "ok")
    assert f"- scan-square-last cumulative_sum float16: {note}" in markdown
    rows_, cols = cases.ENTRIES["scan-square-last"].quick_shape
    assert f"| scan-square-last | cumulative_sum | float16 | {rows_}x{cols} | 1 | failed |" \
        in markdown
    err = capsys.readouterr().err
    assert "1 of 4 cases failed" in err and "scan-square-last cumulative_sum float16" in err


def test_a_case_that_fails_while_timed_is_a_row_and_the_others_are_written(tmp_path,
                                                                           monkeypatch):
    real, timed = timing.time_prepared, []

    def time_prepared(prepared, dry_run):
        timed.append(prepared)
        if len(timed) == 4:   # the last case, reduce-rows float16
            raise torch.cuda.OutOfMemoryError("stand-in: out of memory")
        return real(prepared, dry_run=dry_run)

    monkeypatch.setattr(timing, "time_prepared", time_prepared)
    directory = tmp_path / "out"
    code = cli.main(["bench", "--quick", *CASES, "--no-compile", "--no-plots",
                     "--dry-run-timing", "--output", str(directory)])
    assert code == 1
    rows, _, markdown = _outputs(directory)
    _assert_the_others_measured(rows, ("reduce-rows", "float16"))
    assert all(float(r["tritonml_ms"]) > 0 for r in rows if r["status"] == "ok")
    (failed,) = [r for r in rows if r["status"] == "failed"]
    assert failed["note"] == "timing: OutOfMemoryError: stand-in: out of memory"
    # what it counted before the timing failed is kept
    assert int(failed["bytes_moved"]) == _ideal("reduce-rows", "float16")
    assert "- reduce-rows SUM float16: timing: OutOfMemoryError" in markdown


def test_compile_processes_that_fail_leave_every_row_measured_and_say_why(tmp_path,
                                                                          monkeypatch):
    def compile_in_subprocess(*args, **kwargs):
        raise subprocess.TimeoutExpired(["ptxas"], 3600)

    monkeypatch.setattr(gpu_compile, "compile_in_subprocess", compile_in_subprocess)
    directory = tmp_path / "out"
    code = cli.main(["bench", "--quick", *CASES, "--no-plots", "--output", str(directory)])
    assert code == 0
    rows, _, _ = _outputs(directory)
    _assert_the_others_measured(rows, None)
    for r in rows:
        assert r["load_bits"] == "" and r["sm90_compile_error"].startswith("TimeoutExpired")


def test_the_readmes_command_runs_the_one_pass_segment_coo_from_a_fresh_folder(tmp_path):
    """``tritonml bench --quick`` as the README writes it, on the case that crashed it: the
    one-pass segment_coo, whose dry run read back its kernel's facts (the other read-backs'
    dry runs: tests/runtime/test_dry_runs.py)."""
    script = os.path.join(os.path.dirname(sys.executable), "tritonml")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([script, "bench", "--quick", "--cases",
                           "scatter-gnn-segment_coo-f1", "--ops", "sum",
                           "--no-plots"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=limit(600))
    assert done.returncode == 0, done.stderr[-3000:]
    rows, _, _ = _outputs(tmp_path / "bench-results")
    assert [(r["entry"], r["op"], r["status"]) for r in rows] == [
        ("scatter-gnn-segment_coo-f1", "sum", "ok")]
    for r in rows:
        assert int(r["registers"]) > 0 and r["sm90_compile_error"] == ""
