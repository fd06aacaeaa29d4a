"""In-process plans: what a launcher derives from a call's metadata alone, computed once.

Validating the arguments, canonicalizing the layout and choosing a config read only metadata:
shapes, strides, dtypes, devices, flags, options, the tuning target and the grad mode. A launcher
keys its plan on all of them (``tensor_key`` and the launcher's own options), so a later call with
the same metadata reuses the plan and runs only what depends on the data pointers (the aliasing
check between ``out`` and ``x``) and the launch itself. A call whose metadata cannot be keyed (a
tensor subclass, a non-strided layout, an option of an unusual type) is planned afresh each time:
the full validation then raises whatever it raises.

Plans hold no tensors. The cache is bounded (``MAX_PLANS``; when full it starts over) and shared
by threads (a dict's get and set are atomic; two threads planning the same key build equal plans).
"""
from __future__ import annotations

import struct

import torch

from ..core import torch_compat as _torch_compat
from . import caches as _caches

MAX_PLANS = 4096

_plans: dict = _caches.register("plan.plans", {})


def tensor_key(t):
    """The metadata of ``t`` that validation and planning read, or None when ``t`` is not a plain
    strided tensor (the launcher then plans without the cache)."""
    if type(t) is not torch.Tensor or t.layout is not torch.strided or t.is_nested:
        return None
    return (t.shape, t.stride(), t.dtype, t.device, t.is_neg(), t.requires_grad,
            _torch_compat.is_zerotensor(t))


def option_key(value):
    """An option (axis, flag, axes, a scalar) with its exact type, so ``True`` and ``1`` (equal
    to Python) plan apart: validation treats them differently; a float by its bits, so ``0.0`` and
    ``-0.0`` (equal too) plan apart. None when the value is not a plain int, bool, float, None or
    tuple/list of ints."""
    kind = type(value)
    if kind in (int, bool) or value is None:
        return kind, value
    if kind is float:
        return kind, struct.pack("<d", value)
    if kind in (tuple, list) and all(type(item) is int for item in value):
        return kind, tuple(value)
    return None


def lookup(key, build):
    """``(plan, built)``: the plan remembered for ``key``, or ``build()``'s (remembered unless
    ``key`` is None); ``built`` says the call was validated just now."""
    plan = _plans.get(key) if key is not None else None
    if plan is not None:
        return plan, False
    plan = build()
    if key is not None:
        if len(_plans) >= MAX_PLANS:
            _plans.clear()
        _plans[key] = plan
    return plan, True
