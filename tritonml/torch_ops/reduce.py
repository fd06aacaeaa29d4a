"""DirectML's reduce operator as torch ops, with a fake kernel, autograd and vmap rules, and the
public function ``tritonml.reduce`` that calls them:

    tritonml::reduce(Tensor x, str function, int[] axes, bool keepdims, ScalarType index_dtype) -> Tensor
    tritonml::reduce_out(Tensor x, str function, int[] axes, bool keepdims, ScalarType index_dtype,
                         Tensor(a!) out) -> ()

``function`` is a reduce function's name (a ``ReduceFunction`` member's, or that of a function
added by a record of its own: ``record_of``); ``axes`` are normalized (sorted, non-negative) by the
public function, and an empty list means every axis. Gradients and forward-mode tangents: each
function's record (``derivative``, applied over the axes by ``ReduceRecord.derivatives``;
tritonml/records/builtin_reductions.py), docs/torch.md.
"""
import enum
from typing import List, Optional, Sequence, Union

import torch

from ..core import checks as _checks
from ..records.reduce_function import ReduceFunction
from ..core.shapes import reduced_shape
from ..launchers.reduce import check_index_dtype, reduce_axes
from ..records.builtin_reductions import record_of
from . import jagged as _jagged
from .define import batch_first, define, differentiable, direct_call_allowed, mutated


def _record(function: str):
    return record_of(function)


def _axes(axes: List[int], rank: int) -> tuple:
    return _checks.normalize_axes(list(axes) or None, rank)


@define("reduce")
def reduce_op(x: torch.Tensor, function: str, axes: List[int], keepdims: bool,
              index_dtype: torch.dtype) -> torch.Tensor:
    return reduce_axes(x, list(axes) or None, _record(function), keepdims=keepdims,
                       index_dtype=index_dtype)


@define("reduce_out", mutates_args=("out",))
def reduce_out(x: torch.Tensor, function: str, axes: List[int], keepdims: bool,
               index_dtype: torch.dtype, out: torch.Tensor) -> None:
    reduce_axes(x, list(axes) or None, _record(function), keepdims=keepdims,
                index_dtype=index_dtype, out=out)


@reduce_op.register_fake
def _fake(x, function, axes, keepdims, index_dtype):
    combine = _record(function)
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
    ctx.save_for_forward(x, output)


def _backward(ctx, grad):
    """The function's gradient, from its record's derivative rule (``ReduceRecord.derivatives``,
    in the convention of ``tritonml.Reduction.backward``: the output and its gradient with the
    reduced axes kept)."""
    x, result = ctx.saved_tensors
    backward, _ = _record(ctx.function).derivatives(reduce_kept)
    if backward is None:
        raise RuntimeError(f"reduce: {ctx.function} is not differentiable (its output is an "
                           "index)")
    keep = ctx.keep_shape                    # kept rank, so they broadcast against x
    axes = ctx.axes if x.dim() else ()       # a 0-d x: no axis to name, one element
    (grad_x,) = backward((x,), (result.reshape(keep),), (grad.reshape(keep),), axes)
    return grad_x, None, None, None, None


def _jvp(ctx, x_tangent, *_):
    """The function's tangent, from its record's derivative rule (``ReduceRecord.derivatives``,
    in the convention of ``tritonml.Reduction.jvp``); an index has none (its output is an integer
    tensor, whose tangent torch.func reports as zeros, as for torch.argmax)."""
    x, result = ctx.saved_tensors
    _, jvp = _record(ctx.function).derivatives(reduce_kept)
    if jvp is None:
        return None
    axes = ctx.axes if x.dim() else ()
    (tangent,) = jvp((x,), (result.reshape(ctx.keep_shape),), (x_tangent,), axes)
    return tangent.reshape(result.shape)


def reduce_kept(t: torch.Tensor, function: str, axes) -> torch.Tensor:
    """``function`` over ``axes`` (() for a 0-d ``t``) with the rank kept, on tritonml's kernels
    and differentiable: the ``reduce`` a record's derivative rule is given, so a derivative has a
    derivative (double backward, jacfwd of jacrev)."""
    return differentiable_reduce(t, function, list(axes), True, torch.int64)


