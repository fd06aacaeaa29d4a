"""Modules inside the tritonml package reach each other by relative imports, never through the
package by name (``import tritonml`` + ``getattr``): the import graph stays visible and a module
never sees a half-initialized package."""
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tritonml"
# an import statement naming the package itself (``tritonml_cli`` and ``tritonml_autotune`` are
# other packages; docstrings and comments that mention ``import tritonml`` are not statements)
BY_NAME = re.compile(r"^\s*(import tritonml(\.|\s|$|,)|from tritonml(\.|\s)\S*\s*import\b)")


def _statements(source: str):
    """(line number, line) of each line outside a triple-quoted string."""
    inside = None
    for number, line in enumerate(source.splitlines(), 1):
        if inside is None and not line.lstrip().startswith("#"):
            yield number, line
        for quote in re.findall(r'"""|\'\'\'', line):
            inside = quote if inside is None else (None if quote == inside else inside)


@pytest.mark.source_tree
def test_no_module_imports_the_package_by_name():
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py"))
             for number, line in _statements(path.read_text())
             if BY_NAME.match(line)]
    assert not found, "import the package's modules relatively:\n" + "\n".join(found)


def test_the_pattern_catches_every_form():
    for line in ("import tritonml", "    import tritonml  # noqa", "import tritonml.distributed",
                 "from tritonml import tuning", "from tritonml.core import checks"):
        assert BY_NAME.match(line), line
    for line in ("import tritonml_autotune", "from tritonml_cli import __version__",
                 "from .core import backend", "x = 'import tritonml'"):
        assert not BY_NAME.match(line), line


@pytest.mark.source_tree
def test_every_subpackage_is_installed():
    """pyproject.toml lists the packages a wheel holds; an editable install finds unlisted ones
    anyway, so a forgotten folder would only break for users who install the wheel."""
    pyproject = (PACKAGE.parent / "pyproject.toml").read_text()
    packages = re.search(r"^packages = \[(.*)\]$", pyproject, re.M).group(1)
    listed = set(re.findall(r'"([\w.]+)"', packages))
    folders = {".".join(path.parent.relative_to(PACKAGE.parent).parts)
               for path in PACKAGE.rglob("__init__.py")}
    assert folders <= listed, f"add to pyproject.toml's packages: {sorted(folders - listed)}"
