"""``initial=`` carry-in of the cumulative operators: every regime and direction against the numpy
oracle (benchmarks/scan_oracle.py), the initial's layouts, dtypes and edge cases, validation,
chunked scanning, the torch ops (opcheck, vmap) and gradients in x and initial."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.library import opcheck

import tritonml
from tritonml.core import layout as _layout
from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ScanConfig
from tritonml.launchers.scan import PRODUCT, SUM, cumulative_scan
from benchmarks.scan_oracle import accumulation_allowance, scan_matches, to_numpy
from tests.launchers.test_scan import random_values
from tests.lookback_knob import prefix_every, prefix_every_for

OPS = torch.ops.tritonml
COMBINES = {"sum": SUM, "prod": PRODUCT}
FUNCTIONS = {"sum": tritonml.cumulative_sum, "prod": tritonml.cumulative_product}
DIRECTIONS = [(False, False), (False, True), (True, False), (True, True)]

# (name, shape, axis, config): each regime, the look-back with long look-backs (LONG_LOOKBACKS).
REGIMES = [
    ("rows", (3, 700), 1, ScanConfig("rows", 128, 2)),
    ("columns", (700, 5), 0, ScanConfig("columns", 64, 4)),
    ("lookback", (2, 900, 3), 1, ScanConfig("lookback", 64, 2)),
    ("lookback-row", (1000,), 0, ScanConfig("lookback", 128, 1)),
]
LONG_LOOKBACKS = {"lookback": 3}  # REGIMES' name -> PREFIX_EVERY (tests/lookback_knob.py)


def _random_initial(shape, axis, dtype, op, rng):
    """Random values (as ``random_values``) of ``shape`` without ``axis``, 0-d included."""
    init_shape = shape[:axis] + shape[axis + 1:]
    return random_values(init_shape or (1,), dtype, op, rng).reshape(init_shape)


def _check(result, x, initial, axis, op, reverse, exclusive):
    x_np, init_np = to_numpy(x), to_numpy(initial)
    allowance = accumulation_allowance(x_np, axis, op, reverse, exclusive, x.dtype, init_np)
    ok, msg = scan_matches(result, x_np, axis, op, reverse, exclusive, allowance, init_np)
    assert ok, msg


@pytest.mark.parametrize("name,shape,axis,config", REGIMES, ids=[r[0] for r in REGIMES])
@pytest.mark.parametrize("reverse,exclusive", DIRECTIONS)
@pytest.mark.parametrize("op,dtype", [("sum", torch.float64), ("sum", torch.int32),
                                      ("prod", torch.float32), ("prod", torch.int16)], ids=str)
def test_every_regime_starts_from_the_initial(name, shape, axis, config, reverse, exclusive, op,
                                              dtype):
    rng = np.random.default_rng(len(name) + 7 * reverse + 3 * exclusive)
    x = random_values(shape, dtype, op, rng)
    initial = _random_initial(shape, axis, dtype, op, rng)
    with _trace.record() as rec, prefix_every(LONG_LOOKBACKS.get(name, 1)):
        result = cumulative_scan(x, axis, COMBINES[op], reverse=reverse, exclusive=exclusive,
                                 initial=initial, config=config)
    assert [l.meta["HAS_INITIAL"] for l in rec.launches] == [True]
    _check(result, x, initial, axis, op, reverse, exclusive)


def _layouts(values: torch.Tensor):
    """The initial's content in several layouts: contiguous, transposed, strided, negative view."""
    yield "contiguous", values.clone()
    yield "transposed", values.t().clone().t()
    yield "strided", torch.empty(values.shape[0], values.shape[1] * 3,
                                 dtype=values.dtype)[:, ::3].copy_(values)
    yield "negative", (-values)._neg_view()


@pytest.mark.parametrize("config", [None, ScanConfig("columns", 8, 4),
                                    ScanConfig("lookback", 8, 2)],
                         ids=["auto", "columns", "lookback"])
