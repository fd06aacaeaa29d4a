"""The "chunked" scan regime (tritonml/kernels/scan_chunked.py, ``scan_chunked_kernel``): reduce,
then scan, in chunks of tiles, with one windowed look-back per group of chunks.

Every result is compared with an independent oracle: numpy in float64 or exact integers
(benchmarks/scan_oracle.py), or sequential Python loops over the recurrence
(test_associative_scan.py's ``oracle``, exact Python numbers), never with tritonml. Tiles, chunks
and windows are forced small (4 to 16 rows, 1 to 3 tiles a chunk, 2 to 4 chunks a group) so that
inputs of a few hundred elements cross many chunks and several groups, with lengths that are
multiples of nothing; the launch's grid is checked to be what the config asks (one program per
chunk). The kernel's memory-order machinery (tickets, status words, polls) is observed through
Triton's interpreter: the programs' order, the status words they poll and the round trips each
program makes.
"""
from __future__ import annotations

import collections
import contextlib
import inspect
import types

import numpy as np
import pytest
import torch
from triton.runtime import interpreter

import tritonml
from tritonml import runtime
from tritonml.core import layout as _layout
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ScanConfig
from tritonml.core.dtypes import ACC_TORCH_DTYPE, SUPPORTED_DTYPES
from tritonml.kernels.combine import compose_affine
from tritonml.runtime import resident as _resident
from tritonml.launchers.scan import (PRODUCT, SUM, associative_scan_states, cumulative_scan,
                                     scan_work)
from tritonml_autotune import select

from tests.lookback_knob import prefix_every
from benchmarks.scan_oracle import accumulation_allowance, scan_matches, scan_reference, to_numpy
from tests.launchers.test_associative_scan import (assert_matches, linear_py, linear_recurrence,
                                         matrix_product, matrix_py, max_with_index,
                                         max_with_index_py, oracle)
from tests.launchers.test_linear_recurrence import loop_reference
from tests.launchers.test_scan import make_layout, random_values
from tests.launchers.test_scan_regimes import shuffled_program_order  # noqa: F401  (a fixture)

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="runs in Triton's interpreter")

COMBINES = {"sum": SUM, "prod": PRODUCT}
DIRECTIONS = [(False, False), (False, True), (True, False), (True, True)]
DIRECTION_IDS = ["forward", "forward-exclusive", "reverse", "reverse-exclusive"]
# 4-row tiles, 2 tiles a chunk, 2 chunks a group: 43 elements are 11 tiles (the last of 3), 6
# chunks (the last of one tile), 3 groups.
SMALL = ScanConfig("chunked", 4, 1, chunk_tiles=2, window=2)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def chunks_of(axis_len: int, config: ScanConfig) -> int:
    """Chunks per chain: what the launcher's grid holds per independent scan."""
    return cdiv(cdiv(axis_len, config.block_axis), config.chunk_tiles)


def assert_one_chunked_launch(rec, chains: int, axis_len: int, config: ScanConfig):
    """The call made one chunked launch of one program per chunk (chains x chunks)."""
    assert [launch.name for launch in rec.launches] == ["scan_chunked_kernel"]
    assert rec.launches[0].grid[0] == chains * chunks_of(axis_len, config)


def check(result, x_np, axis, op, reverse, exclusive, initial=None, dtype=None):
    """``result`` against the numpy oracle: exact for integers, ulps plus the accumulation
    allowance for floats."""
    allowance = accumulation_allowance(x_np, axis, op, reverse, exclusive, dtype or result.dtype,
                                       initial)
    ok, msg = scan_matches(result, x_np, axis, op, reverse, exclusive, allowance, initial)
    assert ok, msg


def carry_oracle(x_np, axis, op, reverse, dtype, initial=None):
    """Each scan's last inclusive state (after its last element in traversal order) in the
    accumulation dtype: float64 for floats, exact modulo 2**64 in (u)int64 for integers."""
    int_dtype = None if dtype.is_floating_point else to_numpy(
        torch.empty(0, dtype=ACC_TORCH_DTYPE[dtype])).dtype
    run = scan_reference(x_np, axis, op, reverse, False, int_dtype=int_dtype, initial=initial)
    return np.take(run, 0 if reverse else x_np.shape[axis] - 1, axis=axis)


def wrap64(values) -> np.ndarray:
    """Exact Python integers as int64 two's complement (C wrap-around)."""
    wrap = np.vectorize(lambda v: (int(v) + 2 ** 63) % 2 ** 64 - 2 ** 63, otypes=[object])
    return wrap(np.asarray(values, dtype=object)).astype(np.int64)


# ---------------------------------------------------------------------------------------------
# Every dtype, both directions, inclusive and exclusive, sum and product
# ---------------------------------------------------------------------------------------------
PRODUCT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8,
                  torch.int64, torch.uint32)


@pytest.mark.parametrize("reverse,exclusive", DIRECTIONS, ids=DIRECTION_IDS)
@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_every_dtype_sums_in_chunks(dtype, reverse, exclusive):
    rng = np.random.default_rng(SUPPORTED_DTYPES.index(dtype) * 4 + 2 * reverse + exclusive)
    x = random_values((2, 43), dtype, "sum", rng)   # integers: the full range, wrapping
    with _trace.record() as rec:
        result = cumulative_scan(x, 1, SUM, reverse=reverse, exclusive=exclusive, config=SMALL)
    assert_one_chunked_launch(rec, 2, 43, SMALL)
    assert rec.launches[0].meta["COMMUTATIVE"] is True
    check(result, to_numpy(x), 1, "sum", reverse, exclusive)


