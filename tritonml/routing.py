"""Opt-in routing of torch's own scans and reductions to tritonml's kernels.

``enable()`` / ``disable()`` switch routing on and off for the calling thread;
``with use_tritonml():`` switches it on for a block. While it is on, calls such as ``torch.cumsum``,
``x.sum(1)`` or ``torch.linalg.vector_norm`` on tensors of the chosen devices run tritonml's
kernels and return what torch itself would: torch's dtype promotion, argument forms, shapes and
NaN/tie rules. Any call whose torch result tritonml cannot reproduce exactly falls through to
torch's own kernel. docs/routing.md lists what is routed and what falls through.

Design:
- One ``TorchFunctionMode`` per thread, installed near the bottom of that thread's mode stack the
  first time routing is switched on there and removed when it is switched off. It sits below the
  user's own modes (so a ``with SomeMode():`` entered before ``enable()`` still pops its own mode
  on exit), and above torch's default-device mode, which must stay at the bottom. Whether it
  routes, and for which devices, is read from thread-local state: torch keeps mode stacks per
  thread, so nothing here reaches another thread.
- ``ROUTES`` is the one table: one ``Route`` per torch scan or reduction, saying how to read
  torch's arguments (tritonml/routing_args.py), which dtype ours computes in, which tritonml
  function runs, and which inputs torch defines differently (those fall through); ``_route`` is
  the one path those calls take. A torch function of another shape (``torch.segment_reduce``,
  the scatter and index reductions of tritonml/routing_scatter.py) is a ``CallRoute`` in the same
  table, with a function of its own.
- Deterministic mode: the scatter routes (``CallRoute.deterministic``) are also taken, on the
  devices ``deterministic_routing`` names (cuda by default), whenever
  ``torch.are_deterministic_algorithms_enabled()`` is on at the call, in every thread where this
  mode is installed. ``import tritonml`` wraps ``torch.use_deterministic_algorithms`` so that a
  thread switching deterministic mode on installs the mode (and import does, when the mode is on
  already); the flag itself is read at each call, so switching it off stops the routing at once.
  ``TRITONML_DETERMINISTIC_ROUTING=0`` (read at import) or ``deterministic_routing(False)`` opts
  out.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import operator
import os
import sys
import threading
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Union

import torch
from torch.overrides import TorchFunctionMode

from .core import backend as _backend
from .core import torch_compat as _torch_compat
from .core.shapes import reduced_shape
from .records.builtin_reductions import record_of
from .runtime import caches as _caches
from . import routing_family as _family
from . import routing_scatter as _scatter_routes
from .routing_args import (ALIASES, ALL, ARG_ARGS, ARG_DIM, COMPUTE, DIMS, DIMS_NONEMPTY,
                           EXTREME_ARGS, FALL_THROUGH, FLOATS, INPUTS, LOGSUMEXP_ARGS, NORM_ARGS, ONE_DIM,
                           PROD_ARGS, REDUCE_ARGS, SCAN_ARGS, SCAN_DIM, constant, floats_input,
                           floats_no_narrowing, floats_only, index_arg, integers_to_default_float,
                           nansum_dtype, norm_function, promote_integers, read_dims, same,
                           same_no_bool, signature_of)
from .torch_ops.reduce import reduce as _reduce
from .torch_ops.scan import cumulative_product, cumulative_sum
from .torch_ops.segment import segment_reduce as _segment_reduce

__all__ = ["enable", "disable", "use_tritonml", "deterministic_routing"]

@dataclass(frozen=True)
class Route:
    """How one torch function maps onto tritonml.

    ``forms``: torch's callables for it (function, method, aliases); ``inplace``: its in-place
    method. ``arguments``: torch's parameters. ``dims``: how ``dim`` reads. ``dtype``: (x's dtype,
    ``dtype=``) -> the dtype ours computes in, or None to fall through. ``function``: (arguments)
    -> tritonml's scan name or ReduceFunction name, or None to fall through. ``empty``: torch
    defines an empty reduced dim (amax/argmax raise). ``indices``: the result is int64 indices.
    ``grad``: may run while autograd records, if tritonml's function has autograd (its gradients
    follow torch's conventions: amax ties share, prod with zeros, norms at 0); False where they
    differ (logsumexp at +-inf, where torch's gradient is NaN).

    torch's scan and reduce family (cummax, max with dim, var, nansum, ...) runs through
    ``family(x, dims, keepdim, arguments)`` (tritonml/routing_family.py; ``dims`` an int for
    scans, else a tuple, or None for every dim), the tritonml public function returning torch's
    result (its return type included), on x as given (``dtype`` then only decides what falls
    through);
    these routes take no ``out=`` and no DTensor (both fall through). ``read(arguments)``, if
    given, normalizes the bound arguments (var's spellings of ``correction``), or returns None to
    fall through.
    """
    name: str
    forms: tuple[Any, ...]
    arguments: inspect.Signature
    dims: str
    dtype: Callable
    function: Callable[[dict], str | None]
    inplace: object = None
    empty: bool = True
    indices: bool = False
    grad: bool = True
    family: Callable | None = None
    read: Callable | None = None

    @property
    def scan(self) -> bool:
        return self.dims == SCAN_DIM


# -- torch.segment_reduce -------------------------------------------------------------------------
# Served: float data, one 1-D ``lengths`` or ``offsets`` tensor (then torch's axis is 0), any
# ``initial``, ``unsafe`` either way (ours checks the boundaries in eager code regardless).
# Falls through: ``indices=``, N-D lengths/offsets (torch's batched form), integer data (torch
# has no kernel), and a function whose result selects elements (the record's ``selects``: MAX,
# MIN) while autograd records (torch's backward splits a positive gradient evenly among tied
# maxima but gives a negative one to each of them in full; ours splits both).

_SEGMENT_ARGS = signature_of(lambda data, reduce, *, lengths=None, indices=None, offsets=None,
                             axis=0, unsafe=False, initial=None: None)
_SEGMENT_FUNCTIONS = {"sum": "SUM", "mean": "AVERAGE", "max": "MAX", "min": "MIN",
                      "prod": "MULTIPLY"}


def _route_segment_reduce(args, kwargs, inplace, readable):
    """One torch.segment_reduce call run by tritonml.segment_reduce, or _FALL_THROUGH."""
    try:
        arguments = _SEGMENT_ARGS.bind(*args, **kwargs).arguments
    except TypeError:
        return _FALL_THROUGH
    x = arguments["data"]
    function = _SEGMENT_FUNCTIONS.get(arguments.get("reduce"))  # pyright: ignore[reportArgumentType]
    lengths, offsets = arguments.get("lengths"), arguments.get("offsets")
    boundaries = lengths if offsets is None else offsets
    if (function is None or arguments.get("indices") is not None
            or (lengths is None) == (offsets is None) or not readable(x)
            or x.dtype not in FLOATS or not 1 <= x.dim() <= 8
            or type(boundaries) is not torch.Tensor or boundaries.dim() != 1
            or boundaries.device != x.device
            or index_arg(arguments.get("axis", 0)) not in (0, -x.dim())
            or _forward_ad_active()):
        return _FALL_THROUGH
    records = torch.is_grad_enabled() and x.requires_grad
    if records and record_of(function).selects:   # torch's gradient at ties differs
        return _FALL_THROUGH
    initial = arguments.get("initial")
    try:
        result = _segment_reduce(x, function, offsets=offsets, lengths=lengths, axis=0,
                                 initial=None if initial is None else float(initial))
    except (TypeError, ValueError):
        return _FALL_THROUGH   # checked before any launch: torch runs the call (and raises)
    return result.contiguous()


@dataclass(frozen=True)
class CallRoute:
    """A torch function that is no scan or reduction over ``dim`` (``torch.segment_reduce``,
    the scatter and index reductions), routed by a function of its own: ``handle(args, kwargs,
    inplace, readable)`` returns torch's result computed by tritonml, or ``_FALL_THROUGH``
    (``inplace``: the in-place method was called; ``readable(t)``: t is a tensor ours can read
    on a device routed for this call). ``forms`` and ``inplace`` as for ``Route``.
    ``deterministic``: also routed whenever torch's deterministic mode is on (the scatter ops,
    which torch refuses or slows down there on CUDA; ``deterministic_routing``)."""
    name: str
    forms: tuple[Any, ...]
    handle: Callable[[tuple, dict, bool, Callable[[torch.Tensor], bool]], Any]
    inplace: object = None
    deterministic: bool = False


# tritonml's scans by the name a route's ``function`` gives
_SCANS = {"cumulative_sum": cumulative_sum, "cumulative_product": cumulative_product}

ROUTES = (
    Route("cumsum", (torch.cumsum, torch.Tensor.cumsum), SCAN_ARGS, SCAN_DIM, promote_integers,
          constant("cumulative_sum"), inplace=torch.Tensor.cumsum_),
    Route("cumprod", (torch.cumprod, torch.Tensor.cumprod), SCAN_ARGS, SCAN_DIM, promote_integers,
          constant("cumulative_product"), inplace=torch.Tensor.cumprod_),
    Route("sum", (torch.sum, torch.Tensor.sum), REDUCE_ARGS, DIMS, promote_integers,
          constant("SUM")),
    Route("prod", (torch.prod, torch.Tensor.prod), PROD_ARGS, ONE_DIM, promote_integers,
          constant("MULTIPLY")),
    Route("amax", (torch.amax, torch.Tensor.amax), EXTREME_ARGS, DIMS, same,
          constant("MAX"), empty=False),
    Route("amin", (torch.amin, torch.Tensor.amin), EXTREME_ARGS, DIMS, same,
          constant("MIN"), empty=False),
    Route("argmax", (torch.argmax, torch.Tensor.argmax), ARG_ARGS, ARG_DIM, same_no_bool,
          constant("ARGMAX"), empty=False, indices=True),
    Route("argmin", (torch.argmin, torch.Tensor.argmin), ARG_ARGS, ARG_DIM, same_no_bool,
          constant("ARGMIN"), empty=False, indices=True),
    Route("mean", (torch.mean, torch.Tensor.mean), REDUCE_ARGS, DIMS, floats_only,
          constant("AVERAGE")),
    Route("logsumexp", (torch.logsumexp, torch.Tensor.logsumexp, torch.special.logsumexp),
          LOGSUMEXP_ARGS, DIMS_NONEMPTY, integers_to_default_float, constant("LOG_SUM_EXP"),
          grad=False),
    Route("vector_norm", (torch.linalg.vector_norm,), NORM_ARGS, DIMS, floats_no_narrowing,
          norm_function),
    # torch's scan and reduce family: tritonml's functions of the same names (torch_ops/)
    Route("cummax", (torch.cummax, torch.Tensor.cummax), _family.CUM_ARGS, SCAN_DIM, same,
          constant("cummax"), family=_family.cummax),
    Route("cummin", (torch.cummin, torch.Tensor.cummin), _family.CUM_ARGS, SCAN_DIM, same,
          constant("cummin"), family=_family.cummin),
    Route("logcumsumexp", (torch.logcumsumexp, torch.Tensor.logcumsumexp), _family.CUM_ARGS,
          SCAN_DIM, floats_input, constant("logcumsumexp"), family=_family.logcumsumexp),
    Route("max", (torch.max, torch.Tensor.max), _family.WITH_INDEX_ARGS, ONE_DIM, same,
          constant("max_with_indices"), empty=False, family=_family.max_with_indices),
    Route("min", (torch.min, torch.Tensor.min), _family.WITH_INDEX_ARGS, ONE_DIM, same,
          constant("min_with_indices"), empty=False, family=_family.min_with_indices),
    Route("aminmax", (torch.aminmax, torch.Tensor.aminmax), _family.AMINMAX_ARGS, ARG_DIM, same,
          constant("aminmax"), empty=False, family=_family.aminmax),
    *(Route(name, forms, _family.VAR_ARGS, DIMS, floats_input, constant(name),
            family=_family.MOMENTS[name], read=_family.read_correction)
      for name, forms in (("var", (torch.var, torch.Tensor.var)),
                          ("std", (torch.std, torch.Tensor.std)),
                          ("var_mean", (torch.var_mean,)), ("std_mean", (torch.std_mean,)))),
    Route("nansum", (torch.nansum, torch.Tensor.nansum), REDUCE_ARGS, DIMS, nansum_dtype,
          constant("nansum"), family=_family.nansum),
    Route("nanmean", (torch.nanmean, torch.Tensor.nanmean), REDUCE_ARGS, DIMS, floats_input,
          constant("nanmean"), family=_family.nanmean),
    CallRoute("segment_reduce", (torch.segment_reduce,), _route_segment_reduce),
    # torch's scatter and index reductions: tritonml's deterministic ones (torch_ops/scatter.py)
    *(CallRoute(name, (getattr(torch, name), getattr(torch.Tensor, name)),
                getattr(_scatter_routes, f"route_{name}"),
                inplace=getattr(torch.Tensor, f"{name}_"), deterministic=True)
      for name in ("scatter_add", "scatter_reduce", "index_add", "index_reduce", "index_put")),
    CallRoute("bincount", (torch.bincount, torch.Tensor.bincount),
              _scatter_routes.route_bincount, deterministic=True),
)

# torch's callable -> (route, in place?)
_BY_FORM = {form: (route, False) for route in ROUTES for form in route.forms}
_BY_FORM.update({route.inplace: (route, True) for route in ROUTES if route.inplace is not None})

# -- per-thread state -----------------------------------------------------------------------------


class _ThreadState(threading.local):
    def __init__(self):
        # frozenset of (type, index or None) while routing is on, else None
        self.devices: frozenset | None = None
        # this thread keeps the mode installed for deterministic mode's scatter routes
        self.deterministic = False
        self.mode: _RoutingMode | None = None     # this thread's _RoutingMode while installed


_state = _ThreadState()


def _parse_devices(devices) -> frozenset:
    if isinstance(devices, (str, torch.device)):
        devices = (devices,)
    try:
        items = tuple(devices)
    except TypeError:
        raise TypeError(f"devices: expected a sequence of devices such as ('cuda',), "
                        f"got {type(devices).__name__}") from None
    parsed = set()
    for item in items:
        if not isinstance(item, (str, torch.device)):
            raise TypeError(f"devices: expected device names or torch.device, "
                            f"got {type(item).__name__}")
        try:
            device = torch.device(item)
        except RuntimeError:
            raise ValueError(f"devices: {item!r} is not a device") from None
        if device.type not in ("cpu", "cuda"):
            raise ValueError(f"devices: tritonml's kernels run on cuda (and on cpu through Triton's "
                             f"interpreter), not on {device.type}")
        if device.type == "cpu":
            if not _backend.INTERPRET:
                raise ValueError("devices: cpu tensors cannot be routed while Triton compiles for the "
                                 "GPU; set TRITON_INTERPRET=1 before importing tritonml to run the "
                                 "kernels on the CPU")
            device = torch.device("cpu")  # cpu tensors carry no index
        parsed.add((device.type, device.index))
    return frozenset(parsed)


def _install() -> None:
    """Put this thread's routing mode at the bottom of its mode stack (above a default-device mode)."""
    if _state.mode is not None:
        return
    stack = [_torch_compat.pop_function_mode()
             for _ in range(_torch_compat.function_mode_count())]  # pyright: ignore[reportOptionalCall]
    stack.reverse()  # bottom first
    keep_below = 1 if stack and isinstance(stack[0], _torch_compat.device_context_type()) else 0
    mode = _RoutingMode()
    for m in stack[:keep_below] + [mode] + stack[keep_below:]:
        _torch_compat.push_function_mode(m)
    _state.mode = mode


def _uninstall() -> None:
    mode, _state.mode = _state.mode, None
    if mode is None:
        return
    stack = [_torch_compat.pop_function_mode()
             for _ in range(_torch_compat.function_mode_count())]  # pyright: ignore[reportOptionalCall]
    for m in reversed(stack):
        if m is not mode:
            _torch_compat.push_function_mode(m)


def _sync() -> None:
    """Install this thread's mode while routing or deterministic routing wants it, else remove it
    (an installed mode costs every torch call a Python call)."""
    if _state.devices is None and not _state.deterministic:
        _uninstall()
    else:
        _install()


def _set(devices) -> None:
    _state.devices = devices
    _sync()


# -- public API -----------------------------------------------------------------------------------

Devices = Union[str, torch.device, Iterable[Union[str, torch.device]]]
"""A device or device type, or several: ``"cuda"``, ``"cuda:1"``, ``torch.device("cpu")``,
``("cuda", "cpu")``."""


# whether the warning that cuda alone routes nothing without a GPU was given (once per process)
_warned_no_cuda = False


def _warn_if_nothing_routable(devices: frozenset, caller: str, stacklevel: int) -> None:
    """Warn once when every device asked for is cuda and torch sees no GPU: routing would then
    route nothing, and the user most likely wanted the interpreter's CPU routing."""
    global _warned_no_cuda
    if (_warned_no_cuda or not devices or any(kind != "cuda" for kind, _ in devices)
            or torch.cuda.is_available()):
        return
    _warned_no_cuda = True
    warnings.warn(f"tritonml.{caller}: devices are cuda only, but torch.cuda.is_available() is "
                  f"False, so no call is routed; pass devices=(\"cpu\",) to route CPU tensors "
                  f"through Triton's interpreter", UserWarning, stacklevel=stacklevel + 1)


def enable(devices: Devices = ("cuda",)) -> None:
    """Route torch's scans and reductions on ``devices`` to tritonml, in the calling thread.

    Per thread, as ``torch.set_grad_enabled`` and ``torch.set_default_device`` are: other threads
    are not routed until they call ``enable()`` themselves. While routing is on, calls such as
    ``torch.cumsum``, ``x.sum(1)`` or ``torch.linalg.vector_norm`` on tensors of those devices
    run tritonml's kernels and return what torch itself would; a call whose torch result
    tritonml cannot reproduce exactly falls through to torch's own kernel (docs/routing.md).

    Args:
        devices: Device types or devices (``"cuda"``, ``"cuda:1"``, ``torch.device("cpu")``;
            cpu only with Triton's interpreter).

    Raises:
        TypeError: devices is not a device name, a torch.device or a sequence of them.
        ValueError: A name that is no device, a device other than cuda or cpu, or cpu while
            Triton compiles for the GPU.

    Warns:
        UserWarning: Once per process, when the devices are cuda only and torch sees no GPU
            (nothing would be routed; ``devices=("cpu",)`` routes CPU tensors through Triton's
            interpreter).

    Example:
        >>> import torch, tritonml
        >>> tritonml.enable("cpu")     # CPU tensors run Triton's interpreter here
        >>> torch.cumsum(torch.tensor([1., 2., 3.]), 0)
        tensor([1., 3., 6.])
        >>> tritonml.disable()
    """
    parsed = _parse_devices(devices)
    _warn_if_nothing_routable(parsed, "enable", stacklevel=2)
    _set(parsed)


def disable() -> None:
    """Stop routing in the calling thread.

    A ``use_tritonml`` block still restores its outer state on exit. Deterministic mode's scatter
    routes are not affected: ``deterministic_routing(False)`` turns those off.

    Example:
        >>> import torch, tritonml
        >>> tritonml.enable("cpu")
        >>> tritonml.disable()
        >>> torch.cumsum(torch.tensor([1., 2., 3.]), 0)     # torch's own kernel
        tensor([1., 3., 6.])
    """
    _set(None)


@contextlib.contextmanager
def use_tritonml(devices: Devices = ("cuda",)) -> Iterator[None]:
    """Route torch's scans and reductions on ``devices`` to tritonml inside the block, in this thread.

    On exit the thread's routing is what it was on entry (nested blocks restore the outer block's
    devices; ``enable()``/``disable()`` inside the block last until its end). ``devices=()`` turns
    routing off inside the block.

    Args:
        devices: As for ``enable``; ``()`` for none.

    Yields:
        None; the block runs with routing on.

    Raises:
        TypeError: As for ``enable``.
        ValueError: As for ``enable``.

    Warns:
        UserWarning: As for ``enable``.

    Example:
        >>> import torch, tritonml
        >>> with tritonml.use_tritonml("cpu"):
        ...     torch.tensor([[1., 2.], [3., 4.]]).sum(1)
        tensor([3., 7.])
    """
    parsed = _parse_devices(devices)
    _warn_if_nothing_routable(parsed, "use_tritonml", stacklevel=3)  # past contextlib
    outer = _state.devices
    _set(parsed)
    try:
        yield
    finally:
        _set(outer)


# -- deterministic mode ---------------------------------------------------------------------------

DETERMINISTIC_ROUTING_ENV = "TRITONML_DETERMINISTIC_ROUTING"


@dataclass(frozen=True)
class _DeterministicRouting:
    """Process-wide, as torch's deterministic flag is: whether the scatter routes are taken while
    that flag is on, and on which devices."""
    enabled: bool
    devices: frozenset


def _enabled_by_environment() -> bool:
    value = os.environ.get(DETERMINISTIC_ROUTING_ENV, "").strip().lower()
    return value not in ("0", "false", "no", "off")


# cuda only by default: torch's CPU scatter kernels are deterministic already, and Triton's
# interpreter would make them far slower
_deterministic = _DeterministicRouting(_enabled_by_environment(), frozenset({("cuda", None)}))


def deterministic_routing(enabled: bool, *, devices: Devices | None = None) -> None:
    """Whether torch's deterministic mode routes the scatter ops to tritonml (on by default).

    While ``torch.are_deterministic_algorithms_enabled()`` is on, ``scatter_add``,
    ``scatter_reduce``, ``index_add``, ``index_reduce``, ``bincount`` with weights and
    ``index_put`` with ``accumulate=True`` on ``devices`` run tritonml's deterministic kernels
    (the same bits on every run; torch raises for several of them on CUDA in that mode), with or
    without ``enable()``. Calls tritonml cannot answer as torch would fall through to torch
    (docs/routing.md). Process-wide, for every thread (the import-time default comes from
    ``TRITONML_DETERMINISTIC_ROUTING``: ``0`` turns it off, and tritonml then leaves
    ``torch.use_deterministic_algorithms`` unwrapped until this is called with True). The calls
    are seen in a thread that switched deterministic mode on with
    ``torch.use_deterministic_algorithms`` after ``import tritonml``, imported tritonml while it
    was on, called this function while it was on, or has routing on (``enable()``): another
    thread calls ``deterministic_routing(True)`` itself. While installed, the routing mode costs
    each torch call of its thread a Python call.

    Args:
        enabled: Route the scatter ops in deterministic mode.
        devices: As for ``enable`` (cpu only with Triton's interpreter); None keeps the devices
            set before (cuda, from import).

    Raises:
        TypeError: enabled is not a bool, or devices as for ``enable``.
        ValueError: As for ``enable``.

    Example:
        >>> import torch
        >>> from tritonml.routing import deterministic_routing
        >>> deterministic_routing(True, devices="cpu")   # CPU tensors run Triton's interpreter here
        >>> torch.use_deterministic_algorithms(True)
        >>> torch.zeros(3).index_add_(0, torch.tensor([0, 2, 0]), torch.tensor([1., 2., 3.]))
        tensor([4., 0., 2.])
        >>> torch.use_deterministic_algorithms(False)
        >>> deterministic_routing(True, devices="cuda")  # the default again
    """
    global _deterministic
    if not isinstance(enabled, bool):
        raise TypeError(f"enabled: expected a bool, got {type(enabled).__name__}")
    parsed = _deterministic.devices if devices is None else _parse_devices(devices)
    _deterministic = _DeterministicRouting(enabled, parsed)
    _follow_deterministic_mode()


def _follow_deterministic_mode() -> None:
    """Keep this thread's mode installed while deterministic routing can apply here."""
    if _deterministic.enabled:
        _wrap_use_deterministic_algorithms()
    _state.deterministic = _deterministic.enabled and torch.are_deterministic_algorithms_enabled()
    _sync()


def _wrap_use_deterministic_algorithms() -> None:
    """Make ``torch.use_deterministic_algorithms`` install (or remove) the calling thread's mode
    after setting torch's flag: modes are per thread, and torch offers no hook on the flag."""
    original = torch.use_deterministic_algorithms
    if getattr(original, "__tritonml_follows__", False):
        return

    @functools.wraps(original)
    def use_deterministic_algorithms(*args, **kwargs):
        original(*args, **kwargs)
        _follow_deterministic_mode()

    setattr(use_deterministic_algorithms, "__tritonml_follows__", True)
    torch.use_deterministic_algorithms = use_deterministic_algorithms


# -- routing --------------------------------------------------------------------------------------

_FALL_THROUGH = FALL_THROUGH


class _RoutingMode(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        entry = _BY_FORM.get(func)
        if entry is not None and not torch.compiler.is_compiling():
            route, inplace = entry
            devices = _routed_devices(route)
            if not devices:
                result = _FALL_THROUGH
            elif isinstance(route, CallRoute):
                result = route.handle(args, kwargs, inplace,
                                      functools.partial(_readable, devices=devices))
            else:
                result = _route(route, inplace, args, kwargs)
            if result is not _FALL_THROUGH:
                return result
        return func(*args, **kwargs)


def _routed_devices(route) -> frozenset:
    """The devices this call of ``route`` is routed on: the thread's, and for the scatter routes
    deterministic mode's while torch's flag is on (read at each call, in every thread)."""
    devices = _state.devices or frozenset()
    if (getattr(route, "deterministic", False) and _deterministic.enabled
            and torch.are_deterministic_algorithms_enabled()):
        devices = devices | _deterministic.devices
    return devices


def _bind(route: Route, args: tuple, kwargs: dict[str, Any]):
    kwargs = {ALIASES.get(k, k): v for k, v in kwargs.items()}
    try:
        bound = route.arguments.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return bound.arguments


def _named(t: torch.Tensor) -> bool:
    return any(n is not None for n in getattr(t, "names", ()))  # newer torch has no named tensors


def _dtensor(t) -> bool:
    module = sys.modules.get("torch.distributed.tensor")  # no DTensor exists before it loads
    return module is not None and isinstance(t, module.DTensor)


def _readable(t, devices: frozenset | None = None) -> bool:
    """A plain strided tensor ours can read or write, on a routed device (``devices``, else the
    thread's); or a DTensor whose local shard is one (tritonml's ops take DTensors:
    torch_ops/dtensor.py)."""
    if _dtensor(t):
        return _readable(t.to_local(), devices)
    if type(t) not in (torch.Tensor, torch.nn.Parameter) or t.layout != torch.strided:
        return False
    if (t.is_quantized or t.is_nested or _torch_compat.is_zerotensor(t) or _named(t)
            or _torch_compat.is_functorch_wrapped(t)):
        return False
    if devices is None:
        devices = _state.devices
    return ((t.device.type, None) in devices  # pyright: ignore[reportOperatorIssue] (routing is on)
            or (t.device.type, t.device.index) in devices)  # pyright: ignore[reportOperatorIssue]


def _forward_ad_active() -> bool:
    return _torch_compat.forward_ad_active()


_autograd_cache: dict = _caches.register("routing.autograd", {})


def _has_autograd(route: Route, function: str, device: torch.device) -> bool:
    """Whether tritonml's function records autograd: a reduce function's record says (its
    ``derivative``); a scan is probed once on an empty input (no launch)."""
    if not route.scan:
        return record_of(function).derivative is not None
    if function not in _autograd_cache:
        try:
            with torch.enable_grad():
                empty = torch.zeros(0, device=device, requires_grad=True)
                probe = _SCANS[function](empty, 0)
            _autograd_cache[function] = probe.grad_fn is not None
        except Exception:  # any failure means: not usable under autograd
            _autograd_cache[function] = False
    return _autograd_cache[function]


@dataclass(frozen=True)
class _Plan:
    """One routed call: what ours computes, from what, into what."""
    route: Route
    function: str         # tritonml's scan name or ReduceFunction name
    x: torch.Tensor
    compute: torch.dtype  # the dtype ours computes in (torch's dtype promotion and dtype=)
    dims: Any             # an int (scans), a tuple of dims, or ALL
    keepdim: bool
    out: torch.Tensor | None  # out= or, in place, x itself
    shape: tuple          # torch's result shape
    result_dtype: torch.dtype
    records: bool         # autograd records the call
    arguments: dict | None = None  # torch's arguments as bound (the family's routes read them)

    def run(self) -> torch.Tensor:
        if self.route.family is not None:
            dims = None if self.dims is ALL else self.dims
            return self.route.family(self.x, dims, self.keepdim, self.arguments)
        # bool amax/amin: uint8 holds the same 0/1 bytes, and the result views back as bool.
        as_dtype = torch.uint8 if self.compute == torch.bool else self.compute
        if as_dtype != self.compute:
            x = self.x.view(as_dtype)
        else:
            x = self.x.to(self.compute)  # torch's dtype= converts x first; no copy if it matches

        def ours(target):
            if self.route.scan:
                return _SCANS[self.function](x, self.dims, out=target)
            axes = None if self.dims is ALL else self.dims
            return _reduce(x, self.function, axes, keepdims=self.keepdim, out=target)

        if self.records:
            # Autograd refuses out=; torch's results are contiguous, so ours is made so too.
            return ours(None).contiguous()
        if _dtensor(self.x):  # its result's placements are tritonml.distributed's to choose
            with torch.no_grad():
                return ours(None)
        out = self.out
        target = out if out is not None else torch.empty(self.shape, dtype=self.result_dtype,
                                                         device=self.x.device)
        version = (_torch_compat.tensor_version(out) if out is not None and not out.is_inference()
                   else None)
        with torch.no_grad():
            ours(target.view(as_dtype) if self.result_dtype == torch.bool else target)
        # (out is set when version is) torch's out= and in-place count a write
        if (version is not None
                and _torch_compat.tensor_version(out) == version):  # pyright: ignore[reportArgumentType]
            torch.autograd.graph.increment_version(out)  # pyright: ignore[reportArgumentType]
        return target


def _plan(route: Route, inplace: bool, args, kwargs) -> _Plan | None:
    """The routed form of one torch call, or None where torch's result would differ from ours."""
    arguments = _bind(route, args, kwargs)
    if arguments is not None and route.read is not None:
        arguments = route.read(arguments)
    if arguments is None:
        return None
    x = arguments["input"]
    out = x if inplace else arguments.get("out")
    if not _readable(x) or x.dtype not in INPUTS or x.dim() > 8:
        return None
    if out is not None and not (_readable(out) and out.device == x.device):
        return None
    if _dtensor(x) and (out is not None or x.dtype == torch.bool or route.family is not None
                        or (torch.is_grad_enabled() and x.requires_grad)):
        return None  # a DTensor routes as a functional call without autograd; torch runs the rest
    if route.family is not None and out is not None:
        return None  # the family's routes take no out= (torch writes its own)

    dims = read_dims(route.dims, arguments["dim"], x.dim())
    if inplace:  # x keeps its dtype; integers wrap modulo 2**bits either way
        dtype = arguments["dtype"]
        compute = x.dtype if dtype in (None, x.dtype) and x.dtype in COMPUTE else None
    else:
        compute = route.dtype(x.dtype, arguments.get("dtype"))
    function = route.function(arguments)
    if dims is None or compute is None or function is None:
        return None
    result_dtype = torch.int64 if route.indices else compute
    keepdim = arguments.get("keepdim", False)
    shape = (tuple(x.shape) if route.scan
             else reduced_shape(x.shape, None if dims is ALL else dims,  # pyright: ignore[reportArgumentType]
                                keepdim))

    if out is not None:
        if out.dtype != result_dtype or tuple(out.shape) != shape:
            return None  # torch casts or resizes out; ours would not
        if not inplace and out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr():
            return None  # torch's rules for an out sharing x's memory are its own
    sizes = tuple(x.shape) or (1,)  # a 0-d tensor reads as shape [1]
    if not route.empty and (x.numel() == 0 if dims is ALL
                            else any(sizes[d] == 0 for d in dims)):  # pyright: ignore[reportGeneralTypeIssues]
        return None  # torch raises for an empty max/argmax
    records = (torch.is_grad_enabled() and not route.indices
               and (x.requires_grad or (out is not None and out.requires_grad)))
    if records and (out is not None or not route.grad or (
            route.family is None and not _has_autograd(route, function, x.device))):
        return None  # (the family's functions all record autograd for float inputs)
    if _forward_ad_active():
        return None
    return _Plan(route, function, x, compute, dims, keepdim, out, shape, result_dtype, records,
                 arguments)


def _route(route: Route, inplace: bool, args, kwargs):
    """Run one torch call through tritonml, or return _FALL_THROUGH."""
    plan = _plan(route, inplace, args, kwargs)
    if plan is None:
        return _FALL_THROUGH
    try:
        return plan.run()
    except (TypeError, ValueError):
        # tritonml checks everything before it launches or writes, so torch can still run the call.
        return _FALL_THROUGH


# import: deterministic mode may be on already (then this thread routes the scatter ops at once)
_follow_deterministic_mode()
