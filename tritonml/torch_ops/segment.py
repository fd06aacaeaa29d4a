"""Segmented reductions and scans as torch ops, with fake kernels, autograd (reverse and forward
mode) and vmap rules, and the public functions ``tritonml.segment_reduce`` / ``segment_scan``:

    tritonml::segment_reduce(Tensor x, Tensor offsets, str function, int axis, bool keepdims,
                             Scalar? initial) -> Tensor
    tritonml::segment_scan(Tensor x, Tensor offsets, str function, int axis, bool reverse,
                           bool exclusive) -> Tensor

``offsets`` holds the n + 1 boundaries of the n segments of ``axis`` (docs/segments.md); the
result of ``segment_reduce`` has n entries along ``axis``: offsets.shape[0] - 1, a static size,
which is all the fake kernels need. The launchers are tritonml/launchers/segment.py.

Gradients are in x only (offsets are integers). A reduction's is its record's derivative rule
(``ReduceRecord.derivative``, the one ``tritonml.reduce`` uses), the partial derivative of a
segment's result in each of its elements, given segment totals (``_partials``): the backward
multiplies it by the gradient gathered from each element's segment, forward mode sums it times the
tangent over each segment. A scan's are its record's ``backward`` and ``jvp``
(records/builtin_scans.py) with every scan and shift in them restarted at the boundaries
(``_segments``). Both run on tritonml's own ops (the gather is one ``index_select``; the sums are
segment sums), so gradients are differentiable again.
"""
from __future__ import annotations

import contextlib
import functools
import numbers
import enum
from typing import TYPE_CHECKING, Any, NoReturn, Optional, Sequence, Tuple, Union, overload

import torch

from ..core import checks as _checks, torch_compat as _torch_compat
from ..core.dtypes import is_float
from ..records.reduce_function import ReduceFunction
from ..records.reduction import Reduction
from ..records.builtin_scans import LINEAR_RECURRENCE
from ..records.scan_combine import ScanCombine, Scans, scan_record
from ..launchers.scan_checks import prechecked
from ..launchers.segment import (initial_takers, segment_offsets, segment_reduce_axis,
                                  segment_scan_axis)
from ..records.builtin_reductions import ReduceRecord, record_of
from .define import compiler_disable, define, differentiable, direct_call_allowed


# ---------------------------------------------------------------------------------------------
# Argument checks (metadata always; the values of offsets/lengths in eager code only)
# ---------------------------------------------------------------------------------------------
def values_readable(t: torch.Tensor) -> bool:
    """Whether reading ``t``'s values is possible and cheap enough to check: a plain tensor in
    eager code (not traced by torch.compile or export, not inside a torch.func transform)."""
    return (type(t) is torch.Tensor and not torch.compiler.is_compiling()
            and not _torch_compat.is_functorch_wrapped(t)
            and _torch_compat.current_dispatch_mode() is None)


def check_segments(x: torch.Tensor, axis: int, offsets, lengths) -> torch.Tensor:
    """The int64 contiguous offsets of the segments of ``x``'s ``axis`` (already normalized), from
    exactly one of ``offsets`` / ``lengths``, every check raising before anything is launched.
    The checks that read the values run in eager code only (``values_readable``): under
    torch.compile, export and torch.func transforms they are skipped, as torch.segment_reduce's
    with unsafe=True."""
    given = offsets if offsets is not None else lengths
    return segment_offsets(x.shape[axis], x.device, offsets=offsets, lengths=lengths,
                           check_values=given is None or values_readable(given))


def _launcher_skips_checks(x, offsets):
    """Around the launcher or op call of a public function that has checked its arguments: the
    launch of exactly ``x`` and ``offsets`` skips those checks (``prechecked``), so each runs
    once. Traced by torch.compile, the op runs later and checks everything."""
    if torch.compiler.is_compiling():
        return contextlib.nullcontext()
    return prechecked(x, offsets)


