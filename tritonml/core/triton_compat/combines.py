"""Triton's own sum and product combine functions (tritonml/kernels/combine.py: ``add``, ``mul``).

Triton's interpreter recognizes its standard sum and product combines by identity and runs scans
and reductions with them through numpy (``np.cumsum``, ``np.sum``); its own path for any other
combine function is one Python call per element (``scan_reduce.scan_along`` avoids that). Reusing
Triton's objects keeps CPU runs fastest and changes nothing on the GPU. Checked: 3.8.0, 3.9.0 (both
``triton/language/standard.py``; the identity tests are in ``triton/runtime/interpreter.py``).
"""
from __future__ import annotations

from .registry import private

sum_combine = private("triton.language.standard._sum_combine")
prod_combine = private("triton.language.standard._prod_combine")
