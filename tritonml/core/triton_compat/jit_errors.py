"""The exception a user's ``@triton.jit`` function raised, found inside the ones Triton wraps it in
(``innermost_error``, ``frames_in``: tritonml/records/state_combine.py, for
tritonml.associative_scan's errors).

Triton's interpreter wraps an exception raised in a @triton.jit function in an InterpreterError
at every call level it passes (the user's combine, its adapter, the kernel: three times), each
holding the repr of the one inside. The exception the user's code raised is the end of the
__cause__/__context__ chain, and its traceback still holds the user's own frame. Checked: 3.8.0,
3.9.0 (``triton/runtime/interpreter.py``, ``triton/runtime/errors.py``; TritonError is the base
of InterpreterError and of the compiler's CompilationError).
"""
from __future__ import annotations

from .registry import private

_TritonError = private("triton.errors.TritonError")


def innermost_error(error: BaseException) -> BaseException:
    """The exception at the end of a chain of Triton's wrapper exceptions (itself when ``error``
    is not one)."""
    seen = set()
    while isinstance(error, _TritonError) and id(error) not in seen:
        seen.add(id(error))
        inner = error.__cause__ or error.__context__
        if inner is None:
            break
        error = inner
    return error


def frames_in(error: BaseException, filenames) -> list:
    """``(filename, function name, line)`` of each traceback entry of ``error`` and of the
    exceptions it chains to whose file is one of ``filenames``, innermost exception first."""
    import traceback

    found, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        found.extend((frame.f_code.co_filename, frame.f_code.co_name, line)
                     for frame, line in traceback.walk_tb(error.__traceback__)
                     if frame.f_code.co_filename in filenames)
        error = error.__cause__ or error.__context__
    return found[::-1]
