"""Whether two indices of a layout address one element (tritonml/core/checks.py
``first_overlapping_dim``, the rule behind a torch ``out=`` and a DirectML output desc): exact
against a listing of the addresses wherever strides nest or the layout holds at most
``EXACT_OVERLAP_ELEMENTS`` elements; interleaved layouts beyond that are refused."""
import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import tritonml
from tritonml.core.checks import EXACT_OVERLAP_ELEMENTS, first_overlapping_dim


def _collide(sizes, strides) -> bool:
    """The oracle: every index's address, in Python integers."""
    addresses = [sum(i * s for i, s in zip(index, strides))
                 for index in itertools.product(*(range(n) for n in sizes))]
    return len(set(addresses)) != len(addresses)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(0, 12)), min_size=1, max_size=4))
def test_small_layouts_are_decided_exactly(dims):
    sizes = [n for n, _ in dims]
    strides = [s for _, s in dims]
    found = first_overlapping_dim(sizes, strides)
    assert (found is not None) == _collide(sizes, strides)
    if found is not None:
        assert sizes[found] > 1


def test_an_interleaved_out_gets_every_result_and_nothing_else():
    x = torch.arange(1.0, 7.0).reshape(2, 1, 3)
    storage = torch.full((9,), -5.0)
    out = storage.as_strided((2, 1, 3), (3, 0, 2))    # elements 0, 2, 4 and 3, 5, 7
    tritonml.cumulative_sum(x, 0, out=out)
    want = np.cumsum(x.numpy().astype(np.float64), axis=0)
    np.testing.assert_array_equal(out.numpy(), want.astype(np.float32))
    np.testing.assert_array_equal(storage.numpy()[[1, 6, 8]], [-5.0, -5.0, -5.0])


def test_interleaved_layouts_past_the_listing_limit_are_refused_untouched():
    sizes, strides = (2, 3, EXACT_OVERLAP_ELEMENTS // 4), (3, 2, 8)   # distinct, not proven
    assert not _collide(sizes[:2] + (4,), strides)
    storage = torch.full((8 * sizes[2] + 8,), -5.0)
    out = storage.as_strided(sizes, strides)
    with pytest.raises(ValueError, match="out: has internal overlap"):
        tritonml.cumulative_sum(torch.ones(sizes), 0, out=out)
    assert bool((storage == -5.0).all())
