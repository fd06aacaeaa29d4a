"""Gradients of the scatter and index reductions: gradcheck (reverse and forward mode) against
finite differences, torch's own formulas where they choose among subgradients (ties of
amax/amin shared evenly, input included; products exact with zeros), and vmap,
torch.compile(fullgraph=True) and export."""
from __future__ import annotations

import pytest
import torch

import tritonml

# forward-mode AD loads torch's jvp decompositions on first use, which torch.jit.script (deprecated)
pytestmark = [pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta"),
              pytest.mark.filterwarnings(
                  "ignore:`torch.jit.script` is deprecated:DeprecationWarning")]

REDUCES = ("sum", "prod", "mean", "amax", "amin")


def shared_case(seed=0):
    g = torch.Generator().manual_seed(seed)
    input = torch.randn(4, 2, generator=g, dtype=torch.float64)
    src = torch.randn(6, 2, generator=g, dtype=torch.float64)
    index = torch.tensor([0, 2, 2, 0, 1, 2]).reshape(-1, 1).expand(6, 2)
    return input, index, src


def general_case(seed=1):
    g = torch.Generator().manual_seed(seed)
    input = torch.randn(2, 4, generator=g, dtype=torch.float64)
    src = torch.randn(2, 5, generator=g, dtype=torch.float64)
    index = torch.randint(0, 4, (2, 4), generator=g)
    return input, index, src


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", (True, False))
@pytest.mark.parametrize("layout", ("shared", "general"))
def test_gradcheck_reverse_and_forward(reduce, include_self, layout, fast):
    input, index, src = (shared_case if layout == "shared" else general_case)()
    dim = 0 if layout == "shared" else 1
    input.requires_grad_()
    src.requires_grad_()

    def f(i, s):
        return tritonml.scatter_reduce(i, dim, index, s, reduce, include_self=include_self)
    assert torch.autograd.gradcheck(f, (input, src), check_forward_ad=True, fast_mode=fast)


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", (True, False))
def test_gradients_are_torchs_at_ties_and_zeros(reduce, include_self):
    # ties between input and src, inside src, zeros in products
    input = torch.tensor([2.0, 0.0, 5.0], dtype=torch.float64)
    src = torch.tensor([2.0, 2.0, 0.0, 3.0, 0.0, 5.0], dtype=torch.float64)
    index = torch.tensor([0, 0, 1, 1, 1, 2])
    grad = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    ours = torch.autograd.grad(tritonml.scatter_reduce(
        input.requires_grad_(), 0, index, src.requires_grad_(), reduce,
        include_self=include_self), (input, src), grad)
    if reduce in ("amax", "amin") and not include_self:
        # torch counts input's ties in the share but gives input nothing (its gradients then
        # add up to less than the gradient): the share here is among the group's elements
        theirs = (torch.zeros(3, dtype=torch.float64),
                  torch.tensor([0.5, 0.5, 0.0, 2.0, 0.0, 3.0] if reduce == "amax" else
                               [0.5, 0.5, 1.0, 0.0, 1.0, 3.0], dtype=torch.float64))
    else:
        # torch's CPU scatter_reduce is the reference for which subgradient is taken
        theirs = torch.autograd.grad(input.scatter_reduce(0, index, src, reduce,
                                                          include_self=include_self),
                                     (input, src), grad)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a, b)


@pytest.mark.parametrize("form", ("index_add", "index_reduce_mean", "scatter_mean",
                                  "segment_coo_sum", "scatter_max", "bincount"))
