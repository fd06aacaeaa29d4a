"""The SPMD protocol every ``tritonml.distributed`` function runs, written once, and the group
collectives it runs on.

1. **Local step**: each rank checks its arguments and reads its shard once, giving its *state*
   (tensors of the same shapes on every rank: a scan's total, a partial reduction) or nothing
   to exchange; an error here is not raised yet.
2. **Metadata**: every rank's record (shape, dtype, axis, operation, local length, any local
   error) goes to every rank; a local error or a mismatch raises the same error on every rank,
   before any data moves.
3. **Exchange**: one ``all_gather`` of the states, ordered by shard position.
4. **Finish**: the caller folds the states it needs (a scan's carry, a reduction's result) and
   finishes locally.

``exchange`` runs steps 1-3; the caller gives it the local step and does step 4.
"""
from __future__ import annotations

import datetime
import pickle
from dataclasses import dataclass, field
from typing import Any, Callable, Final, List, Optional, Sequence

import torch
import torch.distributed as dist

from ..core import checks as _checks

# How long a rank waits for the others at the metadata exchange (the first collective of every
# call): a rank that never arrives (it crashed, or called something else) turns into an error
# here instead of a hang. Data collectives run under the process group's own timeout.
METADATA_TIMEOUT: Final[datetime.timedelta] = datetime.timedelta(seconds=120)
"""How long a rank waits for the others at the metadata exchange, the first collective of every
``tritonml.distributed`` call (120 seconds; a call's ``timeout=None`` means this): a rank that
never arrives (it crashed, or called something else) turns into a RuntimeError here instead of a
hang. Data collectives run under the process group's own timeout.

Example:
    >>> from tritonml.distributed import METADATA_TIMEOUT
    >>> METADATA_TIMEOUT.total_seconds()
    120.0
"""

_ERROR_TYPES = {cls.__name__: cls for cls in (TypeError, ValueError, NotImplementedError,
                                               RuntimeError, IndexError, OverflowError)}


# ---------------------------------------------------------------------------------------------
# The group and its collectives
# ---------------------------------------------------------------------------------------------
class _Group:
    """The calling rank's view of a process group: its rank, size, and the device collectives
    use (CUDA for NCCL, CPU for gloo)."""

    def __init__(self, group):
        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("group: torch.distributed is not initialized; call torch."
                               "distributed.init_process_group first (see docs/distributed.md)")
        rank = dist.get_rank(group)
        if rank < 0:
            raise ValueError(f"group: the calling process (global rank {dist.get_rank()}) is not "
                             "part of this process group; pass a group it belongs to, or None for "
                             "the default group")
        self.group, self.rank, self.size = group, rank, dist.get_world_size(group)
        backend = str(dist.get_backend(group)).lower()
        self.device = torch.device("cuda", torch.cuda.current_device()) if "nccl" in backend \
            else torch.device("cpu")


def _wait(work, timeout, what: str) -> None:
    try:
        if timeout is None:
            work.wait()
        else:
            work.wait(timeout)
    except RuntimeError as error:
        raise RuntimeError(f"group: {what} did not complete (timeout {timeout}): a rank of the "
                           f"group did not make the same tritonml.distributed call ({error})"
                           ) from error


def _all_gather_bytes(g: _Group, payload: bytes, timeout) -> List[bytes]:
    """Every rank's ``payload`` (any lengths), in group rank order: the lengths first, then the
    bytes padded to the longest."""
    size = torch.tensor([len(payload)], dtype=torch.int64, device=g.device)
    sizes = [torch.empty_like(size) for _ in range(g.size)]
    _wait(dist.all_gather(sizes, size, group=g.group, async_op=True), timeout,
          "the metadata exchange")
    lengths = [int(s.item()) for s in sizes]
    buffer = torch.zeros(max(lengths), dtype=torch.uint8)
    buffer[:len(payload)] = torch.frombuffer(bytearray(payload), dtype=torch.uint8)
    buffer = buffer.to(g.device)
    buffers = [torch.empty_like(buffer) for _ in range(g.size)]
    _wait(dist.all_gather(buffers, buffer, group=g.group, async_op=True), timeout,
          "the metadata exchange")
    return [b[:n].cpu().numpy().tobytes() for b, n in zip(buffers, lengths)]


def _all_gather_states(g: _Group, states: Sequence[torch.Tensor]) -> List[tuple]:
    """Every rank's ``states`` (tensors of the same shapes and dtypes on every rank, which the
    metadata exchange has checked), in group rank order. Sent as raw bytes, so every dtype
    travels (gloo has no unsigned 16-64 bit types) and values arrive bit for bit."""
    device = states[0].device
    flat = [s.detach().contiguous().reshape(-1).view(torch.uint8) for s in states]
    packed = torch.cat(flat).to(g.device)
    gathered = [torch.empty_like(packed) for _ in range(g.size)]
    dist.all_gather(gathered, packed, group=g.group)
    result = []
    for buffer in gathered:
        buffer, start, unpacked = buffer.to(device), 0, []
        for state, part in zip(states, flat):
            chunk = buffer[start:start + part.numel()]
            # a copy: the chunk may start off the alignment of its dtype
            unpacked.append(chunk.clone().view(state.dtype).reshape(state.shape))
            start += part.numel()
        result.append(tuple(unpacked))
    return result


def _describe(x) -> dict:
    if not isinstance(x, torch.Tensor):
        return {"dtype": _checks._type_name(x), "shape": None}
    return {"dtype": str(x.dtype).replace("torch.", ""), "shape": tuple(x.shape)}


