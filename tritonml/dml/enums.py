"""DirectML's enums (names as in directml.h without the prefix, values as in directml.h) and the
limits of DML_BUFFER_TENSOR_DESC.

``ReduceFunction`` is the library's one enum (``tritonml.ReduceFunction``, defined in
``tritonml.records.reduce_function``); descriptor fields read it through ``parse_reduce_function``, which
reports a bad value as a ``DescriptorError`` like every other field.
"""
from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Final, Optional, Type, TypeVar, Union

import torch

if TYPE_CHECKING:
    import numpy

from ..records.reduce_function import ReduceFunction
from .errors import DescriptorError

UINT32_MAX: Final[int] = 2**32 - 1
UINT64_MAX: Final[int] = 2**64 - 1
MAX_ELEMENT_COUNT: Final[int] = 2**32 - 1  # DML_BUFFER_TENSOR_DESC: at most 2^32 - 1 elements
DIMENSION_COUNT_MAX: Final[int] = 8  # DML_TENSOR_DIMENSION_COUNT_MAX1 (feature level 3_0 and later)

_E = TypeVar("_E", bound="_DmlEnum")


def _wrong_type(cls, value) -> str:
    return (f"expected a {cls.__name__} name (one of {cls.names()}), got {type(value).__name__} "
            f"{value!r}")


def _unknown_name(cls, value) -> str:
    return f"unknown {cls.__name__} {value!r}; expected one of {cls.names()}"


