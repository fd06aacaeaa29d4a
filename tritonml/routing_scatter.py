"""How routing (tritonml/routing.py) reads and runs torch's scatter and index reductions:
``scatter_add``, ``scatter_reduce``, ``index_add``, ``index_reduce``, ``bincount`` with weights and
``index_put`` with ``accumulate=True``, each answered by tritonml's deterministic function of the
same meaning (tritonml/torch_ops/scatter.py).

Each ``route_*`` function is a ``CallRoute.handle``: ``(args, kwargs, inplace, readable)`` ->
torch's result computed by tritonml, or ``FALL_THROUGH`` wherever torch's result or error could
differ from ours. ``readable(t)``: t is a plain strided tensor on a device routed for this call.

Every route computes out of place first and only then writes ``self`` (in place) or ``out=``, so a
call tritonml refuses (an index out of range, found while ours reads the index) has written
nothing, and torch then runs it and raises its own error.

In place while autograd records (torch_geometric's ``x.new_zeros(size).scatter_add_(dim, index,
src)``), the functional result is computed from a clone of ``self`` (so no saved tensor sees the
write) and copied into ``self`` under autograd: ``self``'s history is rebased onto the result
(grad_fn ``CopyBackwards``), gradients reach both ``src`` and ``self``'s earlier history, and the
version counter counts one write, as torch's own in-place call does. Where torch refuses the
in-place call (a leaf that requires grad, or a view of one) the call falls through before any
launch and torch raises its own error.
"""
from __future__ import annotations


import operator
from dataclasses import dataclass, replace
from typing import Callable, Optional

import torch

from .core import torch_compat as _torch_compat
from .core.checks import has_internal_overlap
from .routing_args import FALL_THROUGH, FLOATS, INTEGERS, index_arg, signature_of
from .torch_ops import scatter as _scatter

# The dtypes routed: tritonml's values dtypes that torch implements these ops for (not bool,
# complex, or the wide unsigned types, where torch raises or has no kernel).
VALUES = FLOATS + INTEGERS

# torch's argument names and defaults (``self`` of the methods reads as ``input``)
SCATTER_ADD_ARGS = signature_of(lambda input, dim, index, src, *, out=None: None)
SCATTER_REDUCE_ARGS = signature_of(lambda input, dim, index, src, reduce, *, include_self=True,
                                   out=None: None)
INDEX_ADD_ARGS = signature_of(lambda input, dim, index, source, *, alpha=1, out=None: None)
INDEX_REDUCE_ARGS = signature_of(lambda input, dim, index, source, reduce, *, include_self=True,
                                 out=None: None)
BINCOUNT_ARGS = signature_of(lambda input, weights=None, minlength=0: None)
INDEX_PUT_ARGS = signature_of(lambda input, indices, values, accumulate=False: None)


def _bind(signature, args: tuple, kwargs: dict) -> Optional[dict]:
    kwargs = {("input" if k == "self" else k): v for k, v in kwargs.items()}
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None   # torch reads another overload (a named dim) or raises
    bound.apply_defaults()
    return bound.arguments


@dataclass(frozen=True)
class _Call:
    """One torch call as routing serves it: ``run(input)`` gives torch's functional result
    computed by tritonml from ``input`` (``self``, or its clone); ``input`` is written in place
    when ``inplace``, ``out`` when given; ``index`` and ``values`` are read (``values`` must have
    input's dtype, as torch requires). ``keeps_layout``: torch's new result has input's strides
    (index_put clones input; the others' results are contiguous). ``covered``: for amax/amin
    without self, () -> a bool mask of the input positions the index writes (see ``_serve``)."""
    run: Callable[[torch.Tensor], torch.Tensor]
    input: torch.Tensor
    index: torch.Tensor
    values: torch.Tensor
    inplace: bool = False
    out: Optional[torch.Tensor] = None
    index_dtypes: tuple = (torch.int64, torch.int32)
    keeps_layout: bool = False
    covered: Optional[Callable[[], torch.Tensor]] = None


def _plain(t, readable) -> bool:
    """A plain tensor (no DTensor or other subclass: their rules are torch's) ours can read."""
    return type(t) in (torch.Tensor, torch.nn.Parameter) and readable(t)


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def _records(call: _Call) -> bool:
    tensors = (call.input, call.values) + ((call.out,) if call.out is not None else ())
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _servable(call: _Call, readable) -> bool:
    """Whether tritonml gives torch's result for this call (its values still unread)."""
    x, index, values, out = call.input, call.index, call.values, call.out
    if not all(_plain(t, readable) for t in (x, index, values)):
        return False
    if (x.dtype not in VALUES or values.dtype != x.dtype or index.dtype not in call.index_dtypes
            or not index.device == values.device == x.device):
        return False   # torch converts, raises, or (index_put) reads a CPU index for CUDA data
    if _torch_compat.forward_ad_active():
        return False   # tangents are not carried into tritonml through routing
    records = _records(call)
    if call.inplace:
        if records and _torch_compat.leaf_or_view_of_leaf_requiring_grad(x):
            return False   # torch refuses the in-place write and raises its own error
        return (not has_internal_overlap(x)
                and not (x.is_inference() and not torch.is_inference_mode_enabled())
                and not any(_shares_memory(x, t) for t in (index, values)))
    if out is not None:
        return (not records and _plain(out, readable) and out.device == x.device
                and out.dtype == x.dtype and out.shape == x.shape and not has_internal_overlap(out)
                and not any(_shares_memory(out, t) for t in (x, index, values)))
    return True


