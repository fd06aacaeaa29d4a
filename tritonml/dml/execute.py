"""Running a validated operator on buffers: ``compile_operator(desc) -> CompiledOperator``, and
``compiled(input_buffer, output_buffer)``.

A buffer plus a TensorDesc becomes one ``torch.as_strided`` view, and the views go to tritonml's
scan and reduce launchers unchanged (no copies). Every problem with a buffer is a DescriptorError
naming it (``input_buffer`` / ``output_buffer``), raised before anything is written; that includes
the tensors torch cannot hand to a kernel (sparse, quantized, nested, meta, ZeroTensor), which
``tritonml.core.checks.check_readable`` finds and the rest of tritonml reports as a TypeError: here a
buffer is one more field of the call, so its problems are reported like the descs'.
"""
from __future__ import annotations

from typing import Optional

import torch

from ..core import backend as _backend, checks as _checks
from ..launchers.reduce import reduce_axes
from ..records.builtin_reductions import RECORDS
from ..launchers.scan import PRODUCT, SUM, cumulative_scan
from .descs import SCAN_DESCS, CumulativeSummationOperatorDesc, OperatorDesc, ReduceOperatorDesc, TensorDesc
from .enums import DEFAULT_FEATURE_LEVEL, AxisDirection, FeatureLevel, LevelArg, parse_level
from .errors import DescriptorError
from .validate import check


def _refused(name: str, error: Exception) -> DescriptorError:
    """A core check's error (``"name: rule"``) as a DescriptorError at ``name``."""
    return DescriptorError.at(name, str(error).split(": ", 1)[-1])


def _flag_problem(buffer: torch.Tensor, desc: TensorDesc) -> Optional[str]:
    """Why a buffer torch flags instead of materializing cannot be bound through ``desc``, or None."""
    if buffer.dtype == desc.data_type.torch_dtype:
        return None  # viewed directly: the flag stays on the view and the kernels honour it
    if buffer.is_neg():
        return (f"is a {buffer.dtype} tensor with torch's negative bit set (is_neg()): its memory "
                f"holds the negation of its values, so its bytes mean nothing as "
                f"{desc.data_type.name}; bind a {desc.data_type.torch_dtype} buffer (read and written "
                "through the flag) or call .resolve_neg() first")
    if buffer.is_conj():
        return (f"is a {buffer.dtype} tensor with torch's conjugate bit set (is_conj()): its memory "
                f"holds the conjugates of its values, so its bytes mean nothing as "
                f"{desc.data_type.name}; call .resolve_conj() first")
    return None


def _bind(name: str, buffer, desc: TensorDesc) -> torch.Tensor:
    """``buffer`` (raw storage of any dtype) viewed through ``desc``: checks, then one as_strided.

    A buffer of the desc's own dtype is viewed directly, keeping torch's negative bit if it has one
    (the kernels flip the sign on load and store); any other buffer is reinterpreted byte for byte,
    which a flagged buffer refuses (its bytes do not hold its values).
    """
    try:
        _checks.check_readable(name, buffer)
    except TypeError as e:
        raise _refused(name, e) from None
    try:
        _backend.check_device(name, buffer)
    except ValueError as e:
        raise _refused(name, e) from None
    if not buffer.is_contiguous():
        raise DescriptorError.at(name, "a buffer is raw storage and must be contiguous; the desc's "
                                       "strides describe the layout")
    flag_problem = _flag_problem(buffer, desc)
    if flag_problem is not None:
        raise DescriptorError.at(name, flag_problem)
    nbytes = buffer.numel() * buffer.element_size()
    total = desc.total_tensor_size_in_bytes
    if nbytes < total:
        raise DescriptorError.at(name, f"holds {nbytes} bytes, less than the desc's "
                                       f"total_tensor_size_in_bytes ({total})")
    address = buffer.data_ptr()
    if address % desc.element_size:
        raise DescriptorError.at(name, f"starts at an address that is not a multiple of the element "
                                       f"size ({desc.element_size} bytes for {desc.data_type.name})")
    alignment = desc.guaranteed_base_offset_alignment
    if alignment and address % alignment:
        raise DescriptorError.at(name, f"starts at an address that is not a multiple of the desc's "
                                       f"guaranteed_base_offset_alignment ({alignment})")
    if buffer.dtype == desc.data_type.torch_dtype:
        return buffer.as_strided(desc.sizes, desc.effective_strides)
    used = (desc.last_index + 1) * desc.element_size
    try:
        typed = buffer.reshape(-1).view(torch.uint8)[:used].view(desc.data_type.torch_dtype)
    except RuntimeError as e:
        raise DescriptorError.at(name, f"cannot be viewed as raw bytes ({e})") from None
    return typed.as_strided(desc.sizes, desc.effective_strides)


