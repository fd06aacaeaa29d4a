"""tritonml.scatter_reduce / scatter_add / index_add / index_reduce / bincount against a numpy
oracle of torch's definitions (tests/torch_ops/scatter_reference.py), on random and adversarial
inputs, every dtype; and their argument checks (nothing written on error)."""
from __future__ import annotations

import math
import re

import numpy as np

import pytest
import torch

import tritonml
from tests.torch_ops import scatter_reference as reference

pytestmark = pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta")

FLOATS = (torch.float32, torch.float16, torch.bfloat16, torch.float64)
INTEGERS = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)
REDUCES = ("sum", "prod", "mean", "amax", "amin")
TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 2e-2, torch.float32: 1e-5,
             torch.float64: 1e-12}


def values(shape, dtype, seed, reduce="sum"):
    """Seeded values: floats near 1 for products, small multiples of 1/8 otherwise; integers
    over the dtype's whole range for sums and products (they wrap), small for the rest."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        if reduce == "prod":
            return (0.75 + torch.rand(shape, generator=g, dtype=torch.float64) / 2).to(dtype)
        return (torch.randint(-64, 64, shape, generator=g) / 8).to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = (info.min, info.max) if info.bits <= 16 else (-1000, 1000)
    if info.min == 0:
        lo = 0
    return torch.randint(lo, hi + 1 if hi < 2**62 else hi, shape, generator=g, dtype=torch.int64
                         ).to(dtype)


def assert_matches(result: torch.Tensor, expected, dtype) -> None:
    assert result.dtype == dtype
    expected = np.asarray(expected, dtype=object)
    assert tuple(result.shape) == expected.shape
    if dtype.is_floating_point:
        np.testing.assert_allclose(result.to(torch.float64).numpy(),
                                   expected.astype(np.float64), rtol=TOLERANCE[dtype],
                                   atol=TOLERANCE[dtype], equal_nan=True)
    else:
        assert result.tolist() == expected.tolist()


# (input shape, dim, index shape, src shape, how the index is drawn)
LAYOUTS = {
    "shared": ((5, 3), 0, None, (9, 3), "random"),             # a 1-D index along dim 0
    "general": ((4, 6, 2), 1, (3, 5, 2), (4, 7, 2), "random"),  # varies across the other dims
    "last_dim": ((2, 6), -1, (2, 4), (2, 4), "random"),
    "all_same": ((4, 2), 0, None, (12, 2), "zero"),
    "empty_groups": ((8, 2), 0, None, (6, 2), "ends"),          # groups 1..6 get nothing
    "huge_group": ((3,), 0, (300,), (300,), "one"),             # one group of 298, two of 1
    "sorted": ((6, 2), 0, None, (10, 2), "sorted"),
}


def make_index(kind, shape, n, seed, dim):
    g = torch.Generator().manual_seed(seed + 1)
    if kind == "random":
        return torch.randint(0, n, shape, generator=g)
    if kind == "zero":
        return torch.zeros(shape, dtype=torch.int64)
    if kind == "ends":
        return torch.randint(0, 2, shape, generator=g) * (n - 1)
    if kind == "one":
        index = torch.ones(shape, dtype=torch.int64)
        index[0], index[-1] = 0, 2
        return index
    return torch.sort(torch.randint(0, n, shape, generator=g), dim=dim).values


def case(layout, dtype, reduce, seed=0):
    in_shape, dim, index_shape, src_shape, kind = LAYOUTS[layout]
    d = dim % len(in_shape)
    n = in_shape[d]
    if index_shape is None:      # one index along dim, broadcast (stride 0) over the rest
        line = make_index(kind, (src_shape[d],), n, seed, 0)
        view = [1] * len(src_shape)
        view[d] = -1
        index = line.reshape(view).expand(src_shape)
    else:
        index = make_index(kind, index_shape, n, seed, d)
    return (values(in_shape, dtype, seed, reduce), dim, index,
            values(src_shape, dtype, seed + 2, reduce))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", (True, False))
@pytest.mark.parametrize("dtype", FLOATS + INTEGERS, ids=str)
def test_scatter_reduce_matches_definition(layout, reduce, include_self, dtype):
    input, dim, index, src = case(layout, dtype, reduce)
    before = input.clone()
    result = tritonml.scatter_reduce(input, dim, index, src, reduce, include_self=include_self)
    assert_matches(result, reference.scatter_reduce(input, dim, index, src, reduce,
                                                    include_self), dtype)
    assert torch.equal(input, before)


# (mantissa bits, least normal exponent) of the dtypes whose groups accumulate in a wider one
_PRECISION = {torch.float16: (10, -14), torch.bfloat16: (7, -126), torch.float32: (23, -126)}
_ACCUMULATION_EPS = {torch.float16: 2.0**-24, torch.bfloat16: 2.0**-24, torch.float32: 2.0**-53}


def _half_ulp(exact: np.ndarray, dtype) -> np.ndarray:
    """Half the spacing of ``dtype``'s values at ``exact`` (the larger one at a power of 2)."""
    bits, least = _PRECISION[dtype]
    magnitude = np.abs(exact.astype(np.float64))
    exponent = np.floor(np.log2(np.where(magnitude > 0, magnitude, 1.0)))
    return 0.5 * 2.0 ** (np.maximum(exponent, least) - bits)


