"""tritonml.dml enums, descs and their JSON form: parsing, buffer sizes, round trips, and errors that
name every mistyped field."""
from __future__ import annotations

import enum
import json
from pathlib import Path

import pytest

import tritonml
from tritonml import dml
from tritonml.dml import DescriptorError, ReduceFunction, ReduceOperatorDesc, TensorDesc
from tests.dml_helpers import DELETE, PROD, SUM, set_path, tensor

DOCS_EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


# ============================================================================================
# ReduceFunction: one enum for tritonml.reduce and the descriptors
# ============================================================================================
def test_reduce_function_accepts_tritonml_enum_members_by_name():
    enum_cls = tritonml.ReduceFunction
    for member in enum_cls:
        assert ReduceFunction.parse(member) is ReduceFunction[member.name]


def test_reduce_function_accepts_members_of_other_enums_by_name():
    """An application's own mirror of DML_REDUCE_FUNCTION works as it is."""
    Mirror = enum.Enum("Mirror", {"LOG_SUM_EXP": 6, "TOTAL": 99})
    assert ReduceFunction.parse(Mirror.LOG_SUM_EXP) is ReduceFunction.LOG_SUM_EXP
    desc = ReduceOperatorDesc(Mirror.LOG_SUM_EXP, tensor("FLOAT32", [3]), tensor("FLOAT32", [1]), [0])
    assert desc.function is ReduceFunction.LOG_SUM_EXP
    with pytest.raises(DescriptorError, match="unknown ReduceFunction 'TOTAL'"):
        ReduceOperatorDesc(Mirror.TOTAL, tensor("FLOAT32", [3]), tensor("FLOAT32", [1]), [0])


def test_reduce_function_is_one_enum_with_directml_h_values():
    assert dml.ReduceFunction is tritonml.ReduceFunction
    assert {m.name: int(m) for m in ReduceFunction} == {
        "ARGMAX": 0, "ARGMIN": 1, "AVERAGE": 2, "L1": 3, "L2": 4, "LOG_SUM": 5, "LOG_SUM_EXP": 6,
        "MAX": 7, "MIN": 8, "MULTIPLY": 9, "SUM": 10, "SUM_SQUARE": 11}
    assert str(ReduceFunction.LOG_SUM_EXP) == "LOG_SUM_EXP"


@pytest.mark.parametrize("spelling", ["sum", " Sum ", "SUM", "DML_REDUCE_FUNCTION_SUM",
                                      "dml_reduce_function_sum", ReduceFunction.SUM])
def test_reduce_function_names_in_any_case_with_or_without_directml_prefix(spelling):
    assert ReduceFunction.parse(spelling) is ReduceFunction.SUM
    desc = ReduceOperatorDesc(spelling, tensor("FLOAT32", [3]), tensor("FLOAT32", [1]), [0])
    assert desc.function is ReduceFunction.SUM


@pytest.mark.parametrize("bad,error,words", [
    (10, TypeError, "expected a ReduceFunction or its name, got int"),
    (None, TypeError, "expected a ReduceFunction or its name, got NoneType"),
    ("TOTAL", ValueError, "'TOTAL' is not a reduce function"),
    ("DML_REDUCE_FUNCTION_", ValueError, "is not a reduce function"),
])
def test_reduce_function_refuses_integers_and_unknown_names(bad, error, words):
    with pytest.raises(error, match=words):
        ReduceFunction.parse(bad)
    with pytest.raises(DescriptorError) as info:     # the same value in a desc: a DescriptorError
        ReduceOperatorDesc(bad, tensor("FLOAT32", [3]), tensor("FLOAT32", [1]), [0])
    assert info.value.field == "function"


# ============================================================================================
# Buffer sizes
# ============================================================================================
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


# ============================================================================================
# JSON
# ============================================================================================
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


@pytest.mark.parametrize("path,value,field,words", [
    ("type", DELETE, "type", "missing"),
    ("type", "CUMULATIVE_SUM", "type", "unknown operator type"),
    ("type", 3, "type", "operator type"),
    ("axis", DELETE, "axis", "missing"),
    ("axis", "3", "axis", "integer"),
    ("axis", 3.0, "axis", "integer"),
    ("axis", True, "axis", "integer"),
    ("axis_direction", "UP", "axis_direction", "unknown AxisDirection"),
    ("axis_direction", 1, "axis_direction", "AxisDirection name"),
    ("has_exclusive_sum", "false", "has_exclusive_sum", "bool"),
    ("has_exclusive_sum", 0, "has_exclusive_sum", "bool"),
    ("has_exclusive_product", True, "has_exclusive_product", "unknown field"),
    ("input_tensor", DELETE, "input_tensor", "missing"),
    ("input_tensor", [1, 2], "input_tensor", "object"),
    ("input_tensor.sizes", DELETE, "input_tensor.sizes", "missing"),
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
    set_path(data, path, value)
    with pytest.raises(DescriptorError) as info:
        dml.from_dict(data)
    assert field in [p.field for p in info.value.problems]
    assert words in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("value,words", [(10, "ReduceFunction name"), ("TOTAL", "unknown ReduceFunction")])
def test_json_reduce_function_must_be_a_known_name(value, words):
    data = {"type": "REDUCE", "function": value, "axes": [0],
            "input_tensor": {"data_type": "FLOAT32", "sizes": [3]},
            "output_tensor": {"data_type": "FLOAT32", "sizes": [1]}}
    with pytest.raises(DescriptorError) as info:
        dml.from_dict(data)
    assert [p.field for p in info.value.problems] == ["function"]
    assert words in str(info.value)


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
