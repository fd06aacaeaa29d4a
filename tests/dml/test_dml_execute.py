"""tritonml.dml execution: compiled operators on raw buffers, against DirectML's documented outputs
and numpy oracles; buffer binding and its errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from tritonml import dml, examples
from tritonml.dml import AxisDirection, DescriptorError, ReduceOperatorDesc
from tests.dml_helpers import (DEVICE, EXACT_FUNCTIONS, NP_DTYPE, PROD, SUM, assert_matches,
                               assert_untouched_outside, buffer_with, gather, packed, reduce_oracle,
                               scan_oracle, sentinel_buffer, small_values, tensor)


# ============================================================================================
# DirectML's documented examples, through descriptors
# ============================================================================================
@pytest.mark.parametrize("example", examples.SCAN_EXAMPLES, ids=lambda e: f"{e.function}-{e.title}")
def test_documented_scan_examples_through_descriptors(example):
    x = np.asarray(example.input, dtype=np.float32)
    desc_cls = SUM if "SUMMATION" in example.operator else PROD
    flag = "has_exclusive_sum" if desc_cls is SUM else "has_exclusive_product"
    t = tensor("FLOAT32", x.shape)
    desc = desc_cls(t, t, example.kwargs["axis"],
                    AxisDirection.DECREASING if example.kwargs.get("reverse") else AxisDirection.INCREASING,
                    **{flag: example.kwargs.get("exclusive", False)})
    op = dml.compile_operator(desc)                      # default level 5_0
    dml.compile_operator(desc, "2_1" if desc_cls is SUM else "3_1")  # and the level it came in at
    out = sentinel_buffer(t)
    op(buffer_with(t, x), out)
    np.testing.assert_array_equal(gather(out, t), np.asarray(example.expected, dtype=np.float32))


REDUCE_SPEC_INPUT = [[1, 2, 3], [3, 0, 4], [2, 4, 2]]
REDUCE_SPEC_EXAMPLES = [  # DML_REDUCE_OPERATOR_DESC's page, verbatim
    ("SUM", [0], REDUCE_SPEC_INPUT, [1, 3], "FLOAT32", [[6, 6, 9]]),
    ("SUM", [1], REDUCE_SPEC_INPUT, [3, 1], "FLOAT32", [[6], [7], [8]]),
    ("SUM", [0, 1], REDUCE_SPEC_INPUT, [1, 1], "FLOAT32", [[21]]),
    ("ARGMAX", [0, 1], [[1, 2, 3], [3, 0, 4], [2, 5, 2]], [1, 1], "UINT32", [[7]]),
]


@pytest.mark.parametrize("function,axes,x,out_sizes,out_type,expected", REDUCE_SPEC_EXAMPLES)
def test_documented_reduce_examples_through_descriptors(function, axes, x, out_sizes, out_type, expected):
    t_in, t_out = tensor("FLOAT32", [3, 3]), tensor(out_type, out_sizes)
    desc = ReduceOperatorDesc(function, t_in, t_out, axes)
    op = dml.compile_operator(desc, "3_0")  # rank 2 needs 3_0 (1_0 and 2_1 take 4 dimensions)
    out = sentinel_buffer(t_out)
    op(buffer_with(t_in, np.asarray(x, np.float32)), out)
    np.testing.assert_array_equal(gather(out, t_out), np.asarray(expected, NP_DTYPE[out_type]))


@pytest.mark.parametrize("example", examples.REDUCE_EXAMPLES, ids=lambda e: e.title)
def test_reduce_examples_module_through_descriptors(example):
    """tritonml.examples.REDUCE_EXAMPLES (the demo's list), run through descriptors."""
    assert examples.REDUCE_EXAMPLES, "the reduce examples are missing"
    kwargs = dict(example.kwargs)
    function = kwargs.get("function")
    function = getattr(function, "name", function)
    axes = kwargs.get("axes")
    x = np.asarray(example.input, dtype=NP_DTYPE[example.input_dtype.upper()])
    axes = list(range(x.ndim)) if axes is None else ([axes] if isinstance(axes, int) else list(axes))
    expected = np.asarray(example.expected)
    out_type = example.expected_dtype.upper()
    t_in = tensor(example.input_dtype.upper(), x.shape)
    out_sizes = [1 if d in axes else s for d, s in enumerate(x.shape)]
    t_out = tensor(out_type, out_sizes)
    out = sentinel_buffer(t_out)
    dml.compile_operator(ReduceOperatorDesc(str(function).upper(), t_in, t_out, axes), None)(
        buffer_with(t_in, x), out)
    np.testing.assert_array_equal(gather(out, t_out).reshape(expected.shape),
                                  expected.astype(NP_DTYPE[out_type]))


# ============================================================================================
# Layouts: strided, padded, broadcast, offsets, in place
# ============================================================================================
LAYOUTS = {
    # name: (input sizes, input strides, output strides), in elements
    "packed": ([2, 3, 4], None, None),
    "padded": ([2, 3, 4], [20, 6, 1], [40, 12, 2]),               # row and element padding
    "transposed": ([2, 3, 4], [1, 2, 6], [12, 1, 3]),              # column-major in, mixed out
    "broadcast": ([2, 3, 4], [0, 4, 1], [1, 8, 2]),               # input dim 0 broadcast
    "all-broadcast": ([2, 3, 4], [0, 0, 0], None),                # one element fills the tensor
    "inner-broadcast": ([2, 3, 4], [3, 1, 0], [24, 8, 2]),
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("op,dtype,axis,direction,exclusive", [
    (SUM, "FLOAT32", 2, "INCREASING", False),
    (SUM, "INT32", 1, "DECREASING", True),
    (PROD, "FLOAT16", 0, "DECREASING", False),
    (PROD, "UINT32", 2, "INCREASING", True),
])
def test_scan_on_strided_padded_and_broadcast_buffers(layout, op, dtype, axis, direction, exclusive):
    sizes, in_strides, out_strides = LAYOUTS[layout]
    t_in = tensor(dtype, sizes, in_strides)
    # Extra bytes at the end of the output buffer, inside total_tensor_size_in_bytes.
    out_min = dml.calc_buffer_tensor_size(dtype, sizes, out_strides)
    t_out = tensor(dtype, sizes, out_strides, total_tensor_size_in_bytes=out_min + 16)
    flag = "has_exclusive_sum" if op is SUM else "has_exclusive_product"
    desc = op(t_in, t_out, axis, direction, **{flag: exclusive})
    x = small_values(dtype, sizes)
    if in_strides is not None:  # the values a broadcast desc can hold: equal along stride-0 dims
        x = gather(buffer_with(t_in, x), t_in).astype(x.dtype)
    in_buf, out_buf = buffer_with(t_in, x, buffer_dtype=torch.int32), sentinel_buffer(t_out)
    in_before = in_buf.clone()
    dml.compile_operator(desc)(in_buf, out_buf)
    want = scan_oracle(x, axis, op is PROD, direction == "DECREASING", exclusive, dtype)
    assert_matches(gather(out_buf, t_out), want, dtype)
    assert_untouched_outside(out_buf, t_out)
    assert torch.equal(in_buf, in_before), "the input buffer was written"


@pytest.mark.parametrize("dtype", ["FLOAT32", "INT64", "BFLOAT16", "UINT8"])
@pytest.mark.parametrize("op", [SUM, PROD])
def test_scan_in_place_on_one_buffer(op, dtype):
    sizes, strides = [3, 5], [8, 1]   # padded rows, the padding must survive
    t = tensor(dtype, sizes, strides)
    x = small_values(dtype, sizes)
    buf = buffer_with(t, x)
    desc = op(t, t, 1, "DECREASING")
    dml.compile_operator(desc, None)(buf, buf)
    assert_matches(gather(buf, t), scan_oracle(x, 1, op is PROD, True, False, dtype), dtype)
    assert_untouched_outside(buf, t)


def test_scan_in_place_through_two_tensors_sharing_storage():
    """Binding the same memory twice (two tensor objects) is the same in-place execution."""
    t = tensor("FLOAT32", [4, 3], [1, 4])
    x = small_values("FLOAT32", [4, 3])
    buf = buffer_with(t, x, buffer_dtype=torch.float32)
    alias = buf.view(torch.int32)
    dml.compile_operator(SUM(t, t, 0, "INCREASING", True))(buf, alias)
    assert_matches(gather(buf, t), scan_oracle(x, 0, False, False, True, "FLOAT32"), "FLOAT32")


def test_buffers_at_offsets_inside_bigger_tensors():
    """A buffer may be a slice of a bigger allocation (a binding offset), any dtype, any shape."""
    t = tensor("FLOAT16", [2, 4])
    x = small_values("FLOAT16", [2, 4])
    backing = torch.zeros(64, dtype=torch.float16, device=DEVICE)
    backing[8:16] = torch.from_numpy(x.astype(np.float16).reshape(-1)).to(DEVICE)
    out_backing = torch.full((10, 4), -3.0, dtype=torch.float16, device=DEVICE)
    dml.compile_operator(PROD(t, t, 1))(backing[8:], out_backing[2:4])
    got = out_backing.cpu().numpy()
    np.testing.assert_array_equal(got[2:4], scan_oracle(x, 1, True, False, False, "FLOAT16"))
    assert np.all(got[:2] == -3) and np.all(got[4:] == -3)


def test_default_total_size_is_directml_minimum_and_buffer_of_exactly_that_works():
    t = tensor("INT8", [3, 3], [4, 1])         # last index 10 -> 11 bytes -> rounded to 12
    assert t.total_tensor_size_in_bytes == 12
    x = small_values("INT8", [3, 3])
    out = sentinel_buffer(t)
    assert out.numel() == 12
    dml.compile_operator(SUM(t, t, 0), None)(buffer_with(t, x), out)   # INT8: tritonml's support
    assert_matches(gather(out, t), scan_oracle(x, 0, False, False, False, "INT8"), "INT8")
    assert_untouched_outside(out, t)


@pytest.mark.parametrize("function,dtype,out_type,axes", [
    ("SUM", "FLOAT32", "FLOAT32", [1]),
    ("MAX", "INT16", "INT16", [0, 2]),
    ("ARGMIN", "FLOAT16", "INT32", [2]),
    ("ARGMAX", "UINT8", "UINT64", [0, 1]),
    ("L2", "FLOAT32", "FLOAT32", [0, 1, 2]),
    ("LOG_SUM_EXP", "FLOAT16", "FLOAT16", [1]),
])
@pytest.mark.parametrize("layout", ["packed", "padded", "transposed", "broadcast"])
def test_reduce_on_strided_padded_and_broadcast_buffers(function, dtype, out_type, axes, layout):
    sizes, in_strides, _ = LAYOUTS[layout]
    out_sizes = [1 if d in axes else s for d, s in enumerate(sizes)]
    out_strides = [3 * s for s in packed(out_sizes)]  # every output element padded by two
    t_in = tensor(dtype, sizes, in_strides)
    t_out = tensor(out_type, out_sizes, out_strides)
    x = small_values(dtype, sizes)
    if in_strides is not None:
        x = gather(buffer_with(t_in, x), t_in).astype(x.dtype)
    out = sentinel_buffer(t_out)
    dml.compile_operator(ReduceOperatorDesc(function, t_in, t_out, axes))(buffer_with(t_in, x), out)
    want = reduce_oracle(x, function, axes, dtype, out_type)
    assert_matches(gather(out, t_out), want, out_type, exact=function in EXACT_FUNCTIONS)
    assert_untouched_outside(out, t_out)


# Found through this layer (bfloat16 MAX gave -inf, MULTIPLY 0, ARGMAX/ARGMIN an index out of
# range under the interpreter, fixed in the reduce kernels): a regression test.
@pytest.mark.parametrize("function", ("ARGMAX", "ARGMIN", "MAX", "MULTIPLY"))
def test_bfloat16_reduce_through_descriptors(function):
    out_type = "INT64" if function.startswith("ARG") else "BFLOAT16"
    t_in, t_out = tensor("BFLOAT16", [2, 3]), tensor(out_type, [2, 1])
    x = np.array([[1, 2, -1], [1, 1, 2]], dtype=np.float32)
    out = sentinel_buffer(t_out)
    dml.compile_operator(ReduceOperatorDesc(function, t_in, t_out, [1]), None)(buffer_with(t_in, x), out)
    np.testing.assert_array_equal(gather(out, t_out), reduce_oracle(x, function, [1], "BFLOAT16", out_type))


# ============================================================================================
# Buffer errors: clear, naming the buffer, raised before anything is written
# ============================================================================================
def _scan_op(**kw):
    t = tensor("FLOAT32", [2, 3], [4, 1], **kw)
    return t, dml.compile_operator(SUM(t, t, 1))


@pytest.mark.parametrize("case,field,words", [
    ("not-a-tensor", "input_buffer", "torch.Tensor"),
    ("input-too-small", "input_buffer", "total_tensor_size_in_bytes"),
    ("output-too-small", "output_buffer", "total_tensor_size_in_bytes"),
    ("non-contiguous", "input_buffer", "contiguous"),
    ("misaligned-element", "output_buffer", "element size"),
    ("misaligned-guarantee", "input_buffer", "guaranteed_base_offset_alignment"),
    ("wrong-device", "input_buffer", "meta"),
    ("partial-overlap", "output_buffer", "overlap"),
])
def test_bad_buffers_raise_before_anything_is_written(case, field, words):
    t, op = _scan_op(guaranteed_base_offset_alignment=16 if case == "misaligned-guarantee" else 0)
    nbytes = t.total_tensor_size_in_bytes  # 24
    x = torch.arange(64, dtype=torch.float32, device=DEVICE)
    out = torch.full((64,), 7.0, device=DEVICE)
    args = {
        "not-a-tensor": lambda: (np.zeros(8, np.float32), out),
        "input-too-small": lambda: (x[: nbytes // 4 - 1], out),
        "output-too-small": lambda: (x, out[:2]),
        "non-contiguous": lambda: (x[::2], out),
        "misaligned-element": lambda: (x, out.view(torch.uint8)[2:]),
        "misaligned-guarantee": lambda: (x[1:], out),
        "wrong-device": lambda: (torch.empty(64, device="meta"), out),
        "partial-overlap": lambda: (x, x[1:]),
    }[case]()
    before = [a.clone() for a in args if isinstance(a, torch.Tensor) and a.device.type != "meta"]
    with pytest.raises(DescriptorError) as info:
        op(*args)
    assert info.value.field == field
    assert words in str(info.value)
    after = [a for a in args if isinstance(a, torch.Tensor) and a.device.type != "meta"]
    assert all(torch.equal(b, a) for b, a in zip(before, after))


def test_reduce_output_overlapping_its_input_is_an_error():
    t_in, t_out = tensor("FLOAT32", [2, 3]), tensor("FLOAT32", [2, 1])
    op = dml.compile_operator(ReduceOperatorDesc("SUM", t_in, t_out, [1]))
    buf = torch.arange(8, dtype=torch.float32, device=DEVICE)
    before = buf.clone()
    with pytest.raises(DescriptorError) as info:
        op(buf, buf)
    assert info.value.field == "output_buffer" and "in place" in str(info.value)
    assert torch.equal(buf, before)


def _unreadable(kind: str) -> torch.Tensor:
    """A tensor of 8 float32 zeros that torch cannot hand to a kernel as plain strided memory."""
    zeros = torch.zeros(8)
    make = {
        "sparse": lambda: zeros.to_sparse(),
        "quantized": lambda: torch.quantize_per_tensor(zeros, 0.1, 0, torch.qint8),
        "nested": lambda: torch.nested.nested_tensor([torch.zeros(3), torch.zeros(5)]),
        "zero-tensor": lambda: torch._efficientzerotensor(8),
    }[kind]
    with warnings.catch_warnings():  # torch warns that these kinds are beta or deprecated
        warnings.simplefilter("ignore")
        return make()


@pytest.mark.parametrize("field", ["input_buffer", "output_buffer"])
@pytest.mark.parametrize("kind,words", [("sparse", "layout"), ("quantized", "quantized"),
                                        ("nested", "nested"), ("zero-tensor", "ZeroTensor")])
def test_buffers_torch_cannot_hand_to_a_kernel_are_descriptor_errors_naming_the_buffer(kind, words,
                                                                                       field):
    t = tensor("FLOAT32", [2, 4])
    op = dml.compile_operator(SUM(t, t, 1))
    good = torch.zeros(8, device=DEVICE)
    args = (_unreadable(kind), good) if field == "input_buffer" else (good.clone(), _unreadable(kind))
    with pytest.raises(DescriptorError) as info:
        op(*args)
    assert info.value.field == field
    assert words in str(info.value)
    assert torch.equal(good, torch.zeros(8, device=DEVICE))


# ============================================================================================
# Buffers torch flags instead of materializing (the negative bit)
# ============================================================================================
def _negative_view(values, dtype=torch.float32) -> tuple:
    """(memory, view): ``view`` carries torch's negative bit over ``memory``, which holds the
    negation of ``view``'s values."""
    memory = torch.tensor(values, dtype=dtype, device=DEVICE)
    view = memory._neg_view()
    assert view.is_neg() and view.data_ptr() == memory.data_ptr()
    return memory, view


@pytest.mark.parametrize("field", ["input_buffer", "output_buffer"])
@pytest.mark.parametrize("data_type", ["INT32", "UINT8", "FLOAT16"])
def test_a_flagged_buffer_of_another_dtype_is_an_error_naming_the_buffer(field, data_type):
    """Binding reinterprets a buffer's bytes, and a negative-bit buffer's bytes are the negation of
    its values: there is nothing meaningful to reinterpret."""
    t = tensor(data_type, [2, 4])
    op = dml.compile_operator(SUM(t, t, 1), None)
    _, flagged = _negative_view([float(i) for i in range(8)])
    plain = torch.zeros(32, dtype=torch.uint8, device=DEVICE)
    args = (flagged, plain) if field == "input_buffer" else (plain, flagged)
    before = [a.clone() for a in args]
    with pytest.raises(DescriptorError) as info:
        op(*args)
    assert info.value.field == field
    assert "negative bit" in str(info.value) and data_type in str(info.value)
    assert all(torch.equal(b, a) for b, a in zip(before, args))


def test_a_conjugate_flagged_buffer_is_an_error_naming_the_buffer():
    t = tensor("FLOAT32", [4])
    op = dml.compile_operator(SUM(t, t, 0))
    flagged = torch.tensor([1 + 2j, 3 - 1j], device=DEVICE).conj()
    with pytest.raises(DescriptorError) as info:
        op(flagged, torch.zeros(4, device=DEVICE))
    assert info.value.field == "input_buffer" and "conjugate bit" in str(info.value)


@pytest.mark.parametrize("flag_input,flag_output", [(True, False), (False, True), (True, True)])
def test_cumulative_sum_through_flagged_buffers_matches_torch(flag_input, flag_output):
    t = tensor("FLOAT32", [2, 4])
    values = [1.0, -2.0, 3.5, 0.25, -1.0, 4.0, 2.0, -0.5]
    x = _negative_view(values)[1] if flag_input else torch.tensor(values, device=DEVICE)
    memory, out = _negative_view([7.0] * 8) if flag_output else (None, torch.zeros(8, device=DEVICE))
    result = dml.compile_operator(SUM(t, t, 1))(x, out)
    assert result is out and out.is_neg() == flag_output
    want = torch.cumsum(x.view(2, 4), 1)
    torch.testing.assert_close(out.view(2, 4), want, rtol=0, atol=0)
    if flag_output:  # the memory under the flag holds the negation of the result
        torch.testing.assert_close(memory.view(2, 4), -want, rtol=0, atol=0)


@pytest.mark.parametrize("flag_input,flag_output", [(True, False), (False, True), (True, True)])
def test_reduce_sum_through_flagged_buffers_matches_torch(flag_input, flag_output):
    t_in, t_out = tensor("FLOAT32", [2, 4]), tensor("FLOAT32", [2, 1])
    values = [1.0, -2.0, 3.5, 0.25, -1.0, 4.0, 2.0, -0.5]
    x = _negative_view(values)[1] if flag_input else torch.tensor(values, device=DEVICE)
    memory, out = _negative_view([7.0] * 2) if flag_output else (None, torch.zeros(2, device=DEVICE))
    dml.compile_operator(ReduceOperatorDesc("SUM", t_in, t_out, [1]))(x, out)
    want = torch.sum(x.view(2, 4), 1, keepdim=True)
    torch.testing.assert_close(out.view(2, 1), want, rtol=0, atol=0)
    if flag_output:
        torch.testing.assert_close(memory.view(2, 1), -want, rtol=0, atol=0)


def test_cumulative_sum_in_place_on_a_flagged_buffer_matches_torch():
    t = tensor("FLOAT32", [8])
    memory, buf = _negative_view([1.0, 2.0, -3.0, 4.0, 0.5, -1.5, 2.0, 8.0])
    want = torch.cumsum(buf, 0)
    dml.compile_operator(SUM(t, t, 0))(buf, buf)
    torch.testing.assert_close(buf, want, rtol=0, atol=0)
    torch.testing.assert_close(memory, -want, rtol=0, atol=0)
