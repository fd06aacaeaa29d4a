"""``torch.ops.tritonml.*`` on DTensors (``torch.distributed.tensor``).

DTensor runs an op through a sharding strategy, which only says which placements an op accepts:
a scan or reduction along a sharded dim would be all-gathered first (every rank gets the whole
data). Instead each op gets a DTensor rule (``torch.library.register_torch_dispatch``, public
API) that hands the call to ``tritonml.distributed``: along a dim that a ``Shard`` placement
splits, its SPMD protocol (only per-rank states cross the network); along any other dim, each rank
runs the op on its local shard and the result keeps the input's placements. ``Partial``
placements are made ``Replicate`` first (a redistribute), except where the op writes its input or
``out`` in place. The public functions call these ops on DTensors, so they take DTensors too
(docs/distributed.md, "DTensor through tritonml's own functions and ops").

Only ``register()`` touches ``torch.distributed``; ``tritonml.distributed`` is imported on the
first DTensor call.
"""
from __future__ import annotations

from typing import Any

import torch

from ..core import checks as _checks
from ..core.shapes import reduced_shape
from ..records.builtin_scans import LINEAR_RECURRENCE

# tritonml.distributed, which runs these rules' work, sits above the torch ops: it puts itself
# here when it is imported (``attach``), which tritonml/__init__.py has done before any DTensor
# exists (when torch.distributed.tensor is imported).
_distributed: Any = None


def attach(distributed) -> None:
    """Hand the rules ``tritonml.distributed`` (called by it at its import)."""
    global _distributed
    _distributed = distributed


def _td():
    if _distributed is None:
        raise RuntimeError("tritonml.distributed is not imported: import tritonml.distributed "
                           "before calling tritonml's ops on DTensors")
    return _distributed


def _is_dtensor(t) -> bool:
    from torch.distributed.tensor import DTensor
    return isinstance(t, DTensor)


def _no_partial(name: str, t):
    """``t`` with Partial placements resolved to Replicate (a redistribute); other placements
    unchanged. A tritonml scan or reduction of pending partial sums is only defined on their
    total."""
    from torch.distributed.tensor import Partial, Replicate
    if not any(isinstance(p, Partial) for p in t.placements):
        return t
    return t.redistribute(t.device_mesh, [Replicate() if isinstance(p, Partial) else p
                                          for p in t.placements])


def _refuse_partial(name: str, t) -> None:
    """A tensor the op writes cannot be redistributed: its Partial placement is refused."""
    from torch.distributed.tensor import Partial
    if any(isinstance(p, Partial) for p in t.placements):
        raise NotImplementedError(f"{name}: placement {list(t.placements)} holds Partial; an op "
                                  f"that writes {name} needs Shard or Replicate placements "
                                  "(redistribute it first)")


def _dtensor_arg(name: str, t, like):
    """``t`` (a DTensor, or a plain tensor taken as replicated over ``like``'s mesh) as a DTensor on
    ``like``'s mesh."""
    from torch.distributed.tensor import DTensor, Replicate
    if _is_dtensor(t):
        if t.device_mesh != like.device_mesh:
            raise ValueError(f"{name}: DTensor on mesh {t.device_mesh}, but the op's first "
                             f"tensor is on mesh {like.device_mesh}; use one mesh")
        return t
    _checks.check_readable(name, t)
    return DTensor.from_local(t, like.device_mesh, [Replicate()] * like.device_mesh.ndim,
                              run_check=False)


def _first(name: str, t):
    if not _is_dtensor(t):
        raise TypeError(f"{name}: expected a DTensor when another argument of the op is one "
                        f"(got {_checks._type_name(t)}); make {name} a DTensor "
                        "(torch.distributed.tensor.distribute_tensor)")
    return t


