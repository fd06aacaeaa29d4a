"""torch.var / std / var_mean / std_mean as torch ops, with fake kernels, autograd (backward and
forward mode), vmap, and the public functions ``tritonml.var``, ``std``, ``var_mean`` and
``std_mean``:

    tritonml::var(Tensor x, int[] axes, float correction, bool keepdim=False) -> Tensor
    tritonml::std(...) -> Tensor        (the same arguments)
    tritonml::var_mean(...) -> (Tensor, Tensor)
    tritonml::std_mean(...) -> (Tensor, Tensor)

One pass of Welford's reduction (tritonml/records/ready_reductions.py: ``welford_m2``, Chan, Golub and LeVeque's
merge) gives (M2, mean) per result in the accumulation dtype (float32 for half types, float64
for float32 and float64); then, as torch: var = M2 / max(n - correction, 0) (0 / 0 = NaN where
n <= correction and M2 = 0, M2 / 0 = inf otherwise), NaN where any element is infinite or NaN,
the mean torch.mean's (+-inf where infinities of one sign meet finite values, NaN where both
signs or a NaN do), the mean NaN over an empty dim, std = sqrt(var), each rounded once to the
input's dtype (docs/semantics.md, "Moments"). ``axes`` [] means
every axis. The reduction's launches pass their tensors in tuples, so the ops are opaque with
compiled Triton too (``define``'s ``opaque``).

Gradients are torch's (var_backward, std_backward, var_mean / std_mean): d var / d x =
2 (x - mean) / (n - correction) (infinite at n == correction), d std = d var / (2 std) with 0
where std is 0, d mean / d x = 1 / n; the jvps are the same formulas applied to the tangent.
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple, Union

import torch

from ..core import checks as _checks
from ..core.dtypes import FLOAT_DTYPES, dtype_name
from ..core.shapes import reduced_shape
from ..launchers.reduce_with import reduce_with_axes
from ..records.ready_reductions import welford_m2
from .define import define, differentiable
from .family import axes_list, batched, call, kept, op_axes, reduced_count


def _check_correction(correction) -> float:
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise TypeError(f"correction: expected a number (int or float), got "
                        f"{type(correction).__name__} ({correction!r})")
    return correction


def _check_float(x: torch.Tensor) -> None:
    if x.dtype not in FLOAT_DTYPES:
        raise TypeError(f"x: var and std are defined for floating-point x (float16, bfloat16, "
                        f"float32, float64), as torch's are, but x has dtype "
                        f"{dtype_name(x.dtype)}; convert x to a floating-point dtype first")


def _moments(x: torch.Tensor, axes, correction, keepdim: bool, root: bool):
    """(var or std, mean) over ``axes`` (an op's: [] for every axis); checks before launch."""
    _checks.check_readable("x", x)
    _check_float(x)
    axes = op_axes(axes, x.dim())
    correction = _check_correction(correction)
    keepdim = _checks.check_bool("keepdim", keepdim)
    m2, mean = reduce_with_axes(welford_m2, x, axes, keepdims=keepdim)
    n = reduced_count(x, axes)
    # a Python float divisor: 0 gives inf and NaN, as torch; an infinite or NaN element has made
    # M2 NaN (reductions.welford_prepare), so the variance is NaN, as torch.var's
    spread = m2 / max(n - correction, 0)
    if n == 0:
        mean.fill_(math.nan)
    if root:
        spread.sqrt_()
    return spread.to(x.dtype), mean.to(x.dtype)


class _MomentOps:
    """One of var, std, var_mean, std_mean: the op, its fake kernel, vmap rule and autograd."""

    def __init__(self, name: str, root: bool, with_mean: bool):
        self.root, self.with_mean = root, with_mean
        if with_mean:
            @define(name, opaque=True)
            def op(x: torch.Tensor, axes: List[int], correction: float,
                   keepdim: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
                return _moments(x, axes, correction, keepdim, root)
        else:
            @define(name, opaque=True)
            def op(x: torch.Tensor, axes: List[int], correction: float,
                   keepdim: bool = False) -> torch.Tensor:
                return _moments(x, axes, correction, keepdim, root)[0]
        self.op = op
        op.register_fake(self._fake)
        op.register_vmap(self._vmap)
        self.differentiable = differentiable(op, self._setup, self._backward, jvp=self._jvp)

    def launch(self, x, axes, correction, keepdim):
        result = _moments(x, axes, correction, keepdim, self.root)
        return result if self.with_mean else result[0]

    def _fake(self, x, axes, correction, keepdim=False):
        _check_float(x)
        shape = reduced_shape(x.shape, op_axes(axes, x.dim()), keepdim)
        spread = x.new_empty(shape)
        return (spread, x.new_empty(shape)) if self.with_mean else spread

    def _vmap(self, info, in_dims, x, axes, correction, keepdim=False):
        outputs = (None, None) if self.with_mean else None
        if in_dims[0] is None:
            return self.op(x, axes, correction, keepdim), outputs
        x, axes, keepdim = batched(x.movedim(in_dims[0], 0), axes, keepdim)
        return self.op(x, axes, correction, keepdim), (0, 0) if self.with_mean else 0

    # --- autograd (torch's formulas) ---
    def _setup(self, ctx, inputs, output):
        x, axes, correction = inputs[:3]
        ctx.axes = op_axes(axes, x.dim())
        ctx.keepdim = inputs[3] if len(inputs) > 3 else False
        n = reduced_count(x, ctx.axes)
        ctx.n = n
        ctx.scale = 2.0 / (n - correction) if n != correction else math.inf
        # the output itself: a view made here would not link double backward to it
        spread = output[0] if self.with_mean else output
        ctx.save_for_backward(x, spread)
        ctx.save_for_forward(x, spread)

    def _spread_factor(self, ctx, g, spread):
        """What multiplies 2 (x - mean) / (n - correction): g, or for std g / (2 std), 0 where
        std is 0 (torch's std_backward)."""
        if not self.root:
            return g
        return (g / (2 * spread)).masked_fill(spread == 0, 0)

    def _backward(self, ctx, grad_spread, grad_mean=None):
        x, spread = ctx.saved_tensors
        spread = kept(spread, x, ctx.axes)
        grad = torch.zeros_like(x)
        if grad_spread is not None:
            g = self._spread_factor(ctx, kept(grad_spread, x, ctx.axes), spread)
            grad = grad + ctx.scale * g * (x - x.mean(ctx.axes, keepdim=True))
        if grad_mean is not None and ctx.n:
            grad = grad + kept(grad_mean, x, ctx.axes) / ctx.n
        return grad, None, None, None

    def _jvp(self, ctx, x_t, *_):
        x, spread = ctx.saved_tensors
        spread = kept(spread, x, ctx.axes)
        shape = reduced_shape(x.shape, ctx.axes, ctx.keepdim)
        var_t = ctx.scale * (x_t * (x - x.mean(ctx.axes, keepdim=True))).sum(ctx.axes,
                                                                              keepdim=True)
        if self.root:
            var_t = (var_t / (2 * spread)).masked_fill(spread == 0, 0)
        var_t = var_t.reshape(shape)
        if not self.with_mean:
            return var_t
        return var_t, x_t.mean(ctx.axes, keepdim=True).reshape(shape)


_VAR = _MomentOps("var", root=False, with_mean=False)
_STD = _MomentOps("std", root=True, with_mean=False)
_VAR_MEAN = _MomentOps("var_mean", root=False, with_mean=True)
_STD_MEAN = _MomentOps("std_mean", root=True, with_mean=True)


def _correction_of(unbiased, correction) -> float:
    """torch's two spellings: ``correction=`` (default 1), or the legacy ``unbiased`` (True: 1,
    False: 0); both at once is an error, as in torch."""
    if unbiased is not None:
        if correction is not None:
            raise TypeError("correction: pass either correction= or the legacy unbiased=, not "
                            "both (as torch.var refuses)")
        return 1 if _checks.check_bool("unbiased", unbiased) else 0
    return 1 if correction is None else _check_correction(correction)


def _public(ops: _MomentOps, input, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool) and unbiased is None:  # torch.var(x, True): the legacy overload
        dim, unbiased = None, dim
    correction = _correction_of(unbiased, correction)
    axes = axes_list(dim, input.dim()) if isinstance(input, torch.Tensor) else dim
    return call(ops.launch, ops.differentiable, input, axes, correction, keepdim)


def var(input: torch.Tensor, dim: Union[int, Sequence[int], bool, None] = None,
        unbiased: Optional[bool] = None, keepdim: bool = False, *,
        correction: Union[int, float, None] = None) -> torch.Tensor:
    """torch.var: the variance over ``dim``, dividing by ``max(n - correction, 0)``.

    One pass (Welford); NaN where n <= correction with equal elements, inf where n <= correction
    otherwise, NaN for infinite or NaN data. Runs as ``torch.ops.tritonml.var``. ``std``,
    ``var_mean`` and ``std_mean`` take the same arguments, documented here.

    Args:
        input: A floating-point tensor (the result has its dtype; half types accumulate in
            float32).
        dim: None or an empty sequence: every dim; an int or a sequence of ints. A bool here is
            the legacy ``unbiased`` (``var(x, True)``), as torch takes it.
        unbiased: The legacy spelling of correction: True: 1, False: 0.
        keepdim: Keep the reduced dims as size 1.
        correction: Divide by ``max(n - correction, 0)``; default 1.

    Returns:
        The variance, of input's dtype; differentiable (forward and reverse mode).

    Raises:
        TypeError: input is not a floating-point tensor, correction is not a number, keepdim or
            unbiased is not a bool, or both correction and unbiased are given (as torch).
        ValueError: A dim out of range or repeated.

    Example:
        >>> import torch, tritonml
        >>> x = torch.tensor([2., 4., 4., 4., 5., 5., 7., 9.])
        >>> tritonml.var(x)                 # 32 / 7
        tensor(4.5714)
        >>> tritonml.var(x, correction=0)   # 32 / 8
        tensor(4.)
    """
    return _public(_VAR, input, dim, unbiased, keepdim, correction)


def std(input: torch.Tensor, dim: Union[int, Sequence[int], bool, None] = None,
        unbiased: Optional[bool] = None, keepdim: bool = False, *,
        correction: Union[int, float, None] = None) -> torch.Tensor:
    """torch.std: the square root of ``var``, with the same arguments.

    Runs as ``torch.ops.tritonml.std``. The arguments and the errors are ``var``'s.

    Returns:
        The standard deviation, of input's dtype; differentiable.

    Example:
        >>> import torch, tritonml
        >>> tritonml.std(torch.tensor([2., 4., 4., 4., 5., 5., 7., 9.]), correction=0)
        tensor(2.)
    """
    return _public(_STD, input, dim, unbiased, keepdim, correction)


def var_mean(input: torch.Tensor, dim: Union[int, Sequence[int], bool, None] = None,
         unbiased: Optional[bool] = None, keepdim: bool = False, *,
         correction: Union[int, float, None] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """torch.var_mean: ``(var, mean)`` from the one pass, with the arguments of ``var``.

    The mean of an empty dim is NaN. Runs as ``torch.ops.tritonml.var_mean``. The arguments and
    the errors are ``var``'s.

    Returns:
        ``(var, mean)``, of input's dtype; differentiable.

    Example:
        >>> import torch, tritonml
        >>> var, mean = tritonml.var_mean(torch.tensor([2., 4., 4., 4., 5., 5., 7., 9.]))
        >>> var, mean
        (tensor(4.5714), tensor(5.))
    """
    result = _public(_VAR_MEAN, input, dim, unbiased, keepdim, correction)
    return tuple(result)  # pyright: ignore[reportReturnType] (the op's two outputs)


def std_mean(input: torch.Tensor, dim: Union[int, Sequence[int], bool, None] = None,
         unbiased: Optional[bool] = None, keepdim: bool = False, *,
         correction: Union[int, float, None] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """torch.std_mean: ``(std, mean)`` from the one pass, with the arguments of ``var``.

    Runs as ``torch.ops.tritonml.std_mean``. The arguments and the errors are ``var``'s.

    Returns:
        ``(std, mean)``, of input's dtype; differentiable.

    Example:
        >>> import torch, tritonml
        >>> x = torch.tensor([[1., 3.], [2., 6.]])
        >>> std, mean = tritonml.std_mean(x, dim=1, correction=0)
        >>> std, mean
        (tensor([1., 2.]), tensor([2., 4.]))
    """
    result = _public(_STD_MEAN, input, dim, unbiased, keepdim, correction)
    return tuple(result)  # pyright: ignore[reportReturnType] (the op's two outputs)


__all__ = ["var", "std", "var_mean", "std_mean"]
