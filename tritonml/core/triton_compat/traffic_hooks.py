"""Callbacks on what interpreted kernels do, for counting the bytes a kernel moves
(``interpreter_hooks``, tritonml/bench/memtrace.py).

Triton has no public hook on the memory traffic of an interpreted kernel. The interpreter's
builder performs every global load, store and atomic (descriptor loads and stores go through the
masked ones), and ``GridExecutor.__call__`` runs one kernel launch; wrapping them observes the
traffic lane by lane. Pointer and mask arguments are found by parameter name, which is the same
in both versions checked although the other parameters differ (3.8.0 passes cache modifier and
eviction policy, 3.9.0 a cache policy). The atomic load, store and poll operations are new in
3.9.0; absent, they are skipped. Checked: 3.8.0, 3.9.0 (``triton/runtime/interpreter.py``).
"""
from __future__ import annotations

import contextlib
import importlib
import inspect

from .registry import INTERPRETER_MODULE as _INTERPRETER, REQUIRED, missing_message

LOAD, STORE, ATOMIC = "load", "store", "atomic"

# (InterpreterBuilder method, kind, pointer parameter, mask parameter or None: every lane)
_MEMORY_METHODS = (
    ("create_load", LOAD, "ptr", None),
    ("create_masked_load", LOAD, "ptrs", "mask"),
    ("create_store", STORE, "ptr", None),
    ("create_masked_store", STORE, "ptrs", "mask"),
    ("create_atomic_rmw", ATOMIC, "ptr", "mask"),
    ("create_atomic_cas", ATOMIC, "ptr", None),
    ("create_atomic_load", ATOMIC, "ptr", "mask"),
    ("create_atomic_store", ATOMIC, "ptr", "mask"),
    ("create_atomic_poll", ATOMIC, "ptr", None),
)
_OPTIONAL_MEMORY_METHODS = {"create_atomic_load", "create_atomic_store", "create_atomic_poll"}
REQUIRED.update({f"{_INTERPRETER}.InterpreterBuilder.{name}": (pointer, mask) if mask else (pointer,)
                 for name, _, pointer, mask in _MEMORY_METHODS
                 if name not in _OPTIONAL_MEMORY_METHODS})
REQUIRED[f"{_INTERPRETER}.GridExecutor.__call__"] = ()
REQUIRED[f"{_INTERPRETER}.GridExecutor.__init__"] = ("fn", "grid")  # read as attributes
# ``.data`` (numpy array) of pointer and mask handles; ``get_element_ty()`` of a pointer handle.
REQUIRED[f"{_INTERPRETER}.TensorHandle"] = ("data",)
REQUIRED[f"{_INTERPRETER}.TensorHandle.get_element_ty"] = ()


def _hooked_memory_method(original, kind, pointer, mask_name, on_access, depth):
    """Report one access per outermost call: ``create_load`` calls ``create_masked_load`` and atomic
    loads call masked loads, which are one access, not two."""
    signature = inspect.signature(original)

    def wrapper(self, *args, **kwargs):
        outermost = depth[0] == 0
        depth[0] += 1
        try:
            if outermost:
                bound = signature.bind(self, *args, **kwargs).arguments
                ptrs = bound[pointer]
                mask = bound.get(mask_name) if mask_name is not None else None
                elem_bytes = max(1, ptrs.get_element_ty().primitive_bitwidth // 8)
                on_access(kind, ptrs.data, mask.data if mask is not None else None, elem_bytes)
            return original(self, *args, **kwargs)
        finally:
            depth[0] -= 1
    wrapper.__wrapped__ = original
    return wrapper


def _hooked_launch(original, on_launch):
    def wrapper(self, *args, **kwargs):
        with on_launch(getattr(self.fn, "__name__", "<kernel>"), self.grid):
            return original(self, *args, **kwargs)
    wrapper.__wrapped__ = original
    return wrapper


@contextlib.contextmanager
def interpreter_hooks(on_access, on_launch):
    """While active, Triton's interpreter reports what interpreted kernels do; restored on exit.

    on_access(kind, addresses, mask, elem_bytes): one global memory operation; ``kind`` is ``LOAD``,
        ``STORE`` or ``ATOMIC``, ``addresses`` a numpy array of byte addresses, ``mask`` a numpy
        boolean array broadcastable to it (None: every lane), ``elem_bytes`` the element size.
    on_launch(name, grid): a context manager entered around each kernel launch; ``grid`` is the
        launch's grid (a tuple, or the callable it was given as).
    """
    interpreter = importlib.import_module(_INTERPRETER)
    builder, executor = interpreter.InterpreterBuilder, interpreter.GridExecutor
    depth = [0]
    saved = []
    for name, kind, pointer, mask in _MEMORY_METHODS:
        original = builder.__dict__.get(name)
        if original is None:
            if name in _OPTIONAL_MEMORY_METHODS:
                continue
            raise RuntimeError(missing_message([f"{_INTERPRETER}.InterpreterBuilder.{name}"]))
        saved.append((builder, name, original))
        setattr(builder, name, _hooked_memory_method(original, kind, pointer, mask, on_access, depth))
    saved.append((executor, "__call__", executor.__dict__["__call__"]))
    executor.__call__ = _hooked_launch(executor.__dict__["__call__"], on_launch)
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)
