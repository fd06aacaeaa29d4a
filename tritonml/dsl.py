"""``tritonml.associative_scan``: scans of tuple states with a user's ``@triton.jit`` combine
function (docs/dsl.md).

A plain Python function, not a torch op: a torch custom op's schema cannot carry a Python function,
so there is no autograd (outputs never require grad; inputs that do raise), and under
``torch.compile`` the call is a graph break (``torch.compiler.disable``): it runs eagerly between
the compiled regions.
"""
from __future__ import annotations

from typing import Any, Literal, NoReturn, Optional, Sequence, Tuple, Union, overload

import torch
from tritonml_autotune.configs import ScanConfig

from .core import checks as _checks
from .torch_ops import dtensor as _dtensor
from .torch_ops.define import compiler_disable
from .torch_ops.segment import check_segments
from .records.state_combine import CombineError
from .launchers.scan import associative_scan_states
from .launchers.segment import segment_associative_scan

__all__ = ["associative_scan", "CombineError"]


_Tensors = Union[torch.Tensor, Sequence[torch.Tensor]]
_Identity = Union[float, Sequence[float], None]


@overload
def associative_scan(combine_fn: Any, xs: torch.Tensor, axis: int, *, reverse: bool = ...,
                     exclusive: bool = ..., identity: _Identity = ...,
                     initial: Optional[_Tensors] = ..., out: Optional[_Tensors] = ...,
                     config: Optional[ScanConfig] = ..., return_carry: Literal[False] = ...,
                     offsets: Optional[torch.Tensor] = ..., lengths: Optional[torch.Tensor] = ...
                     ) -> torch.Tensor: ...
@overload
def associative_scan(combine_fn: Any, xs: torch.Tensor, axis: int, *, reverse: bool = ...,
                     exclusive: bool = ..., identity: _Identity = ...,
                     initial: Optional[_Tensors] = ..., out: Optional[_Tensors] = ...,
                     config: Optional[ScanConfig] = ..., return_carry: Literal[True],
                     offsets: Optional[torch.Tensor] = ..., lengths: Optional[torch.Tensor] = ...
                     ) -> Tuple[torch.Tensor, torch.Tensor]: ...
@overload
def associative_scan(combine_fn: Any, xs: Sequence[torch.Tensor], axis: int, *, reverse: bool = ...,
                     exclusive: bool = ..., identity: _Identity = ...,
                     initial: Optional[_Tensors] = ..., out: Optional[_Tensors] = ...,
                     config: Optional[ScanConfig] = ..., return_carry: Literal[False] = ...,
                     offsets: Optional[torch.Tensor] = ..., lengths: Optional[torch.Tensor] = ...
                     ) -> Tuple[torch.Tensor, ...]: ...
@overload
def associative_scan(combine_fn: Any, xs: Sequence[torch.Tensor], axis: int, *, reverse: bool = ...,
                     exclusive: bool = ..., identity: _Identity = ...,
                     initial: Optional[_Tensors] = ..., out: Optional[_Tensors] = ...,
                     config: Optional[ScanConfig] = ..., return_carry: Literal[True],
                     offsets: Optional[torch.Tensor] = ..., lengths: Optional[torch.Tensor] = ...
                     ) -> Tuple[Tuple[torch.Tensor, ...], Tuple[torch.Tensor, ...]]: ...
@overload
def associative_scan(combine_fn: Any, xs: _Tensors, axis: int, *, reverse: bool = ...,
                     exclusive: bool = ..., identity: _Identity = ...,
                     initial: Optional[_Tensors] = ..., out: Optional[_Tensors] = ...,
                     config: Optional[ScanConfig] = ..., return_carry: bool,
                     offsets: Optional[torch.Tensor] = ..., lengths: Optional[torch.Tensor] = ...
                     ) -> Any: ...
# Last: a misspelt keyword matches only here, so type checkers name it in their error (the
# implementation takes no such keyword: Python's TypeError names it at run time).
@overload
def associative_scan(combine_fn: Any, xs: _Tensors, axis: int, *, reverse: bool = ...,
                     exclusive: bool = ..., identity: _Identity = ...,
                     initial: Optional[_Tensors] = ..., out: Optional[_Tensors] = ...,
                     config: Optional[ScanConfig] = ..., return_carry: bool = ...,
                     offsets: Optional[torch.Tensor] = ..., lengths: Optional[torch.Tensor] = ...,
                     **unexpected_keyword: NoReturn) -> Any: ...
