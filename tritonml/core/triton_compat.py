"""The one module of tritonml that touches Triton's private API.

Everything else (the kernels, the launchers, ``benchmarks/``) goes through the names defined here
whenever it needs something Triton does not publish. Each entry says why it is needed and which
Triton versions it was checked against: 3.6.0, 3.7.1, 3.8.0 and 3.9.0, the supported range
(``CHECKED_VERSIONS``; the relaunch entry also ran on an H100 with 3.6.0). Private names can
move in any Triton release; ``check()`` lists what the installed Triton lacks, and
tests/test_triton_compat.py runs it, so an upgrade that breaks an entry fails there, by name.

Entries:
- ``sum_combine``/``prod_combine``: Triton's own sum and product combine functions.
- ``scan_along``/``reduce_along``: ``tl.associative_scan``/``tl.reduce`` taking a combine function
  passed as a ``tl.constexpr`` parameter (a Triton builtin in compiled mode).
- ``specialize``: the runtime's argument specialization, to compile a launch for a GPU that is not
  there (tritonml/bench/gpu_compile.py).
- ``interpreter_hooks``: callbacks on the interpreter's memory operations and kernel launches, to
  count the bytes a kernel moves (tritonml/bench/memtrace.py).
- ``current_device``, ``parameter_names``, ``run_compiled``: relaunch an already compiled
  specialization without ``JITFunction.run``'s per-launch argument binding
  (tritonml/runtime/relaunch.py).
- ``interpreting``: ``@triton.jit`` functions decorated in compiled mode (Triton's standard library
  when triton was imported before tritonml; a user's combine defined then) run in interpreted
  launches (tritonml/runtime/trace.py).
- ``make_language_visible``: a user's combine from a module that imports ``triton`` alone runs
  in the interpreter (tritonml/records/state_combine.py, tritonml/records/reduction.py).
"""
from __future__ import annotations

import contextlib
import importlib
import inspect

# first: chooses compiled or interpreted Triton before any kernel is defined
from . import backend as _backend

import triton
import triton.language as tl
from triton import knobs
from triton.runtime import driver

CHECKED_VERSIONS = ("3.6.0", "3.7.1", "3.8.0", "3.9.0")
_INTERPRETER_MODULE = "triton.runtime.interpreter"

# What the entries below rely on, for ``check()``: dotted name -> parameters it must accept.
_REQUIRED: dict[str, tuple] = {}


def _private(path: str, parameters: tuple = ()):
    """Resolve the private Triton name ``path``, noting it (and the ``parameters`` its callers pass
    by name) for ``check()``; raise an ImportError that names this module if it is gone."""
    _REQUIRED[path] = parameters
    try:
        return _resolve(path)
    except AttributeError:
        raise ImportError(_missing_message([f"{path} (not found)"])) from None


def _resolve(path: str):
    parts = path.split(".")
    for split in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for name in parts[split:]:
            obj = getattr(obj, name)
        return obj
    raise AttributeError(path)


def _missing_message(missing: list) -> str:
    import triton

    return (f"tritonml/core/triton_compat.py relies on private Triton API that triton "
            f"{triton.__version__} lacks (checked against {', '.join(CHECKED_VERSIONS)}): "
            + "; ".join(missing))


# ---------------------------------------------------------------------------------------------
# Combine functions (tritonml/kernels/combine.py: ``add``, ``mul``)
# ---------------------------------------------------------------------------------------------
# Triton's interpreter recognizes its standard sum and product combines by identity and runs scans
# and reductions with them through numpy (``np.cumsum``, ``np.sum``); its own path for any other
# combine function is one Python call per element (``scan_along`` below avoids that). Reusing
# Triton's objects keeps CPU runs fastest and changes nothing on the GPU. Checked: 3.8.0, 3.9.0 (both
# ``triton/language/standard.py``; the identity tests are in ``triton/runtime/interpreter.py``).
sum_combine = _private("triton.language.standard._sum_combine")
prod_combine = _private("triton.language.standard._prod_combine")


# ---------------------------------------------------------------------------------------------
# Constructs Triton 3.6 compiles badly or not at all (what torch 2.11 pins, and the H100 machines
# lent for benchmarks carry): kernels/combine.py ``row_of``, kernels/lookback.py ``wait_published``
# ---------------------------------------------------------------------------------------------
def _release(version: str) -> tuple:
    """(major, minor) of a Triton version string ("3.6.0", "3.9.0+git1234")."""
    major, minor = version.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


