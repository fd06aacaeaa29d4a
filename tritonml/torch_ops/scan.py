"""The cumulative operators as torch ops, with fake kernels, autograd and vmap rules, and the
public functions ``tritonml.cumulative_sum`` / ``tritonml.cumulative_product`` that call them.

Each operator is three ops (shown for the sum; the product's are named alike):

    tritonml::cumulative_sum(Tensor x, int axis, bool reverse=False, bool exclusive=False,
                             Tensor? initial=None) -> Tensor
    tritonml::cumulative_sum_out(Tensor x, int axis, bool reverse, bool exclusive, Tensor(a!) out,
                                 Tensor? initial=None) -> ()
    tritonml::cumulative_sum_(Tensor(a!) x, int axis, bool reverse=False, bool exclusive=False,
                              Tensor? initial=None) -> ()

Only the functional op is differentiable (in x and in ``initial``), as in torch: the out= and
in-place forms refuse inputs that require grad. Backward passes and forward-mode tangents
(``torch.func.jvp``, ``jacfwd``, ``torch.autograd.forward_ad``) are scans on tritonml's own kernels
(docs/torch.md), the ``backward`` and ``jvp`` of each operator's record
(tritonml/records/builtin_scans.py).

``return_carry=True`` (the last tally in the accumulation dtype, docs/dsl.md) is not part of the
ops' schemas: a second output in another dtype would need its own fake kernels, vmap and autograd
rules for a value that exists to feed the next chunk's ``initial``. The public functions answer it
by calling the launcher eagerly (``eager_carry_call``): a graph break under ``torch.compile``, and
refused with autograd or torch.func transforms.
"""
import contextlib
from typing import Any, Callable, Dict, Literal, NoReturn, Optional, Tuple, Union, overload

import torch
from torch.autograd import forward_ad

from ..core import checks as _checks, torch_compat as _torch_compat
from . import dtensor as _dtensor, jagged as _jagged
from ..launchers.scan import check_initial_meta, cumulative_scan, prechecked
from ..records.builtin_scans import LINEAR_RECURRENCE, PRODUCT, SUM
from ..records.scan_combine import ScanCombine, Scans, StateScan
from .define import (_peek_functorch, batch_first, compiler_disable, define, differentiable,
                     direct_call_allowed,
                     mutated)


def _batched_axis(axis: int, logical_rank: int) -> int:
    """``axis`` of a logical tensor of ``logical_rank`` >= 1, once a batch dim is in front."""
    return _checks.normalize_axis(axis, logical_rank) + 1


OPS_BY_NAME: Dict[str, "_ScanOps"] = {}   # every cumulative operator's ops, by its name


