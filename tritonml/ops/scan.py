"""Launchers for the cumulative operators (DirectML's CUMULATIVE_SUMMATION / CUMULATIVE_PRODUCT)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from .. import _checks, _layout, _trace
from .._config import ScanConfig
from .._dtypes import ACC_DTYPE, ACC_TORCH_DTYPE
from ..kernels import combine as _combine
from ..kernels.scan import scan_lookback_kernel, scan_tiled_kernel


@dataclass(frozen=True)
class ScanCombine:
    """An associative combine function for scans: a ``@triton.jit`` function of (tally, value)
    and its identity (the first value an exclusive scan writes, and the padding of partial tiles)."""
    name: str
    fn: object
    identity: int


SUM = ScanCombine("sum", _combine.add, 0)
PRODUCT = ScanCombine("product", _combine.mul, 1)


def cumulative_scan(x: torch.Tensor, axis: int, combine: ScanCombine, *, reverse: bool = False,
                    exclusive: bool = False, out: Optional[torch.Tensor] = None,
                    config: Optional[ScanConfig] = None) -> torch.Tensor:
    """Running ``combine`` of ``x`` along ``axis``; see ``tritonml.cumulative_sum``."""
    # --- validate (nothing is launched or written before every check has passed) ---
    _checks.check_tensor("x", x)
    axis = _checks.normalize_axis(axis, x.dim())
    reverse = _checks.check_bool("reverse", reverse)
    exclusive = _checks.check_bool("exclusive", exclusive)
    if not isinstance(combine, ScanCombine):
        raise TypeError(f"combine: expected a ScanCombine, got {type(combine).__name__}")
    if out is not None:
        _checks.check_out(out, x, shape=x.shape, dtype=x.dtype, allow_alias_of=x)
    if config is not None:
        if not isinstance(config, ScanConfig):
            raise TypeError(f"config: expected a ScanConfig, got {type(config).__name__}")
        config.validate()
    if out is None:
        # Same strides as a dense x, so loads and stores coalesce along the same dimension.
        out = torch.empty_like(x, memory_format=torch.preserve_format)
    if x.numel() == 0:
        return out

    # --- canonicalize ---
    layout = _layout.axis_layout(tuple(x.shape), x.stride(), out.stride(), axis)
    if config is None:
        from tritonml_autotune.heuristics import scan_config
        acc_bytes = ACC_TORCH_DTYPE[x.dtype].itemsize
        config = scan_config(layout, x.device.type, x.device, acc_bytes)

    # --- launch ---
    launch_scan(x, out, layout, combine, reverse=reverse, exclusive=exclusive, config=config)
    return out


def launch_scan(x, out, layout, combine: ScanCombine, *, reverse: bool, exclusive: bool,
                config: ScanConfig) -> None:
    """Launch the kernel ``config`` names over an already validated, canonical layout."""
    chains = layout.chains(config.block_inner)
    tiles = chains * -(-layout.axis_len // config.block_axis)
    workspace_slots = tiles * config.block_inner if config.regime == "lookback" else 0
    index_64 = layout.needs_index_64(config.block_axis, config.block_inner, workspace_slots)
    meta = dict(COMBINE=combine.fn, IDENTITY=combine.identity, ACC_DTYPE=ACC_DTYPE[x.dtype],
                REVERSE=reverse, EXCLUSIVE=exclusive,
                # torch views with the negative bit: the memory holds the negated values.
                NEGATE_X=x.is_neg(), NEGATE_OUT=out.is_neg(), INDEX_64=index_64,
                BLOCK_AXIS=config.block_axis, BLOCK_INNER=config.block_inner,
                num_warps=config.num_warps)
    if config.regime == "lookback":
        acc_torch = ACC_TORCH_DTYPE[x.dtype]
        status = torch.zeros(1 + tiles, dtype=torch.int32, device=x.device)
        aggregates = torch.empty(tiles * config.block_inner, dtype=acc_torch, device=x.device)
        prefixes = torch.empty(tiles * config.block_inner, dtype=acc_torch, device=x.device)
        _trace.launch(scan_lookback_kernel, (tiles,), x, out, status, aggregates, prefixes,
                      *layout.kernel_args(), PREFIX_EVERY=config.prefix_every, **meta)
    else:
        _trace.launch(scan_tiled_kernel, (chains,), x, out, *layout.kernel_args(), **meta)
