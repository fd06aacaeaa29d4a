"""The interpreter runs a user-defined combine on whole tiles
(tritonml/core/triton_compat/scan_reduce.py: ``scan_along``/``reduce_along`` by log-step doubling
and halving) instead of Triton's one call per element. Checked against sequential Python loops
with a non-commutative combine (2x2 matrix products), so a swapped operand or a dropped element
would show."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonml
from tritonml.core.triton_compat import reduce_along, scan_along

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="checks the interpreter's path")


@triton.jit
def _matmul2(a00, a01, a10, a11, b00, b01, b10, b11):
    """(A, B) -> A @ B for 2x2 integer matrices: associative, not commutative."""
    return (a00 * b00 + a01 * b10, a00 * b01 + a01 * b11,
            a10 * b00 + a11 * b10, a10 * b01 + a11 * b11)


@triton.jit
def _scan_and_reduce(m_ptr, scan_ptr, red_ptr, ROWS: tl.constexpr, COLS: tl.constexpr,
                     AXIS: tl.constexpr, REVERSE: tl.constexpr):
    rows = tl.arange(0, ROWS)[:, None]
    cols = tl.arange(0, COLS)[None, :]
    offs = (rows * COLS + cols) * 4
    m = (tl.load(m_ptr + offs), tl.load(m_ptr + offs + 1), tl.load(m_ptr + offs + 2),
         tl.load(m_ptr + offs + 3))
    s00, s01, s10, s11 = scan_along(m, AXIS, _matmul2, reverse=REVERSE)
    tl.store(scan_ptr + offs, s00)
    tl.store(scan_ptr + offs + 1, s01)
    tl.store(scan_ptr + offs + 2, s10)
    tl.store(scan_ptr + offs + 3, s11)
    r00, r01, r10, r11 = reduce_along(m, AXIS, _matmul2, keep_dims=True)
    if AXIS == 0:
        red_offs = cols * 4
    else:
        red_offs = rows * 4
    tl.store(red_ptr + red_offs, r00)
    tl.store(red_ptr + red_offs + 1, r01)
    tl.store(red_ptr + red_offs + 2, r10)
    tl.store(red_ptr + red_offs + 3, r11)


def _product(mats):
    """Left-to-right product of a sequence of 2x2 integer matrices (exact Python ints, wrapped to
    int64 as the kernel's arithmetic is)."""
    acc = np.eye(2, dtype=object)
    out = []
    for m in mats:
        acc = acc.dot(np.asarray(m, dtype=object))
        acc = np.vectorize(lambda v: (v + 2**63) % 2**64 - 2**63, otypes=[object])(acc)
        out.append(acc.copy())
    return out


@pytest.mark.parametrize("rows,cols,axis", [(64, 4, 0), (4, 64, 1), (1, 8, 1), (2, 1, 0),
                                            (256, 2, 0)])
@pytest.mark.parametrize("reverse", [False, True])
def test_tile_scan_and_reduce_keep_operand_order(rows, cols, axis, reverse):
    rng = np.random.default_rng(rows * 31 + cols)
    mats = rng.integers(-3, 4, size=(rows, cols, 2, 2), dtype=np.int64)
    scan = torch.empty((rows, cols, 4), dtype=torch.int64)
    red = torch.empty((cols if axis == 0 else rows, 4), dtype=torch.int64)
    _scan_and_reduce[(1,)](torch.from_numpy(mats.reshape(rows, cols, 4).copy()), scan, red,
                           rows, cols, axis, reverse)
    lines = cols if axis == 0 else rows
    for line in range(lines):
        seq = [mats[i, line] if axis == 0 else mats[line, i]
               for i in range(rows if axis == 0 else cols)]
        order = list(range(len(seq)))[::-1] if reverse else list(range(len(seq)))
        prefix = _product([seq[i] for i in order])
        for step, i in enumerate(order):
            got = (scan[i, line] if axis == 0 else scan[line, i]).tolist()
            assert got == [int(v) for v in prefix[step].reshape(-1)], (line, i)
        # tl.reduce folds in index order whatever the scan direction
        total = _product(seq)[-1]
        assert red[line].tolist() == [int(v) for v in total.reshape(-1)], line
