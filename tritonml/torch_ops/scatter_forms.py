"""torch_scatter's forms, deterministic: ``tritonml.scatter``, ``segment_coo`` and the
``scatter_max`` / ``scatter_min`` / ``segment_max_coo`` / ``segment_min_coo`` that also give each
group's arg position, with torch_scatter's signatures (``out=`` left out) and semantics
(docs/scatter.md): the output has src's shape with ``dim`` replaced by ``dim_size``, an empty
group holds 0 (1 for "mul"), and its arg position is src.size(dim).

They group src by index exactly as ``tritonml.scatter_reduce`` does
(tritonml/torch_ops/scatter_groups.py); ``segment_coo``'s index is sorted already, so it is
never sorted again, and where its index is one line and src's rows one value wide, the segment
kernel reads it in the same pass as src (tritonml/torch_ops/scatter_one_pass.py).
"""
from __future__ import annotations

from typing import Optional, Tuple

import torch

from ..core import checks as _checks
from .scatter import (check_index, check_reduce, check_values_tensor, divide, index_facts,
                      index_values, read_index)
from .scatter_groups import Grouping, group, reduce_groups
from .scatter_one_pass import UNSORTED, reduce_sorted

# torch_scatter's reduce names -> the segment reduction of the groups
REDUCE_FUNCTIONS = {"sum": "SUM", "add": "SUM", "mean": "SUM", "mul": "MULTIPLY", "min": "MIN",
                    "max": "MAX"}
_ARG_FUNCTIONS = {"min": "ARGMIN", "max": "ARGMAX"}
# torch_scatter's segment_coo takes no "mul" (its scatter does)
SEGMENT_REDUCES = ("sum", "add", "mean", "min", "max")


def _broadcast(index: torch.Tensor, src: torch.Tensor, dim: int) -> torch.Tensor:
    """torch_scatter's broadcast: a 1-D index lies along ``dim``; missing trailing dims are
    added; then it expands to src's shape (stride 0 where it was broadcast)."""
    if index.dim() == 1:
        index = index.reshape([1] * dim + [-1])
    if index.dim() > src.dim():
        raise ValueError(f"index: has {index.dim()} dims, more than src's {src.dim()}")
    index = index.reshape(*index.shape, *([1] * (src.dim() - index.dim())))
    try:
        return index.expand(src.shape)
    except RuntimeError:
        raise ValueError(f"index: shape {tuple(index.shape)} does not broadcast to src's "
                         f"{tuple(src.shape)} along dim {dim}") from None


def _check_dim_size(dim_size) -> None:
    if dim_size is not None and (isinstance(dim_size, bool) or not isinstance(dim_size, int)
                                 or dim_size < 0):
        raise ValueError(f"dim_size: must be a non-negative int or None, got {dim_size!r}")


def _check_args(src, index, dim_size) -> None:
    check_values_tensor("src", src)
    check_index("index", index, src.device)
    _check_dim_size(dim_size)
    if src.dim() == 0:
        raise ValueError("src: a 0-d tensor has no dim to scatter along")


def _one_pass(src, index, dim: int, dim_size, functions: tuple) -> Optional[list]:
    """``reduce_sorted``'s results for a sorted index (``segment_coo``'s), or None where the
    two-pass path serves."""
    _check_args(src, index, dim_size)
    return reduce_sorted(src, _broadcast(index, src, dim), dim, dim_size, functions)


def _grouped(src, index, dim: int, dim_size, *, sorted_promise: bool) -> Grouping:
    """src grouped by index into ``dim_size`` groups (None: index.max() + 1, 0 for an empty
    index), the index's values checked and its order read in one pass in eager code."""
    _check_args(src, index, dim_size)
    spread = _broadcast(index, src, dim)   # (every shape rule before the index is read)
    along = index.dim() - 1 if sorted_promise or index.dim() <= dim else dim
    plain = index_values(index) if index.numel() else None
    if dim_size is None and plain is not None:
        # the one read of the index gives the number of groups too
        lo, hi, descents, _ = read_index(plain, along)
        n = hi + 1
        if lo < 0:
            raise ValueError(f"index: every value must be in [0, {n}), found {lo}")
        index_sorted, bounds = descents == 0, None
    else:
        n = dim_size if dim_size is not None else (int(index.max()) + 1 if index.numel() else 0)
        index_sorted, bounds = index_facts(index, n, sorted_along=along)
    if sorted_promise and not index_sorted and plain is not None:
        raise ValueError(UNSORTED)
    return group(src, dim, spread, n, index_sorted=index_sorted or sorted_promise, bounds=bounds)