class CompiledOperator:
    """A validated operator desc, ready to run: ``compiled(input_buffer, output_buffer)``.

    Buffers are torch tensors of any dtype used as raw storage (contiguous, on the device tritonml
    runs on), at least ``total_tensor_size_in_bytes`` long, addressed through the descs' sizes and
    strides. A buffer of the desc's own dtype may carry torch's negative bit (``is_neg()``): its
    values are read and written through the flag. The cumulative operators may run in place
    (``output_buffer`` is ``input_buffer`` with the same layout). Only the elements the output desc
    addresses are written. Returns ``output_buffer``.

    Made by ``compile_operator``, which validates the desc first; the constructor itself checks
    nothing.

    Args:
        desc: The operator desc to run.
        feature_level: The level it was validated at (None: tritonml's own support).

    Attributes:
        desc: The operator desc.
        feature_level: The level it was validated at (None: tritonml's own support).

    Example:
        >>> import torch
        >>> from tritonml.dml import CumulativeSummationOperatorDesc, TensorDesc, compile_operator
        >>> t = TensorDesc("FLOAT32", [3])
        >>> compiled = compile_operator(CumulativeSummationOperatorDesc(t, t, axis=0))
        >>> compiled
        CompiledOperator(CumulativeSummationOperatorDesc, feature_level=5_0)
        >>> buffer = torch.tensor([1.0, 2.0, 3.0])
        >>> compiled(buffer, buffer)      # in place
        tensor([1., 3., 6.])
    """

    desc: OperatorDesc
    feature_level: Optional[FeatureLevel]

    def __init__(self, desc: OperatorDesc, feature_level: Optional[FeatureLevel]) -> None:
        self.desc = desc
        self.feature_level = feature_level

    def __repr__(self) -> str:
        level = "None" if self.feature_level is None else str(self.feature_level)
        return f"CompiledOperator({type(self.desc).__name__}, feature_level={level})"

    def __call__(self, input_buffer: torch.Tensor, output_buffer: torch.Tensor) -> torch.Tensor:
        """Run the operator: read ``input_buffer``, write ``output_buffer`` (outside autograd).

        Args:
            input_buffer: Raw storage for the input desc: a contiguous tensor of any dtype, on the
                device tritonml runs on, at least the desc's ``total_tensor_size_in_bytes`` long.
            output_buffer: Raw storage for the output desc, likewise; the cumulative operators may
                pass ``input_buffer`` itself (in place, same layout).

        Returns:
            ``output_buffer``.

        Raises:
            DescriptorError: At ``input_buffer`` / ``output_buffer``, before anything is written:
                a buffer torch cannot hand to a kernel (sparse, quantized, nested, meta,
                ZeroTensor), on the wrong device, not contiguous, too small, misaligned, a
                reinterpreted buffer with torch's negative or conjugate bit, buffers on two
                devices, or an output that overlaps the input (other than exactly, in place, for
                the cumulative operators).
        """
        # Buffers are storage, not autograd values: viewing and writing them is outside autograd.
        with torch.no_grad():
            self._execute(input_buffer, output_buffer)
        return output_buffer

    def _execute(self, input_buffer: torch.Tensor, output_buffer: torch.Tensor) -> None:
        desc = self.desc
        x = _bind("input_buffer", input_buffer, desc.input_tensor)
        out = _bind("output_buffer", output_buffer, desc.output_tensor)
        if input_buffer.device != output_buffer.device:
            raise DescriptorError.at("output_buffer", f"is on {output_buffer.device} but input_buffer "
                                                      f"is on {input_buffer.device}; both must be on "
                                                      "one device")
        is_scan = isinstance(desc, SCAN_DESCS)
        if _checks.overlaps(x, out) and not (is_scan and _checks.same_view(x, out)):
            rule = ("the output's elements overlap the input's; the output may alias the input "
                    "only exactly (same buffer, same sizes and strides) for in-place execution"
                    if is_scan else
                    "the output's elements overlap the input's; DML_OPERATOR_REDUCE does not run "
                    "in place")
            raise DescriptorError.at("output_buffer", rule)
        if isinstance(desc, ReduceOperatorDesc):
            kwargs = {}
            if RECORDS[desc.function].returns_index:
                kwargs["index_dtype"] = desc.output_tensor.data_type.torch_dtype
            reduce_axes(x, list(desc.axes), RECORDS[desc.function], keepdims=True, out=out, **kwargs)
        else:
            combine = SUM if isinstance(desc, CumulativeSummationOperatorDesc) else PRODUCT
            cumulative_scan(x, desc.axis, combine,
                            reverse=desc.axis_direction is AxisDirection.DECREASING,
                            exclusive=desc.exclusive, out=out)


def compile_operator(desc: OperatorDesc, feature_level: LevelArg = DEFAULT_FEATURE_LEVEL
                     ) -> CompiledOperator:
    """Validate ``desc`` at ``feature_level`` (see ``validate``) and return a CompiledOperator.

    Args:
        desc: An operator desc.
        feature_level: A FeatureLevel (or ``"4_0"``); default 5_0; None: tritonml's own, wider
            support.

    Returns:
        The CompiledOperator: call it with ``(input_buffer, output_buffer)``.

    Raises:
        DescriptorError: Listing every broken rule.
        TypeError: ``desc`` is not an operator desc.

    Example:
        >>> import torch
        >>> from tritonml.dml import ReduceOperatorDesc, TensorDesc, compile_operator
        >>> desc = ReduceOperatorDesc("ARGMAX", TensorDesc("FLOAT32", [4]),
        ...                           TensorDesc("UINT32", [1]), axes=[0])
        >>> compiled = compile_operator(desc, feature_level="4_1")
        >>> compiled(torch.tensor([3.0, 7.0, 7.0, 1.0]), torch.zeros(1, dtype=torch.uint32))
        tensor([1], dtype=torch.uint32)
    """
    level = parse_level(feature_level)
    check(desc, level)
    return CompiledOperator(desc, level)
