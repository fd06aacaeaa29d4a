"""DirectML's twelve reduce functions (DML_REDUCE_FUNCTION), one record each: ``RECORDS`` and
``record_of``.

A record is a ``tritonml.Reduction`` (the kind of object users write for ``tritonml.reduce_with``)
with the few facts the built-in operator needs beyond it. One record holds everything about its
function that tritonml reads anywhere:

- the kernels' four ``@triton.jit`` functions (prepare, merge, along, finish; the "Reductions" part
  of tritonml/kernels/combine.py), run by tritonml/launchers/reduce.py;
- the state: a rule giving each component's Triton dtype and identity for the input's dtype
  (``state``; the tuner's state bytes come from it, passed in as plain numbers);
- the dtypes accepted (``float_only``) and the output's (the input's, or ``index_dtype`` for the
  functions that return an index, ``uses_index``);
- one derivative rule (``derivative``: d result / d x per element, given the caller's
  differentiable totals), behind the gradient and the forward-mode derivative of
  ``tritonml.reduce`` (over axes: ``derivatives``, in the conventions of ``Reduction.backward``
  and ``Reduction.jvp``, which ``tritonml.reduce_with`` runs too) and of
  ``tritonml.segment_reduce`` (over segments); None where there is none (ARGMAX, ARGMIN: their
  output is an index);
- whether ``segment_reduce``'s ``initial`` may start its fold (``takes_initial``);
- whether the result is a mean, the sum divided by the element count (``averages``: a fold of
  partial results over parts of the elements weights them by their counts);
- the distributed fold (``fold``: how ``tritonml.distributed.reduce`` merges the ranks' partial
  results);
- torch's eager twin (``torch_twin``), which the benchmarks time and check against.

Who reads them, by the record or its name (``record_of``): the launchers
(tritonml/launchers/reduce.py and segment.py take a record), the torch ops' autograd and
forward mode (tritonml/torch_ops/reduce.py, reduce_with.py, segment.py), routing (whether a
routed call may record autograd), tritonml.distributed and the DTensor rules (the fold), tritonml/dml/support.py
(tritonml's own dtype support), the tuner (state bytes and component count, as numbers),
tritonml/bench/cases.py and tritonml/tuning.py.

Adding a reduce function (nothing else asks to be edited):
1. its member in ``ReduceFunction`` (tritonml/records/reduce_function.py), with directml.h's value;
2. its ``@triton.jit`` functions in tritonml/kernels/combine.py, if the existing ones do not
   compose into it (each takes and returns a tuple of state components);
3. its record below, in ``RECORDS``;
4. its tests: numpy's answer in benchmarks/reduce_oracle.py and the cases of tests/launchers/test_reduce.py;
   tests/records/test_reduce_records.py checks that every member has a record, and runs a record of its
   own through the launcher, the tuner, autograd, segment_reduce and DTensor.
If DirectML's operator page lists the function, its feature-level rows go in
tritonml/dml/support.py (a transcription of DirectML's tables, not a fact of the kernels).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
import enum
from typing import TYPE_CHECKING, Any, Callable, Dict, Optional, Tuple, Union

import torch
import triton.language as tl

from ..core.dtypes import ACC_DTYPE, TL_DTYPE, TORCH_DTYPE, dtype_name, is_float
from .reduce_function import ReduceFunction
from ..kernels import combine as _c
from .reduction import Reduction

_HALF_DTYPES = (torch.float16, torch.bfloat16)
_BY_NAME: Dict[str, "ReduceRecord"] = {}   # every record ReduceRecord.of made, by name

StateRule = Callable[[torch.dtype, bool], Tuple[Tuple[Any, Any], ...]]
"""``state(dtype, index_64) -> ((triton dtype, identity), ...)``: a record's state components."""
Derivative = Callable[..., Any]
"""``derivative(x, y, total, count) -> d y / d x``: a record's derivative rule ("Derivatives")."""
_INT32_MAX, _INT64_MAX = 2**31 - 1, 2**63 - 1


