"""The in-place scatter and index reductions under autograd, routed (tritonml/routing_scatter.py)
against torch's own in-place calls (the oracle): values, the gradients of ``self``'s history and
of ``src``, ``self``'s grad_fn, its version counter, and torch's errors where torch refuses the
in-place write. torch_geometric aggregates this way (``src.new_zeros(size).scatter_add_(...)``)."""
from __future__ import annotations

import contextlib
import re

import pytest
import torch

from tritonml.core import torch_compat as _torch_compat
from tritonml.routing import deterministic_routing, use_tritonml
from tritonml.runtime import trace as _trace
from tests.routing_reset import no_routing_after_each_test  # noqa: F401 (autouse)

# torch's own index_reduce (the oracle) warns that it is in beta; the warning is torch's
pytestmark = pytest.mark.filterwarnings("ignore:index_reduce\\(\\) is in beta:UserWarning")

CPU = ("cpu",)
# float64 and distinct random values (no ties): the two differ only by the order of additions
RTOL = ATOL = 1e-12

SCATTER_INDEX = torch.tensor([[0, 2, 1], [2, 2, 0], [1, 0, 0], [0, 3, 3], [3, 1, 1], [0, 0, 2]])
ROWS = torch.tensor([0, 2, 2, 1, 0, 3])

# form -> (self.shape, src.shape, the in-place call)
FORMS = {
    "scatter_add_": ((4, 3), (6, 3), lambda x, s: x.scatter_add_(0, SCATTER_INDEX, s)),
    **{f"scatter_reduce_({reduce}, include_self={include_self})":
       ((4, 3), (6, 3), lambda x, s, r=reduce, i=include_self:
        x.scatter_reduce_(0, SCATTER_INDEX, s, r, include_self=i))
       for reduce, include_self in (("sum", True), ("prod", True), ("mean", False),
                                    ("amax", False), ("amin", True))},
    "index_add_": ((4, 3), (6, 3), lambda x, s: x.index_add_(0, ROWS, s, alpha=2.0)),
    **{f"index_reduce_({reduce}, include_self={include_self})":
       ((4, 3), (6, 3), lambda x, s, r=reduce, i=include_self:
        x.index_reduce_(0, ROWS, s, r, include_self=i))
       for reduce, include_self in (("prod", False), ("mean", True), ("amax", True),
                                    ("amin", False))},
    "index_put_(accumulate=True)": ((4, 3), (6, 3),
                                    lambda x, s: x.index_put_((ROWS,), s, accumulate=True)),
}


