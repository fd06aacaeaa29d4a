"""A griffe extension for the API reference (mkdocs.yml): the docstrings' ``Example:`` section.

tritonml's docstrings follow the Google style with an ``Example:`` heading (Napoleon reads both
``Example:`` and ``Examples:``). griffe's Google parser knows only ``Examples:`` and renders any
other ``Word:`` heading as an admonition whose body is Markdown, where a doctest's ``>>>`` lines
become nested block quotes and ``d["key"]`` a link. This extension renames the heading before the
docstring is parsed, so the examples render as code.
"""
from __future__ import annotations

import re

import griffe

_HEADING = re.compile(r"^([ \t]*)Example:[ \t]*$", re.MULTILINE)


class ExampleSection(griffe.Extension):
    """Reads a docstring's ``Example:`` heading as Google's ``Examples:`` section."""

    def on_instance(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _HEADING.sub(r"\1Examples:", obj.docstring.value)
