"""DirectML's descriptor API on top of tritonml's kernels.

People porting DirectML code think in DirectML's structs; this module gives them those structs:

- enums with DirectML's names and directml.h's values (``DataType``, ``AxisDirection``,
  ``ReduceFunction``, ``FeatureLevel``, ``TensorFlags``);
- ``TensorDesc`` (DML_BUFFER_TENSOR_DESC) and the three operator descs
  (DML_CUMULATIVE_SUMMATION / DML_CUMULATIVE_PRODUCT / DML_REDUCE_OPERATOR_DESC), fields in snake_case;
- ``validate`` (every broken rule, each with the path of its field) against a feature level's tensor
  support tables, or against tritonml's wider support with ``feature_level=None``;
- ``compile_operator(desc) -> CompiledOperator``; ``compiled(input_buffer, output_buffer)`` runs it
  on torch tensors used as raw typed storage, addressed through the descs' sizes and strides;
- ``to_dict`` / ``from_dict`` (JSON-compatible), so an operator can live in a file.

Descs are plain data, like DirectML's structs: constructing one checks only the *shape* of the data
(an int where an int belongs, a known enum name); the rules (sizes >= 1, strides, buffer sizes,
feature-level support, ...) are checked by ``validate``/``compile_operator``, which report every
broken rule at once. Buffers are checked when a compiled operator is called, before anything is
written. Every error is a ``DescriptorError`` naming the field path (``input_tensor.strides[2]``) and
the rule. The layer is thin: a buffer plus a TensorDesc becomes one ``torch.as_strided`` view, and the
views go to ``tritonml.cumulative_sum`` / ``cumulative_product`` / ``reduce`` unchanged (no copies).
See docs/dml.md.
"""
from __future__ import annotations

import enum
import math
import numbers
from dataclasses import dataclass, fields
from typing import Iterable, Optional, Sequence, Union

import torch

from . import _backend, _layout
from .ops.reduce import reduce as reduce_op

__all__ = [
    "DataType", "AxisDirection", "ReduceFunction", "FeatureLevel", "TensorFlags",
    "DEFAULT_FEATURE_LEVEL", "Problem", "DescriptorError",
    "TensorDesc", "CumulativeSummationOperatorDesc", "CumulativeProductOperatorDesc",
    "ReduceOperatorDesc", "calc_buffer_tensor_size", "validate", "check", "supported",
    "compile_operator", "CompiledOperator", "to_dict", "from_dict",
]

UINT32_MAX = 2**32 - 1
UINT64_MAX = 2**64 - 1
MAX_ELEMENT_COUNT = 2**32 - 1       # DML_BUFFER_TENSOR_DESC: at most 2^32 - 1 elements
DIMENSION_COUNT_MAX = 8             # DML_TENSOR_DIMENSION_COUNT_MAX1 (feature level 3_0 and later)


# ============================================================================================
# Errors
# ============================================================================================
@dataclass(frozen=True)
class Problem:
    """One broken rule: ``field`` is the path of the offending field (``input_tensor.sizes[1]``),
    ``rule`` says what the rule is and what was found."""
    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}"


class DescriptorError(ValueError):
    """An invalid descriptor, JSON document or buffer.

    ``field``: the path of the first broken field; ``problems``: every broken rule found (a list of
    ``Problem``); the message lists them all, one per line.
    """

    def __init__(self, problems: Union[Problem, Sequence[Problem]]):
        if isinstance(problems, Problem):
            problems = [problems]
        self.problems = list(problems)
        if not self.problems:
            raise ValueError("DescriptorError needs at least one problem")
        self.field = self.problems[0].field
        self.rule = self.problems[0].rule
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def at(cls, path: str, rule: str) -> "DescriptorError":
        return cls(Problem(path, rule))

    def prefixed(self, prefix: str) -> "DescriptorError":
        """The same problems with ``prefix`` prepended to each field path."""
        return DescriptorError([Problem(_join(prefix, p.field), p.rule) for p in self.problems])


def _join(prefix: str, path: str) -> str:
    if not prefix:
        return path
    if not path:
        return prefix
    return prefix + path if path.startswith("[") else f"{prefix}.{path}"


# ============================================================================================
# Enums (names as in directml.h without the prefix; values as in directml.h)
# ============================================================================================
class _DmlEnum(enum.IntEnum):
    """Parsing by name: the short name (``FLOAT32``), the directml.h name
    (``DML_TENSOR_DATA_TYPE_FLOAT32``), any case."""

    @classmethod
    def _prefix(cls) -> str:
        return ""

    @classmethod
    def parse(cls, value, path: str = ""):
        if isinstance(value, cls):
            return value
        if isinstance(value, enum.Enum) and not isinstance(value, bool):
            value = value.name  # e.g. tritonml.ReduceFunction.SUM -> "SUM"
        if not isinstance(value, str):
            raise DescriptorError.at(path, f"expected a {cls.__name__} name (one of {cls.names()}), "
                                           f"got {type(value).__name__} {value!r}")
        key = value.strip().upper()
        prefix = cls._prefix()
        if prefix and key.startswith(prefix):
            key = key[len(prefix):]
        member = cls.__members__.get(key)
        if member is None:
            raise DescriptorError.at(path, f"unknown {cls.__name__} {value!r}; expected one of "
                                           f"{cls.names()}")
        return member

    @classmethod
    def names(cls) -> str:
        return ", ".join(cls.__members__)

    def __str__(self) -> str:
        return self.name


class DataType(_DmlEnum):
    """DML_TENSOR_DATA_TYPE. BFLOAT16 is tritonml's extension (DirectML has none): its value is
    outside directml.h's range, and only ``feature_level=None`` accepts it."""
    FLOAT32 = 1
    FLOAT16 = 2
    UINT32 = 3
    UINT16 = 4
    UINT8 = 5
    INT32 = 6
    INT16 = 7
    INT8 = 8
    FLOAT64 = 9
    UINT64 = 10
    INT64 = 11
    BFLOAT16 = 0x10001

    @classmethod
    def _prefix(cls) -> str:
        return "DML_TENSOR_DATA_TYPE_"

    @property
    def torch_dtype(self) -> torch.dtype:
        return _TORCH_DTYPE[self]

    @property
    def element_size(self) -> int:
        return _TORCH_DTYPE[self].itemsize

    @property
    def numpy_dtype(self):
        """The numpy dtype, or None for BFLOAT16 (numpy has no bfloat16)."""
        import numpy as np
        return None if self is DataType.BFLOAT16 else np.dtype(self.name.lower())

    @classmethod
    def from_torch(cls, dtype: torch.dtype) -> "DataType":
        for member, td in _TORCH_DTYPE.items():
            if td == dtype:
                return member
        raise DescriptorError.at("data_type", f"torch dtype {dtype} has no DataType")


