"""``import tritonml`` works whatever was imported before it: triton itself, torch's nested jagged
tensors and torch.compile (both import triton in compiled mode on a machine without a GPU). Each case
runs in a fresh Python, without ``TRITON_INTERPRET`` in its environment, and checks its results
against numpy."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tritonml
from tests.timing import limit

pytestmark = pytest.mark.skipif(not tritonml.INTERPRET, reason="the cases are about machines "
                                "without a GPU, where tritonml runs Triton's interpreter")

# Results of ops whose kernels call Triton's standard library (tl.sum, tl.max, tl.argmax,
# tl.cumsum...) and a user's combine, printed as JSON for the test to check.
_OPS = """
import json, torch, tritonml
import triton.language as tl
x = torch.tensor([[3.0, -1.0, 4.0, 1.0, -5.0], [9.0, 2.0, -6.0, 5.0, 3.0]])
values = {
    "cumsum": tritonml.cumulative_sum(x, 1).tolist(),
    "cumprod_rev_excl": tritonml.cumulative_product(x, 1, reverse=True, exclusive=True).tolist(),
    "sum": tritonml.reduce(x, "SUM", axes=[1]).tolist(),
    "max": tritonml.reduce(x, "MAX", axes=[0]).tolist(),
    "argmin": tritonml.reduce(x, "ARGMIN", axes=[1]).tolist(),
    "lse": tritonml.reduce(x, "LOG_SUM_EXP", axes=[1]).tolist(),
    "int_cumsum": tritonml.cumulative_sum(torch.arange(1, 6, dtype=torch.int8) * 60, 0).tolist(),
    "segments": tritonml.segment_reduce(x.flatten(), "MAX", lengths=torch.tensor([4, 0, 6])).tolist(),
}
"""


def _run(folder, *parts: str) -> dict:
    # from a file: Triton reads a @triton.jit function's source
    script = folder / "case.py"
    script.write_text("\n".join(textwrap.dedent(part) for part in parts))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True,
                          text=True, env=env, timeout=limit(300))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _check(values: dict) -> None:
    x = np.array([[3.0, -1.0, 4.0, 1.0, -5.0], [9.0, 2.0, -6.0, 5.0, 3.0]])
    np.testing.assert_allclose(values["cumsum"], np.cumsum(x, 1), rtol=1e-6)
    flipped = x[:, ::-1]
    excl = np.concatenate([np.ones((2, 1)), np.cumprod(flipped, 1)[:, :-1]], 1)[:, ::-1]
    np.testing.assert_allclose(values["cumprod_rev_excl"], excl, rtol=1e-6)
    np.testing.assert_allclose(values["sum"], x.sum(1, keepdims=True), rtol=1e-6)
    np.testing.assert_allclose(values["max"], x.max(0, keepdims=True))
    assert values["argmin"] == x.argmin(1).reshape(2, 1).tolist()
    np.testing.assert_allclose(values["lse"], np.log(np.exp(x).sum(1, keepdims=True)), rtol=1e-6)
    wrapped = (np.cumsum(np.arange(1, 6) * 60) + 128) % 256 - 128  # int8 wraps modulo 2^8
    assert values["int_cumsum"] == wrapped.tolist()
    flat = x.flatten()
    assert values["segments"][0] == flat[:4].max() and values["segments"][2] == flat[4:].max()
    assert values["segments"][1] == -np.inf  # an empty segment's MAX is the identity


_REPORT = "print(json.dumps(values))"


def test_after_triton_imported_in_compiled_mode(tmp_path):
    values = _run(tmp_path, """
        import triton
        assert not triton.knobs.runtime.interpret  # compiled mode, as torch would import it
    """, _OPS, _REPORT)
    _check(values)


def test_after_a_nested_jagged_tensor(tmp_path):
    values = _run(tmp_path, """
        import sys, torch
        torch.nested.nested_tensor([torch.randn(2, 3)], layout=torch.jagged)
        assert "triton" in sys.modules
    """, _OPS, _REPORT)
    _check(values)


def test_after_torch_compile(tmp_path):
    values = _run(tmp_path, """
        import sys, torch
        compiled = torch.compile(lambda t: (t * 2).cumsum(0))
        assert compiled(torch.arange(4.0)).tolist() == [0.0, 2.0, 6.0, 12.0]
        assert "triton" in sys.modules
    """, _OPS, _REPORT)
    _check(values)


def test_a_combine_decorated_before_tritonml_and_compiled_triton_left_as_it_was(tmp_path):
    # The user's functions were decorated in compiled mode (JITFunctions); one calls another and a
    # tensor member of Triton's standard library. After the launches, compiled-mode Triton is as
    # it was: a JITFunction called outside a kernel raises Triton's own error, and tl.tensor's
    # members (``x.sum()``) are Triton's JITFunctions again.
    values = _run(tmp_path, """
        import triton, triton.language as tl
        from triton.runtime.jit import JITFunction

        @triton.jit
        def larger(a, b):
            return tl.maximum(a, b)

        @triton.jit
        def running_max(a, b):                  # states are tuples: here of one tensor
            return (larger(a[0], b[0]),)

        members = {name: value for name, value in vars(tl.tensor).items()
                   if isinstance(value, JITFunction)}
        assert "sum" in members
    """, _OPS, """
        values["user_scan"] = tritonml.associative_scan(running_max, x, 1).tolist()
        assert isinstance(running_max, JITFunction)
        try:
            running_max(1, 2)
        except RuntimeError as error:
            values["outside"] = str(error)
        values["members_restored"] = all(vars(tl.tensor)[name] is value
                                         for name, value in members.items())
        print(json.dumps(values))
    """)
    _check(values)
    x = np.array([[3.0, -1.0, 4.0, 1.0, -5.0], [9.0, 2.0, -6.0, 5.0, 3.0]])
    np.testing.assert_allclose(values["user_scan"], np.maximum.accumulate(x, 1))
    assert "outside of the scope of a kernel" in values["outside"]
    assert values["members_restored"]


def test_an_explicit_request_for_compiled_triton_is_kept():
    # TRITON_INTERPRET=0 is the user's word: kernels stay compiled, and CPU tensors get the
    # message that says so before any launch.
    env = dict(os.environ, TRITON_INTERPRET="0")
    done = subprocess.run(
        [sys.executable, "-c", "import triton, torch, tritonml; print(tritonml.INTERPRET); "
         "tritonml.cumulative_sum(torch.ones(3), 0)"],
        capture_output=True, text=True, env=env, timeout=limit(300))
    assert done.stdout.split() == ["False"]
    assert "need CUDA tensors" in done.stderr and "TRITON_INTERPRET=1" in done.stderr


def test_the_first_jagged_scan_prints_nothing(tmp_path):
    # torch.nested.nested_tensor_from_jagged, which rebuilds the result, makes torch.fx log a
    # notice the first time it runs in a process; a user should see only their own output.
    script = tmp_path / "jagged.py"
    script.write_text(textwrap.dedent("""
        import json, torch, tritonml
        nt = torch.nested.nested_tensor([torch.arange(3.0), torch.arange(5.0)], layout=torch.jagged)
        scanned = tritonml.cumulative_sum(nt, 1)
        print(json.dumps([t.tolist() for t in scanned.unbind()]))
    """))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=limit(300))
    assert done.returncode == 0 and done.stderr == "", done.stderr[-3000:]
    assert json.loads(done.stdout) == [np.cumsum(np.arange(3.0)).tolist(),
                                       np.cumsum(np.arange(5.0)).tolist()]
