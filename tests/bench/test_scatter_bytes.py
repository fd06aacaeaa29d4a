"""The scatter pipeline's bytes as the real calls move them, counted in Triton's interpreter
(tritonml/bench/memtrace.py) at a small size, against the model's steps
(tritonml/bench/scatter_model.py): every torch op the eager pipeline runs, in order, with the
bytes the counter charges it, exactly; the segment kernel's loads and stores within 1.05 x the
model's (src and the result once, the boundaries once: their re-reads from cache apart, as
tests/bench/test_segment_bytes.py counts them). So the model's table is this pipeline's, not a
formula beside it: a change to the pipeline fails here until the model follows."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import tritonml
from tritonml.bench import cases, scatter_model as M
from tritonml.bench.memtrace import trace_memory
from tritonml.bench.scatter_cases import observed_as_eager

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET,
                                reason="bytes are counted in Triton's interpreter")
KERNEL_BOUND = 1.05
MAX_BOUNDARY_REREAD = 0.15   # of the kernel's bytes (test_segment_bytes.py's bound)

CASES = [(f"scatter-gnn-{form}-f{width}", reduce)
         for form in ("scatter", "segment_coo") for width in (1, 16)
         for reduce in ("sum", "mean", "max")] + [
    ("scatter-gnn-segment_coo-f64", "max"), ("scatter-embedding-grad", "sum"),
    ("scatter-bincount-weights", "sum")]


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
    want = [(s.op, s.counted) for s in steps if s.part != "kernel"]
    got = [(w.op, w.bytes) for w in trace.torch_work]
    assert got == want
    assert prepared.ideal_bytes == M.ideal_bytes(case)
    # one launch of the segment kernel, its bytes the model's
    (kernel,) = trace.kernels
    (modeled,) = [s for s in steps if s.part == "kernel"]
    reread = trace.by_region("other")["load"] - trace.distinct_bytes("other", "load")
    assert 0 <= reread <= MAX_BOUNDARY_REREAD * modeled.counted
    assert modeled.counted <= kernel.bytes - reread <= KERNEL_BOUND * modeled.counted
    assert trace.by_region("input")["load"] == (0 if entry.scatter not in M.C.SORTED_FORMS
                                                else size.elements * size.width * 4)
