"""Every public scatter and index function under every torch.func transform (jvp, grad, jacrev,
jacfwd, hessian, vmap), its index captured from outside the function, passed in as an argument,
or made inside it: each result compared with the same transform applied to torch's own op that
defines the function (torch.scatter_reduce, index_add, index_reduce; torch_scatter's forms are
torch.scatter_reduce with include_self=False into zeros, ones for "mul", as their documented
semantics), which does not involve tritonml.

One test function per public function, each running all of its transforms, so the fast tier
(tests/conftest.py: a few cases of a parametrized function) keeps every one; the fast tier runs
each transform under one index mode, turning with the function, --full every mode."""
from __future__ import annotations

import dataclasses
from typing import Callable

import pytest
import torch

import tritonml
from tritonml.runtime import trace

# forward-mode AD loads torch's jvp decompositions on first use, which torch.jit.script (deprecated)
pytestmark = [pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta"),
              pytest.mark.filterwarnings(
                  "ignore:`torch.jit.script` is deprecated:DeprecationWarning")]

F64 = torch.float64
INDEX = torch.tensor([2, 0, 2, 1, 2])
SORTED = torch.tensor([0, 0, 1, 3, 3])
GROUPS = 4   # group 3 of INDEX and group 2 of SORTED are empty


@dataclasses.dataclass
class Case:
    """``ours(x, index)`` and ``torchs(x, index)``, differentiable in the float64 ``x`` of
    ``shape``; ``index`` the 1-D index, ``batched_index`` a batch of two for vmap."""
    ours: Callable
    torchs: Callable
    index: torch.Tensor
    shape: tuple = (5,)

    @property
    def batched_index(self) -> torch.Tensor:
        # the second of the same kind: INDEX reversed, SORTED's groups shifted (still sorted)
        other = INDEX.flip(0) if self.index is INDEX else torch.tensor([0, 1, 1, 1, 3])
        return torch.stack([self.index, other])


_g = torch.Generator().manual_seed(7)
BASE = torch.randn(GROUPS, generator=_g, dtype=F64)
BASE_ROWS = torch.randn(GROUPS, 2, generator=_g, dtype=F64)


def _along(index, like, dim: int = 0):
    """A 1-D index along ``dim`` expanded to ``like``'s shape (torch.scatter_reduce's form)."""
    view = [1] * like.dim()
    view[dim] = -1
    return index.reshape(view).expand(like.shape)


def _torch_scatter_form(reduce: str):
    """torch_scatter's scatter(src, index, 0, dim_size=GROUPS, reduce=...) from torch's op: an
    empty group 0, a mean over the group's elements alone; "mul" a product into ones (torch's
    forward mode of "prod" without include_self gives zero tangents, torch 2.13)."""
    torch_reduce = {"sum": "sum", "mean": "mean", "mul": "prod", "max": "amax",
                    "min": "amin"}[reduce]

    def call(src, index):
        start = (torch.ones if reduce == "mul" else torch.zeros)(GROUPS, *src.shape[1:],
                                                                 dtype=src.dtype)
        return start.scatter_reduce(0, _along(index, src), src, torch_reduce,
                                    include_self=reduce == "mul")
    return call


CASES = {
    "scatter_reduce": Case(
        lambda x, i: tritonml.scatter_reduce(BASE, 0, i, x, "mean"),
        lambda x, i: torch.scatter_reduce(BASE, 0, i, x, "mean"), INDEX),
    "scatter_add": Case(
        lambda x, i: tritonml.scatter_add(BASE, 0, i, x),
        lambda x, i: torch.scatter_add(BASE, 0, i, x), INDEX),
    "index_add": Case(
        lambda x, i: tritonml.index_add(BASE_ROWS, 0, i, x, alpha=2),
        lambda x, i: torch.index_add(BASE_ROWS, 0, i, x, alpha=2), INDEX, (5, 2)),
    "index_reduce": Case(
        lambda x, i: tritonml.index_reduce(BASE_ROWS, 0, i, x, "prod"),
        # (torch.index_reduce has no forward mode: its definition, torch.scatter_reduce, has)
        lambda x, i: torch.scatter_reduce(BASE_ROWS, 0, _along(i, x), x, "prod"), INDEX,
        (5, 2)),
    "bincount": Case(
        lambda x, i: tritonml.bincount(i, x, minlength=GROUPS),
        # torch.bincount's weighted counts, which torch does not differentiate: their definition
        lambda x, i: torch.zeros(GROUPS, dtype=F64).index_add(0, i, x), INDEX),
    "scatter": Case(
        lambda x, i: tritonml.scatter(x, i, 0, dim_size=GROUPS, reduce="mul"),
        _torch_scatter_form("mul"), INDEX, (5, 2)),
    "scatter_max": Case(
        lambda x, i: tritonml.scatter_max(x, i, 0, dim_size=GROUPS)[0],
        _torch_scatter_form("max"), INDEX),
    "scatter_min": Case(
        lambda x, i: tritonml.scatter_min(x, i, 0, dim_size=GROUPS)[0],
        _torch_scatter_form("min"), INDEX),
    "segment_coo": Case(
        lambda x, i: tritonml.segment_coo(x, i, dim_size=GROUPS, reduce="mean"),
        _torch_scatter_form("mean"), SORTED),
    "segment_max_coo": Case(
        lambda x, i: tritonml.segment_max_coo(x, i, dim_size=GROUPS)[0],
        _torch_scatter_form("max"), SORTED),
    "segment_min_coo": Case(
        lambda x, i: tritonml.segment_min_coo(x, i, dim_size=GROUPS)[0],
        _torch_scatter_form("min"), SORTED),
}


