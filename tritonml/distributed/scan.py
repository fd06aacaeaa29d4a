"""Scans along the sharded axis: ``cumulative_sum``, ``cumulative_product`` (each rank's total is
one read of its shard with the reduce kernel) and ``associative_scan`` under a user combine (a
local inclusive scan gives the total). Every rank folds the totals of the shards before its own
into its carry-in and scans its shard from it (docs/distributed.md, "The algorithm")."""
from __future__ import annotations

import datetime
from typing import (TYPE_CHECKING, Any, Callable, NoReturn, Optional, Sequence, Tuple, Union, cast,
                    overload)

import torch

from ..core import checks as _checks
from ..dsl import associative_scan as _dsl_associative_scan
from ..launchers.scan import check_initial_meta
from ..records.builtin_scans import PRODUCT, SUM
from ..torch_ops.reduce import reduce as _reduce
from ..torch_ops.scan import cumulative_product as _cumulative_product
from ..torch_ops.scan import cumulative_sum as _cumulative_sum
from .dtensor import (check_placements, from_local, is_dtensor, mesh_shard, sharding_mesh_dim,
                      to_local)
from .spmd import METADATA_TIMEOUT, Step, check_shard, exchange, shard_record

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

# ``tritonml.associative_scan`` under ``torch.compiler.disable``, whose decorator the type checker
# cannot see through: the same function, as a plain callable.
_single_device_associative_scan: Callable[..., Any] = _dsl_associative_scan

_Scalar = Union[bool, int, float]
_Tensors = Union[torch.Tensor, Sequence[torch.Tensor]]

_SCAN_COMPARE = (("x", "dtype", "the shard dtype"), ("x", "rank", "the shard rank"),
                 ("x", "outside_axis", "the shard shape outside the sharded axis"),
                 ("axis", "axis", "axis"), ("reverse", "reverse", "reverse"),
                 ("exclusive", "exclusive", "exclusive"))


def _check_initial(initial, x: torch.Tensor, axis: int) -> None:
    if initial is None:
        return
    _checks.check_readable("initial", initial)
    check_initial_meta(initial, x, axis)
    if initial.device != x.device:
        raise ValueError(f"initial: tensor is on {initial.device} but x is on {x.device}; "
                         "tensors must be on the same device")


def _traversal(size: int, reverse: bool) -> list:
    return list(range(size - 1, -1, -1)) if reverse else list(range(size))


def _carry(contributions: list, present: list, position: int, reverse: bool, fold_scan):
    """The fold, in traversal order, of the present contributions of the positions before
    ``position`` (None when there is none). ``contributions[p]`` is a tuple of state tensors;
    ``fold_scan(stacked)`` is the inclusive scan of a tuple of stacked states along dim 0 (a scan
    because a user combine has nothing else; its last row is the fold). Every rank stacks the
    same contributions in the same order, so a given position's carry is the same on every run."""
    order = [p for p in _traversal(len(contributions), reverse) if present[p]]
    before = [p for p in order if (p > position if reverse else p < position)]
    if not before:
        return None
    stacked = tuple(torch.stack([contributions[p][i] for p in before])
                    for i in range(len(contributions[before[0]])))
    scanned = fold_scan(stacked)
    return tuple(s[-1] for s in scanned)


def _carry_in(exchanged, present: list, reverse: bool, fold_scan, initial):
    """This shard's carry-in: the fold of the states of the present shards before it (see
    ``_carry``), or ``initial`` on the shard where the traversal starts (None elsewhere)."""
    carry = _carry(exchanged.states, present, exchanged.shard.position, reverse, fold_scan)
    if carry is None and exchanged.shard.starts(reverse):
        return initial
    return carry


def _sharded_scan(op: str, x, axis: int, run_local, run_shard, out, single: bool) -> Any:
    """A scan of DTensors like ``x`` along ``axis`` (normalized): ``run_local()`` on the local
    shards when no mesh dim shards ``axis``, else ``run_shard(group, position)`` through the
    protocol; the result back as DTensors of ``x``'s placements (``out`` itself when given; one
    tensor when ``single``, else a tuple)."""
    mesh_dim = sharding_mesh_dim(op, x, (axis,), f"axis {axis} is", "redistribute it over one")
    result = run_local() if mesh_dim is None else run_shard(*mesh_shard(x, mesh_dim))
    if out is not None:
        return out
    wrapped = tuple(from_local(r, x, x.placements, x.shape) for r in _as_tuple(result))
    return wrapped[0] if single else wrapped


