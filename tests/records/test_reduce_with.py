"""User-defined reductions: ``tritonml.reduce_with``, ``tritonml.Reduction``, and Welford's mean and
variance (``tritonml.records.ready_reductions.welford``), against numpy in float64 and exact Python integers."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import tritonml
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ReduceConfig

welford = tritonml.records.ready_reductions.welford
welford_biased = tritonml.records.ready_reductions.welford_biased

# Forced regimes (tiles smaller than the data: several tiles per program, a partial last tile, and
# for split several partial-state steps, one split past the end holding only identities).
CONFIGS = {
    "rows": ReduceConfig("rows", 16, 4),
    "columns": ReduceConfig("columns", 16, 8),
    "split": ReduceConfig("split", 16, 2, splits=5, block_split=2),
    "tuner": None,
}

# float64 state for float64 and float32, float32 for half types: a relative bound per input dtype,
# on var and mean, for data of mean ~1 and a few hundred elements (float32 inputs: the float64
# result rounded once to float32; half inputs are exact in float32, whose Welford errs by up to
# n * 2**-24, and the result is rounded once to the half type).
RTOL = {torch.float64: 1e-12, torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _oracle(a: np.ndarray, axes, ddof):
    a = a.astype(np.float64)
    return (np.var(a, axis=axes, ddof=ddof, keepdims=True),
            np.mean(a, axis=axes, keepdims=True))


def _assert_close(got: torch.Tensor, want: np.ndarray, rtol):
    got64 = got.double().numpy()
    assert got64.shape == want.shape
    scale = np.maximum(np.abs(want), np.abs(want).max() * 1e-3 + 1e-300)
    err = np.abs(got64 - want) / scale
    assert np.all(err <= rtol), (err.max(), rtol)


@pytest.mark.parametrize("regime", list(CONFIGS))
@pytest.mark.parametrize("shape, axes", [((6, 70), 1), ((70, 6), 0), ((5, 4, 9), (0, 2)),
                                          ((7, 11), None)],
                         ids=["rows", "columns", "axes apart", "whole"])
def test_welford_matches_numpy_var_and_mean(shape, axes, regime):
    rng = np.random.default_rng(1)
    a = rng.normal(3.0, 2.0, size=shape)
    x = torch.from_numpy(a).float()
    var, mean = tritonml.reduce_with(welford, x, axes, config=CONFIGS[regime])
    np_axes = tuple(range(len(shape))) if axes is None else axes
    want_var, want_mean = _oracle(x.numpy(), np_axes, 1)
    assert var.dtype == mean.dtype == torch.float32
    _assert_close(var, want_var, RTOL[torch.float32])
    _assert_close(mean, want_mean, RTOL[torch.float32])
    var0, mean0 = tritonml.reduce_with(welford_biased, x, axes, config=CONFIGS[regime])
    want_var0, _ = _oracle(x.numpy(), np_axes, 0)
    _assert_close(var0, want_var0, RTOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("regime", ["rows", "split"])
def test_welford_dtypes(dtype, regime):
    rng = np.random.default_rng(2)
    x = torch.from_numpy(rng.normal(1.0, 0.5, size=(4, 300))).to(dtype)
    var, mean = tritonml.reduce_with(welford, x, -1, config=CONFIGS[regime])
    assert var.dtype == mean.dtype == dtype and var.shape == (4, 1)
    want_var, want_mean = _oracle(x.double().numpy(), (1,), 1)
    _assert_close(var, want_var, RTOL[dtype])
    _assert_close(mean, want_mean, RTOL[dtype])


def test_welford_non_contiguous_negative_axes_keepdims_false():
    rng = np.random.default_rng(3)
    base = torch.from_numpy(rng.normal(size=(9, 8, 10)))
    x = base.permute(2, 0, 1)[:, ::2, 1:]             # (10, 5, 7), strided and permuted
    assert not x.is_contiguous()
    var, mean = tritonml.reduce_with(welford, x, (-1, -3), keepdims=False)
    a = x.numpy()
    assert var.shape == (5,)
    np.testing.assert_allclose(var.numpy(), np.var(a, axis=(0, 2), ddof=1), rtol=1e-12)
    np.testing.assert_allclose(mean.numpy(), np.mean(a, axis=(0, 2)), rtol=1e-12, atol=1e-15)


def test_welford_size_one_and_empty_axes():
    x = torch.tensor([[2.0], [5.0]])
    var, mean = tritonml.reduce_with(welford, x, 1)
    assert torch.isnan(var).all() and mean.flatten().tolist() == [2.0, 5.0]   # n - 1 = 0
    var0, mean0 = tritonml.reduce_with(welford_biased, x, 1)
    assert var0.flatten().tolist() == [0.0, 0.0]
    var, mean = tritonml.reduce_with(welford, torch.empty(3, 0), 1)          # n = 0: as torch
    assert var.shape == (3, 1) and torch.isnan(var).all() and torch.isnan(mean).all()
    var, mean = tritonml.reduce_with(welford, torch.empty(0, 4), 1)          # empty result
    assert var.shape == mean.shape == (0, 1)


def test_welford_stays_accurate_far_from_zero():
    # 1e4 + N(0, 1) in float32: var ~ 1 while x^2 ~ 1e8. The naive E[x^2] - E[x]^2 in float32
    # keeps no digit of it (float32 spacing at 1e8 is 8). Welford's state is float64 for float32
    # inputs (its running mean near 1e4 is held to 2**-40), so var is the float64 result rounded
    # once to float32: within 1e-6. (A float32 state would be within 1e-3 only: tests/
    # test_moments_nonfinite.py measures that difference at a mean of 1e6.)
    rng = np.random.default_rng(4)
    x = torch.from_numpy(1e4 + rng.normal(size=(3, 4000))).float()
    a = x.numpy().astype(np.float64)
    want = np.var(a, axis=1, ddof=1)
    for config in (CONFIGS["rows"], CONFIGS["split"], None):
        var, _ = tritonml.reduce_with(welford, x, 1, keepdims=False, config=config)
        np.testing.assert_allclose(var.double().numpy(), want, rtol=1e-6)
    a32 = x.numpy()
    naive = ((a32 * a32).sum(axis=1, dtype=np.float32) / np.float32(4000)
             - a32.mean(axis=1, dtype=np.float32) ** 2)
    assert np.max(np.abs(naive - want * 3999 / 4000) / want) > 0.1


def test_welford_is_bitwise_deterministic():
    x = torch.randn(3, 1000) * 10 + 5
    for config in (CONFIGS["rows"], CONFIGS["split"]):
        first = tritonml.reduce_with(welford, x, 1, config=config)
        for _ in range(2):
            again = tritonml.reduce_with(welford, x, 1, config=config)
            assert all(torch.equal(a.view(torch.int32), b.view(torch.int32))
                       for a, b in zip(first, again))


def test_welford_nan_and_inf():
    x = torch.tensor([[1.0, float("nan"), 3.0], [1.0, float("inf"), 2.0]])
    var, mean = tritonml.reduce_with(welford, x, 1, keepdims=False)
    assert torch.isnan(var).all() and torch.isnan(mean[0]) and mean[1] == float("inf")


# ---------------------------------------------------------------------------------------------
# Reductions written here
# ---------------------------------------------------------------------------------------------
@triton.jit
def _min_max_prepare(xs, index):
    return xs[0], xs[0]


@triton.jit
def _min_max_merge(a, b):
    return tl.minimum(a[0], b[0]), tl.maximum(a[1], b[1])


@triton.jit
def _min_max_finish(s, count):
    return s[0], s[1]


def _int64_state(dtypes):
    return (torch.int64, torch.int64)


MIN_MAX = tritonml.Reduction(
    "min_max", _min_max_prepare, _min_max_merge, _min_max_finish,
    identity=(2**63 - 1, -(2**63)), state_dtypes=_int64_state,
    output_dtypes=lambda dtypes: (dtypes[0], dtypes[0]), outputs=2,
    load_dtypes=lambda dtypes: (torch.int64,))


@pytest.mark.skipif(not tritonml.INTERPRET, reason="Triton's interpreter's rule on modules")
def test_a_reduction_from_a_module_that_imports_triton_alone_runs(tmp_path, monkeypatch):
    # The interpreter asserts "triton.language must be visible" for a @triton.jit function called
    # from another whose module lacks it; tritonml lets such functions run (docs/dsl.md).
    import importlib
    import sys
    name = f"_tritonml_reduction_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text(
        "import triton\n\n\n@triton.jit\ndef prepare(xs, index):\n    return (xs[0],)\n\n\n"
        "@triton.jit\ndef merge(a, b):\n    return (a[0] + b[0],)\n\n\n"
        "@triton.jit\ndef finish(s, count):\n    return (s[0],)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module(name)
        total = tritonml.Reduction("total", module.prepare, module.merge, module.finish,
                                   identity=(0,), state_dtypes=lambda dtypes: (torch.int64,),
                                   output_dtypes=lambda dtypes: (torch.int64,))
        x = torch.arange(24).reshape(4, 6)
        assert torch.equal(tritonml.reduce_with(total, x, 1, keepdims=False), x.sum(1))
    finally:
        sys.modules.pop(name, None)


@pytest.mark.parametrize("regime", ["rows", "columns", "split"])
def test_user_min_max_pair_on_integers(regime):
    rng = np.random.default_rng(5)
    a = rng.integers(-30000, 30000, size=(40, 6), dtype=np.int64).astype(np.int16)
    x = torch.from_numpy(a)
    axis = 0 if regime == "columns" else 1
    x = x if axis == 0 else x.t()
    low, high = tritonml.reduce_with(MIN_MAX, x, axis, config=CONFIGS[regime])
    data = [[int(v) for v in row] for row in (a.T.tolist() if axis == 0 else a.T.tolist())]
    assert low.dtype == torch.int16
    assert low.flatten().tolist() == [min(r) for r in data]
    assert high.flatten().tolist() == [max(r) for r in data]


@triton.jit
def _dot_prepare(xs, index):
    return (xs[0] * xs[1],)


@triton.jit
def _dot_merge(a, b):
    return (a[0] + b[0],)


@triton.jit
def _dot_finish(s, count):
    return (s[0],)


DOT = tritonml.Reduction(
    "dot", _dot_prepare, _dot_merge, _dot_finish, identity=(0.0,),
    state_dtypes=lambda dtypes: (torch.float64,), output_dtypes=lambda dtypes: (torch.float64,),
    inputs=2, load_dtypes=lambda dtypes: (torch.float64, torch.float64))


@pytest.mark.parametrize("regime", ["rows", "split"])
@pytest.mark.parametrize("b_strides", ["same", "other"])
def test_user_two_input_dot_product(regime, b_strides):
    rng = np.random.default_rng(6)
    a = rng.normal(size=(5, 90))
    b = rng.integers(-9, 9, size=(90, 5)).astype(np.int32).T     # another dtype, other strides
    b_tensor = torch.from_numpy(b)
    if b_strides == "same":
        b_tensor = b_tensor.contiguous()
    # a negative-bit view of -a reads as a
    a_tensor = torch.from_numpy(-a)._neg_view()
    out = tritonml.reduce_with(DOT, (a_tensor, b_tensor), 1, config=CONFIGS[regime])
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float64
    np.testing.assert_allclose(out.flatten().numpy(), (a * b).sum(axis=1), rtol=1e-12)


# ---------------------------------------------------------------------------------------------
# Gradients: Welford's closed form against torch.var_mean's autograd; a user's backward
# ---------------------------------------------------------------------------------------------
def test_welford_gradient_flows_into_a_loss_with_other_terms():
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    var, mean = tritonml.reduce_with(welford, x, 0)
    (tritonml.reduce(x, "sum") + var.sum()).backward()
    t = x.detach().clone().requires_grad_()
    want_var, _ = torch.var_mean(t, 0, keepdim=True)
    (t.sum() + want_var.sum()).backward()
    torch.testing.assert_close(x.grad, t.grad)


@pytest.mark.parametrize("reduction, correction", [(welford, 1), (welford_biased, 0)],
                         ids=["welford", "welford_biased"])
@pytest.mark.parametrize("shape, axes, keepdims", [
    ((4, 3), 0, True), ((3, 2, 3), (0, 2), False), ((3, 2), None, False), ((5,), -1, True),
    ((1, 4), 0, True), ((), None, True), ((), 0, False)],
    ids=["rows", "axes apart", "whole", "negative", "one element", "0-d", "0-d axis 0"])
def test_welford_gradients_match_torch_var_mean(reduction, correction, shape, axes, keepdims):
    rng = np.random.default_rng(7)
    x = torch.from_numpy(rng.normal(size=(*shape, 2)))[..., 0].requires_grad_()  # non-contiguous
    t = x.detach().clone().requires_grad_()
    var, mean = tritonml.reduce_with(reduction, x, axes, keepdims=keepdims)
    with warnings.catch_warnings():   # torch warns of n <= correction, and gives NaN as welford
        warnings.simplefilter("ignore", UserWarning)
        want_var, want_mean = torch.var_mean(t, dim=axes, correction=correction, keepdim=keepdims)
    g_var, g_mean = torch.randn_like(want_var), torch.randn_like(want_mean)
    # both outputs, var alone, mean alone (where n <= correction, var's gradient is NaN: torch's)
    for outputs, wants, grads in (((var, mean), (want_var, want_mean), (g_var, g_mean)),
                                  ((var,), (want_var,), (g_var,)),
                                  ((mean,), (want_mean,), (g_mean,))):
        (got,) = torch.autograd.grad(outputs, x, grads, retain_graph=True)
        (want,) = torch.autograd.grad(wants, t, grads, retain_graph=True)
        torch.testing.assert_close(got, want, equal_nan=True)
    # Where the gradient is finite, finite differences check it and its double backward too.
    if x.numel() // var.numel() > correction:
        f = lambda s: tritonml.reduce_with(reduction, s, axes, keepdims=keepdims)  # noqa: E731
        assert torch.autograd.gradcheck(f, (x,))
        assert torch.autograd.gradgradcheck(f, (x,), fast_mode=True)


def test_welford_float32_gradient_and_outputs_need_grad_only_when_recorded():
    x = torch.randn(6, 5).t().requires_grad_()
    var, mean = tritonml.reduce_with(welford, x, 1, keepdims=False)
    assert var.grad_fn is not None and mean.requires_grad
    t = x.detach().clone().requires_grad_()
    want_var, want_mean = torch.var_mean(t, 1)
    torch.testing.assert_close(torch.autograd.grad(var.sum() + 3 * mean.sum(), x)[0],
                               torch.autograd.grad(want_var.sum() + 3 * want_mean.sum(), t)[0])
    with torch.no_grad():
        assert not tritonml.reduce_with(welford, x, 1)[0].requires_grad
    assert not tritonml.reduce_with(welford, x.detach(), 1)[0].requires_grad


def test_welford_gradient_under_torch_func_grad():
    x = torch.randn(4, 6, dtype=torch.float64)
    got = torch.func.grad(lambda t: tritonml.reduce_with(welford, t, 1)[0].sum())(x)
    want = torch.func.grad(lambda t: torch.var_mean(t, 1)[0].sum())(x)
    torch.testing.assert_close(got, want)


def _dot_backward(xs, outputs, grad_outputs, axes):
    (a, b), (grad,) = xs, grad_outputs
    return grad * b, grad * a


def _differentiable_dot(backward=_dot_backward):
    return tritonml.Reduction(
        "dot", _dot_prepare, _dot_merge, _dot_finish, identity=(0.0,),
        state_dtypes=lambda dtypes: (torch.float64,), output_dtypes=lambda dtypes: (torch.float64,),
        inputs=2, load_dtypes=lambda dtypes: (torch.float64, torch.float64), backward=backward)


@pytest.mark.parametrize("keepdims", [True, False])
def test_user_backward_of_two_inputs_matches_torch(keepdims):
    dot = _differentiable_dot()
    rng = np.random.default_rng(8)
    a = torch.from_numpy(rng.normal(size=(3, 7))).requires_grad_()
    b = torch.from_numpy(rng.normal(size=(7, 3))).t().requires_grad_()   # other strides
    f = lambda p, q: tritonml.reduce_with(dot, (p, q), 1, keepdims=keepdims)  # noqa: E731
    assert torch.autograd.gradcheck(f, (a, b))
    weights = torch.arange(1.0, 4.0, dtype=torch.float64).reshape((3, 1) if keepdims else (3,))
    got = torch.autograd.grad(f(a, b), (a, b), weights)
    ta, tb = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    want = torch.autograd.grad((ta * tb).sum(1, keepdim=keepdims), (ta, tb), weights)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w)
    # only b records: a's gradient is neither asked for nor returned
    (got_b,) = torch.autograd.grad(f(a.detach(), b), b, weights)
    torch.testing.assert_close(got_b, want[1])


def test_a_reduction_without_backward_refuses_inputs_that_require_grad():
    x = torch.randn(4, 5, requires_grad=True)
    y = torch.randn(4, 5)
    with _trace.record(execute=False) as rec:
        with pytest.raises(RuntimeError, match=r"^xs\[1\]: requires grad, but the reduction dot "
                                               r"has no gradient; give .*backward=.*detach"):
            tritonml.reduce_with(DOT, (y, x), 1)
        with pytest.raises(RuntimeError, match=r"^xs: requires grad, but the reduction min_max"):
            tritonml.reduce_with(MIN_MAX, x, 1)
    assert rec.launches == []
    # no recording, no error: detached, or grad mode off
    want = (x.detach().double() * y.double()).sum(1, keepdim=True)
    torch.testing.assert_close(tritonml.reduce_with(DOT, (y, x.detach()), 1), want)
    with torch.no_grad():
        torch.testing.assert_close(tritonml.reduce_with(DOT, (y, x), 1), want)


def test_a_backward_returning_the_wrong_gradients_is_an_error():
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, 4, dtype=torch.float64)
    wrong_count = _differentiable_dot(lambda xs, outs, grads, axes: (grads[0] * xs[1],))
    with pytest.raises(TypeError, match=r"^reduction: dot's backward must return a tuple of 2"):
        tritonml.reduce_with(wrong_count, (a, b), 1).sum().backward()
    unexpanded = _differentiable_dot(lambda xs, outs, grads, axes: (grads[0], None))
    with pytest.raises(ValueError, match=r"^reduction: dot's backward returned \(3, 1\) for "
                                         r"xs\[0\]; .*shape \(3, 4\)"):
        tritonml.reduce_with(unexpanded, (a, b), 1).sum().backward()
    with pytest.raises(TypeError, match="^backward: expected None or a function"):
        _differentiable_dot(backward="grad")


# ---------------------------------------------------------------------------------------------
# Errors: raised before any launch, naming the argument
# ---------------------------------------------------------------------------------------------
def test_errors_name_the_argument_and_launch_nothing():
    x = torch.randn(4, 5)
    with _trace.record(execute=False) as rec:
        with pytest.raises(TypeError, match="^reduction:"):
            tritonml.reduce_with("sum", x, 1)
        with pytest.raises(ValueError, match=r"^xs: welford takes 1"):
            tritonml.reduce_with(welford, (x, x), 1)
        with pytest.raises(ValueError, match=r"^xs: dot takes 2"):
            tritonml.reduce_with(DOT, x, 1)
        with pytest.raises(ValueError, match=r"^xs\[1\]:.*shape"):
            tritonml.reduce_with(DOT, (x, torch.randn(4, 6)), 1)
        with pytest.raises(TypeError, match="^xs:"):
            tritonml.reduce_with(welford, [1.0, 2.0], 0)
        with pytest.raises(TypeError, match="^xs: welford is defined for floating-point"):
            tritonml.reduce_with(welford, torch.arange(4), 0)
        with pytest.raises((ValueError, IndexError), match="^axes"):
            tritonml.reduce_with(welford, x, 2)
        with pytest.raises(ValueError, match="^axes"):
            tritonml.reduce_with(welford, x, (1, -1))
        with pytest.raises(TypeError, match="^keepdims"):
            tritonml.reduce_with(welford, x, 1, keepdims=1)
        with pytest.raises(TypeError, match="^identity"):
            tritonml.Reduction("bad", _dot_prepare, _dot_merge, _dot_finish, identity=0.0,
                               state_dtypes=lambda d: (torch.float32,),
                               output_dtypes=lambda d: (torch.float32,))
        with pytest.raises(TypeError, match="^merge"):
            tritonml.Reduction("bad", _dot_prepare, None, _dot_finish, identity=(0.0,),
                               state_dtypes=lambda d: (torch.float32,),
                               output_dtypes=lambda d: (torch.float32,))
        # a state of 2 components (identity) with 1 declared dtype, and 2 outputs declared as 1
        wrong_state = tritonml.Reduction(
            "wrong_state", _dot_prepare, _dot_merge, _dot_finish, identity=(0.0, 0.0),
            state_dtypes=lambda d: (torch.float32,), output_dtypes=lambda d: (torch.float32,))
        with pytest.raises(ValueError, match="^reduction: wrong_state's state_dtypes gives 1"):
            tritonml.reduce_with(wrong_state, x, 1)
        wrong_outputs = tritonml.Reduction(
            "wrong_outputs", _dot_prepare, _dot_merge, _dot_finish, identity=(0.0,), outputs=2,
            state_dtypes=lambda d: (torch.float32,), output_dtypes=lambda d: (torch.float32,))
        with pytest.raises(ValueError, match="^reduction: wrong_outputs's output_dtypes gives 1"):
            tritonml.reduce_with(wrong_outputs, x, 1)
    assert rec.launches == []


@triton.jit
def _pair_prepare(xs, index):
    return (xs[0], xs[0] * xs[0])


@triton.jit
def _pair_merge(a, b):
    return (a[0] + b[0], a[1] + b[1])


@triton.jit
def _merge_of_one(a, b):
    return (a[0] + b[0],)


@triton.jit
def _merge_of_three(a, b):
    return (a[0] + b[0], a[1] + b[1], a[0])


@triton.jit
def _merge_of_three_args(a, b, c):
    return (a[0] + b[0], a[1] + b[1])


@triton.jit
def _merge_that_fails(a, b):
    return (a[0] + b[0], a[1] + b[1] + not_defined_anywhere)  # noqa: F821


@triton.jit
def _finish_first(s, count):
    return (s[0],)


@triton.jit
def _finish_of_two(s, count):
    return (s[0], s[1])


def _pair(merge=_pair_merge, finish=_finish_first):
    return tritonml.Reduction("sum_and_squares", _pair_prepare, merge, finish,
                              identity=(0.0, 0.0),
                              state_dtypes=lambda d: (torch.float64, torch.float64),
                              output_dtypes=lambda d: (torch.float64,))


@pytest.mark.parametrize("form", ("reduce_with", "segment_reduce"))
def test_a_reduction_function_of_the_wrong_arity_is_a_combine_error_before_any_launch(form):
    # a merge returning fewer (or more) values than the state has components ran on the first
    # ones alone; now refused from its source, naming the function, the reduction and the rule
    x = torch.randn(4, 5, dtype=torch.float64)

    def run(reduction):
        if form == "reduce_with":
            return tritonml.reduce_with(reduction, x, 1)
        return tritonml.segment_reduce(x, reduction, offsets=torch.tensor([0, 2, 5]), axis=1)
    cases = [(_pair(merge=_merge_of_one), "merge", _merge_of_one,
              "returns 1 value(s); merge must return a tuple of 2, one per state component"),
             (_pair(merge=_merge_of_three), "merge", _merge_of_three,
              "returns 3 value(s); merge must return a tuple of 2"),
             (_pair(merge=_merge_of_three_args), "merge", _merge_of_three_args,
              "takes 3 parameter(s); a Reduction's merge takes two"),
             (_pair(finish=_finish_of_two), "finish", _finish_of_two,
              "returns 2 value(s); finish must return a tuple of 1, one per output")]
    with _trace.record(execute=False) as rec:
        for reduction, role, fn, rule in cases:
            with pytest.raises(tritonml.CombineError) as refused:
                run(reduction)
            message = str(refused.value)
            name = f"{fn.fn.__module__}.{fn.fn.__qualname__}"
            assert message.startswith(f"{role} {name} ("), message
            assert "of the reduction sum_and_squares" in message and rule in message, message
            assert refused.value.combine == name
            assert isinstance(refused.value.original, (TypeError, ValueError))
    assert rec.launches == []
    # the right arity runs: the sum of each row (the squares' component is not an output)
    np.testing.assert_allclose(run(_pair()).numpy().ravel(),
                               x.numpy().sum(1) if form == "reduce_with" else
                               np.stack([x.numpy()[:, :2].sum(1), x.numpy()[:, 2:].sum(1)],
                                        1).ravel())


@pytest.mark.skipif(not tritonml.INTERPRET, reason="locates errors the interpreter raises")
@pytest.mark.parametrize("form", ("reduce_with", "segment_reduce"))
def test_an_error_inside_a_reductions_function_is_a_combine_error(form):
    # Triton's InterpreterError around the user's NameError, reported once at its line
    x = torch.randn(4, 5, dtype=torch.float64)
    with pytest.raises(tritonml.CombineError) as failed:
        if form == "reduce_with":
            tritonml.reduce_with(_pair(merge=_merge_that_fails), x, 1)
        else:
            tritonml.segment_reduce(x, _pair(merge=_merge_that_fails),
                                    offsets=torch.tensor([0, 2, 5]), axis=1)
    error = failed.value
    assert isinstance(error.original, NameError)
    assert error.combine.endswith("_merge_that_fails")
    assert error.filename == __file__
    assert error.lineno == _merge_that_fails.fn.__code__.co_firstlineno + 2
    assert str(error).startswith(f"merge {error.combine} ({__file__}:{error.lineno}) of the "
                                 "reduction sum_and_squares raised NameError")


def test_worked_example_in_docs():
    # docs/dsl.md, "User-defined reductions": rows [2, 4, 4, 4] and [5, 5, 7, 9]
    x = torch.tensor([[2., 4., 4., 4.], [5., 5., 7., 9.]])
    var, mean = tritonml.reduce_with(welford, x, axes=1)
    assert mean.flatten().tolist() == [3.5, 6.5]
    assert var.flatten().tolist() == [1.0, np.float32(11 / 3).item()]
    var0, _ = tritonml.reduce_with(welford_biased, x, axes=1)
    assert var0.flatten().tolist() == [0.75, 2.75]


def test_runs_under_torch_compile_as_a_graph_break():
    x = torch.randn(4, 33)

    @torch.compile(backend="eager")
    def f(t):
        var, mean = tritonml.reduce_with(welford, t * 2, 1)
        return var + 1, mean

    var, mean = f(x)
    want_var, want_mean = _oracle((x * 2).numpy(), (1,), 1)
    _assert_close(var - 1, want_var, 1e-4)
    _assert_close(mean, want_mean, RTOL[torch.float32])


# ---------------------------------------------------------------------------------------------
# Bytes moved (counted in the interpreter by tritonml/bench/memtrace.py)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape, axes, config", [
    ((16, 4096), (1,), ReduceConfig("rows", 1024, 4, num_warps=8)),
    ((512, 256), (0,), ReduceConfig("columns", 16, 256, num_warps=8)),
    ((2 ** 17,), (0,), ReduceConfig("split", 4096, 1, num_warps=8, splits=16, block_split=16)),
], ids=["rows", "columns", "split"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_welford_reads_input_once_and_writes_outputs_once(shape, axes, config, dtype):
    from tritonml.bench.memtrace import trace_memory

    x = torch.rand(shape, dtype=torch.float64).to(dtype)
    with trace_memory({"input": x}) as trace:
        var, mean = tritonml.reduce_with(welford, x, axes, config=config)
    data = x.numel() * x.element_size()
    outputs = 2 * var.numel() * var.element_size()
    assert trace.by_region("input")["load"] == data == trace.distinct_bytes("input", "load")
    ideal = data + outputs
    # the split regime's partial states (3 float32 per split and output) are the only extra bytes
    assert trace.total_bytes <= 1.05 * ideal, trace.total_bytes / ideal
    assert trace.torch_work == []
    want_var, want_mean = _oracle(x.double().numpy(), axes, 1)
    _assert_close(var, want_var, RTOL[dtype] * 10)
    _assert_close(mean, want_mean, RTOL[dtype])
