"""Cumulative sum/product: DirectML's examples, every dtype, rank, axis, layout and output mode,
against the numpy oracle in benchmarks/scan_oracle.py."""
from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
import torch

import tritonml
from tritonml.runtime import trace as _trace
from tritonml import examples
from tritonml.core.dtypes import SUPPORTED_DTYPES
from benchmarks.scan_oracle import accumulation_allowance, scan_matches, to_numpy

OPS = {"sum": tritonml.cumulative_sum, "prod": tritonml.cumulative_product}


def random_values(shape, dtype, op, rng) -> torch.Tensor:
    """Values that exercise each dtype: signed floats for sums, |x| near 1 for float products (no
    overflow), the full range for integers (wrap-around is part of the contract)."""
    if dtype.is_floating_point:
        if op == "sum":
            a = rng.uniform(-2, 2, size=shape)
        else:
            a = rng.uniform(0.5, 1.5, size=shape) * rng.choice([-1, 1], size=shape)
        return torch.from_numpy(a).to(dtype)
    info = torch.iinfo(dtype)
    np_dtype = to_numpy(torch.empty(0, dtype=dtype)).dtype
    a = rng.integers(info.min, info.max, size=shape, dtype=np_dtype, endpoint=True)
    return torch.from_numpy(a)


def make_layout(values: torch.Tensor, layout: str, axis: int) -> torch.Tensor:
    """A view with ``values``' shape and content in the requested memory layout."""
    rank = values.dim()
    if layout == "contiguous":
        return values.clone()
    if layout == "transposed":
        order = list(reversed(range(rank)))
        return values.permute(order).contiguous().permute(order)
    if layout == "stepped":
        big = torch.zeros([2 * s + 1 for s in values.shape], dtype=values.dtype)
        view = big[tuple(slice(1, None, 2) for _ in range(rank))]
        view.copy_(values)
        return view
    if layout == "expanded":
        # stride 0 on one dim (the axis itself for rank 1): every index reads one element
        dim = (axis + 1) % rank if rank > 1 else axis
        first = values.narrow(dim, 0, 1).clone()
        return first.expand(values.shape)
    raise ValueError(layout)


def check_scan(x, axis, op, reverse, exclusive, out_mode="new"):
    x_np = to_numpy(x)  # before the call: in place overwrites x
    kwargs = dict(reverse=reverse, exclusive=exclusive)
    if out_mode == "new":
        result = OPS[op](x, axis, **kwargs)
    elif out_mode == "out":
        # a transposed, sentinel-filled destination: results land through its strides
        rank = x.dim()
        order = list(reversed(range(rank)))
        out = torch.zeros(tuple(x.shape[i] for i in order), dtype=x.dtype).permute(order) \
            if rank else torch.zeros((), dtype=x.dtype)
        result = OPS[op](x, axis, out=out, **kwargs)
        assert result is out
    else:
        result = OPS[op](x, axis, out=x, **kwargs)
        assert result is x
    assert result.shape == x.shape and result.dtype == x.dtype
    norm_axis = axis % max(x.dim(), 1)
    allowance = accumulation_allowance(x_np, norm_axis, op, reverse, exclusive, x.dtype)
    ok, msg = scan_matches(result, x_np, norm_axis, op, reverse, exclusive, allowance)
    assert ok, msg


# --------------------------------------------------------------------------------------------
# DirectML's documented examples, verbatim
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("example", examples.SCAN_EXAMPLES, ids=lambda e: f"{e.function}-{e.title}")
def test_documented_example(example):
    x = torch.tensor(example.input, dtype=torch.float32)
    result = getattr(tritonml, example.function)(x, **example.kwargs)
    assert result.dtype == torch.float32
    assert result.tolist() == example.expected


def test_reverse_exclusive_sum_on_three_elements():
    # The definition: exclusive + reverse on [a, b, c] gives [b + c, c, 0].
    x = torch.tensor([1.0, 10.0, 100.0])
    assert tritonml.cumulative_sum(x, 0, reverse=True, exclusive=True).tolist() == [110.0, 100.0, 0.0]
    assert tritonml.cumulative_product(x, 0, reverse=True, exclusive=True).tolist() == [1000.0, 100.0, 1.0]


# --------------------------------------------------------------------------------------------
# Every dtype x op x direction x exclusive, along a contiguous and a strided axis
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["sum", "prod"])
@pytest.mark.parametrize("axis", [1, -1], ids=["strided-axis", "contiguous-axis"])
def test_every_dtype(dtype, op, axis):
    rng = np.random.default_rng(zlib.crc32(f"{dtype}-{op}-{axis}".encode()))
    x = random_values((3, 37, 5), dtype, op, rng)
    for reverse, exclusive in itertools.product((False, True), repeat=2):
        check_scan(x, axis, op, reverse, exclusive)


# --------------------------------------------------------------------------------------------
# Ranks 1-8 x every axis x layouts x output modes
# --------------------------------------------------------------------------------------------
# Sizes of each dim for a given rank: all > 1 (nothing merges away), few elements at high ranks
# (the interpreter runs one program per outer index, and stepped views merge nothing).
RANK_SIZES = {r: ([3, 2, 4, 2, 3, 2][:r] if r <= 5 else [3, 2] + [2] * (r - 2)) for r in range(1, 9)}
MATRIX_DTYPES = [torch.float32, torch.int32, torch.float16, torch.uint8, torch.float64,
                 torch.int64, torch.bfloat16, torch.uint64, torch.int8, torch.uint16,
                 torch.int16, torch.uint32]
RANK_AXIS = [(rank, axis) for rank in range(1, 9) for axis in range(rank)]


@pytest.mark.parametrize("rank,axis", RANK_AXIS, ids=[f"rank{r}-axis{a}" for r, a in RANK_AXIS])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "stepped", "expanded"])
def test_rank_axis_layout_matrix(rank, axis, layout):
    case = RANK_AXIS.index((rank, axis))
    rng = np.random.default_rng(case * 7 + len(layout))
    for out_mode in ("new", "out", "inplace"):
        if layout == "expanded" and out_mode == "inplace":
            continue  # an expanded view cannot be written in place (tested as an error below)
        # Rotate dtype, op, direction and exclusive so the whole matrix is covered across cases.
        step = case * 3 + ("new", "out", "inplace").index(out_mode) + len(layout)
        dtype = MATRIX_DTYPES[step % len(MATRIX_DTYPES)]
        op = ("sum", "prod")[step % 2]
        reverse, exclusive = bool(step // 2 % 2), bool(step // 4 % 2)
        values = random_values(RANK_SIZES[rank], dtype, op, rng)
        x = make_layout(values, layout, axis)
        neg_axis = axis - rank if step % 3 == 0 else axis  # negative axes too
        check_scan(x, neg_axis, op, reverse, exclusive, out_mode)
