"""The scatter pipeline at full size, step by step, as an H100 would move its bytes: modeled,
nothing timed.

tritonml's scatter and index reductions (tritonml/torch_ops/scatter_groups.py) run, in eager code:
the index checks (``index_facts``: aminmax, and for the order a diff, a compare and an any; one
synchronization), for an unsorted index a stable ``torch.sort`` and the gather of src into its
order (``index_select``), the group boundaries (``arange`` and ``searchsorted``), the segment
kernel (one launch), then the finishing passes (mean's counts and divide, max's empty groups,
index_add's fold of input). ``steps(case)`` lists each with

- ``counted``: the bytes the interpreter's counter charges the step (tritonml/bench/memtrace.py:
  a torch op's inputs and outputs once each, the kernel's loads and stores lane by lane), which
  tests/bench/test_scatter_bytes.py checks against the real calls at a small size;
- ``dram``: the bytes an H100 moves for it. The same as ``counted`` but for two kinds of step:
  a diff of overlapping views (``index[1:] - index[:-1]``: the second read hits the sectors the
  first just brought in) reads the index once; and the sort. **The sort's assumption**: torch's
  stable sort of an int64 index on CUDA is CUB's onesweep radix sort of (key, int64 position)
  pairs over all 64 key bits (torch does not narrow the bits to the keys' range): the positions
  written (an arange), one pass reading the keys for the digit histograms, then one pass per
  8-bit digit, ``SORT_DIGIT_PASSES`` = 8, each reading and writing keys and positions. Every
  other step moves what it reads and writes once; ``searchsorted`` reads the whole sorted index
  (its 2**18 binary searches touch every part of a 32 MiB index, which L2 then holds);
- ``seconds``: the segment kernel's launch in the tuner's model
  (``segment_model.kernel_launch``: tritonml_autotune.cost, with the sm_90 registers of its tile
  from autotune/tables/compiled.json), every other launch bandwidth-bound at the H100's
  ``copy_bandwidth_bytes_per_s`` (3.0e12 B/s, tritonml_autotune.devices: a measured large copy)
  with every SM busy, plus the launch overhead (4 us) each (``model.launch_seconds``). The sort's
  passes at copy bandwidth are a floor (a radix pass scatters its writes). The host's
  synchronization after the checks is not modeled.

Against the ideal: src, the index and the result each moved once (index_add's input read once
too), in one launch at full bandwidth (``model.ideal_seconds``). The sort's share (the sort and
the gather) is reported apart. ``table()`` is docs/scatter.md's table (``python -m
benchmarks.doc_table`` writes it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tritonml_autotune import compiled, devices, model

from . import scatter_cases as C
from . import segment_model

INDEX_BYTES = 8            # int64 index, offsets, positions
VALUE_BYTES = 4            # float32 src, weights and results
BOOL_BYTES = 1
SORT_DIGIT_PASSES = 8      # 64-bit keys, 8-bit digits (CUB onesweep)
# the segment kernel's state per value: float32 sums accumulate in float64, maxima in float32
STATE_BYTES = {"SUM": 8, "MAX": 4}
SORT_PARTS = ("sort", "gather")


@dataclass(frozen=True)
class Case:
    """One row of the table: ``form`` (``scatter_cases.FORMS``) reducing with ``reduce``."""
    form: str
    reduce: str
    sizes: C.Sizes

    @property
    def label(self) -> str:
        if self.form == "index_add":
            return f"index_add, {self.sizes.elements:,} tokens x {self.sizes.width} " \
                   f"into {self.sizes.groups:,} rows"
        if self.form == "bincount":
            return f"bincount with weights, {self.sizes.elements:,} ids into " \
                   f"{self.sizes.groups:,} bins"
        index = "sorted" if self.form in C.SORTED_FORMS else "unsorted"
        return f"{self.form} {self.reduce}, {index}, F = {self.sizes.width}"


@dataclass(frozen=True)
class Step:
    """One torch op or kernel launch of the pipeline (``part``: checks, sort, gather, offsets,
    kernel, finish); ``op``: the aten op memtrace names, or "segment_kernel"."""
    part: str
    op: str
    counted: int
    dram: float
    seconds: float


def _torch_step(part: str, op: str, counted: int, dram=None, launches: int = 1,
                device=devices.H100) -> Step:
    dram = counted if dram is None else dram
    seconds = (model.launch_seconds(device, dram / launches, device.sms) * launches
               if launches else 0.0)
    return Step(part, op, counted, dram, seconds)


def check_steps(elements: int, form: str, device=devices.H100) -> list:
    """``index_facts`` (bincount: its own min, max and diff) over an int64 index of
    ``elements``."""
    e, i = elements, INDEX_BYTES
    diff = _torch_step("checks", "aten.sub.Tensor", 3 * (e - 1) * i, e * i + (e - 1) * i,
                       device=device)
    order = [_torch_step("checks", "aten.lt.Scalar", (e - 1) * (i + BOOL_BYTES), device=device),
             _torch_step("checks", "aten.any.default", (e - 1) * BOOL_BYTES + 1, device=device),
             _torch_step("checks", "aten._to_copy.default", 1 + i, device=device),
             # the three facts stacked: memtrace counts the output (a list argument is not a
             # tensor it sizes), the scalars' reads are as small
             _torch_step("checks", "aten.stack.default", 3 * i, device=device)]
    if form == "bincount":
        return [diff,
                _torch_step("checks", "aten.min.default", e * i + i, device=device),
                _torch_step("checks", "aten.max.default", e * i + i, device=device)] + order
    return [_torch_step("checks", "aten.aminmax.default", e * i + 2 * i, device=device),
            diff] + order


def sort_steps(elements: int, row_bytes: int, device=devices.H100) -> list:
    """The stable sort of the index (``SORT_DIGIT_PASSES`` radix passes) and the gather of the
    ``row_bytes``-byte rows of src into its order."""
    e, i = elements, INDEX_BYTES
    radix = e * i + e * i + SORT_DIGIT_PASSES * 2 * (2 * e * i)   # arange, histogram, passes
    return [_torch_step("sort", "aten.sort.stable", 3 * e * i, radix,
                        launches=2 + SORT_DIGIT_PASSES, device=device),
            _torch_step("gather", "aten.index_select.default", e * i + 2 * e * row_bytes,
                        device=device)]


def offset_steps(elements: int, groups: int, device=devices.H100) -> list:
    q = (groups + 1) * INDEX_BYTES
    return [_torch_step("offsets", "aten.arange.default", q, device=device),
            _torch_step("offsets", "aten.searchsorted.Tensor", elements * INDEX_BYTES + 2 * q,
                        device=device)]


def kernel_step(counts: np.ndarray, width: int, function: str, device=devices.H100) -> Step:
    """The segment kernel over groups of ``counts`` rows of ``width`` float32 values."""
    launch, config, _, ideal, seconds = segment_model.kernel_launch(
        counts, "reduce", device, inner=width, element_bytes=VALUE_BYTES,
        state_bytes=STATE_BYTES[function], registers=kernel_registers(counts, width, device))
    return Step("kernel", "segment_kernel", ideal, launch.bytes_moved, seconds)


def kernel_registers(counts: np.ndarray, width: int, device=devices.H100) -> int:
    """sm_90's registers per thread of the segment reduction at the config ``device`` gets
    (autotune/tables/compiled.json, the float32 SUM state class)."""
    launch, config, *_ = segment_model.kernel_launch(counts, "reduce", device, inner=width,
                                                     registers=0)
    usage = compiled.usage("segment_reduce", "value", "float32", device.arch,
                           launch.tile_elements, config.num_warps)
    return usage.registers


def finish_steps(case: Case, device=devices.H100) -> list:
    """What follows the kernel: mean's counts and divide, max's empty groups, index_add's fold of
    input (which computes the counts too, unused by a sum)."""
    n, w, i, v = case.sizes.groups, case.sizes.width, INDEX_BYTES, VALUE_BYTES
    out = n * w * v
    # counts = offsets[1:] - offsets[:-1]: overlapping views, the offsets read once
    counts = _torch_step("finish", "aten.sub.Tensor", 3 * n * i, (n + 1) * i + n * i,
                         device=device)
    if case.form == "bincount" or (case.form in ("scatter", "segment_coo")
                                   and case.reduce == "sum"):
        return []
    if case.form == "index_add":
        return [counts, _torch_step("finish", "aten.add.Tensor", 3 * out, device=device)]
    if case.reduce == "mean":
        return [counts,
                _torch_step("finish", "aten.clamp.default", 2 * n * i, device=device),
                _torch_step("finish", "aten._to_copy.default", n * (i + v), device=device),
                _torch_step("finish", "aten.div.Tensor", 2 * out + n * v, device=device)]
    return [counts,
            _torch_step("finish", "aten.gt.Scalar", n * (i + BOOL_BYTES), device=device),
            _torch_step("finish", "aten.zeros_like.default", out, device=device),
            _torch_step("finish", "aten.where.self", n * BOOL_BYTES + 3 * out, device=device)]


def steps(case: Case, counts: np.ndarray, device=devices.H100) -> list:
    """Every step of ``case``'s pipeline, in order, for groups of ``counts`` elements each."""
    s = case.sizes
    row_bytes = s.width * VALUE_BYTES
    sort = [] if case.form in C.SORTED_FORMS else sort_steps(s.elements, row_bytes, device)
    before = check_steps(s.elements, case.form, device) + sort
    function = "MAX" if case.reduce == "max" else "SUM"
    return (before + offset_steps(s.elements, s.groups, device)
            + [kernel_step(counts, s.width, function, device)] + finish_steps(case, device))


