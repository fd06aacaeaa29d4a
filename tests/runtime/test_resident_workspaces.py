"""Resident workspaces (tritonml/runtime/resident.py): the look-back scan and the one-launch split
reduction start from a workspace an earlier launch left, with no memset launch, and get the numpy
oracle's results whatever ran before them on the same stream."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import tritonml
from tritonml import runtime
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ReduceConfig, ScanConfig
from tritonml.runtime import resident as _resident
from tritonml.launchers.reduce import ReduceFunction, reduce_axes
from tritonml.records.builtin_reductions import RECORDS
from tritonml.launchers.scan import SUM, cumulative_scan

from tritonml.bench.memtrace import trace_memory
from tests.lookback_knob import prefix_every

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="runs in Triton's interpreter")

LOOKBACK = ScanConfig("lookback", 64, 1)
SPLIT = ReduceConfig("split", 32, 4, splits=5, block_split=2)


@pytest.fixture(autouse=True)
def long_lookbacks():
    """Every look-back here publishes every third inclusive prefix only (tests/lookback_knob.py),
    so tiles read what earlier launches left in more status words."""
    with prefix_every(3):
        yield


def scan_oracle(x: torch.Tensor, axis: int) -> np.ndarray:
    return np.cumsum(x.double().numpy(), axis=axis)


def check_scan(x, axis=1):
    got = cumulative_scan(x, axis, SUM, config=LOOKBACK)
    np.testing.assert_allclose(got.double().numpy(), scan_oracle(x, axis), rtol=1e-5, atol=1e-5)


@pytest.fixture(autouse=True)
def fresh_workspaces():
    runtime.clear()
    yield
    runtime.clear()


def ticket_word():
    (held, _), = [v for k, v in _resident._workspaces.items() if k[0] == _resident.LOOKBACK]
    return int(held[:2].view(torch.int64)[0])   # the int64 word over the first two int32 words


def test_look_back_scans_of_other_lengths_one_after_another_on_one_workspace():
    generator = torch.Generator().manual_seed(0)
    # A long scan leaves status words in many slots; shorter and longer ones follow on the same
    # workspace, which only the epoch keeps apart.
    for shape in ((2, 1500), (1, 100), (3, 700), (2, 1500), (1, 64), (4, 900)):
        check_scan(torch.randn(shape, generator=generator))
    assert len(_resident._workspaces) == 1
    # Six launches: the ticket word holds epoch 6 and no ticket drawn.
    assert ticket_word() == 6 << 32


def test_a_workspace_is_replaced_before_its_epoch_could_wrap(monkeypatch):
    monkeypatch.setattr(_resident, "MAX_USES", 3)
    generator = torch.Generator().manual_seed(1)
    tensors = []
    for _ in range(7):
        check_scan(torch.randn(2, 800, generator=generator))
        tensors.append(next(iter(_resident._workspaces.values()))[0])
    # uses 1-3 on the first workspace, 4-6 on a second, 7 on a third
    assert len({id(t) for t in tensors}) == 3
    assert ticket_word() == 1 << 32


def test_a_workspace_grows_for_a_longer_launch():
    check_scan(torch.randn(1, 200))
    small = next(iter(_resident._workspaces.values()))[0]
    check_scan(torch.randn(8, 5000))
    large = next(iter(_resident._workspaces.values()))[0]
    assert large.numel() > small.numel() and large.numel() >= 2 + 8 * (5000 // 64 + 1)


class Watching(TorchDispatchMode):
    """A mode that does not declare ``observes_only``: as a tracer would be, for all we know."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def test_under_a_dispatch_mode_each_launch_gets_a_fresh_zeroed_workspace():
    x = torch.randn(2, 1000)
    with Watching():
        got = cumulative_scan(x, 1, SUM, config=LOOKBACK)
        split = reduce_axes(x, (1,), RECORDS[ReduceFunction.SUM], config=SPLIT)
    assert _resident._workspaces == {}
    np.testing.assert_allclose(got.double().numpy(), scan_oracle(x, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(split.double().numpy()[:, 0], x.double().numpy().sum(1), rtol=1e-5)


def test_split_and_look_back_on_one_stream_keep_separate_workspaces():
    generator = torch.Generator().manual_seed(2)
    for _ in range(3):
        x = torch.randn(300, 6, generator=generator)
        got = reduce_axes(x, (0,), RECORDS[ReduceFunction.SUM], config=SPLIT)
        np.testing.assert_allclose(got.double().numpy()[0], x.double().numpy().sum(0), rtol=1e-5)
        check_scan(torch.randn(3, 900, generator=generator))
    kinds = {key[0]: held for key, (held, _) in _resident._workspaces.items()}
    assert set(kinds) == {_resident.ARRIVALS, _resident.LOOKBACK}
    assert kinds[_resident.ARRIVALS].dtype == torch.int32 and not kinds[_resident.ARRIVALS].any()
    assert kinds[_resident.LOOKBACK].dtype == torch.int32


def test_threads_launching_at_once_share_the_workspace_safely():
    from concurrent.futures import ThreadPoolExecutor

    generator = torch.Generator().manual_seed(3)
    inputs = [torch.randn(2, 300 + 50 * i, generator=generator) for i in range(6)]
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda x: cumulative_scan(x, 1, SUM, config=LOOKBACK), inputs))
    for x, got in zip(inputs, results):
        np.testing.assert_allclose(got.double().numpy(), scan_oracle(x, 1), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# The chunked scan: the look-back's status words, one per chunk
# ---------------------------------------------------------------------------------------------
CHUNKED = ScanConfig("chunked", 16, 1, chunk_tiles=3, window=2)


def check_chunked_scan(x, axis=1):
    got = cumulative_scan(x, axis, SUM, config=CHUNKED)
    np.testing.assert_allclose(got.double().numpy(), scan_oracle(x, axis), rtol=1e-5, atol=1e-5)


def test_chunked_and_look_back_scans_share_one_workspace_in_turn():
    # Both kinds tag their status words with the epoch: a chunk must never read a word an earlier
    # launch (of either kernel, longer or shorter) left as published. The first launch needs the
    # most words, so the workspace is never replaced.
    generator = torch.Generator().manual_seed(4)
    launches = 0
    for shape in ((4, 600), (1, 100), (3, 350), (2, 700), (1, 64), (2, 700)):
        check_chunked_scan(torch.randn(shape, generator=generator))
        check_scan(torch.randn(shape[::-1], generator=generator).t().contiguous())
        launches += 2
    assert len(_resident._workspaces) == 1
    assert ticket_word() == launches << 32


@pytest.mark.parametrize("config, check, kernel", [
    (LOOKBACK, check_scan, "scan_lookback_kernel"),
    (CHUNKED, check_chunked_scan, "scan_chunked_kernel"),
], ids=["lookback", "chunked"])
def test_a_resident_scan_makes_no_memset_launch_once_its_workspace_exists(config, check, kernel):
    x = torch.randn(2, 1000)
    check(x)
    with trace_memory() as trace, _trace.record() as rec:
        cumulative_scan(x, 1, SUM, config=config)
    assert [launch.name for launch in rec.launches] == [kernel]
    assert trace.torch_work == [] and trace.launches == 1


def test_chunked_workspace_grows_for_more_chunks():
    check_chunked_scan(torch.randn(1, 200))   # 5 chunks: the smallest workspace, 64 words
    small = next(iter(_resident._workspaces.values()))[0]
    check_chunked_scan(torch.randn(2, 2000))  # 2 x 42 chunks
    large = next(iter(_resident._workspaces.values()))[0]
    assert large.numel() > small.numel() and large.numel() >= 2 + 2 * 42
