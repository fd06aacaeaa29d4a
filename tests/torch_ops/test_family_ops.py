"""torch's scan and reduce family as torch ops (tritonml/torch_ops/cumextreme.py, extremes.py,
moments.py, nanreduce.py): registration, ``torch.library.opcheck``, fake tensors, gradients
(``gradcheck`` with forward mode, ``gradgradcheck``, against finite differences), forward mode
through ``torch.func`` (jvp, jacfwd), vmap against a loop, and torch.compile."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
from torch.library import opcheck

import tritonml
from tritonml.runtime import trace as _trace
from tests.timing import limit
from tritonml_autotune.devices import ARCHS

# torch's forward-mode AD loads its jvp decompositions on first use through torch.jit.script,
# which torch itself has deprecated
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")

OPS = torch.ops.tritonml


def _f64(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def test_ops_are_registered_with_their_schemas():
    schemas = {name: str(getattr(OPS, name).default._schema).split("(", 1)[1] for name in (
        "cummax", "logcumsumexp", "max_with_indices", "aminmax", "var", "std_mean", "nansum")}
    assert schemas["cummax"] == "Tensor x, SymInt dim) -> (Tensor, Tensor)"
    assert schemas["logcumsumexp"] == "Tensor x, SymInt dim, bool reverse=False) -> Tensor"
    assert schemas["max_with_indices"] == ("Tensor x, SymInt dim, bool keepdim=False) -> "
                                           "(Tensor, Tensor)")
    assert schemas["aminmax"] == "Tensor x, SymInt[] axes, bool keepdim=False) -> (Tensor, Tensor)"
    assert schemas["var"] == ("Tensor x, SymInt[] axes, float correction, bool keepdim=False) -> "
                              "Tensor")
    assert schemas["std_mean"].endswith("-> (Tensor, Tensor)")
    assert schemas["nansum"] == "Tensor x, SymInt[] axes, bool keepdim=False) -> Tensor"


def _opcheck_cases():
    strided = _f64(6, 4).t()
    ints = torch.randint(-3, 4, (4, 5), dtype=torch.int32)
    nans = _f64(3, 4)
    nans[1, 2] = float("nan")
    cases = [
        ("cummax", (strided, 1)), ("cummin", (ints, 0)), ("cummax", (torch.empty(0, 3), 0)),
        ("logcumsumexp", (_f64(3, 5), 1, False)), ("logcumsumexp", (strided, 0, True)),
        ("max_with_indices", (strided, 0, False)), ("min_with_indices", (ints, 1, True)),
        ("aminmax", (_f64(3, 4, 2), [0, 2], False)), ("aminmax", (ints, [], True)),
        ("var", (_f64(3, 4), [1], 1.0, False)), ("std", (strided, [], 0.0, True)),
        ("var_mean", (_f64(2, 3, 4), [0, 2], 2.0, False)),
        ("std_mean", (_f64(4, 3).half(), [1], 1.0, True)),
        ("nansum", (nans, [0], False)), ("nansum", (ints, [], True)),
        ("nanmean", (nans, [1], True)),
    ]
    return [pytest.param(name, args, id=f"{name}-{i}") for i, (name, args) in enumerate(cases)]


@pytest.mark.parametrize("name,args", _opcheck_cases())
def test_opcheck(name, args):
    result = opcheck(getattr(OPS, name).default, args)
    assert set(result.values()) == {"SUCCESS"}, result


@pytest.mark.parametrize("name,args", [c for c in _opcheck_cases() if c.values[0] in (
    "cummax", "logcumsumexp", "max_with_indices", "aminmax", "var_mean", "nanmean")
    and c.values[1][0].dtype.is_floating_point and c.values[1][0].numel()])
def test_opcheck_with_inputs_that_require_grad(name, args):
    args = (args[0].clone().requires_grad_(),) + args[1:]
    result = opcheck(getattr(OPS, name).default, args)
    assert set(result.values()) == {"SUCCESS"}, result


def test_fake_tensors_give_shapes_and_dtypes_without_a_launch():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with _trace.record() as rec, FakeTensorMode():
        x = torch.empty(3, 7, 2)
        values, indices = tritonml.cummin(x, 1)
        assert values.shape == indices.shape == (3, 7, 2) and indices.dtype == torch.int64
        values, indices = tritonml.max_with_indices(x, -1, keepdim=True)
        assert values.shape == (3, 7, 1) and indices.dtype == torch.int64
        assert tritonml.aminmax(x, dim=(0, 2)).max.shape == (7,)
        assert tritonml.std_mean(x, 1, keepdim=True)[1].shape == (3, 1, 2)
        assert tritonml.nansum(x.to(torch.int8)).dtype == torch.int64
    assert rec.launches == []


# ---------------------------------------------------------------------------------------------
# Gradients: finite differences, forward and reverse mode, double backward
# ---------------------------------------------------------------------------------------------
def _with_nan(t):
    t = t.clone()
    t.view(-1)[[1, 6]] = float("nan")     # no result made of NaN only (its derivative is NaN)
    return t


GRADIENTS = {
    "cummax": (lambda t: tritonml.cummax(t, 1).values, _f64(3, 6)),
    "cummin-0d": (lambda t: tritonml.cummin(t, 0).values, _f64()),
    "logcumsumexp": (lambda t: tritonml.logcumsumexp(t, 1), _f64(3, 6)),
    "logcumsumexp-reverse": (lambda t: tritonml.logcumsumexp(t, 0, reverse=True), _f64(5, 2).t()),
    "max_with_indices": (lambda t: tritonml.max_with_indices(t, 0).values, _f64(4, 3)),
    "min_with_indices-keepdim": (lambda t: tritonml.min_with_indices(t, -1, True).values,
                                 _f64(3, 4)),
    "aminmax": (lambda t: torch.stack(tritonml.aminmax(t, dim=1)), _f64(3, 4)),
    "aminmax-all": (lambda t: tritonml.aminmax(t).min, _f64(3, 4)),
    "var": (lambda t: tritonml.var(t, 1), _f64(3, 4)),
    "std-correction": (lambda t: tritonml.std(t, (0, 2), correction=0.5, keepdim=True),
                       _f64(3, 2, 4)),
    "var_mean": (lambda t: torch.stack(tritonml.var_mean(t, 0, correction=0)), _f64(4, 3)),
    "std_mean": (lambda t: torch.stack(tritonml.std_mean(t)), _f64(3, 4)),
    "nansum": (lambda t: tritonml.nansum(t, 1), _with_nan(_f64(3, 4))),
    "nanmean": (lambda t: tritonml.nanmean(t, (0, 1), keepdim=True), _with_nan(_f64(3, 4))),
}


@pytest.mark.parametrize("name", GRADIENTS)
def test_gradcheck_forward_and_reverse_mode_and_double_backward(name):
    function, x = GRADIENTS[name]
    x = x.clone().requires_grad_()
    # fast mode: the Jacobians checked along random directions, each evaluation a kernel launch
    # in the interpreter (the full Jacobian, one launch per element, takes tens of seconds)
    assert torch.autograd.gradcheck(function, (x,), check_forward_ad=True, fast_mode=True)
    assert torch.autograd.gradgradcheck(function, (x,), fast_mode=True)


def test_forward_mode_through_torch_func_matches_torch():
    """jacfwd and jvp run through each function's jvp; torch's own functions are the reference."""
    from torch.func import jacfwd, jvp
    x, tangent = _f64(5, seed=1), _f64(5, seed=2)
    pairs = [(lambda t: tritonml.logcumsumexp(t, 0), lambda t: torch.logcumsumexp(t, 0)),
             (lambda t: tritonml.cummax(t, 0).values, lambda t: torch.cummax(t, 0).values),
             (lambda t: tritonml.std(t), lambda t: torch.std(t)),
             (lambda t: tritonml.aminmax(t).max, lambda t: torch.aminmax(t).max)]
    for ours, theirs in pairs:
        torch.testing.assert_close(jacfwd(ours)(x), jacfwd(theirs)(x))
        torch.testing.assert_close(jvp(ours, (x,), (tangent,))[1],
                                   jvp(theirs, (x,), (tangent,))[1])


def test_gradients_go_where_torchs_do():
    """cummax and max with dim: to the index taken; aminmax: split over ties; std of equal
    elements: 0 (torch's std_backward masks it)."""
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0]], requires_grad=True)
    for ours, theirs in ((lambda t: tritonml.cummax(t, 1).values,
                          lambda t: torch.cummax(t, 1).values),
                         (lambda t: tritonml.max_with_indices(t, 1)[0],
                          lambda t: torch.max(t, 1)[0]),
                         (lambda t: sum(tritonml.aminmax(t)), lambda t: sum(torch.aminmax(t))),
                         (lambda t: tritonml.std(t[:, 1:3]), lambda t: torch.std(t[:, 1:3]))):
        got, = torch.autograd.grad(ours(x).sum(), x)
        want, = torch.autograd.grad(theirs(x).sum(), x)
        assert torch.equal(got, want)


