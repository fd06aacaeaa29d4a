"""The reduced-result shape (tritonml/core/shapes.py), in plain Python: no tensors, no kernels."""
import pytest

from tritonml.core.shapes import reduced_axes, reduced_shape, strides_over_input


@pytest.mark.parametrize("shape, axes, keepdims, expected", [
    ((2, 3, 4), (1,), True, (2, 1, 4)),
    ((2, 3, 4), (1,), False, (2, 4)),
    ((2, 3, 4), (0, 2), True, (1, 3, 1)),
    ((2, 3, 4), (0, 2), False, (3,)),
    ((2, 3, 4), None, True, (1, 1, 1)),
    ((2, 3, 4), None, False, ()),
    ((2, 3, 4), (-1,), True, (2, 3, 1)),       # negative axes count from the end
    ((2, 3, 4), (-3, 1), False, (4,)),
    ((5, 0, 2), (1,), False, (5, 2)),          # an empty reduced axis still goes
    ((5, 0, 2), (0,), True, (1, 0, 2)),        # an empty kept axis stays empty
    ((), None, True, ()),                      # 0-d reduces to 0-d either way
    ((), (0,), False, ()),
    ([7], [0], True, (1,)),                    # lists in, a tuple out
])
def test_reduced_shape(shape, axes, keepdims, expected):
    assert reduced_shape(shape, axes, keepdims) == expected


def test_keepdims_is_the_default():
    assert reduced_shape((2, 3), (0,)) == (1, 3)


def test_reduced_axes_normalizes_and_ignores_what_names_no_axis():
    assert reduced_axes(3, None) == {0, 1, 2}
    assert reduced_axes(3, (-1, 0)) == {0, 2}
    assert reduced_axes(3, (3, -4)) == set()   # validation is the caller's (with its message)
    assert reduced_axes(0, None) == set()


@pytest.mark.parametrize("result_strides, rank, axes, keepdims, expected", [
    ((12, 4, 1), 3, (1,), True, (12, 4, 1)),   # kept: one stride per input dim already
    ((4, 1), 3, (1,), False, (4, 0, 1)),       # dropped dims read stride 0
    ((1,), 3, (0, 2), False, (0, 1, 0)),
    ((), 3, None, False, (0, 0, 0)),           # a 0-d result of a full reduction
    ((), 0, (0,), False, (1,)),                # a 0-d input acts as [1]
    ((), 0, (0,), True, (1,)),
])
def test_strides_over_input(result_strides, rank, axes, keepdims, expected):
    assert strides_over_input(result_strides, rank, axes, keepdims) == expected
