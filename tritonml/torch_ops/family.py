"""What the ops of torch's scan and reduce family (cumextreme.py, extremes.py, moments.py,
nanreduce.py) share: reading bool as its 0/1 bytes, the reduced axes as the op schemas carry
them, kept shapes for gradients, the vmap rules' batched axes, and the call that picks the
launcher in plain eager code or the differentiable op otherwise (``define.direct_call_allowed``).
"""
from __future__ import annotations

import math
from typing import Callable, List, Sequence

import torch

from ..core import checks as _checks, torch_compat as _torch_compat
from ..core.shapes import reduced_shape
from .define import direct_call_allowed


def comparable(x: torch.Tensor) -> torch.Tensor:
    """bool as uint8 (the same 0/1 bytes, no copy): the kernels compare uint8; results view back
    with ``as_input``."""
    return x.view(torch.uint8) if x.dtype == torch.bool else x


def as_input(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """A result computed on ``comparable(x)``, viewed back as bool where x is bool."""
    return t.view(torch.bool) if x.dtype == torch.bool else t


def axes_list(axes, rank: int) -> List[int]:
    """The schemas' ``int[] axes``: sorted, non-negative; None (or, as torch reads it, an empty
    sequence) means every axis, carried as []."""
    if axes is None or (isinstance(axes, Sequence) and not isinstance(axes, str) and not axes):
        return []
    return list(_checks.normalize_axes(axes, rank))


def op_axes(axes: Sequence[int], rank: int) -> tuple:
    """An op's ``axes`` (``[]``: every axis) as the launchers take them."""
    return _checks.normalize_axes(list(axes) or None, rank)


def reduced_count(x: torch.Tensor, axes: tuple) -> int:
    """Elements each result reduces (a 0-d x: one)."""
    return math.prod(x.shape[a] for a in axes) if x.dim() else 1


def kept(t: torch.Tensor, x: torch.Tensor, axes: tuple) -> torch.Tensor:
    """A result (with or without keepdim) reshaped to keep the reduced axes as size 1, so it
    broadcasts against ``x``."""
    return t.reshape(reduced_shape(x.shape, axes))


def check_not_empty(name: str, x: torch.Tensor, axes: tuple) -> None:
    """torch.max/min with dim and torch.aminmax refuse an empty reduced dim: it has no extreme."""
    if x.dim() and any(x.shape[a] == 0 for a in axes):
        raise ValueError(f"x: {name} over an empty dim has no value (dims {tuple(axes)} of shape "
                         f"{tuple(x.shape)}), as torch.{name.split('_')[0]} refuses it")


def batched(x: torch.Tensor, axes: Sequence[int], keepdim: bool):
    """(x, axes, keepdim) for one call over a batch, the batch dim first: the axes move past it,
    and a batch of 0-d tensors (each acting as shape [1], giving a 0-d result) becomes a batch of
    length-1 rows."""
    if x.dim() == 1:
        return x.unsqueeze(1), [1], False
    return x, [a + 1 for a in op_axes(axes, x.dim() - 1)], keepdim


def call(launch: Callable, op: Callable, x: torch.Tensor, *args):
    """``launch(x, *args)`` in plain eager code (the op's layers would do nothing but cost host
    time), else ``op(x, *args)`` (autograd, torch.func, compile, modes, and forward-mode AD,
    whose dual tensors look plain)."""
    if direct_call_allowed(x) and not _torch_compat.forward_ad_active():
        return launch(x, *args)
    if not torch.compiler.is_compiling():
        _checks.check_readable("x", x)  # before the dispatcher, which has no sparse kernel
    return op(x, *args)
