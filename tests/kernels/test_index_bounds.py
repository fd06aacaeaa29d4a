"""``read_index_bounds`` (tritonml/kernels/index_bounds.py): a 1-D index's least and greatest
value and its descents, and where it is sorted its group boundaries, against numpy (min, max,
the count of ``diff < 0``, ``searchsorted``), over one program and many, int32 and int64,
strided views, empty groups before, between and after the values, and values out of range.
And the scatter ops take a sorted 1-D index's boundaries from it: no search after the checks."""
from __future__ import annotations

from unittest import mock

import numpy as np
import pytest
import torch

import tritonml
from tritonml.launchers import index_bounds
from tritonml.torch_ops import scatter_groups


def _keys(values: np.ndarray, dtype: torch.dtype, stride: int) -> torch.Tensor:
    base = torch.zeros(len(values) * stride, dtype=dtype)
    view = base[::stride]
    view.copy_(torch.from_numpy(values))
    return view


def _left_to_the_caller(values: np.ndarray, n_groups: int) -> bool:
    """Whether some tile of the interpreter's config spans more groups than it writes."""
    block, block_groups, _ = index_bounds.bounds_config(len(values), "cpu")
    for start in range(0, len(values), block):
        end = min(start + block, len(values))
        previous = values[start - 1] if start else -1
        last = n_groups if end == len(values) else values[end - 1]
        span = min(max(last, -1), n_groups) - min(max(previous, -1), n_groups)
        if span > index_bounds.SEARCH_BLOCKS_PER_TILE * block_groups:
            return True
    return False


def _check(values: np.ndarray, n_groups, dtype=torch.int64, stride=1):
    keys = _keys(values, dtype, stride)
    before = keys.clone()
    least, greatest, descents, offsets = index_bounds.read_index_bounds(keys, n_groups)
    assert torch.equal(keys, before)
    assert (least, greatest) == (int(values.min()), int(values.max()))
    assert descents == int((np.diff(values) < 0).sum())
    if n_groups is None or descents or _left_to_the_caller(values, n_groups):
        assert offsets is None
    else:
        assert offsets is not None and offsets.dtype == torch.int64
        want = np.searchsorted(values, np.arange(n_groups + 1), side="left")
        np.testing.assert_array_equal(offsets.numpy(), want)


# a block of 16 positions (the interpreter's least) makes many programs of small indexes
@pytest.fixture(params=[None, 16], ids=["one-program", "programs-of-16"])
def block(request):
    if request.param is None:
        yield
    else:
        with mock.patch.object(index_bounds, "INTERPRETER_MAX_BLOCK", request.param):
            yield


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
@pytest.mark.parametrize("stride", [1, 3])
def test_random_sorted_and_unsorted_indexes_against_numpy(block, dtype, stride):
    rng = np.random.default_rng(7)
    for length, groups in [(1, 1), (5, 3), (40, 7), (100, 300), (257, 16), (1000, 50)]:
        values = rng.integers(0, groups, length)
        _check(np.sort(values), groups, dtype, stride)
        _check(values, groups, dtype, stride)
        _check(np.sort(values), None, dtype, stride)


def test_empty_groups_before_between_and_after_the_values(block):
    # the first tile's groups start at 0, the last tile's run to n_groups: every boundary of a
    # group no value names is the position of the next value above it
    _check(np.array([3, 3, 3, 9, 9, 20] * 1 + [20] * 30), 64)
    _check(np.array([0] * 50), 1)
    _check(np.array([0] * 50), 1000)
    _check(np.array([999] * 33), 1000)
    _check(np.arange(0, 200, 7), 200)


