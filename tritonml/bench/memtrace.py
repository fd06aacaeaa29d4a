"""Count the global-memory bytes tritonml's kernels move, by instrumenting Triton's interpreter.

One job: while ``trace_memory()`` is active, every load, store and atomic that an interpreted kernel
performs is counted, lane by lane: only mask-true lanes, each counted at its element size. Atomics
are counted apart from plain loads and stores (a GPU performs them in L2, and they are the look-back
regime's synchronization, not data). Torch work that a launcher does around its kernels (a zeroed
workspace, a copy) is counted too, from torch's dispatcher, as the launches it would be on a GPU.

The interpreter reports each memory operation and each kernel launch through
``tritonml.core.triton_compat.interpreter_hooks`` (Triton has no public hook for either; that
package keeps the private details and the Triton versions they were checked against). Launches
split the bytes per kernel, and torch operations that the interpreter itself performs to stage
arguments are not counted.

Independent of tritonml's internals except those hooks and ``tritonml.runtime.trace.record()``,
whose launch record is kept (``MemTrace.recorded``) to cross-check the launches the interpreter ran
(``MemTrace.unrecorded_kernels``).

Usage::

    with trace_memory(regions={"input": x, "output": out}) as trace:
        tritonml.cumulative_sum(x, 1, out=out)
    trace.total_bytes, trace.launches, trace.by_region("input")
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np
import torch

# first: chooses interpreted Triton before any kernel is defined
from ..core import backend  # noqa: F401
from ..runtime import trace as _trace
from ..core import triton_compat as _triton_compat
from ..core.checks import byte_span

import triton
from ..core.torch_compat import TorchDispatchMode

LOAD, STORE, ATOMIC = _triton_compat.LOAD, _triton_compat.STORE, _triton_compat.ATOMIC
OTHER_REGION = "other"  # bytes outside every named region: workspaces

# Torch operations that only allocate, alias or describe memory: no traffic, no launch.
_NO_TRAFFIC_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "set_",
    "_local_scalar_dense", "lift_fresh", "detach", "alias", "resize_", "is_nonzero",
}
# Torch operations that fill their output with a constant: one memset launch writing the output.
_FILL_OPS = {
    "zeros", "zero_", "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full",
    "full_like", "new_full", "fill_", "fill",
}
# Torch operations that copy a tensor: read the source, write the destination.
_COPY_OPS = {"copy_", "clone", "_to_copy", "contiguous", "copy"}


@dataclass
class KernelLaunch:
    """One kernel launch as the interpreter ran it."""
    name: str
    grid: tuple
    load_bytes: int = 0
    store_bytes: int = 0
    atomic_ops: int = 0     # mask-true lanes of atomic operations (each a read-modify-write)
    atomic_bytes: int = 0   # those lanes times their element size
    # region name -> {"load"/"store"/"atomic": bytes}
    regions: Dict[str, Dict[str, int]] = field(default_factory=dict)
    # Loads of named-region bytes this launch had already loaded (needs track_distinct): the
    # chunked scan's second read of its chunk, which a GPU serves from L2 (docs/scan.md).
    reread_bytes: int = 0
    _loads: list = field(default_factory=list, repr=False)   # (elem bytes, addresses) meanwhile

    @property
    def bytes(self) -> int:
        return self.load_bytes + self.store_bytes + self.atomic_bytes

    @property
    def first_touch_bytes(self) -> int:
        """``bytes`` without the re-reads: what the launch moves when each re-read is a cache
        hit."""
        return self.bytes - self.reread_bytes

    def _close(self) -> None:
        groups: Dict[int, list] = {}
        for size, addresses in self._loads:
            groups.setdefault(size, []).append(addresses)
        self.reread_bytes = sum(
            size * (sum(a.size for a in chunks) - len(np.unique(np.concatenate(chunks))))
            for size, chunks in groups.items())
        self._loads = []


@dataclass
class TorchWork:
    """A torch operation run outside any kernel (by a launcher), counted as one GPU launch."""
    op: str
    kind: str          # "memset" (a fill), "copy", or "other" (counted conservatively: in + out)
    bytes: int


def _kernel_total(name: str, doc: str) -> property:
    """A read-only total of the attribute ``name`` over a trace's kernel launches."""
    return property(lambda trace: sum(getattr(k, name) for k in trace.kernels), doc=doc)


