"""tritonml.distributed: scans and reductions over shards of a gloo process group (CPU, loopback),
plain shards and DTensors, against the single-process oracles on the whole tensor.

Spawning is the expensive part, so a few process groups run many checks each: the ranks are
subprocesses running ``_worker`` of this module (``python -c``), with a free port on 127.0.0.1. Each
rank pickles what it computed (its shards' results, the errors it raised, the bytes it moved); the
checks run here, in the parent, against numpy float64 / exact integers
(``benchmarks/scan_oracle.py``, ``benchmarks/reduce_oracle.py``) on the whole tensor, which every
rank and the parent build from the same seeds. Every rank runs its cases twice: the two runs must
agree bit for bit, and a reduction over the sharded axis must give the same bits on every rank.
"""
from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import tritonml  # noqa: F401  (first: chooses interpreted Triton before triton is imported)
import triton
import triton.language as tl  # noqa: F401  (a @triton.jit function must see triton.language)

from benchmarks.reduce_oracle import (FUNCTIONS, assert_matches, bits, expected_tensor, make_input,
                                      supported)
from benchmarks.scan_oracle import accumulation_allowance, scan_matches, scan_reference, to_numpy
from tests.timing import limit

ROOT = Path(__file__).resolve().parents[2]
WORLD = 3
# seconds for a process group: a hang fails the test instead of hanging it (tests/timing.py)
SPAWN_TIMEOUT = limit(240)
GROUP_TIMEOUT = limit(60)  # the process group's own timeout on a collective
SPAWN_TRIES = 3  # a port taken by another process between _free_port and the ranks' bind

# Shard lengths along the sharded axis: uneven, with an empty shard (in the middle and last).
LENGTH_PATTERNS = ([3, 0, 4], [2, 3, 1], [4, 1, 0])
SCAN_DTYPES = (torch.float32, torch.float64, torch.float16, torch.int32, torch.uint8, torch.int64)
DIRECTIONS = ((False, False), (False, True), (True, False), (True, True))


# ---------------------------------------------------------------------------------------------
# Spawning
# ---------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank_env(rank: int, world: int, port: int) -> dict:
    return dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                WORLD_SIZE=str(world), LOCAL_RANK=str(rank), OMP_NUM_THREADS="1",
                PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


def _spawn(scenario: str, world: int, outdir: Path) -> list:
    """Run ``scenario`` on ``world`` ranks; returns each rank's pickled results. A free port can be
    taken by another process (another xdist worker's ranks) before rank 0 binds it: then, and only
    then, the ranks run again on another port."""
    for attempt in range(SPAWN_TRIES):
        if _spawn_once(scenario, world, outdir, _free_port(), attempt == SPAWN_TRIES - 1):
            break
    return [pickle.loads((outdir / f"{scenario}-{r}.pkl").read_bytes()) for r in range(world)]


def _port_taken(log: str) -> bool:
    return "EADDRINUSE" in log or "ddress already in use" in log


def _spawn_once(scenario: str, world: int, outdir: Path, port: int, last: bool) -> bool:
    """The ranks of ``scenario`` on ``port``: True when they all succeeded, False when they failed
    because the port was taken (unless ``last``); fails the test otherwise."""
    code = f"from tests.distributed import test_distributed as t; t._worker({scenario!r}, {str(outdir)!r})"
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=_rank_env(r, world, port),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(world)]
    deadline, logs = time.monotonic() + SPAWN_TIMEOUT, []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail(f"{scenario}: the ranks did not finish in {SPAWN_TIMEOUT} s (a hang)")
        logs.append(out)
    failed = [(r, p.returncode, logs[r][-4000:]) for r, p in enumerate(procs) if p.returncode]
    if failed and not last and any(_port_taken(log) for log in logs):
        return False
    assert not failed, f"{scenario}: ranks failed:\n" + "\n".join(
        f"--- rank {r} (exit {rc}) ---\n{log}" for r, rc, log in failed)
    return True


_OUTDIR = None  # the spawning test's folder, in a rank: where the ranks leave each other signs


def _worker(scenario: str, outdir: str) -> None:
    import datetime
    import torch.distributed as dist
    global _OUTDIR
    _OUTDIR = outdir
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=GROUP_TIMEOUT))
    rank, world = dist.get_rank(), dist.get_world_size()
    results = SCENARIOS[scenario](rank, world)
    Path(outdir, f"{scenario}-{rank}.pkl").write_bytes(pickle.dumps(results))
    if results.pop("_keep_group", True):
        dist.barrier()
        dist.destroy_process_group()
    else:  # the group saw a rank time out: leave it as it is
        os._exit(0)


def _shard(t: torch.Tensor, axis: int, lengths, position: int) -> torch.Tensor:
    start = sum(lengths[:position])
    return t.narrow(axis, start, lengths[position]).clone()


