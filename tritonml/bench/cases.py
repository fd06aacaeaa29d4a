"""The benchmark suite of ``tritonml bench``, as data, and how one entry becomes runnable closures.

The suite lives here, in the installed package, so ``tritonml bench`` finds it from any working
directory; the repository's ``benchmarks/`` scripts import it (and ``make_input``/``assert_close``)
from here. Each ``Entry`` has a full shape (what a GPU times) and a quick shape (``--quick``, and
what the CPU counts when the full shape is over the interpreter's limit, see ``run.py``).

``prepare`` allocates everything up front and returns a ``Prepared`` whose ``run`` only launches
tritonml (allocation stays outside any timed or traced region), with torch's eager twin, a float64
reference and the ideal bytes computed from shapes and dtypes alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from ..records.builtin_reductions import RECORDS, record_of
from .tolerances import TOLERANCES

F32, F16, BF16, I32, I8 = torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8
SCAN_DTYPES = (F32, F16, BF16, I32)
REDUCE_DTYPES = (F32, F16, BF16, I32, I8)
# Every reduce function with a record (tritonml/records/builtin_reductions.py), the twelve in the published
# reports' order (families together), any later one after them.
_REPORTED = ("SUM", "AVERAGE", "L1", "L2", "SUM_SQUARE", "MULTIPLY", "MIN", "MAX", "ARGMIN",
             "ARGMAX", "LOG_SUM", "LOG_SUM_EXP")
REDUCE_FUNCTIONS = _REPORTED + tuple(f.name for f in RECORDS if f.name not in _REPORTED)
SCAN_OPS = ("cumulative_sum",)
RECURRENCE = "linear_recurrence"
NOT_AVAILABLE = "not available in this build"
FAILED = "failed"   # a row whose case raised (its note says where and what; run.py)


def nbytes(shape, dtype: torch.dtype) -> int:
    """Bytes of a dense tensor of ``shape`` and ``dtype``, from the shape alone."""
    return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def dtype_text(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


# ---------------------------------------------------------------------------------------------
# The suite
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Entry:
    """One line of the suite: ``ops`` each run on every dtype of ``dtypes``.

    name: the id ``--cases`` selects by. group: "scan", "reduce", "recurrence", or "segment" /
    "padded" (segmented ops, and their padded-dense equivalent: ``segment_cases``).
    axes: the scanned axis (one) or the reduced axes (None: all).
    segments: the segment length distribution of a "segment" or "padded" entry
    (``segment_cases.LENGTH_KINDS``).
    scatter: the form of a "scatter" entry (``scatter_cases.FORMS``): GNN aggregation with an
    unsorted ("scatter") or sorted ("segment_coo") index, "index_add", "bincount".
    """
    name: str
    group: str
    shape: tuple
    quick_shape: tuple
    axes: Optional[tuple]
    ops: tuple
    dtypes: tuple
    what: str
    segments: Optional[str] = None
    scatter: Optional[str] = None


def _segment_entries() -> tuple:
    """tritonml.segment_reduce / segment_scan and their padded-dense equivalent, over 2**24
    elements (quick: 2**14) in three length distributions (``segment_cases``)."""
    from .segment_cases import SEGMENT_FUNCTIONS, SEGMENT_SCAN
    kinds = {"short": "many segments of 1-3", "long": "4 long segments",
             "power": "power-law lengths"}
    return tuple(
        Entry(f"{group}-{what}-{kind}", group, (2 ** 24,), (2 ** 14,), (0,), ops, (F32,),
              f"{'' if group == 'segment' else 'padded-dense '}{what} over {text}", kind)
        for group in ("segment", "padded")
        for what, ops in (("reduce", SEGMENT_FUNCTIONS), ("scan", (SEGMENT_SCAN,)))
        for kind, text in kinds.items())


def _scatter_entries() -> tuple:
    """Scatter and index reductions (``scatter_cases``): GNN aggregation of 2**22 edges into
    2**18 nodes at three feature widths, the index unsorted and sorted; an embedding gradient's
    index_add; a weighted bincount. Quick: 2**12 edges (and proportionally smaller)."""
    from . import scatter_cases as C
    gnn = tuple(
        Entry(f"scatter-gnn-{form}-f{width}", "scatter", (C.EDGES, width),
              (C.QUICK_EDGES, width), (0,), C.GNN_REDUCES, (F32,),
              f"GNN aggregation, {'sorted' if form == 'segment_coo' else 'unsorted'} index "
              f"(tritonml.{form}), 2**22 edges into 2**18 nodes, {width} features",
              scatter=form)
        for form in ("scatter", "segment_coo") for width in C.WIDTHS)
    return gnn + (
        Entry("scatter-embedding-grad", "scatter", (C.TOKENS, C.EMBED_DIM),
              (C.QUICK_TOKENS, C.EMBED_DIM), (0,), ("sum",), (F32,),
              "embedding gradient: index_add of 2**19 token rows of 128 into 2**15 (Zipf ids)",
              scatter="index_add"),
        Entry("scatter-bincount-weights", "scatter", (C.BINCOUNT_IDS,), (C.QUICK_BINCOUNT_IDS,),
              (0,), ("sum",), (F32,), "bincount of 2**24 Zipf ids into 2**16 bins, weighted",
              scatter="bincount"))


SUITE = (
    Entry("scan-short-rows", "scan", (65536, 256), (256, 64), (1,), SCAN_OPS, SCAN_DTYPES,
          "scans over many short rows"),
    Entry("scan-square-last", "scan", (4096, 4096), (128, 256), (1,), SCAN_OPS, SCAN_DTYPES,
          "(4096, 4096) along the last axis"),
    Entry("scan-square-first", "scan", (4096, 4096), (256, 128), (0,), SCAN_OPS, SCAN_DTYPES,
          "(4096, 4096) along the first axis (strided)"),
    Entry("scan-wide-rows", "scan", (64, 65536), (2, 16384), (1,), SCAN_OPS, SCAN_DTYPES,
          "(64, 65536) along the last axis"),
    Entry("scan-one-row", "scan", (2 ** 26,), (2 ** 15,), (0,), SCAN_OPS, SCAN_DTYPES,
          "one row of 2**26"),
    # Few, long scans (the "chunked" regime's cases): one row of 2**20 and of 2**24, a 1-D 2**24,
    # eight rows of 2**22, and few long columns with many lanes.
    Entry("scan-row-2e20", "scan", (1, 2 ** 20), (1, 2 ** 14), (1,), SCAN_OPS, SCAN_DTYPES,
          "one row of 2**20"),
    Entry("scan-row-2e24", "scan", (1, 2 ** 24), (1, 2 ** 15), (1,), SCAN_OPS, SCAN_DTYPES,
          "one row of 2**24"),
    Entry("scan-1d-2e24", "scan", (2 ** 24,), (2 ** 15,), (0,), SCAN_OPS, SCAN_DTYPES,
          "a 1-D tensor of 2**24"),
    Entry("scan-eight-long-rows", "scan", (8, 2 ** 22), (2, 2 ** 14), (1,), SCAN_OPS, SCAN_DTYPES,
          "(8, 2**22) along the last axis"),
    Entry("scan-wide-columns", "scan", (4096, 16384), (256, 512), (0,), SCAN_OPS, SCAN_DTYPES,
          "(4096, 16384) along the first axis (few long columns, many lanes)"),
    Entry("scan-middle-axis", "scan", (8, 1024, 64), (4, 128, 64), (1,), SCAN_OPS, SCAN_DTYPES,
          "(8, 1024, 64) along the middle axis"),
    Entry("reduce-rows", "reduce", (4096, 4096), (128, 256), (1,), ("SUM",), REDUCE_DTYPES,
          "sum over rows"),
    Entry("reduce-tall-columns", "reduce", (65536, 256), (4096, 16), (0,), ("SUM",), REDUCE_DTYPES,
          "sum down tall columns"),
    Entry("reduce-short-columns", "reduce", (16, 1048576), (16, 4096), (0,), ("SUM",),
          REDUCE_DTYPES, "sum down short columns"),
    Entry("reduce-axes-apart", "reduce", (64, 256, 1024), (16, 32, 64), (0, 2), ("SUM",),
          REDUCE_DTYPES, "sum over axes 0 and 2 (not adjacent)"),
    Entry("reduce-all", "reduce", (2 ** 26,), (2 ** 16,), None, ("SUM",), REDUCE_DTYPES,
          "sum of the whole tensor"),
    Entry("reduce-functions", "reduce", (4096, 4096), (64, 256), (1,), REDUCE_FUNCTIONS, (F32,),
          "the twelve reduce functions over rows"),
    Entry("linear-recurrence", "recurrence", (64, 65536), (2, 4096), (1,), (RECURRENCE,),
          (F32, F16, BF16), "h[t] = gates[t] * h[t-1] + tokens[t] (tuple scan, the DSL)"),
    Entry("linear-recurrence-long", "recurrence", (4, 2 ** 20), (2, 2 ** 13), (1,), (RECURRENCE,),
          (F32, F16, BF16), "the recurrence over (4, 2**20): few, long sequences"),
) + _segment_entries() + _scatter_entries()
ENTRIES = {entry.name: entry for entry in SUITE}
ALL_OPS = tuple(dict.fromkeys(op for entry in SUITE for op in entry.ops))
ALL_DTYPES = tuple(dict.fromkeys(d for entry in SUITE for d in entry.dtypes))


# ---------------------------------------------------------------------------------------------
# Inputs and accuracy
# ---------------------------------------------------------------------------------------------
def make_input(shape, dtype: torch.dtype, axis_len: int, device, seed: int = 0) -> torch.Tensor:
    """Values whose running sums stay representable: uniform [0, 1) floats (float16 scaled so a
    whole-axis sum stays below 2**14), small integers whose sums fit int32."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    if dtype.is_floating_point:
        scale = min(1.0, 2.0 ** 14 / max(axis_len, 1)) if dtype == torch.float16 else 1.0
        x = torch.rand(shape, generator=g, dtype=torch.float64) * scale
    else:
        x = torch.randint(-8, 8, shape, generator=g, dtype=torch.int64)
    return x.to(dtype).to(device)