_RELEASE = _release(triton.__version__)

# The Triton releases tritonml is tested with: the oldest is what torch 2.11 pins, the newest what
# torch 2.15 pins (README, "Supported versions"; tests/test_supported_versions.py). pyproject.toml
# caps neither end's future (a newer torch may pin a newer Triton): a Triton outside the range
# gets one warning at import instead.
SUPPORTED_RELEASES = ((3, 6), (3, 9))


def unsupported_triton_message(version: str):
    """The warning for Triton ``version``, or None where it is in ``SUPPORTED_RELEASES``."""
    oldest, newest = SUPPORTED_RELEASES
    if oldest <= _release(version) <= newest:
        return None
    return (f"tritonml is tested with Triton {oldest[0]}.{oldest[1]} to {newest[0]}.{newest[1]} "
            f"(what torch 2.11 to 2.15 pin), and triton {version} is installed: kernels may fail "
            f"to compile or run")


def _warn_if_unsupported() -> None:
    import warnings

    message = unsupported_triton_message(triton.__version__)
    if message is not None:
        warnings.warn(message, RuntimeWarning, stacklevel=3)


_warn_if_unsupported()

# ``tl.gather`` of one row of a tile compiles to a few shuffles from Triton 3.8 on. Triton 3.6
# (what the H100 machines lent for benchmarks carry) lowers it to one warp shuffle per element and
# source register: 32,768 in a 4,096-row tile, and minutes of ptxas. There ``row_of`` sums the
# row's bits instead, which costs a few more registers or loads in flight elsewhere (measured on
# 3.9: tritonml/kernels/combine.py), so it is not the choice where the gather is cheap.
FAST_ROW_GATHER = _RELEASE >= (3, 8)

# A look-back's wait loop that carries the status words it polls compiles from Triton 3.8 on, with
# a thread's loads of several words all in flight in each poll. Triton 3.6's layout pass
# (``TritonGPURemoveLayoutConversions``) fails on it (the chunked scan's float16 rows), so there
# the loop carries a count of unpublished words instead (``kernels.lookback.wait_counting``).
LOOP_CARRIES_STATUS = _RELEASE >= (3, 8)


# ---------------------------------------------------------------------------------------------
# Scan and reduce with a combine function from a constexpr parameter
# ---------------------------------------------------------------------------------------------
def _unwrap(value):
    return value.value if isinstance(value, tl.constexpr) else value


# Used in compiled mode only, but checked in either: the compiled twins below need them.
_SCAN, _REDUCE = "triton.language.core.associative_scan", "triton.language.core.reduce"
_REQUIRED["triton.language.core.builtin"] = ()
_REQUIRED[_SCAN] = ("reverse", "_semantic", "_generator")
_REQUIRED[_REDUCE] = ("keep_dims", "_semantic", "_generator")

