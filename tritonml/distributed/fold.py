"""Each reduce function's part in ``tritonml.distributed.reduce``: the partial state a rank
computes from its shard (one read with tritonml's reduce kernel) and how the ranks' states fold,
in shard order, into the result."""
from __future__ import annotations

import math
from typing import cast

import torch

from ..core.dtypes import is_float
from ..core.shapes import reduced_shape
from ..records.builtin_reductions import Fold, record_of
from ..torch_ops.reduce import reduce as _reduce


def _local_argument(x, function: str, axes, sax):
    """ARGMAX/ARGMIN of the shard: (value, coordinates) with the rank kept; ``coordinates`` stacks
    the shard-local coordinate along each reduced axis of the chosen element. An empty shard
    gives placeholders that the fold skips (it knows the lengths)."""
    keep = reduced_shape(x.shape, axes)
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


def _local_states(x, fn, red, sax) -> tuple:
    """One read of the shard with tritonml's reduce kernel: the partial state the fold needs (the
    function's record says which, ``ReduceRecord.fold``)."""
    fold = cast(Fold, record_of(fn).fold)  # every ReduceRecord has one
    if fold.how == "argument":
        return _local_argument(x, fn.name, red, sax)
    if fold.how == "mean":
        # the shard's mean, re-weighted by its count in the fold: unlike a rounded partial sum it
        # cannot overflow a half type where the global result does not
        return (_reduce(x, "AVERAGE", red, keepdims=True),)
    return (_reduce(x, fn, red, keepdims=True),)


def _fold(op, fn, states, lengths, other, red, sax, shard_shape, index_dtype):
    """The ranks' partial states, in shard order, folded into the result (rank kept)."""
    counts = [n * other for n in lengths]
    record = record_of(fn)
    fold = cast(Fold, record.fold)  # every ReduceRecord has one
    if fold.how == "argument":
        return _fold_argument(op, fn, states, lengths, other, red, sax, shard_shape, index_dtype)
    if fold.how == "mean":
        means = [s[0] for s, n in zip(states, counts) if n]  # an empty shard's mean is 0/0
        total = sum(counts)
        if not means:   # no element on any rank: the result over nothing ("mean" sets it)
            return torch.full_like(states[0][0], cast(float, fold.empty))
        # sum(n * mean) is the global sum; a mean (``averages``) weights each by its share n / N
        weights = [n / total if record.averages else float(n) for n in counts if n]
        weighted = torch.stack([m.to(torch.float64) * w for m, w in zip(means, weights)])
        folded = _reduce(weighted, "SUM", 0, keepdims=False)
        if fold.then is not None:
            folded = fold.then(folded)
        return folded.to(means[0].dtype)
    stacked = torch.stack([s[0] for s in states])
    return _reduce(stacked, cast(str, fold.by), 0, keepdims=False)  # "stack" names its function


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
    best = _reduce(stacked_values, cast(str, cast(Fold, record_of(fn).fold).by), 0, keepdims=True)
    # candidates: the ranks holding the best value (NaN: the ranks holding a NaN); the smallest
    # global index among them is the first occurrence over the whole tensor
    candidate = (stacked_values == best) | (stacked_values.isnan() & best.isnan()) \
        if is_float(stacked_values.dtype) else stacked_values == best
    never = torch.iinfo(torch.int64).max
    masked = torch.where(candidate, torch.stack(indices), torch.full_like(indices[0], never))
    return _reduce(masked, "MIN", 0, keepdims=False).to(index_dtype)
