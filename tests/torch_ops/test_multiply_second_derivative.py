"""Second derivatives of products at zeros: ``tritonml.reduce(..., "multiply")``,
``segment_reduce(..., "multiply")``, ``cumulative_product`` and ``segment_scan(..., "product")``.

Each output is a product of a set of x's elements, so the Hessian of a weighted sum of outputs
has an exact oracle (``_product_hessian``): d2 (sum_i w_i prod_{k in S_i} x_k) / dx_a dx_b =
sum over the i with a, b in S_i of w_i prod_{k in S_i, k not a or b} x_k for a != b, 0 on the
diagonal. A zero's own derivative is what the old formulas lost (they wrote terms that are 0 at
the point as constants): the Hessian of prod([2, 0, 3, 1.5]) was 0 at [0, 1] instead of 4.5.
Reverse over reverse (``torch.autograd.functional.hessian``), forward over reverse
(``jacfwd(jacrev)``) and ``gradgradcheck`` (finite differences of the gradient), with one, two
and three zeros (docs/semantics.md, "Gradients at zeros").
"""
import itertools
import math

import numpy as np
import pytest
import torch
from torch.func import jacfwd, jacrev

import tritonml

# torch's first forward-mode call loads its jvp decompositions with torch.jit.script, which torch
# 2.13 deprecates (as tests/torch_ops/test_forward_ad.py)
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")

F64 = torch.float64
VALUES = [2.0, -1.5, 3.0, 0.5, 1.25]


def _with_zeros(positions, values=VALUES):
    x = np.array(values, dtype=np.float64)
    x[list(positions)] = 0.0
    return x


def _product_hessian(x, sets, weights):
    """The exact Hessian in x (flat, numpy float64) of sum_i weights[i] * prod(x[sets[i]])."""
    n = x.size
    h = np.zeros((n, n))
    for members, w in zip(sets, weights):
        for a, b in itertools.permutations(members, 2):
            h[a, b] += w * math.prod(x[k] for k in members if k not in (a, b))
    return h


def _hessians(f, x):
    """f's Hessian reverse over reverse and forward over reverse, flattened to (n, n)."""
    n = x.numel()
    return (torch.autograd.functional.hessian(f, x).reshape(n, n),
            jacfwd(jacrev(f))(x).reshape(n, n))


def _assert_hessians(f, x, oracle):
    for got in _hessians(f, x):
        torch.testing.assert_close(got, torch.from_numpy(oracle), rtol=1e-12, atol=1e-12)


def _groups(shape, axes):
    """The flat indices of each reduced group of a row-major ``shape`` over ``axes``, in the
    row-major order of the kept-rank result."""
    index = np.arange(math.prod(shape)).reshape(shape)
    kept = [d for d in range(len(shape)) if d not in axes]
    moved = np.transpose(index, kept + list(axes))
    return [list(g.ravel()) for g in moved.reshape(-1, math.prod(shape[a] for a in axes))]


# ---------------------------------------------------------------------------------------------
# tritonml.reduce(x, "multiply")
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("zeros", [(), (1,), (1, 3), (0, 1, 3)],
                         ids=["no-zero", "one-zero", "two-zeros", "three-zeros"])
def test_reduce_hessian_matches_the_oracle(zeros):
    x = _with_zeros(zeros)
    f = lambda t: tritonml.reduce(t, "multiply", 0).sum()  # noqa: E731
    _assert_hessians(f, torch.tensor(x), _product_hessian(x, [range(x.size)], [1.0]))


def test_the_issue_example():
    x = torch.tensor([2.0, 0.0, 3.0, 1.5], dtype=F64)
    h = torch.autograd.functional.hessian(lambda t: tritonml.reduce(t, "multiply", 0).sum(), x)
    torch.testing.assert_close(h, torch.autograd.functional.hessian(torch.prod, x))
    assert h[0, 1] == 4.5


# zeros per case: axis 1 gets rows with one, two and no zero; axis 0 columns with one zero and
# none; both axes two zeros in all
@pytest.mark.parametrize("axes,zeros", [((1,), [(0, 1), (1, 0), (1, 3)]),
                                        ((0,), [(0, 1), (1, 0), (2, 3)]),
                                        ((0, 1), [(0, 1), (1, 3)])],
                         ids=["axis-1", "axis-0", "both-axes"])
def test_reduce_weighted_hessian_over_axes(axes, zeros):
    generator = np.random.default_rng(7)
    x = generator.uniform(0.5, 2.0, (3, 4)) * generator.choice([-1.0, 1.0], (3, 4))
    for position in zeros:
        x[position] = 0.0
    groups = _groups(x.shape, axes)
    weights = generator.normal(size=len(groups))
    w = torch.tensor(weights).reshape([1 if d in axes else x.shape[d] for d in range(2)])
    f = lambda t: (tritonml.reduce(t, "multiply", axes) * w).sum()  # noqa: E731
    _assert_hessians(f, torch.tensor(x), _product_hessian(x.ravel(), groups, weights))


def test_reduce_gradgradcheck_with_one_and_two_zeros():
    # row 0 one zero, row 1 two zeros, over a non-contiguous view
    x = torch.tensor([[1.5, 0.0, -2.0], [0.0, 0.7, 0.0]], dtype=F64).t().requires_grad_()
    f = lambda t: tritonml.reduce(t, "multiply", 0, keepdims=False)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x,))
    assert torch.autograd.gradgradcheck(f, (x,), fast_mode=True)


# ---------------------------------------------------------------------------------------------
# tritonml.segment_reduce(x, "multiply")
# ---------------------------------------------------------------------------------------------
SEGMENT_X = [1.5, 0.0, -2.0, 0.0, 0.7, 0.0, 1.2, 3.0]   # one zero, none (empty), two zeros
OFFSETS = [0, 3, 3, 6, 8]                              # and a segment with none


