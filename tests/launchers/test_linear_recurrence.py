"""tritonml.linear_recurrence: h[t] = gates[t] * h[t-1] + tokens[t], checked against sequential
loops (float64 numpy, or exact Python integers wrapped to the dtype), its gradients against
gradcheck's finite differences and against autograd through a plain torch loop in float64."""
from __future__ import annotations

import contextlib
import math

import numpy as np
import pytest
import torch

import tritonml
from tritonml.runtime import trace as _trace
from tritonml.bench.memtrace import trace_memory
from benchmarks.scan_oracle import to_numpy
from tritonml.launchers.recurrence import recurrence

FLOATS = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# Relative error bound of each float dtype's result against float64 (a few ulps of the output:
# the state accumulates in float32 or wider, so only the final rounding and a few steps show).
REL_TOL = {torch.float64: 1e-12, torch.float32: 1e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}


def loop_reference(gates: np.ndarray, tokens: np.ndarray, axis: int, reverse: bool,
                   initial: np.ndarray | None = None, wrap_bits: int | None = None):
    """The recurrence one step at a time along ``axis`` (vectorized over the other dims):
    float64, or exact Python integers reduced modulo 2**wrap_bits (two's complement)."""
    g = np.moveaxis(gates, axis, 0)
    x = np.moveaxis(tokens, axis, 0)
    if wrap_bits is not None:
        g, x = g.astype(object), x.astype(object)
        h = (np.zeros(g.shape[1:], dtype=object) if initial is None
             else np.asarray(initial).astype(object))
    else:
        g, x = g.astype(np.float64), x.astype(np.float64)
        h = np.zeros(g.shape[1:]) if initial is None else np.asarray(initial, dtype=np.float64)
    out = np.empty_like(x)
    order = range(len(x) - 1, -1, -1) if reverse else range(len(x))
    for t in order:
        h = g[t] * h + x[t]
        if wrap_bits is not None:
            h = (h + 2 ** (wrap_bits - 1)) % 2 ** wrap_bits - 2 ** (wrap_bits - 1)
        out[t] = h
    return np.moveaxis(out, 0, axis)


def random_inputs(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if dtype.is_floating_point:
        # gates in (-1, 1) keep h bounded: |h| <= sum |tokens| / (1 - max|gate|)
        gates = torch.from_numpy(rng.uniform(-0.95, 0.95, shape)).to(dtype)
        tokens = torch.from_numpy(rng.standard_normal(shape)).to(dtype)
    else:
        gates = torch.from_numpy(rng.integers(-3, 4, shape)).to(dtype)
        tokens = torch.from_numpy(rng.integers(-100, 100, shape)).to(dtype)
    return gates, tokens


def assert_matches(result: torch.Tensor, want: np.ndarray, dtype: torch.dtype):
    got = to_numpy(result).astype(np.float64)
    scale = np.maximum(np.abs(want), 1.0)
    err = np.max(np.abs(got - want) / scale) if want.size else 0.0
    assert err <= REL_TOL[dtype], f"max relative error {err:.3g} > {REL_TOL[dtype]}"


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape,axis", [((50,), 0), ((3, 70), 1), ((70, 3), 0), ((4, 37, 5), 1),
                                        ((2, 3, 1), -1), ((0, 4), 1), ((4, 0), 1)])
@pytest.mark.parametrize("reverse", [False, True])
def test_forward_matches_a_sequential_loop(dtype, shape, axis, reverse):
    gates, tokens = random_inputs(shape, dtype, seed=len(shape) + axis)
    result = tritonml.linear_recurrence(gates, tokens, axis, reverse=reverse)
    assert result.shape == tokens.shape and result.dtype == dtype
    want = loop_reference(to_numpy(gates), to_numpy(tokens), axis % len(shape), reverse)
    assert_matches(result, want, dtype)


@pytest.mark.parametrize("dtype,bits", [(torch.int32, 32), (torch.int64, 64), (torch.int8, 8)],
                         ids=str)
@pytest.mark.parametrize("reverse", [False, True])
def test_integers_wrap_as_in_c(dtype, bits, reverse):
    gates, tokens = random_inputs((3, 40), dtype, seed=bits)
    result = tritonml.linear_recurrence(gates, tokens, 1, reverse=reverse)
    want = loop_reference(gates.numpy(), tokens.numpy(), 1, reverse, wrap_bits=bits)
    assert result.tolist() == want.astype(np.int64).tolist()


