"""Stress checks for the single-pass kernels' memory ordering, on a real GPU.

    python -m benchmarks.gpu_check --ops stress [--dtypes float32,int32] [--dry-run]

The look-back scan, the chunked scan, the one-launch split reduction and the segment kernel hand
values from program to program within one launch through status words (release stores, acquire
loads), and keep those words in a *resident workspace* that the next launch on the same stream
reuses, told apart by an epoch instead of a memset (docs/scan.md, docs/reduce.md,
docs/segments.md). Triton's interpreter runs programs one after another, so a slip in that
ordering passes every test there; on a GPU it shows up only as a hang or as a rare wrong value.
These checks look for both:

- ``back_to_back``: each op run N times (2000 on a GPU, on inputs of a few MB) on one resident
  workspace, launches queued without a synchronization between them, alternating two inputs (so
  a status word left by the other input's launch and wrongly read as published gives a wrong
  value, not the same one); every result is compared bit for bit with its input's first result
  (on the device, so nothing waits), and each first result with the numpy oracle.
- ``two_streams``: the same ops launched alternately on two CUDA streams at once, a different
  input on each (each stream has its own workspace), results checked after a synchronization.
- ``graphs``: the look-back scan, the chunked scan, the split reduction and a segment scan each
  captured in a ``torch.cuda.CUDAGraph`` and replayed with new input values copied into the
  captured input, every replay checked against the oracle.
- ``big_offsets``: scans and reductions of an int8 view whose element offsets pass 2**31 (two
  3 GiB buffers: input and output views), checked against the oracle on the view's values.
- ``compiled``: ``torch.compile(fullgraph=True)`` (Inductor) of ``cumulative_sum``, ``reduce``
  and ``segment_reduce`` (values, and the traced graph holds the Triton kernels), and torch's
  own ``cumsum``/``sum``/``segment_reduce`` under ``tritonml.use_tritonml()`` giving torch's
  results.

Every case's GPU work runs in a worker thread that synchronizes the device at its end; if it does
not finish within its time limit (60 s, longer where kernels compile first) the case fails with
"hang: ..." and every later case is skipped, since the device is stuck: the caller should then
leave the process without waiting on the device (``hung_in()`` names the case; ``os._exit``).

Without CUDA (a dry run) ``back_to_back`` runs on CPU tensors through the interpreter at tiny
sizes (3 repeats); the checks that need CUDA are listed as skipped, never counted as passed.
The stress parts run for float32 and int32, ``big_offsets`` and ``compiled`` for float32 only.
"""
from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass
from typing import Callable, List, Optional, Tuple

import numpy as np
import torch

import tritonml
from tritonml.core.dtypes import FLOAT_DTYPES, dtype_name
from tritonml.launchers.reduce import ReduceFunction, reduce_axes
from tritonml.records.builtin_reductions import RECORDS
from tritonml.launchers.scan import SUM, cumulative_scan
from tritonml.launchers.segment import segment_reduce_axis, segment_scan_axis
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ReduceConfig, ScanConfig, SegmentConfig

from . import reduce_oracle, scan_oracle, segment_oracle

STRESS_DTYPES = (torch.float32, torch.int32)
GPU_REPEATS = 2000          # launches per op in back_to_back, alternating its two inputs
DRY_REPEATS = 3
GPU_STREAM_REPEATS = 500    # launches per stream in two_streams
GPU_GRAPH_REPLAYS = 32
HANG_SECONDS = 60.0         # a case's GPU work once its kernels are compiled
COMPILE_SECONDS = 240.0     # a case whose first launches compile (ptxas, Inductor)
DRY_SECONDS = 600.0         # the interpreter: slow, but never stuck on a device
GiB = 1 << 30
BIG_BUFFER = 3 * GiB + 64   # int8 elements of each big_offsets buffer
BIG_FREE_BYTES = 2 * BIG_BUFFER + GiB // 2

# (name, shape, axis, config, reverse, exclusive). Small tiles, chunks and windows: many programs,
# so many hand-overs between them in one launch.
GPU_SCANS = (
    ("lookback", (2, 2 ** 19 + 3), 1, ScanConfig("lookback", 1024, 1, 8), False, False),
    ("lookback", (2, 2 ** 19 + 3), 1, ScanConfig("lookback", 1024, 1, 8), True, True),
    ("chunked small windows", (3, 2 ** 19 + 3), 1,
     ScanConfig("chunked", 1024, 1, 8, chunk_tiles=3, window=4), False, False),
    ("chunked columns", (20000, 96), 0,
     ScanConfig("chunked", 32, 32, 4, chunk_tiles=5, window=8), True, True),
)
DRY_SCANS = (
    ("lookback", (2, 300), 1, ScanConfig("lookback", 64, 1), False, False),
    ("lookback", (2, 300), 1, ScanConfig("lookback", 64, 1), True, True),
    ("chunked small windows", (2, 300), 1, ScanConfig("chunked", 16, 1, chunk_tiles=3, window=2),
     False, False),
    ("chunked columns", (300, 4), 0, ScanConfig("chunked", 16, 4, chunk_tiles=2, window=2),
     True, True),
)

