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
from tritonml_autotune import cost, devices

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


def test_segment_coo_of_one_value_rows_is_one_kernel_reading_the_index_once():
    # written out: no checks' pass and no boundaries; the segment kernel reads src and the int64
    # index once from DRAM (its view one element back, and each chunk's search back for where
    # its first group starts, from L2: the model's l2, with the published states) and writes the result, each program's three int64 facts and
    # its published state (a float64 sum and a status word)
    for reduce in C.GNN_REDUCES:
        r = _row("segment_coo", reduce, 1)
        (kernel,) = r.steps
        assert kernel.part == "kernel" and kernel.op == M.SEGMENT_KERNEL
        counts = M.counts_of(r.case)
        launch, config, *_ = segment_model.kernel_launch(counts, "reduce", inner=1,
                                                         ids_bytes=8)
        programs = launch.programs
        state = M.STATE_BYTES[M.kernel_function(r.case)]
        extra = programs * (24 + state + 4)
        assert r.ideal == 4 * E + 8 * E + 4 * N
        assert kernel.dram == pytest.approx(r.ideal + extra)
        searched = programs * 64 * 8   # each chunk's search back: 64 ids a round trip
        assert kernel.l2 == pytest.approx(extra + 8 * E + searched)
        assert r.bytes_ratio < 1.001


@pytest.mark.parametrize("width", [w for w in C.WIDTHS if w > 1])
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


def _two_pass_sorted_bytes(width):
    """A sorted index's bytes on the two-pass path (the checks' pass writing the boundaries,
    then the kernel), which segment_coo takes at widths 16 and 64 and an unsorted index's
    pipeline shares but for its sort and search."""
    counts = M.counts_of(_row("segment_coo", "sum", width).case)
    return M.bounds_step(E, N, True).dram + M.kernel_step(counts, width, "SUM").dram


def test_the_sort_is_four_radix_passes_over_int32_keys_and_int64_positions_its_share_apart():
    # the int64 index cast to int32 keys (8 read, 4 written); 12 B a pair (int32 key, int64
    # position), read and written each of 4 passes, plus the positions' arange and the
    # histogram's read of the keys; then src's rows gathered into that order. The boundaries
    # then come from a search of the sorted int32 keys (int32 queries written and read, the
    # keys read, int64 boundaries written), where a sorted index had them from the checks
    # (which write none for an unsorted one)
    for width in C.WIDTHS:
        unsorted = _row("scatter", "sum", width)
        sorted_bytes = _two_pass_sorted_bytes(width)
        cast = 12 * E
        radix = 8 * E + 4 * E + 4 * 2 * 12 * E
        gather = 8 * E + 2 * 4 * E * width
        searched = 4 * (N + 1) + (4 * E + 4 * (N + 1) + 8 * (N + 1))
        checks_wrote = 8 * (N + 1)
        extra = unsorted.bytes_ratio * unsorted.ideal - sorted_bytes
        assert extra == pytest.approx(cast + radix + gather + searched - checks_wrote)
        assert unsorted.sort_bytes_share * unsorted.bytes_ratio * unsorted.ideal == \
            pytest.approx(cast + radix + gather)
        assert 0 < unsorted.sort_time_share < 1
        assert unsorted.without_sort("dram") * unsorted.ideal == pytest.approx(
            sorted_bytes + searched - checks_wrote)


def test_the_only_finishing_pass_is_index_adds_fold():
    # max's empty groups get their 0 from the kernel: no pass after it; nor for sum and mean
    for width in C.WIDTHS:
        for reduce in C.GNN_REDUCES:
            for form in ("segment_coo", "scatter"):
                assert _row(form, reduce, width).part_ratio("finish") == 0
    # index_add: input (float32) + reduced (the float64 sums), read both, write float64; then
    # rounded to float32 once, read 8 bytes and write 4 a value; no counts
    (index_add,) = [r for r in ROWS if r.case.form == "index_add"]
    rows = C.VOCAB * C.EMBED_DIM
    assert index_add.part_ratio("finish") * index_add.ideal == (4 + 8 + 8) * rows + (8 + 4) * rows


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


def test_the_targets_are_met_at_every_width_and_for_these_reasons():
    """The issue's targets for a sorted index: bytes <= 1.1 x and modeled time <= 1.25 x the
    ideal at every width. Bytes: met by every function at every width (the index read once:
    by the checks' pass, which brings the boundaries, or at F = 1 by the kernel itself; the
    kernel writes max's empty groups). Time: at F = 16 and 64 the segment kernel walks tiles of
    four 1,024-lane slices (16 KiB a step, two programs per SM) and streams; at F = 1 it is one
    launch reading the index itself (two launches, the checks' and the kernel's, modeled at
    1.79 x), its steps and its bytes about even. These asserts pin both."""
    f1, f16, f64 = (_row("segment_coo", "sum", w) for w in C.WIDTHS)
    for width in C.WIDTHS:
        for reduce in C.GNN_REDUCES:
            assert _row("segment_coo", reduce, width).bytes_ratio <= 1.1
            assert _row("segment_coo", reduce, width).time_ratio <= 1.25
    # the kernel at widths 16 and 64 streams: within 10 % of its own bytes' time at the
    # bandwidth, plus a launch
    for r in (f16, f64):
        kernel = next(step for step in r.steps if step.part == "kernel")
        streaming = (kernel.dram / devices.H100.copy_bandwidth_bytes_per_s
                     + devices.H100.launch_overhead_s)
        assert kernel.seconds <= 1.1 * streaming
    # F = 1: one launch, its tile steps (two programs of 4 warps per SM at its registers) and
    # its DRAM bytes about even; its L2 traffic (the index's view one back, the chunks'
    # searches) below both
    (kernel,) = f1.steps
    launch, config, *_ = segment_model.kernel_launch(M.counts_of(f1.case), "reduce", inner=1,
                                                     ids_bytes=8)
    registers = M.kernel_registers(M.counts_of(f1.case), 1, one_pass=True)
    assert cost.programs_per_sm(devices.H100, launch.programs, config.num_warps, registers) == 2
    tail = cost.CHUNKED_TAIL_ROUND_TRIPS * cost.FOLD_ROUND_TRIP_SECONDS   # the last look-back
    streaming = kernel.dram / devices.H100.copy_bandwidth_bytes_per_s
    through_l2 = (kernel.dram + launch.l2_bytes) / devices.H100.l2_bandwidth_bytes_per_s
    assert through_l2 < streaming
    bound = kernel.seconds - tail - devices.H100.launch_overhead_s
    assert streaming <= bound <= 1.05 * streaming
