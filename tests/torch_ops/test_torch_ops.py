"""tritonml's ops as torch ops: registration, opcheck, fake kernels, autograd (gradcheck against
finite differences, double backward), vmap, torch.func, torch.compile and export."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch.library import opcheck

import tritonml
from tritonml.runtime import trace as _trace
from benchmarks.reduce_oracle import assert_matches, expected_tensor
from benchmarks.scan_oracle import scan_matches, to_numpy
from tests.op_log import OpLog
from tests.timing import limit

OPS = torch.ops.tritonml
DIFFERENTIABLE = ("AVERAGE", "L1", "L2", "LOG_SUM", "LOG_SUM_EXP", "MAX", "MIN", "MULTIPLY", "SUM",
                  "SUM_SQUARE")


def _f64(*shape, seed=0, positive=False):
    g = torch.Generator().manual_seed(seed)
    t = torch.rand(shape, generator=g, dtype=torch.float64) + 0.5 if positive else \
        torch.randn(shape, generator=g, dtype=torch.float64)
    return t


# ---------------------------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------------------------
def test_every_op_is_registered_under_the_tritonml_namespace():
    names = ["cumulative_sum", "cumulative_sum_out", "cumulative_sum_", "cumulative_product",
             "cumulative_product_out", "cumulative_product_", "reduce", "reduce_out"]
    schemas = {name: str(getattr(OPS, name).default._schema) for name in names}
    assert schemas["cumulative_sum"] == ("tritonml::cumulative_sum(Tensor x, SymInt axis, "
                                         "bool reverse=False, bool exclusive=False, "
                                         "Tensor? initial=None) -> Tensor")
    assert schemas["cumulative_sum_out"].endswith("Tensor(a4!) out, Tensor? initial=None) -> ()")
    assert schemas["cumulative_product_"].startswith("tritonml::cumulative_product_(Tensor(a0!) x")
    assert schemas["reduce"] == ("tritonml::reduce(Tensor x, str function, SymInt[] axes, "
                                 "bool keepdims, ScalarType index_dtype) -> Tensor")
    assert "Tensor(a5!) out" in schemas["reduce_out"]


def test_public_functions_run_through_the_registered_ops():
    x = _f64(3, 4)
    with OpLog() as log:
        tritonml.cumulative_sum(x, 1)
        tritonml.cumulative_product(x, 0, out=torch.empty_like(x))
        tritonml.cumulative_sum(x, 0, out=x)
        tritonml.reduce(x, "max", 1)
        tritonml.reduce(x, "sum", 0, out=torch.empty(1, 4, dtype=torch.float64))
    assert [op for op in log.ops if op.startswith("tritonml.")] == [
        "tritonml.cumulative_sum.default", "tritonml.cumulative_product_out.default",
        "tritonml.cumulative_sum_.default", "tritonml.reduce.default", "tritonml.reduce_out.default"]


def _opcheck_cases():
    strided = _f64(4, 6).t()
    cases = [
        ("cumulative_sum", (_f64(3, 5), 1, False, False)),
        ("cumulative_sum", (strided, 0, True, True)),
        ("cumulative_sum", (torch.randint(-9, 9, (4, 3), dtype=torch.int32), -1, False, True)),
        ("cumulative_sum", (torch.empty(0, 3), 0, False, False)),
        ("cumulative_product", (_f64(2, 3, 4).to(torch.bfloat16), 2, True, False)),
        ("cumulative_product", (torch.randint(0, 9, (5,), dtype=torch.uint8), 0, False, False)),
        ("cumulative_sum_out", (_f64(3, 5), 1, True, False, torch.empty(3, 5, dtype=torch.float64))),
        ("cumulative_product_out", (strided, 1, False, True, torch.empty(6, 4, dtype=torch.float64))),
        ("cumulative_sum_", (_f64(3, 5), 0, False, False)),
        ("cumulative_product_", (_f64(3, 5), 1, True, True)),
        ("reduce", (_f64(3, 4, 5), "SUM", [0, 2], True, torch.int64)),
        ("reduce", (strided, "LOG_SUM_EXP", [1], False, torch.int64)),
        ("reduce", (_f64(3, 4), "ARGMAX", [0, 1], False, torch.int32)),
        ("reduce", (torch.randint(-9, 9, (4, 3), dtype=torch.int16), "MAX", [0], True, torch.int64)),
        ("reduce", (torch.empty(0, 3), "SUM", [0], True, torch.int64)),
        ("reduce", (_f64(3, 4).half(), "AVERAGE", [1], True, torch.int64)),
        ("reduce_out", (_f64(3, 4), "MIN", [1], False, torch.int64, torch.empty(3, dtype=torch.float64))),
        ("reduce_out", (_f64(3, 4), "ARGMIN", [0], True, torch.int64,
                        torch.empty(1, 4, dtype=torch.int64))),
    ]
    return [pytest.param(name, args, id=f"{name}-{i}") for i, (name, args) in enumerate(cases)]


@pytest.mark.parametrize("name,args", _opcheck_cases())
def test_opcheck(name, args):
    result = opcheck(getattr(OPS, name).default, args)
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("name,args", _opcheck_cases()[:2] + _opcheck_cases()[10:12])
def test_opcheck_with_inputs_that_require_grad(name, args):
    args = (args[0].clone().requires_grad_(),) + args[1:]
    result = opcheck(getattr(OPS, name).default, args)
    assert set(result.values()) == {"SUCCESS"}, result


def test_fake_tensors_give_shapes_and_dtypes_without_a_launch():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with _trace.record() as rec, FakeTensorMode():
        x = torch.empty(3, 7, 2)
        assert tritonml.cumulative_product(x, 1).shape == (3, 7, 2)
        r = tritonml.reduce(x, "argmin", (0, 2), keepdims=False, index_dtype=torch.int32)
        assert r.shape == (7,) and r.dtype == torch.int32
        assert tritonml.reduce(x, "l2", None).shape == (1, 1, 1)
    assert rec.launches == []


# ---------------------------------------------------------------------------------------------
# Autograd
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, False), (False, True),
                                               (True, True)])
def test_cumulative_sum_gradcheck_and_double_backward(reverse, exclusive, fast):
    x = _f64(5, 4).t().requires_grad_()  # non-contiguous
    f = lambda t: tritonml.cumulative_sum(t, 1, reverse=reverse, exclusive=exclusive)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,), fast_mode=fast)


@pytest.mark.parametrize("values", [
    [[1.5, -0.7, 2.0, 0.8, -1.2]],            # no zero
    [[1.5, 0.0, 2.0, 0.8, -1.2]],             # one zero
    [[0.0, 1.3, 0.0, 0.7, 0.0]],              # several zeros
    [[1.1, 0.9, 1.2, 2.0, 0.0]],              # a zero at the end
], ids=["none", "one-zero", "zeros", "last-zero"])
@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, False), (False, True),
                                               (True, True)])
def test_cumulative_product_gradient_is_exact_with_zeros(values, reverse, exclusive):
    x = torch.tensor(values, dtype=torch.float64).repeat(2, 1)
    x[1] = x[1].flip(0)
    x.requires_grad_()
    f = lambda t: tritonml.cumulative_product(t, 1, reverse=reverse, exclusive=exclusive)  # noqa
    assert torch.autograd.gradcheck(f, (x,))
    if values == [[1.5, -0.7, 2.0, 0.8, -1.2]]:
        assert torch.autograd.gradgradcheck(f, (x,), fast_mode=True)


@pytest.mark.parametrize("function", DIFFERENTIABLE)
@pytest.mark.parametrize("axes,keepdims", [((0, 2), True), (1, False), (None, False)])
def test_reduce_gradcheck_and_double_backward(function, axes, keepdims):
    # Small on purpose: each gradcheck runs the kernels once per input element and direction.
    x = _f64(2, 3, 2, seed=len(function), positive=function == "LOG_SUM").transpose(0, 2)
    x.requires_grad_()
    f = lambda t: tritonml.reduce(t, function, axes, keepdims=keepdims)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
    if keepdims:
        assert torch.autograd.gradgradcheck(f, (x,), fast_mode=True)


# A torch expression with the same derivative as each function, for torch's gradient as oracle.
TORCH_REDUCE = {
    "AVERAGE": torch.mean, "SUM": torch.sum, "MAX": torch.amax, "MIN": torch.amin,
    "MULTIPLY": lambda t, **k: torch.prod(t, **k) if k else torch.prod(t),
    "L1": lambda t, **k: torch.linalg.vector_norm(t, 1, **k),
    "L2": lambda t, **k: torch.linalg.vector_norm(t, 2, **k),
    "SUM_SQUARE": lambda t, **k: (t * t).sum(**k),
    "LOG_SUM": lambda t, **k: torch.sum(t, **k).log(),
    "LOG_SUM_EXP": lambda t, **k: torch.logsumexp(t, **k),
}
# Every spelling of the axes a 0-d tensor takes (it acts as shape [1]).
AXES_OF_0D = [None, 0, -1, [0], (0,), (-1,)]


@pytest.mark.parametrize("function", DIFFERENTIABLE)
def test_reduce_gradient_of_a_0d_tensor_is_torchs_for_every_axes_spelling(function):
    for value in (0.7, -0.3, 0.0):
        for axes in AXES_OF_0D:
            for keepdims in (True, False):
                x = torch.tensor(value, dtype=torch.float64, requires_grad=True)
                got = tritonml.reduce(x, function, axes, keepdims=keepdims)
                (grad,) = torch.autograd.grad(got, x)
                t = x.detach().clone().requires_grad_()
                kwargs = {} if function == "MULTIPLY" and not isinstance(axes, int) else \
                    {"dim": 0 if axes is None else axes, "keepdim": keepdims}
                want = TORCH_REDUCE[function](t, **kwargs)
                (want_grad,) = torch.autograd.grad(want, t)
                assert got.shape == want.shape == ()
                torch.testing.assert_close(grad, want_grad, equal_nan=True,
                                           msg=f"{function} of {value}, axes={axes}, "
                                               f"keepdims={keepdims}")


@pytest.mark.parametrize("scan", ["cumulative_sum", "cumulative_product"])
def test_scan_gradients_of_a_0d_tensor_match_torch(scan):
    # One element: torch's scan of [initial or the identity, x], inclusive its last output,
    # exclusive its first.
    cum = torch.cumsum if scan == "cumulative_sum" else torch.cumprod
    for axis in (0, -1):
        for reverse in (False, True):
            for exclusive in (False, True):
                for initial in (None, 0.3):
                    x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
                    i = None if initial is None else \
                        torch.tensor(initial, dtype=torch.float64, requires_grad=True)
                    got = getattr(tritonml, scan)(x, axis, reverse=reverse, exclusive=exclusive,
                                                  initial=i)
                    inputs = (x,) if i is None else (x, i)
                    grads = torch.autograd.grad(got, inputs, allow_unused=True,
                                                materialize_grads=True)
                    tx, ti = x.detach().clone().requires_grad_(), \
                        None if i is None else i.detach().clone().requires_grad_()
                    start = ti if ti is not None else \
                        torch.tensor(float(scan != "cumulative_sum"), dtype=torch.float64)
                    runs = cum(torch.stack([start, tx]), 0)   # the start, then the one element
                    want = runs[0] if exclusive else runs[1]
                    t_inputs = (tx,) if ti is None else (tx, ti)
                    want_grads = torch.autograd.grad(want, t_inputs, allow_unused=True,
                                                     materialize_grads=True)
                    assert got.shape == () and torch.allclose(got, want.reshape(()))
                    for g, w in zip(grads, want_grads, strict=True):
                        torch.testing.assert_close(g, w, msg=f"{scan} axis={axis} "
                                                   f"reverse={reverse} exclusive={exclusive} "
                                                   f"initial={initial}")


def test_multiply_gradient_with_one_and_with_two_zeros():
    x = torch.tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 5.0], [1.5, 2.0, -1.0]], dtype=torch.float64,
                     requires_grad=True)
    tritonml.reduce(x, "multiply", 1).sum().backward()
    want = np.array([[0.0, 6.0, 0.0], [0.0, 0.0, 0.0], [-2.0, -1.5, 3.0]])
    np.testing.assert_array_equal(x.grad.numpy(), want)


def test_max_gradient_spreads_evenly_over_ties_as_torch_amax():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [4.0, 4.0, 4.0, 4.0]], requires_grad=True)
    tritonml.reduce(x, "max", 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0.5, 0.5, 0], [0.25, 0.25, 0.25, 0.25]])
    y = x.detach().clone().requires_grad_()
    torch.amax(y, 1).sum().backward()
    assert torch.equal(x.grad, y.grad)


def test_l2_of_zeros_has_zero_gradient_and_log_sum_exp_is_stable_at_infinities():
    zeros = torch.zeros(2, 3, dtype=torch.float64, requires_grad=True)
    tritonml.reduce(zeros, "l2", 1).sum().backward()
    assert torch.equal(zeros.grad, torch.zeros(2, 3, dtype=torch.float64))
    inf = float("inf")
    x = torch.tensor([[-inf, -inf], [1.0, -inf], [inf, 0.0], [inf, inf]], requires_grad=True)
    tritonml.reduce(x, "log_sum_exp", 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 0], [1, 0], [1, 0], [0.5, 0.5]])


def test_index_outputs_are_not_differentiable():
    x = _f64(3, 4).requires_grad_()
    index = tritonml.reduce(x, "argmax", 1)
    assert index.dtype == torch.int64 and not index.requires_grad and index.grad_fn is None
    with pytest.raises(RuntimeError, match="does not require grad"):
        torch.autograd.grad(index.double().sum(), x)


def test_outputs_carry_a_grad_fn_named_after_the_op():
    x = _f64(3, 4).requires_grad_()
    assert type(tritonml.cumulative_sum(x, 0).grad_fn).__name__ == "CumulativeSumBackward"
    assert type(tritonml.reduce(x, "sum").grad_fn).__name__ == "ReduceBackward"


def test_a_training_step():
    torch.manual_seed(0)
    weight = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    data = torch.randn(8, 4, dtype=torch.float64)
    hidden = tritonml.cumulative_sum(data @ weight, 0)
    loss = tritonml.reduce(hidden, "log_sum_exp", 1, keepdims=False).mean()
    loss.backward()
    reference = weight.detach().clone().requires_grad_()
    torch.logsumexp(torch.cumsum(data @ reference, 0), 1).mean().backward()
    torch.testing.assert_close(weight.grad, reference.grad)


# ---------------------------------------------------------------------------------------------
# vmap and torch.func
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("in_dim", [0, 1, 2])
def test_vmap_matches_the_loop(in_dim):
    from torch.func import vmap
    x = _f64(3, 4, 5)
    calls = [lambda t: tritonml.cumulative_sum(t, -1, reverse=True),
             lambda t: tritonml.cumulative_product(t, 0, exclusive=True),
             lambda t: tritonml.reduce(t, "argmax", 1, keepdims=False),
             lambda t: tritonml.reduce(t, "l1", None),
             lambda t: tritonml.reduce(t, "sum", (0, 1), keepdims=False)]
    for call in calls:
        with _trace.record() as rec:
            batched = vmap(call, in_dims=in_dim)(x)
        looped = torch.stack([call(t) for t in x.unbind(in_dim)])
        # One batched reduction may fold in another order than each slice's: float64 rounding.
        torch.testing.assert_close(batched, looped, rtol=1e-12, atol=1e-12)
        assert len(rec.launches) <= 2  # one batched launch (two for a split), not a Python loop


def test_vmap_of_0d_slices_and_of_out_and_in_place_forms():
    from torch.func import vmap
    x = _f64(6)
    assert torch.equal(vmap(lambda t: tritonml.cumulative_sum(t, 0))(x), x)
    assert torch.equal(vmap(lambda t: tritonml.reduce(t, "max"))(x), x)
    out = torch.zeros(6, 5, dtype=torch.float64)
    y = _f64(6, 5, seed=1)
    vmap(lambda t, o: tritonml.cumulative_sum(t, 0, out=o))(y, out)
    ok, msg = scan_matches(out, to_numpy(y), 1, "sum", False, False)
    assert ok, msg
    z = y.clone()
    vmap(lambda t: tritonml.cumulative_product(t, 0, out=t))(z)
    ok, msg = scan_matches(z, to_numpy(y), 1, "product", False, False)
    assert ok, msg
    sums = torch.zeros(6, dtype=torch.float64)
    vmap(lambda t, o: tritonml.reduce(t, "sum", 0, keepdims=False, out=o))(y, sums)
    assert_matches(sums, expected_tensor(y, "SUM", 1, keepdims=False))


def test_torch_func_grad_and_jacrev():
    from torch.func import grad, jacrev, vmap
    x = _f64(4, 5)
    softmax = grad(lambda t: tritonml.reduce(t, "log_sum_exp", keepdims=False))(x)
    torch.testing.assert_close(softmax, torch.softmax(x.flatten(), 0).reshape(4, 5))
    jac = jacrev(lambda t: tritonml.cumulative_sum(t, 0))(x[0])
    assert torch.equal(jac, torch.tril(torch.ones(5, 5, dtype=torch.float64)))
    per_row = vmap(grad(lambda t: tritonml.reduce(t, "max", keepdims=False)))(x)
    assert torch.equal(per_row.sum(1), torch.ones(4, dtype=torch.float64))


# ---------------------------------------------------------------------------------------------
# torch.compile and export
# ---------------------------------------------------------------------------------------------
def _model(t):
    y = tritonml.cumulative_product(t, 1, exclusive=True)
    z = tritonml.cumulative_sum(y * 0.5, 0, reverse=True)
    return tritonml.reduce(z, "l2", keepdims=False) + tritonml.reduce(z, "max", 1).sum()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph_forward_and_backward(backend):
    torch._dynamo.reset()
    x = _f64(4, 6, seed=3).requires_grad_()
    compiled = torch.compile(_model, backend=backend, fullgraph=True)
    value = compiled(x)
    value.backward()
    reference = x.detach().clone().requires_grad_()
    expected = _model(reference)
    expected.backward()
    torch.testing.assert_close(value, expected)
    torch.testing.assert_close(x.grad, reference.grad)


def test_torch_compile_of_out_and_in_place_forms():
    torch._dynamo.reset()

    def f(t, out):
        tritonml.cumulative_sum(t, 1, out=out)
        tritonml.cumulative_product(t, 0, out=t)
        return out * 2

    x, out = _f64(3, 4), torch.empty(3, 4, dtype=torch.float64)
    x_ref, out_ref = x.clone(), torch.empty(3, 4, dtype=torch.float64)
    result = torch.compile(f, backend="aot_eager", fullgraph=True)(x, out)
    expected = f(x_ref, out_ref)
    assert torch.equal(result, expected) and torch.equal(out, out_ref) and torch.equal(x, x_ref)


def test_export_captures_the_ops_and_the_program_runs():
    class Module(torch.nn.Module):
        def forward(self, t):
            return tritonml.reduce(tritonml.cumulative_product(t, 1, exclusive=True), "argmax", 1)

    x = _f64(3, 5, seed=4)
    program = torch.export.export(Module(), (x,))
    code = program.graph_module.code
    assert "torch.ops.tritonml.cumulative_product.default" in code
    assert "torch.ops.tritonml.reduce.default" in code
    assert torch.equal(program.module()(x), Module()(x))


def test_compiled_triton_ops_decompose_into_their_triton_kernels():
    """With compiled Triton (CUDA), the ops are triton_ops: AOT tracing (what Inductor compiles)
    sees every kernel launch. Traced here with fake CUDA tensors, in a compiled-mode process."""
    script = textwrap.dedent("""
        import torch, tritonml
        from torch._functorch.aot_autograd import aot_export_module
        from torch._subclasses.fake_tensor import FakeTensorMode
        assert not tritonml.INTERPRET
        class M(torch.nn.Module):
            def forward(self, t):
                return tritonml.cumulative_sum(t, 1, reverse=True), tritonml.reduce(t, "max", 0)
        with FakeTensorMode(allow_non_fake_inputs=True):
            x = torch.empty(64, 1000, device="cuda")
            graph, _ = aot_export_module(M(), (x,), trace_joint=False)
        print(graph.code)
    """)
    env = dict(os.environ, TRITON_INTERPRET="0")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=limit(300))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("triton_kernel_wrapper_functional(") == 2, done.stdout
    assert "tritonml." not in done.stdout  # decomposed: no opaque op left


def test_vmap_refuses_an_unbatched_out_for_a_batched_input():
    from torch.func import vmap
    x, out = _f64(4, 3), torch.zeros(3, dtype=torch.float64)
    for call in (lambda t: tritonml.cumulative_sum(t, 0, out=out),
                 lambda t: tritonml.reduce(t, "sum", 0, out=out[:1])):
        with pytest.raises(ValueError, match="^out: under vmap, out must be batched"):
            vmap(call)(x)
    assert torch.equal(out, torch.zeros(3, dtype=torch.float64))
