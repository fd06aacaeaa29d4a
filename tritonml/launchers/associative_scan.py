"""The launcher of ``tritonml.associative_scan`` (docs/dsl.md): scans of tuple states under a
user's ``@triton.jit`` combine function, on the scan kernels of tritonml/kernels/scan.py; also
the launcher that the built-in tuple-state scans (``StateScan`` records, e.g.
``tritonml.linear_recurrence``) run through."""
from __future__ import annotations

from typing import Optional

import torch

from tritonml_autotune import select
from tritonml_autotune.configs import ScanConfig

from ..core import checks as _checks, layout as _layout
from ..core.dtypes import ACC_DTYPE, ACC_TORCH_DTYPE
from ..records import state_combine as _state_combine
from . import scan_checks as _scan_checks
from .scan_work import carry_tensors, empty_carry, state_work


def associative_scan_states(combine_fn, xs, axis, *, reverse=False, exclusive=False,
                            identity=None, initial=None, out=None, config=None, store=None,
                            return_carry=False):
    """The launcher of ``tritonml.associative_scan`` (see there and docs/dsl.md): validates every
    argument before anything is allocated or launched, then runs the scan kernels on a state with
    one component per tensor of ``xs``. Returns the tuple of outputs.

    ``store`` (library-internal, e.g. ``tritonml.linear_recurrence``): one bool per component, or
    None for all; a component with False is scanned but never written, and its entry in the
    returned tuple is None (``out`` must then be None).

    ``return_carry``: return ``(outputs, carries)``, ``carries`` each component's last inclusive
    state in its accumulation dtype (what ``initial`` takes to continue the scan exactly)."""
    # --- validate (nothing is launched or written before every check has passed) ---
    xs = _scan_checks.as_tensors("xs", xs, None)
    if not xs:
        raise ValueError("xs: is empty; pass at least one tensor")
    k = len(xs)
    for i, x in enumerate(xs):
        _checks.check_tensor(f"xs[{i}]", x)
    shape, device = tuple(xs[0].shape), xs[0].device
    for i, x in enumerate(xs[1:], 1):
        if tuple(x.shape) != shape:
            raise ValueError(f"xs[{i}]: shape {tuple(x.shape)} does not match xs[0]'s shape "
                             f"{shape}; every tensor of xs must have one shape")
        if x.device != device:
            raise ValueError(f"xs[{i}]: tensor is on {x.device} but xs[0] is on {device}; "
                             "tensors must be on the same device")
    axis, reverse, exclusive, identity = _scan_checks.check_state_scan(
        combine_fn, k, axis, len(shape), reverse, exclusive, identity)
    initials = None
    if initial is not None:
        initials = _scan_checks.as_tensors("initial", initial, k)
        for i, (init, x) in enumerate(zip(initials, xs)):
            _checks.check_readable(f"initial[{i}]", init)
            _scan_checks.check_carry_in(f"initial[{i}]", init, shape, axis, x.dtype, "xs's",
                                        f"xs[{i}]'s")
            if init.device != device:
                raise ValueError(f"initial[{i}]: tensor is on {init.device} but xs is on {device}; "
                                 "tensors must be on the same device")
    outs = None
    if out is not None:
        outs = _scan_checks.as_tensors("out", out, k)
        for i, (o, x) in enumerate(zip(outs, xs)):
            name = f"out[{i}]"
            _checks.check_out(o, x, shape=shape, dtype=x.dtype, name=name, allow_alias_of=x)
            for j, other in enumerate(xs):
                if j != i and _checks.overlaps(o, other):
                    raise ValueError(f"{name}: overlaps xs[{j}]; an output may alias only its own "
                                     "input (xs[i] for out[i])")
            for j, other in enumerate(outs[:i]):
                if _checks.overlaps(o, other):
                    raise ValueError(f"{name}: overlaps out[{j}]; every output needs its own memory")
            for j, init in enumerate(initials or ()):
                if _checks.overlaps(o, init):
                    raise ValueError(f"{name}: overlaps initial[{j}]; the initial is read while out "
                                     "is written, so pass an initial that does not overlap out")
    if config is not None:
        if not isinstance(config, ScanConfig):
            raise TypeError(f"config: expected a ScanConfig, got {type(config).__name__}")
        config.validate()

    if store is not None:
        store = tuple(bool(s) for s in store)
        if len(store) != k or outs is not None:
            raise ValueError(f"store: expected {k} flags and no out, got {store!r}")
    return_carry = _checks.check_bool("return_carry", return_carry)
    if return_carry and identity is None and initials is None and shape[axis] == 0:
        raise ValueError("return_carry: a scan with neither identity nor initial over an empty "
                         "axis has no last state; pass identity= or initial=")
    return state_scan(combine_fn, xs, axis, reverse=reverse, exclusive=exclusive,
                      identity=identity, initials=initials, outs=outs, config=config, store=store,
                      return_carry=return_carry)


