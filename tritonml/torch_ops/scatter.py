"""torch's scatter and index reductions, deterministic: ``tritonml.scatter_reduce``,
``scatter_add``, ``index_add``, ``index_reduce`` and ``bincount``, with torch's signatures and
semantics (docs/scatter.md).

Each groups ``src`` by ``index`` (tritonml/torch_ops/scatter_groups.py: a stable sort, then the
segment kernel), then folds ``input`` in where torch does (``include_self``). No atomics: the
result is the same bits on every run.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from ..core import checks as _checks
from ..core.dtypes import check_dtype, is_float
from ..core import backend as _backend, torch_compat as _torch_compat
from ..launchers.index_bounds import facts_by_torch, read_index_bounds
from .scatter_groups import (Grouping, SortedLine, group, group_counts, reduce_groups,
                             shared_index)
from ..records import ready_reductions as _ready
from ..runtime import trace as _trace
from .define import direct_call_allowed
from .reduce_with import reduce_with
from .segment import values_readable

# torch's reduce names -> the segment reduction of the groups
REDUCE_FUNCTIONS = {"sum": "SUM", "prod": "MULTIPLY", "mean": "SUM", "amax": "MAX",
                    "amin": "MIN"}
INDEX_DTYPES = (torch.int64, torch.int32)
# the reductions whose fold of input (include_self) would round a second time in the dtype
FOLDED_IN_ACCUMULATION = ("sum", "prod", "mean")


# ---------------------------------------------------------------------------------------------
# Checks: metadata always; the index's values in eager code only
# ---------------------------------------------------------------------------------------------
def check_values_tensor(name: str, t) -> None:
    # traced by torch.compile, what a tensor is made of is not readable (nor needed: the trace
    # was made from tensors that passed in eager code or are torch's own)
    if torch.compiler.is_compiling():
        check_dtype(name, t.dtype)
    else:
        _checks.check_tensor(name, t)


def check_index(name: str, index, device: torch.device) -> None:
    if not torch.compiler.is_compiling():
        _checks.check_readable(name, index)
    if index.dtype not in INDEX_DTYPES:
        raise TypeError(f"{name}: must have dtype int64 or int32, got {index.dtype}")
    if index.device != device:
        raise ValueError(f"{name}: is on {index.device} but the values are on {device}; "
                         "tensors must be on the same device")


def check_reduce(reduce, allowed: Sequence[str]) -> str:
    if not isinstance(reduce, str) or reduce not in allowed:
        raise ValueError(f"reduce: must be one of {', '.join(map(repr, allowed))}, got "
                         f"{reduce!r}")
    return reduce


def index_values(index: torch.Tensor) -> Optional[torch.Tensor]:
    """A plain tensor holding ``index``'s values where eager code can read them: index itself,
    or inside torch.func's grad and jvp transforms (jacrev, jacfwd, hessian) the tensor their
    wrappers hold, whose values are the same at every level (an index passed in, or made
    inside the transformed function). None under torch.compile, export and dispatch modes, and
    for an index vmap batches (its values differ per batch element): nothing is read there."""
    if torch.compiler.is_compiling():   # (Dynamo does not trace functorch's queries)
        return None
    plain = _torch_compat.grad_unwrapped(index)
    return plain if plain is not None and values_readable(plain) else None


def read_index(index: torch.Tensor, along: int, n_groups: Optional[int] = None
               ) -> tuple[int, int, int, Optional[SortedLine]]:
    """(min, max, descents along ``along``, boundaries) of a non-empty int32/int64 plain
    ``index`` (``index_values``'): one pass over it and one device synchronization.

    An index that is one 1-D line repeated across its other dims (``shared_index``: a 1-D
    index, torch_scatter's broadcast one) is read as that line by ``read_index_bounds``, which
    also writes the line's group boundaries into ``n_groups`` groups where they are given and
    it is sorted: returned as a ``SortedLine`` for ``group``, which then reads the index no
    more. Any other index is read by the ready reduction ``index_facts`` (each element and the
    next, the second view reading what the first brought into the cache); its boundaries are
    None.

    Inside a torch.func transform the read runs with the transform out of the way: the
    tensors it makes for the kernel to write are plain, as the index is, and so are the
    boundaries (an index, never differentiated)."""
    with _torch_compat.functorch_disabled():
        line = shared_index(index, along) if index.dim() else index.reshape(1)
        if line is not None:
            lo, hi, descents, offsets = read_index_bounds(line, n_groups)
            return lo, hi, descents, SortedLine(line, offsets) if offsets is not None else None
        length = index.shape[along]
        if length < 2:
            facts = list(facts_by_torch(index, along))
        else:
            here, after = index.narrow(along, 0, length - 1), index.narrow(along, 1, length - 1)
            facts = list(reduce_with(_ready.index_facts, (here, after), axes=None,
                                     keepdims=False))
            if _trace.dry_run():   # (the reduction wrote nothing: torch reads the index instead)
                facts = list(facts_by_torch(index, along))
        lo, hi, descents = torch.stack([f.to(torch.int64) for f in facts]).tolist()
    return lo, hi, descents, None


def index_facts(index: torch.Tensor, n: int, name: str = "index", *,
                sorted_along: Optional[int] = None) -> tuple[bool, Optional[SortedLine]]:
    """Check that every value of ``index`` is in [0, n) and tell whether it is non-decreasing
    along ``sorted_along`` (False when not asked), with its boundaries where ``read_index``
    finds them (asked for only with ``sorted_along``), where its values can be read
    (``index_values``). Elsewhere (torch.compile, export, an index vmap batches) nothing is
    read, the values must be right, and the index is taken as unsorted."""
    plain = index_values(index) if index.numel() else None
    if plain is None:
        return False, None
    along = sorted_along if sorted_along is not None else max(index.dim() - 1, 0)
    lo, hi, descents, bounds = read_index(plain, along,
                                          n if sorted_along is not None else None)
    if lo < 0 or hi >= n:
        raise ValueError(f"{name}: every value must be in [0, {n}), found "
                         f"{lo if lo < 0 else hi}")
    index_sorted = sorted_along is not None and descents == 0
    return index_sorted, bounds if index_sorted else None


def _check_out(out, input: torch.Tensor, values: torch.Tensor) -> None:
    """``out``: input's shape and dtype, and nothing to differentiate (input's or the values');
    the result is computed whole before out is written, so out may be input itself."""
    if out is not None:
        _checks.check_out(out, input, shape=input.shape, dtype=input.dtype,
                          allow_alias_of=input)
        _checks.check_out_grad(out, values, "out")


def _written(result: torch.Tensor, out: Optional[torch.Tensor]) -> torch.Tensor:
    if out is None:
        return result
    out.copy_(result)
    return out


# ---------------------------------------------------------------------------------------------
# The one path: group src, reduce the groups, fold input in
# ---------------------------------------------------------------------------------------------
def _box(t: torch.Tensor, sizes, dim: int) -> torch.Tensor:
    """``t`` narrowed to ``sizes`` on every dim but ``dim``."""
    for k, size in enumerate(sizes):
        if k != dim and t.shape[k] != size:
            t = t.narrow(k, 0, size)
    return t


def divide(total: torch.Tensor, count: torch.Tensor, *,
           count_below_one: bool = False) -> torch.Tensor:
    """A mean as torch takes it: the count in the total's dtype (wrapping there, as torch's own
    count, a sum of ones in that dtype, does), integers rounded down. An integer count that is
    0 in the dtype is taken as 1 (torch's rule); with ``count_below_one``, any below 1, a
    wrapped negative one included (torch_scatter's)."""
    count = count.to(total.dtype)
    if is_float(total.dtype):
        return total / count
    small = count < 1 if count_below_one else count == 0
    count = torch.where(small, torch.ones_like(count), count)
    return torch.div(total, count, rounding_mode="floor")


def grouped_reduce(input: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor,
                   reduce: str, include_self: bool, *, index_sorted: bool,
                   bounds: Optional[SortedLine] = None) -> torch.Tensor:
    """torch.scatter_reduce's result, checked arguments given: ``index`` of src's shape (or
    broadcast to it by stride 0), src narrowed to it already; ``bounds`` as ``group``'s."""
    n = input.shape[dim]
    region = _box(input, src.shape, dim)
    if reduce in ("amax", "amin") and include_self and not direct_call_allowed(input,
                                                                                  inputs=(src,)):
        # torch shares an extreme's gradient evenly among every tied element, input's
        # included: input's entries go into the groups as their first elements
        grouping = group(src, dim, index, n, index_sorted=index_sorted, first=region)
        combined = grouping.result(reduce_groups(grouping.groups, REDUCE_FUNCTIONS[reduce]))
    else:
        grouping = group(src, dim, index, n, index_sorted=index_sorted, bounds=bounds)
        accumulated = include_self and reduce in FOLDED_IN_ACCUMULATION and is_float(src.dtype)
        reduced = grouping.result(reduce_groups(grouping.groups, REDUCE_FUNCTIONS[reduce],
                                                accumulated=accumulated))
        if accumulated:
            # input joins each group's sum or product in the accumulation dtype (type
            # promotion), and the result is rounded to input's once
            combined = fold_in(reduce, region, reduced, grouping, include_self).to(input.dtype)
        else:
            combined = fold_in(reduce, region, reduced, grouping, include_self)
    if combined.shape == input.shape:
        return combined
    out = input.clone()
    out[tuple(slice(0, s) if k != dim else slice(None)
              for k, s in enumerate(src.shape))] = combined
    return out


def fold_in(reduce: str, region: torch.Tensor, reduced: torch.Tensor, grouping: Grouping,
            include_self: bool) -> torch.Tensor:
    """torch's result on ``region`` (input where the groups land) from each group's reduction."""
    if reduce in ("sum", "prod") and include_self:
        return region + reduced if reduce == "sum" else region * reduced
    counts = grouping.counts()
    if reduce == "mean":
        if include_self:
            return divide(region + reduced, counts + 1)
        return torch.where(counts > 0, divide(reduced, counts), region)
    if not include_self:
        return torch.where(counts > 0, reduced, region)
    return (torch.maximum if reduce == "amax" else torch.minimum)(region, reduced)


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------
def _scatter_checks(input, dim, index, src, name_src: str = "src") -> int:
    """torch.scatter's rules: same rank, index no larger than src anywhere and than input off
    ``dim``, one dtype, one device. Returns the normalized dim."""
    check_values_tensor("input", input)
    check_values_tensor(name_src, src)
    check_index("index", index, input.device)
    if src.device != input.device:
        raise ValueError(f"{name_src}: is on {src.device} but input is on {input.device}")
    if src.dtype != input.dtype:
        raise TypeError(f"{name_src}: dtype {src.dtype} must equal input's {input.dtype}")
    rank = input.dim()
    if not (index.dim() == src.dim() == rank):
        raise ValueError(f"index: must have as many dims as input and {name_src} ({rank}), got "
                         f"index {index.dim()} and {name_src} {src.dim()}")
    dim = _checks.normalize_axis(dim, max(rank, 1), "dim")
    for k in range(rank):
        if index.shape[k] > src.shape[k] or (k != dim and index.shape[k] > input.shape[k]):
            raise ValueError(f"index: size {index.shape[k]} of dim {k} exceeds {name_src}'s "
                             f"({src.shape[k]})" if index.shape[k] > src.shape[k] else
                             f"index: size {index.shape[k]} of dim {k} exceeds input's "
                             f"({input.shape[k]}) (only dim {dim} may be larger)")
    return dim


def _scalars_as_vectors(*tensors):
    return tuple(t.reshape(1) if t.dim() == 0 else t for t in tensors)


def scatter_reduce(input: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor,
                   reduce: str, *, include_self: bool = True,
                   out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.scatter_reduce, deterministic: reduce ``src`` into ``input`` at the positions
    ``index`` gives along ``dim``.

    ``out[..., index[..., j, ...], ...] = reduce(...)`` over every j sending an element to the
    same place (for dim 1: ``out[i][index[i][j][k]][k]`` gets ``src[i][j][k]``), with input's
    own value folded in (``include_self=True``) or left alone where nothing lands and replaced
    otherwise (``include_self=False``).

    Each group is reduced by the segment kernel in a fixed order (docs/scatter.md), then input
    is folded in (a float sum, product or mean: in the accumulation dtype, the result rounded
    once): the same bits on every run, whatever the GPU.

    Args:
        input: The tensor scattered into (any dtype tritonml supports; rank 0 to 8).
        dim: The dim ``index`` addresses; negative counts from the end.
        index: int64 (or int32) of input's rank, ``index.size(d) <= src.size(d)`` on every
            dim and ``<= input.size(d)`` off ``dim``; values in [0, input.size(dim)).
        src: The values, input's dtype and rank; only its part covered by index is read.
        reduce: "sum", "prod", "mean", "amax" or "amin".
        include_self: Fold input's values in (torch's default).
        out: Where to write the result (input's shape and dtype).

    Returns:
        A tensor of input's shape and dtype. "mean" of integers rounds down (torch's floor);
        integer sums and products wrap. Differentiable in input and src (reverse and forward
        mode) with torch's formulas.

    Raises:
        TypeError: a tensor of an unsupported dtype, index not int64/int32, src's dtype not
            input's.
        ValueError: an unknown reduce, ranks or sizes against torch's rules, an index value
            out of [0, input.size(dim)) (checked in eager code only: one pass over the index and
            one synchronization).

    Example:
        >>> import torch, tritonml
        >>> src = torch.tensor([1., 2., 3., 4., 5., 6.])
        >>> index = torch.tensor([0, 1, 0, 1, 2, 1])
        >>> tritonml.scatter_reduce(torch.tensor([1., 2., 3., 4.]), 0, index, src, "sum")
        tensor([ 5., 14.,  8.,  4.])
        >>> tritonml.scatter_reduce(torch.tensor([1., 2., 3., 4.]), 0, index, src, "amax",
        ...                         include_self=False)
        tensor([3., 6., 5., 4.])
    """
    reduce = check_reduce(reduce, tuple(REDUCE_FUNCTIONS))
    include_self = _checks.check_bool("include_self", include_self)
    dim = _scatter_checks(input, dim, index, src)
    _check_out(out, input, src)
    return _reduce_into(input, dim, index, index, dim, src, reduce, include_self, out)


def _reduce_into(input, dim: int, index, spread, along: int, values, reduce: str,
                 include_self: bool, out):
    """What every public function does once its arguments are checked: ``index`` as given (its
    values checked, and its order read, along ``along``), ``spread`` the index at values'
    shape (or its part of it); a 0-d input as a 1-element one."""
    was_scalar = input.dim() == 0
    if was_scalar:
        input, spread, values = _scalars_as_vectors(input, spread, values)
    if index.numel() == 0:
        result = input.clone()
    else:
        sorted_index, bounds = index_facts(index, input.shape[dim], sorted_along=along)
        values = values[tuple(slice(0, size) for size in spread.shape)]
        result = grouped_reduce(input, dim, spread, values, reduce, include_self,
                                index_sorted=sorted_index, bounds=bounds)
    return _written(result.reshape(()) if was_scalar else result, out)


def scatter_add(input: torch.Tensor, dim: int, index: torch.Tensor, src: torch.Tensor, *,
                out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.scatter_add, deterministic: ``scatter_reduce(input, dim, index, src, "sum")``.

    Example:
        >>> import torch, tritonml
        >>> tritonml.scatter_add(torch.zeros(3), 0, torch.tensor([2, 0, 2]),
        ...                      torch.tensor([1., 2., 3.]))
        tensor([2., 0., 4.])
    """
    return scatter_reduce(input, dim, index, src, "sum", out=out)


def _index_checks(input, dim, index, source) -> tuple[int, torch.Tensor]:
    """torch.index_add's rules: a 1-D (or 0-d) index of source.size(dim) entries, source of
    input's rank and sizes off ``dim``. Returns the dim and the index broadcast over source."""
    check_values_tensor("input", input)
    check_values_tensor("source", source)
    check_index("index", index, input.device)
    if source.device != input.device:
        raise ValueError(f"source: is on {source.device} but input is on {input.device}")
    if source.dtype != input.dtype:
        raise TypeError(f"source: dtype {source.dtype} must equal input's {input.dtype}")
    if index.dim() > 1:
        raise ValueError(f"index: must be 1-D (or 0-d), got {index.dim()} dims")
    rank = max(input.dim(), 1)
    if max(source.dim(), 1) != rank:
        raise ValueError(f"source: must have input's rank ({input.dim()}), got {source.dim()}")
    dim = _checks.normalize_axis(dim, rank, "dim")
    in_shape = input.shape if input.dim() else (1,)
    src_shape = source.shape if source.dim() else (1,)
    if src_shape[dim] != index.numel():
        raise ValueError(f"index: must hold one entry per slice of source along dim {dim} "
                         f"(source.size({dim}) = {src_shape[dim]}), got {index.numel()}")
    for k in range(rank):
        if k != dim and src_shape[k] != in_shape[k]:
            raise ValueError(f"source: size {src_shape[k]} of dim {k} must equal input's "
                             f"({in_shape[k]})")
    view = [1] * rank
    view[dim] = -1
    return dim, index.reshape(view).expand(src_shape)


def index_add(input: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor, *,
              alpha=1, out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.index_add, deterministic: ``input`` plus ``alpha * source[..., j, ...]`` added at
    position ``index[j]`` along ``dim``, each position's additions summed in a fixed order.

    Example:
        >>> import torch, tritonml
        >>> tritonml.index_add(torch.zeros(3, 2), 0, torch.tensor([0, 2, 0]),
        ...                    torch.tensor([[1., 2.], [3., 4.], [5., 6.]]))
        tensor([[6., 8.],
                [0., 0.],
                [3., 4.]])
    """
    dim, spread = _index_checks(input, dim, index, source)
    _check_out(out, input, source)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"alpha: expected a Python number, got {type(alpha).__name__}")
    if not is_float(input.dtype) and not isinstance(alpha, int):
        raise TypeError(f"alpha: input has the integer dtype {input.dtype}, so alpha must be an "
                        f"int, got {alpha!r}")
    if alpha != 1:
        source = source * alpha
    return _reduce_into(input, dim, index, spread, 0, source, "sum", True, out)


def index_reduce(input: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor,
                 reduce: str, *, include_self: bool = True,
                 out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """torch.index_reduce, deterministic: ``source[..., j, ...]`` reduced into position
    ``index[j]`` along ``dim`` of ``input`` ("prod", "mean", "amax" or "amin"), with input's own
    value folded in (``include_self``).

    Example:
        >>> import torch, tritonml
        >>> tritonml.index_reduce(torch.full((3,), 2.), 0, torch.tensor([0, 0, 2]),
        ...                       torch.tensor([3., 4., 5.]), "prod")
        tensor([24.,  2., 10.])
    """
    reduce = check_reduce(reduce, ("prod", "mean", "amax", "amin"))
    include_self = _checks.check_bool("include_self", include_self)
    dim, spread = _index_checks(input, dim, index, source)
    _check_out(out, input, source)
    return _reduce_into(input, dim, index, spread, 0, source, reduce, include_self, out)


BINCOUNT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def bincount(input: torch.Tensor, weights: Optional[torch.Tensor] = None,
             minlength: int = 0) -> torch.Tensor:
    """torch.bincount, deterministic: how often each value of ``input`` occurs (int64), or with
    ``weights`` the sum of the weights of its occurrences (float32 weights give float32, any
    other dtype float64, as torch), summed in a fixed order. An empty input gives ``minlength``
    int64 zeros, weights or not, as torch's.

    The result has ``max(input.max() + 1, minlength)`` entries: reading input.max() is a device
    synchronization (as torch's), so under torch.compile it is a graph break, and under
    torch.func.vmap input must not be batched (a ValueError; weights may be).

    Example:
        >>> import torch, tritonml
        >>> tritonml.bincount(torch.tensor([1, 3, 1]))
        tensor([0, 2, 0, 1])
        >>> tritonml.bincount(torch.tensor([1, 3, 1]), torch.tensor([0.5, 1., 2.]))
        tensor([0.0000, 2.5000, 0.0000, 1.0000])
    """
    _checks.check_readable("input", input)
    _backend.check_device("input", input)
    if input.dtype not in BINCOUNT_DTYPES:
        raise TypeError(f"input: must have an integer dtype, got {input.dtype}")
    if input.dim() != 1:
        raise ValueError(f"input: must be 1-D, got {input.dim()} dims")
    if isinstance(minlength, bool) or not isinstance(minlength, int) or minlength < 0:
        raise ValueError(f"minlength: must be a non-negative int, got {minlength!r}")
    dtype = torch.int64
    if weights is not None:
        check_values_tensor("weights", weights)
        if weights.shape != input.shape:
            raise ValueError(f"weights: must have input's shape {tuple(input.shape)}, got "
                             f"{tuple(weights.shape)}")
        if weights.device != input.device:
            raise ValueError(f"weights: is on {weights.device} but input is on {input.device}")
        dtype = torch.float32 if weights.dtype == torch.float32 else torch.float64
    if input.numel() == 0:
        # torch's empty result is its counts' whatever the weights (int64, no gradient)
        return torch.zeros(minlength, dtype=torch.int64, device=input.device)
    # its values decide the result's size, so they are read even inside a transform: in
    # grad's and jvp's wrappers, the same values at every level
    plain = input if torch.compiler.is_compiling() else _torch_compat.grad_unwrapped(input)
    if plain is None:
        raise ValueError("input: its values decide the result's size, so it cannot be "
                         "batched by vmap (each element would have a size of its own; "
                         "torch.bincount refuses it too): vmap over weights only")
    input = plain
    # the checks' reduction reads 32- and 64-bit integers: narrower ones are widened first
    keys = input if input.dtype in (torch.int32, torch.int64) else input.to(torch.int32)
    lo, hi, descents, _ = read_index(keys, 0)
    if lo < 0:
        raise ValueError(f"input: values must be non-negative, found {lo}")
    n, sorted_index = max(minlength, hi + 1), descents == 0
    if weights is None:
        return group_counts(keys, n, keys_sorted=sorted_index)
    grouping = group(weights.to(dtype), 0, keys, n, index_sorted=sorted_index)
    return reduce_groups(grouping.groups, "SUM")


__all__ = ["scatter_reduce", "scatter_add", "index_add", "index_reduce", "bincount"]
