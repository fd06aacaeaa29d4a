"""The kinds of scan record: ``ScanCombine`` (one tensor under a scalar combine), ``StateScan``
(a tuple state, one component per tensor), and ``Scans``, what a record's derivatives run (a
differentiable scan and a one-step shift, over the whole axis or restarted per segment).
``scan_record(name)`` finds any record by name. The built-in records are in builtin_scans.py.

How to add a scan combine
-------------------------
1. Write its combine as a ``@triton.jit`` function of two scalars ``(tally, value)``, ``tally``
   earlier in traversal order, in tritonml/kernels/combine.py (it must be associative; the
   kernels never assume it commutes unless the record says ``commutative=True``).
2. Add a ``ScanCombine`` record in tritonml/records/builtin_scans.py: name, combine, identity, and where defined its
   ``backward``, ``jvp`` and ``fold``. ``cumulative_scan(x, axis, RECORD)`` then runs it in
   every regime (rows, columns, look-back, chunked), with ``initial``, ``exclusive``,
   ``reverse`` and ``return_carry``; the tuner tunes it under its name; with a ``backward`` and
   a ``jvp`` (written against a ``Scans``), ``tritonml.segment_scan(x, RECORD, ...)`` runs it
   per segment, differentiable.
3. For a public torch op, add a ``_ScanOps(name, RECORD)`` in tritonml/torch_ops/scan.py and its
   public function (the schema, fake kernels, vmap rules and autograd come from the record).
4. Tests: the regimes and the oracle (tests/launchers/test_scan_custom_combine.py runs a record that is not
   built in), and ``torch.autograd.gradcheck`` of the backward and the jvp
   (``check_forward_ad=True``).
A combine over a tuple state (several tensors scanned together) is a ``StateScan`` record, as
``LINEAR_RECURRENCE``; a user's one-off combine needs no record (``tritonml.associative_scan``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from ..core.dtypes import ACC_TORCH_DTYPE
from . import state_combine as _state_combine


def accumulation_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype a scan of ``dtype`` carries its tally in (docs/semantics.md): float16 and
    bfloat16 in float32, float32 in float64, integers in 64 bits of their signedness."""
    return ACC_TORCH_DTYPE[dtype]


_BY_NAME: Dict[str, "ScanCombine"] = {}   # every ScanCombine by lower-case name (the latest)


def scan_record(name: str) -> "ScanCombine":
    """The ``ScanCombine`` named ``name`` in any case (the latest made of that name); KeyError
    if none."""
    return _BY_NAME[name.lower()]


def shift_along(t, axis: int, later: bool, reverse: bool, fill: float = 0.0):
    """t[i] <- t[i + 1] (``later``) or t[i - 1] in traversal order, ``fill`` at the position
    with no neighbour; a 0-d tensor acts as shape [1]."""
    if t.dim() == 0:
        return torch.full_like(t, fill)
    n = t.shape[axis]
    if n == 0:
        return t
    edge = torch.full_like(t.narrow(axis, 0, 1), fill)
    if later != reverse:
        return torch.cat([t.narrow(axis, 1, n - 1), edge], axis)
    return torch.cat([edge, t.narrow(axis, 0, n - 1)], axis)


@dataclass(frozen=True)
class Scans:
    """What a scan record's ``backward`` and ``jvp`` run: ``scans(record, t, axis, reverse,
    exclusive, initial=None)`` a differentiable scan, and ``scans.shift(t, axis, later, reverse,
    fill=0.0)`` the one-step shift of ``shift_along``, over the whole axis or, for segments,
    within each segment."""
    run: Callable[..., Any]
    shift: Callable[..., Any] = shift_along

    def __call__(self, record, t, axis: int, reverse: bool, exclusive: bool, initial=None):
        return self.run(record, t, axis, reverse, exclusive, initial)


@dataclass(frozen=True)
class ScanCombine:
    """A scan of one tensor under an associative combine.

    ``fn``: a ``@triton.jit`` function of two scalars (tally, value), the kernels' flat form
    (``SCAN_COMBINE``); ``identity``: its identity. ``state``: the form on one-component state
    tuples (``COMBINE``), generated around ``fn`` when None (tritonml/records/state_combine.py).
    ``commutative``: the chunked kernel may fold a chunk's tiles element by element first.
    ``state_dtype(dtype)``: the torch dtype the tally of an input of ``dtype`` is held in.
    ``backward(scan, x, output, initial, grad, axis, reverse, exclusive) -> (grad_x,
    grad_initial)``: the gradient, torch tensors in and out (``initial`` and ``grad_initial`` None
    without an initial), where ``scan(record, t, axis, reverse, exclusive)`` runs a
    differentiable scan (``record`` LINEAR_RECURRENCE with ``t`` a pair ``(gates, tokens)``:
    ``tritonml.linear_recurrence``, exclusive False). ``jvp(scan, x, output, initial, x_tangent,
    initial_tangent, axis, reverse, exclusive) -> output_tangent``: the forward-mode derivative, a
    tangent None where its input has none (never both), ``scan(record, t, axis, reverse,
    exclusive, initial=None)``.
    ``fold``: the ``ReduceFunction`` name that folds totals across ranks.

    ``scan`` is a ``Scans``: the same derivatives serve a scan of the whole axis
    (tritonml/torch_ops/scan.py) and of each segment on its own (tritonml/torch_ops/segment.py),
    whose scans and one-step shifts restart at the boundaries. A record is known by its name
    (``scan_record``), which ``tritonml.segment_scan``'s op carries.
    """
    name: str
    fn: object
    identity: object
    state: object = None
    commutative: bool = False
    state_dtype: Callable = accumulation_dtype
    backward: Optional[Callable] = None
    fold: Optional[str] = None
    jvp: Optional[Callable] = None

    def __post_init__(self) -> None:
        _BY_NAME[self.name.lower()] = self

    def forms(self) -> Tuple[Any, Any]:
        """``(COMBINE, SCAN_COMBINE)``: the state and flat forms the kernels take
        (tritonml/kernels/scan.py). Sum and product keep Triton's own combine objects as their
        flat form, which the interpreter runs through numpy."""
        state = self.state if self.state is not None else _state_combine.scalar_adapter(self.fn)
        return state, self.fn

    def element_bytes(self, dtype: torch.dtype) -> Tuple[int, int]:
        """``(bytes read, bytes of state)`` per element of ``dtype``: what the tuner sizes by."""
        return dtype.itemsize, self.state_dtype(dtype).itemsize


@dataclass(frozen=True)
class StateScan:
    """A scan of a tuple state (one component per input tensor) under ``fn``, a ``@triton.jit``
    combine of two state tuples (as ``tritonml.associative_scan`` takes). ``identity``: one value
    per component; ``stored``: per component, whether it is an output; ``backward``, ``jvp``: as
    ``ScanCombine``'s, in the terms of the operator's inputs (see ``LINEAR_RECURRENCE``)."""
    name: str
    fn: object
    identity: tuple
    stored: tuple
    backward: Optional[Callable] = None
    jvp: Optional[Callable] = None
