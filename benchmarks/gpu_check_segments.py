"""Correctness on a real GPU, continued: the segmented ops and the kernel DSL's tuple states.

    python -m benchmarks.gpu_check --ops segment,dsl [--dtypes float32,int8,...] [--dry-run]

``check_segments`` runs ``tritonml.segment_reduce`` (every reduce function the dtype supports,
``initial`` for a few of them, empty segments, keepdims) and ``tritonml.segment_scan`` ("sum" and
"product", both directions, inclusive and exclusive) over segment lengths that take the segment
kernel down its different paths: many segments of 1 to 3 elements, a few segments spanning many
tiles and chunks, a power law, random boundaries with empty segments, one segment (alone, or
followed by an empty one), and n empty segments of an empty axis; along a 1-D x, the contiguous
axis of many rows, a strided axis, a view with a step of 2, and (through the launcher) small
forced chunks and look-back windows.
``check_dsl`` runs ``tritonml.associative_scan`` with ``@triton.jit`` combines over tuples of
tensors (the affine maps of ``tritonml.kernels.combine.compose_affine``, with and without
``offsets=``, and a running maximum with its index defined here), ``tritonml.linear_recurrence``
and ``tritonml.reduce_with(tritonml.records.ready_reductions.welford, ...)``.

Every result is compared with independent numpy in float64 or exact integers, never with
tritonml: ``benchmarks/segment_oracle.py``'s rules (empty segments, ``initial``) and the dense
references of ``benchmarks/reduce_oracle.py`` and ``benchmarks/scan_oracle.py`` applied to all
segments of one length at once, loops over blocks for the recurrences, ``np.var``/``np.mean``
for Welford, within the bounds of ``tritonml.bench.tolerances`` (Welford: its tests'). Outputs
are poisoned first (an ``out=`` where the function takes one, else every allocation filled with
one byte, a different one in each of a case's two runs: ``POISON_BYTES``), so an unwritten
element fails, and the two runs are compared bit for bit. With ``gpu`` False the same cases run on CPU tensors through the
interpreter with tiny shapes, and the grouped oracles are checked against segment_oracle's loop
over segments.

Each new specialization is a compile, and the host's oracle takes about a second per 10**7
elements, so a sweep of every dtype is kept short by rotating: each reduce function and
each scan variant runs on one layout per dtype (every distribution of lengths there), each DSL
shape in one variant (direction, exclusive, identity or initial) per dtype, another one from dtype
to dtype: over a sweep of all dtypes every scan variant meets every layout, every reduce function
four or five of them, every DSL shape every variant. A dry run of one dtype is a slice of that.
"""
from __future__ import annotations

import contextlib
import functools
import math
import traceback

import numpy as np
import torch

import tritonml  # before triton: it chooses compiled or interpreted Triton
from tritonml.core.torch_compat import TorchDispatchMode

import triton
import triton.language as tl
from tritonml_autotune.configs import ScanConfig, SegmentConfig

from tritonml import reductions
from tritonml.bench.tolerances import TOLERANCES
from tritonml.core.dtypes import FLOAT_DTYPES, SUPPORTED_DTYPES, dtype_name
from tritonml.kernels.combine import compose_affine
from tritonml.launchers import segment as segment_launchers
from tritonml.records.builtin_scans import PRODUCT, SUM
from tritonml.records.builtin_reductions import record_of

from . import reduce_oracle, scan_oracle, segment_oracle
from .gpu_check import _poison, _scan_input, _strided

# (name, shape, axis, view[, config]): the segmented axis of a 1-D x (a [1024, 1] tile on a GPU,
# the 1-D reductions' 4 warps), the contiguous axis of many rows, a strided axis (axis 0), a view
# with a step of 2 along the segmented axis, and small forced chunks and windows (through the
# launcher, which takes a config; one of them walks a reduction's tiles in slices), so segments
# cross many chunks and look-back windows. On an H100 the 1-D x is 1,366 chunks of 6 tiles of 1,024 (11 of 512 for two-component states), so a
# chunk inside a segment folds whole steps of tiles and a partial one, and a long segment spans
# 455 chunks, more than a look-back window's 256. Sizes stop there: the host's numpy oracle, not
# the GPU, sets the sweep's time (about a second per 10**7 elements reduced, three scanned).
GPU_SEGMENT_LAYOUTS = (
    ("1-D", (2 ** 23 + 5,), 0, "contiguous"),
    ("rows", (64, 2 ** 15 + 3), 1, "contiguous"),
    ("columns", (2 ** 14 + 1, 96), 0, "contiguous"),
    ("step-2 view", (16, 2 ** 16 + 3), 1, "strided"),
    ("1-D small chunks", (2 ** 21 + 5,), 0, "contiguous",
     SegmentConfig(512, 1, chunk_tiles=3, window=4, boundary_block=256, fold_tiles=2)),
    # a reduction's tiles in slices (scans take them whole), short chunks
    ("columns in slices", (2 ** 14 + 1, 40), 0, "contiguous",
     SegmentConfig(128, 32, chunk_tiles=2, window=4, boundary_block=32, num_warps=4,
                   maxnreg=255, sub_tiles=4)),
)
DRY_SEGMENT_LAYOUTS = (
    ("1-D", (300,), 0, "contiguous"),
    ("rows", (4, 157), 1, "contiguous"),
    ("columns", (123, 5), 0, "contiguous"),
    ("step-2 view", (3, 101), 1, "strided"),
    ("1-D split", (131,), 0, "contiguous",
     SegmentConfig(16, 1, chunk_tiles=2, window=2, boundary_block=4, fold_tiles=2)),
    ("columns in slices", (123, 5), 0, "contiguous",
     SegmentConfig(32, 4, chunk_tiles=2, window=2, boundary_block=4, sub_tiles=2)),
)
DISTRIBUTIONS = ("short", "long", "power law", "random", "one")
# How each distribution passes its segments, so both forms and both index dtypes are read.
BOUNDARY_FORMS = {"short": ("offsets", torch.int64), "long": ("lengths", torch.int64),
                  "power law": ("lengths", torch.int32), "random": ("offsets", torch.int32)}
