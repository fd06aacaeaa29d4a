"""Nested tensors with the jagged layout (``torch.nested.nested_tensor(..., layout=torch.jagged)``)
in ``tritonml.cumulative_sum`` / ``cumulative_product`` / ``reduce``.

A jagged tensor of shape (B, j, D...) is one buffer ``values()`` of shape (total, D...) and the
B + 1 ``offsets()`` where each sequence starts: exactly the segments of the segment launchers.
Served (docs/segments.md):

- scans along the ragged dim (1): a segmented scan of the values, returned with the same offsets;
  along a dim after it: the dense scan of the values (each element's row is within one sequence);
- reductions over the ragged dim alone: a segmented reduction of the values, a strided tensor
  (B, D...) ((B, 1, D...) with keepdims), as torch's own reductions over the ragged dim; ARGMAX and
  ARGMIN give the position within the sequence (an empty sequence's is 0, its length);
  over dims after it: the dense reduction of the values, returned with the same offsets.

Not served, with an error naming the argument: the batch dim (0), the ragged dim together with
others, jagged tensors with holes (``lengths()``, from ``narrow``), a ragged dim other than 1,
and ``initial``, ``out``, ``return_carry``.
"""
from __future__ import annotations

import torch

from ..core import checks as _checks, torch_compat as _torch_compat
from .segment import segment_reduce, segment_scan


def _parts(x: torch.Tensor):
    """(values, offsets) of a jagged tensor whose ragged dim is 1, or a TypeError."""
    if x.layout != torch.jagged:
        raise TypeError(f"x: nested tensors with layout {x.layout} are not supported; use "
                        "layout=torch.jagged")
    ragged = _torch_compat.jagged_ragged_dim(x)
    if ragged != 1:
        raise TypeError(f"x: the jagged tensor's ragged dim is {ragged}; only dim 1 (the layout "
                        "torch.nested.nested_tensor makes) is supported")
    if x.lengths() is not None:  # pyright: ignore[reportAttributeAccessIssue] (a NestedTensor)
        raise TypeError("x: a jagged tensor with holes (lengths(), e.g. from narrow) is not "
                        "supported; call .contiguous() first")
    return x.values(), x.offsets()  # pyright: ignore[reportAttributeAccessIssue]


def _refuse(**options) -> None:
    for name, value in options.items():
        if value is not None and value is not False:
            raise ValueError(f"{name}: not supported for jagged nested tensors")


def _rewrap(values: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    if torch.compiler.is_compiling():  # traced: Dynamo cannot trace the logging filter
        return torch.nested.nested_tensor_from_jagged(values, offsets)
    with _torch_compat.fx_tracing_notice_dropped():  # torch's notice about its own check
        return torch.nested.nested_tensor_from_jagged(values, offsets)


def scan(ops, x, axis, reverse, exclusive, initial, out, return_carry):
    """``ops`` (a ``torch_ops.scan._ScanOps``, the public function) of a jagged ``x``."""
    values, offsets = _parts(x)
    _refuse(initial=initial, out=out, return_carry=return_carry)
    axis = _checks.normalize_axis(axis, x.dim())
    if axis == 0:
        raise ValueError("axis: 0 is the jagged tensor's batch of sequences; scan along the "
                         "ragged dim (1) or a later one")
    if axis == 1:
        result = segment_scan(values, ops.combine, offsets=offsets, axis=0, reverse=reverse,
                              exclusive=exclusive)
    else:
        result = ops(values, axis - 1, reverse, exclusive, None, None)
    return _rewrap(result, offsets)


def reduce(dense_reduce, x, function, axes, keepdims, index_dtype, out):
    """``dense_reduce`` (``tritonml.reduce``) of a jagged ``x``."""
    values, offsets = _parts(x)
    _refuse(out=out)
    axes = _checks.normalize_axes(axes, x.dim())
    if 0 in axes:
        raise ValueError("axes: 0 is the jagged tensor's batch of sequences; reduce the ragged "
                         "dim (1) or later ones")
    if axes == (1,):
        result: torch.Tensor = segment_reduce(  # pyright: ignore[reportAssignmentType] (a ReduceFunction)
            values, function, offsets=offsets, axis=0, keepdims=keepdims)
        if result.dtype != torch.int64:
            return result
        # positions in the values -> positions in each sequence (an empty one's: its length, 0)
        starts = offsets[:-1].reshape([-1] + [1] * (result.dim() - 1))
        lengths = (offsets[1:] - offsets[:-1]).reshape(starts.shape)
        within = torch.where(result == values.shape[0], lengths, result - starts)
        return within.to(index_dtype)
    if 1 in axes:
        raise ValueError(f"axes: {axes} mixes the ragged dim 1 with others; reduce the ragged "
                         "dim alone, or only dims after it")
    result = dense_reduce(values, function, [a - 1 for a in axes], keepdims=keepdims,
                          index_dtype=index_dtype)
    return _rewrap(result, offsets)
