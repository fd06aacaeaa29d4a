"""The documentation site (mkdocs.yml over docs/) shows every page and documents every public name.

- Every name of each public module's ``__all__`` is in docs/reference/ as a mkdocstrings directive
  ``::: module.name`` (a public submodule, such as ``tritonml.tuning``, as its own page's
  ``::: tritonml.tuning``), and every directive there names a public module or one of its public
  names: adding a public name without documenting it fails here, and so does documenting a name
  that is not public.
- Every page of docs/ (docs/*.md, docs/reference/*.md) is in mkdocs.yml's nav, and every page the
  nav names exists.
- With mkdocs installed (the ``docs`` extra), ``mkdocs build --strict`` passes: no broken link, no
  missing reference, no warning from griffe reading the docstrings. .ci/run installs the extra and
  builds the site too.

Nothing here needs mkdocs or PyYAML: the directives and the nav are read as text.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tests.timing import limit

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"

# docs/ and mkdocs.yml are the repository's, not the wheel's: left out of installed runs.
pytestmark = pytest.mark.source_tree

# The documented, typed surface: each module's ``__all__`` is its public names.
PUBLIC_MODULES = ("tritonml", "tritonml.dml", "tritonml.distributed", "tritonml.tuning",
                  "tritonml.reductions", "tritonml.runtime", "tritonml.reduce_functions",
                  "tritonml.kernels.combine")

_DIRECTIVE = re.compile(r"^:::[ \t]+(\S+)[ \t]*$", re.MULTILINE)


def _top_level_names(statements) -> list[str]:
    """Names bound by a module's top-level statements (into ``if``/``try`` blocks): functions,
    classes, assignments and ``from ... import`` names (not modules: ``import x``)."""
    names: list[str] = []
    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names += [n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)]
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names += [alias.asname or alias.name for alias in node.names]
        elif isinstance(node, ast.If):
            names += _top_level_names(node.body) + _top_level_names(node.orelse)
        elif isinstance(node, ast.Try):
            names += _top_level_names(node.body + node.orelse + node.finalbody)
    return names


def public_names(module_name: str) -> list[str]:
    """The module's ``__all__``; without one, what Python's conventions make public: the names its
    source binds at top level that do not start with an underscore. Read from the source, not the
    module's namespace, which gains names at run time (Triton's interpreter patches kernels'
    globals)."""
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    return list(dict.fromkeys(n for n in _top_level_names(tree.body) if not n.startswith("_")))


def reference_directives() -> dict[str, list[str]]:
    """Each ``::: identifier`` of docs/reference/*.md -> the pages it is on."""
    found: dict[str, list[str]] = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for identifier in _DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            found.setdefault(identifier, []).append(page.name)
    return found


def nav_pages() -> list[str]:
    """The pages (paths relative to docs/) mkdocs.yml's nav lists, in order."""
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = re.search(r"^nav:[ \t]*\n(?P<body>(?:[ \t]+.*\n|[ \t]*\n)*)", text, re.MULTILINE)
    assert nav, "mkdocs.yml has no nav"
    return re.findall(r"(?:^[ \t]*-[ \t]*|:[ \t]*)([\w./-]+\.md)[ \t]*$", nav["body"], re.MULTILINE)


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_name_is_in_the_reference(module_name):
    documented = reference_directives()
    names = public_names(module_name)
    assert names, f"{module_name} has no public names"
    assert module_name in documented, f"docs/reference/ has no '::: {module_name}' page"
    missing = [name for name in names if f"{module_name}.{name}" not in documented]
    assert not missing, (f"public names of {module_name} missing from docs/reference/ "
                         f"(add '::: {module_name}.NAME' to its page): {missing}")
    twice = {f"{module_name}.{name}": pages for name in names
             if len(pages := documented.get(f"{module_name}.{name}", [])) > 1}
    assert not twice, f"documented more than once: {twice}"


def test_every_reference_directive_names_a_public_name():
    modules = sorted(PUBLIC_MODULES, key=len, reverse=True)   # the longest module prefix first
    public = {module: set(public_names(module)) for module in PUBLIC_MODULES}
    stray = []
    for identifier, pages in reference_directives().items():
        if identifier in public:
            continue
        owner = next((m for m in modules if identifier.startswith(m + ".")), None)
        if owner is None or identifier[len(owner) + 1:] not in public[owner]:
            stray.append(f"{identifier} ({', '.join(pages)})")
    assert not stray, f"docs/reference/ documents names that are not public: {stray}"


def test_the_reference_checks_see_a_missing_name(tmp_path, monkeypatch):
    # The check above, against a copy of docs/reference/ with one public name left out.
    page = REFERENCE / "tritonml.runtime.md"
    text = page.read_text(encoding="utf-8")
    first = next(i for i in _DIRECTIVE.findall(text) if i.startswith("tritonml.runtime."))
    for other in REFERENCE.glob("*.md"):
        (tmp_path / other.name).write_text(other.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / page.name).write_text(text.replace(f"::: {first}\n", ""), encoding="utf-8")
    monkeypatch.setitem(globals(), "REFERENCE", tmp_path)
    name = first.rpartition(".")[2]
    with pytest.raises(AssertionError, match=rf"missing from docs/reference/.*'{name}'"):
        test_every_public_name_is_in_the_reference("tritonml.runtime")


def test_every_page_is_in_the_nav():
    listed = nav_pages()
    pages = sorted(p.relative_to(DOCS).as_posix()
                   for p in [*DOCS.glob("*.md"), *REFERENCE.glob("*.md")])
    assert "index.md" in listed and "reference/index.md" in listed
    unlisted = [p for p in pages if p not in listed]
    assert not unlisted, f"pages of docs/ missing from mkdocs.yml's nav: {unlisted}"
    absent = [p for p in listed if not (DOCS / p).is_file()]
    assert not absent, f"mkdocs.yml's nav lists pages that do not exist: {absent}"
    twice = sorted({p for p in listed if listed.count(p) > 1})
    assert not twice, f"pages listed twice in mkdocs.yml's nav: {twice}"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                    reason="needs the docs extra (pip install -e '.[docs]'); .ci/run builds the site")
def test_the_site_builds_strict(tmp_path):
    # A subprocess: mkdocs and its plugins are not imported into the test process (warnings are
    # errors here, and theirs are not tritonml's).
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=limit(300),
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    assert (tmp_path / "site" / "reference" / "tritonml" / "index.html").is_file()
