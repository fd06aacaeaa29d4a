"""What a scan launch is made of: the kernels' arguments for a canonical layout, the workspaces
each regime needs (look-back status words and published vectors, tritonml/runtime/resident.py),
and the carry tensors of ``return_carry``. ``scan_work`` / ``state_work`` build a
``tritonml.runtime.steps.Work`` that a plan keeps and runs on each call."""
from __future__ import annotations

from typing import Optional

import torch

from tritonml_autotune.configs import ScanConfig

from ..core.dtypes import ACC_TORCH_DTYPE, TL_DTYPE
from ..runtime import resident as _resident, steps as _steps
from ..kernels.scan import scan_lookback_kernel, scan_tiled_kernel
from ..kernels.scan_chunked import scan_chunked_kernel
from ..records.scan_combine import ScanCombine


def carry_tensors(initials: Optional[tuple], xs: tuple, axis: int):
    """``(initials, carries)`` for a scan that returns its carry: one tensor per component of xs's
    shape without ``axis`` (normalized) in its accumulation dtype, laid out like its initial, as
    the kernels write the carry through the initial's strides (``state_work``). An initial whose
    layout a dense tensor cannot share (an expanded or overlapping view) is copied to a dense one
    (it is one slice of x: small)."""
    shape = tuple(xs[0].shape[:axis]) + tuple(xs[0].shape[axis + 1:])
    if initials is None:
        return None, tuple(torch.empty(shape, dtype=ACC_TORCH_DTYPE[x.dtype], device=x.device)
                           for x in xs)
    dense_initials, carries = [], []
    for init, x in zip(initials, xs):
        carry = torch.empty_like(init, dtype=ACC_TORCH_DTYPE[x.dtype],
                                 memory_format=torch.preserve_format)
        if carry.stride() != init.stride():
            init = init.contiguous()
            carry = torch.empty_like(init, dtype=carry.dtype, memory_format=torch.contiguous_format)
        dense_initials.append(init)
        carries.append(carry)
    return tuple(dense_initials), tuple(carries)


def empty_carry(carry: torch.Tensor, initial, identity) -> None:
    """The carry of a scan over no elements: the initial, else the identity."""
    if initial is not None:
        carry.copy_(initial)
    else:
        carry.fill_(identity)



def scan_work(layout, combine: ScanCombine, dtype: torch.dtype, negate_x: bool, negate_out: bool,
              *, reverse: bool, exclusive: bool, config: ScanConfig, has_initial: bool = False,
              negate_init: bool = False, store_carry: bool = False) -> _steps.Work:
    """The workspaces and launch of a scan of x of ``dtype`` under the record ``combine``
    (tritonml/records/builtin_scans.py): its kernel forms, identity and state dtype.
    ``negate_x`` / ``negate_out`` / ``negate_init``: x / out / initial is a torch view with the
    negative bit (the memory holds the negated values). The launch reads the initial from tensor
    slot 2 and writes the carry (``store_carry``) to slot 3 (``Work.run`` gets them, or x as an
    unused placeholder): the one-component case of ``state_work``."""
    combine_fn, scan_fn = combine.forms()
    state_dtype = combine.state_dtype(dtype)
    return state_work((layout,), combine_fn, scan_fn, (combine.identity,), (TL_DTYPE[state_dtype],),
                      (state_dtype,), (negate_x,), (negate_out,), (negate_init,),
                      reverse=reverse, exclusive=exclusive, config=config,
                      has_initial=has_initial, store_carry=store_carry,
                      commutative=combine.commutative)


