"""Device-independent performance report: bytes moved, launches and compiled-code facts.

    python -m benchmarks.report [--dtypes float32,float16,int32] [--regimes rows,columns,lookback]
                                [--no-compile] [--output FILE] [--json]

For every case of ``benchmarks.cases`` and every dtype, the op runs once in Triton's interpreter
under ``tritonml.bench.memtrace``: the global-memory bytes it moves (mask-true lanes x element size,
plus torch-side workspace fills) are set against the ideal (input read once + output written once,
from shapes and dtypes), with the number of launches a GPU would see. The result is checked against
a float64 torch reference. Then every distinct kernel launch is compiled for sm_90 in a compiled-mode
subprocess (no GPU needed) and its PTX/cubin read: widest global load/store, registers, spills.

Markdown goes to stdout (and ``--output``); ``--json`` prints JSON instead.
"""
from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time

import torch

import tritonml
from tritonml.core.dtypes import dtype_name

import triton

from . import cases as _cases
from tritonml.bench.measure import COMPILE_ARCHS, compile_facts, describe_launches  # noqa: F401
from tritonml.bench.memtrace import OTHER_REGION, trace_memory

BYTES_BOUND = 1.05  # bytes moved <= 1.05 x ideal (tests/bench/test_bytes_moved.py holds the same bound)
_DTYPE_NAMES = {dtype_name(d): d for d in _cases.DTYPES}


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def _tile(config) -> str:
    if config is None:
        return "launcher's choice"
    text = f"{config.block_axis}x{config.block_inner}, {config.num_warps}w"
    splits = getattr(config, "splits", 1)
    return f"{text}, {splits} splits" if splits > 1 else text


def measure(prepared: _cases.Prepared) -> dict:
    """Run one prepared case under the memory trace; check its result; return a report row."""
    start = time.perf_counter()
    with trace_memory(prepared.regions) as trace:
        prepared.run()
    seconds = time.perf_counter() - start
    prepared.check()
    input_ = trace.by_region("input")
    output = trace.by_region("output")
    other = trace.by_region(OTHER_REGION)
    memsets = [w for w in trace.torch_work if w.kind == "memset"]
    return {
        "kernel_launches": len(trace.kernels),
        "torch_launches": [{"op": w.op, "kind": w.kind, "bytes": w.bytes} for w in trace.torch_work],
        "launches": trace.launches,
        "kernels": [k.name for k in trace.kernels],
        "unrecorded_kernels": trace.unrecorded_kernels,
        "bytes_moved": trace.total_bytes,
        "ideal_bytes": prepared.ideal_bytes,
        "ratio": trace.total_bytes / prepared.ideal_bytes,
        "input_read": input_["load"],
        "input_read_distinct": trace.distinct_bytes("input", "load"),
        "input_written": input_["store"],
        "output_written": output["store"],
        "output_written_distinct": trace.distinct_bytes("output", "store"),
        "output_read": output["load"],
        "workspace_bytes": other["load"] + other["store"] + sum(w.bytes for w in memsets),
        "atomic_ops": trace.atomic_ops,
        "atomic_bytes": sum(k.atomic_bytes for k in trace.kernels),
        "interpreter_seconds": round(seconds, 2),
    }


def scan_rows(dtypes, regimes, compile_code: bool) -> list:
    rows = []
    for case in _cases.SCAN_CASES:
        if case.regime not in regimes:
            continue
        for dtype in dtypes:
            prepared = _cases.prepare_scan(case, dtype)
            row = {"op": f"cumulative_{case.combine}", "case": case.regime, "choice": case.label,
                   "shape": list(case.shape), "axis": case.axis, "dtype": _dtype_name(dtype),
                   "regime": prepared.config.regime, "tile": _tile(prepared.config)}
            rows.append(_measured_row(row, prepared, compile_code))
    return rows


def _measured_row(row: dict, prepared, compile_code: bool) -> dict:
    """Fill ``row`` with the case's bytes and launches (and its launches' descriptions to compile)."""
    row.update(measure(prepared))
    if compile_code:
        row["_descriptions"] = describe_launches(prepared.run)
    print(f"  {row['op']} {row['case']:9s} {row['choice']:15s} {row['dtype']:8s} "
          f"ratio {row['ratio']:.4f} ({row['interpreter_seconds']} s)", file=sys.stderr)
    return row


def reduce_rows(dtypes, compile_code: bool) -> list:
    """Reduce cases (``cases.REDUCE_CASES``)."""
    rows = []
    for case in _cases.REDUCE_CASES:
        for dtype in dtypes:
            prepared = _cases.prepare_reduce(case, dtype)
            if prepared is None:  # function/dtype pair the operator does not support
                continue
            row = {"op": f"reduce {case.function}", "case": case.regime, "choice": case.label,
                   "shape": list(case.shape),
                   "axis": ",".join(map(str, case.axes)) if case.axes is not None else "all",
                   "dtype": _dtype_name(dtype), "regime": prepared.extra.get("regime", "?"),
                   "tile": _tile(prepared.config)}
            rows.append(_measured_row(row, prepared, compile_code))
    return rows


def environment() -> dict:
    return {
        "date": datetime.date.today().isoformat(),
        "tritonml": tritonml.__version__,
        "triton": triton.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "backend": "interpreter" if tritonml.INTERPRET else "compiled",
        "compile_archs": [f"sm_{a}" for a in COMPILE_ARCHS],
        "bytes_bound": BYTES_BOUND,
    }


