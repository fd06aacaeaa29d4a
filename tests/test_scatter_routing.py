"""Routing torch's scatter and index reductions to tritonml (tritonml/routing_scatter.py), under
``use_tritonml`` and under torch's deterministic mode alone (``deterministic_routing``).

Every routed call is compared with torch's own result, computed first with no routing of any
kind (the oracle): dtype, shape, strides and device equal, integers exact, floats within the
dtype's tolerance (the order of summation differs). ``_trace.record`` proves which path ran:
tritonml's kernel launches when routed, none when the call fell through to torch.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import tritonml
from tritonml.routing import deterministic_routing, disable, use_tritonml
from tritonml.runtime import trace as _trace
from tritonml.core import torch_compat as _torch_compat
from tritonml.torch_ops import scatter as _scatter
from tests.timing import limit
from tests.routing_reset import no_routing_after_each_test  # noqa: F401 (autouse)

# torch's own index_reduce (the oracle) warns that it is in beta; the warning is torch's
pytestmark = pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta:UserWarning")

CPU = ("cpu",)
HOW = ("use_tritonml", "deterministic")

# rtol, atol per float dtype: tritonml sums each group in a fixed order, torch in its own
TOLERANCE = {
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (5e-2, 5e-2),
    torch.float32: (1e-5, 1e-5),
    torch.float64: (1e-12, 1e-12),
}
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64,
          torch.int8, torch.int32, torch.int64, torch.uint8)


def mode_count() -> int:
    """How many torch function modes this thread has (routing's, when installed)."""
    return _torch_compat.function_mode_count()  # pyright: ignore[reportOptionalCall]


def values(shape, dtype, seed):
    """Floats in [-2, 2) (products stay in range); integers over int8's whole range, so sums and
    products wrap; uint8 over its own."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * 4 - 2).to(dtype)
    low, high = (0, 256) if dtype == torch.uint8 else (-128, 128)
    return torch.randint(low, high, shape, generator=g, dtype=dtype)


def assert_same(got, want):
    assert type(got) is type(want)
    assert (got.dtype, got.shape, got.device) == (want.dtype, want.shape, want.device)
    assert got.stride() == want.stride() or got.numel() <= 1
    if want.dtype.is_floating_point:
        rtol, atol = TOLERANCE[want.dtype]
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, want), (got, want)


def outcome(call, inputs):
    """(result, None) or (None, exception) of call on fresh copies of inputs, and the inputs as
    the call left them."""
    inputs = [t.clone() if isinstance(t, torch.Tensor) else t for t in inputs]
    try:
        return call(*inputs), None, inputs
    except Exception as e:  # noqa: BLE001  (the test compares torch's error with the routed one)
        return None, e, inputs


def routed(call, inputs, how):
    """call with routing on, ``how``: under use_tritonml, or under deterministic mode alone.
    (result, exception, inputs after the call, number of launches)."""
    if how == "use_tritonml":
        with use_tritonml(CPU), _trace.record() as rec:
            result, error, after = outcome(call, inputs)
    else:
        deterministic_routing(True, devices=CPU)
        torch.use_deterministic_algorithms(True)
        try:
            with _trace.record() as rec:
                result, error, after = outcome(call, inputs)
        finally:
            torch.use_deterministic_algorithms(False)
    return result, error, after, len(rec.launches)


def check_routed(call, inputs, how, launches_expected=True):
    """torch's result (and what it left in the inputs) equals the routed one, which launched
    tritonml's kernels (unless there was nothing to reduce)."""
    want, want_error, want_after = outcome(call, inputs)
    got, got_error, got_after, launches = routed(call, inputs, how)
    assert want_error is None, want_error
    assert got_error is None, got_error
    assert_same(got, want)
    for g, w in zip(got_after, want_after):
        if isinstance(w, torch.Tensor):
            assert_same(g, w)
    assert (launches > 0) == launches_expected
    return got, got_after


def check_falls_through(call, inputs, how="use_tritonml", checks_launch=0):
    """Routing on, torch's own kernel runs: no launch (``checks_launch``: but the launches of
    tritonml's index check, a read-only reduction), torch's result or its own error."""
    want, want_error, _ = outcome(call, inputs)
    got, got_error, _, launches = routed(call, inputs, how)
    assert launches <= checks_launch
    if want_error is not None:
        assert type(got_error) is type(want_error) and str(got_error) == str(want_error)
    else:
        assert got_error is None, got_error
        assert_same(got, want)


# -- inputs: duplicate indices, an empty group, src larger than the index ----------------------

def scatter_inputs(dtype, seed=0):
    """input (3, 5), a dim-1 index (2, 4) with repeats that leaves column 3 empty, src (3, 6)."""
    index = torch.tensor([[0, 4, 0, 2], [1, 1, 1, 4]])
    return values((3, 5), dtype, seed), index, values((3, 6), dtype, seed + 1)


def index_inputs(dtype, seed=0):
    """input (5, 3), a 1-D index with repeats that leaves row 1 empty, source (6, 3)."""
    index = torch.tensor([0, 3, 0, 4, 3, 0])
    return values((5, 3), dtype, seed), index, values((6, 3), dtype, seed + 1)


SCATTER_FORMS = {
    "torch.scatter_add": lambda x, i, s: torch.scatter_add(x, 1, i, s),
    "Tensor.scatter_add": lambda x, i, s: x.scatter_add(1, i, s),
    "Tensor.scatter_add_": lambda x, i, s: x.scatter_add_(1, i, s),
}
INDEX_ADD_FORMS = {
    "torch.index_add": lambda x, i, s: torch.index_add(x, 0, i, s),
    "Tensor.index_add": lambda x, i, s: x.index_add(0, i, s, alpha=3),
    "Tensor.index_add_": lambda x, i, s: x.index_add_(-2, i, s),
}
INDEX_PUT_FORMS = {
    "torch.index_put": lambda x, i, s: torch.index_put(x, (i,), s, accumulate=True),
    "Tensor.index_put": lambda x, i, s: x.index_put([i], s, True),
    "Tensor.index_put_": lambda x, i, s: x.index_put_((i,), s, accumulate=True),
}


def scatter_reduce_form(form, reduce, include_self):
    return {
        "torch": lambda x, i, s: torch.scatter_reduce(x, 1, i, s, reduce,
                                                      include_self=include_self),
        "method": lambda x, i, s: x.scatter_reduce(1, i, s, reduce=reduce,
                                                   include_self=include_self),
        "in_place": lambda x, i, s: x.scatter_reduce_(-1, i, s, reduce,
                                                      include_self=include_self),
    }[form]


def index_reduce_form(form, reduce, include_self):
    return {
        "torch": lambda x, i, s: torch.index_reduce(x, 0, i, s, reduce,
                                                    include_self=include_self),
        "method": lambda x, i, s: x.index_reduce(0, i, s, reduce, include_self=include_self),
        "in_place": lambda x, i, s: x.index_reduce_(0, i, s, reduce=reduce,
                                                    include_self=include_self),
    }[form]


# -- each routed form matches torch --------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("form", SCATTER_FORMS)
def test_scatter_add_forms_match_torch(form, how, dtype):
    check_routed(SCATTER_FORMS[form], scatter_inputs(dtype), how)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.int8, torch.int64),
                         ids=str)
