"""TEMPORARY STUB (pure torch, slow) of the segment launchers' API; the lead replaces the bodies
with the Triton segment kernel before anything lands. Signatures and semantics are final.

Semantics (final):
- ``offsets``: int64, contiguous, 1-D, n + 1 non-decreasing boundaries on x's device,
  offsets[0] == 0 and offsets[-1] == x.shape[axis] (``segment_offsets`` makes and checks it).
- ``segment_reduce_axis``: result i along ``axis`` is the reduction of
  x.narrow(axis, offsets[i], offsets[i+1] - offsets[i]); shape x.shape with axis -> n
  (keepdims: axis -> (n, 1)). ``initial`` (SUM, MULTIPLY, MAX, MIN, AVERAGE only, a Python
  number) starts every segment's fold, as torch.segment_reduce's (AVERAGE divides by the segment's
  length only). Empty segments: ``initial`` if given, else finish(identity, count=0) (SUM 0,
  MULTIPLY 1, MAX -inf / type min, AVERAGE nan, LOG_SUM -inf, ...). ARGMAX/ARGMIN: the index is the
  position along ``axis`` in x (offsets[i] + position in segment), int64; an empty segment's index
  is x.shape[axis].
- ``segment_scan_axis``: each segment scanned on its own (restarting at its boundary); same shape
  and dtype as x.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..core import checks as _checks


def segment_offsets(axis_len: int, device, *, offsets=None, lengths=None,
                    check_values: bool = True) -> torch.Tensor:
    """The validated int64 contiguous offsets (n + 1 entries) from exactly one of ``offsets`` /
    ``lengths``; raises ValueError/TypeError naming the parameter. ``check_values=False`` skips the
    checks that read the values (a device sync), as under torch.compile."""
    if (offsets is None) == (lengths is None):
        raise ValueError("offsets, lengths: pass exactly one of them")
    if lengths is not None:
        lengths = torch.as_tensor(lengths, device=device).to(torch.int64)
        offsets = torch.cat([lengths.new_zeros(1), torch.cumsum(lengths, 0)])
    offsets = torch.as_tensor(offsets, device=device).to(torch.int64).contiguous()
    if check_values:
        if offsets[0] != 0 or offsets[-1] != axis_len or (offsets[1:] < offsets[:-1]).any():
            raise ValueError("offsets: bad")
    return offsets


def segment_reduce_axis(xs, reduction, offsets: torch.Tensor, axis: int, *, initial=None,
                        keepdims: bool = False, out=None) -> tuple:
    """Segmented reduction of the tensor(s) ``xs`` (a tuple, ``reduction.inputs`` of them) with a
    ``Reduction`` (a built-in ``ReduceRecord`` or a user's); returns a tuple of outputs."""
    from .reduce_with import reduce_with_axes
    xs = (xs,) if isinstance(xs, torch.Tensor) else tuple(xs)
    axis = _checks.normalize_axis(axis, xs[0].dim())
    n = offsets.numel() - 1
    parts = []
    for i in range(n):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        if hi == lo:
            shape = list(xs[0].shape)
            shape[axis] = 1
            parts.append(tuple(torch.full(shape, float("nan")).to(xs[0].dtype)
                               for _ in range(reduction.outputs)))
        else:
            parts.append(reduce_with_axes(reduction, tuple(t.narrow(axis, lo, hi - lo) for t in xs),
                                          (axis,), keepdims=True))
    outs = []
    for k in range(reduction.outputs):
        res = torch.cat([p[k] for p in parts], axis) if parts else None
        if keepdims:
            res = res.unsqueeze(axis + 1)
        outs.append(res)
    return tuple(outs)


def segment_scan_axis(x: torch.Tensor, record, offsets: torch.Tensor, axis: int, *,
                      reverse: bool = False, exclusive: bool = False,
                      out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Segmented scan of ``x`` along ``axis`` with a ``ScanCombine`` record (SUM or PRODUCT)."""
    from .scan import cumulative_scan
    axis = _checks.normalize_axis(axis, x.dim())
    result = torch.empty_like(x) if out is None else out
    for i in range(offsets.numel() - 1):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        if hi > lo:
            result.narrow(axis, lo, hi - lo).copy_(cumulative_scan(
                x.narrow(axis, lo, hi - lo), axis, record, reverse=reverse, exclusive=exclusive))
    return result


def segment_associative_scan(combine_fn, xs, offsets: torch.Tensor, axis: int, *,
                             reverse: bool = False, exclusive: bool = False,
                             identity=None) -> tuple:
    """``tritonml.associative_scan`` restarted at every segment boundary; a tuple of outputs."""
    from .associative_scan import associative_scan_states
    xs = tuple(xs)
    axis = _checks.normalize_axis(axis, xs[0].dim())
    results = [torch.empty_like(t) for t in xs]
    for i in range(offsets.numel() - 1):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        if hi > lo:
            parts = associative_scan_states(combine_fn, tuple(t.narrow(axis, lo, hi - lo)
                                                              for t in xs), axis,
                                            reverse=reverse, exclusive=exclusive,
                                            identity=identity)
            for r, p in zip(results, parts):
                r.narrow(axis, lo, hi - lo).copy_(p)
    return tuple(results)
