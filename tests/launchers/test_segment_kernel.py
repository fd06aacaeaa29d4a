"""The segment launchers (tritonml/launchers/segment.py) and their kernel against the numpy oracle
of benchmarks/segment_oracle.py: every reduce function and dtype, scans in both directions,
inclusive and exclusive, empty segments, ``initial``, layouts, configs that split segments across
tiles, chunks and look-back windows, user reductions and combines, and bad boundaries."""
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from benchmarks import reduce_oracle, scan_oracle, segment_oracle
from tritonml import reductions
from tritonml.core.dtypes import FLOAT_DTYPES, SUPPORTED_DTYPES
from tritonml.launchers import segment as S
from tritonml.records.builtin_scans import PRODUCT, SUM
from tritonml.records.builtin_reductions import record_of
from tritonml_autotune.configs import SegmentConfig

# Small tiles, one-tile chunks and two-chunk windows: segments cross tiles, chunks and windows.
SPLIT = SegmentConfig(16, 2, chunk_tiles=1, window=2, boundary_block=4)
CONFIGS = {
    "default": None,
    "split": SPLIT,
    # fold_tiles: chunks inside one segment fold a chunk's tiles in steps that end past it
    "chunks of 3": SegmentConfig(16, 1, chunk_tiles=3, window=4, boundary_block=2, fold_tiles=2),
    "wide window": SegmentConfig(32, 4, chunk_tiles=2, window=64, boundary_block=64,
                                 fold_tiles=4),
    # what a 1-D reduction runs on a GPU: 4 warps, ptxas free to take 255 registers
    "maxnreg": SegmentConfig(16, 1, chunk_tiles=2, window=2, boundary_block=8, num_warps=4,
                             fold_tiles=2, maxnreg=255),
    # a reduction's tiles walked as slices (scans ignore sub_tiles): slices of 16 positions,
    # segments crossing slices, tiles and chunks
    "slices": SegmentConfig(32, 2, chunk_tiles=1, window=2, boundary_block=4, sub_tiles=2),
    "slices in chunks": SegmentConfig(64, 4, chunk_tiles=2, window=2, boundary_block=8,
                                      sub_tiles=4, fold_tiles=2),
}
OFFSETS = {   # axis length 61
    "random": segment_oracle.random_offsets(61, 9, seed=1),
    "one segment": [0, 61],
    "empty at both ends": [0, 0, 0, 30, 61, 61],
    "many short": list(range(0, 61, 2)) + [61],
    "one long and empties": [0, 1, 1, 1, 60, 61],
    # more boundaries on one position than a tile reads at once: a tile's reads go on past them
    "piles of empties": [0] * 5 + [17] * 40 + [30] + [61] * 4,
}


def _x(shape, dtype, function="SUM", seed=0):
    return reduce_oracle.make_input(shape, dtype, function, seed)


def _offsets(values):
    return S.segment_offsets(values[-1], "cpu", offsets=torch.tensor(values))


def _check_reduce(x, function, offsets, axis, config=None, initial=None):
    got = S.segment_reduce_axis(x, record_of(function), _offsets(offsets), axis,
                                initial=initial, config=config)[0]
    want = segment_oracle.segment_reduce_expected(x, function, offsets, axis, initial)
    reduce_oracle.assert_matches(got, want, f"{function} {x.dtype} {offsets}")


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
@pytest.mark.parametrize("function", reduce_oracle.FUNCTIONS)
def test_every_function_and_dtype(function, dtype):
    if not reduce_oracle.supported(function, dtype):
        with pytest.raises(TypeError, match="floating-point"):
            S.segment_reduce_axis(_x((4,), dtype), record_of(function), _offsets([0, 4]), 0)
        return
    x = _x((3, 61, 2), dtype, function, seed=hash((function, str(dtype))) % 1000)
    _check_reduce(x, function, OFFSETS["random"], 1, SPLIT)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("offsets", OFFSETS, ids=str)
@pytest.mark.parametrize("function", ["SUM", "ARGMIN", "LOG_SUM_EXP", "MAX"])
def test_segments_across_tiles_chunks_and_windows(function, offsets, config):
    x = _x((2, 61, 3), torch.float32, function, seed=7)
    _check_reduce(x, function, OFFSETS[offsets], 1, CONFIGS[config])


