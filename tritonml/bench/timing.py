"""Timing on a GPU: tritonml, torch eager and torch.compile on the same inputs, and a copy; an
entry's further peers (``Prepared.peers``) and the parts of tritonml's run it times apart
(``Prepared.parts``: ``{name}_ms`` and ``{name}_share`` of tritonml's time) where it has them.

Each is timed with ``triton.testing.do_bench`` (median and the 20th/80th percentiles, ms) after a
warm-up call (the first call of a shape is where tritonml chooses, and on a GPU may time, its
config: docs/tuning.md). GB/s come from the entry's ideal bytes for all three, and from the same
bytes for ``Tensor.copy_`` (half of them read, half written): the fraction of copy bandwidth is the
copy's time over tritonml's, both measured in this run. Accuracy: the largest relative error of
each result against the float64 reference (integers: the result in tritonml's output dtype, which
wraps as tritonml's does).

``dry_run=True`` runs the same code on the CPU with a wall-clock timer and torch.compile's "eager"
backend (Inductor on a CPU would compile C++ for minutes): it exercises the path, its numbers mean
nothing and every row says so.
"""
from __future__ import annotations

import statistics
import time

import torch

from .cases import relative_error

QUANTILES = (0.5, 0.2, 0.8)


def _do_bench(fn) -> tuple:
    import triton.testing
    return tuple(triton.testing.do_bench(fn, quantiles=list(QUANTILES)))


def _wall_clock(fn, repeats: int = 3) -> tuple:
    """(median, 20th, 80th percentile) ms of a few plain calls: the dry run's stand-in."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return (statistics.median(times), times[0], times[-1])


def _accuracy(result, reference, out_dtype) -> float:
    if out_dtype is not None and result.dtype != out_dtype:
        result = result.to(out_dtype)  # torch's integer sums widen; tritonml's wrap
    return relative_error(result, reference)


def time_prepared(prepared, dry_run: bool) -> dict:
    """Time one prepared entry: the row's timing fields."""
    timer = _wall_clock if dry_run else _do_bench
    reference = prepared.reference().to(prepared.inputs[0].device)
    ours = prepared.run()  # warm-up: chooses (and may tune) the config
    out_dtype = ours.dtype
    row = {"timing": "dry run on the CPU: numbers meaningless" if dry_run
           else f"do_bench on {torch.cuda.get_device_name()}",
           "tritonml_error": _accuracy(ours, reference, out_dtype)}
    compiled = torch.compile(prepared.torch_fn, backend="eager" if dry_run else "inductor",
                             dynamic=False)
    runs = {"tritonml": prepared.run, "eager": prepared.torch_run,
            "compile": lambda: compiled(*prepared.inputs)}
    if prepared.compile_note:
        del runs["compile"]
        row["compile_note"] = prepared.compile_note
    runs.update({name: (lambda peer=peer: peer(*prepared.inputs))
                 for name, peer in prepared.peers.items()})
    for name, fn in runs.items():
        try:
            if name != "tritonml":
                row[f"{name}_error"] = _accuracy(fn(), reference, out_dtype)
            median, low, high = timer(fn)
        except Exception as exc:  # torch lacks a form (reported, not hidden)
            row[f"{name}_note"] = f"{type(exc).__name__}: {exc}"[:200]
            continue
        row[f"{name}_ms"], row[f"{name}_ms_p20"], row[f"{name}_ms_p80"] = median, low, high
        row[f"{name}_gbps"] = prepared.ideal_bytes / (median * 1e-3) / 1e9
    # parts of tritonml's run timed apart (the sort of an unsorted scatter), with their share
    for name, fn in prepared.parts.items():
        row[f"{name}_ms"] = timer(fn)[0]
        if row.get("tritonml_ms"):
            row[f"{name}_share"] = row[f"{name}_ms"] / row["tritonml_ms"]
    half = max(1, prepared.ideal_bytes // 2)
    device = prepared.inputs[0].device
    source = torch.empty(half, dtype=torch.uint8, device=device)
    target = torch.empty_like(source)
    copy_ms = timer(lambda: target.copy_(source))[0]
    row["copy_ms"] = copy_ms
    row["copy_gbps"] = 2 * half / (copy_ms * 1e-3) / 1e9
    if row.get("tritonml_ms"):
        row["tritonml_copy_fraction"] = copy_ms / row["tritonml_ms"]
    return row
