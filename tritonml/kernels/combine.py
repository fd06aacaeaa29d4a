"""Combine functions shared by the scan and reduce kernels, and the shims that apply them.

Every combine function takes ``(accumulated, new)`` scalars (or tuples of them) and is associative.
Direction: the scan kernels always call ``combine(earlier_tally, later_values)`` in traversal order,
so non-commutative combines work in both directions.

Why ``add``/``mul`` are Triton's own objects: Triton's interpreter recognizes its standard combine
functions by identity and runs them through numpy (``np.cumsum``, ``np.sum``), one call per tile;
any other combine goes through ``scan_along``/``reduce_along``'s whole-tile path (log2 of the tile
length calls, tritonml/core/triton_compat/scan_reduce.py). Using Triton's objects keeps CPU runs
fastest and changes nothing on the GPU.
"""
from __future__ import annotations

# pyright: reportGeneralTypeIssues=false, reportArgumentType=false, reportOperatorIssue=false
# (``@triton.jit`` code: triton.language's signatures do not describe what its compiler accepts,
# e.g. ``len`` of a constexpr tuple; parameters stay unannotated, an annotation specializes.)

from ..core import backend as _backend, triton_compat as _triton_compat
from ..core.triton_compat import reduce_along, scan_along

import triton
import triton.language as tl

__all__ = ["merge_along"]

# Sum: exact for integers (wraps modulo 2**bits), IEEE addition for floats (NaN propagates).
add = _triton_compat.sum_combine
# Product: exact modulo 2**bits for integers, IEEE multiplication for floats.
mul = _triton_compat.prod_combine

@triton.jit
def compose_affine(earlier, later):
    """``tritonml.linear_recurrence``'s state: ``(a, b)`` is the affine map h -> a * h + b, and
    the map of ``earlier`` then ``later`` is h -> a2 * (a1 * h + b1) + b2. Identity (1, 0)."""
    return earlier[0] * later[0], later[0] * earlier[1] + later[1]


# ``scan_along(input, axis, combine_fn, reverse=False)`` and ``reduce_along(input, axis, combine_fn,
# keep_dims=False)``: ``tl.associative_scan`` and ``tl.reduce`` with ``combine_fn`` taken from a
# ``tl.constexpr`` parameter (tritonml/core/triton_compat/scan_reduce.py says why they are shims).


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------
# A reduction folds elements into a *state*, a tuple of any number of components (each a tensor of
# its own dtype), through four functions passed to the reduce kernels as ``tl.constexpr``
# parameters (see tritonml/kernels/reduce.py):
#
#   prepare(xs, index) -> state         a tile of elements as states; ``xs`` is a tuple with one
#                                       tile per input tensor, ``index`` the elements' row-major
#                                       position over the reduced axes
#   merge(state, state) -> state        elementwise, associative: folds a tile into running lanes
#   along(state, merge) -> state        folds the lanes of [N, M] components along dim 0 into [M]
#   finish(state, count) -> outputs     a tuple of output values (``count``: reduced elements)
#
# Lanes the tile does not cover (past the end of the reduced range or of the kept dim) hold the
# state's identity, one value per component, set by the kernel after ``prepare``.
#
# DirectML's states: (value,), (value, index) for ARGMAX/ARGMIN, (max, sum of exponentials) for
# LOG_SUM_EXP. Their folds along lanes use ``tl.sum``/``tl.max``/``tl.min``, which the interpreter
# runs through numpy, ignoring NaN (np.nanmax): NaN is handled explicitly, so the interpreter and
# the GPU agree. ``prod_along`` folds by halving the tile (the interpreter has no numpy product
# ``tl.reduce``), as ``merge_along`` folds any state with its own ``merge`` (tritonml.Reduction).

_INF = tl.constexpr(float("inf"))
_NAN = tl.constexpr(float("nan"))


@triton.jit
def _first_index_of(candidates, index):
    """Smallest ``index`` where ``candidates`` holds, along dim 0 (the first occurrence)."""
    if index.dtype == tl.int64:
        none = tl.full(index.shape, 9223372036854775807, tl.int64)
    else:
        none = tl.full(index.shape, 2147483647, tl.int32)
    return tl.min(tl.where(candidates, index, none), 0)