# (name, shape, axes, function, config): the one-launch split (the chain's last program folds).
GPU_SPLIT = ReduceConfig("split", 1024, 1, 4, splits=256, block_split=64)
GPU_SPLITS = (
    ("split", (2 ** 20 + 5,), (0,), "SUM", GPU_SPLIT),
    ("split", (2 ** 20 + 5,), (0,), "ARGMAX", GPU_SPLIT),
    ("split columns", (16384, 64), (0,), "SUM",
     ReduceConfig("split", 128, 32, 4, splits=64, block_split=16)),
)
DRY_SPLIT = ReduceConfig("split", 64, 1, splits=5, block_split=2)
DRY_SPLITS = (
    ("split", (1000,), (0,), "SUM", DRY_SPLIT),
    ("split", (1000,), (0,), "ARGMAX", DRY_SPLIT),
    ("split columns", (600, 5), (0,), "SUM", ReduceConfig("split", 32, 8, splits=5, block_split=2)),
)

# (name, axis length, segments, function, config, reverse, exclusive) along a 1-D x: a few dozen
# segments of random lengths (some empty), so most cross many programs. None: the launcher's own
# config (on a GPU it spreads the axis over the SMs).
GPU_SMALL_CHUNKS = SegmentConfig(256, 1, chunk_tiles=2, window=4, boundary_block=64)
GPU_SEGMENTS = (
    ("segment scan", 2 ** 20 + 5, 48, "sum", None, False, False),
    ("segment scan small chunks", 2 ** 20 + 5, 48, "sum", GPU_SMALL_CHUNKS, True, True),
    ("segment reduce", 2 ** 20 + 5, 48, "SUM", None, False, False),
    ("segment reduce small chunks", 2 ** 20 + 5, 48, "ARGMAX", GPU_SMALL_CHUNKS, False, False),
)
# On the CPU the launcher gives a chain one program, which hands nothing over: always force one.
DRY_SMALL_CHUNKS = SegmentConfig(16, 1, chunk_tiles=1, window=2, boundary_block=4)
DRY_SEGMENTS = (
    ("segment scan", 300, 6, "sum", DRY_SMALL_CHUNKS, False, False),
    ("segment scan", 300, 6, "sum", DRY_SMALL_CHUNKS, True, True),
    ("segment reduce", 300, 6, "SUM", DRY_SMALL_CHUNKS, False, False),
    ("segment reduce", 300, 6, "ARGMAX", DRY_SMALL_CHUNKS, False, False),
)
# The ops captured in CUDA graphs (by name, the first of each).
GRAPH_OPS = ("lookback", "chunked small windows", "split", "segment scan")

Check = Callable[[torch.Tensor, torch.Tensor], Tuple[bool, str]]


@dataclass(frozen=True)
class StressOp:
    """One op under stress.

    prepare(device) returns run(x): the op on a device input, into a poisoned output where the
    op takes one, returning the result. Device constants (offsets) are made in prepare, so all
    device work happens inside a bounded worker. check(result, x), both on the CPU, compares a
    result with the oracle: (ok, message)."""
    name: str
    label: str
    make_input: Callable[[int], torch.Tensor]
    prepare: Callable[[str], Callable[[torch.Tensor], torch.Tensor]]
    check: Check


# ---------------------------------------------------------------------------------------------
# the watchdog
# ---------------------------------------------------------------------------------------------
# The case whose GPU work never finished: the device is stuck behind it, so nothing more runs.
_hung: List[str] = []


class Hang(Exception):
    """GPU work that did not finish within its time limit."""


def hung_in() -> Optional[str]:
    """The case whose GPU work never finished, or None. After a hang the device is stuck: the
    caller should report and end the process with ``os._exit`` rather than wait on the device."""
    return _hung[0] if _hung else None


