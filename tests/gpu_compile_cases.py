"""The kernel specializations the scan launcher can choose on a GPU, as recorded launches.

Used by tests/kernels/test_gpu_compile.py: for every regime x dtype x direction x exclusive, the config
the CUDA heuristics pick for a large shape of that regime, recorded without running
(``tritonml.runtime.trace.record(execute=False)``) and described for
``tritonml.bench.gpu_compile.compile_in_subprocess``.
"""
from __future__ import annotations


import itertools

import torch

from tritonml.core import layout as _layout
from tritonml.runtime import trace as _trace
from tritonml.core.dtypes import ACC_TORCH_DTYPE, SUPPORTED_DTYPES
from tritonml.launchers.scan import PRODUCT, SUM, cumulative_scan
from tritonml_autotune.configs import ReduceConfig, ScanConfig
from tritonml_autotune import compiled, spaces
from tritonml_autotune.heuristics import scan_config, widest_window
from tritonml.bench.gpu_compile import describe

# (regime, shape, axis): large shapes for which the CUDA heuristics pick that regime (the look-back:
# few long scans, which the heuristics now run chunked; see ``regime_config``).
SCAN_REGIME_SHAPES = {
    "rows": ((4096, 4096), 1),
    "columns": ((512, 64, 2048), 1),
    "lookback": ((4, 1 << 20), 1),
}
# Configs only the tuner's candidates reach (autotune/candidates.py), not the heuristics': the
# taller look-back tile (spaces.LOOKBACK_TALL_BLOCK_AXIS).
TUNER_SCAN_CASES = {
    "lookback tall": (((4, 1 << 20), 1),
                      ScanConfig("lookback", spaces.LOOKBACK_TALL_BLOCK_AXIS, 1,
                                 compiled.scan_warps(spaces.LOOKBACK_TALL_BLOCK_AXIS))),
}


def regime_config(regime, layout, acc_bytes) -> ScanConfig:
    """The CUDA heuristics' config for ``layout``, which must be of ``regime``; for "lookback",
    which only the tuner's candidates reach now (the heuristics take "chunked" for few long
    scans), the look-back at the heuristics' tile."""
    config = scan_config(layout, "cuda", acc_bytes=acc_bytes)
    if regime == "lookback" and config.regime == "chunked":
        config = ScanConfig("lookback", config.block_axis, config.block_inner, config.num_warps)
    assert config.regime == regime, (regime, config)
    return config


# The dtypes whose HAS_INITIAL=True specializations are compiled too (``initial_scan_launches``).
INITIAL_DTYPES = (torch.float32, torch.int32)


def scan_launches(dtypes=SUPPORTED_DTYPES, regimes=(*SCAN_REGIME_SHAPES, *TUNER_SCAN_CASES),
                  directions=(False, True), exclusives=(False, True), combine=SUM, initial=False,
                  carry=False):
    """Describe the launch of every (regime, dtype, reverse, exclusive) the GPU heuristics choose;
    ``initial``: with an ``initial=`` carry-in (the kernels' HAS_INITIAL specializations);
    ``carry``: with ``return_carry=True`` (STORE_CARRY)."""
    descriptions = []
    for regime, dtype, reverse, exclusive in itertools.product(regimes, dtypes, directions, exclusives):
        if regime in TUNER_SCAN_CASES:
            (shape, axis), config = TUNER_SCAN_CASES[regime]
        else:
            shape, axis = SCAN_REGIME_SHAPES[regime]
        x = torch.empty(shape, dtype=dtype)  # never touched: the launch is only recorded
        layout = _layout.axis_layout(shape, x.stride(), x.stride(), axis)
        acc_bytes = ACC_TORCH_DTYPE[dtype].itemsize
        if regime not in TUNER_SCAN_CASES:
            config = regime_config(regime, layout, acc_bytes)
        init = torch.empty(shape[:axis] + shape[axis + 1:], dtype=dtype) if initial else None
        with _trace.record(execute=False) as rec:
            cumulative_scan(x, axis, combine, reverse=reverse, exclusive=exclusive, initial=init,
                            config=config, return_carry=carry)
        for launch in rec.launches:
            desc = describe(launch)
            desc["case"] = dict(regime=regime, dtype=str(dtype).replace("torch.", ""),
                                reverse=reverse, exclusive=exclusive, combine=combine.name,
                                initial=initial, carry=carry)
            descriptions.append(desc)
    return descriptions


