"""Which torch and Triton tritonml installs beside: pyproject.toml's requirements admit every torch
release from 2.11 on with the Triton it pins, declare nothing older than what is tested, and the
README's table and the import-time warning say the same range.

``TORCH_PINS`` was read from each torch wheel's metadata (its ``Requires-Dist: triton...`` on
Linux, fetched without the wheel by ``pip install --dry-run --no-deps --report``, 2026-11-27).
A torch wheel pins one Triton exactly, so an install of tritonml that did not admit it would make
pip replace the user's torch (gigabytes) or fail to resolve.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.timing import limit
from tritonml.core import triton_compat

REPO = Path(__file__).resolve().parent.parent

# torch release -> the Triton requirement of its Linux wheel
TORCH_PINS = {
    "2.11.0": "==3.6.0",
    "2.12.0": "==3.7.0",
    "2.12.1": "==3.7.1",
    "2.13.0": "==3.7.1",
    "2.14.0": "~=3.8.0",
    "2.14.1": "~=3.8.0",
    "2.15.0": "~=3.9.0",
}
# the Triton releases the interpreted suite (the fast tier) and the compile tests pass with
TESTED_TRITON = ("3.6.0", "3.7.1", "3.8.0", "3.9.0")


def _requirements() -> dict:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {r.name: r for r in map(Requirement, project["dependencies"])}


def _lowest(pin: str) -> Version:
    """The lowest release a pin admits (``==3.6.0``: 3.6.0; ``~=3.8.0``: 3.8.0)."""
    return Version(re.sub(r"^[=~<>!]+", "", pin))


def _release(version: Version) -> tuple:
    return version.release[:2]


@pytest.mark.source_tree
@pytest.mark.parametrize("torch_version", list(TORCH_PINS))
def test_pyproject_admits_each_torch_with_the_triton_it_pins(torch_version):
    requirements = _requirements()
    assert requirements["torch"].specifier.contains(torch_version), torch_version
    pin = SpecifierSet(TORCH_PINS[torch_version])
    pinned = _lowest(TORCH_PINS[torch_version])
    assert pin.contains(pinned)
    assert requirements["triton"].specifier.contains(pinned), (torch_version, pinned)


@pytest.mark.source_tree
def test_pyproject_declares_nothing_older_than_what_is_tested():
    requirements = _requirements()
    oldest_torch = min(map(Version, TORCH_PINS))
    oldest_triton = min(map(Version, TESTED_TRITON))
    assert str(requirements["torch"].specifier) == f">={oldest_torch.major}.{oldest_torch.minor}"
    assert str(requirements["triton"].specifier) == f">={oldest_triton.major}.{oldest_triton.minor}"
    # no upper bound: a newer torch pins a newer Triton, which warns at import instead
    for name in ("torch", "triton"):
        assert all(s.operator == ">=" for s in requirements[name].specifier), name


def test_the_warning_range_is_the_tested_range():
    tested = sorted(_release(Version(v)) for v in TESTED_TRITON)
    pinned = sorted(_release(_lowest(p)) for p in TORCH_PINS.values())
    assert triton_compat.SUPPORTED_RELEASES == (tested[0], tested[-1]) == (pinned[0], pinned[-1])


@pytest.mark.parametrize("version, warns", [
    ("3.5.1", True), ("3.6.0", False), ("3.7.1", False), ("3.9.0+git1234", False),
    ("3.10.0", True), ("4.0.0", True)])
def test_a_triton_outside_the_range_gets_a_message_naming_it(version, warns):
    message = triton_compat.unsupported_triton_message(version)
    if warns:
        assert message is not None and "Triton 3.6 to 3.9" in message and version in message
    else:
        assert message is None


def test_import_warns_once_for_a_triton_outside_the_range():
    # triton imported first and its version changed, in the interpreter (no GPU here)
    code = ("import warnings, triton; triton.__version__ = '3.10.0'\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    import tritonml, tritonml.core.triton_compat\n"
            "    import importlib; importlib.import_module('tritonml.kernels.scan')\n"
            "ours = [str(w.message) for w in caught if 'tritonml is tested with' in str(w.message)]\n"
            "print(len(ours)); print(ours[0] if ours else '')\n")
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=limit(120))
    assert done.returncode == 0, done.stderr
    count, message = done.stdout.strip().splitlines()
    assert count == "1" and "Triton 3.6 to 3.9" in message and "3.10.0" in message


@pytest.mark.source_tree
def test_the_readme_table_is_the_tested_matrix():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Supported versions", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| (\d+\.\d+\.\d+) \| `triton([=~]=[\d.]+)`", section, re.MULTILINE)
    assert dict(rows) == TORCH_PINS, rows


@pytest.mark.source_tree
def test_every_torch_name_the_code_uses_was_looked_up_in_the_oldest_torch():
    """benchmarks/torch_api_2_11.txt: the torch names found in torch 2.11.0's sources
    (``python -m benchmarks.torch_api``); a name used since must be looked up there too."""
    from benchmarks.torch_api import used_names
    checked = set((REPO / "benchmarks" / "torch_api_2_11.txt").read_text(
        encoding="utf-8").split())
    assert min(map(Version, TORCH_PINS)) == Version("2.11.0")
    unchecked = sorted(used_names() - checked)
    assert not unchecked, (f"torch names not yet looked up in torch 2.11.0: {unchecked} "
                           "(benchmarks/torch_api.py says how)")
