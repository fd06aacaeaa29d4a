"""Routing of torch's scan and reduce family (tritonml/routing.py, tritonml/routing_family.py):
cummax, cummin, logcumsumexp, max/min with dim, aminmax, var, std, var_mean, std_mean, nansum,
nanmean, compared with torch itself on torch's OpInfo samples for them.

The samples: torch's OpInfo database (``torch.testing._internal.common_methods_invocations``) needs
``expecttest``, which tritonml's environment does not install, and loads the sample functions of
every torch op (seconds of import), so ``_opinfo_samples`` transcribes the sample functions of
these OpInfos (sample_inputs_cumulative_ops, sample_inputs_logcumsumexp,
sample_inputs_max_min_reduction_with_dim, sample_inputs_aminmax, sample_inputs_std_var,
sample_inputs_std_var_unbiased, sample_inputs_nan_reduction; S = 5) with the same shapes,
arguments and ``torch.testing.make_tensor`` values, on the OpInfos' CPU dtypes that routing serves.
Each routed call (``_trace.record`` shows it launched) must equal torch's result outside routing:
the result type (``torch.return_types``), dtypes and shapes; integers, bool and indices exactly,
floats within the dtype's tolerance (``TOLERANCE``).
"""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.testing import make_tensor

import tritonml
from tritonml.runtime import trace as _trace

# torch's forward-mode AD loads its jvp decompositions on first use through torch.jit.script,
# which torch itself has deprecated
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")

CPU = ("cpu",)
S = 5
# rtol, atol per float dtype, as tests/test_routing.py: torch and tritonml add in different orders
# (tritonml's half types in float32, torch's CPU kernels partly in the half type itself).
TOLERANCE = {
    torch.float16: (2e-3, 2e-3),
    torch.bfloat16: (1.6e-2, 1e-2),
    torch.float32: (1e-5, 1e-6),
    torch.float64: (1e-12, 1e-14),
}
FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
ALL = FLOATS + (torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool)

# op name -> (the OpInfo's CPU dtypes that routing serves, how torch is called)
OPS = {
    "cummax": (ALL, torch.cummax),
    "cummin": (ALL, torch.cummin),
    "logcumsumexp": (FLOATS, torch.logcumsumexp),
    "max": (ALL, torch.max),
    "min": (ALL, torch.min),
    "aminmax": (ALL, torch.aminmax),
    "var": (FLOATS, torch.var),
    "std": (FLOATS, torch.std),
    "var_mean": (FLOATS, torch.var_mean),
    "std_mean": (FLOATS, torch.std_mean),
    "nansum": (ALL, torch.nansum),
    "nanmean": (FLOATS, torch.nanmean),
}


def _reduction_inputs(dtype):
    """opinfo/core.py: _generate_reduction_inputs, and the NaN inputs of
    _generate_nan_reduction_inputs."""
    make = lambda shape: make_tensor(shape, dtype=dtype, device="cpu")
    yield from (make([]), make([2]), make([3, 5]), make([3, 2, 1, 2]))
    if dtype.is_floating_point:
        yield torch.tensor([2, torch.nan, -1], dtype=dtype)
        yield torch.tensor([[torch.nan, 2], [0, 1]], dtype=dtype)


