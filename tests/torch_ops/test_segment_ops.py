"""tritonml.segment_reduce / segment_scan, their torch ops, jagged nested tensors and the routing of
torch.segment_reduce, against loops over the segments in float64 / exact integers (numpy), and
against torch.segment_reduce for the routed calls."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonml
import tritonml.launchers.segment as segment_launchers
from benchmarks.reduce_oracle import (FLOAT_ONLY, INDEX_FUNCTIONS, assert_matches, make_input,
                                      oracle)
from benchmarks.scan_oracle import scan_matches, to_numpy
from tritonml.core.dtypes import FLOAT_DTYPES
from tritonml.runtime import trace as _trace
from tests.op_log import OpLog

OPS = torch.ops.tritonml
# forward-mode AD loads torch's jvp decompositions on first use, which torch.jit.script (deprecated)
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")



def _offsets(*bounds, dtype=torch.int64):
    return torch.tensor(bounds, dtype=dtype)


# ---------------------------------------------------------------------------------------------
# Oracles: loops over the segments
# ---------------------------------------------------------------------------------------------
def _empty_value(function: str, dtype: torch.dtype, axis_len: int):
    """The documented value of an empty segment (no initial)."""
    if function in INDEX_FUNCTIONS:
        return axis_len
    if function in ("MAX", "MIN"):
        if dtype in FLOAT_DTYPES:
            return -np.inf if function == "MAX" else np.inf
        info = torch.iinfo(dtype)
        return info.min if function == "MAX" else info.max
    return {"SUM": 0, "MULTIPLY": 1, "AVERAGE": np.nan, "LOG_SUM": -np.inf,
            "LOG_SUM_EXP": -np.inf, "L1": 0, "L2": 0, "SUM_SQUARE": 0}[function]


def _with_initial(r, function, initial, count):
    if initial is None:
        return r
    return {"SUM": lambda: r + initial, "MULTIPLY": lambda: r * initial,
            "MAX": lambda: np.maximum(r, initial), "MIN": lambda: np.minimum(r, initial),
            "AVERAGE": lambda: r + initial / count}[function]()


def expected_reduce(x, function, offsets, axis, keepdims=False, initial=None):
    """Each segment by reduce_oracle.oracle (float64 / 64-bit integers), cast once."""
    function = function.upper()
    bounds = offsets.tolist()
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        shape = list(x.shape)
        shape[axis] = 1
        if hi == lo:
            fill = initial if initial is not None else _empty_value(function, x.dtype,
                                                                    x.shape[axis])
            parts.append(np.full(shape, fill, dtype=np.float64 if x.dtype in FLOAT_DTYPES
                                 or function in INDEX_FUNCTIONS else np.int64))
            continue
        r = oracle(x.narrow(axis, lo, hi - lo), function, (axis,), keepdims=True)
        if function in INDEX_FUNCTIONS:
            r = r + lo
        parts.append(_with_initial(r, function, initial, hi - lo))
    r = np.concatenate(parts, axis) if parts else np.zeros(
        [0 if d == axis else s for d, s in enumerate(x.shape)])
    if keepdims:
        r = np.expand_dims(r, axis + 1)
    if function in INDEX_FUNCTIONS:
        return torch.from_numpy(np.asarray(r, dtype=np.int64))
    if x.dtype in FLOAT_DTYPES:
        return torch.from_numpy(np.asarray(r, dtype=np.float64)).to(x.dtype)
    return torch.from_numpy(np.asarray(r).astype(torch.empty((), dtype=x.dtype).numpy().dtype))


def assert_scan_matches(result, x, function, offsets, axis, reverse, exclusive):
    """Each segment against scan_oracle's reference, within its bounds."""
    a = to_numpy(x)
    bounds = offsets.tolist()
    assert result.shape == x.shape and result.dtype == x.dtype
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        if hi > lo:
            ok, message = scan_matches(result.narrow(axis, lo, hi - lo),
                                       np.take(a, range(lo, hi), axis=axis), axis, function,
                                       reverse, exclusive)
            assert ok, f"segment [{lo}, {hi}): {message}"


