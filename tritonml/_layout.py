"""Argument checks and shape/stride canonicalization shared by every op.

Every op views its tensors as ``outer dims x axis x inner``: the scanned (or reduced) axis, one
"inner" dimension that programs tile across (the non-axis dimension with the smallest input stride,
so loads coalesce along it), and up to ``MAX_OUTER_DIMS`` outer dimensions that programs are indexed
by. Dimensions of size 1 are dropped and dimensions that are contiguous with each other in *both*
tensors are merged first, so a contiguous tensor becomes ``outer x axis x inner`` with at most one
outer dimension, and any strided view of rank <= 8 fits without a copy.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Sequence

import numpy
import torch

from . import _backend
from ._dtypes import check_dtype

MAX_RANK = 8
MAX_OUTER_DIMS = 6
INT32_LIMIT = 2**31 - 1
# Masked-off lanes of the last tile still form addresses up to one tile past the end of an axis.
_MAX_TILE_OVERRUN = 1 << 16


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------
def _type_name(value) -> str:
    """A value's type as users would write it (``numpy.int64``, ``torch.Tensor``, ``str``)."""
    cls = type(value)
    module = cls.__module__
    return cls.__qualname__ if module == "builtins" else f"{module.split('.')[0]}.{cls.__qualname__}"


def check_readable(name: str, t) -> None:
    """``t`` is a tensor whose elements are plain reads of strided memory, so kernels can address it.

    torch also has tensors that are not: sparse and other non-strided layouts, quantized, nested,
    "zero" tensors with no storage, and meta tensors with no data. Each is refused with a TypeError
    naming ``name`` before anything runs. Tensors torch *flags* instead of copying (``is_neg()``)
    are readable: the kernels flip the sign on load or store. Complex dtypes (the only ones with a
    conjugate bit) are refused by the dtype check.
    """
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {_type_name(t)}")
    if t.is_nested:
        raise TypeError(f"{name}: nested tensors are not supported; pass a strided tensor per sequence")
    if t.layout != torch.strided:
        raise TypeError(f"{name}: tensors with layout {t.layout} are not supported; tritonml reads "
                        "strided tensors only (convert with .to_dense())")
    if t.is_quantized:
        raise TypeError(f"{name}: quantized tensors are not supported; dequantize first "
                        "(.dequantize()) or pass the integer representation (.int_repr())")
    if t.device.type == "meta":
        raise TypeError(f"{name}: meta tensors have no data to read; pass a tensor on cpu or cuda")
    if torch._is_zerotensor(t):
        raise TypeError(f"{name}: a ZeroTensor has no storage to read or write; materialize it "
                        "with torch.zeros_like first")


def check_tensor(name: str, x, allowed_dtypes=None) -> None:
    check_readable(name, x)
    if x.dim() > MAX_RANK:
        raise ValueError(f"{name}: rank {x.dim()} is not supported; tensors have rank 0 to {MAX_RANK}")
    if allowed_dtypes is None:
        check_dtype(name, x.dtype)
    else:
        check_dtype(name, x.dtype, allowed_dtypes)
    _backend.check_device(name, x)


def check_bool(name: str, value) -> bool:
    """Python and numpy booleans (torch's own bool arguments accept both); nothing else, not even
    0 and 1, so a misplaced positional argument cannot pass as a flag."""
    if isinstance(value, (bool, numpy.bool_)):
        return bool(value)
    raise TypeError(f"{name}: expected a bool, got {_type_name(value)} ({value!r})")


