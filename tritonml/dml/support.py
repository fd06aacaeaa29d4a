"""What each operator accepts at each feature level: the "Tensor support" tables of DirectML's
operator pages (DML_CUMULATIVE_SUMMATION_OPERATOR_DESC, DML_CUMULATIVE_PRODUCT_OPERATOR_DESC,
DML_REDUCE_OPERATOR_DESC), and tritonml's own, wider support (``feature_level=None``).

Rows are "this level and above", newest first; ``supported`` picks the row in force.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, Iterable, Optional, Tuple, Union, cast

from ..records.builtin_reductions import RECORDS
from .descs import operator_type_name
from .enums import (DEFAULT_FEATURE_LEVEL, DIMENSION_COUNT_MAX, DataType, FeatureLevel, LevelArg,
                    ReduceFunction, parse_level, parse_reduce_function)


@dataclass(frozen=True)
class Support:
    """What an operator (or a reduce function) accepts at a level: dimension counts, input data
    types and output data types (None: the output has the input's type).

    One row of an operator page's "Tensor support" table (``supported`` returns the row in force).

    Attributes:
        since: The first feature level the row holds at; None for tritonml's own support.
        dimension_counts: The DimensionCounts accepted (``(4,)``, or 1 to 8).
        input_types: The input data types accepted.
        output_types: The output data types accepted; None: the output has the input's type.
    """
    since: Optional[FeatureLevel]
    dimension_counts: Tuple[int, ...]
    input_types: FrozenSet[DataType]
    output_types: Optional[FrozenSet[DataType]] = None


def _types(*names: str) -> FrozenSet[DataType]:
    return frozenset(DataType[n] for n in names)


_L = FeatureLevel
ANY_RANK = tuple(range(1, DIMENSION_COUNT_MAX + 1))
_RANK_4 = (4,)
_F = ("FLOAT32", "FLOAT16")
_ALL_TYPES = frozenset(DataType)
_FLOAT_TYPES = _types("FLOAT32", "FLOAT16", "FLOAT64", "BFLOAT16")
_INDEX_TYPES = _types("INT64", "INT32", "UINT64", "UINT32")

_CUMSUM_TABLE = (  # the summation page's newest edition
    Support(_L.LEVEL_5_0, ANY_RANK, _types(*_F, "INT64", "INT32", "UINT64", "UINT32")),
    Support(_L.LEVEL_4_0, ANY_RANK, _types(*_F, "INT32", "UINT32")),
    Support(_L.LEVEL_2_1, _RANK_4, _types(*_F, "INT32", "UINT32")),
)
# DML_CUMULATIVE_PRODUCT_OPERATOR_DESC's page prints FLOAT32, FLOAT16, UINT32, UINT16; the newer
# edition of DML_CUMULATIVE_SUMMATION_OPERATOR_DESC's page replaced the same row's UINT16 with INT32.
# tritonml accepts the union so that neither reading of DirectML's pages rejects a descriptor
# DirectML accepts.
_CUMPROD_TYPES = _types(*_F, "UINT32", "UINT16", "INT32")
_CUMPROD_TABLE = (
    Support(_L.LEVEL_4_0, ANY_RANK, _CUMPROD_TYPES),
    Support(_L.LEVEL_3_1, _RANK_4, _CUMPROD_TYPES),
)
_ARG_TABLE = (
    Support(_L.LEVEL_4_1, ANY_RANK, _types(*_F, "INT64", "INT32", "INT16", "INT8", "UINT64", "UINT32",
                                           "UINT16", "UINT8"), _INDEX_TYPES),
    Support(_L.LEVEL_3_0, ANY_RANK, _types(*_F, "INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8"),
            _INDEX_TYPES),
    Support(_L.LEVEL_2_1, _RANK_4, _types(*_F, "INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8"),
            _types("UINT32")),
    Support(_L.LEVEL_1_0, _RANK_4, _types(*_F), _types("UINT32")),
)
_FLOAT_ONLY_TABLE = (  # AVERAGE, L2, LOG_SUM, LOG_SUM_EXP
    Support(_L.LEVEL_3_0, ANY_RANK, _types(*_F)),
    Support(_L.LEVEL_1_0, _RANK_4, _types(*_F)),
)
_L1_TABLE = (  # L1, SUM_SQUARE
    Support(_L.LEVEL_5_0, ANY_RANK, _types(*_F, "INT64", "INT32", "UINT64", "UINT32")),
    Support(_L.LEVEL_3_0, ANY_RANK, _types(*_F)),
    Support(_L.LEVEL_1_0, _RANK_4, _types(*_F)),
)
_MINMAX_TABLE = (
    Support(_L.LEVEL_5_0, ANY_RANK, _types(*_F, "INT64", "INT32", "INT16", "INT8", "UINT64", "UINT32",
                                           "UINT16", "UINT8")),
    Support(_L.LEVEL_3_0, ANY_RANK, _types(*_F, "INT32", "INT16", "INT8", "UINT32", "UINT16", "UINT8")),
    Support(_L.LEVEL_2_1, _RANK_4, _types(*_F, "INT32", "UINT32")),
    Support(_L.LEVEL_1_0, _RANK_4, _types(*_F)),
)
_SUM_TABLE = (  # MULTIPLY, SUM
    Support(_L.LEVEL_5_0, ANY_RANK, _types(*_F, "INT64", "INT32", "UINT64", "UINT32")),
    Support(_L.LEVEL_3_0, ANY_RANK, _types(*_F, "INT32", "UINT32")),
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

# feature_level=None: what tritonml's kernels support (ranks 1 to 8, every dtype they take; a
# reduce function's record says whether it takes floats only and returns an index).
_TRITONML_SCAN = Support(None, ANY_RANK, _ALL_TYPES)
_TRITONML_REDUCE = {
    function: Support(None, ANY_RANK, _FLOAT_TYPES if record.float_only else _ALL_TYPES,
                      _INDEX_TYPES if record.returns_index else None)
    for function, record in RECORDS.items()
}

DML_NAMES = {"CUMULATIVE_SUMMATION": "DML_OPERATOR_CUMULATIVE_SUMMATION",
             "CUMULATIVE_PRODUCT": "DML_OPERATOR_CUMULATIVE_PRODUCT",
             "REDUCE": "DML_OPERATOR_REDUCE"}


def table_for(operator_type: str, function: Optional[ReduceFunction]) -> tuple:
    """DirectML's rows for an operator (and reduce function), newest first."""
    if operator_type == "CUMULATIVE_SUMMATION":
        return _CUMSUM_TABLE
    if operator_type == "CUMULATIVE_PRODUCT":
        return _CUMPROD_TABLE
    return _REDUCE_TABLES[cast(ReduceFunction, function)]


def supported(operator_type: Union[str, type], feature_level: LevelArg = DEFAULT_FEATURE_LEVEL,
              function: Union[ReduceFunction, str, None] = None) -> Optional[Support]:
    """The support row in force for an operator (and reduce function) at a level; None when the
    operator does not exist at that level. ``feature_level=None``: tritonml's own support.

    Args:
        operator_type: ``"CUMULATIVE_SUMMATION"``, ``"CUMULATIVE_PRODUCT"`` or ``"REDUCE"`` (any
            case, with or without ``DML_OPERATOR_``), or an operator desc class.
        feature_level: A FeatureLevel, its name (``"4_0"``) or value; None: tritonml's own, wider
            support.
        function: The reduce function (or its name); required for ``"REDUCE"``.

    Returns:
        The Support row, or None when the operator does not exist at that level.

    Raises:
        ValueError: ``"REDUCE"`` without a ``function``.
        DescriptorError: An unknown operator type, feature level or reduce function.

    Example:
        >>> from tritonml.dml import supported
        >>> row = supported("CUMULATIVE_SUMMATION", "4_0")
        >>> row.dimension_counts, sorted(t.name for t in row.input_types)
        ((1, 2, 3, 4, 5, 6, 7, 8), ['FLOAT16', 'FLOAT32', 'INT32', 'UINT32'])
        >>> supported("CUMULATIVE_PRODUCT", "3_0") is None    # introduced in 3_1
        True
        >>> sorted(t.name for t in supported("REDUCE", "2_1", "ARGMAX").output_types)
        ['UINT32']
    """
    operator_type = operator_type_name(operator_type)
    if operator_type == "REDUCE":
        if function is None:
            raise ValueError("supported('REDUCE', ...) needs a reduce function")
        function = parse_reduce_function(function, "function")
    level = parse_level(feature_level)
    if level is None:
        return (_TRITONML_REDUCE[cast(ReduceFunction, function)] if operator_type == "REDUCE"
                else _TRITONML_SCAN)
    for row in table_for(operator_type, cast(Optional[ReduceFunction], function)):
        if level >= row.since:
            return row
    return None


def at_level(level: Optional[FeatureLevel]) -> str:
    """``"at feature level 4_0"``, for messages."""
    return ("under tritonml's own support (feature_level=None)" if level is None
            else f"at feature level {level}")


def type_list(types: Iterable[DataType]) -> str:
    """``"FLOAT32, FLOAT16, ..."`` in directml.h's order, for messages."""
    return ", ".join(t.name for t in sorted(types, key=lambda t: t.value))
