"""The rules: ``validate`` lists every rule an operator desc breaks at a feature level (each a
``Problem`` naming its field), ``check`` raises them as one ``DescriptorError``.

Three kinds of rule: DML_BUFFER_TENSOR_DESC's (sizes, strides, buffer size, alignment, flags; the
same at every level), the operator's support at the level (``support``'s tables), and the operator's
constraints between its fields (axis in range, output sizes and data type).
"""
from __future__ import annotations

import math
from typing import List, Optional

from ..core.checks import first_overlapping_dim
from ..core.shapes import reduced_shape
from .descs import OPERATOR_CLASSES, SCAN_DESCS, OperatorDesc, TensorDesc
from .enums import (DEFAULT_FEATURE_LEVEL, DIMENSION_COUNT_MAX, MAX_ELEMENT_COUNT, UINT32_MAX,
                    UINT64_MAX, DataType, FeatureLevel, LevelArg, ReduceFunction, TensorFlags,
                    parse_level)
from .errors import DescriptorError, Problem, join_path
from .support import ANY_RANK, DML_NAMES, at_level, supported, table_for, type_list

# The largest index each ARGMAX/ARGMIN output type holds.
_INDEX_MAX = {DataType.INT32: 2**31 - 1, DataType.UINT32: 2**32 - 1, DataType.INT64: 2**63 - 1,
              DataType.UINT64: 2**64 - 1}


# ============================================================================================
# DML_BUFFER_TENSOR_DESC's rules
# ============================================================================================
def tensor_problems(t: TensorDesc, path: str, *, is_output: bool) -> List[Problem]:
    """DML_BUFFER_TENSOR_DESC's rules (independent of the feature level)."""
    p = lambda f: join_path(path, f)  # noqa: E731
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
    strides = t.effective_strides
    i = first_overlapping_dim(t.sizes, strides)
    if i is None:
        return []
    rule = ("an output element must have its own memory: stride 0 broadcasts, which only inputs may "
            "do" if strides[i] == 0 else
            f"an output element must have its own memory: stride {strides[i]} makes elements of "
            f"dimension {i} overlap elements of another dimension")
    return [Problem(join_path(path, f"strides[{i}]"), rule)]


# ============================================================================================
# The operator's rules
# ============================================================================================
def _level_problems(desc, level: Optional[FeatureLevel]) -> list:
    """The operator's (and reduce function's) tensor support at ``level``."""
    operator_type = desc.OPERATOR_TYPE
    function = getattr(desc, "function", None)
    row = supported(operator_type, level, function)
    name = DML_NAMES[operator_type] + (f" with {function.name}" if function is not None else "")
    if row is None:
        since = min(r.since for r in table_for(operator_type, function))
        return [Problem("feature_level", f"{DML_NAMES[operator_type]} was introduced in feature "
                                         f"level {since}; not available {at_level(level)}")]
    problems = []
    dims_text = ("1 to 8" if row.dimension_counts == ANY_RANK
                 else " or ".join(str(d) for d in row.dimension_counts))
    for tname in ("input_tensor", "output_tensor"):
        tensor = getattr(desc, tname)
        if 1 <= tensor.dimension_count <= DIMENSION_COUNT_MAX and \
                tensor.dimension_count not in row.dimension_counts:
            problems.append(Problem(f"{tname}.sizes",
                                    f"{name} supports {dims_text} dimensions {at_level(level)}; "
                                    f"got {tensor.dimension_count}"))
    if desc.input_tensor.data_type not in row.input_types:
        problems.append(Problem("input_tensor.data_type",
                                f"{name} {at_level(level)} supports {type_list(row.input_types)}; "
                                f"got {desc.input_tensor.data_type.name}"))
    output_types = row.output_types if row.output_types is not None else row.input_types
    if desc.output_tensor.data_type not in output_types:
        problems.append(Problem("output_tensor.data_type",
                                f"{name} {at_level(level)} outputs {type_list(output_types)}; "
                                f"got {desc.output_tensor.data_type.name}"))
    return problems


