"""Register caps without spills (tritonml_autotune/registers.py) and the launch guard that applies
them (tritonml/runtime/relaunch.py), here with stand-in compiles: the real ones, for every
segment kernel specialization on sm_80 and sm_90, are in tests/kernels/test_segment_compile.py."""
from __future__ import annotations

import pytest

from tritonml.runtime import relaunch as _relaunch
from tritonml_autotune.registers import occupancy_caps, spill_free_maxnreg


def _programs_per_sm(registers: int, num_warps: int) -> int:
    """Programs of ``num_warps`` warps an SM of 65,536 registers, 2,048 threads and 32 resident
    blocks holds at ``registers`` a thread, each warp's taken in units of 256."""
    per_warp = -(-registers * 32 // 256) * 256
    return min(32, 2048 // (32 * num_warps), 65536 // (per_warp * num_warps))


@pytest.mark.parametrize("num_warps", [1, 2, 4, 8, 16])
def test_caps_are_the_most_registers_at_each_occupancy(num_warps):
    expected = sorted({max(r for r in range(16, 256) if _programs_per_sm(r, num_warps) == p)
                       for p in {_programs_per_sm(r, num_warps) for r in range(16, 256)} - {0}})
    caps = occupancy_caps(num_warps)
    assert [c for c in caps if c >= 16] == expected
    assert occupancy_caps(num_warps, 100) == [c for c in expected if c >= 96]


def test_eight_warps_step_at_the_known_counts():
    assert occupancy_caps(8) == [32, 40, 48, 64, 80, 128, 255]


class _Ptxas:
    """A stand-in compile: ``spills[cap]`` bytes at each cap (None: ptxas's choice, at
    ``registers``), recording the caps compiled."""

    def __init__(self, registers, spills):
        self.registers, self.spills, self.compiled = registers, spills, []

    def __call__(self, cap):
        self.compiled.append(cap)
        return (self.registers if cap is None else cap), self.spills.get(cap, 0)


def test_ptxas_choice_without_spills_is_kept_after_one_compile():
    ptxas = _Ptxas(150, {})
    assert spill_free_maxnreg(ptxas, 8) is None
    assert ptxas.compiled == [None]


def test_a_spilling_choice_takes_the_lowest_clean_cap_from_its_registers_up():
    ptxas = _Ptxas(48, {None: 16, 48: 8, 64: 8})
    assert spill_free_maxnreg(ptxas, 8) == 80
    assert ptxas.compiled == [None, 48, 64, 80]


def test_where_every_cap_spills_the_least_spilling_is_taken():
    assert spill_free_maxnreg(_Ptxas(128, {None: 32, 128: 8, 255: 16}), 8) == 128
    assert spill_free_maxnreg(_Ptxas(128, {None: 8, 128: 16, 255: 16}), 8) is None


class _Compiled:
    def __init__(self, registers, spilled_words):
        self.n_regs, self.n_spills, self.loaded = registers, spilled_words, False

    def _init_handles(self):
        self.loaded = True


class _GuardedKernel:
    """A kernel whose compile spills 4 words as ptxas chooses (56 registers) and below a cap of
    64, none from 64; ``warmups``: the meta of every compile."""
    params = ()

    def __init__(self):
        self.warmups, self.launches = [], []

    def warmup(self, *args, grid, **meta):
        self.warmups.append(meta)
        cap = meta.get("maxnreg")
        return _Compiled(cap or 56, 4 if cap is None or cap < 64 else 0)

    def __getitem__(self, grid):
        return lambda *args, **meta: self.launches.append(meta)


@pytest.fixture
def guarded(monkeypatch):
    monkeypatch.setattr(_relaunch._triton_compat, "current_device", lambda: 0)
    monkeypatch.setattr(_relaunch, "_spill_caps", {})
    kernel = _GuardedKernel()
    monkeypatch.setattr(_relaunch, "_spill_guarded", {kernel})
    return kernel


def test_the_guard_launches_a_spilling_specialization_at_its_cap_and_remembers(guarded):
    meta = {"BLOCK": 16, "num_warps": 8}
    assert _relaunch.spill_free_meta(guarded, (1,), (3,), meta) == {**meta, "maxnreg": 64}
    assert [m.get("maxnreg") for m in guarded.warmups] == [None, 64]   # the caps from 56 up
    assert _relaunch.spill_free_meta(guarded, (1,), (5,), meta) == {**meta, "maxnreg": 64}
    assert len(guarded.warmups) == 2    # same dtypes and integer classes: decided once
    _relaunch._first_launch(guarded, (1,), (3,), meta, ("key",))
    assert guarded.launches == [{**meta, "maxnreg": 64}]
    assert meta == {"BLOCK": 16, "num_warps": 8}


def test_the_guard_leaves_a_named_cap_and_other_kernels_alone(guarded):
    meta = {"num_warps": 8, "maxnreg": 255}
    assert _relaunch.spill_free_meta(guarded, (1,), (), meta) is meta
    other = _GuardedKernel()
    assert _relaunch.spill_free_meta(other, (1,), (), {"num_warps": 8}) == {"num_warps": 8}
    assert guarded.warmups == other.warmups == []


class _UncompilableKernel(_GuardedKernel):
    def warmup(self, *args, grid, **meta):
        self.warmups.append(meta)
        raise RuntimeError("no driver for this target")


def test_a_guard_compile_that_fails_leaves_the_launch_at_ptxas_choice(monkeypatch):
    monkeypatch.setattr(_relaunch._triton_compat, "current_device", lambda: 0)
    monkeypatch.setattr(_relaunch, "_spill_caps", {})
    kernel = _UncompilableKernel()
    monkeypatch.setattr(_relaunch, "_spill_guarded", {kernel})
    meta = {"num_warps": 8}
    with pytest.warns(RuntimeWarning, match="could not compile .* no driver for this target"):
        assert _relaunch.spill_free_meta(kernel, (1,), (3,), meta) == meta
    assert _relaunch.spill_free_meta(kernel, (1,), (3,), meta) == meta
    assert len(kernel.warmups) == 1     # decided once: one warning, one try
