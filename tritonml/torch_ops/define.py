"""How tritonml's ops become torch ops: ``torch.ops.tritonml.<name>``.

With compiled Triton (CUDA), ops are ``torch.library.triton_op``s and every kernel launch goes
through ``torch.library.wrap_triton`` (in ``tritonml.runtime.trace``), so torch.compile and export
can see into the Triton kernels. With Triton's interpreter (CPU tensors), ``wrap_triton`` hands
kernels back unwrapped (an interpreted kernel has none of the metadata torch's tracing needs), so
there the ops are opaque ``torch.library.custom_op``s: torch.compile and export treat them as single
calls whose shapes come from the fake kernels. The schema, the fake kernels, autograd and vmap rules
are the same in both cases.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Iterable, TypeVar, cast

import torch

if TYPE_CHECKING:
    from ..core.torch_compat import CustomOpDef

from ..core import backend as _backend, torch_compat as _torch_compat

NAMESPACE = "tritonml"

_F = TypeVar("_F", bound=Callable[..., Any])


def compiler_disable(fn: _F, *, reason: str | None = None) -> _F:
    """``torch.compiler.disable(fn)`` (torch.compile runs ``fn`` eagerly: a graph break), typed
    as ``fn`` itself: torch's own annotation loses the signature, so type checkers would see
    the public functions it wraps as untyped.

    Made when TorchDynamo is imported, not before: ``torch.compiler.disable`` imports it (about
    1 s), and nothing can be compiled before it is loaded. Until then ``fn`` is called as is."""
    disabled: list[Callable[..., Any]] = []

    def make(_dynamo_module=None):
        disabled.append(torch.compiler.disable(fn, reason=reason))

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return (disabled[0] if disabled else fn)(*args, **kwargs)

    _torch_compat.when_dynamo_imported(make)
    return cast(_F, call)


# torch's dispatcher would resolve a negative view (``is_neg()``) with a copy before any kernel
# of ours runs, and cannot write one back through an op that returns nothing. The kernels read
# and write such views directly (a sign flip on load or store), so the Negative key falls through.
_LIBRARY = torch.library.Library(NAMESPACE, "IMPL")


def define(name: str, *, mutates_args: Iterable[str] = (),
           opaque: bool = False) -> Callable[[Callable[..., Any]], CustomOpDef]:
    """A decorator registering a function as ``torch.ops.tritonml.<name>`` (schema from its type
    hints), with ``mutates_args`` naming the arguments it writes. ``opaque``: a ``custom_op`` with
    compiled Triton too, for ops whose launches pass tensors inside tuples (several state
    components: ``PTR_TUPLES``), which torch's tracing of Triton kernels does not see: traced
    into, such a launch would look like it writes nothing and be dropped from the graph."""
    qualname = f"{NAMESPACE}::{name}"
    register: Callable[[Callable[..., Any]], CustomOpDef]
    if _backend.INTERPRET or opaque:
        # custom_op without fn returns the decorator (its annotation is a union of both forms)
        register = cast(Callable[[Callable[..., Any]], "CustomOpDef"],
                        torch.library.custom_op(qualname, mutates_args=mutates_args))
    else:
        register = torch.library.triton_op(qualname, mutates_args=mutates_args)

    def decorator(fn: Callable[..., Any]) -> CustomOpDef:
        op = register(fn)
        _LIBRARY.impl(name, torch.library.fallthrough_kernel, "Negative")
        return op
    return decorator


def differentiable(op: CustomOpDef, setup_context: Callable[..., Any],
                   backward: Callable[..., Any],
                   jvp: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """Register ``backward`` as ``op``'s autograd formula, and return ``op`` as an
    ``autograd.Function`` with the same formula for the public functions to call.

    ``jvp(ctx, *tangents)``, if given, is the forward-mode formula (``torch.func.jvp``, ``jacfwd``,
    ``torch.autograd.forward_ad``): ``setup_context`` saves what it needs with
    ``ctx.save_for_forward``; it returns the outputs' tangents. It serves the Function only:
    torch.library's ``register_autograd`` takes no jvp (torch gives ``torch.ops.tritonml.*``
    called directly a zero tangent), so under torch.compile a call inside a forward-mode level
    runs the Function eagerly (a graph break; an error naming the op under fullgraph=True).

    The registered formula serves ``torch.ops.tritonml.*`` called directly and torch.compile; the
    Function adds what torch's generated one lacks, support for ``torch.func`` transforms (grad,
    jacrev, vmap of grad): it has a ``setup_context`` and its vmap rule is generated from the op's.
    """
    op.register_autograd(backward, setup_context=setup_context)

    def forward(*args):
        return op(*_unpacked(args))

    def setup(ctx, inputs, output):
        setup_context(ctx, _unpacked(inputs), output)

    # Named after the op, so grad_fn reads CumulativeSumBackward, ReduceBackward, ...
    name = "".join(part.title() for part in op._name.split("_"))
    methods: dict[str, Any] = dict(generate_vmap_rule=True, forward=staticmethod(forward),
                   setup_context=staticmethod(setup), backward=staticmethod(backward))
    if jvp is not None:
        # The tangent formula runs eagerly even when reached from compiled code: Dynamo compiling
        # its frames piecewise, on functorch's wrapped tensors in mid-transform, lost tangents
        # (backend="eager", torch 2.13).
        methods["jvp"] = staticmethod(compiler_disable(jvp))
    function = type(name, (torch.autograd.Function,), methods)

    def eager_forward_mode(*args):
        return function.apply(*_packed(args))
    eager_forward_mode = compiler_disable(
        eager_forward_mode,
        reason=f"tritonml.{op._name}: forward-mode AD (torch.func.jvp, jacfwd, forward_ad) runs "
               "tritonml's ops eagerly: Dynamo does not trace an autograd.Function with a jvp, and "
               "a torch.library op has no forward-mode formula")

    def call(*args):
        # torch.compile traces the op itself (Dynamo cannot trace this Function around it), and
        # AOTAutograd differentiates it with the registered formula. That formula has no
        # forward mode (torch.library's register_autograd takes no jvp; the op's tangent would
        # be silently zero), so inside a forward-mode level the Function runs eagerly: a graph
        # break, or under fullgraph=True an error naming the op.
        if torch.compiler.is_compiling():
            if jvp is not None and _torch_compat.forward_ad_active():
                return eager_forward_mode(*args)
            return op(*args)
        return function.apply(*_packed(args))
    return call


class _Packed:
    """A list argument (an ``int[]`` of the schema: axes) carried through an
    ``autograd.Function`` as one object. torch.func's generated vmap rule gives a list one in-dim
    per element but one tangent, so forward mode under vmap of a Function taking a list (jacfwd
    of jacrev, ``torch.func.hessian``, where a backward formula runs the op again) failed in torch
    2.13 ("flat_bdims must not be None", or a pytree of 5 leaves for 6 in-dims). An instance of
    an unregistered class is one pytree leaf."""
    __slots__ = ("items",)

    def __init__(self, items: list):
        self.items = items


def _packed(args: tuple) -> tuple:
    return tuple(_Packed(a) if isinstance(a, list) else a for a in args)


def _unpacked(args: tuple) -> tuple:
    return tuple(a.items if isinstance(a, _Packed) else a for a in args)


def batch_first(x, x_bdim, out, out_bdim):
    """For the vmap rule of an out= op: ``(x, out)`` with the batch dim first (an unbatched x is
    broadcast over it), or None when neither is batched. An unbatched ``out`` for a batched ``x``
    is an error: each batch element writes its own result."""
    if out_bdim is None:
        if x_bdim is not None:
            raise ValueError("out: under vmap, out must be batched when x is (each batch "
                             "element writes its own result)")
        return None
    out = out.movedim(out_bdim, 0)
    x = x.movedim(x_bdim, 0) if x_bdim is not None else x.expand(out.shape[0], *x.shape)
    return x, out


# ---------------------------------------------------------------------------------------------
# Calling the launcher directly
# ---------------------------------------------------------------------------------------------
# A custom op's Python layers (dispatcher keys, autograd wrapper, ADInplaceOrView) cost over
# 100 us of host time per call, many times a small kernel's run time. In plain eager code they do
# nothing the launcher does not: no autograd graph to record, no transform, mode or tracer to
# consult. The public functions then call the launcher directly; everywhere else they call the op.
# torch's private state queries below have no public equivalent; each is looked up once, and a
# torch without one makes every call go through the op (correct, only slower).
_peek_functorch = _torch_compat.peek_functorch_interpreter
_len_function_modes = _torch_compat.function_mode_count
_DIRECT_CALLS_POSSIBLE = _peek_functorch is not None and _len_function_modes is not None


def direct_call_allowed(x, out=None, inputs=()) -> bool:
    """True when calling the launcher on ``x`` (and ``out``, and the further tensor ``inputs``,
    such as a scan's initial) is indistinguishable from calling the registered op: plain tensors,
    nothing to differentiate (in reverse or forward mode: a dual tensor of
    ``torch.autograd.forward_ad`` is a plain tensor that does not require grad), and no compile,
    trace, torch.func transform, torch function/dispatch mode or profiler in progress."""
    tensors = (x, *inputs) if out is None else (x, out, *inputs)
    if not _DIRECT_CALLS_POSSIBLE or any(type(t) is not torch.Tensor for t in tensors):
        return False
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return False
    # (both callables are set: _DIRECT_CALLS_POSSIBLE)
    return not (torch.compiler.is_compiling()
                or torch.jit.is_tracing()  # pyright: ignore[reportPrivateImportUsage]
                or _peek_functorch() is not None  # pyright: ignore[reportOptionalCall]
                or _len_function_modes()  # pyright: ignore[reportOptionalCall]
                or _torch_compat.forward_ad_active()
                or _torch_compat.current_dispatch_mode() is not None
                or _torch_compat.profiler_enabled())


def mutated(t: torch.Tensor) -> None:
    """What the op's ADInplaceOrView kernel does for an argument it mutates: bump the version
    counter, so autograd notices that a tensor it saved was overwritten."""
    torch.autograd.graph.increment_version(t)