# ---------------------------------------------------------------------------------------------
# The record
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fold:
    """How ``tritonml.distributed.reduce`` merges the ranks' partial results along a sharded axis.
    Every rank gathers one partial state per rank (``all_gather``) and folds them in rank order, so
    every rank returns the same bits (a torch ``all_reduce`` would fold in the collective's own,
    unspecified order); no ``torch.distributed.ReduceOp`` is involved.

    ``how``: "stack": each rank reduces its shard with the function itself, and the stacked
    results reduce with ``by``; "mean": each rank's AVERAGE, re-weighted by its element count
    (AVERAGE, LOG_SUM: a mean cannot overflow a half type where a partial sum could);
    "argument": each rank's (value, coordinates), the values folded with ``by`` and the first
    global index among the best kept.

    A "mean" fold sums the ranks' means weighted by each rank's share of the elements when the
    record ``averages`` (the global mean), by its count otherwise (the global sum), then applies
    ``then`` (LOG_SUM: ``torch.log``; None: nothing). ``empty`` is its result when every shard is
    empty (AVERAGE's 0 / 0 is NaN, LOG_SUM's log 0 is -inf); the other folds leave it None.
    """
    how: str
    by: Optional[str] = None
    then: Optional[Callable[[torch.Tensor], torch.Tensor]] = None
    empty: Optional[float] = None


