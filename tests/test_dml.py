"""tritonml.dml: DirectML's descriptors on raw buffers, against numpy oracles and the spec's tables.

Oracles: the documented outputs verbatim (../shared/spec), numpy in float64 / exact wrapping integers,
and the spec's tensor-support tables transcribed here independently of tritonml.dml's own copy.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tritonml
from tritonml import dml, examples
from tritonml.dml import (AxisDirection, CumulativeProductOperatorDesc, CumulativeSummationOperatorDesc,
                          DataType, DescriptorError, FeatureLevel, ReduceFunction, ReduceOperatorDesc,
                          TensorDesc, TensorFlags)

DEVICE = "cpu" if tritonml.INTERPRET else "cuda"
DOCS_EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"


SUM, PROD = CumulativeSummationOperatorDesc, CumulativeProductOperatorDesc

# ============================================================================================
# The spec's tensor-support tables, transcribed from ../shared/spec (newest row first):
# (since level, dimension counts, input types, output types or None for "same as input").
# ============================================================================================
ANY = tuple(range(1, 9))
F = "FLOAT32 FLOAT16"
SPEC_TABLES = {
    "CUMULATIVE_SUMMATION": [("5_0", ANY, F + " INT64 INT32 UINT64 UINT32", None),
                             ("4_0", ANY, F + " INT32 UINT32", None),
                             ("2_1", (4,), F + " INT32 UINT32", None)],
    # As printed (UINT16) plus the newer edition's INT32: tritonml accepts the union (docs/dml.md).
    "CUMULATIVE_PRODUCT": [("4_0", ANY, F + " UINT32 UINT16 INT32", None),
                           ("3_1", (4,), F + " UINT32 UINT16 INT32", None)],
    "ARG": [("4_1", ANY, F + " INT64 INT32 INT16 INT8 UINT64 UINT32 UINT16 UINT8", "INT64 INT32 UINT64 UINT32"),
            ("3_0", ANY, F + " INT32 INT16 INT8 UINT32 UINT16 UINT8", "INT64 INT32 UINT64 UINT32"),
            ("2_1", (4,), F + " INT32 INT16 INT8 UINT32 UINT16 UINT8", "UINT32"),
            ("1_0", (4,), F, "UINT32")],
    "FLOAT_ONLY": [("3_0", ANY, F, None), ("1_0", (4,), F, None)],
    "L1": [("5_0", ANY, F + " INT64 INT32 UINT64 UINT32", None), ("3_0", ANY, F, None),
           ("1_0", (4,), F, None)],
    "MINMAX": [("5_0", ANY, F + " INT64 INT32 INT16 INT8 UINT64 UINT32 UINT16 UINT8", None),
               ("3_0", ANY, F + " INT32 INT16 INT8 UINT32 UINT16 UINT8", None),
               ("2_1", (4,), F + " INT32 UINT32", None), ("1_0", (4,), F, None)],
    "SUM": [("5_0", ANY, F + " INT64 INT32 UINT64 UINT32", None), ("3_0", ANY, F + " INT32 UINT32", None),
            ("2_1", (4,), F + " INT32 UINT32", None), ("1_0", (4,), F, None)],
}
FUNCTION_TABLE = {"ARGMAX": "ARG", "ARGMIN": "ARG", "AVERAGE": "FLOAT_ONLY", "L2": "FLOAT_ONLY",
                  "LOG_SUM": "FLOAT_ONLY", "LOG_SUM_EXP": "FLOAT_ONLY", "L1": "L1", "SUM_SQUARE": "L1",
                  "MIN": "MINMAX", "MAX": "MINMAX", "MULTIPLY": "SUM", "SUM": "SUM"}
ALL_TYPE_NAMES = ("FLOAT32 FLOAT16 UINT32 UINT16 UINT8 INT32 INT16 INT8 FLOAT64 UINT64 INT64 "
                  "BFLOAT16").split()
INDEX_TYPE_NAMES = {"INT64", "INT32", "UINT64", "UINT32"}
FLOAT_ONLY_FUNCTIONS = {"AVERAGE", "L2", "LOG_SUM", "LOG_SUM_EXP"}
# Every DML_FEATURE_LEVEL in directml.h, plus None (tritonml's own support).
LEVEL_NAMES = ["1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "5_1", "5_2", "6_0", "6_1",
               "6_2", "6_3", "6_4"]


def _level_key(name: str) -> tuple:
    major, minor = name.split("_")
    return int(major), int(minor)


def spec_row(operator: str, function, level):
    """(dims, input types, output types) the spec gives at ``level``; None if the operator does not
    exist there. ``level=None``: tritonml's documented wider support (issue 2/3/4)."""
    if level is None:
        if operator == "REDUCE":
            ins = {"FLOAT32", "FLOAT16", "FLOAT64", "BFLOAT16"} if function in FLOAT_ONLY_FUNCTIONS \
                else set(ALL_TYPE_NAMES)
            outs = INDEX_TYPE_NAMES if function in ("ARGMAX", "ARGMIN") else None
            return ANY, ins, outs
        return ANY, set(ALL_TYPE_NAMES), None
    table = SPEC_TABLES[FUNCTION_TABLE[function] if operator == "REDUCE" else operator]
    for since, dims, ins, outs in table:
        if _level_key(level) >= _level_key(since):
            return dims, set(ins.split()), None if outs is None else set(outs.split())
    return None


# ============================================================================================
# numpy oracles
# ============================================================================================
NP_DTYPE = {"FLOAT32": np.float32, "FLOAT16": np.float16, "FLOAT64": np.float64, "INT8": np.int8,
            "INT16": np.int16, "INT32": np.int32, "INT64": np.int64, "UINT8": np.uint8,
            "UINT16": np.uint16, "UINT32": np.uint32, "UINT64": np.uint64}
TORCH_DTYPE = {"FLOAT32": torch.float32, "FLOAT16": torch.float16, "FLOAT64": torch.float64,
               "BFLOAT16": torch.bfloat16, "INT8": torch.int8, "INT16": torch.int16,
               "INT32": torch.int32, "INT64": torch.int64, "UINT8": torch.uint8,
               "UINT16": torch.uint16, "UINT32": torch.uint32, "UINT64": torch.uint64}
SIZE = {name: torch.empty(0, dtype=d).element_size() for name, d in TORCH_DTYPE.items()}


def is_float(name: str) -> bool:
    return name.startswith(("FLOAT", "BFLOAT"))


def wide(name: str):
    """The oracle's arithmetic type: float64, or 64-bit integers that wrap like the C types."""
    if is_float(name):
        return np.float64
    return np.uint64 if name.startswith("UINT") else np.int64


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A torch tensor's values as numpy (bfloat16 widened to float32, exactly)."""
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def narrow(values: np.ndarray, name: str) -> np.ndarray:
    """Round/wrap oracle values to the output type, as numpy (bfloat16 via torch's rounding)."""
    if name == "BFLOAT16":
        return torch.from_numpy(np.array(values, np.float64)).to(torch.bfloat16).float().numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values).astype(NP_DTYPE[name])


def gather(buffer: torch.Tensor, desc: TensorDesc) -> np.ndarray:
    """The elements ``desc`` addresses in ``buffer``, read with numpy's own strided view."""
    raw = buffer.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
    bits = raw[: (desc.last_index + 1) * SIZE[desc.data_type.name]]
    if desc.data_type.name == "BFLOAT16":
        typed = bits.view(np.uint16).astype(np.uint32) << 16
        typed = typed.view(np.float32)
    else:
        typed = bits.view(NP_DTYPE[desc.data_type.name])
    strides = desc.strides if desc.strides is not None else _packed(desc.sizes)
    view = np.lib.stride_tricks.as_strided(typed, shape=desc.sizes,
                                           strides=[s * typed.itemsize for s in strides])
    return view.copy()


