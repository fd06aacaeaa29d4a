"""Shared by the tests of tritonml.dml: DirectML's tensor-support tables transcribed independently of
tritonml.dml's own copy, numpy oracles, and raw buffers filled through numpy (not tritonml).

Oracles: the documented outputs verbatim (DirectML's operator pages), numpy in float64 / exact
wrapping integers (the scans through ``scan_oracle.scan_reference``, the one scan reference of the
test suite).
"""
from __future__ import annotations

import math

import numpy as np
import torch

import tritonml
from tritonml.dml import CumulativeProductOperatorDesc, CumulativeSummationOperatorDesc, TensorDesc
from tritonml.bench.tolerances import TOLERANCES
from benchmarks.scan_oracle import scan_reference

DEVICE = "cpu" if tritonml.INTERPRET else "cuda"

SUM, PROD = CumulativeSummationOperatorDesc, CumulativeProductOperatorDesc

# ============================================================================================
# The "Tensor support" tables of DirectML's pages DML_CUMULATIVE_SUMMATION_OPERATOR_DESC,
# DML_CUMULATIVE_PRODUCT_OPERATOR_DESC and DML_REDUCE_OPERATOR_DESC (newest row first):
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
    """(dims, input types, output types) DirectML's pages give at ``level``; None if the operator does
    not exist there. ``level=None``: tritonml's documented wider support (docs/dml.md)."""
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


def narrow(values: np.ndarray, name: str) -> np.ndarray:
    """Round/wrap oracle values to the output type, as numpy (bfloat16 via torch's rounding)."""
    if name == "BFLOAT16":
        return torch.from_numpy(np.array(values, np.float64)).to(torch.bfloat16).float().numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values).astype(NP_DTYPE[name])


def packed(sizes) -> tuple:
    """Row-major strides of ``sizes``, computed here (not by tritonml.dml)."""
    return tuple(int(np.prod(sizes[i + 1:])) for i in range(len(sizes)))


def gather(buffer: torch.Tensor, desc: TensorDesc) -> np.ndarray:
    """The elements ``desc`` addresses in ``buffer``, read with numpy's own strided view."""
    raw = buffer.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
    bits = raw[: (desc.last_index + 1) * SIZE[desc.data_type.name]]
    if desc.data_type.name == "BFLOAT16":
        typed = bits.view(np.uint16).astype(np.uint32) << 16
        typed = typed.view(np.float32)
    else:
        typed = bits.view(NP_DTYPE[desc.data_type.name])
    strides = desc.strides if desc.strides is not None else packed(desc.sizes)
    view = np.lib.stride_tricks.as_strided(typed, shape=desc.sizes,
                                           strides=[s * typed.itemsize for s in strides])
    return view.copy()


def scan_oracle(x: np.ndarray, axis: int, product: bool, reverse: bool, exclusive: bool,
                name: str) -> np.ndarray:
    """``scan_reference`` (float64, or integers wrapping like ``name``'s C type) in ``name``."""
    int_dtype = None if is_float(name) else NP_DTYPE[name]
    result = scan_reference(np.asarray(x), axis, "product" if product else "sum", reverse, exclusive,
                            int_dtype=int_dtype)
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


def assert_matches(got: np.ndarray, want: np.ndarray, name: str, exact: bool = True) -> None:
    assert got.shape == want.shape
    if exact or not is_float(name):
        np.testing.assert_array_equal(got, want)
    else:
        tolerance = TOLERANCES[TORCH_DTYPE[name]]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64),
                                   rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True)


RNG = np.random.default_rng(4)


def small_values(name: str, sizes, rng=None) -> np.ndarray:
    """Small values whose sums and products are exact in every type (including the halves)."""
    rng = RNG if rng is None else rng
    values = rng.choice([-1, 0, 1, 2] if not name.startswith("UINT") else [0, 1, 2, 3], size=sizes)
    return values.astype(np.float64 if is_float(name) else wide(name))


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
    strides = desc.strides if desc.strides is not None else packed(desc.sizes)
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
    strides = desc.strides if desc.strides is not None else packed(desc.sizes)
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
# JSON documents
# ============================================================================================
DELETE = object()  # set_path's value for "remove the field"


def set_path(data, path, value):
    """Set (or with ``DELETE`` remove) the field at a dotted ``path`` of a JSON-like dict."""
    keys = path.split(".")
    for key in keys[:-1]:
        data = data[key]
    if value is DELETE:
        del data[keys[-1]]
    else:
        data[keys[-1]] = value
