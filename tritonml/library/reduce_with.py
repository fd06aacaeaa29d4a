"""``tritonml.reduce_with``: a user-defined reduction (``tritonml.Reduction``) over axes.

A plain function, not a torch op: the reduction is a Python object (its ``@triton.jit``
functions and dtype rules) that no op schema can carry. So no autograd (outputs never require
grad) and no vmap; under torch.compile it runs eagerly (``torch.compiler.disable``: a graph break).
DTensors reduce locally when no reduced dim is sharded (``library/_dtensor.py``).
"""
from __future__ import annotations

from typing import Optional

import torch

from .._config import ReduceConfig
from ..ops.reduce_with import reduce_with_axes
from . import _dtensor


@torch.compiler.disable
def reduce_with(reduction, xs, axes=None, *, keepdims: bool = True,
                config: Optional[ReduceConfig] = None):
    """Reduce ``axes`` of ``xs`` with the user-defined ``reduction`` (a ``tritonml.Reduction``).

    ``xs``: a tensor, or a tuple of tensors of one shape and device (any dtypes, any strides) for a
    reduction of several inputs. ``axes``: an int or a sequence of distinct ints (negative count
    from the end), None for every axis. ``keepdims``: keep reduced dims as size 1 (the default, as
    DirectML). ``config``: a ``ReduceConfig`` forcing the regime and tile.

    Returns a tensor for a reduction with one output, else a tuple of them, in the dtypes the
    reduction declares. Errors (``TypeError``/``ValueError`` naming the argument) are raised before
    anything is launched. No autograd: the outputs never require grad.

    >>> import torch, tritonml
    >>> x = torch.tensor([[2., 4., 4., 4.], [5., 5., 7., 9.]])
    >>> var, mean = tritonml.reduce_with(tritonml.reductions.welford, x, axes=1)
    >>> var.flatten().tolist(), mean.flatten().tolist()
    ([1.0, 3.6666667461395264], [3.5, 6.5])
    """
    if _dtensor.any_dtensor(xs):
        return _dtensor.reduce_with(
            lambda local: reduce_with(reduction, local, axes, keepdims=keepdims, config=config),
            reduction, xs, axes, keepdims)
    with torch.no_grad():
        outs = reduce_with_axes(reduction, xs, axes, keepdims=keepdims, config=config)
    return outs[0] if len(outs) == 1 else outs