_TORCH_DTYPE = {
    DataType.FLOAT32: torch.float32, DataType.FLOAT16: torch.float16, DataType.UINT32: torch.uint32,
    DataType.UINT16: torch.uint16, DataType.UINT8: torch.uint8, DataType.INT32: torch.int32,
    DataType.INT16: torch.int16, DataType.INT8: torch.int8, DataType.FLOAT64: torch.float64,
    DataType.UINT64: torch.uint64, DataType.INT64: torch.int64, DataType.BFLOAT16: torch.bfloat16,
}


class AxisDirection(_DmlEnum):
    """DML_AXIS_DIRECTION: INCREASING scans from index 0, DECREASING from the end."""
    INCREASING = 0
    DECREASING = 1

    @classmethod
    def _prefix(cls) -> str:
        return "DML_AXIS_DIRECTION_"


class ReduceFunction(_DmlEnum):
    """DML_REDUCE_FUNCTION. Maps onto ``tritonml.ReduceFunction`` by name (members of that enum are
    accepted wherever a ReduceFunction is)."""
    ARGMAX = 0
    ARGMIN = 1
    AVERAGE = 2
    L1 = 3
    L2 = 4
    LOG_SUM = 5
    LOG_SUM_EXP = 6
    MAX = 7
    MIN = 8
    MULTIPLY = 9
    SUM = 10
    SUM_SQUARE = 11

    @classmethod
    def _prefix(cls) -> str:
        return "DML_REDUCE_FUNCTION_"


class TensorFlags(_DmlEnum):
    """DML_TENSOR_FLAGS. OWNED_BY_DML (inputs only) tells DirectML the data is bound once at
    initialization; tritonml has no initialization step, so it is accepted and has no effect."""
    NONE = 0
    OWNED_BY_DML = 1

    @classmethod
    def _prefix(cls) -> str:
        return "DML_TENSOR_FLAG_"


class FeatureLevel(_DmlEnum):
    """DML_FEATURE_LEVEL (values from directml.h). ``str(level)`` is DirectML's suffix, ``4_0``.

    5_1 to 6_4 exist in directml.h (DirectML 1.10 to 1.15); they change nothing for these three
    operators: the operators' support tables end with rows that hold for "5_0 and above", so
    validation at 5_1+ equals validation at 5_0.
    """
    LEVEL_1_0 = 0x1000
    LEVEL_2_0 = 0x2000
    LEVEL_2_1 = 0x2100
    LEVEL_3_0 = 0x3000
    LEVEL_3_1 = 0x3100
    LEVEL_4_0 = 0x4000
    LEVEL_4_1 = 0x4100
    LEVEL_5_0 = 0x5000
    LEVEL_5_1 = 0x5100
    LEVEL_5_2 = 0x5200
    LEVEL_6_0 = 0x6000
    LEVEL_6_1 = 0x6100
    LEVEL_6_2 = 0x6200
    LEVEL_6_3 = 0x6300
    LEVEL_6_4 = 0x6400

    @classmethod
    def parse(cls, value, path: str = "feature_level"):
        """A FeatureLevel from a member, ``"4_0"``, ``"4.0"``, ``"DML_FEATURE_LEVEL_4_0"`` or 0x4000."""
        if isinstance(value, cls):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                raise DescriptorError.at(path, f"unknown feature level {value:#x}; expected one of "
                                               f"{cls.names()}") from None
        if isinstance(value, str):
            key = value.strip().upper().replace(".", "_")
            for prefix in ("DML_FEATURE_LEVEL_", "LEVEL_"):
                if key.startswith(prefix):
                    key = key[len(prefix):]
            member = cls.__members__.get("LEVEL_" + key)
            if member is not None:
                return member
        raise DescriptorError.at(path, f"unknown feature level {value!r}; expected one of "
                                       f"{cls.names()}")

    @classmethod
    def names(cls) -> str:
        return ", ".join(str(m) for m in cls)

    def __str__(self) -> str:
        return self.name[len("LEVEL_"):]


# The highest level the operators' pages document (their tables end at "5_0 and above").
DEFAULT_FEATURE_LEVEL = FeatureLevel.LEVEL_5_0

_LevelArg = Union[FeatureLevel, str, int, None]


# ============================================================================================
# Structural parsing (types only; rules are checked by validate)
# ============================================================================================
def _as_int(value, path: str) -> int:
    # numbers.Integral admits numpy integers; bool is an int subclass but never a size or an axis.
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise DescriptorError.at(path, f"expected an integer, got {type(value).__name__} {value!r}")


def _as_int_tuple(value, path: str) -> tuple:
    if isinstance(value, (str, bytes, dict, set, frozenset)) or not isinstance(value, Iterable):
        raise DescriptorError.at(path, f"expected a list of integers, got {type(value).__name__} "
                                       f"{value!r}")
    return tuple(_as_int(v, f"{path}[{i}]") for i, v in enumerate(value))


def _as_bool(value, path: str) -> bool:
    if not isinstance(value, bool):
        raise DescriptorError.at(path, f"expected a bool (true or false), got {type(value).__name__} "
                                       f"{value!r}")
    return value


def _optional(parse):
    """``parse``, letting None through (None means the field's default)."""
    return lambda value, path: None if value is None else parse(value, path)


def _set(obj, name, value):
    object.__setattr__(obj, name, value)


