"""Routing torch's own scans and reductions to tritonml (tritonml/routing.py).

Every routed call is compared with torch's own result, computed outside routing: same dtype, shape,
strides and device, values equal (integers, bool, indices) or close within the dtype's tolerance
(floats). ``_trace.record`` proves which path ran: launches when the call was routed, none when it
fell through to torch.
"""
from __future__ import annotations

import contextlib
import threading
import warnings

import pytest
import torch
from torch.overrides import TorchFunctionMode

import tritonml
from tritonml.runtime import trace as _trace
from tritonml import routing as _routing
from tritonml.routing import disable, enable, use_tritonml
from tests.timing import limit

CPU = ("cpu",)
NO_GPU_WARNING = r"devices are cuda only, but torch\.cuda\.is_available\(\) is False.*devices=\(\"cpu\",\)"


@contextlib.contextmanager
def cuda_only_routing():
    """A block that routes cuda alone: on a machine without a GPU that routes nothing, and the
    first such call of the process warns (the flag is reset so this block sees it)."""
    if torch.cuda.is_available():
        yield
        return
    _routing._warned_no_cuda = False
    with pytest.warns(UserWarning, match=NO_GPU_WARNING):
        yield

# rtol, atol per float dtype: torch and tritonml sum in different orders (and float32 in float64 here).
TOLERANCE = {
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float32: (1e-5, 1e-6),
    torch.float64: (1e-12, 1e-14),
}
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64,
          torch.int32, torch.int64, torch.uint8, torch.bool)


@pytest.fixture(autouse=True)
def routing_off_after_each_test():
    yield
    disable()


