"""Every kernel launch goes through ``launch``, so launches can be counted, recorded or dry-run.

``record()`` collects each launch (kernel, grid, arguments, meta-parameters) while it is active;
benchmarks count launches with it, and the compile test turns the recorded launches into GPU
compilations (``tritonml/bench/gpu_compile.py``) without a GPU. ``record(execute=False)`` skips the
kernels themselves, so specializations can be enumerated cheaply; ``dry_run()`` tells the code
that reads back what a kernel wrote (an index's facts) that nothing was written.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Tuple

import numpy
import torch

from ..core import backend as _backend, torch_compat as _torch_compat, triton_compat as _triton_compat
from . import relaunch as _relaunch

__all__ = ["record", "Recorder", "Launch", "dry_run"]

# Recorders are per thread: a benchmark counting its launches does not see another thread's.
_local = threading.local()


def _active() -> List["Recorder"]:
    if not hasattr(_local, "recorders"):
        _local.recorders = []
    return _local.recorders


@dataclass
class Launch:
    """One kernel launch, as ``record`` collects it.

    Attributes:
        kernel: The ``@triton.jit`` kernel launched.
        grid: The launch grid (programs along each grid axis).
        args: The kernel's positional arguments (tensors, sizes, strides, ...).
        meta: The keyword arguments: meta-parameters (tile sizes, ``num_warps``, ...).
    """
    kernel: Any
    grid: Tuple[int, ...]
    args: Tuple[Any, ...]
    meta: Dict[str, Any]

    @property
    def name(self) -> str:
        """The kernel's function name (``"scan_tiled_kernel"``)."""
        return getattr(self.kernel, "__name__", None) or self.kernel.fn.__name__


@dataclass
class Recorder:
    """What a ``record`` block yields.

    Attributes:
        execute: Whether the recorded launches also run (False: a dry run).
        launches: Every launch made in this thread while the block ran, in order.
    """
    execute: bool = True
    launches: List[Launch] = field(default_factory=list)


@contextlib.contextmanager
def record(execute: bool = True) -> Iterator[Recorder]:
    """Collect each kernel launch of this thread (kernel, grid, arguments, meta-parameters) while
    the block runs.

    Benchmarks count launches with it, and the compile test turns the recorded launches into GPU
    compilations without a GPU. Recorders are per thread and nest (each active one records).

    Args:
        execute: False skips the kernels themselves (a dry run: outputs are not written), so
            specializations can be enumerated cheaply. Where the host reads back what a kernel
            wrote (the facts of an index that scatter, segment_coo, index_add, bincount and
            their kin check: least and greatest value, descents, a sorted index's group
            boundaries), a dry run computes those facts with torch from the same inputs
            instead (``dry_run()``), so it takes the path a run would take, launches what it
            would launch and raises the errors it would raise; only the results are unwritten.

    Yields:
        The ``Recorder``; its ``launches`` fill as the block runs.

    Example:
        >>> import torch, tritonml
        >>> from tritonml.runtime import trace
        >>> with trace.record() as recorder:
        ...     y = tritonml.cumulative_sum(torch.ones(4), 0)
        >>> y
        tensor([1., 2., 3., 4.])
        >>> [(launch.name, launch.grid) for launch in recorder.launches]
        [('scan_tiled_kernel', (1,))]
    """
    rec = Recorder(execute)
    _active().append(rec)
    try:
        yield rec
    finally:
        _active().remove(rec)


def dry_run() -> bool:
    """Whether launches made now in this thread are skipped: some active ``record`` block has
    ``execute=False``. Code that reads back what a kernel wrote asks, and computes it otherwise
    (``record``).

    Example:
        >>> from tritonml.runtime import trace
        >>> with trace.record(execute=False):
        ...     trace.dry_run()
        True
        >>> trace.dry_run()
        False
    """
    return any(not rec.execute for rec in _active())


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


def launch(kernel: Any, grid: Any, *args: Any, **meta: Any) -> None:
    """Launch ``kernel[grid](*args, **meta)``, recorded by every active ``record`` block (and not
    run inside a dry one)."""
    for rec in _active():
        rec.launches.append(Launch(kernel, tuple(grid), args, dict(meta)))
    if dry_run():
        return
    if _backend.INTERPRET:
        # numpy warns on results the operators define (NaN propagation, overflow to inf, log(0),
        # integer wrap-around); a GPU does not, so neither does an interpreted launch.
        with _INTERPRETER_LOCK, numpy.errstate(all="ignore"), _triton_compat.interpreting():
            kernel[tuple(grid)](*args, **meta)
    elif (torch.compiler.is_compiling() or _torch_compat.current_dispatch_mode() is not None
          or not _relaunch.launch_compiled(kernel, tuple(grid), args, meta)):
        # While torch traces (torch.compile, export, make_fx: a tracing mode, or fake tensors),
        # wrap_triton records the launch into the graph. Plain eager launches skip it: its
        # eager path costs more host time than the launch itself.
        torch.library.wrap_triton(kernel)[tuple(grid)](
            *args, **_relaunch.spill_free_meta(kernel, tuple(grid), args, meta))


def launch_prepared(prepared: Any, tensors: Any) -> None:
    """``launch(prepared.kernel, prepared.grid, *tensors, *prepared.tail, **prepared.meta)``
    (``relaunch.PreparedLaunch``): the same recording, dry runs and interpreter; on a GPU,
    outside any trace, a relaunch that reuses the prepared arguments."""
    if (_active() or _backend.INTERPRET or torch.compiler.is_compiling()
            or _torch_compat.current_dispatch_mode() is not None or not prepared.launch(tensors)):
        launch(prepared.kernel, prepared.grid, *tensors, *prepared.tail, **prepared.meta)
