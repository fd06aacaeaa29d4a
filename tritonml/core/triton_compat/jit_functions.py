"""``@triton.jit`` functions in either mode: telling one from other callables
(``is_jit_function``), and running the compiled-mode ones an interpreted launch calls
(``interpreting``, tritonml/runtime/trace.py).
"""
from __future__ import annotations

import contextlib

import triton.language as tl

from .registry import private

JIT_FUNCTION = private("triton.runtime.jit.JITFunction")
INTERPRETED_FUNCTION = private("triton.runtime.interpreter.InterpretedFunction")


def is_jit_function(value) -> bool:
    """``value`` is a ``@triton.jit`` function: a ``JITFunction``, or under the interpreter the
    ``InterpretedFunction`` ``triton.jit`` makes there (tritonml.associative_scan's combine_fn).
    Checked: 3.8.0, 3.9.0 (``triton/runtime/jit.py``, ``triton/runtime/interpreter.py``)."""
    return isinstance(value, (JIT_FUNCTION, INTERPRETED_FUNCTION))


# ``triton.jit`` makes a JITFunction or an InterpretedFunction depending on the interpreter knob
# when it runs. When triton was imported before tritonml switched the interpreter on (torch imports
# it for torch.compile and nested jagged tensors), Triton's standard library (``tl.sum``,
# ``tl.cumsum``, their combines, ``tl.tensor``'s members such as ``x.sum()``) and any function a
# user decorated then are JITFunctions, whose ``__call__`` only raises "Cannot call @triton.jit'd
# outside of the scope of a kernel". During an interpreted launch, ``JITFunction.__call__`` runs the
# function as the InterpretedFunction ``triton.jit`` would have made, and ``tl.tensor``'s
# JITFunction members are bound as methods; both are put back afterwards, so compiled-mode Triton
# in the same process (``triton.compile`` for a GPU target) sees Triton unchanged. The functions
# keep their identity, which the interpreter's numpy fast paths for ``tl.sum``/``tl.cumsum`` test.
# Checked: 3.6.0, 3.7.1, 3.8.0, 3.9.0 (``triton/runtime/jit.py``: ``JITFunction.__call__``;
# ``triton/language/core.py``: ``_tensor_member_fn``).
_as_interpreted: dict = {}
_compiled_members: list | None = None


def _interpreted_call(self, *args, **kwargs):
    # by id: hashing a JITFunction walks its source for a cache key, which fails mid-launch
    entry = _as_interpreted.get(id(self))
    if entry is None:
        entry = _as_interpreted[id(self)] = (self, INTERPRETED_FUNCTION(self.fn))
    return entry[1](*args, **kwargs)


def _bound_member(function):
    def member(*args, **kwargs):
        return function(*args, **kwargs)
    return member


@contextlib.contextmanager
def interpreting():
    """Around an interpreted launch: compiled-mode ``@triton.jit`` functions it calls run through
    the interpreter. Not thread-safe on its own: interpreted launches take turns
    (tritonml/runtime/trace.py)."""
    global _compiled_members
    if _compiled_members is None:
        _compiled_members = [(name, value) for name, value in vars(tl.tensor).items()
                             if isinstance(value, JIT_FUNCTION)]
    call = JIT_FUNCTION.__dict__["__call__"]
    JIT_FUNCTION.__call__ = _interpreted_call
    for name, value in _compiled_members:
        setattr(tl.tensor, name, _bound_member(value))
    try:
        yield
    finally:
        JIT_FUNCTION.__call__ = call
        for name, value in _compiled_members:
            setattr(tl.tensor, name, value)