def make(shape, dtype, seed=0):
    """Values that keep products and exponentials in range; small integers, so ties occur."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) + 0.5).to(dtype)
    low = 0 if dtype == torch.uint8 else -3
    return torch.randint(low, 4, shape, generator=g, dtype=dtype)


def layout(x, kind):
    """The same values as x (up to the layout's shape) held three ways."""
    if kind == "contiguous":
        return x
    if kind == "transposed":
        return x.transpose(0, 2).contiguous().transpose(0, 2)  # same shape, permuted strides
    if kind == "strided":
        big = torch.zeros((x.shape[0], 2 * x.shape[1], x.shape[2] + 1), dtype=x.dtype)
        big[:, ::2, :-1] = x
        return big[:, ::2, :-1]
    raise ValueError(kind)


def assert_same(got, want):
    assert type(got) is type(want)
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            assert_same(g, w)
        return
    assert (got.dtype, got.shape, got.device) == (want.dtype, want.shape, want.device)
    assert got.stride() == want.stride() or got.numel() <= 1
    assert got.requires_grad == want.requires_grad
    if want.dtype.is_floating_point:
        rtol, atol = TOLERANCE[want.dtype]
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        assert torch.equal(got, want), (got, want)


def outcome(call, *args):
    """(result, None) or (None, exception) of call(*args)."""
    try:
        return call(*args), None
    except Exception as e:  # noqa: BLE001  (the test compares torch's error with the routed one)
        return None, e


def routed(call, *args, devices=CPU):
    """call(*args) with routing on: (result, exception, number of launches)."""
    with use_tritonml(devices), _trace.record() as rec:
        result, error = outcome(call, *args)
    return result, error, len(rec.launches)


def check_routed(call, x):
    """torch's result outside routing equals the routed one, and the routed one ran our kernels."""
    want, want_error = outcome(call, x.clone())
    got, got_error, launches = routed(call, x.clone())
    if want_error is not None:  # torch refuses it: so must routing, through torch itself
        assert type(got_error) is type(want_error) and str(got_error) == str(want_error)
        assert launches == 0
        return
    assert got_error is None, got_error
    assert_same(got, want)
    assert launches > 0


def check_falls_through(call, *args):
    """Routing on, torch's own kernel runs: no launch, and torch's result or error."""
    want, want_error = outcome(call, *[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
    got, got_error, launches = routed(call, *args)
    assert launches == 0
    if want_error is not None:
        assert type(got_error) is type(want_error) and str(got_error) == str(want_error)
    else:
        assert got_error is None, got_error
        assert_same(got, want)


vn = torch.linalg.vector_norm

# Each torch function in its argument forms: function and method, positional and keyword dims,
# None / int / negative / tuple / list dims, keepdim both ways, dtype=, numpy's axis/keepdims.
FORMS = {
    "cumsum": [lambda x: torch.cumsum(x, 1), lambda x: x.cumsum(-1),
               lambda x: torch.cumsum(x, dim=0), lambda x: x.cumsum(2, dtype=torch.float64)],
    "cumprod": [lambda x: torch.cumprod(x, 2), lambda x: x.cumprod(dim=-3),
                lambda x: torch.cumprod(x, 1, dtype=torch.int64)],
    "sum": [lambda x: torch.sum(x), lambda x: x.sum(1), lambda x: torch.sum(x, -1, keepdim=True),
            lambda x: x.sum((0, 2)), lambda x: torch.sum(x, dim=[-1, 0], keepdim=True),
            lambda x: torch.sum(x, None, True), lambda x: torch.sum(x, axis=1, keepdims=True),
            lambda x: x.sum(dtype=torch.float64), lambda x: torch.sum(x, ())],
    "prod": [lambda x: torch.prod(x), lambda x: x.prod(1), lambda x: torch.prod(x, -1, True),
             lambda x: x.prod(0, dtype=torch.float64)],
    "amax": [lambda x: torch.amax(x), lambda x: x.amax(1), lambda x: torch.amax(x, (0, -1), True),
             lambda x: x.amax(dim=-2, keepdim=False)],
    "amin": [lambda x: torch.amin(x), lambda x: x.amin(-1, True), lambda x: torch.amin(x, [2, 0])],
    "argmax": [lambda x: torch.argmax(x), lambda x: x.argmax(1),
               lambda x: torch.argmax(x, -1, keepdim=True), lambda x: torch.argmax(x, None, True)],
    "argmin": [lambda x: torch.argmin(x), lambda x: x.argmin(dim=0),
               lambda x: torch.argmin(x, 2, True)],
    "mean": [lambda x: torch.mean(x), lambda x: x.mean((0, 1)), lambda x: torch.mean(x, -1, True),
             lambda x: x.mean(dtype=torch.float64), lambda x: torch.mean(x, 1, dtype=torch.float32)],
    "logsumexp": [lambda x: torch.logsumexp(x, 1), lambda x: x.logsumexp((0, 2), True),
                  lambda x: torch.special.logsumexp(x, -1)],
    "vector_norm": [lambda x: vn(x), lambda x: vn(x, 1), lambda x: vn(x, 2, (0, 1), True),
                    lambda x: vn(x, ord=1.0, dim=-1), lambda x: vn(x, dtype=torch.float64)],
}
CASES = [pytest.param(name, i, id=f"{name}-{i}")
         for name, forms in FORMS.items() for i in range(len(forms))]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name, i", CASES)
def test_routed_call_matches_torch_for_every_dtype(name, i, dtype):
    check_routed(FORMS[name][i], make((2, 3, 4), dtype, seed=i))


@pytest.mark.parametrize("kind", ("transposed", "strided"))
@pytest.mark.parametrize("dtype", (torch.float32, torch.int32), ids=str)
@pytest.mark.parametrize("name, i", CASES)
def test_routed_call_matches_torch_on_non_contiguous_layouts(name, i, dtype, kind):
    x = layout(make((2, 3, 4), dtype, seed=i), kind)
    assert not x.is_contiguous()
    check_routed(FORMS[name][i], x)


@pytest.mark.parametrize("call", [
    lambda x: torch.cumsum(x, 0), lambda x: torch.sum(x), lambda x: torch.sum(x, 0, keepdim=True),
    lambda x: torch.argmax(x), lambda x: torch.argmin(x, -1), lambda x: torch.amax(x, 0),
    lambda x: torch.prod(x, 0), lambda x: torch.mean(x, (0,)), lambda x: vn(x, 1, 0),
])
def test_zero_dim_tensor_is_routed_as_torch_reads_it(call):
    check_routed(call, torch.tensor(1.5))


# -- torch's NaN, tie and wrap-around rules -------------------------------------------------------

@pytest.mark.parametrize("call", [
    lambda x: torch.argmax(x, 1), lambda x: torch.argmin(x, 1), lambda x: torch.argmax(x),
    lambda x: torch.argmin(x), lambda x: torch.amax(x, 1), lambda x: torch.amin(x, 0),
    lambda x: torch.sum(x, 1), lambda x: torch.cumsum(x, 1), lambda x: torch.logsumexp(x, 1),
])
@pytest.mark.parametrize("dtype", (torch.float32, torch.bfloat16), ids=str)
def test_nan_and_ties_follow_torch(call, dtype):
    nan = float("nan")
    # row 0: ties on the maximum and the minimum; rows 1, 2: NaN first and later, twice.
    x = torch.tensor([[1., 3., 0., 3., 0.], [nan, 2., nan, 5., -1.], [4., -2., 4., nan, nan]],
                     dtype=dtype)
    check_routed(call, x)


def test_flat_argmax_ties_give_the_first_flat_index():
    x = torch.tensor([[1, 7, 2], [7, 0, 7]], dtype=torch.int32)
    check_routed(lambda t: torch.argmax(t), x)
    check_routed(lambda t: t.t().argmax(), x)  # flat over the transposed view's own order


def test_integer_results_wrap_as_torch_does():
    x = torch.full((3, 40), 7, dtype=torch.int64)
    check_routed(lambda t: torch.prod(t, 1), x)  # 7**40 wraps modulo 2**64
    check_routed(lambda t: torch.cumprod(t, 1), x)
    y = torch.full((50,), 100, dtype=torch.int8)
    check_routed(lambda t: torch.sum(t, dtype=torch.int8), y)


@pytest.mark.parametrize("call", [
    lambda x: torch.sum(x, 1, dtype=torch.int32), lambda x: torch.cumsum(x, 1, dtype=torch.int64),
    lambda x: torch.prod(x, 1, dtype=torch.int64), lambda x: torch.cumprod(x, 0, dtype=torch.uint8),
    lambda x: torch.sum(x, 0, dtype=torch.float16), lambda x: torch.mean(x, 0, dtype=torch.float16),
    lambda x: torch.sum((x * 100).to(torch.int32), dtype=torch.int8),
])
def test_dtype_argument_converts_x_first(call):
    check_routed(call, torch.tensor([[1.7, -2.6, 3.9], [250.5, 7.2, -0.5]], dtype=torch.float64))


def test_logsumexp_of_integers_uses_the_default_float_dtype():
    x = make((2, 3), torch.int32)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        check_routed(lambda t: torch.logsumexp(t, 1), x)
    finally:
        torch.set_default_dtype(previous)


# -- out= and in place ----------------------------------------------------------------------------

OUT_FORMS = [
    (lambda x: torch.cumsum(x, 1, dtype=torch.float64),
     lambda x, o: torch.cumsum(x, 1, dtype=torch.float64, out=o)),
    (lambda x: torch.cumprod(x, 0), lambda x, o: torch.cumprod(x, 0, out=o)),
    (lambda x: torch.sum(x, (0, 1)), lambda x, o: torch.sum(x, (0, 1), out=o)),
    (lambda x: torch.prod(x, 1, True), lambda x, o: torch.prod(x, 1, True, out=o)),
    (lambda x: torch.amax(x, -1), lambda x, o: torch.amax(x, -1, out=o)),
    (lambda x: torch.amin(x, 0, True), lambda x, o: torch.amin(x, 0, True, out=o)),
    (lambda x: torch.argmax(x, 1), lambda x, o: torch.argmax(x, 1, out=o)),
    (lambda x: torch.argmin(x), lambda x, o: torch.argmin(x, out=o)),
    (lambda x: torch.mean(x, 2), lambda x, o: torch.mean(x, 2, out=o)),
    (lambda x: torch.mean(x), lambda x, o: torch.mean(x, out=o)),
    (lambda x: torch.logsumexp(x, (0, 2)), lambda x, o: torch.logsumexp(x, (0, 2), out=o)),
    (lambda x: vn(x, 1, -1), lambda x, o: vn(x, 1, -1, out=o)),
]


def strided_like(t):
    """An out= tensor of t's shape and dtype that is a strided view into a larger buffer."""
    if t.dim() == 0:
        return torch.empty((2,), dtype=t.dtype)[1]
    buffer = torch.full((*t.shape[:-1], 2 * t.shape[-1]), 9, dtype=t.dtype)
    return buffer[..., ::2]


@pytest.mark.parametrize("strided", (False, True), ids=("dense_out", "strided_out"))
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16), ids=str)
@pytest.mark.parametrize("plain, with_out", OUT_FORMS)
def test_out_forms_write_and_return_out(plain, with_out, dtype, strided):
    x = make((2, 3, 4), dtype)
    want = plain(x)
    out = strided_like(want) if strided else torch.empty_like(want)
    got, error, launches = routed(with_out, x, out)
    assert error is None, error
    assert got is out and launches > 0
    assert got._version == 1
    rtol, atol = TOLERANCE[dtype]
    torch.testing.assert_close(out, want, rtol=rtol, atol=atol)


def test_out_of_another_dtype_or_shape_falls_through():
    x = make((2, 3), torch.int32)
    # torch writes an int32 cumsum into an int32 out, resizes an empty out, casts to float64
    for call, out in ((lambda t, o: torch.cumsum(t, 1, out=o), torch.empty((2, 3), dtype=torch.int32)),
                      (lambda t, o: torch.sum(t, 0, out=o), torch.empty(0, dtype=torch.int64)),
                      (lambda t, o: torch.cumsum(t, 0, out=o), torch.empty((2, 3)).double())):
        check_falls_through(call, x, out)


@pytest.mark.parametrize("kind", ("contiguous", "transposed", "strided"))
@pytest.mark.parametrize("dtype", (torch.float32, torch.float16, torch.int8, torch.int64), ids=str)
@pytest.mark.parametrize("method, dim", [("cumsum_", 1), ("cumprod_", -1), ("cumsum_", 0)])
def test_in_place_forms_match_torch(method, dim, dtype, kind):
    base = make((2, 3, 4), dtype) * (40 if dtype == torch.int8 else 1)  # int8 sums wrap
    want = getattr(layout(base.clone(), kind), method)(dim)
    x = layout(base.clone(), kind)
    got, error, launches = routed(lambda t: getattr(t, method)(dim), x)
    assert error is None, error
    assert got is x and launches > 0 and x._version == want._version
    assert_same(got, want)


def test_in_place_with_dtype_argument():
    x = make((2, 3), torch.float32)
    check_routed(lambda t: t.cumsum_(1, dtype=torch.float32), x)
    check_routed(lambda t: t.cumsum_(1, dtype=torch.float64), x)  # torch refuses; so do we
    check_routed(lambda t: t.cumsum_(0), make((2, 3), torch.bool))  # torch refuses bool in place


# -- what falls through ---------------------------------------------------------------------------

class Subclass(torch.Tensor):
    pass


FALLS_THROUGH = {
    "vector_norm ord=inf": (lambda x: vn(x, float("inf")), make((2, 3), torch.float32)),
    "vector_norm ord=3": (lambda x: vn(x, 3, 1), make((2, 3), torch.float32)),
    "vector_norm ord=0": (lambda x: vn(x, 0), make((2, 3), torch.float32)),
    "vector_norm narrowing dtype": (lambda x: vn(x, dtype=torch.float16),
                                    make((2, 3), torch.float32)),
    "vector_norm of integers": (lambda x: vn(x), make((2, 3), torch.int32)),
    "complex sum": (lambda x: torch.sum(x, 1), make((2, 3), torch.float32).to(torch.complex64)),
    "complex cumsum": (lambda x: torch.cumsum(x, 1),
                       make((2, 3), torch.float64).to(torch.complex128)),
    "uint16 sum": (lambda x: torch.sum(x, 0), make((2, 3), torch.uint8).to(torch.uint16)),
    "uint32 cumsum": (lambda x: torch.cumsum(x, 0), make((2, 3), torch.uint8).to(torch.uint32)),
    "sum to bool": (lambda x: torch.sum(x, dtype=torch.bool), make((2, 3), torch.float32)),
    "mean of integers": (lambda x: torch.mean(x), make((2, 3), torch.int64)),
    "mean to an integer dtype": (lambda x: torch.mean(x, dtype=torch.int64),
                                 make((2, 3), torch.float32)),
    "argmax of bool": (lambda x: torch.argmax(x), make((2, 3), torch.bool)),
    "argmax over an empty dim": (lambda x: torch.argmax(x, 1), torch.empty((2, 0))),
    "argmax of an empty tensor": (lambda x: torch.argmax(x), torch.empty((0,))),
    "amax over an empty dim": (lambda x: torch.amax(x, 0), torch.empty((0, 3))),
    "logsumexp over no dims": (lambda x: torch.logsumexp(x, ()), make((2, 3), torch.float32)),
    "dim out of range": (lambda x: torch.sum(x, 2), make((2, 3), torch.float32)),
    "scan dim out of range": (lambda x: torch.cumsum(x, -3), make((2, 3), torch.float32)),
    "repeated dims": (lambda x: torch.sum(x, (1, -1)), make((2, 3), torch.float32)),
    "dim as a tensor": (lambda x: torch.sum(x, torch.tensor(1)), make((2, 3), torch.float32)),
    "rank 9": (lambda x: torch.sum(x, 0), torch.ones((1,) * 8 + (2,))),
    "sparse": (lambda x: torch.sum(x, 0), make((2, 3), torch.float32).to_sparse()),
    "tensor subclass": (lambda x: torch.sum(x, 0),
                        make((2, 3), torch.float32).as_subclass(Subclass)),
}


@pytest.mark.parametrize("name", FALLS_THROUGH)
def test_unsupported_calls_fall_through_to_torch(name):
    call, x = FALLS_THROUGH[name]
    check_falls_through(call, x)


def test_cuda_only_routing_without_a_gpu_warns_once_and_names_the_fix(monkeypatch):
    x = make((4,), torch.float32)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)   # a machine without a GPU
    monkeypatch.setattr(_routing, "_warned_no_cuda", False)
    with pytest.warns(UserWarning, match=NO_GPU_WARNING) as caught:
        with use_tritonml():                          # the default devices: cuda
            assert launches_of(cumsum, x) == 0
    assert len(caught) == 1 and caught[0].filename == __file__   # points at the user's line
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with use_tritonml("cuda:0"):                  # once per process
            pass
        enable(("cuda",))
        disable()
    monkeypatch.setattr(_routing, "_warned_no_cuda", False)
    with pytest.warns(UserWarning, match="tritonml.enable: ") as caught:
        enable()
    disable()
    assert caught[0].filename == __file__
    monkeypatch.setattr(_routing, "_warned_no_cuda", False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with use_tritonml(("cuda", "cpu")):           # cpu routes: nothing to warn of
            assert launches_of(cumsum, x) > 0
        with use_tritonml(()):                        # routing off on purpose
            pass
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        with use_tritonml():                          # a GPU: cuda routes
            pass


def test_tensors_on_devices_not_listed_are_not_routed():
    x = make((2, 3), torch.float32)
    for devices in (("cuda",), (), "cuda:0"):
        with cuda_only_routing() if devices else contextlib.nullcontext():
            got, error, launches = routed(lambda t: torch.cumsum(t, 1), x, devices=devices)
        assert launches == 0 and error is None
        assert_same(got, torch.cumsum(x, 1))


def tritonml_has_autograd(function) -> bool:
    """Whether tritonml's own function records autograd (on an empty input: nothing launches)."""
    if function in ("cumulative_sum", "cumulative_product"):
        probe = getattr(tritonml, function)(torch.zeros(0, requires_grad=True), 0)
    else:
        probe = tritonml.reduce(torch.zeros((0, 1), requires_grad=True), function, 1)
    return probe.grad_fn is not None


def f64(rows):
    return torch.tensor(rows, dtype=torch.float64)


# Calls autograd records, with the inputs where torch's gradient takes a convention: ties share the
# gradient of amax/amin, products with zeros, norms at 0.
GRAD_CASES = {
    "cumsum": ("cumulative_sum", lambda x: torch.cumsum(x * 2, 1), f64([[1, 2, 3], [4, 5, 6]])),
    "cumprod with zeros": ("cumulative_product", lambda x: x.cumprod(1),
                           f64([[1, 0, 3, 2], [0, 2, 0, 5], [2, 3, 4, 0]])),
    "sum": ("SUM", lambda x: x.sum((0, 1)), f64([[1, 2, 3], [4, 5, 6]])),
    "sum with dtype": ("SUM", lambda x: torch.sum(x, 1, dtype=torch.float64),
                       torch.tensor([[1, 2, 3], [4, 5, 6]], dtype=torch.float32)),
    "prod with zeros": ("MULTIPLY", lambda x: torch.prod(x, 1), f64([[1, 0, 3], [0, 2, 0], [2, 3, 4]])),
    "amax with ties": ("MAX", lambda x: torch.amax(x, 1), f64([[1, 3, 3], [2, 2, 2], [1, 5, 2]])),
    "amin with ties": ("MIN", lambda x: x.amin((0, 1), keepdim=True), f64([[1, 1, 3], [2, 1, 2]])),
    "mean": ("AVERAGE", lambda x: torch.mean(x, -1), f64([[1, 2, 3], [4, 5, 6]])),
    "L2 norm at 0": ("L2", lambda x: vn(x, 2, 1), f64([[0, 0, 0], [3, -4, 0]])),
    "L1 norm at 0": ("L1", lambda x: vn(x, ord=1, dim=1), f64([[0, -1, 0], [3, -4, 0]])),
}


@pytest.mark.parametrize("name", GRAD_CASES)
def test_calls_autograd_records_give_torch_gradients(name):
    """Routed where tritonml's function has autograd (its gradients follow torch's conventions)."""
    function, call, values = GRAD_CASES[name]
    x = values.clone().requires_grad_()
    want = call(x)
    weights = torch.arange(1, want.numel() + 1, dtype=want.dtype).reshape(want.shape)
    want.backward(weights)
    want_grad, x.grad = x.grad, None

    got, error, launches = routed(call, x)
    assert error is None, error
    assert (launches > 0) == tritonml_has_autograd(function)
    assert got.grad_fn is not None
    assert_same(got.detach(), want.detach())
    got.backward(weights)
    assert_same(x.grad, want_grad)


# torch's reductions that routing takes under autograd (logsumexp falls through, see below).
ROUTED_REDUCTIONS_WITH_GRADIENT = {
    "sum": torch.sum, "mean": torch.mean, "amax": torch.amax, "amin": torch.amin,
    "prod": torch.prod, "vector_norm 1": lambda t, **k: vn(t, 1, **k),
    "vector_norm 2": lambda t, **k: vn(t, 2, **k),
}


@pytest.mark.parametrize("name", ROUTED_REDUCTIONS_WITH_GRADIENT)
def test_gradients_of_0d_tensors_are_torchs_for_every_dim_spelling(name):
    function = ROUTED_REDUCTIONS_WITH_GRADIENT[name]
    dims = [0, -1] if name == "prod" else [None, (), 0, -1, [0], (0,), (-1,)]
    forms = [{}] + [{"dim": d, "keepdim": k} for d in dims for k in (True, False)]
    for kwargs in forms:
        x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
        want = function(x, **kwargs)
        (want_grad,) = torch.autograd.grad(want, x)
        got, error, launches = routed(lambda t: function(t, **kwargs), x)
        assert error is None, (kwargs, error)
        assert launches > 0, kwargs
        assert_same(got.detach(), want.detach())
        (grad,) = torch.autograd.grad(got, x)
        assert_same(grad, want_grad)


def test_logsumexp_under_autograd_falls_through():
    """torch's gradient at infinite inputs is NaN; tritonml's is finite."""
    x = f64([[-float("inf")] * 3, [1, float("inf"), 0]]).requires_grad_()
    want = torch.logsumexp(x, 1)
    want.sum().backward()
    want_grad, x.grad = x.grad, None
    got, error, launches = routed(lambda t: torch.logsumexp(t, 1), x)
    assert error is None and launches == 0
    got.sum().backward()
    torch.testing.assert_close(x.grad, want_grad, equal_nan=True)


def test_out_and_in_place_forms_under_autograd_fall_through():
    x = make((2, 3), torch.float32).requires_grad_()
    check_falls_through(lambda t, o: torch.sum(t, 1, out=o), x, torch.empty(2))
    check_falls_through(lambda t: t.clone().cumsum_(1), x)


def test_without_autograd_recording_requires_grad_inputs_are_routed():
    x = make((2, 3), torch.float32).requires_grad_()
    with torch.no_grad():
        check_routed(lambda t: torch.amax(t, 1), x)
    check_routed(lambda t: torch.argmax(t, 1), x)  # indices carry no gradient: routed under autograd
    with torch.no_grad():
        check_routed(lambda t: t.sum(1), torch.nn.Parameter(make((2, 3), torch.float32)))


def test_inference_mode_tensors_are_routed():
    with torch.inference_mode():
        x = make((2, 3), torch.float32)
        check_routed(lambda t: torch.cumsum(t, 1), x)
        check_routed(lambda t: t.cumprod_(0), x)
        out = torch.empty(2)
        got, error, launches = routed(lambda t: torch.sum(t, 1, out=out), x)
        assert got is out and error is None and launches > 0


# -- switching on and off, nesting, threads -------------------------------------------------------

def launches_of(call, *args):
    with _trace.record() as rec:
        call(*args)
    return len(rec.launches)


def cumsum(x):
    return torch.cumsum(x, 0)


def test_routing_is_off_by_default():
    x = make((4,), torch.float32)
    assert torch._C._len_torch_function_stack() == 0
    assert launches_of(cumsum, x) == 0


def test_enable_and_disable():
    x = make((4,), torch.float32)
    enable(devices=CPU)
    assert launches_of(cumsum, x) > 0
    with cuda_only_routing():
        enable(devices=("cuda",))  # a second enable replaces the devices
    assert launches_of(cumsum, x) == 0
    enable("cpu")  # one device needs no tuple
    assert launches_of(cumsum, x) > 0
    disable()
    assert launches_of(cumsum, x) == 0
    assert torch._C._len_torch_function_stack() == 0
    disable()  # disabling twice is harmless


def test_contexts_nest_and_restore_the_outer_state():
    x = make((4,), torch.float32)
    with use_tritonml(CPU):
        assert launches_of(cumsum, x) > 0
        with cuda_only_routing(), use_tritonml(("cuda",)):
            assert launches_of(cumsum, x) == 0
            with use_tritonml(CPU):
                assert launches_of(cumsum, x) > 0
            assert launches_of(cumsum, x) == 0
        assert launches_of(cumsum, x) > 0
        with use_tritonml(()):  # off inside the block
            assert launches_of(cumsum, x) == 0
        disable()
        assert launches_of(cumsum, x) == 0
    assert launches_of(cumsum, x) == 0
    assert torch._C._len_torch_function_stack() == 0


def test_context_restores_enable_state_even_after_an_exception():
    x = make((4,), torch.float32)
    enable(CPU)
    with pytest.raises(KeyError):
        with use_tritonml(()):
            raise KeyError("inside")
    assert launches_of(cumsum, x) > 0
    with cuda_only_routing(), use_tritonml(("cuda",)):
        enable(CPU)  # lasts until the block ends
        assert launches_of(cumsum, x) > 0
        disable()
    assert launches_of(cumsum, x) > 0  # the state found on entry


class Counting(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def test_other_modes_keep_their_stack_order():
    x = make((4,), torch.float32)
    counting = Counting()
    with counting:
        enable(CPU)  # our mode goes below the user's, so the user's exit pops its own
        assert launches_of(cumsum, x) > 0
    assert counting.calls > 0
    assert launches_of(cumsum, x) > 0  # still routed after the user's mode left
    with torch.device("cpu"):  # torch's default-device mode stays at the bottom
        with use_tritonml(CPU):
            assert launches_of(lambda: torch.cumsum(torch.ones(3), 0)) > 0
    disable()
    assert torch._C._len_torch_function_stack() == 0
    with torch.device("cpu"):  # and when routing goes on above it
        enable(CPU)
        assert launches_of(lambda: torch.cumsum(torch.ones(3), 0)) > 0
        disable()
    assert torch._C._len_torch_function_stack() == 0


def test_bad_devices_are_refused():
    with pytest.raises(ValueError, match="devices"):
        enable(devices=("mps",))
    with pytest.raises(ValueError, match="devices"):
        enable(devices=("not a device",))
    with pytest.raises(TypeError, match="devices"):
        enable(devices=3)
    with pytest.raises(TypeError, match="devices"):
        with use_tritonml(devices=(0,)):
            pass
    assert torch._C._len_torch_function_stack() == 0


def test_a_thread_inside_the_context_does_not_route_another_thread():
    x = make((3, 4), torch.float32)
    want = torch.cumsum(x, 1)
    inside_ready, outside_done = threading.Event(), threading.Event()
    results = {}

    def inside():
        with use_tritonml(CPU):
            inside_ready.set()
            with _trace.record() as rec:
                results["inside"] = torch.cumsum(x, 1)
                outside_done.wait(limit(60))  # stay inside while the other thread runs
                results["inside_after"] = torch.cumsum(x, 1)
            results["inside_launches"] = len(rec.launches)

    def outside():
        inside_ready.wait(limit(60))
        try:
            with _trace.record() as rec:
                for _ in range(3):
                    results["outside"] = torch.cumsum(x, 1)
            results["outside_launches"] = len(rec.launches)
        finally:
            outside_done.set()

    threads = [threading.Thread(target=inside), threading.Thread(target=outside)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(limit(120))
    assert results["inside_launches"] == 2 and results["outside_launches"] == 0
    for key in ("inside", "inside_after", "outside"):
        assert_same(results[key], want)


def test_enable_in_one_thread_does_not_enable_another():
    x = make((4,), torch.float32)
    enable(CPU)
    seen = []
    thread = threading.Thread(target=lambda: seen.append(launches_of(cumsum, x)))
    thread.start()
    thread.join(limit(60))
    assert seen == [0]
    assert launches_of(cumsum, x) > 0


def test_routes_is_the_one_table_of_routed_functions():
    # torch.segment_reduce routes through the same table as the scans and reductions, and each
    # torch callable is served by exactly one entry.
    from tritonml import routing

    forms = [form for route in routing.ROUTES for form in route.forms]
    forms += [route.inplace for route in routing.ROUTES if route.inplace is not None]
    assert len(forms) == len(set(forms))
    names = {route.name for route in routing.ROUTES}
    assert {"cumsum", "sum", "vector_norm", "cummax", "var", "segment_reduce"} <= names
    assert torch.segment_reduce in forms and torch.Tensor.cumsum_ in forms
