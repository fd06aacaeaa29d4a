"""User-defined reductions: ``Reduction`` (the description) and ``reduce_with_axes`` (the launcher).

A ``Reduction`` runs on the very kernels the twelve DirectML functions run on
(tritonml/kernels/reduce.py) in every regime, split included: its functions are the kernels'
PREPARE, MERGE, ALONG and FINISH meta-parameters, its state a tuple of components with declared
dtypes and identities. See docs/dsl.md ("User-defined reductions") for the rules and a worked
example, tritonml/reductions.py for Welford's mean and variance written this way.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

from tritonml_autotune import devices, select

from ..core import checks as _checks
from ..runtime import plan as _plan
from tritonml_autotune.configs import ReduceConfig
from ..core.dtypes import TL_DTYPE
from ..core.shapes import reduced_shape, strides_over_input
from ..core.layout import reduce_layout
from ..kernels import combine as _combine
from .reduce import reduce_work

_HALF_DTYPES = (torch.float16, torch.bfloat16)


def default_load_dtype(dtype: torch.dtype) -> torch.dtype:
    """What an input of ``dtype`` is converted to on load unless a Reduction says otherwise:
    float16 and bfloat16 compute in float32, every other dtype as it is."""
    return torch.float32 if dtype in _HALF_DTYPES else dtype


@dataclass(frozen=True)
class Reduction:
    """A user-defined reduction, run by ``tritonml.reduce_with`` on tritonml's reduce kernels.

    The state is a tuple of ``len(identity)`` components. The three functions are ``@triton.jit``
    functions of tiles (2-D tensors, elementwise):

    - ``prepare(xs, index) -> state``: ``xs`` a tuple with one tile per input tensor (each already
      converted to its load dtype), ``index`` (int32 or int64) each element's position along the
      reduced axes (row-major over them in their original order when ``uses_index``; otherwise a
      position in memory order); returns a tuple of ``len(identity)`` tiles.
    - ``merge(a, b) -> state``: elementwise and associative (the kernels fold in a fixed tree, not
      left to right); ``merge(identity, s) == merge(s, identity) == s``.
    - ``finish(state, count) -> outputs``: ``count`` the number of reduced elements (an int);
      returns a tuple of ``outputs`` tiles.

    ``along(state, merge) -> state`` folds a tile's rows; by default ``merge`` itself, by halving
    (``tritonml.kernels.combine.merge_along``).

    Dtypes are rules over the inputs' dtypes (a tuple of torch dtypes): ``state_dtypes(dtypes)``
    one torch dtype per state component, ``output_dtypes(dtypes)`` one per output,
    ``load_dtypes(dtypes)`` one per input (default: float16/bfloat16 as float32, the rest as is).
    ``check(dtypes)``, if given, raises TypeError for inputs the reduction does not accept.

    ``backward(xs, outputs, grad_outputs, axes) -> grads``, if given, is the reduction's gradient,
    a plain function of torch tensors that ``tritonml.reduce_with`` calls from autograd: ``xs``
    the inputs, ``outputs`` the outputs with the reduced axes kept as size 1 (so they broadcast
    against ``xs``), ``grad_outputs`` one gradient per output of the same shape or None where an
    output received none (never all None), ``axes`` the reduced axes (sorted, non-negative; ()
    for a 0-d input). It returns a tuple with one gradient per input: a tensor of that input's
    shape, or None.
    Without it, inputs that require grad are refused (docs/dsl.md, "Gradients").
    """
    name: str
    prepare: object
    merge: object
    finish: object
    identity: tuple
    state_dtypes: Callable
    output_dtypes: Callable
    inputs: int = 1
    outputs: int = 1
    along: object = None
    load_dtypes: Optional[Callable] = None
    check: Optional[Callable] = None
    uses_index: bool = False
    backward: Optional[Callable] = None

    def __post_init__(self):
        for name in ("prepare", "merge", "finish", "state_dtypes", "output_dtypes"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{name}: expected a function (prepare, merge, finish: @triton.jit "
                                f"functions), got {type(getattr(self, name)).__name__}")
        if self.backward is not None and not callable(self.backward):
            raise TypeError(f"backward: expected None or a function of torch tensors "
                            f"(xs, outputs, grad_outputs, axes) -> grads, got "
                            f"{type(self.backward).__name__}")
        if not isinstance(self.identity, tuple) or not self.identity:
            raise TypeError(f"identity: expected a non-empty tuple (one value per state component), "
                            f"got {self.identity!r}")
        for name in ("inputs", "outputs"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if self.along is None:
            object.__setattr__(self, "along", _combine.merge_along)

    # --- what the kernels need (tritonml/launchers/reduce.py: reduce_work) ---
    @property
    def returns_index(self) -> bool:
        return self.uses_index

    def kernel_state(self, dtypes: tuple, index_64: bool) -> tuple:
        """``(LOAD_DTYPES, STATE_DTYPES, IDENTITIES)`` as Triton dtypes, for inputs of ``dtypes``."""
        load = (self.load_dtypes(dtypes) if self.load_dtypes is not None
                else tuple(default_load_dtype(d) for d in dtypes))
        state = tuple(self.state_dtypes(dtypes))
        if len(state) != len(self.identity):
            raise ValueError(f"reduction: {self.name}'s state_dtypes gives {len(state)} dtypes for "
                             f"a state of {len(self.identity)} components (identity)")
        if len(load) != len(dtypes):
            raise ValueError(f"reduction: {self.name}'s load_dtypes gives {len(load)} dtypes for "
                             f"{len(dtypes)} input(s)")
        for rule, chosen in (("load_dtypes", load), ("state_dtypes", state)):
            unknown = [d for d in chosen if d not in TL_DTYPE]
            if unknown:
                raise TypeError(f"reduction: {self.name}'s {rule} gives {unknown[0]!r}, which the "
                                "kernels do not support (use a float or integer torch dtype)")
        return (tuple(TL_DTYPE[d] for d in load), tuple(TL_DTYPE[d] for d in state),
                tuple(self.identity))

    def state_bytes(self, dtypes: tuple) -> int:
        return sum(d.itemsize for d in self.state_dtypes(dtypes))


# The tuner's tiles are sized for the DirectML states, at most 16 bytes per lane (a float64 value
# and an int64 index). A larger state (Welford over float64: 24 bytes) in the same tile would pass
# the 255 registers a thread has on sm_80/sm_90 and go to the stack, so its tile shrinks by the
# same factor (tests/test_reduce_gpu_compile.py compiles what this picks).
TUNED_STATE_BYTES = 16


def fit_tile_to_state(config: ReduceConfig, state_bytes: int) -> ReduceConfig:
    """``config`` with its tile halved (reduced side first) until tile x state bytes is at most
    what the tuner planned for: tile x ``TUNED_STATE_BYTES``."""
    block_axis, block_inner = config.block_axis, config.block_inner
    tile = block_axis * block_inner
    while block_axis * block_inner * state_bytes > tile * TUNED_STATE_BYTES and (
            block_axis > 1 or block_inner > 1):
        if block_axis > 1:
            block_axis //= 2
        else:
            block_inner //= 2
    if (block_axis, block_inner) == (config.block_axis, config.block_inner):
        return config
    return dataclasses.replace(config, block_axis=block_axis, block_inner=block_inner)


@dataclass(frozen=True)
class _ReduceWithPlan:
    layout: object            # None: an empty result
    result_shape: tuple
    output_dtypes: tuple
    copy_inputs: bool         # the inputs' strides differ or do not fit the kernels: run on copies
    work: object = None


def reduce_with_axes(reduction, xs, axes, *, keepdims: bool = True,
                     config: Optional[ReduceConfig] = None) -> tuple:
    """Reduce ``axes`` of the tensor(s) ``xs`` with ``reduction``; always a tuple of outputs. See
    ``tritonml.reduce_with``."""
    if not isinstance(reduction, Reduction):
        raise TypeError(f"reduction: expected a tritonml.Reduction, got {type(reduction).__name__}")
    xs = (xs,) if isinstance(xs, torch.Tensor) else xs
    if not isinstance(xs, (tuple, list)) or not all(isinstance(t, torch.Tensor) for t in xs):
        raise TypeError(f"xs: expected a tensor or a tuple of tensors, got {type(xs).__name__}")
    xs = tuple(xs)
    key = None
    if config is None:
        x_keys = tuple(_plan.tensor_key(t) for t in xs)
        axes_key, keep_key = _plan.option_key(axes), _plan.option_key(keepdims)
        if None not in (*x_keys, axes_key, keep_key):
            key = ("reduce_with", reduction, x_keys, axes_key, keep_key, devices.active())
    plan, _ = _plan.lookup(key, lambda: _plan_reduce_with(reduction, xs, axes, keepdims, config))
    device = xs[0].device
    outs = tuple(torch.empty(plan.result_shape, dtype=d, device=device) for d in plan.output_dtypes)
    if plan.layout is not None:
        if plan.copy_inputs:
            xs = tuple(t.contiguous() for t in xs)
        xs = tuple(t.resolve_neg() for t in xs)   # the kernels read every input unnegated
        plan.work.run(xs[0], outs[0], xs[1:] + outs[1:])
    return outs


def _plan_reduce_with(reduction, xs, axes, keepdims, config) -> _ReduceWithPlan:
    # --- validate (nothing is launched or written before every check has passed) ---
    if len(xs) != reduction.inputs:
        raise ValueError(f"xs: {reduction.name} takes {reduction.inputs} input tensor(s), "
                         f"got {len(xs)}")
    for i, t in enumerate(xs):
        _checks.check_tensor(f"xs[{i}]", t)
        if t.shape != xs[0].shape:
            raise ValueError(f"xs[{i}]: every input must have xs[0]'s shape {tuple(xs[0].shape)}, "
                             f"got {tuple(t.shape)}")
        if t.device != xs[0].device:
            raise ValueError(f"xs[{i}]: every input must be on xs[0]'s device {xs[0].device}, "
                             f"got {t.device}")
    dtypes = tuple(t.dtype for t in xs)
    if reduction.check is not None:
        reduction.check(dtypes)
    x = xs[0]
    axes = _checks.normalize_axes(axes, x.dim())
    keepdims = _checks.check_bool("keepdims", keepdims)
    if config is not None:
        if not isinstance(config, ReduceConfig):
            raise TypeError(f"config: expected a ReduceConfig, got {type(config).__name__}")
        config.validate()
    output_dtypes = tuple(reduction.output_dtypes(dtypes))
    if len(output_dtypes) != reduction.outputs:
        raise ValueError(f"reduction: {reduction.name}'s output_dtypes gives {len(output_dtypes)} "
                         f"dtypes for {reduction.outputs} output(s)")
    reduction.kernel_state(dtypes, False)   # every declared dtype is one the kernels support
    shape = tuple(x.shape) if x.dim() else (1,)
    result_shape = reduced_shape(x.shape, axes, keepdims)
    if math.prod(result_shape) == 0:
        return _ReduceWithPlan(None, result_shape, output_dtypes, False)

    # --- canonicalize: one layout for every input (they share strides, or run on copies) ---
    dense_strides = torch.empty(shape, device="meta").stride()
    strides = {tuple(t.stride()) if t.dim() else (1,) for t in xs}
    copy_inputs = len(strides) > 1
    x_strides = dense_strides if copy_inputs else strides.pop()
    kept_strides = torch.empty(result_shape, device="meta").stride()
    out_strides = strides_over_input(kept_strides, x.dim(), axes, keepdims)
    layout = reduce_layout(shape, x_strides, out_strides, axes, reduction.uses_index)
    if layout is None:   # too many reduced dims apart to merge (see launchers/reduce.py)
        copy_inputs = True
        layout = reduce_layout(shape, dense_strides, out_strides, axes, reduction.uses_index)
    if config is None:
        state_bytes = reduction.state_bytes(dtypes)
        config = select.choose_reduce(layout, x.dtype, x.device, f"user:{reduction.name}",
                                      partial_bytes=state_bytes).config
        config = fit_tile_to_state(config, state_bytes)
    work = reduce_work(layout, reduction, dtypes, False, False, config)
    return _ReduceWithPlan(layout, result_shape, output_dtypes, copy_inputs, work)


__all__ = ["Reduction", "reduce_with_axes", "default_load_dtype"]