# ---------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------
_REDUCE_CASES = [
    # function, dtype, shape, axis, offsets
    ("SUM", torch.float32, (7, 3), 0, (0, 3, 4, 7)),
    ("MAX", torch.int32, (2, 6), 1, (0, 4, 6)),
    ("MULTIPLY", torch.float64, (6,), 0, (0, 1, 6)),
    ("LOG_SUM_EXP", torch.bfloat16, (3, 5), -1, (0, 2, 5)),
    ("AVERAGE", torch.float16, (5, 2), 0, (0, 5)),
    ("MIN", torch.int64, (5,), 0, (0, 2, 5)),
    ("L1", torch.int16, (4, 2), 0, (0, 3, 4)),
    ("L2", torch.float32, (2, 5), 1, (0, 1, 5)),
    ("LOG_SUM", torch.float64, (5,), 0, (0, 4, 5)),
    ("SUM_SQUARE", torch.uint8, (5, 2), 0, (0, 2, 5)),
    ("SUM", torch.int8, (6,), 0, (0, 3, 6)),
]


@pytest.mark.parametrize("function,dtype,shape,axis,bounds", _REDUCE_CASES,
                         ids=[f"{c[0]}-{c[1]}".replace("torch.", "") for c in _REDUCE_CASES])
def test_segment_reduce_matches_the_loop_over_segments(function, dtype, shape, axis, bounds):
    x = make_input(shape, dtype, function, seed=len(bounds))
    offsets = _offsets(*bounds)
    result = tritonml.segment_reduce(x, function.lower(), offsets=offsets, axis=axis)
    assert_matches(result, expected_reduce(x, function, offsets, axis % x.dim()), function)
    lengths = offsets.diff()
    again = tritonml.segment_reduce(x, function, lengths=lengths, axis=axis, keepdims=True)
    assert_matches(again, expected_reduce(x, function, offsets, axis % x.dim(), keepdims=True))


def test_segment_reduce_reads_non_contiguous_x_and_offsets():
    x = make_input((6, 5), torch.float32, "SUM", seed=3).t()          # (5, 6), strides (1, 5)
    offsets = torch.tensor([0, 9, 2, 9, 6, 9], dtype=torch.int32)[::2]   # 0, 2, 6; stride 2
    result = tritonml.segment_reduce(x, "sum", offsets=offsets, axis=1)
    assert_matches(result, expected_reduce(x, "SUM", offsets.long(), 1))


@pytest.mark.parametrize("function,initial", [
    ("SUM", None), ("MAX", None), ("LOG_SUM", None), ("ARGMAX", None), ("ARGMIN", None),
    ("SUM", 2.5), ("MULTIPLY", -2.0), ("MAX", 9.0), ("MIN", -9.0), ("AVERAGE", 4.0)])
def test_empty_segments_initial_and_index_rules(function, initial):
    x = make_input((7, 2), torch.float32, function, seed=5)
    offsets = _offsets(0, 0, 3, 3, 7, 7)
    result = tritonml.segment_reduce(x, function, offsets=offsets, initial=initial)
    assert_matches(result, expected_reduce(x, function, offsets, 0, initial=initial))


def test_all_empty_and_integer_initial():
    x = torch.zeros(0, 3, dtype=torch.int32)
    result = tritonml.segment_reduce(x, "max", lengths=torch.zeros(2, dtype=torch.int64))
    assert torch.equal(result, torch.full((2, 3), torch.iinfo(torch.int32).min, dtype=torch.int32))
    y = torch.arange(6, dtype=torch.int64)
    result = tritonml.segment_reduce(y, "sum", offsets=_offsets(0, 2, 6), initial=2**40)
    assert torch.equal(result, torch.tensor([1 + 2**40, 14 + 2**40]))


@pytest.mark.parametrize("function,dtype", [("sum", torch.float32), ("product", torch.float64),
                                            ("sum", torch.int32), ("product", torch.bfloat16)])
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, True), (False, True)])
def test_segment_scan_matches_the_loop_over_segments(function, dtype, reverse, exclusive):
    x = make_input((3, 9), dtype, "MULTIPLY" if function == "product" else "SUM", seed=2)
    offsets = _offsets(0, 4, 4, 5, 9)              # an empty and a one-element segment
    result = tritonml.segment_scan(x, function, offsets=offsets, axis=1, reverse=reverse,
                                   exclusive=exclusive)
    assert_scan_matches(result, x, function, offsets, 1, reverse, exclusive)


def test_segment_scan_of_a_transposed_view_along_axis_0():
    x = make_input((4, 6), torch.float32, "SUM", seed=4).t()    # (6, 4), non-contiguous
    offsets = _offsets(0, 2, 6)
    result = tritonml.segment_scan(x, tritonml.records.builtin_scans.SUM, offsets=offsets)
    assert_scan_matches(result, x, "sum", offsets, 0, False, False)