def _without_dim(placements, axis: int) -> list:
    """The placements of a slice without tensor dim ``axis`` (a scan's ``initial``): a mesh dim
    sharding ``axis`` holds the whole slice (Replicate), other Shard dims are renumbered."""
    from torch.distributed.tensor import Replicate, Shard
    result = []
    for p in placements:
        if isinstance(p, Shard) and p.dim == axis:
            result.append(Replicate())
        elif isinstance(p, Shard):
            result.append(Shard(p.dim - (p.dim > axis)))
        else:
            result.append(p)
    return result


def _initial_like(initial, x, axis: int):
    """``initial`` redistributed to match ``x`` (its shards are slices of x's shards)."""
    if initial is None:
        return None
    initial = _dtensor_arg("initial", initial, x)
    axis = _checks.normalize_axis(axis, x.dim())
    return initial.redistribute(x.device_mesh, _without_dim(x.placements, axis))


def _same_placements(name: str, t, x, placements=None) -> None:
    want = list(x.placements if placements is None else placements)
    if not _is_dtensor(t) or list(t.placements) != want or t.device_mesh != x.device_mesh:
        got = list(t.placements) if _is_dtensor(t) else _checks._type_name(t)
        raise ValueError(f"{name}: must be a DTensor on x's mesh with placements {want} (the "
                         f"result's), got {got}")


# ---------------------------------------------------------------------------------------------
# The rules, one per op family; each takes the op's arguments as its schema names them
# ---------------------------------------------------------------------------------------------
def _scan_functional(name: str):
    def rule(x, axis, reverse=False, exclusive=False, initial=None):
        x = _no_partial("x", _first("x", x))
        scan = getattr(_td(), name)   # tritonml.distributed's function of the op's name
        return scan(x, axis, reverse=reverse, exclusive=exclusive,
                    initial=_initial_like(initial, x, axis))
    return rule


def _scan_out(name: str):
    def rule(x, axis, reverse, exclusive, out, initial=None):
        x = _no_partial("x", _first("x", x))
        _refuse_partial("out", _first("out", out))
        _same_placements("out", out, x)
        scan = getattr(_td(), name)
        scan(x, axis, reverse=reverse, exclusive=exclusive,
             initial=_initial_like(initial, x, axis), out=out)
    return rule


def _scan_in_place(name: str):
    def rule(x, axis, reverse=False, exclusive=False, initial=None):
        _refuse_partial("x", _first("x", x))
        scan = getattr(_td(), name)
        scan(x, axis, reverse=reverse, exclusive=exclusive,
             initial=_initial_like(initial, x, axis), out=x)
    return rule


def _reduce(x, function, axes, keepdims, index_dtype):
    x = _no_partial("x", _first("x", x))
    return _td().reduce(x, function, list(axes) or None, keepdims=keepdims,
                        index_dtype=index_dtype)


def _reduce_out(x, function, axes, keepdims, index_dtype, out):
    x = _no_partial("x", _first("x", x))
    _refuse_partial("out", _first("out", out))
    red = _checks.normalize_axes(list(axes) or None, x.dim())
    _same_placements("out", out, x, _td().dtensor.reduced_placements(x.placements, red, keepdims))
    _td().reduce(x, function, list(axes) or None, keepdims=keepdims, index_dtype=index_dtype,
                 out=out)


def _linear_recurrence(gates, tokens, axis, reverse=False, initial=None):
    gates = _no_partial("gates", _first("gates", gates))
    tokens = _no_partial("tokens", _dtensor_arg("tokens", tokens, gates))
    # both step inputs shard alike, so each rank's two shards are the same slices
    tokens = tokens.redistribute(gates.device_mesh, gates.placements)
    initial = _initial_like(initial, gates, axis)
    # the state is the affine map h -> a*h + b, its carry-in (1, initial): launchers/recurrence.py
    initials = None if initial is None else (torch.ones_like(initial), initial)
    _, h = _td().associative_scan(LINEAR_RECURRENCE.fn, (gates, tokens), axis, reverse=reverse,
                                  identity=(1, 0), initial=initials)
    return h