@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True)],
                         ids=["forward", "reverse-exclusive"])
@pytest.mark.parametrize("dtype", PRODUCT_DTYPES, ids=str)
def test_products_in_chunks(dtype, reverse, exclusive):
    rng = np.random.default_rng(40 + PRODUCT_DTYPES.index(dtype))
    x = random_values((2, 43), dtype, "prod", rng)
    with _trace.record() as rec:
        result = cumulative_scan(x, 1, PRODUCT, reverse=reverse, exclusive=exclusive,
                                 config=SMALL)
    assert_one_chunked_launch(rec, 2, 43, SMALL)
    check(result, to_numpy(x), 1, "prod", reverse, exclusive)


# ---------------------------------------------------------------------------------------------
# initial= and return_carry=True
# ---------------------------------------------------------------------------------------------
CARRY_DTYPES = (torch.float32, torch.bfloat16, torch.float64, torch.int16, torch.uint64)


@pytest.mark.parametrize("reverse,exclusive", DIRECTIONS, ids=DIRECTION_IDS)
@pytest.mark.parametrize("op", ["sum", "prod"])
@pytest.mark.parametrize("dtype", CARRY_DTYPES, ids=str)
def test_initial_and_carry(dtype, op, reverse, exclusive):
    rng = np.random.default_rng(60 + CARRY_DTYPES.index(dtype) + 5 * reverse + 11 * exclusive)
    x = random_values((3, 39), dtype, op, rng)
    initial = random_values((3,), dtype, op, rng)
    with _trace.record() as rec:
        result, carry = cumulative_scan(x, 1, COMBINES[op], reverse=reverse, exclusive=exclusive,
                                        initial=initial, config=SMALL, return_carry=True)
    assert_one_chunked_launch(rec, 3, 39, SMALL)
    meta = rec.launches[0].meta
    assert meta["HAS_INITIAL"] and meta["STORE_CARRY"]
    x_np, init_np = to_numpy(x), to_numpy(initial)
    check(result, x_np, 1, op, reverse, exclusive, init_np)
    assert carry.dtype == ACC_TORCH_DTYPE[dtype] and carry.shape == (3,)
    want = carry_oracle(x_np, 1, op, reverse, dtype, init_np)
    if dtype.is_floating_point:
        # the tally in the accumulation dtype: its own rounding only, relative to sum |x|
        # (products: to the result)
        scale = (np.abs(init_np) + np.abs(x_np.astype(np.float64)).sum(1) if op == "sum"
                 else np.abs(want))
        eps = torch.finfo(carry.dtype).eps
        np.testing.assert_array_less(np.abs(carry.double().numpy() - want), 4 * 40 * eps * scale
                                     + np.finfo(np.float64).tiny)
    else:
        assert np.array_equal(carry.numpy(), want)


def test_carries_continue_a_chunked_scan_exactly():
    # Pieces scanned one after another, each from the carry the one before returned, in float32
    # with a float64 carry: piece lengths are multiples of the chunk, so each piece's chunks are
    # the whole scan's, and the pieces are the whole scan bit for bit.
    rng = np.random.default_rng(3)
    x = torch.from_numpy((1000.0 + rng.standard_normal((2, 96))).astype(np.float32))
    for reverse in (False, True):
        whole = cumulative_scan(x, 1, SUM, reverse=reverse, config=SMALL)
        check(whole, to_numpy(x), 1, "sum", reverse, False)
        pieces, carry = {}, None
        starts = (0, 32, 48)
        order = list(zip(starts, starts[1:] + (96,)))
        for start, stop in (order[::-1] if reverse else order):
            pieces[start], carry = cumulative_scan(x[:, start:stop], 1, SUM, reverse=reverse,
                                                   initial=carry, config=SMALL, return_carry=True)
        assert torch.equal(torch.cat([pieces[s] for s in starts], 1), whole)
        np.testing.assert_allclose(carry.numpy(), x.double().numpy().sum(1), rtol=1e-13)


# ---------------------------------------------------------------------------------------------
# Tile, chunk and window boundaries
# ---------------------------------------------------------------------------------------------
# (axis_len, block_axis, chunk_tiles, window): what it exercises
BOUNDARIES = {
    "one element": (1, 4, 2, 2),
    "shorter than a tile": (3, 4, 2, 2),
    "exactly one chunk": (8, 4, 2, 2),
    "chunk_tiles past the axis": (40, 4, 100, 2),
    "one group, the last chunk one element": (9, 4, 2, 2),
    "one full group": (16, 4, 2, 2),
    "a second group of one element": (17, 4, 2, 2),
    "one partial group": (97, 16, 3, 4),
    "two full groups, exact multiples": (64, 4, 2, 4),
    "a third group of one chunk": (65, 4, 2, 4),
    "chunks of one tile, seven groups": (100, 8, 1, 2),
    "six groups of odd chunks": (250, 4, 3, 4),
}