def _transformed(op: Callable, case: Case, transform: str, mode: str, x: torch.Tensor,
                 weights: torch.Tensor, *, reverse_only: bool = False):
    """``transform`` of ``op`` at x, the index ``mode``: "captured" (a tensor from outside the
    function), "passed" (an argument: to vmap batched, to the others at argnums=0; jvp takes
    floating primals only, so it has none) or "made" (built inside the function).
    ``reverse_only``: jvp, jacfwd and hessian's derivatives from reverse mode (the same
    numbers), for torch's ops: torch 2.13's forward mode of scatter_reduce's "prod" gives zero
    tangents, and index_reduce has none."""
    index_values = case.index.tolist()

    def with_index(x, index=None):
        if mode == "captured":
            index = case.index
        elif mode == "made":
            index = torch.tensor(index_values)
        return op(x, index)

    def scalar(x, *index):   # second order everywhere: no function here is quadratic itself
        return (with_index(x, *index) ** 2 * weights).sum()

    passed = (case.index,) if mode == "passed" else ()
    if transform == "jvp" and reverse_only:
        jacobian = torch.func.jacrev(with_index)(x)
        return with_index(x), jacobian.sum(tuple(range(-x.dim(), 0)))   # (the tangent: ones)
    if transform == "jvp":
        return torch.func.jvp(with_index, (x,), (torch.ones_like(x),))
    if transform == "vmap":
        xs = torch.stack([x, -2 * x])
        if mode == "passed":
            return torch.func.vmap(with_index)(xs, case.batched_index)
        return torch.func.vmap(with_index)(xs)
    if transform == "grad":
        return torch.func.grad(scalar)(x, *passed)
    if transform == "hessian":
        outer = torch.func.jacrev if reverse_only else torch.func.jacfwd
        return outer(torch.func.jacrev(scalar))(x, *passed)   # (torch.func.hessian's form)
    jacobian = torch.func.jacrev if transform == "jacrev" or reverse_only else torch.func.jacfwd
    return jacobian(with_index)(x, *passed)


TRANSFORMS = ("jvp", "grad", "jacrev", "jacfwd", "hessian", "vmap")
MODES = ("captured", "passed", "made")


def _modes(name: str, transform: str, fast: bool) -> tuple:
    """Every index mode with --full; in the fast tier one per transform, turning with the
    function, so that across the functions every transform meets every mode."""
    modes = tuple(m for m in MODES if (transform, m) != ("jvp", "passed"))
    if not fast:
        return modes
    turn = list(CASES).index(name) + TRANSFORMS.index(transform)
    return (modes[turn % len(modes)],)


def check_every_transform(name: str, fast: bool) -> None:
    case = CASES[name]
    g = torch.Generator().manual_seed(3)
    # distinct values away from 0: no ties among extremes, none with an empty group's 0
    x = (torch.randperm(int(torch.tensor(case.shape).prod()), generator=g).to(F64) + 1
         ).reshape(case.shape) * torch.where(torch.rand(case.shape, generator=g) < 0.5, -1, 1)
    x = x / 4
    weights = torch.randn(GROUPS, *case.shape[1:], generator=g, dtype=F64)
    failures = []
    for transform in TRANSFORMS:
        for mode in _modes(name, transform, fast):
            if (name, transform, mode) == ("bincount", "vmap", "passed"):
                continue   # (refused: test_bincount_under_transforms)
            try:
                ours = _transformed(case.ours, case, transform, mode, x, weights)
            except Exception as error:   # every combination is reported, not the first only
                failures.append(f"{transform}/{mode}: {type(error).__name__}: {error}")
                continue
            theirs = _transformed(case.torchs, case, transform, mode, x, weights,
                                  reverse_only=True)
            try:
                torch.testing.assert_close(ours, theirs)
            except AssertionError as error:
                failures.append(f"{transform}/{mode}: {error}")
    assert not failures, f"{name}:\n" + "\n".join(failures)


def _check_batched_bincount_refused():
    """A batched input would give each batch element a result of its own size: torch refuses
    it, and so does tritonml, naming the parameter, before anything is launched."""
    inputs = torch.stack([INDEX, INDEX.clamp(max=1)])
    weights = torch.ones(2, INDEX.shape[0], dtype=F64)
    with pytest.raises(RuntimeError):
        torch.func.vmap(torch.bincount)(inputs, weights)
    with trace.record() as rec, pytest.raises(ValueError, match="^input: .*vmap"):
        torch.func.vmap(tritonml.bincount)(inputs, weights)
    assert rec.launches == []


def test_scatter_reduce_under_transforms(fast):
    check_every_transform("scatter_reduce", fast)


def test_scatter_add_under_transforms(fast):
    check_every_transform("scatter_add", fast)


def test_index_add_under_transforms(fast):
    check_every_transform("index_add", fast)


def test_index_reduce_under_transforms(fast):
    check_every_transform("index_reduce", fast)


# (torch's own bincount under vmap, which the refusal is compared with, warns first)
@pytest.mark.filterwarnings("ignore:There is a performance drop because we have not yet "
                            "implemented the batching rule")
def test_bincount_under_transforms(fast):
    check_every_transform("bincount", fast)
    _check_batched_bincount_refused()


def test_scatter_under_transforms(fast):
    check_every_transform("scatter", fast)


def test_scatter_max_under_transforms(fast):
    check_every_transform("scatter_max", fast)


def test_scatter_min_under_transforms(fast):
    check_every_transform("scatter_min", fast)


def test_segment_coo_under_transforms(fast):
    check_every_transform("segment_coo", fast)


def test_segment_max_coo_under_transforms(fast):
    check_every_transform("segment_max_coo", fast)


def test_segment_min_coo_under_transforms(fast):
    check_every_transform("segment_min_coo", fast)