@pytest.mark.parametrize("include_self", (True, False), ids=("self", "no_self"))
@pytest.mark.parametrize("reduce", ("sum", "prod", "mean", "amax", "amin"))
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("form", ("torch", "method", "in_place"))
def test_scatter_reduce_forms_match_torch(form, how, reduce, include_self, dtype):
    check_routed(scatter_reduce_form(form, reduce, include_self), scatter_inputs(dtype), how)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("form", INDEX_ADD_FORMS)
def test_index_add_forms_match_torch(form, how, dtype):
    check_routed(INDEX_ADD_FORMS[form], index_inputs(dtype), how)


@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16, torch.int8, torch.uint8),
                         ids=str)
@pytest.mark.parametrize("include_self", (True, False), ids=("self", "no_self"))
@pytest.mark.parametrize("reduce", ("prod", "mean", "amax", "amin"))
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("form", ("torch", "method", "in_place"))
def test_index_reduce_forms_match_torch(form, how, reduce, include_self, dtype):
    check_routed(index_reduce_form(form, reduce, include_self), index_inputs(dtype), how)


@pytest.mark.parametrize("weights_dtype", (torch.float32, torch.float64, torch.float16,
                                           torch.int8), ids=str)
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("form", ("torch", "method"))
def test_bincount_with_weights_matches_torch(form, how, weights_dtype):
    counted = torch.tensor([4, 1, 1, 0, 4, 4], dtype=torch.int32)   # 2 and 3 empty
    weights = values((6,), weights_dtype, 3)
    call = ((lambda x, w: torch.bincount(x, weights=w, minlength=7)) if form == "torch"
            else (lambda x, w: x.bincount(w)))
    check_routed(call, (counted, weights), how)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.int8, torch.int64),
                         ids=str)