def _twice(fn, again: bool = True):
    """Run ``fn`` twice (once when not ``again``: the interpreter is slow, so every third case
    is rerun); returns (first result, whether the runs agree bit for bit)."""
    first = fn()
    return first, (not again) or _bits(first) == _bits(fn())


def _bits(t):
    if isinstance(t, (tuple, list)):
        return tuple(_bits(u) for u in t)
    return bits(t)


# ---------------------------------------------------------------------------------------------
# Cases (built identically by the ranks and the parent)
# ---------------------------------------------------------------------------------------------
def _scan_values(shape, dtype, op, seed) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    if dtype.is_floating_point:
        if op == "sum":
            a = rng.uniform(-2, 2, size=shape)
        else:
            a = rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1, 1], size=shape)
        return torch.from_numpy(a).to(dtype)
    info = torch.iinfo(dtype)
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    return torch.from_numpy(rng.integers(info.min, info.max, size=shape, dtype=np_dtype,
                                         endpoint=True))


def scan_cases():
    """(name, op, x (whole), axis, lengths, reverse, exclusive, initial or None): every dtype
    with both ops, the four directions spread over them, with and without an initial."""
    cases, seed = [], 0
    for d, dtype in enumerate(SCAN_DTYPES):
        for o, op in enumerate(("sum", "prod")):
            for k in range(2):
                seed += 1
                reverse, exclusive = DIRECTIONS[(2 * (d + o) + k) % len(DIRECTIONS)]
                lengths = LENGTH_PATTERNS[(d + o + k) % len(LENGTH_PATTERNS)]
                shape, axis = ((2, sum(lengths), 3), 1) if (seed % 3) else ((sum(lengths),), 0)
                x = _scan_values(shape, dtype, op, seed)
                initial = None
                if (d + k) % 2:
                    init_shape = shape[:axis] + shape[axis + 1:]
                    initial = _scan_values(init_shape or (1,), dtype, op, 1000 + seed)
                    initial = initial.reshape(init_shape)
                cases.append((f"{op}-{dtype}-{lengths}-rev{reverse}-ex{exclusive}"
                              f"-init{initial is not None}", op, x, axis, lengths, reverse,
                              exclusive, initial))
    return cases


def reduce_cases():
    """(name, function, x (whole), sharded axis, lengths, axes, keepdims): every function over
    the sharded axis alone, with another axis, over every axis, and over another axis only (a
    local reduction), in float32; then in a half type and in integers (where defined)."""
    cases, seed = [], 100
    for f, function in enumerate(FUNCTIONS):
        plan = [(torch.float32, (1,)), (torch.float32, (1, 2)), (torch.float32, None),
                (torch.float32, (2,)), (torch.float16 if f % 2 else torch.bfloat16, (1,)),
                (torch.float64 if f % 2 else torch.int32, (0, 1)),
                (torch.uint8 if f % 2 else torch.int64, (1,))]
        for dtype, axes in plan:
            if not supported(function, dtype):
                continue
            seed += 1
            lengths = LENGTH_PATTERNS[seed % len(LENGTH_PATTERNS)]
            x = make_input((2, sum(lengths), 3), dtype, function, seed)
            cases.append((f"{function}-{dtype}-{lengths}-{axes}", function, x, 1, lengths,
                          axes, bool(seed % 2)))
    # NaN: the first NaN over the whole tensor wins ARGMAX/ARGMIN, and MAX/MIN/sums propagate it
    for function in ("ARGMAX", "ARGMIN", "MAX", "MIN", "SUM", "LOG_SUM_EXP"):
        x = make_input((2, 7, 3), torch.float32, function, 7)
        x[0, 5, 1] = float("nan")
        x[1, 1, 2] = float("nan")
        x[1, 6, 0] = float("nan")
        for axes in ((1,), None):
            cases.append((f"nan-{function}-{axes}", function, x, 1, [3, 0, 4], axes, True))
    return cases


DTENSOR_SHAPES = ((2, 7, 3), (2, 4, 3))  # torch's chunks over 3 ranks: 3,3,1 and 2,2,0
PLACEMENTS = {"Shard(1)": "S1", "Shard(0)": "S0", "Shard(2)": "S2", "Replicate()": "R"}


def _placements(d) -> str:
    """A DTensor's placements as "S<dim>"/"R" (independent of torch's repr)."""
    return ",".join(f"S{p.dim}" if p.is_shard() else "R" for p in d.placements)


