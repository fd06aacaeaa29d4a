"""The code in README.md and docs/*.md runs as written.

Every ```python fenced block of README.md, docs/*.md and benchmarks/README.md is collected and run, one test per block (named by file and block
index, counting python blocks from 0 in each file):

- a block that contains ``>>>`` is a doctest: each example runs and its printed output is compared
  with what the block shows (whitespace normalized, ``...`` allowed in outputs);
- any other python block is exec'ed.

Each block runs in a fresh namespace, in a temporary working directory, so blocks stand on their
own: a block must import what it uses and cannot depend on an earlier block. Blocks fenced as
anything else (```sh, ```json, plain ```) are not run; the ```json blocks of docs/dml.md are
checked against the example files they reproduce.
"""
from __future__ import annotations

import doctest
import json
import re
from pathlib import Path

import pytest

# README.md and docs/ are the repository's, not the wheel's (tests/conftest.py leaves this module
# out of installed runs: it reads them while collecting).
pytestmark = pytest.mark.source_tree

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md"]
EXAMPLES = ROOT / "docs" / "examples"

# A fenced block: an opening fence with its info string, the body, a closing fence at the same
# indentation.
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                    re.DOTALL | re.MULTILINE)


def fenced_blocks(path: Path, language: str) -> list[tuple[int, str]]:
    """(line number, code) of each block fenced as ``language`` in ``path``, in order."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        if match["info"].strip().split(" ")[0].lower() != language:
            continue
        line = text.count("\n", 0, match.start("body")) + 1
        body = match["body"]
        indent = match["indent"]
        if indent:
            body = "\n".join(l[len(indent):] if l.startswith(indent) else l
                             for l in body.split("\n"))
        blocks.append((line, body))
    return blocks


def _shown(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def _cases(language: str):
    for path in DOC_FILES:
        for index, (line, code) in enumerate(fenced_blocks(path, language)):
            yield pytest.param(path, line, code, id=f"{_shown(path)}-{language}{index}")


PYTHON_BLOCKS = list(_cases("python"))
JSON_BLOCKS = list(_cases("json"))


def test_the_docs_have_python_blocks_to_check():
    files = {case.values[0].name for case in PYTHON_BLOCKS}
    assert {"README.md", "dml.md"} <= files
    assert len(PYTHON_BLOCKS) >= 3


@pytest.mark.parametrize("path,line,code", PYTHON_BLOCKS)
def test_python_block_runs_as_written(path, line, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = f"{_shown(path)}:{line}"
    namespace = {"__name__": "__doc_example__"}
    if ">>>" not in code:
        exec(compile(code, name, "exec"), namespace)
        return
    test = doctest.DocTestParser().get_doctest(code, namespace, name, str(path), line - 1)
    assert test.examples, f"{name}: no doctest examples found"
    runner = doctest.DocTestRunner(
        optionflags=doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS, verbose=False)
    report: list[str] = []
    results = runner.run(test, out=report.append)
    assert results.failed == 0, "".join(report)


@pytest.mark.parametrize("path,line,code", JSON_BLOCKS)
def test_json_block_is_one_of_the_example_files(path, line, code):
    """A JSON descriptor shown in the docs is the file in docs/examples/ that the CLI tests run."""
    shown = json.loads(code)
    files = {p.name: json.loads(p.read_text()) for p in EXAMPLES.glob("*.json")}
    assert shown in files.values(), f"{path.name}:{line} matches no file in docs/examples/"


def test_fenced_blocks_finds_python_and_skips_other_languages(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("text\n```python\nx = 1\n```\n```sh\nls\n```\n  ```python\n  >>> 1 + 1\n  2\n"
                   "  ```\n")
    assert fenced_blocks(doc, "python") == [(3, "x = 1\n"), (9, ">>> 1 + 1\n2\n")]
    assert fenced_blocks(doc, "sh") == [(6, "ls\n")]


def test_a_wrong_claimed_output_fails(tmp_path, monkeypatch):
    """The check is real: a doctest whose shown output is wrong does not pass."""
    code = ">>> import torch, tritonml\n>>> tritonml.cumulative_sum(torch.tensor([1, 2]), 0)\n" \
           "tensor([1, 4])\n"
    with pytest.raises(AssertionError, match="Expected"):
        test_python_block_runs_as_written(tmp_path / "doc.md", 1, code, tmp_path, monkeypatch)
