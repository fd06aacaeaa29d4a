"""benchmarks/gpu_check.py's sweep, dry-run on CPU tensors through the interpreter: the checks a GPU
session runs (the segmented ops, the DSL's tuple states, the stress checks) pass here at tiny
shapes, and a wrong ``--ops`` is refused. (What it checks on a GPU is only checked there.)"""
import pytest
import torch

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


def test_each_run_of_a_case_poisons_its_allocations_with_its_own_byte():
    """An element an op leaves unwritten holds a different value in the two runs, even where one
    poison is the right answer (an integer MIN of nothing is the maximum; an AVERAGE of nothing
    is NaN); what the op writes, torch.zeros included, is untouched."""
    from benchmarks import gpu_check_segments as S

    def partly_written(dtype, right):
        out = torch.empty(6, dtype=dtype)
        out[:-1] = right
        return out, torch.zeros(3, dtype=dtype)

    for dtype, right in ((torch.int32, 2**31 - 1), (torch.float32, float("nan")),
                         (torch.uint8, 255)):
        with S._poisoned_allocations(0):
            first, zeros = partly_written(dtype, right)
        with S._poisoned_allocations(1):
            again, _ = partly_written(dtype, right)
        assert torch.equal(zeros, torch.zeros(3, dtype=dtype))
        assert first[:-1].view(torch.uint8).tolist() == again[:-1].view(torch.uint8).tolist()
        with pytest.raises(AssertionError, match="two runs differ"):
            S._same_bits(first, again)


def test_the_gpu_session_script_runs_a_phase_and_refuses_an_unknown_one(tmp_path):
    import pathlib
    import subprocess
    import sys
    script = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_session.sh"
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(script), "env"], env=env, capture_output=True, text=True,
                          timeout=300)
    written = (tmp_path / "env.txt").read_text()
    assert f"triton: {__import__('triton').__version__}" in written, written
    assert f"torch: {torch.__version__}" in written, written
    refused = subprocess.run(["bash", str(script), "sort"], env=env, capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 2 and "unknown phase 'sort'" in refused.stderr
    assert done.returncode == 0, done.stderr
