"""A griffe extension for the API reference (mkdocs.yml): a line summing up a function's overloads.

Several public functions carry ``typing.overload`` stubs so that type checkers know, say, that
``cumulative_sum(..., return_carry=True)`` returns a pair. Shown as signatures they repeat the
whole parameter list once per stub, so mkdocs.yml sets ``show_overloads: false`` and the
reference shows the implementation's signature only. This extension keeps what the stubs say
by adding, after the docstring's first paragraph, one line naming for each stub the arguments
that set the result's type and that type:

    **Overloads:** `return_carry=False` → `torch.Tensor`; `return_carry=True` → `Tuple[...]`.

An argument is named where the stub's annotation differs from the implementation's: as
``name=value`` for a one-value ``Literal``, else as ``name: annotation``. A stub that differs in
nothing (the catch-all, typed as the implementation) is left out, and so is the last stub, whose
``**unexpected_keyword: NoReturn`` only makes type checkers name a misspelt keyword.
"""
from __future__ import annotations

import re

import griffe

_LITERAL = re.compile(r"^(?:typing\.)?Literal\[(?P<value>[^,\[\]]+)\]$")


def _condition(name: str, annotation: str) -> str:
    literal = _LITERAL.match(annotation)
    return f"{name}={literal['value']}" if literal else f"{name}: {annotation}"


def summary(func: griffe.Function) -> str | None:
    """The overloads line for ``func``, or None when no stub says more than its signature."""
    own = {p.name: str(p.annotation) for p in func.parameters}
    entries = []
    for stub in func.overloads or ():
        if any(p.kind is griffe.ParameterKind.var_keyword and "NoReturn" in str(p.annotation)
               for p in stub.parameters):
            continue  # the stub that makes type checkers name a misspelt keyword
        conditions = [_condition(p.name, str(p.annotation)) for p in stub.parameters
                      if p.annotation is not None and own.get(p.name) != str(p.annotation)]
        if not conditions and str(stub.returns) == str(func.returns):
            continue
        when = f"`{', '.join(conditions)}`" if conditions else "otherwise"
        entries.append(f"{when} → `{stub.returns}`")
    return f"**Overloads:** {'; '.join(entries)}." if entries else None


class OverloadSummary(griffe.Extension):
    """Adds the overloads line to the docstring of each function that has ``typing.overload``
    stubs."""

    def on_function_instance(self, *, func: griffe.Function, **kwargs) -> None:
        if not func.overloads or func.docstring is None or (line := summary(func)) is None:
            return
        first, blank, rest = func.docstring.value.partition("\n\n")
        func.docstring.value = f"{first}\n\n{line}{blank}{rest}"
