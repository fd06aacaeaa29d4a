"""How tritonml's ops become torch ops: ``torch.ops.tritonml.<name>``.

With compiled Triton (CUDA), ops are ``torch.library.triton_op``s and every kernel launch goes
through ``torch.library.wrap_triton`` (in ``tritonml._trace``), so torch.compile and export can see
into the Triton kernels. With Triton's interpreter (CPU tensors), ``wrap_triton`` hands kernels
back unwrapped (an interpreted kernel has none of the metadata torch's tracing needs), so there the
ops are opaque ``torch.library.custom_op``s: torch.compile and export treat them as single calls
whose shapes come from the fake kernels. The schema, the fake kernels, autograd and vmap rules are
the same in both cases.
"""
import torch

from .. import _backend

NAMESPACE = "tritonml"


# torch's dispatcher would resolve a negative view (``is_neg()``) with a copy before any kernel
# of ours runs, and cannot write one back through an op that returns nothing. The kernels read
# and write such views directly (a sign flip on load or store), so the Negative key falls through.
_LIBRARY = torch.library.Library(NAMESPACE, "IMPL")


def define(name: str, *, mutates_args=()):
    """A decorator registering a function as ``torch.ops.tritonml.<name>`` (schema from its type
    hints), with ``mutates_args`` naming the arguments it writes."""
    qualname = f"{NAMESPACE}::{name}"
    if _backend.INTERPRET:
        register = torch.library.custom_op(qualname, mutates_args=mutates_args)
    else:
        register = torch.library.triton_op(qualname, mutates_args=mutates_args)

    def decorator(fn):
        op = register(fn)
        _LIBRARY.impl(name, torch.library.fallthrough_kernel, "Negative")
        return op
    return decorator
