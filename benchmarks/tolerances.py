"""Moved to ``tritonml.bench.tolerances`` (the installed package, so ``tritonml bench`` finds it from any
directory); this name stays for the tests and scripts that import ``benchmarks.tolerances``."""
import sys

from tritonml.bench import tolerances as _moved

sys.modules[__name__] = _moved