# --- state helpers (any number of components) -----------------------------------------------
@triton.jit
def full_state(shape, IDENTITIES: tl.constexpr, DTYPES: tl.constexpr):
    """A state whose component i is ``IDENTITIES[i]`` of ``DTYPES[i]`` everywhere in ``shape``."""
    state = ()
    for i in tl.static_range(len(DTYPES)):
        state = state + (tl.full(shape, IDENTITIES[i], DTYPES[i]),)
    return state


@triton.jit
def where_state(mask, state, IDENTITIES: tl.constexpr, DTYPES: tl.constexpr):
    """``state`` where ``mask`` holds, the identity elsewhere, component by component (each
    component converted to its declared dtype)."""
    kept = ()
    for i in tl.static_range(len(DTYPES)):
        kept = kept + (tl.where(mask, state[i].to(DTYPES[i]),
                                tl.full([1, 1], IDENTITIES[i], DTYPES[i])),)
    return kept


@triton.jit
def cast_state(state, DTYPES: tl.constexpr):
    """``state`` with component i converted to ``DTYPES[i]`` (a merge may compute in a wider type;
    the running state keeps its declared one)."""
    cast = ()
    for i in tl.static_range(len(DTYPES)):
        cast = cast + (state[i].to(DTYPES[i]),)
    return cast


@triton.jit
def _as_bits(x):
    """``x``'s bits as the signed integer type of its width (bool as int8)."""
    width: tl.constexpr = x.dtype.primitive_bitwidth
    if width == 64:
        bits = x.to(tl.int64, bitcast=True)
    elif width == 32:
        bits = x.to(tl.int32, bitcast=True)
    elif width == 16:
        bits = x.to(tl.int16, bitcast=True)
    elif width == 8:
        bits = x.to(tl.int8, bitcast=True)
    else:
        bits = x.to(tl.int8)
    return bits


# Which way ``row_of`` takes a row (tritonml/core/triton_compat/versions.py, FAST_ROW_GATHER).
_GATHER_ROW = tl.constexpr(_triton_compat.FAST_ROW_GATHER)


@triton.jit
def row_of(state, row):
    """Row ``row`` (an int, or a [1, n] tensor: one row per column) of every [m, n] component of
    ``state``, as [1, n] components, bit for bit. With a Triton whose ``tl.gather`` along rows is
    cheap (3.8 and later), a gather; with an older one (3.6, the H100 machines' version), the
    component's bits, zero off the row, summed down the columns (a sum of one value and zeros,
    exact in any integer type): a few shuffles where 3.6's gather of a 4,096-row tile is 32,768
    and minutes of ptxas. On 3.9 the sum would cost the chunked column scans a spilled register
    inside their loops and the look-back rows a load in flight (compiled for sm_80/sm_90), so
    each version keeps the form it compiles best."""
    picked = ()
    for c in tl.static_range(len(state)):
        component = state[c]
        rows = tl.full([1, component.shape[1]], 0, tl.int32) + row
        if _GATHER_ROW:
            value = tl.gather(component, rows, 0)
        else:
            on_row = tl.arange(0, component.shape[0])[:, None] == rows
            bits = _as_bits(component)
            summed = tl.sum(tl.where(on_row, bits, 0), axis=0, keep_dims=True).to(bits.dtype)
            if component.dtype.primitive_bitwidth == 1:
                value = summed != 0
            else:
                value = summed.to(component.dtype, bitcast=True)
        picked = picked + (value,)
    return picked


