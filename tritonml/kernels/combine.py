"""Combine functions shared by the scan and reduce kernels, and the shims that apply them.

Every combine function takes ``(accumulated, new)`` scalars (or tuples of them) and is associative.
Direction: the scan kernels always call ``combine(earlier_tally, later_values)`` in traversal order,
so non-commutative combines work in both directions.

Why ``add``/``mul`` are Triton's own objects: Triton's interpreter recognizes its standard combine
functions by identity and runs them through numpy (``np.cumsum``, ``np.sum``), one call per tile;
any other combine goes through ``scan_along``/``reduce_along``'s whole-tile path (log2 of the tile
length calls, tritonml/_triton_compat.py). Using Triton's objects keeps CPU runs fastest and changes
nothing on the GPU.
"""
from __future__ import annotations

from .. import _backend, _triton_compat
from .._triton_compat import reduce_along, scan_along

import triton
import triton.language as tl

# Sum: exact for integers (wraps modulo 2**bits), IEEE addition for floats (NaN propagates).
add = _triton_compat.sum_combine
# Product: exact modulo 2**bits for integers, IEEE multiplication for floats.
mul = _triton_compat.prod_combine

# The scan kernels' state form of the two (tritonml/kernels/scan.py: ``COMBINE`` takes and returns
# tuples of components); their ``SCAN_COMBINE`` stays ``add``/``mul`` themselves. Written out
# rather than calling them: every nested jit call costs the interpreter a language patch.
@triton.jit
def add_state(a, b):
    return (a[0] + b[0],)


@triton.jit
def mul_state(a, b):
    return (a[0] * b[0],)


@triton.jit
def compose_affine(earlier, later):
    """``tritonml.linear_recurrence``'s state: ``(a, b)`` is the affine map h -> a * h + b, and
    the map of ``earlier`` then ``later`` is h -> a2 * (a1 * h + b1) + b2. Identity (1, 0)."""
    return earlier[0] * later[0], later[0] * earlier[1] + later[1]


# ``scan_along(input, axis, combine_fn, reverse=False)`` and ``reduce_along(input, axis, combine_fn,
# keep_dims=False)``: ``tl.associative_scan`` and ``tl.reduce`` with ``combine_fn`` taken from a
# ``tl.constexpr`` parameter (tritonml/_triton_compat.py says why they are shims).


# ---------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------
# A reduction folds elements into a *state* ``(value, aux)`` through four functions, passed to the
# reduce kernels as ``tl.constexpr`` parameters (see tritonml/kernels/reduce.py):
#
#   prepare(x, index) -> state          one element (a tile of them) as a state
#   merge(state, state) -> state        elementwise, associative: folds a tile into running lanes
#   along(state) -> state               folds the lanes of a [N, M] state along dim 0 into [M]
#   finish(state, count) -> result      the output value (``count``: reduced elements, for AVERAGE)
#
# ``aux`` is the element index (ARGMAX/ARGMIN) or the running sum of exponentials (LOG_SUM_EXP);
# functions without one carry a constant [1, 1] placeholder through unchanged. Every fold along
# lanes uses Triton's own ``tl.sum``/``tl.max``/``tl.min``, which Triton's interpreter runs through
# numpy; those ignore NaN there (np.nanmax), so NaN is always handled explicitly, never by them, and
# the interpreter and the GPU give the same results. Product is the exception: the interpreter has
# no numpy path for a product ``tl.reduce``, so there ``prod_along`` folds by halving the tile.

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


# --- prepare ------------------------------------------------------------------------------
@triton.jit
def keep_value(x, index):
    """SUM, AVERAGE, LOG_SUM, MULTIPLY, MIN, MAX: the element itself."""
    return x, index


@triton.jit
def abs_value(x, index):
    """L1: |x| (integers: two's complement, so |min| wraps to min, as in C and numpy)."""
    return tl.abs(x), index


@triton.jit
def square_value(x, index):
    """SUM_SQUARE, L2: x * x."""
    return x * x, index


