"""``tritonml.distributed.reduce``: a reduction of a sharded tensor. Reducing the sharded axis
exchanges one partial state per rank (``fold``) and folds them in shard order on every rank; axes
that leave it alone reduce locally."""
from __future__ import annotations

import datetime
import enum
import math
from typing import TYPE_CHECKING, Optional, Sequence, Union

import torch

from ..core import checks as _checks
from ..core.dtypes import is_float
from ..records.reduce_function import ReduceFunction
from ..core.shapes import reduced_shape
from ..launchers.reduce import check_index_dtype
from ..records.builtin_reductions import record_of
from ..torch_ops.reduce import reduce as _reduce
from .dtensor import (check_placements, from_local, is_dtensor, mesh_shard, reduced_placements,
                      sharding_mesh_dim, to_local)
from .fold import _fold, _local_states
from .spmd import METADATA_TIMEOUT, Step, check_shard, exchange, shard_record

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

_REDUCE_COMPARE = (("x", "dtype", "the shard dtype"), ("x", "rank", "the shard rank"),
                   ("x", "outside_axis", "the shard shape outside the sharded axis"),
                   ("sharded_axis", "axis", "sharded_axis"), ("function", "function", "function"),
                   ("axes", "axes", "axes"), ("keepdims", "keepdims", "keepdims"),
                   ("index_dtype", "index_dtype", "index_dtype"))


def reduce(x: torch.Tensor, function: Union[ReduceFunction, str, enum.Enum],
           axes: Union[int, Sequence[int], None] = None, *, sharded_axis: Optional[int] = None,
           group: Optional["ProcessGroup"] = None, keepdims: bool = True,
           index_dtype: torch.dtype = torch.int64, out: Optional[torch.Tensor] = None,
           timeout: Optional[datetime.timedelta] = None) -> torch.Tensor:
    """``tritonml.reduce`` of a tensor sharded along ``sharded_axis`` over the ranks of ``group``.

    ``x`` is this rank's shard, shards lie in rank order and may have different lengths along
    ``sharded_axis`` (0 included). Reducing ``sharded_axis`` exchanges one partial state per rank
    and folds them in rank order on every rank: every rank returns the same bits. Axes that leave
    ``sharded_axis`` alone reduce locally (after the metadata check). ARGMAX/ARGMIN return indices
    over the *global* reduced axes (row-major, first occurrence). With SUM over shards ``[1, 2]``
    and ``[3]``, both ranks return ``[6]``.

    A DTensor ``x`` takes ``sharded_axis`` from its placement (leave it None); the result is a
    DTensor, Replicate on the mesh dim whose shards were folded (every rank holds the fold), the
    other placements kept (their dims renumbered when ``keepdims`` is False).

    Args:
        x: This rank's shard (or a DTensor).
        function: A ``ReduceFunction`` or its name in any case, as for ``tritonml.reduce``.
        axes: An int, a sequence of distinct ints, or None for all axes.
        sharded_axis: The axis the shards lie along; required for a plain tensor, None for a
            DTensor.
        group: The process group; None: the default group.
        keepdims: True keeps the rank with reduced axes of size 1; False drops them.
        index_dtype: ARGMAX/ARGMIN output dtype, as for ``tritonml.reduce``.
        out: A tensor to write the result into.
        timeout: How long to wait for the other ranks at the metadata exchange
            (``METADATA_TIMEOUT`` when None).

    Returns:
        The reduction (``out`` when given; a DTensor for a DTensor), the same bits on every rank.

    Raises:
        TypeError: ``sharded_axis`` missing for a plain tensor or given for a DTensor, or a
            TypeError of ``tritonml.reduce``'s checks (raised on every rank).
        RuntimeError: torch.distributed is not initialized, or a rank did not make the same call
            within ``timeout``.
        ValueError: The ranks disagree on the shard dtype, rank, shape outside the sharded axis,
            ``sharded_axis``, ``function``, ``axes``, ``keepdims`` or ``index_dtype``, or a
            ValueError of ``tritonml.reduce``'s checks (raised on every rank).

    Example:
        A single-process group (world size 1) runs as written.

        >>> import torch, torch.distributed as dist
        >>> import tritonml.distributed as td
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> td.reduce(x, "sum", 0, sharded_axis=0)
        tensor([[4., 6.]])
        >>> td.reduce(x, "argmax", sharded_axis=0, keepdims=False)
        tensor(3)
        >>> dist.destroy_process_group()
    """
    timeout = timeout or METADATA_TIMEOUT
    op = "tritonml.distributed.reduce"
    if is_dtensor(x):
        return _reduce_dtensor(op, x, function, axes, sharded_axis, keepdims, index_dtype, out,
                               timeout)
    if sharded_axis is None:
        raise TypeError(f"{op}: sharded_axis: required for a plain tensor shard (the axis along "
                        "which the ranks' shards lie)")
    return _reduce_shard(op, x, function, axes, sharded_axis, group, None, keepdims, index_dtype,
                         out, timeout)