@dataclass(frozen=True, eq=False)
class ReduceRecord(Reduction):
    """One DirectML reduce function: a ``Reduction`` whose state follows ``state(dtype,
    index_64) -> ((triton dtype, identity), ...)`` (one pair per component; the input loads as
    the first component's dtype), with ``function`` (its ``ReduceFunction``), ``float_only``,
    ``fold``, ``torch_twin(x, dims)`` (torch's eager equivalent, rank kept), ``derivative``
    (the one rule behind the gradient and the jvp of ``tritonml.reduce`` and ``segment_reduce``;
    None for a function whose output is an index), ``selects`` (the result is some of the
    elements: a jvp reads only their tangents, ``tangent_terms``), ``takes_initial`` (whether
    ``segment_reduce``'s ``initial`` may start its fold) and ``averages`` (the result is the
    mean: the sum's state, finished by dividing by the element count, so whoever combines results
    over parts of the elements, ranks or padded rows, weights or divides by the real counts).
    Built with ``ReduceRecord.of``, which derives the ``Reduction`` fields (identity, dtype
    rules, check) from ``state`` and makes the record known by its name (``record_of``).
    Launched with single-pointer kernel arguments (at most two state components).

    Records are singletons, compared and hashed by identity (they key the launch-plan cache).
    """
    function: Optional[ReduceFunction] = None
    state: Optional[Callable] = None
    float_only: bool = False
    fold: Optional[Fold] = None
    torch_twin: Optional[Callable] = None
    derivative: Optional[Derivative] = None
    takes_initial: bool = False
    selects: bool = False
    averages: bool = False

    if TYPE_CHECKING:   # the same methods, declared for type checkers
        def __eq__(self, other: object) -> bool: ...
        def __hash__(self) -> int: ...
    else:
        __eq__ = object.__eq__
        __hash__ = object.__hash__

    @classmethod
    def of(cls, function: ReduceFunction, *, prepare: Any, merge: Any, along: Any, finish: Any,
           state: StateRule, float_only: bool = False, returns_index: bool = False,
           derivative: Optional[Derivative] = None, takes_initial: bool = False,
           selects: bool = False, averages: bool = False, fold: Fold,
           torch_twin: Callable[..., torch.Tensor]) -> "ReduceRecord":
        def torch_state(dtypes):
            return tuple(TORCH_DTYPE[d] for d, _ in state(dtypes[0], False))

        def output_dtypes(dtypes):
            # an index function's output is the call's index_dtype; int64 is its default
            return (torch.int64,) if returns_index else (dtypes[0],)

        record = cls(function.name, prepare, merge, finish,
                     identity=lambda dtypes: tuple(i for _, i in state(dtypes[0], False)),
                     state_dtypes=torch_state, output_dtypes=output_dtypes, along=along,
                     load_dtypes=lambda dtypes: torch_state(dtypes)[:1],
                     check=_floats_only(function.name) if float_only else None,
                     uses_index=returns_index, function=function, state=state,
                     float_only=float_only, fold=fold, torch_twin=torch_twin,
                     derivative=derivative, takes_initial=takes_initial, selects=selects,
                     averages=averages)
        _BY_NAME[function.name] = record
        return record

    def derivatives(self, reduce: Callable[..., Any]) -> Tuple[Optional[Callable[..., Any]],
                                                                 Optional[Callable[..., Any]]]:
        """``(backward, jvp)`` over axes, in the conventions of ``Reduction.backward`` and
        ``Reduction.jvp``, from ``derivative``; ``reduce(t, function, axes)`` is the caller's
        differentiable reduction with the rank kept (None, None: an index output)."""
        rule = self.derivative
        if rule is None:
            return None, None

        def partials(x, y, axes):
            count = math.prod(x.shape[a] for a in axes)   # a 0-d x: axes () and one element
            return rule(x, y, lambda t, function: reduce(t, function, axes), count)

        def backward(xs, outputs, grads, axes):
            (x,), (y,), (grad,) = xs, outputs, grads
            return ((partials(x, y, axes) * grad).expand(x.shape),)

        def jvp(xs, outputs, tangents, axes):
            (x,), (y,), (tangent,) = xs, outputs, tangents
            return (reduce(self.tangent_terms(partials(x, y, axes), tangent), "SUM", axes),)
        return backward, jvp

    def tangent_terms(self, partials, tangent):
        """``partials * tangent``, the terms a jvp sums over each group. A record that
        ``selects`` (MAX, MIN: the result is some of the elements) reads no tangent of an element
        it did not select, so an inf or NaN there stays out, as in torch's amax jvp."""
        terms = partials * tangent
        if self.selects:
            terms = torch.where(partials != 0, terms, torch.zeros_like(terms))
        return terms

    def kernel_state(self, dtypes: Tuple[torch.dtype, ...],
                     index_64: bool) -> Tuple[Tuple[Any, ...], Tuple[Any, ...], Tuple[Any, ...]]:
        """``(LOAD_DTYPES, STATE_DTYPES, IDENTITIES)`` for the kernels: the input converted to the
        first component's dtype."""
        components = self.state(dtypes[0], index_64)  # pyright: ignore[reportOptionalCall] (of())
        return ((components[0][0],), tuple(d for d, _ in components),
                tuple(i for _, i in components))

    def out_bytes(self, dtypes: Tuple[torch.dtype, ...]) -> int:
        """An index function's output counts as int64, the default ``index_dtype``."""
        return self.output_dtypes(dtypes)[0].itemsize


def _floats_only(name: str):
    def check(dtypes):
        if not is_float(dtypes[0]):
            raise TypeError(f"function: {name} is defined for floating-point x only (float16, "
                            f"bfloat16, float32, float64; DirectML allows floats only), but x has "
                            f"dtype {dtype_name(dtypes[0])}; convert x to a floating-point dtype "
                            "first")
    return check


# ---------------------------------------------------------------------------------------------
# State rules: ((triton dtype, identity), ...) for an input dtype
# ---------------------------------------------------------------------------------------------
def accumulated(identity: Union[int, float]) -> StateRule:
    """A running sum or product in the accumulation dtype (``core.dtypes.ACC_DTYPE``: float32 for
    half types, float64 for float32 and float64, 64-bit integers), identity 0 or 1."""
    def rule(dtype: torch.dtype, index_64: bool) -> Tuple[Tuple[Any, Any], ...]:
        return ((ACC_DTYPE[dtype], identity),)
    return rule


