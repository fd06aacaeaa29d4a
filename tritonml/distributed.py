"""Scans and reductions over a tensor sharded along one axis across the processes of a
``torch.distributed`` group, or over a ``torch.distributed.tensor.DTensor``.

Every rank calls the same function with its own shard (SPMD). Only small per-rank *states* cross
the network, never the data: one state per independent scan (the shard's shape without the axis)
or one partial reduction. States are exchanged with ``all_gather`` and folded in rank order by
every rank with tritonml's own kernels, so results are the same on every run and, for
reductions, bitwise the same on every rank. Before any data moves, the ranks exchange a small
metadata record (shape, dtype, axis, operation, local length, any local error) and refuse
mismatches with the same error on every rank. The algorithm, its cost and its determinism
argument: docs/distributed.md.

This module imports ``torch.distributed``; ``import tritonml`` does not import it.
"""
from __future__ import annotations

import datetime
import math
import pickle
from typing import List, Optional, Sequence

import torch
import torch.distributed as dist

from .core import checks as _checks
from .core.dtypes import is_float
from .core.reduce_function import ReduceFunction
from .torch_ops.reduce import reduce as _reduce
from .torch_ops.scan import cumulative_product as _cumulative_product
from .torch_ops.scan import cumulative_sum as _cumulative_sum
from .launchers.reduce import check_index_dtype
from .launchers.scan import check_initial_meta
from .launchers.scan_records import PRODUCT, SUM

__all__ = ["cumulative_sum", "cumulative_product", "associative_scan", "reduce",
           "METADATA_TIMEOUT"]

# How long a rank waits for the others at the metadata exchange (the first collective of every
# call): a rank that never arrives (it crashed, or called something else) turns into an error
# here instead of a hang. Data collectives run under the process group's own timeout.
METADATA_TIMEOUT = datetime.timedelta(seconds=120)

_FOLD_FUNCTION = {  # the reduce function that folds the ranks' partial results
    ReduceFunction.SUM: "SUM", ReduceFunction.SUM_SQUARE: "SUM", ReduceFunction.L1: "SUM",
    ReduceFunction.MULTIPLY: "MULTIPLY", ReduceFunction.MAX: "MAX", ReduceFunction.MIN: "MIN",
    ReduceFunction.L2: "L2", ReduceFunction.LOG_SUM_EXP: "LOG_SUM_EXP",
}
_ERROR_TYPES = {cls.__name__: cls for cls in (TypeError, ValueError, NotImplementedError,
                                               RuntimeError, IndexError, OverflowError)}


# ---------------------------------------------------------------------------------------------
# The group and its collectives
# ---------------------------------------------------------------------------------------------
class _Group:
    """The calling rank's view of a process group: its rank, size, and the device collectives
    use (CUDA for NCCL, CPU for gloo)."""

    def __init__(self, group):
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("group: torch.distributed is not initialized; call torch."
                               "distributed.init_process_group first (see docs/distributed.md)")
        rank = dist.get_rank(group)
        if rank < 0:
            raise ValueError(f"group: the calling process (global rank {dist.get_rank()}) is not "
                             "part of this process group; pass a group it belongs to, or None for "
                             "the default group")
        self.group, self.rank, self.size = group, rank, dist.get_world_size(group)
        backend = str(dist.get_backend(group)).lower()
        self.device = torch.device("cuda", torch.cuda.current_device()) if "nccl" in backend \
            else torch.device("cpu")


def _wait(work, timeout, what: str) -> None:
    try:
        if timeout is None:
            work.wait()
        else:
            work.wait(timeout)
    except RuntimeError as error:
        raise RuntimeError(f"group: {what} did not complete (timeout {timeout}): a rank of the "
                           f"group did not make the same tritonml.distributed call ({error})"
                           ) from error


