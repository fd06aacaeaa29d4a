"""bfloat16 results are rounded to nearest even on the CPU (interpreted) path, as torch and the GPU
round them: conversions from every type, arithmetic on bfloat16 operands, and the library's
functions end to end. The oracle picks the nearest of all 65,536 bfloat16 values by exact rational
comparison (ties to the even bit pattern), independent of numpy's, torch's and tritonml's
conversions."""
from __future__ import annotations

import bisect
from fractions import Fraction

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonml
from tritonml.core import bfloat16 as _bfloat16

# Every finite non-negative bfloat16, as (exact value, bit pattern), ascending.
_POSITIVE = sorted((Fraction(float(v)), bits) for bits, v in enumerate(
    torch.arange(0, 0x7F80, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).tolist()))
_VALUES = [value for value, _ in _POSITIVE]
_MAX = _VALUES[-1]
_MAX_ULP = _MAX - _VALUES[-2]


def nearest_bits(value) -> int:
    """The bfloat16 bit pattern nearest to ``value`` (int, float or Fraction), ties to even."""
    if isinstance(value, float) and value != value:
        return 0x7FC0
    if isinstance(value, float) and abs(value) == float("inf"):
        return 0x7F80 | (0x8000 if value < 0 else 0)
    exact = Fraction(value)
    sign = 0x8000 if exact < 0 or (isinstance(value, float) and str(value).startswith("-")) else 0
    magnitude = abs(exact)
    if magnitude >= _MAX + _MAX_ULP / 2:  # past the last value by half an ulp or more: infinity
        return 0x7F80 | sign
    at = bisect.bisect_left(_VALUES, magnitude)
    if at < len(_VALUES) and _VALUES[at] == magnitude:
        return _POSITIVE[at][1] | sign
    if at == len(_VALUES):  # between the largest value and half an ulp past it
        return _POSITIVE[-1][1] | sign
    below, above = _POSITIVE[at - 1], _POSITIVE[at]
    gap_below, gap_above = magnitude - below[0], above[0] - magnitude
    if gap_below != gap_above:
        return (below if gap_below < gap_above else above)[1] | sign
    return (below if below[1] % 2 == 0 else above)[1] | sign


def oracle(values) -> np.ndarray:
    return np.array([nearest_bits(v) for v in values], dtype=np.uint16)


def bits_of(t: torch.Tensor) -> np.ndarray:
    return t.view(torch.int16).numpy().view(np.uint16).reshape(-1)


def _ties_and_neighbours(rng, count):
    """float32 values whose dropped 16 bits are exactly one half (ties), just below or above it,
    plus random ones: where truncation and rounding part ways."""
    kept = rng.integers(0, 0x7F7F, count, dtype=np.uint32) << 16
    low = rng.choice(np.array([0x8000, 0x7FFF, 0x8001, 0xFFFF, 0x0001], np.uint32), count)
    signs = rng.integers(0, 2, count, dtype=np.uint32) << 31
    values = (kept | low | signs).view(np.float32)
    return values[np.isfinite(values)]


# --- the conversion itself (tritonml/core/bfloat16.py) --------------------------------------------
def test_float32_ties_round_to_even_and_specials():
    rng = np.random.default_rng(0)
    values = np.concatenate([_ties_and_neighbours(rng, 4000), np.array(
        [0.0, -0.0, 1e-45, -1e-45, 3.4e38, -3.4e38, 3.3961e38, np.inf, -np.inf], np.float32)])
    assert np.array_equal(_bfloat16.from_values(values), oracle(values.tolist()))
    nan = _bfloat16.from_values(np.array([np.nan], np.float32))
    assert _bfloat16.to_float32(nan)[0] != _bfloat16.to_float32(nan)[0]


def test_float64_rounds_once():
    rng = np.random.default_rng(1)
    base = _ties_and_neighbours(rng, 2000).astype(np.float64)
    # A hair off a bfloat16 tie: rounding through float32 first would land on the tie and then go
    # to even; one rounding goes to the nearer side.
    nudged = np.concatenate([base * (1 + 2.0 ** -40), base * (1 - 2.0 ** -40), base,
                             rng.standard_normal(500) * 10.0 ** rng.integers(-40, 38, 500),
                             np.array([1e-50, -1e-50, 1e39, -1e300, 2.625])])
    assert np.array_equal(_bfloat16.from_values(nudged), oracle(nudged.tolist()))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
                                   np.int64, np.uint64])