class _ScanOps:
    """The functional, out= and in-place ops of one cumulative operator, and its public function."""

    def __init__(self, name: str, combine: ScanCombine):
        @define(name)
        def functional(x: torch.Tensor, axis: int, reverse: bool = False, exclusive: bool = False,
                       initial: Optional[torch.Tensor] = None) -> torch.Tensor:
            return cumulative_scan(  # pyright: ignore[reportReturnType] (no return_carry)
                x, axis, combine, reverse=reverse, exclusive=exclusive, initial=initial)

        @define(f"{name}_out", mutates_args=("out",))
        def out_variant(x: torch.Tensor, axis: int, reverse: bool, exclusive: bool,
                        out: torch.Tensor, initial: Optional[torch.Tensor] = None) -> None:
            cumulative_scan(x, axis, combine, reverse=reverse, exclusive=exclusive,
                            initial=initial, out=out)

        @define(f"{name}_", mutates_args=("x",))
        def in_place(x: torch.Tensor, axis: int, reverse: bool = False, exclusive: bool = False,
                     initial: Optional[torch.Tensor] = None) -> None:
            cumulative_scan(x, axis, combine, reverse=reverse, exclusive=exclusive,
                            initial=initial, out=x)

        self.functional, self.out, self.in_place = functional, out_variant, in_place
        self.name, self.combine = name, combine
        OPS_BY_NAME[name] = self
        self.differentiable = differentiable(functional, _setup_context, _backward_of(combine),
                                             _jvp_of(combine))
        register_differentiable(combine, self.differentiable)
        functional.register_fake(_fake)
        out_variant.register_fake(_fake_out)
        in_place.register_fake(_fake_in_place)
        functional.register_vmap(self._vmap_functional)
        out_variant.register_vmap(self._vmap_out)
        in_place.register_vmap(self._vmap_in_place)

    def __call__(self, x, axis, reverse, exclusive, initial: Optional[torch.Tensor],
                 out: Optional[torch.Tensor], return_carry: bool = False) -> Any:
        """The public function: normalize what the schema types, then call one op (or, in plain
        eager code, the launcher the op would call: ``define.direct_call_allowed``)."""
        if isinstance(x, torch.Tensor) and x.is_nested:  # jagged layout: torch_ops/jagged.py
            return _jagged.scan(self, x, axis, reverse, exclusive, initial, out, return_carry)
        if _checks.check_bool("return_carry", return_carry):
            if _dtensor.any_dtensor((x, initial, out)):
                raise NotImplementedError("return_carry: not supported for DTensor inputs; scan "
                                          "the whole DTensor at once (tritonml.distributed)")
            def launch():
                return cumulative_scan(x, axis, self.combine, reverse=reverse,
                                       exclusive=exclusive, initial=initial, out=out,
                                       return_carry=True)
            result = eager_carry_call(launch, x, out, initial)
            if out is not None:
                mutated(out)
            return result
        if direct_call_allowed(x, out, (initial,) if initial is not None else ()):
            result = cumulative_scan(x, axis, self.combine, reverse=reverse, exclusive=exclusive,
                                     initial=initial, out=out)
            if out is not None:
                mutated(out)
            return result
        compiling = torch.compiler.is_compiling()
        if not compiling:
            _checks.check_readable("x", x)  # before the dispatcher, which has no sparse kernel
            if initial is not None:
                _checks.check_readable("initial", initial)
        axis = _checks.normalize_axis(axis, x.dim())
        reverse = _checks.check_bool("reverse", reverse)
        exclusive = _checks.check_bool("exclusive", exclusive)
        if out is not None:
            if not compiling:
                _checks.check_readable("out", out)
            _checks.check_out_grad(out, x)
            if initial is not None:
                _checks.check_out_grad(out, initial)
        # The op's launcher skips the checks above for these tensors (``prechecked``): each check
        # runs once per call. (Traced by torch.compile, the op runs later, checking everything.)
        with contextlib.nullcontext() if compiling else prechecked(x, initial, out):
            if out is None:
                return self.differentiable(x, axis, reverse, exclusive, initial)
            if out is x:
                self.in_place(x, axis, reverse, exclusive, initial)
            else:
                self.out(x, axis, reverse, exclusive, out, initial)
        return out

    # --- vmap: the batch dim goes first and the axis moves past it; a batch of 0-d tensors
    # (each acting as shape [1]) becomes a batch of length-1 rows. A batched initial moves its
    # batch dim first too; an unbatched one is expanded over the batch (``_batch_initial``) ---
    def _vmap_functional(self, info, in_dims, x, axis, reverse=False, exclusive=False,
                         initial=None):
        init_dim = in_dims[4] if len(in_dims) > 4 else None
        if in_dims[0] is None and init_dim is None:
            return self.functional(x, axis, reverse, exclusive, initial), None
        size = info.batch_size
        x = x.movedim(in_dims[0], 0) if in_dims[0] is not None else x.expand(size, *x.shape)
        initial = _batch_initial(initial, init_dim, size)
        if x.dim() == 1:
            return self.functional(x.unsqueeze(1), 1, reverse, exclusive, initial).squeeze(1), 0
        return self.functional(x, _batched_axis(axis, x.dim() - 1), reverse, exclusive,
                               initial), 0

    def _vmap_out(self, info, in_dims, x, axis, reverse, exclusive, out, initial=None):
        init_dim = in_dims[5] if len(in_dims) > 5 else None
        batched = batch_first(x, in_dims[0], out, in_dims[4])
        if batched is None:
            if init_dim is not None:
                raise ValueError("out: under vmap, out must be batched when initial is (each batch "
                                 "element writes its own result)")
            self.out(x, axis, reverse, exclusive, out, initial)
            return None, None
        x, out = batched
        initial = _batch_initial(initial, init_dim, out.shape[0])
        if x.dim() == 1:
            x, out, axis = x.unsqueeze(1), out.unsqueeze(1), 1
        else:
            axis = _batched_axis(axis, x.dim() - 1)
        self.out(x, axis, reverse, exclusive, out, initial)
        return None, None

    def _vmap_in_place(self, info, in_dims, x, axis, reverse=False, exclusive=False,
                       initial=None):
        init_dim = in_dims[4] if len(in_dims) > 4 else None
        if in_dims[0] is None:
            if init_dim is not None:
                raise ValueError("x: under vmap, an in-place scan needs x batched when initial "
                                 "is (each batch element writes its own result)")
            self.in_place(x, axis, reverse, exclusive, initial)
            return None, None
        x = x.movedim(in_dims[0], 0)
        initial = _batch_initial(initial, init_dim, x.shape[0])
        if x.dim() == 1:
            x, axis = x.unsqueeze(1), 1
        else:
            axis = _batched_axis(axis, x.dim() - 1)
        self.in_place(x, axis, reverse, exclusive, initial)
        return None, None


