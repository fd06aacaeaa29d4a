"""Private Triton API is used in one package, tritonml/core/triton_compat/, and what it relies on
is there in the installed Triton."""
from __future__ import annotations

import re

import pytest
import triton.language as tl

from tests.private_api import REPO, offenders, uses
from tritonml.core import triton_compat as _triton_compat

COMPAT = REPO / "tritonml" / "core" / "triton_compat"

# Text that reaches into Triton's private API: its internal modules, private names, the code
# generator's keyword arguments.
PRIVATE_TRITON = re.compile("|".join((
    r"\btl\.(?:core|standard|semantic)\b",
    r"\btriton\.language\.(?:core|standard|semantic)\b",
    r"\btriton\.runtime\b",
    r"\b(?:tl|triton)(?:\.[A-Za-z]\w*)*\._(?!_)\w*",          # tl._x, triton.language._x
    r"^\s*from\s+triton(?:\.[\w.]+)?\s+import\s+.*\b_[a-z]\w*",  # from triton... import _x
    r"\b_semantic\b", r"\b_generator\b", r"\b_builder\b",
    r"\b_pack_args\b", r"\bcreate_function_from_signature\b", r"\b_unwrap_if_constexpr\b",
)), re.MULTILINE)


def private_triton_uses(text: str) -> list:
    """(line number, matched text) of each private Triton reference in ``text``."""
    return uses(PRIVATE_TRITON, text)


def test_installed_triton_has_every_private_name_the_compat_module_relies_on():
    missing = _triton_compat.check()
    assert not missing, _triton_compat.check_message(missing)


def test_a_missing_private_name_is_reported_by_name(monkeypatch):
    monkeypatch.delattr(tl.standard, "_sum_combine")
    missing = _triton_compat.check()
    assert missing == ["triton.language.standard._sum_combine (not found)"]
    message = _triton_compat.check_message(missing)
    assert "tritonml/core/triton_compat/" in message
    assert "triton.language.standard._sum_combine" in message


def test_a_lost_parameter_is_reported_by_name(monkeypatch):
    monkeypatch.setitem(_triton_compat._REQUIRED, "triton.language.core.reduce",
                        ("keep_dims", "_semantic", "_no_such_parameter"))
    assert _triton_compat.check() == ["triton.language.core.reduce (no parameter _no_such_parameter)"]


@pytest.mark.parametrize("line", [
    "add = tl.standard._sum_combine",
    "fn = tl.core._unwrap_if_constexpr(fn)",
    "@tl.core.builtin",
    "from triton.runtime.jit import create_function_from_signature",
    "from triton.runtime import interpreter",
    "import triton.language.core as core",
    "from triton.language.standard import _prod_combine",
    "return tl.reduce(x, 0, f, _semantic=_semantic)",
    "kernel._pack_args(backend, meta, bound, spec, options)",
    "triton._C.libtriton",
])
def test_the_scan_flags_private_triton_api(line):
    assert private_triton_uses(line), line


@pytest.mark.parametrize("line", [
    "return tl.associative_scan(x, 0, combine, reverse=REVERSE)",
    "interpreting = bool(triton.knobs.runtime.interpret)",
    "from triton.compiler import ASTSource, compile, make_backend",
    "self._ptr = 1 << 20",
    "print(triton.__version__)",
    "from tritonml import _trace",
])
def test_the_scan_leaves_public_api_alone(line):
    assert not private_triton_uses(line), line


@pytest.mark.source_tree
def test_no_module_but_the_compat_package_touches_private_triton_api():
    found = offenders(PRIVATE_TRITON, COMPAT)
    assert not found, ("private Triton API belongs in tritonml/core/triton_compat/ only:\n"
                       + "\n".join(found))


def test_the_exemption_is_the_compat_package_and_nothing_beside_it(tmp_path):
    # Its modules at any depth are exempt; a module named like it, or anywhere else, is found.
    for name in ("tritonml/core/triton_compat/__init__.py", "tritonml/core/triton_compat/a/b.py",
                 "tritonml/core/triton_compat_more.py", "tritonml/kernels/k.py", "benchmarks/b.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("add = tl.standard._sum_combine\n")
    found = offenders(PRIVATE_TRITON, tmp_path / "tritonml" / "core" / "triton_compat",
                      root=tmp_path)
    assert {line.split(":", 1)[0] for line in found} == {
        "tritonml/core/triton_compat_more.py", "tritonml/kernels/k.py", "benchmarks/b.py"}