def _agree(g: _Group, op: str, record: dict, error: Optional[BaseException],
           compare: Sequence[tuple], timeout) -> List[dict]:
    """Exchange ``record`` (plus the local error, if any) and return every rank's, ordered by
    shard position. Raises the same error on every rank when a rank failed locally or when the
    fields named in ``compare`` ((parameter, key, rule) triples) differ. Each record gets its
    ``group_rank``."""
    if error is not None:
        record = dict(record, error=(type(error).__name__, str(error)))
    records = [pickle.loads(b) for b in _all_gather_bytes(g, pickle.dumps(record), timeout)]
    for r, rec in enumerate(records):
        rec["group_rank"] = r
    failed = [(r, rec["error"]) for r, rec in enumerate(records) if rec.get("error")]
    if failed:
        rank, (kind, message) = failed[0]
        others = f" (ranks {[r for r, _ in failed]} failed)" if len(failed) > 1 else ""
        raised = _ERROR_TYPES.get(kind, RuntimeError)(f"{op}: rank {rank} of the group: "
                                                      f"{message}{others}")
        raise raised from error
    for parameter, key, rule in compare:
        values = [rec[key] for rec in records]
        if any(v != values[0] for v in values):
            listing = ", ".join(f"rank {r}: {v}" for r, v in enumerate(values))
            raise ValueError(f"{op}: {parameter}: {rule} must be the same on every rank of the "
                             f"group, got {listing}")
    positions = sorted(rec["position"] for rec in records)
    if positions != list(range(g.size)):  # pragma: no cover - mesh coordinates always are
        raise ValueError(f"{op}: shard positions {positions} are not 0..{g.size - 1}")
    return sorted(records, key=lambda rec: rec["position"])


def _ordered(records: List[dict], gathered: List[tuple]) -> List[tuple]:
    """The gathered states (group rank order) in shard position order, as ``records`` are."""
    return [gathered[rec["group_rank"]] for rec in records]


# ---------------------------------------------------------------------------------------------
# This rank's shard and what every rank compares
# ---------------------------------------------------------------------------------------------
def shard_record(x, axis) -> dict:
    """The metadata fields that describe a shard (dtype, shape, the shape outside the sharded
    ``axis``, the length along it, the rank), read from whatever the caller passed."""
    described = _describe(x)
    shape = described["shape"]
    if shape is not None and isinstance(axis, int) and -len(shape) <= axis < len(shape):
        a = axis % len(shape)
        described["outside_axis"] = shape[:a] + shape[a + 1:]
        described["length"] = shape[a]
        described["rank"] = len(shape)
    else:
        described["outside_axis"], described["length"], described["rank"] = shape, 0, None
    return described


def check_shard(x, name: str = "x") -> None:
    """``x`` can be a shard: a tensor with a sharded axis that autograd does not need."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor (this rank's shard) or a DTensor, got "
                        f"{_checks._type_name(x)}")
    if x.dim() == 0:
        raise ValueError(f"{name}: a shard needs at least one dimension (the sharded axis); got a "
                         "0-d tensor")
    if torch.is_grad_enabled() and x.requires_grad:
        # the carries come through all_gather, which autograd does not see: refuse rather than
        # return gradients that miss the other ranks' terms
        raise NotImplementedError(f"{name}: tritonml.distributed is not differentiable; x "
                                  "requires grad (call under torch.no_grad() or pass x.detach())")


# ---------------------------------------------------------------------------------------------
# The protocol
# ---------------------------------------------------------------------------------------------
@dataclass
class Shard:
    """The calling rank's shard: its group and its position among the shards (the group rank
    for a plain shard, the mesh coordinate for a DTensor's)."""
    group: _Group
    position: int

    @property
    def size(self) -> int:
        return self.group.size

    def starts(self, reverse: bool) -> bool:
        """Whether a traversal (reversed or not) starts at this shard."""
        return self.position == (self.size - 1 if reverse else 0)


@dataclass
class Step:
    """What a rank's local step gives the protocol: ``states`` to exchange (None: nothing crosses
    the network, as when a reduction leaves the sharded axis alone), ``fields`` for its metadata
    record (compared across ranks), ``value`` for the caller's finish."""
    states: Optional[Sequence[torch.Tensor]] = None
    fields: dict = field(default_factory=dict)
    value: Any = None


@dataclass
class Exchanged:
    """What every rank holds after the exchange: its shard, every rank's metadata record and
    states (None when the local step had none), both in shard position order, and the local
    step's ``value``."""
    shard: Shard
    records: List[dict]
    states: Optional[List[tuple]]
    value: Any


def exchange(op: str, group, position: Optional[int], record: dict,
             local: Callable[[Shard], Step], compare: Sequence[tuple], timeout) -> Exchanged:
    """Steps 1-3 of the protocol for this rank: ``local(shard)`` (the local step), the metadata
    exchange of ``record`` updated with the step's fields (``compare``: see ``_agree``), then
    the exchange of the step's states. ``position``: this shard's position (None: the group
    rank)."""
    g = _Group(group)
    shard = Shard(g, g.rank if position is None else position)
    error, step = None, Step()
    try:
        step = local(shard)
    except Exception as caught:  # reported to every rank by _agree, which raises it everywhere
        error = caught
    records = _agree(g, op, dict(record, **step.fields, position=shard.position), error, compare,
                     timeout)
    states = None if step.states is None else _ordered(records,
                                                        _all_gather_states(g, step.states))
    return Exchanged(shard, records, states, step.value)
