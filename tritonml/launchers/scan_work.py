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
    negative bit (the memory holds the negated values). The launch reads the initial from the
    slot ``initial`` and writes the carry (``store_carry``) to ``carry``: the one-component case
    of ``state_work``."""
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

    Tensor slots (``Work.run(x=xs, out=outs, initial=initials, carry=carries)``): ``x``,
    ``out``, ``initial`` (``has_initial``) and ``carry`` (``store_carry``), one of each per
    component (x_i stands in for an initial or a carry there is none of: never read or written);
    the workspaces ``status`` (the look-back's status words), and per component ``aggregate``
    and ``prefix`` (look-back) or ``published`` (chunked)."""
    k = len(layouts)
    layout = layouts[0]
    chains = layout.chains(config.block_inner)
    tiles_per_chain = -(-layout.axis_len // config.block_axis)
    tiles = chains * tiles_per_chain
    chunks = chains * -(-tiles_per_chain // config.chunk_tiles)
    workspace_len = {"lookback": tiles, "chunked": chunks}.get(config.regime, 0) \
        * config.block_inner
    index_64 = any(lay.needs_index_64(config.block_axis, config.block_inner, workspace_len)
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
    x, out = _steps.slots("x", k), _steps.slots("out", k)
    init = _steps.slots("initial", k) if has_initial else x
    carry = _steps.slots("carry", k) if store_carry else x
    tensors = tuple(pointers(s) for s in (x, out, init, carry))
    args = layout_args(layouts)
    status = _steps.Slot("status")
    if config.regime == "lookback":
        aggregates, prefixes = _steps.slots("aggregate", k), _steps.slots("prefix", k)
        workspaces = (_steps.Workspace(status, 2 + tiles, torch.int32,
                                       resident=_resident.LOOKBACK),
                      *(_steps.Workspace(s, tiles * config.block_inner, acc)
                        for s, acc in zip(aggregates, acc_torch_dtypes)),
                      *(_steps.Workspace(s, tiles * config.block_inner, acc)
                        for s, acc in zip(prefixes, acc_torch_dtypes)))
        step = _steps.step(scan_lookback_kernel, (tiles,),
                           (*tensors, status, pointers(aggregates), pointers(prefixes)), args, meta)
        return _steps.Work(workspaces, (step,))
    if config.regime == "chunked":
        published = _steps.slots("published", k)
        workspaces = (_steps.Workspace(status, 2 + chunks, torch.int32,
                                       resident=_resident.LOOKBACK),
                      *(_steps.Workspace(s, chunks * config.block_inner, acc)
                        for s, acc in zip(published, acc_torch_dtypes)))
        step = _steps.step(scan_chunked_kernel, (chunks,), (*tensors, status, pointers(published)),
                           (*args, config.chunk_tiles),
                           dict(COMMUTATIVE=commutative, WINDOW=config.window, **meta))
        return _steps.Work(workspaces, (step,))
    step = _steps.step(scan_tiled_kernel, (chains,), tensors, args, meta)
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