def _check_x(x, name: str = "x") -> None:
    if not torch.compiler.is_compiling():
        _checks.check_tensor(name, x)
    if x.dim() == 0:
        raise ValueError(f"{name}: a 0-d tensor has no axis to split into segments")


def _check_initial(initial, record: ReduceRecord, dtype: torch.dtype):
    """``initial`` as the op's Scalar: None, an int (integer x) or a float."""
    if initial is None:
        return None
    if not record.takes_initial:
        raise ValueError(f"initial: only {initial_takers()} take an initial value "
                         f"(torch.segment_reduce's set), not {record.name}")
    if isinstance(initial, (bool, torch.Tensor)) or not isinstance(initial, numbers.Real):
        raise TypeError(f"initial: expected a Python number (int or float), got "
                        f"{type(initial).__name__}")
    if is_float(dtype):
        return float(initial)
    if not isinstance(initial, numbers.Integral):
        raise TypeError(f"initial: x has the integer dtype {dtype}, so initial must be an int, "
                        f"got {initial!r}")
    info = torch.iinfo(dtype)
    if not info.min <= int(initial) <= info.max:
        raise ValueError(f"initial: {int(initial)} is out of range for x's dtype {dtype} "
                         f"([{info.min}, {info.max}])")
    return int(initial)


def _reduce_function(function) -> Reduction:
    """The record of a name, a member or a record; a user's ``Reduction`` as it is."""
    if isinstance(function, Reduction) and not isinstance(function, ReduceRecord):
        return function
    return record_of(function)


def _scan_record(function) -> ScanCombine:
    """The scan record of ``function`` (a ``ScanCombine`` or its name, any case), with the
    derivatives the differentiable op needs."""
    record = function
    if isinstance(function, str):
        try:
            record = scan_record(function)
        except KeyError:
            record = None
    if isinstance(record, ScanCombine) and scan_record(record.name) is not record:
        raise ValueError(f"function: another ScanCombine has the name {record.name!r} (the op "
                         "finds a record by name); give each record its own name")
    if not isinstance(record, ScanCombine) or record.backward is None or record.jvp is None:
        raise ValueError(f"function: segment_scan takes a ScanCombine with a backward and a jvp "
                         f"(\"sum\", \"product\", \"logcumsumexp\", or a record of its own), got "
                         f"{function!r}; tritonml.associative_scan(..., offsets=...) takes any "
                         "combine")
    return record


# ---------------------------------------------------------------------------------------------
# The ops and their fake kernels
# ---------------------------------------------------------------------------------------------
@define("segment_reduce", opaque=True)   # multi-component states pass tuples (define)
def segment_reduce_op(x: torch.Tensor, offsets: torch.Tensor, function: str, axis: int,
                      keepdims: bool, initial: Optional[Union[int, float, bool]]) -> torch.Tensor:
    # The launcher checks (once; not what the public function checked: ``prechecked``).
    return segment_reduce_axis(x, record_of(function), offsets, axis, initial=initial,
                               keepdims=keepdims)[0]


@define("segment_scan", opaque=True)
def segment_scan_op(x: torch.Tensor, offsets: torch.Tensor, function: str, axis: int,
                    reverse: bool, exclusive: bool) -> torch.Tensor:
    return segment_scan_axis(x, scan_record(function), offsets, axis, reverse=reverse,
                             exclusive=exclusive)


def reduced_segments_shape(shape, axis: int, n, keepdims: bool) -> list:
    """x's shape with ``axis`` replaced by the n results (n, 1 with ``keepdims``)."""
    shape = list(shape)
    return shape[:axis] + ([n, 1] if keepdims else [n]) + shape[axis + 1:]


@segment_reduce_op.register_fake
def _fake_reduce(x, offsets, function, axis, keepdims, initial):
    axis = _checks.normalize_axis(axis, x.dim())
    shape = reduced_segments_shape(x.shape, axis, offsets.shape[0] - 1, keepdims)
    returns_index = record_of(function).returns_index
    return x.new_empty(shape, dtype=torch.int64 if returns_index else x.dtype)


