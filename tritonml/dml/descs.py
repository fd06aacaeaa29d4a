"""The descriptors: ``TensorDesc`` (DML_BUFFER_TENSOR_DESC), the three operator descs, and their
JSON form (``to_dict`` / ``from_dict``).

Descs are plain data, like DirectML's structs: constructing one (or reading one from JSON) checks
only the *shape* of the data (an int where an int belongs, a known enum name); the rules are
``tritonml.dml.validate``'s. The ``validate`` convenience methods import that module when called:
it sits above this one (it reads the descs), so importing it here at load time would be a cycle.
"""
from __future__ import annotations

import enum
import math
import numbers
from dataclasses import dataclass, fields
from typing import (TYPE_CHECKING, Any, Callable, ClassVar, Dict, Iterable, List, Optional,
                    Sequence, Tuple, Union, cast)

import torch

from ..core.layout import last_offset
from .enums import (DEFAULT_FEATURE_LEVEL, AxisDirection, DataType, LevelArg, ReduceFunction,
                    TensorFlags, parse_reduce_function)
from .errors import DescriptorError, Problem, join_path


DataTypeArg = Union[DataType, str, torch.dtype]
"""What a ``data_type`` argument takes: a DataType, its name (``"FLOAT32"``,
``"DML_TENSOR_DATA_TYPE_FLOAT32"``) or a torch dtype."""


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
                parsed[name] = parse(values[name], join_path(prefix, name))
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


def _parse_data_type(value, path: str) -> DataType:
    if isinstance(value, torch.dtype):
        return DataType.from_torch(value)
    return DataType.parse(value, path)


def _read_fields(data, path: str, *, required: Sequence[str], optional: Sequence[str]) -> tuple:
    """The keys of a JSON object: (values present, Problems for missing required and unknown keys)."""
    if not isinstance(data, dict):
        raise DescriptorError.at(path or "(document)",
                                 f"expected an object with fields {', '.join(required)}, got "
                                 f"{type(data).__name__} {data!r}")
    known = list(required) + list(optional)
    problems = [Problem(join_path(path, str(key)), f"unknown field; expected one of {', '.join(known)}")
                for key in data if key not in known]
    problems += [Problem(join_path(path, key), "required field is missing")
                 for key in required if key not in data]
    return {key: data[key] for key in known if key in data}, problems


# ============================================================================================
# Tensor descs
# ============================================================================================
def packed_strides(sizes: Sequence[int]) -> Tuple[int, ...]:
    """Row-major strides (in elements) of a packed tensor: what DirectML assumes without Strides."""
    strides, step = [], 1
    for size in reversed(sizes):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


def calc_buffer_tensor_size(data_type: DataTypeArg, sizes: Sequence[int],
                            strides: Optional[Sequence[int]] = None) -> int:
    """DirectML's DMLCalcBufferTensorSize: the minimum TotalTensorSizeInBytes.

    With strides: (index of the last addressed element + 1) * element size, where the index is
    sum((size_i - 1) * stride_i); without: element count * element size; either way rounded up to
    a multiple of 4 bytes. Sizes must be >= 1 and strides >= 0 (validate checks that).

    Args:
        data_type: A DataType or its name (``"FLOAT16"``).
        sizes: The logical shape.
        strides: Strides in elements; None means packed row-major.

    Returns:
        The minimum buffer size in bytes.

    Raises:
        DescriptorError: At ``data_type``: it names no DataType.

    Example:
        >>> from tritonml.dml import calc_buffer_tensor_size
        >>> calc_buffer_tensor_size("FLOAT16", [3])       # 3 x 2 bytes, rounded up to 8
        8
        >>> calc_buffer_tensor_size("FLOAT32", [2, 3], [4, 1])  # (1*4 + 2*1 + 1) x 4 bytes
        28
    """
    element_size = DataType.parse(data_type, "data_type").element_size
    if strides is None:
        minimum = math.prod(sizes) * element_size
    else:
        minimum = (last_offset(sizes, strides) + 1) * element_size
    return (minimum + 3) & ~3


