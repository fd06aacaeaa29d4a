"""torch_scatter's forms (tritonml.scatter, segment_coo, scatter_max/min, segment_max/min_coo)
against a numpy oracle of torch_scatter's documented semantics
(tests/torch_ops/scatter_reference.py): broadcasting of the index, dim_size, empty groups
(0, 1 for "mul"), the arg position of min/max (first of ties; an empty group's src.size(dim))."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tritonml
from tests.torch_ops import scatter_reference as reference
from tests.torch_ops.test_scatter import assert_matches, values

FORMS_REDUCES = ("sum", "add", "mean", "mul", "min", "max")


def broadcast(index, src, dim):
    """torch_scatter's broadcast rule, spelled out for the oracle."""
    dim = dim % src.dim()
    if index.dim() == 1:
        index = index.reshape([1] * dim + [-1])
    index = index.reshape(*index.shape, *([1] * (src.dim() - index.dim())))
    return index.expand(src.shape)


# (src shape, dim, index shape (None: 1-D along dim), dim_size)
SHAPES = {
    "gnn rows": ((13, 4), 0, None, 6),
    "last dim": ((3, 9), -1, None, 5),
    "middle": ((2, 8, 3), 1, None, 4),
    "per row": ((3, 8), 1, (3, 8), 5),          # an index of src's shape
    "no dim_size": ((10,), 0, None, None),
}


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduce", FORMS_REDUCES)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.float64, torch.int32,
                                   torch.int8), ids=str)
@pytest.mark.parametrize("sort", (False, True))
def test_scatter_and_segment_coo(shape, reduce, dtype, sort):
    src_shape, dim, index_shape, dim_size = SHAPES[shape]
    d = dim % len(src_shape)
    g = torch.Generator().manual_seed(3)
    groups = dim_size or 7
    index = torch.randint(0, groups, index_shape or (src_shape[d],), generator=g)
    if sort:
        index = index.sort(dim=-1).values
    src = values(src_shape, dtype, 4, "prod" if reduce == "mul" else "sum")
    spread = broadcast(index, src, dim)
    n = dim_size if dim_size is not None else int(index.max()) + 1
    expected = reference.scatter_groups(src, spread, d, n, reduce)
    assert_matches(tritonml.scatter(src, index, dim, dim_size=dim_size, reduce=reduce),
                   expected, dtype)
    if sort and reduce != "mul":
        expected = reference.scatter_groups(src, spread, d, n, reduce, integer_mean="trunc")
        assert_matches(tritonml.segment_coo(src, coo_index(index, d), dim_size=dim_size,
                                            reduce=reduce), expected, dtype)


def coo_index(index, dim):
    """The index as segment_coo takes it: its last dim is the one reduced."""
    return index.reshape([1] * dim + [-1]) if index.dim() == 1 else index


@pytest.mark.parametrize("extreme", ("max", "min"))
@pytest.mark.parametrize("shape", SHAPES)
def test_arg_positions(extreme, shape):
    src_shape, dim, index_shape, dim_size = SHAPES[shape]
    d = dim % len(src_shape)
    g = torch.Generator().manual_seed(5)
    index = torch.randint(0, dim_size or 7, index_shape or (src_shape[d],), generator=g)
    src = torch.randint(0, 3, src_shape, generator=g).to(torch.float32)   # many ties
    src.view(-1)[1] = math.nan
    spread = broadcast(index, src, dim)
    n = dim_size if dim_size is not None else int(index.max()) + 1
    out, arg = reference.scatter_groups(src, spread, d, n, extreme, with_arg=True)
    form = tritonml.scatter_max if extreme == "max" else tritonml.scatter_min
    got, got_arg = form(src, index, dim, dim_size=dim_size)
    assert_matches(got, out, torch.float32)
    assert got_arg.dtype == torch.int64 and got_arg.tolist() == arg.tolist()
    ordered = index.sort(dim=-1, stable=True)
    src_sorted = src.gather(d, ordered.indices) if index.dim() > 1 \
        else src.index_select(d, ordered.indices)
    spread = broadcast(ordered.values, src, dim)
    out, arg = reference.scatter_groups(src_sorted, spread, d, n, extreme, with_arg=True)
    coo = tritonml.segment_max_coo if extreme == "max" else tritonml.segment_min_coo
    got, got_arg = coo(src_sorted, coo_index(ordered.values, d), dim_size=dim_size)
    assert_matches(got, out, torch.float32)
    assert got_arg.tolist() == arg.tolist()


