"""benchmarks/gpu_check.py's sweep, dry-run on CPU tensors through the interpreter: the checks a GPU
session runs (the segmented ops, the DSL's tuple states, the scatter ops, the stress checks)
pass here at tiny shapes, and a wrong ``--ops`` is refused. (What it checks on a GPU is only
checked there.)"""
import pathlib
import subprocess
import sys

import pytest
import torch

from benchmarks import gpu_check
from tests.timing import limit

SESSION_SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_session.sh"


def test_the_segment_dsl_scatter_and_stress_checks_pass_their_dry_run(capsys):
    assert gpu_check.main(["--dry-run", "--dtypes", "int32", "--ops", "segment,stress"]) == 0
    assert gpu_check.main(["--dry-run", "--dtypes", "bfloat16", "--ops", "dsl"]) == 0
    assert gpu_check.main(["--dry-run", "--dtypes", "float16,int8", "--ops", "scatter"]) == 0
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


def _packed(out: pathlib.Path, cut_off: bool = False) -> dict:
    """The files of ``out/results.tar.gz`` by name, their text; ``out`` holds it and summary.md
    alone (a device run brings back 8 files at most), and, ``cut_off`` in the middle of a pack,
    the hidden file that pack was writing."""
    import tarfile
    names = sorted(p.name for p in out.iterdir() if not (cut_off and p.name.startswith(".")))
    assert names == ["results.tar.gz", "summary.md"]
    with tarfile.open(out / "results.tar.gz") as archive:
        return {member.name.removeprefix("./"): archive.extractfile(member).read().decode()
                for member in archive.getmembers() if member.isfile()}


def test_the_gpu_session_script_runs_a_phase_and_refuses_an_unknown_one(tmp_path):
    script = SESSION_SCRIPT
    env = {"PATH": "/usr/bin:/bin", "OUT": str(tmp_path), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(script), "env"], env=env, capture_output=True, text=True,
                          timeout=limit(300))
    assert done.returncode == 0, done.stderr
    written = _packed(tmp_path)["env.txt"]
    assert f"triton: {__import__('triton').__version__}" in written, written
    assert f"torch: {torch.__version__}" in written, written
    summary = (tmp_path / "summary.md").read_text()
    assert "## Machine" in summary and f"triton {__import__('triton').__version__}" in summary
    refused = subprocess.run(["bash", str(script), "sort"], env=env, capture_output=True,
                             text=True, timeout=limit(60))
    assert refused.returncode == 2 and "unknown phase 'sort'" in refused.stderr
    assert not (script.parents[1] / "tritonml_autotune").exists()  # nothing left in the checkout


def _fake_python(tmp_path, failing: str):
    """A stand-in for the GPU machine's Python: logs each call's arguments, prints a closing line
    as gpu_check does, and fails the calls whose arguments contain ``failing``."""
    import stat
    log = tmp_path / "calls.log"
    fake = tmp_path / "python"
    fake.write_text("#!/usr/bin/env bash\n"
                    f"echo \"$*\" >> {log}\n"
                    "echo \"gpu_check on Fake: 1 cases, 0 failed\"\n"
                    f"case \"$*\" in *{failing}*) exit 1 ;; esac\n"
                    "exit 0\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    return fake, log


@pytest.mark.parametrize("failing", ["segment", "NO-SUCH-CALL"])
def test_the_whole_session_runs_every_check_at_once_and_times_only_if_all_pass(tmp_path, failing):
    script = SESSION_SCRIPT
    out, work = tmp_path / "out", tmp_path / "work"
    out.mkdir()
    fake, log = _fake_python(tmp_path, failing)
    env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "WORK": str(work), "PYTHON": str(fake),
           "DTYPES": "float32,int8"}
    done = subprocess.run(["bash", str(script), "all"], env=env, capture_output=True, text=True,
                          timeout=limit(120))
    calls = log.read_text().splitlines()
    checks = [c for c in calls if c.startswith("-m benchmarks.gpu_check")]
    assert sorted(checks) == sorted([
        "-m benchmarks.gpu_check --ops stress --dtypes float32,int32",
        "-m benchmarks.gpu_check --ops scan,reduce --dtypes float32",
        "-m benchmarks.gpu_check --ops segment,dsl --dtypes float32",
        "-m benchmarks.gpu_check --ops scatter --dtypes float32",
        "-m benchmarks.gpu_check --ops scan,reduce --dtypes int8",
        "-m benchmarks.gpu_check --ops segment,dsl --dtypes int8",
        "-m benchmarks.gpu_check --ops scatter --dtypes int8"])
    summary = (work / "checks.txt").read_text().splitlines()
    assert len(summary) == 7, summary
    packed = _packed(out)
    assert packed["checks.txt"].splitlines() == summary
    assert all(line in (out / "summary.md").read_text() for line in summary)
    timed = [c for c in calls if "host_overhead" in c or "bench" in c.split()[2:3]]
    if failing == "segment":
        assert done.returncode == 1, done.stderr
        assert sum(" exit   1 " in line for line in summary) == 2, summary
        assert "nothing timed" in done.stderr
        assert timed == [] and not (work / "host_overhead.txt").exists()
    else:
        assert done.returncode == 0, done.stderr
        assert all(" exit   0 " in line for line in summary), summary
        assert "-m benchmarks.host_overhead" in calls
        assert f"-m tritonml_cli bench --no-compile --output {work}/bench" in calls


def _kill_left_running(marker: str) -> None:
    """Kill the processes whose command line names ``marker``: each check's ``timeout`` leads a
    process group of its own, which the session's kill does not reach."""
    import os
    import signal
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in command and int(entry.name) != os.getpid():
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                except OSError:
                    pass


def test_a_session_cut_off_at_its_limit_still_returns_what_it_had(tmp_path):
    # the device kills a command at its limit: no exit trap runs; the archive packed while the
    # phase ran is what comes back
    import os
    import signal
    import time
    out = tmp_path / "out"
    out.mkdir()
    slow = tmp_path / "python"
    slow.write_text("#!/usr/bin/env bash\necho \"started: $*\"\nexec sleep 20\n")
    slow.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "PYTHON": str(slow), "PACK_EVERY": "1",
           "DTYPES": "float32"}
    run = subprocess.Popen(["bash", str(SESSION_SCRIPT), "checks"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    try:
        deadline = time.monotonic() + limit(30)
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                if "started" in _packed(out, cut_off=True)["check_scatter_float32.txt"]:
                    break
            except (AssertionError, KeyError, OSError, EOFError):
                continue   # not packed yet, or a pack under way
    finally:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
        _kill_left_running(str(tmp_path))
    packed = _packed(out, cut_off=True)
    assert "started: -m benchmarks.gpu_check --ops scatter --dtypes float32" in \
        packed["check_scatter_float32.txt"]
    assert "# GPU session: phase checks" in (out / "summary.md").read_text()