def _all_gather_bytes(g: _Group, payload: bytes, timeout) -> List[bytes]:
    """Every rank's ``payload`` (any lengths), in group rank order: the lengths first, then the
    bytes padded to the longest."""
    size = torch.tensor([len(payload)], dtype=torch.int64, device=g.device)
    sizes = [torch.empty_like(size) for _ in range(g.size)]
    _wait(dist.all_gather(sizes, size, group=g.group, async_op=True), timeout,
          "the metadata exchange")
    lengths = [int(s.item()) for s in sizes]
    buffer = torch.zeros(max(lengths), dtype=torch.uint8)
    buffer[:len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    buffer = buffer.to(g.device)
    buffers = [torch.empty_like(buffer) for _ in range(g.size)]
    _wait(dist.all_gather(buffers, buffer, group=g.group, async_op=True), timeout,
          "the metadata exchange")
    return [b[:n].cpu().numpy().tobytes() for b, n in zip(buffers, lengths)]


def _all_gather_states(g: _Group, states: Sequence[torch.Tensor]) -> List[tuple]:
    """Every rank's ``states`` (tensors of the same shapes and dtypes on every rank, which the
    metadata exchange has checked), in group rank order. Sent as raw bytes, so every dtype
    travels (gloo has no unsigned 16-64 bit types) and values arrive bit for bit."""
    device = states[0].device
    flat = [s.detach().contiguous().reshape(-1).view(torch.uint8) for s in states]
    packed = torch.cat(flat).to(g.device)
    gathered = [torch.empty_like(packed) for _ in range(g.size)]
    dist.all_gather(gathered, packed, group=g.group)
    result = []
    for buffer in gathered:
        buffer, start, unpacked = buffer.to(device), 0, []
        for state, part in zip(states, flat):
            chunk = buffer[start:start + part.numel()]
            # a copy: the chunk may start off the alignment of its dtype
            unpacked.append(chunk.clone().view(state.dtype).reshape(state.shape))
            start += part.numel()
        result.append(tuple(unpacked))
    return result


def _describe(x) -> dict:
    if not isinstance(x, torch.Tensor):
        return {"dtype": _checks._type_name(x), "shape": None}
    return {"dtype": str(x.dtype).replace("torch.", ""), "shape": tuple(x.shape)}


def _agree(g: _Group, op: str, record: dict, error: Optional[BaseException],
           compare: Sequence[tuple], timeout) -> List[dict]:
    """Exchange ``record`` (plus the local error, if any) and return every rank's, ordered by
    shard position. Raises the same error on every rank when a rank failed locally or when the
    fields named in ``compare`` ((parameter, key, rule) triples) differ. Each record gets its
    ``group_rank``."""
    if error is not None:
        record = dict(record, error=(type(error).__name__, str(error)))
    records = [pickle.loads(b) for b in _all_gather_bytes(g, pickle.dumps(record), timeout)]
    for r, rec in enumerate(records):
        rec["group_rank"] = r
    failed = [(r, rec["error"]) for r, rec in enumerate(records) if rec.get("error")]
    if failed:
        rank, (kind, message) = failed[0]
        others = f" (ranks {[r for r, _ in failed]} failed)" if len(failed) > 1 else ""
        raised = _ERROR_TYPES.get(kind, RuntimeError)(f"{op}: rank {rank} of the group: "
                                                      f"{message}{others}")
        raise raised from error
    for parameter, key, rule in compare:
        values = [rec[key] for rec in records]
        if any(v != values[0] for v in values):
            listing = ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))
            raise ValueError(f"{op}: {parameter}: {rule} must be the same on every rank of the "
                             f"group, got {listing}")
    positions = sorted(rec["position"] for rec in records)
    if positions != list(range(g.size)):  # pragma: no cover - mesh coordinates always are
        raise ValueError(f"{op}: shard positions {positions} are not 0..{g.size - 1}")
    return sorted(records, key=lambda rec: rec["position"])


def _ordered(records: List[dict], gathered: List[tuple]) -> List[tuple]:
    """The gathered states (group rank order) in shard position order, as ``records`` are."""
    return [gathered[rec["group_rank"]] for rec in records]


# ---------------------------------------------------------------------------------------------
# DTensor
# ---------------------------------------------------------------------------------------------
def _dtensor_class():
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - torch without DTensor
        return None
    return DTensor


def _is_dtensor(x) -> bool:
    cls = _dtensor_class()
    return cls is not None and isinstance(x, cls)


def _mesh_dims_sharding(placements, dim: int) -> list:
    """The mesh dims whose placement shards tensor dim ``dim``."""
    from torch.distributed.tensor import Shard
    return [m for m, p in enumerate(placements) if isinstance(p, Shard) and p.dim == dim]