# ---------------------------------------------------------------------------------------------
# vmap and torch.compile
# ---------------------------------------------------------------------------------------------
VMAPPED = [
    lambda t: tritonml.cummax(t, 0).indices,
    lambda t: tritonml.logcumsumexp(t, -1),
    lambda t: tritonml.min_with_indices(t, 0, True).values,
    lambda t: tritonml.aminmax(t).max,
    lambda t: tritonml.var_mean(t, 0)[0],
    lambda t: tritonml.nanmean(t),
]


@pytest.mark.parametrize("in_dim", [0, 1])
def test_vmap_matches_the_loop(in_dim):
    from torch.func import vmap
    x = _f64(4, 6)
    for function in VMAPPED:
        want = torch.stack([function(x.select(in_dim, i)) for i in range(x.shape[in_dim])])
        torch.testing.assert_close(vmap(function, in_dims=in_dim)(x), want)
    # a batch of 0-d tensors: each acts as a tensor of one element
    for function in VMAPPED:
        want = torch.stack([function(x[0, i]) for i in range(6)])
        torch.testing.assert_close(vmap(function)(x[0]), want, equal_nan=True)  # var of one: NaN


def test_torch_compile_fullgraph_forward_and_backward():
    def model(t):
        values = tritonml.cummax(t, 1).values
        low, high = tritonml.aminmax(t, dim=0)
        var, mean = tritonml.var_mean(t, 1)
        return (values.sum() + high.sum() - low.sum() + var.sum() + mean.sum()
                + tritonml.logcumsumexp(t, 0).sum() + tritonml.nansum(t))
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    x = _f64(3, 4).requires_grad_()
    got = compiled(x)
    grad, = torch.autograd.grad(got, x)
    y = x.detach().clone().requires_grad_()
    want = model(y)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(grad, torch.autograd.grad(want, y)[0])


