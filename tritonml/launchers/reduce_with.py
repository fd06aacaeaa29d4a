"""User-defined reductions: ``reduce_with_axes``, the launcher of a ``Reduction`` (the description,
tritonml/records/reduction.py).

A ``Reduction`` runs on the very kernels the twelve DirectML functions run on
(tritonml/kernels/reduce.py) in every regime, split included: its functions are the kernels'
PREPARE, MERGE, ALONG and FINISH meta-parameters, its state a tuple of components with declared
dtypes and identities. See docs/dsl.md ("User-defined reductions") for the rules and a worked
example, tritonml/records/ready_reductions.py for Welford's mean and variance written this way.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Optional

import torch

from tritonml_autotune import devices, select
from tritonml_autotune.configs import ReduceConfig

from ..core import checks as _checks
from ..runtime import plan as _plan
from ..core.shapes import reduced_shape, strides_over_input
from ..core.layout import reduce_layout
from .reduce import reduce_work
from . import scan_checks as _scan_checks
from ..core.triton_compat import is_jit_function
from ..kernels.combine import merge_along
from ..records import state_combine as _state_combine
from ..records.builtin_reductions import ReduceRecord
from ..records.reduction import Reduction, default_load_dtype

# The tuner's tiles are sized for the DirectML states, at most 16 bytes per lane (a float64 value
# and an int64 index). A larger state (Welford over float64: 24 bytes) in the same tile would pass
# the 255 registers a thread has on sm_80/sm_90 and go to the stack, so its tile shrinks by the
# same factor (tests/kernels/test_reduce_gpu_compile.py compiles what this picks).
TUNED_STATE_BYTES = 16


def fit_tile_to_state(config: ReduceConfig, state_bytes: int) -> ReduceConfig:
    """``config`` with its tile halved (reduced side first) until tile x state bytes is at most
    what the tuner planned for: tile x ``TUNED_STATE_BYTES``."""
    block_axis, block_inner = config.block_axis, config.block_inner
    tile = block_axis * block_inner
    while block_axis * block_inner * state_bytes > tile * TUNED_STATE_BYTES and (
            block_axis > 1 or block_inner > 1):
        if block_axis > 1:
            block_axis //= 2
        else:
            block_inner //= 2
    if (block_axis, block_inner) == (config.block_axis, config.block_inner):
        return config
    return dataclasses.replace(config, block_axis=block_axis, block_inner=block_inner)


@dataclass(frozen=True)
class _ReduceWithPlan:
    layout: object            # None: an empty result
    result_shape: tuple
    output_dtypes: tuple
    copy_inputs: bool         # the inputs' strides differ or do not fit the kernels: run on copies
    work: Any = None


def check_reduction_functions(reduction: Reduction, dtypes: tuple) -> None:
    """A user's ``Reduction``'s functions from their signatures and sources, before any launch:
    two parameters each, and each ``return`` that spells a tuple of as many values as the state
    has components (prepare, merge, along) or the reduction outputs (finish). A
    ``CombineError`` names the function, the reduction and the rule. Returns the source cannot
    show are the launch's (``reduction_error``)."""
    counts = {"state": len(reduction.identity_for(dtypes)), "outputs": reduction.outputs}
    for role, params, returns in _state_combine.REDUCTION_ROLES:
        fn = getattr(reduction, role)
        if role == "along" and fn is merge_along:
            continue
        if not is_jit_function(fn):
            raise TypeError(f"{role}: {reduction.name}'s {role} must be a @triton.jit function, "
                            f"got {type(fn).__name__}")
        name = _state_combine.qualified_name(fn)
        taken = _scan_checks.positional_parameters(fn)
        problem, lineno = None, None
        if len(taken) != 2:
            problem = TypeError(f"takes {len(taken)} parameter(s); a Reduction's {role} takes "
                                f"two, {role}{params}")
        else:
            source = _scan_checks.own_statements(fn)
            wrong = _scan_checks.wrong_returns(source[2], counts[returns]) if source else None
            if wrong is not None:
                node, count = wrong
                lineno = source[1] + node.lineno - 1   # pyright: ignore[reportOptionalSubscript]
                what = ("one per state component (identity has "
                        f"{counts['state']})" if returns == "state"
                        else f"one per output (outputs={counts['outputs']})")
                problem = ValueError(f"returns {count} value(s); {role} must return a tuple of "
                                     f"{counts[returns]}, {what}")
        if problem is not None:
            code = fn.fn.__code__
            raise _state_combine.CombineError(
                f"{role} {name} ({_state_combine.where(fn, lineno)}) of the reduction "
                f"{reduction.name} {problem}", name, code.co_filename,
                lineno if lineno is not None else code.co_firstlineno, problem)


def run_reduction(work, reduction: Reduction, **tensors) -> None:
    """``work.run(**tensors)``; an error raised in one of ``reduction``'s functions as the
    ``CombineError`` naming it (not Triton's wrappers around it)."""
    try:
        work.run(**tensors)
    except Exception as error:
        failure = _state_combine.reduction_error(error, reduction)
        if failure is None:
            raise
        raise failure from None