# ---------------------------------------------------------------------------------------------
# Argument checks: every one raises before anything is launched, leaving inputs untouched
# ---------------------------------------------------------------------------------------------
_X = torch.arange(10.).reshape(5, 2)
_BAD = [
    (dict(offsets=_offsets(0, 3, 2, 5)), ValueError, r"^offsets: must be non-decreasing, but "
                                                     r"offsets\[1\] = 3 > offsets\[2\] = 2"),
    (dict(offsets=torch.tensor([0., 5.])), TypeError, "^offsets: expected an integer dtype"),
    (dict(offsets=_offsets(0, 2, 4)), ValueError, r"^offsets: the last boundary offsets\[-1\] = 4 "
                                                  r"must equal x.shape\[axis\] = 5"),
    (dict(offsets=_offsets(1, 2, 5)), ValueError,
     r"^offsets: must start at 0, but offsets\[0\] = 1"),
    (dict(offsets=_offsets(-1, 5)), ValueError, "^offsets: must start at 0"),
    (dict(lengths=_offsets(3, -1, 3)), ValueError, r"^lengths: must be non-negative, but "
                                                   r"lengths\[1\] = -1"),
    (dict(lengths=_offsets(3, 3)), ValueError, r"^lengths: sum to 6, but x.shape\[axis\] is 5"),
    (dict(offsets=torch.zeros(2, dtype=torch.int64, device="meta")), ValueError,
     "^offsets: tensor is on meta but x is on cpu"),
    (dict(offsets=_offsets(0, 5).reshape(1, 2)), ValueError, r"^offsets: expected a 1-D tensor"),
    (dict(offsets=[0, 5]), TypeError, "^offsets: expected a 1-D integer torch.Tensor, got list"),
    (dict(offsets=_offsets()), ValueError, "^offsets: is empty"),
    (dict(offsets=_offsets(0, 5), lengths=_offsets(5)), ValueError,
     "^offsets, lengths: pass exactly one"),
    (dict(), ValueError, "^offsets, lengths: pass exactly one"),
    (dict(offsets=_offsets(0, 5), initial=1.0, function="l2"), ValueError,
     "^initial: only AVERAGE, MAX, MIN, MULTIPLY, SUM take"),
    (dict(offsets=_offsets(0, 5), initial=True), TypeError, "^initial: expected a Python number"),
    (dict(offsets=_offsets(0, 5), function="median"), ValueError, "^function:"),
    (dict(offsets=_offsets(0, 5), axis=2), ValueError, "^axis: 2 is out of range"),
    (dict(offsets=_offsets(0, 5), keepdims=1), TypeError, "^keepdims: expected a bool"),
]


@pytest.mark.parametrize("kwargs,error,message", _BAD, ids=[m[1:30] for _, _, m in _BAD])
def test_bad_arguments_raise_before_any_launch(kwargs, error, message):
    kwargs = dict(kwargs)
    function = kwargs.pop("function", "sum")
    x = _X.clone()
    with _trace.record() as rec, pytest.raises(error, match=message):
        tritonml.segment_reduce(x, function, **kwargs)
    assert rec.launches == [] and torch.equal(x, _X)


def test_scan_and_integer_checks_raise_before_any_launch():
    x = torch.arange(6, dtype=torch.int32)
    with _trace.record() as rec:
        with pytest.raises(ValueError, match="^function: segment_scan takes a ScanCombine"):
            tritonml.segment_scan(x, "max", offsets=_offsets(0, 6))
        with pytest.raises(ValueError, match="^offsets: must be non-decreasing"):
            tritonml.segment_scan(x, "sum", offsets=_offsets(0, 4, 3, 6))
        with pytest.raises(TypeError, match="^initial: x has the integer dtype"):
            tritonml.segment_reduce(x, "max", offsets=_offsets(0, 6), initial=0.5)
        with pytest.raises(ValueError, match="^initial: 128 is out of range"):
            tritonml.segment_reduce(x.to(torch.int8), "sum", offsets=_offsets(0, 6), initial=128)
        with pytest.raises(TypeError, match="^function: AVERAGE is defined for floating-point"):
            tritonml.segment_reduce(x, "average", offsets=_offsets(0, 6))
        with pytest.raises(ValueError, match="^x: a 0-d tensor has no axis"):
            tritonml.segment_reduce(torch.tensor(1.), "sum", offsets=_offsets(0, 1))
    assert rec.launches == []