def assert_close(result: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype, what: str):
    """``reference`` is float64 (or exact int64); compare within ``TOLERANCES[dtype].rtol`` of it,
    rounded to ``dtype``. No ``atol``: ``make_input``'s values are nonnegative (or small integers,
    compared exactly), so nothing cancels to near zero."""
    rtol = TOLERANCES[dtype].rtol
    expected = reference.to(dtype).to(torch.float64)
    got = result.to(torch.float64)
    bad = (got - expected).abs() > rtol * expected.abs()
    if bool(bad.any()):
        where = int(bad.reshape(-1).nonzero()[0])
        raise AssertionError(f"{what}: {int(bad.sum())} elements off (rtol {rtol}); first at flat "
                             f"index {where}: got {got.reshape(-1)[where].item()}, "
                             f"expected {expected.reshape(-1)[where].item()}")


def relative_error(result: torch.Tensor, reference: torch.Tensor) -> float:
    """Largest |result - reference| / |reference| over the elements (the denominator at least the
    smallest normal float32, so exact zeros do not divide by zero); 0.0 when equal."""
    got = result.detach().to("cpu", torch.float64)
    want = reference.detach().to("cpu", torch.float64)
    if got.shape != want.shape:
        got = got.reshape(want.shape)
    both_inf = torch.isinf(got) & torch.isinf(want) & (got == want)
    error = ((got - want).abs() / want.abs().clamp_min(torch.finfo(torch.float32).tiny))
    error = torch.where(both_inf, torch.zeros_like(error), error)
    return float(error.max()) if error.numel() else 0.0


