"""The operator vocabulary: what every layer above the kernels reads about an operator, one record
per operator, so that no layer asks "which function is this?" by name.

Reductions:

- ``ReduceFunction`` (reduce_function.py): DirectML's DML_REDUCE_FUNCTION enum;
- ``Reduction`` (reduction.py): a reduction as the reduce kernels run it, the kind of object a
  user writes for ``tritonml.reduce_with``;
- ``ReduceRecord``, ``RECORDS``, ``record_of`` (builtin_reductions.py): the twelve DirectML
  functions, each a ``Reduction`` with the facts the built-in operator needs beyond it
  (derivative rule, index output, ``initial``, distributed fold, torch's twin);
- ready_reductions.py: ready-made ``Reduction``s (Welford's mean and variance, value-and-index,
  NaN-ignoring sums), public as ``tritonml.reductions``.

Scans:

- ``ScanCombine``, ``StateScan``, ``Scans``, ``scan_record`` (scan_combine.py): a scan of one
  tensor under a scalar combine, of a tuple state, and what a scan record's derivatives run;
- builtin_scans.py: the built-in scans (``SUM``, ``PRODUCT``, ``LINEAR_RECURRENCE``, ``CUMMAX``,
  ``CUMMIN``, ``LOGCUMSUMEXP``) with their gradients and forward-mode derivatives;
- state_combine.py: the two forms of a combine the scan kernels take, generated from the one a
  user writes.

The records sit below the launchers and above the kernels: they import the kernels' ``@triton.jit``
combines, never a launcher or a torch op (docs/architecture.md, "Which layer imports which"); a
derivative that needs a differentiable reduce or scan is given one by its caller.
"""
from .builtin_reductions import (RECORDS, Fold, ReduceRecord, accumulated, compared,
                                 max_and_exp_sum, record_of)
from .builtin_scans import CUMMAX, CUMMIN, LINEAR_RECURRENCE, LOGCUMSUMEXP, PRODUCT, SUM
from .reduce_function import ReduceFunction
from .reduction import Reduction
from .scan_combine import ScanCombine, Scans, StateScan, scan_record

__all__ = ["ReduceFunction", "Reduction", "ReduceRecord", "Fold", "RECORDS", "record_of",
           "accumulated", "compared", "max_and_exp_sum",
           "ScanCombine", "StateScan", "Scans", "scan_record",
           "SUM", "PRODUCT", "LINEAR_RECURRENCE", "CUMMAX", "CUMMIN", "LOGCUMSUMEXP"]
