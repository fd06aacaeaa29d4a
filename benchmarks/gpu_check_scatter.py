"""The deterministic scatter and index reductions on a real GPU (``--ops scatter`` of
``benchmarks/gpu_check.py``): every form against numpy, twice, bit for bit.

Each case builds a GNN-like aggregation (edges into nodes, power-law in-degrees, some nodes with
no edge, one case of every edge into one node) and runs tritonml's forms on the device:
``segment_coo`` on the sorted index (at width 1 the segment kernel reads the index itself, in
one launch; wider, the checks' pass writes the boundaries), ``scatter`` on a shuffled copy (sorted on the device), ``scatter_max`` (values and positions), ``index_add``,
``scatter_reduce`` with an index that differs across the features (one key per element), and
``bincount`` with weights. Each is compared with numpy (float64, or exact integers wrapping as
C does) within the accuracy docs/scatter.md states: a float group's sum is its sum accumulated
in float64 (float32 and float64 inputs) or float32 (half types), rounded once; maxima, minima
and integers are exact. Each runs twice, every fresh allocation poisoned with another byte
(``gpu_check_segments._poisoned_allocations``), and the two results must have the same bits:
determinism, and nothing left unwritten. The shuffled ``scatter`` must also give the bits of
``segment_coo`` on the sorted index, the shuffle keeping each group's order: the stable sort
brings back the same sequence, so the same tree folds it (at width 1, from boundaries there and
from the ids here).
"""
from __future__ import annotations

import numpy as np
import torch

import tritonml
from tritonml.core.dtypes import FLOAT_DTYPES, dtype_name

from .gpu_check_segments import _poisoned_allocations, _run_case, _same_bits

# (edges, nodes, widths): large enough on a GPU that the sort, the checks' kernel and the segment
# kernel run many programs (the boundaries written by many tiles); tiny through the interpreter
GPU_SIZES = (1 << 20, 1 << 16, (1, 16, 64))
DRY_SIZES = (300, 40, (1, 3))
REDUCES = ("sum", "mean", "max", "min")


def _accumulation_eps(dtype: torch.dtype) -> float:
    """The unit roundoff of the type a group's sum accumulates in."""
    return 2.0 ** -24 if dtype in (torch.float16, torch.bfloat16) else 2.0 ** -53


def _values(rng, shape, dtype: torch.dtype) -> torch.Tensor:
    if dtype in FLOAT_DTYPES:
        return torch.from_numpy(rng.standard_normal(shape)).to(dtype)
    info = torch.iinfo(dtype)
    low, high = max(info.min, -100), min(info.max, 100)
    return torch.from_numpy(rng.integers(low, high + 1, shape)).to(dtype)


