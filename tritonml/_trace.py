"""Every kernel launch goes through ``launch``, so launches can be counted, recorded or dry-run.

``record()`` collects each launch (kernel, grid, arguments, meta-parameters) while it is active;
benchmarks count launches with it, and the compile test turns the recorded launches into GPU
compilations (``benchmarks/gpu_compile.py``) without a GPU. ``record(execute=False)`` skips the
kernels themselves, so specializations can be enumerated cheaply.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

_recorders: list["Recorder"] = []


@dataclass
class Launch:
    kernel: object
    grid: tuple
    args: tuple
    meta: dict

    @property
    def name(self) -> str:
        return getattr(self.kernel, "__name__", None) or self.kernel.fn.__name__


@dataclass
class Recorder:
    execute: bool = True
    launches: list = field(default_factory=list)


@contextlib.contextmanager
def record(execute: bool = True):
    rec = Recorder(execute)
    _recorders.append(rec)
    try:
        yield rec
    finally:
        _recorders.remove(rec)


def launch(kernel, grid, *args, **meta) -> None:
    execute = True
    for rec in _recorders:
        rec.launches.append(Launch(kernel, tuple(grid), args, dict(meta)))
        execute = execute and rec.execute
    if execute:
        kernel[tuple(grid)](*args, **meta)
