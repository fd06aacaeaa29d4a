"""Warm per-call host overhead: Python time from a public function to the kernel launch.

    python -m benchmarks.host_overhead [--calls 2000]

Each op runs once (compiling and filling the plan cache), then ``--calls`` times back to back on a
small tensor; the per-call time is the loop's wall time over the call count, with the device
synchronized once at the end. On a GPU a small tensor's kernel takes a few microseconds and launches
are asynchronous, so the loop measures the host: validation, planning, the dispatcher and Triton's
launcher. Each layer is timed apart (the public function, the registered ``torch.ops`` op, the
launcher in ``tritonml.launchers``) so the table shows where the time goes, next to torch's own op.
On the CPU the kernels run in the interpreter and the numbers mean nothing, unless
``--stub-launch`` is given:

    python -m benchmarks.host_overhead --stub-launch

times, on a machine without a GPU, the host path a warm call takes on one: the launchers' plans, the
prepared launches (``tritonml.runtime.relaunch.PreparedLaunch``: argument keys, binding) up to the
compiled kernel's own C launcher, which is replaced by a no-op along with the driver's device and
stream queries. It is our Python time from the public function to the kernel launch, what the 20 us
budget (docs/tuning.md) is about; the driver's launch itself (a few us) is not in it.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import time
import types

import torch

import tritonml
import tritonml.tuning
from tritonml.launchers.reduce import reduce_axes
from tritonml.runtime import relaunch as _relaunch
from tritonml.launchers.scan import SUM, cumulative_scan


# Compiled launches of the last ``per_call_us`` by the way they went (``relaunch.BOUND``: through
# JITFunction.run, ``relaunch.RELAUNCHED``: straight to the compiled kernel).
launch_counts: collections.Counter = collections.Counter()


def per_call_us(fn, calls: int, sync) -> float:
    fn()
    sync()
    best = float("inf")
    launch_counts.clear()
    with _relaunch.observing(lambda way: launch_counts.update((way,))):
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


@contextlib.contextmanager
def gpu_host_path_with_launches_stubbed():
    """Take the compiled-launch path on CPU tensors, up to the C launcher (a no-op)."""
    from unittest import mock

    from tritonml import runtime
    from tritonml.core import backend as _backend, triton_compat as _triton_compat

    class StubCompiled:
        function = packed_metadata = None

        def launch_metadata(self, *args):
            return None

        def run(self, *args):
            return None

    def first_launch(kernel, grid, args, meta, key):
        # As _relaunch._meta_order, from the interpreted kernel's parameter names.
        names = tuple(kernel.arg_names[len(args):])
        entry = StubCompiled(), names if all(n in meta for n in names) else None
        _relaunch._compiled[key] = entry
        return entry

    stub_driver = types.SimpleNamespace(active=types.SimpleNamespace(
        get_current_device=lambda: 0, get_current_stream=lambda device: 0))
    try:
        with mock.patch.object(_backend, "INTERPRET", False), \
                mock.patch.object(_triton_compat.jit_run, "driver", stub_driver), \
                mock.patch.object(_relaunch, "_first_launch", first_launch):
            yield
    finally:
        # The plans' prepared launches and the relaunch cache now hold stub kernels: forget them.
        runtime.clear()


def stubbed_main(calls: int) -> int:
    print(f"warm per-call host time, GPU path with the launch stubbed out ({calls} calls, best "
          "of 3), (16, 256) float32 on the CPU")
    print("| call | µs per call | launches relaunched per call |")
    print("|---|---:|---:|")
    for name, fn in cases("cpu"):
        if name.startswith("torch."):
            continue
        # Configs as for an H100; the first call (interpreted) validates and plans.
        with tritonml.tuning.target("H100"):
            fn()
            with gpu_host_path_with_launches_stubbed():
                us = per_call_us(fn, calls, lambda: None)
        print(f"| {name} | {us:.1f} | {launch_counts[_relaunch.RELAUNCHED] / (3 * calls):.2f} |",
              flush=True)
    return 0


def cases(device):
    x = torch.randn(16, 256, device=device)
    out = torch.empty_like(x)
    red_out = torch.empty(16, 1, device=device)
    from tritonml.records.builtin_reductions import record_of
    sum_combine = record_of("SUM")
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
    parser.add_argument("--stub-launch", action="store_true",
                        help="time the GPU host path on the CPU, the kernel launch a no-op")
    args = parser.parse_args(argv)
    if args.stub_launch:
        return stubbed_main(args.calls)
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
        through_jit = f"{launch_counts[_relaunch.BOUND] / (3 * calls):.2f}" if gpu else "-"
        print(f"| {name} | {us:.1f} | {through_jit} |", flush=True)
    # Triton's own share: the recorded launches of two ops, relaunched straight through the
    # JIT function (no tritonml code in the loop).
    from tritonml.runtime import trace as _trace
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