def _reduction_kwargs(ndim):
    """opinfo/core.py: _generate_reduction_kwargs (several dims)."""
    yield {}
    yield {"dim": 0, "keepdim": True}
    yield {"dim": -1, "keepdim": False}
    if ndim > 2:
        yield {"dim": ndim // 2, "keepdim": True}
    yield {"dim": tuple(range(ndim)), "keepdim": False}
    if ndim > 1:
        yield {"dim": (0, -1), "keepdim": True}
    if ndim > 3:
        yield {"dim": tuple(range(1, ndim, 2)), "keepdim": False}


def _opinfo_samples(name, dtype):
    """(args, kwargs) of torch's OpInfo samples for ``name`` (see the module docstring)."""
    torch.manual_seed(0)   # make_tensor draws from the global generator, as in torch's tests
    make = lambda *shape, **kw: make_tensor(shape, dtype=dtype, device="cpu", **kw)
    if name in ("cummax", "cummin"):
        return [((make(S, S, S), 0), {}), ((make(S, S, S), 1), {}), ((make(), 0), {})]
    if name == "logcumsumexp":
        samples = []
        for large in (True, False):
            for shape, dim in (((S, S, S), 0), ((S, S, S), 1), ((), 0)):
                t = make(*shape)
                if large and t.dim():
                    t[0] = 10000
                samples.append(((t, dim), {}))
        return samples
    if name in ("max", "min"):
        return [((make(S, S, S), 1), {}), ((make(S, S, S), 1, True), {}), ((make(), 0), {}),
                ((make(), 0, True), {})]
    if name == "aminmax":
        return [((make(*shape),), kwargs) for shape, kwargs in (
            ((S, S, S), {}), ((S, S, S), {"dim": 1}), ((S, S, S), {"dim": 1, "keepdim": True}),
            ((), {"dim": 0}), ((), {}), ((), {"dim": 0, "keepdim": True}),
            ((S, 0, S), {"dim": 0}))]
    if name in ("var", "std", "var_mean", "std_mean"):
        nd, one = (lambda: make(S, S, S)), (lambda: make(S))
        samples = [((nd(),), {}), ((nd(),), {"dim": 1}),
                   ((nd(),), {"dim": 1, "unbiased": True, "keepdim": True}),
                   ((one(),), {"dim": 0, "unbiased": True, "keepdim": True}),
                   ((one(),), {"dim": 0, "unbiased": False, "keepdim": False}),
                   ((nd(),), {"dim": (1,), "correction": 1.3}),
                   ((nd(),), {"dim": (1,), "correction": S // 2}),
                   ((nd(),), {"dim": None, "correction": 0, "keepdim": True}),
                   ((nd(),), {"dim": None, "correction": None}),
                   ((nd(),), {"dim": None, "correction": -1}),
                   ((nd(),), {"dim": None, "correction": -5}),
                   ((nd(),), {"correction": 0.5, "keepdim": True}),
                   ((nd(),), {"correction": 0, "keepdim": True}),
                   ((make(3, 4, 5),), {"dim": -3}),
                   ((make(0),), {}), ((make(0, S),), {}), ((make(0, S),), {"dim": 0}),
                   # sample_inputs_std_var_unbiased: the (input, unbiased) overload
                   ((make(S, S), True), {}), ((make(S), False), {}), ((make(0), False), {}),
                   ((make(0, S), True), {})]
        return samples
    assert name in ("nansum", "nanmean")
    samples = []
    for t in _reduction_inputs(dtype):
        samples.append(((t.clone(),), {}))
        samples.extend(((t.clone(),), kwargs) for kwargs in _reduction_kwargs(t.ndim))
    return samples


def _parts(result):
    return tuple(result) if isinstance(result, tuple) else (result,)


def assert_same_result(got, want):
    """torch's result type, and each tensor's dtype, shape and values (``TOLERANCE``)."""
    assert type(got) is type(want)
    for g, w in zip(_parts(got), _parts(want), strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape and g.device == w.device
        if w.dtype.is_floating_point:
            rtol, atol = TOLERANCE[w.dtype]
            torch.testing.assert_close(g, w, equal_nan=True, rtol=rtol, atol=atol)
        else:
            assert torch.equal(g, w)


def _routed(function, args, kwargs):
    with tritonml.use_tritonml(devices=CPU), _trace.record() as rec:
        result = function(*args, **kwargs)
    return result, bool(rec.launches)


def _cases():
    cases = []
    for name, (dtypes, _) in OPS.items():
        for dtype in dtypes:
            cases.append(pytest.param(name, dtype, id=f"{name}-{str(dtype)[6:]}"))
    return cases


@pytest.mark.parametrize("name,dtype", _cases())
def test_routed_calls_equal_torch_on_its_opinfo_samples(name, dtype):
    function = OPS[name][1]
    for args, kwargs in _opinfo_samples(name, dtype):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # torch's "degrees of freedom <= 0" (correction)
            want = function(*args, **kwargs)
            got, launched = _routed(function, args, kwargs)
        x = args[0]
        empty_scan = x.numel() == 0
        assert launched or empty_scan, (name, args, kwargs)
        assert_same_result(got, want)


# ---------------------------------------------------------------------------------------------
# Forms, autograd, and what falls through
# ---------------------------------------------------------------------------------------------
def _x(*shape, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(-3, 4, shape, generator=g).to(dtype)   # small integers: ties


METHOD_FORMS = [
    (lambda t: t.cummax(1), lambda t: t.cummin(dim=0), lambda t: t.logcumsumexp(-1)),
    (lambda t: t.max(1, keepdim=True), lambda t: t.min(dim=0), lambda t: t.aminmax(dim=-1)),
    (lambda t: t.var(1, keepdim=True), lambda t: t.std(unbiased=False),
     lambda t: torch.var_mean(t, 0, True), lambda t: torch.std_mean(input=t, axis=1)),
    (lambda t: t.nansum(dim=(0, 1)), lambda t: t.nanmean(1, True),
     lambda t: torch.nansum(t, dtype=torch.float64)),
]


@pytest.mark.parametrize("forms", METHOD_FORMS, ids=["scans", "extremes", "moments", "nan"])
def test_method_forms_keywords_and_strided_inputs(forms):
    x = _x(6, 4).t()[:, ::2]    # transposed and strided
    x[1, 0] = float("nan")
    for form in forms:
        want = form(x)
        got, launched = _routed(form, (x,), {})
        assert launched
        assert_same_result(got, want)


def test_routed_gradients_are_torchs():
    """Routed under autograd, the result carries tritonml's backward, equal to torch's: the index
    taken (max, cummax), ties split evenly (aminmax), var's and nanmean's closed forms."""
    x = _x(4, 5, seed=1)
    x[0, 1] = float("nan")
    calls = [lambda t: torch.cummax(t, 1).values, lambda t: torch.max(t.nan_to_num(), 0)[0],
             lambda t: sum(torch.aminmax(t.nan_to_num(), dim=1)),
             lambda t: torch.var(t.nan_to_num(), 1, correction=0),
             lambda t: torch.std_mean(t.nan_to_num())[0], lambda t: torch.nanmean(t, 1),
             lambda t: torch.logcumsumexp(t.nan_to_num(), 0)]
    for call in calls:
        t = x.clone().requires_grad_()
        want, = torch.autograd.grad(call(t).nansum(), t)
        t = x.clone().requires_grad_()
        with tritonml.use_tritonml(devices=CPU), _trace.record() as rec:
            result = call(t)
        assert rec.launches and result.grad_fn is not None
        got, = torch.autograd.grad(result.nansum(), t)
        torch.testing.assert_close(got, want, equal_nan=True)


FALL_THROUGH = [
    ("max without dim", lambda x: torch.max(x)),
    ("max of two tensors", lambda x: torch.max(x, x)),
    ("max over an empty dim", lambda x: torch.max(x[:, :0], 1)),
    ("aminmax over an empty dim", lambda x: torch.aminmax(x[:0])),
    ("cummax with out=", lambda x: torch.cummax(
        x, 0, out=(torch.empty_like(x), torch.empty(x.shape, dtype=torch.long)))),
    ("var with out=", lambda x: torch.var(x, 0, out=torch.empty(x.shape[1], dtype=x.dtype))),
    ("var of integers", lambda x: torch.var(x.long())),
    ("var with unbiased and correction", lambda x: torch.var(x, unbiased=True, correction=1)),
    ("logcumsumexp of integers", lambda x: torch.logcumsumexp(x.long(), 0)),
    ("nanmean of integers", lambda x: torch.nanmean(x.long())),
    ("nansum of floats to an integer dtype", lambda x: torch.nansum(x, dtype=torch.int32)),
    ("aminmax with a positional dim", lambda x: torch.aminmax(x, 0)),
    ("complex", lambda x: torch.var(x.to(torch.complex64))),
    ("uint16", lambda x: torch.cummax(x.abs().to(torch.uint16), 0)),
]


@pytest.mark.parametrize("case,call", FALL_THROUGH, ids=[c for c, _ in FALL_THROUGH])
def test_what_torch_defines_otherwise_falls_through(case, call):
    """No launch; the result, or torch's own error, is torch's."""
    x = _x(3, 4)
    try:
        want = call(x)
    except Exception as error:   # torch's own error (RuntimeError, IndexError, TypeError)
        with tritonml.use_tritonml(devices=CPU), _trace.record() as rec:
            with pytest.raises(type(error)):
                call(x)
    else:
        with tritonml.use_tritonml(devices=CPU), _trace.record() as rec:
            got = call(x)
        assert_same_result(got, want)
    assert not rec.launches


def test_forward_mode_ad_falls_through():
    import torch.autograd.forward_ad as fwAD
    x = _x(3, 4)
    with fwAD.dual_level(), tritonml.use_tritonml(devices=CPU), _trace.record() as rec:
        dual = fwAD.make_dual(x, torch.ones_like(x))
        tangent = fwAD.unpack_dual(torch.var(dual, 1)).tangent
    assert not rec.launches
    assert torch.allclose(tangent, 2 * (x - x.mean(1, keepdim=True)).sum(1) / 3)