def _check_placements(op: str, placements) -> None:
    from torch.distributed.tensor import Replicate, Shard
    for p in placements:
        if not isinstance(p, (Shard, Replicate)):
            raise NotImplementedError(f"{op}: x: placement {p} is not supported; redistribute to "
                                      "Shard or Replicate placements first")


def _contiguous_stride(shape) -> tuple:
    stride, step = [], 1
    for s in reversed(shape):
        stride.append(step)
        step *= max(s, 1)
    return tuple(reversed(stride))


def _from_local(local: torch.Tensor, like, placements, shape):
    from torch.distributed.tensor import DTensor
    return DTensor.from_local(local, like.device_mesh, placements, run_check=False,
                              shape=torch.Size(shape), stride=_contiguous_stride(shape))


def _local(t):
    return t.to_local() if _is_dtensor(t) else t


# ---------------------------------------------------------------------------------------------
# Scans
# ---------------------------------------------------------------------------------------------
def _scan_record(x, axis) -> dict:
    described = _describe(x)
    shape = described["shape"]
    if shape is not None and isinstance(axis, int) and -len(shape) <= axis < len(shape):
        a = axis % len(shape)
        described["outside_axis"] = shape[:a] + shape[a + 1:]
        described["length"] = shape[a]
        described["rank"] = len(shape)
    else:
        described["outside_axis"], described["length"], described["rank"] = shape, 0, None
    return described


_SCAN_COMPARE = (("x", "dtype", "the shard dtype"), ("x", "rank", "the shard rank"),
                 ("x", "outside_axis", "the shard shape outside the sharded axis"),
                 ("axis", "axis", "axis"), ("reverse", "reverse", "reverse"),
                 ("exclusive", "exclusive", "exclusive"))


def _check_shard(x, name: str = "x") -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor (this rank's shard) or a DTensor, got "
                        f"{_checks._type_name(x)}")
    if x.dim() == 0:
        raise ValueError(f"{name}: a shard needs at least one dimension (the sharded axis); got a "
                         "0-d tensor")
    if torch.is_grad_enabled() and x.requires_grad:
        # the carries come through all_gather, which autograd does not see: refuse rather than
        # return gradients that miss the other ranks' terms
        raise NotImplementedError(f"{name}: tritonml.distributed is not differentiable; x "
                                  "requires grad (call under torch.no_grad() or pass x.detach())")


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


def _cumulative(name: str, total_function: str, local_scan, x, axis, group, reverse, exclusive,
                initial, out, timeout):
    op = f"tritonml.distributed.{name}"
    if _is_dtensor(x):
        return _cumulative_dtensor(name, total_function, local_scan, x, axis, reverse, exclusive,
                                   initial, out, timeout)
    return _cumulative_shard(op, total_function, local_scan, x, axis, group, None, reverse,
                             exclusive, initial, out, timeout)


def _cumulative_shard(op, total_function, local_scan, x, axis, group, position, reverse,
                      exclusive, initial, out, timeout):
    g = _Group(group)
    position = g.rank if position is None else position
    start = position == (g.size - 1 if reverse else 0)
    error, total, a = None, None, None
    try:
        _check_shard(x)
        a = _checks.normalize_axis(axis, x.dim())
        _checks.check_bool("reverse", reverse)
        _checks.check_bool("exclusive", exclusive)
        _check_initial(initial, x, a)
        # The shard's total: one read of the shard with the reduce kernel. The rank where the
        # traversal starts folds the user's initial in first, so the others never need it.
        total = _reduce(x, total_function, a, keepdims=False)
        if start and initial is not None:
            total = _reduce(torch.stack((initial, total)), total_function, 0, keepdims=False)
    except Exception as caught:  # reported to every rank by _agree, which raises it everywhere
        error = caught
    record = dict(_scan_record(x, axis), axis=a, reverse=reverse, exclusive=exclusive,
                  position=position)
    records = _agree(g, op, record, error, _SCAN_COMPARE, timeout)
    by_position = _ordered(records, _all_gather_states(g, (total,)))
    present = [True] * g.size  # an empty shard's total is the identity: harmless in the fold
    carry = _carry(by_position, present, position, reverse,
                   lambda s: (_scan_along_ranks(total_function, s[0]),))
    carry = carry[0] if carry is not None else (initial if start else None)
    return local_scan(x, a, reverse=reverse, exclusive=exclusive, initial=carry, out=out)


