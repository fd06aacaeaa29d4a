"""The segment kernel at full size in the H100 time model (tritonml/bench/segment_model.py):
every distribution of lengths fills the GPU, short segments are packed many to a program, long
ones split over many, and the bytes stay within 1.05 x the ideal; docs/segments.md shows the
model's table as the code computes it, and a chunk inside one segment costs the steps the kernel
takes there; each launch is modeled within 1.25 x of one ideal launch but the power law's
reduction, a documented miss held where it is (docs/segments.md, "Modeled on an H100": modeled,
not measured)."""
import numpy as np
import pytest

from benchmarks import doc_table
from tritonml.bench import segment_model
from tritonml_autotune import devices
from tritonml_autotune.configs import SegmentConfig

ROWS = segment_model.rows()


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.label}, {r.op}")
def test_every_distribution_fills_the_gpu_within_the_byte_slack(row):
    assert row.programs >= devices.H100.sms
    assert row.bytes_ratio <= 1.05


# The rows docs/segments.md says miss the 1.25 x aim, with the ratio they model at (1.74 x): a
# reduction's chunks holding boundaries walk their tiles one at a time, and a 1-D reduction
# walking several tiles holds two programs per SM (177 registers on sm_90).
KNOWN_MISSES = {("power law over 2**24", "reduce"): 1.74}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r.label}, {r.op}")
def test_every_distribution_is_modeled_within_1_25_x_of_one_ideal_launch(row):
    missed = KNOWN_MISSES.get((row.label, row.op))
    if missed is None:
        assert row.time_ratio <= 1.25
    else:   # still missed, and no worse than documented (met: drop it here and in the docs)
        assert 1.25 < row.time_ratio <= missed + 0.005


def test_short_segments_are_packed_and_long_ones_split():
    by_label = {r.label: r for r in ROWS if r.op == "reduce"}
    assert by_label["a million segments of 1 to 3"].segments_per_program > 100
    assert by_label["three segments of 10**7"].longest_split_over > 100
    assert by_label["power law over 2**24"].longest_split_over > 1


@pytest.mark.source_tree
def test_the_doc_table_is_the_models():
    text = doc_table.SEGMENTS_DOC.read_text(encoding="utf-8")
    assert doc_table.rendered_segments(text) == text, "run python -m benchmarks.doc_table"


def test_chunks_inside_one_segment_fold_several_tiles_a_step():
    # one segment over 40 tiles of 16, chunks of 8 tiles: every chunk but the last lies inside it
    offsets = np.array([0, 40 * 16])
    config = SegmentConfig(16, 1, chunk_tiles=8, window=2, boundary_block=4, fold_tiles=4)
    assert segment_model.chunk_steps(offsets, config, 40 * 16, "reduce").tolist() == [2, 2, 2, 2, 8]
    # a scan's chunks after the first fold their tail (the whole chunk) first, then walk it
    assert segment_model.chunk_steps(offsets, config, 40 * 16, "scan").tolist() == \
        [8, 10, 10, 10, 10]
    # a boundary inside every chunk: each walks its tiles one at a time
    offsets = np.arange(0, 40 * 16 + 1, 100)
    offsets[-1] = 40 * 16
    assert segment_model.chunk_steps(offsets, config, 40 * 16, "reduce").tolist() == [8] * 5
