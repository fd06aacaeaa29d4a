"""The scatter reductions give the same bits whatever the GPU they are configured for, run after
run, and whether the index comes sorted or not: each group is reduced at the reference GPU's
segment config (``GROUP_TARGET``) on every device. The plain segment reduction, configured for
the device, is the control: on the same data its float64 bits change with the number of SMs,
so the equalities below could fail."""
from __future__ import annotations

import dataclasses

import pytest
import torch

import tritonml
from tritonml_autotune import devices

# an H100 with one SM: the segment kernel then splits an axis into 12 chunks, not 1,584
ONE_SM = dataclasses.replace(devices.H100, name="one-SM H100", sms=1)
# enough rows for more tiles (of 256 rows at width 16) than the one-SM GPU has programs
ROWS, WIDTH, GROUPS = 4096, 16, 8


def grouped_data(dtype):
    g = torch.Generator().manual_seed(0)
    src = torch.randn(ROWS, WIDTH, generator=g, dtype=torch.float64).to(dtype)
    index = torch.sort(torch.randint(0, GROUPS, (ROWS,), generator=g)).values
    return src, index, torch.randperm(ROWS, generator=g)


def test_the_control_depends_on_the_gpu():
    src, index, _ = grouped_data(torch.float64)
    offsets = torch.searchsorted(index, torch.arange(GROUPS + 1))
    with devices.targeting(ONE_SM):
        one = tritonml.segment_reduce(src, "sum", offsets=offsets)
    with devices.targeting("H100"):
        many = tritonml.segment_reduce(src, "sum", offsets=offsets)
    assert not torch.equal(one, many)


@pytest.mark.parametrize("dtype", (torch.float64, torch.float32), ids=str)
def test_same_bits_on_any_gpu_and_run(dtype):
    src, index, shuffle = grouped_data(dtype)
    results = []
    for target in (ONE_SM, "H100", None):
        with devices.targeting(target):
            results.append((tritonml.segment_coo(src, index, dim_size=GROUPS),
                            tritonml.scatter(src[shuffle], index[shuffle], 0, dim_size=GROUPS,
                                             reduce="mean"),
                            tritonml.index_add(torch.zeros(GROUPS, WIDTH, dtype=dtype), 0,
                                               index[shuffle], src[shuffle])))
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert torch.equal(a, b)


def test_a_sorted_index_gives_the_bits_of_its_shuffle():
    # the stable sort puts each group's elements in their order in src: a shuffled src and
    # index, sorted back, are the sorted ones, element for element
    src, index, shuffle = grouped_data(torch.float64)
    order = torch.argsort(index[shuffle], stable=True)
    sorted_src, sorted_index = src[shuffle][order], index[shuffle][order]
    assert torch.equal(tritonml.scatter(src[shuffle], index[shuffle], 0, dim_size=GROUPS),
                       tritonml.segment_coo(sorted_src, sorted_index, dim_size=GROUPS))