@pytest.mark.parametrize("reverse,exclusive", [(False, True), (True, False)])
def test_initial_in_any_layout(config, reverse, exclusive):
    rng = np.random.default_rng(4)
    x = random_values((4, 37, 6), torch.int64, "sum", rng)
    values = random_values((4, 6), torch.int64, "sum", rng)
    for label, initial in _layouts(values):
        assert torch.equal(initial, values)
        with prefix_every_for(config, 2):
            result = cumulative_scan(x, 1, SUM, reverse=reverse, exclusive=exclusive,
                                     initial=initial, config=config)
        _check(result, x, values, 1, "sum", reverse, exclusive)


@pytest.mark.parametrize("reverse", [False, True])
def test_expanded_initial_and_strided_x(reverse):
    rng = np.random.default_rng(5)
    x = random_values((6, 40, 5), torch.float64, "sum", rng).transpose(0, 2)  # (5, 40, 6)
    row = random_values((6,), torch.float64, "sum", rng)
    initial = row.expand(5, 6)  # stride 0 over the first dim
    for exclusive in (False, True):
        result = tritonml.cumulative_sum(x, 1, reverse=reverse, exclusive=exclusive,
                                         initial=initial)
        _check(result, x, initial, 1, "sum", reverse, exclusive)
    scalar = torch.tensor(2.5, dtype=torch.float64).expand(5, 6)
    result = tritonml.cumulative_product(x, 1, reverse=reverse, initial=scalar)
    _check(result, x, scalar, 1, "prod", reverse, False)


def test_initial_strides_follow_the_merge():
    # x's dims 0 and 1 merge; a transposed initial keeps them apart, and its strides go with them.
    shape = (2, 3, 4)
    merged = _layout.axis_layout(shape, (12, 4, 1), (12, 4, 1), 2)
    assert merged.inner_len == 6
    layout = _layout.axis_layout(shape, (12, 4, 1), (12, 4, 1), 2, (1, 2))
    assert layout.inner_len == 3 and layout.init_inner_stride == 2
    assert layout.outer_sizes[-1] == 2 and layout.init_outer_strides[-1] == 1
    x = torch.arange(24, dtype=torch.int64).reshape(shape)
    initial = torch.arange(6, dtype=torch.int64).reshape(3, 2).t()
    result = tritonml.cumulative_sum(x, 2, initial=initial)
    assert torch.equal(result, x.cumsum(2) + initial[..., None])


def test_initial_reach_counts_for_64_bit_offsets():
    layout = _layout.axis_layout((4, 2), (2, 1), (2, 1), 1)
    assert not layout.needs_index_64(2, 4)
    far = _layout.axis_layout((4, 2), (2, 1), (2, 1), 1, (2 ** 30,))
    assert far.init_last == 3 * 2 ** 30 and far.needs_index_64(2, 4)


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8, torch.int32, torch.uint64,
                                   torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("op", ["sum", "prod"])
def test_integer_wrap_around_and_half_types(dtype, op):
    rng = np.random.default_rng(6)
    x = random_values((3, 300), dtype, op, rng)
    initial = random_values((3,), dtype, op, rng)
    for reverse, exclusive in DIRECTIONS:
        result = FUNCTIONS[op](x, 1, reverse=reverse, exclusive=exclusive, initial=initial)
        _check(result, x, initial, 1, op, reverse, exclusive)


@pytest.mark.parametrize("op", ["sum", "prod"])
def test_rank_0_and_empty_axes(op):
    fn = FUNCTIONS[op]
    x, initial = torch.tensor(3, dtype=torch.int32), torch.tensor(5, dtype=torch.int32)
    combined = 8 if op == "sum" else 15
    assert fn(x, 0, initial=initial).item() == combined
    assert fn(x, -1, exclusive=True, initial=initial).item() == 5
    assert fn(x, 0, reverse=True, initial=initial).shape == ()
    empty_axis = torch.empty(3, 0, 2)
    with _trace.record() as rec:
        assert fn(empty_axis, 1, initial=torch.ones(3, 2)).shape == (3, 0, 2)
        assert fn(torch.empty(0, 4), 1, initial=torch.empty(0)).shape == (0, 4)
    assert rec.launches == []
    with pytest.raises(ValueError, match="initial: shape"):
        fn(empty_axis, 1, initial=torch.ones(3))


