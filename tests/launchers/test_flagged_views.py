"""Tensors torch flags instead of copying: the negative bit (``x.is_neg()``), on inputs and on
``out``, for every op, across dtypes and layouts.

A negative view's memory holds the negation of its values (``z.conj().imag`` of a complex tensor,
``t._neg_view()``). The kernels flip the sign on load or store, without a copy. Every result is
compared with numpy on the values torch itself reports (``resolve_neg()``), and the plain cases
with torch's own op on the flagged tensor.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tritonml
from benchmarks.reduce_oracle import FLOAT_ONLY, FUNCTIONS, assert_matches, expected_tensor
from benchmarks.scan_oracle import scan_matches, to_numpy
from tests.reduce_helpers import with_layout

# torch implements negative views for floats, signed integers and uint8.
NEG_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64,
              torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
LAYOUTS = ("contiguous", "transposed", "stepped", "conj-imag")
SHAPE = (3, 5)


def _values(dtype, seed=0, small=False):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.rand(SHAPE, generator=g, dtype=torch.float64) * 4 - 2).to(dtype)
    if small:
        return torch.randint(-3, 4, SHAPE, generator=g, dtype=torch.int64).to(dtype)
    # Full-range bits (wrap-around included); int64's range does not fit randint's bounds.
    return torch.randint(-2**63, 2**63 - 1, SHAPE, generator=g, dtype=torch.int64).to(dtype)


def flagged(values: torch.Tensor, layout: str) -> torch.Tensor:
    """A tensor with the negative bit set whose values are ``values``, in ``layout``."""
    if layout == "conj-imag":
        # The user's case: the imaginary part of a conjugate view is a negative view of memory.
        complex_dtype = torch.complex128 if values.dtype == torch.float64 else torch.complex64
        z = torch.zeros(SHAPE, dtype=complex_dtype)
        z.imag.copy_(-values.to(z.real.dtype))
        view = z.conj().imag
        assert view.dtype == z.real.dtype
        return view
    stored = with_layout(torch.neg(values), layout)
    view = stored._neg_view()
    return view


def _cases(layouts_for_all=("stepped",)):
    """Every dtype in ``layouts_for_all``, float32 and int8 in every layout."""
    for dtype in NEG_DTYPES:
        layouts = LAYOUTS if dtype in (torch.float32, torch.int8) else layouts_for_all
        for layout in layouts:
            if layout == "conj-imag" and dtype not in (torch.float32, torch.float64):
                continue
            yield pytest.param(dtype, layout, id=f"{str(dtype)[6:]}-{layout}")


def _plain(t: torch.Tensor) -> torch.Tensor:
    return t.resolve_neg().clone()


@pytest.mark.parametrize("dtype,layout", list(_cases(("stepped", "conj-imag"))))
@pytest.mark.parametrize("op", ["sum", "product"])
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True)])
@pytest.mark.parametrize("flag_out", [False, True], ids=["out", "negout"])
def test_scans_read_and_write_negative_views(dtype, layout, op, reverse, exclusive, flag_out):
    values = _values(dtype, seed=hash((str(dtype), layout)) % 1000)
    x = flagged(values, layout)
    assert x.is_neg() and torch.equal(_plain(x), values)
    out = torch.zeros(SHAPE, dtype=dtype)
    if flag_out:
        out = out._neg_view()
    fn = tritonml.cumulative_sum if op == "sum" else tritonml.cumulative_product
    for axis in (0, 1):
        result = fn(x, axis, reverse=reverse, exclusive=exclusive, out=out)
        assert result is out and out.is_neg() == flag_out
        ok, msg = scan_matches(_plain(out), to_numpy(values), axis, op, reverse, exclusive)
        assert ok, f"axis {axis}: {msg}"
    assert torch.equal(_plain(x), values)  # the input is untouched


# Float-only functions refuse integer input (tested with the other errors).
REDUCE_CASES = [pytest.param(*case.values, function, id=f"{case.id}-{function}")
                for case in _cases() for function in FUNCTIONS
                if case.values[0].is_floating_point or function not in FLOAT_ONLY]


@pytest.mark.parametrize("dtype,layout,function", REDUCE_CASES)
@pytest.mark.parametrize("flag_out", [False, True], ids=["out", "negout"])
def test_reduce_reads_and_writes_negative_views(dtype, layout, function, flag_out):
    small = function in ("ARGMAX", "ARGMIN", "MULTIPLY")
    values = _values(dtype, seed=len(function), small=small)
    if function == "LOG_SUM":
        values = values.abs() + 1
    x = flagged(values, layout)
    for axes in (0, (0, 1)):
        expected = expected_tensor(values, function, axes)
        if flag_out and expected.dtype not in (torch.uint32, torch.uint64):
            out = torch.zeros(expected.shape, dtype=expected.dtype)._neg_view()
            result = tritonml.reduce(x, function, axes, out=out)
            assert result is out and out.is_neg()
        else:
            result = tritonml.reduce(x, function, axes)
        assert_matches(_plain(result), expected, context=f"{function} axes={axes}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32])
def test_negative_views_match_torch(dtype):
    """The report's example and its neighbours, against torch's own ops on the same tensors."""
    if dtype.is_floating_point:
        z = torch.tensor([1 + 2j, 3 + 4j, 5 + 6j],
                         dtype=torch.complex128 if dtype == torch.float64 else torch.complex64)
        im = z.conj().imag
    else:
        im = torch.tensor([2, 4, 6], dtype=dtype)._neg_view()
    assert im.is_neg()
    assert torch.equal(tritonml.cumulative_sum(im, 0), torch.cumsum(im, 0).to(dtype))
    assert torch.equal(tritonml.cumulative_product(im, 0), torch.cumprod(im, 0).to(dtype))
    assert torch.equal(tritonml.reduce(im, "sum", 0, keepdims=False), im.sum(0).to(dtype))
    assert torch.equal(tritonml.reduce(im, "max", 0, keepdims=False), im.amax(0))
    assert torch.equal(tritonml.reduce(im, "argmax", 0, keepdims=False), im.argmax(0))
    out = torch.zeros(3, dtype=dtype)._neg_view()
    tritonml.cumulative_sum(torch.tensor([1, 2, 3], dtype=dtype), 0, out=out)
    assert torch.equal(out, torch.tensor([1, 3, 6], dtype=dtype))
    assert torch.equal(out.resolve_neg(), torch.tensor([1, 3, 6], dtype=dtype))


def test_in_place_scan_of_a_negative_view():
    values = torch.tensor([[1., -2., 3.], [4., 5., -6.]])
    x = torch.neg(values)._neg_view()
    tritonml.cumulative_sum(x, 1, out=x)
    assert x.is_neg()
    np.testing.assert_array_equal(x.resolve_neg().numpy(), np.cumsum(values.numpy(), 1))


def test_complex_inputs_are_refused_before_anything_runs():
    z = torch.tensor([1 + 2j, 3 + 4j])
    for fn in (lambda: tritonml.cumulative_sum(z.conj(), 0),
               lambda: tritonml.reduce(z, "sum", 0)):
        with pytest.raises(TypeError, match=r"x: dtype complex64 is not supported"):
            fn()
