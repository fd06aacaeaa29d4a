"""Forward-mode autograd (``torch.func.jvp``, ``jacfwd``, ``torch.autograd.forward_ad``) of every
differentiable op: ``gradcheck(check_forward_ad=True)`` in float64 against finite differences, and
torch's own functions (``torch.cumsum``, ``torch.cumprod``, ``torch.sum``, ``torch.logsumexp``,
``torch.linalg.vector_norm``, ``torch.var_mean``, a loop for the recurrence) as the oracle of the
tangents, the Jacobians (jacfwd: vmap of jvp) and the Hessians (jacfwd of jacrev).
"""
import pytest
import torch
import triton
import triton.language as tl
from torch.autograd import forward_ad
from torch.func import hessian, jacfwd, jacrev, jvp

import tritonml
from tritonml.records.ready_reductions import welford, welford_biased
from tritonml.runtime import trace as _trace

F64 = torch.float64

# torch's first forward-mode call loads its jvp decompositions with torch.jit.script, which torch
# itself has deprecated (torch/_decomp/decompositions_for_jvp.py): torch's warning, not tritonml's.
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")


def _f64(*shape, seed=0):
    return torch.randn(*shape, dtype=F64, generator=torch.Generator().manual_seed(seed))


@pytest.fixture
def gradcheck(fast):
    """``torch.autograd.gradcheck`` of forward and reverse mode against finite differences: every
    column of the Jacobians in the full tier, a random projection of them (torch's fast_mode)
    in the fast one."""

    def check(f, inputs):
        return torch.autograd.gradcheck(f, inputs, check_forward_ad=True,
                                        check_backward_ad=True, fast_mode=fast)
    return check


def _assert_tangents(ours, theirs, primals, tangents):
    """``jvp(ours)`` equals ``jvp(theirs)``: outputs and tangents."""
    got = jvp(ours, primals, tangents)
    want = jvp(theirs, primals, tangents)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------------------------
# Scans: torch's cumsum/cumprod with flips and a concatenated initial as the oracle
# ---------------------------------------------------------------------------------------------
def _torch_scan(cumulative, identity, axis, reverse, exclusive):
    """torch's scan with tritonml's reverse, exclusive and initial options spelled out."""
    def scan(x, initial=None):
        xs = x.flip(axis) if reverse else x
        first = (initial.unsqueeze(axis) if initial is not None
                 else torch.full_like(xs.narrow(axis, 0, 1), identity))
        ys = cumulative(torch.cat([first, xs], axis), axis)
        n = x.shape[axis]
        ys = ys.narrow(axis, 0, n) if exclusive else ys.narrow(axis, 1, n)
        return ys.flip(axis) if reverse else ys
    return scan


SCANS = {"sum": (tritonml.cumulative_sum, torch.cumsum, 0.0),
         "product": (tritonml.cumulative_product, torch.cumprod, 1.0)}
ZEROS = {"none": [], "one": [(0, 2)], "two": [(1, 0), (1, 3)], "last": [(2, 4)]}
OPTIONS = [(r, e, i) for r in (False, True) for e in (False, True) for i in (False, True)]


def _scan_input(zeros):
    x = _f64(3, 5)
    for index in ZEROS[zeros]:
        x[index] = 0.0
    return x


@pytest.mark.parametrize("reverse,exclusive,with_initial", OPTIONS)
@pytest.mark.parametrize("zeros", list(ZEROS))
@pytest.mark.parametrize("name", list(SCANS))
def test_scan_tangents_match_torch(name, zeros, reverse, exclusive, with_initial):
    ours, cumulative, identity = SCANS[name]
    x, tx = _scan_input(zeros), _f64(3, 5, seed=1)
    theirs = _torch_scan(cumulative, identity, 1, reverse, exclusive)
    if with_initial:
        initial = _f64(3, seed=2)
        if zeros != "none":
            initial[1] = 0.0          # a zero initial ahead of the zeros in x
        _assert_tangents(
            lambda x, i: ours(x, 1, reverse=reverse, exclusive=exclusive, initial=i), theirs,
            (x, initial), (tx, _f64(3, seed=3)))
        # only one of the two carries a tangent
        _assert_tangents(lambda i: ours(x, 1, reverse=reverse, exclusive=exclusive, initial=i),
                         lambda i: theirs(x, i), (initial,), (_f64(3, seed=3),))
        _assert_tangents(
            lambda x: ours(x, 1, reverse=reverse, exclusive=exclusive, initial=initial),
            lambda x: theirs(x, initial), (x,), (tx,))
    else:
        _assert_tangents(lambda x: ours(x, 1, reverse=reverse, exclusive=exclusive), theirs,
                         (x,), (tx,))


