"""tritonml.core.layout in plain Python, no kernel run: every canonical layout addresses exactly the
elements of the view it came from, in the same chains and order, checked against an independent
enumeration (itertools over the original shape and strides, and over the canonical sizes and
strides the kernels receive); the padding of ``kernel_args`` is neutral; the 32/64-bit offset
rule never picks 32 bits for a launch whose lanes can form a larger offset.

Strides are generated as views make them (contiguous, permuted, stepped, broadcast with stride
0) and also negative: torch never makes those, but merging is sign-blind arithmetic and is checked
so. Sizes include 0 and 1 (size-1 dims are dropped, size-0 dims empty the view).
"""
from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter

from hypothesis import given, settings, strategies as st

from tritonml.core.layout import (INT32_LIMIT, MAX_OUTER_DIMS, MAX_REDUCED_DIMS, AxisLayout,
                                  ReduceLayout, axis_layout, merge_dims, needs_index_64,
                                  reduce_layout)

FAST = settings(max_examples=150, deadline=None)


def offset(index, strides) -> int:
    return sum(i * s for i, s in zip(index, strides))


def indices(sizes):
    return itertools.product(*(range(s) for s in sizes))


@st.composite
def view_strides(draw, shape, negative: bool = True):
    """Strides a view of ``shape`` could have: a dense layout in some dim order, each dim stepped
    by 1 to 3, some broadcast (0), some (``negative``) reversed."""
    order = draw(st.permutations(range(len(shape))))
    strides, running = [0] * len(shape), 1
    for dim in reversed(order):
        step = draw(st.sampled_from((1, 1, 1, 2, 3)))
        strides[dim] = running * step
        running *= max(shape[dim], 1) * step
    kinds = ("kept", "kept", "kept", "zero", "negative" if negative else "kept")
    for dim in range(len(shape)):
        kind = draw(st.sampled_from(kinds))
        if kind != "kept":
            strides[dim] = 0 if kind == "zero" else -strides[dim]
    return tuple(strides)


sizes = st.sampled_from((0, 1, 1, 2, 3, 4))
shapes = st.lists(sizes, min_size=1, max_size=5).map(tuple)


# ---------------------------------------------------------------------------------------------
# merge_dims
# ---------------------------------------------------------------------------------------------
@FAST
@given(st.data())
def test_merge_dims_addresses_the_same_elements_with_no_size_one_dim_left(data):
    shape = data.draw(shapes)
    columns = list(zip(data.draw(view_strides(shape)), data.draw(view_strides(shape))))
    merged = merge_dims(list(zip(shape, columns)))
    want = Counter(tuple(offset(i, [c[k] for c in columns]) for k in range(2))
                   for i in indices(shape))
    got = Counter(tuple(offset(i, [c[k] for _, c in merged]) for k in range(2))
                  for i in indices([s for s, _ in merged]))
    assert got == want
    assert all(size != 1 for size, _ in merged)
    for (_, outer), (size, inner) in zip(merged, merged[1:]):   # nothing left to merge
        assert not all(o == size * i for o, i in zip(outer, inner)), merged


def test_merge_dims_of_a_contiguous_tensor_is_one_dim():
    shape = (3, 1, 4, 5)
    strides = (20, 20, 5, 1)
    assert merge_dims([(s, (st_,)) for s, st_ in zip(shape, strides)]) == [(60, (1,))]


# ---------------------------------------------------------------------------------------------
# Scans: outer dims x axis x inner
# ---------------------------------------------------------------------------------------------
def original_scan_chains(shape, x_strides, out_strides, axis, init_strides) -> Counter:
    """Each scan of the view: the (x, out) offsets along the axis in order, and the initial's."""
    others = [d for d in range(len(shape)) if d != axis]
    chains = Counter()
    for kept in indices([shape[d] for d in others]):
        chain = []
        for a in range(shape[axis]):
            index = list(kept)
            index.insert(axis, a)
            chain.append((offset(index, x_strides), offset(index, out_strides)))
        init = offset(kept, init_strides) if init_strides is not None else 0
        chains[tuple(chain), init] += 1
    return chains


