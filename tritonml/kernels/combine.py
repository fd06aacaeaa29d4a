"""Combine functions shared by the scan and reduce kernels, and the shims that apply them.

Every combine function takes ``(accumulated, new)`` scalars (or tuples of them) and is associative.
Direction: the scan kernels always call ``combine(earlier_tally, later_values)`` in traversal order,
so non-commutative combines work in both directions.

Why ``add``/``mul`` are Triton's own objects: Triton's interpreter recognizes its standard combine
functions by identity and runs them through numpy (``np.cumsum``, ``np.sum``); any other combine is
applied element by element in Python, tens of microseconds per element. Using Triton's objects keeps
CPU runs fast and changes nothing on the GPU.
"""
from __future__ import annotations

from .. import _backend

import triton
import triton.language as tl

# Sum: exact for integers (wraps modulo 2**bits), IEEE addition for floats (NaN propagates).
add = tl.standard._sum_combine
# Product: exact modulo 2**bits for integers, IEEE multiplication for floats.
mul = tl.standard._prod_combine


if _backend.INTERPRET:
    # The interpreter calls tl.associative_scan / tl.reduce with plain Python values and patches them
    # while a kernel runs, so the shims are ordinary functions that look the builtins up at call time.
    def scan_along(input, axis, combine_fn, reverse=False):
        """``tl.associative_scan`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        return tl.associative_scan(input, axis, combine_fn, reverse=reverse)

    def reduce_along(input, axis, combine_fn, keep_dims=False):
        """``tl.reduce`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        return tl.reduce(input, axis, combine_fn, keep_dims=keep_dims)
else:
    # Compiled Triton wraps a function passed as a constexpr argument in ``tl.constexpr``, which
    # ``tl.associative_scan``/``tl.reduce`` do not unwrap; a builtin receives the wrapper and can.
    @tl.core.builtin
    def scan_along(input, axis, combine_fn, reverse=False, _semantic=None, _generator=None):
        """``tl.associative_scan`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        return tl.core.associative_scan(input, axis, tl.core._unwrap_if_constexpr(combine_fn),
                                        reverse, _semantic=_semantic, _generator=_generator)

    @tl.core.builtin
    def reduce_along(input, axis, combine_fn, keep_dims=False, _semantic=None, _generator=None):
        """``tl.reduce`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        return tl.core.reduce(input, axis, tl.core._unwrap_if_constexpr(combine_fn),
                              keep_dims=keep_dims, _semantic=_semantic, _generator=_generator)
