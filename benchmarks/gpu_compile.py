"""Moved to ``tritonml.bench.gpu_compile`` (the installed package, so ``tritonml bench`` finds it from
any directory); this name stays for the tests and scripts that import ``benchmarks.gpu_compile``,
and ``python -m benchmarks.gpu_compile`` still runs the compile worker."""
import sys

from tritonml.bench import gpu_compile as _moved

if __name__ == "__main__":
    _moved.main()
else:
    sys.modules[__name__] = _moved