@pytest.mark.parametrize("op", ["sum", "prod"])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("config", [None, ScanConfig("lookback", 16, 2)],
                         ids=["auto", "lookback"])
def test_chunked_scan_equals_one_scan(op, exclusive, config):
    rng = np.random.default_rng(8)
    x = random_values((5, 230), torch.int64, op, rng)
    combine = COMBINES[op]
    with prefix_every_for(config, 2):
        _chunks_equal_one_scan(x, combine, exclusive, config)


def _chunks_equal_one_scan(x, combine, exclusive, config):
    for reverse in (False, True):
        whole = cumulative_scan(x, 1, combine, reverse=reverse, exclusive=exclusive, config=config)
        bounds = [0, 50, 51, 160, 230]
        chunks = list(zip(bounds[:-1], bounds[1:]))
        carry, pieces = None, {}
        for start, stop in (reversed(chunks) if reverse else chunks):
            chunk = x[:, start:stop]
            pieces[start] = cumulative_scan(chunk, 1, combine, reverse=reverse, exclusive=exclusive,
                                            initial=carry, config=config)
            inclusive = cumulative_scan(chunk, 1, combine, reverse=reverse, initial=carry,
                                        config=config)
            carry = inclusive[:, 0] if reverse else inclusive[:, -1]
        assert torch.equal(torch.cat([pieces[s] for s, _ in chunks], 1), whole)


# Chunks of a float32 sum, the carry kept in float64 (the accumulation dtype): chunk lengths are
# multiples of the forced tile, so each chunk's tiles are the one scan's tiles and its carry is the
# one scan's float64 tally there, bit for bit. The oracle: the one scan against numpy float64.
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("config", [ScanConfig("rows", 64, 2),
                                    ScanConfig("lookback", 64, 1)],
                         ids=["rows", "lookback"])
def test_float32_chunks_with_an_accumulation_dtype_carry_equal_one_scan(exclusive, config):
    with prefix_every_for(config, 2):
        _float32_chunks_equal_one_scan(exclusive, config)


def _float32_chunks_equal_one_scan(exclusive, config):
    rng = np.random.default_rng(12)
    # large values with a small spread: a carry rounded to float32 at each chunk boundary loses
    # the low bits the float64 tally keeps
    x = torch.from_numpy((1000.0 + rng.standard_normal((3, 512))).astype(np.float32))
    for reverse in (False, True):
        whole = tritonml.launchers.scan.cumulative_scan(x, 1, SUM, reverse=reverse, exclusive=exclusive,
                                                  config=config)
        flipped = x.double().numpy()[:, ::-1] if reverse else x.double().numpy()
        expected = np.cumsum(flipped, 1)
        if exclusive:
            expected = np.concatenate([np.zeros((3, 1)), expected[:, :-1]], 1)
        expected = expected[:, ::-1] if reverse else expected
        np.testing.assert_allclose(whole.double().numpy(), expected, rtol=2 ** -23, atol=0)
        chunks = list(x.split(64, 1))
        carry, pieces = None, []
        for chunk in (chunks[::-1] if reverse else chunks):
            piece, carry = tritonml.cumulative_sum(chunk, 1, reverse=reverse,
                                                   exclusive=exclusive, initial=carry,
                                                   return_carry=True)
            pieces.append(piece)
        assert carry.dtype == torch.float64
        np.testing.assert_allclose(carry.numpy(), x.double().numpy().sum(1), rtol=1e-12)
        assert torch.equal(torch.cat(pieces[::-1] if reverse else pieces, 1), whole)


