"""The segmented cases of ``tritonml bench``: seeded segment lengths, and each (entry, op, dtype)
made runnable as ``cases.Prepared``.

Two groups of entries (``cases.SUITE``), over the same three length distributions
(``LENGTH_KINDS``) of one 1-D axis:

- ``segment``: ``tritonml.segment_reduce`` / ``segment_scan``; torch's peer is
  ``torch.segment_reduce`` where torch has the function (sum, mean, max; not argmax), and for the
  scan, which torch has no segmented form of, the padded-dense torch scan below.
- ``padded``: what is done without segment ops: pad every segment to the longest with the
  function's identity (torch's jagged-to-padded copy, ``to_padded_tensor`` of a jagged nested
  tensor viewing x and its offsets), reduce or scan the dense (n, longest) tensor along its last
  axis (tritonml's dense ``reduce`` / ``cumulative_sum`` for the row's tritonml, torch's
  ``sum``/``amax``/``argmax``/``cumsum`` for its eager peer), then finish: AVERAGE divides the
  sums by the lengths, ARGMAX adds each segment's start, the scan selects the real elements back
  with a boolean mask (``padded[mask]``). The counted bytes include the padding copy, the padded
  tensor's reads and the finishing ops.

Both groups share the segment problem's ideal bytes: x read once, the n + 1 int64 boundaries
read once, the result written once, so a padded row's bytes / ideal is what padding costs.

Values are multiples of 1/4096 in [0, 1): every float64 partial sum of them is exact, so the
float64 references (segment sums by ``index_add_``, scans by one cumulative sum less each
segment's start, maxima and first arg-maxima by ``scatter_reduce``) are exact and compute no
padded tensor; ties among the maxima are frequent, and ARGMAX's rule is the first.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, cast

import torch

from ..core import torch_compat as _torch_compat

LENGTH_KINDS = ("short", "long", "power")
SEGMENT_SCAN = "segment_scan"
LONG_SEGMENTS = 4           # "long": a few segments, unequal (weights in [0.5, 1.5))
POWER_EXPONENT = 1.5        # "power": P(length >= l) ~ l ** -(POWER_EXPONENT - 1)
QUANTUM = 4096              # values are k / QUANTUM, k in [0, QUANTUM)
# torch.segment_reduce's name for each function it has
TORCH_SEGMENT_REDUCE = {"SUM": "sum", "AVERAGE": "mean", "MAX": "max"}


def segment_lengths(kind: str, total: int, seed: int = 0) -> torch.Tensor:
    """int64 lengths, each >= 1, summing to ``total``, drawn with ``seed``:

    - "short": many segments of 1 to 3 elements (uniform);
    - "long": ``LONG_SEGMENTS`` segments of unequal lengths (total / 4 on average);
    - "power": a truncated power law, P(length >= l) proportional to l ** -0.5 for l up to
      isqrt(total) (mostly short segments, a few of the longest), the last one trimmed.
    """
    if kind not in LENGTH_KINDS:
        raise ValueError(f"kind: expected one of {', '.join(LENGTH_KINDS)}, got {kind!r}")
    if total < LONG_SEGMENTS:
        raise ValueError(f"total: expected at least {LONG_SEGMENTS} elements, got {total}")
    g = torch.Generator().manual_seed(seed)
    if kind == "long":
        weights = 0.5 + torch.rand(LONG_SEGMENTS, generator=g, dtype=torch.float64)
        lengths = (weights / weights.sum() * total).floor().to(torch.int64).clamp_min(1)
        lengths[-1] += total - lengths.sum()
        return lengths
    if kind == "short":
        draws = torch.randint(1, 4, (total,), generator=g)
    else:
        # Inverse CDF of a Pareto truncated at `cap`: u uniform in [cap ** -a, 1), l = u ** (-1/a)
        # with a = POWER_EXPONENT - 1, then floored (so lengths 1 .. cap).
        a, cap = POWER_EXPONENT - 1, max(2, math.isqrt(total))
        low = cap ** -a
        u = low + (1 - low) * torch.rand(total, generator=g, dtype=torch.float64)
        draws = u.pow(-1 / a).floor().to(torch.int64).clamp(1, cap)
    ends = torch.cumsum(draws, 0)
    lengths = draws[: int(torch.searchsorted(ends, total)) + 1].clone()
    lengths[-1] -= int(lengths.sum()) - total
    return lengths


def segment_values(total: int, dtype: torch.dtype, seed: int = 1) -> torch.Tensor:
    """``total`` values k / QUANTUM, k uniform in [0, QUANTUM): exact in float32 and in every
    float64 sum of up to 2**41 of them."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(0, QUANTUM, (total,), generator=g, dtype=torch.int64)
            .to(torch.float64) / QUANTUM).to(dtype)


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