def _shape_problems(desc) -> list:
    """The operator's constraints between its fields (independent of the level)."""
    inp, out = desc.input_tensor, desc.output_tensor
    rank = inp.dimension_count
    problems = []
    if isinstance(desc, SCAN_DESCS):
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
        expected_sizes = reduced_shape(inp.sizes, [a for a in seen if 0 <= a < rank])
    if out.dimension_count != rank:
        problems.append(Problem("output_tensor.sizes",
                                f"must have input_tensor's DimensionCount ({rank}"
                                f"{'; the rank is kept' if not isinstance(desc, SCAN_DESCS) else ''}"
                                f"); got {out.dimension_count}"))
    else:
        for i, (got, want) in enumerate(zip(out.sizes, expected_sizes)):
            if got != want:
                why = ("a reduced axis has size 1" if want == 1 and i in getattr(desc, "axes", ())
                       else "must equal input_tensor.sizes[%d]" % i)
                problems.append(Problem(f"output_tensor.sizes[{i}]",
                                        f"{why}: expected {want}, got {got}"))
    return problems


# ============================================================================================
# validate / check
# ============================================================================================
def validate(desc: OperatorDesc, feature_level: LevelArg = DEFAULT_FEATURE_LEVEL
             ) -> List[Problem]:
    """Every rule ``desc`` breaks at ``feature_level`` as a list of ``Problem`` (empty: valid).

    Three kinds of rule: DML_BUFFER_TENSOR_DESC's (sizes, strides, buffer size, alignment, flags;
    the same at every level), the operator's support at the level (``supported``), and the
    operator's constraints between its fields (axis in range, output sizes and data type). One
    problem per field and rule, ordered by field.

    Args:
        desc: An operator desc.
        feature_level: A FeatureLevel (or ``"4_0"``); default: the highest level the operators'
            pages document (5_0); None: tritonml's own, wider support (bfloat16, float64, every
            integer type the kernels take).

    Returns:
        Every broken rule, each naming its field (empty: valid).

    Raises:
        TypeError: ``desc`` is not an operator desc.
        DescriptorError: An unknown ``feature_level``.

    Example:
        >>> from tritonml.dml import CumulativeSummationOperatorDesc, TensorDesc, validate
        >>> t = TensorDesc("FLOAT64", [2, 3])
        >>> desc = CumulativeSummationOperatorDesc(t, TensorDesc("FLOAT64", [2, 4]), axis=2)
        >>> for problem in validate(desc, feature_level=None):
        ...     print(problem)
        output_tensor.sizes[1]: must equal input_tensor.sizes[1]: expected 3, got 4
        axis: must be less than input_tensor's DimensionCount (2) and non-negative (a UINT); got 2
        >>> validate(CumulativeSummationOperatorDesc(t, t, axis=1), feature_level=None)
        []
    """
    if not isinstance(desc, tuple(OPERATOR_CLASSES.values())):
        names = ", ".join(c.__name__ for c in OPERATOR_CLASSES.values())
        raise TypeError(f"desc: expected an operator desc ({names}), got {type(desc).__name__}")
    level = parse_level(feature_level)
    problems = _level_problems(desc, level)
    problems += tensor_problems(desc.input_tensor, "input_tensor", is_output=False)
    problems += tensor_problems(desc.output_tensor, "output_tensor", is_output=True)
    problems += _shape_problems(desc)
    # One problem per (field, rule); keep the first of each in a stable order.
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=_problem_order)


_FIELD_ORDER = ("feature_level", "function", "input_tensor", "output_tensor", "axis", "axes")


def _problem_order(problem: Problem):
    head = problem.field.split(".")[0].split("[")[0]
    return _FIELD_ORDER.index(head) if head in _FIELD_ORDER else len(_FIELD_ORDER)


def check(desc: OperatorDesc, feature_level: LevelArg = DEFAULT_FEATURE_LEVEL) -> None:
    """Raise a DescriptorError listing every broken rule (nothing when ``desc`` is valid).

    Args:
        desc: An operator desc.
        feature_level: As for ``validate``.

    Raises:
        DescriptorError: ``validate`` found problems: every one of them, one per line.
        TypeError: ``desc`` is not an operator desc.

    Example:
        >>> from tritonml.dml import (CumulativeSummationOperatorDesc, DescriptorError,
        ...                           TensorDesc, check)
        >>> t = TensorDesc("FLOAT64", [3])
        >>> try:
        ...     check(CumulativeSummationOperatorDesc(t, t, axis=0))   # at 5_0: no FLOAT64
        ... except DescriptorError as error:
        ...     print(error.field)
        input_tensor.data_type
        >>> check(CumulativeSummationOperatorDesc(t, t, axis=0), feature_level=None)
    """
    problems = validate(desc, feature_level)
    if problems:
        raise DescriptorError(problems)
