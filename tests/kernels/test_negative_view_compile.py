"""Kernels specialized for torch's negative views (NEGATE_X / NEGATE_OUT: a sign flip on load and
before the store) compile for sm_80 and sm_90 in every regime, without spills, and keep 128-bit
float32 stores. No GPU is needed: launches are recorded, then compiled in subprocesses.
"""
from __future__ import annotations

import torch

from tritonml.core import layout as _layout
from tritonml.runtime import trace as _trace
from tritonml.core.dtypes import ACC_TORCH_DTYPE
from tritonml.launchers.reduce import ReduceFunction, reduce_axes
from tritonml.records.builtin_reductions import RECORDS
from tritonml.launchers.scan import PRODUCT, SUM, cumulative_scan
from tritonml_autotune.heuristics import reduce_config
from tritonml.bench.gpu_compile import compile_in_subprocess, describe
from tests.gpu_compile_cases import SCAN_REGIME_SHAPES, regime_config
from tests.reduce_helpers import GPU_REGIME_SHAPES
from tritonml_autotune.devices import ARCHS

# The dtypes torch makes negative views of, a few of each kind.
SCAN_DTYPES = (torch.float32, torch.bfloat16, torch.int8, torch.uint8, torch.int64)
REDUCE_CASES = [(f, d) for f in ("SUM", "MAX", "ARGMAX", "MULTIPLY") for d in (torch.float32,
                                                                              torch.int8)]
REDUCE_CASES += [("LOG_SUM_EXP", torch.float16)]


def _negative(shape, dtype):
    return torch.empty(shape, dtype=dtype)._neg_view()  # never touched: launches are recorded


def _launches():
    descriptions = []
    for regime, (shape, axis) in SCAN_REGIME_SHAPES.items():
        for dtype in SCAN_DTYPES:
            x, out = _negative(shape, dtype), _negative(shape, dtype)
            layout = _layout.axis_layout(shape, x.stride(), out.stride(), axis)
            config = regime_config(regime, layout, ACC_TORCH_DTYPE[dtype].itemsize)
            for combine in (SUM, PRODUCT):
                with _trace.record(execute=False) as rec:
                    cumulative_scan(x, axis, combine, exclusive=True, out=out, config=config)
                for launch in rec.launches:
                    descriptions.append(dict(describe(launch), case=dict(
                        op=combine.name, regime=regime, dtype=str(dtype)[6:])))
    for regime, (shape, axes) in GPU_REGIME_SHAPES.items():
        for function, dtype in REDUCE_CASES:
            combine = RECORDS[ReduceFunction[function]]
            axes_ = tuple(range(len(shape))) if axes is None else axes
            x = _negative(shape, dtype)
            out_shape = [1 if i in axes_ else s for i, s in enumerate(shape)]
            out = (torch.empty(out_shape, dtype=torch.int64)._neg_view() if combine.returns_index
                   else _negative(out_shape, dtype))
            layout = _layout.reduce_layout(shape, x.stride(), [*out.stride()], axes_,
                                           combine.returns_index)
            config = reduce_config(layout, "cuda")
            assert config.regime == regime, (regime, config)
            with _trace.record(execute=False) as rec:
                reduce_axes(x, axes_, combine, out=out, config=config)
            for launch in rec.launches:
                descriptions.append(dict(describe(launch), case=dict(
                    op=function, regime=regime, dtype=str(dtype)[6:])))
    return descriptions


def test_negative_view_specializations_compile_without_spills():
    """One test, so the compilations run once (they use every core already)."""
    descriptions = _launches()
    assert all(d["meta"].get("NEGATE_OUT") for d in descriptions
               if d["kernel"] != "reduce_kernel" or not d["meta"]["WRITE_PARTIAL"])
    assert all(d["meta"]["NEGATE_X"] for d in descriptions if "NEGATE_X" in d["meta"])
    compiled = compile_in_subprocess(descriptions, archs=ARCHS)

    failures = [(r["case"], r["arch"], r.get("error")) for r in compiled if not r["ok"]]
    assert not failures, failures[:5]
    regimes = {(r["case"]["op"] in ("sum", "product"), r["case"]["regime"]) for r in compiled}
    assert regimes == {(True, "rows"), (True, "columns"), (True, "lookback"),
                       (False, "rows"), (False, "columns"), (False, "split")}
    # The same bound as the plain specializations: at most one 8-byte value in the stack frame.
    spilling = [(r["case"], r["arch"], r.get("stack_bytes"), r.get("local_bytes"))
                for r in compiled if r.get("local_bytes", 0) or r.get("stack_bytes", 0) > 8]
    assert not spilling, spilling[:5]
    assert max(r["registers"] for r in compiled) < 255
    for r in compiled:  # the sign flip keeps float32 scan stores 128-bit
        if r["case"]["dtype"] == "float32" and r["case"]["op"] in ("sum", "product"):
            assert r["max_store_bits"] == 128, (r["case"], r["arch"])
