"""Correctness on a real GPU: every op, dtype and regime the launchers pick for CUDA, against numpy.

    python -m benchmarks.gpu_check [--dtypes float32,int8,...] [--ops scan,reduce,...] [--dry-run]

The test suite runs the kernels through Triton's interpreter on CPU tensors; this sweep runs the same
public functions on CUDA tensors (compiled kernels), with shapes large enough that the launchers
pick every GPU regime (rows, columns, look-back scans; row, column, split and several-axes
reductions), in both directions, inclusive and exclusive, on contiguous and strided views. Each
result is compared with the independent oracles the tests share (``benchmarks/scan_oracle.py``,
``benchmarks/reduce_oracle.py``: numpy in float64 or exact integers, the bounds of
``tritonml.bench.tolerances``), outputs are poisoned first so an unwritten element fails, and each
case runs twice to check the bits are deterministic. ``--ops`` picks the checks: ``scan`` and
``reduce`` (here), ``segment`` and ``dsl`` (the segmented ops and the kernel DSL's tuple states,
``benchmarks/gpu_check_segments.py``), ``scatter`` (the deterministic scatter and index
reductions, ``benchmarks/gpu_check_scatter.py``) and ``stress`` (thousands of back-to-back launches on one
resident workspace, two streams, CUDA graph replays, offsets past 2**31, torch.compile and
routing on CUDA, ``benchmarks/gpu_check_stress.py``). Without CUDA (or with ``--dry-run``) the
same sweep runs on CPU tensors through the interpreter with tiny shapes; what needs CUDA is
listed as skipped.

Prints one line per failure and a summary; exits 1 if anything failed.
"""
from __future__ import annotations

import argparse
import os
import sys
import traceback

import numpy as np
import torch

import tritonml
from tritonml.core.dtypes import DTYPE_BY_NAME, FLOAT_DTYPES, SUPPORTED_DTYPES, dtype_name
from tritonml.launchers.scan import PRODUCT, SUM, cumulative_scan
from tritonml_autotune.configs import ScanConfig

from . import reduce_oracle, scan_oracle

# (name, shape, axis[, config]): on CUDA the launchers' own choices reach the rows, columns and
# chunked scan regimes; the look-back (a tuner candidate) and small chunks and windows (many
# groups, so many hand-overs between them) are forced with a config.
GPU_SCAN_SHAPES = (
    ("rows", (300, 5000), 1),
    ("columns", (5000, 300), 0),
    ("few long rows", (2, 2 ** 20 + 3), 1),
    ("few long columns", (20000, 100), 0),
    ("3d middle", (7, 999, 33), 1),
    ("lookback", (2, 2 ** 20 + 3), 1, ScanConfig("lookback", 1024, 1, 8)),
    ("chunked small windows", (3, 2 ** 20 + 3), 1,
     ScanConfig("chunked", 1024, 1, 8, chunk_tiles=3, window=4)),
    ("chunked columns", (50000, 96), 0, ScanConfig("chunked", 32, 32, 4, chunk_tiles=5, window=8)),
)
DRY_SCAN_SHAPES = (("rows", (4, 300), 1), ("columns", (300, 4), 0), ("3d middle", (3, 40, 5), 1),
                   ("chunked", (2, 300), 1, ScanConfig("chunked", 16, 1, chunk_tiles=2, window=2)))

GPU_REDUCE_SHAPES = (
    ("rows", (300, 5000), (1,)),
    ("columns", (5000, 300), (0,)),
    ("tall columns", (4096, 512), (0,)),
    ("split", (2 ** 22 + 5,), None),
    ("axes apart", (16, 64, 16, 64), (0, 2)),
    ("inner axes", (33, 40, 50), (1, 2)),
)
DRY_REDUCE_SHAPES = (("rows", (4, 300), (1,)), ("columns", (300, 4), (0,)),
                     ("axes apart", (3, 8, 5, 6), (0, 2)))


def _poison(shape, dtype, device):
    if dtype in FLOAT_DTYPES:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.full(shape, 77, dtype=dtype, device=device)


def _strided(x: torch.Tensor) -> torch.Tensor:
    """x's values in a view with a step of 2 along the last dim (a non-contiguous input)."""
    buffer = torch.empty(*x.shape[:-1], 2 * x.shape[-1], dtype=x.dtype, device=x.device)
    view = buffer[..., ::2]
    view.copy_(x)
    return view


def _scan_input(shape, dtype, op, seed):
    """Floats: normal values, or factors near 1 for products, so a running product of millions
    stays normal (in the subnormal range every association order rounds differently, far beyond
    any ulp bound). Integers: full range, and odd for products: a product of full-range integers
    is 0 modulo 2**bits after a few dozen even factors, so most of a long scan would check
    nothing; one of odd factors never is, and wraps at every step."""
    if dtype in FLOAT_DTYPES:
        g = torch.Generator().manual_seed(seed)
        v = torch.randn(shape, generator=g, dtype=torch.float64)
        return (1 + 1e-3 * v if op == "product" else v).to(dtype)
    x = reduce_oracle.make_input(shape, dtype, "SUM", seed)
    if op != "product":
        return x
    signed = {torch.uint8: torch.int8, torch.uint16: torch.int16, torch.uint32: torch.int32,
              torch.uint64: torch.int64}.get(dtype, dtype)   # torch's bitwise ops: signed only
    return (x.view(signed) | 1).view(dtype)