@pytest.mark.parametrize("function", segment_oracle.INITIAL_FUNCTIONS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.int16], ids=str)
def test_initial_starts_every_segment(function, dtype):
    if function == "AVERAGE" and dtype not in FLOAT_DTYPES:
        return
    x = _x((61, 2), dtype, function, seed=3)
    _check_reduce(x, function, OFFSETS["empty at both ends"], 0, SPLIT, initial=5)


def test_initial_is_refused_where_torch_has_none():
    with pytest.raises(ValueError, match="initial: defined for AVERAGE, MAX, MIN, MULTIPLY, SUM"):
        S.segment_reduce_axis(torch.ones(4), record_of("L2"), _offsets([0, 4]), 0, initial=1.0)
    with pytest.raises(TypeError, match="initial: expected a Python int or float"):
        S.segment_reduce_axis(torch.ones(4), record_of("SUM"), _offsets([0, 4]), 0,
                              initial=torch.tensor(1.0))


@pytest.mark.parametrize("config", ["default", "split", "chunks of 3"])
@pytest.mark.parametrize("offsets", ["empty at both ends", "piles of empties", "random"])
@pytest.mark.parametrize("function, dtype", [("MAX", torch.float32), ("MIN", torch.int16),
                                             ("SUM", torch.float32), ("MULTIPLY", torch.int32),
                                             ("AVERAGE", torch.float16), ("L2", torch.float32)],
                         ids=str)
def test_empty_is_the_empty_segments_value_alone(function, dtype, offsets, config):
    # the other segments' folds do not see it, unlike initial's
    x = _x((2, 61, 3), dtype, function, seed=5)
    bounds = OFFSETS[offsets]
    got = S.segment_reduce_axis(x, record_of(function), _offsets(bounds), 1, empty=3,
                                config=CONFIGS[config])[0]
    want = segment_oracle.segment_reduce_expected(x, function, bounds, 1).clone()
    for segment, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        if lo == hi:
            want[:, segment] = 3
    assert any(lo == hi for lo, hi in zip(bounds[:-1], bounds[1:])) or offsets == "random"
    reduce_oracle.assert_matches(got, want, f"{function} {dtype} {offsets} empty=3")


def test_empty_is_refused_with_initial_and_for_index_outputs():
    ones, bounds = torch.ones(4), _offsets([0, 0, 4])
    with pytest.raises(ValueError, match="empty: an empty segment's result is initial's"):
        S.segment_reduce_axis(ones, record_of("MAX"), bounds, 0, initial=1.0, empty=0)
    with pytest.raises(ValueError, match="empty: defined for the built-in functions with value"):
        S.segment_reduce_axis(ones, record_of("ARGMAX"), bounds, 0, empty=0)
    with pytest.raises(TypeError, match="empty: expected a Python int or float"):
        S.segment_reduce_axis(ones, record_of("SUM"), bounds, 0, empty="0")


@pytest.mark.parametrize("function", ["SUM", "MAX", "ARGMAX", "AVERAGE"])
def test_an_empty_axis_gives_every_segment_its_empty_value(function):
    x = torch.empty(2, 0, 3)
    _check_reduce(x, function, [0, 0, 0, 0], 1)
    assert S.segment_reduce_axis(x, record_of(function), _offsets([0]), 1)[0].shape == (2, 0, 3)


@pytest.mark.parametrize("layout", ["transposed", "sliced", "negative", "expanded"])
def test_strided_views(layout):
    base = _x((61, 6), torch.float64, seed=5)
    x = {"transposed": base.t().contiguous().t(), "sliced": base[:, ::2],
         "negative": base._neg_view(), "expanded": base[:, :1].expand(61, 4)}[layout]
    for axis in (0, -2):
        _check_reduce(x, "SUM", OFFSETS["random"], axis, SPLIT)
    y = torch.movedim(x, 0, 1)   # the segmented axis last (contiguous or not)
    _check_reduce(y, "MIN", OFFSETS["many short"], 1, SPLIT)