def _finish(reduce: str, reduced: torch.Tensor, grouping: Grouping, *,
            sorted_promise: bool) -> torch.Tensor:
    """torch_scatter's value for each group from the segment reduction (an empty group's
    min/max 0 is the kernel's, ``EMPTY``). An integer mean, the wrapped sum over the count,
    rounds as each form of torch_scatter does: ``scatter``'s floor division by the count in the
    dtype (a sum of ones, wrapping), taken as 1 where that is below 1; ``segment_coo``'s C
    division, toward zero, by the true count (0 taken as 1)."""
    if reduce != "mean" or reduced.dtype.is_floating_point:
        return reduced
    if not sorted_promise:
        return divide(reduced, grouping.counts(), count_below_one=True)
    # (in int64, where any count and every narrower integer's sum fit)
    count = grouping.counts().clamp(min=1)
    return torch.div(reduced.to(torch.int64), count, rounding_mode="trunc").to(reduced.dtype)


# torch_scatter's result of an empty group where the segment reduction's own differs: min and
# max give 0, written by the kernel (not folded into the other groups)
EMPTY = {"min": 0, "max": 0}


def _reduce(src, index, dim, dim_size, reduce, *, sorted_promise: bool) -> torch.Tensor:
    reduce = check_reduce(reduce, SEGMENT_REDUCES if sorted_promise else tuple(REDUCE_FUNCTIONS))
    # (an integer mean divides by the groups' counts, which the boundaries give)
    if sorted_promise and not (reduce == "mean" and not src.dtype.is_floating_point):
        function = (("AVERAGE", 0.0, None) if reduce == "mean"
                    else (REDUCE_FUNCTIONS[reduce], None, EMPTY.get(reduce)))
        done = _one_pass(src, index, dim, dim_size, (function,))
        if done is not None:
            return done[0]
    grouping = _grouped(src, index, dim, dim_size, sorted_promise=sorted_promise)
    if reduce == "mean" and src.dtype.is_floating_point:
        # each group's sum over its count in the kernel, an empty group's 0 its initial
        return grouping.result(reduce_groups(grouping.groups, "AVERAGE", 0.0))
    reduced = grouping.result(reduce_groups(grouping.groups, REDUCE_FUNCTIONS[reduce],
                                            empty=EMPTY.get(reduce)))
    return _finish(reduce, reduced, grouping, sorted_promise=sorted_promise)


def _with_arg(src, index, dim, dim_size, extreme: str, *, sorted_promise: bool
              ) -> Tuple[torch.Tensor, torch.Tensor]:
    if sorted_promise:
        done = _one_pass(src, index, dim, dim_size,
                         ((REDUCE_FUNCTIONS[extreme], None, EMPTY[extreme]),
                          (_ARG_FUNCTIONS[extreme], None, None)))
        if done is not None:   # (a shared index's positions in group order are src's)
            return done[0], done[1]
    grouping = _grouped(src, index, dim, dim_size, sorted_promise=sorted_promise)
    values = grouping.result(reduce_groups(grouping.groups, REDUCE_FUNCTIONS[extreme],
                                           empty=EMPTY[extreme]))
    positions = grouping.result(reduce_groups(grouping.groups.detached(),
                                              _ARG_FUNCTIONS[extreme]))
    return values, grouping.source_positions(positions)


def _dim(dim, src) -> int:
    if not torch.compiler.is_compiling():
        _checks.check_readable("src", src)
    return _checks.normalize_axis(dim, max(src.dim(), 1), "dim")


def scatter(src: torch.Tensor, index: torch.Tensor, dim: int = -1, *,
            dim_size: Optional[int] = None, reduce: str = "sum") -> torch.Tensor:
    """torch_scatter.scatter, deterministic: reduce ``src`` along ``dim`` into the groups
    ``index`` names.

    Args:
        src: The values (rank 1 to 8, any dtype tritonml supports).
        index: int64 (or int32) group of each element, broadcast to src as torch_scatter does
            (a 1-D index lies along ``dim``); values in [0, dim_size).
        dim: The dim reduced; negative counts from the end.
        dim_size: The number of groups; None: index.max() + 1 (a device synchronization).
        reduce: "sum" (or "add"), "mean", "mul", "min" or "max".

    Returns:
        src's shape with ``dim`` replaced by dim_size, src's dtype: an empty group holds 0 (1 for
        "mul"); an integer mean rounds down.

    Example:
        >>> import torch, tritonml
        >>> src = torch.tensor([[1., 2.], [3., 4.], [5., 6.]])
        >>> tritonml.scatter(src, torch.tensor([1, 0, 1]), dim=0, reduce="mean")
        tensor([[3., 4.],
                [3., 4.]])
    """
    return _reduce(src, index, _dim(dim, src), dim_size, reduce, sorted_promise=False)