def torch_recurrence(gates: torch.Tensor, tokens: torch.Tensor, axis: int) -> torch.Tensor:
    """h[t] = gates[t] * h[t-1] + tokens[t], h[-1] = 0, one step at a time in the inputs' dtype:
    torch's closest eager form (it has no scan op for it)."""
    g, t = gates.movedim(axis, 0), tokens.movedim(axis, 0)
    out = torch.empty_like(t)
    h = torch.zeros_like(t[0])
    for step in range(t.shape[0]):
        h = g[step] * h + t[step]
        out[step] = h
    return out.movedim(0, axis)


def recurrence_reference(gates: torch.Tensor, tokens: torch.Tensor, axis: int) -> torch.Tensor:
    """The same sequential loop in float64."""
    return torch_recurrence(gates.to(torch.float64), tokens.to(torch.float64), axis)


# ---------------------------------------------------------------------------------------------
# Preparing one (entry, op, dtype, shape)
# ---------------------------------------------------------------------------------------------
@dataclass
class Prepared:
    """Ready to run: ``run()`` launches tritonml into preallocated ``out``; ``torch_run()`` runs
    torch's eager twin on the same inputs; ``reference()`` is float64 (exact int64 for integers)."""
    run: Callable[[], torch.Tensor]     # the public function: what a user calls (timed)
    torch_fn: Callable                  # the eager twin as a function of ``inputs`` (torch.compile)
    inputs: tuple
    reference: Callable[[], torch.Tensor]
    out: Optional[torch.Tensor]         # preallocated output (None: the op allocates it)
    regions: dict                       # memtrace regions: inputs and output
    ideal_bytes: int                    # inputs read once + output written once
    exact: bool                         # integer results (or indices): compared for equality
    launch: Optional[Callable[[], torch.Tensor]] = None
    compile_note: Optional[str] = None  # why torch.compile is not timed (None: it is)
    # further peers timed on the same inputs, by name: each a function of ``inputs``
    # (scatter_cases: torch under deterministic algorithms, torch_scatter)
    peers: dict = field(default_factory=dict)
    # parts of tritonml's run timed apart, by name, each a closure (scatter_cases: the sort)
    parts: dict = field(default_factory=dict)
    # extra row fields from the counted run's memtrace (scatter_cases.sort_share)
    trace_fields: Optional[Callable] = None
    """``launch``: the launcher under the public function (``tritonml.launchers``), same config
    choice and kernels: what bytes are counted on, since memtrace sees the registered torch op
    as one opaque call."""

    def counted_run(self):
        return (self.launch or self.run)()

    def torch_run(self):
        return self.torch_fn(*self.inputs)