@triton.jit
def value_and_index(x, index):
    """ARGMAX, ARGMIN: the element and its row-major index over the reduced axes."""
    return x, index


@triton.jit
def value_and_unit_sum(x, index):
    """LOG_SUM_EXP: the state (max m, sum of exp(x - m)) of one element is (x, 1)."""
    return x, tl.full(x.shape, 1, x.dtype)


# --- merge (elementwise, associative) ------------------------------------------------------
@triton.jit
def add_values(v, a, w, b):
    """Sum. Floats: IEEE addition (NaN propagates, inf - inf is NaN). Integers: modulo 2**64 in the
    64-bit accumulator, which the truncating store turns into modulo 2**bits."""
    return v + w, a


@triton.jit
def mul_values(v, a, w, b):
    """Product. Floats: IEEE multiplication (NaN propagates, 0 * inf is NaN). Integers: as add."""
    return v * w, a


@triton.jit
def max_values(v, a, w, b):
    """Maximum; NaN propagates (a NaN on either side gives NaN). -0.0 and +0.0 compare equal, so
    which of them a tie returns is unspecified."""
    return tl.where((w > v) | (w != w), w, v), a


@triton.jit
def min_values(v, a, w, b):
    """Minimum; NaN propagates (a NaN on either side gives NaN). Zeros as ``max_values``."""
    return tl.where((w < v) | (w != w), w, v), a


@triton.jit
def argmax_values(v, a, w, b):
    """(value, index) of the larger value. Ties: the smaller index (first occurrence). NaN is larger
    than every number; between NaNs the smaller index wins (the first NaN, as torch.argmax)."""
    v_nan = v != v
    w_nan = w != w
    take = (w > v) | ((w == v) & (b < a)) | (w_nan & (~v_nan | (b < a)))
    return tl.where(take, w, v), tl.where(take, b, a)


@triton.jit
def argmin_values(v, a, w, b):
    """(value, index) of the smaller value. Ties and NaN as ``argmax_values``: NaN wins, first
    index among equals."""
    v_nan = v != v
    w_nan = w != w
    take = (w < v) | ((w == v) & (b < a)) | (w_nan & (~v_nan | (b < a)))
    return tl.where(take, w, v), tl.where(take, b, a)


@triton.jit
def _exp_shift(m):
    """The shift that keeps exp(x - shift) finite: the running max, or 0 where that max is -inf
    (nothing but -inf seen: every term is exp(-inf) = 0) or +inf (the result is +inf anyway)."""
    return tl.where((m == _INF) | (m == -_INF), 0.0, m).to(m.dtype)


@triton.jit
def logsumexp_values(m, s, n, t):
    """States (m, s) stand for log(s) + m: m the largest element seen, s the sum of exp(x - m).
    Merging rescales both sums to the larger max. -inf elements add 0; +inf makes the result +inf;
    NaN reaches s and stays (NaN never enters m, whose comparisons skip it)."""
    top = tl.where(n > m, n, m)
    shift = _exp_shift(top)
    return top, s * tl.exp(m - shift) + t * tl.exp(n - shift)


# --- along (fold the lanes of dim 0) --------------------------------------------------------
@triton.jit
def sum_along(v, a):
    return tl.sum(v, 0), a