@pytest.mark.parametrize("dtype", tuple(_PRECISION), ids=str)
def test_include_self_rounds_once(dtype):
    # input joins each group in the accumulation dtype and the result is rounded once: within
    # half an ulp of the exact value (numpy float64 of the definition) plus the accumulation's
    # own rounding, n * eps times the terms' magnitudes. Rounding the group first and adding
    # input in the dtype misses about a quarter of these by up to an ulp.
    g = torch.Generator().manual_seed(23)
    line = torch.randint(0, 6, (30,), generator=g)
    shared = line[:, None].expand(30, 4)                  # stride 0 across the columns
    general = torch.randint(0, 6, (30, 4), generator=g)   # varies across them
    mixed = (torch.randn(6, 4, generator=g, dtype=torch.float64).to(dtype),
             torch.randn(30, 4, generator=g, dtype=torch.float64).to(dtype))
    near_one = tuple((0.5 + torch.rand(t.shape, generator=g, dtype=torch.float64)).to(dtype)
                     for t in mixed)
    # (name, reduce, the call, its index as scatter_reduce's)
    calls = [
        ("scatter_reduce", "sum", lambda i, s: tritonml.scatter_reduce(i, 0, shared, s, "sum"),
         shared),
        ("scatter_reduce", "mean", lambda i, s: tritonml.scatter_reduce(i, 0, general, s,
                                                                        "mean"), general),
        ("scatter_reduce", "prod", lambda i, s: tritonml.scatter_reduce(i, 0, general, s,
                                                                        "prod"), general),
        ("scatter_add", "sum", lambda i, s: tritonml.scatter_add(i, 0, general, s), general),
        ("index_add", "sum", lambda i, s: tritonml.index_add(i, 0, line, s), shared),
        ("index_reduce", "mean", lambda i, s: tritonml.index_reduce(i, 0, line, s, "mean"),
         shared),
        ("index_reduce", "prod", lambda i, s: tritonml.index_reduce(i, 0, line, s, "prod"),
         shared),
    ]
    for name, reduce, call, index in calls:
        input, src = near_one if reduce == "prod" else mixed
        exact = reference.scatter_reduce(input, 0, index, src, reduce).astype(np.float64)
        magnitudes = reference.scatter_reduce(input.abs(), 0, index, src.abs(),
                                              reduce).astype(np.float64)
        bound = _half_ulp(exact, dtype) + 32 * _ACCUMULATION_EPS[dtype] * magnitudes
        for requires_grad in (False, True):   # the launcher's path and the differentiable op's
            args = [t.clone().requires_grad_(requires_grad) for t in (input, src)]
            got = call(*args)
            assert got.dtype == dtype, name
            error = np.abs(got.detach().to(torch.float64).numpy() - exact)
            worst = np.unravel_index(np.argmax(error - bound), error.shape)
            assert (error <= bound).all(), (name, reduce, requires_grad, worst,
                                            float(exact[worst]), float(got[worst]))
            if requires_grad:
                got.sum().backward()
                assert all(t.grad.dtype == dtype for t in args), name