@pytest.fixture
def check_counts(monkeypatch):
    """How often x's check (``check_tensor``) and the boundaries' (``_check_boundary_tensor``)
    ran since the last ``reset``; every call starts with no plans (a reused plan checks
    nothing)."""
    from tritonml import runtime
    from tritonml.core import checks as _checks
    counts = {"x": 0, "offsets": 0}
    for module, name, kind in ((_checks, "check_tensor", "x"),
                               (segment_launchers, "_check_boundary_tensor", "offsets")):
        def counting(*args, _original=getattr(module, name), _kind=kind, **kwargs):
            counts[_kind] += 1
            return _original(*args, **kwargs)
        monkeypatch.setattr(module, name, counting)

    def reset():
        runtime.clear()
        counts.update(x=0, offsets=0)
    yield counts, reset
    runtime.clear()


def test_each_check_runs_once_per_call(check_counts):
    """The public functions check before torch's dispatcher, the op passes its arguments through
    and the launcher skips what the public function checked (``prechecked``): one check of x and
    one of the boundaries a call, on the direct path and through the op alike. A launcher or op
    called on its own checks everything, once."""
    counts, reset = check_counts
    x, offsets = torch.randn(6, 3, dtype=torch.float64), _offsets(0, 2, 6)
    wants_grad = x.clone().requires_grad_()
    calls = {
        "reduce, direct": lambda: tritonml.segment_reduce(x, "max", offsets=offsets),
        "reduce, through the op": lambda: tritonml.segment_reduce(wants_grad, "max",
                                                                  offsets=offsets),
        "reduce, lengths": lambda: tritonml.segment_reduce(x, "sum", lengths=_offsets(2, 4)),
        "scan, direct": lambda: tritonml.segment_scan(x, "sum", offsets=offsets),
        "scan, through the op": lambda: tritonml.segment_scan(wants_grad, "sum", offsets=offsets),
        "a Reduction": lambda: tritonml.segment_reduce(x, tritonml.reductions.welford,
                                                       offsets=offsets),
        "the op alone": lambda: OPS.segment_reduce(x, offsets.int(), "SUM", 0, False, None),
        "the launcher alone": lambda: segment_launchers.segment_scan_axis(
            x, tritonml.launchers.scan.SUM, offsets, 0),
    }
    for name, call in calls.items():
        reset()
        call()
        assert counts == {"x": 1, "offsets": 1}, name


# ---------------------------------------------------------------------------------------------
# Autograd: reverse and forward mode against finite differences (float64)
# ---------------------------------------------------------------------------------------------
_DIFFERENTIABLE = ["SUM", "AVERAGE", "L1", "L2", "LOG_SUM", "LOG_SUM_EXP", "MAX", "MIN",
                   "MULTIPLY", "SUM_SQUARE"]


@pytest.mark.parametrize("function", _DIFFERENTIABLE)
def test_segment_reduce_gradcheck_reverse_and_forward(function, fast):
    g = torch.Generator().manual_seed(7)
    x = torch.rand(5, 2, generator=g, dtype=torch.float64) + 0.5
    if function == "MULTIPLY":
        x[1, 0] = 0.0                                # one zero in a segment
        x[3, 1] = x[4, 1] = 0.0                      # and two in another
    if function in ("L1",):
        x = x - 1.0
    x = x.t().requires_grad_()                       # (2, 5), non-contiguous; segments on axis 1
    offsets = _offsets(0, 2, 5)
    initial = 1.5 if function in ("SUM", "MULTIPLY", "AVERAGE") else None

    def f(t):
        return tritonml.segment_reduce(t, function, offsets=offsets, axis=1, initial=initial,
                                       keepdims=function == "L2")
    assert torch.autograd.gradcheck(f, (x,), check_forward_ad=True, fast_mode=fast)


@pytest.mark.parametrize("function,initial", [("AVERAGE", 1.0), ("MAX", None)])
def test_gradcheck_with_empty_segments(function, initial, fast):
    x = (torch.rand(5, dtype=torch.float64) + 0.5).requires_grad_()
    offsets = _offsets(0, 0, 2, 2, 5)
    assert torch.autograd.gradcheck(
        lambda t: tritonml.segment_reduce(t, function, offsets=offsets, initial=initial)
        .nan_to_num(posinf=7.0, neginf=-7.0), (x,), check_forward_ad=True, fast_mode=fast)


@pytest.mark.parametrize("function,reverse,exclusive", [
    ("sum", False, False), ("product", True, False), ("sum", True, True), ("product", False, True),
    ("product", False, False), ("sum", True, False), ("product", True, True), ("sum", False, True)])