def compared(largest: bool, with_index: bool = False) -> StateRule:
    """The largest (or smallest) value seen, in the input's dtype, identity -inf (+inf; integers:
    the type's minimum / maximum), and with ``with_index`` its index (int32, or int64 where the
    layout needs it; identity the type's maximum, past every real index). Half types compare in
    float32 (exact): Triton's interpreter holds bfloat16 as raw uint16 bits, so bfloat16
    comparisons there would compare bit patterns."""
    def rule(dtype: torch.dtype, index_64: bool) -> Tuple[Tuple[Any, Any], ...]:
        value_dtype = tl.float32 if dtype in _HALF_DTYPES else TL_DTYPE[dtype]
        if is_float(dtype):
            identity = float("-inf") if largest else float("inf")
        else:
            info = torch.iinfo(dtype)
            identity = info.min if largest else info.max
        if not with_index:
            return ((value_dtype, identity),)
        index = (tl.int64, _INT64_MAX) if index_64 else (tl.int32, _INT32_MAX)
        return ((value_dtype, identity), index)
    return rule


def max_and_exp_sum(dtype: torch.dtype, index_64: bool) -> Tuple[Tuple[Any, Any], ...]:
    """LOG_SUM_EXP's (max m, sum of exp(x - m)) in float32 (float64 for float64 input), identity
    (-inf, 0)."""
    state_dtype = tl.float64 if dtype == torch.float64 else tl.float32
    return ((state_dtype, float("-inf")), (state_dtype, 0.0))


# ---------------------------------------------------------------------------------------------
# Derivatives: one rule per record, ``derivative(x, y, total, count) -> d y / d x``, the partial
# derivative of an element's result in the element, a tensor or number that broadcasts against
# x. ``y`` is the result broadcast against x; ``total(t, function)`` the reduction ("SUM" or
# "MULTIPLY") of t over each element's group, differentiable and broadcast against x (so a
# derivative has a derivative: double backward, jacfwd of jacrev); ``count`` each group's number
# of elements (an int, or a tensor broadcast against x). The group is the reduced axes for
# ``tritonml.reduce`` (``ReduceRecord.derivatives``) and the segment for ``segment_reduce``
# (tritonml/torch_ops/segment.py), whose callers bring ``total``: this module imports no torch op.
# For one input and one output, the gradient is ``derivative * grad`` and the jvp ``total(
# derivative * tangent, "SUM")`` (torch's prod and norm jvps are written so too).
# ---------------------------------------------------------------------------------------------
def _sum_derivative(x, y, total, count):
    return 1


def _average_derivative(x, y, total, count):
    return 1 / count


def _l1_derivative(x, y, total, count):
    return torch.sign(x)


def _sum_square_derivative(x, y, total, count):
    return 2 * x


def _l2_derivative(x, y, total, count):
    """x / ||x||, and 0 where the norm is 0 (the subgradient torch's norm uses, and its jvp's
    masked_fill)."""
    zero = torch.zeros_like(x)
    return torch.where(y == 0, zero, x / torch.where(y == 0, torch.ones_like(y), y))


def _log_sum_derivative(x, y, total, count):
    return 1 / total(x, "SUM")


def _log_sum_exp_derivative(x, y, total, count):
    """The softmax exp(x - logsumexp) for finite results; -inf (every element -inf) gives 0;
    +inf splits evenly over the +inf elements."""
    finite = torch.isfinite(y)
    shifted = torch.exp(x - torch.where(finite, y, torch.zeros_like(y)))
    at_inf = ((x == y) & (y == float("inf"))).to(x.dtype)
    return torch.where(finite, shifted, at_inf / torch.clamp(total(at_inf, "SUM"), min=1))


def _extremum_derivative(x, y, total, count):
    """Evenly over ties, as torch's amax/amin (and its jvp, the mean of the selected tangents);
    a NaN result sends it to the NaNs. No element selected (a segment's ``initial`` won): 0."""
    selected = ((x == y) | (x.isnan() & y.isnan())).to(x.dtype)
    return selected / torch.clamp(total(selected, "SUM"), min=1)


