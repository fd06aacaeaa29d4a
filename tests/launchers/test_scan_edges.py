"""Edge cases and bad input for the cumulative operators."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tritonml
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ScanConfig
from tritonml.launchers.scan import SUM, cumulative_scan
from tritonml.bench.tolerances import TOLERANCES
from benchmarks.scan_oracle import scan_reference, to_numpy


# --------------------------------------------------------------------------------------------
# Edge cases are features
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,axis", [((0,), 0), ((3, 0), 1), ((0, 4), 1), ((2, 0, 3), 0)])
def test_empty_tensor_returns_empty_without_launching(shape, axis):
    x = torch.empty(shape, dtype=torch.float32)
    with _trace.record() as rec:
        result = tritonml.cumulative_sum(x, axis, exclusive=True)
    assert result.shape == x.shape and result.dtype == x.dtype
    assert rec.launches == []


def test_rank0_acts_as_one_element():
    x = torch.tensor(7.5)
    assert tritonml.cumulative_sum(x, 0).item() == 7.5
    assert tritonml.cumulative_sum(x, -1, exclusive=True).item() == 0.0
    assert tritonml.cumulative_product(x, 0, exclusive=True).item() == 1.0
    with pytest.raises(ValueError, match="axis"):
        tritonml.cumulative_sum(x, 1)


def test_size_one_axis():
    x = torch.tensor([[3.0], [4.0]])
    assert tritonml.cumulative_sum(x, 1).tolist() == [[3.0], [4.0]]
    assert tritonml.cumulative_sum(x, 1, exclusive=True).tolist() == [[0.0], [0.0]]
    assert tritonml.cumulative_product(x, 1, exclusive=True, reverse=True).tolist() == [[1.0], [1.0]]


def test_nan_and_inf_propagate_along_the_traversal():
    x = torch.tensor([1.0, float("nan"), 2.0, float("inf"), -float("inf"), 3.0])
    fwd = tritonml.cumulative_sum(x, 0).tolist()
    assert fwd[0] == 1.0 and all(math.isnan(v) for v in fwd[1:])
    rev = tritonml.cumulative_sum(x, 0, reverse=True).tolist()
    assert rev[5] == 3.0 and rev[4] == -math.inf and all(math.isnan(v) for v in rev[:4])
    x = torch.tensor([2.0, math.inf, 0.5])
    assert tritonml.cumulative_sum(x, 0).tolist() == [2.0, math.inf, math.inf]
    assert tritonml.cumulative_sum(x, 0, exclusive=True).tolist() == [0.0, 2.0, math.inf]
    prod = tritonml.cumulative_product(torch.tensor([0.0, math.inf, 1.0]), 0).tolist()
    assert prod[0] == 0.0 and math.isnan(prod[1]) and math.isnan(prod[2])  # 0 * inf


@pytest.mark.parametrize("dtype,start,step", [
    (torch.int8, 127, 1), (torch.uint8, 255, 1), (torch.int16, -32768, -1),
    (torch.int32, 2**31 - 1, 1), (torch.uint32, 2**32 - 1, 1), (torch.int64, 2**63 - 1, 1),
    (torch.uint64, 2**64 - 1, 1)])
def test_integer_sums_wrap_modulo_2_to_the_bits(dtype, start, step):
    bits = torch.iinfo(dtype).bits
    signed = torch.iinfo(dtype).min < 0
    values = np.array([start, step, step], dtype=to_numpy(torch.empty(0, dtype=dtype)).dtype)
    result = tritonml.cumulative_sum(torch.from_numpy(values), 0)

    def wrap(v):  # C semantics, computed with Python integers
        v %= 2**bits
        return v - 2**bits if signed and v >= 2**(bits - 1) else v
    assert [int(v) for v in result.tolist()] == [wrap(start), wrap(start + step), wrap(start + 2 * step)]


def test_integer_products_wrap():
    x = torch.tensor([16, 16, 16, 3], dtype=torch.int8)
    # 16*16 = 256 = 0 (mod 256), then 0 forever
    assert tritonml.cumulative_product(x, 0).tolist() == [16, 0, 0, 0]
    x = torch.tensor([2**40, 2**30, 3], dtype=torch.int64)
    want = [2**40, (2**70) % 2**64, (3 * 2**70) % 2**64]
    want = [v - 2**64 if v >= 2**63 else v for v in want]
    assert tritonml.cumulative_product(x, 0).tolist() == want


def test_offsets_past_2_to_the_31_elements_use_64_bit_indexing():
    # A 2 GiB uint8 buffer viewed with a row stride of 2**30: the last row starts at 2**31.
    storage = torch.empty(2**31 + 64, dtype=torch.uint8)
    x = storage.as_strided((3, 5), (2**30, 1))
    x.copy_(torch.arange(15, dtype=torch.uint8).reshape(3, 5))
    out = torch.empty_like(x)
    # (3, 5) with a 2**30 row stride: a strided axis of length 3, tiles span 2**30 elements each
    with _trace.record() as rec:
        tritonml.cumulative_sum(x, 0, out=out)
    assert rec.launches[0].meta["INDEX_64"] is True
    want = np.cumsum(np.arange(15).reshape(3, 5), axis=0).astype(np.uint8)
    assert np.array_equal(out.numpy(), want)
    del storage


def test_in_place_matches_out_of_place_for_every_regime():
    rng = np.random.default_rng(4)
    base = torch.from_numpy(rng.standard_normal((6, 700)))
    for config in (ScanConfig("rows", 128, 2), ScanConfig("columns", 64, 4),
                   ScanConfig("lookback", 128, 2)):
        for exclusive in (False, True):
            axis = 0 if config.regime == "columns" else 1
            expected = scan_reference(base.numpy(), axis, "sum", True, exclusive)
            x = base.clone()
            result = cumulative_scan(x, axis, SUM, reverse=True, exclusive=exclusive,
                                     out=x, config=config)
            assert result is x
            np.testing.assert_allclose(x.numpy(), expected, rtol=TOLERANCES[torch.float64].rtol,
                                       atol=TOLERANCES[torch.float64].atol)


def test_out_may_be_a_strided_view_and_untouched_elements_stay():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    big = torch.full((3, 8), -1.0)
    out = big[:, ::2]
    tritonml.cumulative_sum(x, 1, out=out)
    assert out.tolist() == np.cumsum(x.numpy(), axis=1).tolist()
    assert (big[:, 1::2] == -1.0).all()


# --------------------------------------------------------------------------------------------
# Bad input: clear errors naming the parameter, before any launch, buffers untouched
# --------------------------------------------------------------------------------------------
def _expect_error(exc, words, call, *tensors):
    before = [t.clone() for t in tensors]
    with _trace.record() as rec:
        with pytest.raises(exc) as info:
            call()
    assert rec.launches == [], "a kernel was launched before the error"
    message = str(info.value)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    for t, b in zip(tensors, before):
        assert torch.equal(t, b), "a buffer was changed by a failing call"


@pytest.mark.parametrize("axis", [2, -3, 10])
def test_axis_out_of_range(axis):
    x = torch.ones(2, 3)
    out = torch.zeros(2, 3)
    _expect_error(ValueError, ["axis", str(axis), "rank 2"],
                  lambda: tritonml.cumulative_sum(x, axis, out=out), x, out)


def test_axis_not_an_int():
    x = torch.ones(2, 3)
    _expect_error(TypeError, ["axis"], lambda: tritonml.cumulative_sum(x, 1.5), x)


def test_not_a_tensor():
    _expect_error(TypeError, ["x", "list"], lambda: tritonml.cumulative_product([1, 2, 3], 0))


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64, torch.float8_e4m3fn])
def test_unsupported_dtype(dtype):
    x = torch.zeros(4, dtype=dtype)
    _expect_error(TypeError, ["x", "not supported", "float32"], lambda: tritonml.cumulative_sum(x, 0))


def test_out_wrong_shape_dtype_device():
    x = torch.ones(2, 3)
    for out, exc, words in [
        (torch.zeros(3, 2), ValueError, ["out", "shape"]),
        (torch.zeros(2, 3, dtype=torch.float64), TypeError, ["out", "dtype"]),
        (torch.zeros(2, 3, device="meta"), TypeError, ["out", "meta"]),
        ("not a tensor", TypeError, ["out"]),
    ]:
        tensors = (x, out) if isinstance(out, torch.Tensor) and out.device.type != "meta" else (x,)
        _expect_error(exc, words, lambda: tritonml.cumulative_sum(x, 0, out=out), *tensors)


def test_meta_input_is_refused_as_unreadable():
    x = torch.ones(2, 3, device="meta")
    _expect_error(TypeError, ["x", "meta"], lambda: tritonml.cumulative_sum(x, 0))


def test_out_partially_overlapping_input():
    buf = torch.arange(10, dtype=torch.float32)
    x, out = buf[0:6], buf[3:9]
    _expect_error(ValueError, ["out", "overlap"], lambda: tritonml.cumulative_sum(x, 0, out=out), buf)


def test_out_with_internal_overlap_or_expanded_in_place():
    x = torch.ones(1, 3).expand(4, 3)
    _expect_error(ValueError, ["out", "internal overlap"],
                  lambda: tritonml.cumulative_sum(x, 0, out=x))


@pytest.mark.parametrize("name", ["reverse", "exclusive"])
def test_flags_must_be_bools(name):
    x = torch.ones(3)
    _expect_error(TypeError, [name, "bool"], lambda: tritonml.cumulative_sum(x, 0, **{name: 1}), x)


def test_bad_config_is_rejected_before_launch():
    x = torch.ones(3, 5)
    _expect_error(ValueError, ["config.block_axis", "power of two"],
                  lambda: cumulative_scan(x, 1, SUM, config=ScanConfig("rows", 3, 1)), x)
    _expect_error(ValueError, ["config.regime"],
                  lambda: cumulative_scan(x, 1, SUM, config=ScanConfig("diagonal", 4, 1)), x)


@pytest.mark.parametrize("config, words", [
    (ScanConfig("chunked", 4, 1, chunk_tiles=0), ["config.chunk_tiles", ">= 1"]),
    (ScanConfig("chunked", 4, 1, chunk_tiles=True), ["config.chunk_tiles", ">= 1"]),
    (ScanConfig("chunked", 4, 1, window=3), ["config.window", "power of two"]),
    (ScanConfig("chunked", 4, 1, window=1), ["config.window", "from 2"]),
    (ScanConfig("chunked", 4, 1, window=2048), ["config.window", "to 1024"]),
    (ScanConfig("chunked", 4, 128, window=1024), ["config", "look-back window", "2**16"]),
], ids=["no tiles", "bool tiles", "window not a power of two", "window of one", "window too large",
        "window x lanes too large"])
def test_bad_chunked_config_is_rejected_before_launch(config, words):
    x = torch.ones(3, 5)
    _expect_error(ValueError, words, lambda: cumulative_scan(x, 1, SUM, config=config), x)
