"""DTensors in and out of ``tritonml.distributed``: which mesh dim shards the dims an operation
runs along, the local shards, and the result wrapped back with its placements."""
from __future__ import annotations

from typing import Optional

import torch


def dtensor_class():
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # pragma: no cover - torch without DTensor
        return None
    return DTensor


def is_dtensor(x) -> bool:
    cls = dtensor_class()
    return cls is not None and isinstance(x, cls)


def check_placements(op: str, placements) -> None:
    from torch.distributed.tensor import Replicate, Shard
    for p in placements:
        if not isinstance(p, (Shard, Replicate)):
            raise NotImplementedError(f"{op}: x: placement {p} is not supported; redistribute to "
                                      "Shard or Replicate placements first")


def _contiguous_stride(shape) -> tuple:
    stride, step = [], 1
    for s in reversed(shape):
        stride.append(step)
        step *= max(s, 1)
    return tuple(reversed(stride))


def from_local(local: torch.Tensor, like, placements, shape):
    from torch.distributed.tensor import DTensor
    return DTensor.from_local(local, like.device_mesh, placements, run_check=False,
                              shape=torch.Size(shape), stride=_contiguous_stride(shape))


def to_local(t):
    return t.to_local() if is_dtensor(t) else t


def sharding_mesh_dim(op: str, x, dims, subject: str, remedy: str) -> Optional[int]:
    """The one mesh dim whose ``Shard`` placement splits one of ``dims`` of the DTensor ``x``
    (the shards the SPMD protocol must combine), or None when none does (each rank computes its
    part alone). Several such mesh dims are refused: ``subject`` names the dims in the message
    and ``remedy`` says what to do."""
    from torch.distributed.tensor import Shard
    sharding = [m for m, p in enumerate(x.placements) if isinstance(p, Shard) and p.dim in dims]
    if len(sharding) > 1:
        raise NotImplementedError(f"{op}: {subject} sharded over several mesh dims {sharding}; "
                                  f"{remedy}")
    return sharding[0] if sharding else None


def mesh_shard(x, mesh_dim: int) -> tuple:
    """(process group, position) of this rank's shard along mesh dim ``mesh_dim`` of ``x``."""
    mesh = x.device_mesh
    return mesh.get_group(mesh_dim), mesh.get_local_rank(mesh_dim)


def reduced_placements(placements, red, keepdims: bool) -> list:
    """The placements of a DTensor reduction's result: Replicate on a mesh dim that sharded a
    reduced dim (the fold), the other placements kept (Shard dims renumbered without keepdims)."""
    from torch.distributed.tensor import Replicate, Shard
    result = []
    for p in placements:
        if isinstance(p, Shard) and p.dim in red:
            result.append(Replicate())
        elif isinstance(p, Shard) and not keepdims:
            result.append(Shard(p.dim - sum(1 for a in red if a < p.dim)))
        else:
            result.append(p)
    return result