def _reduce_shard(op, x, function, axes, sharded_axis, group, position, keepdims, index_dtype,
                  out, timeout):
    def local(shard) -> Step:
        check_shard(x)
        fn = record_of(function)   # a ReduceFunction, its name, or a record of its own
        sax = _checks.normalize_axis(sharded_axis, x.dim(), "sharded_axis")
        red = _checks.normalize_axes(axes, x.dim())
        check_index_dtype(index_dtype)
        _checks.check_bool("keepdims", keepdims)
        fields = {"axis": sax, "function": fn.name, "axes": red}
        if sax not in red:  # every rank reduces its own shard: nothing to exchange but metadata
            local_result = _reduce(x, fn.name, red, keepdims=keepdims, index_dtype=index_dtype,
                                   out=out)
            return Step(fields=fields, value=local_result)
        fn_record = record_of(fn)
        if fn_record.float_only and not is_float(x.dtype):
            _reduce(x.narrow(sax, 0, 0), fn.name, red)  # the single-device TypeError
        if out is not None:
            dtype = index_dtype if fn_record.returns_index else x.dtype
            _checks.check_out(out, x, shape=reduced_shape(x.shape, red, keepdims), dtype=dtype)
        return Step(states=_local_states(x, fn, red, sax), fields=fields, value=(fn, red, sax))

    record = dict(shard_record(x, sharded_axis), keepdims=keepdims, index_dtype=str(index_dtype))
    exchanged = exchange(op, group, position, record, local, _REDUCE_COMPARE, timeout)
    if exchanged.states is None:
        return exchanged.value
    fn, red, sax = exchanged.value
    lengths = [rec["length"] for rec in exchanged.records]
    other = math.prod(x.shape[a] for a in red if a != sax)
    result = _fold(op, fn, exchanged.states, lengths, other, red, sax, x.shape, index_dtype)
    if not keepdims:
        result = result.reshape(reduced_shape(x.shape, red, False))
    if out is not None:
        out.copy_(result)
        return out
    return result


def _reduce_dtensor(op, x, function, axes, sharded_axis, keepdims, index_dtype, out, timeout):
    check_placements(op, x.placements)
    if sharded_axis is not None:
        raise TypeError(f"{op}: sharded_axis: leave it None for a DTensor (its placements say "
                        "which dims are sharded)")
    red = _checks.normalize_axes(axes, x.dim()) if x.dim() else (0,)
    local = x.to_local()
    mesh_dim = sharding_mesh_dim(op, x, red, f"axes {red} are",
                                 "redistribute so at most one mesh dim shards them")
    local_out = to_local(out) if out is not None else None
    if mesh_dim is not None:
        sax = x.placements[mesh_dim].dim
        group, position = mesh_shard(x, mesh_dim)
        result = _reduce_shard(op, local, function, red, sax, group, position, keepdims,
                               index_dtype, local_out, timeout)
    else:
        result = _reduce(local, function, red, keepdims=keepdims, index_dtype=index_dtype,
                         out=local_out)
    if out is not None:
        return out
    return from_local(result, x, reduced_placements(x.placements, red, keepdims),
                      reduced_shape(x.shape, red, keepdims))
