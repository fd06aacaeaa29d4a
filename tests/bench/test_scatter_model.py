"""The scatter pipeline's model at full size (tritonml/bench/scatter_model.py): its bytes
against an independent count, written out here per case from the sizes alone; the segment
kernel's launch as the tuner models it; the sort's share reported apart; docs/scatter.md's table
as the code computes it; and the issue's targets, which the pipeline as it is misses (asserted
as misses, each with the step that costs it, so a fix shows up here)."""
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
def test_a_sorted_sum_moves_the_checks_the_offsets_and_one_kernel_pass(width):
    # written out: the int64 index of E read by aminmax; the diff reads it once and writes E - 1;
    # the compare reads those and writes E - 1 bools; any reads them; searchsorted reads the
    # index and N + 1 queries and writes N + 1 offsets after arange wrote the queries; the
    # kernel reads src and the offsets and writes the result
    index = 8 * E
    checks = index + 16 + (index + 8 * (E - 1)) + (9 * (E - 1)) + (E - 1 + 1) + 9 + 24
    offsets = 8 * (N + 1) + index + 16 * (N + 1)
    kernel = 4 * E * width + 8 * (N + 1) + 4 * N * width
    ideal = 4 * E * width + index + 4 * N * width
    r = _row("segment_coo", "sum", width)
    assert r.ideal == ideal
    assert 0 < _published(width) < 0.001 * ideal
    assert r.bytes_ratio * ideal == pytest.approx(checks + offsets + kernel + _published(width))
    assert r.sort_bytes_share == 0


def test_the_sort_is_eight_radix_passes_over_keys_and_positions_and_its_share_apart():
    # 16 B a pair (int64 key, int64 position), read and written each pass, plus the positions'
    # arange and the histogram's read of the keys; then src's rows gathered into that order
    for width in C.WIDTHS:
        unsorted, sorted_ = _row("scatter", "sum", width), _row("segment_coo", "sum", width)
        radix = 8 * E + 8 * E + 8 * 2 * 16 * E
        gather = 8 * E + 2 * 4 * E * width
        extra = (unsorted.bytes_ratio - sorted_.bytes_ratio) * unsorted.ideal
        assert extra == pytest.approx(radix + gather)
        assert unsorted.sort_bytes_share * unsorted.bytes_ratio * unsorted.ideal == \
            pytest.approx(radix + gather)
        assert 0 < unsorted.sort_time_share < 1
        # the rest is the sorted pipeline's, step for step
        assert unsorted.without_sort("dram") == pytest.approx(sorted_.bytes_ratio)


def test_finishing_passes_are_one_output_pass_for_mean_and_three_for_max():
    width = 64
    out = 4 * N * width
    # counts (offsets read once, N written), clamp, to float, divide (result read and written)
    mean = (8 * (N + 1) + 8 * N) + 16 * N + 12 * N + (2 * out + 4 * N)
    # counts, > 0, zeros_like (written), where (mask, result, zeros read; result written)
    most = (8 * (N + 1) + 8 * N) + 9 * N + out + (N + 3 * out)
    for reduce, extra in (("mean", mean), ("max", most)):
        r = _row("segment_coo", reduce, width)
        assert r.part_ratio("finish") * r.ideal == pytest.approx(extra)
    assert _row("segment_coo", "sum", width).part_ratio("finish") == 0


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


def test_the_targets_are_missed_where_the_table_says_and_for_these_reasons():
    """The issue's targets for a sorted index: bytes <= 1.1 x and modeled time <= 1.25 x the
    ideal at every width. Missed: at F = 1 the checks alone read the index (2/3 of the ideal)
    about four times; at F = 16 and 64 the segment kernel is step-bound in the tuner's model
    (4 KiB tiles, two programs per SM). These asserts pin the misses; a fix turns them over."""
    for width in C.WIDTHS:
        r = _row("segment_coo", "sum", width)
        assert r.part_ratio("checks") > 0.1 or width == 64
        assert r.time_ratio > 1.25
    assert _row("segment_coo", "sum", 1).bytes_ratio > 1.1
    assert _row("segment_coo", "sum", 64).part_ratio("kernel", "seconds") > 2
    assert _row("segment_coo", "sum", 1).part_ratio("kernel", "seconds") < 1.25
