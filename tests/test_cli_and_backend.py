"""The `tritonml` command's demo and info, and the backend choice at import."""
from __future__ import annotations

import os
import subprocess
import sys

import argparse
from pathlib import Path

import numpy as np
import pytest

import tritonml
from tritonml import cli, examples
from tests.timing import limit


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
    """A broken tritonml.dml.cli must fail loudly when its command runs, not silently."""
    done = _python("import sys; sys.modules['tritonml.dml.cli'] = None\n"
                   "from tritonml import cli\n"
                   "try:\n"
                   "    cli.main(['validate', 'op.json'])\n"
                   "except ImportError as e:\n"
                   "    print('ImportError', e)\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ImportError")


HEAVY = ("torch", "triton", "numpy", "tritonml")
# Runs the console command's entry point (pyproject's [project.scripts]) with argv and prints the
# heavy modules it imported: tritonml's package imports torch and triton, which takes seconds.
ENTRY_POINT_PROBE = """
import importlib, json, sys, tomllib
with open("pyproject.toml", "rb") as f:
    module, _, name = tomllib.load(f)["project"]["scripts"]["tritonml"].partition(":")
sys.argv = ["tritonml", *json.loads(sys.argv[1])]
try:
    getattr(importlib.import_module(module), name)()
except SystemExit as exc:
    assert exc.code == 0, exc.code
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & set(%r))))
""" % (HEAVY,)


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["demo", "--help"], ["info", "--help"],
                                  ["tune", "--help"], ["bench", "--help"], ["run", "--help"],
                                  ["validate", "--help"]])
def test_version_and_help_import_neither_torch_nor_triton(argv):
    import json

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", ENTRY_POINT_PROBE, json.dumps(argv)], cwd=root,
                          capture_output=True, text=True, env=env, timeout=limit(120))
    assert done.returncode == 0, done.stderr
    *text, imported = done.stdout.strip().splitlines()
    assert json.loads(imported) == []
    assert ("tritonml 0.1.0" if argv == ["--version"] else "usage: tritonml") in "\n".join(text)
    # ``python -m tritonml_cli`` is the same entry point.
    probe = f"import runpy, sys; sys.argv = ['tritonml_cli', *{argv!r}]\n" \
            "try:\n    runpy.run_module('tritonml_cli', run_name='__main__')\n" \
            "except SystemExit as exc:\n    assert exc.code == 0\n" \
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True,
                          env=env, timeout=limit(120))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_cli_module_lists_the_librarys_names():
    """The help texts' names, spelled out in tritonml_cli (no torch there), are the library's."""
    import tritonml_cli
    from tritonml import dml
    from tritonml.bench import cases

    assert tritonml_cli.BENCH_CASES == tuple(cases.ENTRIES)
    assert tritonml_cli.BENCH_OPS == cases.ALL_OPS
    assert tritonml_cli.BENCH_DTYPES == tuple(map(cases.dtype_text, cases.ALL_DTYPES))
    assert tritonml_cli.FEATURE_LEVELS == tuple(str(level) for level in dml.FeatureLevel)
    assert tritonml_cli.DEFAULT_FEATURE_LEVEL == str(dml.DEFAULT_FEATURE_LEVEL)
    assert tritonml_cli.__version__ == tritonml.__version__


def _python(code: str, **env_changes):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(env_changes)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=limit(300))


def test_import_chooses_the_interpreter_without_a_gpu():
    done = _python("import tritonml, os; print(tritonml.INTERPRET, os.environ['TRITON_INTERPRET'])")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "1"]


def test_triton_imported_first_with_the_interpreter_on_is_fine():
    done = _python("import triton, tritonml, torch; "
                   "print(tritonml.cumulative_sum(torch.tensor([1, 2, 3]), 0).tolist())",
                   TRITON_INTERPRET="1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[1, 3, 6]"


@pytest.mark.parametrize("command", [["demo"], ["info"], ["validate", "docs/examples/reduce.json"]])
def test_a_reader_that_stops_reading_ends_the_command_quietly(command):
    # ``tritonml demo | head -1``: the reader is gone before the command writes (its end of the
    # pipe is closed before the command starts). Unix tools end silently with 128 + SIGPIPE.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", "tritonml_cli", *command], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=limit(300),
                              cwd=Path(__file__).resolve().parent.parent)
    finally:
        os.close(write_end)
    assert done.stderr == ""
    assert done.returncode == 141
