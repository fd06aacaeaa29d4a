"""The typed public API: pyright (the ``typecheck`` extra) accepts a typed user script and rejects
misuses.

``tests/typing/user_script.py`` uses the public API with annotations that hold only if tritonml's
types are right (a scan's ``return_carry`` pair, ``reduce`` with keepdims, a ``Reduction`` from
``tritonml.records.ready_reductions``, ``segment_reduce`` with offsets, ``use_tritonml``, ``var_mean``'s pair):
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
import sysconfig
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


def test_a_misspelt_keyword_is_named():
    path = SCRIPTS / "typo_script.py"
    expected = {number: line.split("# names:")[1].strip()
                for number, line in enumerate(path.read_text().splitlines(), 1)
                if "# names:" in line}
    assert len(expected) == 8
    errors = _check(path)
    for number, keyword in expected.items():
        messages = [e["message"] for e in errors if e["range"]["start"]["line"] + 1 == number]
        assert any(f'"{keyword}"' in message for message in messages), (
            f"line {number}: pyright does not name {keyword!r}:\n" + "\n".join(messages))
    assert {e["range"]["start"]["line"] + 1 for e in errors} == set(expected), _shown(errors)


def _venv_seeing_torch(folder: Path) -> Path:
    """A venv at ``folder`` without tritonml, whose packages include this Python's (torch,
    triton) through a ``.pth`` line, as pyright reads it: its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True,
                   timeout=limit(120))
    python = folder / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                             text=True, check=True, timeout=limit(60)).stdout.strip()
    Path(purelib, "this_pythons_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def _no_isolation() -> list[str]:
    """Build with this Python's setuptools when it has one (fast, no index needed)."""
    import importlib.util
    return ["--no-build-isolation"] if importlib.util.find_spec("setuptools") else []


def _pip_install(python: Path, *arguments: str) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q",
                           "--no-deps", *_no_isolation(), *arguments],
                          capture_output=True, text=True, timeout=limit(300), cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def _errors_outside(python: Path, folder: Path) -> list[dict]:
    """pyright's errors for a copy of the typed user script in ``folder`` (outside the checkout,
    so only the install can tell pyright where tritonml is), against ``python``'s packages."""
    script = folder / "user_script.py"
    script.write_text((SCRIPTS / "user_script.py").read_text())
    result = subprocess.run([*_pyright(), "--outputjson", "--pythonpath", str(python),
                             str(script)], cwd=folder, capture_output=True, text=True,
                            timeout=limit(300))
    report = json.loads(result.stdout)
    return [d for d in report["generalDiagnostics"] if d["severity"] == "error"]


def test_a_project_outside_the_checkout_type_checks_against_the_install(tmp_path):
    """The installs README's "Type checking from your project" names: the wheel, and an editable
    install in setuptools' strict or compat mode, each in its own venv. The default editable
    install (an import hook) is invisible to a type checker: the README's reason to name a mode."""
    _pyright()  # skips (or fails under TRITONML_TYPECHECK=1) before any install without pyright
    wheels = tmp_path / "wheels"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           *_no_isolation(), "-w", str(wheels), str(ROOT)],
                          capture_output=True, text=True, timeout=limit(300))
    assert done.returncode == 0, done.stdout + done.stderr
    installs = {"wheel": [str(next(wheels.glob("tritonml-*.whl")))],
                "editable, strict": ["-e", ".", "--config-settings", "editable_mode=strict"],
                "editable, compat": ["-e", ".", "--config-settings", "editable_mode=compat"],
                "editable, default": ["-e", "."]}
    for number, (name, arguments) in enumerate(installs.items()):
        folder = tmp_path / f"project{number}"
        folder.mkdir()
        python = _venv_seeing_torch(tmp_path / f"venv{number}")
        _pip_install(python, *arguments)
        errors = _errors_outside(python, folder)
        if name == "editable, default":
            assert any('Import "tritonml" could not be resolved' in e["message"] for e in errors)
        else:
            assert not errors, f"{name}:\n" + _shown(errors)