def _parse_fields(parsers: dict, values: dict, prefix: str = "") -> tuple:
    """Each value through its field's parser; returns (parsed values, every Problem found)."""
    parsed, problems = {}, []
    for name, parse in parsers.items():
        if name in values:
            try:
                parsed[name] = parse(values[name], _join(prefix, name))
            except DescriptorError as e:
                problems += e.problems
    return parsed, problems


def _parse_dataclass(obj) -> None:
    """__post_init__ of the descs: coerce every field through the class's parsers, or raise one
    DescriptorError listing every mistyped field."""
    parsed, problems = _parse_fields(obj._PARSERS, {f.name: getattr(obj, f.name) for f in fields(obj)})
    if problems:
        raise DescriptorError(problems)
    for name, value in parsed.items():
        _set(obj, name, value)


def _parse_data_type(value, path: str) -> "DataType":
    if isinstance(value, torch.dtype):
        return DataType.from_torch(value)
    return DataType.parse(value, path)


# ============================================================================================
# Tensor descs
# ============================================================================================
def packed_strides(sizes: Sequence[int]) -> tuple:
    """Row-major strides (in elements) of a packed tensor: what DirectML assumes without Strides."""
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def calc_buffer_tensor_size(data_type, sizes: Sequence[int], strides: Optional[Sequence[int]] = None
                            ) -> int:
    """DirectML's DMLCalcBufferTensorSize: the minimum TotalTensorSizeInBytes.

    With strides: (index of the last addressed element + 1) * element size, where the index is
    sum((size_i - 1) * stride_i); without: element count * element size; either way rounded up to
    a multiple of 4 bytes. Sizes must be >= 1 and strides >= 0 (validate checks that).
    """
    element_size = DataType.parse(data_type, "data_type").element_size
    if strides is None:
        minimum = math.prod(sizes) * element_size
    else:
        last_index = sum((s - 1) * st for s, st in zip(sizes, strides))
        minimum = (last_index + 1) * element_size
    return (minimum + 3) & ~3


@dataclass(frozen=True)
class TensorDesc:
    """DML_BUFFER_TENSOR_DESC.

    data_type: a DataType (or its name, or a torch dtype); sizes: the logical shape, every size >= 1;
    strides: in elements, non-negative, 0 broadcasts; None means packed row-major.
    total_tensor_size_in_bytes: None means DirectML's minimum (``calc_buffer_tensor_size``), which is
    then stored; guaranteed_base_offset_alignment: 0 or a power of two >= the element size;
    flags: TensorFlags.
    """
    data_type: DataType
    sizes: tuple
    strides: Optional[tuple] = None
    total_tensor_size_in_bytes: Optional[int] = None
    guaranteed_base_offset_alignment: int = 0
    flags: TensorFlags = TensorFlags.NONE

    _PARSERS = {
        "data_type": lambda v, p: _parse_data_type(v, p),
        "sizes": _as_int_tuple,
        "strides": _optional(_as_int_tuple),
        "total_tensor_size_in_bytes": _optional(_as_int),
        "guaranteed_base_offset_alignment": _as_int,
        "flags": lambda v, p: TensorFlags.parse(v, p),
    }

    def __post_init__(self):
        _parse_dataclass(self)
        if self.total_tensor_size_in_bytes is None and self._addressing_is_sound():
            # The default is exactly DirectML's minimum, when the sizes and strides make one.
            _set(self, "total_tensor_size_in_bytes",
                 calc_buffer_tensor_size(self.data_type, self.sizes, self.strides))

    # --- derived values ---
    @property
    def dimension_count(self) -> int:
        return len(self.sizes)

    @property
    def element_count(self) -> int:
        return math.prod(self.sizes)

    @property
    def element_size(self) -> int:
        return self.data_type.element_size

    @property
    def effective_strides(self) -> tuple:
        """The strides DirectML addresses with: the given ones, or packed row-major."""
        return self.strides if self.strides is not None else packed_strides(self.sizes)

    @property
    def last_index(self) -> int:
        """Index (in elements) of the last element the desc addresses."""
        return sum((s - 1) * st for s, st in zip(self.sizes, self.effective_strides))

    @property
    def minimum_size_in_bytes(self) -> int:
        return calc_buffer_tensor_size(self.data_type, self.sizes, self.strides)

    def _addressing_is_sound(self) -> bool:
        return (all(s >= 1 for s in self.sizes)
                and (self.strides is None
                     or (len(self.strides) == len(self.sizes) and all(st >= 0 for st in self.strides))))

    # --- JSON ---
    def to_dict(self) -> dict:
        return {
            "data_type": self.data_type.name,
            "sizes": list(self.sizes),
            "strides": None if self.strides is None else list(self.strides),
            "total_tensor_size_in_bytes": self.total_tensor_size_in_bytes,
            "guaranteed_base_offset_alignment": self.guaranteed_base_offset_alignment,
            "flags": self.flags.name,
        }

    @classmethod
    def from_dict(cls, data, path: str = "") -> "TensorDesc":
        """The TensorDesc a ``to_dict`` dict describes; null optional fields take their defaults.
        Raises DescriptorError naming every missing, unknown or mistyped field (under ``path``)."""
        values, problems = _read_fields(data, path, required=("data_type", "sizes"),
                                        optional=("strides", "total_tensor_size_in_bytes",
                                                  "guaranteed_base_offset_alignment", "flags"))
        if isinstance(values.get("data_type"), torch.dtype):  # not JSON
            values["data_type"] = str(values["data_type"])
        values = {k: v for k, v in values.items() if v is not None}
        parsed, more = _parse_fields(cls._PARSERS, values, path)
        problems += more
        if problems:
            raise DescriptorError(problems)
        return cls(**parsed)

    def validate(self, path: str = "", *, is_output: bool = False) -> list:
        """The buffer-tensor rules that hold at every feature level (see ``validate`` for operators)."""
        return _tensor_problems(self, path, is_output=is_output)


def _read_fields(data, path: str, *, required: Sequence[str], optional: Sequence[str]) -> tuple:
    """The keys of a JSON object: (values present, Problems for missing required and unknown keys)."""
    if not isinstance(data, dict):
        raise DescriptorError.at(path or "(document)",
                                 f"expected an object with fields {', '.join(required)}, got "
                                 f"{type(data).__name__} {data!r}")
    known = list(required) + list(optional)
    problems = [Problem(_join(path, str(key)), f"unknown field; expected one of {', '.join(known)}")
                for key in data if key not in known]
    problems += [Problem(_join(path, key), "required field is missing")
                 for key in required if key not in data]
    return {key: data[key] for key in known if key in data}, problems