def _scan_along_ranks(total_function: str, stacked: torch.Tensor) -> torch.Tensor:
    scan = _cumulative_sum if total_function == "SUM" else _cumulative_product
    return scan(stacked, 0)


def _cumulative_dtensor(name, total_function, local_scan, x, axis, reverse, exclusive, initial,
                        out, timeout):
    op = f"tritonml.distributed.{name}"
    _check_placements(op, x.placements)
    a = _checks.normalize_axis(axis, x.dim())
    local, local_initial = x.to_local(), _local(initial)
    local_out = _local(out) if out is not None else None
    sharding = _mesh_dims_sharding(x.placements, a)
    if not sharding:  # the axis is whole on every rank: a local scan
        result = local_scan(local, a, reverse=reverse, exclusive=exclusive,
                            initial=local_initial, out=local_out)
    elif len(sharding) > 1:
        raise NotImplementedError(f"{op}: axis {a} is sharded over several mesh dims "
                                  f"{sharding}; redistribute it over one")
    else:
        mesh_dim = sharding[0]
        group = x.device_mesh.get_group(mesh_dim)
        position = x.device_mesh.get_local_rank(mesh_dim)
        result = _cumulative_shard(op, total_function, local_scan, local, a, group, position,
                                   reverse, exclusive, local_initial, local_out, timeout)
    if out is not None:
        return out
    return _from_local(result, x, x.placements, x.shape)


def cumulative_sum(x, axis: int, *, group=None, reverse: bool = False, exclusive: bool = False,
                   initial: Optional[torch.Tensor] = None, out: Optional[torch.Tensor] = None,
                   timeout=None):
    """Running sum along ``axis`` of a tensor sharded along ``axis`` over the ranks of ``group``
    (None: the default group): ``x`` is this rank's shard, the shards lie in rank order, and each
    rank may hold a different length (0 included). A DTensor is scanned along its placement: a
    Shard(axis) axis moves only the totals, any other axis is scanned locally; a DTensor comes back.

    ``initial`` (x's shape without ``axis``) is the carry-in of the whole scan: folded in before
    rank 0's first element (reverse: before the last rank's last element). Only that rank reads
    it; the others check its shape and dtype, so SPMD code may pass the same tensor everywhere.
    ``timeout``: how long to wait for the other ranks at the metadata exchange
    (``METADATA_TIMEOUT`` when None). Otherwise as ``tritonml.cumulative_sum``."""
    return _cumulative("cumulative_sum", SUM.fold, _cumulative_sum, x, axis, group, reverse,
                       exclusive, initial, out, timeout or METADATA_TIMEOUT)


def cumulative_product(x, axis: int, *, group=None, reverse: bool = False,
                       exclusive: bool = False, initial: Optional[torch.Tensor] = None,
                       out: Optional[torch.Tensor] = None, timeout=None):
    """Running product; see ``cumulative_sum``."""
    return _cumulative("cumulative_product", PRODUCT.fold, _cumulative_product, x, axis, group,
                       reverse, exclusive, initial, out, timeout or METADATA_TIMEOUT)


# ---------------------------------------------------------------------------------------------
# associative_scan (user combine)
# ---------------------------------------------------------------------------------------------
def _single_device_associative_scan():
    import tritonml
    scan = getattr(tritonml, "associative_scan", None)
    if scan is None:
        raise NotImplementedError("associative_scan: this tritonml has no "
                                  "tritonml.associative_scan (the single-device user-combine scan "
                                  "it runs on each rank)")
    return scan


def _as_tuple(xs) -> tuple:
    return tuple(xs) if isinstance(xs, (tuple, list)) else (xs,)


