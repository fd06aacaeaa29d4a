"""Launcher for DirectML's reduce operator (DML_REDUCE_OPERATOR_DESC): twelve reduce functions over
one or more axes. See docs/reduce.md for every rule (types, empty axes, NaN, indices) and the kernel
design; the kernels are in tritonml/kernels/reduce.py, the combine functions in
tritonml/kernels/combine.py.

Layering: ``tritonml.reduce`` (the torch op, tritonml/torch_ops/reduce.py) -> ``reduce_axes`` (a
function's ``ReduceRecord``, tritonml/records/builtin_reductions.py, and an optional ``ReduceConfig``:
validate -> canonicalize -> choose a config) -> ``launch_reduce`` (an already canonical layout and
a config: launch).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch

from tritonml_autotune import devices, select
from tritonml_autotune.configs import ReduceConfig

from ..core import checks as _checks
from ..runtime import plan as _plan
from ..core.dtypes import TORCH_DTYPE, dtype_name
from ..core.shapes import reduced_shape, strides_over_input
from ..core.layout import ReduceLayout, reduce_layout
from ..records.reduce_function import ReduceFunction  # noqa: F401 (for callers)
from ..kernels.reduce import reduce_kernel, reduce_partials_kernel
from ..records.builtin_reductions import ReduceRecord
from ..runtime import resident as _resident, scratch as _scratch, steps as _steps

INDEX_DTYPES = (torch.int32, torch.int64, torch.uint32, torch.uint64)


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------
def check_index_dtype(index_dtype) -> None:
    if index_dtype not in INDEX_DTYPES:
        names = ", ".join(dtype_name(d) for d in INDEX_DTYPES)
        raise TypeError(f"index_dtype: {index_dtype!r} is not an index type; use one of {names}")


def _check_index_fits(index_dtype, red_len: int, name: str) -> None:
    largest = red_len - 1
    limit = torch.iinfo(index_dtype).max
    if largest > limit:
        raise ValueError(f"index_dtype: {name} over {red_len} elements can return index {largest}, "
                         f"which does not fit {dtype_name(index_dtype)} (at most {limit}); "
                         "use torch.int64")


# ---------------------------------------------------------------------------------------------
# Launch
# ---------------------------------------------------------------------------------------------
def reduce_axes(x: torch.Tensor, axes, combine: ReduceRecord, *, keepdims: bool = True,
                index_dtype: torch.dtype = torch.int64, out: Optional[torch.Tensor] = None,
                config: Optional[ReduceConfig] = None) -> torch.Tensor:
    """Reduce ``axes`` of ``x`` with ``combine``; see ``tritonml.reduce``. ``config`` overrides
    the tuner's choice of regime and tile (``tritonml_autotune.select.choose_reduce``)."""
    key = None
    if config is None:
        x_key, axes_key, keep_key = (_plan.tensor_key(x), _plan.option_key(axes),
                                     _plan.option_key(keepdims))
        out_key = _plan.tensor_key(out) if out is not None else ()
        if None not in (x_key, axes_key, keep_key, out_key) and type(index_dtype) is torch.dtype:
            key = ("reduce", combine, x_key, axes_key, keep_key, index_dtype, out_key,
                   torch.is_grad_enabled(), devices.active())
    plan, built = _plan.lookup(key, lambda: _plan_reduce(x, axes, combine, keepdims, index_dtype,
                                                         out, config))
    if out is not None and not built:
        _checks.check_out_overlap(out, x, spans=plan.spans)
    if out is None:
        out = torch.empty(plan.result_shape, dtype=plan.result_dtype, device=x.device)
    if plan.layout is not None:
        if plan.needs_copy:
            x = x.contiguous()
            launch_reduce(x, out, plan.layout, combine, plan.config)
        else:
            plan.work.run(x=x, out=out)
    return out


@dataclass(frozen=True)
class _ReducePlan:
    """A validated call's canonical form (``tritonml.runtime.plan``): no layout for an empty
    result."""
    layout: Optional[ReduceLayout]
    config: Optional[ReduceConfig]
    result_shape: tuple
    result_dtype: torch.dtype
    spans: Optional[tuple]  # (span_bytes(out), span_bytes(x)) for a given out
    needs_copy: bool = False
    work: Optional[_steps.Work] = None  # what each call allocates and launches (no copy needed)