# ============================================================================================
# Operator descs
# ============================================================================================
def _as_tensor_desc(value, path: str) -> TensorDesc:
    if not isinstance(value, TensorDesc):
        raise DescriptorError.at(path, f"expected a TensorDesc, got {type(value).__name__}")
    return value


class _OperatorDescBase:
    """Shared by the operator descs: parsing, JSON, validation."""
    OPERATOR_TYPE = ""  # DML_OPERATOR_TYPE without the DML_OPERATOR_ prefix
    _PARSERS: dict = {}
    _OPTIONAL: tuple = ()  # fields a JSON document may leave out (they have defaults)

    def __post_init__(self):
        _parse_dataclass(self)

    def to_dict(self) -> dict:
        data = {"type": self.OPERATOR_TYPE}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, TensorDesc):
                value = value.to_dict()
            elif isinstance(value, enum.Enum):
                value = value.name
            elif isinstance(value, tuple):
                value = list(value)
            data[f.name] = value
        return data

    @classmethod
    def _from_json(cls, data: dict):
        names = [f.name for f in fields(cls)]
        required = ("type",) + tuple(n for n in names if n not in cls._OPTIONAL)
        values, problems = _read_fields(data, "", required=required, optional=cls._OPTIONAL)
        values.pop("type", None)
        parsers = {name: (TensorDesc.from_dict if name.endswith("_tensor") else parse)
                   for name, parse in cls._PARSERS.items()}
        parsed, more = _parse_fields(parsers, values)
        problems += more
        if problems:
            order = ["type"] + names
            head = lambda p: p.field.split(".")[0].split("[")[0]  # noqa: E731
            raise DescriptorError(sorted(problems, key=lambda p: order.index(head(p))
                                         if head(p) in order else len(order)))
        return cls(**parsed)

    def validate(self, feature_level: _LevelArg = DEFAULT_FEATURE_LEVEL) -> list:
        """Every broken rule at ``feature_level`` (see ``tritonml.dml.validate``)."""
        return validate(self, feature_level)


_TENSOR_PARSERS = {"input_tensor": _as_tensor_desc, "output_tensor": _as_tensor_desc}
_SCAN_PARSERS = {**_TENSOR_PARSERS, "axis": _as_int,
                 "axis_direction": lambda v, p: AxisDirection.parse(v, p)}


@dataclass(frozen=True)
class CumulativeSummationOperatorDesc(_OperatorDescBase):
    """DML_CUMULATIVE_SUMMATION_OPERATOR_DESC: running sum of input_tensor along ``axis``."""
    input_tensor: TensorDesc
    output_tensor: TensorDesc
    axis: int
    axis_direction: AxisDirection = AxisDirection.INCREASING
    has_exclusive_sum: bool = False

    OPERATOR_TYPE = "CUMULATIVE_SUMMATION"
    _PARSERS = {**_SCAN_PARSERS, "has_exclusive_sum": _as_bool}
    _OPTIONAL = ("axis_direction", "has_exclusive_sum")

    @property
    def exclusive(self) -> bool:
        return self.has_exclusive_sum


@dataclass(frozen=True)
class CumulativeProductOperatorDesc(_OperatorDescBase):
    """DML_CUMULATIVE_PRODUCT_OPERATOR_DESC: running product of input_tensor along ``axis``."""
    input_tensor: TensorDesc
    output_tensor: TensorDesc
    axis: int
    axis_direction: AxisDirection = AxisDirection.INCREASING
    has_exclusive_product: bool = False

    OPERATOR_TYPE = "CUMULATIVE_PRODUCT"
    _PARSERS = {**_SCAN_PARSERS, "has_exclusive_product": _as_bool}
    _OPTIONAL = ("axis_direction", "has_exclusive_product")

    @property
    def exclusive(self) -> bool:
        return self.has_exclusive_product


@dataclass(frozen=True)
class ReduceOperatorDesc(_OperatorDescBase):
    """DML_REDUCE_OPERATOR_DESC. ``axes`` stands for AxisCount + Axes (``axis_count`` is its length)."""
    function: ReduceFunction
    input_tensor: TensorDesc
    output_tensor: TensorDesc
    axes: tuple

    OPERATOR_TYPE = "REDUCE"
    _PARSERS = {"function": lambda v, p: ReduceFunction.parse(v, p), **_TENSOR_PARSERS,
                "axes": _as_int_tuple}

    @property
    def axis_count(self) -> int:
        return len(self.axes)


_SCAN_DESCS = (CumulativeSummationOperatorDesc, CumulativeProductOperatorDesc)
OperatorDesc = Union[CumulativeSummationOperatorDesc, CumulativeProductOperatorDesc, ReduceOperatorDesc]
_OPERATOR_CLASSES = {cls.OPERATOR_TYPE: cls for cls in _SCAN_DESCS + (ReduceOperatorDesc,)}


# ============================================================================================
# Support tables (transcribed from ../shared/spec; rows are "this level and above", newest first)
# ============================================================================================
@dataclass(frozen=True)
class Support:
    """What an operator (or a reduce function) accepts at a level: dimension counts, input data
    types and output data types (None: the output has the input's type)."""
    since: Optional[FeatureLevel]
    dimension_counts: tuple
    input_types: frozenset
    output_types: Optional[frozenset] = None


def _types(*names) -> frozenset:
    return frozenset(DataType[n] for n in names)


_L = FeatureLevel
_ANY_RANK = tuple(range(1, DIMENSION_COUNT_MAX + 1))
_RANK_4 = (4,)
_F = ("FLOAT32", "FLOAT16")
_ALL_TYPES = frozenset(DataType)
_FLOAT_TYPES = _types("FLOAT32", "FLOAT16", "FLOAT64", "BFLOAT16")
_INDEX_TYPES = _types("INT64", "INT32", "UINT64", "UINT32")
_INDEX_MAX = {DataType.INT32: 2**31 - 1, DataType.UINT32: 2**32 - 1, DataType.INT64: 2**63 - 1,
              DataType.UINT64: 2**64 - 1}