def associative_scan(combine_fn, xs, axis: int, *, group=None, reverse: bool = False,
                     exclusive: bool = False, identity=None, initial=None, out=None, timeout=None):
    """A scan under a user ``combine_fn`` (a ``@triton.jit`` function of two tuple states, as for
    ``tritonml.associative_scan``) of tensors sharded along ``axis`` over ``group``. ``combine_fn``
    need not commute: the left argument is always the earlier one in traversal order.

    A shard's total under a user combine has no reduce kernel, so each rank first runs a local
    inclusive scan into a scratch buffer and takes its last element in traversal order (an extra
    read and write of the shard: 4 passes in all instead of 3). Empty shards contribute nothing.
    ``initial``, ``identity``, ``out``: as ``tritonml.associative_scan``; ``initial`` (a tuple) is
    read on the rank where the traversal starts, as for ``cumulative_sum``."""
    timeout = timeout or METADATA_TIMEOUT
    op = "tritonml.distributed.associative_scan"
    single = _as_tuple(xs)
    if any(_is_dtensor(t) for t in single):
        return _associative_scan_dtensor(combine_fn, xs, axis, reverse, exclusive, identity,
                                         initial, out, timeout)
    return _associative_scan_shard(op, combine_fn, xs, axis, group, None, reverse, exclusive,
                                   identity, initial, out, timeout)


def _associative_scan_shard(op, combine_fn, xs, axis, group, position, reverse, exclusive,
                            identity, initial, out, timeout):
    g = _Group(group)
    position = g.rank if position is None else position
    start = position == (g.size - 1 if reverse else 0)
    tensors = _as_tuple(xs)
    initials = None if initial is None else _as_tuple(initial)
    error, total, a, length = None, None, None, 0
    try:
        scan = _single_device_associative_scan()
        if not tensors:
            raise ValueError("xs: expected a tensor or a non-empty tuple of tensors")
        for i, t in enumerate(tensors):
            _check_shard(t, "xs" if len(tensors) == 1 else f"xs[{i}]")
        a = _checks.normalize_axis(axis, tensors[0].dim())
        length = tensors[0].shape[a]
        if initials is not None:
            if len(initials) != len(tensors):
                raise ValueError(f"initial: expected {len(tensors)} tensors (one per xs), got "
                                 f"{len(initials)}")
            for t, init in zip(tensors, initials):
                _check_initial(init, t, a)
        start_initial = initials if (start and initials is not None) else None
        if length:
            inclusive = _as_tuple(scan(combine_fn, xs, a, reverse=reverse, identity=identity,
                                       initial=start_initial))
            last = 0 if reverse else length - 1
            total = tuple(t.select(a, last) for t in inclusive)
        elif start_initial is not None:
            total = tuple(start_initial)
        else:  # nothing to contribute; a placeholder of the state's shape keeps all_gather even
            total = tuple(t.select(a, 0) if t.shape[a] else
                          t.new_zeros(t.shape[:a] + t.shape[a + 1:]) for t in tensors)
    except Exception as caught:
        error = caught
    present_here = bool(length) or (start and initials is not None)
    record = dict(_scan_record(tensors[0] if tensors else None, axis), axis=a, reverse=reverse,
                  exclusive=exclusive, position=position, present=present_here,
                  dtypes=[str(t.dtype) if isinstance(t, torch.Tensor) else None for t in tensors],
                  shapes=[tuple(t.shape) if isinstance(t, torch.Tensor) else None
                          for t in tensors])
    records = _agree(g, op, record, error,
                     _SCAN_COMPARE + (("xs", "dtypes", "the dtypes of xs"),), timeout)
    by_position = _ordered(records, _all_gather_states(g, total))
    present = [rec["present"] for rec in records]
    scan = _single_device_associative_scan()
    carry = _carry(by_position, present, position, reverse,
                   lambda s: _as_tuple(scan(combine_fn, s if len(s) > 1 else s[0], 0)))
    if carry is None:
        carry = initials if start else None
    return scan(combine_fn, xs, a, reverse=reverse, exclusive=exclusive, identity=identity,
                initial=carry, out=out)