def product_of_others(x, y, total, count=None):
    """MULTIPLY's derivative, the product of the other elements of each element's group, exact in
    value with zeros and written so that its own derivative is exact too.

    With ``rest`` the product of the nonzero elements and ``z`` the sum of the zeros' own x (0,
    with derivative 1 in each zero), by the group's count of zeros:

    - none: y / x;
    - one: ``rest`` at the zero; elsewhere ``z * rest / x``, whose value is 0 but whose
      derivative in the zero is not;
    - two: at a zero, the other zero's x (``z - x``) times ``rest``; elsewhere 0;
    - three or more: 0.

    Every term is written as a product of the zeros' x where the true derivative holds them, and
    the divisions have no zero denominator (no NaN through torch.where's backward). The gradient
    and the Hessian are exact with any zeros, and derivatives of every order with at most one;
    from the third order on, a group with two or more zeros misses the terms that differentiate
    every zero away (its elsewhere-0 stands for a product of zeros).
    """
    is_zero = x == 0
    zero = torch.zeros_like(x)
    safe_x = torch.where(is_zero, torch.ones_like(x), x)
    zeros = total(is_zero.to(x.dtype), "SUM")
    rest = total(safe_x, "MULTIPLY")
    z = total(torch.where(is_zero, x, zero), "SUM")
    nonzero = torch.where(zeros == 0, y, torch.where(zeros == 1, z * rest, zero)) / safe_x
    at_zero = torch.where(zeros == 1, rest, torch.where(zeros == 2, (z - x) * rest, zero))
    return torch.where(is_zero, at_zero, nonzero)


def _single(dims):
    if len(dims) != 1:
        raise ValueError("torch's arg and product reductions take one dim")
    return dims[0]


