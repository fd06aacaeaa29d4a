"""Rewrite the generated choice tables of docs/tuning.md from the code.

    python autotune/scripts/doc_table.py          (from the repository root)

Each table sits between ``<!-- choices H100 begin -->`` and ``<!-- choices H100 end -->`` (A100
likewise) and is ``tritonml.tuning.suite_choices_table(name)``; tests/test_autotune_select.py
fails when the doc and the code disagree.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parents[2] / "docs" / "tuning.md"
TARGETS = ("H100", "A100")


def section(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- choices {name} begin -->\n)(.*?)(<!-- choices {name} end -->)", re.DOTALL)


def rendered(text: str) -> str:
    from tritonml import tuning

    for name in TARGETS:
        table = tuning.suite_choices_table(name)
        text, count = section(name).subn(lambda m: m.group(1) + table + "\n" + m.group(3), text)
        if count != 1:
            raise ValueError(f"{DOC}: expected one 'choices {name}' section, found {count}")
    return text


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    new = rendered(text)
    if new != text:
        DOC.write_text(new, encoding="utf-8")
        print(f"updated {DOC}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