if _backend.INTERPRET:
    @triton.jit
    def prod_along(v, a):
        """Product by halving dim 0 (a power of two): row i times row i + half, repeated; each step
        is one numpy multiply (``tl.reduce`` with a product runs element by element here)."""
        acc = v
        for _ in tl.static_range(24):
            if acc.shape[0] > 1:
                pairs = tl.permute(tl.reshape(acc, [2, acc.shape[0] // 2, acc.shape[1]]), (1, 2, 0))
                lo, hi = tl.split(pairs)
                acc = lo * hi
        return tl.reshape(acc, [acc.shape[1]]), a
else:
    @triton.jit
    def prod_along(v, a):
        """Product: Triton's reduction tree (shuffles). The halving tree above compiles to layout
        conversions through shared and local memory, so the GPU uses the native fold; both are
        log-depth trees, exact for integers, and may round floats differently (each deterministic)."""
        return tl.reduce(v, 0, mul), a


@triton.jit
def max_along(v, a):
    """Maximum; NaN if any lane is NaN."""
    is_nan = v != v
    if v.dtype.is_floating():
        top = tl.max(tl.where(is_nan, -_INF, v), 0)
        return tl.where(tl.max(is_nan.to(tl.int32), 0) > 0, _NAN, top), a
    else:
        return tl.max(v, 0), a


@triton.jit
def min_along(v, a):
    """Minimum; NaN if any lane is NaN."""
    is_nan = v != v
    if v.dtype.is_floating():
        low = tl.min(tl.where(is_nan, _INF, v), 0)
        return tl.where(tl.max(is_nan.to(tl.int32), 0) > 0, _NAN, low), a
    else:
        return tl.min(v, 0), a


@triton.jit
def argmax_along(v, a):
    """(value, index) with the rule of ``argmax_values``: the first NaN if any, else the first
    occurrence of the maximum."""
    is_nan = v != v
    if v.dtype.is_floating():
        any_nan = tl.max(is_nan.to(tl.int32), 0, keep_dims=True) > 0
        top = tl.max(tl.where(is_nan, -_INF, v), 0, keep_dims=True)
        candidates = tl.where(any_nan, is_nan, v == top)
        value = tl.where(any_nan, _NAN, top)
    else:
        value = tl.max(v, 0, keep_dims=True)
        candidates = v == value
    return tl.reshape(value, [v.shape[1]]), _first_index_of(candidates, a)


# A deliberate mirror of ``argmax_along``: folding into one function would need a constexpr
# direction flag threaded through every reduce kernel for two lines that differ (max/min, -inf/inf).
@triton.jit
def argmin_along(v, a):
    """(value, index) with the rule of ``argmin_values``."""
    is_nan = v != v
    if v.dtype.is_floating():
        any_nan = tl.max(is_nan.to(tl.int32), 0, keep_dims=True) > 0
        low = tl.min(tl.where(is_nan, _INF, v), 0, keep_dims=True)
        candidates = tl.where(any_nan, is_nan, v == low)
        value = tl.where(any_nan, _NAN, low)
    else:
        value = tl.min(v, 0, keep_dims=True)
        candidates = v == value
    return tl.reshape(value, [v.shape[1]]), _first_index_of(candidates, a)


@triton.jit
def logsumexp_along(m, s):
    """Fold (m, s) states: the largest m, and every s rescaled to it (see ``logsumexp_values``)."""
    top = tl.max(m, 0, keep_dims=True)  # m is never NaN
    shift = _exp_shift(top)
    total = tl.sum(s * tl.exp(m - shift), 0)
    return tl.reshape(top, [m.shape[1]]), total


# --- finish --------------------------------------------------------------------------------
@triton.jit
def finish_value(v, a, count):
    """SUM, SUM_SQUARE, L1, MULTIPLY, MIN, MAX."""
    return v


@triton.jit
def finish_mean(v, a, count):
    """AVERAGE: sum / N; N = 0 gives 0 / 0 = NaN."""
    return v / count


@triton.jit
def finish_sqrt(v, a, count):
    """L2: sqrt of the sum of squares, correctly rounded."""
    if v.dtype == tl.float32:
        return tl.sqrt_rn(v)
    else:
        return tl.sqrt(v)


@triton.jit
def finish_log(v, a, count):
    """LOG_SUM: log of the sum (log 0 = -inf, log of a negative sum = NaN)."""
    return tl.log(v)


@triton.jit
def finish_logsumexp(m, s, count):
    """LOG_SUM_EXP: log(s) + m; all -inf (or no element) gives log(0) = -inf."""
    return tl.log(s) + _exp_shift(m)


@triton.jit
def finish_index(v, a, count):
    """ARGMAX, ARGMIN: the index."""
    return a
