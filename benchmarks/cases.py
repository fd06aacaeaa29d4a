"""The benchmark cases, as data, and how each becomes a runnable closure.

The suite of ``tritonml bench`` lives in the package (``tritonml/bench/cases.py``); these are the
small forced-config cases of ``python -m benchmarks.report`` and ``gpu_timing``, which share its
``make_input`` and ``assert_close``. A case names a regime, a shape, the axis (or axes) and a config; ``prepare`` allocates everything
up front and returns a ``Prepared`` whose ``run`` only launches the op, so allocation stays outside
any timed or traced region. ``Prepared.check`` compares the result with a float64 torch reference,
within ``rtol`` of ``tritonml.bench.tolerances.TOLERANCES`` (the one accuracy table, which the tests
read too).

Shapes are chosen so Triton's interpreter runs each case in a few seconds: the interpreter costs
several milliseconds per program per loop iteration.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

import tritonml  # noqa: F401  (first: chooses compiled or interpreted Triton)
from tritonml_autotune.configs import ScanConfig
from tritonml.launchers.scan import PRODUCT, SUM, cumulative_scan

from tritonml.bench.cases import assert_close, make_input, nbytes  # noqa: F401  (one copy)

DTYPES = (torch.float32, torch.float16, torch.int32)


# ---------------------------------------------------------------------------------------------
# Scans
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ScanCase:
    """One scan benchmark.

    regime: the regime the shape stands for ("rows", "columns", "lookback").
    config: the config to force; None means "what the heuristics pick for CUDA"
        (``tritonml_autotune.heuristics.scan_config(layout, "cuda")``), resolved by ``prepare``.
    """
    regime: str
    shape: tuple
    axis: int
    config: Optional[ScanConfig]
    combine: str = "sum"

    @property
    def label(self) -> str:
        return "forced" if self.config is not None else "cuda heuristic"


# 2**18 elements each: the configs the heuristics choose for CUDA aim at hundreds of programs
# (enough to fill a GPU), and the interpreter runs programs one by one at several milliseconds each.
# Forced configs use GPU-sized tiles (4096 elements at 8 warps), so their compiled-code facts mean
# something: rows and columns walk several tiles per program, the look-back splits one row over 64
# programs.
SCAN_SHAPES = {
    "rows": ((128, 2048), 1, ScanConfig("rows", 1024, 4, num_warps=8)),
    "columns": ((1024, 256), 0, ScanConfig("columns", 32, 128, num_warps=8)),
    "lookback": ((1, 2 ** 18), 1, ScanConfig("lookback", 4096, 1, num_warps=8)),
}

SCAN_CASES = tuple(
    ScanCase(regime, shape, axis, config)
    for regime, (shape, axis, forced) in SCAN_SHAPES.items()
    for config in (forced, None)
)


def cuda_scan_config(x: torch.Tensor, out: torch.Tensor, axis: int) -> ScanConfig:
    """The config the heuristics choose for this scan on a CUDA device (no GPU needed)."""
    from tritonml.core.dtypes import ACC_TORCH_DTYPE
    from tritonml.core.layout import axis_layout
    from tritonml_autotune.heuristics import scan_config

    layout = axis_layout(tuple(x.shape), x.stride(), out.stride(), axis)
    # The launcher sizes tiles by the accumulator (float64 for float32 input, float32 for half).
    acc_bytes = ACC_TORCH_DTYPE[x.dtype].itemsize
    return scan_config(layout, "cuda", None, acc_bytes)


# ---------------------------------------------------------------------------------------------
# Reductions (tritonml.reduce). Entries are data: the regime the case stands for, shape,
# reduced axes (None: all), function, an optional forced config (keyword arguments of
# tritonml_autotune.configs.ReduceConfig) and the dtypes it runs for (None: DTYPES).
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ReduceCase:
    regime: str
    shape: tuple
    axes: Optional[tuple]
    function: str = "sum"
    config: Optional[dict] = None
    dtypes: Optional[tuple] = None

    @property
    def label(self) -> str:
        return "forced" if self.config is not None else "cuda heuristic"


# 2**18 elements each, as for scans. Forced configs use GPU-sized tiles (4096 elements at 8 warps,
# autotune/spaces.py); the forced split spreads one output over 16 programs of 4 tiles each. The
# unforced twins run what the heuristics choose for CUDA.
REDUCE_CASES = (
    ReduceCase("rows", (64, 4096), (1,), "sum",
               dict(regime="rows", block_axis=1024, block_inner=4, num_warps=8)),
    ReduceCase("rows", (64, 4096), (1,), "sum"),
    ReduceCase("columns", (4096, 64), (0,), "sum",
               dict(regime="columns", block_axis=64, block_inner=64, num_warps=8)),
    ReduceCase("columns", (4096, 64), (0,), "sum"),
    ReduceCase("split", (2 ** 18,), None, "sum",
               dict(regime="split", block_axis=4096, block_inner=1, num_warps=8, splits=16,
                    block_split=16)),
    ReduceCase("split", (2 ** 18,), None, "sum"),
    ReduceCase("rows", (64, 4096), (1,), "argmax", dtypes=(torch.float32,)),
    ReduceCase("axes apart", (64, 64, 64), (0, 2), "sum", dtypes=(torch.float32,)),
)

# torch twins of the reduce functions the cases use: (reference in float64/int64, torch op to time).
_TORCH_REDUCE = {
    "sum": lambda x, dims: x.sum(dim=dims, keepdim=True),
    "argmax": lambda x, dims: x.argmax(dim=dims[0], keepdim=True),  # one axis only
}


def cuda_reduce_config(x: torch.Tensor, out: torch.Tensor, axes: tuple, returns_index: bool):
    """The config the heuristics choose for this reduction on a CUDA device (no GPU needed)."""
    from tritonml.core.layout import reduce_layout
    from tritonml_autotune.heuristics import reduce_config

    layout = reduce_layout(tuple(x.shape), x.stride(), out.stride(), axes, returns_index)
    return reduce_config(layout, "cuda")


# ---------------------------------------------------------------------------------------------
# Preparing a case
# ---------------------------------------------------------------------------------------------
@dataclass
class Prepared:
    """A case ready to run: ``run()`` launches the op into preallocated ``out`` and nothing else."""
    name: str
    run: Callable[[], torch.Tensor]
    check: Callable[[], None]
    regions: dict                 # {"input": x, "output": out}, for memtrace
    ideal_bytes: int              # input read once + output written once, from shapes and dtypes
    config: object = None         # the config actually launched (None: the launcher's own choice)
    extra: dict = field(default_factory=dict)


def prepare_scan(case: ScanCase, dtype: torch.dtype, device="cpu",
                 resolve_cuda_heuristic: bool = True) -> Prepared:
    """Allocate input and output for ``case``.

    resolve_cuda_heuristic: for a case without a forced config, launch the config the heuristics
        choose for CUDA (what the report shows, even in the interpreter); False leaves the choice
        to the launcher (what a user gets on this device: used when timing on a real GPU).
    """
    combine = {"sum": SUM, "product": PRODUCT}[case.combine]
    x = make_input(case.shape, dtype, case.shape[case.axis], device)
    out = torch.empty_like(x)
    config = case.config
    if config is None and resolve_cuda_heuristic:
        config = cuda_scan_config(x, out, case.axis)

    def run():
        return cumulative_scan(x, case.axis, combine, out=out, config=config)

    def check():
        torch_op = torch.cumsum if case.combine == "sum" else torch.cumprod
        wide = torch.float64 if dtype.is_floating_point else torch.int64
        reference = torch_op(x.to(wide), case.axis)
        if not dtype.is_floating_point:  # integers wrap modulo 2**bits, as tritonml's do
            reference = reference.to(dtype).to(torch.int64)
        assert_close(out, reference, dtype, f"{case.combine} scan {case.shape} axis {case.axis}")

    ideal = nbytes(case.shape, dtype) * 2  # read x once, write out once
    name = f"scan {case.regime} {'x'.join(map(str, case.shape))} axis {case.axis} {case.label}"
    return Prepared(name, run, check, {"input": x, "output": out}, ideal, config,
                    {"torch_op": (torch.cumsum if case.combine == "sum" else torch.cumprod),
                     "x": x, "axis": case.axis})


def prepare_reduce(case: ReduceCase, dtype: torch.dtype, device="cpu",
                   resolve_cuda_heuristic: bool = True) -> Optional[Prepared]:
    """Allocate input and output for a reduce ``case``; None when ``case.dtypes`` excludes
    ``dtype``. ``resolve_cuda_heuristic`` as for ``prepare_scan``."""
    from tritonml_autotune.configs import ReduceConfig
    from tritonml.launchers.reduce import ReduceFunction, reduce_axes
    from tritonml.records.builtin_reductions import RECORDS

    if case.dtypes is not None and dtype not in case.dtypes:
        return None
    rank = len(case.shape)
    axes = tuple(range(rank)) if case.axes is None else tuple(a % rank for a in case.axes)
    combine = RECORDS[ReduceFunction[case.function.upper()]]
    red_len = math.prod(case.shape[a] for a in axes)
    x = make_input(case.shape, dtype, red_len, device)
    out_shape = tuple(1 if i in axes else size for i, size in enumerate(case.shape))
    out_dtype = torch.int64 if case.function.startswith("arg") else dtype
    out = torch.empty(out_shape, dtype=out_dtype, device=device)
    config = ReduceConfig(**case.config) if case.config is not None else None
    if config is None and resolve_cuda_heuristic:
        config = cuda_reduce_config(x, out, axes, case.function.startswith("arg"))
    torch_reduce = _TORCH_REDUCE[case.function]

    def run():
        return reduce_axes(x, case.axes, combine, keepdims=True, out=out, config=config)

    def check():
        wide = torch.float64 if dtype.is_floating_point else torch.int64
        reference = torch_reduce(x.to(wide), axes)
        if case.function.startswith("arg"):
            if not torch.equal(out, reference):
                raise AssertionError(f"{case.function} {case.shape} axes {axes}: indices differ")
            return
        if not dtype.is_floating_point:  # integers wrap modulo 2**bits, as tritonml's do
            reference = reference.to(dtype).to(torch.int64)
        assert_close(out, reference, dtype, f"reduce {case.function} {case.shape} axes {axes}")

    torch_out = torch.empty_like(out)
    torch_fns = {"sum": lambda: torch.sum(x, dim=axes, keepdim=True, out=torch_out),
                 "argmax": lambda: torch.argmax(x, dim=axes[0], keepdim=True, out=torch_out)}
    # read x once, write the (keepdims) output once
    ideal = nbytes(case.shape, dtype) + nbytes(out_shape, out_dtype)
    axes_text = "all" if case.axes is None else ",".join(map(str, case.axes))
    name = f"reduce {case.function} {case.regime} {'x'.join(map(str, case.shape))} axes {axes_text}"
    return Prepared(name, run, check, {"input": x, "output": out}, ideal, config,
                    {"torch_run": torch_fns[case.function], "axes": axes,
                     "regime": config.regime if config is not None else None})