# ---------------------------------------------------------------------------------------------
# The records
# ---------------------------------------------------------------------------------------------
_RF = ReduceFunction
# (every record's ``function`` is set: ``ReduceRecord.of``)
RECORDS: Dict[ReduceFunction, ReduceRecord] = {  # pyright: ignore[reportAssignmentType]
    record.function: record for record in (
    ReduceRecord.of(_RF.ARGMAX, prepare=_c.value_and_index, merge=_c.argmax_values,
                    along=_c.argmax_along, finish=_c.finish_index, returns_index=True,
                    state=compared(largest=True, with_index=True), fold=Fold("argument", "MAX"),
                    torch_twin=lambda x, d: x.argmax(dim=_single(d), keepdim=True)),
    ReduceRecord.of(_RF.ARGMIN, prepare=_c.value_and_index, merge=_c.argmin_values,
                    along=_c.argmin_along, finish=_c.finish_index, returns_index=True,
                    state=compared(largest=False, with_index=True), fold=Fold("argument", "MIN"),
                    torch_twin=lambda x, d: x.argmin(dim=_single(d), keepdim=True)),
    ReduceRecord.of(_RF.AVERAGE, prepare=_c.keep_value, merge=_c.add_values, along=_c.sum_along,
                    finish=_c.finish_mean, state=accumulated(0), float_only=True,
                    derivative=_average_derivative, takes_initial=True, averages=True,
                    fold=Fold("mean", empty=math.nan),
                    torch_twin=lambda x, d: x.mean(dim=d, keepdim=True)),
    ReduceRecord.of(_RF.L1, prepare=_c.abs_value, merge=_c.add_values, along=_c.sum_along,
                    finish=_c.finish_value, state=accumulated(0), derivative=_l1_derivative,
                    fold=Fold("stack", "SUM"),
                    torch_twin=lambda x, d: x.abs().sum(dim=d, keepdim=True)),
    ReduceRecord.of(_RF.L2, prepare=_c.square_value, merge=_c.add_values, along=_c.sum_along,
                    finish=_c.finish_sqrt, state=accumulated(0), float_only=True,
                    derivative=_l2_derivative, fold=Fold("stack", "L2"),
                    torch_twin=lambda x, d: torch.linalg.vector_norm(x, 2, dim=d, keepdim=True)),
    ReduceRecord.of(_RF.LOG_SUM, prepare=_c.keep_value, merge=_c.add_values, along=_c.sum_along,
                    finish=_c.finish_log, state=accumulated(0), float_only=True,
                    derivative=_log_sum_derivative,
                    fold=Fold("mean", then=torch.log, empty=-math.inf),
                    torch_twin=lambda x, d: x.sum(dim=d, keepdim=True).log()),
    ReduceRecord.of(_RF.LOG_SUM_EXP, prepare=_c.value_and_unit_sum, merge=_c.logsumexp_values,
                    along=_c.logsumexp_along, finish=_c.finish_logsumexp, state=max_and_exp_sum,
                    float_only=True, derivative=_log_sum_exp_derivative,
                    fold=Fold("stack", "LOG_SUM_EXP"),
                    torch_twin=lambda x, d: torch.logsumexp(x, dim=d, keepdim=True)),
    ReduceRecord.of(_RF.MAX, prepare=_c.keep_value, merge=_c.max_values, along=_c.max_along,
                    finish=_c.finish_value, state=compared(largest=True),
                    derivative=_extremum_derivative, takes_initial=True, selects=True,
                    fold=Fold("stack", "MAX"),
                    torch_twin=lambda x, d: x.amax(dim=d, keepdim=True)),
    ReduceRecord.of(_RF.MIN, prepare=_c.keep_value, merge=_c.min_values, along=_c.min_along,
                    finish=_c.finish_value, state=compared(largest=False),
                    derivative=_extremum_derivative, takes_initial=True, selects=True,
                    fold=Fold("stack", "MIN"),
                    torch_twin=lambda x, d: x.amin(dim=d, keepdim=True)),
    ReduceRecord.of(_RF.MULTIPLY, prepare=_c.keep_value, merge=_c.mul_values, along=_c.prod_along,
                    finish=_c.finish_value, state=accumulated(1),
                    derivative=product_of_others, takes_initial=True,
                    fold=Fold("stack", "MULTIPLY"),
                    torch_twin=lambda x, d: x.prod(dim=_single(d), keepdim=True)),
    ReduceRecord.of(_RF.SUM, prepare=_c.keep_value, merge=_c.add_values, along=_c.sum_along,
                    finish=_c.finish_value, state=accumulated(0),
                    derivative=_sum_derivative, takes_initial=True, fold=Fold("stack", "SUM"),
                    torch_twin=lambda x, d: x.sum(dim=d, keepdim=True)),
    ReduceRecord.of(_RF.SUM_SQUARE, prepare=_c.square_value, merge=_c.add_values,
                    along=_c.sum_along, finish=_c.finish_value, state=accumulated(0),
                    derivative=_sum_square_derivative, fold=Fold("stack", "SUM"),
                    torch_twin=lambda x, d: (x * x).sum(dim=d, keepdim=True)),
)}
del _RF


def record_of(function: Union[ReduceFunction, str, enum.Enum, ReduceRecord]) -> ReduceRecord:
    """The record of ``function``: a ``ReduceFunction`` or its name (``ReduceFunction.parse``),
    a record itself, or the member or name of a function added by a record of its own
    (``ReduceRecord.of``)."""
    if isinstance(function, ReduceRecord):
        return function
    try:
        return RECORDS[ReduceFunction.parse(function, "function")]
    except (TypeError, ValueError):
        name = function.upper() if isinstance(function, str) else getattr(function, "name", None)
        if name in _BY_NAME:
            return _BY_NAME[name]
        raise


__all__ = ["ReduceRecord", "Fold", "RECORDS", "record_of", "accumulated", "compared",
           "max_and_exp_sum"]
