"""tritonml.associative_scan: tuple-state scans with a user's @triton.jit combine.

Every result is compared with a sequential Python loop over the same recurrence (exact Python
integers, Python floats = float64), never with tritonml. Small tensors on purpose: the interpreter
applies a user's combine element by element.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import tritonml  # first: chooses interpreted Triton on a machine without CUDA

import triton
import triton.language as tl

from tritonml.runtime import trace as _trace
from tritonml_autotune.configs import ScanConfig
from tests.lookback_knob import prefix_every
from tritonml_autotune.devices import ARCHS

# The look-back runs with long look-backs where a test uses ``long_lookbacks``.
CONFIGS = [ScanConfig("rows", 4, 2), ScanConfig("columns", 4, 2), ScanConfig("lookback", 4, 2)]
CONFIG_IDS = ["rows", "columns", "lookback"]


@pytest.fixture
def long_lookbacks():
    """The look-back kernel publishes every third inclusive prefix only (tests/lookback_knob.py)."""
    with prefix_every(3):
        yield


# ---------------------------------------------------------------------------------------------
# Combine functions and their Python twins (the oracle)
# ---------------------------------------------------------------------------------------------
@triton.jit
def linear_recurrence(a, b):
    """(gate, token) pairs: applying a then b to h gives b.gate * (a.gate * h + a.token) + b.token."""
    return (a[0] * b[0], b[0] * a[1] + b[1])


def linear_py(a, b):
    return (a[0] * b[0], b[0] * a[1] + b[1])


@triton.jit
def max_with_index(a, b):
    """Running maximum and where it is; ties keep the earlier element (in traversal order)."""
    take_b = b[0] > a[0]
    return (tl.where(take_b, b[0], a[0]), tl.where(take_b, b[1], a[1]))


def max_with_index_py(a, b):
    return b if b[0] > a[0] else a


@triton.jit
def segmented_sum(a, b):
    """(starts a segment, value): the sum restarts at every element whose flag is set."""
    return (a[0] | b[0], tl.where(b[0] != 0, b[1], a[1] + b[1]))


def segmented_py(a, b):
    return (a[0] | b[0], b[1] if b[0] else a[1] + b[1])


@triton.jit
def matrix_product(a, b):
    """Row-major 2x2 matrices, a @ b: associative, not commutative."""
    return (a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
            a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3])


def matrix_py(a, b):
    return (a[0] * b[0] + a[1] * b[2], a[0] * b[1] + a[1] * b[3],
            a[2] * b[0] + a[3] * b[2], a[2] * b[1] + a[3] * b[3])


@triton.jit
def running_sum(a, b):
    return (a[0] + b[0],)


def oracle(combine, xs, axis, *, reverse=False, exclusive=False, identity=None, initial=None):
    """Sequential scan in Python numbers along ``axis``, traversal order, left operand earlier."""
    arrays = [np.moveaxis(x.numpy(), axis, -1) for x in xs]
    shape = arrays[0].shape
    results = [np.empty(shape, dtype=object) for _ in xs]
    inits = ([np.asarray(t.numpy()) for t in initial] if initial is not None else None)
    for index in np.ndindex(*shape[:-1]):
        order = range(shape[-1] - 1, -1, -1) if reverse else range(shape[-1])
        tally = tuple(t[index].item() for t in inits) if inits is not None else None
        for i in order:
            element = tuple(a[index + (i,)].item() for a in arrays)
            if exclusive:
                before = tally if tally is not None else identity
                for r, v in zip(results, before):
                    r[index + (i,)] = v
            tally = element if tally is None else combine(tally, element)
            if not exclusive:
                for r, v in zip(results, tally):
                    r[index + (i,)] = v
    return [np.moveaxis(r, -1, axis) for r in results]


def assert_matches(results, expected, dtypes, rtol=1e-6, atol=1e-6):
    for i, (got, want, dtype) in enumerate(zip(results, expected, dtypes)):
        assert got.dtype == dtype, (i, got.dtype, dtype)
        if dtype.is_floating_point:
            np.testing.assert_allclose(got.double().numpy(), want.astype(np.float64),
                                       rtol=rtol, atol=atol, err_msg=f"component {i}")
        else:
            np.testing.assert_array_equal(got.numpy(), want.astype(np.int64), err_msg=f"component {i}")


# ---------------------------------------------------------------------------------------------
# The recipes, in every regime, both directions, inclusive and exclusive, with and without initial
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive,identity", [(False, None), (False, (1.0, 0.0)), (True, (1.0, 0.0))],
                         ids=["inclusive-no-identity", "inclusive", "exclusive"])
@pytest.mark.parametrize("with_initial", [False, True], ids=["", "initial"])
@pytest.mark.usefixtures("long_lookbacks")
def test_linear_recurrence(config, reverse, exclusive, identity, with_initial):
    gen = torch.Generator().manual_seed(1)
    gates = torch.rand(3, 10, generator=gen) + 0.25
    tokens = torch.randn(10, 3, generator=gen).t()  # transposed: strided along the axis
    initial = (torch.rand(3, generator=gen), torch.randn(3, generator=gen)) if with_initial else None
    result = tritonml.associative_scan(linear_recurrence, (gates, tokens), 1, reverse=reverse,
                                       exclusive=exclusive, identity=identity, initial=initial,
                                       config=config)
    expected = oracle(linear_py, (gates, tokens), 1, reverse=reverse, exclusive=exclusive,
                      identity=identity, initial=initial)
    assert isinstance(result, tuple) and len(result) == 2
    assert_matches(result, expected, (torch.float32, torch.float32))


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.usefixtures("long_lookbacks")
def test_running_max_with_index_on_a_broadcast_index(config, reverse, exclusive):
    # Ties (small integers) test the tie rule; the index is an expanded (stride-0) arange, float32
    # values and int64 indices are mixed dtypes.
    gen = torch.Generator().manual_seed(2)
    values = torch.randint(0, 4, (3, 11), generator=gen).float()
    index = torch.arange(11).expand(3, 11)
    assert index.stride() == (0, 1)
    identity = (-math.inf, -1) if exclusive else None
    result = tritonml.associative_scan(max_with_index, (values, index), -1, reverse=reverse,
                                       exclusive=exclusive, identity=identity, config=config)
    expected = oracle(max_with_index_py, (values, index), 1, reverse=reverse, exclusive=exclusive,
                      identity=identity)
    assert_matches(result, expected, (torch.float32, torch.int64))


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.usefixtures("long_lookbacks")
def test_segmented_sum(config, reverse):
    gen = torch.Generator().manual_seed(3)
    flags = (torch.rand(12, 3, generator=gen) < 0.3).to(torch.int32)
    values = torch.randint(-50, 50, (12, 3), generator=gen, dtype=torch.int16)
    result = tritonml.associative_scan(segmented_sum, (flags, values), 0, reverse=reverse,
                                       identity=(0, 0), config=config)
    expected = oracle(segmented_py, (flags, values), 0, reverse=reverse)
    assert_matches(result, expected, (torch.int32, torch.int16))


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.usefixtures("long_lookbacks")
def test_matrix_products_keep_operand_order(config, reverse, exclusive):
    # Exact integer matrices: any swapped operand changes the product.
    gen = torch.Generator().manual_seed(4)
    entries = [torch.randint(-1, 3, (2, 9), generator=gen) for _ in range(4)]
    identity = (1, 0, 0, 1)
    result = tritonml.associative_scan(matrix_product, tuple(entries), 1, reverse=reverse,
                                       exclusive=exclusive, identity=identity, config=config)
    expected = oracle(matrix_py, entries, 1, reverse=reverse, exclusive=exclusive,
                      identity=identity)
    assert_matches(result, expected, (torch.int64,) * 4)
    swapped = oracle(lambda a, b: matrix_py(b, a), entries, 1, reverse=reverse,
                     exclusive=exclusive, identity=identity)
    assert any(not np.array_equal(w, s) for w, s in zip(expected, swapped))


@pytest.mark.usefixtures("long_lookbacks")
def test_look_back_on_a_long_axis():
    gen = torch.Generator().manual_seed(5)
    gates = torch.rand(2, 150, generator=gen) * 0.5 + 0.5
    tokens = torch.randn(2, 150, generator=gen)
    config = ScanConfig("lookback", 16, 2)
    for reverse in (False, True):
        with _trace.record() as rec:
            result = tritonml.associative_scan(linear_recurrence, (gates, tokens), 1,
                                               reverse=reverse, config=config)
        assert [l.name for l in rec.launches] == ["scan_lookback_kernel"]
        expected = oracle(linear_py, (gates, tokens), 1, reverse=reverse)
        assert_matches(result, expected, (torch.float32, torch.float32), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("exclusive", [False, True])
def test_scanning_in_chunks_with_initial_equals_one_scan(reverse, exclusive):
    gen = torch.Generator().manual_seed(6)
    entries = tuple(torch.randint(-1, 3, (2, 12), generator=gen) for _ in range(4))
    identity = (1, 0, 0, 1)
    whole = tritonml.associative_scan(matrix_product, entries, 1, reverse=reverse,
                                      exclusive=exclusive, identity=identity)
    bounds = [(0, 5), (5, 7), (7, 12)]
    if reverse:
        bounds = bounds[::-1]
    carry, pieces = None, {}
    for start, stop in bounds:
        chunk = tuple(e[:, start:stop] for e in entries)
        pieces[start] = tritonml.associative_scan(matrix_product, chunk, 1, reverse=reverse,
                                                  exclusive=exclusive, identity=identity,
                                                  initial=carry)
        inclusive = tritonml.associative_scan(matrix_product, chunk, 1, reverse=reverse,
                                              identity=identity, initial=carry)
        edge = 0 if reverse else -1
        carry = tuple(c[:, edge].clone() for c in inclusive)
    for i in range(4):
        joined = torch.cat([pieces[s][i] for s, _ in sorted(bounds)], 1)
        assert torch.equal(joined, whole[i])
    expected = oracle(matrix_py, entries, 1, reverse=reverse, exclusive=exclusive,
                      identity=identity)
    assert_matches(whole, expected, (torch.int64,) * 4)


def test_float16_accumulates_in_float32():
    # With float16 accumulation 1024 + 0.25 rounds back to 1024 every step; in float32 the four
    # quarters reach 1025, which float16 stores exactly.
    gates = torch.ones(1, 5, dtype=torch.float16)
    tokens = torch.tensor([[1024.0, 0.25, 0.25, 0.25, 0.25]], dtype=torch.float16)
    _, h = tritonml.associative_scan(linear_recurrence, (gates, tokens), 1)
    assert h.dtype == torch.float16
    assert h[0, -1].item() == 1025.0
    expected = oracle(linear_py, (gates, tokens), 1)
    assert_matches((h,), expected[1:], (torch.float16,), rtol=1e-3, atol=0)


def test_a_single_tensor_takes_and_returns_tuples_of_one():
    x = torch.tensor([[3, 1, 4, 1, 5], [9, 2, 6, 5, 3]], dtype=torch.int32)
    result = tritonml.associative_scan(running_sum, x, 1, exclusive=True, identity=(0,))
    assert isinstance(result, torch.Tensor) and result.dtype == torch.int32
    expected = oracle(lambda a, b: (a[0] + b[0],), (x,), 1, exclusive=True, identity=(0,))
    assert_matches((result,), expected, (torch.int32,))
    initial = torch.tensor([10, 20], dtype=torch.int32)
    result = tritonml.associative_scan(running_sum, x, 1, initial=initial, reverse=True)
    expected = oracle(lambda a, b: (a[0] + b[0],), (x,), 1, initial=(initial,), reverse=True)
    assert_matches((result,), expected, (torch.int32,))


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), -2), ((2, 1, 3, 2), 1), ((1, 2, 1, 2, 1, 2, 1, 2), 3),
                                        ((0, 4), 1), ((3, 0), 1), ((5,), 0)])
def test_ranks_axes_size_one_and_empty(shape, axis):
    gen = torch.Generator().manual_seed(7)
    gates = torch.rand(shape, generator=gen)
    tokens = torch.randn(shape, generator=gen).to(torch.float64)
    result = tritonml.associative_scan(linear_recurrence, (gates, tokens), axis)
    assert [r.shape for r in result] == [gates.shape, tokens.shape]
    if gates.numel():
        expected = oracle(linear_py, (gates, tokens), axis % len(shape))
        assert_matches(result, expected, (torch.float32, torch.float64))


def test_in_place_outputs_and_given_outputs():
    gen = torch.Generator().manual_seed(8)
    gates, tokens = torch.rand(2, 7, generator=gen), torch.randn(2, 7, generator=gen)
    expected = oracle(linear_py, (gates, tokens), 1)
    a, b = gates.clone(), tokens.clone()
    result = tritonml.associative_scan(linear_recurrence, (a, b), 1, out=(a, b))
    assert result[0] is a and result[1] is b
    assert_matches((a, b), expected, (torch.float32, torch.float32))
    out = (torch.empty(7, 2).t(), torch.empty(2, 7))
    result = tritonml.associative_scan(linear_recurrence, (gates, tokens), 1, out=out)
    assert result[0] is out[0]
    assert_matches(out, expected, (torch.float32, torch.float32))


def test_negative_views_are_read_and_written_as_their_values():
    gates = torch.rand(2, 6)
    tokens = torch.randn(2, 6)
    view = torch._neg_view(-tokens)  # a negative-bit view whose values are tokens'
    assert view.is_neg()
    result = tritonml.associative_scan(linear_recurrence, (gates, view), 1)
    expected = oracle(linear_py, (gates, tokens), 1)
    assert_matches(result, expected, (torch.float32, torch.float32))


# ---------------------------------------------------------------------------------------------
# Errors: raised before anything is launched, naming the argument
# ---------------------------------------------------------------------------------------------
def _not_jitted(a, b):
    return (a[0] + b[0],)


@triton.jit
def _three_parameters(a, b, c):
    return (a[0],)


@triton.jit
def _returns_three(a, b):
    return (a[0], a[1], b[0])


@triton.jit
def _returns_a_value(a, b):
    return a[0] + b[0]


def _error_cases():
    x, y = torch.rand(2, 5), torch.rand(2, 5)
    f = linear_recurrence
    return [
        ("combine_fn", TypeError, lambda: tritonml.associative_scan(_not_jitted, x, 1)),
        ("combine_fn", TypeError, lambda: tritonml.associative_scan(_three_parameters, x, 1)),
        ("combine_fn", ValueError, lambda: tritonml.associative_scan(_returns_three, (x, y), 1)),
        ("combine_fn", ValueError, lambda: tritonml.associative_scan(_returns_a_value, x, 1)),
        ("xs", TypeError, lambda: tritonml.associative_scan(f, [x.numpy(), y], 1)),
        (r"xs\[1\]", ValueError, lambda: tritonml.associative_scan(f, (x, torch.rand(2, 4)), 1)),
        ("axis", Exception, lambda: tritonml.associative_scan(f, (x, y), 2)),
        ("identity", ValueError, lambda: tritonml.associative_scan(f, (x, y), 1, exclusive=True)),
        ("identity", ValueError, lambda: tritonml.associative_scan(f, (x, y), 1, identity=(1.0,))),
        ("initial", ValueError, lambda: tritonml.associative_scan(f, (x, y), 1,
                                                                  initial=(torch.rand(2),))),
        (r"initial\[1\]", ValueError, lambda: tritonml.associative_scan(
            f, (x, y), 1, initial=(torch.rand(2), torch.rand(5)))),
        (r"initial\[0\]", TypeError, lambda: tritonml.associative_scan(
            f, (x, y), 1, initial=(torch.rand(2, dtype=torch.float16), torch.rand(2)))),
        (r"initial\[0\]", TypeError, lambda: tritonml.associative_scan(  # no data to read
            f, (x, y), 1, initial=(torch.rand(2, device="meta"), torch.rand(2)))),
        ("out", ValueError, lambda: tritonml.associative_scan(f, (x, y), 1, out=(x,))),
        (r"out\[1\]", ValueError, lambda: tritonml.associative_scan(
            f, (x, y), 1, out=(torch.empty(2, 5), torch.empty(2, 4)))),
        (r"out\[0\]", TypeError, lambda: tritonml.associative_scan(
            f, (x, y), 1, out=(torch.empty(2, 5, dtype=torch.float64), torch.empty(2, 5)))),
        (r"out\[0\]", ValueError, lambda: tritonml.associative_scan(f, (x, y), 1, out=(y, x))),
        (r"out\[1\]", ValueError, lambda: tritonml.associative_scan(
            f, (x, y), 1, out=(torch.empty(2, 5), x[:, :]))),
    ]


@pytest.mark.parametrize("index", range(len(_error_cases())))
def test_errors_name_the_argument_and_launch_nothing(index):
    name, kind, call = _error_cases()[index]
    with _trace.record(execute=False) as rec:
        with pytest.raises(kind, match=f"^{name}"):
            call()
    assert rec.launches == []


def test_inputs_untouched_by_a_rejected_call():
    x, y = torch.rand(2, 5), torch.rand(2, 5)
    before = x.clone(), y.clone()
    out = (torch.zeros(2, 5), torch.zeros(2, 5))
    with pytest.raises(ValueError, match="^identity"):
        tritonml.associative_scan(linear_recurrence, (x, y), 1, exclusive=True, out=out)
    assert torch.equal(x, before[0]) and torch.equal(y, before[1])
    assert not out[0].any() and not out[1].any()


def test_no_autograd():
    x = torch.rand(2, 5, requires_grad=True)
    with pytest.raises(RuntimeError, match="^xs: .*no autograd"):
        tritonml.associative_scan(running_sum, x, 1)
    result = tritonml.associative_scan(running_sum, x.detach(), 1)
    assert not result.requires_grad


# ---------------------------------------------------------------------------------------------
# Bytes moved: k inputs read once, k outputs written once
# ---------------------------------------------------------------------------------------------
@pytest.mark.skipif(not tritonml.INTERPRET, reason="bytes are counted in Triton's interpreter")
@pytest.mark.parametrize("config", [ScanConfig("rows", 256, 1), ScanConfig("columns", 64, 4),
                                    ScanConfig("lookback", 256, 1)], ids=CONFIG_IDS)
def test_tuple_scan_moves_k_inputs_and_k_outputs(config):
    from tritonml.bench.memtrace import trace_memory

    shape, axis = ((1, 1024), 1) if config.regime != "columns" else ((256, 4), 0)
    gen = torch.Generator().manual_seed(9)
    xs = (torch.rand(shape, generator=gen), torch.randn(shape, generator=gen).double())
    outs = tuple(torch.empty_like(x) for x in xs)
    regions = {"x0": xs[0], "x1": xs[1], "out0": outs[0], "out1": outs[1]}
    with trace_memory(regions) as trace:
        tritonml.associative_scan(linear_recurrence, xs, axis, identity=(1.0, 0.0), out=outs,
                                  config=config)
    ideal = 2 * sum(x.numel() * x.element_size() for x in xs)
    for name, t in regions.items():
        kind = "load" if name.startswith("x") else "store"
        assert trace.by_region(name)[kind] == t.numel() * t.element_size()
    assert trace.total_bytes <= 1.05 * ideal, trace.total_bytes / ideal
    expected = oracle(linear_py, xs, axis)
    assert_matches(outs, expected, (torch.float32, torch.float64), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Compiled code: arity 2 and 4, every regime, sm_80 and sm_90
# ---------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compiled_tuple_scans():
    from tests.gpu_compile_cases import tuple_scan_launches
    from tritonml.bench.gpu_compile import compile_in_subprocess

    # The compiling process imports tests.gpu_compile_cases to find the combines (its path starts
    # at the repository root: tritonml/bench/gpu_compile.py).
    return compile_in_subprocess(tuple_scan_launches(), archs=ARCHS)


def test_tuple_states_compile_for_sm80_and_sm90_without_spills(compiled_tuple_scans):
    failures = [(r["case"], r["arch"], r.get("error")) for r in compiled_tuple_scans if not r["ok"]]
    assert not failures, failures[:3]
    covered = {(r["case"]["state"], r["case"]["regime"], r["case"]["reverse"],
                r["case"]["exclusive"], r["arch"]) for r in compiled_tuple_scans}
    # 2 states with an identity (inclusive + exclusive) and 1 without, 3 regimes, 2 directions
    assert len(covered) == (2 * 2 + 1) * 3 * 2 * 2
    spilling = [(r["case"], r["arch"]) for r in compiled_tuple_scans
                if r.get("local_bytes", 0) or r.get("stack_bytes", 0)]
    assert not spilling, spilling[:3]


def test_tuple_states_compile_to_vector_accesses_on_sm80_and_sm90(compiled_tuple_scans):
    for r in compiled_tuple_scans:
        case = r["case"]
        # Arity 2: 128-bit stores, and 128-bit loads where the window is aligned (inclusive; the
        # columns regime's exclusive window shifts along the strided axis, so it stays aligned).
        # Arity 4: a 4-component float64 state is 32 bytes per element, so the tile budget gives
        # each thread 2 consecutive elements: 64-bit accesses (docs/dsl.md).
        widest = 128 if case["arity"] == 2 else 64
        assert r["max_store_bits"] == widest, (case, r["arch"])
        if not (case["exclusive"] and case["regime"] != "columns"):
            assert r["max_load_bits"] == widest, (case, r["arch"])


def test_rank_0_is_a_scan_of_one_element():
    g, t = torch.tensor(0.5), torch.tensor(2.0)
    init = (torch.tensor(1.5), torch.tensor(3.0))
    assert [r.item() for r in tritonml.associative_scan(linear_recurrence, (g, t), 0)] == [0.5, 2.0]
    expected = linear_py((1.5, 3.0), (0.5, 2.0))
    result = tritonml.associative_scan(linear_recurrence, (g, t), -1, initial=init)
    assert [r.item() for r in result] == list(expected)
    result = tritonml.associative_scan(linear_recurrence, (g, t), 0, exclusive=True,
                                       identity=(1.0, 0.0), initial=init)
    assert [r.item() for r in result] == [1.5, 3.0]


# ---------------------------------------------------------------------------------------------
# Chunks with the carry in the accumulation dtypes (return_carry)
# ---------------------------------------------------------------------------------------------
def test_chunked_float32_recurrence_with_carries_equals_one_scan():
    rng = np.random.default_rng(21)
    gate = torch.from_numpy(rng.uniform(0.9, 1.0, (2, 32)).astype(np.float32))
    token = torch.from_numpy((100.0 + rng.standard_normal((2, 32))).astype(np.float32))
    config = ScanConfig("rows", 8, 2)
    whole = tritonml.associative_scan(linear_recurrence, (gate, token), 1, config=config)
    # oracle for the one scan: the sequential loop in float64
    for row in range(2):
        state = (float(gate[row, 0]), float(token[row, 0]))
        for t in range(1, 32):
            state = linear_py(state, (float(gate[row, t]), float(token[row, t])))
            assert math.isclose(whole[1][row, t].item(), state[1], rel_tol=2 ** -23)
    carry, pieces = None, []
    for g, t in zip(gate.split(8, 1), token.split(8, 1)):
        piece, carry = tritonml.associative_scan(linear_recurrence, (g, t), 1, initial=carry,
                                                 config=config, return_carry=True)
        pieces.append(piece)
    assert [c.dtype for c in carry] == [torch.float64, torch.float64]
    for i in range(2):
        assert torch.equal(torch.cat([p[i] for p in pieces], 1), whole[i])
    h = tritonml.linear_recurrence(gate, token, 1)
    first, h_carry = tritonml.linear_recurrence(gate[:, :16], token[:, :16], 1, return_carry=True)
    second, _ = tritonml.linear_recurrence(gate[:, 16:], token[:, 16:], 1, initial=h_carry,
                                           return_carry=True)
    assert h_carry.dtype == torch.float64
    assert torch.equal(torch.cat([first, second], 1), h)


# ---------------------------------------------------------------------------------------------
# Errors inside a combine: named, located and shown once; out= untouched
# ---------------------------------------------------------------------------------------------
@triton.jit
def _uses_an_undefined_name(a, b):
    return (a[0] + not_defined_anywhere,)  # noqa: F821


@triton.jit
def _forgets_to_return(a, b):
    total = a[0] + b[0]  # noqa: F841


@triton.jit
def _reads_past_the_state(a, b):
    return (a[0] + b[2],)


@triton.jit
def _indexes_past_the_state(a, b):
    i = 2
    return (a[0] + b[i],)


@triton.jit
def _uses_python_math(a, b):
    return (a[0] + math.exp(b[0]),)


def _line_of(fn, text: str) -> str:
    """``file:line`` of the line of ``fn``'s source holding ``text`` (found by inspect)."""
    import inspect
    lines, first = inspect.getsourcelines(fn.fn)
    index = next(i for i, line in enumerate(lines) if text in line)
    return f"{inspect.getsourcefile(fn.fn)}:{first + index}"


