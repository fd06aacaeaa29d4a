"""Shared by the reduce tests: a numpy oracle, input makers, layouts, the comparison (within
``rtol``/``atol`` of the one accuracy table, ``tritonml.bench.tolerances.TOLERANCES``), and the kernel
specializations the reduce launcher can choose on a GPU (as recorded launches).

The oracle never calls tritonml: floats are computed in float64 from x converted exactly, integers
in 64-bit numpy integers (wrapping modulo 2**64, then cast to the output dtype, which wraps modulo
2**bits, the documented integer semantics).
"""
from __future__ import annotations

import dataclasses

import math

import numpy as np
import torch

from tritonml.bench.tolerances import TOLERANCES
from tritonml.core.dtypes import FLOAT_DTYPES, INT_DTYPES, UNSIGNED_DTYPES

FUNCTIONS = ("ARGMAX", "ARGMIN", "AVERAGE", "L1", "L2", "LOG_SUM", "LOG_SUM_EXP", "MAX", "MIN",
             "MULTIPLY", "SUM", "SUM_SQUARE")
FLOAT_ONLY = ("AVERAGE", "L2", "LOG_SUM", "LOG_SUM_EXP")
INDEX_FUNCTIONS = ("ARGMAX", "ARGMIN")
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES
LAYOUTS = ("contiguous", "transposed", "stepped", "expanded")


def supported(function: str, dtype: torch.dtype) -> bool:
    return dtype in FLOAT_DTYPES or function not in FLOAT_ONLY


def normalize_axes(axes, rank):
    if axes is None:
        return tuple(range(max(rank, 1)))
    if isinstance(axes, int):
        axes = (axes,)
    return tuple(sorted(a % max(rank, 1) for a in axes))


def result_shape(shape, axes, keepdims):
    axes = normalize_axes(axes, len(shape))
    if len(shape) == 0:
        return ()
    if keepdims:
        return tuple(1 if i in axes else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in axes)


# ---------------------------------------------------------------------------------------------
# Oracle
# ---------------------------------------------------------------------------------------------
def _as_numpy(x: torch.Tensor) -> np.ndarray:
    if x.dtype in FLOAT_DTYPES:
        a = x.to(torch.float64).numpy()
    elif x.dtype in UNSIGNED_DTYPES:
        a = x.numpy().astype(np.uint64)
    else:
        a = x.numpy().astype(np.int64)
    return a.reshape(1) if a.ndim == 0 else a


def oracle(x: torch.Tensor, function: str, axes=None, keepdims: bool = True) -> np.ndarray:
    """The reduction in float64 (floats) or 64-bit integers, keepdims applied, not yet cast."""
    function = function.upper()
    a = _as_numpy(x)
    ax = normalize_axes(axes, x.dim())
    count = math.prod(a.shape[i] for i in ax)
    is_float = x.dtype in FLOAT_DTYPES
    with np.errstate(all="ignore"):
        if function == "SUM":
            r = np.sum(a, axis=ax, keepdims=True)
        elif function == "MULTIPLY":
            r = np.prod(a, axis=ax, keepdims=True)
        elif function in ("MAX", "MIN"):
            if is_float:
                low, high = -np.inf, np.inf
            else:
                info = torch.iinfo(x.dtype)
                low, high = info.min, info.max
            op, initial = (np.max, low) if function == "MAX" else (np.min, high)
            r = op(a, axis=ax, keepdims=True, initial=a.dtype.type(initial))
        elif function == "SUM_SQUARE":
            r = np.sum(a * a, axis=ax, keepdims=True)
        elif function == "L1":
            r = np.sum(np.abs(a), axis=ax, keepdims=True)
        elif function == "L2":
            r = np.sqrt(np.sum(a * a, axis=ax, keepdims=True))
        elif function == "AVERAGE":
            r = np.sum(a, axis=ax, keepdims=True) / np.float64(count)
        elif function == "LOG_SUM":
            r = np.log(np.sum(a, axis=ax, keepdims=True))
        elif function == "LOG_SUM_EXP":
            top = np.max(a, axis=ax, keepdims=True, initial=-np.inf)
            shift = np.where(np.isfinite(top), top, 0.0)
            r = np.log(np.sum(np.exp(a - shift), axis=ax, keepdims=True)) + shift
        elif function in INDEX_FUNCTIONS:
            kept = [i for i in range(a.ndim) if i not in ax]
            moved = np.transpose(a, kept + list(ax)).reshape([a.shape[i] for i in kept] + [-1])
            pick = np.argmax if function == "ARGMAX" else np.argmin
            r = pick(moved, axis=-1).reshape([1 if i in ax else a.shape[i] for i in range(a.ndim)])
        else:
            raise ValueError(function)
    if x.dim() == 0:
        return r.reshape(())
    if not keepdims:
        r = r.reshape([a.shape[i] for i in range(a.ndim) if i not in ax])
    return r


