"""The cumulative operators as torch ops, with fake kernels, autograd and vmap rules, and the
public functions ``tritonml.cumulative_sum`` / ``tritonml.cumulative_product`` that call them.

Each operator is three ops (shown for the sum; the product's are named alike):

    tritonml::cumulative_sum(Tensor x, int axis, bool reverse=False, bool exclusive=False) -> Tensor
    tritonml::cumulative_sum_out(Tensor x, int axis, bool reverse, bool exclusive, Tensor(a!) out) -> ()
    tritonml::cumulative_sum_(Tensor(a!) x, int axis, bool reverse=False, bool exclusive=False) -> ()

Only the functional op is differentiable, as in torch: the out= and in-place forms refuse inputs
that require grad. Backward passes are scans on tritonml's own kernels (docs/torch.md).
"""
from typing import Optional

import torch

from .. import _checks
from ..ops.scan import PRODUCT, SUM, ScanCombine, cumulative_scan
from ._define import batch_first, define, differentiable, direct_call_allowed, mutated


def _batched_axis(axis: int, logical_rank: int) -> int:
    """``axis`` of a logical tensor of ``logical_rank`` >= 1, once a batch dim is in front."""
    return _checks.normalize_axis(axis, logical_rank) + 1


class _ScanOps:
    """The functional, out= and in-place ops of one cumulative operator, and its public function."""

    def __init__(self, name: str, combine: ScanCombine):
        @define(name)
        def functional(x: torch.Tensor, axis: int, reverse: bool = False,
                       exclusive: bool = False) -> torch.Tensor:
            return cumulative_scan(x, axis, combine, reverse=reverse, exclusive=exclusive)

        @define(f"{name}_out", mutates_args=("out",))
        def out_variant(x: torch.Tensor, axis: int, reverse: bool, exclusive: bool,
                        out: torch.Tensor) -> None:
            cumulative_scan(x, axis, combine, reverse=reverse, exclusive=exclusive, out=out)

        @define(f"{name}_", mutates_args=("x",))
        def in_place(x: torch.Tensor, axis: int, reverse: bool = False,
                     exclusive: bool = False) -> None:
            cumulative_scan(x, axis, combine, reverse=reverse, exclusive=exclusive, out=x)

        self.functional, self.out, self.in_place = functional, out_variant, in_place
        self.combine = combine
        functional.register_fake(_fake)
        out_variant.register_fake(_fake_mutation)
        in_place.register_fake(_fake_mutation)
        functional.register_vmap(self._vmap_functional)
        out_variant.register_vmap(self._vmap_out)
        in_place.register_vmap(self._vmap_in_place)

    def __call__(self, x, axis, reverse, exclusive, out: Optional[torch.Tensor]):
        """The public function: normalize what the schema types, then call one op (or, in plain
        eager code, the launcher the op would call: ``_define.direct_call_allowed``)."""
        if direct_call_allowed(x, out):
            result = cumulative_scan(x, axis, self.combine, reverse=reverse, exclusive=exclusive,
                                     out=out)
            if out is not None:
                mutated(out)
            return result
        if not torch.compiler.is_compiling():
            _checks.check_readable("x", x)  # before the dispatcher, which has no sparse kernel
        axis = _checks.normalize_axis(axis, x.dim())
        reverse = _checks.check_bool("reverse", reverse)
        exclusive = _checks.check_bool("exclusive", exclusive)
        if out is None:
            return self.differentiable(x, axis, reverse, exclusive)
        if not torch.compiler.is_compiling():
            _checks.check_readable("out", out)
        _checks.check_out_grad(out, x)
        if out is x:
            self.in_place(x, axis, reverse, exclusive)
        else:
            self.out(x, axis, reverse, exclusive, out)
        return out

    # --- vmap: the batch dim goes first and the axis moves past it; a batch of 0-d tensors
    # (each acting as shape [1]) becomes a batch of length-1 rows ---
    def _vmap_functional(self, info, in_dims, x, axis, reverse=False, exclusive=False):
        if in_dims[0] is None:
            return self.functional(x, axis, reverse, exclusive), None
        x = x.movedim(in_dims[0], 0)
        if x.dim() == 1:
            return self.functional(x.unsqueeze(1), 1, reverse, exclusive).squeeze(1), 0
        return self.functional(x, _batched_axis(axis, x.dim() - 1), reverse, exclusive), 0

    def _vmap_out(self, info, in_dims, x, axis, reverse, exclusive, out):
        batched = batch_first(x, in_dims[0], out, in_dims[4])
        if batched is None:
            self.out(x, axis, reverse, exclusive, out)
            return None, None
        x, out = batched
        if x.dim() == 1:
            x, out, axis = x.unsqueeze(1), out.unsqueeze(1), 1
        else:
            axis = _batched_axis(axis, x.dim() - 1)
        self.out(x, axis, reverse, exclusive, out)
        return None, None

    def _vmap_in_place(self, info, in_dims, x, axis, reverse=False, exclusive=False):
        if in_dims[0] is None:
            self.in_place(x, axis, reverse, exclusive)
            return None, None
        x = x.movedim(in_dims[0], 0)
        if x.dim() == 1:
            x, axis = x.unsqueeze(1), 1
        else:
            axis = _batched_axis(axis, x.dim() - 1)
        self.in_place(x, axis, reverse, exclusive)
        return None, None