def _deliver(call: _Call, result: torch.Tensor) -> torch.Tensor:
    """torch's result: ``self`` or ``out`` written (one version-counter bump, as torch's; in
    place under autograd the copy rebases ``self``'s history onto the result), or a new tensor
    laid out as torch's."""
    target = call.input if call.inplace else call.out
    if target is not None:
        target.copy_(result)
        return target
    if not call.keeps_layout or call.input.is_contiguous():
        return result.contiguous()
    laid_out = torch.empty_like(call.input)   # torch clones input, preserving its strides
    return laid_out.copy_(result)


def _extreme_without_self(reduce, include_self) -> bool:
    """amax/amin with include_self=False: torch counts input's value among a group's tied
    extremes but gives it no gradient (docs/scatter.md); tritonml shares among the elements."""
    return reduce in ("amax", "amin") and include_self is False


def _input_ties_a_group(call: _Call, input: torch.Tensor, result: torch.Tensor) -> bool:
    """Whether an input value the index overwrites equals its group's extreme: there torch's
    gradient (amax/amin without self) counts the input among the ties, tritonml's does not;
    everywhere else the two are the same."""
    with torch.no_grad():
        return bool(((input == result) & call.covered()).any())  # pyright: ignore[reportOptionalCall]


def _serve(call: Optional[_Call], readable):
    if call is None or not _servable(call, readable):
        return FALL_THROUGH
    records = _records(call)
    # in place under autograd, ours reads a clone: a tensor its backward saves is never written
    input = call.input.clone() if call.inplace and records else call.input
    try:
        result = call.run(input)
    except (TypeError, ValueError):
        # tritonml checks before it writes anything (an index value out of range among them):
        # torch runs the call and raises its own error
        return FALL_THROUGH
    if records and call.covered is not None and _input_ties_a_group(call, input, result):
        return FALL_THROUGH   # torch's gradient is its own there: torch runs the call
    try:
        return _deliver(call, result)
    except RuntimeError:
        if not (call.inplace and records):
            raise
        # autograd refused the write (a view torch forbids writing in place, e.g. one made in
        # no_grad mode or by unbind); self is unwritten, and torch raises its own error
        return FALL_THROUGH


# -- one reader per torch function ----------------------------------------------------------------


def _scatter_call(arguments: dict, inplace: bool, reduce: str, include_self) -> Optional[_Call]:
    x, index, src, dim = (arguments["input"], arguments["index"], arguments["src"],
                          index_arg(arguments["dim"]))
    if dim is None or not all(isinstance(t, torch.Tensor) for t in (x, index, src)):
        return None
    def covered():
        return torch.zeros_like(x, dtype=torch.bool).scatter_(dim, index, True)

    return _Call(lambda input: _scatter.scatter_reduce(input, dim, index, src, reduce,
                                                       include_self=include_self),
                 x, index, src, inplace, arguments["out"],
                 index_dtypes=(torch.int64,),   # torch's scatter takes int64 indices only
                 covered=covered if _extreme_without_self(reduce, include_self) else None)


def route_scatter_add(args, kwargs, inplace, readable):
    """torch.scatter_add, Tensor.scatter_add, Tensor.scatter_add_."""
    arguments = _bind(SCATTER_ADD_ARGS, args, kwargs)
    call = None if arguments is None else _scatter_call(arguments, inplace, "sum", True)
    return _serve(call, readable)


def route_scatter_reduce(args, kwargs, inplace, readable):
    """torch.scatter_reduce, Tensor.scatter_reduce, Tensor.scatter_reduce_."""
    arguments = _bind(SCATTER_REDUCE_ARGS, args, kwargs)
    call = None
    if arguments is not None and isinstance(arguments["reduce"], str):
        call = _scatter_call(arguments, inplace, arguments["reduce"], arguments["include_self"])
    return _serve(call, readable)