def test_integers_round_once(dtype):
    rng = np.random.default_rng(2)
    info = np.iinfo(dtype)
    specials = [info.min, info.max, 0, 1, 255, 257, 2 ** 30 + 2 ** 22 + 1] + (
        [2 ** 62 + 2 ** 54 + 1, 2 ** 53 + 1, -(2 ** 62) - 2 ** 54 - 1, -(2 ** 63) + 1]
        if info.bits == 64 else [])
    specials = [v for v in specials if info.min <= v <= info.max]
    values = np.concatenate([np.array(specials, dtype=dtype),
                             rng.integers(info.min, info.max, 3000, dtype=dtype, endpoint=True)])
    assert np.array_equal(_bfloat16.from_values(values), oracle([int(v) for v in values]))


# --- a plain Triton kernel under the interpreter -------------------------------------------------
@triton.jit
def _convert_kernel(x_ptr, out_ptr, N: tl.constexpr, OUT: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets).to(OUT))


@triton.jit
def _arithmetic_kernel(a_ptr, b_ptr, sum_ptr, product_ptr, max_ptr, exp_ptr, less_ptr,
                       N: tl.constexpr):
    offsets = tl.arange(0, N)
    a = tl.load(a_ptr + offsets)
    b = tl.load(b_ptr + offsets)
    tl.store(sum_ptr + offsets, a + b)
    tl.store(product_ptr + offsets, a * b)
    tl.store(max_ptr + offsets, tl.maximum(a, b))
    tl.store(exp_ptr + offsets, tl.exp(a.to(tl.float32)).to(tl.bfloat16))
    tl.store(less_ptr + offsets, (a < b).to(tl.int8))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64,
                                   torch.int32, torch.uint8])
def test_kernel_conversion_to_bfloat16(dtype):
    rng = np.random.default_rng(3)
    if dtype.is_floating_point:
        source = np.concatenate([_ties_and_neighbours(rng, 60).astype(np.float64),
                                 [1.01318359375, 2.625, -3.0, 1e-30]])[:64]
        x = torch.from_numpy(source).to(dtype)
    else:
        info = torch.iinfo(dtype)
        x = torch.from_numpy(rng.integers(info.min, info.max, 64, endpoint=True)).to(dtype)
    out = torch.empty(64, dtype=torch.bfloat16)
    _convert_kernel[(1,)](x, out, 64, tl.bfloat16)
    expected = x.double().tolist() if dtype.is_floating_point else x.tolist()
    assert np.array_equal(bits_of(out), oracle(expected))


def test_kernel_arithmetic_on_bfloat16_operands():
    rng = np.random.default_rng(4)
    a = torch.from_numpy(rng.standard_normal(128)).to(torch.bfloat16)
    b = torch.from_numpy(rng.standard_normal(128) * 1e-2).to(torch.bfloat16)
    sums, products, maxima, exps = (torch.empty(128, dtype=torch.bfloat16) for _ in range(4))
    less = torch.empty(128, dtype=torch.int8)
    _arithmetic_kernel[(1,)](a, b, sums, products, maxima, exps, less, 128)
    fa, fb = [Fraction(v) for v in a.double().tolist()], [Fraction(v) for v in b.double().tolist()]
    assert np.array_equal(bits_of(sums), oracle([x + y for x, y in zip(fa, fb)]))
    assert np.array_equal(bits_of(products), oracle([x * y for x, y in zip(fa, fb)]))
    assert np.array_equal(bits_of(maxima), oracle([max(x, y) for x, y in zip(fa, fb)]))
    assert np.array_equal(less.numpy(), np.array([x < y for x, y in zip(fa, fb)], np.int8))
    exp32 = np.exp(a.float().numpy())  # float32 exp, then one rounding
    assert np.array_equal(bits_of(exps), oracle(exp32.astype(np.float64).tolist()))


# --- the library, end to end ---------------------------------------------------------------------
@triton.jit
def _keep(xs, index):
    return (xs[0],)


@triton.jit
def _add(a, b):
    return (a[0] + b[0],)


@triton.jit
def _finish(state, count):
    return (state[0],)


def _grid_values(rng, shape, step=2.0 ** -8, span=4):
    """Multiples of ``step`` in [-span, span]: sums of a few hundred stay exact in float32, so the
    exact sum's nearest bfloat16 is the one right answer."""
    return torch.from_numpy(rng.integers(-span / step, span / step, shape) * step).to(torch.bfloat16)


def test_documented_cumulative_sum_case():
    x = torch.tensor([1.0, 0.01318359375], dtype=torch.bfloat16)
    assert tritonml.cumulative_sum(x, 0).tolist() == [1.0, 1.015625]


