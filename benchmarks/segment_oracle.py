"""The segmented ops' independent oracle, for the tests: a loop over the segments that applies the
dense numpy references (``reduce_oracle.oracle``, ``scan_oracle.scan_reference``) to each one, and
the documented rules for empty segments and ``initial``. It never calls tritonml.
"""
from __future__ import annotations

import numpy as np
import torch

from benchmarks import reduce_oracle, scan_oracle
from tritonml.core.dtypes import FLOAT_DTYPES

INITIAL_FUNCTIONS = ("SUM", "MULTIPLY", "MAX", "MIN", "AVERAGE")


def random_offsets(axis_len: int, n: int, seed: int = 0, empty_share: float = 0.2) -> list:
    """n + 1 boundaries from 0 to ``axis_len``, some segments empty (random cuts, repeated)."""
    rng = np.random.default_rng(seed)
    cuts = sorted(rng.integers(0, axis_len + 1, max(n - 1, 0)).tolist())
    for i in range(len(cuts)):
        if rng.random() < empty_share and i:
            cuts[i] = cuts[i - 1]
    return [0, *cuts, axis_len]


def _empty_value(x: torch.Tensor, function: str, axis: int):
    """An empty segment's value: the function's value of nothing, numpy's reduction of an empty
    slice (SUM 0, MULTIPLY 1, MAX -inf or the type's minimum, AVERAGE 0/0 = nan, LOG_SUM log 0
    = -inf, ...); an index function's is one past the axis (x.shape[axis])."""
    if function in reduce_oracle.INDEX_FUNCTIONS:
        return x.shape[axis]
    nothing = torch.empty([0 if a == axis else 1 for a in range(x.dim())], dtype=x.dtype)
    return reduce_oracle.oracle(nothing, function, (axis,), True).reshape(-1)[0]


def segment_reduce_expected(x: torch.Tensor, function: str, offsets, axis: int,
                            initial=None) -> torch.Tensor:
    """The segmented reduction in float64 / 64-bit integers (wrapping), cast to the result dtype
    as the dense oracle casts (ARGMAX/ARGMIN: int64 positions along ``axis``)."""
    function = function.upper()
    axis = axis % x.dim()
    index = function in reduce_oracle.INDEX_FUNCTIONS
    if index:
        wide = np.int64
    elif x.dtype in FLOAT_DTYPES:
        wide = np.float64
    else:
        wide = np.uint64 if torch.iinfo(x.dtype).min == 0 else np.int64
    parts = []
    with np.errstate(all="ignore"):
        for lo, hi in zip(offsets[:-1], offsets[1:]):
            if hi == lo:
                shape = list(x.shape)
                shape[axis] = 1
                value = initial if initial is not None else _empty_value(x, function, axis)
                parts.append(np.full(shape, value, dtype=wide))
                continue
            part = x.narrow(axis, lo, hi - lo).resolve_neg()
            r = reduce_oracle.oracle(part, function, (axis,), True)
            if index:
                r = r + lo
            if initial is not None:
                r = _with_initial(function, r, reduce_oracle.oracle(part, "SUM", (axis,), True),
                                  wide(initial), hi - lo)
            parts.append(np.asarray(r).astype(wide))
    shape = list(x.shape)
    shape[axis] = len(offsets) - 1
    out_dtype = torch.int64 if index else x.dtype
    if not parts:
        return torch.empty(shape, dtype=out_dtype)
    stacked = np.concatenate(parts, axis=axis)
    if index:
        return torch.from_numpy(stacked)
    if x.dtype in FLOAT_DTYPES:
        return torch.from_numpy(stacked).to(x.dtype)
    return torch.from_numpy(stacked.astype(torch.empty((), dtype=x.dtype).numpy().dtype))


def _with_initial(function, r, total, initial, count):
    if function == "SUM":
        return r + initial
    if function == "MULTIPLY":
        return r * initial
    if function == "MAX":
        return np.maximum(r, initial)
    if function == "MIN":
        return np.minimum(r, initial)
    return (total + initial) / np.float64(count)     # AVERAGE


def segment_scan_reference(x: torch.Tensor, op: str, offsets, axis: int, reverse: bool,
                           exclusive: bool) -> np.ndarray:
    """Each segment's running sum/product (``scan_oracle.scan_reference``), unrounded (float64)
    or wrapped to x's integer dtype."""
    a = scan_oracle.to_numpy(x.resolve_neg())
    axis = axis % x.dim()
    int_dtype = None if x.dtype in FLOAT_DTYPES else a.dtype
    out = np.zeros(a.shape, dtype=np.float64 if int_dtype is None else int_dtype)
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        if hi > lo:
            index = [slice(None)] * a.ndim
            index[axis] = slice(lo, hi)
            out[tuple(index)] = scan_oracle.scan_reference(a[tuple(index)], axis, op, reverse,
                                                           exclusive, int_dtype=int_dtype)
    return out