# ---------------------------------------------------------------------------------------------
# Scenarios (run inside the ranks)
# ---------------------------------------------------------------------------------------------
def _scenario_main(rank: int, world: int) -> dict:
    import tritonml.distributed as td
    out = {"scans": {}, "reduces": {}}
    began = time.monotonic()
    for k, (name, op, x, axis, lengths, reverse, exclusive, initial) in enumerate(scan_cases()):
        shard = _shard(x, axis, lengths, rank)
        fn = td.cumulative_sum if op == "sum" else td.cumulative_product
        out["scans"][name] = _twice(lambda: fn(shard, axis, reverse=reverse, exclusive=exclusive,
                                                initial=initial), k % 3 == 0)
    out["seconds"] = {"scans": time.monotonic() - began}
    for k, (name, function, x, sax, lengths, axes, keepdims) in enumerate(reduce_cases()):
        shard = _shard(x, sax, lengths, rank)
        out["reduces"][name] = _twice(lambda: td.reduce(shard, function, axes, sharded_axis=sax,
                                                        keepdims=keepdims), k % 3 == 0)
    out["seconds"]["reduces"] = time.monotonic() - began
    out["out_variant"] = _out_variant(td, rank)
    out["dtensor"] = _dtensor_cases(td, rank, world)
    out["bytes"] = _bytes(td, rank)
    out["seconds"]["dtensor+bytes"] = time.monotonic() - began
    out["errors"] = _errors(td, rank, world)
    out["seconds"]["errors"] = time.monotonic() - began
    out["_keep_group"] = False  # the last error case leaves a collective unanswered
    return out


def _out_variant(td, rank):
    x = torch.arange(1, 22, dtype=torch.float64).reshape(3, 7)
    lengths = [3, 0, 4]
    shard = _shard(x, 1, lengths, rank)
    scan_out = torch.full_like(shard, -1.0)
    returned = td.cumulative_sum(shard, 1, out=scan_out)
    reduce_out = torch.empty(3, dtype=torch.int32)
    td.reduce(shard, "argmin", 1, sharded_axis=1, keepdims=False, index_dtype=torch.int32,
              out=reduce_out)
    return {"scan": scan_out, "scan_returned_out": returned is scan_out, "argmin": reduce_out}


def _dtensor_cases(td, rank, world):
    from torch.distributed.tensor import Replicate, Shard, distribute_tensor, init_device_mesh
    mesh = init_device_mesh("cpu", (world,))
    results = {}
    for shape in DTENSOR_SHAPES:
        x = _scan_values(shape, torch.float64, "sum", sum(shape))
        for label, placement in PLACEMENTS.items():
            d = distribute_tensor(x, mesh, [eval(label, {"Shard": Shard, "Replicate": Replicate})])
            key = f"{shape}-{label}"
            scanned = td.cumulative_sum(d, 1, reverse=True)
            results[f"scan-{key}"] = (scanned.full_tensor(), _placements(scanned),
                                      tuple(scanned.to_local().shape), tuple(d.to_local().shape))
            for function, keepdims in (("SUM", True), ("ARGMAX", False), ("LOG_SUM_EXP", False)):
                reduced = td.reduce(d, function, 1, keepdims=keepdims)
                results[f"reduce-{function}-{key}"] = (reduced.full_tensor(),
                                                       _placements(reduced),
                                                       bits(reduced.to_local()))
    return results


def _bytes(td, rank):
    from tritonml.bench.memtrace import trace_memory
    lengths = [64, 40, 24]
    x = _scan_values((4, sum(lengths)), torch.float32, "sum", 5)
    shard = _shard(x, 1, lengths, rank)
    out = torch.empty_like(shard)
    td.cumulative_sum(shard, 1, out=out)  # warm: the first call of a shape compiles and caches
    with trace_memory(regions={"input": shard, "output": out}) as scan_trace:
        td.cumulative_sum(shard, 1, out=out)
    td.reduce(shard, "SUM", 1, sharded_axis=1)
    with trace_memory(regions={"input": shard}) as reduce_trace:
        td.reduce(shard, "SUM", 1, sharded_axis=1)
    return {"shard_bytes": shard.numel() * shard.element_size(),
            "state_bytes": 4 * 4,  # one float32 state per scan row (4 rows)
            "scan_input": scan_trace.by_region("input"), "scan_output": scan_trace.by_region("output"),
            "scan_total": scan_trace.total_bytes,
            "reduce_input": reduce_trace.by_region("input"),
            "reduce_total": reduce_trace.total_bytes}


def _caught(fn):
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - the test compares what every rank raised
        return (type(error).__name__, str(error))
    return None