@segment_scan_op.register_fake
def _fake_scan(x, offsets, function, axis, reverse, exclusive):
    _checks.normalize_axis(axis, x.dim())
    return torch.empty_like(x)


# ---------------------------------------------------------------------------------------------
# vmap: unbatched offsets move the axis past the batch dim; batched offsets (one set of
# boundaries per batch element, each over the whole axis) concatenate the batch's segments into
# one axis of batch x length entries, shifted by each element's start, and split them back
# ---------------------------------------------------------------------------------------------
def _batched_call(info, in_dims, x, offsets, axis, run):
    """``run(x, offsets, axis)`` over the batch; returns (result, its batch dim) where ``run``
    gives x's axis or its segments' results along ``axis``."""
    x_dim, offsets_dim = in_dims[0], in_dims[1]
    size = info.batch_size
    x = x.movedim(x_dim, 0) if x_dim is not None else x.expand(size, *x.shape)
    axis = _checks.normalize_axis(axis, x.dim() - 1) + 1
    if offsets_dim is None:
        return run(x, offsets, axis), 0
    offsets = offsets.movedim(offsets_dim, 0)
    length = x.shape[axis]
    merged = x.movedim(0, axis - 1).flatten(axis - 1, axis)
    starts = torch.arange(size, device=offsets.device, dtype=offsets.dtype).unsqueeze(1) * length
    joined = torch.cat([(offsets[:, :-1] + starts).flatten(),
                        offsets.new_full((1,), size * length)])
    result = run(merged, joined, axis - 1)
    return result.unflatten(axis - 1, (size, -1)), axis - 1


def _vmap_rule(op):
    """The vmap rule of ``op(x, offsets, function, axis, *options)``."""
    def rule(info, in_dims, x, offsets, function, axis, *options):
        if in_dims[0] is None and in_dims[1] is None:
            return op(x, offsets, function, axis, *options), None
        return _batched_call(info, in_dims, x, offsets, axis,
                             lambda t, o, a: op(t, o, function, a, *options))
    return rule


segment_reduce_op.register_vmap(_vmap_rule(segment_reduce_op))
segment_scan_op.register_vmap(_vmap_rule(segment_scan_op))


# ---------------------------------------------------------------------------------------------
# Autograd helpers: segment ids, gathers and sums along the axis
# ---------------------------------------------------------------------------------------------
def segment_ids(offsets: torch.Tensor, length: int) -> torch.Tensor:
    """Each position of the axis's segment (int64, ``length`` entries)."""
    positions = torch.arange(length, device=offsets.device, dtype=offsets.dtype)
    return torch.searchsorted(offsets[1:].contiguous(), positions, right=True)


def _along(t: torch.Tensor, axis: int, rank: int) -> torch.Tensor:
    """A 1-D ``t`` shaped to broadcast along ``axis`` of a rank-``rank`` tensor."""
    shape = [1] * rank
    shape[axis] = -1
    return t.reshape(shape)


def _gather(result: torch.Tensor, ids: torch.Tensor, axis: int, keepdims: bool):
    """A per-segment tensor (n along ``axis``) spread over the segments' elements."""
    if keepdims:
        result = result.squeeze(axis + 1)
    return result.index_select(axis, ids)


def _segment_sum(t, offsets, axis):
    return differentiable_segment_reduce(t, offsets, "SUM", axis, False, None)