def check_scans(dtype, device, shapes, failures, counts):
    for name, shape, axis, *forced in shapes:
        config = forced[0] if forced else None
        for op, fn in (("sum", tritonml.cumulative_sum), ("product", tritonml.cumulative_product)):
            if config is not None:
                combine = SUM if op == "sum" else PRODUCT

                def fn(x, axis, *, reverse, exclusive, out=None, combine=combine):
                    return cumulative_scan(x, axis, combine, reverse=reverse, exclusive=exclusive,
                                           out=out, config=config)
            x_cpu = _scan_input(shape, dtype, op, seed=len(failures) + counts["scan"])
            x_np = scan_oracle.to_numpy(x_cpu)
            for layout in ("contiguous", "strided"):
                x = x_cpu.to(device)
                if layout == "strided":
                    x = _strided(x)
                for reverse in (False, True):
                    for exclusive in (False, True):
                        label = (f"scan {op} {name} {shape} axis {axis} {layout} reverse={reverse} "
                                 f"exclusive={exclusive} {dtype_name(dtype)}")
                        counts["scan"] += 1
                        try:
                            out = _poison(shape, dtype, device)
                            fn(x, axis, reverse=reverse, exclusive=exclusive, out=out)
                            again = fn(x, axis, reverse=reverse, exclusive=exclusive)
                            allowance = scan_oracle.accumulation_allowance(
                                x_np, axis, op, reverse, exclusive, dtype)
                            ok, message = scan_oracle.scan_matches(
                                out.cpu(), x_np, axis, op, reverse, exclusive, allowance)
                            if ok and (reduce_oracle.bits(out.cpu())
                                       != reduce_oracle.bits(again.cpu())):
                                ok, message = False, "two runs differ in their bits"
                        except Exception:
                            ok, message = False, traceback.format_exc(limit=4)
                        if not ok:
                            failures.append(f"{label}: {message}")
                            print("FAIL", failures[-1], flush=True)


def check_reductions(dtype, device, shapes, failures, counts):
    for name, shape, axes in shapes:
        for function in reduce_oracle.FUNCTIONS:
            if not reduce_oracle.supported(function, dtype):
                continue
            x_cpu = reduce_oracle.make_input(shape, dtype, function, seed=counts["reduce"])
            expected = reduce_oracle.expected_tensor(x_cpu, function, axes)
            for layout in ("contiguous", "strided"):
                x = x_cpu.to(device)
                if layout == "strided":
                    x = _strided(x)
                label = f"reduce {function} {name} {shape} axes {axes} {layout} {dtype_name(dtype)}"
                counts["reduce"] += 1
                try:
                    out = _poison(tuple(expected.shape), expected.dtype, device)
                    tritonml.reduce(x, function, axes, out=out)
                    again = tritonml.reduce(x, function, axes)
                    reduce_oracle.assert_matches(out.cpu(), expected, label)
                    if reduce_oracle.bits(out.cpu()) != reduce_oracle.bits(again.cpu()):
                        raise AssertionError("two runs differ in their bits")
                except Exception:
                    failures.append(f"{label}: {traceback.format_exc(limit=4)}")
                    print("FAIL", failures[-1], flush=True)


OPS = ("scan", "reduce", "segment", "dsl", "stress", "scatter")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default=",".join(dtype_name(d) for d in SUPPORTED_DTYPES))
    parser.add_argument("--ops", default=",".join(OPS),
                        help=f"which checks, comma-separated, of {', '.join(OPS)}")
    parser.add_argument("--dry-run", action="store_true", help="CPU tensors, tiny shapes")
    parser.add_argument("--autotune", action="store_true",
                        help="time candidate configs on first calls (slow: up to 12 compiles and "
                             "timings per new shape); by default the cost model chooses")
    args = parser.parse_args(argv)
    ops = [op.strip() for op in args.ops.split(",") if op.strip()]
    unknown = sorted(set(ops) - set(OPS))
    if unknown:
        parser.error(f"--ops: unknown {', '.join(unknown)}; choose from {', '.join(OPS)}")
    from tritonml_autotune import engine

    from . import gpu_check_scatter, gpu_check_segments, gpu_check_stress
    engine.set_timing(True if args.autotune else False)
    gpu = torch.cuda.is_available() and not args.dry_run
    device = "cuda" if gpu else "cpu"
    dtypes = [DTYPE_BY_NAME[d.strip()] for d in args.dtypes.split(",") if d.strip()]
    failures: list = []
    skipped: list = []
    counts = dict.fromkeys(OPS, 0)
    for dtype in dtypes:
        if "scan" in ops:
            check_scans(dtype, device, GPU_SCAN_SHAPES if gpu else DRY_SCAN_SHAPES, failures, counts)
        if "reduce" in ops:
            check_reductions(dtype, device, GPU_REDUCE_SHAPES if gpu else DRY_REDUCE_SHAPES,
                             failures, counts)
        if "segment" in ops:
            gpu_check_segments.check_segments(dtype, device, gpu, failures, counts)
        if "dsl" in ops:
            gpu_check_segments.check_dsl(dtype, device, gpu, failures, counts)
        if "scatter" in ops:
            gpu_check_scatter.check_scatter(dtype, device, gpu, failures, counts)
        if "stress" in ops:
            gpu_check_stress.check_stress(dtype, device, gpu, failures, counts, skipped)
            if gpu_check_stress.hung_in() is not None:
                # the device is stuck: waiting on it (even at exit) would never end
                print(f"HANG in {gpu_check_stress.hung_in()}: {len(failures)} failed; "
                      f"exiting without waiting on the device", flush=True)
                os._exit(1)
        print(f"{dtype_name(dtype)}: done ({len(failures)} failures so far)", flush=True)
    where = torch.cuda.get_device_name() if gpu else "CPU (interpreter)"
    ran = ", ".join(f"{counts[op]} {op}" for op in ops)
    for line in dict.fromkeys(skipped):
        print("SKIPPED", line)
    print(f"gpu_check on {where}: {ran} cases, {len(failures)} failed, "
          f"{len(set(skipped))} checks skipped")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
