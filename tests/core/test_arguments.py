"""Argument rules shared by every op: flags, axes, unreadable tensors and out= under autograd.

Each refusal names the parameter and happens before anything runs (the inputs and ``out`` keep
their values)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

import tritonml
from benchmarks.scan_oracle import scan_reference

X = torch.tensor([[2., 1., 3., 5.], [3., 8., 7., 3.]])


def _ops_with_flag(flag):
    """(name, call) for every public op taking ``flag`` as a keyword."""
    return [
        ("cumulative_sum", lambda v: tritonml.cumulative_sum(X, 1, **{flag: v})),
        ("cumulative_product", lambda v: tritonml.cumulative_product(X, 1, **{flag: v})),
    ] if flag != "keepdims" else [("reduce", lambda v: tritonml.reduce(X, "sum", 1, keepdims=v))]


@pytest.mark.parametrize("flag", ["reverse", "exclusive", "keepdims"])
def test_numpy_booleans_are_flags(flag):
    for name, call in _ops_with_flag(flag):
        for value in (True, False):
            assert torch.equal(call(np.bool_(value)), call(value)), (name, value)


@pytest.mark.parametrize("flag", ["reverse", "exclusive", "keepdims"])
@pytest.mark.parametrize("value,type_name", [(1, "int"), (np.int64(0), "numpy.int64"),
                                             ("yes", "str"), (None, "NoneType"),
                                             (torch.tensor(True), "torch.Tensor")])
def test_other_values_are_not_flags_and_the_error_names_the_type(flag, value, type_name):
    for name, call in _ops_with_flag(flag):
        with pytest.raises(TypeError, match=rf"^{flag}: expected a bool, got {type_name} "):
            call(value)


@pytest.mark.parametrize("axis", [True, False, np.bool_(True), torch.tensor(True)])
def test_booleans_are_refused_as_axes_everywhere(axis):
    for call, name in ((lambda: tritonml.cumulative_sum(X, axis), "axis"),
                       (lambda: tritonml.cumulative_product(X, axis), "axis"),
                       (lambda: tritonml.reduce(X, "sum", axis), "axes"),
                       (lambda: tritonml.reduce(X, "sum", (0, axis)), "axes")):
        with pytest.raises(TypeError, match=rf"^{name}: expected an int, got .*booleans are not axes"):
            call()


def test_integer_like_axes_still_work():
    want = scan_reference(X.numpy(), 1, "sum", False, False)
    for axis in (1, np.int64(1), torch.tensor(1), -1):
        np.testing.assert_array_equal(tritonml.cumulative_sum(X, axis).numpy(), want)


def _unreadable():
    """Tensors whose elements are not plain reads of strided memory."""
    dense = torch.tensor([[1., 0.], [0., 2.]])
    with warnings.catch_warnings():  # torch warns that these kinds are beta or deprecated
        warnings.simplefilter("ignore")
        cases = _unreadable_kinds(dense)
    return [pytest.param(t, rule, id=name) for name, t, rule in cases]


def _unreadable_kinds(dense):
    return [
        ("sparse", dense.to_sparse(), "layout torch.sparse_coo"),
        ("sparse_csr", dense.to_sparse_csr(), "layout torch.sparse_csr"),
        ("quantized", torch.quantize_per_tensor(dense, 0.1, 0, torch.quint8), "quantized"),
        ("nested", torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], layout=torch.jagged),
         "nested"),
        ("nested_strided", torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]), "nested"),
        ("zerotensor", torch._efficientzerotensor((2, 2)), "ZeroTensor"),
        ("meta", torch.empty(2, 2, device="meta"), "meta tensors have no data"),
    ]


@pytest.mark.parametrize("tensor,rule", _unreadable())
def test_unreadable_inputs_are_refused_with_a_type_error(tensor, rule):
    # A jagged nested tensor is served along its ragged dim and later ones (docs/segments.md);
    # along its batch dim 0 it is refused, naming the axis.
    error, message = ((ValueError, "^ax(is|es): 0 is the jagged tensor's batch")
                      if getattr(tensor, "layout", None) == torch.jagged
                      else (TypeError, rf"^x: .*{rule}"))
    for call in (lambda: tritonml.cumulative_sum(tensor, 0),
                 lambda: tritonml.cumulative_product(tensor, 0, reverse=True),
                 lambda: tritonml.reduce(tensor, "max", 0)):
        with pytest.raises(error, match=message):
            call()


@pytest.mark.parametrize("tensor,rule", _unreadable())
def test_unreadable_out_is_refused_and_the_input_untouched(tensor, rule):
    x = torch.ones(2, 2)
    with pytest.raises(TypeError, match=rf"^out: .*{rule}"):
        tritonml.cumulative_sum(x, 0, out=tensor)
    assert torch.equal(x, torch.ones(2, 2))


def test_out_requiring_grad_is_refused_as_torch_does():
    x = torch.tensor([1., 2., 3.])
    out = torch.zeros(3, requires_grad=True)
    for call in (lambda: tritonml.cumulative_sum(x, 0, out=out),
                 lambda: tritonml.reduce(x, "sum", 0, out=out[:1])):
        with pytest.raises(RuntimeError, match=r"^out: functions with out=\.\.\. arguments don't "
                                               r"support automatic differentiation"):
            call()
    assert torch.equal(out.detach(), torch.zeros(3))
    with pytest.raises(RuntimeError, match=r"but x requires grad"):
        tritonml.cumulative_sum(x.clone().requires_grad_(), 0, out=torch.zeros(3))


def test_out_requiring_grad_is_written_under_no_grad():
    out = torch.zeros(3, requires_grad=True)
    with torch.no_grad():
        tritonml.cumulative_sum(torch.tensor([1., 2., 3.]), 0, out=out)
    np.testing.assert_array_equal(out.detach().numpy(), [1., 3., 6.])


def test_nan_inf_and_wrap_around_runs_print_no_warnings():
    """numpy warns inside the interpreter on results the operators define; users see none."""
    floats = torch.tensor([[float("nan"), 1e38, 1e38, -float("inf")], [0., 0., 1., float("inf")]])
    ints = torch.tensor([[127, 127, -128, 100]], dtype=torch.int8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sums = tritonml.cumulative_sum(floats, 1)
        tritonml.cumulative_product(floats, 0, reverse=True)
        wrapped = tritonml.cumulative_sum(ints, 1)
        tritonml.cumulative_product(ints, 1, exclusive=True)
        for function in ("sum", "log_sum", "log_sum_exp", "average", "l2", "max", "argmax"):
            tritonml.reduce(floats, function, 1)
            tritonml.reduce(floats[:, :0], function if function != "argmax" else "max", 1)
        tritonml.reduce(ints, "multiply", 1)
    assert sums[0, 0].isnan() and sums[0, 3].isnan() and sums[1, 3].item() == float("inf")
    np.testing.assert_array_equal(wrapped.numpy(), [[127, -2, 126, -30]])
