"""The reduce functions' records (tritonml/reduce_functions.py): one per ``ReduceFunction``, and a
new record is all a new function needs to run through the launcher, the tuner's sizes, autograd
and torch's twin, checked against numpy."""
from __future__ import annotations

import enum

import numpy as np
import pytest
import torch

import tritonml
from tritonml.dml import support
from tritonml.dml.enums import DataType
from tritonml.kernels import combine as _c
from tritonml.launchers.reduce import COMBINES, reduce_axes
from tritonml.reduce_functions import RECORDS, Fold, ReduceRecord, compared, record_of
from tritonml_autotune.configs import ReduceConfig

CONFIGS = {
    "rows": ReduceConfig("rows", 16, 4),
    "columns": ReduceConfig("columns", 16, 8),
    "split": ReduceConfig("split", 16, 2, splits=5, block_split=2),
    "tuner": None,
}


def test_every_reduce_function_has_one_record():
    assert list(RECORDS) == list(tritonml.ReduceFunction)
    assert COMBINES is RECORDS   # the launcher reads the same registry
    for function, record in RECORDS.items():
        assert isinstance(record, ReduceRecord) and isinstance(record, tritonml.Reduction)
        assert record.function is function and record.name == function.name
        assert record_of(function.name.lower()) is record
        assert record.fold.how in ("stack", "mean", "argument")
        assert (record.fold.by is None) == (record.fold.how == "mean")
        # the functions that return an index are the ones without a gradient
        assert (record.backward is None) == record.returns_index
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
class _NewFunction(enum.IntEnum):   # stands in for a new ReduceFunction member
    MAX_ABS = 100


def _max_abs_backward(xs, outputs, grads, axes):
    """Evenly over the elements whose |x| is the maximum, with the sign of x."""
    (x,), (y,), (grad,) = xs, outputs, grads
    selected = (x.abs() == y).to(x.dtype)
    count = selected.sum(dim=axes if axes else None, keepdim=True)
    return (torch.sign(x) * selected / count * grad,)


MAX_ABS = ReduceRecord.of(
    _NewFunction.MAX_ABS, prepare=_c.abs_value, merge=_c.max_values, along=_c.max_along,
    finish=_c.finish_value, state=compared(largest=True), backward=_max_abs_backward,
    fold=Fold("stack", "MAX"), torch_twin=lambda x, d: x.abs().amax(dim=d, keepdim=True))


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