def test_keepdims_adds_a_size_one_axis_after_the_segments():
    x = _x((3, 61, 2), torch.float32)
    out, = S.segment_reduce_axis(x, record_of("SUM"), _offsets(OFFSETS["random"]), 1,
                                 keepdims=True)
    want = segment_oracle.segment_reduce_expected(x, "SUM", OFFSETS["random"], 1)
    assert out.shape == (3, 9, 1, 2)
    reduce_oracle.assert_matches(out.squeeze(2), want)


def test_results_are_bit_identical_run_to_run():
    x = _x((2, 61, 3), torch.float32, seed=9)
    runs = [S.segment_reduce_axis(x, record_of("LOG_SUM_EXP"), _offsets(OFFSETS["random"]), 1,
                                  config=SPLIT)[0] for _ in range(2)]
    assert reduce_oracle.bits(runs[0]) == reduce_oracle.bits(runs[1])


# ---------------------------------------------------------------------------------------------
# scans
# ---------------------------------------------------------------------------------------------
def _check_scan(x, record, offsets, axis, reverse, exclusive, config=None):
    got = S.segment_scan_axis(x, record, _offsets(offsets), axis, reverse=reverse,
                              exclusive=exclusive, config=config)
    op = "sum" if record is SUM else "product"
    want = segment_oracle.segment_scan_reference(x, op, offsets, axis, reverse, exclusive)
    if x.dtype in FLOAT_DTYPES:
        tolerance = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}.get(x.dtype, 1e-6)
        np.testing.assert_allclose(scan_oracle.to_numpy(got), want, rtol=tolerance,
                                   atol=tolerance)
    else:
        assert np.array_equal(got.numpy(), want), (x.dtype, offsets)


@pytest.mark.parametrize("dtype", SUPPORTED_DTYPES, ids=str)
@pytest.mark.parametrize("record", [SUM, PRODUCT], ids=["sum", "product"])
def test_scans_of_every_dtype(record, dtype):
    x = _x((2, 61), dtype, "MULTIPLY" if record is PRODUCT else "SUM", seed=11)
    for reverse in (False, True):
        for exclusive in (False, True):
            _check_scan(x, record, OFFSETS["random"], 1, reverse, exclusive, SPLIT)


@pytest.mark.parametrize("config", CONFIGS, ids=str)
@pytest.mark.parametrize("offsets", OFFSETS, ids=str)
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True)])
def test_scans_across_tiles_chunks_and_windows(offsets, config, reverse, exclusive):
    x = _x((3, 61, 2), torch.float64, seed=13)
    _check_scan(x, SUM, OFFSETS[offsets], 1, reverse, exclusive, CONFIGS[config])


