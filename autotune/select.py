"""Choosing a launch config for one scan or reduction: the glue between tritonml and the engine.

``choose_scan``/``choose_reduce`` answer, in this order (docs/tuning.md, "How a config is chosen"):

1. no target and not a CUDA device (Triton's interpreter): the heuristics' config, exactly
   (``heuristics.py``; source ``"default"``); nothing is timed, read or stored;
2. a timed winner in the persistent cache for the key (``"cached"``);
3. the shipped table of the GPU (``shipped.py``: the active target, else the CUDA device's name)
   (``"table"``);
4. with ``make_runner`` given and timing on (``engine.timing_enabled``): every candidate timed once
   with ``do_bench``, the fastest stored (``"timed"``);
5. the cost model's choice (``cost.py``; ``"modeled"``).

The key (``engine.make_key``): op, function, the heuristics' regime, dtype, log2 buckets of the
scanned/reduced length, the inner length and the outer length, the layout class (the scanned or
reduced positions contiguous or strided), the device name, and the triton, torch and tritonml
versions with ``SELECT_VERSION``. Answers are remembered in this process per exact problem.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from importlib import metadata

import torch

from tritonml_autotune.configs import ReduceConfig, ScanConfig

from . import candidates, cost, devices, engine, heuristics, shipped
from .cache import cache_dir
from .devices import Device
from .problem import Problem

# Bump when the candidates, the cost model or the kernels change what a stored choice means.
SELECT_VERSION = 3
TABLE = "table"   # Choice.source of a shipped-table entry
HALF_DTYPES = (torch.float16, torch.bfloat16)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


def accumulator_bytes(dtype: torch.dtype) -> int:
    """Half types accumulate in float32, everything else in 64 bits (tritonml/core/dtypes.py)."""
    return 4 if dtype in HALF_DTYPES else 8


# ---------------------------------------------------------------------------------------------
# The GPU a choice is for
# ---------------------------------------------------------------------------------------------
def cuda_gpu(device: torch.device) -> Device:
    """The facts of a CUDA device, whatever the target. A CUDA device that cannot be queried (fake
    CUDA tensors while torch traces on a machine without one) gets an H100's facts."""
    index = torch.device(device).index
    try:
        return _cuda_facts(torch.cuda.current_device() if index is None else index)
    except (AssertionError, RuntimeError):  # torch without CUDA, or no driver
        return devices.H100


@functools.lru_cache(maxsize=None)
def _cuda_facts(index: int) -> Device:
    """The shipped facts when the device's name contains a known GPU's ("NVIDIA H100 80GB HBM3"),
    else facts read from the device, with an H100's bandwidths and launch overhead."""
    name = torch.cuda.get_device_name(index)
    for known, facts in devices.DEVICES.items():
        if known in name.upper():
            return facts
    props = torch.cuda.get_device_properties(index)
    return Device(name=name, arch=10 * props.major + props.minor, sms=props.multi_processor_count,
                  registers_per_sm=getattr(props, "regs_per_multiprocessor", 65536),
                  shared_memory_per_sm=getattr(props, "shared_memory_per_multiprocessor", 0),
                  max_threads_per_sm=getattr(props, "max_threads_per_multi_processor", 2048),
                  copy_bandwidth_bytes_per_s=devices.H100.copy_bandwidth_bytes_per_s,
                  launch_overhead_s=devices.H100.launch_overhead_s,
                  l2_bytes=getattr(props, "L2_cache_size", devices.H100.l2_bytes),
                  l2_bandwidth_bytes_per_s=devices.H100.l2_bandwidth_bytes_per_s)


def gpu_of(device: torch.device | None) -> Device | None:
    """The GPU configs are chosen for: the active target, else the CUDA device's facts, else None
    (the interpreter)."""
    target = devices.active()
    if target is not None:
        return target
    if device is None or torch.device(device).type != "cuda":
        return None
    return cuda_gpu(device)


# ---------------------------------------------------------------------------------------------
# Plans: everything a choice needs, built from a layout
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    problem: Problem
    gpu: Device | None           # None: the interpreter, which takes the heuristics' config
    heuristic: dict
    candidates: tuple            # configs as dicts; the heuristics' first
    config_type: type            # ScanConfig or ReduceConfig

    @property
    def key(self) -> dict:
        return _key(self.problem, self.heuristic["regime"], self.gpu.name)

    def config(self, fields: dict):
        return self.config_type(**fields)