def _errors(td, rank, world):
    import datetime
    import torch.distributed as dist
    x = torch.ones(2, 3, 4)
    errors = {}
    errors["dtype"] = _caught(lambda: td.cumulative_sum(x.double() if rank == 1 else x, 1))
    errors["shape"] = _caught(lambda: td.reduce(torch.ones(2, 3, 5) if rank == 2 else x, "SUM", 1,
                                                sharded_axis=1))
    errors["axis_one_rank"] = _caught(lambda: td.cumulative_product(x, 5 if rank == 0 else 1))
    errors["axis_all"] = _caught(lambda: td.cumulative_sum(x, -4))
    errors["sharded_axis"] = _caught(lambda: td.reduce(x, "SUM", 1, sharded_axis=3))
    errors["function_differs"] = _caught(lambda: td.reduce(x, "MAX" if rank else "MIN", 1,
                                                           sharded_axis=1))
    errors["function_unknown"] = _caught(lambda: td.reduce(x, "sume" if rank == 1 else "SUM", 1,
                                                           sharded_axis=1))
    errors["float_only"] = _caught(lambda: td.reduce(x.int(), "L2", 1, sharded_axis=1))
    errors["argmax_empty"] = _caught(lambda: td.reduce(torch.ones(2, 0, 4), "ARGMAX", 1,
                                                       sharded_axis=1))
    errors["initial_shape"] = _caught(lambda: td.cumulative_sum(
        x, 1, initial=torch.zeros(2, 5) if rank == 2 else torch.zeros(2, 4)))
    errors["requires_grad"] = _caught(lambda: td.reduce(x.requires_grad_(rank == 1), "SUM", 1,
                                                        sharded_axis=1))
    x = x.detach().requires_grad_(False)
    errors["not_a_tensor"] = _caught(lambda: td.cumulative_sum([1, 2] if rank == 0 else x, 1))
    first_two = dist.new_group([0, 1])  # every rank creates it; rank 2 is not a member
    errors["group"] = _caught(lambda: td.cumulative_sum(x, 1, group=first_two))
    # still usable after all those errors
    errors["after"] = td.cumulative_sum(x, 1)
    # a rank that never arrives: the others' metadata exchange times out instead of hanging
    timed_out = Path(_OUTDIR, "absent-timed-out")
    if rank == 0:
        errors["absent"] = _caught(lambda: td.cumulative_sum(x, 1, timeout=datetime.timedelta(
            seconds=2)))
        timed_out.touch()
    else:
        # Stay until rank 0 has timed out: it must time out, not see these ranks exit. (A fixed
        # sleep a second longer than its timeout raced with a rank 0 that came late to the call.)
        deadline = time.monotonic() + limit(120)
        while not timed_out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        errors["absent"] = None
    return errors


# associative_scan: a first-order linear recurrence h = a * h + b, a combine that does not commute
@triton.jit
def _affine(earlier, later):
    return earlier[0] * later[0], earlier[1] * later[0] + later[1]


def _recurrence(a: np.ndarray, b: np.ndarray, reverse: bool, exclusive: bool, initial=None):
    """Sequential oracle along axis 1: the composition of the affine maps in traversal order."""
    n = a.shape[1]
    order = range(n - 1, -1, -1) if reverse else range(n)
    out_a, out_b = np.empty_like(a), np.empty_like(b)
    acc_a = np.ones(a.shape[0]) if initial is None else initial[0].copy()
    acc_b = np.zeros(a.shape[0]) if initial is None else initial[1].copy()
    for i in order:
        if exclusive:
            out_a[:, i], out_b[:, i] = acc_a, acc_b
        acc_a, acc_b = acc_a * a[:, i], acc_b * a[:, i] + b[:, i]
        if not exclusive:
            out_a[:, i], out_b[:, i] = acc_a, acc_b
    return out_a, out_b


def associative_cases():
    rng = np.random.default_rng(3)
    a = torch.from_numpy(rng.uniform(0.5, 1.5, size=(2, 6)))
    b = torch.from_numpy(rng.uniform(-1, 1, size=(2, 6)))
    initial = (torch.tensor([1.5, 0.5], dtype=torch.float64),
               torch.tensor([0.25, -2.0], dtype=torch.float64))
    return [(reverse, exclusive, init, a, b, [4, 2] if not reverse else [1, 5])
            for reverse, exclusive in DIRECTIONS for init in (None, initial)]


def _scenario_associative(rank: int, world: int) -> dict:
    import tritonml.distributed as td
    results = []
    for reverse, exclusive, initial, a, b, lengths in associative_cases():
        xs = (_shard(a, 1, lengths, rank), _shard(b, 1, lengths, rank))
        results.append(td.associative_scan(_affine, xs, 1, reverse=reverse, exclusive=exclusive,
                                           identity=(1.0, 0.0), initial=initial))
    return {"results": results}


# ---------------------------------------------------------------------------------------------
# DTensors through tritonml's own functions and ops (not tritonml.distributed's)
# ---------------------------------------------------------------------------------------------
OPS_SHAPE = (2, 7, 3)
OPS_PLACEMENTS = ("R", "S0", "S1", "S2", "P")  # P: Partial, rank 0 holds x, the others zeros


