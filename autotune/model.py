"""A memory-bound time model: seconds from bytes moved, programs per launch and a device's facts.

    modeled_seconds = sum over launches of  bytes / (bandwidth * min(1, programs / sms)) + overhead
    ideal_seconds   = ideal_bytes / bandwidth + overhead           (one launch, every SM busy)

``bandwidth`` is the device's measured copy bandwidth and ``overhead`` its per-launch cost
(``devices.Device``). A launch with fewer programs than SMs gets that fraction of the bandwidth: an
idle SM's share of memory bandwidth is lost. That is all the model says. It does not model compute,
latency within a program, caches, the look-back's waiting on predecessors, or programs that do
unequal work; it is for comparing the memory traffic and launch shapes of configs, not a prediction
of measured time.
"""
from __future__ import annotations

from typing import Iterable, Tuple

from .devices import Device

# (bytes moved, programs): bytes as the GPU moves them (whole 32-byte sectors), counted by the caller.
Launch = Tuple[float, int]


def launch_seconds(device: Device, bytes_moved: float, programs: int) -> float:
    """One launch's modeled seconds."""
    if bytes_moved < 0:
        raise ValueError(f"bytes_moved: expected >= 0, got {bytes_moved}")
    if programs < 1:
        raise ValueError(f"programs: expected >= 1, got {programs}")
    busy = min(1.0, programs / device.sms)
    return bytes_moved / (device.copy_bandwidth_bytes_per_s * busy) + device.launch_overhead_s


def modeled_seconds(device: Device, launches: Iterable[Launch]) -> float:
    """Modeled seconds of ``launches``, each (bytes moved, programs), run one after another."""
    return sum(launch_seconds(device, bytes_moved, programs) for bytes_moved, programs in launches)


def ideal_seconds(device: Device, ideal_bytes: float) -> float:
    """The model's floor: ``ideal_bytes`` (input read once + output written once) in one launch at
    full bandwidth."""
    return launch_seconds(device, ideal_bytes, device.sms)