@compiler_disable
def eager_carry_call(launch, *tensors):
    """``launch()`` (a launcher called with ``return_carry=True``), eagerly: the carry is no op's
    output (module docstring), so what an op would give, autograd (reverse and forward mode) and
    torch.func transforms, is refused with a clear error instead of silently missing."""
    tensors = [t for t in tensors if t is not None]
    if torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad
                                       for t in tensors):
        raise RuntimeError("return_carry: has no autograd (the carry is returned outside the torch "
                           "op); pass tensors that do not require grad (e.g. x.detach()) or call "
                           "it under torch.no_grad()")
    if _torch_compat.forward_ad_active() and any(
            isinstance(t, torch.Tensor) and forward_ad.unpack_dual(t).tangent is not None
            for t in tensors):
        raise RuntimeError("return_carry: has no forward-mode derivative (the carry is returned "
                           "outside the torch op); pass tensors without a tangent "
                           "(forward_ad.unpack_dual(x).primal)")
    if (_peek_functorch is not None and _peek_functorch() is not None) or any(
            isinstance(t, torch.Tensor) and type(t) is not torch.Tensor for t in tensors):
        raise ValueError("return_carry: runs eagerly on plain tensors only, not under torch.func "
                         "transforms (vmap, grad) nor on tensor subclasses")
    return launch()


def _batch_initial(initial, init_dim, size: int):
    """An initial with its batch dim first: moved there, or expanded over ``size`` when the
    initial is not batched (None stays None)."""
    if initial is None:
        return None
    if init_dim is not None:
        return initial.movedim(init_dim, 0)
    return initial.expand(size, *initial.shape)


def _fake(x, axis, reverse=False, exclusive=False, initial=None):
    check_initial_meta(initial, x, _checks.normalize_axis(axis, x.dim()))
    return torch.empty_like(x)


def _fake_out(x, axis, reverse, exclusive, out, initial=None):
    check_initial_meta(initial, x, _checks.normalize_axis(axis, x.dim()))


def _fake_in_place(x, axis, reverse=False, exclusive=False, initial=None):
    check_initial_meta(initial, x, _checks.normalize_axis(axis, x.dim()))


# ---------------------------------------------------------------------------------------------
# Autograd: each record's ``backward`` and ``jvp`` (tritonml/records/builtin_scans.py), their
# scans run through the differentiable ops, so derivatives are differentiable too
# ---------------------------------------------------------------------------------------------
_DIFFERENTIABLE: Dict[Union[ScanCombine, StateScan], Callable[..., torch.Tensor]] = {}


def register_differentiable(record: Union[ScanCombine, StateScan],
                            run: Callable[..., torch.Tensor]) -> None:
    """Make ``run(x, axis, reverse, exclusive, initial)``, a differentiable op, the scan that
    records' derivatives run for ``record`` (each ``_ScanOps`` registers its own; a scan record
    with another public op registers it too)."""
    _DIFFERENTIABLE[record] = run


def _differentiable_scan(record: Union[ScanCombine, StateScan], x, axis: int, reverse: bool,
                         exclusive: bool, initial=None):
    """``record``'s scan of x through its differentiable op. LINEAR_RECURRENCE (a product's
    derivatives are linear recurrences) takes x as ``(gates, tokens)`` and no ``exclusive``."""
    if record is LINEAR_RECURRENCE:
        from .recurrence import _LINEAR_RECURRENCE   # (which imports this module)
        gates, tokens = x
        return _LINEAR_RECURRENCE(gates, tokens, axis, reverse, initial)
    return _DIFFERENTIABLE[record](x, axis, reverse, exclusive, initial)


WHOLE_AXIS = Scans(_differentiable_scan)
"""The scans and shifts of a scan record's derivatives along the whole axis."""


def _setup_context(ctx, inputs, output):
    x, axis, reverse, exclusive = inputs[:4]
    initial = inputs[4] if len(inputs) > 4 else None
    ctx.axis, ctx.reverse, ctx.exclusive = axis, reverse, exclusive
    ctx.has_initial = initial is not None
    ctx.save_for_backward(x, output, initial)
    ctx.save_for_forward(x, output, initial)


