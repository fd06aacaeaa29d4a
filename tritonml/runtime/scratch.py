"""Scratch tensors for timing configs (``tritonml_autotune.select`` times candidates on a GPU).

A candidate is timed on tensors of the call's shape, strides and dtype, never on the caller's
own: ``out`` may be ``x`` (in place), and a timing loop would overwrite it many times. The
scratch input holds random values (timings on zeros can flatter a kernel), allocated once per
planned call and shared by every candidate.
"""
from __future__ import annotations

import torch

from . import trace as _trace
from ..core.dtypes import is_float


def can_time(x: torch.Tensor) -> bool:
    """Whether candidates can be timed for a call on ``x``: a real CUDA tensor, with no trace
    (torch.compile, export, fake tensors) and no CUDA graph capture in progress, where a timing
    loop would be traced or captured instead of run."""
    return x.device.type == "cuda" and _trace.runs_eagerly(x)


def scratch_input(shape, strides, dtype: torch.dtype, device) -> torch.Tensor:
    t = torch.empty_strided(tuple(shape), tuple(strides), dtype=dtype, device=device)
    if is_float(dtype):
        return t.normal_()
    return t.random_(0, 100)


def runner_factory(make_tensors, launch):
    """``make_runner`` for ``select``: ``make_tensors()`` allocates the scratch tensors on first
    use; ``launch(tensors, config)`` runs the op with ``config`` on them."""
    tensors = []

    def make_runner(config):
        if not tensors:
            tensors.append(make_tensors())
        return lambda: launch(tensors[0], config)
    return make_runner
