"""A sorted index's groups reduced in one pass: the index read once, by the segment kernel itself
(``SEGMENT_IDS``, tritonml/kernels/segment_ids.py), with no pass before it to check the index
and make the group boundaries.

This is how ``segment_coo`` (and its min/max forms) runs where it can: in eager code
(``direct_call_allowed`` of src apart from its gradient: no compile, torch.func transform,
forward-mode AD or mode in progress), an index that is one line shared by every position of
src's other dims, and one position after ``dim`` (a 1-D src, or rows of width 1: wider rows
keep the boundaries, whose tiles go in slices, docs/segments.md). Where autograd records, the
backward is the segment reduction's own (``_reduce_backward``, torch's formulas), from the
boundaries of the index, made then. The kernel's
tiles, chunks and scans are the same as from boundaries, so the results are the same bits as
the two-pass path's (tests/torch_ops/test_scatter_one_pass.py), which serves every other call.

The checks come after the launch: each program reports the least and greatest id it read and
its descents, one read of them says whether the index was in range and sorted, and the errors
are the two-pass path's, raised before the results are returned. The kernel writes only the
fresh tensors it returns, so an index found wrong leaves nothing of the caller's written.
"""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Optional

import torch

from tritonml_autotune import devices

from ..launchers.index_bounds import group_boundaries
from ..launchers.segment import ids_facts, segment_reduce_ids
from ..records.builtin_reductions import record_of
from .define import direct_call_allowed
from .scatter_groups import GROUP_TARGET, shared_index
from .segment import _reduce_backward, values_readable

UNSORTED = ("index: segment_coo needs an index sorted (non-decreasing) along its last dim; "
            "call tritonml.scatter for an unsorted one")


def reduce_sorted(src: torch.Tensor, spread: torch.Tensor, dim: int, dim_size: Optional[int],
                  functions: tuple) -> Optional[list]:
    """Each of ``functions`` ((ReduceFunction name, initial, empty), as ``reduce_groups``
    takes them) of src's groups along ``dim`` by the sorted index ``spread`` (src's shape),
    into ``dim_size`` groups (None: the last id + 1): a list of results, or None where this
    path does not serve (the caller takes the two-pass path, which checks in its own order)."""
    if spread.numel() == 0:
        return None
    line = shared_index(spread, dim)
    if (line is None or math.prod(src.shape[dim + 1:]) != 1
            or not values_readable(spread)
            or not direct_call_allowed(src.detach(), inputs=(line,))):
        return None
    # a sorted index's greatest id is its last (an unsorted one is refused below)
    n = dim_size if dim_size is not None else max(int(line[-1]) + 1, 0)
    results, first_facts = [], None
    for function, initial, empty in functions:
        if record_of(function).returns_index:
            src = src.detach()
        out, facts = _OnePass.apply(src, line, n, dim, function, initial, empty)
        if facts is None:   # nothing launched (no groups, or src has no rows): two passes
            return None
        first_facts = facts if first_facts is None else first_facts
        results.append(out)
    found = ids_facts(first_facts)
    assert found is not None
    lowest, highest, descents = found
    if dim_size is None:
        if lowest < 0:   # (the number of groups the two-pass path reads: the greatest + 1)
            raise ValueError(f"index: every value must be in [0, {highest + 1}), found "
                             f"{lowest}")
        if descents:
            raise ValueError(UNSORTED)
    if lowest < 0 or highest >= n:
        raise ValueError(f"index: every value must be in [0, {n}), found "
                         f"{lowest if lowest < 0 else highest}")
    if descents:
        raise ValueError(UNSORTED)
    return results


class _OnePass(torch.autograd.Function):
    """``segment_reduce_ids`` at ``GROUP_TARGET``'s config: (result, facts), differentiable in
    src with the two-pass path's formulas."""

    @staticmethod
    def forward(src, line, n, dim, function, initial, empty):
        with devices.targeting(GROUP_TARGET):
            (out,), facts = segment_reduce_ids(src, record_of(function), line, n, dim,
                                               initial=initial, empty=empty)
        return out, facts

    @staticmethod
    def setup_context(ctx, inputs, output):
        src, line, n, dim, function, initial, _ = inputs
        ctx.function, ctx.axis, ctx.keepdims, ctx.initial, ctx.n = function, dim, False, \
            initial, n
        ctx.save_for_backward(src, line, output[0])
        if output[1] is not None:
            ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, *grad_outputs):
        grad = grad_outputs[0]   # (the facts have none)
        src, line, out = ctx.saved_tensors
        # (the index was found sorted and in range before the result was returned)
        offsets = group_boundaries(line, ctx.n)
        saved = SimpleNamespace(saved_tensors=(src, offsets, out), function=ctx.function,
                                axis=ctx.axis, keepdims=False, initial=ctx.initial)
        return _reduce_backward(saved, grad)[0], None, None, None, None, None, None