@pytest.mark.parametrize("reverse,exclusive", DIRECTIONS, ids=DIRECTION_IDS)
@pytest.mark.parametrize("case", list(BOUNDARIES))
def test_chunk_and_window_boundaries(case, reverse, exclusive):
    axis_len, block_axis, chunk_tiles, window = BOUNDARIES[case]
    config = ScanConfig("chunked", block_axis, 1, chunk_tiles=chunk_tiles, window=window)
    rng = np.random.default_rng(axis_len + block_axis)
    # exact integers: a chunk folded twice, or left out, or a group's prefix taken from the
    # wrong chunk changes the result
    x = random_values((2, axis_len), torch.int64, "sum", rng)
    with _trace.record() as rec:
        result = cumulative_scan(x, 1, SUM, reverse=reverse, exclusive=exclusive, config=config)
    assert_one_chunked_launch(rec, 2, axis_len, config)
    check(result, to_numpy(x), 1, "sum", reverse, exclusive)


def test_the_boundary_cases_cover_what_they_say():
    # one chunk, exactly window chunks, window + 1, and several groups are all present
    chunks = {case: chunks_of(n, ScanConfig("chunked", b, 1, chunk_tiles=c, window=w))
              for case, (n, b, c, w) in BOUNDARIES.items()}
    windows = {case: w for case, (_, _, _, w) in BOUNDARIES.items()}
    assert chunks["exactly one chunk"] == chunks["chunk_tiles past the axis"] == 1
    assert chunks["one full group"] == windows["one full group"]
    assert chunks["a second group of one element"] == windows["one full group"] + 1
    assert cdiv(chunks["six groups of odd chunks"], 4) == 6
    assert cdiv(chunks["chunks of one tile, seven groups"], 2) == 7


@pytest.mark.parametrize("shape,axis", [((3, 0), 1), ((0, 5), 1), ((0, 5), 0), ((3, 1), 1),
                                        ((1,), 0), ((), 0)])
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True)],
                         ids=["forward", "reverse-exclusive"])
def test_empty_and_length_one_axes(shape, axis, reverse, exclusive):
    rng = np.random.default_rng(9)
    x = random_values(shape or (1,), torch.float32, "sum", rng).reshape(shape)
    initial = random_values(shape[:axis] + shape[axis + 1:] or (1,), torch.float32, "sum",
                            rng).reshape(shape[:axis] + shape[axis + 1:])
    result, carry = cumulative_scan(x, axis, SUM, reverse=reverse, exclusive=exclusive,
                                    initial=initial, config=SMALL, return_carry=True)
    assert result.shape == x.shape
    x_np, init_np = to_numpy(x), to_numpy(initial)
    if x.numel():
        check(result, x_np, axis if x.dim() else 0, "sum", reverse, exclusive, init_np)
    # the carry: the initial plus every element of the scan (just the initial on an empty axis)
    summed = x_np.astype(np.float64).sum(axis) if x.dim() else x_np.astype(np.float64)
    np.testing.assert_allclose(carry.numpy(), init_np + summed, rtol=1e-15)


# ---------------------------------------------------------------------------------------------
# Strided axes (columns), outer dims, layouts, negative views, out= and in place
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.int32, torch.float64], ids=str)
@pytest.mark.parametrize("reverse,exclusive", DIRECTIONS, ids=DIRECTION_IDS)
def test_strided_axis_with_outer_dims(dtype, reverse, exclusive):
    # (3, 37, 6) along dim 1: 3 outer x 2 blocks of 4 inner lanes (the second half masked)
    config = ScanConfig("chunked", 4, 4, chunk_tiles=2, window=2)
    rng = np.random.default_rng(70 + 2 * reverse + exclusive)
    x = random_values((3, 37, 6), dtype, "sum", rng)
    with _trace.record() as rec:
        result = cumulative_scan(x, 1, SUM, reverse=reverse, exclusive=exclusive, config=config)
    assert_one_chunked_launch(rec, 3 * 2, 37, config)
    check(result, to_numpy(x), 1, "sum", reverse, exclusive)


def _out_tensor(x: torch.Tensor, mode: str):
    if mode == "new":
        return None
    if mode == "in place":
        return x
    order = list(reversed(range(x.dim())))   # a transposed destination, filled with a sentinel
    return torch.full([x.shape[i] for i in order], 7, dtype=x.dtype).permute(order)


# (shape, axis, config): a strided axis tiled 2 lanes wide, and a contiguous one
LAYOUT_SHAPES = {
    "strided axis": ((3, 37, 2), 1, ScanConfig("chunked", 4, 2, chunk_tiles=2, window=2)),
    "contiguous axis": ((2, 3, 37), 2, ScanConfig("chunked", 4, 1, chunk_tiles=3, window=2)),
}


# an expanded view is never written in place (its elements overlap)
LAYOUT_CASES = [(shape, layout, out_mode) for shape in LAYOUT_SHAPES
                for layout in ("contiguous", "transposed", "stepped", "expanded", "expanded axis")
                for out_mode in ("new", "out", "in place")
                if not (out_mode == "in place" and layout.startswith("expanded"))]


