"""segment_coo's one pass (tritonml/torch_ops/scatter_one_pass.py): the segment kernel reads the
sorted index itself. Against the numpy oracle (tests/torch_ops/scatter_reference.py), against
the two-pass path bit for bit (the same tiles, chunks and scans from boundaries), at several
configs and program counts through the launcher, and its checks after the launch: the two-pass
path's errors, nothing of the caller's written."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tritonml
from tests.torch_ops import scatter_reference as reference
from tests.torch_ops.test_scatter import assert_matches, values
from tritonml.launchers.segment import ids_facts, segment_reduce_axis, segment_reduce_ids
from tritonml.records.builtin_reductions import record_of
from tritonml.runtime import trace
from tritonml_autotune.configs import SegmentConfig


def two_pass(function, *args, **kwargs):
    """The same call on the two-pass path: inside a forward-mode AD level, which the one pass
    leaves to it."""
    with torch.autograd.forward_ad.dual_level():
        return function(*args, **kwargs)


def launches(call) -> list:
    with trace.record() as rec:
        call()
    return rec.launches


def index_of(kind: str, length: int, groups: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if kind == "random":
        return torch.randint(0, groups, (length,), generator=g).sort().values
    if kind == "all same":
        return torch.full((length,), groups // 2)
    if kind == "empty ends":      # nothing in the first and last groups, runs of empties
        return torch.randint(1, max(groups - 1, 2), (length,), generator=g).sort().values * 1
    if kind == "one huge":        # one group of nearly everything, between two short ones
        index = torch.full((length,), 1)
        index[:2], index[-3:] = 0, groups - 1
        return index
    if kind == "sparse":          # far fewer ids than groups: long gaps
        return (torch.randint(0, groups, (length,), generator=g).sort().values // 97) * 97
    raise ValueError(kind)


KINDS = ("random", "all same", "empty ends", "one huge", "sparse")
# torch_scatter's segment_coo reduces (it refuses "mul", as tritonml does)
REDUCES = ("sum", "mean", "min", "max")


# (an integer mean divides by counts in the dtype: the two-pass path's, tests/torch_ops/
# test_scatter_forms.py)
DTYPES = (torch.float32, torch.bfloat16, torch.float64, torch.int8, torch.int64, torch.uint8)
ONE_PASS = [(reduce, dtype) for reduce in REDUCES for dtype in DTYPES
            if reduce != "mean" or dtype.is_floating_point]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reduce, dtype", ONE_PASS, ids=str)
def test_segment_coo_in_one_launch_matches_the_oracle_and_the_two_pass_bits(kind, reduce,
                                                                            dtype):
    length, groups = 3000, 400
    index = index_of(kind, length, groups, 7)
    src = values((length,), dtype, 3, "sum")
    expected = reference.scatter_groups(src, index, 0, groups, reduce)
    got = tritonml.segment_coo(src, index, dim_size=groups, reduce=reduce)
    assert_matches(got, expected, dtype)
    assert len(launches(lambda: tritonml.segment_coo(src, index, dim_size=groups,
                                                     reduce=reduce))) == 1
    if dtype.is_floating_point:
        assert torch.equal(got.view(torch.int8), two_pass(tritonml.segment_coo, src, index,
                                                          dim_size=groups, reduce=reduce)
                           .view(torch.int8))


@pytest.mark.parametrize("extreme", ("max", "min"))
def test_arg_positions_in_one_pass(extreme):
    g = torch.Generator().manual_seed(4)
    index = torch.randint(0, 50, (2500,), generator=g).sort().values
    src = torch.randint(0, 3, (2500,), generator=g).to(torch.float32)   # many ties
    src[[5, 900]] = math.nan
    out, arg = reference.scatter_groups(src, index, 0, 53, extreme, with_arg=True)
    form = tritonml.segment_max_coo if extreme == "max" else tritonml.segment_min_coo
    got, got_arg = form(src, index, dim_size=53)
    assert_matches(got, out, torch.float32)
    assert got_arg.tolist() == arg.tolist()
    assert len(launches(lambda: form(src, index, dim_size=53))) == 2
    again, again_arg = two_pass(form, src, index, dim_size=53)
    assert torch.equal(got.view(torch.int32), again.view(torch.int32))
    assert torch.equal(got_arg, again_arg)


def test_rows_of_one_value_a_shared_index_and_an_int32_index():
    """src [3, 700] along its last dim, the index one line broadcast over the rows (int32)."""
    g = torch.Generator().manual_seed(9)
    index = torch.randint(0, 40, (700,), generator=g).sort().values.to(torch.int32)
    src = values((3, 700), torch.float32, 2)
    expected = reference.scatter_groups(src, index.to(torch.int64).expand(3, 700), 1, 40, "sum")
    got = tritonml.segment_coo(src, index.reshape(1, 700), dim_size=40)
    assert_matches(got, expected, torch.float32)
    assert len(launches(lambda: tritonml.segment_coo(src, index.reshape(1, 700),
                                                     dim_size=40))) == 1
    # without dim_size: the last id + 1 groups
    assert tritonml.segment_coo(src, index.reshape(1, 700)).shape == (3, int(index[-1]) + 1)


def test_wider_rows_and_forward_mode_keep_the_two_pass_path():
    index = torch.tensor([0, 0, 1, 3])
    assert len(launches(lambda: tritonml.segment_coo(torch.ones(4), index, dim_size=4))) == 1
    # rows of 16 values (their tiles go in slices from boundaries): the checks, then the kernel
    assert len(launches(lambda: tritonml.segment_coo(torch.ones(4, 16), index,
                                                     dim_size=4))) == 2
    assert len(launches(lambda: two_pass(tritonml.segment_coo, torch.ones(4), index,
                                         dim_size=4))) == 2


@pytest.mark.parametrize("reduce", REDUCES)
def test_gradients_through_the_one_pass_are_the_two_pass_ones(reduce, fast):
    """Autograd records the one pass (one launch forward) with the segment reduction's own
    backward: the two-pass path's gradients exactly, gradcheck and (for the smooth ones)
    gradgradcheck in float64 (one random projection each in the fast tier)."""
    g = torch.Generator().manual_seed(6)
    index = torch.tensor([0, 0, 0, 2, 2, 3, 5, 5])
    src = torch.rand(8, dtype=torch.float64, generator=g) + 0.5
    src[1] = float(src[2])   # a tie for max and min
    weights = torch.rand(7, dtype=torch.float64, generator=g)

    def call(s):
        return tritonml.segment_coo(s, index, dim_size=7, reduce=reduce)

    leaf = src.clone().requires_grad_()
    assert len(launches(lambda: call(leaf))) == 1
    (got,) = torch.autograd.grad((call(leaf) * weights).sum(), leaf)
    with torch.autograd.forward_ad.dual_level():   # (the two-pass path)
        other = src.clone().requires_grad_()
        (want,) = torch.autograd.grad((call(other) * weights).sum(), other)
    assert torch.equal(got, want)
    assert torch.autograd.gradcheck(call, (src.clone().requires_grad_(),), fast_mode=fast)
    if reduce in ("sum", "mean"):
        assert torch.autograd.gradgradcheck(call, (src.clone().requires_grad_(),),
                                            fast_mode=fast)


@pytest.mark.parametrize("index, dim_size, message", [
    ([0, 2, 1, 3, 4], None, "index: segment_coo needs an index sorted"),
    ([0, 2, 1, 3, 4], 9, "index: segment_coo needs an index sorted"),
    ([-1, 0, 1, 1, 2], None, r"index: every value must be in \[0, 3\), found -1"),
    ([-4, 0, 1, 1, 2], 5, r"index: every value must be in \[0, 5\), found -4"),
    ([0, 0, 1, 1, 9], 5, r"index: every value must be in \[0, 5\), found 9"),
    ([0, 7, 1, 1, 9], 5, r"index: every value must be in \[0, 5\), found 9"),   # both wrong
])
def test_the_checks_after_the_launch_raise_the_two_pass_errors(index, dim_size, message):
    index = torch.tensor(index)
    src = torch.arange(5, dtype=torch.float32)
    before = src.clone()
    with pytest.raises(ValueError, match=message):
        tritonml.segment_coo(src, index, dim_size=dim_size)
    with pytest.raises(ValueError, match=message):
        two_pass(tritonml.segment_coo, src, index, dim_size=dim_size)
    assert torch.equal(src, before)


# (block_axis, chunk_tiles, fold_tiles): one program, several, chunks inside one segment
CONFIGS = ((16, 1, 1), (16, 2, 2), (16, 3, 1), (32, 1, 4), (64, 5, 2))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("function, options", [("SUM", {}), ("AVERAGE", {"initial": 0.0}),
                                               ("MAX", {"empty": 0}), ("ARGMIN", {}),
                                               ("MULTIPLY", {"initial": 2.0})])
def test_the_launcher_from_ids_equals_it_from_offsets_at_every_config(kind, function, options,
                                                                      fast):
    """Same tiles, chunks and scans: the same bits from ids as from the boundaries, whatever
    the config (programs, chunks inside one segment that only check their ids), and each
    program's facts fold to the index's least, greatest and no descent."""
    length, groups = 300, 120
    index = index_of(kind, length, groups, 11)
    x = torch.randn(length, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    offsets = torch.searchsorted(index, torch.arange(groups + 1))
    # (the fast tier: several programs, and chunks inside one segment)
    for block_axis, chunk_tiles, fold_tiles in (CONFIGS[1:2] + CONFIGS[-1:] if fast else CONFIGS):
        config = SegmentConfig(block_axis, 1, chunk_tiles, window=2, boundary_block=16,
                               fold_tiles=fold_tiles)
        (want,) = segment_reduce_axis(x, record_of(function), offsets, 0, config=config,
                                      **options)
        (got,), facts = segment_reduce_ids(x, record_of(function), index, groups, 0,
                                           config=config, **options)
        assert torch.equal(got, want), (block_axis, chunk_tiles, fold_tiles)
        assert ids_facts(facts) == (int(index.min()), int(index.max()), 0)


@pytest.mark.parametrize("kind", ("shuffled", "negative", "huge", "one descent"))
def test_the_facts_of_a_wrong_index_and_writes_kept_in_the_output(kind):
    """Whatever the index holds, the kernel ends, writes only its output, and the facts tell
    what is wrong."""
    g = torch.Generator().manual_seed(2)
    length, groups = 300, 20
    index = {"shuffled": lambda: torch.randint(0, groups, (length,), generator=g),
             "negative": lambda: torch.randint(-5, groups, (length,), generator=g).sort().values,
             "huge": lambda: torch.randint(0, 10**15, (length,), generator=g).sort().values,
             "one descent": lambda: torch.full((length,), 5).index_put_(
                 (torch.tensor([100]),), torch.tensor(-7))}[kind]()
    x = torch.randn(length, dtype=torch.float64, generator=g)
    config = SegmentConfig(16, 1, 2, window=2, boundary_block=16, fold_tiles=2)
    # the output lies between two guard regions of one buffer
    buffer = torch.full((3 * groups,), 12345.0, dtype=torch.float64)
    (got,), facts = segment_reduce_ids(x, record_of("SUM"), index, groups, 0, config=config)
    buffer[groups:2 * groups] = got
    assert (buffer[:groups] == 12345.0).all() and (buffer[2 * groups:] == 12345.0).all()
    descents = int((index[1:] < index[:-1]).sum())
    assert ids_facts(facts) == (int(index.min()), int(index.max()), descents)


def test_an_empty_index_or_no_groups_take_the_two_pass_path():
    assert tritonml.segment_coo(torch.ones(0), torch.zeros(0, dtype=torch.int64),
                                dim_size=3).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match=r"index: every value must be in \[0, 0\), found 0"):
        tritonml.segment_coo(torch.ones(2), torch.zeros(2, dtype=torch.int64), dim_size=0)
    # src with no rows beside dim: an empty result (a shared line was looked for, and raised)
    np.testing.assert_equal(tuple(tritonml.segment_coo(torch.ones(0, 2), torch.zeros(1, 2).long(),
                                                       dim_size=3).shape), (0, 3))
    assert tuple(tritonml.scatter(torch.ones(0, 2), torch.zeros(1, 2).long(), dim=1).shape) == (0, 1)