@functools.lru_cache(maxsize=None)
def version() -> str:
    """The version a key and a table entry carry: tritonml's and ``SELECT_VERSION``."""
    try:
        tritonml_version = metadata.version("tritonml")
    except metadata.PackageNotFoundError:
        tritonml_version = "unknown"
    return f"tritonml {tritonml_version}, select {SELECT_VERSION}"


def _key(problem: Problem, regime: str, device_name: str) -> dict:
    return engine.make_key(
        version=version(), op=problem.op, function=problem.function, regime=regime,
        dtype=problem.dtype, axis=engine.log2_bucket(problem.axis_len),
        inner=engine.log2_bucket(problem.inner_len), outer=engine.log2_bucket(problem.outer_len),
        layout="contiguous" if problem.contiguous else "strided", device=device_name)


# ScanConfig fields only the chunked regime reads: other regimes' dicts leave them out (their
# defaults), so their candidates and table entries stay as they were.
CHUNKED_FIELDS = ("chunk_tiles", "window")


def fields(config) -> dict:
    """A ScanConfig's or ReduceConfig's fields as the candidates' dicts hold them: all, but
    ``CHUNKED_FIELDS`` only for "chunked"."""
    return {name: getattr(config, name) for name in config.__dataclass_fields__
            if name not in CHUNKED_FIELDS or config.regime == "chunked"}


def plan_scan(layout, dtype: torch.dtype, device: torch.device | None, combine: str,
              element_bytes: tuple | None = None) -> Plan:
    if not isinstance(combine, str) or not combine:
        raise TypeError(f"combine: expected a combine's name such as 'sum', got {combine!r}")
    value, acc = element_bytes if element_bytes else (dtype.itemsize, accumulator_bytes(dtype))
    problem = Problem("scan", combine, _dtype_name(dtype), value, acc, value,
                      max(layout.axis_len, 1), max(layout.inner_len, 1), layout.outer_len,
                      layout.axis_is_contiguous)
    gpu = gpu_of(device)
    if gpu is None:
        heuristic = heuristics.scan_config(layout, "cpu", None, acc)
        return Plan(problem, None, fields(heuristic), (), ScanConfig)
    with devices.targeting(gpu):
        heuristic = fields(heuristics.scan_config(layout, "cuda", None, acc, value))
    return Plan(problem, gpu, heuristic,
                tuple(candidates.scan_candidates(problem, heuristic, gpu)), ScanConfig)


def plan_reduce(layout, dtype: torch.dtype, device: torch.device | None, function: str, *,
                partial_bytes: int, out_bytes: int, state_values: int = 1) -> Plan:
    """``partial_bytes``: one partial state's bytes; ``out_bytes``: one output element's;
    ``state_values``: the state's components (the register class). All come from the
    reduction's record (``tritonml.Reduction.state_bytes`` / ``out_bytes`` / ``state_values``,
    the DirectML functions' in tritonml/records/builtin_reductions.py): the tuner knows no reduce function
    itself."""
    problem = Problem("reduce", function, _dtype_name(dtype), dtype.itemsize,
                      partial_bytes, out_bytes, max(layout.red_len, 1),
                      max(layout.inner_len, 1), layout.outer_len, layout.reduction_is_contiguous,
                      state_values)
    gpu = gpu_of(device)
    if gpu is None:
        heuristic = heuristics.reduce_config(layout, "cpu")
        return Plan(problem, None, fields(heuristic), (), ReduceConfig)
    with devices.targeting(gpu):
        heuristic = fields(heuristics.reduce_config(layout, "cuda"))
    return Plan(problem, gpu, heuristic,
                tuple(candidates.reduce_candidates(problem, heuristic, gpu.sms)), ReduceConfig)


# ---------------------------------------------------------------------------------------------
# Deciding
# ---------------------------------------------------------------------------------------------
def modeled(plan: Plan) -> engine.Choice:
    """The cost model's choice among the plan's candidates (its lowest cost; ties: earlier)."""
    costs = cost.costs(plan.problem, list(plan.candidates), plan.gpu)
    best = min(range(len(costs)), key=costs.__getitem__)
    return engine.Choice(plan.config(plan.candidates[best]), engine.MODELED)


