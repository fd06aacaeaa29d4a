"""Launcher for ``tritonml.linear_recurrence``: ``h[t] = gates[t] * h[t-1] + tokens[t]`` as one
tuple-state scan.

The state of a step is the affine map ``h -> a * h + b``, held as ``(a, b)``; composing the map of
an earlier span with a later one gives ``(a1 * a2, a2 * b1 + b2)``, which is associative (not
commutative), so the scan machinery runs it in every regime, the single-pass look-back included.
``h[t]`` is the ``b`` of the composition up to ``t`` applied to ``initial``: the carry-in state is
``(1, initial)``. Only ``b`` is stored: reading two inputs and writing one output is the ideal.
The combine, identity and stored components are the record ``LINEAR_RECURRENCE``
(tritonml/records/builtin_scans.py).
"""
from __future__ import annotations

from typing import Optional

import torch

from ..core import checks as _checks
from .associative_scan import state_scan
from .scan_checks import check_carry_in, take_prechecked
from ..records.builtin_scans import LINEAR_RECURRENCE


def check_recurrence_meta(gates, tokens, axis: int, initial) -> None:
    """What a fake kernel can check: shapes and dtypes of gates, tokens and initial."""
    if tuple(tokens.shape) != tuple(gates.shape):
        raise ValueError(f"tokens: shape {tuple(tokens.shape)} does not match gates' shape "
                         f"{tuple(gates.shape)}; expand either explicitly to share a shape")
    if tokens.dtype != gates.dtype:
        raise TypeError(f"tokens: dtype {tokens.dtype} does not match gates' dtype {gates.dtype}")
    if initial is not None:
        check_carry_in("initial", initial, tuple(gates.shape),
                       _checks.normalize_axis(axis, gates.dim()), gates.dtype, "the inputs'",
                       "gates'")


def recurrence(gates: torch.Tensor, tokens: torch.Tensor, axis: int, *, reverse: bool = False,
               initial: Optional[torch.Tensor] = None, return_carry: bool = False):
    """h along ``axis``; see ``tritonml.linear_recurrence``. Validates everything before any
    launch. ``return_carry``: ``(h, carry)``, ``carry`` the last h of each scan in the
    accumulation dtype. Inside ``prechecked(gates, tokens, initial)`` (the public function's
    checks: tensors readable, axis, reverse) those are not checked again."""
    public = take_prechecked(gates, tokens, initial)
    _checks.check_tensor("gates", gates, readable_checked=public)
    _checks.check_tensor("tokens", tokens, readable_checked=public)
    if not public:
        axis = _checks.normalize_axis(axis, gates.dim())
        reverse = _checks.check_bool("reverse", reverse)
    check_recurrence_meta(gates, tokens, axis, initial)
    if tokens.device != gates.device:
        raise ValueError(f"tokens: tensor is on {tokens.device} but gates is on {gates.device}; "
                         "tensors must be on the same device")
    if initial is not None:
        if not public:
            _checks.check_readable("initial", initial)
        if initial.device != gates.device:
            raise ValueError(f"initial: tensor is on {initial.device} but gates is on "
                             f"{gates.device}; tensors must be on the same device")
    return _scan_affine(gates, tokens, axis, reverse, initial,
                        _checks.check_bool("return_carry", return_carry))


def _scan_affine(gates, tokens, axis, reverse, initial, return_carry=False):
    initials = None if initial is None else (torch.ones_like(initial), initial)
    record = LINEAR_RECURRENCE
    # checked by ``recurrence``: the tuple-state launcher's own checks would repeat them
    result = state_scan(record.fn, (gates, tokens), axis, reverse=reverse, exclusive=False,
                        identity=record.identity, initials=initials, outs=None, config=None,
                        store=record.stored, return_carry=return_carry)
    if return_carry:
        (_, h), (_, carry) = result
        return h, carry
    _, h = result
    return h
