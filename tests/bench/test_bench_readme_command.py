"""The README's benchmark command, ``tritonml bench --quick``, run whole as a user runs it: the
console script from a fresh folder, every case of the suite. It takes minutes in Triton's
interpreter (11 min 15 s on a busy 2-core machine), so it is in the full tier only
(tests/conftest.py, FULL_ONLY); tests/bench/test_bench_rows.py runs the same command on the cases
that crashed it."""
from __future__ import annotations

import csv
import os
import re
import subprocess
import sys

import pytest

import tritonml  # first: chooses interpreted Triton on a machine without CUDA
from tritonml.bench import cases
from tests.timing import limit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMAND = "tritonml bench --quick"

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="bytes are counted in Triton's "
                                                                 "interpreter")


@pytest.mark.source_tree
def test_the_readmes_bench_command_runs_every_case_of_the_suite(tmp_path):
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    assert re.search(rf"`{re.escape(COMMAND)}`", readme), "the README names the command"
    script = os.path.join(os.path.dirname(sys.executable), "tritonml")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([script, *COMMAND.split()[1:]], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=limit(1800))
    assert done.returncode == 0, done.stderr[-3000:]
    with open(tmp_path / "bench-results" / "bench.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    # every (entry, op, dtype) of the suite, in its order, each measured
    assert [(r["entry"], r["op"], r["dtype"]) for r in rows] == [
        (entry.name, op, cases.dtype_text(dtype))
        for entry in cases.SUITE for op in entry.ops for dtype in entry.dtypes]
    assert {r["status"] for r in rows} == {"ok"}, [r for r in rows if r["status"] != "ok"]
    assert all(r["sm90_compile_error"] == "" for r in rows)
    assert {p.name for p in (tmp_path / "bench-results").iterdir()} >= {
        "bench.csv", "bench.json", "bench.md", "bench_bytes.png", "bench_modeled.png"}
