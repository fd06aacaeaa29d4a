"""The two forms of a combine function the scan kernels take (tritonml/kernels/scan.py), made from
the function a user writes.

The kernels combine *states*, tuples of components. ``COMBINE(a, b)`` takes two state tuples and
returns one (carries, tile totals); ``SCAN_COMBINE`` is what ``tl.associative_scan`` calls on a
tuple of tensors: the 2 * N component scalars, flat. A user writes one function; this module
generates the other form around it, once per (function, arity, flagged), as ``@triton.jit``
source (Triton compiles functions from their source, so the adapter's text is registered in
``linecache``, where ``inspect`` finds it).

- ``state_adapters(fn, arity, flagged)``: ``fn(a, b)`` of two state tuples
  (``tritonml.associative_scan``). The flat form converts each returned component to its operand's
  type (the state's accumulation dtype), so a combine whose arithmetic promotes (an int64 index
  times a float) still scans in fixed types. ``flagged``: the state has one more component, a
  "holds elements" flag (int1) for scans without an identity; where one operand's flag is clear
  the result is the other operand, so padding never reaches ``fn``'s results.
- ``segmented_adapters(fn, arity)``: the segmented lift of a tuple-state combine, for the segment
  kernel: a flag component starts a new segment.
- ``scalar_adapter(fn)``: the state form of a one-component combine written on scalars
  (``ScanCombine``); its flat form is ``fn`` itself.

``CombineError`` / ``combine_error`` / ``reduction_error``: an exception raised while a user's
function (a scan's combine, a ``Reduction``'s) runs, reported once, naming the function and its
failing line (Triton's interpreter wraps it at every level).

Every generated function is an attribute of this module by a name that encodes what it was made
from (``__getattr__`` rebuilds it on first use), so ``module:qualname`` finds it again by import,
in another process too (tritonml/bench/gpu_compile.py describes launches that way).
"""
from __future__ import annotations

import importlib
import linecache
from typing import Optional

# interpreted or compiled Triton, chosen before any kernel is defined
from ..core import backend as _backend  # noqa: F401

import triton
import triton.language as tl

from ..core import triton_compat as _triton_compat
from ..runtime import caches as _caches

_PREFIX = "tritonml_state_"
_ADAPTER_FILE = "<tritonml combine adapter {name}>"


class CombineError(RuntimeError):
    """A user's combine function failed while a scan ran it, or a ``Reduction``'s function
    failed or breaks the reduction's rules.

    Raised by ``tritonml.associative_scan`` (and the scans built on it) and by
    ``tritonml.reduce_with`` and ``segment_reduce`` with a ``Reduction``; the message gives the
    function's qualified name, file:line, the line and its error once. A ``Reduction``'s
    function of the wrong arity (parameters, or a ``return`` of a tuple of the wrong length) is
    refused before any launch, ``original`` then the ValueError or TypeError stating the rule.

    Attributes:
        combine: Its qualified name (``module.qualname``).
        filename: The file of the function that failed (None where it cannot be told).
        lineno: The line of the function that failed (None where it cannot be told).
        original: The exception the function raised (its type and traceback as raised, e.g. a
            NameError).

    Example:
        >>> import tritonml
        >>> error = tritonml.CombineError("m.f failed", "m.f", "m.py", 3, NameError("y"))
        >>> isinstance(error, RuntimeError), error.combine, error.lineno, error.original
        (True, 'm.f', 3, NameError('y'))
    """

    combine: str
    filename: Optional[str]
    lineno: Optional[int]
    original: BaseException

    def __init__(self, message: str, combine: str, filename: Optional[str],
                 lineno: Optional[int], original: BaseException) -> None:
        super().__init__(message)
        self.combine, self.filename, self.lineno, self.original = (combine, filename, lineno,
                                                                   original)


def qualified_name(fn) -> str:
    return f"{fn.fn.__module__}.{fn.fn.__qualname__}"


def where(fn, lineno=None) -> str:
    """``file:line`` of the user's function ``fn`` (its ``def`` without ``lineno``)."""
    code = fn.fn.__code__
    return f"{code.co_filename}:{lineno if lineno is not None else code.co_firstlineno}"