@pytest.mark.parametrize("shape_name,layout,out_mode", LAYOUT_CASES)
def test_layouts_out_and_in_place(shape_name, layout, out_mode):
    shape, axis, config = LAYOUT_SHAPES[shape_name]
    rng = np.random.default_rng(len(layout) + len(out_mode))
    values = random_values(shape, torch.float64, "sum", rng)
    if layout == "expanded axis":   # stride 0 along the scanned axis: one value repeated
        x = values.narrow(axis, 0, 1).clone().expand(shape)
        assert x.stride(axis) == 0
    else:
        x = make_layout(values, layout, axis)
    x_np = to_numpy(x)
    out = _out_tensor(x, out_mode)
    # both directions, inclusive and exclusive, spread over the cases
    reverse, exclusive = out_mode != "new", layout in ("transposed", "expanded", "stepped")
    with _trace.record() as rec:
        result = cumulative_scan(x, axis, SUM, reverse=reverse, exclusive=exclusive, out=out,
                                 config=config)
    if out is not None:
        assert result is out
    assert rec.launches[0].name == "scan_chunked_kernel"
    check(result, x_np, axis, "sum", reverse, exclusive)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32], ids=str)
@pytest.mark.parametrize("reverse,exclusive", [(False, True), (True, False)],
                         ids=["forward-exclusive", "reverse"])
def test_negative_views_of_x_out_and_initial(dtype, reverse, exclusive):
    # A negative-bit view's memory holds the negated values; the kernels negate on load and store.
    rng = np.random.default_rng(5)
    values = torch.from_numpy(rng.integers(-50, 50, (3, 45))).to(dtype)
    init_values = torch.from_numpy(rng.integers(-50, 50, (3,))).to(dtype)
    x, initial = (-values)._neg_view(), (-init_values)._neg_view()
    out = torch.zeros_like(values)._neg_view()
    assert x.is_neg() and out.is_neg() and torch.equal(x, values)
    with _trace.record() as rec:
        result = cumulative_scan(x, 1, SUM, reverse=reverse, exclusive=exclusive,
                                 initial=initial, out=out, config=SMALL)
    assert result is out
    assert rec.launches[0].meta["NEGATE_X"] == (True,) == rec.launches[0].meta["NEGATE_OUT"]
    check(result.resolve_neg(), to_numpy(values), 1, "sum", reverse, exclusive,
          to_numpy(init_values))


@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True)],
                         ids=["forward", "reverse-exclusive"])
def test_64_bit_indices(monkeypatch, reverse, exclusive):
    # The INDEX_64 specialization (tickets, chunks and workspace slots in int64) on a small input:
    # the launcher's limit for 32-bit offsets lowered below this input's reach.
    monkeypatch.setattr(_layout, "INT32_LIMIT", 100)
    rng = np.random.default_rng(7)
    x = random_values((3, 45, 2), torch.int32, "sum", rng)
    initial = random_values((3, 2), torch.int32, "sum", rng)
    config = ScanConfig("chunked", 4, 2, chunk_tiles=2, window=2)
    with _trace.record() as rec:
        result, carry = cumulative_scan(x, 1, SUM, reverse=reverse, exclusive=exclusive,
                                        initial=initial, config=config, return_carry=True)
    assert rec.launches[0].meta["INDEX_64"] is True
    assert_one_chunked_launch(rec, 3, 45, config)
    check(result, to_numpy(x), 1, "sum", reverse, exclusive, to_numpy(initial))
    assert np.array_equal(carry.numpy(), carry_oracle(to_numpy(x), 1, "sum", reverse, x.dtype,
                                                      to_numpy(initial)))


# ---------------------------------------------------------------------------------------------
# The public functions, with the chunked config forced where the tuner would choose
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def choose_chunked(monkeypatch):
    """Make the config choice (``select.choose_scan``) answer ``config``; plans remembered from
    other choices are forgotten before and after."""
    def force(config: ScanConfig):
        monkeypatch.setattr(select, "choose_scan",
                            lambda *args, **kwargs: types.SimpleNamespace(config=config))
    runtime.clear()
    yield force
    runtime.clear()


def test_cumulative_sum_and_product_through_the_torch_ops(choose_chunked):
    choose_chunked(SMALL)
    rng = np.random.default_rng(15)
    x = random_values((3, 50), torch.float32, "sum", rng)
    x_np = to_numpy(x)
    initial = random_values((3,), torch.float32, "sum", rng)
    with _trace.record() as rec:
        summed = tritonml.cumulative_sum(x, 1)
        reverse_exclusive = tritonml.cumulative_sum(x, 1, reverse=True, exclusive=True,
                                                    initial=initial)
        out = torch.empty_like(x)
        assert tritonml.cumulative_sum(x, 1, out=out) is out
        result, carry = tritonml.cumulative_sum(x, 1, initial=initial, return_carry=True)
        in_place = x.clone()
        tritonml.cumulative_sum(in_place, 1, out=in_place)
        factors = random_values((3, 50), torch.float32, "prod", rng)
        product = tritonml.cumulative_product(factors, 1, exclusive=True)
    assert {launch.name for launch in rec.launches} == {"scan_chunked_kernel"}
    assert len(rec.launches) == 6
    for got in (summed, out, in_place):
        check(got, x_np, 1, "sum", False, False)
    check(reverse_exclusive, x_np, 1, "sum", True, True, to_numpy(initial))
    check(result, x_np, 1, "sum", False, False, to_numpy(initial))
    np.testing.assert_allclose(carry.numpy(), to_numpy(initial) + x_np.astype(np.float64).sum(1),
                               rtol=1e-14)
    check(product, to_numpy(factors), 1, "prod", False, True)


