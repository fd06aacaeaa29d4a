"""Ready-made user-defined reductions (``tritonml.Reduction``) for ``tritonml.reduce_with``.

``welford`` (``(var, mean)`` as ``torch.var_mean(x, dim=axes, keepdim=True)``, one pass, in the
parallel update of Chan, Golub and LeVeque), ``welford_biased`` (correction=0), ``welford_m2``
((M2, mean) for any correction), ``max_with_index`` / ``min_with_index`` ((value, index) in one
pass, as torch.max/min with dim), ``aminmax`` ((min, max)), ``nansum``, ``nanmean``. They are
defined with the other operator records, in tritonml/records/ready_reductions.py, whose docstring
gives the state, the dtypes, the NaN and infinity rules and the gradients.

Example:
    >>> import torch, tritonml
    >>> x = torch.tensor([[1., 2., 3.], [2., 4., 6.]])
    >>> var, mean = tritonml.reduce_with(tritonml.reductions.welford, x, axes=1, keepdims=False)
    >>> var, mean
    (tensor([1., 4.]), tensor([2., 4.]))
    >>> value, index = tritonml.reduce_with(tritonml.reductions.max_with_index, x, axes=0)
    >>> value, index
    (tensor([[2., 4., 6.]]), tensor([[1, 1, 1]]))
"""
from .records.ready_reductions import (aminmax, max_with_index, min_with_index, nanmean, nansum,
                                       welford, welford_biased, welford_m2)

__all__ = ["welford", "welford_biased", "welford_m2", "max_with_index", "min_with_index",
           "aminmax", "nansum", "nanmean"]