@compiler_disable
def associative_scan(  # pyright: ignore[reportInconsistentOverload]
                     combine_fn: Any, xs: _Tensors, axis: int, *, reverse: bool = False,
                     exclusive: bool = False, identity: _Identity = None,
                     initial: Optional[_Tensors] = None, out: Optional[_Tensors] = None,
                     config: Optional[ScanConfig] = None, return_carry: bool = False,
                     offsets: Optional[torch.Tensor] = None,
                     lengths: Optional[torch.Tensor] = None) -> Any:
    """Running ``combine_fn`` of the state ``xs`` along ``axis``.

    Each component is computed in its accumulation type (float16/bfloat16 in float32, float32 in
    float64, integers in 64 bits of their signedness) and stored as its tensor's dtype. A plain
    Python function, not a torch op: no autograd (outputs never require grad; inputs that do
    raise), and under ``torch.compile`` a graph break (it runs eagerly). See docs/dsl.md.

    Args:
        combine_fn: A ``@triton.jit`` function ``f(a, b)`` of two states, each a tuple with one
            value per tensor of ``xs`` (a tuple of one for a single tensor), returning a state
            of the same length, e.g. ``return (a[0] * b[0], b[0] * a[1] + b[1])``. It must be
            associative; it need not be commutative: ``a`` is always the earlier operand in
            traversal order (with ``reverse=True`` traversal starts at the end of the axis).
        xs: A tensor or a tuple of tensors of one shape (rank 0 to 8; any dtypes, strides,
            broadcast views).
        axis: The axis to scan along; negative counts from the end.
        reverse: Traverse from the end of the axis.
        exclusive: Each output leaves its own element out; the first output is the identity,
            or ``initial``.
        identity: One value per tensor (the state ``f`` leaves unchanged; a number for a single
            tensor); required for ``exclusive``. Without it, inclusive scans carry a hidden
            "holds elements" flag so padding never reaches ``combine_fn``'s results.
        initial: A carry-in state (tensors of ``xs``'s shape without ``axis``, each of its
            component's dtype or accumulation dtype), folded in before the first element in
            traversal order.
        out: Tensors to write (``out[i]`` may be ``xs[i]`` itself: in place).
        config: A ``ScanConfig`` instead of the tuned choice.
        return_carry: Return ``(result, carry)``, ``carry`` each scan's last inclusive state in
            the accumulation dtypes (a tensor or a tuple like the result): scanning in chunks,
            each chunk's ``initial`` the previous chunk's carry, equals one scan bit for bit.
        offsets: Scan each segment of ``axis`` on its own, restarting at each boundary (as
            ``tritonml.segment_scan``, docs/segments.md): a 1-D integer tensor of n + 1
            boundaries on xs's device. With segments, ``initial``, ``out``, ``config`` and
            ``return_carry`` are not taken.
        lengths: Instead of offsets, the n segments' lengths.

    Returns:
        A tuple of tensors like ``xs`` (a tensor if ``xs`` is a tensor); with ``return_carry``,
        ``(result, carry)``.

    Raises:
        CombineError: The combine failed while it ran (its message: the function's qualified
            name, file:line, the line and its error once; ``.original`` holds the exception it
            raised).
        ValueError: A combine with no ``return``, a ``return`` of the wrong arity, or a
            constant index past the state (``b[2]`` of a one-tensor state), refused before any
            launch; ``exclusive`` without identity; an identity of the wrong length; an option
            not taken with segments.
        TypeError: xs are not tensors, or identity is not numbers.
        RuntimeError: Inputs that require grad, with grad mode on.

    Example:
        A running sum with ``tritonml.kernels.combine.add_values`` as the combine (a user's
        own ``@triton.jit`` combine must live in a file: Triton reads its source):

        >>> import torch, tritonml
        >>> from tritonml.kernels.combine import add_values
        >>> tritonml.associative_scan(add_values, torch.tensor([1., 2., 3., 4.]), 0)
        tensor([ 1.,  3.,  6., 10.])
        >>> tritonml.associative_scan(add_values, torch.tensor([1., 2., 3., 4.]), 0,
        ...                           exclusive=True, identity=0.0)
        tensor([0., 1., 3., 6.])
    """
    if offsets is not None or lengths is not None:
        return _segmented(combine_fn, xs, axis, reverse, exclusive, identity, offsets, lengths,
                          dict(initial=initial, out=out, config=config,
                               return_carry=return_carry or None))
    if _dtensor.any_dtensor(xs):  # SPMD over the shards: tritonml.distributed.associative_scan
        if return_carry:
            raise NotImplementedError("return_carry: not supported for DTensor inputs; scan the "
                                      "whole DTensor at once (tritonml.distributed)")
        return _dtensor.associative_scan(combine_fn, xs, axis, reverse, exclusive, identity,
                                         initial, out, config)
    single = isinstance(xs, torch.Tensor)
    tensors = (xs,) if single else xs
    if torch.is_grad_enabled() and isinstance(tensors, (tuple, list)) and any(
            isinstance(t, torch.Tensor) and t.requires_grad for t in tensors):
        raise RuntimeError("xs: associative_scan has no autograd (a user's combine function has no "
                           "derivative rule); pass tensors that do not require grad, e.g. "
                           "x.detach()")
    if single and out is not None and isinstance(out, torch.Tensor):
        out = (out,)
    if single and isinstance(initial, torch.Tensor):
        initial = (initial,)
    results: Any = associative_scan_states(combine_fn, tensors, axis, reverse=reverse,
                                           exclusive=exclusive, identity=identity,
                                           initial=initial, out=out, config=config,
                                           return_carry=return_carry)
    if return_carry:
        results, carries = results
        return (results[0], carries[0]) if single else (tuple(results), tuple(carries))
    return results[0] if single else tuple(results)


def _segmented(combine_fn, xs, axis, reverse, exclusive, identity, offsets, lengths,
               refused) -> Any:
    """``associative_scan`` restarted at every segment boundary."""
    for name, value in refused.items():
        if value is not None:
            raise ValueError(f"{name}: not taken with offsets/lengths (a segmented scan has no "
                             f"{name})")
    single = isinstance(xs, torch.Tensor)
    tensors = (xs,) if single else tuple(xs)
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        raise TypeError("xs: expected a tensor or a non-empty tuple of tensors")
    if _dtensor.any_dtensor(tensors):
        raise NotImplementedError("offsets: segmented scans of DTensors are not supported")
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise RuntimeError("xs: associative_scan has no autograd (a user's combine function has no "
                           "derivative rule); pass tensors that do not require grad, e.g. "
                           "x.detach()")
    if tensors[0].dim() == 0:
        raise ValueError("xs: a 0-d tensor has no axis to split into segments")
    axis = _checks.normalize_axis(axis, tensors[0].dim())
    offsets = check_segments(tensors[0], axis, offsets, lengths)
    results = segment_associative_scan(combine_fn, tensors, offsets, axis, reverse=reverse,
                                       exclusive=exclusive, identity=identity)
    return results[0] if single else tuple(results)
