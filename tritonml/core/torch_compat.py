"""The one module of tritonml that touches torch's private API.

Everything else goes through the names defined here whenever it needs something torch does not
publish (tests/core/test_torch_compat.py checks that no other module of ``tritonml/`` or ``benchmarks/``
names a private torch attribute). Each entry says why it is needed. Entries that a torch release
may lack resolve to a fallback (None, or a function that answers as if the feature were off), so
an upgrade degrades to the general path instead of failing at import; ``missing()`` lists what the
installed torch lacks.
"""
from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

import torch
import torch.overrides
from torch.utils import _python_dispatch

if TYPE_CHECKING:   # the type torch.library.custom_op returns (for annotations only)
    from torch._library.custom_ops import CustomOpDef as CustomOpDef

# ---------------------------------------------------------------------------------------------
# Torch dispatch modes (tritonml/runtime/trace.py, resident.py; tritonml/bench/memtrace.py;
# benchmarks/gpu_check_segments.py, which poisons fresh allocations)
# ---------------------------------------------------------------------------------------------
# A launch traced or captured by a dispatch mode (fake tensors, make_fx, functionalization) must
# not run eagerly; a mode that only watches (bench's counter) is asked to look away while a
# resident workspace is allocated; ``tritonml/bench/memtrace.py`` defines such a watching mode.
TorchDispatchMode = _python_dispatch.TorchDispatchMode
current_dispatch_mode = _python_dispatch._get_current_dispatch_mode
disable_current_modes = _python_dispatch._disable_current_modes


# ---------------------------------------------------------------------------------------------
# Zero tensors (tritonml/core/checks.py, runtime/plan.py, routing.py)
# ---------------------------------------------------------------------------------------------
# Forward-mode AD hands over "zero tensors" (no storage, read as zeros) for unset tangents; a kernel
# cannot read them, so they are materialized or left to torch.
is_zerotensor = torch._is_zerotensor


def tensor_version(t: torch.Tensor) -> int:
    """``t``'s version counter (bumped by every in-place write): routing.py checks whether an op
    wrote its ``out``."""
    return t._version


# ---------------------------------------------------------------------------------------------
# Autograd's in-place rules (tritonml/routing_scatter.py)
# ---------------------------------------------------------------------------------------------
def leaf_or_view_of_leaf_requiring_grad(t: torch.Tensor) -> bool:
    """``t`` is a leaf that requires grad, or a view of one: torch refuses to write such a tensor
    in place while grad mode is on (routing_scatter.py lets torch raise that error itself, before
    any kernel runs). torch publishes no accessor for a view's base."""
    base = t._base if t._is_view() else None
    return t.requires_grad and (t.is_leaf or (base is not None and base.is_leaf
                                              and base.requires_grad))


# ---------------------------------------------------------------------------------------------
# Torch function modes (tritonml/routing.py, tritonml/torch_ops/define.py)
# ---------------------------------------------------------------------------------------------
# Routing keeps its mode at the bottom of this thread's torch function mode stack, above a default
# device mode (``torch.set_default_device``), which must stay lowest; the public functions take a
# direct path only when no mode is active.
function_mode_count = getattr(torch._C, "_len_torch_function_stack", None)
pop_function_mode = torch.overrides._pop_mode
push_function_mode = torch.overrides._push_mode


def device_context_type():
    """The class of ``torch.set_default_device``'s function mode (``()``: this torch has none)."""
    try:
        from torch.utils._device import DeviceContext
    except ImportError:
        return ()
    return DeviceContext


# ---------------------------------------------------------------------------------------------
# functorch, forward-mode AD and the profiler (tritonml/routing.py, tritonml/torch_ops/)
# ---------------------------------------------------------------------------------------------
# The public functions call their launcher directly only outside vmap/grad transforms, forward-mode
# AD and the autograd profiler, which must see the registered op.
_functorch = getattr(torch._C, "_functorch", None)
peek_functorch_interpreter = getattr(_functorch, "peek_interpreter_stack", None)
_is_functorch_wrapped = getattr(_functorch, "is_functorch_wrapped_tensor", None)


def is_functorch_wrapped(t: torch.Tensor) -> bool:
    """``t`` is a functorch wrapper (a vmap batched or grad tensor)."""
    return _is_functorch_wrapped is not None and _is_functorch_wrapped(t)