@dataclass(frozen=True)
class TensorDesc:
    """DML_BUFFER_TENSOR_DESC: how a buffer's bytes hold a tensor.

    Plain data, like DirectML's struct: constructing one checks only the *shape* of the data (an
    int where an int belongs, a known enum name) and converts each field to its stored type; the
    rules (sizes >= 1, strides, buffer size, ...) are ``validate``'s. Frozen.

    Attributes:
        data_type: A DataType (the constructor also takes its name, or a torch dtype).
        sizes: The logical shape, every size >= 1 (the constructor takes any sequence of ints).
        strides: In elements, non-negative, 0 broadcasts; None means packed row-major.
        total_tensor_size_in_bytes: None means DirectML's minimum (``calc_buffer_tensor_size``),
            which is then stored.
        guaranteed_base_offset_alignment: 0 or a power of two >= the element size.
        flags: TensorFlags (or its name).

    Raises:
        DescriptorError: A field of the wrong type or an unknown enum name, naming every such
            field.

    Example:
        >>> from tritonml.dml import TensorDesc
        >>> t = TensorDesc("FLOAT32", [2, 3])
        >>> t.data_type, t.sizes, t.effective_strides, t.total_tensor_size_in_bytes
        (<DataType.FLOAT32: 1>, (2, 3), (3, 1), 24)
        >>> TensorDesc.from_dict(t.to_dict()) == t
        True
    """
    data_type: DataType
    sizes: Tuple[int, ...]
    strides: Optional[Tuple[int, ...]] = None
    total_tensor_size_in_bytes: Optional[int] = None
    guaranteed_base_offset_alignment: int = 0
    flags: TensorFlags = TensorFlags.NONE

    if TYPE_CHECKING:  # the arguments the constructor converts (the dataclass writes __init__)
        def __init__(self, data_type: DataTypeArg, sizes: Sequence[int],
                     strides: Optional[Sequence[int]] = None,
                     total_tensor_size_in_bytes: Optional[int] = None,
                     guaranteed_base_offset_alignment: int = 0,
                     flags: Union[TensorFlags, str] = TensorFlags.NONE) -> None: ...

    _PARSERS: ClassVar[Dict[str, Callable[[Any, str], Any]]] = {
        "data_type": lambda v, p: _parse_data_type(v, p),
        "sizes": _as_int_tuple,
        "strides": _optional(_as_int_tuple),
        "total_tensor_size_in_bytes": _optional(_as_int),
        "guaranteed_base_offset_alignment": _as_int,
        "flags": lambda v, p: TensorFlags.parse(v, p),
    }

    def __post_init__(self) -> None:
        _parse_dataclass(self)
        if self.total_tensor_size_in_bytes is None and self._addressing_is_sound():
            # The default is exactly DirectML's minimum, when the sizes and strides make one.
            _set(self, "total_tensor_size_in_bytes",
                 calc_buffer_tensor_size(self.data_type, self.sizes, self.strides))

    # --- derived values ---
    @property
    def dimension_count(self) -> int:
        """DimensionCount: ``len(sizes)``."""
        return len(self.sizes)

    @property
    def element_count(self) -> int:
        """The number of logical elements: the product of ``sizes``."""
        return math.prod(self.sizes)

    @property
    def element_size(self) -> int:
        """The size of one element in bytes."""
        return self.data_type.element_size

    @property
    def effective_strides(self) -> Tuple[int, ...]:
        """The strides DirectML addresses with: the given ones, or packed row-major."""
        return self.strides if self.strides is not None else packed_strides(self.sizes)

    @property
    def last_index(self) -> int:
        """Index (in elements) of the last element the desc addresses."""
        return last_offset(self.sizes, self.effective_strides)

    @property
    def minimum_size_in_bytes(self) -> int:
        """DirectML's minimum buffer size for these sizes and strides
        (``calc_buffer_tensor_size``)."""
        return calc_buffer_tensor_size(self.data_type, self.sizes, self.strides)

    def _addressing_is_sound(self) -> bool:
        """Sizes and strides that address memory at all (sizes >= 1, one stride >= 0 per size), so
        that a minimum buffer size and an overlap check mean something."""
        return (all(s >= 1 for s in self.sizes)
                and (self.strides is None
                     or (len(self.strides) == len(self.sizes) and all(st >= 0 for st in self.strides))))

    # --- JSON ---
    def to_dict(self) -> Dict[str, Any]:
        """A JSON-compatible dict of the fields (enums by name, tuples as lists)."""
        return {
            "data_type": self.data_type.name,
            "sizes": list(self.sizes),
            "strides": None if self.strides is None else list(self.strides),
            "total_tensor_size_in_bytes": self.total_tensor_size_in_bytes,
            "guaranteed_base_offset_alignment": self.guaranteed_base_offset_alignment,
            "flags": self.flags.name,
        }

    @classmethod
    def from_dict(cls, data: Dict[str, Any], path: str = "") -> "TensorDesc":
        """The TensorDesc a ``to_dict`` dict describes; null optional fields take their defaults.

        Raises:
            DescriptorError: Naming every missing, unknown or mistyped field (under ``path``).
        """
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

    def validate(self, path: str = "", *, is_output: bool = False) -> List[Problem]:
        """The buffer-tensor rules that hold at every feature level (``validate``: operators).

        Args:
            path: The field path to name problems under (``"input_tensor"``).
            is_output: Check the output-only rules too (no OWNED_BY_DML flag, no overlapping
                elements).

        Returns:
            Every broken rule (empty: none).
        """
        from .validate import tensor_problems  # at call time: validate imports this module
        return tensor_problems(self, path, is_output=is_output)


