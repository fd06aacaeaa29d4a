"""Launchers for the cumulative operators (DirectML's CUMULATIVE_SUMMATION / CUMULATIVE_PRODUCT)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from tritonml_autotune import devices, select

from .. import _checks, _layout, _plan
from .._config import ScanConfig
from .._dtypes import ACC_DTYPE, ACC_TORCH_DTYPE
from . import _scratch, _steps
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
                    exclusive: bool = False, initial: Optional[torch.Tensor] = None,
                    out: Optional[torch.Tensor] = None,
                    config: Optional[ScanConfig] = None) -> torch.Tensor:
    """Running ``combine`` of ``x`` along ``axis``, starting from ``initial`` when given; see
    ``tritonml.cumulative_sum``."""
    key = None
    if config is None:
        x_key, axis_key = _plan.tensor_key(x), _plan.option_key(axis)
        out_key = _plan.tensor_key(out) if out is not None else ()
        init_key = _plan.tensor_key(initial) if initial is not None else ()
        flags = _plan.option_key(reverse), _plan.option_key(exclusive)
        if None not in (x_key, axis_key, out_key, init_key, *flags):
            key = ("scan", combine, x_key, axis_key, out_key, init_key, flags, out is x,
                   torch.is_grad_enabled(), devices.active())
    plan, built = _plan.lookup(key, lambda: _plan_scan(x, axis, combine, reverse, exclusive,
                                                       initial, out, config))
    if out is not None and not built:
        _checks.check_out_overlap(out, x, allow_alias_of=x, spans=plan.spans)
        _check_out_initial(out, initial)
    if out is None:
        # Same strides as a dense x (``plan.out_strides``), so loads and stores coalesce along
        # the same dimension.
        out = torch.empty_strided(x.shape, plan.out_strides, dtype=x.dtype, device=x.device)
    if plan.work is not None:
        plan.work.run(x, out, (initial if initial is not None else x,))
    return out


def check_initial_meta(initial, x: torch.Tensor, axis: int) -> None:
    """What a fake kernel can check of ``initial`` (None passes): x's shape without ``axis``
    (normalized), x's dtype."""
    if initial is None:
        return
    shape = tuple(x.shape[:axis]) + tuple(x.shape[axis + 1:])
    if tuple(initial.shape) != shape:
        raise ValueError(f"initial: shape {tuple(initial.shape)} does not match x's shape without "
                         f"axis {axis}, {shape}")
    if initial.dtype != x.dtype:
        raise TypeError(f"initial: dtype {initial.dtype} does not match x's dtype {x.dtype}")


def _check_initial(initial, x: torch.Tensor, axis: int) -> None:
    """``initial``: a tensor of x's shape without ``axis``, x's dtype and device (any strides)."""
    if not isinstance(initial, torch.Tensor):
        raise TypeError(f"initial: expected a torch.Tensor or None, got "
                        f"{_checks._type_name(initial)}")
    _checks.check_readable("initial", initial)
    check_initial_meta(initial, x, axis)
    if initial.device != x.device:
        raise ValueError(f"initial: tensor is on {initial.device} but x is on {x.device}; "
                         "tensors must be on the same device")


def _check_out_initial(out: torch.Tensor, initial) -> None:
    """``out`` may be x itself, but never shares memory with ``initial`` (read while out is
    written)."""
    if initial is not None and _checks.overlaps(out, initial):
        raise ValueError("initial: overlaps out; the initial is read while out is written, so "
                         "pass an initial whose memory does not overlap out (e.g. a clone)")


@dataclass(frozen=True)
class _ScanPlan:
    """A validated call's canonical form (``tritonml._plan``): no layout for an empty x."""
    layout: Optional[_layout.AxisLayout]
    config: Optional[ScanConfig]
    out_strides: tuple
    reverse: bool
    exclusive: bool
    spans: Optional[tuple]  # (span_bytes(out), span_bytes(x)) for a given out
    has_initial: bool = False
    work: Optional[_steps.Work] = None  # what each call allocates and launches