def _packed(sizes):
    return tuple(int(np.prod(sizes[i + 1:])) for i in range(len(sizes)))


def scan_oracle(x: np.ndarray, axis: int, product: bool, reverse: bool, exclusive: bool,
                name: str) -> np.ndarray:
    a = np.asarray(x).astype(wide(name))
    if reverse:
        a = np.flip(a, axis)
    with np.errstate(over="ignore"):
        result = np.cumprod(a, axis=axis) if product else np.cumsum(a, axis=axis)
        if exclusive:
            identity = np.ones_like(np.take(a, [0], axis=axis)) if product else \
                np.zeros_like(np.take(a, [0], axis=axis))
            result = np.concatenate([identity, np.take(result, range(a.shape[axis] - 1), axis=axis)],
                                    axis=axis)
    if reverse:
        result = np.flip(result, axis)
    return narrow(result, name)


def reduce_oracle(x: np.ndarray, function: str, axes, in_name: str, out_name: str) -> np.ndarray:
    axes = tuple(sorted(axes))
    a = np.asarray(x).astype(wide(in_name))
    with np.errstate(all="ignore"):
        if function in ("ARGMAX", "ARGMIN"):
            kept = [d for d in range(a.ndim) if d not in axes]
            moved = np.transpose(a, kept + list(axes)).reshape([a.shape[d] for d in kept] + [-1])
            index = (np.argmax if function == "ARGMAX" else np.argmin)(moved, axis=-1)
            result = index.reshape([1 if d in axes else a.shape[d] for d in range(a.ndim)])
        else:
            absolute = a if in_name.startswith("UINT") else np.abs(a)
            result = {
                "SUM": lambda: a.sum(axes, keepdims=True),
                "MULTIPLY": lambda: a.prod(axes, keepdims=True),
                "MIN": lambda: a.min(axes, keepdims=True),
                "MAX": lambda: a.max(axes, keepdims=True),
                "SUM_SQUARE": lambda: (a * a).sum(axes, keepdims=True),
                "L1": lambda: absolute.sum(axes, keepdims=True),
                "L2": lambda: np.sqrt((a * a).sum(axes, keepdims=True)),
                "AVERAGE": lambda: a.sum(axes, keepdims=True) / math.prod(a.shape[d] for d in axes),
                "LOG_SUM": lambda: np.log(a.sum(axes, keepdims=True)),
                "LOG_SUM_EXP": lambda: np.log(np.exp(a).sum(axes, keepdims=True)),
            }[function]()
    return narrow(result, out_name)


EXACT_FUNCTIONS = {"SUM", "MULTIPLY", "MIN", "MAX", "SUM_SQUARE", "L1", "ARGMAX", "ARGMIN"}
RTOL = {"FLOAT16": 2e-3, "BFLOAT16": 1.6e-2, "FLOAT32": 2e-6, "FLOAT64": 1e-12}


def assert_matches(got: np.ndarray, want: np.ndarray, name: str, exact: bool = True) -> None:
    assert got.shape == want.shape
    if exact or not is_float(name):
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL[name],
                                   atol=RTOL[name], equal_nan=True)


# ============================================================================================
# Buffers
# ============================================================================================
SENTINEL_BYTE = 0xA5


def _aligned_bytes(nbytes: int, alignment: int) -> np.ndarray:
    """``nbytes`` sentinel bytes starting at an address that is a multiple of ``alignment`` (a
    DirectML binding honours GuaranteedBaseOffsetAlignment; numpy itself only aligns to 16)."""
    alignment = max(alignment, 16)
    raw = np.full(nbytes + alignment, SENTINEL_BYTE, dtype=np.uint8)
    start = -raw.ctypes.data % alignment
    return raw[start:start + nbytes]


