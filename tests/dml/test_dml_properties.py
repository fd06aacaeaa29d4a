"""tritonml.dml property test: a random descriptor is either rejected with a DescriptorError or, run
on raw buffers, matches numpy (rules written out independently of tritonml.dml)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tritonml import dml
from tritonml.dml import DescriptorError, ReduceOperatorDesc, TensorDesc
from tests.dml_helpers import (ALL_TYPE_NAMES, ANY, EXACT_FUNCTIONS, FUNCTION_TABLE,
                               INDEX_TYPE_NAMES, PROD, SIZE, SUM, assert_matches,
                               assert_untouched_outside, buffer_with, gather, packed, reduce_oracle,
                               scan_oracle, sentinel_buffer, small_values, spec_row)


def _expected_valid(case) -> bool:
    """DirectML's rules, written out independently of tritonml.dml, for what the strategy varies."""
    op, level = case["op"], case["level"]
    t_in, t_out = case["input"], case["output"]
    row = spec_row("REDUCE" if op == "reduce" else op, case.get("function"), level)
    if row is None:
        return False
    dims, ins, outs = row
    for t, is_output in ((t_in, False), (t_out, True)):
        sizes, strides = t["sizes"], t["strides"]
        if not 1 <= len(sizes) <= 8 or any(s < 1 for s in sizes):
            return False
        if strides is not None and (len(strides) != len(sizes) or any(s < 0 for s in strides)):
            return False
        eff = strides if strides is not None else packed(sizes)
        last = sum((s - 1) * st for s, st in zip(sizes, eff))
        minimum = -(-(last + 1) * SIZE[t["type"]] // 4) * 4
        if t["total"] is not None and t["total"] < minimum:
            return False
        align = t["align"]
        if align and (align & (align - 1) or align < SIZE[t["type"]]):
            return False
        if is_output and _self_overlapping(sizes, eff):
            return False
        if len(sizes) not in dims:
            return False
    if t_in["type"] not in ins or t_out["type"] not in (outs or ins):
        return False
    rank = len(t_in["sizes"])
    if len(t_out["sizes"]) != rank:
        return False
    if op == "reduce":
        axes = case["axes"]
        if not axes or len(set(axes)) != len(axes) or not all(0 <= a < rank for a in axes):
            return False
        want = [1 if d in axes else s for d, s in enumerate(t_in["sizes"])]
        if case["function"] not in ("ARGMAX", "ARGMIN") and t_out["type"] != t_in["type"]:
            return False
    else:
        if not 0 <= case["axis"] < rank or t_out["type"] != t_in["type"]:
            return False
        want = t_in["sizes"]
    return list(t_out["sizes"]) == list(want)


def _self_overlapping(sizes, strides) -> bool:
    """Brute force: do two indices address one element?"""
    addresses = [sum(i * s for i, s in zip(index, strides)) for index in np.ndindex(*sizes)]
    return len(set(addresses)) != len(addresses)


@st.composite
def _tensor_fields(draw, sizes, type_name, *, wild_strides, wild_total, wild_align, output):
    """A tensor's JSON-like fields; the ``wild_*`` ones are drawn from a distribution that breaks
    rules (negative or missing strides, short buffers, bad alignments), the others stay valid."""
    kinds = ["none", "packed", "padded", "permuted"] + ([] if output else ["broadcast"])
    if wild_strides:
        kinds += ["broadcast", "random", "negative", "short"]
    kind = draw(st.sampled_from(kinds))
    rank = len(sizes)
    if kind == "none":
        strides = None
    elif kind in ("packed", "padded", "broadcast"):
        strides, step = [], draw(st.integers(1, 2)) if kind == "padded" else 1
        for size in reversed(sizes):
            strides.append(step)
            step = step * max(size, 1) + (draw(st.integers(0, 2)) if kind == "padded" else 0)
        strides = strides[::-1]
        if kind == "broadcast":
            strides = [0 if draw(st.booleans()) else s for s in strides]
    elif kind == "permuted":
        order = draw(st.permutations(range(rank)))
        strides, step = [0] * rank, 1
        for d in reversed(order):
            strides[d] = step
            step *= max(sizes[d], 1)
    elif kind == "random":
        strides = draw(st.lists(st.integers(0, 6), min_size=rank, max_size=rank))
    elif kind == "negative":
        strides = list(packed(sizes))
        strides[draw(st.integers(0, rank - 1))] = -1
    else:
        strides = list(packed(sizes))[1:]
    total = None
    if draw(st.booleans()):
        eff = strides if strides is not None and len(strides) == rank else packed(sizes)
        last = sum((max(s, 1) - 1) * st for s, st in zip(sizes, eff))
        minimum = -(-(last + 1) * SIZE[type_name] // 4) * 4
        total = max(0, minimum + draw(st.integers(-6 if wild_total else 0, 8)))
    aligns = [0, 16, 64, SIZE[type_name]] + ([2, 3, 24, 1] if wild_align else [])
    return dict(type=type_name, sizes=list(sizes), strides=strides, total=total,
                align=draw(st.sampled_from(aligns)))


HYPOTHESIS_LEVELS = [None, "1_0", "2_0", "2_1", "3_0", "3_1", "4_0", "4_1", "5_0", "6_4"]
WILD_FIELDS = ["level", "rank", "sizes", "type", "strides", "total", "align", "axis", "out_sizes",
               "out_type"]


@st.composite
def descriptor_cases(draw):
    """Mostly valid descriptors, each field drawn from a valid distribution, except (about half the
    time) one field, or all of them, drawn from a wild one."""
    wild = draw(st.sampled_from([None] * 6 + WILD_FIELDS + ["all"]))
    w = lambda name: wild in (name, "all")  # noqa: E731
    op = draw(st.sampled_from(["CUMULATIVE_SUMMATION", "CUMULATIVE_PRODUCT"]
                              + ["reduce", "reduce"]))
    function = draw(st.sampled_from(sorted(FUNCTION_TABLE))) if op == "reduce" else None
    operator = "REDUCE" if op == "reduce" else op
    levels = [lv for lv in HYPOTHESIS_LEVELS if w("level") or spec_row(operator, function, lv)]
    level = draw(st.sampled_from(levels))
    dims, ins, outs = spec_row(operator, function, level) or (ANY, set(ALL_TYPE_NAMES), INDEX_TYPE_NAMES)
    rank = draw(st.integers(1, 4) if w("rank") else st.sampled_from([d for d in dims if d <= 4]))
    sizes = draw(st.lists(st.integers(0, 4) if w("sizes") else st.integers(1, 3),
                          min_size=rank, max_size=rank))
    in_type = draw(st.sampled_from(ALL_TYPE_NAMES if w("type") else sorted(ins)))
    case = dict(op=op, level=level, function=function)
    case["input"] = draw(_tensor_fields(sizes, in_type, wild_strides=w("strides"),
                                        wild_total=w("total"), wild_align=w("align"), output=False))
    if op == "reduce":
        axes = draw(st.lists(st.integers(-1, rank), max_size=3) if w("axis") else
                    st.lists(st.integers(0, rank - 1), min_size=1, max_size=rank, unique=True))
        out_sizes = [1 if d in axes else s for d, s in enumerate(sizes)]
        arg = function in ("ARGMAX", "ARGMIN")
        out_type = (draw(st.sampled_from(ALL_TYPE_NAMES)) if w("out_type") else
                    draw(st.sampled_from(sorted(outs or INDEX_TYPE_NAMES))) if arg else in_type)
        case["axes"] = axes
    else:
        out_sizes = list(sizes)
        out_type = draw(st.sampled_from(ALL_TYPE_NAMES)) if w("out_type") else in_type
        case.update(axis=draw(st.integers(-1, rank) if w("axis") else st.integers(0, rank - 1)),
                    reverse=draw(st.booleans()), exclusive=draw(st.booleans()))
    if w("out_sizes"):
        out_sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    case["output"] = draw(_tensor_fields(out_sizes, out_type, wild_strides=w("strides"),
                                         wild_total=w("total"), wild_align=w("align"), output=True))
    case["seed"] = draw(st.integers(0, 2**16))
    return case


def _build(case):
    def desc(t):
        return TensorDesc(t["type"], t["sizes"], t["strides"], t["total"], t["align"])

    t_in, t_out = desc(case["input"]), desc(case["output"])
    if case["op"] == "reduce":
        return ReduceOperatorDesc(case["function"], t_in, t_out, case["axes"])
    op = SUM if case["op"] == "CUMULATIVE_SUMMATION" else PROD
    flag = "has_exclusive_sum" if op is SUM else "has_exclusive_product"
    return op(t_in, t_out, case["axis"], "DECREASING" if case["reverse"] else "INCREASING",
              **{flag: case["exclusive"]})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(descriptor_cases())
def test_random_descriptors_are_rejected_or_match_numpy(case):
    desc = _build(case)
    valid = _expected_valid(case)
    if not valid:
        with pytest.raises(DescriptorError) as info:
            dml.compile_operator(desc, case["level"])
        assert info.value.problems and all(p.field and p.rule for p in info.value.problems)
        return
    op = dml.compile_operator(desc, case["level"])
    t_in, t_out = desc.input_tensor, desc.output_tensor
    x = small_values(t_in.data_type.name, t_in.sizes, np.random.default_rng(case["seed"]))
    in_buf = buffer_with(t_in, x, buffer_dtype=torch.int8)
    x = gather(in_buf, t_in)  # what the (possibly broadcast or overlapping) layout really holds
    out_buf = sentinel_buffer(t_out)
    op(in_buf, out_buf)
    name = t_out.data_type.name
    if case["op"] == "reduce":
        want = reduce_oracle(x, case["function"], case["axes"], t_in.data_type.name, name)
        exact = case["function"] in EXACT_FUNCTIONS
    else:
        want = scan_oracle(x, case["axis"], case["op"] == "CUMULATIVE_PRODUCT", case["reverse"],
                           case["exclusive"], name)
        exact = True
    assert_matches(gather(out_buf, t_out), want, name, exact=exact)
    assert_untouched_outside(out_buf, t_out)
