"""Groups: the elements of ``src`` that an index sends to the same place, sorted next to each
other and reduced by the segment kernel. Every scatter and index reduction runs through here.

A group is the set of positions ``j`` along ``dim`` (and, for an index that varies across the
other dims, the same position in those) with ``index[..., j, ...] == g``. The algorithm:

1. **Sort.** A stable sort of the index (torch.sort(stable=True): a radix sort on CUDA, so
   deterministic) gives the order that puts each group's elements next to each other, in their
   order in ``src``. An index already sorted (checked in eager code, or promised by the caller:
   ``segment_coo``) skips it.
2. **Permute.** ``src``'s elements are gathered into that order (``index_select``), and the
   group boundaries are found by a binary search of the sorted index for each group
   (``searchsorted``): the segment offsets. A 1-D index found sorted by the checks brings its
   boundaries with it (``SortedLine``: the checks' one pass over the index wrote them,
   tritonml/kernels/index_bounds.py), and nothing reads it again.
3. **Reduce.** The segment kernel reduces every segment (tritonml/kernels/segment.py) in one
   launch, as ``torch.ops.tritonml.group_reduce``. Its order of association is fixed by each
   group's place in the sorted array and the kernel's config, never by timing (no atomics);
   and the config is the one the segment kernel takes on the reference GPU (``GROUP_TARGET``,
   an H100) on every device, CPU included, so a GPU with another number of SMs (whose own
   segment reductions split the axis into other chunks) gives the same bits.

Two shapes of index:

- **Shared**: the same index for every position of the other dims (a 1-D ``index_add`` index,
  torch_scatter's broadcast index: stride 0 across the other dims). One 1-D sort, and the
  segment kernel reduces along ``dim`` with every other dim side by side (a GNN's feature
  columns read as whole rows).
- **General**: an index that varies across the other dims. Each (position of the other dims,
  group) pair becomes one key ``column * n + index``; one sort of all keys, one 1-D segment
  reduction, reshaped back.

Both give the reduction of each group in a tensor of ``src``'s shape with ``dim`` replaced by the
number of groups ``n`` (the function's value of nothing where a group is empty), and each group's
count. Everything here is torch ops and ``torch.ops.tritonml.segment_reduce``, so autograd,
forward AD, vmap, torch.compile and export come from them.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Optional, Union

import torch

from tritonml_autotune import devices

from ..core import checks as _checks, torch_compat as _torch_compat
from ..core.dtypes import ACC_TORCH_DTYPE
from ..launchers.index_bounds import group_boundaries as _boundaries
from ..launchers.scan_checks import prechecked
from ..launchers.segment import segment_reduce_axis
from ..records.builtin_reductions import ReduceRecord, record_of
from .define import define, differentiable, direct_call_allowed
from .segment import _reduce_backward, _reduce_jvp, _vmap_rule

# The GPU whose segment-kernel config every group reduction takes, whatever the device: the
# config decides how a group's elements are associated, and so the last bits of a float sum.
GROUP_TARGET = "H100"


def shared_index(index: torch.Tensor, dim: int) -> Optional[torch.Tensor]:
    """The 1-D index along ``dim`` when ``index`` is the same for every position of its other
    dims (stride 0 there, or size 1), else None (an index with no elements across them too)."""
    if any(index.shape[k] == 0 for k in range(index.dim()) if k != dim):
        return None
    if all(index.stride(k) == 0 or index.shape[k] == 1
           for k in range(index.dim()) if k != dim):
        at: list = [0] * index.dim()
        at[dim] = slice(None)
        return index[tuple(at)]
    return None


@dataclass(frozen=True)
class Groups:
    """``values``: src's elements in group order along ``axis``; ``offsets``: the n + 1 int64
    group boundaries along it; ``order``: the source position of each of them (None where the
    index was sorted: the identity)."""
    values: torch.Tensor
    offsets: torch.Tensor
    order: Optional[torch.Tensor]
    axis: int

    def counts(self) -> torch.Tensor:
        return self.offsets[1:] - self.offsets[:-1]

    def detached(self) -> "Groups":
        """The same groups of values that carry no gradient (for an index output)."""
        return Groups(self.values.detach(), self.offsets, self.order, self.axis)


@dataclass(frozen=True)
class SortedLine:
    """A 1-D index (``line``) that the checks found non-decreasing, and the n + 1 int64 group
    boundaries of its values that the same pass over it wrote (``offsets``)."""
    line: torch.Tensor
    offsets: torch.Tensor

    def serves(self, line: torch.Tensor, n_groups: int) -> bool:
        """Whether these are the boundaries of ``line`` (the same elements of the same tensor,
        inside the wrappers of torch.func's grad and jvp transforms if any) into ``n_groups``
        groups."""
        mine, theirs = self.line, _torch_compat.grad_unwrapped(line)
        if theirs is None:   # (batched by vmap: its values are not the line's)
            return False
        return (theirs.data_ptr() == mine.data_ptr() and theirs.shape == mine.shape
                and theirs.stride() == mine.stride() and theirs.dtype == mine.dtype
                and theirs.device == mine.device and self.offsets.shape[0] == n_groups + 1)


def _sorted(keys: torch.Tensor, n_groups: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``keys`` stably sorted, and the order that sorts them (int64)."""
    # a radix sort passes over a key's bytes: int32 keys take half the passes of int64
    if n_groups <= 2**31 - 1 and keys.dtype == torch.int64:
        keys = keys.to(torch.int32)
    return torch.sort(keys, stable=True)


def sort_into_groups(values: torch.Tensor, axis: int, keys: torch.Tensor, n_groups: int,
                     keys_sorted: bool) -> Groups:
    """Group ``values`` along ``axis`` by ``keys`` (1-D, one per position, each in
    [0, n_groups)): a stable sort unless ``keys_sorted``, then the boundaries of each key."""
    order = None
    if not keys_sorted:
        keys, order = _sorted(keys, n_groups)
        values = values.index_select(axis, order)
    return Groups(values, _boundaries(keys, n_groups), order, axis)


def group_counts(keys: torch.Tensor, n_groups: int, keys_sorted: bool) -> torch.Tensor:
    """How many of ``keys`` (1-D, each in [0, n_groups)) are each key (int64)."""
    if not keys_sorted:
        keys = _sorted(keys, n_groups)[0]
    offsets = _boundaries(keys, n_groups)
    return offsets[1:] - offsets[:-1]


@functools.lru_cache(maxsize=None)
def _accumulated_record(record: ReduceRecord) -> ReduceRecord:
    """``record`` storing its state as it is, in the accumulation dtype, not rounded to the
    input's: one object per record, as the launch plans are keyed by the record."""
    return dataclasses.replace(record, output_dtypes=lambda dtypes: (ACC_TORCH_DTYPE[dtypes[0]],))


def _group_dtype(x: torch.Tensor, function: str, accumulated: bool) -> torch.dtype:
    if record_of(function).returns_index:
        return torch.int64
    return ACC_TORCH_DTYPE[x.dtype] if accumulated else x.dtype


def _reduce_fixed(x: torch.Tensor, offsets: torch.Tensor, function: str, axis: int, initial,
                  empty=None, accumulated: bool = False):
    record = record_of(function)
    if accumulated:
        record = _accumulated_record(record)
    with devices.targeting(GROUP_TARGET):
        return segment_reduce_axis(x, record, offsets, axis, initial=initial, empty=empty)[0]


@define("group_reduce", opaque=True)
def group_reduce_op(x: torch.Tensor, offsets: torch.Tensor, function: str, axis: int,
                    initial: Optional[Union[int, float, bool]],
                    empty: Optional[Union[int, float, bool]],
                    accumulated: bool = False) -> torch.Tensor:
    """``segment_reduce(x, offsets, function, axis, initial)`` at the config of
    ``GROUP_TARGET`` on every device; ``empty``: an empty group's result alone (not with
    ``initial``); ``accumulated``: each group's state as the kernel holds it, in x's
    accumulation dtype (float32 for half types, float64 for float32), not rounded to x's."""
    return _reduce_fixed(x, offsets, function, axis, initial, empty, accumulated)


@group_reduce_op.register_fake
def _fake_group_reduce(x, offsets, function, axis, initial, empty, accumulated=False):
    axis = _checks.normalize_axis(axis, x.dim())
    shape = list(x.shape)
    shape[axis] = offsets.shape[0] - 1
    return x.new_empty(shape, dtype=_group_dtype(x, function, accumulated))


def _setup(ctx, inputs, output):
    # the segment reduction's derivative rules, which read these (``empty`` is no element's:
    # it changes no derivative)
    x, offsets, function, axis, initial, _, *_ = inputs
    ctx.function, ctx.axis = function, _checks.normalize_axis(axis, x.dim())
    ctx.keepdims, ctx.initial = False, initial
    ctx.save_for_backward(x, offsets, output)
    ctx.save_for_forward(x, offsets, output)


def _backward(ctx, grad):
    # (an accumulated output's gradient is x's in the wider dtype: x's own is x's dtype)
    grad_x, *rest = _reduce_backward(ctx, grad)[:5]
    return (grad_x.to(ctx.saved_tensors[0].dtype), *rest, None, None)


def _jvp(ctx, x_tangent, *rest):
    return _reduce_jvp(ctx, x_tangent, *rest).to(ctx.saved_tensors[2].dtype)


group_reduce_op.register_vmap(_vmap_rule(group_reduce_op))
differentiable_group_reduce = differentiable(group_reduce_op, _setup, _backward, jvp=_jvp)


def reduce_groups(groups: Groups, function: str, initial=None, *, empty=None,
                  accumulated: bool = False) -> torch.Tensor:
    """Each group's ``function`` (a ReduceFunction name; ``initial`` as segment_reduce's: an
    empty group's value, AVERAGE's too; ``empty`` instead: an empty group's value alone) by the
    segment kernel, along the axis: the boundaries were made here, so none of them is checked
    again. ``accumulated``: in the values' accumulation dtype, not rounded to theirs (for a
    caller that folds more in before it rounds once)."""
    x, offsets = groups.values, groups.offsets
    with prechecked(x, offsets):
        if direct_call_allowed(x, inputs=(offsets,)):
            return _reduce_fixed(x, offsets, function, groups.axis, initial, empty, accumulated)
        return differentiable_group_reduce(x, offsets, function, groups.axis, initial, empty,
                                           accumulated)


@dataclass(frozen=True)
class Grouping:
    """How ``src`` (narrowed to the index's box) is grouped along ``dim`` into ``n`` groups,
    and how the per-group results come back to the shape of src with ``dim`` replaced by n."""
    groups: Groups
    dim: int
    n: int
    shape: tuple                  # src's box shape
    shared: bool

    def result(self, reduced: torch.Tensor) -> torch.Tensor:
        """The per-group results (``reduce_groups``) in src's shape with dim -> n."""
        if self.shared:
            return reduced
        other = [s for k, s in enumerate(self.shape) if k != self.dim]
        return reduced.reshape(*other, self.n).movedim(-1, self.dim)

    def counts(self) -> torch.Tensor:
        """Each group's number of elements (int64), broadcasting against ``result``."""
        counts = self.groups.counts()
        if self.shared:
            view = [1] * len(self.shape)
            view[self.dim] = self.n
            return counts.reshape(view)
        return self.result(counts)

    def source_positions(self, positions: torch.Tensor) -> torch.Tensor:
        """ARGMAX/ARGMIN's positions in the sorted order (``result`` shape) as positions along
        ``dim`` of src; an empty group's (one past the end) stays src.shape[dim]."""
        length = self.shape[self.dim]
        order = self.groups.order
        if self.shared:
            if order is None or length == 0:
                return positions
            inside = positions < length
            picked = order.index_select(0, positions.clamp(max=max(length - 1, 0)).flatten())
            return torch.where(inside, picked.reshape(positions.shape), positions)
        total = self.groups.values.shape[0]
        if total == 0:
            return positions
        flat = positions.movedim(self.dim, -1).reshape(-1)
        inside = flat < total
        if order is not None:
            flat = torch.where(inside, order.index_select(0, flat.clamp(max=max(total - 1, 0))),
                               flat)
        along = torch.where(inside, flat % max(length, 1), torch.full_like(flat, length))
        other = [s for k, s in enumerate(self.shape) if k != self.dim]
        return along.reshape(*other, self.n).movedim(-1, self.dim)


def group(src: torch.Tensor, dim: int, index: torch.Tensor, n: int, *, index_sorted: bool,
          first: Optional[torch.Tensor] = None,
          bounds: Optional[SortedLine] = None) -> Grouping:
    """Group ``src`` along ``dim`` by ``index`` (src's shape, stride 0 across the other dims for a
    shared index) into ``n`` groups. ``index_sorted``: the index is non-decreasing along ``dim``
    (for a general index, within each position of the other dims). ``first``: a tensor of the
    result's shape whose entries go first into each group (torch's ``include_self`` where the
    gradient must treat them as elements: ties of amax/amin). ``bounds``: the boundaries the
    checks found for a sorted 1-D index, used where they are this shared index's."""
    shape = tuple(src.shape)
    line = shared_index(index, dim)
    if (line is not None and index_sorted and first is None and bounds is not None
            and bounds.serves(line, n)):
        return Grouping(Groups(src, bounds.offsets, None, dim), dim, n, shape, True)
    if line is not None:
        values, keys, keys_sorted = src, line, index_sorted
        if first is not None:
            values = torch.cat([first, src], dim)
            keys = torch.cat([torch.arange(n, device=line.device, dtype=line.dtype), line])
            keys_sorted = False
        groups = sort_into_groups(values, dim, keys, n, keys_sorted)
        return Grouping(groups, dim, n, shape, True)
    columns = src.movedim(dim, -1)
    length = columns.shape[-1]
    n_columns = math.prod(columns.shape[:-1])
    column = torch.arange(n_columns, device=index.device, dtype=torch.int64)
    keys = (column.reshape(*columns.shape[:-1], 1) * n
            + index.movedim(dim, -1).to(torch.int64)).reshape(-1)
    values = columns.reshape(-1)
    keys_sorted = index_sorted
    if first is not None:
        values = torch.cat([first.movedim(dim, -1).reshape(-1), values])
        keys = torch.cat([torch.arange(n_columns * n, device=keys.device, dtype=torch.int64),
                          keys])
        keys_sorted = False
    groups = sort_into_groups(values, 0, keys, n_columns * n, keys_sorted)
    return Grouping(groups, dim, n, shape, False)