@pytest.mark.parametrize("reduce", ("sum", "amax", "amin", "prod", "mean"))
def test_nan_and_inf_follow_torch(reduce):
    input = torch.tensor([0.0, 1.0, -math.inf, 2.0])
    src = torch.tensor([math.nan, 3.0, math.inf, -1.0, 5.0, -math.inf])
    index = torch.tensor([0, 0, 1, 1, 2, 2])
    result = tritonml.scatter_reduce(input, 0, index, src, reduce)
    assert_matches(result, reference.scatter_reduce(input, 0, index, src, reduce), torch.float32)


def test_scatter_add_and_out_and_views():
    input = values((6, 4), torch.float32, 3).t()            # non-contiguous (4, 6)
    src = values((8, 4), torch.float32, 4)[::2].t()        # (4, 4), strided
    index = torch.randint(0, 6, (4, 4), generator=torch.Generator().manual_seed(5))
    expected = reference.scatter_reduce(input, 1, index, src, "sum")
    assert_matches(tritonml.scatter_add(input, 1, index, src), expected, torch.float32)
    out = torch.empty(4, 6)
    assert tritonml.scatter_add(input, -1, index.to(torch.int32), src, out=out) is out
    assert_matches(out, expected, torch.float32)
    inplace = input.clone()
    tritonml.scatter_reduce(inplace, 1, index, src, "sum", out=inplace)   # out may be input
    assert_matches(inplace, expected, torch.float32)


def test_scalars_and_empty_index():
    x, s = torch.tensor(2.0), torch.tensor(5.0)
    assert tritonml.scatter_reduce(x, 0, torch.tensor(0), s, "sum").item() == 7.0
    input = torch.arange(4.0)
    result = tritonml.scatter_reduce(input, 0, torch.empty(0, dtype=torch.int64),
                                     torch.empty(0), "prod")
    assert torch.equal(result, input) and result.data_ptr() != input.data_ptr()


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int8, torch.int64),
                         ids=str)
@pytest.mark.parametrize("alpha", (1, 3))
def test_index_add_matches_definition(dtype, alpha):
    g = torch.Generator().manual_seed(7)
    input, source = values((5, 3), dtype, 8), values((11, 3), dtype, 9)
    index = torch.randint(0, 5, (11,), generator=g)
    expected = reference.index_reduce(input, 0, index, source * alpha, "sum")
    assert_matches(tritonml.index_add(input, 0, index, source, alpha=alpha), expected, dtype)
    # along dim 1, an int32 index
    index1 = torch.randint(0, 3, (4,), generator=g).to(torch.int32)
    source1 = values((5, 4), dtype, 10)
    assert_matches(tritonml.index_add(input, 1, index1, source1),
                   reference.index_reduce(input, 1, index1, source1, "sum"), dtype)


@pytest.mark.parametrize("reduce", ("prod", "mean", "amax", "amin"))
@pytest.mark.parametrize("include_self", (True, False))
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.int32, torch.uint8),
                         ids=str)
def test_index_reduce_matches_definition(reduce, include_self, dtype):
    g = torch.Generator().manual_seed(11)
    input, source = values((4, 2, 3), dtype, 12, reduce), values((4, 7, 3), dtype, 13, reduce)
    index = torch.randint(0, 2, (7,), generator=g)
    result = tritonml.index_reduce(input, 1, index, source, reduce, include_self=include_self)
    assert_matches(result, reference.index_reduce(input, 1, index, source, reduce,
                                                  include_self), dtype)


