"""torch.max / torch.min with ``dim`` and torch.aminmax as torch ops, with fake kernels,
autograd (backward and forward mode), vmap, and the public functions
``tritonml.max_with_indices``, ``min_with_indices`` and ``aminmax``:

    tritonml::max_with_indices(Tensor x, int dim, bool keepdim=False) -> (Tensor, Tensor)
    tritonml::min_with_indices(Tensor x, int dim, bool keepdim=False) -> (Tensor, Tensor)
    tritonml::aminmax(Tensor x, int[] axes, bool keepdim=False) -> (Tensor, Tensor)

Each is one pass of one reduction (tritonml/records/ready_reductions.py: ``max_with_index``,
``min_with_index``: (value, index) with torch's rule, ties to the first index and NaN winning at
the first NaN; ``aminmax``: (min, max), NaN propagating to both) on the reduce kernels, through
``reduce_with_axes``. aminmax's ``axes`` is [] for every axis, as torch's ``dim=None``; the
public function also takes several axes (torch takes one). An empty reduced dim is refused before
any launch, as torch refuses it. The reductions' launches pass their tensors in tuples, so the ops
are opaque with compiled Triton too (``define``'s ``opaque``).

Gradients are torch's: max/min with dim send the gradient to the index taken (and their jvp
gathers the tangent there); aminmax splits it evenly among the elements tied at the extreme (a
NaN result sends it to the NaNs), as torch's amax/amin and aminmax do.
"""
from __future__ import annotations

from typing import List, Sequence, Tuple, Union

import torch

from ..core import checks as _checks
from ..core.shapes import reduced_shape
from ..launchers.reduce_with import reduce_with_axes
from ..records import ready_reductions as _reductions
from .define import define, differentiable
from .family import (as_input, axes_list, batched, call, check_not_empty, comparable, kept,
                     op_axes)


# ---------------------------------------------------------------------------------------------
# Launch
# ---------------------------------------------------------------------------------------------
def _with_index(x: torch.Tensor, dim: int, keepdim: bool, largest: bool):
    _checks.check_readable("x", x)
    dim = _checks.normalize_axis(dim, x.dim(), "dim")
    check_not_empty("max_with_indices" if largest else "min_with_indices", x, (dim,))
    reduction = _reductions.max_with_index if largest else _reductions.min_with_index
    values, indices = reduce_with_axes(reduction, comparable(x), dim,
                                       keepdims=_checks.check_bool("keepdim", keepdim))
    return as_input(values, x), indices


def _aminmax(x: torch.Tensor, axes: List[int], keepdim: bool):
    _checks.check_readable("x", x)
    normalized = op_axes(axes, x.dim())
    check_not_empty("aminmax", x, normalized)
    low, high = reduce_with_axes(_reductions.aminmax, comparable(x), normalized,
                                 keepdims=_checks.check_bool("keepdim", keepdim))
    return as_input(low, x), as_input(high, x)


