"""bfloat16 in Triton's interpreter, computed as torch and the compiled kernels compute it.

Triton's interpreter keeps bfloat16 values as uint16 bit patterns and gets them wrong three ways:
float32 -> bfloat16 truncates toward zero (the GPU rounds to nearest even), a conversion from any
other type reinterprets the converted integer as bits (2.625 from float64 becomes 1.8e-40), and
arithmetic on bfloat16 operands computes on the bit patterns. ``InterpreterBuilder``'s casts and
elementwise operations are wrapped so that bfloat16 operands are computed on as float32 values and
results rounded once to nearest even (``tritonml/core/bfloat16.py``), as torch and the compiled
kernels do. Installed at import when tritonml interprets; every other type is left to Triton.
Checked: 3.8.0, 3.9.0 (``triton/runtime/interpreter.py``: InterpreterBuilder.cast_impl,
create_fp_to_fp, binary_op, unary_op, ternary_op, create_fma, create_rsqrt, create_erf).
"""
from __future__ import annotations

import importlib

import triton.language as tl

from .. import backend as _backend
from .registry import INTERPRETER_MODULE, REQUIRED

_BF16_ELEMENTWISE = ("binary_op", "unary_op", "ternary_op", "create_fma", "create_rsqrt",
                     "create_erf")
REQUIRED.update({f"{INTERPRETER_MODULE}.InterpreterBuilder.{name}": ()
                 for name in ("cast_impl", "create_fp_to_fp", *_BF16_ELEMENTWISE)})


def _install_interpreter_bfloat16():
    import numpy as _np

    from .. import bfloat16 as _bfloat16

    interpreter = importlib.import_module(INTERPRETER_MODULE)
    builder, handle_type = interpreter.InterpreterBuilder, interpreter.TensorHandle
    if getattr(builder, "_tritonml_bfloat16", False):
        return

    def is_bf16(value) -> bool:
        return (isinstance(value, handle_type) and value.dtype.scalar == tl.bfloat16
                and value.data.dtype == _np.uint16)

    def as_float32(value):
        return handle_type(_bfloat16.to_float32(value.data), tl.float32) if is_bf16(value) else value

    original_cast = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if dst_type.scalar == tl.bfloat16 and not is_bf16(src):
            return handle_type(_bfloat16.from_values(src.data), tl.bfloat16)
        if is_bf16(src) and dst_type.scalar != tl.bfloat16:
            return original_cast(self, as_float32(src), dst_type)
        return original_cast(self, src, dst_type)

    original_fp_to_fp = builder.create_fp_to_fp
    toward_zero = interpreter._ir.ROUNDING_MODE.RTZ

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        # Rounding toward zero (asked for by name) is what Triton's own conversion does.
        if (is_bf16(src) or dst_type.scalar == tl.bfloat16) and rounding_mode != toward_zero:
            return cast_impl(self, src, dst_type)
        return original_fp_to_fp(self, src, dst_type, rounding_mode)

    def elementwise(original):
        def wrapper(self, *args, **kwargs):
            if not any(is_bf16(a) for a in (*args, *kwargs.values())):
                return original(self, *args, **kwargs)
            result = original(self, *(as_float32(a) for a in args),
                              **{k: as_float32(v) for k, v in kwargs.items()})
            if result.data.dtype == bool:  # a comparison
                return handle_type(result.data, tl.int1)
            return handle_type(_bfloat16.from_values(result.data), tl.bfloat16)
        wrapper.__wrapped__ = original
        return wrapper

    builder.cast_impl = cast_impl
    builder.create_fp_to_fp = create_fp_to_fp
    for name in _BF16_ELEMENTWISE:
        setattr(builder, name, elementwise(getattr(builder, name)))
    builder._tritonml_bfloat16 = True


if _backend.INTERPRET:
    _install_interpreter_bfloat16()