def normalize_axis(axis, rank: int, name: str = "axis") -> int:
    """Negative axes count from the end; a 0-d tensor accepts 0 and -1 (it acts as shape [1])."""
    # Booleans are ints to Python but never axes (torch refuses them too).
    if isinstance(axis, (bool, numpy.bool_)) or (isinstance(axis, torch.Tensor)
                                                 and axis.dtype == torch.bool):
        raise TypeError(f"{name}: expected an int, got {_type_name(axis)} ({axis!r}); booleans are "
                        "not axes")
    if not isinstance(axis, int):
        try:
            axis = operator.index(axis)
        except TypeError:
            raise TypeError(f"{name}: expected an int, got {_type_name(axis)}") from None
    effective_rank = max(rank, 1)
    if not -effective_rank <= axis < effective_rank:
        raise ValueError(f"{name}: {axis} is out of range for a tensor of rank {rank}; "
                         f"it must be in [{-effective_rank}, {effective_rank - 1}]")
    return axis % effective_rank


def byte_span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last) bytes of memory ``t`` can address (empty tensors address nothing)."""
    start = t.data_ptr()
    if t.numel() == 0:
        return start, start
    last = sum((s - 1) * st for s, st in zip(t.shape, t.stride()))
    return start, start + (last + 1) * t.element_size()


def same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
            and a.dtype == b.dtype)


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Conservative: byte ranges of two tensors intersect (views that interleave count too)."""
    if a.device != b.device or a.numel() == 0 or b.numel() == 0:
        return False
    a0, a1 = byte_span(a)
    b0, b1 = byte_span(b)
    return a0 < b1 and b0 < a1


def has_internal_overlap(t: torch.Tensor) -> bool:
    """True when two indices of ``t`` address the same element (stride 0, or strides that collide)."""
    dims = sorted((st, s) for s, st in zip(t.shape, t.stride()) if s > 1)
    reach = 1  # elements spanned by the dimensions already placed, innermost first
    for stride, size in dims:
        if stride < reach:
            return True
        reach = stride * (size - 1) + reach
    return False


def check_out(out, x: torch.Tensor, *, shape, dtype, name: str = "out", allow_alias_of=None) -> None:
    """``out`` must match ``shape``/``dtype``/device and must not partly overlap the inputs.

    ``allow_alias_of``: an input that ``out`` may be exactly (in-place execution).
    """
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor or None, got {_type_name(out)}")
    check_readable(name, out)
    if torch.is_grad_enabled() and (out.requires_grad or x.requires_grad):
        # torch's rule for every out= function: writing into a tensor cannot be differentiated.
        which = name if out.requires_grad else "x"
        raise RuntimeError(f"{name}: functions with out=... arguments don't support automatic "
                           f"differentiation, but {which} requires grad; call without {name}=, "
                           "or under torch.no_grad()")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name}: shape {tuple(out.shape)} does not match the result shape {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"{name}: dtype {out.dtype} does not match the result dtype {dtype}")
    if out.device != x.device:
        raise ValueError(f"{name}: tensor is on {out.device} but the input is on {x.device}; "
                         "tensors must be on the same device")
    if has_internal_overlap(out):
        raise ValueError(f"{name}: has internal overlap (a stride-0 or self-overlapping view); "
                         "every output element must have its own memory")
    if allow_alias_of is not None and same_view(out, allow_alias_of):
        return
    if overlaps(out, x):
        raise ValueError(f"{name}: partially overlaps the input; pass the input itself for in-place "
                         "execution or a tensor whose memory does not overlap it")


# --------------------------------------------------------------------------------------------
# Canonicalization
# --------------------------------------------------------------------------------------------
def merge_dims(sizes: Sequence[int], strides: Sequence[Sequence[int]]):
    """Drop size-1 dims, order by the first tensor's stride (outermost first), merge neighbours that
    are contiguous with each other in every tensor. Returns a list of (size, (stride per tensor))."""
    dims = [(s, tuple(st[i] for st in strides)) for i, s in enumerate(sizes) if s != 1]
    dims.sort(key=lambda d: d[1], reverse=True)
    merged: list[tuple[int, tuple[int, ...]]] = []
    for size, st in dims:
        if merged:
            prev_size, prev_st = merged[-1]
            if all(p == size * c for p, c in zip(prev_st, st)):
                merged[-1] = (prev_size * size, st)
                continue
        merged.append((size, st))
    return merged


