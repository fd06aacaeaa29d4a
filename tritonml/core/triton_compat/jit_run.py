"""Steps of ``JITFunction.run`` that tritonml takes on their own: a launch's specialization
computed without a GPU (``specialize``, tritonml/bench/gpu_compile.py), and an already compiled
specialization relaunched without ``run``'s per-launch argument binding (``run_compiled`` and its
helpers, tritonml/runtime/relaunch.py).
"""
from __future__ import annotations

from triton import knobs
from triton.runtime import driver

from .registry import REQUIRED, resolve

# ---------------------------------------------------------------------------------------------
# Argument specialization without a GPU (tritonml/bench/gpu_compile.py)
# ---------------------------------------------------------------------------------------------
# ``triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=...)`` is public, but the
# signature, constexprs and divisibility attributes a launch specializes on are computed only inside
# ``JITFunction.run``, which needs a device. These two steps of ``run`` compute them from the
# arguments alone, so a compile for sm_80/sm_90 on a machine without a GPU gets exactly the
# specialization the runtime would. Checked: 3.8.0, 3.9.0 (``triton/runtime/jit.py``).
REQUIRED["triton.runtime.jit.create_function_from_signature"] = ("sig", "kparams", "backend")
REQUIRED["triton.runtime.jit.JITFunction._pack_args"] = (
    "backend", "kwargs", "bound_args", "specialization", "options")


def specialize(kernel, backend, args, meta):
    """``(signature, constexprs, attrs, options)`` of ``kernel`` launched with ``args`` and keyword
    ``meta`` (meta-parameters and options such as ``num_warps``), for ``backend``
    (``triton.compiler.make_backend(target)``); ``kernel`` is a compiled-mode ``@triton.jit``
    function."""
    create_binder = resolve("triton.runtime.jit.create_function_from_signature")
    binder = create_binder(kernel.signature, kernel.params, backend)
    bound_args, specialization, options = binder(*args, **meta)
    options, signature, constexprs, attrs = kernel._pack_args(backend, meta, bound_args,
                                                              specialization, options)
    return signature, constexprs, attrs, options


# ---------------------------------------------------------------------------------------------
# Relaunching a compiled specialization (tritonml/runtime/relaunch.py)
# ---------------------------------------------------------------------------------------------
# ``JITFunction.run`` ends by launching the ``CompiledKernel`` it found through the kernel's own
# launcher; ``run_compiled`` is that tail alone, for a specialization that has compiled already.
# Checked: 3.6.0, 3.8.0, 3.9.0 (``JITFunction.run`` and ``CompiledKernel`` in
# triton/runtime/jit.py, triton/compiler/compiler.py).
REQUIRED["triton.compiler.compiler.CompiledKernel.launch_metadata"] = ("grid", "stream")
REQUIRED["triton.compiler.compiler.CompiledKernel.run"] = ()
REQUIRED["triton.knobs.runtime"] = ()


def current_device():
    """The device compiled launches go to now, as Triton's driver names it."""
    return driver.active.get_current_device()


def parameter_names(kernel) -> tuple:
    """The names of a compiled-mode ``@triton.jit`` kernel's parameters, in order."""
    return tuple(param.name for param in kernel.params)


def mock_tensor(dtype):
    """A stand-in for a tensor of ``dtype`` in ``JITFunction.warmup`` (16-byte aligned)."""
    from triton.runtime.jit import MockTensor
    return MockTensor(dtype)


def compiled_registers(compiled) -> tuple[int, int]:
    """(registers a thread, spilled bytes) of a compiled-mode ``CompiledKernel``, read when it
    is loaded on the current device (Triton fills them in then, not at compile time)."""
    compiled._init_handles()
    return compiled.n_regs, compiled.n_spills


def run_compiled(compiled, grid: tuple, device, bound: tuple) -> None:
    """The tail of ``JITFunction.run``: ``compiled``'s own launcher on the current stream of
    ``device``, with every argument bound (the positional ones, then the meta-parameters in
    parameter order) and ``grid`` a tuple of up to three ints."""
    stream = driver.active.get_current_stream(device)
    compiled.run(*(grid + (1, 1))[:3], stream, compiled.function, compiled.packed_metadata,
                 compiled.launch_metadata(grid, stream, *bound), knobs.runtime.launch_enter_hook,
                 knobs.runtime.launch_exit_hook, *bound)