def _launches_text(row) -> str:
    extra = [w["kind"] for w in row["torch_launches"]]
    return f"{row['launches']}" + (f" ({row['kernel_launches']} kernel + {' + '.join(extra)})"
                                   if extra else "")


def _kib(n: int) -> str:
    return f"{n / 1024:,.1f}"


def markdown(env: dict, rows: list) -> str:
    lines = [
        f"Bytes counted in Triton's interpreter on {env['date']} (tritonml {env['tritonml']}, "
        f"triton {env['triton']}, torch {env['torch']}); compiled-code facts from "
        f"{', '.join(env['compile_archs'])} compilation without a GPU. No GPU timings.",
        "",
        "Bytes moved: global-memory loads, stores and atomics of the kernels (mask-true lanes x "
        "element size) plus torch-side fills (the look-back status words), in KiB. Ideal: input read "
        "once + output written once. Launches: kernels + torch-side memsets.",
        "",
        "| op | case | config | shape | axis | dtype | regime | tile | launches | bytes moved | "
        "ideal | ratio | workspace B | atomics |",
        "|---|---|---|---|---|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        flag = "" if r["ratio"] <= env["bytes_bound"] else " **over**"
        lines.append(
            f"| {r['op']} | {r['case']} | {r['choice']} | {'x'.join(map(str, r['shape']))} | "
            f"{r['axis']} | {r['dtype']} | {r['regime']} | {r['tile']} | {_launches_text(r)} | "
            f"{_kib(r['bytes_moved'])} | {_kib(r['ideal_bytes'])} | {r['ratio']:.4f}{flag} | "
            f"{r['workspace_bytes']:,} | {r['atomic_ops']} |")
    rereads = [r for r in rows if r["input_read"] != r["input_read_distinct"]
               or r["output_written"] != r["output_written_distinct"] or r["input_written"]
               or r["output_read"] or r["unrecorded_kernels"]]
    lines += ["", "Every input byte read exactly once and every output byte written exactly once "
              "(distinct addresses counted): " + ("yes, in every case." if not rereads else
                                                  "NO in: " + ", ".join(
                                                      f"{r['op']} {r['case']} {r['dtype']}"
                                                      for r in rereads))]
    compiled = [r for r in rows if r.get("compiled")]
    if compiled:
        lines += ["", "Compiled code (widest global load/store in bits, registers per thread, "
                  "spill = stack + local bytes per thread):", "",
                  "| op | case | config | dtype | tile | kernel | arch | load bits | store bits | "
                  "registers | spill B |",
                  "|---|---|---|---|---|---|---|---:|---:|---:|---:|"]
        for r in compiled:
            for c in r["compiled"]:
                if not c.get("ok"):
                    lines.append(f"| {r['op']} | {r['case']} | {r['choice']} | {r['dtype']} | "
                                 f"{r['tile']} | {c['kernel']} | sm_{c['arch']} | compile failed: "
                                 f"{(c.get('error') or '')[:80]} | | | |")
                    continue
                spill = (c.get("stack_bytes") or 0) + (c.get("local_bytes") or 0)
                lines.append(
                    f"| {r['op']} | {r['case']} | {r['choice']} | {r['dtype']} | {r['tile']} | "
                    f"{c['kernel']} | sm_{c['arch']} | {c['max_load_bits']} | {c['max_store_bits']} | "
                    f"{c.get('registers', '?')} | {spill} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--dtypes", default=",".join(_DTYPE_NAMES),
                        help="comma-separated dtypes (default: %(default)s)")
    parser.add_argument("--regimes", default="rows,columns,lookback",
                        help="comma-separated scan cases (default: %(default)s)")
    parser.add_argument("--ops", default="scan,reduce",
                        help="comma-separated operators to report (default: %(default)s)")
    parser.add_argument("--no-compile", action="store_true",
                        help="skip the sm_90 compilation (compiled-code facts)")
    parser.add_argument("--output", metavar="FILE", help="also write the report to FILE")
    parser.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    args = parser.parse_args(argv)
    if not tritonml.INTERPRET:
        print("benchmarks.report counts bytes in Triton's interpreter: run it with "
              "TRITON_INTERPRET=1 (or on a machine without CUDA); GPU timing is "
              "benchmarks/gpu_timing.py", file=sys.stderr)
        return 2
    try:
        dtypes = [_DTYPE_NAMES[d.strip()] for d in args.dtypes.split(",") if d.strip()]
    except KeyError as e:
        parser.error(f"--dtypes: unknown dtype {e}; choose from {', '.join(_DTYPE_NAMES)}")
    regimes = {r.strip() for r in args.regimes.split(",") if r.strip()}
    unknown = regimes - set(_cases.SCAN_SHAPES)
    if unknown:
        parser.error(f"--regimes: unknown {sorted(unknown)}; choose from {', '.join(_cases.SCAN_SHAPES)}")

    ops = {o.strip() for o in args.ops.split(",") if o.strip()}
    if ops - {"scan", "reduce"}:
        parser.error(f"--ops: unknown {sorted(ops - {'scan', 'reduce'})}; choose from scan, reduce")

    env = environment()
    rows = scan_rows(dtypes, regimes, not args.no_compile) if "scan" in ops else []
    if "reduce" in ops:
        rows += reduce_rows(dtypes, not args.no_compile)
    if not args.no_compile:
        compile_facts(rows)  # tritonml.bench.measure's: one subprocess for the distinct launches
    text = json.dumps({"environment": env, "rows": rows}, indent=1) \
        if args.json else markdown(env, rows)
    sys.stdout.write(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
