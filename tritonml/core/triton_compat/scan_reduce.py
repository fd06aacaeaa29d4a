"""``scan_along``/``reduce_along``: ``tl.associative_scan``/``tl.reduce`` with a combine function
passed as a ``tl.constexpr`` parameter (tritonml/kernels/combine.py).

In compiled mode they are Triton builtins, which unwrap the constexpr that Triton's own do not. In
the interpreter they are ordinary functions that run a combine other than Triton's own on whole
tiles, ``log2(n)`` calls instead of Triton's one Python call per element.
"""
from __future__ import annotations

import triton.language as tl

from .. import backend as _backend
from .registry import REQUIRED, private


def _unwrap(value):
    return value.value if isinstance(value, tl.constexpr) else value


# Used in compiled mode only, but checked in either: the compiled twins below need them.
_SCAN, _REDUCE = "triton.language.core.associative_scan", "triton.language.core.reduce"
REQUIRED["triton.language.core.builtin"] = ()
REQUIRED[_SCAN] = ("reverse", "_semantic", "_generator")
REQUIRED[_REDUCE] = ("keep_dims", "_semantic", "_generator")

if _backend.INTERPRET:
    # The interpreter runs ``tl.associative_scan``/``tl.reduce`` on plain Python values and swaps
    # them for its own implementations while a kernel runs, so these are ordinary functions that
    # look the builtins up at call time. Public API only; kept here beside their compiled twins.
    #
    # Triton's interpreter runs a combine function that is not one of its own element by element,
    # one Python call per element (tens of microseconds each), which makes a user-defined scan of a
    # few thousand elements take seconds. ``scan_along``/``reduce_along`` run such a combine on whole
    # tiles instead: a scan by log-step doubling (Hillis & Steele, "Data parallel algorithms",
    # 1986), a reduction by halving, each ``log2(n)`` calls on whole tiles. Both keep the left
    # operand the earlier element, so non-commutative combines stay correct; combine functions
    # are elementwise by Triton's rules, so applying one to a whole tile is what the GPU's tree
    # does lane by lane. Triton's own combines keep their numpy paths. Checked: 3.8.0, 3.9.0
    # (``triton/runtime/interpreter.py``: ScanOps.generic_scan, ReduceOps.generic_reduce).
    import numpy as _np

    _ScanOps = private("triton.runtime.interpreter.ScanOps")
    _ReduceOps = private("triton.runtime.interpreter.ReduceOps")

    def _combine_tiles(ops, earlier, later):
        """``combine_fn(earlier, later)`` on lists of numpy arrays of one power-of-two shape."""
        dtypes = ops._dtypes
        with _np.errstate(all="ignore"):  # integers wrap, floats overflow: as on the GPU
            result = ops.combine_fn.fn(*[ops.to_tensor(a, dt) for a, dt in zip(earlier, dtypes)],
                                       *[ops.to_tensor(b, dt) for b, dt in zip(later, dtypes)])
        result = result if isinstance(result, tuple) else (result,)
        if len(result) != len(dtypes):
            raise ValueError(f"combine function returned {len(result)} values for a state of "
                             f"{len(dtypes)}")
        shape = earlier[0].shape
        return [_np.broadcast_to(_np.asarray(r.handle.data if isinstance(r, tl.core.tensor) else r),
                                 shape).astype(a.dtype) for r, a in zip(result, earlier)]

    class _TileScanOps(_ScanOps):
        def generic_scan(self, input):
            self._dtypes = [arg.dtype for arg in input]
            data = [_np.array(arg.handle.data) for arg in input]
            length = data[0].shape[self.axis]
            keep_from = (slice(None),) * self.axis
            shift = 1
            while shift < length:
                # Every position p >= shift takes combine(data[p - shift], data[p]). Interpreter
                # tensors must keep power-of-two shapes, so the combine runs on the whole tile
                # (the first ``shift`` positions pair with wrapped-around values, discarded).
                combined = _combine_tiles(self, [_np.roll(d, shift, self.axis) for d in data],
                                          data)
                keep = keep_from + (slice(shift, None),)
                data = [d.copy() for d in data]
                for d, c in zip(data, combined):
                    d[keep] = c[keep]
                shift *= 2
            return [self.to_tensor(d, dt) for d, dt in zip(data, self._dtypes)]

    class _TileReduceOps(_ReduceOps):
        def generic_reduce(self, input):
            self._dtypes = [arg.dtype for arg in input]
            axis = self.axis
            data = [_np.array(arg.handle.data) for arg in input]
            if axis is None:
                data, axis = [d.reshape(-1) for d in data], 0
            # Tile lengths are powers of two, so every halving pairs all elements: neighbours
            # (2i, 2i + 1), the earlier one on the left.
            while data[0].shape[axis] > 1:
                pairs = data[0].shape[axis] // 2
                left = (slice(None),) * axis + (slice(0, 2 * pairs, 2),)
                right = (slice(None),) * axis + (slice(1, 2 * pairs, 2),)
                data = _combine_tiles(self, [d[left] for d in data], [d[right] for d in data])
            if not self.keep_dims:
                data = [_np.squeeze(d, axis) for d in data]
                if self.axis is None:
                    data = [d.item() for d in data]
            elif self.axis is None:
                data = [d.reshape((1,) * len(input[0].handle.data.shape)) for d in data]
            return [self.to_tensor(d, dt) for d, dt in zip(data, self._dtypes)]

    _TRITON_COMBINES = tuple(getattr(tl.standard, name) for name in (
        "_sum_combine", "_prod_combine", "_elementwise_max", "_elementwise_min",
        "_argmin_combine_tie_break_left", "_argmin_combine_tie_break_fast",
        "_argmax_combine_tie_break_left", "_argmax_combine_tie_break_fast")
        if hasattr(tl.standard, name))

    def scan_along(input, axis, combine_fn, reverse=False):
        """``tl.associative_scan`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        combine_fn = _unwrap(combine_fn)
        if any(combine_fn is fn for fn in _TRITON_COMBINES):
            return tl.associative_scan(input, axis, combine_fn, reverse=reverse)
        return _TileScanOps(axis, combine_fn, reverse).apply(input)

    def reduce_along(input, axis, combine_fn, keep_dims=False):
        """``tl.reduce`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        combine_fn = _unwrap(combine_fn)
        if any(combine_fn is fn for fn in _TRITON_COMBINES):
            return tl.reduce(input, axis, combine_fn, keep_dims=keep_dims)
        return _TileReduceOps(axis, combine_fn, keep_dims).apply(input)
else:
    # Compiled Triton hands a function passed as a constexpr argument over wrapped in
    # ``tl.constexpr``, which ``tl.associative_scan``/``tl.reduce`` do not unwrap when called from
    # a ``@triton.jit`` function. A builtin (``tl.core.builtin``) receives its arguments as the code
    # generator holds them, unwraps the function, and calls the builtins with the code generator's
    # private ``_semantic``/``_generator`` keywords, as Triton's own builtins call each other.
    # Checked: 3.8.0, 3.9.0 (``triton/language/core.py``: builtin, associative_scan, reduce).
    _builtin = private("triton.language.core.builtin")
    _associative_scan = private(_SCAN, REQUIRED[_SCAN])
    _reduce = private(_REDUCE, REQUIRED[_REDUCE])

    @_builtin
    def scan_along(input, axis, combine_fn, reverse=False, _semantic=None, _generator=None):
        """``tl.associative_scan`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        return _associative_scan(input, axis, _unwrap(combine_fn), reverse=reverse,
                                 _semantic=_semantic, _generator=_generator)

    @_builtin
    def reduce_along(input, axis, combine_fn, keep_dims=False, _semantic=None, _generator=None):
        """``tl.reduce`` with ``combine_fn`` taken from a ``tl.constexpr`` parameter."""
        return _reduce(input, axis, _unwrap(combine_fn), keep_dims=keep_dims,
                       _semantic=_semantic, _generator=_generator)
