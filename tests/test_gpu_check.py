"""benchmarks/gpu_check.py's sweep, dry-run on CPU tensors through the interpreter: the checks a GPU
session runs (the segmented ops, the DSL's tuple states, the stress checks) pass here at tiny
shapes, and a wrong ``--ops`` is refused. (What it checks on a GPU is only checked there.)"""
import pytest

from benchmarks import gpu_check


def test_the_segment_dsl_and_stress_checks_pass_their_dry_run(capsys):
    assert gpu_check.main(["--dry-run", "--dtypes", "int32", "--ops", "segment,stress"]) == 0
    assert gpu_check.main(["--dry-run", "--dtypes", "bfloat16", "--ops", "dsl"]) == 0
    printed = capsys.readouterr().out
    assert "0 failed" in printed and "FAIL" not in printed
    assert "SKIPPED two_streams int32: needs CUDA" in printed


def test_an_unknown_check_is_refused():
    with pytest.raises(SystemExit):
        gpu_check.main(["--dry-run", "--ops", "scan,sort"])
