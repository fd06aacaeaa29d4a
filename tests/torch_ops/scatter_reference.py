"""numpy oracles of torch's scatter and index reductions and of torch_scatter's forms: each
element visited one at a time into a Python list per destination, floats reduced in float64 and
integers exactly (Python ints), then wrapped to the dtype's bits as C does. Nothing here calls
tritonml or torch's scatter kernels."""
from __future__ import annotations

import math

import numpy as np
import torch


def _numpy(t: torch.Tensor) -> np.ndarray:
    if t.dtype.is_floating_point:
        return t.detach().to(torch.float64).numpy()
    return t.detach().to(torch.int64).numpy() if t.dtype != torch.uint64 else \
        np.array(t.detach().tolist(), dtype=object)


def wrap(value: int, dtype: torch.dtype) -> int:
    bits = torch.iinfo(dtype).bits
    value %= 1 << bits
    if torch.iinfo(dtype).min < 0 and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def _fold(values: list, reduce: str, dtype: torch.dtype):
    """The reduction of a non-empty list (floats in float64, integers exact then wrapped)."""
    if dtype.is_floating_point:
        a = np.array(values, dtype=np.float64)
        if reduce in ("sum", "add"):
            return float(a.sum())
        if reduce in ("prod", "mul"):
            return float(np.prod(a))
        if reduce == "mean":
            return float(a.sum() / len(a))
        if np.isnan(a).any():
            return math.nan
        return float(a.max() if reduce in ("amax", "max") else a.min())
    ints = [int(v) for v in values]
    if reduce in ("sum", "add"):
        return wrap(sum(ints), dtype)
    if reduce in ("prod", "mul"):
        return wrap(math.prod(ints), dtype)
    if reduce == "mean":
        # torch: the wrapped sum floor-divided by the count, itself taken in the dtype (an
        # int8 group of 298 counts 42)
        return wrap(sum(ints), dtype) // wrap(len(ints), dtype)
    return max(ints) if reduce in ("amax", "max") else min(ints)


def scatter_reduce(input, dim, index, src, reduce, include_self=True) -> np.ndarray:
    """torch.scatter_reduce's definition, element by element."""
    dim = dim % max(input.dim(), 1)
    inp, idx, s = _numpy(input).reshape(input.shape), _numpy(index), _numpy(src)
    if input.dim() == 0:
        inp, idx, s = inp.reshape(1), idx.reshape(1), s.reshape(1)
    groups: dict = {}
    for pos in np.ndindex(*idx.shape):
        target = list(pos)
        target[dim] = int(idx[pos])
        groups.setdefault(tuple(target), []).append(s[pos])
    out = np.array(inp, dtype=object)
    for target, values in groups.items():
        if include_self:
            values = [inp[target]] + values
        out[target] = _fold(values, reduce, input.dtype)
    return out.reshape(input.shape)


def index_reduce(input, dim, index, source, reduce, include_self=True):
    """torch.index_add / index_reduce: source's slice j reduced into input's slice index[j]
    (index_add: reduce "sum", source already times alpha)."""
    if input.dim() == 0:
        return scatter_reduce(input, 0, index.reshape(()), source, reduce, include_self)
    dim = dim % input.dim()
    view = [1] * source.dim()
    view[dim] = -1
    return scatter_reduce(input, dim, index.reshape(view).expand(source.shape), source, reduce,
                          include_self)


def truncated(numerator: int, denominator: int) -> int:
    """C's integer division: the quotient rounded toward zero."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator < 0) == (denominator < 0) else -quotient


def scatter_groups(src, index, dim, dim_size, reduce, with_arg=False, integer_mean="floor"):
    """torch_scatter's scatter over an index already broadcast to src: the output of src's shape
    with ``dim`` -> dim_size; an empty group 0 (1 for "mul"); the arg position of min/max (the
    first of ties, of NaNs the first NaN; an empty group's src.size(dim)). An integer mean is
    the wrapped sum over the count, rounded down (``scatter``'s) or, with ``integer_mean=
    "trunc"``, toward zero (``segment_coo``'s C division)."""
    s, idx = _numpy(src), _numpy(index)
    shape = list(src.shape)
    shape[dim] = dim_size
    groups: dict = {}
    for pos in np.ndindex(*idx.shape):
        target = list(pos)
        target[dim] = int(idx[pos])
        groups.setdefault(tuple(target), []).append((s[pos], pos[dim]))
    empty = 1 if reduce == "mul" else 0
    out = np.full(shape, empty, dtype=object)
    arg = np.full(shape, src.shape[dim], dtype=np.int64)
    for target, entries in groups.items():
        values = [v for v, _ in entries]
        if reduce == "mean":
            total = wrap(sum(int(v) for v in values), src.dtype) \
                if not src.dtype.is_floating_point else None
            out[target] = (float(np.sum(np.array(values, dtype=np.float64))) / len(values)
                           if total is None else truncated(total, len(values))
                           if integer_mean == "trunc" else total // len(values))
        else:
            out[target] = _fold(values, reduce, src.dtype)
        if with_arg:
            if src.dtype.is_floating_point and any(math.isnan(v) for v in values):
                arg[target] = next(p for v, p in entries if math.isnan(v))
            else:
                best = out[target]
                arg[target] = next(p for v, p in entries if v == best)
    return (out, arg) if with_arg else out


def bincount(input, weights=None, minlength=0):
    values = [int(v) for v in input.tolist()]
    n = max([minlength] + [v + 1 for v in values])
    if weights is None:
        out = [0] * n
        for v in values:
            out[v] += 1
        return np.array(out, dtype=np.int64)
    out = [0.0] * n
    for v, w in zip(values, weights.to(torch.float64).tolist()):
        out[v] += w
    return np.array(out, dtype=np.float64)