def _partials(function: str, x, offsets, output, axis: int, keepdims: bool, initial):
    """d result[segment of j] / d x[j] for every element j, broadcasting against x: the record's
    derivative rule (tritonml/records/builtin_reductions.py, the same as tritonml.reduce's) over segments.
    Its ``total`` is a segment reduction gathered back over the elements; ``initial`` starts the
    function's own fold only (a factor of MULTIPLY's products, not of the sums beside it)."""
    record = record_of(function)
    if record.derivative is None:
        raise RuntimeError(f"segment_reduce: {function} is not differentiable (its output is an "
                           "index)")
    ids = segment_ids(offsets, x.shape[axis])
    y = _gather(output, ids, axis, keepdims)
    counts = _along((offsets[1:] - offsets[:-1]).to(x.dtype).index_select(0, ids), axis, x.dim())

    def total(t, name):
        folded = differentiable_segment_reduce(t, offsets, name, axis, False,
                                               initial if name == record.name else None)
        return _gather(folded, ids, axis, False)
    return record.derivative(x, y, total, counts)


def _setup_of(*options: str):
    """The ``setup_context`` of an op ``(x, offsets, function, axis, *options)``: x, the offsets
    and the output saved for either mode, the rest kept on ``ctx`` by name."""
    def setup(ctx, inputs, output):
        x, offsets, function, axis, *values = inputs
        ctx.function, ctx.axis = function, _checks.normalize_axis(axis, x.dim())
        for name, value in zip(options, values):
            setattr(ctx, name, value)
        ctx.save_for_backward(x, offsets, output)
        ctx.save_for_forward(x, offsets, output)
    return setup


def _reduce_backward(ctx, grad):
    x, offsets, output = ctx.saved_tensors
    offsets = offsets.to(torch.int64)
    partials = _partials(ctx.function, x, offsets, output, ctx.axis, ctx.keepdims, ctx.initial)
    spread = _gather(grad, segment_ids(offsets, x.shape[ctx.axis]), ctx.axis, ctx.keepdims)
    grad_x = (partials * spread).expand(x.shape)
    return grad_x, None, None, None, None, None


def _reduce_jvp(ctx, x_tangent, *_):
    x, offsets, output = ctx.saved_tensors
    offsets = offsets.to(torch.int64)
    partials = _partials(ctx.function, x, offsets, output, ctx.axis, ctx.keepdims, ctx.initial)
    terms = record_of(ctx.function).tangent_terms(partials, x_tangent)
    tangent = _segment_sum(terms.expand(x.shape), offsets, ctx.axis)
    return tangent.unsqueeze(ctx.axis + 1) if ctx.keepdims else tangent


differentiable_segment_reduce = differentiable(
    segment_reduce_op, _setup_of("keepdims", "initial"), _reduce_backward, jvp=_reduce_jvp)


# --- scans ---
def _segment_scan(record, t, offsets, axis, reverse, exclusive):
    """A differentiable scan of each segment. LINEAR_RECURRENCE takes t as ``(gates, tokens)``
    (a product's derivatives are recurrences), restarting at each segment's first step in
    traversal order: its gate there is 0."""
    if record is LINEAR_RECURRENCE:
        from .recurrence import _LINEAR_RECURRENCE   # (which imports this module)
        gates, tokens = t
        continues = _shift_in_segments(offsets, torch.ones_like(gates), axis, False, reverse)
        return _LINEAR_RECURRENCE(gates * continues, tokens, axis, reverse, None)
    return differentiable_segment_scan(t, offsets, record.name, axis, reverse, exclusive)


def _shift_in_segments(offsets, t, axis: int, later: bool, reverse: bool, fill: float = 0.0):
    """t[i] <- t[i + 1] (``later``) or t[i - 1] in traversal order, within each segment; the
    position with no neighbour in its segment gets ``fill``."""
    length = t.shape[axis]
    if length == 0:
        return t
    step = 1 if later != reverse else -1
    ids = segment_ids(offsets, length)
    source = torch.arange(length, device=t.device) + step
    inside = (source >= 0) & (source < length)
    source = source.clamp(0, length - 1)
    same = inside & (ids.index_select(0, source) == ids)
    moved = t.index_select(axis, source)
    return torch.where(_along(same, axis, t.dim()), moved, torch.full_like(moved, fill))


