"""Every reduce kernel specialization the launcher can choose compiles for sm_80 and sm_90.

Launches are recorded without running (``tritonml.runtime.trace.record(execute=False)``) with the
configs the CUDA heuristics pick, over regime x dtype x function group, plus the layouts that change
the code (several reduced dims, 64-bit indexing); a compiled-mode subprocess compiles each distinct
specialization (``tritonml/bench/gpu_compile.py``, one process per core) and reads the PTX. No GPU
is needed.
"""
from __future__ import annotations

import itertools

import pytest
import torch

from tritonml.bench.gpu_compile import compile_in_subprocess

from benchmarks.reduce_oracle import FUNCTIONS
from tests.reduce_helpers import dedupe, gpu_reduce_launches
from tritonml_autotune.devices import ARCHS


CASES = (
    # rows, float32: every function (each has its own combine functions)
    [("rows", function, torch.float32) for function in FUNCTIONS]
    # the other dtype groups (half, 64-bit float, narrow / wide / unsigned integers) and regimes
    + [("rows", "ARGMAX", torch.float16), ("rows", "SUM", torch.bfloat16),
       ("rows", "MIN", torch.uint64), ("rows", "L2", torch.float16),
       ("columns", "SUM", torch.float32), ("columns", "ARGMAX", torch.float16),
       ("columns", "MAX", torch.int8), ("columns", "MULTIPLY", torch.uint64),
       ("split", "SUM", torch.float32), ("split", "ARGMIN", torch.float64),
       ("split", "LOG_SUM_EXP", torch.bfloat16), ("split", "MULTIPLY", torch.int32),
       ("split", "MAX", torch.uint8)]
    # two and three reduced dims (div/mod offset and index arithmetic), ARGMAX on a transposed view
    + [(((64, 32, 64), (0, 2), None), "ARGMAX", torch.float32),
       (((64, 32, 64), (0, 1), lambda t: t.permute(2, 1, 0).contiguous().permute(2, 1, 0)),
        "ARGMAX", torch.float32),
       (((8, 4, 8, 4, 32), (0, 2, 4), None), "SUM", torch.float32)]
    # past 2**31 elements: 64-bit offsets and indices (a stride-0 view, never allocated)
    + [(((1,), None, lambda t: t.expand(2**31 + 64)), "ARGMAX", torch.float32),
       (((1,), None, lambda t: t.expand(2**31 + 64)), "SUM", torch.float16)]
)


@pytest.fixture(scope="module")
def compiled():
    descriptions = dedupe(gpu_reduce_launches(CASES))
    assert len(descriptions) <= 60, "keep the compile test moderate"
    return descriptions, compile_in_subprocess(descriptions, archs=ARCHS)


def test_every_reduce_specialization_compiles_for_sm80_and_sm90(compiled):
    descriptions, results = compiled
    assert len(results) == len(descriptions) * len(ARCHS)
    failures = [(r["arch"], r["kernel"], r["case"], r.get("error")) for r in results if not r["ok"]]
    assert not failures, failures[:5]
    assert {r["kernel"] for r in results} == {"reduce_kernel", "reduce_partials_kernel"}
    assert {r["case"]["function"] for r in results} == set(FUNCTIONS)
    assert {r["case"]["regime"] for r in results} == {"rows", "columns", "split"}


def test_no_reduce_kernel_spills_registers(compiled):
    _, results = compiled
    spills = [(r["arch"], r["kernel"], r["case"], r.get("local_bytes"), r.get("stack_bytes"))
              for r in results if r.get("local_bytes", 0) or r.get("stack_bytes", 0)]
    assert not spills, spills[:5]
    assert max(r["registers"] for r in results) < 255


def test_aligned_contiguous_float32_loads_are_128_bit(compiled):
    _, results = compiled
    wide = [r for r in results
            if r["kernel"] == "reduce_kernel" and r["case"]["dtype"] == "float32"
            and r["case"]["where"] in ("rows", "columns", "split")]
    # rows: every function; columns and split (one launch and two): SUM
    assert len(wide) == len(ARCHS) * (12 + 3)
    for r in wide:
        assert r["max_load_bits"] == 128, (r["case"], r["arch"], r["max_load_bits"])


def test_split_regime_and_64_bit_indexing_were_compiled(compiled):
    descriptions, _ = compiled
    kernels = {(d["kernel"], d["meta"]["INDEX_64"], d["meta"].get("RED_DIMS")) for d in descriptions}
    assert ("reduce_partials_kernel", True, None) in kernels
    assert ("reduce_kernel", True, 1) in kernels
    assert {2, 3} <= {d["meta"].get("RED_DIMS") for d in descriptions}