def state_scan(combine_fn, xs: tuple, axis: int, *, reverse: bool, exclusive: bool,
               identity: Optional[tuple], initials: Optional[tuple], outs: Optional[tuple],
               config: Optional[ScanConfig], store: Optional[tuple], return_carry: bool):
    """``associative_scan_states`` on arguments its checks have passed (normalized: tuples,
    ``axis`` non-negative), for callers that have checked their own arguments, as the built-in
    tuple-state scans do (tritonml/launchers/recurrence.py): nothing is checked twice."""
    k, shape, device = len(xs), tuple(xs[0].shape), xs[0].device
    carries = None
    if return_carry:
        initials, carries = carry_tensors(initials, xs, axis)

    # --- outputs, layouts, config ---
    if outs is None:
        # A component that is not stored gets its input as a stand-in output: its strides make a
        # valid layout, and the kernel never writes through it.
        outs = tuple(torch.empty_like(x, memory_format=torch.preserve_format)
                     if store is None or store[i] else x for i, x in enumerate(xs))

    def returned(outputs):
        if store is not None:
            outputs = tuple(o if kept else None for o, kept in zip(outputs, store))
        return (outputs, carries) if return_carry else outputs
    if xs[0].numel() == 0:
        for i, carry in enumerate(carries or ()):
            empty_carry(carry, initials[i] if initials else None, identity[i] if identity else 0)
        return returned(outs)
    # the carries (return_carry) are written through the initials' strides, which they share
    init_strides = tuple(t.stride() for t in (carries or initials or ()))
    layouts = _layout.axis_layouts(shape, tuple(x.stride() for x in xs),
                                   tuple(o.stride() for o in outs), axis, init_strides or None)
    if config is None:
        element_bytes = (sum(x.dtype.itemsize for x in xs),
                         sum(ACC_TORCH_DTYPE[x.dtype].itemsize for x in xs))
        name = f"{combine_fn.fn.__module__}.{combine_fn.fn.__qualname__}"
        config = select.choose_scan(layouts[0], xs[0].dtype, device, name,
                                    element_bytes=element_bytes).config
    combine, scan_combine = _state_combine.state_adapters(combine_fn, k, identity is None)
    work = state_work(layouts, combine, scan_combine, identity,
                      tuple(ACC_DTYPE[x.dtype] for x in xs),
                      tuple(ACC_TORCH_DTYPE[x.dtype] for x in xs),
                      tuple(x.is_neg() for x in xs), tuple(o.is_neg() for o in outs),
                      tuple(t.is_neg() for t in initials) if initials else (False,) * k,
                      reverse=reverse, exclusive=exclusive, config=config,
                      has_initial=initials is not None, store=store,
                      store_carry=carries is not None)
    try:
        work.run(x=xs, out=outs, initial=initials, carry=carries)
    except Exception as error:
        # The user's own error, once, at its line (not Triton's wrappers around it).
        failure = _state_combine.combine_error(error, combine_fn, k)
        if failure is None:
            raise
        raise failure from None
    return returned(outs)