def test_return_carry_of_each_function():
    rng = np.random.default_rng(13)
    x = torch.from_numpy(rng.uniform(0.5, 1.5, (2, 40)).astype(np.float32))
    result, carry = tritonml.cumulative_product(x, 1, return_carry=True)
    assert carry.dtype == torch.float64
    np.testing.assert_allclose(carry.numpy(), x.double().numpy().prod(1), rtol=1e-12)
    np.testing.assert_allclose(result.numpy(), np.cumprod(x.double().numpy(), 1), rtol=1e-6)
    ints = torch.tensor([[2 ** 31 - 1, 5, -3]], dtype=torch.int32)
    _, carry = tritonml.cumulative_sum(ints, 1, exclusive=True, return_carry=True)
    assert carry.dtype == torch.int64 and carry.tolist() == [2 ** 31 + 1]  # not wrapped
    # an empty axis: the carry is the initial, in the accumulation dtype
    initial = torch.tensor([1.5, 2.5])
    out, carry = tritonml.cumulative_sum(torch.empty(2, 0), 1, initial=initial, return_carry=True)
    assert out.shape == (2, 0) and carry.dtype == torch.float64 and carry.tolist() == [1.5, 2.5]
    # an expanded initial is read through a dense copy, so the carry has a layout of its own
    _, carry = tritonml.cumulative_sum(x, 1, initial=torch.tensor(1.0).expand(2),
                                       return_carry=True)
    np.testing.assert_allclose(carry.numpy(), 1.0 + x.double().numpy().sum(1), rtol=1e-12)


def test_return_carry_refuses_autograd():
    x = torch.ones(2, 3, requires_grad=True)
    with pytest.raises(RuntimeError, match="return_carry: has no autograd"):
        tritonml.cumulative_sum(x, 1, return_carry=True)
    with pytest.raises(TypeError, match="return_carry"):
        tritonml.cumulative_sum(x.detach(), 1, return_carry=1)


def test_out_and_in_place_with_initial():
    rng = np.random.default_rng(9)
    x = random_values((3, 20), torch.float64, "sum", rng)
    initial = random_values((3,), torch.float64, "sum", rng)
    out = torch.empty_like(x)
    assert tritonml.cumulative_sum(x, 1, initial=initial, out=out) is out
    _check(out, x, initial, 1, "sum", False, False)
    y = x.clone()
    tritonml.cumulative_product(y, 1, reverse=True, initial=initial, out=y)
    _check(y, x, initial, 1, "prod", True, False)
    z = x.clone()
    OPS.cumulative_sum_(z, 1, False, True, initial)
    _check(z, x, initial, 1, "sum", False, True)


def test_plans_tell_initials_apart():
    x = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    for _ in range(2):
        assert torch.equal(tritonml.cumulative_sum(x, 1), x.cumsum(1))
        for k in (1, 7):
            init = torch.full((3,), k, dtype=torch.int64)
            assert torch.equal(tritonml.cumulative_sum(x, 1, initial=init), x.cumsum(1) + k)
        negative = torch.full((3,), 2, dtype=torch.int64)._neg_view()
        assert torch.equal(tritonml.cumulative_sum(x, 1, initial=negative), x.cumsum(1) - 2)


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------
def test_errors_name_initial():
    x = torch.ones(3, 4)
    fn = tritonml.cumulative_sum
    with pytest.raises(TypeError, match="initial: expected a torch.Tensor"):
        fn(x, 1, initial=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"initial: shape \(4,\) does not match"):
        fn(x, 1, initial=torch.ones(4))
    with pytest.raises(ValueError, match="initial: shape"):
        fn(x, 1, initial=torch.ones(3, 1))
    with pytest.raises(TypeError, match="initial: dtype torch.float16 is neither x's dtype "
                                        "torch.float32 nor its accumulation dtype torch.float64"):
        fn(x, 1, initial=torch.ones(3, dtype=torch.float16))
    with pytest.raises(TypeError, match="initial: meta tensors"):
        fn(x, 1, initial=torch.ones(3, device="meta"))
    with pytest.raises(TypeError, match="initial: tensors with layout"):
        fn(x, 1, initial=torch.ones(3).to_sparse())


