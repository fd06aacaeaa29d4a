"""``tritonml.reduce_with``: a user-defined reduction (``tritonml.Reduction``) over axes.

A plain function, not a torch op: the reduction is a Python object (its ``@triton.jit``
functions and dtype rules) that no op schema can carry. Autograd comes from the reduction's own
``backward`` (a torch function), run by an ``autograd.Function``; a reduction without one refuses
inputs that require grad rather than returning detached outputs. No vmap; under torch.compile it
runs eagerly (``torch.compiler.disable``: a graph break). DTensors reduce locally when no reduced
dim is sharded (``torch_ops/dtensor.py``).
"""
from __future__ import annotations

from typing import Optional

import torch

from tritonml_autotune.configs import ReduceConfig

from ..core import checks as _checks
from ..core.shapes import reduced_shape
from ..launchers.reduce_with import Reduction, reduce_with_axes
from . import dtensor as _dtensor


def _recording(xs) -> list:
    """The indices of the inputs autograd would record a gradient for."""
    if not torch.is_grad_enabled():
        return []
    return [i for i, t in enumerate(xs) if isinstance(t, torch.Tensor) and t.requires_grad]


class ReduceWith(torch.autograd.Function):
    """Forward: the launcher. Backward: the reduction's ``backward``, called with the outputs
    reshaped to keep the reduced axes (so they broadcast against the inputs)."""

    @staticmethod
    def forward(reduction, axes, keepdims, config, *xs):
        return reduce_with_axes(reduction, xs, axes, keepdims=keepdims, config=config)

    @staticmethod
    def setup_context(ctx, inputs, output):
        reduction, axes, _, _, *xs = inputs
        x = xs[0]
        # A 0-d input has no axis to name: its one element is reduced, and () says so.
        ctx.axes = _checks.normalize_axes(axes, x.dim()) if x.dim() else ()
        ctx.reduction = reduction
        ctx.kept_shape = reduced_shape(x.shape, ctx.axes)
        ctx.inputs = len(xs)
        # None, not zeros, for an output nothing depends on: a zero gradient is not the same as
        # none where the formula has an infinite factor (Welford's var of one element, unbiased).
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*xs, *output)

    @staticmethod
    def backward(ctx, *grad_outputs):
        if all(g is None for g in grad_outputs):   # nothing flows back: no call to make
            return (None,) * (4 + ctx.inputs)
        saved = ctx.saved_tensors
        xs, outputs = saved[:ctx.inputs], saved[ctx.inputs:]
        kept = ctx.kept_shape
        outputs = tuple(o.reshape(kept) for o in outputs)
        grad_outputs = tuple(None if g is None else g.reshape(kept) for g in grad_outputs)
        reduction = ctx.reduction
        grads = reduction.backward(xs, outputs, grad_outputs, ctx.axes)
        if not isinstance(grads, (tuple, list)) or len(grads) != len(xs):
            raise TypeError(f"reduction: {reduction.name}'s backward must return a tuple of "
                            f"{len(xs)} gradient(s), one per input (a tensor or None), got "
                            f"{type(grads).__name__}"
                            + (f" of {len(grads)}" if isinstance(grads, (tuple, list)) else ""))
        for i, (g, t) in enumerate(zip(grads, xs)):
            if g is not None and (not isinstance(g, torch.Tensor) or g.shape != t.shape):
                got = tuple(g.shape) if isinstance(g, torch.Tensor) else type(g).__name__
                raise ValueError(f"reduction: {reduction.name}'s backward returned {got} for "
                                 f"xs[{i}]; a gradient must be None or a tensor of the input's "
                                 f"shape {tuple(t.shape)}")
        return (None, None, None, None,
                *(g if needed else None for g, needed in zip(grads, ctx.needs_input_grad[4:])))


@torch.compiler.disable
def reduce_with(reduction, xs, axes=None, *, keepdims: bool = True,
                config: Optional[ReduceConfig] = None):
    """Reduce ``axes`` of ``xs`` with the user-defined ``reduction`` (a ``tritonml.Reduction``).

    ``xs``: a tensor, or a tuple of tensors of one shape and device (any dtypes, any strides) for a
    reduction of several inputs. ``axes``: an int or a sequence of distinct ints (negative count
    from the end), None for every axis. ``keepdims``: keep reduced dims as size 1 (the default, as
    DirectML). ``config``: a ``ReduceConfig`` forcing the regime and tile.

    Returns a tensor for a reduction with one output, else a tuple of them, in the dtypes the
    reduction declares. Errors (``TypeError``/``ValueError`` naming the argument) are raised before
    anything is launched. Autograd: through the reduction's ``backward`` (``welford`` and
    ``welford_biased`` have theirs); an input that requires grad, with grad mode on, is an error
    for a reduction without one.

    >>> import torch, tritonml
    >>> x = torch.tensor([[2., 4., 4., 4.], [5., 5., 7., 9.]])
    >>> var, mean = tritonml.reduce_with(tritonml.reductions.welford, x, axes=1)
    >>> var.flatten().tolist(), mean.flatten().tolist()
    ([1.0, 3.6666667461395264], [3.5, 6.5])
    """
    if _dtensor.any_dtensor(xs):
        return _dtensor.reduce_with(
            lambda local: reduce_with(reduction, local, axes, keepdims=keepdims, config=config),
            reduction, xs, axes, keepdims)
    single = isinstance(xs, torch.Tensor)
    tensors = (xs,) if single else xs
    recording = _recording(tensors) if isinstance(tensors, (tuple, list)) else []
    if recording and isinstance(reduction, Reduction):
        if reduction.backward is None:
            name = "xs" if single else f"xs[{recording[0]}]"
            raise RuntimeError(
                f"{name}: requires grad, but the reduction {reduction.name} has no gradient; give "
                f"its tritonml.Reduction a backward= function (docs/dsl.md, \"Gradients\"), or "
                f"pass tensors that do not require grad (x.detach(), or torch.no_grad())")
        outs = ReduceWith.apply(reduction, axes, keepdims, config, *tensors)
    else:
        with torch.no_grad():
            outs = reduce_with_axes(reduction, xs, axes, keepdims=keepdims, config=config)
    return outs[0] if len(outs) == 1 else outs
