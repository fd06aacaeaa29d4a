"""``tritonml bench``'s scatter rows (tritonml/bench/scatter_cases.py): a run counts the eager
pipeline, reports the sort's bytes apart, and times torch's atomic kernels, its deterministic
mode and the sort apart (a CPU dry run: the path, not the numbers)."""
from __future__ import annotations

import csv

import pytest
import torch

import tritonml
from tritonml import cli
from tritonml.bench import cases, scatter_cases as C

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="bytes are counted in Triton's "
                                                                 "interpreter")


def test_indices_are_seeded_power_laws_in_range():
    index = C.gnn_index(C.QUICK_EDGES, C.QUICK_NODES)
    assert torch.equal(index, C.gnn_index(C.QUICK_EDGES, C.QUICK_NODES))
    assert int(index.min()) >= 0 and int(index.max()) < C.QUICK_NODES
    assert not bool((index.diff() >= 0).all())                  # edge order: unsorted
    counts = torch.bincount(index, minlength=C.QUICK_NODES)
    assert int(counts.max()) > 8 * C.EDGES_PER_NODE             # hubs
    ids = C.zipf_ids(4096, 128)
    assert int(torch.bincount(ids)[0]) > int(torch.bincount(ids, minlength=128)[-1]) * 20


def test_every_scatter_entry_has_the_issues_sizes():
    gnn = [e for e in cases.SUITE if e.scatter in ("scatter", "segment_coo")]
    assert sorted(e.shape for e in gnn) == sorted([(2 ** 22, w) for w in (1, 16, 64)] * 2)
    assert all(e.ops == ("sum", "mean", "max") for e in gnn)
    assert C.sizes("scatter", (2 ** 22, 16)).groups == 2 ** 18


def test_bench_rows_report_the_sort_apart_and_the_deterministic_peer(tmp_path):
    directory = tmp_path / "out"
    assert cli.main(["bench", "--quick", "--output", str(directory), "--cases",
                     "scatter-gnn-scatter-f1,scatter-gnn-segment_coo-f1", "--ops", "sum",
                     "--no-compile", "--no-plots", "--dry-run-timing"]) == 0
    with open(directory / "bench.csv", newline="") as f:
        rows = {r["entry"]: r for r in csv.DictReader(f)}
    unsorted, sorted_ = rows["scatter-gnn-scatter-f1"], rows["scatter-gnn-segment_coo-f1"]
    for r in (unsorted, sorted_):
        assert r["status"] == "ok" and float(r["tritonml_error"]) == 0.0
        assert float(r["eager_error"]) == 0.0 and float(r["deterministic_error"]) == 0.0
        assert float(r["deterministic_ms"]) > 0
    edges = C.QUICK_EDGES
    # counted: the keys' cast (int64 read, int32 written), the sort's input and outputs once
    # (int32 keys in and out, int64 positions out), the gather's order, src read and written
    assert int(unsorted["sort_bytes"]) == (8 + 4) * edges + (4 + 4 + 8) * edges + 8 * edges \
        + 2 * 4 * edges
    assert 0 < float(unsorted["sort_share_bytes"]) < 1 and float(unsorted["sort_ms"]) > 0
    assert sorted_["sort_bytes"] == "" and sorted_["sort_ms"] == ""
    text = (directory / "bench.md").read_text()
    assert "Scatter rows: the sort of an unsorted index" in text