@pytest.mark.parametrize("reverse, exclusive", [(False, False), (True, True)])
def test_cumulative_sum_and_product_round_to_nearest(reverse, exclusive):
    rng = np.random.default_rng(5)
    x = _grid_values(rng, (6, 300))
    exact = np.array([[Fraction(v) for v in row] for row in x.double().tolist()], dtype=object)
    if reverse:
        exact = exact[:, ::-1]
    running = np.cumsum(exact, axis=1)
    if exclusive:
        running = np.concatenate([np.full((6, 1), Fraction(0), dtype=object), running[:, :-1]], 1)
    if reverse:
        running = running[:, ::-1]
    got = tritonml.cumulative_sum(x, 1, reverse=reverse, exclusive=exclusive)
    assert np.array_equal(bits_of(got), oracle(running.reshape(-1).tolist()))
    # Products of a few factors of 1 + k/64 stay exact in float32.
    factors = torch.from_numpy(1 + rng.integers(-8, 8, (6, 3)) / 64).to(torch.bfloat16)
    exact = np.cumprod(np.array([[Fraction(v) for v in row] for row in factors.double().tolist()],
                                dtype=object), axis=1)
    got = tritonml.cumulative_product(factors, 1)
    assert np.array_equal(bits_of(got), oracle(exact.reshape(-1).tolist()))


@pytest.mark.parametrize("function", ["sum", "average", "sum_square"])
def test_reduce_rounds_to_nearest(function):
    rng = np.random.default_rng(6)
    x = _grid_values(rng, (8, 256), step=2.0 ** -4, span=2)
    rows = [[Fraction(v) for v in row] for row in x.double().tolist()]
    exact = {"sum": [sum(r) for r in rows], "average": [sum(r) / len(r) for r in rows],
             "sum_square": [sum(v * v for v in r) for r in rows]}[function]
    got = tritonml.reduce(x, function, 1)
    assert np.array_equal(bits_of(got), oracle(exact))


def test_associative_scan_and_linear_recurrence_round_to_nearest():
    rng = np.random.default_rng(7)
    x = _grid_values(rng, (4, 200))
    (got,) = tritonml.associative_scan(_add, (x,), axis=1)
    exact = np.cumsum(np.array([[Fraction(v) for v in row] for row in x.double().tolist()],
                               dtype=object), axis=1)
    assert np.array_equal(bits_of(got), oracle(exact.reshape(-1).tolist()))
    # Gates of 1/2 and 1, tokens on a coarse grid, 12 steps: every h is exact in float32.
    gates = torch.from_numpy(rng.choice([0.5, 1.0], (4, 12))).to(torch.bfloat16)
    tokens = _grid_values(rng, (4, 12), step=2.0 ** -2)
    h = tritonml.linear_recurrence(gates, tokens, axis=1)
    expected = []
    for g_row, t_row in zip(gates.double().tolist(), tokens.double().tolist()):
        state = Fraction(0)
        for g, t in zip(g_row, t_row):
            state = Fraction(g) * state + Fraction(t)
            expected.append(state)
    assert np.array_equal(bits_of(h), oracle(expected))


def test_welford_mean_rounds_to_nearest():
    # Means of 1 + 3 * 2**-9 and 2 - 3 * 2**-9: three quarters of a bfloat16 ulp past a value, so
    # truncation and rounding give different answers.
    x = torch.tensor([[1.0, 1.0 + 3 * 2 ** -8] * 4, [2.0, 2.0 - 3 * 2 ** -8] * 4],
                     dtype=torch.bfloat16)
    var, mean = tritonml.reduce_with(tritonml.records.ready_reductions.welford, x, 1)
    rows = [[Fraction(v) for v in row] for row in x.double().tolist()]
    means = [sum(r) / len(r) for r in rows]
    assert np.array_equal(bits_of(mean), oracle(means))
    variances = [sum((v - m) ** 2 for v in r) / (len(r) - 1) for r, m in zip(rows, means)]
    assert np.array_equal(bits_of(var), oracle(variances))


@pytest.mark.parametrize("state_dtype", [torch.float64, torch.int64])
def test_reduction_with_wide_state_and_bfloat16_output(state_dtype):
    """A user Reduction that sums in float64 (or int64) and writes bfloat16: 2.625 stays 2.625."""
    reduction = tritonml.Reduction(
        "sum_to_bf16", _keep, _add, _finish, identity=(0,),
        state_dtypes=lambda dtypes: (state_dtype,), output_dtypes=lambda dtypes: (torch.bfloat16,),
        load_dtypes=lambda dtypes: (state_dtype,))
    if state_dtype.is_floating_point:
        x = torch.tensor([[2.0, 0.625], [1.0, 2.0 ** -9], [300.5, 0.0]], dtype=torch.float64)
    else:
        x = torch.tensor([[2, 1], [2 ** 40 + 2 ** 32, 1], [-7, 264]], dtype=torch.int64)
    got = tritonml.reduce_with(reduction, x, 1)
    exact = [sum(Fraction(v) for v in row) for row in x.tolist()]
    assert np.array_equal(bits_of(got), oracle(exact))