def buffer_with(desc: TensorDesc, values: np.ndarray, *, buffer_dtype=torch.uint8) -> torch.Tensor:
    """A buffer of total_tensor_size_in_bytes (as ``buffer_dtype``, rounded up), sentinel bytes
    everywhere, with ``values`` stored where ``desc`` addresses them (through numpy, not tritonml)."""
    nbytes = desc.total_tensor_size_in_bytes
    item = torch.empty(0, dtype=buffer_dtype).element_size()
    raw = _aligned_bytes(-(-nbytes // item) * item, desc.guaranteed_base_offset_alignment)
    name = desc.data_type.name
    if name == "BFLOAT16":
        bits = torch.from_numpy(np.ascontiguousarray(values, np.float32)).to(torch.bfloat16)
        values, typed = bits.view(torch.int16).numpy(), raw[: len(raw) // 2 * 2].view(np.int16)
    else:
        values = np.asarray(values).astype(NP_DTYPE[name])
        typed = raw[: len(raw) // SIZE[name] * SIZE[name]].view(NP_DTYPE[name])
    strides = desc.strides if desc.strides is not None else _packed(desc.sizes)
    view = np.lib.stride_tricks.as_strided(typed, shape=desc.sizes,
                                           strides=[s * typed.itemsize for s in strides], writeable=True)
    view[...] = values
    return torch.from_numpy(raw).view(buffer_dtype).to(DEVICE)


def sentinel_buffer(desc: TensorDesc, buffer_dtype=torch.uint8) -> torch.Tensor:
    nbytes = desc.total_tensor_size_in_bytes
    item = torch.empty(0, dtype=buffer_dtype).element_size()
    raw = _aligned_bytes(-(-nbytes // item) * item, desc.guaranteed_base_offset_alignment)
    return torch.from_numpy(raw).view(buffer_dtype).to(DEVICE)


def addressed_mask(desc: TensorDesc, nbytes: int) -> np.ndarray:
    """Which bytes of a buffer ``desc`` addresses."""
    mask = np.zeros(nbytes, dtype=bool)
    strides = desc.strides if desc.strides is not None else _packed(desc.sizes)
    size = SIZE[desc.data_type.name]
    for index in np.ndindex(*desc.sizes):
        start = sum(i * s for i, s in zip(index, strides)) * size
        mask[start:start + size] = True
    return mask


def assert_untouched_outside(buffer: torch.Tensor, desc: TensorDesc) -> None:
    raw = buffer.cpu().reshape(-1).view(torch.uint8).numpy()
    outside = raw[~addressed_mask(desc, raw.size)]
    assert np.all(outside == SENTINEL_BYTE), "bytes outside the output desc were written"


def tensor(dtype: str, sizes, strides=None, **kw) -> TensorDesc:
    return TensorDesc(dtype, sizes, strides, **kw)


# ============================================================================================
# DirectML's documented examples, through descriptors
# ============================================================================================
@pytest.mark.parametrize("example", examples.SCAN_EXAMPLES, ids=lambda e: f"{e.function}-{e.title}")
def test_documented_scan_examples_through_descriptors(example):
    x = np.asarray(example.input, dtype=np.float32)
    desc_cls = SUM if "SUMMATION" in example.operator else PROD
    flag = "has_exclusive_sum" if desc_cls is SUM else "has_exclusive_product"
    t = tensor("FLOAT32", x.shape)
    desc = desc_cls(t, t, example.kwargs["axis"],
                    AxisDirection.DECREASING if example.kwargs.get("reverse") else AxisDirection.INCREASING,
                    **{flag: example.kwargs.get("exclusive", False)})
    op = dml.compile_operator(desc)                      # default level 5_0
    dml.compile_operator(desc, "2_1" if desc_cls is SUM else "3_1")  # and the level it came in at
    out = sentinel_buffer(t)
    op(buffer_with(t, x), out)
    np.testing.assert_array_equal(gather(out, t), np.asarray(example.expected, dtype=np.float32))


REDUCE_SPEC_INPUT = [[1, 2, 3], [3, 0, 4], [2, 4, 2]]
REDUCE_SPEC_EXAMPLES = [  # spec/reduce.md, verbatim
    ("SUM", [0], REDUCE_SPEC_INPUT, [1, 3], "FLOAT32", [[6, 6, 9]]),
    ("SUM", [1], REDUCE_SPEC_INPUT, [3, 1], "FLOAT32", [[6], [7], [8]]),
    ("SUM", [0, 1], REDUCE_SPEC_INPUT, [1, 1], "FLOAT32", [[21]]),
    ("ARGMAX", [0, 1], [[1, 2, 3], [3, 0, 4], [2, 5, 2]], [1, 1], "UINT32", [[7]]),
]


@pytest.mark.parametrize("function,axes,x,out_sizes,out_type,expected", REDUCE_SPEC_EXAMPLES)
def test_documented_reduce_examples_through_descriptors(function, axes, x, out_sizes, out_type, expected):
    t_in, t_out = tensor("FLOAT32", [3, 3]), tensor(out_type, out_sizes)
    desc = ReduceOperatorDesc(function, t_in, t_out, axes)
    op = dml.compile_operator(desc, "3_0")  # rank 2 needs 3_0 (1_0 and 2_1 take 4 dimensions)
    out = sentinel_buffer(t_out)
    op(buffer_with(t_in, np.asarray(x, np.float32)), out)
    np.testing.assert_array_equal(gather(out, t_out), np.asarray(expected, NP_DTYPE[out_type]))


@pytest.mark.parametrize("example", examples.REDUCE_EXAMPLES, ids=lambda e: e.title)
def test_reduce_examples_module_through_descriptors(example):
    """tritonml.examples.REDUCE_EXAMPLES (the demo's list), run through descriptors."""
    assert examples.REDUCE_EXAMPLES, "the reduce examples are missing"
    kwargs = dict(example.kwargs)
    function = kwargs.get("function")
    function = getattr(function, "name", function)
    axes = kwargs.get("axes")
    x = np.asarray(example.input, dtype=NP_DTYPE[example.input_dtype.upper()])
    axes = list(range(x.ndim)) if axes is None else ([axes] if isinstance(axes, int) else list(axes))
    expected = np.asarray(example.expected)
    out_type = example.expected_dtype.upper()
    t_in = tensor(example.input_dtype.upper(), x.shape)
    out_sizes = [1 if d in axes else s for d, s in enumerate(x.shape)]
    t_out = tensor(out_type, out_sizes)
    out = sentinel_buffer(t_out)
    dml.compile_operator(ReduceOperatorDesc(str(function).upper(), t_in, t_out, axes), None)(
        buffer_with(t_in, x), out)
    np.testing.assert_array_equal(gather(out, t_out).reshape(expected.shape),
                                  expected.astype(NP_DTYPE[out_type]))


# ============================================================================================
# Layouts: strided, padded, broadcast, offsets, in place
# ============================================================================================
RNG = np.random.default_rng(4)


def _values(name: str, sizes) -> np.ndarray:
    """Small values whose sums and products are exact in every type (including the halves)."""
    values = RNG.choice([-1, 0, 1, 2] if not name.startswith("UINT") else [0, 1, 2, 3], size=sizes)
    return values.astype(np.float64 if is_float(name) else wide(name))


LAYOUTS = {
    # name: (input sizes, input strides, output strides), in elements
    "packed": ([2, 3, 4], None, None),
    "padded": ([2, 3, 4], [20, 6, 1], [40, 12, 2]),               # row and element padding
    "transposed": ([2, 3, 4], [1, 2, 6], [12, 1, 3]),              # column-major in, mixed out
    "broadcast": ([2, 3, 4], [0, 4, 1], [1, 8, 2]),               # input dim 0 broadcast
    "all-broadcast": ([2, 3, 4], [0, 0, 0], None),                # one element fills the tensor
    "inner-broadcast": ([2, 3, 4], [3, 1, 0], [24, 8, 2]),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op,dtype,axis,direction,exclusive", [
    (SUM, "FLOAT32", 2, "INCREASING", False),
    (SUM, "INT32", 1, "DECREASING", True),
    (PROD, "FLOAT16", 0, "DECREASING", False),
    (PROD, "UINT32", 2, "INCREASING", True),
])
def test_scan_on_strided_padded_and_broadcast_buffers(layout, op, dtype, axis, direction, exclusive):
    sizes, in_strides, out_strides = LAYOUTS[layout]
    t_in = tensor(dtype, sizes, in_strides)
    # Extra bytes at the end of the output buffer, inside total_tensor_size_in_bytes.
    out_min = dml.calc_buffer_tensor_size(dtype, sizes, out_strides)
    t_out = tensor(dtype, sizes, out_strides, total_tensor_size_in_bytes=out_min + 16)
    flag = "has_exclusive_sum" if op is SUM else "has_exclusive_product"
    desc = op(t_in, t_out, axis, direction, **{flag: exclusive})
    x = _values(dtype, sizes)
    if in_strides is not None:  # the values a broadcast desc can hold: equal along stride-0 dims
        x = gather(buffer_with(t_in, x), t_in).astype(x.dtype)
    in_buf, out_buf = buffer_with(t_in, x, buffer_dtype=torch.int32), sentinel_buffer(t_out)
    in_before = in_buf.clone()
    dml.compile_operator(desc)(in_buf, out_buf)
    want = scan_oracle(x, axis, op is PROD, direction == "DECREASING", exclusive, dtype)
    assert_matches(gather(out_buf, t_out), want, dtype)
    assert_untouched_outside(out_buf, t_out)
    assert torch.equal(in_buf, in_before), "the input buffer was written"


@pytest.mark.parametrize("dtype", ["FLOAT32", "INT64", "BFLOAT16", "UINT8"])
@pytest.mark.parametrize("op", [SUM, PROD])
def test_scan_in_place_on_one_buffer(op, dtype):
    sizes, strides = [3, 5], [8, 1]   # padded rows, the padding must survive
    t = tensor(dtype, sizes, strides)
    x = _values(dtype, sizes)
    buf = buffer_with(t, x)
    desc = op(t, t, 1, "DECREASING")
    dml.compile_operator(desc, None)(buf, buf)
    assert_matches(gather(buf, t), scan_oracle(x, 1, op is PROD, True, False, dtype), dtype)
    assert_untouched_outside(buf, t)


def test_scan_in_place_through_two_tensors_sharing_storage():
    """Binding the same memory twice (two tensor objects) is the same in-place execution."""
    t = tensor("FLOAT32", [4, 3], [1, 4])
    x = _values("FLOAT32", [4, 3])
    buf = buffer_with(t, x, buffer_dtype=torch.float32)
    alias = buf.view(torch.int32)
    dml.compile_operator(SUM(t, t, 0, "INCREASING", True))(buf, alias)
    assert_matches(gather(buf, t), scan_oracle(x, 0, False, False, True, "FLOAT32"), "FLOAT32")


def test_buffers_at_offsets_inside_bigger_tensors():
    """A buffer may be a slice of a bigger allocation (a binding offset), any dtype, any shape."""
    t = tensor("FLOAT16", [2, 4])
    x = _values("FLOAT16", [2, 4])
    backing = torch.zeros(64, dtype=torch.float16, device=DEVICE)
    backing[8:16] = torch.from_numpy(x.astype(np.float16).reshape(-1)).to(DEVICE)
    out_backing = torch.full((10, 4), -3.0, dtype=torch.float16, device=DEVICE)
    dml.compile_operator(PROD(t, t, 1))(backing[8:], out_backing[2:4])
    got = out_backing.cpu().numpy()
    np.testing.assert_array_equal(got[2:4], scan_oracle(x, 1, True, False, False, "FLOAT16"))
    assert np.all(got[:2] == -3) and np.all(got[4:] == -3)


def test_default_total_size_is_directml_minimum_and_buffer_of_exactly_that_works():
    t = tensor("INT8", [3, 3], [4, 1])         # last index 10 -> 11 bytes -> rounded to 12
    assert t.total_tensor_size_in_bytes == 12
    x = _values("INT8", [3, 3])
    out = sentinel_buffer(t)
    assert out.numel() == 12
    dml.compile_operator(SUM(t, t, 0), None)(buffer_with(t, x), out)   # INT8: tritonml's support
    assert_matches(gather(out, t), scan_oracle(x, 0, False, False, False, "INT8"), "INT8")
    assert_untouched_outside(out, t)


@pytest.mark.parametrize("function,dtype,out_type,axes", [
    ("SUM", "FLOAT32", "FLOAT32", [1]),
    ("MAX", "INT16", "INT16", [0, 2]),
    ("ARGMIN", "FLOAT16", "INT32", [2]),
    ("ARGMAX", "UINT8", "UINT64", [0, 1]),
    ("L2", "FLOAT32", "FLOAT32", [0, 1, 2]),
    ("LOG_SUM_EXP", "FLOAT16", "FLOAT16", [1]),
])
@pytest.mark.parametrize("layout", ["packed", "padded", "transposed", "broadcast"])
def test_reduce_on_strided_padded_and_broadcast_buffers(function, dtype, out_type, axes, layout):
    sizes, in_strides, _ = LAYOUTS[layout]
    out_sizes = [1 if d in axes else s for d, s in enumerate(sizes)]
    out_strides = [3 * s for s in _packed(out_sizes)]  # every output element padded by two
    t_in = tensor(dtype, sizes, in_strides)
    t_out = tensor(out_type, out_sizes, out_strides)
    x = _values(dtype, sizes)
    if in_strides is not None:
        x = gather(buffer_with(t_in, x), t_in).astype(x.dtype)
    out = sentinel_buffer(t_out)
    dml.compile_operator(ReduceOperatorDesc(function, t_in, t_out, axes))(buffer_with(t_in, x), out)
    want = reduce_oracle(x, function, axes, dtype, out_type)
    assert_matches(gather(out, t_out), want, out_type, exact=function in EXACT_FUNCTIONS)
    assert_untouched_outside(out, t_out)


# ============================================================================================
# Buffer errors: clear, naming the buffer, raised before anything is written
# ============================================================================================
def _scan_op(**kw):
    t = tensor("FLOAT32", [2, 3], [4, 1], **kw)
    return t, dml.compile_operator(SUM(t, t, 1))


@pytest.mark.parametrize("case,field,words", [
    ("not-a-tensor", "input_buffer", "torch.Tensor"),
    ("input-too-small", "input_buffer", "total_tensor_size_in_bytes"),
    ("output-too-small", "output_buffer", "total_tensor_size_in_bytes"),
    ("non-contiguous", "input_buffer", "contiguous"),
    ("misaligned-element", "output_buffer", "element size"),
    ("misaligned-guarantee", "input_buffer", "guaranteed_base_offset_alignment"),
    ("wrong-device", "input_buffer", "meta"),
    ("partial-overlap", "output_buffer", "overlap"),
])
def test_bad_buffers_raise_before_anything_is_written(case, field, words):
    t, op = _scan_op(guaranteed_base_offset_alignment=16 if case == "misaligned-guarantee" else 0)
    nbytes = t.total_tensor_size_in_bytes  # 24
    x = torch.arange(64, dtype=torch.float32, device=DEVICE)
    out = torch.full((64,), 7.0, device=DEVICE)
    args = {
        "not-a-tensor": lambda: (np.zeros(8, np.float32), out),
        "input-too-small": lambda: (x[: nbytes // 4 - 1], out),
        "output-too-small": lambda: (x, out[:2]),
        "non-contiguous": lambda: (x[::2], out),
        "misaligned-element": lambda: (x, out.view(torch.uint8)[2:]),
        "misaligned-guarantee": lambda: (x[1:], out),
        "wrong-device": lambda: (torch.empty(64, device="meta"), out),
        "partial-overlap": lambda: (x, x[1:]),
    }[case]()
    before = [a.clone() for a in args if isinstance(a, torch.Tensor) and a.device.type != "meta"]
    with pytest.raises(DescriptorError) as info:
        op(*args)
    assert info.value.field == field
    assert words in str(info.value)
    after = [a for a in args if isinstance(a, torch.Tensor) and a.device.type != "meta"]
    assert all(torch.equal(b, a) for b, a in zip(before, after))


# Found through this layer (bfloat16 MAX gave -inf, MULTIPLY 0, ARGMAX/ARGMIN an index out of
# range under the interpreter, fixed in the reduce kernels): a regression test.
@pytest.mark.parametrize("function", ("ARGMAX", "ARGMIN", "MAX", "MULTIPLY"))
def test_bfloat16_reduce_through_descriptors(function):
    out_type = "INT64" if function.startswith("ARG") else "BFLOAT16"
    t_in, t_out = tensor("BFLOAT16", [2, 3]), tensor(out_type, [2, 1])
    x = np.array([[1, 2, -1], [1, 1, 2]], dtype=np.float32)
    out = sentinel_buffer(t_out)
    dml.compile_operator(ReduceOperatorDesc(function, t_in, t_out, [1]), None)(buffer_with(t_in, x), out)
    np.testing.assert_array_equal(gather(out, t_out), reduce_oracle(x, function, [1], "BFLOAT16", out_type))


def test_reduce_output_overlapping_its_input_is_an_error():
    t_in, t_out = tensor("FLOAT32", [2, 3]), tensor("FLOAT32", [2, 1])
    op = dml.compile_operator(ReduceOperatorDesc("SUM", t_in, t_out, [1]))
    buf = torch.arange(8, dtype=torch.float32, device=DEVICE)
    before = buf.clone()
    with pytest.raises(DescriptorError) as info:
        op(buf, buf)
    assert info.value.field == "output_buffer" and "in place" in str(info.value)
    assert torch.equal(buf, before)


def test_reduce_function_accepts_tritonml_enum_members_by_name():
    enum_cls = tritonml.ReduceFunction
    for member in enum_cls:
        assert ReduceFunction.parse(member) is ReduceFunction[member.name]


@pytest.mark.parametrize("dtype,sizes,strides,expected", [
    ("FLOAT32", [1, 1, 3, 4], None, 48),
    ("FLOAT16", [3], None, 8),              # 6 bytes rounded up to 4
    ("INT8", [5], None, 8),
    ("UINT8", [2, 3], [8, 2], 16),          # last index 12 -> 13 bytes -> 16
    ("FLOAT32", [4, 5], [0, 1], 20),        # broadcast rows: one row of memory
    ("FLOAT64", [2, 2], [1, 2], 32),        # transposed: same span as packed
    ("INT64", [3, 1], [1, 1000], 24),       # stride of a size-1 dim is never used
    ("FLOAT32", [7], [0], 4),
])
def test_buffer_size_calculation_matches_directml(dtype, sizes, strides, expected):
    assert dml.calc_buffer_tensor_size(dtype, sizes, strides) == expected
    assert TensorDesc(dtype, sizes, strides).total_tensor_size_in_bytes == expected


def _all_kinds_of_descs():
    t4 = tensor("FLOAT16", [1, 2, 3, 4], [48, 24, 8, 2], total_tensor_size_in_bytes=200,
                guaranteed_base_offset_alignment=32, flags="OWNED_BY_DML")
    yield SUM(t4, tensor("FLOAT16", [1, 2, 3, 4]), 2, "DECREASING", True)
    yield PROD(tensor("UINT32", [5]), tensor("UINT32", [5], [2]), 0)
    yield ReduceOperatorDesc("LOG_SUM_EXP", tensor("FLOAT32", [2, 3]), tensor("FLOAT32", [1, 3]), [0])
    yield ReduceOperatorDesc(ReduceFunction.ARGMIN, tensor("INT8", [2, 3, 4]),
                             tensor("INT64", [1, 3, 1]), [2, 0])


@pytest.mark.parametrize("desc", list(_all_kinds_of_descs()), ids=lambda d: type(d).__name__)
def test_descs_round_trip_through_json(desc):
    text = json.dumps(dml.to_dict(desc))
    again = dml.from_dict(json.loads(text))
    assert again == desc and type(again) is type(desc)
    assert dml.to_dict(again) == json.loads(text)


@pytest.mark.parametrize("path", sorted(DOCS_EXAMPLES.glob("*.json")), ids=lambda p: p.name)
def test_docs_example_files_parse_and_round_trip(path):
    data = json.loads(path.read_text())
    desc = dml.from_dict(data)
    assert dml.from_dict(dml.to_dict(desc)) == desc
    problems = dml.validate(desc)
    assert (problems != []) == path.name.startswith("invalid")


def _valid_scan_dict():
    return {"type": "CUMULATIVE_SUMMATION",
            "input_tensor": {"data_type": "FLOAT32", "sizes": [1, 1, 3, 4]},
            "output_tensor": {"data_type": "FLOAT32", "sizes": [1, 1, 3, 4]},
            "axis": 3, "axis_direction": "INCREASING", "has_exclusive_sum": False}


def _set_path(data, path, value):
    keys = path.split(".")
    for key in keys[:-1]:
        data = data[key]
    if value is _DELETE:
        del data[keys[-1]]
    else:
        data[keys[-1]] = value


_DELETE = object()


@pytest.mark.parametrize("path,value,field,words", [
    ("type", _DELETE, "type", "missing"),
    ("type", "CUMULATIVE_SUM", "type", "unknown operator type"),
    ("type", 3, "type", "operator type"),
    ("axis", _DELETE, "axis", "missing"),
    ("axis", "3", "axis", "integer"),
    ("axis", 3.0, "axis", "integer"),
    ("axis", True, "axis", "integer"),
    ("axis_direction", "UP", "axis_direction", "unknown AxisDirection"),
    ("axis_direction", 1, "axis_direction", "AxisDirection name"),
    ("has_exclusive_sum", "false", "has_exclusive_sum", "bool"),
    ("has_exclusive_sum", 0, "has_exclusive_sum", "bool"),
    ("has_exclusive_product", True, "has_exclusive_product", "unknown field"),
    ("input_tensor", _DELETE, "input_tensor", "missing"),
    ("input_tensor", [1, 2], "input_tensor", "object"),
    ("input_tensor.sizes", _DELETE, "input_tensor.sizes", "missing"),
    ("input_tensor.sizes", 12, "input_tensor.sizes", "list of integers"),
    ("input_tensor.sizes", [1, 1, "3", 4], "input_tensor.sizes[2]", "integer"),
    ("input_tensor.strides", [12, 12, 4, 1.5], "input_tensor.strides[3]", "integer"),
    ("input_tensor.data_type", "FLOAT", "input_tensor.data_type", "unknown DataType"),
    ("input_tensor.data_type", 1, "input_tensor.data_type", "DataType name"),
    ("output_tensor.flags", "OWNED", "output_tensor.flags", "unknown TensorFlags"),
    ("output_tensor.total_tensor_size_in_bytes", "48", "output_tensor.total_tensor_size_in_bytes",
     "integer"),
    ("output_tensor.guaranteed_base_offset_alignment", [16], "output_tensor.guaranteed_base_offset_alignment",
     "integer"),
    ("output_tensor.stride", [1], "output_tensor.stride", "unknown field"),
])
def test_json_with_missing_unknown_or_mistyped_fields_names_the_field(path, value, field, words):
    data = _valid_scan_dict()
    _set_path(data, path, value)
    with pytest.raises(DescriptorError) as info:
        dml.from_dict(data)
    assert field in [p.field for p in info.value.problems]
    assert words in str(info.value)
    assert isinstance(info.value, ValueError)


def test_json_errors_are_all_reported_at_once():
    data = _valid_scan_dict()
    data["axis"] = "x"
    data["input_tensor"]["sizes"] = [1, None]
    del data["output_tensor"]["data_type"]
    with pytest.raises(DescriptorError) as info:
        dml.from_dict(data)
    assert [p.field for p in info.value.problems] == [
        "input_tensor.sizes[1]", "output_tensor.data_type", "axis"]


@pytest.mark.parametrize("data", [[], "CUMULATIVE_SUMMATION", None, 3])
def test_a_document_that_is_not_an_object_is_a_clear_error(data):
    with pytest.raises(DescriptorError, match="JSON object"):
        dml.from_dict(data)


def test_constructors_check_field_types_and_name_every_one():
    with pytest.raises(DescriptorError) as info:
        TensorDesc("FLOAT31", [2, "x"], strides=5, flags=2)
    assert [p.field for p in info.value.problems] == ["data_type", "sizes[1]", "strides", "flags"]
    with pytest.raises(DescriptorError) as info:
        SUM("not a desc", tensor("FLOAT32", [1]), axis=None, has_exclusive_sum=1)
    assert [p.field for p in info.value.problems] == ["input_tensor", "axis", "has_exclusive_sum"]


# ============================================================================================
# Feature-level validation: every rule fails where it applies and passes where it does not
# ============================================================================================
LEVELS = LEVEL_NAMES + [None]
OPERATOR_KEYS = ["CUMULATIVE_SUMMATION", "CUMULATIVE_PRODUCT"] + [f"REDUCE/{f}" for f in FUNCTION_TABLE]


def _desc_for(key: str, in_type: str, rank: int = 4, out_type=None):
    """A desc of ``key`` that breaks nothing but (maybe) the level's type and rank support."""
    sizes = [2] * rank
    if key.startswith("REDUCE/"):
        function = key.split("/")[1]
        if out_type is None:
            out_type = "UINT32" if function in ("ARGMAX", "ARGMIN") else in_type
        return ReduceOperatorDesc(function, tensor(in_type, sizes),
                                  tensor(out_type, [1] + sizes[1:]), [0])
    op = SUM if key == "CUMULATIVE_SUMMATION" else PROD
    return op(tensor(in_type, sizes), tensor(out_type or in_type, sizes), rank - 1)


def _split(key):
    return ("REDUCE", key.split("/")[1]) if key.startswith("REDUCE/") else (key, None)


@pytest.mark.parametrize("level", LEVELS, ids=str)
@pytest.mark.parametrize("key", OPERATOR_KEYS)
def test_input_data_types_per_feature_level_match_the_spec_tables(key, level):
    row = spec_row(*_split(key), level)
    accepted = {name for name in ALL_TYPE_NAMES if not dml.validate(_desc_for(key, name), level)}
    if row is None:
        assert accepted == set()
        problems = dml.validate(_desc_for(key, "FLOAT32"), level)
        assert [p.field for p in problems] == ["feature_level"]
        assert "introduced" in problems[0].rule
    else:
        dims, ins, outs = row
        assert accepted == ins
        for name in set(ALL_TYPE_NAMES) - ins:
            fields = {p.field for p in dml.validate(_desc_for(key, name), level)}
            assert "input_tensor.data_type" in fields


# Only the (operator, level) pairs where the operator exists; the others are checked above.
AVAILABLE_AT = [(key, level) for key in OPERATOR_KEYS for level in LEVELS
                if spec_row(*_split(key), level) is not None]


@pytest.mark.parametrize("key,level", AVAILABLE_AT, ids=[f"{k}-{l}" for k, l in AVAILABLE_AT])
def test_dimension_counts_per_feature_level_match_the_spec_tables(key, level):
    dims, _, _ = spec_row(*_split(key), level)
    accepted = {rank for rank in range(1, 9) if not dml.validate(_desc_for(key, "FLOAT32", rank), level)}
    assert accepted == set(dims)
    for rank in set(range(1, 9)) - set(dims):
        fields = {p.field for p in dml.validate(_desc_for(key, "FLOAT32", rank), level)}
        assert {"input_tensor.sizes", "output_tensor.sizes"} <= fields


@pytest.mark.parametrize("level", LEVELS, ids=str)
@pytest.mark.parametrize("function", ["ARGMAX", "ARGMIN"])
def test_argmax_argmin_output_types_per_feature_level(function, level):
    _, _, outs = spec_row("REDUCE", function, level)
    accepted = {name for name in ALL_TYPE_NAMES
                if not dml.validate(_desc_for(f"REDUCE/{function}", "FLOAT32", out_type=name), level)}
    assert accepted == outs
    bad = dml.validate(_desc_for(f"REDUCE/{function}", "FLOAT32", out_type="FLOAT32"), level)
    assert "output_tensor.data_type" in [p.field for p in bad]


def test_default_feature_level_is_5_0_and_newer_levels_validate_like_it():
    for key in OPERATOR_KEYS:
        for name in ALL_TYPE_NAMES:
            desc = _desc_for(key, name, rank=3)
            default = dml.validate(desc)
            assert [p.field for p in default] == [p.field for p in dml.validate(desc, "5_0")]
            for newer in ("5_1", "5_2", "6_0", "6_1", "6_2", "6_3", "6_4"):
                assert [p.field for p in dml.validate(desc, newer)] == [p.field for p in default]


def _base(op: str):
    """A desc valid at every level where its operator exists (4-D FLOAT32)."""
    t = dict(data_type="FLOAT32", sizes=[1, 2, 3, 4])
    if op == "reduce":
        return dict(type="REDUCE", function="SUM", input_tensor=dict(t),
                    output_tensor=dict(data_type="FLOAT32", sizes=[1, 2, 1, 4]), axes=[2])
    return dict(type="CUMULATIVE_SUMMATION" if op == "sum" else "CUMULATIVE_PRODUCT",
                input_tensor=dict(t), output_tensor=dict(t), axis=2)


# (operators, what to change, the field that must be reported; None: must stay valid)
RULES = [
    # sizes
    ("all", {"input_tensor.sizes": [1, 2, 0, 4]}, "input_tensor.sizes[2]"),
    ("scan", {"input_tensor.sizes": [1, 65536, 65536, 1],
              "output_tensor.sizes": [1, 65536, 65536, 1]}, "input_tensor.sizes"),      # 2^32 elements
    ("scan", {"input_tensor.sizes": [1, 65535, 65537, 1],
              "output_tensor.sizes": [1, 65535, 65537, 1]}, None),                      # 2^32 - 1
    ("all", {"input_tensor.sizes": [], "output_tensor.sizes": []}, "input_tensor.sizes"),
    ("all", {"input_tensor.sizes": [1] * 9, "output_tensor.sizes": [1] * 9}, "input_tensor.sizes"),
    ("all", {"input_tensor.sizes": [1, 2, 2**32, 4]}, "input_tensor.sizes[2]"),
    # strides
    ("all", {"input_tensor.strides": [24, 12, 4, -1]}, "input_tensor.strides[3]"),
    ("all", {"input_tensor.strides": [12, 4, 1]}, "input_tensor.strides"),
    ("all", {"input_tensor.strides": [0, 0, 2**32, 1]}, "input_tensor.strides[2]"),
    ("all", {"input_tensor.strides": [0, 12, 4, 1]}, None),
    ("all", {"input_tensor.strides": [0, 0, 0, 0]}, None),                       # broadcast input
    ("all", {"input_tensor.strides": [999, 1, 8, 2]}, None),                     # padded, transposed
    ("scan", {"output_tensor.strides": [24, 12, 0, 1]}, "output_tensor.strides[2]"),
    ("scan", {"output_tensor.strides": [24, 12, 2, 1]}, "output_tensor.strides[2]"),  # overlapping
    ("scan", {"output_tensor.strides": [99, 1, 8, 2]}, None),
    ("reduce", {"output_tensor.strides": [0, 4, 0, 1]}, None),                  # size-1 dims: unused
    ("reduce", {"output_tensor.strides": [8, 0, 4, 1]}, "output_tensor.strides[1]"),
    # total size (FLOAT32 1x2x3x4 packed: 96 bytes; strides [0,16,4,1] span 16+8+3+1 = 28 -> 112)
    ("all", {"input_tensor.total_tensor_size_in_bytes": 95}, "input_tensor.total_tensor_size_in_bytes"),
    ("all", {"input_tensor.total_tensor_size_in_bytes": 96}, None),
    ("all", {"input_tensor.total_tensor_size_in_bytes": 1000}, None),
    ("all", {"input_tensor.strides": [0, 16, 4, 1], "input_tensor.total_tensor_size_in_bytes": 111},
     "input_tensor.total_tensor_size_in_bytes"),
    ("all", {"input_tensor.strides": [0, 16, 4, 1], "input_tensor.total_tensor_size_in_bytes": 112}, None),
    ("all", {"output_tensor.total_tensor_size_in_bytes": 2**64}, "output_tensor.total_tensor_size_in_bytes"),
    # alignment
    ("all", {"input_tensor.guaranteed_base_offset_alignment": 2},
     "input_tensor.guaranteed_base_offset_alignment"),                        # below 4-byte elements
    ("all", {"input_tensor.guaranteed_base_offset_alignment": 24},
     "input_tensor.guaranteed_base_offset_alignment"),                        # not a power of two
    ("all", {"output_tensor.guaranteed_base_offset_alignment": -16},
     "output_tensor.guaranteed_base_offset_alignment"),
    ("all", {"input_tensor.guaranteed_base_offset_alignment": 4}, None),
    ("all", {"output_tensor.guaranteed_base_offset_alignment": 256}, None),
    # flags
    ("all", {"output_tensor.flags": "OWNED_BY_DML"}, "output_tensor.flags"),
    ("all", {"input_tensor.flags": "OWNED_BY_DML"}, None),
    # scans
    ("scan", {"axis": 4}, "axis"),
    ("scan", {"axis": -1}, "axis"),
    ("scan", {"axis": 0}, None),
    ("scan", {"output_tensor.data_type": "FLOAT16"}, "output_tensor.data_type"),
    ("scan", {"output_tensor.sizes": [1, 2, 3, 5]}, "output_tensor.sizes[3]"),
    ("scan", {"output_tensor.sizes": [2, 3, 4]}, "output_tensor.sizes"),
    ("scan", {"axis_direction": "DECREASING"}, None),
    # reduce
    ("reduce", {"axes": []}, "axes"),
    ("reduce", {"axes": [4]}, "axes[0]"),
    ("reduce", {"axes": [-1]}, "axes[0]"),
    ("reduce", {"axes": [2, 2]}, "axes[1]"),
    ("reduce", {"axes": [0, 2], "output_tensor.sizes": [1, 2, 1, 4]}, None),
    ("reduce", {"axes": [0, 1, 2, 3], "output_tensor.sizes": [1, 1, 1, 1]}, None),
    ("reduce", {"output_tensor.sizes": [1, 2, 3, 4]}, "output_tensor.sizes[2]"),   # not reduced to 1
    ("reduce", {"output_tensor.sizes": [1, 1, 1, 4]}, "output_tensor.sizes[1]"),   # kept axis changed
    ("reduce", {"output_tensor.sizes": [2, 4]}, "output_tensor.sizes"),            # rank dropped
    ("reduce", {"output_tensor.data_type": "FLOAT16"}, "output_tensor.data_type"),
    ("reduce", {"function": "ARGMAX"}, "output_tensor.data_type"),                 # FLOAT32 index
    ("reduce", {"function": "ARGMIN", "output_tensor.data_type": "UINT32"}, None),
]


def _rule_id(rule):
    ops, change, field = rule
    return f"{ops}:{','.join(f'{k}={v}' for k, v in change.items())}"[:80]


@pytest.mark.parametrize("rule", RULES, ids=_rule_id)
def test_each_rule_fails_where_it_applies_and_passes_where_it_does_not(rule):
    ops, change, field = rule
    ops = ["sum", "product", "reduce"] if ops == "all" else (["sum", "product"] if ops == "scan" else [ops])
    for op in ops:
        for level in LEVELS:
            if spec_row({"sum": "CUMULATIVE_SUMMATION", "product": "CUMULATIVE_PRODUCT",
                         "reduce": "REDUCE"}[op], "SUM", level) is None:
                continue  # the operator does not exist there (tested above)
            data = _base(op)
            assert dml.validate(dml.from_dict(data), level) == []
            for path, value in change.items():
                _set_path(data, path, value)
            desc = dml.from_dict(data)
            problems = dml.validate(desc, level)
            context = f"{op} at {level}: {problems}"
            if field is None:
                assert problems == [], context
                continue
            assert field in [p.field for p in problems], context
            with pytest.raises(DescriptorError) as info:
                dml.compile_operator(desc, level)
            assert info.value.field == problems[0].field
            assert field in str(info.value)


def test_tritonml_wider_support_is_only_on_request():
    for name in ("BFLOAT16", "FLOAT64", "INT8", "UINT16", "UINT8", "INT16"):
        desc = SUM(tensor(name, [3, 2]), tensor(name, [3, 2]), 0)
        assert dml.validate(desc, None) == []
        assert "input_tensor.data_type" in [p.field for p in dml.validate(desc)]
    avg = ReduceOperatorDesc("AVERAGE", tensor("INT32", [3]), tensor("INT32", [1]), [0])
    assert [p.field for p in dml.validate(avg, None)] == ["input_tensor.data_type",
                                                         "output_tensor.data_type"]
    arg = ReduceOperatorDesc("ARGMAX", tensor("BFLOAT16", [3]), tensor("INT16", [1]), [0])
    assert [p.field for p in dml.validate(arg, None)] == ["output_tensor.data_type"]


def test_descriptor_error_names_field_and_rule():
    t = tensor("FLOAT32", [2, 3, 4], [12, 4, -1])
    with pytest.raises(DescriptorError) as info:
        dml.compile_operator(SUM(t, tensor("FLOAT32", [2, 3, 4]), 1))
    assert info.value.field == "input_tensor.strides[2]"
    assert str(info.value).startswith("input_tensor.strides[2]: strides are unsigned")
    assert "never negative" in info.value.rule


@pytest.mark.parametrize("bad", ["7_0", "4", "level", 0x4200, None.__class__])
def test_unknown_feature_level_is_a_clear_error(bad):
    desc = _desc_for("CUMULATIVE_SUMMATION", "FLOAT32")
    with pytest.raises(DescriptorError) as info:
        dml.validate(desc, bad)
    assert info.value.field == "feature_level"


@pytest.mark.parametrize("level", [None, "4_1", "6_4"])
def test_argmax_index_type_must_hold_the_largest_index(level):
    big = tensor("FLOAT16", [2**16, 2**15 + 1])   # 2^31 + 2^16 elements: indices pass INT32
    fits = ReduceOperatorDesc("ARGMAX", tensor("FLOAT16", [2**16, 2**15]), tensor("INT32", [1, 1]), [0, 1])
    assert dml.validate(fits, level) == []
    problems = dml.validate(ReduceOperatorDesc("ARGMAX", big, tensor("INT32", [1, 1]), [0, 1]), level)
    assert [p.field for p in problems] == ["output_tensor.data_type"]
    assert "cannot hold" in problems[0].rule
    assert dml.validate(ReduceOperatorDesc("ARGMIN", big, tensor("UINT32", [1, 1]), [0, 1]), level) == []


# ============================================================================================
# Property: a random descriptor is either rejected with a DescriptorError or matches numpy
# ============================================================================================
def _expected_valid(case) -> bool:
    """The spec's rules, written out independently of tritonml.dml, for what the strategy varies."""
    op, level = case["op"], case["level"]
    t_in, t_out = case["input"], case["output"]
    row = spec_row("REDUCE" if op == "reduce" else op, case.get("function"), level)
    if row is None:
        return False
    dims, ins, outs = row
    for t, is_output in ((t_in, False), (t_out, True)):
        sizes, strides = t["sizes"], t["strides"]
        if not 1 <= len(sizes) <= 8 or any(s < 1 for s in sizes):
            return False
        if strides is not None and (len(strides) != len(sizes) or any(s < 0 for s in strides)):
            return False
        eff = strides if strides is not None else _packed(sizes)
        last = sum((s - 1) * st for s, st in zip(sizes, eff))
        minimum = -(-(last + 1) * SIZE[t["type"]] // 4) * 4
        if t["total"] is not None and t["total"] < minimum:
            return False
        align = t["align"]
        if align and (align & (align - 1) or align < SIZE[t["type"]]):
            return False
        if is_output and _self_overlapping(sizes, eff):
            return False
        if len(sizes) not in dims:
            return False
    if t_in["type"] not in ins or t_out["type"] not in (outs or ins):
        return False
    rank = len(t_in["sizes"])
    if len(t_out["sizes"]) != rank:
        return False
    if op == "reduce":
        axes = case["axes"]
        if not axes or len(set(axes)) != len(axes) or not all(0 <= a < rank for a in axes):
            return False
        want = [1 if d in axes else s for d, s in enumerate(t_in["sizes"])]
        if case["function"] not in ("ARGMAX", "ARGMIN") and t_out["type"] != t_in["type"]:
            return False
    else:
        if not 0 <= case["axis"] < rank or t_out["type"] != t_in["type"]:
            return False
        want = t_in["sizes"]
    return list(t_out["sizes"]) == list(want)


def _self_overlapping(sizes, strides) -> bool:
    """Brute force: do two indices address one element?"""
    addresses = [sum(i * s for i, s in zip(index, strides)) for index in np.ndindex(*sizes)]
    return len(set(addresses)) != len(addresses)


@st.composite
def _tensor_fields(draw, sizes, type_name, *, wild_strides, wild_total, wild_align, output):
    """A tensor's JSON-like fields; the ``wild_*`` ones are drawn from a distribution that breaks
    rules (negative or missing strides, short buffers, bad alignments), the others stay valid."""
    kinds = ["none", "packed", "padded", "permuted"] + ([] if output else ["broadcast"])
    if wild_strides:
        kinds += ["broadcast", "random", "negative", "short"]
    kind = draw(st.sampled_from(kinds))
    rank = len(sizes)
    if kind == "none":
        strides = None
    elif kind in ("packed", "padded", "broadcast"):
        strides, step = [], draw(st.integers(1, 2)) if kind == "padded" else 1
        for size in reversed(sizes):
            strides.append(step)
            step = step * max(size, 1) + (draw(st.integers(0, 2)) if kind == "padded" else 0)
        strides = strides[::-1]
        if kind == "broadcast":
            strides = [0 if draw(st.booleans()) else s for s in strides]
    elif kind == "permuted":
        order = draw(st.permutations(range(rank)))
        strides, step = [0] * rank, 1
        for d in reversed(order):
            strides[d] = step
            step *= max(sizes[d], 1)
    elif kind == "random":
        strides = draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank))
    elif kind == "negative":
        strides = list(_packed(sizes))
        strides[draw(st.integers(0, rank - 1))] = -1
    else:
        strides = list(_packed(sizes))[1:]
    total = None
    if draw(st.booleans()):
        eff = strides if strides is not None and len(strides) == rank else _packed(sizes)
        last = sum((max(s, 1) - 1) * st for s, st in zip(sizes, eff))
        minimum = -(-(last + 1) * SIZE[type_name] // 4) * 4
        total = max(0, minimum + draw(st.integers(-6 if wild_total else 0, 8)))
    aligns = [0, 16, 64, SIZE[type_name]] + ([2, 3, 24, 1] if wild_align else [])
    return dict(type=type_name, sizes=list(sizes), strides=strides, total=total,
                align=draw(st.sampled_from(aligns)))


HYPOTHESIS_LEVELS = [None, "1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "6_4"]
WILD_FIELDS = ["level", "rank", "sizes", "type", "strides", "total", "align", "axis", "out_sizes",
               "out_type"]


@st.composite
def descriptor_cases(draw):
    """Mostly valid descriptors, each field drawn from a valid distribution, except (about half the
    time) one field, or all of them, drawn from a wild one."""
    wild = draw(st.sampled_from([None] * 6 + WILD_FIELDS + ["all"]))
    w = lambda name: wild in (name, "all")  # noqa: E731
    op = draw(st.sampled_from(["CUMULATIVE_SUMMATION", "CUMULATIVE_PRODUCT"]
                              + ["reduce", "reduce"]))
    function = draw(st.sampled_from(sorted(FUNCTION_TABLE))) if op == "reduce" else None
    operator = "REDUCE" if op == "reduce" else op
    levels = [lv for lv in HYPOTHESIS_LEVELS if w("level") or spec_row(operator, function, lv)]
    level = draw(st.sampled_from(levels))
    dims, ins, outs = spec_row(operator, function, level) or (ANY, set(ALL_TYPE_NAMES), INDEX_TYPE_NAMES)
    rank = draw(st.integers(1, 4) if w("rank") else st.sampled_from([d for d in dims if d <= 4]))
    sizes = draw(st.lists(st.integers(0, 4) if w("sizes") else st.integers(1, 3),
                          min_size=rank, max_size=rank))
    in_type = draw(st.sampled_from(ALL_TYPE_NAMES if w("type") else sorted(ins)))
    case = dict(op=op, level=level, function=function)
    case["input"] = draw(_tensor_fields(sizes, in_type, wild_strides=w("strides"),
                                        wild_total=w("total"), wild_align=w("align"), output=False))
    if op == "reduce":
        axes = draw(st.lists(st.integers(-1, rank), max_size=3) if w("axis") else
                    st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
        out_sizes = [1 if d in axes else s for d, s in enumerate(sizes)]
        arg = function in ("ARGMAX", "ARGMIN")
        out_type = (draw(st.sampled_from(ALL_TYPE_NAMES)) if w("out_type") else
                    draw(st.sampled_from(sorted(outs or INDEX_TYPE_NAMES))) if arg else in_type)
        case["axes"] = axes
    else:
        out_sizes = list(sizes)
        out_type = draw(st.sampled_from(ALL_TYPE_NAMES)) if w("out_type") else in_type
        case.update(axis=draw(st.integers(-1, rank) if w("axis") else st.integers(0, rank - 1)),
                    reverse=draw(st.booleans()), exclusive=draw(st.booleans()))
    if w("out_sizes"):
        out_sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    case["output"] = draw(_tensor_fields(out_sizes, out_type, wild_strides=w("strides"),
                                         wild_total=w("total"), wild_align=w("align"), output=True))
    case["seed"] = draw(st.integers(0, 2**16))
    return case


def _build(case):
    def desc(t):
        return TensorDesc(t["type"], t["sizes"], t["strides"], t["total"], t["align"])

    t_in, t_out = desc(case["input"]), desc(case["output"])
    if case["op"] == "reduce":
        return ReduceOperatorDesc(case["function"], t_in, t_out, case["axes"])
    op = SUM if case["op"] == "CUMULATIVE_SUMMATION" else PROD
    flag = "has_exclusive_sum" if op is SUM else "has_exclusive_product"
    return op(t_in, t_out, case["axis"], "DECREASING" if case["reverse"] else "INCREASING",
              **{flag: case["exclusive"]})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(descriptor_cases())
def test_random_descriptors_are_rejected_or_match_numpy(case):
    desc = _build(case)
    valid = _expected_valid(case)
    if not valid:
        with pytest.raises(DescriptorError) as info:
            dml.compile_operator(desc, case["level"])
        assert info.value.problems and all(p.field and p.rule for p in info.value.problems)
        return
    op = dml.compile_operator(desc, case["level"])
    t_in, t_out = desc.input_tensor, desc.output_tensor
    global RNG
    RNG = np.random.default_rng(case["seed"])
    x = _values(t_in.data_type.name, t_in.sizes)
    in_buf = buffer_with(t_in, x, buffer_dtype=torch.int8)
    x = gather(in_buf, t_in)  # what the (possibly broadcast or overlapping) layout really holds
    out_buf = sentinel_buffer(t_out)
    op(in_buf, out_buf)
    name = t_out.data_type.name
    if case["op"] == "reduce":
        want = reduce_oracle(x, case["function"], case["axes"], t_in.data_type.name, name)
        exact = case["function"] in EXACT_FUNCTIONS
    else:
        want = scan_oracle(x, case["axis"], case["op"] == "CUMULATIVE_PRODUCT", case["reverse"],
                           case["exclusive"], name)
        exact = True
    assert_matches(gather(out_buf, t_out), want, name, exact=exact)
    assert_untouched_outside(out_buf, t_out)
