import os
import sys

# tests import their helpers (scan_oracle, gpu_compile_cases, ...) as top-level modules
sys.path.insert(0, os.path.dirname(__file__))

import tritonml  # noqa: E402,F401  (chooses interpreted/compiled Triton before anything imports triton)
