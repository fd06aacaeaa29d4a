"""Independent references for the scan tests: numpy in float64 or exact integers, and the error
measure (ulps of the result dtype plus an accumulation allowance). The bounds come from the one
accuracy table, ``tritonml.bench.tolerances.TOLERANCES``."""
from __future__ import annotations

import numpy as np
import torch

from tritonml.bench.tolerances import TOLERANCES

FLOAT_TORCH = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

# Mantissa bits (including the implicit one) of each float type, for ulp-based comparisons.
MANTISSA_BITS = {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24, torch.float64: 53}


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """Exact numpy copy: bfloat16 widened to float64 (numpy has no bfloat16)."""
    t = t.detach().cpu()
    if t.dtype == torch.bfloat16:
        return t.to(torch.float64).numpy()
    return t.numpy().copy()


def with_initial(a: np.ndarray, initial: np.ndarray, axis: int, reverse: bool) -> np.ndarray:
    """``a`` with ``initial`` (a's shape without ``axis``) put first in traversal order."""
    first = np.expand_dims(initial, axis)
    return np.concatenate([a, first] if reverse else [first, a], axis=axis)


def drop_initial(run: np.ndarray, axis: int, reverse: bool, exclusive: bool) -> np.ndarray:
    """The outputs of a scan with an initial, from the inclusive scan of ``with_initial``: the
    positions after the initial's (inclusive) or up to the last element's (exclusive)."""
    n = run.shape[axis] - 1
    skip_first = exclusive == reverse  # the result starts at index 1 of the padded run
    return np.take(run, range(1, n + 1) if skip_first else range(n), axis=axis)


def scan_reference(a: np.ndarray, axis: int, op: str, reverse: bool, exclusive: bool,
                   int_dtype=None, initial: np.ndarray | None = None) -> np.ndarray:
    """Running sum/product along ``axis``: float64 for floats; for integers (``int_dtype`` given),
    exact modulo 2**64 in (u)int64, then truncated to ``int_dtype`` (C wrap-around).
    ``initial``: a carry-in (a's shape without ``axis``) folded in before the first element in
    traversal order."""
    if a.ndim == 0:
        a = a.reshape(1)
        squeeze = True
    else:
        squeeze = False
    if initial is not None:
        padded = with_initial(a, np.asarray(initial), axis, reverse)
        run = drop_initial(scan_reference(padded, axis, op, reverse, False, int_dtype), axis,
                           reverse, exclusive)
        return run.reshape(()) if squeeze else np.ascontiguousarray(run)
    if int_dtype is not None:
        work = a.astype(np.uint64 if np.dtype(int_dtype).kind == "u" else np.int64)
    else:
        work = a.astype(np.float64)
    if reverse:
        work = np.flip(work, axis)
    with np.errstate(over="ignore", invalid="ignore"):
        run = np.cumsum(work, axis=axis) if op == "sum" else np.cumprod(work, axis=axis)
    if exclusive:
        identity = np.zeros_like(np.take(run, [0], axis=axis)) if op == "sum" else \
            np.ones_like(np.take(run, [0], axis=axis))
        run = np.concatenate([identity, np.take(run, range(run.shape[axis] - 1), axis=axis)],
                             axis=axis)
    if reverse:
        run = np.flip(run, axis)
    if int_dtype is not None:
        run = run.astype(int_dtype)
    return run.reshape(()) if squeeze else np.ascontiguousarray(run)


def round_to(ref64: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Round a float64 reference to ``dtype`` (round-to-nearest-even) and widen back."""
    # a copy: ascontiguousarray keeps the negative strides of a flipped size-1 axis
    return torch.from_numpy(np.array(ref64, order="C")).to(dtype).to(torch.float64).numpy()


def ulp(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Spacing of ``dtype`` at each value (subnormal floor included)."""
    bits = MANTISSA_BITS[dtype]
    finfo = torch.finfo(dtype)
    mag = np.maximum(np.abs(values), finfo.tiny)
    exponent = np.floor(np.log2(mag))
    return np.exp2(exponent - (bits - 1))


def scan_matches(result: torch.Tensor, x_np: np.ndarray, axis: int, op: str, reverse: bool,
                 exclusive: bool, abs_scale: np.ndarray | None = None,
                 initial: np.ndarray | None = None) -> tuple[bool, str]:
    """Compare a scan result (with the carry-in ``initial``, if given) with the reference;
    returns (ok, message)."""
    dtype = result.dtype
    got = to_numpy(result)
    if dtype not in FLOAT_TORCH:
        want = scan_reference(x_np, axis, op, reverse, exclusive, int_dtype=got.dtype,
                              initial=initial)
        ok = np.array_equal(got, want)
        return ok, "" if ok else f"integer mismatch at {np.argwhere(got != want)[:5].tolist()}"
    ref = scan_reference(x_np, axis, op, reverse, exclusive, initial=initial)
    want = round_to(ref, dtype)
    same_special = (np.isnan(got) == np.isnan(want)).all() and \
        (np.isinf(want) <= (got == want)).all()
    finite = np.isfinite(want) & np.isfinite(got)
    allowed = TOLERANCES[dtype].scan_ulps * ulp(want, dtype)
    if abs_scale is not None:
        # Cancellation: an accumulator's rounding error is relative to the running sum of |x|,
        # not to the (possibly tiny) result.
        allowed = allowed + abs_scale
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: filtered by ``finite``
        err = np.abs(got - want)
    bad = finite & (err > allowed)
    ok = same_special and not bad.any()
    if ok:
        return True, ""
    where = np.argwhere(bad)[:3].tolist()
    return False, (f"{dtype}: specials match={same_special}, {int(bad.sum())} values off, e.g. at "
                   f"{where}: got {got[bad][:3]}, want {want[bad][:3]}")


def accumulation_allowance(x_np: np.ndarray, axis: int, op: str, reverse: bool, exclusive: bool,
                           dtype: torch.dtype, initial: np.ndarray | None = None
                           ) -> np.ndarray | None:
    """Rounding error the accumulator may add on top of the final rounding, per position.

    Sums: a scan's error is relative to the running sum of |x| (cancellation can make the result
    itself tiny): eps_acc * log2(n) * sum|x|, times 4 for slack. Products: relative to the result,
    eps_acc * n. eps_acc is ``TOLERANCES[dtype].acc_roundoff``."""
    if dtype not in FLOAT_TORCH:
        return None
    n = max(x_np.shape[axis] if x_np.ndim else 1, 2) + (initial is not None)
    eps_acc = TOLERANCES[dtype].acc_roundoff
    if op == "sum":
        abs_initial = None if initial is None else np.abs(np.asarray(initial, dtype=np.float64))
        running_abs = scan_reference(np.abs(x_np.astype(np.float64)), axis, "sum", reverse, exclusive,
                                     initial=abs_initial)
        return 4 * eps_acc * np.log2(n) * running_abs
    ref = scan_reference(x_np, axis, op, reverse, exclusive, initial=initial)
    with np.errstate(invalid="ignore"):
        return np.nan_to_num(2 * eps_acc * n * np.abs(ref), nan=0.0, posinf=0.0)