def _raises_untouched(fn, kind):
    x = torch.rand(2, 6)
    out = torch.full_like(x, 7.0)
    with pytest.raises(kind) as caught:
        tritonml.associative_scan(fn, x, 1, out=out)
    assert torch.equal(out, torch.full_like(x, 7.0))
    return caught.value


@pytest.mark.skipif(not tritonml.INTERPRET, reason="locates errors the interpreter raises")
def test_an_error_inside_the_combine_is_shown_once_at_its_line():
    error = _raises_untouched(_uses_an_undefined_name, tritonml.CombineError)
    message = str(error)
    assert message.startswith(f"combine_fn {__name__}._uses_an_undefined_name "
                              f"({_line_of(_uses_an_undefined_name, 'not_defined_anywhere')})")
    assert message.count("name 'not_defined_anywhere' is not defined") == 1
    assert "NameError" in message and "InterpreterError" not in message
    assert "return (a[0] + not_defined_anywhere,)" in message
    assert isinstance(error.original, NameError)
    assert error.combine == f"{__name__}._uses_an_undefined_name"


def test_a_combine_without_return_is_refused_before_launch():
    with _trace.record(execute=False) as rec:
        error = _raises_untouched(_forgets_to_return, ValueError)
    assert rec.launches == []
    assert str(error) == (f"combine_fn: {__name__}._forgets_to_return "
                          f"({_line_of(_forgets_to_return, 'def ')}) has no return statement; it "
                          "must return a tuple of 1 value(s), one per tensor of xs (e.g. return "
                          "(a[0] + b[0],))")


