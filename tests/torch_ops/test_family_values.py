"""Values of torch's scan and reduce family in tritonml (tritonml.cummax, cummin, logcumsumexp,
max_with_indices, min_with_indices, aminmax, var, std, var_mean, std_mean, nansum, nanmean)
against numpy oracles in float64 (exact for integers, indices and bool): ties, NaN and infinities
by torch's rules, every dtype family, contiguous, transposed and strided inputs, 0-d, empty and
size-1 dims, and the errors raised before any launch."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tritonml
from tritonml.bench.tolerances import TOLERANCES
from tritonml.runtime import trace as _trace

NAN, INF = float("nan"), float("inf")
DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int8,
          torch.uint8, torch.bool)
LAYOUTS = ("contiguous", "transposed", "strided")


def make(shape, dtype, layout="contiguous", seed=0, nans=True):
    """Small integers (ties everywhere) as ``dtype``, some NaN and +-inf for floats, laid out as
    ``layout`` (a transposed view, or every other column of a wider tensor)."""
    g = torch.Generator().manual_seed(seed)
    if layout == "transposed":
        base = make(tuple(reversed(shape)), dtype, "contiguous", seed, nans)
        return base.permute(*reversed(range(len(shape))))
    if layout == "strided":
        wide = make(shape[:-1] + (2 * shape[-1],), dtype, "contiguous", seed, nans)
        return wide[..., ::2]
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    low = 0 if dtype == torch.uint8 else -3
    t = torch.randint(low, 4, shape, generator=g).to(dtype)
    if dtype.is_floating_point and nans and t.numel() > 4:
        flat = t.view(-1) if t.is_contiguous() else t.reshape(-1)
        picks = torch.randperm(t.numel(), generator=g)[:3]
        flat[picks[0]], flat[picks[1]], flat[picks[2]] = NAN, INF, -INF
        t = flat.view(shape)
    return t


def numpy64(t: torch.Tensor) -> np.ndarray:
    if t.dtype.is_floating_point:
        return t.double().numpy()
    return t.numpy().astype(np.int64) if t.dtype != torch.bool else t.numpy()


def assert_values(got: torch.Tensor, want: np.ndarray, dtype: torch.dtype):
    """Floats: the float64 reference rounded to ``dtype``, within the dtype's rtol/atol
    (tritonml/bench/tolerances.py), NaN where it is NaN; everything else exactly."""
    want_t = torch.from_numpy(np.asarray(want)).to(dtype)
    assert got.dtype == dtype and got.shape == want_t.shape
    if dtype.is_floating_point:
        tol = TOLERANCES[dtype]
        torch.testing.assert_close(got, want_t, rtol=tol.rtol, atol=tol.atol, equal_nan=True)
    else:
        assert torch.equal(got, want_t)


# ---------------------------------------------------------------------------------------------
# Oracles
# ---------------------------------------------------------------------------------------------
def cum_extreme(a: np.ndarray, axis: int, largest: bool):
    """torch's rule, element by element: take x when it is NaN, or when the running value is
    not NaN and x >= it (<= for the minimum); the index of what was taken."""
    a = np.moveaxis(a, axis, -1)
    values, indices = np.empty_like(a), np.zeros(a.shape, dtype=np.int64)
    for pos in np.ndindex(a.shape[:-1]):
        for i in range(a.shape[-1]):
            x = a[pos + (i,)]
            if i == 0:
                take = True
            else:
                v = values[pos + (i - 1,)]
                x_nan, v_nan = (np.isnan(x), np.isnan(v)) if a.dtype.kind == "f" else (False, False)
                take = x_nan or (not v_nan and (x >= v if largest else x <= v))
            values[pos + (i,)] = x if take else values[pos + (i - 1,)]
            indices[pos + (i,)] = i if take else indices[pos + (i - 1,)]
    return np.moveaxis(values, -1, axis), np.moveaxis(indices, -1, axis)


# ---------------------------------------------------------------------------------------------
# Scans
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("largest", [True, False], ids=["cummax", "cummin"])
def test_cummax_cummin_take_torchs_tie_and_nan_rule(largest, dtype, layout):
    x = make((3, 17), dtype, layout)
    function = tritonml.cummax if largest else tritonml.cummin
    for dim in (1, 0):
        values, indices = function(x, dim)
        want_values, want_indices = cum_extreme(numpy64(x), dim, largest)
        assert_values(values, want_values, dtype)
        assert torch.equal(indices, torch.from_numpy(want_indices))


def test_cummax_edges_0d_empty_size_one_and_signed_zeros():
    for x, dim in ((torch.tensor(2.5), 0), (torch.tensor(7, dtype=torch.int16), -1),
                   (torch.zeros(0, 3), 0), (torch.zeros(4, 0), 1), (torch.ones(1, 5), 0)):
        for function in (tritonml.cummax, tritonml.cummin):
            got = function(x, dim)
            values, indices = cum_extreme(numpy64(x.reshape(x.shape or (1,))),
                                          dim % max(x.dim(), 1), function is tritonml.cummax)
            assert type(got).__name__ == function.__name__
            assert torch.equal(got.values, torch.from_numpy(values).to(x.dtype).reshape(x.shape))
            assert torch.equal(got.indices, torch.from_numpy(indices).reshape(x.shape))
    # -0.0 and 0.0 tie: the later one is taken, sign and all (as torch)
    values, indices = tritonml.cummax(torch.tensor([0.0, -0.0, 0.0, -0.0]), 0)
    assert indices.tolist() == [0, 1, 2, 3]
    assert torch.signbit(values).tolist() == [False, True, False, True]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.float16, torch.bfloat16),
                         ids=str)
def test_logcumsumexp_matches_numpy(dtype, layout):
    x = make((4, 40), dtype, layout, seed=2) * 3
    x[0, :5] = -INF      # leading -inf: log 0 until the first finite element
    x[1, 0] = 10000      # torch's OpInfo: a large first element
    for dim, reverse in ((1, False), (0, False), (1, True)):
        got = tritonml.logcumsumexp(x, dim, reverse=reverse)
        a = numpy64(x)
        with np.errstate(invalid="ignore"):   # -inf - -inf inside numpy's logaddexp
            if reverse:
                want = np.flip(np.logaddexp.accumulate(np.flip(a, dim), axis=dim), dim).copy()
            else:
                want = np.logaddexp.accumulate(a, axis=dim)
        assert_values(got, want, dtype)


def test_logcumsumexp_edges():
    assert torch.equal(tritonml.logcumsumexp(torch.tensor(2.0), 0), torch.tensor(2.0))
    assert tritonml.logcumsumexp(torch.zeros(0, 3), 0).shape == (0, 3)
    got = tritonml.logcumsumexp(torch.tensor([-INF, -INF, 1.0, INF, 2.0, NAN, 3.0]), 0)
    want = torch.tensor([-INF, -INF, 1.0, INF, INF, NAN, NAN])
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got[:5], want[:5])
    # the small term of log1p(exp(lo - hi)) keeps its digits (a plain log(1 + u) would not)
    got = tritonml.logcumsumexp(torch.tensor([0.0, -40.0], dtype=torch.float64), 0)
    assert got[1].item() == np.logaddexp(0.0, -40.0)


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_max_min_with_indices_take_the_first_index_and_the_first_nan(dtype, layout):
    x = make((5, 33), dtype, layout, seed=3)
    a = numpy64(x)
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            for function, arg in ((tritonml.max_with_indices, np.argmax),
                                  (tritonml.min_with_indices, np.argmin)):
                values, indices = function(x, dim, keepdim)
                # numpy's argmax/argmin: the first occurrence, and the first NaN if any
                want_indices = np.expand_dims(arg(a, axis=dim), dim)
                want_values = np.take_along_axis(a, want_indices, dim)
                if not keepdim:
                    want_indices, want_values = want_indices.squeeze(dim), want_values.squeeze(dim)
                assert_values(values, want_values, dtype)
                assert torch.equal(indices, torch.from_numpy(want_indices))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_aminmax_propagates_nan_to_both(dtype, layout):
    x = make((4, 6, 5), dtype, layout, seed=4)
    a = numpy64(x)
    for dim, keepdim in ((None, False), (None, True), (1, False), (-1, True), ((0, 2), False)):
        low, high = tritonml.aminmax(x, dim=dim, keepdim=keepdim)
        axis = tuple(range(3)) if dim is None else dim
        assert_values(low, np.min(a, axis=axis, keepdims=keepdim), dtype)
        assert_values(high, np.max(a, axis=axis, keepdims=keepdim), dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", (torch.float32, torch.float64, torch.float16, torch.bfloat16),
                         ids=str)
def test_var_std_and_their_means_match_numpy_for_any_correction(dtype, layout):
    x = (make((6, 8, 5), dtype, layout, seed=5, nans=False) + 100).to(dtype)  # far from zero
    a = numpy64(x)
    cases = ((None, 1, False), (1, 0, True), ((0, 2), 1.5, False), ([], 2, True), (-1, 5, False),
             (0, -1, False))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)   # numpy: ddof >= n
        for dim, correction, keepdim in cases:
            axis = None if dim is None or dim == [] else dim
            want_var = np.var(a, axis=axis, ddof=correction, keepdims=keepdim)
            want_mean = np.mean(a, axis=axis, keepdims=keepdim)
            assert_values(tritonml.var(x, dim, correction=correction, keepdim=keepdim),
                          want_var, dtype)
            std, mean = tritonml.std_mean(x, dim, correction=correction, keepdim=keepdim)
            assert_values(std, np.sqrt(want_var), dtype)
            assert_values(mean, want_mean, dtype)
    # the legacy unbiased spellings
    assert_values(tritonml.var(x, 1, False), np.var(a, axis=1), dtype)
    assert_values(tritonml.std(x, unbiased=True), np.std(a, ddof=1), dtype)
    assert_values(tritonml.var_mean(x, True)[0], np.var(a, ddof=1), dtype)


def test_var_edges_follow_torch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # torch's "degrees of freedom <= 0"
        for x, kwargs in ((torch.tensor([1.0]), {}), (torch.tensor([1.0, 2.0]), {"correction": 2}),
                          (torch.tensor([1.0, 2.0]), {"correction": 3}), (torch.zeros(0), {}),
                          (torch.zeros(0, 3), {"dim": 0}), (torch.tensor(3.0), {}),
                          (torch.tensor([1.0, INF]), {}), (torch.tensor([1.0, NAN]), {}),
                          (torch.tensor([5.0, 5.0]), {})):
            for ours, theirs in ((tritonml.var_mean, torch.var_mean),
                                 (tritonml.std_mean, torch.std_mean)):
                for got, want in zip(ours(x, **kwargs), theirs(x, **kwargs), strict=True):
                    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_nansum_and_nanmean_skip_nan(dtype, layout):
    x = make((5, 7, 3), dtype, layout, seed=6)
    if dtype.is_floating_point:
        x[2] = NAN    # a row of NaN: nansum 0, nanmean NaN
        x = x.nan_to_num(nan=NAN, posinf=1.0, neginf=-1.0)   # keep NaN, no infinities
    a = numpy64(x)
    for dim, keepdim in ((None, False), (0, True), ((1, 2), False), ([], True)):
        axis = None if dim is None or dim == [] else dim
        got = tritonml.nansum(x, dim, keepdim)
        if dtype.is_floating_point:
            assert_values(got, np.nansum(a, axis=axis, keepdims=keepdim), dtype)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)   # numpy: mean of no element
                want = np.nanmean(a, axis=axis, keepdims=keepdim)
            assert_values(tritonml.nanmean(x, dim, keepdim), want, dtype)
        else:   # integers and bool sum exactly into int64, as torch promotes them
            assert_values(got, np.sum(a.astype(np.int64), axis=axis, keepdims=keepdim),
                          torch.int64)


def test_nansum_dtype_converts_first_and_integers_wrap():
    x = torch.tensor([200, 100, 7], dtype=torch.uint8)
    assert tritonml.nansum(x).item() == 307
    got = tritonml.nansum(x, dtype=torch.uint8)
    assert got.dtype == torch.uint8 and got.item() == 307 % 256
    x = torch.tensor([1.5, NAN, 2.25], dtype=torch.float16)
    got = tritonml.nansum(x, dtype=torch.float64)
    assert got.dtype == torch.float64 and got.item() == 3.75
    got = tritonml.nanmean(x, dtype=torch.float32)
    assert got.dtype == torch.float32 and got.item() == 1.875
    assert tritonml.nansum(torch.tensor([True, True, False])).item() == 2
    assert torch.isnan(tritonml.nanmean(torch.zeros(0)))
    assert tritonml.nansum(torch.zeros(0, 2), 0).tolist() == [0.0, 0.0]


# ---------------------------------------------------------------------------------------------
# Errors, before any launch
# ---------------------------------------------------------------------------------------------
ERRORS = [
    (lambda: tritonml.cummax(torch.ones(3), 1), ValueError, "^dim: "),
    (lambda: tritonml.logcumsumexp(torch.ones(3, dtype=torch.int32), 0), TypeError, "^x: "),
    (lambda: tritonml.max_with_indices(torch.ones(0, 3), 0), ValueError, "^x: .*empty"),
    (lambda: tritonml.aminmax(torch.ones(2, 0)), ValueError, "^x: .*empty"),
    (lambda: tritonml.max_with_indices(torch.ones(3), 0, keepdim=1), TypeError, "^keepdim: "),
    (lambda: tritonml.var(torch.ones(3, dtype=torch.int64)), TypeError, "^x: "),
    (lambda: tritonml.var(torch.ones(3), correction="1"), TypeError, "^correction: "),
    (lambda: tritonml.std(torch.ones(3), unbiased=True, correction=1), TypeError, "^correction: "),
    (lambda: tritonml.nanmean(torch.ones(3, dtype=torch.int64), dtype=torch.float32), TypeError,
     "^x: "),
    (lambda: tritonml.nansum(torch.ones(3), (0, 0)), ValueError, "^axes: "),
]


@pytest.mark.parametrize("call,error,message", ERRORS)
def test_bad_arguments_raise_before_any_launch(call, error, message):
    with _trace.record() as rec, pytest.raises(error, match=message):
        call()
    assert rec.launches == []
