"""Moved to ``tritonml.bench.memtrace`` (the installed package, so ``tritonml bench`` finds it from any
directory); this name stays for the tests and scripts that import ``benchmarks.memtrace``."""
import sys

from tritonml.bench import memtrace as _moved

sys.modules[__name__] = _moved
