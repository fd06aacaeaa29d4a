"""Argument checks of the scan launchers (tritonml/launchers/scan.py, associative_scan.py,
recurrence.py): each raises, naming the argument, before anything is allocated or launched."""
from __future__ import annotations

import contextlib
import threading
from typing import Optional

import torch

from ..core import checks as _checks
from ..core.dtypes import ACC_TORCH_DTYPE
from ..records import state_combine as _state_combine


# ``prechecked``: the public functions (tritonml/torch_ops/scan.py, recurrence.py) check what
# must be checked before torch's dispatcher (readable tensors, the axis and flags the schema
# types, out's grad), then call a torch op whose kernel is a launcher here; the launch of exactly
# those tensors skips those checks. Any other launch (a vmap rule's tensors, a direct
# ``torch.ops`` call) checks everything.
_PRECHECKED = threading.local()


@contextlib.contextmanager
def prechecked(*tensors):
    """While entered, the next launch of exactly ``tensors`` (the same objects, None included, in
    the launcher's order) takes them as checked by the public function: readable, the axis
    normalized, the flags bools, an out not requiring grad."""
    _PRECHECKED.tensors = tensors
    try:
        yield
    finally:
        _PRECHECKED.tensors = None


def take_prechecked(*tensors) -> bool:
    """Whether ``tensors`` are those ``prechecked`` holds (then consumed: one launch per call)."""
    held = getattr(_PRECHECKED, "tensors", None)
    if held is None or len(held) != len(tensors) or any(a is not b for a, b in zip(held, tensors)):
        return False
    _PRECHECKED.tensors = None
    return True


def check_carry_in(name: str, initial, shape: tuple, axis: int, dtype: torch.dtype,
                   shape_of: str, dtype_of: str) -> None:
    """A carry-in ``initial`` has the inputs' ``shape`` without ``axis`` (normalized) and their
    ``dtype`` or its accumulation dtype (the kernels read the initial in the latter, so a carry
    kept in it continues a chunked scan with nothing rounded). ``shape_of`` / ``dtype_of``: whose
    shape and dtype the errors name ("x's", "gates'")."""
    expected = tuple(shape[:axis]) + tuple(shape[axis + 1:])
    if tuple(initial.shape) != expected:
        raise ValueError(f"{name}: shape {tuple(initial.shape)} does not match {shape_of} shape "
                         f"without axis {axis}, {expected}")
    accumulation = ACC_TORCH_DTYPE.get(dtype, dtype)
    if initial.dtype not in (dtype, accumulation):
        raise TypeError(f"{name}: dtype {initial.dtype} is neither {dtype_of} dtype {dtype} nor "
                        f"its accumulation dtype {accumulation} (a carry returned by "
                        "return_carry=True)")


def check_initial_meta(initial, x: torch.Tensor, axis: int) -> None:
    """What a fake kernel can check of ``initial`` (None passes): ``check_carry_in`` against x."""
    if initial is not None:
        check_carry_in("initial", initial, tuple(x.shape), axis, x.dtype, "x's", "x's")


def check_initial(initial, x: torch.Tensor, axis: int, readable_checked: bool = False) -> None:
    """``initial``: a tensor of x's shape without ``axis``, x's dtype and device (any strides);
    ``readable_checked``: the caller has run ``check_readable`` on it already."""
    if not isinstance(initial, torch.Tensor):
        raise TypeError(f"initial: expected a torch.Tensor or None, got "
                        f"{_checks._type_name(initial)}")
    if not readable_checked:
        _checks.check_readable("initial", initial)
    check_initial_meta(initial, x, axis)
    if initial.device != x.device:
        raise ValueError(f"initial: tensor is on {initial.device} but x is on {x.device}; "
                         "tensors must be on the same device")


def check_out_initial(out: torch.Tensor, initial) -> None:
    """``out`` may be x itself, but never shares memory with ``initial`` (read while out is
    written)."""
    if initial is not None and _checks.overlaps(out, initial):
        raise ValueError("initial: overlaps out; the initial is read while out is written, so "
                         "pass an initial whose memory does not overlap out (e.g. a clone)")



def as_tensors(name: str, value, arity: Optional[int]) -> tuple:
    """A tensor or a tuple/list of tensors as a tuple (``arity``: the length it must have)."""
    if isinstance(value, torch.Tensor):
        values = (value,)
    elif isinstance(value, (tuple, list)):
        values = tuple(value)
    else:
        raise TypeError(f"{name}: expected a torch.Tensor or a tuple of tensors, got "
                        f"{_checks._type_name(value)}")
    if arity is not None and len(values) != arity:
        raise ValueError(f"{name}: has {len(values)} tensor(s) but xs has {arity}; pass one per "
                         "tensor of xs")
    for i, t in enumerate(values):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}[{i}]: expected a torch.Tensor, got {_checks._type_name(t)}")
    return values