@pytest.mark.parametrize("weights_dtype", (None, torch.float32, torch.float16, torch.float64,
                                           torch.int32), ids=str)
@pytest.mark.parametrize("sorted_input", (False, True))
def test_bincount_matches_definition(weights_dtype, sorted_input):
    g = torch.Generator().manual_seed(17)
    input = torch.randint(0, 9, (40,), generator=g)
    if sorted_input:
        input = input.sort().values
    weights = None if weights_dtype is None else values((40,), weights_dtype, 18)
    result = tritonml.bincount(input, weights, minlength=12)
    expected = reference.bincount(input, weights, minlength=12)
    assert result.dtype == (torch.int64 if weights is None else
                            torch.float32 if weights_dtype == torch.float32 else torch.float64)
    np.testing.assert_allclose(result.to(torch.float64).numpy(), expected, rtol=1e-6)
    assert tritonml.bincount(torch.empty(0, dtype=torch.int64), minlength=3).tolist() == [0] * 3


@pytest.mark.parametrize("input_dtype", (torch.int64, torch.uint8), ids=str)
def test_bincount_of_an_empty_input_is_torchs(input_dtype):
    # torch.bincount of an empty input returns its counts' int64 zeros whatever the weights
    empty = torch.empty(0, dtype=input_dtype)
    for weights_dtype in (None, torch.float32, torch.float64, torch.float16, torch.int32):
        for minlength in (0, 3):
            weights = None if weights_dtype is None else torch.empty(0, dtype=weights_dtype)
            got = tritonml.bincount(empty, weights, minlength=minlength)
            want = torch.bincount(empty, weights, minlength=minlength)
            assert got.dtype == want.dtype and got.tolist() == want.tolist(), (weights_dtype,
                                                                               minlength)


# ---------------------------------------------------------------------------------------------
# Checks: a clear error naming the argument, before anything is written
# ---------------------------------------------------------------------------------------------
BAD_CALLS = {
    "index out of range": (lambda out: tritonml.scatter_reduce(
        torch.zeros(3), 0, torch.tensor([0, 3]), torch.ones(2), "sum", out=out),
        ValueError, "index: every value must be in \\[0, 3\\), found 3"),
    "negative index": (lambda out: tritonml.scatter_add(
        torch.zeros(3), 0, torch.tensor([-1, 0]), torch.ones(2), out=out),
        ValueError, "index: every value must be in"),
    "float index": (lambda out: tritonml.scatter_add(
        torch.zeros(3), 0, torch.tensor([0.0]), torch.ones(1), out=out),
        TypeError, "index: must have dtype int64 or int32"),
    "src dtype": (lambda out: tritonml.scatter_add(
        torch.zeros(3), 0, torch.tensor([0]), torch.ones(1, dtype=torch.float64), out=out),
        TypeError, "src: dtype torch.float64 must equal input's"),
    "index larger than src": (lambda out: tritonml.scatter_add(
        torch.zeros(3), 0, torch.tensor([0, 1, 2]), torch.ones(2), out=out),
        ValueError, "index: size 3 of dim 0 exceeds src's"),
    "index rank": (lambda out: tritonml.scatter_add(
        torch.zeros(3), 0, torch.tensor([[0]]), torch.ones(1), out=out),
        ValueError, "index: must have as many dims"),
    "reduce": (lambda out: tritonml.scatter_reduce(
        torch.zeros(3), 0, torch.tensor([0]), torch.ones(1), "max", out=out),
        ValueError, "reduce: must be one of"),
    "index_add source size": (lambda out: tritonml.index_add(
        torch.zeros(3, 2), 0, torch.tensor([0, 1]), torch.ones(3, 2), out=out),
        ValueError, "index: must hold one entry per slice of source along dim 0"),
    "index_add index out of range": (lambda out: tritonml.index_add(
        torch.zeros(3), 0, torch.tensor([5]), torch.ones(1), out=out),
        ValueError, "index: every value must be in \\[0, 3\\)"),
    "index_reduce sum": (lambda out: tritonml.index_reduce(
        torch.zeros(3), 0, torch.tensor([0]), torch.ones(1), "sum", out=out),
        ValueError, "reduce: must be one of 'prod'"),
    "out shape": (lambda out: tritonml.scatter_add(
        torch.zeros(2), 0, torch.tensor([0]), torch.ones(1), out=out),
        ValueError, "out: shape"),
    "bool values": (lambda out: tritonml.scatter_add(
        torch.zeros(3, dtype=torch.bool), 0, torch.tensor([0]), torch.ones(1, dtype=torch.bool),
        out=None), TypeError, "input: dtype"),
}


