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
  builds the site too. On the site built once for this module:
  - every ``docs/<page>.md`` a page or a docstring mentions is a link (outside code), to that page
    and to the section's heading where one is named;
  - a function with typing overloads shows one signature, and a line summing up its overloads;
  - the code blocks of the home page wrap their long lines (docs/stylesheets/code.css);
  - a link to a page or an anchor that is not there fails the strict build, from a page or from a
    docstring (a copy of the sources with one of each).

The checks of the reference and the nav need neither mkdocs nor PyYAML: the directives and the nav
are read as text.
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import os
import posixpath
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
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
                  "tritonml.reductions", "tritonml.runtime", "tritonml.records",
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


needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None,
    reason="needs the docs extra (pip install -e '.[docs]'); .ci/run builds the site")


def build_site(source: Path, site: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of the sources in ``source`` into ``site``. A subprocess: mkdocs
    and its plugins are not imported into the test process (warnings are errors here, and theirs
    are not tritonml's)."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=source, capture_output=True, text=True, timeout=limit(300),
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site_build(tmp_path_factory):
    """The repository's site, built once for the tests below: (the build's result, its folder)."""
    site = tmp_path_factory.mktemp("site") / "site"
    return build_site(ROOT, site), site


@pytest.fixture
def site(site_build) -> Path:
    result, folder = site_build
    assert result.returncode == 0, result.stdout + result.stderr
    return folder


@needs_mkdocs
def test_the_site_builds_strict(site_build):
    result, site = site_build
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    assert (site / "reference" / "tritonml" / "index.html").is_file()


class _Html(HTMLParser):
    """One built page: its text outside links and code, its links (href, text) and its ids."""

    _OPAQUE = frozenset({"a", "code", "pre", "script", "style"})

    def __init__(self, text: str):
        super().__init__()
        self.open: list[str] = []
        self.prose: list[str] = []
        self.links: list[tuple[str, str]] = []
        self.ids: set[str] = set()
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        if tag == "a":
            self.links.append((attrs.get("href") or "", ""))
        if tag in self._OPAQUE:
            self.open.append(tag)

    def handle_endtag(self, tag):
        if tag in self.open:
            while self.open.pop() != tag:
                pass

    def handle_data(self, data):
        if "a" in self.open and self.links:
            href, text = self.links[-1]
            self.links[-1] = (href, text + data)
        if not self.open:
            self.prose.append(data)


def built_pages(site: Path) -> dict[str, _Html]:
    """The site's pages by URL path ("dsl/", "reference/tritonml/")."""
    return {("" if path.parent == site else path.parent.relative_to(site).as_posix() + "/"):
            _Html(path.read_text(encoding="utf-8")) for path in sorted(site.rglob("index.html"))}


_PAGE_MENTION = re.compile(r"docs/[\w./-]+\.md")


@needs_mkdocs
def test_no_page_is_named_in_plain_text_on_the_site(site):
    # A docs/<page>.md outside a link and outside code: a cross-reference a reader cannot follow.
    plain = {url or "index": found for url, page in built_pages(site).items()
             if (found := sorted(set(_PAGE_MENTION.findall(" ".join(page.prose)))))}
    assert not plain, ("pages naming docs/<page>.md without a link (a page of docs/ writes "
                       f"[docs/x.md](x.md); a docstring's mention is linked on the site): {plain}")


@needs_mkdocs
def test_every_link_named_for_a_page_goes_to_that_page_and_section(site):
    pages = built_pages(site)
    checked, wrong = 0, []
    for url, page in pages.items():
        for href, text in page.links:
            named = re.fullmatch(r"docs/([\w-]+)\.md", text.strip())
            if named is None:
                continue
            checked += 1
            path, _, anchor = href.partition("#")
            target = posixpath.normpath(posixpath.join("/" + url, path)).lstrip("/") + "/"
            if target != f"{named[1]}/" or (anchor and anchor not in pages[target].ids):
                wrong.append(f"{url or 'index'}: {text} -> {href}")
    # Docstrings' mentions are among them: mkdocs checks their pages but not their anchors.
    reference = [href for href, text in pages["reference/tritonml/"].links
                 if text.startswith("docs/")]
    assert any("#" in href for href in reference), reference
    assert checked > 50 and not wrong, wrong


def _overloaded_in(path: Path) -> set[str]:
    """The names the module at ``path`` declares with ``typing.overload`` stubs."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                (d.id if isinstance(d, ast.Name) else getattr(d, "attr", None)) == "overload"
                for d in node.decorator_list):
            names.add(node.name)
    return names


def is_overloaded(identifier: str) -> bool:
    """Whether the public function ``identifier`` (``tritonml.cumulative_sum``) has overload stubs
    where it is defined."""
    module, _, name = identifier.rpartition(".")
    func = inspect.unwrap(getattr(importlib.import_module(module), name))
    if not inspect.isfunction(func):
        return False      # a @triton.jit function of tritonml.kernels.combine
    return func.__name__ in _overloaded_in(Path(inspect.getsourcefile(func)))


@needs_mkdocs
def test_a_function_shows_one_signature_and_its_overloads_in_a_line(site):
    overloaded = []
    for html in sorted((site / "reference").rglob("index.html")):
        text = html.read_text(encoding="utf-8")
        sections = re.split(r'(?=<h2 id="[\w.]+" class="doc doc-heading">)', text)
        for section in sections[1:]:
            identifier = re.match(r'<h2 id="([\w.]+)"', section)[1]
            if "doc-symbol-function" not in section.partition("</h2>")[0]:
                continue      # a class, an attribute, a module
            assert section.count("doc-signature") == 1 and "doc-overloads" not in section, (
                f"{identifier}: one signature, not one per overload")
            if is_overloaded(identifier):
                overloaded.append(identifier)
                assert "<strong>Overloads:</strong>" in section, f"{identifier}: no overloads line"
    assert "tritonml.cumulative_sum" in overloaded and len(overloaded) >= 5, overloaded


@needs_mkdocs
def test_long_code_lines_on_the_home_page_wrap(site):
    home = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="stylesheets/code.css"' in home
    css = (site / "stylesheets" / "code.css").read_text(encoding="utf-8")
    rule = re.search(r"^(?P<selector>[^{}/]+)\{(?P<body>[^}]*white-space:\s*pre-wrap[^}]*)\}",
                     css, re.MULTILINE)
    assert rule and '.highlight[class*="language-"]:not(.language-text)' in rule["selector"], css
    blocks = re.findall(r'<div class="([^"]*\bhighlight\b[^"]*)">', home)
    # Every block of the home page has a language, so its long lines wrap (the install command).
    assert blocks and all(re.search(r"\blanguage-(?!text\b)", b) for b in blocks), blocks


@needs_mkdocs
def test_a_broken_link_fails_the_strict_build(tmp_path):
    # A copy of what the site is built from, with a link to a missing anchor in a page and a
    # docstring naming a missing page: each must fail the build on its own line.
    copy = tmp_path / "src"
    copy.mkdir()
    ignore = shutil.ignore_patterns("__pycache__")
    for name in ("docs", "tritonml"):
        shutil.copytree(ROOT / name, copy / name, ignore=ignore)
    for name in ("mkdocs.yml", "tritonml_cli.py"):
        shutil.copy(ROOT / name, copy / name)
    # mkdocs.yml watches autotune/; griffe reads tritonml_autotune where Python finds it.
    (copy / "autotune").symlink_to(ROOT / "autotune", target_is_directory=True)
    page = copy / "docs" / "segments.md"
    text = page.read_text(encoding="utf-8")
    assert "](dsl.md)" in text
    page.write_text(text.replace("](dsl.md)", "](dsl.md#no-such-section)", 1), encoding="utf-8")
    module = copy / "tritonml" / "torch_ops" / "scan.py"
    text = module.read_text(encoding="utf-8")
    assert "See docs/semantics.md for dtypes" in text
    module.write_text(text.replace("See docs/semantics.md for dtypes",
                                   "See docs/no_such_page.md for dtypes", 1), encoding="utf-8")
    result = build_site(copy, tmp_path / "site")
    assert result.returncode != 0, result.stderr
    assert "'segments.md' contains a link 'dsl.md#no-such-section'" in result.stderr, result.stderr
    assert "contains a link '/no_such_page.md'" in result.stderr, result.stderr


def _hook(name: str):
    """A module of docs/hooks/ (the griffe extensions), loaded from its file."""
    spec = importlib.util.spec_from_file_location(name, DOCS / "hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(importlib.util.find_spec("griffe") is None, reason="needs the docs extra")
def test_a_docstrings_page_mentions_become_links_outside_code():
    links = _hook("griffe_page_links")
    text = ('Runs as before (docs/dsl.md, "Scanning\nin chunks"); docs/torch.md for autograd.\n'
            "See ``docs/dsl.md`` and [docs/reduce.md](/reduce.md).\n\n"
            "Examples:\n    >>> print('docs/dsl.md')\n    docs/dsl.md\n")
    assert links.link_mentions(text) == (
        'Runs as before ([docs/dsl.md](/dsl.md#scanning-in-chunks), "Scanning\nin chunks"); '
        "[docs/torch.md](/torch.md) for autograd.\n"
        "See ``docs/dsl.md`` and [docs/reduce.md](/reduce.md).\n\n"
        "Examples:\n    >>> print('docs/dsl.md')\n    docs/dsl.md\n")
    # A section named by the part of its heading before the colon.
    assert links.link_mentions('docs/semantics.md, "Moments"').startswith(
        "[docs/semantics.md](/semantics.md#moments-nan-and-infinities-in-a-mean-and-a-variance)")


@pytest.mark.skipif(importlib.util.find_spec("griffe") is None, reason="needs the docs extra")
def test_a_docstrings_section_that_is_no_heading_is_a_warning(caplog):
    # A renamed heading: the strict build fails on the warning, naming the docstring.
    links = _hook("griffe_page_links")
    with caplog.at_level("WARNING"):
        text = links.link_mentions('(docs/dsl.md, "No such section")', "tritonml.example")
    assert text == '([docs/dsl.md](/dsl.md), "No such section")'
    assert "tritonml.example: docs/dsl.md has no section 'No such section'" in caplog.text
