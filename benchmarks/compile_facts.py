"""Regenerate autotune/tables/compiled.json: registers and spills of the kernels, per tile, for sm_80 and sm_90.

    python -m benchmarks.compile_facts                  (from the repository root; no GPU needed)
    python -m benchmarks.compile_facts --only scan_chunked
                                                        (that kernel's entries only; the others'
                                                         are kept as the file has them)
    python -m benchmarks.compile_facts --check          (compile all, write nothing: exit 1 and
                                                         list each entry that differs, SASS
                                                         fingerprint included; --spread: a few)

The cost model (``tritonml_autotune.compiled``) reads the JSON instead of compiling at run time:
compiling one launch takes ptxas about a second, too slow for a config choice. Each entry is one
launch recorded with a forced config (``tritonml.runtime.trace.record(execute=False)``) and compiled
for both archs by ``tritonml/bench/gpu_compile.py`` (compiled Triton in worker processes, one per
core). A tool of the repository, not part of either installed package: it imports tritonml and the
tuner.
"""
from __future__ import annotations

import dataclasses
import itertools
import json
import time
from pathlib import Path

import torch

import tritonml  # noqa: F401  (first: chooses interpreted Triton, so recording runs nothing)
from tritonml.bench.gpu_compile import compile_in_subprocess, describe
from tritonml.core.dtypes import ACC_TORCH_DTYPE
from tritonml.launchers.reduce import ReduceFunction, reduce_axes
from tritonml.records.builtin_reductions import RECORDS
from tritonml.launchers.scan import SUM, cumulative_scan
from tritonml.launchers.segment import segment_reduce_axis, segment_reduce_ids, segment_scan_axis
from tritonml.records.builtin_reductions import record_of
from tritonml.runtime import trace as _trace
from tritonml_autotune import compiled, devices, spaces
from tritonml_autotune.configs import ReduceConfig, ScanConfig
from tritonml_autotune.heuristics import widest_window

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = "python -m benchmarks.compile_facts"
OUTPUT = ROOT / "autotune" / "tables" / compiled.FILE_NAME
ARCHS = devices.ARCHS
# Tile elements measured per kernel, with the warps the candidates use at that size
# (``tritonml_autotune.candidates``); lanes along the inner dim: 1, 8, 16, 32 and 128.
SCAN_ELEMENTS = (512, 1024, 2048)
REDUCE_ELEMENTS = (1024, 2048, 4096)
LANES = (1, 8, 16, 32, 128)
# The reduce functions that stand for each state class (compiled.STATE_CLASS).
REDUCE_FUNCTIONS = {"value": "SUM", "value+index": "ARGMAX"}
# The chunked scan's tiles are the ones the tuner's candidates choose (autotune/candidates.py):
# along a contiguous axis one lane, rows up to the accumulators' element budget
# (``spaces.GPU_SCAN``) and the tall 4096; along a strided one these lanes, as tall as the budget
# allows. (A tile the tuner never chooses would only blur the table, which keeps the worst entry
# per elements per thread.)
CHUNKED_ROWS = (1024, 2048, 4096)
CHUNKED_LANES = (32, 64, 128)
CHUNKED_ELEMENTS = (1024, 2048, 4096)
# The segment kernel's layouts (shape, axis): one contiguous axis (a tile of one lane) and a
# strided axis under a contiguous inner dim (a tile of many lanes). Its tile comes from the shape
# (autotune/segments.py), here as chosen for an H100, long enough that a program walks several
# tiles (a chunk of one tile specializes its walk to no loop at all: 2^20 elements of a 1-D x
# are one tile a program on an H100, and compiled to 159 registers where the walk takes 177).
SEGMENT_LAYOUTS = (((1 << 22,), 0), ((1 << 16, 256), 0))
# The fields an entry measures (the rest name the specialization).
MEASURED = ("registers", "spill_bytes", "loads_in_flight", "sass_sha256")


def _scan_launches(dtype, elements, lanes):
    x = torch.empty(256, 8192, dtype=dtype)
    block_axis = elements // lanes
    warps = compiled.scan_warps(elements)
    for kernel, regime, axis in (("scan_tiled", "rows" if lanes == 1 else "columns", 1 if lanes == 1 else 0),
                                 ("scan_lookback", "lookback", 1 if lanes == 1 else 0)):
        config = ScanConfig(regime, block_axis, lanes, warps)
        with _trace.record(execute=False) as rec:
            cumulative_scan(x, axis, SUM, config=config)
        yield kernel, "value", rec.launches[-1]


