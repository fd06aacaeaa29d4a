"""A launcher's work for one planned call, as data: the workspaces to allocate and the kernel
launches, each with every argument but its tensors.

Everything here follows from the plan (layout, config, dtypes, negative-view flags), so a plan
builds its ``Work`` once and every later call only allocates the workspaces and launches
(``Work.run``). The launches go through ``tritonml.runtime.trace.launch_prepared``: recorded,
dry-run or interpreted exactly as ``_trace.launch`` would, and on a GPU relaunched without
rebuilding their arguments.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import trace as _trace
from .relaunch import PreparedLaunch
from . import resident as _resident

X, OUT = 0, 1   # tensor slots: x, out, the extra inputs ``Work.run`` is given, then the workspaces


@dataclass(frozen=True)
class Workspace:
    numel: int
    dtype: torch.dtype
    resident: str | None = None   # a kind of ``_resident`` workspace, else uninitialized per call


@dataclass(frozen=True)
class Step:
    """One launch: ``kernel[grid](*tensors, *tail, **meta)`` with ``tensors`` taken from slots (a
    tuple of slots passes a tuple of tensors: the scan kernels' per-component pointers)."""
    slots: tuple
    launch: PreparedLaunch


@dataclass(frozen=True)
class Work:
    workspaces: tuple
    steps: tuple

    def run(self, x: torch.Tensor, out: torch.Tensor, extra: tuple = ()) -> None:
        """``extra``: further input tensors (a scan's initial), in slots 2, 3, ... before the
        workspaces; a launcher passes the same number every call of a plan."""
        run_steps(self.steps, [x, out, *extra], self.workspaces, x)


def run_steps(steps, tensors: list, workspaces, like: torch.Tensor) -> None:
    """Allocate ``workspaces`` (on ``like``'s device) after ``tensors`` and launch ``steps``."""
    tensors = [*tensors, *(allocate(space, like) for space in workspaces)]
    resident = any(space.resident for space in workspaces)
    try:
        for step in steps:
            _trace.launch_prepared(step.launch, [
                tensors[slot] if isinstance(slot, int) else tuple(tensors[s] for s in slot)
                for slot in step.slots])
    except BaseException:
        if resident:
            _resident.drop(like)
        raise


def allocate(space: Workspace, like: torch.Tensor) -> torch.Tensor:
    if space.resident:
        return _resident.take(space.resident, space.numel, space.dtype, like)
    return torch.empty(space.numel, dtype=space.dtype, device=like.device)


def step(kernel, grid, slots, tail, meta) -> Step:
    return Step(tuple(slots), PreparedLaunch(kernel, grid, tail, meta))