def expected_tensor(x, function, axes=None, keepdims=True, index_dtype=torch.int64):
    """The oracle cast to the result dtype (integers wrap, floats round once)."""
    r = oracle(x, function, axes, keepdims)
    if function.upper() in INDEX_FUNCTIONS:
        return torch.from_numpy(np.array(r, dtype=np.int64)).to(index_dtype)
    if x.dtype in FLOAT_DTYPES:
        return torch.from_numpy(np.array(r, dtype=np.float64)).to(x.dtype)
    np_dtype = torch.empty((), dtype=x.dtype).numpy().dtype
    return torch.from_numpy(np.array(r).astype(np_dtype))


def assert_matches(result: torch.Tensor, expected: torch.Tensor, context=""):
    assert result.dtype == expected.dtype, (context, result.dtype, expected.dtype)
    assert tuple(result.shape) == tuple(expected.shape), (context, result.shape, expected.shape)
    if expected.dtype in FLOAT_DTYPES:
        tolerance = TOLERANCES[expected.dtype]
        torch.testing.assert_close(result.double(), expected.double(), rtol=tolerance.rtol,
                                   atol=tolerance.atol, equal_nan=True,
                                   msg=lambda m: f"{context}\n{m}")
    else:
        r, e = result.numpy(), expected.numpy()
        assert np.array_equal(r, e), f"{context}\nresult {r}\nexpected {e}"


def bits(t: torch.Tensor) -> bytes:
    """Exact bytes of a tensor (NaN payloads and signed zeros included), for determinism checks."""
    return t.contiguous().numpy().tobytes() if t.dtype != torch.bfloat16 else \
        t.contiguous().view(torch.int16).numpy().tobytes()


# ---------------------------------------------------------------------------------------------
# Inputs and layouts
# ---------------------------------------------------------------------------------------------
def make_input(shape, dtype, function="SUM", seed=0) -> torch.Tensor:
    """Values that exercise ``function`` on ``dtype``: full-range integers (wrap-around included),
    small integers where ties matter (ARGMAX/ARGMIN), factors near 1 for MULTIPLY, positives for
    LOG_SUM."""
    g = torch.Generator().manual_seed(seed)
    function = function.upper()
    if dtype in FLOAT_DTYPES:
        if function == "MULTIPLY":
            v = (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5)
            v = v * torch.where(torch.rand(shape, generator=g) < 0.2, -1.0, 1.0).double()
        elif function == "LOG_SUM":
            v = torch.rand(shape, generator=g, dtype=torch.float64) + 0.1
        elif function in INDEX_FUNCTIONS:
            v = torch.randint(-4, 5, shape, generator=g).double()
        else:
            v = torch.randn(shape, generator=g, dtype=torch.float64)
        return v.to(dtype)
    info = torch.iinfo(dtype)
    if function in INDEX_FUNCTIONS:
        low, high = max(info.min, -4), min(info.max, 4) + 1
        return torch.randint(low, high, shape, generator=g).to(dtype)
    if dtype == torch.uint64:
        return torch.randint(-2**63, 2**63 - 1, shape, generator=g, dtype=torch.int64).view(dtype)
    if dtype == torch.int64:
        return torch.randint(-2**63, 2**63 - 1, shape, generator=g, dtype=torch.int64)
    return torch.randint(int(info.min), int(info.max) + 1, shape, generator=g).to(dtype)


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
    from gpu_compile_cases import describe
    from tritonml.launchers.reduce import COMBINES, ReduceFunction, reduce_axes

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
                reduce_axes(x, axes, COMBINES[ReduceFunction[function]])
                if chosen[-1].regime == "split":   # and its two-launch twin
                    reduce_axes(x, axes, COMBINES[ReduceFunction[function]],
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
