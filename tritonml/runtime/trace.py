"""Every kernel launch goes through ``launch``, so launches can be counted, recorded or dry-run.

``record()`` collects each launch (kernel, grid, arguments, meta-parameters) while it is active;
benchmarks count launches with it, and the compile test turns the recorded launches into GPU
compilations (``tritonml/bench/gpu_compile.py``) without a GPU. ``record(execute=False)`` skips the
kernels themselves, so specializations can be enumerated cheaply.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field

import numpy
import torch

from ..core import backend as _backend, torch_compat as _torch_compat
from . import relaunch as _relaunch

# Recorders are per thread: a benchmark counting its launches does not see another thread's.
_local = threading.local()


def _active() -> list:
    if not hasattr(_local, "recorders"):
        _local.recorders = []
    return _local.recorders


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
    _active().append(rec)
    try:
        yield rec
    finally:
        _active().remove(rec)


# Triton's interpreter swaps ``triton.language``'s functions for numpy-backed ones, process-wide,
# for the duration of each launch; a second thread launching meanwhile would find (or restore) the
# wrong ones. Interpreted launches therefore take turns. Compiled launches take no lock: they only
# enqueue work on a CUDA stream.
_INTERPRETER_LOCK = threading.RLock()


def runs_eagerly(t: torch.Tensor, *, observers: bool = False) -> bool:
    """Whether work on ``t`` runs now, as called: a plain tensor, no torch.compile trace, no torch
    dispatch mode (with ``observers``, a mode that declares ``observes_only`` is allowed: it only
    watches), and no CUDA graph capture in progress, where it would be traced or captured instead."""
    if type(t) is not torch.Tensor or torch.compiler.is_compiling():
        return False
    mode = _torch_compat.current_dispatch_mode()
    if mode is not None and not (observers and getattr(mode, "observes_only", False)):
        return False
    return not (t.device.type == "cuda" and torch.cuda.is_current_stream_capturing())


def launch(kernel, grid, *args, **meta) -> None:
    execute = True
    for rec in _active():
        rec.launches.append(Launch(kernel, tuple(grid), args, dict(meta)))
        execute = execute and rec.execute
    if not execute:
        return
    if _backend.INTERPRET:
        # numpy warns on results the operators define (NaN propagation, overflow to inf, log(0),
        # integer wrap-around); a GPU does not, so neither does an interpreted launch.
        with _INTERPRETER_LOCK, numpy.errstate(all="ignore"):
            kernel[tuple(grid)](*args, **meta)
    elif (torch.compiler.is_compiling() or _torch_compat.current_dispatch_mode() is not None
          or not _relaunch.launch_compiled(kernel, tuple(grid), args, meta)):
        # While torch traces (torch.compile, export, make_fx: a tracing mode, or fake tensors),
        # wrap_triton records the launch into the graph. Plain eager launches skip it: its
        # eager path costs more host time than the launch itself.
        torch.library.wrap_triton(kernel)[tuple(grid)](*args, **meta)


def launch_prepared(prepared, tensors) -> None:
    """``launch(prepared.kernel, prepared.grid, *tensors, *prepared.tail, **prepared.meta)``
    (``relaunch.PreparedLaunch``): the same recording, dry runs and interpreter; on a GPU,
    outside any trace, a relaunch that reuses the prepared arguments."""
    if (_active() or _backend.INTERPRET or torch.compiler.is_compiling()
            or _torch_compat.current_dispatch_mode() is not None or not prepared.launch(tensors)):
        launch(prepared.kernel, prepared.grid, *tensors, *prepared.tail, **prepared.meta)
