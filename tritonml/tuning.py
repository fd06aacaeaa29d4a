"""Choose configs as for a named GPU: ``with tritonml.tuning.target("H100"): ...``.

Inside the block (or with ``TRITONML_TARGET=H100`` in the environment) tritonml's launchers pick
their regime and tile as the heuristics would on that GPU, whatever device the tensors are on; the
kernels still run where the tensors are. On CPU tensors, Triton's interpreter then runs the launches
an H100 would, so their configs, grids and bytes moved can be checked without a GPU.

The block is per thread and nests (the innermost wins; ``target(None)`` turns a target off inside
it). It overrides the environment variable, which is read at every config choice. An unknown name
raises ValueError listing the known targets (``targets()``). See docs/tuning.md.

``set_timing(False)`` / ``with timing(False): ...`` turn the timing of candidate configs on a GPU
off (on with True; None follows ``TRITONML_AUTOTUNE``); ``forget()`` drops the configs chosen so
far in this process.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import (TYPE_CHECKING, Any, Callable, ContextManager, Dict, Final, Iterator, List,
                    Optional, Sequence, Tuple, overload)

import tritonml_autotune
from tritonml_autotune import devices, engine as _engine, select
from tritonml_autotune.devices import Device

from . import runtime as _runtime
from .core.shapes import reduced_shape
from .runtime import caches as _caches

if TYPE_CHECKING:
    import torch

__all__ = ["Device", "TARGET_ENV", "current", "device", "forget", "set_timing",
           "suite_choices_table", "target", "targets", "timing"]

TARGET_ENV: Final[str] = devices.TARGET_ENV
"""``"TRITONML_TARGET"``: the environment variable naming a target for every thread (read at every
config choice; a ``target`` block overrides it; unset or empty: no target).

Example:
    >>> from tritonml import tuning
    >>> tuning.TARGET_ENV
    'TRITONML_TARGET'