@pytest.mark.parametrize("name", BAD_CALLS)
def test_bad_arguments_raise_before_writing(name):
    call, error, message = BAD_CALLS[name]
    out = torch.full((3,), 7.0)
    with pytest.raises(error, match=message):
        call(out)
    assert out.tolist() == [7.0] * 3


@pytest.mark.parametrize("function, entries", [
    ("index_add", 2), ("index_add", 4), ("index_reduce", 2), ("index_reduce", 4)])
def test_an_index_of_the_wrong_length_is_named_as_torch_names_it(function, entries):
    """torch's rule: the number of indices must equal source.size(dim) (its message names the
    indices); an index shorter or longer than source's 3 slices along dim 1 is the index's
    fault, named so, before anything is written."""
    input, source = torch.full((2, 5), 7.0), torch.ones(2, 3)
    index = torch.arange(entries) % 5
    args = (input, 1, index, source) + (("prod",) if function == "index_reduce" else ())
    with pytest.raises(RuntimeError, match=rf"Number of indices \({entries}\) should be equal to "
                                           r"source.size\(dim\)"):
        getattr(torch, function)(*args)
    with pytest.raises(ValueError, match=re.escape(
            f"index: must hold one entry per slice of source along dim 1 (source.size(1) = 3), "
            f"got {entries}")):
        getattr(tritonml, function)(*args)
    assert input.eq(7.0).all()


def test_bincount_checks():
    with pytest.raises(ValueError, match="input: values must be non-negative, found -1"):
        tritonml.bincount(torch.tensor([1, -1]))
    with pytest.raises(TypeError, match="input: must have an integer dtype"):
        tritonml.bincount(torch.tensor([1.0]))
    with pytest.raises(ValueError, match="weights: must have input's shape"):
        tritonml.bincount(torch.tensor([1, 2]), torch.ones(3))
    with pytest.raises(ValueError, match="minlength: must be a non-negative int"):
        tritonml.bincount(torch.tensor([1]), minlength=-1)


@pytest.mark.parametrize("include_self", [False, True])
def test_an_integer_mean_counts_in_the_dtype_as_torch_does(include_self):
    # torch counts in input's dtype (include_self: one more for input's own element) and takes a
    # count of 0 as 1: an int8 group of 256 (255 with input's) counts 0, then 1, not a division
    # by zero; one of 200 counts -56
    sizes = [256 - include_self, 200, 5]
    index = torch.cat([torch.full((n,), g) for g, n in enumerate(sizes)])
    src_np = np.random.default_rng(6).integers(-9, 10, index.shape[0])
    input_np = np.array([7, -3, 2, 11])
    got = tritonml.scatter_reduce(torch.from_numpy(input_np).to(torch.int8), 0, index,
                                  torch.from_numpy(src_np).to(torch.int8), "mean",
                                  include_self=include_self)
    for group, n in enumerate(sizes):
        total = src_np[index.numpy() == group].sum() + (input_np[group] if include_self else 0)
        count = int(np.array(n + include_self).astype(np.int8))
        want = np.floor_divide(int(np.array(total).astype(np.int8)), count if count else 1)
        assert int(got[group]) == np.array(want).astype(np.int8), (group, n)
    assert int(got[3]) == input_np[3]