def test_a_constant_index_past_the_state_is_refused_before_launch():
    with _trace.record(execute=False) as rec:
        error = _raises_untouched(_reads_past_the_state, ValueError)
    assert rec.launches == []
    assert str(error) == (f"combine_fn: {__name__}._reads_past_the_state "
                          f"({_line_of(_reads_past_the_state, 'b[2]')}) reads b[2], but each state "
                          "holds 1 component(s), one per tensor of xs: b[0] to b[0]")


@pytest.mark.skipif(not tritonml.INTERPRET, reason="locates errors the interpreter raises")
def test_an_index_past_the_state_at_run_time_names_the_state_size():
    error = _raises_untouched(_indexes_past_the_state, tritonml.CombineError)
    message = str(error)
    assert message.startswith(f"combine_fn {__name__}._indexes_past_the_state "
                              f"({_line_of(_indexes_past_the_state, 'b[i]')}) raised IndexError")
    assert "hint: each state holds 1 component(s), one per tensor of xs: a[0] to a[0]" in message
    assert isinstance(error.original, IndexError)


@pytest.mark.skipif(not tritonml.INTERPRET, reason="locates errors the interpreter raises")
def test_python_math_on_a_tile_hints_at_triton_math():
    error = _raises_untouched(_uses_python_math, tritonml.CombineError)
    message = str(error)
    assert message.startswith(f"combine_fn {__name__}._uses_python_math "
                              f"({_line_of(_uses_python_math, 'math.exp')}) raised TypeError")
    assert "hint: Python's math functions take numbers, not tiles: use Triton's (tl.exp" in message
    assert message.count("TypeError") == 1 and "InterpreterError" not in message
    assert isinstance(error.original, TypeError)


