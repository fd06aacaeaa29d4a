"""Warm per-call host overhead: Python time from a public function to the kernel launch.

    python -m benchmarks.host_overhead [--calls 2000]

Each op runs once (compiling and filling the plan cache), then ``--calls`` times back to back on a
small tensor; the per-call time is the loop's wall time over the call count, with the device
synchronized once at the end. On a GPU a small tensor's kernel takes a few microseconds and launches
are asynchronous, so the loop measures the host: validation, planning, the dispatcher and Triton's
launcher. Each layer is timed apart (the public function, the registered ``torch.ops`` op, the
launcher in ``tritonml.ops``) so the table shows where the time goes, next to torch's own op.
On the CPU the kernels run in the interpreter and the numbers mean nothing.
"""
from __future__ import annotations

import argparse
import sys
import time

import torch

import tritonml
from tritonml.ops.reduce import reduce_axes
from tritonml._triton_compat import launch_counts
from tritonml.ops.scan import SUM, cumulative_scan


def per_call_us(fn, calls: int, sync) -> float:
    fn()
    sync()
    best = float("inf")
    launch_counts["bound"] = 0
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def cases(device):
    x = torch.randn(16, 256, device=device)
    out = torch.empty_like(x)
    red_out = torch.empty(16, 1, device=device)
    from tritonml.library.reduce import _combine
    sum_combine = _combine("SUM")
    yield "cumulative_sum (public)", lambda: tritonml.cumulative_sum(x, 1)
    yield "cumulative_sum out= (public)", lambda: tritonml.cumulative_sum(x, 1, out=out)
    yield "torch.ops.tritonml.cumulative_sum", lambda: torch.ops.tritonml.cumulative_sum(
        x, 1, False, False)
    yield "launcher cumulative_scan", lambda: cumulative_scan(x, 1, SUM, out=out)
    yield "torch.cumsum", lambda: torch.cumsum(x, 1)
    yield "reduce SUM (public)", lambda: tritonml.reduce(x, "SUM", 1)
    yield "reduce SUM out= (public)", lambda: tritonml.reduce(x, "SUM", 1, out=red_out)
    yield "launcher reduce_axes", lambda: reduce_axes(x, [1], sum_combine, out=red_out)
    yield "torch.sum", lambda: torch.sum(x, 1, keepdim=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.host_overhead",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args(argv)
    gpu = torch.cuda.is_available()
    device = "cuda" if gpu else "cpu"
    sync = torch.cuda.synchronize if gpu else (lambda: None)
    calls = args.calls if gpu else 5
    where = torch.cuda.get_device_name() if gpu else "CPU interpreter (meaningless)"
    print(f"warm per-call time on {where}, (16, 256) float32, best of 3 loops of {calls} calls")
    print("| call | µs per call | launches through JITFunction.run per call |")
    print("|---|---:|---:|")
    for name, fn in cases(device):
        us = per_call_us(fn, calls, sync)
        through_jit = f"{launch_counts['bound'] / (3 * calls):.2f}" if gpu else "-"
        print(f"| {name} | {us:.1f} | {through_jit} |", flush=True)
    # Triton's own share: the recorded launches of two ops, relaunched straight through the
    # JIT function (no tritonml code in the loop).
    from tritonml import _trace
    x = torch.randn(16, 256, device=device)
    for name, fn in (("cumulative_sum", lambda: tritonml.cumulative_sum(x, 1)),
                     ("reduce SUM", lambda: tritonml.reduce(x, "SUM", 1))):
        with _trace.record() as recorder:
            fn()
        launch = recorder.launches[-1]
        relaunch = lambda launch=launch: launch.kernel[launch.grid](*launch.args, **launch.meta)  # noqa: E731
        print(f"| {name}: Triton launch alone ({launch.name}) | "
              f"{per_call_us(relaunch, calls, sync):.1f} | 1.00 |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
