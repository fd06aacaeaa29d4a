"""The torch names tritonml's code uses, and whether an older torch release defines each.

pyproject.toml's ``torch>=`` is the oldest release whose API tritonml's code uses; this is how
that is checked without installing the release (a CUDA wheel does not import without its CUDA
libraries): extract its wheel's Python sources and type stubs, and look each name up there.

    pip download --no-deps --only-binary=:all: torch==2.11.0 -d /tmp/w
    mkdir /tmp/w/src && unzip -q /tmp/w/torch-*.whl '*.py' '*.pyi' -d /tmp/w/src
    python -m benchmarks.torch_api --release-root /tmp/w/src --write benchmarks/torch_api_2_11.txt

Every name is a dotted path from an ``import torch...`` or an attribute chain on an imported torch
name (``torch.library.custom_op``, ``torch.float16``); ``torch.ops.*`` is left out (the ops are
registered at run time). A name counts as defined where its last module's source, or one of the
``torch/_C`` stubs for names the C extension defines, holds its first attribute as a word: a
look-up of where the name lives, not a proof of its signature. ``--write`` records the names found
in a list that tests/test_supported_versions.py holds the code to: a torch name used anywhere
later must be looked up in that release again.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SOURCES = ("tritonml", "autotune", "tritonml_cli.py")


def used_names(sources=SOURCES, repo: Path = REPO) -> set:
    """The dotted torch names the files under ``sources`` use."""
    names = set()
    files = []
    for source in sources:
        path = repo / source
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    for file in files:
        tree = ast.parse(file.read_text(encoding="utf-8"))
        aliases = {"torch": "torch"}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "torch":
                        names.add(alias.name)
                        if alias.asname:
                            aliases[alias.asname] = alias.name
            elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                  and node.module.split(".")[0] == "torch"):
                for alias in node.names:
                    names.add(f"{node.module}.{alias.name}")
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            chain, base = [], node
            while isinstance(base, ast.Attribute):
                chain.append(base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                names.add(".".join([aliases[base.id], *reversed(chain)]))
    return {n for n in names if n != "torch.ops" and not n.startswith("torch.ops.")}


def _module_file(root: Path, module: str):
    path = root.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py", path.with_suffix(".pyi"),
                      path / "__init__.pyi"):
        if candidate.exists():
            return candidate
    return None


def missing_in(root: Path, names) -> list:
    """The names the release extracted at ``root`` (the folder holding ``torch/``) lacks."""
    stubs = "\n".join(p.read_text(encoding="utf-8", errors="ignore")
                      for p in sorted((root / "torch" / "_C").glob("*.pyi")))
    missing = []
    for name in sorted(names):
        parts = name.split(".")
        for split in range(len(parts), 0, -1):
            found = _module_file(root, ".".join(parts[:split]))
            if found is not None:
                break
        else:
            missing.append(name)
            continue
        rest = parts[split:]
        if not rest:
            continue
        word = re.compile(rf"\b{re.escape(rest[0])}\b")
        package = (found.parent.glob("*.py*") if found.name.startswith("__init__") else ())
        if (word.search(found.read_text(encoding="utf-8", errors="ignore")) or word.search(stubs)
                or any(word.search(p.read_text(encoding="utf-8", errors="ignore"))
                       for p in package)):
            continue
        missing.append(name)
    return missing


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--release-root", type=Path, required=True,
                        help="the folder an older torch wheel's sources were extracted into")
    parser.add_argument("--write", type=Path,
                        help="record the names checked there (one a line) in this file")
    args = parser.parse_args(argv)
    names = used_names()
    missing = missing_in(args.release_root, names)
    print(f"{len(names)} torch names used; {len(missing)} not found under {args.release_root}")
    for name in missing:
        print(f"  {name}")
    if args.write and not missing:
        args.write.write_text("".join(f"{n}\n" for n in sorted(names)), encoding="utf-8")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
