"""What the wheel and the sdist hold, and the version in one place.

The wheel holds what the installed code reads at run time and nothing else: the packages'
modules, ``tritonml_cli.py``, the shipped tuning tables and compile facts
(``tritonml_autotune/tables/*.json``), the ``py.typed`` markers and the license. The sdist holds
what builds that wheel plus README.md, LICENSE, CHANGELOG.md and pyproject.toml; no tests,
benchmarks/ or docs/ (the tests import benchmarks/ and read docs/: they run from a clone).

The tests here check pyproject.toml's packaging tables against the source tree without building.
``.ci/wheel`` builds both archives and runs this file as a script on them
(``python tests/test_packaging.py WHEEL SDIST``): the same rules, on the real file lists.
"""
from __future__ import annotations

import ast
import fnmatch
import importlib.metadata
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]

# Every file a wheel may hold ({dist}: its dist-info folder, "tritonml-VERSION.dist-info").
WHEEL_ALLOWED = (
    r"tritonml_cli\.py",
    r"tritonml/([a-z_]+/){0,2}[a-z_0-9]+\.py",   # tritonml/core/triton_compat/ is two deep
    r"tritonml/py\.typed",
    r"tritonml_autotune/[a-z_0-9]+\.py",
    r"tritonml_autotune/py\.typed",
    r"tritonml_autotune/tables/[A-Za-z0-9_]+\.json",
    r"{dist}/(METADATA|WHEEL|RECORD|entry_points\.txt|top_level\.txt|licenses/LICENSE)",
)
# Files the installed code reads, or that users and tools need, by name.
WHEEL_REQUIRED = ("tritonml_cli.py", "tritonml/__init__.py", "tritonml/py.typed",
                  "tritonml_autotune/__init__.py", "tritonml_autotune/py.typed",
                  "tritonml_autotune/tables/compiled.json", "tritonml_autotune/tables/H100.json",
                  "tritonml_autotune/tables/A100.json", "{dist}/licenses/LICENSE",
                  "{dist}/entry_points.txt", "{dist}/METADATA")
SDIST_REQUIRED = ("PKG-INFO", "pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md",
                  "MANIFEST.in", "tritonml_cli.py", "tritonml/__init__.py",
                  "autotune/tables/compiled.json")
SDIST_FORBIDDEN = ("tests/", "benchmarks/", "docs/", ".ci/")

# The modules that find files next to themselves (Path(__file__)), and why that is safe
# installed: each reads only package data or names the folder holding the installed packages.
READS_BESIDE_ITSELF = {
    "autotune/compiled.py": "tables/compiled.json (package data)",
    "autotune/shipped.py": "tables/*.json (package data)",
    "tritonml/bench/gpu_compile.py": "the folder holding tritonml (site-packages when installed), "
                                      "put on its compile workers' PYTHONPATH",
}
# Names of the repository's files that the installed code must not open: a wheel lacks them.
REPOSITORY_ONLY = ("README", "CHANGELOG", "pyproject", "docs/", "benchmarks/", "tests/")


def wheel_problems(names: list[str], version: str) -> list[str]:
    """What is wrong with a wheel holding ``names`` (its file list) for ``version``."""
    dist = re.escape(f"tritonml-{version}.dist-info")
    allowed = [re.compile(p.replace("{dist}", dist)) for p in WHEEL_ALLOWED]
    problems = [f"not allowed in the wheel: {name}" for name in names
                if not name.endswith("/") and not any(p.fullmatch(name) for p in allowed)]
    problems += [f"missing from the wheel: {name}"
                 for name in (n.replace("{dist}", f"tritonml-{version}.dist-info")
                              for n in WHEEL_REQUIRED)
                 if name not in names]
    return problems


def sdist_problems(names: list[str]) -> list[str]:
    """What is wrong with an sdist holding ``names`` (paths under its top folder)."""
    problems = [f"not allowed in the sdist: {name}" for name in names
                if name.startswith(SDIST_FORBIDDEN) or "__pycache__" in name]
    return problems + [f"missing from the sdist: {name}" for name in SDIST_REQUIRED
                       if name not in names]


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))


def _package_dirs(setuptools: dict) -> dict[str, pathlib.Path]:
    """Each listed package's source folder (package-dir's mapping, else its dotted path)."""
    mapping = setuptools.get("package-dir", {})
    dirs = {}
    for package in setuptools["packages"]:
        top, _, rest = package.partition(".")
        base = REPO / mapping.get(top, top)
        dirs[package] = base.joinpath(*rest.split(".")) if rest else base
    return dirs


def expected_wheel_files() -> list[str]:
    """The wheel's package files as pyproject.toml's [tool.setuptools] tables select them from the
    source tree (what setuptools puts in; dist-info aside)."""
    setuptools = _pyproject()["tool"]["setuptools"]
    data = setuptools.get("package-data", {})
    names = [f"{module}.py" for module in setuptools["py-modules"]]
    for package, folder in _package_dirs(setuptools).items():
        prefix = package.replace(".", "/")
        names += [f"{prefix}/{p.name}" for p in sorted(folder.glob("*.py"))]
        for pattern in data.get(package, []):
            names += [f"{prefix}/{p.relative_to(folder).as_posix()}"
                      for p in sorted(folder.glob(pattern))]
    return names


