"""Mean and variance with infinities and NaN, and their accuracy far from zero: one rule
(docs/semantics.md, "Moments") through every entry that shares Welford's state: tritonml.var, std,
var_mean, std_mean, the same torch calls routed to them, reduce_with and segment_reduce with the
ready-made ``welford``, ``welford_biased`` and ``welford_m2`` (DTensors: tests/distributed/test_distributed.py).

The oracle is numpy in float64: ``np.mean`` (IEEE: +-inf for infinities of one sign among finite
values, NaN for both signs or a NaN) and ``np.var`` (NaN wherever an element is infinite or NaN),
checked against that rule itself so the oracle cannot drift.
"""
from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import torch

import tritonml
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ReduceConfig

INF, NAN = float("inf"), float("nan")
ALPHABET = (1.0, -2.5, INF, -INF, NAN)
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# forced regimes, tiles shorter than the rows (several tiles a row; for split, partial states
# merged across programs), with many rows a program to keep the interpreter's programs few
CONFIGS = (ReduceConfig("rows", 16, 64), ReduceConfig("split", 16, 64, splits=3, block_split=2),
           None)
WELFORDS = {"welford": 1, "welford_biased": 0}


def oracle(a: np.ndarray, axis, ddof):
    """(var, mean) in float64, keepdims, by numpy; asserts the rule it stands for."""
    a = a.astype(np.float64)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        var = np.var(a, axis=axis, ddof=ddof, keepdims=True)
        mean = np.mean(a, axis=axis, keepdims=True)
    nonfinite = ~np.isfinite(a).all(axis=axis, keepdims=True)
    assert np.isnan(var[nonfinite]).all()
    positive = (a == INF).any(axis=axis, keepdims=True)
    negative = (a == -INF).any(axis=axis, keepdims=True)
    nan = np.isnan(a).any(axis=axis, keepdims=True)
    assert (np.isnan(mean) == (nan | (positive & negative))).all()
    assert (mean[positive & ~negative & ~nan] == INF).all()
    return var, mean


def assert_matches(got: torch.Tensor, want: np.ndarray, dtype: torch.dtype, what: str):
    """NaN exactly where the oracle has NaN, infinities equal, finite values within the
    rounding to ``dtype`` (the float64 reference rounded once, as the result is)."""
    want_t = torch.from_numpy(np.ascontiguousarray(want)).to(dtype)
    assert got.shape == want_t.shape, what
    rtol = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 1e-3,
            torch.bfloat16: 8e-3}[dtype]
    torch.testing.assert_close(got, want_t, rtol=rtol, atol=0, equal_nan=True, msg=what)


def arrangements(length: int, dtype) -> torch.Tensor:
    """Every row of ``length`` elements over ALPHABET: each place, order and mix of +-inf and NaN
    among finite values."""
    return torch.tensor(list(itertools.product(ALPHABET, repeat=length)), dtype=dtype)


def embedded(dtype) -> torch.Tensor:
    """Every 3-element arrangement spread over a row of 61 finite values and packed at its end:
    the non-finite elements meet the others in merges across tiles and splits."""
    g = torch.Generator().manual_seed(3)
    rows = []
    for pattern in itertools.product(ALPHABET, repeat=3):
        for places in ((0, 30, 60), (58, 59, 60)):
            row = torch.randn(61, generator=g, dtype=torch.float64) + 4
            row[list(places)] = torch.tensor(pattern, dtype=torch.float64)
            rows.append(row)
    return torch.stack(rows).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_var_std_and_means_follow_the_rule_for_every_arrangement(dtype):
    x = arrangements(4, dtype)
    a = x.double().numpy()
    for correction in (0, 1):
        var, mean = oracle(a, 1, correction)
        var, mean = var[:, 0], mean[:, 0]
        assert_matches(tritonml.var(x, 1, correction=correction), var, dtype, "var")
        assert_matches(tritonml.std(x, 1, correction=correction), np.sqrt(var), dtype, "std")
        got_var, got_mean = tritonml.var_mean(x, 1, correction=correction)
        assert_matches(got_var, var, dtype, "var_mean's var")
        assert_matches(got_mean, mean, dtype, "var_mean's mean")
        got_std, got_mean = tritonml.std_mean(x, 1, correction=correction)
        assert_matches(got_std, np.sqrt(var), dtype, "std_mean's std")
        assert_matches(got_mean, mean, dtype, "std_mean's mean")
        # torch.var agrees on every row (its mean is order-dependent: docs/semantics.md)
        torch.testing.assert_close(tritonml.var(x, 1, correction=correction),
                                   torch.var(x, 1, correction=correction), equal_nan=True)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16), ids=str)