def _backward_of(record: ScanCombine):
    def backward(ctx, grad):
        x, output, initial = ctx.saved_tensors
        grad_x, grad_initial = record.backward(  # pyright: ignore[reportOptionalCall]
            WHOLE_AXIS, x, output, initial if ctx.has_initial else None, grad,
            ctx.axis, ctx.reverse, ctx.exclusive)
        return grad_x, None, None, None, grad_initial
    backward.__name__ = backward.__qualname__ = f"_{record.name}_backward"
    return backward


def _jvp_of(record: ScanCombine):
    def jvp(ctx, x_tangent, _axis, _reverse, _exclusive, initial_tangent=None):
        x, output, initial = ctx.saved_tensors
        return record.jvp(  # pyright: ignore[reportOptionalCall]
            WHOLE_AXIS, x, output, initial if ctx.has_initial else None,
            x_tangent, initial_tangent, ctx.axis, ctx.reverse, ctx.exclusive)
    jvp.__name__ = jvp.__qualname__ = f"_{record.name}_jvp"
    return jvp


SUM_OPS = _ScanOps("cumulative_sum", SUM)
PRODUCT_OPS = _ScanOps("cumulative_product", PRODUCT)


# ---------------------------------------------------------------------------------------------
# Public functions
# ---------------------------------------------------------------------------------------------
@overload
def cumulative_sum(x: torch.Tensor, axis: int, *, reverse: bool = ..., exclusive: bool = ...,
                   initial: Optional[torch.Tensor] = ..., out: Optional[torch.Tensor] = ...,
                   return_carry: Literal[False] = ...) -> torch.Tensor: ...
@overload
def cumulative_sum(x: torch.Tensor, axis: int, *, reverse: bool = ..., exclusive: bool = ...,
                   initial: Optional[torch.Tensor] = ..., out: Optional[torch.Tensor] = ...,
                   return_carry: Literal[True]) -> Tuple[torch.Tensor, torch.Tensor]: ...
@overload
def cumulative_sum(x: torch.Tensor, axis: int, *, reverse: bool = ..., exclusive: bool = ...,
                   initial: Optional[torch.Tensor] = ..., out: Optional[torch.Tensor] = ...,
                   return_carry: bool) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]: ...
# Last: a misspelt keyword matches only here, so type checkers name it in their error (the
# implementation takes no such keyword: Python's TypeError names it at run time).
@overload
def cumulative_sum(x: torch.Tensor, axis: int, *, reverse: bool = ..., exclusive: bool = ...,
                   initial: Optional[torch.Tensor] = ..., out: Optional[torch.Tensor] = ...,
                   return_carry: bool = ..., **unexpected_keyword: NoReturn
                   ) -> Any: ...
