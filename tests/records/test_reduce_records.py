"""The reduce functions' records (tritonml/records/builtin_reductions.py): one per ``ReduceFunction``, and a
new record is all a new function needs to run through the launcher, the tuner's sizes and register
class, autograd (dense and segmented), DTensor and torch's twin, checked against numpy; likewise a
new scan record (tritonml/records/builtin_scans.py) through ``segment_scan``."""
from __future__ import annotations

import enum

import numpy as np
import pytest
import torch

import tritonml
from tritonml.dml import support
from tritonml.dml.enums import DataType
from tritonml.kernels import combine as _c
from tritonml.launchers.reduce import reduce_axes
from tritonml.records.scan_combine import ScanCombine
from tritonml.records.builtin_reductions import RECORDS, Fold, ReduceRecord, compared, record_of
from tritonml_autotune.configs import ReduceConfig

# forward-mode AD loads torch's jvp decompositions on first use, which torch.jit.script (deprecated)
# compiles: torch's warning, not tritonml's
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")

CONFIGS = {
    "rows": ReduceConfig("rows", 16, 4),
    "columns": ReduceConfig("columns", 16, 8),
    "split": ReduceConfig("split", 16, 2, splits=5, block_split=2),
    "tuner": None,
}


def test_every_reduce_function_has_one_record():
    assert list(RECORDS) == list(tritonml.ReduceFunction)
    for function, record in RECORDS.items():
        assert isinstance(record, ReduceRecord) and isinstance(record, tritonml.Reduction)
        assert record.function is function and record.name == function.name
        assert record_of(function.name.lower()) is record
        assert record.fold.how in ("stack", "mean", "argument")
        assert (record.fold.by is None) == (record.fold.how == "mean")
        # the functions that return an index are the ones without a derivative
        assert (record.derivative is None) == record.returns_index
        # tritonml's own dtype support (feature_level=None) is the record's
        row = support.supported("REDUCE", None, function)
        assert (DataType.INT32 not in row.input_types) == record.float_only
        assert (row.output_types is not None) == record.returns_index


def test_float_only_records_refuse_integers_with_the_launchers_message():
    for function, record in RECORDS.items():
        if record.float_only:
            with pytest.raises(TypeError, match=f"function: {function.name} is defined for "
                                                "floating-point x only"):
                tritonml.reduce(torch.arange(6, dtype=torch.int32), function)


# ---------------------------------------------------------------------------------------------
# A new function: one record (here from existing jit functions), nothing else
# ---------------------------------------------------------------------------------------------
class _NewFunction(enum.IntEnum):   # stands in for new ReduceFunction members
    MAX_ABS = 100
    LAST_ARGMAX = 101


def _max_abs_derivative(x, y, total, count):
    """sign(x) at the elements whose |x| is the maximum, split evenly over ties."""
    selected = (x.abs() == y).to(x.dtype)
    return torch.sign(x) * selected / torch.clamp(total(selected, "SUM"), min=1)


MAX_ABS = ReduceRecord.of(
    _NewFunction.MAX_ABS, prepare=_c.abs_value, merge=_c.max_values, along=_c.max_along,
    finish=_c.finish_value, state=compared(largest=True), derivative=_max_abs_derivative,
    takes_initial=True, fold=Fold("stack", "MAX"),
    torch_twin=lambda x, d: x.abs().amax(dim=d, keepdim=True))
# a two-component state (value, index), as ARGMAX's: the tuner's other register class
LAST_ARGMAX = ReduceRecord.of(
    _NewFunction.LAST_ARGMAX, prepare=_c.value_and_index, merge=_c.argmax_values,
    along=_c.argmax_along, finish=_c.finish_index, returns_index=True,
    state=compared(largest=True, with_index=True), fold=Fold("argument", "MAX"),
    torch_twin=lambda x, d: x.argmax(dim=d[0], keepdim=True))


@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32],
                         ids=lambda d: str(d).replace("torch.", ""))
def test_a_new_record_runs_through_the_launcher(config, dtype):
    shape, axes = (7, 90), (1,) if config != "columns" else (0,)
    generator = torch.Generator().manual_seed(3)
    values = torch.randn(shape, generator=generator, dtype=torch.float64) * 50
    x = values.to(dtype)
    got = reduce_axes(x, axes, MAX_ABS, config=CONFIGS[config])
    want = np.max(np.abs(x.to(torch.float64).numpy()), axis=axes, keepdims=True)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.to(torch.float64).numpy(), want)
    # torch's twin agrees, and the tuner's sizes come from the record's state
    twin = MAX_ABS.torch_twin(x.to(torch.float64), axes)
    np.testing.assert_array_equal(twin.numpy(), want)
    assert MAX_ABS.state_bytes((dtype,)) == (4 if dtype == torch.float16 else dtype.itemsize)
    assert MAX_ABS.out_bytes((dtype,)) == dtype.itemsize