def test_scan_in_place_and_into_out():
    x = _x((61, 3), torch.float64, seed=17)
    want = segment_oracle.segment_scan_reference(x, "sum", OFFSETS["random"], 0, False, False)
    out = torch.empty_like(x)
    assert S.segment_scan_axis(x, SUM, _offsets(OFFSETS["random"]), 0, out=out) is out
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-12)
    S.segment_scan_axis(x, SUM, _offsets(OFFSETS["random"]), 0, out=x, config=SPLIT)
    np.testing.assert_allclose(x.numpy(), want, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# user reductions and combines
# ---------------------------------------------------------------------------------------------
def test_a_user_reduction_per_segment():
    x = _x((61, 3), torch.float64, seed=19)
    offsets = OFFSETS["random"]
    var, mean = S.segment_reduce_axis(x, reductions.welford, _offsets(offsets), 0, config=SPLIT)
    for i, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
        part = x[lo:hi].numpy()
        if hi - lo >= 2:
            np.testing.assert_allclose(var[i].numpy(), part.var(0, ddof=1), rtol=1e-10)
        if hi > lo:
            np.testing.assert_allclose(mean[i].numpy(), part.mean(0), rtol=1e-10)
        else:
            assert torch.isnan(mean[i]).all()


@triton.jit
def _compose_affine(a, b):
    # h -> a1 * h + a0 then b: (b1 * a1, b1 * a0 + b0); the state is (offset, gain)
    return b[1] * a[0] + b[0], b[1] * a[1]


@pytest.mark.parametrize("reverse", [False, True])
def test_a_user_combine_restarts_at_every_boundary(reverse):
    g = torch.Generator().manual_seed(23)
    tokens = torch.randn(2, 61, generator=g, dtype=torch.float64)
    gates = torch.rand(2, 61, generator=g, dtype=torch.float64)
    offsets = OFFSETS["random"]
    h, _ = S.segment_associative_scan(_compose_affine, (tokens, gates), _offsets(offsets), 1,
                                      reverse=reverse, config=SPLIT)
    want = np.zeros((2, 61))
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        state = np.zeros(2)
        order = range(hi - 1, lo - 1, -1) if reverse else range(lo, hi)
        for t in order:
            state = gates[:, t].numpy() * state + tokens[:, t].numpy()
            want[:, t] = state
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# chunks inside one segment
# ---------------------------------------------------------------------------------------------
# A chunk that lies inside one segment has no boundary to find and takes a path of its own,
# several tiles a step: a long axis in short chunks puts most chunks there, a segment opening
# before them (a carry to fold) or exactly at their first element.
INSIDE_OFFSETS = {"long and short": [0, 2, 2, 250, 300], "starts on a chunk": [0, 64, 64, 300]}
INSIDE_CONFIGS = {
    "fold 2": SegmentConfig(16, 1, chunk_tiles=2, window=2, boundary_block=4, fold_tiles=2),
    "fold 4, chunks of 5": SegmentConfig(16, 2, chunk_tiles=5, window=2, boundary_block=4,
                                         fold_tiles=4),
}


@pytest.mark.parametrize("config", INSIDE_CONFIGS, ids=str)
@pytest.mark.parametrize("offsets", INSIDE_OFFSETS, ids=str)
@pytest.mark.parametrize("function", ["SUM", "ARGMAX", "LOG_SUM_EXP", "MIN"])
def test_reductions_of_chunks_inside_one_segment(function, offsets, config):
    x = _x((1, 300, 2), torch.float32, function, seed=29)
    _check_reduce(x, function, INSIDE_OFFSETS[offsets], 1, INSIDE_CONFIGS[config])


@pytest.mark.parametrize("config", INSIDE_CONFIGS, ids=str)
@pytest.mark.parametrize("offsets", INSIDE_OFFSETS, ids=str)
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True), (False, True),
                                               (True, False)])
@pytest.mark.parametrize("record", [SUM, PRODUCT], ids=["sum", "product"])
def test_scans_of_chunks_inside_one_segment(record, reverse, exclusive, offsets, config):
    x = _x((1, 300, 2), torch.float64, "MULTIPLY" if record is PRODUCT else "SUM", seed=31)
    _check_scan(x, record, INSIDE_OFFSETS[offsets], 1, reverse, exclusive,
                INSIDE_CONFIGS[config])


def test_a_user_reduction_of_chunks_inside_one_segment():
    x = torch.randn(300, 2, generator=torch.Generator().manual_seed(37), dtype=torch.float64)
    offsets = INSIDE_OFFSETS["long and short"]
    var, mean = S.segment_reduce_axis(x, reductions.welford, _offsets(offsets), 0,
                                      config=INSIDE_CONFIGS["fold 4, chunks of 5"])
    for i, (lo, hi) in enumerate(zip(offsets[:-1], offsets[1:])):
        if hi - lo >= 2:
            np.testing.assert_allclose(var[i].numpy(), x[lo:hi].numpy().var(0, ddof=1),
                                       rtol=1e-10)
            np.testing.assert_allclose(mean[i].numpy(), x[lo:hi].numpy().mean(0), rtol=1e-10)


