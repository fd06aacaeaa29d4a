"""Address arithmetic shared by the kernels: a program's outer index to element offsets."""
from .. import _backend  # noqa: F401

import triton
import triton.language as tl


@triton.jit
def outer_offsets(outer_idx,
                  size1, size2, size3, size4, size5,
                  x_stride0, x_stride1, x_stride2, x_stride3, x_stride4, x_stride5,
                  out_stride0, out_stride1, out_stride2, out_stride3, out_stride4, out_stride5):
    """Offsets (x, out) of outer index ``outer_idx`` over up to six outer dims, outermost first.

    ``size0`` is implied (the quotient that is left). Sizes of 1 are specialized to constants by
    Triton, so unused dims cost nothing in compiled code.
    """
    rest = outer_idx
    i5 = rest % size5
    rest = rest // size5
    i4 = rest % size4
    rest = rest // size4
    i3 = rest % size3
    rest = rest // size3
    i2 = rest % size2
    rest = rest // size2
    i1 = rest % size1
    i0 = rest // size1
    x_off = (i0 * x_stride0 + i1 * x_stride1 + i2 * x_stride2 + i3 * x_stride3 + i4 * x_stride4
             + i5 * x_stride5)
    out_off = (i0 * out_stride0 + i1 * out_stride1 + i2 * out_stride2 + i3 * out_stride3
               + i4 * out_stride4 + i5 * out_stride5)
    return x_off, out_off


@triton.jit
def chain_offsets(chain, inner_len,
                         outer_size1, outer_size2, outer_size3, outer_size4, outer_size5,
                         x_outer_stride0, x_outer_stride1, x_outer_stride2, x_outer_stride3,
                         x_outer_stride4, x_outer_stride5,
                         out_outer_stride0, out_outer_stride1, out_outer_stride2, out_outer_stride3,
                         out_outer_stride4, out_outer_stride5,
                         x_inner_stride, out_inner_stride,
                         INDEX_64: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """Map a chain (an outer index x a block of BLOCK_INNER inner positions: one independent scan
    or reduction) to its base offsets.

    Returns (x_offsets [1, BLOCK_INNER], out_offsets [1, BLOCK_INNER], inner_mask [1, BLOCK_INNER]).
    """
    inner_blocks = tl.cdiv(inner_len, BLOCK_INNER)
    outer_idx = chain // inner_blocks
    inner_block = chain % inner_blocks
    if INDEX_64:
        outer_idx = outer_idx.to(tl.int64)
        inner_block = inner_block.to(tl.int64)
    x_base, out_base = outer_offsets(
        outer_idx, outer_size1, outer_size2, outer_size3, outer_size4, outer_size5,
        x_outer_stride0, x_outer_stride1, x_outer_stride2, x_outer_stride3, x_outer_stride4,
        x_outer_stride5,
        out_outer_stride0, out_outer_stride1, out_outer_stride2, out_outer_stride3, out_outer_stride4,
        out_outer_stride5)
    inner_idx = inner_block * BLOCK_INNER + tl.arange(0, BLOCK_INNER)[None, :]
    inner_mask = inner_idx < inner_len
    return x_base + inner_idx * x_inner_stride, out_base + inner_idx * out_inner_stride, inner_mask