"""


# The tuner (importable without tritonml) keeps its own caches; tritonml registers them, so
# ``tritonml.runtime.clear()`` forgets the tuner's answers along with the plans built from them.
for _name, _cache, _lock in tritonml_autotune.caches():
    _caches.register(f"tuner.{_name}", _cache, lock=_lock)


def forget() -> None:
    """Forget the configs this process has chosen (the tuner's answers and the launchers' plans).

    The next call of each shape chooses again: call it after the tuning cache changed under this
    process (``tritonml tune`` in another one, or ``tritonml tune --clear``), or after
    ``set_timing`` changed. Empties every cache of the process (``tritonml.runtime.clear()``).

    Example:
        >>> from tritonml import runtime, tuning
        >>> tuning.forget()
        >>> set(runtime.sizes().values())
        {0}
    """
    _runtime.clear()


def set_timing(enabled: Optional[bool]) -> None:
    """Turn the timing of candidate configs on a GPU on or off for this process.

    Overrides ``TRITONML_AUTOTUNE``; configs already chosen stay chosen (``forget()`` drops them).

    Args:
        enabled: True lets the tuner time candidates on a GPU, False chooses without timing
            (the cost model's choice); None follows ``TRITONML_AUTOTUNE`` again.

    Example:
        >>> from tritonml import tuning
        >>> tuning.set_timing(False)
        >>> tuning.set_timing(None)
    """
    _engine.set_timing(enabled)


@contextmanager
def timing(enabled: Optional[bool]) -> Iterator[None]:
    """``set_timing(enabled)`` for the duration of a ``with`` block, then the previous setting.

    Args:
        enabled: As for ``set_timing``.

    Example:
        >>> from tritonml import tuning
        >>> with tuning.timing(False):
        ...     pass
    """
    with _engine.timing(enabled):
        yield


@overload
def target(name: str) -> ContextManager[Device]: ...


@overload
def target(name: None) -> ContextManager[None]: ...


@contextmanager
def target(name: Optional[str]) -> Iterator[Optional[Device]]:
    """Choose configs as for the GPU ``name`` in this thread while the block runs.

    The kernels still run where the tensors are. The block nests (the innermost wins) and
    overrides ``TRITONML_TARGET``.

    Args:
        name: A known target ("H100", "A100"; any case, see ``targets()``); None chooses for the
            tensors' own device.

    Yields:
        The ``Device`` (or None).

    Raises:
        ValueError: An unknown name (the message lists the known targets).
        TypeError: ``name`` is neither a string nor None.

    Example:
        >>> from tritonml import tuning
        >>> with tuning.target("h100") as gpu:
        ...     print(gpu.name, tuning.current().name)
        ...     with tuning.target(None):
        ...         print(tuning.current())
        H100 H100
        None
    """
    chosen = None if name is None else devices.lookup(name, "name")
    with devices.targeting(chosen):
        yield chosen


def current() -> Optional[Device]:
    """The target configs are chosen for in this thread now, or None (the tensors' device).

    The innermost ``target`` block's, else ``TRITONML_TARGET``'s.

    Raises:
        ValueError: ``TRITONML_TARGET`` names an unknown target.

    Example:
        >>> from tritonml import tuning
        >>> with tuning.target("A100"):
        ...     print(tuning.current().name)
        A100
    """
    return devices.active()


def device(name: str) -> Device:
    """The facts tritonml holds for the GPU ``name``.

    Args:
        name: A known target name, any case.

    Returns:
        The ``Device``: SM count, registers, shared memory and threads per SM, bandwidths, L2
        size, launch overhead.

    Raises:
        ValueError: An unknown name (the message lists the known targets).

    Example:
        >>> from tritonml import tuning
        >>> tuning.device("a100").sms, tuning.device("H100").sms
        (108, 132)
    """
    return devices.lookup(name, "name")


def targets() -> Tuple[str, ...]:
    """The known target names, sorted.

    Example:
        >>> from tritonml import tuning
        >>> tuning.targets()
        ('A100', 'H100')
    """
    return tuple(sorted(devices.DEVICES))


# ---------------------------------------------------------------------------------------------
# Tuning problems ahead of time (``tritonml tune``; docs/tuning.md)
# ---------------------------------------------------------------------------------------------
# The scans ``tritonml tune --ops`` names, each to its scan record's name (``scan_record``).
SCAN_OPS: Dict[str, str] = {"cumulative_sum": "sum", "cumulative_product": "product"}


def op_names() -> Tuple[str, ...]:
    """Every op ``tritonml tune --ops`` knows: the two scans and the reduce functions."""
    from .records.reduce_function import ReduceFunction
    return tuple(SCAN_OPS) + tuple(f.name for f in ReduceFunction)


def parse_shapes(text: str, scan: Optional[str] = None
                 ) -> List[Tuple[Tuple[int, ...], Optional[Tuple[int, ...]]]]:
    """``"4096x4096:0,1x1048576:1,64x64x64:0+2,1024:all"`` -> [(shape, axes)]: axes joined by "+",
    "all" (reduce every axis), or left out (the last axis). ``scan``: the name of a scan among the
    ops tuned, which takes exactly one axis. ValueError naming ``--shapes``, the item and the rule."""
    form = "write SIZExSIZE[:AXIS[+AXIS]|:all], e.g. 4096x4096:0"
    problems = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        shape_text, _, axes_text = part.partition(":")
        try:
            shape = tuple(int(size) for size in shape_text.lower().split("x"))
            axes = (None if axes_text.strip() == "all" else
                    (len(shape) - 1,) if not axes_text.strip() else
                    tuple(int(a) for a in axes_text.split("+")))
        except ValueError:
            raise ValueError(f"--shapes: cannot read {part!r}; {form}") from None
        if not shape or min(shape) < 1:
            raise ValueError(f"--shapes: {part!r} needs sizes >= 1")
        if axes is not None:
            rank = len(shape)
            wrong = [a for a in axes if not -rank <= a < rank]
            if wrong:
                raise ValueError(f"--shapes: {part!r}: axis {wrong[0]} is out of range for "
                                 f"{rank} dims (axes run from {-rank} to {rank - 1})")
            axes = tuple(a % rank for a in axes)
            if len(set(axes)) != len(axes):
                raise ValueError(f"--shapes: {part!r}: an axis is repeated; each axis at most once")
        if scan is not None and (axes is None or len(axes) != 1):
            raise ValueError(f"--shapes: {part!r}: {scan} scans exactly one axis; give one AXIS, "
                             "or --ops with reduce functions only")
        problems.append((shape, axes))
    if not problems:
        raise ValueError(f"--shapes: no shape in {text!r}; {form}")
    return problems


def _strides(shape) -> tuple:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def plan_for(item: Any, dtype: "torch.dtype", device: "Optional[torch.device]") -> Tuple[Any, Any]:
    """The ``tritonml_autotune.select`` plan for a suite ``item`` (a contiguous input)."""
    from tritonml_autotune import select
    from .core.layout import axis_layout, reduce_layout
    from .records.builtin_reductions import record_of

    shape = tuple(item.shape)
    if item.op in SCAN_OPS:
        if item.axes is None or len(item.axes) != 1:
            raise ValueError(f"{item.label}: a scan takes exactly one axis")
        layout = axis_layout(shape, _strides(shape), _strides(shape), item.axes[0])
        return select.plan_scan(layout, dtype, device, SCAN_OPS[item.op]), layout
    axes = tuple(range(len(shape))) if item.axes is None else tuple(sorted(set(item.axes)))
    out_shape = reduced_shape(shape, axes)
    record = record_of(item.op)
    layout = reduce_layout(shape, _strides(shape), _strides(out_shape), axes, record.returns_index)
    return select.plan_reduce(layout, dtype, device, item.op,
                              partial_bytes=record.state_bytes((dtype,)),
                              out_bytes=record.out_bytes((dtype,)),
                              state_values=record.state_values((dtype,))), layout


def runner_factory(item: Any, dtype: "torch.dtype", device: "Optional[torch.device]", layout: Any
                   ) -> Callable[[Any], Callable[[], None]]:
    """``make_runner`` for ``item`` on ``device``: each config launches the op into scratch
    tensors allocated once (zeros: timing does not depend on the values)."""
    import torch

    from .launchers.reduce import launch_reduce
    from .launchers.scan import launch_scan
    from .records.scan_combine import scan_record
    from .records.builtin_reductions import record_of

    scratch = {}

    def tensors():
        if not scratch:
            x = torch.zeros(item.shape, dtype=dtype, device=device)
            if item.op in SCAN_OPS:
                out = torch.empty_like(x)
            else:
                out_shape = reduced_shape(item.shape, item.axes)
                out_dtype = record_of(item.op).output_dtypes((dtype,))[0]
                out = torch.empty(out_shape, dtype=out_dtype, device=device)
            scratch.update(x=x, out=out)
        return scratch["x"], scratch["out"]

    def make_runner(config):
        x, out = tensors()
        if item.op in SCAN_OPS:
            combine = scan_record(SCAN_OPS[item.op])
            return lambda: launch_scan(x, out, layout, combine, reverse=False, exclusive=False,
                                       config=config)
        return lambda: launch_reduce(x, out, layout, record_of(item.op), config)
    return make_runner


def config_text(fields: Dict[str, Any]) -> str:
    """A config in one short cell: "columns 256x16 w8", "split 128x32 w8 s3", "chunked 4096x1 w8
    ct2 win256" (chunks of 2 tiles, look-back groups of 256 chunks)."""
    text = f"{fields['regime']} {fields['block_axis']}x{fields['block_inner']} w{fields['num_warps']}"
    if fields["regime"] == "chunked":
        text += f" ct{fields['chunk_tiles']} win{fields['window']}"
    return text + (f" s{fields['splits']}" if fields.get("splits", 1) > 1 else "")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table of ``header`` and ``rows`` (each cell through ``str``)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(str, row)) + " |" for row in rows]
    return "\n".join(lines)