def positional_parameters(jit_fn) -> list:
    """The parameters of a ``@triton.jit`` function that its caller passes by position (a
    combine's operands: keyword-only ones are not the states)."""
    import inspect

    return [p for p in inspect.signature(jit_fn.fn).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def own_statements(fn):
    """``(def node, its first line, the nodes of its own body)`` of a ``@triton.jit`` function's
    source (not those of functions defined inside it), or None where the source cannot be
    read."""
    import ast
    import inspect
    import textwrap
    try:
        lines, first = inspect.getsourcelines(fn.fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    body = tree.body[0]
    nodes, stack = [], list(body.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        nodes.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return body, first, nodes


def wrong_returns(nodes, count: int):
    """The first ``return`` of ``nodes`` (a function's own, ``own_statements``) that spells a
    tuple of other than ``count`` values, or plainly a single value: ``(node, its number of
    values, 1 for a single value)``; None where every return may be ``count`` values."""
    import ast
    for node in sorted((n for n in nodes if isinstance(n, ast.Return)), key=lambda n: n.lineno):
        value = node.value
        if isinstance(value, (ast.Tuple, ast.List)):
            if len(value.elts) != count:
                return node, len(value.elts)
        elif value is None or isinstance(value, (ast.BinOp, ast.UnaryOp, ast.Compare,
                                                 ast.Constant, ast.BoolOp)):
            return node, 1
    return None


def check_combine_fn(combine_fn, arity: int) -> None:
    """``combine_fn``: a ``@triton.jit`` function of two states returning a state of ``arity``
    values. Checked from its signature and its source: a ``return`` somewhere, each ``return`` that
    spells a tuple of ``arity`` values (or not plainly a single value), and each constant index of a
    parameter (``b[2]``) within the state; anything else is checked when it compiles (a
    ``tl.static_assert`` in the generated adapter, tritonml/records/state_combine.py). Errors name
    the function and the line."""
    import ast

    from ..core.triton_compat import is_jit_function
    if not is_jit_function(combine_fn):
        raise TypeError(f"combine_fn: expected a @triton.jit function, got "
                        f"{_checks._type_name(combine_fn)}")
    name = _state_combine.qualified_name(combine_fn)
    params = positional_parameters(combine_fn)
    if len(params) != 2:
        raise TypeError(f"combine_fn: {name} ({_state_combine.where(combine_fn)}) takes "
                        f"{len(params)} parameter(s); it must take exactly two states (the earlier "
                        f"and the later operand), each a tuple of {arity} value(s)")
    source = own_statements(combine_fn)
    if source is None:
        return
    body, first, nodes = source

    def at(node) -> str:
        return f"combine_fn: {name} ({_state_combine.where(combine_fn, first + node.lineno - 1)})"
    if not any(isinstance(node, ast.Return) for node in nodes):
        raise ValueError(f"{at(body)} has no return statement; it must return a tuple of {arity} "
                         "value(s), one per tensor of xs (e.g. return (a[0] + b[0],))")
    wrong = wrong_returns(nodes, arity)
    if wrong is not None:
        node, count = wrong
        if isinstance(node.value, (ast.Tuple, ast.List)):
            raise ValueError(f"{at(node)} returns {count} value(s); it must "
                             f"return a tuple of {arity}, one per tensor of xs")
        raise ValueError(f"{at(node)} returns a single value; it must return a tuple of "
                         f"{arity} value(s), one per tensor of xs (e.g. (a[0] + b[0],))")
    # A parameter reassigned in the function may hold anything: only the states are checked.
    states = {p.name for p in params} - {node.id for node in nodes if isinstance(node, ast.Name)
                                         and isinstance(node.ctx, ast.Store)}
    for node in sorted(nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id in states and isinstance(node.slice, ast.Constant)
                and type(node.slice.value) is int
                and not -arity <= node.slice.value < arity):
            raise ValueError(f"{at(node)} reads {node.value.id}[{node.slice.value}], but each "
                             f"state holds {arity} component(s), one per tensor of xs: "
                             f"{node.value.id}[0] to {node.value.id}[{arity - 1}]")


def check_state_scan(combine_fn, arity: int, axis, rank: int, reverse, exclusive,
                     identity) -> tuple:
    """The checks a tuple-state scan's options get (``tritonml.associative_scan``, with or without
    segments): ``(axis, reverse, exclusive, identity)`` normalized; an exclusive scan needs the
    identity."""
    check_combine_fn(combine_fn, arity)
    axis = _checks.normalize_axis(axis, rank)
    reverse = _checks.check_bool("reverse", reverse)
    exclusive = _checks.check_bool("exclusive", exclusive)
    identity = check_identity(identity, arity)
    if exclusive and identity is None:
        raise ValueError("identity: an exclusive scan needs the combine's identity (the state "
                         "its first output holds); pass identity=(one value per tensor of xs)")
    return axis, reverse, exclusive, identity


def check_identity(identity, arity: int) -> Optional[tuple]:
    if identity is None:
        return None
    if isinstance(identity, (int, float)) and not isinstance(identity, bool) and arity == 1:
        identity = (identity,)
    if not isinstance(identity, (tuple, list)):
        raise TypeError(f"identity: expected a tuple of {arity} number(s) or None, got "
                        f"{_checks._type_name(identity)}")
    if len(identity) != arity:
        raise ValueError(f"identity: has {len(identity)} value(s) but xs has {arity} tensor(s); "
                         "give one identity per tensor")
    for i, value in enumerate(identity):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"identity[{i}]: expected an int or a float, got "
                            f"{_checks._type_name(value)}")
    return tuple(identity)


