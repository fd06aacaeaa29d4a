"""The segment kernel compiles for sm_80 and sm_90 in the specializations a GPU runs
(tests/segment_compile_cases.py), without a GPU: as it launches (ptxas's own register choice, or
where that spills the cap ``tritonml_autotune.registers.spill_free_maxnreg`` picks, as the
launch's guard in tritonml/runtime/relaunch.py does), with no spills and no local memory, and,
where x's axis is contiguous, loads of x as wide as its tile allows (128 bits, or a thread's four
lanes of 8 or 16 bits in a 1-D tile)."""
import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tritonml
from tests.segment_compile_cases import FLAT_LAYOUTS, group_launches, segment_launches
from tritonml.bench import segment_model
from tritonml.bench.gpu_compile import compile_in_subprocess
from tritonml.kernels.segment import segment_kernel
from tritonml_autotune.compiled import SPILL_TOLERANCE_BYTES
from tritonml_autotune.registers import occupancy_caps, spill_free_maxnreg
from tests import triton_releases
from tests.timing import limit
from tritonml_autotune.devices import ARCHS

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="compiles for a GPU without one")

REPO = Path(__file__).resolve().parents[2]


def _spilled(result) -> int:
    return result.get("stack_bytes", 0) + result.get("local_bytes", 0)


@pytest.fixture(scope="module")
def compiled_segments():
    """Every specialization for each arch as it runs: compiled as ptxas chooses, then, where
    that spills, at each register cap ``spill_free_maxnreg`` may try, keeping what it picks."""
    return _compiled_as_launched(segment_launches())


def _compiled_as_launched(descriptions) -> list:
    plain = compile_in_subprocess(descriptions, archs=ARCHS, timeout=limit(1800))
    retries = {arch: [] for arch in ARCHS}
    for i, desc in enumerate(descriptions):
        for j, arch in enumerate(ARCHS):
            first = plain[i * len(ARCHS) + j]
            if _spilled(first) and desc["meta"].get("maxnreg") is None:
                for cap in occupancy_caps(desc["meta"]["num_warps"], first["registers"]):
                    capped = copy.deepcopy(desc)
                    capped["meta"]["maxnreg"] = cap
                    retries[arch].append(((i, cap), capped))
    at_cap = {}
    for arch, jobs in retries.items():
        if jobs:
            results = compile_in_subprocess([d for _, d in jobs], archs=(arch,), timeout=limit(1800))
            at_cap.update({(i, cap, arch): r for ((i, cap), _), r in zip(jobs, results)})
    chosen = []
    for i in range(len(descriptions)):
        for j, arch in enumerate(ARCHS):
            first = plain[i * len(ARCHS) + j]
            if descriptions[i]["meta"].get("maxnreg") is not None:
                # a config's own cap: the launch has no guard, so a spill is reported as it is
                chosen.append(first)
                continue

            def compile_at(cap, i=i, arch=arch, first=first):
                r = first if cap is None else at_cap[(i, cap, arch)]
                return r.get("registers", 0), _spilled(r)

            cap = spill_free_maxnreg(compile_at, first.get("num_warps", 4))
            chosen.append(first if cap is None else {**at_cap[(i, cap, arch)], "guard_cap": cap})
    return chosen


def test_every_segment_specialization_compiles_for_sm80_and_sm90(compiled_segments):
    failed = [(r["case"], r["arch"], r.get("error", "")[-300:]) for r in compiled_segments
              if not r.get("ok", True) or r.get("error")]
    assert not failed, failed[:3]


def test_segment_kernels_compile_without_spills_on_sm80_and_sm90(compiled_segments):
    """No spills, but the one 8-byte value ptxas may keep in the stack frame outside any loop
    (``compiled.SPILL_TOLERANCE_BYTES``, as the look-back's narrow types): Triton 3.6 does so
    for the walking 1-D bfloat16 ARGMAX on sm_90 at 255 registers."""
    spilling = [(r["case"], r["arch"], r.get("registers"), r.get("guard_cap"),
                 r.get("stack_bytes"), r.get("local_accesses_in_loops"))
                for r in compiled_segments
                if _spilled(r) > SPILL_TOLERANCE_BYTES or r.get("local_accesses_in_loops", 0)]
    assert not spilling, spilling[:5]


