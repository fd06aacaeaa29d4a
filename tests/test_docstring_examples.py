"""The examples in the public API's docstrings run as written.

Every name in ``tritonml.__all__`` (its functions and classes, their methods included) and the
``tritonml.records.ready_reductions`` module carry Google-style docstrings whose ``Example:`` sections are
doctests: each runs in a fresh namespace and its printed output must match what the docstring
shows. The examples use CPU tensors, which run tritonml's kernels through Triton's interpreter.
"""
from __future__ import annotations

import doctest
import types

import pytest

import tritonml
from tritonml import reductions

# Names in __all__ that are modules or plain values: documented elsewhere (the modules) or by the
# package's own docstring, not by a docstring of their own.
NOT_OBJECTS = {"tuning", "reductions", "INTERPRET", "__version__"}

interpreted_only = pytest.mark.skipif(
    not tritonml.INTERPRET, reason="the examples use CPU tensors: Triton's interpreter runs them")


def _doctests(obj, name: str) -> list[doctest.DocTest]:
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [test for test in finder.find(obj, name, globs={}) if test.examples]


def _public_objects():
    for name in tritonml.__all__:
        if name not in NOT_OBJECTS:
            yield f"tritonml.{name}", getattr(tritonml, name)


def test_every_public_name_has_an_example():
    missing = [name for name, obj in _public_objects() if not _doctests(obj, name)]
    assert not missing, f"public names without a docstring example: {missing}"
    assert isinstance(reductions, types.ModuleType) and _doctests(reductions, "reductions")


@interpreted_only
def test_docstring_examples_run_as_written():
    tests = [test for name, obj in _public_objects() for test in _doctests(obj, name)]
    tests += _doctests(reductions, "tritonml.records.ready_reductions")
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    failed = []
    for test in tests:
        result = runner.run(test, out=lambda text: failed.append(text))
        assert result.attempted > 0
    assert not failed, "docstring examples that do not print what they show:\n" + "".join(failed)
    # every example ran: one test or more per public object, beyond the module's
    assert len(tests) >= len(list(_public_objects()))
