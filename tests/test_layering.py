"""The layers of docs/architecture.md, and which may import which: every import statement in
tritonml/ is checked, at module level and inside functions alike (an import made when a function
is called ties the layers together as much as one made at import time).

``ALLOWED`` is the table; docs/architecture.md ("Which layer imports which") prints the same
table, which the second test compares. A new module belongs to the layer its folder says
(``layer_of``).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.source_tree

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tritonml"

# Folders (and top-level modules) and their layer, the first match winning.
FOLDERS = (("tritonml.torch_ops", "torch ops"), ("tritonml.records", "records"),
           ("tritonml.launchers", "launchers"),
           ("tritonml.kernels", "kernels"), ("tritonml.runtime", "runtime"),
           ("tritonml.core", "core"), ("tritonml.bench", "tooling"),
           ("tritonml_autotune", "tuner"), ("tritonml", "public"))

ALLOWED = {
    "public": {"torch ops", "records", "launchers", "runtime", "core", "tuner", "tooling"},
    "torch ops": {"records", "launchers", "runtime", "core", "tuner"},
    "records": {"kernels", "runtime", "core"},
    "launchers": {"records", "kernels", "runtime", "core", "tuner"},
    "kernels": {"core"},
    "runtime": {"core", "tuner"},
    "core": set(),
    "tooling": {"public", "torch ops", "records", "launchers", "kernels", "runtime", "core",
                "tuner"},
}


def layer_of(module: str) -> str | None:
    for prefix, layer in FOLDERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return None  # torch, triton, the standard library


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, root: Path = ROOT):
    """(line, module) for every module an import statement in ``path`` names, relative imports
    resolved; ``from package import name`` counts as importing ``package.name``."""
    module = _module_name(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                yield node.lineno, f"{source}.{alias.name}"


def _crossings():
    for path in sorted(PACKAGE.rglob("*.py")):
        importer = _module_name(path)
        own = layer_of(importer)
        for line, target in _imported(path):
            theirs = layer_of(target)
            if theirs is not None and theirs != own:
                yield own, theirs, f"{path.relative_to(ROOT)}:{line} imports {target}"


def test_every_import_keeps_to_the_table():
    wrong = [where for own, theirs, where in _crossings() if theirs not in ALLOWED[own]]
    assert not wrong, ("imports across layers that docs/architecture.md does not allow:\n"
                       + "\n".join(wrong))


def test_the_table_is_the_one_in_the_architecture_page():
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Which layer imports which", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| ([a-z ]+) \| ([^|]*) \|$", section, re.M)
    documented = {layer: {name.strip() for name in names.split(",") if name.strip()}
                  for layer, names in rows if layer != "layer"}
    written = {layer: allowed or {"nothing"} for layer, allowed in ALLOWED.items()}
    assert documented == written


def test_the_check_sees_a_call_time_import(tmp_path):
    # a function-level import that climbs a layer is found like a module-level one
    kernels = tmp_path / "tritonml" / "kernels"
    kernels.mkdir(parents=True)
    (kernels / "climbs.py").write_text("def f():\n    from ..torch_ops import reduce\n")
    found = list(_imported(kernels / "climbs.py", root=tmp_path))
    assert found == [(2, "tritonml.torch_ops.reduce")]
    assert layer_of("tritonml.kernels.climbs") == "kernels"
    assert layer_of(found[0][1]) == "torch ops" and "torch ops" not in ALLOWED["kernels"]
