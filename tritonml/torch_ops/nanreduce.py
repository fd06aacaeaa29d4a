"""torch.nansum and torch.nanmean as torch ops, with fake kernels, autograd (backward and forward
mode), vmap, and the public functions ``tritonml.nansum`` and ``tritonml.nanmean``:

    tritonml::nansum(Tensor x, int[] axes, bool keepdim=False) -> Tensor
    tritonml::nanmean(Tensor x, int[] axes, bool keepdim=False) -> Tensor

One pass each (tritonml/records/ready_reductions.py: ``nansum``, NaN read as 0; ``nanmean``, the state (sum,
count) of the non-NaN elements). Sums accumulate as tritonml's SUM does (half types in float32,
float32 in float64, integers in 64 bits, wrapping); integer and bool inputs sum to int64, as
torch promotes them; nanmean takes floating-point inputs only, as torch. ``axes`` [] means every
axis. ``dtype=`` (the public functions) converts the input first, as torch does. The
reductions' launches pass their tensors in tuples, so the ops are opaque with compiled Triton too
(``define``'s ``opaque``).

Gradients are torch's: the gradient (divided by the count of non-NaN elements, for nanmean) at
every non-NaN element and 0 at the NaNs; the jvps apply the same to the tangent.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Union

import torch

from ..core import checks as _checks
from ..core.dtypes import FLOAT_DTYPES, dtype_name
from ..core.shapes import reduced_shape
from ..launchers.reduce_with import reduce_with_axes
from ..records import ready_reductions as _reductions
from .define import define, differentiable
from .family import axes_list, batched, call, comparable, kept, op_axes


def _check_mean_dtype(x: torch.Tensor) -> None:
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"x: nanmean is defined for floating-point x (float16, bfloat16, float32, "
                        f"float64), as torch.nanmean is, but x has dtype {dtype_name(x.dtype)}; "
                        "convert x to a floating-point dtype first")


def _nan_reduce(x: torch.Tensor, axes, keepdim: bool, mean: bool) -> torch.Tensor:
    _checks.check_readable("x", x)
    if mean:
        _check_mean_dtype(x)
    reduction = _reductions.nanmean if mean else _reductions.nansum
    (result,) = reduce_with_axes(reduction, comparable(x), op_axes(axes, x.dim()),
                                 keepdims=_checks.check_bool("keepdim", keepdim))
    return result


@define("nansum", opaque=True)
def _nansum_op(x: torch.Tensor, axes: List[int], keepdim: bool = False) -> torch.Tensor:
    return _nan_reduce(x, axes, keepdim, False)


@define("nanmean", opaque=True)
def _nanmean_op(x: torch.Tensor, axes: List[int], keepdim: bool = False) -> torch.Tensor:
    return _nan_reduce(x, axes, keepdim, True)


def _fake_of(mean: bool):
    def fake(x, axes, keepdim=False):
        shape = reduced_shape(x.shape, op_axes(axes, x.dim()), keepdim)
        if mean or x.dtype in FLOAT_DTYPES:
            return x.new_empty(shape)
        return x.new_empty(shape, dtype=torch.int64)
    return fake


def _vmap_of(op):
    def rule(info, in_dims, x, axes, keepdim=False):
        if in_dims[0] is None:
            return op(x, axes, keepdim), None
        x, axes, keepdim = batched(x.movedim(in_dims[0], 0), axes, keepdim)
        return op(x, axes, keepdim), 0
    return rule


for _op, _mean in ((_nansum_op, False), (_nanmean_op, True)):
    _op.register_fake(_fake_of(_mean))
    _op.register_vmap(_vmap_of(_op))


def _setup(ctx, inputs, output):
    x = inputs[0]
    ctx.axes = op_axes(inputs[1], x.dim())
    ctx.keepdim = inputs[2] if len(inputs) > 2 else False
    ctx.save_for_backward(x)
    ctx.save_for_forward(x)


def _weights(ctx, x, mean: bool):
    """What each element's gradient is scaled by: 0 at NaN, else 1 (nansum) or 1 / the count of
    non-NaN elements in its result (nanmean; NaN throughout a result with none, 0 / 0, as
    torch's nansum / count gives)."""
    present = (~x.isnan()).to(x.dtype)
    if not mean:
        return present
    return present / present.sum(ctx.axes, keepdim=True)


def _backward_of(mean: bool):
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return _weights(ctx, x, mean) * kept(grad, x, ctx.axes), None, None
    return backward


def _jvp_of(mean: bool):
    def jvp(ctx, x_t, *_):
        (x,) = ctx.saved_tensors
        weighted = x_t.masked_fill(x.isnan(), 0) * _weights(ctx, x, mean)
        return weighted.sum(ctx.axes, keepdim=ctx.keepdim) if x.dim() else weighted
    return jvp


_NANSUM = differentiable(_nansum_op, _setup, _backward_of(False), jvp=_jvp_of(False))
_NANMEAN = differentiable(_nanmean_op, _setup, _backward_of(True), jvp=_jvp_of(True))


def _public(launch_mean: bool, op, input, dim, keepdim, dtype):
    if launch_mean and isinstance(input, torch.Tensor):
        _check_mean_dtype(input)     # as torch, before dtype= converts it
    if dtype is not None:
        input = input.to(dtype)   # as torch: the input converted first
    axes = axes_list(dim, input.dim()) if isinstance(input, torch.Tensor) else dim
    result = call(lambda t, a, k: _nan_reduce(t, a, k, launch_mean), op, input, axes, keepdim)
    # an integer dtype= is the result's too (the int64 sum wraps into it, as torch's)
    return result if dtype is None or result.dtype == dtype else result.to(dtype)


def nansum(input: torch.Tensor, dim: Union[int, Sequence[int], None] = None,
           keepdim: bool = False, *, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """torch.nansum: the sum over ``dim`` with NaN counted as 0.

    One pass. Runs as ``torch.ops.tritonml.nansum``.

    Args:
        input: A tensor of any dtype the kernels take.
        dim: None or an empty sequence: every dim; an int or a sequence of ints.
        keepdim: Keep the reduced dims as size 1.
        dtype: Convert the input to it first (an integer dtype is the result's too).

    Returns:
        The sum. Floats keep their dtype; integers and bool give int64 (wrapping), as torch.
        Differentiable (forward and reverse mode; 0 at the NaNs).

    Raises:
        TypeError: input is not a tensor, or keepdim is not a bool.
        ValueError: A dim out of range or repeated.

    Example:
        >>> import torch, tritonml
        >>> tritonml.nansum(torch.tensor([1., float("nan"), 2.]))
        tensor(3.)
        >>> tritonml.nansum(torch.tensor([[1, 2], [3, 4]], dtype=torch.int32), dim=1)
        tensor([3, 7])
    """
    return _public(False, _NANSUM, input, dim, keepdim, dtype)


def nanmean(input: torch.Tensor, dim: Union[int, Sequence[int], None] = None,
            keepdim: bool = False, *, dtype: Optional[torch.dtype] = None) -> torch.Tensor:
    """torch.nanmean: the mean of the non-NaN elements over ``dim`` (NaN where there is none).

    One pass ((sum, count) together). Runs as ``torch.ops.tritonml.nanmean``.

    Args:
        input: A floating-point tensor, as torch.
        dim: None or an empty sequence: every dim; an int or a sequence of ints.
        keepdim: Keep the reduced dims as size 1.
        dtype: Convert the input to it first.

    Returns:
        The mean, of input's dtype (or ``dtype``); differentiable.

    Raises:
        TypeError: input is not a floating-point tensor, or keepdim is not a bool.
        ValueError: A dim out of range or repeated.

    Example:
        >>> import torch, tritonml
        >>> nan = float("nan")
        >>> tritonml.nanmean(torch.tensor([[1., nan, 2.], [nan, nan, nan]]), dim=1)
        tensor([1.5000,    nan])
    """
    return _public(True, _NANMEAN, input, dim, keepdim, dtype)


__all__ = ["nansum", "nanmean"]