def combine_error(error: BaseException, fn, arity: int):
    """The ``CombineError`` for ``error``, raised by a launch that ran the user's combine ``fn``
    over ``arity`` components, or None when no frame of ``fn`` or of its adapters is in its
    traceback (the failure is not the combine's)."""
    import linecache

    from ..core.triton_compat import LANGUAGE_NOT_VISIBLE, frames_in, innermost_error

    code = fn.fn.__code__
    adapters = {_ADAPTER_FILE.format(name=f.fn.__name__)
                for key, f in _built.items() if key[0] is fn}
    frames = frames_in(error, {code.co_filename} | adapters)
    user = [f for f in frames if f[0] == code.co_filename and f[1] == code.co_name]
    if not frames:
        return None
    original = innermost_error(error)
    name = qualified_name(fn)
    lineno = user[0][2] if user else None
    text = f"{type(original).__name__}: {original}"
    message = f"combine_fn {name} ({where(fn, lineno)}) raised {text}"
    line = linecache.getline(code.co_filename, lineno).strip() if lineno else ""
    if line:
        message += f"\n    {line}"
    # Without a frame of fn, the innermost frame is the adapter's: on its call of fn, the call
    # failed before fn's body ran (Triton's own checks of fn); on another line, what fn returned
    # does not fit the state (the only case the arity hint is about).
    calling = not user and "USER(" in linecache.getline(frames[0][0], frames[0][2])
    if calling and LANGUAGE_NOT_VISIBLE in text:
        message += (f"\n  Triton's interpreter runs a @triton.jit function called from another "
                    f"only if its module holds triton.language as a global: add `import "
                    f"triton.language as tl` to {fn.fn.__module__}")
    elif not user and not calling and "must return a tuple" not in text:
        message += (f"\n  the combine must return a tuple of {arity} value(s), one per tensor "
                    "of xs")
    elif "math." in line and isinstance(original, (TypeError, ValueError, AttributeError)):
        message += ("\n  hint: Python's math functions take numbers, not tiles: use Triton's "
                    "(tl.exp, tl.log, tl.sqrt, tl.math...)")
    elif isinstance(original, IndexError):
        message += (f"\n  hint: each state holds {arity} component(s), one per tensor of xs: "
                    f"a[0] to a[{arity - 1}], b[0] to b[{arity - 1}]")
    return CombineError(message, name, code.co_filename, lineno, original)


# a Reduction's functions: (attribute, its parameters, what it returns), for messages
REDUCTION_ROLES = (("prepare", "(xs, index)", "state"), ("merge", "(a, b)", "state"),
                   ("along", "(state, merge)", "state"), ("finish", "(state, count)", "outputs"))


def reduction_error(error: BaseException, reduction):
    """The ``CombineError`` for ``error``, raised by a launch that ran ``reduction``'s
    functions (a ``Reduction``), naming the one whose line failed and the reduction; None
    when no line of theirs is in its traceback (the failure is not theirs)."""
    from ..core.triton_compat import frames_in, innermost_error

    for role, _, _ in REDUCTION_ROLES:
        fn = getattr(reduction, role)
        code = getattr(getattr(fn, "fn", None), "__code__", None)
        if code is None:
            continue
        user = [f for f in frames_in(error, {code.co_filename}) if f[1] == code.co_name]
        if not user:
            continue
        original = innermost_error(error)
        name, lineno = qualified_name(fn), user[0][2]
        message = (f"{role} {name} ({where(fn, lineno)}) of the reduction {reduction.name} "
                   f"raised {type(original).__name__}: {original}")
        line = linecache.getline(code.co_filename, lineno).strip()
        if line:
            message += f"\n    {line}"
        if isinstance(original, IndexError):
            message += ("\n  hint: a state holds len(identity) component(s); prepare and merge "
                        "return that many, finish one per output")
        return CombineError(message, name, code.co_filename, lineno, original)
    return None


def _encode(fn) -> str:
    return f"{fn.fn.__module__}:{fn.fn.__qualname__}".encode().hex()


def _decode(text: str):
    module, qualname = bytes.fromhex(text).decode().split(":")
    value = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _names(arity: int, flagged: bool):
    a = [f"a{i}" for i in range(arity)]
    b = [f"b{i}" for i in range(arity)]
    return a, b


