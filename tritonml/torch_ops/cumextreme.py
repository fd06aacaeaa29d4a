"""torch.cummax, torch.cummin and torch.logcumsumexp as torch ops, with fake kernels, autograd
(backward and forward mode), vmap, and the public functions ``tritonml.cummax``, ``cummin`` and
``logcumsumexp``:

    tritonml::cummax(Tensor x, int dim) -> (Tensor, Tensor)
    tritonml::cummin(Tensor x, int dim) -> (Tensor, Tensor)
    tritonml::logcumsumexp(Tensor x, int dim, bool reverse=False) -> Tensor

cummax / cummin scan the state (value, index) in one pass on the tuple-state scan kernels
(``launchers/associative_scan.py: state_scan``), the index read from a broadcast ``arange`` (no
copy) under ``cummax_pairs`` / ``cummin_pairs`` (kernels/combine.py): torch's rule, ties to the
later index and NaN sticking, the later NaN's index. logcumsumexp is the ``LOGCUMSUMEXP`` scan
record (records/builtin_scans.py) on the one-tensor scan kernels, in every regime; half types
accumulate in float32 and float32 in float64 (docs/semantics.md). cummax and cummin launch a
two-component state, passed to the kernels in tuples, so they are opaque ops with compiled Triton
too (``define``'s ``opaque``); logcumsumexp is a ``triton_op`` whose kernels torch.compile sees.

Gradients are torch's (tools/autograd/derivatives.yaml): cummax / cummin send each output's
gradient to the element its index names (a scatter-add), their jvp gathers the tangent there;
logcumsumexp's are its record's (``LOGCUMSUMEXP.backward`` and ``jvp``, records/builtin_scans.py:
torch's backward, the reverse logcumsumexp of log|grad| - result split by sign, run on this op so
double backward works too; the jvp a first-order linear recurrence).
"""
from __future__ import annotations

from typing import Tuple

import torch

from ..core import checks as _checks
from ..core.dtypes import FLOAT_DTYPES, dtype_name
from ..launchers.associative_scan import state_scan
from ..launchers.scan import cumulative_scan
from ..records.builtin_scans import CUMMAX, CUMMIN, LOGCUMSUMEXP
from ..records.ready_reductions import losing_value
from .define import define, differentiable
from .family import as_input, call, comparable
from .scan import WHOLE_AXIS, register_differentiable


# ---------------------------------------------------------------------------------------------
# Launch
# ---------------------------------------------------------------------------------------------
def _cum_extreme(x: torch.Tensor, dim: int, largest: bool):
    """(values, indices) of cummax (``largest``) or cummin along ``dim``; checks before launch."""
    _checks.check_readable("x", x)
    t = comparable(x)
    _checks.check_tensor("x", t)
    dim = _checks.normalize_axis(dim, t.dim(), "dim")
    shape = tuple(t.shape)
    n = shape[dim] if shape else 1
    index = torch.arange(n, device=t.device)
    index = (index.view([n if a == dim else 1 for a in range(len(shape))]).expand(shape)
             if shape else index.reshape(()))
    values = torch.empty(shape, dtype=t.dtype, device=t.device)
    indices = torch.empty(shape, dtype=torch.int64, device=t.device)
    # the identity loses every comparison and every tie (kernels/combine.py: _later_extreme)
    record = CUMMAX if largest else CUMMIN
    identity = (losing_value(t.dtype, largest), record.identity[1])
    state_scan(record.fn, (t, index), dim,
               reverse=False, exclusive=False, identity=identity, initials=None,
               outs=(values, indices), config=None, store=None, return_carry=False)
    return as_input(values, x), indices


def _check_float(name: str, x: torch.Tensor) -> None:
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"x: {name} is defined for floating-point x (float16, bfloat16, float32, "
                        f"float64), as torch's is, but x has dtype {dtype_name(x.dtype)}; "
                        "convert x to a floating-point dtype first")


def _logcumsumexp(x: torch.Tensor, dim: int, reverse: bool = False) -> torch.Tensor:
    _checks.check_readable("x", x)
    _check_float("logcumsumexp", x)
    return cumulative_scan(  # pyright: ignore[reportReturnType] (no return_carry: a tensor)
        x, dim, LOGCUMSUMEXP, reverse=_checks.check_bool("reverse", reverse))