def _bounded(label: str, work: Callable, gpu: bool, seconds: float):
    """``work()``'s result, run in a worker thread that then waits for the device, so a kernel
    that never finishes costs ``seconds``, not the session. Raises Hang if it does not finish,
    and whatever ``work`` raised."""
    outcome: dict = {}

    def target():
        try:
            result = work()
            if gpu:
                torch.cuda.synchronize()
            outcome["result"] = result
        except BaseException as error:  # handed to the waiting thread
            outcome["error"] = error

    limit = seconds if gpu else DRY_SECONDS
    # A daemon: a thread stuck on a hung kernel must not keep the process from exiting.
    worker = threading.Thread(target=target, name=f"gpu_check_stress {label}", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        _hung.append(label)
        raise Hang(f"hang: no completion within {limit:.0f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _stuck(check: str, skipped: list) -> bool:
    """After a hang nothing can run on the device: say so instead of running the check."""
    if _hung:
        skipped.append(f"{check}: not run, the GPU hung earlier ({_hung[0]})")
    return bool(_hung)


def _run_case(label: str, body: Callable[[], List[str]], failures: list, counts: dict) -> None:
    """One counted case: ``body()`` returns the problems found; an exception is one."""
    counts["stress"] = counts.get("stress", 0) + 1
    try:
        problems = body()
    except Hang as hang:
        problems = [str(hang)]
    except Exception:
        # The innermost frames: an error raised in the worker carries the waiting thread's
        # frames first.
        problems = [traceback.format_exc(limit=-8)]
    if problems:
        failures.append(f"{label}: {'; '.join(problems)}")
        print("FAIL", failures[-1], flush=True)


# ---------------------------------------------------------------------------------------------
# inputs, outputs, oracles
# ---------------------------------------------------------------------------------------------
def _poison(shape, dtype, device) -> torch.Tensor:
    """An output that fails the oracle wherever the kernel leaves it unwritten."""
    if dtype in FLOAT_DTYPES:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    return torch.full(shape, torch.iinfo(dtype).min, dtype=dtype, device=device)


_SAME_SIZE_INT = {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _differs(got: torch.Tensor, want: torch.Tensor) -> torch.Tensor:
    """A 0-d device bool: whether the bits differ anywhere (NaN payloads and -0.0 included).
    Stays on the device, so comparing does not wait for the launch."""
    bits = _SAME_SIZE_INT[got.element_size()]
    return (got.view(bits) != want.view(bits)).any()


def _scan_check(axis, reverse, exclusive) -> Check:
    def check(result, x):
        x_np = scan_oracle.to_numpy(x)
        allowance = scan_oracle.accumulation_allowance(x_np, axis, "sum", reverse, exclusive,
                                                       x.dtype)
        return scan_oracle.scan_matches(result, x_np, axis, "sum", reverse, exclusive, allowance)
    return check


def _matches(result: torch.Tensor, expected: torch.Tensor, context: str) -> Tuple[bool, str]:
    try:
        reduce_oracle.assert_matches(result, expected, context)
    except AssertionError as error:
        return False, str(error)
    return True, ""


def _segment_scan_check(bounds, reverse, exclusive) -> Check:
    """Each segment against the dense scan oracle (and its error bound) on its own."""
    def check(result, x):
        x_np = scan_oracle.to_numpy(x)
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            if hi == lo:
                continue
            part = x_np[lo:hi]
            allowance = scan_oracle.accumulation_allowance(part, 0, "sum", reverse, exclusive,
                                                           x.dtype)
            ok, message = scan_oracle.scan_matches(result[lo:hi], part, 0, "sum", reverse,
                                                   exclusive, allowance)
            if not ok:
                return False, f"segment [{lo}, {hi}): {message}"
        return True, ""
    return check


def _input_maker(shape, dtype, function):
    return lambda seed: reduce_oracle.make_input(shape, dtype, function, seed)


# ---------------------------------------------------------------------------------------------
# the ops
# ---------------------------------------------------------------------------------------------
def _scan_op(name, shape, axis, config, reverse, exclusive, dtype) -> StressOp:
    def prepare(device):
        def run(x):
            out = _poison(x.shape, x.dtype, x.device)
            cumulative_scan(x, axis, SUM, reverse=reverse, exclusive=exclusive, out=out,
                            config=config)
            return out
        return run
    label = (f"scan {name} {shape} axis {axis} reverse={reverse} exclusive={exclusive} "
             f"{dtype_name(dtype)}")
    return StressOp(name, label, _input_maker(shape, dtype, "SUM"), prepare,
                    _scan_check(axis, reverse, exclusive))


def _split_op(name, shape, axes, function, config, dtype) -> StressOp:
    combine = RECORDS[ReduceFunction[function]]
    out_dtype = torch.int64 if combine.returns_index else dtype
    out_shape = reduce_oracle.result_shape(shape, axes, True)
    label = f"reduce {function} {name} {shape} axes {axes} {dtype_name(dtype)}"

    def prepare(device):
        def run(x):
            out = _poison(out_shape, out_dtype, x.device)
            reduce_axes(x, axes, combine, out=out, config=config)
            return out
        return run

    def check(result, x):
        return _matches(result, reduce_oracle.expected_tensor(x, function, axes), label)
    return StressOp(name, label, _input_maker(shape, dtype, function), prepare, check)


def _segment_op(name, length, segments, function, config, reverse, exclusive, dtype) -> StressOp:
    bounds = segment_oracle.random_offsets(length, segments, seed=length + segments)
    scan = function == "sum"
    forced = "launcher's config" if config is None else "forced config"
    if scan:
        label = (f"{name} ({length},) {segments} segments {forced} reverse={reverse} "
                 f"exclusive={exclusive} {dtype_name(dtype)}")
    else:
        label = f"{name} {function} ({length},) {segments} segments {forced} {dtype_name(dtype)}"

    def prepare(device):
        # Already int64 and contiguous, as the launchers take them: no check reads them back.
        offsets = torch.tensor(bounds, dtype=torch.int64, device=device)
        record = RECORDS[ReduceFunction[function]] if not scan else None

        def run(x):
            if scan:
                out = _poison(x.shape, x.dtype, x.device)
                return segment_scan_axis(x, SUM, offsets, 0, reverse=reverse,
                                         exclusive=exclusive, out=out, config=config)
            # No out= here: the two alternating inputs stand in for the poison (a recycled
            # block holds the other input's result).
            return segment_reduce_axis(x, record, offsets, 0, config=config)[0]
        return run

    if scan:
        check = _segment_scan_check(bounds, reverse, exclusive)
    else:
        def check(result, x):
            expected = segment_oracle.segment_reduce_expected(x, function, bounds, 0)
            return _matches(result, expected, label)
    make_input = _input_maker((length,), dtype, "SUM" if scan else function)
    return StressOp(name, label, make_input, prepare, check)


def stress_ops(dtype, gpu: bool) -> List[StressOp]:
    """The ops back_to_back and two_streams run, at GPU or dry-run sizes."""
    ops = [_scan_op(*case, dtype) for case in (GPU_SCANS if gpu else DRY_SCANS)]
    ops += [_split_op(*case, dtype) for case in (GPU_SPLITS if gpu else DRY_SPLITS)]
    ops += [_segment_op(*case, dtype) for case in (GPU_SEGMENTS if gpu else DRY_SEGMENTS)]
    return ops


def graph_ops(dtype) -> List[StressOp]:
    """The first op of each name in GRAPH_OPS, at GPU sizes."""
    firsts = {}
    for op in stress_ops(dtype, gpu=True):
        firsts.setdefault(op.name, op)
    return [firsts[name] for name in GRAPH_OPS]


def _oracle_problems(op: StressOp, results, xs) -> List[str]:
    problems = []
    for k, (result, x) in enumerate(zip(results, xs)):
        ok, message = op.check(result, x)
        if not ok:
            problems.append(f"input {k}: {message}")
    return problems


def _repeat_problems(differing, repeats_per_input) -> List[str]:
    return [f"input {k}: {count} of {repeats} repeats differ in their bits from its first result"
            for k, (count, repeats) in enumerate(zip(differing, repeats_per_input)) if count]


# ---------------------------------------------------------------------------------------------
# 1. back to back on one resident workspace
# ---------------------------------------------------------------------------------------------
def _warm_up(op: StressOp, xs_cpu, device) -> None:
    """First launches compile; they run here, under the compile time limit."""
    run = op.prepare(device)
    for x in xs_cpu:
        run(x.to(device))


def _back_to_back_work(op: StressOp, xs_cpu, repeats: int, device):
    """``repeats`` launches on the current stream (so one resident workspace), alternating the
    inputs, with no synchronization between them: each result is compared with its input's first
    on the device. Returns the first results (CPU) and each input's count of differing repeats."""
    run = op.prepare(device)
    xs = [x.to(device) for x in xs_cpu]
    firsts = [run(x) for x in xs]
    differing = [torch.zeros((), dtype=torch.int64, device=device) for _ in xs]
    for i in range(repeats):
        k = i % len(xs)
        differing[k] += _differs(run(xs[k]), firsts[k])
    return [f.cpu() for f in firsts], [int(d) for d in differing]


def check_back_to_back(ops, device, gpu, failures, counts, skipped) -> None:
    repeats = GPU_REPEATS if gpu else DRY_REPEATS
    per_input = [len(range(0, repeats, 2)), len(range(1, repeats, 2))]
    for op in ops:
        if _stuck(f"back_to_back {op.label}", skipped):
            return
        label = f"stress back_to_back {op.label}"

        def body(op=op, label=label):
            xs = [op.make_input(seed) for seed in (1, 2)]
            if gpu:
                _bounded(f"{label} warm-up", lambda: _warm_up(op, xs, device), gpu,
                         COMPILE_SECONDS)
            firsts, differing = _bounded(
                label, lambda: _back_to_back_work(op, xs, repeats, device), gpu, HANG_SECONDS)
            return _oracle_problems(op, firsts, xs) + _repeat_problems(differing, per_input)
        _run_case(label, body, failures, counts)


# ---------------------------------------------------------------------------------------------
# 2. two streams at once (CUDA)
# ---------------------------------------------------------------------------------------------
def _two_streams_work(op: StressOp, xs_cpu, repeats: int, device):
    """Launches alternating between two streams, ``repeats`` on each, one input per stream.
    Everything a stream touches (offsets, input, results, counters) is made on that stream, so
    the streams need no ordering between them and no ``record_stream``; every tensor lives until
    the synchronization at the end."""
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    runs, xs, firsts, differing = [], [], [], []
    for stream, x_cpu in zip(streams, xs_cpu):
        with torch.cuda.stream(stream):
            runs.append(op.prepare(device))
            xs.append(x_cpu.to(device))
            firsts.append(runs[-1](xs[-1]))
            differing.append(torch.zeros((), dtype=torch.int64, device=device))
    for i in range(2 * repeats):
        k = i % 2
        with torch.cuda.stream(streams[k]):
            differing[k] += _differs(runs[k](xs[k]), firsts[k])
    torch.cuda.synchronize()  # both streams, before the default stream reads their results
    return [f.cpu() for f in firsts], [int(d) for d in differing]


def check_two_streams(ops, device, failures, counts, skipped) -> None:
    for op in ops:
        if _stuck(f"two_streams {op.label}", skipped):
            return
        label = f"stress two_streams {op.label}"

        def body(op=op, label=label):
            xs = [op.make_input(seed) for seed in (3, 4)]
            firsts, differing = _bounded(
                label, lambda: _two_streams_work(op, xs, GPU_STREAM_REPEATS, device), True,
                HANG_SECONDS)
            return (_oracle_problems(op, firsts, xs)
                    + _repeat_problems(differing, [GPU_STREAM_REPEATS] * 2))
        _run_case(label, body, failures, counts)


# ---------------------------------------------------------------------------------------------
# 3. CUDA graphs
# ---------------------------------------------------------------------------------------------
def _graph_work(op: StressOp, xs_cpu, device):
    """Capture ``op`` on a static input, then per input: copy it into the static input, replay,
    copy the result out. A captured launch gets a fresh zeroed workspace (a memset in the graph)
    instead of the resident one."""
    run = op.prepare(device)
    static_x = xs_cpu[0].to(device, copy=True)  # replays overwrite it
    # torch's rule: run the work outside capture first (compiles, lazy initialization, the
    # launchers' caches), on a side stream that the capture then waits for.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            run(static_x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = run(static_x)
    results = []
    for x_cpu in xs_cpu:
        static_x.copy_(x_cpu)
        graph.replay()
        results.append(static_out.cpu())
    return results


def check_graphs(ops, device, failures, counts, skipped) -> None:
    for op in ops:
        if _stuck(f"graphs {op.label}", skipped):
            return
        label = f"stress graphs {op.label}"

        def body(op=op, label=label):
            xs = [op.make_input(100 + r) for r in range(GPU_GRAPH_REPLAYS)]
            # back_to_back has compiled these specializations already
            results = _bounded(label, lambda: _graph_work(op, xs, device), True, HANG_SECONDS)
            problems = _oracle_problems(op, results, xs)
            return [problem.replace("input", "replay", 1) for problem in problems]
        _run_case(label, body, failures, counts)


# ---------------------------------------------------------------------------------------------
# 4. element offsets past 2**31 (CUDA)
# ---------------------------------------------------------------------------------------------
BIG_LOOKBACK = ScanConfig("lookback", 1024, 1, 8)
BIG_CHUNKED = ScanConfig("chunked", 1024, 1, 8, chunk_tiles=3, window=4)
BIG_SPLIT = ReduceConfig("split", 1024, 1, 4, splits=64, block_split=64)


def _big_offset_runs(out_buffer, row):
    """(label, run(x) -> result) per case. Outputs into ``out_buffer`` are views with x's
    strides: their offsets pass 2**31 too."""
    scan_out = torch.as_strided(out_buffer, (3, row), (GiB, 1))
    sum_out = torch.as_strided(out_buffer, (3, 1), (GiB, 1))

    def scan_into_buffer(config, reverse, exclusive):
        def run(x):
            scan_out.fill_(77)
            cumulative_scan(x, 1, SUM, reverse=reverse, exclusive=exclusive, out=scan_out,
                            config=config)
            return scan_out
        return run

    def sum_into_buffer(x):
        sum_out.fill_(77)
        return tritonml.reduce(x, "sum", 1, out=sum_out)

    return [
        ("cumulative_sum axis 1", lambda x: tritonml.cumulative_sum(x, 1)),
        ("cumulative_sum axis 0 (stride 2**30 on the axis)",
         lambda x: tritonml.cumulative_sum(x, 0)),
        ("look-back reverse exclusive into a view past 2**31",
         scan_into_buffer(BIG_LOOKBACK, True, True)),
        ("chunked into a view past 2**31", scan_into_buffer(BIG_CHUNKED, False, False)),
        ("reduce SUM axis 1 into a view past 2**31", sum_into_buffer),
        ("split SUM axis 1",
         lambda x: reduce_axes(x, (1,), RECORDS[ReduceFunction.SUM], config=BIG_SPLIT)),
        ("reduce MAX of all", lambda x: tritonml.reduce(x, "max")),
        ("reduce ARGMAX axes (0, 1)", lambda x: tritonml.reduce(x, "argmax", (0, 1))),
    ]


def _int8_scan(axis, reverse=False, exclusive=False):
    return lambda v: scan_oracle.scan_reference(v.numpy(), axis, "sum", reverse, exclusive,
                                                int_dtype=np.int8)


# label -> oracle(x's values on the CPU): a numpy array (scans) or a tensor (reductions)
BIG_OFFSET_ORACLES = {
    "cumulative_sum axis 1": _int8_scan(1),
    "cumulative_sum axis 0 (stride 2**30 on the axis)": _int8_scan(0),
    "look-back reverse exclusive into a view past 2**31": _int8_scan(1, True, True),
    "chunked into a view past 2**31": _int8_scan(1),
    "reduce SUM axis 1 into a view past 2**31":
        lambda v: reduce_oracle.expected_tensor(v, "SUM", (1,)),
    "split SUM axis 1": lambda v: reduce_oracle.expected_tensor(v, "SUM", (1,)),
    "reduce MAX of all": lambda v: reduce_oracle.expected_tensor(v, "MAX", None),
    "reduce ARGMAX axes (0, 1)": lambda v: reduce_oracle.expected_tensor(v, "ARGMAX", (0, 1)),
}


def _big_offsets_work(device, row: int):
    """x: a (3, row) int8 view with a row stride of 2**30 (its last element past 2**31) over one
    buffer, outputs over another. Returns x's values as the oracle reads them (``.cpu()`` of the
    view), per case (label, result on the CPU, whether every launch used 64-bit offsets), and
    whether x was left untouched."""
    x_buffer = torch.empty(BIG_BUFFER, dtype=torch.int8, device=device)
    out_buffer = torch.empty(BIG_BUFFER, dtype=torch.int8, device=device)
    x = torch.as_strided(x_buffer, (3, row), (GiB, 1))
    x.copy_(reduce_oracle.make_input((3, row), torch.int8, "SUM", seed=5).to(device))
    values = x.to("cpu", copy=True)
    results = []
    for label, run in _big_offset_runs(out_buffer, row):
        with _trace.record() as rec:
            result = run(x)
        # every launch that takes the flag (all of them, today) set it
        flags = [launch.meta["INDEX_64"] for launch in rec.launches if "INDEX_64" in launch.meta]
        wide = bool(flags) and all(flags)
        # a copy: the scans write into one output view in turn
        results.append((label, result.to("cpu", copy=True), wide))
    untouched = torch.equal(x.to("cpu", copy=True), values)
    return values, results, untouched


def _big_offsets_problems(values, results, untouched) -> List[str]:
    problems = [] if untouched else ["the input view changed"]
    for label, result, wide in results:
        if not wide:
            problems.append(f"{label}: a launch did not use 64-bit offsets")
        want = BIG_OFFSET_ORACLES[label](values)
        if isinstance(want, torch.Tensor):
            ok, message = _matches(result, want, label)
        else:
            ok = np.array_equal(result.numpy(), want)
            message = f"{int((result.numpy() != want).sum())} elements differ"
        if not ok:
            problems.append(f"{label}: {message}")
    return problems


def check_big_offsets(device, failures, counts, skipped, row: int = 2 ** 20 + 3) -> None:
    if _stuck("big_offsets", skipped):
        return
    torch.cuda.empty_cache()  # torch's cached blocks count as used in mem_get_info
    free, _ = torch.cuda.mem_get_info()
    if free < BIG_FREE_BYTES:
        skipped.append(f"big_offsets: needs {BIG_FREE_BYTES / GiB:.1f} GiB of free GPU memory, "
                       f"{free / GiB:.1f} GiB free")
        return
    label = f"stress big_offsets (3, {row}) int8 view, row stride 2**30"

    def body():
        values, results, untouched = _bounded(label, lambda: _big_offsets_work(device, row),
                                              True, COMPILE_SECONDS)
        torch.cuda.empty_cache()  # give the 6 GiB back to the sweeps that follow
        return _big_offsets_problems(values, results, untouched)
    _run_case(label, body, failures, counts)


# ---------------------------------------------------------------------------------------------
# 5. torch.compile and routing (CUDA)
# ---------------------------------------------------------------------------------------------
COMPILED_SHAPE = (256, 4096)
COMPILED_BOUNDS = segment_oracle.random_offsets(COMPILED_SHAPE[1], 16, seed=6)


def _tritonml_calls(x, offsets):
    return (tritonml.cumulative_sum(x, 1), tritonml.reduce(x, "sum", 1),
            tritonml.segment_reduce(x, "sum", offsets=offsets, axis=1))


class _Calls(torch.nn.Module):
    def forward(self, x, offsets):
        return _tritonml_calls(x, offsets)


def _compiled_work(xs_cpu, device):
    """The compiled calls on each input (one compile: same shapes); results on the CPU."""
    offsets = torch.tensor(COMPILED_BOUNDS, dtype=torch.int64, device=device)
    compiled = torch.compile(_tritonml_calls, fullgraph=True)
    return [tuple(r.cpu() for r in compiled(x.to(device), offsets)) for x in xs_cpu]


def _compiled_problems(results, xs_cpu) -> List[str]:
    problems = []
    scan_check = _scan_check(1, False, False)
    for k, ((running, total, segments), x) in enumerate(zip(results, xs_cpu)):
        checks = (("cumulative_sum", scan_check(running, x)),
                  ("reduce", _matches(total, reduce_oracle.expected_tensor(x, "SUM", (1,)),
                                      "reduce")),
                  ("segment_reduce", _matches(segments, segment_oracle.segment_reduce_expected(
                      x, "SUM", COMPILED_BOUNDS, 1), "segment_reduce")))
        problems += [f"input {k} {name}: {message}" for name, (ok, message) in checks if not ok]
    return problems


def _traced_code() -> str:
    """The graph AOT tracing (what Inductor compiles) makes of the calls, traced with fake CUDA
    tensors as tests/torch_ops/test_torch_ops.py does: Triton kernels appear as
    ``triton_kernel_wrapper_functional`` nodes, opaque ops as ``torch.ops.tritonml.*``."""
    from tritonml.core import torch_compat

    def inputs():
        return (torch.empty(COMPILED_SHAPE, device="cuda"),
                torch.zeros(len(COMPILED_BOUNDS), dtype=torch.int64, device="cuda"))
    return torch_compat.aot_graph_code(_Calls(), inputs)


def _traced_code_problems(code: str) -> List[str]:
    problems = []
    # cumulative_sum and reduce are triton_ops: their kernels are in the graph, not the ops;
    # the segment ops launch with tensors in tuples, which torch's tracing cannot see, so they
    # stay opaque (docs/torch.md).
    kernels = code.count("triton_kernel_wrapper_functional(")
    if kernels < 2:
        problems.append(f"{kernels} Triton kernel nodes, expected one each for cumulative_sum "
                        "and reduce")
    for opaque in ("tritonml.cumulative_sum", "tritonml.reduce."):
        if opaque in code:
            problems.append(f"{opaque} is an opaque call, not its kernels")
    if "tritonml.segment_reduce" not in code:
        problems.append("no tritonml.segment_reduce call")
    return problems + ([f"graph:\n{code}"] if problems else [])


def _routing_calls(device):
    """(name, call) pairs on inputs whose sums are exact in float32 in any order (multiples of
    1/16 up to 1 in magnitude, at most 2**20 of them: every partial sum is a multiple of 1/16
    below 2**20), so torch's and tritonml's results agree in every bit."""
    g = torch.Generator().manual_seed(7)
    x = (torch.randint(-16, 17, COMPILED_SHAPE, generator=g) / 16).to(device)
    ints = reduce_oracle.make_input(COMPILED_SHAPE, torch.int32, "SUM", seed=8).to(device)
    flat = (torch.randint(-16, 17, (2 ** 18,), generator=g) / 16).to(device)
    bounds = segment_oracle.random_offsets(2 ** 18, 64, seed=9)
    lengths = torch.tensor(np.diff(bounds), dtype=torch.int64, device=device)
    return (("torch.cumsum float32", lambda: torch.cumsum(x, 1)),
            ("torch.cumsum int32 (an int64 result)", lambda: torch.cumsum(ints, 1)),
            ("torch.sum dim 1", lambda: torch.sum(x, 1)),
            ("torch.sum of all", lambda: x.sum()),
            ("torch.segment_reduce sum", lambda: torch.segment_reduce(flat, "sum",
                                                                       lengths=lengths)),
            ("torch.segment_reduce max", lambda: torch.segment_reduce(flat, "max",
                                                                       lengths=lengths)))


def _routing_work(device):
    """Per call: (name, torch's own result, the routed result, tritonml launches it made)."""
    results = []
    for name, call in _routing_calls(device):
        own = call()
        # Routing and launch records are per thread: both are entered here, in the worker.
        with tritonml.use_tritonml(), _trace.record() as rec:
            routed = call()
        results.append((name, own.cpu(), routed.cpu(), len(rec.launches)))
    return results


def _routing_problems(results) -> List[str]:
    problems = []
    for name, own, routed, launches in results:
        if not launches:
            problems.append(f"{name}: not routed (no tritonml launch)")
        try:
            torch.testing.assert_close(routed, own, rtol=0, atol=0, equal_nan=True)
        except AssertionError as error:
            problems.append(f"{name}: not torch's result: {error}")
    return problems


def check_compiled(device, failures, counts, skipped) -> None:
    xs = [reduce_oracle.make_input(COMPILED_SHAPE, torch.float32, "SUM", seed) for seed in (10, 11)]
    cases = (
        ("compiled values", COMPILE_SECONDS,
         lambda: _compiled_work(xs, device), lambda results: _compiled_problems(results, xs)),
        ("compiled graph holds the kernels", COMPILE_SECONDS, _traced_code,
         _traced_code_problems),
        ("routing under use_tritonml", HANG_SECONDS,
         lambda: _routing_work(device), _routing_problems),
    )
    for name, seconds, work, problems_of in cases:
        if _stuck(f"compiled {name}", skipped):
            return
        label = f"stress {name}"

        def body(label=label, work=work, seconds=seconds, problems_of=problems_of):
            return problems_of(_bounded(label, work, True, seconds))
        _run_case(label, body, failures, counts)


# ---------------------------------------------------------------------------------------------
# the entry point
# ---------------------------------------------------------------------------------------------
def check_stress(dtype, device, gpu: bool, failures: list, counts: dict, skipped: list) -> None:
    """Run the stress checks for ``dtype`` on ``device``: CUDA at GPU sizes (``gpu``) or CPU
    tensors through the interpreter at tiny sizes. Each case adds 1 to ``counts["stress"]``; a
    failing one appends "label: problem" to ``failures`` and prints "FAIL ..."; a check that
    cannot run here appends "name: needs CUDA" (or why not) to ``skipped``."""
    if dtype not in STRESS_DTYPES:
        return  # the protocols do not depend on the element type beyond these two
    name = dtype_name(dtype)
    ops = stress_ops(dtype, gpu)
    check_back_to_back(ops, device, gpu, failures, counts, skipped)
    if not gpu:
        skipped += [f"two_streams {name}: needs CUDA", f"graphs {name}: needs CUDA"]
        if dtype == torch.float32:
            skipped += ["big_offsets: needs CUDA", "compiled: needs CUDA"]
        return
    check_two_streams(ops, device, failures, counts, skipped)
    check_graphs(graph_ops(dtype), device, failures, counts, skipped)
    if dtype == torch.float32:
        check_big_offsets(device, failures, counts, skipped)
        check_compiled(device, failures, counts, skipped)
