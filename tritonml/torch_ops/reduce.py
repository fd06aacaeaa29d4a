"""DirectML's reduce operator as torch ops, with a fake kernel, autograd and vmap rules, and the
public function ``tritonml.reduce`` that calls them:

    tritonml::reduce(Tensor x, str function, int[] axes, bool keepdims, ScalarType index_dtype) -> Tensor
    tritonml::reduce_out(Tensor x, str function, int[] axes, bool keepdims, ScalarType index_dtype,
                         Tensor(a!) out) -> ()

``function`` is a ``ReduceFunction`` name; ``axes`` are normalized (sorted, non-negative) by the
public function, and an empty list means every axis. Gradients: docs/torch.md.
"""
import math
from typing import List, Optional

import torch

from ..core import checks as _checks
from ..core.reduce_function import ReduceFunction
from ..core.shapes import reduced_shape
from ..launchers.reduce import COMBINES, check_index_dtype, reduce_axes
from .define import batch_first, define, differentiable, direct_call_allowed, mutated


def _combine(function: str):
    return COMBINES[ReduceFunction[function]]


def _axes(axes: List[int], rank: int) -> tuple:
    return _checks.normalize_axes(list(axes) or None, rank)


@define("reduce")
def reduce_op(x: torch.Tensor, function: str, axes: List[int], keepdims: bool,
              index_dtype: torch.dtype) -> torch.Tensor:
    return reduce_axes(x, list(axes) or None, _combine(function), keepdims=keepdims,
                       index_dtype=index_dtype)


@define("reduce_out", mutates_args=("out",))
def reduce_out(x: torch.Tensor, function: str, axes: List[int], keepdims: bool,
               index_dtype: torch.dtype, out: torch.Tensor) -> None:
    reduce_axes(x, list(axes) or None, _combine(function), keepdims=keepdims,
                index_dtype=index_dtype, out=out)


@reduce_op.register_fake
def _fake(x, function, axes, keepdims, index_dtype):
    combine = _combine(function)
    shape = reduced_shape(x.shape, _axes(axes, x.dim()), keepdims)
    return x.new_empty(shape, dtype=index_dtype if combine.returns_index else x.dtype)


@reduce_out.register_fake
def _fake_out(x, function, axes, keepdims, index_dtype, out):
    _axes(axes, x.dim())


# ---------------------------------------------------------------------------------------------
# vmap: the batch dim goes first and the axes move past it
# ---------------------------------------------------------------------------------------------
def _batched(x, axes, keepdims):
    """(x with a leading batch dim, axes past it, keepdims) for a batched call. A batch of 0-d
    tensors (each acting as shape [1], giving a 0-d result) becomes a batch of length-1 rows."""
    if x.dim() == 1:
        return x.unsqueeze(1), [1], False
    rank = x.dim() - 1
    return x, [a + 1 for a in _axes(axes, rank)], keepdims


@reduce_op.register_vmap
def _vmap(info, in_dims, x, function, axes, keepdims, index_dtype):
    if in_dims[0] is None:
        return reduce_op(x, function, axes, keepdims, index_dtype), None
    x, axes, keepdims = _batched(x.movedim(in_dims[0], 0), axes, keepdims)
    return reduce_op(x, function, axes, keepdims, index_dtype), 0


@reduce_out.register_vmap
def _vmap_out(info, in_dims, x, function, axes, keepdims, index_dtype, out):
    batched = batch_first(x, in_dims[0], out, in_dims[5])
    if batched is None:
        reduce_out(x, function, axes, keepdims, index_dtype, out)
        return None, None
    x, out = batched
    x, axes, keepdims = _batched(x, axes, keepdims)
    reduce_out(x, function, axes, keepdims, index_dtype, out)
    return None, None


# ---------------------------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------------------------
def _setup_context(ctx, inputs, output):
    x, function, axes, keepdims, _ = inputs
    ctx.function, ctx.axes = function, _axes(axes, x.dim())
    ctx.keep_shape = reduced_shape(x.shape, ctx.axes)
    ctx.save_for_backward(x, output)


def _sum(t, axes):
    """SUM over ``axes`` with the rank kept, on tritonml's kernels (differentiable)."""
    return _differentiable_reduce(t, "SUM", list(axes), True, torch.int64)


