"""bfloat16 bit patterns from and to numpy values, rounded to nearest even.

Triton's interpreter keeps bfloat16 data as ``uint16`` bit patterns, and numpy has no bfloat16
type. These two functions are the exact conversions the interpreter lacks
(``tritonml.core.triton_compat.interpreter_bfloat16`` installs them): every value is rounded once,
to nearest with ties to even, as torch and the GPU's ``cvt.rn`` do, whatever the source type
(float16/32/64, any integer up to 64 bits). NaN stays NaN (quiet), an overflow becomes infinity.

Wider sources get there through *round to odd* (Boldo & Melquiond, "Emulation of FMA and
correctly rounded sums: proved algorithms using rounding to odd", IEEE TC 2008): rounding to odd at
a precision of at least p + 2 bits and then to nearest at p bits equals one rounding to nearest at p
bits. float64 and 64-bit integers are first rounded to odd at float32's 24 bits (64-bit integers
through float64's 53), then float32 is rounded to bfloat16's 8 bits.
"""
from __future__ import annotations

import numpy as np


def to_float32(bits: np.ndarray) -> np.ndarray:
    """The float32 values of bfloat16 bit patterns (exact: bfloat16 is float32's upper half)."""
    return (np.asarray(bits).astype(np.uint32) << np.uint32(16)).view(np.float32)


def from_values(values: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns (``uint16``) of ``values``, rounded to nearest even."""
    values = np.asarray(values)
    kind, size = values.dtype.kind, values.dtype.itemsize
    if kind == "f" and size <= 4:
        return _round_float32(values.astype(np.float32))
    if kind == "f":
        return _round_float32(_odd_float32(values.astype(np.float64)))
    if kind in "iub" and size <= 4:
        return _round_float32(_odd_float32(values.astype(np.float64)))  # exact in float64
    if kind in "iu":
        return _round_float32(_odd_float32(_odd_float64(values)))
    raise TypeError(f"no bfloat16 conversion from numpy dtype {values.dtype}")


def _round_float32(values: np.ndarray) -> np.ndarray:
    bits = values.view(np.uint32)
    with np.errstate(over="ignore"):
        # Adding 0x7FFF plus the kept part's lowest bit carries into bit 16 exactly when the
        # dropped half is above one half, or equal to it with an odd kept part: ties to even.
        rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    quiet_nan = (bits >> np.uint32(16)) | np.uint32(0x0040)
    return np.where(np.isnan(values), quiet_nan, rounded).astype(np.uint16)


def _odd_float32(values: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounded to odd: truncated toward zero, lowest bit set if inexact."""
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = values.astype(np.float32)
        overshoot = np.abs(nearest.astype(np.float64)) > np.abs(values)
        truncated = np.where(overshoot, np.nextafter(nearest, np.float32(0)), nearest)
        inexact = (truncated.astype(np.float64) != values) & ~np.isnan(values)
    bits = truncated.view(np.uint32) | inexact.astype(np.uint32)
    return bits.view(np.float32)


def _odd_float64(integers: np.ndarray) -> np.ndarray:
    """64-bit integers -> float64 rounded to odd, through an exact two-part sum."""
    if integers.dtype.kind == "i":
        high = (integers >> 32).astype(np.float64) * 2.0 ** 32  # exact: 32 significant bits
    else:
        high = (integers >> np.uint64(32)).astype(np.float64) * 2.0 ** 32
    low = (integers & 0xFFFFFFFF).astype(np.float64)  # in [0, 2**32), exact
    total = high + low
    # Knuth's TwoSum: ``total + error`` is the integer exactly.
    low_part = total - high
    error = (high - (total - low_part)) + (low - low_part)
    overshoot = (error != 0) & ((error < 0) == (total > 0))
    truncated = np.where(overshoot, np.nextafter(total, 0.0), total)
    bits = truncated.view(np.uint64) | (error != 0).astype(np.uint64)
    return bits.view(np.float64)