def suite_choices_table(target_name: str) -> str:
    """The cost model's choice for every problem of the benchmark suite on ``target_name``.

    The markdown table docs/tuning.md shows (tests check that the two agree): per problem and
    dtype, the heuristics' config, the cost model's, its programs per launch, registers and
    modeled time over the ideal.

    Args:
        target_name: A known target name (``targets()``).

    Returns:
        The table, one row per problem and dtype.

    Raises:
        ValueError: An unknown target name.

    Example:
        >>> from tritonml import tuning
        >>> print(tuning.suite_choices_table("H100").splitlines()[0])
        | problem | dtype | heuristics | cost model | programs | registers | modeled / ideal |
    """
    import torch

    from tritonml_autotune import cost, select, suite

    rows = []
    with target(target_name):
        for item in suite.ITEMS:
            for dtype_text in item.dtypes:
                dtype = getattr(torch, dtype_text)
                plan, _ = plan_for(item, dtype, None)
                choice = select.modeled(plan)
                fields = select.fields(choice.config)
                estimate = cost.estimate(plan.problem, fields, plan.gpu)
                programs = " + ".join(str(launch.programs) for launch in estimate.launches)
                ideal = cost.model_ideal_seconds(plan.problem, plan.gpu)
                registers = "unknown" if estimate.registers is None else estimate.registers
                rows.append((item.label, dtype_text, config_text(plan.heuristic),
                             config_text(fields), programs, registers,
                             f"{estimate.seconds / ideal:.2f}x"))
    return markdown_table(("problem", "dtype", "heuristics", "cost model", "programs",
                           "registers", "modeled / ideal"), rows)
