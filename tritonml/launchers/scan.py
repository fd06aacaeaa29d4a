"""Launchers for the cumulative operators (DirectML's CUMULATIVE_SUMMATION / CUMULATIVE_PRODUCT)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch

from tritonml_autotune import devices, select

from ..core import checks as _checks, layout as _layout
from ..runtime import plan as _plan
from tritonml_autotune.configs import ScanConfig
from ..core.dtypes import ACC_DTYPE, ACC_TORCH_DTYPE
from ..runtime import resident as _resident, scratch as _scratch, steps as _steps
from . import state_combine as _state_combine
from ..kernels import combine as _combine
from ..kernels.scan import scan_lookback_kernel, scan_tiled_kernel
from ..kernels.scan_chunked import scan_chunked_kernel


@dataclass(frozen=True)
class ScanCombine:
    """An associative combine function for scans: a ``@triton.jit`` function of (tally, value)
    and its identity (the first value an exclusive scan writes, and the padding of partial tiles)."""
    name: str
    fn: object
    identity: int


    def forms(self) -> tuple:
        """``(COMBINE, SCAN_COMBINE)``: the state and flat forms the kernels take
        (tritonml/kernels/scan.py). Sum and product keep Triton's own combine objects as their
        flat form, which the interpreter runs through numpy."""
        if self.fn is _combine.add:
            return _combine.add_state, _combine.add
        if self.fn is _combine.mul:
            return _combine.mul_state, _combine.mul
        return _state_combine.scalar_adapter(self.fn), self.fn


SUM = ScanCombine("sum", _combine.add, 0)
PRODUCT = ScanCombine("product", _combine.mul, 1)


def cumulative_scan(x: torch.Tensor, axis: int, combine: ScanCombine, *, reverse: bool = False,
                    exclusive: bool = False, initial: Optional[torch.Tensor] = None,
                    out: Optional[torch.Tensor] = None,
                    config: Optional[ScanConfig] = None, return_carry: bool = False):
    """Running ``combine`` of ``x`` along ``axis``, starting from ``initial`` when given; see
    ``tritonml.cumulative_sum``. ``return_carry``: return ``(out, carry)``, ``carry`` each scan's
    last inclusive state in x's accumulation dtype (``initial`` for the next chunk)."""
    return_carry = _checks.check_bool("return_carry", return_carry)
    carry = None
    if return_carry:
        _checks.check_tensor("x", x)
        axis = _checks.normalize_axis(axis, x.dim())
        if initial is not None:
            _check_initial(initial, x, axis)
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
                                                       initial, out, config, carry))
    if out is not None and not built:
        _checks.check_out_overlap(out, x, allow_alias_of=x, spans=plan.spans)
        _check_out_initial(out, initial)
    if out is None:
        # Same strides as a dense x (``plan.out_strides``), so loads and stores coalesce along
        # the same dimension.
        out = torch.empty_strided(x.shape, plan.out_strides, dtype=x.dtype, device=x.device)
    if plan.work is not None:
        plan.work.run(x, out, (initial if initial is not None else x,
                               carry if carry is not None else x))
    elif carry is not None:
        empty_carry(carry, initial, combine.identity)
    return (out, carry) if return_carry else out


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


def check_initial_meta(initial, x: torch.Tensor, axis: int) -> None:
    """What a fake kernel can check of ``initial`` (None passes): x's shape without ``axis``
    (normalized), x's dtype or its accumulation dtype (the kernels read the initial in the
    latter, so a carry kept in it continues a chunked scan with nothing rounded)."""
    if initial is None:
        return
    shape = tuple(x.shape[:axis]) + tuple(x.shape[axis + 1:])
    if tuple(initial.shape) != shape:
        raise ValueError(f"initial: shape {tuple(initial.shape)} does not match x's shape without "
                         f"axis {axis}, {shape}")
    accumulation = ACC_TORCH_DTYPE.get(x.dtype, x.dtype)
    if initial.dtype not in (x.dtype, accumulation):
        raise TypeError(f"initial: dtype {initial.dtype} is neither x's dtype {x.dtype} nor its "
                        f"accumulation dtype {accumulation} (a carry returned by return_carry=True)")


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
    """A validated call's canonical form (``tritonml.runtime.plan``): no layout for an empty x."""
    layout: Optional[_layout.AxisLayout]
    config: Optional[ScanConfig]
    out_strides: tuple
    reverse: bool
    exclusive: bool
    spans: Optional[tuple]  # (span_bytes(out), span_bytes(x)) for a given out
    has_initial: bool = False
    work: Optional[_steps.Work] = None  # what each call allocates and launches