# The scatter family's index checks read the index's values with a kernel: inside grad and jvp
# transforms, the values of an index they wrap are the tensor inside the wrappers (the same at
# every level), and the launch runs with the transforms out of the way, so the scratch tensors it
# makes stay plain tensors a kernel can read (functorch would wrap them otherwise).
_get_unwrapped = getattr(_functorch, "get_unwrapped", None)
_is_grad_tracking = getattr(_functorch, "is_gradtrackingtensor", None)
_disable_functorch = getattr(torch._C, "_DisableFuncTorch", None)


def grad_unwrapped(t: torch.Tensor) -> torch.Tensor | None:
    """``t`` itself, or where grad/jvp transforms wrap it, the tensor inside their wrappers;
    None where some other wrapper (vmap's batching: values per batch element, functionalize)
    holds it, or torch lacks the calls."""
    while is_functorch_wrapped(t):
        if _get_unwrapped is None or _is_grad_tracking is None or not _is_grad_tracking(t):
            return None
        t = _get_unwrapped(t)
    return t


def functorch_disabled():
    """A block that torch.func transforms in progress do not see: ops on plain tensors, and
    the tensors made there, stay plain (torch's ``_DisableFuncTorch``; no-op without it)."""
    return _disable_functorch() if _disable_functorch is not None else contextlib.nullcontext()


def forward_ad_active() -> bool:
    """A forward-mode AD level is entered (``torch.autograd.forward_ad.dual_level``)."""
    return getattr(torch.autograd.forward_ad, "_current_level", -1) >= 0


def profiler_enabled() -> bool:
    """The autograd profiler is recording."""
    return bool(torch.autograd.profiler._is_profiler_enabled)


# ---------------------------------------------------------------------------------------------
# Jagged nested tensors (tritonml/torch_ops/jagged.py)
# ---------------------------------------------------------------------------------------------
# Which dim of a jagged nested tensor is ragged: torch publishes no accessor, and under
# torch.compile every size may be symbolic, so the shape alone does not tell.
def jagged_ragged_dim(t: torch.Tensor):
    """The ragged dim of a jagged nested tensor (None if this torch does not say)."""
    return getattr(t, "_ragged_idx", None)


# ---------------------------------------------------------------------------------------------
# TorchDynamo, imported when first needed (tritonml/torch_ops/define.py: compiler_disable)
# ---------------------------------------------------------------------------------------------
# ``torch.compiler.disable`` imports TorchDynamo (about 1 s); torch.compile imports it before it
# compiles anything, so what needs it can wait for its import.
def when_dynamo_imported(hook) -> None:
    """Call ``hook(module)`` once TorchDynamo (``torch._dynamo``) is imported: now if it is."""
    import wrapt
    wrapt.register_post_import_hook(hook, "torch._dynamo")


# torch.nested.nested_tensor_from_jagged asks torch.fx whether it is tracing, and torch.fx logs a
# notice the first time anyone asks ("is_fx_tracing will return true for both fx.symbolic_trace
# and torch.export...", torch 2.13): about torch's own call, nothing the user wrote. The notice is
# logged once per process (an lru_cache), so once dropped here it is not logged later either.
_FX_TRACING_LOGGER = "torch.fx._symbolic_trace"
_FX_TRACING_NOTICE = "is_fx_tracing will return true"


def _not_the_fx_tracing_notice(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(_FX_TRACING_NOTICE)


@contextlib.contextmanager
def fx_tracing_notice_dropped():
    """Within: torch.fx's notice about ``is_fx_tracing`` is not logged."""
    logger = logging.getLogger(_FX_TRACING_LOGGER)
    logger.addFilter(_not_the_fx_tracing_notice)
    try:
        yield
    finally:
        logger.removeFilter(_not_the_fx_tracing_notice)


def aot_graph_code(module, make_inputs) -> str:
    """The code of the graph AOT autograd traces from ``module`` (what Inductor compiles), on
    the inputs ``make_inputs()`` creates under a fake-tensor mode (any device, no memory)."""
    from torch._functorch.aot_autograd import aot_export_module
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=True):
        graph, _ = aot_export_module(module, make_inputs(), trace_joint=False)
    return graph.code


def missing() -> list:
    """The entries above that fell back because the installed torch lacks them."""
    return [name for name, value in (
        ("torch._C._len_torch_function_stack", function_mode_count),
        ("torch._C._functorch.peek_interpreter_stack", peek_functorch_interpreter),
        ("torch._C._functorch.is_functorch_wrapped_tensor", _is_functorch_wrapped),
        ("torch._C._functorch.get_unwrapped", _get_unwrapped),
        ("torch._C._functorch.is_gradtrackingtensor", _is_grad_tracking),
        ("torch._C._DisableFuncTorch", _disable_functorch),
    ) if value is None]
