"""DirectML's documented examples, verbatim, as data: the demo prints them, the tests run them,
the docs show them. Each example names the operator, its parameters, the input and the output
the DirectML documentation gives (see ../shared/spec/)."""
from __future__ import annotations

from dataclasses import dataclass, field

# The input every cumulative example on DirectML's pages uses: Sizes {1,1,3,4}, FLOAT32.
CUMULATIVE_INPUT = [[[[2, 1, 3, 5],
                      [3, 8, 7, 3],
                      [9, 6, 2, 4]]]]


@dataclass(frozen=True)
class Example:
    operator: str          # DirectML operator, e.g. "DML_CUMULATIVE_SUMMATION_OPERATOR_DESC"
    title: str             # the parameters in DirectML's words
    call: str              # the equivalent tritonml call, as text
    function: str          # tritonml function name
    kwargs: dict = field(default_factory=dict)
    input: list = field(default_factory=list)
    expected: list = field(default_factory=list)
    input_dtype: str = "float32"
    expected_dtype: str = "float32"


SCAN_EXAMPLES = [
    Example("DML_CUMULATIVE_SUMMATION_OPERATOR_DESC", "Axis 3, INCREASING, HasExclusiveSum FALSE",
            "cumulative_sum(x, 3)", "cumulative_sum", dict(axis=3),
            CUMULATIVE_INPUT, [[[[2, 3, 6, 11], [3, 11, 18, 21], [9, 15, 17, 21]]]]),
    Example("DML_CUMULATIVE_SUMMATION_OPERATOR_DESC", "Axis 3, INCREASING, HasExclusiveSum TRUE",
            "cumulative_sum(x, 3, exclusive=True)", "cumulative_sum", dict(axis=3, exclusive=True),
            CUMULATIVE_INPUT, [[[[0, 2, 3, 6], [0, 3, 11, 18], [0, 9, 15, 17]]]]),
    Example("DML_CUMULATIVE_SUMMATION_OPERATOR_DESC", "Axis 3, DECREASING, HasExclusiveSum FALSE",
            "cumulative_sum(x, 3, reverse=True)", "cumulative_sum", dict(axis=3, reverse=True),
            CUMULATIVE_INPUT, [[[[11, 9, 8, 5], [21, 18, 10, 3], [21, 12, 6, 4]]]]),
    Example("DML_CUMULATIVE_SUMMATION_OPERATOR_DESC", "Axis 2, INCREASING, HasExclusiveSum FALSE",
            "cumulative_sum(x, 2)", "cumulative_sum", dict(axis=2),
            CUMULATIVE_INPUT, [[[[2, 1, 3, 5], [5, 9, 10, 8], [14, 15, 12, 12]]]]),
    Example("DML_CUMULATIVE_PRODUCT_OPERATOR_DESC", "Axis 3, INCREASING, HasExclusiveProduct FALSE",
            "cumulative_product(x, 3)", "cumulative_product", dict(axis=3),
            CUMULATIVE_INPUT, [[[[2, 2, 6, 30], [3, 24, 168, 504], [9, 54, 108, 432]]]]),
    Example("DML_CUMULATIVE_PRODUCT_OPERATOR_DESC", "Axis 3, INCREASING, HasExclusiveProduct TRUE",
            "cumulative_product(x, 3, exclusive=True)", "cumulative_product",
            dict(axis=3, exclusive=True),
            CUMULATIVE_INPUT, [[[[1, 2, 2, 6], [1, 3, 24, 168], [1, 9, 54, 108]]]]),
    Example("DML_CUMULATIVE_PRODUCT_OPERATOR_DESC", "Axis 3, DECREASING, HasExclusiveProduct FALSE",
            "cumulative_product(x, 3, reverse=True)", "cumulative_product", dict(axis=3, reverse=True),
            CUMULATIVE_INPUT, [[[[30, 15, 15, 5], [504, 168, 21, 3], [432, 48, 8, 4]]]]),
    Example("DML_CUMULATIVE_PRODUCT_OPERATOR_DESC", "Axis 2, INCREASING, HasExclusiveProduct FALSE",
            "cumulative_product(x, 2)", "cumulative_product", dict(axis=2),
            CUMULATIVE_INPUT, [[[[2, 1, 3, 5], [6, 8, 21, 15], [54, 48, 42, 60]]]]),
]

# The input of DirectML's three SUM examples: Sizes {3,3}, FLOAT32 (see ../shared/spec/reduce.md; the
# page's comment misprints the last row as 2, 5, 2, but its outputs, 21 in all, are for 2, 4, 2).
REDUCE_INPUT = [[1, 2, 3],
                [3, 0, 4],
                [2, 4, 2]]
# The input of the multi-axis ARGMAX example (DML_REDUCE_FUNCTION page): the 5 is at row 2, col 1.
REDUCE_ARGMAX_INPUT = [[1, 2, 3],
                       [3, 0, 4],
                       [2, 5, 2]]

REDUCE_EXAMPLES = [
    Example("DML_REDUCE_OPERATOR_DESC", "SUM, Axes {0}", "reduce(x, 'SUM', axes=(0,))", "reduce",
            dict(function="SUM", axes=(0,)), REDUCE_INPUT, [[6, 6, 9]]),
    Example("DML_REDUCE_OPERATOR_DESC", "SUM, Axes {1}", "reduce(x, 'SUM', axes=(1,))", "reduce",
            dict(function="SUM", axes=(1,)), REDUCE_INPUT, [[6], [7], [8]]),
    Example("DML_REDUCE_OPERATOR_DESC", "SUM, Axes {0,1}", "reduce(x, 'SUM', axes=(0, 1))", "reduce",
            dict(function="SUM", axes=(0, 1)), REDUCE_INPUT, [[21]]),
    Example("DML_REDUCE_OPERATOR_DESC", "ARGMAX, Axes {0,1}", "reduce(x, 'ARGMAX', axes=(0, 1))",
            "reduce", dict(function="ARGMAX", axes=(0, 1)), REDUCE_ARGMAX_INPUT, [[7]],
            expected_dtype="int64"),
]



def all_examples() -> list:
    return SCAN_EXAMPLES + REDUCE_EXAMPLES


def run_example(example: Example):
    """Compute ``example`` with tritonml; returns the result tensor (on the CPU)."""
    import torch

    import tritonml

    x = torch.tensor(example.input, dtype=getattr(torch, example.input_dtype))
    if tritonml.INTERPRET is False:
        x = x.cuda()
    kwargs = dict(example.kwargs)
    fn = getattr(tritonml, example.function)
    return fn(x, **kwargs).cpu()
