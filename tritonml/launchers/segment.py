"""The segment launchers: scans and reductions restarted at segment boundaries along one axis
(``tritonml.segment_reduce``, ``tritonml.segment_scan``, ``tritonml.associative_scan(...,
offsets=)``), on the one segment kernel (tritonml/kernels/segment.py).

Segments: ``offsets`` is a 1-D integer tensor of n + 1 non-decreasing boundaries on x's device,
offsets[0] == 0 and offsets[-1] == x.shape[axis] (``segment_offsets`` makes and checks it, int64
and contiguous, from ``offsets`` or ``lengths``); segment i is x.narrow(axis, offsets[i],
offsets[i+1] - offsets[i]).

- ``segment_reduce_axis``: result i along ``axis`` is the reduction of segment i; shape x.shape
  with the axis n long (``keepdims``: n x 1). ``initial`` (SUM, MULTIPLY, MAX, MIN, AVERAGE; a
  Python number) starts every segment's fold, as torch.segment_reduce's does (AVERAGE divides by
  the segment's length only). Empty segments: ``initial`` if given, else the function's result
  over nothing, ``finish(identity, count=0)``: SUM 0, MULTIPLY 1, MAX -inf (integers: the type's
  minimum), MIN +inf (maximum), AVERAGE NaN, L1 and L2 and SUM_SQUARE 0, LOG_SUM and LOG_SUM_EXP
  -inf. ARGMAX/ARGMIN: the index is the position along ``axis`` in x (offsets[i] + the position in
  the segment; ties and NaN as ``tritonml.reduce``), int64; an empty segment's index is
  x.shape[axis] (one past the end, as torch_scatter's ``segment_csr``).
- ``segment_scan_axis``: each segment scanned on its own; same shape and dtype as x.
- ``segment_associative_scan``: ``tritonml.associative_scan`` with the same restarts.

Value checks of ``offsets`` read its values (on a GPU, a sync): ``check_values=False`` skips
them, as under torch.compile; the kernel then trusts the boundaries. The launchers check the
boundaries' metadata as ``segment_offsets`` does (not their values) and read them as int64.

``segment_reduce_axis`` and ``segment_scan_axis`` take the plan path of the other launchers
(``tritonml.runtime.plan``): checks, layout, config and the kernel's arguments are derived once
per call metadata and remembered. Each check runs once per call: the public functions
(tritonml/torch_ops/segment.py) check their arguments before torch's dispatcher and call the
launcher, directly or through the torch op (which passes its arguments through), inside
``prechecked(x, offsets)`` (tritonml/launchers/scan_checks.py); a launch of exactly those tensors
then skips the checks the public function ran (x, axis, flags, offsets, the reduction's dtype
check, ``initial``). Any other call (a vmap rule's tensors, a direct ``torch.ops`` or launcher
call) checks everything.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from tritonml_autotune import devices
from tritonml_autotune.configs import SegmentConfig
from tritonml_autotune.segments import segment_config

from ..core import checks as _checks, layout as _layout
from ..core.dtypes import ACC_TORCH_DTYPE, TL_DTYPE, TORCH_DTYPE
from ..kernels import combine as _combine
from ..kernels.segment import segment_kernel
from ..records.builtin_reductions import RECORDS, ReduceRecord, record_of
from ..runtime import (plan as _plan, relaunch as _relaunch, resident as _resident,
                       steps as _steps, trace as _trace)
from ..records import state_combine as _state_combine
from . import scan_checks as _scan_checks
from .index_bounds import facts_by_torch
from .reduce_with import check_reduction_functions, run_reduction
from ..records.reduction import Reduction
from ..records.scan_combine import ScanCombine

# Where ptxas's own register choice spills, the kernel compiles at a register cap that does not
# (a config's ``maxnreg``, where it sets one, stands): tritonml_autotune.registers.
_relaunch.guard_spills(segment_kernel)



def initial_takers() -> str:
    """The reduce functions whose fold ``initial`` may start (their records' ``takes_initial``:
    torch.segment_reduce's five), for messages."""
    return ", ".join(r.name for r in RECORDS.values() if r.takes_initial)


def segment_offsets(axis_len: int, device, *, offsets=None, lengths=None,
                    check_values: bool = True) -> torch.Tensor:
    """The int64 contiguous boundaries (n + 1 entries) from exactly one of ``offsets`` (a 1-D
    integer tensor: n + 1 non-decreasing boundaries from 0 to ``axis_len``) and
    ``lengths`` (a 1-D integer tensor: n non-negative lengths summing to ``axis_len``), on
    ``device``. Raises TypeError/ValueError naming the parameter and the rule.
    ``check_values=False`` skips the checks that read the values (under torch.compile and export,
    where they cannot be read)."""
    if (offsets is None) == (lengths is None):
        raise ValueError("offsets, lengths: pass exactly one of them (offsets: n + 1 boundaries; "
                         "lengths: n segment lengths)")
    name, given = ("offsets", offsets) if offsets is not None else ("lengths", lengths)
    _check_boundary_tensor(name, given, torch.device(device))
    if check_values:
        _check_values(given if name == "offsets" else None,
                      given if name == "lengths" else None, axis_len)
    values = given.to(torch.int64)
    if name == "lengths":
        values = torch.cat([values.new_zeros(1), torch.cumsum(values, 0)])
    return values.contiguous()


def _check_boundary_tensor(name: str, t, device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a 1-D integer torch.Tensor, got {type(t).__name__}; "
                        f"wrap it with torch.tensor(..., device=x.device)")
    if t.dim() != 1:
        raise ValueError(f"{name}: expected a 1-D tensor, got shape {tuple(t.shape)}")
    if t.dtype == torch.bool or t.dtype.is_floating_point or t.dtype.is_complex:
        raise TypeError(f"{name}: expected an integer dtype (int32 or int64), got {t.dtype}")
    if t.device != device:
        raise ValueError(f"{name}: tensor is on {t.device} but x is on {device}; "
                         f"{name} must be on x's device")
    if name == "offsets" and t.numel() == 0:
        raise ValueError("offsets: is empty; n segments need n + 1 boundaries (offsets[0] == 0, "
                         "offsets[-1] == x.shape[axis]), so at least one")


def _check_values(offsets, lengths, axis_len: int) -> None:
    """The checks that read the boundaries: one device sync, more only to name a bad entry."""
    if lengths is not None:
        if lengths.numel() == 0:
            total, negative = 0, False
        else:
            total, negative = torch.stack([lengths.sum(), (lengths < 0).any()]).tolist()
        if negative:
            i = int((lengths < 0).nonzero()[0])
            raise ValueError(f"lengths: must be non-negative, but lengths[{i}] = "
                             f"{int(lengths[i])}")
        if total != axis_len:
            raise ValueError(f"lengths: sum to {total}, but x.shape[axis] is {axis_len}; the "
                             "segments must cover the axis exactly")
        return
    first, last, decreasing = torch.stack([offsets[0], offsets[-1],
                                           (offsets[1:] < offsets[:-1]).any()]).tolist()
    if first != 0:
        raise ValueError(f"offsets: must start at 0, but offsets[0] = {first}")
    if decreasing:
        i = int((offsets[1:] < offsets[:-1]).nonzero()[0])
        raise ValueError(f"offsets: must be non-decreasing, but offsets[{i}] = "
                         f"{int(offsets[i])} > offsets[{i + 1}] = {int(offsets[i + 1])}")
    if last != axis_len:
        raise ValueError(f"offsets: the last boundary offsets[-1] = {last} must equal "
                         f"x.shape[axis] = {axis_len}")


def _boundaries(offsets: torch.Tensor) -> torch.Tensor:
    """The int64 contiguous boundaries the kernel reads (``offsets`` itself when it is). Int32
    ones are widened rather than read as they are: on Triton 3.6 the 1-D reductions reading
    int32 boundaries compiled for sm_90 at 255 registers with 16 to 24 bytes of spills."""
    return offsets.to(torch.int64).contiguous()


def _inputs(xs, name: str = "x") -> tuple:
    xs = (xs,) if isinstance(xs, torch.Tensor) else xs
    if not isinstance(xs, (tuple, list)) or not xs:
        raise TypeError(f"{name}: expected a tensor or a tuple of tensors, got "
                        f"{type(xs).__name__}")
    xs = tuple(xs)
    for i, t in enumerate(xs):
        _checks.check_tensor(name if len(xs) == 1 else f"{name}[{i}]", t)
        if t.shape != xs[0].shape or t.device != xs[0].device:
            raise ValueError(f"{name}[{i}]: shape {tuple(t.shape)} on {t.device} does not match "
                             f"{name}[0]'s {tuple(xs[0].shape)} on {xs[0].device}")
    if xs[0].dim() == 0:
        raise ValueError(f"{name}: is 0-d; a segmented op needs an axis to segment")
    return xs


# ---------------------------------------------------------------------------------------------
# layout and launch
# ---------------------------------------------------------------------------------------------
def _layout_args(shape, axis: int, x_strides: tuple, out_strides: tuple) -> tuple:
    """The kernel's layout arguments for inputs and outputs of strides ``x_strides`` /
    ``out_strides`` (one tuple per tensor) that share every dim but ``axis`` (outs' axis runs over
    segments in a reduction): outer dims x axis x inner, the other dims merged where every tensor
    allows."""
    strides = x_strides + out_strides
    others = [d for d in range(len(shape)) if d != axis]
    dims = _layout.merge_dims([(shape[d], tuple(st[d] for st in strides)) for d in others])
    inner_len, inner_columns = dims[-1] if dims else (1, (0,) * len(strides))
    outer = dims[:-1]
    outer_sizes = _layout._pad((d[0] for d in outer), _layout.MAX_OUTER_DIMS, 1)

    def outer_strides(c):
        return _layout._pad((d[1][c] for d in outer), _layout.MAX_OUTER_DIMS, 0)
    k = len(x_strides)
    return (shape[axis], inner_len, outer_sizes,
            tuple(st[axis] for st in x_strides), inner_columns[:k],
            tuple(outer_strides(c) for c in range(k)),
            tuple(st[axis] for st in out_strides), inner_columns[k:],
            tuple(outer_strides(k + c) for c in range(len(out_strides))))


def _segment_work(shape: tuple, out_shape: tuple, axis: int, x_strides: tuple,
                  out_strides: tuple, n_segments: int, device, *, prepare, merge, finish,
                  load_dtypes: tuple, state_dtypes: tuple, identity: tuple, scan: bool,
                  exclusive: bool = False, reverse: bool = False, initial=None, empty=None,
                  empty_index: bool = False, commutative: bool = True, along=None,
                  config: Optional[SegmentConfig] = None,
                  segment_ids: bool = False) -> _steps.Work:
    """The launch of the segment kernel over inputs of ``shape`` and ``x_strides`` (one per
    input) into outputs of ``out_shape`` and ``out_strides`` (``state_dtypes``: torch dtypes, one
    per state component; ``load_dtypes``: one per input). ``commutative``: ``merge`` may fold a
    segment's elements in any fixed order (the reductions, whose merges the reduce kernels fold in
    a tree, and the sum and product scans), not only in traversal order (a user's combine);
    ``along(state, merge)`` then folds a tile's rows (a reduction's own, as the reduce kernels
    use it; ``merge_along`` where None). ``initial`` starts every segment's fold and is an empty
    segment's result; ``empty`` (instead) is an empty segment's result alone.
    ``segment_ids``: the ``offsets`` slot holds a sorted index (one segment per axis position)
    and the ``facts`` slot takes each program's report of it (``FACTS`` int64 per program).

    Tensor slots (``Work.run(x=xs, out=outs, offsets=offsets)``): ``x`` and ``out``, one per
    input and output, ``offsets``; the workspaces ``status`` (the look-back's status words) and
    ``tail`` (one per state component)."""
    args = _layout_args(shape, axis, x_strides, out_strides)
    axis_len, inner_len, outer_sizes = args[:3]
    outer_len = math.prod(outer_sizes)
    if config is None:
        state_bytes = sum(d.itemsize for d in state_dtypes)
        config = segment_config(axis_len, inner_len, outer_len, state_bytes, device.type,
                                device, scan=scan, slices=not segment_ids)
    block_axis, block_inner = config.block_axis, config.block_inner
    chains = outer_len * -(-inner_len // block_inner)
    tiles = max(1, -(-axis_len // block_axis))
    programs = chains * -(-tiles // config.chunk_tiles)
    inner_strides = (*args[4], *args[7])
    shapes = (shape,) * len(x_strides) + (out_shape,) * len(out_strides)
    reaches = [_layout.last_offset(t_shape, strides)
               + block_axis * config.fold_tiles * abs(strides[axis])
               + block_inner * abs(inner_stride)
               for t_shape, strides, inner_stride
               in zip(shapes, x_strides + out_strides, inner_strides)]
    index_64 = _layout.needs_index_64(*reaches, axis_len + block_axis * config.fold_tiles,
                                      n_segments + config.boundary_block + 1,
                                      programs * block_inner)
    seg_combine, seg_scan = _state_combine.segmented_adapters(merge, len(state_dtypes))
    meta = dict(PREPARE=prepare, MERGE=merge,
                ALONG=along if along is not None else _combine.merge_along,
                SEG_COMBINE=seg_combine, SEG_SCAN=seg_scan,
                FINISH=finish, LOAD_DTYPE=tuple(TL_DTYPE[d] for d in load_dtypes),
                IDENTITY=tuple(identity), STATE_DTYPE=tuple(TL_DTYPE[d] for d in state_dtypes),
                SCAN=scan, EXCLUSIVE=exclusive, REVERSE=reverse,
                HAS_INITIAL=initial is not None or empty is not None,
                FOLD_INITIAL=initial is not None, EMPTY_INDEX=empty_index, INDEX_64=index_64,
                BLOCK_AXIS=block_axis, BOUNDARY_BLOCK=config.boundary_block,
                BLOCK_INNER=block_inner, WINDOW=config.window, FOLD_TILES=config.fold_tiles,
                COMMUTATIVE=commutative,
                PTR_TUPLES=len(x_strides) > 1 or len(out_strides) > 1 or len(state_dtypes) > 1,
                SUB_TILES=1 if scan else config.sub_tiles, SEGMENT_IDS=segment_ids,
                num_warps=config.num_warps)
    if config.maxnreg is not None:
        meta["maxnreg"] = config.maxnreg
    x, out = _steps.slots("x", len(x_strides)), _steps.slots("out", len(out_strides))
    status, tail_spaces = _steps.Slot("status"), _steps.slots("tail", len(state_dtypes))
    workspaces = (_steps.Workspace(status, 2 + programs, torch.int32, resident=_resident.LOOKBACK),
                  *(_steps.Workspace(s, programs * block_inner, d)
                    for s, d in zip(tail_spaces, state_dtypes)))
    if not meta["PTR_TUPLES"]:   # one pointer each: plain tensors
        x, out, tail_spaces = x[0], out[0], tail_spaces[0]
    given = initial if initial is not None else empty
    tail = (*args, n_segments, config.chunk_tiles, given if given is not None else 0)
    # (without ids the kernel reads no facts: the offsets stand in for the pointer)
    facts = _steps.Slot("facts" if segment_ids else "offsets")
    step = _steps.step(segment_kernel, (programs,),
                       (x, out, _steps.Slot("offsets"), status, tail_spaces, facts), tail, meta)
    return _steps.Work(workspaces, (step,))


def _resolved_strides(t: torch.Tensor) -> tuple:
    """The strides ``t.resolve_neg()`` has (the kernel reads every input unnegated): a negative
    view's copy is laid out as ``torch.empty_like`` lays it out."""
    return tuple((torch.empty_like(t, device="meta") if t.is_neg() else t).stride())


def _fold_along(record: ScanCombine):
    """How a sum or product scan folds a tile's rows where it folds a chunk's tail: the fold
    of the reduction that totals it (SUM, MULTIPLY)."""
    return record_of(record.fold).along if record.fold is not None else None


def _config(config) -> Optional[SegmentConfig]:
    if config is not None:
        if not isinstance(config, SegmentConfig):
            raise TypeError(f"config: expected a SegmentConfig, got {type(config).__name__}")
        config.validate()
    return config


# ---------------------------------------------------------------------------------------------
# the three operations
# ---------------------------------------------------------------------------------------------
def _key(kind: str, record, tensors: tuple, options: tuple):
    """The plan key of a call (``tritonml.runtime.plan``), or None when some metadata cannot be
    keyed (the call is planned afresh)."""
    keys = (*(_plan.tensor_key(t) if t is not None else () for t in tensors),
            *(_plan.option_key(o) for o in options))
    if None in keys:
        return None
    return (kind, record, keys, torch.is_grad_enabled(), devices.active())


@dataclass(frozen=True)
class _SegmentPlan:
    """A validated call's canonical form (``tritonml.runtime.plan``)."""
    axis: int
    out_shape: tuple          # a reduction: each output's, the axis n long (before keepdims)
    out_dtypes: tuple
    out_strides: tuple        # a scan: its result's when not out itself (x's, as empty_like)
    spans: Optional[tuple]    # a scan's given out: (span_bytes(out), span_bytes(x))
    work: Optional[_steps.Work]   # None: nothing to launch (an empty result)


def segment_reduce_axis(xs, reduction: Reduction, offsets: torch.Tensor, axis: int, *,
                        initial=None, keepdims: bool = False,
                        config: Optional[SegmentConfig] = None, empty=None) -> tuple:
    """Segmented reduction of the tensor(s) ``xs`` (``reduction.inputs`` of them) with a
    ``Reduction`` (a built-in ``ReduceRecord`` or a user's); returns a tuple of outputs.
    ``offsets``: the boundaries, a 1-D integer tensor on x's device (their values unchecked:
    ``segment_offsets`` checks them). ``empty`` (a Python number, not with ``initial``): the
    result of an empty segment, written by the kernel as it finds the segments; the others'
    folds do not see it (torch_scatter's 0 for an empty group's max)."""
    public = _scan_checks.take_prechecked(xs, offsets)
    key = None
    tensors = (xs,) if isinstance(xs, torch.Tensor) else xs
    if config is None and isinstance(reduction, Reduction) and isinstance(tensors, (tuple, list)):
        key = _key("segment_reduce", reduction, (*tensors, offsets),
                   (axis, keepdims, initial, empty))
    plan, _ = _plan.lookup(key, lambda: _plan_reduce(xs, reduction, offsets, axis, initial,
                                                     keepdims, config, public, empty))
    xs = (xs,) if isinstance(xs, torch.Tensor) else tuple(xs)
    outs = tuple(torch.empty(plan.out_shape, dtype=d, device=xs[0].device)
                 for d in plan.out_dtypes)
    if plan.work is not None:
        run_reduction(plan.work, reduction, x=tuple(t.resolve_neg() for t in xs), out=outs,
                      offsets=_boundaries(offsets))
    if keepdims:
        outs = tuple(o.unsqueeze(plan.axis + 1) for o in outs)
    return outs


def segment_reduce_ids(xs, reduction: Reduction, ids: torch.Tensor, n_segments: int,
                       axis: int, *, initial=None, empty=None,
                       config: Optional[SegmentConfig] = None) -> tuple:
    """``segment_reduce_axis`` with the segments given by a sorted index instead of offsets:
    ``ids`` (1-D, int64 or int32, x.shape[axis] of them, at least one) holds each axis
    position's segment in [0, ``n_segments``), non-decreasing. One launch reads the index and
    reduces (kernels/segment_ids.py); the index's values are not checked before it: the
    kernel's writes stay in the outputs whatever it holds, and it reports what it read.

    Returns (outputs, facts): the outputs as ``segment_reduce_axis``'s (not keepdims), and an
    int64 tensor [programs, 3] of each program's least id, greatest id and descents (an id below
    the one before), or None where nothing was launched. The outputs are right only where the
    least is >= 0, the greatest < n_segments and there are no descents: the caller checks
    (``ids_facts``) before it uses them. In a dry run (``trace.dry_run``), where the kernel
    writes nothing, torch reads ``ids`` for the same facts."""
    key = None
    tensors = (xs,) if isinstance(xs, torch.Tensor) else xs
    if config is None and isinstance(reduction, Reduction) and isinstance(tensors, (tuple, list)):
        key = _key("segment_reduce_ids", reduction, (*tensors, ids),
                   (axis, initial, empty, n_segments))
    plan, _ = _plan.lookup(key, lambda: _plan_reduce(xs, reduction, ids, axis, initial, False,
                                                     config, False, empty, n_ids=n_segments))
    xs = (xs,) if isinstance(xs, torch.Tensor) else tuple(xs)
    outs = tuple(torch.empty(plan.out_shape, dtype=d, device=xs[0].device)
                 for d in plan.out_dtypes)
    facts = None
    if plan.work is not None:
        programs = plan.work.steps[0].launch.grid[0]
        facts = torch.empty((programs, 3), dtype=torch.int64, device=xs[0].device)
        plan.work.run(x=tuple(t.resolve_neg() for t in xs), out=outs, offsets=ids.contiguous(),
                      facts=facts)
        if _trace.dry_run():   # (the kernel wrote nothing: torch reads the ids instead)
            least, greatest, descents = facts_by_torch(ids, 0)
            facts.copy_(torch.stack([least, greatest, torch.zeros_like(descents)]))
            facts[0, 2] = descents
    return outs, facts


def ids_facts(facts: Optional[torch.Tensor]) -> Optional[tuple]:
    """(least id, greatest id, descents) over every program of ``segment_reduce_ids``'s
    ``facts`` (one read: on a GPU, a sync), or None for no launch."""
    if facts is None:
        return None
    table = facts.cpu().numpy()   # (a few bytes a program: folded on the host)
    return (int(table[:, 0].min()), int(table[:, 1].max()), int(table[:, 2].sum()))


def _check_ids(ids, n_segments, x: torch.Tensor, axis: int) -> None:
    """``segment_reduce_ids``' index and segment count (not the index's values)."""
    if not isinstance(ids, torch.Tensor):
        raise TypeError(f"ids: expected a torch.Tensor, got {type(ids).__name__}")
    if ids.dtype not in (torch.int64, torch.int32) or ids.dim() != 1:
        raise ValueError(f"ids: must be a 1-D int64 or int32 tensor, got {ids.dim()}-D "
                         f"{ids.dtype}")
    if ids.device != x.device:
        raise ValueError(f"ids: on {ids.device}, x on {x.device}")
    if ids.numel() != x.shape[axis] or ids.numel() == 0:
        raise ValueError(f"ids: must hold one segment per position of x's axis {axis} "
                         f"({x.shape[axis]}, at least one), got {ids.numel()}")
    if isinstance(n_segments, bool) or not isinstance(n_segments, int) or n_segments < 0:
        raise ValueError(f"n_segments: must be a non-negative int, got {n_segments!r}")


def _plan_reduce(xs, reduction, offsets, axis, initial, keepdims, config,
                 public: bool, empty=None, n_ids: Optional[int] = None) -> _SegmentPlan:
    """``public``: the public function has checked all but ``reduction`` and ``config``
    (``prechecked``, the module docstring). ``n_ids``: ``offsets`` is a sorted index into that
    many segments (``segment_reduce_ids``)."""
    # --- validate (nothing is launched or written before every check has passed) ---
    if not isinstance(reduction, Reduction):
        raise TypeError(f"function: expected a tritonml.Reduction, got "
                        f"{type(reduction).__name__}")
    if public:
        xs = (xs,) if isinstance(xs, torch.Tensor) else tuple(xs)
    else:
        xs = _inputs(xs)
    dtypes = tuple(t.dtype for t in xs)
    # an index function's empty segment holds the axis length (a user's Reduction: finish's)
    record = reduction if isinstance(reduction, ReduceRecord) else None
    if not public:
        if len(xs) != reduction.inputs:
            raise ValueError(f"x: {reduction.name} reduces {reduction.inputs} tensor(s), got "
                             f"{len(xs)}")
        axis = _checks.normalize_axis(axis, xs[0].dim())
        keepdims = _checks.check_bool("keepdims", keepdims)
        if n_ids is None:
            _check_boundary_tensor("offsets", offsets, xs[0].device)
        else:
            _check_ids(offsets, n_ids, xs[0], axis)
        if reduction.check is not None:
            reduction.check(dtypes)
        if initial is not None:
            if record is None or not record.takes_initial:
                raise ValueError(f"initial: defined for {initial_takers()} only (torch."
                                 f"segment_reduce's), not {reduction.name}")
            if type(initial) not in (int, float):
                raise TypeError(f"initial: expected a Python int or float, got "
                                f"{type(initial).__name__}")
    if record is None:   # a user's Reduction (the public function checks the rest)
        check_reduction_functions(reduction, dtypes)
    if empty is not None:   # (the public functions never pass it: checked whoever calls)
        if initial is not None:
            raise ValueError("empty: an empty segment's result is initial's when initial is "
                             "given; pass one of them")
        if record is None or record.returns_index:
            raise ValueError(f"empty: defined for the built-in functions with value outputs, "
                             f"not {reduction.name}")
        if type(empty) not in (int, float):
            raise TypeError(f"empty: expected a Python int or float, got "
                            f"{type(empty).__name__}")
    config = _config(config)

    # --- the outputs and the launch ---
    shape = tuple(xs[0].shape)
    n_segments = offsets.numel() - 1 if n_ids is None else n_ids
    out_shape = (*shape[:axis], n_segments, *shape[axis + 1:])
    out_dtypes = tuple(reduction.output_dtypes(dtypes))
    work = None
    if math.prod(out_shape):
        load, state, identity = reduction.kernel_state(dtypes, True)
        out_strides = tuple(torch.empty(out_shape, device="meta").stride())
        work = _segment_work(shape, out_shape, axis, tuple(_resolved_strides(t) for t in xs),
                             (out_strides,) * len(out_dtypes), n_segments,
                             xs[0].device, prepare=reduction.prepare, merge=reduction.merge,
                             finish=reduction.finish,
                             load_dtypes=tuple(TORCH_DTYPE[d] for d in load),
                             state_dtypes=tuple(TORCH_DTYPE[d] for d in state),
                             identity=identity, scan=False, initial=initial, empty=empty,
                             empty_index=record is not None and record.returns_index,
                             along=reduction.along, config=config,
                             segment_ids=n_ids is not None)
    return _SegmentPlan(axis, out_shape, out_dtypes, (), None, work)


def segment_scan_axis(x: torch.Tensor, record: ScanCombine, offsets: torch.Tensor, axis: int, *,
                      reverse: bool = False, exclusive: bool = False,
                      out: Optional[torch.Tensor] = None,
                      config: Optional[SegmentConfig] = None) -> torch.Tensor:
    """Segmented scan of ``x`` along ``axis`` with a ``ScanCombine`` record (SUM or PRODUCT);
    ``out`` (optional): x's shape and dtype, may be x itself. ``offsets`` as for
    ``segment_reduce_axis``."""
    public = _scan_checks.take_prechecked(x, offsets)
    key = None
    if config is None and isinstance(record, ScanCombine):
        key = _key("segment_scan", record, (x, offsets, out),
                   (axis, reverse, exclusive, out is x))
    plan, built = _plan.lookup(key, lambda: _plan_scan(x, record, offsets, axis, reverse,
                                                       exclusive, out, config, public))
    if out is not None and not built:
        _checks.check_out_overlap(out, x, allow_alias_of=x, spans=plan.spans)
    result = out
    if out is None or out.is_neg():
        result = torch.empty_strided(x.shape, plan.out_strides, dtype=x.dtype, device=x.device)
    if plan.work is not None:
        plan.work.run(x=x.resolve_neg(), out=result, offsets=_boundaries(offsets))
    if out is not None and result is not out:
        out.copy_(result)
        return out
    return result


def _plan_scan(x, record, offsets, axis, reverse, exclusive, out, config,
               public: bool) -> _SegmentPlan:
    """``public``: the public function has checked all but ``record``, ``out`` and ``config``
    (``prechecked``, the module docstring)."""
    # --- validate (nothing is launched or written before every check has passed) ---
    if not isinstance(record, ScanCombine):
        raise TypeError(f"function: expected a ScanCombine record, got {type(record).__name__}")
    if not public:
        (x,) = _inputs(x)
        axis = _checks.normalize_axis(axis, x.dim())
        reverse = _checks.check_bool("reverse", reverse)
        exclusive = _checks.check_bool("exclusive", exclusive)
        _check_boundary_tensor("offsets", offsets, x.device)
    spans = None
    if out is not None:
        _checks.check_out(out, x, shape=tuple(x.shape), dtype=x.dtype, allow_alias_of=x)
        spans = _checks.span_bytes(out), _checks.span_bytes(x)
    config = _config(config)

    # --- the result and the launch ---
    out_strides = tuple(torch.empty_like(x, device="meta").stride())
    work = None
    if x.numel():
        state = record.state_dtype(x.dtype)
        merge, _ = record.forms()
        result_strides = out_strides if out is None or out.is_neg() else tuple(out.stride())
        work = _segment_work(tuple(x.shape), tuple(x.shape), axis, (_resolved_strides(x),),
                             (result_strides,), offsets.numel() - 1, x.device,
                             prepare=_combine.keep_inputs, merge=merge,
                             finish=_combine.finish_value, load_dtypes=(state,),
                             state_dtypes=(state,), identity=(record.identity,), scan=True,
                             exclusive=exclusive, reverse=reverse, along=_fold_along(record),
                             config=config)
    return _SegmentPlan(axis, tuple(x.shape), (x.dtype,), out_strides, spans, work)


def segment_associative_scan(combine_fn, xs, offsets: torch.Tensor, axis: int, *,
                             reverse: bool = False, exclusive: bool = False,
                             identity=None, config: Optional[SegmentConfig] = None) -> tuple:
    """``tritonml.associative_scan`` restarted at every segment boundary (``combine_fn`` a
    ``@triton.jit`` combine of two state tuples); a tuple of outputs, each its input's shape and
    dtype. ``identity`` (one value per tensor) is needed only for ``exclusive``. Planned afresh
    each call, as the other user combines (tritonml/launchers/associative_scan.py)."""
    xs = _inputs(xs, "xs")
    k = len(xs)
    axis, reverse, exclusive, identity = _scan_checks.check_state_scan(
        combine_fn, k, axis, xs[0].dim(), reverse, exclusive, identity)
    _check_boundary_tensor("offsets", offsets, xs[0].device)
    config = _config(config)
    outs = tuple(torch.empty_like(t) for t in xs)
    if xs[0].numel():
        states = tuple(ACC_TORCH_DTYPE[t.dtype] for t in xs)
        xs = tuple(t.resolve_neg() for t in xs)
        try:
            _segment_work(tuple(xs[0].shape), tuple(xs[0].shape), axis,
                          tuple(tuple(t.stride()) for t in xs),
                          tuple(tuple(o.stride()) for o in outs), offsets.numel() - 1,
                          xs[0].device, prepare=_combine.keep_inputs, merge=combine_fn,
                          finish=_combine.finish_value, load_dtypes=states, state_dtypes=states,
                          identity=identity if identity is not None else (0,) * k, scan=True,
                          exclusive=exclusive, reverse=reverse, commutative=False,
                          config=config).run(x=xs, out=outs, offsets=_boundaries(offsets))
        except Exception as error:
            failure = _state_combine.combine_error(error, combine_fn, k)
            if failure is None:
                raise
            raise failure from None
    return outs


__all__ = ["initial_takers", "segment_offsets", "segment_reduce_axis", "segment_scan_axis",
           "segment_associative_scan"]