def scatter_max(src: torch.Tensor, index: torch.Tensor, dim: int = -1, *,
                dim_size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter.scatter_max, deterministic: each group's maximum and the position along
    ``dim`` of src where it is (the first of ties, of NaNs the first; an empty group's: 0 and
    src.size(dim)).

    Example:
        >>> import torch, tritonml
        >>> tritonml.scatter_max(torch.tensor([5., 1., 7., 7.]), torch.tensor([0, 0, 1, 1]),
        ...                      dim_size=3)
        (tensor([5., 7., 0.]), tensor([0, 2, 4]))
    """
    return _with_arg(src, index, _dim(dim, src), dim_size, "max", sorted_promise=False)


def scatter_min(src: torch.Tensor, index: torch.Tensor, dim: int = -1, *,
                dim_size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter.scatter_min, deterministic: each group's minimum and its position along
    ``dim`` of src, as ``scatter_max``.

    Example:
        >>> import torch, tritonml
        >>> tritonml.scatter_min(torch.tensor([[5., 1.], [2., 1.]]), torch.tensor([1, 1]),
        ...                      dim=0, dim_size=2)
        (tensor([[0., 0.],
                [2., 1.]]), tensor([[2, 2],
                [1, 0]]))
    """
    return _with_arg(src, index, _dim(dim, src), dim_size, "min", sorted_promise=False)


def _coo_dim(src, index) -> int:
    if not torch.compiler.is_compiling():
        _checks.check_readable("index", index)
    if index.dim() == 0:
        raise ValueError("index: must have at least one dim")
    return index.dim() - 1


def segment_coo(src: torch.Tensor, index: torch.Tensor, *, dim_size: Optional[int] = None,
                reduce: str = "sum") -> torch.Tensor:
    """torch_scatter.segment_coo, deterministic: ``scatter`` along ``index.dim() - 1`` with an
    index already sorted there, so nothing is sorted (eager code checks that it is: one pass
    over the index). ``reduce``: "sum" (or "add"), "mean", "min" or "max", torch_scatter's; an
    integer mean rounds toward zero, as torch_scatter's segment_coo (``scatter`` rounds down).

    Example:
        >>> import torch, tritonml
        >>> tritonml.segment_coo(torch.tensor([1., 2., 3., 4.]), torch.tensor([0, 0, 2, 2]))
        tensor([3., 0., 7.])
    """
    return _reduce(src, index, _coo_dim(src, index), dim_size, reduce, sorted_promise=True)


def segment_max_coo(src: torch.Tensor, index: torch.Tensor, *,
                    dim_size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter.segment_max_coo, deterministic: ``scatter_max`` along ``index.dim() - 1``
    with a sorted index.

    Example:
        >>> import torch, tritonml
        >>> tritonml.segment_max_coo(torch.tensor([3., 9., 4.]), torch.tensor([0, 0, 1]))
        (tensor([9., 4.]), tensor([1, 2]))
    """
    return _with_arg(src, index, _coo_dim(src, index), dim_size, "max", sorted_promise=True)


def segment_min_coo(src: torch.Tensor, index: torch.Tensor, *,
                    dim_size: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """torch_scatter.segment_min_coo, deterministic: ``scatter_min`` along ``index.dim() - 1``
    with a sorted index.

    Example:
        >>> import torch, tritonml
        >>> tritonml.segment_min_coo(torch.tensor([3., 9., 4.]), torch.tensor([0, 0, 2]))
        (tensor([3., 0., 4.]), tensor([0, 3, 2]))
    """
    return _with_arg(src, index, _coo_dim(src, index), dim_size, "min", sorted_promise=True)


__all__ = ["scatter", "scatter_max", "scatter_min", "segment_coo", "segment_max_coo",
           "segment_min_coo"]
