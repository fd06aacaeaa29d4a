"""The scatter pipeline's bytes as the real calls move them, counted in Triton's interpreter
(tritonml/bench/memtrace.py) at a small size, against the model's steps
(tritonml/bench/scatter_model.py): every torch op the eager pipeline runs, in order, with the
bytes the counter charges it, exactly; the checks' ``index_bounds_kernel`` part by part (the
index once from memory, its view one element on apart as the model's ``l2``, its boundaries
where sorted, three atomics a program); the segment kernel's loads and stores within 1.05 x the
model's (src and the result once, the boundaries once, the programs' published chunk states: at
the H100's config, which the interpreter runs too) plus the look-back's reads of those states
(the model's ``l2``, at most once each), their re-reads and the boundaries' from cache apart, as
tests/bench/test_segment_bytes.py counts them. So the model's table is this pipeline's, not a
formula beside it: a change to the pipeline fails here until the model follows."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tritonml
from tritonml.bench import cases, scatter_model as M
from tritonml.bench.memtrace import trace_memory
from tritonml.launchers.index_bounds import bounds_config
from tritonml.bench.scatter_cases import observed_as_eager

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET,
                                reason="bytes are counted in Triton's interpreter")
KERNEL_BOUND = 1.05
MAX_BOUNDARY_REREAD = 0.15   # of the kernel's bytes (test_segment_bytes.py's bound)
MAX_ATOMIC_SHARE = 0.01

# (the fast tier runs every fourth case, from the first: the slow embedding and width-64 ones
# are not among them)
CASES = [(f"scatter-gnn-{form}-f{width}", reduce)
         for form in ("scatter", "segment_coo") for width in (1, 16)
         for reduce in ("sum", "mean", "max")] + [
    ("scatter-bincount-weights", "sum"), ("scatter-embedding-grad", "sum"),
    ("scatter-gnn-segment_coo-f64", "max")]


@pytest.mark.parametrize("name, reduce", CASES)
def test_the_counted_pipeline_is_the_models_step_for_step(name, reduce):
    entry = cases.ENTRIES[name]
    prepared = cases.prepare(entry, reduce, torch.float32, entry.quick_shape)
    with trace_memory(prepared.regions) as trace:
        result = prepared.counted_run()
    cases.assert_close(result, prepared.reference(), torch.float32, name)
    size = M.C.sizes(entry.scatter, entry.quick_shape)
    case = M.Case(entry.scatter, reduce, size)
    index = M.C.index_of(entry.scatter, size).numpy()
    steps = M.steps(case, np.bincount(index, minlength=size.groups))
    want = [(s.op, s.counted) for s in steps if not s.is_kernel]
    got = [(w.op, w.bytes) for w in trace.torch_work]
    assert got == want
    assert prepared.ideal_bytes == M.ideal_bytes(case)
    if M.one_pass(case):
        _check_one_pass(trace, steps, size)
        return
    # two launches: the checks' index_bounds_kernel, then the segment kernel
    assert [k.name for k in trace.kernels] == [s.op for s in steps if s.is_kernel] == [
        M.BOUNDS_KERNEL, M.SEGMENT_KERNEL]
    facts, kernel = trace.kernels
    (checked,) = [s for s in steps if s.op == M.BOUNDS_KERNEL]
    # the index once from memory, the rest from cache: the view one element on (the model's
    # l2) and each boundary's binary search of the tile; the boundaries written where the index
    # is sorted and the number of groups known (not bincount's), three atomics a program
    e, n = size.elements, size.groups
    writes = entry.scatter in M.C.SORTED_FORMS
    block = bounds_config(e, "cpu")[0]
    assert facts.store_bytes == (8 * (n + 1) if writes else 0)
    assert facts.atomic_bytes == 24 * -(-e // block)
    assert checked.dram == 8 * e + facts.store_bytes + 24 * -(-e // 1024)
    reread = facts.regions["index"]["load"] - 8 * e
    assert checked.l2 == 8 * (e - 1) <= reread
    assert reread <= 8 * (e - 1) + (8 * (n + 1) * block.bit_length() if writes else 0)
    assert trace.distinct_bytes("index", "load") == size.elements * 8
    # the segment kernel, its bytes the model's
    (modeled,) = [s for s in steps if s.op == M.SEGMENT_KERNEL]
    reread = trace.by_region("other")["load"] - trace.distinct_bytes("other", "load")
    assert 0 <= reread <= MAX_BOUNDARY_REREAD * modeled.counted
    moved = kernel.load_bytes + kernel.store_bytes - reread
    # at least src, the result and the boundaries once (the published states are at most
    # one a program: a chain's last publishes none)
    assert modeled.counted - modeled.l2 <= moved <= KERNEL_BOUND * modeled.counted + modeled.l2
    assert kernel.atomic_bytes <= MAX_ATOMIC_SHARE * modeled.counted   # status words
    assert trace.by_region("input")["load"] == (0 if entry.scatter not in M.C.SORTED_FORMS
                                                else size.elements * size.width * 4)


def _check_one_pass(trace, steps, size) -> None:
    """segment_coo over rows one value wide: one launch, the segment kernel reading the index
    itself, once from memory (its views one element before and after, each chunk's search back
    for where its first group starts, and a chunk's check of the ids its fold does not read,
    from cache: within the model's ``l2``), src and the result once, each program's facts and
    published state."""
    assert [k.name for k in trace.kernels] == [s.op for s in steps if s.is_kernel] == [
        M.SEGMENT_KERNEL]
    (kernel,), (modeled,) = trace.kernels, steps
    e = size.elements
    assert trace.distinct_bytes("index", "load") == 8 * e
    index_reread = kernel.regions["index"]["load"] - 8 * e
    assert 0 <= index_reread <= modeled.l2
    other_reread = trace.by_region("other")["load"] - trace.distinct_bytes("other", "load")
    assert 0 <= other_reread <= MAX_BOUNDARY_REREAD * modeled.counted
    moved = kernel.load_bytes + kernel.store_bytes - index_reread - other_reread
    published = modeled.counted - M.ideal_bytes(M.Case("segment_coo", "sum", size))
    assert modeled.counted - published <= moved <= KERNEL_BOUND * modeled.counted
    assert kernel.atomic_bytes <= MAX_ATOMIC_SHARE * modeled.counted   # status words
    assert trace.by_region("input")["load"] == size.elements * size.width * 4
