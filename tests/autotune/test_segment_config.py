"""The segment kernel's config for an H100 (tritonml_autotune/segments.py): chunks that fill the
SMs, and look-back windows small enough to scan in a tile's registers (no more lanes than a tile,
no more than 256 chunks) yet wide enough that a long segment's fold takes few round trips."""
from __future__ import annotations

import pytest

from tritonml_autotune import devices
from tritonml_autotune.segments import segment_config

SMS = devices.H100.sms


def _h100(axis_len, inner_len, outer_len, state_bytes=8, scan=False):
    with devices.targeting(devices.H100):
        return segment_config(axis_len, inner_len, outer_len, state_bytes, "cuda", scan=scan)


@pytest.mark.parametrize("scan", [False, True])
@pytest.mark.parametrize("state_bytes", [4, 8, 16, 24])
@pytest.mark.parametrize("inner_len", [1, 2, 3, 8, 16, 64, 1000])
@pytest.mark.parametrize("axis_len", [1, 1000, 1 << 20, 3 * 10 ** 7])
def test_windows_fit_a_tile_and_cover_the_chunks(axis_len, inner_len, state_bytes, scan):
    config = _h100(axis_len, inner_len, 1, state_bytes, scan)
    lanes = 1024 if state_bytes < 16 else 512
    tiles = -(-axis_len // config.block_axis)
    chunks = -(-tiles // config.chunk_tiles)
    assert config.window * config.block_inner <= max(lanes, 2 * config.block_inner)
    assert config.window <= 256
    # as wide as those two rules allow, up to the chunks of a chain (at least 16)
    widest = 1 << (max(2, lanes // config.block_inner).bit_length() - 1)
    assert config.window == min(256, max(16, 1 << (chunks - 1).bit_length()), widest)


@pytest.mark.parametrize("scan", [False, True])
def test_a_long_1d_axis_runs_twelve_chunks_per_sm(scan):
    config = _h100(3 * 10 ** 7, 1, 1, 8, scan)
    chunks = -(-(-(-3 * 10 ** 7 // config.block_axis)) // config.chunk_tiles)
    assert SMS * 11 <= chunks <= SMS * 12
    # a segment over every chunk folds their tails in at most seven window loads
    assert -(-chunks // config.window) <= 7


@pytest.mark.parametrize("scan", [False, True])
@pytest.mark.parametrize("state_bytes", [4, 8, 12, 24])
@pytest.mark.parametrize("inner_len", [1, 16, 64, 1000])
def test_wide_reductions_of_small_states_walk_four_slices(inner_len, state_bytes, scan):
    """A reduction's tile several lanes wide, state of at most 8 bytes: four slices of 1,024
    lanes at 4 warps with ptxas free to take 255 registers; scans, wider states and one-lane
    tiles keep whole tiles of 1,024 lanes (512 for states of 16 bytes or more, at least 16
    positions)."""
    config = _h100(1 << 22, inner_len, 1, state_bytes, scan)
    lanes = 1024 if state_bytes < 16 else 512
    sliced = not scan and inner_len > 1 and state_bytes <= 8
    assert config.sub_tiles == (4 if sliced else 1)
    assert config.block_axis == config.sub_tiles * max(16, lanes // config.block_inner)
    assert config.boundary_block == config.block_axis // config.sub_tiles
    if sliced:
        assert (config.num_warps, config.maxnreg, config.fold_tiles) == (4, 255, 1)
    config.validate()


def test_a_short_axis_takes_fewer_slices():
    assert _h100(40, 64, 1).sub_tiles == 4        # 64 positions: four slices of 16
    assert _h100(20, 64, 1).sub_tiles == 2        # 32: two of 16
    assert _h100(10, 64, 1).sub_tiles == 1        # one tile of 16
    assert _h100(100, 16, 1).sub_tiles == 2       # 128: two of 64