if _backend.INTERPRET:
    # The interpreter runs ``tl.associative_scan``/``tl.reduce`` on plain Python values and swaps
    # them for its own implementations while a kernel runs, so these are ordinary functions that
    # look the builtins up at call time. Public API only; kept here beside their compiled twins.
    #
    # Triton's interpreter runs a combine function that is not one of its own element by element,
    # one Python call per element (tens of microseconds each), which makes a user-defined scan of a
    # few thousand elements take seconds. ``scan_along``/``reduce_along`` run such a combine on whole
    # tiles instead: a scan by log-step doubling (Hillis & Steele, "Data parallel algorithms",
    # 1986), a reduction by halving, each ``log2(n)`` calls on whole tiles. Both keep the left
    # operand the earlier element, so non-commutative combines stay correct; combine functions
    # are elementwise by Triton's rules, so applying one to a whole tile is what the GPU's tree
    # does lane by lane. Triton's own combines keep their numpy paths. Checked: 3.8.0, 3.9.0
    # (``triton/runtime/interpreter.py``: ScanOps.generic_scan, ReduceOps.generic_reduce).
    import numpy as _np

    _ScanOps = _private("triton.runtime.interpreter.ScanOps")
    _ReduceOps = _private("triton.runtime.interpreter.ReduceOps")

    def _combine_tiles(ops, earlier, later):
        """``combine_fn(earlier, later)`` on lists of numpy arrays of one power-of-two shape."""
        dtypes = ops._dtypes
        with _np.errstate(all="ignore"):  # integers wrap, floats overflow: as on the GPU
            result = ops.combine_fn.fn(*[ops.to_tensor(a, dt) for a, dt in zip(earlier, dtypes)],
                                       *[ops.to_tensor(b, dt) for b, dt in zip(later, dtypes)])
        result = result if isinstance(result, tuple) else (result,)
        if len(result) != len(dtypes):
            raise ValueError(f"combine function returned {len(result)} values for a state of "
                             f"{len(dtypes)}")
        shape = earlier[0].shape
        return [_np.broadcast_to(_np.asarray(r.handle.data if isinstance(r, tl.core.tensor) else r),
                                 shape).astype(a.dtype) for r, a in zip(result, earlier)]

    class _TileScanOps(_ScanOps):
        def generic_scan(self, input):
            self._dtypes = [arg.dtype for arg in input]
            data = [_np.array(arg.handle.data) for arg in input]
            length = data[0].shape[self.axis]
            keep_from = (slice(None),) * self.axis
            shift = 1
            while shift < length:
                # Every position p >= shift takes combine(data[p - shift], data[p]). Interpreter
                # tensors must keep power-of-two shapes, so the combine runs on the whole tile
                # (the first ``shift`` positions pair with wrapped-around values, discarded).
                combined = _combine_tiles(self, [_np.roll(d, shift, self.axis) for d in data],
                                          data)
                keep = keep_from + (slice(shift, None),)
                data = [d.copy() for d in data]
                for d, c in zip(data, combined):
                    d[keep] = c[keep]
                shift *= 2
            return [self.to_tensor(d, dt) for d, dt in zip(data, self._dtypes)]

    class _TileReduceOps(_ReduceOps):
        def generic_reduce(self, input):
            self._dtypes = [arg.dtype for arg in input]
            axis = self.axis
            data = [_np.array(arg.handle.data) for arg in input]
            if axis is None:
                data, axis = [d.reshape(-1) for d in data], 0
            # Tile lengths are powers of two, so every halving pairs all elements: neighbours
            # (2i, 2i + 1), the earlier one on the left.
            while data[0].shape[axis] > 1:
                pairs = data[0].shape[axis] // 2
                left = (slice(None),) * axis + (slice(0, 2 * pairs, 2),)
                right = (slice(None),) * axis + (slice(1, 2 * pairs, 2),)
                data = _combine_tiles(self, [d[left] for d in data], [d[right] for d in data])
            if not self.keep_dims:
                data = [_np.squeeze(d, axis) for d in data]
                if self.axis is None:
                    data = [d.item() for d in data]
            elif self.axis is None:
                data = [d.reshape((1,) * len(input[0].handle.data.shape)) for d in data]
            return [self.to_tensor(d, dt) for d, dt in zip(data, self._dtypes)]

    _TRITON_COMBINES = tuple(getattr(tl.standard, name) for name in (
        "_sum_combine", "_prod_combine", "_elementwise_max", "_elementwise_min",
        "_argmin_combine_tie_break_left", "_argmin_combine_tie_break_fast",
        "_argmax_combine_tie_break_left", "_argmax_combine_tie_break_fast")
        if hasattr(tl.standard, name))

    def scan_along(input, axis, combine_fn, reverse=False):
        """``tl.associative_scan`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        combine_fn = _unwrap(combine_fn)
        if any(combine_fn is fn for fn in _TRITON_COMBINES):
            return tl.associative_scan(input, axis, combine_fn, reverse=reverse)
        return _TileScanOps(axis, combine_fn, reverse).apply(input)

    def reduce_along(input, axis, combine_fn, keep_dims=False):
        """``tl.reduce`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        combine_fn = _unwrap(combine_fn)
        if any(combine_fn is fn for fn in _TRITON_COMBINES):
            return tl.reduce(input, axis, combine_fn, keep_dims=keep_dims)
        return _TileReduceOps(axis, combine_fn, keep_dims).apply(input)
else:
    # Compiled Triton hands a function passed as a constexpr argument over wrapped in
    # ``tl.constexpr``, which ``tl.associative_scan``/``tl.reduce`` do not unwrap when called from
    # a ``@triton.jit`` function. A builtin (``tl.core.builtin``) receives its arguments as the code
    # generator holds them, unwraps the function, and calls the builtins with the code generator's
    # private ``_semantic``/``_generator`` keywords, as Triton's own builtins call each other.
    # Checked: 3.8.0, 3.9.0 (``triton/language/core.py``: builtin, associative_scan, reduce).
    _builtin = _private("triton.language.core.builtin")
    _associative_scan = _private(_SCAN, _REQUIRED[_SCAN])
    _reduce = _private(_REDUCE, _REQUIRED[_REDUCE])

    @_builtin
    def scan_along(input, axis, combine_fn, reverse=False, _semantic=None, _generator=None):
        """``tl.associative_scan`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        return _associative_scan(input, axis, _unwrap(combine_fn), reverse=reverse,
                                 _semantic=_semantic, _generator=_generator)

    @_builtin
    def reduce_along(input, axis, combine_fn, keep_dims=False, _semantic=None, _generator=None):
        """``tl.reduce`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        return _reduce(input, axis, _unwrap(combine_fn), keep_dims=keep_dims,
                       _semantic=_semantic, _generator=_generator)


def is_jit_function(value) -> bool:
    """``value`` is a ``@triton.jit`` function: a ``JITFunction``, or under the interpreter the
    ``InterpretedFunction`` ``triton.jit`` makes there (tritonml.associative_scan's combine_fn).
    Checked: 3.8.0, 3.9.0 (``triton/runtime/jit.py``, ``triton/runtime/interpreter.py``)."""
    return isinstance(value, (_JIT_FUNCTION, _INTERPRETED_FUNCTION))


_JIT_FUNCTION = _private("triton.runtime.jit.JITFunction")
_INTERPRETED_FUNCTION = _private("triton.runtime.interpreter.InterpretedFunction")


# ---------------------------------------------------------------------------------------------
# Compiled-mode functions called from interpreted kernels
# ---------------------------------------------------------------------------------------------
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
        entry = _as_interpreted[id(self)] = (self, _INTERPRETED_FUNCTION(self.fn))
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
                             if isinstance(value, _JIT_FUNCTION)]
    call = _JIT_FUNCTION.__dict__["__call__"]
    _JIT_FUNCTION.__call__ = _interpreted_call
    for name, value in _compiled_members:
        setattr(tl.tensor, name, _bound_member(value))
    try:
        yield
    finally:
        _JIT_FUNCTION.__call__ = call
        for name, value in _compiled_members:
            setattr(tl.tensor, name, value)


# ---------------------------------------------------------------------------------------------
# Triton 3.6's interpreter under numpy 2.4
# ---------------------------------------------------------------------------------------------
# A scalar in the interpreter is a one-element numpy array of shape (1,), and Triton 3.6 turns it
# into a Python int (``range(start, tensor_end)``, an index) with ``int(data)``, which numpy 2.4
# refuses for arrays of rank > 0 ("only 0-dimensional arrays can be converted to Python scalars":
# every kernel with a loop failed); 3.7.1 and later read ``int(data.squeeze())``.
# ``_patch_lang_tensor`` installs that method on every launch, so before 3.8 it is wrapped to
# install the later one (on 3.7.1 the same method again; 3.7.0, torch 2.12.0's, was not looked at).
# Checked: 3.6.0, 3.7.1, 3.8.0 (``triton/runtime/interpreter.py``, ``_patch_lang_tensor``).
INDEX_NEEDS_SQUEEZE = _RELEASE < (3, 8)


def _squeezing_index_patch(original):
    def patch_lang_tensor(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))
    patch_lang_tensor.__wrapped__ = original
    return patch_lang_tensor


if INDEX_NEEDS_SQUEEZE and _backend.INTERPRET:
    _interpreter = importlib.import_module(_INTERPRETER_MODULE)
    _interpreter._patch_lang_tensor = _squeezing_index_patch(
        _private(f"{_INTERPRETER_MODULE}._patch_lang_tensor"))


# ---------------------------------------------------------------------------------------------
# Argument specialization without a GPU (tritonml/bench/gpu_compile.py)
# ---------------------------------------------------------------------------------------------
# ``triton.compile(ASTSource(kernel, signature, constexprs, attrs), target=...)`` is public, but the
# signature, constexprs and divisibility attributes a launch specializes on are computed only inside
# ``JITFunction.run``, which needs a device. These two steps of ``run`` compute them from the
# arguments alone, so a compile for sm_80/sm_90 on a machine without a GPU gets exactly the
# specialization the runtime would. Checked: 3.8.0, 3.9.0 (``triton/runtime/jit.py``).
_REQUIRED["triton.runtime.jit.create_function_from_signature"] = ("sig", "kparams", "backend")
_REQUIRED["triton.runtime.jit.JITFunction._pack_args"] = (
    "backend", "kwargs", "bound_args", "specialization", "options")


def specialize(kernel, backend, args, meta):
    """``(signature, constexprs, attrs, options)`` of ``kernel`` launched with ``args`` and keyword
    ``meta`` (meta-parameters and options such as ``num_warps``), for ``backend``
    (``triton.compiler.make_backend(target)``); ``kernel`` is a compiled-mode ``@triton.jit``
    function."""
    create_binder = _resolve("triton.runtime.jit.create_function_from_signature")
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
_REQUIRED["triton.compiler.compiler.CompiledKernel.launch_metadata"] = ("grid", "stream")
_REQUIRED["triton.compiler.compiler.CompiledKernel.run"] = ()
_REQUIRED["triton.knobs.runtime"] = ()


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


# ---------------------------------------------------------------------------------------------
# bfloat16 in the interpreter
# ---------------------------------------------------------------------------------------------
# Triton's interpreter keeps bfloat16 values as uint16 bit patterns and gets them wrong three ways:
# float32 -> bfloat16 truncates toward zero (the GPU rounds to nearest even), a conversion from any
# other type reinterprets the converted integer as bits (2.625 from float64 becomes 1.8e-40), and
# arithmetic on bfloat16 operands computes on the bit patterns. ``InterpreterBuilder``'s casts and
# elementwise operations are wrapped so that bfloat16 operands are computed on as float32 values and
# results rounded once to nearest even (``tritonml/core/bfloat16.py``), as torch and the compiled
# kernels do. Installed at import when tritonml interprets; every other type is left to Triton.
# Checked: 3.8.0, 3.9.0 (``triton/runtime/interpreter.py``: InterpreterBuilder.cast_impl,
# create_fp_to_fp, binary_op, unary_op, ternary_op, create_fma, create_rsqrt, create_erf).
_BF16_ELEMENTWISE = ("binary_op", "unary_op", "ternary_op", "create_fma", "create_rsqrt",
                     "create_erf")
_REQUIRED.update({f"{_INTERPRETER_MODULE}.InterpreterBuilder.{name}": ()
                  for name in ("cast_impl", "create_fp_to_fp", *_BF16_ELEMENTWISE)})


def _install_interpreter_bfloat16():
    import numpy as _np

    from . import bfloat16 as _bfloat16

    interpreter = importlib.import_module(_INTERPRETER_MODULE)
    builder, handle_type = interpreter.InterpreterBuilder, interpreter.TensorHandle
    if getattr(builder, "_tritonml_bfloat16", False):
        return

    def is_bf16(value) -> bool:
        return (isinstance(value, handle_type) and value.dtype.scalar == tl.bfloat16
                and value.data.dtype == _np.uint16)

    def as_float32(value):
        return handle_type(_bfloat16.to_float32(value.data), tl.float32) if is_bf16(value) else value

    original_cast = builder.cast_impl

    def cast_impl(self, src, dst_type):
        if dst_type.scalar == tl.bfloat16 and not is_bf16(src):
            return handle_type(_bfloat16.from_values(src.data), tl.bfloat16)
        if is_bf16(src) and dst_type.scalar != tl.bfloat16:
            return original_cast(self, as_float32(src), dst_type)
        return original_cast(self, src, dst_type)

    original_fp_to_fp = builder.create_fp_to_fp
    toward_zero = interpreter._ir.ROUNDING_MODE.RTZ

    def create_fp_to_fp(self, src, dst_type, rounding_mode):
        # Rounding toward zero (asked for by name) is what Triton's own conversion does.
        if (is_bf16(src) or dst_type.scalar == tl.bfloat16) and rounding_mode != toward_zero:
            return cast_impl(self, src, dst_type)
        return original_fp_to_fp(self, src, dst_type, rounding_mode)

    def elementwise(original):
        def wrapper(self, *args, **kwargs):
            if not any(is_bf16(a) for a in (*args, *kwargs.values())):
                return original(self, *args, **kwargs)
            result = original(self, *(as_float32(a) for a in args),
                              **{k: as_float32(v) for k, v in kwargs.items()})
            if result.data.dtype == bool:  # a comparison
                return handle_type(result.data, tl.int1)
            return handle_type(_bfloat16.from_values(result.data), tl.bfloat16)
        wrapper.__wrapped__ = original
        return wrapper

    builder.cast_impl = cast_impl
    builder.create_fp_to_fp = create_fp_to_fp
    for name in _BF16_ELEMENTWISE:
        setattr(builder, name, elementwise(getattr(builder, name)))
    builder._tritonml_bfloat16 = True


if _backend.INTERPRET:
    _install_interpreter_bfloat16()


# ---------------------------------------------------------------------------------------------
# Interpreter hooks (tritonml/bench/memtrace.py)
# ---------------------------------------------------------------------------------------------
# Triton has no public hook on the memory traffic of an interpreted kernel. The interpreter's
# builder performs every global load, store and atomic (descriptor loads and stores go through the
# masked ones), and ``GridExecutor.__call__`` runs one kernel launch; wrapping them observes the
# traffic lane by lane. Pointer and mask arguments are found by parameter name, which is the same
# in both versions checked although the other parameters differ (3.8.0 passes cache modifier and
# eviction policy, 3.9.0 a cache policy). The atomic load, store and poll operations are new in
# 3.9.0; absent, they are skipped. Checked: 3.8.0, 3.9.0 (``triton/runtime/interpreter.py``).
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
_INTERPRETER = _INTERPRETER_MODULE
_REQUIRED.update({f"{_INTERPRETER}.InterpreterBuilder.{name}": (pointer, mask) if mask else (pointer,)
                  for name, _, pointer, mask in _MEMORY_METHODS
                  if name not in _OPTIONAL_MEMORY_METHODS})
_REQUIRED[f"{_INTERPRETER}.GridExecutor.__call__"] = ()
_REQUIRED[f"{_INTERPRETER}.GridExecutor.__init__"] = ("fn", "grid")  # read as attributes
# ``.data`` (numpy array) of pointer and mask handles; ``get_element_ty()`` of a pointer handle.
_REQUIRED[f"{_INTERPRETER}.TensorHandle"] = ("data",)
_REQUIRED[f"{_INTERPRETER}.TensorHandle.get_element_ty"] = ()


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
            raise RuntimeError(_missing_message([f"{_INTERPRETER}.InterpreterBuilder.{name}"]))
        saved.append((builder, name, original))
        setattr(builder, name, _hooked_memory_method(original, kind, pointer, mask, on_access, depth))
    saved.append((executor, "__call__", executor.__dict__["__call__"]))
    executor.__call__ = _hooked_launch(executor.__dict__["__call__"], on_launch)
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


# ---------------------------------------------------------------------------------------------
# Errors raised inside a user's combine function (tritonml.associative_scan)
# ---------------------------------------------------------------------------------------------
# Triton's interpreter wraps an exception raised in a @triton.jit function in an InterpreterError
# at every call level it passes (the user's combine, its adapter, the kernel: three times), each
# holding the repr of the one inside. The exception the user's code raised is the end of the
# __cause__/__context__ chain, and its traceback still holds the user's own frame. Checked: 3.8.0,
# 3.9.0 (``triton/runtime/interpreter.py``, ``triton/runtime/errors.py``; TritonError is the base
# of InterpreterError and of the compiler's CompilationError).
_TritonError = _private("triton.errors.TritonError")


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
_REQUIRED[f"{_INTERPRETER_MODULE}.InterpretedFunction.rewrite"] = ()
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
    if not _backend.INTERPRET or not isinstance(fn, _INTERPRETED_FUNCTION) or language_visible(fn):
        return
    rewrite = getattr(fn, "rewrite", None)
    if rewrite is None:
        return
    try:
        rewrite()
    except Exception:  # noqa: BLE001 - the launch that calls fn raises it, with its context
        pass


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


# ---------------------------------------------------------------------------------------------
# Checking the installed Triton
# ---------------------------------------------------------------------------------------------
def check() -> list:
    """What the installed Triton lacks of the private API this module relies on: one line per
    missing name or parameter, naming it; empty when everything is there."""
    missing = []
    for path, parameters in _REQUIRED.items():
        try:
            obj = _resolve(path)
        except AttributeError:
            missing.append(f"{path} (not found)")
            continue
        if not parameters:
            continue
        try:
            accepted = inspect.signature(obj).parameters
        except (TypeError, ValueError):
            missing.append(f"{path} (no signature to check parameters {', '.join(parameters)})")
            continue
        absent = [p for p in parameters if p not in accepted]
        if absent:
            missing.append(f"{path} (no parameter {', '.join(absent)})")
    return missing


def check_message(missing: list) -> str:
    """The message a failed ``check()`` is reported with."""
    return _missing_message(missing)