# ============================================================================================
# Operator descs
# ============================================================================================
def _as_tensor_desc(value, path: str) -> TensorDesc:
    if not isinstance(value, TensorDesc):
        raise DescriptorError.at(path, f"expected a TensorDesc, got {type(value).__name__}")
    return value


class _OperatorDescBase:
    """Shared by the operator descs: parsing, JSON, validation."""
    OPERATOR_TYPE: ClassVar[str] = ""  # DML_OPERATOR_TYPE without the DML_OPERATOR_ prefix
    _PARSERS: ClassVar[Dict[str, Callable[[Any, str], Any]]] = {}
    _OPTIONAL: ClassVar[Tuple[str, ...]] = ()  # fields a JSON document may leave out (defaults)
    _EXCLUSIVE_FIELD: ClassVar[str]  # the cumulative descs' exclusive flag
    __dataclass_fields__: ClassVar[Dict[str, Any]]  # every subclass is a dataclass

    def __post_init__(self) -> None:
        _parse_dataclass(self)

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-compatible dict, as ``tritonml.dml.to_dict`` returns."""
        data: Dict[str, Any] = {"type": self.OPERATOR_TYPE}
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
    def _from_json(cls, data: Dict[str, Any]) -> Any:
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

    def validate(self, feature_level: LevelArg = DEFAULT_FEATURE_LEVEL) -> List[Problem]:
        """Every broken rule at ``feature_level`` (see ``tritonml.dml.validate``)."""
        from .validate import validate  # at call time: validate imports this module
        return validate(cast("OperatorDesc", self), feature_level)


_TENSOR_PARSERS = {"input_tensor": _as_tensor_desc, "output_tensor": _as_tensor_desc}
_SCAN_PARSERS = {**_TENSOR_PARSERS, "axis": _as_int,
                 "axis_direction": lambda v, p: AxisDirection.parse(v, p)}


@dataclass(frozen=True)
class _CumulativeOperatorDesc(_OperatorDescBase):
    """The fields DirectML's two cumulative structs share. Each adds its exclusive flag, whose
    name differs (HasExclusiveSum / HasExclusiveProduct) and which users type: a subclass names
    it (``exclusive_field=``) with its ``operator_type=``."""
    input_tensor: TensorDesc
    output_tensor: TensorDesc
    axis: int
    axis_direction: AxisDirection = AxisDirection.INCREASING

    def __init_subclass__(cls, operator_type: str = "", exclusive_field: str = "", **kwargs: Any
                          ) -> None:
        super().__init_subclass__(**kwargs)
        cls.OPERATOR_TYPE = operator_type
        cls._EXCLUSIVE_FIELD = exclusive_field
        cls._PARSERS = {**_SCAN_PARSERS, exclusive_field: _as_bool}
        cls._OPTIONAL = ("axis_direction", exclusive_field)

    @property
    def exclusive(self) -> bool:
        """The exclusive flag (``has_exclusive_sum`` / ``has_exclusive_product``)."""
        return getattr(self, self._EXCLUSIVE_FIELD)


@dataclass(frozen=True)
class CumulativeSummationOperatorDesc(_CumulativeOperatorDesc, operator_type="CUMULATIVE_SUMMATION",
                                      exclusive_field="has_exclusive_sum"):
    """DML_CUMULATIVE_SUMMATION_OPERATOR_DESC: running sum of input_tensor along ``axis``.

    Plain data (frozen); the rules are ``validate``'s, ``compile_operator`` runs it.
    ``CumulativeProductOperatorDesc`` shares its fields (but the exclusive flag) and its errors.

    Attributes:
        input_tensor: The input's TensorDesc.
        output_tensor: The output's TensorDesc (input_tensor's sizes and data type).
        axis: The scanned dimension, in [0, DimensionCount).
        axis_direction: INCREASING scans from index 0, DECREASING from the end (the constructor
            also takes the name).
        has_exclusive_sum: Each output leaves its own element out (the first output is 0).

    Raises:
        DescriptorError: A field of the wrong type or an unknown enum name, naming every such
            field.

    Example:
        >>> import torch
        >>> from tritonml.dml import CumulativeSummationOperatorDesc, TensorDesc, compile_operator
        >>> t = TensorDesc("FLOAT32", [4])
        >>> desc = CumulativeSummationOperatorDesc(t, t, axis=0, has_exclusive_sum=True)
        >>> desc.validate()
        []
        >>> compile_operator(desc)(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.zeros(4))
        tensor([0., 1., 3., 6.])
    """
    has_exclusive_sum: bool = False

    if TYPE_CHECKING:  # the arguments the constructor converts (the dataclass writes __init__)
        def __init__(self, input_tensor: TensorDesc, output_tensor: TensorDesc, axis: int,
                     axis_direction: Union[AxisDirection, str] = AxisDirection.INCREASING,
                     has_exclusive_sum: bool = False) -> None: ...


@dataclass(frozen=True)
class CumulativeProductOperatorDesc(_CumulativeOperatorDesc, operator_type="CUMULATIVE_PRODUCT",
                                    exclusive_field="has_exclusive_product"):
    """DML_CUMULATIVE_PRODUCT_OPERATOR_DESC: running product of input_tensor along ``axis``.

    Plain data (frozen); the rules are ``validate``'s, ``compile_operator`` runs it. Its fields
    (input_tensor, output_tensor, axis, axis_direction) and its errors (DescriptorError) are
    documented on ``CumulativeSummationOperatorDesc``; its exclusive flag is
    ``has_exclusive_product``.

    Attributes:
        has_exclusive_product: Each output leaves its own element out (the first output is 1).

    Example:
        >>> import torch
        >>> from tritonml.dml import CumulativeProductOperatorDesc, TensorDesc, compile_operator
        >>> t = TensorDesc("INT32", [4])
        >>> desc = CumulativeProductOperatorDesc(t, t, axis=0, axis_direction="DECREASING")
        >>> x = torch.tensor([1, 2, 3, 4], dtype=torch.int32)
        >>> compile_operator(desc)(x, torch.zeros(4, dtype=torch.int32))
        tensor([24, 24, 12,  4], dtype=torch.int32)
    """
    has_exclusive_product: bool = False

    # Deliberately the sum's stub again: the exclusive flag's keyword differs per class, so no
    # stub in the shared base can spell the constructor.
    if TYPE_CHECKING:  # the arguments the constructor converts (the dataclass writes __init__)
        def __init__(self, input_tensor: TensorDesc, output_tensor: TensorDesc, axis: int,
                     axis_direction: Union[AxisDirection, str] = AxisDirection.INCREASING,
                     has_exclusive_product: bool = False) -> None: ...


@dataclass(frozen=True)
class ReduceOperatorDesc(_OperatorDescBase):
    """DML_REDUCE_OPERATOR_DESC. ``axes`` stands for AxisCount + Axes (``axis_count`` is its length).

    Plain data (frozen); the rules are ``validate``'s, ``compile_operator`` runs it.

    Attributes:
        function: The ReduceFunction (the constructor also takes its name).
        input_tensor: The input's TensorDesc.
        output_tensor: The output's TensorDesc: input_tensor's DimensionCount, size 1 along each
            reduced axis; input_tensor's data type, or an index type for ARGMAX/ARGMIN.
        axes: The reduced dimensions, each once, at least one (the constructor takes any sequence
            of ints).

    Raises:
        DescriptorError: A field of the wrong type or an unknown enum name, naming every such
            field.

    Example:
        >>> import torch
        >>> from tritonml.dml import ReduceOperatorDesc, TensorDesc, compile_operator
        >>> desc = ReduceOperatorDesc("SUM", TensorDesc("FLOAT32", [2, 3]),
        ...                           TensorDesc("FLOAT32", [2, 1]), axes=[1])
        >>> desc.function.name, desc.axis_count
        ('SUM', 1)
        >>> x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        >>> compile_operator(desc)(x, torch.zeros(2, 1))
        tensor([[ 6.],
                [15.]])
    """
    function: ReduceFunction
    input_tensor: TensorDesc
    output_tensor: TensorDesc
    axes: Tuple[int, ...]

    if TYPE_CHECKING:  # the arguments the constructor converts (the dataclass writes __init__)
        def __init__(self, function: Union[ReduceFunction, str], input_tensor: TensorDesc,
                     output_tensor: TensorDesc, axes: Sequence[int]) -> None: ...

    OPERATOR_TYPE: ClassVar[str] = "REDUCE"
    _PARSERS: ClassVar[Dict[str, Callable[[Any, str], Any]]] = {
        "function": parse_reduce_function, **_TENSOR_PARSERS, "axes": _as_int_tuple}

    @property
    def axis_count(self) -> int:
        """AxisCount: ``len(axes)``."""
        return len(self.axes)


SCAN_DESCS = (CumulativeSummationOperatorDesc, CumulativeProductOperatorDesc)
OperatorDesc = Union[CumulativeSummationOperatorDesc, CumulativeProductOperatorDesc, ReduceOperatorDesc]
OPERATOR_CLASSES = {cls.OPERATOR_TYPE: cls for cls in SCAN_DESCS + (ReduceOperatorDesc,)}


def operator_type_name(value: object) -> str:
    """``"CUMULATIVE_SUMMATION"`` from that name (any case, with or without ``DML_OPERATOR_``) or from
    a desc class; DescriptorError at ``type`` for anything else."""
    if isinstance(value, type) and value in OPERATOR_CLASSES.values():
        return value.OPERATOR_TYPE
    key = str(value).strip().upper()
    if key.startswith("DML_OPERATOR_"):
        key = key[len("DML_OPERATOR_"):]
    if key not in OPERATOR_CLASSES:
        raise DescriptorError.at("type", f"unknown operator type {value!r}; expected one of "
                                         f"{', '.join(OPERATOR_CLASSES)}")
    return key


# ============================================================================================
# JSON
# ============================================================================================
def to_dict(desc: OperatorDesc) -> Dict[str, Any]:
    """A JSON-compatible dict: ``{"type": "CUMULATIVE_SUMMATION", "input_tensor": {...}, ...}``.

    Enums are written by name, tuples as lists; ``from_dict`` reads it back.

    Args:
        desc: An operator desc.

    Returns:
        The dict, ready for ``json.dumps``.

    Example:
        >>> from tritonml.dml import ReduceOperatorDesc, TensorDesc, to_dict
        >>> d = to_dict(ReduceOperatorDesc("MAX", TensorDesc("INT32", [5]),
        ...                                TensorDesc("INT32", [1]), axes=[0]))
        >>> d["type"], d["function"], d["axes"], d["output_tensor"]["sizes"]
        ('REDUCE', 'MAX', [0], [1])
    """
    return desc.to_dict()


def from_dict(data: Dict[str, Any]) -> OperatorDesc:
    """The operator desc a ``to_dict`` dict (or a JSON file's content) describes.

    The rules themselves are checked by ``validate``/``compile_operator``. ``type`` takes the name
    with or without ``DML_OPERATOR_``, any case; optional fields (``axis_direction``, the exclusive
    flag, a tensor's ``strides``, ...) may be left out or null.

    Args:
        data: A JSON object describing an operator.

    Returns:
        A CumulativeSummationOperatorDesc, CumulativeProductOperatorDesc or ReduceOperatorDesc.

    Raises:
        DescriptorError: For a missing, unknown or mistyped field, naming its path.

    Example:
        >>> from tritonml.dml import from_dict
        >>> t = {"data_type": "FLOAT32", "sizes": [3]}
        >>> desc = from_dict({"type": "DML_OPERATOR_CUMULATIVE_PRODUCT", "input_tensor": t,
        ...                   "output_tensor": t, "axis": 0})
        >>> type(desc).__name__, desc.axis_direction, desc.has_exclusive_product
        ('CumulativeProductOperatorDesc', <AxisDirection.INCREASING: 0>, False)
    """
    if not isinstance(data, dict):
        raise DescriptorError.at("(document)", f"expected a JSON object describing an operator, got "
                                               f"{type(data).__name__}")
    if "type" not in data:
        raise DescriptorError.at("type", f"required field is missing (one of "
                                         f"{', '.join(OPERATOR_CLASSES)})")
    if not isinstance(data["type"], str):
        raise DescriptorError.at("type", f"expected an operator type name, got {data['type']!r}")
    return OPERATOR_CLASSES[operator_type_name(data["type"])]._from_json(data)
