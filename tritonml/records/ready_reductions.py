"""Ready-made user-defined reductions (``tritonml.Reduction``) for ``tritonml.reduce_with``.

``welford``: one-pass mean and variance, ``reduce_with(welford, x, axes)`` returning
``(var, mean)`` as ``torch.var_mean(x, dim=axes, keepdim=True)`` (unbiased, correction=1);
``welford_biased`` the same with correction=0 (``np.var(x)``).

The state is (n, mean, M2): elements seen, their mean, and the sum of squared deviations from it.
One element x is (1, x, 0); two states merge by the parallel update of Chan, Golub and LeVeque
("Updating formulae and a pairwise algorithm for computing sample variances", 1979):

    n = na + nb,  delta = mb - ma,  mean = ma + delta * nb / n,  M2 = M2a + M2b + delta^2 * na * nb / n

which never subtracts two large sums of squares, so data far from zero (1e4 + N(0, 1) in float32)
keeps its variance where ``E[x^2] - E[x]^2`` loses every digit. Finish: var = M2 / (n - correction),
NaN where n <= correction (no element, or one element unbiased: as torch.var_mean), and mean NaN
where n = 0. An infinite or NaN element makes the variance NaN (as torch.var and numpy.var) and
the mean torch.mean's: +-inf where infinities of one sign meet finite values, NaN where both signs
or a NaN do, whatever the order of the merges (torch.var_mean's own mean depends on where the
infinity sits; docs/semantics.md, "Moments").

Dtypes: float16 and bfloat16 accumulate in float32, float32 and float64 in float64 (as tritonml's
sums); the outputs have the input's dtype. Integer and bool inputs are refused (as torch.var_mean
does); convert them to a floating-point dtype first. n is held in the state's float dtype (exact up
to 2**24 elements per state in float32, for half inputs; beyond, its relative error is at most
2**-24).

Gradients: the closed form torch.var_mean uses (``welford_backward``, and ``welford_jvp`` for
forward mode), so var and mean are differentiable in x through ``reduce_with``.

The reductions behind torch's reduce family (tritonml.var, ..., docs/torch.md), usable with
``reduce_with`` too (no gradient there; the public functions have theirs): ``welford_m2``
((M2, mean) for any correction), ``max_with_index`` / ``min_with_index`` ((value, index) in one
pass, torch.max/min with dim), ``aminmax`` ((min, max)), ``nansum``, ``nanmean``.

The public module is ``tritonml.reductions`` (tritonml/reductions.py), with examples.
"""
from __future__ import annotations

import math
from typing import Callable, Tuple, Union

import torch
import triton
import triton.language as tl

from ..core import backend as _backend
from ..core.dtypes import ACC_TORCH_DTYPE, dtype_name
from ..kernels import combine as _combine
from ..kernels.combine import merge_along
from .reduction import Reduction

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


@triton.jit
def welford_prepare(xs, index):
    """One element x as the state (n, mean, M2) = (1, x, 0), M2 NaN for an infinite or NaN x: its
    squared deviation from the mean is inf - inf, and every merge carries the NaN on, so the
    variance is NaN whatever the order the merges meet the element in."""
    x = xs[0]
    m2 = tl.where(tl.abs(x) < float("inf"), 0.0, float("nan")).to(x.dtype)
    return tl.full(x.shape, 1, x.dtype), x, m2


@triton.jit
def welford_merge(a, b):
    """Chan, Golub and LeVeque's merge of (n, mean, M2) states. A side with n = 0 (the identity)
    returns the other side exactly, so an infinite mean does not turn into inf * 0 = NaN.

    Where either mean is infinite or NaN, the merged mean is the sum of the two: inf + x = inf,
    inf + -inf = NaN, NaN + x = NaN, the class of the mean of the union whatever the order (the
    update's inf - inf would make it NaN or not by the order the elements arrive in)."""
    na = a[0]
    nb = b[0]
    n = na + nb
    delta = b[1] - a[1]
    share = nb / tl.maximum(n, 1.0)      # nb / n; 0 / 1 when both are empty
    mean = a[1] + delta * share
    m2 = a[2] + b[2] + delta * delta * na * share
    finite = (tl.abs(a[1]) < float("inf")) & (tl.abs(b[1]) < float("inf"))
    mean = tl.where(finite, mean, a[1] + b[1])
    a_only = nb == 0
    b_only = na == 0
    mean = tl.where(a_only, a[1], tl.where(b_only, b[1], mean))
    m2 = tl.where(a_only, a[2], tl.where(b_only, b[2], m2))
    return n, mean, m2


