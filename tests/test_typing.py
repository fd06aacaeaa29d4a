"""The typed public API: pyright (the ``typecheck`` extra) accepts a typed user script and rejects
misuses.

``tests/typing/user_script.py`` uses the public API with annotations that hold only if tritonml's
types are right (a scan's ``return_carry`` pair, ``reduce`` with keepdims, a ``Reduction`` from
``tritonml.reductions``, ``segment_reduce`` with offsets, ``use_tritonml``, ``var_mean``'s pair):
pyright must report no error, and the script must also run. ``tests/typing/wrong_script.py`` has
one type error on each line marked ``# error``: pyright must report an error on exactly those
lines. The public modules themselves are checked by ``.ci/run`` (``pyright`` on them).

pyright is an optional tool (``pip install -e '.[typecheck]'``): without it these tests skip, unless
``TRITONML_TYPECHECK=1`` (set by ``.ci/run``, which installs the extra), where its absence fails.
"""
from __future__ import annotations

import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tests.timing import limit

# pyright runs with pyproject.toml's [tool.pyright] from the repository root: left out of
# installed runs (tests/conftest.py).
pytestmark = pytest.mark.source_tree

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "typing"


def _pyright() -> list[str]:
    """The command that runs pyright: the one installed beside this Python, else on PATH."""
    beside = Path(sys.executable).parent / "pyright"
    found = str(beside) if beside.exists() else shutil.which("pyright")
    if found is None:
        if os.environ.get("TRITONML_TYPECHECK") == "1":
            pytest.fail("TRITONML_TYPECHECK=1 but pyright is not installed; "
                        "pip install -e '.[typecheck]'")
        pytest.skip("pyright is not installed (pip install -e '.[typecheck]'); "
                    "TRITONML_TYPECHECK=1 makes this a failure")
    return [found]


def _check(path: Path) -> list[dict]:
    """pyright's diagnostics (errors) for ``path``, run with the project's configuration
    (pyproject.toml's [tool.pyright]) against this Python's packages."""
    result = subprocess.run(
        [*_pyright(), "--outputjson", "--pythonpath", sys.executable, str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=limit(300))
    try:
        report = json.loads(result.stdout)
    except json.JSONDecodeError:
        raise AssertionError(f"pyright did not report (exit {result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}") from None
    assert report["summary"]["filesAnalyzed"] == 1, report["summary"]
    return [d for d in report["generalDiagnostics"] if d["severity"] == "error"]


def _shown(errors: list[dict]) -> str:
    return "\n".join(f"line {e['range']['start']['line'] + 1}: {e['message']}" for e in errors)


def test_typed_user_script_type_checks_and_runs():
    errors = _check(SCRIPTS / "user_script.py")
    assert not errors, "pyright rejects the typed user script:\n" + _shown(errors)
    namespace = runpy.run_path(str(SCRIPTS / "user_script.py"))
    # what the annotations claim holds at run time, against torch
    x = namespace["x"]
    assert namespace["total"].shape == (2, 1)
    assert torch.equal(namespace["total"], x.sum(1, keepdim=True))
    assert isinstance(namespace["pair"], tuple) and len(namespace["pair"]) == 2
    assert all(torch.equal(t, torch.cumsum(x, 1)) for t in namespace["pair"])
    expected_var, expected_mean = torch.var_mean(x, dim=1, correction=0)
    assert torch.allclose(namespace["var"], expected_var)
    assert torch.allclose(namespace["mean"], expected_mean)
    assert torch.equal(namespace["carry"], x.double().prod(1))


def test_misuses_are_type_errors():
    path = SCRIPTS / "wrong_script.py"
    marked = {number for number, line in enumerate(path.read_text().splitlines(), 1)
              if "# error:" in line}
    assert len(marked) == 6
    errors = _check(path)
    reported = {e["range"]["start"]["line"] + 1 for e in errors}
    assert reported == marked, ("pyright's errors are not the marked lines:\n" + _shown(errors)
                                + f"\nmarked: {sorted(marked)}")