EMPTY_AXIS_SEGMENTS = 5
FLOAT_INITIALS = {"SUM": 2.5, "MULTIPLY": -2.0, "MAX": 0.5, "MIN": -0.5, "AVERAGE": 4.0}
INTEGER_INITIALS = {"SUM": 5, "MULTIPLY": 3, "MAX": 2, "MIN": 2}
SCAN_VARIANTS = tuple((op, reverse, exclusive) for op in ("sum", "product")
                      for reverse in (False, True) for exclusive in (False, True))

# The DSL's scans: the scan kernels' regimes (rows, columns, a long axis; the look-back and small
# chunked windows forced with a config) and a view with a step of 2.
GPU_DSL_SCAN_SHAPES = (
    ("rows", (300, 5000), 1, "contiguous"),
    ("rows step-2 view", (300, 5000), 1, "strided"),
    ("columns", (5000, 300), 0, "contiguous"),
    ("few long rows", (2, 2 ** 20 + 3), 1, "contiguous"),
    ("lookback", (2, 2 ** 20 + 3), 1, "contiguous", ScanConfig("lookback", 512, 1, 8)),
    ("chunked small windows", (3, 2 ** 20 + 3), 1, "contiguous",
     ScanConfig("chunked", 512, 1, 8, chunk_tiles=3, window=4)),
)
DRY_DSL_SCAN_SHAPES = (
    ("rows", (4, 300), 1, "contiguous"),
    ("rows step-2 view", (4, 300), 1, "strided"),
    ("columns", (300, 4), 0, "contiguous"),
    ("3d middle", (3, 40, 5), 1, "contiguous"),
    ("chunked", (2, 300), 1, "contiguous", ScanConfig("chunked", 16, 1, chunk_tiles=2, window=2)),
)
GPU_DSL_SEGMENT_LAYOUTS = (("1-D", (2 ** 21 + 5,), 0, "contiguous"),
                           ("rows", (64, 2 ** 14 + 3), 1, "contiguous"))
DRY_DSL_SEGMENT_LAYOUTS = (("1-D", (300,), 0, "contiguous"), ("rows", (4, 157), 1, "contiguous"))
# (reverse, exclusive, identity): an inclusive scan without identity carries the kernels'
# hidden "holds elements" flag; an exclusive one needs the identity (1, 0) of the affine maps.
AFFINE_VARIANTS = ((False, False, None), (True, True, (1.0, 0.0)), (False, True, (1.0, 0.0)),
                   (True, False, None))
RECURRENCE_VARIANTS = tuple((reverse, with_initial) for reverse in (False, True)
                            for with_initial in (False, True))
GPU_WELFORD_SHAPES = (("rows", (300, 5000), (1,), "contiguous"),
                      ("columns", (5000, 300), (0,), "contiguous"),
                      ("split", (2 ** 22 + 5,), None, "contiguous"),
                      ("axes apart", (16, 64, 16, 64), (0, 2), "contiguous"),
                      ("rows step-2 view", (300, 5000), (1,), "strided"))
DRY_WELFORD_SHAPES = (("rows", (4, 300), (1,), "contiguous"),
                      ("columns", (300, 4), (0,), "contiguous"),
                      ("split", (301,), None, "contiguous"),
                      ("axes apart", (3, 8, 5, 6), (0, 2), "contiguous"),
                      ("rows step-2 view", (4, 300), (1,), "strided"))
# Welford's state is float32 for every input but float64, so its bound is looser than a reduce
# function's: the tests' bounds (tests/records/test_reduce_with.py), relative to max(|want|, a thousandth
# of the largest |want|).
WELFORD_RTOL = {torch.float64: 1e-12, torch.float32: 2e-5, torch.float16: 2e-3,
                torch.bfloat16: 1.6e-2}


# ---------------------------------------------------------------------------------------------
# A combine of this module (a @triton.jit function must live at module level in a file)
# ---------------------------------------------------------------------------------------------
@triton.jit
def running_max_with_index(earlier, later):
    """(value, index) of the running maximum. Ties keep the earlier element in traversal order
    (the first index forward, the last with reverse): the combine does not commute."""
    take_later = later[0] > earlier[0]
    return tl.where(take_later, later[0], earlier[0]), tl.where(take_later, later[1], earlier[1])


# ---------------------------------------------------------------------------------------------
# Inputs on the device
# ---------------------------------------------------------------------------------------------
def _on_device(x_cpu: torch.Tensor, device, view: str) -> torch.Tensor:
    x = x_cpu.to(device)
    return _strided(x) if view == "strided" else x


# Bytes every fresh allocation is filled with, one pattern per run of a case: 0xFF (NaN in every
# float type, -1 or the maximum in the integer ones) for the first, 0x5A (finite, and no
# DirectML identity or extreme) for the second. An element a kernel leaves unwritten holds a
# different value in each run, so the bit-for-bit comparison of the two runs catches it even
# where one pattern happens to be the right answer (an empty segment's AVERAGE is NaN).
POISON_BYTES = (0xFF, 0x5A)

_FACTORIES = frozenset({
    torch.ops.aten.empty.memory_format, torch.ops.aten.empty_strided.default,
    torch.ops.aten.empty_like.default, torch.ops.aten.new_empty.default,
    torch.ops.aten.new_empty_strided.default})


