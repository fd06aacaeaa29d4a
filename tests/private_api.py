"""Finding uses of a library's private API in tritonml's own code (tests/core/test_triton_compat.py,
tests/core/test_torch_compat.py): each library's private API belongs in one compat module or package."""
from __future__ import annotations

import pathlib

REPO = pathlib.Path(__file__).resolve().parents[1]
# tritonml itself, and the tooling that instruments, compiles and times its kernels.
SCANNED = ("tritonml", "benchmarks")


def uses(pattern, text: str) -> list:
    """(line number, matched text) of each match of the compiled regex ``pattern`` in ``text``."""
    return [(text.count("\n", 0, m.start()) + 1, m.group(0).strip())
            for m in pattern.finditer(text)]


def offenders(pattern, allowed: pathlib.Path, root: pathlib.Path = REPO) -> list:
    """``path:line: text`` of each match of ``pattern`` in the Python files of SCANNED under
    ``root`` but ``allowed``: a compat module, or a compat package's folder and all below it."""
    found = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*.py")):
            if path != allowed and allowed not in path.parents:
                found.extend(f"{path.relative_to(root)}:{lineno}: {text}"
                             for lineno, text in uses(pattern, path.read_text(encoding="utf-8")))
    return found