def reduce_with_axes(reduction, xs, axes, *, keepdims: bool = True,
                     config: Optional[ReduceConfig] = None) -> tuple:
    """Reduce ``axes`` of the tensor(s) ``xs`` with ``reduction``; always a tuple of outputs. See
    ``tritonml.reduce_with``."""
    if not isinstance(reduction, Reduction):
        raise TypeError(f"reduction: expected a tritonml.Reduction, got {type(reduction).__name__}")
    xs = (xs,) if isinstance(xs, torch.Tensor) else xs
    if not isinstance(xs, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in xs):
        raise TypeError(f"xs: expected a tensor or a tuple of tensors, got {type(xs).__name__}")
    xs = tuple(xs)
    key = None
    if config is None:
        x_keys = tuple(_plan.tensor_key(t) for t in xs)
        axes_key, keep_key = _plan.option_key(axes), _plan.option_key(keepdims)
        if None not in (*x_keys, axes_key, keep_key):
            key = ("reduce_with", reduction, x_keys, axes_key, keep_key, devices.active())
    plan, _ = _plan.lookup(key, lambda: _plan_reduce_with(reduction, xs, axes, keepdims, config))
    device = xs[0].device
    outs = tuple(torch.empty(plan.result_shape, dtype=d, device=device) for d in plan.output_dtypes)
    if plan.layout is not None:
        if plan.copy_inputs:
            xs = tuple(t.contiguous() for t in xs)
        xs = tuple(t.resolve_neg() for t in xs)   # the kernels read every input unnegated
        run_reduction(plan.work, reduction, x=xs, out=outs)
    return outs


def _plan_reduce_with(reduction, xs, axes, keepdims, config) -> _ReduceWithPlan:
    # --- validate (nothing is launched or written before every check has passed) ---
    if len(xs) != reduction.inputs:
        raise ValueError(f"xs: {reduction.name} takes {reduction.inputs} input tensor(s), "
                         f"got {len(xs)}")
    for i, t in enumerate(xs):
        _checks.check_tensor(f"xs[{i}]", t)
        if t.shape != xs[0].shape:
            raise ValueError(f"xs[{i}]: every input must have xs[0]'s shape {tuple(xs[0].shape)}, "
                             f"got {tuple(t.shape)}")
        if t.device != xs[0].device:
            raise ValueError(f"xs[{i}]: every input must be on xs[0]'s device {xs[0].device}, "
                             f"got {t.device}")
    dtypes = tuple(t.dtype for t in xs)
    if reduction.check is not None:
        reduction.check(dtypes)
    x = xs[0]
    axes = _checks.normalize_axes(axes, x.dim())
    keepdims = _checks.check_bool("keepdims", keepdims)
    if config is not None:
        if not isinstance(config, ReduceConfig):
            raise TypeError(f"config: expected a ReduceConfig, got {type(config).__name__}")
        config.validate()
    output_dtypes = tuple(reduction.output_dtypes(dtypes))
    if len(output_dtypes) != reduction.outputs:
        raise ValueError(f"reduction: {reduction.name}'s output_dtypes gives {len(output_dtypes)} "
                         f"dtypes for {reduction.outputs} output(s)")
    reduction.kernel_state(dtypes, False)   # every declared dtype is one the kernels support
    if not isinstance(reduction, ReduceRecord):
        check_reduction_functions(reduction, dtypes)
    shape = tuple(x.shape) if x.dim() else (1,)
    result_shape = reduced_shape(x.shape, axes, keepdims)
    if math.prod(result_shape) == 0:
        return _ReduceWithPlan(None, result_shape, output_dtypes, False)

    # --- canonicalize: one layout for every input (they share strides, or run on copies) ---
    dense_strides = torch.empty(shape, device="meta").stride()
    strides = {tuple(t.stride()) if t.dim() else (1,) for t in xs}
    copy_inputs = len(strides) > 1
    x_strides = dense_strides if copy_inputs else strides.pop()
    kept_strides = torch.empty(result_shape, device="meta").stride()
    out_strides = strides_over_input(kept_strides, x.dim(), axes, keepdims)
    layout = reduce_layout(shape, x_strides, out_strides, axes, reduction.uses_index)
    if layout is None:   # too many reduced dims apart to merge (see launchers/reduce.py)
        copy_inputs = True
        layout = reduce_layout(shape, dense_strides, out_strides, axes, reduction.uses_index)
    if config is None:
        state_bytes = reduction.state_bytes(dtypes)
        config = select.choose_reduce(layout, x.dtype, x.device, f"user:{reduction.name}",
                                      partial_bytes=state_bytes,
                                      out_bytes=reduction.out_bytes(dtypes),
                                      state_values=reduction.state_values(dtypes)).config
        config = fit_tile_to_state(config, state_bytes)  # pyright: ignore[reportArgumentType]
    work = reduce_work(layout, reduction, dtypes, False, False,  # pyright: ignore[reportArgumentType]
                       config)
    return _ReduceWithPlan(layout, result_shape, output_dtypes, copy_inputs, work)


__all__ = ["reduce_with_axes"]