@contextlib.contextmanager
def routing(how):
    if how == "torch":
        yield
    elif how == "use_tritonml":
        with use_tritonml(CPU):
            yield
    else:   # deterministic mode alone routes the scatter ops, on the devices it is given
        deterministic_routing(True, devices=CPU)
        torch.use_deterministic_algorithms(True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(False)


def values(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g, dtype=torch.float64) * 3 + 0.5   # no zeros, no ties


def training_step(form, how, self_kind):
    """The in-place call on ``self`` (``zeros``: a fresh tensor that requires no grad, as
    torch_geometric's; ``non_leaf``: computed from a leaf that requires grad), then a backward
    pass: what it returned and left behind."""
    x_shape, src_shape, call = FORMS[form]
    base = values(x_shape, 1).requires_grad_()
    src = values(src_shape, 2).requires_grad_()
    x = torch.zeros(x_shape, dtype=torch.float64) if self_kind == "zeros" else base * 1.5
    version = _torch_compat.tensor_version(x)
    with routing(how), _trace.record() as rec:
        y = call(x, src)
    facts = {"returns self": y is x, "has grad_fn": y.grad_fn is not None,
             "requires_grad": y.requires_grad, "is_leaf": y.is_leaf,
             "versions": _torch_compat.tensor_version(x) - version}
    (y * values(x_shape, 3)).sum().backward()
    return y.detach(), base.grad, src.grad, facts, len(rec.launches)


@pytest.mark.parametrize("how, self_kind", [("use_tritonml", "zeros"),
                                            ("use_tritonml", "non_leaf"),
                                            ("deterministic", "non_leaf")])
def test_in_place_forms_under_autograd_give_torchs_values_gradients_and_versions(how, self_kind):
    for form in FORMS:
        want = training_step(form, "torch", self_kind)
        got = training_step(form, how, self_kind)
        assert want[4] == 0 and got[4] > 0, form          # tritonml ran the routed call
        assert got[3] == want[3], form                    # one version bump, a grad_fn, no leaf
        for g, w in zip(got[:3], want[:3]):
            if w is None:
                assert g is None, form
            else:
                torch.testing.assert_close(g, w, rtol=RTOL, atol=ATOL, msg=form)


def test_a_tensor_saved_before_the_in_place_call_is_refused_in_backward_as_by_torch():
    """torch's version counter: a backward that needs self's old value fails once self was
    written in place; routed, it fails the same way."""
    errors = []
    for how in ("torch", "use_tritonml"):
        base = values((4, 3), 1).requires_grad_()
        x = base * 1.5
        squared = x * x                                   # saves x
        with routing(how), _trace.record() as rec:
            x.scatter_add_(0, SCATTER_INDEX, values((6, 3), 2).requires_grad_())
        assert (len(rec.launches) > 0) == (how != "torch")
        with pytest.raises(RuntimeError) as caught:
            squared.sum().backward()
        # torch's message names self's grad_fn (torch's node, or the routed copy's) and the
        # versions: expected 0, found 1
        errors.append(re.sub(r"output 0 of [\w:]+", "output 0 of ...", str(caught.value)))
    assert errors[0] == errors[1] and "modified by an inplace operation" in errors[0]
    assert "is at version 1; expected version 0" in errors[0]


def leaf(shape=(4, 3)):
    return values(shape, 1).requires_grad_()


def non_leaf_view_made_without_grad():
    x = leaf() * 1.5
    with torch.no_grad():
        return x[:4]


# self -> what torch says when asked to write it in place while autograd records
REFUSED = {
    "leaf requiring grad": (leaf, "a leaf Variable that requires grad"),
    "view of a leaf requiring grad": (lambda: leaf((5, 3))[1:], "a view of a leaf Variable"),
    "view made in no_grad mode": (non_leaf_view_made_without_grad, "created in no_grad mode"),
    "one of unbind's views": (lambda: (leaf((2, 4, 3)) * 1.5).unbind(0)[0], "of Unbind is a view"),
}


@pytest.mark.parametrize("case", REFUSED)
def test_in_place_writes_torch_refuses_raise_torchs_error_and_write_nothing(case):
    make_self, message = REFUSED[case]
    src = values((6, 3), 2).requires_grad_()
    for form in ("scatter_add_", "index_reduce_(amax, include_self=True)",
                 "index_put_(accumulate=True)"):
        call = FORMS[form][2]
        outcomes = []
        for how in ("torch", "use_tritonml"):
            x = make_self()
            before = x.detach().clone()
            with routing(how), _trace.record() as rec, pytest.raises(RuntimeError) as caught:
                call(x, src)
            assert torch.equal(x.detach(), before), (case, form)   # nothing written
            outcomes.append(str(caught.value))
            if case.startswith(("leaf", "view of a leaf")):   # found before any launch
                assert not rec.launches, (case, form)
        assert outcomes[0] == outcomes[1] and message in outcomes[0], (case, form)


def test_a_leaf_requiring_grad_is_written_in_place_without_grad_mode_as_by_torch():
    results = []
    for how in ("torch", "use_tritonml"):
        x = leaf()
        version = _torch_compat.tensor_version(x)
        with torch.no_grad(), routing(how), _trace.record() as rec:
            y = x.scatter_add_(0, SCATTER_INDEX, values((6, 3), 2))
        assert y is x and x.is_leaf and x.grad_fn is None and x.requires_grad
        assert (len(rec.launches) > 0) == (how != "torch")
        results.append((x.detach(), _torch_compat.tensor_version(x) - version))
    torch.testing.assert_close(results[1][0], results[0][0], rtol=RTOL, atol=ATOL)
    assert results[1][1] == results[0][1]