def state_work(layouts: tuple, combine_fn, scan_fn, identity: Optional[tuple], acc_dtypes: tuple,
               acc_torch_dtypes: tuple, negate_x: tuple, negate_out: tuple, negate_init: tuple, *,
               reverse: bool, exclusive: bool, config: ScanConfig,
               has_initial: bool = False, store: Optional[tuple] = None,
               store_carry: bool = False, commutative: bool = False) -> _steps.Work:
    """The work of a scan of a state of k = ``len(layouts)`` components (one ``AxisLayout`` per
    component, all of one shape: ``tritonml.core.layout.axis_layouts``). ``combine_fn``/``scan_fn``:
    the kernels'
    ``COMBINE``/``SCAN_COMBINE``; ``identity`` (one value per component) or None: the state is
    FLAGGED (tritonml/kernels/scan.py); ``acc_dtypes``: each component's accumulation type (Triton
    and torch); ``negate_*``: per component, a negative-bit view; ``store``: per component, whether
    its output is written (None: all); ``commutative``: the chunked kernel may fold a chunk's tiles
    element by element first (the record's flag, tritonml/records/builtin_scans.py).

    ``store_carry``: each scan also writes its last inclusive state, in the accumulation dtypes,
    to carry tensors laid out like the initials (the layouts' init strides).

    Tensor slots (``Work.run(xs[0], outs[0], (*xs[1:], *outs[1:], *initials, *carries))``): x_i
    is 0, 2, ..., k; out_i 1, k + 1, ..., 2k - 1; initial_i 2k + i, carry_i 3k + i (x_i stands in
    for either when there is none); then the look-back's status words and its k aggregate and k
    prefix workspaces."""
    k = len(layouts)
    layout = layouts[0]
    chains = layout.chains(config.block_inner)
    tiles_per_chain = -(-layout.axis_len // config.block_axis)
    tiles = chains * tiles_per_chain
    chunks = chains * -(-tiles_per_chain // config.chunk_tiles)
    workspace_slots = {"lookback": tiles, "chunked": chunks}.get(config.regime, 0) \
        * config.block_inner
    index_64 = any(lay.needs_index_64(config.block_axis, config.block_inner, workspace_slots)
                   for lay in layouts)
    flagged = identity is None
    meta = dict(COMBINE=combine_fn, SCAN_COMBINE=scan_fn,
                IDENTITY=(0,) * k if flagged else tuple(identity), ACC_DTYPE=tuple(acc_dtypes),
                FLAGGED=flagged, REVERSE=reverse, EXCLUSIVE=exclusive, NEGATE_X=tuple(negate_x),
                NEGATE_OUT=tuple(negate_out),
                STORE=tuple(bool(s) for s in store) if store is not None else (True,) * k,
                HAS_INITIAL=has_initial,
                NEGATE_INIT=tuple(negate_init), STORE_CARRY=store_carry, INDEX_64=index_64,
                BLOCK_AXIS=config.block_axis, BLOCK_INNER=config.block_inner,
                PTR_TUPLES=k > 1, num_warps=config.num_warps)

    def pointers(slots: tuple):
        # one component: plain tensors, which torch's Triton-kernel tracing can see
        # (tritonml/kernels/scan.py, _PTR_TUPLES_WHY)
        return slots if k > 1 else slots[0]
    x_slots = pointers((0, *range(2, k + 1)))
    out_slots = pointers((1, *range(k + 1, 2 * k)))
    init_slots = pointers(tuple(range(2 * k, 3 * k)))
    carry_slots = pointers(tuple(range(3 * k, 4 * k)))
    args = layout_args(layouts)
    if config.regime == "lookback":
        status = 4 * k
        workspaces = (_steps.Workspace(2 + tiles, torch.int32,                # status words
                                       resident=_resident.LOOKBACK),
                      *(_steps.Workspace(tiles * config.block_inner, acc)      # aggregates
                        for acc in acc_torch_dtypes),
                      *(_steps.Workspace(tiles * config.block_inner, acc)      # prefixes
                        for acc in acc_torch_dtypes))
        slots = (x_slots, out_slots, init_slots, carry_slots, status,
                 pointers(tuple(range(status + 1, status + 1 + k))),
                 pointers(tuple(range(status + 1 + k, status + 1 + 2 * k))))
        step = _steps.step(scan_lookback_kernel, (tiles,), slots, args, meta)
        return _steps.Work(workspaces, (step,))
    if config.regime == "chunked":
        status = 4 * k
        workspaces = (_steps.Workspace(2 + chunks, torch.int32,               # status words
                                       resident=_resident.LOOKBACK),
                      *(_steps.Workspace(chunks * config.block_inner, acc)    # published vectors
                        for acc in acc_torch_dtypes))
        slots = (x_slots, out_slots, init_slots, carry_slots, status,
                 pointers(tuple(range(status + 1, status + 1 + k))))
        step = _steps.step(scan_chunked_kernel, (chunks,), slots, (*args, config.chunk_tiles),
                           dict(COMMUTATIVE=commutative, WINDOW=config.window, **meta))
        return _steps.Work(workspaces, (step,))
    step = _steps.step(scan_tiled_kernel, (chains,), (x_slots, out_slots, init_slots, carry_slots),
                       args, meta)
    return _steps.Work((), (step,))


def layout_args(layouts: tuple) -> tuple:
    """The scan kernels' layout arguments for one ``AxisLayout`` per component: the shared sizes,
    then each stride as a tuple with one entry per component."""
    first = layouts[0]

    def each(name):
        return tuple(getattr(lay, name) for lay in layouts)
    return (first.axis_len, first.inner_len, first.outer_sizes,
            each("x_axis_stride"), each("x_inner_stride"), each("x_outer_strides"),
            each("out_axis_stride"), each("out_inner_stride"), each("out_outer_strides"),
            each("init_inner_stride"), each("init_outer_strides"))