def _index_call(arguments: dict, inplace: bool, run) -> Optional[_Call]:
    x, index, source, dim = (arguments["input"], arguments["index"], arguments["source"],
                             index_arg(arguments["dim"]))
    if dim is None or not all(isinstance(t, torch.Tensor) for t in (x, index, source)):
        return None
    return _Call(lambda input: run(input, dim, index, source), x, index, source, inplace,
                 arguments["out"])


def route_index_add(args, kwargs, inplace, readable):
    """torch.index_add, Tensor.index_add, Tensor.index_add_ (any ``alpha`` torch takes)."""
    arguments = _bind(INDEX_ADD_ARGS, args, kwargs)
    if arguments is None:
        return FALL_THROUGH
    alpha = arguments["alpha"]
    call = _index_call(arguments, inplace,
                       lambda x, dim, index, source: _scatter.index_add(x, dim, index, source,
                                                                        alpha=alpha))
    return _serve(call, readable)


def route_index_reduce(args, kwargs, inplace, readable):
    """torch.index_reduce, Tensor.index_reduce, Tensor.index_reduce_."""
    arguments = _bind(INDEX_REDUCE_ARGS, args, kwargs)
    if arguments is None or not isinstance(arguments["reduce"], str):
        return FALL_THROUGH
    reduce, include_self = arguments["reduce"], arguments["include_self"]
    call = _index_call(arguments, inplace,
                       lambda x, dim, index, source: _scatter.index_reduce(
                           x, dim, index, source, reduce, include_self=include_self))
    if call is not None and _extreme_without_self(reduce, include_self):
        x, dim, index = call.input, index_arg(arguments["dim"]), call.index
        if dim is None:
            return FALL_THROUGH

        def covered():
            rows = torch.zeros(x.shape[dim] if x.dim() else 1, dtype=torch.bool, device=x.device)
            rows[index] = True
            shape = [1] * x.dim()
            if shape:
                shape[dim] = -1
            return rows.view(shape).expand_as(x)

        call = replace(call, covered=covered)
    return _serve(call, readable)


def route_bincount(args, kwargs, inplace, readable):
    """torch.bincount and Tensor.bincount with ``weights=``. Counts alone fall through: torch's
    are integers, exact and the same on every run already."""
    arguments = _bind(BINCOUNT_ARGS, args, kwargs)
    if arguments is None:
        return FALL_THROUGH
    x, weights, minlength = arguments["input"], arguments["weights"], arguments["minlength"]
    if not (isinstance(x, torch.Tensor) and isinstance(weights, torch.Tensor)
            and _plain(x, readable) and _plain(weights, readable)
            and weights.dtype in VALUES and weights.device == x.device
            and not (torch.is_grad_enabled() and weights.requires_grad) and x.numel() > 0):
        # torch.bincount has no gradient; of an empty input torch returns int64 zeros, weights
        # or not
        return FALL_THROUGH
    # the counted input plays the index, the weights the values (any dtype: torch converts them)
    call = _Call(lambda _: _scatter.bincount(x, weights, minlength), weights, x, weights,
                 index_dtypes=_scatter.BINCOUNT_DTYPES)
    return _serve(call, readable)


def _index_put_rows(arguments: dict) -> Optional[tuple[torch.Tensor, torch.Tensor]]:
    """(index, values broadcast to the selected rows) when index_put is an index_add on dim 0:
    ``accumulate=True`` and one 1-D integer index tensor; else None."""
    x, indices, values = arguments["input"], arguments["indices"], arguments["values"]
    if (arguments["accumulate"] is not True or not isinstance(indices, (tuple, list))
            or len(indices) != 1 or not isinstance(x, torch.Tensor) or x.dim() < 1
            or not isinstance(values, torch.Tensor)):
        return None
    index = indices[0]
    if (not isinstance(index, torch.Tensor) or index.dim() != 1
            or index.dtype not in (torch.int64, torch.int32)):
        return None   # masks (bool, uint8), None, 0-d or N-D indices are torch's
    rows = (index.shape[0], *x.shape[1:])
    try:
        if torch.broadcast_shapes(values.shape, rows) != rows:
            return None
    except RuntimeError:
        return None   # torch raises its own error
    return index, values.expand(rows)


def route_index_put(args, kwargs, inplace, readable):
    """Tensor.index_put_, Tensor.index_put and torch.index_put with ``accumulate=True`` and one
    1-D integer index (Python's negative indices wrap, as torch's indexing does)."""
    arguments = _bind(INDEX_PUT_ARGS, args, kwargs)
    picked = None if arguments is None else _index_put_rows(arguments)
    if picked is None:
        return FALL_THROUGH
    x, (index, values) = arguments["input"], picked  # pyright: ignore[reportOptionalSubscript]
    n = x.shape[0]

    def run(input):
        wrapped = torch.where(index < 0, index + n, index)
        return _scatter.index_add(input, 0, wrapped, values)

    return _serve(_Call(run, x, index, values, inplace, keeps_layout=True), readable)