class NotAvailable(Exception):
    """The op is not in this build of tritonml (the reason is the message)."""


def prepare(entry: Entry, op: str, dtype: torch.dtype, shape: tuple, device="cpu") -> Prepared:
    """Allocate inputs and output for ``op`` of ``entry`` at ``shape``. Raises ``NotAvailable``
    when this build of tritonml lacks the op."""
    from ..core.shapes import reduced_shape
    from ..launchers.reduce import reduce_axes
    from ..launchers.scan import SUM, cumulative_scan
    from ..torch_ops.reduce import reduce
    from ..torch_ops.scan import cumulative_sum

    if entry.segments is not None:
        from .segment_cases import prepare_segment
        return prepare_segment(entry, op, dtype, shape, device)
    if entry.scatter is not None:
        from .scatter_cases import prepare_scatter
        return prepare_scatter(entry, op, dtype, shape, device)
    rank = len(shape)
    axes = tuple(range(rank)) if entry.axes is None else tuple(a % rank for a in entry.axes)
    if entry.group == "recurrence":
        try:  # the public function, looked up at call time: a build without it reports so
            from .. import linear_recurrence as function
        except ImportError:
            raise NotAvailable(f"tritonml.{RECURRENCE}: {NOT_AVAILABLE}") from None
        axis = axes[0]
        # Gates in [0, 1) keep the state bounded (at most 1 / (1 - max gate) * max token).
        gates = make_input(shape, dtype, shape[axis], device, seed=1) * 0.9
        tokens = make_input(shape, dtype, shape[axis], device, seed=2)
        # Measured at the launcher, as the scan and reduce entries are: a public function called
        # under the byte counter's dispatch mode goes through its torch op, which the counter
        # would add as torch work on top of the kernel's own loads and stores.
        from ..torch_ops.recurrence import linear_recurrence
        from ..launchers.recurrence import recurrence
        if function is linear_recurrence:
            function = recurrence
        return Prepared(lambda: function(gates, tokens, axis),
                        lambda g, t: torch_recurrence(g, t, axis), (gates, tokens),
                        lambda: recurrence_reference(gates, tokens, axis), None,
                        {"input": gates, "input 2": tokens}, nbytes(shape, dtype) * 3, False,
                        compile_note="not timed: torch.compile would unroll the step loop")
    if entry.group == "scan":
        axis = axes[0]
        x = make_input(shape, dtype, shape[axis], device)
        out = torch.empty_like(x)
        wide = torch.float64 if dtype.is_floating_point else torch.int64

        def reference():
            result = torch.cumsum(x.to(wide), axis)
            # integers wrap modulo 2**bits, as tritonml's do
            return result if dtype.is_floating_point else result.to(dtype).to(torch.int64)

        return Prepared(lambda: cumulative_sum(x, axis, out=out),
                        lambda v: torch.cumsum(v, axis), (x,), reference, out,
                        {"input": x, "output": out}, 2 * nbytes(shape, dtype),
                        not dtype.is_floating_point,
                        lambda: cumulative_scan(x, axis, SUM, out=out))
    # reduce
    red_len = math.prod(shape[a] for a in axes)
    x = make_input(shape, dtype, red_len, device)
    if op == "MULTIPLY" and dtype.is_floating_point:
        x = 1.0 + (x - 0.5) / red_len  # a product of values near 1 stays representable
    record = record_of(op)   # the function's record: its torch twin, dtypes and output
    returns_index = record.returns_index
    out_shape = reduced_shape(shape, axes)
    out_dtype = torch.int64 if returns_index else dtype
    out = torch.empty(out_shape, dtype=out_dtype, device=device)
    twin = record.torch_twin
    wide = torch.float64 if dtype.is_floating_point else torch.int64

    def reference():
        result = twin(x.to(wide), axes)
        if not dtype.is_floating_point and not returns_index:
            result = result.to(dtype).to(torch.int64)  # integers wrap modulo 2**bits
        return result

    def torch_fn(v):
        if not dtype.is_floating_point and record.float_only:
            return twin(v.to(torch.float32), axes)  # torch has no integer form of these
        return twin(v, axes)

    return Prepared(lambda: reduce(x, op, axes, out=out), torch_fn, (x,), reference,
                    out, {"input": x, "output": out},
                    nbytes(shape, dtype) + nbytes(out_shape, out_dtype),
                    returns_index or not dtype.is_floating_point,
                    lambda: reduce_axes(x, axes, record, keepdims=True, out=out))
