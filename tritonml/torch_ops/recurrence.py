"""``tritonml.linear_recurrence``: ``h[t] = gates[t] * h[t-1] + tokens[t]`` as a torch op with
autograd, on the tuple-state scan kernels.

    tritonml::linear_recurrence(Tensor gates, Tensor tokens, int axis, bool reverse=False,
                                Tensor? initial=None) -> Tensor

The forward pass is one scan of the state ``(gate, value)`` under the composition of affine maps
(``tritonml.launchers.recurrence``). The backward pass is the same recurrence run the other way with the
gates shifted one step (Martin & Cundy, "Parallelizing linear recurrent neural nets over sequence
length", ICLR 2018): with ``dh`` the gradient of the output and traversal order forward,

    g[t]      = dh[t] + gates[t + 1] * g[t + 1]      (g[T] = 0: a linear recurrence in reverse)
    dtokens   = g
    dgates[t] = g[t] * h[t - 1]                      (h[-1] = initial, or 0)
    dinitial  = gates[0] * g[0]

so both passes run on tritonml's kernels, and the backward is itself differentiable.
"""
from typing import Optional

import torch

from ..core import checks as _checks
from ..launchers.recurrence import check_recurrence_meta, recurrence
from .define import define, differentiable, direct_call_allowed
from .scan import _batch_initial, _shift_later, eager_carry_call


@define("linear_recurrence")
def _linear_recurrence_op(gates: torch.Tensor, tokens: torch.Tensor, axis: int,
                          reverse: bool = False,
                          initial: Optional[torch.Tensor] = None) -> torch.Tensor:
    return recurrence(gates, tokens, axis, reverse=reverse, initial=initial)


@_linear_recurrence_op.register_fake
def _fake(gates, tokens, axis, reverse=False, initial=None):
    check_recurrence_meta(gates, tokens, axis, initial)
    return torch.empty_like(tokens)


@_linear_recurrence_op.register_vmap
def _vmap(info, in_dims, gates, tokens, axis, reverse=False, initial=None):
    gates_dim, tokens_dim = in_dims[0], in_dims[1]
    init_dim = in_dims[4] if len(in_dims) > 4 else None
    if gates_dim is None and tokens_dim is None and init_dim is None:
        return _linear_recurrence_op(gates, tokens, axis, reverse, initial), None
    size = info.batch_size
    rank = (gates if gates_dim is None else gates.movedim(gates_dim, 0)[0]).dim()

    def batched(t, dim):
        return t.movedim(dim, 0) if dim is not None else t.expand(size, *t.shape)
    gates, tokens = batched(gates, gates_dim), batched(tokens, tokens_dim)
    initial = _batch_initial(initial, init_dim, size)
    if rank == 0:  # a batch of 0-d sequences: each acts as a sequence of one
        result = _linear_recurrence_op(gates.unsqueeze(1), tokens.unsqueeze(1), 1, reverse,
                                       initial)
        return result.squeeze(1), 0
    axis = _checks.normalize_axis(axis, rank) + 1
    return _linear_recurrence_op(gates, tokens, axis, reverse, initial), 0


def _setup_context(ctx, inputs, output):
    gates, tokens, axis, reverse = inputs[:4]
    initial = inputs[4] if len(inputs) > 4 else None
    ctx.axis = _checks.normalize_axis(axis, max(gates.dim(), 1))
    ctx.reverse, ctx.has_initial = reverse, initial is not None
    ctx.save_for_backward(gates, output, initial)


def _shift_earlier(h, initial, axis: int, reverse: bool):
    """h[t] <- h[t - 1] in traversal order, the first position ``initial`` (or 0)."""
    n = h.shape[axis]
    first = (initial.unsqueeze(axis) if initial is not None
             else torch.zeros_like(h.narrow(axis, 0, min(n, 1))))
    if n == 0:
        return h
    if reverse:
        return torch.cat([h.narrow(axis, 1, n - 1), first.expand_as(h.narrow(axis, 0, 1))], axis)
    return torch.cat([first.expand_as(h.narrow(axis, 0, 1)), h.narrow(axis, 0, n - 1)], axis)


def _backward(ctx, grad):
    gates, output, initial = ctx.saved_tensors
    axis, reverse = ctx.axis, ctx.reverse
    scalar = gates.dim() == 0
    if scalar:  # a 0-d sequence acts as shape [1]
        gates, output, grad = gates.unsqueeze(0), output.unsqueeze(0), grad.unsqueeze(0)
    grad_h = _LINEAR_RECURRENCE(_shift_later(gates, axis, reverse), grad, axis, not reverse, None)
    grad_gates = grad_h * _shift_earlier(output, initial, axis, reverse)
    grad_initial = None
    if ctx.has_initial:
        n = gates.shape[axis]
        if n == 0:
            grad_initial = torch.zeros_like(initial)
        else:
            first = n - 1 if reverse else 0
            grad_initial = (gates.select(axis, first) * grad_h.select(axis, first))
    if scalar:
        grad_h, grad_gates = grad_h.squeeze(0), grad_gates.squeeze(0)
    return grad_gates, grad_h, None, None, grad_initial


_LINEAR_RECURRENCE = differentiable(_linear_recurrence_op, _setup_context, _backward)


def linear_recurrence(gates: torch.Tensor, tokens: torch.Tensor, axis: int, *,
                      reverse: bool = False,
                      initial: Optional[torch.Tensor] = None, return_carry: bool = False):
    """``h[t] = gates[t] * h[t-1] + tokens[t]`` along ``axis``: a first-order linear recurrence
    (the state update of linear RNNs and diagonal state-space models), as one scan.

    gates, tokens: tensors of one shape, dtype and device (any strides, expanded views too).
    reverse: run from the end of the axis (``h[t] = gates[t] * h[t+1] + tokens[t]``).
    initial: None (h before the first step is 0) or the state before the first step in traversal
    order: a tensor of the inputs' shape without ``axis``, the inputs' dtype or their
    accumulation dtype (float64 for float32), same device.
    return_carry: return ``(h, carry)``, ``carry`` the last h of each scan in the accumulation
    dtype: the ``initial`` that continues the recurrence over the next chunk with nothing rounded
    (docs/dsl.md). Eager only: no autograd, vmap or graph capture.
    Returns h, a tensor of the inputs' shape and dtype, differentiable in gates, tokens and
    initial (the backward pass is a linear recurrence in the other direction, on the same
    kernels). Runs as ``torch.ops.tritonml.linear_recurrence``; see docs/dsl.md for accuracy.
    """
    if _checks.check_bool("return_carry", return_carry):
        return eager_carry_call(lambda: recurrence(gates, tokens, axis, reverse=reverse,
                                                   initial=initial, return_carry=True),
                                gates, tokens, initial)
    inputs = (tokens,) if initial is None else (tokens, initial)
    if direct_call_allowed(gates, None, inputs):
        return recurrence(gates, tokens, axis, reverse=reverse, initial=initial)
    if not torch.compiler.is_compiling():
        for name, t in (("gates", gates), ("tokens", tokens), ("initial", initial)):
            if t is not None:
                _checks.check_readable(name, t)
    reverse = _checks.check_bool("reverse", reverse)
    if isinstance(gates, torch.Tensor):
        axis = _checks.normalize_axis(axis, gates.dim())
    return _LINEAR_RECURRENCE(gates, tokens, axis, reverse, initial)
