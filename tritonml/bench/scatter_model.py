"""The scatter pipeline at full size, step by step, as an H100 would move its bytes: modeled,
nothing timed.

tritonml's scatter and index reductions (tritonml/torch_ops/scatter.py, scatter_forms.py,
scatter_groups.py) run, in eager code:

- **checks**: one pass over the index, ``read_index_bounds`` (tritonml/kernels/index_bounds.py;
  every index here is a 1-D line: the GNN's and the embedding's broadcast across the features,
  bincount's ids): one launch giving (min, max, descents) and, where the index is sorted and
  the number of groups known (not bincount's, which the pass finds), its N + 1 int64 group
  boundaries, then one synchronization (not modeled);
- for an unsorted index, the **sort**: the keys cast to int32 (``_to_copy``; the groups number
  fewer than 2**31) and a stable ``torch.sort``; then the **gather** of src into its order
  (``index_select``);
- the **offsets** of a sorted index come with the checks; an unsorted index's, after its sort:
  ``arange`` of the N + 1 group numbers in the keys' dtype and ``searchsorted`` (int64
  boundaries, the segment kernel's type);
- the **kernel**: the segment kernel (one launch; torch_scatter's float mean is its AVERAGE with
  initial 0, the sum's state and bytes);
- the **finish**: index_add's fold of input (``region + reduced``, no counts), the groups'
  sums in float64 (the kernel stores its float64 state: input joins it there, and the result
  is rounded to float32 once, a second pass). A sum, a float mean and max have none (max's
  empty groups get torch_scatter's 0 from the kernel itself).

``steps(case, counts)`` lists each with

- ``counted``: the bytes the interpreter's counter charges the step (tritonml/bench/memtrace.py:
  a torch op's tensor arguments and outputs once each, a kernel's loads and stores lane by lane
  at the config the interpreter runs), which tests/bench/test_scatter_bytes.py checks against
  the real calls at a small size: exactly for the torch ops, part by part for the checks' kernel,
  within a bound for the segment kernel (there ``counted`` is its ideal: src, the result, the
  boundaries once);
- ``dram``: the bytes an H100 moves for it. The same as ``counted`` but where noted:
  ``index_bounds_kernel`` reads the index's bytes once from DRAM (its view one element on, and
  its binary searches of the tile for each group's boundary, from cache: the view is ``l2``,
  the searches, of the tile just loaded, not counted) and writes the boundaries where the
  index is sorted; its three facts are integer atomics, three per program. **The sort's
  assumption**: torch's stable sort of int32 keys on CUDA is CUB's onesweep radix sort of (key,
  int64 position) pairs over the keys' 32 bits: the positions written (an arange), one pass
  reading the keys for the digit histograms, then one pass per 8-bit digit,
  ``SORT_DIGIT_PASSES`` = 4, each reading and writing keys (4 B) and positions (8 B). ``searchsorted`` reads the whole sorted keys (its N + 1 binary
  searches touch every part of them, which L2 then holds);
- ``seconds``: ``index_bounds_kernel``, a streaming pass, as the torch ops below (its searches'
  L1 latency not modeled); the segment kernel's launch in the tuner's model
  (tritonml_autotune.cost, with the sm_90 registers of its tile from
  autotune/tables/compiled.json), every other launch bandwidth-bound at the H100's
  ``copy_bandwidth_bytes_per_s`` (3.0e12 B/s, tritonml_autotune.devices: a measured large copy)
  with every SM busy, plus the launch overhead (4 us) each (``model.launch_seconds``). The sort's
  passes at copy bandwidth are a floor (a radix pass scatters its writes). The host's
  synchronization after the checks is not modeled.

Against the ideal: src, the index and the result each moved once (index_add's input read once
too), in one launch at full bandwidth (``model.ideal_seconds``). The sort's share (the cast, the
sort and the gather) is reported apart. ``table()`` is docs/scatter.md's table (``python -m
benchmarks.doc_table`` writes it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tritonml_autotune import compiled, devices, model

from ..launchers.index_bounds import bounds_config
from . import scatter_cases as C
from . import segment_model

INDEX_BYTES = 8            # the int64 index, the positions, the kernel's boundaries, counts
KEY_BYTES = 4              # int32 sort keys (fewer than 2**31 groups)
BOUNDARY_BYTES = 8         # searchsorted's int64 boundaries, the segment kernel's type
VALUE_BYTES = 4            # float32 src, weights and results
SORT_DIGIT_PASSES = 4      # 32-bit keys, 8-bit digits (CUB onesweep)
# the segment kernel's state per value: float32 sums (and AVERAGE's) accumulate in float64,
# maxima in float32
STATE_BYTES = {"SUM": 8, "AVERAGE": 8, "MAX": 4}
SORT_PARTS = ("sort", "gather")
BOUNDS_KERNEL = "index_bounds_kernel"
SEGMENT_KERNEL = "segment_kernel"


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
    kernel, finish); ``op``: the aten op memtrace names, or the kernel's name as the interpreter
    launches it (``BOUNDS_KERNEL``, ``SEGMENT_KERNEL``); ``l2``: bytes read again from L2 on top
    of ``dram`` (the checks' view of the index one element on)."""
    part: str
    op: str
    counted: int
    dram: float
    seconds: float
    l2: float = 0.0

    @property
    def is_kernel(self) -> bool:
        return not self.op.startswith("aten.")


