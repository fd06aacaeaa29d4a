"""The record of what the triton_compat package relies on in Triton's private API, and ``check()``.

Private names can move in any Triton release. Each submodule resolves the private names it uses
through ``private()``, or notes in ``REQUIRED`` the ones it reaches only later (a method it wraps, a
keyword it passes), so that ``check()`` lists what the installed Triton lacks, by name
(tests/core/test_triton_compat.py runs it), instead of a kernel failing somewhere later.
"""
from __future__ import annotations

import importlib
import inspect

CHECKED_VERSIONS = ("3.6.0", "3.7.1", "3.8.0", "3.9.0")
INTERPRETER_MODULE = "triton.runtime.interpreter"

# What the submodules rely on, for ``check()``: dotted name -> parameters it must accept. Filled in
# as the package imports them, in its order, which is the order ``check()`` reports in.
REQUIRED: dict[str, tuple] = {}


def private(path: str, parameters: tuple = ()):
    """Resolve the private Triton name ``path``, noting it (and the ``parameters`` its callers pass
    by name) for ``check()``; raise an ImportError that names this package if it is gone."""
    REQUIRED[path] = parameters
    try:
        return resolve(path)
    except AttributeError:
        raise ImportError(missing_message([f"{path} (not found)"])) from None


def resolve(path: str):
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


def missing_message(missing: list) -> str:
    import triton

    return (f"tritonml/core/triton_compat/ relies on private Triton API that triton "
            f"{triton.__version__} lacks (checked against {', '.join(CHECKED_VERSIONS)}): "
            + "; ".join(missing))


def check() -> list:
    """What the installed Triton lacks of the private API this package relies on: one line per
    missing name or parameter, naming it; empty when everything is there."""
    missing = []
    for path, parameters in REQUIRED.items():
        try:
            obj = resolve(path)
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
    return missing_message(missing)
