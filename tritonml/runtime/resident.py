"""Resident workspaces: zeroed once, kept between calls, and left by every kernel that uses them in
a state the next launch can start from, so a launch needs no memset launch before it.

Two kernels start from a known workspace state:

- the one-launch split reduction (tritonml/kernels/reduce.py, FOLD_LAST): one arrival counter per
  chain, 0 at the start; the last program to arrive folds the partial states and puts it back to 0.
- the look-back kernels (tritonml/kernels/lookback.py): a ticket word and one status word per tile. The
  ticket word holds an epoch beside the ticket count; the program that draws the last ticket
  advances the epoch and clears the count, and status words are tagged with the epoch that wrote
  them, so an earlier launch's words never read as published. Nothing needs clearing.

One workspace per (kind, device, stream): launches on one stream run one after another, so they
never share a workspace at the same time; another stream gets its own. A workspace grows (a new
zeroed one) when a launch needs more, and is replaced after ``MAX_USES`` launches, before the
look-back's epoch could outgrow its int32 status words and wrap onto a stale one.

Where a launch is traced or captured instead of run (torch.compile, export, fake tensors, CUDA graph
capture, any torch dispatch mode but one that declares ``observes_only``), its graph must not hold
a tensor that outlives it and changes between replays: those launches get a fresh zeroed workspace
(one memset). A launch that raises drops the
workspace of its kind, device and stream (an interrupted kernel may have left it dirty).
"""
from __future__ import annotations

import threading

import torch

from ..core import torch_compat as _torch_compat
from . import caches as _caches, trace as _trace

ARRIVALS = "arrivals"   # int32, one per chain of a one-launch split reduction
LOOKBACK = "lookback"   # int32: the int64 ticket word, then one status word per tile

# The look-back's epoch advances once a launch; 4 x epoch + state must fit an int32 status word.
MAX_USES = 1 << 28

_lock = threading.Lock()
# (kind, device, stream) -> [tensor, uses]
_workspaces: dict = _caches.register("resident.workspaces", {}, lock=_lock)


def _stream_key(device: torch.device):
    if device.type == "cuda":
        return torch.cuda.current_stream(device).cuda_stream
    return None


def can_keep(like: torch.Tensor) -> bool:
    """Whether a launch for ``like`` runs now, eagerly (not traced, not captured): only then may a
    workspace outlive the call."""
    return like.device.type != "meta" and _trace.runs_eagerly(like, observers=True)


def take(kind: str, numel: int, dtype: torch.dtype, like: torch.Tensor) -> torch.Tensor:
    """A workspace of at least ``numel`` elements of ``dtype`` on ``like``'s device, in the state
    its kernel leaves it (zeroed when new)."""
    if not can_keep(like):
        return torch.zeros(numel, dtype=dtype, device=like.device)
    key = (kind, like.device, _stream_key(like.device))
    with _lock:
        held = _workspaces.get(key)
        if held is None or held[0].numel() < numel or held[0].dtype != dtype \
                or held[1] >= MAX_USES:
            size = max(numel, 2 * held[0].numel() if held is not None else 0, 64)
            # A watching mode (bench's counter) is not the call's: it must not see this memset.
            with _torch_compat.disable_current_modes():
                fresh = torch.zeros(size, dtype=dtype, device=like.device)
            held = _workspaces[key] = [fresh, 0]
        held[1] += 1
        return held[0]


def drop(like: torch.Tensor) -> None:
    """Forget the workspaces of ``like``'s device and current stream (after a failed launch)."""
    stream = _stream_key(like.device)
    with _lock:
        for key in [k for k in _workspaces if k[1] == like.device and k[2] == stream]:
            del _workspaces[key]