@pytest.mark.parametrize("reverse", [False, True])
def test_initial_is_the_state_before_the_first_step(reverse):
    gates, tokens = random_inputs((3, 4, 25), torch.float64, seed=3)
    initial = torch.randn(3, 25, dtype=torch.float64)
    result = tritonml.linear_recurrence(gates, tokens, 1, reverse=reverse, initial=initial)
    want = loop_reference(gates.numpy(), tokens.numpy(), 1, reverse, initial=initial.numpy())
    assert_matches(result, want, torch.float64)


def test_strided_and_broadcast_inputs():
    base_g, base_x = random_inputs((40, 12), torch.float32, seed=5)
    gates = base_g.t()[::2]                        # (6, 40), strided both ways
    tokens = base_x.t()[1::2]
    result = tritonml.linear_recurrence(gates, tokens, 1)
    want = loop_reference(gates.numpy(), tokens.numpy(), 1, False)
    assert_matches(result, want, torch.float32)
    # one gate sequence shared by every row (stride 0), as a decay shared across channels
    shared = base_g[:, 0].expand(8, 40)
    tokens = base_x[:8].repeat(1, 4)[:, :40]
    result = tritonml.linear_recurrence(shared, tokens, 1, reverse=True)
    want = loop_reference(shared.numpy(), tokens.numpy(), 1, True)
    assert_matches(result, want, torch.float32)


@pytest.mark.parametrize("reverse", [False, True])
def test_scanning_in_chunks_with_initial_equals_one_scan(reverse):
    gates, tokens = random_inputs((2, 90), torch.float64, seed=7)
    whole = tritonml.linear_recurrence(gates, tokens, 1, reverse=reverse)
    bounds = [0, 17, 50, 90]
    chunks = list(zip(bounds[:-1], bounds[1:]))
    state, pieces = None, {}
    for lo, hi in (reversed(chunks) if reverse else chunks):
        piece = tritonml.linear_recurrence(gates[:, lo:hi], tokens[:, lo:hi], 1, reverse=reverse,
                                           initial=state)
        state = piece[:, 0] if reverse else piece[:, -1]
        pieces[lo] = piece
    chunked = torch.cat([pieces[lo] for lo, _ in chunks], 1)
    want = loop_reference(gates.numpy(), tokens.numpy(), 1, reverse)
    assert_matches(chunked, want, torch.float64)
    assert_matches(whole, want, torch.float64)


# As for an H100 one sequence of 2**20 is a chunked scan: the tuner's cost model prefers it to the
# look-back, whose chain of tiles (90 ns each) bounds a long row (docs/tuning.md, "Chunked scans").
@pytest.mark.parametrize("target,kernel", [(None, None), ("H100", "scan_chunked_kernel")])
def test_long_sequence_accuracy_in_float32(target, kernel):
    """The accuracy docs/dsl.md states: float32 inputs at length 2**20 against a float64 loop,
    with the configs chosen for this machine and, as for an H100, in chunks over many programs."""
    n = 1 << 20
    rng = np.random.default_rng(11)
    gates = torch.from_numpy(rng.uniform(0.9, 1.0, n).astype(np.float32))  # long memory
    tokens = torch.from_numpy(rng.standard_normal(n).astype(np.float32))
    with contextlib.ExitStack() as stack:
        if target is not None:
            stack.enter_context(tritonml.tuning.target(target))
        rec = stack.enter_context(_trace.record())
        result = tritonml.linear_recurrence(gates, tokens, 0).numpy().astype(np.float64)
    if kernel is not None:
        assert [launch.name for launch in rec.launches] == [kernel]
    g, x = gates.numpy().astype(np.float64).tolist(), tokens.numpy().astype(np.float64).tolist()
    want, h = np.empty(n), 0.0
    for t in range(n):
        h = g[t] * h + x[t]
        want[t] = h
    rel = np.abs(result - want) / np.maximum(np.abs(want), 1.0)
    # The state is carried in float64; what remains is the float32 rounding of each output
    # (at most 2**-24 relative), measured at 5.95e-8.
    assert rel.max() <= 2 ** -23, rel.max()


# ---------------------------------------------------------------------------------------------
# Gradients
# ---------------------------------------------------------------------------------------------
def torch_loop(gates, tokens, axis, reverse, initial=None):
    """The recurrence as a plain torch loop: autograd through it is an independent oracle."""
    g, x = gates.movedim(axis, 0), tokens.movedim(axis, 0)
    h = torch.zeros_like(x[0]) if initial is None else initial
    out = [None] * len(x)
    for t in (range(len(x) - 1, -1, -1) if reverse else range(len(x))):
        h = g[t] * h + x[t]
        out[t] = h
    return torch.stack(out).movedim(0, axis)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("with_initial", [False, True])