class _DmlEnum(enum.IntEnum):
    """Parsing by name: the short name (``FLOAT32``), the directml.h name
    (``DML_TENSOR_DATA_TYPE_FLOAT32``), any case."""

    _dml_prefix: str

    def __init_subclass__(cls, prefix: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dml_prefix = prefix  # directml.h's prefix of every member name

    @classmethod
    def parse(cls: Type[_E], value: object, path: str = "") -> _E:
        """The member ``value`` names: a member, another enum's member of the same name, the short
        name (``"FLOAT32"``) or the directml.h name (``"DML_TENSOR_DATA_TYPE_FLOAT32"``), any case.

        Raises:
            DescriptorError: At ``path``: ``value`` is not a name, or names no member.
        """
        if isinstance(value, cls):
            return value
        if isinstance(value, enum.Enum) and not isinstance(value, bool):
            value = value.name  # another enum's member, by name
        if not isinstance(value, str):
            raise DescriptorError.at(path, _wrong_type(cls, value))
        key = value.strip().upper()
        prefix = cls._dml_prefix
        if prefix and key.startswith(prefix):
            key = key[len(prefix):]
        member = cls.__members__.get(key)
        if member is None:
            raise DescriptorError.at(path, _unknown_name(cls, value))
        return member

    @classmethod
    def names(cls) -> str:
        """The member names, comma-separated (for messages)."""
        return ", ".join(cls.__members__)

    def __str__(self) -> str:
        return self.name


def parse_reduce_function(value: Any, path: str = "function") -> ReduceFunction:
    """A ReduceFunction field: ``ReduceFunction.parse``, its errors reported in this layer's words,
    as a DescriptorError at ``path``."""
    try:
        return ReduceFunction.parse(value, path)
    except TypeError:
        raise DescriptorError.at(path, _wrong_type(ReduceFunction, value)) from None
    except ValueError:
        name = value.name if isinstance(value, enum.Enum) else value
        raise DescriptorError.at(path, _unknown_name(ReduceFunction, name)) from None


class DataType(_DmlEnum, prefix="DML_TENSOR_DATA_TYPE_"):
    """DML_TENSOR_DATA_TYPE: the element type of a tensor desc, with directml.h's values.

    BFLOAT16 is tritonml's extension (DirectML has none): its value is outside directml.h's range,
    and only ``feature_level=None`` accepts it. ``DataType.parse`` reads a member, the short name
    (``"FLOAT32"``) or directml.h's (``"DML_TENSOR_DATA_TYPE_FLOAT32"``), any case, and raises
    ``DescriptorError`` for anything else; ``str(member)`` is its short name.

    Example:
        >>> from tritonml.dml import DataType
        >>> DataType.parse("dml_tensor_data_type_float16")
        <DataType.FLOAT16: 2>
        >>> DataType.FLOAT16.element_size, DataType.FLOAT16.torch_dtype
        (2, torch.float16)
        >>> DataType.from_torch(torch.int32)
        <DataType.INT32: 6>
    """
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

    @property
    def torch_dtype(self) -> torch.dtype:
        """The torch dtype of this type's elements."""
        return _TORCH_DTYPE[self]

    @property
    def element_size(self) -> int:
        """The size of one element in bytes."""
        return _TORCH_DTYPE[self].itemsize

    @property
    def numpy_dtype(self) -> Optional["numpy.dtype[Any]"]:
        """The numpy dtype, or None for BFLOAT16 (numpy has no bfloat16)."""
        import numpy as np
        return None if self is DataType.BFLOAT16 else np.dtype(self.name.lower())

    @classmethod
    def from_torch(cls, dtype: torch.dtype) -> "DataType":
        """The DataType of a torch dtype.

        Raises:
            DescriptorError: At ``data_type``: the dtype has no DataType (complex, bool, float8).
        """
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


class AxisDirection(_DmlEnum, prefix="DML_AXIS_DIRECTION_"):
    """DML_AXIS_DIRECTION: INCREASING scans from index 0, DECREASING from the end.

    Example:
        >>> from tritonml.dml import AxisDirection
        >>> AxisDirection.parse("DML_AXIS_DIRECTION_DECREASING"), int(AxisDirection.DECREASING)
        (<AxisDirection.DECREASING: 1>, 1)
    """
    INCREASING = 0
    DECREASING = 1


class TensorFlags(_DmlEnum, prefix="DML_TENSOR_FLAG_"):
    """DML_TENSOR_FLAGS.

    OWNED_BY_DML (inputs only) tells DirectML the data is bound once at initialization; tritonml
    has no initialization step, so it is accepted and has no effect.

    Example:
        >>> from tritonml.dml import TensorFlags
        >>> TensorFlags.parse("owned_by_dml")
        <TensorFlags.OWNED_BY_DML: 1>
    """
    NONE = 0
    OWNED_BY_DML = 1


class FeatureLevel(_DmlEnum):
    """DML_FEATURE_LEVEL (values from directml.h). ``str(level)`` is DirectML's suffix, ``4_0``.

    5_1 to 6_4 exist in directml.h (DirectML 1.10 to 1.15); they change nothing for these three
    operators: the operators' support tables end with rows that hold for "5_0 and above", so
    validation at 5_1+ equals validation at 5_0. Levels compare in order (``LEVEL_4_0 <
    LEVEL_5_0``).

    Example:
        >>> from tritonml.dml import FeatureLevel
        >>> level = FeatureLevel.parse("4.1")
        >>> level, str(level), hex(level)
        (<FeatureLevel.LEVEL_4_1: 16640>, '4_1', '0x4100')
        >>> FeatureLevel.parse(0x5000) > level
        True
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
    def parse(cls, value: object, path: str = "feature_level") -> "FeatureLevel":
        """A FeatureLevel from a member, ``"4_0"``, ``"4.0"``, ``"DML_FEATURE_LEVEL_4_0"`` or 0x4000.

        Raises:
            DescriptorError: At ``path``: ``value`` names no feature level.
        """
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
        """The levels' suffixes, comma-separated (for messages)."""
        return ", ".join(str(m) for m in cls)

    def __str__(self) -> str:
        return self.name[len("LEVEL_"):]


# The highest level the operators' pages document (their tables end at "5_0 and above").
DEFAULT_FEATURE_LEVEL: Final[FeatureLevel] = FeatureLevel.LEVEL_5_0
"""The feature level ``validate``, ``check``, ``supported`` and ``compile_operator`` use by
default: 5_0, the highest level the operators' pages document (their tables end at "5_0 and
above").

Example:
    >>> from tritonml.dml import DEFAULT_FEATURE_LEVEL
    >>> DEFAULT_FEATURE_LEVEL, str(DEFAULT_FEATURE_LEVEL)
    (<FeatureLevel.LEVEL_5_0: 20480>, '5_0')
"""

LevelArg = Union[FeatureLevel, str, int, None]
"""What a ``feature_level`` argument takes: a FeatureLevel, its name (``"4_0"``), its value
(0x4000), or None for tritonml's own, wider support."""


def parse_level(feature_level: LevelArg) -> Optional[FeatureLevel]:
    """A FeatureLevel, or None (tritonml's own, wider support)."""
    return None if feature_level is None else FeatureLevel.parse(feature_level)