# ---------------------------------------------------------------------------------------------
# User-defined reductions: Welford's 3-component state (tritonml.records.ready_reductions.welford)
# ---------------------------------------------------------------------------------------------
def test_welford_compiles_for_sm80_and_sm90_without_spills():
    from tests.gpu_compile_cases import (WELFORD_DTYPES, WELFORD_REGIME_SHAPES,
                                         welford_reduce_launches)

    descriptions = dedupe(welford_reduce_launches())
    assert {d["kernel"] for d in descriptions} == {"reduce_kernel", "reduce_partials_kernel"}
    assert {len(d["meta"]["STATE_DTYPES"]["tuple"]) for d in descriptions} == {3}
    results = compile_in_subprocess(descriptions, archs=ARCHS)
    assert len(results) == len(descriptions) * len(ARCHS)
    failures = [(r["arch"], r["kernel"], r["case"], r.get("error")) for r in results if not r["ok"]]
    assert not failures, failures[:5]
    assert {r["case"]["regime"] for r in results} == set(WELFORD_REGIME_SHAPES)
    assert {r["case"]["dtype"] for r in results} == {str(d)[6:] for d in WELFORD_DTYPES}
    spills = [(r["arch"], r["kernel"], r["case"], r.get("local_bytes"), r.get("stack_bytes"))
              for r in results if r.get("local_bytes", 0) or r.get("stack_bytes", 0)]
    assert not spills, spills[:5]
    assert max(r["registers"] for r in results) < 255


# ---------------------------------------------------------------------------------------------
# The scatter ops' index checks: (min, max, descents) of two int tensors in one pass
# (tritonml.records.ready_reductions.index_facts)
# ---------------------------------------------------------------------------------------------
def test_index_facts_compiles_for_sm80_and_sm90_without_spills():
    from tests.gpu_compile_cases import (INDEX_FACTS_DTYPES, INDEX_FACTS_REGIME_SHAPES,
                                         _neighbours, welford_reduce_launches)

    descriptions = dedupe(welford_reduce_launches(
        INDEX_FACTS_DTYPES, tuple(INDEX_FACTS_REGIME_SHAPES), reduction_name="index_facts",
        shapes=INDEX_FACTS_REGIME_SHAPES, inputs=_neighbours))
    assert {len(d["meta"]["STATE_DTYPES"]["tuple"]) for d in descriptions} == {3}
    results = compile_in_subprocess(descriptions, archs=ARCHS)
    assert len(results) == len(descriptions) * len(ARCHS)
    failures = [(r["arch"], r["kernel"], r["case"], r.get("error")) for r in results if not r["ok"]]
    assert not failures, failures[:5]
    spills = [(r["arch"], r["kernel"], r["case"], r.get("local_bytes"), r.get("stack_bytes"))
              for r in results if r.get("local_bytes", 0) or r.get("stack_bytes", 0)]
    assert not spills, spills[:5]
    assert max(r["registers"] for r in results) < 255


# ---------------------------------------------------------------------------------------------
# A 1-D index's facts and, where sorted, its group boundaries in one pass
# (tritonml/kernels/index_bounds.py)
# ---------------------------------------------------------------------------------------------
def test_index_bounds_compiles_for_sm80_and_sm90_without_spills():
    from unittest import mock

    from tritonml.bench.gpu_compile import describe
    from tritonml.launchers import index_bounds
    from tritonml.runtime import trace

    gpu_config = index_bounds.bounds_config(1 << 22, "cuda")
    descriptions = []
    with mock.patch.object(index_bounds, "bounds_config", lambda length, device: gpu_config):
        for dtype, groups, stride in itertools.product((torch.int32, torch.int64), (None, 100),
                                                        (1, 2)):
            keys = torch.zeros(4096 * stride, dtype=dtype)[::stride]
            with trace.record(execute=False) as rec:
                # a dry run: the facts it reads back are the initial ones, never used
                index_bounds.read_index_bounds(keys, groups)
            descriptions += [describe(launch) for launch in rec.launches]
    assert {d["meta"]["BLOCK"] for d in descriptions} == {gpu_config[0]}
    assert {d["meta"]["WRITE_OFFSETS"] for d in descriptions} == {True, False}
    results = compile_in_subprocess(descriptions, archs=ARCHS)
    assert len(results) == len(descriptions) * len(ARCHS)
    failures = [(r["arch"], r["meta"], r.get("error")) for r in results if not r["ok"]]
    assert not failures, failures[:5]
    spills = [(r["arch"], r["meta"], r.get("local_bytes"), r.get("stack_bytes"))
              for r in results if r.get("local_bytes", 0) or r.get("stack_bytes", 0)]
    assert not spills, spills[:5]
    assert max(r["registers"] for r in results) < 128