@triton.jit
def merge_along(state, merge):
    """Fold dim 0 (a power of two) of every component with ``merge``: row i with row i + half,
    repeated, a fixed log-depth tree (the same on the interpreter and the GPU, each step one
    elementwise ``merge`` of whole tiles).

    A ``@triton.jit`` helper, called from inside a ``@triton.jit`` function: the default
    ``along`` of a ``tritonml.Reduction``, and what a user's ``along`` may call (docs/dsl.md).

    Types are given here, not as annotations: Triton reads a parameter's annotation as a
    specialization.

    Args:
        state (tuple[tl.tensor, ...]): A tuple of 2-D tiles (components), each ``[N, M]`` with
            ``N`` a power of two (at most 2**24).
        merge (triton.JITFunction): The reduction's ``merge(a, b) -> state``, a ``@triton.jit``
            function applied elementwise to whole tiles.

    Returns:
        folded (tuple[tl.tensor, ...]): A tuple of 1-D tiles ``[M]``, each column folded.

    Example:
        A reduction whose ``along`` is ``merge_along`` itself (the default when ``along`` is
        left out):

        >>> import torch, tritonml, triton, triton.language as tl
        >>> from tritonml.kernels.combine import merge_along
        >>> @triton.jit
        ... def keep(xs, index):
        ...     return (xs[0],)
        >>> @triton.jit
        ... def larger(a, b):
        ...     return (tl.maximum(a[0], b[0]),)
        >>> @triton.jit
        ... def fold_rows(state, merge):
        ...     return merge_along(state, merge)
        >>> @triton.jit
        ... def finish(state, count):
        ...     return (state[0],)
        >>> largest = tritonml.Reduction("largest", keep, larger, finish, identity=(-2**31,),
        ...                              state_dtypes=lambda dtypes: (torch.int32,),
        ...                              output_dtypes=lambda dtypes: (torch.int32,),
        ...                              along=fold_rows)
        >>> x = torch.tensor([[3, 9, 2], [7, 1, 8]], dtype=torch.int32)
        >>> tritonml.reduce_with(largest, x, axes=1)
        tensor([[9],
                [8]], dtype=torch.int32)
    """
    acc = state
    for _ in tl.static_range(24):
        if acc[0].shape[0] > 1:
            lo = ()
            hi = ()
            for i in tl.static_range(len(acc)):
                pairs = tl.permute(tl.reshape(acc[i], [2, acc[i].shape[0] // 2, acc[i].shape[1]]),
                                   (1, 2, 0))
                low, high = tl.split(pairs)
                lo = lo + (low,)
                hi = hi + (high,)
            acc = merge(lo, hi)
    folded = ()
    for i in tl.static_range(len(acc)):
        folded = folded + (tl.reshape(acc[i], [acc[i].shape[1]]),)
    return folded


# --- prepare ------------------------------------------------------------------------------
@triton.jit
def keep_value(xs, index):
    """SUM, AVERAGE, LOG_SUM, MULTIPLY, MIN, MAX: the element itself."""
    return (xs[0],)


@triton.jit
def keep_inputs(xs, index):
    """Scans (tritonml/kernels/segment.py): the state is the inputs themselves."""
    return xs


@triton.jit
def abs_value(xs, index):
    """L1: |x| (integers: two's complement, so |min| wraps to min, as in C and numpy)."""
    return (tl.abs(xs[0]),)


@triton.jit
def square_value(xs, index):
    """SUM_SQUARE, L2: x * x."""
    return (xs[0] * xs[0],)


@triton.jit
def value_and_index(xs, index):
    """ARGMAX, ARGMIN: the element and its row-major index over the reduced axes."""
    return xs[0], index


@triton.jit
def value_and_unit_sum(xs, index):
    """LOG_SUM_EXP: the state (max m, sum of exp(x - m)) of one element is (x, 1)."""
    return xs[0], tl.full(xs[0].shape, 1, xs[0].dtype)


# --- merge (elementwise, associative) ------------------------------------------------------
# add_values and mul_values are also the scan kernels' state form of ``add``/``mul``
# (tritonml/kernels/scan.py: ``COMBINE`` takes and returns tuples of components), written out
# rather than calling them: every nested jit call costs the interpreter a language patch.
@triton.jit
def add_values(s, t):
    """Sum. Floats: IEEE addition (NaN propagates, inf - inf is NaN). Integers: modulo 2**64 in the
    64-bit accumulator, which the truncating store turns into modulo 2**bits."""
    return (s[0] + t[0],)


@triton.jit
def mul_values(s, t):
    """Product. Floats: IEEE multiplication (NaN propagates, 0 * inf is NaN). Integers: as add."""
    return (s[0] * t[0],)


@triton.jit
def max_values(s, t):
    """Maximum; NaN propagates (a NaN on either side gives NaN). -0.0 and +0.0 compare equal, so
    which of them a tie returns is unspecified."""
    v = s[0]
    w = t[0]
    return (tl.where((w > v) | (w != w), w, v),)


@triton.jit
def min_values(s, t):
    """Minimum; NaN propagates (a NaN on either side gives NaN). Zeros as ``max_values``."""
    v = s[0]
    w = t[0]
    return (tl.where((w < v) | (w != w), w, v),)


@triton.jit
def _arg_merge(s, t, LARGEST: tl.constexpr):
    """(value, index) of the larger (``LARGEST``) or smaller value; ties: the smaller index; a NaN
    beats every number, and between NaNs the smaller index wins. Inlined into each caller with its
    direction fixed, so each compiles as if written out."""
    v = s[0]
    a = s[1]
    w = t[0]
    b = t[1]
    v_nan = v != v
    w_nan = w != w
    if LARGEST:
        better = w > v
    else:
        better = w < v
    take = better | ((w == v) & (b < a)) | (w_nan & (~v_nan | (b < a)))
    return tl.where(take, w, v), tl.where(take, b, a)


@triton.jit
def argmax_values(s, t):
    """(value, index) of the larger value. Ties: the smaller index (first occurrence). NaN is larger
    than every number; between NaNs the smaller index wins (the first NaN, as torch.argmax)."""
    return _arg_merge(s, t, True)


@triton.jit
def argmin_values(s, t):
    """(value, index) of the smaller value. Ties and NaN as ``argmax_values``: NaN wins, first
    index among equals."""
    return _arg_merge(s, t, False)


@triton.jit
def _exp_shift(m):
    """The shift that keeps exp(x - shift) finite: the running max, or 0 where that max is -inf
    (nothing but -inf seen: every term is exp(-inf) = 0) or +inf (the result is +inf anyway)."""
    return tl.where((m == _INF) | (m == -_INF), 0.0, m).to(m.dtype)


@triton.jit
def logsumexp_values(s, t):
    """States (m, s) stand for log(s) + m: m the largest element seen, s the sum of exp(x - m).
    Merging rescales both sums to the larger max. -inf elements add 0; +inf makes the result +inf;
    NaN reaches s and stays (NaN never enters m, whose comparisons skip it)."""
    m = s[0]
    n = t[0]
    top = tl.where(n > m, n, m)
    shift = _exp_shift(top)
    return top, s[1] * tl.exp(m - shift) + t[1] * tl.exp(n - shift)


# --- along (fold the lanes of dim 0; ``merge`` is the reduction's own, unused by these) ------
@triton.jit
def sum_along(s, merge):
    return (tl.sum(s[0], 0),)


if _backend.INTERPRET:
    @triton.jit
    def prod_along(s, merge):
        """Product by halving dim 0 (a power of two): row i times row i + half, repeated; each step
        is one numpy multiply (``tl.reduce`` with a product runs element by element here)."""
        return merge_along(s, merge)
else:
    @triton.jit
    def prod_along(s, merge):
        """Product: Triton's reduction tree (shuffles). The halving tree of ``merge_along``
        compiles to layout conversions through shared and local memory, so the GPU uses the native
        fold; both are log-depth trees, exact for integers, and may round floats differently (each
        deterministic)."""
        return (tl.reduce(s[0], 0, mul),)


@triton.jit
def max_along(s, merge):
    """Maximum; NaN if any lane is NaN."""
    v = s[0]
    is_nan = v != v
    if v.dtype.is_floating():
        top = tl.max(tl.where(is_nan, -_INF, v), 0)
        return (tl.where(tl.max(is_nan.to(tl.int32), 0) > 0, _NAN, top),)
    else:
        return (tl.max(v, 0),)


@triton.jit
def min_along(s, merge):
    """Minimum; NaN if any lane is NaN."""
    v = s[0]
    is_nan = v != v
    if v.dtype.is_floating():
        low = tl.min(tl.where(is_nan, _INF, v), 0)
        return (tl.where(tl.max(is_nan.to(tl.int32), 0) > 0, _NAN, low),)
    else:
        return (tl.min(v, 0),)


@triton.jit
def _arg_along(s, LARGEST: tl.constexpr):
    """(value, index) of the first occurrence of the maximum (``LARGEST``) or minimum along dim 0,
    or of the first NaN if any lane is NaN (the rule of ``argmax_values`` / ``argmin_values``).
    Inlined into each caller with its direction fixed, so each compiles as if written out."""
    v = s[0]
    is_nan = v != v
    if v.dtype.is_floating():
        any_nan = tl.max(is_nan.to(tl.int32), 0, keep_dims=True) > 0
        if LARGEST:
            best = tl.max(tl.where(is_nan, -_INF, v), 0, keep_dims=True)
        else:
            best = tl.min(tl.where(is_nan, _INF, v), 0, keep_dims=True)
        candidates = tl.where(any_nan, is_nan, v == best)
        value = tl.where(any_nan, _NAN, best)
    else:
        if LARGEST:
            value = tl.max(v, 0, keep_dims=True)
        else:
            value = tl.min(v, 0, keep_dims=True)
        candidates = v == value
    return tl.reshape(value, [v.shape[1]]), _first_index_of(candidates, s[1])


@triton.jit
def argmax_along(s, merge):
    """(value, index) with the rule of ``argmax_values``: the first NaN if any, else the first
    occurrence of the maximum."""
    return _arg_along(s, True)


@triton.jit
def argmin_along(s, merge):
    """(value, index) with the rule of ``argmin_values``."""
    return _arg_along(s, False)


@triton.jit
def logsumexp_along(s, merge):
    """Fold (m, s) states: the largest m, and every s rescaled to it (see ``logsumexp_values``)."""
    m = s[0]
    top = tl.max(m, 0, keep_dims=True)  # m is never NaN
    shift = _exp_shift(top)
    total = tl.sum(s[1] * tl.exp(m - shift), 0)
    return tl.reshape(top, [m.shape[1]]), total


# --- finish --------------------------------------------------------------------------------
@triton.jit
def finish_value(s, count):
    """SUM, SUM_SQUARE, L1, MULTIPLY, MIN, MAX."""
    return (s[0],)


@triton.jit
def finish_mean(s, count):
    """AVERAGE: sum / N; N = 0 gives 0 / 0 = NaN."""
    return (s[0] / count,)


@triton.jit
def finish_sqrt(s, count):
    """L2: sqrt of the sum of squares, correctly rounded."""
    v = s[0]
    if v.dtype == tl.float32:
        return (tl.sqrt_rn(v),)
    else:
        return (tl.sqrt(v),)


@triton.jit
def finish_log(s, count):
    """LOG_SUM: log of the sum (log 0 = -inf, log of a negative sum = NaN)."""
    return (tl.log(s[0]),)


@triton.jit
def finish_logsumexp(s, count):
    """LOG_SUM_EXP: log(s) + m; all -inf (or no element) gives log(0) = -inf."""
    return (tl.log(s[1]) + _exp_shift(s[0]),)


@triton.jit
def finish_index(s, count):
    """ARGMAX, ARGMIN: the index."""
    return (s[1],)


# ---------------------------------------------------------------------------------------------
# torch's scan and reduce family (tritonml/torch_ops/cumextreme.py, extremes.py, nanreduce.py,
# moments.py; docs/torch.md)
# ---------------------------------------------------------------------------------------------
@triton.jit
def _later_extreme(earlier, later, LARGEST: tl.constexpr):
    """torch.cummax / cummin's (value, index) state: the larger (``LARGEST``) or smaller value,
    ties to the larger index, NaN above every number and between NaNs the larger index: torch's
    CPU rule (aten/src/ATen/native/ReduceOps.cpp, cummax_cummin_helper: take x[i] when it is NaN,
    or when the running value is not NaN and x[i] >= it). That is ``_arg_merge`` (ties and NaNs
    to the smaller index) on negated indices. A max over a total order, so associative and
    commutative; the identity (-inf or the type's minimum for cummax, index -1) loses every
    comparison and every tie."""
    value, negated = _arg_merge((earlier[0], -earlier[1]), (later[0], -later[1]), LARGEST)
    return value, -negated


@triton.jit
def cummax_pairs(earlier, later):
    """torch.cummax's combine on (value, index) states (``_later_extreme``)."""
    return _later_extreme(earlier, later, True)


@triton.jit
def cummin_pairs(earlier, later):
    """torch.cummin's combine on (value, index) states (``_later_extreme``)."""
    return _later_extreme(earlier, later, False)


@triton.jit
def log_add_exp(x, y):
    """log(exp(x) + exp(y)), torch.logcumsumexp's combine as torch's CPU kernel computes it
    (ReduceOps.cpp, log_add_exp_helper): max + log1p(exp(min - max)), except that two equal
    infinities give themselves (-inf is the identity, +inf absorbs); NaN propagates. log1p by
    Goldberg's exact rewrite log(w) * u / (w - 1), w = 1 + u (no libdevice call, so the
    interpreter and the GPU run the same arithmetic)."""
    y_nan = y != y
    lo = tl.where(y_nan, y, tl.where(y < x, y, x))
    hi = tl.where(y_nan, y, tl.where(x < y, y, x))
    u = tl.exp(lo - hi)
    w = 1.0 + u
    log1p = tl.where(w == 1.0, u, tl.log(w) * (u / (w - 1.0)))
    same_infinity = (lo == hi) & (tl.abs(lo) == _INF)
    return tl.where(same_infinity, x, hi + log1p)


@triton.jit
def finish_pair(s, count):
    """A two-component state as two outputs: (value, index) of torch.max/min with dim, (min, max)
    of torch.aminmax."""
    return s[0], s[1]


@triton.jit
def value_twice(xs, index):
    """torch.aminmax: one element is both the smallest and the largest seen."""
    return xs[0], xs[0]


@triton.jit
def min_max_values(s, t):
    """(min, max), each as ``min_values`` / ``max_values``: NaN propagates."""
    v = s[0]
    w = t[0]
    p = s[1]
    q = t[1]
    return tl.where((w < v) | (w != w), w, v), tl.where((q > p) | (q != q), q, p)


@triton.jit
def min_max_along(s, merge):
    """Fold (min, max) lanes, NaN if any lane is NaN, as ``min_along`` and ``max_along`` do. Not
    by calling them: compiled Triton refuses a nested call to a function whose global (``_NAN``)
    compares unequal to itself."""
    low = s[0]
    high = s[1]
    if low.dtype.is_floating():
        low_nan = tl.max((low != low).to(tl.int32), 0) > 0
        high_nan = tl.max((high != high).to(tl.int32), 0) > 0
        low = tl.min(tl.where(low != low, float("inf"), low), 0)
        high = tl.max(tl.where(high != high, -float("inf"), high), 0)
        return tl.where(low_nan, float("nan"), low), tl.where(high_nan, float("nan"), high)
    else:
        return tl.min(low, 0), tl.max(high, 0)


@triton.jit
def nan_to_zero(xs, index):
    """torch.nansum: NaN counts as 0 (integers have none)."""
    x = xs[0]
    return (tl.where(x != x, tl.zeros_like(x), x),)


@triton.jit
def nan_to_zero_and_count(xs, index):
    """torch.nanmean's state (sum, count) of one element: (x, 1), or (0, 0) for NaN."""
    x = xs[0]
    is_nan = x != x
    return tl.where(is_nan, tl.zeros_like(x), x), tl.where(is_nan, 0.0, 1.0).to(x.dtype)


@triton.jit
def add_pairs(s, t):
    """Two running sums (nanmean's sum and count)."""
    return s[0] + t[0], s[1] + t[1]


@triton.jit
def sum_pairs_along(s, merge):
    return tl.sum(s[0], 0), tl.sum(s[1], 0)


@triton.jit
def finish_ratio(s, count):
    """torch.nanmean: sum / count of the non-NaN elements (0 / 0 = NaN where every one is NaN)."""
    return (s[0] / s[1],)


@triton.jit
def neighbour_facts(xs, index):
    """An index's checks in one pass, from each element and the next: (the smaller, the larger,
    1 where the next is smaller)."""
    here = xs[0]
    after = xs[1]
    return tl.minimum(here, after), tl.maximum(here, after), (after < here).to(tl.int64)


@triton.jit
def min_max_count(s, t):
    """(min, max, count of descents) of integers."""
    return tl.minimum(s[0], t[0]), tl.maximum(s[1], t[1]), s[2] + t[2]


@triton.jit
def min_max_count_along(s, merge):
    """Fold (min, max, count) lanes."""
    return tl.min(s[0], 0), tl.max(s[1], 0), tl.sum(s[2], 0)


@triton.jit
def finish_triple(s, count):
    """A three-component state as three outputs."""
    return s[0], s[1], s[2]
