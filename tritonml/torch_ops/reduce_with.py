"""``tritonml.reduce_with``: a user-defined reduction (``tritonml.Reduction``) over axes.

A plain function, not a torch op: the reduction is a Python object (its ``@triton.jit``
functions and dtype rules) that no op schema can carry. Autograd comes from the reduction's own
``backward`` and ``jvp`` (torch functions), run by an ``autograd.Function``; a reduction without
one refuses inputs that require grad (or carry a tangent) rather than returning detached outputs.
vmap by the Function's own rule (the batch dim first, one launch for the batch), so jacfwd and
vmap of grad work; under torch.compile it runs eagerly (``torch.compiler.disable``: a graph
break). DTensors reduce locally when no reduced dim is sharded (``torch_ops/dtensor.py``).
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple, Union

import torch
from torch.autograd import forward_ad

from tritonml_autotune.configs import ReduceConfig

from ..core import checks as _checks, torch_compat as _torch_compat
from ..core.shapes import reduced_shape
from ..launchers.reduce_with import reduce_with_axes
from ..records.reduction import Reduction
from . import dtensor as _dtensor
from .define import compiler_disable
from .reduce import reduce_kept


def _recording(xs) -> list:
    """The indices of the inputs autograd would record a gradient for."""
    if not torch.is_grad_enabled():
        return []
    return [i for i, t in enumerate(xs) if isinstance(t, torch.Tensor) and t.requires_grad]


def _with_tangent(xs) -> list:
    """The indices of the inputs that carry a forward-mode tangent
    (``torch.autograd.forward_ad.make_dual``); torch.func's are seen by the Function's ``jvp``."""
    if not _torch_compat.forward_ad_active():
        return []
    return [i for i, t in enumerate(xs)
            if isinstance(t, torch.Tensor) and forward_ad.unpack_dual(t).tangent is not None]


def _input_name(single: bool, i: int) -> str:
    return "xs" if single else f"xs[{i}]"


def _no_jvp(reduction, name: str) -> RuntimeError:
    return RuntimeError(
        f"{name}: carries a forward-mode tangent, but the reduction {reduction.name} has no "
        f"forward-mode derivative; give its tritonml.Reduction a jvp= function (docs/dsl.md, "
        f"\"Forward mode\"), or pass tensors without a tangent")


class ReduceWith(torch.autograd.Function):
    """Forward: the launcher. Backward and jvp: the reduction's ``backward`` and ``jvp``, called
    with the outputs reshaped to keep the reduced axes (so they broadcast against the inputs).
    vmap: the batch dim first, the axes past it, one call."""

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
        # Likewise a jvp sees None for an input without a tangent.
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(*xs, *output)
        ctx.save_for_forward(*xs, *output)

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
        backward, _ = reduction.derivatives(reduce_kept)
        grads = backward(xs, outputs, grad_outputs, ctx.axes)
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

    @staticmethod
    def jvp(ctx, _reduction, _axes, _keepdims, _config,  # pyright: ignore[reportIncompatibleMethodOverride]
            *tangents):
        reduction = ctx.reduction
        _, jvp = reduction.derivatives(reduce_kept)
        if jvp is None:
            first = next(i for i, t in enumerate(tangents) if t is not None)
            raise _no_jvp(reduction, _input_name(ctx.inputs == 1, first))
        saved = ctx.saved_tensors
        xs, outputs = saved[:ctx.inputs], saved[ctx.inputs:]
        kept = ctx.kept_shape
        results = jvp(xs, tuple(o.reshape(kept) for o in outputs), tangents, ctx.axes)
        if not isinstance(results, (tuple, list)) or len(results) != len(outputs):
            raise TypeError(f"reduction: {reduction.name}'s jvp must return a tuple of "
                            f"{len(outputs)} tangent(s), one per output (a tensor or None), got "
                            f"{type(results).__name__}"
                            + (f" of {len(results)}" if isinstance(results, (tuple, list)) else ""))
        out = []
        for i, (t, o) in enumerate(zip(results, outputs)):
            if t is None:    # no tangent: zeros for a float output; an integer one takes none
                out.append(torch.zeros_like(o) if o.is_floating_point() else None)
                continue
            if not isinstance(t, torch.Tensor) or t.shape != kept:
                got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"reduction: {reduction.name}'s jvp returned {got} for output "
                                 f"{i}; a tangent must be None or a tensor of the output's shape "
                                 f"with the reduced axes kept, {tuple(kept)}")
            out.append(t.reshape(o.shape))
        return tuple(out)

    @staticmethod
    def vmap(info, in_dims, reduction, axes, keepdims,  # pyright: ignore[reportIncompatibleMethodOverride]
             config, *xs):
        size = info.batch_size
        xs = tuple(x.expand(size, *x.shape) if d is None else x.movedim(d, 0)
                   for x, d in zip(xs, in_dims[4:]))
        rank = xs[0].dim() - 1
        if rank == 0:   # a batch of 0-d inputs (each one element) is a batch of length-1 rows
            xs, axes, keepdims = tuple(x.unsqueeze(1) for x in xs), (1,), False
        else:
            axes = tuple(a + 1 for a in _checks.normalize_axes(axes, rank))
        outs = ReduceWith.apply(reduction, axes, keepdims, config, *xs)
        return outs, (0,) * len(outs)


@compiler_disable
def reduce_with(reduction: Reduction, xs: Union[torch.Tensor, Sequence[torch.Tensor]],
                axes: Union[int, Sequence[int], None] = None, *, keepdims: bool = True,
                config: Optional[ReduceConfig] = None
                ) -> Union[torch.Tensor, Tuple[torch.Tensor, ...]]:
    """Reduce ``axes`` of ``xs`` with the user-defined ``reduction`` (a ``tritonml.Reduction``).

    A plain function, not a torch op: under torch.compile it runs eagerly (a graph break).
    Autograd: through the reduction's ``backward`` and ``jvp`` (``welford`` and
    ``welford_biased`` have both). vmap and torch.func transforms run through the same Function.

    Args:
        reduction: The reduction to run (``tritonml.reductions`` has ready-made ones).
        xs: A tensor, or a tuple of tensors of one shape and device (any dtypes, any strides)
            for a reduction of several inputs.
        axes: An int or a sequence of distinct ints (negative count from the end), None for
            every axis.
        keepdims: Keep reduced dims as size 1 (the default, as DirectML).
        config: A ``ReduceConfig`` forcing the regime and tile.

    Returns:
        A tensor for a reduction with one output, else a tuple of them, in the dtypes the
        reduction declares.

    Raises:
        TypeError: reduction is not a ``Reduction``, xs are not tensors, keepdims is not a
            bool, or a dtype the reduction refuses (its ``check``). Raised, as the ValueErrors,
            before anything is launched, the message naming the argument.
        ValueError: the wrong number of inputs, an input of another shape or device, or an
            axis out of range or repeated.
        RuntimeError: an input that requires grad, with grad mode on, for a reduction without
            a backward, or one that carries a forward-mode tangent for a reduction without a
            jvp.

    Example:
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
    listed = isinstance(tensors, (tuple, list))
    recording = _recording(tensors) if listed else []
    with_tangent = _with_tangent(tensors) if listed else []
    transformed = listed and (_torch_compat.peek_functorch_interpreter is not None
                              and _torch_compat.peek_functorch_interpreter() is not None)
    if (recording or with_tangent or transformed) and isinstance(reduction, Reduction):
        backward, jvp = reduction.derivatives(reduce_kept)
        if recording and backward is None:
            raise RuntimeError(
                f"{_input_name(single, recording[0])}: requires grad, but the reduction "
                f"{reduction.name} has no gradient; give its tritonml.Reduction a backward= "
                f"function (docs/dsl.md, \"Gradients\"), or pass tensors that do not require "
                f"grad (x.detach(), or torch.no_grad())")
        if with_tangent and jvp is None:
            raise _no_jvp(reduction, _input_name(single, with_tangent[0]))
        outs = ReduceWith.apply(reduction, axes, keepdims, config, *tensors)
    else:
        with torch.no_grad():
            outs = reduce_with_axes(reduction, xs, axes, keepdims=keepdims, config=config)
    return outs[0] if len(outs) == 1 else outs