def _reduce_launches(dtype, elements, lanes):
    x = torch.empty(8192, 256, dtype=dtype) if lanes > 1 else torch.empty(256, 8192, dtype=dtype)
    axes = (0,) if lanes > 1 else (1,)
    warps = compiled.reduce_warps(elements)
    for state, function in REDUCE_FUNCTIONS.items():
        combine = RECORDS[ReduceFunction[function]]
        one = ReduceConfig("columns" if lanes > 1 else "rows", elements // lanes, lanes, warps)
        split = ReduceConfig("split", elements // lanes, lanes, warps, 8, min(64, 4096 // lanes),
                             one_launch=False)
        # The chain's last program folds the 8 partial states 8 at a time, as the candidates'
        # block_split (the next power of two of the splits) would.
        split_last = dataclasses.replace(split, one_launch=True, block_split=8)
        with _trace.record(execute=False) as rec:
            reduce_axes(x, axes, combine, config=one)
            reduce_axes(x, axes, combine, config=split)
            reduce_axes(x, axes, combine, config=split_last)
        first, split_first, partials, split_folding = rec.launches
        yield "reduce", state, first
        yield "reduce_split", state, split_first
        yield "reduce_partials", state, partials
        yield "reduce_split_last", state, split_folding



def _chunked_tiles(acc_bytes: int):
    """(block_axis, block_inner) of every chunked tile the tuner may choose for this
    accumulator size."""
    budget = spaces.GPU_SCAN.tile_budget(acc_bytes)
    for rows in CHUNKED_ROWS:
        if rows <= budget or rows == spaces.LOOKBACK_TALL_BLOCK_AXIS:
            yield rows, 1
    for lanes, elements in itertools.product(CHUNKED_LANES, CHUNKED_ELEMENTS):
        if elements <= max(budget, CHUNKED_ELEMENTS[0]):
            yield elements // lanes, lanes


def _chunked_launches(dtype):
    acc_bytes = ACC_TORCH_DTYPE[dtype].itemsize
    for block_axis, lanes in _chunked_tiles(acc_bytes):
        x = torch.empty(256, 8192, dtype=dtype)
        axis = 1 if lanes == 1 else 0
        config = ScanConfig("chunked", block_axis, lanes, compiled.scan_warps(block_axis * lanes),
                            chunk_tiles=4, window=widest_window(lanes, acc_bytes))
        with _trace.record(execute=False) as rec:
            cumulative_scan(x, axis, SUM, config=config)
        yield "scan_chunked", "value", rec.launches[-1]


def _segment_launches(dtype):
    """The segment kernel's reductions (one per state class) and sum scans (forward inclusive,
    reverse exclusive) as it launches them on an H100, segments of mixed lengths (an empty one
    included) along each of ``SEGMENT_LAYOUTS``."""
    for shape, axis in SEGMENT_LAYOUTS:
        x = torch.empty(shape, dtype=dtype)
        offsets = torch.tensor([0, 5, 5, shape[axis] // 2, shape[axis]], dtype=torch.int64)
        with devices.targeting("H100"), _trace.record(execute=False) as rec:
            for function in REDUCE_FUNCTIONS.values():
                segment_reduce_axis(x, record_of(function), offsets, axis)
            segment_scan_axis(x, SUM, offsets, axis)
            segment_scan_axis(x, SUM, offsets, axis, reverse=True, exclusive=True)
        *reduced, forward, backward = rec.launches
        for state, launch in zip(REDUCE_FUNCTIONS, reduced):
            yield "segment_reduce", state, launch
        yield "segment_scan", "value", forward
        yield "segment_scan", "value", backward
        if len(shape) == 1:   # segments from a sorted index (segment_coo's one pass)
            ids = torch.zeros(shape[axis], dtype=torch.int64)
            with devices.targeting("H100"), _trace.record(execute=False) as rec:
                for function in REDUCE_FUNCTIONS.values():
                    segment_reduce_ids(x, record_of(function), ids, 4, axis)
            for state, launch in zip(REDUCE_FUNCTIONS, rec.launches):
                yield "segment_reduce_ids", state, launch


def launches(kernels=None):
    """(input dtype class, kernel, state class, launch) for every measured tile (of ``kernels``
    only, when given)."""
    for rep in compiled.DTYPE_CLASSES:
        dtype = getattr(torch, rep)
        measured = []
        for elements, lanes in itertools.product(SCAN_ELEMENTS, LANES):
            measured.extend(_scan_launches(dtype, elements, lanes))
        for elements, lanes in itertools.product(REDUCE_ELEMENTS, LANES):
            measured.extend(_reduce_launches(dtype, elements, lanes))
        measured.extend(_chunked_launches(dtype))
        measured.extend(_segment_launches(dtype))
        for launch in measured:
            if kernels is None or launch[0] in kernels:
                yield (rep, *launch)


def _case(kernel, state, dtype, launch) -> dict:
    meta = launch.meta
    tile = ((meta["BLOCK_SPLIT"], meta["BLOCK_INNER"]) if kernel == "reduce_partials"
            else (meta["BLOCK_AXIS"], meta["BLOCK_INNER"]))
    case = dict(kernel=kernel, state=state, dtype=dtype, block_axis=tile[0],
                block_inner=tile[1], num_warps=meta["num_warps"])
    if "WINDOW" in meta:
        case["window"] = meta["WINDOW"]
    for flag in ("REVERSE", "EXCLUSIVE"):   # (set only: other keys stay as they were)
        if meta.get(flag):
            case[flag.lower()] = True
    return case


def _key(entry: dict) -> tuple:
    """What names one specialization: every field of the case plus the arch."""
    return tuple(sorted((k, v) for k, v in entry.items() if k not in MEASURED))


def measure(launched: list) -> list:
    """Compile ``launched`` ((dtype, kernel, state, launch) each) for both archs; one entry per
    case and arch, in that order."""
    cases = [_case(kernel, state, dtype, launch) for dtype, kernel, state, launch in launched]
    start = time.monotonic()
    results = compile_in_subprocess([describe(launch) for *_, launch in launched], archs=ARCHS)
    print(f"compiled {len(results)} specializations in {time.monotonic() - start:.0f} s")
    entries = []
    for i, result in enumerate(results):
        if not result["ok"]:
            raise RuntimeError(f"{cases[i // len(ARCHS)]} failed for sm_{result['arch']}: "
                               f"{result['error']}")
        entries.append(dict(cases[i // len(ARCHS)], arch=result["arch"],
                            registers=result["registers"],
                            loads_in_flight=result.get("loads_in_flight"),
                            sass_sha256=result.get("sass_sha256"),
                            spill_bytes=max(result.get("stack_bytes", 0),
                                            result.get("local_bytes", 0))))
    return entries


def spread(launched: list) -> list:
    """A deterministic few of ``launched``: two per kernel and state class, its first case (the
    smallest tile along a contiguous axis) and its last (the widest tile across lanes), in dtype
    classes taken in turn (so every class appears, and each kernel in two of them)."""
    groups: dict[tuple, list] = {}
    for item in launched:
        groups.setdefault(item[1:3], []).append(item)
    classes = compiled.DTYPE_CLASSES
    chosen = []
    for i, items in enumerate(groups.values()):
        chosen.append([item for item in items if item[0] == classes[i % len(classes)]][0])
        chosen.append([item for item in items if item[0] == classes[(i + 2) % len(classes)]][-1])
    return chosen


def differences(entries: list, committed: list) -> list[str]:
    """One line per entry of ``entries`` whose measured fields differ from the committed entry of
    the same specialization (or that has none)."""
    known = {_key(e): e for e in committed}
    lines = []
    for entry in entries:
        old = known.get(_key(entry))
        changed = ([f"{k} {old.get(k)} -> {entry.get(k)}" for k in MEASURED
                    if old.get(k) != entry.get(k)] if old else ["not in the committed table"])
        if changed:
            case = ", ".join(f"{k}={v}" for k, v in sorted(entry.items()) if k not in MEASURED)
            lines.append(f"{case}: {'; '.join(changed)}")
    return lines


def main(argv=None) -> int | None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated kernels to measure (e.g. scan_chunked); "
                                       "the file's entries of every other kernel are kept")
    parser.add_argument("--check", action="store_true",
                        help="compile and compare with the committed table instead of writing it: "
                             "exit 1 and list the specializations whose registers, spills, loads "
                             "in flight or SASS fingerprint changed")
    parser.add_argument("--spread", action="store_true",
                        help="check only a deterministic few specializations (two per kernel "
                             "and state class, every dtype class): what "
                             "tests/kernels/test_compiled_sass.py checks")
    args = parser.parse_args(argv)
    kernels = set(args.only.split(",")) if args.only else None
    launched = list(launches(kernels))
    if args.spread:
        launched = spread(launched)
    entries = measure(launched)
    if args.check or args.spread:
        changed = differences(entries, json.loads(OUTPUT.read_text(encoding="utf-8"))["entries"])
        print("\n".join(changed) or f"all {len(entries)} entries as committed")
        return 1 if changed else 0
    import triton
    if kernels is not None:   # keep every other kernel's entries as they are, in their order
        kept = json.loads(OUTPUT.read_text(encoding="utf-8"))
        if kept["triton"] != triton.__version__:
            print(f"note: the kept entries were measured with triton {kept['triton']}, these "
                  f"with {triton.__version__}")
        entries = [e for e in kept["entries"] if e["kernel"] not in kernels] + entries
    data = {"schema": compiled.SCHEMA_VERSION, "triton": triton.__version__,
            "generator": GENERATOR, "entries": entries}
    OUTPUT.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {len(entries)} entries to {OUTPUT.relative_to(ROOT)}")


if __name__ == "__main__":
    raise SystemExit(main())
