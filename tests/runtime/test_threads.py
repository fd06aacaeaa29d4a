"""Calls from many threads at once: every op, each thread on its own tensor, all results right.

Triton's interpreter patches ``triton.language`` process-wide while a kernel runs, so interpreted
launches take turns behind one lock; compiled launches must not take it.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

import tritonml
from tritonml.core import backend as _backend
from tritonml.runtime import relaunch as _relaunch
from tritonml.runtime import trace as _trace
from benchmarks.reduce_oracle import FUNCTIONS, assert_matches, expected_tensor
from benchmarks.scan_oracle import scan_matches, to_numpy

THREADS = 16


def _one_thread(seed: int):
    """Every op on this thread's own tensor; returns the failures it saw."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand((6, 37), generator=g, dtype=torch.float64) + 0.5
    failures = []
    for op, fn in (("sum", tritonml.cumulative_sum), ("product", tritonml.cumulative_product)):
        for axis, reverse, exclusive in ((1, False, False), (0, True, True)):
            got = fn(x, axis, reverse=reverse, exclusive=exclusive)
            ok, msg = scan_matches(got, to_numpy(x), axis, op, reverse, exclusive)
            if not ok:
                failures.append(f"{op} axis={axis}: {msg}")
    for function in FUNCTIONS:
        for axes in (1, (0, 1)):
            try:
                assert_matches(tritonml.reduce(x, function, axes),
                               expected_tensor(x, function, axes), context=function)
            except AssertionError as e:
                failures.append(str(e))
    ints = torch.randint(-100, 100, (5, 9), generator=g, dtype=torch.int32)
    got = tritonml.cumulative_sum(ints, 0)
    if not np.array_equal(got.numpy(), np.cumsum(ints.numpy().astype(np.int64), 0).astype(np.int32)):
        failures.append("int32 cumulative_sum")
    return failures


def test_every_op_from_many_threads_at_once():
    barrier = threading.Barrier(THREADS)

    def run(seed):
        barrier.wait()  # start together, so launches really interleave
        return _one_thread(seed)

    with ThreadPoolExecutor(THREADS) as pool:
        results = list(pool.map(run, range(THREADS)))  # re-raises any thread's exception
    assert results == [[]] * THREADS


class _LockProbe:
    """A stand-in kernel that records whether the launching thread holds the interpreter lock."""

    def __init__(self):
        self.held = []

    def __getitem__(self, grid):
        return lambda *args, **meta: self.held.append(_trace._INTERPRETER_LOCK._is_owned())


def test_compiled_launches_do_not_take_the_interpreter_lock(monkeypatch):
    """With compiled Triton (a GPU), launches from several threads must not be serialized."""
    monkeypatch.setattr(_backend, "INTERPRET", False)
    monkeypatch.setattr(torch.library, "wrap_triton", lambda kernel: kernel)  # a stand-in kernel

    def launch_compiled(kernel, grid, args, meta):
        kernel[grid](*args, **meta)
        return True
    monkeypatch.setattr(_relaunch, "launch_compiled", launch_compiled)
    probe = _LockProbe()
    _trace.launch(probe, (1,), 0)
    assert probe.held == [False]


def test_interpreted_launches_take_the_lock(monkeypatch):
    monkeypatch.setattr(_backend, "INTERPRET", True)
    probe = _LockProbe()
    _trace.launch(probe, (1,), 0)
    assert probe.held == [True]