@pytest.mark.source_tree
def test_every_package_folder_is_listed():
    """A folder with an __init__.py under tritonml/ or autotune/ is a listed package (a new
    subpackage left out of [tool.setuptools] packages would be missing from the wheel)."""
    setuptools = _pyproject()["tool"]["setuptools"]
    listed = {folder.resolve() for folder in _package_dirs(setuptools).values()}
    found = {init.parent.resolve() for top in ("tritonml", "autotune")
             for init in (REPO / top).rglob("__init__.py") if "__pycache__" not in init.parts}
    assert found == listed, (sorted(map(str, found - listed)), sorted(map(str, listed - found)))


@pytest.mark.source_tree
def test_package_data_is_every_data_file_and_each_pattern_finds_files():
    """Every file in a package folder that is not a module is package data, and each package-data
    pattern selects at least one file (a misspelt one would ship nothing)."""
    setuptools = _pyproject()["tool"]["setuptools"]
    assert setuptools["include-package-data"] is False   # package-data is the whole list
    data = setuptools["package-data"]
    dirs = _package_dirs(setuptools)
    for package, patterns in data.items():
        for pattern in patterns:
            assert list(dirs[package].glob(pattern)), f"{package}: {pattern} selects no file"
    unlisted = []
    for package, folder in dirs.items():
        subpackages = {d for p, d in dirs.items() if p.startswith(package + ".")}
        for path in folder.rglob("*"):
            if (path.is_dir() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts
                    or any(s in path.parents for s in subpackages)):
                continue
            relative = path.relative_to(folder).as_posix()
            if not any(fnmatch.fnmatch(relative, p) for p in data.get(package, [])):
                unlisted.append(f"{package}: {relative}")
    assert not unlisted, unlisted


@pytest.mark.source_tree
def test_the_wheel_pyproject_selects_passes_the_allow_list():
    names = expected_wheel_files()
    version = "0.0.0"
    dist = f"tritonml-{version}.dist-info"
    names += [f"{dist}/{n}" for n in ("METADATA", "WHEEL", "RECORD", "entry_points.txt",
                                      "top_level.txt", "licenses/LICENSE")]
    assert wheel_problems(names, version) == []
    # and the rules do refuse what must not ship
    assert wheel_problems(names + ["tests/launchers/test_scan.py", "benchmarks/results/h.md",
                                   "docs/scan.md", "tritonml/notes.md"], version) == [
        "not allowed in the wheel: tests/launchers/test_scan.py",
        "not allowed in the wheel: benchmarks/results/h.md",
        "not allowed in the wheel: docs/scan.md",
        "not allowed in the wheel: tritonml/notes.md"]
    assert wheel_problems([n for n in names if "tables" not in n], version) == [
        "missing from the wheel: tritonml_autotune/tables/compiled.json",
        "missing from the wheel: tritonml_autotune/tables/H100.json",
        "missing from the wheel: tritonml_autotune/tables/A100.json"]


def _sources() -> list[pathlib.Path]:
    return [REPO / "tritonml_cli.py", *sorted((REPO / "tritonml").rglob("*.py")),
            *sorted((REPO / "autotune").rglob("*.py"))]


@pytest.mark.source_tree
def test_the_installed_code_reads_no_repository_file():
    """No module imports benchmarks or tests, opens a repository-only file by name, or finds
    files beside itself except READS_BESIDE_ITSELF (whose targets are package data)."""
    problems = []
    for path in _sources():
        name = path.relative_to(REPO).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                modules = [node.module or ""]
            else:
                modules = []
            problems += [f"{name}:{node.lineno} imports {m}" for m in modules
                         if m.split(".")[0] in ("benchmarks", "tests")]
            if isinstance(node, ast.Name) and node.id == "__file__" and \
                    name not in READS_BESIDE_ITSELF:
                problems.append(f"{name}:{node.lineno} uses __file__")
            if isinstance(node, ast.Call) and any(
                    isinstance(a, ast.Constant) and isinstance(a.value, str)
                    and any(r in a.value for r in REPOSITORY_ONLY) for a in node.args):
                func = ast.unparse(node.func)
                if func.split(".")[-1] in ("open", "Path", "read_text", "read_bytes", "joinpath"):
                    problems.append(f"{name}:{node.lineno} {ast.unparse(node)}")
    assert problems == []


def test_the_tables_are_read_from_the_package():
    """The shipped tables and compile facts are found inside tritonml_autotune's own folder
    (package data), wherever it is installed."""
    import tritonml_autotune
    from tritonml_autotune import compiled, shipped

    package = pathlib.Path(tritonml_autotune.__file__).parent
    assert compiled.TABLE_PATH == package / "tables" / "compiled.json"
    assert compiled.TABLE_PATH.is_file()
    assert shipped.TABLES_DIR == package / "tables"
    assert {p.name for p in shipped.TABLES_DIR.glob("*.json")} >= {"H100.json", "A100.json"}