def needs_64bit(tensors_extents: Sequence[tuple[Sequence[int], Sequence[int]]]) -> bool:
    """Whether any address offset (in elements) can pass int32, counting masked tile overrun."""
    for sizes, strides in tensors_extents:
        used = [(s, st) for s, st in zip(sizes, strides) if s > 1]
        last = sum((s - 1) * st for s, st in used)
        overrun = _MAX_TILE_OVERRUN * max((st for _, st in used), default=0)
        if last + overrun > INT32_LIMIT:
            return True
    return False


@dataclass(frozen=True)
class AxisLayout:
    """Two tensors (``x`` read, ``out`` written) of one shape viewed as outer dims x axis x inner.

    Strides are in elements. ``outer_sizes`` is padded with 1s to ``MAX_OUTER_DIMS`` (outermost
    first); the kernels decompose a program's outer index over them.
    """
    axis_len: int
    inner_len: int
    outer_sizes: tuple
    x_axis_stride: int
    x_inner_stride: int
    x_outer_strides: tuple
    out_axis_stride: int
    out_inner_stride: int
    out_outer_strides: tuple
    x_last: int       # offset of the last element x addresses
    out_last: int     # offset of the last element out addresses

    @property
    def outer_len(self) -> int:
        return math.prod(self.outer_sizes)

    def needs_index_64(self, block_axis: int, block_inner: int) -> bool:
        """Whether tiles of this shape form offsets past int32: masked lanes of the last tile
        reach up to one tile past the end of the axis and of the inner dim."""
        return (self.x_last + block_axis * self.x_axis_stride + block_inner * self.x_inner_stride
                > INT32_LIMIT
                or self.out_last + block_axis * self.out_axis_stride
                + block_inner * self.out_inner_stride > INT32_LIMIT)

    @property
    def axis_is_contiguous(self) -> bool:
        """The axis, not the inner dim, is where the input's memory runs (the "rows" case)."""
        return self.inner_len == 1 or self.x_axis_stride <= self.x_inner_stride


def axis_layout(shape: Sequence[int], x_strides: Sequence[int], out_strides: Sequence[int],
                axis: int) -> AxisLayout:
    """Canonical outer x axis x inner view of a same-shaped (x, out) pair around ``axis``."""
    if len(shape) == 0:
        shape, x_strides, out_strides, axis = (1,), (1,), (1,), 0
    others = [i for i in range(len(shape)) if i != axis]
    dims = merge_dims([shape[i] for i in others], [[x_strides[i] for i in others],
                                                     [out_strides[i] for i in others]])
    if dims:
        inner_len, (x_inner, out_inner) = dims[-1]
        outer = dims[:-1]
    else:
        inner_len, x_inner, out_inner, outer = 1, 0, 0, []
    if len(outer) > MAX_OUTER_DIMS:  # cannot happen for rank <= 8, kept as a guard
        raise ValueError(f"too many non-mergeable dimensions ({len(outer)} > {MAX_OUTER_DIMS})")
    pad = MAX_OUTER_DIMS - len(outer)
    outer_sizes = (1,) * pad + tuple(d[0] for d in outer)
    x_outer = (0,) * pad + tuple(d[1][0] for d in outer)
    out_outer = (0,) * pad + tuple(d[1][1] for d in outer)
    axis_len = shape[axis]
    x_axis, out_axis = (x_strides[axis], out_strides[axis]) if axis_len > 1 else (0, 0)
    x_last = sum((s - 1) * st for s, st in zip(shape, x_strides))
    out_last = sum((s - 1) * st for s, st in zip(shape, out_strides))
    return AxisLayout(axis_len, inner_len, outer_sizes, x_axis, x_inner, x_outer,
                      out_axis, out_inner, out_outer, x_last, out_last)