@pytest.mark.parametrize("reverse", [False, True])
def test_linear_recurrence_in_chunks(choose_chunked, reverse):
    # tritonml.linear_recurrence with the chunked config: the gates' running product is scanned
    # but not stored (STORE), h is checked against the step-by-step loop in float64.
    config = ScanConfig("chunked", 4, 2, chunk_tiles=2, window=2)
    choose_chunked(config)
    rng = np.random.default_rng(16 + reverse)
    gates = torch.from_numpy(rng.uniform(-0.95, 0.95, (3, 41))).to(torch.float32)
    tokens = torch.from_numpy(rng.standard_normal((41, 3))).to(torch.float32).t()
    initial = torch.from_numpy(rng.standard_normal(3)).to(torch.float32)
    with _trace.record() as rec:
        h, carry = tritonml.linear_recurrence(gates, tokens, 1, reverse=reverse,
                                              initial=initial, return_carry=True)
    assert [launch.name for launch in rec.launches] == ["scan_chunked_kernel"]
    assert rec.launches[0].meta["STORE"] == (False, True)
    want = loop_reference(gates.numpy(), tokens.numpy(), 1, reverse, initial=initial.numpy())
    np.testing.assert_allclose(h.double().numpy(), want, rtol=1e-5, atol=1e-5)
    assert carry.dtype == torch.float64
    np.testing.assert_allclose(carry.numpy(), want[:, 0 if reverse else -1], rtol=1e-12,
                               atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Tuple states through tritonml.associative_scan (any combine: no element-wise fold)
# ---------------------------------------------------------------------------------------------
TUPLE_CONFIG = ScanConfig("chunked", 4, 2, chunk_tiles=2, window=2)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive,identity", [(False, None), (False, (1.0, 0.0)),
                                                (True, (1.0, 0.0))],
                         ids=["inclusive-no-identity", "inclusive", "exclusive"])
@pytest.mark.parametrize("with_initial", [False, True], ids=["", "initial"])
def test_first_order_recurrence(reverse, exclusive, identity, with_initial):
    gen = torch.Generator().manual_seed(21)
    gates = torch.rand(3, 35, generator=gen) + 0.25
    tokens = torch.randn(35, 3, generator=gen).t()   # transposed: strided along the axis
    initial = ((torch.rand(3, generator=gen), torch.randn(3, generator=gen)) if with_initial
               else None)
    with _trace.record() as rec:
        result, carry = tritonml.associative_scan(
            linear_recurrence, (gates, tokens), 1, reverse=reverse, exclusive=exclusive,
            identity=identity, initial=initial, config=TUPLE_CONFIG, return_carry=True)
    # the tokens' layout makes the 3 rows the inner dim: 2 blocks of 2 lanes
    assert_one_chunked_launch(rec, 2, 35, TUPLE_CONFIG)
    meta = rec.launches[0].meta
    assert meta["COMMUTATIVE"] is False and meta["FLAGGED"] is (identity is None)
    expected = oracle(linear_py, (gates, tokens), 1, reverse=reverse, exclusive=exclusive,
                      identity=identity, initial=initial)
    assert_matches(result, expected, (torch.float32, torch.float32), rtol=1e-5, atol=1e-5)
    last = oracle(linear_py, (gates, tokens), 1, reverse=reverse, initial=initial)
    edge = 0 if reverse else -1
    for got, want in zip(carry, last):
        assert got.dtype == torch.float64
        np.testing.assert_allclose(got.numpy(), want[:, edge].astype(np.float64), rtol=1e-12)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
def test_running_max_with_index_keeps_the_first_of_ties(reverse, exclusive):
    # Small integers make ties across chunk boundaries; the index is a broadcast (stride-0) arange.
    gen = torch.Generator().manual_seed(22)
    values = torch.randint(0, 4, (2, 47), generator=gen).float()
    index = torch.arange(47).expand(2, 47)
    identity = (-float("inf"), -1) if exclusive else None
    with _trace.record() as rec:
        result = tritonml.associative_scan(max_with_index, (values, index), 1, reverse=reverse,
                                           exclusive=exclusive, identity=identity,
                                           config=SMALL)
    assert_one_chunked_launch(rec, 2, 47, SMALL)
    expected = oracle(max_with_index_py, (values, index), 1, reverse=reverse,
                      exclusive=exclusive, identity=identity)
    assert_matches(result, expected, (torch.float32, torch.int64))


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive,identity", [(False, None), (True, (1, 0, 0, 1))],
                         ids=["inclusive-no-identity", "exclusive"])