def _index(rng, edges: int, nodes: int, kind: str) -> np.ndarray:
    if kind == "one group":
        return np.full(edges, nodes // 2, dtype=np.int64)
    # power-law in-degrees: low node numbers take most edges, the last ones often none
    return np.minimum((nodes * rng.random(edges) ** 3).astype(np.int64), nodes - 1)


def _oracle(src: np.ndarray, index: np.ndarray, nodes: int, reduce: str, dtype,
            truncated_mean: bool = False):
    """(result in float64 or int64, each group's count, each group's sum of magnitudes).
    ``truncated_mean``: an integer mean as torch_scatter's segment_coo takes it (the wrapped sum
    over the true count, rounded toward zero), not as its scatter does."""
    rows = (nodes,) + src.shape[1:]
    wide = np.float64 if dtype in FLOAT_DTYPES else np.int64
    x = src.astype(wide)
    counts = np.bincount(index, minlength=nodes)
    magnitude = np.zeros(rows)
    np.add.at(magnitude, index, np.abs(src.astype(np.float64)))
    if reduce in ("sum", "mean"):
        out = np.zeros(rows, dtype=wide)
        np.add.at(out, index, x)
        if reduce == "mean":
            shape = (-1,) + (1,) * (src.ndim - 1)
            count = np.maximum(counts, 1).reshape(shape)
            if wide is np.float64:
                out = out / count
            else:
                # torch_scatter's: the sum and the count in the dtype (both wrapped), a count
                # below 1 taken as 1, the division rounding down
                wrapped = torch.from_numpy(out).to(dtype).to(torch.int64).numpy()
                if truncated_mean:
                    # segment_coo's: the true count, the division rounding toward zero
                    count = np.maximum(counts, 1).reshape(shape)
                    out = np.sign(wrapped) * (np.abs(wrapped) // count)
                else:
                    count = torch.from_numpy(counts).to(dtype).to(torch.int64).numpy()
                    out = np.floor_divide(wrapped, np.maximum(count, 1).reshape(shape))
    else:
        fill = -np.inf if wide is np.float64 else np.iinfo(np.int64).min
        if reduce == "min":
            fill = -fill if wide is np.float64 else np.iinfo(np.int64).max
        out = np.full(rows, fill, dtype=wide)
        (np.maximum if reduce == "max" else np.minimum).at(out, index, x)
        out[counts == 0] = 0   # torch_scatter's empty group
    return out, counts, magnitude


def _assert_close(got: torch.Tensor, want: np.ndarray, counts: np.ndarray,
                  magnitude: np.ndarray, reduce: str, dtype: torch.dtype, label: str) -> None:
    got64 = got.cpu().to(torch.float64 if dtype in FLOAT_DTYPES else torch.int64).numpy()
    if dtype not in FLOAT_DTYPES:
        # integers wrap modulo 2**bits, as C does: the oracle's int64 cast to the dtype
        wrapped = torch.from_numpy(np.asarray(want, dtype=np.int64)).to(dtype).to(torch.int64)
        if not np.array_equal(got64, wrapped.numpy()):
            bad = np.argwhere(got64 != wrapped.numpy())[0]
            raise AssertionError(f"{label}: at {tuple(bad)} got {got64[tuple(bad)]}, "
                                 f"want {wrapped.numpy()[tuple(bad)]}")
        return
    shape = (-1,) + (1,) * (want.ndim - 1)
    n = counts.reshape(shape)
    eps = torch.finfo(dtype).eps
    if reduce in ("max", "min"):
        allowed = eps * np.abs(want)   # the value itself, rounded to the dtype
    else:
        allowed = (n * _accumulation_eps(dtype) + eps) * magnitude
        if reduce == "mean":
            allowed = allowed / np.maximum(n, 1) + eps * np.abs(want)
    allowed = allowed + np.finfo(np.float64).tiny
    wrong = ~(np.abs(got64 - want) <= allowed)
    if wrong.any():
        bad = tuple(np.argwhere(wrong)[0])
        raise AssertionError(f"{label}: at {bad} got {got64[bad]!r}, want {want[bad]!r} "
                             f"(allowed {allowed[bad]:.3g})")


def _twice(call):
    """``call()`` twice, fresh allocations poisoned with another byte each time; the first
    result, after checking the second has its bits."""
    with _poisoned_allocations(0):
        first = call()
    with _poisoned_allocations(1):
        again = call()
    firsts = first if isinstance(first, tuple) else (first,)
    agains = again if isinstance(again, tuple) else (again,)
    for a, b in zip(firsts, agains):
        _same_bits(a, b)
    return first


def _group_order_shuffle(rng, index_sorted: np.ndarray) -> np.ndarray:
    """A permutation of the positions of a sorted index under which each group's positions
    still increase: a random shuffle, then each group's positions put back in their order."""
    shuffled = rng.permutation(len(index_sorted))
    order = np.argsort(index_sorted[shuffled], kind="stable")
    shuffled[order] = np.arange(len(index_sorted))
    return shuffled


def check_scatter(dtype, device, gpu: bool, failures: list, counts: dict) -> None:
    edges, nodes, widths = GPU_SIZES if gpu else DRY_SIZES
    name = dtype_name(dtype)
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    for kind in ("power law", "one group"):
        index_np = np.sort(_index(rng, edges, nodes, kind))
        index = torch.from_numpy(index_np).to(device)
        keep = _group_order_shuffle(rng, index_np)
        for width in widths:
            src_cpu = _values(rng, (edges, width), dtype)
            src_np = src_cpu.to(torch.float64 if dtype in FLOAT_DTYPES else torch.int64).numpy()
            src = src_cpu.to(device)
            label = f"scatter {name} {kind} F={width}"
            for reduce in REDUCES:
                want, n, magnitude = _oracle(src_np, index_np, nodes, reduce, dtype)
                # torch_scatter rounds an integer mean per form: segment_coo toward zero
                rounds_apart = reduce == "mean" and dtype not in FLOAT_DTYPES
                want_coo = (_oracle(src_np, index_np, nodes, reduce, dtype, True)[0]
                            if rounds_apart else want)

                def sorted_and_shuffled(reduce=reduce, want=want, want_coo=want_coo, n=n,
                                        magnitude=magnitude, rounds_apart=rounds_apart):
                    here = f"{label} {reduce}"
                    got = _twice(lambda: tritonml.segment_coo(src, index, dim_size=nodes,
                                                              reduce=reduce))
                    _assert_close(got, want_coo, n, magnitude, reduce, dtype,
                                  f"{here} segment_coo")
                    shuffled = _twice(lambda: tritonml.scatter(
                        src[keep], index[keep], dim=0, dim_size=nodes, reduce=reduce))
                    _assert_close(shuffled, want, n, magnitude, reduce, dtype,
                                  f"{here} scatter")
                    if not rounds_apart:
                        _same_bits(got, shuffled)
                _run_case(f"{label} {reduce}", sorted_and_shuffled, failures, counts, "scatter")

            def with_positions():
                values, positions = _twice(lambda: tritonml.scatter_max(
                    src[keep], index[keep], dim=0, dim_size=nodes))
                want, n, magnitude = _oracle(src_np, index_np, nodes, "max", dtype)
                _assert_close(values, want, n, magnitude, "max", dtype, f"{label} scatter_max")
                # the first position (in the shuffled src) holding each group's maximum
                shuffled_src, shuffled_index = src_np[keep], index_np[keep]
                got = positions.cpu().numpy()
                for group in np.unique(shuffled_index)[:64]:
                    at = np.flatnonzero(shuffled_index == group)
                    picked = at[np.argmax(shuffled_src[at] == want[group], axis=0)]
                    if not np.array_equal(got[group], picked):
                        raise AssertionError(f"{label} scatter_max: group {group}'s positions "
                                             f"{got[group]}, want {picked}")
                empty = n == 0
                if empty.any() and not (got[empty] == edges).all():
                    raise AssertionError(f"{label} scatter_max: an empty group's position is "
                                         f"not {edges}")
            _run_case(f"{label} scatter_max", with_positions, failures, counts, "scatter")

            def index_add():
                base_cpu = _values(rng, (nodes, width), dtype)
                base = base_cpu.to(device)
                got = _twice(lambda: tritonml.index_add(base, 0, index[keep], src[keep]))
                sums, n, magnitude = _oracle(src_np, index_np, nodes, "sum", dtype)
                wide = np.float64 if dtype in FLOAT_DTYPES else np.int64
                start = base_cpu.to(torch.float64 if dtype in FLOAT_DTYPES
                                    else torch.int64).numpy().astype(wide)
                _assert_close(got, start + sums, n + 1, magnitude + np.abs(start), "sum", dtype,
                              f"{label} index_add")
            _run_case(f"{label} index_add", index_add, failures, counts, "scatter")

        def general_index():
            # an index that differs across the features: one key per element
            width = widths[-1]
            src_cpu = _values(rng, (edges, width), dtype)
            keys_np = np.minimum((nodes * rng.random((edges, width)) ** 2).astype(np.int64),
                                 nodes - 1)
            src_np = src_cpu.to(torch.float64 if dtype in FLOAT_DTYPES else torch.int64).numpy()
            base = torch.zeros(nodes, width, dtype=dtype, device=device)
            for reduce, torch_name in (("sum", "sum"), ("max", "amax")):
                got = _twice(lambda: tritonml.scatter_reduce(
                    base, 0, torch.from_numpy(keys_np).to(device), src_cpu.to(device),
                    torch_name, include_self=False))
                want = np.zeros((nodes, width), dtype=np.float64 if dtype in FLOAT_DTYPES
                                else np.int64)
                n = np.zeros((nodes, width), dtype=np.int64)
                magnitude = np.zeros((nodes, width))
                for column in range(width):
                    w, c, m = _oracle(src_np[:, column], keys_np[:, column], nodes, reduce,
                                      dtype)
                    want[:, column], n[:, column], magnitude[:, column] = w, c, m
                # torch's scatter_reduce keeps input (0 here) where a group is empty
                _assert_close(got, want, n.max(axis=1), magnitude, reduce, dtype,
                              f"scatter_reduce {name} {reduce} general index")
        _run_case(f"scatter_reduce {name} {kind}", general_index, failures, counts, "scatter")

    def weighted_bincount():
        ids_np = _index(rng, edges, nodes, "power law")
        ids = torch.from_numpy(ids_np).to(device)
        if dtype in FLOAT_DTYPES:
            weights_cpu = _values(rng, (edges,), dtype)
            got = _twice(lambda: tritonml.bincount(ids, weights=weights_cpu.to(device)))
            w64 = weights_cpu.to(torch.float64).numpy()
            want = np.bincount(ids_np, weights=w64, minlength=nodes)[:got.shape[0]]
            n = np.bincount(ids_np, minlength=nodes)[:got.shape[0]]
            magnitude = np.bincount(ids_np, weights=np.abs(w64), minlength=nodes)[:got.shape[0]]
            # float32 weights give float32, others float64 (torch's rule): as the result's dtype
            _assert_close(got, want, n, magnitude, "sum", got.dtype, f"bincount {name}")
        else:
            got = _twice(lambda: tritonml.bincount(ids))
            want = np.bincount(ids_np)
            if not np.array_equal(got.cpu().numpy(), want):
                raise AssertionError(f"bincount {name}: counts differ")
    _run_case(f"bincount {name}", weighted_bincount, failures, counts, "scatter")