def test_gradients_match_autograd_through_a_loop(reverse, with_initial):
    gates, tokens = random_inputs((3, 20, 4), torch.float64, seed=13)
    initial = torch.randn(3, 4, dtype=torch.float64) if with_initial else None
    leaves = [gates.requires_grad_(), tokens.requires_grad_()]
    if with_initial:
        leaves.append(initial.requires_grad_())
    weights = torch.randn(3, 20, 4, dtype=torch.float64)
    ours = torch.autograd.grad((tritonml.linear_recurrence(gates, tokens, 1, reverse=reverse,
                                                           initial=initial) * weights).sum(),
                               leaves)
    want = torch.autograd.grad((torch_loop(gates, tokens, 1, reverse, initial) * weights).sum(),
                               leaves)
    for name, a, b in zip(("gates", "tokens", "initial"), ours, want):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12), name


@pytest.mark.parametrize("reverse", [False, True])
def test_gradcheck_and_double_backward(reverse, fast):
    gates, tokens = random_inputs((2, 9), torch.float64, seed=17)
    initial = torch.randn(2, dtype=torch.float64, requires_grad=True)
    gates.requires_grad_()
    tokens.requires_grad_()

    def f(g, x, h0):
        return tritonml.linear_recurrence(g, x, -1, reverse=reverse, initial=h0)
    assert torch.autograd.gradcheck(f, (gates, tokens, initial), fast_mode=fast)
    assert torch.autograd.gradgradcheck(f, (gates, tokens, initial), fast_mode=fast)


def test_registered_op_passes_opcheck():
    gates, tokens = random_inputs((3, 12), torch.float32, seed=19)
    initial = torch.randn(3)
    torch.library.opcheck(torch.ops.tritonml.linear_recurrence.default,
                          (gates, tokens, 1, False, initial))


def test_vmap_over_a_batch_of_sequences():
    gates, tokens = random_inputs((4, 3, 15), torch.float64, seed=23)
    result = torch.vmap(lambda g, x: tritonml.linear_recurrence(g, x, -1))(gates, tokens)
    want = loop_reference(gates.numpy(), tokens.numpy(), 2, False)
    assert_matches(result, want, torch.float64)


# ---------------------------------------------------------------------------------------------
# Errors and traffic
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call,match", [
    (lambda g, x: tritonml.linear_recurrence(g, x[:, :3], 1), "tokens: shape"),
    (lambda g, x: tritonml.linear_recurrence(g, x.double(), 1), "tokens: dtype"),
    (lambda g, x: tritonml.linear_recurrence(g, x, 2), "axis: 2 is out of range"),
    (lambda g, x: tritonml.linear_recurrence(g, x, 1, initial=torch.zeros(5)), "initial: shape"),
    (lambda g, x: tritonml.linear_recurrence(g, x, 1, initial=torch.zeros(4).half()),
     "initial: dtype"),
    (lambda g, x: tritonml.linear_recurrence(g.numpy(), x, 1), "gates: expected a torch.Tensor"),
    (lambda g, x: tritonml.linear_recurrence(g, x, 1, reverse=1), "reverse"),
])
def test_bad_input_is_refused_before_any_launch(call, match):
    gates, tokens = random_inputs((4, 6), torch.float32)
    with pytest.raises((TypeError, ValueError), match=match):
        call(gates, tokens)


@pytest.mark.skipif(not tritonml.INTERPRET, reason="bytes are counted in Triton's interpreter")
@pytest.mark.parametrize("shape,axis", [((64, 256), 1), ((256, 64), 0), ((1, 8192), 1)])
def test_reads_two_inputs_and_writes_one_output(shape, axis):
    gates, tokens = random_inputs(shape, torch.float32)
    out_bytes = math.prod(shape) * 4
    # The launcher the public function calls: under the tracer's dispatch mode the public
    # function goes through the torch op, which the tracer would count as torch work besides.
    with trace_memory({"gates": gates, "tokens": tokens}) as trace:
        recurrence(gates, tokens, axis)
    ideal = 3 * out_bytes
    assert trace.total_bytes <= 1.05 * ideal, (trace.total_bytes, ideal)
    assert trace.launches <= 2
