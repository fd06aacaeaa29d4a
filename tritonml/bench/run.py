"""``tritonml bench``: the suite (``cases.SUITE``) measured, checked against its targets, written out.

Where it runs:

- everywhere (CPU too): each (entry, op, dtype) runs once in Triton's interpreter with configs
  chosen as for ``--target`` (default H100): exact bytes moved against the ideal, launches and
  programs per launch, the result against a float64 reference, a modeled ``--target`` time
  (``measure.modeled_seconds``), and, unless ``--no-compile``, sm_90 compile facts of the launches.
  The interpreter costs about a second per MB moved, so shapes over ``--max-elements`` are counted
  at the entry's quick shape (the ``shape`` column says which); ``--quick`` counts every entry at
  its quick shape.
- on a GPU (compiled Triton, CUDA available): the counting above runs in a child process with
  ``TRITON_INTERPRET=1`` (bytes can only be counted in the interpreter), then every row is timed at
  its full shape (``timing.py``).
- ``--dry-run-timing`` runs the timing code on the CPU, at the counted shapes, with the
  interpreter: it exercises the GPU path; its numbers mean nothing and say so.

A case that raises (counting, describing its launches or timing) becomes a row whose status is
"failed" and whose note names the stage and the error (the JSON keeps the traceback); every other
row is still measured and written, the markdown lists the failed cases, stderr names them, and
the exit status is 1.
"""
from __future__ import annotations

import datetime
import json
import math
import os
import platform
import subprocess
import sys
import tempfile

from tritonml_cli import UsageError, names as _names

from . import cases as _cases

# Written into --output while timing: one JSON line per row as it is timed (``time_rows``).
PROGRESS_FILE = "bench_rows.jsonl"



def work_items(args) -> list:
    """(entry, op, dtype) triples the arguments select; ValueError names a bad argument."""
    import torch
    from tritonml_autotune import devices

    devices.lookup(args.target, "--target")
    entries = _names(args.cases, list(_cases.ENTRIES), "--cases")
    ops = _names(args.ops, list(_cases.ALL_OPS), "--ops")
    dtype_names = _names(args.dtypes, [_cases.dtype_text(d) for d in _cases.ALL_DTYPES], "--dtypes")
    dtypes = None if dtype_names is None else [getattr(torch, d) for d in dtype_names]
    if args.max_elements < 1:
        raise ValueError(f"--max-elements: expected >= 1, got {args.max_elements}")
    items = [(entry, op, dtype) for entry in _cases.SUITE
             if entries is None or entry.name in entries
             for op in entry.ops if ops is None or op in ops
             for dtype in entry.dtypes if dtypes is None or dtype in dtypes]
    if not items:
        raise ValueError("--cases/--ops/--dtypes: the selection holds no entry of the suite")
    return items


def counted_shape(entry, quick: bool, max_elements: int) -> tuple:
    if quick or math.prod(entry.shape) > max_elements:
        return entry.quick_shape
    return entry.shape


def _base_row(entry, op, dtype, shape, target) -> dict:
    axes = "all" if entry.axes is None else ",".join(map(str, entry.axes))
    rank = len(entry.shape)
    return {"entry": entry.name, "group": entry.group, "op": op, "dtype": _cases.dtype_text(dtype),
            "shape": list(shape), "axes": axes, "timed_shape": None, "target": target,
            "last_axis": entry.axes is not None and entry.axes[-1] % rank == rank - 1,
            "what": entry.what}


def count_rows(items, args) -> list:
    """Every item counted in the interpreter (this process must interpret)."""
    from tqdm import tqdm

    from . import measure

    rows = []
    for entry, op, dtype in tqdm(items, desc="tritonml bench", unit="case", file=sys.stderr):
        shape = counted_shape(entry, args.quick, args.max_elements)
        row = _base_row(entry, op, dtype, shape, args.target)
        try:
            _count_row(row, entry, op, dtype, shape, args)
        except _cases.NotAvailable as exc:
            row["status"] = _cases.NOT_AVAILABLE
            row["note"] = str(exc)
        except Exception as exc:   # one case's failure is its row's, never the whole run's
            _fail(row, "counting", exc)
        rows.append(row)
    if not args.no_compile:
        compiled = [r for r in rows if "_descriptions" in r]
        try:
            measure.compile_facts(compiled)
        except Exception as exc:   # (the compile processes themselves: every row's facts)
            error = f"{type(exc).__name__}: {exc}"
            for row in compiled:
                row.pop("_descriptions", None)
                row["compiled"] = [{"ok": False, "error": error}]
    for row in rows:
        if row["status"] == "ok":
            row.update(measure.compiled_summary(row.get("compiled", [])))
    return rows


def _count_row(row, entry, op, dtype, shape, args) -> None:
    """``row`` filled with what one (entry, op, dtype) counts at ``shape``."""
    from . import measure

    prepared = _cases.prepare(entry, op, dtype, shape)
    fields, result, trace = measure.count(prepared, args.target)
    row.update(fields)
    if prepared.trace_fields is not None:
        row.update(prepared.trace_fields(trace))
    row["ideal_bytes"] = prepared.ideal_bytes
    row["kernels"] = "+".join(launch["kernel"] for launch in fields["launch_detail"])
    row["tritonml_error"] = _cases.relative_error(result, prepared.reference()) \
        if not prepared.exact else float(not _equal(result, prepared.reference()))
    modeled = measure.modeled_seconds(args.target, fields["launch_detail"])
    ideal = measure.ideal_seconds(args.target, prepared.ideal_bytes)
    row.update(modeled_us=modeled * 1e6, modeled_ideal_us=ideal * 1e6,
               modeled_ratio=modeled / ideal)
    if not args.no_compile:
        row["_descriptions"] = measure.describe_launches(prepared.counted_run, args.target)
    row["status"] = "ok"