@pytest.mark.parametrize("dtype", (torch.int8, torch.int32, torch.int64), ids=str)
def test_an_integer_mean_rounds_as_each_form_of_torch_scatter(dtype):
    # torch_scatter's scatter floors (its scatter_mean's div_ with rounding_mode="floor"); its
    # segment_coo divides in C, toward zero: negative means differ. A shared index and one per
    # row, groups of mixed signs, an empty one, and int8 sums that wrap.
    g = torch.Generator().manual_seed(9)
    info = torch.iinfo(dtype)
    lo, hi = (info.min, info.max) if info.bits == 8 else (-10**6, 10**6)
    src = torch.randint(lo, hi, (3, 40), generator=g, dtype=torch.int64).to(dtype)
    shared = torch.randint(0, 7, (40,), generator=g).sort().values
    shared[shared == 3] = 4                                   # group 3 empty
    per_row = torch.randint(0, 7, (3, 40), generator=g).sort(dim=-1).values
    for index in (shared.reshape(1, -1), per_row):
        spread = index.expand(src.shape)
        for form, rounding in ((tritonml.segment_coo, "trunc"), (tritonml.scatter, "floor")):
            expected = reference.scatter_groups(src, spread, 1, 7, "mean",
                                                integer_mean=rounding)
            got = (form(src, index, dim_size=7, reduce="mean") if form is tritonml.segment_coo
                   else form(src, index, 1, dim_size=7, reduce="mean"))
            assert_matches(got, expected, dtype)


def test_segment_coo_refuses_an_unsorted_index():
    with pytest.raises(ValueError, match="index: segment_coo needs an index sorted"):
        tritonml.segment_coo(torch.ones(3), torch.tensor([1, 0, 1]))
    with pytest.raises(ValueError, match="reduce: must be one of"):
        tritonml.scatter(torch.ones(3), torch.tensor([1, 0, 1]), reduce="prod")
    with pytest.raises(ValueError, match="index: every value must be in \\[0, 2\\), found 2"):
        tritonml.scatter(torch.ones(3), torch.tensor([1, 0, 2]), dim_size=2)
    with pytest.raises(ValueError, match="index: shape"):
        tritonml.scatter(torch.ones(3, 2), torch.tensor([[1, 0, 2]]), dim=0)


def test_segment_coo_takes_torch_scatters_reduces_only():
    # torch_scatter's segment_coo takes sum, add, mean, min and max (its ValueError otherwise);
    # "mul" is scatter's alone, and the message names what segment_coo takes
    with pytest.raises(ValueError) as refused:
        tritonml.segment_coo(torch.ones(3), torch.tensor([0, 0, 1]), reduce="mul")
    assert str(refused.value) == ("reduce: must be one of 'sum', 'add', 'mean', 'min', 'max', "
                                  "got 'mul'")
    assert tritonml.scatter(torch.full((3,), 2.0), torch.tensor([0, 0, 1]),
                            reduce="mul").tolist() == [4.0, 2.0]


def test_empty_src_and_groups():
    out, arg = tritonml.scatter_max(torch.empty(0, 2), torch.empty(0, dtype=torch.int64), 0,
                                    dim_size=3)
    assert out.tolist() == [[0.0, 0.0]] * 3 and arg.tolist() == [[0, 0]] * 3
    assert tritonml.scatter(torch.empty(0), torch.empty(0, dtype=torch.int64)).shape == (0,)
    np.testing.assert_array_equal(
        tritonml.scatter(torch.tensor([2.0, 4.0]), torch.tensor([3, 3]), 0, dim_size=5,
                         reduce="mul").numpy(), [1, 1, 1, 8, 1])


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
def test_an_integer_mean_counts_in_the_dtype_as_torch_scatter_does(dtype):
    # torch_scatter counts a group's elements as a sum of ones in src's dtype, so an int8 count
    # of 200 wraps to -56 and one of 300 to 44; a count below 1 is taken as 1; the sum wraps too
    sizes = [200, 300, 256, 3, 0]
    index = torch.cat([torch.full((n,), g) for g, n in enumerate(sizes)])
    rng = np.random.default_rng(4)
    src_np = rng.integers(0, 100, index.shape[0])
    got = tritonml.scatter(torch.from_numpy(src_np).to(dtype), index, dim=0,
                           dim_size=len(sizes), reduce="mean")
    bits = np.dtype(str(dtype).replace("torch.", ""))
    for group, n in enumerate(sizes):
        total = np.array(src_np[index.numpy() == group].sum()).astype(bits)   # wraps
        count = np.array(n).astype(bits)
        count = count if count >= 1 else 1
        want = np.floor_divide(int(total), int(count))
        assert int(got[group]) == np.array(want).astype(bits), (group, n)
