"""``Reduction``: a reduction as tritonml's reduce kernels run it, the one kind of record behind
``tritonml.reduce_with`` (a user's reduction) and ``tritonml.reduce`` (the twelve DirectML
functions, tritonml/records/builtin_reductions.py, each a ``Reduction`` with a few more facts).

The launchers are tritonml/launchers/reduce.py (``reduce_work``, ``reduce_axes``) and
tritonml/launchers/reduce_with.py (``reduce_with_axes``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional, Tuple, Union

import torch

from ..core import triton_compat as _triton_compat
from ..core.dtypes import TL_DTYPE
from ..kernels import combine as _combine

_HALF_DTYPES = (torch.float16, torch.bfloat16)


def default_load_dtype(dtype: torch.dtype) -> torch.dtype:
    """What an input of ``dtype`` is converted to on load unless a Reduction says otherwise:
    float16 and bfloat16 compute in float32, every other dtype as it is."""
    return torch.float32 if dtype in _HALF_DTYPES else dtype


@dataclass(frozen=True)
class Reduction:
    """A reduction on tritonml's reduce kernels: a user's, run by ``tritonml.reduce_with``, or one
    of the twelve DirectML functions (``tritonml.records.builtin_reductions.ReduceRecord``, a subclass).

    The state is a tuple of ``len(identity)`` components. The three functions are ``@triton.jit``
    functions of tiles (2-D tensors, elementwise):

    - ``prepare(xs, index) -> state``: ``xs`` a tuple with one tile per input tensor (each already
      converted to its load dtype), ``index`` (int32 or int64) each element's position along the
      reduced axes (row-major over them in their original order when ``uses_index``; otherwise a
      position in memory order); returns a tuple of ``len(identity)`` tiles.
    - ``merge(a, b) -> state``: elementwise and associative (the kernels fold in a fixed tree, not
      left to right); ``merge(identity, s) == merge(s, identity) == s``.
    - ``finish(state, count) -> outputs``: ``count`` the number of reduced elements (an int);
      returns a tuple of ``outputs`` tiles.

    ``along(state, merge) -> state`` folds a tile's rows; by default ``merge`` itself, by halving
    (``tritonml.kernels.combine.merge_along``).

    Dtypes are rules over the inputs' dtypes (a tuple of torch dtypes): ``state_dtypes(dtypes)``
    one torch dtype per state component, ``output_dtypes(dtypes)`` one per output,
    ``load_dtypes(dtypes)`` one per input (default: float16/bfloat16 as float32, the rest as is).
    ``check(dtypes)``, if given, raises TypeError for inputs the reduction does not accept.
    ``identity`` is a tuple with one value per state component, or a rule giving one for the
    inputs' dtypes (MAX's is -inf for floats and the type's minimum for integers).

    ``backward(xs, outputs, grad_outputs, axes) -> grads``, if given, is the reduction's gradient,
    a plain function of torch tensors that ``tritonml.reduce_with`` calls from autograd: ``xs``
    the inputs, ``outputs`` the outputs with the reduced axes kept as size 1 (so they broadcast
    against ``xs``), ``grad_outputs`` one gradient per output of the same shape or None where an
    output received none (never all None), ``axes`` the reduced axes (sorted, non-negative; ()
    for a 0-d input). It returns a tuple with one gradient per input: a tensor of that input's
    shape, or None.
    Without it, inputs that require grad are refused (docs/dsl.md, "Gradients").

    ``jvp(xs, outputs, tangents, axes) -> output_tangents``, if given, is its forward-mode
    derivative (``torch.func.jvp``, ``jacfwd``, ``torch.autograd.forward_ad``), in the same
    conventions: ``tangents`` one per input, of its shape, or None for an input without one
    (never all None); it returns a tuple with one tangent per output, of the output's shape with
    the reduced axes kept (expand a broadcast one), or None for an output without one.
    Without it, inputs that carry a tangent are refused (docs/dsl.md, "Forward mode").

    Args:
        name: The reduction's name, for messages.
        prepare: ``prepare(xs, index) -> state``, a ``@triton.jit`` function.
        merge: ``merge(a, b) -> state``, a ``@triton.jit`` function, associative.
        finish: ``finish(state, count) -> outputs``, a ``@triton.jit`` function.
        identity: A non-empty tuple, one value per state component, or a rule over the inputs'
            dtypes giving one.
        state_dtypes: ``state_dtypes(dtypes)``: one torch dtype per state component.
        output_dtypes: ``output_dtypes(dtypes)``: one torch dtype per output.
        inputs: The number of input tensors (a positive int).
        outputs: The number of outputs (a positive int).
        along: ``along(state, merge) -> state``; None: ``merge`` by halving.
        load_dtypes: ``load_dtypes(dtypes)``: one torch dtype per input; None: the default.
        check: ``check(dtypes)``, raising TypeError for inputs the reduction refuses.
        uses_index: ``prepare``'s ``index`` is row-major over the reduced axes.
        backward: The gradient, ``backward(xs, outputs, grad_outputs, axes) -> grads``.
        jvp: The forward-mode derivative, ``jvp(xs, outputs, tangents, axes) ->
            output_tangents``.

    Raises:
        TypeError: prepare, merge, finish, state_dtypes or output_dtypes is not callable,
            backward or jvp is neither None nor callable, or identity is neither a non-empty
            tuple nor callable.
        ValueError: inputs or outputs is not a positive int.

    Example:
        A sum of one input, from the helpers in ``tritonml.kernels.combine`` (a reduction's own
        ``@triton.jit`` functions must live in a file: Triton reads their source):

        >>> import torch, tritonml
        >>> from tritonml.kernels import combine
        >>> my_sum = tritonml.Reduction(
        ...     "my_sum", combine.keep_value, combine.add_values, combine.finish_value,
        ...     identity=(0.0,), state_dtypes=lambda d: (torch.float32,),
        ...     output_dtypes=lambda d: (torch.float32,))
        >>> tritonml.reduce_with(my_sum, torch.tensor([[1., 2.], [3., 4.]]), axes=0)
        tensor([[4., 6.]])
    """
    name: str
    prepare: Any
    merge: Any
    finish: Any
    identity: Union[Tuple[Any, ...], Callable[[Tuple[torch.dtype, ...]], Tuple[Any, ...]]]
    state_dtypes: Callable[[Tuple[torch.dtype, ...]], Tuple[torch.dtype, ...]]
    output_dtypes: Callable[[Tuple[torch.dtype, ...]], Tuple[torch.dtype, ...]]
    inputs: int = 1
    outputs: int = 1
    along: Any = None
    load_dtypes: Optional[Callable[[Tuple[torch.dtype, ...]], Tuple[torch.dtype, ...]]] = None
    check: Optional[Callable[[Tuple[torch.dtype, ...]], Any]] = None
    uses_index: bool = False
    backward: Optional[Callable[..., Tuple[Optional[torch.Tensor], ...]]] = None
    jvp: Optional[Callable[..., Tuple[Optional[torch.Tensor], ...]]] = None

    def __post_init__(self) -> None:
        for name in ("prepare", "merge", "finish", "state_dtypes", "output_dtypes"):
            if not callable(getattr(self, name)):
                raise TypeError(f"{name}: expected a function (prepare, merge, finish: @triton.jit "
                                f"functions), got {type(getattr(self, name)).__name__}")
        for name, form in (("backward", "(xs, outputs, grad_outputs, axes) -> grads"),
                           ("jvp", "(xs, outputs, tangents, axes) -> output_tangents")):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"{name}: expected None or a function of torch tensors {form}, "
                                f"got {type(value).__name__}")
        if not callable(self.identity) and (not isinstance(self.identity, tuple)
                                            or not self.identity):
            raise TypeError(f"identity: expected a non-empty tuple (one value per state component)"
                            f" or a function of the inputs' dtypes giving one, got "
                            f"{self.identity!r}")
        for name in ("inputs", "outputs"):
            value = getattr(self, name)
            if type(value) is not int or value < 1:
                raise ValueError(f"{name}: expected a positive int, got {value!r}")
        if self.along is None:
            object.__setattr__(self, "along", _combine.merge_along)
        # functions from a module that imports triton alone run in the interpreter too
        for name in ("prepare", "merge", "finish", "along"):
            _triton_compat.make_language_visible(getattr(self, name))

    def derivatives(self, reduce: Callable[..., Any]) -> Tuple[Optional[Callable[..., Any]],
                                                                 Optional[Callable[..., Any]]]:
        """``(backward, jvp)``, as ``tritonml.reduce_with``'s autograd calls them: a Reduction's
        own. A built-in record derives them from its derivative rule, with ``reduce(t, function,
        axes)`` the caller's differentiable reduction (``ReduceRecord.derivatives``)."""
        return self.backward, self.jvp

    # --- what the kernels need (tritonml/launchers/reduce.py: reduce_work) ---
    @property
    def returns_index(self) -> bool:
        return self.uses_index

    def kernel_state(self, dtypes: Tuple[torch.dtype, ...],
                     index_64: bool) -> Tuple[Tuple[Any, ...], Tuple[Any, ...], Tuple[Any, ...]]:
        """``(LOAD_DTYPES, STATE_DTYPES, IDENTITIES)`` as Triton dtypes, for inputs of ``dtypes``."""
        load = (self.load_dtypes(dtypes) if self.load_dtypes is not None
                else tuple(default_load_dtype(d) for d in dtypes))
        state = tuple(self.state_dtypes(dtypes))
        identity = self.identity_for(dtypes)
        if len(state) != len(identity):
            raise ValueError(f"reduction: {self.name}'s state_dtypes gives {len(state)} dtypes for "
                             f"a state of {len(identity)} components (identity)")
        if len(load) != len(dtypes):
            raise ValueError(f"reduction: {self.name}'s load_dtypes gives {len(load)} dtypes for "
                             f"{len(dtypes)} input(s)")
        for rule, chosen in (("load_dtypes", load), ("state_dtypes", state)):
            unknown = [d for d in chosen if d not in TL_DTYPE]
            if unknown:
                raise TypeError(f"reduction: {self.name}'s {rule} gives {unknown[0]!r}, which the "
                                "kernels do not support (use a float or integer torch dtype)")
        return (tuple(TL_DTYPE[d] for d in load), tuple(TL_DTYPE[d] for d in state), identity)

    def identity_for(self, dtypes: Tuple[torch.dtype, ...]) -> Tuple[Any, ...]:
        """The state's identity for inputs of ``dtypes``."""
        return tuple(self.identity(dtypes) if callable(self.identity)  # pyright: ignore[reportCallIssue]
                     else self.identity)

    # --- what the tuner needs (tritonml_autotune.select.choose_reduce), as plain numbers ---
    def state_bytes(self, dtypes: Tuple[torch.dtype, ...]) -> int:
        """Bytes of one partial state (a lane of a tile, an entry of a split's workspace)."""
        return sum(d.itemsize for d in self.state_dtypes(dtypes))

    def out_bytes(self, dtypes: Tuple[torch.dtype, ...]) -> int:
        """Bytes of one output element, as the tuner counts them: the first input's dtype."""
        return dtypes[0].itemsize

    def state_values(self, dtypes: Tuple[torch.dtype, ...]) -> int:
        """The number of state components (the tuner's register class: one value, or two)."""
        return len(self.state_dtypes(dtypes))


__all__ = ["Reduction", "default_load_dtype"]