def test_segment_scan_gradcheck_reverse_and_forward(function, reverse, exclusive, fast):
    x = torch.tensor([0.7, 1.3, 0.9, 1.1, 0.6, 1.4], dtype=torch.float64)
    if function == "product":
        x[1] = x[4] = x[5] = 0.0                     # zeros: one in a segment, two in another
    x.requires_grad_()
    offsets = _offsets(0, 3, 3, 6)

    def f(t):
        return tritonml.segment_scan(t, function, offsets=offsets, reverse=reverse,
                                     exclusive=exclusive)
    assert torch.autograd.gradcheck(f, (x,), check_forward_ad=True, fast_mode=fast)


def test_double_backward_of_a_segment_sum_of_squares_and_a_product_scan(fast):
    x = torch.tensor([0.7, 1.3, 0.9], dtype=torch.float64, requires_grad=True)
    offsets = _offsets(0, 1, 3)
    assert torch.autograd.gradgradcheck(
        lambda t: tritonml.segment_reduce(t, "sum_square", offsets=offsets), (x,),
        fast_mode=fast)
    assert torch.autograd.gradgradcheck(
        lambda t: tritonml.segment_scan(t, "product", offsets=offsets), (x,), fast_mode=fast)


def test_max_gradient_shares_ties_as_torch_segment_reduce():
    x = torch.tensor([3., 1., 3., 2., 5.], requires_grad=True)
    lengths = _offsets(3, 2)
    grad = torch.tensor([2., 4.])
    torch.segment_reduce(x, "max", lengths=lengths).backward(grad)
    expected, x.grad = x.grad, None
    tritonml.segment_reduce(x, "max", lengths=lengths).backward(grad)
    assert torch.equal(x.grad, expected)            # [1, 0, 1, 0, 4]: ties split evenly


def test_gradients_run_on_tritonmls_own_ops():
    x = torch.rand(6, dtype=torch.float64, requires_grad=True)
    offsets = _offsets(0, 2, 6)
    y = tritonml.segment_scan(x, "sum", offsets=offsets)
    with OpLog() as log:
        y.backward(torch.ones(6, dtype=torch.float64))
    assert "tritonml.segment_scan.default" in log.ops
    assert torch.equal(x.grad, torch.tensor([2., 1., 4., 3., 2., 1.], dtype=torch.float64))


def test_torch_func_jvp_jacfwd_and_vmap_of_grad():
    from torch.func import grad, jacfwd, jvp, vmap
    x = torch.rand(5, dtype=torch.float64) + 0.5
    offsets = _offsets(0, 2, 5)
    f = lambda t: tritonml.segment_reduce(t, "sum", offsets=offsets)    # noqa: E731
    _, tangent = jvp(f, (x,), (torch.ones(5, dtype=torch.float64),))
    assert torch.equal(tangent, torch.tensor([2., 3.], dtype=torch.float64))
    jac = jacfwd(lambda t: tritonml.segment_scan(t, "sum", offsets=offsets))(x)
    expected = torch.zeros(5, 5, dtype=torch.float64)
    expected[:2, :2] = torch.tril(torch.ones(2, 2))
    expected[2:, 2:] = torch.tril(torch.ones(3, 3))
    assert torch.equal(jac, expected)
    rows = torch.stack([x, x.flip(0)])
    per_row = vmap(grad(lambda t: tritonml.segment_reduce(t, "max", offsets=offsets).sum()))(rows)
    assert torch.equal(per_row.sum(1), torch.full((2,), 2., dtype=torch.float64))


# ---------------------------------------------------------------------------------------------
# vmap: one set of offsets for the batch, or one per batch element
# ---------------------------------------------------------------------------------------------
def test_vmap_with_shared_and_with_batched_offsets():
    from torch.func import vmap
    x = make_input((3, 6, 2), torch.float32, "SUM", seed=9)
    shared = _offsets(0, 2, 6)
    result = vmap(lambda t: tritonml.segment_reduce(t, "sum", offsets=shared))(x)
    for b in range(3):
        assert_matches(result[b], expected_reduce(x[b], "SUM", shared, 0))
    per_row = torch.tensor([[0, 1, 6], [0, 4, 6], [0, 3, 6]])
    result = vmap(lambda t, o: OPS.segment_reduce(t, o, "MAX", 0, True, None))(x, per_row)
    scans = vmap(lambda t, o: OPS.segment_scan(t, o, "SUM", 0, True, False))(x, per_row)
    for b in range(3):
        assert_matches(result[b], expected_reduce(x[b], "MAX", per_row[b], 0, keepdims=True))
        assert_scan_matches(scans[b], x[b], "sum", per_row[b], 0, True, False)


