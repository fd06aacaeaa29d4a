"""Element offsets past 2**31: views with strides of 2**28 to 2**30 over 3 GiB buffers, on the
scanned/reduced axis, on the kept axes and on both, in every regime and direction.

The buffers are allocated with ``torch.empty`` and only the addressed elements are written, so the
operating system commits a few pages, not 3 GiB. Every result is compared with numpy on a compact
copy of the same values; a wrong 32-bit offset either crashes the process or reads the wrong bytes.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tritonml
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ReduceConfig, ScanConfig
from tritonml.launchers.reduce import reduce_axes
from tritonml.records.builtin_reductions import RECORDS
from tritonml.launchers.scan import PRODUCT, SUM, cumulative_scan
from benchmarks.reduce_oracle import expected_tensor, assert_matches
from benchmarks.scan_oracle import scan_reference

GiB = 1 << 30
BUFFER_ELEMENTS = 3 * GiB + 64


@pytest.fixture(scope="module")
def buffers():
    """Two 3 GiB int8 buffers (input, output); untouched pages cost no memory."""
    return torch.empty(BUFFER_ELEMENTS, dtype=torch.int8), torch.empty(BUFFER_ELEMENTS, dtype=torch.int8)


def _view(buffer, shape, strides, seed):
    view = torch.as_strided(buffer, shape, strides)
    values = torch.randint(-128, 128, shape, generator=torch.Generator().manual_seed(seed),
                           dtype=torch.int16).to(torch.int8)
    view.copy_(values)
    return view, values


# (name, shape, strides): the last element of each lies past 2**31.
VIEWS = [
    ("2d", (3, 4), (GiB, 1)),
    ("3d", (3, 3, 4), (GiB, 1 << 28, 1)),
    ("3d-inner-huge", (3, 4, 2), (GiB, 8, 1 << 28)),
]

SCAN_CONFIGS = [ScanConfig("rows", 2, 2), ScanConfig("columns", 2, 4),
                ScanConfig("lookback", 2, 2), ScanConfig("chunked", 2, 2, window=2)]


@pytest.mark.parametrize("name,shape,strides", VIEWS, ids=[v[0] for v in VIEWS])
@pytest.mark.parametrize("config", SCAN_CONFIGS, ids=lambda c: c.regime)
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True)])
def test_scan_offsets_past_int32(buffers, name, shape, strides, config, reverse, exclusive):
    x_buffer, out_buffer = buffers
    x, values = _view(x_buffer, shape, strides, seed=len(name))
    out = torch.as_strided(out_buffer, shape, strides)  # the output's offsets pass 2**31 too
    for axis in range(len(shape)):  # the huge stride on the scanned axis, then on a kept one
        for combine, op in ((SUM, "sum"), (PRODUCT, "product")):
            with _trace.record() as rec:
                cumulative_scan(x, axis, combine, reverse=reverse, exclusive=exclusive, out=out,
                                config=config)
            assert all(l.meta["INDEX_64"] for l in rec.launches)
            want = scan_reference(values.numpy(), axis, op, reverse, exclusive, int_dtype=np.int8)
            np.testing.assert_array_equal(out.clone().numpy(), want, err_msg=f"axis {axis} {op}")
    np.testing.assert_array_equal(x.clone().numpy(), values.numpy())  # the input is untouched


def test_scan_public_function_past_int32(buffers):
    """The user's report: a (3, 4) view with a 2**30 row stride, through the public functions."""
    x, values = _view(buffers[0], (3, 4), (GiB, 1), seed=1)
    for axis in (0, 1):
        got = tritonml.cumulative_sum(x, axis, reverse=True)
        want = scan_reference(values.numpy(), axis, "sum", True, False, int_dtype=np.int8)
        np.testing.assert_array_equal(got.numpy(), want)


REDUCE_CONFIGS = [ReduceConfig("rows", 2, 2), ReduceConfig("columns", 2, 4),
                  ReduceConfig("split", 2, 2, splits=2, block_split=2)]
FUNCTIONS = ("SUM", "MAX", "ARGMAX", "ARGMIN", "MULTIPLY", "L1")


def _reduce_axes_cases():
    for name, shape, strides in VIEWS:
        rank = len(shape)
        axes_choices = [(0,), (rank - 1,), tuple(range(rank)), (0, rank - 1)]
        for axes in dict.fromkeys(axes_choices):
            yield pytest.param(shape, strides, axes, id=f"{name}-axes{''.join(map(str, axes))}")


@pytest.mark.parametrize("shape,strides,axes", list(_reduce_axes_cases()))
@pytest.mark.parametrize("config", REDUCE_CONFIGS, ids=lambda c: c.regime)
def test_reduce_offsets_past_int32(buffers, shape, strides, axes, config):
    x_buffer, out_buffer = buffers
    x, values = _view(x_buffer, shape, strides, seed=sum(axes) + len(shape))
    out_shape = [1 if i in axes else s for i, s in enumerate(shape)]
    # The output keeps the input's strides on kept dims: its offsets pass 2**31 where x's do.
    out_strides = [strides[i] for i in range(len(shape))]
    for function in FUNCTIONS:
        combine = RECORDS[tritonml.ReduceFunction[function]]
        dtype = torch.int64 if combine.returns_index else torch.int8
        if dtype == torch.int8:
            out = torch.as_strided(out_buffer, out_shape, out_strides)
        else:
            out = torch.empty(out_shape, dtype=dtype)
        with _trace.record() as rec:
            reduce_axes(x, axes, combine, out=out, config=config)
        assert all(l.meta["INDEX_64"] for l in rec.launches), function
        assert_matches(out.clone(), expected_tensor(values, function, axes), context=function)


def test_reduce_public_function_past_int32(buffers):
    """The user's report: sum over axis 0, max over all axes, argmax over (0, 1)."""
    x, values = _view(buffers[0], (3, 4), (GiB, 1), seed=2)
    assert_matches(tritonml.reduce(x, "sum", axes=0), expected_tensor(values, "SUM", 0))
    assert_matches(tritonml.reduce(x, "max"), expected_tensor(values, "MAX", None))
    assert_matches(tritonml.reduce(x, "argmax", axes=(0, 1)),
                   expected_tensor(values, "ARGMAX", (0, 1)))
