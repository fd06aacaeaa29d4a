"""Argument checks shared by every op: what may enter a kernel, and how the parameters that say
where (axis, axes, flags, ``out``) are read. Every check raises before anything is launched or
written, with a message that starts with the parameter's name."""
from __future__ import annotations

import math
import operator
from collections.abc import Sequence

import numpy
import torch

from . import backend as _backend, torch_compat as _torch_compat
from .dtypes import check_dtype
from .layout import last_offset

MAX_RANK = 8


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
    if _torch_compat.is_zerotensor(t):
        raise TypeError(f"{name}: a ZeroTensor has no storage to read or write; materialize it "
                        "with torch.zeros_like first")


def check_tensor(name: str, x, allowed_dtypes=None, *, readable_checked: bool = False) -> None:
    """``x``: a readable tensor of a supported rank, dtype and device (``readable_checked``: the
    caller has run ``check_readable`` on it already)."""
    if not readable_checked:
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


def normalize_axes(axes, rank: int) -> tuple:
    """Sorted, non-negative, distinct axes; None means every axis (a 0-d tensor acts as shape [1])."""
    effective_rank = max(rank, 1)
    if axes is None:
        return tuple(range(effective_rank))
    if isinstance(axes, Sequence) and not isinstance(axes, (str, bytes)):
        items = list(axes)
        if not items:
            raise ValueError("axes: an empty sequence is ambiguous (numpy reduces no axis, torch and "
                             "ONNX every axis); pass None to reduce every axis")
    else:
        items = [axes]
    seen = []
    for item in items:
        axis = normalize_axis(item, rank, name="axes")
        if axis in seen:
            raise ValueError(f"axes: axis {item} is repeated (as axis {axis}) in {tuple(items)}; "
                             "each axis may be reduced once")
        seen.append(axis)
    return tuple(sorted(seen))


def span_bytes(t: torch.Tensor) -> int:
    """Bytes from ``t``'s first element to the end of its last (0 for an empty tensor)."""
    if t.numel() == 0:
        return 0
    return (last_offset(t.shape, t.stride()) + 1) * t.element_size()


def byte_span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last) bytes of memory ``t`` can address (empty tensors address nothing)."""
    start = t.data_ptr()
    return start, start + span_bytes(t)


def same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
            and a.dtype == b.dtype)


def overlaps(a: torch.Tensor, b: torch.Tensor, spans=None) -> bool:
    """Conservative: byte ranges of two tensors intersect (views that interleave count too).
    ``spans``: ``(span_bytes(a), span_bytes(b))`` when the caller knows them already."""
    if a.device != b.device:
        return False
    a_bytes, b_bytes = spans if spans is not None else (span_bytes(a), span_bytes(b))
    if a_bytes == 0 or b_bytes == 0:
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b_bytes and b0 < a0 + a_bytes


# Interleaved strides (a stride below what the smaller strides' dimensions span) may still give
# every index its own element ([2, 3] at strides (3, 2): 0, 2, 4, 3, 5, 7); up to this many
# elements that is decided exactly by listing the addresses; beyond it such a layout counts as
# overlapping, so some layouts without a collision are refused, and none with one passes.
EXACT_OVERLAP_ELEMENTS = 1 << 16


def first_overlapping_dim(sizes: Sequence[int], strides: Sequence[int]) -> int | None:
    """The first dimension (by stride, smallest first) whose elements land on memory that other
    indices address too, or None when every index has its own element. Dimensions nested by
    their strides are decided by one walk; interleaved ones by listing every address
    (``EXACT_OVERLAP_ELEMENTS`` at most; beyond it the interleaved dimension is named)."""
    dims = sorted((st, s, i) for i, (s, st) in enumerate(zip(sizes, strides)) if s > 1)
    reach = 1  # elements spanned by the dimensions already placed, innermost first
    for stride, size, i in dims:
        if stride < reach:
            if stride == 0 or math.prod(int(n) for n in sizes) > EXACT_OVERLAP_ELEMENTS:
                return i
            return i if _addresses_collide(sizes, strides) else None
        reach = stride * (size - 1) + reach
    return None


def _addresses_collide(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    addresses = numpy.zeros((), dtype=numpy.int64)
    for size, stride in zip(sizes, strides):
        addresses = (addresses[..., None]
                     + numpy.arange(int(size), dtype=numpy.int64) * int(stride))
    flat = addresses.reshape(-1)
    return numpy.unique(flat).size != flat.size


def has_internal_overlap(t: torch.Tensor) -> bool:
    """True when two indices of ``t`` address the same element (stride 0, or strides that
    collide; ``first_overlapping_dim``)."""
    return first_overlapping_dim(t.shape, t.stride()) is not None


def check_out_grad(out: torch.Tensor, x: torch.Tensor, name: str = "out") -> None:
    """torch's rule for every out= function: writing into a tensor cannot be differentiated."""
    if torch.is_grad_enabled() and (out.requires_grad or x.requires_grad):
        which = name if out.requires_grad else "x"
        raise RuntimeError(f"{name}: functions with out=... arguments don't support automatic "
                           f"differentiation, but {which} requires grad; call without {name}=, "
                           "or under torch.no_grad()")


def check_out(out, x: torch.Tensor, *, shape, dtype, name: str = "out", allow_alias_of=None,
              readable_checked: bool = False) -> None:
    """``out`` must match ``shape``/``dtype``/device and must not partly overlap the inputs
    (``readable_checked``: the caller has run ``check_readable`` and ``check_out_grad`` on it).

    ``allow_alias_of``: an input that ``out`` may be exactly (in-place execution).
    """
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor or None, got {_type_name(out)}")
    if not readable_checked:
        check_readable(name, out)
        check_out_grad(out, x, name)
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
    check_out_overlap(out, x, name=name, allow_alias_of=allow_alias_of)


def check_out_overlap(out: torch.Tensor, x: torch.Tensor, *, name: str = "out",
                      allow_alias_of=None, spans=None) -> None:
    """The part of ``check_out`` that reads data pointers (the rest reads metadata only, which a
    launcher's plan remembers): ``out`` is ``allow_alias_of`` exactly, or shares no memory with x.
    ``spans``: ``(span_bytes(out), span_bytes(x))``, as a plan remembers them."""
    if allow_alias_of is not None and same_view(out, allow_alias_of):
        return
    if overlaps(out, x, spans):
        raise ValueError(f"{name}: partially overlaps the input; pass the input itself for in-place "
                         "execution or a tensor whose memory does not overlap it")
