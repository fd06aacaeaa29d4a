"""`tritonml run` / `tritonml validate`: round trips through real .npy files, against numpy.

Most tests go through ``tritonml.cli.main`` (the console command's entry point, which hands
``run`` / ``validate`` to ``tritonml.dml.cli``); one runs the real console command in a subprocess.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import torch

from tritonml.bench.tolerances import TOLERANCES
from tritonml.dml import cli as _dml_cli
from tritonml import cli
from tests.timing import limit

MAIN = cli.main


DOCS_EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
SPEC_INPUT = np.array([[[[2, 1, 3, 5], [3, 8, 7, 3], [9, 6, 2, 4]]]], dtype=np.float32)
REDUCE_INPUT = np.array([[1, 2, 3], [3, 0, 4], [2, 4, 2]], dtype=np.float32)


def run(*argv) -> int:
    return MAIN([str(a) for a in argv])


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data))
    return path


def scan_doc(op="CUMULATIVE_SUMMATION", dtype="FLOAT32", sizes=(1, 1, 3, 4), axis=3, **extra):
    flag = "has_exclusive_sum" if op == "CUMULATIVE_SUMMATION" else "has_exclusive_product"
    doc = {"type": op, "input_tensor": {"data_type": dtype, "sizes": list(sizes)},
           "output_tensor": {"data_type": dtype, "sizes": list(sizes)}, "axis": axis,
           "axis_direction": "INCREASING", flag: False}
    doc.update(extra)
    return doc


# --------------------------------------------------------------------------------------------
# The worked examples in docs/
# --------------------------------------------------------------------------------------------
DOC_CASES = {
    # file: (input, feature level, expected output: DirectML's documented values)
    "cumulative_summation.json": (SPEC_INPUT, "2_1", [[[[2, 3, 6, 11], [3, 11, 18, 21],
                                                         [9, 15, 17, 21]]]]),
    "cumulative_product.json": (SPEC_INPUT, "3_1", [[[[30, 15, 15, 5], [504, 168, 21, 3],
                                                       [432, 48, 8, 4]]]]),
    "reduce.json": (REDUCE_INPUT, "3_0", [[6, 6, 9]]),
    "reduce_argmax.json": (np.array([[1, 2, 3], [3, 0, 4], [2, 5, 2]], np.float32), "3_0", [[7]]),
    # input rows broadcast (stride 0): [[1,2,3],[1,2,3]]; exclusive sums from the end along axis 0
    "cumulative_summation_strided.json": (np.array([[1, 2, 3], [1, 2, 3]], np.int32), "4_0",
                                          [[1, 2, 3], [0, 0, 0]]),
}


@pytest.mark.parametrize("name", sorted(DOC_CASES))
def test_docs_worked_examples_run_and_give_the_documented_output(name, tmp_path, capsys):
    x, level, expected = DOC_CASES[name]
    np.save(tmp_path / "in.npy", x)
    assert run("validate", DOCS_EXAMPLES / name, "--feature-level", level) == 0
    assert run("run", DOCS_EXAMPLES / name, "--input", tmp_path / "in.npy", "--output",
               tmp_path / "out.npy", "--feature-level", level) == 0
    out = np.load(tmp_path / "out.npy")
    desc = json.loads((DOCS_EXAMPLES / name).read_text())
    assert out.dtype == np.dtype(desc["output_tensor"]["data_type"].lower())
    np.testing.assert_array_equal(out, np.asarray(expected, out.dtype))
    assert "wrote" in capsys.readouterr().out


def test_every_docs_example_file_has_a_cli_case():
    files = {p.name for p in DOCS_EXAMPLES.glob("*.json")}
    assert files - {"invalid.json"} == set(DOC_CASES)


def test_docs_invalid_example_lists_each_broken_field(capsys):
    assert run("validate", DOCS_EXAMPLES / "invalid.json") == 1
    out = capsys.readouterr().out
    for field in ("input_tensor.data_type", "input_tensor.strides[1]",
                  "output_tensor.total_tensor_size_in_bytes", "output_tensor.sizes[1]", "axis"):
        assert f"  {field}: " in out


# --------------------------------------------------------------------------------------------
# run: numpy oracle
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op,dtype,axis,reverse,exclusive", [
    ("CUMULATIVE_SUMMATION", "INT64", 0, True, False),
    ("CUMULATIVE_PRODUCT", "UINT32", 1, False, True),
    ("CUMULATIVE_SUMMATION", "FLOAT64", 2, False, False),
])
def test_run_scan_round_trip_through_npy_files(op, dtype, axis, reverse, exclusive, tmp_path):
    rng = np.random.default_rng(7)
    np_dtype = np.dtype(dtype.lower())
    x = rng.integers(0, 4, size=(3, 2, 5)).astype(np_dtype)
    doc = scan_doc(op, dtype, x.shape, axis, axis_direction="DECREASING" if reverse else "INCREASING")
    doc["has_exclusive_sum" if op == "CUMULATIVE_SUMMATION" else "has_exclusive_product"] = exclusive
    doc["input_tensor"]["strides"] = [20, 1, 2]      # the buffer holds x transposed and padded
    doc["output_tensor"]["strides"] = [1, 3, 6]
    np.save(tmp_path / "x.npy", x)
    level = "none" if dtype == "FLOAT64" else "5_0"
    assert run("run", write_json(tmp_path / "op.json", doc), "--input", tmp_path / "x.npy",
               "--output", tmp_path / "y.npy", "--feature-level", level) == 0
    y = np.load(tmp_path / "y.npy")
    wide = np.float64 if dtype.startswith("FLOAT") else (np.uint64 if dtype.startswith("UINT") else np.int64)
    a = np.flip(x.astype(wide), axis) if reverse else x.astype(wide)
    want = np.cumprod(a, axis) if op == "CUMULATIVE_PRODUCT" else np.cumsum(a, axis)
    if exclusive:
        first = np.ones_like(np.take(a, [0], axis)) if op == "CUMULATIVE_PRODUCT" else \
            np.zeros_like(np.take(a, [0], axis))
        want = np.concatenate([first, np.take(want, range(a.shape[axis] - 1), axis)], axis)
    want = (np.flip(want, axis) if reverse else want).astype(np_dtype)
    assert y.dtype == np_dtype and y.shape == x.shape
    np.testing.assert_array_equal(y, want)


def test_run_reduce_round_trip_through_npy_files(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 3, 5)).astype(np.float32)
    doc = {"type": "REDUCE", "function": "LOG_SUM_EXP",
           "input_tensor": {"data_type": "FLOAT32", "sizes": [4, 3, 5]},
           "output_tensor": {"data_type": "FLOAT32", "sizes": [1, 3, 1], "strides": [0, 4, 0]},
           "axes": [2, 0]}
    np.save(tmp_path / "x.npy", x)
    assert run("run", write_json(tmp_path / "op.json", doc), "--input", tmp_path / "x.npy",
               "--output", tmp_path / "y.npy") == 0
    want = np.log(np.exp(x.astype(np.float64)).sum(axis=(0, 2), keepdims=True))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), want, rtol=TOLERANCES[torch.float32].rtol,
                               atol=TOLERANCES[torch.float32].atol)


def test_run_raw_buffers_in_and_out(tmp_path):
    """--raw-input gives the buffer itself; --raw-output returns the whole output buffer."""
    doc = scan_doc(sizes=(2, 3), axis=1)
    doc["input_tensor"].update(strides=[4, 1])                     # 2 rows of 4, last unused
    doc["output_tensor"].update(strides=[1, 2], total_tensor_size_in_bytes=40)
    buffer = np.array([1, 2, 3, 99, 4, 5, 6, 99], np.float32)
    np.save(tmp_path / "buf.npy", buffer)
    assert run("run", write_json(tmp_path / "op.json", doc), "--input", tmp_path / "buf.npy",
               "--output", tmp_path / "out.npy", "--raw-input", "--raw-output") == 0
    out = np.load(tmp_path / "out.npy")
    # element (i, j) of the output lives at i + 2j; the buffer is 40 bytes = 10 floats
    want = np.zeros(10, np.float32)
    for i, row in enumerate([[1, 3, 6], [4, 9, 15]]):
        for j, v in enumerate(row):
            want[i + 2 * j] = v
    np.testing.assert_array_equal(out, want)


def test_run_broadcast_input_from_a_dense_npy(tmp_path):
    doc = scan_doc(sizes=(3, 2), axis=0)
    doc["input_tensor"]["strides"] = [0, 1]
    np.save(tmp_path / "x.npy", np.array([[1, 2], [1, 2], [1, 2]], np.float32))
    assert run("run", write_json(tmp_path / "op.json", doc), "--input", tmp_path / "x.npy",
               "--output", tmp_path / "y.npy") == 0
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), [[1, 2], [2, 4], [3, 6]])


# --------------------------------------------------------------------------------------------
# Errors: exit codes and messages
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case,code,stream,words", [
    ("wrong-dtype", 1, "err", "holds float64; input_tensor.data_type is FLOAT32"),
    ("wrong-shape", 1, "err", "input_tensor.sizes is [1, 1, 3, 4]"),
    ("broadcast-conflict", 1, "err", "stride-0 broadcast dimension"),
    ("missing-input", 2, "err", "in.npy: cannot read: No such file"),
    ("not-npy", 2, "err", "in.npy: not a .npy file"),
    ("missing-descriptor", 2, "err", "nope.json: cannot read: No such file"),
    ("bad-json", 1, "err", "not valid JSON"),
    ("missing-field", 1, "err", "input_tensor.sizes: required field is missing"),
    ("invalid-at-level", 1, "err", "input_tensor.sizes: DML_OPERATOR_CUMULATIVE_SUMMATION supports 4 "),
    ("bfloat16", 1, "err", "BFLOAT16 has no numpy dtype"),
    ("unwritable-output", 2, "err", "out.npy: cannot write: folder "),
    ("output-is-a-folder", 2, "err", ": is a directory"),
])
def test_run_errors_name_the_problem_and_write_nothing(case, code, stream, words, tmp_path, capsys):
    doc = scan_doc()
    x = SPEC_INPUT
    op_path = tmp_path / "op.json"
    in_path, out_path = tmp_path / "in.npy", tmp_path / "out.npy"
    level = "5_0"
    if case == "wrong-dtype":
        x = x.astype(np.float64)
    elif case == "wrong-shape":
        x = x.reshape(3, 4)
    elif case == "broadcast-conflict":
        doc["input_tensor"]["strides"] = [0, 0, 0, 1]
    elif case == "bad-json":
        op_path.write_text("{\"type\": ")
    elif case == "missing-field":
        del doc["input_tensor"]["sizes"]
    elif case == "invalid-at-level":
        doc = scan_doc(sizes=(3, 4), axis=1)
        x = x.reshape(3, 4)
        level = "3_1"
    elif case == "bfloat16":
        doc = scan_doc(dtype="BFLOAT16")
        level = "none"
    elif case == "unwritable-output":
        out_path = tmp_path / "no-such-dir" / "out.npy"
    elif case == "output-is-a-folder":
        out_path = tmp_path / "folder"
        out_path.mkdir()
    if not op_path.exists():
        write_json(op_path, doc)
    if case == "not-npy":
        in_path.write_text("hello")
    elif case != "missing-input":
        np.save(in_path, x)
    if case == "missing-descriptor":
        op_path = tmp_path / "nope.json"
    assert run("run", op_path, "--input", in_path, "--output", out_path, "--feature-level", level) == code
    captured = capsys.readouterr()
    assert words in (captured.err if stream == "err" else captured.out)
    assert out_path.is_dir() if case == "output-is-a-folder" else not out_path.exists()


@pytest.mark.parametrize("name,content", [
    ("in.txt", b"2 1 3 5\n3 8 7 3\n"),          # text: numpy would fall back to unpickling it
    ("in.npy", b"hello"),                        # a .npy name does not make a .npy file
    ("in.npz", None),                            # an archive of arrays, not one array
    ("in.pkl", b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00K\x01."),  # a real pickle
    ("empty.npy", b""),
])
def test_run_input_that_is_not_a_npy_file_is_named_as_such(name, content, tmp_path, capsys):
    path = tmp_path / name
    if content is None:
        np.savez(path, x=SPEC_INPUT)
    else:
        path.write_bytes(content)
    out_path = tmp_path / "out.npy"
    assert run("run", write_json(tmp_path / "op.json", scan_doc()), "--input", path,
               "--output", out_path) == 2
    err = capsys.readouterr().err
    assert err == f"error: --input {path}: not a .npy file\n"
    assert not out_path.exists()


@pytest.mark.parametrize("damage", ["truncated-data", "object-array"])
def test_run_damaged_or_object_npy_input_is_a_usage_error_naming_input(damage, tmp_path, capsys):
    path = tmp_path / "in.npy"
    if damage == "truncated-data":
        np.save(path, SPEC_INPUT)
        path.write_bytes(path.read_bytes()[:-8])
    else:
        np.save(path, np.array([{}, None], dtype=object), allow_pickle=True)
    assert run("run", write_json(tmp_path / "op.json", scan_doc()), "--input", path,
               "--output", tmp_path / "out.npy") == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: --input {path}: not a readable .npy file: ")
    assert err.count("\n") == 1                                        # one line, no traceback


def test_validate_valid_invalid_and_usage(tmp_path, capsys):
    path = write_json(tmp_path / "op.json", scan_doc(sizes=(3, 4), axis=1))
    assert run("validate", path) == 0
    assert "valid DML_OPERATOR_CUMULATIVE_SUMMATION at feature level 5_0" in capsys.readouterr().out
    assert run("validate", path, "--feature-level", "3_0") == 1
    out = capsys.readouterr().out
    assert "invalid DML_OPERATOR_CUMULATIVE_SUMMATION at feature level 3_0" in out
    assert "  input_tensor.sizes: " in out and "  output_tensor.sizes: " in out
    assert run("validate", path, "--feature-level", "2_0") == 1
    assert "  feature_level: DML_OPERATOR_CUMULATIVE_SUMMATION was introduced in feature level 2_1" \
        in capsys.readouterr().out
    assert run("validate", path, "--feature-level", "none") == 0
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:            # argparse: unknown level is a usage error
        run("validate", path, "--feature-level", "9_9")
    assert info.value.code == 2
    assert "unknown feature level" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        run("validate")
    assert info.value.code == 2
    assert run("validate", tmp_path / "absent.json") == 2


def test_validate_reports_every_broken_field_of_a_malformed_document(tmp_path, capsys):
    doc = scan_doc()
    doc["axis"] = "3"
    doc["input_tensor"]["sizes"][1] = 1.5
    doc["output_tensor"]["colour"] = "red"
    assert run("validate", write_json(tmp_path / "op.json", doc)) == 1
    out = capsys.readouterr().out
    assert "invalid descriptor" in out
    for field in ("input_tensor.sizes[1]", "output_tensor.colour", "axis"):
        assert f"  {field}: " in out


def test_validate_and_run_via_python_m_module(tmp_path):
    """``python -m tritonml.dml.cli`` works on its own (without tritonml.cli)."""
    path = write_json(tmp_path / "op.json", scan_doc())
    assert _dml_cli.main(["validate", str(path), "--feature-level", "4_0"]) == 0


def test_console_command_in_a_subprocess(tmp_path):
    """The real console path: ``tritonml run`` (or ``python -m tritonml.cli`` if not installed)."""
    np.save(tmp_path / "in.npy", SPEC_INPUT)
    exe = shutil.which("tritonml", path=str(Path(sys.executable).parent))
    command = [exe] if exe else [sys.executable, "-m", "tritonml.cli"]
    result = subprocess.run(command + ["run", str(DOCS_EXAMPLES / "cumulative_product.json"),
                                       "--input", str(tmp_path / "in.npy"),
                                       "--output", str(tmp_path / "out.npy")],
                            capture_output=True, text=True, timeout=limit(300))
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"),
                                  [[[[30, 15, 15, 5], [504, 168, 21, 3], [432, 48, 8, 4]]]])
