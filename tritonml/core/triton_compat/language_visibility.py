"""A user's ``@triton.jit`` function from a module that imports ``triton`` alone, made runnable in
the interpreter (``make_language_visible``: tritonml/records/state_combine.py,
tritonml/records/reduction.py).
"""
from __future__ import annotations

import triton.language as tl

from .. import backend as _backend
from .jit_functions import INTERPRETED_FUNCTION
from .registry import INTERPRETER_MODULE, REQUIRED

# Under the interpreter, a @triton.jit function called from another one (a user's combine, or a
# reduction's prepare/merge/finish) runs only when its module holds triton.language (or
# triton.language.core) as a global: ``InterpretedFunction.__call__`` asserts "triton.language must
# be visible from within jit'd function" (``_patch_lang``) before it rewrites the function, and the
# rewrite (``InterpretedFunction.rewrite``, once per function) is what adds the interpreter's own
# globals, triton.language as ``tl`` among them, to the module's globals where missing. So a module
# that imports ``triton`` alone fails its first call in the interpreter. ``make_language_visible``
# rewrites such a function ahead of that call, which leaves its module as the first successful call
# would have (compiled Triton asks nothing of the module). Checked: 3.9.0
# (``triton/runtime/interpreter.py``); its tests pass on 3.6.0, 3.7.1 and 3.8.0 too.
REQUIRED[f"{INTERPRETER_MODULE}.InterpretedFunction.rewrite"] = ()
LANGUAGE_NOT_VISIBLE = "triton.language must be visible from within jit'd function"


def language_visible(fn) -> bool:
    """The module of the ``@triton.jit`` function ``fn`` holds triton.language (or its ``core``)
    as a global, as the interpreter requires of a function called from another one."""
    module_globals = getattr(getattr(fn, "fn", None), "__globals__", None)
    if module_globals is None:
        return True
    return any(value is tl or value is tl.core for value in list(module_globals.values()))


def make_language_visible(fn) -> None:
    """Under the interpreter, let ``fn`` (a ``@triton.jit`` function another one calls) run from a
    module that does not import triton.language: rewrite it now, as its first call would (see
    above). Nothing in compiled mode, for a module that already has it, or where the rewrite fails
    (the call then reports the failure)."""
    if not _backend.INTERPRET or not isinstance(fn, INTERPRETED_FUNCTION) or language_visible(fn):
        return
    rewrite = getattr(fn, "rewrite", None)
    if rewrite is None:
        return
    try:
        rewrite()
    except Exception:  # noqa: BLE001 - the launch that calls fn raises it, with its context
        pass