def test_a_new_record_gets_autograd_from_its_backward():
    x = torch.tensor([[1.0, -3.0, 2.0], [3.0, -3.0, 0.5]], dtype=torch.float64, requires_grad=True)
    y = tritonml.reduce_with(MAX_ABS, x, axes=1)
    np.testing.assert_array_equal(y.detach().numpy(), [[3.0], [3.0]])
    (grad,) = torch.autograd.grad(y.sum(), x)
    # numpy's subgradient: sign(x) at the maxima, split evenly over ties
    a = x.detach().numpy()
    hit = np.abs(a) == np.max(np.abs(a), axis=1, keepdims=True)
    want = np.sign(a) * hit / hit.sum(axis=1, keepdims=True)
    np.testing.assert_array_equal(grad.numpy(), want)


def test_a_builtin_record_runs_through_reduce_with_too():
    """A record is a Reduction: ``reduce_with`` runs it, gradient included, as ``reduce`` does."""
    x = torch.randn(5, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(1),
                    requires_grad=True)
    for function in ("SUM", "L2", "LOG_SUM_EXP", "MAX"):
        got = tritonml.reduce_with(record_of(function), x, axes=1)
        want = tritonml.reduce(x, function, 1)
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        (g_with,) = torch.autograd.grad(got.sum(), x)
        (g_reduce,) = torch.autograd.grad(want.sum(), x)
        torch.testing.assert_close(g_with, g_reduce, rtol=0, atol=0)


def test_a_reduction_identity_may_be_a_rule_over_the_dtypes():
    """The records' identities depend on the dtype (MAX: -inf, or an integer type's minimum); a
    user's Reduction may say so too."""
    def lowest(dtypes):
        return (float("-inf"),) if dtypes[0].is_floating_point else (torch.iinfo(dtypes[0]).min,)

    largest = tritonml.Reduction("largest", _c.keep_value, _c.max_values, _c.finish_value,
                                 identity=lowest, state_dtypes=lambda dtypes: (dtypes[0],),
                                 output_dtypes=lambda dtypes: (dtypes[0],), along=_c.max_along)
    for dtype in (torch.float32, torch.int16):
        x = (torch.arange(60, dtype=torch.float64).reshape(6, 10) * 37 % 23 - 30).to(dtype)
        got = tritonml.reduce_with(largest, x, axes=1, config=CONFIGS["split"])
        want = np.max(x.numpy(), axis=1, keepdims=True)
        np.testing.assert_array_equal(got.numpy(), want)


def _max_abs_oracle(a: np.ndarray, offsets, initial=None) -> np.ndarray:
    """numpy's max |x| of each segment of a 1-D float64 array (-inf, or initial, when empty)."""
    start = -np.inf if initial is None else initial
    return np.array([max([start, *np.abs(a[lo:hi])]) for lo, hi in zip(offsets, offsets[1:])])


def test_a_new_record_runs_through_segment_reduce_with_its_derivative():
    """The segment op finds the record by its name; its gradient and jvp are the record's
    derivative rule over segments (the same rule tritonml.reduce uses over axes)."""
    a = np.array([0.5, -3.0, 2.0, 1.5, -0.25, 4.0, -1.0, 2.5])
    offsets = [0, 3, 3, 6, 8]   # one segment empty
    x = torch.from_numpy(a)
    got = tritonml.segment_reduce(x, MAX_ABS, offsets=torch.tensor(offsets))
    np.testing.assert_array_equal(got.numpy(), _max_abs_oracle(a, offsets))
    got = tritonml.segment_reduce(x, MAX_ABS, offsets=torch.tensor(offsets), initial=3.5)
    np.testing.assert_array_equal(got.numpy(), _max_abs_oracle(a, offsets, 3.5))
    # gradient: sign(x) at each segment's maximum |x| (numpy), for a weighted sum of the results
    full = torch.tensor([0, 3, 6, 8])
    t = x.clone().requires_grad_(True)
    weights = torch.tensor([2.0, -1.0, 0.5], dtype=torch.float64)
    (grad,) = torch.autograd.grad((tritonml.segment_reduce(t, "max_abs", offsets=full)
                                   * weights).sum(), t)
    want = np.zeros_like(a)
    for w, (lo, hi) in zip(weights.numpy(), zip([0, 3, 6], [3, 6, 8])):
        j = lo + int(np.argmax(np.abs(a[lo:hi])))
        want[j] = w * np.sign(a[j])
    np.testing.assert_array_equal(grad.numpy(), want)
    assert torch.autograd.gradcheck(
        lambda v: tritonml.segment_reduce(v, MAX_ABS, offsets=full),
        (x.clone().requires_grad_(True),), check_forward_ad=True)