@dataclass
class MemTrace:
    regions: Dict[str, tuple]                      # name -> (first byte, end byte)
    track_distinct: bool = True
    kernels: List[KernelLaunch] = field(default_factory=list)
    torch_work: List[TorchWork] = field(default_factory=list)
    # tritonml.runtime.trace launches (kernel, grid, args)
    recorded: list = field(default_factory=list)
    _addresses: Dict[tuple, list] = field(default_factory=dict)  # (region, kind) -> [addr arrays]
    _current: Optional[KernelLaunch] = None

    # --- totals ---
    kernel_bytes = _kernel_total("bytes", "Bytes the kernels loaded, stored and touched "
                                 "atomically.")
    reread_bytes = _kernel_total("reread_bytes", """Loads of bytes a launch had already loaded from
        the same named region (each launch apart; see ``KernelLaunch.reread_bytes``).""")
    atomic_ops = _kernel_total("atomic_ops", "Mask-true lanes of the kernels' atomic operations.")

    @property
    def torch_bytes(self) -> int:
        return sum(w.bytes for w in self.torch_work)

    @property
    def total_bytes(self) -> int:
        """Every byte the op moved: kernel loads, stores and atomics plus torch-side work."""
        return self.kernel_bytes + self.torch_bytes

    @property
    def launches(self) -> int:
        """GPU launches the op would make: kernels plus torch-side memsets and copies."""
        return len(self.kernels) + len(self.torch_work)

    @property
    def unrecorded_kernels(self) -> int:
        """Kernels the interpreter ran that tritonml.runtime.trace did not record (0 for tritonml ops:
        every launch goes through ``_trace.launch``; more means a launch bypassed it)."""
        return len(self.kernels) - len(self.recorded)

    def by_region(self, region: str) -> Dict[str, int]:
        """Bytes loaded/stored/atomically touched in ``region`` over all kernels."""
        totals = {LOAD: 0, STORE: 0, ATOMIC: 0}
        for k in self.kernels:
            for kind, n in k.regions.get(region, {}).items():
                totals[kind] += n
        return totals

    def distinct_bytes(self, region: str, kind: str) -> int:
        """Bytes of ``region`` touched at least once by ``kind`` accesses (needs track_distinct).

        ``by_region(r)[kind] - distinct_bytes(r, kind)`` is the traffic spent re-reading (or
        re-writing) bytes already moved: zero for an op that reads its input once.
        """
        if not self.track_distinct:
            raise ValueError("distinct_bytes needs trace_memory(track_distinct=True)")
        total = 0
        for size, chunks in self._grouped(region, kind).items():
            total += size * len(np.unique(np.concatenate(chunks)))
        return total

    def operations(self, region: str, kind: str) -> int:
        """Memory operations (one per ``tl.load``/``tl.store``/atomic a program executes, however
        many lanes) that touched ``region`` (needs track_distinct): a kernel's dependent round
        trips are at most these."""
        if not self.track_distinct:
            raise ValueError("operations needs trace_memory(track_distinct=True)")
        return len(self._addresses.get((region, kind), []))

    def _grouped(self, region, kind):
        groups: Dict[int, list] = {}
        for size, addresses in self._addresses.get((region, kind), []):
            groups.setdefault(size, []).append(addresses)
        return groups

    def summary(self) -> dict:
        return {
            "launches": self.launches,
            "kernels": [{"name": k.name, "grid": list(k.grid), "load_bytes": k.load_bytes,
                         "store_bytes": k.store_bytes, "atomic_ops": k.atomic_ops,
                         "atomic_bytes": k.atomic_bytes, "regions": k.regions} for k in self.kernels],
            "torch_work": [{"op": w.op, "kind": w.kind, "bytes": w.bytes} for w in self.torch_work],
            "kernel_bytes": self.kernel_bytes,
            "torch_bytes": self.torch_bytes,
            "total_bytes": self.total_bytes,
        }

    # --- counting (called from the patched interpreter) ---
    def _count(self, kind: str, addresses: np.ndarray, mask: Optional[np.ndarray], elem_bytes: int):
        kernel = self._current
        if kernel is None:  # a memory op outside a launch (cannot happen in the interpreter)
            kernel = KernelLaunch("<outside a launch>", ())
            self.kernels.append(kernel)
            self._current = kernel
        addresses = np.asarray(addresses)
        if mask is not None:
            mask = np.broadcast_to(np.asarray(mask, dtype=bool), addresses.shape)
            addresses = addresses[mask]
        addresses = addresses.reshape(-1).astype(np.uint64, copy=False)
        lanes = int(addresses.size)
        if lanes == 0:
            return
        if kind == LOAD:
            kernel.load_bytes += lanes * elem_bytes
        elif kind == STORE:
            kernel.store_bytes += lanes * elem_bytes
        else:
            kernel.atomic_ops += lanes
            kernel.atomic_bytes += lanes * elem_bytes
        unassigned = np.ones(lanes, dtype=bool)
        for name, (start, end) in self.regions.items():
            inside = unassigned & (addresses >= start) & (addresses < end)
            n = int(np.count_nonzero(inside))
            if n:
                unassigned &= ~inside
                self._add_region(kernel, name, kind, addresses[inside], n, elem_bytes)
        n = int(np.count_nonzero(unassigned))
        if n:
            self._add_region(kernel, OTHER_REGION, kind, addresses[unassigned], n, elem_bytes)

    def _add_region(self, kernel, name, kind, addresses, lanes, elem_bytes):
        counts = kernel.regions.setdefault(name, {})
        counts[kind] = counts.get(kind, 0) + lanes * elem_bytes
        if self.track_distinct:
            kept = (elem_bytes, addresses.copy())   # one copy serves both (never written)
            self._addresses.setdefault((name, kind), []).append(kept)
            if kind == LOAD and name != OTHER_REGION:
                kernel._loads.append(kept)


