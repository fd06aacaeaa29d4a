"""The shape of a reduction's result, written once for every place that needs it: the launchers,
the torch ops' fake kernels and autograd, routing, the tuner, tritonml.distributed and the
DirectML descriptor checks.

Plain Python (no torch): a reduction keeps the rank with size 1 on every reduced axis
(``keepdims``, DirectML's output) or drops the reduced axes. A 0-d input acts as shape [1] and its
reduction is 0-d either way.
"""
from __future__ import annotations

from typing import Iterable, Optional, Sequence


def reduced_axes(rank: int, axes: Optional[Iterable[int]]) -> frozenset:
    """``axes`` as a set of non-negative axis indices of a tensor of rank ``rank``: None means
    every axis, a negative axis counts from the end. Axes outside [-rank, rank) name no axis and
    are left out (validating them is the caller's job, with its own message:
    ``core.checks.normalize_axes`` for tensors, the DirectML descriptor checks for descriptors)."""
    if axes is None:
        return frozenset(range(rank))
    return frozenset(a + rank if a < 0 else a for a in axes if -rank <= a < rank)


def reduced_shape(shape: Sequence[int], axes: Optional[Iterable[int]],
                  keepdims: bool = True) -> tuple:
    """The shape of the reduction of a tensor of shape ``shape`` over ``axes`` (as
    ``reduced_axes`` reads them): size 1 on the reduced axes with ``keepdims``, the reduced axes
    dropped without. ``()`` for a 0-d ``shape``."""
    shape = tuple(shape)
    reduced = reduced_axes(len(shape), axes)
    if keepdims:
        return tuple(1 if i in reduced else size for i, size in enumerate(shape))
    return tuple(size for i, size in enumerate(shape) if i not in reduced)


def strides_over_input(result_strides: Sequence[int], rank: int,
                       axes: Optional[Iterable[int]], keepdims: bool) -> tuple:
    """The result's strides laid over the dims of an input of rank ``rank`` (0-d acting as [1]),
    as the reduce layout reads them: a kept result (or a 0-d input's) has one stride per input dim
    already; a result without ``keepdims`` gets stride 0 on each dropped (reduced) dim. Empty
    ``result_strides`` (a 0-d result) count as ``(1,)``."""
    strides = iter(tuple(result_strides) or (1,))
    if keepdims or rank == 0:
        return tuple(next(strides) for _ in range(max(rank, 1)))
    reduced = reduced_axes(rank, axes)
    return tuple(0 if i in reduced else next(strides) for i in range(rank))
