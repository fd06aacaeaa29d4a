"""Shared by the reduce tests: layouts, strided outputs, and the kernel specializations the reduce
launcher can choose on a GPU (as recorded launches). The oracle, its inputs and the comparison are
``benchmarks/reduce_oracle.py``'s, which the GPU sweep shares.
"""
from __future__ import annotations

import dataclasses

import torch

from tritonml.core.dtypes import FLOAT_DTYPES, INT_DTYPES

ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES
LAYOUTS = ("contiguous", "transposed", "stepped", "expanded")


def with_layout(x: torch.Tensor, layout: str) -> torch.Tensor:
    """``x``'s values in another memory layout (for "expanded": x's first row, broadcast along
    dim 1 with stride 0, so the values change; the oracle always reads the tensor it is given)."""
    if layout == "contiguous" or x.dim() == 0:
        return x.clone()
    if layout == "transposed":
        order = tuple(reversed(range(x.dim())))
        return x.permute(order).contiguous().permute(order)
    if layout == "stepped":
        buffer = torch.zeros([2 * s + 1 for s in x.shape], dtype=x.dtype)
        view = buffer[tuple(slice(1, None, 2) for _ in x.shape)]
        view.copy_(x)
        return view
    if layout == "expanded":
        dim = 1 if x.dim() > 1 else 0
        return x.narrow(dim, 0, 1).clone().expand(x.shape)
    raise ValueError(layout)


def strided_out(shape, dtype, fill=7) -> torch.Tensor:
    """A non-contiguous tensor of ``shape`` (every other element of a larger buffer)."""
    buffer = torch.full([2 * s for s in shape] or [1], fill, dtype=dtype) if shape else \
        torch.full((), fill, dtype=dtype)
    return buffer[tuple(slice(None, None, 2) for _ in shape)] if shape else buffer


# ---------------------------------------------------------------------------------------------
# GPU specializations (recorded launches)
# ---------------------------------------------------------------------------------------------
# (shape, axes) for which the CUDA heuristics pick each regime (allocated but never touched).
GPU_REGIME_SHAPES = {
    "rows": ((512, 4096), (1,)),
    "columns": ((64, 1 << 17), (0,)),
    "split": ((1 << 22,), None),
}


def gpu_reduce_launches(cases):
    """Describe the launches the GPU heuristics choose for ``cases``: (regime or (shape, axes,
    view), function, dtype) tuples; a view is a callable making the input from a dense tensor."""
    from unittest import mock

    import tritonml_autotune.heuristics as heuristics
    from tritonml import runtime
    from tritonml.runtime import trace as _trace
    from tritonml.bench.gpu_compile import describe
    from tritonml.launchers.reduce import ReduceFunction, reduce_axes
    from tritonml.records.builtin_reductions import RECORDS

    pick = heuristics.reduce_config
    chosen = []

    def pick_for_cuda(layout, device_type, device=None):
        chosen.append(pick(layout, "cuda"))
        return chosen[-1]

    descriptions = []
    with mock.patch.object(heuristics, "reduce_config", pick_for_cuda):
        for where, function, dtype in cases:
            if isinstance(where, str):
                (shape, axes), view = GPU_REGIME_SHAPES[where], None
            else:
                shape, axes, view = where
            x = torch.empty(shape, dtype=dtype)  # never read: launches are only recorded
            if view is not None:
                x = view(x)
            runtime.clear()  # a remembered plan would not ask the patched heuristics again
            with _trace.record(execute=False) as rec:
                reduce_axes(x, axes, RECORDS[ReduceFunction[function]])
                if chosen[-1].regime == "split":   # and its two-launch twin
                    reduce_axes(x, axes, RECORDS[ReduceFunction[function]],
                                config=dataclasses.replace(chosen[-1], one_launch=False))
            runtime.clear()
            regime = chosen[-1].regime
            assert not isinstance(where, str) or regime == where, (where, chosen[-1])
            for launch in rec.launches:
                desc = describe(launch)
                desc["case"] = dict(where=where if isinstance(where, str) else str(where[:2]),
                                    regime=regime, function=function, dtype=str(dtype).replace("torch.", ""),
                                    grid=list(launch.grid))
                descriptions.append(desc)
    return descriptions


def _specialization(arg):
    """What Triton specializes an argument on: tensors by dtype and alignment, integers by being 1
    or a multiple of 16."""
    if isinstance(arg, dict) and "tuple" in arg:
        return [_specialization(a) for a in arg["tuple"]]
    if isinstance(arg, bool) or not isinstance(arg, int):
        return arg
    return "one" if arg == 1 else "div16" if arg % 16 == 0 else "int"


def dedupe(descriptions):
    """One description per distinct (kernel, meta, argument types): what the compiler sees."""
    import json
    seen, unique = set(), []
    for desc in descriptions:
        key = json.dumps({k: desc[k] for k in ("kernel", "meta")}, sort_keys=True) + json.dumps(
            [_specialization(a) for a in desc["args"]], sort_keys=True)
        if key not in seen:
            seen.add(key)
            unique.append(desc)
    return unique
