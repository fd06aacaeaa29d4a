"""Which dtypes tritonml accepts, what each accumulates in, and how torch maps onto Triton.

Accumulation types (decisions, see docs/semantics.md):
- float16/bfloat16 accumulate in float32 and round once at the store;
- float32 accumulates in float64, so long running sums keep float32 accuracy at every position
  (the Triton interpreter's tile scan is a sequential numpy loop; float64 makes its order moot);
- float64 stays float64;
- integers accumulate in 64 bits of the same signedness: two's-complement add and multiply commute
  with truncation, so the truncating store gives exactly the C result modulo 2**bits. 64 bits also
  keeps Triton's interpreter from asserting on 8- to 32-bit wrap-around (it checks narrower integer
  arithmetic for overflow), so the interpreter and the GPU run the same arithmetic.
"""
from __future__ import annotations

import torch
import triton.language as tl

FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
SIGNED_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)
UNSIGNED_DTYPES = (torch.uint8, torch.uint16, torch.uint32, torch.uint64)
INT_DTYPES = SIGNED_DTYPES + UNSIGNED_DTYPES
SUPPORTED_DTYPES = FLOAT_DTYPES + INT_DTYPES

TL_DTYPE = {
    torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32,
    torch.float64: tl.float64,
    torch.int8: tl.int8, torch.int16: tl.int16, torch.int32: tl.int32, torch.int64: tl.int64,
    torch.uint8: tl.uint8, torch.uint16: tl.uint16, torch.uint32: tl.uint32, torch.uint64: tl.uint64,
}

ACC_DTYPE = {
    torch.float16: tl.float32, torch.bfloat16: tl.float32, torch.float32: tl.float64,
    torch.float64: tl.float64,
    torch.int8: tl.int64, torch.int16: tl.int64, torch.int32: tl.int64, torch.int64: tl.int64,
    torch.uint8: tl.uint64, torch.uint16: tl.uint64, torch.uint32: tl.uint64, torch.uint64: tl.uint64,
}

# The one map back from Triton to torch (workspaces of accumulator or state types).
TORCH_DTYPE = {tl_dtype: torch_dtype for torch_dtype, tl_dtype in TL_DTYPE.items()}
ACC_TORCH_DTYPE = {dtype: TORCH_DTYPE[acc] for dtype, acc in ACC_DTYPE.items()}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# torch dtypes by their short names ("float32"), for files and command lines.
DTYPE_BY_NAME = {dtype_name(d): d for d in SUPPORTED_DTYPES}


def check_dtype(name: str, dtype: torch.dtype, allowed=SUPPORTED_DTYPES) -> None:
    if dtype not in allowed:
        names = ", ".join(dtype_name(d) for d in allowed)
        raise TypeError(f"{name}: dtype {dtype_name(dtype)} is not supported; supported dtypes are {names}")


def is_float(dtype: torch.dtype) -> bool:
    return dtype in FLOAT_DTYPES
