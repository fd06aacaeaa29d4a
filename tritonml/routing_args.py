"""How routing (tritonml/routing.py) reads torch's arguments: the dtypes each torch function
accepts and computes in, how its ``dim`` reads, and its argument signatures.

Every rule returns None where torch's result would differ from what tritonml computes, and
routing then lets torch run the call.
"""
from __future__ import annotations

import inspect
import operator
from typing import Callable

import torch

# What a route returns when torch must run the call itself.
FALL_THROUGH = object()

# -- dtypes ---------------------------------------------------------------------------------------

FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
INTEGERS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)
# What routing accepts as input. uint16/32/64 fall through: torch implements few ops for them.
INPUTS = FLOATS + INTEGERS + (torch.bool,)
# What ours computes in. bool only for amax/amin, which read it as uint8 (0/1) and view back.
COMPUTE = FLOATS + INTEGERS


def promote_integers(x_dtype, dtype):
    """cumsum, cumprod, sum, prod: ``dtype=`` first, else integers and bool give int64."""
    if dtype is not None:
        return dtype if dtype in COMPUTE else None
    return x_dtype if x_dtype in FLOATS else torch.int64


def same(x_dtype, dtype):
    """amax, amin: the input's dtype (bool included)."""
    return x_dtype


def same_no_bool(x_dtype, dtype):
    """argmax, argmin: torch refuses bool."""
    return None if x_dtype == torch.bool else x_dtype


def floats_only(x_dtype, dtype):
    """mean: ``dtype=`` (a float) first, else a float input; torch refuses the rest itself."""
    target = x_dtype if dtype is None else dtype
    return target if target in FLOATS else None


def integers_to_default_float(x_dtype, dtype):
    """logsumexp: integers and bool compute in torch's default float dtype."""
    return x_dtype if x_dtype in FLOATS else torch.get_default_dtype()


def floats_input(x_dtype, dtype):
    """logcumsumexp, var/std, nanmean: a float input; nanmean's ``dtype=`` a float too."""
    if x_dtype not in FLOATS or (dtype is not None and dtype not in FLOATS):
        return None
    return x_dtype if dtype is None else dtype


def nansum_dtype(x_dtype, dtype):
    """nansum: as sum (integers and bool give int64); a float input with an integer ``dtype=``
    falls through (its NaNs would convert first)."""
    if dtype is not None and x_dtype in FLOATS and dtype not in FLOATS:
        return None
    return promote_integers(x_dtype, dtype)


def floats_no_narrowing(x_dtype, dtype):
    """vector_norm: float input; ``dtype=`` only if x converts to it without narrowing."""
    if x_dtype not in FLOATS:
        return None
    if dtype is None:
        return x_dtype
    return dtype if dtype in FLOATS and torch.promote_types(x_dtype, dtype) == dtype else None


# -- how each function reads `dim` ---------------------------------------------------------------


class _All:
    """Every dim: what dim=None, an empty dim list or prod's absent dim mean."""

    def __repr__(self) -> str:
        return "ALL"


ALL = _All()

# How `dim` reads, per function.
SCAN_DIM = "scan"     # one int, required
ONE_DIM = "one"       # one int; absent: every dim
ARG_DIM = "arg"       # one int, or None: every dim, flattened
DIMS = "dims"         # int, sequence of ints, or None; an empty sequence means every dim
DIMS_NONEMPTY = "dims_nonempty"  # as DIMS, but torch refuses an empty sequence (logsumexp)


def index_arg(value):
    """An int dim as torch reads it (ints, numpy ints), or None; bool and tensors fall through."""
    if isinstance(value, (bool, torch.Tensor)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def read_dims(kind: str, dim, rank: int):
    """Normalized dims: an int (scans), a tuple of distinct dims, ``ALL``, or None (fall through).

    A 0-d tensor takes dim 0 or -1, as torch allows.
    """
    span = max(rank, 1)
    if dim is None and kind in (ARG_DIM, DIMS, DIMS_NONEMPTY):
        return ALL
    if dim is ALL:
        return ALL
    if isinstance(dim, (list, tuple)):  # torch.Size is a tuple
        if kind not in (DIMS, DIMS_NONEMPTY) or (not dim and kind == DIMS_NONEMPTY):
            return None
        if not dim:
            return ALL
        dims = [index_arg(d) for d in dim]
    else:
        dims = [index_arg(dim)]
    if any(d is None or not -span <= d < span for d in dims):
        return None
    dims = [d % span for d in dims]  # pyright: ignore[reportOptionalOperand] (None returned above)
    if len(set(dims)) != len(dims):
        return None
    return dims[0] if kind == SCAN_DIM else tuple(dims)


# -- the table ------------------------------------------------------------------------------------

def signature_of(stub) -> inspect.Signature:
    return inspect.signature(stub)


# torch's argument names and defaults, one signature per family of functions.
SCAN_ARGS = signature_of(lambda input, dim, *, dtype=None, out=None: None)
REDUCE_ARGS = signature_of(lambda input, dim=None, keepdim=False, *, dtype=None, out=None: None)
PROD_ARGS = signature_of(lambda input, dim=ALL, keepdim=False, *, dtype=None, out=None: None)
EXTREME_ARGS = signature_of(lambda input, dim=(), keepdim=False, *, out=None: None)
ARG_ARGS = signature_of(lambda input, dim=None, keepdim=False, *, out=None: None)
LOGSUMEXP_ARGS = signature_of(lambda input, dim, keepdim=False, *, out=None: None)
NORM_ARGS = signature_of(lambda input, ord=2, dim=None, keepdim=False, *, dtype=None,
                         out=None: None)
# torch accepts numpy's spellings and, for vector_norm, `x=`.
ALIASES = {"self": "input", "x": "input", "axis": "dim", "keepdims": "keepdim"}


def constant(name: str) -> Callable[[dict], str]:
    return lambda arguments: name


def norm_function(arguments: dict):
    order = arguments["ord"]
    if isinstance(order, bool) or not isinstance(order, (int, float)):
        return None
    return {1: "L1", 2: "L2"}.get(order)  # pyright: ignore[reportArgumentType] (2.0 reads as 2)