# ---------------------------------------------------------------------------------------------
# Combines from modules of their own: `import triton` alone, or with triton.language
# ---------------------------------------------------------------------------------------------
_TRITON_ONLY = "import triton\n"
_WITH_TL = "import triton\nimport triton.language as tl\n"


@pytest.fixture
def combine_module(tmp_path, monkeypatch, request):
    """``make(header, body)``: the ``@triton.jit`` function ``combine`` of a new module (a file in
    ``tmp_path``, imported under a name of its own) holding ``header`` then ``body``."""
    import importlib
    import sys
    import textwrap

    monkeypatch.syspath_prepend(str(tmp_path))
    names = []

    def make(header: str, body: str):
        name = f"_tritonml_combine_{request.node.name.split('[')[0]}_{len(names)}"
        (tmp_path / f"{name}.py").write_text(header + "\n\n@triton.jit\n"
                                             + textwrap.dedent(body))
        names.append(name)
        return importlib.import_module(name).combine
    yield make
    for name in names:
        sys.modules.pop(name, None)


@pytest.mark.skipif(not tritonml.INTERPRET, reason="Triton's interpreter's rule on modules")
def test_a_combine_from_a_module_that_imports_triton_alone_runs(combine_module):
    combine = combine_module(_TRITON_ONLY, "def combine(a, b):\n    return (a[0] + b[0],)\n")
    x = torch.arange(12, dtype=torch.float64).reshape(2, 6)
    assert torch.equal(tritonml.associative_scan(combine, x, 1), x.cumsum(1))
    assert torch.equal(tritonml.associative_scan(combine, x, 1, lengths=torch.tensor([2, 4])),
                       torch.cat([x[:, :2].cumsum(1), x[:, 2:].cumsum(1)], 1))


