"""The one package of tritonml that touches Triton's private API.

Everything else (the kernels, the launchers, ``benchmarks/``) goes through the names exported here
whenever it needs something Triton does not publish. Each entry says why it is needed and which
Triton versions it was checked against: 3.6.0, 3.7.1, 3.8.0 and 3.9.0, the supported range
(``registry.CHECKED_VERSIONS``; the relaunch entry also ran on an H100 with 3.6.0). Private names
can move in any Triton release; ``check()`` lists what the installed Triton lacks, and
tests/core/test_triton_compat.py runs it, so an upgrade that breaks an entry fails there, by name.

Entries, by submodule:
- ``combines``: ``sum_combine``/``prod_combine``, Triton's own sum and product combine functions.
- ``versions``: the supported Triton releases (one warning at import outside them), and the kernel
  forms that depend on the release (``FAST_ROW_GATHER``, ``LOOP_CARRIES_STATUS``).
- ``scan_reduce``: ``scan_along``/``reduce_along``, ``tl.associative_scan``/``tl.reduce`` taking a
  combine function passed as a ``tl.constexpr`` parameter (a Triton builtin in compiled mode).
- ``jit_functions``: ``is_jit_function``; ``interpreting``, under which ``@triton.jit`` functions
  decorated in compiled mode (Triton's standard library when triton was imported before tritonml;
  a user's combine defined then) run in interpreted launches (tritonml/runtime/trace.py).
- ``scalar_index``: Triton 3.6's interpreter under numpy 2.4, patched at import.
- ``jit_run``: ``specialize``, the runtime's argument specialization, to compile a launch for a GPU
  that is not there (tritonml/bench/gpu_compile.py); ``current_device``, ``parameter_names``,
  ``run_compiled``: relaunch an already compiled specialization without ``JITFunction.run``'s
  per-launch argument binding (tritonml/runtime/relaunch.py).
- ``interpreter_bfloat16``: the interpreter's bfloat16 casts and arithmetic, patched at import.
- ``traffic_hooks``: ``interpreter_hooks``, callbacks on the interpreter's memory operations and
  kernel launches, to count the bytes a kernel moves (tritonml/bench/memtrace.py).
- ``jit_errors``: ``innermost_error``, ``frames_in``: the exception a user's combine raised, inside
  Triton's wrappers (tritonml/records/state_combine.py).
- ``language_visibility``: ``make_language_visible``, so that a user's combine from a module that
  imports ``triton`` alone runs in the interpreter (tritonml/records/state_combine.py,
  tritonml/records/reduction.py).
- ``registry``: what the entries rely on, and ``check()``/``check_message()`` over it.
"""
from __future__ import annotations

# first: chooses compiled or interpreted Triton before any kernel is defined
from .. import backend as _backend  # noqa: F401

# Triton's driver, whose active driver tests stub; the launch helpers read the name in ``jit_run``,
# so replacing the object itself is done there (benchmarks/host_overhead.py).
from triton.runtime import driver

# In this order: each submodule notes what it relies on as it is imported, and ``check()`` reports
# in that order. ``versions`` warns about an unsupported Triton once Triton's combines resolved and
# before anything else is looked up; ``scalar_index`` and ``interpreter_bfloat16`` patch the
# interpreter when tritonml interprets.
from .registry import REQUIRED as _REQUIRED, check, check_message  # noqa: F401 - tests read it
from .combines import prod_combine, sum_combine
from .versions import (  # noqa: F401 - tests read _release
    FAST_ROW_GATHER, LOOP_CARRIES_STATUS, SUPPORTED_RELEASES, release as _release,
    unsupported_triton_message)
from .scan_reduce import reduce_along, scan_along
from .jit_functions import interpreting, is_jit_function
from . import scalar_index  # noqa: F401 - patches at import
from .jit_run import (
    compiled_registers, current_device, mock_tensor, parameter_names, run_compiled, specialize)
from . import interpreter_bfloat16  # noqa: F401 - patches at import
from .traffic_hooks import ATOMIC, LOAD, STORE, interpreter_hooks
from .jit_errors import frames_in, innermost_error
from .language_visibility import LANGUAGE_NOT_VISIBLE, make_language_visible

__all__ = [
    "ATOMIC", "FAST_ROW_GATHER", "LANGUAGE_NOT_VISIBLE", "LOAD", "LOOP_CARRIES_STATUS", "STORE",
    "SUPPORTED_RELEASES", "check", "check_message", "compiled_registers", "current_device",
    "driver", "frames_in", "innermost_error", "interpreter_hooks", "interpreting",
    "is_jit_function", "make_language_visible", "mock_tensor", "parameter_names", "prod_combine",
    "reduce_along", "run_compiled", "scan_along", "specialize", "sum_combine",
    "unsupported_triton_message",
]