def test_matrix_products_keep_operand_order_across_chunks_and_groups(reverse, exclusive,
                                                                     identity):
    # Exact int64 matrices (wrapping as C does once the products outgrow 64 bits): any operand
    # swapped at a tile, chunk or group boundary changes the result.
    gen = torch.Generator().manual_seed(23)
    entries = tuple(torch.randint(-2, 3, (2, 45), generator=gen) for _ in range(4))
    with _trace.record() as rec:
        result = tritonml.associative_scan(matrix_product, entries, 1, reverse=reverse,
                                           exclusive=exclusive, identity=identity,
                                           config=SMALL)
    assert_one_chunked_launch(rec, 2, 45, SMALL)
    expected = oracle(matrix_py, entries, 1, reverse=reverse, exclusive=exclusive,
                      identity=identity)
    for got, want in zip(result, expected):
        assert np.array_equal(got.numpy(), wrap64(want))
    swapped = oracle(lambda a, b: matrix_py(b, a), entries, 1, reverse=reverse,
                     exclusive=exclusive, identity=identity)
    assert any(not np.array_equal(wrap64(w), wrap64(s)) for w, s in zip(expected, swapped))


def test_float_matrix_products_on_a_strided_axis():
    # Near-identity float64 matrices stay bounded; 2 lanes wide along a strided axis.
    rng = np.random.default_rng(24)
    base = rng.standard_normal((4, 37, 3)) * 0.2 + np.array([1, 0, 0, 1])[:, None, None]
    entries = tuple(torch.from_numpy(base[i]) for i in range(4))
    config = ScanConfig("chunked", 4, 2, chunk_tiles=3, window=2)
    for reverse in (False, True):
        with _trace.record() as rec:
            result = tritonml.associative_scan(matrix_product, entries, 0, reverse=reverse,
                                               config=config)
        assert_one_chunked_launch(rec, 2, 37, config)
        expected = oracle(matrix_py, entries, 0, reverse=reverse)
        assert_matches(result, expected, (torch.float64,) * 4, rtol=1e-12, atol=1e-12)


def test_linear_recurrence_state_through_the_launcher_in_every_integer_width():
    # compose_affine, as tritonml.linear_recurrence runs it, on wrapping integers.
    config = ScanConfig("chunked", 4, 1, chunk_tiles=3, window=4)
    rng = np.random.default_rng(25)
    for dtype, bits in ((torch.int8, 8), (torch.int32, 32), (torch.int64, 64)):
        gates = torch.from_numpy(rng.integers(-3, 4, (2, 70))).to(dtype)
        tokens = torch.from_numpy(rng.integers(-100, 100, (2, 70))).to(dtype)
        for reverse in (False, True):
            _, h = associative_scan_states(compose_affine, (gates, tokens), 1, reverse=reverse,
                                           identity=(1, 0), store=(False, True), config=config)
            want = loop_reference(gates.numpy(), tokens.numpy(), 1, reverse, wrap_bits=bits)
            assert h.tolist() == want.astype(np.int64).tolist(), (dtype, reverse)


# ---------------------------------------------------------------------------------------------
# Program order: tickets, not program ids, order the chunks
# ---------------------------------------------------------------------------------------------
def test_sum_does_not_depend_on_program_order(shuffled_program_order):
    rng = np.random.default_rng(31)
    x = torch.from_numpy(rng.standard_normal((3, 301)).astype(np.float32))
    config = ScanConfig("chunked", 4, 1, chunk_tiles=3, window=4)
    shuffled = cumulative_scan(x, 1, SUM, reverse=True, config=config)
    orders = dict(shuffled_program_order)
    shuffled_program_order.clear()
    assert any((order != np.arange(len(order))).any() for order in orders.values())
    with pytest.MonkeyPatch.context() as patch:   # the interpreter's own order, 0, 1, 2, ...
        patch.setattr(interpreter.interpreter_builder, "set_grid_idx",
                      interpreter.InterpreterBuilder.set_grid_idx.__get__(
                          interpreter.interpreter_builder))
        in_order = cumulative_scan(x, 1, SUM, reverse=True, config=config)
    assert torch.equal(shuffled, in_order)
    check(shuffled, to_numpy(x), 1, "sum", True, False)


def test_tuple_state_does_not_depend_on_program_order(shuffled_program_order):
    gen = torch.Generator().manual_seed(32)
    gates = torch.rand(2, 90, generator=gen) + 0.25
    tokens = torch.randn(2, 90, generator=gen)
    config = ScanConfig("chunked", 4, 2, chunk_tiles=2, window=4)
    shuffled = tritonml.associative_scan(linear_recurrence, (gates, tokens), 1, config=config)
    assert shuffled_program_order
    expected = oracle(linear_py, (gates, tokens), 1)
    assert_matches(shuffled, expected, (torch.float32, torch.float32), rtol=1e-5, atol=1e-5)
    shuffled_program_order.clear()   # the next launch draws another order
    again = tritonml.associative_scan(linear_recurrence, (gates, tokens), 1, config=config)
    assert shuffled_program_order
    assert all(torch.equal(a, b) for a, b in zip(shuffled, again))


# ---------------------------------------------------------------------------------------------
# Round trips: how often a program asks for its predecessors' status
# ---------------------------------------------------------------------------------------------
def status_words(ptr) -> bool:
    """Whether an interpreted atomic addresses status words (int32), not the int64 ticket word."""
    return ptr.get_element_ty().primitive_bitwidth == 32