@pytest.mark.parametrize("how", HOW)
@pytest.mark.parametrize("form", INDEX_PUT_FORMS)
def test_index_put_accumulate_forms_match_torch(form, how, dtype):
    x, index, rows = index_inputs(dtype)
    index = torch.tensor([0, -2, 0, 4, 3, -5])  # negative indices count from the end
    check_routed(INDEX_PUT_FORMS[form], (x, index, rows), how)


@pytest.mark.parametrize("values_shape", ((3,), (1, 3), (6, 1), ()), ids=str)
def test_index_put_values_broadcast_to_the_selected_rows(values_shape):
    x, index, _ = index_inputs(torch.float32)
    check_routed(INDEX_PUT_FORMS["Tensor.index_put_"],
                 (x, index, values(values_shape, torch.float32, 5)), "use_tritonml")


# -- adversarial inputs --------------------------------------------------------------------------

def test_int8_sums_wrap_as_torchs():
    x = torch.full((2,), 120, dtype=torch.int8)
    src = torch.tensor([100, 100, -128, -128, 7], dtype=torch.int8)
    got, _ = check_routed(lambda x, i, s: x.scatter_add_(0, i, s),
                          (x, torch.tensor([0, 0, 1, 1, 1]), src), "deterministic")
    def wrap(v):
        return (v + 128) % 256 - 128

    assert got is not None and got.tolist() == [wrap(120 + 100 + 100), wrap(120 - 128 - 128 + 7)] == [64, 127]


def test_every_element_into_one_place_and_none_elsewhere():
    x, _, src = scatter_inputs(torch.float16)
    check_routed(SCATTER_FORMS["Tensor.scatter_add"], (x, torch.zeros(3, 6, dtype=torch.int64),
                                                       src), "use_tritonml")


def test_nan_propagates_through_amax_and_amin_as_in_torch():
    nan = float("nan")
    src = torch.tensor([nan, 1., 2., nan, -1.])
    for reduce in ("amax", "amin"):
        check_routed(lambda x, i, s: x.scatter_reduce(0, i, s, reduce, include_self=False),
                     (torch.zeros(4), torch.tensor([0, 0, 1, 2, 2]), src), "use_tritonml")


@pytest.mark.parametrize("how", HOW)
def test_empty_index_and_zero_dim_tensors(how):
    check_routed(SCATTER_FORMS["Tensor.scatter_add_"],
                 (torch.ones(2, 3), torch.zeros(2, 0, dtype=torch.int64), torch.ones(2, 0)), how,
                 launches_expected=False)   # nothing to reduce
    check_routed(lambda x, i, s: torch.scatter_add(x, 0, i, s),
                 (torch.tensor(5.), torch.tensor(0), torch.tensor(2.)), how)


def test_non_contiguous_input_gives_torchs_layout():
    x, index, src = scatter_inputs(torch.float32)
    transposed = x.t().contiguous().t()
    check_routed(SCATTER_FORMS["torch.scatter_add"], (transposed, index, src), "use_tritonml")
    check_routed(INDEX_PUT_FORMS["torch.index_put"],   # index_put keeps input's strides
                 (transposed.t(), torch.tensor([0, 4, 0]), torch.ones(3)), "use_tritonml")
    strided = torch.zeros(5, 6)[:, ::2]   # in place into a strided view
    check_routed(lambda x, i, s: x.index_add_(0, i, s),
                 (strided, torch.tensor([0, 4, 0]), torch.ones(3, 3)), "use_tritonml")


@pytest.mark.parametrize("how", HOW)
def test_out_forms_write_and_return_out(how):
    x, index, src = scatter_inputs(torch.float32)
    out = torch.full_like(x, 7.)

    def call(x, i, s, out):
        result = torch.scatter_add(x, 1, i, s, out=out)
        assert result is out
        return result

    check_routed(call, (x, index, src, out), how)
    check_routed(lambda x, i, s, out: torch.index_add(x, 0, i, s, alpha=2, out=out),
                 (*index_inputs(torch.int32), torch.zeros(5, 3, dtype=torch.int32)), how)


