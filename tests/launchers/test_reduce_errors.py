"""tritonml.reduce refuses bad input before launching anything: the error type is stable, the
message names the parameter at fault, and neither x nor out is touched."""
from __future__ import annotations

import pytest
import torch

import tritonml
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ReduceConfig
from tritonml.launchers.reduce import ReduceFunction, reduce_axes
from tritonml.records.builtin_reductions import RECORDS

from benchmarks.reduce_oracle import FLOAT_ONLY, bits


def _x():
    return torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)


def _out(shape=(2, 1, 4), dtype=torch.float32):
    return torch.full(shape, 5, dtype=dtype)


X = _x()

# (id, call keyword arguments besides x, error type, name the message must contain)
CASES = [
    ("axis out of range", dict(function="sum", axes=3), ValueError, "axes"),
    ("negative axis out of range", dict(function="sum", axes=(0, -4)), ValueError, "axes"),
    ("axis repeated", dict(function="sum", axes=(1, 1)), ValueError, "axes"),
    ("axis repeated by negative", dict(function="sum", axes=(1, -2)), ValueError, "axes"),
    ("axes empty", dict(function="sum", axes=()), ValueError, "axes"),
    ("axis not an int", dict(function="sum", axes=1.5), TypeError, "axes"),
    ("axis a bool", dict(function="sum", axes=(True,)), TypeError, "axes"),
    ("axis a string", dict(function="sum", axes="0"), TypeError, "axes"),
    ("unknown function", dict(function="mean"), ValueError, "function"),
    ("function not a name", dict(function=3), TypeError, "function"),
    ("function None", dict(function=None), TypeError, "function"),
    ("keepdims not a bool", dict(function="sum", keepdims=1), TypeError, "keepdims"),
    ("index_dtype int16", dict(function="argmax", index_dtype=torch.int16), TypeError, "index_dtype"),
    ("index_dtype float", dict(function="argmax", index_dtype=torch.float32), TypeError,
     "index_dtype"),
    ("index_dtype a string", dict(function="argmax", index_dtype="int64"), TypeError,
     "index_dtype"),
    ("out wrong shape", dict(function="sum", axes=1, out="shape"), ValueError, "out"),
    ("out dropped dims expected", dict(function="sum", axes=1, keepdims=False, out="keep"),
     ValueError, "out"),
    ("out wrong dtype", dict(function="sum", axes=1, out="dtype"), TypeError, "out"),
    ("argmax out not an index dtype", dict(function="argmax", axes=1, out="keep"), TypeError, "out"),
    ("out meta", dict(function="sum", axes=1, out="meta"), TypeError, "out"),
    ("out not a tensor", dict(function="sum", axes=1, out="list"), TypeError, "out"),
    ("out overlaps x", dict(function="sum", axes=1, out="alias"), ValueError, "out"),
    ("out has internal overlap", dict(function="sum", axes=1, out="expanded"), ValueError, "out"),
]


def _make_out(kind, x):
    if kind == "shape":
        return _out((2, 3, 1))
    if kind == "keep":
        return _out((2, 1, 4))
    if kind == "dtype":
        return _out(dtype=torch.float64)
    if kind == "meta":
        return torch.empty((2, 1, 4), device="meta")
    if kind == "list":
        return [[0.0] * 4] * 2
    if kind == "alias":
        return x[:, :1, :]
    if kind == "expanded":
        return torch.zeros(1, 1, 1).expand(2, 1, 4)
    return kind


@pytest.mark.parametrize("kwargs, error, name", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_naming_parameter_and_touches_nothing(kwargs, error, name):
    x = _x()
    kwargs = dict(kwargs)
    function = kwargs.pop("function")
    out = _make_out(kwargs.pop("out"), x) if "out" in kwargs else None
    if out is not None:
        kwargs["out"] = out
    x_before = bits(x)
    out_before = bits(out) if isinstance(out, torch.Tensor) and out.device.type == "cpu" else None
    with _trace.record() as rec, pytest.raises(error, match=name):
        tritonml.reduce(x, function, **kwargs)
    assert rec.launches == []
    assert bits(x) == x_before
    if out_before is not None:
        assert bits(out) == out_before


@pytest.mark.parametrize("function", FLOAT_ONLY)
@pytest.mark.parametrize("dtype", [torch.int32, torch.uint8, torch.int64], ids=str)
def test_float_only_function_on_integers_names_function_and_x(function, dtype):
    x = torch.ones(3, 4, dtype=dtype)
    out = torch.full((1, 4), 9, dtype=dtype)
    with _trace.record() as rec, pytest.raises(TypeError) as info:
        tritonml.reduce(x, function, 0, out=out)
    message = str(info.value)
    assert "function" in message and "x" in message and function in message
    assert "floating-point" in message
    assert rec.launches == [] and out.eq(9).all()


@pytest.mark.parametrize("bad", [[1.0, 2.0], 3.0, None, torch.ones(2, dtype=torch.bool),
                                 torch.zeros([1] * 9)],
                         ids=["list", "float", "None", "bool tensor", "rank 9"])
def test_x_that_is_not_a_supported_tensor_names_x(bad):
    with pytest.raises((TypeError, ValueError), match="x"):
        tritonml.reduce(bad, "sum")


def test_argmax_over_empty_axis_raises_before_writing_out():
    x = torch.empty(2, 0)
    out = torch.full((2, 1), 4, dtype=torch.int64)
    with _trace.record() as rec, pytest.raises(ValueError, match="axes"):
        tritonml.reduce(x, "argmax", 1, out=out)
    assert rec.launches == [] and out.eq(4).all()


CONFIG_CASES = [
    ("not a config", "rows", TypeError, "config"),
    ("unknown regime", ReduceConfig("diagonal", 16, 4), ValueError, "config.regime"),
    ("block not a power of two", ReduceConfig("rows", 24, 4), ValueError, "config.block_axis"),
    ("split with one split", ReduceConfig("split", 16, 1, splits=1), ValueError, "config.splits"),
    ("rows with splits", ReduceConfig("rows", 16, 1, splits=4), ValueError, "config.splits"),
    ("one_launch not a bool", ReduceConfig("split", 16, 1, splits=2, one_launch=1), TypeError,
     "config.one_launch"),
    ("tile too large", ReduceConfig("rows", 1 << 16, 1 << 8), ValueError, "config"),
    ("warps not a power of two", ReduceConfig("rows", 16, 4, num_warps=3), ValueError,
     "config.num_warps"),
]


@pytest.mark.parametrize("config, error, name", [c[1:] for c in CONFIG_CASES],
                         ids=[c[0] for c in CONFIG_CASES])
def test_bad_config_raises_before_launch(config, error, name):
    x = _x()
    before = bits(x)
    with _trace.record() as rec, pytest.raises(error, match=name):
        reduce_axes(x, 1, RECORDS[ReduceFunction.SUM], config=config)
    assert rec.launches == [] and bits(x) == before


def test_combine_must_be_a_reduce_combine():
    with pytest.raises(TypeError, match="combine"):
        reduce_axes(_x(), 1, "sum")