_CUMSUM_TABLE = (  # the summation page's newest edition
    Support(_L.LEVEL_5_0, _ANY_RANK, _types(*_F, "INT64", "INT32", "UINT64", "UINT32")),
    Support(_L.LEVEL_4_0, _ANY_RANK, _types(*_F, "INT32", "UINT32")),
    Support(_L.LEVEL_2_1, _RANK_4, _types(*_F, "INT32", "UINT32")),
)
# The product page prints FLOAT32, FLOAT16, UINT32, UINT16; the summation page's newer edition
# replaced the same row's UINT16 with INT32 (see spec/cumulative_product.md). tritonml accepts the
# union so that neither reading of DirectML's page rejects a descriptor DirectML accepts.
_CUMPROD_TYPES = _types(*_F, "UINT32", "UINT16", "INT32")
_CUMPROD_TABLE = (
    Support(_L.LEVEL_4_0, _ANY_RANK, _CUMPROD_TYPES),
    Support(_L.LEVEL_3_1, _RANK_4, _CUMPROD_TYPES),
)
_ARG_TABLE = (
    Support(_L.LEVEL_4_1, _ANY_RANK, _types(*_F, "INT64", "INT32", "INT16", "INT8", "UINT64", "UINT32",
                                            "UINT16", "UINT8"), _INDEX_TYPES),
    Support(_L.LEVEL_3_0, _ANY_RANK, _types(*_F, "INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8"),
            _INDEX_TYPES),
    Support(_L.LEVEL_2_1, _RANK_4, _types(*_F, "INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8"),
            _types("UINT32")),
    Support(_L.LEVEL_1_0, _RANK_4, _types(*_F), _types("UINT32")),
)
_FLOAT_ONLY_TABLE = (  # AVERAGE, L2, LOG_SUM, LOG_SUM_EXP
    Support(_L.LEVEL_3_0, _ANY_RANK, _types(*_F)),
    Support(_L.LEVEL_1_0, _RANK_4, _types(*_F)),
)
_L1_TABLE = (  # L1, SUM_SQUARE
    Support(_L.LEVEL_5_0, _ANY_RANK, _types(*_F, "INT64", "INT32", "UINT64", "UINT32")),
    Support(_L.LEVEL_3_0, _ANY_RANK, _types(*_F)),
    Support(_L.LEVEL_1_0, _RANK_4, _types(*_F)),
)
_MINMAX_TABLE = (
    Support(_L.LEVEL_5_0, _ANY_RANK, _types(*_F, "INT64", "INT32", "INT16", "INT8", "UINT64", "UINT32",
                                            "UINT16", "UINT8")),
    Support(_L.LEVEL_3_0, _ANY_RANK, _types(*_F, "INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8")),
    Support(_L.LEVEL_2_1, _RANK_4, _types(*_F, "INT32", "UINT32")),
    Support(_L.LEVEL_1_0, _RANK_4, _types(*_F)),
)
_SUM_TABLE = (  # MULTIPLY, SUM
    Support(_L.LEVEL_5_0, _ANY_RANK, _types(*_F, "INT64", "INT32", "UINT64", "UINT32")),
    Support(_L.LEVEL_3_0, _ANY_RANK, _types(*_F, "INT32", "UINT32")),
    Support(_L.LEVEL_2_1, _RANK_4, _types(*_F, "INT32", "UINT32")),
    Support(_L.LEVEL_1_0, _RANK_4, _types(*_F)),
)
_RF = ReduceFunction
_REDUCE_TABLES = {
    _RF.ARGMAX: _ARG_TABLE, _RF.ARGMIN: _ARG_TABLE,
    _RF.AVERAGE: _FLOAT_ONLY_TABLE, _RF.L2: _FLOAT_ONLY_TABLE, _RF.LOG_SUM: _FLOAT_ONLY_TABLE,
    _RF.LOG_SUM_EXP: _FLOAT_ONLY_TABLE,
    _RF.L1: _L1_TABLE, _RF.SUM_SQUARE: _L1_TABLE,
    _RF.MIN: _MINMAX_TABLE, _RF.MAX: _MINMAX_TABLE,
    _RF.MULTIPLY: _SUM_TABLE, _RF.SUM: _SUM_TABLE,
}

# feature_level=None: what tritonml's kernels support (ranks 1 to 8, every dtype they take).
_TRITONML_SCAN = Support(None, _ANY_RANK, _ALL_TYPES)
_TRITONML_REDUCE = {
    function: Support(None, _ANY_RANK,
                      _FLOAT_TYPES if function in (_RF.AVERAGE, _RF.L2, _RF.LOG_SUM, _RF.LOG_SUM_EXP)
                      else _ALL_TYPES,
                      _INDEX_TYPES if function in (_RF.ARGMAX, _RF.ARGMIN) else None)
    for function in ReduceFunction
}

_DML_NAMES = {"CUMULATIVE_SUMMATION": "DML_OPERATOR_CUMULATIVE_SUMMATION",
              "CUMULATIVE_PRODUCT": "DML_OPERATOR_CUMULATIVE_PRODUCT",
              "REDUCE": "DML_OPERATOR_REDUCE"}


def _table_for(operator_type: str, function: Optional[ReduceFunction]):
    if operator_type == "CUMULATIVE_SUMMATION":
        return _CUMSUM_TABLE
    if operator_type == "CUMULATIVE_PRODUCT":
        return _CUMPROD_TABLE
    return _REDUCE_TABLES[function]


def supported(operator_type: str, feature_level: _LevelArg = DEFAULT_FEATURE_LEVEL,
              function: Optional[ReduceFunction] = None) -> Optional[Support]:
    """The support row in force for an operator (and reduce function) at a level; None when the
    operator does not exist at that level. ``feature_level=None``: tritonml's own support."""
    operator_type = _operator_type_name(operator_type)
    if operator_type == "REDUCE":
        if function is None:
            raise ValueError("supported('REDUCE', ...) needs a reduce function")
        function = ReduceFunction.parse(function, "function")
    level = _parse_level(feature_level)
    if level is None:
        return _TRITONML_REDUCE[function] if operator_type == "REDUCE" else _TRITONML_SCAN
    for row in _table_for(operator_type, function):
        if level >= row.since:
            return row
    return None


