"""Relaunching a compiled kernel specialization without ``JITFunction.run``'s argument binding.

``JITFunction.run`` binds and specializes every argument in Python on every launch: about 25 us per
launch on an H100's host with Triton 3.6, most of a small op's time. Its tail launches the
``CompiledKernel`` it found through the kernel's own launcher; once a specialization has compiled,
``launch_compiled`` and ``PreparedLaunch`` do only that tail (``triton_compat.run_compiled``). The
cache key is at least as fine as Triton's specialization (for each integer: equal to 1, divisible
by 16, and its width class; for each tensor: dtype and 16-byte alignment; every meta-parameter's
value; the device), so a key never maps to a kernel compiled for other arguments.

Kernels registered with ``guard_spills`` compile, at each specialization's first launch, without
spills where a register cap can do it (``tritonml_autotune.registers.spill_free_maxnreg``): a
launch that names no ``maxnreg`` is compiled first as ptxas chooses, and only where that spills
at the caps where the programs per SM step down. The choice is kept with the specialization. A
compile the guard cannot make or read warns once and leaves that specialization at ptxas's
choice.

``observing(callback)`` reports which way each compiled launch went ("bound": through
``JITFunction.run``; "relaunched": straight to the compiled kernel), for
benchmarks/host_overhead.py.
"""
from __future__ import annotations

import contextlib
import warnings

import torch

from tritonml_autotune.registers import spill_free_maxnreg

from ..core import triton_compat as _triton_compat
from . import caches as _caches

BOUND, RELAUNCHED = "bound", "relaunched"

_MAX_COMPILED = 4096
# key -> (CompiledKernel, names of the meta-parameters in parameter order)
_compiled: dict = _caches.register("relaunch.compiled", {})
_observers: list = []   # callbacks told BOUND or RELAUNCHED at each compiled launch
_spill_guarded: set = set()   # kernels whose launches get spill_free_meta
# (kernel, device, argument dtypes and int classes, meta items) -> the maxnreg chosen, or None
_spill_caps: dict = _caches.register("relaunch.spill_caps", {})


def guard_spills(kernel):
    """Compile ``kernel``'s specializations without spills where a register cap can (see the
    module docstring); returns ``kernel``."""
    _spill_guarded.add(kernel)
    return kernel


def spill_free_meta(kernel, grid, args, meta: dict) -> dict:
    """``meta``, with the ``maxnreg`` that compiles this specialization of a ``guard_spills``
    kernel without spills where ptxas's own choice spills; as given for other kernels and where
    ``meta`` names a ``maxnreg``. Decided once per kernel, device, argument dtypes and integer
    classes and meta-parameters, by compiling without launching (tensors stand in by dtype, so
    fake tensors in a torch.compile trace get the same choice as real ones)."""
    if kernel not in _spill_guarded or meta.get("maxnreg") is not None:
        return meta
    key = (kernel, _triton_compat.current_device(), _dtype_key(args), tuple(meta.items()))
    if key not in _spill_caps:
        mocked = tuple(_mock(a) for a in args)

        def compile_at(cap):
            capped = meta if cap is None else {**meta, "maxnreg": cap}
            return _triton_compat.compiled_registers(kernel.warmup(*mocked, grid=grid, **capped))

        try:
            _spill_caps[key] = spill_free_maxnreg(compile_at, meta.get("num_warps", 4))
        except Exception as error:
            # The cap only sets occupancy, never a result: a compile the guard cannot make or
            # read leaves the launch at ptxas's choice (a kernel that cannot compile at all
            # fails in the launch itself, with Triton's own error).
            warnings.warn(f"tritonml: could not compile {_name(kernel)} to check it for spills "
                          f"({type(error).__name__}: {error}); it launches at ptxas's own "
                          f"register choice", RuntimeWarning, stacklevel=2)
            _spill_caps[key] = None
    cap = _spill_caps[key]
    return meta if cap is None else {**meta, "maxnreg": cap}


def _name(kernel) -> str:
    fn = getattr(kernel, "fn", kernel)
    return getattr(fn, "__name__", type(kernel).__name__)


def _mock(arg):
    if isinstance(arg, torch.Tensor):
        return _triton_compat.mock_tensor(arg.dtype)
    if type(arg) is tuple:
        return tuple(_mock(a) for a in arg)
    return arg


def _dtype_key(arg):
    if isinstance(arg, torch.Tensor):
        return arg.dtype
    if type(arg) is int:
        return _int_class(arg)
    if type(arg) is tuple:
        return tuple(_dtype_key(a) for a in arg)
    return type(arg), arg


@contextlib.contextmanager
def observing(callback):
    """While active, ``callback(BOUND)`` or ``callback(RELAUNCHED)`` at each compiled launch."""
    _observers.append(callback)
    try:
        yield
    finally:
        _observers.remove(callback)