@pytest.mark.skipif(not tritonml.INTERPRET, reason="locates errors the interpreter raises")
@pytest.mark.parametrize("header", [_TRITON_ONLY, _WITH_TL], ids=["triton_only", "with_tl"])
def test_an_undefined_name_is_the_error_shown_without_an_arity_hint(combine_module, header):
    combine = combine_module(header, "def combine(a, b):\n    return (a[0] + undefined_name,)\n")
    error = _raises_untouched(combine, tritonml.CombineError)
    message = str(error)
    assert message.startswith(f"combine_fn {combine.fn.__module__}.combine "
                              f"({_line_of(combine, 'undefined_name')}) raised NameError: name "
                              "'undefined_name' is not defined\n    return (a[0] + undefined_name,)")
    assert "must return a tuple" not in message and "must be visible" not in message
    assert isinstance(error.original, NameError)


@pytest.mark.skipif(not tritonml.INTERPRET, reason="Triton's interpreter's rule on modules")
def test_a_module_triton_cannot_see_the_language_in_is_named_without_an_arity_hint(
        combine_module, monkeypatch):
    # Where tritonml could not let the combine run (the rewrite that makes triton.language
    # visible), the message says what Triton asks of the module, and nothing of arity.
    from tritonml.core import triton_compat
    monkeypatch.setattr(triton_compat, "make_language_visible", lambda fn: None)
    combine = combine_module(_TRITON_ONLY, "def combine(a, b):\n    return (a[0] + b[0],)\n")
    error = _raises_untouched(combine, tritonml.CombineError)
    message = str(error)
    module = combine.fn.__module__
    assert message == (f"combine_fn {module}.combine ({_line_of(combine, '@triton.jit')}) "
                       "raised AssertionError: triton.language must be visible from within "
                       "jit'd function\n  Triton's interpreter runs a @triton.jit function called "
                       "from another only if its module holds triton.language as a global: add "
                       f"`import triton.language as tl` to {module}")


