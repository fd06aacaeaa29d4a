"""The launcher of ``index_bounds_kernel`` (tritonml/kernels/index_bounds.py): a 1-D index's
facts (least value, greatest, descents) and, where it is sorted, its group boundaries, in one
read of the index and one synchronization.

The results are integers, exact whatever the config: the config only sets how the work is cut
(on a GPU, 1,024 positions a program, enough programs to fill every SM for any index worth a
launch; in Triton's interpreter, which runs programs one after another, fewer and larger ones).
"""
from __future__ import annotations

from typing import Optional

import torch

from tritonml_autotune.heuristics import next_pow2

from ..kernels.index_bounds import (FACT_DESCENTS, FACT_LEFT, FACT_MAX, FACT_MIN,
                                    index_bounds_kernel)
from ..core import torch_compat as _torch_compat
from ..runtime import trace

GPU_BLOCK = 1024
GPU_WARPS = 8   # at 4 warps, ptxas gave one int32 specialization a stack frame on sm_90
GPU_BLOCK_GROUPS = 128
# The most blocks of BLOCK_GROUPS groups one tile writes the boundaries of: beyond them (a long
# run of empty groups in one tile's span: a sparse index, or many groups after the last value)
# its program would make a binary search per group one block after another, where
# torch.searchsorted searches for every group in parallel; so the boundaries are left to it.
SEARCH_BLOCKS_PER_TILE = 8
INTERPRETER_MAX_BLOCK = 1 << 14
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


def bounds_config(length: int, device_type: str) -> tuple[int, int, int]:
    """(BLOCK, BLOCK_GROUPS, num_warps) for an index of ``length`` on ``device_type``."""
    if device_type == "cuda":
        return GPU_BLOCK, GPU_BLOCK_GROUPS, GPU_WARPS
    block = max(16, min(next_pow2(length), INTERPRETER_MAX_BLOCK))
    return block, block, 4


def read_index_bounds(keys: torch.Tensor, n_groups: Optional[int] = None
                      ) -> tuple[int, int, int, Optional[torch.Tensor]]:
    """(least, greatest, descents, boundaries) of ``keys``, a non-empty 1-D int32 or int64
    tensor (any stride). ``boundaries``: with ``n_groups`` given and no descent, the
    ``n_groups + 1`` int64 group boundaries of the sorted keys (boundary g: the first position
    whose key is at least g; ``torch.searchsorted(keys, arange(n_groups + 1))``), unless a tile
    spans more than ``SEARCH_BLOCKS_PER_TILE`` blocks of groups (then the caller searches);
    else None.
    Meaningful only where least >= 0 and greatest < n_groups, which the caller checks."""
    if keys.dim() != 1 or keys.numel() == 0 or keys.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"keys: must be a non-empty 1-D int32 or int64 tensor, got "
                         f"{keys.dtype} of shape {tuple(keys.shape)}")
    length = keys.shape[0]
    write = n_groups is not None
    block, block_groups, warps = bounds_config(length, keys.device.type)
    facts = torch.tensor([INT64_MAX, INT64_MIN, 0, 0], dtype=torch.int64, device=keys.device)
    offsets = torch.empty(n_groups + 1 if write else 1, dtype=torch.int64, device=keys.device)
    trace.launch(index_bounds_kernel, (-(-length // block),), keys, length, keys.stride(0),
                 facts, offsets, n_groups if write else 0, BLOCK=block,
                 BLOCK_GROUPS=block_groups, SEARCH_STEPS=block.bit_length(),
                 MAX_TILE_GROUPS=SEARCH_BLOCKS_PER_TILE * block_groups, WRITE_OFFSETS=write,
                 num_warps=warps)
    if trace.dry_run():   # (the kernel wrote nothing: torch reads the index instead)
        for fact, value in zip((FACT_MIN, FACT_MAX, FACT_DESCENTS), facts_by_torch(keys, 0)):
            facts[fact.value] = value
        if write:   # (returned only where the facts below find the keys sorted)
            offsets.copy_(group_boundaries(keys, n_groups))
    read = facts.tolist()
    least, greatest, descents, left = (read[k.value]
                                       for k in (FACT_MIN, FACT_MAX, FACT_DESCENTS, FACT_LEFT))
    found = write and descents == 0 and left == 0
    return least, greatest, descents, offsets if found else None


def group_boundaries(sorted_keys: torch.Tensor, n_groups: int) -> torch.Tensor:
    """Where each key's run starts in ``sorted_keys`` (1-D, non-decreasing), and the end: the
    n_groups + 1 int64 boundaries ``index_bounds_kernel`` writes, searched by torch (int64, the
    segment kernel's own type: int32 ones would be widened by a pass of their own). Strided
    keys are copied first, as torch would (it warns of the copy: a user's strided index is no
    fault of theirs)."""
    sorted_keys = sorted_keys.contiguous()
    wanted = torch.arange(n_groups + 1, device=sorted_keys.device, dtype=sorted_keys.dtype)
    if (not torch.compiler.is_compiling() and sorted_keys.numel()
            and _torch_compat.is_functorch_wrapped(sorted_keys)):
        # under vmap, the same wanted keys for every batch element: given unbatched, torch's
        # batching rule would expand them (stride 0) and searchsorted warn of the copy
        wanted = wanted + sorted_keys[:1] * 0
    return torch.searchsorted(sorted_keys, wanted)


def facts_by_torch(index: torch.Tensor, along: int
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(least, greatest, descents along ``along``) of a non-empty integer index, as 0-d tensors
    computed by torch: what a dry run (``trace.dry_run``) reads where a kernel that did not run
    would have written those facts."""
    length = index.shape[along] if index.dim() else 1
    if length < 2:
        descents = torch.zeros((), dtype=torch.int64, device=index.device)
    else:
        here, after = index.narrow(along, 0, length - 1), index.narrow(along, 1, length - 1)
        descents = (after < here).sum()
    return index.min().to(torch.int64), index.max().to(torch.int64), descents