def _segments(offsets) -> Scans:
    """The scans and shifts of a scan record's derivatives, restarted at each segment."""
    def scan(record, t, axis, reverse, exclusive, initial=None):
        return _segment_scan(record, t, offsets, axis, reverse, exclusive)
    return Scans(scan, functools.partial(_shift_in_segments, offsets))


def _scan_backward(ctx, grad):
    """The record's gradient (records/builtin_scans.py) with every scan and shift in it
    segmented."""
    x, offsets, output = ctx.saved_tensors
    grad_x, _ = scan_record(ctx.function).backward(  # pyright: ignore[reportOptionalCall]
        _segments(offsets), x, output, None, grad, ctx.axis, ctx.reverse, ctx.exclusive)
    return grad_x, None, None, None, None, None


def _scan_jvp(ctx, x_tangent, *_):
    """The record's tangent (records/builtin_scans.py) with every scan and shift in it
    segmented."""
    x, offsets, output = ctx.saved_tensors
    return scan_record(ctx.function).jvp(  # pyright: ignore[reportOptionalCall]
        _segments(offsets), x, output, None, x_tangent, None, ctx.axis, ctx.reverse,
        ctx.exclusive)


differentiable_segment_scan = differentiable(
    segment_scan_op, _setup_of("reverse", "exclusive"), _scan_backward, jvp=_scan_jvp)


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------
def _reduce_with_segments(reduction: Reduction, x, offsets, lengths, axis, keepdims, initial):
    """A user's ``Reduction`` over segments: the launcher, eagerly (no op schema carries a
    Reduction), without autograd (a Reduction's ``backward`` is written for whole axes)."""
    xs = (x,) if isinstance(x, torch.Tensor) else tuple(x)
    if len(xs) != reduction.inputs:
        raise ValueError(f"x: the reduction {reduction.name} takes {reduction.inputs} "
                         f"tensor(s), got {len(xs)}")
    for i, t in enumerate(xs):
        _check_x(t, "x" if len(xs) == 1 else f"x[{i}]")
        if t.shape != xs[0].shape or t.device != xs[0].device:
            raise ValueError(f"x[{i}]: every tensor must have x[0]'s shape and device")
    if initial is not None:
        raise ValueError(f"initial: only SUM, MULTIPLY, MAX, MIN and AVERAGE take an initial "
                         f"value, not the reduction {reduction.name}")
    if torch.is_grad_enabled() and any(t.requires_grad for t in xs):
        raise RuntimeError(f"x: requires grad, but segment_reduce has no gradient for a "
                           f"tritonml.Reduction ({reduction.name}); pass x.detach() or call it "
                           "under torch.no_grad()")
    axis = _checks.normalize_axis(axis, xs[0].dim())
    keepdims = _checks.check_bool("keepdims", keepdims)
    offsets = check_segments(xs[0], axis, offsets, lengths)
    if reduction.check is not None:
        reduction.check(tuple(t.dtype for t in xs))
    with prechecked(xs, offsets):
        outs = segment_reduce_axis(xs, reduction, offsets, axis, keepdims=keepdims)
    return outs[0] if len(outs) == 1 else tuple(outs)


_eager_reduce_with_segments = compiler_disable(_reduce_with_segments)


@overload
def segment_reduce(x: torch.Tensor, function: Union[ReduceFunction, str, enum.Enum, ReduceRecord],
                   *, offsets: Optional[torch.Tensor] = ..., lengths: Optional[torch.Tensor] = ...,
                   axis: int = ..., keepdims: bool = ...,
                   initial: Union[int, float, None] = ...) -> torch.Tensor: ...
@overload
def segment_reduce(x: Union[torch.Tensor, Sequence[torch.Tensor]], function: Reduction, *,
                   offsets: Optional[torch.Tensor] = ..., lengths: Optional[torch.Tensor] = ...,
                   axis: int = ..., keepdims: bool = ..., initial: Union[int, float, None] = ...
                   ) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]: ...