@pytest.mark.skipif(not tritonml.INTERPRET, reason="locates errors the interpreter raises")
@pytest.mark.parametrize("header", [_TRITON_ONLY, _WITH_TL], ids=["triton_only", "with_tl"])
def test_a_wrong_arity_at_run_time_still_says_how_many_values(combine_module, header):
    combine = combine_module(header, "def combine(a, b):\n    r = (a[0] + b[0], a[0])\n"
                                     "    return r\n")
    error = _raises_untouched(combine, tritonml.CombineError)
    message = str(error)
    assert message.startswith(f"combine_fn {combine.fn.__module__}.combine "
                              f"({_line_of(combine, '@triton.jit')}) raised AssertionError: "
                              "combine_fn must return a tuple of 1 value(s), one per tensor of xs")
    assert message.count("must return a tuple") == 1


@pytest.mark.skipif(not tritonml.INTERPRET, reason="locates errors the interpreter raises")
def test_a_single_value_returned_at_run_time_gets_the_arity_hint(combine_module):
    combine = combine_module(_WITH_TL, "def combine(a, b):\n    r = a[0] + b[0]\n    return r\n")
    message = str(_raises_untouched(combine, tritonml.CombineError))
    assert message.endswith("\n  the combine must return a tuple of 1 value(s), one per tensor of xs")