def test_routed_torch_var_and_var_mean_follow_the_rule(dtype):
    x = arrangements(3, dtype)
    var, mean = oracle(x.double().numpy(), 1, 1)
    with tritonml.use_tritonml(devices=("cpu",)), _trace.record() as rec:
        got_var = torch.var(x, 1)
        got_std = x.std(dim=1)
        got_var2, got_mean = torch.var_mean(x, 1)
        got_std2, got_mean2 = torch.std_mean(x, 1)
    assert len(rec.launches) >= 4, "the calls were not routed"
    assert_matches(got_var, var[:, 0], dtype, "routed var")
    assert_matches(got_std, np.sqrt(var[:, 0]), dtype, "routed std")
    assert_matches(got_var2, var[:, 0], dtype, "routed var_mean's var")
    assert_matches(got_mean, mean[:, 0], dtype, "routed var_mean's mean")
    assert_matches(got_std2, np.sqrt(var[:, 0]), dtype, "routed std_mean's std")
    assert_matches(got_mean2, mean[:, 0], dtype, "routed std_mean's mean")


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("name", list(WELFORDS))
def test_welford_follows_the_rule_dense_and_segmented(name, dtype):
    reduction, ddof = getattr(tritonml.records.ready_reductions, name), WELFORDS[name]
    x = arrangements(4, dtype)
    var, mean = oracle(x.double().numpy(), 1, ddof)
    for config in CONFIGS:
        got_var, got_mean = tritonml.reduce_with(reduction, x, 1, config=config)
        assert_matches(got_var, var, dtype, f"reduce_with {name} var ({config})")
        assert_matches(got_mean, mean, dtype, f"reduce_with {name} mean ({config})")
    # along dim 0 of the transposed rows: the columns regime
    got_var, got_mean = tritonml.reduce_with(reduction, x.t(), 0)
    assert_matches(got_var, var.T, dtype, f"reduce_with {name} var, columns")
    assert_matches(got_mean, mean.T, dtype, f"reduce_with {name} mean, columns")
    # every row a segment of the flat tensor, plus an empty one and a segment of one element
    flat = x.reshape(-1)
    offsets = torch.tensor([0] + [4 * i for i in range(1, x.shape[0] + 1)] + [flat.numel()])
    got_var, got_mean = tritonml.segment_reduce(flat, reduction, offsets=offsets)
    assert_matches(got_var[:-1], var[:, 0], dtype, f"segment_reduce {name} var")
    assert_matches(got_mean[:-1], mean[:, 0], dtype, f"segment_reduce {name} mean")
    assert got_var[-1].isnan() and got_mean[-1].isnan()      # the empty segment


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_nonfinite_elements_among_many_tiles_follow_the_rule(dtype):
    x = embedded(dtype)
    a = x.double().numpy()
    var, mean = oracle(a, 1, 1)
    for config in CONFIGS:
        got_var, got_mean = tritonml.reduce_with(tritonml.records.ready_reductions.welford, x, 1, config=config)
        assert_matches(got_var, var, dtype, f"welford var ({config})")
        assert_matches(got_mean, mean, dtype, f"welford mean ({config})")
    got_var, got_mean = tritonml.var_mean(x, 1, keepdim=True)
    assert_matches(got_var, var, dtype, "var_mean's var")
    assert_matches(got_mean, mean, dtype, "var_mean's mean")
    offsets = torch.arange(0, x.numel() + 1, x.shape[1])
    got_var, got_mean = tritonml.segment_reduce(x.reshape(-1), tritonml.records.ready_reductions.welford,
                                                offsets=offsets)
    assert_matches(got_var, var[:, 0], dtype, "segmented welford var")
    assert_matches(got_mean, mean[:, 0], dtype, "segmented welford mean")
    m2, mean_m2 = tritonml.reduce_with(tritonml.records.ready_reductions.welford_m2, x, 1)
    assert_matches(mean_m2, mean, torch.float64, "welford_m2 mean")
    nonfinite = ~np.isfinite(a).all(axis=1, keepdims=True)
    assert torch.from_numpy(nonfinite).eq(m2.isnan()).all()