# Last: a misspelt keyword matches only here, so type checkers name it in their error (the
# implementation takes no such keyword: Python's TypeError names it at run time).
@overload
def segment_reduce(x: Union[torch.Tensor, Sequence[torch.Tensor]],
                   function: Union[ReduceFunction, str, enum.Enum, Reduction], *,
                   offsets: Optional[torch.Tensor] = ..., lengths: Optional[torch.Tensor] = ...,
                   axis: int = ..., keepdims: bool = ..., initial: Union[int, float, None] = ...,
                   **unexpected_keyword: NoReturn) -> Any: ...
def segment_reduce(  # pyright: ignore[reportInconsistentOverload]
                   x: Union[torch.Tensor, Sequence[torch.Tensor]],
                   function: Union[ReduceFunction, str, enum.Enum, Reduction], *,
                   offsets: Optional[torch.Tensor] = None, lengths: Optional[torch.Tensor] = None,
                   axis: int = 0, keepdims: bool = False, initial: Union[int, float, None] = None
                   ) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
    """Reduce each segment of ``axis`` of ``x`` with ``function``.

    The checks that read the values of offsets or lengths run in eager code only, not under
    torch.compile, export or torch.func transforms (docs/segments.md). Runs as
    ``torch.ops.tritonml.segment_reduce``.

    Args:
        x: The tensor to reduce (rank >= 1); a tuple of tensors for a ``Reduction`` of several
            inputs.
        function: One of the twelve reduce functions (a ``ReduceFunction``, its name in any
            case, or its record), or a ``tritonml.Reduction`` (then ``x`` may be a tuple of
            tensors, and the result is a tuple when the reduction has several outputs).
        offsets: A 1-D integer tensor (int32 or int64) on x's device of n + 1 non-decreasing
            boundaries, offsets[0] == 0 and offsets[-1] == x.shape[axis]: segment i is
            ``x.narrow(axis, offsets[i], offsets[i + 1] - offsets[i])``.
        lengths: Instead of offsets, the n segments' lengths (non-negative, summing to
            x.shape[axis]). Pass exactly one of offsets and lengths.
        axis: The axis split into segments; negative counts from the end.
        keepdims: The n results along ``axis`` followed by a dim of size 1 (shape
            ``(..., n, 1, ...)``).
        initial: A Python number starting every segment's fold (SUM, MULTIPLY, MAX, MIN, AVERAGE
            only, as torch.segment_reduce; AVERAGE divides by the segment's length only).

    Returns:
        A tensor with n entries along ``axis``: an empty segment holds ``initial`` if given,
        else the function's value of nothing (SUM 0, MULTIPLY 1, MAX -inf or the type's
        minimum, AVERAGE nan, ...); ARGMAX/ARGMIN give int64 positions along ``axis`` of x (an
        empty segment's is x.shape[axis]). Differentiable in x (functions with an index output
        excepted; a ``Reduction``: none), forward and reverse mode. A tuple of such tensors for
        a ``Reduction`` with several outputs.

    Raises:
        TypeError: x or offsets/lengths is not a tensor, offsets/lengths is not of an integer
            dtype, function is not a reduce function nor a ``Reduction``, or initial is not a
            Python number (an int for an integer x).
        ValueError: both or neither of offsets and lengths, boundaries that decrease or do not
            end at x.shape[axis], a 0-d x, an axis out of range, an unknown function name, or
            initial for a function that takes none or out of the dtype's range.
        RuntimeError: x requires grad with a ``Reduction`` as function.

    Example:
        >>> import torch, tritonml
        >>> x = torch.tensor([1., 2., 3., 4., 5.])
        >>> tritonml.segment_reduce(x, "sum", offsets=torch.tensor([0, 2, 5]))
        tensor([ 3., 12.])
        >>> tritonml.segment_reduce(x, "max", lengths=torch.tensor([2, 0, 3]), initial=0)
        tensor([2., 0., 5.])
        >>> tritonml.segment_reduce(x, "argmax", lengths=torch.tensor([2, 0, 3]))
        tensor([1, 5, 4])
    """
    record = _reduce_function(function)
    if not isinstance(record, ReduceRecord):
        return _eager_reduce_with_segments(record, x, offsets, lengths, axis, keepdims, initial)
    _check_x(x)
    if TYPE_CHECKING:
        assert isinstance(x, torch.Tensor)   # _check_x (a tuple x is for a Reduction only)
    if record.check is not None:
        record.check((x.dtype,))
    axis = _checks.normalize_axis(axis, x.dim())
    keepdims = _checks.check_bool("keepdims", keepdims)
    initial = _check_initial(initial, record, x.dtype)
    offsets = check_segments(x, axis, offsets, lengths)
    with _launcher_skips_checks(x, offsets):
        if direct_call_allowed(x, inputs=(offsets,)):
            return segment_reduce_axis(x, record, offsets, axis, initial=initial,
                                       keepdims=keepdims)[0]
        return differentiable_segment_reduce(x, offsets, record.name, axis, keepdims, initial)