# ---------------------------------------------------------------------------------------------
# The torch ops: opcheck, fake kernels, torch.compile and export
# ---------------------------------------------------------------------------------------------
_OPCHECK = [
    ("segment_reduce", (make_input((5, 3), torch.float64, "SUM"), _offsets(0, 2, 5), "SUM", 0,
                        False, None)),
    ("segment_reduce", (make_input((3, 5), torch.float32, "ARGMAX"), _offsets(0, 4, 5), "ARGMAX",
                        1, True, None)),
    ("segment_scan", (make_input((5, 2), torch.float64, "SUM"), _offsets(0, 1, 5), "PRODUCT", 0,
                      True, False)),
    ("segment_scan", (make_input((2, 5), torch.int32, "SUM"), _offsets(0, 3, 5, dtype=torch.int32),
                      "SUM", -1, False, True)),
]


@pytest.mark.parametrize("name,args", _OPCHECK, ids=[f"{n}-{i}" for i, (n, _) in
                                                     enumerate(_OPCHECK)])
def test_opcheck(name, args):
    if args[0].is_floating_point():
        args = (args[0].clone().requires_grad_(),) + args[1:]
    result = torch.library.opcheck(getattr(OPS, name).default, args)
    assert set(result.values()) == {"SUCCESS"}, result


def test_fake_kernels_give_static_shapes_without_a_launch():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with _trace.record() as rec, FakeTensorMode():
        x = torch.empty(4, 9, 3)
        offsets = torch.empty(6, dtype=torch.int64)
        r = tritonml.segment_reduce(x, "argmin", offsets=offsets, axis=1, keepdims=True)
        assert r.shape == (4, 5, 1, 3) and r.dtype == torch.int64
        assert tritonml.segment_scan(x, "sum", lengths=offsets[:4], axis=1).shape == (4, 9, 3)
    assert rec.launches == []


def _model(t, offsets):
    y = tritonml.segment_scan(t, "product", offsets=offsets, axis=1, exclusive=True)
    return tritonml.segment_reduce(y * 0.5, "l2", offsets=offsets, axis=1).sum()


def test_torch_compile_fullgraph_forward_and_backward():
    torch._dynamo.reset()
    x = (torch.rand(3, 6, dtype=torch.float64) + 0.5).requires_grad_()
    offsets = _offsets(0, 2, 6)
    value = torch.compile(_model, backend="aot_eager", fullgraph=True)(x, offsets)
    value.backward()
    reference = x.detach().clone().requires_grad_()
    expected = _model(reference, offsets)
    expected.backward()
    torch.testing.assert_close(value, expected)
    torch.testing.assert_close(x.grad, reference.grad)


def test_export_captures_the_ops_and_the_program_runs():
    class Module(torch.nn.Module):
        def forward(self, t, lengths):
            y = tritonml.segment_scan(t, "sum", lengths=lengths)
            return tritonml.segment_reduce(y, "max", lengths=lengths)

    x, lengths = make_input((6, 2), torch.float32, "SUM", seed=1), _offsets(4, 2)
    program = torch.export.export(Module(), (x, lengths))
    code = program.graph_module.code
    assert "torch.ops.tritonml.segment_scan.default" in code
    assert "torch.ops.tritonml.segment_reduce.default" in code
    assert torch.equal(program.module()(x, lengths), Module()(x, lengths))


# ---------------------------------------------------------------------------------------------
# User reductions and combines
# ---------------------------------------------------------------------------------------------
def test_a_user_reduction_with_two_outputs_over_segments():
    x = make_input((7, 2), torch.float32, "SUM", seed=6)
    var, mean = tritonml.segment_reduce(x, tritonml.records.ready_reductions.welford, offsets=_offsets(0, 3, 7))
    a = x.double().numpy()
    for i, (lo, hi) in enumerate([(0, 3), (3, 7)]):
        np.testing.assert_allclose(var[i].numpy(), a[lo:hi].var(0, ddof=1), rtol=1e-5)
        np.testing.assert_allclose(mean[i].numpy(), a[lo:hi].mean(0), rtol=1e-5, atol=1e-6)
    with pytest.raises(RuntimeError, match="^x: requires grad, but segment_reduce has no"):
        tritonml.segment_reduce(x.requires_grad_(), tritonml.records.ready_reductions.welford,
                                offsets=_offsets(0, 3, 7))


@triton.jit
def _add_and_max(a, b):
    return (a[0] + b[0], tl.maximum(a[1], b[1]))