def _backward(ctx, grad):
    x, result = ctx.saved_tensors
    function, axes = ctx.function, ctx.axes
    if function in ("ARGMAX", "ARGMIN"):
        raise RuntimeError(f"reduce: {function} is not differentiable (its output is an index)")
    grad = grad.reshape(ctx.keep_shape)      # kept rank, so it broadcasts against x
    y = result.reshape(ctx.keep_shape)
    zero = torch.zeros_like(x)
    if function == "SUM":
        grad_x = grad.expand(x.shape)
    elif function == "AVERAGE":
        # A 0-d x acts as shape [1] (its axes are (0,), past x.shape): one element.
        count = math.prod(x.shape[a] for a in axes) if x.dim() else 1
        grad_x = (grad / count).expand(x.shape)
    elif function == "SUM_SQUARE":
        grad_x = 2 * x * grad
    elif function == "L1":
        grad_x = torch.sign(x) * grad
    elif function == "L2":
        # x / ||x||, and 0 where the norm is 0 (the subgradient torch's norm uses).
        grad_x = torch.where(y == 0, zero, x / torch.where(y == 0, torch.ones_like(y), y)) * grad
    elif function == "LOG_SUM":
        grad_x = (grad / _sum(x, axes)).expand(x.shape)
    elif function == "LOG_SUM_EXP":
        grad_x = _softmax(x, y, axes) * grad
    elif function in ("MAX", "MIN"):
        # Evenly over ties, as torch's amax/amin; a NaN result sends it to the NaNs.
        selected = ((x == y) | (x.isnan() & y.isnan())).to(x.dtype)
        grad_x = selected / _sum(selected, axes) * grad
    elif function == "MULTIPLY":
        grad_x = _product_gradient(x, y, axes) * grad
    else:  # pragma: no cover - every function is listed above
        raise AssertionError(function)
    return grad_x, None, None, None, None


def _softmax(x, y, axes):
    """exp(x - logsumexp): finite results as usual; -inf (every element -inf) gives 0; +inf
    splits evenly over the +inf elements."""
    finite = torch.isfinite(y)
    shifted = torch.exp(x - torch.where(finite, y, torch.zeros_like(y)))
    at_inf = ((x == y) & (y == float("inf"))).to(x.dtype)
    return torch.where(finite, shifted, at_inf / torch.clamp(_sum(at_inf, axes), min=1))


def _product_gradient(x, y, axes):
    """prod of the other elements: y / x without zeros; with one zero, the product of the rest at
    the zero and 0 elsewhere; with two or more, 0 everywhere."""
    is_zero = x == 0
    ones = torch.ones_like(x)
    zeros = _sum(is_zero.to(x.dtype), axes)
    others = _differentiable_reduce(torch.where(is_zero, ones, x), "MULTIPLY", list(axes), True,
                                    torch.int64)
    no_zero = torch.where(zeros == 0, y, torch.zeros_like(y)) / torch.where(is_zero, ones, x)
    return torch.where(is_zero, torch.where(zeros == 1, others, torch.zeros_like(others)), no_zero)


_differentiable_reduce = differentiable(reduce_op, _setup_context, _backward)


# ---------------------------------------------------------------------------------------------
# Public function
# ---------------------------------------------------------------------------------------------
def reduce(x: torch.Tensor, function, axes=None, *, keepdims: bool = True,
           index_dtype: torch.dtype = torch.int64, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Reduce ``axes`` of ``x`` with ``function`` (DML_REDUCE_OPERATOR_DESC).

    function: a ``ReduceFunction`` or its name in any case ("sum", "LOG_SUM_EXP").
    axes: an int, a sequence of distinct ints (negative count from the end), or None for all axes.
    keepdims: True keeps the rank with reduced axes of size 1 (DirectML's output); False drops them.
    index_dtype: ARGMAX/ARGMIN output dtype: torch.int32, int64, uint32 or uint64. The index is
        row-major over the reduced axes only; ties give the first occurrence, NaN the first NaN.
    out: a tensor of the result's shape, dtype (x's, or index_dtype) and device to write into.
    Returns the result, differentiable in x (without ``out``; ARGMAX/ARGMIN excepted). Runs as
    ``torch.ops.tritonml.reduce`` (``reduce_out`` with out=). See docs/reduce.md for types, empty
    axes and NaN rules, docs/torch.md for gradients.
    """
    if direct_call_allowed(x, out):
        # Plain eager code: the launcher the op would call, without the op's layers.
        combine = COMBINES[ReduceFunction.parse(function, "function")]
        result = reduce_axes(x, axes, combine, keepdims=keepdims, index_dtype=index_dtype, out=out)
        if out is not None:
            mutated(out)
        return result
    if not torch.compiler.is_compiling():
        _checks.check_readable("x", x)  # before the dispatcher, which has no sparse kernel
    name = ReduceFunction.parse(function, "function").name
    keepdims = _checks.check_bool("keepdims", keepdims)
    check_index_dtype(index_dtype)
    axes = list(_checks.normalize_axes(axes, x.dim()))
    if out is None:
        return _differentiable_reduce(x, name, axes, keepdims, index_dtype)
    if not torch.compiler.is_compiling():
        _checks.check_readable("out", out)
    _checks.check_out_grad(out, x)
    reduce_out(x, name, axes, keepdims, index_dtype, out)
    return out