def _as_tuple(xs) -> tuple:
    return tuple(xs) if isinstance(xs, (tuple, list)) else (xs,)


# ---------------------------------------------------------------------------------------------
# cumulative_sum, cumulative_product
# ---------------------------------------------------------------------------------------------
def cumulative_sum(x: torch.Tensor, axis: int, *, group: Optional["ProcessGroup"] = None,
                   reverse: bool = False, exclusive: bool = False,
                   initial: Optional[torch.Tensor] = None, out: Optional[torch.Tensor] = None,
                   timeout: Optional[datetime.timedelta] = None) -> torch.Tensor:
    """Running sum along ``axis`` of a tensor sharded along ``axis`` over the ranks of ``group``.

    ``x`` is this rank's shard, the shards lie in rank order, and each rank may hold a different
    length (0 included). Every rank calls it (SPMD); only a small metadata record and each
    shard's total cross the network.
    A DTensor is scanned along its placement: a Shard(axis) axis moves only the totals, any other
    axis is scanned locally; a DTensor comes back. With shards ``[1, 2]`` on rank 0 and ``[3]`` on
    rank 1, rank 0 returns ``[1, 3]`` and rank 1 ``[6]``. Otherwise as ``tritonml.cumulative_sum``.
    The algorithm and its cost: docs/distributed.md.

    Args:
        x: This rank's shard (or a DTensor).
        axis: The scanned axis, the one the shards lie along (negative counts from the end).
        group: The process group; None: the default group.
        reverse: Scan from the end of the whole axis (the last rank's last element) to its start.
        exclusive: Each output leaves its own element out.
        initial: The carry-in of the whole scan (x's shape without ``axis``): folded in before
            rank 0's first element (reverse: before the last rank's last element). Only that rank
            reads it; the others check its shape and dtype, so SPMD code may pass the same tensor
            everywhere.
        out: A tensor to write the result into, as for ``tritonml.cumulative_sum``.
        timeout: How long to wait for the other ranks at the metadata exchange
            (``METADATA_TIMEOUT`` when None).

    Returns:
        This rank's part of the scan (``out`` when given; a DTensor for a DTensor).

    Raises:
        RuntimeError: torch.distributed is not initialized, or a rank did not make the same call
            within ``timeout``.
        ValueError: The calling process is not in ``group``; the ranks disagree on the shard
            dtype, rank, shape outside ``axis``, ``axis``, ``reverse`` or ``exclusive``; or any
            error of ``tritonml.cumulative_sum``'s checks, raised on every rank (with its type)
            when one rank's local check fails.
        TypeError: As ``tritonml.cumulative_sum`` (raised on every rank).

    Example:
        A single-process group (world size 1) runs as written; with more ranks each passes its
        own shard.

        >>> import torch, torch.distributed as dist
        >>> import tritonml.distributed as td
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> td.cumulative_sum(torch.tensor([1.0, 2.0, 3.0]), 0)
        tensor([1., 3., 6.])
        >>> td.cumulative_sum(torch.tensor([1, 2, 3]), 0, exclusive=True, reverse=True)
        tensor([5, 3, 0])
        >>> dist.destroy_process_group()
    """
    return _cumulative("cumulative_sum", cast(str, SUM.fold), _cumulative_sum, x, axis, group,
                       reverse, exclusive, initial, out, timeout or METADATA_TIMEOUT)


