"""``tritonml bench``'s segmented cases (tritonml/bench/segment_cases.py): the seeded length
distributions, the float64 references, and every case's results (tritonml's public function, the
launcher bytes are counted on, torch's peer) against the numpy loop over the segments
(benchmarks/segment_oracle.py); then the rows in a bench run, their ideal bytes from the lengths,
and the padded rows' bytes counted with the padding."""
from __future__ import annotations

import csv
import math

import pytest
import torch

import tritonml  # first: chooses interpreted Triton on a machine without CUDA
from benchmarks import segment_oracle
from tritonml import cli
from tritonml.bench import cases, segment_cases as S

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="bytes are counted in Triton's "
                                                                 "interpreter")
SMALL = 600   # elements: a few interpreted launches per case


@pytest.mark.parametrize("kind", S.LENGTH_KINDS)
@pytest.mark.parametrize("total", [SMALL, 2 ** 14])
def test_lengths_cover_the_axis_in_their_distribution(kind, total):
    lengths = S.segment_lengths(kind, total)
    assert lengths.dtype == torch.int64 and int(lengths.sum()) == total
    assert int(lengths.min()) >= 1
    assert torch.equal(lengths, S.segment_lengths(kind, total))             # seeded
    assert not torch.equal(lengths, S.segment_lengths(kind, total, seed=5))
    if kind == "short":
        assert int(lengths.max()) <= 3 and lengths.numel() >= total // 3
    elif kind == "long":
        assert lengths.numel() == 4 and int(lengths.min()) >= total // 8
    else:   # power law: mostly short, a few near the cap
        cap = math.isqrt(total)
        assert int(lengths.max()) <= cap and int(lengths.max()) >= cap // 2
        assert float((lengths <= 4).double().mean()) > 0.5


def test_bad_distribution_arguments_name_the_parameter():
    with pytest.raises(ValueError, match="^kind: "):
        S.segment_lengths("uniform", 100)
    with pytest.raises(ValueError, match="^total: "):
        S.segment_lengths("long", 3)


def _oracle(op, x, offsets):
    bounds = offsets.tolist()
    if op == S.SEGMENT_SCAN:
        return torch.from_numpy(segment_oracle.segment_scan_reference(x, "sum", bounds, 0, False,
                                                                      False))
    return segment_oracle.segment_reduce_expected(x, op, bounds, 0)


CASES = [(entry.name, op) for entry in cases.SUITE if entry.segments is not None
         for op in entry.ops]


@pytest.mark.parametrize("name, op", CASES)
def test_each_case_and_its_peer_match_the_oracle(name, op):
    entry = cases.ENTRIES[name]
    prepared = cases.prepare(entry, op, torch.float32, (SMALL,))
    x = prepared.inputs[0]
    x = x.values() if x.is_nested else x
    offsets = torch.cat([torch.zeros(1, dtype=torch.int64),
                         torch.cumsum(S.segment_lengths(entry.segments, SMALL), 0)])
    want = _oracle(op, x, offsets)
    reference = prepared.reference()
    if op == "ARGMAX":
        assert torch.equal(reference, want)
    else:   # exact float64 sums of the quantized values, rounded as the oracle rounds
        assert torch.equal(reference.to(want.dtype), want)
    n = offsets.numel() - 1
    out_bytes = (SMALL if op == S.SEGMENT_SCAN else n) * (8 if op == "ARGMAX" else 4)
    assert prepared.ideal_bytes == 4 * SMALL + 8 * (n + 1) + out_bytes
    runs = {"tritonml": prepared.run, "launcher": prepared.counted_run}
    if entry.group == "segment" and op == "ARGMAX":
        with pytest.raises(NotImplementedError, match="torch.segment_reduce has no argmax"):
            prepared.torch_run()
    else:
        runs["torch"] = prepared.torch_run
    for who, run in runs.items():
        got = run()
        if op == "ARGMAX":
            assert torch.equal(got, want), who
        else:
            cases.assert_close(got, want.to(torch.float64), torch.float32, f"{name} {op} {who}")


def test_bench_rows_count_segment_and_padded_bytes_and_time_their_peers(tmp_path):
    directory = tmp_path / "out"
    assert cli.main(["bench", "--quick", "--output", str(directory), "--cases",
                     "segment-reduce-long,padded-reduce-long", "--ops", "SUM,ARGMAX",
                     "--no-compile", "--no-plots", "--dry-run-timing"]) == 0
    with open(directory / "bench.csv", newline="") as f:
        rows = {(r["entry"], r["op"]): r for r in csv.DictReader(f)}
    assert set(rows) == {(e, op) for e in ("segment-reduce-long", "padded-reduce-long")
                         for op in ("SUM", "ARGMAX")}
    total = cases.ENTRIES["segment-reduce-long"].quick_shape[0]
    lengths = S.segment_lengths("long", total)
    n, longest = lengths.numel(), int(lengths.max())
    for (entry, op), r in rows.items():
        assert r["status"] == "ok" and float(r["tritonml_error"]) == 0.0
        ideal = 4 * total + 8 * (n + 1) + n * (8 if op == "ARGMAX" else 4)
        assert int(r["ideal_bytes"]) == ideal
        if entry.startswith("segment"):
            assert r["launches"] == "1" and float(r["bytes_ratio"]) <= 1.05
        else:   # the padding written, then read by the dense reduction, on top of x
            assert int(r["bytes_moved"]) >= 4 * total + 2 * 4 * n * longest
            assert r["target_bytes"] == "miss"
        assert float(r["tritonml_ms"]) > 0
    assert float(rows[("segment-reduce-long", "SUM")]["eager_error"]) == 0.0  # torch's own
    assert "no argmax" in rows[("segment-reduce-long", "ARGMAX")]["eager_note"]
    assert float(rows[("padded-reduce-long", "ARGMAX")]["eager_error"]) == 0.0
    assert "padded-reduce-long" in (directory / "bench.md").read_text()