def _plan_reduce(x, axes, combine, keepdims, index_dtype, out, config) -> _ReducePlan:
    # --- validate (nothing is launched or written before every check has passed) ---
    _checks.check_tensor("x", x)
    if not isinstance(combine, ReduceRecord):
        raise TypeError(f"combine: expected a ReduceRecord, got {type(combine).__name__}")
    if combine.check is not None:
        combine.check((x.dtype,))
    axes = _checks.normalize_axes(axes, x.dim())
    keepdims = _checks.check_bool("keepdims", keepdims)
    check_index_dtype(index_dtype)
    shape = tuple(x.shape) if x.dim() else (1,)
    x_strides = tuple(x.stride()) if x.dim() else (1,)
    result_shape = reduced_shape(x.shape, axes, keepdims)
    result_dtype = index_dtype if combine.returns_index else combine.output_dtypes((x.dtype,))[0]
    spans = None
    if out is not None:
        _checks.check_out(out, x, shape=result_shape, dtype=result_dtype)
        spans = _checks.span_bytes(out), _checks.span_bytes(x)
    if config is not None:
        if not isinstance(config, ReduceConfig):
            raise TypeError(f"config: expected a ReduceConfig, got {type(config).__name__}")
        config.validate()
    red_len = math.prod(shape[a] for a in axes)
    if combine.returns_index:
        if red_len == 0:
            sizes = {a: shape[a] for a in axes}
            raise ValueError(f"axes: {combine.name} over a reduced axis of size 0 (sizes {sizes}) has "
                             "no index to return")
        _check_index_fits(index_dtype, red_len, combine.name)
    if math.prod(result_shape) == 0:
        return _ReducePlan(None, None, result_shape, result_dtype, spans)

    # --- canonicalize ---
    if out is not None:
        kept_strides = out.stride()
    else:
        kept_strides = torch.empty(result_shape, device="meta").stride()
    out_strides = strides_over_input(kept_strides, x.dim(), axes, keepdims)
    layout = reduce_layout(shape, x_strides, out_strides, axes, combine.returns_index)
    needs_copy = layout is None
    if needs_copy:
        # More than MAX_REDUCED_DIMS reduced dims that cannot merge (a permuted view reducing many
        # axes apart): the one layout that forces a copy. In a contiguous x they always fit.
        dense_strides = torch.empty(shape, device="meta").stride()
        layout = reduce_layout(shape, dense_strides, out_strides, axes, combine.returns_index)
    if config is None:
        make_runner = None
        if _scratch.can_time(x):
            x_strides_now = x_strides if not needs_copy else dense_strides

            result_strides = (tuple(out.stride()) if out is not None else
                              torch.empty(result_shape, device="meta").stride())

            def make_tensors():
                return (_scratch.scratch_input(shape, x_strides_now, x.dtype, x.device),
                        torch.empty_strided(result_shape, result_strides, dtype=result_dtype,
                                            device=x.device))

            def launch(tensors, candidate):
                launch_reduce(*tensors, layout, combine, candidate)
            make_runner = _scratch.runner_factory(make_tensors, launch)
        config = select.choose_reduce(layout, x.dtype, x.device, combine.name,
                                      partial_bytes=combine.state_bytes((x.dtype,)),
                                      out_bytes=combine.out_bytes((x.dtype,)),
                                      state_values=combine.state_values((x.dtype,)),
                                      make_runner=make_runner).config
    work = None if needs_copy else reduce_work(
        layout, combine, x.dtype, x.is_neg(), out is not None and out.is_neg(), config)
    return _ReducePlan(layout, config, result_shape, result_dtype, spans, needs_copy, work)


def launch_reduce(x, out, layout: ReduceLayout, combine: ReduceRecord,
                  config: ReduceConfig) -> None:
    """Launch the kernels ``config`` names over an already validated, canonical layout: one launch,
    or two for a "split" without ``one_launch`` (partial states to a workspace, then one fold per
    chain)."""
    reduce_work(layout, combine, x.dtype, x.is_neg(), out.is_neg(), config).run(x=x, out=out)


