"""Facts about the GPUs the heuristics can choose configs for, as data, and the active target.

A *target* is the GPU configs are chosen for when it is not the one the tensors are on: with one
set (``targeting(device)``, or ``TRITONML_TARGET=H100`` in the environment), the heuristics choose
as for a CUDA device with that GPU's SM count, wherever the kernels then run (on CPU tensors,
Triton's interpreter runs what that GPU would). Without one they ask the tensors' device, as before.
``tritonml.tuning.target`` is the user-facing form of ``targeting``.

The active target is per thread: a ``targeting`` block changes nothing in other threads, and a new
thread starts with none set (only the environment variable applies there). Blocks nest; the
innermost wins, and ``targeting(None)`` turns a target off inside an outer one or the environment's.
The environment variable is read at every lookup (one ``os.environ.get``), so a change takes effect
at the next call; a ``targeting`` block overrides it.
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass

TARGET_ENV = "TRITONML_TARGET"

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True)
class Device:
    """One GPU's facts, as the heuristics and the time model (``model.py``) use them."""
    name: str
    arch: int                            # compute capability x 10: sm_90 is 90
    sms: int                             # streaming multiprocessors
    registers_per_sm: int                # 32-bit registers
    shared_memory_per_sm: int            # bytes
    max_threads_per_sm: int
    copy_bandwidth_bytes_per_s: float    # a large device-to-device copy, measured, not the spec
    launch_overhead_s: float             # seconds added by each kernel launch
    l2_bytes: int                        # the L2 cache, all partitions together
    l2_bandwidth_bytes_per_s: float      # reads that hit in L2, all SMs together: an assumption


# NVIDIA H100 SXM5 (sm_90): 132 SMs, 64K registers, 228 KiB shared memory and 2048 threads per SM
# (CUDA C++ Programming Guide, compute capability 9.0). 3.0e12 B/s is the bandwidth a large
# device-to-device copy reaches (the spec sheet's HBM3 figure is 3.35e12); 4 us per launch is an
# estimate of what each launch adds end to end (a few microseconds on either GPU), not a measurement.
# 50 MiB of L2 (NVIDIA H100 Tensor Core GPU Architecture whitepaper). The L2 bandwidth is an
# assumption, not measured here: about what public microbenchmarks report for reads that hit in
# L2 (Chips and Cheese, "Nvidia's H100: Funny L2, and Tons of Bandwidth", 2023, measured an H100
# PCIe with 114 SMs in the 5-6 TB/s range; the SXM5's 132 SMs may reach more).
H100 = Device(name="H100", arch=90, sms=132, registers_per_sm=65536, shared_memory_per_sm=228 * KiB,
              max_threads_per_sm=2048, copy_bandwidth_bytes_per_s=3.0e12, launch_overhead_s=4e-6,
              l2_bytes=50 * MiB, l2_bandwidth_bytes_per_s=5.5e12)

# NVIDIA A100 SXM4 80GB (sm_80): 108 SMs, 64K registers, 164 KiB shared memory and 2048 threads per
# SM (compute capability 8.0). 1.7e12 B/s is a typical measured copy bandwidth, not the 2.0e12 of
# the spec sheet. Launch overhead as for the H100. 40 MiB of L2 (NVIDIA A100 Tensor Core GPU
# Architecture whitepaper); its L2 bandwidth, like the H100's, an assumption of about what public
# microbenchmarks report (the same Chips and Cheese article tested an A100 SXM4 beside the H100).
A100 = Device(name="A100", arch=80, sms=108, registers_per_sm=65536, shared_memory_per_sm=164 * KiB,
              max_threads_per_sm=2048, copy_bandwidth_bytes_per_s=1.7e12, launch_overhead_s=4e-6,
              l2_bytes=40 * MiB, l2_bandwidth_bytes_per_s=4.0e12)

DEVICES = {device.name: device for device in (H100, A100)}

ARCHS = tuple(sorted({device.arch for device in DEVICES.values()}))
"""The GPU architectures tritonml is compiled and tuned for (80, 90): one per device above. The
compile tests, ``benchmarks/compile_facts.py`` and ``tritonml.bench.gpu_compile`` read it."""


def lookup(name: str, parameter: str = "name") -> Device:
    """The device called ``name`` (any case: "H100", "h100"). An unknown name raises ValueError
    naming ``parameter`` and the known devices."""
    if not isinstance(name, str):
        raise TypeError(f"{parameter}: expected a device name such as 'H100', "
                        f"got {type(name).__name__}")
    device = DEVICES.get(name.strip().upper())
    if device is None:
        raise ValueError(f"{parameter}: unknown target {name!r}; known targets: "
                         f"{', '.join(sorted(DEVICES))}")
    return device


# -- the active target ------------------------------------------------------------------------

class _ThreadState(threading.local):
    def __init__(self):
        # Innermost last; each entry a Device or None (None: no target inside this block).
        self.stack = []


_state = _ThreadState()


@contextmanager
def targeting(device):
    """Choose configs as for ``device`` (a ``Device``, a name, or None for "no target") in this
    thread while the block runs."""
    if device is not None and not isinstance(device, Device):
        device = lookup(device, "target")
    _state.stack.append(device)
    try:
        yield device
    finally:
        _state.stack.pop()


def active() -> Device | None:
    """The target configs are chosen for in this thread: the innermost ``targeting`` block's, else
    ``TRITONML_TARGET``'s (unset or empty: none), else None."""
    if _state.stack:
        return _state.stack[-1]
    name = os.environ.get(TARGET_ENV, "").strip()
    return lookup(name, TARGET_ENV) if name else None
