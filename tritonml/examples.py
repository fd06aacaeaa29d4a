"""DirectML's documented examples, verbatim, as data: the demo prints them, the tests run them,
the docs show them. Each example names the operator, its parameters, the input and the output
DirectML's documentation of the operator gives."""
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


# DirectML's operator and the word its HasExclusive... flag uses, per tritonml function.
_CUMULATIVE_OPERATORS = {"cumulative_sum": ("DML_CUMULATIVE_SUMMATION_OPERATOR_DESC", "Sum"),
                         "cumulative_product": ("DML_CUMULATIVE_PRODUCT_OPERATOR_DESC", "Product")}


def _cumulative(function: str, axis: int, reverse: bool, exclusive: bool,
                expected: list) -> Example:
    """A cumulative example on CUMULATIVE_INPUT; its title and call text follow from the rest."""
    operator, word = _CUMULATIVE_OPERATORS[function]
    title = (f"Axis {axis}, {'DECREASING' if reverse else 'INCREASING'}, "
             f"HasExclusive{word} {'TRUE' if exclusive else 'FALSE'}")
    kwargs = dict(axis=axis)
    if reverse:
        kwargs["reverse"] = True
    if exclusive:
        kwargs["exclusive"] = True
    call = f"{function}(x, {axis}" + "".join(f", {k}=True" for k in kwargs if k != "axis") + ")"
    return Example(operator, title, call, function, kwargs, CUMULATIVE_INPUT, expected)


# (function, axis, reverse, exclusive, output DirectML gives)
SCAN_EXAMPLES = [_cumulative(*row) for row in (
    ("cumulative_sum", 3, False, False, [[[[2, 3, 6, 11], [3, 11, 18, 21], [9, 15, 17, 21]]]]),
    ("cumulative_sum", 3, False, True, [[[[0, 2, 3, 6], [0, 3, 11, 18], [0, 9, 15, 17]]]]),
    ("cumulative_sum", 3, True, False, [[[[11, 9, 8, 5], [21, 18, 10, 3], [21, 12, 6, 4]]]]),
    ("cumulative_sum", 2, False, False, [[[[2, 1, 3, 5], [5, 9, 10, 8], [14, 15, 12, 12]]]]),
    ("cumulative_product", 3, False, False,
     [[[[2, 2, 6, 30], [3, 24, 168, 504], [9, 54, 108, 432]]]]),
    ("cumulative_product", 3, False, True, [[[[1, 2, 2, 6], [1, 3, 24, 168], [1, 9, 54, 108]]]]),
    ("cumulative_product", 3, True, False,
     [[[[30, 15, 15, 5], [504, 168, 21, 3], [432, 48, 8, 4]]]]),
    ("cumulative_product", 2, False, False, [[[[2, 1, 3, 5], [6, 8, 21, 15], [54, 48, 42, 60]]]]),
)]

# The input of DirectML's three SUM examples: Sizes {3,3}, FLOAT32 (see DirectML's documentation of
# DML_REDUCE_OPERATOR_DESC; the page's comment misprints the last row as 2, 5, 2, but its outputs,
# 21 in all, are for 2, 4, 2).
REDUCE_INPUT = [[1, 2, 3],
                [3, 0, 4],
                [2, 4, 2]]
# The input of the multi-axis ARGMAX example (DML_REDUCE_FUNCTION page): the 5 is at row 2, col 1.
REDUCE_ARGMAX_INPUT = [[1, 2, 3],
                       [3, 0, 4],
                       [2, 5, 2]]


def _reduce(function: str, axes: tuple, input: list, expected: list, **dtypes) -> Example:
    """A DML_REDUCE_OPERATOR_DESC example; the title and call text follow from function and axes."""
    title = f"{function}, Axes {{{','.join(map(str, axes))}}}"
    call = f"reduce(x, '{function}', axes={axes!r})"
    return Example("DML_REDUCE_OPERATOR_DESC", title, call, "reduce",
                   dict(function=function, axes=axes), input, expected, **dtypes)


REDUCE_EXAMPLES = [
    _reduce("SUM", (0,), REDUCE_INPUT, [[6, 6, 9]]),
    _reduce("SUM", (1,), REDUCE_INPUT, [[6], [7], [8]]),
    _reduce("SUM", (0, 1), REDUCE_INPUT, [[21]]),
    _reduce("ARGMAX", (0, 1), REDUCE_ARGMAX_INPUT, [[7]], expected_dtype="int64"),
]



def all_examples() -> list:
    return SCAN_EXAMPLES + REDUCE_EXAMPLES


def run_example(example: Example):
    """Compute ``example`` with tritonml; returns the result tensor (on the CPU)."""
    import torch

    from .core.backend import INTERPRET
    from .torch_ops.reduce import reduce
    from .torch_ops.scan import cumulative_product, cumulative_sum

    x = torch.tensor(example.input, dtype=getattr(torch, example.input_dtype))
    if INTERPRET is False:
        x = x.cuda()
    kwargs = dict(example.kwargs)
    fn = {"cumulative_sum": cumulative_sum, "cumulative_product": cumulative_product,
          "reduce": reduce}[example.function]
    return fn(x, **kwargs).cpu()