def test_the_reported_cases():
    x = torch.tensor([1., 2., INF, 4.])
    assert tritonml.var(x).isnan() and torch.var(x).isnan()
    assert tritonml.var(torch.tensor([INF, 1.])).isnan()
    assert tritonml.var(torch.tensor([1., INF])).isnan()
    var, mean = tritonml.segment_reduce(torch.tensor([-INF, -INF, -INF, -INF, INF, 1.]),
                                        tritonml.records.ready_reductions.welford,
                                        offsets=torch.tensor([0, 4, 6]))
    assert var.isnan().all() and mean.tolist() == [-INF, INF]
    var, mean = tritonml.reduce_with(tritonml.records.ready_reductions.welford, torch.tensor([-INF] * 4), 0)
    assert var.isnan().all() and mean.item() == -INF     # torch.mean's, not torch.var_mean's NaN
    var, mean = tritonml.segment_reduce(torch.tensor([NAN, 1., 2.], dtype=torch.float64),
                                        tritonml.records.ready_reductions.welford_biased,
                                        offsets=torch.tensor([0, 1, 3]))
    assert var[0].isnan() and mean[0].isnan() and var[1].item() == 0.25 and mean[1].item() == 1.5
    var, mean = tritonml.reduce_with(tritonml.records.ready_reductions.welford_biased,
                                     torch.tensor([NAN], dtype=torch.float64), 0)
    assert var.isnan().all() and mean.isnan().all()
    assert tritonml.var(torch.tensor([INF]), correction=0).isnan()


# Far from zero (8,192 values: the error of a state in the input's float32 does not shrink with n):
# the float32 state lost the variance to 5e-3; float64 keeps it to the rounding of
# the result. Half types hold a float32 state: their bound is the result's own rounding.
FAR = {torch.float32: (1e6, 1.0, 1e-6), torch.float16: (1000.0, 4.0, 2e-3),
       torch.bfloat16: (1e5, 1e3, 8e-3), torch.float64: (1e6, 1.0, 1e-9)}


@pytest.mark.parametrize("dtype", list(FAR), ids=str)
def test_welford_keeps_the_variance_at_large_means(dtype):
    center, spread, rtol = FAR[dtype]
    g = torch.Generator().manual_seed(11)
    x = (center + spread * torch.randn(8192, generator=g, dtype=torch.float64)).to(dtype)
    a = x.double().numpy()
    for name, ddof in WELFORDS.items():
        reduction = getattr(tritonml.records.ready_reductions, name)
        want = np.var(a, ddof=ddof)
        var, _ = tritonml.reduce_with(reduction, x, 0, keepdims=False)
        assert abs(var.double().item() - want) <= rtol * want, (name, var, want)
        var, _ = tritonml.segment_reduce(x, reduction, offsets=torch.tensor([0, 4096, 8192]))
        want_segments = [np.var(a[:4096], ddof=ddof), np.var(a[4096:], ddof=ddof)]
        np.testing.assert_allclose(var.double().numpy(), want_segments, rtol=rtol)
    np.testing.assert_allclose(tritonml.var(x).double().item(), np.var(a, ddof=1), rtol=rtol)