def test_in_place_forms_return_self_and_count_one_write():
    x, index, src = scatter_inputs(torch.float32)
    version = x._version
    with use_tritonml(CPU), _trace.record() as rec:
        result = x.scatter_reduce_(1, index, src, "amax")
    assert result is x and x._version == version + 1 and rec.launches


@pytest.mark.parametrize("bad", (5, -1))
def test_an_index_out_of_range_raises_torchs_own_error(bad):
    x, index, src = index_inputs(torch.float32)
    index[3] = bad
    # tritonml's range check is one read-only reduction of the index (ready_reductions.
    # index_facts); it raises before anything is written, and torch raises its own error
    check_falls_through(INDEX_ADD_FORMS["torch.index_add"], (x, index, src), "deterministic",
                        checks_launch=2)
    x, index, src = scatter_inputs(torch.float32)
    index[1, 2] = bad
    check_falls_through(SCATTER_FORMS["Tensor.scatter_add_"], (x, index, src), "deterministic",
                        checks_launch=2)


# -- autograd --------------------------------------------------------------------------------------

@pytest.mark.parametrize("reduce, src_values", [
    ("sum", [1., 2., 3., 4.]),
    ("amax", [3., 3., 1., 2.]),        # a tie within a group, and with input's value
    ("prod", [0., 2., 3., 0.]),         # zeros
    ("mean", [1., 2., 3., 4.]),
])
def test_functional_calls_under_autograd_give_torchs_gradients(reduce, src_values):
    def grads(routing):
        x = torch.tensor([3., 1., 5.], requires_grad=True)
        src = torch.tensor(src_values, requires_grad=True)
        with routing, _trace.record() as rec:
            y = torch.scatter_reduce(x, 0, torch.tensor([0, 0, 2, 2]), src, reduce)
        (y * torch.tensor([1., 2., 3.])).sum().backward()
        return y, x.grad, src.grad, len(rec.launches)

    want = grads(contextlib.nullcontext())
    got = grads(use_tritonml(CPU))
    assert got[3] > 0
    for g, w in zip(got[:3], want[:3]):
        torch.testing.assert_close(g, w)


TORCH_NODES = {"scatter_reduce": "ScatterReduceBackward0", "index_reduce": "IndexReduceBackward0"}


@pytest.mark.parametrize("form", ("scatter_reduce", "index_reduce"))
@pytest.mark.parametrize("x_values, routed", [
    ([3., 1., 5.], False),   # input ties both groups' maxima
    ([0., 1., 4.], True),    # no tie: the two gradients agree
])
def test_an_extreme_without_self_is_routed_under_autograd_unless_input_ties_it(form, x_values,
                                                                               routed):
    """torch counts input's tied value in the share of amax's gradient under include_self=False
    but gives input none; tritonml's shares among the elements: where input ties a group's
    extreme, torch keeps the call (ours ran, found the tie, wrote nothing)."""
    def grads(routing):
        x = torch.tensor(x_values, requires_grad=True)
        src = torch.tensor([3., 3., 1., 5.], requires_grad=True)
        index = torch.tensor([0, 0, 2, 2])
        with routing, _trace.record() as rec:
            y = getattr(torch, form)(x, 0, index, src, "amax", include_self=False)
        (y * torch.tensor([1., 2., 3.])).sum().backward()
        return y, x.grad, src.grad, len(rec.launches)

    want = grads(contextlib.nullcontext())
    got = grads(use_tritonml(CPU))
    assert got[3] > 0
    assert (type(got[0].grad_fn).__name__ == TORCH_NODES[form]) is not routed
    for g, w in zip(got[:3], want[:3]):
        torch.testing.assert_close(g, w)
    with use_tritonml(CPU), _trace.record() as rec:     # without autograd: routed
        torch.scatter_reduce(torch.zeros(3), 0, torch.tensor([0, 0]), torch.ones(2), "amax",
                             include_self=False)
    assert rec.launches


# -- what falls through ----------------------------------------------------------------------------