def test_out_must_not_overlap_initial():
    x = torch.ones(3, 4)
    buffer = torch.zeros(16)
    out = buffer[:12].view(3, 4)
    for _ in range(2):  # planned, then from the plan
        with pytest.raises(ValueError, match="initial: overlaps out"):
            tritonml.cumulative_sum(x, 1, initial=buffer[10:13], out=out)
    with pytest.raises(ValueError, match="initial: overlaps out"):
        tritonml.cumulative_product(x, 1, initial=x[:, 0], out=x)
    assert torch.equal(out, torch.zeros(3, 4))
    # no overlap: the same plan runs
    assert torch.equal(tritonml.cumulative_sum(x, 1, initial=buffer[13:16], out=out),
                       x.cumsum(1))


def test_out_requires_no_grad_of_initial():
    x = torch.ones(3, 4)
    initial = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="out: functions with out="):
        tritonml.cumulative_sum(x, 1, initial=initial, out=torch.empty(3, 4))


# --------------------------------------------------------------------------------------------
# Torch ops: opcheck, fake tensors, vmap, autograd
# --------------------------------------------------------------------------------------------
def _f64(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _opcheck_cases():
    expanded = _f64(5, seed=1).expand(3, 5)
    return [
        ("cumulative_sum", (_f64(3, 4, 5), 1, False, False, _f64(3, 5, seed=2))),
        ("cumulative_sum", (_f64(4, 6).t(), 0, True, True, expanded[0, :4])),
        ("cumulative_product", (_f64(3, 4), 1, True, False, _f64(3, seed=3))),
        ("cumulative_product", (torch.randint(-9, 9, (4, 3), dtype=torch.int32), 0, False, True,
                                torch.randint(-9, 9, (3,), dtype=torch.int32))),
        ("cumulative_sum_out", (_f64(3, 5), 1, True, False, torch.empty(3, 5, dtype=torch.float64),
                                _f64(3, seed=4))),
        ("cumulative_product_", (_f64(5, 5), 0, False, True, expanded[0])),
    ]


@pytest.mark.parametrize("name,args", _opcheck_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_opcheck(name, args):
    result = opcheck(getattr(OPS, name).default, args)
    assert set(result.values()) == {"SUCCESS"}, result


def test_opcheck_with_inputs_that_require_grad():
    x, initial = _f64(3, 4).requires_grad_(), _f64(3, seed=5).requires_grad_()
    for name in ("cumulative_sum", "cumulative_product"):
        result = opcheck(getattr(OPS, name).default, (x, 1, True, False, initial))
        assert set(result.values()) == {"SUCCESS"}, result


def test_fake_kernels_check_the_initial():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with _trace.record() as rec, FakeTensorMode():
        x = torch.empty(3, 7, 2)
        assert OPS.cumulative_sum(x, 1, False, False, torch.empty(3, 2)).shape == (3, 7, 2)
        with pytest.raises(ValueError, match="initial: shape"):
            OPS.cumulative_product(x, 1, False, False, torch.empty(3, 7))
    assert rec.launches == []


def test_an_initial_that_requires_grad_goes_through_the_op():
    x = torch.ones(3, 4, dtype=torch.float64)
    initial = torch.ones(3, dtype=torch.float64, requires_grad=True)
    assert not tritonml.torch_ops.define.direct_call_allowed(x, None, (initial,))
    result = tritonml.cumulative_sum(x, 1, initial=initial)
    assert type(result.grad_fn).__name__ == "CumulativeSumBackward"


@pytest.mark.parametrize("op", ["sum", "prod"])
@pytest.mark.parametrize("reverse,exclusive", DIRECTIONS)
def test_gradcheck_in_x_and_initial(op, reverse, exclusive, fast):
    fn = FUNCTIONS[op]
    x = _f64(2, 5, 2, seed=6)
    if op == "prod":
        x[0, 2, 0] = 0  # exact gradients with zeros, one and two per scan
        x[1, 1, 1] = x[1, 4, 1] = 0
    initial = _f64(2, 2, seed=7)
    initial[1, 0] = 0
    x.requires_grad_()
    initial.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda a, b: fn(a, 1, reverse=reverse, exclusive=exclusive, initial=b), (x, initial))
    # the product's too: its gradient keeps each zero's own factor (docs/semantics.md)
    assert torch.autograd.gradgradcheck(
        lambda a, b: fn(a, 1, reverse=reverse, exclusive=exclusive, initial=b), (x, initial),
        fast_mode=fast)


@pytest.mark.parametrize("op", ["sum", "prod"])
def test_gradients_of_rank_0_and_empty_axes(op):
    fn = FUNCTIONS[op]
    a = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    b = torch.tensor(-3.0, dtype=torch.float64, requires_grad=True)
    for exclusive in (False, True):
        assert torch.autograd.gradcheck(lambda u, v: fn(u, 0, exclusive=exclusive, initial=v),
                                        (a, b))
    x = torch.empty(2, 0, dtype=torch.float64, requires_grad=True)
    initial = torch.ones(2, dtype=torch.float64, requires_grad=True)
    fn(x, 1, initial=initial).sum().backward()
    assert torch.equal(initial.grad, torch.zeros(2, dtype=torch.float64))


@pytest.mark.parametrize("op", ["sum", "prod"])
def test_vmap_with_batched_and_unbatched_initials(op):
    fn = FUNCTIONS[op]
    x, initial = _f64(4, 3, 5, seed=8), _f64(4, 3, seed=9)
    want = torch.stack([fn(x[i], 1, exclusive=True, initial=initial[i]) for i in range(4)])
    got = torch.vmap(lambda a, b: fn(a, 1, exclusive=True, initial=b))(x, initial)
    assert torch.allclose(got, want)
    got = torch.vmap(lambda a: fn(a, 1, initial=initial[0]))(x)
    assert torch.allclose(got, torch.stack([fn(x[i], 1, initial=initial[0]) for i in range(4)]))
    got = torch.vmap(lambda b: fn(x[0], 1, reverse=True, initial=b))(initial)
    assert torch.allclose(got, torch.stack([fn(x[0], 1, reverse=True, initial=initial[i])
                                            for i in range(4)]))
    scalars = torch.vmap(lambda a, b: fn(a, 0, initial=b))(x[:, 0, 0], initial[:, 0])
    combined = x[:, 0, 0] + initial[:, 0] if op == "sum" else x[:, 0, 0] * initial[:, 0]
    assert torch.allclose(scalars, combined)
    out = torch.empty(4, 3, 5, dtype=torch.float64)
    torch.vmap(lambda a, b, o: fn(a, 1, initial=b, out=o))(x, initial, out)
    assert torch.allclose(out, torch.stack([fn(x[i], 1, initial=initial[i]) for i in range(4)]))
    y = x.clone()
    torch.vmap(lambda a, b: fn(a, 1, initial=b, out=a))(y, initial)
    assert torch.allclose(y, torch.stack([fn(x[i], 1, initial=initial[i]) for i in range(4)]))


def test_vmap_of_grad_in_initial():
    x, initial = _f64(4, 6, seed=10), _f64(4, seed=11)

    def loss(b, a):
        return tritonml.cumulative_product(a, 0, initial=b).sum()
    got = torch.vmap(torch.func.grad(loss))(initial, x)
    want = torch.stack([torch.func.grad(loss)(initial[i], x[i]) for i in range(4)])
    assert torch.allclose(got, want)
    assert torch.allclose(want, x.cumprod(1).sum(1))
