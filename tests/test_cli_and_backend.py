"""The `tritonml` command's demo and info, and the backend choice at import."""
from __future__ import annotations

import os
import subprocess
import sys

import argparse

import numpy as np
import pytest

import tritonml
from tritonml import cli, examples


def test_demo_prints_every_documented_example_with_its_check(capsys):
    assert cli.main(["demo"]) == 0
    text = capsys.readouterr().out
    total = len(examples.all_examples())
    assert total >= 12  # 8 cumulative + DirectML's reduce examples
    assert text.count("check: OK") == total
    assert f"{total} of {total} documented examples match." in text
    for example in examples.all_examples():
        assert example.title in text


def test_demo_reports_a_mismatch(monkeypatch, capsys):
    # A wrong documented output must make the demo fail, not print OK.
    wrong = examples.SCAN_EXAMPLES[0]
    broken = type(wrong)(**{**wrong.__dict__, "expected": (np.asarray(wrong.expected) + 1).tolist()})
    monkeypatch.setattr(examples, "SCAN_EXAMPLES", [broken])
    monkeypatch.setattr(examples, "REDUCE_EXAMPLES", [])
    assert cli.main(["demo"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_info_names_versions_and_backend(capsys):
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    for word in ("torch", "triton", "interpreted", "device"):
        assert word in text


def test_version_prints_the_package_version_and_exits_0(capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"tritonml {tritonml.__version__}\n"


def _every_parser(parser):
    """``parser`` and each of its subcommands' parsers."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _every_parser(sub)


def test_help_texts_are_plain_text_without_rst_markup():
    parsers = list(_every_parser(cli.build_parser()))
    names = {p.prog for p in parsers}
    assert names == {"tritonml", "tritonml bench", "tritonml demo", "tritonml info",
                     "tritonml run", "tritonml tune", "tritonml validate"}
    for parser in parsers:
        text = parser.format_help()
        assert "`" not in text, (parser.prog, text)
        assert parser.description, parser.prog          # each command says what it does


def test_an_import_error_in_the_descriptor_commands_is_not_swallowed():
    """A broken tritonml._dml_cli must fail loudly, not silently drop ``run`` and ``validate``."""
    done = _python("import sys; sys.modules['tritonml._dml_cli'] = None\n"
                   "try:\n"
                   "    from tritonml import cli; cli.build_parser()\n"
                   "except ImportError as e:\n"
                   "    print('ImportError', e)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ImportError")


def _python(code: str, **env_changes):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(env_changes)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=300)


def test_import_chooses_the_interpreter_without_a_gpu():
    done = _python("import tritonml, os; print(tritonml.INTERPRET, os.environ['TRITON_INTERPRET'])")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "1"]


def test_triton_imported_first_in_compiled_mode_without_a_gpu_is_a_clear_error():
    done = _python("import triton, tritonml")
    assert done.returncode != 0
    assert "ImportError" in done.stderr
    assert "Import tritonml before triton" in done.stderr and "TRITON_INTERPRET=1" in done.stderr


def test_triton_imported_first_with_the_interpreter_on_is_fine():
    done = _python("import triton, tritonml, torch; "
                   "print(tritonml.cumulative_sum(torch.tensor([1, 2, 3]), 0).tolist())",
                   TRITON_INTERPRET="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1, 3, 6]"