def _operator_type_name(value) -> str:
    if isinstance(value, type) and value in _OPERATOR_CLASSES.values():
        return value.OPERATOR_TYPE
    key = str(value).strip().upper()
    if key.startswith("DML_OPERATOR_"):
        key = key[len("DML_OPERATOR_"):]
    if key not in _OPERATOR_CLASSES:
        raise DescriptorError.at("type", f"unknown operator type {value!r}; expected one of "
                                         f"{', '.join(_OPERATOR_CLASSES)}")
    return key


def _parse_level(feature_level: _LevelArg) -> Optional[FeatureLevel]:
    return None if feature_level is None else FeatureLevel.parse(feature_level)


def _at_level(level: Optional[FeatureLevel]) -> str:
    return ("under tritonml's own support (feature_level=None)" if level is None
            else f"at feature level {level}")


def _type_list(types: Iterable[DataType]) -> str:
    return ", ".join(t.name for t in sorted(types, key=lambda t: t.value))


# ============================================================================================
# Validation
# ============================================================================================
def _tensor_problems(t: TensorDesc, path: str, *, is_output: bool) -> list:
    """DML_BUFFER_TENSOR_DESC's rules (independent of the feature level)."""
    p = lambda f: _join(path, f)  # noqa: E731
    problems = []
    rank = len(t.sizes)
    if not 1 <= rank <= DIMENSION_COUNT_MAX:
        problems.append(Problem(p("sizes"), f"DimensionCount must be 1 to {DIMENSION_COUNT_MAX} "
                                            f"(DML_TENSOR_DIMENSION_COUNT_MAX1), got {rank}"))
    for i, size in enumerate(t.sizes):
        if size < 1:
            problems.append(Problem(p(f"sizes[{i}]"), f"every size must be at least 1 (DirectML has no "
                                                      f"empty tensors), got {size}"))
        elif size > UINT32_MAX:
            problems.append(Problem(p(f"sizes[{i}]"), f"must fit a UINT (<= {UINT32_MAX}), got {size}"))
    if all(s >= 1 for s in t.sizes) and t.element_count > MAX_ELEMENT_COUNT:
        problems.append(Problem(p("sizes"), f"at most 2^32 - 1 = {MAX_ELEMENT_COUNT} elements, got "
                                            f"{t.element_count}"))
    if t.strides is not None:
        if len(t.strides) != rank:
            problems.append(Problem(p("strides"), f"must have one stride per dimension "
                                                  f"({rank}), got {len(t.strides)}"))
        for i, stride in enumerate(t.strides):
            if stride < 0:
                problems.append(Problem(p(f"strides[{i}]"),
                                        f"strides are unsigned (in elements; 0 broadcasts), so never "
                                        f"negative; got {stride}"))
            elif stride > UINT32_MAX:
                problems.append(Problem(p(f"strides[{i}]"), f"must fit a UINT (<= {UINT32_MAX}), got "
                                                            f"{stride}"))
    total = t.total_tensor_size_in_bytes
    if t._addressing_is_sound():
        minimum = t.minimum_size_in_bytes
        if total is not None and total < minimum:
            problems.append(Problem(p("total_tensor_size_in_bytes"),
                                    f"must be at least DirectML's minimum for these sizes and strides, "
                                    f"{minimum} bytes ((last addressed index {t.last_index} + 1) x "
                                    f"{t.element_size} bytes, rounded up to 4), got {total}"))
    if total is not None and total > UINT64_MAX:
        problems.append(Problem(p("total_tensor_size_in_bytes"), f"must fit a UINT64, got {total}"))
    alignment = t.guaranteed_base_offset_alignment
    if alignment != 0 and (alignment < 0 or alignment & (alignment - 1) or alignment < t.element_size
                           or alignment > UINT32_MAX):
        problems.append(Problem(p("guaranteed_base_offset_alignment"),
                                f"must be 0 (unknown) or a power of two at least the element size "
                                f"({t.element_size} bytes for {t.data_type.name}), got {alignment}"))
    if is_output and t.flags is TensorFlags.OWNED_BY_DML:
        problems.append(Problem(p("flags"), "OWNED_BY_DML applies to input tensors only"))
    if is_output and t._addressing_is_sound():
        problems.extend(_output_overlap_problems(t, path))
    return problems


def _output_overlap_problems(t: TensorDesc, path: str) -> list:
    """tritonml's rule: each output element has its own memory (a stride-0 or self-overlapping
    output would have several elements written to one place; DirectML leaves that undefined)."""
    dims = sorted((st, s, i) for i, (s, st) in enumerate(zip(t.sizes, t.effective_strides)) if s > 1)
    reach = 1  # elements spanned by the dimensions already placed, innermost first
    for stride, size, i in dims:
        if stride < reach:
            rule = ("an output element must have its own memory: stride 0 broadcasts, which only "
                    "inputs may do" if stride == 0 else
                    f"an output element must have its own memory: stride {stride} makes elements of "
                    f"dimension {i} overlap elements of another dimension")
            return [Problem(_join(path, f"strides[{i}]"), rule)]
        reach = stride * (size - 1) + reach
    return []


