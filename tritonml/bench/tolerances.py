"""The accuracy table: how far a result may sit from its reference, one row per dtype.

One table for the tests and the benchmarks alike: the tests (``benchmarks/scan_oracle.py``,
``benchmarks/reduce_oracle.py``, ``tests/dml_helpers.py``) and the benchmarks' checks
(``tritonml/bench/cases.py``, run by ``tritonml bench``, ``benchmarks/report.py`` and
``benchmarks/gpu_timing.py``) all read
it. References are float64 (or exact integers); floats are rounded to the result dtype before
comparing. Each row names one bound per kind of measure, because scans and reductions are measured
differently:

- ``scan_ulps``: scans count the error in units in the last place of the result dtype:
  ``|got - want| <= scan_ulps * ulp(want) + accumulation allowance``
  (``benchmarks/scan_oracle.py``).
- ``acc_roundoff``: the unit roundoff of the type the dtype accumulates in (``ACC_DTYPE`` in
  ``tritonml/core/dtypes.py``), from which ``benchmarks/scan_oracle.accumulation_allowance``
  builds the allowance: a running sum's error is relative to the running sum of ``|x|``, not to the
  (possibly cancelled) result.
- ``rtol``, ``atol``: reductions (``benchmarks/reduce_oracle.py``), DirectML execution
  (``tests/dml_helpers.py``) and the benchmarks' checks compare
  ``|got - want| <= atol + rtol * |want|``. ``atol`` is the floor for results that cancel to near
  zero (mixed-sign sums, LOG_SUM_EXP's ``max + log(sum)``); the benchmarks' inputs are nonnegative,
  so nothing cancels there and they check ``rtol`` alone.

Integers wrap exactly (modulo 2**bits): every bound is 0.

Measured worst cases quoted below come from the tests that use each bound.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Tolerance:
    """The bounds of one dtype; see the module docstring for who reads which field."""
    scan_ulps: float
    acc_roundoff: float
    rtol: float
    atol: float


EXACT = Tolerance(scan_ulps=0.0, acc_roundoff=0.0, rtol=0.0, atol=0.0)

TOLERANCES = {
    torch.float16: Tolerance(
        # Accumulates in float32 and rounds once: the float32 error is far below half a float16
        # ulp, so result and rounded reference are at most 1 ulp apart (measured: 1).
        scan_ulps=1.0,
        acc_roundoff=2.0 ** -24,  # float32
        # The same one rounding: 1 ulp of float16 is at most 2**-10 of the value. The benchmarks
        # held float16 to this; the reduce and DirectML tests allowed 2e-3 and measure 0.
        rtol=2.0 ** -10,
        # Results near zero (subnormals below 2**-14, cancelled sums): about 2 ulps at 1.
        atol=2e-3,
    ),
    torch.bfloat16: Tolerance(
        scan_ulps=1.0,  # as float16: a float32 accumulator rounded once (measured: 1)
        acc_roundoff=2.0 ** -24,  # float32
        # About 2 ulps (1 ulp of bfloat16 is at most 2**-7 = 7.8e-3 of the value); the reduce
        # tests measure 7.75e-3, too close to 1 ulp to hold them to it.
        rtol=1.6e-2,
        atol=1.6e-2,  # results near zero, as float16's floor: about 2 ulps at 1
    ),
    torch.float32: Tolerance(
        # Accumulates in float64 and rounds once (<= 0.5 ulp plus float64's error; measured: 0).
        scan_ulps=1.0,
        acc_roundoff=2.0 ** -53,  # float64
        # About 8 ulps (1 ulp of float32 is at most 2**-23 = 1.2e-7 of the value). Sums and
        # products accumulate in float64 and round once; LOG_SUM_EXP accumulates float32 in float32
        # (docs/reduce.md), so its error grows with the reduced length: the reduce tests measure
        # 1.2e-7. The benchmarks held float32 to this; DirectML's tests to 2e-6, the reduce tests
        # to 1e-5.
        rtol=1e-6,
        # LOG_SUM_EXP = max + log(sum) can cancel to near zero, leaving an absolute error of a few
        # float32 ulps at magnitude 1 (the reduce tests' worst |error| / (1 + |want|) is 7.8e-8).
        # From DirectML's tests; the reduce tests allowed 1e-5.
        atol=2e-6,
    ),
    torch.float64: Tolerance(
        # Accumulates in float64 itself, so the accumulation allowance carries the error that
        # grows with length; 4 ulps cover the final rounding (measured beyond the allowance: 0).
        scan_ulps=4.0,
        acc_roundoff=2.0 ** -53,  # float64
        # No wider accumulator: the error grows with the reduced length n (n * 2**-53 at worst,
        # so 1e-12 holds to n ~ 9000 in the worst order, further in practice); the reduce tests
        # measure 2.4e-15.
        rtol=1e-12,
        atol=1e-12,  # results near zero (cancelled sums), the same 1e-12
    ),
    **{dtype: EXACT for dtype in (torch.int8, torch.int16, torch.int32, torch.int64,
                                  torch.uint8, torch.uint16, torch.uint32, torch.uint64)},
}