def decide(plan: Plan, make_runner=None, *, use_table: bool = True, cache=None) -> engine.Choice:
    """Resolve ``plan`` in the order of the module docstring; ``use_table=False`` skips the
    shipped table (``tritonml tune`` times what the table would answer)."""
    if plan.gpu is None:
        return engine.Choice(plan.config(plan.heuristic), engine.DEFAULT)
    key, options = plan.key, list(plan.candidates)
    found = engine.lookup(key, options, cache=cache)
    if found is not None:
        return engine.Choice(plan.config(found.config), found.source, found.seconds)
    if use_table:
        entry = shipped.lookup(plan.gpu.name, key)
        if entry is not None and entry["config"] in options:
            return engine.Choice(plan.config(entry["config"]), TABLE, entry.get("seconds"))
    benchmark = None
    if make_runner is not None:
        benchmark = engine.bench_with(lambda fields: make_runner(plan.config(fields)))
    costs = dict(zip(map(id, options), cost.costs(plan.problem, options, plan.gpu)))
    choice = engine.tune(key, options, cost_model=lambda c: costs[id(c)], benchmark=benchmark,
                         cache=cache)
    return engine.Choice(plan.config(choice.config), choice.source, choice.seconds)


# Answers per exact problem, so a launcher's repeated calls cost one dict lookup. Timed and cached
# answers never change; table and modeled ones are remembered per "could it time" as well.
_memo: dict = {}
_memo_lock = threading.Lock()


def forget() -> None:
    """Drop the remembered answers (after the cache or tables changed under this process)."""
    with _memo_lock:
        _memo.clear()


def _can_time(gpu: Device, device, make_runner) -> bool:
    """Timing measures the GPU the tensors are on: not the interpreter, nor for another target."""
    return (make_runner is not None and engine.timing_enabled() and device is not None
            and torch.device(device).type == "cuda" and cuda_gpu(device) == gpu)


def _memoized(memo_key: tuple, build_plan, make_runner) -> engine.Choice:
    with _memo_lock:
        choice = _memo.get(memo_key)
    if choice is None:
        choice = decide(build_plan(), make_runner)
        with _memo_lock:
            _memo[memo_key] = choice
    return choice


def choose_scan(layout, dtype: torch.dtype, device: torch.device | None, combine: str, *,
                make_runner=None, element_bytes: tuple | None = None) -> engine.Choice:
    """The config for a scan (``combine`` "sum" or "product") of ``dtype`` over ``layout`` (an
    ``AxisLayout``) on ``device``; ``Choice.config`` is a ``ScanConfig``. ``make_runner(config)``
    returns a no-argument callable launching this scan with ``config`` on scratch buffers; give it
    only where timing is possible (a CUDA device). ``element_bytes``: ``(bytes read per element,
    accumulator bytes per element)`` of a tuple-state scan (``tritonml.associative_scan``: the
    sums over its components), instead of those of ``dtype``."""
    gpu = gpu_of(device)
    if gpu is None:
        acc = element_bytes[1] if element_bytes else accumulator_bytes(dtype)
        return engine.Choice(heuristics.scan_config(layout, "cpu", None, acc), engine.DEFAULT)
    timing = _can_time(gpu, device, make_runner)
    # The memo key holds everything the answer depends on, so a hit builds no plan.
    memo_key = ("scan", combine, dtype, element_bytes, layout.axis_len, layout.inner_len,
                layout.outer_len, layout.axis_is_contiguous, gpu, timing, cache_dir())
    return _memoized(memo_key, lambda: plan_scan(layout, dtype, device, combine, element_bytes),
                     make_runner if timing else None)


def choose_reduce(layout, dtype: torch.dtype, device: torch.device | None, function: str, *,
                  partial_bytes: int, out_bytes: int, state_values: int = 1,
                  make_runner=None) -> engine.Choice:
    """The config for a reduction (``function`` a ReduceFunction name: "SUM", "ARGMAX", ...) of
    ``dtype`` over ``layout`` (a ``ReduceLayout``) on ``device``; ``Choice.config`` is a
    ``ReduceConfig``. ``make_runner`` as for ``choose_scan``; ``partial_bytes``, ``out_bytes``
    and ``state_values`` as for ``plan_reduce``."""
    gpu = gpu_of(device)
    if gpu is None:
        return engine.Choice(heuristics.reduce_config(layout, "cpu"), engine.DEFAULT)
    timing = _can_time(gpu, device, make_runner)
    memo_key = ("reduce", function, dtype, layout.red_len, layout.inner_len, layout.outer_len,
                layout.reduction_is_contiguous, gpu, timing, cache_dir(), partial_bytes, out_bytes,
                state_values)
    return _memoized(memo_key, lambda: plan_reduce(layout, dtype, device, function,
                                                   partial_bytes=partial_bytes,
                                                   out_bytes=out_bytes,
                                                   state_values=state_values),
                     make_runner if timing else None)