def _plan_scan(x, axis, combine, reverse, exclusive, initial, out, config) -> _ScanPlan:
    # --- validate (nothing is launched or written before every check has passed) ---
    _checks.check_tensor("x", x)
    axis = _checks.normalize_axis(axis, x.dim())
    reverse = _checks.check_bool("reverse", reverse)
    exclusive = _checks.check_bool("exclusive", exclusive)
    if not isinstance(combine, ScanCombine):
        raise TypeError(f"combine: expected a ScanCombine, got {type(combine).__name__}")
    has_initial = initial is not None
    if has_initial:
        _check_initial(initial, x, axis)
    if out is not None:
        _checks.check_out(out, x, shape=x.shape, dtype=x.dtype, allow_alias_of=x)
        _check_out_initial(out, initial)
        out_strides = tuple(out.stride())
        spans = _checks.span_bytes(out), _checks.span_bytes(x)
    else:
        spans = None
        out_strides = tuple(torch.empty_like(x, memory_format=torch.preserve_format,
                                             device="meta").stride())
    if config is not None:
        if not isinstance(config, ScanConfig):
            raise TypeError(f"config: expected a ScanConfig, got {type(config).__name__}")
        config.validate()
    if x.numel() == 0:
        return _ScanPlan(None, None, out_strides, reverse, exclusive, spans, has_initial)

    # --- canonicalize, choose a config ---
    layout = _layout.axis_layout(tuple(x.shape), x.stride(), out_strides, axis,
                                 initial.stride() if has_initial else None)
    if config is None:
        make_runner = None
        if _scratch.can_time(x):
            def make_tensors():
                return (_scratch.scratch_input(x.shape, x.stride(), x.dtype, x.device),
                        torch.empty_strided(x.shape, out_strides, dtype=x.dtype, device=x.device))

            def launch(tensors, candidate):
                launch_scan(*tensors, layout, combine, reverse=reverse, exclusive=exclusive,
                            config=candidate)
            make_runner = _scratch.runner_factory(make_tensors, launch)
        config = select.choose_scan(layout, x.dtype, x.device, combine.name,
                                    make_runner=make_runner).config
    work = scan_work(layout, combine, x.dtype, x.is_neg(), out is not None and out.is_neg(),
                     reverse=reverse, exclusive=exclusive, config=config, has_initial=has_initial,
                     negate_init=has_initial and initial.is_neg())
    return _ScanPlan(layout, config, out_strides, reverse, exclusive, spans, has_initial, work)


def launch_scan(x, out, layout, combine: ScanCombine, *, reverse: bool, exclusive: bool,
                config: ScanConfig, initial: Optional[torch.Tensor] = None) -> None:
    """Launch the kernel ``config`` names over an already validated, canonical layout (built
    with ``initial``'s strides when one is given)."""
    has_initial = initial is not None
    scan_work(layout, combine, x.dtype, x.is_neg(), out.is_neg(), reverse=reverse,
              exclusive=exclusive, config=config, has_initial=has_initial,
              negate_init=has_initial and initial.is_neg(),
              ).run(x, out, (initial if has_initial else x,))


def scan_work(layout, combine: ScanCombine, dtype: torch.dtype, negate_x: bool, negate_out: bool,
              *, reverse: bool, exclusive: bool, config: ScanConfig, has_initial: bool = False,
              negate_init: bool = False) -> _steps.Work:
    """The workspaces and launch ``launch_scan`` runs, for x of ``dtype``; ``negate_x`` /
    ``negate_out`` / ``negate_init``: x / out / initial is a torch view with the negative bit (the
    memory holds the negated values). The launch reads the initial from tensor slot 2 (``Work.run``
    gets it, or x as an unread placeholder without ``has_initial``)."""
    chains = layout.chains(config.block_inner)
    tiles = chains * -(-layout.axis_len // config.block_axis)
    workspace_slots = tiles * config.block_inner if config.regime == "lookback" else 0
    index_64 = layout.needs_index_64(config.block_axis, config.block_inner, workspace_slots)
    meta = dict(COMBINE=combine.fn, IDENTITY=combine.identity, ACC_DTYPE=ACC_DTYPE[dtype],
                REVERSE=reverse, EXCLUSIVE=exclusive, NEGATE_X=negate_x, NEGATE_OUT=negate_out,
                HAS_INITIAL=has_initial, NEGATE_INIT=negate_init, INDEX_64=index_64, BLOCK_AXIS=config.block_axis, BLOCK_INNER=config.block_inner,
                num_warps=config.num_warps)
    if config.regime == "lookback":
        acc_torch = ACC_TORCH_DTYPE[dtype]
        workspaces = (_steps.Workspace(1 + tiles, torch.int32, zeroed=True),   # status words
                      _steps.Workspace(tiles * config.block_inner, acc_torch),  # aggregates
                      _steps.Workspace(tiles * config.block_inner, acc_torch))  # prefixes
        step = _steps.step(scan_lookback_kernel, (tiles,), (_steps.X, _steps.OUT, 2, 3, 4, 5),
                           layout.kernel_args(), dict(PREFIX_EVERY=config.prefix_every, **meta))
        return _steps.Work(workspaces, (step,))
    step = _steps.step(scan_tiled_kernel, (chains,), (_steps.X, _steps.OUT, 2), layout.kernel_args(),
                       meta)
    return _steps.Work((), (step,))