def initial_scan_launches():
    """Every regime's HAS_INITIAL=True launches, for ``INITIAL_DTYPES``."""
    return scan_launches(dtypes=INITIAL_DTYPES, initial=True)


def carry_scan_launches():
    """Every regime's STORE_CARRY=True launches (``return_carry=True``, chunked scans), with an
    ``initial=`` as a chunk after the first has, for ``INITIAL_DTYPES``."""
    return scan_launches(dtypes=INITIAL_DTYPES, exclusives=(False,), initial=True, carry=True)


# ---------------------------------------------------------------------------------------------
# Tuple-state scans (tritonml.associative_scan): arity 2 and 4, with and without an identity, in
# every regime. Their combine functions live here so the compiling process finds them by import
# (as tests.gpu_compile_cases: its path starts at the repository root).
# ---------------------------------------------------------------------------------------------
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


@triton.jit
def linear_recurrence(a, b):
    """(gate, token): h = gate * h_prev + token, composed."""
    return (a[0] * b[0], b[0] * a[1] + b[1])


@triton.jit
def matrix_product(a, b):
    """Row-major 2x2 matrices, a @ b (not commutative)."""
    return (a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
            a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3])


# (name, combine, dtypes, identity)
TUPLE_SCAN_STATES = (
    ("linear float32", linear_recurrence, (torch.float32, torch.float32), (1.0, 0.0)),
    ("linear float32 flagged", linear_recurrence, (torch.float32, torch.float32), None),
    ("matrix float32", matrix_product, (torch.float32,) * 4, (1.0, 0.0, 0.0, 1.0)),
)


def tuple_scan_launches(regimes=(*SCAN_REGIME_SHAPES,), directions=(False, True)):
    """Describe every (state, regime, reverse) tuple-state launch, inclusive, plus the exclusive
    ones where an identity is given; configs as the CUDA heuristics pick them for float32."""
    from tritonml.launchers.scan import associative_scan_states

    descriptions = []
    for (name, combine, dtypes, identity), regime, reverse in itertools.product(
            TUPLE_SCAN_STATES, regimes, directions):
        shape, axis = SCAN_REGIME_SHAPES[regime]
        xs = tuple(torch.empty(shape, dtype=dtype) for dtype in dtypes)
        layout = _layout.axis_layout(shape, xs[0].stride(), xs[0].stride(), axis)
        acc_bytes = sum(ACC_TORCH_DTYPE[d].itemsize for d in dtypes)
        config = scan_config(layout, "cuda", acc_bytes=acc_bytes)
        if config.regime != regime:  # a larger state makes shorter tiles: keep the regime asked
            config = ScanConfig(regime, config.block_axis, config.block_inner, config.num_warps)
        for exclusive in ((False, True) if identity is not None else (False,)):
            with _trace.record(execute=False) as rec:
                associative_scan_states(combine, xs, axis, reverse=reverse, exclusive=exclusive,
                                        identity=identity, config=config)
            for launch in rec.launches:
                desc = describe(launch)
                desc["case"] = dict(state=name, regime=regime, reverse=reverse,
                                    exclusive=exclusive, arity=len(dtypes))
                descriptions.append(desc)
    return descriptions


# ---------------------------------------------------------------------------------------------
# Chunked scans (scan_chunked_kernel): the tiles the tuner's candidates choose (autotune/
# candidates.py, ``_chunked_tiles``): along a contiguous axis one lane, the element budget of the
# state's accumulators (1024 or 2048 rows) and the tall 4096; along a strided one 32, 64 and 128
# lanes, as tall as the budget allows. Warps by tile size (``compiled.scan_warps``), and the
# largest window the tile allows (``heuristics.widest_window``): the window's accumulators grow
# registers.
# ---------------------------------------------------------------------------------------------
# name: ((shape, axis), block_axis or None for the budget's, block_inner)
CHUNKED_TILES = {
    "chunked rows": (((4, 1 << 20), 1), None, 1),
    "chunked rows tall": (((4, 1 << 20), 1), spaces.LOOKBACK_TALL_BLOCK_AXIS, 1),
    "chunked columns": (((1 << 16, 64), 0), None, 64),
    "chunked columns narrow": (((1 << 16, 64), 0), None, 32),
    "chunked columns wide": (((1 << 16, 128), 0), None, 128),
}
# the dtypes that stand for each class of register use (compiled.DTYPE_CLASSES)
CHUNKED_DTYPES = tuple(getattr(torch, name) for name in compiled.DTYPE_CLASSES)



