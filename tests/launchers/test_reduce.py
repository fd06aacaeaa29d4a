"""tritonml.reduce (DirectML's reduce operator): semantics against a numpy oracle.

DirectML's documented examples, every function x dtype pair, axes x layouts x keepdims x out=,
NaN / inf / ties, empty axes, index dtypes. Regimes, determinism, accuracy: test_reduce_regimes.py;
bad input: test_reduce_errors.py; GPU compilation: test_reduce_gpu_compile.py.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import tritonml
from tritonml.runtime import trace as _trace
from tritonml import examples
from tritonml.core.dtypes import FLOAT_DTYPES, INT_DTYPES

from benchmarks.reduce_oracle import (FLOAT_ONLY, FUNCTIONS, INDEX_FUNCTIONS, assert_matches, bits,
                                      expected_tensor, make_input, result_shape, supported)
from tests.reduce_helpers import ALL_DTYPES, LAYOUTS, strided_out, with_layout

AXES_CASES = {
    "single": (1,),
    "adjacent": (1, 2),
    "apart": (0, 2),
    "all": None,
    "negative": -1,
    "negative pair": (-3, -1),
}


def dtype_id(dtype):
    return str(dtype).replace("torch.", "")


def run_and_check(x, function, axes, keepdims=True, use_out=None, index_dtype=torch.int64,
                  context=""):
    expected = expected_tensor(x, function, axes, keepdims, index_dtype)
    before = x.clone()
    kwargs = dict(keepdims=keepdims, index_dtype=index_dtype)
    if use_out == "contiguous":
        kwargs["out"] = torch.full(expected.shape, 3, dtype=expected.dtype)
    elif use_out == "strided":
        kwargs["out"] = strided_out(tuple(expected.shape), expected.dtype)
    result = tritonml.reduce(x, function, axes, **kwargs)
    if use_out:
        assert result is kwargs["out"]
    assert_matches(result, expected, context or f"{function} axes={axes} keepdims={keepdims}")
    assert bits(x) == bits(before), "x was modified"
    return result


# ---------------------------------------------------------------------------------------------
# DirectML's examples and the API surface
# ---------------------------------------------------------------------------------------------
def test_directml_reduce_examples_are_listed_verbatim():
    titles = [e.title for e in examples.REDUCE_EXAMPLES]
    assert titles == ["SUM, Axes {0}", "SUM, Axes {1}", "SUM, Axes {0,1}", "ARGMAX, Axes {0,1}"]
    assert all(e in examples.all_examples() for e in examples.REDUCE_EXAMPLES)
    assert examples.REDUCE_INPUT == [[1, 2, 3], [3, 0, 4], [2, 4, 2]]
    assert examples.REDUCE_ARGMAX_INPUT == [[1, 2, 3], [3, 0, 4], [2, 5, 2]]


@pytest.mark.parametrize("example", examples.REDUCE_EXAMPLES, ids=lambda e: e.title)
def test_directml_reduce_example_gives_documented_output(example):
    result = examples.run_example(example)
    assert result.dtype == getattr(torch, example.expected_dtype)
    assert result.tolist() == example.expected


def test_reduce_function_enum_has_directml_members():
    assert [f.name for f in tritonml.ReduceFunction] == list(FUNCTIONS)


@pytest.mark.parametrize("spelling", ["sum", "SUM", "Sum", " sum ", tritonml.ReduceFunction.SUM])
def test_function_accepts_member_or_name_in_any_case(spelling):
    x = torch.tensor(examples.REDUCE_INPUT, dtype=torch.float32)
    assert tritonml.reduce(x, spelling, 0).tolist() == [[6, 6, 9]]


def test_log_sum_exp_name_with_underscores():
    x = torch.tensor([0.0, 0.0])
    assert tritonml.reduce(x, "log_sum_exp").item() == pytest.approx(np.log(2.0))


def test_default_axes_reduce_everything_and_keep_rank():
    x = make_input((2, 3, 4), torch.float32)
    assert tritonml.reduce(x, "sum").shape == (1, 1, 1)
    assert tritonml.reduce(x, "sum", keepdims=False).shape == ()


# ---------------------------------------------------------------------------------------------
# Every function x dtype pair (axes, layout, keepdims, out= rotate across the pairs)
# ---------------------------------------------------------------------------------------------
PAIRS = [(f, d) for f in FUNCTIONS for d in ALL_DTYPES if supported(f, d)]


@pytest.mark.parametrize("index, function, dtype",
                         [(i, f, d) for i, (f, d) in enumerate(PAIRS)],
                         ids=[f"{f}-{dtype_id(d)}" for f, d in PAIRS])
def test_every_function_dtype_pair_matches_oracle(index, function, dtype):
    axes = list(AXES_CASES.values())[index % len(AXES_CASES)]
    layout = LAYOUTS[(index // 3) % len(LAYOUTS)]
    keepdims = index % 2 == 0
    use_out = (None, "contiguous", "strided")[(index // 2) % 3]
    x = with_layout(make_input((4, 5, 6), dtype, function, seed=index), layout)
    run_and_check(x, function, axes, keepdims, use_out,
                  context=f"{function} {dtype_id(dtype)} axes={axes} {layout} keepdims={keepdims} "
                          f"out={use_out}")


def test_every_float_only_function_is_covered_for_floats_only():
    assert {f for f, d in PAIRS if d in INT_DTYPES} == set(FUNCTIONS) - set(FLOAT_ONLY)


# ---------------------------------------------------------------------------------------------
# Axes x layouts x keepdims x out= (functions rotate; float32 and int32 alternate)
# ---------------------------------------------------------------------------------------------
MATRIX = list(itertools.product(AXES_CASES, LAYOUTS, (True, False)))


@pytest.mark.parametrize("index, axes_name, layout, keepdims",
                         [(i, *case) for i, case in enumerate(MATRIX)],
                         ids=[f"{a}-{l}-{'keep' if k else 'drop'}" for a, l, k in MATRIX])
def test_axes_layout_keepdims_out_matrix(index, axes_name, layout, keepdims):
    axes = AXES_CASES[axes_name]
    dtype = (torch.float32, torch.int32)[index % 2]
    for step in range(4):  # four functions per case; over the matrix every function meets each
        function = FUNCTIONS[(index * 5 + step * 3) % len(FUNCTIONS)]
        if not supported(function, dtype):
            function = "SUM_SQUARE" if step % 2 else "ARGMIN"
        use_out = (None, "contiguous", "strided")[(index + step) % 3]
        x = with_layout(make_input((3, 4, 5), dtype, function, seed=index * 4 + step), layout)
        run_and_check(x, function, axes, keepdims, use_out,
                      context=f"{function} {dtype_id(dtype)} {axes_name} {layout} "
                              f"keepdims={keepdims} out={use_out}")


@pytest.mark.parametrize("function", FUNCTIONS)
def test_rank4_transposed_non_adjacent_axes(function):
    x = make_input((3, 4, 5, 6), torch.float64, function, seed=7).permute(2, 0, 3, 1)
    run_and_check(x, function, (0, 3))
    run_and_check(x, function, (1, 2, 3), keepdims=False)


@pytest.mark.parametrize("function", ["SUM", "ARGMAX", "MIN", "LOG_SUM_EXP"])
def test_rank0_and_rank1_inputs(function):
    scalar = torch.tensor(1.5, dtype=torch.float32)
    for axes in (None, 0, -1, (0,)):
        result = run_and_check(scalar, function, axes)
        assert result.shape == ()
    run_and_check(make_input((7,), torch.float32, function), function, 0)
    run_and_check(make_input((7,), torch.float32, function), function, None, keepdims=False)


@pytest.mark.parametrize("function", ["ARGMAX", "ARGMIN", "SUM", "MAX"])
def test_rank8_permuted_view_with_many_reduced_dims(function):
    """ARGMAX over five reduced dims whose memory order interleaves kept dims and swaps two
    reduced ones: more non-mergeable reduced dims than the kernel takes (the copy path)."""
    base = make_input((2, 3, 2, 2, 3, 2, 2, 2), torch.float32, function, seed=3)
    memory_order = (0, 5, 1, 6, 2, 7, 4, 3)
    dense = base.permute(memory_order).contiguous()
    x = dense.permute(tuple(memory_order.index(i) for i in range(8)))
    assert torch.equal(x, base)
    run_and_check(x, function, (0, 1, 2, 3, 4))
    run_and_check(x, function, (1, 3, 6), keepdims=False)


def test_expanded_reduced_axis_counts_each_element():
    x = torch.tensor([[1.0], [2.0]]).expand(2, 5)  # stride 0 along the reduced axis
    assert tritonml.reduce(x, "sum", 1).flatten().tolist() == [5.0, 10.0]
    assert tritonml.reduce(x, "average", (0, 1)).item() == 1.5
    assert tritonml.reduce(x, "argmax", (0, 1)).item() == 5


# ---------------------------------------------------------------------------------------------
# NaN, infinities, ties
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_max_min_propagate_nan(dtype):
    x = make_input((4, 37), dtype, "MAX")
    x[1, 0] = float("nan")
    x[2, 36] = float("nan")
    x[3, 17] = float("nan")
    for function in ("MAX", "MIN"):
        result = tritonml.reduce(x, function, 1).flatten()
        assert not torch.isnan(result[0])
        assert torch.isnan(result[1:]).all()
        run_and_check(x, function, 1)
        assert torch.isnan(tritonml.reduce(x, function)).all()


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=dtype_id)
def test_argmax_argmin_return_first_nan(dtype):
    x = torch.zeros(3, 40, dtype=dtype)
    x[0, 5] = 100.0
    x[0, 20] = float("nan")
    x[0, 30] = float("nan")
    x[1, 39] = float("nan")
    x[2, 2] = -100.0
    for function in ("ARGMAX", "ARGMIN"):
        result = tritonml.reduce(x, function, 1, keepdims=False).tolist()
        assert result[:2] == [20, 39]
        assert result[2] == (0 if function == "ARGMAX" else 2)
        assert tritonml.reduce(x, function).item() == 20
        run_and_check(x, function, (0, 1))
        run_and_check(x.t(), function, 0)


@pytest.mark.parametrize("function", ["SUM", "AVERAGE", "L1", "L2", "SUM_SQUARE", "LOG_SUM",
                                      "LOG_SUM_EXP", "MULTIPLY"])
def test_nan_propagates_through_accumulating_functions(function):
    x = make_input((2, 9), torch.float32, function)
    x[1, 4] = float("nan")
    result = tritonml.reduce(x, function, 1).flatten()
    assert torch.isnan(result[1])
    run_and_check(x, function, 1)


INF = float("inf")
SPECIAL_ROWS = {
    "+inf": [1.0, INF, -2.0],
    "-inf": [1.0, -INF, -2.0],
    "all -inf": [-INF, -INF, -INF],
    "both infs": [-INF, INF, 0.0],
    "nan and inf": [INF, float("nan"), 0.0],
    "zero and inf": [0.0, INF, 1.0],
    "huge": [1e30, 1e30, -1e30],
}


@pytest.mark.parametrize("row", SPECIAL_ROWS, ids=str)
@pytest.mark.parametrize("function", FUNCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=dtype_id)
def test_special_values_match_oracle(row, function, dtype):
    values = SPECIAL_ROWS[row]
    if dtype == torch.float16 and row == "huge":
        values = [6e4, 6e4, -6e4]
    run_and_check(torch.tensor([values], dtype=dtype), function, 1)


def test_log_sum_exp_infinities_and_nan():
    cases = {(1.0, INF): INF, (-INF, -INF): -INF, (-INF, INF): INF, (INF, INF): INF,
             (float("nan"), INF): float("nan"), (1000.0, 1000.0): 1000.0 + np.log(2.0),
             (-1000.0, -1000.0): -1000.0 + np.log(2.0)}
    for values, want in cases.items():
        got = tritonml.reduce(torch.tensor(values), "log_sum_exp").item()
        if np.isnan(want):
            assert np.isnan(got), values
        else:
            assert got == pytest.approx(want, rel=1e-6), values


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.uint8,
                                   torch.int64, torch.uint64], ids=dtype_id)
def test_argmax_argmin_ties_give_first_occurrence(dtype):
    x = torch.zeros(3, 50, dtype=torch.int64)
    x[0, [7, 9, 40]] = 5
    x[1, :] = 3
    x[2, [45, 3]] = 2
    x = x.to(dtype)
    assert tritonml.reduce(x, "argmax", 1, keepdims=False).tolist() == [7, 0, 3]
    assert tritonml.reduce(x, "argmin", 1, keepdims=False).tolist() == [0, 0, 0]
    assert tritonml.reduce(x, "argmax").item() == 7
    for axes in ((0,), (0, 1)):
        run_and_check(x, "ARGMAX", axes)
        run_and_check(x.t(), "ARGMIN", axes)


def test_argmax_of_integer_extremes():
    for dtype in INT_DTYPES:
        info = torch.iinfo(dtype)
        x = torch.tensor([info.min, info.max, info.max, info.min]).to(dtype) if dtype != \
            torch.uint64 else torch.tensor([0, -1, -1, 0], dtype=torch.int64).view(torch.uint64)
        assert tritonml.reduce(x, "argmax").item() == 1
        assert tritonml.reduce(x, "argmin").item() == 0
        ones = x[[0, 0]]  # every element equals the MAX identity for signed types
        assert tritonml.reduce(ones, "argmax").item() == 0


def test_multi_axis_argmax_index_is_row_major_in_original_axis_order():
    base = torch.zeros(3, 4, 5)
    base[2, 1, 3] = 1.0
    base[1, 3, 4] = 1.0  # a tie: (1, 3, 4) comes first row-major over axes (0, 1, 2)
    for x in (base, base.permute(2, 0, 1).contiguous().permute(1, 2, 0),
              base.transpose(0, 2).contiguous().transpose(0, 2)):
        assert tritonml.reduce(x, "argmax").item() == 1 * 20 + 3 * 5 + 4
        assert tritonml.reduce(x, "argmax", (0, 2), keepdims=False).tolist() == [0, 13, 0, 9]
        run_and_check(x, "ARGMAX", (2, 0))


# ---------------------------------------------------------------------------------------------
# Integers wrap modulo 2**bits
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", INT_DTYPES, ids=dtype_id)
def test_integer_results_wrap_modulo_2_to_bits(dtype):
    info = torch.iinfo(dtype)
    if dtype == torch.uint64:
        x = torch.tensor([-1, -1, 3], dtype=torch.int64).view(torch.uint64)
    else:
        x = torch.tensor([info.max, info.max, 3]).to(dtype)
    bits = dtype.itemsize * 8
    top = (1 << bits) - 1 if dtype == torch.uint64 else info.max
    want_sum = (2 * top + 3) % (1 << bits)
    want_prod = (top * top * 3) % (1 << bits)
    if info.min < 0:
        want_sum = want_sum - (1 << bits) if want_sum > info.max else want_sum
        want_prod = want_prod - (1 << bits) if want_prod > info.max else want_prod
    got = tritonml.reduce(x, "sum")
    assert got.dtype == dtype
    as_int = (lambda t: t.view(torch.int64).item() % (1 << 64)) if dtype == torch.uint64 else \
        (lambda t: int(t.item()))
    assert as_int(got) == want_sum
    assert as_int(tritonml.reduce(x, "multiply")) == want_prod
    for function in ("SUM_SQUARE", "L1", "MAX", "MIN"):
        run_and_check(x, function, None)


# ---------------------------------------------------------------------------------------------
# Empty reduced axes and empty outputs
# ---------------------------------------------------------------------------------------------
def _identity(function, dtype):
    if function in ("SUM", "L1", "L2", "SUM_SQUARE"):
        return 0
    if function == "MULTIPLY":
        return 1
    if function in ("LOG_SUM", "LOG_SUM_EXP"):
        return -INF
    if function == "AVERAGE":
        return float("nan")
    if dtype in FLOAT_DTYPES:
        return INF if function == "MIN" else -INF
    info = torch.iinfo(dtype)
    return info.max if function == "MIN" else info.min


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, torch.int8,
                                   torch.uint8, torch.int64, torch.uint64], ids=dtype_id)
def test_empty_reduced_axis_gives_each_functions_identity(dtype):
    x = torch.empty(3, 0, 2, dtype=dtype)
    for function in FUNCTIONS:
        if function in INDEX_FUNCTIONS or not supported(function, dtype):
            continue
        want = _identity(function, dtype)
        for axes, keepdims, shape in (((1,), True, (3, 1, 2)), ((0, 1), False, (2,)),
                                      (None, True, (1, 1, 1))):
            result = tritonml.reduce(x, function, axes, keepdims=keepdims)
            assert result.shape == shape and result.dtype == dtype
            if dtype == torch.uint64:
                got = {v % (1 << 64) for v in result.view(torch.int64).flatten().tolist()}
            elif dtype in INT_DTYPES:
                got = set(result.flatten().tolist())
            else:
                got = set(result.double().flatten().tolist())
            if isinstance(want, float) and np.isnan(want):
                assert all(np.isnan(v) for v in got), (function, got)
            else:
                assert got == {want}, (function, axes, got)
        run_and_check(x, function, 1)


@pytest.mark.parametrize("function", INDEX_FUNCTIONS)
def test_argmax_argmin_over_empty_axis_raise(function):
    x = torch.empty(3, 0, 2)
    with pytest.raises(ValueError, match="axes"):
        tritonml.reduce(x, function, 1)
    with pytest.raises(ValueError, match="axes"):
        tritonml.reduce(x, function)
    assert tritonml.reduce(x, function, 2).shape == (3, 0, 1)  # nothing empty is reduced


def test_empty_output_launches_nothing():
    x = torch.empty(0, 4)
    with _trace.record() as rec:
        for function in FUNCTIONS:
            assert tritonml.reduce(x, function, 1).shape == (0, 1)
    assert rec.launches == []


# ---------------------------------------------------------------------------------------------
# Index dtypes
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64, torch.uint32, torch.uint64],
                         ids=dtype_id)
def test_index_dtype_sets_argmax_output_dtype(index_dtype):
    x = make_input((4, 6), torch.float16, "ARGMAX")
    for function in INDEX_FUNCTIONS:
        result = run_and_check(x, function, 1, index_dtype=index_dtype)
        assert result.dtype == index_dtype
    assert tritonml.reduce(x, "sum", index_dtype=index_dtype).dtype == torch.float16


def test_index_that_cannot_fit_index_dtype_raises_before_launch():
    big = torch.zeros(1).expand(2**31 + 1)  # stride 0: no memory behind it
    with _trace.record(execute=False) as rec:
        with pytest.raises(ValueError, match="index_dtype"):
            tritonml.reduce(big, "argmax", index_dtype=torch.int32)
        with pytest.raises(ValueError, match="index_dtype"):
            tritonml.reduce(torch.zeros(1).expand(2**32 + 1), "argmin", index_dtype=torch.uint32)
        assert rec.launches == []
        # the largest index that fits is fine (recorded, not run)
        tritonml.reduce(torch.zeros(1).expand(2**31), "argmax", index_dtype=torch.int32)
        tritonml.reduce(torch.zeros(1).expand(2**32), "argmax", index_dtype=torch.uint32)
        tritonml.reduce(big, "argmax", index_dtype=torch.int64)
        # SUM over the same view never returns an index: any index_dtype is accepted
        tritonml.reduce(big, "sum", index_dtype=torch.int32)
    assert len(rec.launches) == 4
    assert rec.launches[2].meta["INDEX_64"] and rec.launches[2].meta["STATE_DTYPES"][1].name == "int64"