def _tuple(items) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _source(kind: str, name: str, arity: int, flagged: bool) -> str:
    a, b = _names(arity, flagged)
    if kind == "scalar":  # state form of a scalar one-component combine
        return (f"def {name}(a, b):\n"
                f"    return (USER(a[0], b[0]).to(a[0].dtype),)\n")
    if kind == "flat":
        params = a + (["af"] if flagged else []) + b + (["bf"] if flagged else [])
        lines = [f"def {name}({', '.join(params)}):",
                 f"    r = USER({_tuple(a)}, {_tuple(b)})",
                 f"    tl.static_assert(len(r) == {arity}, \"combine_fn must return a tuple of "
                 f"{arity} value(s), one per tensor of xs\")"]
        if flagged:
            lines.append("    both = af & bf")
            results = [f"tl.where(both, r[{i}].to({a[i]}.dtype), tl.where(bf, {b[i]}, {a[i]}))"
                       for i in range(arity)] + ["af | bf"]
        else:
            results = [f"r[{i}].to({a[i]}.dtype)" for i in range(arity)]
        lines.append(f"    return {_tuple(results)}")
        return "\n".join(lines) + "\n"
    if kind == "segflat":  # the segmented lift: a set flag on b starts a new segment there
        params = a + ["af"] + b + ["bf"]
        lines = [f"def {name}({', '.join(params)}):",
                 f"    r = USER({_tuple(a)}, {_tuple(b)})"]
        results = [f"tl.where(bf, {b[i]}, r[{i}].to({a[i]}.dtype))" for i in range(arity)]
        lines.append(f"    return {_tuple(results + ['af | bf'])}")
        return "\n".join(lines) + "\n"
    # kind == "state" / "segstate": the state form, through the flat form
    width = arity + (flagged or kind == "segstate")
    args = [f"a[{i}]" for i in range(width)] + [f"b[{i}]" for i in range(width)]
    return f"def {name}(a, b):\n    return FLAT({', '.join(args)})\n"


# (user function, kind, arity, flagged) -> the generated @triton.jit function
_built: dict = _caches.register("state_combine.built", {})
_local_names: dict = {}   # user functions that cannot be found by import -> their number


def _tag(fn) -> str:
    """How a generated name refers to its user function: the hex of ``module:qualname`` when
    import finds it again, else ``L<number>`` (usable in this process only)."""
    qualname = getattr(fn.fn, "__qualname__", "")
    if "<locals>" in qualname or "<lambda>" in qualname:
        return "L" + str(_local_names.setdefault(fn, len(_local_names)))
    return _encode(fn)


def _get(kind: str, fn, arity: int, flagged: bool):
    key = (fn, kind, arity, flagged)
    function = _built.get(key)
    if function is None:
        # a combine from a module that imports triton alone runs in the interpreter too
        _triton_compat.make_language_visible(fn)
        function = _built[key] = _build(f"{_PREFIX}{kind}_{arity}_{int(flagged)}_{_tag(fn)}", fn)
    return function


def _build(name: str, user=None):
    """The generated function ``name`` (``{_PREFIX}{kind}_{arity}_{flagged}_{tag}``) around
    ``user`` (decoded from the name when not given)."""
    kind, arity, flagged, tag = name[len(_PREFIX):].split("_")
    arity, flagged = int(arity), bool(int(flagged))
    if user is None:
        if tag.startswith("L"):
            raise ValueError("the combine function is local to another process")
        user = _decode(tag)
    namespace = {"USER": user, "tl": tl, "triton": triton}
    if kind in ("state", "segstate"):
        namespace["FLAT"] = _get("flat" if kind == "state" else "segflat", user, arity, flagged)
    source = _source(kind, name, arity, flagged)
    filename = _ADAPTER_FILE.format(name=name)
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)
    function = namespace[name]
    function.__module__ = __name__
    function.__qualname__ = name
    jitted = triton.jit(function)
    globals()[name] = jitted
    return jitted


def __getattr__(name: str):
    if name.startswith(_PREFIX):
        try:
            return _build(name)
        except (ValueError, ImportError, AttributeError) as error:
            raise AttributeError(f"cannot rebuild the combine adapter {name}: {error}") from None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def state_adapters(fn, arity: int, flagged: bool):
    """``(COMBINE, SCAN_COMBINE)`` for the tuple-state combine ``fn`` (a ``@triton.jit`` function)
    over ``arity`` components, plus the flag component when ``flagged``."""
    return _get("state", fn, arity, flagged), _get("flat", fn, arity, flagged)


def segmented_adapters(fn, arity: int):
    """``(SEG_COMBINE, SEG_SCAN)``: the state and flat forms of the segmented lift of the
    tuple-state combine ``fn`` (a reduction's ``merge`` or a scan's state form) over ``arity``
    components plus a "starts a segment" flag: ``(a, fa) + (b, fb)`` is ``(b if fb else
    fn(a, b), fa | fb)``, associative whenever ``fn`` is (tritonml/kernels/segment.py)."""
    return _get("segstate", fn, arity, False), _get("segflat", fn, arity, False)


def scalar_adapter(fn):
    """``COMBINE`` for the scalar one-component combine ``fn`` (its ``SCAN_COMBINE`` is ``fn``)."""
    return _get("scalar", fn, 1, False)