# ---------------------------------------------------------------------------------------------
# Float64 references (no padding, no tritonml)
# ---------------------------------------------------------------------------------------------
# Each benchmarked function's exact formula, ``formula(x64, ids, lengths)`` over the segments
# (``ids`` each element's segment): the oracle the rows are checked against, written per
# function rather than read from the records it checks.
def _sums(x64, ids, lengths):
    return torch.zeros(lengths.numel(), dtype=torch.float64, device=x64.device).index_add_(
        0, ids, x64)


def _means(x64, ids, lengths):
    return _sums(x64, ids, lengths) / lengths


def _maxima(x64, ids, lengths):
    return torch.full((lengths.numel(),), -math.inf, dtype=torch.float64,
                      device=x64.device).scatter_reduce_(0, ids, x64, "amax")


def _first_argmaxima(x64, ids, lengths):
    positions = torch.arange(x64.numel(), device=x64.device)
    hits = torch.where(x64 == _maxima(x64, ids, lengths).index_select(0, ids), positions,
                       x64.numel())
    return torch.full((lengths.numel(),), x64.numel(), device=x64.device).scatter_reduce_(
        0, ids, hits, "amin")


_FORMULAS = {"SUM": _sums, "AVERAGE": _means, "MAX": _maxima, "ARGMAX": _first_argmaxima}
SEGMENT_FUNCTIONS = tuple(_FORMULAS)   # the functions the segment entries run


