"""What ``tritonml bench`` measures without a GPU: bytes, launches, compiled code, modeled time.

- ``count``: runs the op once in Triton's interpreter under ``memtrace.trace_memory``: the exact
  global-memory bytes (mask-true lanes x element size, plus torch-side fills and copies) per
  launch, the programs of each launch, the launches a GPU would see.
- ``modeled_seconds``: the repository's one time model, ``tritonml_autotune.model`` (bytes at the
  target's copy bandwidth, a launch of fewer programs than SMs getting that fraction of it, plus a
  launch overhead each), fed the counted (bytes, programs) of every launch; compared with
  ``model.ideal_seconds`` (the ideal bytes in one launch at full bandwidth). Modeled, not measured.
- ``describe_launches`` / ``compile_facts``: the launches recorded without running
  (``tritonml.runtime.trace.record(execute=False)``) and compiled for sm_90 in a compiled-mode
  subprocess (``gpu_compile``): widest global load and store, registers, spills.
"""
from __future__ import annotations

import json
import time

from tritonml_autotune import devices

from .. import tuning
from ..runtime import trace as _trace

from . import gpu_compile
from .memtrace import OTHER_REGION, trace_memory

# The suite's targets (reported per row as pass/miss; docs/performance.md).
BYTES_BOUND = 1.05          # bytes moved <= 1.05 x ideal (tests/bench/test_bytes_moved.py's bound)
LAUNCH_BOUND = 2            # launches per entry
TIME_BOUND = 1.25           # modeled time <= 1.25 x one ideal launch (tests/autotune/test_fill_the_gpu.py)
VECTOR_BITS = 128           # global loads (and a scan's stores) of aligned contiguous f32/f16
COPY_FRACTION = 0.85        # on a GPU: >= 85% of copy bandwidth for large scans/reductions
LARGE_BYTES = 64 << 20      # "large": ideal bytes of at least 64 MiB
COMPILE_ARCHS = (devices.H100.arch,)  # the suite's target GPU


def count(prepared, target: str) -> tuple:
    """Run ``prepared`` once under the memory trace with configs chosen for ``target``; return
    (row fields, the result, the trace)."""
    start = time.perf_counter()
    with tuning.target(target):
        with trace_memory(prepared.regions) as trace:
            result = prepared.counted_run()
    seconds = time.perf_counter() - start
    # The re-reads (the chunked scan's second pass over its chunk) are reported apart: a GPU
    # serves them from L2, so the bytes compared with the ideal and fed to the time model are
    # each launch's first touches.
    launches = [{"kernel": k.name, "programs": _programs(k.grid), "bytes": k.first_touch_bytes,
                 "reread_bytes": k.reread_bytes} for k in trace.kernels]
    launches += [{"kernel": f"torch {w.kind}", "programs": None, "bytes": w.bytes}
                 for w in trace.torch_work]
    moved = trace.total_bytes - trace.reread_bytes
    return ({"bytes_moved": moved,
             "bytes_ratio": moved / prepared.ideal_bytes,
             "reread_bytes": trace.reread_bytes,
             "launches": trace.launches,
             "programs": "+".join(str(launch["programs"] or "torch") for launch in launches),
             "workspace_bytes": sum(trace.by_region(OTHER_REGION).values())
             + sum(w.bytes for w in trace.torch_work),
             "launch_detail": launches,
             "interpreter_seconds": round(seconds, 3)}, result, trace)


def _programs(grid) -> int:
    programs = 1
    for size in grid:
        programs *= int(size)
    return programs


def modeled_seconds(target: str, launch_detail: list) -> float:
    """The time model (``tritonml_autotune.model``) over the counted launches. A torch-side fill or
    copy is modeled as a launch that keeps every SM busy."""
    from tritonml_autotune import devices, model

    device = devices.lookup(target, "--target")
    return model.modeled_seconds(device, [(launch["bytes"], launch["programs"] or device.sms)
                                          for launch in launch_detail])


def ideal_seconds(target: str, ideal_bytes: int) -> float:
    from tritonml_autotune import devices, model

    return model.ideal_seconds(devices.lookup(target, "--target"), ideal_bytes)