def test_associative_scan_with_offsets_restarts_at_each_boundary():
    x = make_input((8,), torch.float32, "SUM", seed=2)
    y = make_input((8,), torch.float32, "SUM", seed=3)
    lengths = _offsets(3, 0, 5)
    total, top = tritonml.associative_scan(_add_and_max, (x, y), 0, lengths=lengths)
    for lo, hi in [(0, 3), (3, 8)]:
        np.testing.assert_allclose(total[lo:hi].numpy(), np.cumsum(x[lo:hi].double().numpy()),
                                   rtol=1e-6, atol=1e-6)
        assert torch.equal(top[lo:hi], torch.from_numpy(np.maximum.accumulate(y[lo:hi].numpy())))
    with pytest.raises(ValueError, match="^initial: not taken with offsets/lengths"):
        tritonml.associative_scan(_add_and_max, (x, y), 0, lengths=lengths, initial=(x[0], y[0]))
    with pytest.raises(ValueError, match="^lengths: sum to 7"):
        tritonml.associative_scan(_add_and_max, (x, y), 0, lengths=_offsets(3, 4))


# ---------------------------------------------------------------------------------------------
# Nested tensors with the jagged layout
# ---------------------------------------------------------------------------------------------
def _jagged(seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    rows = [torch.randn(n, 3, generator=g, dtype=dtype) for n in (3, 1, 4)]
    return torch.nested.nested_tensor(rows, layout=torch.jagged), rows


def test_jagged_scans_return_the_same_layout():
    nt, rows = _jagged()
    out = tritonml.cumulative_sum(nt, 1, reverse=True)
    assert out.is_nested and out.layout == torch.jagged and torch.equal(out.offsets(), nt.offsets())
    for got, row in zip(out.unbind(), rows):
        torch.testing.assert_close(got, row.flip(0).cumsum(0).flip(0))
    out = tritonml.cumulative_product(nt, 2)
    for got, row in zip(out.unbind(), rows):
        torch.testing.assert_close(got, row.cumprod(1))


def test_jagged_reductions_over_the_ragged_dim_and_after_it():
    nt, rows = _jagged(1)
    sums = tritonml.reduce(nt, "sum", 1, keepdims=False)
    torch.testing.assert_close(sums, torch.stack([r.sum(0) for r in rows]))
    per_row = tritonml.reduce(nt, "max", 2, keepdims=False)
    assert per_row.is_nested
    for got, row in zip(per_row.unbind(), rows):
        assert torch.equal(got, row.amax(1))
    with pytest.raises(ValueError, match="^axes: 0 is the jagged tensor's batch"):
        tritonml.reduce(nt, "sum", 0)
    with pytest.raises(ValueError, match="^out: not supported for jagged"):
        tritonml.cumulative_sum(nt, 1, out=nt)


def test_jagged_calls_compile_fullgraph():
    torch._dynamo.reset()
    nt, rows = _jagged(4)

    def f(t):
        return tritonml.reduce(tritonml.cumulative_sum(t, 1), "sum", 1, keepdims=False)
    result = torch.compile(f, backend="aot_eager", fullgraph=True)(nt)
    torch.testing.assert_close(result, torch.stack([r.cumsum(0).sum(0) for r in rows]))


def test_jagged_argmax_gives_positions_within_each_sequence():
    nt, rows = _jagged(3)
    where = tritonml.reduce(nt, "argmax", 1, keepdims=True, index_dtype=torch.int32)
    assert where.shape == (3, 1, 3) and where.dtype == torch.int32
    assert torch.equal(where[:, 0], torch.stack([r.argmax(0) for r in rows]).int())


def test_jagged_scan_gradient_flows_to_the_values():
    nt, rows = _jagged(2)
    values = nt.values().detach().requires_grad_()
    nt = torch.nested.nested_tensor_from_jagged(values, nt.offsets())
    tritonml.cumulative_sum(nt, 1).values().sum().backward()
    expected = torch.cat([torch.arange(len(r), 0, -1, dtype=torch.float64) for r in rows])
    assert torch.equal(values.grad, expected.unsqueeze(1).expand(-1, 3))


# ---------------------------------------------------------------------------------------------
# Routing of torch.segment_reduce
# ---------------------------------------------------------------------------------------------
@pytest.fixture
def routed(monkeypatch):
    import tritonml.routing as routing
    calls = []
    inner = routing._segment_reduce

    def counted(*args, **kwargs):   # a call that raised fell through to torch: not counted
        result = inner(*args, **kwargs)
        calls.append(args[1])
        return result
    monkeypatch.setattr(routing, "_segment_reduce", counted)
    with tritonml.use_tritonml(("cpu",)):
        yield calls


@pytest.mark.parametrize("reduce,form", [("sum", "lengths"), ("mean", "offsets"),
                                         ("max", "lengths"), ("prod", "offsets")])
def test_routed_segment_reduce_matches_torch(routed, reduce, form):
    x = make_input((7, 3), torch.float32, "SUM", seed=3)
    lengths = _offsets(2, 5)
    bounds = {"lengths": lengths, "offsets": _offsets(0, 2, 7)}[form]
    with tritonml.use_tritonml(()):   # torch's own answer
        expected = torch.segment_reduce(x, reduce, **{form: bounds})
    result = torch.segment_reduce(x, reduce, **{form: bounds})
    torch.testing.assert_close(result, expected)
    assert len(routed) == 1


def test_routed_empty_segments_and_initial_match_torch(routed):
    x = make_input((5,), torch.float32, "SUM", seed=4)
    for reduce in ("sum", "mean", "max", "min", "prod"):
        for initial in (None, 3.0):
            with tritonml.use_tritonml(()):
                expected = torch.segment_reduce(x, reduce, lengths=_offsets(2, 0, 3),
                                                initial=initial)
            result = torch.segment_reduce(x, reduce, lengths=_offsets(2, 0, 3), initial=initial)
            torch.testing.assert_close(result, expected, equal_nan=True)


def test_routed_gradient_matches_torch_and_unserved_forms_fall_through(routed):
    x = make_input((6, 2), torch.float64, "MULTIPLY", seed=5)
    x[1, 0] = 0.0
    lengths = _offsets(3, 3)
    grads = []
    for use in ((), ("cpu",)):
        leaf = x.clone().requires_grad_()
        with tritonml.use_tritonml(use):
            torch.segment_reduce(leaf, "prod", lengths=lengths).sum().backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1], grads[0])
    assert len(routed) == 1
    torch.segment_reduce(x.requires_grad_(), "max", lengths=lengths)      # torch's tie rule
    torch.segment_reduce(x.detach().t(), "sum", lengths=lengths.expand(2, 2), axis=1)  # N-D
    torch.segment_reduce(x.detach(), "sum", lengths=lengths, indices=None, axis=0, unsafe=True)
    assert len(routed) == 2            # only the last: 1-D lengths, float data, no grad