@pytest.mark.parametrize("reverse,exclusive,with_initial", OPTIONS)
@pytest.mark.parametrize("zeros", ["none", "two"])
@pytest.mark.parametrize("name", list(SCANS))
def test_scan_gradcheck_forward_and_backward(name, zeros, reverse, exclusive, with_initial,
                                             gradcheck):
    ours = SCANS[name][0]
    x = _scan_input(zeros)[:, :4].t().requires_grad_()     # non-contiguous, scanned along dim 0
    inputs = (x, _f64(3, seed=2).requires_grad_()) if with_initial else (x,)

    def f(x, initial=None):
        return ours(x, 0, reverse=reverse, exclusive=exclusive, initial=initial)
    assert gradcheck(f, inputs)


def test_scan_of_a_0d_tensor_and_of_an_empty_axis():
    for ours, cumulative, identity in SCANS.values():
        x, t = torch.tensor(1.7, dtype=F64), torch.tensor(0.3, dtype=F64)
        _assert_tangents(lambda x: ours(x, 0), lambda x: cumulative(x, 0), (x,), (t,))
        _assert_tangents(lambda x: ours(x, 0, exclusive=True),
                         lambda x: torch.full_like(x, identity), (x,), (t,))
        initial = torch.tensor(-0.4, dtype=F64)
        _assert_tangents(lambda x, i: ours(x, -1, initial=i),
                         _torch_scan(cumulative, identity, 0, False, False),
                         (x.reshape(1), initial), (t.reshape(1), torch.tensor(2.0, dtype=F64)))
        empty = torch.zeros(2, 0, dtype=F64)
        out, tangent = jvp(lambda x: ours(x, 1), (empty,), (empty,))
        assert out.shape == tangent.shape == (2, 0)


# ---------------------------------------------------------------------------------------------
# Reductions: every differentiable DirectML function against torch's own
# ---------------------------------------------------------------------------------------------
def _twins(axes, keepdims):
    def over(fn):
        return lambda x: fn(x, dim=axes, keepdim=keepdims)
    return {
        "SUM": over(torch.sum),
        "AVERAGE": over(torch.mean),
        "L1": lambda x: torch.linalg.vector_norm(x, 1, dim=axes, keepdim=keepdims),
        "L2": lambda x: torch.linalg.vector_norm(x, 2, dim=axes, keepdim=keepdims),
        "LOG_SUM": lambda x: torch.log(torch.sum(x, dim=axes, keepdim=keepdims)),
        "LOG_SUM_EXP": lambda x: torch.logsumexp(  # its dim is required
            x, dim=axes if axes is not None else tuple(range(x.dim())), keepdim=keepdims),
        "MAX": over(torch.amax),
        "MIN": over(torch.amin),
        "MULTIPLY": lambda x: (torch.prod(x.flatten(), dim=0) if axes is None
                               else torch.prod(x, dim=axes[0], keepdim=keepdims)),
        "SUM_SQUARE": lambda x: torch.sum(x * x, dim=axes, keepdim=keepdims),
    }


FUNCTIONS = list(_twins(None, False))