FALLS_THROUGH = {
    "bool": (lambda x, i, s: x.scatter_add(1, i, s),
             (torch.zeros(3, 5, dtype=torch.bool), scatter_inputs(torch.float32)[1],
              torch.ones(3, 6, dtype=torch.bool))),
    "complex": (lambda x, i, s: x.index_add(0, i, s),
                (torch.zeros(5, 3, dtype=torch.complex64), index_inputs(torch.float32)[1],
                 torch.ones(6, 3, dtype=torch.complex64))),
    "uint16": (lambda x, i, s: x.scatter_add(1, i, s),
               (torch.zeros(3, 5, dtype=torch.uint16), scatter_inputs(torch.float32)[1],
                torch.ones(3, 6, dtype=torch.uint16))),
    "mixed_dtypes": (lambda x, i, s: x.scatter_add(1, i, s),
                     (torch.zeros(3, 5), scatter_inputs(torch.float32)[1],
                      torch.ones(3, 6, dtype=torch.float64))),
    "int32_scatter_index": (lambda x, i, s: x.scatter_add(1, i, s),
                            (torch.zeros(3, 5), scatter_inputs(torch.float32)[1].int(),
                             torch.ones(3, 6))),
    "unknown_reduce": (lambda x, i, s: x.scatter_reduce(1, i, s, "max"),
                       scatter_inputs(torch.float32)),
    "subclass": (lambda x, i, s: x.scatter_add(1, i, s),
                 (scatter_inputs(torch.float32)[0].as_subclass(type("Sub", (torch.Tensor,), {})),
                  *scatter_inputs(torch.float32)[1:])),
    "out_resized": (lambda x, i, s, out: torch.scatter_add(x, 1, i, s, out=out),
                    (*scatter_inputs(torch.float32), torch.empty(0))),
    "expanded_self": (lambda x, i, s: x.expand(4, 3).index_add_(0, i, s),
                      (torch.zeros(1, 3), torch.tensor([0, 1]), torch.ones(2, 3))),
    "bincount_without_weights": (lambda x: torch.bincount(x, minlength=4),
                                 (torch.tensor([1, 1, 3]),)),
    "bincount_empty": (lambda x, w: torch.bincount(x, w, minlength=3),
                       (torch.tensor([], dtype=torch.int64), torch.tensor([]))),
    "index_put_not_accumulating": (lambda x, i, s: x.index_put_((i,), s),
                                   (torch.zeros(5, 3), torch.tensor([0, 4]), torch.ones(3))),
    "index_put_mask": (lambda x, i, s: x.index_put_((i,), s, accumulate=True),
                       (torch.zeros(5, 3), torch.tensor([True, False, True, False, False]),
                        torch.ones(3))),
    "index_put_two_indices": (lambda x, i, j, s: x.index_put_((i, j), s, accumulate=True),
                              (torch.zeros(5, 3), torch.tensor([0, 0]), torch.tensor([1, 1]),
                               torch.ones(2))),
    "index_put_2d_index": (lambda x, i, s: x.index_put_((i,), s, accumulate=True),
                           (torch.zeros(5, 3), torch.tensor([[0, 1], [1, 1]]), torch.ones(3))),
    "index_put_none": (lambda x, i, s: x.index_put_((None, i), s, accumulate=True),
                       (torch.zeros(5, 3), torch.tensor([0, 0]), torch.ones(1))),
    "index_put_values_dtype": (lambda x, i, s: x.index_put_((i,), s, accumulate=True),
                               (torch.zeros(5, 3), torch.tensor([0, 0]),
                                torch.ones(3, dtype=torch.float64))),
    "index_put_values_too_large": (lambda x, i, s: x.index_put_((i,), s, accumulate=True),
                                   (torch.zeros(5, 3), torch.tensor([0, 0]), torch.ones(3, 3))),
    "float_alpha_for_integers": (lambda x, i, s: x.index_add(0, i, s, alpha=1.5),   # float alpha, int input
                  (torch.zeros(5, 3, dtype=torch.int32), torch.tensor([0, 1]),
                   torch.ones(2, 3, dtype=torch.int32))),
}


@pytest.mark.parametrize("name", FALLS_THROUGH)
@pytest.mark.parametrize("how", HOW)
def test_unsupported_calls_fall_through_to_torch(how, name):
    call, inputs = FALLS_THROUGH[name]
    check_falls_through(call, inputs, how)


def test_scatter_ops_outside_routing_and_deterministic_mode_run_torchs():
    with _trace.record() as rec:
        torch.zeros(3).scatter_add_(0, torch.tensor([0, 0]), torch.ones(2))
    assert not rec.launches
    with use_tritonml(()), _trace.record() as rec:     # routing on, no device chosen
        torch.zeros(3).scatter_add_(0, torch.tensor([0, 0]), torch.ones(2))
    assert not rec.launches