def _associative_scan_dtensor(combine_fn, xs, axis, reverse, exclusive, identity, initial, out,
                              timeout):
    op = "tritonml.distributed.associative_scan"
    tensors = _as_tuple(xs)
    first = tensors[0]
    _check_placements(op, first.placements)
    a = _checks.normalize_axis(axis, first.dim())
    locals_ = tuple(t.to_local() for t in tensors)
    local_xs = locals_ if isinstance(xs, (tuple, list)) else locals_[0]
    local_initial = None if initial is None else tuple(_local(t) for t in _as_tuple(initial))
    local_out = None if out is None else (tuple(_local(t) for t in _as_tuple(out))
                                          if isinstance(out, (tuple, list)) else _local(out))
    sharding = _mesh_dims_sharding(first.placements, a)
    if not sharding:
        result = _single_device_associative_scan()(combine_fn, local_xs, a, reverse=reverse,
                                                   exclusive=exclusive, identity=identity,
                                                   initial=local_initial, out=local_out)
    elif len(sharding) > 1:
        raise NotImplementedError(f"{op}: axis {a} is sharded over several mesh dims {sharding}")
    else:
        mesh = first.device_mesh
        result = _associative_scan_shard(op, combine_fn, local_xs, a, mesh.get_group(sharding[0]),
                                         mesh.get_local_rank(sharding[0]), reverse, exclusive,
                                         identity, local_initial, local_out, timeout)
    if out is not None:
        return out
    wrapped = tuple(_from_local(r, first, first.placements, first.shape) for r in _as_tuple(result))
    return wrapped if isinstance(xs, (tuple, list)) else wrapped[0]


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------
_REDUCE_COMPARE = (("x", "dtype", "the shard dtype"), ("x", "rank", "the shard rank"),
                   ("x", "outside_axis", "the shard shape outside the sharded axis"),
                   ("sharded_axis", "axis", "sharded_axis"), ("function", "function", "function"),
                   ("axes", "axes", "axes"), ("keepdims", "keepdims", "keepdims"),
                   ("index_dtype", "index_dtype", "index_dtype"))