# ---------------------------------------------------------------------------------------------
# Ops, fake kernels, vmap
# ---------------------------------------------------------------------------------------------
@define("cummax", opaque=True)
def _cummax_op(x: torch.Tensor, dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    return _cum_extreme(x, dim, True)


@define("cummin", opaque=True)
def _cummin_op(x: torch.Tensor, dim: int) -> Tuple[torch.Tensor, torch.Tensor]:
    return _cum_extreme(x, dim, False)


@define("logcumsumexp")
def _logcumsumexp_op(x: torch.Tensor, dim: int, reverse: bool = False) -> torch.Tensor:
    return _logcumsumexp(x, dim, reverse)


def _fake_extreme(x, dim):
    _checks.normalize_axis(dim, x.dim(), "dim")
    return x.new_empty(x.shape), x.new_empty(x.shape, dtype=torch.int64)   # contiguous, as ours


def _fake_logcumsumexp(x, dim, reverse=False):
    _checks.normalize_axis(dim, x.dim(), "dim")
    _check_float("logcumsumexp", x)
    return torch.empty_like(x)


_cummax_op.register_fake(_fake_extreme)
_cummin_op.register_fake(_fake_extreme)
_logcumsumexp_op.register_fake(_fake_logcumsumexp)


def _batched_dim(x: torch.Tensor, dim: int):
    """(x, dim) with the batch dim first; a batch of 0-d tensors becomes a batch of rows of one."""
    if x.dim() == 1:
        return x.unsqueeze(1), 1
    return x, _checks.normalize_axis(dim, x.dim() - 1, "dim") + 1


def _vmap_of(op, outputs: int):
    def rule(info, in_dims, x, dim, *rest):
        if in_dims[0] is None:
            return op(x, dim, *rest), (None,) * outputs if outputs > 1 else None
        moved = x.movedim(in_dims[0], 0)
        t, batch_dim = _batched_dim(moved, dim)
        result = op(t, batch_dim, *rest)
        if moved.dim() == 1:   # back to a batch of 0-d results
            result = tuple(r.squeeze(1) for r in result) if outputs > 1 else result.squeeze(1)
        return result, (0,) * outputs if outputs > 1 else 0
    return rule


_cummax_op.register_vmap(_vmap_of(_cummax_op, 2))
_cummin_op.register_vmap(_vmap_of(_cummin_op, 2))
_logcumsumexp_op.register_vmap(_vmap_of(_logcumsumexp_op, 1))


# ---------------------------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------------------------
def _setup_extreme(ctx, inputs, output):
    x, dim = inputs
    ctx.dim = _checks.normalize_axis(dim, x.dim(), "dim")
    ctx.shape = x.shape
    indices = output[1]
    ctx.save_for_backward(indices)
    ctx.save_for_forward(indices)


def _backward_extreme(ctx, grad_values, grad_indices):
    """torch's cummaxmin_backward: each output's gradient goes to the element it took."""
    (indices,) = ctx.saved_tensors
    if grad_values is None:
        return None, None
    if not ctx.shape:   # 0-d: the one element is its own output
        return grad_values, None
    grad = torch.zeros(ctx.shape, dtype=grad_values.dtype, device=grad_values.device)
    return grad.scatter_add(ctx.dim, indices, grad_values), None


def _jvp_extreme(ctx, x_t, dim_t):
    (indices,) = ctx.saved_tensors
    values_t = x_t if not ctx.shape else x_t.gather(ctx.dim, indices)
    return values_t, None


def _setup_logcumsumexp(ctx, inputs, output):
    x, dim = inputs[:2]
    ctx.reverse = inputs[2] if len(inputs) > 2 else False
    ctx.dim = _checks.normalize_axis(dim, x.dim(), "dim")
    ctx.save_for_backward(x, output)
    ctx.save_for_forward(x, output)


def _backward_logcumsumexp(ctx, grad):
    """The record's gradient (``LOGCUMSUMEXP.backward``, records/builtin_scans.py)."""
    x, result = ctx.saved_tensors
    grad_x, _ = LOGCUMSUMEXP.backward(  # pyright: ignore[reportOptionalCall]
        WHOLE_AXIS, x, result, None, grad, ctx.dim, ctx.reverse, False)
    return grad_x, None, None


def _jvp_logcumsumexp(ctx, x_t, dim_t, reverse_t=None):
    """The record's tangent (``LOGCUMSUMEXP.jvp``)."""
    x, y = ctx.saved_tensors
    return LOGCUMSUMEXP.jvp(  # pyright: ignore[reportOptionalCall]
        WHOLE_AXIS, x, y, None, x_t, None, ctx.dim, ctx.reverse, False)


_CUMMAX = differentiable(_cummax_op, _setup_extreme, _backward_extreme, jvp=_jvp_extreme)
_CUMMIN = differentiable(_cummin_op, _setup_extreme, _backward_extreme, jvp=_jvp_extreme)
_LOGCUMSUMEXP = differentiable(_logcumsumexp_op, _setup_logcumsumexp, _backward_logcumsumexp,
                               jvp=_jvp_logcumsumexp)


def _differentiable_logcumsumexp(x, axis, reverse, exclusive, initial):
    # the op is inclusive and starts from nothing; the record's derivatives ask no more of it
    if exclusive or initial is not None:
        raise NotImplementedError("logcumsumexp's differentiable op takes neither exclusive nor "
                                  "initial")
    return _LOGCUMSUMEXP(x, axis, reverse)


register_differentiable(LOGCUMSUMEXP, _differentiable_logcumsumexp)


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------
def cummax(input: torch.Tensor, dim: int) -> torch.return_types.cummax:
    """torch.cummax: the running maximum of ``input`` along ``dim`` and the index where each
    was taken.

    torch's rule: equal values take the later index; a NaN sticks (every later value is NaN)
    and takes each later NaN's index. One pass. Runs as ``torch.ops.tritonml.cummax``.

    Args:
        input: Any dtype the kernels take (floats, integers, bool), any strides.
        dim: The dim to scan along; negative counts from the end.

    Returns:
        ``(values, indices)`` as ``torch.return_types.cummax``, indices int64; differentiable
        in ``input`` (floats; forward and reverse mode), the gradient going to the element each
        output took.

    Raises:
        TypeError: input is not a tensor, or of a dtype the kernels do not take.
        ValueError: dim is out of range.

    Example:
        >>> import torch, tritonml
        >>> values, indices = tritonml.cummax(torch.tensor([1., 3., 2., 3.]), 0)
        >>> values, indices
        (tensor([1., 3., 3., 3.]), tensor([0, 1, 1, 3]))
    """
    return torch.return_types.cummax(_running_extreme(input, dim, largest=True))


def cummin(input: torch.Tensor, dim: int) -> torch.return_types.cummin:
    """torch.cummin: the running minimum and its indices; the rules of ``cummax`` with the
    order reversed.

    Runs as ``torch.ops.tritonml.cummin``. The arguments and the errors are ``cummax``'s.

    Returns:
        ``(values, indices)`` as ``torch.return_types.cummin``.

    Example:
        >>> import torch, tritonml
        >>> result = tritonml.cummin(torch.tensor([3., 1., 2., 1.]), 0)
        >>> result.values, result.indices
        (tensor([3., 1., 1., 1.]), tensor([0, 1, 1, 3]))
    """
    return torch.return_types.cummin(_running_extreme(input, dim, largest=False))


def _running_extreme(input: torch.Tensor, dim: int, largest: bool
                     ) -> Tuple[torch.Tensor, torch.Tensor]:
    """cummax's (``largest``) or cummin's ``(values, indices)``, the one body of both public
    functions: the launch in plain eager code, else the op (``family.call``)."""
    values, indices = call(lambda t, d: _cum_extreme(t, d, largest),
                           _CUMMAX if largest else _CUMMIN, input, dim)
    return values, indices


def logcumsumexp(input: torch.Tensor, dim: int, *, reverse: bool = False) -> torch.Tensor:
    """torch.logcumsumexp: ``log(sum_{j<=i} exp(x_j))`` along ``dim``, stable at any magnitude.

    -inf elements add nothing, +inf gives +inf, NaN propagates. Runs as
    ``torch.ops.tritonml.logcumsumexp``.

    Args:
        input: A floating-point tensor, as torch.
        dim: The dim to scan along; negative counts from the end.
        reverse: From the end of the dim (not in torch).

    Returns:
        A tensor of input's shape and dtype, differentiable (forward and reverse mode, double
        backward).

    Raises:
        TypeError: input is not a floating-point tensor, or reverse is not a bool.
        ValueError: dim is out of range.

    Example:
        >>> import torch, tritonml
        >>> tritonml.logcumsumexp(torch.tensor([0., 0., 0.]), 0)   # log 1, log 2, log 3
        tensor([0.0000, 0.6931, 1.0986])
    """
    return call(_logcumsumexp, _LOGCUMSUMEXP, input, dim, reverse)


__all__ = ["cummax", "cummin", "logcumsumexp"]
