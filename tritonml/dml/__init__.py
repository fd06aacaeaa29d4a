"""DirectML's descriptor API on top of tritonml's kernels.

People porting DirectML code think in DirectML's structs; this package gives them those structs:

- enums with DirectML's names and directml.h's values (``DataType``, ``AxisDirection``,
  ``ReduceFunction``, ``FeatureLevel``, ``TensorFlags``);
- ``TensorDesc`` (DML_BUFFER_TENSOR_DESC) and the three operator descs
  (DML_CUMULATIVE_SUMMATION / DML_CUMULATIVE_PRODUCT / DML_REDUCE_OPERATOR_DESC), fields in snake_case;
- ``validate`` (every broken rule, each with the path of its field) against a feature level's tensor
  support tables, or against tritonml's wider support with ``feature_level=None``;
- ``compile_operator(desc) -> CompiledOperator``; ``compiled(input_buffer, output_buffer)`` runs it
  on torch tensors used as raw typed storage, addressed through the descs' sizes and strides;
- ``to_dict`` / ``from_dict`` (JSON-compatible), so an operator can live in a file.

Descs are plain data, like DirectML's structs: constructing one checks only the *shape* of the data
(an int where an int belongs, a known enum name); the rules (sizes >= 1, strides, buffer sizes,
feature-level support, ...) are checked by ``validate``/``compile_operator``, which report every
broken rule at once. Buffers are checked when a compiled operator is called, before anything is
written. Every error is a ``DescriptorError`` naming the field path (``input_tensor.strides[2]``) and
the rule; a buffer torch cannot hand to a kernel (sparse, quantized, nested, meta, ZeroTensor) is one
too, at ``input_buffer`` / ``output_buffer``, where the rest of tritonml raises a TypeError. The layer
is thin: a buffer plus a TensorDesc becomes one ``torch.as_strided`` view, and the views go to
tritonml's scan and reduce launchers unchanged (no copies). See docs/dml.md.

Modules, one job each; each imports only the ones above it in this list, so there is no import cycle:

- ``errors``: ``Problem``, ``DescriptorError``;
- ``enums``: the enums and DML_BUFFER_TENSOR_DESC's limits (``ReduceFunction`` is the library's one
  enum, from ``tritonml.records.reduce_function``);
- ``descs``: ``TensorDesc``, the operator descs, JSON (``to_dict`` / ``from_dict``);
- ``support``: the support tables by feature level, ``supported``;
- ``validate``: the rules, ``validate`` / ``check``;
- ``execute``: buffer binding, ``CompiledOperator``, ``compile_operator``.

The one reference upwards is the descs' ``validate`` convenience methods (``desc.validate()``): they
import ``validate`` when called, not when ``descs`` is loaded. Only ``support`` knows the tables, and
only ``validate`` knows the rules.
"""
from .descs import (CumulativeProductOperatorDesc, CumulativeSummationOperatorDesc, OperatorDesc,
                    ReduceOperatorDesc, TensorDesc, calc_buffer_tensor_size, from_dict, packed_strides,
                    to_dict)
from .enums import (DEFAULT_FEATURE_LEVEL, DIMENSION_COUNT_MAX, MAX_ELEMENT_COUNT, UINT32_MAX,
                    UINT64_MAX, AxisDirection, DataType, FeatureLevel, ReduceFunction, TensorFlags)
from .errors import DescriptorError, Problem
from .execute import CompiledOperator, compile_operator
from .support import Support, supported
from .validate import check, validate

__all__ = [
    "DataType", "AxisDirection", "ReduceFunction", "FeatureLevel", "TensorFlags",
    "DEFAULT_FEATURE_LEVEL", "Problem", "DescriptorError",
    "TensorDesc", "CumulativeSummationOperatorDesc", "CumulativeProductOperatorDesc",
    "ReduceOperatorDesc", "calc_buffer_tensor_size", "validate", "check", "supported",
    "compile_operator", "CompiledOperator", "to_dict", "from_dict",
]