def ideal_bytes(case: Case) -> int:
    """src, the index and the result once each (index_add's input read once too)."""
    s = case.sizes
    out = s.groups * s.width * VALUE_BYTES
    src = s.elements * s.width * VALUE_BYTES
    return src + s.elements * INDEX_BYTES + out * (2 if case.form == "index_add" else 1)


@dataclass(frozen=True)
class Modeled:
    case: Case
    steps: tuple
    ideal: int
    ideal_seconds: float

    def _total(self, attribute: str, parts=None) -> float:
        return sum(getattr(step, attribute) for step in self.steps
                   if parts is None or step.part in parts)

    @property
    def bytes_ratio(self) -> float:
        return self._total("dram") / self.ideal

    @property
    def time_ratio(self) -> float:
        return self._total("seconds") / self.ideal_seconds

    @property
    def sort_bytes_share(self) -> float:
        """The sort's and the gather's share of the bytes moved."""
        return self._total("dram", SORT_PARTS) / self._total("dram")

    @property
    def sort_time_share(self) -> float:
        return self._total("seconds", SORT_PARTS) / self._total("seconds")

    def without_sort(self, attribute: str) -> float:
        """The bytes (``dram``) or seconds of everything but the sort and the gather, over the
        ideal's."""
        rest = self._total(attribute) - self._total(attribute, SORT_PARTS)
        return rest / (self.ideal if attribute == "dram" else self.ideal_seconds)

    def part_ratio(self, part: str, attribute: str = "dram") -> float:
        """One part's DRAM bytes (or ``seconds``) over the ideal's."""
        ideal = self.ideal if attribute == "dram" else self.ideal_seconds
        return self._total(attribute, (part,)) / ideal