def dtensor_op_cases():
    """(name, placement, call, oracle): ``call(tritonml, d, x_plain)`` runs in the ranks on the
    DTensor ``d`` of x; ``oracle(x_np)`` is numpy on the whole tensor, in the parent."""
    f64 = lambda a: a.astype(np.float64)  # noqa: E731
    cases = []
    for placement in OPS_PLACEMENTS:
        cases += [
            (f"cumsum-1-{placement}", placement,
             lambda tm, d, x: tm.cumulative_sum(d, 1), lambda a: np.cumsum(a, 1)),
            (f"cumsum-0-{placement}", placement,
             lambda tm, d, x: tm.cumulative_sum(d, 0), lambda a: np.cumsum(a, 0)),
            (f"cumprod-1-rev-{placement}", placement,
             lambda tm, d, x: tm.cumulative_product(d, 1, reverse=True),
             lambda a: np.flip(np.cumprod(np.flip(a, 1), 1), 1)),
            (f"reduce-sum-1-{placement}", placement,
             lambda tm, d, x: tm.reduce(d, "SUM", 1), lambda a: a.sum(1, keepdims=True)),
            (f"op-cumsum-1-{placement}", placement,
             lambda tm, d, x: torch.ops.tritonml.cumulative_sum(d, 1), lambda a: np.cumsum(a, 1)),
            (f"op-reduce-max-02-{placement}", placement,
             lambda tm, d, x: torch.ops.tritonml.reduce(d, "MAX", [0, 2], False, torch.int64),
             lambda a: a.max((0, 2))),
        ]
    for function in FUNCTIONS:  # every function along the sharded dim and along the others
        for axes in ((1,), (0, 2)):
            cases.append((f"reduce-{function}-{axes}-S1", "S1",
                          lambda tm, d, x, fn=function, ax=axes: tm.reduce(d, fn, ax),
                          lambda a, fn=function, ax=axes: expected_tensor(
                              torch.from_numpy(a), fn, ax, True).numpy()))
    init = np.linspace(-1, 1, 6).reshape(2, 3)
    cases += [
        ("cumsum-initial-exclusive-S1", "S1",
         lambda tm, d, x: tm.cumulative_sum(d, 1, exclusive=True,
                                            initial=torch.from_numpy(init.copy())),
         lambda a: np.cumsum(a, 1) - a + init[:, None, :]),
        ("op-cumsum-out-S1", "S1", _op_out, lambda a: np.cumsum(a, 1)),
        ("op-cumprod-inplace-S0", "S0", _op_in_place, lambda a: np.cumprod(a, 1)),
        ("op-reduce-out-argmin-S1", "S1", _op_reduce_out,
         lambda a: a.argmin(1).astype(np.int64)),
        ("op-linear-recurrence-S1", "S1",
         lambda tm, d, x: torch.ops.tritonml.linear_recurrence(d * 0.5, d, 1),
         lambda a: _recurrence_np(a * 0.5, a, 1)),
        ("linear-recurrence-S0", "S0",
         lambda tm, d, x: tm.linear_recurrence(d * 0.5, d, 1, reverse=True),
         lambda a: np.flip(_recurrence_np(np.flip(a, 1) * 0.5, np.flip(a, 1), 1), 1)),
        ("associative-scan-S1", "S1",
         lambda tm, d, x: tm.associative_scan(_affine, (d * 0.5, d), 1, identity=(1.0, 0.0))[1],
         lambda a: _recurrence_np(a * 0.5, a, 1)),
        ("reduce-with-welford-02-S1", "S1",
         lambda tm, d, x: tm.reduce_with(tm.reductions.welford, d, (0, 2))[1],
         lambda a: a.mean((0, 2), keepdims=True)),
        # infinities of either sign (docs/semantics.md, "Moments"): NaN variance, torch.mean's mean
        ("reduce-with-welford-nonfinite-var-02-S1", "S1",
         lambda tm, d, x: tm.reduce_with(tm.reductions.welford, _with_infinities(d), (0, 2))[0],
         lambda a: _nonfinite_np(a, lambda b: b.var((0, 2), ddof=1, keepdims=True))),
        ("reduce-with-welford-nonfinite-mean-02-S1", "S1",
         lambda tm, d, x: tm.reduce_with(tm.reductions.welford, _with_infinities(d), (0, 2))[1],
         lambda a: _nonfinite_np(a, lambda b: b.mean((0, 2), keepdims=True))),
        ("routed-cumsum-S1", "S1", lambda tm, d, x: _routed(tm, torch.cumsum, d, 1),
         lambda a: np.cumsum(a, 1)),
        ("routed-sum-S1", "S1", lambda tm, d, x: _routed(tm, torch.sum, d, 1),
         lambda a: a.sum(1)),
        ("routed-sum-02-S1", "S1", lambda tm, d, x: _routed(tm, torch.sum, d, (0, 2)),
         lambda a: a.sum((0, 2))),
    ]
    return cases


