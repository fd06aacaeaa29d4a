import os
import sys

# tests import their helpers (scan_oracle, gpu_compile_cases, ...) as top-level modules, and the
# repository's benchmarks/ folder (not an installed package: benchmarks.tolerances, the one accuracy
# table, benchmarks.gpu_compile, ...) as ``benchmarks``, however pytest was started.
_TESTS = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_TESTS, os.path.dirname(_TESTS)]

import tritonml  # noqa: E402,F401  (chooses interpreted/compiled Triton before anything imports triton)