def describe_launches(run, target=None) -> list:
    """The kernel launches ``run()`` makes, described for compilation (nothing is executed)."""
    with tuning.target(target):
        with _trace.record(execute=False) as recorder:
            run()
    return [gpu_compile.describe(launch) for launch in recorder.launches]


def compile_facts(rows: list, archs=COMPILE_ARCHS) -> None:
    """Compile each row's ``_descriptions`` (deduplicated over rows) in compiled-mode subprocesses;
    replace them with ``row["compiled"]``: per launch and arch, widest load/store, registers,
    spills."""
    unique: dict = {}
    for row in rows:
        row["_keys"] = [json.dumps(d, sort_keys=True) for d in row.get("_descriptions", ())]
        for key, desc in zip(row["_keys"], row.pop("_descriptions", ())):
            unique.setdefault(key, desc)
    keys = list(unique)
    results = gpu_compile.compile_in_subprocess([unique[k] for k in keys], archs=archs) if keys \
        else []
    by_key = {key: results[i * len(archs):(i + 1) * len(archs)] for i, key in enumerate(keys)}
    for row in rows:
        row["compiled"] = []
        for key in row.pop("_keys"):
            for entry in by_key[key]:
                row["compiled"].append({k: entry.get(k) for k in (
                    "kernel", "arch", "ok", "error", "max_load_bits", "max_store_bits",
                    "registers", "stack_bytes", "local_bytes", "shared_bytes", "num_warps")
                    if k in entry})


def compiled_summary(compiled: list) -> dict:
    """The row's compile facts in four numbers: the widest global load of the first launch (the one
    that reads the input), the widest store of the last (the one that writes the output; a split
    reduction's partial states in between are workspace), the most registers, spill bytes (stack +
    local) summed over launches; None when nothing compiled."""
    good = [c for c in compiled if c.get("ok")]
    if not good or len(good) != len(compiled):
        errors = [c.get("error") for c in compiled if not c.get("ok")]
        return {"load_bits": None, "store_bits": None, "registers": None, "spill_bytes": None,
                "sm90_compile_error": (errors[0] or "")[:200] if errors else None}
    return {"load_bits": good[0]["max_load_bits"],
            "store_bits": good[-1]["max_store_bits"],
            "registers": max((c.get("registers") or 0) for c in good) or None,
            "spill_bytes": sum((c.get("stack_bytes") or 0) + (c.get("local_bytes") or 0)
                               for c in good),
            "sm90_compile_error": None}


def verdicts(row: dict) -> dict:
    """pass / miss / n/a per target of the suite, from what the row holds (never asserted)."""
    def mark(ok):
        return "n/a" if ok is None else ("pass" if ok else "miss")

    counted = row.get("bytes_moved") is not None
    vector = None
    if row.get("load_bits") is not None and row["dtype"] in ("float32", "float16"):
        # A reduction's output is one element per program: only its loads must be vectors.
        stores_too = row["group"] == "scan"
        vector = row["load_bits"] >= VECTOR_BITS and (
            not stores_too or row["store_bits"] >= VECTOR_BITS)
    large = row["ideal_bytes_timed"] >= LARGE_BYTES
    copy_fraction = row.get("tritonml_copy_fraction")
    faster = None
    if row.get("tritonml_ms") is not None and row.get("eager_ms") is not None \
            and row["group"] == "scan" and not row["last_axis"]:
        faster = row["tritonml_ms"] < row["eager_ms"]
    return {
        "target_bytes": mark(row["bytes_ratio"] <= BYTES_BOUND if counted else None),
        "target_launches": mark(row["launches"] <= LAUNCH_BOUND if counted else None),
        "target_modeled_time": mark(row["modeled_ratio"] <= TIME_BOUND if counted else None),
        "target_vector_128": mark(vector),
        "target_no_spills": mark(None if row.get("spill_bytes") is None
                                 else row["spill_bytes"] == 0),
        "target_copy_bandwidth": mark(copy_fraction >= COPY_FRACTION
                                      if copy_fraction is not None and large else None),
        "target_faster_than_eager": mark(faster),
    }