def test_scatter_group_reductions_compile_without_spills_on_sm80_and_sm90():
    """The scatter ops' specializations (the H100 config, widths 1 to 64), as they launch."""
    compiled = _compiled_as_launched(group_launches())
    failed = [(r["case"], r["arch"], r.get("error", "")[-300:]) for r in compiled
              if not r.get("ok", True) or r.get("error")]
    assert not failed, failed[:3]
    spilling = [(r["case"], r["arch"], r.get("registers"), r.get("guard_cap"))
                for r in compiled if _spilled(r) or r.get("local_accesses_in_loops", 0)]
    assert not spilling, spilling[:5]
    assert {r["case"]["layout"] for r in compiled} == {"width 1", "width 16", "width 64",
                                                      "width 1 ids"}


def test_register_caps_keep_most_specializations_at_ptxas_choice(compiled_segments):
    """The guard is the exception: it recompiles only where ptxas's own choice spills (the
    1-D scans, and a few tiles of many rows or a strided axis), so a first launch rarely costs
    more than one compile."""
    capped = [r for r in compiled_segments if "guard_cap" in r]
    assert len(capped) <= len(compiled_segments) // 4, [(r["case"], r["arch"]) for r in capped]


def _widest_load_bits(result) -> int:
    """The widest load of x a tile allows: 128 bits, or all of a thread's lanes (four 8-bit or
    16-bit elements are 32 or 64 bits). (The compile facts give the kernel's widest load of
    any tensor: for x narrower than 32 bits that may be a boundary or look-back load.)"""
    meta = result["meta"]
    lanes = meta["BLOCK_AXIS"] * meta["BLOCK_INNER"] // (32 * meta["num_warps"])
    return min(128, lanes * getattr(torch, result["case"]["dtype"][6:]).itemsize * 8)


def test_segment_rows_load_128_bit_vectors_on_sm80_and_sm90(compiled_segments):
    narrow = [(r["case"], r["arch"], r["max_load_bits"]) for r in compiled_segments
              if r["case"]["layout"] in FLAT_LAYOUTS + ("rows",)
              and r["max_load_bits"] < _widest_load_bits(r)]
    assert not narrow, narrow[:5]


def test_the_time_model_charges_the_registers_these_compile_to(compiled_segments):
    """tritonml/bench/segment_model.py sets programs per SM from the sm_90 registers of a 1-D
    float32 x's SUM reduction and forward sum scan, both as they launch (the scan at ptxas's own
    choice, no guard cap). The reduction's is a program's that walks several tiles ("flat
    walk", as at every size the model's tables have): the one-tile program has no loop and
    compiles to fewer."""
    def flat_sm90(op, layout="flat", **case):
        return next(r for r in compiled_segments
                    if r["arch"] == 90 and r["case"]["layout"] == layout
                    and r["case"]["op"] == op and r["case"]["dtype"] == "torch.float32"
                    and all(r["case"].get(k) == v for k, v in case.items()))

    walk = next(d for d in segment_launches(("flat walk",)) if d["case"]["op"] == "SUM")
    assert walk["args"][segment_kernel.arg_names.index("chunk_tiles")] > 1
    reduction = flat_sm90("SUM", layout="flat walk")
    scan = flat_sm90("sum", reverse=False, exclusive=False)
    assert reduction["registers"] == (triton_releases.SEGMENT_FLAT_SUM_REGISTERS_SM90
                                      if triton_releases.BEFORE_3_8
                                      else segment_model.REGISTERS["reduce"])
    assert scan["registers"] == (triton_releases.SEGMENT_FLAT_SCAN_REGISTERS_SM90
                                 if triton_releases.BEFORE_3_8 else segment_model.REGISTERS["scan"])
    assert "guard_cap" not in scan


@pytest.mark.parametrize("arch", ARCHS)
def test_the_launch_guard_picks_these_caps_through_tritons_own_warmup(compiled_segments, arch):
    """The guard's glue as a launch runs it (mock tensors, ``JITFunction.warmup`` with the cap in
    its meta, the registers and spilled bytes read where the driver reports them), for the 1-D
    scans, with a stand-in driver in place of CUDA's (tests/guard_stand_in_driver.py)."""
    descriptions = [d for d in segment_launches(("flat",))
                    if "reverse" in d["case"] or d["case"]["op"] == "affine"]
    expected = [next(r.get("guard_cap") for r in compiled_segments
                     if r["case"] == d["case"] and r["arch"] == arch) for d in descriptions]
    assert any(cap is not None for cap in expected) and None in expected   # both kinds tried
    env = dict(os.environ, TRITON_INTERPRET="0",
               PYTHONPATH=os.pathsep.join([str(REPO)] + sys.path))
    run = subprocess.run([sys.executable, "-m", "tests.guard_stand_in_driver"], cwd=REPO,
                         input=json.dumps({"arch": arch, "launches": descriptions}),
                         capture_output=True, text=True, env=env, timeout=limit(1200))
    assert run.returncode == 0, run.stderr[-2000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == expected