def _plan_scan(x, axis, combine, reverse, exclusive, initial, out, config,
               carry=None) -> _ScanPlan:
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
                                    make_runner=make_runner).config
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
              ).run(x, out, (initial if has_initial else x, x))


def scan_work(layout, combine: ScanCombine, dtype: torch.dtype, negate_x: bool, negate_out: bool,
              *, reverse: bool, exclusive: bool, config: ScanConfig, has_initial: bool = False,
              negate_init: bool = False, store_carry: bool = False) -> _steps.Work:
    """The workspaces and launch ``launch_scan`` runs, for x of ``dtype``; ``negate_x`` /
    ``negate_out`` / ``negate_init``: x / out / initial is a torch view with the negative bit (the
    memory holds the negated values). The launch reads the initial from tensor slot 2 and writes
    the carry (``store_carry``) to slot 3 (``Work.run`` gets them, or x as an unused placeholder):
    the one-component case of ``state_work``."""
    combine_fn, scan_fn = combine.forms()
    return state_work((layout,), combine_fn, scan_fn, (combine.identity,), (ACC_DTYPE[dtype],),
                      (ACC_TORCH_DTYPE[dtype],), (negate_x,), (negate_out,), (negate_init,),
                      reverse=reverse, exclusive=exclusive, config=config,
                      has_initial=has_initial, store_carry=store_carry)


