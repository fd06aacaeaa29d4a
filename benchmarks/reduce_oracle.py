"""The reduce functions' independent oracle, shared by the tests (tests/) and the GPU sweep
(``benchmarks/gpu_check.py``): numpy references, inputs that exercise each function, and the
comparison (within ``rtol``/``atol`` of the one accuracy table,
``tritonml.bench.tolerances.TOLERANCES``).

The oracle never calls tritonml: floats are computed in float64 from x converted exactly, integers
in 64-bit numpy integers (wrapping modulo 2**64, then cast to the output dtype, which wraps modulo
2**bits, the documented integer semantics).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from tritonml.bench.tolerances import TOLERANCES
from tritonml.core.dtypes import FLOAT_DTYPES, UNSIGNED_DTYPES

FUNCTIONS = ("ARGMAX", "ARGMIN", "AVERAGE", "L1", "L2", "LOG_SUM", "LOG_SUM_EXP", "MAX", "MIN",
             "MULTIPLY", "SUM", "SUM_SQUARE")
FLOAT_ONLY = ("AVERAGE", "L2", "LOG_SUM", "LOG_SUM_EXP")
INDEX_FUNCTIONS = ("ARGMAX", "ARGMIN")


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
# Inputs
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