def test_a_new_record_reduces_a_dtensor_along_its_sharded_dim(tmp_path):
    """tritonml.reduce of a DTensor sharded along the reduced dim: the record's name travels in
    the op, and the ranks' partial results fold with the record's ``fold`` (one rank here)."""
    import torch.distributed as dist
    from torch.distributed.tensor import Shard, distribute_tensor, init_device_mesh

    a = np.array([[0.5, -3.0, 2.0, 1.5], [-0.25, 4.0, -1.0, 2.5]])
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                            world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        d = distribute_tensor(torch.from_numpy(a), mesh, [Shard(1)])
        got = tritonml.reduce(d, MAX_ABS, axes=1)
        np.testing.assert_array_equal(got.full_tensor().numpy(),
                                      np.max(np.abs(a), axis=1, keepdims=True))
    finally:
        dist.destroy_process_group()


def test_the_tuner_reads_the_register_class_from_the_record(monkeypatch):
    """The state's component count comes from the record: a new two-component state is tuned
    as ARGMAX's ("value+index"), a one-component one as SUM's."""
    from tritonml.launchers import reduce as reduce_launcher
    from tritonml_autotune import compiled

    seen = {}
    choose = reduce_launcher.select.choose_reduce

    def spy(layout, dtype, device, function, **kwargs):
        seen[function] = kwargs.get("state_values")
        return choose(layout, dtype, device, function, **kwargs)
    monkeypatch.setattr(reduce_launcher.select, "choose_reduce", spy)
    x = torch.arange(77 * 5, dtype=torch.float32).reshape(77, 5)
    for record, state_class in ((LAST_ARGMAX, "value+index"), (MAX_ABS, "value")):
        reduce_axes(x, (0,), record)
        assert compiled.state_class(seen[record.name]) == state_class
    np.testing.assert_array_equal(reduce_axes(x, (0,), LAST_ARGMAX).numpy(),
                                  np.argmax(x.numpy(), axis=0)[None])


# ---------------------------------------------------------------------------------------------
# A new scan combine: one ScanCombine record (here from existing jit functions), nothing else
# ---------------------------------------------------------------------------------------------
def _running_total_backward(scan, x, output, initial, grad, axis, reverse, exclusive):
    return scan(RUNNING_TOTAL, grad, axis, not reverse, exclusive), None


def _running_total_jvp(scan, x, output, initial, x_tangent, initial_tangent, axis, reverse,
                       exclusive):
    return scan(RUNNING_TOTAL, x_tangent, axis, reverse, exclusive)


RUNNING_TOTAL = ScanCombine("running_total", _c.add, 0, state=_c.add_values, commutative=True,
                            backward=_running_total_backward, jvp=_running_total_jvp,
                            fold="SUM")


@pytest.mark.parametrize("reverse,exclusive", [(False, False), (True, False), (False, True),
                                               (True, True)])
def test_a_new_scan_record_runs_through_segment_scan_with_its_derivatives(reverse, exclusive):
    a = np.array([0.5, -3.0, 2.0, 1.5, -0.25, 4.0, -1.0, 2.5])
    offsets = [0, 3, 3, 6, 8]
    x = torch.from_numpy(a)
    got = tritonml.segment_scan(x, RUNNING_TOTAL, offsets=torch.tensor(offsets), reverse=reverse,
                                exclusive=exclusive)
    want = np.zeros_like(a)
    for lo, hi in zip(offsets, offsets[1:]):
        part = a[lo:hi][::-1] if reverse else a[lo:hi]
        run = np.cumsum(part) - (part if exclusive else 0)
        want[lo:hi] = run[::-1] if reverse else run
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-15, atol=1e-15)
    assert torch.autograd.gradcheck(
        lambda v: tritonml.segment_scan(v, "running_total", offsets=torch.tensor(offsets),
                                        reverse=reverse, exclusive=exclusive),
        (x.clone().requires_grad_(True),), check_forward_ad=True)
