"""A launcher's work for one planned call, as data: the workspaces to allocate and the kernel
launches, each with every argument but its tensors.

Everything here follows from the plan (layout, config, dtypes, negative-view flags), so a plan
builds its ``Work`` once and every later call only allocates the workspaces and launches
(``Work.run``). The launches go through ``tritonml._trace.launch_prepared``: recorded, dry-run or
interpreted exactly as ``_trace.launch`` would, and on a GPU relaunched without rebuilding their
arguments.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from .. import _trace
from .._triton_compat import PreparedLaunch

X, OUT = 0, 1   # tensor slots: x, out, the extra inputs ``Work.run`` is given, then the workspaces


@dataclass(frozen=True)
class Workspace:
    numel: int
    dtype: torch.dtype
    zeroed: bool = False   # zero-filled (a memset) rather than uninitialized


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
        tensors = [x, out, *extra]
        for space in self.workspaces:
            make = torch.zeros if space.zeroed else torch.empty
            tensors.append(make(space.numel, dtype=space.dtype, device=x.device))
        for step in self.steps:
            _trace.launch_prepared(step.launch, [
                tensors[slot] if isinstance(slot, int) else tuple(tensors[s] for s in slot)
                for slot in step.slots])


def step(kernel, grid, slots, tail, meta) -> Step:
    return Step(tuple(slots), PreparedLaunch(kernel, grid, tail, meta))
