"""Address arithmetic shared by the kernels: a program's index to element offsets.

Sizes and strides arrive as tuples (see ``tritonml.core.layout``), outermost first, padded with
size-1 / stride-0 entries; Triton specializes integer arguments equal to 1 into constants, so
padding costs nothing in compiled code.
"""
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl


@triton.jit
def unflatten_offsets(flat, sizes, strides, other_strides):
    """Offsets in two tensors of row-major index ``flat`` over dims ``sizes`` (outermost first).

    Returns (offset in the tensor of ``strides``, offset in the tensor of ``other_strides``). The
    outermost size is implied: the quotient left over. Several tuples of strides share one
    decomposition, so the divisions are done once.
    """
    rest = flat
    offset = flat * 0
    other_offset = flat * 0
    for d in tl.static_range(len(sizes) - 1, 0, -1):
        index = rest % sizes[d]
        rest = rest // sizes[d]
        offset += index * strides[d]
        other_offset += index * other_strides[d]
    return offset + rest * strides[0], other_offset + rest * other_strides[0]


@triton.jit
def chain_position(chain, inner_len, INDEX_64: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """A chain's outer index, its inner positions [1, BLOCK_INNER] and their mask."""
    inner_blocks = tl.cdiv(inner_len, BLOCK_INNER)
    outer_idx = chain // inner_blocks
    inner_block = chain % inner_blocks
    if INDEX_64:
        outer_idx = outer_idx.to(tl.int64)
        inner_block = inner_block.to(tl.int64)
    inner_idx = inner_block * BLOCK_INNER + tl.arange(0, BLOCK_INNER)[None, :]
    return outer_idx, inner_idx, inner_idx < inner_len


@triton.jit
def chain_offsets(chain, inner_len, outer_sizes, x_outer_strides, out_outer_strides,
                  x_inner_stride, out_inner_stride,
                  INDEX_64: tl.constexpr, BLOCK_INNER: tl.constexpr):
    """Map a chain (an outer index x a block of BLOCK_INNER inner positions: one independent scan
    or reduction) to its base offsets.

    Returns (x_offsets [1, BLOCK_INNER], out_offsets [1, BLOCK_INNER], inner_mask [1, BLOCK_INNER]).
    """
    outer_idx, inner_idx, inner_mask = chain_position(chain, inner_len, INDEX_64, BLOCK_INNER)
    x_base, out_base = unflatten_offsets(outer_idx, outer_sizes, x_outer_strides, out_outer_strides)
    return x_base + inner_idx * x_inner_stride, out_base + inner_idx * out_inner_stride, inner_mask


@triton.jit
def outer_index(flat, sizes):
    """Row-major index ``flat`` over dims ``sizes`` (outermost first) as a tuple of per-dim
    indices; the outermost is the quotient left over. Decomposed once, applied to any number of
    tensors' strides with ``strided_offset``."""
    rest = flat
    index = ()
    for d in tl.static_range(len(sizes) - 1, 0, -1):
        index = (rest % sizes[d],) + index
        rest = rest // sizes[d]
    return (rest,) + index


@triton.jit
def strided_offset(index, strides):
    """Offset of the per-dim ``index`` (``outer_index``) in a tensor of ``strides``."""
    offset = index[0] * strides[0]
    for d in tl.static_range(1, len(strides)):
        offset += index[d] * strides[d]
    return offset