# ---------------------------------------------------------------------------------------------
# Patching
# ---------------------------------------------------------------------------------------------
_active: List[MemTrace] = []
_state = {"in_kernel": 0}


def _on_access(kind, addresses, mask, elem_bytes):
    for trace in _active:
        trace._count(kind, addresses, mask, elem_bytes)


@contextlib.contextmanager
def _on_launch(name, grid):
    grid = grid if isinstance(grid, tuple) else ("<callable>",)
    for trace in _active:
        launch = KernelLaunch(name, grid)
        trace.kernels.append(launch)
        trace._current = launch
    _state["in_kernel"] += 1
    try:
        yield
    finally:
        _state["in_kernel"] -= 1
        for trace in _active:
            if trace._current is not None:
                trace._current._close()
            trace._current = None


def _nbytes(t) -> int:
    return t.numel() * t.element_size() if isinstance(t, torch.Tensor) else 0


class _TorchWorkCounter(TorchDispatchMode):
    """Counts torch operations run outside interpreted kernels (i.e. by the launcher)."""

    # It only watches: launches under it run eagerly, and may keep resident workspaces
    # (tritonml/runtime/resident.py), whose one-time zeroing no call's traffic includes.
    observes_only = True

    def __init__(self, trace: MemTrace):
        super().__init__()
        self.trace = trace

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        result = func(*args, **kwargs)
        if _state["in_kernel"]:  # the interpreter staging tensors for a kernel: not the op's work
            return result
        name = func.overloadpacket.__name__
        if name in _NO_TRAFFIC_OPS or func.is_view:
            return result
        outputs = result if isinstance(result, (tuple, list)) else (result,)
        out_bytes = sum(_nbytes(t) for t in outputs)
        in_bytes = sum(_nbytes(a) for a in list(args) + list(kwargs.values()))
        if name in _FILL_OPS:
            kind, moved = "memset", out_bytes
        elif name in _COPY_OPS:
            # copy_(dst, src): reads src, writes dst; clone/_to_copy: reads the input, writes out.
            kind, moved = "copy", (_nbytes(args[1]) + _nbytes(args[0]) if name == "copy_"
                                   else in_bytes + out_bytes)
        else:
            kind, moved = "other", in_bytes + out_bytes
        self.trace.torch_work.append(TorchWork(str(func), kind, moved))
        return result


@contextlib.contextmanager
def trace_memory(regions: Optional[Dict[str, torch.Tensor]] = None, track_distinct: bool = True):
    """Count the memory traffic of everything run inside the block (CPU tensors, interpreter).

    regions: named tensors (e.g. ``{"input": x, "output": out}``) whose traffic is reported apart
        (``MemTrace.by_region``); traffic outside them is reported under ``"other"``.
    track_distinct: keep the addresses touched, so re-reads can be counted (``distinct_bytes``).
    """
    if not triton.knobs.runtime.interpret:
        raise RuntimeError("tritonml.bench.memtrace counts bytes in Triton's interpreter; this process "
                           "runs compiled Triton (unset TRITON_INTERPRET or set it to 1)")
    spans = {name: byte_span(t) for name, t in (regions or {}).items()}
    trace = MemTrace(spans, track_distinct)
    with contextlib.ExitStack() as stack:
        recorder = stack.enter_context(_trace.record())
        if not _active:
            stack.enter_context(_triton_compat.interpreter_hooks(_on_access, _on_launch))
        _active.append(trace)
        stack.callback(_active.remove, trace)
        stack.enter_context(_TorchWorkCounter(trace))
        yield trace
        trace.recorded = list(recorder.launches)