def test_the_route_runs_tritonmls_function(monkeypatch):
    calls = []
    real = _scatter.scatter_reduce

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(_scatter, "scatter_reduce", spy)
    with use_tritonml(CPU):
        torch.zeros(3).scatter_add_(0, torch.tensor([2, 2]), torch.ones(2))
    assert calls == [{"include_self": True}]
    check_falls_through(lambda x, i, s: x.scatter_add_(0, i, s),
                        (torch.zeros(3, dtype=torch.bool), torch.tensor([2, 2]),
                         torch.ones(2, dtype=torch.bool)))
    assert len(calls) == 1


# -- deterministic mode: the rule and its opt-outs ------------------------------------------------

def scatter_once() -> int:
    """Launches of one scatter_add_ on CPU tensors."""
    with _trace.record() as rec:
        torch.zeros(3).scatter_add_(0, torch.tensor([0, 0]), torch.ones(2))
    return len(rec.launches)


def test_deterministic_mode_routes_only_the_scatter_ops():
    deterministic_routing(True, devices=CPU)
    torch.use_deterministic_algorithms(True)
    assert scatter_once() > 0
    with _trace.record() as rec:
        torch.cumsum(torch.ones(3), 0)
        torch.ones(3).sum()
    assert not rec.launches


def test_deterministic_routing_is_on_the_default_devices_only():
    torch.use_deterministic_algorithms(True)      # default devices: cuda, so cpu is torch's
    assert scatter_once() == 0


def test_switching_deterministic_mode_off_removes_the_mode():
    deterministic_routing(True, devices=CPU)
    torch.use_deterministic_algorithms(True, warn_only=True)   # warn_only routes too
    assert mode_count() == 1 and scatter_once() > 0
    torch.use_deterministic_algorithms(False)
    assert mode_count() == 0 and scatter_once() == 0


def test_deterministic_routing_false_opts_out_and_true_opts_back_in():
    deterministic_routing(True, devices=CPU)
    torch.use_deterministic_algorithms(True)
    deterministic_routing(False)
    assert scatter_once() == 0 and mode_count() == 0
    deterministic_routing(True)     # on the devices set before
    assert scatter_once() > 0
    deterministic_routing(True, devices="cuda")
    assert scatter_once() == 0


def test_disable_leaves_deterministic_routing_on():
    deterministic_routing(True, devices=CPU)
    torch.use_deterministic_algorithms(True)
    tritonml.enable(CPU)
    tritonml.disable()
    assert scatter_once() > 0


def test_deterministic_routing_checks_its_arguments():
    with pytest.raises(TypeError):
        deterministic_routing(1)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError):
        deterministic_routing(True, devices="mps")


def test_other_threads_route_once_they_ask():
    # torch's flag is process-wide but modes are per thread: a thread that neither switched
    # deterministic mode on nor called deterministic_routing sees no routing (docs/routing.md)
    deterministic_routing(True, devices=CPU)
    torch.use_deterministic_algorithms(True)
    seen = {}

    def worker():
        seen["before"] = scatter_once()
        deterministic_routing(True)
        seen["after"] = scatter_once()

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join(limit(120))
    assert seen["before"] == 0 and seen["after"] > 0


IMPORT_PROBE = textwrap.dedent("""
    import torch
    torch.use_deterministic_algorithms(True)
    import tritonml
    wrapped = getattr(torch.use_deterministic_algorithms, "__tritonml_follows__", False)
    print(torch._C._len_torch_function_stack(), wrapped)
""")


@pytest.mark.parametrize("env, expected", [(None, "1 True"), ("0", "0 False"), ("1", "1 True")])
def test_environment_variable_opts_out_at_import(env, expected):
    environ = {k: v for k, v in os.environ.items() if k != "TRITONML_DETERMINISTIC_ROUTING"}
    if env is not None:
        environ["TRITONML_DETERMINISTIC_ROUTING"] = env
    done = subprocess.run([sys.executable, "-c", IMPORT_PROBE], env=environ, capture_output=True,
                          text=True, timeout=limit(120))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-2:] == expected.split()


def test_scatter_routes_are_in_the_one_table():
    from tritonml.routing import ROUTES
    deterministic = {r.name for r in ROUTES if getattr(r, "deterministic", False)}
    assert deterministic == {"scatter_add", "scatter_reduce", "index_add", "index_reduce",
                             "bincount", "index_put"}
