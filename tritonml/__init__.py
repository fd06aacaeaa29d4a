"""tritonml: DirectML's scan and reduction operators as Triton kernels on torch tensors.

CUDA tensors run compiled Triton; CPU tensors run the same kernels through Triton's interpreter
(chosen at import, see ``tritonml.core.backend``).
"""
# first: chooses compiled or interpreted Triton before any kernel is defined
from .core import backend as _backend

from .records.reduce_function import ReduceFunction
from .torch_ops.reduce import reduce
from .torch_ops.reduce_with import reduce_with
from .records.reduction import Reduction
from .torch_ops.scan import cumulative_product, cumulative_sum
from .torch_ops.segment import segment_reduce, segment_scan
from .torch_ops.scatter import bincount, index_add, index_reduce, scatter_add, scatter_reduce
from .torch_ops.scatter_forms import (scatter, scatter_max, scatter_min, segment_coo,
                                      segment_max_coo, segment_min_coo)
from .dsl import CombineError, associative_scan
from .torch_ops.recurrence import linear_recurrence
from .torch_ops.cumextreme import cummax, cummin, logcumsumexp
from .torch_ops.extremes import aminmax, max_with_indices, min_with_indices
from .torch_ops.moments import std, std_mean, var, var_mean
from .torch_ops.nanreduce import nanmean, nansum
from .routing import disable, enable, use_tritonml
from . import tuning
from . import reductions

import torch as _torch
if _torch.distributed.is_available():
    # DTensor rules for torch.ops.tritonml.* (torch_ops/dtensor.py), and tritonml.distributed
    # that runs them, given when torch.distributed.tensor is imported (at once if it already is):
    # no DTensor exists before, and importing it here would add about 0.8 s to import tritonml.
    import wrapt as _wrapt
    from .torch_ops import dtensor as _dtensor_rules

    def _give_dtensor_rules(_module) -> None:
        import importlib
        importlib.import_module(".distributed", __name__)
        _dtensor_rules.register()

    _wrapt.register_post_import_hook(_give_dtensor_rules, "torch.distributed.tensor")

from tritonml_cli import __version__  # one place, importable without torch (the CLI needs it)
INTERPRET: bool = _backend.INTERPRET
"""True when tritonml's kernels run through Triton's interpreter (CPU tensors), False when
Triton compiles them for the GPU; chosen once, at import (``tritonml.core.backend``)."""

__all__ = ["cumulative_sum", "cumulative_product", "reduce", "ReduceFunction",
           "associative_scan", "CombineError", "linear_recurrence", "reduce_with", "Reduction",
           "reductions", "segment_reduce", "segment_scan", "scatter_reduce", "scatter_add",
           "index_add", "index_reduce", "bincount", "scatter", "scatter_max", "scatter_min",
           "segment_coo", "segment_max_coo", "segment_min_coo", "cummax", "cummin", "logcumsumexp",
           "max_with_indices", "min_with_indices", "aminmax", "var", "std", "var_mean", "std_mean",
           "nansum", "nanmean",
           "enable", "disable", "use_tritonml", "tuning", "INTERPRET", "__version__"]


def __getattr__(name):
    # ``tritonml.distributed`` on first use: importing it brings in torch.distributed's machinery,
    # which ``import tritonml`` alone should not pay for.
    if name == "distributed":
        import importlib
        return importlib.import_module(".distributed", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