@pytest.mark.parametrize("reverse", [False, True])
def test_a_user_combine_of_chunks_inside_one_segment(reverse):
    # order-sensitive: its chunks are folded in traversal order, not in a tree
    g = torch.Generator().manual_seed(41)
    tokens = torch.randn(2, 300, generator=g, dtype=torch.float64)
    gates = torch.rand(2, 300, generator=g, dtype=torch.float64) + 0.5
    offsets = INSIDE_OFFSETS["long and short"]
    h, _ = S.segment_associative_scan(_compose_affine, (tokens, gates), _offsets(offsets), 1,
                                      reverse=reverse, config=INSIDE_CONFIGS["fold 2"])
    want = np.zeros((2, 300))
    for lo, hi in zip(offsets[:-1], offsets[1:]):
        state = np.zeros(2)
        for t in (range(hi - 1, lo - 1, -1) if reverse else range(lo, hi)):
            state = gates[:, t].numpy() * state + tokens[:, t].numpy()
            want[:, t] = state
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-9)


# ---------------------------------------------------------------------------------------------
# bad boundaries
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs,error,message", [
    (dict(offsets=torch.tensor([0, 3, 2, 5])), ValueError, r"offsets\[1\] = 3 > offsets\[2\] = 2"),
    (dict(offsets=torch.tensor([1, 5])), ValueError, r"must start at 0, but offsets\[0\] = 1"),
    (dict(offsets=torch.tensor([0, 4])), ValueError,
     r"offsets\[-1\] = 4 must equal x.shape\[axis\] = 5"),
    (dict(offsets=torch.tensor([0.0, 5.0])), TypeError, "offsets: expected an integer dtype"),
    (dict(offsets=torch.tensor([[0, 5]])), ValueError, "offsets: expected a 1-D tensor"),
    (dict(offsets=torch.tensor([], dtype=torch.int64)), ValueError, "offsets: is empty"),
    (dict(offsets=torch.tensor([0, 5], device="meta")), ValueError,
     "offsets: tensor is on meta"),
    (dict(lengths=torch.tensor([2, -1, 4])), ValueError, r"lengths\[1\] = -1"),
    (dict(lengths=torch.tensor([2, 2])), ValueError,
     "lengths: sum to 4, but x.shape\\[axis\\] is 5"),
    (dict(), ValueError, "offsets, lengths: pass exactly one"),
    (dict(offsets=[0, 5]), TypeError,
     "offsets: expected a 1-D integer torch.Tensor, got list"),
    (dict(offsets=torch.tensor([0, 5]), lengths=torch.tensor([5])), ValueError,
     "offsets, lengths: pass exactly one"),
])
def test_bad_boundaries_are_refused(kwargs, error, message):
    with pytest.raises(error, match=message):
        S.segment_offsets(5, torch.device("cpu"), **kwargs)


def test_lengths_become_offsets_and_int32_is_accepted():
    got = S.segment_offsets(5, "cpu", lengths=torch.tensor([2, 0, 3], dtype=torch.int32))
    assert got.dtype == torch.int64 and got.tolist() == [0, 2, 2, 5]
    offsets = torch.tensor([0, 2, 2, 5], dtype=torch.int32)[::1]
    assert S.segment_offsets(5, "cpu", offsets=offsets).tolist() == [0, 2, 2, 5]


@pytest.mark.parametrize("config,message", [
    (SegmentConfig(16, 1, maxnreg=300), r"config.maxnreg: 300 must be None or an int from 16"),
    (SegmentConfig(16, 1, maxnreg=True), r"config.maxnreg: True must be None or an int"),
    (SegmentConfig(16, 1, fold_tiles=3), r"config.fold_tiles: 3 must be a power of two"),
    (SegmentConfig(64, 2, sub_tiles=3), r"config.sub_tiles: 3 must be a power of two"),
    (SegmentConfig(32, 2, sub_tiles=4),
     r"config.sub_tiles: 4 leaves slices of 8 positions; they must hold at least 16"),
])
def test_bad_configs_are_refused_before_launch(config, message):
    x = torch.arange(6, dtype=torch.float32)
    with pytest.raises(ValueError, match=message):
        S.segment_reduce_axis(x, record_of("SUM"), _offsets([0, 2, 6]), 0, config=config)
    out = torch.full((6,), 7.0)
    with pytest.raises(ValueError, match=message):
        S.segment_scan_axis(x, SUM, _offsets([0, 2, 6]), 0, out=out, config=config)
    assert torch.equal(out, torch.full((6,), 7.0))