# where a torch op's own DTensor rule gives another placement than tritonml's, which shows the
# call went through tritonml: torch all-gathers a scan along a sharded dim (Replicate) and leaves
# a sum over one Partial; tritonml keeps the scan sharded and replicates the fold
OPS_PLACEMENT_EXPECTED = {"routed-cumsum-S1": "S1", "routed-sum-S1": "R", "op-cumsum-1-S1": "S1",
                          "cumsum-1-S1": "S1", "reduce-sum-1-S1": "R", "cumsum-0-S1": "S1",
                          "routed-sum-02-S1": "S0", "cumsum-1-P": "R", "cumsum-1-S0": "S0"}


def _with_infinities(t):
    """t (a DTensor or a tensor) with its elements of magnitude >= 1.3 turned into +-inf."""
    return t / (t.abs() < 1.3).to(t.dtype)


def _nonfinite_np(a, moment):
    """numpy's ``moment`` of ``_with_infinities(a)`` (inf - inf inside it is no warning)."""
    with np.errstate(all="ignore"):
        return moment(a / (np.abs(a) < 1.3).astype(a.dtype))


def _recurrence_np(gates, tokens, axis):
    h, out = np.zeros(gates.shape[:axis] + gates.shape[axis + 1:]), np.empty_like(tokens)
    for t in range(gates.shape[axis]):
        h = gates.take(t, axis) * h + tokens.take(t, axis)
        out[(slice(None),) * axis + (t,)] = h
    return out


def _routed(tm, fn, d, dim):
    with tm.use_tritonml(devices=("cpu",)):
        return fn(d, dim)


def _op_out(tm, d, x):
    out = torch.zeros_like(d)
    torch.ops.tritonml.cumulative_sum_out(d, 1, False, False, out)
    return out


def _op_in_place(tm, d, x):
    d = d.clone()
    torch.ops.tritonml.cumulative_product_(d, 1)
    return d


def _op_reduce_out(tm, d, x):
    from torch.distributed.tensor import Replicate, Shard
    out = torch.distributed.tensor.zeros((2, 3), dtype=torch.int64, device_mesh=d.device_mesh,
                                         placements=[Replicate()])
    torch.ops.tritonml.reduce_out(d, "ARGMIN", [1], False, torch.int64, out)
    wrong = torch.distributed.tensor.zeros((2, 3), dtype=torch.int64, device_mesh=d.device_mesh,
                                           placements=[Shard(0)])
    refused = _caught(lambda: torch.ops.tritonml.reduce_out(d, "ARGMIN", [1], False,
                                                            torch.int64, wrong))
    assert refused[0] == "ValueError" and refused[1].startswith("out:"), refused
    return out


def _ops_input(placement, mesh, rank):
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    x = _scan_values(OPS_SHAPE, torch.float64, "prod", 77)
    if placement == "P":
        local = x.clone() if rank == 0 else torch.zeros_like(x)
        return x, DTensor.from_local(local, mesh, [Partial()], run_check=False)
    placed = Replicate() if placement == "R" else Shard(int(placement[1]))
    return x, distribute_tensor(x, mesh, [placed])


def _scenario_dtensor_ops(rank: int, world: int) -> dict:
    import tritonml as tm
    from torch.distributed.tensor import init_device_mesh
    mesh = init_device_mesh("cpu", (world,))
    results = {}
    for name, placement, call, _ in dtensor_op_cases():
        x, d = _ops_input(placement, mesh, rank)
        try:
            got = call(tm, d, x)
            results[name] = (got.full_tensor(), _placements(got))
        except Exception as error:  # noqa: BLE001 - the parent reports it
            results[name] = (type(error).__name__, str(error)[:300])
    x, d = _ops_input("S1", mesh, rank)
    results["reduce_with_sharded"] = _caught(lambda: tm.reduce_with(tm.reductions.welford, d, 1))
    return results


SCENARIOS = {"main": _scenario_main, "associative": _scenario_associative,
             "dtensor_ops": _scenario_dtensor_ops}


# ---------------------------------------------------------------------------------------------
# Checks (in the parent)
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def main_run(tmp_path_factory):
    return _spawn("main", WORLD, tmp_path_factory.mktemp("dist-main"))