class StatusTraffic:
    """Per program (grid index), the status-word round trips it makes: ``polls``, volatile vector
    loads (the chunked kernel's wait in ``_window_fold``), and ``acquires``, int32 atomic adds (its
    acquire pass; the look-back kernel's ``wait_for_state`` polls with them); each call is one
    round trip to memory however many words it covers. ``lanes``: words each poll read.

    ``stale_polls``: the first ``stale_polls`` polls of each program read every word as nothing
    published yet (0), as a poll that overtakes the publishing program's release would."""

    def __init__(self, stale_polls: int = 0):
        self.stale_polls = stale_polls
        self.polls = collections.Counter()
        self.acquires = collections.Counter()
        self.lanes = collections.defaultdict(list)

    @contextlib.contextmanager
    def watching(self):
        builder = interpreter.InterpreterBuilder
        load, rmw = builder.create_masked_load, builder.create_atomic_rmw
        traffic = self

        # the cache arguments differ by Triton release (3.9: cache_policy; 3.6 to 3.8:
        # cache_modifier and eviction_policy): the rest is read by name
        signature = inspect.signature(load)

        def masked_load(self, *args, **kwargs):
            result = load(self, *args, **kwargs)
            bound = signature.bind(self, *args, **kwargs).arguments
            if bound["is_volatile"]:
                program = self.grid_idx[0]
                traffic.polls[program] += 1
                traffic.lanes[program].append(int(np.count_nonzero(bound["mask"].data)))
                if traffic.polls[program] <= traffic.stale_polls:
                    result.data[...] = 0
            return result

        def atomic_rmw(self, op, ptr, val, mask, sem, scope):
            if op == interpreter._ir.ATOMIC_OP.ADD and status_words(ptr):
                traffic.acquires[self.grid_idx[0]] += 1
            return rmw(self, op, ptr, val, mask, sem, scope)

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(builder, "create_masked_load", masked_load)
            patch.setattr(builder, "create_atomic_rmw", atomic_rmw)
            yield self

    def round_trips(self, program: int) -> int:
        return self.polls[program] + self.acquires[program]


def test_round_trips_per_program_do_not_grow_with_the_tiles_before_it():
    # 1 x 1600 in 4-row tiles: 400 tiles, 200 chunks of 2 tiles, 50 groups of 4 chunks. Every
    # program polls its window once (in the interpreter its predecessors have all finished) and
    # makes one acquire pass: 2 round trips, whether 1 or 399 tiles come before it.
    config = ScanConfig("chunked", 4, 1, chunk_tiles=2, window=4)
    x = torch.from_numpy(np.random.default_rng(41).integers(-9, 9, (1, 1600)))
    with StatusTraffic().watching() as traffic:
        result = cumulative_scan(x, 1, SUM, config=config)
    check(result, to_numpy(x), 1, "sum", False, False)
    programs = chunks_of(1600, config)
    assert programs == 200 and set(traffic.polls) == set(range(programs))
    assert max(traffic.round_trips(p) for p in range(programs)) <= 2
    assert all(traffic.polls[p] == 1 == traffic.acquires[p] for p in range(programs))
    # each poll covers the chunks it waits for: its group's earlier ones and the previous
    # group's last (at most the window)
    assert max(max(lanes) for lanes in traffic.lanes.values()) == 4
    assert [traffic.lanes[p] for p in range(6)] == [[0], [1], [2], [3], [1], [2]]


def test_the_look_back_s_round_trips_grow_with_the_tiles_before_it():
    # The count can fail: the look-back kernel with PREFIX_EVERY past the tiles publishes only
    # tile 0's prefix, so tile t waits on t status words one round trip each.
    config = ScanConfig("lookback", 4, 1)
    x = torch.from_numpy(np.random.default_rng(42).integers(-9, 9, (1, 160)))
    with StatusTraffic().watching() as traffic, prefix_every(1000):
        result = cumulative_scan(x, 1, SUM, config=config)
    check(result, to_numpy(x), 1, "sum", False, False)
    assert [traffic.round_trips(t) for t in range(40)] == list(range(40))
    assert max(traffic.round_trips(t) for t in range(40)) > 2


def test_a_stale_poll_costs_one_more_round_trip_and_changes_nothing():
    # The first poll of every program sees nothing published: each program that waits for
    # something polls again, once, and the result is the same bits.
    config = ScanConfig("chunked", 4, 2, chunk_tiles=2, window=4)
    x = torch.from_numpy(np.random.default_rng(43).standard_normal((3, 150)))
    settled = cumulative_scan(x, 1, SUM, exclusive=True, config=config)
    with StatusTraffic(stale_polls=1).watching() as traffic:
        stale = cumulative_scan(x, 1, SUM, exclusive=True, config=config)
    assert torch.equal(stale, settled)
    check(stale, to_numpy(x), 1, "sum", False, True)
    programs = 2 * chunks_of(150, config)   # the 3 rows are the inner dim: 2 blocks of 2 lanes
    first_chunks = {p for p in range(programs) if p % chunks_of(150, config) == 0}
    assert {p: traffic.polls[p] for p in range(programs)} == {
        p: 1 if p in first_chunks else 2 for p in range(programs)}


