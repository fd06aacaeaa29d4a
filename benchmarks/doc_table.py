"""Rewrite the generated tables of docs/tuning.md and docs/performance.md from the code.

    python -m benchmarks.doc_table          (from the repository root)

docs/tuning.md: each table sits between ``<!-- choices H100 begin -->`` and
``<!-- choices H100 end -->`` (A100 likewise) and is ``tritonml.tuning.suite_choices_table(name)``;
tests/autotune/test_autotune_select.py fails when the doc and the code disagree. docs/performance.md: the
"Long scans" table between ``<!-- long scans H100 begin -->`` and ``<!-- long scans H100 end -->``
is ``tritonml.bench.long_scans.table("H100")`` (checked by tests/autotune/test_chunked_model.py).
docs/segments.md: the table between ``<!-- segments H100 begin -->`` and
``<!-- segments H100 end -->`` is ``tritonml.bench.segment_model.table()`` (checked by
tests/bench/test_segment_model.py). docs/scatter.md: the table between
``<!-- scatter H100 begin -->`` and ``<!-- scatter H100 end -->`` is
``tritonml.bench.scatter_model.table()`` (checked by tests/bench/test_scatter_model.py).

    python -m benchmarks.doc_table --check  (writes nothing; exit status 1 if a doc is stale)
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "tuning.md"
PERFORMANCE_DOC = ROOT / "docs" / "performance.md"
SEGMENTS_DOC = ROOT / "docs" / "segments.md"
SCATTER_DOC = ROOT / "docs" / "scatter.md"
TARGETS = ("H100", "A100")
LONG_SCANS_TARGET = "H100"


def section(name: str, kind: str = "choices") -> re.Pattern:
    return re.compile(rf"(<!-- {kind} {name} begin -->\n)(.*?)(<!-- {kind} {name} end -->)",
                      re.DOTALL)


def replaced(text: str, doc: Path, kind: str, name: str, table: str) -> str:
    """``text`` with its one ``<!-- kind name begin -->`` ... ``end`` section holding ``table``;
    a ValueError naming ``doc`` where there is not exactly one."""
    text, count = section(name, kind).subn(lambda m: m.group(1) + table + "\n" + m.group(3),
                                           text)
    if count != 1:
        raise ValueError(f"{doc}: expected one '{kind} {name}' section, found {count}")
    return text


def rendered(text: str) -> str:
    from tritonml import tuning

    for name in TARGETS:
        text = replaced(text, DOC, "choices", name, tuning.suite_choices_table(name))
    return text


def rendered_performance(text: str) -> str:
    from tritonml.bench import long_scans

    return replaced(text, PERFORMANCE_DOC, "long scans", LONG_SCANS_TARGET,
                    long_scans.table(LONG_SCANS_TARGET))


def rendered_segments(text: str) -> str:
    from tritonml.bench import segment_model

    return replaced(text, SEGMENTS_DOC, "segments", "H100", segment_model.table())


def rendered_scatter(text: str) -> str:
    from tritonml.bench import scatter_model

    return replaced(text, SCATTER_DOC, "scatter", "H100", scatter_model.table())


def main(argv=None) -> int:
    """Rewrite each doc's tables; with ``--check``, only say which are stale (exit status 1)."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale = []
    for doc, render in ((DOC, rendered), (PERFORMANCE_DOC, rendered_performance),
                        (SEGMENTS_DOC, rendered_segments), (SCATTER_DOC, rendered_scatter)):
        text = doc.read_text(encoding="utf-8")
        new = render(text)
        if new != text:
            stale.append(doc)
            if not check:
                doc.write_text(new, encoding="utf-8")
            print(f"{'stale' if check else 'updated'} {doc}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