def test_scans_match_the_oracle_on_the_whole_tensor(main_run):
    print("rank 0 seconds (cumulative):", main_run[0]["seconds"])
    for name, op, x, axis, lengths, reverse, exclusive, initial in scan_cases():
        ranks = [main_run[r]["scans"][name] for r in range(WORLD)]
        assert all(repeat for _, repeat in ranks), f"{name}: a rerun gave other bits"
        whole = torch.cat([result for result, _ in ranks], axis)
        x_np = to_numpy(x)
        init_np = None if initial is None else to_numpy(initial)
        allowance = accumulation_allowance(x_np, axis, op, reverse, exclusive, x.dtype, init_np)
        if x.dtype.is_floating_point:
            # The carries travel in x's dtype (the ``initial=`` contract): each rank's total and
            # its folded carry round once each to x's dtype, at most 2 * WORLD roundings of a
            # partial result, each within eps(dtype) of the running sum of |x| (sums) or of the
            # result (products); docs/distributed.md, "Accuracy".
            if op == "sum":
                abs_init = None if init_np is None else np.abs(init_np.astype(np.float64))
                scale = scan_reference(np.abs(x_np.astype(np.float64)), axis, "sum", reverse,
                                       exclusive, initial=abs_init)
            else:
                scale = np.abs(scan_reference(x_np, axis, "prod", reverse, exclusive,
                                              initial=init_np))
            allowance = allowance + 2 * WORLD * torch.finfo(x.dtype).eps * scale
        ok, message = scan_matches(whole, x_np, axis, op, reverse, exclusive, allowance,
                                   initial=init_np)
        assert ok, f"{name}: {message}"


def test_reductions_match_the_oracle_and_agree_bitwise_across_ranks(main_run):
    for name, function, x, sax, lengths, axes, keepdims in reduce_cases():
        ranks = [main_run[r]["reduces"][name] for r in range(WORLD)]
        assert all(repeat for _, repeat in ranks), f"{name}: a rerun gave other bits"
        results = [result for result, _ in ranks]
        expected = expected_tensor(x, function, axes, keepdims)
        reduced = (1,) if axes is None else axes
        if axes is None or sax in axes:
            assert len({bits(r) for r in results}) == 1, f"{name}: ranks disagree"
            got = results[0]
        else:  # the sharded axis is kept: each rank holds its part of the result
            kept = sax - sum(1 for a in reduced if a < sax and not keepdims)
            got = torch.cat(results, kept)
        assert_matches(got, expected, name)


def test_out_variants(main_run):
    x = torch.arange(1, 22, dtype=torch.float64).reshape(3, 7)
    scans = [main_run[r]["out_variant"] for r in range(WORLD)]
    assert all(s["scan_returned_out"] for s in scans)
    assert torch.equal(torch.cat([s["scan"] for s in scans], 1), torch.from_numpy(
        np.cumsum(x.numpy(), 1)))
    for s in scans:
        assert s["argmin"].dtype == torch.int32 and s["argmin"].tolist() == [0, 0, 0]


def test_dtensor_placements_in_and_out(main_run):
    for shape in DTENSOR_SHAPES:
        x = _scan_values(shape, torch.float64, "sum", sum(shape))
        x_np = x.numpy()
        chunks = [len(c) for c in torch.arange(shape[1]).chunk(WORLD)] + [0] * WORLD
        for label, placement in PLACEMENTS.items():
            key = f"{shape}-{label}"
            full, placements, local_shape, in_shape = main_run[0]["dtensor"][f"scan-{key}"]
            assert placements == placement, key  # the placement is kept
            want = np.flip(np.cumsum(np.flip(x_np, 1), 1), 1)
            np.testing.assert_allclose(full.numpy(), want, rtol=1e-14, atol=1e-14, err_msg=key)
            for r in range(WORLD):  # every rank keeps its own (uneven) local shape
                _, _, local_shape, in_shape = main_run[r]["dtensor"][f"scan-{key}"]
                assert local_shape == in_shape
                if placement == "S1":
                    assert local_shape[1] == chunks[r]
            for function, keepdims in (("SUM", True), ("ARGMAX", False), ("LOG_SUM_EXP", False)):
                results = [main_run[r]["dtensor"][f"reduce-{function}-{key}"] for r in range(WORLD)]
                full, placements, _ = results[0]
                assert_matches(full, expected_tensor(x, function, 1, keepdims), key + function)
                if placement == "S1":  # the folded dim comes back replicated
                    assert placements == "R", (key, function)
                    assert len({local for _, _, local in results}) == 1
                elif placement == "S2" and not keepdims:
                    assert placements == "S1", (key, function)  # renumbered
                else:
                    assert placements == placement, (key, function)


def test_bytes_per_rank(main_run):
    for r in range(WORLD):
        moved = main_run[r]["bytes"]
        shard, state = moved["shard_bytes"], moved["state_bytes"]
        # scan: the reduce reads the shard once, the scan reads it once and writes it once
        assert moved["scan_input"]["load"] == 2 * shard, (r, moved)
        assert moved["scan_output"]["store"] == shard and moved["scan_output"]["load"] == 0
        # all the rest is the metadata record (a few hundred bytes per rank) and states (the
        # totals, their exchange and fold: a few copies of WORLD states), whatever the shard size
        side = 2048 * WORLD + 32 * WORLD * state
        assert moved["scan_total"] <= 3 * shard + side, (r, moved)
        assert moved["reduce_input"]["load"] == shard, (r, moved)
        assert moved["reduce_total"] <= shard + side, (r, moved)