def _fake(x, axis, reverse=False, exclusive=False):
    _checks.normalize_axis(axis, x.dim())
    return torch.empty_like(x)


def _fake_mutation(x, axis, reverse=False, exclusive=False, out=None):
    _checks.normalize_axis(axis, x.dim())


SUM_OPS = _ScanOps("cumulative_sum", SUM)
PRODUCT_OPS = _ScanOps("cumulative_product", PRODUCT)


# ---------------------------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------------------------
def _setup_context(ctx, inputs, output):
    x, axis, reverse, exclusive = inputs
    ctx.axis, ctx.reverse, ctx.exclusive = axis, reverse, exclusive
    ctx.save_for_backward(x, output)


def _sum_backward(ctx, grad):
    # Each output is a sum of the inputs before it in traversal order, so each input receives
    # the sum of the gradients after it: the same scan in the other direction.
    return (SUM_OPS.differentiable(grad, ctx.axis, not ctx.reverse, ctx.exclusive),
            None, None, None)


def _shift_later(grad, axis: int, reverse: bool):
    """grad[i] <- grad[i + 1] in traversal order, the last position 0."""
    n = grad.shape[axis]
    if n == 0:
        return grad
    zero = torch.zeros_like(grad.narrow(axis, 0, 1))
    if reverse:
        return torch.cat([zero, grad.narrow(axis, 0, n - 1)], axis)
    return torch.cat([grad.narrow(axis, 1, n - 1), zero], axis)


def _product_backward(ctx, grad):
    """d y_i / d x_j = prod_{k <= i, k != j} x_k (traversal order), correct with zeros.

    An exclusive product is the inclusive one shifted a step, so its gradient is the inclusive
    gradient of the shifted ``grad``. Before the first zero of a scan, the gradient is
    sum_{i >= j} grad_i y_i / x_j; at the first zero, sum_{i >= j} grad_i y'_i with y' the
    product that skips that zero; after it, 0 (every product holds the zero).
    """
    x, output = ctx.saved_tensors
    axis, reverse = ctx.axis, ctx.reverse
    if ctx.exclusive:
        grad = _shift_later(grad, axis, reverse)
        inclusive = PRODUCT_OPS.differentiable(x, axis, reverse, False)
    else:
        inclusive = output
    is_zero = x == 0
    zeros_before = SUM_OPS.differentiable(is_zero.to(torch.int32), axis, reverse, True)
    before_zero = (zeros_before == 0) & ~is_zero
    first_zero = (zeros_before == 0) & is_zero
    later_sums = SUM_OPS.differentiable(grad * inclusive, axis, not reverse, False)
    skipping_zero = PRODUCT_OPS.differentiable(torch.where(first_zero, torch.ones_like(x), x), axis,
                                           reverse, False)
    at_zero = SUM_OPS.differentiable(grad * skipping_zero, axis, not reverse, False)
    safe_x = torch.where(before_zero, x, torch.ones_like(x))
    grad_x = torch.where(before_zero, later_sums / safe_x,
                         torch.where(first_zero, at_zero, torch.zeros_like(x)))
    return grad_x, None, None, None


SUM_OPS.differentiable = differentiable(SUM_OPS.functional, _setup_context, _sum_backward)
PRODUCT_OPS.differentiable = differentiable(PRODUCT_OPS.functional, _setup_context,
                                            _product_backward)


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------
def cumulative_sum(x: torch.Tensor, axis: int, *, reverse: bool = False, exclusive: bool = False,
                   out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Running sum of ``x`` along ``axis`` (DML_CUMULATIVE_SUMMATION_OPERATOR_DESC).

    reverse: DML_AXIS_DIRECTION_DECREASING (sum from the end of the axis).
    exclusive: HasExclusiveSum (each output excludes its own element; the first written is 0).
    out: a tensor of x's shape, dtype and device to write into; may be ``x`` itself (in place).
    Returns a tensor of x's shape and dtype, differentiable in x (without ``out``). Runs as
    ``torch.ops.tritonml.cumulative_sum`` (``_out`` / ``_`` for out= / in place). See
    docs/semantics.md for dtypes and edge cases, docs/torch.md for autograd and torch.compile.
    """
    return SUM_OPS(x, axis, reverse, exclusive, out)


def cumulative_product(x: torch.Tensor, axis: int, *, reverse: bool = False,
                       exclusive: bool = False, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Running product of ``x`` along ``axis`` (DML_CUMULATIVE_PRODUCT_OPERATOR_DESC).

    reverse: DML_AXIS_DIRECTION_DECREASING. exclusive: HasExclusiveProduct (the first written is
    1). out: as for ``cumulative_sum``. The gradient is exact with zeros in x, as torch's cumprod's.
    """
    return PRODUCT_OPS(x, axis, reverse, exclusive, out)