def cumulative_product(x: torch.Tensor, axis: int, *, group: Optional["ProcessGroup"] = None,
                       reverse: bool = False, exclusive: bool = False,
                       initial: Optional[torch.Tensor] = None, out: Optional[torch.Tensor] = None,
                       timeout: Optional[datetime.timedelta] = None) -> torch.Tensor:
    """Running product along ``axis`` of a tensor sharded along ``axis``; see ``cumulative_sum``.

    Each rank's total is one read of its shard with the reduce kernel; every rank folds the totals
    of the shards before its own into its carry-in and scans its shard from it. Otherwise as
    ``tritonml.cumulative_product``. The arguments, the result and the errors are
    ``cumulative_sum``'s, except that a TypeError is ``tritonml.cumulative_product``'s (raised on
    every rank).

    Example:
        A single-process group (world size 1) runs as written.

        >>> import torch, torch.distributed as dist
        >>> import tritonml.distributed as td
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> td.cumulative_product(torch.tensor([1, 2, 3, 4]), 0)
        tensor([ 1,  2,  6, 24])
        >>> dist.destroy_process_group()
    """
    return _cumulative("cumulative_product", cast(str, PRODUCT.fold), _cumulative_product, x,
                       axis, group, reverse, exclusive, initial, out,
                       timeout or METADATA_TIMEOUT)


def _cumulative(name: str, total_function: str, local_scan, x, axis, group, reverse, exclusive,
                initial, out, timeout):
    op = f"tritonml.distributed.{name}"
    if not is_dtensor(x):
        return _cumulative_shard(op, total_function, local_scan, x, axis, group, None, reverse,
                                 exclusive, initial, out, timeout)
    check_placements(op, x.placements)
    a = _checks.normalize_axis(axis, x.dim())
    local, local_initial = x.to_local(), to_local(initial)
    local_out = to_local(out) if out is not None else None
    return _sharded_scan(
        op, x, a,
        lambda: local_scan(local, a, reverse=reverse, exclusive=exclusive,
                           initial=local_initial, out=local_out),
        lambda group, position: _cumulative_shard(op, total_function, local_scan, local, a,
                                                  group, position, reverse, exclusive,
                                                  local_initial, local_out, timeout),
        out, single=True)


def _cumulative_shard(op, total_function, local_scan, x, axis, group, position, reverse,
                      exclusive, initial, out, timeout):
    def local(shard) -> Step:
        check_shard(x)
        a = _checks.normalize_axis(axis, x.dim())
        _checks.check_bool("reverse", reverse)
        _checks.check_bool("exclusive", exclusive)
        _check_initial(initial, x, a)
        # The shard's total: one read of the shard with the reduce kernel. The rank where the
        # traversal starts folds the user's initial in first, so the others never need it.
        total = _reduce(x, total_function, a, keepdims=False)
        if shard.starts(reverse) and initial is not None:
            total = _reduce(torch.stack((initial, total)), total_function, 0, keepdims=False)
        return Step(states=(total,), fields={"axis": a}, value=a)

    exchanged = exchange(op, group, position,
                         dict(shard_record(x, axis), reverse=reverse, exclusive=exclusive),
                         local, _SCAN_COMPARE, timeout)
    present = [True] * exchanged.shard.size  # an empty shard's total is the identity: harmless
    carry = _carry_in(exchanged, present, reverse,
                      lambda s: (_scan_along_ranks(local_scan, s[0]),), (initial,))
    return local_scan(x, exchanged.value, reverse=reverse, exclusive=exclusive,
                      initial=None if carry is None else carry[0], out=out)


def _scan_along_ranks(local_scan: Callable[..., Any], stacked: torch.Tensor) -> torch.Tensor:
    """The inclusive scan of the ranks' totals, stacked along dim 0, by the scan the shards run
    (whose record's ``fold`` made the totals)."""
    return cast(torch.Tensor, local_scan(stacked, 0))  # without return_carry: one tensor


# ---------------------------------------------------------------------------------------------
# associative_scan (user combine)
# ---------------------------------------------------------------------------------------------
@overload
def associative_scan(combine_fn: Callable[..., Any], xs: torch.Tensor, axis: int, *,
                     group: Optional["ProcessGroup"] = ..., reverse: bool = ...,
                     exclusive: bool = ..., identity: Union[_Scalar, Sequence[_Scalar], None] = ...,
                     initial: Optional[_Tensors] = ..., out: Optional[_Tensors] = ...,
                     timeout: Optional[datetime.timedelta] = ...) -> torch.Tensor: ...