def test_compiled_triton_keeps_tuple_launching_ops_opaque():
    """With compiled Triton (traced here with fake CUDA tensors, in a compiled-mode process),
    logcumsumexp decomposes into its Triton kernel; the ops whose launches pass tensors in tuples
    (cummax, the reductions) stay single opaque calls, which torch's Triton-kernel tracing would
    otherwise drop as writing nothing."""
    script = textwrap.dedent("""
        import torch, tritonml
        from torch._functorch.aot_autograd import aot_export_module
        from torch._subclasses.fake_tensor import FakeTensorMode
        assert not tritonml.INTERPRET
        class M(torch.nn.Module):
            def forward(self, t):
                return (tritonml.logcumsumexp(t, 1), *tritonml.cummax(t, 1),
                        *tritonml.var_mean(t, 1), tritonml.nansum(t, 0),
                        *tritonml.max_with_indices(t, 0))
        with FakeTensorMode(allow_non_fake_inputs=True):
            x = torch.empty(64, 1000, device="cuda")
            graph, _ = aot_export_module(M(), (x,), trace_joint=False)
        print(graph.code)
    """)
    env = dict(os.environ, TRITON_INTERPRET="0")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=limit(300))
    assert done.returncode == 0, done.stderr[-3000:]
    code = done.stdout
    assert code.count("triton_kernel_wrapper_functional(") == 1, code   # logcumsumexp's scan
    for op in ("cummax", "var_mean", "nansum", "max_with_indices"):
        assert f"torch.ops.tritonml.{op}.default" in code, code
    assert "tritonml.logcumsumexp" not in code


def _family_launches():
    """The launches of the family's functions on rows and on columns (float32, float16, int32)
    with the configs the CUDA heuristics pick, recorded without running and described for a
    compiled-mode process (as tests/reduce_helpers.py: gpu_reduce_launches)."""
    from unittest import mock

    import tritonml_autotune.heuristics as heuristics
    from tritonml import runtime
    from tritonml.bench.gpu_compile import describe

    scan_config, reduce_config = heuristics.scan_config, heuristics.reduce_config

    def scan_for_cuda(layout, device_type, *args, **kwargs):
        return scan_config(layout, "cuda", *args, **kwargs)

    def reduce_for_cuda(layout, device_type, device=None):
        return reduce_config(layout, "cuda")

    descriptions = []
    with mock.patch.object(heuristics, "scan_config", scan_for_cuda), \
            mock.patch.object(heuristics, "reduce_config", reduce_for_cuda):
        for dtype in (torch.float32, torch.float16, torch.int32):
            for shape, dim in (((64, 8192), 1), ((8192, 64), 0)):
                x = torch.empty(shape, dtype=dtype)   # never read: launches are only recorded
                calls = [lambda: tritonml.cummax(x, dim),
                         lambda: tritonml.max_with_indices(x, dim),
                         lambda: tritonml.aminmax(x, dim=dim), lambda: tritonml.nansum(x, dim)]
                if dtype.is_floating_point:
                    calls += [lambda: tritonml.logcumsumexp(x, dim),
                              lambda: tritonml.var_mean(x, dim), lambda: tritonml.nanmean(x, dim)]
                for call in calls:
                    runtime.clear()   # a remembered plan would not ask the patched heuristics
                    with _trace.record(execute=False) as rec:
                        call()
                    descriptions.extend(describe(launch) for launch in rec.launches)
        runtime.clear()
    return descriptions


def test_family_kernels_compile_for_sm80_and_sm90_without_spills():
    """Full tier (ptxas takes minutes): every launch above compiles for sm_80 and sm_90, with
    no register spills (tests/kernels/test_gpu_compile.py's bound: one 8-byte value at most)."""
    from tritonml.bench.gpu_compile import compile_in_subprocess
    results = compile_in_subprocess(_family_launches(), archs=ARCHS)
    failures = [(r["kernel"], r["arch"], r.get("error")) for r in results if not r["ok"]]
    assert not failures, failures[:5]
    spills = [(r["kernel"], r["arch"], r.get("stack_bytes"), r.get("local_bytes"))
              for r in results if r.get("local_bytes", 0) or r.get("stack_bytes", 0) > 8]
    assert not spills, spills