def reduce_work(layout: ReduceLayout, combine, dtype, negate_x: bool, negate_out: bool,
                config: ReduceConfig) -> _steps.Work:
    """The workspaces and launches ``launch_reduce`` runs, for inputs of ``dtype`` (one dtype, or a
    tuple of them for a ``tritonml.Reduction`` of several inputs); ``negate_x`` / ``negate_out``:
    the inputs / outputs are torch views with the negative bit (the memory holds the negated
    values). Tensor slots (``Work.run(x=xs, out=outs)``): ``x`` and ``out``, one per input and
    output; the workspaces ``partial`` (one per state component) and ``arrivals``."""
    chains = layout.chains(config.block_inner)
    splits = config.splits
    if splits == 1:
        split_len = max(layout.red_len, 1)
    else:
        split_len = -(-layout.red_len // splits)
        split_len = max(1, -(-split_len // config.block_axis)) * config.block_axis
    # Reduced positions a program may form (past the end, by the last tile), and the length of
    # each partial-state workspace.
    reach = max(splits * split_len, layout.red_len) + config.block_axis
    partial_len = chains * splits * config.block_inner if splits > 1 else 0
    index_64 = layout.needs_index_64(config.block_inner, reach, partial_len)
    dtypes = dtype if isinstance(dtype, tuple) else (dtype,)
    load_dtypes, state_dtypes, identities = combine.kernel_state(dtypes, index_64)
    inputs, outputs = len(dtypes), combine.outputs
    # Tuples of pointers only where needed: torch's tracing of Triton kernels (wrap_triton, under
    # torch.compile and export) sees the tensors of top-level arguments only.
    tuples = not isinstance(combine, ReduceRecord)
    if not tuples and len(state_dtypes) > 2:
        raise ValueError(f"combine: {combine.name} has {len(state_dtypes)} state components; "
                         "single-pointer launches carry at most two")
    state = dict(STATE_DTYPES=state_dtypes, IDENTITIES=identities, PTR_TUPLES=tuples)
    functions = dict(MERGE=combine.merge, ALONG=combine.along, FINISH=combine.finish)
    meta = dict(PREPARE=combine.prepare, **functions, LOAD_DTYPES=load_dtypes, **state,
                NEEDS_INDEX=combine.returns_index, RED_DIMS=layout.red_dims, INDEX_64=index_64,
                NEGATE_X=negate_x, BLOCK_AXIS=config.block_axis, BLOCK_INNER=config.block_inner,
                num_warps=config.num_warps)
    args = (layout.red_len, split_len, *layout.kernel_args())
    x, out = _steps.slots("x", inputs), _steps.slots("out", outputs)
    partial = _steps.slots("partial", len(state_dtypes))
    if tuples:
        x_arg, out_arg, state_arg, aux_arg = x, out, partial, ()
    else:
        # one input, one output: a component without a workspace gets any tensor, never touched
        x_arg, out_arg = x[0], out[0]
        state_arg = partial[0] if partial and splits > 1 else out_arg
        aux_arg = partial[1] if len(partial) > 1 and splits > 1 else state_arg
    if splits == 1:
        step = _steps.step(reduce_kernel, (chains, 1),
                           (x_arg, out_arg, out_arg, out_arg, out[0]) if not tuples
                           else (x_arg, out_arg, (), (), out[0]), args,
                           dict(WRITE_PARTIAL=False, FOLD_LAST=False, NEGATE_OUT=negate_out,
                                BLOCK_SPLIT=1, **meta))
        return _steps.Work((), (step,))
    workspaces = tuple(_steps.Workspace(s, partial_len, TORCH_DTYPE[d])
                       for s, d in zip(partial, state_dtypes))
    if config.one_launch:
        # The chain's last program folds: one arrival counter per chain, left at 0.
        arrivals = _steps.Slot("arrivals")
        workspaces += (_steps.Workspace(arrivals, chains, torch.int32,
                                        resident=_resident.ARRIVALS),)
        step = _steps.step(reduce_kernel, (chains, splits),
                           (x_arg, out_arg, state_arg, aux_arg, arrivals), args,
                           dict(WRITE_PARTIAL=True, FOLD_LAST=True, NEGATE_OUT=negate_out,
                                BLOCK_SPLIT=config.block_split, **meta))
        return _steps.Work(workspaces, (step,))
    partials = _steps.step(reduce_kernel, (chains, splits),
                           (x_arg, out_arg, state_arg, aux_arg, out[0]), args,
                           dict(WRITE_PARTIAL=True, FOLD_LAST=False, NEGATE_OUT=False,
                                BLOCK_SPLIT=1, **meta))
    fold = _steps.step(reduce_partials_kernel, (chains,), (state_arg, aux_arg, out_arg),
                       (splits, layout.red_len, layout.inner_len, layout.outer_sizes,
                        layout.out_inner_stride, layout.out_outer_strides),
                       dict(**functions, **state, NEGATE_OUT=negate_out, INDEX_64=index_64,
                            BLOCK_SPLIT=config.block_split, BLOCK_INNER=config.block_inner,
                            num_warps=config.num_warps))
    return _steps.Work(workspaces, (partials, fold))
