"""Launchers for the cumulative operators (DirectML's CUMULATIVE_SUMMATION / CUMULATIVE_PRODUCT)
and any other one-tensor scan record (tritonml/records/builtin_scans.py): validate, canonicalize
the layout, choose a config, and run the ``Work`` (tritonml/launchers/scan_work.py) a plan keeps.
Tuple-state scans: tritonml/launchers/associative_scan.py."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from tritonml_autotune import devices, select
from tritonml_autotune.configs import ScanConfig

from ..core import checks as _checks, layout as _layout
from ..runtime import plan as _plan, scratch as _scratch, steps as _steps
from . import scan_checks as _scan_checks
from .associative_scan import associative_scan_states
from .scan_checks import check_initial_meta, prechecked
from ..records.builtin_scans import PRODUCT, SUM
from ..records.scan_combine import ScanCombine
from .scan_work import carry_tensors, empty_carry, layout_args, scan_work

# Beside this module's own launchers, the names callers import from here: the records, the work
# builder and layout arguments (tests, benchmarks), the checks (fake kernels, distributed), and
# the tuple-state launcher.
__all__ = ["ScanCombine", "SUM", "PRODUCT", "cumulative_scan", "launch_scan", "scan_work",
           "layout_args", "check_initial_meta", "associative_scan_states", "prechecked"]


def cumulative_scan(x: torch.Tensor, axis: int, combine: ScanCombine, *, reverse: bool = False,
                    exclusive: bool = False, initial: Optional[torch.Tensor] = None,
                    out: Optional[torch.Tensor] = None,
                    config: Optional[ScanConfig] = None, return_carry: bool = False):
    """Running ``combine`` of ``x`` along ``axis``, starting from ``initial`` when given; see
    ``tritonml.cumulative_sum``. ``return_carry``: return ``(out, carry)``, ``carry`` each scan's
    last inclusive state in x's accumulation dtype (``initial`` for the next chunk)."""
    return_carry = _checks.check_bool("return_carry", return_carry)
    checked = ("public",) if _scan_checks.take_prechecked(x, initial, out) else ()
    carry = None
    if return_carry:
        checked = ("x",)
        _checks.check_tensor("x", x)
        axis = _checks.normalize_axis(axis, x.dim())
        if initial is not None:
            _scan_checks.check_initial(initial, x, axis)
        initial, carry = carry_tensors((initial,) if initial is not None else None, (x,), axis)
        initial = initial[0] if initial is not None else None
        carry = carry[0]
    key = None
    if config is None:
        x_key, axis_key = _plan.tensor_key(x), _plan.option_key(axis)
        out_key = _plan.tensor_key(out) if out is not None else ()
        init_key = _plan.tensor_key(initial) if initial is not None else ()
        flags = _plan.option_key(reverse), _plan.option_key(exclusive)
        if None not in (x_key, axis_key, out_key, init_key, *flags):
            key = ("scan", combine, x_key, axis_key, out_key, init_key, flags, out is x,
                   return_carry, torch.is_grad_enabled(), devices.active())
    plan, built = _plan.lookup(key, lambda: _plan_scan(x, axis, combine, reverse, exclusive,
                                                       initial, out, config, carry, checked))
    if out is not None and not built:
        _checks.check_out_overlap(out, x, allow_alias_of=x, spans=plan.spans)
        _scan_checks.check_out_initial(out, initial)
    if out is None:
        # Same strides as a dense x (``plan.out_strides``), so loads and stores coalesce along
        # the same dimension.
        out = torch.empty_strided(x.shape, plan.out_strides, dtype=x.dtype, device=x.device)
    if plan.work is not None:
        plan.work.run(x=x, out=out, initial=initial, carry=carry)
    elif carry is not None:
        empty_carry(carry, initial, combine.identity)
    return (out, carry) if return_carry else out


@dataclass(frozen=True)
class _ScanPlan:
    """A validated call's canonical form (``tritonml.runtime.plan``): no layout for an empty x."""
    layout: Optional[_layout.AxisLayout]
    config: Optional[ScanConfig]
    out_strides: tuple
    reverse: bool
    exclusive: bool
    spans: Optional[tuple]  # (span_bytes(out), span_bytes(x)) for a given out
    has_initial: bool = False
    work: Optional[_steps.Work] = None  # what each call allocates and launches


def _plan_scan(x, axis, combine, reverse, exclusive, initial, out, config, carry=None,
               checked: tuple = ()) -> _ScanPlan:
    """``checked``: what the caller has checked already, so that each check runs once per call:
    "x" (x, axis and initial, ``cumulative_scan``'s return_carry path) or "public" (what the
    public function checks before the torch op: ``tritonml.launchers.scan_checks.prechecked``)."""
    # --- validate (nothing is launched or written before every check has passed) ---
    x_checked, public = "x" in checked, "public" in checked
    if not x_checked:
        _checks.check_tensor("x", x, readable_checked=public)
    if not (x_checked or public):
        axis = _checks.normalize_axis(axis, x.dim())
    if not public:
        reverse = _checks.check_bool("reverse", reverse)
        exclusive = _checks.check_bool("exclusive", exclusive)
    if not isinstance(combine, ScanCombine):
        raise TypeError(f"combine: expected a ScanCombine, got {type(combine).__name__}")
    has_initial = initial is not None
    if has_initial and not x_checked:
        _scan_checks.check_initial(initial, x, axis, readable_checked=public)
    if out is not None:
        _checks.check_out(out, x, shape=x.shape, dtype=x.dtype, allow_alias_of=x,
                          readable_checked=public)
        _scan_checks.check_out_initial(out, initial)
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
    # the carry (return_carry) is written through the initial's strides, which it shares
    init_strides = initial.stride() if has_initial else None
    if carry is not None:
        init_strides = carry.stride()
    layout = _layout.axis_layout(tuple(x.shape), x.stride(), out_strides, axis, init_strides)
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
                                    make_runner=make_runner,
                                    element_bytes=combine.element_bytes(x.dtype)).config
    work = scan_work(layout, combine, x.dtype, x.is_neg(), out is not None and out.is_neg(),
                     reverse=reverse, exclusive=exclusive, config=config, has_initial=has_initial,
                     negate_init=has_initial and initial.is_neg(), store_carry=carry is not None)
    return _ScanPlan(layout, config, out_strides, reverse, exclusive, spans, has_initial, work)



def launch_scan(x, out, layout, combine: ScanCombine, *, reverse: bool, exclusive: bool,
                config: ScanConfig, initial: Optional[torch.Tensor] = None) -> None:
    """Launch the kernel ``config`` names over an already validated, canonical layout (built
    with ``initial``'s strides when one is given)."""
    has_initial = initial is not None
    scan_work(layout, combine, x.dtype, x.is_neg(), out.is_neg(), reverse=reverse,
              exclusive=exclusive, config=config, has_initial=has_initial,
              negate_init=has_initial and initial.is_neg(),
              ).run(x=x, out=out, initial=initial)