@overload
def associative_scan(combine_fn: Callable[..., Any], xs: Sequence[torch.Tensor], axis: int, *,
                     group: Optional["ProcessGroup"] = ..., reverse: bool = ...,
                     exclusive: bool = ..., identity: Union[_Scalar, Sequence[_Scalar], None] = ...,
                     initial: Optional[_Tensors] = ..., out: Optional[_Tensors] = ...,
                     timeout: Optional[datetime.timedelta] = ...) -> Tuple[torch.Tensor, ...]: ...


# Last: a misspelt keyword matches only here, so type checkers name it in their error (the
# implementation takes no such keyword: Python's TypeError names it at run time).
@overload
def associative_scan(combine_fn: Callable[..., Any], xs: _Tensors, axis: int, *,
                     group: Optional["ProcessGroup"] = ..., reverse: bool = ...,
                     exclusive: bool = ..., identity: Union[_Scalar, Sequence[_Scalar], None] = ...,
                     initial: Optional[_Tensors] = ..., out: Optional[_Tensors] = ...,
                     timeout: Optional[datetime.timedelta] = ..., **unexpected_keyword: NoReturn
                     ) -> Any: ...


def associative_scan(  # pyright: ignore[reportInconsistentOverload]
                     combine_fn: Callable[..., Any], xs: _Tensors, axis: int, *,
                     group: Optional["ProcessGroup"] = None, reverse: bool = False,
                     exclusive: bool = False,
                     identity: Union[_Scalar, Sequence[_Scalar], None] = None,
                     initial: Optional[_Tensors] = None, out: Optional[_Tensors] = None,
                     timeout: Optional[datetime.timedelta] = None
                     ) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
    """A scan under a user ``combine_fn`` of tensors sharded along ``axis`` over ``group``.

    ``combine_fn`` is a ``@triton.jit`` function of two tuple states, as for
    ``tritonml.associative_scan``; it need not commute: the left argument is always the earlier
    one in traversal order.

    A shard's total under a user combine has no reduce kernel, so each rank first runs a local
    inclusive scan into a scratch buffer and takes its last element in traversal order (an extra
    read and write of the shard: 4 passes in all instead of 3). Empty shards contribute nothing.
    DTensors are scanned along their placement, as for ``cumulative_sum``.

    Args:
        combine_fn: A ``@triton.jit`` function ``f(a, b)`` of two states (tuples, one value per
            tensor of ``xs``), associative.
        xs: This rank's shard: a tensor or a tuple of tensors of one shape (or DTensors).
        axis: The scanned axis, the one the shards lie along.
        group: The process group; None: the default group.
        reverse: Scan from the end of the whole axis to its start.
        exclusive: Each output leaves its own element out (needs ``identity``).
        identity: As ``tritonml.associative_scan``: one value per tensor.
        initial: As ``tritonml.associative_scan`` (a tuple); read on the rank where the traversal
            starts, as for ``cumulative_sum``.
        out: As ``tritonml.associative_scan``.
        timeout: How long to wait for the other ranks at the metadata exchange
            (``METADATA_TIMEOUT`` when None).

    Returns:
        This rank's part of the scan: a tensor if ``xs`` is a tensor, else a tuple.

    Raises:
        RuntimeError: torch.distributed is not initialized, or a rank did not make the same call
            within ``timeout``.
        ValueError: An empty ``xs``, an ``initial`` of the wrong length, the ranks disagreeing on
            the shard dtypes, rank, shape outside ``axis``, ``axis``, ``reverse`` or
            ``exclusive``, or an error of ``tritonml.associative_scan``'s checks (raised on every
            rank, with its type).

    Example:
        A single-process group (world size 1) runs as written; the combine keeps a running
        maximum.

        >>> import torch, torch.distributed as dist
        >>> import tritonml.distributed as td
        >>> import triton, triton.language as tl
        >>> @triton.jit
        ... def running_max(a, b):
        ...     return (tl.maximum(a[0], b[0]),)
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> td.associative_scan(running_max, torch.tensor([3, 1, 4, 1, 5]), 0)
        tensor([3, 3, 4, 4, 5])
        >>> dist.destroy_process_group()
    """
    timeout = timeout or METADATA_TIMEOUT
    op = "tritonml.distributed.associative_scan"
    if not any(is_dtensor(t) for t in _as_tuple(xs)):
        return _associative_scan_shard(op, combine_fn, xs, axis, group, None, reverse, exclusive,
                                       identity, initial, out, timeout)
    tensors = _as_tuple(xs)
    first = tensors[0]
    check_placements(op, first.placements)
    a = _checks.normalize_axis(axis, first.dim())
    locals_ = tuple(t.to_local() for t in tensors)
    local_xs = locals_ if isinstance(xs, (tuple, list)) else locals_[0]
    local_initial = None if initial is None else tuple(to_local(t) for t in _as_tuple(initial))
    local_out = None if out is None else (tuple(to_local(t) for t in _as_tuple(out))
                                          if isinstance(out, (tuple, list)) else to_local(out))
    return _sharded_scan(
        op, first, a,
        lambda: _single_device_associative_scan(combine_fn, local_xs, a, reverse=reverse,
                                                exclusive=exclusive, identity=identity,
                                                initial=local_initial, out=local_out),
        lambda group, position: _associative_scan_shard(op, combine_fn, local_xs, a, group,
                                                        position, reverse, exclusive, identity,
                                                        local_initial, local_out, timeout),
        out, single=not isinstance(xs, (tuple, list)))