def chunked_config(tile: str, acc_bytes: int) -> tuple:
    """((shape, axis), config) of the chunked tile named ``tile`` for a state of ``acc_bytes``
    accumulator bytes per element."""
    (shape, axis), block_axis, block_inner = CHUNKED_TILES[tile]
    if block_axis is None:
        budget = spaces.GPU_SCAN.tile_budget(acc_bytes)
        block_axis = min(spaces.GPU_SCAN.rows_max_block_axis, max(1, budget // block_inner))
    warps = compiled.scan_warps(block_axis * block_inner)
    return (shape, axis), ScanConfig("chunked", block_axis, block_inner, warps, chunk_tiles=16,
                                     window=widest_window(block_inner, acc_bytes))


def chunked_scan_launches(tiles=("chunked rows", "chunked columns"), dtypes=CHUNKED_DTYPES,
                          directions=(False, True), exclusives=(False, True), combine=SUM,
                          initial=False, carry=False):
    """Describe the chunked launch of every (tile, dtype, reverse, exclusive); ``initial``
    (HAS_INITIAL) and ``carry`` (STORE_CARRY) as ``scan_launches``'."""
    descriptions = []
    for tile, dtype, reverse, exclusive in itertools.product(tiles, dtypes, directions,
                                                             exclusives):
        (shape, axis), config = chunked_config(tile, ACC_TORCH_DTYPE[dtype].itemsize)
        x = torch.empty(shape, dtype=dtype)  # never touched: the launch is only recorded
        init = torch.empty(shape[:axis] + shape[axis + 1:], dtype=dtype) if initial else None
        with _trace.record(execute=False) as rec:
            cumulative_scan(x, axis, combine, reverse=reverse, exclusive=exclusive, initial=init,
                            config=config, return_carry=carry)
        (launch,) = rec.launches
        desc = describe(launch)
        desc["case"] = dict(regime=tile, dtype=str(dtype).replace("torch.", ""), reverse=reverse,
                            exclusive=exclusive, combine=combine.name, initial=initial,
                            carry=carry, contiguous=config.block_inner == 1,
                            commutative=launch.meta["COMMUTATIVE"])
        descriptions.append(desc)
    return descriptions


def chunked_tuple_launches(tiles=("chunked rows", "chunked columns narrow"),
                           directions=(False, True)):
    """Every tuple state of ``TUPLE_SCAN_STATES`` in chunks, inclusive (and exclusive where an
    identity is given), in the tile the state's budget allows."""
    from tritonml.launchers.scan import associative_scan_states

    descriptions = []
    for (name, combine, dtypes, identity), tile, reverse in itertools.product(
            TUPLE_SCAN_STATES, tiles, directions):
        acc_bytes = sum(ACC_TORCH_DTYPE[d].itemsize for d in dtypes)
        (shape, axis), config = chunked_config(tile, acc_bytes)
        xs = tuple(torch.empty(shape, dtype=dtype) for dtype in dtypes)
        for exclusive in ((False, True) if identity is not None else (False,)):
            with _trace.record(execute=False) as rec:
                associative_scan_states(combine, xs, axis, reverse=reverse, exclusive=exclusive,
                                        identity=identity, config=config)
            (launch,) = rec.launches
            desc = describe(launch)
            desc["case"] = dict(state=name, regime=tile, reverse=reverse, exclusive=exclusive,
                                arity=len(dtypes), dtype="float32",
                                contiguous=config.block_inner == 1,
                                commutative=launch.meta["COMMUTATIVE"])
            descriptions.append(desc)
    return descriptions


def all_chunked_launches():
    """Every chunked specialization tests/kernels/test_gpu_compile.py compiles: sum in every dtype class,
    both directions, inclusive and exclusive, for a row and a column tile; the other tiles
    forward inclusive and reverse exclusive; initial= with return_carry=True; products; tuple
    states."""
    other_tiles = ("chunked rows tall", "chunked columns narrow", "chunked columns wide")
    return (chunked_scan_launches()
            + chunked_scan_launches(other_tiles, directions=(False,), exclusives=(False,))
            + chunked_scan_launches(other_tiles, directions=(True,), exclusives=(True,))
            + chunked_scan_launches(dtypes=INITIAL_DTYPES, exclusives=(False,), initial=True,
                                    carry=True)
            + chunked_scan_launches(directions=(False,), exclusives=(False,), combine=PRODUCT)
            + chunked_tuple_launches())


# ---------------------------------------------------------------------------------------------
# User-defined reductions (tritonml.reduce_with): Welford's (n, mean, M2) tuple state, two outputs
# ---------------------------------------------------------------------------------------------
# (regime, shape, axes): large shapes for which the CUDA heuristics pick that regime.
WELFORD_REGIME_SHAPES = {
    "rows": ((4096, 4096), (1,)),
    "columns": ((512, 64, 2048), (1,)),
    "split": ((1 << 22,), (0,)),
}
WELFORD_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


# the scatter ops' index checks (tritonml/torch_ops/scatter.py): an index and the index one step
# on, reduced whole (the split regime, whatever the index's rank)
INDEX_FACTS_REGIME_SHAPES = {
    "split": ((1 << 22,), None),
}
INDEX_FACTS_DTYPES = (torch.int64, torch.int32)


def _neighbours(x):
    return (x, x)


def welford_reduce_launches(dtypes=WELFORD_DTYPES, regimes=tuple(WELFORD_REGIME_SHAPES), *,
                            reduction_name="welford", shapes=WELFORD_REGIME_SHAPES,
                            inputs=lambda x: x):
    """Describe the launches of ``reduce_with(tritonml.records.ready_reductions.<reduction_name>,
    inputs(x), ...)`` (Welford's by default) with the config the launcher picks from the CUDA
    heuristics (its tile fitted to the state, ``fit_tile_to_state``), for every regime x dtype."""
    from unittest import mock

    import tritonml_autotune.heuristics as heuristics
    from tritonml import runtime
    from tritonml.torch_ops.reduce_with import reduce_with
    from tritonml.records import ready_reductions

    welford = getattr(ready_reductions, reduction_name)

    pick = heuristics.reduce_config
    chosen = []

    def pick_for_cuda(layout, device_type, device=None):
        chosen.append(pick(layout, "cuda"))
        return chosen[-1]

    descriptions = []
    with mock.patch.object(heuristics, "reduce_config", pick_for_cuda):
        for regime, dtype in itertools.product(regimes, dtypes):
            shape, axes = shapes[regime]
            x = inputs(torch.empty(shape, dtype=dtype))  # never touched: only recorded
            runtime.clear()  # a remembered plan would not ask the patched heuristics again
            with _trace.record(execute=False) as rec:
                reduce_with(welford, x, axes)
            if chosen[-1].regime == "split":
                # and its two-launch twin, at the tile the launcher fitted to the state
                meta, grid = rec.launches[0].meta, rec.launches[0].grid
                twin = ReduceConfig("split", meta["BLOCK_AXIS"], meta["BLOCK_INNER"],
                                    meta["num_warps"], grid[1], meta["BLOCK_SPLIT"],
                                    one_launch=False)
                with _trace.record(execute=False) as twin_rec:
                    reduce_with(welford, x, axes, config=twin)
                rec.launches.extend(twin_rec.launches)
            runtime.clear()
            assert chosen[-1].regime == regime, (regime, chosen[-1])
            for launch in rec.launches:
                desc = describe(launch)
                desc["case"] = dict(regime=regime, dtype=str(dtype).replace("torch.", ""),
                                    function=reduction_name)
                descriptions.append(desc)
    return descriptions