def _int_class(value: int) -> tuple:
    return (value == 1, value % 16 == 0, -2 ** 31 <= value < 2 ** 31, value < 2 ** 63)


class _NotPlain(Exception):
    """A tensor argument that is not a plain ``torch.Tensor`` (a fake or functional tensor while
    torch traces): such launches go through ``torch.library.wrap_triton``."""


def _arg_key(arg):
    kind = type(arg)
    if kind is int:
        return _int_class(arg)
    if kind is tuple:
        return tuple(_arg_key(a) for a in arg)
    if kind is torch.Tensor:
        return arg.dtype, arg.data_ptr() % 16 == 0
    if isinstance(arg, torch.Tensor):
        raise _NotPlain
    return kind, arg


def _meta_order(kernel, positional: int, meta: dict):
    """Names of ``kernel``'s parameters after the positional ones, in order, if ``meta`` gives
    every one of them (else None: such a launch is never relaunched directly)."""
    names = _triton_compat.parameter_names(kernel)[positional:]
    return names if all(name in meta for name in names) else None


def _first_launch(kernel, grid, args, meta, key):
    """Launch through ``JITFunction.run`` and remember the compiled specialization under ``key``;
    returns ``(CompiledKernel, meta names in parameter order)``, or None when it cannot be
    relaunched directly."""
    for observer in _observers:
        observer(BOUND)
    compiled = kernel[grid](*args, **spill_free_meta(kernel, grid, args, meta))
    order = _meta_order(kernel, len(args), meta)
    if compiled is None or order is None:
        return None
    if len(_compiled) >= _MAX_COMPILED:
        _compiled.clear()
    _compiled[key] = (compiled, order)
    return compiled, order


def _relaunch(compiled, grid: tuple, device, bound: tuple) -> None:
    for observer in _observers:
        observer(RELAUNCHED)
    _triton_compat.run_compiled(compiled, grid, device, bound)


def launch_compiled(kernel, grid, args, meta) -> bool:
    """``kernel[grid](*args, **meta)`` for a compiled-mode ``@triton.jit`` kernel (``grid`` a tuple
    of up to three ints), relaunching the compiled specialization directly when one exists.

    Returns False, launching nothing, when a tensor argument is not a plain ``torch.Tensor``."""
    try:
        arg_keys = tuple(_arg_key(a) for a in args)
    except _NotPlain:
        return False
    device = _triton_compat.current_device()
    key = (kernel, device, arg_keys, tuple(meta.items()))
    entry = _compiled.get(key)
    if entry is None:
        _first_launch(kernel, grid, args, meta, key)
        return True
    compiled, order = entry
    _relaunch(compiled, tuple(grid), device, (*args, *(meta[name] for name in order)))
    return True


class PreparedLaunch:
    """``kernel[grid](*tensors, *tail, **meta)`` with everything but the leading tensors fixed
    (tritonml/runtime/steps.py builds one per launch of a planned call).

    ``launch(tensors)`` relaunches the compiled specialization for those tensors' dtypes and
    alignment without rebuilding the rest of the arguments; the first launch of each goes through
    ``JITFunction.run``, sharing ``launch_compiled``'s cache. Returns False, launching nothing, for
    tensors that are not plain. Its own entries live as long as it does: in a plan, which
    ``caches.clear()`` drops."""

    def __init__(self, kernel, grid, tail, meta):
        self.kernel, self.grid, self.tail, self.meta = kernel, tuple(grid), tuple(tail), dict(meta)
        self._tail_keys = tuple(_arg_key(a) for a in self.tail)
        self._entries: dict = {}   # (device, tensor keys) -> (CompiledKernel, bound tail)

    def launch(self, tensors) -> bool:
        try:
            tensor_keys = tuple(_arg_key(t) for t in tensors)
        except _NotPlain:
            return False
        device = _triton_compat.current_device()
        entry = self._entries.get((device, tensor_keys))
        if entry is None:
            args = (*tensors, *self.tail)
            key = (self.kernel, device, tensor_keys + self._tail_keys, tuple(self.meta.items()))
            cached = _compiled.get(key)
            if cached is None:
                cached = _first_launch(self.kernel, self.grid, args, self.meta, key)
                if cached is not None:
                    self._remember(device, tensor_keys, cached)
                return True
            entry = self._remember(device, tensor_keys, cached)
        compiled, bound_tail = entry
        _relaunch(compiled, self.grid, device, (*tensors, *bound_tail))
        return True

    def _remember(self, device, tensor_keys, cached):
        compiled, order = cached
        entry = compiled, (*self.tail, *(self.meta[name] for name in order))
        self._entries[(device, tensor_keys)] = entry
        return entry
