"""``tritonml.linear_recurrence``: ``h[t] = gates[t] * h[t-1] + tokens[t]`` as a torch op with
autograd, on the tuple-state scan kernels.

    tritonml::linear_recurrence(Tensor gates, Tensor tokens, int axis, bool reverse=False,
                                Tensor? initial=None) -> Tensor

The forward pass is one scan of the state ``(gate, value)`` under the composition of affine maps
(``tritonml.launchers.recurrence``, the record ``LINEAR_RECURRENCE`` of
tritonml/records/builtin_scans.py, which also holds the backward). The backward pass is the same
recurrence run the other way with the gates shifted one step (Martin & Cundy, "Parallelizing linear
recurrent neural nets over sequence length", ICLR 2018): with ``dh`` the gradient of the output and
traversal order forward,

    g[t]      = dh[t] + gates[t + 1] * g[t + 1]      (g[T] = 0: a linear recurrence in reverse)
    dtokens   = g
    dgates[t] = g[t] * h[t - 1]                      (h[-1] = initial, or 0)
    dinitial  = gates[0] * g[0]

so both passes run on tritonml's kernels, and the backward is itself differentiable. The
forward-mode tangent is the recurrence itself over other tokens:

    dh[t]     = gates[t] * dh[t - 1] + (dtokens[t] + dgates[t] * h[t - 1]),  dh[-1] = dinitial
"""
import contextlib
from typing import Any, Literal, NoReturn, Optional, Tuple, Union, overload

import torch

from ..core import checks as _checks
from ..launchers.recurrence import check_recurrence_meta, recurrence
from ..launchers.scan_checks import prechecked
from ..records.builtin_scans import LINEAR_RECURRENCE
from .define import define, differentiable, direct_call_allowed
from .scan import _batch_initial, eager_carry_call


@define("linear_recurrence", opaque=True)   # a two-component state: tuples (define)
def _linear_recurrence_op(gates: torch.Tensor, tokens: torch.Tensor, axis: int,
                          reverse: bool = False,
                          initial: Optional[torch.Tensor] = None) -> torch.Tensor:
    return recurrence(  # pyright: ignore[reportReturnType] (no return_carry)
        gates, tokens, axis, reverse=reverse, initial=initial)


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
    ctx.save_for_forward(gates, output, initial)


def _backward(ctx, grad):
    """``LINEAR_RECURRENCE.backward`` (tritonml/records/builtin_scans.py), its reverse
    recurrence run through the differentiable op."""
    gates, output, initial = ctx.saved_tensors
    grad_gates, grad_tokens, grad_initial = LINEAR_RECURRENCE.backward(  # pyright: ignore[reportOptionalCall]
        _LINEAR_RECURRENCE, gates, output, initial if ctx.has_initial else None, grad, ctx.axis,
        ctx.reverse)
    return grad_gates, grad_tokens, None, None, grad_initial


def _jvp(ctx, gates_tangent, tokens_tangent, _axis, _reverse, initial_tangent=None):
    """``LINEAR_RECURRENCE.jvp``: the recurrence over the tangent tokens, through the
    differentiable op."""
    gates, output, initial = ctx.saved_tensors
    return LINEAR_RECURRENCE.jvp(  # pyright: ignore[reportOptionalCall]
        _LINEAR_RECURRENCE, gates, output, initial if ctx.has_initial else None, gates_tangent,
        tokens_tangent, initial_tangent, ctx.axis, ctx.reverse)


_LINEAR_RECURRENCE = differentiable(_linear_recurrence_op, _setup_context, _backward, _jvp)


@overload
def linear_recurrence(gates: torch.Tensor, tokens: torch.Tensor, axis: int, *,
                      reverse: bool = ..., initial: Optional[torch.Tensor] = ...,
                      return_carry: Literal[False] = ...) -> torch.Tensor: ...
@overload
def linear_recurrence(gates: torch.Tensor, tokens: torch.Tensor, axis: int, *,
                      reverse: bool = ..., initial: Optional[torch.Tensor] = ...,
                      return_carry: Literal[True]) -> Tuple[torch.Tensor, torch.Tensor]: ...