def modeled(case: Case, counts: np.ndarray, device=devices.H100) -> Modeled:
    ideal = ideal_bytes(case)
    return Modeled(case, tuple(steps(case, counts, device)), ideal,
                   model.ideal_seconds(device, ideal))


def cases() -> list:
    """The suite's scatter entries at full size: (case, its groups' element counts)."""
    found = []
    for form in ("segment_coo", "scatter"):
        for width in C.WIDTHS:
            size = C.sizes(form, (C.EDGES, width))
            for reduce in C.GNN_REDUCES:
                found.append(Case(form, reduce, size))
    found.append(Case("index_add", "sum", C.sizes("index_add", (C.TOKENS, C.EMBED_DIM))))
    found.append(Case("bincount", "sum", C.sizes("bincount", (C.BINCOUNT_IDS,))))
    return found


def counts_of(case: Case) -> np.ndarray:
    """Each group's element count: the in-degrees of the seeded GNN index, the seeded Zipf ids'
    frequencies."""
    index = C.index_of(case.form, case.sizes).numpy()
    return np.bincount(index, minlength=case.sizes.groups)


def rows(device=devices.H100) -> list:
    memo: dict = {}
    found = []
    for case in cases():
        key = (case.form in ("scatter", "segment_coo"), case.sizes)
        if key not in memo:
            memo[key] = counts_of(case)
        found.append(modeled(case, memo[key], device))
    return found


def table(device=devices.H100) -> str:
    lines = ["| case | bytes / ideal | modeled / ideal time | sort's share: bytes, time | "
             "without the sort: bytes, time / ideal | checks: bytes / ideal | segment kernel: "
             "bytes, time / ideal | finish: bytes / ideal |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows(device):
        lines.append(f"| {r.case.label} | {r.bytes_ratio:.2f} | {r.time_ratio:.2f} | "
                     f"{r.sort_bytes_share:.0%}, {r.sort_time_share:.0%} | "
                     f"{r.without_sort('dram'):.2f}, {r.without_sort('seconds'):.2f} | "
                     f"{r.part_ratio('checks'):.2f} | {r.part_ratio('kernel'):.2f}, "
                     f"{r.part_ratio('kernel', 'seconds'):.2f} | {r.part_ratio('finish'):.2f} |")
    return "\n".join(lines) + "\n"