def test_bad_input_raises_the_same_error_on_every_rank(main_run):
    errors = [main_run[r]["errors"] for r in range(WORLD)]
    expected = {  # case -> (error type, text the message must hold)
        "dtype": ("ValueError", "x: the shard dtype must be the same on every rank"),
        "shape": ("ValueError", "x: the shard shape outside the sharded axis"),
        "axis_one_rank": ("ValueError", "rank 0 of the group: axis: 5 is out of range"),
        "axis_all": ("ValueError", "axis: -4 is out of range"),
        "sharded_axis": ("ValueError", "sharded_axis: 3 is out of range"),
        "function_differs": ("ValueError", "function: function must be the same on every rank"),
        "function_unknown": ("ValueError", "rank 1 of the group: function: 'sume'"),
        "float_only": ("TypeError", "function"),
        "argmax_empty": ("ValueError", "axes:"),
        "initial_shape": ("ValueError", "rank 2 of the group: initial: shape (2, 5)"),
        "requires_grad": ("NotImplementedError", "rank 1 of the group: x: tritonml.distributed "
                          "is not differentiable"),
        "not_a_tensor": ("TypeError", "rank 0 of the group: x: expected a torch.Tensor"),
    }
    for case, (kind, text) in expected.items():
        raised = [e[case] for e in errors]
        assert raised[0] is not None, case
        assert all(e == raised[0] for e in raised), (case, raised)  # the same error everywhere
        assert raised[0][0] == kind and text in raised[0][1], (case, raised[0])
    # the non-member raises; the members run the scan between themselves
    assert errors[2]["group"][0] == "ValueError" and "group: " in errors[2]["group"][1]
    assert errors[0]["group"] is None and errors[1]["group"] is None
    for r, e in enumerate(errors):  # each rank holds 3 ones of the axis, in rank order
        assert torch.equal(e["after"], torch.ones(2, 3, 4).cumsum(1) + 3 * r), r
    assert errors[0]["absent"][0] == "RuntimeError" and "did not complete" in errors[0]["absent"][1]


def test_associative_scan_across_ranks(tmp_path):
    """Needs tritonml.associative_scan (the single-device user-combine scan)."""
    runs = _spawn("associative", 2, tmp_path)
    for k, (reverse, exclusive, initial, a, b, lengths) in enumerate(associative_cases()):
        got = [torch.cat([runs[r]["results"][k][i] for r in range(2)], 1) for i in range(2)]
        init = None if initial is None else (initial[0].numpy(), initial[1].numpy())
        want = _recurrence(a.numpy(), b.numpy(), reverse, exclusive, init)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w, rtol=1e-12, atol=1e-12,
                                       err_msg=f"reverse={reverse} exclusive={exclusive}")


def test_example_script_runs_under_torchrun(tmp_path):
    script = ROOT / "docs" / "examples" / "distributed_scan.py"
    port = _free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nnodes=1",
                           "--nproc-per-node=2", "--master-addr=127.0.0.1",
                           f"--master-port={port}", str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=SPAWN_TIMEOUT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("match the single-process result") == 2, done.stdout


def test_dtensors_through_tritonml_functions_ops_and_routing(tmp_path):
    """tritonml.cumulative_sum / reduce / ..., torch.ops.tritonml.* and routed torch calls on
    DTensors: along a sharded dim through tritonml.distributed's protocol, along others locally;
    Replicate, Shard(0/1/2) and Partial inputs; against numpy on the whole tensor."""
    runs = _spawn("dtensor_ops", WORLD, tmp_path)
    x = _scan_values(OPS_SHAPE, torch.float64, "prod", 77).numpy()
    for name, placement, _, oracle in dtensor_op_cases():
        got, placements = runs[0][name]
        assert isinstance(got, torch.Tensor), f"{name}: {got}: {placements}"
        for r in range(1, WORLD):  # every rank sees the same whole result
            assert bits(runs[r][name][0]) == bits(got), (name, r)
        np.testing.assert_allclose(got.numpy(), oracle(x), rtol=1e-12, atol=1e-12, err_msg=name)
        if name in OPS_PLACEMENT_EXPECTED:
            assert placements == OPS_PLACEMENT_EXPECTED[name], (name, placements)
    for r in range(WORLD):
        kind, message = runs[r]["reduce_with_sharded"]
        assert kind == "NotImplementedError" and "axes: dims [1]" in message, message