def reference(op: str, x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """The exact result of ``op`` over the segments of ``x`` (1-D): float64, int64 for ARGMAX."""
    x64 = x.to(torch.float64)
    lengths = offsets[1:] - offsets[:-1]
    ids = torch.repeat_interleave(torch.arange(lengths.numel(), device=x.device), lengths)
    if op == SEGMENT_SCAN:
        running = torch.cumsum(x64, 0)
        before = running - x64          # the sum before each element
        return running - before.index_select(0, offsets[:-1]).index_select(0, ids)
    return _FORMULAS[op](x64, ids, lengths)


# ---------------------------------------------------------------------------------------------
# Padded-dense: what is done without segment ops
# ---------------------------------------------------------------------------------------------
def jagged(x: torch.Tensor, offsets: torch.Tensor, longest: int) -> torch.Tensor:
    """x and its boundaries as a nested tensor of the jagged layout (a view, no copy): how torch
    holds ragged data, made once outside the timed and counted calls, like the offsets."""
    with _torch_compat.fx_tracing_notice_dropped():  # torch's notice about its own check
        return torch.nested.nested_tensor_from_jagged(x, offsets, max_seqlen=longest)


@dataclass(frozen=True)
class Padding:
    """How one op runs over the segments through a padded tensor, read from its record (the sum
    scan's for ``SEGMENT_SCAN``): pad with ``fill``, the identity, so the padding changes no
    result; run ``dense_function`` (a reduce function's name, or ``SEGMENT_SCAN``) along the
    rows; then ``finish(result, lengths, starts, mask)``."""
    fill: float
    dense_function: str
    finish: Callable[..., torch.Tensor]


def padding(op: str, dtype: torch.dtype) -> Padding:
    """``op``'s ``Padding`` for x of ``dtype``. A mean (``averages``) sums the rows and divides by
    the real lengths (a dense mean would count the padding); an index (``returns_index``) moves
    from its row to x, each segment's start added; a scan keeps its real elements (the mask);
    anything else is the rows' result as it is."""
    from ..records.builtin_reductions import record_of
    from ..records.builtin_scans import SUM

    if op == SEGMENT_SCAN:
        return Padding(cast(float, SUM.identity), op,
                       lambda result, lengths, starts, mask: result[mask])
    record = record_of(op)
    fill = float(record.identity_for((dtype,))[0])   # an index's state: the value comes first
    if record.averages:
        return Padding(fill, "SUM", lambda result, lengths, starts, mask: result / lengths)
    if record.returns_index:
        return Padding(fill, op, lambda result, lengths, starts, mask: result + starts)
    return Padding(fill, op, lambda result, lengths, starts, mask: result)


def padded_run(padded: Padding, dense, inputs: tuple) -> torch.Tensor:
    """The segments through a padded tensor: torch's jagged-to-padded copy with ``padded.fill``
    (n, longest), ``dense(padded)`` the dense reduction or scan of its last axis, then
    ``padded.finish``. ``inputs``: (the jagged view, lengths as x's dtype, each segment's start,
    the (n, longest) mask of real elements)."""
    nested, lengths, starts, mask = inputs
    return padded.finish(dense(nested.to_padded_tensor(padded.fill)), lengths, starts, mask)


# torch's dense form of each ``Padding.dense_function`` along the last axis of the padded tensor
# (torch's own ops, as TORCH_SEGMENT_REDUCE names them)
TORCH_DENSE = {"SUM": lambda p: p.sum(1), "MAX": lambda p: p.amax(1),
               "ARGMAX": lambda p: p.argmax(1), SEGMENT_SCAN: lambda p: p.cumsum(1)}


def tritonml_dense(function: str, public: bool):
    """tritonml's dense form of ``function`` (a ``Padding.dense_function``) along the last axis:
    the public function (``public``) or the launcher under it (what bytes are counted on, as the
    other entries)."""
    from ..launchers.reduce import reduce_axes
    from ..launchers.scan import SUM, cumulative_scan
    from ..records.builtin_reductions import record_of
    from ..torch_ops.reduce import reduce
    from ..torch_ops.scan import cumulative_sum

    if function == SEGMENT_SCAN:
        return ((lambda p: cumulative_sum(p, 1)) if public
                else (lambda p: cumulative_scan(p, 1, SUM)))
    if public:
        return lambda p: reduce(p, function, (1,), keepdims=False)
    record = record_of(function)
    return lambda p: reduce_axes(p, (1,), record, keepdims=False)


def _no_torch_segment_reduce(op):
    def fail(*_):
        raise NotImplementedError(f"torch.segment_reduce has no {op.lower()}; the padded rows "
                                  "compare torch's dense form")
    return fail


# ---------------------------------------------------------------------------------------------
# One (entry, op, dtype, shape) made runnable
# ---------------------------------------------------------------------------------------------
def prepare_segment(entry, op: str, dtype: torch.dtype, shape: tuple, device):
    """A ``cases.Prepared`` for a "segment" or "padded" entry (``entry.segments`` names the
    length distribution) at the 1-D ``shape``."""
    from ..launchers.scan import SUM
    from ..launchers.segment import segment_reduce_axis, segment_scan_axis
    from ..records.builtin_reductions import record_of
    from ..torch_ops.segment import segment_reduce, segment_scan
    from .cases import Prepared

    (total,) = shape
    lengths = segment_lengths(entry.segments, total)
    offsets = torch.cat([lengths.new_zeros(1), torch.cumsum(lengths, 0)]).to(device)
    lengths = lengths.to(device)
    x = segment_values(total, dtype).to(device)
    n, longest = lengths.numel(), int(lengths.max())
    scan = op == SEGMENT_SCAN
    returns_index = not scan and record_of(op).returns_index   # int64, compared exactly
    out = torch.empty(total if scan else n, dtype=torch.int64 if returns_index else dtype,
                      device=device)
    ideal = _nbytes(x) + _nbytes(offsets) + _nbytes(out)
    mask = (torch.arange(longest, device=device) < lengths.unsqueeze(1)) if scan else None
    padded_inputs = (jagged(x, offsets, longest), lengths.to(dtype), offsets[:-1], mask)
    regions = {"input": x, "offsets": offsets}

    def expected():
        return reference(op, x, offsets)

    padded = padding(op, dtype)
    torch_rows = TORCH_DENSE[padded.dense_function]

    def torch_padded(*inputs):
        return padded_run(padded, torch_rows, inputs)

    if entry.group == "padded":
        ours = tritonml_dense(padded.dense_function, True)
        counted = tritonml_dense(padded.dense_function, False)
        return Prepared(lambda: padded_run(padded, ours, padded_inputs), torch_padded,
                        padded_inputs, expected, None, regions, ideal, returns_index,
                        lambda: padded_run(padded, counted, padded_inputs))
    if scan:
        regions["output"] = out
        return Prepared(lambda: segment_scan(x, "sum", offsets=offsets), torch_padded,
                        padded_inputs, expected, out, regions, ideal, False,
                        lambda: segment_scan_axis(x, SUM, offsets, 0, out=out))
    record = record_of(op)
    name = TORCH_SEGMENT_REDUCE.get(op)
    torch_fn = ((lambda v, o: torch.segment_reduce(v, name, offsets=o)) if name
                else _no_torch_segment_reduce(op))
    return Prepared(lambda: segment_reduce(x, op, offsets=offsets), torch_fn, (x, offsets),
                    expected, None, regions, ideal, returns_index,
                    lambda: segment_reduce_axis(x, record, offsets, 0)[0])