differentiable_reduce = differentiable(reduce_op, _setup_context, _backward, _jvp)


# ---------------------------------------------------------------------------------------------
# Public function
# ---------------------------------------------------------------------------------------------
def reduce(x: torch.Tensor, function: Union[ReduceFunction, str, enum.Enum],
           axes: Union[int, Sequence[int], None] = None, *, keepdims: bool = True,
           index_dtype: torch.dtype = torch.int64,
           out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Reduce ``axes`` of ``x`` with ``function`` (DML_REDUCE_OPERATOR_DESC).

    Runs as ``torch.ops.tritonml.reduce`` (``reduce_out`` with out=). See docs/reduce.md for
    types, empty axes and NaN rules, docs/torch.md for gradients.

    Args:
        x: The tensor to reduce (rank 0 to 8, any strides, every numeric dtype).
        function: A ``ReduceFunction`` or its name in any case (``"sum"``, ``"LOG_SUM_EXP"``),
            read by ``ReduceFunction.parse``.
        axes: An int, a sequence of distinct ints (negative count from the end), or None for
            all axes.
        keepdims: True keeps the rank with reduced axes of size 1 (DirectML's output); False
            drops them.
        index_dtype: ARGMAX/ARGMIN output dtype: torch.int32, int64, uint32 or uint64. The index
            is row-major over the reduced axes only; ties give the first occurrence, NaN the
            first NaN.
        out: A tensor of the result's shape, dtype (x's, or index_dtype) and device to write
            into.

    Returns:
        The result (``out`` when given), differentiable in x (without ``out``; ARGMAX/ARGMIN
        excepted).

    Raises:
        TypeError: x or out is not a tensor, function is neither a ReduceFunction nor a name,
            keepdims is not a bool, index_dtype is not one listed above, x's dtype is one the
            function does not take (L2 of integers, docs/reduce.md), or out's dtype is not the
            result's.
        ValueError: an unknown function name, an axis out of range or repeated, or an out of
            the wrong shape or device.
        RuntimeError: out= with an x that requires grad.

    Example:
        >>> import torch, tritonml
        >>> x = torch.tensor([[1., 2., 3.], [4., 5., 6.]])
        >>> tritonml.reduce(x, "sum", axes=1)
        tensor([[ 6.],
                [15.]])
        >>> tritonml.reduce(x, tritonml.ReduceFunction.MAX, axes=0, keepdims=False)
        tensor([4., 5., 6.])
        >>> tritonml.reduce(x, "argmax", axes=(0, 1), keepdims=False)
        tensor(5)
    """
    if isinstance(x, torch.Tensor) and x.is_nested:  # jagged layout: torch_ops/jagged.py
        return _jagged.reduce(reduce, x, function, axes, keepdims, index_dtype, out)
    if direct_call_allowed(x, out):
        # Plain eager code: the launcher the op would call, without the op's layers.
        combine = record_of(function)
        result: torch.Tensor = reduce_axes(  # pyright: ignore[reportAssignmentType] (one output)
            x, axes, combine, keepdims=keepdims, index_dtype=index_dtype, out=out)
        if out is not None:
            mutated(out)
        return result
    if not torch.compiler.is_compiling():
        _checks.check_readable("x", x)  # before the dispatcher, which has no sparse kernel
    name = record_of(function).name
    keepdims = _checks.check_bool("keepdims", keepdims)
    check_index_dtype(index_dtype)
    axes = list(_checks.normalize_axes(axes, x.dim()))
    if out is None:
        return differentiable_reduce(x, name, axes, keepdims, index_dtype)
    if not torch.compiler.is_compiling():
        _checks.check_readable("out", out)
    _checks.check_out_grad(out, x)
    reduce_out(x, name, axes, keepdims, index_dtype, out)
    return out