def test_gradcheck_other_forms(form, fast):
    g = torch.Generator().manual_seed(4)
    input = torch.randn(3, 2, generator=g, dtype=torch.float64, requires_grad=True)
    source = torch.randn(5, 2, generator=g, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([2, 0, 2, 1, 2])
    calls = {
        "index_add": lambda i, s: tritonml.index_add(i, 0, index, s, alpha=2),
        "index_reduce_mean": lambda i, s: tritonml.index_reduce(i, 0, index, s, "mean"),
        "scatter_mean": lambda i, s: tritonml.scatter(s, index, 0, dim_size=4, reduce="mean"),
        "segment_coo_sum": lambda i, s: tritonml.segment_coo(s, index.sort().values,
                                                             dim_size=3),
        "scatter_max": lambda i, s: tritonml.scatter_max(s, index, 0, dim_size=4)[0],
        "bincount": lambda i, s: tritonml.bincount(index, s[:, 0]),
    }
    assert torch.autograd.gradcheck(calls[form], (input, source), check_forward_ad=True,
                                    fast_mode=fast)


def test_double_backward_of_a_product(fast):
    input, index, src = shared_case()
    assert torch.autograd.gradgradcheck(
        lambda i, s: tritonml.scatter_reduce(i, 0, index, s, "prod"),
        (input.requires_grad_(), src.requires_grad_()), fast_mode=fast)


def test_vmap_over_src_and_input():
    input, index, src = shared_case()
    batch_in = torch.stack([input, 2 * input])
    batch_src = torch.stack([src, -src])
    got = torch.func.vmap(lambda i, s: tritonml.scatter_reduce(i, 0, index, s, "amax"))(
        batch_in, batch_src)
    for k in range(2):
        torch.testing.assert_close(got[k], batch_in[k].scatter_reduce(0, index, batch_src[k],
                                                                      "amax"))
    grads = torch.func.vmap(torch.func.grad(
        lambda s: tritonml.scatter(s, index[:, 0], 0, dim_size=3, reduce="mean").sum()))(
            batch_src)
    # node 0 has two edges, node 1 one, node 2 three
    torch.testing.assert_close(grads[0], torch.tensor([1 / 2, 1 / 3, 1 / 3, 1 / 2, 1.0, 1 / 3],
                                                      dtype=torch.float64
                                                      ).reshape(-1, 1).expand(6, 2))


def test_compile_fullgraph_and_export():
    input, index, src = shared_case()

    def f(i, s):
        return (tritonml.scatter_reduce(i, 0, index, s, "mean"),
                tritonml.scatter(s, index[:, 0], 0, dim_size=5, reduce="max"))
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    for a, b in zip(compiled(input, src), f(input, src)):
        torch.testing.assert_close(a, b)

    class Scatter(torch.nn.Module):
        def forward(self, i, s):
            return tritonml.scatter_add(i, 0, index, s)
    exported = torch.export.export(Scatter(), (input, src))
    assert "tritonml.group_reduce" in str(exported.graph)
    torch.testing.assert_close(exported.module()(input, src),
                               input.scatter_add(0, index, src))


@pytest.mark.parametrize("function, initial, empty, accumulated",
                         [("MAX", None, 0, False), ("SUM", 1.5, None, False),
                          ("AVERAGE", 0.0, None, False), ("MULTIPLY", None, None, True)])
def test_the_group_reduce_op_passes_torchs_opcheck(function, initial, empty, accumulated):
    # schema, autograd registration, fake kernel and AOT dispatch of the op the functions call;
    # ``empty`` (an empty group's value alone) as well as ``initial``; ``accumulated``: float32
    # groups in float64, not rounded (include_self's fold)
    dtype = torch.float32 if accumulated else torch.float64
    x = torch.randn(6, 3, dtype=dtype, requires_grad=True)
    offsets = torch.tensor([0, 0, 2, 2, 6, 6])
    torch.library.opcheck(torch.ops.tritonml.group_reduce.default,
                          (x, offsets, function, 0, initial, empty, accumulated))
    got = torch.ops.tritonml.group_reduce(x.detach(), offsets, function, 0, initial, empty,
                                          accumulated)
    if accumulated:
        assert got.dtype == torch.float64
        want = x.detach().double()
        torch.testing.assert_close(got[[1, 3]], torch.stack([want[0:2].prod(0),
                                                             want[2:6].prod(0)]),
                                   rtol=1e-15, atol=0)
    if empty is not None:   # the empty groups hold it, the others do not see it
        assert got[[0, 2, 4]].eq(empty).all()
        torch.testing.assert_close(got[1], x.detach()[0:2].amax(0))
        torch.testing.assert_close(got[3], x.detach()[2:6].amax(0))
