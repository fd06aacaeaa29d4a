"""The `tritonml` command's demo and info, and the backend choice at import."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

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