def canonical_scan_chains(layout: AxisLayout) -> Counter:
    """The same, from the arguments the scan kernels receive (``kernel_args``, padding included)."""
    (axis_len, inner_len, outer_sizes, x_axis, x_inner, x_outer, out_axis, out_inner, out_outer,
     init_inner, init_outer) = layout.kernel_args()
    chains = Counter()
    for outer in indices(outer_sizes):
        for i in range(inner_len):
            x0 = offset(outer, x_outer) + i * x_inner
            out0 = offset(outer, out_outer) + i * out_inner
            chain = tuple((x0 + a * x_axis, out0 + a * out_axis) for a in range(axis_len))
            chains[chain, offset(outer, init_outer) + i * init_inner] += 1
    return chains


@FAST
@given(st.data())
def test_axis_layout_walks_every_scan_of_the_view_in_order(data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    x_strides, out_strides = data.draw(view_strides(shape)), data.draw(view_strides(shape))
    init_strides = None
    if data.draw(st.booleans()):
        init_strides = data.draw(view_strides(shape[:axis] + shape[axis + 1:]))
    layout = axis_layout(shape, x_strides, out_strides, axis, init_strides)
    assert (canonical_scan_chains(layout)
            == original_scan_chains(shape, x_strides, out_strides, axis, init_strides))


@FAST
@given(st.data())
def test_axis_layout_pads_to_neutral_entries_and_finds_the_last_offsets(data):
    shape = data.draw(shapes)
    axis = data.draw(st.integers(0, len(shape) - 1))
    x_strides = data.draw(view_strides(shape, negative=False))
    out_strides = data.draw(view_strides(shape, negative=False))
    init_strides = data.draw(view_strides(shape[:axis] + shape[axis + 1:], negative=False))
    layout = axis_layout(shape, x_strides, out_strides, axis, init_strides)
    outer = (layout.outer_sizes, layout.x_outer_strides, layout.out_outer_strides,
             layout.init_outer_strides)
    assert all(len(entries) == MAX_OUTER_DIMS for entries in outer)
    for size, *strides in zip(*outer):   # merged dims are never 1 long: size 1 is padding
        assert size != 1 or strides == [0, 0, 0]
    assert layout.outer_len * layout.inner_len == math.prod(s for d, s in enumerate(shape)
                                                            if d != axis)
    for last, strides, dims in ((layout.x_last, x_strides, shape),
                                (layout.out_last, out_strides, shape),
                                (layout.init_last, init_strides, shape[:axis] + shape[axis + 1:])):
        assert last == max((offset(i, strides) for i in indices(dims)), default=0)


def test_a_zero_dim_tensor_is_one_scan_of_one_element():
    layout = axis_layout((), (), (), 0)
    assert canonical_scan_chains(layout) == Counter({(((0, 0),), 0): 1})


def test_dims_merge_only_where_they_are_one_dim_in_every_tensor():
    # x contiguous (2, 3, 4); out transposed in its first two dims: those stay apart.
    layout = axis_layout((2, 3, 4), (12, 4, 1), (4, 8, 1), 2)
    assert (layout.inner_len, layout.outer_len) == (3, 2)
    assert axis_layout((2, 3, 4), (12, 4, 1), (12, 4, 1), 2).inner_len == 6


# ---------------------------------------------------------------------------------------------
# Reductions: outer dims x inner x reduced dims
# ---------------------------------------------------------------------------------------------
def original_reductions(shape, x_strides, out_strides, axes, index_order) -> Counter:
    """Each output of the view: its offset, and the x offsets it folds (with their row-major
    index over ``axes`` where the index order matters)."""
    kept = [d for d in range(len(shape)) if d not in axes]
    outputs = Counter()
    for kept_index in indices([shape[d] for d in kept]):
        folded = []
        for flat, reduced_index in enumerate(indices([shape[a] for a in axes])):
            index = [0] * len(shape)
            for d, i in zip(kept, kept_index):
                index[d] = i
            for a, i in zip(axes, reduced_index):
                index[a] = i
            x = offset(index, x_strides)
            folded.append((x, flat) if index_order else x)
        out = offset(kept_index, [out_strides[d] for d in kept])
        outputs[out, tuple(sorted(folded))] += 1
    return outputs


def canonical_reductions(layout: ReduceLayout, index_order) -> Counter:
    (inner_len, outer_sizes, red_sizes, x_inner, x_outer, x_red, red_weights, out_inner,
     out_outer) = layout.kernel_args()
    outputs = Counter()
    for outer in indices(outer_sizes):
        for i in range(inner_len):
            x0 = offset(outer, x_outer) + i * x_inner
            folded = [(x0 + offset(r, x_red), offset(r, red_weights)) if index_order
                      else x0 + offset(r, x_red) for r in indices(red_sizes)]
            outputs[offset(outer, out_outer) + i * out_inner, tuple(sorted(folded))] += 1
    return outputs


@st.composite
def reductions(draw, negative: bool = True, max_rank: int = 6):
    shape = tuple(draw(st.lists(sizes, min_size=1, max_size=max_rank)))
    axes = tuple(sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    return (shape, draw(view_strides(shape, negative)), draw(view_strides(shape, negative)), axes,
            draw(st.booleans()))


@FAST
@given(reductions())
def test_reduce_layout_folds_every_output_of_the_view(case):
    shape, x_strides, out_strides, axes, index_order = case
    layout = reduce_layout(shape, x_strides, out_strides, axes, index_order)
    if layout is None:   # the launcher copies x first: more reduced dims than fit
        assert sum(shape[a] > 1 for a in axes) > MAX_REDUCED_DIMS
        return
    assert layout.red_len == math.prod(shape[a] for a in axes)
    assert 1 <= layout.red_dims <= MAX_REDUCED_DIMS
    assert (canonical_reductions(layout, index_order)
            == original_reductions(shape, x_strides, out_strides, axes, index_order))


@FAST
@given(reductions(negative=False))
def test_reduce_layout_pads_to_neutral_entries_and_finds_the_last_offsets(case):
    shape, x_strides, out_strides, axes, index_order = case
    layout = reduce_layout(shape, x_strides, out_strides, axes, index_order)
    if layout is None:
        return
    assert len(layout.red_sizes) == len(layout.x_red_strides) == len(layout.red_weights) \
        == MAX_REDUCED_DIMS
    padding = MAX_REDUCED_DIMS - layout.red_dims
    assert layout.red_sizes[:padding] == (1,) * padding
    assert layout.x_red_strides[:padding] == layout.red_weights[:padding] == (0,) * padding
    for size, x, out in zip(layout.outer_sizes, layout.x_outer_strides, layout.out_outer_strides):
        assert size != 1 or x == out == 0
    kept = [d for d in range(len(shape)) if d not in axes]
    assert layout.x_last == max((offset(i, x_strides) for i in indices(shape)), default=0)
    assert layout.out_last == max((offset(i, [out_strides[d] for d in kept])
                                   for i in indices([shape[d] for d in kept])), default=0)


def test_more_unmergeable_reduced_dims_than_fit_ask_for_a_copy():
    shape = (2,) * (MAX_REDUCED_DIMS + 1)
    stepped = tuple(4 ** (len(shape) - d) for d in range(len(shape)))   # no two dims merge
    axes = tuple(range(len(shape)))
    assert reduce_layout(shape, stepped, (1,) * len(shape), axes, False) is None
    dense = tuple(2 ** (len(shape) - 1 - d) for d in range(len(shape)))
    assert reduce_layout(shape, dense, (1,) * len(shape), axes, True).red_dims == 1


def _field_names_in_kernel_order(layout) -> list:
    """The field each of ``layout.kernel_args()`` comes from: every field set to a distinct value
    first (ints, or tuples of ints)."""
    marked, name_of = {}, {}
    for n, field in enumerate(dataclasses.fields(layout)):
        value = getattr(layout, field.name)
        marker = (tuple(1000 * n + k for k in range(len(value))) if isinstance(value, tuple)
                  else 1000 * n)
        marked[field.name], name_of[marker] = marker, field.name
    return [name_of[value] for value in dataclasses.replace(layout, **marked).kernel_args()]


def test_kernel_args_come_in_the_order_the_kernels_declare_them():
    from tritonml.kernels.reduce import reduce_kernel
    from tritonml.kernels.scan import scan_tiled_kernel

    reduce_names = _field_names_in_kernel_order(reduce_layout((4, 5), (5, 1), (1, 1), (1,), True))
    start = reduce_kernel.arg_names.index("red_len") + 2   # after red_len, split_len
    assert reduce_kernel.arg_names[start:start + len(reduce_names)] == reduce_names
    # The scan kernels take each stride as a tuple, one entry per state component ("_strides").
    scan_names = _field_names_in_kernel_order(axis_layout((4, 5, 6), (30, 6, 1), (30, 6, 1), 1))
    start = scan_tiled_kernel.arg_names.index("axis_len")
    declared = scan_tiled_kernel.arg_names[start:start + len(scan_names)]
    assert [d if d == n else d.replace("_strides", "_stride") for d, n in
            zip(declared, scan_names)] == scan_names


# ---------------------------------------------------------------------------------------------
# 32- or 64-bit offsets
# ---------------------------------------------------------------------------------------------
def test_the_offset_rule_switches_just_past_int32():
    assert not needs_index_64() and not needs_index_64(0, INT32_LIMIT)
    assert needs_index_64(INT32_LIMIT + 1) and needs_index_64(5, INT32_LIMIT + 1, 7)


pow2 = st.integers(0, 10).map(lambda k: 1 << k)
large_shapes = st.lists(st.sampled_from((1, 3, 1000, 65537, 1 << 20, (1 << 20) + 1)),
                        min_size=1, max_size=4).map(tuple)
# Dense views whose last element lies just inside int32, where only the lanes of a last partial
# tile pass it.
just_inside = st.integers(1, 3000).map(lambda k: INT32_LIMIT + 1 - k)


def dense_strides(shape) -> tuple:
    return tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))