def _associative_scan_shard(op, combine_fn, xs, axis, group, position, reverse, exclusive,
                            identity, initial, out, timeout):
    tensors = _as_tuple(xs)
    initials = None if initial is None else _as_tuple(initial)

    def local(shard) -> Step:
        if not tensors:
            raise ValueError("xs: expected a tensor or a non-empty tuple of tensors")
        for i, t in enumerate(tensors):
            check_shard(t, "xs" if len(tensors) == 1 else f"xs[{i}]")
        a = _checks.normalize_axis(axis, tensors[0].dim())
        length = tensors[0].shape[a]
        if initials is not None:
            if len(initials) != len(tensors):
                raise ValueError(f"initial: expected {len(tensors)} tensors (one per xs), got "
                                 f"{len(initials)}")
            for t, init in zip(tensors, initials):
                _check_initial(init, t, a)
        start_initial = initials if (shard.starts(reverse) and initials is not None) else None
        if length:
            inclusive = _as_tuple(_single_device_associative_scan(
                combine_fn, xs, a, reverse=reverse, identity=identity, initial=start_initial))
            last = 0 if reverse else length - 1
            total = tuple(t.select(a, last) for t in inclusive)
        elif start_initial is not None:
            total = tuple(start_initial)
        else:  # nothing to contribute; a placeholder of the state's shape keeps all_gather even
            total = tuple(t.select(a, 0) if t.shape[a] else
                          t.new_zeros(t.shape[:a] + t.shape[a + 1:]) for t in tensors)
        return Step(states=total, value=a,
                    fields={"axis": a, "present": bool(length) or start_initial is not None})

    record = dict(shard_record(tensors[0] if tensors else None, axis), reverse=reverse,
                  exclusive=exclusive,
                  dtypes=[str(t.dtype) if isinstance(t, torch.Tensor) else None for t in tensors],
                  shapes=[tuple(t.shape) if isinstance(t, torch.Tensor) else None
                          for t in tensors])
    exchanged = exchange(op, group, position, record, local,
                         _SCAN_COMPARE + (("xs", "dtypes", "the dtypes of xs"),), timeout)
    present = [rec["present"] for rec in exchanged.records]
    carry = _carry_in(exchanged, present, reverse,
                      lambda s: _as_tuple(_single_device_associative_scan(
                          combine_fn, s if len(s) > 1 else s[0], 0)), initials)
    return _single_device_associative_scan(combine_fn, xs, exchanged.value, reverse=reverse,
                                           exclusive=exclusive, identity=identity, initial=carry,
                                           out=out)