# torch's OpInfo samples for segment_reduce (sample_inputs_segment_reduce in
# torch/testing/_internal/common_methods_invocations.py: shape, axis, lengths, unsafe), each with
# initial 1 and 2; the N-D lengths and the lengths that do not cover the axis fall through
_TORCH_SAMPLES = (
    ((5,), 0, [0, 1, 2, 2], False),
    ((5,), 0, [0, 1, 2, 2], True),
    ((5,), 0, [2, 0, 3, 0], False),
    ((5, 5), 0, [0, 1, 2, 2], False),
    ((10, 5, 5), 0, [1, 2, 0, 6, 0], True),
    ((5, 5), 1, [[0, 1, 2, 2] for _ in range(5)], False),
    ((5, 5, 5), 1, [[2, 0, 3, 0], [0, 1, 2, 2], [3, 0, 2, 0], [1, 1, 1, 2], [0, 1, 2, 2]], False),
)


@pytest.mark.parametrize("mode", ["lengths", "offsets"])
@pytest.mark.parametrize("reduce", ["max", "min", *(r
                                                    for r in ("mean", "sum", "prod"))])
def test_routed_calls_match_torch_on_its_opinfo_samples(routed, reduce, mode):
    g = torch.Generator().manual_seed(11)
    served = 0
    for (shape, axis, lengths, unsafe) in _TORCH_SAMPLES:
        lengths = torch.tensor(lengths)
        bounds = lengths
        if mode == "offsets":
            zeros = list(lengths.shape)
            zeros[axis] = 1
            bounds = torch.cat((lengths.new_zeros(zeros), lengths), axis).cumsum(axis)
        for initial in (1, 2):
            x = torch.randn(shape, generator=g, dtype=torch.float64)
            kwargs = {mode: bounds, "axis": axis, "unsafe": unsafe, "initial": initial}
            results, grads = [], []
            for use in ((), ("cpu",)):
                leaf = x.clone().requires_grad_()
                with tritonml.use_tritonml(use):
                    result = torch.segment_reduce(leaf, reduce, **kwargs)
                    result.backward(torch.ones_like(result))
                results.append(result.detach())
                grads.append(leaf.grad)
            torch.testing.assert_close(results[1], results[0], equal_nan=True)
            torch.testing.assert_close(grads[1], grads[0], equal_nan=True)
            served += bounds.dim() == 1 and lengths.sum() == shape[0]
    assert len(routed) == (0 if reduce in ("max", "min") else served)   # max/min: grad records