@st.composite
def large_views(draw):
    """(shape, x strides, out strides): large views, or dense ones just inside int32."""
    if draw(st.booleans()):
        shape = draw(large_shapes)
        return shape, draw(view_strides(shape, False)), draw(view_strides(shape, False))
    n = draw(just_inside)
    shape = draw(st.sampled_from(((n,), (2, n // 2), (n // 3, 3), (3, n // 3))))
    return shape, dense_strides(shape), dense_strides(shape)


def _tile_end(length: int, block: int) -> int:
    """The last position a lane of the last tile forms (masked or not)."""
    return -(-length // block) * block - 1


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_scan_keeps_32_bit_offsets_only_when_every_lane_fits(data):
    shape, x_strides, out_strides = data.draw(large_views())
    axis = data.draw(st.integers(0, len(shape) - 1))
    block_axis, block_inner = data.draw(pow2), data.draw(pow2)
    layout = axis_layout(shape, x_strides, out_strides, axis)
    if layout.needs_index_64(block_axis, block_inner):
        return
    for outer, axis_stride, inner in ((layout.x_outer_strides, layout.x_axis_stride,
                                       layout.x_inner_stride),
                                      (layout.out_outer_strides, layout.out_axis_stride,
                                       layout.out_inner_stride)):
        furthest = (sum((s - 1) * st_ for s, st_ in zip(layout.outer_sizes, outer))
                    + _tile_end(layout.axis_len, block_axis) * axis_stride
                    + _tile_end(layout.inner_len, block_inner) * inner)
        assert furthest <= INT32_LIMIT, (shape, axis, layout)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_a_reduction_keeps_32_bit_offsets_only_when_every_lane_fits(data):
    shape, x_strides, out_strides = data.draw(large_views())
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    layout = reduce_layout(shape, x_strides, out_strides, axes, True)
    block_axis, block_inner = data.draw(pow2), data.draw(pow2)
    reach = max(_tile_end(layout.red_len, block_axis) + 1, 0)   # one past the last lane's position
    if layout.needs_index_64(block_inner, reach):
        return
    assert reach <= INT32_LIMIT   # the ARGMAX index
    # the furthest reduced position: past the end the outermost reduced dim (after the padding)
    # runs on
    first = MAX_REDUCED_DIMS - layout.red_dims
    sizes, strides = layout.red_sizes[first:], layout.x_red_strides[first:]
    below = math.prod(sizes[1:])
    position = [(reach - 1) // below] + [s - 1 for s in sizes[1:]] if reach else [0] * len(sizes)
    furthest = (offset(position, strides)
                + sum((s - 1) * st_ for s, st_ in zip(layout.outer_sizes, layout.x_outer_strides))
                + _tile_end(layout.inner_len, block_inner) * layout.x_inner_stride)
    assert furthest <= INT32_LIMIT, (shape, axes, layout)