class _PoisonFactories(TorchDispatchMode):
    """Fills the storage of every tensor an uninitialized factory (torch.empty and kin) returns
    with one byte; torch.zeros and friends write their own values over it."""

    def __init__(self, byte: int):
        super().__init__()
        self.byte = byte

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if (func in _FACTORIES and result.device.type != "meta"
                and result.untyped_storage().nbytes()):
            storage = torch.empty(0, dtype=torch.uint8, device=result.device)
            storage.set_(result.untyped_storage()).fill_(self.byte)
        return result


def _poisoned_allocations(run: int):
    """Inside, every torch.empty (in the op, its launcher and its kernels' workspaces) comes
    back filled with ``POISON_BYTES[run]``: the segmented ops, linear_recurrence and
    reduce_with take no ``out=`` to poison as gpu_check does, and a case's two runs use
    different bytes (see ``POISON_BYTES``)."""
    return _PoisonFactories(POISON_BYTES[run])


def _run_case(label: str, check, failures: list, counts: dict, kind: str) -> None:
    counts[kind] = counts.get(kind, 0) + 1
    try:
        check()
    except Exception:
        failures.append(f"{label}: {traceback.format_exc(limit=4)}")
        print("FAIL", failures[-1], flush=True)


def _same_bits(first: torch.Tensor, again: torch.Tensor) -> None:
    if reduce_oracle.bits(first.cpu()) != reduce_oracle.bits(again.cpu()):
        raise AssertionError("two runs differ in their bits")


def _rotated(index: int, dtype: torch.dtype, count: int) -> int:
    """Which of ``count`` layouts (or variants) item ``index`` runs on for ``dtype``: the next
    one from dtype to dtype."""
    return (index + SUPPORTED_DTYPES.index(dtype)) % count


def _scan_close(got: torch.Tensor, want: np.ndarray, allowance, dtype) -> tuple[bool, str]:
    """``scan_oracle.scan_matches``'s rule against a reference computed here (float64, or exact
    integers): ``scan_ulps`` ulps of the rounded reference plus ``allowance``."""
    got_np = scan_oracle.to_numpy(got)
    if dtype not in FLOAT_DTYPES:
        ok = np.array_equal(got_np, want)
        return ok, "" if ok else (f"integer mismatch at {np.argwhere(got_np != want)[:5].tolist()}"
                                  f": got {got_np[got_np != want][:3]}, "
                                  f"want {want[got_np != want][:3]}")
    rounded = scan_oracle.round_to(want, dtype)
    same_special = ((np.isnan(got_np) == np.isnan(rounded)).all()
                    and (np.isinf(rounded) <= (got_np == rounded)).all())
    allowed = TOLERANCES[dtype].scan_ulps * scan_oracle.ulp(rounded, dtype) + allowance
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: left out of ``bad``
        err = np.abs(got_np - rounded)
    bad = np.isfinite(rounded) & np.isfinite(got_np) & (err > allowed)
    if same_special and not bad.any():
        return True, ""
    where = np.argwhere(bad)[:3].tolist()
    return False, (f"{dtype}: specials match={same_special}, {int(bad.sum())} values off, e.g. at "
                   f"{where}: got {got_np[bad][:3]}, want {rounded[bad][:3]}")


