"""Choose configs as for a named GPU: ``with tritonml.tuning.target("H100"): ...``.

Inside the block (or with ``TRITONML_TARGET=H100`` in the environment) tritonml's launchers pick
their regime and tile as the heuristics would on that GPU, whatever device the tensors are on; the
kernels still run where the tensors are. On CPU tensors, Triton's interpreter then runs the launches
an H100 would, so their configs, grids and bytes moved can be checked without a GPU.

The block is per thread and nests (the innermost wins; ``target(None)`` turns a target off inside
it). It overrides the environment variable, which is read at every config choice. An unknown name
raises ValueError listing the known targets (``targets()``). See docs/tuning.md.
"""
from __future__ import annotations

from contextlib import contextmanager

from tritonml_autotune import devices
from tritonml_autotune.devices import TARGET_ENV, Device

__all__ = ["Device", "TARGET_ENV", "current", "device", "target", "targets"]


@contextmanager
def target(name):
    """Choose configs as for the GPU ``name`` ("H100", "A100"; any case) in this thread while the
    block runs; None chooses for the tensors' own device. Yields the ``Device`` (or None)."""
    chosen = None if name is None else devices.lookup(name, "name")
    with devices.targeting(chosen):
        yield chosen


def current() -> Device | None:
    """The target configs are chosen for in this thread now, or None (the tensors' device)."""
    return devices.active()


def device(name: str) -> Device:
    """The facts tritonml holds for the GPU ``name``."""
    return devices.lookup(name, "name")


def targets() -> tuple:
    """The known target names."""
    return tuple(sorted(devices.DEVICES))
