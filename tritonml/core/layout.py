"""Canonical layouts: how every op sees its tensors, and the one rule for 32- or 64-bit offsets.

Scans view ``x`` and ``out`` (same shape) as ``outer dims x axis x inner``; reductions view ``x``
as ``outer dims x inner x reduced dims`` and ``out`` as ``outer dims x inner``. ``inner`` is the
kept dimension programs tile across (the one with the smallest input stride, so loads coalesce
along it); the outer dims are what a program's index decomposes over. Dimensions of size 1 are
dropped and neighbours contiguous with each other in every tensor are merged first
(``merge_dims``), so a contiguous tensor needs at most one outer dimension and any strided view of
rank <= 8 fits without a copy (reductions of more than ``MAX_REDUCED_DIMS`` unmergeable axes are
the one exception; the launcher copies those).

Kernels receive each list of sizes or strides as one tuple argument (``kernel_args``), padded to
its maximum length with size 1 / stride 0 entries, which Triton specializes away: changing a
maximum here is the whole change.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

MAX_OUTER_DIMS = 6     # kept dims besides the inner one (rank 8: axis + inner + 6)
MAX_REDUCED_DIMS = 4   # reduced dims after merging
INT32_LIMIT = 2**31 - 1


def needs_index_64(*reaches: int) -> bool:
    """The one rule for offset width: a kernel computes offsets, indices and workspace positions in
    32 bits unless one of them can pass int32. ``reaches`` are the largest values a launch can
    form, counting the lanes of a last partial tile that lie past the end (masked off, but their
    addresses are still computed)."""
    return max(reaches, default=0) > INT32_LIMIT


def last_offset(sizes: Sequence[int], strides: Sequence[int]) -> int:
    """Offset, in elements, of the last element a view addresses (0 for an empty view)."""
    if any(s == 0 for s in sizes):
        return 0
    return sum((s - 1) * st for s, st in zip(sizes, strides))


def merge_dims(dims, *, zero_strides_outermost: bool = False):
    """Drop size-1 dims, order outermost first, and merge neighbours that are one dim.

    ``dims``: ``(size, columns)`` pairs, where ``columns`` holds the dim's stride in each tensor
    (and any other per-dim weight that must stay linear, such as the ARGMAX index weight). Two
    neighbours merge when every column is contiguous across them (outer == size * inner); the
    merged dim keeps the inner one's columns. Dims are ordered by their columns, largest first;
    ``zero_strides_outermost`` puts broadcast (stride-0 in the first column) dims outermost, so the
    innermost dim is one that really runs through memory.
    """
    def key(dim):
        columns = dim[1]
        return ((columns[0] == 0) if zero_strides_outermost else False, columns)

    merged: list[tuple[int, tuple]] = []
    for size, columns in sorted(((s, tuple(c)) for s, c in dims if s != 1), key=key, reverse=True):
        if merged:
            prev_size, prev_columns = merged[-1]
            if all(p == size * c for p, c in zip(prev_columns, columns)):
                merged[-1] = (prev_size * size, columns)
                continue
        merged.append((size, columns))
    return merged


def _pad(values, length: int, fill) -> tuple:
    """Left-pad to ``length`` (outermost entries are the padding)."""
    values = tuple(values)
    if len(values) > length:  # rank <= 8 never gets here; kept as a guard
        raise ValueError(f"too many non-mergeable dimensions ({len(values)} > {length})")
    return (fill,) * (length - len(values)) + values


@dataclass(frozen=True)
class _Chains:
    """What both layouts share: the kept dims, the extent of each tensor, and *chains*: programs
    own one outer index x ``block_inner`` consecutive inner positions (``BLOCK_INNER`` independent
    scans or outputs). Strides are in elements; the outer tuples have ``MAX_OUTER_DIMS`` entries,
    outermost first."""
    inner_len: int
    outer_sizes: tuple
    x_inner_stride: int
    x_outer_strides: tuple
    out_inner_stride: int
    out_outer_strides: tuple
    x_last: int       # offset of the last element x addresses
    out_last: int     # offset of the last element out addresses

    @property
    def outer_len(self) -> int:
        return math.prod(self.outer_sizes)

    def chains(self, block_inner: int) -> int:
        return self.outer_len * -(-self.inner_len // block_inner)


# --------------------------------------------------------------------------------------------
# Scans: outer dims x axis x inner
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AxisLayout(_Chains):
    """Two tensors (``x`` read, ``out`` written) of one shape viewed as outer dims x axis x inner;
    the kernels decompose a program's outer index over the outer dims. ``init_*``: the strides of
    an ``initial`` carry-in (x's shape without the axis) over the same outer dims and inner dim,
    all 0 without one."""
    axis_len: int
    x_axis_stride: int
    out_axis_stride: int
    init_inner_stride: int = 0
    init_outer_strides: tuple = (0,) * MAX_OUTER_DIMS
    init_last: int = 0  # offset of the last element the initial addresses

    @property
    def axis_is_contiguous(self) -> bool:
        """The axis, not the inner dim, is where the input's memory runs (the "rows" case)."""
        return self.inner_len == 1 or self.x_axis_stride <= self.x_inner_stride

    def needs_index_64(self, block_axis: int, block_inner: int, workspace_len: int = 0) -> bool:
        """Masked lanes of the last tile reach one tile past the end of the axis and of the inner
        dim; ``workspace_len``: the length of the look-back's per-tile vectors."""
        return needs_index_64(
            self.x_last + block_axis * self.x_axis_stride + block_inner * self.x_inner_stride,
            self.out_last + block_axis * self.out_axis_stride + block_inner * self.out_inner_stride,
            self.init_last + block_inner * self.init_inner_stride,
            workspace_len)

    def kernel_args(self) -> tuple:
        """The scan kernels' layout arguments, in their order."""
        return (self.axis_len, self.inner_len, self.outer_sizes,
                self.x_axis_stride, self.x_inner_stride, self.x_outer_strides,
                self.out_axis_stride, self.out_inner_stride, self.out_outer_strides,
                self.init_inner_stride, self.init_outer_strides)


def axis_layout(shape: Sequence[int], x_strides: Sequence[int], out_strides: Sequence[int],
                axis: int, init_strides: Optional[Sequence[int]] = None) -> AxisLayout:
    """Canonical outer x axis x inner view of a same-shaped (x, out) pair around ``axis``.

    ``init_strides``: an ``initial`` carry-in's strides, one per dim of x but the axis (None
    without one). Its strides are a third column of the merge, so dims merge only where they are
    one dim in the initial too. The one-component case of ``axis_layouts``."""
    return axis_layouts(shape, (x_strides,), (out_strides,), axis,
                        None if init_strides is None else (init_strides,))[0]


def axis_layouts(shape: Sequence[int], x_strides: tuple, out_strides: tuple, axis: int,
                 init_strides: Optional[tuple] = None) -> tuple:
    """One ``AxisLayout`` per component of a tuple state (``x_strides[c]``, ``out_strides[c]``,
    ``init_strides[c]``: component c's tensors, all of ``shape``), all over the same outer dims x
    axis x inner: every tensor's strides are a column of one merge, so a dim merges with its
    neighbour only where it does in every tensor."""
    k = len(x_strides)
    if len(shape) == 0:
        shape, axis = (1,), 0
        x_strides, out_strides = ((1,),) * k, ((1,),) * k
        init_strides = ((),) * k if init_strides is not None else None
    others = [i for i in range(len(shape)) if i != axis]
    columns = {}
    for j, i in enumerate(others):
        columns[i] = tuple(st[i] for st in x_strides) + tuple(st[i] for st in out_strides)
        if init_strides is not None:
            columns[i] += tuple(st[j] for st in init_strides)
    dims = merge_dims([(shape[i], columns[i]) for i in others])
    width = 3 * k if init_strides is not None else 2 * k
    inner_len, inner_columns = dims[-1] if dims else (1, (0,) * width)
    outer = dims[:-1]
    axis_len = shape[axis]
    layouts = []
    for c in range(k):
        extra = {}
        if init_strides is not None:
            col = 2 * k + c
            extra = dict(init_inner_stride=inner_columns[col],
                         init_outer_strides=_pad((d[1][col] for d in outer), MAX_OUTER_DIMS, 0),
                         init_last=last_offset([shape[i] for i in others], init_strides[c]))
        layouts.append(AxisLayout(
            axis_len=axis_len, inner_len=inner_len,
            outer_sizes=_pad((d[0] for d in outer), MAX_OUTER_DIMS, 1),
            x_axis_stride=x_strides[c][axis] if axis_len > 1 else 0,
            x_inner_stride=inner_columns[c],
            x_outer_strides=_pad((d[1][c] for d in outer), MAX_OUTER_DIMS, 0),
            out_axis_stride=out_strides[c][axis] if axis_len > 1 else 0,
            out_inner_stride=inner_columns[k + c],
            out_outer_strides=_pad((d[1][k + c] for d in outer), MAX_OUTER_DIMS, 0),
            x_last=last_offset(shape, x_strides[c]),
            out_last=last_offset(shape, out_strides[c]), **extra))
    return tuple(layouts)


# --------------------------------------------------------------------------------------------
# Reductions: outer dims x inner x reduced dims
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReduceLayout(_Chains):
    """x viewed as outer dims x inner x reduced dims (and out as outer dims x inner).

    Reduced dims (``red_*``, outermost first, padded to MAX_REDUCED_DIMS) are ordered by x's
    strides, stride-0 dims outermost, so the last one is where x's memory runs; ``red_weights``
    are each dim's row-major weight over the reduced axes in their original order (the ARGMAX
    index). Kept dims: ``inner`` is the one with the smallest nonzero x stride, the others are
    ``outer``.
    """
    red_len: int
    red_dims: int
    red_sizes: tuple
    x_red_strides: tuple
    red_weights: tuple

    @property
    def reduction_is_contiguous(self) -> bool:
        """The "rows" case: x's memory runs along the reduced positions, not along the inner dim."""
        red_stride = self.x_red_strides[-1]
        return (self.inner_len == 1 or self.x_inner_stride == 0
                or (red_stride != 0 and red_stride < self.x_inner_stride))

    def needs_index_64(self, block_inner: int, reach: int, workspace_len: int = 0) -> bool:
        """``reach``: one past the largest flattened reduced position a program forms (masked
        tile lanes included), which is also the largest ARGMAX index; positions past the end
        advance the outermost reduced dim, by at most the largest reduced stride each;
        ``workspace_len``: the length of each partial-state workspace of a split."""
        past_end = max(reach - self.red_len, 0) * max(self.x_red_strides)
        return needs_index_64(
            self.x_last + past_end + block_inner * self.x_inner_stride,
            self.out_last + block_inner * self.out_inner_stride,
            reach, workspace_len)

    def kernel_args(self) -> tuple:
        """The reduce kernel's layout arguments, in its order (after the split length)."""
        return (self.inner_len, self.outer_sizes, self.red_sizes,
                self.x_inner_stride, self.x_outer_strides, self.x_red_strides, self.red_weights,
                self.out_inner_stride, self.out_outer_strides)


def reduce_layout(shape, x_strides, out_strides, axes, keep_index_order: bool):
    """Canonical view of a reduction of ``axes`` (sorted, distinct) of a tensor of ``shape``.

    ``out_strides`` holds, for every input dim, out's stride there (reduced dims: ignored).
    ``keep_index_order``: ARGMAX/ARGMIN; reduced dims merge only where the merged index stays
    row-major in the original axis order (the weight is merged like a stride). Returns None when
    the reduced dims do not fit in MAX_REDUCED_DIMS (the caller copies x to a contiguous layout,
    where they always do).
    """
    red_len = math.prod(shape[a] for a in axes)
    weights, weight = {}, 1
    for a in reversed(axes):
        weights[a] = weight
        weight *= shape[a]
    columns = (lambda a: (x_strides[a], weights[a])) if keep_index_order else \
        (lambda a: (x_strides[a],))
    reduced = merge_dims([(shape[a], columns(a)) for a in axes], zero_strides_outermost=True)
    if red_len == 0:
        reduced = [(0, (0, 1))]
    elif not reduced:
        reduced = [(1, (0, 1))]
    if len(reduced) > MAX_REDUCED_DIMS:
        return None
    # Without the index order, a merged dim's weight is never read (NEEDS_INDEX is off).
    reduced = [(size, (cols[0], cols[1] if len(cols) > 1 else 0)) for size, cols in reduced]

    kept = merge_dims([(shape[i], (x_strides[i], out_strides[i]))
                       for i in range(len(shape)) if i not in axes], zero_strides_outermost=True)
    inner_len, (x_inner, out_inner) = kept[-1] if kept else (1, (0, 0))
    outer = kept[:-1]
    kept_sizes = [d[0] for d in kept]
    return ReduceLayout(
        red_len=red_len, red_dims=len(reduced),
        red_sizes=_pad((d[0] for d in reduced), MAX_REDUCED_DIMS, 1),
        x_red_strides=_pad((d[1][0] for d in reduced), MAX_REDUCED_DIMS, 0),
        red_weights=_pad((d[1][1] for d in reduced), MAX_REDUCED_DIMS, 0),
        inner_len=inner_len, x_inner_stride=x_inner, out_inner_stride=out_inner,
        outer_sizes=_pad((d[0] for d in outer), MAX_OUTER_DIMS, 1),
        x_outer_strides=_pad((d[1][0] for d in outer), MAX_OUTER_DIMS, 0),
        out_outer_strides=_pad((d[1][1] for d in outer), MAX_OUTER_DIMS, 0),
        x_last=last_offset(shape, x_strides),
        out_last=last_offset(kept_sizes, [d[1][1] for d in kept]))