def _result_shape(shape, axes, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _local_argument(x, function: str, axes, sax):
    """ARGMAX/ARGMIN of the shard: (value, coordinates) with the rank kept; ``coordinates`` stacks
    the shard-local coordinate along each reduced axis of the chosen element. An empty shard
    gives placeholders that the fold skips (it knows the lengths)."""
    keep = _result_shape(x.shape, axes, True)
    if x.shape[sax] == 0:
        return x.new_zeros(keep), torch.full((len(axes),) + keep, -1, dtype=torch.int64,
                                             device=x.device)
    index = _reduce(x, function, axes, keepdims=True, index_dtype=torch.int64)
    # the row-major index over the reduced axes, unravelled; then read those elements only
    coordinates, rest = {}, index
    for a in reversed(axes):
        coordinates[a], rest = rest % x.shape[a], rest // x.shape[a]
    selectors = []
    for d in range(x.dim()):
        if d in axes:
            selectors.append(coordinates[d])
        else:
            view = [1] * x.dim()
            view[d] = x.shape[d]
            selectors.append(torch.arange(x.shape[d], device=x.device).view(view))
    return x[tuple(selectors)].reshape(keep), torch.stack([coordinates[a] for a in axes])


def reduce(x, function, axes=None, *, sharded_axis: Optional[int] = None, group=None,
           keepdims: bool = True, index_dtype: torch.dtype = torch.int64,
           out: Optional[torch.Tensor] = None, timeout=None):
    """``tritonml.reduce`` of a tensor sharded along ``sharded_axis`` over the ranks of ``group``
    (None: the default group); ``x`` is this rank's shard, shards lie in rank order and may have
    different lengths along ``sharded_axis`` (0 included). Reducing ``sharded_axis`` exchanges one
    partial state per rank and folds them in rank order on every rank: every rank returns the
    same bits. Axes that leave ``sharded_axis`` alone reduce locally (after the metadata check).
    ARGMAX/ARGMIN return indices over the *global* reduced axes (row-major, first occurrence).

    A DTensor ``x`` takes ``sharded_axis`` from its placement (leave it None); the result is a
    DTensor, Replicate on the mesh dim whose shards were folded (every rank holds the fold), the
    other placements kept (their dims renumbered when ``keepdims`` is False)."""
    timeout = timeout or METADATA_TIMEOUT
    op = "tritonml.distributed.reduce"
    if _is_dtensor(x):
        return _reduce_dtensor(op, x, function, axes, sharded_axis, keepdims, index_dtype, out,
                               timeout)
    if sharded_axis is None:
        raise TypeError(f"{op}: sharded_axis: required for a plain tensor shard (the axis along "
                        "which the ranks' shards lie)")
    return _reduce_shard(op, x, function, axes, sharded_axis, group, None, keepdims, index_dtype,
                         out, timeout)


def _reduce_shard(op, x, function, axes, sharded_axis, group, position, keepdims, index_dtype,
                  out, timeout):
    g = _Group(group)
    position = g.rank if position is None else position
    error, fn, red, sax, states, local_result = None, None, None, None, None, None
    try:
        _check_shard(x)
        fn = ReduceFunction.parse(function, "function")
        sax = _checks.normalize_axis(sharded_axis, x.dim(), "sharded_axis")
        red = _checks.normalize_axes(axes, x.dim())
        check_index_dtype(index_dtype)
        _checks.check_bool("keepdims", keepdims)
        if sax not in red:  # every rank reduces its own shard: nothing to exchange but metadata
            local_result = _reduce(x, fn, red, keepdims=keepdims, index_dtype=index_dtype, out=out)
        else:
            if fn in (ReduceFunction.AVERAGE, ReduceFunction.L2, ReduceFunction.LOG_SUM,
                      ReduceFunction.LOG_SUM_EXP) and not is_float(x.dtype):
                _reduce(x.narrow(sax, 0, 0), fn, red)  # the single-device TypeError
            if out is not None:
                dtype = index_dtype if fn in (ReduceFunction.ARGMAX, ReduceFunction.ARGMIN) \
                    else x.dtype
                _checks.check_out(out, x, shape=_result_shape(x.shape, red, keepdims), dtype=dtype)
            states = _local_states(x, fn, red, sax)
    except Exception as caught:
        error = caught
    record = dict(_scan_record(x, sharded_axis), axis=sax, position=position,
                  function=None if fn is None else fn.name, axes=red, keepdims=keepdims,
                  index_dtype=str(index_dtype))
    records = _agree(g, op, record, error, _REDUCE_COMPARE, timeout)
    if local_result is not None:
        return local_result
    lengths = [rec["length"] for rec in records]
    by_position = _ordered(records, _all_gather_states(g, states))
    other = math.prod(x.shape[a] for a in red if a != sax)
    result = _fold(op, fn, by_position, lengths, other, red, sax, x.shape, index_dtype)
    if not keepdims:
        result = result.reshape(_result_shape(x.shape, red, False))
    if out is not None:
        out.copy_(result)
        return out
    return result


def _local_states(x, fn, red, sax) -> tuple:
    """One read of the shard with tritonml's reduce kernel: the partial state the fold needs."""
    if fn in (ReduceFunction.ARGMAX, ReduceFunction.ARGMIN):
        return _local_argument(x, fn.name, red, sax)
    if fn in (ReduceFunction.AVERAGE, ReduceFunction.LOG_SUM):
        # the shard's mean, re-weighted by its count in the fold: unlike a rounded partial sum it
        # cannot overflow a half type where the global result does not
        return (_reduce(x, "AVERAGE", red, keepdims=True),)
    return (_reduce(x, fn, red, keepdims=True),)


def _fold(op, fn, states, lengths, other, red, sax, shard_shape, index_dtype):
    """The ranks' partial states, in shard order, folded into the result (rank kept)."""
    counts = [n * other for n in lengths]
    if fn in (ReduceFunction.ARGMAX, ReduceFunction.ARGMIN):
        return _fold_argument(op, fn, states, lengths, other, red, sax, shard_shape, index_dtype)
    if fn in (ReduceFunction.AVERAGE, ReduceFunction.LOG_SUM):
        means = [s[0] for s, n in zip(states, counts) if n]  # an empty shard's mean is 0/0
        total = sum(counts)
        if not means:
            empty = states[0][0]
            value = float("nan") if fn == ReduceFunction.AVERAGE else float("-inf")
            return torch.full_like(empty, value)
        weights = [n / total if fn == ReduceFunction.AVERAGE else float(n)
                   for n in counts if n]
        weighted = torch.stack([m.to(torch.float64) * w for m, w in zip(means, weights)])
        folded = _reduce(weighted, "SUM", 0, keepdims=False)
        if fn == ReduceFunction.LOG_SUM:
            folded = torch.log(folded)
        return folded.to(means[0].dtype)
    stacked = torch.stack([s[0] for s in states])
    return _reduce(stacked, _FOLD_FUNCTION[fn], 0, keepdims=False)


def _fold_argument(op, fn, states, lengths, other, red, sax, shard_shape, index_dtype):
    total_length = sum(lengths)
    global_sizes = [total_length if a == sax else shard_shape[a] for a in red]
    count = math.prod(global_sizes)
    if count == 0:
        raise ValueError(f"{op}: axes: {fn.name} over an empty axis has no index (the reduced "
                         f"axes {red} hold 0 elements over the group)")
    largest = torch.iinfo(index_dtype).max
    if count - 1 > largest:
        raise ValueError(f"{op}: index_dtype: {fn.name} over {count} elements can return index "
                         f"{count - 1}, which does not fit {index_dtype}; use torch.int64")
    offsets = [sum(lengths[:p]) for p in range(len(lengths))]
    values, indices = [], []
    for p, (value, coordinates) in enumerate(states):
        if lengths[p] == 0 or other == 0:
            continue
        flat = torch.zeros_like(coordinates[0])
        for k, a in enumerate(red):
            c = coordinates[k] + (offsets[p] if a == sax else 0)
            flat = flat * global_sizes[k] + c
        values.append(value)
        indices.append(flat)
    stacked_values = torch.stack(values)
    best = _reduce(stacked_values, "MAX" if fn == ReduceFunction.ARGMAX else "MIN", 0,
                   keepdims=True)
    # candidates: the ranks holding the best value (NaN: the ranks holding a NaN); the smallest
    # global index among them is the first occurrence over the whole tensor
    candidate = (stacked_values == best) | (stacked_values.isnan() & best.isnan()) \
        if is_float(stacked_values.dtype) else stacked_values == best
    never = torch.iinfo(torch.int64).max
    masked = torch.where(candidate, torch.stack(indices), torch.full_like(indices[0], never))
    return _reduce(masked, "MIN", 0, keepdims=False).to(index_dtype)


def _reduce_dtensor(op, x, function, axes, sharded_axis, keepdims, index_dtype, out, timeout):
    from torch.distributed.tensor import Shard
    _check_placements(op, x.placements)
    if sharded_axis is not None:
        raise TypeError(f"{op}: sharded_axis: leave it None for a DTensor (its placements say "
                        "which dims are sharded)")
    red = _checks.normalize_axes(axes, x.dim()) if x.dim() else (0,)
    local = x.to_local()
    folded = [m for m, p in enumerate(x.placements) if isinstance(p, Shard) and p.dim in red]
    if len(folded) > 1:
        raise NotImplementedError(f"{op}: axes {red} are sharded over several mesh dims "
                                  f"{folded}; redistribute so at most one mesh dim shards them")
    local_out = _local(out) if out is not None else None
    if folded:
        mesh_dim = folded[0]
        sax = x.placements[mesh_dim].dim
        mesh = x.device_mesh
        result = _reduce_shard(op, local, function, red, sax, mesh.get_group(mesh_dim),
                               mesh.get_local_rank(mesh_dim), keepdims, index_dtype, local_out,
                               timeout)
    else:
        result = _reduce(local, function, red, keepdims=keepdims, index_dtype=index_dtype,
                         out=local_out)
    if out is not None:
        return out
    return _from_local(result, x, _reduced_placements(x.placements, red, keepdims),
                       _result_shape(x.shape, red, keepdims))


def _reduced_placements(placements, red, keepdims: bool) -> list:
    """The placements of a DTensor reduction's result: Replicate on a mesh dim that sharded a
    reduced dim (the fold), the other placements kept (Shard dims renumbered without keepdims)."""
    from torch.distributed.tensor import Replicate, Shard
    result = []
    for p in placements:
        if isinstance(p, Shard) and p.dim in red:
            result.append(Replicate())
        elif isinstance(p, Shard) and not keepdims:
            result.append(Shard(p.dim - sum(1 for a in red if a < p.dim)))
        else:
            result.append(p)
    return result
