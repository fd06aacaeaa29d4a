"""The combine function is a parameter of the scan launcher: a user-defined ``@triton.jit``
combine runs through the same kernels in every regime (here a running maximum, DirectML has
no such operator; it proves the design the later "custom combine" issue builds on)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from tritonml_autotune.configs import ScanConfig
from tritonml.launchers.scan import ScanCombine, cumulative_scan
from tests.lookback_knob import prefix_every
from tritonml_autotune.devices import ARCHS


@triton.jit
def _running_max(a, b):
    return tl.maximum(a, b)


# Identity of max over the int64 accumulator of integer inputs.
RUNNING_MAX = ScanCombine("running_max", _running_max, -(2**63))


@pytest.mark.parametrize("config", [ScanConfig("rows", 16, 2), ScanConfig("columns", 8, 4),
                                    ScanConfig("lookback", 16, 2)],
                         ids=lambda c: c.regime)
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, False), (False, True)])
def test_user_defined_combine_runs_in_every_regime(config, reverse, exclusive):
    rng = np.random.default_rng(2)
    a = rng.integers(-1000, 1000, size=(3, 50), dtype=np.int64).astype(np.int32)
    axis = 0 if config.regime == "columns" else 1
    x = torch.from_numpy(np.ascontiguousarray(a.T if axis == 0 else a))
    with prefix_every(3):  # long look-backs
        result = cumulative_scan(x, axis, RUNNING_MAX, reverse=reverse, exclusive=exclusive,
                                 config=config).numpy()
    data = x.numpy().astype(np.int64)
    if reverse:
        data = np.flip(data, axis)
    want = np.maximum.accumulate(data, axis=axis)
    if exclusive:
        first = np.full_like(np.take(want, [0], axis=axis), -(2**63))
        want = np.concatenate([first, np.take(want, range(want.shape[axis] - 1), axis=axis)], axis)
    if reverse:
        want = np.flip(want, axis)
    assert np.array_equal(result, want.astype(np.int32))


def test_user_defined_combine_compiles_for_sm80_and_sm90():
    from tritonml.runtime import trace as _trace
    from tritonml.bench.gpu_compile import compile_in_subprocess, describe

    x = torch.empty((4, 1 << 16), dtype=torch.float32)
    running_max = ScanCombine("running_max", _running_max, float("-inf"))
    with _trace.record(execute=False) as rec:
        for config in (ScanConfig("rows", 1024, 1), ScanConfig("lookback", 1024, 1)):
            cumulative_scan(x, 1, running_max, exclusive=True, config=config)
    # The compiling process imports this module by name
    # (tests.launchers.test_scan_custom_combine: its path starts at the repository root) to find
    # the combine function again.
    results = compile_in_subprocess([describe(l) for l in rec.launches], archs=ARCHS)
    assert len(results) == 4 and all(r["ok"] for r in results), [r.get("error") for r in results]
