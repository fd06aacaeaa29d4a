"""``tritonml.kernels.combine.row_of``, which the scan kernels use to take a tile's total (its
scan's last row) and a look-back window's fold: one row of each component of a state, bit for
bit, in every dtype (NaN payloads, -0.0 and infinities included), for a row given as an int or
one row per column, both ways it can take it (a gather, or a sum of the row's bits: which one
depends on the Triton version, tritonml/core/triton_compat/versions.py FAST_ROW_GATHER).
Oracle: numpy indexing of the same bits."""
import numpy as np
import pytest
import torch

import triton
import triton.language as tl

from tritonml.core import triton_compat
from tritonml.core.dtypes import SUPPORTED_DTYPES
from tritonml.kernels import combine
from tritonml.kernels.combine import row_of

ROWS, COLUMNS = 16, 4
BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


@triton.jit
def _rows_kernel(x_ptr, index_ptr, out_ptr, flags_ptr, by_column_ptr, row,
                 ROWS: tl.constexpr, COLUMNS: tl.constexpr):
    r = tl.arange(0, ROWS)[:, None]
    c = tl.arange(0, COLUMNS)[None, :]
    x = tl.load(x_ptr + r * COLUMNS + c)
    value, flag = row_of((x, x > 0), row)
    tl.store(out_ptr + c, value)
    tl.store(flags_ptr + c, flag.to(tl.int8))
    # one row per column
    (by_column,) = row_of((x,), tl.load(index_ptr + c))
    tl.store(by_column_ptr + c, by_column)


def _bits(t: torch.Tensor) -> np.ndarray:
    return t.view(BITS[t.element_size()]).numpy()


def _input(dtype):
    g = torch.Generator().manual_seed(3)
    if dtype.is_floating_point:
        x = torch.randn(ROWS, COLUMNS, generator=g).to(dtype)
        x[2] = torch.tensor([float("nan"), -0.0, float("-inf"), float("inf")]).to(dtype)
        x[7, 1] = 0.0
        return x
    info = torch.iinfo(dtype)
    x = torch.randint(max(info.min, -2**62), min(info.max, 2**62), (ROWS, COLUMNS), generator=g,
                      dtype=torch.int64).to(dtype)
    extremes = np.array([info.min, info.max, 0, -1 if dtype.is_signed else 1],
                        dtype=torch.empty(0, dtype=dtype).numpy().dtype)
    x[2] = torch.from_numpy(extremes)
    return x


@pytest.mark.parametrize("gather", [True, False], ids=["gather", "bit sum"])
@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
def test_row_of_takes_one_row_bit_for_bit(dtype, gather, monkeypatch):
    # the interpreter reads the global at each call: both forms run whatever Triton is installed
    monkeypatch.setattr(combine, "_GATHER_ROW", tl.constexpr(gather))
    x = _input(dtype)
    columns_rows = torch.tensor([2, 0, ROWS - 1, 7], dtype=torch.int32)
    for row in (0, 2, ROWS - 1):
        out = torch.zeros(COLUMNS, dtype=dtype)
        flags = torch.full((COLUMNS,), 7, dtype=torch.int8)
        by_column = torch.zeros(COLUMNS, dtype=dtype)
        _rows_kernel[(1,)](x, columns_rows, out, flags, by_column, row, ROWS, COLUMNS)
        assert np.array_equal(_bits(out), _bits(x)[row])
        positive = x.double().numpy()[row] > 0 if dtype.is_floating_point else x.numpy()[row] > 0
        assert np.array_equal(flags.numpy(), positive.astype(np.int8))
        want = _bits(x)[columns_rows.numpy(), np.arange(COLUMNS)]
        assert np.array_equal(_bits(by_column), want)


@pytest.mark.parametrize("version,fast", [("3.6.0", False), ("3.7.1", False), ("3.8.0", True),
                                          ("3.9.0+git3f2a1b", True), ("4.0.0", True),
                                          ("3.10.0", True)])
def test_the_gather_is_taken_from_triton_3_8_on(version, fast):
    assert (triton_compat._release(version) >= (3, 8)) is fast