def _level_problems(desc, level: Optional[FeatureLevel]) -> list:
    """The operator's (and reduce function's) tensor support at ``level``."""
    operator_type = desc.OPERATOR_TYPE
    function = getattr(desc, "function", None)
    row = supported(operator_type, level, function)
    name = _DML_NAMES[operator_type] + (f" with {function.name}" if function is not None else "")
    if row is None:
        since = min(r.since for r in _table_for(operator_type, function))
        return [Problem("feature_level", f"{_DML_NAMES[operator_type]} was introduced in feature "
                                         f"level {since}; not available {_at_level(level)}")]
    problems = []
    dims_text = ("1 to 8" if row.dimension_counts == _ANY_RANK
                 else " or ".join(str(d) for d in row.dimension_counts))
    for tname in ("input_tensor", "output_tensor"):
        tensor = getattr(desc, tname)
        if 1 <= tensor.dimension_count <= DIMENSION_COUNT_MAX and \
                tensor.dimension_count not in row.dimension_counts:
            problems.append(Problem(f"{tname}.sizes",
                                    f"{name} supports {dims_text} dimensions {_at_level(level)}; "
                                    f"got {tensor.dimension_count}"))
    if desc.input_tensor.data_type not in row.input_types:
        problems.append(Problem("input_tensor.data_type",
                                f"{name} {_at_level(level)} supports {_type_list(row.input_types)}; "
                                f"got {desc.input_tensor.data_type.name}"))
    output_types = row.output_types if row.output_types is not None else row.input_types
    if desc.output_tensor.data_type not in output_types:
        problems.append(Problem("output_tensor.data_type",
                                f"{name} {_at_level(level)} outputs {_type_list(output_types)}; "
                                f"got {desc.output_tensor.data_type.name}"))
    return problems


def _shape_problems(desc) -> list:
    """The operator's constraints between its fields (independent of the level)."""
    inp, out = desc.input_tensor, desc.output_tensor
    rank = inp.dimension_count
    problems = []
    if isinstance(desc, _SCAN_DESCS):
        if 1 <= rank and not 0 <= desc.axis < rank:
            problems.append(Problem("axis", f"must be less than input_tensor's DimensionCount ({rank}) "
                                            f"and non-negative (a UINT); got {desc.axis}"))
        if out.data_type is not inp.data_type:
            problems.append(Problem("output_tensor.data_type",
                                    f"must equal input_tensor.data_type ({inp.data_type.name}); got "
                                    f"{out.data_type.name}"))
        expected_sizes = inp.sizes
    else:
        if not desc.axes:
            problems.append(Problem("axes", "at least one axis (AxisCount >= 1); list every axis to "
                                            "reduce the whole tensor"))
        seen = set()
        for i, axis in enumerate(desc.axes):
            if not 0 <= axis < rank:
                problems.append(Problem(f"axes[{i}]", f"must be in [0, {rank - 1}] (input_tensor's "
                                                      f"DimensionCount is {rank}); got {axis}"))
            elif axis in seen:
                problems.append(Problem(f"axes[{i}]", f"axis {axis} is listed twice"))
            seen.add(axis)
        is_arg = desc.function in (ReduceFunction.ARGMAX, ReduceFunction.ARGMIN)
        reduced = math.prod(inp.sizes[a] for a in seen if 0 <= a < rank)
        limit = _INDEX_MAX.get(out.data_type)
        if is_arg and limit is not None and reduced - 1 > limit:
            problems.append(Problem("output_tensor.data_type",
                                    f"{desc.function.name} over {reduced} elements can return index "
                                    f"{reduced - 1}, which {out.data_type.name} cannot hold (at most "
                                    f"{limit})"))
        if not is_arg and out.data_type is not inp.data_type:
            problems.append(Problem("output_tensor.data_type",
                                    f"must equal input_tensor.data_type ({inp.data_type.name}) for "
                                    f"{desc.function.name}; got {out.data_type.name}"))
        expected_sizes = tuple(1 if d in seen else s for d, s in enumerate(inp.sizes))
    if out.dimension_count != rank:
        problems.append(Problem("output_tensor.sizes",
                                f"must have input_tensor's DimensionCount ({rank}"
                                f"{'; the rank is kept' if not isinstance(desc, _SCAN_DESCS) else ''}"
                                f"); got {out.dimension_count}"))
    else:
        for i, (got, want) in enumerate(zip(out.sizes, expected_sizes)):
            if got != want:
                why = ("a reduced axis has size 1" if want == 1 and i in getattr(desc, "axes", ())
                       else "must equal input_tensor.sizes[%d]" % i)
                problems.append(Problem(f"output_tensor.sizes[{i}]",
                                        f"{why}: expected {want}, got {got}"))
    return problems


def validate(desc, feature_level: _LevelArg = DEFAULT_FEATURE_LEVEL) -> list:
    """Every rule ``desc`` breaks at ``feature_level`` as a list of ``Problem`` (empty: valid).

    feature_level: a FeatureLevel (or ``"4_0"``); default: the highest level the operators' pages
    document (5_0); None: tritonml's own, wider support (bfloat16, float64, every integer type the
    kernels take).
    """
    if not isinstance(desc, tuple(_OPERATOR_CLASSES.values())):
        names = ", ".join(c.__name__ for c in _OPERATOR_CLASSES.values())
        raise TypeError(f"desc: expected an operator desc ({names}), got {type(desc).__name__}")
    level = _parse_level(feature_level)
    problems = _level_problems(desc, level)
    problems += _tensor_problems(desc.input_tensor, "input_tensor", is_output=False)
    problems += _tensor_problems(desc.output_tensor, "output_tensor", is_output=True)
    problems += _shape_problems(desc)
    # One problem per (field, rule); keep the first of each in a stable order.
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=_problem_order)


_FIELD_ORDER = ("feature_level", "function", "input_tensor", "output_tensor", "axis", "axes")


def _problem_order(problem: Problem):
    head = problem.field.split(".")[0].split("[")[0]
    return _FIELD_ORDER.index(head) if head in _FIELD_ORDER else len(_FIELD_ORDER)


def check(desc, feature_level: _LevelArg = DEFAULT_FEATURE_LEVEL) -> None:
    """Raise a DescriptorError listing every broken rule (nothing when ``desc`` is valid)."""
    problems = validate(desc, feature_level)
    if problems:
        raise DescriptorError(problems)