def _reduce_input(function, ties=False):
    x = _f64(3, 4, 2)
    if function == "LOG_SUM":
        x = x.abs() + 0.5
    if function == "MULTIPLY":
        x[0, 1, 0] = 0.0                    # one zero in a row,
        x[1, 0, 0] = x[1, 2, 0] = 0.0       # two zeros in another
    if ties:                                # the extremum twice: the tangent averages them
        x[0, 3, 1] = x[0, 0, 1] = x[0, :, 1].abs().max() + 1
        x[2, 1, 0] = x[2, 2, 0] = -(x[2, :, 0].abs().max() + 1)
    return x


@pytest.mark.parametrize("axes,keepdims", [((1,), True), ((1,), False), ((0, 2), True),
                                           (None, False)])
@pytest.mark.parametrize("function", FUNCTIONS)
def test_reduce_tangents_and_jacobians_match_torch(function, axes, keepdims):
    if function == "MULTIPLY" and axes is not None and len(axes) > 1:
        axes = (2,)                         # torch.prod takes one dim
    x = _reduce_input(function, ties=function in ("MAX", "MIN"))
    ours = lambda x: tritonml.reduce(x, function, axes, keepdims=keepdims)  # noqa: E731
    theirs = _twins(axes, keepdims)[function]
    _assert_tangents(ours, theirs, (x,), (_f64(3, 4, 2, seed=1),))
    torch.testing.assert_close(jacfwd(ours)(x), jacfwd(theirs)(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_reduce_gradcheck_forward_and_backward(function, gradcheck):
    x = _reduce_input(function)[:, :3].transpose(0, 1).requires_grad_()    # non-contiguous
    for axes, keepdims in (((0,), True), ((1, 2), False)):
        if function == "MULTIPLY" and axes == (1, 2):
            axes = (2,)

        def f(x):
            return tritonml.reduce(x, function, axes, keepdims=keepdims)
        assert gradcheck(f, (x,))


@pytest.mark.parametrize("function", ["MAX", "MIN"])
def test_an_extremum_reads_only_the_tangents_it_selected(function):
    # torch's amax/amin jvp: the mean of the tangents at the selected elements; an inf or NaN
    # tangent elsewhere does not reach the result (dense and segmented alike).
    # the inf/NaN tangents sit at elements that are neither a row's maximum nor its minimum
    x = torch.tensor([[1., 5., 2., 3.], [3., 3., 0., 1.], [4., -1., 4., 0.]], dtype=torch.float64)
    t = torch.tensor([[1., 2., float("inf"), float("nan")], [1., 4., 2., float("inf")],
                      [6., 3., 10., float("nan")]], dtype=torch.float64)
    rows = x.tolist()
    best = [(max if function == "MAX" else min)(r) for r in rows]
    expected = [sum(tt for xx, tt in zip(r, tr) if xx == b) / r.count(b)
                for r, tr, b in zip(rows, t.tolist(), best)]
    dense = jvp(lambda a: tritonml.reduce(a, function, axes=[1]), (x,), (t,))[1]
    segmented = jvp(lambda a: tritonml.segment_reduce(a.flatten(), function,
                                                      lengths=torch.tensor([4, 4, 4])),
                    (x,), (t,))[1]
    expected = torch.tensor(expected, dtype=torch.float64)
    assert torch.isfinite(expected).all()
    torch.testing.assert_close(dense.flatten(), expected, rtol=0, atol=0)
    torch.testing.assert_close(segmented, expected, rtol=0, atol=0)


def test_reduce_of_a_0d_tensor_and_the_index_functions():
    x, t = torch.tensor(0.8, dtype=F64), torch.tensor(-1.5, dtype=F64)
    for function, twin in (("SUM", torch.sum), ("LOG_SUM_EXP", lambda x: torch.logsumexp(x, 0)),
                           ("MULTIPLY", torch.prod), ("L2", torch.linalg.vector_norm)):
        _assert_tangents(lambda x: tritonml.reduce(x, function), twin, (x,), (t,))
    # an index has no tangent: torch.func reports zeros, as for torch.argmax
    y = _f64(3, 4)
    for function, twin in (("ARGMAX", torch.argmax), ("ARGMIN", torch.argmin)):
        _assert_tangents(lambda y: tritonml.reduce(y, function, 1, keepdims=False),
                         lambda y: twin(y, 1), (y,), (_f64(3, 4, seed=1),))


# ---------------------------------------------------------------------------------------------
# linear_recurrence: a float64 loop as the oracle
# ---------------------------------------------------------------------------------------------
def _loop_recurrence(axis, reverse):
    def run(gates, tokens, initial=None):
        g, b = gates.movedim(axis, 0), tokens.movedim(axis, 0)
        order = range(g.shape[0] - 1, -1, -1) if reverse else range(g.shape[0])
        h = initial if initial is not None else torch.zeros_like(b[0])
        out = [None] * g.shape[0]
        for t in order:
            h = g[t] * h + b[t]
            out[t] = h
        return torch.stack(out).movedim(0, axis)
    return run


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("with_initial", [False, True])
def test_linear_recurrence_tangents_and_gradcheck(reverse, with_initial, gradcheck):
    gates, tokens = _f64(4, 3).sigmoid(), _f64(4, 3, seed=1)
    inputs = (gates, tokens) + ((_f64(3, seed=2),) if with_initial else ())
    tangents = tuple(_f64(*t.shape, seed=10 + i) for i, t in enumerate(inputs))

    def ours(gates, tokens, initial=None):
        return tritonml.linear_recurrence(gates, tokens, 0, reverse=reverse, initial=initial)
    _assert_tangents(ours, _loop_recurrence(0, reverse), inputs, tangents)
    # the tangent in one input only (the others' are None)
    _assert_tangents(lambda g: ours(g, *inputs[1:]),
                     lambda g: _loop_recurrence(0, reverse)(g, *inputs[1:]),
                     (gates,), (tangents[0],))
    leaves = tuple(t.clone().requires_grad_() for t in inputs)
    assert gradcheck(ours, leaves)


def test_linear_recurrence_of_a_0d_sequence():
    g, b, i = (torch.tensor(v, dtype=F64) for v in (0.5, 1.5, -2.0))
    tangents = tuple(torch.tensor(v, dtype=F64) for v in (1.0, 0.25, 3.0))
    _assert_tangents(lambda g, b, i: tritonml.linear_recurrence(g, b, 0, initial=i),
                     lambda g, b, i: g * i + b, (g, b, i), tangents)


# ---------------------------------------------------------------------------------------------
# Other dtypes: tangents in the input's dtype, within a few of its ulps of float64's
# ---------------------------------------------------------------------------------------------
# |got - want| <= BOUND * max(|want|, 1): tangents are several rounded steps (elementwise in the
# dtype, then a scan or reduction that accumulates wider), a few ulps of each dtype.
BOUND = {torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


@pytest.mark.parametrize("dtype", list(BOUND))
def test_tangents_in_other_float_dtypes(dtype):
    x, t = _f64(3, 6), _f64(3, 6, seed=1)
    x[0, 2] = 0.0
    cases = [
        (lambda x: tritonml.cumulative_sum(x, 1, reverse=True),
         lambda x: torch.cumsum(x.flip(1), 1).flip(1)),
        (lambda x: tritonml.cumulative_product(x, 1), lambda x: torch.cumprod(x, 1)),
        (lambda x: tritonml.reduce(x, "log_sum_exp", 1), lambda x: torch.logsumexp(x, 1, True)),
        (lambda x: tritonml.reduce(x, "l2", 1),
         lambda x: torch.linalg.vector_norm(x, dim=1, keepdim=True)),
        (lambda x: tritonml.reduce(x, "multiply", 1), lambda x: torch.prod(x, 1, True)),
        (lambda x: tritonml.linear_recurrence(x.sigmoid(), x, 1),
         lambda x: _loop_recurrence(1, False)(x.sigmoid(), x)),
    ]
    for ours, theirs in cases:
        _, got = jvp(ours, (x.to(dtype),), (t.to(dtype),))
        _, want = jvp(theirs, (x.to(dtype).double(),), (t.to(dtype).double(),))
        assert got.dtype == dtype
        error = ((got.double() - want).abs() / want.abs().clamp(min=1)).max().item()
        assert error <= BOUND[dtype], (ours, error)


# ---------------------------------------------------------------------------------------------
# vmap of jvp (jacfwd) and jvp of vjp (Hessians), torch.autograd.forward_ad
# ---------------------------------------------------------------------------------------------
def test_jacfwd_and_hessian_match_torch():
    x = _f64(2, 4)
    x[1, 2] = 0.0

    def ours(x):
        h = tritonml.cumulative_product(x, 1, exclusive=True, initial=x[:, 0])
        return tritonml.reduce(tritonml.cumulative_sum(h, 1, reverse=True), "log_sum_exp", 1,
                               keepdims=False).sum()

    def theirs(x):
        h = _torch_scan(torch.cumprod, 1.0, 1, False, True)(x, x[:, 0])
        return torch.logsumexp(_torch_scan(torch.cumsum, 0.0, 1, True, False)(h), 1).sum()
    torch.testing.assert_close(jacfwd(ours)(x), jacfwd(theirs)(x))
    torch.testing.assert_close(hessian(ours)(x), hessian(theirs)(x))      # jacfwd of jacrev
    torch.testing.assert_close(jacrev(jacfwd(ours))(x), hessian(theirs)(x))
    gates = _f64(5).sigmoid()
    rec = lambda b: tritonml.linear_recurrence(gates, b, 0)  # noqa: E731
    torch.testing.assert_close(jacfwd(rec)(x[0, :1].expand(5).clone()),
                               jacfwd(lambda b: _loop_recurrence(0, False)(gates, b))(
                                   x[0, :1].expand(5).clone()))


def test_dual_tensors_of_forward_ad_carry_their_tangents():
    """Outside torch.func, a dual tensor is a plain tensor that does not require grad: the public
    functions must go through their Function, not the launcher, to keep its tangent."""
    x, t = _f64(3, 4), _f64(3, 4, seed=1)
    cases = [
        (lambda x: tritonml.cumulative_sum(x, 1), lambda x: torch.cumsum(x, 1)),
        (lambda x: tritonml.cumulative_product(x, 0, reverse=True),
         lambda x: torch.cumprod(x.flip(0), 0).flip(0)),
        (lambda x: tritonml.reduce(x, "l2", 1), lambda x: torch.linalg.vector_norm(
            x, dim=1, keepdim=True)),
        (lambda x: tritonml.linear_recurrence(x.sigmoid(), x, 1),
         lambda x: _loop_recurrence(1, False)(x.sigmoid(), x)),
        (lambda x: tritonml.reduce_with(welford, x, 1)[0],
         lambda x: torch.var_mean(x, 1, keepdim=True)[0]),
    ]
    for ours, theirs in cases:
        with forward_ad.dual_level():
            got = forward_ad.unpack_dual(ours(forward_ad.make_dual(x, t)))
        want = jvp(theirs, (x,), (t,))
        torch.testing.assert_close(got.primal, want[0])
        torch.testing.assert_close(got.tangent, want[1])


def test_return_carry_refuses_a_tangent():
    x = _f64(3, 4)
    with forward_ad.dual_level():
        dual = forward_ad.make_dual(x, torch.ones_like(x))
        with pytest.raises(RuntimeError, match="^return_carry: has no forward-mode derivative"):
            tritonml.cumulative_sum(dual, 1, return_carry=True)
        # without a tangent, the carry is fine inside a dual level
        _, carry = tritonml.cumulative_sum(x, 1, return_carry=True)
    torch.testing.assert_close(carry, x.sum(1))


# ---------------------------------------------------------------------------------------------
# torch.compile: a forward-mode call runs its op's Function eagerly (Dynamo traces no
# autograd.Function with a jvp, and a torch.library op has no forward-mode formula)
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_forward_mode_under_torch_compile(backend):
    x, t = _f64(3, 5), _f64(3, 5, seed=1)
    x[1, 2] = 0.0

    def f(x, t):
        return jvp(lambda x: tritonml.reduce(tritonml.cumulative_product(x, 1), "log_sum_exp", 1),
                   (x,), (t,))
    want = jvp(lambda x: torch.logsumexp(torch.cumprod(x, 1), 1, keepdim=True), (x,), (t,))
    torch._dynamo.reset()
    for got, w in zip(torch.compile(f, backend=backend)(x, t), want, strict=True):
        torch.testing.assert_close(got, w)
    torch._dynamo.reset()
    with pytest.raises(Exception, match="tritonml.cumulative_product: forward-mode AD"):
        torch.compile(f, backend=backend, fullgraph=True)(x, t)
    # reverse mode still compiles into one graph, forward-mode machinery or not
    torch._dynamo.reset()
    leaf = x.clone().requires_grad_()
    loss = torch.compile(lambda x: tritonml.reduce(tritonml.cumulative_product(x, 1), "sum"),
                         backend=backend, fullgraph=True)(leaf)
    (grad,) = torch.autograd.grad(loss.sum(), leaf)
    ref = x.clone().requires_grad_()
    torch.testing.assert_close(grad, torch.autograd.grad(torch.cumprod(ref, 1).sum(), ref)[0])


# ---------------------------------------------------------------------------------------------
# reduce_with: Welford's jvp, a user's jvp over two inputs, and one without a jvp
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("reduction,correction", [(welford, 1), (welford_biased, 0)])
@pytest.mark.parametrize("axes,keepdims", [((1,), True), ((0, 2), False), (None, True)])
def test_welford_tangents_match_torch_var_mean(reduction, correction, axes, keepdims,
                                               gradcheck):
    x, t = _f64(3, 4, 2), _f64(3, 4, 2, seed=1)
    ours = lambda x: tritonml.reduce_with(reduction, x, axes, keepdims=keepdims)  # noqa: E731
    theirs = lambda x: torch.var_mean(x, axes, correction=correction,  # noqa: E731
                                      keepdim=keepdims)
    _assert_tangents(ours, theirs, (x,), (t,))
    for got, want in zip(jacfwd(ours)(x), jacfwd(theirs)(x), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    leaf = x[:, :2].clone().requires_grad_()
    assert gradcheck(ours, (leaf,))


def test_welford_of_a_0d_input_and_vmap():
    x, t = torch.tensor(1.25, dtype=F64), torch.tensor(0.5, dtype=F64)
    _assert_tangents(lambda x: tritonml.reduce_with(welford_biased, x),
                     lambda x: torch.var_mean(x, correction=0), (x,), (t,))
    y = _f64(4, 3)
    for got, want in zip(torch.vmap(lambda r: tritonml.reduce_with(welford, r, 0))(y),
                         torch.var_mean(y, 1, keepdim=True), strict=True):
        torch.testing.assert_close(got, want)
    for got, want in zip(torch.vmap(lambda v: tritonml.reduce_with(welford_biased, v))(y[:, 0]),
                         (torch.zeros(4, dtype=F64), y[:, 0]), strict=True):
        torch.testing.assert_close(got, want)
    # vmap of grad: the Function's vmap rule under its backward
    torch.testing.assert_close(
        torch.vmap(torch.func.grad(lambda r: tritonml.reduce_with(welford, r, 0)[0].sum()))(y),
        torch.vmap(torch.func.grad(lambda r: torch.var_mean(r, 0)[0].sum()))(y))


@triton.jit
def _dot_prepare(xs, index):
    return (xs[0] * xs[1],)


@triton.jit
def _dot_merge(a, b):
    return (a[0] + b[0],)


@triton.jit
def _dot_finish(s, count):
    return (s[0],)


def _dot_jvp(xs, outputs, tangents, axes):
    (a, b), (ta, tb) = xs, tangents
    total = torch.zeros_like(outputs[0])
    if ta is not None:
        total = total + (ta * b).sum(axes, keepdim=True)
    if tb is not None:
        total = total + (a * tb).sum(axes, keepdim=True)
    return (total,)


def _dot(jvp=_dot_jvp):
    return tritonml.Reduction(
        "dot", _dot_prepare, _dot_merge, _dot_finish, identity=(0.0,),
        state_dtypes=lambda dtypes: (F64,), output_dtypes=lambda dtypes: (F64,), inputs=2,
        load_dtypes=lambda dtypes: (F64, F64), jvp=jvp)


def test_user_jvp_of_two_inputs_matches_torch():
    a, b = _f64(3, 6), _f64(6, 3, seed=1).t()                # other strides
    ta, tb = _f64(3, 6, seed=2), _f64(3, 6, seed=3)
    ours = lambda a, b: tritonml.reduce_with(_dot(), (a, b), 1, keepdims=False)  # noqa: E731
    theirs = lambda a, b: (a * b).sum(1)  # noqa: E731
    _assert_tangents(ours, theirs, (a, b), (ta, tb))
    _assert_tangents(lambda b: ours(a, b), lambda b: theirs(a, b), (b,), (tb,))  # a's is None
    torch.testing.assert_close(jacfwd(ours, argnums=(0, 1))(a, b),
                               jacfwd(theirs, argnums=(0, 1))(a, b))
    # vmap over inputs batched along different dims, or not at all
    batched = torch.vmap(lambda p, q: tritonml.reduce_with(_dot(), (p, q), 0), in_dims=(0, 1))
    torch.testing.assert_close(batched(a, b.t()).flatten(), (a * b).sum(1))
    torch.testing.assert_close(torch.vmap(lambda p: ours(p, b[:1]))(a.unsqueeze(1)).flatten(),
                               (a * b[0]).sum(1))


def test_a_reduction_without_jvp_refuses_a_tangent():
    a, b = _f64(3, 6), _f64(3, 6, seed=1)
    no_jvp = _dot(jvp=None)
    with _trace.record(execute=False) as rec:
        with forward_ad.dual_level():
            dual = forward_ad.make_dual(b, torch.ones_like(b))
            with pytest.raises(RuntimeError, match=r"^xs\[1\]: carries a forward-mode tangent, "
                                                   r"but the reduction dot has no forward-mode "
                                                   r"derivative; give .*jvp="):
                tritonml.reduce_with(no_jvp, (a, dual), 1)
    assert rec.launches == []        # refused before anything launches
    with pytest.raises(RuntimeError, match=r"^xs\[0\]: carries a forward-mode tangent, but the "
                                           r"reduction dot has no forward-mode derivative"):
        jvp(lambda a: tritonml.reduce_with(no_jvp, (a, b), 1), (a,), (b,))
    # no tangent, no error: inside a dual level, or under torch.func without one
    with forward_ad.dual_level():
        torch.testing.assert_close(tritonml.reduce_with(no_jvp, (a, b), 1),
                                   (a * b).sum(1, keepdim=True))


def test_a_jvp_returning_the_wrong_tangents_is_an_error():
    a, b = _f64(3, 4), _f64(3, 4, seed=1)
    wrong_count = _dot(lambda xs, outs, tangents, axes: ())
    with pytest.raises(TypeError, match=r"^reduction: dot's jvp must return a tuple of 1 "
                                        r"tangent\(s\), one per output .*got tuple of 0"):
        jvp(lambda a: tritonml.reduce_with(wrong_count, (a, b), 1), (a,), (b,))
    unreduced = _dot(lambda xs, outs, tangents, axes: (tangents[0],))
    with pytest.raises(ValueError, match=r"^reduction: dot's jvp returned \(3, 4\) for output 0; "
                                         r".*\(3, 1\)"):
        jvp(lambda a: tritonml.reduce_with(unreduced, (a, b), 1), (a,), (b,))
    with pytest.raises(TypeError, match="^jvp: expected None or a function"):
        _dot(jvp="tangent")
    # None: no tangent, a zero one for a float output
    zero = _dot(lambda xs, outs, tangents, axes: (None,))
    _, tangent = jvp(lambda a: tritonml.reduce_with(zero, (a, b), 1), (a,), (b,))
    torch.testing.assert_close(tangent, torch.zeros(3, 1, dtype=F64))