@triton.jit
def _welford_combine(na, ma, qa, nb, mb, qb):
    """``welford_merge`` on flat components: the combine function of ``tl.reduce``."""
    return welford_merge((na, ma, qa), (nb, mb, qb))


if _backend.INTERPRET:
    @triton.jit
    def welford_along(s, merge):
        """Fold the lanes by halving (``merge_along``): each step one numpy merge of whole tiles
        (the interpreter would run ``tl.reduce``'s combine element by element in Python)."""
        return merge_along(s, merge)
else:
    @triton.jit
    def welford_along(s, merge):
        """Fold the lanes with Triton's reduction tree (shuffles in registers): the halving of
        ``merge_along`` compiles to layout conversions through local memory. Both trees are fixed
        (deterministic) but round differently, so the GPU's last bits may differ from the
        interpreter's."""
        return tl.reduce((s[0], s[1], s[2]), 0, _welford_combine)


@triton.jit
def _welford_finish(s, correction):
    n = s[0]
    nan = float("nan")
    mean = tl.where(n > 0, s[1], nan)
    # an infinite or NaN element has made M2 NaN (welford_prepare), so the variance is NaN
    var = tl.where(n > correction, s[2] / (n - correction), nan)
    return var, mean


@triton.jit
def welford_finish_unbiased(s, count):
    """(M2 / (n - 1), mean)."""
    return _welford_finish(s, 1.0)


@triton.jit
def welford_finish_biased(s, count):
    """(M2 / n, mean)."""
    return _welford_finish(s, 0.0)


def _state_dtypes(dtypes):
    """float32 accumulates in float64, as tritonml's sums do (and torch's CPU var): M2 keeps
    float32's precision for data far from zero (a mean of 1e6 and unit spread); half types
    accumulate in float32, float64 in float64."""
    acc = torch.float32 if dtypes[0] in (torch.float16, torch.bfloat16) else torch.float64
    return (acc, acc, acc)


def _output_dtypes(dtypes):
    return (dtypes[0], dtypes[0])


def _load_dtypes(dtypes):
    return (_state_dtypes(dtypes)[0],)


def _check_float(dtypes):
    if dtypes[0] not in _FLOATS:
        raise TypeError(f"xs: welford is defined for floating-point inputs (float16, bfloat16, "
                        f"float32, float64), as torch.var_mean is, but xs has dtype "
                        f"{dtype_name(dtypes[0])}; convert it to a floating-point dtype first")


def welford_backward(correction: int) -> Callable[..., Tuple[torch.Tensor]]:
    """The gradient of (var, mean) over n elements, in closed form, as torch.var_mean's:
    d var / d x = 2 (x - mean) / (n - correction), d mean / d x = 1 / n. Made of torch ops on the
    saved mean (itself an output, so double backward runs through this formula again)."""
    def backward(xs, outputs, grad_outputs, axes):
        (x,), (_, mean), (grad_var, grad_mean) = xs, outputs, grad_outputs
        n = math.prod(x.shape[a] for a in axes)
        grad = torch.zeros_like(x)
        if grad_var is not None:
            # as torch: 2 / 0 = inf where n == correction, so the gradient is NaN like the var
            scale = 2.0 / (n - correction) if n != correction else math.inf
            grad = grad + scale * grad_var * (x - mean)
        if grad_mean is not None and n:   # n = 0: x is empty, and so is its gradient
            grad = grad + grad_mean / n
        return (grad,)
    return backward