# ============================================================================================
# Execution
# ============================================================================================
def _bind(name: str, buffer, desc: TensorDesc) -> torch.Tensor:
    """``buffer`` (raw storage of any dtype) viewed through ``desc``: checks, then one as_strided."""
    if not isinstance(buffer, torch.Tensor):
        raise DescriptorError.at(name, f"expected a torch.Tensor used as a raw buffer, got "
                                       f"{type(buffer).__name__}")
    try:
        _backend.check_device(name, buffer)
    except ValueError as e:
        raise DescriptorError.at(name, str(e).split(": ", 1)[-1]) from None
    if not buffer.is_contiguous():
        raise DescriptorError.at(name, "a buffer is raw storage and must be contiguous; the desc's "
                                       "strides describe the layout")
    nbytes = buffer.numel() * buffer.element_size()
    total = desc.total_tensor_size_in_bytes
    if nbytes < total:
        raise DescriptorError.at(name, f"holds {nbytes} bytes, less than the desc's "
                                       f"total_tensor_size_in_bytes ({total})")
    address = buffer.data_ptr()
    if address % desc.element_size:
        raise DescriptorError.at(name, f"starts at an address that is not a multiple of the element "
                                       f"size ({desc.element_size} bytes for {desc.data_type.name})")
    alignment = desc.guaranteed_base_offset_alignment
    if alignment and address % alignment:
        raise DescriptorError.at(name, f"starts at an address that is not a multiple of the desc's "
                                       f"guaranteed_base_offset_alignment ({alignment})")
    used = (desc.last_index + 1) * desc.element_size
    try:
        typed = buffer.reshape(-1).view(torch.uint8)[:used].view(desc.data_type.torch_dtype)
    except RuntimeError as e:
        raise DescriptorError.at(name, f"cannot be viewed as raw bytes ({e})") from None
    return typed.as_strided(desc.sizes, desc.effective_strides)


def _span(view: torch.Tensor) -> tuple:
    start = view.data_ptr()
    last = sum((s - 1) * st for s, st in zip(view.shape, view.stride()))
    return start, start + (last + 1) * view.element_size()


class CompiledOperator:
    """A validated operator desc, ready to run: ``compiled(input_buffer, output_buffer)``.

    Buffers are torch tensors of any dtype used as raw storage (contiguous, on the device tritonml
    runs on), at least ``total_tensor_size_in_bytes`` long, addressed through the descs' sizes and
    strides. The cumulative operators may run in place (``output_buffer`` is ``input_buffer`` with
    the same layout). Only the elements the output desc addresses are written. Returns
    ``output_buffer``.
    """

    def __init__(self, desc: OperatorDesc, feature_level: Optional[FeatureLevel]):
        self.desc = desc
        self.feature_level = feature_level
        self._reduce = reduce_op if isinstance(desc, ReduceOperatorDesc) else None

    def __repr__(self) -> str:
        level = "None" if self.feature_level is None else str(self.feature_level)
        return f"CompiledOperator({type(self.desc).__name__}, feature_level={level})"

    def __call__(self, input_buffer: torch.Tensor, output_buffer: torch.Tensor) -> torch.Tensor:
        # Buffers are storage, not autograd values: viewing and writing them is outside autograd.
        with torch.no_grad():
            self._execute(input_buffer, output_buffer)
        return output_buffer

    def _execute(self, input_buffer, output_buffer) -> None:
        desc = self.desc
        x = _bind("input_buffer", input_buffer, desc.input_tensor)
        out = _bind("output_buffer", output_buffer, desc.output_tensor)
        if input_buffer.device != output_buffer.device:
            raise DescriptorError.at("output_buffer", f"is on {output_buffer.device} but input_buffer "
                                                      f"is on {input_buffer.device}; both must be on "
                                                      "one device")
        x0, x1 = _span(x)
        o0, o1 = _span(out)
        if x0 < o1 and o0 < x1:
            in_place_ok = isinstance(desc, _SCAN_DESCS) and _layout.same_view(x, out)
            if not in_place_ok:
                rule = ("the output's elements overlap the input's; the output may alias the input "
                        "only exactly (same buffer, same sizes and strides) for in-place execution"
                        if isinstance(desc, _SCAN_DESCS) else
                        "the output's elements overlap the input's; DML_OPERATOR_REDUCE does not run "
                        "in place")
                raise DescriptorError.at("output_buffer", rule)
        if isinstance(desc, ReduceOperatorDesc):
            kwargs = {}
            if desc.function in (ReduceFunction.ARGMAX, ReduceFunction.ARGMIN):
                kwargs["index_dtype"] = desc.output_tensor.data_type.torch_dtype
            self._reduce(x, desc.function.name, list(desc.axes), keepdims=True, out=out, **kwargs)
        else:
            from .ops.scan import PRODUCT, SUM, cumulative_scan
            combine = SUM if isinstance(desc, CumulativeSummationOperatorDesc) else PRODUCT
            cumulative_scan(x, desc.axis, combine,
                            reverse=desc.axis_direction is AxisDirection.DECREASING,
                            exclusive=desc.exclusive, out=out)


def compile_operator(desc: OperatorDesc, feature_level: _LevelArg = DEFAULT_FEATURE_LEVEL
                     ) -> CompiledOperator:
    """Validate ``desc`` at ``feature_level`` (see ``validate``) and return a CompiledOperator.

    Raises DescriptorError listing every broken rule.
    """
    level = _parse_level(feature_level)
    check(desc, level)
    return CompiledOperator(desc, level)


# ============================================================================================
# JSON
# ============================================================================================
def to_dict(desc: OperatorDesc) -> dict:
    """A JSON-compatible dict: ``{"type": "CUMULATIVE_SUMMATION", "input_tensor": {...}, ...}``."""
    return desc.to_dict()


def from_dict(data) -> OperatorDesc:
    """The operator desc a ``to_dict`` dict (or a JSON file's content) describes.

    Raises DescriptorError for a missing, unknown or mistyped field, naming its path. The rules
    themselves are checked by ``validate``/``compile_operator``.
    """
    if not isinstance(data, dict):
        raise DescriptorError.at("(document)", f"expected a JSON object describing an operator, got "
                                               f"{type(data).__name__}")
    if "type" not in data:
        raise DescriptorError.at("type", f"required field is missing (one of "
                                         f"{', '.join(_OPERATOR_CLASSES)})")
    if not isinstance(data["type"], str):
        raise DescriptorError.at("type", f"expected an operator type name, got {data['type']!r}")
    return _OPERATOR_CLASSES[_operator_type_name(data["type"])]._from_json(data)