def register() -> None:
    """Give every ``torch.ops.tritonml`` op its DTensor rule (once, when torch.distributed.tensor
    is imported, or at ``import tritonml`` if it already was)."""
    from torch.distributed.tensor import DTensor
    rules = {"reduce": _reduce, "reduce_out": _reduce_out,
             "linear_recurrence": _linear_recurrence}
    from .scan import OPS_BY_NAME
    for name in OPS_BY_NAME:   # each cumulative operator's ops
        rules[name] = _scan_functional(name)
        rules[f"{name}_out"] = _scan_out(name)
        rules[f"{name}_"] = _scan_in_place(name)
    for name, rule in rules.items():
        torch.library.register_torch_dispatch(f"tritonml::{name}", DTensor, _dispatching(rule))


def _dispatching(rule):
    def handler(cls, func, types, args=(), kwargs=None):
        return rule(*args, **(kwargs or {}))
    return handler


# ---------------------------------------------------------------------------------------------
# The public functions that are not torch ops
# ---------------------------------------------------------------------------------------------
def any_dtensor(*values) -> bool:
    """Whether any of ``values`` (tensors, tuples of them, None) is a DTensor; False without
    importing torch.distributed when no DTensor can exist yet."""
    import sys
    module = sys.modules.get("torch.distributed.tensor")
    if module is None:
        return False
    flat = []
    for v in values:
        flat.extend(v if isinstance(v, (tuple, list)) else (v,))
    return any(isinstance(v, module.DTensor) for v in flat)


def associative_scan(combine_fn, xs, axis, reverse, exclusive, identity, initial, out, config):
    if config is not None:
        raise NotImplementedError("config: not supported for DTensor inputs (each rank's scan "
                                  "takes the tuned choice); leave config None")
    tensors = xs if isinstance(xs, (tuple, list)) else (xs,)
    first = _no_partial("xs", _first("xs", tensors[0]))
    moved = tuple(first if t is tensors[0] else
                  _no_partial("xs", _dtensor_arg("xs", t, first)).redistribute(
                      first.device_mesh, first.placements) for t in tensors)
    if initial is not None:
        initial = tuple(_initial_like(t, first, axis) for t in
                        (initial if isinstance(initial, (tuple, list)) else (initial,)))
    # (untyped: DTensors, which the typed overloads of tensors do not list)
    scan: Any = _td().associative_scan
    return scan(combine_fn, moved if isinstance(xs, (tuple, list)) else moved[0], axis,
                reverse=reverse, exclusive=exclusive, identity=identity, initial=initial, out=out)


def reduce_with(run_local, reduction, xs, axes, keepdims):
    """A user reduction of DTensors: local (each rank reduces its shards, placements kept) when no
    reduced dim is sharded; tritonml.distributed has no fold for a user reduction otherwise."""
    from torch.distributed.tensor import Shard
    tensors = xs if isinstance(xs, (tuple, list)) else (xs,)
    first = _no_partial("xs", _first("xs", tensors[0]))
    red = _checks.normalize_axes(axes, first.dim())
    sharded = [p.dim for p in first.placements if isinstance(p, Shard) and p.dim in red]
    if sharded:
        raise NotImplementedError(
            f"tritonml.reduce_with: axes: dims {sharded} of the DTensor are sharded, and a user "
            "reduction has no distributed fold (tritonml.distributed supports the built-in "
            "functions only); redistribute those dims to Replicate, or reduce dims that are not "
            "sharded")
    locals_ = tuple((first if t is tensors[0] else _no_partial("xs", _dtensor_arg("xs", t, first))
                     .redistribute(first.device_mesh, first.placements)).to_local()
                    for t in tensors)
    outs = run_local(locals_ if isinstance(xs, (tuple, list)) else locals_[0])
    outs = outs if isinstance(outs, tuple) else (outs,)
    in_and_out = _td().dtensor
    shape = reduced_shape(first.shape, red, keepdims)
    placements = in_and_out.reduced_placements(first.placements, red, keepdims)
    wrapped = tuple(in_and_out.from_local(o, first, placements, shape) for o in outs)
    return wrapped[0] if len(wrapped) == 1 else wrapped