@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce_hessian_and_gradgradcheck(initial):
    x = np.array(SEGMENT_X)
    offsets = torch.tensor(OFFSETS)
    groups = [list(range(a, b)) for a, b in zip(OFFSETS, OFFSETS[1:])]
    weights = np.array([0.5, -1.0, 1.5, 2.0]) * (1.0 if initial is None else initial)
    w = torch.tensor([0.5, -1.0, 1.5, 2.0], dtype=F64)

    def f(t):
        return (tritonml.segment_reduce(t, "multiply", offsets=offsets, initial=initial)
                * w).sum()
    _assert_hessians(f, torch.tensor(x), _product_hessian(x, groups, weights))
    t = torch.tensor(x).requires_grad_()
    g = lambda t: tritonml.segment_reduce(t, "multiply", offsets=offsets,  # noqa: E731
                                          initial=initial)
    assert torch.autograd.gradgradcheck(g, (t,), fast_mode=True)


# ---------------------------------------------------------------------------------------------
# tritonml.cumulative_product and segment_scan(..., "product")
# ---------------------------------------------------------------------------------------------
def _scan_sets(n, reverse, exclusive, starts=(0,)):
    """The elements each output of a (segmented) product scan multiplies, in x's indices."""
    ends = list(starts[1:]) + [n]
    sets = []
    for i in range(n):
        start = max(s for s in starts if s <= i)
        end = ends[list(starts).index(start)]
        if reverse:
            sets.append(list(range(i + exclusive, end)))
        else:
            sets.append(list(range(start, i + 1 - exclusive)))
    return sets


DIRECTIONS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("reverse,exclusive", DIRECTIONS)
@pytest.mark.parametrize("zeros", [(1,), (1, 3)], ids=["one-zero", "two-zeros"])
def test_cumulative_product_hessian_matches_the_oracle(zeros, reverse, exclusive):
    x = _with_zeros(zeros)
    weights = np.array([0.5, -1.0, 1.5, 2.0, -0.25])
    w = torch.tensor(weights)
    f = lambda t: (tritonml.cumulative_product(  # noqa: E731
        t, 0, reverse=reverse, exclusive=exclusive) * w).sum()
    oracle = _product_hessian(x, _scan_sets(x.size, reverse, exclusive), weights)
    _assert_hessians(f, torch.tensor(x), oracle)


@pytest.mark.parametrize("reverse,exclusive", DIRECTIONS)
def test_cumulative_product_gradgradcheck_with_one_and_two_zeros(reverse, exclusive):
    # row 0 one zero, row 1 two zeros
    x = torch.tensor([[1.5, 0.0, -2.0, 0.7], [0.0, 1.2, 0.0, 0.8]], dtype=F64).requires_grad_()
    f = lambda t: tritonml.cumulative_product(t, 1, reverse=reverse,  # noqa: E731
                                              exclusive=exclusive)
    assert torch.autograd.gradgradcheck(f, (x,), fast_mode=True)


def test_cumulative_product_gradgradcheck_with_zeros_and_an_initial():
    x = torch.tensor([[1.5, 0.0, -2.0], [0.0, 1.2, 0.0]], dtype=F64).requires_grad_()
    initial = torch.tensor([0.0, 0.9], dtype=F64).requires_grad_()
    f = lambda t, i: tritonml.cumulative_product(t, 1, exclusive=True, initial=i)  # noqa: E731
    assert torch.autograd.gradgradcheck(f, (x, initial), fast_mode=True)


@pytest.mark.parametrize("reverse,exclusive", DIRECTIONS)
def test_segment_product_scan_hessian_and_gradgradcheck(reverse, exclusive):
    x = np.array(SEGMENT_X)
    starts = (0, 3, 6)
    offsets = torch.tensor([0, 3, 3, 6, 8])     # an empty segment too
    weights = np.array([0.5, -1.0, 1.5, 2.0, -0.25, 0.75, 1.25, -2.0])
    w = torch.tensor(weights)

    def f(t):
        return (tritonml.segment_scan(t, "product", offsets=offsets, reverse=reverse,
                                      exclusive=exclusive) * w).sum()
    oracle = _product_hessian(x, _scan_sets(x.size, reverse, exclusive, starts), weights)
    _assert_hessians(f, torch.tensor(x), oracle)
    t = torch.tensor(x).requires_grad_()
    g = lambda t: tritonml.segment_scan(t, "product", offsets=offsets,  # noqa: E731
                                        reverse=reverse, exclusive=exclusive)
    assert torch.autograd.gradgradcheck(g, (t,), fast_mode=True)


# ---------------------------------------------------------------------------------------------
# torch.prod and torch.cumprod routed to tritonml (tritonml.use_tritonml)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("zeros", [(1,), (1, 3)], ids=["one-zero", "two-zeros"])
def test_routed_prod_and_cumprod_hessians_match_the_oracle(zeros):
    from tritonml.runtime import trace as _trace
    x = _with_zeros(zeros)
    weights = np.linspace(0.5, 1.5, x.size)
    w = torch.from_numpy(weights)
    cases = ((lambda t: torch.prod(t, 0), _product_hessian(x, [range(x.size)], [1.0])),
             (lambda t: (torch.cumprod(t, 0) * w).sum(),
              _product_hessian(x, [range(i + 1) for i in range(x.size)], weights)))
    for f, oracle in cases:
        with tritonml.use_tritonml(devices=("cpu",)), _trace.record() as rec:
            got = torch.autograd.functional.hessian(f, torch.tensor(x))
        assert rec.launches, "the call was not routed"
        torch.testing.assert_close(got, torch.from_numpy(oracle), rtol=1e-12, atol=1e-12)
