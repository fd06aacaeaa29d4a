"""The scatter pipeline's model at full size (tritonml/bench/scatter_model.py): its bytes
against an independent count, written out here per case from the sizes alone; the segment
kernel's launch as the tuner models it; the sort's share reported apart; docs/scatter.md's table
as the code computes it; and the issue's targets, met and missed as the pipeline is (each
miss asserted with the step that costs it, so a fix shows up here)."""
import numpy as np
import pytest

from benchmarks import doc_table
from tritonml.bench import scatter_cases as C
from tritonml.bench import scatter_model as M
from tritonml.bench import segment_model
from tritonml_autotune import devices

ROWS = M.rows()
BY_LABEL = {r.case.label: r for r in ROWS}
E, N = C.EDGES, C.NODES
MiB = 1 << 20


def _row(form, reduce, width):
    return next(r for r in ROWS if r.case.form == form and r.case.reduce == reduce
                and r.case.sizes.width == width)


def _published(width):
    """The segment kernel's chunk states beside its data: programs x (states + a status word)."""
    r = _row("segment_coo", "sum", width)
    kernel = next(s for s in r.steps if s.part == "kernel")
    return kernel.dram - (E * width * 4 + N * width * 4 + (N + 1) * 8)


@pytest.mark.parametrize("width", C.WIDTHS)
def test_a_sorted_sum_moves_the_checks_with_the_offsets_and_one_kernel_pass(width):
    # written out: the checks' pass reads the int64 index of E once from DRAM (its view one
    # element on, from L2), writes the N + 1 int64 boundaries of the sorted index and three
    # int64 atomics for each of its programs of 1,024 positions; the kernel reads src and those
    # boundaries and writes the result. Nothing else: no search, no second read of the index
    index = 8 * E
    checks = index + 8 * (N + 1) + 24 * -(-E // 1024)
    kernel = 4 * E * width + 8 * (N + 1) + 4 * N * width
    ideal = 4 * E * width + index + 4 * N * width
    r = _row("segment_coo", "sum", width)
    assert r.ideal == ideal
    assert 0 < _published(width) < 0.001 * ideal
    assert r.bytes_ratio * ideal == pytest.approx(checks + kernel + _published(width))
    assert r.part_ratio("checks", "l2") * ideal == 8 * (E - 1)
    assert r.part_ratio("offsets") == 0
    assert r.sort_bytes_share == 0
    # the mean is the kernel's AVERAGE: the sum's bytes, nothing after
    assert _row("segment_coo", "mean", width).bytes_ratio == pytest.approx(r.bytes_ratio)


def test_the_sort_is_four_radix_passes_over_int32_keys_and_int64_positions_its_share_apart():
    # the int64 index cast to int32 keys (8 read, 4 written); 12 B a pair (int32 key, int64
    # position), read and written each of 4 passes, plus the positions' arange and the
    # histogram's read of the keys; then src's rows gathered into that order. The boundaries
    # then come from a search of the sorted int32 keys (int32 queries written and read, the
    # keys read, int64 boundaries written), where a sorted index had them from the checks
    # (which write none for an unsorted one)
    for width in C.WIDTHS:
        unsorted, sorted_ = _row("scatter", "sum", width), _row("segment_coo", "sum", width)
        cast = 12 * E
        radix = 8 * E + 4 * E + 4 * 2 * 12 * E
        gather = 8 * E + 2 * 4 * E * width
        searched = 4 * (N + 1) + (4 * E + 4 * (N + 1) + 8 * (N + 1))
        checks_wrote = 8 * (N + 1)
        extra = (unsorted.bytes_ratio - sorted_.bytes_ratio) * unsorted.ideal
        assert extra == pytest.approx(cast + radix + gather + searched - checks_wrote)
        assert unsorted.sort_bytes_share * unsorted.bytes_ratio * unsorted.ideal == \
            pytest.approx(cast + radix + gather)
        assert 0 < unsorted.sort_time_share < 1
        assert unsorted.without_sort("dram") * unsorted.ideal == pytest.approx(
            sorted_.bytes_ratio * sorted_.ideal + searched - checks_wrote)


def test_the_only_finishing_pass_is_index_adds_fold():
    # max's empty groups get their 0 from the kernel: no pass after it; nor for sum and mean
    for width in C.WIDTHS:
        for reduce in C.GNN_REDUCES:
            for form in ("segment_coo", "scatter"):
                assert _row(form, reduce, width).part_ratio("finish") == 0
    # index_add: input + reduced, read both, write the result; no counts
    (index_add,) = [r for r in ROWS if r.case.form == "index_add"]
    rows = C.VOCAB * C.EMBED_DIM * 4
    assert index_add.part_ratio("finish") * index_add.ideal == 3 * rows


def test_the_segment_kernel_is_the_tuners_launch_for_each_width():
    for width in C.WIDTHS:
        r = _row("segment_coo", "sum", width)
        kernel = next(s for s in r.steps if s.part == "kernel")
        counts = M.counts_of(r.case)
        assert counts.sum() == E and len(counts) == N
        launch, config, *_ = segment_model.kernel_launch(counts, "reduce", inner=width)
        assert launch.programs >= devices.H100.sms
        assert config.block_inner == min(width, 64)
        # the bandwidth floor of its own bytes, at least
        assert kernel.seconds >= kernel.dram / devices.H100.copy_bandwidth_bytes_per_s
    # the 1-D kernel's registers are segment_model's (the table's float32 SUM, sm_90)
    counts = M.counts_of(_row("segment_coo", "sum", 1).case)
    assert M.kernel_registers(counts, 1) == segment_model.REGISTERS["reduce"]


def test_in_degrees_follow_a_power_law():
    counts = M.counts_of(_row("segment_coo", "sum", 1).case)
    assert np.median(counts) < E // N < counts.max() / 100      # a few hubs
    assert (counts == 0).any()                                  # and some nodes with none


@pytest.mark.source_tree
def test_the_doc_table_is_the_models():
    text = doc_table.SCATTER_DOC.read_text(encoding="utf-8")
    assert doc_table.rendered_scatter(text) == text, "run python -m benchmarks.doc_table"


def test_the_targets_are_met_and_missed_where_the_table_says_and_for_these_reasons():
    """The issue's targets for a sorted index: bytes <= 1.1 x and modeled time <= 1.25 x the
    ideal at every width. Bytes: met by every function at every width (the checks' one read of
    the index brings the boundaries, the kernel writes max's empty groups). Time: met at F = 16
    and 64, where the segment kernel walks tiles of four 1,024-lane slices (16 KiB a step, two
    programs per SM) and is no longer step-bound; missed at F = 1, where the checks' launch (the
    index is 2/3 of the ideal bytes) and the kernel's are two launches, whose launch costs alone
    leave less than the aim allows. These asserts pin both; a fix of F = 1 turns its over."""
    f1, f16, f64 = (_row("segment_coo", "sum", w) for w in C.WIDTHS)
    for width in C.WIDTHS:
        for reduce in C.GNN_REDUCES:
            assert _row("segment_coo", reduce, width).bytes_ratio <= 1.1
    assert f1.part_ratio("checks") == pytest.approx(8 * E / f1.ideal, rel=0.1)
    for width in (16, 64):
        for reduce in C.GNN_REDUCES:
            assert _row("segment_coo", reduce, width).time_ratio <= 1.25
    # the kernel at widths 16 and 64 streams: within 10 % of its own bytes' time at the
    # bandwidth, plus a launch
    for r in (f16, f64):
        kernel = next(step for step in r.steps if step.part == "kernel")
        streaming = (kernel.dram / devices.H100.copy_bandwidth_bytes_per_s
                     + devices.H100.launch_overhead_s)
        assert kernel.seconds <= 1.1 * streaming
    assert f1.time_ratio > 1.25
    assert f1.part_ratio("checks", "seconds") > 0.6 and f1.part_ratio("kernel", "seconds") > 0.6
    # even streaming at the bandwidth, the two launches miss it (docs/scatter.md: about 1.27 x)
    floor = sum(step.dram / devices.H100.copy_bandwidth_bytes_per_s
                + devices.H100.launch_overhead_s for step in f1.steps)
    assert [step.part for step in f1.steps] == ["checks", "kernel"]
    assert 1.25 < floor / f1.ideal_seconds < 1.3
