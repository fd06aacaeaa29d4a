"""The docstring examples of the public modules tritonml.dml, tritonml.distributed, tritonml.tuning,
tritonml.runtime and tritonml.kernels.combine run as written.

Every ``>>>`` example in the docstrings of the modules that define these packages' public names is
collected with ``doctest`` and run, one test function per public module (not parametrized: the
fast tier keeps only a few cases of a parametrized test, and every example must run there); the
printed output must match what the docstring shows (whitespace normalized, no ``...``
wildcards). ``@triton.jit`` helpers (``merge_along``) are Triton objects, and a constant's
docstring is a string after its assignment in the source (``DEFAULT_FEATURE_LEVEL``): doctest's
finder sees neither, so those are collected by hand. The distributed examples start a
world-size-1 gloo group in-process and destroy it at the end of the example. A last test requires
an example in the docstring of every public function and class of these modules.
"""
from __future__ import annotations

import ast
import doctest
import importlib
import sys

import tritonml  # noqa: F401  (first: chooses interpreted Triton before triton is imported)
from triton.runtime.jit import KernelInterface

# Each public module and the modules whose docstrings hold its examples (read from sys.modules:
# the attribute ``tritonml.dml.validate`` is the function, not the module).
MODULES = {
    "tritonml.dml": ["tritonml.dml.errors", "tritonml.dml.enums", "tritonml.dml.descs",
                     "tritonml.dml.support", "tritonml.dml.validate", "tritonml.dml.execute"],
    "tritonml.distributed": ["tritonml.distributed.spmd", "tritonml.distributed.scan",
                             "tritonml.distributed.reduce"],
    "tritonml.tuning": ["tritonml.tuning"],
    "tritonml.runtime": ["tritonml.runtime.caches", "tritonml.runtime.trace"],
    "tritonml.kernels.combine": ["tritonml.kernels.combine"],
}
PUBLIC = list(MODULES)
FLAGS = doctest.NORMALIZE_WHITESPACE


def _module(name: str):
    importlib.import_module(name)
    return sys.modules[name]


def _jit_doc(obj) -> str:
    """The docstring of a ``@triton.jit`` function (compiled: a JITFunction; interpreted: an
    InterpretedFunction, whose own ``__doc__`` is None)."""
    return getattr(obj, "fn", obj).__doc__ or ""


def _constant_docs(module) -> list:
    """(name, docstring) of each module-level assignment followed by a string (an attribute
    docstring, as mkdocstrings reads it)."""
    with open(module.__file__, encoding="utf-8") as f:
        body = ast.parse(f.read()).body
    docs = []
    for node, after in zip(body, body[1:]):
        target = (node.target if isinstance(node, ast.AnnAssign) else
                  node.targets[0] if isinstance(node, ast.Assign) else None)
        if (isinstance(target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs.append((target.id, after.value.value))
    return docs


def _doctests(public: str) -> list:
    finder, parser, tests = doctest.DocTestFinder(), doctest.DocTestParser(), []
    for name in MODULES[public]:
        module = _module(name)
        tests += [t for t in finder.find(module, name) if t.examples]
        for attr in getattr(module, "__all__", ()):  # Triton's objects: skipped by the finder
            obj = getattr(module, attr)
            if isinstance(obj, KernelInterface):
                test = parser.get_doctest(_jit_doc(obj), dict(vars(module)), f"{name}.{attr}",
                                          module.__file__, 0)
                if test.examples:
                    tests.append(test)
        for attr, doc in _constant_docs(module):
            test = parser.get_doctest(doc, dict(vars(module)), f"{name}.{attr}", module.__file__, 0)
            if test.examples:
                tests.append(test)
    return sorted(tests, key=lambda t: t.name)


def test_the_examples_are_collected():
    names = {t.name for public in PUBLIC for t in _doctests(public)}
    for expected in ("tritonml.dml.descs.TensorDesc", "tritonml.dml.execute.compile_operator",
                     "tritonml.distributed.scan.cumulative_sum", "tritonml.tuning.target",
                     "tritonml.runtime.trace.record", "tritonml.kernels.combine.merge_along",
                     "tritonml.dml.enums.DEFAULT_FEATURE_LEVEL",
                     "tritonml.distributed.spmd.METADATA_TIMEOUT", "tritonml.tuning.TARGET_ENV"):
        assert expected in names


def _run_examples(public: str, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRITONML_TARGET", raising=False)  # tuning's examples assume no target
    failures: list = []
    tests = _doctests(public)
    assert tests, f"{public}: no docstring examples found"
    for test in tests:
        runner = doctest.DocTestRunner(optionflags=FLAGS, verbose=False)
        runner.run(test, out=failures.append)
    assert not failures, "".join(failures)


def test_dml_examples_run_as_written(monkeypatch, tmp_path):
    _run_examples("tritonml.dml", monkeypatch, tmp_path)


def test_distributed_examples_run_as_written(monkeypatch, tmp_path):
    _run_examples("tritonml.distributed", monkeypatch, tmp_path)


def test_tuning_examples_run_as_written(monkeypatch, tmp_path):
    _run_examples("tritonml.tuning", monkeypatch, tmp_path)


def test_runtime_examples_run_as_written(monkeypatch, tmp_path):
    _run_examples("tritonml.runtime", monkeypatch, tmp_path)


def test_combine_examples_run_as_written(monkeypatch, tmp_path):
    _run_examples("tritonml.kernels.combine", monkeypatch, tmp_path)


def test_a_wrong_example_fails():
    wrong = doctest.DocTestParser().get_doctest(
        ">>> from tritonml.dml import calc_buffer_tensor_size\n"
        ">>> calc_buffer_tensor_size('FLOAT16', [3])\n6\n", {}, "wrong", "wrong.py", 0)
    runner = doctest.DocTestRunner(optionflags=FLAGS, verbose=False)
    runner.run(wrong, out=lambda text: None)
    assert runner.failures == 1


def _documented_here(module_name: str, obj) -> bool:
    """Whether ``obj`` (a public name of ``module_name``) is defined in these modules (not a
    re-export from another package, such as tritonml_autotune's Device)."""
    home = getattr(obj, "__module__", "") or ""
    return any(home == m or home.startswith(m + ".") for m in PUBLIC) or \
        isinstance(obj, KernelInterface)


def test_every_public_function_and_class_has_an_example():
    missing = []
    for module_name in PUBLIC:
        missing += _without_example(module_name)
    assert not missing, f"public names without a docstring example: {missing}"


def _without_example(module_name: str) -> list:
    module = _module(module_name)
    missing = []
    for attr in module.__all__:
        obj = getattr(module, attr)
        if isinstance(obj, type(sys)):  # a submodule (tritonml.runtime.trace): its names
            objs = [(f"{attr}.{a}", getattr(obj, a)) for a in obj.__all__]
        elif callable(obj) and _documented_here(module_name, obj):
            objs = [(attr, obj)]
        else:
            continue
        missing += [f"{module_name}.{name}" for name, o in objs
                    if ">>>" not in _jit_doc(o) and not _documented_by_class(o)]
    return missing


def _documented_by_class(obj) -> bool:
    # A dataclass of results (trace.Launch / Recorder) is shown in its function's example.
    return getattr(obj, "__module__", "") == "tritonml.runtime.trace" and isinstance(obj, type)