def welford_jvp(correction: int) -> Callable[..., Tuple[torch.Tensor, torch.Tensor]]:
    """The tangents of (var, mean), as torch.var_mean's: d var = 2 sum((x - mean) dx) /
    (n - correction), d mean = the mean of dx. The sums are torch's (differentiable, so a
    second-order derivative works): the records sit below the torch ops that would run them on
    tritonml's kernels."""
    def jvp(xs, outputs, tangents, axes):
        (x,), (_, mean), (tangent,) = xs, outputs, tangents
        n = math.prod(x.shape[a] for a in axes)
        scale = 2.0 / (n - correction) if n != correction else math.inf   # as the backward
        dims = tuple(axes) or None          # () for a 0-d x: its one element
        return (scale * torch.sum(tangent * (x - mean), dim=dims, keepdim=True),
                torch.mean(tangent, dim=dims, keepdim=True))
    return jvp


def _welford(name, finish, correction):
    return Reduction(name, welford_prepare, welford_merge, finish, identity=(0.0, 0.0, 0.0),
                     state_dtypes=_state_dtypes, output_dtypes=_output_dtypes, inputs=1,
                     outputs=2, along=welford_along, load_dtypes=_load_dtypes,
                     check=_check_float, backward=welford_backward(correction),
                     jvp=welford_jvp(correction))


welford: Reduction = _welford("welford", welford_finish_unbiased, 1)
"""``(var, mean)`` as ``torch.var_mean(x, dim=axes, keepdim=True)`` (unbiased, correction=1), one
pass; floating-point inputs only; differentiable (forward and reverse mode)."""
welford_biased: Reduction = _welford("welford_biased", welford_finish_biased, 0)
"""``(var, mean)`` with correction=0 (``np.var(x)``), otherwise as ``welford``."""


# ---------------------------------------------------------------------------------------------
# torch's reduce family: the reductions behind tritonml.var / std / var_mean / std_mean
# (torch_ops/moments.py), max_with_indices / min_with_indices / aminmax (torch_ops/extremes.py)
# and nansum / nanmean (torch_ops/nanreduce.py)
# ---------------------------------------------------------------------------------------------
@triton.jit
def welford_finish_m2(s, count):
    """(M2, mean) in the state's dtype: the caller divides M2 by max(n - correction, 0) for any
    correction, as torch.var does, and rounds once to the input's dtype."""
    return s[2], s[1]


welford_m2: Reduction = Reduction("welford_m2", welford_prepare, welford_merge, welford_finish_m2,
                       identity=(0.0, 0.0, 0.0), state_dtypes=_state_dtypes,
                       output_dtypes=lambda dtypes: _state_dtypes(dtypes)[:2], inputs=1,
                       outputs=2, along=welford_along, load_dtypes=_load_dtypes,
                       check=_check_float)
"""Welford's state kept to ``(M2, mean)`` in float64 (float32 for half inputs), for torch.var's
any ``correction``: the caller divides M2 by ``max(n - correction, 0)``. No gradient."""


def _compared(dtype: torch.dtype) -> torch.dtype:
    """Half types compare in float32 (exact; the interpreter holds bfloat16 as raw bits)."""
    return torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype


def losing_value(dtype: torch.dtype, largest: bool) -> Union[int, float]:
    """What every value beats: -inf (+inf) for floats, the type's minimum (maximum) for integers."""
    if dtype in _FLOATS:
        return -math.inf if largest else math.inf
    info = torch.iinfo(dtype)
    return info.min if largest else info.max


def _with_index(name: str, merge, along, largest: bool) -> Reduction:
    """(value, index) of the largest or smallest value in one pass: torch.max / torch.min with
    ``dim`` (ties: the first index; NaN: the first NaN, the rule of ``argmax_values``)."""
    return Reduction(name, _combine.value_and_index, merge, _combine.finish_pair,
                     identity=lambda dtypes: (losing_value(dtypes[0], largest), 2**63 - 1),
                     state_dtypes=lambda dtypes: (_compared(dtypes[0]), torch.int64),
                     output_dtypes=lambda dtypes: (dtypes[0], torch.int64), outputs=2,
                     along=along, uses_index=True)