# ---------------------------------------------------------------------------------------------
# Ops, fake kernels, vmap
# ---------------------------------------------------------------------------------------------
@define("max_with_indices", opaque=True)
def _max_op(x: torch.Tensor, dim: int, keepdim: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    return _with_index(x, dim, keepdim, True)


@define("min_with_indices", opaque=True)
def _min_op(x: torch.Tensor, dim: int, keepdim: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    return _with_index(x, dim, keepdim, False)


@define("aminmax", opaque=True)
def _aminmax_op(x: torch.Tensor, axes: List[int],
                keepdim: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    return _aminmax(x, axes, keepdim)


def _fake_with_index(name: str):
    def fake(x, dim, keepdim=False):
        dim = _checks.normalize_axis(dim, x.dim(), "dim")
        check_not_empty(name, x, (dim,))
        shape = reduced_shape(x.shape, (dim,), keepdim)
        return x.new_empty(shape), x.new_empty(shape, dtype=torch.int64)
    return fake


def _fake_aminmax(x, axes, keepdim=False):
    axes = op_axes(axes, x.dim())
    check_not_empty("aminmax", x, axes)
    shape = reduced_shape(x.shape, axes, keepdim)
    return x.new_empty(shape), x.new_empty(shape)


_max_op.register_fake(_fake_with_index("max_with_indices"))
_min_op.register_fake(_fake_with_index("min_with_indices"))
_aminmax_op.register_fake(_fake_aminmax)


def _vmap_with_index(op):
    def rule(info, in_dims, x, dim, keepdim=False):
        if in_dims[0] is None:
            return op(x, dim, keepdim), (None, None)
        x, axes, keepdim = batched(x.movedim(in_dims[0], 0), [dim], keepdim)
        return op(x, axes[0], keepdim), (0, 0)
    return rule


@_aminmax_op.register_vmap
def _vmap_aminmax(info, in_dims, x, axes, keepdim=False):
    if in_dims[0] is None:
        return _aminmax_op(x, axes, keepdim), (None, None)
    x, axes, keepdim = batched(x.movedim(in_dims[0], 0), axes, keepdim)
    return _aminmax_op(x, axes, keepdim), (0, 0)


_max_op.register_vmap(_vmap_with_index(_max_op))
_min_op.register_vmap(_vmap_with_index(_min_op))


# ---------------------------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------------------------
def _setup_with_index(ctx, inputs, output):
    x = inputs[0]
    ctx.dim = _checks.normalize_axis(inputs[1], x.dim(), "dim")
    ctx.keepdim = inputs[2] if len(inputs) > 2 else False
    ctx.shape = x.shape
    ctx.save_for_backward(output[1])
    ctx.save_for_forward(output[1])


def _kept_indices(ctx):
    (indices,) = ctx.saved_tensors
    return indices.reshape(reduced_shape(ctx.shape, (ctx.dim,))) if ctx.shape else indices


def _backward_with_index(ctx, grad_values, grad_indices):
    """torch's value_selecting_reduction_backward: the gradient to the index taken."""
    indices = _kept_indices(ctx)
    if grad_values is None:
        return None, None, None
    if not ctx.shape:
        return grad_values, None, None
    grad = torch.zeros(ctx.shape, dtype=grad_values.dtype, device=grad_values.device)
    return grad.scatter(ctx.dim, indices, grad_values.reshape(indices.shape)), None, None


def _jvp_with_index(ctx, x_t, *_):
    indices = _kept_indices(ctx)
    if not ctx.shape:
        return x_t, None
    values_t = x_t.gather(ctx.dim, indices)
    return (values_t if ctx.keepdim else values_t.squeeze(ctx.dim)), None


def _selected(x, result, axes):
    """Where x is tied at ``result`` (kept shape), as x's dtype, and their count per result."""
    selected = ((x == result) | (x.isnan() & result.isnan())).to(x.dtype)
    return selected, selected.sum(axes, keepdim=True)


def _setup_aminmax(ctx, inputs, output):
    x = inputs[0]
    ctx.axes = op_axes(inputs[1], x.dim())
    ctx.keepdim = inputs[2] if len(inputs) > 2 else False
    ctx.scalar = x.dim() == 0
    ctx.save_for_backward(x, *output)   # the outputs themselves, reshaped where used
    ctx.save_for_forward(x, *output)


def _backward_aminmax(ctx, grad_min, grad_max):
    """Evenly over the tied elements, as torch's amin/amax (and aminmax)."""
    x, low, high = ctx.saved_tensors
    low, high = kept(low, x, ctx.axes), kept(high, x, ctx.axes)
    if ctx.scalar:
        return sum(g for g in (grad_min, grad_max) if g is not None), None, None
    grad = torch.zeros_like(x)
    for result, g in ((low, grad_min), (high, grad_max)):
        if g is not None:
            selected, count = _selected(x, result, ctx.axes)
            grad = grad + selected / count * g.reshape(result.shape)
    return grad, None, None


def _jvp_aminmax(ctx, x_t, *_):
    x, low, high = ctx.saved_tensors
    low, high = kept(low, x, ctx.axes), kept(high, x, ctx.axes)
    if ctx.scalar:
        return x_t, x_t
    tangents = []
    for result in (low, high):
        selected, count = _selected(x, result, ctx.axes)
        tangent = (selected * x_t).sum(ctx.axes, keepdim=True) / count
        tangents.append(tangent if ctx.keepdim else tangent.reshape(
            reduced_shape(x.shape, ctx.axes, False)))
    return tuple(tangents)


_MAX = differentiable(_max_op, _setup_with_index, _backward_with_index, jvp=_jvp_with_index)
_MIN = differentiable(_min_op, _setup_with_index, _backward_with_index, jvp=_jvp_with_index)
_AMINMAX = differentiable(_aminmax_op, _setup_aminmax, _backward_aminmax, jvp=_jvp_aminmax)


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------
def max_with_indices(input: torch.Tensor, dim: int,
                     keepdim: bool = False) -> torch.return_types.max:
    """torch.max(input, dim, keepdim): the largest element along ``dim`` and its index, in one
    pass.

    torch's rule: ties give the first index; any NaN makes the value NaN and the index the first
    NaN's. Runs as ``torch.ops.tritonml.max_with_indices``.

    Args:
        input: Any dtype the kernels take, bool included; any strides.
        dim: The dim to reduce; negative counts from the end.
        keepdim: Keep ``dim`` as size 1.

    Returns:
        ``(values, indices)`` as ``torch.return_types.max``, indices int64; differentiable in
        ``input`` (the gradient goes to the index taken).

    Raises:
        TypeError: input is not a tensor or of a dtype the kernels do not take, or keepdim is
            not a bool.
        ValueError: dim is out of range, or empty (as in torch).

    Example:
        >>> import torch, tritonml
        >>> x = torch.tensor([[1., 5., 2.], [4., 0., 4.]])
        >>> values, indices = tritonml.max_with_indices(x, 1)
        >>> values, indices
        (tensor([5., 4.]), tensor([1, 0]))
    """
    values, indices = call(lambda t, d, k: _with_index(t, d, k, True), _MAX, input, dim, keepdim)
    return torch.return_types.max((values, indices))


def min_with_indices(input: torch.Tensor, dim: int,
                     keepdim: bool = False) -> torch.return_types.min:
    """torch.min(input, dim, keepdim): the smallest element along ``dim`` and its index, the
    rules of ``max_with_indices``.

    Runs as ``torch.ops.tritonml.min_with_indices``.

    Args:
        input: As for ``max_with_indices``.
        dim: The dim to reduce; negative counts from the end.
        keepdim: Keep ``dim`` as size 1.

    Returns:
        ``(values, indices)`` as ``torch.return_types.min``.

    Raises:
        TypeError: As for ``max_with_indices``.
        ValueError: As for ``max_with_indices``.

    Example:
        >>> import torch, tritonml
        >>> x = torch.tensor([[1., 5., 2.], [4., 0., 4.]])
        >>> tritonml.min_with_indices(x, 1, keepdim=True).indices
        tensor([[0],
                [1]])
    """
    values, indices = call(lambda t, d, k: _with_index(t, d, k, False), _MIN, input, dim, keepdim)
    return torch.return_types.min((values, indices))


def aminmax(input: torch.Tensor, *, dim: Union[int, Sequence[int], None] = None,
            keepdim: bool = False) -> torch.return_types.aminmax:
    """torch.aminmax: ``(min, max)`` over ``dim`` in one pass.

    NaN propagates to both. Runs as ``torch.ops.tritonml.aminmax``.

    Args:
        input: Any dtype the kernels take, any strides.
        dim: None (every dim), an int, or (beyond torch) a sequence of ints.
        keepdim: Keep the reduced dims as size 1.

    Returns:
        ``(min, max)`` as ``torch.return_types.aminmax``; differentiable in ``input`` (ties
        share the gradient evenly).

    Raises:
        TypeError: As for ``max_with_indices``.
        ValueError: A dim out of range, or an empty reduced dim (as in torch).

    Example:
        >>> import torch, tritonml
        >>> x = torch.tensor([[1., 5., 2.], [4., 0., 4.]])
        >>> low, high = tritonml.aminmax(x)
        >>> low, high
        (tensor(0.), tensor(5.))
        >>> tritonml.aminmax(x, dim=0).max
        tensor([4., 5., 4.])
    """
    axes = axes_list(dim, input.dim()) if isinstance(input, torch.Tensor) else dim
    low, high = call(_aminmax, _AMINMAX, input, axes, keepdim)
    return torch.return_types.aminmax((low, high))


__all__ = ["max_with_indices", "min_with_indices", "aminmax"]
