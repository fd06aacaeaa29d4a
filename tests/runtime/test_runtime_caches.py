"""One registry of the process's caches (tritonml/runtime/caches.py): calls fill every registered
cache, ``tritonml.runtime.clear()`` empties them all, and calls after it still compute the right
results."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonml
from tritonml import runtime
from tritonml.runtime import caches as _caches, relaunch as _relaunch
from tritonml_autotune import cache, select


@triton.jit
def running_max(a, b):
    return (tl.maximum(a[0], b[0]),)


class _StubCompiled:
    """A compiled kernel as ``_relaunch`` keeps it (the GPU path, taken here without a GPU)."""


class _StubKernel:
    params = ()

    def __getitem__(self, grid):
        return lambda *args, **meta: _StubCompiled()


class _StubRegisters:
    n_regs, n_spills = 64, 0

    def _init_handles(self):
        pass


class _StubGuardedKernel(_StubKernel):
    """A ``guard_spills`` kernel that compiles without spills."""

    def warmup(self, *args, grid, **meta):
        return _StubRegisters()


def fill_every_cache(monkeypatch, tmp_path):
    x = torch.randn(4, 300)
    results = {"cumulative_sum": tritonml.cumulative_sum(x, 1), "sum": tritonml.reduce(x, "SUM", 1)}
    with tritonml.tuning.target("H100"):   # the tuner's tables, for a GPU's configs
        results["lookback"] = tritonml.cumulative_sum(torch.randn(2, 5000), 1)
        results["H100 sum"] = tritonml.reduce(x, "SUM", 1)
    (results["running_max"],) = tritonml.associative_scan(running_max, (x,), 1)
    with tritonml.use_tritonml(devices=("cpu",)):
        y = torch.randn(4, 8, requires_grad=True)
        torch.cumsum(y, 1).sum().backward()
    # The GPU-only caches, through the calls that fill them there.
    _relaunch._first_launch(_StubKernel(), (1,), (), {}, ("stub key",))
    guarded = _StubGuardedKernel()
    monkeypatch.setattr(_relaunch._triton_compat, "current_device", lambda: 0)
    monkeypatch.setattr(_relaunch, "_spill_guarded", {guarded})
    _relaunch.spill_free_meta(guarded, (1,), (), {"num_warps": 4})
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "NVIDIA H100 80GB HBM3")
    select._cuda_facts(0)
    select.version()
    cache.default_cache()
    return x, results


def check(x, results):
    np.testing.assert_allclose(results["cumulative_sum"].numpy(), np.cumsum(x.numpy(), 1),
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(results["sum"].numpy(), x.numpy().sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(results["H100 sum"].numpy(), x.numpy().sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(results["running_max"].numpy(), np.maximum.accumulate(x.numpy(), 1))


def test_calls_fill_every_registered_cache_and_clear_empties_them_all(monkeypatch, tmp_path):
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path))
    runtime.clear()
    x, results = fill_every_cache(monkeypatch, tmp_path)
    check(x, results)
    empty = [name for name, size in runtime.sizes().items() if size == 0]
    assert not empty, f"no call filled {empty}"
    runtime.clear()
    assert set(runtime.sizes().values()) == {0}
    monkeypatch.undo()
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path))
    x, results = fill_every_cache(monkeypatch, tmp_path)   # after clear(), as a first call
    check(x, results)
    runtime.clear()


def test_the_registry_holds_the_runtime_and_tuner_caches():
    assert {"plan.plans", "relaunch.compiled", "relaunch.spill_caps", "resident.workspaces", "state_combine.built",
            "routing.autograd", "tuner.select.answers", "tuner.shipped.tables",
            "tuner.cache.files"} <= set(runtime.sizes())


def test_register_takes_containers_and_lru_caches():
    import functools
    import threading

    held = _caches.register("test.held", {}, lock=threading.Lock())

    @functools.lru_cache(maxsize=None)
    def square(n):
        return n * n

    try:
        _caches.register("test.square", square)
        held["a"] = 1
        square(3)
        assert runtime.sizes()["test.held"] == 1 and runtime.sizes()["test.square"] == 1
        runtime.clear()
        assert not held and square.cache_info().currsize == 0
    finally:
        del _caches._registry["test.held"], _caches._registry["test.square"]


@pytest.mark.parametrize("forget", [runtime.clear, tritonml.tuning.forget])
def test_forgetting_drops_the_plans(forget):
    from tritonml.runtime import plan as _plan
    tritonml.cumulative_sum(torch.randn(3, 7), 1)
    assert _plan._plans
    forget()
    assert not _plan._plans
