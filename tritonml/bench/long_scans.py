"""The long scans the chunked regime is for, as the cost model sees them at full size.

Few independent scans over a long axis: one row of 2**20 to 2**26 float32, a few long rows, a 1-D
tensor, a strided axis with too few chains for the SMs, and a linear recurrence (a tuple scan of
two float32 inputs). ``modeled(scan, device)`` is the tuner's choice for it (``select.modeled``,
the cost model's, as when nothing can be timed) with its modeled seconds and bytes, beside the
fastest look-back candidate's (the regime these scans took before, bound by its chain of tiles).
``table(device)`` is the markdown table docs/performance.md shows ("Long scans");
``python -m benchmarks.doc_table`` writes it and tests/autotune/test_chunked_model.py checks that the doc and
the code agree and that every choice meets the targets. Everything here is modeled, nothing timed.
It lives with tritonml, not the tuner: it builds its problems from tritonml's layouts and dtypes.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from tritonml_autotune import cost, devices, select

from ..core.dtypes import ACC_TORCH_DTYPE
from ..core.layout import axis_layout

# Targets for the tuner's choice: modeled time within TIME_TARGET of one ideal launch
# (``cost.model_ideal_seconds``), DRAM bytes within BYTES_TARGET of the ideal bytes (input read
# once, output written once); reads from L2 alone are counted apart, not in the DRAM bytes.
TIME_TARGET = 1.25
BYTES_TARGET = 1.05


@dataclass(frozen=True)
class LongScan:
    label: str
    shape: tuple
    axis: int
    inputs: int = 1      # tensors scanned together: 2 for a linear recurrence (gates, tokens)


SCANS = (
    LongScan("cumulative_sum, one row of 2**20", (1, 1 << 20), 1),
    LongScan("cumulative_sum, one row of 2**24", (1, 1 << 24), 1),
    LongScan("cumulative_sum, one row of 2**26", (1, 1 << 26), 1),
    LongScan("cumulative_sum (8, 2**22) along axis 1", (8, 1 << 22), 1),
    LongScan("cumulative_sum (2**24,) along axis 0", (1 << 24,), 0),
    LongScan("cumulative_sum (4096, 16384) along axis 0", (4096, 16384), 0),
    LongScan("linear_recurrence (4, 2**20) along axis 1", (4, 1 << 20), 1, inputs=2),
)
DTYPE = torch.float32


def _strides(shape: tuple) -> tuple:
    return torch.empty(shape, device="meta").stride()


def plan(scan: LongScan, device: str | devices.Device) -> select.Plan:
    """The plan ``select.choose_scan`` makes for ``scan`` (contiguous float32 inputs) on
    ``device``. A linear recurrence's plan is its tuple scan's: the bytes per element of its
    inputs and of its accumulators summed (as ``tritonml.launchers.scan.associative_scan_states``
    passes them)."""
    strides = _strides(scan.shape)
    layout = axis_layout(scan.shape, strides, strides, scan.axis)
    element_bytes = None
    combine = "sum"
    if scan.inputs > 1:
        element_bytes = (scan.inputs * DTYPE.itemsize,
                         scan.inputs * ACC_TORCH_DTYPE[DTYPE].itemsize)
        combine = "compose_affine"   # the key's function field only; the model does not read it
    with devices.targeting(device):
        return select.plan_scan(layout, DTYPE, None, combine, element_bytes)


@dataclass(frozen=True)
class Modeled:
    scan: LongScan
    config: dict             # the tuner's choice
    estimate: cost.Estimate
    ideal_seconds: float
    ideal_bytes: int
    lookback: dict | None    # the fastest look-back candidate, None where there is none
    lookback_estimate: cost.Estimate | None

    @property
    def time_ratio(self) -> float:
        return self.estimate.seconds / self.ideal_seconds

    @property
    def bytes_ratio(self) -> float:
        """DRAM bytes over the ideal bytes (L2 re-reads not included)."""
        return self.estimate.bytes_moved / self.ideal_bytes

    @property
    def l2_ratio(self) -> float:
        """Bytes read from L2 alone over the ideal bytes."""
        return self.estimate.l2_bytes / self.ideal_bytes


def modeled(scan: LongScan, device: str | devices.Device = "H100") -> Modeled:
    the_plan = plan(scan, device)
    config = select.fields(select.modeled(the_plan).config)
    problem, gpu = the_plan.problem, the_plan.gpu
    lookbacks = [(cost.estimate(problem, c, gpu), c) for c in the_plan.candidates
                 if c["regime"] == "lookback"]
    best = min(lookbacks, key=lambda pair: pair[0].seconds, default=(None, None))
    return Modeled(scan, config, cost.estimate(problem, config, gpu),
                   cost.model_ideal_seconds(problem, gpu), problem.ideal_bytes, best[1], best[0])


def _config_text(fields: dict) -> str:
    text = (f"{fields['regime']} {fields['block_axis']}x{fields['block_inner']}"
            f" w{fields['num_warps']}")
    if fields["regime"] == "chunked":
        tiles = fields["chunk_tiles"]
        text += f", chunks of {tiles} tile{'s' if tiles > 1 else ''}, window {fields['window']}"
    return text


def table(device: str = "H100") -> str:
    """The markdown table of docs/performance.md's "Long scans" section for ``device``."""
    header = ("scan (float32)", "chosen config", "programs", "modeled us (ideal)",
              "time / ideal", "DRAM bytes / ideal", "L2-only reads / ideal",
              "best look-back", "look-back us", "look-back / ideal")
    lines = ["| " + " | ".join(header) + " |",
             "|---|---|---:|---:|---:|---:|---:|---|---:|---:|"]
    for scan in SCANS:
        m = modeled(scan, device)
        if m.lookback is None:
            lookback = ("none", "-", "-")
        else:
            seconds = m.lookback_estimate.seconds
            lookback = (_config_text(m.lookback), f"{seconds * 1e6:.1f}",
                        f"{seconds / m.ideal_seconds:.2f}x")
        lines.append("| " + " | ".join((
            scan.label, _config_text(m.config), str(m.estimate.first_programs),
            f"{m.estimate.seconds * 1e6:.1f} ({m.ideal_seconds * 1e6:.1f})",
            f"{m.time_ratio:.3f}x", f"{m.bytes_ratio:.4f}x", f"{m.l2_ratio:.3f}x",
            *lookback)) + " |")
    return "\n".join(lines)