@overload
def linear_recurrence(gates: torch.Tensor, tokens: torch.Tensor, axis: int, *,
                      reverse: bool = ..., initial: Optional[torch.Tensor] = ...,
                      return_carry: bool) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]: ...
# Last: a misspelt keyword matches only here, so type checkers name it in their error (the
# implementation takes no such keyword: Python's TypeError names it at run time).
@overload
def linear_recurrence(gates: torch.Tensor, tokens: torch.Tensor, axis: int, *,
                      reverse: bool = ..., initial: Optional[torch.Tensor] = ...,
                      return_carry: bool = ..., **unexpected_keyword: NoReturn
                      ) -> Any: ...
def linear_recurrence(  # pyright: ignore[reportInconsistentOverload]
                      gates: torch.Tensor, tokens: torch.Tensor, axis: int, *,
                      reverse: bool = False, initial: Optional[torch.Tensor] = None,
                      return_carry: bool = False
                      ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """``h[t] = gates[t] * h[t-1] + tokens[t]`` along ``axis``: a first-order linear recurrence
    (the state update of linear RNNs and diagonal state-space models), as one scan.

    The backward pass is a linear recurrence in the other direction, the tangent one in the
    same direction, on the same kernels. Runs as ``torch.ops.tritonml.linear_recurrence``; see
    docs/dsl.md for accuracy.

    Args:
        gates: A tensor of tokens' shape, dtype and device (any strides, expanded views too).
        tokens: A tensor of gates' shape, dtype and device.
        axis: The axis of the steps; negative counts from the end.
        reverse: Run from the end of the axis (``h[t] = gates[t] * h[t+1] + tokens[t]``).
        initial: None (h before the first step is 0) or the state before the first step in
            traversal order: a tensor of the inputs' shape without ``axis``, the inputs' dtype
            or their accumulation dtype (float64 for float32), same device.
        return_carry: Return ``(h, carry)``, ``carry`` the last h of each scan in the
            accumulation dtype: the ``initial`` that continues the recurrence over the next
            chunk with nothing rounded (docs/dsl.md). Eager only: no autograd, vmap or graph
            capture.

    Returns:
        h, a tensor of the inputs' shape and dtype, differentiable in gates, tokens and initial
        in reverse and forward mode; with ``return_carry``, ``(h, carry)``.

    Raises:
        TypeError: An input is not a tensor, dtypes differ, or reverse / return_carry is not a
            bool.
        ValueError: Shapes or devices differ, axis is out of range, or initial has the wrong
            shape.
        RuntimeError: return_carry with inputs that require grad or carry a tangent.

    Example:
        >>> import torch, tritonml
        >>> gates, tokens = torch.tensor([0.5, 0.5, 0.5]), torch.tensor([1., 1., 1.])
        >>> tritonml.linear_recurrence(gates, tokens, 0)
        tensor([1.0000, 1.5000, 1.7500])
        >>> tritonml.linear_recurrence(gates, tokens, 0, initial=torch.tensor(2.))
        tensor([2., 2., 2.])
    """
    if _checks.check_bool("return_carry", return_carry):
        return eager_carry_call(lambda: recurrence(gates, tokens, axis, reverse=reverse,
                                                   initial=initial, return_carry=True),
                                gates, tokens, initial)
    inputs = (tokens,) if initial is None else (tokens, initial)
    if direct_call_allowed(gates, None, inputs):
        return recurrence(  # pyright: ignore[reportReturnType] (no return_carry: a tensor)
            gates, tokens, axis, reverse=reverse, initial=initial)
    compiling = torch.compiler.is_compiling()
    if not compiling:
        for name, t in (("gates", gates), ("tokens", tokens), ("initial", initial)):
            if t is not None:
                _checks.check_readable(name, t)
    reverse = _checks.check_bool("reverse", reverse)
    if isinstance(gates, torch.Tensor):
        axis = _checks.normalize_axis(axis, gates.dim())
    # The op's launcher skips the checks above for these tensors: each runs once per call.
    with contextlib.nullcontext() if compiling else prechecked(gates, tokens, initial):
        return _LINEAR_RECURRENCE(gates, tokens, axis, reverse, initial)