def test_workspaces_hold_one_status_word_and_one_published_vector_per_chunk():
    # status: the int64 ticket word (2 int32 words) + chains x chunks words; published values:
    # chains x chunks x block_inner accumulators per component. The grid is chains x chunks.
    x = torch.empty(5, 93, 6, dtype=torch.float16)
    config = ScanConfig("chunked", 8, 4, chunk_tiles=3, window=2)
    layout = _layout.axis_layout(tuple(x.shape), x.stride(), x.stride(), 1)
    chains, chunks = 5 * 2, chunks_of(93, config)
    assert chunks == 4
    work = scan_work(layout, SUM, x.dtype, False, False, reverse=False, exclusive=False,
                     config=config)
    status, published = work.workspaces
    assert (status.numel, status.dtype, status.resident) == (2 + chains * chunks, torch.int32,
                                                             _resident.LOOKBACK)
    assert (published.numel, published.dtype) == (chains * chunks * 4, torch.float32)
    (step,) = work.steps
    assert step.launch.grid == (chains * chunks,)
    # a tuple state: one published vector per component, in its accumulation dtype
    gates, tokens = torch.empty(5, 93, 6), torch.empty(5, 93, 6, dtype=torch.float16)
    with _trace.record(execute=False) as rec:
        associative_scan_states(linear_recurrence, (gates, tokens), 1, identity=(1, 0),
                                config=config)
    (launch,) = rec.launches
    status, published = launch.args[4], launch.args[5]
    assert status.numel() >= 2 + chains * chunks
    assert [(p.numel(), p.dtype) for p in published] == [(chains * chunks * 4, torch.float64),
                                                         (chains * chunks * 4, torch.float32)]


def test_each_chunk_but_the_last_publishes_once_into_its_own_status_word():
    # The status words the launch writes (release exchanges) are exactly chains x (chunks - 1),
    # distinct, all inside the chains x chunks words after the ticket word.
    runtime.clear()
    config = ScanConfig("chunked", 4, 2, chunk_tiles=2, window=2)
    x = torch.randn(3, 41, 4)
    cumulative_scan(x, 1, SUM, config=config)   # makes the resident workspace
    (status, _), = _resident._workspaces.values()
    base = status.data_ptr()
    chains, chunks = 3 * 2, chunks_of(41, config)
    published = []
    builder = interpreter.InterpreterBuilder
    rmw = builder.create_atomic_rmw

    def atomic_rmw(self, op, ptr, val, mask, sem, scope):
        if op == interpreter._ir.ATOMIC_OP.XCHG and status_words(ptr):
            lanes = ptr.data if mask is None else ptr.data[np.broadcast_to(mask.data,
                                                                           ptr.data.shape)]
            published.extend(((np.asarray(lanes).astype(np.int64) - base) // 4).tolist())
        return rmw(self, op, ptr, val, mask, sem, scope)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(builder, "create_atomic_rmw", atomic_rmw)
        result = cumulative_scan(x, 1, SUM, config=config)
    check(result, to_numpy(x), 1, "sum", False, False)
    assert len(published) == len(set(published)) == chains * (chunks - 1)
    assert min(published) >= 2 and max(published) < 2 + chains * chunks
    runtime.clear()


# ---------------------------------------------------------------------------------------------
# Determinism and accuracy
# ---------------------------------------------------------------------------------------------
def test_the_same_input_gives_the_same_bits_whatever_ran_before():
    rng = np.random.default_rng(51)
    x = torch.from_numpy(rng.standard_normal((2, 1500)).astype(np.float32))
    config = ScanConfig("chunked", 16, 1, chunk_tiles=3, window=4)
    first = cumulative_scan(x, 1, SUM, config=config)
    # other launches on the same resident workspace: other epochs, other slots
    cumulative_scan(torch.randn(3, 301), 1, SUM, config=ScanConfig("chunked", 8, 1,
                                                                     chunk_tiles=2, window=2))
    cumulative_scan(torch.randn(2, 500), 1, SUM, config=ScanConfig("lookback", 32, 1))
    again = cumulative_scan(x, 1, SUM, config=config)
    assert torch.equal(first, again)
    check(first, to_numpy(x), 1, "sum", False, False)


def test_float32_running_sum_of_4m_values_is_rounded_once():
    # One row of 2**22 values in 16 chunks of 16 tiles of 16384, 4 groups. float32 accumulates in
    # float64 here, so each output is the float64 running sum rounded once: relative error at
    # most 2**-24 (torch's CPU cumsum, which also accumulates in double, measures ~6e-8).
    x = torch.from_numpy(np.random.default_rng(0).uniform(0, 1, size=1 << 22).astype(np.float32))
    config = ScanConfig("chunked", 16384, 1, chunk_tiles=16, window=4)
    with _trace.record() as rec:
        result = cumulative_scan(x, 0, SUM, config=config)
    assert rec.launches[0].grid == (16,)
    reference = np.cumsum(x.numpy().astype(np.float64))
    relative = np.abs(result.numpy().astype(np.float64) - reference) / reference
    torch_relative = np.abs(torch.cumsum(x, 0).numpy().astype(np.float64) - reference) / reference
    assert relative.max() <= 2.0 ** -24, relative.max()
    assert relative.max() <= max(torch_relative.max(), 2.0 ** -24)