def _fail(row: dict, stage: str, exc: BaseException) -> None:
    """``row`` marked failed at ``stage`` ("counting", "timing"), the error its note (the
    traceback in the JSON too), said at once on stderr; what it measured before stays."""
    import traceback

    from tqdm import tqdm

    row.pop("_descriptions", None)
    row["status"] = _cases.FAILED
    row["note"] = f"{stage}: {type(exc).__name__}: {exc}"
    row["traceback"] = "".join(traceback.format_exception(exc))
    tqdm.write(f"tritonml bench: {case_name(row)} failed in {row['note']}", file=sys.stderr)


def case_name(row: dict) -> str:
    """The case a row holds, as ``--cases``/``--ops``/``--dtypes`` select it."""
    return f"{row['entry']} {row['op']} {row['dtype']}"


def _equal(result, reference) -> bool:
    import torch
    return bool(torch.equal(result.to(torch.int64).reshape(reference.shape), reference))


def count_in_child(args) -> list:
    """Count in a child process that interprets (a GPU process runs compiled Triton)."""
    with tempfile.TemporaryDirectory(prefix="tritonml-bench-") as scratch:
        command = [sys.executable, "-m", "tritonml.cli", "bench", "--count-only", "--output",
                   scratch, "--target", args.target, "--max-elements", str(args.max_elements)]
        for option in ("cases", "ops", "dtypes"):
            if getattr(args, option):
                command += [f"--{option}", getattr(args, option)]
        command += ["--quick"] * args.quick + ["--no-compile"] * args.no_compile
        env = dict(os.environ, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")
        # (exit status 1 with bench.json written: some cases failed, their rows say so)
        done = subprocess.run(command, env=env)
        path = os.path.join(scratch, "bench.json")
        if done.returncode not in (0, 1) or not os.path.exists(path):
            raise subprocess.CalledProcessError(done.returncode, command)
        with open(path) as f:
            return json.load(f)["rows"]


def time_rows(rows, items, args, on_gpu: bool, progress_path: str | None = None) -> None:
    """Add timings to the counted rows: at the full shape on a GPU, at the counted shape in a
    CPU dry run. With ``progress_path``, each row is appended there as one JSON line as soon as
    it is timed, so a run cut short (a GPU session's time limit) keeps what it timed."""
    from tqdm import tqdm

    from . import measure, timing

    device = "cuda" if on_gpu else "cpu"
    pairs = list(zip(rows, items))
    if progress_path is not None:
        open(progress_path, "w").close()
    # No bar when nothing is timed (a CPU run without --dry-run-timing: verdicts only).
    for row, (entry, op, dtype) in tqdm(pairs, desc="tritonml bench timing", unit="case",
                                        file=sys.stderr, disable=not pairs):
        if row["status"] != "ok":
            continue
        shape = entry.shape if on_gpu else tuple(row["shape"])
        try:
            prepared = _cases.prepare(entry, op, dtype, shape, device)
            row["timed_shape"] = list(shape)
            row["ideal_bytes_timed"] = prepared.ideal_bytes
            row.update(timing.time_prepared(prepared, dry_run=not on_gpu))
            del prepared
        except Exception as exc:   # one case's failure is its row's, never the whole run's
            _fail(row, "timing", exc)
        if progress_path is not None:
            with open(progress_path, "a") as f:
                f.write(json.dumps({k: v for k, v in row.items() if not k.startswith("_")},
                                   default=str) + "\n")
    for row in rows:
        row.setdefault("ideal_bytes_timed", row.get("ideal_bytes") or 0)
        if row["status"] == "ok":
            row.update(measure.verdicts(row))


def environment(args, argv) -> dict:
    import torch
    import triton

    from tritonml_cli import __version__

    from ..core.backend import INTERPRET
    return {"command": "tritonml bench " + " ".join(argv), "date": datetime.date.today().isoformat(),
            "tritonml": __version__, "triton": triton.__version__,
            "torch": torch.__version__, "python": platform.python_version(),
            "backend": "Triton interpreter" if INTERPRET else "compiled Triton",
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "target": args.target, "quick": args.quick, "max_elements": args.max_elements}


def cmd_bench(args, argv=()) -> int:
    import torch

    from tritonml_autotune import devices

    from ..core.backend import INTERPRET

    from . import output

    try:
        items = work_items(args)
        args.target = devices.lookup(args.target, "--target").name
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    on_gpu = not INTERPRET and torch.cuda.is_available()
    if INTERPRET:
        rows = count_rows(items, args)
    else:
        rows = count_in_child(args)
    if not args.count_only and (on_gpu or args.dry_run_timing):
        os.makedirs(args.output, exist_ok=True)
        time_rows(rows, items, args, on_gpu, os.path.join(args.output, PROGRESS_FILE))
    else:
        time_rows(rows, [], args, False)  # verdicts only
    os.makedirs(args.output, exist_ok=True)
    env = environment(args, list(argv))
    output.write_json(os.path.join(args.output, "bench.json"), env, rows)
    output.write_csv(os.path.join(args.output, "bench.csv"), rows)
    text = output.markdown(env, rows)
    with open(os.path.join(args.output, "bench.md"), "w") as f:
        f.write(text)
    if not args.no_plots and not args.count_only:
        output.plots(args.output, rows, args.target)
    sys.stdout.write(text)
    print(f"wrote {len(rows)} rows to {args.output}", file=sys.stderr)
    failed = [case_name(row) for row in rows if row["status"] == _cases.FAILED]
    if failed:
        print(f"tritonml bench: {len(failed)} of {len(rows)} cases failed (their rows say why): "
              + "; ".join(failed), file=sys.stderr)
        return 1
    return 0
