"""A launcher's work for one planned call, as data: the workspaces to allocate and the kernel
launches, each with every argument but its tensors.

Everything here follows from the plan (layout, config, dtypes, negative-view flags), so a plan
builds its ``Work`` once and every later call only allocates the workspaces and launches
(``Work.run``). The launches go through ``tritonml.runtime.trace.launch_prepared``: recorded,
dry-run or interpreted exactly as ``_trace.launch`` would, and on a GPU relaunched without
rebuilding their arguments.

Tensors are named, never numbered: a step's tensor arguments are ``Slot``s, a name and an index
(``Slot("x")``, ``Slot("carry", 1)``), and ``Work.run`` binds them to the tensors a call passes
by name (``run(x=x, out=out, initial=...)``) and to the workspaces the ``Work`` allocates (each
``Workspace`` has its slot). ``bind`` is the one place a slot becomes a tensor.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import trace as _trace
from .relaunch import PreparedLaunch
from . import resident as _resident


@dataclass(frozen=True)
class Slot:
    """A tensor argument of a planned launch: the ``index``-th of the tensors called ``name``
    (one a call passes to ``Work.run``, or one of the ``Work``'s workspaces)."""
    name: str
    index: int = 0


def slots(name: str, count: int) -> tuple:
    """The slots of ``count`` tensors called ``name``: one per component of a state."""
    return tuple(Slot(name, i) for i in range(count))


@dataclass(frozen=True)
class Workspace:
    slot: Slot
    numel: int
    dtype: torch.dtype
    resident: str | None = None   # a kind of ``_resident`` workspace, else uninitialized per call


@dataclass(frozen=True)
class Step:
    """One launch: ``kernel[grid](*tensors, *tail, **meta)`` with ``tensors`` bound from
    ``slots``, each a ``Slot`` or a tuple of them (a tuple of tensors: the kernels'
    per-component pointers)."""
    slots: tuple
    launch: PreparedLaunch


@dataclass(frozen=True)
class Work:
    workspaces: tuple
    steps: tuple

    def run(self, **tensors) -> None:
        """``tensors``: by name, a tensor or a tuple of tensors (the slots ``name`` 0, 1, ...)
        for every name the steps use but the workspaces'; None for a name they do not use. The
        workspaces go on the device of the first ``x``; a launcher passes the same names every
        call of a plan."""
        like = tensors["x"]
        like = like if isinstance(like, torch.Tensor) else like[0]
        spaces = {space.slot: allocate(space, like) for space in self.workspaces}
        try:
            for step in self.steps:
                _trace.launch_prepared(step.launch, [bind(arg, tensors, spaces)
                                                     for arg in step.slots])
        except BaseException:
            if any(space.resident for space in self.workspaces):
                _resident.drop(like)
            raise


def bind(arg, tensors: dict, spaces: dict):
    """The tensor of a slot: the call's tensor of that name (``tensors``: a tensor, or a tuple
    indexed by the slot's index), else the workspace of that slot (``spaces``); the tuple of
    tensors of a tuple of slots."""
    if type(arg) is tuple:
        return tuple(bind(slot, tensors, spaces) for slot in arg)
    given = tensors.get(arg.name)
    if given is None:
        return spaces[arg]
    if isinstance(given, torch.Tensor):
        if arg.index:
            raise IndexError(f"{arg}: one tensor was given for {arg.name!r}")
        return given
    return given[arg.index]


def allocate(space: Workspace, like: torch.Tensor) -> torch.Tensor:
    if space.resident:
        return _resident.take(space.resident, space.numel, space.dtype, like)
    return torch.empty(space.numel, dtype=space.dtype, device=like.device)


def step(kernel, grid, slots, tail, meta) -> Step:
    return Step(tuple(slots), PreparedLaunch(kernel, grid, tail, meta))
