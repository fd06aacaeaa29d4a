"""GPU timing: tritonml against torch, in GB/s from the ideal byte count (not run in CI).

    python -m benchmarks.gpu_timing [--dtypes float32,float16,int32] [--output FILE]

With a CUDA device, every case is timed with ``triton.testing.do_bench`` (each benchmark is a
closure over preallocated tensors, so allocation stays outside the timed region; the result is
checked against a float64 reference first). Bandwidth for both tritonml and torch is the same count:
the ideal bytes, input read once + output written once (``benchmarks.cases``), divided by the
median time. Without CUDA it prints why and exits 0.

``--dry-run`` exercises the same code path on the CPU (interpreter, tiny shapes, a wall-clock
timer): it checks the script, its numbers mean nothing.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import itertools
import sys
import time

import torch

from tritonml.core.dtypes import dtype_name

from . import cases as _cases

# GPU-sized shapes per scan case: big enough to be bandwidth-bound (256 MiB of float32 for rows and
# columns; the long row has 2**26 elements). The dry run uses the interpreter's shapes.
GPU_SCAN_SHAPES = {
    "rows": ((16384, 4096), 1),
    "columns": ((4096, 16384), 0),
    "lookback": ((1, 2 ** 26), 1),
}


# Reduce cases keep their axes; "split" reduces 2**28 elements to one.
GPU_REDUCE_SHAPES = {
    "rows": (16384, 4096),
    "columns": (4096, 16384),
    "split": (2 ** 28,),
    "axes apart": (256, 256, 256),
}


def _do_bench_ms(fn) -> float:
    """Median time of ``fn`` with the host in the loop: a launch that takes the host longer than
    the kernel takes the GPU shows the host's time."""
    import triton.testing
    return triton.testing.do_bench(fn, return_mode="median")


def _graph_bench_ms(fn) -> float:
    """Median time of ``fn`` replayed from a captured CUDA graph: the device's time alone."""
    import triton.testing
    return triton.testing.do_bench_cudagraph(fn, return_mode="median")


def _wall_clock_ms(fn) -> float:
    fn()
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1e3


def scan_benchmarks(dtypes, device: str, dry_run: bool):
    """(name, dtype, prepared tritonml case, torch closure) for every scan case and dtype."""
    for case in _cases.SCAN_CASES:
        shape, axis = ((case.shape, case.axis) if dry_run else GPU_SCAN_SHAPES[case.regime])
        sized = dataclasses.replace(case, shape=shape, axis=axis)
        for dtype in dtypes:
            # A case without a forced config runs what the launcher picks on this device.
            prepared = _cases.prepare_scan(sized, dtype, device, resolve_cuda_heuristic=False)
            x, torch_op = prepared.extra["x"], prepared.extra["torch_op"]
            torch_out = torch.empty_like(x)

            def torch_run(x=x, torch_op=torch_op, axis=axis, torch_out=torch_out):
                return torch_op(x, axis, out=torch_out)

            yield sized, dtype, prepared, torch_run


def reduce_benchmarks(dtypes, device: str, dry_run: bool):
    """Reduce cases (``benchmarks.cases.REDUCE_CASES``)."""
    for case in _cases.REDUCE_CASES:
        if not dry_run:
            case = dataclasses.replace(case, shape=GPU_REDUCE_SHAPES[case.regime])
        for dtype in dtypes:
            prepared = _cases.prepare_reduce(case, dtype, device, resolve_cuda_heuristic=False)
            if prepared is None:
                continue
            yield case, dtype, prepared, prepared.extra["torch_run"]


def _regime(prepared) -> str:
    """The regime the case launches: its config's, or the kernels the launcher picked."""
    if prepared.config is not None and hasattr(prepared.config, "regime"):
        return prepared.config.regime
    from tritonml.runtime import trace as _trace
    with _trace.record(execute=False) as recorder:
        prepared.run()
    return "+".join(launch.name for launch in recorder.launches)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_timing",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--dtypes", default="float32,float16,int32")
    parser.add_argument("--output", metavar="FILE", help="also write the markdown table to FILE")
    parser.add_argument("--host-in-loop", action="store_true",
                        help="time plain launches (host overhead included) instead of CUDA graph "
                             "replays (device time alone)")
    parser.add_argument("--dry-run", action="store_true",
                        help="run the code path on the CPU with tiny shapes (numbers meaningless)")
    args = parser.parse_args(argv)
    has_cuda = torch.cuda.is_available()
    if not has_cuda and not args.dry_run:
        print("benchmarks.gpu_timing: no CUDA device here, so there is nothing to time; exiting. "
              "Device-independent numbers (bytes moved, launches, compiled code) come from "
              "`python -m benchmarks.report`.")
        return 0
    import triton

    import tritonml
    names = {dtype_name(d): d for d in _cases.DTYPES}
    dtypes = [names[d.strip()] for d in args.dtypes.split(",") if d.strip()]
    device = "cuda" if has_cuda and not args.dry_run else "cpu"
    timer = (_wall_clock_ms if device != "cuda" else
             _do_bench_ms if args.host_in_loop else _graph_bench_ms)
    where = torch.cuda.get_device_name() if device == "cuda" else "CPU dry run (meaningless)"
    lines = [f"GPU timing on {where}, {datetime.date.today().isoformat()} (tritonml "
             f"{tritonml.__version__}, triton {triton.__version__}, torch {torch.__version__}). "
             "GB/s = ideal bytes (input once + output once) / median time "
             f"({'plain launches, host time included' if args.host_in_loop else 'CUDA graph replays: device time alone'}).", "",
             "| op | case | config | shape | axis | dtype | regime | tritonml ms | tritonml GB/s | "
             "torch ms | torch GB/s | speed-up |",
             "|---|---|---|---|---|---|---|---:|---:|---:|---:|---:|"]
    # Lazily, so only one case's tensors are alive at a time.
    benches = itertools.chain(
        (("scan", b) for b in scan_benchmarks(dtypes, device, args.dry_run)),
        (("reduce", b) for b in reduce_benchmarks(dtypes, device, args.dry_run)))
    for kind, (case, dtype, prepared, torch_run) in benches:
        prepared.run()
        prepared.check()
        ours = timer(prepared.run)
        theirs = timer(torch_run)
        gbps = lambda ms: prepared.ideal_bytes / (ms * 1e-3) / 1e9  # noqa: E731
        regime = _regime(prepared)
        axis = (case.axis if kind == "scan" else
                "all" if case.axes is None else ",".join(map(str, case.axes)))
        op = f"cumulative_{case.combine}" if kind == "scan" else f"reduce {case.function}"
        label = case.label if case.config is not None else "launcher's choice"
        line = (f"| {op} | {case.regime} | {label} | {'x'.join(map(str, case.shape))} | {axis} | "
                f"{str(dtype).replace('torch.', '')} | {regime} | {ours:.3f} | {gbps(ours):.0f} | "
                f"{theirs:.3f} | {gbps(theirs):.0f} | {theirs / ours:.2f}x |")
        print(line, file=sys.stderr)
        lines.append(line)
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