def _torch_step(part: str, op: str, counted: int, dram=None, launches: int = 1,
                device=devices.H100) -> Step:
    dram = counted if dram is None else dram
    seconds = (model.launch_seconds(device, dram / launches, device.sms) * launches
               if launches else 0.0)
    return Step(part, op, counted, dram, seconds)


def bounds_step(elements: int, groups: int, sorted_index: bool, device=devices.H100) -> Step:
    """``read_index_bounds`` over an int64 index of ``elements`` into ``groups`` groups, at its
    GPU config: the index read once, the N + 1 int64 boundaries written where it is sorted, three
    int64 atomics a program; ``l2``: the view one element on. ``counted`` is the same (the
    interpreter runs other programs: tests/bench/test_scatter_bytes.py checks each part)."""
    e, i, b = elements, INDEX_BYTES, BOUNDARY_BYTES
    block = bounds_config(e, "cuda")[0]
    programs = -(-e // block)
    dram = e * i + ((groups + 1) * b if sorted_index else 0) + 3 * i * programs
    return Step("checks", BOUNDS_KERNEL, dram, dram,
                model.launch_seconds(device, dram, device.sms), l2=(e - 1) * i)


def sort_steps(elements: int, row_bytes: int, device=devices.H100) -> list:
    """The keys cast to int32, their stable sort (``SORT_DIGIT_PASSES`` radix passes over
    (int32 key, int64 position) pairs) and the gather of the ``row_bytes``-byte rows of src into
    its order."""
    e, i, k = elements, INDEX_BYTES, KEY_BYTES
    pair = k + i
    radix = e * i + e * k + SORT_DIGIT_PASSES * 2 * e * pair   # arange, histogram, passes
    return [_torch_step("sort", "aten._to_copy.default", e * (i + k), device=device),
            _torch_step("sort", "aten.sort.stable", e * k + e * pair, radix,
                        launches=2 + SORT_DIGIT_PASSES, device=device),
            _torch_step("gather", "aten.index_select.default", e * i + 2 * e * row_bytes,
                        device=device)]


def offset_steps(elements: int, groups: int, key_bytes: int, device=devices.H100) -> list:
    """The N + 1 queries (``arange`` in the keys' dtype) and the search of the sorted keys
    (``key_bytes`` each) writing the int64 boundaries the segment kernel reads."""
    q = groups + 1
    b = BOUNDARY_BYTES
    return [_torch_step("offsets", "aten.arange.default", q * key_bytes, device=device),
            _torch_step("offsets", "aten.searchsorted.Tensor",
                        elements * key_bytes + q * key_bytes + q * b, device=device)]


def kernel_step(counts: np.ndarray, width: int, function: str, device=devices.H100, *,
                one_pass: bool = False, accumulated: bool = False) -> Step:
    """The segment kernel over groups of ``counts`` rows of ``width`` float32 values (int64
    boundaries), at the config it takes on ``device``: the group reductions take the H100's
    (``scatter_groups.GROUP_TARGET``) on every device, the interpreter's included, so
    ``counted`` is the launch's own bytes (src, the result and the boundaries once, and each
    program's published chunk states); ``l2``: the look-back's reads of those states, at most
    each once (their re-reads apart), from L2, as the tuner's model has them; the status words'
    atomics are in neither. ``one_pass``: the segments come from the sorted int64 index itself
    (``segment_coo``'s one pass): the index once instead of the boundaries, each program's facts
    written, and the index's views one element before and after in ``l2``. ``accumulated``:
    the result is the state itself, in float64 (index_add's groups, which input joins)."""
    launch, config, _, ideal, seconds = segment_model.kernel_launch(
        counts, "reduce", device, inner=width, element_bytes=VALUE_BYTES,
        state_bytes=STATE_BYTES[function],
        result_bytes=STATE_BYTES[function] if accumulated else None,
        registers=kernel_registers(counts, width, device, one_pass=one_pass),
        boundary_bytes=BOUNDARY_BYTES, ids_bytes=INDEX_BYTES if one_pass else 0)
    return Step("kernel", SEGMENT_KERNEL, int(launch.bytes_moved), launch.bytes_moved, seconds,
                l2=launch.bytes_moved - ideal + launch.l2_bytes)


def kernel_registers(counts: np.ndarray, width: int, device=devices.H100, *,
                     one_pass: bool = False) -> int:
    """sm_90's registers per thread of the segment reduction at the config ``device`` gets
    (autotune/tables/compiled.json, the float32 SUM state class; ``one_pass``: from ids)."""
    launch, config, *_ = segment_model.kernel_launch(counts, "reduce", device, inner=width,
                                                     registers=0,
                                                     ids_bytes=INDEX_BYTES if one_pass else 0)
    kernel = "segment_reduce_ids" if one_pass else "segment_reduce"
    usage = compiled.usage(kernel, "value", "float32", device.arch,
                           launch.tile_elements, config.num_warps)
    if usage is None:
        raise LookupError(f"autotune/tables/compiled.json has no {kernel} tile of "
                          f"{launch.tile_elements} elements at {config.num_warps} warps for "
                          f"sm_{device.arch}")
    return usage.registers


def kernel_function(case: Case) -> str:
    """The segment reduction the case launches: torch_scatter's float mean in the kernel
    (AVERAGE, initial 0), max as MAX, every sum (index_add's, bincount's) as SUM."""
    return {"mean": "AVERAGE", "max": "MAX"}.get(case.reduce, "SUM")


def finish_steps(case: Case, counts: np.ndarray, device=devices.H100) -> list:
    """What follows the kernel: index_add's fold of input (no counts) into the float64 sums,
    then the result rounded to float32. A sum, a float mean and max (its empty groups' 0
    written by the kernel) have none."""
    n, w, v, acc = case.sizes.groups, case.sizes.width, VALUE_BYTES, STATE_BYTES["SUM"]
    if case.form == "index_add":
        return [_torch_step("finish", "aten.add.Tensor", n * w * (v + 2 * acc), device=device),
                _torch_step("finish", "aten._to_copy.default", n * w * (acc + v),
                            device=device)]
    return []


def one_pass(case: Case) -> bool:
    """Whether the case runs as one launch of the segment kernel reading the sorted index itself
    (tritonml/torch_ops/scatter_one_pass.py): ``segment_coo`` over rows one value wide."""
    return case.form == "segment_coo" and case.sizes.width == 1


def steps(case: Case, counts: np.ndarray, device=devices.H100) -> list:
    """Every step of ``case``'s pipeline, in order, for groups of ``counts`` elements each."""
    s = case.sizes
    if one_pass(case):
        return [kernel_step(counts, s.width, kernel_function(case), device, one_pass=True)]
    row_bytes = s.width * VALUE_BYTES
    unsorted = case.form not in C.SORTED_FORMS
    sort = sort_steps(s.elements, row_bytes, device) if unsorted else []
    # bincount's pass finds the number of groups: it is asked for no boundaries
    checks = [bounds_step(s.elements, s.groups, not unsorted and case.form != "bincount",
                          device)]
    offsets = offset_steps(s.elements, s.groups, KEY_BYTES, device) if unsorted else []
    return (checks + sort + offsets
            + [kernel_step(counts, s.width, kernel_function(case), device,
                           accumulated=case.form == "index_add")]
            + finish_steps(case, counts, device))


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
        """One part's DRAM bytes (or ``l2`` re-read bytes, or ``seconds``) over the ideal's."""
        ideal = self.ideal_seconds if attribute == "seconds" else self.ideal
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
    """docs/scatter.md's table: each part's DRAM bytes and modeled seconds over the ideal's;
    the checks' L2 re-read (their view of the index one element on) apart, in parentheses."""
    lines = ["| case | bytes / ideal | modeled / ideal time | sort's share: bytes, time | "
             "without the sort: bytes, time / ideal | checks: bytes, time / ideal (L2 re-read) | "
             "offsets: bytes, time / ideal | segment kernel: bytes, time / ideal | "
             "finish: bytes, time / ideal |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def part(r, name):
        return f"{r.part_ratio(name):.2f}, {r.part_ratio(name, 'seconds'):.2f}"

    for r in rows(device):
        lines.append(f"| {r.case.label} | {r.bytes_ratio:.2f} | {r.time_ratio:.2f} | "
                     f"{r.sort_bytes_share:.0%}, {r.sort_time_share:.0%} | "
                     f"{r.without_sort('dram'):.2f}, {r.without_sort('seconds'):.2f} | "
                     f"{part(r, 'checks')} ({r.part_ratio('checks', 'l2'):.2f}) | "
                     f"{part(r, 'offsets')} | {part(r, 'kernel')} | {part(r, 'finish')} |")
    return "\n".join(lines) + "\n"