max_with_index: Reduction = _with_index("max_with_index", _combine.argmax_values,
                                        _combine.argmax_along, True)
"""``(value, index)`` of the largest value in one pass, as torch.max with ``dim``: ties give the
first index, NaN the first NaN; the index is int64, row-major over the reduced axes. No
gradient."""
min_with_index: Reduction = _with_index("min_with_index", _combine.argmin_values,
                                        _combine.argmin_along, False)
"""``(value, index)`` of the smallest value, as ``max_with_index``."""

aminmax: Reduction = Reduction("aminmax", _combine.value_twice, _combine.min_max_values, _combine.finish_pair,
                    identity=lambda dtypes: (losing_value(dtypes[0], False),
                                             losing_value(dtypes[0], True)),
                    state_dtypes=lambda dtypes: (_compared(dtypes[0]),) * 2,
                    output_dtypes=lambda dtypes: (dtypes[0],) * 2, outputs=2,
                    along=_combine.min_max_along)
"""``(min, max)`` in one pass: torch.aminmax (NaN propagates to both). No gradient."""


def _sum_dtype(dtypes) -> tuple:
    """Sums accumulate as tritonml's SUM does (core/dtypes.py: float32 in float64, half types in
    float32, integers in 64 bits)."""
    return (ACC_TORCH_DTYPE[dtypes[0]],)


nansum: Reduction = Reduction("nansum", _combine.nan_to_zero, _combine.add_values, _combine.finish_value,
                   identity=(0,), state_dtypes=_sum_dtype,
                   output_dtypes=lambda dtypes: ((dtypes[0],) if dtypes[0] in _FLOATS
                                                 else (torch.int64,)),
                   along=_combine.sum_along)
"""torch.nansum: NaN counts as 0; integers give int64, as torch promotes them. No gradient."""

def _check_nanmean_float(dtypes):
    if dtypes[0] not in _FLOATS:
        raise TypeError(f"xs: nanmean is defined for floating-point inputs, as torch.nanmean is, "
                        f"but xs has dtype {dtype_name(dtypes[0])}; convert it to a "
                        f"floating-point dtype first")


nanmean: Reduction = Reduction("nanmean", _combine.nan_to_zero_and_count, _combine.add_pairs,
                    _combine.finish_ratio, identity=(0.0, 0.0),
                    state_dtypes=lambda dtypes: _sum_dtype(dtypes) * 2,
                    output_dtypes=lambda dtypes: (dtypes[0],), along=_combine.sum_pairs_along,
                    check=_check_nanmean_float)
"""torch.nanmean: the mean of the non-NaN elements, (sum, count) in one pass; NaN where none is.
Floating-point inputs only. No gradient."""

def _index_identity(dtypes) -> tuple:
    info = torch.iinfo(dtypes[0])
    return (info.max, info.min, 0)


def _check_index_dtypes(dtypes):
    if dtypes[0] not in (torch.int32, torch.int64) or dtypes[1] != dtypes[0]:
        raise TypeError(f"xs: index_facts reads two int32 or int64 tensors of one dtype, got "
                        f"{', '.join(dtype_name(d) for d in dtypes)}")


index_facts: Reduction = Reduction(
    "index_facts", _combine.neighbour_facts, _combine.min_max_count, _combine.finish_triple,
    identity=_index_identity, state_dtypes=lambda dtypes: (dtypes[0], dtypes[0], torch.int64),
    output_dtypes=lambda dtypes: (dtypes[0], dtypes[0], torch.int64), inputs=2, outputs=3,
    along=_combine.min_max_count_along, check=_check_index_dtypes)
"""An index's (min, max, descents) from the index and the index one step on
(``index.narrow(d, 0, n - 1)``, ``index.narrow(d, 1, n - 1)``): its range, and whether it is
sorted along ``d`` (no descents), in one pass over it (the second view reads what the first
brought into the cache). Int32 or int64. No gradient."""

__all__ = ["welford", "welford_biased", "welford_m2", "max_with_index", "min_with_index",
           "aminmax", "nansum", "nanmean", "index_facts"]