def test_a_tile_spanning_too_many_groups_leaves_the_boundaries_to_the_caller(block):
    # many empty groups after the last value, or between two values of one tile: one program
    # would search for each in turn; the caller's searchsorted does them all at once
    for values, n_groups in ((np.array([0, 0, 1, 5]), 5000), (np.array([0, 3000, 3000]), 3001),
                             (np.arange(0, 40), 40 + 3000)):
        assert _left_to_the_caller(values, n_groups)
        _check(values, n_groups)
    # and the scatter ops give the right groups through the search
    src = torch.arange(4.0).reshape(4, 1)
    got = tritonml.segment_coo(src, torch.tensor([0, 0, 1, 5]), dim_size=5000)
    want = torch.zeros(5000, 1)
    want[0, 0], want[1, 0], want[5, 0] = 1.0, 2.0, 3.0
    assert torch.equal(got, want)


def test_one_descent_at_a_tile_boundary_is_found(block):
    values = np.sort(np.random.default_rng(3).integers(0, 40, 64))
    values[16], values[15] = values[15] - 1 if values[15] else 0, values[15] + 5
    _check(values, 64)


def test_values_out_of_range_are_reported_not_written_past_the_boundaries(block):
    for values in (np.array([-5, -5, 0, 1, 2]), np.array([0, 1, 2, 70, 70]),
                   np.array([-(2**40), 2**40])):
        keys = torch.from_numpy(values)
        least, greatest, descents, offsets = index_bounds.read_index_bounds(keys, 4)
        assert (least, greatest, descents) == (values.min(), values.max(), 0)
        assert offsets is not None and offsets.shape == (5,)   # (the caller raises)


@pytest.mark.parametrize("keys", [torch.zeros(0, dtype=torch.int64),
                                  torch.zeros(2, 2, dtype=torch.int64),
                                  torch.zeros(3, dtype=torch.int16)],
                         ids=["empty", "2-d", "int16"])
def test_what_it_does_not_read_is_refused(keys):
    with pytest.raises(ValueError, match="keys: must be a non-empty 1-D int32 or int64"):
        index_bounds.read_index_bounds(keys, 3)


def test_a_sorted_index_is_read_once_the_checks_bring_its_boundaries():
    rng = np.random.default_rng(11)
    index = np.sort(rng.integers(0, 30, 200))
    src = rng.standard_normal((200, 4))
    want = np.zeros((40, 4))
    np.add.at(want, index, src)
    calls = []
    searched = scatter_groups._boundaries

    def boundaries(*args):
        calls.append(args)
        return searched(*args)

    with mock.patch.object(scatter_groups, "_boundaries", boundaries):
        got = tritonml.segment_coo(torch.from_numpy(src), torch.from_numpy(index),
                                   dim_size=40)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
        got = tritonml.index_add(torch.zeros(40, 4, dtype=torch.float64), 0,
                                 torch.from_numpy(index), torch.from_numpy(src))
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
        assert calls == []
        # an unsorted index is sorted, then searched
        shuffled = rng.permutation(200)
        got = tritonml.scatter(torch.from_numpy(src[shuffled]),
                               torch.from_numpy(index[shuffled]), dim=0, dim_size=40)
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
        assert len(calls) == 1


def test_a_strided_index_is_searched_contiguous():
    # torch.searchsorted warns (once a process) of copying strided boundaries: a user's strided
    # index must not bring that warning, so the search is given the index contiguous: where the
    # kernel leaves the boundaries to it, and in a dry run (which reads them from torch)
    from tritonml.runtime import trace

    values = np.array([0, 0, 1, 5])
    want = np.searchsorted(values, np.arange(5001), side="left")
    searched = []
    search = torch.searchsorted

    def contiguous_search(boundaries, *args, **kwargs):
        searched.append(boundaries.is_contiguous())
        return search(boundaries, *args, **kwargs)

    with mock.patch.object(torch, "searchsorted", contiguous_search):
        got = index_bounds.group_boundaries(_keys(values, torch.int64, 2), 5000)
        np.testing.assert_array_equal(got.numpy(), want)
        with trace.record(execute=False):
            offsets = index_bounds.read_index_bounds(_keys(values, torch.int32, 3), 12)[3]
        assert offsets is not None
        np.testing.assert_array_equal(offsets.numpy(), want[:13])
    assert searched == [True, True]