def cumulative_sum(  # pyright: ignore[reportInconsistentOverload]
                   x: torch.Tensor, axis: int, *, reverse: bool = False, exclusive: bool = False,
                   initial: Optional[torch.Tensor] = None,
                   out: Optional[torch.Tensor] = None, return_carry: bool = False
                   ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Running sum of ``x`` along ``axis`` (DML_CUMULATIVE_SUMMATION_OPERATOR_DESC).

    ``out[i] = initial + x[0] + ... + x[i]`` in traversal order. Runs as
    ``torch.ops.tritonml.cumulative_sum`` (``cumulative_sum_out`` / ``cumulative_sum_`` for out= /
    in place). See docs/semantics.md for dtypes and edge cases, docs/torch.md for autograd and
    torch.compile.

    Args:
        x: The tensor to scan (rank 0 to 8, any strides, every numeric dtype).
        axis: The axis to scan along; negative counts from the end.
        reverse: DML_AXIS_DIRECTION_DECREASING: sum from the end of the axis.
        exclusive: HasExclusiveSum: each output excludes its own element; the first written is
            0 (or ``initial``).
        initial: None, or a carry-in added before the first element in traversal order (the
            last index with ``reverse``): a tensor of x's shape without ``axis`` (0-d for a 0-d
            x), x's dtype or its accumulation dtype (float64 for float32, docs/semantics.md),
            x's device, any strides (expanded views too). The first exclusive output is
            ``initial``. Not a DirectML field.
        out: A tensor of x's shape, dtype and device to write into; may be ``x`` itself (in
            place), must not overlap ``initial``.
        return_carry: Return ``(result, carry)``, ``carry`` the last tally of each scan (after
            the last element in traversal order, exclusive or not) in the accumulation dtype.
            Scanning a sequence in chunks, each chunk's ``initial`` the previous chunk's carry,
            equals one scan (docs/dsl.md, "Scanning in chunks"). Eager only: no autograd, vmap
            or graph capture.

    Returns:
        A tensor of x's shape and dtype (``out`` when given), differentiable in x and initial
        (without ``out``); with ``return_carry``, the tuple ``(result, carry)``.

    Raises:
        TypeError: x, initial or out is not a tensor, a flag is not a bool, or initial's or
            out's dtype is not one listed above.
        ValueError: axis out of range, or initial or out of the wrong shape or device, or out
            overlapping initial.
        RuntimeError: out= on tensors that require grad, or return_carry with inputs that
            require grad or carry a tangent.

    Example:
        >>> import torch, tritonml
        >>> x = torch.tensor([[1., 2., 3.], [4., 5., 6.]])
        >>> tritonml.cumulative_sum(x, 1)
        tensor([[ 1.,  3.,  6.],
                [ 4.,  9., 15.]])
        >>> tritonml.cumulative_sum(x, 1, reverse=True, exclusive=True)
        tensor([[ 5.,  3.,  0.],
                [11.,  6.,  0.]])
        >>> y, carry = tritonml.cumulative_sum(x, 1, return_carry=True)
        >>> carry
        tensor([ 6., 15.], dtype=torch.float64)
    """
    return SUM_OPS(x, axis, reverse, exclusive, initial, out, return_carry)


# Deliberately cumulative_sum's overloads again: type checkers read overloads only as written on
# each def (a shared Protocol would leave no def, signature or docstring for the docs to show).
@overload
def cumulative_product(x: torch.Tensor, axis: int, *, reverse: bool = ..., exclusive: bool = ...,
                       initial: Optional[torch.Tensor] = ..., out: Optional[torch.Tensor] = ...,
                       return_carry: Literal[False] = ...) -> torch.Tensor: ...
@overload
def cumulative_product(x: torch.Tensor, axis: int, *, reverse: bool = ..., exclusive: bool = ...,
                       initial: Optional[torch.Tensor] = ..., out: Optional[torch.Tensor] = ...,
                       return_carry: Literal[True]) -> Tuple[torch.Tensor, torch.Tensor]: ...
@overload
def cumulative_product(x: torch.Tensor, axis: int, *, reverse: bool = ..., exclusive: bool = ...,
                       initial: Optional[torch.Tensor] = ..., out: Optional[torch.Tensor] = ...,
                       return_carry: bool
                       ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]: ...
# Last: a misspelt keyword matches only here, so type checkers name it in their error (the
# implementation takes no such keyword: Python's TypeError names it at run time).
@overload
def cumulative_product(x: torch.Tensor, axis: int, *, reverse: bool = ..., exclusive: bool = ...,
                       initial: Optional[torch.Tensor] = ..., out: Optional[torch.Tensor] = ...,
                       return_carry: bool = ..., **unexpected_keyword: NoReturn
                       ) -> Any: ...
def cumulative_product(  # pyright: ignore[reportInconsistentOverload]
                       x: torch.Tensor, axis: int, *, reverse: bool = False,
                       exclusive: bool = False, initial: Optional[torch.Tensor] = None,
                       out: Optional[torch.Tensor] = None, return_carry: bool = False
                       ) -> Union[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
    """Running product of ``x`` along ``axis`` (DML_CUMULATIVE_PRODUCT_OPERATOR_DESC).

    The gradient (in x and initial) is exact with zeros, as torch's cumprod's, and so are its
    own derivatives (docs/semantics.md). Runs as ``torch.ops.tritonml.cumulative_product``
    (``_out`` / ``_`` for out= / in place).

    Args:
        x: The tensor to scan.
        axis: The axis to scan along; negative counts from the end.
        reverse: DML_AXIS_DIRECTION_DECREASING.
        exclusive: HasExclusiveProduct: the first written is 1, or ``initial``.
        initial: A carry-in multiplied in before the first element in traversal order, as for
            ``cumulative_sum``.
        out: As for ``cumulative_sum``.
        return_carry: As for ``cumulative_sum``.

    Returns:
        A tensor of x's shape and dtype; with ``return_carry``, ``(result, carry)``.

    Raises:
        TypeError: As for ``cumulative_sum``.
        ValueError: As for ``cumulative_sum``.
        RuntimeError: As for ``cumulative_sum``.

    Example:
        >>> import torch, tritonml
        >>> tritonml.cumulative_product(torch.tensor([1., 2., 3., 4.]), 0)
        tensor([ 1.,  2.,  6., 24.])
        >>> tritonml.cumulative_product(torch.tensor([1., 2., 3., 4.]), 0, exclusive=True,
        ...                             initial=torch.tensor(2.))
        tensor([ 2.,  2.,  4., 12.])
    """
    return PRODUCT_OPS(x, axis, reverse, exclusive, initial, out, return_carry)
