"""The ``tritonml`` command's handlers: ``demo``, ``info``, ``tune`` and ``bench`` (the descriptor
commands ``run``/``validate`` are in ``tritonml.dml.cli``). The parser and ``main`` live in the
top-level module ``tritonml_cli``, which answers ``--version`` and ``--help`` without importing
this package (and so torch); they are re-exported here.
"""
from __future__ import annotations

import sys

from tritonml_cli import UsageError, build_parser, main

from . import __version__

def _format(values) -> str:
    """A nested list in DirectML's docs' notation, integers printed without a decimal point."""
    import numpy as np

    arr = np.asarray(values)
    if arr.dtype.kind == "f" and np.all(np.isfinite(arr)) and np.all(arr == np.round(arr)):
        arr = arr.astype(np.int64)
    return np.array2string(arr, separator=", ")


def cmd_demo(args) -> int:
    """Print every documented DirectML example computed by the kernels, with the documented output."""
    import numpy as np

    from . import examples

    failures = 0
    for number, example in enumerate(examples.all_examples(), 1):
        result = examples.run_example(example).double().numpy()
        expected = np.asarray(example.expected, dtype=np.float64)
        ok = result.shape == expected.shape and np.array_equal(result, expected)
        failures += not ok
        print(f"[{number}] {example.operator}: {example.title}")
        print(f"    tritonml.{example.call}")
        print("    input:")
        print("      " + _format(example.input).replace("\n", "\n      "))
        print("    computed:")
        print("      " + _format(result).replace("\n", "\n      "))
        print("    documented:")
        print("      " + _format(expected).replace("\n", "\n      "))
        print(f"    check: {'OK' if ok else 'MISMATCH'}\n")
    total = len(examples.all_examples())
    print(f"{total - failures} of {total} documented examples match.")
    return 0 if failures == 0 else 1


def cmd_info(args) -> int:
    from .core import backend as _backend

    print(f"tritonml {__version__}")
    for key, value in _backend.describe().items():
        print(f"  {key}: {value}")
    return 0


def _tune_work(args) -> list:
    """(suite item, dtype name) pairs the arguments ask for."""
    from tritonml_autotune import suite

    from . import tuning

    known = tuning.op_names()
    ops = None
    if args.ops:
        names = [name.strip() for name in args.ops.split(",") if name.strip()]
        ops = list(known) if names == ["all"] else names
        unknown = [name for name in ops if name not in known and name.upper() not in known]
        if unknown:
            raise ValueError(f"--ops: unknown {', '.join(unknown)}; known: all, {', '.join(known)}")
        ops = [name if name in known else name.upper() for name in ops]
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()] if args.dtypes else None
    from .core.dtypes import DTYPE_BY_NAME
    unknown = [d for d in dtypes or () if d not in DTYPE_BY_NAME]
    if unknown:
        raise ValueError(f"--dtypes: unknown {', '.join(unknown)}; known: {', '.join(DTYPE_BY_NAME)}")
    if args.shapes:
        ops = ops or ["cumulative_sum", "SUM"]
        scan = next((op for op in ops if op in tuning.SCAN_OPS), None)
        shapes = tuning.parse_shapes(args.shapes, scan)
        items = [suite.Item(op, shape, axes, tuple(dtypes or suite.DTYPES))
                 for op in ops for shape, axes in shapes]
    else:
        items = [item for item in suite.ITEMS if ops is None or item.op in ops]
    work = [(item, dtype) for item in items for dtype in (dtypes or item.dtypes)]
    if not work:
        raise ValueError("--ops/--shapes/--dtypes: the selection holds no problem to tune")
    return work


def _tune_rows(entries: dict) -> list:
    import json

    rows = []
    for key_text, entry in sorted(entries.items()):
        key = json.loads(key_text)
        seconds = entry.get("seconds")
        rows.append((key.get("device", "?"), key.get("op", "?"), key.get("function", "?"),
                     key.get("dtype", "?"), key.get("axis", "?"), key.get("inner", "?"),
                     key.get("outer", "?"), key.get("layout", "?"),
                     tuning_config_text(entry["config"]), entry.get("source", "timed"),
                     "" if seconds is None else f"{seconds * 1e6:.1f}"))
    return rows


def tuning_config_text(fields: dict) -> str:
    from .tuning import config_text
    try:
        return config_text(fields)
    except (KeyError, TypeError):
        return str(fields)


TUNE_HEADER = ("device", "op", "function", "dtype", "axis", "inner", "outer", "layout", "config",
               "source", "us")


def cmd_tune(args) -> int:
    import torch
    from tqdm import tqdm

    from tritonml_autotune import devices, engine, select, shipped
    from tritonml_autotune.cache import default_cache

    from . import tuning

    cache = default_cache()
    if args.clear:
        count = len(cache.entries())
        cache.clear()
        tuning.forget()
        print(f"removed {count} entries from {cache.path}")
        return 0
    if args.show:
        rows = _tune_rows(cache.entries())
        print(f"{len(rows)} entries in {cache.path}")
        if rows:
            print(tuning.markdown_table(TUNE_HEADER, rows))
        return 0
    try:
        work = _tune_work(args)
        target = devices.lookup(args.target, "--target") if args.target else None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    cuda = _tuning_device()
    if target is None and cuda is None:
        raise UsageError("no CUDA device here to time on; give --target H100 or A100 to record "
                         "the cost model's choices")
    device = cuda if cuda is not None else torch.device("cpu")
    gpu = target if target is not None else select.cuda_gpu(cuda)
    # Timing measures the GPU it runs on: with a target naming another GPU, the model chooses.
    can_time = cuda is not None and engine.timing_enabled() and select.cuda_gpu(cuda) == gpu
    table, results = {}, []
    with devices.targeting(gpu):
        for item, dtype_text in tqdm(work, desc="tritonml tune", unit="problem", file=sys.stderr):
            dtype = getattr(torch, dtype_text)
            plan, layout = tuning.plan_for(item, dtype, device)
            if can_time:
                runner = tuning.runner_factory(item, dtype, device, layout)
                choice = select.decide(plan, runner, use_table=False, cache=cache)
            else:
                choice = select.modeled(plan)
                engine.record_modeled(plan.key, select.fields(choice.config), cache=cache)
            fields = select.fields(choice.config)
            source = engine.MODELED if choice.source == engine.MODELED else engine.TIMED
            entry = {"config": fields, "source": source, "generator": select.version()}
            if choice.seconds is not None:
                entry["seconds"] = choice.seconds
            table[shipped.table_key(plan.key)] = entry
            results.append((item.label, dtype_text, tuning.config_text(fields), choice.source))
    tuning.forget()
    print(tuning.markdown_table(("problem", "dtype", "config", "source"), results))
    print(f"{len(results)} problems; cache: {cache.path}")
    if args.write_table:
        shipped.write(args.write_table, gpu.name, table)
        print(f"wrote {len(table)} entries to {args.write_table}")
    return 0


def cmd_bench(args) -> int:
    from .bench import run as bench_run
    return bench_run.cmd_bench(args, sys.argv[2:] if sys.argv[1:2] == ["bench"] else [])


def _tuning_device():
    """The CUDA device to time on, or None."""
    import torch
    return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else None


if __name__ == "__main__":
    sys.exit(main())