# ---------------------------------------------------------------------------------------------
# Segment lengths
# ---------------------------------------------------------------------------------------------
@functools.cache
def _segment_bounds(distribution: str, axis_len: int) -> np.ndarray:
    """The n + 1 boundaries (int64) of ``distribution``'s segments over ``axis_len`` positions,
    the same for every case of a layout (drawn once: millions of them on a GPU). Read only."""
    seed = len(distribution)
    rng = np.random.default_rng(seed)
    if distribution == "one":
        bounds = np.array([0, axis_len])
    elif distribution == "one + empty":
        bounds = np.array([0, axis_len, axis_len])
    elif distribution == "long":
        # three of about a third each: on a GPU each spans hundreds of chunks
        cuts = axis_len * (np.array([1, 2]) / 3 + rng.uniform(-0.05, 0.05, 2))
        bounds = np.array([0, *cuts.astype(np.int64), axis_len])
    elif distribution == "random":
        bounds = np.array(segment_oracle.random_offsets(axis_len, max(3, axis_len // 25), seed))
    else:
        if distribution == "short":
            lengths = rng.integers(1, 4, axis_len)
        else:  # power law: mostly short, a heavy tail of segments over many tiles
            lengths = 1 + np.floor(2 * rng.pareto(1.5, axis_len)).astype(np.int64)
        ends = np.cumsum(lengths)
        bounds = np.concatenate([[0], ends[ends < axis_len], [axis_len]])
    if (len(bounds) - 1) % 16 == 0:
        # Triton specializes an int argument divisible by 16 (and one equal to 1): another
        # compile of the same case
        bounds = np.append(bounds, axis_len)
    bounds = bounds.astype(np.int64)
    bounds.setflags(write=False)
    return bounds


def _boundary_kwargs(bounds: np.ndarray, distribution: str, device) -> dict:
    form, dtype = BOUNDARY_FORMS.get(distribution, ("offsets", torch.int64))
    values = np.diff(bounds) if form == "lengths" else bounds
    return {form: torch.tensor(values, dtype=dtype, device=device)}  # a copy: bounds are cached


def _segment_groups(bounds: np.ndarray):
    """The non-empty segments grouped by length: (their indices, their starts, the length) per
    length, so one numpy call reduces or scans every segment of a length (a Python loop over
    the millions of segments of a GPU case would take minutes)."""
    lengths = np.diff(bounds)
    order = np.argsort(lengths, kind="stable")
    cuts = np.flatnonzero(np.diff(lengths[order])) + 1
    for group in np.split(order, cuts):
        length = int(lengths[group[0]]) if len(group) else 0
        if length:
            yield group, bounds[group], length


def _positions(starts: np.ndarray, length: int) -> np.ndarray:
    return starts[:, None] + np.arange(length)


# ---------------------------------------------------------------------------------------------
# Segment oracles: segment_oracle's rules, every segment of one length at once
# ---------------------------------------------------------------------------------------------
def _wide_dtype(function: str, dtype: torch.dtype):
    if function in reduce_oracle.INDEX_FUNCTIONS:
        return np.int64
    if dtype in FLOAT_DTYPES:
        return np.float64
    return np.uint64 if torch.iinfo(dtype).min == 0 else np.int64


def expected_segment_reduce(x: torch.Tensor, function: str, bounds: np.ndarray, axis: int,
                            initial=None) -> torch.Tensor:
    """``segment_oracle.segment_reduce_expected``, with ``reduce_oracle.oracle`` reducing all
    segments of one length in one call: float64 or 64-bit integers, then cast once."""
    function = function.upper()
    x_last = x.movedim(axis, -1)
    wide = _wide_dtype(function, x.dtype)
    empty = initial if initial is not None else \
        segment_oracle._empty_value(x, function, axis)
    result = np.full((*x_last.shape[:-1], len(bounds) - 1), empty, dtype=wide)
    with np.errstate(all="ignore"):
        for group, starts, length in _segment_groups(bounds):
            part = x_last[..., torch.from_numpy(_positions(starts, length))]   # (..., k, length)
            last = (part.dim() - 1,)
            r = reduce_oracle.oracle(part, function, last, keepdims=False)
            if function in reduce_oracle.INDEX_FUNCTIONS:
                r = r + starts
            if initial is not None:
                total = reduce_oracle.oracle(part, "SUM", last, keepdims=False)
                r = segment_oracle._with_initial(function, r, total, wide(initial), length)
            result[..., group] = np.asarray(r).astype(wide)
    result = np.moveaxis(result, -1, axis)
    if function in reduce_oracle.INDEX_FUNCTIONS:
        return torch.from_numpy(np.ascontiguousarray(result))
    if x.dtype in FLOAT_DTYPES:
        return torch.from_numpy(np.ascontiguousarray(result)).to(x.dtype)
    return torch.from_numpy(np.ascontiguousarray(result).astype(
        torch.empty((), dtype=x.dtype).numpy().dtype))


def expected_segment_scan(x: torch.Tensor, op: str, bounds: np.ndarray, axis: int, reverse: bool,
                          exclusive: bool):
    """Each segment's ``scan_oracle.scan_reference`` (float64, or wrapped to x's integer dtype)
    and ``scan_oracle.accumulation_allowance`` (None for integers), every segment of one length
    in one call."""
    a_last = np.moveaxis(scan_oracle.to_numpy(x), axis, -1)
    floats = x.dtype in FLOAT_DTYPES
    int_dtype = None if floats else a_last.dtype
    want = np.empty(a_last.shape, dtype=np.float64 if floats else int_dtype)
    allowance = np.zeros(a_last.shape) if floats else None
    for _, starts, length in _segment_groups(bounds):
        positions = _positions(starts, length)
        part = a_last[..., positions]
        last = part.ndim - 1
        want[..., positions] = scan_oracle.scan_reference(part, last, op, reverse, exclusive,
                                                          int_dtype=int_dtype)
        if floats:
            allowance[..., positions] = scan_oracle.accumulation_allowance(
                part, last, op, reverse, exclusive, x.dtype)
    want = np.moveaxis(want, -1, axis)
    return want, None if allowance is None else np.moveaxis(allowance, -1, axis)


def _self_check_reduce(expected, x, function, bounds, axis, initial) -> None:
    """On tiny shapes: the grouped oracle equals segment_oracle's loop over segments."""
    looped = segment_oracle.segment_reduce_expected(x, function, bounds.tolist(), axis, initial)
    reduce_oracle.assert_matches(expected, looped, "grouped oracle vs segment_oracle's loop")


def _self_check_scan(want, x, op, bounds, axis, reverse, exclusive) -> None:
    looped = segment_oracle.segment_scan_reference(x, op, bounds.tolist(), axis, reverse,
                                                   exclusive)
    if not np.array_equal(want, looped, equal_nan=x.dtype in FLOAT_DTYPES):
        raise AssertionError("grouped scan oracle differs from segment_oracle's loop")


# ---------------------------------------------------------------------------------------------
# Segmented ops
# ---------------------------------------------------------------------------------------------
def _segment_reduce_call(config, initial):
    """The public function, or the launcher where a config is forced."""
    if config is None:
        return lambda x, function, boundaries, axis, keepdims: tritonml.segment_reduce(
            x, function, axis=axis, keepdims=keepdims, initial=initial, **boundaries)

    def forced(x, function, boundaries, axis, keepdims):
        offsets = segment_launchers.segment_offsets(x.shape[axis], x.device, **boundaries)
        return segment_launchers.segment_reduce_axis(x, record_of(function), offsets, axis,
                                                     initial=initial, keepdims=keepdims,
                                                     config=config)[0]
    return forced


def _segment_scan_call(config):
    if config is None:
        return lambda x, op, boundaries, axis, reverse, exclusive: tritonml.segment_scan(
            x, op, axis=axis, reverse=reverse, exclusive=exclusive, **boundaries)

    def forced(x, op, boundaries, axis, reverse, exclusive):
        offsets = segment_launchers.segment_offsets(x.shape[axis], x.device, **boundaries)
        return segment_launchers.segment_scan_axis(x, SUM if op == "sum" else PRODUCT, offsets,
                                                   axis, reverse=reverse, exclusive=exclusive,
                                                   config=config)
    return forced


def _reduce_case(x_cpu, view, device, function, bounds, distribution, axis, config, initial,
                 gpu):
    """One segmented reduction against the grouped oracle, poisoned, run twice."""
    def check():
        x = _on_device(x_cpu, device, view)
        boundaries = _boundary_kwargs(bounds, distribution, device)
        keepdims = distribution == "long"
        call = _segment_reduce_call(config, initial)
        with _poisoned_allocations(0):
            out = call(x, function, boundaries, axis, keepdims)
        with _poisoned_allocations(1):
            again = call(x, function, boundaries, axis, keepdims)
        expected = expected_segment_reduce(x_cpu, function, bounds, axis, initial)
        if not gpu:
            _self_check_reduce(expected, x_cpu, function, bounds, axis, initial)
        if keepdims:
            expected = expected.unsqueeze(axis + 1)
        reduce_oracle.assert_matches(out.cpu(), expected, function)
        _same_bits(out, again)
    return check


def _scan_case(x_cpu, view, device, op, bounds, distribution, axis, config, reverse, exclusive,
               gpu):
    def check():
        x = _on_device(x_cpu, device, view)
        boundaries = _boundary_kwargs(bounds, distribution, device)
        call = _segment_scan_call(config)
        with _poisoned_allocations(0):
            out = call(x, op, boundaries, axis, reverse, exclusive)
        with _poisoned_allocations(1):
            again = call(x, op, boundaries, axis, reverse, exclusive)
        want, allowance = expected_segment_scan(x_cpu, op, bounds, axis, reverse, exclusive)
        if not gpu:
            _self_check_scan(want, x_cpu, op, bounds, axis, reverse, exclusive)
        ok, message = _scan_close(out.cpu(), want, allowance, x_cpu.dtype)
        if not ok:
            raise AssertionError(message)
        _same_bits(out, again)
    return check


def _distributions(index: int, dtype) -> tuple:
    """DISTRIBUTIONS for item ``index``; one segment alone (n == 1, which Triton compiles apart)
    for a third of the items, else followed by an empty one."""
    if _rotated(index, dtype, 3) == 1:
        return DISTRIBUTIONS
    return tuple("one + empty" if d == "one" else d for d in DISTRIBUTIONS)


def _with_empty_axis(shape, axis):
    return tuple(0 if i == axis else s for i, s in enumerate(shape))


def _layout_parts(layout):
    name, shape, axis, view, *forced = layout
    return name, shape, axis, view, forced[0] if forced else None


def _initial_functions(dtype) -> tuple:
    """Two of segment_oracle.INITIAL_FUNCTIONS per dtype, others from dtype to dtype."""
    usable = [f for f in segment_oracle.INITIAL_FUNCTIONS if reduce_oracle.supported(f, dtype)]
    first = SUPPORTED_DTYPES.index(dtype)
    return tuple(usable[(first + i) % len(usable)] for i in range(2))


def _check_segment_reductions(dtype, device, gpu, layouts, failures, counts):
    initials = FLOAT_INITIALS if dtype in FLOAT_DTYPES else INTEGER_INITIALS
    for index, function in enumerate(reduce_oracle.FUNCTIONS):
        if not reduce_oracle.supported(function, dtype):
            continue
        layout = layouts[_rotated(index, dtype, len(layouts))]
        name, shape, axis, view, config = _layout_parts(layout)
        cases = [(d, None) for d in _distributions(index, dtype)]
        if function in _initial_functions(dtype):
            cases.append(("random", initials[function]))
        if _rotated(index, dtype, 3) == 0:   # a third of the functions: a compile each
            cases.append(("all empty", None))
        for distribution, initial in cases:
            seed = counts.get("segment", 0)
            empty = distribution == "all empty"
            x_shape = _with_empty_axis(shape, axis) if empty else shape
            bounds = np.zeros(EMPTY_AXIS_SEGMENTS + 1, dtype=np.int64) if empty else \
                _segment_bounds(distribution, shape[axis])
            x_cpu = reduce_oracle.make_input(x_shape, dtype, function, seed)
            label = (f"segment reduce {function} {name} {x_shape} axis {axis} {distribution} "
                     f"({len(bounds) - 1} segments) initial={initial} {dtype_name(dtype)}")
            _run_case(label, _reduce_case(x_cpu, view, device, function, bounds, distribution,
                                          axis, config, initial, gpu),
                      failures, counts, "segment")


def _check_segment_scans(dtype, device, gpu, layouts, failures, counts):
    for index, (op, reverse, exclusive) in enumerate(SCAN_VARIANTS):
        layout = layouts[_rotated(index, dtype, len(layouts))]
        name, shape, axis, view, config = _layout_parts(layout)
        for distribution in _distributions(index, dtype):
            seed = counts.get("segment", 0)
            bounds = _segment_bounds(distribution, shape[axis])
            x_cpu = _scan_input(shape, dtype, op, seed)
            label = (f"segment scan {op} {name} {shape} axis {axis} {distribution} "
                     f"({len(bounds) - 1} segments) reverse={reverse} exclusive={exclusive} "
                     f"{dtype_name(dtype)}")
            _run_case(label, _scan_case(x_cpu, view, device, op, bounds, distribution, axis,
                                        config, reverse, exclusive, gpu),
                      failures, counts, "segment")


def check_segments(dtype, device, gpu: bool, failures: list, counts: dict) -> None:
    """segment_reduce (every function ``dtype`` supports) and segment_scan (sum, product, both
    directions, inclusive and exclusive) over every distribution of lengths; ``counts["segment"]``
    counts the cases."""
    layouts = GPU_SEGMENT_LAYOUTS if gpu else DRY_SEGMENT_LAYOUTS
    _check_segment_reductions(dtype, device, gpu, layouts, failures, counts)
    _check_segment_scans(dtype, device, gpu, layouts, failures, counts)


# ---------------------------------------------------------------------------------------------
# DSL oracles: recurrences in float64 by blocks
# ---------------------------------------------------------------------------------------------
def _linear_recurrence64(c: np.ndarray, d: np.ndarray, h0=None) -> np.ndarray:
    """h[..., t] = c[..., t] * h[..., t - 1] + d[..., t] along the last axis in float64, h[-1] =
    ``h0`` (0 if None): a loop over the steps of blocks of about sqrt(n) (every block at once),
    then over the blocks' carries, so a million steps take a few thousand numpy calls."""
    n = c.shape[-1]
    batch = c.shape[:-1]
    block = max(16, 1 << math.ceil(math.log2(max(n, 1)) / 2))
    blocks = -(-n // block)
    pad = blocks * block - n
    c = np.concatenate([c, np.ones(batch + (pad,))], -1).reshape(batch + (blocks, block))
    d = np.concatenate([d, np.zeros(batch + (pad,))], -1).reshape(batch + (blocks, block))
    local, gain = np.empty_like(d), np.empty_like(c)
    run_local, run_gain = np.zeros(batch + (blocks,)), np.ones(batch + (blocks,))
    for j in range(block):   # each block from 0: its own h and the product of its c
        run_local = c[..., j] * run_local + d[..., j]
        run_gain = c[..., j] * run_gain
        local[..., j], gain[..., j] = run_local, run_gain
    carries = np.empty(batch + (blocks,))
    carry = np.zeros(batch) if h0 is None else np.asarray(h0, dtype=np.float64)
    for b in range(blocks):  # the h before each block
        carries[..., b] = carry
        carry = gain[..., b, -1] * carry + local[..., b, -1]
    h = local + gain * carries[..., None]
    return h.reshape(batch + (blocks * block,))[..., :n]


def _traversal(t: torch.Tensor, axis: int, reverse: bool) -> np.ndarray:
    """t in float64 with ``axis`` last, in traversal order."""
    a = np.moveaxis(scan_oracle.to_numpy(t).astype(np.float64), axis, -1)
    return a[..., ::-1] if reverse else a


def _back(a: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(a[..., ::-1] if reverse else a, -1, axis))


def _starts(axis_len: int, bounds, reverse: bool) -> np.ndarray:
    """Where a segment starts, in traversal order (the whole axis: one segment)."""
    bounds = np.array([0, axis_len]) if bounds is None else np.asarray(bounds)
    lo, hi = bounds[:-1], bounds[1:]
    firsts = (axis_len - hi if reverse else lo)[hi > lo]
    starts = np.zeros(axis_len, dtype=bool)
    starts[firsts] = True
    return starts


def _shifted(a: np.ndarray, starts: np.ndarray, identity: float) -> np.ndarray:
    """An exclusive scan from the inclusive one: each position the one before it in traversal
    order, ``identity`` where a segment starts."""
    out = np.roll(a, 1, axis=-1)
    out[..., starts] = identity
    return out


def _product_allowance(value: np.ndarray, n: int, dtype) -> np.ndarray:
    """scan_oracle's bound for products: 2 eps_acc n |value|."""
    return 2 * TOLERANCES[dtype].acc_roundoff * max(n, 2) * np.abs(value)


def _sum_allowance(magnitude: np.ndarray, n: int, dtype) -> np.ndarray:
    """scan_oracle's bound for sums, relative to the recurrence of the magnitudes (cancellation
    can make h itself tiny): 4 eps_acc log2(n) |h|-recurrence."""
    return 4 * TOLERANCES[dtype].acc_roundoff * np.log2(max(n, 2)) * magnitude


def expected_affine_scan(gates, tokens, axis, reverse, exclusive, bounds=None):
    """The running composition of the maps h -> gate * h + token in traversal order, each
    segment from its first map: ((gate products, values), (their allowances))."""
    g, b = _traversal(gates, axis, reverse), _traversal(tokens, axis, reverse)
    n = g.shape[-1]
    starts = _starts(n, bounds, reverse)
    kept = np.where(starts, 0.0, g)   # a segment's first map ignores the state before it
    gain = _linear_recurrence64(kept, np.where(starts, g, 0.0))
    value = _linear_recurrence64(kept, b)
    magnitude = _linear_recurrence64(np.abs(kept), np.abs(b))
    if exclusive:
        gain, value = _shifted(gain, starts, 1.0), _shifted(value, starts, 0.0)
        magnitude = _shifted(magnitude, starts, 0.0)
    wants = (_back(gain, axis, reverse), _back(value, axis, reverse))
    allowances = (_product_allowance(wants[0], n, gates.dtype),
                  _sum_allowance(_back(magnitude, axis, reverse), n, gates.dtype))
    return wants, allowances


def expected_linear_recurrence(gates, tokens, axis, reverse, initial=None):
    g, b = _traversal(gates, axis, reverse), _traversal(tokens, axis, reverse)
    h0 = None if initial is None else scan_oracle.to_numpy(initial).astype(np.float64)
    h = _linear_recurrence64(g, b, h0)
    magnitude = _linear_recurrence64(np.abs(g), np.abs(b), None if h0 is None else np.abs(h0))
    return (_back(h, axis, reverse),
            _sum_allowance(_back(magnitude, axis, reverse), g.shape[-1], gates.dtype))


def expected_running_max(values, axis, reverse):
    """(running maximum, index of the element that set it): a strictly larger element takes
    over, so ties keep the earlier one in traversal order."""
    v = _traversal(values, axis, reverse)
    n = v.shape[-1]
    best = np.maximum.accumulate(v, axis=-1)
    takes_over = np.ones(v.shape, dtype=bool)
    takes_over[..., 1:] = v[..., 1:] > best[..., :-1]
    where = np.maximum.accumulate(np.where(takes_over, np.arange(n), 0), axis=-1)
    if reverse:
        where = n - 1 - where
    return _back(best, axis, reverse), _back(where, axis, reverse)


def _welford_close(got: torch.Tensor, want: np.ndarray, dtype, what: str) -> None:
    got64 = got.cpu().double().numpy()
    assert got64.shape == want.shape, (what, got64.shape, want.shape)
    scale = np.maximum(np.abs(want), np.abs(want).max() * 1e-3 + 1e-300)
    err = np.abs(got64 - want) / scale
    if not np.all(err <= WELFORD_RTOL[dtype]):
        worst = np.unravel_index(np.argmax(err), err.shape)
        raise AssertionError(f"{what}: relative error {err.max():.3g} > {WELFORD_RTOL[dtype]} "
                             f"at {list(worst)}: got {got64[worst]}, want {want[worst]}")


# ---------------------------------------------------------------------------------------------
# DSL cases
# ---------------------------------------------------------------------------------------------
def _affine_inputs(shape, dtype, seed):
    """Gates in [0.9, 1) (a long memory: carries matter over tens of steps) and normal tokens."""
    g = torch.Generator().manual_seed(seed)
    gates = 0.9 + 0.1 * torch.rand(shape, generator=g, dtype=torch.float64)
    tokens = torch.randn(shape, generator=g, dtype=torch.float64)
    return gates.to(dtype), tokens.to(dtype)


def _expect_close(outs, wants, allowances, dtype, names) -> None:
    for out, want, allowance, name in zip(outs, wants, allowances, names):
        ok, message = _scan_close(out.cpu(), want, allowance, dtype)
        if not ok:
            raise AssertionError(f"{name}: {message}")


def _affine_case(gates_cpu, tokens_cpu, view, device, axis, variant, config, bounds,
                 distribution):
    reverse, exclusive, identity = variant

    def check():
        xs = (_on_device(gates_cpu, device, view), _on_device(tokens_cpu, device, view))
        options = {"reverse": reverse, "exclusive": exclusive, "identity": identity}
        if bounds is None:
            outs = tuple(_poison(tuple(gates_cpu.shape), gates_cpu.dtype, device) for _ in xs)
            tritonml.associative_scan(compose_affine, xs, axis, out=outs, config=config,
                                      **options)
            again = tritonml.associative_scan(compose_affine, xs, axis, config=config, **options)
        else:
            boundaries = _boundary_kwargs(bounds, distribution, device)
            with _poisoned_allocations(0):
                outs = tritonml.associative_scan(compose_affine, xs, axis, **boundaries,
                                                 **options)
            with _poisoned_allocations(1):
                again = tritonml.associative_scan(compose_affine, xs, axis, **boundaries,
                                                  **options)
        wants, allowances = expected_affine_scan(gates_cpu, tokens_cpu, axis, reverse, exclusive,
                                                 bounds)
        _expect_close(outs, wants, allowances, gates_cpu.dtype, ("gate product", "value"))
        for out, repeat in zip(outs, again):
            _same_bits(out, repeat)
    return check


def _running_max_case(values_cpu, view, device, axis, reverse, config):
    def check():
        values = _on_device(values_cpu, device, view)
        shape = tuple(values.shape)
        positions = torch.arange(shape[axis], device=device)
        # a broadcast view (stride 0 off the axis): an int64 component beside a float one
        index = positions.view([-1 if i == axis else 1 for i in range(len(shape))]).expand(shape)
        outs = (_poison(shape, values.dtype, device), _poison(shape, torch.int64, device))
        tritonml.associative_scan(running_max_with_index, (values, index), axis, reverse=reverse,
                                  out=outs, config=config)
        again = tritonml.associative_scan(running_max_with_index, (values, index), axis,
                                          reverse=reverse, config=config)
        best, where = expected_running_max(values_cpu, axis, reverse)
        for out, want, name in zip(outs, (best, where), ("maximum", "index")):
            got = scan_oracle.to_numpy(out)
            if not np.array_equal(got, want.astype(got.dtype)):
                bad = np.argwhere(got != want)[:3].tolist()
                raise AssertionError(f"{name} differs at {bad}: got {got[got != want][:3]}, "
                                     f"want {want[got != want][:3]}")
        for out, repeat in zip(outs, again):
            _same_bits(out, repeat)
    return check


def _recurrence_case(gates_cpu, tokens_cpu, view, device, axis, reverse, with_initial, seed):
    rest = tuple(s for i, s in enumerate(gates_cpu.shape) if i != axis)
    initial_cpu = torch.randn(rest, generator=torch.Generator().manual_seed(seed),
                              dtype=torch.float64).to(gates_cpu.dtype) if with_initial else None

    def check():
        gates = _on_device(gates_cpu, device, view)
        tokens = _on_device(tokens_cpu, device, view)
        initial = None if initial_cpu is None else initial_cpu.to(device)
        with _poisoned_allocations(0):
            h = tritonml.linear_recurrence(gates, tokens, axis, reverse=reverse, initial=initial)
        with _poisoned_allocations(1):
            again = tritonml.linear_recurrence(gates, tokens, axis, reverse=reverse,
                                               initial=initial)
        want, allowance = expected_linear_recurrence(gates_cpu, tokens_cpu, axis, reverse,
                                                     initial_cpu)
        _expect_close((h,), (want,), (allowance,), gates_cpu.dtype, ("h",))
        _same_bits(h, again)
    return check


def _welford_case(x_cpu, view, device, axes):
    def check():
        x = _on_device(x_cpu, device, view)
        with _poisoned_allocations(0):
            var, mean = tritonml.reduce_with(reductions.welford, x, axes)
        with _poisoned_allocations(1):
            again = tritonml.reduce_with(reductions.welford, x, axes)
        a = x_cpu.double().numpy()
        np_axes = tuple(range(a.ndim)) if axes is None else axes
        assert var.dtype == mean.dtype == x_cpu.dtype, (var.dtype, mean.dtype)
        _welford_close(var, np.var(a, axis=np_axes, ddof=1, keepdims=True), x_cpu.dtype, "var")
        _welford_close(mean, np.mean(a, axis=np_axes, keepdims=True), x_cpu.dtype, "mean")
        for out, repeat in zip((var, mean), again):
            _same_bits(out, repeat)
    return check


def _check_affine_scans(dtype, device, shapes, failures, counts):
    for index, layout in enumerate(shapes):
        name, shape, axis, view, config = _layout_parts(layout)
        variant = AFFINE_VARIANTS[_rotated(index, dtype, len(AFFINE_VARIANTS))]
        gates, tokens = _affine_inputs(shape, dtype, seed=counts.get("dsl", 0))
        label = (f"dsl affine scan {name} {shape} axis {axis} reverse={variant[0]} "
                 f"exclusive={variant[1]} identity={variant[2]} {dtype_name(dtype)}")
        _run_case(label, _affine_case(gates, tokens, view, device, axis, variant, config, None,
                                      None),
                  failures, counts, "dsl")


def _check_segmented_affine_scans(dtype, device, layouts, failures, counts):
    for index, layout in enumerate(layouts):
        name, shape, axis, view, _ = _layout_parts(layout)
        for d_index, distribution in enumerate(DISTRIBUTIONS):
            seed = counts.get("dsl", 0)
            variant = AFFINE_VARIANTS[_rotated(index + d_index, dtype, len(AFFINE_VARIANTS))]
            bounds = _segment_bounds(distribution, shape[axis])
            gates, tokens = _affine_inputs(shape, dtype, seed)
            label = (f"dsl segmented affine scan {name} {shape} axis {axis} {distribution} "
                     f"({len(bounds) - 1} segments) reverse={variant[0]} exclusive={variant[1]} "
                     f"identity={variant[2]} {dtype_name(dtype)}")
            _run_case(label, _affine_case(gates, tokens, view, device, axis, variant, None,
                                          bounds, distribution),
                      failures, counts, "dsl")


def _check_running_max(dtype, device, shapes, failures, counts):
    for index, layout in enumerate(shapes):
        name, shape, axis, view, config = _layout_parts(layout)
        reverse = _rotated(index, dtype, 2) == 1
        # small integers: ties everywhere, every value exact in every float dtype
        g = torch.Generator().manual_seed(counts.get("dsl", 0))
        values = torch.randint(-50, 51, shape, generator=g).to(dtype)
        label = f"dsl running max with index {name} {shape} axis {axis} reverse={reverse} " \
                f"{dtype_name(dtype)}"
        _run_case(label, _running_max_case(values, view, device, axis, reverse, config),
                  failures, counts, "dsl")


def _check_linear_recurrences(dtype, device, shapes, failures, counts):
    for index, layout in enumerate(shapes):
        name, shape, axis, view, config = _layout_parts(layout)
        if config is not None:   # linear_recurrence takes no config: the same as without
            continue
        reverse, with_initial = RECURRENCE_VARIANTS[
            _rotated(index, dtype, len(RECURRENCE_VARIANTS))]
        seed = counts.get("dsl", 0)
        gates, tokens = _affine_inputs(shape, dtype, seed)
        label = (f"dsl linear_recurrence {name} {shape} axis {axis} reverse={reverse} "
                 f"initial={with_initial} {dtype_name(dtype)}")
        _run_case(label, _recurrence_case(gates, tokens, view, device, axis, reverse,
                                          with_initial, seed),
                  failures, counts, "dsl")


def _check_welford(dtype, device, shapes, failures, counts):
    for name, shape, axes, view in shapes:
        g = torch.Generator().manual_seed(counts.get("dsl", 0))
        # a mean away from 0, as the tests': its relative error means something
        x = (3 + 2 * torch.randn(shape, generator=g, dtype=torch.float64)).to(dtype)
        label = f"dsl reduce_with welford {name} {shape} axes {axes} {view} {dtype_name(dtype)}"
        _run_case(label, _welford_case(x, view, device, axes), failures, counts, "dsl")


def check_dsl(dtype, device, gpu: bool, failures: list, counts: dict) -> None:
    """associative_scan with tuple states (affine maps, with and without segments; a running
    maximum with its index), linear_recurrence and reduce_with(welford), for float dtypes (the
    others return at once); ``counts["dsl"]`` counts the cases."""
    if dtype not in FLOAT_DTYPES:
        return
    shapes = GPU_DSL_SCAN_SHAPES if gpu else DRY_DSL_SCAN_SHAPES
    _check_affine_scans(dtype, device, shapes, failures, counts)
    _check_segmented_affine_scans(dtype, device,
                                  GPU_DSL_SEGMENT_LAYOUTS if gpu else DRY_DSL_SEGMENT_LAYOUTS,
                                  failures, counts)
    _check_running_max(dtype, device, shapes, failures, counts)
    _check_linear_recurrences(dtype, device, shapes, failures, counts)
    _check_welford(dtype, device, GPU_WELFORD_SHAPES if gpu else DRY_WELFORD_SHAPES, failures,
                   counts)
