"""Dry runs (``trace.record(execute=False)``, what ``tritonml bench`` describes launches with) of
every path that reads back what a kernel wrote: the index facts of the scatter family (one 1-D
line: ``read_index_bounds``; any other index: the ``index_facts`` reduction) and the one-pass
``segment_coo``'s per-program facts. A dry run writes nothing, so each must take the facts from
torch: the dry run then launches what a run launches, returns torch's shape, and raises for a
bad index exactly what a run raises."""
from __future__ import annotations

import re

import pytest
import torch

import tritonml
from tritonml.runtime import trace


def _sorted_index(n_values: int, n_groups: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.sort(torch.randint(0, n_groups, (n_values,), generator=generator)).values


def _unsorted_index(shape, n_groups: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, n_groups, shape, generator=generator)


# name -> (tritonml's call of an index, torch's call of it for the shape, the index, groups
# given to the call (None: read from the index), the parameter the errors name)
def _cases():
    src = torch.randn(4096)
    rows = torch.randn(3, 40)
    return {
        # one 1-D line, the number of groups read from it (read_index_bounds' facts)
        "scatter 1-D, dim_size from the index": (
            lambda i: tritonml.scatter(src[:i.numel()], i, 0),
            lambda i: torch.zeros(int(i.max()) + 1).index_add(0, i, src[:i.numel()]),
            _unsorted_index((300,), 37, 1), None, "index"),
        # one sorted 1-D line into given groups: the facts and the boundaries the pass wrote
        "index_add sorted 1-D": (
            lambda i: tritonml.index_add(torch.zeros(50, 3), 0, i, torch.ones(i.numel(), 3)),
            lambda i: torch.index_add(torch.zeros(50, 3), 0, i, torch.ones(i.numel(), 3)),
            _sorted_index(200, 50, 2), 50, "index"),
        "bincount": (
            lambda i: tritonml.bincount(i),
            lambda i: torch.bincount(i),
            _unsorted_index((500,), 20, 3), None, "input"),
        # an index that differs across rows: the index_facts reduction's facts
        "scatter_reduce 2-D": (
            lambda i: tritonml.scatter_reduce(torch.zeros(3, 12), 1, i, rows, "sum"),
            lambda i: torch.scatter_reduce(torch.zeros(3, 12), 1, i, rows, "sum"),
            _unsorted_index((3, 40), 12, 4), 12, "index"),
        # the one-pass segment_coo: its kernel's per-program facts
        "segment_coo one pass": (
            lambda i: tritonml.segment_coo(src, i, dim_size=256),
            lambda i: torch.zeros(256).index_add(0, i, src),
            _sorted_index(4096, 256, 5), 256, "index"),
        "segment_coo one pass, dim_size from the index": (
            lambda i: tritonml.segment_coo(src, i),
            lambda i: torch.zeros(int(i[-1]) + 1).index_add(0, i, src),
            _sorted_index(4096, 200, 6), None, "index"),
    }


CASES = list(_cases())


def _launches(recorder):
    return [(launch.name, launch.grid) for launch in recorder.launches]


@pytest.mark.parametrize("case", CASES)
def test_a_dry_run_launches_what_a_run_launches_with_torchs_shape(case):
    call, torch_call, index, _, _ = _cases()[case]
    with trace.record() as ran:
        result = call(index)
    for _ in range(3):   # (memory a dry run would read unwritten is what the last run left)
        with trace.record(execute=False) as dry:
            dry_result = call(index)
        expected = torch_call(index)
        assert dry_result.shape == expected.shape and dry_result.dtype == result.dtype
        assert _launches(dry) == _launches(ran) and len(ran.launches) >= 1


@pytest.mark.parametrize("case", CASES)
def test_a_dry_run_raises_for_a_bad_index_what_a_run_raises(case):
    call, _, index, n_groups, name = _cases()[case]
    bad = index.clone()
    if n_groups is None:   # the groups come from the index: a negative first value (sorted)
        bad.view(-1)[0] = -7
        if name == "input":
            expected = "input: values must be non-negative, found -7"
        else:
            expected = f"index: every value must be in [0, {int(bad.max()) + 1}), found -7"
    else:                  # given groups: one value past them (the last keeps it sorted)
        bad.view(-1)[-1] = n_groups + 9
        expected = f"{name}: every value must be in [0, {n_groups}), found {n_groups + 9}"
    with pytest.raises(ValueError, match=re.escape(expected)):
        call(bad)
    for _ in range(3):
        with pytest.raises(ValueError, match=re.escape(expected)), \
                trace.record(execute=False):
            call(bad)


def test_a_dry_run_of_segment_coo_refuses_an_unsorted_index_as_a_run_does():
    src = torch.randn(4096)
    index = _sorted_index(4096, 256, 7)
    index[100], index[3000] = index[3000].clone(), index[100].clone()
    expected = "index: segment_coo needs an index sorted (non-decreasing) along its last dim"
    for dry in (False, True, True):
        with pytest.raises(ValueError, match=re.escape(expected)), \
                trace.record(execute=not dry):
            tritonml.segment_coo(src, index, dim_size=256)


def test_dry_run_says_whether_launches_are_skipped():
    assert trace.dry_run() is False
    with trace.record():
        with trace.record(execute=False):
            assert trace.dry_run() is True
            with trace.record():
                assert trace.dry_run() is True   # (an outer dry block still skips them)