def state_work(layouts: tuple, combine_fn, scan_fn, identity: Optional[tuple], acc_dtypes: tuple,
               acc_torch_dtypes: tuple, negate_x: tuple, negate_out: tuple, negate_init: tuple, *,
               reverse: bool, exclusive: bool, config: ScanConfig,
               has_initial: bool = False, store: Optional[tuple] = None,
               store_carry: bool = False) -> _steps.Work:
    """The work of a scan of a state of k = ``len(layouts)`` components (one ``AxisLayout`` per
    component, all of one shape: ``state_layouts``). ``combine_fn``/``scan_fn``: the kernels'
    ``COMBINE``/``SCAN_COMBINE``; ``identity`` (one value per component) or None: the state is
    FLAGGED (tritonml/kernels/scan.py); ``acc_dtypes``: each component's accumulation type (Triton
    and torch); ``negate_*``: per component, a negative-bit view; ``store``: per component, whether
    its output is written (None: all).

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
        step = _steps.step(scan_lookback_kernel, (tiles,), slots, args,
                           dict(PREFIX_EVERY=config.prefix_every, **meta))
        return _steps.Work(workspaces, (step,))
    if config.regime == "chunked":
        status = 4 * k
        workspaces = (_steps.Workspace(2 + chunks, torch.int32,               # status words
                                       resident=_resident.LOOKBACK),
                      *(_steps.Workspace(chunks * config.block_inner, acc)    # published vectors
                        for acc in acc_torch_dtypes))
        slots = (x_slots, out_slots, init_slots, carry_slots, status,
                 pointers(tuple(range(status + 1, status + 1 + k))))
        # The built-in sum and product may fold a chunk's tiles element by element first.
        commutative = combine_fn in (_combine.add_state, _combine.mul_state)
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


def state_layouts(shape, x_strides: tuple, out_strides: tuple, axis: int,
                  init_strides: Optional[tuple] = None) -> tuple:
    """One ``AxisLayout`` per component (``x_strides[i]``, ``out_strides[i]``, ``init_strides[i]``:
    component i's tensors), all over the same outer dims x axis x inner: a dim merges with its
    neighbour only where it does in every tensor. One component: ``_layout.axis_layout`` itself."""
    if len(x_strides) == 1:
        return (_layout.axis_layout(shape, x_strides[0], out_strides[0], axis,
                                    init_strides[0] if init_strides is not None else None),)
    k = len(x_strides)
    if len(shape) == 0:
        shape, axis = (1,), 0
        x_strides, out_strides = ((1,),) * k, ((1,),) * k
        init_strides = ((),) * k if init_strides is not None else None
    others = [i for i in range(len(shape)) if i != axis]
    columns = {}
    for j, i in enumerate(others):
        cols = tuple(st[i] for st in x_strides) + tuple(st[i] for st in out_strides)
        if init_strides is not None:
            cols += tuple(st[j] for st in init_strides)
        columns[i] = cols
    dims = _layout.merge_dims([(shape[i], columns[i]) for i in others])
    width = 3 * k if init_strides is not None else 2 * k
    inner_len, inner_columns = dims[-1] if dims else (1, (0,) * width)
    outer = dims[:-1]
    axis_len = shape[axis]
    pad = _layout._pad
    layouts = []
    for c in range(k):
        extra = {}
        if init_strides is not None:
            col = 2 * k + c
            extra = dict(init_inner_stride=inner_columns[col],
                         init_outer_strides=pad((d[1][col] for d in outer), _layout.MAX_OUTER_DIMS, 0),
                         init_last=_layout.last_offset([shape[i] for i in others], init_strides[c]))
        layouts.append(_layout.AxisLayout(
            axis_len=axis_len, inner_len=inner_len,
            outer_sizes=pad((d[0] for d in outer), _layout.MAX_OUTER_DIMS, 1),
            x_axis_stride=x_strides[c][axis] if axis_len > 1 else 0,
            x_inner_stride=inner_columns[c],
            x_outer_strides=pad((d[1][c] for d in outer), _layout.MAX_OUTER_DIMS, 0),
            out_axis_stride=out_strides[c][axis] if axis_len > 1 else 0,
            out_inner_stride=inner_columns[k + c],
            out_outer_strides=pad((d[1][k + c] for d in outer), _layout.MAX_OUTER_DIMS, 0),
            x_last=_layout.last_offset(shape, x_strides[c]),
            out_last=_layout.last_offset(shape, out_strides[c]), **extra))
    return tuple(layouts)


# ---------------------------------------------------------------------------------------------
# Tuple-state scans with a user's combine function (tritonml.associative_scan, docs/dsl.md)
# ---------------------------------------------------------------------------------------------
def _as_tensors(name: str, value, arity: Optional[int]) -> tuple:
    """A tensor or a tuple/list of tensors as a tuple (``arity``: the length it must have)."""
    if isinstance(value, torch.Tensor):
        values = (value,)
    elif isinstance(value, (tuple, list)):
        values = tuple(value)
    else:
        raise TypeError(f"{name}: expected a torch.Tensor or a tuple of tensors, got "
                        f"{_checks._type_name(value)}")
    if arity is not None and len(values) != arity:
        raise ValueError(f"{name}: has {len(values)} tensor(s) but xs has {arity}; pass one per "
                         "tensor of xs")
    for i, t in enumerate(values):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}[{i}]: expected a torch.Tensor, got {_checks._type_name(t)}")
    return values


def _check_combine_fn(combine_fn, arity: int) -> None:
    """``combine_fn``: a ``@triton.jit`` function of two states returning a state of ``arity``
    values. Checked from its signature and its source: a ``return`` somewhere, each ``return``
    that spells a tuple of ``arity`` values (or not plainly a single value), and each constant
    index of a parameter (``b[2]``) within the state; anything else is checked when it compiles
    (a ``tl.static_assert`` in the generated adapter, tritonml/launchers/state_combine.py). Errors name
    the function and the line."""
    import ast
    import inspect
    import textwrap

    from ..core.triton_compat import is_jit_function
    if not is_jit_function(combine_fn):
        raise TypeError(f"combine_fn: expected a @triton.jit function, got "
                        f"{_checks._type_name(combine_fn)}")
    name = _state_combine.qualified_name(combine_fn)
    params = [p for p in inspect.signature(combine_fn.fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(params) != 2:
        raise TypeError(f"combine_fn: {name} ({_state_combine.where(combine_fn)}) takes "
                        f"{len(params)} parameter(s); it must take exactly two states (the earlier "
                        f"and the later operand), each a tuple of {arity} value(s)")
    try:
        lines, first = inspect.getsourcelines(combine_fn.fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return
    body = tree.body[0]

    def at(node) -> str:
        return f"combine_fn: {name} ({_state_combine.where(combine_fn, first + node.lineno - 1)})"
    nodes, stack = [], list(body.body)
    while stack:  # the function's own statements, not those of functions defined inside it
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        nodes.append(node)
        stack.extend(ast.iter_child_nodes(node))
    returns = [node for node in nodes if isinstance(node, ast.Return)]
    if not returns:
        raise ValueError(f"{at(body)} has no return statement; it must return a tuple of {arity} "
                         "value(s), one per tensor of xs (e.g. return (a[0] + b[0],))")
    for node in sorted(returns, key=lambda n: n.lineno):
        value = node.value
        if isinstance(value, (ast.Tuple, ast.List)):
            if len(value.elts) != arity:
                raise ValueError(f"{at(node)} returns {len(value.elts)} value(s); it must "
                                 f"return a tuple of {arity}, one per tensor of xs")
        elif value is None or isinstance(value, (ast.BinOp, ast.UnaryOp, ast.Compare,
                                                 ast.Constant, ast.BoolOp)):
            raise ValueError(f"{at(node)} returns a single value; it must return a tuple of "
                             f"{arity} value(s), one per tensor of xs (e.g. (a[0] + b[0],))")
    # A parameter reassigned in the function may hold anything: only the states are checked.
    states = {p.name for p in params} - {node.id for node in nodes if isinstance(node, ast.Name)
                                         and isinstance(node.ctx, ast.Store)}
    for node in sorted(nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id in states and isinstance(node.slice, ast.Constant)
                and type(node.slice.value) is int
                and not -arity <= node.slice.value < arity):
            raise ValueError(f"{at(node)} reads {node.value.id}[{node.slice.value}], but each "
                             f"state holds {arity} component(s), one per tensor of xs: "
                             f"{node.value.id}[0] to {node.value.id}[{arity - 1}]")


def _check_identity(identity, arity: int) -> Optional[tuple]:
    if identity is None:
        return None
    if isinstance(identity, (int, float)) and not isinstance(identity, bool) and arity == 1:
        identity = (identity,)
    if not isinstance(identity, (tuple, list)):
        raise TypeError(f"identity: expected a tuple of {arity} number(s) or None, got "
                        f"{_checks._type_name(identity)}")
    if len(identity) != arity:
        raise ValueError(f"identity: has {len(identity)} value(s) but xs has {arity} tensor(s); "
                         "give one identity per tensor")
    for i, value in enumerate(identity):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"identity[{i}]: expected an int or a float, got "
                            f"{_checks._type_name(value)}")
    return tuple(identity)


def associative_scan_states(combine_fn, xs, axis, *, reverse=False, exclusive=False,
                            identity=None, initial=None, out=None, config=None, store=None,
                            return_carry=False):
    """The launcher of ``tritonml.associative_scan`` (see there and docs/dsl.md): validates every
    argument before anything is allocated or launched, then runs the scan kernels on a state with
    one component per tensor of ``xs``. Returns the tuple of outputs.

    ``store`` (library-internal, e.g. ``tritonml.linear_recurrence``): one bool per component, or
    None for all; a component with False is scanned but never written, and its entry in the
    returned tuple is None (``out`` must then be None).

    ``return_carry``: return ``(outputs, carries)``, ``carries`` each component's last inclusive
    state in its accumulation dtype (what ``initial`` takes to continue the scan exactly)."""
    # --- validate (nothing is launched or written before every check has passed) ---
    xs = _as_tensors("xs", xs, None)
    if not xs:
        raise ValueError("xs: is empty; pass at least one tensor")
    k = len(xs)
    for i, x in enumerate(xs):
        _checks.check_tensor(f"xs[{i}]", x)
    shape, device = tuple(xs[0].shape), xs[0].device
    for i, x in enumerate(xs[1:], 1):
        if tuple(x.shape) != shape:
            raise ValueError(f"xs[{i}]: shape {tuple(x.shape)} does not match xs[0]'s shape "
                             f"{shape}; every tensor of xs must have one shape")
        if x.device != device:
            raise ValueError(f"xs[{i}]: tensor is on {x.device} but xs[0] is on {device}; "
                             "tensors must be on the same device")
    _check_combine_fn(combine_fn, k)
    axis = _checks.normalize_axis(axis, len(shape))
    reverse = _checks.check_bool("reverse", reverse)
    exclusive = _checks.check_bool("exclusive", exclusive)
    identity = _check_identity(identity, k)
    if exclusive and identity is None:
        raise ValueError("identity: an exclusive scan needs the combine's identity (the state "
                         "its first output holds); pass identity=(one value per tensor of xs)")
    initials = None
    if initial is not None:
        initials = _as_tensors("initial", initial, k)
        for i, (init, x) in enumerate(zip(initials, xs)):
            name = f"initial[{i}]"
            _checks.check_readable(name, init)
            expected = shape[:axis] + shape[axis + 1:]
            if tuple(init.shape) != expected:
                raise ValueError(f"{name}: shape {tuple(init.shape)} does not match xs's shape "
                                 f"without axis {axis}, {expected}")
            if init.dtype not in (x.dtype, ACC_TORCH_DTYPE[x.dtype]):
                raise TypeError(f"{name}: dtype {init.dtype} is neither xs[{i}]'s dtype {x.dtype} "
                                f"nor its accumulation dtype {ACC_TORCH_DTYPE[x.dtype]} (a carry "
                                "returned by return_carry=True)")
            if init.device != device:
                raise ValueError(f"{name}: tensor is on {init.device} but xs is on {device}; "
                                 "tensors must be on the same device")
    outs = None
    if out is not None:
        outs = _as_tensors("out", out, k)
        for i, (o, x) in enumerate(zip(outs, xs)):
            name = f"out[{i}]"
            _checks.check_out(o, x, shape=shape, dtype=x.dtype, name=name, allow_alias_of=x)
            for j, other in enumerate(xs):
                if j != i and _checks.overlaps(o, other):
                    raise ValueError(f"{name}: overlaps xs[{j}]; an output may alias only its own "
                                     "input (xs[i] for out[i])")
            for j, other in enumerate(outs[:i]):
                if _checks.overlaps(o, other):
                    raise ValueError(f"{name}: overlaps out[{j}]; every output needs its own memory")
            for j, init in enumerate(initials or ()):
                if _checks.overlaps(o, init):
                    raise ValueError(f"{name}: overlaps initial[{j}]; the initial is read while out "
                                     "is written, so pass an initial that does not overlap out")
    if config is not None:
        if not isinstance(config, ScanConfig):
            raise TypeError(f"config: expected a ScanConfig, got {type(config).__name__}")
        config.validate()

    if store is not None:
        store = tuple(bool(s) for s in store)
        if len(store) != k or outs is not None:
            raise ValueError(f"store: expected {k} flags and no out, got {store!r}")
    return_carry = _checks.check_bool("return_carry", return_carry)
    if return_carry and identity is None and initials is None and shape[axis] == 0:
        raise ValueError("return_carry: a scan with neither identity nor initial over an empty "
                         "axis has no last state; pass identity= or initial=")
    carries = None
    if return_carry:
        initials, carries = carry_tensors(initials, xs, axis)

    # --- outputs, layouts, config ---
    if outs is None:
        # A component that is not stored gets its input as a stand-in output: its strides make a
        # valid layout, and the kernel never writes through it.
        outs = tuple(torch.empty_like(x, memory_format=torch.preserve_format)
                     if store is None or store[i] else x for i, x in enumerate(xs))

    def returned(outputs):
        if store is not None:
            outputs = tuple(o if kept else None for o, kept in zip(outputs, store))
        return (outputs, carries) if return_carry else outputs
    if xs[0].numel() == 0:
        for i, carry in enumerate(carries or ()):
            empty_carry(carry, initials[i] if initials else None, identity[i] if identity else 0)
        return returned(outs)
    # the carries (return_carry) are written through the initials' strides, which they share
    init_strides = tuple(t.stride() for t in (carries or initials or ()))
    layouts = state_layouts(shape, tuple(x.stride() for x in xs), tuple(o.stride() for o in outs),
                            axis, init_strides or None)
    if config is None:
        element_bytes = (sum(x.dtype.itemsize for x in xs),
                         sum(ACC_TORCH_DTYPE[x.dtype].itemsize for x in xs))
        name = f"{combine_fn.fn.__module__}.{combine_fn.fn.__qualname__}"
        config = select.choose_scan(layouts[0], xs[0].dtype, device, name,
                                    element_bytes=element_bytes).config
    combine, scan_combine = _state_combine.state_adapters(combine_fn, k, identity is None)
    work = state_work(layouts, combine, scan_combine, identity,
                      tuple(ACC_DTYPE[x.dtype] for x in xs),
                      tuple(ACC_TORCH_DTYPE[x.dtype] for x in xs),
                      tuple(x.is_neg() for x in xs), tuple(o.is_neg() for o in outs),
                      tuple(t.is_neg() for t in initials) if initials else (False,) * k,
                      reverse=reverse, exclusive=exclusive, config=config,
                      has_initial=initials is not None, store=store,
                      store_carry=carries is not None)
    try:
        work.run(xs[0], outs[0], (*xs[1:], *outs[1:], *(initials if initials else xs),
                                  *(carries if carries else xs)))
    except Exception as error:
        # The user's own error, once, at its line (not Triton's wrappers around it).
        failure = _state_combine.combine_error(error, combine_fn, k)
        if failure is None:
            raise
        raise failure from None
    return returned(outs)