def segment_scan(x: torch.Tensor, function: Union[str, ScanCombine], *,
                 offsets: Optional[torch.Tensor] = None, lengths: Optional[torch.Tensor] = None,
                 axis: int = 0, reverse: bool = False, exclusive: bool = False) -> torch.Tensor:
    """Running ``function`` of each segment of ``axis`` of ``x`` on its own, restarting at each
    boundary.

    Runs as ``torch.ops.tritonml.segment_scan``.

    Args:
        x: The tensor to scan (rank >= 1).
        function: A ``ScanCombine`` record with a ``backward`` and a ``jvp``
            (tritonml/records/builtin_scans.py: SUM, PRODUCT, LOGCUMSUMEXP, or one of its own)
            or its name in any case (``"sum"``, ``"product"``, ``"logcumsumexp"``).
        offsets: The n + 1 boundaries, as for ``segment_reduce``.
        lengths: Instead, the n segments' lengths, as for ``segment_reduce``.
        axis: The axis split into segments; negative counts from the end.
        reverse: Scan each segment from its end.
        exclusive: Leave each element out of its own output (a segment's first output is the
            record's identity: 0 for a sum, 1 for a product).

    Returns:
        A tensor of x's shape and dtype, differentiable in x (forward and reverse mode).

    Raises:
        TypeError: x or offsets/lengths is not a tensor (of an integer dtype), or a flag is not
            a bool.
        ValueError: a function that is no such record nor its name
            (``tritonml.associative_scan(..., offsets=...)`` takes any combine), or
            offsets/lengths as for ``segment_reduce``.

    Example:
        >>> import torch, tritonml
        >>> x = torch.tensor([1., 2., 3., 4., 5.])
        >>> tritonml.segment_scan(x, "sum", offsets=torch.tensor([0, 2, 5]))
        tensor([ 1.,  3.,  3.,  7., 12.])
        >>> tritonml.segment_scan(x, "product", lengths=torch.tensor([2, 3]), exclusive=True)
        tensor([ 1.,  1.,  1.,  3., 12.])
    """
    record = _scan_record(function)
    _check_x(x)
    axis = _checks.normalize_axis(axis, x.dim())
    reverse = _checks.check_bool("reverse", reverse)
    exclusive = _checks.check_bool("exclusive", exclusive)
    offsets = check_segments(x, axis, offsets, lengths)
    with _launcher_skips_checks(x, offsets):
        if direct_call_allowed(x, inputs=(offsets,)):
            return segment_scan_axis(x, record, offsets, axis, reverse=reverse,
                                     exclusive=exclusive)
        return differentiable_segment_scan(x, offsets, record.name, axis, reverse, exclusive)


__all__ = ["segment_reduce", "segment_scan", "check_segments", "segment_ids"]
