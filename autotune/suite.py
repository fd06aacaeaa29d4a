"""The benchmark suite's problems, as data: what ``tritonml tune`` tunes by default and what the
shipped tables cover.

They mirror ``benchmarks/cases.py`` (the interpreter's shapes) and ``benchmarks/gpu_timing.py``
(the GPU shapes); tests/autotune/test_autotune_select.py checks that they stay the same. Kept here because
``benchmarks/`` is not installed with the package.
"""
from __future__ import annotations

from dataclasses import dataclass

DTYPES = ("float32", "float16", "int32")


@dataclass(frozen=True)
class Item:
    op: str              # "cumulative_sum", "cumulative_product" or a ReduceFunction name
    shape: tuple
    axes: tuple | None   # scans: (axis,); reductions: the reduced axes, None for all
    dtypes: tuple = DTYPES

    @property
    def label(self) -> str:
        axes = "all" if self.axes is None else "+".join(map(str, self.axes))
        return f"{self.op} {'x'.join(map(str, self.shape))}:{axes}"


_SCANS = (((128, 2048), 1), ((1024, 256), 0), ((1, 2 ** 18), 1),          # interpreter shapes
          ((16384, 4096), 1), ((4096, 16384), 0), ((1, 2 ** 26), 1))      # GPU shapes
_REDUCE_SUMS = (((64, 4096), (1,)), ((4096, 64), (0,)), ((2 ** 18,), None),
                ((16384, 4096), (1,)), ((4096, 16384), (0,)), ((2 ** 28,), None))
_FLOAT32_ONLY = (("ARGMAX", (64, 4096), (1,)), ("ARGMAX", (16384, 4096), (1,)),
                 ("SUM", (64, 64, 64), (0, 2)), ("SUM", (256, 256, 256), (0, 2)))

ITEMS = (tuple(Item("cumulative_sum", shape, (axis,)) for shape, axis in _SCANS)
         + tuple(Item("SUM", shape, axes) for shape, axes in _REDUCE_SUMS)
         + tuple(Item(op, shape, axes, ("float32",)) for op, shape, axes in _FLOAT32_ONLY))