def _command_version() -> str:
    from tests.timing import limit  # here: .ci/wheel runs this file as a script, without tests/
    exe = shutil.which("tritonml", path=str(pathlib.Path(sys.executable).parent))
    command = [exe] if exe else [sys.executable, "-m", "tritonml_cli"]
    done = subprocess.run([*command, "--version"], capture_output=True, text=True, timeout=limit(120))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_version_is_written_once_and_everything_agrees():
    """tritonml_cli.__version__ is the one place: tritonml.__version__, the installed
    distribution's metadata and ``tritonml --version`` all say it."""
    import tritonml
    import tritonml_cli

    version = tritonml_cli.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert tritonml.__version__ == version
    assert importlib.metadata.version("tritonml") == version
    assert _command_version() == f"tritonml {version}"


@pytest.mark.source_tree
def test_pyproject_reads_the_version_from_tritonml_cli():
    project = _pyproject()
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    dynamic = project["tool"]["setuptools"]["dynamic"]
    assert dynamic["version"] == {"attr": "tritonml_cli.__version__"}
    written = [p.relative_to(REPO).as_posix() for p in _sources()
               if re.search(r"^__version__ = ", p.read_text(encoding="utf-8"), re.M)]
    assert written == ["tritonml_cli.py"]


@pytest.mark.source_tree
def test_the_changelog_names_this_version_as_its_newest_release():
    import tritonml_cli

    text = (REPO / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", text, re.M)
    assert releases, "CHANGELOG.md has no '## [VERSION] - DATE' heading"
    newest = [r for r in releases if r[0] != "Unreleased"][0]
    assert newest[0] == tritonml_cli.__version__
    assert newest[1], f"release {newest[0]} has no date"


def test_every_pytest_run_names_its_failures_at_the_end():
    """pyproject's addopts carry -rfE: the README's commands, .ci/run and .ci/wheel (which copies
    pyproject.toml) end with each failed test and error, named with its reason."""
    assert "-rfE" in _pyproject()["tool"]["pytest"]["ini_options"]["addopts"].split()


def test_no_test_passes_or_fails_by_the_machines_speed():
    """Hypothesis's time-based checks are off for every test (tests/conftest.py's profile), and
    the tests' time limits scale with TRITONML_TEST_TIME_SCALE (default 3, tests/timing.py)."""
    from hypothesis import HealthCheck, settings

    from tests import timing
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check
    assert timing.DEFAULT_TIME_SCALE >= 3
    probe = "from tests import timing; print(timing.limit(10))"
    for value, said in (("0.5", "5.0"), ("", "30.0"), ("fast", None)):
        env = {**os.environ, timing.TIME_SCALE_ENV: value,
               "PYTHONPATH": str(pathlib.Path(timing.__file__).parents[1])}
        done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                              text=True, timeout=timing.limit(120))
        if said is None:
            assert "TRITONML_TEST_TIME_SCALE='fast': expected a positive number" in done.stderr
        else:
            assert done.stdout.strip() == said, done.stderr


@pytest.mark.source_tree
def test_the_license_is_mit_and_pyproject_says_so():
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the tritonml developers\n")
    assert "THE SOFTWARE IS PROVIDED \"AS IS\", WITHOUT WARRANTY OF ANY KIND" in text
    project = _pyproject()
    assert project["project"]["license"] == "MIT"
    assert project["project"]["license-files"] == ["LICENSE"]
    # setuptools reads the SPDX license expression and license-files from 77.0 on (PEP 639)
    assert project["build-system"]["requires"] == ["setuptools>=77"]


def check_archives(wheel: pathlib.Path, sdist: pathlib.Path) -> list[str]:
    """The rules above on a built wheel and sdist (``.ci/wheel``)."""
    version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(f"tritonml-{version}.dist-info/METADATA").decode()
    problems = wheel_problems(names, version)
    for line in ("License-Expression: MIT", "License-File: LICENSE", f"Version: {version}"):
        if line not in metadata.splitlines():
            problems.append(f"the wheel's METADATA lacks '{line}'")
    with tarfile.open(sdist) as archive:
        top = f"tritonml-{version}/"
        members = [m.name for m in archive.getmembers() if m.isfile()]
    problems += [f"sdist member outside {top}: {m}" for m in members if not m.startswith(top)]
    problems += sdist_problems([m[len(top):] for m in members if m.startswith(top)])
    print(f"{wheel.name}: {len(names)} files, {wheel.stat().st_size / 1024:.0f} KiB; "
          f"{sdist.name}: {len(members)} files, {sdist.stat().st_size / 1024:.0f} KiB")
    return problems


if __name__ == "__main__":
    found = check_archives(pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]))
    print("\n".join(found) or "the wheel and sdist hold what they should")
    sys.exit(1 if found else 0)
