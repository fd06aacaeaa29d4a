"""tritonml.dml validation: the tensor-support tables of DirectML's operator pages per feature level,
and every rule failing where it applies and passing where it does not."""
from __future__ import annotations

import pytest

from tritonml import dml
from tritonml.dml import DescriptorError, ReduceOperatorDesc
from tests.dml_helpers import (ALL_TYPE_NAMES, FUNCTION_TABLE, LEVEL_NAMES, PROD, SUM, set_path,
                               spec_row, tensor)

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
                set_path(data, path, value)
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


